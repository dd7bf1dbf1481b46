"""Qiskit dynamic circuits in (torchquantum_layers/qiskit_dynamic.py: ``MixedCircuit.from_qiskit``).

The oracle is written here in NumPy, independent of the code under test: the Qiskit circuit's
classical-quantum state as one unnormalised density matrix per value of the classical register,
{clbits: ρ_c}, in Qiskit's order (qubit 0 = least significant bit). Gates act as ``U ρ U†`` with
U = ``Operator`` of the instruction placed on its qubits; a measurement splits every branch with
the projectors of its qubit and writes the clbit; a reset applies |0⟩⟨0| and |0⟩⟨1|; an if/else
runs, per branch, the body its classical value selects. tql's final density matrix (qubits, then
any extra clbit wires) is projected on each classical value through the wires ``return_clbits``
names, its extra wires traced out and its bits reversed, and compared with ρ_c entry by entry.
"""
import math

import numpy as np
import pytest
import torch

qiskit = pytest.importorskip("qiskit", reason="the qiskit extra (in .[test])")

from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister  # noqa: E402
from qiskit.circuit import Parameter  # noqa: E402
from qiskit.circuit.classical import expr, types  # noqa: E402
from qiskit.quantum_info import Operator, SparsePauliOp  # noqa: E402

import torchquantum_layers as tql  # noqa: E402

from .conftest import REAL  # noqa: E402

TOL = {torch.complex64: 2e-5, torch.complex128: 1e-11}
GRAD_TOL = {torch.complex64: 2e-3, torch.complex128: 1e-7}


# =============================================================================================
# the oracle
def _condition(cond, key, cmap) -> bool:
    def value(node):
        if isinstance(node, expr.Var):
            bits = [node.var] if isinstance(node.var, qiskit.circuit.Clbit) else list(node.var)
            return sum(key[cmap[b]] << j for j, b in enumerate(bits))
        if isinstance(node, expr.Value):
            return int(node.value)
        if isinstance(node, expr.Cast):
            return value(node.operand)
        if isinstance(node, expr.Unary) and node.op is expr.Unary.Op.LOGIC_NOT:
            return int(not value(node.operand))
        ops = {expr.Binary.Op.LOGIC_AND: lambda a, b: a and b, expr.Binary.Op.LOGIC_OR: lambda a, b: a or b,
               expr.Binary.Op.EQUAL: lambda a, b: a == b, expr.Binary.Op.NOT_EQUAL: lambda a, b: a != b,
               expr.Binary.Op.LESS: lambda a, b: a < b, expr.Binary.Op.BIT_XOR: lambda a, b: a ^ b}
        return int(ops[node.op](value(node.left), value(node.right)))
    if isinstance(cond, tuple):
        target, want = cond
        bits = [target] if isinstance(target, qiskit.circuit.Clbit) else list(target)
        return sum(key[cmap[b]] << j for j, b in enumerate(bits)) == int(want)
    return bool(value(cond))


def _switch_body(op, key, cmap):
    """The block a switch runs for the classical values ``key`` (first case whose values hold the
    target's value, else the default case's)."""
    target = op.target
    if isinstance(target, expr.Expr):
        value = _condition(target, key, cmap) if isinstance(target.type, qiskit.circuit.classical.types.Bool) \
            else None
        if value is None:
            raise AssertionError("integer expression targets are not used in these tests")
    else:
        bits = [target] if isinstance(target, qiskit.circuit.Clbit) else list(target)
        value = sum(key[cmap[b]] << j for j, b in enumerate(bits))
    default = None
    for labels, body in op.cases_specifier():
        if any(v is qiskit.circuit.CASE_DEFAULT for v in labels):
            default = body
        if int(value) in [v for v in labels if v is not qiskit.circuit.CASE_DEFAULT]:
            return body
    if default is None:
        return QuantumCircuit(body.num_qubits, body.num_clbits)      # no case: nothing runs
    return default


def _on_qubit(m, q, n):
    """The 2x2 matrix m on qubit q of n, Qiskit order (qubit q is bit q of the index)."""
    return np.kron(np.kron(np.eye(2 ** (n - 1 - q)), m), np.eye(2 ** q))


