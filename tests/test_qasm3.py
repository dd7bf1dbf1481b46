"""OpenQASM 3 export (torchquantum_layers/qasm3.py), checked by an independent oracle: every
exported program is parsed by the reference parser ``openqasm3.parse`` and its AST is simulated
by the small NumPy interpreter below (stdgates.inc gates as matrices hand-written from the
OpenQASM 3 specification, ``gate`` definitions expanded, ``ctrl(k) @`` / ``negctrl(k) @`` /
``inv @`` applied as matrix transformations, ``gphase`` as a phase, inputs substituted).

The comparison with ``circuit.unitary()`` is EXACT, global phase included: OpenQASM 3 would
let a whole program differ by an unobservable global phase, but the writer claims (and needs,
since ``ctrl @`` turns a gate's global phase into a relative one) that every call is exact.
"""
import math

import numpy as np
import pytest
import torch

openqasm3 = pytest.importorskip("openqasm3")
pytest.importorskip("openqasm3.parser")
from openqasm3 import ast  # noqa: E402

import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import gates as G  # noqa: E402
from torchquantum_layers.circuit import Param  # noqa: E402

ATOL = 1e-10
C128 = torch.complex128


# =============================================================================================
# the oracle: stdgates.inc matrices, from the OpenQASM 3 specification
def U(t, p, l):
    return np.array([[math.cos(t / 2), -np.exp(1j * l) * math.sin(t / 2)],
                     [np.exp(1j * p) * math.sin(t / 2), np.exp(1j * (p + l)) * math.cos(t / 2)]])


def ctrl(m, c=1):
    d = m.shape[0]
    out = np.eye(d * 2 ** c, dtype=complex)
    out[-d:, -d:] = m
    return out


XM = np.array([[0, 1], [1, 0]], dtype=complex)
YM = np.array([[0, -1j], [1j, 0]])
ZM = np.diag([1, -1]).astype(complex)
HM = np.array([[1, 1], [1, -1]]) / math.sqrt(2)
SWAPM = np.eye(4)[[0, 2, 1, 3]].astype(complex)


def rx(t):
    return np.array([[math.cos(t / 2), -1j * math.sin(t / 2)], [-1j * math.sin(t / 2), math.cos(t / 2)]])


def ry(t):
    return np.array([[math.cos(t / 2), -math.sin(t / 2)], [math.sin(t / 2), math.cos(t / 2)]], dtype=complex)


def rz(t):
    return np.diag([np.exp(-0.5j * t), np.exp(0.5j * t)])


def p(t):
    return np.diag([1, np.exp(1j * t)])


# name -> (number of parameters, number of qubits, matrix function)
STDGATES = {
    "U": (3, 1, U), "id": (0, 1, lambda: np.eye(2, dtype=complex)),
    "x": (0, 1, lambda: XM), "y": (0, 1, lambda: YM), "z": (0, 1, lambda: ZM), "h": (0, 1, lambda: HM),
    "s": (0, 1, lambda: np.diag([1, 1j])), "sdg": (0, 1, lambda: np.diag([1, -1j])),
    "t": (0, 1, lambda: np.diag([1, np.exp(1j * math.pi / 4)])),
    "tdg": (0, 1, lambda: np.diag([1, np.exp(-1j * math.pi / 4)])),
    "sx": (0, 1, lambda: np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2),
    "p": (1, 1, p), "rx": (1, 1, rx), "ry": (1, 1, ry), "rz": (1, 1, rz),
    "cx": (0, 2, lambda: ctrl(XM)), "cy": (0, 2, lambda: ctrl(YM)), "cz": (0, 2, lambda: ctrl(ZM)),
    "ch": (0, 2, lambda: ctrl(HM)), "cp": (1, 2, lambda t: ctrl(p(t))),
    "crx": (1, 2, lambda t: ctrl(rx(t))), "cry": (1, 2, lambda t: ctrl(ry(t))),
    "crz": (1, 2, lambda t: ctrl(rz(t))), "swap": (0, 2, lambda: SWAPM),
    "ccx": (0, 3, lambda: ctrl(XM, 2)), "cswap": (0, 3, lambda: ctrl(SWAPM)),
    # gate cu(θ, φ, λ, γ) a, b { p(γ) a; ctrl @ U(θ, φ, λ) a, b; }: γ is a phase on the control
    "cu": (4, 2, lambda t, f, l, g: ctrl(np.exp(1j * g) * U(t, f, l))),
}


