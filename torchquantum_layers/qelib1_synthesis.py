"""Exact qelib1.inc sequences for the table's gates, the gate algebra behind
:func:`~torchquantum_layers.qasm_writer.to_qasm`: :func:`_sequence` (a gate's qelib1 steps, global
phase included) and :func:`_dagger` (a step's adjoint), with the synthesis of what qelib1 has no
statement for: multi-controlled gates (Barenco et al. 1995, see the comment above
:func:`_controlled1`), DIAGONALUNITARY (Walsh–Hadamard) and QUBITUNITARY (Givens rotations, up to
:data:`MAX_SYNTHESIS_WIRES` wires).

Separate from the writer as it knows nothing of circuits, registers or text: steps are
``(name, local wires, angles)`` tuples computed from angles and NumPy matrices. :func:`_sequence`
and :func:`_dagger` live here, not in the writer, as the synthesis calls them (a controlled
multi-wire gate controls each step of its own sequence) and :func:`_sequence` calls the synthesis.
"""
from __future__ import annotations

import cmath
import functools
import math
from typing import Optional

import numpy as np
import torch

from . import gates as G


# qelib1 statements of the table's gates, and the adjoints of qelib1 statements
_DIRECT = {"I": "id", "X": "x", "Y": "y", "Z": "z", "H": "h", "S": "s", "SDG": "sdg", "T": "t",
           "TDG": "tdg", "SX": "sx", "SXDG": "sxdg", "P": "p", "RX": "rx", "RY": "ry", "RZ": "rz",
           "U2": "u2", "U3": "u3", "SWAP": "swap", "RXX": "rxx", "RZZ": "rzz"}
# controlled table gates by (target, number of controls)
_CONTROLLED = {("X", 1): "cx", ("X", 2): "ccx", ("X", 3): "c3x", ("X", 4): "c4x", ("Y", 1): "cy",
               ("Z", 1): "cz", ("H", 1): "ch", ("SWAP", 1): "cswap", ("P", 1): "cp", ("RX", 1): "crx",
               ("RY", 1): "cry", ("RZ", 1): "crz", ("U3", 1): "cu3", ("SX", 1): "csx",
               ("SX", 3): "c3sqrtx"}
_MCX = {2: "cx", 3: "ccx", 4: "c3x", 5: "c4x"}
_SELF_INVERSE = {"id", "x", "y", "z", "h", "cx", "cy", "cz", "ch", "swap", "ccx", "cswap", "c3x", "c4x"}
_DAGGER = {"s": "sdg", "sdg": "s", "t": "tdg", "tdg": "t", "sx": "sxdg", "sxdg": "sx"}
_NEGATED = {"rx", "ry", "rz", "p", "cp", "crx", "cry", "crz", "rxx", "rzz"}
_HALF_PI = math.pi / 2
_QUARTER_PI = math.pi / 4
# a QubitUnitary is read as diagonal, or as a 1-wire block controlled by its other wires, where the
# entries outside that form are this small (the stored matrix is the polar factor of the given
# one, so its exact zeros and ones may carry rounding); the program is then off by at most this
DATA_FORM_ATOL = 1e-12
# a QubitUnitary of another form is synthesised (_two_level) up to this many wires: its program
# grows as ~4^k k² (60 921 statements for 6 wires)
MAX_SYNTHESIS_WIRES = 6


