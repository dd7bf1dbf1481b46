"""Warm-start QAOA (Egger, Mareček & Woerner, "Warm-starting quantum optimization", Quantum 5, 479 (2021)).

A warm start is a vector ``c ∈ [0, 1]^n`` — a rounded cut (e.g. :func:`~.goemans_williamson.goemans_williamson`'s
best cut), or a continuous relaxation — where ``c_i`` is the wanted probability that bit i is 1.
It is regularised by ``ε ∈ [0, 1/2]``, ``c_i ← clip(c_i, ε, 1 - ε)``, so that a rounded 0/1 start
still lets the mixer move. With ``θ_i = 2 arcsin(√c_i)``:

* start state ``|ψ_0⟩ = ⊗_i RY(θ_i)|0⟩``: bit i is 1 with probability ``sin²(θ_i/2) = c_i``;
* mixer ``U_B(β) = ⊗_i exp(-iβ H_i)`` with ``H_i = n_i·σ = sin θ_i X_i + cos θ_i Z_i``, the Pauli
  operator along the Bloch vector ``n_i = (sin θ_i, 0, cos θ_i)`` of wire i's start state, i.e.
  ``exp(-iβ H_i) = RY(θ_i) RZ(2β) RY(-θ_i)``.

``|ψ_0⟩`` is the top eigenstate of ``Σ_i H_i`` (eigenvalue n), as ``|+⟩^n`` is of ``Σ X`` for the
standard mixer, so at β = 0 or p = 0 the state keeps the warm-start distribution ``Π c_i^{x_i}
(1 - c_i)^{1 - x_i}``, and at ``c_i = 1/2`` (``ε = 1/2``) the mixer is exactly the X mixer
``exp(-iβ Σ X)`` from ``|+⟩^n``: the warm-start QAOA reduces to the standard one with the SAME
angles (linear ramp and fixed angles carry over). Egger et al. write the mixer Hamiltonian with
the opposite sign, ``H^ws_i = -n_i·σ`` (their start state is its ground state) and the circuit
``RY(θ_i) RZ(-2β) RY(-θ_i)``: their β is minus ours.

Use it as ``qaoa(problem, p, mixer="warm", warm_start=c, epsilon=0.25)`` (every QAOA feature: angle
batches, problem batches with one warm start each, ``optimize``, ``analyse``, the adjoint and
backprop gradients, :func:`~.natural_gradient.qaoa_metric`, ``circuit()``), or
:func:`warm_start_qaoa`, which without a warm start takes the Goemans–Williamson one: MaxCut's GW cut,
or for any other problem the best rounded bitstring of :func:`~.goemans_williamson.ising_sdp`.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from .problems import Problem
from .qaoa_gate_circuit import blank_circuit, cost_layer

__all__ = ["warm_start_qaoa", "warm_start_probabilities", "default_warm_start", "DEFAULT_EPSILON"]

# Egger et al. use ε = 0.25 for their rounded (GW) MaxCut warm starts
DEFAULT_EPSILON = 0.25


def _check_epsilon(epsilon, what: str) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon):
        raise TypeError(f"{what}: epsilon must be a real number in [0, 0.5], got {epsilon!r}")
    if not 0 <= epsilon <= 0.5:
        raise ValueError(f"{what}: epsilon must be in [0, 0.5] (c_i is clipped to [ε, 1 - ε]), got {epsilon}")
    return float(epsilon)


def warm_start_probabilities(warm_start, n_qubits: int, epsilon: float = DEFAULT_EPSILON, n_problems: int = 1,
                             what: str = "warm_start") -> torch.Tensor:
    """The regularised warm start ``clip(c, ε, 1 - ε)``: ``(1, n)`` or ``(G, n)`` float64.

    ``warm_start``: a bitstring ``"0110"`` (wire 0 first), a sequence / tensor of ``n`` values in
    [0, 1], a ``(G, n)`` tensor (one row per problem of a batch of ``n_problems``), or a
    :class:`~.goemans_williamson.GoemansWilliamsonResult` or
    :class:`~.goemans_williamson.IsingSDPResult` (its best rounded bitstring)."""
    from .goemans_williamson import GoemansWilliamsonResult, IsingSDPResult
    epsilon = _check_epsilon(epsilon, what)
    spec = warm_start
    if isinstance(spec, (GoemansWilliamsonResult, IsingSDPResult)):
        spec = spec.bitstring
    if isinstance(spec, str):
        if len(spec) != n_qubits or any(ch not in "01" for ch in spec):
            raise ValueError(f"{what}: the bitstring {spec!r} must have {n_qubits} characters 0/1")
        c = torch.tensor([[float(ch) for ch in spec]], dtype=torch.float64)
    else:
        if isinstance(spec, (bytes, dict, set)) or spec is None:
            raise TypeError(f"{what}: expected a bitstring, a sequence or tensor of {n_qubits} values in [0, 1] or "
                            f"a GoemansWilliamsonResult, got {type(spec).__name__}")
        try:
            c = (spec.detach().cpu() if isinstance(spec, torch.Tensor)
                 else torch.as_tensor(spec, dtype=torch.float64))
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"{what}: expected a bitstring, a sequence or tensor of {n_qubits} values in [0, 1] or "
                            f"a GoemansWilliamsonResult, got {type(spec).__name__}") from None
        if c.is_complex():
            raise TypeError(f"{what}: the warm start must be real, got {c.dtype}")
        c = c.to(torch.float64)
        if c.dim() == 1:
            c = c.unsqueeze(0)
        if c.dim() != 2 or c.shape[1] != n_qubits or c.shape[0] not in (1, n_problems):
            rows = f" or ({n_problems}, {n_qubits})" if n_problems > 1 else ""
            raise ValueError(f"{what}: the warm start must have shape ({n_qubits},){rows}, got {tuple(c.shape)}")
        if not bool(torch.isfinite(c).all()) or bool(((c < 0) | (c > 1)).any()):
            raise ValueError(f"{what}: warm-start values are probabilities of bit 1 and must lie in [0, 1]")
    return c.clamp(epsilon, 1 - epsilon)


def _bloch(c: torch.Tensor) -> torch.Tensor:
    """(sin θ, cos θ) of θ = 2 arcsin √c: ``(rows, 2, n)`` float64, sin θ = 2√(c(1-c)), cos θ = 1 - 2c."""
    return torch.stack([2 * torch.sqrt(c * (1 - c)), 1 - 2 * c], dim=1)


def _product_state(c: torch.Tensor) -> torch.Tensor:
    """⊗_i RY(θ_i)|0⟩ = ⊗ (√(1-c_i), √c_i) per row: ``(rows, 2^n)`` complex128 (wire 0 most significant)."""
    amp = torch.stack([torch.sqrt(1 - c), torch.sqrt(c)], dim=-1)         # (rows, n, 2)
    out = amp[:, 0]
    for w in range(1, c.shape[1]):
        out = (out[:, :, None] * amp[:, w, None, :]).reshape(c.shape[0], -1)
    return out.to(torch.complex128)


def _rotations(beta: torch.Tensor, sc: torch.Tensor, cdtype) -> torch.Tensor:
    """exp(-iβ_b (s X + c Z)) for rows b and the wires of ``sc`` (B, 2, k): (B, k, 2, 2), symmetric."""
    b = beta.to(torch.float64)[:, None]
    cb, sb = torch.cos(b).expand(-1, sc.shape[2]), torch.sin(b)
    s, c = sc[:, 0], sc[:, 1]
    zero = torch.zeros_like(cb)
    a = torch.complex(cb, -sb * c)
    d = torch.complex(cb, sb * c)
    o = torch.complex(zero, -sb * s)
    return torch.stack([a, o, o, d], dim=-1).unflatten(-1, (2, 2)).to(cdtype)


def _block_rotation(beta: torch.Tensor, sc: torch.Tensor, cdtype) -> torch.Tensor:
    """⊗ over the block's wires (first wire most significant): (B, 2^k, 2^k)."""
    from ..kernels.apply import kron
    U = _rotations(beta, sc, cdtype)
    M = U[:, 0]
    for j in range(1, U.shape[1]):
        M = kron(M, U[:, j])
    return M


