"""Algorithm templates (torchquantum_layers/algorithms.py) against independent oracles: the
textbook phase-estimation distribution |Σ_j e^{2πij(φ − k/2^m)}|²/4^m with eigenphases from
numpy.linalg.eig, ⟨ψ|U|ψ⟩ and |⟨a|b⟩|² from NumPy, Grover's sin²((2k+1)θ), whole-circuit
unitaries against dense Kronecker constructions (tests/oracle.py), gradcheck in complex128, and
one test per bad argument."""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import templates as T

from . import oracle as O


# ---------------------------------------------------------------------------------------------
# NumPy helpers (no library code)
def _run(c, dtype, state=None, x=None):
    c = c.double() if dtype == torch.complex128 else c
    if state is not None:
        state = torch.as_tensor(np.asarray(state)[None, :]).to(dtype)
    return c(x=x, state=state).detach().numpy()[0]


def _marginal(psi, wires, n):
    """Probabilities of the integers whose bits are ``wires`` in that order (wires[0] the MSB)."""
    p = (np.abs(psi) ** 2).reshape((2,) * n)
    rest = tuple(w for w in range(n) if w not in wires)
    p = p.sum(axis=rest) if rest else p
    kept = sorted(wires)                       # axes of p now follow the sorted wires
    return np.transpose(p, [kept.index(w) for w in wires]).reshape(-1)


def _z(psi, wire, n):
    p = _marginal(psi, [wire], n)
    return p[0] - p[1]


def _embed(psi, order, n):
    """A state given over the wires ``order`` (order[0] its MSB) in the standard wire order."""
    t = np.asarray(psi, dtype=complex).reshape((2,) * n)
    return np.transpose(t, np.argsort(order)).reshape(-1)


def _qpe_dist(phi, m):
    """Textbook: P(k) = |Σ_j e^{2πij(φ − k/2^m)}|² / 4^m."""
    j = np.arange(2 ** m)
    return np.array([abs(np.exp(2j * np.pi * j * (phi - k / 2 ** m)).sum()) ** 2 / 4 ** m
                     for k in range(2 ** m)])


def _dft(m):
    N = 2 ** m
    j = np.arange(N)
    return np.exp(2j * np.pi * np.outer(j, j) / N) / np.sqrt(N)


def _tol(dtype):
    return 1e-4 if dtype == torch.complex64 else 1e-9


# ---------------------------------------------------------------------------------------------
# quantum phase estimation
def test_qpe_phase_gate_representable_phase_is_certain(dtype):
    est, target, m = (2, 0, 3), 1, 3             # estimation wires out of order: est[0] is the MSB
    for k in range(2 ** m):
        u = tql.Circuit(1).p(0, 2 * np.pi * k / 2 ** m)
        c = tql.Circuit(4).x(target)
        T.qpe(c, u, [target], est)
        p = _marginal(_run(c, dtype), est, 4)
        assert p[k] == pytest.approx(1, abs=_tol(dtype)), (k, p)


@pytest.mark.parametrize("phi", [0.3141, 0.8])
def test_qpe_phase_gate_textbook_distribution(phi, dtype):
    m = 4
    c = tql.Circuit(5).x(4)
    T.qpe(c, tql.Circuit(1).p(0, 2 * np.pi * phi), [4], range(m))
    np.testing.assert_allclose(_marginal(_run(c, dtype), list(range(m)), 5), _qpe_dist(phi, m), atol=_tol(dtype))


def test_qpe_random_two_qubit_matrix_eigenvectors(dtype):
    rng = np.random.default_rng(1)
    u = O.random_unitary(4, rng)
    vals, vecs = np.linalg.eig(u)
    m, est, target = 3, (0, 1, 2), (3, 4)
    c = T.qpe(5, u, target, est)
    for val, v in zip(vals, vecs.T):
        phi = (np.angle(val) / (2 * np.pi)) % 1
        psi = _embed(np.kron(np.eye(8)[0], v), list(est) + list(target), 5)
        np.testing.assert_allclose(_marginal(_run(c, dtype, psi), est, 5), _qpe_dist(phi, m), atol=_tol(dtype))