def _sequence(gate: G.Gate, k: int, v: tuple, data=None) -> list:
    """qelib1 steps (name, local wires, angles) whose product is exactly the gate's matrix
    (``data``: the matrix of a QubitUnitary, the diagonal of a DiagonalUnitary, as NumPy)."""
    if gate.n_controls:
        key = (gate.target.name, gate.n_controls)
        if G.GATES.get(gate.target.name) is not gate.target:
            raise ValueError(f"to_qasm: {gate.name} (a {gate.target.name} with {gate.n_controls} control(s)) "
                             f"has no OpenQASM 2.0 (qelib1.inc) form")
        if key in _CONTROLLED:
            return [(_CONTROLLED[key], tuple(range(k)), v)]
        if key == ("ROT", 1):   # controlled RZ(ω)RY(θ)RZ(φ) is the product of the controlled factors
            return [("crz", (0, 1), (v[0],)), ("cry", (0, 1), (v[1],)), ("crz", (0, 1), (v[2],))]
        return _controlled_table_gate(gate.target, gate.n_controls, k, v)
    if G.GATES.get(gate.name) is not gate:
        raise ValueError(f"to_qasm: {gate.name} is not a gate of the table, so it has no OpenQASM 2.0 form")
    name = gate.name
    if name in _DIRECT:
        return [(_DIRECT[name], tuple(range(k)), v)]
    if name == "ROT":
        return [("rz", (0,), (v[0],)), ("ry", (0,), (v[1],)), ("rz", (0,), (v[2],))]
    if name == "ISWAP":
        return [("s", (0,), ()), ("s", (1,), ()), ("h", (0,), ()), ("cx", (0, 1), ()), ("cx", (1, 0), ()),
                ("h", (1,), ())]
    if name == "RYY":   # RX(π/2)† Z RX(π/2) = Y on both wires
        return [("rx", (0,), (_HALF_PI,)), ("rx", (1,), (_HALF_PI,)), ("rzz", (0, 1), v),
                ("rx", (1,), (-_HALF_PI,)), ("rx", (0,), (-_HALF_PI,))]
    if name == "RZX":
        return [("h", (1,), ()), ("rzz", (0, 1), v), ("h", (1,), ())]
    if name == "SINGLEEXCITATION":
        # G(θ) = exp(iθ/4 (XY − YX)) and XY, YX commute; S X S† = Y turns each factor into an RXX
        half = v[0] / 2
        return [("sdg", (1,), ()), ("rxx", (0, 1), (-half,)), ("s", (1,), ()),
                ("sdg", (0,), ()), ("rxx", (0, 1), (half,)), ("s", (0,), ())]
    if name == "MULTIRZ":   # the CX ladder puts the parity of all wires on the last one
        return _multirz(tuple(range(k)), v[0])
    if name == "MULTICONTROLLEDX":
        return _controlled1(tuple(range(k - 1)), k - 1, ("x", ()))
    if name == "DOUBLEEXCITATION":
        # the CNOTs and X map |0011> -> |0111>, |1100> -> |1111> (every other basis state to one
        # outside that pair), where the Givens rotation is an RY(θ) on wire 0 controlled by 1, 2, 3:
        # RY(θ/2), C3X, RY(-θ/2), C3X is RY(θ) where the controls are all 1 and the identity elsewhere
        into = [("cx", (0, 1), ()), ("cx", (0, 2), ()), ("cx", (0, 3), ()), ("x", (1,), ())]
        half = v[0] / 2
        return into + [("ry", (0,), (half,)), ("c3x", (1, 2, 3, 0), ()), ("ry", (0,), (-half,)),
                       ("c3x", (1, 2, 3, 0), ())] + into[::-1]
    if gate.takes_data and data is not None:
        data = np.asarray(data, dtype=np.complex128)
        steps = _qubit_unitary(np.diag(data) if gate.kind == "diagonal" else data)
        if steps is not None:
            return steps
        raise ValueError(f"to_qasm: {name} on {k} wire(s) is neither diagonal nor one 1-wire block "
                         f"controlled by its other wires (within {DATA_FORM_ATOL:g}), and a general "
                         f"unitary is written for at most {MAX_SYNTHESIS_WIRES} wires")
    raise ValueError(f"to_qasm: {name} on {k} wire(s) has no OpenQASM 2.0 (qelib1.inc) form")


def _multirz(wires: tuple, theta: float) -> list:
    ladder = [("cx", (wires[j], wires[j + 1]), ()) for j in range(len(wires) - 1)]
    return ladder + [("rz", wires[-1:], (theta,))] + ladder[::-1]


def _dagger(step, gate_name: str) -> list:
    name, local, v = step
    if name in _SELF_INVERSE:
        return [step]
    if name in _DAGGER:
        return [(_DAGGER[name], local, v)]
    if name in _NEGATED:
        return [(name, local, tuple(-x for x in v))]
    if name in ("u3", "cu3"):   # U3(θ,φ,λ)† = U3(−θ,−λ,−φ), phase included, so controlled too
        return [(name, local, (-v[0], -v[2], -v[1]))]
    if name == "u2":
        return [("u3", local, (-_HALF_PI, -v[1], -v[0]))]
    if name == "csx":           # SX = e^{iπ/4} RX(π/2): the phase lands on the control
        return [("p", local[:1], (-math.pi / 4,)), ("crx", local, (-_HALF_PI,))]
    if name == "c3sqrtx":       # SX† = X SX (SX² = X), and the two controlled factors commute
        return [("c3x", local, ()), step]
    raise ValueError(f"to_qasm: the adjoint of {gate_name} ({name}) has no OpenQASM 2.0 (qelib1.inc) form")


