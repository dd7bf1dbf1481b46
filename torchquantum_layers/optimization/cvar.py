"""Conditional value at risk (CVaR) of a cost over a batch of probability distributions.

Barkoutsos et al., "Improving Variational Quantum Optimization using CVaR", Quantum 4, 256 (2020):
for ``alpha`` in (0, 1], ``CVaR_alpha`` is the expected cost over the lowest-cost ``alpha`` fraction
of the probability mass,

    CVaR_alpha = (1 / alpha) Σ_k c_k (min(F_k, alpha) - min(F_{k-1}, alpha)),   F_k = Σ_{j<=k} q_j,

with the costs ``c`` sorted ascending and ``q`` the probabilities in that order. ``alpha = 1`` is the
plain expectation Σ q c (computed as such: no sort, gradient c); ``alpha -> 0`` tends to the lowest
cost of positive probability. Costs are MINIMISED (the convention of :mod:`.problems`). Within a run
of equal costs the order of the sort changes neither the value nor the gradient.

* :func:`cost_order` sorts a cost vector (or one per problem) once; keep it for repeated calls.
* :func:`cvar_from_probabilities`: the exact, differentiable CVaR of probability rows. Its backward
  is one pass: dCVaR/dq_i = (c_i - c_K) / alpha for the states sorted before K, the state where the
  cumulative mass reaches alpha, and 0 for the others (the gradient of a piecewise-linear function,
  exact away from the kinks where F_k = alpha).
* :func:`cvar_from_samples`: the shot estimate, the mean of the lowest ``ceil(alpha * shots)``
  sampled costs.
"""
from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Optional, Union

import torch

__all__ = ["CostOrder", "check_alpha", "cost_order", "cvar_from_probabilities", "cvar_from_samples"]


def check_alpha(alpha, what: str = "cvar", name: str = "alpha") -> float:
    """``alpha`` as a float in (0, 1], or a ValueError naming ``name`` (bools, strings, NaN, 0, > 1)."""
    value = alpha
    if isinstance(value, torch.Tensor) and value.numel() == 1 and value.dtype.is_floating_point:
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what}: {name} must be a real number in (0, 1], got {alpha!r}")
    value = float(value)
    if not (0.0 < value <= 1.0):                  # also refuses NaN
        raise ValueError(f"{what}: {name} must be in (0, 1] (the fraction of the lowest-cost probability mass "
                         f"kept), got {alpha!r}")
    return value


class CostOrder:
    """Costs ``(G, N)`` sorted ascending per row, with what the CVaR needs from the sort.

    Attributes (all on the costs' device): ``costs`` float64 ``(G, N)`` in the original order;
    ``order`` int64 ``(G, N)`` (``costs.gather(1, order)`` is ascending); ``rank`` int64 ``(G, N)``,
    the inverse permutation (position of basis state i in the sorted row); ``gaps`` float64
    ``(G, N)``: ``c_k - c_{k+1}`` of the sorted costs, the last entry ``c_{N-1}`` itself (the CVaR is
    then ``Σ_k min(F_k, alpha) gaps_k / alpha``, a summation by parts with no second pass).
    """

    def __init__(self, costs: torch.Tensor):
        costs = costs.detach().to(torch.float64)
        self.costs = costs
        sorted_costs, self.order = torch.sort(costs, dim=1, stable=True)
        self.sorted_costs = sorted_costs
        self.rank = torch.empty_like(self.order).scatter_(
            1, self.order, torch.arange(costs.shape[1], device=costs.device).expand_as(self.order))
        self.gaps = sorted_costs.clone()
        self.gaps[:, :-1] -= sorted_costs[:, 1:]
        self._casts: dict = {}

    @property
    def n_rows(self) -> int:
        return self.costs.shape[0]

    @property
    def size(self) -> int:
        return self.costs.shape[1]

    def costs_as(self, dtype: torch.dtype):
        """(costs, sorted costs) in ``dtype`` (cached: the backward pass runs in the probabilities' dtype)."""
        pair = self._casts.get(dtype)
        if pair is None:
            pair = (self.costs.to(dtype), self.sorted_costs.to(dtype))
            self._casts[dtype] = pair
        return pair


