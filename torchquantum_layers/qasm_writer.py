"""OpenQASM 2.0 out: :func:`to_qasm` (``circuit.to_qasm()``), re-exported by
:mod:`torchquantum_layers.qasm`. Separate from the reader, which it needs only to check that an
angle's text reads back exactly (:func:`_format`, also used by the OpenQASM 3 writer); each gate's
qelib1 steps come from :mod:`torchquantum_layers.qelib1_synthesis`.

Writing
    :func:`to_qasm` writes ``qreg q[n]`` (q[i] is wire i) and one gate of Qiskit's qelib1.inc per
    table gate (p, cp, sx, swap, cswap, crx, cry, rxx, rzz, csx, c3x, c4x, c3sqrtx are in Qiskit's copy
    but not in the 2.0 paper's; ``qiskit.qasm2.loads`` reads them with
    ``custom_instructions=qiskit.qasm2.LEGACY_CUSTOM_INSTRUCTIONS``);
    ROT, CROT, ISWAP, RYY, RZX, SINGLEEXCITATION, DOUBLEEXCITATION, MULTIRZ and CCZ are written
    as exact qelib1 decompositions (adjoints too). So is every other gate: a controlled table gate
    ``tql.controlled(G, k)`` with any k and MULTICONTROLLEDX on any number of wires (Barenco et
    al. 1995: Lemma 7.5's square-root recursion down to cu3 with the phase as p on the control,
    C^m X by c3x/c4x or Lemmas 7.2/7.3 on the gate's own wires borrowed in any state; a multi-wire
    target controls each step of its own sequence; the step counts grow quadratically in k, see the
    table above ``qelib1_synthesis._controlled1``); DIAGONALUNITARY on any number of wires (a
    product of MULTIRZ, Walsh–Hadamard); QUBITUNITARY on one wire (u3 and a phase), diagonal or one
    2×2 block controlled by its other wires (``controlled_unitary``'s), and any other up to
    :data:`qelib1_synthesis.MAX_SYNTHESIS_WIRES` wires (Givens rotations in Gray-code order).
    "Exact" includes the global phase, which qelib1 can write (e^{iα} = RZ(−2α) P(2α)): the
    program's unitary is the circuit's entry by entry, to rounding. Only a larger general
    QUBITUNITARY, per-sample data and gates outside the table raise a ValueError naming the gate and
    its wires. Trainable angles are written as their current values (``bind=True``, the default;
    ``bind=False`` raises instead); input angles always raise, as OpenQASM 2.0 has no per-sample
    angles, and so do NaN and infinite angles. Angles print as multiples of pi where that reads back
    to the same float, else with ``repr`` (exact round trip).
    A MixedCircuit's gates conditioned on measurements (``condition=``) are written as ``if``
    statements (see :func:`to_qasm`), not as the controlled gates they are simulated with: read
    back they are the same conditioned gates (a noise model treats them alike), and other tools
    see feed-forward. (A classically controlled gate whose condition wires hold no measurement,
    only reachable by adding ``gates.classically_controlled(...)`` by hand, is the controlled gate
    and is written as one.)
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from . import gates as G
from .circuit import Circuit, Input, Param
from .qelib1_synthesis import _dagger, _sequence

__all__ = ["to_qasm"]


def _angles(circuit: Circuit, op, bind: bool) -> tuple:
    out = []
    for a in op.angles:
        if isinstance(a, Input):
            raise ValueError(f"to_qasm: {op.gate.name} on wires {op.wires} reads input column {a.column}; "
                             f"OpenQASM 2.0 has no per-sample angles")
        if isinstance(a, Param):
            if not bind:
                raise ValueError(f"to_qasm: {op.gate.name} on wires {op.wires} has a trainable angle; "
                                 f"bind=True writes its current value")
            a = a.scale * float(circuit.weights.detach()[a.index])
        if not math.isfinite(float(a)):
            raise ValueError(f"to_qasm: {op.gate.name} on wires {op.wires} has the angle {float(a)!r}, "
                             f"which OpenQASM cannot write")
        out.append(float(a))
    return tuple(out)


def _data(circuit: Circuit, op) -> Optional[np.ndarray]:
    """The matrix (QubitUnitary) or diagonal (DiagonalUnitary) of a data op, as complex128 NumPy."""
    if not op.gate.takes_data:
        return None
    data = circuit.data(op).detach().cpu().to(torch.complex128).numpy()
    if data.ndim != (1 if op.gate.kind == "diagonal" else 2):
        raise ValueError(f"to_qasm: {op.gate.name} on wires {tuple(op.wires)} holds one matrix per sample; "
                         f"OpenQASM 2.0 has no per-sample gates")
    return data


def _format(x: float) -> str:
    """Shortest text that reads back to exactly ``x``: a multiple of pi when one fits."""
    # imported here, not at the top: torchquantum_layers.qasm (the reader, whose evaluator decides
    # what reads back) re-exports to_qasm from this module, so a top-level import would be circular
    from .qasm import _read_angle
    if x == 0:
        return "0"
    for d in (1, 2, 3, 4, 6, 8, 12, 16):
        k = round(x * d / math.pi)
        if k and abs(k) <= 4 * d and math.gcd(k, d) == 1:
            text = ("-" if k < 0 else "") + ("" if abs(k) == 1 else f"{abs(k)}*") + "pi" + \
                   ("" if d == 1 else f"/{d}")
            if _read_angle(text) == x:
                return text
    text = repr(float(x))
    if "e" in text and "." not in text:   # OpenQASM 2.0 reals need a '.' before the exponent
        text = text.replace("e", ".0e")
    return text


def _is_flip(inst) -> bool:
    return bool(getattr(inst, "condition_flip", False))


def _is_measure(inst) -> bool:
    return inst.label.startswith("measure")


def _read_conditions(circuit: Circuit, at: dict) -> dict:
    """{op index: {condition wire: outcome}} for the classically controlled ops whose condition
    wires all hold their last measurement: these are written as ``if`` statements. The outcome a
    wire must read is 1, or 0 where the circuit put an odd number of condition flips on it since
    its measurement (a gate conditioned on 0 is the controlled gate between two flips)."""
    holding, flips, conditions = set(), {}, {}
    for i in range(len(circuit.ops) + 1):
        for inst in at.get(i, ()):
            if _is_flip(inst):
                for w in inst.wires:
                    flips[w] = flips.get(w, 0) ^ 1
            elif _is_measure(inst):
                holding.update(inst.wires)
                flips.update(dict.fromkeys(inst.wires, 0))
            else:
                holding.difference_update(inst.wires)
        if i == len(circuit.ops):
            break
        op = circuit.ops[i]
        condition = G.condition_of(op.gate)
        n_read = condition[0] if condition else 0
        if condition and all(w in holding for w in op.wires[:n_read]):
            conditions[i] = {w: 1 ^ flips.get(w, 0) for w in op.wires[:n_read]}
        else:
            n_read = 0          # written as the controlled gate it is: it acts on every wire
        holding.difference_update(op.wires[n_read:])
    return conditions


def _conditioned_gate(gate: G.Gate) -> G.Gate:
    """The gate a classically controlled ``gate`` applies (``controlled`` merged its controls in)."""
    n_conditions, name = G.condition_of(gate)
    if name in G.GATES:
        return G.GATES[name]
    own_controls = gate.n_controls - n_conditions
    return G.controlled(gate.target, own_controls, name) if own_controls else gate.target


def _register_of(wires: tuple) -> str:
    """The creg an ``if`` on ``wires`` reads: c<w> holds wire w's outcome; several wires are
    measured again (they still hold their outcomes, so the value repeats) into c<w0>_<w1>..."""
    return "c" + "_".join(map(str, wires))


def to_qasm(circuit: Circuit, *, bind: bool = True, measure: bool = False) -> str:
    """OpenQASM 2.0 text of ``circuit`` on ``qreg q[n]`` (q[i] is wire i); ``measure=True`` adds
    ``creg c[n]`` and a final ``measure q -> c``. A MixedCircuit's measurements and resets are
    written where they stand, into ``creg c[n]``; where it has gates conditioned on measurements
    (``condition=``), every wire gets its own one-bit ``creg c<w>[1]`` instead (OpenQASM 2.0's
    ``if`` compares a whole register) and each conditioned gate is an ``if(c<w>==k) <gate>;``
    per qelib1 step; a condition on several wires first measures them again into
    ``creg c<w0>_<w1>...`` (they still hold their outcomes, so this repeats them and changes
    nothing). Read back with ``MixedCircuit.from_qasm`` the gates are the same conditioned gates.
    Every gate of the table is written exactly, global phase included (controlled ones with any
    number of controls, MULTICONTROLLEDX of any width, DIAGONALUNITARY, QUBITUNITARY up to
    :data:`qelib1_synthesis.MAX_SYNTHESIS_WIRES` wires; see the module docstring), adjoints too.
    Channels and noise models have no OpenQASM 2.0 form and raise ``ValueError``."""
    if not isinstance(circuit, Circuit):
        raise TypeError(f"to_qasm: expected a Circuit, got {type(circuit).__name__}")
    n = circuit.n_wires
    if getattr(circuit, "noise_model", None) is not None:
        raise ValueError("to_qasm: OpenQASM 2.0 has no noise; export the circuit without its noise_model")
    at: dict = {}
    for pos, inst in getattr(circuit, "instructions", ()):
        if not (_is_flip(inst) or _is_measure(inst) or inst.label.startswith("reset")):
            raise ValueError(f"to_qasm: OpenQASM 2.0 has no channels; cannot write {inst!r}")
        at.setdefault(pos, []).append(inst)
    conditions = _read_conditions(circuit, at)
    per_wire = bool(conditions)
    mid_measure = any(_is_measure(inst) for insts in at.values() for inst in insts)
    lines = ["OPENQASM 2.0;", 'include "qelib1.inc";', f"qreg q[{n}];"]
    if per_wire:
        lines += [f"creg c{w}[1];" for w in range(n)]
        several = dict.fromkeys(tuple(c) for c in conditions.values() if len(c) > 1)
        lines += [f"creg {_register_of(wires)}[{len(wires)}];" for wires in several]
    elif measure or mid_measure:
        lines.append(f"creg c[{n}];")
    bit = (lambda w: f"c{w}[0]") if per_wire else (lambda w: f"c[{w}]")
    for i in range(len(circuit.ops) + 1):
        for inst in at.get(i, ()):
            if _is_flip(inst):
                # MixedCircuit.add puts a pair around the one gate it conditions on outcome 0, on
                # a wire holding its measurement: that gate is an 'if' comparing with 0, no flip
                continue
            if _is_measure(inst):
                lines += [f"measure q[{w}] -> {bit(w)};" for w in inst.wires]
            else:
                lines += [f"reset q[{w}];" for w in inst.wires]
        if i == len(circuit.ops):
            break
        op = circuit.ops[i]
        angles = _angles(circuit, op, bind)
        condition = conditions.get(i)
        gate, wires, prefix = op.gate, op.wires, ""
        if condition is not None:
            gate, wires = _conditioned_gate(op.gate), op.wires[len(condition):]
            read = tuple(condition)
            value = sum(outcome << j for j, outcome in enumerate(condition.values()))
            if len(read) > 1:
                lines += [f"measure q[{w}] -> {_register_of(read)}[{j}];" for j, w in enumerate(read)]
            prefix = f"if({_register_of(read)}=={value}) "
        data = _data(circuit, op)
        try:
            steps = _sequence(gate, len(wires), angles, data)
            if op.adjoint:
                steps = [s for step in reversed(steps) for s in _dagger(step, gate.name)]
        except ValueError as err:
            raise ValueError(f"{err} (the op on wires {tuple(op.wires)})") from None
        for name, local, v in steps:
            params = f"({', '.join(_format(x) for x in v)})" if v else ""
            lines.append(f"{prefix}{name}{params} {', '.join(f'q[{wires[j]}]' for j in local)};")
    if measure:
        lines += [f"measure q[{w}] -> c{w}[0];" for w in range(n)] if per_wire else ["measure q -> c;"]
    return "\n".join(lines) + "\n"