# ---------------------------------------------------------------------------------------------
# exact multi-controlled gates (Barenco et al., "Elementary gates for quantum computation", 1995)
#
# A 1-wire gate is ``(name, angles)``: a qelib1 name of _ONE_WIRE, or ``("u", (θ, φ, λ, α))`` for
# e^{iα} U3(θ, φ, λ), any U(2) matrix. ``_controlled1(controls, target, g)`` writes g on ``target``
# controlled by all of ``controls``, global phase included:
#   0 controls   the gate itself (e^{iα} U3 as U3(θ, φ + 2α, λ) then RZ(−2α): e^{iα} = RZ(−2α) P(2α));
#   1 control    its qelib1 controlled gate (cx cy cz ch cp crx cry crz cu3 csx; S, T... as cp);
#                otherwise cu3 with the phase e^{iα} as p(α) on the control, as qelib1's cu3 is
#                the controlled U3 of the table (phase convention included);
#   k controls   C^k X as cx ccx c3x c4x up to 4 controls, C^3 SX as c3sqrtx; Z, Y, H, whose
#                eigenvalues are ±1 like X's, as W C^k X W† (Z = H X H, Y = S X S†,
#                H = RY(−π/4) X RY(π/4)); SX = H S H and SXDG = H SDG H as H C^k S H, H C^k SDG H;
#                anything else by Lemma 7.5: with V² = U,
#                C^k U = [C_{c_k} V] [C^{k−1} X: c_1..c_{k−1} → c_k] [C_{c_k} V†] [that C^{k−1} X]
#                        [C^{k−1} V: c_1..c_{k−1} → t]
#                (all of c_1..c_{k−1} and c_k: V V = U; c_k alone: V V† = I; c_1..c_{k−1} alone:
#                V† V = I, as c_k is flipped there and back). V is the half angle of a rotation or
#                phase, SX for X, S for Z, T for S, else the principal square root; any V with V² = U
#                makes it exact.
# C^m X (m ≥ 5) with wires of the gate free to borrow in any state ("dirty"): Lemma 7.2, 4(m−2)
# Toffolis on m−2 borrowed wires; or Lemma 7.3 / Corollary 7.4, one borrowed wire a:
# [C^{m1} X: g1 → a] [C^{m2+1} X: g2, a → t] twice (t flips by g2·(a ⊕ g1) ⊕ g2·a = g1·g2, a is
# restored), each part borrowing wires of the other part; whichever writes fewer steps
# (_mcx_plan). A bare MULTICONTROLLEDX borrows nothing: Lemma 7.5 with V = SX, whose inner
# C^{m−1} X then borrows the target.
# Gate counts (qelib1 statements; c3x, c4x and c3sqrtx count one each), k = 1..10 controls:
#   C^k RY                         1, 5, 9, 13, 17, 27, 37, 47, 69, 91
#   MULTICONTROLLEDX on k+1 wires  1, 1, 1, 1, 20, 30, 40, 50, 72, 94
#   (k = 25: 1 213; k = 100: 61 675; k = 200: 267 355)
# Each level of Lemma 7.5 adds a constant and two C^{k−1} X that borrow a wire, and those grow at
# most linearly (Lemma 7.3 halves whose parts borrow the other half, Lemma 7.2), so both grow
# quadratically in k, below ~8k² (Barenco's Corollary 7.6). Lemma 7.5 with its C^{k−1} X written
# by the same recursion, borrowing nothing, would grow as ~3^k.
# A controlled multi-wire table gate controls each qelib1 step of the gate's own exact sequence
# (a controlled step is a multi-controlled 1-wire gate with the union of the controls; swap, cswap,
# rzz, rxx are first written as cx-conjugated steps); in a conjugation A B A† only B takes the
# controls (where they are not all 1, A and A† cancel). Of the gate's candidate sequences (ISWAP
# also as RXX(−π/2) RYY(−π/2), SINGLEEXCITATION as a CX-conjugated controlled RY, DOUBLEEXCITATION
# with its C^3 RY(θ) as one step) the shortest controlled one is written.
_ONE_WIRE = {"id", "x", "y", "z", "h", "s", "sdg", "t", "tdg", "sx", "sxdg", "p", "rx", "ry", "rz", "u2", "u3"}
_ONE_CONTROL = {"x": "cx", "y": "cy", "z": "cz", "h": "ch", "p": "cp", "rx": "crx", "ry": "cry", "rz": "crz",
                "u3": "cu3", "sx": "csx"}
