"""The Goemans–Williamson algorithm for (weighted) MaxCut: the SDP relaxation and hyperplane rounding.

:func:`goemans_williamson` solves the MaxCut semidefinite relaxation

    SDP = max Σ_(i,j) w_ij (1 - v_i·v_j) / 2   over unit vectors v_i ∈ R^r ,

by the Burer–Monteiro factorisation X = V Vᵀ (V of shape (n, r), unit rows). With
``r(r + 1)/2 > n`` — the default rank ``ceil(sqrt(2n)) + 1`` — the second-order critical points of
the factorised problem are global optima for generic costs (Boumal, Voroninski & Bandeira 2016),
so a local method finds the SDP optimum. The solver is Riemannian gradient descent on the
product of spheres (rows renormalised after each step, Barzilai–Borwein steps with a nonmonotone
Armijo backtracking), in float64, with all ``restarts`` random starts advanced together as one
``(restarts, n, r)`` tensor; it keeps the best.

The value is then CERTIFIED: with μ_i = (A V)_i · v_i (A the weight matrix), the dual of the SDP
gives ``upper_bound = W/2 - (Σ μ_i + n · min(0, λ_min(A - diag μ)))/4 ≥ SDP ≥ max cut`` (W the
total weight), whatever the solver reached; at the optimum it equals :attr:`sdp_value` (the
:attr:`~GoemansWilliamsonResult.gap` says how close it came).

Random-hyperplane rounding: ``rounds`` Gaussian normals g at once, one matmul ``V gᵀ``; node i is
on side ``x_i = 1`` where ``v_i·g >= 0``. The result keeps every cut, the best one(s), their mean and
the exact expectation over hyperplanes, ``Σ w_ij arccos(v_i·v_j)/π``, which is at least
:data:`GW_ALPHA` ≈ 0.8786 times the SDP value (edge by edge, for non-negative weights), hence at
least 0.8786 × max cut.

Weights must be non-negative (the builders' rule, :func:`~.graph_problems.maxcut`): the SDP would
still bound the max cut from above with negative weights, but the 0.878 guarantee of the rounding
no longer holds, so they are refused (``ValueError`` naming the edge); :func:`ising_sdp` of the
same cost (e.g. ``from_ising``) takes them, without the guarantee.

:func:`ising_sdp` is the same relaxation for ANY :class:`~.problems.Problem`, in cost units. The
cost in Ising form (:meth:`~.problems.Problem.ising`, spins ``z = 1 - 2x``) is homogenised with a
reference spin z_0 = 1: ``C = c + Σ h_i z_0 z_i + Σ_(i<j) J_ij z_i z_j``, which is invariant under
flipping every spin, so minimising it is a MaxCut-type problem on n + 1 spins with couplings of
either sign; relaxing ``z_a z_b → v_a·v_b`` (unit vectors v_0 … v_n) gives the SDP
``min c + Σ h_i v_0·v_i + Σ J_ij v_i·v_j``, solved by the same Burer–Monteiro solver and certified by
the same dual bound (valid for any symmetric coupling matrix, see :func:`_dual_bound`):
``lower_bound <= SDP <= min cost <= every rounded cost``. Rounding: a random hyperplane g gives
spins ``s_a = sign(v_a·g)``, and ``z_i = s_i s_0`` (the side of v_0 is z = +1, i.e. bit 0). With
mixed-sign couplings or fields there is no 0.878-type guarantee on the rounded cost; the
certificate is what it gives (``cost - lower_bound`` bounds the distance to the optimum). MaxCut
through :func:`ising_sdp` gives ``lower_bound = -(the max-cut bound)`` (v_0 is then decoupled).
Constrained problems are relaxed with their penalties (their Ising form includes them); the best
rounded bitstring may be infeasible when the penalty is small (``feasible`` says so).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Optional

import torch

from .graphs import Graph, as_graph
from .problems import Problem

__all__ = ["goemans_williamson", "GoemansWilliamsonResult", "GW_ALPHA", "ising_sdp", "IsingSDPResult"]

# min over θ in (0, π] of (θ/π) / ((1 - cos θ)/2), at θ ≈ 2.3311: the rounding's guarantee per edge
GW_ALPHA = 0.8785672057848516


@dataclass(kw_only=True)
class _RoundedSDP:
    """What both results share: the best rounded bitstring and the solver's statistics (keyword
    fields, so each result's own fields come first)."""
    bitstring: str                   # the best rounded bitstring, wire 0 first
    rank: int = 0
    restarts: int = 0
    iterations: int = 0              # solver iterations of the slowest restart
    grad_norm: float = 0.0           # Riemannian gradient norm of the returned vectors
    converged: bool = True

    @property
    def bits(self) -> torch.Tensor:
        """The best bitstring as an (n,) int64 tensor of 0/1."""
        return torch.tensor([int(ch) for ch in self.bitstring], dtype=torch.int64)