def cost_order(costs) -> CostOrder:
    """Sort a real cost vector ``(N,)`` or one per problem ``(G, N)`` for :func:`cvar_from_probabilities`."""
    what = "cost_order"
    if isinstance(costs, CostOrder):
        return costs
    if not isinstance(costs, torch.Tensor):
        try:
            costs = torch.as_tensor(costs, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{what}: costs must be a real tensor (N,) or (G, N), got {type(costs).__name__}") \
                from None
    if costs.is_complex() or costs.dtype == torch.bool:
        raise TypeError(f"{what}: costs must be real, got {costs.dtype}")
    if costs.dim() not in (1, 2) or costs.shape[-1] < 1:
        raise ValueError(f"{what}: costs must have shape (N,) or (G, N), got {tuple(costs.shape)}")
    if not bool(torch.isfinite(costs).all()):
        raise ValueError(f"{what}: costs contain NaN or inf")
    return CostOrder(costs.reshape(-1, costs.shape[-1]))


class _CVaR(torch.autograd.Function):
    """CVaR of probability rows ``(G, R, N)`` against a :class:`CostOrder` of ``G`` rows.

    ``multiplicity``: each listed probability stands for that many basis states of the same cost and
    probability (2 for the half register of a bit-flip symmetric QAOA), so the listed mass is 1/m.
    """

    @staticmethod
    def forward(ctx, probabilities, order: CostOrder, alpha: float, multiplicity: float):
        G, R, N = probabilities.shape
        ctx.order, ctx.alpha, ctx.multiplicity = order, alpha, multiplicity
        ctx.prob_dtype = probabilities.dtype
        if alpha == 1.0:
            # the plain expectation: no sort, and its gradient is the cost vector whatever the
            # rounding of the row's total (a cut at the last state would shift it by a constant)
            with torch.no_grad():
                costs = order.costs_as(probabilities.dtype)[0]
                value = torch.bmm(probabilities, costs.unsqueeze(2)).squeeze(2) * multiplicity
            ctx.save_for_backward(torch.full((G, R), N, dtype=torch.int64, device=probabilities.device))
            return value
        with torch.no_grad():
            sorted_p = torch.gather(probabilities, 2, order.order.unsqueeze(1).expand(G, R, N))
            # float64 cumulative mass: in float32 its rounding would move the cut at alpha by ~1e-7 N
            mass = torch.cumsum(sorted_p, dim=2, dtype=torch.float64)
            del sorted_p
            if multiplicity != 1:
                mass.mul_(multiplicity)
            mass.clamp_(max=alpha)
            value = torch.bmm(mass, order.gaps.unsqueeze(2)).squeeze(2) / alpha           # (G, R)
            # K = the number of sorted states wholly inside the alpha tail (F_k < alpha)
            cut = torch.searchsorted(mass, torch.full((G, R, 1), alpha, dtype=torch.float64,
                                                      device=mass.device)).squeeze(2)
        ctx.save_for_backward(cut)
        return value.to(probabilities.dtype)

    @staticmethod
    def backward(ctx, grad_value):
        (cut,) = ctx.saved_tensors
        order = ctx.order
        costs, sorted_costs = order.costs_as(ctx.prob_dtype)
        N = order.size
        # c_K, the cost at the cut; when the listed mass never reaches alpha (normalisation below 1 by
        # rounding) every state is inside and the missing mass carries no cost
        inside_all = cut >= N
        c_cut = torch.gather(sorted_costs, 1, cut.clamp(max=N - 1))
        c_cut = torch.where(inside_all, torch.zeros_like(c_cut), c_cut)
        inside = order.rank.unsqueeze(1) < cut.unsqueeze(2)                                # (G, R, N)
        slope = torch.where(inside, costs.unsqueeze(1) - c_cut.unsqueeze(2), torch.zeros((), dtype=costs.dtype,
                                                                                         device=costs.device))
        scale = grad_value * (ctx.multiplicity / ctx.alpha)
        return slope * scale.unsqueeze(2), None, None, None


def cvar_from_probabilities(probabilities: torch.Tensor, costs: Union[torch.Tensor, CostOrder], alpha,
                            multiplicity: float = 1.0) -> torch.Tensor:
    """Exact CVaR_alpha of each probability row, differentiable in the probabilities.

    Args:
        probabilities: real, non-negative ``(..., N)``; each row a distribution over the N basis
            states (summing to 1; mass a row lacks by rounding is left out, so ``alpha = 1`` is
            ``Σ q c`` exactly). With costs ``(G, N)`` the leading axis is the problem: ``(G, N)`` or
            ``(G, S, N)``.
        costs: a cost vector ``(N,)``, one per problem ``(G, N)`` (not differentiated), or the
            :class:`CostOrder` of either (sort once, reuse).
        alpha: the kept fraction of the lowest-cost mass, in (0, 1].
        multiplicity: each listed state stands for this many states of equal cost and probability
            (the half register of a bit-flip symmetric problem: 2).

    Returns:
        ``probabilities.shape[:-1]``, in the probabilities' dtype.
    """
    what = "cvar_from_probabilities"
    alpha = check_alpha(alpha, what)
    order = cost_order(costs)
    if not isinstance(probabilities, torch.Tensor) or probabilities.is_complex() \
            or not probabilities.dtype.is_floating_point:
        got = probabilities.dtype if isinstance(probabilities, torch.Tensor) else type(probabilities).__name__
        raise TypeError(f"{what}: probabilities must be a real floating tensor, got {got}")
    if isinstance(multiplicity, bool) or not isinstance(multiplicity, numbers.Real) \
            or not math.isfinite(multiplicity) or multiplicity <= 0:
        raise ValueError(f"{what}: multiplicity must be a positive number, got {multiplicity!r}")
    G, N = order.n_rows, order.size
    shape = probabilities.shape
    if probabilities.dim() < 1 or shape[-1] != N or (G > 1 and (probabilities.dim() < 2 or shape[0] != G)):
        want = f"(..., {N})" if G == 1 else f"({G}, {N}) or ({G}, S, {N})"
        raise ValueError(f"{what}: probabilities must have shape {want} to match costs with {G} row(s) of "
                         f"{N}, got {tuple(shape)}")
    if probabilities.device != order.costs.device:
        raise ValueError(f"{what}: probabilities are on {probabilities.device} but the costs on "
                         f"{order.costs.device}")
    rows = probabilities.reshape(G, -1, N)
    return _CVaR.apply(rows, order, alpha, float(multiplicity)).reshape(shape[:-1])


def tail_size(alpha: float, shots: int) -> int:
    """``ceil(alpha * shots)`` without float rounding (``0.3 * 10`` is 3, not 4), at least 1."""
    return max(1, math.ceil(Fraction(alpha) * shots))


def cvar_from_samples(sampled_costs: torch.Tensor, alpha, what: Optional[str] = None) -> torch.Tensor:
    """Shot estimate of CVaR_alpha: the mean of the lowest ``ceil(alpha * shots)`` costs of each row.

    ``sampled_costs``: real ``(..., shots)``, the cost of every measured bitstring. Returns
    ``sampled_costs.shape[:-1]`` (not differentiable: sampling is not).
    """
    what = what or "cvar_from_samples"
    alpha = check_alpha(alpha, what)
    if not isinstance(sampled_costs, torch.Tensor) or sampled_costs.is_complex() or sampled_costs.dtype == torch.bool:
        got = sampled_costs.dtype if isinstance(sampled_costs, torch.Tensor) else type(sampled_costs).__name__
        raise TypeError(f"{what}: sampled_costs must be a real tensor (..., shots), got {got}")
    if sampled_costs.dim() < 1 or sampled_costs.shape[-1] < 1:
        raise ValueError(f"{what}: sampled_costs must have shape (..., shots) with shots >= 1, got "
                         f"{tuple(sampled_costs.shape)}")
    k = tail_size(alpha, sampled_costs.shape[-1])
    values = sampled_costs.detach()
    if not values.dtype.is_floating_point:
        values = values.to(torch.float64)
    lowest = torch.topk(values, k, dim=-1, largest=False, sorted=False).values
    return lowest.mean(-1)
