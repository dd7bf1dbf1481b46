"""Quantum-kernel Gram matrices (tql.qml): the fidelity kernel against the projected kernel.

For N random samples of n features encoded on n qubits (complex64; RY(x_i) on every wire, a CNOT
ring, RZ(x_i) on every wire: an entangled encoding, so the one-qubit reduced states are mixed),
the time of the training Gram matrix ``K(X, X)`` as scikit-learn gets it (``kernel.gram(X)``:
encoding included, a float64 NumPy array out), in ms and per matrix entry in µs:

* fidelity: ``|⟨φ(x)|φ(x')⟩|²``, one complex GEMM of the two batches of states: O(N² 2^n);
* projected, ``features="rdm"``: the n one-qubit RDMs per sample (one batched pass per wire),
  then ``exp(−γ D)`` of the pairwise squared distances in matmul form: O(N n 2^n + N² n);
* projected, ``features="pauli"``: the 3n Pauli expectations per sample instead of the RDMs.

    python benchmarks/qml_kernels.py [--sizes 4,8,12] [--samples 200,1000] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.qml import FidelityKernel  # noqa: E402
from torchquantum_layers.qml.projected import ProjectedKernel  # noqa: E402

from common import machine, table, timeit, today  # noqa: E402


def encoder(n: int, device) -> tql.Circuit:
    c = tql.Circuit(n)
    for w in range(n):
        c.ry(w, input=w)
    for w in range(n):
        c.cnot(w, (w + 1) % n)
    for w in range(n):
        c.rz(w, input=w)
    return c.to(device)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,8,12")
    ap.add_argument("--samples", default="200,1000")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        enc = encoder(n, args.device)
        kernels = {"fidelity": FidelityKernel(enc), "projected rdm": ProjectedKernel(enc, gamma=0.5),
                   "projected pauli": ProjectedKernel(enc, gamma=0.5, features="pauli")}
        for N in [int(s) for s in args.samples.split(",")]:
            X = torch.rand(N, n, generator=torch.Generator().manual_seed(N + n)) * 3.0
            row = [n, N]
            for kernel in kernels.values():
                t = timeit(lambda: kernel.gram(X), args.device, repeats=3, min_time=0.1)
                row += [f"{t * 1e3:.1f}", f"{t / N ** 2 * 1e6:.3f}"]
            rows.append(row)
    print(f"{today()}, {machine()}, device {args.device}")
    headers = ["n", "N"]
    for name in kernels:
        headers += [f"{name} ms", f"{name} µs/entry"]
    print(table(rows, headers))


if __name__ == "__main__":
    main()
