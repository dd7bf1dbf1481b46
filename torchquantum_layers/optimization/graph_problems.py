"""Graph problems as QUBOs: MaxCut, maximum (weighted) independent set, maximum clique, minimum
vertex cover (penalty encodings with repairing decoders) and graph colouring (one-hot registers)."""
from __future__ import annotations

import numbers
from typing import Optional

import torch

from .graphs import Graph, as_graph
from .arguments import _bipartition_codec, _bits_from_nodes, _node_weights, _penalty, _sorted_nodes
from .problems import Problem, _QuboBuilder

__all__ = ["maxcut", "max_independent_set", "max_clique", "min_vertex_cover", "graph_colouring", "graph_coloring"]


# graph problems
def maxcut(graph, n_nodes: Optional[int] = None) -> Problem:
    """Weighted MaxCut: split the nodes in two sides to maximise the weight of the edges between them.

    Cost (minimised) ``C(x) = -Σ_(u,v) w_uv [x_u != x_v] = Σ_(u,v) w_uv (Z_u Z_v - 1) / 2``, i.e.
    minus the cut weight; ``objective`` is the cut weight (``sense="max"``). Weights must be
    non-negative and finite (default 1). ``decode`` gives ``(side0, side1)`` node lists (side1 =
    nodes whose bit is 1).
    """
    what = "maxcut"
    g = as_graph(graph, n_nodes, what)
    if not g.n_edges or float(g.weights.sum()) == 0:
        raise ValueError(f"{what}: the graph has no edge of positive weight, so every cut is 0")
    n = g.n_nodes
    qb = _QuboBuilder(n)
    for (u, v), w in zip(g.edges.tolist(), g.weights.tolist()):
        qb.linear(u, -w)
        qb.linear(v, -w)
        qb.quadratic(u, v, 2 * w)
    eu, ev, w = g.edges[:, 0], g.edges[:, 1], g.weights

    def objective(bits):
        return (bits[:, eu] != bits[:, ev]).to(torch.float64) @ w
    decode, encode = _bipartition_codec(n, what)
    return Problem(what, n, qb.U, qb.const, "cut weight", "max", objective, None, decode, encode,
                   data={"graph": g})


def _conflict_repair(bits, pairs_of, weights, forbidden):
    """Remove chosen nodes until no forbidden pair is fully chosen (most conflicts first)."""
    chosen = set(_sorted_nodes(bits))
    while True:
        counts = {v: sum(1 for u in pairs_of[v] if u in chosen) for v in chosen}
        worst = [v for v, c in counts.items() if c > 0]
        if not worst:
            return sorted(chosen)
        v = max(worst, key=lambda v: (counts[v], -float(weights[v]), v))
        chosen.discard(v)


def _set_problem(what, g: Graph, node_weights, penalty, pairs: torch.Tensor, objective_name):
    """Maximise Σ w_i x_i with x_u x_v = 0 on ``pairs`` (MIS on the graph, clique on its complement)."""
    n = g.n_nodes
    w = _node_weights(node_weights, n, what)
    wmax = float(w.max()) if n else 0.0
    P = _penalty(penalty, 2 * wmax if wmax > 0 else 1.0, what, wmax, "the largest node weight")
    qb = _QuboBuilder(n)
    for i in range(n):
        qb.linear(i, -float(w[i]))
    for u, v in pairs.tolist():
        qb.quadratic(u, v, P)
    pu, pv = pairs[:, 0], pairs[:, 1]
    partners = {v: set() for v in range(n)}
    for u, v in pairs.tolist():
        partners[u].add(v)
        partners[v].add(u)

    def objective(bits):
        return bits.to(torch.float64) @ w

    def feasible(bits):
        if not pairs.shape[0]:
            return torch.ones(bits.shape[0], dtype=torch.bool)
        return ~((bits[:, pu] & bits[:, pv]).bool().any(1))

    def decode(bits, repair):
        if not repair:
            return _sorted_nodes(bits)
        return _conflict_repair(bits, partners, w, pairs)

    def encode(sol):
        return _bits_from_nodes(sol, n, what)
    return Problem(what, n, qb.U, qb.const, objective_name, "max", objective, feasible, decode, encode,
                   data={"graph": g, "node_weights": w, "penalty": P})


