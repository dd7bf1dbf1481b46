"""Qiskit in and out: :func:`from_qiskit` (``Circuit.from_qiskit``), :func:`layer_from_qiskit`
(a :class:`~torchquantum_layers.QuantumLayer`, what TorchConnector wraps), :func:`to_qiskit`
(``circuit.to_qiskit()``) and SparsePauliOp ↔ :class:`~torchquantum_layers.Hamiltonian`.

Qiskit (1.0 or later) is imported only inside these functions (``pip install
torchquantum-layers[qiskit]``), so ``import torchquantum_layers`` never needs it.

Wire order
    Qiskit qubit i is wire i (``qc.qubits[i]``, registers in the order the circuit lists them).
    Qiskit numbers basis states little-endian (qubit 0 is the least significant bit), a Circuit
    big-endian (wire 0 is the most significant), so the state of the converted circuit is
    ``tql.from_qiskit_order(Statevector(qc).data)`` amplitude by amplitude, global phase included,
    and its unitary is Qiskit's ``Operator(qc)`` with the bits of both indices reversed. A Pauli
    string acts on the same numbered qubits/wires on both sides: ``Z0`` is Qiskit's label ``"...IZ"``.

Gates
    Every standard gate with a table equivalent maps to it with the same matrix (``u``, ``u3`` → U3,
    ``u2`` → U2, ``u1``/``p`` → P, ``cu1`` → CP, ``cu3`` → CU3, ``rzx`` → RZX with Z on the first
    qubit, ...); ``cu(θ, φ, λ, γ)`` is P(γ) on the control and CU3(θ, φ, λ); ``unitary`` is a
    QubitUnitary; ``global_phase`` and the circuit's ``global_phase`` are kept (as P(2α)·RZ(−2α) on
    wire 0, as :func:`~torchquantum_layers.qasm3_import.from_qasm3` does); ``barrier`` and ``delay``
    are dropped. Any other controlled gate (``mcx``, ``c3sx``, ``cs``, ``ry.control(3)``, open
    controls through ``ctrl_state``) is its base gate under :func:`~torchquantum_layers.controlled`,
    with X flips around the controls that read 0; an ``AnnotatedOperation`` (what ``gate.control()``
    returns in Qiskit 3) applies its control, inverse and integer-power modifiers the same way.
    Everything else is expanded through its ``definition`` (what ``qc.decompose()`` does),
    recursively, or else transpiled to the mapped gates (a Clifford, a fractional power); what
    neither resolves raises ValueError naming it.

Angles
    A gate angle is a number or an affine expression ``a·θ + b`` of Qiskit ``Parameter``s
    (``ParameterVector`` elements too). Each parameter is an input-feature column (``inputs=``, in
    its order, as TorchConnector's ``input_params``) or a trainable weight (``trainable=``, in its
    order; default: every other parameter of the circuit, in ``qc.parameters`` order). A sum of
    several terms becomes one gate per term where the angle adds up (rotations, P and their
    controlled forms; U3 as P·RY·P), the mechanism of the OpenQASM 3 reader.

Derived feature columns (angles non-affine in the inputs)
    An angle may be any expression of the inputs (ZZFeatureMap's / PauliFeatureMap's default
    ``2(π − x_i)(π − x_j)``, a ``data_map_func`` with ``sin``/``exp``, ``x²``, ``sqrt(abs(x))``: + − × ÷,
    powers, sin, cos, tan, their inverses, exp, log, abs, sign, constants) plus an affine part
    ``Σ a·θ`` in the trainable parameters. Each distinct such expression ``g`` (up to a numeric
    factor: ``g`` and ``−2g`` share one) becomes one extra input column that the gate reads as
    ``Input(column, factor)``; the trainable part stays ``Param`` angles. Those columns come from a
    :class:`~torchquantum_layers.qiskit_features.DerivedFeatures` module, which maps the
    ``(B, len(inputs))`` features ``x`` to ``(B, len(inputs) + m)``: ``x`` itself, then the ``m``
    expressions evaluated with torch operations (batched, differentiable in ``x``, in ``x``'s device
    and dtype; read through ``ParameterExpression.sympify()``, so sympy is needed, a dependency of
    the ``qiskit`` extra). Two ways to get it:

    - ``circuit, feature_map = from_qiskit(qc, inputs=x, return_feature_map=True)``: the state for
      features ``x`` is ``circuit(feature_map(x))`` (without derived columns the map returns the
      columns the circuit reads, ``x`` itself in general);
    - ``layer = layer_from_qiskit(qc, observables, inputs=x, trainable=w)``: a QuantumLayer whose
      ``input_map`` is that module, taking ``(B, len(inputs))`` features like Qiskit ML's
      ``TorchConnector(EstimatorQNN(qc, observables, input_params=x, weight_params=w))``.

    Without ``return_feature_map`` (and from ``Circuit.from_qiskit`` by default) such an angle is a
    ValueError naming it and both ways, so an affine circuit still reads to a plain Circuit.
    Trainable parameters must stay affine: ``sin(θ)``, ``θ²``, ``θ·x`` (a trainable parameter
    times an input) raise ValueError naming the angle and the parameter, as do a function with no
    torch equivalent and a non-real constant.

Measurement, reset, classical control
    ``measure`` raises ValueError unless ``drop_final_measurements=True``, which drops measurements
    nothing acts on afterwards; ``reset`` is accepted on a qubit nothing has touched (still |0⟩);
    control flow (``if_else``, ``while_loop``, ...) and other classical instructions are refused;
    ``box`` is read as its body. ``MixedCircuit.from_qiskit``
    (:mod:`~torchquantum_layers.qiskit_dynamic`) reads measurements, resets and ``if_test`` /
    ``for_loop`` blocks into a density-matrix circuit with the same gate reader.

Out
    :func:`to_qiskit` writes each table gate as the Qiskit gate of the same matrix, or an exact
    short sequence where Qiskit has none (Rot as RZ·RY·RZ, SingleExcitation as CX·CRY·CX,
    DoubleExcitation as CX fans around a 3-controlled RY, MultiRZ as a CX ladder around RZ,
    DiagonalUnitary as a ``unitary``); controlled gates are controlled copies of those, adjoint ops
    their inverses. Trainable angles are ``w[i]`` (times the scale) of ``ParameterVector("w")``,
    input angles ``x[c]`` of ``ParameterVector("x")``, fixed angles numbers; the circuit has no
    global phase. ``from_qiskit(qc, inputs=x, trainable=w)`` reads it back to the same unitary and
    the same weights and columns.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import numpy as np
import torch

from . import gates as G
from .circuit import _INIT, Circuit, Input, Param
from .qasm3_angles import _Lin, _plus, _times
from .qasm3_gates import _controlled, _ctl, _final, _op
from .qiskit_features import DerivedAngles, DerivedFeatures

__all__ = ["from_qiskit", "layer_from_qiskit", "DerivedFeatures", "to_qiskit", "hamiltonian_from_sparse_pauli_op",
           "to_sparse_pauli_op"]

MAX_NESTING = 64     # definitions deeper than this are a gate that decomposes into itself


def _qiskit():
    try:
        import qiskit
    except ImportError as exc:
        raise ModuleNotFoundError("torchquantum_layers.qiskit_interop needs qiskit: pip install "
                                  "'torchquantum-layers[qiskit]' (the qiskit extra)", name="qiskit") from exc
    return qiskit


# =============================================================================================
# Qiskit -> Circuit: angles
def _number(value, what: str) -> float:
    try:
        z = complex(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: parameter {value!r} is not a number or a Qiskit ParameterExpression") from None
    if abs(z.imag) > 1e-12 * max(1.0, abs(z.real)):
        raise ValueError(f"{what}: angle {value!r} is not real")
    if not math.isfinite(z.real):
        raise ValueError(f"{what}: angle {value!r} is not finite")
    return float(z.real)


def _gradient(expr, parameter, expression_type):
    """d expr / d parameter as a number, or None where it still depends on a parameter."""
    try:
        g = expr.gradient(parameter)
    except Exception:    # noqa: BLE001 - Qiskit refuses to differentiate abs(), sign() ...
        return None
    if isinstance(g, expression_type) and g.parameters:
        return None
    return g


def _angle(value, what: str, expression_type, derived=None):
    """A float, or a :class:`_Lin` keyed by parameter name for ``a·θ + b``; what is not affine
    goes to ``derived`` (:class:`~torchquantum_layers.qiskit_features.DerivedAngles`), which
    reads derived input columns or refuses."""
    if not isinstance(value, expression_type):
        return _number(value, what)
    parameters = sorted(value.parameters, key=lambda p: p.name)
    if not parameters:
        return _number(value, what)
    terms = {}
    for p in parameters:
        g = _gradient(value, p, expression_type)
        if g is None:
            if derived is not None:
                return derived.angle(value, what, p.name)
            raise ValueError(f"{what}: the angle `{value}` is not affine (a*θ + b) in the parameter '{p.name}': a "
                             f"circuit angle is a sum of constant * parameter terms")
        terms[p.name] = _number(g, f"{what}: the coefficient of '{p.name}' in `{value}`")
    try:
        const = value.bind({p: 0.0 for p in parameters})
    except Exception as exc:   # noqa: BLE001 - e.g. a division by zero at θ = 0
        raise ValueError(f"{what}: the angle `{value}` is not affine (a*θ + b): {exc}") from None
    terms = {k: v for k, v in terms.items() if v != 0.0}
    const = _number(const, f"{what}: the constant of `{value}`")
    return _Lin(const, terms) if terms else const


# =============================================================================================
# Qiskit -> Circuit: instructions to items
# Items are those of the OpenQASM 3 reader (("op", gate, wires, angles, adjoint), ("phase", angle))
# plus ("unitary", wires, matrix), ("measure", wires, name) and ("reset", wires, name).

def _same(gate):
    return lambda angles, wires: [_op(gate, wires, angles)]


def _cu(angles, wires):
    # Qiskit's cu(θ, φ, λ, γ) puts e^{iγ} on the control's |1⟩: P(γ) on the control, then CU3
    return [_op(G.P, wires[:1], angles[3:]), _op(G.CU3, wires, angles[:3])]


def _global_phase(angles, wires):
    return [("phase", angles[0])]


# Qiskit's standard gates with the table's matrix, qubits in the same order
_STANDARD = {
    "id": _same(G.I), "x": _same(G.X), "y": _same(G.Y), "z": _same(G.Z), "h": _same(G.H), "s": _same(G.S),
    "sdg": _same(G.SDG), "t": _same(G.T), "tdg": _same(G.TDG), "sx": _same(G.SX), "sxdg": _same(G.SXDG),
    "p": _same(G.P), "u1": _same(G.P), "rx": _same(G.RX), "ry": _same(G.RY), "rz": _same(G.RZ),
    "u": _same(G.U3), "u3": _same(G.U3), "u2": _same(G.U2),
    "cx": _same(G.CNOT), "cy": _same(G.CY), "cz": _same(G.CZ), "ch": _same(G.CH), "swap": _same(G.SWAP),
    "iswap": _same(G.ISWAP), "cp": _same(G.CP), "cu1": _same(G.CP), "crx": _same(G.CRX), "cry": _same(G.CRY),
    "crz": _same(G.CRZ), "cu3": _same(G.CU3), "cu": _cu, "rxx": _same(G.RXX), "ryy": _same(G.RYY),
    "rzz": _same(G.RZZ), "rzx": _same(G.RZX), "ccx": _same(G.TOFFOLI), "ccz": _same(G.CCZ),
    "cswap": _same(G.CSWAP), "global_phase": _global_phase,
}


def _handlers(qiskit) -> dict:
    """{Qiskit gate class: handler}: by class, so a user's gate that only shares a name is expanded."""
    from qiskit.circuit.library import get_standard_gate_name_mapping
    mapping = get_standard_gate_name_mapping()
    return {mapping[name].base_class: fn for name, fn in _STANDARD.items() if name in mapping}


