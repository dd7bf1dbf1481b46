"""Combinatorial optimisation problems as diagonal (all-Z) cost Hamiltonians.

A :class:`Problem` holds a cost function of n binary variables ``x ∈ {0, 1}^n`` written as a QUBO,

    C(x) = offset + Σ_i Q_ii x_i + Σ_{i<j} Q_ij x_i x_j ,

**to be minimised**. Bit ``x_w`` is the computational-basis value of wire ``w`` (wire 0 is the most
significant bit of a basis index, as everywhere in the library), so the cost operator is the
diagonal Hamiltonian obtained with ``x_w = (1 - Z_w) / 2``:

    H = c_0 + Σ_i h_i Z_i + Σ_{i<j} J_ij Z_i Z_j ,      ⟨x|H|x⟩ = C(x).

Maximisation problems are negated: MaxCut's cost is ``-cut`` and a state's expected cut is
``-⟨H⟩``. Each problem also keeps its objective in natural units (cut weight, set weight, tour length
…, with ``sense`` saying whether it is maximised or minimised), a feasibility check for
constrained problems (penalty encodings), a decoder from a bitstring to a solution that repairs
infeasible bitstrings, and the cost diagonal: the vector of all ``2^n`` costs, computed once by
one small GEMM (no loop over bitstrings) and cached.

Builders: :func:`maxcut`, :func:`max_independent_set`, :func:`min_vertex_cover`, :func:`max_clique`,
:func:`number_partitioning`, :func:`graph_colouring`, :func:`tsp`, :func:`portfolio`,
:func:`from_qubo`, :func:`from_ising`. :func:`exact_solution` brute-forces the optimum from the
diagonal up to :data:`MAX_EXACT_QUBITS` qubits.

Arguments ``x`` of the vectorised methods (:meth:`Problem.cost`, :meth:`Problem.objective`,
:meth:`Problem.is_feasible`) are basis indices (an int or a 1-D integer tensor), bitstrings
(``"0110"`` or a list of them) or a 2-D ``(K, n)`` tensor of 0/1 bits.
"""
from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .graphs import Graph, as_graph

__all__ = ["Problem", "ExactSolution", "exact_solution", "maxcut", "max_independent_set",
           "min_vertex_cover", "max_clique", "number_partitioning", "graph_colouring", "graph_coloring",
           "tsp", "portfolio", "from_qubo", "from_ising", "MAX_EXACT_QUBITS", "MAX_DIAGONAL_QUBITS",
           "bits_of", "index_of"]

MAX_EXACT_QUBITS = 26
""":func:`exact_solution` brute-forces at most this many qubits (2^26 costs, 512 MiB in float64)."""

MAX_DIAGONAL_QUBITS = 30
""":attr:`Problem.diagonal` refuses more qubits than this (2^30 float64 = 8 GiB)."""

_CHUNK = 2 ** 18          # bitstrings per chunk in the vectorised helpers over all 2^n states


# ------------------------------------------------------------------------------------------------
# bit helpers (wire 0 = most significant bit)
def bits_of(index: torch.Tensor, n: int) -> torch.Tensor:
    """Basis indices ``(K,)`` → bits ``(K, n)`` int64, wire 0 first."""
    shifts = torch.arange(n - 1, -1, -1, device=index.device, dtype=torch.int64)
    return (index.to(torch.int64).unsqueeze(-1) >> shifts) & 1


def index_of(bits: torch.Tensor) -> torch.Tensor:
    """Bits ``(K, n)`` (wire 0 first) → basis indices ``(K,)`` int64."""
    n = bits.shape[-1]
    weights = (1 << torch.arange(n - 1, -1, -1, device=bits.device, dtype=torch.int64))
    return (bits.to(torch.int64) * weights).sum(-1)


def _as_index(x, n: int, what: str):
    """-> (indices (K,) int64 on CPU, squeeze flag)."""
    if isinstance(x, str):
        return _parse_bitstrings([x], n, what), True
    if isinstance(x, (list, tuple)) and x and all(isinstance(s, str) for s in x):
        return _parse_bitstrings(list(x), n, what), False
    if isinstance(x, bool):
        raise TypeError(f"{what}: expected a basis index, a bitstring or bits, got a bool")
    if isinstance(x, numbers.Integral):
        idx = torch.tensor([int(x)], dtype=torch.int64)
        squeeze = True
    else:
        try:
            t = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{what}: expected a basis index, a bitstring or 0/1 bits, got "
                            f"{type(x).__name__}") from None
        if t.is_complex() or (t.is_floating_point() and not bool((t == t.round()).all())):
            raise TypeError(f"{what}: expected integer indices or 0/1 bits, got {t.dtype} values")
        t = t.to(torch.int64)
        if t.dim() == 0:
            idx, squeeze = t.reshape(1), True
        elif t.dim() == 1:
            idx, squeeze = t, False
        elif t.dim() == 2:
            if t.shape[1] != n:
                raise ValueError(f"{what}: bits must have shape (K, {n}), got {tuple(t.shape)}")
            if t.numel() and (int(t.min()) < 0 or int(t.max()) > 1):
                raise ValueError(f"{what}: bits must be 0 or 1")
            return index_of(t), False
        else:
            raise ValueError(f"{what}: expected indices (K,), bits (K, {n}) or bitstrings, got shape "
                             f"{tuple(t.shape)}")
    idx = idx.cpu()
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= 2 ** n):
        bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
        raise ValueError(f"{what}: basis index {bad} is out of range [0, 2**{n})")
    return idx, squeeze


