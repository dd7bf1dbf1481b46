"""Clifford data regression (tql.mixed.cdr_expval) against zero-noise extrapolation and PEC.

n qubits, RY encoding + ``--layers`` hardware-efficient layers (random angles, seed n; the
circuits of benchmarks/zne.py and benchmarks/pec.py), depolarizing noise (p = ``--p``) after
every CNOT on both wires, observable Σ_w Z_w Z_{w+1} / (n − 1). Reported: the distance from the
noiseless value of the noisy value, of Richardson ZNE (scales 1, 3, 5, global folding), of exact
PEC, and of CDR with each of ``--training`` training circuits (linear fit, the default quarter
of the non-Clifford rotations kept; mean and largest |error| over ``--seeds`` generator seeds);
ms of one noisy density expectation and of each method, with the multiple of the noisy run.

    python benchmarks/cdr.py [--sizes 4,6,8] [--layers 2] [--p 0.01] [--training 16,64] [--seeds 5] [--threads T]
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
    ap.add_argument("--training", default="16,64", help="numbers of CDR training circuits")
    ap.add_argument("--seeds", type=int, default=5, help="CDR generator seeds per size (errors averaged)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    trainings = [int(s) for s in args.training.split(",")]
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        c, x, noise, H = setup(n, args.layers, args.p)
        with torch.no_grad():
            ideal = float(tql.expval(c, H, x=x)[0])
            noisy = float(mixed.expval(c, H, x=x, noise_model=noise)[0])
            zne = float(mixed.zne_expval(c, H, x=x, noise_model=noise, scale_factors=[1, 3, 5])[0])
            pec = float(mixed.pec_expval(c, H, noise_model=noise, x=x)[0])
            cdr = {}
            for T in trainings:
                errs = [abs(float(mixed.cdr_expval(c, H, noise, n_training=T, x=x,
                                                   generator=torch.Generator().manual_seed(100 * n + s))[0]) - ideal)
                        for s in range(args.seeds)]
                cdr[T] = (sum(errs) / len(errs), max(errs))
            train = mixed.near_clifford_circuits(c, 1, x=x)
            n_rot = len(train.positions)
            t_noisy = timeit(lambda: mixed.expval(c, H, x=x, noise_model=noise), repeats=3, min_time=0.2)
            t_zne = timeit(lambda: mixed.zne_expval(c, H, x=x, noise_model=noise, scale_factors=[1, 3, 5]),
                           repeats=3, min_time=0.2)
            t_pec = timeit(lambda: mixed.pec_expval(c, H, noise_model=noise, x=x), repeats=3, min_time=0.2)
            t_cdr = {}
            for T in trainings:
                g = torch.Generator().manual_seed(0)
                t_cdr[T] = timeit(lambda: mixed.cdr_expval(c, H, noise, n_training=T, x=x, generator=g),
                                  repeats=3, min_time=0.2)

        def ms(t):
            return f"{t * 1e3:.1f} ({t / t_noisy:.1f}×)"
        row = [n, len(c.ops), n_rot, f"{abs(noisy - ideal):.2e}", f"{abs(zne - ideal):.2e}",
               f"{abs(pec - ideal):.1e}"]
        row += [f"{cdr[T][0]:.2e} (max {cdr[T][1]:.1e})" for T in trainings]
        row += [f"{t_noisy * 1e3:.1f}", ms(t_zne), ms(t_pec)] + [ms(t_cdr[T]) for T in trainings]
        rows.append(row)
    print(f"{today()}, {machine()}; p = {args.p} after every CNOT (both wires), {args.layers} layers, "
          f"CDR over {args.seeds} seeds")
    print(table(rows, ["n", "gates", "non-Clifford rotations", "|noisy − ideal|", "|ZNE − ideal| (1,3,5)",
                       "|PEC exact − ideal|"] + [f"|CDR {T} − ideal| mean" for T in trainings]
                + ["noisy ms", "ZNE ms (× noisy)", "PEC exact ms (× noisy)"]
                + [f"CDR {T} ms (× noisy)" for T in trainings]))


if __name__ == "__main__":
    main()
