"""Clifford data regression (tql.mixed.cdr) against dense NumPy oracles.

Oracles, none of them the code under test: ideal and noisy expectations from dense 2^n × 2^n gate
matrices (tests/oracle.py) and depolarizing Kraus operators written here from the textbook
definition; the f-scaling of global depolarizing noise checked on that simulation against its
closed form; Clifford-ness of a gate by conjugating every Pauli string with its dense matrix; the
fit against ``numpy.polyfit`` / ``numpy.linalg.lstsq`` on the same (noisy, ideal) pairs.
"""
import itertools

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed

from . import oracle as O
from .conftest import REAL

PAULI = O.PAULI
TOL = {torch.complex64: 2e-4, torch.complex128: 1e-10}


def _labels(k):
    return ["".join(t) for t in itertools.product("IXYZ", repeat=k)]


def kraus_depolarizing(p, k):
    """√(1−p) I and √(p / (4^k − 1)) P for the other Pauli strings P on k wires."""
    m = 4 ** k - 1
    return [np.sqrt(1 - p if lab == "I" * k else p / m) * O.pauli_matrix(lab) for lab in _labels(k)]


def dense(label_by_wire, n):
    return O.kron(*(PAULI[label_by_wire.get(w, "I")] for w in range(n)))


def is_clifford(u):
    """U P U† = ± a Pauli string for every Pauli string P (dense check)."""
    d = u.shape[0]
    k = int(round(np.log2(d)))
    strings = [O.pauli_matrix(lab) for lab in _labels(k)]
    for p in strings[1:]:
        m = u @ p @ u.conj().T
        if not any(np.allclose(m, q, atol=1e-9) or np.allclose(m, -q, atol=1e-9) for q in strings[1:]):
            return False
    return True


def angle_of(a, x_row, weights):
    if isinstance(a, tql.circuit.Input):
        return a.scale * float(x_row[a.column])
    if isinstance(a, tql.circuit.Param):
        return a.scale * float(weights[a.index])
    return float(a)


def op_matrix(circuit, op, x_row):
    w = circuit.weights.detach().double().numpy()
    if op.gate.name == "QUBITUNITARY":
        return circuit.data(op).detach().cpu().numpy().astype(np.complex128)
    return O.gate_matrix(op.gate.name, *(angle_of(a, x_row, w) for a in op.angles), n_wires=len(op.wires))


def oracle(circuit, x_rows, observables, noise=()):
    """Tr(O ρ) per row: dense ρ → U ρ U†, then for each (Kraus list, k, gate names) whose gate
    matches, the Kraus map (a one-wire map on each wire of the gate, a k-wire one on its wires)."""
    n = circuit.n_wires
    out = []
    for row in x_rows:
        rho = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
        rho[0, 0] = 1
        for op in circuit.ops:
            u = O.full_operator(op_matrix(circuit, op, row), op.wires, n)
            rho = u @ rho @ u.conj().T
            for kraus, k, gates in noise:
                if op.gate.name not in gates:
                    continue
                for t in ([(w,) for w in op.wires] if k == 1 else [tuple(op.wires)]):
                    ks = [O.full_operator(kk, t, n) for kk in kraus]
                    rho = sum(kk @ rho @ kk.conj().T for kk in ks)
        out.append([np.trace(o @ rho).real for o in observables])
    return np.array(out)


def random_rotations(n, seed, dtype=torch.complex128, layers=2, inputs=False):
    """RY/RZ/RX/P/U3 at random angles (RX from x when ``inputs``) and a CNOT chain per layer."""
    rng = np.random.default_rng(seed)
    c = tql.Circuit(n, dtype=dtype)
    for layer in range(layers):
        for w in range(n):
            if inputs and layer == 0:
                c.rx(w, input=w)
            c.ry(w, float(rng.uniform(-np.pi, np.pi)))
            c.rz(w, float(rng.uniform(-np.pi, np.pi)))
        c.u3(0, *(float(v) for v in rng.uniform(-np.pi, np.pi, 3)))
        c.p(n - 1, float(rng.uniform(-np.pi, np.pi)))
        for w in range(n - 1):
            c.cnot(w, w + 1)
    return c


