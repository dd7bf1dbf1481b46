"""Differential privacy for training quantum (and hybrid) models: DP-SGD and its accountant.

DP-SGD (Abadi et al., "Deep learning with differential privacy", CCS 2016) bounds what one
training sample can change: every sample's own gradient is clipped to norm ``C``, the clipped
gradients are summed, Gaussian noise of standard deviation ``σC`` (``σ`` the noise multiplier) is
added to the sum, and the step divides by the batch size.

* :func:`per_sample_gradients`: ``{name: (B, *shape)}``, each sample's gradient of its own loss,
  by ``torch.func`` (``vmap(grad(loss))`` over ``functional_call``). The circuit engine folds the
  vmapped dimension into its batch, so the per-sample gradients of a whole hybrid model cost one
  batched backward pass, not a loop.
* :func:`clip_and_noise`: the privatised update direction from those gradients.
* :func:`rdp_epsilon`: ``(ε, δ)`` after ``steps`` subsampled Gaussian steps, from their Rényi DP
  at integer orders α (Mironov, Talwar & Zhang, "Rényi differential privacy of the sampled
  Gaussian mechanism", 2019): per step ::

      RDP(α) = log Σ_k C(α,k) (1−q)^(α−k) q^k exp((k²−k)/(2σ²)) / (α−1)

  composed over the steps and converted by ``ε = min_α T·RDP(α) + log(1/δ)/(α−1)``. This is the
  standard upper bound (TensorFlow Privacy's MNIST figure, ε = 3.01 for σ 1.1, batch 256 of
  60000, 60 epochs, δ 1e-5, is reproduced); Opacus's conversion is tighter by a little.
  :func:`gaussian_rdp` and :func:`epsilon_from_rdp` are its two halves, for accountants that
  compose steps of different rates or cache the per-step RDP.

The accountant assumes Poisson sampling (each point in a batch independently with probability
``q``). Shuffled fixed-size batches are not that; using ``q = batch_size / N`` for them is the
usual approximation (Opacus's default data loader), not a proof.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Callable, Dict, Iterable, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

__all__ = ["rdp_epsilon", "gaussian_rdp", "epsilon_from_rdp", "per_sample_gradients", "clip_and_noise",
           "DEFAULT_ORDERS"]

DEFAULT_ORDERS = tuple(range(2, 129))


def _real(value, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{what}: {name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {value}")
    return value


def _sample_rate(q, what):
    q = _real(q, "sample_rate", what)
    if not 0 < q <= 1:
        raise ValueError(f"{what}: sample_rate must be in (0, 1], got {q}")
    return q


def _noise(noise, what):
    noise = _real(noise, "noise_multiplier", what)
    if not noise > 0:
        raise ValueError(f"{what}: noise_multiplier must be > 0 (ε is infinite without noise), got {noise}")
    return noise


def _delta(delta, what):
    delta = _real(delta, "delta", what)
    if not 0 < delta < 1:
        raise ValueError(f"{what}: delta must be in (0, 1), got {delta}")
    return delta


def _orders(orders, what) -> Tuple[int, ...]:
    try:
        orders = tuple(orders)
    except TypeError:
        raise TypeError(f"{what}: orders must be an iterable of ints >= 2, got {orders!r}") from None
    if not orders:
        raise ValueError(f"{what}: orders must not be empty")
    for a in orders:
        # the binomial expansion of the subsampled Gaussian's RDP holds at integer orders only
        if isinstance(a, bool) or not isinstance(a, Integral):
            raise TypeError(f"{what}: orders must be ints (the bound is for integer α), got {a!r}")
        if a < 2:
            raise ValueError(f"{what}: orders must be >= 2, got {a}")
    return tuple(int(a) for a in orders)


def gaussian_rdp(sample_rate: float, noise_multiplier: float,
                 orders: Iterable[int] = DEFAULT_ORDERS) -> Tuple[float, ...]:
    """Rényi DP of one step of the Poisson-subsampled Gaussian mechanism at each order (rate
    ``sample_rate`` q, noise multiplier σ). At q = 1 it is the Gaussian mechanism's α/(2σ²)."""
    what = "gaussian_rdp"
    q, noise, orders = _sample_rate(sample_rate, what), _noise(noise_multiplier, what), _orders(orders, what)
    out = []
    for a in orders:
        terms = [math.lgamma(a + 1) - math.lgamma(k + 1) - math.lgamma(a - k + 1)
                 + (a - k) * math.log1p(-q) + (k * math.log(q) if k else 0.0) + (k * k - k) / (2 * noise ** 2)
                 for k in range(a + 1)] if q < 1 else [(a * a - a) / (2 * noise ** 2)]
        top = max(terms)          # log-sum-exp: the terms overflow exp() at large α and small σ
        out.append((top + math.log(sum(math.exp(t - top) for t in terms))) / (a - 1))
    return tuple(out)


def epsilon_from_rdp(rdp: Sequence[float], delta: float, orders: Iterable[int] = DEFAULT_ORDERS) -> float:
    """ε of a mechanism with total Rényi DP ``rdp[i]`` at ``orders[i]``, for ``delta``:
    ``min_α rdp(α) + log(1/δ)/(α−1)``."""
    what = "epsilon_from_rdp"
    delta, orders = _delta(delta, what), _orders(orders, what)
    rdp = tuple(rdp)
    if len(rdp) != len(orders):
        raise ValueError(f"{what}: rdp has {len(rdp)} values for {len(orders)} orders")
    return min(r + math.log(1 / delta) / (a - 1) for r, a in zip(rdp, orders))


