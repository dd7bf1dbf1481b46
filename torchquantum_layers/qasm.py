"""OpenQASM 2.0 in and out: :func:`from_qasm` (``Circuit.from_qasm``) and :func:`to_qasm`
(``circuit.to_qasm()``).

Reading
    ``OPENQASM 2.0;`` (optional; another version is an error), ``include "qelib1.inc";`` (its gates
    are built in; any other include is an error), ``qreg``/``creg``, ``//`` and ``/* */`` comments,
    whitespace and newlines anywhere. Several ``qreg``s become wires in declaration order
    (``qreg a[2]; qreg b[1];``: a[0] → wire 0, a[1] → wire 1, b[0] → wire 2). Wire 0 is the most
    significant bit of the basis index here, so q[0] is the leftmost bit of |q0 q1 …⟩; Qiskit prints
    states little-endian, convert with ``tql.to_qiskit_order`` / ``tql.from_qiskit_order``.

    Every gate of Qiskit's qelib1.inc is known (the original 2.0 set plus u, p, sx, sxdg, swap,
    cswap, crx, cry, cp, csx, cu, rxx, rzz, rccx, rc3x, c3x, c3sqrtx, c4x, u0), with the matrices
    of Qiskit's gate classes. Gate calls broadcast over whole registers (``h q;``, ``cx a, b;``),
    ``gate`` definitions are expanded inline (nested too), parameters are expressions in ``pi``,
    numbers, ``+ - * / ^``, unary minus, parentheses, sin cos tan exp ln sqrt, evaluated by a small
    recursive-descent evaluator (never ``eval``); ``pi`` and the function names cannot name a gate
    parameter (an expression would read them as the constant / the function).

    What a state-vector circuit cannot represent: ``measure`` is dropped (the circuit returns the
    state before measurement), but a gate on a qubit after it was measured is an error, as the
    result would depend on the outcome; ``barrier`` is dropped; ``reset`` is accepted on a qubit that
    nothing has touched yet (it is still |0⟩) and is an error anywhere else; ``if`` is an error;
    ``opaque`` declarations are accepted and applying an opaque gate is an error.
    ``MixedCircuit.from_qasm`` (``mixed=True``) keeps ``measure`` and ``reset`` as instructions
    instead, so gates may follow them, and reads ``if(c==k) <gate call>;`` as the gate conditioned
    on the qubits measured into ``c`` (bit j of k: the outcome of the qubit last measured into
    c[j]; a bit never measured reads 0, so an ``if`` that needs it 1 never applies). The qubit
    must still hold the outcome the bit holds (no gate or reset on it since, and not measured
    again after one); only gate calls may be conditioned. On the density matrix the measured
    qubit is then classical, so the gate conditioned on it equals the gate controlled by it
    (deferred measurement) and that is how it is simulated; a pure :class:`Circuit` refuses
    ``if``, as it keeps no measurement to condition on.

    Every error is a ValueError ``from_qasm: line N, column M: <what> in `<statement>```
    (column M, from 1, of the token at fault). A register holds at most
    :data:`MAX_REGISTER_SIZE` bits, gate definitions nest at most :data:`MAX_GATE_NESTING` deep
    and a program expands to at most :data:`MAX_EXPANDED_GATES` gates (each a clear error, where
    a definition calling the previous one twice, 40 times over, would otherwise never finish).

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
    target controls each step of its own sequence; the step counts grow quadratically in k, see
    the table above ``_controlled1``); DIAGONALUNITARY on any number of wires (a product of
    MULTIRZ, Walsh–Hadamard); QUBITUNITARY on one wire (u3 and a phase), diagonal or one 2×2 block
    controlled by its other wires (``controlled_unitary``'s), and any other up to
    :data:`MAX_SYNTHESIS_WIRES` wires (Givens rotations in Gray-code order). "Exact" includes the
    global phase, which qelib1 can write (e^{iα} = RZ(−2α) P(2α)): the program's unitary is the
    circuit's entry by entry, to rounding. Only a larger general QUBITUNITARY, per-sample data and
    gates outside the table raise a ValueError naming the gate and its wires. Trainable angles
    are written as their current values (``bind=True``, the default; ``bind=False`` raises
    instead); input angles always raise, as OpenQASM 2.0 has no per-sample angles, and so do NaN
    and infinite angles. Angles print as multiples of pi where that reads back to the same float,
    else with ``repr`` (exact round trip).
    A MixedCircuit's gates conditioned on measurements (``condition=``) are written as ``if``
    statements (see :func:`to_qasm`), not as the controlled gates they are simulated with: read
    back they are the same conditioned gates (a noise model treats them alike), and other tools
    see feed-forward. (A classically controlled gate whose condition wires hold no measurement,
    only reachable by adding ``gates.classically_controlled(...)`` by hand, is the controlled gate
    and is written as one.)
"""
from __future__ import annotations