_ONE_CONTROL_BASE = {c: g for g, c in _ONE_CONTROL.items()}
_PHASE_OF = {"s": _HALF_PI, "sdg": -_HALF_PI, "t": _QUARTER_PI, "tdg": -_QUARTER_PI}
# W X W† = the gate: (W† as steps on the target, before C^k X; W after it)
_LIKE_X = {"z": ((("h", ()),), (("h", ()),)), "y": ((("sdg", ()),), (("s", ()),)),
           "h": ((("ry", (_QUARTER_PI,)),), (("ry", (-_QUARTER_PI,)),))}
_LIKE_S = {"sx": "s", "sxdg": "sdg"}    # H S H = SX, H SDG H = SXDG
# square roots with a closed form; the adjoints of the 1-wire gates
_HALF = {"x": ("sx", ()), "z": ("s", ()), "s": ("t", ()), "sdg": ("tdg", ()), "t": ("p", (math.pi / 8,)),
         "tdg": ("p", (-math.pi / 8,)), "id": ("id", ())}
_ADJOINT1 = {"s": "sdg", "sdg": "s", "t": "tdg", "tdg": "t", "sx": "sxdg", "sxdg": "sx"}


def _wrap(x: float) -> float:
    """``x`` in [-π, π], for angles whose period is 2π (U3's φ and λ, P's λ)."""
    return math.remainder(x, 2 * math.pi)


def _u3_matrix(theta, phi, lam):
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array([[c, -cmath.exp(1j * lam) * s], [cmath.exp(1j * phi) * s, cmath.exp(1j * (phi + lam)) * c]])


def _matrix1(g) -> np.ndarray:
    """The 2×2 matrix of a 1-wire gate (the table's matrices, phase included)."""
    name, v = g
    if name == "u":
        return cmath.exp(1j * v[3]) * _u3_matrix(*v[:3])
    if name == "u3":
        return _u3_matrix(*v)
    if name == "u2":
        return _u3_matrix(_HALF_PI, *v)
    if name in ("p", "rz"):
        d = [1, cmath.exp(1j * v[0])] if name == "p" else [cmath.exp(-0.5j * v[0]), cmath.exp(0.5j * v[0])]
        return np.diag(d).astype(complex)
    if name in ("rx", "ry"):
        c, s = math.cos(v[0] / 2), math.sin(v[0] / 2)
        return np.array([[c, -1j * s], [-1j * s, c]]) if name == "rx" else np.array([[c, -s], [s, c]], complex)
    if name in _PHASE_OF:
        return _matrix1(("p", (_PHASE_OF[name],)))
    fixed = {"id": [[1, 0], [0, 1]], "x": [[0, 1], [1, 0]], "y": [[0, -1j], [1j, 0]], "z": [[1, 0], [0, -1]],
             "h": np.array([[1, 1], [1, -1]]) / math.sqrt(2), "sx": np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2,
             "sxdg": np.array([[1 - 1j, 1 + 1j], [1 + 1j, 1 - 1j]]) / 2}
    return np.asarray(fixed[name], dtype=complex)


def _zyz(m: np.ndarray):
    """``("u", (θ, φ, λ, α))`` with e^{iα} U3(θ, φ, λ) = m, a 2×2 unitary, to rounding: every
    angle is read off the larger entries (a tiny entry's phase is noise, and multiplies nothing)."""
    a, b, c, d = complex(m[0, 0]), complex(m[0, 1]), complex(m[1, 0]), complex(m[1, 1])
    theta = 2 * math.atan2(abs(c), abs(a))
    alpha = cmath.phase(a) if a else 0.0
    phi = cmath.phase(c) - alpha if c else 0.0
    # e^{i(α+φ+λ)} is d's phase where |d| = |a| is the larger, else −b's phase is e^{i(α+λ)}
    lam = cmath.phase(d) - alpha - phi if abs(a) >= abs(c) else cmath.phase(-b) - alpha
    return "u", (theta, _wrap(phi), _wrap(lam), alpha)


