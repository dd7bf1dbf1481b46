"""Variational quantum linear solver (tql.research.vqls): both costs against dense NumPy
evaluations on random states, zero at numpy.linalg.solve's solution, the tutorial and paper
problems solved to fidelity > 0.99 over three seeds, gradcheck, singular A, bad input."""

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers.research import linear_solver as V

from . import oracle as O


# the Paddle Quantum / PennyLane tutorial problem: A = I + 0.2 X0 Z1 + 0.2 X0, b = H⊗H⊗H|0⟩
TUTORIAL = [(1.0, "III"), (0.2, "XZI"), (0.2, "XII")]
# a non-Hermitian A with complex coefficients and a Y (complex matrix), well conditioned
COMPLEX = [(1.0, "III"), (0.3 + 0.2j, "YXI"), (-0.25j, "ZIX"), (0.15, "IYZ")]


def hamiltonian(terms, n=3):
    return tql.Hamiltonian([(c, tql.PauliString(label)) for c, label in terms], n_wires=n)


def dense(terms):
    return sum(c * O.pauli_matrix(label) for c, label in terms)


def hadamards(n):
    b = tql.Circuit(n)
    for w in range(n):
        b.h(w)
    return b


def b_circuit():
    """A U_b that is not its own inverse, with the NumPy matrix of it built gate by gate."""
    c = hadamards(3).ry(1, 0.3).cnot(0, 2).rz(2, 0.7).s(0)
    u = O.full_operator(O.H, [0], 3) @ np.eye(8)
    u = O.full_operator(O.H, [2], 3) @ O.full_operator(O.H, [1], 3) @ u
    for gate, params, wires in [("RY", (0.3,), [1]), ("CNOT", (), [0, 2]), ("RZ", (0.7,), [2]), ("S", (), [0])]:
        u = O.full_operator(O.gate_matrix(gate, *params), wires, 3) @ u
    return c, u


def householder(b):
    """The NumPy reflection with R e^{iα}|0⟩ = |b⟩ (α = arg b_0): the module's documented U_b."""
    e0 = np.zeros_like(b)
    e0[0] = np.exp(1j * np.angle(b[0]))
    w = e0 - b
    return np.eye(len(b)) - 2 * np.outer(w, w.conj()) / np.vdot(w, w)


def dense_costs(a, u_b, x):
    """(C_L, C_G) of one state x from the dense matrices, straight from the paper's definitions."""
    n = int(np.log2(len(x)))
    phi = a @ x
    b = u_b[:, 0]
    norm2 = np.vdot(phi, phi).real
    c_g = 1 - abs(np.vdot(b, phi)) ** 2 / norm2
    zeros = sum(O.full_operator(np.diag([1.0, 0.0]), [j], n) for j in range(n)) / n
    proj = u_b @ (np.eye(2 ** n) - zeros) @ u_b.conj().T
    c_l = np.vdot(phi, proj @ phi).real / norm2
    return c_l, c_g


def random_states(rng, batch, n=3, scale=1.0):
    return scale * (rng.normal(size=(batch, 2 ** n)) + 1j * rng.normal(size=(batch, 2 ** n)))