def _parse_bitstrings(strings, n, what):
    out = []
    for s in strings:
        if len(s) != n or any(ch not in "01" for ch in s):
            raise ValueError(f"{what}: bitstring {s!r} must have {n} characters 0/1 (wire 0 first)")
        out.append(int(s, 2))
    return torch.tensor(out, dtype=torch.int64)


def _one_bits(x, n: int, what: str) -> list:
    """One solution's bits as a Python list (for decoders)."""
    if isinstance(x, (list, tuple)) and len(x) == n and all(isinstance(b, numbers.Integral)
                                                           and not isinstance(b, bool) and b in (0, 1)
                                                           for b in x) and n > 1:
        return [int(b) for b in x]
    if isinstance(x, torch.Tensor) and x.dim() == 1 and x.shape[0] == n and n > 1:
        if bool(((x == 0) | (x == 1)).all()):
            return [int(b) for b in x.tolist()]
    idx, squeeze = _as_index(x, n, what)
    if idx.numel() != 1:
        raise ValueError(f"{what}: give one bitstring, got {idx.numel()}")
    return bits_of(idx, n)[0].tolist()


def _chunked(fn, idx: torch.Tensor, n: int) -> torch.Tensor:
    if idx.numel() <= _CHUNK:
        return fn(bits_of(idx, n))
    return torch.cat([fn(bits_of(idx[i:i + _CHUNK], n)) for i in range(0, idx.numel(), _CHUNK)])


# ------------------------------------------------------------------------------------------------
# the diagonal
def _bit_matrix(k: int) -> torch.Tensor:
    return bits_of(torch.arange(2 ** k), k).to(torch.float64)


def qubo_diagonal(Q: torch.Tensor, offset: float = 0.0) -> torch.Tensor:
    """All ``2^n`` values of ``offset + Σ_{i<=j} Q_ij x_i x_j`` (``Q`` upper triangular, float64).

    Split the wires into a high half (a bits) and a low half (b bits): ``C[hi, lo] = c_hi[hi] +
    c_lo[lo] + X_hi Q_cross X_lo^T``, one ``(2^a, a) @ (a, b) @ (b, 2^b)`` GEMM; exact in float64
    for integer data.
    """
    n = Q.shape[0]
    if n <= 12:
        X = _bit_matrix(n)
        return offset + ((X @ Q) * X).sum(1)
    a = n // 2
    b = n - a
    Xh, Xl = _bit_matrix(a), _bit_matrix(b)
    ch = ((Xh @ Q[:a, :a]) * Xh).sum(1)
    cl = ((Xl @ Q[a:, a:]) * Xl).sum(1)
    out = (Xh @ Q[:a, a:]) @ Xl.T
    out += ch[:, None]
    out += cl[None, :]
    out += offset
    return out.reshape(-1)


class _QuboBuilder:
    """Accumulates a QUBO: cost = const + Σ_{i<=j} U_ij x_i x_j with U upper triangular."""

    def __init__(self, n: int):
        self.n = n
        self.U = torch.zeros(n, n, dtype=torch.float64)
        self.const = 0.0

    def linear(self, i: int, c: float):
        self.U[i, i] += c

    def quadratic(self, i: int, j: int, c: float):
        if i == j:
            self.U[i, i] += c
        else:
            self.U[min(i, j), max(i, j)] += c

    def square(self, terms, const: float, scale: float = 1.0):
        """Add ``scale * (const + Σ a_i x_i)^2`` for terms [(i, a_i)] with distinct i."""
        self.const += scale * const * const
        for k, (i, a) in enumerate(terms):
            self.U[i, i] += scale * (2 * const * a + a * a)
            for j, b in terms[k + 1:]:
                self.quadratic(i, j, scale * 2 * a * b)


