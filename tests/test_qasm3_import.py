"""OpenQASM 3 import (torchquantum_layers/qasm3_import.py: ``tql.Circuit.from_qasm3``).

The oracle is independent of the code under test: the NumPy interpreter of tests/test_qasm3.py
(stdgates.inc matrices hand-written from the OpenQASM 3 specification, ``gate`` bodies expanded,
modifiers as matrix transformations), extended here with the OpenQASM 2 compatibility gates of
stdgates.inc (CX, phase, cphase, id, u1, u2, u3 with their ``gphase``), ``pow(k) @``, tau/euler
and the math functions. It reads programs on one ``qubit[n] q`` register with indexed operands,
so the tests of several registers and broadcasting compare with a hand-unrolled program. Every
comparison is entry by entry, global phase included, in both dtypes.
"""
import ast as pyast
import functools
import math
import pathlib
import sys

import numpy as np
import pytest
import torch

from .conftest import ATOL, REAL
from .test_qasm3 import STDGATES, XM, Interpreter, U, apply, ctrl

import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import gates as G  # noqa: E402
from torchquantum_layers.circuit import Input, Param  # noqa: E402

HEAD = 'OPENQASM 3.0;\ninclude "stdgates.inc";\n'


# =============================================================================================
# the oracle
def _phased(f, l, m):
    return np.exp(-0.5j * (f + l)) * m


# stdgates.inc's OpenQASM 2 compatibility gates, in the specification's own words:
# gate CX a, b { ctrl @ U(π, 0, π) a, b; }         gate phase(λ) q { U(0, 0, λ) q; }
# gate cphase(λ) a, b { ctrl @ phase(λ) a, b; }     gate u1(λ) q { U(0, 0, λ) q; }
# gate u2(φ, λ) q { gphase(-(φ+λ)/2); U(π/2, φ, λ) q; }
# gate u3(θ, φ, λ) q { gphase(-(φ+λ)/2); U(θ, φ, λ) q; }
EXTRA = {
    "CX": (0, 2, lambda: ctrl(U(math.pi, 0, math.pi))),
    "phase": (1, 1, lambda l: U(0, 0, l)),
    "cphase": (1, 2, lambda l: ctrl(U(0, 0, l))),
    "u1": (1, 1, lambda l: U(0, 0, l)),
    "u2": (2, 1, lambda f, l: _phased(f, l, U(math.pi / 2, f, l))),
    "u3": (3, 1, lambda t, f, l: _phased(f, l, U(t, f, l))),
}
FUNCS = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp, "ln": math.log,
         "sqrt": math.sqrt, "arcsin": math.asin, "arccos": math.acos, "arctan": math.atan}


class Oracle(Interpreter):
    def value(self, e, env):
        kind = type(e).__name__
        if kind == "Identifier" and e.name in ("tau", "τ", "euler", "ℇ"):
            return math.tau if e.name in ("tau", "τ") else math.e
        if kind == "FunctionCall":
            return FUNCS[e.name.name](self.value(e.arguments[0], env))
        return super().value(e, env)

    def base(self, name, params, k):
        if name in EXTRA and name not in self.defs:
            n_params, n_qubits, fn = EXTRA[name]
            assert (n_params, n_qubits) == (len(params), k), name
            return np.asarray(fn(*params), dtype=complex)
        return super().base(name, params, k)

    def statement(self, stmt, env, qubit, u, n):
        wires = [qubit(q) for q in stmt.qubits]
        assert len(set(wires)) == len(wires), "a qubit given twice"
        count = [1 if m.argument is None else int(self.value(m.argument, env))
                 for m in stmt.modifiers if m.modifier.name in ("ctrl", "negctrl")]
        k = len(wires) - sum(count)
        if type(stmt).__name__ == "QuantumPhase":
            assert k == 0
            m = np.array([[np.exp(1j * self.value(stmt.argument, env))]])
        else:
            m = self.base(stmt.name.name, [self.value(a, env) for a in stmt.arguments], k)
        for mod in reversed(stmt.modifiers):          # the modifier next to the gate acts first
            kind = mod.modifier.name
            if kind == "inv":
                m = m.conj().T
            elif kind == "pow":
                e = self.value(mod.argument, env)
                assert e == int(e)
                m = np.linalg.matrix_power(m if e >= 0 else m.conj().T, abs(int(e)))
            else:
                c = 1 if mod.argument is None else int(self.value(mod.argument, env))
                d = m.shape[0]
                m = ctrl(m, c)
                if kind == "negctrl":
                    flip = np.kron(functools.reduce(np.kron, [XM] * c), np.eye(d))
                    m = flip @ m @ flip
        if not wires:
            return m[0, 0] * u
        return apply(m, wires, u, n)


@functools.lru_cache(maxsize=None)
def _oracle(text, inputs):
    return Oracle(text, dict(inputs)).unitary()