def max_independent_set(graph, n_nodes: Optional[int] = None, node_weights=None,
                        penalty: Optional[float] = None) -> Problem:
    """Maximum (weight) independent set: no two chosen nodes share an edge.

    Cost ``C(x) = -Σ_i w_i x_i + P Σ_(u,v) x_u x_v``; the default penalty ``P = 2 max w`` (any
    ``P > max w`` makes the minimum feasible). Node weights must be non-negative (default 1); edge
    weights are ignored. ``decode`` returns the sorted chosen nodes, dropping the nodes in most
    conflicts first when the bitstring is not independent.
    """
    g = as_graph(graph, n_nodes, "max_independent_set")
    return _set_problem("max_independent_set", g, node_weights, penalty, g.edges, "set weight")


def max_clique(graph, n_nodes: Optional[int] = None, node_weights=None,
               penalty: Optional[float] = None) -> Problem:
    """Maximum (weight) clique: every two chosen nodes are joined by an edge (an independent set of
    the complement graph): ``C(x) = -Σ_i w_i x_i + P Σ_{(u,v) not an edge} x_u x_v``."""
    what = "max_clique"
    g = as_graph(graph, n_nodes, what)
    has = g.has_edge_matrix()
    iu = torch.triu_indices(g.n_nodes, g.n_nodes, 1)
    non = iu[:, ~has[iu[0], iu[1]]].T.contiguous()
    return _set_problem(what, g, node_weights, penalty, non, "clique weight")


def min_vertex_cover(graph, n_nodes: Optional[int] = None, node_weights=None,
                     penalty: Optional[float] = None) -> Problem:
    """Minimum (weight) vertex cover: every edge has at least one chosen endpoint.

    Cost ``C(x) = Σ_i w_i x_i + P Σ_(u,v) (1 - x_u)(1 - x_v)``, default ``P = 2 max w``.
    ``decode`` returns the sorted chosen nodes, adding (for an infeasible bitstring) the node that
    covers most uncovered edges until every edge is covered.
    """
    what = "min_vertex_cover"
    g = as_graph(graph, n_nodes, what)
    n = g.n_nodes
    w = _node_weights(node_weights, n, what)
    wmax = float(w.max())
    P = _penalty(penalty, 2 * wmax if wmax > 0 else 1.0, what, wmax, "the largest node weight")
    qb = _QuboBuilder(n)
    for i in range(n):
        qb.linear(i, float(w[i]))
    for u, v in g.edges.tolist():
        qb.const += P
        qb.linear(u, -P)
        qb.linear(v, -P)
        qb.quadratic(u, v, P)
    eu, ev = g.edges[:, 0], g.edges[:, 1]
    edges = [tuple(e) for e in g.edges.tolist()]

    def objective(bits):
        return bits.to(torch.float64) @ w

    def feasible(bits):
        if not edges:
            return torch.ones(bits.shape[0], dtype=torch.bool)
        return (bits[:, eu] | bits[:, ev]).bool().all(1)

    def decode(bits, repair):
        chosen = set(_sorted_nodes(bits))
        if repair:
            while True:
                open_ = [(u, v) for u, v in edges if u not in chosen and v not in chosen]
                if not open_:
                    break
                count = {}
                for u, v in open_:
                    count[u] = count.get(u, 0) + 1
                    count[v] = count.get(v, 0) + 1
                best = max(count, key=lambda v: (count[v] / max(float(w[v]), 1e-12), -v))
                chosen.add(best)
        return sorted(chosen)

    def encode(sol):
        return _bits_from_nodes(sol, n, what)
    return Problem(what, n, qb.U, qb.const, "cover weight", "min", objective, feasible, decode, encode,
                   data={"graph": g, "node_weights": w, "penalty": P})


