"""Entangler benchmark: value + gradient of a layered circuit per two-qubit entangler.

Each circuit: RY angle encoding, then L layers of trainable RY on every wire followed by a chain
of one entangler (CNOT, CZ, CRX, RZZ, RXX, RYY or RZX; the parametrised ones trainable) on
(w, w+1); the loss is the sum of ⟨Z_w⟩. Reported per (n, B): ms per value + gradient for
backprop and adjoint, and that time over a ``torch.clone`` of the (B, 2**n) state in the same
rounds (the machine is shared; the ratio is what compares between runs).

    python benchmarks/entanglers.py [--quick] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, machine, paired, set_threads, synced, table, today  # noqa: E402

ENTANGLERS = ("cnot", "cz", "crx", "rzz", "rxx", "ryy", "rzx")
PARAMETRISED = {"crx", "rzz", "rxx", "ryy", "rzx"}


def model(n, layers, entangler, device):
    c = tql.Circuit(n)
    for w in range(n):
        c.ry(w, input=w)
    add = getattr(c, entangler)
    for _ in range(layers):
        for w in range(n):
            c.ry(w, trainable=True)
        for w in range(n - 1):
            if entangler in PARAMETRISED:
                add(w, w + 1, trainable=True)
            else:
                add(w, w + 1)
    return c.to(device)


def measure(n, batch, layers, entangler, method, device, rounds):
    c = model(n, layers, entangler, device)
    x = torch.rand(batch, n, device=device)
    obs = [tql.PauliString(f"Z{w}") for w in range(n)]

    def step():
        c.zero_grad()
        tql.expval(c, obs, x=x, diff_method=method).sum().backward()
    state = tql.zero_state(n, batch, device=device)
    ratio, t, _ = paired(synced(step, device), state, rounds, min_time=0.1)
    return t, ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one size, fewer rounds")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add_runtime_flags(ap)
    args = ap.parse_args()
    set_threads(args)
    sizes = [(10, 64)] if args.quick else [(10, 64), (14, 16), (18, 1)]
    rounds = 3 if args.quick else 5
    layers = 3
    print(f"{today()}, {machine()}, device {args.device}, L = {layers}")
    for n, batch in sizes:
        rows = []
        for entangler in ENTANGLERS:
            row = [entangler.upper()]
            for method in ("backprop", "adjoint"):
                t, ratio = measure(n, batch, layers, entangler, method, args.device, rounds)
                row += [f"{t * 1e3:.2f}", f"{ratio:.0f}"]
            rows.append(row)
        print(f"\nn = {n}, B = {batch}")
        print(table(rows, ["entangler", "backprop ms", "/ clone", "adjoint ms", "/ clone"]))


if __name__ == "__main__":
    main()