@dataclass
class GoemansWilliamsonResult(_RoundedSDP):
    """What :func:`goemans_williamson` found (weights in the graph's units, cuts as cut weight)."""
    graph: Graph
    sdp_value: float                 # Σ w (1 - v_i·v_j)/2 at the returned vectors (the SDP optimum)
    upper_bound: float               # certified: >= the SDP optimum >= the max cut
    vectors: torch.Tensor            # (n, rank) float64, unit rows; bitstring: bit i = 1 where v_i·g >= 0
    bitstrings: list                 # every distinct bitstring with the best cut, first found first
    cut: float                       # the cut weight of ``bitstring``
    cuts: torch.Tensor = field(repr=False)   # (rounds,) cut weight of every hyperplane
    mean_cut: float = 0.0            # cuts.mean(): the Monte Carlo estimate of expected_cut
    expected_cut: float = 0.0        # exact expectation over hyperplanes, Σ w arccos(v_i·v_j)/π

    @property
    def n_nodes(self) -> int:
        return self.graph.n_nodes

    @property
    def gap(self) -> float:
        """``upper_bound - sdp_value`` (>= 0): how far the solver may be from the SDP optimum."""
        return self.upper_bound - self.sdp_value

    @property
    def guarantee_ratio(self) -> float:
        """``expected_cut / sdp_value``: at least :data:`GW_ALPHA` (per edge, for weights >= 0)."""
        return self.expected_cut / self.sdp_value

    def ratio_lower_bound(self, cut: Optional[float] = None) -> float:
        """A certified lower bound on ``cut / max cut``: ``cut / upper_bound`` (default: the best cut)."""
        return (self.cut if cut is None else float(cut)) / self.upper_bound

    def __repr__(self) -> str:
        return (f"GoemansWilliamsonResult(n_nodes={self.n_nodes}, sdp_value={self.sdp_value:.6g}, "
                f"upper_bound={self.upper_bound:.6g}, cut={self.cut:.6g}, bitstring={self.bitstring!r}, "
                f"mean_cut={self.mean_cut:.6g}, expected_cut={self.expected_cut:.6g}, rank={self.rank})")


def _count(value, name: str, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < least:
        raise ValueError(f"{what}: {name} must be >= {least}, got {value}")
    return int(value)


def _graph_of(graph, n_nodes, what: str) -> Graph:
    if isinstance(graph, Problem):
        if graph.name != "maxcut" or not isinstance(graph.data.get("graph"), Graph):
            raise ValueError(f"{what}: solves MaxCut; got a {graph.name!r} problem (pass a maxcut() problem "
                             f"or a graph; ising_sdp(problem) is the same SDP and rounding for any problem)")
        if n_nodes is not None:
            raise ValueError(f"{what}: n_nodes is read from the maxcut problem; leave it None")
        return graph.data["graph"]
    g = as_graph(graph, n_nodes, what)
    if not g.n_edges or float(g.weights.sum()) == 0:
        raise ValueError(f"{what}: the graph has no edge of positive weight, so every cut is 0")
    return g


def _rowdot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1, keepdim=True)