def oracle(text, inputs=None):
    """The program's unitary (cached: both dtypes compare with one oracle run)."""
    return _oracle(text, tuple(sorted((inputs or {}).items())))


def imported(text, dtype, x=None, **kw):
    c = tql.Circuit.from_qasm3(text, dtype=dtype, **kw)
    return c, c.unitary(x).detach().cpu().numpy()


def assert_same(text, dtype, oracle_text=None, inputs=None, **kw):
    c, u = imported(text, dtype, **kw)
    want = oracle(oracle_text or text, inputs)
    np.testing.assert_allclose(u, want, atol=ATOL[dtype], rtol=0)
    return c


def test_oracle_extra_gates_match_the_specification_bodies():
    bodies = HEAD + """gate cx_ a, b { ctrl @ U(π, 0, π) a, b; }
gate phase_(λ) q { U(0, 0, λ) q; }
gate u2_(φ, λ) q { gphase(-(φ+λ)/2); U(π/2, φ, λ) q; }
gate u3_(θ, φ, λ) q { gphase(-(φ+λ)/2); U(θ, φ, λ) q; }
gate s_ a { pow(2) @ t a; }
qubit[2] q;
"""
    for mine, std in [("cx_ q[1], q[0];", "CX q[1], q[0];"), ("phase_(0.4) q[1];", "phase(0.4) q[1];"),
                      ("u2_(0.3, -1.2) q[0];", "u2(0.3, -1.2) q[0];"),
                      ("u3_(0.1, 0.2, 0.3) q[1];", "u3(0.1, 0.2, 0.3) q[1];"),
                      ("ctrl @ phase_(0.9) q[0], q[1];", "cphase(0.9) q[0], q[1];"),
                      ("s_ q[0];", "s q[0];"), ("pow(-3) @ s_ q[1];", "s q[1];")]:
        np.testing.assert_allclose(oracle(bodies + mine), oracle(bodies + std), atol=1e-12)


# =============================================================================================
# every stdgates.inc gate and U, with each modifier
STD_NAMES = ["p", "x", "y", "z", "h", "s", "sdg", "t", "tdg", "sx", "rx", "ry", "rz", "cx", "cy", "cz",
             "cp", "crx", "cry", "crz", "ch", "swap", "ccx", "cswap", "cu", "CX", "phase", "cphase", "id",
             "u1", "u2", "u3", "U"]
SIGNATURE = {name: (n_params, n_qubits) for name, (n_params, n_qubits, _) in {**STDGATES, **EXTRA}.items()}


def test_the_list_is_stdgates():
    assert sorted(STD_NAMES) == sorted(SIGNATURE)


@pytest.mark.parametrize("name", STD_NAMES)
def test_every_stdgate_with_modifiers(name, dtype):
    rng = np.random.default_rng(sum(map(ord, name)))
    n_params, k = SIGNATURE[name]
    n = k + 2
    params = f"({', '.join(repr(float(v)) for v in rng.uniform(-4, 4, n_params))})" if n_params else ""
    text = HEAD + f"qubit[{n}] q;\n"
    # one program with every modifier (parsing dominates the run time), on scattered wires
    for prefix, extra in [("", 0), ("inv @ ", 0), ("ctrl @ ", 1), ("negctrl @ inv @ ", 1), ("pow(3) @ ", 0),
                          ("pow(-2) @ ", 0), ("ctrl(2) @ pow(2) @ ", 2)]:
        wires = rng.permutation(n)[:k + extra]
        text += f"{prefix}{name}{params} {', '.join(f'q[{w}]' for w in wires)};\n"
    assert_same(text, dtype)


def test_stdgates_become_table_gates():
    text = HEAD + "qubit[3] q;\ncx q[0], q[1]; ccx q[0], q[1], q[2]; cphase(0.1) q[0], q[2]; ctrl @ z q[1], q[2];" \
                  "ctrl @ ctrl @ x q[0], q[1], q[2]; ctrl @ cz q[0], q[1], q[2]; CX q[2], q[0]; id q[1];" \
                  "inv @ s q[0]; inv @ sx q[1]; inv @ rx(0.3) q[2]; u1(0.2) q[0];"
    c = tql.Circuit.from_qasm3(text)
    assert [op.gate.name for op in c.ops] == ["CNOT", "TOFFOLI", "CP", "CZ", "TOFFOLI", "CCZ", "CNOT", "I",
                                              "SDG", "SXDG", "RX", "P"]
    assert c.ops[10].angles == (-0.3,) and not any(op.adjoint for op in c.ops)


