"""QAOA for the travelling salesperson problem (one-hot encoding, as in Paddle Quantum's tutorial).

    python examples/qaoa_tsp.py              # 4 cities, 9 qubits (~15 s)
    python examples/qaoa_tsp.py --cities 5   # 16 qubits

City 0 is pinned at the start of the tour, so n cities need (n-1)^2 qubits. The cost is the tour
length plus a penalty on bitstrings that are not a permutation. Two mixers are compared, each with
8 starts trained together in one batch:

* ``mixer="x"`` — the standard transverse-field mixer from |+⟩: it explores all 2^((n-1)^2)
  bitstrings, most of them invalid, and relies on the penalty;
* ``mixer="swap"`` — exchanges two cities between consecutive positions, starting from the uniform
  superposition of all tours, so every measured bitstring is a valid tour.

Reports the probability of measuring an optimal tour, the probability of a valid tour and the most
probable tours (decoded; the decoder repairs invalid bitstrings into tours).
"""
import argparse
import itertools
import math
import time

import torch

from torchquantum_layers import optimization as opt


def cities(n: int, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    pts = torch.rand(n, 2, generator=g) * 10
    return torch.cdist(pts, pts).double().round(decimals=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cities", type=int, default=4)
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t_all = time.perf_counter()
    D = cities(args.cities)
    problem = opt.tsp(D)
    n = args.cities
    exact = opt.exact_solution(problem)
    brute = min(itertools.permutations(range(1, n)),
                key=lambda t: sum(float(D[a, b]) for a, b in zip((0,) + t, t + (0,))))
    print(f"TSP, {n} cities, {problem.n_qubits} qubits, penalty {problem.data['penalty']:.2f}")
    print(f"  optimal tour {exact.solution} length {exact.objective:.2f} "
          f"({exact.n_optimal} optimal bitstrings; itertools brute force: {[0, *brute]})")
    scale = 1.0 / float(D.max())          # angles of order 1 for costs of order 1
    for mixer in ("x", "swap"):
        model = opt.qaoa(problem, args.p, mixer=mixer)
        base = opt.linear_ramp(args.p, delta=0.75)
        base[:args.p] *= scale
        starts = opt.perturb(base, 8, 0.05, generator=torch.Generator().manual_seed(0)).float()
        t0 = time.perf_counter()
        angles, costs = opt.optimize(model, starts, steps=args.steps, lr=0.03)
        best = int(torch.argmin(costs))
        res = model.analyse(angles[best], k=3)
        tours = [problem.decode(i) for i in res.top_indices.tolist()]
        print(f"\n  mixer={mixer!r}: {args.steps} Adam steps on 8 starts in {time.perf_counter() - t0:.1f} s")
        print(f"    expected cost {float(res.expected_cost):.3f}, P(optimal tour) {float(res.optimum_probability):.4f}, "
              f"P(valid tour) {float(res.feasible_probability):.4f}")
        print("    most probable: " + "; ".join(
            f"{b} -> tour {t} ({q:.3f}{'' if problem.is_feasible(b) else ', repaired'})"
            for b, t, q in zip(res.top_bitstrings, tours, res.top_probabilities.tolist())))
        assert all(math.isclose(problem.data["tour_length"](t), float(problem.objective(problem.encode(t))))
                   for t in tours)
    print(f"\ntotal {time.perf_counter() - t_all:.1f} s")


if __name__ == "__main__":
    main()