def _riemannian_grad(A: torch.Tensor, V: torch.Tensor):
    """(h, ∇h projected on the tangent space, A V) of h(V) = <A, V Vᵀ> per restart."""
    AV = A @ V
    h = (V * AV).sum((1, 2))
    G = 2 * AV
    return h, G - _rowdot(G, V) * V, AV


def _normalise(V: torch.Tensor) -> torch.Tensor:
    return V / torch.linalg.vector_norm(V, dim=-1, keepdim=True).clamp_min(1e-300)


def _solve(A: torch.Tensor, V: torch.Tensor, tol: float, max_iter: int):
    """Minimise <A, V Vᵀ> over unit rows for every restart at once: -> (V, h, |grad|, iterations)."""
    R = V.shape[0]
    h, rg, _ = _riemannian_grad(A, V)
    gn2 = (rg * rg).sum((1, 2))
    lip = 2 * float(A.abs().sum(1).max()) or 1.0          # A = 0: any step (nothing to minimise)
    tau = torch.full((R,), 1.0 / lip, dtype=V.dtype)
    C, Q = h.clone(), torch.ones(R, dtype=V.dtype)        # Zhang–Hager nonmonotone reference
    tol2 = tol * tol
    done = gn2 <= tol2
    it = 0
    while it < max_iter and not bool(done.all()):
        it += 1
        t = tau.clone()
        for _ in range(40):                               # backtracking, all restarts at once
            Vn = _normalise(V - t.view(R, 1, 1) * rg)
            hn, rgn, _ = _riemannian_grad(A, Vn)
            ok = (hn <= C - 1e-4 * t * gn2) | done
            if bool(ok.all()):
                break
            t = torch.where(ok, t, t * 0.5)
        S, Y = Vn - V, rgn - rg
        ss, sy, yy = (S * S).sum((1, 2)), (S * Y).sum((1, 2)).abs(), (Y * Y).sum((1, 2))
        bb = ss / sy.clamp_min(1e-300) if it % 2 else sy / yy.clamp_min(1e-300)
        bb = torch.where(torch.isfinite(bb) & (bb > 0), bb, torch.full_like(bb, 1.0 / lip))
        keep = done.view(R, 1, 1)
        V = torch.where(keep, V, Vn)
        rg = torch.where(keep, rg, rgn)
        h = torch.where(done, h, hn)
        gn2 = (rg * rg).sum((1, 2))
        tau = torch.where(done, tau, bb.clamp(1e-6 / lip, 1e6 / lip))
        Qn = 0.85 * Q + 1
        C = torch.where(done, C, (0.85 * Q * C + h) / Qn)
        Q = torch.where(done, Q, Qn)
        done = done | (gn2 <= tol2)
    return V, h, gn2.sqrt(), it


def _burer_monteiro(A: torch.Tensor, rank: int, restarts: int, generator, tol: float, max_iter: int):
    """min <A, V Vᵀ> over unit rows V (n, rank) for a symmetric A of any signs, ``restarts`` random
    starts in one batch: -> (V of the best restart, its value, |grad|, iterations, converged)."""
    n = A.shape[0]
    scale = float(torch.linalg.matrix_norm(A))
    V0 = _normalise(torch.randn(restarts, n, rank, generator=generator, dtype=A.dtype))
    V, h, gnorm, iters = _solve(A, V0, tol * scale, max_iter)
    best = int(torch.argmin(h))
    return V[best], float(h[best]), float(gnorm[best]), iters, bool(gnorm[best] <= tol * scale)