# =============================================================================================
# U, gphase, nested modifiers, pow, gate definitions
def test_u_and_gphase(dtype):
    text = HEAD + """qubit[3] q;
U(0.3, -1.1, 2.0) q[1];
gphase(0.7);
ctrl @ gphase(0.2) q[2];
ctrl(2) @ gphase(-0.4) q[0], q[2];
negctrl(2) @ gphase(1.3) q[2], q[1];
inv @ gphase(0.25);
pow(3) @ gphase(0.1);
"""
    c = assert_same(text, dtype)
    # without the global phase: the same matrix times e^{-i(0.7 - 0.25 + 0.3)}
    _, u = imported(text, dtype, global_phase=False)
    np.testing.assert_allclose(u * np.exp(0.75j), oracle(text), atol=ATOL[dtype], rtol=0)
    assert len(c.ops) > len(tql.Circuit.from_qasm3(text, global_phase=False).ops)


def test_u_is_the_table_u3_exactly():
    c = tql.Circuit.from_qasm3("qubit q;\nU(0.1, 0.2, 0.3) q;")     # no include: U is built in
    assert [(op.gate.name, op.angles) for op in c.ops] == [("U3", (0.1, 0.2, 0.3))]


@pytest.mark.parametrize("call", [
    "inv @ ctrl @ rx(0.4) q[2], q[0];",
    "ctrl @ inv @ pow(3) @ u3(0.3, 1.2, -0.5) q[1], q[3];",
    "negctrl @ ctrl(2) @ h q[3], q[0], q[2], q[1];",
    "ctrl @ negctrl @ swap q[1], q[3], q[0], q[2];",
    "inv @ negctrl(2) @ inv @ u2(0.7, 0.1) q[0], q[1], q[2];",
    "pow(2) @ ctrl @ pow(-1) @ cu(0.1, 0.2, 0.3, 0.4) q[0], q[3], q[1];",
    "ctrl @ negctrl @ ctrl @ sx q[3], q[2], q[1], q[0];",
    "pow(0) @ ccx q[0], q[1], q[2];",
    "pow(2.0) @ t q[1];",
])
def test_nested_modifiers(call, dtype):
    assert_same(HEAD + "qubit[4] q;\nh q[0]; h q[1];\n" + call, dtype)


DEFS = """gate phased(a) x { gphase(a / 2); rz(a) x; }
gate pair(a, b) x, y { phased(a) x; ctrl @ ry(b - a) x, y; inv @ phased(2 * b) y; }
gate three(t) x, y, z { pair(t, -t / 3) x, z; negctrl @ pair(t ** 2, π / 4) y, z, x; cx z, y; }
"""


@pytest.mark.parametrize("call", [
    "phased(0.3) q[1];", "pair(0.5, -1.2) q[2], q[0];", "three(0.9) q[1], q[3], q[0];",
    "ctrl @ three(-0.4) q[2], q[0], q[1], q[3];", "inv @ ctrl(2) @ pair(1.0, 2.0) q[3], q[1], q[0], q[2];",
    "pow(-2) @ negctrl @ phased(1.7) q[0], q[3];",
])
def test_gate_definitions_calling_each_other(call, dtype):
    assert_same(HEAD + DEFS + "qubit[4] q;\nh q[3];\n" + call, dtype)


def test_definition_shadowing_constants_and_a_user_gate_named_like_stdgates():
    text = """OPENQASM 3;
const float half = 0.5;
gate h a { U(π/2, 0, π) a; }
gate g(half) a { U(half, 0, 0) a; }
qubit[1] q;
h q[0]; g(half * 3) q[0];
"""      # no include: 'h' is the program's own; the parameter 'half' shadows the constant
    u = tql.Circuit.from_qasm3(text, dtype=torch.complex128).unitary().numpy()
    np.testing.assert_allclose(u, U(0.75 * 2, 0, 0) @ U(math.pi / 2, 0, math.pi), atol=1e-12)


# =============================================================================================
# registers, broadcasting, loops, angle expressions
def test_aliases():
    text = HEAD + """qubit[4] _all_qubits;
let q = _all_qubits[0:1];
let r = _all_qubits[{3, 2}];
let both = q ++ r;
bit[2] c;
let cc = c;
h q;
cx q[1], r[0];
x both[2];
c[0] = measure both[3];
cc = measure q;
"""
    c = tql.Circuit.from_qasm3(text)
    assert [(op.gate.name, op.wires) for op in c.ops] == [("H", (0,)), ("H", (1,)), ("CNOT", (1, 3)), ("X", (3,))]


def test_registers_and_broadcast(dtype):
    text = HEAD + """qubit[2] a;
qubit b;
qreg c[2];
h a;
cx a, c;
cx b, c[1];
rz(0.1) c[0:1];
x a[-1];
cz a[{1, 0}], c;
ctrl @ ry(0.3) b, a;
barrier a, b;
for int i in [0:1] { crx(0.2 * (i + 1)) a[i], c[1 - i]; }
box { s b; }
"""
    unrolled = HEAD + """qubit[5] q;
h q[0]; h q[1];
cx q[0], q[3]; cx q[1], q[4];
cx q[2], q[4];
rz(0.1) q[3]; rz(0.1) q[4];
x q[1];
cz q[1], q[3]; cz q[0], q[4];
ctrl @ ry(0.3) q[2], q[0]; ctrl @ ry(0.3) q[2], q[1];
crx(0.2) q[0], q[4]; crx(0.4) q[1], q[3];
s q[2];
"""
    c = assert_same(text, dtype, oracle_text=unrolled)
    assert c.n_wires == 5


