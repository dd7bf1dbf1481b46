"""Gates conditioned on mid-circuit measurements (MixedCircuit ``condition=``, OpenQASM ``if``).

Oracles: teleportation returns the input qubit exactly (a NumPy U3 column); products of
measured |+> states give analytic branch averages; noise after a conditioned gate is checked
against the closed form where it hits the target only.
"""
import math
import pickle

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed

from . import oracle as O
from .conftest import ATOL

ANGLES = [(0.7, 1.2, -0.4), (2.9, -0.3, 0.8), (1.6, 2.2, 2.5)]


def _teleport(dtype, angles, collapse=False):
    c = mixed.MixedCircuit(3, dtype=dtype)
    c.u3(0, *angles).h(1).cnot(1, 2).cnot(0, 1).h(0).measure([0, 1], collapse=collapse)
    return c.x(2, condition=1).z(2, condition=0)


def _bloch(psi):
    return [np.vdot(psi, P @ psi).real for P in (O.X, O.Y, O.Z)]


@pytest.mark.parametrize("angles", ANGLES)
def test_teleportation_returns_the_input_qubit(dtype, angles):
    psi = O.u3(*angles)[:, 0]
    target = np.outer(psi, psi.conj())
    c = _teleport(dtype, angles)
    rho2 = tql.qinfo.reduced_density_matrix(mixed.run(c), [2])[0].numpy()
    np.testing.assert_allclose(rho2, target, atol=10 * ATOL[dtype])
    # every collapsed run, whatever its outcomes, and every trajectory ends in the same qubit
    collapsing = _teleport(dtype, angles, collapse=True)
    seen = set()
    for seed in range(6):
        out = collapsing(generator=torch.Generator().manual_seed(seed))
        seen.add(tuple(int(v) for _, o in collapsing.last_outcomes for v in o.flatten().tolist()))
        rho2 = tql.qinfo.reduced_density_matrix(out, [2])[0].numpy()
        np.testing.assert_allclose(rho2, target, atol=10 * ATOL[dtype])
    assert len(seen) > 1
    est = mixed.trajectories.expval(c, ["X2", "Y2", "Z2"], n_trajectories=16,
                                    generator=torch.Generator().manual_seed(1))
    np.testing.assert_allclose(est[0].numpy(), _bloch(psi), atol=10 * ATOL[dtype])


def test_conditions_on_several_wires_and_on_outcome_zero():
    c = mixed.MixedCircuit(3, dtype=torch.complex128)
    c.h(0).h(1).measure([0, 1]).x(2, condition={0: 0, 1: 1})
    z2, z0z2, z1z2 = mixed.expval(c, ["Z2", "Z0 Z2", "Z1 Z2"])[0].tolist()
    # q2 = 1 in the branch (q0, q1) = (0, 1) only, of four equally likely: Z0 Z2 over the branches
    # 00, 01, 10, 11 is +1, -1, -1, -1 and Z1 Z2 is +1, +1, +1, -1
    assert z2 == pytest.approx(0.5, abs=1e-12)
    assert z0z2 == pytest.approx(-0.5, abs=1e-12)
    assert z1z2 == pytest.approx(0.5, abs=1e-12)
    # the flips that read outcome 0 leave the measured wire as it was
    assert mixed.expval(c, "Z0")[0].item() == pytest.approx(0.0, abs=1e-12)


def test_noise_follows_the_conditioned_gate_on_its_own_wires():
    p = 0.15
    model = tql.NoiseModel().add(mixed.bit_flip(p), gates="x")
    c = mixed.MixedCircuit(2, dtype=torch.complex128, noise_model=model)
    c.h(0).measure(0).x(1, condition=0)
    z0, z1, zz = mixed.expval(c, ["Z0", "Z1", "Z0 Z1"])[0].tolist()
    # the flip hits q1 after the slot in either branch, never the measured q0 (that would give (1-2p)^2)
    assert zz == pytest.approx(1 - 2 * p, abs=1e-12)
    assert z0 == pytest.approx(0.0, abs=1e-12) and z1 == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("diff_method", ["backprop", "parameter-shift"])
