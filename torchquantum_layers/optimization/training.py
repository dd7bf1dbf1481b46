"""``optimize``: minimise the expected cost (or the CVaR) of every start of a :class:`~.qaoa.QAOA` at once."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Optional

import torch

from ..kernels.state import REAL_OF
from .cvar import check_alpha

if TYPE_CHECKING:
    from .qaoa import QAOA

__all__ = ["optimize", "OBJECTIVES"]

OBJECTIVES = ("expectation", "cvar")


def _objective_fn(model: QAOA, objective: str, alpha, diff_method):
    """``angles -> per-start objective values`` for ``objective`` (checked here, before any step)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"optimize: objective must be one of {OBJECTIVES}, got {objective!r}")
    if objective == "expectation":
        if alpha is not None:
            raise ValueError(f"optimize: alpha={alpha!r} is read by objective='cvar' only; objective="
                             f"'expectation' minimises the plain expected cost (leave alpha None)")
        return lambda a: model(a, diff_method=diff_method)
    if alpha is None:
        raise ValueError("optimize: objective='cvar' needs alpha, the kept fraction in (0, 1]")
    alpha = check_alpha(alpha, "optimize")
    return lambda a: model.cvar(a, alpha, diff_method=diff_method)


def optimize(model: QAOA, angles, steps: int = 100, lr: Optional[float] = None, optimizer: str = "adam",
             diff_method: Optional[str] = None, callback=None, objective: str = "expectation",
             alpha: Optional[float] = None):
    """Minimise the objective of every start in ``angles`` (``(S, 2p)`` or ``(G, S, 2p)``) at once.

    ``objective="expectation"`` (default) is the expected cost; ``"cvar"`` is CVaR_alpha, the mean
    cost of the lowest-cost ``alpha`` fraction of each start's distribution (Barkoutsos et al.
    2020, :meth:`~.qaoa.QAOA.cvar`; ``alpha`` in (0, 1] is required and read by it only).
    Adam on the sum of the objectives is Adam on each start independently (its update is
    elementwise). ``optimizer="lbfgs"`` runs torch's L-BFGS (strong Wolfe line search) on the sum.
    ``lr`` defaults to 0.05 for Adam and 1 for L-BFGS (where ``steps`` is its ``max_iter``). Returns
    ``(angles, values)`` at the end, detached, ``values`` the objective per start;
    ``callback(step, values)`` is called every step.
    """
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"optimize: optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise ValueError(f"optimize: steps must be a non-negative int, got {steps!r}")
    evaluate = _objective_fn(model, objective, alpha, diff_method)
    a = torch.as_tensor(angles).detach().to(device=model.device, dtype=REAL_OF[model.dtype]).clone()
    a.requires_grad_(True)
    if optimizer == "adam":
        opt = torch.optim.Adam([a], lr=0.05 if lr is None else lr)
        for step in range(steps):
            opt.zero_grad()
            costs = evaluate(a)
            costs.sum().backward()
            opt.step()
            if callback is not None:
                callback(step, costs.detach())
    else:
        opt = torch.optim.LBFGS([a], lr=1.0 if lr is None else lr, max_iter=steps, line_search_fn="strong_wolfe",
                                tolerance_grad=1e-9, tolerance_change=1e-12)

        def closure():
            opt.zero_grad()
            c = evaluate(a)
            loss = c.sum()
            loss.backward()
            if callback is not None:
                callback(None, c.detach())
            return loss
        if steps:
            opt.step(closure)
    with torch.no_grad():
        final = evaluate(a)
    return a.detach(), final.detach()