def _sub_circuit_and_dense():
    """A 2-wire circuit mixing gate kinds (controlled one by one) and its dense matrix."""
    u = tql.Circuit(2)
    u.u3(0, 0.3, -1.1, 0.7).cnot(0, 1).ry(1, trainable=True, init=0.9).rxx(0, 1, 0.4).multi_rz([1, 0], -0.8)
    u.cy(1, 0).single_excitation(0, 1, 1.3).t(1)
    dense = np.eye(4)
    for g, wires in [(O.u3(0.3, -1.1, 0.7), [0]), (O.gate_matrix("CNOT"), [0, 1]), (O.ry(0.9), [1]),
                     (O.pauli_rotation(0.4, "XX"), [0, 1]), (O.pauli_rotation(-0.8, "ZZ"), [1, 0]),
                     (O.gate_matrix("CY"), [1, 0]), (O.givens(1.3, 4, 1, 2), [0, 1]),
                     (O.gate_matrix("T"), [1])]:
        dense = O.full_operator(g, wires, 2) @ dense
    return u, dense


def test_qpe_random_circuit_eigenvectors_gate_by_gate(dtype):
    u, dense = _sub_circuit_and_dense()
    vals, vecs = np.linalg.eig(dense)
    m, est, target = 3, (4, 0, 2), (3, 1)
    c = T.qpe(5, u, target, est)
    assert c.num_parameters == 1                          # the copies share the one RY angle
    for val, v in zip(vals, vecs.T):
        phi = (np.angle(val) / (2 * np.pi)) % 1
        psi = _embed(np.kron(np.eye(8)[0], v), list(est) + list(target), 5)
        np.testing.assert_allclose(_marginal(_run(c, dtype, psi), est, 5), _qpe_dist(phi, m), atol=_tol(dtype))


def test_qpe_unitary_matches_dense_construction(dtype, engine_mode):
    """Whole-circuit unitary: (F† on est) · Π_j C_{est[j]}(G^(2^(m-1-j))) · (H on est), with the
    Grover operator of two marked strings as U (its sign and controlled RZ(2π) phase matter)."""
    g = T.grover_operator(2, ["01", "11"], [0, 1])
    s = np.full(4, 0.5)
    G_dense = (2 * np.outer(s, s) - np.eye(4)) @ np.diag([1, -1, 1, -1])
    n, est, target = 4, (3, 1), (0, 2)
    c = T.qpe(n, g, target, est)
    want = O.full_operator(O.kron(O.H, O.H), est, n)
    for j, w in enumerate(est):
        want = O.controlled_on_wires(np.linalg.matrix_power(G_dense, 2 ** (1 - j)), [w], target, n) @ want
    want = O.full_operator(_dft(2).conj().T, est, n) @ want
    c = c.double() if dtype == torch.complex128 else c
    np.testing.assert_allclose(c.unitary().detach().numpy(), want, atol=10 * _tol(dtype))


def test_qpe_matrix_and_circuit_agree():
    u, dense = _sub_circuit_and_dense()
    a = T.qpe(4, u, (2, 3), (0, 1)).double().unitary().detach()
    b = T.qpe(4, dense, (2, 3), (0, 1)).double().unitary()
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-10)


def test_qpe_gradcheck_in_the_phase():
    """P(k) of QPE of P(x) is differentiable in the input angle x (and a trainable one)."""
    u = tql.Circuit(1).p(0, input=0)
    c = T.qpe(tql.Circuit(3).x(2), u, [2], [0, 1]).double()          # target in |1⟩

    def f(x):
        psi = c(x=x)
        p = (psi.abs() ** 2).reshape(-1, 4, 2).sum(-1)
        return p
    x = torch.tensor([[0.7], [2.9]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x,))
    # value against the textbook formula
    np.testing.assert_allclose(f(x)[1].detach().numpy(), _qpe_dist(2.9 / (2 * np.pi), 2), atol=1e-10)


