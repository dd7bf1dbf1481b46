"""``to_qasm`` writes every controlled table gate, MULTICONTROLLEDX of any width and the data gates
exactly (torchquantum_layers/qasm.py, the writer). Each program is run by the NumPy interpreter
below, whose matrix for every qelib1 gate is test_qasm.QELIB1's oracle (tests/oracle.py, written
from the gates' definitions), and compared entry by entry, global phase included, with the
oracle's matrix of the gate and with ``circuit.unitary()``; reading the program back with
``Circuit.from_qasm`` is a second check, not the oracle."""
import math
import re

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import qelib1_synthesis as Q
from torchquantum_layers.algorithms import controlled_unitary

from . import oracle as O
from .test_qasm import QELIB1

G = tql.gates
ATOL = 1e-10
SQRT_X = O.gate_matrix("SX")


# =============================================================================================
# the oracle: a NumPy interpreter of the qelib1 statements to_qasm writes
def _angle(text: str) -> float:
    """An angle as _format prints it: [-][k*]pi[/d] or a float literal."""
    m = re.fullmatch(r"(-?)(?:(\d+)\*)?pi(?:/(\d+))?", text.strip())
    if m:
        return (-1 if m[1] else 1) * int(m[2] or 1) * math.pi / int(m[3] or 1)
    return float(text)


def _apply(u, m, wires, n):
    """m (its first wire the most significant bit) on ``wires`` of the columns of u (2^n, 2^n):
    an einsum over the wire axes (plain loops: BLAS threads make tensordot slow here)."""
    k = len(wires)
    axes = [chr(ord("a") + w) for w in range(n)]
    outs = [chr(ord("A") + j) for j in range(k)]
    after = list(axes)
    for j, w in enumerate(wires):
        after[w] = outs[j]
    spec = f"{''.join(outs)}{''.join(axes[w] for w in wires)},{''.join(axes)}z->{''.join(after)}z"
    return np.einsum(spec, np.asarray(m).reshape((2,) * 2 * k), u.reshape((2,) * n + (-1,))).reshape(2 ** n, -1)


def run_steps(steps, n):
    """The unitary of [(qelib1 name, wires, angles), ...] applied in order."""
    u = np.eye(2 ** n, dtype=np.complex128)
    for name, wires, angles in steps:
        n_params, k, fn = QELIB1[name]
        assert len(angles) == n_params and len(wires) == k and len(set(wires)) == k, (name, wires, angles)
        u = _apply(u, fn(*angles), wires, n)
    return u


def parse(text):
    """(number of qubits, steps) of a program to_qasm wrote."""
    lines = text.splitlines()
    assert lines[:2] == ["OPENQASM 2.0;", 'include "qelib1.inc";']
    n = int(re.fullmatch(r"qreg q\[(\d+)\];", lines[2])[1])
    steps = []
    for line in lines[3:]:
        m = re.fullmatch(r"(\w+)(?:\(([^()]*)\))? (q\[\d+\](?:, q\[\d+\])*);", line)
        assert m, line
        angles = [_angle(a) for a in m[2].split(",")] if m[2] else []
        steps.append((m[1], [int(w) for w in re.findall(r"\d+", m[3])], angles))
    return n, steps


def run_qasm(text):
    n, steps = parse(text)
    return run_steps(steps, n)


def n_statements(circuit) -> int:
    return len(parse(circuit.to_qasm())[1])


def check(circuit, expected, reader=False):
    """The circuit's program and its inverse's equal ``expected`` (and its adjoint) and the
    library's unitaries, entry by entry."""
    for c, u in ((circuit, expected), (circuit.inverse(), expected.conj().T)):
        text = c.to_qasm()
        ours = run_qasm(text)
        np.testing.assert_allclose(ours, u, atol=ATOL, rtol=0, err_msg=text)
        np.testing.assert_allclose(ours, c.unitary().numpy(), atol=ATOL, rtol=0, err_msg=text)
        if reader:
            back = tql.Circuit.from_qasm(text, dtype=torch.complex128)
            np.testing.assert_allclose(back.unitary().numpy(), u, atol=ATOL, rtol=0, err_msg=text)


