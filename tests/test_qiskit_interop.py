"""Qiskit interoperability (torchquantum_layers/qiskit_interop.py: ``Circuit.from_qiskit``,
``circuit.to_qiskit()``, SparsePauliOp ↔ Hamiltonian).

The oracle is Qiskit itself, independent of the code under test: ``Operator(qc)`` and
``Statevector(qc)`` (global phase included), with the wire order converted here by reversing the
bits of every basis index in NumPy. Comparisons are entry by entry in both dtypes: Qiskit defines
the global phase of every gate and circuit, so none is divided out.
"""
import math
import subprocess
import zlib
import sys

import numpy as np
import pytest
import torch

qiskit = pytest.importorskip("qiskit", reason="the qiskit extra (in .[test])")

from qiskit import QuantumCircuit  # noqa: E402
from qiskit.circuit import AnnotatedOperation, Gate, Parameter, ParameterVector  # noqa: E402
from qiskit.circuit.annotated_operation import ControlModifier, InverseModifier, PowerModifier  # noqa: E402
from qiskit.circuit import library as lib  # noqa: E402
from qiskit.circuit.random import random_circuit  # noqa: E402
from qiskit.quantum_info import Operator, SparsePauliOp, Statevector  # noqa: E402

import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import qiskit_interop  # noqa: E402

from .conftest import DTYPES, REAL  # noqa: E402

# unitaries: products of up to ~60 gates on 16-dim matrices
TOL = {torch.complex64: 2e-5, torch.complex128: 1e-12}


# =============================================================================================
# the oracle: Qiskit's matrices and states in tql's wire order (wire 0 = most significant bit)
def _reverse_bits(i: int, n: int) -> int:
    return int(format(i, f"0{n}b")[::-1], 2) if n else 0


def qiskit_unitary(qc) -> np.ndarray:
    u = Operator(qc).data
    n = qc.num_qubits
    perm = [_reverse_bits(i, n) for i in range(2 ** n)]
    return u[np.ix_(perm, perm)]


def qiskit_state(qc) -> np.ndarray:
    v = Statevector(qc).data
    n = qc.num_qubits
    return v[[_reverse_bits(i, n) for i in range(2 ** n)]]


def assert_close(got, want, dtype):
    got = got.detach().cpu().numpy() if isinstance(got, torch.Tensor) else got
    err = np.abs(got - want).max()
    assert err <= TOL[dtype], f"max |tql - qiskit| = {err:.3g} > {TOL[dtype]:g}"


# =============================================================================================
# the wire-order convention
def test_qubit_i_is_wire_i_and_states_follow_from_qiskit_order():
    qc = QuantumCircuit(3)
    qc.x(0)                                  # Qiskit: |001> = index 1 (qubit 0 least significant)
    qc.h(2)
    c = tql.Circuit.from_qiskit(qc, dtype=torch.complex128)
    psi = c()[0]
    s = 2 ** -0.5                            # tql: wire 0 is the most significant bit: |100>, |101>
    want = torch.zeros(8, dtype=torch.complex128)
    want[0b100] = want[0b101] = s
    assert torch.allclose(psi, want, atol=1e-15)
    sv = torch.as_tensor(Statevector(qc).data).reshape(1, -1)
    assert torch.allclose(c(), tql.from_qiskit_order(sv), atol=1e-15)


# =============================================================================================
# every supported gate against Operator(qc)
def _rng_angles(rng, k):
    return [float(a) for a in rng.uniform(-2 * math.pi, 2 * math.pi, size=k)]


def _unitary(n, seed):
    z = np.random.default_rng(seed).normal(size=(2 ** n, 2 ** n)) + 1j * np.random.default_rng(seed + 1).normal(
        size=(2 ** n, 2 ** n))
    q, r = np.linalg.qr(z)
    return q * (np.diag(r) / np.abs(np.diag(r)))


