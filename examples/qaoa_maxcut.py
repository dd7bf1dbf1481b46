"""QAOA for MaxCut with many (γ, β) starts in one batch.

    python examples/qaoa_maxcut.py                 # Paddle Quantum's 4-node graph + one 16-node graph (~20 s)
    python examples/qaoa_maxcut.py --acceptance    # the full acceptance runs (several minutes)
    python examples/qaoa_maxcut.py --out plots     # where the histogram goes (--no-plots: nowhere)

Default run:
1. Paddle Quantum's MaxCut tutorial graph (edges 0-1, 1-2, 2-3, 3-0, 1-3), p = 4, 8 starts around
   the linear ramp trained together with Adam: expected cut, probability of the optimal cuts, most
   probable bitstrings. With matplotlib (the ``plot`` extra) the probabilities of the 16
   bitstrings, optimal cuts highlighted, are saved to ``<out>/qaoa_maxcut_histogram.png``.
2. A random 3-regular graph with 16 nodes: p = 1 → 2 → 3 with the Wurtz–Lykov fixed angles and
   INTERP warm starts, approximation ratio after a short training.

``--acceptance`` runs 5 random 3-regular 16-node graphs at p = 1 and p = 3 (8 starts per batch,
Adam) and prints the mean approximation ratios (targets ≥ 0.69 and ≥ 0.79), then times a 20-node
weighted MaxCut at p = 5 with 16 starts in one batch (value + gradient per Adam step).
"""
import argparse
import os
import time

import torch

from torchquantum_layers import optimization as opt
from torchquantum_layers import plotting


def paddle_graph(steps: int = 120, plot_path=None):
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]
    problem = opt.maxcut(edges)
    exact = opt.exact_solution(problem)
    model = opt.qaoa(problem, p=4)
    starts = opt.perturb(opt.linear_ramp(4), 8, scale=0.1, generator=torch.Generator().manual_seed(0)).float()
    angles, costs = opt.optimize(model, starts, steps=steps, lr=0.05)
    best = int(torch.argmin(costs))
    res = model.analyse(angles[best], k=4, shots=1000, generator=torch.Generator().manual_seed(1))
    print("Paddle Quantum MaxCut graph, p = 4, 8 starts trained in one batch")
    print(f"  optimal cut {exact.objective:.0f} edges at {exact.bitstrings}")
    print(f"  expected cut per start: {[round(-float(c), 3) for c in costs]}")
    print(f"  best start: expected cut {-float(res.expected_cost):.4f}, approximation ratio "
          f"{float(res.approximation_ratio):.4f}, P(optimal cut) {float(res.optimum_probability):.4f}")
    print("  most probable bitstrings: " + ", ".join(f"{b} ({float(q):.3f})" for b, q in
                                                   zip(res.top_bitstrings, res.top_probabilities)))
    counts = torch.bincount(res.samples, minlength=16)
    top = torch.topk(counts, 2)
    print("  1000 shots, most frequent: " + ", ".join(f"{i:04b} x{int(c)}" for c, i in
                                                    zip(top.values.tolist(), top.indices.tolist())))
    if plot_path is not None:
        plotting.bitstring_histogram(model.probabilities(angles[best]).reshape(-1), exact.bitstrings,
                                     title="QAOA p = 4, Paddle Quantum's MaxCut graph", path=plot_path)
        print(f"  figure saved to {plot_path}")
    return res


def regular16(seed: int = 0, steps: int = 10):
    problem = opt.maxcut(opt.random_regular_graph(3, 16, seed=seed))
    exact = opt.exact_solution(problem)
    print(f"\nRandom 3-regular graph, 16 nodes (seed {seed}), max cut {exact.objective:.0f} of 24 edges")
    angles = None
    for p in (1, 2, 3):
        model = opt.qaoa(problem, p)
        base = opt.fixed_angles(p) if angles is None else opt.interp(angles)
        starts = torch.cat([opt.perturb(base, 3, 0.05, generator=torch.Generator().manual_seed(p)),
                            opt.fixed_angles(p).unsqueeze(0)]).float()
        t0 = time.perf_counter()
        a, costs = opt.optimize(model, starts, steps=steps, lr=0.01)
        best = int(torch.argmin(costs))
        angles = a[best].double()
        ratio = float(model.approximation_ratio(costs[best]))
        fixed = float(model.approximation_ratio(model(opt.fixed_angles(p).float())))
        print(f"  p = {p}: fixed angles ratio {fixed:.4f}; trained ({len(starts)} starts, {steps} Adam steps, "
              f"{time.perf_counter() - t0:.1f} s) ratio {ratio:.4f}")


def acceptance(seeds=5, steps=60):
    print("\nAcceptance: 5 random 3-regular graphs with 16 nodes, 8 starts per batch, Adam")
    ratios = {1: [], 3: []}
    for seed in range(seeds):
        problem = opt.maxcut(opt.random_regular_graph(3, 16, seed=seed))
        line = []
        for p in (1, 3):
            model = opt.qaoa(problem, p)
            starts = opt.perturb(opt.fixed_angles(p), 8, 0.1, generator=torch.Generator().manual_seed(seed)).float()
            _, costs = opt.optimize(model, starts, steps=steps, lr=0.02)
            r = float(model.approximation_ratio(costs.min()))
            ratios[p].append(r)
            line.append(f"p={p}: {r:.4f}")
        print(f"  seed {seed}: " + "  ".join(line), flush=True)
    m1 = sum(ratios[1]) / seeds
    m3 = sum(ratios[3]) / seeds
    print(f"  mean approximation ratio p=1: {m1:.4f} (target >= 0.69)  p=3: {m3:.4f} (target >= 0.79)")

    print("\n20-node weighted MaxCut, p = 5, 16 starts in one batch (CPU)")
    gen = torch.Generator().manual_seed(0)
    edges = [(u, v, float(torch.randint(1, 4, (1,), generator=gen))) for u, v in
             opt.random_regular_graph(3, 20, seed=11)]
    problem = opt.maxcut(edges)
    t0 = time.perf_counter()
    model = opt.qaoa(problem, 5)
    exact = opt.exact_solution(problem)
    print(f"  set-up (diagonal, exact optimum by brute force): {time.perf_counter() - t0:.2f} s")
    starts = opt.perturb(opt.linear_ramp(5, 0.5), 16, 0.05, generator=gen).float()
    times = []

    def tick(step, costs):
        times.append(time.perf_counter())
    t0 = time.perf_counter()
    a, costs = opt.optimize(model, starts, steps=3, lr=0.02, callback=tick)
    steps_t = [b - a_ for a_, b in zip([t0] + times[:-1], times)]
    print("  value+gradient per Adam step (16 starts): " + ", ".join(f"{t:.2f} s" for t in steps_t))
    print(f"  best approximation ratio after 3 steps: {float(model.approximation_ratio(costs.min())):.4f} "
          f"(max cut weight {exact.objective:.0f})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acceptance", action="store_true", help="run the full acceptance checks")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--out", default="plots", help="folder for the PNG figure (default: plots)")
    ap.add_argument("--no-plots", action="store_true", help="save no figure")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    plot = not args.no_plots and plotting.available()
    res = paddle_graph(plot_path=os.path.join(args.out, "qaoa_maxcut_histogram.png") if plot else None)
    regular16()
    if args.acceptance:
        acceptance()
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    return res


if __name__ == "__main__":
    main()