def test_the_interpreter_reads_what_it_should():
    text = ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[2];\ncu3(pi/2, -3*pi/4, 0.25) q[2], q[0];\n'
            'ccx q[1], q[2], q[0];\n')
    expected = O.full_operator(O.controlled_matrix(O.X, 2), [1, 2, 0], 3) @ \
        O.full_operator(O.controlled_matrix(O.u3(math.pi / 2, -3 * math.pi / 4, 0.25)), [2, 0], 3) @ \
        O.full_operator(O.H, [2], 3)
    np.testing.assert_allclose(run_qasm(text), expected, atol=1e-14)


# =============================================================================================
# controlled 1-wire gates, k = 1..5 controls
ONE_WIRE = [name for name, (k, _) in O.SIGNATURES.items() if k == 1]


@pytest.mark.parametrize("name", ONE_WIRE)
def test_every_one_wire_gate_with_1_to_5_controls(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    n_params = O.SIGNATURES[name][1]
    for k in range(1, 6):
        n = k + 2
        wires = [int(w) for w in rng.permutation(n)[:k + 1]]
        angles = rng.uniform(-7, 7, n_params).tolist()      # beyond ±2π: periods are respected
        c = tql.Circuit(n, dtype=torch.complex128).add(G.controlled(G.GATES[name], k), wires, *angles)
        expected = O.full_operator(O.controlled_matrix(O.gate_matrix(name, *angles), k), wires, n)
        check(c, expected)


# =============================================================================================
# controlled multi-wire targets, 1..3 controls
MULTI_WIRE = ["SWAP", "ISWAP", "RXX", "RYY", "RZZ", "RZX", "SINGLEEXCITATION", "CNOT", "CY", "CZ", "CH",
              "CP", "CRX", "CRY", "CRZ", "CROT", "CU3", "TOFFOLI", "CCZ", "CSWAP", "DOUBLEEXCITATION"]


@pytest.mark.parametrize("name", MULTI_WIRE)
def test_multi_wire_targets_with_1_to_3_controls(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    kt, n_params = O.SIGNATURES[name]
    for k in range(1, 4):
        n = min(kt + k + 1, 7)
        wires = [int(w) for w in rng.permutation(n)[:kt + k]]
        angles = rng.uniform(-7, 7, n_params).tolist()
        c = tql.Circuit(n, dtype=torch.complex128).add(G.controlled(G.GATES[name], k), wires, *angles)
        expected = O.full_operator(O.controlled_matrix(O.gate_matrix(name, *angles), k), wires, n)
        check(c, expected)


def test_a_controlled_controlled_gate_is_the_gate_with_all_the_controls():
    # controlled() merges the controls: CCRY with 2 more is C^4 RY
    gate = G.controlled(G.controlled(G.RY, 2), 2)
    assert gate.n_controls == 4 and gate.target is G.RY
    c = tql.Circuit(6, dtype=torch.complex128).add(gate, (5, 0, 3, 1, 4), 2.5)
    check(c, O.full_operator(O.controlled_matrix(O.ry(2.5), 4), [5, 0, 3, 1, 4], 6), reader=True)


@pytest.mark.parametrize("n_wires", range(2, 9))
def test_multicontrolledx_on_2_to_8_wires(n_wires):
    wires = [int(w) for w in np.random.default_rng(n_wires).permutation(n_wires)]
    c = tql.Circuit(n_wires, dtype=torch.complex128).multicontrolledx(wires)
    check(c, O.full_operator(O.controlled_matrix(O.X, n_wires - 1), wires, n_wires))


# =============================================================================================
# the borrowed-wire C^m X constructions, on every state of the borrowed wires (the whole unitary)
@pytest.mark.parametrize("m", [3, 4])
def test_lemma_7_2_toffoli_chain(m):
    n = 2 * m - 1                    # m controls, the target, m − 2 borrowed wires
    order = [int(w) for w in np.random.default_rng(m).permutation(n)]
    controls, target, borrowed = tuple(order[:m]), order[m], tuple(order[m + 1:])
    steps = Q._mcx_chain(controls, target, borrowed)
    assert len(steps) == 4 * (m - 2) and {s[0] for s in steps} == {"ccx"}
    np.testing.assert_allclose(run_steps(steps, n),
                               O.full_operator(O.controlled_matrix(O.X, m), controls + (target,), n), atol=1e-14)


def test_lemma_7_3_split_on_one_borrowed_wire():
    order = (4, 0, 6, 2, 5, 1, 3)    # 5 controls, the target 1, borrowed 3
    controls, target = order[:5], order[5]
    assert Q._mcx_plan(5, 1) == (4, "split", 2)
    steps = Q._mcx(controls, target, (order[6],))
    assert [s[0] for s in steps] == ["ccx", "c4x", "ccx", "c4x"]
    np.testing.assert_allclose(run_steps(steps, 7),
                               O.full_operator(O.controlled_matrix(O.X, 5), controls + (target,), 7), atol=1e-14)


def test_the_plan_takes_the_chain_where_it_is_shorter():
    assert Q._mcx_plan(40, 38)[:2] == (152, "chain")
    assert Q._mcx_plan(40, 0)[1] == "halves"


# =============================================================================================
# QubitUnitary, DiagonalUnitary and controlled_unitary's block matrices
def test_data_gates():
    rng = np.random.default_rng(11)
    for k in (1, 2, 3):
        wires = [int(w) for w in rng.permutation(k + 1)[:k]]
        phases = O.random_phases(2 ** k, rng)
        c = tql.Circuit(k + 1, dtype=torch.complex128).diagonalunitary(wires, phases)
        check(c, O.full_operator(np.diag(phases), wires, k + 1))
        u = O.random_unitary(2 ** k, rng)
        c = tql.Circuit(k + 1, dtype=torch.complex128).qubitunitary(wires, u)
        check(c, O.full_operator(u, wires, k + 1))
    # a diagonal QubitUnitary is written as a diagonal
    d = O.random_phases(4, rng)
    c = tql.Circuit(3, dtype=torch.complex128).qubitunitary([2, 0], np.diag(d))
    check(c, O.full_operator(np.diag(d), [2, 0], 3))
    assert n_statements(c) == 4      # p, rz, rz, rzz
    # a diagonal that is a controlled 1-wire diagonal is written as that (not as 15 MULTIRZ)
    d = np.concatenate([np.ones(14), np.exp([0.4j, -2.1j])])
    c = tql.Circuit(5, dtype=torch.complex128).diagonalunitary([4, 1, 3, 0], d)
    check(c, O.full_operator(np.diag(d), [4, 1, 3, 0], 5))
    assert n_statements(c) == 14
    # -I: a global phase only, which qelib1 writes (RZ(-2π) = -I)
    c = tql.Circuit(1, dtype=torch.complex128).qubitunitary(0, -np.eye(2))
    assert c.to_qasm().endswith("qreg q[1];\nrz(-2*pi) q[0];\n")
    check(c, -np.eye(2))


@pytest.mark.parametrize("n_controls", [1, 2, 3])
def test_a_controlled_unitary_matrix_is_written_as_the_controlled_gate(n_controls):
    rng = np.random.default_rng(n_controls)
    u = O.random_unitary(2, rng) * np.exp(0.7j)     # det ≠ 1: the phase lands on the controls
    n = n_controls + 2
    order = [int(w) for w in rng.permutation(n)]
    c = tql.Circuit(n, dtype=torch.complex128)
    controlled_unitary(c, u, order[:n_controls], order[n_controls:n_controls + 1])
    assert c.ops[-1].gate.name == "QUBITUNITARY"
    check(c, O.full_operator(O.controlled_matrix(u, n_controls), order[:n_controls + 1], n), reader=True)
    if n_controls == 1:
        assert [s[0] for s in parse(c.to_qasm())[1]] == ["p", "cu3"]


# =============================================================================================
# phase convention, adjoints, gate counts, the reader, refusals
def test_cu3_carries_u3s_phase_and_the_rest_goes_on_the_control():
    # SXDG = e^{-iπ/4} RX(-π/2): controlled, the phase is P(-π/4) on the control
    c = tql.Circuit(2, dtype=torch.complex128).add(G.controlled(G.SXDG, 1), (1, 0))
    assert c.to_qasm().endswith("p(-pi/4) q[1];\ncrx(-pi/2) q[1], q[0];\n")
    check(c, O.full_operator(O.controlled_matrix(O.gate_matrix("SXDG")), [1, 0], 2))
    # the numeric square roots of Lemma 7.5 are exact, and principal
    rng = np.random.default_rng(5)
    for u in [O.random_unitary(2, rng) for _ in range(20)] + [-np.eye(2), O.Z, O.X, np.diag([1j, -1])]:
        v = Q._principal_sqrt(u)
        np.testing.assert_allclose(v @ v, u, atol=1e-14)
        assert all(-math.pi / 2 - 1e-12 <= a <= math.pi / 2 + 1e-12 for a in np.angle(np.linalg.eigvals(v)))
        np.testing.assert_allclose(Q._matrix1(Q._zyz(u)), u, atol=1e-14)


def _count(gate, k, n_params, inverse=False):
    c = tql.Circuit(k, dtype=torch.complex128).add(gate, tuple(range(k)), *[0.3] * n_params)
    return n_statements(c.inverse() if inverse else c)


def test_gate_counts():
    """Statements per gate (c3x, c4x and c3sqrtx count one each): a longer program is a regression."""
    assert [_count(G.controlled(G.RY, k), k + 1, 1) for k in range(1, 7)] == [1, 5, 9, 13, 17, 27]
    assert [_count(G.MULTICONTROLLEDX, k, 0) for k in range(2, 9)] == [1, 1, 1, 1, 20, 30, 40]
    assert [_count(G.controlled(G.U3, k), k + 1, 3) for k in range(1, 6)] == [1, 8, 14, 20, 26]
    assert [_count(G.controlled(G.Z, k), k + 1, 0) for k in range(1, 6)] == [1, 3, 3, 3, 22]   # H C^k X H
    assert [_count(G.controlled(G.SWAP, k), k + 2, 0) for k in range(1, 4)] == [1, 3, 3]        # cx C^{k+1}X cx
    assert [_count(G.controlled(G.RZZ, k), k + 2, 1) for k in (1, 2)] == [3, 7]
    assert [_count(G.controlled(G.SINGLE_EXCITATION, k), k + 2, 1) for k in (1, 2, 3)] == [7, 11, 15]
    assert [_count(G.controlled(G.ISWAP, k), k + 2, 0) for k in (1, 2, 3)] == [6, 18, 26]
    assert _count(G.controlled(G.DOUBLE_EXCITATION, 1), 5, 1) == 12
    assert _count(G.MULTICONTROLLEDX, 6, 0, inverse=True) == 21        # csx† is p, crx


def test_a_circuit_of_controlled_gates_round_trips_through_the_reader():
    rng = np.random.default_rng(2)
    n = 6
    c = tql.Circuit(n, dtype=torch.complex128)
    expected = np.eye(2 ** n, dtype=np.complex128)
    for name, k in [("RY", 3), ("SWAP", 2), ("H", 4), ("ISWAP", 2), ("U3", 2), ("RZX", 1), ("T", 5),
                    ("CROT", 2), ("SINGLEEXCITATION", 3)]:
        kt, n_params = O.SIGNATURES[name]
        wires = [int(w) for w in rng.permutation(n)[:kt + k]]
        angles = rng.uniform(-4, 4, n_params).tolist()
        c.add(G.controlled(G.GATES[name], k), wires, *angles)
        expected = O.full_operator(O.controlled_matrix(O.gate_matrix(name, *angles), k), wires, n) @ expected
    c.multicontrolledx([3, 5, 0, 2, 1, 4])
    expected = O.full_operator(O.controlled_matrix(O.X, 5), [3, 5, 0, 2, 1, 4], n) @ expected
    check(c, expected, reader=True)


def test_what_is_still_refused_names_the_gate_and_its_wires(monkeypatch):
    # a general QubitUnitary on more than MAX_SYNTHESIS_WIRES wires (6: lowered here, to keep it small)
    monkeypatch.setattr(Q, "MAX_SYNTHESIS_WIRES", 2)
    u = O.random_unitary(8, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"^to_qasm: QUBITUNITARY on 3 wire\(s\) is neither diagonal nor .* "
                                         r"at most 2 wires \(the op on wires \(3, 0, 2\)\)$"):
        tql.Circuit(4).qubitunitary([3, 0, 2], u).to_qasm()
    # per-sample angles, as before
    with pytest.raises(ValueError, match=r"CRY on wires \(2, 0, 1\) reads input column 0"):
        tql.Circuit(3).add(G.controlled(G.RY, 2), (2, 0, 1), input=0).to_qasm()
