"""Algorithm templates (tql.templates.qpe, amplitude_amplification): circuit time against the size.

(a) QPE of a fixed t-wire circuit U (RY on every wire + a CNOT chain, two layers) with m estimation
    wires, complex64, batch 1, from |0…0⟩: U given as a Circuit (controlled gate by gate, repeated
    2^p times: (2^m − 1) copies of its gates) and as its matrix (``U^(2^p)`` by squaring, one
    controlled QubitUnitary per estimation wire). Build time, gate count, forward ms and forward as
    a multiple of a ``torch.clone`` of the (1, 2^(m+t)) state, timed in the same run.
(b) Grover search on n wires, one marked string, the optimal floor(π/(4 asin √(1/N))) iterations:
    build ms, gates, forward ms, / clone, and the success probability against sin²((2k+1)θ).

    python benchmarks/algorithms.py [--m 4,6,8] [--targets 4] [--grover 8,10,12] [--threads 1]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import templates as T  # noqa: E402

from common import add_runtime_flags, clone_time, machine, set_threads, table, timeit, today  # noqa: E402


def target_unitary(t: int) -> tql.Circuit:
    u = tql.Circuit(t)
    for layer in range(2):
        for w in range(t):
            u.ry(w, 0.3 + 0.1 * w + 0.2 * layer)
        for w in range(t - 1):
            u.cnot(w, w + 1)
    return u


def _timed_build(fn):
    start = time.perf_counter()
    c = fn()
    return c, (time.perf_counter() - start) * 1e3


def qpe_rows(ms, t):
    u = target_unitary(t)
    dense = u.double().unitary().detach()
    u = target_unitary(t)
    rows = []
    for m in ms:
        n = m + t
        clone = clone_time(torch.zeros(1, 2 ** n, dtype=torch.complex64))
        for kind, unitary in (("circuit", u), ("matrix", dense)):
            c, build = _timed_build(lambda: T.qpe(n, unitary, range(m, n), range(m)))
            with torch.no_grad():
                fwd = timeit(lambda: c())
            rows.append([m, t, kind, f"{build:.1f}", len(c), f"{fwd * 1e3:.3f}", f"{fwd / clone:.0f}"])
    return rows


def grover_rows(sizes):
    rows = []
    for n in sizes:
        marked = [(2 ** n) // 3]
        c, build = _timed_build(lambda: T.amplitude_amplification(n, marked, range(n)))
        k = T.grover_iterations(1, 2 ** n)
        clone = clone_time(torch.zeros(1, 2 ** n, dtype=torch.complex64))
        with torch.no_grad():
            fwd = timeit(lambda: c())
            p = float(c()[0, marked[0]].abs() ** 2)
        want = math.sin((2 * k + 1) * math.asin(math.sqrt(1 / 2 ** n))) ** 2
        rows.append([n, k, f"{build:.1f}", len(c), f"{fwd * 1e3:.3f}", f"{fwd / clone:.0f}", f"{p:.6f}",
                     f"{abs(p - want):.1e}"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", default="4,6,8", help="estimation wires (comma separated)")
    ap.add_argument("--targets", type=int, default=4, help="target wires of U")
    ap.add_argument("--grover", default="8,10,12", help="Grover register sizes (comma separated)")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    ms = [int(s) for s in args.m.split(",")]
    print(f"# algorithm templates, {today()}, {machine()}, complex64, batch 1")
    print(f"\n(a) QPE of a {args.targets}-wire circuit (2 layers of RY + CNOT chain)\n")
    print(table(qpe_rows(ms, args.targets),
                ["m", "t", "U given as", "build ms", "gates", "forward ms", "/ clone"]))
    print("\n(b) Grover search, one marked string, optimal iterations\n")
    print(table(grover_rows([int(s) for s in args.grover.split(",")]),
                ["n", "iterations", "build ms", "gates", "forward ms", "/ clone", "P(marked)",
                 "|P − sin²((2k+1)θ)|"]))


if __name__ == "__main__":
    main()