def _principal_sqrt(m: np.ndarray) -> np.ndarray:
    """The principal square root of a 2×2 unitary m = e^{iα}(cos β I − i sin β n·σ): eigenvalues
    e^{ia±} (a± = α ∓ β, taken in [−π, π]) become e^{ia±/2}, on the same eigenvectors."""
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    alpha = cmath.phase(det) / 2
    w = m * cmath.exp(-1j * alpha)
    cos_b = ((w[0, 0] + w[1, 1]) / 2).real
    r = 1j * (w - cos_b * np.eye(2))            # sin β n·σ
    vec = np.array([((r[0, 1] + r[1, 0]) / 2).real, ((r[1, 0] - r[0, 1]) / 2j).real, ((r[0, 0] - r[1, 1]) / 2).real])
    s = float(np.linalg.norm(vec))
    beta = math.atan2(s, cos_b)
    nx, ny, nz = vec / s if s > 0 else (0.0, 0.0, 1.0)
    n_sigma = np.array([[nz, nx - 1j * ny], [nx + 1j * ny, -nz]])
    a_plus, a_minus = _wrap(alpha - beta), _wrap(alpha + beta)   # on n·σ = +1, −1
    mean, half = (a_plus + a_minus) / 4, (a_minus - a_plus) / 4
    return cmath.exp(1j * mean) * (math.cos(half) * np.eye(2) - 1j * math.sin(half) * n_sigma)


def _sqrt1(g):
    """A 1-wire gate V with V² = g, exactly: a closed form where there is one, else numeric."""
    name, v = g
    if name in _HALF:
        return _HALF[name]
    if name in ("p", "rx", "ry", "rz"):
        return name, (v[0] / 2,)
    return _zyz(_principal_sqrt(_matrix1(g)))


def _adjoint1(g):
    name, v = g
    if name in _ADJOINT1:
        return _ADJOINT1[name], v
    if name in ("p", "rx", "ry", "rz"):
        return name, (-v[0],)
    if name == "u3":
        return name, (-v[0], -v[2], -v[1])
    if name == "u2":
        return "u3", (-_HALF_PI, -v[1], -v[0])
    if name == "u":
        return name, (-v[0], -v[2], -v[1], -v[3])
    return g                                      # id, x, y, z, h


def _controlled1(controls: tuple, target: int, g, free: tuple = ()) -> list:
    """qelib1 steps of the 1-wire gate ``g`` on ``target`` controlled by all of ``controls``,
    exactly; ``free``: other wires of the gate, which a C^m X may borrow in any state."""
    name, v = g
    k = len(controls)
    if name == "id":
        return [] if k else [("id", (target,), ())]
    if k == 0:
        if name != "u":
            return [(name, (target,), v)]
        theta, phi, lam, alpha = v
        return ([("u3", (target,), (theta, _wrap(phi + 2 * alpha), lam))]
                + ([("rz", (target,), (-2 * alpha,))] if alpha else []))
    wires = tuple(controls) + (target,)
    if name == "x":
        return _mcx(tuple(controls), target, tuple(free))
    if k == 1:
        control = controls[0]
        if name in _ONE_CONTROL:
            return [(_ONE_CONTROL[name], wires, v)]
        if name in _PHASE_OF:
            return [("cp", wires, (_PHASE_OF[name],))]
        if name == "u2":
            return [("cu3", wires, (_HALF_PI,) + tuple(v))]
        if name == "sxdg":      # SX† = e^{-iπ/4} RX(-π/2)
            return [("p", (control,), (-_QUARTER_PI,)), ("crx", wires, (-_HALF_PI,))]
        theta, phi, lam, alpha = v
        phase = [("p", (control,), (alpha,))] if alpha else []
        if theta == 0:          # a diagonal: U3(0, φ, λ) = P(φ + λ)
            return phase + [("cp", wires, (_wrap(phi + lam),))]
        return phase + [("cu3", wires, (theta, phi, lam))]
    if name == "sx" and k == 3:
        return [("c3sqrtx", wires, ())]
    if name in _LIKE_X:
        before, after = _LIKE_X[name]
        return ([(n, (target,), a) for n, a in before] + _controlled1(controls, target, ("x", ()), free)
                + [(n, (target,), a) for n, a in after])
    if name in _LIKE_S:
        return [("h", (target,), ())] + _controlled1(controls, target, (_LIKE_S[name], ()), free) + \
               [("h", (target,), ())]
    return _halves(tuple(controls), target, g, tuple(free))


