"""Which node sits on which MPS wire: bandwidth-reducing orders and relabelling.

A gate between wires i and j is SWAP-routed across ``|i − j|`` sites, and the entanglement a
cost layer ``Π exp(−iγ J_uv Z_u Z_v)`` builds across a bond comes from the edges that cross it.
Placing graph nodes on wires in an arbitrary order (a random 3-regular graph's labels) makes
edges span most of the chain; a bandwidth-reducing order keeps every edge short.

* :func:`wire_order` — ``order[w]`` is the node placed on wire ``w``: reverse Cuthill–McKee
  (``method="rcm"``, from a pseudo-peripheral node), RCM from many start nodes keeping the order
  with the thinnest :func:`bond_bounds` profile (``"rcm-best"``), or that refined by a short
  deterministic local search (``"auto"``, the default).
* :func:`bandwidth`, :func:`edge_spans`, :func:`bond_bounds` — how good an order is;
  ``bond_bounds(graph, order, p)`` is a proven upper bound on the exact bond dimensions of a
  p-layer QAOA state (see its docstring), so ``max_bond`` at or above it loses nothing.
* :func:`relabel` — the same graph, :class:`~tql.optimization.Problem`, Hamiltonian or
  PauliString with node ``order[w]`` renamed wire ``w``; :func:`to_nodes` / :func:`to_wires` map
  bit rows (samples) between the two labellings.
* :func:`qaoa_circuit` — ``opt.qaoa_circuit`` on the relabelled problem, with the order and the
  way back to node labels.

Energies are invariant under relabelling; bitstrings are not: a sample of the relabelled
circuit lists wire bits, and :func:`to_nodes` turns it into node bits for the original problem.
"""
from __future__ import annotations

import numbers
from collections import deque
from typing import NamedTuple, Optional

import numpy as np
import torch

__all__ = ["wire_order", "bandwidth", "edge_spans", "bond_bounds", "relabel", "to_nodes", "to_wires",
           "check_order", "qaoa_circuit", "QAOAOnWires", "ORDER_METHODS"]

ORDER_METHODS = ("auto", "rcm-best", "rcm", "identity")

# "rcm-best" tries every node as an RCM start while (starts × n) stays within this (each try is
# O(n + m) Python); above it, at least 16 evenly spread starts besides the pseudo-peripheral one.
_START_WORK = 50_000


# -- graphs ------------------------------------------------------------------------------------
def _is_problem(obj) -> bool:
    from ..optimization.problems import Problem
    return isinstance(obj, Problem)


def _edges_of(graph, n_nodes, what: str):
    """``(n, [(u, v), ...])`` from a Graph / edge list / dict / array / networkx graph / Problem."""
    if _is_problem(graph):
        if n_nodes is not None and int(n_nodes) != graph.n_qubits:
            raise ValueError(f"{what}: n_nodes={n_nodes} but the problem has {graph.n_qubits} qubits")
        # the interaction graph: the qubit pairs the cost Hamiltonian couples
        pairs = torch.nonzero(torch.triu(graph.qubo, 1)).tolist()
        return graph.n_qubits, [(int(u), int(v)) for u, v in pairs]
    from ..optimization.graphs import as_graph
    # weights do not matter for the layout (signed couplings included)
    g = as_graph(graph, n_nodes, f"{what}: graph", allow_negative=True)
    return g.n_nodes, [tuple(e) for e in g.edges.tolist()]


def _adjacency(n: int, edges) -> list:
    adj = [[] for _ in range(n)]
    for u, v in edges:
        adj[u].append(v)
        adj[v].append(u)
    return adj


