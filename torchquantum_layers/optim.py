"""Optimizers by name, shared by the VQE drivers and the Lightning recipes."""
from __future__ import annotations

from typing import Optional

import torch

__all__ = ["make_optimizer", "optimizer_class", "NAMED_LRS"]

NAMED_LRS = {"adam": 0.1, "sgd": 0.2, "lbfgs": 1.0}
"""Default learning rates of the named optimizers (a caller may pass its own)."""


def optimizer_class(name: str):
    """A ``torch.optim`` class by case-insensitive name (``"AdamW"``, ``"rmsprop"``), or None."""
    for attr in dir(torch.optim):
        cls = getattr(torch.optim, attr)
        if attr.lower() == str(name).lower() and isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer):
            return cls
    return None


def make_optimizer(optimizer, params, lr: Optional[float] = None,
                   default_lrs: Optional[dict] = None) -> torch.optim.Optimizer:
    """``"adam"`` (lr 0.1), ``"sgd"`` (lr 0.2), ``"lbfgs"`` (lr 1, one iteration per step with a
    strong-Wolfe line search of up to 25 evaluations), any other ``torch.optim`` class name
    (case-insensitive, its own default lr), a ``torch.optim.Optimizer`` class, or a callable
    ``params -> optimizer``. ``default_lrs`` overrides :data:`NAMED_LRS` per name."""
    params = list(params)
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key in NAMED_LRS:
            lr = {**NAMED_LRS, **(default_lrs or {})}[key] if lr is None else lr
        if key == "adam":
            return torch.optim.Adam(params, lr=lr)
        if key == "sgd":
            return torch.optim.SGD(params, lr=lr)
        if key == "lbfgs":
            # max_eval must be given: its default (max_iter * 5 // 4 = 1) leaves the line search no evaluation
            return torch.optim.LBFGS(params, lr=lr, max_iter=1, max_eval=25, history_size=50,
                                     tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")
        cls = optimizer_class(optimizer)
        if cls is None:
            raise ValueError(f"optimizer must be 'adam', 'sgd', 'lbfgs', a torch.optim class name, an Optimizer "
                             f"class or a callable, got {optimizer!r}")
        optimizer = cls
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        return optimizer(params, lr=lr) if lr is not None else optimizer(params)
    if callable(optimizer):
        return optimizer(params)
    raise TypeError(f"optimizer must be a name, an Optimizer class or a callable, got {type(optimizer).__name__}")