def apply(m, wires, u, n):
    """``m`` (first wire = most significant bit) on ``wires`` of the (2^n, cols) array ``u``."""
    k = len(wires)
    t = u.reshape((2,) * n + (-1,))
    t = np.tensordot(m.reshape((2,) * 2 * k), t, axes=(list(range(k, 2 * k)), list(wires)))
    return np.moveaxis(t, list(range(k)), list(wires)).reshape(2 ** n, -1)


class Interpreter:
    """Unitary of a parsed OpenQASM 3 program (the subset the writer may use, and negctrl)."""

    def __init__(self, text, inputs=None):
        self.program = openqasm3.parse(text)
        self.inputs = dict(inputs or {})
        self.defs = {}
        self.declared = set()

    def value(self, e, env):
        if isinstance(e, (ast.IntegerLiteral, ast.FloatLiteral)):
            return float(e.value)
        if isinstance(e, ast.Identifier):
            if e.name in ("pi", "π"):
                return math.pi
            return env[e.name]
        if isinstance(e, ast.UnaryExpression):
            assert e.op.name == "-", e
            return -self.value(e.expression, env)
        if isinstance(e, ast.BinaryExpression):
            a, b = self.value(e.lhs, env), self.value(e.rhs, env)
            return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else math.nan,
                    "**": a ** b}[e.op.name]
        raise NotImplementedError(f"expression {e!r}")

    def base(self, name, params, k):
        if name in self.defs:
            args, qubits, body = self.defs[name]
            assert len(args) == len(params) and len(qubits) == k, name
            env = dict(zip(args, params))
            u = np.eye(2 ** k, dtype=complex)
            local = {q: i for i, q in enumerate(qubits)}
            for stmt in body:
                u = self.statement(stmt, env, lambda q: local[q.name], u, k)
            return u
        n_params, n_qubits, fn = STDGATES[name]
        assert (n_params, n_qubits) == (len(params), k), name
        return np.asarray(fn(*params), dtype=complex)

    def statement(self, stmt, env, qubit, u, n):
        wires = [qubit(q) for q in stmt.qubits]
        assert len(set(wires)) == len(wires), "a qubit given twice"
        n_controls = [1 if m.argument is None else int(self.value(m.argument, env))
                      for m in stmt.modifiers if m.modifier.name in ("ctrl", "negctrl")]
        k = len(wires) - sum(n_controls)
        if isinstance(stmt, ast.QuantumPhase):
            assert k == 0
            m = np.array([[np.exp(1j * self.value(stmt.argument, env))]])
        else:
            m = self.base(stmt.name.name, [self.value(a, env) for a in stmt.arguments], k)
        for mod in reversed(stmt.modifiers):         # the modifier next to the gate acts first
            kind = mod.modifier.name
            if kind == "inv":
                m = m.conj().T
            elif kind in ("ctrl", "negctrl"):
                c = 1 if mod.argument is None else int(self.value(mod.argument, env))
                d = m.shape[0]
                m = ctrl(m, c)
                if kind == "negctrl":
                    flip = np.kron(np.kron(*([XM] * c)) if c > 1 else XM, np.eye(d))
                    m = flip @ m @ flip
            else:
                raise NotImplementedError(f"modifier {kind}")
        if len(wires) == 0:
            return m[0, 0] * u
        return apply(m, wires, u, n)

    def unitary(self):
        u, n, reg = None, None, None
        for stmt in self.program.statements:
            if isinstance(stmt, ast.Include):
                assert stmt.filename == "stdgates.inc"
            elif isinstance(stmt, ast.IODeclaration):
                assert stmt.io_identifier.name == "input" and isinstance(stmt.type, ast.FloatType)
                assert stmt.type.size.value == 64
                self.declared.add(stmt.identifier.name)
            elif isinstance(stmt, ast.QuantumGateDefinition):
                assert stmt.name.name not in STDGATES and stmt.name.name not in self.defs
                self.defs[stmt.name.name] = ([a.name for a in stmt.arguments], [q.name for q in stmt.qubits],
                                             stmt.body)
            elif isinstance(stmt, ast.QubitDeclaration):
                assert u is None
                reg, n = stmt.qubit.name, stmt.size.value
                u = np.eye(2 ** n, dtype=complex)
            elif isinstance(stmt, (ast.QuantumGate, ast.QuantumPhase)):
                def qubit(q):
                    assert q.name.name == reg
                    (index,), = q.indices
                    return int(index.value)
                env = {name: self.inputs[name] for name in self.declared}
                u = self.statement(stmt, env, qubit, u, n)
            else:
                raise NotImplementedError(type(stmt).__name__)
        assert set(self.inputs) == self.declared, (set(self.inputs), self.declared)
        return u


