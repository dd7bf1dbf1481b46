"""``diff_method="adjoint"`` and ``"parameter-shift"`` under ``torch.func`` transforms.

:class:`AdjointExpval` and :class:`ParameterShiftExpval` are old-style autograd Functions
(their forward decides what to record from ``ctx.needs_input_grad``), which torch.func refuses.
These new-style Functions are what the transforms call instead. functorch runs them on
ordinary tensors; there the transforms' interpreters are set aside and the requested method runs
as it does outside any transform. The backward is a second Function, the method's own
vector-Jacobian product (one forward pass more than outside a transform). Under vmap both fold
the vmapped dimension into the circuit's batch (engine_transforms: vmapped weights become
per-row angles), so ``vmap``, ``vmap(grad)`` and ``jacrev`` run the requested method on one
batch. Forward-mode transforms (jvp, jacfwd, hessian) and second derivatives are refused by
name: the sweeps have no forward-mode rules, and quietly switching method would not be what was
asked for. ``diff_method="backprop"`` works under all of them.
"""
from __future__ import annotations

import torch

from ..engine_transforms import _Fold, grads_for, vjp_by_rows, vjp_of
from ..kernels.transforms import outside_transforms


def _refuse(method: str, transform: str):
    return ValueError(f"expval: diff_method={method!r} works under torch.func.grad, vjp, vmap and jacrev, not "
                      f"under {transform} (its sweep has no forward-mode rule); use diff_method='backprop' "
                      f"there, which supports every torch.func transform")


class TransformExpval(torch.autograd.Function):
    """Values of ``circuit_expval(..., diff_method=method)``; gradients by that method."""

    @staticmethod
    def forward(method, circuit, observables, shots, generator, x, state, weights):
        with outside_transforms(), torch.no_grad():
            return _method_values(method, circuit, observables, shots, generator, x, state, weights)

    @staticmethod
    def setup_context(ctx, inputs, output):
        method, circuit, observables, shots, generator, x, state, weights = inputs
        ctx.spec = (method, circuit, observables, shots, generator)
        ctx.save_for_backward(x, state, weights)

    @staticmethod
    def backward(ctx, grad_values):
        x, state, weights = ctx.saved_tensors
        return (None,) * 5 + grads_for(ctx.needs_input_grad[5:8], (x, state, weights),
                                       lambda needs: _MethodVJP.apply(ctx.spec, needs, x, state, weights, grad_values))

    @staticmethod
    def vmap(info, in_dims, method, circuit, observables, shots, generator, x, state, weights):
        folded = _Fold(info.batch_size, in_dims[5:8], circuit, x, state, weights)
        values = TransformExpval.apply(method, folded.circuit, observables, shots, generator, folded.x,
                                       folded.state, folded.weights)
        return folded.unfold_rows(values), 0

    @staticmethod
    def jvp(ctx, *tangents):
        raise _refuse(ctx.spec[0], "torch.func.jvp, jacfwd or hessian")


class _MethodVJP(torch.autograd.Function):
    """(∂/∂x, ∂/∂state, ∂/∂weights) — the ones ``needs`` asks for — of ⟨grad, values⟩, by the
    method in ``spec``, on ordinary tensors."""

    @staticmethod
    def forward(spec, needs, x, state, weights, grad_values):
        return vjp_of(lambda *t: _method_values(*spec, *t), needs, (x, state, weights), grad_values)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.method = inputs[0][0]

    @staticmethod
    def backward(ctx, *grads):
        raise _refuse(ctx.method, "a second derivative (nested grad, hessian)")

    @staticmethod
    def vmap(info, in_dims, spec, needs, x, state, weights, grad_values):
        method, _, observables, shots, generator = spec
        return vjp_by_rows(info.batch_size, in_dims[2:6], spec[1], needs, x, state, weights, grad_values,
                           lambda c, row_needs, *args: _MethodVJP.apply((method, c, observables, shots, generator),
                                                                        row_needs, *args))


def _method_values(method, circuit, observables, shots, generator, x, state, weights):
    from .adjoint import AdjointExpval
    from .parameter_shift import ParameterShiftExpval
    if method == "adjoint":
        return AdjointExpval.apply(circuit, observables, x, state, weights)
    return ParameterShiftExpval.apply(circuit, observables, shots, generator, x, state, weights)
