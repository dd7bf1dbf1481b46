"""Validation of the problem builders' arguments (numbers, vectors, matrices, penalties, node
sets), each error naming the builder and the argument at fault."""
from __future__ import annotations

import math
import numbers
import warnings

import torch


# argument checks
def _number(v, name, what, positive=False, nonneg=False) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_complex():
            v = v.item()
        else:
            raise TypeError(f"{what}: {name} must be a real number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{what}: {name} must be finite, got {v}")
    if positive and v <= 0:
        raise ValueError(f"{what}: {name} must be > 0, got {v}")
    if nonneg and v < 0:
        raise ValueError(f"{what}: {name} must be >= 0, got {v}")
    return v


def _real_tensor(v, name, what, kind) -> torch.Tensor:
    """``v`` as a float64 CPU tensor, or a TypeError naming ``name`` and the ``kind`` it must be."""
    if isinstance(v, (str, bytes)):
        raise TypeError(f"{what}: {name} must be {kind}, got a string")
    try:
        t = torch.as_tensor(v, dtype=torch.float64) if not isinstance(v, torch.Tensor) else v.detach()
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{what}: {name} must be {kind} of real numbers") from None
    if t.is_complex():
        raise TypeError(f"{what}: {name} must be real, got {t.dtype}")
    return t.to(torch.float64).cpu()


def _vector(v, n, name, what, nonneg=False) -> torch.Tensor:
    t = _real_tensor(v, name, what, "a sequence")
    if t.dim() != 1 or (n is not None and t.shape[0] != n):
        want = f"({n},)" if n is not None else "1-D"
        raise ValueError(f"{what}: {name} must have shape {want}, got {tuple(t.shape)}")
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        i = int(bad.nonzero()[0, 0])
        raise ValueError(f"{what}: {name}[{i}] is {float(t[i])} (values must be finite)")
    if nonneg and bool((t < 0).any()):
        i = int((t < 0).nonzero()[0, 0])
        raise ValueError(f"{what}: {name}[{i}] is negative ({float(t[i])}); {name} must be >= 0")
    return t


def _matrix(v, n, name, what) -> torch.Tensor:
    t = _real_tensor(v, name, what, "a square matrix")
    if t.dim() != 2 or t.shape[0] != t.shape[1] or (n is not None and t.shape[0] != n):
        want = f"({n}, {n})" if n is not None else "square (n, n)"
        raise ValueError(f"{what}: {name} must have shape {want}, got {tuple(t.shape)}")
    bad = ~torch.isfinite(t)
    if bool(bad.any()):
        i, j = bad.nonzero()[0].tolist()
        raise ValueError(f"{what}: {name}[{i}, {j}] is {float(t[i, j])} (entries must be finite)")
    return t


def _penalty(penalty, default, what, lower=None, lower_name=""):
    if penalty is None:
        return default
    p = _number(penalty, "penalty", what, positive=True)
    if lower is not None and p <= lower:
        warnings.warn(f"{what}: penalty {p} <= {lower_name} ({lower}); the minimum of the cost may then "
                      f"be an infeasible bitstring", stacklevel=3)
    return p


def _node_weights(node_weights, n, what):
    if node_weights is None:
        return torch.ones(n, dtype=torch.float64)
    return _vector(node_weights, n, "node_weights", what, nonneg=True)


def _sorted_nodes(bits) -> list:
    return [i for i, b in enumerate(bits) if b]


def _bits_from_nodes(nodes, n, what) -> list:
    bits = [0] * n
    for v in nodes:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not 0 <= v < n:
            raise ValueError(f"{what}.encode: node {v!r} is not in 0 … {n - 1}")
        bits[int(v)] = 1
    return bits


def _bipartition_codec(n, what):
    """(decode, encode) of a two-sided answer: bits -> (side 0, side 1) node lists, and back from
    either the pair or side 1 alone."""
    def decode(bits, repair):
        return ([i for i, b in enumerate(bits) if not b], _sorted_nodes(bits))

    def encode(sol):
        # the pair (side 0, side 1) that decode returns; a tuple of two node labels, e.g. (1, 3),
        # is side 1 alone
        pair = (isinstance(sol, tuple) and len(sol) == 2
                and all(not isinstance(s, (numbers.Integral, str, bytes)) for s in sol))
        side1 = sol[1] if pair else sol
        if isinstance(side1, (numbers.Integral, str, bytes)):
            raise TypeError(f"{what}.encode: expected the nodes of side 1 (a list) or the pair "
                            f"(side 0, side 1), got {sol!r}")
        return _bits_from_nodes(side1, n, what)
    return decode, encode
