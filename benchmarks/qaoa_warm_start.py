"""Goemans–Williamson and warm-start QAOA vs standard QAOA on random 3-regular MaxCut.

    python benchmarks/qaoa_warm_start.py [--ns 10 12 14 16] [--graphs 3] [--ps 1 2 3] [--starts 8]
                                         [--steps 100] [--epsilon 0.25] [--rounds 1024] [--threads T]

For each n and graph seed 0 … graphs-1 (``random_regular_graph(3, n, seed)``, unit weights; max cut
by brute force, ``exact_solution``):

* Goemans–Williamson (``goemans_williamson``, seeded by the graph seed): the SDP value, the best
  and the mean of ``rounds`` rounded cuts, all / max cut, and its wall time;
* standard QAOA (X mixer from |+⟩^n) and warm-start QAOA (Egger et al. 2021: ``mixer="warm"``
  from GW's best cut, regularised by ``epsilon``), p = each of ``ps``: ``starts`` linear-ramp starts
  (the first exact, the others perturbed by 0.1), trained as one batch by Adam (lr 0.05, ``steps``
  steps); reported for the start with the lowest expected cost: ⟨cut⟩ / max cut and the
  probability of sampling a maximum cut. Wall time per training run. The "p = 0" rows are the
  start distributions: uniform, and the warm-start product distribution.

Prints two tables (means over the graphs). complex64, CPU.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torchquantum_layers import optimization as opt  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, set_threads, table, today  # noqa: E402

LR = 0.05
NOISE = 0.1


def train(model, p: int, starts: int, steps: int, seed: int):
    """Best start after Adam: (⟨cut⟩ / max cut, P(max cut), seconds)."""
    t0 = time.perf_counter()
    angles0 = opt.perturb(opt.linear_ramp(p), starts, NOISE, torch.Generator().manual_seed(seed))
    angles, costs = opt.optimize(model, angles0, steps=steps, lr=LR)
    best = int(torch.argmin(costs))
    res = model.analyse(angles[best:best + 1], k=1)
    wall = time.perf_counter() - t0
    return float(res.approximation_ratio.reshape(-1)[0]), float(res.optimum_probability.reshape(-1)[0]), wall


def start_distribution(model):
    """p = 0: the start state itself (β = γ = 0 at p = 1)."""
    res = model.analyse(torch.zeros(1, 2), k=1)
    return float(res.approximation_ratio.reshape(-1)[0]), float(res.optimum_probability.reshape(-1)[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 12, 14, 16])
    ap.add_argument("--graphs", type=int, default=3)
    ap.add_argument("--ps", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100, help="Adam steps per QAOA training run")
    ap.add_argument("--epsilon", type=float, default=0.25, help="warm-start regularisation ε")
    ap.add_argument("--rounds", type=int, default=1024, help="GW random hyperplanes")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    load0 = os.getloadavg()[0]
    # warm-up: first calls pay for lazy imports and allocator set-up, not for the algorithms
    warm = opt.maxcut(opt.random_regular_graph(3, 6, seed=0))
    opt.goemans_williamson(warm, generator=torch.Generator().manual_seed(0))
    train(opt.qaoa(warm, 1), 1, 2, 3, 0)
    train(opt.warm_start_qaoa(warm, 1, warm_start="010101"), 1, 2, 3, 0)
    gw_rows, q_rows = [], []
    mean = statistics.mean
    for n in args.ns:
        gw = {k: [] for k in ("sdp", "best", "mean", "exact", "s")}
        runs = {}                     # (method, p) -> list of (ratio, popt, s)
        for seed in range(args.graphs):
            problem = opt.maxcut(opt.random_regular_graph(3, n, seed=seed))
            max_cut = opt.exact_solution(problem).objective
            t0 = time.perf_counter()
            res = opt.goemans_williamson(problem, rounds=args.rounds, generator=torch.Generator().manual_seed(seed))
            gw["s"].append(time.perf_counter() - t0)
            gw["sdp"].append(res.sdp_value / max_cut)
            gw["best"].append(res.cut / max_cut)
            gw["mean"].append(res.mean_cut / max_cut)
            gw["exact"].append(res.cut == max_cut)
            line = [f"n={n} graph {seed}: GW SDP {gw['sdp'][-1]:.4f} best {gw['best'][-1]:.4f} "
                    f"mean {gw['mean'][-1]:.4f}"]
            for method in ("QAOA", "WS-QAOA"):
                def build(p):
                    if method == "QAOA":
                        return opt.qaoa(problem, p)
                    return opt.qaoa(problem, p, mixer="warm", warm_start=res, epsilon=args.epsilon)
                ratio, popt = start_distribution(build(1))
                runs.setdefault((method, 0), []).append((ratio, popt, 0.0))
                for p in args.ps:
                    out = train(build(p), p, args.starts, args.steps, seed)
                    runs.setdefault((method, p), []).append(out)
                    line.append(f"{method} p={p} {out[0]:.4f} P(opt) {out[1]:.3f} ({out[2]:.1f} s)")
            print("  " + "; ".join(line), flush=True)
        gw_rows.append([n, args.graphs, f"{mean(gw['sdp']):.4f}", f"{mean(gw['best']):.4f}",
                        f"{sum(gw['exact'])}/{args.graphs}", f"{mean(gw['mean']):.4f}", f"{mean(gw['s']) * 1e3:.0f}"])
        for p in [0] + list(args.ps):
            std, ws = runs[("QAOA", p)], runs[("WS-QAOA", p)]
            q_rows.append([n, p,
                           f"{mean(r[0] for r in std):.4f}", f"{mean(r[1] for r in std):.3f}",
                           f"{mean(r[2] for r in std):.2f}" if p else "–",
                           f"{mean(r[0] for r in ws):.4f}", f"{min(r[0] for r in ws):.4f}",
                           f"{mean(r[1] for r in ws):.3f}", f"{mean(r[2] for r in ws):.2f}" if p else "–"])
    load1 = os.getloadavg()[0]
    print()
    print(f"### {today()} — {machine()}")
    print(f"Random 3-regular MaxCut (unit weights, graph seeds 0 … {args.graphs - 1}); ratios are to the brute-force "
          f"max cut, means over the graphs. GW: rank ceil(sqrt(2n)) + 1, 4 restarts, {args.rounds} hyperplanes. "
          f"QAOA: {args.starts} linear-ramp starts per batch, Adam lr {LR}, {args.steps} steps, the best start; "
          f"WS-QAOA warm started from GW's best cut, ε = {args.epsilon}; p = 0 is the start distribution. "
          f"complex64, torch threads {torch.get_num_threads()}, load average {load0:.1f} → {load1:.1f}.")
    print()
    print(table(gw_rows, ["n", "graphs", "GW SDP / max cut", "GW best rounded", "GW best = max cut",
                          "GW mean rounded", "GW ms"]))
    print()
    print(table(q_rows, ["n", "p", "QAOA <cut> ratio", "QAOA P(max cut)", "QAOA s", "WS-QAOA <cut> ratio",
                         "WS-QAOA min ratio", "WS-QAOA P(max cut)", "WS-QAOA s"]))


if __name__ == "__main__":
    main()
