"""Recursive QAOA vs plain QAOA on random 3-regular MaxCut: approximation ratio and wall time.

    python benchmarks/rqaoa.py [--ns 10 12 14 16] [--graphs 4] [--p 1] [--starts 8] [--steps 100]
                               [--cutoff 4] [--threads T]

For each n and graph seed 0 … graphs-1 (``random_regular_graph(3, n, seed)``, unit weights):

* RQAOA (``rqaoa(problem, p, n_cutoff, n_starts, steps)``): n - cutoff rounds of ``steps`` Adam
  steps each; its ratio is cut(returned bitstring) / max cut;
* plain QAOA, same p and starts, trained (one batch, Adam) for the SAME TOTAL number of steps
  (rounds × steps) from the same linear-ramp starts: the ratio of its best expected cut ⟨cut⟩ / max
  cut, the ratio of its most probable bitstring, and the probability of a maximum cut.

Max cuts come from brute force (``exact_solution``). Prints a table (means over the graphs; "exact"
counts the graphs where RQAOA returned a maximum cut). complex64, CPU.
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
from torchquantum_layers.optimization.rqaoa import START_NOISE, rqaoa  # noqa: E402

from common import machine, table, today  # noqa: E402


def plain_qaoa(problem, p: int, starts: int, steps: int, seed: int):
    """Best start of a multi-start QAOA: (⟨cut⟩ ratio, most-probable-bitstring ratio, P(max cut), s)."""
    t0 = time.perf_counter()
    model = opt.qaoa(problem, p)
    gen = torch.Generator().manual_seed(seed)
    angles0 = opt.perturb(opt.linear_ramp(p), starts, START_NOISE, gen)
    angles, costs = opt.optimize(model, angles0, steps=steps)
    best = int(torch.argmin(costs))
    res = model.analyse(angles[best:best + 1], k=1)
    wall = time.perf_counter() - t0
    exact = opt.exact_solution(problem)
    top = int(res.top_indices.reshape(-1)[0])
    top_ratio = float(problem.objective(top)) / exact.objective
    return (float(res.approximation_ratio.reshape(-1)[0]), top_ratio,
            float(res.optimum_probability.reshape(-1)[0]), wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", type=int, nargs="+", default=[10, 12, 14, 16])
    ap.add_argument("--graphs", type=int, default=4)
    ap.add_argument("--p", type=int, default=1)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100, help="Adam steps per RQAOA round")
    ap.add_argument("--cutoff", type=int, default=4, help="RQAOA brute-forces at most this many spins")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load0 = os.getloadavg()[0]
    # warm-up: first calls pay for lazy imports and allocator set-up, not for the algorithm
    warm = opt.maxcut(opt.random_regular_graph(3, 6, seed=0))
    rqaoa(warm, p=args.p, n_cutoff=4, n_starts=args.starts, steps=5)
    plain_qaoa(warm, args.p, args.starts, 5, 0)
    rows = []
    for n in args.ns:
        r_ratio, r_wall, q_ratio, q_top, q_popt, q_wall, exact_count = [], [], [], [], [], [], 0
        for seed in range(args.graphs):
            problem = opt.maxcut(opt.random_regular_graph(3, n, seed=seed))
            best_cut = opt.exact_solution(problem).objective
            t0 = time.perf_counter()
            res = rqaoa(problem, p=args.p, n_cutoff=args.cutoff, n_starts=args.starts, steps=args.steps, seed=seed)
            r_wall.append(time.perf_counter() - t0)
            r_ratio.append(res.objective / best_cut)
            exact_count += res.objective == best_cut
            total_steps = res.n_rounds * args.steps
            ratio, top, popt, wall = plain_qaoa(problem, args.p, args.starts, total_steps, seed)
            q_ratio.append(ratio)
            q_top.append(top)
            q_popt.append(popt)
            q_wall.append(wall)
            print(f"  n={n} graph {seed}: RQAOA {r_ratio[-1]:.4f} ({r_wall[-1]:.1f} s); QAOA <cut> {ratio:.4f}, "
                  f"top {top:.4f}, P(opt) {popt:.3f} ({wall:.1f} s, {total_steps} steps)", flush=True)
        mean = statistics.mean
        rows.append([n, args.graphs, f"{mean(r_ratio):.4f}", f"{min(r_ratio):.4f}", f"{exact_count}/{args.graphs}",
                     f"{mean(r_wall):.2f}", f"{n - args.cutoff} × {args.steps}", f"{mean(q_ratio):.4f}",
                     f"{mean(q_top):.4f}", f"{mean(q_popt):.3f}", f"{mean(q_wall):.2f}"])
    load1 = os.getloadavg()[0]
    headers = ["n", "graphs", "RQAOA ratio", "RQAOA min", "RQAOA exact", "RQAOA s", "steps (rounds × per round)",
               "QAOA <cut> ratio", "QAOA top-bitstring ratio", "QAOA P(max cut)", "QAOA s"]
    print()
    print(f"### {today()} — {machine()}")
    print(f"Random 3-regular MaxCut (unit weights, graph seeds 0 … {args.graphs - 1}), p = {args.p}, "
          f"{args.starts} starts per batch, Adam; RQAOA n_cutoff = {args.cutoff}; plain QAOA trained for the same "
          f"total steps. complex64, torch threads {torch.get_num_threads()}, load average {load0:.1f} → {load1:.1f}.")
    print()
    print(table(rows, headers))


if __name__ == "__main__":
    main()
