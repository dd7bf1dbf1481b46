"""OpenQASM 3 out: :func:`to_qasm3` (``circuit.to_qasm3()``). The reader, :func:`from_qasm3`
(``Circuit.from_qasm3``), lives in :mod:`torchquantum_layers.qasm3_import` and is re-exported here.

The program is ``OPENQASM 3.0;``, ``include "stdgates.inc";``, ``qubit[n] q;`` (q[i] is wire i,
the most significant bit of the basis index) and one gate call per op. Every call is exact,
global phase included (a ``ctrl @`` would turn a global phase into a relative one), so the
program's unitary equals ``circuit.unitary()`` entry by entry:

* stdgates.inc names where one exists: id x y z h s sdg t tdg sx p rx ry rz cx cy cz ch cp crx
  cry crz swap ccx cswap; CU3 is ``cu(θ, φ, λ, 0)`` (stdgates' four-parameter cu is the
  controlled e^{iγ} U(θ, φ, λ)); U3 and U2 are the built-in ``U`` (OpenQASM 3's U is the table's
  U3, phase included; stdgates' ``u3``/``u2`` carry an extra gphase(-(φ+λ)/2), so they are not
  used); SXDG is ``inv @ sx``.
* gates with no stdgates name are ``gate`` definitions written once at the top, only those the
  circuit uses: rot, iswap, rxx, ryy, rzz, rzx, singleexcitation, doubleexcitation, multirz_<k>
  (one per width k ≥ 2; on one wire MultiRZ is rz), qubitunitary (a 1-qubit matrix as
  ``gphase(α); U(θ, φ, λ)``).
* a controlled table gate (``tql.controlled(G, k)``, any k) is ``ctrl @`` / ``ctrl(k) @`` on
  G's call (cx, ccx, cz ... where stdgates has the name); MULTICONTROLLEDX on k wires is
  ``ctrl(k-1) @ x``; an adjoint op is ``inv @`` on its call (s†, t† are sdg, tdg; self-inverse
  gates are written as they are). No table gate has a control on |0⟩, so ``negctrl`` is never
  written.
* angles: fixed numbers print as multiples of pi where that reads back to the same float, else
  with ``repr``. ``parameters="bound"`` (default) writes trainable angles as their current values
  and refuses input-feature angles; ``parameters="input"`` declares ``input float[64] theta_<i>;``
  per trainable weight i and ``input float[64] x_<c>;`` per input column c the circuit reads,
  and writes ``theta_<i>`` / ``<scale>*theta_<i>`` in the calls: a parametrised program.

Refused (ValueError naming the gate and its wires): QubitUnitary / DiagonalUnitary on 2+ wires
(OpenQASM 3 has no matrix literal), NaN / infinite angles, a MixedCircuit with measurements,
channels or a noise model (export the unitary part), gates outside the table.
"""
from __future__ import annotations

import cmath
import math

from . import gates as G
from .circuit import Circuit, Input, Param
from .qasm_writer import _format
from .qasm3_import import from_qasm3

__all__ = ["to_qasm3", "from_qasm3", "PARAMETER_MODES"]

PARAMETER_MODES = ("bound", "input")

# table gate -> stdgates.inc (or built-in U) name
_DIRECT = {"I": "id", "X": "x", "Y": "y", "Z": "z", "H": "h", "S": "s", "SDG": "sdg", "T": "t",
           "TDG": "tdg", "SX": "sx", "P": "p", "RX": "rx", "RY": "ry", "RZ": "rz", "U3": "U",
           "SWAP": "swap"}
# (target, number of controls) -> stdgates.inc name of the controlled gate
_CONTROLLED = {("X", 1): "cx", ("X", 2): "ccx", ("Y", 1): "cy", ("Z", 1): "cz", ("H", 1): "ch",
               ("P", 1): "cp", ("RX", 1): "crx", ("RY", 1): "cry", ("RZ", 1): "crz",
               ("SWAP", 1): "cswap"}
_DAGGER = {"s": "sdg", "sdg": "s", "t": "tdg", "tdg": "t"}
_SELF_INVERSE = {"id", "x", "y", "z", "h", "swap", "cx", "ccx", "cy", "cz", "ch", "cswap"}