import bisect
import cmath
import functools
import math
import os
import pathlib
import re
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np
import torch

from . import gates as G
from .circuit import Circuit, Input, Param

__all__ = ["from_qasm", "to_qasm"]

# limits that turn a hostile or mistaken program into a clear error instead of a hang or a crash
MAX_REGISTER_SIZE = 2 ** 16        # bits in one qreg / creg
MAX_GATE_NESTING = 64              # gate definitions calling definitions (Python's recursion limit is ~1000)
MAX_EXPANDED_GATES = 1_000_000     # table gates a program expands to (2 calls per level double it)

# =============================================================================================
# tokens
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<open_comment>/\*)
  | (?P<real>(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)
  | (?P<int>\d+)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"[^"\n]*")
  | (?P<sym>->|==|[-+*/^(){}\[\];,])
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class _Tok:
    kind: str      # real | int | id | string | sym | eof
    text: str
    start: int
    line: int


# =============================================================================================
# parameter expressions: parsed to a tiny tree, evaluated without eval()
_FUNCS = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp, "ln": math.log,
          "sqrt": math.sqrt}


class _EvalError(Exception):
    pass


def _evaluate(node, env) -> float:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "var":
        return env[node[1]]
    if kind == "neg":
        return -_evaluate(node[1], env)
    try:
        if kind == "call":
            x = _evaluate(node[2], env)
            if node[1] == "ln" and x <= 0:
                raise _EvalError(f"ln({x!r}) is undefined")
            if node[1] == "sqrt" and x < 0:
                raise _EvalError(f"sqrt({x!r}) is undefined")
            return _FUNCS[node[1]](x)
        a, b = _evaluate(node[2], env), _evaluate(node[3], env)
        op = node[1]
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if b == 0:
                raise _EvalError("division by zero")
            return a / b
        return math.pow(a, b)   # math.pow raises on (-8)^(1/3) where ** would return a complex
    except (OverflowError, ValueError) as exc:
        raise _EvalError(str(exc)) from None


# =============================================================================================
# gates the parser knows
@dataclass(frozen=True)
class _Builtin:
    """A qelib1 gate realised by table gates: ``emit(values)`` -> ((Gate, local wires, angles), ...)."""
    n_params: int
    n_qubits: int
    emit: object


@dataclass(frozen=True)
class _Opaque:
    n_params: int
    n_qubits: int


@dataclass(frozen=True)
class _Call:
    target: object           # _Builtin | _GateDef | _Opaque; None for a barrier
    name: str
    exprs: tuple
    args: tuple              # names of the enclosing gate's qubit arguments


@dataclass(frozen=True)
class _GateDef:
    name: str
    params: tuple
    qubits: tuple
    body: tuple
    line: int
    size: int = 0            # table gates one call expands to
    depth: int = 1           # 1 + the deepest definition its body calls

    @property
    def n_params(self):
        return len(self.params)

    @property
    def n_qubits(self):
        return len(self.qubits)


def _expanded_size(target) -> int:
    return target.size if isinstance(target, _GateDef) else 1


def _nesting(target) -> int:
    return target.depth if isinstance(target, _GateDef) else 0


def _same(gate: G.Gate, n_qubits: Optional[int] = None) -> _Builtin:
    k = gate.n_wires if n_qubits is None else n_qubits
    local = tuple(range(k))
    return _Builtin(gate.n_params, k, lambda v: ((gate, local, v),))


_CSX = G.controlled(G.SX, 1, "CSX")
_C3SX = G.controlled(G.SX, 3, "C3SQRTX")

