"""Zero-noise extrapolation (ZNE): expectation values at amplified noise, extrapolated to none.

The noise is amplified by unitary folding (Giurgica-Tiron et al. 2020, as Mitiq does it): a gate
G becomes G (G† G)^k, which is the same unitary but meets the noise model ``2k + 1`` times. To
scale a circuit of d gates by λ, ``round(d (λ − 1) / 2)`` folds are spread over it, so the scale
reached is ``1 + 2 · folds / d`` (it is what the extrapolation uses):

* ``"global"``: the whole circuit, C (C† C)^k, then the last r gates once more (C … L† L);
* ``"left"``: each gate k times, the first r gates once more;
* ``"random"``: each gate k times, r gates drawn without replacement (``seed``) once more.

Folded gates share the circuit's weights Parameter and input columns, so gradients reach the
angles through every scale. Only the noise a :class:`NoiseModel` attaches to gates grows:
channels, measurements and resets written into a MixedCircuit keep their place and strength, and
readout errors are read once per run as on a device.

Extrapolations (``extrapolate``), each a function of the values that autograd differentiates:

* ``"richardson"``: the polynomial through all points, at λ = 0 (Temme et al. 2017);
* ``"polynomial"``: a least-squares polynomial of degree ``order`` (``"linear"``: order 1);
* ``"exponential"``: ``a + b e^{−cλ}`` with the asymptote ``a`` known (default: the value on the
  maximally mixed state, where depolarising noise leads); a line through ``log|E − a|``.
"""
from __future__ import annotations

import math
import random
import weakref
from typing import Optional

import numpy as np
import torch

from ..circuit import Op

__all__ = ["fold_gates", "extrapolate", "zne_expval", "FOLD_METHODS", "EXTRAPOLATIONS"]

FOLD_METHODS = ("global", "left", "random")
EXTRAPOLATIONS = ("richardson", "linear", "polynomial", "exponential")


def _scale(value, what: str) -> float:
    if isinstance(value, bool) or not hasattr(value, "__float__"):
        raise TypeError(f"{what}: a scale factor must be a real number >= 1, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 1:
        raise ValueError(f"{what}: a scale factor must be a real number >= 1, got {value!r}")
    return v


def _inverse(op: Op) -> Op:
    return Op(op.gate, op.wires, op.angles, op.data_key, not op.adjoint)


def _fold_counts(d: int, k: int, r: int, method: str, seed: int) -> list:
    """Folds per gate (G → G (G† G)^k, r of them once more) for the methods that fold gate by gate."""
    extra = range(r) if method == "left" else random.Random(seed).sample(range(d), r)
    counts = [k] * d
    for i in extra:
        counts[i] += 1
    return counts


def fold_gates(circuit, scale: float, method: str = "global", seed: int = 0):
    """``circuit`` with its gates folded to noise scale ≈ ``scale`` (module notes); the scale
    reached is ``folded.fold_scale``. A Circuit gives a Circuit, a MixedCircuit a MixedCircuit with
    its noise model and its instructions where they were among the gates (``"global"`` folding
    accepts instructions only before the first gate or after the last)."""
    from .circuit import MeasureInstruction, MixedCircuit, ResetInstruction
    what = "fold_gates"
    scale = _scale(scale, what)
    if method not in FOLD_METHODS:
        raise ValueError(f"{what}: method must be one of {FOLD_METHODS}, got {method!r}")
    ops = list(circuit.ops)
    d = len(ops)
    if d == 0:
        raise ValueError(f"{what}: the circuit has no gates to fold")
    instructions = list(getattr(circuit, "instructions", ()) or ())
    folds = math.floor(d * (scale - 1) / 2 + 0.5)
    k, r = divmod(folds, d)
    if method == "global":
        inside = [inst for pos, inst in instructions if 0 < pos < d]
        if inside:
            raise ValueError(f"{what}: global folding runs the circuit backwards, which {inside[0]!r} between its "
                             f"gates cannot; use method='left' or 'random'")
        backwards = [_inverse(op) for op in reversed(ops)]
        new_ops = ops + (backwards + ops) * k + (backwards[:r] + ops[d - r:] if r else [])
        at = {0: 0, d: len(new_ops)}
    else:
        counts = _fold_counts(d, k, r, method, seed)
        new_ops, at = [], {}
        for i, (op, c) in enumerate(zip(ops, counts)):
            at[i] = len(new_ops)
            new_ops += [op] + [_inverse(op), op] * c
        at[d] = len(new_ops)
    mixed = isinstance(circuit, MixedCircuit)
    out = circuit._sharing(new_ops, cls=MixedCircuit if mixed else None)
    if mixed:
        out.noise_model = circuit.noise_model
        for pos, inst in instructions:
            if isinstance(inst, (MeasureInstruction, ResetInstruction)):
                inst = type(inst)(inst.wires, inst.collapses, out)
            out.instructions.append((at[pos], inst))
    out.fold_scale = 1 + 2 * folds / d
    return out


_FOLDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _folded(circuit, scale, method, seed):
    """fold_gates, kept per circuit while its gates, instructions, weights, dtype, device, fusion
    and noise model stay (a training loop then reuses the folded circuits and their plans)."""
    instructions = list(getattr(circuit, "instructions", ()) or ())
    key = (float(scale), method, seed, len(circuit.ops), circuit.dtype, str(circuit.device), circuit.fuse,
           circuit.max_fused_wires, tuple(pos for pos, _ in instructions))
    # held, not just their ids: compared by identity, they cannot be freed and their ids reused
    held = (circuit.weights, getattr(circuit, "noise_model", None), *(inst for _, inst in instructions))
    cache = _FOLDED.setdefault(circuit, {})
    hit = cache.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[1], held)):     # same length: positions in key
        return hit[0]
    if len(cache) > 32:
        cache.clear()
    cache[key] = (fold_gates(circuit, scale, method, seed), held)
    return cache[key][0]


