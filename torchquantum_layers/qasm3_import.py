"""OpenQASM 3 in: :func:`from_qasm3` (``Circuit.from_qasm3``; also ``tql.qasm3.from_qasm3``).

The text is parsed by the reference parser ``openqasm3`` (``pip install torchquantum-layers[qasm3]``,
imported only when a program is read) and its syntax tree is expanded into table gates, exactly:
``circuit.unitary()`` equals the program's unitary entry by entry, global phase included.

Read
    ``OPENQASM 3`` / ``3.x`` (optional; ``OPENQASM 2.0`` is refused with a pointer to
    :func:`~torchquantum_layers.qasm.from_qasm`, as OpenQASM 2.0's ``U`` and qelib1.inc differ).
    ``include "stdgates.inc";`` brings every stdgates.inc gate (without it only ``U``, ``gphase`` and
    the program's own gates are known). Each is the table gate with stdgates' matrix, phase
    included: ``u3(θ,φ,λ)`` and ``u2(φ,λ)`` are e^{-i(φ+λ)/2}·U3 / U2 (stdgates' ``gphase`` in their
    bodies), ``u1``, ``phase`` and ``p`` are P, ``cu(θ,φ,λ,γ)`` is P(γ) on the control and CU3; the
    built-in ``U`` is the table's U3 exactly.
    Qubits: ``qubit[n] q;``, ``qubit a;``, ``qreg q[n];``; registers become wires in declaration order
    (``qubit[2] a; qubit b;``: a[0] → wire 0, a[1] → 1, b → 2). Operands may be whole registers (the
    call is broadcast), ``q[i]`` (negative i counts from the end), ranges ``q[0:2]`` (end included),
    sets ``q[{0, 2}]`` and ``let`` aliases of them (``let a = q[0:1] ++ r;``).
    Modifiers ``ctrl @``, ``ctrl(k) @``, ``negctrl(k) @``, ``inv @``, ``pow(k) @`` (k an integer, negative
    too; a fractional power is refused), nested in any order, on any gate; ``gphase(γ)``, which under
    ``ctrl`` becomes the phase on the controls. ``gate`` definitions are expanded inline (nested, their
    parameters bound to the call's expressions). Angle expressions: numbers, ``pi π tau τ euler ℇ``,
    ``+ - * / **``, unary minus, sin cos tan exp ln log sqrt arcsin arccos arctan floor ceiling;
    arithmetic is real (``1/2`` is 0.5). ``const`` declarations and classical ``float``/``angle``/``int``
    variables with an initial value, ``for`` loops over constant ranges or sets (unrolled), ``box``
    (its body), ``barrier``, ``delay``, pragmas, annotations and calibrations (timing only: the
    unitary is unchanged) are read.

Angles and inputs
    ``input float[64] name;`` (or ``angle``) declares an angle the circuit keeps symbolic: a trainable
    weight (:class:`~torchquantum_layers.Param`) or an input-feature column
    (:class:`~torchquantum_layers.Input`), chosen by ``inputs=``:

    * ``"auto"`` (default): ``theta_<i>`` is weight i and ``x_<c>`` column c (what
      ``circuit.to_qasm3(parameters="input")`` writes, so such a program reads back to the same
      circuit); any other input is a new weight, numbered after them in declaration order;
    * ``"trainable"``: every input is a weight, in declaration order; ``"features"``: every input is
      a column, in declaration order;
    * a dict ``{name: value}``: a number binds the input to that fixed value, ``Param(i, scale)`` /
      ``Input(c, scale)`` maps it; inputs not in the dict follow ``"auto"``.

    A gate angle must be linear in the inputs: ``0.5*theta_3`` is ``Param(3, 0.5)``; a sum such as
    ``theta + x_0 - pi/2`` is split into one gate per term where the gate's angle is additive (the
    rotations, P and their controlled forms) and ``U``/``u3``/``cu`` are expanded as P·RY·P for it;
    ``sin(theta)``, ``theta*x_0`` and the like raise ValueError. Weights start from ``init`` (as in
    ``Circuit.parameter``); there are 1 + the largest weight index of them.

Global phase
    A ``Circuit`` has no global-phase slot: the phase the program defines (top-level ``gphase``,
    stdgates' u2/u3 phases, ...) is summed and put on wire 0 at the end as P(2α)·RZ(-2α) = e^{iα}·1
    (one such pair per input the phase depends on, so a symbolic phase stays symbolic).
    ``global_phase=False`` drops it (the circuit is then exact up to that phase).

Measurement and reset
    As :func:`~torchquantum_layers.qasm.from_qasm` does for OpenQASM 2.0: ``measure`` (any form, also
    ``bit b = measure q;``) is dropped, and a gate on a qubit after it was measured is an error;
    ``reset`` is accepted on a qubit nothing has touched (still |0⟩) and an error anywhere else.
    ``mixed=True`` (what ``MixedCircuit.from_qasm3`` passes) returns a MixedCircuit that keeps both as
    instructions where they stand (the global phase, unobservable on a density matrix, is dropped).

Refused
    Every error is a ValueError (TypeError for arguments of the wrong type)
    ``from_qasm3: line N, column M: <what> [(inside gate 'g', line K: `...`)] in `<statement>```:
    unknown gates (with a hint when stdgates.inc is not included), wrong numbers of qubits or
    parameters, out-of-range indices, a qubit given twice, non-integer ``pow``, non-finite angles,
    nonlinear angles, classical control flow (``if``, ``while``, ``switch``, subroutines, assignments),
    types other than the ones above, parse errors (with the parser's line and column). The
    limits of :mod:`~torchquantum_layers.qasm` apply (register size, gate nesting, expanded gates).
"""
from __future__ import annotations

