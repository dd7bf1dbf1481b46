""":class:`MultiStartQAOA`: a :class:`~.qaoa.QAOA` module plus its trainable angles for many starts."""
from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Optional

import torch
from torch import nn

from ..kernels.state import REAL_OF
from .angles import fixed_angles, linear_ramp, perturb, random_angles
from .qaoa_analysis import QAOAResult

if TYPE_CHECKING:
    from .qaoa import QAOA

__all__ = ["MultiStartQAOA"]


class MultiStartQAOA(nn.Module):
    """A :class:`QAOA` plus its trainable angles: ``angles`` is an ``nn.Parameter`` of shape
    ``(S, 2p)`` (or ``(G, S, 2p)``) and ``forward()`` returns the expected costs of all starts,
    so ``model().sum().backward()`` trains every start at once (what a Lightning task wraps).

    ``init`` is ``"ramp"`` (linear ramp), ``"fixed"`` (Wurtz–Lykov angles, 3-regular MaxCut),
    ``"random"``, or a tensor of initial angles. With a string, or a single point ``(2p,)``, the
    first start is exactly that point and the other ``n_starts - 1`` are perturbed by ``noise``
    (seeded by ``generator``). A tensor ``(S, 2p)`` (or ``(G, S, 2p)`` per problem of a batch of G)
    is used as given: its S is the number of starts, and an ``n_starts`` other than S is an error.
    ``n_starts`` defaults to 8 (and to S for a batch of starts).
    """

    def __init__(self, qaoa_module: QAOA, n_starts: Optional[int] = None, init="ramp", noise: float = 0.1,
                 generator: Optional[torch.Generator] = None):
        super().__init__()
        from .qaoa import QAOA
        what = "MultiStartQAOA"
        if not isinstance(qaoa_module, QAOA):
            raise TypeError(f"{what}: expected a QAOA module, got {type(qaoa_module).__name__}")
        self.qaoa = qaoa_module
        p = qaoa_module.p
        if n_starts is not None and (isinstance(n_starts, bool) or not isinstance(n_starts, numbers.Integral)
                                     or n_starts < 1):
            raise ValueError(f"{what}: n_starts must be a positive int, got {n_starts!r}")
        if isinstance(noise, bool) or not isinstance(noise, numbers.Real) or not math.isfinite(noise) or noise < 0:
            raise ValueError(f"{what}: noise must be a finite number >= 0, got {noise!r}")
        if isinstance(init, str):
            S = 8 if n_starts is None else int(n_starts)
            if init == "ramp":
                a = perturb(linear_ramp(p), S, noise, generator)
            elif init == "fixed":
                a = perturb(fixed_angles(p), S, noise, generator)
            elif init == "random":
                a = random_angles(p, S, generator)
            else:
                raise ValueError(f"{what}: init must be 'ramp', 'fixed', 'random' or a tensor, got {init!r}")
        else:
            try:
                a = torch.as_tensor(init.detach() if isinstance(init, torch.Tensor) else init).cpu()
            except (TypeError, ValueError, RuntimeError):
                raise TypeError(f"{what}: init must be 'ramp', 'fixed', 'random' or a tensor of angles, got "
                                f"{type(init).__name__}") from None
            if a.is_complex() or a.dtype == torch.bool:
                raise TypeError(f"{what}: initial angles must be real, got {a.dtype}")
            a = a.to(torch.float64)
            G = qaoa_module.n_graphs
            if a.dim() == 0 or a.shape[-1] != 2 * p or a.dim() > 3 or (a.dim() == 3 and a.shape[0] != G):
                raise ValueError(f"{what}: initial angles must have shape ({2 * p},) (one point, perturbed into "
                                 f"n_starts starts), (S, {2 * p}) or ({G}, S, {2 * p}) (per problem), got "
                                 f"{tuple(a.shape)}")
            if not bool(torch.isfinite(a).all()):
                raise ValueError(f"{what}: initial angles contain NaN or inf")
            if a.dim() == 1:
                a = perturb(a, 8 if n_starts is None else int(n_starts), noise, generator)
            else:
                S = a.shape[-2]
                if S < 1:
                    raise ValueError(f"{what}: initial angles hold no start (shape {tuple(a.shape)})")
                if n_starts is not None and n_starts != S:
                    raise ValueError(f"{what}: n_starts={n_starts} but the initial angles hold {S} starts (shape "
                                     f"{tuple(a.shape)}); give angles ({2 * p},) to perturb into n_starts starts, "
                                     f"or leave n_starts out")
        real = REAL_OF[qaoa_module.dtype]
        self.angles = nn.Parameter(a.to(device=qaoa_module.device, dtype=real).clone())

    def forward(self) -> torch.Tensor:
        return self.qaoa(self.angles)

    def best(self):
        """``(angles (2p,), expected cost)`` of the start with the lowest expected cost (over all
        problems of a batch: angles shared by the G problems are the row of that start)."""
        with torch.no_grad():
            c = self.qaoa(self.angles)
            j = int(torch.argmin(c.reshape(-1)))
            rows = self.angles.detach().reshape(-1, self.angles.shape[-1])
            # costs are (G, S) for angles (S, 2p) shared by G problems: start j % S
            return rows[j % rows.shape[0]].clone(), float(c.reshape(-1)[j])

    def analyse(self, **kwargs) -> QAOAResult:
        return self.qaoa.analyse(self.angles.detach(), **kwargs)