def _controlled_items(items, controls: tuple, what: str) -> list:
    out = []
    for it in items:
        if it[0] == "unitary":
            _, wires, m = it
            d = 2 ** (len(controls) + len(wires))
            full = np.eye(d, dtype=np.complex128)
            full[d - len(m):, d - len(m):] = m
            out.append(("unitary", controls + wires, full))
        elif it[0] in ("measure", "reset"):
            raise ValueError(f"{what}: a controlled {it[2]!r} cannot be represented in a unitary circuit")
        else:
            out += _controlled([it], controls, False)
    return out


def _inverted(items, what: str) -> list:
    out = []
    for it in reversed(items):
        kind = it[0]
        if kind == "phase":
            out.append(("phase", _times(it[1], -1.0)))
        elif kind == "unitary":
            out.append(("unitary", it[1], it[2].conj().T))
        elif kind in ("measure", "reset"):
            raise ValueError(f"{what}: the inverse of a {it[2]!r} cannot be represented in a unitary circuit")
        else:
            _, gate, wires, angles, adjoint = it
            c = gate.n_controls
            if (gate.target if c else gate).name == "ISWAP" and not adjoint:
                # the adjoint of the only non-Hermitian fixed gate the reader has no dagger for:
                # ISWAP† = (Z ⊗ Z)·ISWAP (Z ⊗ Z commutes with ISWAP)
                z = _ctl(G.Z, c) if c else G.Z
                out += [it, _op(z, wires[:c] + wires[c:c + 1]), _op(z, wires[:c] + wires[c + 1:])]
            else:
                out.append(("op", gate, wires, angles, not adjoint))
    return out