def oracle_unitary(text, inputs=None):
    return Interpreter(text, inputs).unitary()


def library_unitary(circuit, x=None):
    return circuit.unitary(x).detach().numpy()


def assert_exports(circuit, **kw):
    text = circuit.to_qasm3(**kw)
    np.testing.assert_allclose(oracle_unitary(text), library_unitary(circuit), atol=ATOL, rtol=0)
    return text


# =============================================================================================
# the oracle checked against the specification's own definitions of stdgates.inc
SPEC_BODIES = """OPENQASM 3.0;
include "stdgates.inc";
gate p_(l) a { ctrl @ gphase(l) a; }
gate x_ a { U(π, 0, π) a; }
gate y_ a { U(π, π/2, π/2) a; }
gate z_ a { p_(π) a; }
gate h_ a { U(π/2, 0, π) a; }
gate rx_(θ) a { U(θ, -π/2, π/2) a; }
gate ry_(θ) a { U(θ, 0, 0) a; }
gate rz_(λ) a { gphase(-λ/2); U(0, 0, λ) a; }
gate swap_ a, b { cx a, b; cx b, a; cx a, b; }
gate cu_(θ, φ, λ, γ) a, b { p(γ) a; ctrl @ U(θ, φ, λ) a, b; }
qubit[2] q;
"""


@pytest.mark.parametrize("call, std", [
    ("p_(0.3) q[1];", "p(0.3) q[1];"), ("x_ q[0];", "x q[0];"), ("y_ q[1];", "y q[1];"),
    ("z_ q[0];", "z q[0];"), ("h_ q[1];", "h q[1];"), ("rx_(0.7) q[0];", "rx(0.7) q[0];"),
    ("ry_(-1.1) q[1];", "ry(-1.1) q[1];"), ("rz_(2.3) q[0];", "rz(2.3) q[0];"),
    ("swap_ q[0], q[1];", "swap q[0], q[1];"), ("cu_(0.1, 0.2, 0.3, 0.4) q[1], q[0];", "cu(0.1, 0.2, 0.3, 0.4) q[1], q[0];"),
    ("ctrl @ s q[0], q[1];", "cp(pi/2) q[0], q[1];"), ("inv @ t q[0];", "tdg q[0];"),
    ("ctrl @ sx q[1], q[0]; ctrl @ sx q[1], q[0];", "cx q[1], q[0];"),
])
def test_interpreter_matches_the_specification_bodies(call, std):
    np.testing.assert_allclose(oracle_unitary(SPEC_BODIES + call), oracle_unitary(SPEC_BODIES + std), atol=1e-12)


def test_interpreter_modifiers_by_hand():
    head = 'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[3] q;\n'
    # negctrl: X on q[2] where q[0] = 0 and q[1] = 1
    u = oracle_unitary(head + "negctrl @ ctrl @ x q[0], q[1], q[2];")
    perm = list(range(8))
    perm[0b010], perm[0b011] = 0b011, 0b010
    np.testing.assert_allclose(u, np.eye(8)[perm], atol=1e-15)
    # the control qubits come first: X on q[1] where q[2] = q[0] = 1, |101> <-> |111>
    perm = list(range(8))
    perm[0b101], perm[0b111] = 0b111, 0b101
    np.testing.assert_allclose(oracle_unitary(head + "ctrl(2) @ x q[2], q[0], q[1];"), np.eye(8)[perm],
                               atol=1e-15)
    # a global phase under ctrl is a relative phase
    np.testing.assert_allclose(oracle_unitary(head + "gphase(0.5); ctrl @ gphase(0.25) q[0];"),
                               np.exp(0.5j) * np.diag([1] * 4 + [np.exp(0.25j)] * 4), atol=1e-15)


# =============================================================================================
# every gate of the table
def _widths(gate):
    if gate.name == "MULTIRZ":
        return (1, 2, 3, 4)
    if gate.name == "MULTICONTROLLEDX":
        return (2, 3, 4, 5)
    if gate.takes_data:
        return (1,)
    return (gate.n_wires,)


