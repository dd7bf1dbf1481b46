"""Optimisers for many QAOA starts at once: the quantum natural gradient with the Fubini–Study
metric of each start's state, and SPSA with one independent perturbation estimate per start.

:func:`qaoa_metric` is the Fubini–Study metric of the QAOA state with respect to its angles
``[γ_1 … γ_p, β_1 … β_p]``,

    g_ij = Re[⟨∂_i ψ|∂_j ψ⟩ − ⟨∂_i ψ|ψ⟩⟨ψ|∂_j ψ⟩]            (4 g is the quantum Fisher information),

the convention of :func:`torchquantum_layers.grad.quantum_fisher`, per start (and per problem of a
batch). The derivative states are carried forward with the state in one stacked batch of
``(1 + 2p)`` blocks: the cost layer ``exp(-iγ_l C)`` multiplies every block by its phases and adds
``-iC ψ`` to block γ_l; each mixer gate ``exp(-iβ_l G)`` is applied to every block and adds
``-iG ψ`` to block β_l (G commutes with its own exponential). Any mixer and start state work; the
cost is about ``(1 + 2p)`` forward passes.

:class:`QAOANaturalGradient` steps every start ``s`` by ``θ_s ← θ_s − lr (g_s + λI)⁻¹ ∇_s L``, one
batched solve for all starts (the loss is the sum of the starts' costs, so ``∇_s L`` is start s's
own gradient). :class:`MultiStartSPSA` is :class:`torchquantum_layers.optim.SPSA` whose closure
returns the vector of the starts' costs: start s moves by its own difference quotient
``(C_s(θ + cΔ) − C_s(θ − cΔ)) / 2c · Δ_s``, so the other starts add no noise to its estimate (with
the summed loss they would).
"""
from __future__ import annotations

from typing import Callable, Union

import torch

from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import check_allocation
from ..optim import SPSA, _positive, loss_of, natural_gradient_update

__all__ = ["qaoa_metric", "QAOANaturalGradient", "MultiStartSPSA"]


def _state_and_derivatives(model, gam: torch.Tensor, bet: torch.Tensor):
    """ψ (B, N) and ∂ψ/∂[γ_1…γ_p, β_1…β_p] (2p, B, N), by forward propagation (no autograd)."""
    c = model._consts()
    B, n, p = gam.shape[0], model.n_qubits, model.p
    N = 2 ** n
    K = 1 + 2 * p
    check_allocation(n, K * B, model.dtype, model.device)
    rows = torch.zeros(K, B, N, dtype=model.dtype, device=model.device)
    rows[0] = model._rows(c["init"], B)
    mid = model._rows(c["mid"], B)                                   # -i C per row
    gens = {}
    for l in range(p):
        rows *= model._phase(gam[:, l]).unsqueeze(0)
        rows[1 + l] += mid * rows[0]
        mats = {}
        for kind, wires in model._steps:
            key = model._step_key(kind, wires)
            if key not in mats:
                m = model._step_matrix(kind, wires, bet[:, l])        # (B, d, d)
                mats[key] = m.repeat(K, 1, 1)
            if key not in gens:
                gens[key] = (-1j * model._step_generator(kind, wires, B)).to(device=model.device, dtype=model.dtype)
            flat = apply_matrix_unchecked(rows.reshape(K * B, N), mats[key], wires, n)
            rows = flat.reshape(K, B, N)
            rows[1 + p + l] += apply_matrix_unchecked(rows[0], gens[key], wires, n)
    return rows[0], rows[1:]


def qaoa_metric(model, angles) -> torch.Tensor:
    """Fubini–Study metric of the QAOA states w.r.t. their angles: ``(S, 2p, 2p)`` for angles
    ``(S, 2p)`` (``(2p, 2p)`` for one ``(2p,)``, ``(G, S, 2p, 2p)`` for a batch of G problems), in the
    module's real dtype; no autograd graph (the angles are read detached)."""
    from .qaoa import QAOA
    if not isinstance(model, QAOA):
        raise TypeError(f"qaoa_metric: expected a QAOA module, got {type(model).__name__}")
    a = angles.detach() if isinstance(angles, torch.Tensor) else angles
    gam, bet, shape, _ = model._angles(a)
    with torch.no_grad():
        psi, d = _state_and_derivatives(model, gam, bet)
        gram = torch.einsum("ibn,jbn->bij", d.conj(), d)                # ⟨∂_i ψ|∂_j ψ⟩
        over = torch.einsum("ibn,bn->bi", d.conj(), psi)                # ⟨∂_i ψ|ψ⟩
        g = (gram - over.unsqueeze(2) * over.conj().unsqueeze(1)).real
        g = (g + g.transpose(1, 2)) / 2
    P = 2 * model.p
    return g.reshape(shape + (P, P))