def _open_controls(items, controls: tuple, ctrl_state: int) -> list:
    """Qiskit's ctrl_state (bit i: control i) as X flips around the controls that read 0."""
    flips = [_op(G.X, (w,)) for i, w in enumerate(controls) if not (ctrl_state >> i) & 1]
    return flips + items + flips


class _Reader:
    def __init__(self, qiskit, derived=None, caller: str = "from_qiskit"):
        from qiskit.circuit import (AnnotatedOperation, Barrier, ControlFlowOp, ControlledGate, Delay, Measure,
                                    ParameterExpression, Reset)
        from qiskit.circuit.annotated_operation import ControlModifier, InverseModifier, PowerModifier
        self.annotated_type = AnnotatedOperation
        self.modifiers = ControlModifier, InverseModifier, PowerModifier
        self.qiskit = qiskit
        self.expression = ParameterExpression
        self.controlled_gate, self.control_flow = ControlledGate, ControlFlowOp
        self.dropped = (Barrier, Delay)
        self.measure_type, self.reset_type = Measure, Reset
        self.handlers = _handlers(qiskit)
        self.derived = derived
        self.caller = caller            # the function named in error messages

    def circuit(self, qc, wires: tuple, depth: int, where: str) -> list:
        """The items of a QuantumCircuit whose qubit i is ``wires[i]``, its global phase included."""
        items = []
        for _, _, part in self.instructions(qc, wires, depth, where):
            items += part
        return items

    def instructions(self, qc, wires: tuple, depth: int, where: str):
        """(Qiskit name, wires, items) per instruction, the circuit's global phase first."""
        if depth > MAX_NESTING:
            raise ValueError(f"{self.caller}: {where} decomposes more than {MAX_NESTING} levels deep (a gate whose "
                             f"definition contains itself?)")
        phase = _angle(qc.global_phase, f"{self.caller}: the global phase of {where}", self.expression,
                       self.derived)
        if phase != 0.0:
            yield "global phase", (), [("phase", phase)]
        index = {q: i for i, q in enumerate(qc.qubits)}
        for inst in qc.data:
            qubits = tuple(wires[index[q]] for q in inst.qubits)
            yield inst.operation.name, qubits, self.instruction(inst.operation, qubits, depth, where)

    def describe(self, op, wires, where):
        inside = "" if where == "the circuit" else f" (inside {where})"
        return f"{self.caller}: instruction '{op.name}' on qubit(s) {list(wires)}{inside}"

    def instruction(self, op, wires: tuple, depth: int, where: str) -> list:
        what = self.describe(op, wires, where)
        if isinstance(op, self.dropped):
            return []
        if isinstance(op, self.measure_type):
            return [("measure", wires, op.name)]
        if isinstance(op, self.reset_type):
            return [("reset", wires, op.name)]
        if isinstance(op, self.control_flow):
            if op.name == "box":
                return self.circuit(op.blocks[0], wires, depth + 1, f"'{op.name}'")
            raise ValueError(f"{what}: classical control flow cannot be represented in a circuit, which is a fixed "
                             f"sequence of gates; MixedCircuit.from_qiskit reads if_test and for_loop blocks")
        if getattr(op, "condition", None) is not None:      # Qiskit 1.x c_if
            raise ValueError(f"{what}: a gate conditioned on classical bits (c_if) cannot be represented in a "
                             f"circuit; condition it on measured wires in a tql.MixedCircuit (MixedCircuit.from_qiskit "
                             f"reads if_test blocks)")
        if getattr(op, "num_clbits", 0):
            raise ValueError(f"{what}: instructions on classical bits are not supported")
        if isinstance(op, self.annotated_type) and self.integer_modifiers(op):
            return self.annotated(op, wires, depth, where, what)
        return self.gate(op, wires, depth, where, what)

    def integer_modifiers(self, op) -> bool:
        """Only control, inverse and integer powers (a fractional power is left to the transpiler)."""
        control, inverse, power = self.modifiers
        return all(isinstance(m, (control, inverse)) or (isinstance(m, power) and float(m.power).is_integer())
                   for m in op.modifiers)

    def annotated(self, op, wires: tuple, depth: int, where: str, what: str) -> list:
        control, inverse, _ = self.modifiers
        end = sum(m.num_ctrl_qubits for m in op.modifiers if isinstance(m, control))
        items = self.instruction(op.base_op, wires[end:], depth + 1, where)
        # modifiers apply first to last; each one's controls sit just before the qubits it wraps
        for m in op.modifiers:
            if isinstance(m, control):
                k = m.num_ctrl_qubits
                controls, end = wires[end - k:end], end - k
                items = _controlled_items(items, controls, what)
                if m.ctrl_state != 2 ** k - 1:
                    items = _open_controls(items, controls, m.ctrl_state)
            elif isinstance(m, inverse):
                items = _inverted(items, what)
            else:
                p = int(m.power)
                items = (_inverted(items, what) if p < 0 else items) * abs(p)
        return items

    def gate(self, op, wires: tuple, depth: int, where: str, what: str) -> list:
        handler = self.handlers.get(getattr(op, "base_class", None))
        controlled = isinstance(op, self.controlled_gate)
        k = op.num_ctrl_qubits if controlled else 0
        if handler is not None:
            items = handler([_angle(p, what, self.expression, self.derived) for p in op.params], wires)
        elif op.name == "unitary" and hasattr(op, "to_matrix"):
            # Qiskit's qubit 0 is the matrix's least significant bit, a QubitUnitary's first wire its most
            items = [("unitary", wires[::-1], np.asarray(op.to_matrix(), dtype=np.complex128))]
        elif controlled and op.num_qubits == k + op.base_gate.num_qubits:
            base = self.gate(op.base_gate, wires[k:], depth + 1, where, what)
            items = _controlled_items(base, wires[:k], what)
        else:
            return self.circuit(self.decomposed(op, what), wires, depth + 1, f"'{op.name}'")
        if controlled and op.ctrl_state != 2 ** k - 1:
            items = _open_controls(items, wires[:k], op.ctrl_state)
        return items

    def decomposed(self, op, what: str):
        definition = getattr(op, "definition", None)
        if definition is not None:
            return definition
        QuantumCircuit = self.qiskit.QuantumCircuit
        try:
            sub = QuantumCircuit(op.num_qubits)
            sub.append(op, range(op.num_qubits))
            out = self.qiskit.transpile(sub, basis_gates=sorted(_STANDARD), optimization_level=0)
        except Exception as exc:   # noqa: BLE001 - Qiskit's TranspilerError, CircuitError ...
            raise ValueError(f"{what}: no tql gate, no definition, and transpiling it to the standard gates "
                             f"tql reads failed: {exc}") from None
        if any(inst.operation.name == op.name for inst in out.data):
            raise ValueError(f"{what}: no tql gate and no definition; transpiling leaves it as it is")
        return out


