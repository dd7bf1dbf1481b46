"""tql.mps: time per layer of a brickwork RY + CNOT circuit on the MPS simulator, by width and
``max_bond``, with the state-vector engine alongside at n = 20, as ratios to ``torch.clone`` of a
comparable tensor (the final MPS's site tensors; the state vector).

    python benchmarks/mps.py [--sizes 20,50,100] [--bonds 16,64] [--layers 12] [--threads 1]

``--order``: p = 1 QAOA MaxCut on seeded random 3-regular graphs instead, one energy evaluation
(``tql.mps.run`` + ⟨H⟩, no grad, Wurtz–Lykov fixed angles, complex128) at a fixed ``--order-bond``
with the nodes on wires in their own labels ("identity") and by ``tql.mps.wire_order`` ("rcm",
"rcm-best", "auto"): bandwidth, total edge span (SWAPs = 2 Σ (span − 1)), the exact-χ bound
``max(tql.mps.bond_bounds)``, the largest bond of the final MPS, the discarded weight, the time, and
|E_MPS − E_exact| against the state vector of the ORIGINAL graph where n ≤ 24 (above: an MPS whose
``max_bond`` is the "auto" order's exact-χ bound, ≤ 256, so nothing is truncated).

    python benchmarks/mps.py --order [--order-sizes 20,30,40] [--order-bond 32] [--order-seeds 0]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, set_threads, table, timeit, today  # noqa: E402

STATE_VECTOR_MAX = 24


def brickwork(n, layers, seed=0):
    g = torch.Generator().manual_seed(seed)
    c = tql.Circuit(n)
    for layer in range(layers):
        for w in range(n):
            c.ry(w, float(torch.rand((), generator=g)) * 2 * math.pi)
        for w in range(layer % 2, n - 1, 2):
            c.cnot(w, w + 1)
    return c


def rows_for(n, bonds, layers, repeats):
    c = brickwork(n, layers)
    rows = []
    for bond in bonds:
        state = tql.mps.run(c, max_bond=bond)
        t = timeit(lambda: tql.mps.run(c, max_bond=bond), repeats=repeats, min_time=0.0)
        sites = torch.cat([s.reshape(-1) for s in state.sites])
        clone = timeit(lambda: sites.clone(), repeats=repeats)
        rows.append([n, f"mps χ≤{bond}", layers, f"{t / layers * 1e3:.2f}", state.max_bond_dim,
                     f"{float(state.discarded.max()):.1e}", f"{t / clone:.0f}"])
    if n <= STATE_VECTOR_MAX:
        with torch.no_grad():
            t = timeit(lambda: c(), repeats=repeats, min_time=0.0)
            psi = c()
        clone = timeit(lambda: psi.clone(), repeats=repeats)
        rows.append([n, "state vector", layers, f"{t / layers * 1e3:.2f}", "-", "0", f"{t / clone:.0f}"])
    return rows


ORDER_METHODS = ("identity", "rcm", "rcm-best", "auto")
REFERENCE_MAX_BOND = 256


def order_rows(n, seed, bond, repeats):
    from torchquantum_layers import optimization as opt
    edges = opt.random_regular_graph(3, n, seed=seed)
    problem = opt.maxcut(edges, n_nodes=n)
    angles = opt.fixed_angles(1).reshape(1, -1)
    exact, source = None, "-"
    if n <= STATE_VECTOR_MAX:
        with torch.no_grad():        # the original labels: an oracle independent of the reordering
            exact = float(tql.expval(opt.qaoa_circuit(problem, 1, dtype=torch.complex128), problem.hamiltonian,
                                     x=angles)[0])
        source = "state vector"
    else:
        # bond_bounds proves that an MPS with max_bond at the bound truncates nothing
        order = tql.mps.wire_order(edges, n_nodes=n)
        bound = max(tql.mps.bond_bounds(edges, order))
        if bound <= REFERENCE_MAX_BOND:
            q = tql.mps.qaoa_circuit(problem, 1, order=order, dtype=torch.complex128)
            with torch.no_grad():
                exact = float(tql.mps.expval(q.circuit, q.hamiltonian, x=angles, max_bond=bound, cutoff=0.0)[0])
            source = f"MPS χ={bound}"
    rows = []
    for method in ORDER_METHODS:
        t0 = time.perf_counter()
        order = tql.mps.wire_order(edges, n_nodes=n, method=method)
        t_order = time.perf_counter() - t0
        q = tql.mps.qaoa_circuit(problem, 1, order=order, dtype=torch.complex128)

        def energy():
            with torch.no_grad():
                state = tql.mps.run(q.circuit, angles, max_bond=bond)
                return state, float(state.expval(q.hamiltonian)[0])
        state, e = energy()
        t = timeit(energy, repeats=repeats, min_time=0.0)
        rows.append([n, seed, method, tql.mps.bandwidth(edges, order), sum(tql.mps.edge_spans(edges, order)),
                     max(tql.mps.bond_bounds(edges, order)), state.max_bond_dim,
                     f"{float(state.discarded[0]):.1e}", f"{t * 1e3:.0f}", f"{t_order * 1e3:.0f}", f"{e:.6f}",
                     "-" if exact is None else f"{abs(e - exact):.1e}", source])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="20,50,100")
    ap.add_argument("--bonds", default="16,64")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--order", action="store_true",
                    help="QAOA on random 3-regular graphs with and without tql.mps.wire_order instead")
    ap.add_argument("--order-sizes", default="20,30,40")
    ap.add_argument("--order-seeds", default="0")
    ap.add_argument("--order-bond", type=int, default=32)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    if args.order:
        rows = []
        for n in (int(s) for s in args.order_sizes.split(",")):
            for seed in (int(s) for s in args.order_seeds.split(",")):
                rows += order_rows(n, seed, args.order_bond, args.repeats)
        print(f"# tql.mps p = 1 QAOA MaxCut, random 3-regular graphs, χ ≤ {args.order_bond}, complex128 — "
              f"{today()}, {machine()}\n")
        print(table(rows, ["n", "seed", "order", "bandwidth", "Σ span", "exact-χ bound", "max χ reached",
                           "discarded", "ms / energy", "order ms", "energy", "|E − E_exact|", "exact from"]))
        return
    bonds = [int(b) for b in args.bonds.split(",")]
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows += rows_for(n, bonds, args.layers, args.repeats)
    print(f"# tql.mps brickwork RY+CNOT, complex64, batch 1 — {today()}, {machine()}\n")
    print(table(rows, ["n", "engine", "layers", "ms / layer", "max χ reached", "discarded", "× clone"]))


if __name__ == "__main__":
    main()
