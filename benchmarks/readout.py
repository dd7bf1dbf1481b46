"""Readout benchmark: what a hybrid model measures at the end of a circuit, as ratios to a clone.

    python benchmarks/readout.py [--cases 10x256,12x256,20x1,22x1] [--dtypes c64,c128] [--rounds 5]
                                 [--threads T] [--keep-freed-memory]

Per case (n qubits × batch B): ``measure.expval_z`` on every wire, ``expectation`` of the list
``[Z_0, …, Z_{n−1}]`` (what ``QuantumLayer(measure="Z")`` asks for), ``measure.probabilities``
of all wires and of two, ``measure.reduced_density_matrix`` of wires (0, n/2) (the real part's sum
for the backward), each alone and as forward + backward; and ``measure.sample`` of 1000 shots (``.sum().backward()`` through a
state that requires grad). Ratios are medians of rounds that time clone, operation, clone in turn.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import measure  # noqa: E402
from torchquantum_layers.observables import PauliString, expectation  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, paired, set_threads, table, today  # noqa: E402

DT = {"c64": torch.complex64, "c128": torch.complex128}


def bench(n, batch, dtype, rounds):
    state = tql.random_state(n, batch, generator=torch.Generator().manual_seed(0), dtype=dtype)
    leaf = state.clone().requires_grad_()
    z_list = [PauliString(f"Z{w}") for w in range(n)]
    ops = {
        "expval_z": lambda s: measure.expval_z(s),
        "expectation([Z_w])": lambda s: expectation(s, z_list),
        "probabilities": lambda s: measure.probabilities(s),
        "probabilities (0, 1)": lambda s: measure.probabilities(s, (0, 1)),
        "reduced_density_matrix (0, n/2)": lambda s: measure.reduced_density_matrix(s, (0, n // 2)),
    }
    row = {"n": n, "B": batch, "dtype": str(dtype).replace("torch.", "")}
    for name, op in ops.items():
        with torch.no_grad():
            ratio, _, tc = paired(lambda op=op: op(state), state, rounds)

        def step(op=op):
            leaf.grad = None
            op(leaf).real.sum().backward()
        row["clone ms"] = f"{tc * 1e3:.3f}"
        row[name] = f"{ratio:.2f}"
        row[name + " fwd+bwd"] = f"{paired(step, state, rounds)[0]:.2f}"
    with torch.no_grad():
        row["sample 1000 shots"] = f"{paired(lambda: measure.sample(state, 1000), state, rounds)[0]:.2f}"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="10x256,12x256,20x1,22x1", help="n x batch, comma separated")
    ap.add_argument("--dtypes", default="c64,c128")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved clone/operation rounds (median)")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    kept = keep_memory_if_asked(args)
    rows = []
    for case in args.cases.split(","):
        n, b = (int(v) for v in case.split("x"))
        for d in args.dtypes.split(","):
            rows.append(bench(n, b, DT[d], args.rounds))
            print(f"done {case} {d}", file=sys.stderr, flush=True)
    print(f"# readout benchmark, {today()}, {machine()}" + (", keep_freed_memory() applied" if kept else ""))
    print("ratios are time / time of torch.clone of the state (median of interleaved rounds); "
          "fwd+bwd: the readout's .sum().backward() through a leaf state")
    headers = list(rows[0].keys())
    print(table([[r[h] for h in headers] for r in rows], headers))


if __name__ == "__main__":
    main()