def _halves(controls: tuple, target: int, g, free: tuple) -> list:
    """Lemma 7.5: C^k g = [C_{c_k} V] [C^{k−1} X → c_k] [C_{c_k} V†] [C^{k−1} X → c_k] [C^{k−1} V]."""
    half = _sqrt1(g)
    rest, last = controls[:-1], controls[-1]
    flip = _controlled1(rest, last, ("x", ()), free + (target,))
    return (_controlled1((last,), target, half) + flip + _controlled1((last,), target, _adjoint1(half)) + flip
            + _controlled1(rest, target, half, free + (last,)))


@functools.lru_cache(maxsize=None)
def _mcx_plan(m: int, n_free: int) -> tuple:
    """(statements, how, m1) of the shortest way to write C^m X with ``n_free`` borrowable wires
    ("halves", uncounted, where none is free)."""
    if m + 1 in _MCX:
        return 1, "native", 0
    if n_free == 0:
        return None, "halves", 0
    best = (4 * (m - 2), "chain", 0) if n_free >= m - 2 else None
    for m1 in range(2, m):
        m2 = m - m1
        cost = 2 * _mcx_plan(m1, n_free + m2)[0] + 2 * _mcx_plan(m2 + 1, n_free - 1 + m1)[0]
        if best is None or cost < best[0]:
            best = (cost, "split", m1)
    return best


def _mcx(controls: tuple, target: int, free: tuple) -> list:
    m = len(controls)
    _, how, m1 = _mcx_plan(m, len(free))
    if how == "native":
        return [(_MCX[m + 1], controls + (target,), ())]
    if how == "chain":
        return _mcx_chain(controls, target, free[:m - 2])
    if how == "split":      # Lemma 7.3: borrow a = free[0]
        borrowed, others = free[0], free[1:]
        g1, g2 = controls[:m1], controls[m1:]
        part1 = _mcx(g1, borrowed, g2 + (target,) + others)
        part2 = _mcx(g2 + (borrowed,), target, g1 + others)
        return part1 + part2 + part1 + part2
    return _halves(controls, target, ("x", ()), free)


def _mcx_chain(controls: tuple, target: int, borrowed: tuple) -> list:
    """Lemma 7.2: C^m X by 4(m−2) Toffolis T_i = (x_i, a_{i−2} → a_{i−1}) on m−2 borrowed wires
    a_1..a_{m−2} (a_{m−1} is the target): T_m..T_3, T_12, T_3..T_m, then T_{m−1}..T_3, T_12,
    T_3..T_{m−1} to restore the borrowed wires."""
    x, m, chain = controls, len(controls), tuple(borrowed) + (target,)
    toffoli = [("ccx", (x[i], chain[i - 2], chain[i - 1]), ()) for i in range(2, m)]   # T_3 .. T_m
    first = ("ccx", (x[0], x[1], chain[0]), ())
    down, down_inner = toffoli[::-1], toffoli[-2::-1]
    return down + [first] + down[::-1] + down_inner + [first] + down_inner[::-1]


def _atom(step):
    """A qelib1 step as (controls, target, 1-wire gate), or None for swap, cswap, rzz, rxx."""
    name, local, v = step
    if name == "_mc":       # an internal step: the 1-wire gate v controlled by local[:-1]
        return local[:-1], local[-1], v
    if name in _ONE_WIRE:
        return (), local[0], (name, v)
    if name in _ONE_CONTROL_BASE:
        return local[:1], local[1], (_ONE_CONTROL_BASE[name], v)
    if name in ("ccx", "c3x", "c4x"):
        return local[:-1], local[-1], ("x", ())
    if name == "c3sqrtx":
        return local[:-1], local[-1], ("sx", ())
    return None


