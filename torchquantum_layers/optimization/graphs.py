"""Graphs for the optimisation problems: edge lists with weights, or networkx graphs (optional).

Every builder in :mod:`torchquantum_layers.optimization.graph_problems` takes a graph through
:func:`as_graph`, which returns a :class:`Graph` (number of nodes, ``(m, 2)`` edges with ``u < v``,
``(m,)`` float64 weights) after validating it:

* an edge list ``[(u, v), ...]`` or ``[(u, v, w), ...]`` (weight 1 when left out), a dict
  ``{(u, v): w}``, an ``(m, 2)`` / ``(m, 3)`` tensor or array, or a ``networkx.Graph`` (its ``weight``
  edge attribute, 1 when absent; networkx itself is never imported here);
* node labels are ints ``0 … n-1`` (node i is wire i). ``n_nodes`` may be given to add isolated
  nodes; without it the labels must be exactly ``0 … max`` with no gap, so a typo such as
  nodes ``{0, 1, 5}`` is reported rather than silently simulated on 6 qubits;
* self-loops, repeated edges (``(0, 1)`` and ``(1, 0)`` count as the same edge), NaN/inf weights and
  (where the problem says so) negative weights raise ``ValueError`` naming the edge.

:func:`random_regular_graph` draws seeded random d-regular graphs without networkx.
"""
from __future__ import annotations

import math
import numbers
import random
from dataclasses import dataclass
from typing import Optional

import torch

__all__ = ["Graph", "as_graph", "random_regular_graph", "complete_graph", "cycle_graph"]


@dataclass(frozen=True)
class Graph:
    """A validated undirected simple graph: ``edges`` (m, 2) int64 with u < v, ``weights`` (m,) float64."""
    n_nodes: int
    edges: torch.Tensor
    weights: torch.Tensor

    @property
    def n_edges(self) -> int:
        return int(self.edges.shape[0])

    def edge_list(self) -> list:
        """``[(u, v, w), ...]`` as Python numbers."""
        return [(int(u), int(v), float(w)) for (u, v), w in zip(self.edges.tolist(), self.weights.tolist())]

    def degrees(self, weighted: bool = False) -> torch.Tensor:
        out = torch.zeros(self.n_nodes, dtype=torch.float64)
        w = self.weights if weighted else torch.ones_like(self.weights)
        out.index_add_(0, self.edges[:, 0], w)
        out.index_add_(0, self.edges[:, 1], w)
        return out

    def adjacency(self) -> torch.Tensor:
        """Dense symmetric (n, n) float64 weight matrix (0 where there is no edge)."""
        a = torch.zeros(self.n_nodes, self.n_nodes, dtype=torch.float64)
        if self.n_edges:
            a[self.edges[:, 0], self.edges[:, 1]] = self.weights
            a[self.edges[:, 1], self.edges[:, 0]] = self.weights
        return a

    def has_edge_matrix(self) -> torch.Tensor:
        """Dense symmetric (n, n) bool: True where an edge exists."""
        a = torch.zeros(self.n_nodes, self.n_nodes, dtype=torch.bool)
        if self.n_edges:
            a[self.edges[:, 0], self.edges[:, 1]] = True
            a[self.edges[:, 1], self.edges[:, 0]] = True
        return a


def _is_networkx(graph) -> bool:
    mod = type(graph).__module__ or ""
    return mod.startswith("networkx") or (hasattr(graph, "nodes") and hasattr(graph, "edges")
                                          and hasattr(graph, "is_directed") and hasattr(graph, "adj"))


