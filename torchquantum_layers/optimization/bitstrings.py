"""Basis indices ↔ bit rows (wire 0 = most significant bit) and the parsing of the ``x`` arguments
of :class:`~.problems.Problem`'s vectorised methods."""
from __future__ import annotations

import numbers

import torch

__all__ = ["bits_of", "index_of"]


_CHUNK = 2 ** 18          # bitstrings per chunk in the vectorised helpers over all 2^n states

# bit helpers (wire 0 = most significant bit)
def bits_of(index: torch.Tensor, n: int) -> torch.Tensor:
    """Basis indices ``(K,)`` → bits ``(K, n)`` int64, wire 0 first."""
    shifts = torch.arange(n - 1, -1, -1, device=index.device, dtype=torch.int64)
    return (index.to(torch.int64).unsqueeze(-1) >> shifts) & 1


def index_of(bits: torch.Tensor) -> torch.Tensor:
    """Bits ``(K, n)`` (wire 0 first) → basis indices ``(K,)`` int64."""
    n = bits.shape[-1]
    weights = (1 << torch.arange(n - 1, -1, -1, device=bits.device, dtype=torch.int64))
    return (bits.to(torch.int64) * weights).sum(-1)


def _as_index(x, n: int, what: str):
    """-> (indices (K,) int64 on CPU, squeeze flag)."""
    if isinstance(x, str):
        return _parse_bitstrings([x], n, what), True
    if isinstance(x, (list, tuple)) and x and all(isinstance(s, str) for s in x):
        return _parse_bitstrings(list(x), n, what), False
    if isinstance(x, bool):
        raise TypeError(f"{what}: expected a basis index, a bitstring or bits, got a bool")
    if isinstance(x, numbers.Integral):
        idx = torch.tensor([int(x)], dtype=torch.int64)
        squeeze = True
    else:
        try:
            t = torch.as_tensor(x)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{what}: expected a basis index, a bitstring or 0/1 bits, got "
                            f"{type(x).__name__}") from None
        if t.is_complex() or (t.is_floating_point() and not bool((t == t.round()).all())):
            raise TypeError(f"{what}: expected integer indices or 0/1 bits, got {t.dtype} values")
        t = t.to(torch.int64)
        if t.dim() == 0:
            idx, squeeze = t.reshape(1), True
        elif t.dim() == 1:
            idx, squeeze = t, False
        elif t.dim() == 2:
            if t.shape[1] != n:
                raise ValueError(f"{what}: bits must have shape (K, {n}), got {tuple(t.shape)}")
            if t.numel() and (int(t.min()) < 0 or int(t.max()) > 1):
                raise ValueError(f"{what}: bits must be 0 or 1")
            return index_of(t), False
        else:
            raise ValueError(f"{what}: expected indices (K,), bits (K, {n}) or bitstrings, got shape "
                             f"{tuple(t.shape)}")
    idx = idx.cpu()
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= 2 ** n):
        bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
        raise ValueError(f"{what}: basis index {bad} is out of range [0, 2**{n})")
    return idx, squeeze


def _parse_bitstrings(strings, n, what):
    out = []
    for s in strings:
        if len(s) != n or any(ch not in "01" for ch in s):
            raise ValueError(f"{what}: bitstring {s!r} must have {n} characters 0/1 (wire 0 first)")
        out.append(int(s, 2))
    return torch.tensor(out, dtype=torch.int64)


def _one_bits(x, n: int, what: str) -> list:
    """One solution's bits as a Python list (for decoders)."""
    if isinstance(x, (list, tuple)) and len(x) == n and all(isinstance(b, numbers.Integral)
                                                           and not isinstance(b, bool) and b in (0, 1)
                                                           for b in x) and n > 1:
        return [int(b) for b in x]
    if isinstance(x, torch.Tensor) and x.dim() == 1 and x.shape[0] == n and n > 1:
        if bool(((x == 0) | (x == 1)).all()):
            return [int(b) for b in x.tolist()]
    idx, squeeze = _as_index(x, n, what)
    if idx.numel() != 1:
        raise ValueError(f"{what}: give one bitstring, got {idx.numel()}")
    return bits_of(idx, n)[0].tolist()


def _chunked(fn, idx: torch.Tensor, n: int) -> torch.Tensor:
    if idx.numel() <= _CHUNK:
        return fn(bits_of(idx, n))
    return torch.cat([fn(bits_of(idx[i:i + _CHUNK], n)) for i in range(0, idx.numel(), _CHUNK)])