# ------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class Problem:
    """A combinatorial optimisation problem with a diagonal cost Hamiltonian (to MINIMISE).

    ``qubo`` (n × n, upper triangular, float64) and ``offset`` define the cost
    ``C(x) = offset + Σ_{i<=j} qubo[i, j] x_i x_j`` of bitstrings ``x`` (bit w = wire w, wire 0 the
    most significant bit of a basis index). :attr:`hamiltonian` is the same cost as an all-Z
    :class:`~torchquantum_layers.observables.Hamiltonian`, :attr:`diagonal` the vector of all 2^n
    costs. ``objective_name`` / ``sense`` describe the natural objective (e.g. ``"cut weight"``,
    ``"max"``); :meth:`objective` evaluates it, :meth:`is_feasible` checks the constraints,
    :meth:`decode` turns a bitstring into a solution (repairing infeasible ones), :meth:`encode`
    does the reverse.
    """

    name: str
    n_qubits: int
    qubo: torch.Tensor
    offset: float
    objective_name: str
    sense: str
    objective_fn: Callable = field(repr=False)
    feasible_fn: Optional[Callable] = field(default=None, repr=False)
    decode_fn: Optional[Callable] = field(default=None, repr=False)
    encode_fn: Optional[Callable] = field(default=None, repr=False)
    mixer_groups: tuple = field(default=(), repr=False)
    data: dict = field(default_factory=dict, repr=False)
    _cache: dict = field(default_factory=dict, repr=False)

    # -- the cost ------------------------------------------------------------------------------
    @property
    def is_constrained(self) -> bool:
        return self.feasible_fn is not None

    @property
    def diagonal(self) -> torch.Tensor:
        """All ``2^n`` costs (float64, CPU, index = basis state), computed once and cached."""
        d = self._cache.get("diagonal")
        if d is None:
            n = self.n_qubits
            if n > MAX_DIAGONAL_QUBITS:
                raise ValueError(f"{self.name}: the cost diagonal of {n} qubits has 2**{n} entries "
                                 f"({8 * 2 ** n / 2 ** 30:.0f} GiB); the limit is {MAX_DIAGONAL_QUBITS} "
                                 f"qubits (the Hamiltonian, costs of given bitstrings and decoding still work)")
            d = qubo_diagonal(self.qubo, self.offset)
            self._cache["diagonal"] = d
        return d

    def ising(self):
        """``(h, J, c)``: ``C = c + Σ h_i z_i + Σ_{i<j} J_ij z_i z_j`` with spins ``z = 1 - 2x``
        (the eigenvalues of Z); ``J`` is upper triangular (n × n), all float64."""
        U = self.qubo
        lin = torch.diagonal(U).clone()
        quad = torch.triu(U, 1)
        J = quad / 4
        h = -lin / 2 - (quad.sum(1) + quad.sum(0)) / 4
        c = self.offset + float(lin.sum()) / 2 + float(quad.sum()) / 4
        return h, J, c

    @property
    def hamiltonian(self):
        """The cost as an all-Z :class:`~torchquantum_layers.observables.Hamiltonian` on n wires."""
        H = self._cache.get("hamiltonian")
        if H is None:
            from ..observables import Hamiltonian
            h, J, c = self.ising()
            terms = []
            if c != 0:
                terms.append((c, ""))
            for i, v in enumerate(h.tolist()):
                if v != 0:
                    terms.append((v, f"Z{i}"))
            nz = torch.nonzero(J).tolist()
            for i, j in nz:
                terms.append((float(J[i, j]), f"Z{i} Z{j}"))
            H = Hamiltonian(terms, n_wires=self.n_qubits)
            self._cache["hamiltonian"] = H
        return H

    def cost(self, x) -> torch.Tensor:
        """Cost ``C(x)`` (float64) of bitstrings/indices ``x`` (see the module docstring)."""
        idx, squeeze = _as_index(x, self.n_qubits, f"{self.name}.cost")
        U, off = self.qubo, self.offset

        def fn(bits):
            X = bits.to(torch.float64)
            return off + ((X @ U) * X).sum(1)
        out = _chunked(fn, idx, self.n_qubits)
        return out[0] if squeeze else out

    # -- natural objective, constraints, decoding ----------------------------------------------
    def objective(self, x) -> torch.Tensor:
        """The objective in natural units (float64), meaningful on feasible bitstrings."""
        idx, squeeze = _as_index(x, self.n_qubits, f"{self.name}.objective")
        out = _chunked(self.objective_fn, idx, self.n_qubits).to(torch.float64)
        return out[0] if squeeze else out

    def is_feasible(self, x) -> torch.Tensor:
        """Bool tensor: whether each bitstring satisfies the constraints (all True if unconstrained)."""
        idx, squeeze = _as_index(x, self.n_qubits, f"{self.name}.is_feasible")
        if self.feasible_fn is None:
            out = torch.ones(idx.shape[0], dtype=torch.bool)
        else:
            out = _chunked(self.feasible_fn, idx, self.n_qubits)
        return out[0] if squeeze else out

    def feasible_mask(self) -> torch.Tensor:
        """Bool ``(2^n,)``: feasibility of every basis state (cached)."""
        m = self._cache.get("feasible_mask")
        if m is None:
            n = self.n_qubits
            if n > MAX_DIAGONAL_QUBITS:
                raise ValueError(f"{self.name}: {n} qubits is too many to list all 2**{n} states "
                                 f"(limit {MAX_DIAGONAL_QUBITS})")
            if self.feasible_fn is None:
                m = torch.ones(2 ** n, dtype=torch.bool)
            else:
                m = _chunked(self.feasible_fn, torch.arange(2 ** n), n)
            self._cache["feasible_mask"] = m
        return m

    def objective_vector(self) -> torch.Tensor:
        """The natural objective of every basis state ``(2^n,)`` float64 (cached)."""
        v = self._cache.get("objective_vector")
        if v is None:
            n = self.n_qubits
            if n > MAX_DIAGONAL_QUBITS:
                raise ValueError(f"{self.name}: {n} qubits is too many to list all 2**{n} states "
                                 f"(limit {MAX_DIAGONAL_QUBITS})")
            v = _chunked(self.objective_fn, torch.arange(2 ** n), n).to(torch.float64)
            self._cache["objective_vector"] = v
        return v

    def decode(self, x, repair: bool = True):
        """The solution encoded by one bitstring (``"0110"``, an index, or a 0/1 list of length n).

        With ``repair=True`` (default) an infeasible bitstring is first repaired greedily, so the
        result is always a valid solution; feasible bitstrings are decoded unchanged.
        """
        bits = _one_bits(x, self.n_qubits, f"{self.name}.decode")
        return self.decode_fn(bits, repair)

    def encode(self, solution) -> int:
        """The basis index of a solution in the form :meth:`decode` returns."""
        if self.encode_fn is None:
            raise NotImplementedError(f"{self.name}: encode is not available")
        bits = self.encode_fn(solution)
        return int("".join(map(str, bits)), 2)

    def bitstring(self, index: int) -> str:
        return format(int(index), f"0{self.n_qubits}b")

    def evaluate(self, x) -> dict:
        """Summary of one bitstring: ``bitstring``, ``cost``, ``objective``, ``feasible``, ``solution``."""
        idx, squeeze = _as_index(x, self.n_qubits, f"{self.name}.evaluate")
        if idx.numel() != 1:
            raise ValueError(f"{self.name}.evaluate: give one bitstring, got {idx.numel()}")
        i = int(idx[0])
        return {"bitstring": self.bitstring(i), "cost": float(self.cost(i)),
                "objective": float(self.objective(i)), "feasible": bool(self.is_feasible(i)),
                "solution": self.decode(i)}

    def __repr__(self) -> str:
        return (f"Problem({self.name!r}, n_qubits={self.n_qubits}, objective={self.objective_name!r} "
                f"({self.sense}), constrained={self.is_constrained})")


