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

Builders: in :mod:`.graph_problems` :func:`maxcut`, :func:`max_independent_set`,
:func:`min_vertex_cover`, :func:`max_clique`, :func:`graph_colouring`; in :mod:`.numeric_problems`
:func:`number_partitioning`, :func:`tsp`, :func:`portfolio`, :func:`from_qubo`, :func:`from_ising`. :func:`exact_solution` brute-forces the optimum from the
diagonal up to :data:`MAX_EXACT_QUBITS` qubits.

Arguments ``x`` of the vectorised methods (:meth:`Problem.cost`, :meth:`Problem.objective`,
:meth:`Problem.is_feasible`) are basis indices (an int or a 1-D integer tensor), bitstrings
(``"0110"`` or a list of them) or a 2-D ``(K, n)`` tensor of 0/1 bits.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..caching import lasting
from .bitstrings import _as_index, _chunked, _one_bits, bits_of


__all__ = ["Problem", "ExactSolution", "exact_solution", "qubo_diagonal", "MAX_EXACT_QUBITS",
           "MAX_DIAGONAL_QUBITS"]

MAX_EXACT_QUBITS = 26
""":func:`exact_solution` brute-forces at most this many qubits (2^26 costs, 512 MiB in float64)."""

MAX_DIAGONAL_QUBITS = 30
""":attr:`Problem.diagonal` refuses more qubits than this (2^30 float64 = 8 GiB)."""


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
    @lasting
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

    @lasting
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

    @lasting
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
    feasible = bool(problem.is_feasible(i0))
    if mask is not None and not bool(mask[opt].any()):
        pen = problem.data.get("penalty")
        warnings.warn(f"exact_solution: the minimum of the {problem.name} cost (bitstring {problem.bitstring(i0)}, "
                      f"cost {mn:g}) violates the constraints"
                      + (f": the penalty {pen:g} is too small" if isinstance(pen, (int, float)) else
                         ": the constraint penalty is too small")
                      + "; raise it. Approximation ratios and optimum probabilities against this optimum "
                        "are meaningless", UserWarning, stacklevel=2)
    sol = ExactSolution(cost=mn, index=i0, indices=opt, bitstrings=[problem.bitstring(i) for i in opt.tolist()],
                        solution=problem.decode(i0), objective=float(problem.objective(i0)),
                        feasible=feasible, worst_cost=worst, n_feasible=n_feas)
    problem._cache["exact"] = (atol, sol)
    return sol
