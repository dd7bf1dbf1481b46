"""Angles for the OpenQASM 3 reader (:mod:`~torchquantum_layers.qasm3_import`): a number, or a linear
form ``const + Σ coefficient · input`` in the program's inputs (:class:`_Lin`), with the arithmetic,
checks and messages the reader needs on them."""
from __future__ import annotations

import math


class _Lin:
    """``const + Σ coefficient · input``: an angle that depends on inputs (at least one term)."""
    __slots__ = ("const", "terms")

    def __init__(self, const: float, terms: dict):
        self.const, self.terms = const, terms


def _make(const, terms):
    terms = {k: v for k, v in terms.items() if v != 0.0}
    return _Lin(float(const), terms) if terms else float(const)


def _plus(a, b):
    if not isinstance(a, _Lin) and not isinstance(b, _Lin):
        return a + b
    ca, ta = (a.const, a.terms) if isinstance(a, _Lin) else (a, {})
    cb, tb = (b.const, b.terms) if isinstance(b, _Lin) else (b, {})
    terms = dict(ta)
    for k, v in tb.items():
        terms[k] = terms.get(k, 0.0) + v
    return _make(ca + cb, terms)


def _times(a, k: float):
    if not isinstance(a, _Lin):
        return a * k
    return _make(a.const * k, {n: c * k for n, c in a.terms.items()})


def _over(a, k: float):
    if not isinstance(a, _Lin):
        return a / k
    return _make(a.const / k, {n: c / k for n, c in a.terms.items()})


def _single(a) -> bool:
    """A circuit angle: a number, or one input times a scale."""
    return not isinstance(a, _Lin) or (a.const == 0.0 and len(a.terms) == 1)


def _terms(a) -> list:
    if not isinstance(a, _Lin):
        return [a]
    return ([a.const] if a.const else []) + [_Lin(0.0, {n: c}) for n, c in a.terms.items()]


def _finite(a) -> bool:
    if isinstance(a, _Lin):
        return math.isfinite(a.const) and all(math.isfinite(c) for c in a.terms.values())
    return math.isfinite(a)


def _inputs_of(*values) -> str:
    names = sorted({n for v in values if isinstance(v, _Lin) for n in v.terms})
    return ", ".join(f"'{n}'" for n in names)