# ------------------------------------------------------------------------------------------------
# argument checks
def _number(v, name, what, positive=False, nonneg=False) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_complex():
            v = v.item()
        else:
            raise TypeError(f"{what}: {name} must be a real number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{what}: {name} must be finite, got {v}")
    if positive and v <= 0:
        raise ValueError(f"{what}: {name} must be > 0, got {v}")
    if nonneg and v < 0:
        raise ValueError(f"{what}: {name} must be >= 0, got {v}")
    return v


def _real_tensor(v, name, what, kind) -> torch.Tensor:
    """``v`` as a float64 CPU tensor, or a TypeError naming ``name`` and the ``kind`` it must be."""
    if isinstance(v, (str, bytes)):
        raise TypeError(f"{what}: {name} must be {kind}, got a string")
    try:
        t = torch.as_tensor(v, dtype=torch.float64) if not isinstance(v, torch.Tensor) else v.detach()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{what}: {name} must be {kind} of real numbers") from None
    if t.is_complex():
        raise TypeError(f"{what}: {name} must be real, got {t.dtype}")
    return t.to(torch.float64).cpu()


def _vector(v, n, name, what, nonneg=False) -> torch.Tensor:
    t = _real_tensor(v, name, what, "a sequence")
    if t.dim() != 1 or (n is not None and t.shape[0] != n):
        want = f"({n},)" if n is not None else "1-D"
        raise ValueError(f"{what}: {name} must have shape {want}, got {tuple(t.shape)}")
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"{what}: {name}[{i}] is {float(t[i])} (values must be finite)")
    if nonneg and bool((t < 0).any()):
        i = int((t < 0).nonzero()[0, 0])
        raise ValueError(f"{what}: {name}[{i}] is negative ({float(t[i])}); {name} must be >= 0")
    return t


def _matrix(v, n, name, what) -> torch.Tensor:
    t = _real_tensor(v, name, what, "a square matrix")
    if t.dim() != 2 or t.shape[0] != t.shape[1] or (n is not None and t.shape[0] != n):
        want = f"({n}, {n})" if n is not None else "square (n, n)"
        raise ValueError(f"{what}: {name} must have shape {want}, got {tuple(t.shape)}")
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        i, j = bad.nonzero()[0].tolist()
        raise ValueError(f"{what}: {name}[{i}, {j}] is {float(t[i, j])} (entries must be finite)")
    return t


