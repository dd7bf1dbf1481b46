"""tql.mps: time per layer of a brickwork RY + CNOT circuit on the MPS simulator, by width and
``max_bond``, with the state-vector engine alongside at n = 20, as ratios to ``torch.clone`` of a
comparable tensor (the final MPS's site tensors; the state vector).

    python benchmarks/mps.py [--sizes 20,50,100] [--bonds 16,64] [--layers 12] [--threads 1]
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, set_threads, table, timeit, today  # noqa: E402

STATE_VECTOR_MAX = 24


def brickwork(n, layers, seed=0):
    g = torch.Generator().manual_seed(seed)
    c = tql.Circuit(n)
    for layer in range(layers):
        for w in range(n):
            c.ry(w, float(torch.rand((), generator=g)) * 2 * math.pi)
        for w in range(layer % 2, n - 1, 2):
            c.cnot(w, w + 1)
    return c


def rows_for(n, bonds, layers, repeats):
    c = brickwork(n, layers)
    rows = []
    for bond in bonds:
        state = tql.mps.run(c, max_bond=bond)
        t = timeit(lambda: tql.mps.run(c, max_bond=bond), repeats=repeats, min_time=0.0)
        sites = torch.cat([s.reshape(-1) for s in state.sites])
        clone = timeit(lambda: sites.clone(), repeats=repeats)
        rows.append([n, f"mps χ≤{bond}", layers, f"{t / layers * 1e3:.2f}", state.max_bond_dim,
                     f"{float(state.discarded.max()):.1e}", f"{t / clone:.0f}"])
    if n <= STATE_VECTOR_MAX:
        with torch.no_grad():
            t = timeit(lambda: c(), repeats=repeats, min_time=0.0)
            psi = c()
        clone = timeit(lambda: psi.clone(), repeats=repeats)
        rows.append([n, "state vector", layers, f"{t / layers * 1e3:.2f}", "-", "0", f"{t / clone:.0f}"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,50,100")
    ap.add_argument("--bonds", default="16,64")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    bonds = [int(b) for b in args.bonds.split(",")]
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows += rows_for(n, bonds, args.layers, args.repeats)
    print(f"# tql.mps brickwork RY+CNOT, complex64, batch 1 — {today()}, {machine()}\n")
    print(table(rows, ["n", "engine", "layers", "ms / layer", "max χ reached", "discarded", "× clone"]))


if __name__ == "__main__":
    main()
