"""Autograd for the one-pass kernels: a gate applied under a recording autograd graph.

The one-pass kernels (native.c / levels.c on the CPU, kernels/gpu.py on CUDA) do not record a
graph, so under backprop a gate went through torch's ops instead: on scattered wires both the
forward and the backward moved every axis there and back. :func:`record` wraps a kernel call in
one ``autograd.Function``: the forward is the unrecorded kernel, the backward applies the
adjoint matrix with the same kernels (∂L/∂ψ = U† ∂L/∂ψ') and takes the matrix gradient
Σ ∂L/∂ψ'_i conj(ψ_j) over the levels in one pass over both states (:func:`gram`). Under
``create_graph`` the backward records itself (the adjoint application through this Function
again, the gram through torch's ops), so higher derivatives stay exact.
"""
from __future__ import annotations

import torch

from . import native
from .transforms import transforms_active


def gpu_kernels(state: torch.Tensor):
    """kernels.gpu for a CUDA state (imported on first use: Triton takes ~0.4 s to load), else None."""
    if not state.is_cuda or transforms_active():     # Triton kernels read raw pointers
        return None
    from . import gpu
    return gpu if gpu.available() else None


# On the CPU gates on up to this many wires: beyond, the scalar gram's M^2 multiply-adds per group
# lose to torch's moved axes and BLAS (measured at 2^20-2^22, forward + backward of a QubitUnitary
# on 5 scattered wires: 46-55 against 39-55 clones in complex64; on 4: 24-34 against 41-42)
MAX_CPU_WIRES = 4
# Diagonals on up to this many wires (their gradient is the diagonal of an M x M gram: M
# multiply-adds per amplitude, worth it for RZ, RZZ, CP, CRZ; MultiRZ on more keeps torch's ops)
MAX_DIAGONAL_WIRES = 2


def available(state: torch.Tensor, k: int) -> bool:
    """Whether a gate on k wires of ``state`` has one-pass kernels for both directions here."""
    if state.is_cuda:
        gpu = gpu_kernels(state)
        return gpu is not None and k <= gpu.MAX_WIRES and state.dtype in (torch.complex64, torch.complex128)
    return native._plain_cpu_state(state) and k <= MAX_CPU_WIRES and native.library() is not None


def records(state: torch.Tensor, matrix: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and (state.requires_grad or matrix.requires_grad)


def gram_torch(state, grad, wires, n, levels=None, controls=(), per_sample=False):
    """:func:`gram` with torch's ops (differentiable; the test reference): the controls' 1
    slice, the wires' axes moved last, one batched product."""
    B = grad.shape[0]
    state = state.expand(B, -1)
    at = (slice(None),) + tuple(1 if w in controls else slice(None) for w in range(n))
    rest = [w for w in range(n) if w not in controls]
    src = [1 + rest.index(w) for w in wires]
    k = len(wires)
    dst = list(range(len(rest) + 1 - k, len(rest) + 1))

    def moved(t):
        t = t.reshape(B, *([2] * n))[at].movedim(src, dst).reshape(B, -1, 2 ** k)
        return t if levels is None else t[..., list(levels)]
    out = moved(grad).transpose(1, 2) @ moved(state).conj()
    return out if per_sample else out.sum(0)


def gram(state, grad, wires, n, levels=None, controls=(), per_sample=False, diagonal_only=False):
    """Σ grad_i conj(state_j) over the local ``levels`` of ``wires`` (all 2^k when None) where
    every control is 1: ``(M, M)`` summed over the batch, or ``(B, M, M)`` per sample; in the
    states' dtype (``diagonal_only``: the kernels may skip the i ≠ j entries, left zero: read
    only the diagonal then). One pass of the kernels where they apply and no graph is recorded."""
    B = grad.shape[0]
    if not torch.is_grad_enabled():
        state = state.expand(B, -1)
        gpu = gpu_kernels(state)
        if gpu is not None:
            fast = gpu.gram_levels(state, grad, wires, n, levels, controls, per_sample, diagonal_only)
        else:
            fast = native.gram_levels(state.contiguous(), grad.resolve_conj().contiguous(), wires, n, levels,
                                      controls, per_sample, diagonal_only)
        if fast is not None:
            return fast.to(grad.dtype)
    return gram_torch(state, grad, wires, n, levels, controls, per_sample)


class _OnePass(torch.autograd.Function):
    """One gate: ``operator`` a matrix ((M, M) or (B, M, M)) or, with ``diagonal``, the diagonal
    ((M,) or (B, M)) of one, whose gradient is the gram's diagonal."""

    @staticmethod
    def forward(ctx, state, operator, apply, spec):
        ctx.kernel_call, ctx.spec, ctx.state_batch = apply, spec, state.shape[0]
        # the state only for the operator's gradient: fixed gates keep nothing of it
        ctx.save_for_backward(state if operator.requires_grad else None, operator)
        with torch.no_grad():
            return apply(state, operator)

    @staticmethod
    def backward(ctx, grad):
        state, operator = ctx.saved_tensors
        wires, n, levels, controls, diagonal = ctx.spec
        grad_state = grad_operator = None
        if ctx.needs_input_grad[0]:
            grad_state = ctx.kernel_call(grad, operator.conj() if diagonal else operator.conj().transpose(-1, -2))
            if ctx.state_batch == 1 and grad_state.shape[0] > 1:
                grad_state = grad_state.sum(0, keepdim=True)     # a state broadcast over the operators
        if ctx.needs_input_grad[1]:
            per_sample = operator.dim() == (2 if diagonal else 3) and operator.shape[0] > 1
            g = gram(state, grad, wires, n, levels, controls, per_sample, diagonal_only=diagonal)
            grad_operator = (g.diagonal(dim1=-2, dim2=-1) if diagonal else g).reshape(operator.shape)
        return grad_state, grad_operator, None, None


def record(apply, state, matrix, wires, n, levels=None, controls=(), diagonal=False):
    """``apply(state, matrix)`` (a kernel call that does not record) as one node of the graph;
    ``wires``, ``n``, ``levels``, ``controls`` say where the matrix acts, for its gradient
    (``diagonal``: ``matrix`` is the diagonal of one)."""
    return _OnePass.apply(state, matrix, apply, (tuple(wires), n, levels, tuple(controls), diagonal))
