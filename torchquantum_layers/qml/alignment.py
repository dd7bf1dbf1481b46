"""Kernel-target alignment and the training of quantum embedding kernels by it (Hubregtsen et
al., "Training quantum embedding kernels on near-term quantum computers", PRA 106, 042431 (2022);
alignment by Cristianini et al. (2001), centred alignment by Cortes, Mohri & Rostamizadeh,
JMLR 13, 795 (2012)).

The alignment of a Gram matrix ``K`` with the labels is the cosine between ``K`` and the ideal
kernel ``Y = L Lᵀ`` in the Frobenius inner product ``⟨A, B⟩ = Σ_ij A_ij B_ij``::

    A(K, Y) = ⟨K, Y⟩ / (‖K‖_F ‖Y‖_F)                    ∈ [−1, 1]

Labels ``L``: binary ``y ∈ {−1, +1}^N`` (``L = y`` as a column, ``Y_ij = y_i y_j``) or multiclass
one-hot ``(N, C)`` rows (``Y_ij = 1`` for the same class, else 0). The centred variant aligns
``Kc = H K H`` with ``Yc = H Y H`` (``H = I − 11ᵀ/N``), which removes the constant offset a
kernel of all-positive entries carries; ``Yc = (H L)(H L)ᵀ``, so no ``N × N`` ``H`` is formed.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from ..optim import make_optimizer, needs_closure_without_backward
from .kernels import FidelityKernel, _encoder_parts, as_tensor_features, encode

__all__ = ["kernel_target_alignment", "label_matrix", "train_kernel"]


def label_matrix(y, what: str = "kernel_target_alignment") -> torch.Tensor:
    """``L`` with ideal kernel ``Y = L Lᵀ``: ``(N, 1)`` for binary ±1 labels ``(N,)``, ``(N, C)``
    for one-hot rows ``(N, C)``. Real float64, on ``y``'s device; refuses anything else."""
    try:
        t = as_tensor_features(y)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what}: y must be a tensor or an array of numbers ({err})") from None
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{what}: y must hold real numbers (±1 or one-hot 0/1), got {t.dtype}")
    t = t.to(torch.float64)
    if t.dim() == 1:
        bad = (t != 1) & (t != -1)
        if bool(bad.any()):
            values = ", ".join(f"{v:g}" for v in torch.unique(t).cpu().tolist()[:6])
            raise ValueError(f"{what}: binary labels y must be -1 or +1, got values [{values}] (map 0/1 labels "
                             f"with y = 2*y - 1; for several classes pass one-hot rows (N, C))")
        return t[:, None]
    if t.dim() == 2:
        one_hot = bool(((t == 0) | (t == 1)).all()) and bool((t.sum(dim=1) == 1).all())
        if not one_hot:
            raise ValueError(f"{what}: multiclass y must be one-hot rows (N, C) of 0s and a single 1, "
                             f"got shape {tuple(t.shape)} with other entries")
        return t
    raise ValueError(f"{what}: y must have shape (N,) for ±1 labels or (N, C) one-hot, got {tuple(t.shape)}")


def _alignment(K: torch.Tensor, L: torch.Tensor, centered: bool) -> torch.Tensor:
    """Alignment of a square ``K`` with ``L Lᵀ`` (no checks: the training loop's hot path)."""
    L = L.to(device=K.device, dtype=K.dtype)
    if centered:
        K = K - K.mean(dim=0, keepdim=True) - K.mean(dim=1, keepdim=True) + K.mean()
        L = L - L.mean(dim=0, keepdim=True)
    # ⟨K, L Lᵀ⟩ = Σ_c L_cᵀ K L_c and ‖L Lᵀ‖_F = ‖Lᵀ L‖_F: no N × N target matrix is built
    inner = (L * (K @ L)).sum()
    norm_y = torch.linalg.matrix_norm(L.transpose(0, 1) @ L)
    return inner / (torch.linalg.matrix_norm(K) * norm_y)


