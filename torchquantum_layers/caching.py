"""Tensors kept past the call that made them: plans, index tables, constant matrices.

A tensor made under ``torch.inference_mode()`` is an inference tensor, which autograd refuses to
save: a cache filled during Lightning's ``validate`` / ``test`` / ``predict`` (which run in
inference mode) would break the next training step. So everything cached is built with inference
mode off: :func:`lasting` for a cached function, :func:`building_cache` around an inline fill.
"""
from __future__ import annotations

import contextlib
import functools

import torch

__all__ = ["lasting", "building_cache"]


@contextlib.contextmanager
def building_cache():
    """Context for code whose tensors go into a cache: inference mode off, grad mode unchanged
    (leaving inference mode alone would turn grad mode on)."""
    grad = torch.is_grad_enabled()
    with torch.inference_mode(False), torch.set_grad_enabled(grad):
        yield


def lasting(fn):
    """Decorator (below ``functools.lru_cache``): ``fn`` runs as in :func:`building_cache`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not torch.is_inference_mode_enabled():
            return fn(*args, **kwargs)
        with torch.inference_mode(False), torch.no_grad():
            return fn(*args, **kwargs)
    return wrapper
