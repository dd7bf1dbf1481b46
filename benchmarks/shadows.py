"""Classical shadows (tql.shadows): collecting snapshots and estimating from them.

For a random n-qubit state (batch 1, complex64) and T snapshots: ms to collect them (all rows at
once: copies of the state rotated four wires per pass by tabulated per-row 16 x 16 products,
then one sample each) and as a ratio to a ``torch.clone`` of the T copies in the same run (the
memory it must at least write); as the baseline a per-snapshot loop gives (as libraries that run
one circuit per snapshot do), a Python loop of one-wire rotations and one sample per snapshot,
as the same ratio, and the speed-up. Then
ms to estimate a Hamiltonian (every 1- and 2-local ZZ / XX / YY / Z / X term with random
coefficients), the largest error of the estimate against the exact value in units of the
shadow bound Σ|c| 3^{k/2} / √T, and ms for the purity of 3 wires.

    python benchmarks/shadows.py [--sizes 8,12,16] [--snapshots 4000] [--threads T]
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import functional as F  # noqa: E402

from common import clone_time, machine, table, timeit, today  # noqa: E402


def hamiltonian(n, g):
    terms = []
    for a in range(n):
        terms += [(float(torch.randn((), generator=g)), f"Z{a}"), (float(torch.randn((), generator=g)), f"X{a}")]
        for b in range(a + 1, n):
            for p in "XYZ":
                terms.append((float(torch.randn((), generator=g)) / n, f"{p}{a} {p}{b}"))
    return tql.Hamiltonian(terms)


def looped_snapshot(psi, n, g):
    basis = torch.randint(0, 3, (n,), generator=g).tolist()
    for w, b in enumerate(basis):
        if b == 0:
            psi = F.h(psi, wires=w)
        elif b == 1:
            psi = F.h(F.sdg(psi, wires=w), wires=w)
    return tql.measure.sample(psi, 1, generator=g)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,12,16")
    ap.add_argument("--snapshots", type=int, default=4000)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    T = args.snapshots
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        g = torch.Generator().manual_seed(n)
        psi = tql.random_state(n, batch=1, generator=g)
        H = hamiltonian(n, g)
        clone = clone_time(psi.expand(T, -1).contiguous())
        collect = timeit(lambda: tql.shadows.collect(psi, T, generator=g), repeats=3, min_time=0.2)
        looped = timeit(lambda: looped_snapshot(psi, n, g), repeats=3, min_time=0.2)
        sh = tql.shadows.collect(psi, T, generator=g)
        estimate = timeit(lambda: sh.expval(H), repeats=3, min_time=0.2)
        purity = timeit(lambda: sh.purity([0, 1, 2]), repeats=3, min_time=0.2)
        bound = sum(abs(c) * 3 ** (p.weight / 2) for c, p in H.terms if p.weight) / math.sqrt(T)
        error = abs(float(sh.expval(H)[0]) - float(tql.expval(psi.to(torch.complex128), H)[0])) / bound
        rows.append([n, T, len(H), f"{collect * 1e3:.0f}", f"{collect / clone:.1f}",
                     f"{looped * T / clone:.0f}", f"{looped * T / collect:.0f}×", f"{estimate * 1e3:.0f}",
                     f"{error:.2f}", f"{purity * 1e3:.1f}"])
    print(f"{today()}, {machine()}")
    print(table(rows, ["n", "T", "terms", "collect ms", "collect / clone", "looped / clone",
                       "speed-up", "expval ms", "error / bound", "purity(3 wires) ms"]))


if __name__ == "__main__":
    main()
