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
no longer holds, so they are refused (``ValueError`` naming the edge).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Optional

import torch

from .graphs import Graph, as_graph
from .problems import Problem

__all__ = ["goemans_williamson", "GoemansWilliamsonResult", "GW_ALPHA"]

# min over θ in (0, π] of (θ/π) / ((1 - cos θ)/2), at θ ≈ 2.3311: the rounding's guarantee per edge
GW_ALPHA = 0.8785672057848516


@dataclass
class GoemansWilliamsonResult:
    """What :func:`goemans_williamson` found (weights in the graph's units, cuts as cut weight)."""
    graph: Graph
    sdp_value: float                 # Σ w (1 - v_i·v_j)/2 at the returned vectors (the SDP optimum)
    upper_bound: float               # certified: >= the SDP optimum >= the max cut
    vectors: torch.Tensor            # (n, rank) float64, unit rows
    bitstring: str                   # the best rounded cut (bit i = 1: v_i·g >= 0), wire 0 first
    bitstrings: list                 # every distinct bitstring with the best cut, first found first
    cut: float                       # the cut weight of ``bitstring``
    cuts: torch.Tensor = field(repr=False)   # (rounds,) cut weight of every hyperplane
    mean_cut: float = 0.0            # cuts.mean(): the Monte Carlo estimate of expected_cut
    expected_cut: float = 0.0        # exact expectation over hyperplanes, Σ w arccos(v_i·v_j)/π
    rank: int = 0
    restarts: int = 0
    iterations: int = 0              # solver iterations of the slowest restart
    grad_norm: float = 0.0           # Riemannian gradient norm of the returned vectors
    converged: bool = True

    @property
    def n_nodes(self) -> int:
        return self.graph.n_nodes

    @property
    def gap(self) -> float:
        """``upper_bound - sdp_value`` (>= 0): how far the solver may be from the SDP optimum."""
        return self.upper_bound - self.sdp_value

    @property
    def bits(self) -> torch.Tensor:
        """The best cut as an (n,) int64 tensor of 0/1."""
        return torch.tensor([int(ch) for ch in self.bitstring], dtype=torch.int64)

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
                             f"or a graph)")
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
    lip = 2 * float(A.abs().sum(1).max())
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
    scale = float(torch.linalg.matrix_norm(A))
    V0 = _normalise(torch.randn(restarts, n, rank, generator=generator, dtype=f64))
    V, h, gnorm, iters = _solve(A, V0, tol * scale, max_iter)
    best = int(torch.argmin(h))
    V, h_best = V[best], float(h[best])
    sdp = W / 2 - h_best / 4
    # dual certificate: μ_i = (A V)_i · v_i, then shift by the smallest eigenvalue of A - diag(μ)
    mu = ((A @ V) * V).sum(1)
    lam = float(torch.linalg.eigvalsh(A - torch.diag(mu))[0])
    upper = W / 2 - (float(mu.sum()) + n * min(0.0, lam)) / 4
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
        restarts=restarts, iterations=iters, grad_norm=float(gnorm[best]),
        converged=bool(gnorm[best] <= tol * scale))