# -- orders ------------------------------------------------------------------------------------
def check_order(order, n: Optional[int] = None, what: str = "order") -> list:
    """``order`` as a list of ``n`` distinct ints in ``0 … n-1`` (``order[w]`` = node on wire ``w``;
    ``n=None``: its own length), else a TypeError (not integers) or ValueError (length, range,
    repeats) naming ``what``."""
    if isinstance(order, (str, bytes)) or isinstance(order, bool):
        raise TypeError(f"{what} must be a sequence of node labels (ints), got {type(order).__name__}")
    if isinstance(order, torch.Tensor) or type(order).__module__ == "numpy":
        t = torch.as_tensor(order)
        if t.dim() != 1:
            raise ValueError(f"{what} must be one-dimensional (order[w] = node on wire w), got shape "
                             f"{tuple(t.shape)}")
        if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
            raise TypeError(f"{what} must hold integer node labels, got dtype {t.dtype}")
        items = t.tolist()
    else:
        try:
            items = list(order)
        except TypeError:
            raise TypeError(f"{what} must be a sequence of node labels (ints), got "
                            f"{type(order).__name__}") from None
    out = []
    for w, v in enumerate(items):
        if isinstance(v, torch.Tensor) and v.dim() == 0 and not (v.is_floating_point() or v.is_complex()
                                                                 or v.dtype == torch.bool):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"{what}[{w}] is {v!r} ({type(v).__name__}); node labels must be ints")
        out.append(int(v))
    if n is None:
        n = len(out)
    if len(out) != n:
        raise ValueError(f"{what} has {len(out)} entries but there are {n} nodes (order[w] = node on wire w)")
    seen = [False] * n
    for w, v in enumerate(out):
        if not 0 <= v < n:
            raise ValueError(f"{what}[{w}] = {v} is not a node: labels are 0 … {n - 1}")
        if seen[v]:
            missing = min(set(range(n)) - set(out))       # n entries with a repeat: one is missing
            raise ValueError(f"{what} is not a permutation: node {v} appears twice and node {missing} is "
                             f"missing")
        seen[v] = True
    return out


def _positions(order: list) -> list:
    pos = [0] * len(order)
    for w, v in enumerate(order):
        pos[v] = w
    return pos


def _component_bfs(adj, start, deg, seen, largest_first: bool) -> list:
    """Cuthill–McKee on ``start``'s component: BFS, neighbours by degree (ties by label)."""
    seen[start] = True
    out = [start]
    head = 0
    while head < len(out):
        u = out[head]
        head += 1
        nxt = [v for v in adj[u] if not seen[v]]
        nxt.sort(key=(lambda v: (-deg[v], v)) if largest_first else (lambda v: (deg[v], v)))
        for v in nxt:
            seen[v] = True
            out.append(v)
    return out


def _levels(adj, start, alive):
    """BFS distances from ``start`` (dict) within the nodes ``alive``."""
    dist = {start: 0}
    q = deque([start])
    while q:
        u = q.popleft()
        for v in adj[u]:
            if v not in dist and alive[v]:
                dist[v] = dist[u] + 1
                q.append(v)
    return dist


def _pseudo_peripheral(adj, deg, start, alive):
    """George–Liu: walk to a node of (locally) maximal eccentricity, so the BFS levels are many and thin."""
    r = start
    dist = _levels(adj, r, alive)
    ecc = max(dist.values())
    while True:
        last = [v for v, d in dist.items() if d == ecc]
        x = min(last, key=lambda v: (deg[v], v))
        dx = _levels(adj, x, alive)
        ex = max(dx.values())
        if ex <= ecc:
            return r
        r, dist, ecc = x, dx, ex


def _components(adj, n):
    comp = [-1] * n
    out = []
    for s in range(n):
        if comp[s] < 0:
            comp[s] = len(out)
            nodes = [s]
            head = 0
            while head < len(nodes):
                for v in adj[nodes[head]]:
                    if comp[v] < 0:
                        comp[v] = len(out)
                        nodes.append(v)
                head += 1
            out.append(sorted(nodes))
    return out


def _rcm(adj, n, starts_of, largest_first=False) -> list:
    """RCM of the whole graph: each component from ``starts_of(component)``, components by smallest label."""
    deg = [len(a) for a in adj]
    seen = [False] * n
    order = []
    for comp in _components(adj, n):
        order += _component_bfs(adj, starts_of(comp, deg), deg, seen, largest_first)
    return order[::-1]