import contextlib
import io
import math
import numbers
import re
from typing import Optional

from . import gates as G
from .circuit import _INIT, Circuit, Input, Param
from .qasm import MAX_EXPANDED_GATES, MAX_GATE_NESTING, MAX_REGISTER_SIZE, _read_source
from .qasm3_angles import _finite, _inputs_of, _Lin, _over, _plus, _times
from .qasm3_gates import _BUILTIN, _STDGATES, _controlled, _Def, _estimate, _final, _inverse, _op, _Std

__all__ = ["from_qasm3", "INPUT_MODES"]

INPUT_MODES = ("auto", "trainable", "features")
MAX_WEIGHT_INDEX = 1_000_000       # theta_<i> above this is refused (it would allocate i weights)

_CONSTANTS = {"pi": math.pi, "π": math.pi, "tau": math.tau, "τ": math.tau, "euler": math.e, "ℇ": math.e}
_FUNCS = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp, "ln": math.log,
          "log": math.log, "sqrt": math.sqrt, "arcsin": math.asin, "arccos": math.acos,
          "arctan": math.atan, "floor": math.floor, "ceiling": math.ceil}
_THETA = re.compile(r"theta_(0|[1-9][0-9]*)")
_COLUMN = re.compile(r"x_(0|[1-9][0-9]*)")
# statements that make a program depend on classical values at run time
_REFUSED = {"BranchingStatement": "if", "WhileLoop": "while", "SwitchStatement": "switch",
            "SubroutineDefinition": "def (subroutine)", "ExternDeclaration": "extern",
"ClassicalAssignment": "classical assignment",
            "ExpressionStatement": "expression statement", "ReturnStatement": "return",
            "BreakStatement": "break", "ContinueStatement": "continue", "EndStatement": "end"}
_IGNORED = {"Pragma", "CalibrationGrammarDeclaration", "CalibrationStatement", "CalibrationDefinition"}


def _openqasm3():
    try:
        import openqasm3
        import openqasm3.parser  # noqa: F401  (needs the antlr4 runtime: the [parser] extra)
    except ImportError as exc:
        raise ImportError("from_qasm3 needs the reference OpenQASM 3 parser openqasm3[parser]: "
                          "pip install torchquantum-layers[qasm3]") from exc
    return openqasm3


# =============================================================================================
# the reader
class _Fail(Exception):
    def __init__(self, what: str, context: tuple = ()):
        super().__init__(what)
        self.what, self.context = what, context


def _kind(node) -> str:
    return type(node).__name__


