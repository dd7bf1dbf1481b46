"""Derived feature columns of Qiskit feature maps: the feature module's cost against the circuit's.

    python benchmarks/qiskit_features.py [--qubits 8] [--reps 2] [--batch 64] [--threads T]

``zz_feature_map(n, reps)`` composed with ``real_amplitudes(n, reps)`` is read by
``Circuit.from_qiskit(..., return_feature_map=True)`` (ZZFeatureMap's pair angles 2(π − x_i)(π − x_j)
become derived columns). For each dtype: the feature module's forward and forward + backward, the
circuit's forward, and ⟨Z0⟩ with its gradient through the circuit only; medians of ``common.timeit``.
The script prints a Markdown section; it writes no file.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, machine, set_threads, table, timeit, today  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qubits", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    from qiskit.circuit.library import real_amplitudes, zz_feature_map
    fmap = zz_feature_map(args.qubits, reps=args.reps)
    ansatz = real_amplitudes(args.qubits, reps=args.reps)
    qc = fmap.compose(ansatz)
    rows = []
    for dtype, real in ((torch.complex64, torch.float32), (torch.complex128, torch.float64)):
        start = time.perf_counter()
        c, features = tql.Circuit.from_qiskit(qc, inputs=fmap.parameters, trainable=ansatz.parameters,
                                              return_feature_map=True, dtype=dtype)
        read = time.perf_counter() - start
        x = torch.rand(args.batch, args.qubits, dtype=real)
        derived = features(x)
        xg = x.clone().requires_grad_()

        def features_step():
            features(xg).sum().backward()

        def circuit_step():
            tql.expval(c, "Z0", x=derived.detach().requires_grad_()).sum().backward()
        t_map, t_circ = timeit(lambda: features(x)), timeit(lambda: c(derived))
        t_map_b, t_circ_b = timeit(features_step), timeit(circuit_step)
        rows.append([str(dtype).replace("torch.", ""), derived.shape[1] - args.qubits, len(c.ops), f"{read:.2f}",
                     f"{t_map * 1e3:.2f}", f"{t_circ * 1e3:.2f}", f"{t_map_b * 1e3:.2f}", f"{t_circ_b * 1e3:.2f}",
                     f"{(t_map + t_map_b) / (t_circ + t_circ_b):.1%}"])
    print(f"### {today()}, {machine()}, zz_feature_map({args.qubits}, reps={args.reps}) + "
          f"real_amplitudes, batch {args.batch}\n")
    print(table(rows, ["dtype", "derived columns", "ops", "read (s)", "map fwd (ms)", "circuit fwd (ms)",
                       "map fwd+bwd (ms)", "⟨Z0⟩ fwd+bwd (ms)", "map / circuit"]))


if __name__ == "__main__":
    main()
