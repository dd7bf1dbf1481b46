"""Noisy QAOA (tql.optimization.noisy.NoisyQAOA): error of the reported cost and its price.

MaxCut on seeded random 3-regular graphs of n nodes, p = 2, ``--starts`` starts around the linear
ramp (seed n) in one batch of density matrices, depolarizing noise (p = ``--p``) after every RZZ
on both wires. Reported: the distance of the noisy expected cost from the noiseless one (the exact
state-vector engine) and of the ZNE-mitigated one (global folding at 1, 3, 5, Richardson), the
largest over the starts; ms of one forward + backward (the gradient of the summed costs with
respect to the angles) of the noisy cost and of the ZNE cost, each also as a multiple of one
``torch.clone`` of the ``(S, 2**n, 2**n)`` density batch (timed in turn with it, robust to a
drifting machine load).

    python benchmarks/qaoa_noisy.py [--sizes 4,6,8] [--p 0.01] [--starts 8] [--dtype complex64] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import mixed, optimization as opt  # noqa: E402
from torchquantum_layers.optimization.noisy import NoisyQAOA  # noqa: E402

from common import add_runtime_flags, machine, paired, set_threads, table, today  # noqa: E402

DTYPES = {"complex64": torch.complex64, "complex128": torch.complex128}


def forward_backward(module, angles):
    def run():
        x = angles.detach().requires_grad_(True)
        torch.autograd.grad(module(x).sum(), x)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,6,8")
    ap.add_argument("--p", type=float, default=0.01)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="complex64")
    add_runtime_flags(ap)
    args = ap.parse_args()
    set_threads(args)
    dtype = DTYPES[args.dtype]
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        problem = opt.maxcut(opt.random_regular_graph(3, n, seed=n))
        angles = opt.perturb(opt.linear_ramp(args.layers), args.starts, 0.1,
                             torch.Generator().manual_seed(n)).to(real)
        noise = tql.NoiseModel().add(mixed.depolarizing(args.p), gates="RZZ")
        noisy = NoisyQAOA(problem, args.layers, noise, dtype=dtype)
        zne = NoisyQAOA(problem, args.layers, noise, mitigation="zne", zne_scale_factors=[1, 3, 5], dtype=dtype)
        with torch.no_grad():
            ideal = opt.qaoa(problem, args.layers, dtype=torch.complex128)(angles.double())
            err_noisy = float((noisy(angles).double() - ideal).abs().max())
            err_zne = float((zne(angles).double() - ideal).abs().max())
        N = 2 ** n
        batch = torch.zeros(args.starts, N, N, dtype=dtype)
        r_noisy, t_noisy, _ = paired(forward_backward(noisy, angles), batch, args.rounds, min_time=0.1)
        r_zne, t_zne, _ = paired(forward_backward(zne, angles), batch, args.rounds, min_time=0.1)
        rows.append([n, len(noisy.circuit.ops), f"{err_noisy:.2e}", f"{err_zne:.2e}", f"{err_noisy / err_zne:.0f}x",
                     f"{t_noisy * 1e3:.2f}", f"{r_noisy:.0f}", f"{t_zne * 1e3:.2f}", f"{r_zne:.0f}"])
    print(f"{today()}, {machine()}; MaxCut on random 3-regular graphs, p = {args.layers}, {args.starts} starts, "
          f"depolarizing {args.p} after every RZZ, {args.dtype}")
    print(table(rows, ["n", "gates", "|noisy − ideal|", "|ZNE − ideal|", "error cut", "noisy fwd+bwd ms",
                       "/ clone", "ZNE fwd+bwd ms", "/ clone"]))


if __name__ == "__main__":
    main()