def rdp_epsilon(sample_rate: float, noise_multiplier: float, steps: int, delta: float,
                orders: Iterable[int] = DEFAULT_ORDERS) -> float:
    """ε of ``steps`` Poisson-subsampled Gaussian steps (rate ``sample_rate``, noise multiplier
    ``noise_multiplier``) for ``delta``, by Rényi DP at integer ``orders`` (module docstring).
    Zero steps release nothing: ε = 0."""
    what = "rdp_epsilon"
    q, noise = _sample_rate(sample_rate, what), _noise(noise_multiplier, what)
    if isinstance(steps, bool) or not isinstance(steps, Integral):
        raise TypeError(f"rdp_epsilon: steps must be an int, got {steps!r}")
    if steps < 0:
        raise ValueError(f"rdp_epsilon: steps must be >= 0, got {steps}")
    delta, orders = _delta(delta, what), _orders(orders, what)
    if steps == 0:
        return 0.0
    best = math.inf
    for a, r in zip(orders, gaussian_rdp(q, noise, orders)):
        best = min(best, steps * r + math.log(1 / delta) / (a - 1))
    return best


def per_sample_gradients(model: torch.nn.Module, params: Dict[str, torch.Tensor], x: torch.Tensor,
                         y: torch.Tensor, loss_fn: Optional[Callable] = None, return_outputs: bool = False):
    """Each sample's gradient of its own loss, ``{name: (B, *shape)}`` for the entries of ``params``.

    ``model`` is called as ``functional_call(model, params, (x[b:b+1],))`` (parameters missing
    from ``params`` and the buffers are the module's own, held constant), and ``loss_fn(output,
    y[b:b+1])`` (default: cross-entropy of logits against class indices) gives the loss of one
    sample. ``return_outputs=True`` also returns the per-sample losses ``(B,)`` and the model's
    outputs ``(B, ...)`` (detached), from the same pass.
    """
    what = "per_sample_gradients"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{what}: model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(params, dict) or not params:
        raise TypeError(f"{what}: params must be a non-empty dict of name -> tensor, got {type(params).__name__}")
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() == 0:
            raise ValueError(f"{what}: {name} must have a batch dimension, got a scalar")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"{what}: x has {x.shape[0]} samples but y has {y.shape[0]}")
    if x.shape[0] == 0:
        raise ValueError(f"{what}: x must hold at least one sample")
    loss_fn = F.cross_entropy if loss_fn is None else loss_fn
    if not callable(loss_fn):
        raise TypeError(f"{what}: loss_fn must be callable, got {loss_fn!r}")

    def loss(p, xi, yi):
        out = functional_call(model, p, (xi[None],))
        value = loss_fn(out, yi[None])
        if value.dim() != 0:
            raise ValueError(f"{what}: loss_fn must return a scalar for one sample, got shape {tuple(value.shape)}")
        return value, (value.detach(), out[0].detach())

    # randomness="different": a model that samples (shots, quantum trajectories) draws for each
    # sample on its own, as separate backward passes would
    grads, (losses, outputs) = vmap(grad(loss, has_aux=True), in_dims=(None, 0, 0),
                                    randomness="different")(params, x, y)
    return (grads, losses, outputs) if return_outputs else grads


def clip_and_noise(grads: Dict[str, torch.Tensor], clip: float, noise_multiplier: float, batch_size: float,
                   generator: Optional[torch.Generator] = None):
    """The DP-SGD update direction from per-sample gradients ``{name: (B, *shape)}``.

    Each sample's gradient (all entries together) is scaled to norm at most ``clip``; the scaled
    gradients are summed, Gaussian noise of standard deviation ``noise_multiplier * clip`` is added
    to every coordinate of the sum (drawn from ``generator``, or torch's global generator), and the
    result is divided by ``batch_size`` — the expected batch size under Poisson sampling, the
    batch's size for fixed-size batches. ``noise_multiplier=0`` gives clipping alone (not private).

    Returns ``(update, norms)``: ``{name: shape}`` and the ``(B,)`` norms of the clipped gradients.
    """
    what = "clip_and_noise"
    clip = _real(clip, "clip", what)
    if not clip > 0:
        raise ValueError(f"{what}: clip must be > 0, got {clip}")
    noise = _real(noise_multiplier, "noise_multiplier", what)
    if noise < 0:
        raise ValueError(f"{what}: noise_multiplier must be >= 0, got {noise}")
    batch_size = _real(batch_size, "batch_size", what)
    if not batch_size > 0:
        raise ValueError(f"{what}: batch_size must be > 0, got {batch_size}")
    if not isinstance(grads, dict) or not grads:
        raise TypeError(f"{what}: grads must be a non-empty dict of name -> (B, *shape) tensors")
    sizes = {g.shape[0] if isinstance(g, torch.Tensor) and g.dim() else None for g in grads.values()}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"{what}: every entry of grads must be a tensor with the same leading (sample) "
                         f"dimension, got leading sizes {sorted(map(str, sizes))}")
    norms = torch.sqrt(sum(g.reshape(g.shape[0], -1).square().sum(1) for g in grads.values()))
    factor = (clip / (norms + 1e-12)).clamp(max=1.0)
    out = {}
    for name, g in grads.items():
        total = (g * factor.reshape(-1, *([1] * (g.dim() - 1)))).sum(0)
        out[name] = (total + noise * clip * torch.randn(total.shape, generator=generator, dtype=total.dtype,
                                                        device=total.device)) / batch_size
    return out, norms * factor
