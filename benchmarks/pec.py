"""Probabilistic error cancellation (tql.mixed.pec_expval) against zero-noise extrapolation.

n qubits, RY encoding + ``--layers`` hardware-efficient layers (random angles, seed n; the
circuits of benchmarks/zne.py), depolarizing noise (p = ``--p``) after every CNOT on both wires,
observable Σ_w Z_w Z_{w+1} / (n − 1). Reported: the distance from the noiseless value of the
noisy value, of Richardson ZNE (scales 1, 3, 5, global folding), of exact PEC (each channel
followed by its inverse map) and of sampled PEC (``--samples`` Monte-Carlo samples on density
matrices, and as many on trajectories: one trajectory per sample; each with its standard error);
γ_total (``pec_overhead``); and ms of one noisy density expectation and of each method, with the
multiple of the noisy run.

    python benchmarks/pec.py [--sizes 4,6,8] [--layers 2] [--p 0.01] [--samples 1000] [--threads T]
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,6,8")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--p", type=float, default=0.01)
    ap.add_argument("--samples", type=int, default=1000, help="Monte-Carlo samples of sampled PEC")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        c, x, noise, H = setup(n, args.layers, args.p)
        with torch.no_grad():
            ideal = float(tql.expval(c, H, x=x)[0])
            noisy = float(mixed.expval(c, H, x=x, noise_model=noise)[0])
            zne = float(mixed.zne_expval(c, H, x=x, noise_model=noise, scale_factors=[1, 3, 5])[0])
            exact = float(mixed.pec_expval(c, H, noise_model=noise, x=x)[0])
            mean, std = mixed.pec_expval(c, H, noise_model=noise, x=x, n_samples=args.samples,
                                         generator=torch.Generator().manual_seed(n), return_std=True)
            tmean, tstd = mixed.pec_expval(c, H, noise_model=noise, x=x, n_samples=args.samples,
                                           generator=torch.Generator().manual_seed(n), simulator="trajectories",
                                           return_std=True)
            gamma = mixed.pec_overhead(c, noise)
            locations = sum(2 for op in c.ops if op.gate.name == "CNOT")
            t_noisy = timeit(lambda: mixed.expval(c, H, x=x, noise_model=noise), repeats=3, min_time=0.2)
            t_zne = timeit(lambda: mixed.zne_expval(c, H, x=x, noise_model=noise, scale_factors=[1, 3, 5]),
                           repeats=3, min_time=0.2)
            t_exact = timeit(lambda: mixed.pec_expval(c, H, noise_model=noise, x=x), repeats=3, min_time=0.2)
            g = torch.Generator().manual_seed(0)
            t_sampled = timeit(lambda: mixed.pec_expval(c, H, noise_model=noise, x=x, n_samples=args.samples,
                                                        generator=g), repeats=3, min_time=0.2)
            t_traj = timeit(lambda: mixed.pec_expval(c, H, noise_model=noise, x=x, n_samples=args.samples,
                                                     generator=g, simulator="trajectories"), repeats=3, min_time=0.2)
        mean, std, tmean, tstd = float(mean[0]), float(std[0]), float(tmean[0]), float(tstd[0])

        def ms(t):
            return f"{t * 1e3:.1f} ({t / t_noisy:.1f}×)"
        rows.append([n, len(c.ops), locations, f"{gamma:.3f}", f"{abs(noisy - ideal):.2e}", f"{abs(zne - ideal):.2e}",
                     f"{abs(exact - ideal):.1e}", f"{abs(mean - ideal):.2e} ± {std:.1e}", f"{t_noisy * 1e3:.1f}",
                     ms(t_zne), ms(t_exact), ms(t_sampled), f"{abs(tmean - ideal):.2e} ± {tstd:.1e}", ms(t_traj)])
    print(f"{today()}, {machine()}; p = {args.p} after every CNOT (both wires), {args.layers} layers, "
          f"{args.samples} PEC samples")
    print(table(rows, ["n", "gates", "noise locations", "γ_total", "|noisy − ideal|", "|ZNE − ideal| (1,3,5)",
                       "|PEC exact − ideal|", "|PEC sampled − ideal| ± s.e.", "noisy ms",
                       "ZNE ms (× noisy)", "PEC exact ms (× noisy)", "PEC sampled ms (× noisy)",
                       "|PEC sampled, trajectories − ideal| ± s.e.", "PEC trajectories ms (× noisy)"]))


if __name__ == "__main__":
    main()