def test_loops_and_block_scope():
    text = HEAD + """const int n = 3;
qubit[n] q;
for int i in [0:n - 2] { float a = 0.1 * (i + 1); crz(a) q[i], q[i + 1]; }
for uint j in {2, 0} { x q[j]; }
for int k in [2:-1:1] { h q[k]; }
"""
    c = tql.Circuit.from_qasm3(text)
    assert [(op.gate.name, op.wires, op.angles) for op in c.ops] == [
        ("CRZ", (0, 1), (0.1,)), ("CRZ", (1, 2), (0.2,)), ("X", (2,), ()), ("X", (0,), ()), ("H", (2,), ()),
        ("H", (1,), ())]


@pytest.mark.parametrize("expr, value", [
    ("pi/2", math.pi / 2), ("π * 3", 3 * math.pi), ("tau / 4", math.tau / 4), ("τ - 1", math.tau - 1),
    ("euler", math.e), ("ℇ ** 2", math.e ** 2), ("-0.5e-1 + 3", -0.05 + 3), ("2 ** -2", 0.25),
    ("-(1 - 3) * 2 / 8", 0.5), ("1/2", 0.5),
    ("sin(1) + cos(2) * tan(0.3)", math.sin(1) + math.cos(2) * math.tan(0.3)),
    ("exp(0.2) - ln(3) + log(2)", math.exp(0.2) - math.log(3) + math.log(2)), ("sqrt(2)", math.sqrt(2)),
    ("arcsin(0.5) + arccos(-0.2) + arctan(4)", math.asin(0.5) + math.acos(-0.2) + math.atan(4)),
    ("floor(2.7) + ceiling(0.2)", 3.0), ("k * 2 + f", 7.5), ("float(k)", 3.0),
])
def test_angle_expressions(expr, value):
    c = tql.Circuit.from_qasm3(f"const int k = 3;\nconst float f = 1.5;\nqubit q;\nU({expr}, 0, 0) q;")
    assert c.ops[0].angles[0] == pytest.approx(value, rel=1e-15, abs=1e-15)


def test_expressions_through_the_oracle(dtype):
    text = HEAD + "qubit[2] q;\nrx(-π/3 + tau/8 - euler*2) q[0];\ncu(sin(0.3), cos(1)**2, -exp(0.1), sqrt(3)) " \
                  "q[1], q[0];\nu2(arctan(2), -arcsin(0.4)) q[1];\n"
    assert_same(text, dtype)


# =============================================================================================
# inputs: trainable weights and feature columns
def test_input_names_of_to_qasm3_become_weights_and_columns():
    text = HEAD + """input float[64] theta_0;
input float[64] theta_3;
input float[64] x_2;
input angle[32] gamma;
qubit[2] q;
rx(0.5*theta_3) q[0];
crz(-x_2) q[0], q[1];
ry(gamma) q[1];
rz(theta_0) q[1];
"""
    c = tql.Circuit.from_qasm3(text)
    assert [op.angles for op in c.ops] == [(Param(3, 0.5),), (Input(2, -1.0),), (Param(4, 1.0),), (Param(0, 1.0),)]
    assert c.num_parameters == 5 and c.n_inputs == 3
    t = tql.Circuit.from_qasm3(text, inputs="trainable")
    assert [op.angles for op in t.ops] == [(Param(1, 0.5),), (Param(2, -1.0),),
                                           (Param(3, 1.0),), (Param(0, 1.0),)]
    f = tql.Circuit.from_qasm3(text, inputs="features")
    assert [op.angles for op in f.ops] == [(Input(1, 0.5),), (Input(2, -1.0),), (Input(3, 1.0),), (Input(0, 1.0),)]
    assert f.num_parameters == 0
    d = tql.Circuit.from_qasm3(text, inputs={"theta_3": 0.25, "gamma": Input(7, 2.0), "x_2": Param(1)})
    assert [op.angles for op in d.ops] == [(0.125,), (Param(1, -1.0),), (Input(7, 2.0),), (Param(0, 1.0),)]
    assert d.num_parameters == 2


def test_init_sets_new_weights():
    c = tql.Circuit.from_qasm3("input float a;\ninput float b;\nqubit q;\nU(a, b, 0) q;", init=0.5)
    assert c.weights.tolist() == [0.5, 0.5]