def _random_unitary(rng, d):
    q, r = np.linalg.qr(rng.normal(size=(d, d)) + 1j * rng.normal(size=(d, d)))
    return q * (np.diag(r) / abs(np.diag(r)))


def _one_gate(gate, k, rng):
    n = k + 1
    wires = tuple(rng.permutation(n)[:k].tolist())     # scattered, so a wrong order would show
    c = tql.Circuit(n, dtype=C128)
    if gate.name == "QUBITUNITARY":
        c.add(gate, wires, matrix=torch.tensor(_random_unitary(rng, 2)))
    elif gate.name == "DIAGONALUNITARY":
        c.add(gate, wires, matrix=torch.tensor(np.exp(1j * rng.uniform(-4, 4, 2))))
    else:
        c.add(gate, wires, *rng.uniform(-4, 4, gate.n_params).tolist())
    return c


@pytest.mark.parametrize("name", sorted(G.GATES))
def test_every_table_gate(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    gate = G.GATES[name]
    for k in _widths(gate):
        c = _one_gate(gate, k, rng)
        assert_exports(c)
        assert_exports(c.inverse())


def test_special_unitaries():
    # θ = π (upper-left entry 0) and θ = 0 (off-diagonal 0) take their own branches
    for m in (np.array([[0, 1j], [np.exp(0.3j), 0]]), np.diag([np.exp(-2j), np.exp(0.7j)]),
              -np.eye(2)):
        c = tql.Circuit(2, dtype=C128)
        c.qubit_unitary([1], torch.tensor(m, dtype=C128))
        assert_exports(c)


def _controllable():
    return [g for g in G.GATES.values() if g.n_wires is not None and not g.takes_data]


@pytest.mark.parametrize("name", sorted(g.name for g in _controllable()))
def test_controlled_table_gates(name):
    rng = np.random.default_rng(len(name))
    target = G.GATES[name]
    for n_controls in (1, 2, 3):
        gate = G.controlled(target, n_controls)
        k = gate.n_wires
        if k > 6:
            continue
        c = _one_gate(gate, k, rng)
        text = assert_exports(c)
        if gate.n_controls > 2 or (gate.n_controls == 2 and gate.target.name != "X"):
            assert f"ctrl({gate.n_controls}) @" in text
        assert_exports(c.inverse())


def test_many_controls_one_statement_each():
    c = tql.Circuit(5, dtype=C128)
    c.h(0).h(1).h(2).h(3).h(4)
    c.add(G.controlled(G.Z, 3), (4, 0, 2, 1))
    c.multicontrolledx([3, 1, 4, 0, 2])
    c.add(G.controlled(G.RY, 4), (0, 1, 2, 3, 4), 0.9)
    text = assert_exports(c)
    assert "ctrl(3) @ z q[4], q[0], q[2], q[1];" in text
    assert "ctrl(4) @ x q[3], q[1], q[4], q[0], q[2];" in text
    assert "ctrl(4) @ ry(0.9) q[0], q[1], q[2], q[3], q[4];" in text
    # OpenQASM 2.0 writes the same three ops decomposed into qelib1 gates (tests/test_qasm_controls.py)
    statements = lambda t: sum(1 for line in t.splitlines() if line.rstrip().endswith(";"))  # noqa: E731
    assert statements(c.to_qasm()) > statements(text) + 10


# =============================================================================================
# random circuits mixing the gates
@pytest.mark.parametrize("seed", range(6))
def test_random_circuits(seed):
    rng = np.random.default_rng(seed)
    n = 5
    pool = [g for g in G.GATES.values() if not g.takes_data]
    pool += [G.controlled(G.Z, 3), G.controlled(G.ROT, 2), G.controlled(G.SXDG, 1), G.controlled(G.RXX, 1),
             G.controlled(G.ISWAP, 2), G.CU3]
    parts = []
    for _ in range(2):
        c = tql.Circuit(n, dtype=C128)
        for _ in range(20):
            gate = pool[rng.integers(len(pool))]
            k = gate.n_wires or int(rng.integers(gate.min_wires, n + 1))
            wires = rng.permutation(n)[:k].tolist()
            if gate.n_params and rng.random() < 0.3:
                c.add(gate, wires, trainable=True, scale=float(rng.choice([1.0, -0.5, 2.0])))
            else:
                c.add(gate, wires, *rng.uniform(-4, 4, gate.n_params).tolist())
        parts.append(c)
    c = parts[0] + parts[1].inverse()
    assert_exports(c)
    text = c.to_qasm3(parameters="input")
    inputs = {f"theta_{i}": float(w) for i, w in enumerate(c.weights.detach())
              if f"theta_{i};" in text}
    np.testing.assert_allclose(oracle_unitary(text, inputs), library_unitary(c), atol=ATOL, rtol=0)


# =============================================================================================
# angles: trainable (bound or inputs), input features
def _trainable_circuit():
    torch.manual_seed(0)
    c = tql.Circuit(3, dtype=C128)
    c.rx(0, trainable=True)
    c.add(G.CRY, (2, 0), trainable=True, scale=-0.5)
    c.u3(1, trainable=True)
    c.add(G.controlled(G.RZ, 2), (0, 1, 2), Param(0, 2.0))      # a weight shared, scaled
    c.multirz([0, 1, 2], trainable=True)
    return c


def test_trainable_angles_as_inputs():
    c = _trainable_circuit()
    text = c.to_qasm3(parameters="input")
    names = [f"theta_{i}" for i in range(c.weights.shape[0])]
    for name in names:
        assert f"input float[64] {name};" in text
    assert "-0.5*theta_1" in text and "2.0*theta_0" in text
    inputs = dict(zip(names, c.weights.detach().tolist()))
    np.testing.assert_allclose(oracle_unitary(text, inputs), library_unitary(c), atol=ATOL, rtol=0)
    # the program is parametrised: new weights, same text
    with torch.no_grad():
        c.weights.copy_(torch.linspace(-3, 2.5, c.weights.shape[0]))
    assert c.to_qasm3(parameters="input") == text
    inputs = dict(zip(names, c.weights.detach().tolist()))
    np.testing.assert_allclose(oracle_unitary(text, inputs), library_unitary(c), atol=ATOL, rtol=0)


def test_trainable_angles_bound():
    c = _trainable_circuit()
    text = assert_exports(c)
    assert text == c.to_qasm3(parameters="bound")
    assert "input" not in text and "theta_" not in text


def test_input_feature_angles_as_inputs():
    c = tql.Circuit(3, dtype=C128)
    c.h(0).h(1).h(2)
    c.ry(0, input=0)
    c.crz(1, 2, input=2, scale=-1.5)
    c.rxx(0, 2, trainable=True)
    text = c.to_qasm3(parameters="input")
    assert "input float[64] x_0;" in text and "input float[64] x_2;" in text and "x_1" not in text
    row = torch.tensor([0.7, 9.0, -1.3], dtype=torch.float64)
    inputs = {"x_0": 0.7, "x_2": -1.3, "theta_0": float(c.weights.detach()[0])}
    np.testing.assert_allclose(oracle_unitary(text, inputs), library_unitary(c, row), atol=ATOL, rtol=0)


# =============================================================================================
# refused
def test_errors_name_the_gate_or_argument():
    c = tql.Circuit(3)
    c.qubit_unitary([0, 2], torch.eye(4))
    with pytest.raises(ValueError, match=r"QUBITUNITARY on wires \(0, 2\).*no matrix literal"):
        c.to_qasm3()
    d = tql.Circuit(2)
    d.diagonal_unitary([0, 1], torch.ones(4))
    with pytest.raises(ValueError, match="DIAGONALUNITARY on wires"):
        d.to_qasm3()
    e = tql.Circuit(2)
    e.ry(1, input=0)
    with pytest.raises(ValueError, match=r"RY on wires \(1,\) reads input column 0.*parameters='input'"):
        e.to_qasm3()
    with pytest.raises(ValueError, match=r"parameters must be one of \('bound', 'input'\), got 'symbolic'"):
        e.to_qasm3(parameters="symbolic")
    with pytest.raises(ValueError, match="parameters must be one of"):
        e.to_qasm3(parameters=True)
    f = tql.Circuit(1)
    f.rx(0, trainable=True)
    with torch.no_grad():
        f.weights.fill_(float("nan"))
    with pytest.raises(ValueError, match="RX on wires .* nan"):
        f.to_qasm3()
    assert "theta_0" in f.to_qasm3(parameters="input")        # the value is not written there
    from torchquantum_layers.qasm3 import to_qasm3
    with pytest.raises(TypeError, match="expected a Circuit"):
        to_qasm3("h q[0];")


def test_mixed_circuit_with_measurement_is_refused():
    m = tql.MixedCircuit(2)
    m.h(0)
    m.measure([0])
    with pytest.raises(ValueError, match="unitary part"):
        m.to_qasm3()