# exact definitions (phase included) of the gates stdgates.inc lacks, each with the names of the
# definitions its body calls (written first)
_DEFS = {
    "rot": ((), "gate rot(phi, theta, omega) a { rz(phi) a; ry(theta) a; rz(omega) a; }"),
    # CX (1⊗RZ) CX = RZZ exactly; X = H Z H, Y = (S H) Z (S H)†
    "rzz": ((), "gate rzz(theta) a, b { cx a, b; rz(theta) b; cx a, b; }"),
    "rxx": (("rzz",), "gate rxx(theta) a, b { h a; h b; rzz(theta) a, b; h a; h b; }"),
    "ryy": (("rzz",), "gate ryy(theta) a, b { sdg a; h a; sdg b; h b; rzz(theta) a, b; "
                      "h a; s a; h b; s b; }"),
    "rzx": (("rzz",), "gate rzx(theta) a, b { h b; rzz(theta) a, b; h b; }"),
    "iswap": ((), "gate iswap a, b { s a; s b; h a; cx a, b; cx b, a; h b; }"),
    # exp(iθ/4 (XY − YX)) as two commuting RXX factors in rotated bases (S X S† = Y)
    "singleexcitation": (("rxx",), "gate singleexcitation(theta) a, b { sdg b; rxx(-theta/2) a, b; s b; "
                                   "sdg a; rxx(theta/2) a, b; s a; }"),
    # the CXs and X map |0011>, |1100> to |0111>, |1111> (every other basis state outside that
    # pair), where the Givens rotation is an RY(θ) on a controlled by b, c, d
    "doubleexcitation": ((), "gate doubleexcitation(theta) a, b, c, d { cx a, b; cx a, c; cx a, d; x b; "
                             "ctrl(3) @ ry(theta) b, c, d, a; x b; cx a, d; cx a, c; cx a, b; }"),
    "qubitunitary": ((), "gate qubitunitary(theta, phi, lambda, alpha) a { gphase(alpha); "
                         "U(theta, phi, lambda) a; }"),
}


def _multirz_def(k: int) -> str:
    """MultiRZ on k wires: a CX ladder puts the parity on the last wire, RZ, ladder back."""
    names = [f"a{j}" for j in range(k)]
    ladder = [f"cx {names[j]}, {names[j + 1]};" for j in range(k - 1)]
    body = " ".join(ladder + [f"rz(theta) {names[-1]};"] + ladder[::-1])
    return f"gate multirz_{k}(theta) {', '.join(names)} {{ {body} }}"


def _u3_of(m) -> tuple:
    """(θ, φ, λ, α) with the 2×2 unitary ``m`` = e^{iα} U3(θ, φ, λ)."""
    a, b, c, d = complex(m[0][0]), complex(m[0][1]), complex(m[1][0]), complex(m[1][1])
    theta = 2 * math.atan2(abs(c), abs(a))
    eps = 1e-12
    if abs(a) > eps:
        alpha = cmath.phase(a)
        if abs(c) > eps:
            phi, lam = cmath.phase(c) - alpha, cmath.phase(-b) - alpha
        else:
            phi, lam = 0.0, cmath.phase(d) - alpha
    else:                       # θ = π: only φ + λ and α are fixed; take λ = 0
        alpha, lam = cmath.phase(-b), 0.0
        phi = cmath.phase(c) - alpha
    return theta, phi, lam, alpha