def test_affine_and_symbolic_angles(dtype):
    """A sum of terms splits into one gate per term (or P·RY·P for U); gate bodies and gphase too."""
    text = HEAD + """input float[64] a;
input float[64] b;
qubit[3] q;
gate g(t) x, y { ctrl @ rx(2 * t - π / 3) x, y; gphase(t / 4); }
h q[0]; h q[2];
rz(a + b - 0.3) q[0];
U(a + 1, -b, 2 * a - b) q[1];
ctrl @ u3(b, a + b, 0.2) q[0], q[2];
cu(a, 0.1, b - 1, a + b) q[2], q[1];
inv @ g(a - b / 2) q[1], q[0];
negctrl @ g(3 * b) q[1], q[2], q[0];
gphase(a - 2 * b);
"""
    values = {"a": 0.37, "b": -1.21}
    c = tql.Circuit.from_qasm3(text, dtype=dtype, inputs="trainable")
    with torch.no_grad():
        c.weights.copy_(torch.tensor([values["a"], values["b"]], dtype=torch.float64))
    assert all(isinstance(v, (float, Param)) for op in c.ops for v in op.angles)
    np.testing.assert_allclose(c.unitary().detach().numpy(), oracle(text, values), atol=ATOL[dtype], rtol=0)
    f = tql.Circuit.from_qasm3(text, dtype=dtype, inputs="features")
    rows = torch.tensor([[values["a"], values["b"]], [0.4, 2.2]], dtype=torch.float64)
    u = f.unitary(rows).detach().numpy()
    np.testing.assert_allclose(u[0], oracle(text, values), atol=ATOL[dtype], rtol=0)
    np.testing.assert_allclose(u[1], oracle(text, {"a": 0.4, "b": 2.2}), atol=ATOL[dtype], rtol=0)
    bound = tql.Circuit.from_qasm3(text, dtype=dtype, inputs=values)
    assert bound.num_parameters == 0
    np.testing.assert_allclose(bound.unitary().detach().numpy(), oracle(text, values), atol=ATOL[dtype], rtol=0)


def test_gradients_flow_through_imported_weights():
    c = tql.Circuit.from_qasm3(HEAD + "input float theta_0;\nqubit q;\nrx(2 * theta_0 + 0.1) q;", init=0.3)
    p1 = c()[0, 1].abs() ** 2
    p1.backward()
    # P(1) = sin²((2θ + 0.1)/2): d/dθ = sin(2θ + 0.1)
    assert c.weights.grad.item() == pytest.approx(math.sin(0.7), abs=1e-5)


# =============================================================================================
# round trips through to_qasm3
def _random_circuit(rng, n, dtype, features=False):
    pool = [g for g in G.GATES.values() if not g.takes_data]
    pool += [G.controlled(G.Z, 3), G.controlled(G.ROT, 2), G.controlled(G.SXDG, 1), G.controlled(G.RXX, 1),
             G.controlled(G.ISWAP, 1), G.CU3]
    c = tql.Circuit(n, dtype=dtype)
    for _ in range(14):
        gate = pool[rng.integers(len(pool))]
        k = gate.n_wires or int(rng.integers(gate.min_wires, n + 1))
        if k > n:
            continue
        wires = rng.permutation(n)[:k].tolist()
        r = rng.random()
        if gate.n_params and r < 0.35:
            c.add(gate, wires, trainable=True, scale=float(rng.choice([1.0, -0.5, 2.0])))
        elif gate.n_params and features and r < 0.6:
            columns = tuple(rng.integers(0, 3, gate.n_params).tolist())
            c.add(gate, wires, input=columns, scale=float(rng.choice([1.0, 0.3])))
        else:
            c.add(gate, wires, *rng.uniform(-4, 4, gate.n_params).tolist())
    q, _ = np.linalg.qr(rng.normal(size=(2, 2)) + 1j * rng.normal(size=(2, 2)))
    c.qubit_unitary([int(rng.integers(n))], torch.tensor(q))      # written as gphase and U
    return c


@pytest.mark.parametrize("seed", range(3))
def test_round_trip_bound(seed, dtype):
    rng = np.random.default_rng(seed)
    c = _random_circuit(rng, 4, dtype)
    back = tql.Circuit.from_qasm3(c.to_qasm3(), dtype=dtype)
    assert back.num_parameters == 0
    np.testing.assert_allclose(back.unitary().detach().numpy(), c.unitary().detach().numpy(),
                               atol=ATOL[dtype], rtol=0)


@pytest.mark.parametrize("seed", range(3))
def test_round_trip_input(seed, dtype):
    rng = np.random.default_rng(100 + seed)
    c = _random_circuit(rng, 4, dtype, features=True)
    c = c + _random_circuit(rng, 4, dtype, features=True).inverse()
    back = tql.Circuit.from_qasm3(c.to_qasm3(parameters="input"), dtype=dtype)
    assert back.num_parameters == c.num_parameters and back.n_inputs <= 3
    x = torch.tensor(rng.uniform(-3, 3, (4, 3)), dtype=REAL[dtype])
    for _ in range(2):
        with torch.no_grad():
            c.weights.copy_(torch.tensor(rng.uniform(-4, 4, c.num_parameters)))
            back.weights.copy_(c.weights)
        out, want = back(x).detach().numpy(), c(x).detach().numpy()
        np.testing.assert_allclose(out, want, atol=ATOL[dtype], rtol=0)


