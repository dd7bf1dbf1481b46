"""The CVaR objective of :class:`~.qaoa.QAOA` (Barkoutsos et al. 2020); the math is in :mod:`.cvar`.

The mixin :class:`_CVaRObjective` holds :meth:`~.qaoa.QAOA.cvar` (exact and differentiable, or
estimated from shots), :meth:`~.qaoa.QAOA.cvar_of_probabilities` and the sorted cost order they use.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..caching import building_cache
from ..kernels.state import REAL_OF, check_allocation
from .cvar import check_alpha, cost_order, cvar_from_probabilities, cvar_from_samples
from .qaoa_adjoint import _AdjointCVaR


class _CVaRObjective:
    """The CVaR methods of :class:`~.qaoa.QAOA` (a mixin: no state of its own)."""

    def _cvar_order(self):
        """The cost diagonal sorted once per dtype/device (the wire-0 = 0 half under bit-flip
        symmetry: the other half repeats it with the same probabilities)."""
        c = self._consts()
        order = c.get("cvar_order")
        if order is None:
            half = 2 ** self.n_qubits // 2 if self._z2 else None
            with building_cache():
                d = self._diag64 if half is None else self._diag64[:, :half]
                order = cost_order(d.to(self.device))
            c["cvar_order"] = order
        return order

    def cvar_of_probabilities(self, probabilities: torch.Tensor, alpha) -> torch.Tensor:
        """CVaR_alpha of probabilities ``(..., 2**n)`` as ``forward(angles, "probabilities")`` returns
        them (differentiable); shape ``(S,)`` / ``(G, S)`` as the expected cost."""
        alpha = check_alpha(alpha, "QAOA.cvar")
        N = 2 ** self.n_qubits
        if not isinstance(probabilities, torch.Tensor) or probabilities.shape[-1:] != (N,):
            got = tuple(probabilities.shape) if isinstance(probabilities, torch.Tensor) else type(probabilities).__name__
            raise ValueError(f"QAOA.cvar: probabilities must have shape (..., {N}), got {got}")
        if self._z2:
            return cvar_from_probabilities(probabilities[..., :N // 2], self._cvar_order(), alpha, multiplicity=2)
        return cvar_from_probabilities(probabilities, self._cvar_order(), alpha)

    def _cvar_rows(self, probabilities: torch.Tensor, alpha: float) -> torch.Tensor:
        """CVaR of the simulated register's probabilities (B, N_sim) (the half under symmetry), (B,)."""
        B, Ns = probabilities.shape
        G = self.n_graphs
        p = probabilities if G == 1 else probabilities.view(G, B // G, Ns)
        return cvar_from_probabilities(p, self._cvar_order(), alpha, multiplicity=2 if self._z2 else 1).reshape(B)

    def cvar(self, angles, alpha, diff_method: Optional[str] = None, shots: Optional[int] = None,
             generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """CVaR_alpha of the cost (Barkoutsos et al. 2020): the expected cost over the lowest-cost
        ``alpha`` fraction of each start's output distribution, ``(S,)`` / ``(G, S)`` as :meth:`forward`.

        ``alpha`` in (0, 1]: 1 is the expected cost, ``alpha -> 0`` the lowest cost of non-zero
        probability. Exact and differentiable by default (through the state path of ``diff_method``);
        with ``shots``, the estimate from :meth:`sample` (seeded by ``generator``): the mean of the
        lowest ``ceil(alpha * shots)`` sampled costs, not differentiable.
        """
        alpha = check_alpha(alpha, "QAOA.cvar")
        if shots is None:
            method = self.diff_method if diff_method is None else diff_method
            if method == "adjoint":
                gam, bet, shape, _ = self._angles(angles)
                check_allocation(self.n_qubits, gam.shape[0], self.dtype, self.device)
                return _AdjointCVaR.apply(gam, bet, self, alpha).reshape(shape)
            return self.cvar_of_probabilities(self.forward(angles, "probabilities", diff_method), alpha)
        samples = self.sample(angles, shots, generator=generator)          # shape + (shots,)
        d = self._diag64.to(samples.device)
        G = self.n_graphs
        sampled = torch.gather(d.unsqueeze(1).expand(G, samples.numel() // (G * shots), d.shape[1]), 2,
                               samples.reshape(G, -1, shots)).reshape(samples.shape)
        return cvar_from_samples(sampled, alpha, "QAOA.cvar").to(REAL_OF[self.dtype])