# =============================================================================================
# Qiskit -> Circuit: parameters
def _parameter_list(value, what: str, parameter_type) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise TypeError(f"from_qiskit: {what}= must be a list of Qiskit Parameters or a ParameterVector, got "
                        f"{type(value).__name__} {value!r}")
    out = list(value)
    for p in out:
        if not isinstance(p, parameter_type):
            raise TypeError(f"from_qiskit: {what}= must hold Qiskit Parameters, got {type(p).__name__} {p!r}")
    names = [p.name for p in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"from_qiskit: {what}= lists {', '.join(map(repr, dup))} more than once")
    return out


def _bindings(qc, inputs, trainable, parameter_type) -> tuple:
    """(name -> Param/Input with scale 1, number of weights)."""
    features = _parameter_list(inputs, "inputs", parameter_type)
    own = {p.name: p for p in qc.parameters}
    feature_names = {p.name for p in features}
    if trainable is None:
        weights = [p for p in qc.parameters if p.name not in feature_names]
    else:
        weights = _parameter_list(trainable, "trainable", parameter_type)
    both = sorted(feature_names & {p.name for p in weights})
    if both:
        raise ValueError(f"from_qiskit: {', '.join(map(repr, both))} is listed in both inputs= and trainable=")
    for p in features + weights:
        if p.name in own and own[p.name] != p:
            raise ValueError(f"from_qiskit: the listed parameter '{p.name}' is not the circuit's parameter of that "
                             f"name (another Parameter object with the same name)")
    binding = {p.name: Input(c) for c, p in enumerate(features)}
    binding.update({p.name: Param(i) for i, p in enumerate(weights)})
    missing = [name for name in own if name not in binding]
    if missing:
        raise ValueError(f"from_qiskit: the circuit's parameter(s) {', '.join(map(repr, missing))} are in neither "
                         f"inputs= nor trainable=")
    return binding, len(weights)


