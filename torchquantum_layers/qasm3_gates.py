"""Gates for the OpenQASM 3 reader (:mod:`~torchquantum_layers.qasm3_import`): stdgates.inc and ``U`` as
table gates (global phase included), program gate definitions (:class:`_Def`), and the transforms on
gate lists that modifiers need (``inv``, ``pow``, ``ctrl``/``negctrl``), down to table gates whose
angles are numbers or one scaled input (:func:`_final`).

A gate list holds ``("op", gate, wires, angles, adjoint)`` and ``("phase", angle)`` items."""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import gates as G
from .qasm3_angles import _plus, _single, _terms, _times


@dataclass(frozen=True)
class _Std:
    n_params: int
    n_qubits: int
    emit: object             # (angles, wires) -> items


@dataclass(frozen=True)
class _Def:
    name: str
    params: tuple
    qubits: tuple
    body: tuple
    line: int
    depth: int
    size: int                # at most this many items per call (the expansion limit is checked first)

    @property
    def n_params(self):
        return len(self.params)

    @property
    def n_qubits(self):
        return len(self.qubits)


def _op(gate, wires, angles=()):
    return ("op", gate, tuple(wires), tuple(angles), False)


def _same(gate) -> _Std:
    return _Std(gate.n_params, gate.n_wires, lambda v, w: [_op(gate, w, v)])


def _with_phase(gate) -> _Std:
    """stdgates' u3 / u2: ``gphase(-(φ+λ)/2); U(...)``, the last two angles being φ and λ."""
    return _Std(gate.n_params, 1, lambda v, w: [("phase", _times(_plus(v[-2], v[-1]), -0.5)), _op(gate, w, v)])


# stdgates.inc (OpenQASM 3 specification) in table gates, global phase included
_STDGATES = {
    "p": _same(G.P), "x": _same(G.X), "y": _same(G.Y), "z": _same(G.Z), "h": _same(G.H), "s": _same(G.S),
    "sdg": _same(G.SDG), "t": _same(G.T), "tdg": _same(G.TDG), "sx": _same(G.SX), "rx": _same(G.RX),
    "ry": _same(G.RY), "rz": _same(G.RZ), "cx": _same(G.CNOT), "cy": _same(G.CY), "cz": _same(G.CZ),
    "cp": _same(G.CP), "crx": _same(G.CRX), "cry": _same(G.CRY), "crz": _same(G.CRZ), "ch": _same(G.CH),
    "swap": _same(G.SWAP), "ccx": _same(G.TOFFOLI), "cswap": _same(G.CSWAP),
    # gate cu(θ, φ, λ, γ) a, b { p(γ) a; ctrl @ U(θ, φ, λ) a, b; }
    "cu": _Std(4, 2, lambda v, w: [_op(G.P, w[:1], v[3:]), _op(G.CU3, w, v[:3])]),
    "CX": _same(G.CNOT), "phase": _same(G.P), "cphase": _same(G.CP), "id": _same(G.I), "u1": _same(G.P),
    "u2": _with_phase(G.U2), "u3": _with_phase(G.U3),
}
_BUILTIN = {"U": _same(G.U3)}

_TABLE_CONTROLLED = {(g.target.name, g.n_controls): g for g in G.GATES.values() if g.n_controls}
_CONTROLLED: dict = {}


def _ctl(gate, k: int):
    """``gate`` under k more controls: the table's gate where it has one (CNOT, TOFFOLI, CCZ ...)."""
    base, c = (gate.target, gate.n_controls + k) if gate.n_controls else (gate, k)
    key = (base.name, c)
    if key not in _CONTROLLED:
        _CONTROLLED[key] = _TABLE_CONTROLLED.get(key) or G.controlled(base, c)
    return _CONTROLLED[key]


def _estimate(target, mods) -> int:
    """A bound on the number of items a call expands to (2 per stdgates gate: u2, u3 and cu are two),
    checked before expanding, so a definition doubling itself 40 times over fails at once."""
    n = 1 if target is None else target.size if isinstance(target, _Def) else 2
    for kind, k in reversed(mods):
        if kind == "pow":
            n *= abs(k)
        elif kind == "negctrl":
            n += 2 * k
    return n


def _inverse(items) -> list:
    out = []
    for it in reversed(items):
        out.append(("phase", _times(it[1], -1.0)) if it[0] == "phase" else it[:4] + (not it[4],))
    return out


def _controlled(items, controls: tuple, negative: bool) -> list:
    """``ctrl(k) @`` (``negctrl``: between X flips): a global phase becomes a phase on the controls."""
    k = len(controls)
    flips = [_op(G.X, (w,)) for w in controls] if negative else []
    out = list(flips)
    for it in items:
        if it[0] == "phase":
            out.append(("op", _ctl(G.P, k - 1) if k > 1 else G.P, controls, (it[1],), False))
        else:
            _, gate, wires, angles, adjoint = it
            out.append(("op", _ctl(gate, k), controls + wires, angles, adjoint))
    return out + flips


# gates whose one angle adds up: G(a) G(b) = G(a + b), so a sum of terms is one gate per term
_ADDITIVE = {"P", "RX", "RY", "RZ", "RXX", "RYY", "RZZ", "RZX", "MULTIRZ", "SINGLEEXCITATION",
             "DOUBLEEXCITATION"}
_DAGGER = {"S": "SDG", "SDG": "S", "T": "TDG", "TDG": "T", "SX": "SXDG", "SXDG": "SX"}


def _final(gate, wires, angles, adjoint) -> list:
    """(gate, wires, angles) with no adjoint flag and every angle a number or one scaled input."""
    base, c = (gate.target, gate.n_controls) if gate.n_controls else (gate, 0)

    def on(g):
        return _ctl(g, c) if c else g
    if adjoint and not gate.self_inverse:
        if base.name in _DAGGER:
            gate = on(G.GATES[_DAGGER[base.name]])
        elif base.name in _ADDITIVE:
            angles = tuple(_times(a, -1.0) for a in angles)
        elif base.name == "U3":                     # U3(θ,φ,λ)† = U3(-θ,-λ,-φ), phase included
            angles = (_times(angles[0], -1.0), _times(angles[2], -1.0), _times(angles[1], -1.0))
        elif base.name == "U2":                     # U2(φ,λ) = U3(π/2,φ,λ)
            base, gate = G.U3, on(G.U3)
            angles = (-math.pi / 2, _times(angles[1], -1.0), _times(angles[0], -1.0))
        else:   # pragma: no cover - every gate the reader emits is handled above
            raise AssertionError(gate.name)
    if all(_single(a) for a in angles):
        return [(gate, wires, angles)]
    if base.name in _ADDITIVE:
        return [(gate, wires, (t,)) for t in _terms(angles[0])]
    if base.name == "U2":
        base, angles = G.U3, (math.pi / 2,) + tuple(angles)
    if base.name == "U3":                           # U3(θ,φ,λ) = P(φ) RY(θ) P(λ) exactly
        theta, phi, lam = angles
        return [x for g, a in ((G.P, lam), (G.RY, theta), (G.P, phi)) for x in _final(on(g), wires, (a,), False)]
    raise AssertionError(gate.name)   # pragma: no cover
