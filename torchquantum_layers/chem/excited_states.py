"""Variational Quantum Deflation (Higgott, Wang & Brierley, Quantum 3, 156 (2019)): the lowest k
levels of a Hamiltonian, found one after another.

Level ℓ minimises, over fresh angles θ of the same circuit,

    F_ℓ(θ) = ⟨ψ(θ)|H|ψ(θ)⟩ + Σ_{j<ℓ} β_j |⟨ψ_j|ψ(θ)⟩|²

where ψ_j are the states already found. If the ψ_j are the exact lowest eigenstates, the minimum
of F_ℓ over all states is ``min(E_ℓ, min_j E_j + β_j)``, so F_ℓ's minimiser is the ℓ-th eigenstate
as soon as ``β_j > E_ℓ − E_j`` for every j < ℓ (Higgott et al., eq. 4). A bound on every such gap
needs no diagonalisation: for ``H = c_0 I + Σ_t c_t P_t`` (Pauli strings P_t, ‖P_t‖ = 1) every
eigenvalue lies in ``c_0 ± Σ_t |c_t|``, so ``E_ℓ − E_j <= 2 Σ_{t≠0} |c_t|`` (:func:`spectral_width_bound`).
The default is ``β_j = 1.5 × that bound``: strictly above any gap, with room for the earlier levels
being approximate (a larger β only stiffens the landscape).

Sectors: ``sector={"n_electrons": 2, "spin_squared": 0}`` (keys ``n_electrons``, ``spin_z``,
``spin_squared``) replaces H by ``H' = H + Σ_O μ_O (O − o)²`` with O the operators of
:mod:`.operators` (particle number N, S_z, S²) under ``mapping``. The penalty is the operator
``(O − o)²``, not ``(⟨O⟩ − o)²``: H' is again a Hamiltonian, so VQD's variational argument holds
for it, and a superposition of N = 1 and N = 3 does not pass for N = 2. When H commutes with O
(every molecular Hamiltonian with the same mapping does; this is checked), an eigenstate of H' out
of the sector sits at least ``μ_O · d_O²`` above its H energy, ``d_O`` the smallest nonzero
distance from ``o`` to another eigenvalue of O (1 for N, ½ for S_z, e.g. ¾ between S² = 0 and ¾).
The default ``μ_O = 1.5 × spectral_width_bound(H) / d_O²`` therefore puts every out-of-sector
level above every in-sector one, and the k lowest levels of H' are the sector's k lowest (when it
holds k states); β from H alone then bounds their gaps too. Energies reported are ⟨H⟩ (without the
penalties).
"""
from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..circuit import Circuit
from ..engine import run_circuit
from ..grad import check_diff_method, circuit_expval
from ..observables import Hamiltonian, expectation
from .fermion import _resolve_mapping
from .operators import particle_number, spin_squared, spin_z
from .vqe import _finite_real, _run, check_givens_hamiltonian

__all__ = ["vqd", "VQDResult", "vqd_loss", "spectral_width_bound", "sector_hamiltonian", "SECTOR_KEYS",
           "DEFAULT_MARGIN"]

SECTOR_KEYS = ("n_electrons", "spin_z", "spin_squared")
DEFAULT_MARGIN = 1.5
"""Factor over the gap bound in the default β and μ (any value > 1 satisfies the bound)."""


def spectral_width_bound(H) -> float:
    """``2 Σ |c_t|`` over the non-identity Pauli terms of ``H``: an upper bound on E_max − E_min
    (in H's units, Hartree for molecules), hence on every gap between two of its eigenvalues."""
    merged = Hamiltonian(H).simplify()
    return 2.0 * sum(abs(complex(c)) for c, p in merged.terms if p.x_mask or p.z_mask)


# ------------------------------------------------------------------------------------------------
# sectors
def _sector_operator(key: str, n: int, mapping: str):
    return {"n_electrons": particle_number, "spin_z": spin_z, "spin_squared": spin_squared}[key](n, mapping)


