"""QAOA beyond state vectors: p-layer MaxCut on 40–80 nodes, simulated as a matrix-product state.

    python examples/qaoa_mps_large.py [--graph ring|regular|both] [--n 60] [--n-regular 40] [--p 1]
                                      [--chi 64] [--order auto|rcm-best|rcm|identity]
                                      [--steps 30] [--lr 0.06] [--shots 256] [--seed 0]

2^60 amplitudes do not fit in memory, but a shallow QAOA state on a sparse graph has little
entanglement, so ``tql.mps`` holds it as an MPS of bond dimension ``--chi``:

* the nodes are placed on wires by ``tql.mps.wire_order(graph, method=--order)`` so that edges stay
  short (an RZZ between wires i and j is SWAP-routed across |i − j| sites, and the entanglement
  across a bond comes from the edges crossing it); ``tql.mps.qaoa_circuit(problem, p, order=…)``
  builds ``opt.qaoa_circuit`` on the relabelled problem. The bandwidth (longest edge) before and
  after, and ``max(tql.mps.bond_bounds(...))`` (the χ at which the MPS is provably exact), are printed;
* the angles ``[γ_1…γ_p, β_1…β_p]`` start at the linear ramp and are trained with Adam on the MPS
  energy ``tql.mps.expval(q.circuit, q.hamiltonian, x=angles, max_bond=χ)`` (the same energy as the
  original problem's; gradients by backprop through the contractions and SVDs);
* the trained MPS (``tql.mps.run``) is sampled ``--shots`` times; the samples list WIRE bits, and
  ``q.to_nodes(bits)`` puts them back in node order before ``problem.objective`` scores the cuts;
* the classical reference is Goemans–Williamson (``opt.goemans_williamson``): its rounded cut and
  its certified SDP upper bound on the maximum cut;
* on a ring (``--graph ring``, max cut n for even n) at p = 1 every edge has the same expected cut
  ``1/2 − sin(4β) sin(2γ)/4`` (this library's convention), so the MPS energy is checked against
  ``−n`` times that at the trained angles; a random 3-regular graph of at most 20 nodes is checked
  against the state vector of the original (unrelabelled) problem.

With ``--order identity`` a random 3-regular graph keeps its arbitrary node labels: its edges span
the whole chain, the exact bond bound is ~2^(n/2) and a small χ discards most of the state
(``python benchmarks/mps.py --order`` measures it).

The discarded weight is the summed SVD truncation weight (≈ 1 − fidelity); at 0 the MPS is exact.
"""
import argparse
import math
import time

import torch

import torchquantum_layers as tql
from torchquantum_layers import optimization as opt

STATE_VECTOR_CHECK = 20


def ring_p1_energy(n, gamma, beta):
    """The exact p = 1 QAOA energy (minus the expected cut) of MaxCut on the n-node ring, n >= 5."""
    return -n * (0.5 - math.sin(4 * beta) * math.sin(2 * gamma) / 4)