def _run(qc, qmap, cmap, branches, n):
    for inst in qc.data:
        op = inst.operation
        qs = [qmap[q] for q in inst.qubits]
        name = op.name
        if name in ("barrier", "delay"):
            continue
        out = {}
        if name == "measure":
            c = cmap[inst.clbits[0]]
            for key, rho in branches.items():
                for bit in (0, 1):
                    p = _on_qubit(np.diag([1.0 - bit, bit]), qs[0], n)
                    new = list(key)
                    new[c] = bit
                    out[tuple(new)] = out.get(tuple(new), 0) + p @ rho @ p
        elif name == "reset":
            k0, k1 = (_on_qubit(m, qs[0], n) for m in (np.array([[1, 0], [0, 0]]), np.array([[0, 1], [0, 0]])))
            out = {key: k0 @ rho @ k0.conj().T + k1 @ rho @ k1.conj().T for key, rho in branches.items()}
        elif name in ("if_else", "switch_case", "for_loop", "box"):
            if name == "for_loop":
                indexset, parameter, body = op.params
                bodies = [body.assign_parameters({parameter: v}) if parameter in body.parameters else body
                          for v in indexset]
            elif name == "box":
                bodies = [op.blocks[0]]
            for key, rho in branches.items():
                one = {key: rho}
                if name == "if_else":
                    chosen = 0 if _condition(op.condition, key, cmap) else 1
                    bodies = op.blocks[chosen:chosen + 1]
                elif name == "switch_case":
                    bodies = [_switch_body(op, key, cmap)]
                for body in bodies:
                    one = _run(body, dict(zip(body.qubits, qs)),
                               dict(zip(body.clbits, [cmap[c] for c in inst.clbits])), one, n)
                for k, r in one.items():
                    out[k] = out.get(k, 0) + r
        else:
            sub = QuantumCircuit(n)
            sub.append(op, qs)
            u = Operator(sub).data
            out = {key: u @ rho @ u.conj().T for key, rho in branches.items()}
        branches = out
    return branches


def oracle(qc, values=None) -> dict:
    """{clbits tuple: unnormalised density matrix of the qubits, Qiskit order}."""
    qc = qc.assign_parameters(values) if values else qc
    n = qc.num_qubits
    rho = np.zeros((2 ** n, 2 ** n), dtype=complex)
    rho[0, 0] = 1.0
    branches = {(0,) * qc.num_clbits: rho}
    return _run(qc, {q: i for i, q in enumerate(qc.qubits)}, {c: i for i, c in enumerate(qc.clbits)}, branches, n)


def _pauli(label: str, qubit: int, n: int) -> np.ndarray:
    return SparsePauliOp.from_sparse_list([(label, [qubit], 1.0)], num_qubits=n).to_matrix()


# =============================================================================================
# tql's state, read back in the oracle's terms
def _branch(rho, clbits, key, n_qubits):
    """tql's ρ (N wires, wire 0 the most significant bit) projected on the clbits reading ``key``,
    extra wires traced out, in Qiskit's order."""
    N = int(round(math.log2(rho.shape[-1])))
    want = {}
    for bit, w in zip(key, clbits):
        if w is None:
            if bit:
                return np.zeros((2 ** n_qubits,) * 2, dtype=complex)
            continue
        if want.setdefault(w, bit) != bit:
            return np.zeros((2 ** n_qubits,) * 2, dtype=complex)
    idx = np.arange(2 ** N)
    mask = np.ones(2 ** N, dtype=bool)
    for w, bit in want.items():
        mask &= ((idx >> (N - 1 - w)) & 1) == bit
    r = rho * np.outer(mask, mask)
    k = N - n_qubits
    r = np.einsum("iaja->ij", r.reshape(2 ** n_qubits, 2 ** k, 2 ** n_qubits, 2 ** k))
    axes = list(range(n_qubits))[::-1]
    r = r.reshape((2,) * 2 * n_qubits).transpose(axes + [n_qubits + a for a in axes])
    return r.reshape(2 ** n_qubits, 2 ** n_qubits)


def assert_same_state(rho, clbits, branches, n_qubits, tol):
    """Every classical value's conditional state, and nothing outside them."""
    rho = rho.detach().cpu().numpy().astype(np.complex128)
    total = 0.0
    for key, want in branches.items():
        got = _branch(rho, clbits, key, n_qubits)
        np.testing.assert_allclose(got, want, atol=tol, err_msg=f"classical value {key}")
        total += np.trace(got).real
    assert abs(total - 1.0) < tol * 10


def _convert(qc, dtype, **kwargs):
    return tql.MixedCircuit.from_qiskit(qc, dtype=dtype, return_clbits=True, **kwargs)