# ------------------------------------------------------------------------------------------------
# (1) global depolarizing noise: every traceless <O> scales by one factor, which CDR undoes exactly
@pytest.mark.parametrize("fit", ["linear", "proportional"])
def test_cdr_is_exact_under_global_depolarizing_noise_on_two_wires(dtype, fit):
    n, p = 2, 0.12
    c = random_rotations(n, seed=3, dtype=dtype, inputs=True)
    x_np = np.random.default_rng(0).uniform(-np.pi, np.pi, (3, n))
    x = torch.as_tensor(x_np, dtype=REAL[dtype])
    traceless = [{0: "Z"}, {0: "X", 1: "X"}, {1: "Y"}]
    obs = ["Z0", "X0 X1", "Y1"]
    mats = [dense(t, n) for t in traceless]
    if fit == "linear":           # an identity term: noisy = f·(ideal − c) + c, still a line
        obs.append(tql.Hamiltonian([(0.5, "Z0 Z1"), (0.3, "X1"), (0.25, "")]))
        mats.append(0.5 * dense({0: "Z", 1: "Z"}, n) + 0.3 * dense({1: "X"}, n) + 0.25 * np.eye(4))
    # on two wires a two-wire depolarizing channel after each CNOT is global depolarizing noise
    model = tql.NoiseModel().add(mixed.depolarizing(p, 2), gates="CNOT")
    ideal = oracle(c, x_np, mats)
    noisy = oracle(c, x_np, mats, [(kraus_depolarizing(p, 2), 2, {"CNOT"})])
    f = (1 - p * 16 / 15) ** sum(op.gate.name == "CNOT" for op in c.ops)
    np.testing.assert_allclose(noisy[:, :3], f * ideal[:, :3], atol=1e-12)       # the oracle's own check
    got_noisy = mixed.expval(c, obs, x=x, noise_model=model).detach().double().numpy()
    np.testing.assert_allclose(got_noisy, noisy, atol=TOL[dtype])
    assert np.abs(noisy - ideal).max() > 0.05
    value, info = mixed.cdr_expval(c, obs, model, n_training=6, fit=fit, x=x,
                                   generator=torch.Generator().manual_seed(1), return_fit=True)
    assert value.shape == (3, len(obs)) and value.dtype == REAL[dtype]
    np.testing.assert_allclose(value.detach().double().numpy(), ideal, atol=TOL[dtype])
    np.testing.assert_allclose(info.slope[:, :3].double().numpy(), 1 / f, rtol=1e-4 if dtype == torch.complex64
                               else 1e-9)


def test_cdr_is_exact_under_global_depolarizing_noise_applied_once(dtype):
    """Three wires: a three-wire depolarizing channel after a final identity on all wires."""
    n, p = 3, 0.3
    c = random_rotations(n, seed=7, dtype=dtype)
    c.add("QUBITUNITARY", [0, 1, 2], matrix=np.eye(8))
    model = tql.NoiseModel().add(mixed.depolarizing(p, 3), gates="QUBITUNITARY")
    mats = [dense({0: "Z", 2: "Z"}, n), dense({1: "X"}, n), dense({0: "Y", 1: "Z", 2: "X"}, n)]
    ideal = oracle(c, [None], mats)
    noisy = oracle(c, [None], mats, [(kraus_depolarizing(p, 3), 3, {"QUBITUNITARY"})])
    np.testing.assert_allclose(noisy, (1 - p * 64 / 63) * ideal, atol=1e-12)
    obs = ["Z0 Z2", "X1", "Y0 Z1 X2"]
    value = mixed.cdr_expval(c, obs, model, n_training=8, generator=torch.Generator().manual_seed(2))
    assert value.shape == (1, 3)
    np.testing.assert_allclose(value.detach().double().numpy(), ideal, atol=TOL[dtype])
    # one observable gives (B,), as mixed.expval
    one = mixed.cdr_expval(c, "X1", model, n_training=8, generator=torch.Generator().manual_seed(2))
    assert one.shape == (1,)
    np.testing.assert_allclose(one.detach().double().numpy(), ideal[:, 1], atol=TOL[dtype])


