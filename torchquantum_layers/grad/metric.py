"""The Fubini–Study metric of a circuit's output state, from its P derivative states.

``|∂_i ψ⟩`` for every trainable angle i rides along with ψ as extra rows of one batch: at each
parametrised gate ``∂U ψ_before`` is added to the rows of the angles it reads, and every gate is
applied to all rows. One gate-by-gate forward pass of ``(P + 1) · B`` rows, instead of the
``2 · 2**n · B`` reverse passes a Jacobian of the state takes.
"""
from __future__ import annotations

import torch

from ..circuit import Param
from ..kernels.state import check_allocation
from .adjoint import derivative_states

__all__ = ["quantum_fisher", "tangent_states", "fubini_study", "require_pure"]


def require_pure(circuit, what: str, quantity: str) -> None:
    """Refuse a circuit with channels, measurements, resets or a noise model: ``quantity`` (what
    ``what`` computes) is defined on a pure output state."""
    if circuit.is_noisy:
        raise ValueError(f"{what}: {quantity} of a pure output state; this circuit has channels, measurements, "
                         f"resets or a noise model")


def tangent_states(circuit, x=None, state=None, weights=None):
    """The output states ``ψ`` ``(B, 2**n)`` and their derivatives ``|∂_i ψ⟩`` ``(P, B, 2**n)``
    with respect to the P trainable angles (at ``weights``, default the circuit's), in one
    gate-by-gate pass of ``(P + 1) · B`` rows (module notes). No autograd graph is recorded."""
    require_pure(circuit, "tangent_states", "the derivative states are those")
    x, state, _ = circuit.prepare(x, state)
    n, P = circuit.n_wires, circuit.num_parameters
    B = state.shape[0]
    check_allocation(n, (P + 1) * B, state.dtype, state.device)
    with torch.no_grad():
        weights = circuit.weights_or(weights, "tangent_states").detach()
        rows = torch.zeros((P + 1) * B, 2 ** n, dtype=state.dtype, device=state.device)
        rows[:B] = state
        x_rows = None if x is None else x.repeat(P + 1, 1)
        for op in circuit.ops:
            data = circuit.data(op)
            before = rows[:B]
            after = op.gate.apply(rows, circuit.angle_values(op, x_rows, weights), op.wires, n, data, op.adjoint)
            trained = [(j, a) for j, a in enumerate(op.angles) if isinstance(a, Param)]
            if trained:
                angles = circuit.angle_values(op, x, weights)
                mus = derivative_states(circuit, op, angles, before, after[:B], n)
                for j, a in trained:
                    start = (a.index + 1) * B
                    after[start:start + B] += a.scale * mus[j]
            rows = after
        return rows[:B], rows[B:].reshape(P, B, 2 ** n)


def quantum_fisher(circuit, x=None, state=None):
    """Fubini–Study metric g_ij = Re[⟨∂iψ|∂jψ⟩ − ⟨∂iψ|ψ⟩⟨ψ|∂jψ⟩] per sample, (B, P, P).

    Multiply by 4 for the quantum Fisher information; :class:`tql.optim.QNG` uses it for the
    quantum natural gradient. No autograd graph is recorded; memory: (P + 1) · B states.
    """
    require_pure(circuit, "quantum_fisher", "the Fubini–Study metric is that")
    psi, d = tangent_states(circuit, x, state)
    return fubini_study(psi, d)


def fubini_study(psi, d):
    """``Re[⟨∂iψ|∂jψ⟩ − ⟨∂iψ|ψ⟩⟨ψ|∂jψ⟩]`` ``(B, P, P)`` from :func:`tangent_states`' output."""
    overlap = torch.einsum("pbn,qbn->bpq", d.conj(), d)
    berry = torch.einsum("pbn,bn->bp", d.conj(), psi)
    return (overlap - berry[:, :, None] * berry.conj()[:, None, :]).real
