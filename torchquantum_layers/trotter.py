"""Hamiltonian time evolution: Pauli rotations and Trotter–Suzuki product formulas.

``pauli_rotation(c, P, θ)`` appends exp(−iθ/2 · P) for a Pauli string P (PennyLane's PauliRot
convention): each X or Y factor is turned into Z (H; S† then H), a MultiRZ(θ) acts on the
support, and the basis change is undone. ``trotter(c, H, t, n_steps, order)`` appends an
approximation of exp(−iHt) built from them: order 1 is Lie–Trotter (the terms in order), order 2
Strang's symmetric splitting, every even order above Suzuki's recursion

    S₂ₖ(τ) = S₂ₖ₋₂(p τ)² S₂ₖ₋₂((1 − 4p) τ) S₂ₖ₋₂(p τ)²,  p = 1 / (4 − 4^{1/(2k−1)}),

each applied ``n_steps`` times with τ = t / n_steps; the error falls as n_steps^−order. The time
may be a fixed number, one trainable parameter shared by every rotation (``trainable=True``),
or a column of the input features (``input=col``: one time per sample). On the CPU engine the
whole evolution is one local program: the rotations are slots and the basis changes and parity
ladders merge into them and into index tables (see program_forms).
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from .circuit import Circuit, Input, Param
from .observables import Hamiltonian, PauliString
from .templates import CircuitLike, _circuit, _number, _pos_int

__all__ = ["pauli_rotation", "trotter", "product_formula", "hamiltonian_variational"]


def _pauli(pauli, what: str) -> PauliString:
    if isinstance(pauli, PauliString):
        return pauli
    if isinstance(pauli, str):
        try:
            return PauliString(pauli)
        except ValueError as err:
            raise ValueError(f"{what}: {err}") from None
    raise TypeError(f"{what}: expected a PauliString or its text (e.g. 'X0 Y2'), got {type(pauli).__name__}")


def _check_support(circuit: Circuit, wires, what: str, label) -> None:
    if wires and max(wires) >= circuit.n_wires:
        raise ValueError(f"{what}: {label} acts on wire {max(wires)} but the circuit has {circuit.n_wires} wires")


def _append_rotation(circuit: Circuit, pauli: PauliString, angle) -> None:
    """exp(−i angle/2 · P); ``angle`` a number, Param or Input (checked by the caller)."""
    wires = pauli.wires
    if not wires:
        return                      # the identity: a global phase
    _basis_change(circuit, pauli, undo=False)
    if len(wires) == 1:
        circuit.rz(wires[0], angle)
    elif len(wires) == 2:
        circuit.rzz(wires[0], wires[1], angle)
    else:
        circuit.multirz(wires, angle)
    _basis_change(circuit, pauli, undo=True)


# W per letter with W P W† = Z: X = H Z H, Y = (S H) Z (S H)†; applied in order (undone reversed)
_TO_Z = {"X": ("h",), "Y": ("sdg", "h"), "Z": ()}
_INVERSE = {"h": "h", "sdg": "s"}


def _basis_change(circuit: Circuit, pauli: PauliString, undo: bool) -> None:
    for w in pauli.wires:
        gates = _TO_Z[pauli.letter(w)]
        for name in ([_INVERSE[g] for g in reversed(gates)] if undo else gates):
            getattr(circuit, name)(w)


def _as_number(value, name: str, what: str, fixed: bool = True):
    """A NumPy real scalar or a 0-d real tensor as a Python float (others pass to ``_number``)."""
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.is_complex() or value.dtype == torch.bool:
            raise TypeError(f"{what}: {name} must be a real number or a 0-d real tensor, got a tensor of "
                            f"shape {tuple(value.shape)} and dtype {value.dtype}")
        if value.requires_grad and fixed:
            raise TypeError(f"{what}: {name} is a tensor that requires grad, and a fixed {name} would drop its "
                            f"gradient: use trainable=True (or input=column) for a differentiable {name}")
        return float(value.detach())
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__module__ == "numpy":
        return float(value)
    return value


def _angle_source(circuit: Circuit, value, trainable: bool, input, what: str, name: str):
    """A function scale -> angle: fixed ``scale * value``, or scale times one new trainable
    parameter initialised to ``value``, or scale times the input column ``input``."""
    if trainable and input is not None:
        raise ValueError(f"{what}: give trainable=True or input=column, not both")
    if input is not None:
        if isinstance(input, bool) or not isinstance(input, int) or input < 0:
            raise ValueError(f"{what}: input must be a feature column (an int >= 0), got {input!r}")
        return lambda s: Input(input, s)
    value = _number(_as_number(value, name, what, fixed=not trainable), name, what)
    if trainable:
        p = circuit.parameter(init=value)
        return lambda s: Param(p.index, s)
    return lambda s: s * value


def pauli_rotation(circuit: CircuitLike, pauli, angle: float = 0.0, *, trainable: bool = False,
                   input: Optional[int] = None, scale: float = 1.0) -> Circuit:
    """Append exp(−i θ/2 · P) for the Pauli string ``pauli`` (a PauliString or text such as
    'X0 Y2 Z3'); θ = ``scale * angle``, a new trainable parameter initialised to ``angle``
    (``trainable=True``) times ``scale``, or ``scale * x[:, input]``."""
    what = "pauli_rotation"
    circuit = _circuit(circuit, what)
    pauli = _pauli(pauli, what)
    _check_support(circuit, pauli.wires, what, str(pauli))
    scale = _number(_as_number(scale, "scale", what), "scale", what)
    source = _angle_source(circuit, angle, trainable, input, what, "angle")
    _append_rotation(circuit, pauli, source(scale))
    return circuit


def product_formula(n_terms: int, order: int = 1, n_steps: int = 1) -> list:
    """The Trotter–Suzuki sequence [(term index, fraction of the total time)] for ``n_terms``
    terms (exp(−iHt) ≈ Π exp(−i c_j f t P_j) in list order); consecutive entries of one term are
    merged (the last term of a symmetric step, the first of two steps)."""
    what = "product_formula"
    n_terms = _pos_int(n_terms, "n_terms", what)
    order = _pos_int(order, "order", what)
    n_steps = _pos_int(n_steps, "n_steps", what)
    if order > 1 and order % 2:
        raise ValueError(f"{what}: order must be 1 or even (Suzuki's recursion), got {order}")

    def step(k, tau):
        if k == 1:
            return [(j, tau) for j in range(n_terms)]
        if k == 2:
            half = [(j, tau / 2) for j in range(n_terms)]
            return half + half[::-1]
        p = 1 / (4 - 4 ** (1 / (k - 1)))
        outer = step(k - 2, p * tau)
        return outer + outer + step(k - 2, (1 - 4 * p) * tau) + outer + outer
    sequence = step(order, 1.0 / n_steps) * n_steps
    merged = []
    for j, f in sequence:
        if merged and merged[-1][0] == j:
            merged[-1] = (j, merged[-1][1] + f)
        else:
            merged.append((j, f))
    return merged


def _as_hamiltonian(h, what: str, where: str = "") -> Hamiltonian:
    if isinstance(h, str):
        try:
            h = Hamiltonian.from_string(h)
        except ValueError as err:
            raise ValueError(f"{what}{where}: {err}") from None
    elif isinstance(h, PauliString):
        h = Hamiltonian([h])
    if not isinstance(h, Hamiltonian):
        raise TypeError(f"{what}{where}: expected a Hamiltonian, a PauliString or their text, got {type(h).__name__}")
    if not h.is_hermitian:
        raise ValueError(f"{what}{where}: the Hamiltonian is not Hermitian (a complex coefficient): exp(-iHt) "
                         f"would not be unitary")
    return h


def _real_terms(h: Hamiltonian) -> list:
    """(real coefficient, PauliString) of the non-identity terms (identity: a global phase)."""
    return [(float(complex(c).real), p) for c, p in h.simplify().terms if p.wires]


def hamiltonian_variational(circuit: CircuitLike, groups, n_layers: int, init="small") -> Circuit:
    """The Hamiltonian variational ansatz: ``n_layers`` times exp(−i θ_{l,k} H_k) for each group
    H_k of ``groups`` in turn (Hamiltonians, Pauli strings or their text; the terms of one group
    should commute, as the X and the ZZ parts of a transverse-field Ising model do, for the layer
    to be that exponential exactly), one trainable θ per layer and group (``init`` as
    :meth:`Circuit.parameter`). QAOA is the case of two groups, cost and mixer."""
    what = "hamiltonian_variational"
    circuit = _circuit(circuit, what)
    if isinstance(groups, (str, PauliString, Hamiltonian)) or not hasattr(groups, "__iter__"):
        raise TypeError(f"{what}: groups must be a list of Hamiltonians (one per generator), got "
                        f"{type(groups).__name__}")
    hams = [_as_hamiltonian(h, what, f" (group {k})") for k, h in enumerate(groups)]
    if not hams:
        raise ValueError(f"{what}: groups must not be empty")
    n_layers = _pos_int(n_layers, "n_layers", what)
    for k, h in enumerate(hams):
        _check_support(circuit, h.wires, what, f"group {k}")
    terms = [_real_terms(h) for h in hams]
    for _ in range(n_layers):
        for group in terms:
            theta = circuit.parameter(init=init)
            for coeff, pauli in group:
                _append_rotation(circuit, pauli, Param(theta.index, 2 * coeff))
    return circuit


def trotter(circuit: CircuitLike, hamiltonian, time: float = 1.0, n_steps: int = 1, order: int = 1, *,
            trainable: bool = False, input: Optional[int] = None) -> Circuit:
    """Append a Trotter–Suzuki approximation of exp(−i H t) (module docstring): ``order`` 1 or
    even, ``n_steps`` repetitions; the time fixed, trainable (one parameter initialised to
    ``time``) or ``x[:, input]``. Identity terms (a global phase) are left out."""
    what = "trotter"
    circuit = _circuit(circuit, what)
    hamiltonian = _as_hamiltonian(hamiltonian, what)
    _check_support(circuit, hamiltonian.wires, what, "the Hamiltonian")
    terms = _real_terms(hamiltonian)
    sequence = product_formula(max(len(terms), 1), order, n_steps)
    source = _angle_source(circuit, time, trainable, input, what, "time")
    for j, fraction in (sequence if terms else ()):
        coeff, pauli = terms[j]
        angle = 2 * coeff * fraction
        if math.isfinite(angle) and angle != 0:
            _append_rotation(circuit, pauli, source(angle))
    return circuit