def test_a_conditioned_trainable_rotation_has_the_analytic_gradient(diff_method):
    theta = 0.9
    c = mixed.MixedCircuit(2, dtype=torch.complex128)
    c.h(0).measure(0).ry(1, trainable=True, condition=0)
    with torch.no_grad():
        c.weights[0] = theta
    value = mixed.expval(c, "Z1", diff_method=diff_method)
    value.sum().backward()
    assert float(value.detach()[0]) == pytest.approx((1 + math.cos(theta)) / 2, abs=1e-12)
    assert float(c.weights.grad[0]) == pytest.approx(-math.sin(theta) / 2, abs=1e-10)


def test_conditioned_circuits_pickle_and_fold():
    c = _teleport(torch.complex128, ANGLES[0])
    back = pickle.loads(pickle.dumps(c))
    psi = O.u3(*ANGLES[0])[:, 0]
    np.testing.assert_allclose(mixed.expval(back, ["X2", "Y2", "Z2"])[0].numpy(), _bloch(psi), atol=1e-12)
    folded = mixed.fold_gates(c, 3, "left")
    np.testing.assert_allclose(mixed.expval(folded, ["X2", "Y2", "Z2"])[0].numpy(), _bloch(psi), atol=1e-12)


def test_bad_conditions_are_named():
    c = mixed.MixedCircuit(3)
    c.h(0).h(2).measure(0)
    with pytest.raises(ValueError, match="X condition: wire 1 does not hold a measurement outcome"):
        c.x(2, condition=1)
    with pytest.raises(ValueError, match="wire 0 must read 0 or 1, got 2"):
        c.x(2, condition={0: 2})
    with pytest.raises(ValueError, match="wire 0 is read as a measurement and acted on by the gate"):
        c.x(0, condition=0)
    with pytest.raises(ValueError, match="no wire given"):
        c.x(2, condition=[])
    with pytest.raises(ValueError, match="wire 5"):
        c.x(2, condition=5)
    touched = mixed.MixedCircuit(2)
    touched.h(0).measure(0).rx(0, 0.1)
    with pytest.raises(ValueError, match="wire 0 does not hold a measurement outcome"):
        touched.x(1, condition=0)
    for after in (lambda m: m.reset(0), lambda m: m.channel(mixed.bit_flip(0.1), 0)):
        m = mixed.MixedCircuit(2)
        m.h(0).measure(0)
        after(m)
        with pytest.raises(ValueError, match="wire 0 does not hold a measurement outcome"):
            m.x(1, condition=0)
    with pytest.raises(ValueError, match="X: condition= reads mid-circuit measurement outcomes.*MixedCircuit"):
        tql.Circuit(2).x(1, condition=0)