def _penalty(penalty, default, what, lower=None, lower_name=""):
    if penalty is None:
        return default
    p = _number(penalty, "penalty", what, positive=True)
    if lower is not None and p <= lower:
        warnings.warn(f"{what}: penalty {p} <= {lower_name} ({lower}); the minimum of the cost may then "
                      f"be an infeasible bitstring", stacklevel=3)
    return p


def _node_weights(node_weights, n, what):
    if node_weights is None:
        return torch.ones(n, dtype=torch.float64)
    return _vector(node_weights, n, "node_weights", what, nonneg=True)


def _sorted_nodes(bits) -> list:
    return [i for i, b in enumerate(bits) if b]


def _bits_from_nodes(nodes, n, what) -> list:
    bits = [0] * n
    for v in nodes:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < n:
            raise ValueError(f"{what}.encode: node {v!r} is not in 0 … {n - 1}")
        bits[int(v)] = 1
    return bits


# ------------------------------------------------------------------------------------------------
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

    def decode(bits, repair):
        return ([i for i, b in enumerate(bits) if not b], _sorted_nodes(bits))

    def encode(sol):
        side1 = sol[1] if isinstance(sol, tuple) and len(sol) == 2 else sol
        return _bits_from_nodes(side1, n, what)
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


# ------------------------------------------------------------------------------------------------
def number_partitioning(numbers_) -> Problem:
    """Split numbers ``a_i`` into two sets with sums as equal as possible.

    Cost ``C(x) = (Σ_i a_i z_i)^2`` with spins ``z_i = 1 - 2 x_i`` (the squared difference of the two
    sums); ``objective`` is the absolute difference ``|Σ a_i z_i|`` (``"min"``). Numbers must be
    finite (negative values are allowed). ``decode`` returns the two index lists ``(set0, set1)``.
    """
    what = "number_partitioning"
    a = _vector(numbers_, None, "numbers", what)
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"{what}: need at least 2 numbers, got {n}")
    qb = _QuboBuilder(n)
    # (Σ a_i (1 - 2 x_i))^2 = (S - 2 Σ a_i x_i)^2
    qb.square([(i, -2 * float(a[i])) for i in range(n)], float(a.sum()))
    S = float(a.sum())

    def objective(bits):
        return (S - 2 * (bits.to(torch.float64) @ a)).abs()

    def decode(bits, repair):
        return ([i for i, b in enumerate(bits) if not b], _sorted_nodes(bits))

    def encode(sol):
        side1 = sol[1] if isinstance(sol, tuple) and len(sol) == 2 else sol
        return _bits_from_nodes(side1, n, what)
    return Problem(what, n, qb.U, qb.const, "sum difference", "min", objective, None, decode, encode,
                   data={"numbers": a})


# ------------------------------------------------------------------------------------------------
def _nearest_neighbour_length(D: torch.Tensor) -> float:
    n = D.shape[0]
    tour, left = [0], set(range(1, n))
    while left:
        here = tour[-1]
        nxt = min(left, key=lambda c: (float(D[here, c]), c))
        tour.append(nxt)
        left.discard(nxt)
    return sum(float(D[tour[i], tour[(i + 1) % n]]) for i in range(n))