def _block_generator(sc: torch.Tensor) -> torch.Tensor:
    """Σ_w (s_w X + c_w Z) on the block's wires: (rows, 2^k, 2^k) float64 (real symmetric)."""
    rows, _, k = sc.shape
    d = 2 ** k
    G = torch.zeros(rows, d, d, dtype=torch.float64, device=sc.device)
    j = torch.arange(d, device=sc.device)
    for q in range(k):
        bit = 1 << (k - 1 - q)                                 # wire q of the block: its (k-1-q)-th bit
        z = 1.0 - 2.0 * ((j & bit) != 0).to(torch.float64)     # +1 on |0⟩, -1 on |1⟩
        G[:, j, j] += sc[:, 1, q, None] * z
        G[:, j, j ^ bit] += sc[:, 0, q, None]
    return G


def warm_start_circuit(problem: Problem, p: int, warm: torch.Tensor, dtype=None, device=None):
    """The warm-start QAOA as a gate-level :class:`~torchquantum_layers.Circuit` (angles = input
    columns ``[γ_1…γ_p, β_1…β_p]``): ``RY(θ_i)`` on every wire, then per layer the cost gates of
    :func:`~.qaoa.qaoa_circuit` and ``RY(-θ_i) RZ(2β) RY(θ_i)`` (in time order) on every wire.
    ``warm``: the regularised warm start ``(n,)`` or ``(1, n)``."""
    from ..circuit import Input
    n = problem.n_qubits
    c = warm.reshape(-1).to(torch.float64)
    thetas = (2 * torch.asin(torch.sqrt(c))).tolist()
    circ = blank_circuit(n, dtype, device)
    for w in range(n):
        circ.ry(w, thetas[w])
    h, J, _ = problem.ising()
    pairs = torch.nonzero(J).tolist()
    for l in range(p):
        cost_layer(circ, h, pairs, J, l)
        for w in range(n):
            circ.ry(w, -thetas[w])
            circ.rz(w, Input(p + l, 2.0))
            circ.ry(w, thetas[w])
    return circ