class _Reader:
    def __init__(self, openqasm3, text: str, inputs, mixed: bool):
        self.oq = openqasm3
        self.lines = text.splitlines()
        self.mixed = mixed
        self.given = inputs if isinstance(inputs, dict) else {}
        self.gates: dict = dict(_BUILTIN)
        self.stdgates = False
        self.env: dict = {}               # every classical name at top level -> number or _Lin
        self.consts: dict = {}            # const declarations: what gate bodies see
        self.names: dict = {}             # declared name -> what it is
        self.free: list = []              # inputs kept symbolic, in declaration order
        self.qregs: dict = {}             # name -> (wires, is it a single qubit?); aliases too
        self.cregs: dict = {}             # name -> (bit indices, is it a single bit?)
        self.inputs: list = []            # declared input names
        self.labels: list = []            # wire -> "q[0]"
        self.items: list = []             # ops, ("measure", wires), ("reset", wires)
        self.phase = 0.0                  # the program's global phase
        self.touched: set = set()
        self.measured: set = set()
        self.context: list = []           # where an error is: gate bodies and loop iterations

    # -- errors ---------------------------------------------------------------------------------
    def fail(self, what: str):
        raise _Fail(what, tuple(self.context))

    def snippet(self, node) -> str:
        span = getattr(node, "span", None)
        if span is None:
            text = self.oq.dumps(node)
        else:
            rows = self.lines[span.start_line - 1:span.end_line]
            if len(rows) == 1:
                text = rows[0][span.start_column:span.end_column + 1]
            else:
                text = " ".join([rows[0][span.start_column:]] + rows[1:-1] + [rows[-1][:span.end_column + 1]])
        text = " ".join(text.split())
        return text if len(text) <= 80 else text[:77] + "..."

    def where(self, node) -> str:
        span = getattr(node, "span", None)
        return f"line {span.start_line}" if span else "line ?"

    def text(self, expr) -> str:
        try:
            return self.oq.dumps(expr)
        except Exception:   # noqa: BLE001 - only for a message
            return _kind(expr)

    def statement(self, stmt):
        try:
            self.dispatch(stmt)
        except _Fail as exc:
            span = getattr(stmt, "span", None)
            at = f"line {span.start_line}, column {span.start_column + 1}" if span else "line ?"
            inside = f" ({'; '.join(exc.context)})" if exc.context else ""
            raise ValueError(f"from_qasm3: {at}: {exc.what}{inside} in `{self.snippet(stmt)}`") from None
        except RecursionError:
            raise ValueError(f"from_qasm3: {self.where(stmt)}: the statement nests too deeply to read "
                             f"in `{self.snippet(stmt)}`") from None

    # -- statements -----------------------------------------------------------------------------
    def dispatch(self, stmt):
        kind = _kind(stmt)
        if kind == "Include":
            if stmt.filename == "stdgates.inc":
                self.stdgates = True
                for name, std in _STDGATES.items():
                    self.gates.setdefault(name, std)
            elif stmt.filename == "qelib1.inc":
                self.fail('"qelib1.inc" is OpenQASM 2.0\'s gate library: read an OpenQASM 2.0 program with '
                          'tql.Circuit.from_qasm, or include "stdgates.inc"')
            else:
                self.fail(f'cannot include "{stmt.filename}": only "stdgates.inc" is known')
        elif kind == "QubitDeclaration":
            self.qubits(stmt)
        elif kind == "ClassicalDeclaration":
            self.classical(stmt, const=False)
        elif kind == "ConstantDeclaration":
            self.classical(stmt, const=True)
        elif kind == "IODeclaration":
            self.io(stmt)
        elif kind == "QuantumGateDefinition":
            self.define(stmt)
        elif kind in ("QuantumGate", "QuantumPhase"):
            self.call(stmt)
        elif kind in ("QuantumBarrier", "DelayInstruction"):
            for q in stmt.qubits:                  # no effect on the state; the operands must exist
                self.operand(q, self.qregs, "qubit")
        elif kind == "Box":
            for s in stmt.body:
                self.statement(s)
        elif kind == "ForInLoop":
            self.loop(stmt)
        elif kind == "AliasStatement":
            elements, regs, word = self.alias(stmt.value)
            self.declare(stmt.target.name, f"a {word} register")
            regs[stmt.target.name] = (elements, False)
        elif kind == "QuantumMeasurementStatement":
            bits = None if stmt.target is None else self.operand(stmt.target, self.cregs, "bit")[0]
            self.measure(stmt.measure.qubit, bits)
        elif kind == "QuantumReset":
            self.reset(stmt.qubits)
        elif kind in _IGNORED:
            pass
        elif kind in _REFUSED:
            self.fail(f"'{_REFUSED[kind]}' is not supported: a circuit is a fixed sequence of gates, with no "
                      f"classical control flow or classical state")
        else:
            self.fail(f"{kind} statements are not supported")

    def declare(self, name: str, what: str):
        if name in _CONSTANTS:
            self.fail(f"'{name}' is a built-in constant and cannot be declared")
        if name in self.names:
            self.fail(f"'{name}' is already declared (as {self.names[name]})")
        self.names[name] = what

    def size(self, expr, name: str) -> int:
        size = self.integer(expr, self.env, f"the size of '{name}'")
        if size < 1:
            self.fail(f"register '{name}' must have at least one element, got size {size}")
        if size > MAX_REGISTER_SIZE:
            self.fail(f"register '{name}' of size {size} is larger than {MAX_REGISTER_SIZE}")
        return size

    def qubits(self, stmt):
        name = stmt.qubit.name
        size = None if stmt.size is None else self.size(stmt.size, name)
        self.declare(name, "a qubit register")
        self.qregs[name] = (list(range(len(self.labels), len(self.labels) + (size or 1))), size is None)
        self.labels += [name] if size is None else [f"{name}[{j}]" for j in range(size)]
        if len(self.labels) > MAX_REGISTER_SIZE:
            self.fail(f"the program declares more than {MAX_REGISTER_SIZE} qubits")

    def bits(self, name: str, size_expr):
        size = None if size_expr is None else self.size(size_expr, name)
        self.declare(name, "a bit register")
        self.cregs[name] = (list(range(size or 1)), size is None)
        return size

    def classical(self, stmt, const: bool):
        name, tkind, init = stmt.identifier.name, _kind(stmt.type), stmt.init_expression
        if tkind == "BitType" and not const:
            size = self.bits(name, stmt.type.size)
            if init is not None and _kind(init) == "QuantumMeasurement":
                self.measure(init.qubit, list(range(size or 1)))
            return
        if tkind not in ("FloatType", "AngleType", "IntType", "UintType"):
            self.fail(f"{tkind.replace('Type', '').lower()} variables are not supported (only bit registers, "
                      f"and float, angle, int and uint values)")
        if init is None:
            self.fail(f"'{name}' has no value: a classical variable must be initialised (and is never assigned)")
        value = self.angle(init, self.env)
        if const and isinstance(value, _Lin):
            self.fail(f"const '{name}' depends on the input(s) {_inputs_of(value)}")
        if tkind in ("IntType", "UintType"):
            value = self.integer(init, self.env, f"the value of int '{name}'")
        self.declare(name, "a constant" if const else "a classical variable")
        self.env[name] = value
        if const:
            self.consts[name] = value

    def io(self, stmt):
        name, tkind = stmt.identifier.name, _kind(stmt.type)
        if stmt.io_identifier.name == "output":
            if tkind != "BitType":
                self.fail("only bit outputs are supported (they hold measurements)")
            self.bits(name, stmt.type.size)
            return
        self.declare(name, "an input")
        self.inputs.append(name)
        given = self.given.get(name)
        if isinstance(given, (Param, Input)) or given is None:
            if tkind not in ("FloatType", "AngleType"):
                self.fail(f"input '{name}' of type {tkind.replace('Type', '').lower()}: only float and angle "
                          f"inputs become circuit angles (give a value with inputs={{'{name}': ...}})")
            self.env[name] = _Lin(0.0, {name: 1.0})
            self.free.append(name)
            return
        value = float(given)
        if tkind in ("IntType", "UintType") and not value.is_integer():
            self.fail(f"input int '{name}' is given the value {given!r}, not an integer")
        elif tkind not in ("FloatType", "AngleType", "IntType", "UintType"):
            self.fail(f"input '{name}' of type {tkind.replace('Type', '').lower()} is not supported")
        self.env[name] = value

    def loop(self, stmt):
        var, spec = stmt.identifier.name, stmt.set_declaration
        kind = _kind(spec)
        if kind == "RangeDefinition":
            if spec.start is None or spec.end is None:
                self.fail("a for loop needs a range with a start and an end")
            start = self.integer(spec.start, self.env, "the start of the range")
            end = self.integer(spec.end, self.env, "the end of the range")
            step = 1 if spec.step is None else self.integer(spec.step, self.env, "the step of the range")
            if step == 0:
                self.fail("the range has step 0")
            if abs(end - start) // abs(step) > MAX_EXPANDED_GATES:
                self.fail(f"the loop runs more than {MAX_EXPANDED_GATES} times")
            values = list(range(start, end + (1 if step > 0 else -1), step))
        elif kind == "DiscreteSet":
            values = [self.integer(v, self.env, "a value of the set") for v in spec.values]
        else:
            self.fail("a for loop must run over a constant range [a:b] or set {a, b, ...}")
        for value in values:
            scope = dict(self.names), dict(self.env), dict(self.consts), dict(self.cregs), dict(self.qregs)
            self.env[var] = float(value)
            self.context.append(f"for loop on {self.where(stmt)}, {var} = {value}")
            try:
                for s in stmt.block:
                    self.statement(s)
            finally:
                self.context.pop()
            self.names, self.env, self.consts, self.cregs, self.qregs = scope     # block scope

    # -- expressions ----------------------------------------------------------------------------
    def value(self, e, env):
        kind = _kind(e)
        if kind in ("IntegerLiteral", "FloatLiteral"):
            try:
                return float(e.value)
            except OverflowError:
                self.fail(f"the number {e.value} is too large")
        if kind == "Identifier":
            if e.name in env:
                return env[e.name]
            if e.name in _CONSTANTS:
                return _CONSTANTS[e.name]
            if e.name in self.names and e.name not in self.consts and env is not self.env:
                self.fail(f"'{e.name}' ({self.names[e.name]}) is not visible inside a gate body, which sees "
                          f"its parameters and constants only")
            if e.name in self.qregs or e.name in self.cregs:
                self.fail(f"'{e.name}' is {self.names[e.name]}, not a number")
            self.fail(f"unknown identifier '{e.name}'")
        if kind == "UnaryExpression":
            if e.op.name != "-":
                self.fail(f"the operator '{e.op.name}' is not supported in an angle expression")
            return _times(self.value(e.expression, env), -1.0)
        if kind == "BinaryExpression":
            return self.binary(e, env)
        if kind == "FunctionCall":
            name = e.name.name
            if name not in _FUNCS:
                self.fail(f"unknown function '{name}' (known: {', '.join(_FUNCS)})")
            if len(e.arguments) != 1:
                self.fail(f"{name} takes one argument, got {len(e.arguments)}")
            x = self.value(e.arguments[0], env)
            if isinstance(x, _Lin):
                self.nonlinear(f"{name}(...)", x)
            try:
                return float(_FUNCS[name](x))
            except (ValueError, OverflowError):
                self.fail(f"{name}({x!r}) is undefined")
        if kind == "Cast" and _kind(e.type) in ("FloatType", "AngleType"):
            return self.value(e.argument, env)
        self.fail(f"`{self.text(e)}` ({kind}) is not supported in an angle expression")

    def binary(self, e, env):
        op = e.op.name
        if op not in ("+", "-", "*", "/", "**"):
            self.fail(f"the operator '{op}' is not supported in an angle expression")
        a, b = self.value(e.lhs, env), self.value(e.rhs, env)
        try:
            if op == "+":
                return _plus(a, b)
            if op == "-":
                return _plus(a, _times(b, -1.0))
            if op == "*":
                if isinstance(a, _Lin) and isinstance(b, _Lin):
                    self.nonlinear("a product", a, b)
                return _times(b, a) if isinstance(b, _Lin) else _times(a, b)
            if op == "/":
                if isinstance(b, _Lin):
                    self.nonlinear("a division by an expression", b)
                if b == 0:
                    self.fail(f"division by zero in `{self.text(e)}`")
                return _over(a, b)
            if isinstance(a, _Lin) or isinstance(b, _Lin):
                self.nonlinear("a power", a, b)
            return math.pow(a, b)
        except (OverflowError, ValueError):
            self.fail(f"`{self.text(e)}` is undefined or too large")

    def nonlinear(self, what: str, *values):
        self.fail(f"{what} of the input(s) {_inputs_of(*values)} is not linear in them: a circuit angle is a "
                  f"sum of constant * input terms (each input a trainable weight or a feature column)")

    def angle(self, e, env):
        v = self.value(e, env)
        if not _finite(v):
            self.fail(f"the angle `{self.text(e)}` is not finite")
        return v

    def integer(self, e, env, what: str) -> int:
        v = self.value(e, env)
        if isinstance(v, _Lin):
            self.fail(f"{what} must be a constant integer, but depends on the input(s) {_inputs_of(v)}")
        if not math.isfinite(v) or not float(v).is_integer():
            self.fail(f"{what} must be an integer, got {v!r}")
        return int(v)

    def check_names(self, e, known: set, gate: str):
        kind = _kind(e)
        if kind == "Identifier":
            if e.name not in known and e.name not in _CONSTANTS:
                self.fail(f"unknown identifier '{e.name}' in the body of gate '{gate}' (a gate body sees its "
                          f"parameters and constants only)")
        for child in {"BinaryExpression": ("lhs", "rhs"), "UnaryExpression": ("expression",),
                      "Cast": ("argument",)}.get(kind, ()):
            self.check_names(getattr(e, child), known, gate)
        if kind == "FunctionCall":
            for a in e.arguments:
                self.check_names(a, known, gate)

    # -- qubit operands -------------------------------------------------------------------------
    def register(self, name: str, regs: dict, word: str):
        if name not in regs:
            if name in self.names:
                self.fail(f"'{name}' is {self.names[name]}, not a {word} register")
            self.fail(f"undeclared {word} register '{name}'")
        return regs[name]

    def index(self, e, size: int, name: str, word: str) -> int:
        i = self.integer(e, self.env, f"an index of '{name}'")
        if not -size <= i < size:
            self.fail(f"index {i} out of range for {word}[{size}] {name}")
        return i % size

    def select(self, name: str, regs: dict, word: str, index):
        """(elements, several?) of ``name[index]``: an index, a range (end included) or a set."""
        elements, single = self.register(name, regs, word)
        if single:
            self.fail(f"'{name}' is a single {word} and cannot be indexed")
        size = len(elements)
        if _kind(index) == "DiscreteSet":
            return [elements[self.index(v, size, name, word)] for v in index.values], True
        if len(index) != 1:
            self.fail(f"'{name}[...]' takes one index or range, got {len(index)}")
        el = index[0]
        if _kind(el) != "RangeDefinition":
            return [elements[self.index(el, size, name, word)]], False
        start = 0 if el.start is None else self.index(el.start, size, name, word)
        end = size - 1 if el.end is None else self.index(el.end, size, name, word)
        step = 1 if el.step is None else self.integer(el.step, self.env, f"the step of a range of '{name}'")
        if step == 0:
            self.fail(f"a range of '{name}' has step 0")
        return [elements[j] for j in range(start, end + (1 if step > 0 else -1), step)], True

    def operand(self, q, regs: dict, word: str):
        """(wires or bit indices, whole register?) of one operand."""
        kind = _kind(q)
        if kind == "Identifier":
            elements, single = self.register(q.name, regs, word)
            return list(elements), not single
        if kind != "IndexedIdentifier":
            self.fail(f"expected a {word} operand, got `{self.text(q)}`")
        if len(q.indices) != 1:
            self.fail(f"'{q.name.name}' is one-dimensional, got {len(q.indices)} indices")
        return self.select(q.name.name, regs, word, q.indices[0])

    def alias(self, value):
        """(elements, registers, word) of the right-hand side of ``let``: a register, a part of
        one, or a concatenation ``a ++ b``."""
        kind = _kind(value)
        if kind == "Concatenation":
            left, regs, word = self.alias(value.lhs)
            right, regs_right, _ = self.alias(value.rhs)
            if regs_right is not regs:
                self.fail("'++' joins registers of one kind (qubits or bits)")
            return left + right, regs, word
        name = value.name if kind == "Identifier" else \
            value.collection.name if kind == "IndexExpression" and _kind(value.collection) == "Identifier" else None
        if name is None:
            self.fail(f"let: expected a register, a part of one or a concatenation, got `{self.text(value)}`")
        regs, word = (self.cregs, "bit") if name in self.cregs else (self.qregs, "qubit")
        if kind == "Identifier":
            return list(self.register(name, regs, word)[0]), regs, word
        return self.select(name, regs, word, value.index)[0], regs, word

    # -- gates ----------------------------------------------------------------------------------
    def lookup(self, name: str):
        target = self.gates.get(name)
        if target is None:
            hint = ' (it is a stdgates.inc gate: add include "stdgates.inc";)' \
                if name in _STDGATES and not self.stdgates else ""
            self.fail(f"unknown gate '{name}'{hint}")
        return target

    def signature(self, stmt, env, defining: Optional[str] = None):
        """(name, target, modifiers, number of controls, parameter expressions), all checked."""
        mods, n_controls = [], 0
        for m in stmt.modifiers:
            kind = m.modifier.name
            if kind in ("ctrl", "negctrl"):
                k = 1 if m.argument is None else self.integer(m.argument, env, f"the argument of {kind}(...)")
                if k < 1:
                    self.fail(f"{kind}({k}) @: the number of controls must be at least 1")
                mods.append((kind, k))
                n_controls += k
            elif kind == "pow":
                k = self.value(m.argument, env)
                if isinstance(k, _Lin):
                    self.fail(f"the exponent of pow(...) must be a constant, but depends on the input(s) "
                              f"{_inputs_of(k)}")
                if not math.isfinite(k) or not float(k).is_integer():
                    self.fail(f"pow({k!r}) @: only integer powers are supported (a fractional power is a "
                              f"matrix root: write it as a gate, e.g. sx for pow(1/2) @ x)")
                mods.append(("pow", int(k)))
            else:
                mods.append(("inv", None))
        if _kind(stmt) == "QuantumPhase":
            name, target, args, n_params, n_qubits = "gphase", None, [stmt.argument], 1, 0
        else:
            name, args = stmt.name.name, stmt.arguments
            if name == defining:
                self.fail(f"gate '{name}' calls itself: a gate definition cannot be recursive")
            target = self.lookup(name)
            n_params, n_qubits = target.n_params, target.n_qubits
        if len(args) != n_params:
            self.fail(f"gate '{name}' takes {n_params} parameter(s), got {len(args)}")
        if len(stmt.qubits) != n_controls + n_qubits:
            if n_controls:
                self.fail(f"'{name}' with {n_controls} control(s) acts on {n_controls + n_qubits} qubit(s), got "
                          f"{len(stmt.qubits)}")
            self.fail(f"gate '{name}' acts on {n_qubits} qubit(s), got {len(stmt.qubits)}")
        return name, target, mods, n_controls, args

    def define(self, stmt):
        name = stmt.name.name
        if name in self.gates or name == "gphase":
            what = "stdgates.inc gate" if name in _STDGATES and self.stdgates else \
                "built-in gate" if name in ("U", "gphase") else "gate"
            self.fail(f"the {what} '{name}' is already defined")
        params, qubits = tuple(a.name for a in stmt.arguments), tuple(q.name for q in stmt.qubits)
        for names, what in ((params, "parameter"), (qubits, "qubit argument")):
            for j, n in enumerate(names):
                if n in names[:j]:
                    self.fail(f"gate '{name}': the {what} '{n}' is listed twice")
                if n in _CONSTANTS:
                    self.fail(f"gate '{name}': '{n}' is a built-in constant and cannot name a {what}")
        known = set(params) | set(self.consts)
        depth, size = 1, 0
        for s in stmt.body:
            self.context.append(f"gate '{name}', {self.where(s)}: `{self.snippet(s)}`")
            try:
                kind = _kind(s)
                if kind == "QuantumBarrier":
                    continue
                if kind not in ("QuantumGate", "QuantumPhase"):
                    self.fail(f"{_REFUSED.get(kind, kind)} is not allowed in a gate body (only gate calls, "
                              f"gphase and barrier)")
                for m in s.modifiers:
                    if m.argument is not None:
                        self.check_names(m.argument, set(self.consts), name)
                _, target, mods, _, args = self.signature(s, self.consts, defining=name)
                size += _estimate(target, mods)
                for a in args:
                    self.check_names(a, known, name)
                used = []
                for q in s.qubits:
                    if _kind(q) != "Identifier" or q.name not in qubits:
                        self.fail(f"`{self.text(q)}` is not a qubit argument of gate '{name}' "
                                  f"(arguments: {', '.join(qubits)})")
                    if q.name in used:
                        self.fail(f"the qubit '{q.name}' is given twice")
                    used.append(q.name)
                if isinstance(target, _Def):
                    depth = max(depth, target.depth + 1)
            finally:
                self.context.pop()
        if depth > MAX_GATE_NESTING:
            self.fail(f"gate '{name}' nests gate definitions {depth} deep (at most {MAX_GATE_NESTING})")
        span = stmt.span
        self.gates[name] = _Def(name, params, qubits, tuple(stmt.body), span.start_line if span else 0, depth,
                                min(size, MAX_EXPANDED_GATES + 1))

    def apply(self, stmt, env, wires: tuple) -> list:
        """The items of one call on ``wires`` (controls first), modifiers applied."""
        name, target, mods, n_controls, args = self.signature(stmt, env)
        if _estimate(target, mods) > MAX_EXPANDED_GATES:
            self.fail(f"'{name}' expands to more than {MAX_EXPANDED_GATES} gates")
        values = [self.angle(a, env) for a in args]
        base = wires[n_controls:]
        if target is None:
            items = [("phase", values[0])]
        elif isinstance(target, _Std):
            items = target.emit(values, base)
        else:
            items = self.expand(target, values, base)
        controls, at = [], 0
        for kind, k in mods:
            controls.append(wires[at:at + k] if kind in ("ctrl", "negctrl") else None)
            at += k if kind in ("ctrl", "negctrl") else 0
        for (kind, k), cw in reversed(list(zip(mods, controls))):
            if kind == "inv":
                items = _inverse(items)
            elif kind == "pow":
                items = _inverse(items) * -k if k < 0 else items * k
            else:
                items = _controlled(items, tuple(cw), kind == "negctrl")
        return items

    def expand(self, d: _Def, values: list, wires: tuple) -> list:
        env = dict(self.consts)
        env.update(zip(d.params, values))
        local = dict(zip(d.qubits, wires))
        out = []
        for s in d.body:
            if _kind(s) == "QuantumBarrier":
                continue
            self.context.append(f"inside gate '{d.name}', {self.where(s)}: `{self.snippet(s)}`")
            try:
                out += self.apply(s, env, tuple(local[q.name] for q in s.qubits))
                if len(out) > MAX_EXPANDED_GATES:
                    self.fail(f"gate '{d.name}' expands to more than {MAX_EXPANDED_GATES} gates")
            finally:
                self.context.pop()
        return out

    def call(self, stmt):
        self.signature(stmt, self.env)              # arity first: it names the gate
        operands = [self.operand(q, self.qregs, "qubit") for q in stmt.qubits]
        sizes = {len(w) for w, whole in operands if whole}
        if len(sizes) > 1:
            self.fail(f"registers of different sizes {sorted(sizes)} cannot be broadcast together")
        for j in range(sizes.pop() if sizes else 1):
            wires = tuple(w[j] if whole else w[0] for w, whole in operands)
            if len(set(wires)) != len(wires):
                dup = next(w for w in wires if wires.count(w) > 1)
                self.fail(f"the qubit {self.labels[dup]} is given twice")
            self.emit(self.apply(stmt, self.env, wires))

    def emit(self, items):
        for it in items:
            if it[0] == "phase":
                self.phase = _plus(self.phase, it[1])
                continue
            for w in it[2]:
                if w in self.measured:
                    self.fail(f"the qubit {self.labels[w]} is used after it was measured, which a unitary circuit "
                              f"cannot represent (read the program with mixed=True: tql.MixedCircuit.from_qasm3)")
            self.touched.update(it[2])
            self.items.append(it)
        if len(self.items) > MAX_EXPANDED_GATES:
            self.fail(f"the program expands to more than {MAX_EXPANDED_GATES} gates")

    def measure(self, qubit, bits):
        wires, _ = self.operand(qubit, self.qregs, "qubit")
        if bits is not None and len(bits) != len(wires):
            self.fail(f"measure: {len(wires)} qubit(s) into {len(bits)} bit(s)")
        if self.mixed:
            self.items.append(("measure", tuple(wires)))
        else:
            self.measured.update(wires)

    def reset(self, qubit):
        wires, _ = self.operand(qubit, self.qregs, "qubit")
        if self.mixed:
            self.items.append(("reset", tuple(wires)))
            return
        for w in wires:
            if w in self.touched or w in self.measured:
                self.fail(f"reset of {self.labels[w]} after it was used cannot be represented in a unitary "
                          f"circuit (reset is accepted only on qubits still in |0>; read the program with "
                          f"mixed=True: tql.MixedCircuit.from_qasm3)")