def tsp(distances, penalty: Optional[float] = None, fix_start: bool = True) -> Problem:
    """Travelling salesperson on a (not necessarily symmetric) distance matrix, one-hot encoded.

    Wire ``q(c, t)`` is 1 when city c is visited at position t of the closed tour. With
    ``fix_start=True`` (default, as Paddle Quantum) city 0 is pinned at position 0 and only cities
    1 … n-1 at positions 1 … n-1 are encoded: ``(n-1)^2`` qubits, ``q(c, t) = (c-1)(n-1) + (t-1)``;
    otherwise ``n^2`` qubits, ``q(c, t) = c n + t``. Cost = tour length
    ``Σ_t Σ_{u,v} D[u, v] x_{u,t} x_{v,t+1}`` + ``P [Σ_c (1 - Σ_t x_ct)^2 + Σ_t (1 - Σ_c x_ct)^2]``;
    the default ``P`` is 1.5 × the nearest-neighbour tour length (> the optimal length, so the
    minimum is a valid tour). Distances must be finite and non-negative (the diagonal is ignored).
    Feasible = a permutation matrix; ``objective`` = tour length (``"min"``). ``decode`` returns the
    tour as a list of cities starting with city 0 (infeasible bitstrings: cities ordered by the
    first position where their bit is set, unplaced cities last). ``mixer_groups`` are the cities'
    one-hot rows (XY mixer); ``mixer="swap"`` in :func:`~torchquantum_layers.optimization.qaoa`
    keeps the whole permutation subspace.
    """
    what = "tsp"
    D = _matrix(distances, None, "distances", what)
    n = D.shape[0]
    if n < 3:
        raise ValueError(f"{what}: need at least 3 cities, got {n}")
    off = ~torch.eye(n, dtype=torch.bool)
    if bool((D[off] < 0).any()):
        i, j = ((D < 0) & off).nonzero()[0].tolist()
        raise ValueError(f"{what}: distance D[{i}, {j}] is negative ({float(D[i, j])}); distances must be >= 0")
    D = D.clone()
    D.fill_diagonal_(0.0)
    nn_len = _nearest_neighbour_length(D)
    P = _penalty(penalty, 1.5 * nn_len if nn_len > 0 else 1.0, what)
    if not isinstance(fix_start, bool):
        raise TypeError(f"{what}: fix_start must be a bool, got {fix_start!r}")
    first = 1 if fix_start else 0
    m = n - first                      # encoded cities and positions
    nq = m * m

    def q(c, t):
        return (c - first) * m + (t - first)
    qb = _QuboBuilder(nq)
    for t in range(n):
        t2 = (t + 1) % n
        for u in range(n):
            for v in range(n):
                if u == v or D[u, v] == 0:
                    continue
                d = float(D[u, v])
                fixed_u = fix_start and (u == 0 or t == 0)
                fixed_v = fix_start and (v == 0 or t2 == 0)
                if fix_start and ((u == 0) != (t == 0) or (v == 0) != (t2 == 0)):
                    continue                      # city 0 only at position 0
                if fixed_u and fixed_v:
                    qb.const += d
                elif fixed_u:
                    qb.linear(q(v, t2), d)
                elif fixed_v:
                    qb.linear(q(u, t), d)
                else:
                    qb.quadratic(q(u, t), q(v, t2), d)
    for c in range(first, n):
        qb.square([(q(c, t), -1.0) for t in range(first, n)], 1.0, P)
    for t in range(first, n):
        qb.square([(q(c, t), -1.0) for c in range(first, n)], 1.0, P)

    def full(bits):
        X = bits.view(-1, m, m).to(torch.float64)
        if not fix_start:
            return X
        F = torch.zeros(X.shape[0], n, n, dtype=torch.float64)
        F[:, 0, 0] = 1
        F[:, 1:, 1:] = X
        return F

    def objective(bits):
        F = full(bits)                       # (K, city, position)
        nxt = torch.roll(F, -1, dims=2)
        # Σ_t Σ_uv F[u,t] D[u,v] F[v,t+1]
        return torch.einsum("kut,uv,kvt->k", F, D, nxt)

    def feasible(bits):
        X = bits.view(-1, m, m)
        return (X.sum(2) == 1).all(1) & (X.sum(1) == 1).all(1)

    def decode(bits, repair):
        pos = {}
        for c in range(first, n):
            ts = [t for t in range(first, n) if bits[q(c, t)]]
            pos[c] = ts
        ok = all(len(v) == 1 for v in pos.values()) and len({v[0] for v in pos.values()}) == m
        if not ok and not repair:
            return None
        order = sorted(range(first, n), key=lambda c: (pos[c][0] if pos[c] else n, c))
        tour = ([0] if fix_start else []) + order
        if not fix_start:
            k0 = tour.index(0)
            tour = tour[k0:] + tour[:k0]
        return tour

    def encode(tour):
        tour = [int(c) for c in tour]
        if sorted(tour) != list(range(n)):
            raise ValueError(f"{what}.encode: {tour!r} is not a tour of the {n} cities")
        if fix_start:
            k0 = tour.index(0)
            tour = tour[k0:] + tour[:k0]
        bits = [0] * nq
        for t, c in enumerate(tour):
            if t >= first:
                bits[q(c, t)] = 1
        return bits

    def tour_length(tour):
        return sum(float(D[tour[i], tour[(i + 1) % n]]) for i in range(n))
    groups = tuple(tuple(q(c, t) for t in range(first, n)) for c in range(first, n))
    return Problem(what, nq, qb.U, qb.const, "tour length", "min", objective, feasible, decode, encode,
                   mixer_groups=groups,
                   data={"distances": D, "penalty": P, "fix_start": fix_start, "n_cities": n,
                         "layout": (first, m), "tour_length": tour_length})