def _initial(circuit: Circuit, n: int, init, initial_weights):
    if initial_weights is None:
        if isinstance(init, str) and init not in _INIT:
            raise ValueError(f"from_qiskit: init must be a number or one of {_INIT}, got {init!r}")
        for _ in range(n):
            circuit.parameter(init)
        return
    if isinstance(initial_weights, torch.Tensor):           # another circuit's weights, grad and all
        values = initial_weights.detach().to("cpu", torch.float64).reshape(-1)
    else:
        try:
            values = torch.as_tensor(np.asarray(initial_weights, dtype=np.float64)).reshape(-1)
        except (TypeError, ValueError):
            raise TypeError(f"from_qiskit: initial_weights must be numbers, got {initial_weights!r}") from None
    if values.numel() != n:
        raise ValueError(f"from_qiskit: initial_weights has {values.numel()} value(s) but there are {n} trainable "
                         f"parameter(s)")
    for v in values.tolist():
        circuit.parameter(v)


# =============================================================================================
# Qiskit -> Circuit: emitting items into the circuit
class _Emitter:
    def __init__(self, circuit: Circuit, binding: dict, drop_final_measurements: bool, derived):
        self.circuit, self.binding, self.derived = circuit, binding, derived
        self.drop = drop_final_measurements
        self.touched, self.measured = set(), {}
        self.phase = 0.0

    def angle(self, a):
        if not isinstance(a, _Lin):
            return a
        (name, coefficient), = a.terms.items()
        b = self.derived.input(name) if isinstance(name, tuple) else self.binding[name]
        if isinstance(b, Param):
            return Param(b.index, coefficient)
        return Input(b.column, coefficient)

    def instruction(self, name: str, wires: tuple, items: list):
        late = [w for w in wires if w in self.measured]
        if late and any(it[0] not in ("phase", "measure") for it in items):
            raise ValueError(f"from_qiskit: instruction '{name}' on qubit(s) {list(wires)} follows the "
                             f"'{self.measured[late[0]]}' of qubit {late[0]}: only final measurements can be "
                             f"dropped (MixedCircuit.from_qiskit reads mid-circuit measurements)")
        for it in items:
            self.item(it)

    def item(self, it):
        kind = it[0]
        if kind == "phase":
            self.phase = _plus(self.phase, it[1])
        elif kind == "measure":
            _, wires, name = it
            if not self.drop:
                raise ValueError(f"from_qiskit: instruction '{name}' on qubit(s) {list(wires)}: a circuit returns "
                                 f"the state before measurement; pass drop_final_measurements=True to drop final "
                                 f"measurements, or read mid-circuit measurements with MixedCircuit.from_qiskit")
            self.measured.update((w, name) for w in wires)
        elif kind == "reset":
            _, wires, name = it
            used = [w for w in wires if w in self.touched or w in self.measured]
            if used:
                raise ValueError(f"from_qiskit: instruction '{name}' on qubit(s) {list(wires)}: a reset after "
                                 f"qubit {used[0]} was used cannot be represented in a unitary circuit (reset is "
                                 f"accepted only on qubits still in |0>; MixedCircuit.from_qiskit reads it)")
        elif kind == "unitary":
            _, wires, m = it
            self.touched.update(wires)
            self.circuit.add(G.QUBIT_UNITARY, list(wires), matrix=torch.from_numpy(m))
        else:
            _, gate, wires, angles, adjoint = it
            self.touched.update(wires)
            self.add(gate, wires, angles, adjoint)

    def add(self, gate, wires, angles, adjoint=False, **kwargs):
        # kwargs: MixedCircuit.add's condition= (qiskit_dynamic)
        for g, w, a in _final(gate, wires, angles, adjoint):
            self.circuit.add(g, w, *(self.angle(x) for x in a), **kwargs)

    def global_phase(self):
        # e^{iα} = P(2α) RZ(-2α) on wire 0: a Circuit has no global-phase slot; being e^{iα}·1, it
        # may follow a dropped measurement of wire 0
        if self.phase != 0.0:
            self.add(G.P, (0,), (_times(self.phase, 2.0),))
            self.add(G.RZ, (0,), (_times(self.phase, -2.0),))