def graph_colouring(graph, n_colours: int, n_nodes: Optional[int] = None,
                    penalty: Optional[float] = None) -> Problem:
    """Colour the nodes with ``n_colours`` colours so that few (weighted) edges join equal colours.

    One-hot encoding: wire ``v * n_colours + c`` is 1 when node v has colour c. Cost
    ``C(x) = Σ_(u,v) w_uv Σ_c x_uc x_vc + P Σ_v (1 - Σ_c x_vc)^2``; the default penalty is
    ``2 × (largest weighted degree)`` (any larger value than that keeps the minimum one-hot).
    Feasible = every node has exactly one colour; ``objective`` = weight of monochromatic edges
    (``"min"``; 0 for a proper colouring). ``decode`` returns the colour of each node; nodes with
    no or several colours get the allowed colour that conflicts least with nodes decoded before.
    ``mixer_groups`` are the nodes' one-hot registers, for the XY mixer.
    """
    what = "graph_colouring"
    if isinstance(n_colours, bool) or not isinstance(n_colours, numbers.Integral):
        raise TypeError(f"{what}: n_colours must be an int, got {n_colours!r}")
    if n_colours < 2:
        raise ValueError(f"{what}: n_colours must be >= 2, got {n_colours}")
    k = int(n_colours)
    g = as_graph(graph, n_nodes, what)
    n = g.n_nodes
    nq = n * k
    wdeg = g.degrees(weighted=True)
    top = float(wdeg.max()) if n else 0.0
    P = _penalty(penalty, 2 * top if top > 0 else 1.0, what, top, "the largest weighted degree")
    qb = _QuboBuilder(nq)
    for (u, v), wt in zip(g.edges.tolist(), g.weights.tolist()):
        for c in range(k):
            qb.quadratic(u * k + c, v * k + c, wt)
    for v in range(n):
        qb.square([(v * k + c, -1.0) for c in range(k)], 1.0, P)
    eu, ev, w = g.edges[:, 0], g.edges[:, 1], g.weights
    adj = {v: [] for v in range(n)}
    for (u, v), wt in zip(g.edges.tolist(), g.weights.tolist()):
        adj[u].append((v, wt))
        adj[v].append((u, wt))

    def objective(bits):
        X = bits.view(-1, n, k)
        return (X[:, eu, :] * X[:, ev, :]).sum(2).to(torch.float64) @ w

    def feasible(bits):
        return (bits.view(-1, n, k).sum(2) == 1).all(1)

    def decode(bits, repair):
        colours = [None] * n
        pending = []
        for v in range(n):
            on = [c for c in range(k) if bits[v * k + c]]
            if len(on) == 1:
                colours[v] = on[0]
            else:
                pending.append((v, on or list(range(k))))
        if not repair:
            return [c if c is not None else -1 for c in colours]
        for v, options in pending:
            def clash(c):
                return sum(wt for u, wt in adj[v] if colours[u] == c)
            colours[v] = min(options, key=lambda c: (clash(c), c))
        return colours

    def encode(sol):
        if len(sol) != n:
            raise ValueError(f"{what}.encode: need a colour for each of the {n} nodes")
        bits = [0] * nq
        for v, c in enumerate(sol):
            if not 0 <= int(c) < k:
                raise ValueError(f"{what}.encode: colour {c!r} of node {v} is not in 0 … {k - 1}")
            bits[v * k + int(c)] = 1
        return bits
    groups = tuple(tuple(v * k + c for c in range(k)) for v in range(n))
    return Problem(what, nq, qb.U, qb.const, "monochromatic edge weight", "min", objective, feasible,
                   decode, encode, mixer_groups=groups,
                   data={"graph": g, "n_colours": k, "penalty": P})


graph_coloring = graph_colouring