def _dual_bound(A: torch.Tensor, V: torch.Tensor) -> float:
    """A certified LOWER bound on ``min <A, X>`` over {X ⪰ 0, diag X = 1}, for any symmetric A
    (either sign) and any V (the solver's point only picks the multipliers; the bound holds anyway).

    Derivation (weak duality). For any y ∈ R^n let λ = λ_min(A - diag y) and y' = y + min(0, λ)·1,
    so A - diag y' = (A - diag y) - min(0, λ) I ⪰ 0. For every feasible X (X ⪰ 0, X_ii = 1):
        <A, X> = <A - diag y', X> + Σ_i y'_i X_ii >= 0 + Σ_i y'_i = Σ_i y_i + n·min(0, λ),
    since the inner product of two PSD matrices is >= 0. Nothing used the signs of A. The
    multipliers y = μ with μ_i = (A V)_i · v_i are the KKT multipliers of the factorised problem
    (first-order condition A V = diag(μ) V); at the SDP optimum A - diag μ ⪰ 0, λ >= 0, and the bound
    equals <A, V Vᵀ> (zero gap). Away from it the bound is still valid, only looser."""
    mu = ((A @ V) * V).sum(1)
    lam = float(torch.linalg.eigvalsh(A - torch.diag(mu))[0])
    return float(mu.sum()) + A.shape[0] * min(0.0, lam)


def goemans_williamson(graph, rank: Optional[int] = None, rounds: int = 1024, restarts: int = 4,
                       generator: Optional[torch.Generator] = None, n_nodes: Optional[int] = None,
                       tol: float = 1e-9, max_iter: int = 5000) -> GoemansWilliamsonResult:
    """Goemans–Williamson for weighted MaxCut (module notes): the SDP by Burer–Monteiro, then
    ``rounds`` random hyperplanes.

    Args:
        graph: a :func:`~.graph_problems.maxcut` :class:`~.problems.Problem`, a :class:`~.graphs.Graph`,
            an edge list / dict / ``(m, 2|3)`` array or a networkx graph (as :func:`~.graphs.as_graph`);
            weights >= 0, at least one positive.
        rank: columns of V (int >= 2); default ``ceil(sqrt(2n)) + 1``, enough for the factorised
            problem to have no spurious local optima generically.
        rounds: number of random hyperplanes (int >= 1), drawn as one ``(rounds, rank)`` Gaussian matrix.
        restarts: random starts of the SDP solver, run as one batch (int >= 1); the best is kept.
        generator: seeds the starts and the hyperplanes (default: torch's global generator).
        n_nodes: the number of nodes, to add isolated ones (as :func:`~.graphs.as_graph`).
        tol: stop once the Riemannian gradient norm is below ``tol × ||A||_F``.
        max_iter: iteration cap of the solver (``converged`` is False if it was reached).
    """
    what = "goemans_williamson"
    g = _graph_of(graph, n_nodes, what)
    n = g.n_nodes
    if rank is None:
        rank = math.ceil(math.sqrt(2 * n)) + 1
    rank = _count(rank, "rank", what, 2)
    rounds = _count(rounds, "rounds", what, 1)
    restarts = _count(restarts, "restarts", what, 1)
    max_iter = _count(max_iter, "max_iter", what, 1)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"{what}: tol must be a positive finite number, got {tol!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
    f64 = torch.float64
    A = g.adjacency()                                                     # (n, n) float64, symmetric
    W = float(g.weights.sum())
    V, h_best, gnorm, iters, converged = _burer_monteiro(A, rank, restarts, generator, tol, max_iter)
    sdp = W / 2 - h_best / 4
    # cut = W/2 - <A, X>/4 for X = z zᵀ, so max cut <= W/2 - min <A, X> / 4 <= W/2 - (dual bound)/4
    upper = W / 2 - _dual_bound(A, V) / 4
    upper = max(upper, sdp)                                               # rounding noise at the optimum
    # hyperplane rounding: every normal at once
    normals = torch.randn(rounds, rank, generator=generator, dtype=f64)
    bits = (normals @ V.T >= 0)                                           # (rounds, n)
    eu, ev = g.edges[:, 0], g.edges[:, 1]
    cuts = (bits[:, eu] != bits[:, ev]).to(f64) @ g.weights               # (rounds,)
    top = float(cuts.max())
    winners = torch.nonzero(cuts == top).reshape(-1)
    seen, strings = set(), []
    for row in bits[winners].to(torch.int8).tolist():
        s = "".join(map(str, row))
        if s not in seen:
            seen.add(s)
            strings.append(s)
    rho = ((V[eu] * V[ev]).sum(1)).clamp(-1.0, 1.0)
    expected = float((torch.arccos(rho) / math.pi) @ g.weights)
    return GoemansWilliamsonResult(
        graph=g, sdp_value=sdp, upper_bound=upper, vectors=V.contiguous(), bitstring=strings[0],
        bitstrings=strings, cut=top, cuts=cuts, mean_cut=float(cuts.mean()), expected_cut=expected, rank=rank,
        restarts=restarts, iterations=iters, grad_norm=gnorm, converged=converged)