# =============================================================================================
def _read(source) -> str:
    try:
        return _read_source(source)
    except (TypeError, FileNotFoundError) as exc:
        raise type(exc)(str(exc).replace("from_qasm:", "from_qasm3:", 1)) from None


def _parse(openqasm3, text: str):
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):      # ANTLR prints its diagnostics there
            return openqasm3.parse(text)
    except openqasm3.parser.QASM3ParsingError as exc:
        printed = [line.strip() for line in errors.getvalue().splitlines() if line.strip()]
        detail = str(exc) or (printed[0] if printed else "syntax error")
        m = re.search(r"(?:line |L)(\d+)(?::|:C)(\d+)", detail)
        lines = text.splitlines()
        at = ""
        if m and 1 <= int(m.group(1)) <= len(lines):
            at = f" in `{' '.join(lines[int(m.group(1)) - 1].split())[:80]}`"
        hint = " (an OpenQASM 2.0 program? read it with tql.Circuit.from_qasm)" \
            if re.search(r"\bOPENQASM\s+2(\.\d+)?\s*;", text) else ""
        raise ValueError(f"from_qasm3: cannot parse the program: {detail}{at}{hint}") from None
    except RecursionError:
        raise ValueError("from_qasm3: the program nests too deeply to parse") from None


def _bindings(free: list, inputs) -> dict:
    """name -> ("param", weight index, scale) | ("input", column, scale) for the symbolic inputs."""
    mode = inputs if isinstance(inputs, str) else "auto"
    given = inputs if isinstance(inputs, dict) else {}
    out = {}
    for name in free:
        v = given.get(name)
        if isinstance(v, Param):
            out[name] = ("param", v.index, v.scale)
        elif isinstance(v, Input):
            out[name] = ("input", v.column, v.scale)
    rest = [n for n in free if n not in out]
    if mode == "trainable":
        out.update((n, ("param", i, 1.0)) for i, n in enumerate(rest))
    elif mode == "features":
        out.update((n, ("input", c, 1.0)) for c, n in enumerate(rest))
    else:
        others = []
        for n in rest:
            m, c = _THETA.fullmatch(n), _COLUMN.fullmatch(n)
            if m:
                out[n] = ("param", int(m.group(1)), 1.0)
            elif c:
                out[n] = ("input", int(c.group(1)), 1.0)
            else:
                others.append(n)
        first = 1 + max((b[1] for b in out.values() if b[0] == "param"), default=-1)
        out.update((n, ("param", first + j, 1.0)) for j, n in enumerate(others))
    return out