def _check_sector_value(key, value, n):
    """The target eigenvalue ``o`` of the sector operator, and the eigenvalues O can take on n qubits."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TypeError(f"vqd: sector[{key!r}] must be a finite real number, got {value!r}")
    value = float(value)
    s_max = n / 4                                     # n/2 spatial orbitals, each ½ at most
    if key == "n_electrons":
        allowed = [float(m) for m in range(n + 1)]
        label = f"an integer in 0..{n}"
    elif key == "spin_z":
        allowed = [m / 2 for m in range(-int(2 * s_max), int(2 * s_max) + 1)]
        label = f"a multiple of 1/2 in [-{s_max:g}, {s_max:g}]"
    else:
        allowed = [s * (s + 1) for s in (m / 2 for m in range(int(2 * s_max) + 1))]
        label = "s(s+1) for s in 0, 1/2, ..., " + f"{s_max:g}" + f" ({', '.join(f'{a:g}' for a in allowed)})"
    match = [a for a in allowed if abs(a - value) <= 1e-9]
    if not match:
        raise ValueError(f"vqd: sector[{key!r}] = {value!r} is not an eigenvalue of {key} on {n} qubits: "
                         f"it must be {label}")
    target = match[0]
    gaps = [abs(a - target) for a in allowed if a != target]
    return target, (min(gaps) if gaps else 1.0)


def sector_hamiltonian(H, n_qubits: int, sector: dict, weights=None, mapping: str = "jordan_wigner",
                       check_commutes: bool = True):
    """``(H + Σ_O μ_O (O − o)², {key: μ_O})`` for ``sector = {key: o}`` (see the module docstring).

    ``weights``: None (the default μ_O), one number for every key, or ``{key: μ}`` (missing keys get
    the default); each μ must be > 0. With ``check_commutes`` a Hamiltonian that does not commute
    with a sector operator (e.g. built with another mapping) raises ValueError."""
    if not isinstance(sector, dict):
        raise TypeError(f"vqd: sector must be a dict like {{'n_electrons': 2, 'spin_squared': 0}}, got "
                        f"{type(sector).__name__}")
    if not sector:
        raise ValueError(f"vqd: sector is empty; give at least one of {SECTOR_KEYS}")
    for key in sector:
        if key not in SECTOR_KEYS:
            raise ValueError(f"vqd: unknown sector key {key!r}; choose from {SECTOR_KEYS}")
    if weights is not None and not isinstance(weights, dict):
        weights = {key: weights for key in sector}
    weights = dict(weights or {})
    for key in weights:
        if key not in sector:
            raise ValueError(f"vqd: sector_weight has key {key!r} that is not in sector {sorted(sector)}")
    mapping = _resolve_mapping(mapping)
    width = spectral_width_bound(H) or 1.0
    out, used = Hamiltonian(H, n_wires=n_qubits), {}
    for key in SECTOR_KEYS:                           # a fixed order: the same H' whatever the dict order
        if key not in sector:
            continue
        target, gap = _check_sector_value(key, sector[key], n_qubits)
        op = _sector_operator(key, n_qubits, mapping)
        if check_commutes and not Hamiltonian(H).commutes_with(op, tol=1e-9):
            raise ValueError(f"vqd: H does not commute with {key} under mapping={mapping!r}, so its levels have no "
                             f"definite {key}; build the sector with the mapping H was built with")
        if key in weights:
            mu = _finite_real(weights[key], f"sector_weight[{key!r}]", "vqd")
            if not mu > 0:
                raise ValueError(f"vqd: sector_weight[{key!r}] must be > 0, got {mu!r}")
        else:
            mu = DEFAULT_MARGIN * width / gap ** 2
        shifted = op - target
        out = out + mu * (shifted @ shifted)
        used[key] = mu
    return out.simplify(), used


# ------------------------------------------------------------------------------------------------
def vqd_loss(circuit: Circuit, H, previous: torch.Tensor, beta: torch.Tensor, state=None,
             diff_method: str = "backprop", weights: Optional[torch.Tensor] = None):
    """``(F(θ), ⟨H⟩, overlaps)``: ``F = ⟨ψ|H|ψ⟩ + Σ_j beta[j] |⟨previous[j]|ψ⟩|²`` for the circuit's
    state ψ; ``previous`` is ``(m, 2**n)`` (m may be 0), ``beta`` ``(m,)``, ``overlaps`` ``(m,)``.
    ``weights`` stands in for ``circuit.weights`` in this call (functional use, e.g. gradcheck)."""
    start, x = _prepared(circuit, state)
    psi = run_circuit(circuit, start, x, weights)
    if diff_method == "backprop":
        e = expectation(psi, H)[0]
    else:
        # the energy's gradient by the chosen method; the overlaps need the state itself (autograd)
        e = circuit_expval(circuit, H, state=state, diff_method=diff_method, weights=weights)[0]
    overlaps = (previous.conj() @ psi[0]).abs() ** 2
    return e + (beta.to(overlaps) * overlaps).sum(), e, overlaps


def _prepared(circuit, state):
    """``(initial state, x)`` as :func:`run_circuit` takes them, validated by the circuit; None
    for |0…0⟩ (the engine then starts from a product state without materialising it)."""
    if state is None:
        return None, None
    _, start, _ = circuit.prepare(None, state)
    return start, None


@dataclass
class VQDResult:
    """``energies[ℓ]``: ⟨H⟩ of level ℓ's final state (without sector penalties); ``states`` its
    ``(k, 2**n)`` state vectors; ``weights[ℓ]`` its angles (``(k, P)``); ``histories[ℓ][s]`` the
    deflated loss F_ℓ after s optimizer steps (``n_steps[ℓ]`` of them); ``overlaps[i, j] =
    |⟨ψ_i|ψ_j⟩|²`` (≈ the identity when the levels came out orthogonal); ``beta`` the ``(k−1,)``
    overlap weights used; ``hamiltonian`` the operator minimised (H plus the sector penalties,
    ``sector_weights`` their μ). Levels come out ascending when every level converged."""
    energies: torch.Tensor
    states: torch.Tensor
    weights: torch.Tensor
    histories: list
    n_steps: list
    overlaps: torch.Tensor
    beta: torch.Tensor
    wall_time: float
    hamiltonian: object = field(repr=False)
    sector_weights: dict = field(default_factory=dict)
    circuit: Circuit = field(default=None, repr=False)


def _check_k(k, n):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= 2 ** n:
        raise ValueError(f"vqd: k must be an int in 1..{2 ** n} (the number of levels), got {k!r}")
    return int(k)


def _check_beta(beta, k, H, real, device):
    if beta is None:
        width = spectral_width_bound(H) or 1.0
        return torch.full((k - 1,), DEFAULT_MARGIN * width, dtype=real, device=device)
    if isinstance(beta, (numbers.Real, torch.Tensor)) and not isinstance(beta, bool) and (
            not isinstance(beta, torch.Tensor) or beta.dim() == 0):
        value = _finite_real(beta, "beta", "vqd")
        if not value > 0:
            raise ValueError(f"vqd: beta must be > 0 (it must exceed the gaps E_l - E_j), got {value!r}")
        values = [value] * (k - 1)
    else:
        try:
            values = [_finite_real(b, f"beta[{j}]", "vqd") for j, b in enumerate(beta)]
        except TypeError as err:
            if "not iterable" in str(err):
                raise TypeError(f"vqd: beta must be a number or a sequence of k-1 = {k - 1} numbers, got "
                                f"{beta!r}") from None
            raise
        if len(values) != k - 1:
            raise ValueError(f"vqd: beta needs k-1 = {k - 1} values (one per earlier level), got {len(values)}")
    for j, b in enumerate(values):
        if not b > 0:
            raise ValueError(f"vqd: beta[{j}] must be > 0 (it must exceed the gap E_l - E_{j}), got {b!r}")
    return torch.tensor(values, dtype=real, device=device)


def _check_hamiltonian(H, circuit):
    if not isinstance(H, Hamiltonian):
        raise TypeError(f"vqd: H must be a tql Hamiltonian, got {type(H).__name__}")
    declared = H.declared_n_wires
    if H.n_wires > circuit.n_wires or (declared is not None and declared != circuit.n_wires):
        raise ValueError(f"vqd: H acts on {declared or H.n_wires} qubits but the circuit has {circuit.n_wires} "
                         f"wires")
    if not H.is_hermitian:
        raise ValueError("vqd: H must be Hermitian (real coefficients on Pauli strings)")


def _initial_weights(init, k, restarts, circuit, perturbation, seed):
    """``(k, restarts, P)`` starting angles. Level ℓ's first start is ``init[ℓ]`` when given; else
    the circuit's own angles for level 0 and those plus N(0, perturbation²) noise (seeded) for ℓ >= 1:
    a deflated loss is stationary at the earlier optimum, and the common start is often close to it,
    so later levels need a push off it. Every further restart adds fresh noise to the same base."""
    start = circuit.weights.detach().clone()
    P = start.shape[0]
    if init is not None:
        if not isinstance(init, torch.Tensor):
            raise TypeError(f"vqd: init must be a (k, P) tensor of starting angles, got {type(init).__name__}")
        if init.shape != (k, P):
            raise ValueError(f"vqd: init must have shape (k, P) = ({k}, {P}), got {tuple(init.shape)}")
        if init.is_complex() or not bool(torch.isfinite(init).all()):
            raise ValueError("vqd: init must hold finite real angles")
        base = init.detach().to(start)
    else:
        base = start.unsqueeze(0).expand(k, P)
    perturbation = _finite_real(perturbation, "perturbation", "vqd", minimum=0)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"vqd: seed must be an int, got {seed!r}")
    gen = torch.Generator().manual_seed(int(seed))
    # drawn restart-major, so the first restart's noise does not depend on how many follow
    noise = torch.randn(restarts, k, P, generator=gen, dtype=torch.float64).transpose(0, 1) * perturbation
    if init is not None:
        noise[:, 0] = 0
    else:
        noise[0, 0] = 0
    return base.unsqueeze(1) + noise.to(start)


def vqd(H, circuit: Circuit, k: int, beta=None, steps: int = 200, optimizer="lbfgs", lr: Optional[float] = None,
        diff_method: str = "backprop", sector: Optional[dict] = None, sector_weight=None,
        mapping: str = "jordan_wigner", init: Optional[torch.Tensor] = None, perturbation: float = 0.5,
        seed: int = 0, restarts: int = 1, state=None, tol: float = 1e-10,
        callback: Optional[Callable] = None) -> VQDResult:
    """The ``k`` lowest levels of ``H`` by Variational Quantum Deflation (see the module docstring).

    Level ℓ = 0, 1, …, k−1 trains ``circuit.weights`` (in place; they end at the last level's
    optimum) from its own start (``init[ℓ]``, or the circuit's angles plus N(0, ``perturbation``²)
    noise seeded by ``seed`` for ℓ >= 1) for at most ``steps`` optimizer steps, stopping when the
    deflated loss changes by less than ``tol``; the state found is then fixed and penalised by
    ``beta[j]`` in the later levels. ``restarts`` > 1 optimises each level from that many starts
    (fresh noise around the same base) and keeps the lowest deflated loss: deflated landscapes have
    local minima at other eigenstates. ``beta``: None (``1.5 × spectral_width_bound(H)``, above
    every gap), one number > 0, or k−1 of them (one per earlier level). ``sector`` /
    ``sector_weight`` / ``mapping``: stay in a symmetry sector (:func:`sector_hamiltonian`).
    ``optimizer``, ``lr`` and ``diff_method`` are those of :func:`tql.chem.vqe` (a name, an Optimizer
    class or a callable; not an instance, whose state would leak from one level into the next);
    ``state`` is an input state (default |0…0⟩). ``callback(level, step, loss)`` sees each
    deflated loss.
    """
    if not isinstance(circuit, Circuit):
        raise TypeError(f"vqd: circuit must be a tql.Circuit, got {type(circuit).__name__}")
    if circuit.num_parameters == 0:
        raise ValueError("vqd: the circuit has no trainable angles")
    _check_hamiltonian(H, circuit)
    n = circuit.n_wires
    k = _check_k(k, n)
    if isinstance(restarts, bool) or not isinstance(restarts, numbers.Integral) or restarts < 1:
        raise ValueError(f"vqd: restarts must be an int >= 1, got {restarts!r}")
    if isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("vqd: give the optimizer as a name, an Optimizer class or a callable params -> optimizer; "
                        "an instance would carry its state (moments, curvature) from one level into the next")
    if isinstance(state, torch.Tensor) and state.dim() == 2 and state.shape[0] != 1:
        raise ValueError(f"vqd: state must be one input state (shape (1, 2**n) or (2**n,)), got shape "
                         f"{tuple(state.shape)}")
    tol = _finite_real(tol, "tol", "vqd", minimum=0)
    check_diff_method(diff_method)
    real = torch.float64 if circuit.dtype == torch.complex128 else torch.float32
    betas = _check_beta(beta, k, H, real, circuit.device)
    if sector is not None:
        target_H, mus = sector_hamiltonian(H, n, sector, sector_weight, mapping)
    else:
        if sector_weight is not None:
            raise ValueError("vqd: sector_weight is given without a sector")
        _resolve_mapping(mapping)
        target_H, mus = H, {}
    check_givens_hamiltonian(circuit, H, "vqd")
    starts = _initial_weights(init, k, int(restarts), circuit, perturbation, seed)
    _prepared(circuit, state)                          # a wrong width or dtype fails here, before any level

    previous = torch.zeros(0, 2 ** n, dtype=circuit.dtype, device=circuit.device)
    histories, n_steps, weights, energies = [], [], [], []
    start_time = time.perf_counter()
    for level in range(k):
        beta_l = betas[:level]

        def loss_fn(previous=previous, beta_l=beta_l):
            loss, _, _ = vqd_loss(circuit, target_H, previous, beta_l, state, diff_method)
            return loss, None

        step_callback = None if callback is None else (lambda s, v, _, level=level: callback(level, s, v))
        best = None
        for start in starts[level]:
            with torch.no_grad():
                circuit.weights.copy_(start)
            last = {"v": math.inf}

            def stop(value, _, last=last):
                done = abs(last["v"] - value) < tol
                last["v"] = value
                return done

            history, steps_done, _, _, _ = _run(loss_fn, circuit, optimizer, lr, steps, stop, step_callback,
                                                {"state": state})
            if best is None or history[-1] < best[0][-1]:
                best = (history, steps_done, circuit.weights.detach().clone())
        history, steps_done, found = best
        with torch.no_grad():
            circuit.weights.copy_(found)
            psi = run_circuit(circuit, *_prepared(circuit, state))
            energies.append(expectation(psi, H)[0])
        previous = torch.cat([previous, psi.detach()])
        histories.append(history)
        n_steps.append(steps_done)
        weights.append(found)
    overlaps = (previous.conj() @ previous.T).abs() ** 2
    return VQDResult(torch.stack(energies), previous, torch.stack(weights), histories, n_steps, overlaps, betas,
                     time.perf_counter() - start_time, target_H, mus, circuit)