class QAOANaturalGradient(torch.optim.Optimizer):
    """Quantum natural gradient for a tensor of QAOA angles, every start at once.

    Args:
        angles: the trainable angles, a leaf tensor ``(S, M)`` (or ``(G, S, M)``); ``backward``
            leaves ``∇L`` in ``angles.grad``.
        metric: a :class:`~.qaoa.QAOA` module (then ``M = 2p`` and the metric is
            :func:`qaoa_metric`), or a callable ``angles (detached) -> (S, M, M)`` (a leading G
            axis, for angles shared by G problems, is summed: the metric of the product state).
        lr: step size (default 0.1).
        regularization: λ added to the diagonal so that the solve is well posed where g is
            singular (e.g. at γ = 0, where β only changes a global phase of ``|+⟩``).
    """

    def __init__(self, angles: torch.Tensor, metric: Union[Callable, "torch.nn.Module"], lr: float = 0.1,
                 regularization: float = 1e-3):
        from .qaoa import QAOA
        what = "QAOANaturalGradient"
        if not isinstance(angles, torch.Tensor) or not angles.is_floating_point() or angles.dim() < 1:
            raise TypeError(f"{what}: angles must be a real floating tensor (S, M), got "
                            f"{type(angles).__name__ if not isinstance(angles, torch.Tensor) else angles.dtype}")
        if isinstance(metric, QAOA):
            module = metric
            if angles.shape[-1] != 2 * module.p:
                raise ValueError(f"{what}: angles have {angles.shape[-1]} columns, the QAOA (p={module.p}) "
                                 f"takes {2 * module.p}")
            metric = lambda a: qaoa_metric(module, a)                 # noqa: E731
        elif not callable(metric):
            raise TypeError(f"{what}: metric must be a QAOA module or a callable, got {type(metric).__name__}")
        lr = _positive(lr, "lr", what)
        regularization = _positive(regularization, "regularization", what, allow_zero=True)
        super().__init__([angles], dict(lr=lr, regularization=regularization))
        self.metric = metric

    @torch.no_grad()
    def step(self, closure=None):
        loss = loss_of(closure)
        group = self.param_groups[0]
        (a,) = group["params"]
        if a.grad is None:
            return loss
        M = a.shape[-1]
        g = self.metric(a.detach())
        if g.dim() == a.dim() + 2:                                     # (G, S, M, M) for shared angles
            g = g.sum(0)
        if g.shape != a.shape + (M,):
            raise ValueError(f"QAOANaturalGradient: the metric has shape {tuple(g.shape)}, the angles "
                             f"{tuple(a.shape)} need {tuple(a.shape) + (M,)}")
        natural_gradient_update(a, g, group["lr"], group["regularization"])
        return loss


class MultiStartSPSA(SPSA):
    """:class:`~torchquantum_layers.optim.SPSA` (same arguments, gain schedule and seeded
    directions, so a run resumed from ``state_dict()`` continues exactly) for a batch of independent
    starts: the closure returns the costs ``(S,)`` of the S rows of the one parameter ``(S, M)``
    (or any loss shape equal to the parameter's leading dimensions), and row s moves by its own
    slope ``(C_s(θ + c_k Δ) − C_s(θ − c_k Δ)) / (2 c_k)`` times its ``Δ_s``. A scalar loss gives
    plain SPSA. ``step`` returns the mean over the evaluations of the summed loss.
    """

    def _slope(self, plus: torch.Tensor, minus: torch.Tensor, c_k: float, p: torch.Tensor) -> torch.Tensor:
        if plus.shape != minus.shape:
            raise ValueError(f"MultiStartSPSA: the closure returned shapes {tuple(plus.shape)} and "
                             f"{tuple(minus.shape)}")
        slope = (plus - minus) / (2 * c_k)
        if slope.dim() and tuple(p.shape[:slope.dim()]) != tuple(slope.shape):
            raise ValueError(f"MultiStartSPSA: the closure returned losses of shape "
                             f"{tuple(slope.shape)} for a parameter of shape {tuple(p.shape)}; "
                             f"one loss per leading row, or a scalar")
        return slope.reshape(tuple(slope.shape) + (1,) * (p.dim() - slope.dim()))
