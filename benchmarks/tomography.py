"""State tomography (tql.tomography): collecting Pauli-basis counts and reconstructing from them.

For n qubits (batch 1, complex128), ``shots`` per basis in all 3^n Pauli bases: ms to collect
the counts of a state vector and of a density matrix (the outcome distributions of all bases in
n batched passes, then one seeded sampling of every (state, basis) row), ms to reconstruct by
each method (lstsq: linear inversion; projected: its closest density matrix; mle: ``--iterations``
of R ρ R), and the infidelity 1 − F of each estimate for a Haar-random pure state and for a noisy
one, ρ = (1 − p) |ψ⟩⟨ψ| + p I / 2^n (p = ``--noise``), as tql.qinfo.fidelity computes it. Linear
inversion is not positive, so its ``1 − ⟨ψ|ρ̂|ψ⟩`` may be negative and its fidelity to a mixed
state is not defined: for the noisy state the trace distance of every estimate is given too.

    python benchmarks/tomography.py [--sizes 2,3,4,5,6] [--shots 1000] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import tomography  # noqa: E402

from common import machine, table, timeit, today  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2,3,4,5,6", help="numbers of qubits, comma-separated (at most 8)")
    ap.add_argument("--shots", type=int, default=1000, help="shots per Pauli basis")
    ap.add_argument("--iterations", type=int, default=300, help="R rho R iterations of the mle method")
    ap.add_argument("--noise", type=float, default=0.1, help="weight p of I/2^n in the noisy state")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.complex128
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        g = torch.Generator().manual_seed(args.seed + n)
        psi = tql.qinfo.haar_state(n, batch=1, generator=g, dtype=dtype)
        pure = psi[:, :, None] * psi.conj()[:, None, :]
        noisy = (1 - args.noise) * pure + args.noise * torch.eye(2 ** n, dtype=dtype) / 2 ** n
        t_vec = timeit(lambda: tomography.collect(psi, args.shots, generator=g), repeats=3, min_time=0.1)
        t_rho = timeit(lambda: tomography.collect(noisy, args.shots, generator=g), repeats=3, min_time=0.1)
        # the estimates from their own seeds (the timings above draw from g as often as they run)
        rec_pure = tomography.collect(psi, args.shots, generator=torch.Generator().manual_seed(args.seed + 100 + n))
        rec_noisy = tomography.collect(noisy, args.shots, generator=torch.Generator().manual_seed(args.seed + 200 + n))
        times, inf_pure, inf_noisy, dist_noisy = [], [], [], []
        for method in tomography.METHODS:
            kw = {"iterations": args.iterations} if method == "mle" else {}
            times.append(timeit(lambda: tomography.reconstruct(rec_pure, method, **kw), repeats=3, min_time=0.1))
            est_pure = tomography.reconstruct(rec_pure, method, **kw)
            est_noisy = tomography.reconstruct(rec_noisy, method, **kw)
            inf_pure.append(1 - float(tql.qinfo.fidelity(psi, est_pure)[0]))
            if method != "lstsq":
                inf_noisy.append(1 - float(tql.qinfo.fidelity(noisy, est_noisy)[0]))
            dist_noisy.append(float(tql.qinfo.trace_distance(noisy, est_noisy)[0]))
        rows.append([n, 3 ** n, f"{t_vec * 1e3:.2f}", f"{t_rho * 1e3:.2f}",
                     *(f"{t * 1e3:.2f}" for t in times),
                     " / ".join(f"{v:.4f}" for v in inf_pure), " / ".join(f"{v:.4f}" for v in inf_noisy),
                     " / ".join(f"{v:.3f}" for v in dist_noisy)])
    print(f"{today()}, {machine()}, complex128, batch 1, {args.shots} shots per basis, mle {args.iterations} "
          f"iterations, noisy state p = {args.noise}")
    print(table(rows, ["n", "bases", "collect ψ ms", "collect ρ ms", "lstsq ms", "projected ms", "mle ms",
                       "1−F pure (lstsq / proj / mle)", "1−F noisy (proj / mle)",
                       "trace dist. noisy (lstsq / proj / mle)"]))


if __name__ == "__main__":
    main()