def test_round_trip_keeps_the_gates_it_can():
    c = tql.Circuit(3)
    c.h(0).cnot(0, 1).crz(1, 2, trainable=True, scale=0.5).u3(2, 0.1, 0.2, 0.3).toffoli(0, 1, 2).sdg(1).swap(0, 2)
    back = tql.Circuit.from_qasm3(c.to_qasm3(parameters="input"))
    assert [(op.gate.name, op.wires) for op in back.ops] == [(op.gate.name, op.wires) for op in c.ops]
    assert back.ops[2].angles == (Param(0, 0.5),)


# =============================================================================================
# sources, measurement, versions
def test_source_from_a_path(tmp_path):
    path = tmp_path / "bell.qasm"
    path.write_text(HEAD + "qubit[2] q;\nh q[0];\ncx q[0], q[1];\n")
    for source in (path, str(path)):
        c = tql.Circuit.from_qasm3(source)
        assert [op.gate.name for op in c.ops] == ["H", "CNOT"]
    assert [op.gate.name for op in tql.qasm3.from_qasm3(path).ops] == ["H", "CNOT"]


def test_measure_at_the_end_is_dropped_and_reset_of_a_fresh_qubit_accepted():
    text = HEAD + "qubit[2] q;\nbit[2] c;\nreset q[1];\nh q[0];\ncx q[0], q[1];\nc = measure q;\n" \
                  "measure q[0] -> c[0];\nc[1] = measure q[1];\nbit d = measure q[0];\n"
    c = tql.Circuit.from_qasm3(text)
    assert [op.gate.name for op in c.ops] == ["H", "CNOT"]


def test_mixed_keeps_measure_and_reset():
    text = HEAD + "qubit[2] q;\nbit[2] c;\nh q[0];\nc[0] = measure q[0];\ncx q[0], q[1];\nreset q[0];\nh q[0];\n"
    m = tql.MixedCircuit.from_qasm3(text)
    assert isinstance(m, tql.MixedCircuit)
    assert [(pos, inst.label) for pos, inst in m.instructions] == [(1, "measure"), (2, "reset")]
    want = tql.MixedCircuit(2)
    want.h(0).measure([0])
    want.cnot(0, 1).reset([0])
    want.h(0)
    obs = ["Z0", "Z1", "X0", "X1", "Z0 Z1"]
    assert torch.allclose(tql.mixed.expval(m, obs), tql.mixed.expval(want, obs), atol=1e-6)
    assert isinstance(tql.Circuit.from_qasm3(text, mixed=True), tql.MixedCircuit)


def test_openqasm2_is_pointed_to_from_qasm():
    text = 'OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nh q[0];\ncx q[0], q[1];\n'
    with pytest.raises(ValueError, match=r"OPENQASM 2\.0.*tql\.Circuit\.from_qasm"):
        tql.Circuit.from_qasm3(text)
    assert [op.gate.name for op in tql.Circuit.from_qasm(text).ops] == ["H", "CNOT"]
    with pytest.raises(ValueError, match=r'"qelib1\.inc" is OpenQASM 2\.0.*from_qasm'):
        tql.Circuit.from_qasm3('include "qelib1.inc";\nqubit q;\n')


def test_version_3_forms():
    for head in ("OPENQASM 3;\n", "OPENQASM 3.0;\n", "OPENQASM 3.1;\n", ""):
        assert len(tql.Circuit.from_qasm3(head + "qubit q;\nU(1, 2, 3) q;").ops) == 1


def test_pragmas_annotations_delay_are_accepted():
    text = HEAD + "pragma anything goes\nqubit[2] q;\n@label\nh q[0];\ndelay[20ns] q;\nbarrier;\nx q[1];\n"
    assert [op.gate.name for op in tql.Circuit.from_qasm3(text).ops] == ["H", "X"]