class _Writer:
    def __init__(self, circuit: Circuit, parameters: str):
        self.circuit = circuit
        self.parameters = parameters
        self.defs: dict = {}          # name -> text, in the order they must be written
        self.thetas: set = set()
        self.columns: set = set()

    def need(self, name: str):
        if name in self.defs:
            return
        deps, text = _DEFS[name]
        for dep in deps:
            self.need(dep)
        self.defs[name] = text

    def angle(self, op, a) -> str:
        where = f"{op.gate.name} on wires {op.wires}"
        if isinstance(a, Input):
            if self.parameters != "input":
                raise ValueError(f"to_qasm3: {where} reads input column {a.column}; parameters='bound' "
                                 f"cannot write per-sample angles, use parameters='input' (declares "
                                 f"'input float[64] x_{a.column};')")
            self.columns.add(a.column)
            return self.scaled(a.scale, f"x_{a.column}", where)
        if isinstance(a, Param):
            if self.parameters == "input":
                self.thetas.add(a.index)
                return self.scaled(a.scale, f"theta_{a.index}", where)
            a = a.scale * float(self.circuit.weights.detach()[a.index])
        return self.number(float(a), where)

    def scaled(self, scale: float, name: str, where: str) -> str:
        return name if scale == 1.0 else f"{self.number(float(scale), where)}*{name}"

    @staticmethod
    def number(x: float, where: str) -> str:
        if not math.isfinite(x):
            raise ValueError(f"to_qasm3: {where} has the angle {x!r}, which OpenQASM cannot write")
        return _format(x)

    def call(self, op) -> tuple:
        """(name with its modifiers, parameter texts): the op's gate call, before ``inv @``."""
        gate, k = op.gate, len(op.wires)
        v = [self.angle(op, a) for a in op.angles]
        if gate.n_controls:
            base = gate.target
            if G.GATES.get(base.name) is not base:
                raise ValueError(f"to_qasm3: {gate.name} on wires {op.wires} controls {base.name}, which "
                                 f"is not a gate of the table")
            c = gate.n_controls
            key = (base.name, c)
            if key in _CONTROLLED:
                return _CONTROLLED[key], v
            if key == ("U3", 1):       # stdgates' cu(θ, φ, λ, γ) = controlled e^{iγ} U(θ, φ, λ)
                return "cu", v + ["0"]
            inner, params = self.plain(base, base.n_wires, v, op)
            return f"{'ctrl' if c == 1 else f'ctrl({c})'} @ {inner}", params
        if G.GATES.get(gate.name) is not gate:
            raise ValueError(f"to_qasm3: {gate.name} on wires {op.wires} is not a gate of the table, so it "
                             f"has no OpenQASM 3 form")
        return self.plain(gate, k, v, op)

    def plain(self, gate, k: int, v: list, op) -> tuple:
        name = gate.name
        if name in _DIRECT:
            return _DIRECT[name], v
        if name == "SXDG":
            return "inv @ sx", v
        if name == "U2":
            return "U", ["pi/2"] + v
        if name == "CNOT":
            return "cx", v
        if name == "MULTIRZ":
            if k == 1:
                return "rz", v
            self.defs.setdefault(f"multirz_{k}", _multirz_def(k))
            return f"multirz_{k}", v
        if name == "MULTICONTROLLEDX":
            return {2: "cx", 3: "ccx"}.get(k, f"ctrl({k - 1}) @ x"), v
        if name in ("QUBITUNITARY", "DIAGONALUNITARY"):
            if k != 1:
                raise ValueError(f"to_qasm3: {name} on wires {op.wires} ({k} qubits) has no OpenQASM 3 "
                                 f"form: OpenQASM 3 has no matrix literal (only a 1-qubit {name} is "
                                 f"written, as gphase and U)")
            m = self.circuit.data(op).detach().cpu().tolist()
            if name == "DIAGONALUNITARY":
                m = [[m[0], 0], [0, m[1]]]
            self.need("qubitunitary")
            where = f"{name} on wires {op.wires}"
            return "qubitunitary", [self.number(x, where) for x in _u3_of(m)]
        lower = name.lower()
        if lower in _DEFS:
            self.need(lower)
            return lower, v
        raise ValueError(f"to_qasm3: {name} on wires {op.wires} has no OpenQASM 3 form")

    def line(self, op) -> str:
        name, v = self.call(op)
        if op.adjoint and not op.gate.self_inverse and name not in _SELF_INVERSE:
            name = _DAGGER.get(name) or (name[len("inv @ "):] if name.startswith("inv @ ") else f"inv @ {name}")
        params = f"({', '.join(v)})" if v else ""
        return f"{name}{params} {', '.join(f'q[{w}]' for w in op.wires)};"


def to_qasm3(circuit: Circuit, *, parameters: str = "bound") -> str:
    """OpenQASM 3 text of ``circuit`` on ``qubit[n] q`` (q[i] is wire i), exact to the global phase.

    ``parameters="bound"`` writes trainable angles as their current values (input-feature angles
    raise); ``parameters="input"`` declares ``input float[64] theta_<i>;`` for each trainable
    weight the gates read and ``input float[64] x_<c>;`` for each input column, and writes the
    angles as expressions in them."""
    if not isinstance(circuit, Circuit):
        raise TypeError(f"to_qasm3: expected a Circuit, got {type(circuit).__name__}")
    if not isinstance(parameters, str) or parameters not in PARAMETER_MODES:
        raise ValueError(f"to_qasm3: parameters must be one of {PARAMETER_MODES}, got {parameters!r}")
    if getattr(circuit, "noise_model", None) is not None or getattr(circuit, "instructions", None):
        raise ValueError("to_qasm3: only the unitary part of a circuit is written; this one has a noise "
                         "model, channels, measurements or resets")
    writer = _Writer(circuit, parameters)
    body = [writer.line(op) for op in circuit.ops]
    lines = ["OPENQASM 3.0;", 'include "stdgates.inc";']
    lines += [f"input float[64] theta_{i};" for i in sorted(writer.thetas)]
    lines += [f"input float[64] x_{c};" for c in sorted(writer.columns)]
    lines += list(writer.defs.values())
    lines.append(f"qubit[{circuit.n_wires}] q;")
    return "\n".join(lines + body) + "\n"
