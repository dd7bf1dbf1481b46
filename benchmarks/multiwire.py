"""Gates on three or more wires (issue 2's "no gate permutes all n axes"): dense QubitUnitary on
scattered and contiguous wires, DoubleExcitation (a Givens rotation on two of 16 levels) and a
controlled two-wire gate, as ratios to ``torch.clone`` of the same state.

    python benchmarks/multiwire.py [--n 20,22] [--dtypes c64,c128] [--threads 1] [--keep-freed-memory]
                                   [--backward]

``--gram``: the matrix gradient of those gates alone (levels.c's gram, full and diagonal-only).

``--backward``: forward + backward of each gate under autograd (state and angle or matrix
requiring gradients, a random upstream gradient), through the one-pass kernels
(kernels/recorded.py) and, in the same run, through torch's ops (the path before them).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import gates as G  # noqa: E402
from torchquantum_layers.kernels import native, recorded  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, paired, rows_table, set_threads, today  # noqa: E402

DT = {"c64": torch.complex64, "c128": torch.complex128}
CRXX = G.controlled(G.RXX, 1)


def cases(n):
    """(label, gate, wires, data) per column: scattered wires with the last one, far apart above the
    register, and contiguous ones."""
    return [
        ("QU3 scattered", G.QUBIT_UNITARY, (0, n // 2, n - 1)),
        ("QU3 far", G.QUBIT_UNITARY, (2, 5, 9)),
        ("QU3 contiguous", G.QUBIT_UNITARY, (5, 6, 7)),
        ("QU4 scattered", G.QUBIT_UNITARY, (0, 5, 10, n - 1)),
        ("QU5 scattered", G.QUBIT_UNITARY, (0, 4, 8, 12, n - 1)),
        ("DoubleExc scattered", G.DOUBLE_EXCITATION, (0, 5, 10, n - 1)),
        ("DoubleExc last 4", G.DOUBLE_EXCITATION, (n - 4, n - 3, n - 2, n - 1)),
        ("DoubleExc 4..7", G.DOUBLE_EXCITATION, (4, 5, 6, 7)),
        ("CRXX (0, n/2, n-1)", CRXX, (0, n // 2, n - 1)),
        ("CRXX (n-1, 0, 1)", CRXX, (n - 1, 0, 1)),
    ]


def _operands(gate, wires, dtype, real, gen, grad):
    data, params = None, (torch.tensor(0.3, dtype=real, requires_grad=grad),)
    if gate is G.QUBIT_UNITARY:
        q, _ = torch.linalg.qr(torch.randn(2 ** len(wires), 2 ** len(wires), dtype=torch.complex128, generator=gen))
        data, params = q.to(dtype).requires_grad_(grad), ()
    return data, params


def bench_backward(n, dtype, rounds):
    """forward + backward per case, one-pass kernels and torch's ops, as clones."""
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    state = tql.random_state(n, 1, dtype=dtype).requires_grad_(True)
    upstream = tql.random_state(n, 1, dtype=dtype)
    gen = torch.Generator().manual_seed(n)
    row = {"n": n, "dtype": str(dtype).replace("torch.", "")}
    small = [("RY n/2", G.RY, (n // 2,)), ("RXX (0, n-1)", G.RXX, (0, n - 1)), ("CRY (0, n-1)", G.CRY, (0, n - 1)),
             ("RZ n/2", G.RZ, (n // 2,)), ("RZZ (0, n-1)", G.RZZ, (0, n - 1)), ("CP (3, n-3)", G.CP, (3, n - 3))]
    for label, gate, wires in small + cases(n):
        data, params = _operands(gate, wires, dtype, real, gen, True)

        def step():
            out = gate.apply(state, params, wires, n, data=data)
            leaves = (state,) + params + ((data,) if data is not None else ())
            return torch.autograd.grad(out, leaves, upstream)
        fast = paired(step, state.detach(), rounds)[0]
        saved = recorded.available
        recorded.available = lambda s, k: False
        try:
            slow = paired(step, state.detach(), rounds)[0]
        finally:
            recorded.available = saved
        row[label] = f"{fast:.1f} ({slow:.1f})"
    return row


def bench_gram(n, dtype, rounds):
    """The matrix gradient of the recorded gates alone (levels.c's gram over a state and an
    upstream gradient: two reads, no write), full and diagonal-only, as clones."""
    state = tql.random_state(n, 1, dtype=dtype)
    grad = tql.random_state(n, 1, dtype=dtype)
    row = {"n": n, "dtype": str(dtype).replace("torch.", "")}
    for name, wires in [("n-1", (n - 1,)), ("7", (7,)), ("(0, n-1)", (0, n - 1)), ("(n-2, n-1)", (n - 2, n - 1)),
                        ("(3, 11)", (3, 11)), ("(0, 9, n-1)", (0, 9, n - 1))]:
        for diagonal in (True, False):
            if diagonal and len(wires) > recorded.MAX_DIAGONAL_WIRES:
                continue
            label = f"{'diag' if diagonal else 'full'} {name}"
            fn = lambda: native.gram_levels(state, grad, wires, n, diagonal_only=diagonal)  # noqa: E731
            row[label] = f"{paired(fn, state, rounds)[0]:.2f}"
    return row


def bench(n, dtype, rounds):
    state = tql.random_state(n, 1, dtype=dtype)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    theta = torch.tensor(0.3, dtype=real)
    gen = torch.Generator().manual_seed(n)
    row = {"n": n, "dtype": str(dtype).replace("torch.", "")}
    for label, gate, wires in cases(n):
        data, params = None, ()
        if gate is G.QUBIT_UNITARY:
            q, _ = torch.linalg.qr(torch.randn(2 ** len(wires), 2 ** len(wires), dtype=torch.complex128, generator=gen))
            data = q.to(dtype)
        else:
            params = (theta,)
        row[label] = f"{paired(lambda: gate.apply(state, params, wires, n, data=data), state, rounds)[0]:.2f}"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="20,22")
    ap.add_argument("--dtypes", default="c64,c128")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved clone/operation rounds (median)")
    ap.add_argument("--backward", action="store_true", help="forward + backward under autograd instead")
    ap.add_argument("--gram", action="store_true", help="the recorded gates' matrix gradient (levels.c) alone")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    kept = keep_memory_if_asked(args)
    run = bench_backward if args.backward else bench_gram if args.gram else bench
    rows = [run(int(n), DT[d], args.rounds) for n in args.n.split(",") for d in args.dtypes.split(",")]
    what = "forward + backward of multi-wire gates: one-pass kernels (torch's ops)" if args.backward \
        else "the gram of the recorded gates, full and diagonal-only" if args.gram else "multi-wire gates"
    print(f"# {what}, {today()}, {machine()}" + (", keep_freed_memory() applied" if kept else ""))
    print("ratios are time / time of torch.clone of the same state, median of interleaved rounds (lower is better)")
    print(rows_table(rows))


if __name__ == "__main__":
    main()