def default_warm_start(problem: Problem, generator: Optional[torch.Generator] = None):
    """The Goemans–Williamson warm start of ``problem``: ``goemans_williamson(problem)`` for a
    MaxCut problem (a :class:`~.goemans_williamson.GoemansWilliamsonResult`, cut units), else
    ``ising_sdp(problem)`` (an :class:`~.goemans_williamson.IsingSDPResult`, cost units); both have
    ``bitstring`` (the best rounded one) and ``sdp_value``."""
    from .goemans_williamson import goemans_williamson, ising_sdp
    if not isinstance(problem, Problem):
        raise TypeError(f"default_warm_start: expected a Problem, got {type(problem).__name__}")
    if problem.name == "maxcut" and problem.data.get("graph") is not None:
        return goemans_williamson(problem, generator=generator)
    return ising_sdp(problem, generator=generator)


def warm_start_qaoa(problem, p: int, warm_start=None, epsilon: float = DEFAULT_EPSILON,
                    generator: Optional[torch.Generator] = None, **kwargs):
    """A :class:`~.qaoa.QAOA` with the warm-start mixer (module notes): ``qaoa(problem, p,
    mixer="warm", warm_start=..., epsilon=...)``. Without ``warm_start`` every problem is warm
    started from :func:`default_warm_start` (seeded by ``generator``): a MaxCut problem from the best
    cut of :func:`~.goemans_williamson.goemans_williamson`, any other from the best rounded bitstring
    of :func:`~.goemans_williamson.ising_sdp` (the same SDP on its Ising form). ``kwargs`` go to
    :class:`~.qaoa.QAOA`."""
    from .qaoa import QAOA
    if warm_start is None:
        probs = list(problem) if isinstance(problem, (list, tuple)) else [problem]
        for pr in probs:
            if not isinstance(pr, Problem):
                raise TypeError(f"warm_start_qaoa: expected a Problem (or a list of them), got {type(pr).__name__}")
        cuts = [[float(ch) for ch in default_warm_start(pr, generator).bitstring] for pr in probs]
        warm_start = torch.tensor(cuts if len(cuts) > 1 else cuts[0], dtype=torch.float64)
    elif generator is not None:
        raise ValueError("warm_start_qaoa: generator seeds the Goemans–Williamson warm start, which is not run "
                         "when warm_start is given (leave generator None)")
    return QAOA(problem, p, mixer="warm", warm_start=warm_start, epsilon=epsilon, **kwargs)