TELEPORT_QASM = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[3];
creg m0[1];
creg m1[1];
u3({t},{p},{l}) q[0];
h q[1];
cx q[1],q[2];
cx q[0],q[1];
h q[0];
measure q[0] -> m0[0];
measure q[1] -> m1[0];
if(m1==1) x q[2];
if(m0==1) z q[2];
"""


def test_qasm_if_reads_measured_bits():
    angles = ANGLES[1]
    c = tql.MixedCircuit.from_qasm(TELEPORT_QASM.format(t=angles[0], p=angles[1], l=angles[2]),
                                   dtype=torch.complex128)
    psi = O.u3(*angles)[:, 0]
    np.testing.assert_allclose(mixed.expval(c, ["X2", "Y2", "Z2"])[0].numpy(), _bloch(psi), atol=1e-12)
    # a two-bit register compared with 2 = binary 10: c[1] (q1) reads 1 and c[0] (q0) reads 0
    two = tql.MixedCircuit.from_qasm("""OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; creg c[2];
        h q[0]; h q[1]; measure q[0] -> c[0]; measure q[1] -> c[1]; if(c==2) x q[2];""", dtype=torch.complex128)
    z0z2, z1z2 = mixed.expval(two, ["Z0 Z2", "Z1 Z2"])[0].tolist()
    assert z0z2 == pytest.approx(-0.5, abs=1e-12) and z1z2 == pytest.approx(0.5, abs=1e-12)   # as {0: 0, 1: 1}
    # a bit never measured reads 0: 'if(c==2)' with c[1] unmeasured never holds, 'if(c==1)' reads q0 alone
    never = tql.MixedCircuit.from_qasm("""OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; creg c[2];
        h q[0]; measure q[0] -> c[0]; if(c==2) x q[1];""")
    assert [op.gate.name for op in never.ops] == ["H"]
    once = tql.MixedCircuit.from_qasm("""OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; creg c[2];
        h q[0]; measure q[0] -> c[0]; if(c==1) x q[1];""", dtype=torch.complex128)
    assert mixed.expval(once, "Z0 Z1")[0].item() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("body, line, message", [
    ("h q[0]; measure q[0] -> c[0]; h q[0]; if(c==1) x q[1];", 2, "holds the measurement of q\\[0\\], which was acted"),
    ("measure q[0] -> c[0]; if(c==4) x q[1];", 2, "has 2 bit\\(s\\) and can never equal 4"),
    ("measure q[0] -> c[0]; if(c==1) measure q[1] -> c[1];", 2, "only a gate call may be conditioned"),
    ("measure q[0] -> c[0]; if(c==1) x q[0];", 2, "acts on q\\[0\\], whose measurement outcome it reads"),
    ("if(q==1) x q[0];", 2, "'q' is a qreg, expected a creg"),
])
def test_qasm_if_errors_name_the_line(body, line, message):
    src = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; creg c[2];\n' + body
    with pytest.raises(ValueError, match=f"line {line}, column [0-9]+: .*{message}"):
        tql.MixedCircuit.from_qasm(src)


def _product_state(*qubits):
    psi = np.ones(1, dtype=complex)
    for q in qubits:
        psi = np.kron(psi, np.asarray(q, dtype=complex))
    return psi


def _branch_average(psi, n, measured, fired):
    """NumPy oracle: the density matrix after measuring ``measured`` in |psi> and applying, in
    each branch (outcomes o), the dense steps ``fired(o)`` -> [(matrix, wires), ...]."""
    rho = np.zeros((2 ** n, 2 ** n), dtype=complex)
    bits = np.array([[(i >> (n - 1 - w)) & 1 for w in measured] for i in range(2 ** n)])
    for outcomes in np.ndindex(*(2,) * len(measured)):
        branch = np.where((bits == outcomes).all(axis=1), psi, 0)
        for m, wires in fired(outcomes):
            branch = O.full_operator(m, wires, n) @ branch
        rho += np.outer(branch, branch.conj())
    return rho


def test_to_qasm_writes_if_statements_that_read_back_as_the_same_conditioned_gates():
    c = _teleport(torch.complex128, ANGLES[0])
    text = c.to_qasm()
    lines = text.splitlines()
    assert lines[3:6] == ["creg c0[1];", "creg c1[1];", "creg c2[1];"]
    assert lines[-4:] == ["measure q[0] -> c0[0];", "measure q[1] -> c1[0];", "if(c1==1) x q[2];", "if(c0==1) z q[2];"]
    back = tql.MixedCircuit.from_qasm(text, dtype=torch.complex128)
    assert [(op.gate.name, op.wires) for op in back.ops] == [(op.gate.name, op.wires) for op in c.ops]
    psi = O.u3(*ANGLES[0])[:, 0]
    np.testing.assert_allclose(mixed.expval(back, ["X2", "Y2", "Z2"])[0].numpy(), _bloch(psi), atol=1e-12)
    with pytest.raises(ValueError, match="line 14, column 1: a classically controlled 'if'.*MixedCircuit.from_qasm"):
        tql.Circuit.from_qasm(text)


def test_conditions_on_zero_on_several_wires_and_gates_without_a_controlled_qelib1_form():
    # IF on S, CH and RXX was refused before ('no OpenQASM 2.0 form'): an 'if' writes any gate
    c = mixed.MixedCircuit(4, dtype=torch.complex128)
    c.h(0).ry(1, 0.8).h(3).measure([0, 1])
    c.x(2, condition={0: 0, 1: 1}).s(3, condition={1: 0}).ch(2, 3, condition=0)
    c.rxx(2, 3, 0.7, condition=1).rz(3, 0.3, condition={0: 0})
    text = c.to_qasm()
    for line in ["creg c0_1[2];", "measure q[0] -> c0_1[0];\nmeasure q[1] -> c0_1[1];\nif(c0_1==2) x q[2];",
                 "if(c1==0) s q[3];", "if(c0==1) ch q[2], q[3];", "if(c0==0) rz(0.3) q[3];"]:
        assert line in text, text
    assert "\nx q[" not in text          # outcome 0 is the value compared, not a flip of the qubit
    psi = _product_state(O.H[:, 0], O.ry(0.8)[:, 0], [1, 0], O.H[:, 0])

    def fired(o):
        steps = [(O.X, [2])] if o == (0, 1) else []
        steps += [(np.diag([1, 1j]), [3])] if o[1] == 0 else []
        steps += [(O.controlled_matrix(O.H), [2, 3])] if o[0] == 1 else []
        steps += [(O.pauli_rotation(0.7, "XX"), [2, 3])] if o[1] == 1 else []
        return steps + ([(O.rz(0.3), [3])] if o[0] == 0 else [])

    expected = _branch_average(psi, 4, [0, 1], fired)
    back = tql.MixedCircuit.from_qasm(text, dtype=torch.complex128)
    for circuit in (c, back):
        np.testing.assert_allclose(mixed.run(circuit)[0].numpy(), expected, atol=1e-12)


def test_conditioned_c3x_and_c4x_read_back():
    # qelib1's c3x / c4x read as MULTICONTROLLEDX, which has no conditioned form: under an 'if'
    # they become the fixed-width C^k X (the writer emits them for conditioned multi-controlled X)
    c = mixed.MixedCircuit(6, dtype=torch.complex128)
    c.h(0).h(1).h(2).h(3).ry(4, 0.3).ry(5, 1.1).measure(0)
    c.add(tql.controlled(tql.gates.X, 3), (1, 2, 3, 4), condition={0: 1})
    c.add(tql.controlled(tql.gates.X, 4), (1, 2, 3, 4, 5), condition={0: 0})
    text = c.to_qasm()
    assert "if(c0==1) c3x q[1], q[2], q[3], q[4];" in text and "if(c0==0) c4x q[1], q[2], q[3], q[4], q[5];" in text
    psi = _product_state(O.H[:, 0], O.H[:, 0], O.H[:, 0], O.H[:, 0], O.ry(0.3)[:, 0], O.ry(1.1)[:, 0])

    def fired(o):
        if o[0] == 1:
            return [(O.controlled_matrix(O.X, 3), [1, 2, 3, 4])]
        return [(O.controlled_matrix(O.X, 4), [1, 2, 3, 4, 5])]

    expected = _branch_average(psi, 6, [0], fired)
    back = tql.MixedCircuit.from_qasm(text, dtype=torch.complex128)
    for circuit in (c, back):
        np.testing.assert_allclose(mixed.run(circuit)[0].numpy(), expected, atol=1e-12)


def test_a_noise_model_acts_alike_on_the_read_back_circuit():
    # written as 'x q0; cx q0, q1; x q0' (before), the read-back circuit had two X gates on the
    # measured wire for a bit flip on 'x' gates to hit: <Z0> = (1 - 2p)² cos θ instead of cos θ
    p, theta = 0.15, 1.0
    model = tql.NoiseModel().add(mixed.bit_flip(p), gates="x")
    c = mixed.MixedCircuit(2, dtype=torch.complex128)
    c.ry(0, theta).measure(0).x(1, condition={0: 0})
    back = tql.MixedCircuit.from_qasm(c.to_qasm(), dtype=torch.complex128)
    assert [op.gate.name for op in back.ops] == ["RY", "IF1:X"]
    c.noise_model = back.noise_model = model
    for circuit in (c, back):
        z0, z1, zz = mixed.expval(circuit, ["Z0", "Z1", "Z0 Z1"])[0].tolist()
        # the flip hits q1 after the slot in either branch: q1 = NOT q0 with probability 1 - p
        assert z0 == pytest.approx(math.cos(theta), abs=1e-12)
        assert z1 == pytest.approx(-(1 - 2 * p) * math.cos(theta), abs=1e-12)
        assert zz == pytest.approx(-(1 - 2 * p), abs=1e-12)


def test_folded_conditioned_gates_are_written_with_their_adjoints():
    folded = mixed.fold_gates(_teleport(torch.complex128, ANGLES[2]), 3, "left")
    text = folded.to_qasm()
    assert text.count("if(c1==1) x q[2];") == 3
    back = tql.MixedCircuit.from_qasm(text, dtype=torch.complex128)
    psi = O.u3(*ANGLES[2])[:, 0]
    np.testing.assert_allclose(mixed.expval(back, ["X2", "Y2", "Z2"])[0].numpy(), _bloch(psi), atol=1e-12)


def test_a_classically_controlled_gate_on_an_unmeasured_wire_is_written_as_what_it_does():
    # outside a measurement it is the controlled gate the simulator applies: the Bell pair
    c = tql.Circuit(2, dtype=torch.complex128).h(0)
    c.add(tql.gates.classically_controlled(tql.gates.X, 1), (0, 1))
    assert c.to_qasm().endswith("h q[0];\ncx q[0], q[1];\n")
    bell = np.array([1, 0, 0, 1]) / np.sqrt(2)
    np.testing.assert_allclose(tql.Circuit.from_qasm(c.to_qasm(), dtype=torch.complex128)()[0].numpy(), bell,
                               atol=1e-12)


QASM_HEAD = 'OPENQASM 2.0; include "qelib1.inc"; qreg q[2]; creg c[1]; creg d[1];\n'


def test_a_bit_whose_qubit_was_acted_on_and_measured_again_is_refused():
    # c holds 1, the qubit then holds d's 0: 'if(c==1)' read the qubit's 0 and silently did nothing
    with pytest.raises(ValueError, match=r"line 3, column 4: if: c\[0\] holds the measurement of q\[0\], which was "
                                         r"acted on since"):
        tql.MixedCircuit.from_qasm(QASM_HEAD + "x q[0]; measure q[0] -> c[0]; x q[0]; measure q[0] -> d[0];\n"
                                   "if(c==1) x q[1];")
    # the bit the qubit now holds is read; measuring again an untouched qubit repeats its outcome
    for body in ("x q[0]; measure q[0] -> c[0]; x q[0]; measure q[0] -> d[0]; if(d==0) x q[1];",
                 "x q[0]; measure q[0] -> c[0]; measure q[0] -> d[0]; if(c==1) x q[1];"):
        m = tql.MixedCircuit.from_qasm(QASM_HEAD + body, dtype=torch.complex128)
        assert mixed.expval(m, "Z1")[0].item() == pytest.approx(-1.0, abs=1e-12)


def test_qasm_if_conditions_every_gate_of_a_definition():
    m = tql.MixedCircuit.from_qasm("""OPENQASM 2.0; include "qelib1.inc"; qreg q[3]; creg c[1];
        gate bell a, b { h a; cx a, b; }
        h q[0]; measure q[0] -> c[0]; if(c==1) bell q[1], q[2];""", dtype=torch.complex128)
    assert [op.gate.name for op in m.ops] == ["H", "IF1:H", "IF1:CNOT"]
    psi = _product_state(O.H[:, 0], [1, 0], [1, 0])
    expected = _branch_average(psi, 3, [0], lambda o: [(O.H, [1]), (O.controlled_matrix(O.X), [1, 2])] * o[0])
    np.testing.assert_allclose(mixed.run(m)[0].numpy(), expected, atol=1e-12)