def _check_inputs(inputs):
    if isinstance(inputs, str):
        if inputs not in INPUT_MODES:
            raise ValueError(f"from_qasm3: inputs must be one of {INPUT_MODES} or a dict, got {inputs!r}")
        return
    if not isinstance(inputs, dict):
        raise TypeError(f"from_qasm3: inputs must be one of {INPUT_MODES} or a dict, got {type(inputs).__name__}")
    for name, v in inputs.items():
        if not isinstance(name, str):
            raise TypeError(f"from_qasm3: inputs keys are input names, got {name!r}")
        if isinstance(v, (Param, Input)):
            scale = v.scale
            index = v.index if isinstance(v, Param) else v.column
            if isinstance(index, bool) or not isinstance(index, numbers.Integral) or index < 0:
                raise ValueError(f"from_qasm3: inputs[{name!r}] = {v!r}: the index must be a non-negative int")
        elif isinstance(v, numbers.Real) and not isinstance(v, bool):
            scale = v
        else:
            raise TypeError(f"from_qasm3: inputs[{name!r}] must be a number, tql.Param or tql.Input, got "
                            f"{type(v).__name__}")
        if not math.isfinite(float(scale)):
            raise ValueError(f"from_qasm3: inputs[{name!r}] = {v!r} is not finite")