def _expand(step) -> list:
    """swap, cswap, rzz, rxx as cx-conjugated steps (each a conjugation A B A†)."""
    name, local, v = step
    if name == "swap":
        a, b = local
        return [("cx", (a, b), ()), ("cx", (b, a), ()), ("cx", (a, b), ())]
    if name == "cswap":
        c, a, b = local
        return [("cx", (b, a), ()), ("ccx", (c, a, b), ()), ("cx", (b, a), ())]
    a, b = local
    inner = [("cx", (a, b), ()), ("rz", (b,), v), ("cx", (a, b), ())]
    if name == "rzz":       # the parity of a, b on b, RZ, back
        return inner
    return [("h", (a,), ()), ("h", (b,), ())] + inner + [("h", (b,), ()), ("h", (a,), ())]   # rxx, X = H Z H


def _control(steps: list, controls: tuple, n: int) -> list:
    """``steps`` (on local wires none of which is a control) controlled by all of ``controls``,
    every step exactly, on the gate's ``n`` local wires."""
    out, i = [], 0
    while i < len(steps):
        step = steps[i]
        try:
            inverse = _dagger(step, "")
        except ValueError:
            inverse = None
        j = next((j for j in range(i + 1, len(steps)) if [steps[j]] == inverse), None)
        if j is not None:   # A B A†: where the controls are not all 1, A† A = I
            out += [step] + _control(steps[i + 1:j], controls, n) + [steps[j]]
            i = j + 1
            continue
        atom = _atom(step)
        if atom is None:
            out += _control(_expand(step), controls, n)
        else:
            inner, target, g = atom
            every = tuple(controls) + tuple(inner)
            free = tuple(w for w in range(n) if w not in every and w != target)
            out += _controlled1(every, target, g, free)
        i += 1
    return out


def _controlled_table_gate(base: G.Gate, c: int, k: int, v: tuple) -> list:
    """The table gate ``base`` on local wires c..k−1 controlled by wires 0..c−1: the shortest
    of its candidate sequences, each controlled step by step."""
    controls = tuple(range(c))
    if base.n_wires == 1:
        symbolic = _DIRECT.get(base.name)
        candidates = [] if symbolic is None else [_controlled1(controls, c, (symbolic, v))]
        candidates.append(_controlled1(controls, c, _zyz(base.matrix(v, dtype=torch.complex128).numpy())))
        return min(candidates, key=len)
    sequences = [_sequence(base, k - c, v)]
    if base.name == "ISWAP":    # exp(iπ/4 (XX + YY)), the two commuting
        sequences.append(_sequence(G.RXX, 2, (-_HALF_PI,)) + _sequence(G.RYY, 2, (-_HALF_PI,)))
    if base.name == "SINGLEEXCITATION":
        # CX(1 → 0) maps |01> to |11>, |10> to itself: the rotation is then RY(−θ) on wire 1 where wire 0 is 1
        sequences.append([("cx", (1, 0), ()), ("_mc", (0, 1), ("ry", (-v[0],))), ("cx", (1, 0), ())])
    if base.name == "DOUBLEEXCITATION":
        full = _sequence(base, 4, v)
        sequences.append(full[:4] + [("_mc", (1, 2, 3, 0), ("ry", v))] + full[-4:])
    shifted = [[(name, tuple(w + c for w in local), a) for name, local, a in s] for s in sequences]
    return min((_control(s, controls, k) for s in shifted), key=len)


def _diagonal(phases: np.ndarray) -> list:
    """diag(e^{iφ_x}) exactly: φ_x = Σ_S a_S (−1)^{x·S} (Walsh–Hadamard), each S ≠ ∅ a MULTIRZ(−2a_S)
    on the wires of S, a_∅ the global phase, P(2a_∅) RZ(−2a_∅) on wire 0 (its RZ merged)."""
    k = int(round(math.log2(len(phases))))
    if k == 1:              # diag(e^{ia}, e^{ib}) = e^{ia} P(b − a) = RZ(−2a) P(a + b)
        a, b = (float(x) for x in phases)
        total = _wrap(a + b)
        return ([("p", (0,), (total,))] if total else []) + ([("rz", (0,), (-2 * a,))] if a else [])
    hadamard = np.ones((1, 1))
    for _ in range(k):
        hadamard = np.kron(hadamard, [[1, 1], [1, -1]])
    coeff = hadamard @ np.asarray(phases, dtype=float) / 2 ** k   # coeff[S]: wire w is bit k−1−w of S
    gamma = float(coeff[0])
    steps = [("p", (0,), (_wrap(2 * gamma),))] if gamma else []
    for mask in sorted(range(1, 2 ** k), key=lambda s: [w for w in range(k) if s >> (k - 1 - w) & 1]):
        wires = tuple(w for w in range(k) if mask >> (k - 1 - w) & 1)
        theta = -2 * float(coeff[mask]) - (2 * gamma if wires == (0,) else 0.0)
        if theta == 0:
            continue
        if len(wires) == 1:
            steps.append(("rz", wires, (theta,)))
        elif len(wires) == 2:
            steps.append(("rzz", wires, (theta,)))
        else:
            steps += _multirz(wires, theta)
    return steps


