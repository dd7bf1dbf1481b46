"""Barren plateaus (McClean et al., Nat. Commun. 2018; Paddle Quantum's tutorial): the variance
of ∂E/∂θ₁ over random circuits decays exponentially with the number of qubits.

Random circuit (Paddle's): RY(π/4) on every wire, then ``depth`` blocks of a random rotation
RX, RY or RZ with a uniform angle on every wire and a chain of CZ; cost
``E = |⟨0…0|U|0…0⟩|²``; gradient w.r.t. the first rotation angle. All ``samples`` random
circuits of one size run as ONE batch: each wire of a block carries RX, RY and RZ fed from
per-sample input columns, two of them at angle 0 (the identity), so the random structure is
data, not code, and one backward pass gives every sample's gradient.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch

from ..circuit import Circuit
from ._common import count
from ..measure import probabilities

__all__ = ["random_layer_circuit", "gradient_samples", "gradient_variance", "plot_gradient_variance",
           "BarrenResult"]


def random_layer_circuit(n_wires: int, depth: int = 1, dtype=torch.complex128) -> Circuit:
    """The circuit family with its random choices as inputs: column ``3 (l n + q) + r`` is the
    angle of rotation r ∈ (X, Y, Z) on wire q in block l."""
    c = Circuit(n_wires, dtype=dtype)
    for w in range(n_wires):
        c.ry(w, math.pi / 4)
    for layer in range(depth):
        for w in range(n_wires):
            base = 3 * (layer * n_wires + w)
            c.rx(w, input=base).ry(w, input=base + 1).rz(w, input=base + 2)
        for w in range(n_wires - 1):
            c.cz(w, w + 1)
    return c


def gradient_samples(n_wires: int, samples: int = 300, depth: int = 1, seed: int = 42,
                     dtype=torch.complex128) -> torch.Tensor:
    """∂E/∂θ₁ for ``samples`` random circuits on ``n_wires`` (float tensor ``(samples,)``)."""
    if isinstance(n_wires, bool) or not isinstance(n_wires, int) or n_wires < 1:
        raise ValueError(f"gradient_samples: n_wires must be a positive int, got {n_wires!r}")
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 2:
        raise ValueError(f"gradient_samples: samples must be an int >= 2, got {samples!r}")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"gradient_samples: depth must be a positive int, got {depth!r}")
    rng = np.random.default_rng(seed)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    k = depth * n_wires
    theta = rng.uniform(0, 2 * math.pi, (samples, k))
    axis = rng.integers(0, 3, (samples, k))
    x = np.zeros((samples, 3 * k))
    x[np.arange(samples)[:, None], 3 * np.arange(k)[None, :] + axis] = theta
    xt = torch.tensor(x, dtype=real, requires_grad=True)
    c = random_layer_circuit(n_wires, depth, dtype)
    cost = probabilities(c(xt))[:, 0]
    grad, = torch.autograd.grad(cost.sum(), xt)
    return grad[torch.arange(samples), torch.as_tensor(axis[:, 0])].detach()


@dataclass
class BarrenResult:
    n_wires: list
    mean: list = field(default_factory=list)
    variance: list = field(default_factory=list)
    slope: float = 0.0            # fitted d log(variance) / d n (negative: exponential decay)


def gradient_variance(n_wires: Sequence[int] = (2, 3, 4, 5, 6, 7, 8), samples: int = 300, depth: int = 1,
                      seed: int = 42, dtype=torch.complex128) -> BarrenResult:
    """Mean and variance of ∂E/∂θ₁ over random circuits, for each qubit count, and the slope of
    ``log(variance)`` against the qubit count (least squares)."""
    if isinstance(n_wires, (str, bytes)) or not hasattr(n_wires, "__iter__"):
        raise TypeError(f"gradient_variance: n_wires must be a list of qubit counts, got {n_wires!r}")
    ns = [count(n, "each n_wires entry", "gradient_variance") for n in n_wires]
    if not ns:
        raise ValueError("gradient_variance: n_wires is empty")
    res = BarrenResult(n_wires=ns)
    for n in ns:
        g = gradient_samples(n, samples, depth, seed + n, dtype)
        res.mean.append(float(g.mean()))
        res.variance.append(float(g.var(unbiased=False)))
    if len(ns) > 1:
        res.slope = float(np.polyfit(ns, np.log(res.variance), 1)[0])
    return res


def plot_gradient_variance(result: BarrenResult, ax=None, path: Optional[str] = None):
    """Semilog plot of the gradient variance against the qubit count (needs matplotlib: install
    the ``plot`` extra, ``pip install torchquantum-layers[plot]``). Returns the Axes."""
    from ..plotting import new_figure, require_matplotlib
    require_matplotlib("plot_gradient_variance")
    if ax is None:
        # a pyplot-free figure: no backend switch, nothing left in pyplot's figure list
        ax = new_figure("plot_gradient_variance", figsize=(5, 3.5)).subplots()
    ax.semilogy(result.n_wires, result.variance, "o-", label="Var[∂E/∂θ₁]")
    if len(result.n_wires) > 1:
        fit = np.exp(np.polyval(np.polyfit(result.n_wires, np.log(result.variance), 1), result.n_wires))
        ax.semilogy(result.n_wires, fit, "--", label=f"fit: slope {result.slope:.2f} per qubit")
    ax.set_xlabel("qubits")
    ax.set_ylabel("variance of the gradient")
    ax.legend()
    if path is not None:
        ax.figure.savefig(path, bbox_inches="tight")
    return ax