# qelib1.inc builds every gate from OpenQASM's U(θ,φ,λ) = RZ(φ) RY(θ) RZ(λ), which is
# e^{-i(φ+λ)/2} times the table's U3; like Qiskit, U, u3, u2, u1, u, p are read as U3, U2, P (so
# u1(λ) = P(λ), which is e^{iλ/2} RZ(λ) and differs from qelib1's literal u1 by a global phase).
# qelib1's bodies make rz(φ) = u1(φ) = e^{iφ/2} RZ(φ), sx = RX(π/2) = e^{-iπ/4} SX, sxdg its
# conjugate e^{iπ/4} SXDG, rzz(θ) = e^{iθ/2} RZZ(θ), rxx(θ) = e^{-iθ/2} RXX(θ) and ch = e^{iπ/4} CH;
# each is read as the table gate, as in Qiskit, a global phase away. No gate of Qiskit's qelib1
# differs from its table gate by a relative phase: the controlled ones (cu1, cp, crx, cry, crz,
# cu3, cu, csx, cy, cz, ccx, cswap, c3x, c3sqrtx, c4x) equal the table's controlled matrices
# exactly. One place where the 2.0 paper's qelib1 (arXiv:1707.03429) differs: its cu3 body lacks
# Qiskit's u1((lambda+phi)/2) on the control (added in Qiskit PR #2755), so it is the controlled
# e^{-i(φ+λ)/2} U3 (the paper's det-1 U), a phase P(-(φ+λ)/2) on the control away from what this
# reader (and Qiskit's) applies: cu3 is read as the controlled u3 it is named after.
# tests/test_qasm.py checks all of this against qelib1's bodies and NumPy matrices of the paper's.
_BUILTINS = {
    "U": _same(G.U3), "CX": _same(G.CNOT),
    "u3": _same(G.U3), "u2": _same(G.U2), "u1": _same(G.P), "u": _same(G.U3), "p": _same(G.P),
    "cx": _same(G.CNOT), "id": _same(G.I), "x": _same(G.X), "y": _same(G.Y), "z": _same(G.Z),
    "h": _same(G.H), "s": _same(G.S), "sdg": _same(G.SDG), "t": _same(G.T), "tdg": _same(G.TDG),
    "sx": _same(G.SX), "sxdg": _same(G.SXDG), "rx": _same(G.RX), "ry": _same(G.RY),
    "rz": _same(G.RZ), "cz": _same(G.CZ), "cy": _same(G.CY), "ch": _same(G.CH),
    "swap": _same(G.SWAP), "ccx": _same(G.TOFFOLI), "cswap": _same(G.CSWAP), "crx": _same(G.CRX),
    "cry": _same(G.CRY), "crz": _same(G.CRZ), "cu1": _same(G.CP), "cp": _same(G.CP),
    "cu3": _same(G.CU3), "csx": _same(_CSX), "rxx": _same(G.RXX), "rzz": _same(G.RZZ),
    "c3x": _same(G.MULTICONTROLLEDX, 4), "c4x": _same(G.MULTICONTROLLEDX, 5),
    "c3sqrtx": _same(_C3SX),
}

# qelib1 gates with no single table gate, in qelib1's own words (u0 is an idle of length γ;
# cu(θ,φ,λ,γ) is the controlled e^{iγ} U3, i.e. a phase on the control and a CU3).
_PRELUDE = """
gate u0(gamma) q { id q; }
gate cu(theta,phi,lambda,gamma) c,t { p(gamma) c; cu3(theta,phi,lambda) c,t; }
gate rccx a,b,c { u2(0,pi) c; u1(pi/4) c; cx b,c; u1(-pi/4) c; cx a,c; u1(pi/4) c; cx b,c;
                  u1(-pi/4) c; u2(0,pi) c; }
gate rc3x a,b,c,d { u2(0,pi) d; u1(pi/4) d; cx c,d; u1(-pi/4) d; u2(0,pi) d; cx a,d; u1(pi/4) d;
                    cx b,d; u1(-pi/4) d; cx a,d; u1(pi/4) d; cx b,d; u1(-pi/4) d; u2(0,pi) d;
                    u1(pi/4) d; cx c,d; u1(-pi/4) d; u2(0,pi) d; }
"""
_PRELUDE_DEFS: dict = {}


def _prelude() -> dict:
    if not _PRELUDE_DEFS:
        parser = _Parser(_PRELUDE, prelude={})
        parser.parse()
        _PRELUDE_DEFS.update(parser.defs)
    return _PRELUDE_DEFS