def test_cdr_gradient_under_global_depolarizing_noise_is_the_ideal_gradient():
    """The fit (1/f) is held fixed, so the gradient is (1/f)·∂noisy = ∂ideal."""
    n, p = 2, 0.1
    c = tql.Circuit(n).double()
    c.ry(0, trainable=True)
    c.rx(1, trainable=True)
    c.cnot(0, 1)
    c.rz(1, trainable=True)
    c.ry(0, 0.4)
    c.cnot(1, 0)
    with torch.no_grad():
        c.weights.copy_(torch.tensor([0.7, -1.3, 0.9], dtype=torch.float64))
    model = tql.NoiseModel().add(mixed.depolarizing(p, 2), gates="CNOT")
    mat = [dense({0: "Z", 1: "Z"}, n) + 0.5 * dense({0: "X"}, n)]
    value = mixed.cdr_expval(c, tql.Hamiltonian([(1.0, "Z0 Z1"), (0.5, "X0")]), model, n_training=8,
                             fit="proportional", generator=torch.Generator().manual_seed(0)).sum()
    grad, = torch.autograd.grad(value, c.weights)
    w0 = c.weights.detach().clone()
    fd = []
    for i in range(3):
        vals = []
        for s in (1e-6, -1e-6):
            with torch.no_grad():
                c.weights.copy_(w0)
                c.weights[i] += s
            vals.append(oracle(c, [None], mat)[0, 0])
        fd.append((vals[0] - vals[1]) / 2e-6)
    np.testing.assert_allclose(grad.numpy(), fd, atol=1e-7)


# ------------------------------------------------------------------------------------------------
# (2) the training circuits
def mixed_circuit(dtype=torch.complex128):
    c = tql.Circuit(3, dtype=dtype)
    c.h(0).cnot(0, 1).s(2)
    c.rz(1, np.pi / 2)                 # a rotation at a Clifford angle: not replaced
    c.rx(0, 0.3)
    c.ry(1, input=0)                   # per-sample
    c.u3(2, 0.1, 0.2, 2.3)
    c.add("RZZ", [0, 2], 0.7)
    c.t(1)                             # no angle grid: kept
    c.add("CRX", [0, 1], 0.4)               # no angle grid: kept
    c.p(0, 1.1)
    c.ry(2, trainable=True)
    c.cnot(1, 2)
    with torch.no_grad():
        c.weights.fill_(-0.8)
    return c


ROTATION_POSITIONS = (4, 5, 6, 7, 10, 11)     # RX, RY(x), U3, RZZ, P, RY(w): the non-Clifford rotations


def test_training_circuits_replace_rotations_by_cliffords():
    c = mixed_circuit()
    x = torch.tensor([[0.9], [-2.2]], dtype=torch.float64)
    train = mixed.near_clifford_circuits(c, 12, fraction_non_clifford=0.3, generator=torch.Generator().manual_seed(5),
                                         x=x)
    assert train.positions == ROTATION_POSITIONS
    n_keep = round(0.3 * 6)          # 1.8 → 2
    assert train.kept.shape == (12, 6) and (train.kept.sum(1) == n_keep).all()
    for row in range(2):
        x_row = x[row].numpy()
        for t, tc in enumerate(train.circuits(row)):
            assert len(tc.ops) == len(c.ops)
            n_non_clifford = 0
            for i, (a, b) in enumerate(zip(c.ops, tc.ops)):
                assert b.gate is a.gate and b.wires == a.wires and b.adjoint == a.adjoint
                if i not in ROTATION_POSITIONS:
                    assert b == a                        # Clifford gates, T and CRX unchanged
                    continue
                u = op_matrix(tc, b, x_row)
                if b == a:
                    assert train.kept[t, ROTATION_POSITIONS.index(i)]
                    assert not is_clifford(u)
                    n_non_clifford += 1
                else:
                    assert not train.kept[t, ROTATION_POSITIONS.index(i)]
                    assert is_clifford(u), (i, b)
                    assert all(abs(v / (np.pi / 2) - round(v / (np.pi / 2))) < 1e-12 for v in b.angles)
            assert n_non_clifford == n_keep
    # the rows draw their own Clifford angles for the per-sample RY, the kept gates are shared
    again = mixed.near_clifford_circuits(c, 12, fraction_non_clifford=0.3, generator=torch.Generator().manual_seed(5),
                                         x=x)
    assert torch.equal(again.angles, train.angles) and torch.equal(again.kept, train.kept)
    other = mixed.near_clifford_circuits(c, 12, fraction_non_clifford=0.3, generator=torch.Generator().manual_seed(6),
                                         x=x)
    assert not (torch.equal(other.angles, train.angles) and torch.equal(other.kept, train.kept))


