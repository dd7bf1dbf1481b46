"""Hamiltonian evolution benchmark: Trotter–Suzuki circuits of a Heisenberg chain.

H = Σ_w (X_w X_{w+1} + Y_w Y_{w+1} + Δ Z_w Z_{w+1}) + h Σ_w X_w on an open chain, evolved by
``tql.templates.trotter`` (order 2, ``--steps`` steps, a trainable time); reported per n: the
rotation count, ms of a forward pass and of a value + gradient of ⟨Σ Z_w⟩ (backprop), for the
CPU engine's local programs and for the fused-block engine, and the forward over a
``torch.clone`` of the state in the same rounds.

    python benchmarks/evolution.py [--quick] [--steps 10] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import (add_runtime_flags, forward_and_step, machine, programs_engine, set_threads,  # noqa: E402
                    table, today)


def heisenberg(n, delta=0.5, field=0.3):
    terms = []
    for w in range(n - 1):
        terms += [(1.0, f"X{w} X{w + 1}"), (1.0, f"Y{w} Y{w + 1}"), (delta, f"Z{w} Z{w + 1}")]
    terms += [(field, f"X{w}") for w in range(n)]
    return tql.Hamiltonian(terms)


def measure(n, steps, rounds, programs):
    with programs_engine(programs):
        c = tql.templates.trotter(tql.Circuit(n), heisenberg(n), time=1.0, n_steps=steps, order=2, trainable=True)
        obs = tql.Hamiltonian([(1.0, f"Z{w}") for w in range(n)])

        def forward():
            with torch.no_grad():
                c()

        def gradient():
            c.zero_grad()
            tql.expval(c, obs).sum().backward()
        return (len(c.ops),) + forward_and_step(forward, gradient, tql.zero_state(n), rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 8 only, fewer rounds")
    ap.add_argument("--steps", type=int, default=10)
    add_runtime_flags(ap)
    args = ap.parse_args()
    set_threads(args)
    sizes = [8] if args.quick else [8, 12, 16]
    rounds = 3 if args.quick else 5
    print(f"{today()}, {machine()}, order 2, {args.steps} steps")
    rows = []
    for n in sizes:
        row = [n]
        for programs in (True, False):
            ops, t_fwd, ratio, t_grad = measure(n, args.steps, rounds, programs)
            if programs:
                row.append(ops)
            row += [f"{t_fwd * 1e3:.2f}", f"{ratio:.0f}", f"{t_grad * 1e3:.2f}"]
        rows.append(row)
    print(table(rows, ["n", "gates", "programs fwd ms", "/ clone", "value+grad ms",
                       "blocks fwd ms", "/ clone", "value+grad ms"]))


if __name__ == "__main__":
    main()