# ------------------------------------------------------------------------------------------------
# costs against the dense oracle
@pytest.mark.parametrize("problem", ["tutorial-circuit", "complex-vector"])
def test_costs_match_dense_numpy_on_random_states(problem, dtype, device, atol):
    rng = np.random.default_rng(7)
    if problem == "tutorial-circuit":
        terms = TUTORIAL
        b, u_b = b_circuit()
    else:
        terms = COMPLEX
        b_np = rng.normal(size=8) + 1j * rng.normal(size=8)
        b_np /= np.linalg.norm(b_np)
        b, u_b = 3.0 * b_np, householder(b_np)      # b is normalised by the module
    A, a = hamiltonian(terms), dense(terms)
    xs = random_states(rng, 5, scale=0.7)            # unnormalised: both costs are scale invariant
    state = torch.tensor(xs, dtype=dtype, device=device)
    local = V.vqls_cost(A, b, state, cost="local")
    glob = V.vqls_cost(A, b, state, cost="global")
    assert local.shape == glob.shape == (5,) and local.dtype == state.real.dtype
    assert local.device == state.device
    ref = np.array([dense_costs(a, u_b, x) for x in xs])
    np.testing.assert_allclose(local.cpu().numpy(), ref[:, 0], atol=10 * atol)
    np.testing.assert_allclose(glob.cpu().numpy(), ref[:, 1], atol=10 * atol)
    assert (ref > 0.01).all()                        # random states are far from the solution
    # the paper's bound C_L <= C_G <= n C_L holds for the dense values: the two costs differ
    assert (ref[:, 0] <= ref[:, 1] + 1e-12).all() and (ref[:, 1] <= 3 * ref[:, 0] + 1e-12).all()
    # a single state (2**n,) gives a scalar
    one = V.vqls_cost(A, b, state[2], cost="local")
    assert one.dim() == 0 and abs(float(one) - ref[2, 0]) < 10 * atol


def test_dense_matrix_input_gives_the_same_costs(dtype, atol):
    rng = np.random.default_rng(3)
    a = dense(COMPLEX)
    b, u_b = b_circuit()
    xs = random_states(rng, 3)
    state = torch.tensor(xs, dtype=dtype)
    ref = np.array([dense_costs(a, u_b, x) for x in xs])
    for cost, col in (("local", 0), ("global", 1)):
        got = V.vqls_cost(a, b, state, cost=cost)                       # NumPy matrix
        np.testing.assert_allclose(got.numpy(), ref[:, col], atol=10 * atol)
        got = V.vqls_cost(torch.tensor(a), b, state, cost=cost)         # torch matrix
        np.testing.assert_allclose(got.numpy(), ref[:, col], atol=10 * atol)


@pytest.mark.parametrize("terms", [TUTORIAL, COMPLEX], ids=["tutorial", "complex"])
def test_costs_vanish_at_numpy_solution(terms, dtype, atol):
    a = dense(terms)
    b, u_b = b_circuit()
    x = np.linalg.solve(a, u_b[:, 0])
    state = torch.tensor(np.stack([x / np.linalg.norm(x), 2.5j * x]), dtype=dtype)
    for cost in V.COSTS:
        value = V.vqls_cost(hamiltonian(terms), b, state, cost=cost)
        assert float(value.abs().max()) < 10 * atol, cost
    # and a perturbed solution is not a zero
    wrong = torch.tensor(x + 0.1 * np.roll(x, 1), dtype=dtype)
    assert float(V.vqls_cost(hamiltonian(terms), b, wrong, cost="local")) > 1e-4


def test_pauli_decompose_rebuilds_the_matrix():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(8, 8)) + 1j * rng.normal(size=(8, 8))
    h = V.pauli_decompose(m)
    assert len(h) == 64 and h.n_wires == 3
    labels = {str(p) for p in h.paulis}
    assert len(labels) == 64                                      # every string once
    rebuilt = np.zeros((8, 8), dtype=complex)
    for c, p in h.terms:
        rebuilt += c * O.pauli_matrix("".join(_letter(p, w) for w in range(3)))
    np.testing.assert_allclose(rebuilt, m, atol=1e-12)
    # a Hermitian matrix: real coefficients, a Hermitian Hamiltonian; zero terms dropped
    h2 = V.pauli_decompose(dense([(0.5, "XZ"), (-1.5, "YY"), (0.25, "IZ")]))
    assert h2.is_hermitian and len(h2) == 3
    coeffs = {"".join(_letter(p, w) for w in range(2)): c for c, p in h2.terms}
    assert coeffs == pytest.approx({"XZ": 0.5, "YY": -1.5, "IZ": 0.25}, abs=1e-14)
    assert all(isinstance(c, float) for c in coeffs.values())


def _letter(p: tql.PauliString, wire: int) -> str:
    x, z = (p._x >> wire) & 1, (p._z >> wire) & 1
    return "IXZY"[x | (z << 1)]