# =============================================================================================
# circuits
def teleportation():
    q, c = QuantumRegister(3, "q"), ClassicalRegister(2, "c")
    qc = QuantumCircuit(q, c)
    qc.u(0.7, 1.2, -0.4, 0)
    qc.h(1)
    qc.cx(1, 2)
    qc.cx(0, 1)
    qc.h(0)
    qc.measure(0, 0)
    qc.measure(1, 1)
    with qc.if_test((c[1], 1)):
        qc.x(2)
    with qc.if_test((c[0], 1)):
        qc.z(2)
    return qc


def test_teleportation_with_feed_forward(dtype):
    qc = teleportation()
    c, clbits = _convert(qc, dtype)
    assert c.n_wires == 3 and clbits == (0, 1)          # the bits stay on the measured qubits
    rho = c()[0]
    assert_same_state(rho, clbits, oracle(qc), 3, TOL[dtype])
    sent = QuantumCircuit(1)
    sent.u(0.7, 1.2, -0.4, 0)
    psi = qiskit.quantum_info.Statevector(sent).data
    want = [np.vdot(psi, _pauli(p, 0, 1) @ psi).real for p in "XYZ"]
    got = tql.mixed.expval(c, ["X2", "Y2", "Z2"])[0]
    assert np.allclose(got.numpy(), want, atol=TOL[dtype])
    probs = tql.mixed.probabilities(rho.unsqueeze(0), list(clbits))[0]
    assert torch.allclose(probs, torch.full_like(probs, 0.25), atol=TOL[dtype])


def ancilla_reuse():
    qc = QuantumCircuit(3, 3)             # data qubits 0 and 1, ancilla 2 measured twice
    qc.ry(1.1, 0)
    qc.cx(0, 1)
    qc.rx(0.4, 1)
    qc.cx(0, 2)
    qc.cx(1, 2)
    qc.measure(2, 0)                      # parity of the data qubits
    qc.reset(2)
    qc.ry(0.8, 2)
    qc.cx(1, 2)
    qc.measure(2, 1)
    qc.reset(2)
    with qc.if_test((qc.clbits[0], 1)):   # reads c0 after its qubit was reset: an extra wire
        qc.x(1)
    qc.h(2)
    qc.measure(0, 2)
    return qc


def test_measure_and_reset_ancilla_reuse(dtype):
    qc = ancilla_reuse()
    c, clbits = _convert(qc, dtype)
    assert c.n_wires == 5 and clbits == (3, 4, 0)
    branches = oracle(qc)
    rho = c()[0]
    assert_same_state(rho, clbits, branches, 3, TOL[dtype])
    probs = tql.mixed.probabilities(rho.unsqueeze(0), list(clbits))[0].numpy()
    want = np.zeros(8)
    for key, r in branches.items():
        want[key[0] * 4 + key[1] * 2 + key[2]] += np.trace(r).real
    assert np.allclose(probs, want, atol=TOL[dtype])
    got = tql.mixed.expval(c, ["Z0", "X1", "Z1", "X2"])[0].numpy()
    total = sum(branches.values())
    want = [np.trace(_pauli(p, q, 3) @ total).real for p, q in (("Z", 0), ("X", 1), ("Z", 1), ("X", 2))]
    assert np.allclose(got, want, atol=TOL[dtype])


def test_keep_clbits_false_adds_wires_only_for_conditions(dtype):
    qc = ancilla_reuse()
    c, clbits = _convert(qc, dtype, keep_clbits=False)
    assert c.n_wires == 4 and clbits == (3, None, 0)     # c1's value is lost with the reset
    branches = oracle(qc)
    marginal = {}
    for key, r in branches.items():
        marginal[(key[0], 0, key[2])] = marginal.get((key[0], 0, key[2]), 0) + r
    assert_same_state(c()[0], (3, None, 0), marginal, 3, TOL[dtype])


def conditioned_rotation():
    x, t = Parameter("x"), Parameter("t")
    qc = QuantumCircuit(2, 1)
    qc.ry(0.9, 0)
    qc.rx(x, 1)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.ry(t + 0.5 * x - 0.2, 1)       # one conditioned gate per term
        qc.cry(t, 1, 0)                   # acts on the measured qubit: its bit gets an extra wire
    with qc.if_test((qc.clbits[0], 0)):
        qc.rz(2 * t, 1)
        qc.h(1)
    return qc, x, t