# ---------------------------------------------------------------------------------------------
# Hadamard test
@pytest.mark.parametrize("imaginary", [False, True])
def test_hadamard_test_matches_numpy_expectation(imaginary, dtype):
    rng = np.random.default_rng(2)
    psi, u = O.random_state(2, rng), O.random_unitary(4, rng)
    anc, target = 1, (2, 0)
    c = T.hadamard_test(3, u, anc, target, imaginary=imaginary)
    start = _embed(np.kron(psi, [1, 0]), list(target) + [anc], 3)
    want = np.vdot(psi, u @ psi)
    want = want.imag if imaginary else want.real
    assert _z(_run(c, dtype, start), anc, 3) == pytest.approx(want, abs=_tol(dtype))


@pytest.mark.parametrize("imaginary", [False, True])
def test_hadamard_test_unitary_matches_dense(imaginary, dtype, engine_mode):
    """Gate-by-gate control of a circuit with adjoint ops, data gates, MultiRZ and MCX."""
    rng = np.random.default_rng(3)
    q, d = O.random_unitary(4, rng), O.random_phases(8, rng)
    u = tql.Circuit(3).rzx(0, 2, 0.6).cp(2, 1, -0.4).s(0)
    u.append(u.inverse().ry(1, 0.2).inverse())                   # adjoint ops (RY† too)
    u.qubit_unitary([2, 0], q).diagonal_unitary([0, 1, 2], d).multi_rz([0, 1, 2], 0.9)
    u.multi_controlled_x([1, 2, 0]).toffoli(0, 1, 2)
    q2, d2 = O.random_unitary(4, rng), O.random_phases(4, rng)
    u.append(tql.Circuit(3).qubit_unitary([1, 2], q2).diagonal_unitary([2, 0], d2).inverse())   # adjoint data
    part_dense = (O.full_operator(O.gate_matrix("S"), [0], 3) @ O.full_operator(O.controlled_matrix(O.phase(-0.4)), [2, 1], 3)
                  @ O.full_operator(O.pauli_rotation(0.6, "ZX"), [0, 2], 3))
    # appended: (u† then RY)† = RY† then u's three gates again
    dense = part_dense @ O.full_operator(O.ry(0.2), [1], 3).conj().T @ part_dense
    for g, wires in [(q, [2, 0]), (np.diag(d), [0, 1, 2]), (O.pauli_rotation(0.9, "ZZZ"), [0, 1, 2]),
                     (O.controlled_matrix(O.X, 2), [1, 2, 0]), (O.controlled_matrix(O.X, 2), [0, 1, 2]),
                     (np.diag(d2).conj(), [2, 0]), (q2.conj().T, [1, 2])]:
        dense = O.full_operator(g, wires, 3) @ dense
    anc, target = 2, (3, 0, 1)
    c = T.hadamard_test(4, u, anc, target, imaginary=imaginary)
    h = O.full_operator(O.H, [anc], 4)
    first = h if not imaginary else O.full_operator(np.diag([1, -1j]), [anc], 4) @ h
    want = h @ O.controlled_on_wires(dense, [anc], target, 4) @ first
    c = c.double() if dtype == torch.complex128 else c
    np.testing.assert_allclose(c.unitary().detach().numpy(), want, atol=10 * _tol(dtype))