# =============================================================================================
# refused, each with a message that names the culprit
BAD = [
    ("unknown_gate", HEAD + "qubit q;\nfoo q;", r"line 4, column 1: unknown gate 'foo' in `foo q;`"),
    ("stdgate_without_include", "qubit q;\nh q;", r"unknown gate 'h' \(it is a stdgates.inc gate: add include"),
    ("arity", HEAD + "qubit[3] q;\ncx q[0];", r"gate 'cx' acts on 2 qubit\(s\), got 1 in `cx q\[0\];`"),
    ("arity_with_controls", HEAD + "qubit[3] q;\nctrl(2) @ x q[0], q[1];",
     r"'x' with 2 control\(s\) acts on 3 qubit\(s\), got 2"),
    ("parameter_count", HEAD + "qubit q;\nrx(1, 2) q;", r"gate 'rx' takes 1 parameter\(s\), got 2"),
    ("parameter_missing", HEAD + "qubit q;\nu3(1, 2) q;", r"gate 'u3' takes 3 parameter\(s\), got 2"),
    ("index_out_of_range", HEAD + "qubit[2] q;\nx q[2];", r"index 2 out of range for qubit\[2\] q in `x q\[2\];`"),
    ("negative_index_out_of_range", HEAD + "qubit[2] q;\nx q[-3];", r"index -3 out of range"),
    ("repeated_qubit", HEAD + "qubit[2] q;\ncx q[1], q[1];",
     r"the qubit q\[1\] is given twice in `cx q\[1\], q\[1\];`"),
    ("repeated_in_broadcast", HEAD + "qubit[2] q;\ncx q, q[0];", r"the qubit q\[0\] is given twice"),
    ("broadcast_sizes", HEAD + "qubit[2] a;\nqubit[3] b;\ncx a, b;", r"different sizes \[2, 3\]"),
    ("undeclared_register", HEAD + "qubit q;\nx r;", r"undeclared qubit register 'r'"),
    ("bit_as_qubit", HEAD + "qubit q;\nbit c;\nx c;", r"'c' is a bit register, not a qubit register"),
    ("if", HEAD + "qubit q;\nbit c;\nc = measure q;\nif (c) x q;", r"line 6, column 1: 'if' is not supported"),
    ("while", HEAD + "qubit q;\nint i = 0;\nwhile (i < 2) { x q; }", r"'while' is not supported"),
    ("assignment", HEAD + "qubit q;\nfloat a = 1.0;\na = 2.0;\nrx(a) q;", r"'classical assignment' is not supported"),
    ("subroutine", HEAD + "def f(qubit a) { x a; }\nqubit q;", r"'def \(subroutine\)' is not supported"),
    ("non_integer_pow", HEAD + "qubit q;\npow(0.5) @ x q;", r"pow\(0\.5\) @: only integer powers are supported"),
    ("symbolic_pow", HEAD + "input float a;\nqubit q;\npow(a) @ x q;", r"pow\(\.\.\.\) must be a constant.*'a'"),
    ("ctrl_zero", HEAD + "qubit q;\nctrl(0) @ x q;", r"ctrl\(0\) @: the number of controls must be at least 1"),
    ("ctrl_fraction", HEAD + "qubit[3] q;\nctrl(1.5) @ x q[0], q[1];",
     r"argument of ctrl\(\.\.\.\) must be an integer"),
    ("division_by_zero", HEAD + "qubit q;\nrx(1/0) q;", r"division by zero in `1 / 0`"),
    ("non_finite", HEAD + "qubit q;\nrx(exp(1000)) q;", r"exp\(1000\.0\) is undefined"),
    ("non_finite_product", HEAD + "qubit q;\nrx(1e300 * 1e300) q;", r"the angle `1e\+300 \* 1e\+300` is not finite"),
    ("domain", HEAD + "qubit q;\nrx(sqrt(-1)) q;", r"sqrt\(-1\.0\) is undefined"),
    ("nonlinear_function", HEAD + "input float theta;\nqubit q;\nrx(sin(theta)) q;",
     r"sin\(\.\.\.\) of the input\(s\) 'theta' is not linear"),
    ("nonlinear_product", HEAD + "input float a;\ninput float b;\nqubit q;\nrx(a * b) q;",
     r"a product of the input\(s\) 'a', 'b' is not linear"),
    ("nonlinear_in_a_gate", HEAD + "input float a;\ngate g(t) x { rx(t ** 2) x; }\nqubit q;\ng(a) q;",
     r"a power of the input\(s\) 'a' is not linear.*inside gate 'g', line 4.*in `g\(a\) q;`"),
    ("unknown_identifier", HEAD + "qubit q;\nrx(alpha) q;", r"unknown identifier 'alpha'"),
    ("unknown_function", HEAD + "qubit q;\nrx(sinh(1)) q;", r"unknown function 'sinh'"),
    ("int_input", HEAD + "input int n;\nqubit q;", r"input 'n' of type int: only float and angle inputs"),
    ("complex_type", HEAD + "complex[float[64]] z = 1.0;\nqubit q;", r"complex variables are not supported"),
    ("uninitialised", HEAD + "float a;\nqubit q;", r"'a' has no value"),
    ("redefined_stdgate", HEAD + "gate h a { U(0, 0, 0) a; }", r"the stdgates.inc gate 'h' is already defined"),
    ("redefined_U", "gate U(a, b, c) q { }\nqubit q;", r"the built-in gate 'U' is already defined"),
    ("recursive_gate", HEAD + "gate g a { g a; }", r"gate 'g' calls itself"),
    ("body_arity", HEAD + "gate g a, b { cx a; }", r"gate 'cx' acts on 2 qubit\(s\), got 1 \(gate 'g', line 3"),
    ("body_unknown_identifier", HEAD + "input float th;\ngate g a { rx(th) a; }",
     r"unknown identifier 'th' in the body of gate 'g'"),
    ("body_repeated_qubit", HEAD + "gate g a, b { cx a, a; }", r"the qubit 'a' is given twice \(gate 'g'"),
    ("redeclared", HEAD + "qubit q;\nqubit[2] q;", r"'q' is already declared \(as a qubit register\)"),
    ("reserved_name", HEAD + "input float pi;", r"'pi' is a built-in constant"),
    ("register_size", HEAD + "qubit[0] q;", r"register 'q' must have at least one element"),
    ("unknown_include", 'include "mylib.inc";\nqubit q;', r'cannot include "mylib.inc"'),
    ("gate_after_measure", HEAD + "qubit q;\nbit c;\nc = measure q;\nx q;",
     r"line 6, column 1: the qubit q is used after it was measured.*mixed=True"),
    ("reset_after_use", HEAD + "qubit q;\nx q;\nreset q;", r"reset of q after it was used"),
    ("no_qubits", HEAD + "const float a = 1;", r"declares no qubits"),
    ("parse_error", HEAD + "qubit q;\nrx(1 +) q;", r"cannot parse the program: line 4:\d+ .* in `rx\(1 \+\) q;`"),
    ("loop_over_register", HEAD + "qubit[2] q;\nbit[2] c;\nfor bit b in c { x q[0]; }",
     r"a for loop must run over a constant range"),
    ("error_inside_a_loop", HEAD + "qubit[2] q;\nfor int i in [0:2] { x q[i]; }",
     r"index 2 out of range for qubit\[2\] q \(for loop on line 4, i = 2\) in `x q\[i\];`"),
    ("expansion_limit", HEAD + "gate g0 a { x a; }\n" + "".join(f"gate g{i} a {{ g{i - 1} a; g{i - 1} a; }}\n"
                                                               for i in range(1, 25)) + "qubit q;\ng24 q;",
     r"line 29, column 1: 'g24' expands to more than 1000000 gates"),
    ("nesting_limit", HEAD + "gate g0 a { x a; }\n" + "".join(f"gate g{i} a {{ g{i - 1} a; }}\n"
                                                             for i in range(1, 70)),
     r"gate 'g64' nests gate definitions 65 deep \(at most 64\)"),
    ("inputs_not_declared", (HEAD + "input float a;\nqubit q;\nrx(a) q;", {"b": 1.0}),
     r"inputs= names 'b', which the program does not declare as an input"),
]


