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

from .kernels.transforms import outside_transforms, transforms_active

__all__ = ["lasting", "building_cache"]


@contextlib.contextmanager
def building_cache():
    """Context for code whose tensors go into a cache: inference mode off, grad mode unchanged
    (leaving inference mode alone would turn grad mode on), and outside any torch.func transform
    (inside one, even ``torch.tensor(...)`` can come out wrapped for the transform's level, and
    the next call, at another level, would meet an escaped wrapper)."""
    grad = torch.is_grad_enabled()
    with torch.inference_mode(False), torch.set_grad_enabled(grad), _plain_eager():
        yield


def lasting(fn):
    """Decorator (below ``functools.lru_cache``): ``fn`` runs as in :func:`building_cache`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not torch.is_inference_mode_enabled() and not transforms_active():
            return fn(*args, **kwargs)
        with torch.inference_mode(False), torch.set_grad_enabled(False), _plain_eager():
            return fn(*args, **kwargs)
    return wrapper


def _plain_eager():
    return outside_transforms() if transforms_active() else contextlib.nullcontext()
