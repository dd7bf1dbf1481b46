"""Parameter-shift differentiation (the rule hardware would use), shots included.

For an angle whose generator spectrum has the distinct positive gaps Ω_1..Ω_R, the expectation
is a trigonometric polynomial in the angle and

    ∂f/∂θ = Σ_m c_m [f(θ + s_m) − f(θ − s_m)]

with R shifts; one gap gives the two-term rule (s = π/(2Ω), c = Ω/2), the controlled rotations'
gaps {½, 1} the four-term rule. The shifted circuits of one gate run as one batch.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from ..circuit import Input, Param


@lru_cache(maxsize=None)
def shift_rule(freqs: tuple) -> tuple:
    """(shifts, coefficients) of the general parameter-shift rule for the given gaps."""
    omegas = np.asarray(freqs, dtype=float)
    R = len(omegas)
    if R == 1:
        w = omegas[0]
        return (math.pi / (2 * w),), (w / 2,)
    base = omegas.min()
    shifts = np.array([(2 * m - 1) * math.pi / (2 * R * base) for m in range(1, R + 1)])
    A = np.sin(np.outer(shifts, omegas))          # A[m, l] = sin(Ω_l s_m)
    coeffs = np.linalg.solve(A.T, omegas) / 2      # f' = Σ_m c_m (f(+s_m) − f(−s_m))
    return tuple(shifts.tolist()), tuple(coeffs.tolist())


def _apply(circuit, op, state, angles, n):
    return op.gate.apply(state, angles, op.wires, n, circuit.data(op), op.adjoint)


def _values(psi, observables, shots, generator):
    from ..observables import expectation
    return expectation(psi, list(observables), shots=shots, generator=generator)


def add_shift_gradients(op, angles, wants, g, grad_w, grad_x, shifted_state, rest):
    """Add one op's shift-rule gradients into ``grad_w`` / ``grad_x``.

    ``shifted_state(angles)`` is the state just after ``op`` run with those angles; ``rest(big, m)``
    runs the rest of the circuit on the m shifted states stacked along the batch and returns
    their values ``(m, B, n_obs)``. All shifts of the op go through the rest as ONE batch.
    """
    shifted, plan = [], []
    for j, want in enumerate(wants):
        if not want:
            continue
        shifts, coeffs = shift_rule(op.gate.frequencies(j))
        for s, c in zip(shifts, coeffs):
            for sign in (1.0, -1.0):
                a = list(angles)
                a[j] = a[j] + sign * s
                shifted.append(shifted_state(tuple(a)))
            plan.append((j, c))
    f = rest(torch.cat(shifted, dim=0), len(shifted))
    df = {}
    for p, (j, c) in enumerate(plan):
        df[j] = df.get(j, 0) + c * (f[2 * p] - f[2 * p + 1])
    for j, d in df.items():
        a = op.angles[j]
        contrib = (d * g).sum(-1)          # (B,)
        if isinstance(a, Param):
            grad_w[a.index] += a.scale * contrib.sum()
        else:
            grad_x[:, a.column] += a.scale * contrib


class ParameterShiftExpval(torch.autograd.Function):
    @staticmethod
    def forward(ctx, circuit, observables, shots, generator, x, state, weights):
        from ..engine import run_circuit
        with torch.no_grad():
            psi = run_circuit(circuit, state, x, weights)
            values = _values(psi, observables, shots, generator)
        ctx.circuit, ctx.observables, ctx.shots, ctx.generator = circuit, observables, shots, generator
        ctx.save_for_backward(x, state, weights)
        return values

    @staticmethod
    def backward(ctx, grad_values):
        from ..engine import run_circuit
        circuit, observables = ctx.circuit, ctx.observables
        shots, generator = ctx.shots, ctx.generator
        x, state, weights = ctx.saved_tensors
        need_x, need_state, need_w = ctx.needs_input_grad[4], ctx.needs_input_grad[5], ctx.needs_input_grad[6]
        n = circuit.n_wires
        ops = circuit.ops
        stride = max(1, math.isqrt(len(ops)))
        g = grad_values.to(weights.dtype if weights.numel() else grad_values.dtype)
        grad_w = torch.zeros_like(weights) if need_w else None
        grad_x = torch.zeros_like(x) if (need_x and x is not None) else None
        with torch.no_grad():
            batch = max(state.shape[0], x.shape[0] if x is not None else 1)
            psi = state.expand(batch, -1) if state.shape[0] != batch else state
            for i, op in enumerate(ops):
                angles = circuit.angle_values(op, x, weights)
                wants = [(isinstance(a, Param) and need_w) or (isinstance(a, Input) and grad_x is not None)
                         for a in op.angles]
                if any(wants):
                    def rest(big, m, i=i):
                        # the gates after op i, the m shifted states stacked along the batch: one
                        # by one up to the next multiple of ``stride``, then that suffix of the
                        # circuit through the engine (programs, fused blocks). √N suffixes keep
                        # the plans built on a first call to O(N^1.5) ops, not O(N²)
                        xr = x.repeat(m, 1) if x is not None else None
                        cut = min(len(ops), (i // stride + 1) * stride)
                        for later in ops[i + 1:cut]:
                            big = _apply(circuit, later, big, circuit.angle_values(later, xr, weights), n)
                        if cut < len(ops):
                            big = run_circuit(circuit._suffix(cut), big, xr, weights)
                        return _values(big, observables, shots, generator).reshape(m, batch, -1)
                    add_shift_gradients(op, angles, wants, g, grad_w, grad_x,
                                        lambda a, op=op: _apply(circuit, op, psi, a, n), rest)
                psi = _apply(circuit, op, psi, angles, n)
            grad_state = None
            if need_state:
                # an input state is not a gate angle: its gradient is 2 U† Σ_k g_k O_k U ψ0
                from ..observables import apply_hamiltonian
                lam = sum(apply_hamiltonian(psi, o) * g[:, k:k + 1].to(psi.real.dtype)
                          for k, o in enumerate(observables))
                for op in reversed(ops):
                    lam = op.gate.apply(lam, circuit.angle_values(op, x, weights), op.wires, n,
                                        circuit.data(op), not op.adjoint)
                grad_state = 2 * lam
                if state.shape[0] == 1 and batch > 1:
                    grad_state = grad_state.sum(0, keepdim=True)
        return None, None, None, None, grad_x, grad_state, grad_w