@dataclass
class IsingSDPResult(_RoundedSDP):
    """What :func:`ising_sdp` found, in the problem's COST units (minimised):
    ``lower_bound <= sdp_value <= min cost <= cost``."""
    problem: Problem
    sdp_value: float                 # c + Σ h v_0·v_i + Σ J v_i·v_j at the returned vectors (the SDP optimum)
    lower_bound: float               # certified: <= the SDP optimum <= the minimum cost
    vectors: torch.Tensor            # (n + 1, rank) float64, unit rows: row 0 the reference v_0, row i+1 wire i
    bitstrings: list                 # every distinct rounded bitstring with the lowest cost, first found first
    cost: float                      # the cost of ``bitstring``
    costs: torch.Tensor = field(repr=False)   # (rounds,) cost of every hyperplane's bitstring
    mean_cost: float = 0.0           # costs.mean(): the Monte Carlo estimate of expected_cost
    expected_cost: float = 0.0       # exact expectation over hyperplanes: c + Σ_(a<b) A_ab (1 - 2 arccos(v_a·v_b)/π)

    @property
    def n_qubits(self) -> int:
        return self.problem.n_qubits

    @property
    def gap(self) -> float:
        """``sdp_value - lower_bound`` (>= 0): how far the solver may be from the SDP optimum."""
        return self.sdp_value - self.lower_bound

    @property
    def optimality_gap(self) -> float:
        """``cost - lower_bound`` (>= 0): certified, the best rounded cost is at most this above the minimum."""
        return self.cost - self.lower_bound

    @property
    def objective(self) -> float:
        """The natural objective (``problem.objective``) of the best bitstring."""
        return float(self.problem.objective(self.bitstring))

    @property
    def feasible(self) -> bool:
        """Whether the best bitstring satisfies the problem's constraints."""
        return bool(self.problem.is_feasible(self.bitstring))

    def __repr__(self) -> str:
        return (f"IsingSDPResult(problem={self.problem.name!r}, n_qubits={self.n_qubits}, "
                f"sdp_value={self.sdp_value:.6g}, lower_bound={self.lower_bound:.6g}, cost={self.cost:.6g}, "
                f"bitstring={self.bitstring!r}, mean_cost={self.mean_cost:.6g}, rank={self.rank})")


def ising_coupling(problem: Problem):
    """``(A, c)``: the symmetric ``(n + 1, n + 1)`` float64 coupling matrix of the homogenised Ising
    form (index 0 the reference spin; ``A[0, i+1] = h_i``, ``A[i+1, j+1] = J_ij``, zero diagonal) and
    the constant, so that ``C(x) = c + zᵀ A z / 2`` for ``z = (1, 1 - 2x)``."""
    h, J, c = problem.ising()
    n = problem.n_qubits
    A = torch.zeros(n + 1, n + 1, dtype=torch.float64)
    A[0, 1:] = h
    A[1:, 0] = h
    A[1:, 1:] = J + J.T
    A.fill_diagonal_(0.0)
    return A, float(c)