@pytest.mark.parametrize("text, pattern", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_refused(text, pattern):
    text, inputs = text if isinstance(text, tuple) else (text, "auto")
    with pytest.raises(ValueError, match=pattern):
        tql.Circuit.from_qasm3(text, inputs=inputs)


def test_argument_errors():
    with pytest.raises(ValueError, match=r"inputs must be one of \('auto', 'trainable', 'features'\)"):
        tql.Circuit.from_qasm3("qubit q;", inputs="weights")
    with pytest.raises(TypeError, match="inputs must be one of"):
        tql.Circuit.from_qasm3("qubit q;", inputs=["a"])
    with pytest.raises(TypeError, match=r"inputs\['a'\] must be a number, tql.Param or tql.Input"):
        tql.Circuit.from_qasm3("qubit q;", inputs={"a": "x"})
    with pytest.raises(ValueError, match=r"inputs\['a'\] = nan is not finite"):
        tql.Circuit.from_qasm3("qubit q;", inputs={"a": float("nan")})
    with pytest.raises(ValueError, match=r"init must be a number or one of \('uniform'"):
        tql.Circuit.from_qasm3("qubit q;", init="ones")
    with pytest.raises(TypeError, match="from_qasm3: expected OpenQASM text or a path"):
        tql.Circuit.from_qasm3(42)
    with pytest.raises(FileNotFoundError, match="from_qasm3:"):
        tql.Circuit.from_qasm3("no_such_file.qasm")


def test_missing_parser_asks_for_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openqasm3", None)
    with pytest.raises(ImportError, match=r"pip install torchquantum-layers\[qasm3\]"):
        tql.Circuit.from_qasm3("qubit q;\nU(1, 2, 3) q;")


def test_the_library_never_imports_openqasm3_at_import_time():
    root = pathlib.Path(tql.__file__).parent
    for path in root.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        if "openqasm3" not in source:
            continue
        tree = pyast.parse(source)
        for node in tree.body:        # module level only: function bodies import lazily
            names = [a.name for a in node.names] if isinstance(node, pyast.Import) else \
                [node.module or ""] if isinstance(node, pyast.ImportFrom) else []
            assert not any(n.split(".")[0] == "openqasm3" for n in names), path