def from_qiskit(qc, *, inputs=None, trainable=None, initial_weights=None, init="uniform",
                drop_final_measurements: bool = False, global_phase: bool = True, dtype=None,
                fuse: bool = True, max_fused_wires: Optional[int] = None, return_feature_map: bool = False):
    """A :class:`Circuit` from a ``qiskit.QuantumCircuit`` (qubit i → wire i).

    ``inputs``: the Parameters (a list or a ParameterVector) read from the input features, column c
    being ``inputs[c]`` (TorchConnector's ``input_params``). ``trainable``: the Parameters that
    become ``circuit.weights``, weight i being ``trainable[i]``; default every other parameter of
    ``qc`` in ``qc.parameters`` order. Weights start from ``initial_weights`` (one value each) or
    ``init`` (as :meth:`Circuit.parameter`). ``drop_final_measurements`` drops measurements no
    instruction follows on their qubits (otherwise a measurement is an error). ``global_phase=False``
    drops the circuit's global phase. ``return_feature_map=True`` returns ``(circuit, feature_map)``,
    ``feature_map`` a :class:`~torchquantum_layers.qiskit_features.DerivedFeatures` computing the
    derived columns of angles non-affine in the inputs, so that ``circuit(feature_map(x))`` is the
    state for features ``x`` (one column per ``inputs`` entry); without it such an angle is a
    ValueError. See the module docstring for the gates, angles and errors."""
    circuit, derived = _read(qc, inputs, trainable, initial_weights, init, drop_final_measurements, global_phase,
                             dtype, fuse, max_fused_wires, return_feature_map)
    return (circuit, derived.module(circuit.n_inputs)) if return_feature_map else circuit