def ising_sdp(problem: Problem, rank: Optional[int] = None, rounds: int = 1024, restarts: int = 4,
              generator: Optional[torch.Generator] = None, tol: float = 1e-9,
              max_iter: int = 5000) -> IsingSDPResult:
    """The Goemans–Williamson relaxation and rounding of ANY problem's cost (module notes):
    ``min c + Σ h_i v_0·v_i + Σ J_ij v_i·v_j`` over unit vectors by Burer–Monteiro (the solver of
    :func:`goemans_williamson`), a certified ``lower_bound`` on the minimum cost, then ``rounds``
    random hyperplanes (bit i = 1 where v_i is on the other side from v_0).

    Args: as :func:`goemans_williamson` (``rank`` default ``ceil(sqrt(2(n + 1))) + 1``); ``problem``
    a :class:`~.problems.Problem` (MaxCut, QUBO / Ising, independent set, colouring with penalties …).
    """
    what = "ising_sdp"
    if not isinstance(problem, Problem):
        raise TypeError(f"{what}: expected a Problem (e.g. opt.from_qubo, opt.max_independent_set), got "
                        f"{type(problem).__name__}; for a graph use goemans_williamson(graph)")
    n = problem.n_qubits
    if rank is None:
        rank = math.ceil(math.sqrt(2 * (n + 1))) + 1
    rank = _count(rank, "rank", what, 2)
    rounds = _count(rounds, "rounds", what, 1)
    restarts = _count(restarts, "restarts", what, 1)
    max_iter = _count(max_iter, "max_iter", what, 1)
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not math.isfinite(tol) or tol <= 0:
        raise ValueError(f"{what}: tol must be a positive finite number, got {tol!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
    f64 = torch.float64
    A, c = ising_coupling(problem)
    if not bool(torch.isfinite(A).all()):
        raise ValueError(f"{what}: the {problem.name} cost has non-finite coefficients")
    V, val, gnorm, iters, converged = _burer_monteiro(A, rank, restarts, generator, tol, max_iter)
    # C = c + zᵀ A z / 2 = c + <A, z zᵀ>/2: the SDP is c + min <A, X>/2, bounded below by the dual
    sdp = c + val / 2
    lower = min(c + _dual_bound(A, V) / 2, sdp)                            # rounding noise at the optimum
    normals = torch.randn(rounds, rank, generator=generator, dtype=f64)
    side = normals @ V.T >= 0                                              # (rounds, n + 1): s_a = +1
    bits = (side[:, 1:] != side[:, :1]).to(torch.int64)                    # z_i = s_i s_0; bit 1 <=> z_i = -1
    costs = problem.cost(bits) if rounds > 1 else problem.cost(bits).reshape(1)
    top = float(costs.min())
    tie = 1e-12 * max(1.0, abs(top))
    winners = torch.nonzero(costs <= top + tie).reshape(-1)
    seen, strings = set(), []
    for row in bits[winners].tolist():
        s = "".join(map(str, row))
        if s not in seen:
            seen.add(s)
            strings.append(s)
    rho = (V @ V.T).clamp(-1.0, 1.0)
    expected = c + float((A * (1 - 2 * torch.arccos(rho) / math.pi)).sum()) / 2
    return IsingSDPResult(
        problem=problem, sdp_value=sdp, lower_bound=lower, vectors=V.contiguous(), bitstring=strings[0],
        bitstrings=strings, cost=top, costs=costs, mean_cost=float(costs.mean()), expected_cost=expected,
        rank=rank, restarts=restarts, iterations=iters, grad_norm=gnorm, converged=converged)