# (id, builder: angles -> a Qiskit instruction, number of angles)
GATES = [(name, (lambda cls: lambda *a: cls(*a))(getattr(lib, cls_name)), k) for name, cls_name, k in [
    ("x", "XGate", 0), ("y", "YGate", 0), ("z", "ZGate", 0), ("h", "HGate", 0), ("s", "SGate", 0),
    ("sdg", "SdgGate", 0), ("t", "TGate", 0), ("tdg", "TdgGate", 0), ("sx", "SXGate", 0),
    ("sxdg", "SXdgGate", 0), ("id", "IGate", 0), ("p", "PhaseGate", 1), ("rx", "RXGate", 1),
    ("ry", "RYGate", 1), ("rz", "RZGate", 1), ("u", "UGate", 3), ("u1", "U1Gate", 1), ("u2", "U2Gate", 2),
    ("u3", "U3Gate", 3), ("cx", "CXGate", 0), ("cy", "CYGate", 0), ("cz", "CZGate", 0), ("ch", "CHGate", 0),
    ("swap", "SwapGate", 0), ("iswap", "iSwapGate", 0), ("cp", "CPhaseGate", 1), ("crx", "CRXGate", 1),
    ("cry", "CRYGate", 1), ("crz", "CRZGate", 1), ("cu", "CUGate", 4), ("cu1", "CU1Gate", 1),
    ("cu3", "CU3Gate", 3), ("rxx", "RXXGate", 1), ("ryy", "RYYGate", 1), ("rzz", "RZZGate", 1),
    ("rzx", "RZXGate", 1), ("ccx", "CCXGate", 0), ("ccz", "CCZGate", 0), ("cswap", "CSwapGate", 0),
    # through their Qiskit definitions or as controlled gates
    ("r", "RGate", 2), ("dcx", "DCXGate", 0), ("ecr", "ECRGate", 0), ("cs", "CSGate", 0),
    ("csdg", "CSdgGate", 0), ("csx", "CSXGate", 0), ("c3sx", "C3SXGate", 0), ("rccx", "RCCXGate", 0),
    ("rcccx", "RC3XGate", 0), ("xx_plus_yy", "XXPlusYYGate", 2), ("xx_minus_yy", "XXMinusYYGate", 2),
]] + [
    ("mcx3", lambda: lib.MCXGate(3), 0),
    ("mcx4_open", lambda: lib.MCXGate(4, ctrl_state="0110"), 0),
    ("mcphase", lambda a: lib.MCPhaseGate(a, 2), 1),
    ("cx_open", lambda: lib.CXGate(ctrl_state=0), 0),
    ("cu_open", lambda *a: lib.CUGate(*a, ctrl_state=0), 4),
    ("ry_c2_open", lambda a: lib.RYGate(a).control(2, ctrl_state=1, annotated=False), 1),
    ("h_c2_open", lambda: lib.HGate().control(2, ctrl_state=2, annotated=False), 0),
    ("u_c1", lambda *a: lib.UGate(*a).control(1, annotated=False), 3),
    # AnnotatedOperation: Qiskit 3's default for gate.control(); modifiers apply first to last
    ("ry_c2_open_annotated", lambda a: lib.RYGate(a).control(2, ctrl_state=1, annotated=True), 1),
    ("iswap_annotated", lambda: AnnotatedOperation(lib.iSwapGate(), [
        ControlModifier(1, ctrl_state=0), InverseModifier(), PowerModifier(3), ControlModifier(1)]), 0),
    ("u_annotated", lambda *a: AnnotatedOperation(lib.UGate(*a), [PowerModifier(-2), ControlModifier(2, 2)]), 3),
    ("fractional_power", lambda: AnnotatedOperation(lib.SXGate(), [PowerModifier(0.5)]), 0),
    ("unitary1", lambda: lib.UnitaryGate(_unitary(1, 3)), 0),
    ("unitary3", lambda: lib.UnitaryGate(_unitary(3, 5)), 0),
    ("unitary2_c1_open", lambda: lib.UnitaryGate(_unitary(2, 7)).control(1, ctrl_state=0, annotated=False), 0),
    ("unitary2_inverse_annotated", lambda: AnnotatedOperation(lib.UnitaryGate(_unitary(2, 9)), [InverseModifier()]), 0),
    ("global_phase", lambda a: lib.GlobalPhaseGate(a), 1),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("name,make,k", GATES, ids=[g[0] for g in GATES])
def test_gate_matches_qiskit_operator(name, make, k, dtype):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    gate = make(*_rng_angles(rng, k))
    n = gate.num_qubits + 1
    qubits = [int(q) for q in rng.permutation(n)[:gate.num_qubits]]   # scattered, in any order
    qc = QuantumCircuit(n, global_phase=0.3)
    qc.h(range(n))                                                     # no accidental symmetry
    qc.append(gate, qubits)
    c = tql.Circuit.from_qiskit(qc, dtype=dtype)
    assert c.dtype == dtype
    assert_close(c.unitary(), qiskit_unitary(qc), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("seed", range(12))
def test_random_circuits_match_statevector(seed, dtype):
    n = 2 + seed % 4                                                    # 2..5 qubits
    qc = random_circuit(n, 6, max_operands=4, seed=seed)
    c = tql.Circuit.from_qiskit(qc, dtype=dtype)
    assert_close(c()[0], qiskit_state(qc), dtype)


def test_definitions_without_a_gate_and_transpiled_operations():
    from qiskit.quantum_info import random_clifford
    inner = QuantumCircuit(2, global_phase=0.7, name="mine")
    inner.ry(0.4, 0)
    inner.cx(0, 1)
    inner.rz(-1.1, 1)
    qc = QuantumCircuit(3)
    qc.h(1)
    qc.append(inner.to_gate(), [2, 0])
    # under control, the definition's global phase becomes a phase on the control
    qc.append(inner.to_gate().control(1, ctrl_state=0, annotated=False), [1, 2, 0])
    qc.append(random_clifford(2, seed=1), [0, 2])                     # no definition: transpiled
    qc.append(lib.QFTGate(3) if hasattr(lib, "QFTGate") else lib.QFT(3).to_gate(), [2, 0, 1])   # QFTGate: 1.2+
    c = tql.Circuit.from_qiskit(qc, dtype=torch.complex128)
    assert_close(c.unitary(), qiskit_unitary(qc), torch.complex128)


def test_barrier_delay_box_and_initial_reset_are_read():
    qc = QuantumCircuit(2)
    qc.reset(1)                              # still |0>: exact
    qc.h(0)
    qc.barrier()
    qc.delay(100, 0)
    if hasattr(qc, "box"):                   # Qiskit 2.0+
        with qc.box():
            qc.cx(0, 1)
    else:
        qc.cx(0, 1)
    c = tql.Circuit.from_qiskit(qc, dtype=torch.complex128)
    assert c.count_ops() == {"H": 1, "CNOT": 1}
    ref = QuantumCircuit(2)
    ref.h(0)
    ref.cx(0, 1)
    assert_close(c()[0], qiskit_state(ref), torch.complex128)


def test_final_measurements_are_dropped_only_when_asked():
    qc = random_circuit(3, 4, seed=3)
    qc.measure_all()
    c = tql.Circuit.from_qiskit(qc, drop_final_measurements=True, dtype=torch.complex128)
    assert_close(c()[0], qiskit_state(qc.remove_final_measurements(inplace=False)), torch.complex128)


# =============================================================================================
# parameters: inputs, trainable weights, affine angles
def _bound_state(qc, values: dict):
    return qiskit_state(qc.assign_parameters(values))


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
def test_affine_angles_of_inputs_and_weights(dtype):
    a, b = Parameter("a"), Parameter("b")
    x = ParameterVector("x", 2)
    qc = QuantumCircuit(3, global_phase=0.5 * a - 0.2)
    qc.h([0, 1, 2])
    qc.rx(2 * a + 0.5, 0)                    # weight with scale and offset
    qc.u(x[0] - 3 * b, 0.25 * x[1], 1.5, 1)  # U with affine angles: expanded exactly
    qc.cp(x[0] + x[1] - a, 1, 2)             # several parameters in one angle
    qc.crz(-x[1], 2, 0)
    qc.append(lib.GlobalPhaseGate(b / 3), [])
    c = tql.Circuit.from_qiskit(qc, inputs=x, trainable=[a, b], initial_weights=[0.3, -1.2], dtype=dtype)
    assert c.num_parameters == 2 and c.n_inputs == 2
    feats = torch.tensor([[0.1, -0.7], [1.3, 2.2], [-0.4, 0.0]], dtype=REAL[dtype])
    out = c(feats)
    for row, f in zip(out, feats.tolist()):
        want = _bound_state(qc, {a: 0.3, b: -1.2, x[0]: f[0], x[1]: f[1]})
        assert_close(row, want, dtype)


def test_trainable_defaults_to_every_other_parameter_in_qiskit_order():
    th = ParameterVector("θ", 3)
    x = Parameter("x")
    qc = QuantumCircuit(2)
    qc.ry(th[2], 0)
    qc.ry(th[0], 1)
    qc.rz(x, 0)
    qc.rx(th[1], 1)
    c = tql.Circuit.from_qiskit(qc, inputs=[x], initial_weights=[0.1, 0.2, 0.3], dtype=torch.complex128)
    assert c.num_parameters == 3
    want = _bound_state(qc, {th[0]: 0.1, th[1]: 0.2, th[2]: 0.3, x: 0.9})
    assert_close(c(torch.tensor([[0.9]], dtype=torch.float64))[0], want, torch.complex128)


def test_bound_parameters_become_fixed_angles():
    th = Parameter("θ")
    qc = QuantumCircuit(1)
    qc.rx(th, 0)
    c = tql.Circuit.from_qiskit(qc.assign_parameters({th: 0.75}), dtype=torch.complex128)
    assert c.num_parameters == 0 and c.ops[0].angles == (0.75,)


def _library(function: str, blueprint: str, *args, **kwargs):
    """Qiskit 1.3+'s circuit-building function, else the older BlueprintCircuit class."""
    make = getattr(lib, function, None) or getattr(lib, blueprint)
    return make(*args, **kwargs)


def _feature_map_and_ansatz(f):
    # ZZFeatureMap's pairs read (π − x_i)(π − x_j), a product of inputs: this affine data map keeps its layout
    fmap = _library("zz_feature_map", "ZZFeatureMap", f, reps=1,
                    data_map_func=lambda v: v[0] if len(v) == 1 else 0.5 * (v[0] - v[1]))
    ansatz = _library("real_amplitudes", "RealAmplitudes", f, reps=1).compose(
        _library("efficient_su2", "EfficientSU2", f, reps=1, parameter_prefix="φ"))
    return fmap, ansatz, fmap.compose(ansatz)


def test_torchconnector_style_circuit_batched_forward():
    fmap, ansatz, qc = _feature_map_and_ansatz(3)
    rng = np.random.default_rng(0)
    w0 = rng.uniform(-1, 1, ansatz.num_parameters)
    c = tql.Circuit.from_qiskit(qc, inputs=fmap.parameters, trainable=ansatz.parameters, initial_weights=w0,
                                dtype=torch.complex128)
    x = torch.as_tensor(rng.uniform(-1, 1, (6, 3)))
    out = c(x)
    assert out.shape == (6, 8)
    for row, f in zip(out, x.numpy()):
        values = dict(zip(fmap.parameters, f)) | dict(zip(ansatz.parameters, w0))
        assert_close(row, _bound_state(qc, values), torch.complex128)


def test_torchconnector_style_gradient_matches_finite_differences_of_qiskit():
    fmap, ansatz, qc = _feature_map_and_ansatz(3)
    rng = np.random.default_rng(1)
    w0 = rng.uniform(-1, 1, ansatz.num_parameters)
    f0 = rng.uniform(-1, 1, 3)
    c = tql.Circuit.from_qiskit(qc, inputs=fmap.parameters, trainable=ansatz.parameters, initial_weights=w0,
                                dtype=torch.complex128)
    H = tql.Hamiltonian([(0.7, "Z0 Z1"), (-0.4, "X2"), (0.3, "Y0 Z2")])
    energy = tql.expval(c, H, x=torch.as_tensor(f0).reshape(1, 3)).sum()
    energy.backward()
    op = SparsePauliOp.from_sparse_list([("ZZ", [0, 1], 0.7), ("X", [2], -0.4), ("YZ", [0, 2], 0.3)], 3)

    def qiskit_energy(w):
        values = dict(zip(fmap.parameters, f0)) | dict(zip(ansatz.parameters, w))
        return Statevector(qc.assign_parameters(values)).expectation_value(op).real

    assert abs(energy.item() - qiskit_energy(w0)) < 1e-12
    h = 1e-5
    fd = np.array([(qiskit_energy(w0 + h * e) - qiskit_energy(w0 - h * e)) / (2 * h)
                   for e in np.eye(len(w0))])
    assert np.abs(c.weights.grad.numpy() - fd).max() < 1e-8


# =============================================================================================
# to_qiskit and the round trip
def _tql_circuit():
    c = tql.Circuit(4).double()
    c.h(0).ry(1, input=0, scale=0.5).rx(2, trainable=True).u3(3, trainable=True)
    c.crz(0, 2, input=1).rot(1, trainable=True).crot(3, 0, 0.3, -0.2, 1.1).cu3(1, 3, trainable=True)
    c.single_excitation(0, 2, trainable=True).double_excitation(3, 1, 0, 2, trainable=True)
    c.multi_rz([0, 1, 3], input=2).iswap(2, 1).rzx(3, 0, trainable=True).u2(2, 0.4, -0.9)
    c.qubit_unitary([2, 0], torch.as_tensor(_unitary(2, 11))).diagonal_unitary([3], torch.tensor([1j, -1]))
    c.add(tql.controlled(tql.gates.RX, 2), [0, 3, 1], trainable=True)
    c.add(tql.controlled(tql.gates.SINGLE_EXCITATION, 1), [2, 0, 1], 0.8)
    c.toffoli(0, 1, 3).multi_controlled_x([3, 2, 0, 1]).sx(2).sxdg(0).cswap(1, 0, 2).ccz(0, 2, 3)
    c.cy(1, 0).ch(2, 3).cp(3, 1, trainable=True).rxx(0, 1, 0.3).ryy(1, 2, trainable=True).rzz(2, 3, -0.7)
    c.append(tql.Circuit(4).rx(0, 0.2).crot(1, 2, 0.1, 0.2, 0.3).s(3).inverse())   # adjoint ops
    with torch.no_grad():
        c.weights.copy_(torch.linspace(-2.5, 2.9, c.num_parameters, dtype=torch.float64))
    return c


def _bind(qc, w, x, weights, features):
    return qc.assign_parameters(dict(zip(w, weights)) | dict(zip(x, features)))


def test_to_qiskit_matches_the_circuits_unitary():
    c = _tql_circuit()
    qc, w, x = c.to_qiskit(return_parameters=True)
    assert len(w) == c.num_parameters and len(x) == c.n_inputs == 3
    feats = [0.3, -1.1, 0.6]
    want = qiskit_unitary(_bind(qc, w, x, c.weights.tolist(), feats))
    assert_close(c.unitary(torch.tensor(feats, dtype=torch.float64)), want, torch.complex128)


def test_to_qiskit_of_an_inverse_circuit():
    c = _tql_circuit()
    inv = c.inverse()
    qc, w, x = qiskit_interop.to_qiskit(inv, return_parameters=True)
    feats = [0.2, 0.5, -0.8]
    want = qiskit_unitary(_bind(qc, w, x, c.weights.tolist(), feats))
    assert_close(inv.unitary(torch.tensor(feats, dtype=torch.float64)), want, torch.complex128)


def test_round_trip_keeps_unitary_and_parameter_roles():
    c = _tql_circuit()
    qc, w, x = c.to_qiskit(return_parameters=True)
    back = tql.Circuit.from_qiskit(qc, inputs=x, trainable=w, initial_weights=c.weights, dtype=torch.complex128)
    assert back.num_parameters == c.num_parameters and back.n_inputs == c.n_inputs
    feats = torch.tensor([[0.3, -1.1, 0.6], [1.0, 0.2, -0.5]], dtype=torch.float64)
    assert torch.allclose(back.unitary(feats), c.unitary(feats), atol=1e-12)
    new = torch.randn(c.num_parameters, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():                    # the same weight drives the same angles in both
        back.weights.copy_(new)
        c.weights.copy_(new)
    assert torch.allclose(back.unitary(feats), c.unitary(feats), atol=1e-12)


def test_to_qiskit_refuses_a_mixed_circuit():
    m = tql.MixedCircuit(1)
    m.h(0).measure([0])
    with pytest.raises(TypeError, match="MixedCircuit|measurements"):
        m.to_qiskit()


# =============================================================================================
# SparsePauliOp <-> Hamiltonian
def test_sparse_pauli_op_round_trip_and_expectations():
    op = SparsePauliOp(["XIZ", "YYI", "IIX", "ZZZ", "III"], coeffs=[0.5, -1.25, 0.3 + 0j, 2.0, -0.7])
    H = qiskit_interop.hamiltonian_from_sparse_pauli_op(op)
    assert H.n_wires == 3
    assert tql.Hamiltonian([(0.5, "X2 Z0")]) == qiskit_interop.hamiltonian_from_sparse_pauli_op(
        SparsePauliOp("XIZ", 0.5))                                         # labels read right to left
    rng = np.random.default_rng(4)
    v = rng.normal(size=8) + 1j * rng.normal(size=8)
    v /= np.linalg.norm(v)
    want = Statevector(v).expectation_value(op).real
    psi = tql.from_qiskit_order(torch.as_tensor(v).reshape(1, -1))
    assert abs(tql.expectation(psi, H).item() - want) < 1e-12
    back = qiskit_interop.to_sparse_pauli_op(H)
    assert back.simplify().equiv(op.simplify())
    assert qiskit_interop.to_sparse_pauli_op(tql.PauliString("Y1"), n_wires=3) == SparsePauliOp("IYI")


# =============================================================================================
# refusals: each names what is at fault
def test_unknown_parameter_is_refused():
    a, b = Parameter("a"), Parameter("bee")
    qc = QuantumCircuit(1)
    qc.rx(a, 0)
    qc.ry(b, 0)
    with pytest.raises(ValueError, match="'bee'"):
        tql.Circuit.from_qiskit(qc, trainable=[a])


def test_non_affine_angle_is_refused():
    a = Parameter("alpha")
    qc = QuantumCircuit(1)
    qc.rx(a.sin(), 0)
    with pytest.raises(ValueError, match=r"rx.*sin\(alpha\).*'alpha'"):
        tql.Circuit.from_qiskit(qc)


def test_product_of_parameters_is_refused():
    fmap = _library("zz_feature_map", "ZZFeatureMap", 2, reps=1)          # (π − x0)(π − x1)
    with pytest.raises(ValueError, match=r"not affine.*'x\[0\]'"):
        tql.Circuit.from_qiskit(fmap, inputs=fmap.parameters)


def test_measurement_is_refused():
    qc = QuantumCircuit(2, 2)
    qc.h(0)
    qc.measure(0, 0)
    with pytest.raises(ValueError, match="'measure' on qubit"):
        tql.Circuit.from_qiskit(qc)


def test_gate_after_a_dropped_measurement_is_refused():
    qc = QuantumCircuit(2, 1)
    qc.measure(1, 0)
    qc.cx(0, 1)
    with pytest.raises(ValueError, match="'cx'.*follows the 'measure'"):
        tql.Circuit.from_qiskit(qc, drop_final_measurements=True)


def test_mid_circuit_reset_is_refused():
    qc = QuantumCircuit(2)
    qc.h(0)
    qc.reset(0)
    with pytest.raises(ValueError, match="'reset' on qubit"):
        tql.Circuit.from_qiskit(qc)


def test_classical_condition_is_refused():
    qc = QuantumCircuit(1, 1)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(0)
    with pytest.raises(ValueError, match="'if_else'"):
        tql.Circuit.from_qiskit(qc, drop_final_measurements=True)


def test_gate_without_definition_is_refused():
    qc = QuantumCircuit(1)
    qc.append(Gate("mystery", 1, []), [0])
    with pytest.raises(ValueError, match="'mystery'"):
        tql.Circuit.from_qiskit(qc)


def test_wrong_inputs_type_is_refused():
    qc = QuantumCircuit(1)
    qc.rx(Parameter("x"), 0)
    with pytest.raises(TypeError, match="inputs=.*str"):
        tql.Circuit.from_qiskit(qc, inputs="x")


def test_inputs_holding_numbers_are_refused():
    qc = QuantumCircuit(1)
    qc.rx(Parameter("x"), 0)
    with pytest.raises(TypeError, match="inputs=.*float 0.5"):
        tql.Circuit.from_qiskit(qc, inputs=[0.5])


def test_parameter_in_inputs_and_trainable_is_refused():
    x = Parameter("x")
    qc = QuantumCircuit(1)
    qc.rx(x, 0)
    with pytest.raises(ValueError, match="'x' is listed in both"):
        tql.Circuit.from_qiskit(qc, inputs=[x], trainable=[x])


def test_other_parameter_object_with_the_circuits_name_is_refused():
    qc = QuantumCircuit(1)
    qc.rx(Parameter("x"), 0)
    with pytest.raises(ValueError, match="'x' is not the circuit's parameter"):
        tql.Circuit.from_qiskit(qc, inputs=[Parameter("x")])


def test_initial_weights_of_the_wrong_length_are_refused():
    th = ParameterVector("t", 2)
    qc = QuantumCircuit(1)
    qc.rx(th[0], 0)
    qc.ry(th[1], 0)
    with pytest.raises(ValueError, match="initial_weights has 3"):
        tql.Circuit.from_qiskit(qc, initial_weights=[0.1, 0.2, 0.3])


def test_not_a_quantum_circuit_is_refused():
    with pytest.raises(TypeError, match="QuantumCircuit.*str"):
        tql.Circuit.from_qiskit("OPENQASM 2.0;")


def test_missing_qiskit_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "qiskit", None)
    with pytest.raises(ModuleNotFoundError, match=r"torchquantum-layers\[qiskit\]"):
        tql.Circuit.from_qiskit(QuantumCircuit(1))


def test_importing_the_package_does_not_import_qiskit():
    code = "import sys, torchquantum_layers as tql; tql.qiskit_interop; assert 'qiskit' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