# ------------------------------------------------------------------------------------------------
def portfolio(expected_returns, covariance, budget: int, risk_factor: float = 0.5,
              penalty: Optional[float] = None) -> Problem:
    """Mean–variance portfolio selection with a budget: choose exactly ``budget`` of n assets.

    Cost ``C(x) = q xᵀ Σ x - μᵀ x + P (Σ_i x_i - B)^2`` (q = ``risk_factor``, as Qiskit Finance's
    PortfolioOptimization); the default ``P`` is 1.1 × (Σ|μ_i| + q Σ|Σ_ij|), larger than the spread of
    the unpenalised objective, so the minimum meets the budget. ``covariance`` must be symmetric
    positive semi-definite, ``0 <= budget <= n``. Feasible = exactly ``budget`` assets; ``objective``
    = ``q xᵀΣx - μᵀx`` (``"min"``). ``decode`` returns the chosen asset indices (repair: greedily
    drop or add the asset that lowers the objective most). ``mixer_groups`` is all the wires: the
    XY mixer keeps the number of chosen assets.
    """
    what = "portfolio"
    mu = _vector(expected_returns, None, "expected_returns", what)
    n = mu.shape[0]
    if n < 1:
        raise ValueError(f"{what}: need at least one asset")
    S = _matrix(covariance, n, "covariance", what)
    if not torch.allclose(S, S.T, atol=1e-10 * max(1.0, float(S.abs().max()))):
        raise ValueError(f"{what}: covariance must be symmetric")
    eig = torch.linalg.eigvalsh(S)
    if float(eig.min()) < -1e-9 * max(1.0, float(eig.abs().max())):
        raise ValueError(f"{what}: covariance is not positive semi-definite (smallest eigenvalue "
                         f"{float(eig.min()):.3g})")
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise TypeError(f"{what}: budget must be an int, got {budget!r}")
    if not 0 <= budget <= n:
        raise ValueError(f"{what}: budget must be between 0 and the number of assets {n}, got {budget}")
    B = int(budget)
    q = _number(risk_factor, "risk_factor", what, nonneg=True)
    spread = float(mu.abs().sum()) + q * float(S.abs().sum())
    P = _penalty(penalty, 1.1 * spread if spread > 0 else 1.0, what)
    qb = _QuboBuilder(n)
    for i in range(n):
        qb.linear(i, q * float(S[i, i]) - float(mu[i]))
        for j in range(i + 1, n):
            qb.quadratic(i, j, 2 * q * float(S[i, j]))
    qb.square([(i, 1.0) for i in range(n)], -float(B), P)

    def objective(bits):
        X = bits.to(torch.float64)
        return q * ((X @ S) * X).sum(1) - X @ mu

    def feasible(bits):
        return bits.sum(1) == B

    def value(chosen):
        x = torch.zeros(n, dtype=torch.float64)
        x[list(chosen)] = 1
        return float(q * x @ S @ x - mu @ x)

    def decode(bits, repair):
        chosen = set(_sorted_nodes(bits))
        if repair:
            while len(chosen) > B:
                chosen.discard(min(chosen, key=lambda i: (value(chosen - {i}), i)))
            while len(chosen) < B:
                chosen.add(min(set(range(n)) - chosen, key=lambda i: (value(chosen | {i}), i)))
        return sorted(chosen)

    def encode(sol):
        return _bits_from_nodes(sol, n, what)
    return Problem(what, n, qb.U, qb.const, "risk-adjusted cost", "min", objective, feasible, decode, encode,
                   mixer_groups=(tuple(range(n)),),
                   data={"expected_returns": mu, "covariance": S, "budget": B, "risk_factor": q, "penalty": P})


# ------------------------------------------------------------------------------------------------
def _upper_from_quadratic_form(M: torch.Tensor) -> torch.Tensor:
    """xᵀ M x (x binary) as an upper-triangular QUBO: U_ii = M_ii, U_ij = M_ij + M_ji (i < j)."""
    return torch.triu(M + M.T, 1) + torch.diag(torch.diagonal(M))


def from_qubo(Q, offset: float = 0.0) -> Problem:
    """A problem from a QUBO matrix: ``C(x) = xᵀ Q x + offset`` over binary x (minimised).

    ``Q`` is any real n × n matrix (only ``Q + Qᵀ`` off the diagonal matters; ``Q_ii`` is the linear
    term since ``x_i^2 = x_i``). ``objective`` is the cost itself; ``decode`` returns the bits.
    """
    what = "from_qubo"
    M = _matrix(Q, None, "Q", what)
    n = M.shape[0]
    if n < 1:
        raise ValueError(f"{what}: Q must be at least 1 × 1")
    off = _number(offset, "offset", what)
    U = _upper_from_quadratic_form(M)

    def objective(bits):
        X = bits.to(torch.float64)
        return off + ((X @ U) * X).sum(1)

    def decode(bits, repair):
        return list(bits)

    def encode(sol):
        return [int(b) for b in sol]
    return Problem("qubo", n, U, off, "cost", "min", objective, None, decode, encode, data={"Q": M})


