"""The one factorisation the MPS simulator uses: a truncated SVD split with a safe backward.

``split(A)`` factors a batch of matrices ``A = U · (U† A)``: ``U`` (kept left singular vectors)
has orthonormal columns, and the right factor is recomputed as ``U† A`` by autograd, so
the only derivative through the decomposition is that of ``U``. For a gauge-invariant loss
(every expectation value, amplitude modulus, norm) the part of ``U†∂U`` inside a block of equal
singular values is then Hermitian and its contribution is exactly zero, so the ill-defined
``1/(s_i² − s_j²)`` factors of degenerate spectra (product states, GHZ, symmetric circuits) are
replaced by the Lorentzian ``x/(x² + η)`` (Liao et al., PRX 9, 031041) without changing the
gradient; ``1/s`` becomes ``s/(s² + η)`` for zero singular values.
"""
from __future__ import annotations

import numpy as np
import torch

from ..kernels.transforms import wrapped

# broadening η of the Lorentzian per real dtype (singular values of a normalised state are ≤ 1)
ETA = {torch.float32: 1e-12, torch.float64: 1e-24}


class _SVDLeft(torch.autograd.Function):
    """``(U, S, Vh)`` of a batch of matrices; gradients flow through ``U`` only (S is a constant,
    Vh is returned for the backward). New-style (setup_context), so torch.func.grad goes through."""

    @staticmethod
    def forward(a):
        return torch.linalg.svd(a, full_matrices=False)

    @staticmethod
    def setup_context(ctx, inputs, output):
        u, s, vh = output
        ctx.save_for_backward(u, s, vh)
        ctx.mark_non_differentiable(s, vh)

    @staticmethod
    def backward(ctx, gu, _gs, _gvh):
        u, s, vh = ctx.saved_tensors
        if gu is None:
            return None
        eta = ETA[s.dtype]
        s2 = s * s
        x = s2.unsqueeze(-2) - s2.unsqueeze(-1)                   # x_ij = s_j² − s_i²
        f = x / (x * x + eta)                                      # 1/x, broadened; 0 on the diagonal
        s_inv = s / (s2 + eta)
        w = u.mH @ gu
        j = f * w
        inner = (j + j.mH) * s.unsqueeze(-2)
        # the phase of each singular vector: zero for a gauge-invariant loss, kept for completeness
        inner.diagonal(dim1=-2, dim2=-1).add_(1j * w.diagonal(dim1=-2, dim2=-1).imag * s_inv)
        # U·inner·Vh + ((1 − UU†) gU / s)·Vh with one product by Vh
        return (u @ inner + (gu - u @ w) * s_inv.unsqueeze(-2)) @ vh


def svd_left(a: torch.Tensor):
    """``(U, S)`` of ``a`` ``(..., m, n)`` with the broadened backward of the module notes."""
    u, s, _ = _SVDLeft.apply(a)
    return u, s


def _needs_grad(a: torch.Tensor) -> bool:
    return a.requires_grad and torch.is_grad_enabled()


def keep_count(s: torch.Tensor, max_bond: int, cutoff: float):
    """How many singular values to keep for the whole batch, and the discarded weight per sample.

    Each sample needs the fewest values whose discarded tail ``Σ_{i≥χ} s_i² / Σ s_i²`` is at most
    ``cutoff``; the batch shares a bond, so it keeps the largest count any sample needs, capped at
    ``max_bond`` (at least one)."""
    chi, discarded = _keep_count(s, max_bond, cutoff)
    return chi, (torch.zeros(s.shape[:-1], dtype=s.dtype, device=s.device) if discarded is None
                 else discarded)


def _keep_count(s: torch.Tensor, max_bond: int, cutoff: float):
    """:func:`keep_count` with ``None`` for the discarded weight when nothing is dropped (known on
    the host, so callers skip adding zeros)."""
    k = s.shape[-1]
    if k == 0:
        return 1, None
    s = s.detach()
    if s.device.type == "cpu" and not wrapped(s):      # (under torch.func.grad: the torch path below)
        # NumPy on the host values: a dozen tiny torch dispatches per SVD were a fifth of the run
        v = s.numpy()
        s2 = v * v
        low = s2[:, ::-1].cumsum(1)                # low[:, j] = Σ of the j+1 smallest = tail[k−1−j]·Σ
        total = low[:, -1:]
        need = k - int((low <= cutoff * total).sum(1).min())      # tail[j] > cutoff, as a count
        chi = max(1, min(max_bond, need, k))
        if chi == k:
            return chi, None
        with np.errstate(divide="ignore", invalid="ignore"):
            dropped = np.where(total[:, 0] > 0, low[:, k - 1 - chi] / total[:, 0], 0).astype(s2.dtype)
        return chi, torch.from_numpy(dropped)
    s2 = s * s
    tail = s2.flip(-1).cumsum(-1).flip(-1)
    tail = tail / tail[..., :1].clamp_min(torch.finfo(s2.dtype).tiny)
    # the one host sync of a truncation: the bond dimension is a tensor shape
    need = int((tail > cutoff).sum(-1).max().item())
    chi = max(1, min(max_bond, need, k))
    return chi, (None if chi == k else tail[..., chi])


def _split(a: torch.Tensor, max_bond: int, cutoff: float):
    """:func:`split` with ``None`` for the discarded weight when nothing was dropped; without
    autograd the SVD is called directly (no autograd.Function overhead).

    No QR shortcut where nothing can be truncated (``cutoff == 0``, bond ≤ ``max_bond``): the
    CPU ``geqrf`` of torch 2.13 returns NaN for complex64 columns of ~1e-30 (residual Schmidt
    directions of a deep circuit), and its backward needs a full-rank R anyway."""
    grad = _needs_grad(a)
    if grad:
        u, s = svd_left(a)
    else:
        u, s, _ = torch.linalg.svd(a, full_matrices=False)
    chi, discarded = _keep_count(s, max_bond, cutoff)
    if chi < s.shape[-1]:
        u = u[..., :chi]
    r = u.mH @ a
    if discarded is None:           # known on the host: no sync to ask whether weight was dropped
        return u, r, None
    discarded = discarded.to(a.device)
    norm = torch.linalg.vector_norm(r, dim=(-2, -1), keepdim=True)
    dropped = (discarded > 0)[:, None, None]
    r = torch.where(dropped, r / norm.clamp_min(torch.finfo(norm.dtype).tiny), r)
    return u, r, discarded


def split(a: torch.Tensor, max_bond: int, cutoff: float):
    """``a`` (B, m, n) → ``(U, R, discarded)`` with ``U`` (B, m, χ) orthonormal columns and
    ``R = U† a`` (B, χ, n), renormalised per sample where weight was discarded."""
    u, r, discarded = _split(a, max_bond, cutoff)
    if discarded is None:
        discarded = torch.zeros(a.shape[0], dtype=a.real.dtype if a.is_complex() else a.dtype, device=a.device)
    return u, r, discarded