# =============================================================================================
# the parser
class _Parser:
    def __init__(self, text: str, prelude: Optional[dict] = None, mixed: bool = False):
        self.text = text
        self.mixed = mixed               # measure / reset become MixedCircuit instructions
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.stmt_start = 0
        self.depth = 0
        self.toks = self._tokenize()
        self.i = 0
        self.prelude = _prelude() if prelude is None else prelude
        self.defs: dict = {}
        self.registers: dict = {}        # name -> ("q", offset, size) | ("c", 0, size)
        self.labels: list = []           # wire -> "q[0]"
        self.ops: list = []              # (Gate, wires, angles, {qubit: outcome} or None)
        self.touched: set = set()
        self.measured: set = set()
        self.outcome_of: dict = {}       # (creg, index) -> (qubit, outcome number) it holds
        self.holding: set = set()        # qubits still holding their last measurement
        # a qubit's outcome number counts the measurements that can have changed its value (one
        # of a qubit still holding its outcome repeats it): a bit holds the value the qubit has
        # only while the numbers agree
        self.outcome_number: dict = {}
        self.condition = None            # {qubit: outcome} while reading the body of an 'if'

    # -- errors -------------------------------------------------------------------------------
    def _line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def _column(self, pos: int) -> int:
        """1-based column of ``pos`` in its line (a tab counts as one column)."""
        return pos - (self.text.rfind("\n", 0, pos) + 1) + 1

    def fail(self, tok: Union[_Tok, int], what: str):
        pos = tok if isinstance(tok, int) else tok.start
        start = min(self.stmt_start, pos)
        end = self.text.find(";", pos)
        end = len(self.text) if end < 0 else end + 1
        stmt = " ".join(self.text[start:end].split())
        if len(stmt) > 80:
            stmt = stmt[:77] + "..."
        raise ValueError(f"from_qasm: line {self._line(pos)}, column {self._column(pos)}: {what} in `{stmt}`")

    # -- tokens -------------------------------------------------------------------------------
    def _tokenize(self) -> list:
        toks, pos, text = [], 0, self.text
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.lastgroup == "open_comment":
                # tokens come before parsing: take the statement to begin after the last ';', '{' or '}'
                self.stmt_start = max(text.rfind(ch, 0, pos) for ch in ";{}") + 1
                self.fail(pos, "unterminated /* comment" if m else f"unexpected character {text[pos]!r}")
            if m.lastgroup not in ("space", "comment"):
                toks.append(_Tok(m.lastgroup, m.group(), pos, self._line(pos)))
            pos = m.end()
        toks.append(_Tok("eof", "", len(text), self._line(len(text))))
        return toks

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def next(self) -> _Tok:
        tok = self.toks[self.i]
        if tok.kind != "eof":
            self.i += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.peek().kind == "sym" and self.peek().text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str, after: str = "") -> _Tok:
        tok = self.peek()
        if tok.kind == "sym" and tok.text == text:
            return self.next()
        self.fail(tok, f"expected '{text}'{after}, got {_show(tok)}")

    def expect_id(self, what: str) -> _Tok:
        tok = self.peek()
        if tok.kind != "id":
            self.fail(tok, f"expected {what}, got {_show(tok)}")
        return self.next()

    def expect_int(self, what: str) -> int:
        tok = self.peek()
        if tok.kind != "int":
            self.fail(tok, f"expected {what} (a non-negative integer), got {_show(tok)}")
        return int(self.next().text)

    # -- program ------------------------------------------------------------------------------
    def parse(self):
        first = True
        while self.peek().kind != "eof":
            self.stmt_start = self.peek().start
            self._statement(first)
            first = False
        return self

    def _statement(self, first: bool):
        tok = self.peek()
        if tok.kind != "id":
            self.fail(tok, f"expected a statement, got {_show(tok)}")
        word = tok.text
        if word == "OPENQASM":
            self.next()
            if not first:
                self.fail(tok, "OPENQASM must be the first statement")
            ver = self.peek()
            if ver.kind not in ("real", "int"):
                self.fail(ver, f"expected a version number, got {_show(ver)}")
            self.next()
            if float(ver.text) != 2.0:
                self.fail(ver, f"unsupported OpenQASM version {ver.text} (only 2.0 is read)")
            self.expect(";")
        elif word == "include":
            self.next()
            name = self.peek()
            if name.kind != "string":
                self.fail(name, f"expected a file name in quotes, got {_show(name)}")
            self.next()
            if name.text != '"qelib1.inc"':
                self.fail(name, f"cannot include {name.text}: only \"qelib1.inc\" is supported")
            self.expect(";")
        elif word in ("qreg", "creg"):
            self._register()
        elif word == "gate":
            self._gate_definition()
        elif word == "opaque":
            self._opaque()
        elif word == "measure":
            self._measure()
        elif word == "barrier":
            self.next()
            self._arglist()
            self.expect(";")
        elif word == "reset":
            self._reset()
        elif word == "if":
            self._if()
        else:
            self._gate_call()

    def _register(self):
        kind = self.next().text
        name = self.expect_id("a register name")
        if name.text in self.registers:
            self.fail(name, f"register '{name.text}' is already declared")
        self.expect("[")
        size = self.expect_int("a register size")
        self.expect("]")
        self.expect(";")
        if size < 1:
            self.fail(name, f"register '{name.text}' must have at least one bit, got size {size}")
        if size > MAX_REGISTER_SIZE:
            self.fail(name, f"register '{name.text}' of size {size} is larger than {MAX_REGISTER_SIZE}, "
                            f"far beyond what a state vector holds")
        if kind == "qreg":
            self.registers[name.text] = ("q", len(self.labels), size)
            self.labels += [f"{name.text}[{j}]" for j in range(size)]
        else:
            self.registers[name.text] = ("c", 0, size)

    # -- arguments ----------------------------------------------------------------------------
    def _arg(self):
        name = self.expect_id("a register argument")
        index = None
        if self.accept("["):
            index = self.expect_int("an index")
            self.expect("]")
        return name, index

    def _arglist(self, kind: str = "q") -> list:
        args = [self._resolve(*self._arg(), kind)]
        while self.accept(","):
            args.append(self._resolve(*self._arg(), kind))
        return args

    def _resolve(self, name: _Tok, index, kind: str):
        """(bits, whole register?) of an argument, checked against the declarations."""
        reg = self.registers.get(name.text)
        word = {"q": "qreg", "c": "creg"}[kind]
        if reg is None:
            self.fail(name, f"undeclared {word} '{name.text}'")
        if reg[0] != kind:
            self.fail(name, f"'{name.text}' is a {'qreg' if reg[0] == 'q' else 'creg'}, expected a {word}")
        _, offset, size = reg
        if index is None:
            return list(range(offset, offset + size)), True
        if index >= size:
            self.fail(name, f"index {index} out of range for {word} {name.text}[{size}]")
        return [offset + index], False

    # -- gate definitions ---------------------------------------------------------------------
    def _lookup(self, tok: _Tok):
        name = tok.text
        target = self.defs.get(name) or _BUILTINS.get(name) or self.prelude.get(name)
        if target is None:
            self.fail(tok, f"unknown gate '{name}'")
        return target

    def _check_signature(self, tok, target, n_params, n_qubits):
        if n_params != target.n_params:
            self.fail(tok, f"gate '{tok.text}' takes {target.n_params} parameter(s), got {n_params}")
        if n_qubits != target.n_qubits:
            self.fail(tok, f"gate '{tok.text}' acts on {target.n_qubits} qubit(s), got {n_qubits}")

    def _new_gate_name(self) -> _Tok:
        name = self.expect_id("a gate name")
        if name.text in ("U", "CX"):
            self.fail(name, f"the built-in gate {name.text} cannot be redefined")
        if name.text in self.defs:
            self.fail(name, f"gate '{name.text}' is already defined")
        return name

    def _id_list(self, what: str, close: Optional[str] = None) -> tuple:
        if close is not None and self.accept(close):
            return ()
        toks = [self.expect_id(what)]
        while self.accept(","):
            toks.append(self.expect_id(what))
        if close is not None:
            self.expect(close)
        names = [t.text for t in toks]
        for j, t in enumerate(toks):
            if t.text in names[:j]:
                self.fail(t, f"'{t.text}' is listed twice")
            if close is not None and (t.text == "pi" or t.text in _FUNCS):
                # an expression reads these names as the constant / the function, never the parameter
                self.fail(t, f"'{t.text}' is reserved (the constant pi and the functions "
                             f"{', '.join(_FUNCS)}) and cannot name a gate parameter")
        return tuple(names)

    def _gate_definition(self):
        start = self.stmt_start
        self.next()
        name = self._new_gate_name()
        params = self._id_list("a parameter name", ")") if self.accept("(") else ()
        qubits = self._id_list("a qubit argument name")
        self.expect("{")
        body = []
        while not self.accept("}"):
            tok = self.peek()
            if tok.kind == "eof":
                self.stmt_start = start
                self.fail(tok, f"gate '{name.text}': expected '}}' before the end of the input")
            self.stmt_start = tok.start
            body.append(self._body_statement(params, qubits))
        calls = [call.target for call in body if call.target is not None]
        depth = 1 + max(map(_nesting, calls), default=0)
        if depth > MAX_GATE_NESTING:
            self.stmt_start = start
            self.fail(name, f"gate '{name.text}' nests gate definitions {depth} deep (at most {MAX_GATE_NESTING})")
        self.defs[name.text] = _GateDef(name.text, params, qubits, tuple(body), name.line,
                                        sum(map(_expanded_size, calls)), depth)

    def _body_statement(self, params, qubits) -> _Call:
        tok = self.expect_id("a gate call")
        if tok.text == "barrier":
            args = self._id_list("a qubit argument name")
            self._check_known(args, qubits, tok)
            self.expect(";")
            return _Call(None, "barrier", (), args)
        if tok.text in ("measure", "reset", "if", "opaque", "gate", "qreg", "creg"):
            self.fail(tok, f"'{tok.text}' is not allowed inside a gate body")
        target = self._lookup(tok)
        exprs = self._expr_list(params)
        args = []
        while True:
            arg = self.expect_id("a qubit argument name")
            if self.peek().text == "[":
                self.fail(self.peek(), "a gate body names its qubit arguments, it cannot index them")
            args.append(arg.text)
            if not self.accept(","):
                break
        self.expect(";", " or ','")
        self._check_known(args, qubits, tok)
        if len(set(args)) != len(args):
            self.fail(tok, f"gate '{tok.text}' is given the same qubit twice")
        self._check_signature(tok, target, len(exprs), len(args))
        return _Call(target, tok.text, tuple(exprs), tuple(args))

    def _check_known(self, args, qubits, tok):
        for a in args:
            if a not in qubits:
                self.fail(tok, f"'{a}' is not a qubit argument of this gate (arguments: {', '.join(qubits)})")

    def _opaque(self):
        self.next()
        name = self._new_gate_name()
        params = self._id_list("a parameter name", ")") if self.accept("(") else ()
        qubits = self._id_list("a qubit argument name")
        self.expect(";")
        self.defs[name.text] = _Opaque(len(params), len(qubits))

    # -- expressions --------------------------------------------------------------------------
    def _expr_list(self, names) -> list:
        if not self.accept("("):
            return []
        if self.accept(")"):
            return []
        exprs = [self._expr(names)]
        while self.accept(","):
            exprs.append(self._expr(names))
        self.expect(")", " or ','")
        return exprs

    def _expr(self, names):
        return self._left_assoc(names, ("+", "-"), self._term)

    def _term(self, names):
        return self._left_assoc(names, ("*", "/"), self._unary)

    def _left_assoc(self, names, ops, operand):
        """operand (op operand)*, folded to the left: one precedence level of the grammar."""
        node = operand(names)
        while self.peek().text in ops and self.peek().kind == "sym":
            op = self.next().text
            node = ("bin", op, node, operand(names))
        return node

    def _unary(self, names):
        self.depth += 1
        try:
            if self.depth > 100:   # every nesting passes here: fail before Python's recursion limit
                self.fail(self.peek(), "a parameter expression is nested too deeply")
            return self._unary_inner(names)
        finally:
            self.depth -= 1

    def _unary_inner(self, names):
        if self.accept("-"):
            return ("neg", self._unary(names))
        if self.accept("+"):
            return self._unary(names)
        base = self._atom(names)
        if self.accept("^"):
            return ("bin", "^", base, self._unary(names))   # right-associative, above unary minus
        return base

    def _atom(self, names):
        tok = self.peek()
        if tok.kind in ("real", "int"):
            self.next()
            return ("num", float(tok.text))
        if tok.kind == "id":
            self.next()
            if tok.text == "pi":
                return ("num", math.pi)
            if tok.text in _FUNCS:
                self.expect("(", f" after {tok.text}")
                arg = self._expr(names)
                self.expect(")")
                return ("call", tok.text, arg)
            if tok.text in names:
                return ("var", tok.text)
            self.fail(tok, f"unknown identifier '{tok.text}' in a parameter expression")
        if self.accept("("):
            node = self._expr(names)
            self.expect(")")
            return node
        self.fail(tok, f"expected a number, pi, a parameter or '(', got {_show(tok)}")

    def _value(self, node, env, tok, inside="") -> float:
        try:
            v = _evaluate(node, env)
        except _EvalError as exc:
            self.fail(tok, f"cannot evaluate a parameter{inside}: {exc}")
        except RecursionError:   # a chain of thousands of terms
            self.fail(tok, f"a parameter expression{inside} is too long to evaluate")
        if not math.isfinite(v):
            self.fail(tok, f"a parameter{inside} evaluates to {v}")
        return v

    # -- applying gates -----------------------------------------------------------------------
    def _gate_call(self):
        tok = self.next()
        exprs = self._expr_list(())
        args = self._arglist()
        self.expect(";", " or ','")
        target = self._lookup(tok)
        self._check_signature(tok, target, len(exprs), len(args))
        values = tuple(self._value(e, {}, tok) for e in exprs)
        sizes = {len(bits) for bits, whole in args if whole}
        if len(sizes) > 1:
            self.fail(tok, f"registers of different sizes {sorted(sizes)} cannot be broadcast together")
        repeats = sizes.pop() if sizes else 1
        if len(self.ops) + repeats * _expanded_size(target) > MAX_EXPANDED_GATES:
            self.fail(tok, f"the program expands to more than {MAX_EXPANDED_GATES} gates here "
                           f"('{tok.text}' alone is {repeats * _expanded_size(target)})")
        for j in range(repeats):
            wires = tuple(bits[j] if whole else bits[0] for bits, whole in args)
            if len(set(wires)) != len(wires):
                dup = next(w for w in wires if wires.count(w) > 1)
                self.fail(tok, f"gate '{tok.text}' is given qubit {self.labels[dup]} twice")
            self._apply(target, tok.text, values, wires, tok, "")

    def _apply(self, target, name, values, wires, tok, inside):
        if isinstance(target, _Opaque):
            self.fail(tok, f"opaque gate '{name}'{inside} has no definition and cannot be simulated")
        if isinstance(target, _Builtin):
            for gate, local, angles in target.emit(values):
                self._emit(gate, tuple(wires[k] for k in local), tuple(angles), tok)
            return
        env = dict(zip(target.params, values))
        qubit = dict(zip(target.qubits, wires))
        where = f" (inside gate '{target.name}' defined on line {target.line})"
        for call in target.body:
            if call.target is None:
                continue
            vals = tuple(self._value(e, env, tok, where) for e in call.exprs)
            self._apply(call.target, call.name, vals, tuple(qubit[a] for a in call.args), tok, where)

    def _emit(self, gate, wires, angles, tok):
        for w in wires:
            if w in self.measured and not self.mixed:
                self.fail(tok, f"qubit {self.labels[w]} is used after it was measured, which a unitary "
                               f"circuit cannot represent")
        condition = self.condition
        if condition is False:                  # an 'if' that can never hold: read, not applied
            return
        if condition:
            for w in wires:
                if w in condition:
                    self.fail(tok, f"if: the gate acts on {self.labels[w]}, whose measurement outcome it reads")
        self.touched.update(wires)
        self.holding.difference_update(wires)
        self.ops.append((gate, wires, angles, condition or None))

    def _if(self):
        tok = self.next()
        if not self.mixed:
            self.fail(tok, "a classically controlled 'if' reads mid-circuit measurements, which a unitary circuit "
                           "does not hold: read the program with MixedCircuit.from_qasm")
        self.expect("(")
        name = self.expect_id("a creg name")
        bits, _ = self._resolve(name, None, "c")
        self.expect("==")
        value = self.expect_int("an integer")
        self.expect(")")
        if value >= 2 ** len(bits):
            self.fail(name, f"if: {name.text} has {len(bits)} bit(s) and can never equal {value}")
        condition = {}
        for j in bits:                          # bit j of the register is bit j of the integer
            want = (value >> j) & 1
            held = self.outcome_of.get((name.text, j))
            if held is None:                    # never measured: the bit reads 0
                if want:
                    condition = False
                    break
                continue
            q, number = held
            if q not in self.holding or self.outcome_number[q] != number:
                self.fail(name, f"if: {name.text}[{j}] holds the measurement of {self.labels[q]}, which was acted "
                                f"on since; a condition can only read a qubit still holding its outcome")
            if condition.get(q, want) != want:
                condition = False
                break
            condition[q] = want
        word = self.peek()
        if word.text in ("measure", "reset", "if", "barrier", "opaque", "gate", "qreg", "creg"):
            self.fail(word, f"if: only a gate call may be conditioned, got '{word.text}'")
        self.condition = condition
        try:
            self._gate_call()
        finally:
            self.condition = None

    def _measure(self):
        tok = self.next()
        qbits, qwhole = self._resolve(*self._arg(), "q")
        self.expect("->")
        creg, index = self._arg()
        cbits, cwhole = self._resolve(creg, index, "c")
        self.expect(";")
        if qwhole != cwhole or len(qbits) != len(cbits):
            self.fail(tok, f"measure needs a qubit and a bit, or registers of equal size "
                           f"(got {len(qbits)} qubit(s) and {len(cbits)} bit(s))")
        for q in qbits:
            if q not in self.holding:
                self.outcome_number[q] = self.outcome_number.get(q, 0) + 1
        self.measured.update(qbits)
        self.holding.update(qbits)
        for q, b in zip(qbits, cbits):
            self.outcome_of[(creg.text, b)] = (q, self.outcome_number[q])
        if self.mixed:
            self.ops.append(("measure", tuple(qbits), None, None))

    def _reset(self):
        tok = self.next()
        bits, _ = self._resolve(*self._arg(), "q")
        self.expect(";")
        self.holding.difference_update(bits)
        if self.mixed:
            self.ops.append(("reset", tuple(bits), None, None))
            return
        for w in bits:
            if w in self.touched or w in self.measured:
                self.fail(tok, f"reset of {self.labels[w]} after it was used cannot be represented in a "
                               f"unitary circuit (reset is accepted only on qubits still in |0>)")