@pytest.mark.parametrize("fraction, keep", [(0.0, 0), (1.0, 6), (0.5, 3)])
def test_training_circuits_keep_the_requested_count(fraction, keep):
    c = mixed_circuit()
    x = torch.tensor([[0.9]], dtype=torch.float64)
    train = mixed.near_clifford_circuits(c, 5, fraction_non_clifford=fraction, replacement="nearest",
                                         generator=torch.Generator().manual_seed(0), x=x)
    assert (train.kept.sum(1) == keep).all()
    for tc in train.circuits(0):
        for i in ROTATION_POSITIONS:
            op = tc.ops[i]
            if op != c.ops[i]:          # nearest: the closest multiple of π/2 to each angle
                orig = [angle_of(a, x[0].numpy(), c.weights.detach().numpy()) for a in c.ops[i].angles]
                assert list(op.angles) == [float(np.round(v / (np.pi / 2)) * np.pi / 2) for v in orig]


def test_training_values_are_those_of_the_training_circuits(dtype):
    """The batched training rows of cdr_expval against the dense simulation of each training circuit."""
    c = mixed_circuit(dtype)
    x_np = np.array([[0.9], [-2.2]])
    x = torch.as_tensor(x_np, dtype=REAL[dtype])
    p = 0.05
    model = tql.NoiseModel().add(mixed.depolarizing(p), gates=["CNOT", "CRX"])
    obs, mats = ["Z0 Z1", "X2"], [dense({0: "Z", 1: "Z"}, 3), dense({2: "X"}, 3)]
    _, info = mixed.cdr_expval(c, obs, model, n_training=4, x=x, generator=torch.Generator().manual_seed(9),
                               return_fit=True)
    assert info.training_ideal.shape == (4, 2, 2)
    noise = [(kraus_depolarizing(p, 1), 1, {"CNOT", "CRX"})]
    for row in range(2):
        for t, tc in enumerate(info.training.circuits(row)):
            want_ideal = oracle(tc, x_np[row:row + 1], mats)[0]
            want_noisy = oracle(tc, x_np[row:row + 1], mats, noise)[0]
            np.testing.assert_allclose(info.training_ideal[t, row].double().numpy(), want_ideal, atol=TOL[dtype])
            np.testing.assert_allclose(info.training_noisy[t, row].double().numpy(), want_noisy, atol=TOL[dtype])


# ------------------------------------------------------------------------------------------------
# (3) local depolarizing noise after CNOTs: CDR reduces the error on average
def layered(n, seed, layers=3):
    rng = np.random.default_rng(seed)
    c = tql.Circuit(n).double()
    for _ in range(layers):
        for w in range(n):
            c.ry(w, float(rng.uniform(-np.pi, np.pi)))
            c.rz(w, float(rng.uniform(-np.pi, np.pi)))
        for w in range(n - 1):
            c.cnot(w, w + 1)
    return c


def test_cdr_reduces_the_error_of_local_depolarizing_noise():
    n, p = 4, 0.03
    model = tql.NoiseModel().add(mixed.depolarizing(p), gates="CNOT")
    obs = ["Z0 Z1", "Z2", "X3", "Y1 Y2"]
    mats = [dense({0: "Z", 1: "Z"}, n), dense({2: "Z"}, n), dense({3: "X"}, n), dense({1: "Y", 2: "Y"}, n)]
    noise = [(kraus_depolarizing(p, 1), 1, {"CNOT"})]
    err_noisy, err_cdr = [], []
    for seed in range(5):
        c = layered(n, seed)
        ideal = oracle(c, [None], mats)[0]
        noisy = oracle(c, [None], mats, noise)[0]
        value = mixed.cdr_expval(c, obs, model, generator=torch.Generator().manual_seed(seed))[0].numpy()
        err_noisy.append(np.abs(noisy - ideal))
        err_cdr.append(np.abs(value - ideal))
    # measured with the defaults (16 training circuits, a quarter of the rotations kept) over twelve
    # groups of five circuits and two generator seeds: the ratio was 0.07-0.22
    assert np.mean(err_cdr) <= 0.5 * np.mean(err_noisy), (np.mean(err_cdr), np.mean(err_noisy))