def kernel_target_alignment(K, y, centered: bool = False):
    """Alignment ``⟨K, Y⟩_F / (‖K‖_F ‖Y‖_F)`` of a Gram matrix ``K`` ``(N, N)`` with the labels.

    ``y``: ``(N,)`` labels ±1 (binary) or ``(N, C)`` one-hot rows (multiclass, ``Y = y yᵀ``).
    ``centered=True`` aligns the centred matrices ``HKH`` and ``HYH``. Tensor ``K``: a 0-d tensor
    in ``K``'s dtype, differentiable in ``K``; NumPy ``K``: a Python float. Refuses non-square or
    complex ``K``, a ``y`` of the wrong length, labels other than ±1 / one-hot, and a centred
    alignment whose ``HYH`` vanishes (all samples of one class) or whose ``HKH`` vanishes
    (a constant kernel), where the cosine is undefined.
    """
    what = "kernel_target_alignment"
    if not isinstance(centered, bool):
        raise TypeError(f"{what}: centered must be True or False, got {centered!r}")
    to_float = not isinstance(K, torch.Tensor)
    try:
        Kt = as_tensor_features(K)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what}: K must be a tensor or an array of numbers ({err})") from None
    if Kt.is_complex() or Kt.dtype == torch.bool or not (Kt.is_floating_point() or Kt.dtype in (
            torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise TypeError(f"{what}: K must hold real numbers, got {Kt.dtype}")
    if Kt.dim() != 2 or Kt.shape[0] != Kt.shape[1] or Kt.shape[0] == 0:
        raise ValueError(f"{what}: K must be a square (N, N) Gram matrix, got shape {tuple(Kt.shape)}")
    if not Kt.is_floating_point():
        Kt = Kt.to(torch.float64)
    L = label_matrix(y, what)
    if L.shape[0] != Kt.shape[0]:
        raise ValueError(f"{what}: K is {Kt.shape[0]} × {Kt.shape[0]} but y has {L.shape[0]} labels")
    with torch.no_grad():
        if not bool(torch.isfinite(Kt).all()):
            raise ValueError(f"{what}: K contains NaN or inf")
        Kc = Kt.double() - Kt.double().mean(0, keepdim=True) - Kt.double().mean(1, keepdim=True) + Kt.double().mean() \
            if centered else Kt.double()
        if centered and bool((L - L.mean(0, keepdim=True)).abs().max() == 0):
            raise ValueError(f"{what}: every sample has the same label, so the centred target HYH is zero "
                             f"and the centred alignment is undefined")
        if float(torch.linalg.matrix_norm(Kc)) == 0:
            raise ValueError(f"{what}: K{' (centred)' if centered else ''} is zero, so the alignment is undefined")
    out = _alignment(Kt, L, centered)
    return float(out) if to_float else out


def _check_int(value, name: str, what: str, minimum: int, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        more = " or None" if allow_none else ""
        raise ValueError(f"{what}: {name} must be an int ≥ {minimum}{more}, got {value!r}")
    return int(value)


def _class_members(L: torch.Tensor) -> list:
    """Index tensors (CPU) of the samples of each class, for stratified minibatches."""
    codes = L[:, 0] if L.shape[1] == 1 else L.argmax(dim=1).to(torch.float64)
    codes = codes.cpu()
    return [torch.nonzero(codes == c).flatten() for c in torch.unique(codes)]


def _draw(members: list, n_total: int, batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """About ``batch_size`` sample indices, each class in proportion to its size and at least
    one of every class (a one-class minibatch has no centred alignment), without replacement."""
    picked = []
    for idx in members:
        k = min(len(idx), max(1, round(batch_size * len(idx) / n_total)))
        picked.append(idx[torch.randperm(len(idx), generator=generator)[:k]])
    return torch.cat(picked)


def train_kernel(kernel, X, y, steps: int = 100, optimizer="adam", lr: Optional[float] = None,
                 batch_size: Optional[int] = None, seed: int = 0, centered: bool = False) -> dict:
    """Train the encoder weights of ``kernel`` to maximise its alignment with the labels.

    ``kernel``: a :class:`FidelityKernel` or :class:`~torchquantum_layers.qml.projected.
    ProjectedKernel` whose encoder (a Circuit or QuantumLayer reading the features) has trainable
    weights; they are updated in place. ``X`` ``(N, F)``, ``y`` as in
    :func:`kernel_target_alignment`. Each of the ``steps`` optimiser steps maximises the alignment
    of the Gram matrix of a minibatch of about ``batch_size`` samples (all its pairs; ``None``:
    all samples), drawn stratified by class from a ``torch.Generator`` seeded with ``seed``, so a
    run is reproducible. ``optimizer``/``lr`` as in :func:`torchquantum_layers.optim.make_optimizer`
    (``"adam"``, lr 0.1, by default; LBFGS and SPSA get the closures they need).

    Returns ``{"alignment": ndarray (steps,)}``: each step's minibatch alignment before its update
    (collected on the device and copied to the host once, after the loop).
    """
    what = "train_kernel"
    from .projected import ProjectedKernel
    if not isinstance(kernel, (FidelityKernel, ProjectedKernel)):
        raise TypeError(f"{what}: kernel must be a tql.qml.FidelityKernel or ProjectedKernel, "
                        f"got {type(kernel).__name__}")
    params = kernel.parameters()
    if not params:
        raise ValueError(f"{what}: the kernel's encoder has no trainable weights (build it with trainable=True "
                         f"gates, e.g. circuit.ry(w, trainable=True))")
    steps = _check_int(steps, "steps", what, 1)
    batch_size = _check_int(batch_size, "batch_size", what, 2, allow_none=True)
    seed = _check_int(seed, "seed", what, 0)
    if not isinstance(centered, bool):
        raise TypeError(f"{what}: centered must be True or False, got {centered!r}")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr)
                           or lr <= 0):
        raise ValueError(f"{what}: lr must be a finite number > 0 or None, got {lr!r}")
    x = as_tensor_features(X)
    if x.dim() != 2:
        raise ValueError(f"{what}: X must have shape (N, F), got {tuple(x.shape)}")
    circuit, _, _ = _encoder_parts(kernel.encoder, what)
    if circuit is not None:
        x = x.to(circuit.device)
    with torch.no_grad():           # refuse a wrong feature width here, naming X, not in step 1
        encode(kernel.encoder, x[:1], what=what, name="X")
    L = label_matrix(y, what)
    if L.shape[0] != x.shape[0]:
        raise ValueError(f"{what}: X has {x.shape[0]} samples but y has {L.shape[0]} labels")
    members = _class_members(L)
    if centered and len(members) < 2:
        raise ValueError(f"{what}: every sample has the same label, so the centred alignment is undefined")
    L = L.to(x.device)
    opt = make_optimizer(optimizer, params, lr)
    evaluate_only = needs_closure_without_backward(opt)
    generator = torch.Generator().manual_seed(seed)
    history = []
    for _ in range(steps):
        if batch_size is None or batch_size >= x.shape[0]:
            idx = None
        else:
            idx = _draw(members, x.shape[0], batch_size, generator).to(x.device)
        xb, Lb = (x, L) if idx is None else (x[idx], L[idx])

        def closure():
            opt.zero_grad()
            loss = -_alignment(kernel.matrix(xb), Lb, centered)
            if not evaluate_only:
                loss.backward()
            return loss
        loss = opt.step(closure)
        history.append(loss.detach())
    return {"alignment": (-torch.stack(history)).cpu().to(torch.float64).numpy()}