def _profile(order, ends):
    """``(sep, cut, spans)`` of an order as NumPy arrays: per bond b (between wires b and b+1),
    ``sep_b = min(#left nodes with a right neighbour, #right nodes with a left neighbour)`` and
    ``cut_b`` = the number of edges across it; ``spans`` per edge. ``ends``: (m, 2) int array."""
    n = len(order)
    pos = np.empty(n, dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(n)
    wires = np.arange(n)
    if not len(ends):
        zero = np.zeros(max(n - 1, 0), dtype=np.int64)
        return zero, zero, np.zeros(0, dtype=np.int64)
    pu, pv = pos[ends[:, 0]], pos[ends[:, 1]]
    a, b = np.minimum(pu, pv), np.maximum(pu, pv)
    # the node on wire w counts on the left of bonds w … hi[w]−1 (hi: its farthest right
    # neighbour), and on the right of bonds lo[w] … w−1; difference arrays make both O(n + m)
    hi = wires.copy()
    np.maximum.at(hi, a, b)
    lo = wires.copy()
    np.minimum.at(lo, b, a)
    r, q = wires[hi > wires], wires[lo < wires]
    left = np.cumsum(np.bincount(r, minlength=n + 1) - np.bincount(hi[r], minlength=n + 1))[:n - 1]
    right = np.cumsum(np.bincount(lo[q], minlength=n + 1) - np.bincount(q, minlength=n + 1))[:n - 1]
    cut = np.cumsum(np.bincount(a, minlength=n + 1) - np.bincount(b, minlength=n + 1))[:n - 1]
    return np.minimum(left, right), cut, b - a


def _score(order, ends):
    """What "rcm-best" minimises: the separation profile (largest first), then bandwidth, then total span."""
    sep, _, spans = _profile(order, ends)
    return (sorted(sep.tolist(), reverse=True), int(spans.max(initial=0)), int(spans.sum()))


def _refine_key(order, ends):
    """What the refinement minimises: the largest separation (it never grows), then
    Σ_b cut_b · 8^sep_b: each SWAP or gate across bond b costs an SVD ∝ χ_b³ with χ_b ≤ 2^sep_b,
    and cut_b edges are routed across it; then bandwidth and total span."""
    sep, cut, spans = _profile(order, ends)
    # 8^300 still fits a float64; orders that far apart are beyond any simulation anyway
    work = float((cut * np.exp2(3.0 * np.minimum(sep, 300))).sum())
    # on ties (the hill climb takes sideways moves) keep edges short: a ring laid out 0 … n−1 has
    # the profile of the bandwidth-2 zigzag
    return (int(sep.max(initial=0)), work, int(spans.max(initial=0)), int(spans.sum()))


# The refinement evaluates each move in O(n + m) (NumPy); this many node-moves in all keeps "auto"
# well under a second up to a few hundred nodes.
_REFINE_WORK = 200_000


def _refine(order, ends, steps, seed=0):
    """Hill climbing on node moves (take one node out, reinsert it elsewhere), deterministic."""
    import random
    rng = random.Random(seed)
    n = len(order)
    cur, key = list(order), _refine_key(order, ends)
    for _ in range(steps):
        i, j = rng.randrange(n), rng.randrange(n)
        if i == j:
            continue
        cand = list(cur)
        cand.insert(j, cand.pop(i))
        k = _refine_key(cand, ends)
        if k <= key:                       # sideways moves too: the profile has long plateaus
            cur, key = cand, k
    return cur


def wire_order(graph, n_nodes: Optional[int] = None, method: str = "auto", steps: Optional[int] = None) -> list:
    """A node order for an MPS: ``order[w]`` is the node placed on wire ``w`` (a permutation).

    ``graph``: an edge list ``[(u, v), ...]`` / ``[(u, v, w), ...]``, a dict ``{(u, v): w}``, an
    ``(m, 2|3)`` array, a ``networkx.Graph``, a :class:`tql.optimization.Graph` or a
    :class:`tql.optimization.Problem` (its interaction graph: the qubit pairs its cost couples);
    ``n_nodes`` adds isolated nodes (as in ``opt.as_graph``). ``method``:

    * ``"rcm"`` — reverse Cuthill–McKee from a George–Liu pseudo-peripheral node of each
      connected component (components in order of their smallest label);
    * ``"rcm-best"`` — RCM from every node as start (up to ~220 nodes; beyond, max(16, 50000 / n)
      spread starts) with
      both neighbour tie-break rules (and the ``"rcm"`` order), keeping the one with the smallest
      :func:`bond_bounds` profile (largest bond first), then bandwidth, then total edge span;
    * ``"auto"`` (default) — ``"rcm-best"`` refined by ``steps`` deterministic hill-climbing moves
      (one node moved elsewhere; default ``min(20 n, 200000 / n)``) that never raise the largest
      bond bound and lower the routing work ``Σ_b cut_b · χ_b³`` (``cut_b`` edges cross bond b,
      ``χ_b`` its bound). On random 3-regular graphs of 30–60 nodes (seeds 0–2) this lowers the
      exact p = 1 bond bound 2–64× below ``"rcm"``'s (``python benchmarks/mps.py --order``); it
      takes ~0.1 s at 40 nodes, ~1 s at 100, a few seconds at 1000 (pass ``steps=0`` to skip);
    * ``"identity"`` — ``[0, 1, …, n−1]``.

    The bandwidth a small bond needs is not the bandwidth minimum: ``"auto"`` may accept a
    slightly larger bandwidth for a thinner bond profile.
    """
    if not isinstance(method, str) or method not in ORDER_METHODS:
        raise ValueError(f"wire_order: method must be one of {ORDER_METHODS}, got {method!r}")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0):
        raise ValueError(f"wire_order: steps must be an int >= 0 or None, got {steps!r}")
    if steps is not None and method != "auto":
        raise ValueError(f"wire_order: steps refines method='auto' only, got method={method!r}")
    n, edges = _edges_of(graph, n_nodes, "wire_order")
    if method == "identity":
        return list(range(n))
    adj = _adjacency(n, edges)
    for a in adj:
        a.sort()

    def peripheral(comp, deg):
        alive = [False] * n
        for v in comp:
            alive[v] = True
        return _pseudo_peripheral(adj, deg, min(comp, key=lambda v: (deg[v], v)), alive)

    best = _rcm(adj, n, peripheral)
    if method == "rcm" or not edges:
        return best
    comps = _components(adj, n)
    ends = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    best_key = _score(best, ends)
    # each component's start is chosen independently, so try start k of every component at once
    spread = max(len(c) for c in comps)
    k_max = max(16, _START_WORK // n)
    tries = range(spread) if spread <= k_max else sorted(
        {round(i * (spread - 1) / (k_max - 1)) for i in range(k_max)})
    for k in tries:
        for largest_first in (False, True):
            cand = _rcm(adj, n, lambda comp, deg: comp[k % len(comp)], largest_first)
            key = _score(cand, ends)
            if key < best_key:
                best, best_key = cand, key
    if method == "rcm-best":
        return best
    if steps is None:
        steps = min(20 * n, _REFINE_WORK // max(n, 1))
    return _refine(best, ends, int(steps)) if n > 2 else best


# -- quality of an order -----------------------------------------------------------------------
def _graph_and_order(graph, order, n_nodes, what):
    n, edges = _edges_of(graph, n_nodes, what)
    order = list(range(n)) if order is None else check_order(order, n, f"{what}: order")
    return n, edges, order


def edge_spans(graph, order=None, n_nodes: Optional[int] = None) -> list:
    """``|wire(u) − wire(v)|`` of every edge, in the graph's edge order (``order=None``: node i on wire i).
    A two-qubit gate on an edge costs ``2 (span − 1)`` SWAPs on an MPS."""
    n, edges, order = _graph_and_order(graph, order, n_nodes, "edge_spans")
    pos = _positions(order)
    return [abs(pos[u] - pos[v]) for u, v in edges]


def bandwidth(graph, order=None, n_nodes: Optional[int] = None) -> int:
    """The largest :func:`edge_spans` entry under ``order`` (``order[w]`` = node on wire ``w``;
    ``None``: the identity); 0 for a graph without edges."""
    return max(edge_spans(graph, order, n_nodes), default=0)


def bond_bounds(graph, order=None, p: int = 1, n_nodes: Optional[int] = None) -> list:
    """Upper bounds on the ``n − 1`` exact bond dimensions of a p-layer QAOA state of ``graph``
    (X mixer, cost couplings on the graph's edges) with nodes placed by ``order``.

    Why it holds: across bond b, the cost layer's crossing part ``exp(−iγ Σ J_uv Z_u Z_v)`` is
    diagonal and depends on the left side only through the ``L_b`` left nodes that have a
    neighbour on the right, so its operator Schmidt rank is at most ``2^{L_b}``, and likewise
    ``2^{R_b}``; one-qubit gates and gates within one side do not change Schmidt ranks. After p
    layers the rank is at most ``2^{p·min(L_b, R_b)}``, and never above ``2^{min(b+1, n−b−1)}``.
    ``max_bond`` at or above ``max(bond_bounds(...))`` simulates the circuit without truncation.
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 1:
        raise ValueError(f"bond_bounds: p must be an int >= 1, got {p!r}")
    n, edges, order = _graph_and_order(graph, order, n_nodes, "bond_bounds")
    seps, _, _ = _profile(order, np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    return [2 ** min(int(p) * s, b + 1, n - b - 1) for b, s in enumerate(seps.tolist())]


# -- relabelling -------------------------------------------------------------------------------
def _bits_tensor(bits, n, what):
    t = bits if isinstance(bits, torch.Tensor) else torch.as_tensor(bits)
    if t.dim() == 0 or t.shape[-1] != n:
        raise ValueError(f"{what}: bits must have shape (..., {n}) (one column per wire), got {tuple(t.shape)}")
    return t


def to_nodes(bits, order) -> torch.Tensor:
    """Bit rows in wire order ``(..., n)`` (``MPS.sample``'s ``(B, shots, n)``) → the same rows in
    node order: column ``order[w]`` of the result is column ``w`` of ``bits``."""
    order = check_order(order, None, "to_nodes: order")
    t = _bits_tensor(bits, len(order), "to_nodes")
    return t[..., torch.tensor(_positions(order), device=t.device)]


def to_wires(bits, order) -> torch.Tensor:
    """Bit rows in node order ``(..., n)`` → wire order (the inverse of :func:`to_nodes`)."""
    order = check_order(order, None, "to_wires: order")
    t = _bits_tensor(bits, len(order), "to_wires")
    return t[..., torch.tensor(order, device=t.device)]


def _relabel_pauli(p, pos, n):
    from ..observables import PauliString
    return PauliString({pos[w]: letter for w, letter in p.ops.items()}, n_wires=n)


def _relabel_problem(problem, order, pos):
    from ..optimization.graphs import Graph
    from ..optimization.problems import Problem
    n = problem.n_qubits
    perm = torch.tensor(pos)
    sym = problem.qubo + torch.triu(problem.qubo, 1).T        # symmetric off-diagonal, diagonal once
    q = torch.zeros_like(sym)
    q[perm.unsqueeze(1), perm.unsqueeze(0)] = sym               # q[pos u, pos v] = sym[u, v]
    qubo = torch.triu(q, 1) + torch.diag(torch.diagonal(q))
    inv = torch.tensor(pos)                 # node v's bit is wire pos[v]'s bit

    def wrap(fn):
        return None if fn is None else (lambda bits: fn(bits[..., inv.to(bits.device)]))

    decode = encode = None
    if problem.decode_fn is not None:
        def decode(bits, repair):
            return problem.decode_fn([bits[w] for w in pos], repair)
    if problem.encode_fn is not None:
        def encode(solution):
            node_bits = list(problem.encode_fn(solution))
            return [node_bits[v] for v in order]
    data = {"wire_order": tuple(order), "original": problem}
    g = problem.data.get("graph")
    # only where node v is qubit v (MaxCut, MIS, …): a colouring's graph has fewer nodes than qubits
    if isinstance(g, Graph) and g.n_nodes == n:
        data["graph"] = Graph(g.n_nodes, torch.sort(perm[g.edges], dim=1).values.reshape(-1, 2), g.weights.clone())
    groups = tuple(tuple(pos[q] for q in grp) for grp in problem.mixer_groups)
    return Problem(problem.name, n, qubo, problem.offset, problem.objective_name, problem.sense,
                   wrap(problem.objective_fn), wrap(problem.feasible_fn), decode, encode,
                   mixer_groups=groups, data=data)


def relabel(obj, order, n_nodes: Optional[int] = None):
    """``obj`` with node ``order[w]`` renamed wire ``w`` (``order`` from :func:`wire_order`).

    * a graph (any format :func:`wire_order` takes) → a :class:`tql.optimization.Graph` with the
      same weights;
    * a :class:`tql.optimization.Problem` → a Problem on wires: its QUBO, Hamiltonian and cost
      diagonal are permuted; ``cost`` / ``objective`` / ``is_feasible`` take bitstrings in wire
      order (so ``opt.exact_solution`` and the QAOA builders work unchanged), ``decode`` returns the
      solution in the ORIGINAL node labels and ``encode`` takes one; ``data["graph"]`` (where
      node v is qubit v: MaxCut, independent set, …) is relabelled, ``data["original"]`` / ``data["wire_order"]`` keep the way back;
      problem-specific data indexed by node (TSP layouts, node weights) is not carried over;
    * a :class:`~tql.Hamiltonian` or :class:`~tql.PauliString` on n = ``len(order)`` wires →
      the same operator on the relabelled wires.

    Expectation values do not change; to read samples of the relabelled circuit in node labels
    use :func:`to_nodes`.
    """
    from ..observables import Hamiltonian, PauliString
    if isinstance(obj, (Hamiltonian, PauliString)):
        order = check_order(order, None, "relabel: order")
        n = len(order)
        if obj.n_wires > n:
            raise ValueError(f"relabel: the operator acts on wire {obj.n_wires - 1} but order has {n} entries")
        pos = _positions(order)
        if isinstance(obj, PauliString):
            return _relabel_pauli(obj, pos, n)
        return Hamiltonian([(c, _relabel_pauli(p, pos, n)) for c, p in obj.terms], n_wires=n)
    if _is_problem(obj):
        if n_nodes is not None:
            raise ValueError("relabel: n_nodes is read from the problem; leave it None")
        order = check_order(order, obj.n_qubits, "relabel: order")
        return _relabel_problem(obj, order, _positions(order))
    from ..optimization.graphs import Graph, as_graph
    g = as_graph(obj, n_nodes, "relabel: graph", allow_negative=True)
    order = check_order(order, g.n_nodes, "relabel: order")
    e = torch.tensor(_positions(order), dtype=torch.int64)[g.edges]
    return Graph(g.n_nodes, torch.sort(e, dim=1).values.reshape(-1, 2), g.weights.clone())


# -- QAOA --------------------------------------------------------------------------------------
class QAOAOnWires(NamedTuple):
    """:func:`qaoa_circuit`'s result: ``circuit`` (on wires), ``problem`` (the relabelled problem:
    its ``hamiltonian`` is the observable for ``circuit``), ``order`` (``order[w]`` = node on wire w)."""
    circuit: object
    problem: object
    order: list

    @property
    def hamiltonian(self):
        return self.problem.hamiltonian

    def to_nodes(self, bits) -> torch.Tensor:
        """Wire-ordered bit rows (``MPS.sample``) → node order, for the original problem."""
        return to_nodes(bits, self.order)


def qaoa_circuit(problem, p: int, order="auto", dtype=None, device=None) -> QAOAOnWires:
    """``opt.qaoa_circuit(problem, p)`` with the nodes placed on MPS wires by ``order``.

    ``order``: ``"auto"`` / ``"rcm-best"`` / ``"rcm"`` / ``"identity"`` (a :func:`wire_order` method on the problem's
    interaction graph) or an explicit permutation (``order[w]`` = node on wire ``w``). Returns
    :class:`QAOAOnWires` ``(circuit, problem_on_wires, order)``: feed ``circuit`` and
    ``.hamiltonian`` to ``tql.mps.expval`` / ``tql.mps.run`` / ``QuantumLayer(simulator="mps")``
    (the energy is the original problem's), and map samples back with ``.to_nodes(bits)``.
    """
    from ..optimization.qaoa_gate_circuit import qaoa_circuit as build
    if not _is_problem(problem):
        raise TypeError(f"mps.qaoa_circuit: problem must be a tql.optimization.Problem, got "
                        f"{type(problem).__name__}")
    if isinstance(order, str):
        if order not in ORDER_METHODS:
            raise ValueError(f"mps.qaoa_circuit: order must be one of {ORDER_METHODS} or a permutation, "
                             f"got {order!r}")
        order = wire_order(problem, method=order)
    else:
        order = check_order(order, problem.n_qubits, "mps.qaoa_circuit: order")
    wired = relabel(problem, order)
    return QAOAOnWires(build(wired, p, dtype=dtype, device=device), wired, order)