def _qubit_unitary(m: np.ndarray) -> Optional[list]:
    """A QubitUnitary (or the matrix of a DiagonalUnitary) as qelib1 steps, the shortest of: a
    diagonal (:func:`_diagonal`), one 1-wire unitary (u3 and a phase), the identity but for its
    bottom-right 2×2 block (a controlled 1-wire unitary); else :func:`_two_level` up to
    :data:`MAX_SYNTHESIS_WIRES` wires; else None."""
    d = len(m)
    k = int(round(math.log2(d)))
    candidates = []
    if np.abs(m - np.diag(np.diag(m))).max() <= DATA_FORM_ATOL:
        candidates.append(_diagonal(np.angle(np.diag(m))))
    outside = np.ones((d, d), dtype=bool)
    outside[d - 2:, d - 2:] = False
    if k == 1 or np.abs(m - np.eye(d))[outside].max() <= DATA_FORM_ATOL:
        candidates.append(_controlled1(tuple(range(k - 1)), k - 1, _zyz(m[d - 2:, d - 2:])))
    if candidates:
        return min(candidates, key=len)
    return _two_level(m) if k <= MAX_SYNTHESIS_WIRES else None


def _two_level(m: np.ndarray) -> list:
    """Any unitary, exactly (Nielsen & Chuang §4.5.1, in Gray-code order): in the basis ordered by
    the Gray code g_0, g_1, … (neighbours differ in one bit), Givens rotations G of neighbouring
    rows clear each column below its diagonal, leaving a diagonal D: m = G_1† ⋯ G_N† D. D is
    :func:`_diagonal`; each G† mixes g_{r−1}, g_r, which differ in one wire, so it is a 1-wire
    unitary on that wire controlled by the others being their common bits (X around the controls
    that must read 0). d(d−1)/2 rotations with k−1 controls each: for 2 and 3 wires, tens and
    hundreds of statements."""
    d = len(m)
    k = int(round(math.log2(d)))
    gray = [i ^ (i >> 1) for i in range(d)]
    w = np.array(m, dtype=np.complex128)[np.ix_(gray, gray)]
    rotations = []
    for col in range(d - 1):
        for r in range(d - 1, col, -1):
            a, b = w[r - 1, col], w[r, col]
            if b == 0:
                continue
            g = np.array([[a.conjugate(), b.conjugate()], [-b, a]]) / math.hypot(abs(a), abs(b))
            w[[r - 1, r], :] = g @ w[[r - 1, r], :]
            rotations.append((r, g))
    phases = np.zeros(d)
    phases[gray] = np.angle(np.diag(w))
    steps = _diagonal(phases)
    for r, g in reversed(rotations):    # time order: D, G_N†, …, G_1†
        lo, hi = gray[r - 1], gray[r]
        bit = (lo ^ hi).bit_length() - 1
        wire = k - 1 - bit
        block = g.conj().T
        if lo >> bit & 1:       # g_{r−1} has the bit 1: the rotation's basis is |1>, |0>
            block = block[::-1, ::-1]
        controls = tuple(x for x in range(k) if x != wire)
        flips = [("x", (x,), ()) for x in controls if not lo >> (k - 1 - x) & 1]
        for step in flips + _controlled1(controls, wire, _zyz(block)) + flips:
            if step[0] == "x" and steps and steps[-1] == step:
                steps.pop()             # X X = I between neighbouring rotations
            else:
                steps.append(step)
    return steps
