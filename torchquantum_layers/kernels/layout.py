"""Kernels for a state whose wires sit in a permuted physical order.

A dense block on the first or last k physical wires is applied as one batched GEMM that also
moves those wires to the other end: ``(d, d) @ S[b]^T`` reads the state transposed and writes
it contiguous, so no step ever copies the state to bring its wires together. A layer of blocks
applied front to front (or back to back) rotates the register once around and ends where it
started. The engine tracks the order (``order[p]`` = logical wire at physical position p).

Measured at n = 10, B = 256, complex64, one thread (benchmarks/kernels.py): a rotating 4-wire
block 0.50 ms against 0.70 ms in place on the first wires and 0.93 ms on middle ones.
"""
from __future__ import annotations

import torch

from .apply import _broadcast_batch


def _batched_operand(state, matrix):
    """(state, (B, d, d) matrix): a shared matrix is expanded, not copied — torch.matmul would
    fold the batch into one GEMM and copy the transposed state to do so."""
    state = _broadcast_batch(state, matrix, matrix.dim() == 3)
    B = state.shape[0]
    # bmm cannot read a conjugate view: resolve it on the small matrix, not after expanding it
    return state, matrix.resolve_conj().expand(B, *matrix.shape[-2:])


def back_to_front(state: torch.Tensor, matrix: torch.Tensor, k: int) -> torch.Tensor:
    """Apply ``matrix`` (on the last k physical wires, in their order) and move them to the front."""
    state, matrix = _batched_operand(state, matrix)
    B = state.shape[0]
    d = 2 ** k
    return torch.bmm(matrix, state.reshape(B, -1, d).transpose(1, 2)).reshape(B, -1)


def front_to_back(state: torch.Tensor, matrix: torch.Tensor, k: int) -> torch.Tensor:
    """Apply ``matrix`` (on the first k physical wires, in their order) and move them to the back."""
    state, matrix = _batched_operand(state, matrix)
    B = state.shape[0]
    d = 2 ** k
    return torch.bmm(state.reshape(B, d, -1).transpose(1, 2), matrix.transpose(-1, -2)).reshape(B, -1)


def rotation_gram(grad_out: torch.Tensor, state_in: torch.Tensor, k: int, to_back: bool) -> torch.Tensor:
    """Σ over the other wires of grad_out · state_in† on a rotating block's wires, per sample
    ``(B, d, d)``: the matrix gradient of :func:`front_to_back` (``to_back``) or :func:`back_to_front`
    (the adjoint method's λ ψ† is the same product)."""
    B, d = grad_out.shape[0], 2 ** k
    # conjugate the state contiguously (a clone-speed pass); bmm would resolve a conjugate,
    # transposed view with a slow strided copy
    psi_conj = state_in.conj().resolve_conj()
    if to_back:
        return torch.bmm(psi_conj.reshape(B, d, -1), grad_out.reshape(B, -1, d)).transpose(1, 2)
    return torch.bmm(grad_out.reshape(B, d, -1), psi_conj.reshape(B, -1, d))


def output_gram(grad_out: torch.Tensor, state_out: torch.Tensor, matrix: torch.Tensor, k: int) -> torch.Tensor:
    """The shared ``(d, d)`` matrix gradient of :func:`front_to_back` for a unitary M from its
    *output*: Σ g ψ_in† = (Σ g ψ_out†) M, and after a front-to-back rotation g and ψ_out share one
    ``(B·X, d)`` layout, so the sum over batch and rest is one GEMM reading ψ_out
    conjugate-transposed in place (no conjugate copy of a state, no batched small products)."""
    d = 2 ** k
    g_prime = (state_out.reshape(-1, d).mH @ grad_out.reshape(-1, d)).transpose(0, 1)
    return g_prime @ matrix


class _Rotate(torch.autograd.Function):
    """A rotating block whose backward is the opposite rotation by M† and one Gram product:
    torch's own matmul backward copies the transposed state twice more."""

    @staticmethod
    def forward(ctx, state, matrix, k, to_back, unitary):
        out = (front_to_back if to_back else back_to_front)(state, matrix, k)
        # a shared unitary front-to-back block takes its gradient from the output (see
        # output_gram); saving it costs nothing: the next step keeps the same tensor as its input
        ctx.from_output = unitary and to_back and matrix.dim() == 2
        ctx.save_for_backward(out if ctx.from_output else state, matrix)
        ctx.k, ctx.to_back, ctx.state_batch = k, to_back, state.shape[0]
        return out

    @staticmethod
    def backward(ctx, grad):
        saved, matrix = ctx.saved_tensors
        k, to_back = ctx.k, ctx.to_back
        grad_state = grad_matrix = None
        if ctx.needs_input_grad[0]:
            undo = back_to_front if to_back else front_to_back
            grad_state = undo(grad, matrix.conj().transpose(-1, -2), k)
            if grad_state.shape[0] != ctx.state_batch:
                grad_state = grad_state.sum(0, keepdim=True)
        if ctx.needs_input_grad[1]:
            if ctx.from_output:
                grad_matrix = output_gram(grad, saved, matrix, k)
            else:
                full = matrix.dim() == 3 and matrix.shape[0] == grad.shape[0]
                g = rotation_gram(grad, saved.expand(grad.shape[0], -1), k, to_back)
                grad_matrix = g if full else g.sum(0).reshape(matrix.shape)
        return grad_state, grad_matrix, None, None, None


def rotate(state: torch.Tensor, matrix: torch.Tensor, k: int, to_back: bool, unitary: bool = False) -> torch.Tensor:
    """:func:`front_to_back` (``to_back``) or :func:`back_to_front`, differentiable.

    ``unitary``: the caller guarantees M† M = I (the engine's blocks are products of gates,
    unitary to :data:`gates.UNITARY_ATOL`), which lets the backward use ψ_in = M† ψ_out."""
    if torch.is_grad_enabled() and (state.requires_grad or matrix.requires_grad):
        return _Rotate.apply(state, matrix, k, to_back, unitary)
    return (front_to_back if to_back else back_to_front)(state, matrix, k)


def relayout(state: torch.Tensor, order_from: tuple, order_to: tuple) -> torch.Tensor:
    """The same state with its wires moved from physical order ``order_from`` to ``order_to``."""
    if order_from == order_to:
        return state
    n = len(order_from)
    B = state.shape[0]
    r = _cyclic_shift(order_from, order_to)
    if r is not None:
        # a rotation of the register: one batched 2-D transpose
        return state.reshape(B, 2 ** r, 2 ** (n - r)).transpose(1, 2).reshape(B, -1)
    pos = {w: p for p, w in enumerate(order_from)}
    axes = [0] + [pos[w] + 1 for w in order_to]
    return state.reshape(B, *([2] * n)).permute(axes).reshape(B, -1)


def _cyclic_shift(order_from, order_to):
    """r such that order_to = order_from[r:] + order_from[:r], or None."""
    if not order_to:
        return None
    r = order_from.index(order_to[0])
    if r and order_from[r:] + order_from[:r] == tuple(order_to):
        return r
    return None
