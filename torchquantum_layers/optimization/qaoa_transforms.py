"""``QAOA`` (its default ``diff_method="adjoint"``) under ``torch.func`` transforms.

The adjoint sweep is an old-style autograd Function, which torch.func refuses. These new-style
Functions run it on ordinary tensors (the transforms' interpreters set aside): the cost, and as
the backward the sweep's own vector-Jacobian product. QAOA's starts are independent rows, so a
vmapped dimension is folded into the starts (``(V, S, 2p)`` → ``V·S`` starts; per graph
``(V, G, S, 2p)`` → ``(G, V·S, 2p)``) and the engine runs once. Forward mode (jacfwd, hessian) and
second derivatives are refused by name (``diff_method="backprop"`` takes them).
"""
from __future__ import annotations

import torch

from ..kernels.transforms import outside_transforms


def _refuse(transform: str):
    return ValueError(f"qaoa: diff_method='adjoint' (the default) works under torch.func.grad, vjp, vmap and "
                      f"jacrev, not under {transform}; call the module with diff_method='backprop' there")


def cost(qaoa, angles):
    """Expected costs of ``qaoa`` at ``angles`` by the adjoint method, under the active transforms."""
    return _Cost.apply(qaoa, angles)


class _Cost(torch.autograd.Function):
    @staticmethod
    def forward(qaoa, angles):
        with outside_transforms(), torch.no_grad():
            return qaoa.forward(angles, "cost", "adjoint")

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.qaoa = inputs[0]
        ctx.save_for_backward(inputs[1])

    @staticmethod
    def backward(ctx, grad):
        angles, = ctx.saved_tensors
        return None, _VJP.apply(ctx.qaoa, angles, grad)

    @staticmethod
    def vmap(info, in_dims, qaoa, angles):
        fold = _Starts(info.batch_size, angles.movedim(in_dims[1], 0))
        return fold.unfold(_Cost.apply(qaoa, fold.angles)), 0

    @staticmethod
    def jvp(ctx, *tangents):
        raise _refuse("torch.func.jvp, jacfwd or hessian")


class _VJP(torch.autograd.Function):
    """∂⟨grad, cost(angles)⟩/∂angles by the adjoint sweep, on ordinary tensors."""

    @staticmethod
    def forward(qaoa, angles, grad):
        with outside_transforms(), torch.enable_grad():
            leaf = angles.detach().requires_grad_(True)
            return torch.autograd.grad(qaoa.forward(leaf, "cost", "adjoint"), leaf, grad)[0]

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *grads):
        raise _refuse("a second derivative (nested grad, hessian)")

    @staticmethod
    def vmap(info, in_dims, qaoa, angles, grad):
        V = info.batch_size
        angles = angles.movedim(in_dims[1], 0) if in_dims[1] is not None else angles.expand(V, *angles.shape)
        grad = grad.movedim(in_dims[2], 0) if in_dims[2] is not None else grad.expand(V, *grad.shape)
        fold = _Starts(V, angles)
        return fold.unfold(_VJP.apply(qaoa, fold.angles, fold.fold_costs(grad)), trailing=1), 0


class _Starts:
    """V sets of angles ``(V, 2p)``, ``(V, S, 2p)`` or ``(V, G, S, 2p)`` as one set of starts."""

    def __init__(self, V, angles):
        self.V, self.shape = V, angles.shape
        if angles.dim() == 4:                      # per graph: the V sets side by side in each graph
            self.angles = angles.transpose(0, 1).reshape(angles.shape[1], -1, angles.shape[-1])
        else:
            self.angles = angles.reshape(-1, angles.shape[-1])

    def fold_costs(self, costs):
        """Per-start values ``(V,)``, ``(V, S)`` or ``(V, G, S)`` in the folded layout."""
        if len(self.shape) == 4:
            return costs.transpose(0, 1).reshape(self.shape[1], -1)
        return costs.reshape(-1)

    def unfold(self, out, trailing=0):
        """Folded per-start results (with ``trailing`` dims: 1 for angles) back to (V, …)."""
        tail = tuple(out.shape[out.dim() - trailing:]) if trailing else ()
        if len(self.shape) == 4:
            G, S = self.shape[1], self.shape[2]
            return out.reshape(G, self.V, S, *tail).transpose(0, 1)
        return out.reshape(self.V, *self.shape[1:-1], *tail)