@pytest.mark.parametrize("imaginary", [False, True])
def test_hadamard_test_gradcheck_ry(imaginary):
    """U = RY(x) on |ψ⟩ = RX(0.4)|0⟩: ⟨ψ|RY|ψ⟩ = cos(x/2) − i sin(x/2)⟨Y⟩ with ⟨Y⟩ = −sin 0.4."""
    c = tql.Circuit(2).rx(1, 0.4)
    T.hadamard_test(c, tql.Circuit(1).ry(0, input=0), 0, [1], imaginary=imaginary)
    c = c.double()

    def f(x):
        p = (c(x=x).abs() ** 2).reshape(-1, 2, 2).sum(-1)
        return p[:, 0] - p[:, 1]
    x = torch.tensor([[0.3], [-1.7]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (x,))
    t = x.detach()[:, 0].numpy()
    want = np.sin(t / 2) * np.sin(0.4) if imaginary else np.cos(t / 2)
    np.testing.assert_allclose(f(x).detach().numpy(), want, atol=1e-12)


def test_hadamard_test_trainable_angle_gradient():
    u = tql.Circuit(1).ry(0, trainable=True, init=0.8)
    c = T.hadamard_test(2, u, 0, [1]).double()
    assert c.num_parameters == 1 and u.num_parameters == 1
    p = (c().abs() ** 2).reshape(2, 2).sum(-1)
    (p[0] - p[1]).backward()
    w = c.weights[0].item()                               # 0.8 as float32 held it
    assert c.weights.grad[0].item() == pytest.approx(-math.sin(w / 2) / 2, abs=1e-12)   # d cos(θ/2)/dθ


# ---------------------------------------------------------------------------------------------
# swap test
def test_swap_test_matches_overlap(dtype):
    rng = np.random.default_rng(4)
    a, b = O.random_state(2, rng), O.random_state(2, rng)
    anc, wa, wb = 2, (0, 4), (3, 1)
    c = T.swap_test(5, anc, wa, wb)
    start = _embed(np.kron(np.kron(a, b), [1, 0]), list(wa) + list(wb) + [anc], 5)
    assert _z(_run(c, dtype, start), anc, 5) == pytest.approx(abs(np.vdot(a, b)) ** 2, abs=_tol(dtype))
    same = _embed(np.kron(np.kron(a, a), [1, 0]), list(wa) + list(wb) + [anc], 5)
    assert _z(_run(c, dtype, same), anc, 5) == pytest.approx(1, abs=_tol(dtype))


def test_swap_test_unitary_matches_dense(dtype):
    c = T.swap_test(3, 1, [2], [0])
    h = O.full_operator(O.H, [1], 3)
    want = h @ O.full_operator(O.gate_matrix("CSWAP"), [1, 2, 0], 3) @ h
    c = c.double() if dtype == torch.complex128 else c
    np.testing.assert_allclose(c.unitary().detach().numpy(), want, atol=10 * _tol(dtype))


# ---------------------------------------------------------------------------------------------
# amplitude amplification
def test_grover_success_probability_is_analytic(dtype):
    n, marked = 4, ["0110", 13]
    theta = math.asin(math.sqrt(2 / 16))
    wires = (3, 0, 2, 1)
    good = [0b0110, 13]
    for k in range(5):
        c = T.amplitude_amplification(4, marked, wires, iterations=k)
        p = _marginal(_run(c, dtype), wires, n)
        assert p[good].sum() == pytest.approx(math.sin((2 * k + 1) * theta) ** 2, abs=_tol(dtype))
        np.testing.assert_allclose(p[good[0]], p[good[1]], atol=_tol(dtype))
    assert T.grover_iterations(2, 16) == 2
    c = T.amplitude_amplification(4, marked, wires)          # iterations=None: floor(π/(4θ)) = 2
    p = _marginal(_run(c, dtype), wires, n)
    assert p[good].sum() == pytest.approx(math.sin(5 * theta) ** 2, abs=_tol(dtype))


def test_grover_iterations_formula():
    for M, N in [(1, 4), (1, 16), (3, 64), (1, 1024), (4, 4)]:
        theta = math.asin(math.sqrt(M / N))
        k = T.grover_iterations(M, N)
        assert k == math.floor(math.pi / (4 * theta))
        # it is the best k up to the first peak
        best = max(range(k + 2), key=lambda j: math.sin((2 * j + 1) * theta) ** 2)
        assert math.sin((2 * k + 1) * theta) ** 2 >= math.sin((2 * best + 1) * theta) ** 2 - 1e-12
    assert T.grover_iterations(1, 4) == 1


def test_grover_operator_unitary_matches_dense(dtype):
    n, marked = 3, ["101", 2]
    s = np.full(8, 1 / np.sqrt(8))
    oracle = np.eye(8)
    oracle[5, 5] = oracle[2, 2] = -1
    want = (2 * np.outer(s, s) - np.eye(8)) @ oracle
    for c in (T.grover_operator(n, marked, [0, 1, 2]),
              T.grover_operator(n, tql.Circuit(3).diagonal_unitary([0, 1, 2], np.diag(oracle).copy()), [0, 1, 2])):
        c = c.double() if dtype == torch.complex128 else c
        np.testing.assert_allclose(c.unitary().detach().numpy(), want, atol=10 * _tol(dtype))


def test_grover_operator_with_state_prep_matches_dense(dtype):
    prep = tql.Circuit(2).ry(0, trainable=True, init=0.7).cnot(0, 1).rx(1, 0.3)
    A = O.full_operator(O.rx(0.3), [1], 2) @ O.gate_matrix("CNOT") @ O.full_operator(O.ry(0.7), [0], 2)
    zero = np.eye(4)[0]
    want = A @ (2 * np.outer(zero, zero) - np.eye(4)) @ A.conj().T @ np.diag([1, 1, -1, 1])
    c = T.grover_operator(3, ["10"], [2, 0], state_prep=prep)
    assert c.num_parameters == 1                          # A and A† share the copied angle
    want = O.full_operator(want, [2, 0], 3)
    c = c.double() if dtype == torch.complex128 else c
    np.testing.assert_allclose(c.unitary().detach().numpy(), want, atol=10 * _tol(dtype))


def test_amplitude_amplification_with_state_prep_and_oracle_circuit(dtype):
    """Non-uniform start A|0⟩ with good-state probability a = sin²θ: sin²((2k+1)θ) after k steps."""
    prep = tql.Circuit(2).ry(0, 1.1).ry(1, -0.5)
    a0 = O.kron(O.ry(1.1), O.ry(-0.5))[:, 0]
    theta = math.asin(abs(a0[3]))                          # marked: |11⟩ (the CZ oracle)
    for k in range(4):
        c = T.amplitude_amplification(2, tql.Circuit(2).cz(0, 1), [0, 1], iterations=k, state_prep=prep)
        p = np.abs(_run(c, dtype)) ** 2
        assert p[3] == pytest.approx(math.sin((2 * k + 1) * theta) ** 2, abs=_tol(dtype))


def test_phase_oracle_is_the_marked_diagonal():
    c = T.phase_oracle(3, ["011", 6, "000"], [2, 1, 0]).double()
    want = np.ones(8)
    for bits in ["011", "110", "000"]:                   # wire order (2, 1, 0): reverse the strings
        want[int(bits[::-1], 2)] = -1
    np.testing.assert_allclose(c.unitary().detach().numpy(), np.diag(want), atol=1e-12)
    # the flips between strings merge: 3 + 2 + 2 + 1 X gates, 10 unmerged (a pair around each 0 bit)
    assert c.count_ops() == {"X": 8, "CCZ": 3}


# ---------------------------------------------------------------------------------------------
# bad input: one test per case, the message names the argument
def _u1():
    return tql.Circuit(1).p(0, 0.3)


def test_error_overlapping_wires():
    with pytest.raises(ValueError, match="target_wires and estimation_wires overlap"):
        T.qpe(3, _u1(), [1], [0, 1])


def test_error_repeated_estimation_wire():
    with pytest.raises(ValueError, match="estimation_wires: repeated wires"):
        T.qpe(3, _u1(), [2], [0, 0])


def test_error_wire_out_of_range():
    with pytest.raises(ValueError, match="target_wires: wire 5 is out of range"):
        T.qpe(3, _u1(), [5], [0, 1])


def test_error_unitary_circuit_wrong_wire_count():
    with pytest.raises(ValueError, match="unitary is a circuit on 2 wire.*target_wires has 1"):
        T.qpe(3, tql.Circuit(2), [2], [0, 1])


def test_error_unitary_matrix_wrong_shape():
    with pytest.raises(ValueError, match=r"unitary must be a \(4, 4\) matrix for the 2 wire\(s\) of target_wires"):
        T.hadamard_test(3, np.eye(2), 0, [1, 2])


def test_error_non_unitary_matrix():
    with pytest.raises(ValueError, match="qpe: unitary: matrix is not unitary"):
        T.qpe(2, np.array([[1, 1], [0, 1]]), [1], [0])


def test_error_unitary_wrong_type():
    with pytest.raises(TypeError, match="unitary must be a Circuit or a unitary matrix"):
        T.hadamard_test(2, "X", 0, [1])


def test_error_noisy_unitary():
    m = tql.MixedCircuit(1)
    m.x(0)
    with pytest.raises(TypeError, match="unitary must be a unitary Circuit"):
        T.hadamard_test(2, m, 0, [1])


def test_error_ancilla_among_targets():
    with pytest.raises(ValueError, match="ancilla and target_wires overlap"):
        T.hadamard_test(2, _u1(), 1, [1])


def test_error_ancilla_several_wires():
    with pytest.raises(ValueError, match="ancilla must be one wire"):
        T.swap_test(5, [0, 1], [2], [3])


def test_error_imaginary_not_bool():
    with pytest.raises(TypeError, match="imaginary must be True or False"):
        T.hadamard_test(2, _u1(), 0, [1], imaginary="yes")


def test_error_swap_test_lengths_differ():
    with pytest.raises(ValueError, match="wires_b has 1 wire.*wires_a has 2"):
        T.swap_test(4, 0, [1, 2], [3])


def test_error_swap_test_registers_overlap():
    with pytest.raises(ValueError, match="wires_a and wires_b overlap"):
        T.swap_test(4, 0, [1, 2], [2, 3])


def test_error_missing_wires():
    with pytest.raises(TypeError, match="estimation_wires must be given"):
        T.qpe(3, _u1(), [2], None)


def test_error_negative_iterations():
    with pytest.raises(ValueError, match="iterations must be >= 0"):
        T.amplitude_amplification(2, ["11"], [0, 1], iterations=-1)


def test_error_iterations_not_int():
    with pytest.raises(TypeError, match="iterations must be an int"):
        T.amplitude_amplification(2, ["11"], [0, 1], iterations=1.5)


def test_error_marked_wrong_length():
    with pytest.raises(ValueError, match="marked bitstring '101' must have 2 characters"):
        T.grover_operator(2, ["101"], [0, 1])


def test_error_marked_not_binary():
    with pytest.raises(ValueError, match="marked bitstring '12' must have 2 characters 0/1"):
        T.phase_oracle(2, ["12"], [0, 1])


def test_error_marked_index_out_of_range():
    with pytest.raises(ValueError, match=r"marked index 4 is outside \[0, 4\)"):
        T.amplitude_amplification(2, [4], [0, 1])


def test_error_marked_repeated():
    with pytest.raises(ValueError, match="marked bitstrings repeat"):
        T.amplitude_amplification(2, ["01", 1], [0, 1])


def test_error_marked_empty():
    with pytest.raises(ValueError, match="no marked bitstrings"):
        T.amplitude_amplification(2, [], [0, 1])


def test_error_marked_wrong_type():
    with pytest.raises(TypeError, match="marked bitstring True must be"):
        T.amplitude_amplification(2, [True], [0, 1])


def test_error_oracle_circuit_wrong_wire_count():
    with pytest.raises(ValueError, match="oracle is a circuit on 3 wire.*but wires has 2"):
        T.grover_operator(2, tql.Circuit(3), [0, 1])


def test_error_iterations_needed_for_oracle_circuit():
    with pytest.raises(ValueError, match="iterations=None needs marked bitstrings"):
        T.amplitude_amplification(2, tql.Circuit(2).cz(0, 1), [0, 1])


def test_error_state_prep_wrong_type():
    with pytest.raises(TypeError, match="state_prep must be a Circuit"):
        T.grover_operator(2, ["11"], [0, 1], state_prep=np.eye(4))


def test_error_controlled_unitary_negative_power():
    with pytest.raises(ValueError, match="power must be >= 0"):
        T.controlled_unitary(2, _u1(), [0], [1], power=-1)


def test_error_oracle_is_the_circuit_itself():
    c = tql.Circuit(2)
    with pytest.raises(ValueError, match="oracle and state_prep must be other circuits"):
        T.grover_operator(c, c, [0, 1])
