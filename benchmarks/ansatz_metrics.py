"""Expressibility, entangling capability and parameter dimension of the library's templates.

For each template on ``--wires`` qubits (default 4) with 1–3 layers (``--layers``): the
expressibility D_KL(P_F || P_Haar) of Sim et al. (2019) from ``--pairs`` random parameter pairs
over 75 bins (lower: closer to Haar; the column ``bias`` is the estimator's finite-sample floor
(K − 1)/(2·pairs), K the occupied bins), the entangling capability (mean Meyer–Wallach Q over
``--ent-samples`` parameter vectors, ± its standard error), the parameter dimension (QFI rank at
2 random points; the pure states of n qubits have 2^(n+1) − 2 real dimensions) and the wall time
of the three. Templates: hardware_efficient real (RY, CNOT chain, final RY layer) and complex
(U3), strongly_entangling, basic_entangler (RX, CNOT ring), an RX·RY·RZ + CNOT-ring
hardware-efficient ansatz, and a QCNN (su4 blocks; "layers" = convolution layers per level).
All samples of one template run as one batch (complex128, seeded).

    python benchmarks/ansatz_metrics.py [--wires 4] [--layers 1,2,3] [--pairs 5000] [--ent-samples 2000] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.research import ansatz_metrics as M  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, set_threads, table, today  # noqa: E402

T = tql.templates
TEMPLATES = {
    "HEA real (RY, CNOT chain)": lambda c, L: T.hardware_efficient(c, L, kind="real"),
    "HEA complex (U3, CNOT chain)": lambda c, L: T.hardware_efficient(c, L, kind="complex"),
    "strongly entangling": lambda c, L: T.strongly_entangling(c, L),
    "basic entangler (RX, ring)": lambda c, L: T.basic_entangler(c, L),
    "RX RY RZ + CNOT ring": lambda c, L: T.hardware_efficient(c, L, kind="complex", rotations=("RX", "RY", "RZ"),
                                                             pattern="ring", final_rotations=False),
    "QCNN (su4, n_conv = layers)": lambda c, L: T.qcnn(c, n_conv=L),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wires", type=int, default=4)
    ap.add_argument("--layers", default="1,2,3")
    ap.add_argument("--pairs", type=int, default=5000, help="parameter pairs for the expressibility")
    ap.add_argument("--ent-samples", type=int, default=2000, help="parameter vectors for the Meyer–Wallach mean")
    ap.add_argument("--seed", type=int, default=0)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    n = args.wires
    rows = []
    for name, build in TEMPLATES.items():
        for L in [int(s) for s in args.layers.split(",")]:
            c = build(tql.Circuit(n, dtype=torch.complex128), L)
            t0 = time.perf_counter()
            e = M.expressibility(c, args.pairs, generator=args.seed)
            t1 = time.perf_counter()
            q = M.entangling_capability(c, args.ent_samples, generator=args.seed + 1)
            t2 = time.perf_counter()
            d = M.parameter_dimension(c, 2, generator=args.seed + 2)
            t3 = time.perf_counter()
            rows.append([name, L, c.num_parameters, f"{e.kl:.4f}", f"{e.bias:.4f}", f"{q.mean:.3f} ± {q.stderr:.3f}",
                         f"{d.dimension}/{d.max_dimension}", f"{t1 - t0:.2f}", f"{t2 - t1:.2f}", f"{t3 - t2:.2f}"])
    idle = (2 ** n - 1) * __import__("math").log(75)
    print(f"{today()}, {machine()}, {n} qubits, {args.pairs} pairs, 75 bins, {args.ent_samples} MW samples, "
          f"complex128 (idle circuit: D_KL = {idle:.1f}; Haar states: mean Q = {(2 ** n - 2) / (2 ** n + 1):.3f})")
    print(table(rows, ["template", "layers", "P", "Expr D_KL", "bias", "Ent. cap. Q", "param. dim",
                       "expr s", "ent s", "dim s"]))


if __name__ == "__main__":
    main()
