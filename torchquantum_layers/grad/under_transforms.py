"""``diff_method="adjoint"`` and ``"parameter-shift"`` inside ``torch.func.grad`` / ``vjp``.

:class:`AdjointExpval` and :class:`ParameterShiftExpval` are old-style autograd Functions
(their forward decides what to record from ``ctx.needs_input_grad``), which torch.func refuses.
This new-style Function is what those transforms call instead. functorch runs its forward and
backward on ordinary tensors; there the transforms' interpreters are set aside and the requested
method runs as it does outside any transform, its backward taking that method's own
vector-Jacobian product (one forward pass more than outside a transform). Transforms that would
batch or differentiate those sweeps (vmap, jacrev, jacfwd, hessian, nested grads) are refused
by name: the sweeps have no batching or forward-mode rules, and quietly switching method would
not be what was asked for. ``diff_method="backprop"`` works under all of them.
"""
from __future__ import annotations

import torch

from ..kernels.transforms import outside_transforms, plain_value, wrapped


def _refuse(method: str, transform: str):
    return ValueError(f"expval: diff_method={method!r} works under torch.func.grad and torch.func.vjp, not "
                      f"under {transform} (its sweep has no batching or forward-mode rule); use "
                      f"diff_method='backprop' there, which supports every torch.func transform")


class TransformExpval(torch.autograd.Function):
    """Values of ``circuit_expval(..., diff_method=method)``; gradients by that method."""

    @staticmethod
    def forward(method, circuit, observables, shots, generator, x, state, weights):
        if any(wrapped(t) for t in (x, state, weights)):
            raise _refuse(method, "nested torch.func transforms")
        with outside_transforms(), torch.no_grad():
            return _method_values(method, circuit, observables, shots, generator, x, state, weights)

    @staticmethod
    def setup_context(ctx, inputs, output):
        method, circuit, observables, shots, generator, x, state, weights = inputs
        ctx.method, ctx.circuit, ctx.observables, ctx.shots, ctx.generator = (method, circuit, observables,
                                                                              shots, generator)
        ctx.save_for_backward(x, state, weights)

    @staticmethod
    def backward(ctx, grad_values):
        # functorch hands the backward its tensors wrapped for the grad level; one level is
        # unwrapped here, anything more (a batched cotangent, a second level) is a transform of
        # the backward itself
        grad_values, *saved = (None if t is None else plain_value(t) for t in (grad_values, *ctx.saved_tensors))
        if grad_values is None or any(s is None and t is not None for s, t in zip(saved, ctx.saved_tensors)):
            raise _refuse(ctx.method, "jacrev, hessian, vmap of grad or nested grads")
        needs = ctx.needs_input_grad[5:8]
        with outside_transforms(), torch.enable_grad():
            leaves = [None if t is None else t.detach().requires_grad_(need) for t, need in zip(saved, needs)]
            values = _method_values(ctx.method, ctx.circuit, ctx.observables, ctx.shots, ctx.generator,
                                    *leaves)
            wanted = [t for t in leaves if t is not None and t.requires_grad]
            grads = iter(torch.autograd.grad(values, wanted, grad_values) if wanted else ())
        return (None,) * 5 + tuple(next(grads) if t is not None and t.requires_grad else None for t in leaves)

    @staticmethod
    def vmap(info, in_dims, method, *args):
        raise _refuse(method, "torch.func.vmap")

    @staticmethod
    def jvp(ctx, *tangents):
        raise _refuse(ctx.method, "torch.func.jvp / jacfwd")


def _method_values(method, circuit, observables, shots, generator, x, state, weights):
    from .adjoint import AdjointExpval
    from .parameter_shift import ParameterShiftExpval
    if method == "adjoint":
        return AdjointExpval.apply(circuit, observables, x, state, weights)
    return ParameterShiftExpval.apply(circuit, observables, shots, generator, x, state, weights)