def _check_scales(scales, what: str) -> list:
    if isinstance(scales, (str, bytes)) or not hasattr(scales, "__iter__"):
        raise TypeError(f"{what}: scale_factors must be a sequence of real numbers >= 1, got {scales!r}")
    out = [_scale(s, what) for s in (scales.tolist() if hasattr(scales, "tolist") else scales)]
    if len(out) < 2:
        raise ValueError(f"{what}: extrapolation needs at least two scale factors, got {list(out)}")
    for i, s in enumerate(out):
        if any(abs(s - t) < 1e-12 for t in out[:i]):
            raise ValueError(f"{what}: scale factor {s:g} appears twice (after folding to whole gates?): "
                             f"{list(out)}")
    return out


def _zero_weights(scales, order: int) -> np.ndarray:
    """w with Σ_j w_j E_j the least-squares polynomial of degree ``order`` through (λ_j, E_j) at 0."""
    vander = np.vander(np.asarray(scales, dtype=np.float64), order + 1, increasing=True)
    return np.linalg.pinv(vander)[0]


def extrapolate(scale_factors, values: torch.Tensor, method: str = "richardson", order: Optional[int] = None,
                asymptote=None) -> torch.Tensor:
    """The zero-noise value from ``values[j]`` measured at ``scale_factors[j]`` (``values``:
    ``(S, …)``; the result drops the first axis). See the module notes for the methods;
    ``order`` is the polynomial degree (``"polynomial"``), ``asymptote`` the value at infinite
    noise (``"exponential"``, default 0; a number or a tensor broadcasting against ``values[0]``)."""
    what = "extrapolate"
    scales = _check_scales(scale_factors, what)
    if method not in EXTRAPOLATIONS:
        raise ValueError(f"{what}: method must be one of {EXTRAPOLATIONS}, got {method!r}")
    if not isinstance(values, torch.Tensor) or values.dim() == 0 or values.shape[0] != len(scales):
        shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(f"{what}: values must be a tensor with one row per scale factor ({len(scales)}), got "
                         f"{shape}")
    S = len(scales)
    if method == "polynomial":
        if order is None or isinstance(order, bool) or not isinstance(order, int) or not 0 <= order < S:
            raise ValueError(f"{what}: 'polynomial' needs an int order with 0 <= order < {S} (the number of "
                             f"scale factors), got {order!r}")
    elif order is not None:
        raise ValueError(f"{what}: order applies to method='polynomial' only (got method={method!r})")
    if asymptote is not None and method != "exponential":
        raise ValueError(f"{what}: asymptote applies to method='exponential' only (got method={method!r})")
    degree = {"richardson": S - 1, "linear": 1, "polynomial": order, "exponential": 1}[method]
    real = values.real if values.is_complex() else values
    w = torch.as_tensor(_zero_weights(scales, degree), dtype=real.dtype, device=real.device)
    w = w.reshape((S,) + (1,) * (real.dim() - 1))
    if method != "exponential":
        return (w * real).sum(0)
    a = torch.as_tensor(0.0 if asymptote is None else asymptote, dtype=real.dtype, device=real.device)
    gap = real - a
    sign = torch.sign(gap[0])
    if not bool(((torch.sign(gap) == sign) & (sign != 0)).all()):
        raise ValueError(f"{what}: 'exponential' needs every value on one side of the asymptote (E - a of one "
                         f"sign at all scale factors, never 0); some are not: use 'richardson' or "
                         f"'polynomial', or give the asymptote")
    return a + sign * torch.exp((w * torch.log(gap.abs())).sum(0))