def solve(kind, n, args):
    """Train, sample and compare one graph; returns the figures as a dict."""
    if kind == "ring":
        edges, name = opt.cycle_graph(n), f"ring C_{n}"
    else:
        edges, name = opt.random_regular_graph(3, n, seed=args.seed), f"random 3-regular graph (seed {args.seed})"
    problem = opt.maxcut(edges, n_nodes=n)
    t_order = time.perf_counter()
    q = tql.mps.qaoa_circuit(problem, args.p, order=args.order, dtype=torch.complex128)
    t_order = time.perf_counter() - t_order
    before, after = tql.mps.bandwidth(edges, n_nodes=n), tql.mps.bandwidth(edges, q.order, n_nodes=n)
    bound = max(tql.mps.bond_bounds(edges, q.order, p=args.p, n_nodes=n))
    print(f"\nMaxCut on a {name}: {n} nodes, {len(edges)} edges; QAOA p = {args.p}, MPS χ ≤ {args.chi}")
    print(f"wire order {args.order!r} ({t_order * 1e3:.0f} ms): bandwidth {before} -> {after}, "
          f"exact-χ bound {bound}" + (" (χ is enough: no truncation)" if bound <= args.chi else ""))

    t0 = time.perf_counter()
    angles = opt.linear_ramp(args.p).reshape(1, -1).clone().requires_grad_(True)
    adam = torch.optim.Adam([angles], lr=args.lr)
    energies = []
    for _ in range(args.steps):
        adam.zero_grad()
        energy = tql.mps.expval(q.circuit, q.hamiltonian, x=angles, max_bond=args.chi)[0]
        energy.backward()
        adam.step()
        energies.append(float(energy.detach()))
    with torch.no_grad():
        state = tql.mps.run(q.circuit, angles.detach(), max_bond=args.chi)
        energy = float(state.expval(q.hamiltonian)[0])
        energies.append(energy)
        wire_bits = state.sample(args.shots, torch.Generator().manual_seed(args.seed))[0]    # (shots, n)
        bits = q.to_nodes(wire_bits)                 # column v is node v of the original graph
        cuts = problem.objective(bits)
    train_s = time.perf_counter() - t0
    best = int(cuts.argmax())
    best_cut = float(cuts[best])
    discarded = float(state.discarded[0])
    print(f"energy: {energies[0]:.6f} (linear ramp) -> {energy:.6f} after {args.steps} Adam steps; "
          f"max bond used {state.max_bond_dim}, discarded {discarded:.2e}")

    t1 = time.perf_counter()
    gw = opt.goemans_williamson(problem, generator=torch.Generator().manual_seed(args.seed))
    gw_s = time.perf_counter() - t1
    expected_cut = -energy

    gamma_beta = angles.detach()
    deviation = None
    if kind == "ring" and args.p == 1 and n >= 5:
        gamma, beta = (float(a) for a in gamma_beta[0])
        deviation = abs(energy - ring_p1_energy(n, gamma, beta))
        print(f"ring check at γ = {gamma:.6f}, β = {beta:.6f}: |E_MPS − E_analytic| = {deviation:.2e}")
    elif n <= STATE_VECTOR_CHECK:
        with torch.no_grad():     # the original labels, no reordering: an independent path
            exact = float(tql.expval(opt.qaoa_circuit(problem, args.p, dtype=torch.complex128),
                                     problem.hamiltonian, x=gamma_beta)[0])
        deviation = abs(energy - exact)
        print(f"state-vector check (original labels): |E_MPS − E_exact| = {deviation:.2e}")

    print(f"\n{'n':>4s} {'χ':>4s} {'energy':>12s} {'<cut>/GW ub':>12s} {'best sample':>12s} "
          f"{'GW cut':>8s} {'GW ub':>9s} {'discarded':>10s} {'QAOA s':>7s} {'GW s':>6s}")
    print(f"{n:4d} {args.chi:4d} {energy:12.6f} {expected_cut / gw.upper_bound:12.4f} {best_cut:12.0f} "
          f"{gw.cut:8.0f} {gw.upper_bound:9.3f} {discarded:10.2e} {train_s:7.2f} {gw_s:6.2f}")
    return {"energies": energies, "energy": energy, "expected_cut": expected_cut, "best_cut": best_cut,
            "best_bits": bits[best].tolist(), "edges": edges, "gw_cut": gw.cut, "gw_upper_bound": gw.upper_bound,
            "discarded": discarded, "deviation": deviation, "angles": gamma_beta[0].tolist(), "seconds": train_s,
            "order": q.order, "bandwidth_before": before, "bandwidth_after": after, "bond_bound": bound,
            "max_bond_used": state.max_bond_dim}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", choices=["ring", "regular", "both"], default="both",
                    help="ring (cycle), random 3-regular graph, or both in turn")
    ap.add_argument("--n", type=int, default=60, help="number of nodes of the ring")
    ap.add_argument("--n-regular", type=int, default=40, help="number of nodes of the random 3-regular graph")
    ap.add_argument("--p", type=int, default=1, help="QAOA layers")
    ap.add_argument("--chi", type=int, default=64, help="maximum MPS bond dimension")
    ap.add_argument("--order", choices=list(tql.mps.ORDER_METHODS), default="auto",
                    help="how nodes are placed on wires (tql.mps.wire_order method)")
    ap.add_argument("--steps", type=int, default=30, help="Adam steps")
    ap.add_argument("--lr", type=float, default=0.06)
    ap.add_argument("--shots", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    kinds = ["ring", "regular"] if args.graph == "both" else [args.graph]
    return {kind: solve(kind, args.n if kind == "ring" else args.n_regular, args) for kind in kinds}


if __name__ == "__main__":
    main()
