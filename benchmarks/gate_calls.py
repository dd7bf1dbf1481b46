"""Cost of one gate call on small states (issue 2): the native kernels against torch's, in µs.

    python benchmarks/gate_calls.py [--threads 1] [--dtypes c64,c128] [--batches 1,16,256]

At 2^2-2^12 amplitudes a gate's time is its call: checks, matrix, dispatch. Each cell is the
best of interleaved rounds timing the library as it runs (the native kernels) and with them
switched off in the same process (torch's einsum, GEMM, gather and broadcast paths); a
``torch.clone`` of the state gives the scale (at these sizes it is mostly its own call).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import gates as G  # noqa: E402
from torchquantum_layers.kernels import native  # noqa: E402

from common import add_runtime_flags, machine, rows_table, set_threads, today  # noqa: E402

DT = {"c64": torch.complex64, "c128": torch.complex128}


def best_of(fn, rounds=7, reps=200):
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def calls(n, B, dtype):
    state = tql.random_state(n, B, dtype=dtype)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    theta, per = torch.tensor(0.3, dtype=real), torch.rand(B, dtype=real)
    ops = {"RY": lambda: G.RY.apply(state, (theta,), (n // 2,), n),
           "RY per sample": lambda: G.RY.apply(state, (per,), (n - 1,), n),
           "CNOT": lambda: G.CNOT.apply(state, (), (0, n - 1), n),
           "CRX": lambda: G.CRX.apply(state, (theta,), (0, n - 1), n),
           "RZZ": lambda: G.RZZ.apply(state, (theta,), (0, n - 1), n),
           "RXX": lambda: G.RXX.apply(state, (theta,), (0, n - 1), n)}
    if n >= 3:
        ops["TOFFOLI"] = lambda: G.TOFFOLI.apply(state, (), (0, 1, n - 1), n)
    clone = best_of(lambda: state.clone())
    row = {"n": n, "B": B, "dtype": str(dtype).replace("torch.", ""), "clone µs": f"{clone * 1e6:.1f}"}
    usable = native._usable
    for name, fn in ops.items():
        fast = best_of(fn)
        native._usable = lambda *a: False
        try:
            slow = best_of(fn)
        finally:
            native._usable = usable
        row[f"{name} µs native / torch"] = f"{fast * 1e6:.0f} / {slow * 1e6:.0f}"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmin", type=int, default=2)
    ap.add_argument("--nmax", type=int, default=12)
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--batches", default="1,16,256")
    ap.add_argument("--dtypes", default="c64")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    if native.library() is None:
        sys.exit(f"the native library is not in use: {native.status()}")
    rows = []
    for B in (int(b) for b in args.batches.split(",")):
        for n in range(args.nmin, args.nmax + 1, args.step):
            if B * 2 ** n > 2 ** 16:
                continue
            for d in args.dtypes.split(","):
                rows.append(calls(n, B, DT[d]))
    print(f"# gate calls on small states, {today()}, {machine()}")
    print("µs per call, best of 7 rounds; native = as the library runs, torch = the native kernels off")
    print(rows_table(rows))


if __name__ == "__main__":
    main()