def test_conditioned_rotation_with_input_and_trainable(dtype):
    qc, x, t = conditioned_rotation()
    c, clbits = _convert(qc, dtype, inputs=[x], trainable=[t], initial_weights=[0.35])
    assert c.num_parameters == 1 and c.n_inputs == 1 and clbits == (2,)
    feats = torch.tensor([[0.3], [-1.2]], dtype=REAL[dtype])
    rho = c(feats)
    for b in range(2):
        assert_same_state(rho[b], clbits, oracle(qc, {x: feats[b, 0].item(), t: 0.35}), 2, TOL[dtype])


def test_gradient_of_trainable_conditioned_angle(dtype):
    qc, x, t = conditioned_rotation()
    c, _ = _convert(qc, dtype, inputs=[x], trainable=[t], initial_weights=[0.35])
    H = tql.Hamiltonian("0.7 X1 + Z1 - 0.4 Z0")
    obs = 0.7 * _pauli("X", 1, 2) + _pauli("Z", 1, 2) - 0.4 * _pauli("Z", 0, 2)
    value = tql.mixed.expval(c, H, x=torch.tensor([[0.3]], dtype=torch.float64))
    value.sum().backward()

    def energy(theta):
        return sum(np.trace(obs @ r).real for r in oracle(qc, {x: 0.3, t: theta}).values())
    h = 1e-5
    fd = (energy(0.35 + h) - energy(0.35 - h)) / (2 * h)
    assert abs(value.item() - energy(0.35)) < TOL[dtype] * 10
    assert abs(c.weights.grad.item() - fd) < GRAD_TOL[dtype]


def if_else_register():
    q, c = QuantumRegister(3, "q"), ClassicalRegister(2, "c")
    qc = QuantumCircuit(q, c)
    qc.ry(1.3, 0)
    qc.ry(2.1, 1)
    qc.measure(0, 0)
    qc.measure(1, 1)
    with qc.if_test((c, 2)) as otherwise:            # c == 2: c[1] = 1, c[0] = 0
        qc.rx(0.9, 2)
        with qc.if_test(expr.logic_not(c[1])):       # never inside c == 2: the nested body is dead
            qc.x(2)
    with otherwise:                                   # c != 2: split into disjoint cases
        qc.h(2)
        qc.cry(0.6, 2, 0)                             # acts on the measured qubit 0: c[0] gets a wire
        with qc.if_test((c[0], 1)):                   # c == 1 or c == 3: nested cases combine
            qc.t(2)
    with qc.if_test(expr.logic_and(c[0], expr.not_equal(c, 3))):   # c == 1
        qc.s(2)
    with qc.if_test((c[0], 0)) as otherwise:          # a single bit with an else branch
        qc.ry(0.3, 2)
    with otherwise:
        qc.rz(1.1, 2)
    return qc


def test_if_else_with_both_branches(dtype):
    qc = if_else_register()
    c, clbits = _convert(qc, dtype)
    assert clbits == (3, 1)
    assert_same_state(c()[0], clbits, oracle(qc), 3, TOL[dtype])


def test_for_loop_box_and_unwritten_clbits(dtype):
    qc = QuantumCircuit(2, 3)
    qc.h(0)
    with qc.for_loop(range(3)) as i:
        qc.rx(0.4 * i + 0.1, 1)
        qc.measure(0, 0)
        with qc.if_test((qc.clbits[0], 1)):
            qc.ry(0.5, 1)
        qc.h(0)
    with qc.box():
        qc.cx(1, 0)
    with qc.if_test((qc.clbits[2], 1)):               # never written: reads 0, never applies
        qc.x(1)
    with qc.if_test((qc.clbits[2], 0)):               # ... and this always does
        qc.y(1)
    qc.barrier()
    c, clbits = _convert(qc, dtype)
    assert clbits == (2, None, None)
    assert_same_state(c()[0], clbits, oracle(qc), 2, TOL[dtype])


def test_circuit_from_qiskit_points_to_mixed():
    qc = QuantumCircuit(1, 1)
    qc.h(0)
    qc.measure(0, 0)
    with pytest.raises(ValueError, match="'measure'.*MixedCircuit.from_qiskit"):
        tql.Circuit.from_qiskit(qc)
    qc = QuantumCircuit(1)
    qc.h(0)
    qc.reset(0)
    with pytest.raises(ValueError, match="'reset'.*MixedCircuit.from_qiskit"):
        tql.Circuit.from_qiskit(qc)
    qc = QuantumCircuit(1, 1)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(0)
    with pytest.raises(ValueError, match="'if_else'.*MixedCircuit.from_qiskit"):
        tql.Circuit.from_qiskit(qc)


# =============================================================================================
# refusals: one each, the message naming the instruction
def _refused(qc, pattern):
    with pytest.raises(ValueError, match=pattern):
        tql.MixedCircuit.from_qiskit(qc)


