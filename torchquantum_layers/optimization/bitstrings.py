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
    """One solution's bits as a Python list (for decoders): a bitstring ``"0110"``, a basis index,
    or ``n`` bits 0/1 in any sequence or array (list, tuple, torch tensor, NumPy array; bools too)."""
    if isinstance(x, str) or isinstance(x, bool) or isinstance(x, numbers.Integral):
        idx, _ = _as_index(x, n, what)
        return bits_of(idx, n)[0].tolist()
    if isinstance(x, (list, tuple)) and x and all(isinstance(s, str) for s in x):
        idx, _ = _as_index(x, n, what)          # a list of bitstrings: one is fine
        if idx.numel() != 1:
            raise ValueError(f"{what}: give one bitstring, got {idx.numel()}")
        return bits_of(idx, n)[0].tolist()
    try:
        t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{what}: expected one bitstring ('0110'), a basis index or {n} bits 0/1, got "
                        f"{type(x).__name__}") from None
    if t.dim() == 1 and t.shape[0] == n:
        # n values: the bits of one bitstring (wire 0 first)
        if t.is_complex():
            raise TypeError(f"{what}: bits must be real 0/1 values, got {t.dtype}")
        bad = ~((t == 0) | (t == 1))
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(f"{what}: {n} values are read as the bits of one bitstring (wire 0 first); bit {i} "
                             f"is {t[i].tolist()!r}, not 0 or 1")
        return [int(b) for b in t.to(torch.int64).tolist()]
    if t.dim() == 1 and t.shape[0] != 1:
        raise ValueError(f"{what}: give one bitstring: {n} bits 0/1, a bitstring of {n} characters or one basis "
                         f"index; got {t.shape[0]} values")
    idx, squeeze = _as_index(t, n, what)
    if idx.numel() != 1:
        raise ValueError(f"{what}: give one bitstring, got {idx.numel()}")
    return bits_of(idx, n)[0].tolist()


def _chunked(fn, idx: torch.Tensor, n: int) -> torch.Tensor:
    if idx.numel() <= _CHUNK:
        return fn(bits_of(idx, n))
    return torch.cat([fn(bits_of(idx[i:i + _CHUNK], n)) for i in range(0, idx.numel(), _CHUNK)])
