"""``optimize``: minimise the expected cost of every start of a :class:`~.qaoa.QAOA` at once."""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Optional

import torch

from ..kernels.state import REAL_OF

if TYPE_CHECKING:
    from .qaoa import QAOA

__all__ = ["optimize"]


def optimize(model: QAOA, angles, steps: int = 100, lr: Optional[float] = None, optimizer: str = "adam",
             diff_method: Optional[str] = None, callback=None):
    """Minimise the expected cost of every start in ``angles`` (``(S, 2p)`` or ``(G, S, 2p)``) at once.

    Adam on the sum of the costs is Adam on each start independently (its update is elementwise).
    ``optimizer="lbfgs"`` runs torch's L-BFGS (strong Wolfe line search) on the sum. ``lr`` defaults to
    0.05 for Adam and 1 for L-BFGS (where ``steps`` is its ``max_iter``). Returns
    ``(angles, costs)`` at the end, detached; ``callback(step, costs)`` is called every step.
    """
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"optimize: optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise ValueError(f"optimize: steps must be a non-negative int, got {steps!r}")
    a = torch.as_tensor(angles).detach().to(device=model.device, dtype=REAL_OF[model.dtype]).clone()
    a.requires_grad_(True)
    if optimizer == "adam":
        opt = torch.optim.Adam([a], lr=0.05 if lr is None else lr)
        for step in range(steps):
            opt.zero_grad()
            costs = model(a, diff_method=diff_method)
            costs.sum().backward()
            opt.step()
            if callback is not None:
                callback(step, costs.detach())
    else:
        opt = torch.optim.LBFGS([a], lr=1.0 if lr is None else lr, max_iter=steps, line_search_fn="strong_wolfe",
                                tolerance_grad=1e-9, tolerance_change=1e-12)

        def closure():
            opt.zero_grad()
            c = model(a, diff_method=diff_method)
            loss = c.sum()
            loss.backward()
            if callback is not None:
                callback(None, c.detach())
            return loss
        if steps:
            opt.step(closure)
    with torch.no_grad():
        final = model(a, diff_method=diff_method)
    return a.detach(), final.detach()