def _show(tok: _Tok) -> str:
    return "the end of the input" if tok.kind == "eof" else repr(tok.text)


def _read_source(source) -> str:
    if isinstance(source, os.PathLike):
        return pathlib.Path(source).read_text(encoding="utf-8")
    if not isinstance(source, str):
        raise TypeError(f"from_qasm: expected OpenQASM text or a path, got {type(source).__name__}")
    if ";" in source or "\n" in source.strip():
        return source
    if not os.path.isfile(source):
        raise FileNotFoundError(f"from_qasm: {source!r} is neither a file nor OpenQASM text "
                                f"(a program has at least one ';')")
    return pathlib.Path(source).read_text(encoding="utf-8")


def from_qasm(source, *, dtype=None, fuse: bool = True, max_fused_wires: Optional[int] = None,
              mixed: bool = False) -> Circuit:
    """A :class:`Circuit` from OpenQASM 2.0 text, or from a file (a path, or a string with no ';').

    ``mixed=True`` (what ``MixedCircuit.from_qasm`` passes) returns a :class:`~tql.MixedCircuit`
    in which ``measure`` and ``reset`` are instructions where they stand (non-selective: the
    density matrix averages the outcomes), so gates may follow them."""
    parser = _Parser(_read_source(source), mixed=mixed).parse()
    if not parser.labels:
        raise ValueError("from_qasm: the program declares no qreg, so there is no qubit to act on")
    if mixed:
        from .mixed import MixedCircuit
        circuit = MixedCircuit(len(parser.labels), fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    else:
        circuit = Circuit(len(parser.labels), fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    for gate, wires, angles, condition in parser.ops:
        if gate == "measure":
            circuit.measure(wires)
        elif gate == "reset":
            circuit.reset(wires)
        elif condition:
            circuit.add(gate, wires, *angles, condition=condition)
        else:
            circuit.add(gate, wires, *angles)
    return circuit


# =============================================================================================
# the writer
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


def _read_angle(text: str) -> float:
    """Evaluate ``text`` exactly as a parameter of a parsed gate would be."""
    parser = _Parser(text, prelude={})
    return _evaluate(parser._expr(()), {})


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
    :data:`MAX_SYNTHESIS_WIRES` wires; see the module docstring), adjoints too.
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
