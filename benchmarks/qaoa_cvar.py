"""CVaR objective of QAOA: value + gradient of ``QAOA.cvar`` against ``QAOA.expected_cost``.

    python benchmarks/qaoa_cvar.py [--sizes 12,16,20] [--p 3] [--starts 8] [--alpha 0.1]
                                   [--rounds 3] [--threads T]

For each n: MaxCut on a random 3-regular graph (seed 1), ``--starts`` starts of a perturbed linear
ramp, complex64, the default adjoint route (half register: MaxCut is bit-flip symmetric):

* ``expected_cost`` and ``cvar(alpha)``: one forward + backward of the sum over starts (the CVaR
  seeds the adjoint sweep with its per-state gradient, the expectation with the cost diagonal);
* ``cvar math``: :func:`cvar_from_probabilities` alone (gather in cost order, float64 cumulative
  sum, clip, one backward pass) on the (starts, 2^(n-1)) half-register probabilities, with the
  cost order already cached (the one sort per model is reported apart, ``sort once``).

Times are medians of ``--rounds`` rounds, each timed between two clones of the (starts, 2^n)
complex64 state (benchmarks/common.py ``paired``), and given in those clones. The script prints
its table; it writes no file.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torchquantum_layers import optimization as opt  # noqa: E402
from torchquantum_layers.optimization.cvar import cost_order, cvar_from_probabilities  # noqa: E402

from common import add_runtime_flags, machine, paired, set_threads, table, today  # noqa: E402


def value_and_grad(fn, angles):
    def step():
        a = angles.clone().requires_grad_(True)
        fn(a).sum().backward()
        return a.grad
    return step


def math_only(probabilities, order, alpha):
    def step():
        q = probabilities.clone().requires_grad_(True)
        cvar_from_probabilities(q, order, alpha, multiplicity=2).sum().backward()
        return q.grad
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="12,16,20")
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--rounds", type=int, default=3)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    p, S, alpha = args.p, args.starts, args.alpha
    load0 = os.getloadavg()[0]
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        gen = torch.Generator().manual_seed(0)
        model = opt.qaoa(opt.maxcut(opt.random_regular_graph(3, n, seed=1)), p)
        angles = opt.perturb(opt.linear_ramp(p, 0.6), S, 0.05, generator=gen).float()
        state = torch.randn(S, 2 ** n, dtype=torch.complex64, generator=gen)
        t0 = time.perf_counter()
        order = cost_order(model.problem.diagonal[: 2 ** (n - 1)])
        t_sort = time.perf_counter() - t0
        model.cvar(angles, alpha)                       # the model's own cached order
        half_probs = model.probabilities(angles)[:, : 2 ** (n - 1)].contiguous()
        r_exp, t_exp, tc = paired(value_and_grad(model.expected_cost, angles), state, args.rounds)
        r_cvar, t_cvar, _ = paired(value_and_grad(lambda a: model.cvar(a, alpha), angles), state, args.rounds)
        r_math, t_math, _ = paired(math_only(half_probs, order, alpha), state, args.rounds)
        rows.append([n, f"{tc * 1e3:.3f}", f"{t_exp * 1e3:.1f} ({r_exp:.1f})", f"{t_cvar * 1e3:.1f} ({r_cvar:.1f})",
                     f"{t_cvar / t_exp:.2f}", f"{t_math * 1e3:.1f} ({r_math:.1f})", f"{t_sort * 1e3:.0f}"])
        print(f"  n={n}: done (load average now {os.getloadavg()[0]:.1f})", flush=True)
    load1 = os.getloadavg()[0]
    print()
    print(f"### {today()} — {machine()}")
    print(f"MaxCut, random 3-regular graph (seed 1), p = {p}, {S} starts, complex64, adjoint (half register), "
          f"alpha = {alpha}; load average {load0:.1f} → {load1:.1f}. ms per forward + backward, "
          f"(in clones of the ({S}, 2^n) complex64 state).")
    print()
    print(table(rows, ["n", "clone ms", "expected_cost", "cvar", "cvar / expected", "cvar math only",
                       "sort once ms"]))


if __name__ == "__main__":
    main()