def test_while_loop_is_refused():
    qc = QuantumCircuit(1, 1)
    qc.measure(0, 0)
    with qc.while_loop((qc.clbits[0], 1)):
        qc.h(0)
        qc.measure(0, 0)
    _refused(qc, "MixedCircuit.from_qiskit: instruction 'while_loop'")


def switch_register():
    q, c = QuantumRegister(3, "q"), ClassicalRegister(2, "c")
    qc = QuantumCircuit(q, c)
    qc.ry(1.1, 0)
    qc.ry(2.3, 1)
    qc.measure(0, 0)
    qc.measure(1, 1)
    with qc.switch(c) as case:                        # c = 2·c1 + c0
        with case(0):
            qc.rx(0.7, 2)
        with case(1, 2):
            qc.h(2)
            qc.cry(0.4, 2, 1)                         # acts on measured qubit 1: c1 gets a wire
        with case(case.DEFAULT):                      # c == 3
            qc.ry(1.9, 2)
    with qc.switch(c[0]) as case:                     # a single clbit, no default: 0 runs nothing
        with case(1):
            qc.s(2)
    return qc


def test_switch_case_on_register_and_clbit(dtype):
    qc = switch_register()
    c, clbits = _convert(qc, dtype)
    assert_same_state(c()[0], clbits, oracle(qc), 3, TOL[dtype])


def test_break_in_for_loop_is_refused():
    qc = QuantumCircuit(1, 1)
    with qc.for_loop(range(2)):
        qc.h(0)
        qc.break_loop()
    _refused(qc, "'break_loop'.*inside 'for_loop'")


def test_measure_inside_if_is_refused():
    qc = QuantumCircuit(2, 2)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.measure(1, 1)
    _refused(qc, "'measure' on qubit.*inside 'if_else'")


def test_reset_inside_if_is_refused():
    qc = QuantumCircuit(2, 1)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.reset(1)
    _refused(qc, "'reset' on qubit.*inside 'if_else'")


def test_unitary_inside_if_is_refused():
    qc = QuantumCircuit(2, 1)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.unitary(np.array([[0, 1], [1, 0]]), [1])
    _refused(qc, "'unitary'.*inside 'if_else'")


def test_condition_on_classical_variable_is_refused():
    flag = expr.Var.new("flag", types.Bool())
    qc = QuantumCircuit(1, 1, inputs=[flag])
    with qc.if_test(flag):
        qc.x(0)
    _refused(qc, "'if_else'.*classical variables.*'flag'")


def test_arithmetic_condition_is_refused():
    qc = QuantumCircuit(1, 2)
    creg = qc.cregs[0]
    qc.measure(0, 0)
    with qc.if_test(expr.equal(expr.shift_left(creg, 1), 2)):
        qc.x(0)
    _refused(qc, "'if_else'.*SHIFT_LEFT")


def test_store_is_refused():
    qc = QuantumCircuit(1, 1)
    a = qc.add_var("a", expr.lift(qc.clbits[0]))
    qc.store(a, expr.lift(True))
    _refused(qc, "'store'")


def test_non_constant_loop_range_is_refused():
    # Qiskit 2 will not append such a loop to a circuit, so the reader meets it only through an
    # older or hand-built circuit: hand it to the reader's walker directly
    from qiskit.circuit import ForLoopOp
    from torchquantum_layers import qiskit_dynamic, qiskit_interop
    body = QuantumCircuit(1)
    body.h(0)
    op = ForLoopOp([Parameter("n")], None, body)
    walker = qiskit_dynamic._Walker(qiskit, qiskit_interop._Reader(qiskit, None, qiskit_dynamic.CALLER))
    with pytest.raises(ValueError, match="'for_loop'.*not over constant integers"):
        walker.flow_op(op, (0,), (), {}, walker.reader.describe(op, (0,), "the circuit"), 0, None, [])


def test_c_if_is_refused():
    """Qiskit 1.x's ``c_if`` set an instruction's ``condition``; Qiskit 2 has no ``c_if``, so the
    condition is set on the gate by hand here (what a 1.x circuit carries)."""
    from qiskit.circuit.library import XGate
    qc = QuantumCircuit(1, 1)
    qc.measure(0, 0)
    gate = XGate(label="x")                 # a labelled gate is a mutable (non-singleton) instance
    gate.condition = (qc.clbits[0], 1)
    qc.append(gate, [0])
    _refused(qc, "'x'.*c_if")
