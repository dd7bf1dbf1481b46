"""Particle-number and spin observables of the chemistry conventions, as qubit Hamiltonians.

Spin orbitals are interleaved, mode ``2p`` = α (S_z = +½) and mode ``2p + 1`` = β (S_z = −½) of
spatial orbital p; occupied = |1⟩ under Jordan–Wigner, other encodings through
:func:`~torchquantum_layers.chem.fermion.fermion_to_qubit`. In ladder operators::

    N   = Σ_j a†_j a_j
    S_z = ½ Σ_p (a†_{2p} a_{2p} − a†_{2p+1} a_{2p+1})
    S_+ = Σ_p a†_{2p} a_{2p+1}            (β → α),    S_− = S_+†
    S²  = S_− S_+ + S_z + S_z²            (eigenvalues s(s + 1), s = 0, ½, 1, …)

Each builder returns the :class:`~torchquantum_layers.observables.Hamiltonian` on ``n_qubits``
qubits (dimensionless: N counts electrons, S_z and S² are in units of ħ and ħ²). They commute
with every molecular Hamiltonian of :mod:`torchquantum_layers.chem` built with the same mapping.
Results are cached per (kind, n_qubits, mapping): Hamiltonians are immutable.
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import torch

from .fermion import MAX_MODES, FermionOperator, _resolve_mapping, fermion_to_qubit

__all__ = ["particle_number", "spin_z", "spin_plus", "spin_minus", "spin_squared", "spin_and_number",
           "SpinNumber"]


def _n_qubits(n_qubits, what: str, even: bool) -> int:
    if isinstance(n_qubits, bool) or not isinstance(n_qubits, numbers.Integral):
        raise TypeError(f"{what}: n_qubits must be an int, got {n_qubits!r}")
    n = int(n_qubits)
    if not 1 <= n <= MAX_MODES:
        raise ValueError(f"{what}: n_qubits must be in 1..{MAX_MODES}, got {n}")
    if even and n % 2:
        raise ValueError(f"{what}: spin orbitals come in (α, β) pairs, so n_qubits must be even, got {n}")
    return n


def _number(p: int) -> FermionOperator:
    return FermionOperator(((p, 1), (p, 0)))


def _sz_fermion(n: int) -> FermionOperator:
    out = FermionOperator()
    for p in range(n // 2):
        out = out + 0.5 * _number(2 * p) - 0.5 * _number(2 * p + 1)
    return out


def _splus_fermion(n: int) -> FermionOperator:
    out = FermionOperator()
    for p in range(n // 2):
        out = out + FermionOperator(((2 * p, 1), (2 * p + 1, 0)))
    return out


@functools.lru_cache(maxsize=64)
def _build(kind: str, n: int, mapping: str):
    if kind == "number":
        op = FermionOperator.number(n_modes=n)
    elif kind == "spin_z":
        op = _sz_fermion(n)
    elif kind == "spin_plus":
        op = _splus_fermion(n)
    elif kind == "spin_minus":
        op = _splus_fermion(n).dagger()
    else:                                   # spin_squared
        sp, sz = _splus_fermion(n), _sz_fermion(n)
        op = sp.dagger() * sp + sz + sz * sz
    return fermion_to_qubit(op, mapping, n_modes=n)


def particle_number(n_qubits: int, mapping: str = "jordan_wigner"):
    """``N = Σ_j a†_j a_j`` on ``n_qubits`` spin orbitals (JW: ``Σ_j (1 − Z_j)/2``)."""
    return _build("number", _n_qubits(n_qubits, "particle_number", even=False), _resolve_mapping(mapping))


def spin_z(n_qubits: int, mapping: str = "jordan_wigner"):
    """``S_z = ½ (N_α − N_β)``, α on even qubits (JW: ``Σ_j (−1)^{j+1} Z_j / 4``)."""
    return _build("spin_z", _n_qubits(n_qubits, "spin_z", even=True), _resolve_mapping(mapping))


def spin_plus(n_qubits: int, mapping: str = "jordan_wigner"):
    """``S_+ = Σ_p a†_{2p} a_{2p+1}`` (raises S_z by 1; not Hermitian: complex coefficients)."""
    return _build("spin_plus", _n_qubits(n_qubits, "spin_plus", even=True), _resolve_mapping(mapping))


def spin_minus(n_qubits: int, mapping: str = "jordan_wigner"):
    """``S_− = S_+† = Σ_p a†_{2p+1} a_{2p}`` (lowers S_z by 1; not Hermitian)."""
    return _build("spin_minus", _n_qubits(n_qubits, "spin_minus", even=True), _resolve_mapping(mapping))


def spin_squared(n_qubits: int, mapping: str = "jordan_wigner"):
    """Total spin ``S² = S_− S_+ + S_z + S_z²``: 0 on singlets, ¾ on doublets, 2 on triplets."""
    return _build("spin_squared", _n_qubits(n_qubits, "spin_squared", even=True), _resolve_mapping(mapping))


@dataclass
class SpinNumber:
    """⟨N⟩, ⟨S_z⟩ and ⟨S²⟩ of a state (0-d tensors, or ``(B,)`` for a batch of B > 1 states).
    ``spin`` is the s of ``⟨S²⟩ = s(s + 1)`` (exact on an S² eigenstate, an average otherwise)."""
    n_electrons: torch.Tensor
    spin_z: torch.Tensor
    spin_squared: torch.Tensor

    @property
    def spin(self) -> torch.Tensor:
        return (torch.sqrt(1 + 4 * self.spin_squared.clamp(min=0)) - 1) / 2

    def __repr__(self) -> str:
        def fmt(t):
            return f"{float(t):.6g}" if t.dim() == 0 else str([round(v, 6) for v in t.tolist()])
        return (f"SpinNumber(n_electrons={fmt(self.n_electrons)}, spin_z={fmt(self.spin_z)}, "
                f"spin_squared={fmt(self.spin_squared)})")


def spin_and_number(circuit_or_state, n_qubits=None, mapping: str = "jordan_wigner", x=None) -> SpinNumber:
    """⟨N⟩, ⟨S_z⟩, ⟨S²⟩ of a state: a :class:`~torchquantum_layers.Circuit` (run from |0…0⟩, or on
    ``x``) or a state tensor ``(2**n,)`` / ``(B, 2**n)``. ``n_qubits`` (optional) is checked against
    the state's width. Use it to see whether a VQE result stayed in the molecule's sector: a
    closed-shell ground state has N = n_electrons, S_z = 0 and S² = 0."""
    from ..circuit import Circuit
    from ..observables import expectation
    what = "spin_and_number"
    if isinstance(circuit_or_state, Circuit):
        with torch.no_grad():
            state = circuit_or_state(x=x)
    elif isinstance(circuit_or_state, torch.Tensor):
        if x is not None:
            raise ValueError(f"{what}: x applies only to a circuit, not to a state tensor")
        state = circuit_or_state
    else:
        raise TypeError(f"{what}: expected a tql.Circuit or a state tensor, got {type(circuit_or_state).__name__}")
    if not state.is_complex() or state.dim() not in (1, 2):
        raise ValueError(f"{what}: a state must be a complex tensor of shape (2**n,) or (B, 2**n), got "
                         f"{tuple(state.shape)} {state.dtype}")
    width = math.log2(state.shape[-1]) if state.shape[-1] > 0 else 0.5
    if width != int(width) or width < 1:
        raise ValueError(f"{what}: the state's last dimension {state.shape[-1]} is not 2**n for some n >= 1")
    width = int(width)
    if n_qubits is not None:
        n_qubits = _n_qubits(n_qubits, what, even=True)
        if n_qubits != width:
            raise ValueError(f"{what}: n_qubits={n_qubits} but the state has {width} qubits "
                             f"(shape {tuple(state.shape)})")
    n = _n_qubits(width, what, even=True)
    mapping = _resolve_mapping(mapping)
    values = expectation(state, [_build(k, n, mapping) for k in ("number", "spin_z", "spin_squared")])
    if values.dim() == 2 and values.shape[0] == 1:
        values = values[0]
    return SpinNumber(values[..., 0], values[..., 1], values[..., 2])