def test_ising_system_has_the_papers_spectrum():
    A, b = V.ising_linear_system(4, J=0.1, condition_number=10)
    ev = np.linalg.eigvalsh(A.to_dense(4).numpy())
    assert abs(ev.max() - 1) < 1e-12 and abs(ev.min() - 0.1) < 1e-12
    # A ∝ Σ X_j + 0.1 Σ Z_j Z_{j+1} + η I: ratios of coefficients are fixed by the paper
    ising = sum(O.pauli_matrix("I" * j + "X" + "I" * (3 - j)) for j in range(4))
    ising = ising + 0.1 * sum(O.pauli_matrix("I" * j + "ZZ" + "I" * (2 - j)) for j in range(3))
    e = np.linalg.eigvalsh(ising)
    eta = (e.max() - 10 * e.min()) / 9
    np.testing.assert_allclose(A.to_dense(4).numpy(), (ising + eta * np.eye(16)) / (e.max() + eta), atol=1e-12)
    np.testing.assert_allclose(b().numpy()[0], np.full(16, 0.25), atol=1e-12)


# ------------------------------------------------------------------------------------------------
# training
@pytest.mark.parametrize("cost", V.COSTS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tutorial_problem_reaches_the_classical_solution(cost, seed):
    a = dense(TUTORIAL)
    b_np = np.full(8, 8 ** -0.5)
    x_true = np.linalg.solve(a, b_np)
    res = V.vqls(hamiltonian(TUTORIAL), hadamards(3), cost=cost, steps=25, seed=seed)
    x = res.state.numpy()
    fid = abs(np.vdot(x_true, x)) ** 2 / np.vdot(x_true, x_true).real
    assert fid > 0.99 and abs(np.linalg.norm(x) - 1) < 1e-12
    # the rescaled solution is A⁻¹b itself, and the reported numbers agree with NumPy's
    np.testing.assert_allclose(res.solution.numpy(), x_true, atol=0.05 * np.linalg.norm(x_true))
    ax = a @ x
    assert abs(res.fidelity - abs(np.vdot(b_np, ax)) ** 2 / np.vdot(ax, ax).real) < 1e-10
    phase = np.vdot(b_np, ax) / abs(np.vdot(b_np, ax))
    assert abs(res.residual - np.linalg.norm(ax / np.linalg.norm(ax) - phase * b_np)) < 1e-7
    assert res.history[-1] < res.history[0] and res.cost == pytest.approx(res.history[-1], abs=1e-9)
    assert res.classical_solution is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ising_problem_reaches_the_classical_solution(seed):
    A, b = V.ising_linear_system(4)
    x_true = np.linalg.solve(A.to_dense(4).numpy(), np.full(16, 0.25))
    res = V.vqls(A, b, steps=30, seed=seed, classical=True)
    fid = abs(np.vdot(x_true, res.state.numpy())) ** 2 / np.vdot(x_true, x_true).real
    assert fid > 0.99
    assert abs(res.classical_fidelity - fid) < 1e-10
    np.testing.assert_allclose(res.classical_solution.numpy(), x_true, atol=1e-12)
    assert len(res.classical_fidelities) == len(res.history) == res.n_steps + 1


def test_training_runs_on_the_device(device):
    A, b = V.ising_linear_system(3)
    x_true = np.linalg.solve(A.to_dense(3).numpy(), np.full(8, 8 ** -0.5))
    res = V.vqls(A, b, steps=20, seed=1, device=device)
    assert res.state.device.type == torch.device(device).type and res.circuit.device.type == res.state.device.type
    fid = abs(np.vdot(x_true, res.state.cpu().numpy())) ** 2 / np.vdot(x_true, x_true).real
    assert fid > 0.99


def test_complex_problem_gets_a_complex_ansatz_and_solves_it():
    a = dense(COMPLEX)
    rng = np.random.default_rng(5)
    b_np = rng.normal(size=8) + 1j * rng.normal(size=8)
    b_np /= np.linalg.norm(b_np)
    x_true = np.linalg.solve(a, b_np)
    res = V.vqls(a, b_np, cost="global", steps=60, seed=0, depth=3)      # dense A, state-vector b
    assert "U3" in res.circuit.count_ops()
    fid = abs(np.vdot(x_true, res.state.numpy())) ** 2 / np.vdot(x_true, x_true).real
    assert fid > 0.99
    np.testing.assert_allclose(res.solution.numpy(), x_true, atol=0.1 * np.linalg.norm(x_true))


def test_given_ansatz_is_trained_in_place_and_stops():
    ansatz = tql.templates.hardware_efficient(tql.Circuit(3).double(), n_layers=2)
    before = ansatz.weights.detach().clone()
    res = V.vqls(hamiltonian(TUTORIAL), hadamards(3), ansatz=ansatz, steps=50, seed=None, tol=1e-6,
                 optimizer="adam", lr=0.1)
    assert res.circuit is ansatz and not torch.equal(before, ansatz.weights.detach())
    assert torch.equal(res.weights, ansatz.weights.detach())
    assert res.converged == (res.history[-1] < 1e-6) and len(res.history) == res.n_steps + 1
    seen = []
    res = V.vqls(hamiltonian(TUTORIAL), hadamards(3), steps=50, callback=lambda k, c, s: seen.append(k) or k == 3)
    assert seen == [0, 1, 2, 3] and res.n_steps == 3


# ------------------------------------------------------------------------------------------------
# gradients
@pytest.mark.parametrize("cost", V.COSTS)
def test_gradcheck_through_an_ansatz(cost):
    A = hamiltonian(COMPLEX)
    b, _ = b_circuit()
    F = tql.functional

    def loss(w):
        s = torch.zeros(2, 8, dtype=torch.complex128)
        s[:, 0] = 1
        for k in range(3):
            s = F.ry(s, w[k], wires=k)
        s = F.cz(s, wires=(0, 1))
        s = F.cnot(s, wires=(1, 2))
        for k in range(3):
            s = F.rx(s, w[3 + k], wires=k)
        s = s * torch.tensor([[1.0], [0.5j]], dtype=torch.complex128)   # a batch of two scales
        return V.vqls_cost(A, b, s, cost=cost)

    w = torch.tensor([0.3, -1.1, 0.8, 2.0, 0.4, -0.6], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(loss, (w,))


def test_gradcheck_in_the_state_with_a_vector_b():
    rng = np.random.default_rng(2)
    b_np = rng.normal(size=8) + 1j * rng.normal(size=8)
    x = torch.tensor(random_states(rng, 2), requires_grad=True)
    for cost in V.COSTS:
        assert torch.autograd.gradcheck(lambda s: V.vqls_cost(hamiltonian(COMPLEX), b_np, s, cost=cost), (x,))


# ------------------------------------------------------------------------------------------------
# singular A and bad input
def test_singular_a_gives_cost_one_not_nan():
    A = tql.Hamiltonian("1 + X0", n_wires=2)                 # eigenvalues 0, 2: singular
    b = hadamards(2)
    minus = torch.tensor([[1, 0, -1, 0], [0, 1, 0, -1]], dtype=torch.complex128, requires_grad=True)
    for cost in V.COSTS:
        value = V.vqls_cost(A, b, minus, cost=cost)
        assert torch.equal(value.detach(), torch.ones(2, dtype=torch.float64))
        value.sum().backward()
        assert torch.isfinite(minus.grad).all()
        minus.grad = None
    # |b⟩ = |++⟩ is in the range of A here: VQLS still solves it, without NaN, and the dense
    # reference is refused with a clear error
    res = V.vqls(A, b, steps=10, seed=0)
    assert np.isfinite(res.history).all() and res.fidelity > 0.99
    with pytest.raises(ValueError, match="A is singular"):
        V.vqls(A, b, steps=1, classical=True)


def test_bad_input_is_named():
    A, b = hamiltonian(TUTORIAL), hadamards(3)
    state = torch.ones(8, dtype=torch.complex128)
    with pytest.raises(ValueError, match="A is declared on 2 wires but b has 3"):
        V.vqls(tql.Hamiltonian("X0 + 1", n_wires=2), b)
    with pytest.raises(ValueError, match="A acts on wire 3 but b has only 3"):
        V.vqls_cost(tql.Hamiltonian("X3 + 1"), b, state)
    with pytest.raises(ValueError, match="A is a 4 x 4 matrix but b has 3 qubits"):
        V.vqls(np.eye(4), b)
    with pytest.raises(ValueError, match="A as a matrix must be square"):
        V.vqls(np.ones((8, 4)), b)
    with pytest.raises(ValueError, match="A has no terms"):
        V.vqls(tql.Hamiltonian([]), b)
    with pytest.raises(ValueError, match="A is the zero operator"):
        V.vqls(tql.Hamiltonian("X0 - X0"), b)
    with pytest.raises(TypeError, match="A must be a tql.Hamiltonian"):
        V.vqls(5, b)
    with pytest.raises(ValueError, match="the ansatz has 2 wires but b has 3"):
        V.vqls(A, b, ansatz=tql.templates.hardware_efficient(2, n_layers=1))
    with pytest.raises(ValueError, match="the ansatz has no trainable weights"):
        V.vqls(A, b, ansatz=tql.Circuit(3).h(0))
    with pytest.raises(ValueError, match="the ansatz reads 1 input"):
        V.vqls(A, b, ansatz=tql.Circuit(3).ry(0, input=0).rx(1, trainable=True))
    with pytest.raises(TypeError, match="ansatz must be a tql.Circuit"):
        V.vqls(A, b, ansatz="RY")
    for bad in ("Local", "both"):
        with pytest.raises(ValueError, match="cost must be 'local' or 'global'"):
            V.vqls(A, b, cost=bad)
        with pytest.raises(ValueError, match="cost must be 'local' or 'global'"):
            V.vqls_cost(A, b, state, cost=bad)
    with pytest.raises(ValueError, match="state has length 4 but b has 3 qubits"):
        V.vqls_cost(A, b, torch.ones(4, dtype=torch.complex128))
    with pytest.raises(TypeError, match="state must be complex64 or complex128"):
        V.vqls_cost(A, b, torch.ones(8))
    with pytest.raises(ValueError, match="b is the zero vector"):
        V.vqls(A, np.zeros(8))
    with pytest.raises(ValueError, match="b has length 6, not a power of two"):
        V.vqls(A, np.ones(6))
    with pytest.raises(ValueError, match="b contains NaN"):
        V.vqls(A, np.array([1, np.nan, 0, 0, 0, 0, 0, 0]))
    with pytest.raises(TypeError, match="b must be a tql.Circuit or a"):
        V.vqls(A, "b")
    with pytest.raises(ValueError, match="the circuit b reads 1 input"):
        V.vqls(A, tql.Circuit(3).ry(0, input=0))
    with pytest.raises(ValueError, match="steps must be an int >= 0"):
        V.vqls(A, b, steps=-1)
    with pytest.raises(ValueError, match="tol must be a number >= 0"):
        V.vqls(A, b, tol=-1e-3)
    with pytest.raises(TypeError, match="seed must be an int or None"):
        V.vqls(A, b, seed=0.5)
    with pytest.raises(TypeError, match="dtype must be complex64 or complex128"):
        V.vqls(A, b, dtype=torch.float64)
    with pytest.raises(TypeError, match="callback must be callable"):
        V.vqls(A, b, callback=3)
    with pytest.raises(ValueError, match="depth must be a positive int"):
        V.vqls(A, b, depth=0)
    with pytest.raises(ValueError, match="pauli_decompose: matrix size 6 is not a power of two"):
        V.pauli_decompose(np.eye(6))
    with pytest.raises(ValueError, match="pauli_decompose: matrix contains NaN"):
        V.pauli_decompose(np.full((2, 2), np.inf))
    with pytest.raises(ValueError, match="condition_number must be a finite number > 1"):
        V.ising_linear_system(3, condition_number=1)