def from_qasm3(source, *, inputs="auto", init="uniform", global_phase: bool = True, mixed: bool = False,
               dtype=None, fuse: bool = True, max_fused_wires: Optional[int] = None) -> Circuit:
    """A :class:`Circuit` from OpenQASM 3 text, or from a file (a path, or a string with no ';').

    ``inputs`` maps ``input float`` declarations to trainable weights or input columns (``"auto"``:
    ``theta_<i>`` → weight i, ``x_<c>`` → column c, others → new weights; ``"trainable"``;
    ``"features"``; or a dict of fixed values / ``Param`` / ``Input``); new weights start from
    ``init``. ``global_phase=False`` drops the program's global phase (otherwise a P·RZ pair on
    wire 0). ``mixed=True`` returns a :class:`~tql.MixedCircuit` that keeps ``measure`` and
    ``reset``. See the module docstring for what is read and refused."""
    _check_inputs(inputs)
    if isinstance(init, str) and init not in _INIT:
        raise ValueError(f"from_qasm3: init must be a number or one of {_INIT}, got {init!r}")
    if not isinstance(init, (str, numbers.Real)) or isinstance(init, bool) or \
            (not isinstance(init, str) and not math.isfinite(init)):
        raise ValueError(f"from_qasm3: init must be a finite number or one of {_INIT}, got {init!r}")
    text = _read(source)
    openqasm3 = _openqasm3()
    program = _parse(openqasm3, text)
    version = program.version
    if version is not None and version.split(".")[0] != "3":
        hint = ": read it with tql.Circuit.from_qasm (its U and qelib1.inc differ from OpenQASM 3's)" \
            if version.split(".")[0] == "2" else ""
        raise ValueError(f"from_qasm3: the program declares OPENQASM {version}; only OpenQASM 3 is read{hint}")
    reader = _Reader(openqasm3, text, inputs, mixed)
    for stmt in program.statements:
        reader.statement(stmt)
    if isinstance(inputs, dict):
        unknown = sorted(set(inputs) - set(reader.inputs))
        if unknown:
            raise ValueError(f"from_qasm3: inputs= names {', '.join(map(repr, unknown))}, which the program does "
                             f"not declare as an input")
    if not reader.labels:
        raise ValueError("from_qasm3: the program declares no qubits, so there is nothing to act on")
    binding = _bindings(reader.free, inputs)
    n_weights = 1 + max((b[1] for b in binding.values() if b[0] == "param"), default=-1)
    if n_weights > MAX_WEIGHT_INDEX:
        raise ValueError(f"from_qasm3: a weight index {n_weights - 1} is above {MAX_WEIGHT_INDEX}")
    if mixed:
        from .mixed import MixedCircuit
        circuit = MixedCircuit(len(reader.labels), fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    else:
        circuit = Circuit(len(reader.labels), fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    for _ in range(n_weights):
        circuit.parameter(init)

    def angle(a):
        if not isinstance(a, _Lin):
            return a
        (name, coefficient), = a.terms.items()
        kind, index, scale = binding[name]
        return Param(index, coefficient * scale) if kind == "param" else Input(index, coefficient * scale)

    items = reader.items
    phase = reader.phase
    if global_phase and not mixed and phase != 0.0:   # e^{iα} = P(2α) RZ(-2α), on wire 0
        items = items + [_op(G.P, (0,), (_times(phase, 2.0),)), _op(G.RZ, (0,), (_times(phase, -2.0),))]
    for it in items:
        if it[0] == "measure":
            circuit.measure(list(it[1]))
        elif it[0] == "reset":
            circuit.reset(list(it[1]))
        else:
            for gate, wires, angles in _final(*it[1:]):
                try:
                    circuit.add(gate, wires, *(angle(a) for a in angles))
                except ValueError as exc:
                    raise ValueError(f"from_qasm3: {exc}") from None
    return circuit
