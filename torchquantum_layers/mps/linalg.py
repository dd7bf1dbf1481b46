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

import torch

# broadening η of the Lorentzian per real dtype (singular values of a normalised state are ≤ 1)
ETA = {torch.float32: 1e-12, torch.float64: 1e-24}


class _SVDLeft(torch.autograd.Function):
    """``(U, S)`` of a batch of matrices; gradients flow through ``U`` only (S is a constant)."""

    @staticmethod
    def forward(ctx, a):
        u, s, vh = torch.linalg.svd(a, full_matrices=False)
        ctx.save_for_backward(u, s, vh)
        ctx.mark_non_differentiable(s)
        return u, s

    @staticmethod
    def backward(ctx, gu, _gs):
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
        inner = inner + torch.diag_embed(1j * w.diagonal(dim1=-2, dim2=-1).imag * s_inv)
        ga = u @ inner @ vh
        ga = ga + ((gu - u @ w) * s_inv.unsqueeze(-2)) @ vh
        return ga


def svd_left(a: torch.Tensor):
    """``(U, S)`` of ``a`` ``(..., m, n)`` with the broadened backward of the module notes."""
    return _SVDLeft.apply(a)


def keep_count(s: torch.Tensor, max_bond: int, cutoff: float):
    """How many singular values to keep for the whole batch, and the discarded weight per sample.

    Each sample needs the fewest values whose discarded tail ``Σ_{i≥χ} s_i² / Σ s_i²`` is at most
    ``cutoff``; the batch shares a bond, so it keeps the largest count any sample needs, capped at
    ``max_bond`` (at least one)."""
    s2 = (s.detach() ** 2)
    total = s2.sum(-1, keepdim=True).clamp_min(torch.finfo(s2.dtype).tiny)
    tail = s2.flip(-1).cumsum(-1).flip(-1) / total                   # tail[j] = Σ_{i≥j} s_i² / Σ
    # the one host sync of a truncation: the bond dimension is a tensor shape
    need = int((tail > cutoff).sum(-1).max().item()) if s2.shape[-1] else 0
    chi = max(1, min(max_bond, need, s2.shape[-1]))
    discarded = tail[..., chi] if chi < s2.shape[-1] else torch.zeros_like(total[..., 0])
    return chi, discarded


def split(a: torch.Tensor, max_bond: int, cutoff: float):
    """``a`` (B, m, n) → ``(U, R, discarded)`` with ``U`` (B, m, χ) orthonormal columns and
    ``R = U† a`` (B, χ, n), renormalised per sample where weight was discarded."""
    u, s = svd_left(a)
    chi, discarded = keep_count(s, max_bond, cutoff)
    u = u[..., :chi]
    r = u.mH @ a
    if chi < s.shape[-1]:           # known on the host: no sync to ask whether weight was dropped
        norm = torch.linalg.vector_norm(r, dim=(-2, -1), keepdim=True)
        dropped = (discarded > 0)[:, None, None]
        r = torch.where(dropped, r / norm.clamp_min(torch.finfo(norm.dtype).tiny), r)
    return u, r, discarded
