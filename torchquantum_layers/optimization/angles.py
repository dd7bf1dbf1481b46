"""Initial QAOA angles in the ``[γ_1 … γ_p, β_1 … β_p]`` convention: linear ramp (TQA), the
fixed-angle table for 3-regular MaxCut, INTERP from p to p + 1, random and perturbed starts."""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

__all__ = ["split_angles", "join_angles", "linear_ramp", "fixed_angles", "interp", "random_angles", "perturb",
           "FIXED_ANGLES_3REGULAR"]


def split_angles(angles: torch.Tensor, p: int):
    """``(..., 2p)`` → ``(gammas (..., p), betas (..., p))``."""
    return angles[..., :p], angles[..., p:]


def join_angles(gammas, betas) -> torch.Tensor:
    """``gammas (..., p)``, ``betas (..., p)`` → ``(..., 2p)``."""
    return torch.cat([torch.as_tensor(gammas), torch.as_tensor(betas)], dim=-1)


def _check_count(value, name: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"{what}: {name} must be >= 1, got {value}")
    return int(value)


def _check_p(p, what) -> int:
    return _check_count(p, "p (the number of QAOA layers)", what)


def _check_starts(n_starts, what) -> int:
    return _check_count(n_starts, "n_starts", what)


def linear_ramp(p: int, delta: float = 0.75, dtype=torch.float64) -> torch.Tensor:
    """Linear-ramp ("TQA") initial angles ``(2p,)`` in this module's convention.

    A Trotterised anneal from the mixer to the cost: with ``t_l = (l - 1/2) / p``,
    ``γ_l = -t_l δ`` and ``β_l = (1 - t_l) δ``. (The sign of γ is negative because ``|+⟩`` is the
    *highest* eigenstate of ``Σ X``; ``(γ, β) → (-γ, -β)`` gives the same expected cost for
    real diagonal costs.) ``δ ≈ 0.75`` suits costs of order 1 per term (MaxCut); scale it by the
    inverse cost scale for other problems. ``delta`` must be a finite real number.
    """
    p = _check_p(p, "linear_ramp")
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        if isinstance(delta, torch.Tensor) and delta.numel() == 1 and not delta.is_complex() \
                and not delta.dtype == torch.bool:
            delta = float(delta)
        else:
            raise TypeError(f"linear_ramp: delta must be a real number, got {delta!r}")
    delta = float(delta)
    if not math.isfinite(delta):
        raise ValueError(f"linear_ramp: delta must be finite, got {delta}")
    t = (torch.arange(p, dtype=torch.float64) + 0.5) / p
    return torch.cat([-t * delta, (1 - t) * delta]).to(dtype)


# Wurtz & Lykov, "The fixed angle conjecture for QAOA on regular MaxCut graphs" (PRA 104, 052419,
# 2021), 3-regular graphs, in their convention C = Σ_edges (1 - Z_i Z_j)/2 (the cut),
# U = exp(-iγ C), mixer exp(-iβ Σ X): (gammas, betas, tree approximation-ratio guarantee).
FIXED_ANGLES_3REGULAR = {
    1: ((0.616,), (0.393,), 0.6925),
    2: ((0.488, 0.898), (0.555, 0.293), 0.7559),
    3: ((0.4179, 0.7921, 0.9323), (0.6003, 0.4524, 0.2351), 0.7923),
    4: ((0.4072, 0.7787, 0.9779, 1.1439), (0.5941, 0.4406, 0.3125, 0.1631), 0.8167),
}


def fixed_angles(p: int, degree: int = 3, dtype=torch.float64) -> torch.Tensor:
    """Wurtz–Lykov fixed angles for MaxCut on 3-regular graphs, ``(2p,)`` in this module's convention.

    Our cost is minus the cut, so ``γ = -γ_WL``, ``β = β_WL``. Available for p = 1 … 4; they
    guarantee the listed approximation ratio on graphs without short cycles and are a good warm
    start on any 3-regular graph.
    """
    p = _check_p(p, "fixed_angles")
    if degree != 3:
        raise ValueError(f"fixed_angles: only degree 3 is tabulated, got degree={degree!r}")
    if p not in FIXED_ANGLES_3REGULAR:
        raise ValueError(f"fixed_angles: tabulated for p = 1 … {max(FIXED_ANGLES_3REGULAR)}, got p={p}; "
                         f"use interp() to go deeper")
    g, b, _ = FIXED_ANGLES_3REGULAR[p]
    return torch.tensor([-x for x in g] + list(b), dtype=dtype)


def interp(angles: torch.Tensor) -> torch.Tensor:
    """INTERP warm start (Zhou et al., PRX 10, 021067, 2020): angles ``(..., 2p)`` optimised at depth
    p → initial angles ``(..., 2(p+1))`` for depth p+1, by linear interpolation of each of the γ and
    β schedules: ``x'_i = (i-1)/p x_{i-1} + (p-i+1)/p x_i`` for i = 1 … p+1 (x_0 = x_{p+1} = 0)."""
    a = torch.as_tensor(angles)
    if a.shape[-1] % 2 or a.shape[-1] == 0:
        raise ValueError(f"interp: angles must have an even last dimension 2p, got shape {tuple(a.shape)}")
    p = a.shape[-1] // 2

    def one(x):
        pad = torch.nn.functional.pad(x, (1, 1))              # x_0 = x_{p+1} = 0
        i = torch.arange(1, p + 2, dtype=a.dtype if a.is_floating_point() else torch.float64,
                         device=a.device)
        return (i - 1) / p * pad[..., :-1] + (p - i + 1) / p * pad[..., 1:]
    return torch.cat([one(a[..., :p]), one(a[..., p:])], dim=-1)


def random_angles(p: int, n_starts: int, generator: Optional[torch.Generator] = None,
                  gamma_range=(-math.pi / 2, 0.0), beta_range=(0.0, math.pi / 4),
                  dtype=torch.float64) -> torch.Tensor:
    """``(n_starts, 2p)`` angles uniform in the given ranges (seeded by ``generator``)."""
    p = _check_p(p, "random_angles")
    n_starts = _check_starts(n_starts, "random_angles")
    u = torch.rand(n_starts, 2 * p, generator=generator, dtype=torch.float64)
    lo = torch.tensor([gamma_range[0]] * p + [beta_range[0]] * p, dtype=torch.float64)
    hi = torch.tensor([gamma_range[1]] * p + [beta_range[1]] * p, dtype=torch.float64)
    return (lo + u * (hi - lo)).to(dtype)


def perturb(angles: torch.Tensor, n_starts: int, scale: float = 0.1,
            generator: Optional[torch.Generator] = None, keep_first: bool = True) -> torch.Tensor:
    """``n_starts`` copies of ``angles (2p,)`` with Gaussian noise of std ``scale`` (row 0 exact when
    ``keep_first``): a multi-start batch around a good initial point."""
    n_starts = _check_starts(n_starts, "perturb")
    a = torch.as_tensor(angles, dtype=torch.float64)
    noise = torch.randn(n_starts, a.shape[-1], generator=generator, dtype=torch.float64) * scale
    if keep_first:
        noise[0] = 0
    return a.unsqueeze(0) + noise
