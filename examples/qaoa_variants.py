"""Four ways to attack one MaxCut instance: plain QAOA, the CVaR objective, recursive QAOA, and QAOA
on a noisy device with and without zero-noise extrapolation.

    python examples/qaoa_variants.py [--nodes 10] [--p 1] [--steps 100] [--seed 0]

On a seeded random 3-regular graph (brute-force optimum as the reference):

* QAOA: ``--starts`` starts around the linear ramp trained as one batch on the expected cost;
  reported: the expected cut / max cut, the probability of sampling a maximum cut, and the cut of
  the most probable bitstring;
* CVaR_0.2 (Barkoutsos et al. 2020): the same starts trained on the mean of the best 20 % of the
  distribution, which puts more weight on good bitstrings than the expectation does;
* RQAOA (Bravyi et al. 2020): rounds of p-layer QAOA, each tying the most correlated pair of spins,
  until 4 are left to brute-force;
* noisy: the trained QAOA angles evaluated by a device with depolarizing noise (``--noise``) after
  every RZZ and readout errors, as it reports them, and after readout inversion + ZNE.
"""
import argparse

import torch

import torchquantum_layers as tql
from torchquantum_layers import optimization as opt


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--p", type=int, default=1)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--alpha", type=float, default=0.2)
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    problem = opt.maxcut(opt.random_regular_graph(3, args.nodes, seed=args.seed))
    exact = opt.exact_solution(problem)
    best_cut = float(exact.objective)
    print(f"MaxCut, random 3-regular graph: {args.nodes} nodes, seed {args.seed}; maximum cut {best_cut:.0f}")
    model = opt.qaoa(problem, args.p, dtype=torch.complex128)
    starts = opt.perturb(opt.linear_ramp(args.p), args.starts, 0.1, torch.Generator().manual_seed(args.seed)).double()
    rows = {}
    for name, kwargs in [("QAOA (expectation)", {}), (f"QAOA (CVaR {args.alpha})", dict(objective="cvar", alpha=args.alpha))]:
        angles, values = opt.optimize(model, starts, steps=args.steps, **kwargs)
        res = model.analyse(angles, k=1)
        s = int(torch.argmin(values))                  # the start its own objective ranks best
        top_cut = float(problem.objective(res.top_indices[s, 0]))
        rows[name] = (-float(res.expected_cost[s]) / best_cut, float(res.optimum_probability[s]), top_cut / best_cut)
        if not kwargs:
            trained = angles
    r = opt.rqaoa(problem, p=args.p, n_cutoff=4, n_starts=args.starts, steps=args.steps, seed=args.seed)
    rows["RQAOA"] = (float(r.objective) / best_cut, None, float(r.objective) / best_cut)
    print(f"\n{'method':22s} {'<cut>/max':>10s} {'P(max cut)':>11s} {'top cut/max':>12s}")
    for name, (ratio, p_opt, top) in rows.items():
        print(f"{name:22s} {ratio:10.4f} {'-' if p_opt is None else f'{p_opt:.4f}':>11s} {top:12.4f}")

    noise = (tql.NoiseModel().add(tql.mixed.depolarizing(args.noise), gates="RZZ").add_readout_error(0.02, 0.04))
    ideal = model(trained)
    noisy = opt.NoisyQAOA(problem, args.p, noise, dtype=torch.complex128)(trained)
    mitigated = opt.NoisyQAOA(problem, args.p, noise, mitigation="zne+readout", dtype=torch.complex128)(trained)
    err_noisy, err_zne = float((noisy - ideal).abs().mean()), float((mitigated - ideal).abs().mean())
    print(f"\nnoisy device (depolarizing {args.noise} after every RZZ, readout errors 2 % / 4 %): "
          f"|reported - ideal| cost {err_noisy:.4f}, after readout inversion + ZNE {err_zne:.4f}")
    return {"rows": rows, "noisy_error": err_noisy, "mitigated_error": err_zne}


if __name__ == "__main__":
    main()