def _label(v, what: str, edge) -> int:
    if isinstance(v, bool):
        raise TypeError(f"{what}: node label {v!r} in edge {edge!r} is a bool, not an int")
    if isinstance(v, torch.Tensor) and v.dim() == 0 and not (v.is_floating_point() or v.is_complex()):
        v = int(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    raise TypeError(f"{what}: node label {v!r} in edge {edge!r} is not an int (nodes are wires 0 … n-1)")


def _weight(w, what: str, edge, allow_negative: bool) -> float:
    if isinstance(w, bool):
        raise TypeError(f"{what}: weight {w!r} of edge {edge!r} is a bool, not a number")
    if isinstance(w, torch.Tensor):
        if w.numel() != 1:
            raise TypeError(f"{what}: weight of edge {edge!r} must be a number, got a tensor of shape "
                            f"{tuple(w.shape)}")
        w = w.item()
    if not isinstance(w, numbers.Real):
        raise TypeError(f"{what}: weight {w!r} of edge {edge!r} is not a real number")
    w = float(w)
    if not math.isfinite(w):
        raise ValueError(f"{what}: weight of edge {edge!r} is {w} (weights must be finite)")
    if w < 0 and not allow_negative:
        raise ValueError(f"{what}: weight of edge {edge!r} is negative ({w}); {what} needs non-negative "
                         f"weights (use from_ising / from_qubo for signed couplings)")
    return w


def _raw_edges(graph, what: str):
    """-> (list of (u, v, w) raw, node labels or None, is_networkx)."""
    if _is_networkx(graph):
        if graph.is_directed():
            raise ValueError(f"{what}: the networkx graph is directed; pass an undirected graph "
                             f"(graph.to_undirected())")
        if graph.is_multigraph():
            raise ValueError(f"{what}: networkx multigraphs are not supported; merge parallel edges "
                             f"into one weighted edge (networkx.Graph(multigraph))")
        raw = [(u, v, d.get("weight", 1.0)) for u, v, d in graph.edges(data=True)]
        return raw, list(graph.nodes), True
    if isinstance(graph, dict):
        raw = []
        for key, w in graph.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise TypeError(f"{what}: dict keys must be (u, v) pairs, got {key!r}")
            raw.append((key[0], key[1], w))
        return raw, None, False
    if isinstance(graph, (str, bytes)):
        raise TypeError(f"{what}: expected an edge list, a dict or a networkx graph, got a string")
    if isinstance(graph, torch.Tensor) or type(graph).__module__ == "numpy":
        t = torch.as_tensor(graph)
        if t.dim() != 2 or t.shape[1] not in (2, 3):
            if t.numel() == 0:
                return [], None, False
            raise ValueError(f"{what}: an edge array must have shape (m, 2) or (m, 3), got {tuple(t.shape)}")
        if t.shape[1] == 2:
            if t.is_floating_point() and not bool((t == t.round()).all()):
                raise TypeError(f"{what}: node labels in the edge array must be integers")
            rows = t.to(torch.int64).tolist()
            return [(u, v, 1.0) for u, v in rows], None, False
        lab = t[:, :2]
        if lab.is_floating_point():
            if not bool(torch.isfinite(lab).all()) or not bool((lab == lab.round()).all()):
                raise TypeError(f"{what}: node labels (first two columns) must be integers")
        return [(int(u), int(v), float(w)) for (u, v), w in zip(lab.to(torch.int64).tolist(),
                                                                  t[:, 2].to(torch.float64).tolist())], None, False
    try:
        items = list(graph)
    except TypeError:
        raise TypeError(f"{what}: expected an edge list [(u, v) or (u, v, w), ...], a dict {{(u, v): w}}, "
                        f"an (m, 2|3) array or a networkx graph, got {type(graph).__name__}") from None
    raw = []
    for e in items:
        if not isinstance(e, (tuple, list)) or len(e) not in (2, 3):
            raise TypeError(f"{what}: each edge must be (u, v) or (u, v, weight), got {e!r}")
        raw.append((e[0], e[1], e[2] if len(e) == 3 else 1.0))
    return raw, None, False


def as_graph(graph, n_nodes: Optional[int] = None, what: str = "graph",
             allow_negative: bool = False, allow_empty: bool = True) -> Graph:
    """Validate ``graph`` and return a :class:`Graph` (see the module docstring for the formats)."""
    if isinstance(graph, Graph):
        raw = graph.edge_list()
        nodes = None
        is_nx = False
        if n_nodes is None:
            n_nodes = graph.n_nodes
    else:
        raw, nodes, is_nx = _raw_edges(graph, what)
        if nodes is not None:
            bad = [x for x in nodes if isinstance(x, bool) or not isinstance(x, numbers.Integral)]
            if bad:
                raise TypeError(f"{what}: networkx node {bad[0]!r} is not an int; relabel the graph with "
                                f"networkx.convert_node_labels_to_integers(graph) (node i becomes wire i)")
    if n_nodes is not None:
        if isinstance(n_nodes, bool) or not isinstance(n_nodes, numbers.Integral):
            raise TypeError(f"{what}: n_nodes must be an int, got {n_nodes!r}")
        if n_nodes < 1:
            raise ValueError(f"{what}: n_nodes must be >= 1, got {n_nodes}")
        n_nodes = int(n_nodes)
    edges, weights, seen = [], [], {}
    labels = set()
    for u, v, w in raw:
        edge = (u, v)
        a, b = _label(u, what, edge), _label(v, what, edge)
        if a < 0 or b < 0:
            raise ValueError(f"{what}: negative node label in edge {edge!r} (nodes are wires 0 … n-1)")
        if a == b:
            raise ValueError(f"{what}: self-loop on node {a} (edge {edge!r}); remove it: a node cannot "
                             f"be joined to itself")
        key = (min(a, b), max(a, b))
        if key in seen:
            raise ValueError(f"{what}: edge {key} is given twice ({seen[key]!r} and {edge!r}); give each "
                             f"undirected edge once (sum the weights yourself if that is meant)")
        seen[key] = edge
        edges.append(key)
        weights.append(_weight(w, what, edge, allow_negative))
        labels.update(key)
    if nodes is not None:
        labels.update(int(x) for x in nodes)
    if not labels and n_nodes is None:
        raise ValueError(f"{what}: the graph has no nodes; give n_nodes for a graph without edges")
    top = max(labels) if labels else -1
    if n_nodes is None:
        n = top + 1
        missing = sorted(set(range(n)) - labels)
        if missing:
            shown = ", ".join(map(str, missing[:6])) + (" …" if len(missing) > 6 else "")
            src = "networkx graph" if is_nx else "edge list"
            raise ValueError(f"{what}: node labels must be 0 … n-1 without gaps, but the {src} uses nodes up to "
                             f"{top} and not {shown}; relabel the nodes (networkx.convert_node_labels_to_integers) "
                             f"or pass n_nodes={n} if isolated nodes are meant")
    else:
        n = n_nodes
        if top >= n:
            raise ValueError(f"{what}: node {top} does not exist for n_nodes={n} (labels must be 0 … {n - 1})")
    if not edges and not allow_empty:
        raise ValueError(f"{what}: the graph has no edges")
    e = torch.tensor(edges, dtype=torch.int64).reshape(-1, 2)
    wt = torch.tensor(weights, dtype=torch.float64)
    return Graph(n, e, wt)


def random_regular_graph(degree: int, n_nodes: int, seed: Optional[int] = None,
                         max_tries: int = 10000) -> list:
    """A random ``degree``-regular simple graph on ``n_nodes`` nodes as an edge list ``[(u, v), ...]``.

    Pairing model with restarts (Steger–Wormald style), uniform enough for benchmarks; seeded by
    ``seed`` through :class:`random.Random`, independent of torch's global RNG.
    """
    for name, val in (("degree", degree), ("n_nodes", n_nodes)):
        if isinstance(val, bool) or not isinstance(val, numbers.Integral):
            raise TypeError(f"random_regular_graph: {name} must be an int, got {val!r}")
    if degree < 0 or n_nodes < 1 or degree >= n_nodes or (degree * n_nodes) % 2:
        raise ValueError(f"random_regular_graph: no simple {degree}-regular graph on {n_nodes} nodes "
                         f"(need 0 <= degree < n_nodes and degree * n_nodes even)")
    rng = random.Random(seed)
    for _ in range(max_tries):
        edges = set()
        stubs = [v for v in range(n_nodes) for _ in range(degree)]
        ok = True
        while stubs:
            # pick two random stubs that make a new simple edge; give up after a few failures
            for _attempt in range(100):
                i, j = rng.sample(range(len(stubs)), 2)
                u, v = stubs[i], stubs[j]
                if u != v and (min(u, v), max(u, v)) not in edges:
                    break
            else:
                ok = False
                break
            edges.add((min(u, v), max(u, v)))
            for k in sorted((i, j), reverse=True):
                stubs.pop(k)
        if ok:
            return sorted(edges)
    raise RuntimeError(f"random_regular_graph: failed to draw a {degree}-regular graph on {n_nodes} nodes")


def _check_nodes(n_nodes, what: str, least: int) -> int:
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, numbers.Integral):
        raise TypeError(f"{what}: n_nodes must be an int, got {n_nodes!r}")
    if n_nodes < least:
        raise ValueError(f"{what}: {'a cycle' if least == 3 else 'the graph'} needs at least {least} "
                         f"nodes, got {n_nodes}")
    return int(n_nodes)


def complete_graph(n_nodes: int) -> list:
    """Edges of the complete graph K_n."""
    n_nodes = _check_nodes(n_nodes, "complete_graph", 1)
    return [(i, j) for i in range(n_nodes) for j in range(i + 1, n_nodes)]


def cycle_graph(n_nodes: int) -> list:
    """Edges of the cycle C_n (n >= 3)."""
    n_nodes = _check_nodes(n_nodes, "cycle_graph", 3)
    return [(i, (i + 1) % n_nodes) if i < (i + 1) % n_nodes else ((i + 1) % n_nodes, i) for i in range(n_nodes)]