# ------------------------------------------------------------------------------------------------
# (4) the fit is least squares
def test_linear_and_proportional_fits_are_least_squares():
    c = layered(3, 11, layers=2)
    model = tql.NoiseModel().add(mixed.depolarizing(0.05), gates="CNOT").add(mixed.amplitude_damping(0.04))
    obs = ["Z0", "X1 X2", "Y0 Z2"]
    for fit in ("linear", "proportional"):
        value, info = mixed.cdr_expval(c, obs, model, n_training=10, fit=fit,
                                       generator=torch.Generator().manual_seed(4), return_fit=True)
        xs, ys = info.training_noisy.numpy(), info.training_ideal.numpy()        # (T, 1, 3)
        noisy = info.noisy.detach().numpy()
        for j in range(3):
            if fit == "linear":
                a, b = np.polyfit(xs[:, 0, j], ys[:, 0, j], 1)
            else:
                a, b = np.linalg.lstsq(xs[:, 0, j:j + 1], ys[:, 0, j], rcond=None)[0][0], 0.0
            assert np.std(xs[:, 0, j]) > 1e-3
            np.testing.assert_allclose(info.slope[0, j].item(), a, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(info.intercept[0, j].item(), b, atol=1e-12)
            np.testing.assert_allclose(value[0, j].item(), a * noisy[0, j] + b, atol=1e-12)


def test_trajectories_simulator_is_close_to_the_density_one():
    n, p = 2, 0.12
    c = random_rotations(n, seed=3)
    model = tql.NoiseModel().add(mixed.depolarizing(p, 2), gates="CNOT")
    ideal = oracle(c, [None], [dense({0: "Z", 1: "Z"}, n)])[0, 0]
    value = mixed.cdr_expval(c, "Z0 Z1", model, n_training=8, simulator="trajectories", n_trajectories=400,
                             generator=torch.Generator().manual_seed(0))
    assert abs(value.item() - ideal) < 0.1


# ------------------------------------------------------------------------------------------------
# (5) bad input
@pytest.fixture
def case():
    c = layered(2, 0, layers=1)
    return c, tql.NoiseModel().add(mixed.depolarizing(0.05), gates="CNOT")


def test_too_few_training_circuits(case):
    c, model = case
    with pytest.raises(ValueError, match="n_training must be an int >= 2"):
        mixed.cdr_expval(c, "Z0", model, n_training=1)


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan")])
def test_fraction_outside_the_unit_interval(case, fraction):
    c, model = case
    with pytest.raises(ValueError, match="fraction_non_clifford"):
        mixed.cdr_expval(c, "Z0", model, fraction_non_clifford=fraction)


def test_unknown_fit(case):
    c, model = case
    with pytest.raises(ValueError, match="fit must be one of"):
        mixed.cdr_expval(c, "Z0", model, fit="quadratic")


def test_circuit_without_non_clifford_rotations_is_refused(case):
    _, model = case
    c = tql.Circuit(2).double()
    c.h(0).cnot(0, 1).rz(1, np.pi / 2).t(0)          # T has no angle grid: nothing to replace
    with pytest.raises(ValueError, match="no non-Clifford rotation"):
        mixed.cdr_expval(c, "Z0", model)
    with pytest.raises(ValueError, match="no non-Clifford rotation"):
        mixed.near_clifford_circuits(c, 4)


def test_no_noise_model(case):
    c, _ = case
    with pytest.raises(ValueError, match="no noise_model"):
        mixed.cdr_expval(c, "Z0", None)


def test_generator_must_be_a_generator(case):
    c, model = case
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        mixed.cdr_expval(c, "Z0", model, generator=3)
