"""OpenQASM 2.0 in: :func:`from_qasm` (``Circuit.from_qasm``). The writer, :func:`to_qasm`
(``circuit.to_qasm()``), lives in :mod:`torchquantum_layers.qasm_writer` (the qelib1 sequences it
writes in :mod:`torchquantum_layers.qelib1_synthesis`) and is re-exported here, as are
:data:`MAX_SYNTHESIS_WIRES` and :data:`DATA_FORM_ATOL`.

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
"""
from __future__ import annotations

import bisect
import math
import os
import pathlib
import re
from dataclasses import dataclass
from typing import Optional, Union

from . import gates as G
from .circuit import Circuit
from .qasm_writer import to_qasm
from .qelib1_synthesis import DATA_FORM_ATOL, MAX_SYNTHESIS_WIRES  # noqa: F401  (re-exported)

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


def _read_angle(text: str) -> float:
    """Evaluate ``text`` exactly as a parameter of a parsed gate would be (the writer's
    :func:`~torchquantum_layers.qasm_writer._format` checks the angles it writes with it)."""
    parser = _Parser(text, prelude={})
    return _evaluate(parser._expr(()), {})


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
            if getattr(gate, "name", gate) == "MULTICONTROLLEDX":
                # c3x / c4x under an 'if': a gate of no fixed width has no conditioned (controlled)
                # form, the fixed-width C^k X has, with the same matrix
                gate = G.controlled(G.X, len(wires) - 1)
            circuit.add(gate, wires, *angles, condition=condition)
        else:
            circuit.add(gate, wires, *angles)
    return circuit