def from_ising(h, J, offset: float = 0.0) -> Problem:
    """A problem from an Ising model: ``E(z) = offset + Σ_i h_i z_i + zᵀ J z`` (minimised).

    Spins ``z_i = +1`` for bit 0 and ``-1`` for bit 1 (the eigenvalues of ``Z_i``). ``J`` is an
    n × n matrix (each entry ``J_ij``, i ≠ j, contributes ``J_ij z_i z_j``, so a symmetric J counts a
    pair twice; a diagonal entry adds the constant ``J_ii``) or a dict ``{(i, j): J_ij}`` (one term
    per key, as dimod). ``decode`` returns the spins.
    """
    what = "from_ising"
    hv = _vector(h, None, "h", what)
    n = hv.shape[0]
    if n < 1:
        raise ValueError(f"{what}: h must have at least one entry (one per spin)")
    if isinstance(J, dict):
        Jm = torch.zeros(n, n, dtype=torch.float64)
        for key, v in J.items():
            if not isinstance(key, tuple) or len(key) != 2:
                raise TypeError(f"{what}: J keys must be (i, j) pairs, got {key!r}")
            i, j = key
            for x in (i, j):
                if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not 0 <= x < n:
                    raise ValueError(f"{what}: J key {key!r}: spin {x!r} is not in 0 … {n - 1}")
            Jm[int(i), int(j)] += _number(v, f"J[{key}]", what)
    else:
        Jm = _matrix(J, n, "J", what)
    off = _number(offset, "offset", what)
    # z = 1 - 2x:  h z = h - 2h x;  J_ij z_i z_j = J_ij (1 - 2x_i - 2x_j + 4 x_i x_j)
    const = off + float(hv.sum()) + float(torch.diagonal(Jm).sum())
    Joff = Jm - torch.diag(torch.diagonal(Jm))
    Jsym = Joff + Joff.T                          # pair (i<j) coefficient
    const += float(torch.triu(Jsym, 1).sum())
    U = 4 * torch.triu(Jsym, 1)
    lin = -2 * hv - 2 * (torch.triu(Jsym, 1).sum(1) + torch.triu(Jsym, 1).sum(0))
    U = U + torch.diag(lin)

    def objective(bits):
        z = 1 - 2 * bits.to(torch.float64)
        return off + z @ hv + ((z @ Jm) * z).sum(1)

    def decode(bits, repair):
        return [1 - 2 * b for b in bits]

    def encode(spins):
        out = []
        for s in spins:
            if s not in (1, -1):
                raise ValueError(f"{what}.encode: spins must be +1 or -1, got {s!r}")
            out.append(0 if s == 1 else 1)
        return out
    return Problem("ising", n, U, const, "energy", "min", objective, None, decode, encode,
                   data={"h": hv, "J": Jm})


# ------------------------------------------------------------------------------------------------
@dataclass
class ExactSolution:
    """Brute-force optimum of a :class:`Problem` (from its cost diagonal)."""
    cost: float                 # minimum of the cost
    index: int                  # first optimal basis index
    indices: torch.Tensor       # all optimal indices (ties within tolerance)
    bitstrings: list
    solution: object            # decode(index)
    objective: float            # natural objective of the optimum
    feasible: bool
    worst_cost: float           # maximum cost over feasible bitstrings (for approximation ratios)
    n_feasible: int

    @property
    def bitstring(self) -> str:
        return self.bitstrings[0]

    @property
    def n_optimal(self) -> int:
        return int(self.indices.numel())


def exact_solution(problem: Problem, atol: float = 1e-9) -> ExactSolution:
    """The optimum of ``problem`` by brute force over its cost diagonal (at most
    :data:`MAX_EXACT_QUBITS` qubits). All bitstrings whose cost is within ``atol`` (relative to the
    cost scale) of the minimum are returned in ``indices``."""
    if not isinstance(problem, Problem):
        raise TypeError(f"exact_solution: expected a Problem, got {type(problem).__name__}")
    n = problem.n_qubits
    if n > MAX_EXACT_QUBITS:
        raise ValueError(f"exact_solution: {problem.name} has {n} qubits (2**{n} = {2 ** n:,} bitstrings); "
                         f"brute force is limited to {MAX_EXACT_QUBITS} qubits. Build the QAOA and "
                         f"sample it instead, or reduce the instance")
    cached = problem._cache.get("exact")
    if cached is not None and cached[0] == atol:
        return cached[1]
    d = problem.diagonal
    mn = float(d.min())
    scale = max(1.0, float(d.abs().max()))
    opt = torch.nonzero(d <= mn + atol * scale).reshape(-1)
    mask = problem.feasible_mask() if problem.is_constrained else None
    if mask is not None and bool(mask.any()):
        worst = float(d[mask].max())
        n_feas = int(mask.sum())
    else:
        worst = float(d.max())
        n_feas = 2 ** n if mask is None else 0
    i0 = int(opt[0])
    sol = ExactSolution(cost=mn, index=i0, indices=opt, bitstrings=[problem.bitstring(i) for i in opt.tolist()],
                        solution=problem.decode(i0), objective=float(problem.objective(i0)),
                        feasible=bool(problem.is_feasible(i0)), worst_cost=worst, n_feasible=n_feas)
    problem._cache["exact"] = (atol, sol)
    return sol