def zne_expval(circuit, observables, scale_factors=(1, 3, 5), extrapolation: str = "richardson",
               fold_method: str = "global", order: Optional[int] = None, asymptote=None, seed: int = 0,
               simulator: str = "density", return_raw: bool = False, **expval_kwargs):
    """Zero-noise-extrapolated ``Tr(O ρ_out)``, shaped as ``mixed.expval``'s result.

    The circuit is folded to each of ``scale_factors`` (:func:`fold_gates` with ``fold_method``
    and ``seed``), each folded circuit is run by ``simulator`` (``"density"``: ``mixed.expval``;
    ``"trajectories"``: ``mixed.trajectories.expval``) with ``expval_kwargs`` (x, state,
    noise_model, diff_method, shots, generator, n_trajectories, weights …), and the values are
    extrapolated (:func:`extrapolate`, with ``order`` / ``asymptote``; the exponential fit's
    asymptote defaults to the read-out value on the maximally mixed state). ``return_raw=True``
    also returns the values at each scale ``(S, …)`` and the scales reached ``(S,)``.
    """
    from . import trajectories
    from .simulate import _observables, _resolve_noise, expectation, expval, read_out
    from .state import maximally_mixed
    what = "zne_expval"
    requested = _check_scales(scale_factors, what)
    if simulator not in ("density", "trajectories"):
        raise ValueError(f"{what}: simulator must be 'density' or 'trajectories', got {simulator!r}")
    if "return_std" in expval_kwargs:
        raise ValueError(f"{what}: return_std does not apply (the extrapolation mixes the values)")
    run = expval if simulator == "density" else trajectories.expval
    folded = [_folded(circuit, s, fold_method, seed) for s in requested]
    scales = _check_scales([f.fold_scale for f in folded], what)
    raw = torch.stack([run(f, observables, **expval_kwargs) for f in folded])
    if extrapolation == "exponential" and asymptote is None:
        hams, single = _observables(observables, what)
        noise = _resolve_noise(circuit, expval_kwargs.get("noise_model"))
        mixed = maximally_mixed(circuit.n_wires, dtype=circuit.dtype, device=circuit.device)
        asymptote = expectation(mixed, read_out(hams, noise))[0]
        asymptote = asymptote[0] if single else asymptote
    value = extrapolate(scales, raw, extrapolation, order, asymptote)
    if return_raw:
        return value, raw, torch.tensor(scales, dtype=raw.dtype, device=raw.device)
    return value