def _read(qc, inputs, trainable, initial_weights, init, drop_final_measurements, global_phase, dtype, fuse,
          max_fused_wires, allow_derived: bool):
    qiskit = _qiskit()
    from qiskit.circuit import Parameter
    if not isinstance(qc, qiskit.QuantumCircuit):
        raise TypeError(f"from_qiskit: expected a qiskit.QuantumCircuit, got {type(qc).__name__}")
    if qc.num_qubits == 0:
        raise ValueError("from_qiskit: the circuit has no qubits, so there is nothing to act on")
    binding, n_weights = _bindings(qc, inputs, trainable, Parameter)
    circuit = Circuit(qc.num_qubits, fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    _initial(circuit, n_weights, init, initial_weights)
    derived = DerivedAngles(binding, sum(isinstance(b, Input) for b in binding.values()), allow_derived)
    emitter = _Emitter(circuit, binding, drop_final_measurements, derived)
    reader = _Reader(qiskit, derived)
    for name, wires, items in reader.instructions(qc, tuple(range(qc.num_qubits)), 0, "the circuit"):
        emitter.instruction(name, wires, items)
    if global_phase:
        emitter.global_phase()
    return circuit, derived


def layer_from_qiskit(qc, observables, *, inputs=None, trainable=None, initial_weights=None, init="uniform",
                      drop_final_measurements: bool = False, global_phase: bool = True, dtype=None,
                      fuse: bool = True, max_fused_wires: Optional[int] = None, **layer_kwargs):
    """A :class:`~torchquantum_layers.QuantumLayer` from a ``qiskit.QuantumCircuit``: what Qiskit
    ML's ``TorchConnector(EstimatorQNN(qc, observables, input_params=inputs, weight_params=trainable))``
    computes, ``(B, len(inputs))`` features → ``(B, n_observables)`` expectations.

    The circuit is read by :func:`from_qiskit` (same keyword arguments) with derived columns
    allowed; the layer's ``input_map`` is the :class:`~torchquantum_layers.qiskit_features.DerivedFeatures`
    computing them (so classical layers before it train through them), absent where the circuit
    has no inputs. ``observables``: a ``SparsePauliOp`` or a list of them (read as by
    :func:`hamiltonian_from_sparse_pauli_op`), or anything :class:`QuantumLayer` takes; a single
    one gives one output column. ``layer_kwargs`` go to :class:`QuantumLayer` (``diff_method``,
    ``shots``, ``noise_model`` ...)."""
    from .layers import QuantumLayer
    if "input_map" in layer_kwargs:
        raise TypeError("layer_from_qiskit: the input_map is the derived-feature module; put a map of your own "
                        "before the layer (nn.Sequential(my_map, layer))")
    circuit, derived = _read(qc, inputs, trainable, initial_weights, init, drop_final_measurements, global_phase,
                             dtype, fuse, max_fused_wires, True)
    feature_map = derived.module(circuit.n_inputs)
    return QuantumLayer(circuit, _observables(observables), input_map=feature_map if feature_map.in_features else None,
                        **layer_kwargs)


def _observables(observables):
    from qiskit.quantum_info import SparsePauliOp
    if isinstance(observables, SparsePauliOp):
        return hamiltonian_from_sparse_pauli_op(observables)
    if isinstance(observables, (list, tuple)):
        return [hamiltonian_from_sparse_pauli_op(o) if isinstance(o, SparsePauliOp) else o for o in observables]
    return observables


# =============================================================================================
# Circuit -> Qiskit
def _lib():
    import qiskit.circuit.library as lib
    return lib


def _direct(lib) -> dict:
    """Table gate name -> (constructor from angles, reverse the qubits?)."""
    return {
        "I": lib.IGate, "X": lib.XGate, "Y": lib.YGate, "Z": lib.ZGate, "H": lib.HGate, "S": lib.SGate,
        "SDG": lib.SdgGate, "T": lib.TGate, "TDG": lib.TdgGate, "SX": lib.SXGate, "SXDG": lib.SXdgGate,
        "P": lib.PhaseGate, "RX": lib.RXGate, "RY": lib.RYGate, "RZ": lib.RZGate, "U2": lib.U2Gate,
        "U3": lib.UGate, "CNOT": lib.CXGate, "CY": lib.CYGate, "CZ": lib.CZGate, "CH": lib.CHGate,
        "SWAP": lib.SwapGate, "ISWAP": lib.iSwapGate, "CP": lib.CPhaseGate, "CRX": lib.CRXGate,
        "CRY": lib.CRYGate, "CRZ": lib.CRZGate, "CU3": lib.CU3Gate, "RXX": lib.RXXGate, "RYY": lib.RYYGate,
        "RZZ": lib.RZZGate, "RZX": lib.RZXGate, "TOFFOLI": lib.CCXGate, "CCZ": lib.CCZGate,
        "CSWAP": lib.CSwapGate,
    }


def _control(gate, k: int, ctrl_state=None):
    # a ControlledGate (Qiskit 3 would default to an AnnotatedOperation, which fewer tools read)
    return gate.control(k, ctrl_state=ctrl_state, annotated=False)


def _sequence(lib, name: str, angles: list, k: int, data) -> list:
    """(Qiskit gate, local qubits) for a table gate Qiskit has no single gate for; local qubit j is
    the gate's wire j."""
    if name == "ROT":                       # Rot(φ, θ, ω) = RZ(ω) RY(θ) RZ(φ)
        phi, theta, omega = angles
        return [(lib.RZGate(phi), (0,)), (lib.RYGate(theta), (0,)), (lib.RZGate(omega), (0,))]
    if name == "SINGLEEXCITATION":          # CX(a, b) · CRY(θ)(b → a) · CX(a, b)
        cx = lib.CXGate()
        return [(cx, (0, 1)), (lib.CRYGate(angles[0]), (1, 0)), (cx, (0, 1))]
    if name == "DOUBLEEXCITATION":
        # CX from wire 0 onto the others maps |1100⟩ to |1011⟩: then only wire 0 differs from |0011⟩,
        # and the Givens rotation is RY on wire 0 where wires (1, 2, 3) read (0, 1, 1)
        fan = [(lib.CXGate(), (0, t)) for t in (1, 2, 3)]
        ry = _control(lib.RYGate(angles[0]), 3, ctrl_state=0b110)
        return fan + [(ry, (1, 2, 3, 0))] + fan[::-1]
    if name == "MULTIRZ":                   # parity onto the last wire, RZ, and back
        ladder = [(lib.CXGate(), (j, j + 1)) for j in range(k - 1)]
        return ladder + [(lib.RZGate(angles[0]), (k - 1,))] + ladder[::-1]
    if name == "MULTICONTROLLEDX":
        return [(lib.MCXGate(k - 1), tuple(range(k)))]
    if name == "QUBITUNITARY":              # Qiskit's matrix has qubit 0 as its least significant bit
        return [(lib.UnitaryGate(data), tuple(range(k))[::-1])]
    if name == "DIAGONALUNITARY":
        return [(lib.UnitaryGate(np.diag(data)), tuple(range(k))[::-1])]
    raise TypeError(f"to_qiskit: gate {name} has no Qiskit form")


def _target_sequence(lib, direct: dict, gate, angles, k: int, data) -> list:
    if G.condition_of(gate) is not None:
        raise TypeError(f"to_qiskit: {gate.name} is conditioned on measurement outcomes (a MixedCircuit gate)")
    if G.GATES.get(gate.name) is gate and gate.name in direct:
        return [(direct[gate.name](*angles), tuple(range(k)))]
    if gate.n_controls:
        c = gate.n_controls
        base = _target_sequence(lib, direct, gate.target, angles, k - c, data)
        # a product of controlled gates is the controlled product (no phase to carry: tql gates have none)
        return [(_control(g, c), tuple(range(c)) + tuple(c + q for q in qs)) for g, qs in base]
    return _sequence(lib, gate.name, angles, k, data)


def _qiskit_angle(a, w, x):
    if isinstance(a, Param):
        return w[a.index] if a.scale == 1.0 else a.scale * w[a.index]
    if isinstance(a, Input):
        return x[a.column] if a.scale == 1.0 else a.scale * x[a.column]
    return float(a)


def to_qiskit(circuit: Circuit, *, return_parameters: bool = False, weights_name: str = "w",
              inputs_name: str = "x"):
    """A ``qiskit.QuantumCircuit`` of the same unitary (wire i → qubit i). Trainable angles are
    ``ParameterVector(weights_name)`` elements (``w[i]`` is weight i, times its scale), input angles
    ``ParameterVector(inputs_name)`` elements (``x[c]`` is column c), fixed angles numbers.
    ``return_parameters=True`` returns ``(qc, weights_vector, inputs_vector)``: what
    :func:`from_qiskit` takes back as ``trainable=`` and ``inputs=``."""
    qiskit = _qiskit()
    from qiskit.circuit import ParameterVector
    if not isinstance(circuit, Circuit):
        raise TypeError(f"to_qiskit: expected a tql.Circuit, got {type(circuit).__name__}")
    if circuit.is_noisy:
        raise TypeError("to_qiskit: the circuit has channels, measurements, resets or a noise model; only a "
                        "unitary tql.Circuit converts")
    lib = _lib()
    direct = _direct(lib)
    w = ParameterVector(weights_name, circuit.num_parameters)
    x = ParameterVector(inputs_name, circuit.n_inputs)
    qc = qiskit.QuantumCircuit(circuit.n_wires)
    for op in circuit.ops:
        angles = [_qiskit_angle(a, w, x) for a in op.angles]
        data = circuit.data(op)
        data = None if data is None else data.detach().cpu().numpy().astype(np.complex128)
        sequence = _target_sequence(lib, direct, op.gate, angles, len(op.wires), data)
        if op.adjoint:
            sequence = [(g.inverse(), qs) for g, qs in reversed(sequence)]
        for g, qs in sequence:
            qc.append(g, [op.wires[q] for q in qs])
    return (qc, w, x) if return_parameters else qc


# =============================================================================================
# SparsePauliOp <-> Hamiltonian
def hamiltonian_from_sparse_pauli_op(op):
    """A :class:`~torchquantum_layers.Hamiltonian` from a ``qiskit.quantum_info.SparsePauliOp`` with
    numeric coefficients; Qiskit qubit i is wire i (the label ``"XIZ"`` is ``X2 Z0``)."""
    _qiskit()
    from qiskit.quantum_info import SparsePauliOp
    from .observables import Hamiltonian, PauliString
    if not isinstance(op, SparsePauliOp):
        raise TypeError(f"hamiltonian_from_sparse_pauli_op: expected a SparsePauliOp, got {type(op).__name__}")
    if op.coeffs.dtype == object:
        raise TypeError("hamiltonian_from_sparse_pauli_op: the SparsePauliOp has parametrised coefficients; bind "
                        "them first (op.assign_parameters)")
    bits = 1 << np.arange(op.num_qubits, dtype=object)
    # a SparsePauliOp keeps each string's phase (-i)^q apart from its coefficient
    phases = (-1j) ** np.asarray(op.paulis.phase)
    terms = []
    for xs, zs, c, ph in zip(op.paulis.x, op.paulis.z, op.coeffs, phases):
        coeff = complex(c * ph)
        coeff = coeff.real if coeff.imag == 0 else coeff
        terms.append((coeff, PauliString.from_masks(int(bits[xs].sum()), int(bits[zs].sum()))))
    return Hamiltonian(terms, n_wires=op.num_qubits)


def to_sparse_pauli_op(H, n_wires: Optional[int] = None):
    """A ``qiskit.quantum_info.SparsePauliOp`` of a Hamiltonian or PauliString (wire i → qubit i),
    on ``n_wires`` qubits (default ``H.n_wires``)."""
    _qiskit()
    from qiskit.quantum_info import SparsePauliOp
    from .observables import Hamiltonian, PauliString
    if isinstance(H, PauliString):
        H = Hamiltonian(H)
    if not isinstance(H, Hamiltonian):
        raise TypeError(f"to_sparse_pauli_op: expected a tql.Hamiltonian or PauliString, got {type(H).__name__}")
    n = H.n_wires if n_wires is None else n_wires
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < max(1, H.n_wires):
        raise ValueError(f"to_sparse_pauli_op: n_wires={n_wires!r} must be an int >= {max(1, H.n_wires)}")
    letters = {(0, 0): "I", (1, 0): "X", (1, 1): "Y", (0, 1): "Z"}
    sparse = []
    for c, p in H.terms:
        wires = [w for w in range(n) if ((p._x | p._z) >> w) & 1]
        label = "".join(letters[((p._x >> w) & 1, (p._z >> w) & 1)] for w in wires)
        sparse.append((label, wires, complex(c)))
    if not sparse:
        sparse = [("", [], 0.0)]
    return SparsePauliOp.from_sparse_list(sparse, num_qubits=int(n))
