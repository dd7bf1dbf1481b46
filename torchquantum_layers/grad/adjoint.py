"""Adjoint differentiation: forward keeps only the final state; backward un-computes it.

Backward folds the upstream gradient g (B, n_obs) into ONE bra per sample,
λ = Σ_k g_k O_k ψ, then sweeps the circuit once in reverse:

    ψ ← U_i† ψ ;  ∂L/∂θ_i = 2 Re⟨λ| ∂U_i/∂θ ψ⟩ ;  λ ← U_i† λ

Memory is a few states whatever the depth. Gates with a generator use μ = -i G U ψ; other
parametrised gates take ∂U/∂θ from the gate table by forward-mode AD of their matrix function.
"""
from __future__ import annotations

import numpy as np
import torch

from ..circuit import Input, Param
from ..engine import run_circuit
from ..kernels.apply import apply_diagonal_unchecked, apply_matrix_unchecked

_GEN_CACHE: dict = {}


def _generator_tensor(gate, k, dtype, device):
    key = (gate.name, k, dtype, str(device))
    if key not in _GEN_CACHE:
        g = gate.generator(k)
        diag = np.allclose(g, np.diag(np.diag(g)))
        t = torch.as_tensor(np.diag(g) if diag else g, dtype=dtype, device=device)
        _GEN_CACHE[key] = (diag, t)
    return _GEN_CACHE[key]


def apply_generator(gate, state, wires, n):
    """G ψ for the gate's generator on ``wires``."""
    diag, g = _generator_tensor(gate, len(wires), state.dtype, state.device)
    if diag:
        return apply_diagonal_unchecked(state, g, wires, n)
    return apply_matrix_unchecked(state, g, wires, n)


def derivative_states(circuit, op, angles, psi_before, psi_after, n):
    """[∂U/∂θ_j ψ_before for each angle j] of one op (U† instead of U when op.adjoint)."""
    gate = op.gate
    k = len(op.wires)
    if gate.generator_fn is not None and gate.n_params == 1:
        # U = exp(-iθG) (or its adjoint exp(+iθG)): ∂U/∂θ ψ = ∓i G U ψ
        g_psi = apply_generator(gate, psi_after, op.wires, n)
        return [g_psi * (1j if op.adjoint else -1j)]
    out = []
    data = circuit.data(op)
    for j in range(len(angles)):
        def mat(t, j=j):
            a = list(angles)
            a[j] = t
            return gate.matrix_fn(tuple(a), k, psi_before.dtype, data, psi_before.device)
        _, dm = torch.func.jvp(mat, (angles[j],), (torch.ones_like(angles[j]),))
        if op.adjoint:
            dm = dm.conj().transpose(-1, -2)
        out.append(apply_matrix_unchecked(psi_before, dm, op.wires, n))
    return out


def _inner_real(lam, mu):
    """Re⟨λ|μ⟩ per sample."""
    return torch.linalg.vecdot(lam, mu, dim=-1).real


class AdjointExpval(torch.autograd.Function):
    """Expectations of ``observables`` after ``circuit``; gradients by the adjoint method."""

    @staticmethod
    def forward(ctx, circuit, observables, x, state, weights):
        from ..observables import apply_hamiltonian, expectation
        with torch.no_grad():
            psi = run_circuit(circuit, state, x, weights)
            values = torch.stack([expectation(psi, o) for o in observables], dim=-1)
        ctx.circuit = circuit
        ctx.observables = observables
        ctx.apply_hamiltonian = apply_hamiltonian
        ctx.state_batch = state.shape[0]
        ctx.save_for_backward(psi, x, weights)
        return values

    @staticmethod
    def backward(ctx, grad_values):
        circuit, observables = ctx.circuit, ctx.observables
        psi, x, weights = ctx.saved_tensors
        need_x, need_state, need_w = ctx.needs_input_grad[2], ctx.needs_input_grad[3], ctx.needs_input_grad[4]
        n = circuit.n_wires
        with torch.no_grad():
            g = grad_values.to(psi.real.dtype)
            lam = None
            for k, obs in enumerate(observables):
                term = ctx.apply_hamiltonian(psi, obs) * g[:, k:k + 1]
                lam = term if lam is None else lam + term
            if lam.shape[0] != psi.shape[0]:
                lam = lam.expand_as(psi)
            grad_w = torch.zeros_like(weights) if need_w else None
            grad_x = torch.zeros_like(x) if (need_x and x is not None) else None
            for op in reversed(circuit.ops):
                psi_after = psi
                psi = op.gate.apply(psi, circuit.angle_values(op, x, weights), op.wires, n,
                                    circuit.data(op), not op.adjoint)
                wants = [(isinstance(a, Param) and need_w) or (isinstance(a, Input) and grad_x is not None)
                         for a in op.angles]
                if any(wants):
                    angles = circuit.angle_values(op, x, weights)
                    mus = derivative_states(circuit, op, angles, psi, psi_after, n)
                    for a, want, mu in zip(op.angles, wants, mus):
                        if not want:
                            continue
                        d = 2 * _inner_real(lam, mu)
                        if isinstance(a, Param):
                            grad_w[a.index] += a.scale * d.sum()
                        else:
                            grad_x[:, a.column] += a.scale * d
                lam = op.gate.apply(lam, circuit.angle_values(op, x, weights), op.wires, n,
                                    circuit.data(op), not op.adjoint)
            grad_state = None
            if need_state:
                grad_state = 2 * lam
                if ctx.state_batch == 1 and lam.shape[0] > 1:
                    grad_state = grad_state.sum(0, keepdim=True)
        return None, None, grad_x, grad_state, (grad_w.to(weights.dtype) if grad_w is not None else None)
