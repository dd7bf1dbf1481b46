"""Reading out QAOA states: :class:`QAOAResult` and the analysis methods of :class:`~.qaoa.QAOA`.

The mixin :class:`_QAOAAnalysis` holds :meth:`~.qaoa.QAOA.exact` (brute-force solutions, cached, up to
:data:`~.problems.MAX_EXACT_QUBITS` qubits), :meth:`~.qaoa.QAOA.approximation_ratio`,
:meth:`~.qaoa.QAOA.analyse` (expected cost and objective, approximation ratio, probability of the
optimum and of feasibility, top-k bitstrings, seeded samples, CVaR) and :meth:`~.qaoa.QAOA.sample`.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Optional

import torch

from .problems import MAX_EXACT_QUBITS, exact_solution
from .cvar import check_alpha

__all__ = ["QAOAResult"]


@dataclass
class QAOAResult:
    """Summary of QAOA states for a batch of angles (shapes ``(S,)`` or ``(G, S)`` per quantity)."""
    angles: torch.Tensor
    expected_cost: torch.Tensor
    expected_objective: torch.Tensor            # E[objective] in natural units, over all bitstrings
    approximation_ratio: Optional[torch.Tensor]
    optimum_probability: Optional[torch.Tensor]
    feasible_probability: torch.Tensor
    top_indices: torch.Tensor                    # (..., k) most probable basis states
    top_probabilities: torch.Tensor              # (..., k)
    top_bitstrings: list                         # nested lists of bitstrings, same layout
    samples: Optional[torch.Tensor] = None       # (..., shots) basis indices when shots were asked
    best: Optional[tuple] = None                 # index of the start with the lowest expected cost
    cvar: Optional[torch.Tensor] = None          # exact CVaR_alpha per start when cvar_alpha was asked
    cvar_alpha: Optional[float] = None

    def __repr__(self) -> str:
        def fmt(t):
            return "None" if t is None else (f"{float(t):.4f}" if t.numel() == 1 else
                                             f"tensor(shape={tuple(t.shape)})")
        return (f"QAOAResult(expected_cost={fmt(self.expected_cost)}, approximation_ratio="
                f"{fmt(self.approximation_ratio)}, optimum_probability={fmt(self.optimum_probability)}, "
                f"best={self.best})")


class _QAOAAnalysis:
    """The analysis methods of :class:`~.qaoa.QAOA` (a mixin: no state of its own)."""

    def exact(self):
        """Exact solutions (brute force) of the problems, cached; ``None`` for > 26 qubits."""
        if self._exact is None:
            if self.n_qubits > MAX_EXACT_QUBITS:
                return None
            self._exact = [exact_solution(pr) for pr in self.problems]
        return self._exact

    def approximation_ratio(self, expected_cost: torch.Tensor) -> torch.Tensor:
        """``(C_worst - ⟨C⟩) / (C_worst - C_opt)`` with C_worst the largest cost of a feasible bitstring.

        1 at the optimum, 0 at the worst feasible bitstring; for MaxCut (C = -cut, C_worst = 0) it is
        ``⟨cut⟩ / max cut``. Needs the exact solution (≤ 26 qubits).
        """
        ex = self.exact()
        if ex is None:
            raise ValueError(f"approximation_ratio: {self.n_qubits} qubits is beyond brute force "
                             f"({MAX_EXACT_QUBITS} qubits)")
        e = torch.as_tensor(expected_cost)
        opt = torch.tensor([x.cost for x in ex], dtype=torch.float64, device=e.device)
        worst = torch.tensor([x.worst_cost for x in ex], dtype=torch.float64, device=e.device)
        span = worst - opt
        span = torch.where(span > 0, span, torch.ones_like(span))
        if self.single:
            return ((worst - e.to(torch.float64)) / span)[0] if e.dim() == 0 else (worst - e.to(torch.float64)) / span
        shape = (-1,) + (1,) * (e.dim() - 1)
        return (worst.view(shape) - e.to(torch.float64)) / span.view(shape)

    def analyse(self, angles, k: int = 5, shots: Optional[int] = None,
                generator: Optional[torch.Generator] = None, cvar_alpha: Optional[float] = None) -> QAOAResult:
        """Expected cost, approximation ratio, probability of the optimum and of feasibility, the top-k
        bitstrings per start, (with ``shots``) seeded samples and (with ``cvar_alpha``) the exact
        CVaR of each start (see :meth:`cvar`), for a batch of angles."""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"analyse: k must be a positive int, got {k!r}")
        if cvar_alpha is not None:
            cvar_alpha = check_alpha(cvar_alpha, "analyse", name="cvar_alpha")
        N = 2 ** self.n_qubits
        k = min(int(k), N)
        with torch.no_grad():
            psi = self.forward(angles, "state")
            shape = psi.shape[:-1]
            flat = psi.reshape(-1, N)
            prob = (flat.real.square() + flat.imag.square()).to(torch.float64)
            B, G = flat.shape[0], self.n_graphs
            d = self._diag64.to(prob.device)
            pg = prob.view(G, B // G, N)
            cost = (pg * d.unsqueeze(1)).sum(-1)
            feas = torch.stack([pr.feasible_mask() for pr in self.problems]).to(prob.device, torch.float64)
            feas_p = (pg * feas.unsqueeze(1)).sum(-1)
            ex = self.exact()
            ratio = opt_p = None
            if ex is not None:
                ratio = self.approximation_ratio(cost if not self.single else cost[0]).reshape(shape)
                optm = torch.zeros(G, N, dtype=torch.float64, device=prob.device)
                for g, x in enumerate(ex):
                    optm[g, x.indices.to(prob.device)] = 1
                opt_p = (pg * optm.unsqueeze(1)).sum(-1).reshape(shape)
            objv = torch.stack([pr.objective_vector() for pr in self.problems]).to(prob.device)
            obj = (pg * objv.unsqueeze(1)).sum(-1).reshape(shape)
            tp, ti = torch.topk(prob, k, dim=1)
            bits = [[format(int(i), f"0{self.n_qubits}b") for i in row] for row in ti.tolist()]
            if len(shape) == 2:
                bits = [bits[g * shape[1]:(g + 1) * shape[1]] for g in range(shape[0])]
            elif len(shape) == 0:
                bits = bits[0]
            samples = None
            if shots is not None:
                from ..measure import sample
                samples = sample(flat, shots, generator=generator).reshape(shape + (shots,))
            cost = cost.reshape(shape)
            cvar = None if cvar_alpha is None else self.cvar_of_probabilities(
                prob.reshape(shape + (N,)), cvar_alpha)
            best = None
            if cost.numel():
                j = int(torch.argmin(cost.reshape(-1)))
                best = tuple(int(x) for x in torch.unravel_index(torch.tensor(j), cost.shape)) if cost.dim() else ()
            return QAOAResult(angles=torch.as_tensor(angles).detach(), expected_cost=cost,
                              expected_objective=obj, approximation_ratio=ratio, optimum_probability=opt_p,
                              feasible_probability=feas_p.reshape(shape), top_indices=ti.reshape(shape + (k,)),
                              top_probabilities=tp.reshape(shape + (k,)), top_bitstrings=bits,
                              samples=samples, best=best, cvar=cvar, cvar_alpha=cvar_alpha)

    def sample(self, angles, shots: int, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """``shots`` measured basis indices per start: ``(S, shots)`` (seeded by ``generator``)."""
        from ..measure import sample
        with torch.no_grad():
            psi = self.forward(angles, "state")
            N = 2 ** self.n_qubits
            shape = psi.shape[:-1]
            return sample(psi.reshape(-1, N), shots, generator=generator).reshape(shape + (shots,))
