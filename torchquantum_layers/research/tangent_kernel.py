"""The empirical (quantum) neural tangent kernel of any model, by torch.func.

Θ(x, x')_{ab} = Σ_p ∂f_a(x)/∂θ_p · ∂f_b(x')/∂θ_p over the model's trainable parameters: the
kernel that governs gradient-descent training in the lazy regime (Jacot et al. 2018; for quantum
models Shirai et al. 2021, Liu et al. 2022). The Jacobians come from one ``vmap`` over the rows of
a one-row ``jacrev`` (or ``jacfwd``), which the circuit engine runs as one batch: no Python loop
over samples or parameters.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn
from torch.func import functional_call, jacfwd, jacrev, vmap

__all__ = ["neural_tangent_kernel", "parameter_jacobian"]

_MODES = ("auto", "reverse", "forward")


def parameter_jacobian(model: nn.Module, x: torch.Tensor, params: Optional[Sequence[str]] = None,
                       mode: str = "auto") -> torch.Tensor:
    """``(N, O, P)``: the derivatives of the model's ``O`` outputs for each of the ``N`` rows of
    ``x`` with respect to its ``P`` trainable numbers (the named ``params``, default every
    parameter with ``requires_grad``, flattened in ``named_parameters`` order). A model whose
    output is ``(N,)`` has ``O = 1``.

    Each row is one call of the model on a batch of one, all rows under one ``vmap`` (which the
    circuit engine folds back into its batch); a model whose rows interact (BatchNorm in training
    mode) gets each row's own Jacobian. ``mode``: ``"reverse"`` (jacrev: a backward pass per
    output), ``"forward"`` (jacfwd: a forward-mode pass per parameter) or ``"auto"`` (reverse
    unless there are fewer parameters than outputs).
    """
    names, values = _trainable(model, params)
    if mode not in _MODES:
        raise ValueError(f"parameter_jacobian: mode must be one of {_MODES}, got {mode!r}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"parameter_jacobian: x must be a tensor, got {type(x).__name__}")
    buffers = dict(model.named_buffers())

    def batch_outputs(*vals):
        return functional_call(model, (dict(zip(names, vals)), buffers), (x,))

    with torch.no_grad():
        shape = batch_outputs(*values).shape
    if len(shape) not in (1, 2):
        raise ValueError(f"parameter_jacobian: the model's output must be (N,) or (N, O), got {tuple(shape)}")
    N, O = shape[0], (shape[1] if len(shape) == 2 else 1)

    def row_outputs(vals, xi):
        return functional_call(model, (dict(zip(names, vals)), buffers), (xi[None],))[0]
    P = sum(v.numel() for v in values)
    if mode == "auto":
        mode = "forward" if P < O else "reverse"
    transform = jacfwd if mode == "forward" else jacrev
    parts = vmap(transform(row_outputs), in_dims=(None, 0))(values, x)
    return torch.cat([j.reshape(N, O, -1) for j in parts], dim=-1)


def neural_tangent_kernel(model: nn.Module, x1: torch.Tensor, x2: Optional[torch.Tensor] = None,
                          params: Optional[Sequence[str]] = None, mode: str = "auto") -> torch.Tensor:
    """The empirical neural tangent kernel between the rows of ``x1`` and ``x2`` (default ``x1``).

    Returns ``(N1, N2)`` for a model with one output, ``(N1, N2, O, O)`` for ``O`` outputs
    (``[i, j, a, b]`` pairs output ``a`` at ``x1[i]`` with output ``b`` at ``x2[j]``). ``params``
    and ``mode`` as in :func:`parameter_jacobian`. Any ``nn.Module`` works (a QuantumLayer, a
    hybrid model); its circuits must use ``diff_method="backprop"`` (the default), the method
    torch.func's Jacobians can transform. The kernel is taken at the current values of ``params``
    (not differentiable in them); parameters left out of ``params`` keep their autograd graph.
    """
    J1 = parameter_jacobian(model, x1, params, mode)
    J2 = J1 if x2 is None else parameter_jacobian(model, x2, params, mode)
    K = torch.einsum("iap,jbp->ijab", J1, J2)
    return K[:, :, 0, 0] if K.shape[-1] == 1 else K


def _trainable(model, params):
    if not isinstance(model, nn.Module):
        raise TypeError(f"neural_tangent_kernel: model must be a torch.nn.Module, got {type(model).__name__}")
    named = dict(model.named_parameters())
    if params is None:
        names = [k for k, v in named.items() if v.requires_grad and v.numel()]
    else:
        if isinstance(params, str):
            raise TypeError(f"neural_tangent_kernel: params must be a sequence of parameter names, got {params!r}")
        names = list(params)
        unknown = [k for k in names if k not in named]
        if unknown:
            raise ValueError(f"neural_tangent_kernel: the model has no parameter(s) {unknown} "
                             f"(it has {sorted(named)})")
    if not names:
        raise ValueError("neural_tangent_kernel: the model has no trainable parameters")
    return names, tuple(named[k].detach() for k in names)
