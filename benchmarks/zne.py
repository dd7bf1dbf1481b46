"""Zero-noise extrapolation (tql.mixed.zne_expval) on noisy hardware-efficient circuits.

n qubits, RY encoding + ``--layers`` hardware-efficient layers (random angles, seed n),
depolarizing noise (p = ``--p``) after every CNOT on both wires and readout-free, observable
Σ_w Z_w Z_{w+1} / (n − 1). Reported: the noiseless value's distance from the noisy one and from
each extrapolation (Richardson at scales 1, 3, 5; linear at 1, 2, 3; exponential at 1, 3 toward
the maximally mixed value), with global folding on density matrices; ms of one noisy density
expectation and of the Richardson ZNE (three folded runs), and the same ZNE on trajectories
(``--trajectories`` per scale) with its error.

    python benchmarks/zne.py [--sizes 4,6,8] [--layers 2] [--p 0.01] [--trajectories 2000] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import mixed  # noqa: E402

from common import machine, noisy_hea_case as setup, table, timeit, today  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4,6,8")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--p", type=float, default=0.01)
    ap.add_argument("--trajectories", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        c, x, noise, H = setup(n, args.layers, args.p)
        ideal = float(tql.expval(c, H, x=x)[0])
        noisy = float(mixed.expval(c, H, x=x, noise_model=noise)[0])
        err = {}
        for name, kw in [("richardson", dict(scale_factors=[1, 3, 5])),
                         ("linear", dict(scale_factors=[1, 2, 3], extrapolation="linear")),
                         ("exponential", dict(scale_factors=[1, 3], extrapolation="exponential"))]:
            err[name] = abs(float(mixed.zne_expval(c, H, x=x, noise_model=noise, **kw)[0]) - ideal)
        with torch.no_grad():
            t_noisy = timeit(lambda: mixed.expval(c, H, x=x, noise_model=noise), repeats=3, min_time=0.2)
            t_zne = timeit(lambda: mixed.zne_expval(c, H, x=x, noise_model=noise), repeats=3, min_time=0.2)
            g = torch.Generator().manual_seed(0)
            t_traj = timeit(lambda: mixed.zne_expval(c, H, x=x, noise_model=noise, simulator="trajectories",
                                                     n_trajectories=args.trajectories, generator=g),
                            repeats=3, min_time=0.2)
            traj = float(mixed.zne_expval(c, H, x=x, noise_model=noise, simulator="trajectories",
                                          n_trajectories=args.trajectories,
                                          generator=torch.Generator().manual_seed(1))[0])
        rows.append([n, len(c.ops), f"{abs(noisy - ideal):.2e}", f"{err['richardson']:.2e}", f"{err['linear']:.2e}",
                     f"{err['exponential']:.2e}", f"{t_noisy * 1e3:.1f}", f"{t_zne * 1e3:.1f}",
                     f"{abs(traj - ideal):.2e}", f"{t_traj * 1e3:.0f}"])
    print(f"{today()}, {machine()}; p = {args.p} after every CNOT, {args.layers} layers, "
          f"{args.trajectories} trajectories per scale")
    print(table(rows, ["n", "gates", "|noisy − ideal|", "Richardson 1,3,5", "linear 1,2,3", "exponential 1,3",
                       "noisy ρ ms", "ZNE ρ ms", "ZNE trajectories error", "ZNE trajectories ms"]))


if __name__ == "__main__":
    main()
