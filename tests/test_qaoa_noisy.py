"""QAOA on a noisy device: tql.optimization.noisy (NoisyQAOA) and QAOATask(noise_model=...).

Oracles written here (NumPy only, nothing of the library): brute-force cost vectors over
bitstrings; the pure QAOA state from the diagonal exp(-iγC) and ⊗RX(2β) built by Kronecker
products; a dense density-matrix simulation of the gate sequence that qaoa_circuit documents (H on
every wire, per layer RZ(2γh_i), RZZ(2γJ_ij) for i < j in row order, RX(2β) on every wire) with
the noise channels written as Kraus maps after the gates a noise spec names (depolarizing:
(1-p)ρ + p/3 ΣPρP; bit flip: (1-p)ρ + pXρX), global folding as C (C†C)^k with the noise after
every gate, Richardson extrapolation as numpy.polyfit, and readout errors as Kronecker products of
the 2×2 confusion matrices [[1-p01, p10], [p01, 1-p10]] on the probabilities.
"""
import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed
from torchquantum_layers import optimization as opt
from torchquantum_layers.optimization.noisy import (MAX_DENSITY_QUBITS, NoisyQAOA, noisy_expected_cost,
                                                    noisy_probabilities)

from . import oracle as O

pl = pytest.importorskip("pytorch_lightning")

from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402

from lightning_tasks.qaoa import QAOATask  # noqa: E402

PADDLE = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]
REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------------------------------------
# independent references
def all_bits(n):
    return np.array(list(itertools.product([0, 1], repeat=n)))          # index order, wire 0 first


def maxcut_ising(edges, n):
    """(h, J upper triangular, offset) with -cut = offset + Σ_{i<j} J_ij z_i z_j (z = 1 - 2x)."""
    J = np.zeros((n, n))
    for u, v in edges:
        J[min(u, v), max(u, v)] += 0.5
    return np.zeros(n), J, -len(edges) / 2


def ising_costs(h, J, offset):
    z = 1 - 2 * all_bits(len(h))
    return offset + z @ h + np.einsum("bi,ij,bj->b", z, J, z)


def brute_force_cut_costs(edges, n):
    bits = all_bits(n)
    return -np.array([sum(b[u] != b[v] for u, v in edges) for b in bits], dtype=float)


def pure_qaoa_state(costs, angles):
    """exp(-iβ_p ΣX) exp(-iγ_p C) … |+⟩^n, the mixer as the Kronecker product of RX(2β)."""
    N = costs.size
    n = int(round(math.log2(N)))
    p = len(angles) // 2
    psi = np.full(N, 1 / math.sqrt(N), dtype=complex)
    for g, b in zip(angles[:p], angles[p:]):
        psi = O.kron(*[O.rx(2 * b)] * n) @ (np.exp(-1j * g * costs) * psi)
    return psi


def gate_sequence(h, J, angles):
    """[(name, wires, matrix)] of the gate-level QAOA (module notes)."""
    n, p = len(h), len(angles) // 2
    ops = [("H", (w,), O.H) for w in range(n)]
    for g, b in zip(angles[:p], angles[p:]):
        ops += [("RZ", (i,), O.rz(2 * g * h[i])) for i in range(n) if h[i] != 0]
        ops += [("RZZ", (i, j), O.pauli_rotation(2 * g * J[i, j], "ZZ"))
                for i in range(n) for j in range(i + 1, n) if J[i, j] != 0]
        ops += [("RX", (w,), O.rx(2 * b)) for w in range(n)]
    return ops


def depolarizing_kraus(p):
    return [math.sqrt(1 - p) * O.I2] + [math.sqrt(p / 3) * P for P in (O.X, O.Y, O.Z)]


def bit_flip_kraus(p):
    return [math.sqrt(1 - p) * O.I2, math.sqrt(p) * O.X]


def global_fold(ops, k):
    back = [(name, wires, u.conj().T) for name, wires, u in reversed(ops)]
    return list(ops) + (back + list(ops)) * k


def dense_density(ops, n, noise):
    """ρ after ``ops`` from |0…0⟩⟨0…0|, each one-wire Kraus map of noise[name] applied to every
    wire of each gate of that name right after it."""
    rho = np.zeros((2 ** n, 2 ** n), dtype=complex)
    rho[0, 0] = 1
    for name, wires, u in ops:
        U = O.full_operator(u, wires, n)
        rho = U @ rho @ U.conj().T
        for kraus in noise.get(name, ()):
            for q in wires:
                Ks = [O.full_operator(K, [q], n) for K in kraus]
                rho = sum(K @ rho @ K.conj().T for K in Ks)
    return rho


def confusion(n, p01, p10):
    A = np.array([[1 - p01, p10], [p01, 1 - p10]])
    return O.kron(*[A] * n).real


def dense_reported(h, J, offset, angles, noise, readout=None, fold=0):
    """(cost as read out, probabilities as read out) of one start."""
    n = len(h)
    rho = dense_density(global_fold(gate_sequence(h, J, angles), fold), n, noise)
    probs = np.diag(rho).real
    if readout is not None:
        probs = confusion(n, *readout) @ probs
    return float(probs @ ising_costs(h, J, offset)), probs


def richardson(values, scales=(1, 3, 5)):
    return float(np.polyval(np.polyfit(scales, values, len(scales) - 1), 0.0))


def depolarizing_spec(p, gates, readout=None):
    spec = {"channels": [{"channel": "depolarizing", "p": p, "gates": list(gates)}]}
    if readout is not None:
        spec["readout"] = {"p01": readout[0], "p10": readout[1]}
    return spec


def starts(p, S, seed=0):
    return opt.perturb(opt.linear_ramp(p), S, 0.2, torch.Generator().manual_seed(seed)).to(torch.float64)


# ------------------------------------------------------------------------------------------------
# the library
def test_oracle_circuit_is_the_qaoa_state():
    """The gate sequence of the oracle (no noise) is the textbook QAOA state up to a global phase."""
    h, J, c = np.array([0.3, -0.5, 0.0]), np.array([[0, 0.7, -0.2], [0, 0, 0.4], [0, 0, 0]]), 0.25
    angles = [0.4, -0.3, 0.6, 0.2]
    rho = dense_density(gate_sequence(h, J, angles), 3, {})
    psi = pure_qaoa_state(ising_costs(h, J, c), angles)
    np.testing.assert_allclose(rho, np.outer(psi, psi.conj()), atol=1e-12)


def test_zero_noise_equals_the_noiseless_engine(dtype, atol):
    problem = opt.maxcut(PADDLE)
    angles = starts(2, 5).to(REAL[dtype])
    zero = tql.NoiseModel().add(mixed.depolarizing(0.0), gates=["RZZ", "RX"])
    noisy = NoisyQAOA(problem, 2, zero, dtype=dtype)(angles)
    engine = opt.qaoa(problem, 2, dtype=dtype)(angles)
    assert noisy.shape == (5,) and noisy.dtype == REAL[dtype]
    torch.testing.assert_close(noisy, engine, atol=atol * 10, rtol=0)
    costs = brute_force_cut_costs(PADDLE, 4)
    want = [float(np.abs(pure_qaoa_state(costs, a.tolist())) ** 2 @ costs) for a in angles.double()]
    np.testing.assert_allclose(noisy.double().numpy(), want, atol=atol * 10)


def test_noisy_costs_and_distribution_match_numpy_densities(dtype, atol):
    """Depolarizing after RZZ and RZ, bit flips after RX, readout flips, on an Ising problem with
    fields and an offset: every start of the batch against the dense oracle."""
    h, J, c = np.array([0.3, -0.5, 0.0]), np.array([[0, 0.7, -0.2], [0, 0, 0.4], [0, 0, 0]]), 0.25
    problem = opt.from_ising(h.tolist(), J.tolist(), c)
    np.testing.assert_allclose(problem.diagonal.numpy(), ising_costs(h, J, c), atol=1e-12)   # same cost
    model = (tql.NoiseModel().add(mixed.depolarizing(0.04), gates=["RZZ", "RZ"]).add(mixed.bit_flip(0.03), gates="RX")
             .add_readout_error(0.02, 0.05))
    noise = {"RZZ": [depolarizing_kraus(0.04)], "RZ": [depolarizing_kraus(0.04)], "RX": [bit_flip_kraus(0.03)]}
    angles = starts(2, 3).to(REAL[dtype])
    module = NoisyQAOA(problem, 2, model, dtype=dtype)
    got = module(angles)
    probs = module.probabilities(angles)
    for s, a in enumerate(angles.double().tolist()):
        cost, prob = dense_reported(h, J, c, a, noise, readout=(0.02, 0.05))
        assert float(got[s]) == pytest.approx(cost, abs=atol * 10)
        np.testing.assert_allclose(probs[s].double().numpy(), prob, atol=atol)
    # the functional forms are the same computation
    torch.testing.assert_close(noisy_expected_cost(problem, angles, noise_model=model), got)
    torch.testing.assert_close(noisy_probabilities(problem, angles, noise_model=model), probs)
    assert float(module(angles[0])) == pytest.approx(float(got[0]), abs=1e-6)     # one start (2p,) -> 0-d


def test_noise_moves_the_cost_toward_the_maximally_mixed_value():
    problem = opt.maxcut(PADDLE)
    costs = brute_force_cut_costs(PADDLE, 4)
    mixed_value = costs.mean()                                   # Tr(C) / 2^n: -2.5
    angles = starts(2, 4)
    gaps = []
    for p in (0.0, 0.02, 0.1, 0.3):
        model = tql.NoiseModel().add(mixed.depolarizing(p), gates="RZZ")
        gaps.append((NoisyQAOA(problem, 2, model, dtype=torch.complex128)(angles) - mixed_value).abs())
    for weaker, stronger in zip(gaps, gaps[1:]):
        assert torch.all(stronger < weaker - 1e-3)
    # p = 3/4 after the last RX on every wire leaves I/2 there: the maximally mixed state exactly
    full = tql.NoiseModel().add(mixed.depolarizing(0.75), gates="RX")
    torch.testing.assert_close(NoisyQAOA(problem, 2, full, dtype=torch.complex128)(angles),
                               torch.full((4,), mixed_value, dtype=torch.float64), atol=1e-12, rtol=0)


def test_readout_mitigation_recovers_the_pre_readout_values(dtype, atol):
    problem = opt.maxcut(PADDLE)
    angles = starts(2, 3).to(REAL[dtype])
    gates_only = tql.NoiseModel().add(mixed.depolarizing(0.03), gates="RZZ")
    with_readout = tql.NoiseModel().add(mixed.depolarizing(0.03), gates="RZZ").add_readout_error(0.04, 0.09)
    before = NoisyQAOA(problem, 2, gates_only, dtype=dtype)
    read = NoisyQAOA(problem, 2, with_readout, dtype=dtype)
    mitigated = NoisyQAOA(problem, 2, with_readout, mitigation="readout", dtype=dtype)
    assert torch.all((read(angles) - before(angles)).abs() > 0.05)          # the flips move the cost
    torch.testing.assert_close(mitigated(angles), before(angles), atol=atol * 10, rtol=0)
    torch.testing.assert_close(read.probabilities(angles, mitigation="readout"), before.probabilities(angles),
                               atol=atol, rtol=0)
    # the read-out distribution is the confusion matrices applied to the pre-readout one
    A = torch.as_tensor(confusion(4, 0.04, 0.09), dtype=REAL[dtype])
    torch.testing.assert_close(read.probabilities(angles), before.probabilities(angles) @ A.T, atol=atol, rtol=0)


def test_zne_is_richardson_over_folded_numpy_densities_and_reduces_the_error(dtype, atol):
    h, J, c = maxcut_ising(PADDLE, 4)
    problem = opt.maxcut(PADDLE)
    readout = (0.02, 0.04)
    model = tql.NoiseModel().add(mixed.depolarizing(0.01), gates="RZZ").add_readout_error(*readout)
    noise = {"RZZ": [depolarizing_kraus(0.01)]}
    angles = starts(2, 3).to(REAL[dtype])
    zne = NoisyQAOA(problem, 2, model, mitigation="zne", dtype=dtype)(angles)
    both = NoisyQAOA(problem, 2, model, mitigation="zne+readout", dtype=dtype)(angles)
    raw = NoisyQAOA(problem, 2, model, dtype=dtype)(angles)
    ideal = opt.qaoa(problem, 2, dtype=torch.complex128)(angles.double())
    costs = brute_force_cut_costs(PADDLE, 4)
    for s, a in enumerate(angles.double().tolist()):
        folded = [dense_reported(h, J, c, a, noise, readout, fold=k)[0] for k in (0, 1, 2)]
        assert float(zne[s]) == pytest.approx(richardson(folded), abs=atol * 50)
        # with readout mitigation every folded value is the pre-readout one
        pre = [dense_reported(h, J, c, a, noise, None, fold=k)[0] for k in (0, 1, 2)]
        assert float(both[s]) == pytest.approx(richardson(pre), abs=atol * 50)
        exact = float(np.abs(pure_qaoa_state(costs, a)) ** 2 @ costs)
        assert float(ideal[s]) == pytest.approx(exact, abs=1e-10)
        # the verified margin: ZNE + readout mitigation cuts the error at least tenfold here
        assert abs(richardson(pre) - exact) < abs(folded[0] - exact) / 10
    assert torch.all((both - ideal.to(both)).abs() < (raw - ideal.to(raw)).abs() / 10)


def test_analyse_reports_the_device_view_against_brute_force():
    problem = opt.maxcut(PADDLE)
    h, J, c = maxcut_ising(PADDLE, 4)
    model = tql.NoiseModel().add(mixed.depolarizing(0.05), gates="RZZ").add_readout_error(0.03, 0.06)
    angles = starts(2, 3)
    res = NoisyQAOA(problem, 2, model, dtype=torch.complex128).analyse(angles, k=3, shots=4000,
                                                                       generator=torch.Generator().manual_seed(0))
    costs = brute_force_cut_costs(PADDLE, 4)
    best_cost, worst_cost = costs.min(), costs.max()
    optimal = costs == best_cost
    for s, a in enumerate(angles.tolist()):
        cost, prob = dense_reported(h, J, c, a, {"RZZ": [depolarizing_kraus(0.05)]}, readout=(0.03, 0.06))
        assert float(res.expected_cost[s]) == pytest.approx(cost, abs=1e-10)
        assert float(res.approximation_ratio[s]) == pytest.approx((worst_cost - cost) / (worst_cost - best_cost),
                                                                  abs=1e-10)
        assert float(res.optimum_probability[s]) == pytest.approx(prob[optimal].sum(), abs=1e-10)
        assert float(res.expected_objective[s]) == pytest.approx(-(prob @ costs), abs=1e-10)
        assert res.top_bitstrings[s][0] == format(int(np.argmax(prob)), "04b")
        freq = np.bincount(res.samples[s].numpy(), minlength=16) / 4000
        assert np.abs(freq - prob).max() < 0.035                     # 4.5 σ of a binomial frequency
    assert res.best == (int(torch.argmin(res.expected_cost)),)


def test_gradients_are_those_of_the_density_simulation():
    """gradcheck (float64) through the density matrices, readout mitigation and ZNE; the
    parameter-shift rule on density matrices gives the same gradient."""
    problem = opt.from_ising([0.4, -0.2, 0.0], [[0, 0.6, 0.0], [0, 0, -0.5], [0, 0, 0]], 0.3)
    model = (tql.NoiseModel().add(mixed.depolarizing(0.05), gates=["RZZ", "RZ"]).add(mixed.bit_flip(0.02), gates="RX")
             .add_readout_error(0.03, 0.05))
    module = NoisyQAOA(problem, 2, model, mitigation="zne+readout", zne_scale_factors=[1, 3],
                       extrapolation="linear", dtype=torch.complex128)
    x = starts(2, 2).requires_grad_(True)
    assert torch.autograd.gradcheck(module, (x,), atol=1e-8)
    assert torch.autograd.gradcheck(lambda a: module.probabilities(a), (x,), atol=1e-8)
    # the gradient of the oracle's reported cost by central differences, for one start
    h, J = np.array([0.4, -0.2, 0.0]), np.array([[0, 0.6, 0.0], [0, 0, -0.5], [0, 0, 0]])
    noise = {"RZZ": [depolarizing_kraus(0.05)], "RZ": [depolarizing_kraus(0.05)], "RX": [bit_flip_kraus(0.02)]}
    plain = NoisyQAOA(problem, 2, model, dtype=torch.complex128)
    g, = torch.autograd.grad(plain(x).sum(), x)
    a0 = x[0].detach().numpy()
    fd = [(dense_reported(h, J, 0.3, a0 + 1e-6 * e, noise, (0.03, 0.05))[0]
           - dense_reported(h, J, 0.3, a0 - 1e-6 * e, noise, (0.03, 0.05))[0]) / 2e-6 for e in np.eye(4)]
    np.testing.assert_allclose(g[0].numpy(), fd, atol=1e-7)
    shift = NoisyQAOA(problem, 2, model, diff_method="parameter-shift", dtype=torch.complex128)
    g_shift, = torch.autograd.grad(shift(x).sum(), x)
    torch.testing.assert_close(g_shift, g, atol=1e-10, rtol=0)


def test_trajectories_estimate_the_density_value():
    problem = opt.maxcut(PADDLE)
    model = tql.NoiseModel().add(mixed.depolarizing(0.1), gates="RZZ").add_readout_error(0.02)
    angles = starts(2, 2)
    exact = NoisyQAOA(problem, 2, model, dtype=torch.complex128)(angles)
    traj = NoisyQAOA(problem, 2, model, simulator="trajectories", n_trajectories=4000, dtype=torch.complex128)
    est = traj(angles, torch.Generator().manual_seed(3))
    assert torch.all((est - exact).abs() < 0.05)         # several standard errors (≈ 0.012) of 4000 trajectories
    again = traj(angles, torch.Generator().manual_seed(3))
    torch.testing.assert_close(est, again, atol=0, rtol=0)                   # seeded
    probs = traj.probabilities(angles, torch.Generator().manual_seed(4))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-12, rtol=0)
    exact_probs = NoisyQAOA(problem, 2, model, dtype=torch.complex128).probabilities(angles)
    assert float((probs - exact_probs).abs().max()) < 0.03


def test_library_bad_inputs_are_refused_with_clear_errors():
    problem = opt.maxcut(PADDLE)
    depol = tql.NoiseModel().add(mixed.depolarizing(0.01), gates="RZZ")
    readout_only = tql.NoiseModel().add_readout_error(0.02)
    cases = [
        (lambda: NoisyQAOA("maxcut", 2, depol), TypeError, "expected a Problem"),
        (lambda: NoisyQAOA([problem, problem], 2, depol), TypeError, "expected a Problem"),
        (lambda: NoisyQAOA(problem, 0, depol), ValueError, "p"),
        (lambda: NoisyQAOA(problem, 2, None), TypeError, "noise_model must be a tql.NoiseModel.*without noise"),
        (lambda: NoisyQAOA(problem, 2, {"channels": []}), TypeError, "noise_model_from_spec"),
        (lambda: NoisyQAOA(problem, 2, depol, mitigation="pec"), ValueError, "mitigation must be None, 'zne'"),
        (lambda: NoisyQAOA(problem, 2, depol, mitigation="readout"), ValueError, "needs readout errors"),
        (lambda: NoisyQAOA(problem, 2, readout_only, mitigation="zne"), ValueError, "no channel rules"),
        (lambda: NoisyQAOA(problem, 2, depol, mitigation="zne", zne_scale_factors=[1]), ValueError,
         "at least two scale factors"),
        (lambda: NoisyQAOA(problem, 2, depol, zne_scale_factors=[1, 0.5]), ValueError, "got 0.5"),
        (lambda: NoisyQAOA(problem, 2, depol, extrapolation="cubic"), ValueError, "extrapolation must be one of"),
        (lambda: NoisyQAOA(problem, 2, depol, extrapolation="polynomial"), ValueError, "needs an int order"),
        (lambda: NoisyQAOA(problem, 2, depol, order=1), ValueError, "order applies to extrapolation='polynomial'"),
        (lambda: NoisyQAOA(problem, 2, depol, fold_method="middle"), ValueError, "fold_method must be one of"),
        (lambda: NoisyQAOA(problem, 2, depol, simulator="mps"), ValueError, "simulator must be one of"),
        (lambda: NoisyQAOA(problem, 2, depol, n_trajectories=0), ValueError, "n_trajectories must be a positive int"),
        (lambda: NoisyQAOA(problem, 2, depol, diff_method="adjoint"), ValueError, "cannot un-compute"),
        (lambda: NoisyQAOA(problem, 2, depol, simulator="trajectories", diff_method="parameter-shift"), ValueError,
         "backprop only"),
        (lambda: NoisyQAOA(problem, 2, depol, mixer="xy"), ValueError, "mixer='xy' needs a problem with one-hot"),
        (lambda: NoisyQAOA(problem, 2, depol, mixer="swap"), ValueError, "mixer='swap' is the TSP"),
        (lambda: NoisyQAOA(problem, 2, depol, mixer="ring"), ValueError, "mixer must be one of"),
        (lambda: NoisyQAOA(problem, 2, depol, dtype=torch.float32), TypeError, "dtype must be torch.complex64"),
        (lambda: NoisyQAOA(opt.maxcut(opt.cycle_graph(MAX_DENSITY_QUBITS + 1)), 1, depol), ValueError,
         "limited to 12 qubits: use simulator='trajectories'"),
        (lambda: noisy_expected_cost(problem, torch.zeros(2, 3), noise_model=depol), ValueError, "give p"),
        (lambda: noisy_expected_cost(problem, torch.zeros(2, 4), 3, noise_model=depol), ValueError,
         r"angles must have shape \(S, 6\)"),
        (lambda: noisy_expected_cost(problem, "angles", 2, noise_model=depol), TypeError, "angles must be a real"),
    ]
    module = NoisyQAOA(problem, 2, depol)
    cases += [
        (lambda: module(torch.zeros(3, 5)), ValueError, r"angles must have shape \(S, 4\) or \(4,\)"),
        (lambda: module(torch.zeros(0, 4)), ValueError, "angles must have shape"),
        (lambda: module(torch.zeros(2, 4, dtype=torch.complex64)), TypeError, "real floating"),
        (lambda: module(torch.zeros(2, 4, dtype=torch.int64)), TypeError, "real floating"),
        (lambda: module(torch.zeros(2, 4), torch.Generator()), ValueError, "density simulator is exact"),
        (lambda: module(torch.zeros(2, 4), 7), TypeError, "generator must be a torch.Generator"),
        (lambda: module.probabilities(torch.zeros(2, 4), mitigation="zne"), ValueError, "not distributions"),
        (lambda: module.probabilities(torch.zeros(2, 4), mitigation="readout"), ValueError, "needs readout errors"),
        (lambda: module.analyse(torch.zeros(2, 4), k=0), ValueError, "k must be a positive int"),
        (lambda: module.analyse(torch.zeros(2, 4), shots=-1), ValueError, "shots must be a positive int"),
    ]
    for make, exc, match in cases:
        with pytest.raises(exc, match=match):
            make()


# ------------------------------------------------------------------------------------------------
# QAOATask(noise_model=...)
from .test_qaoa_task import trainer  # noqa: E402  (the QAOA task tests' quiet Trainer)


class _Record(pl.Callback):
    """The angles each step is logged at and what it logged."""

    def __init__(self):
        self.angles, self.metrics = [], []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.angles.append(module.angles.detach().clone().numpy())

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.metrics.append({k: float(v) for k, v in trainer.callback_metrics.items()})


SPEC = depolarizing_spec(0.02, ["RZZ"], readout=(0.02, 0.04))
NOISE = {"RZZ": [depolarizing_kraus(0.02)]}
TASK = dict(graph="paddle", p=2, n_starts=3, dtype="complex128", diff_method="backprop", noise_model=SPEC)


def test_task_trains_on_the_reported_cost_and_logs_it_with_the_ideal_one():
    record = _Record()
    task = QAOATask(**TASK, mitigation="zne+readout")
    trainer(4, callbacks=[record]).fit(task)
    h, J, c = maxcut_ising(PADDLE, 4)
    costs = brute_force_cut_costs(PADDLE, 4)
    worst, best_cost = costs.max(), costs.min()
    for step in (0, 3):
        angles, logged = record.angles[step], record.metrics[step]
        reported = [richardson([dense_reported(h, J, c, a, NOISE, None, fold=k)[0] for k in (0, 1, 2)])
                    for a in angles]
        j = int(np.argmin(reported))
        assert logged["expected_cost"] == pytest.approx(reported[j], abs=1e-9)
        assert task.history[step] == pytest.approx(reported[j], abs=1e-9)
        assert logged["mean_cost"] == pytest.approx(np.mean(reported), abs=1e-9)
        assert logged["best_ratio"] == pytest.approx((worst - reported[j]) / (worst - best_cost), abs=1e-9)
        ideal = float(np.abs(pure_qaoa_state(costs, angles[j].tolist())) ** 2 @ costs)
        assert logged["ideal_expected_cost"] == pytest.approx(ideal, abs=1e-9)
        assert logged["ideal_ratio"] == pytest.approx((worst - ideal) / (worst - best_cost), abs=1e-9)
        _, prob = dense_reported(h, J, c, angles[j].tolist(), NOISE, readout=(0.02, 0.04))
        assert logged["optimum_probability"] == pytest.approx(prob[costs == best_cost].sum(), abs=1e-9)
    assert task.history[-1] < task.history[0] - 0.05                      # it trains
    best = task.best                                                     # the lowest reported cost kept
    assert best.expected_cost == pytest.approx(min(task.history + [float(task.expected_costs().min())]), abs=1e-12)
    assert best.ideal_expected_cost == pytest.approx(
        float(np.abs(pure_qaoa_state(costs, best.angles.tolist())) ** 2 @ costs), abs=1e-9)
    ev = task.evaluation()
    assert set(ev) >= {"expected_cost", "best_ratio", "optimum_probability", "ideal_expected_cost", "ideal_ratio"}
    torch.testing.assert_close(task.ideal_expected_costs(), opt.qaoa(task.problem, 2, dtype=torch.complex128)(
        task.current_angles().detach()))


@pytest.mark.parametrize("optimizer", ["spsa", "lbfgs"])
def test_task_with_noise_trains_with_spsa_and_lbfgs(optimizer):
    task = QAOATask(**TASK, mitigation="readout", optimizer=optimizer)
    trainer(4).fit(task)
    assert len(task.history) == 4 and task.history[-1] < task.history[0]


def test_task_with_noise_resumes_exactly(tmp_path):
    kw = dict(TASK, mitigation="zne", lr=0.05, grow=True, steps_per_layer=2)
    task = QAOATask(**kw)
    ckpt = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1, filename="{step}")
    trainer(3, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    straight = QAOATask(**kw)
    trainer(5).fit(straight)
    raw = torch.load(tmp_path / "step=3.ckpt", weights_only=True)     # plain hyperparameters and tensors
    hp = raw["hyper_parameters"]
    assert hp["noise_model"] == SPEC and hp["mitigation"] == "zne" and raw["qaoa_depth"] == 2
    fresh = QAOATask(**hp)
    trainer(5).fit(fresh, ckpt_path=str(tmp_path / "step=3.ckpt"))
    assert fresh.global_step == 5 and len(fresh.history) == 5
    torch.testing.assert_close(fresh.angles, straight.angles, atol=1e-12, rtol=0)
    assert fresh.history == pytest.approx(straight.history, abs=1e-12)
    assert torch.equal(fresh.best_angles_, straight.best_angles_)
    loaded = QAOATask.load_from_checkpoint(tmp_path / "step=3.ckpt", weights_only=True)
    assert loaded.device_noise is not None and loaded.hparams.noise_model == SPEC


def test_task_noise_arguments_are_plain_data():
    task = QAOATask(**dict(TASK, noise_model={"channels": [{"channel": "depolarizing", "p": np.float64(0.01),
                                                            "gates": ("RZZ",)}]}),
                    mitigation="zne", zne_scale_factors=(1, np.int64(3)))
    assert task.hparams.noise_model == {"channels": [{"channel": "depolarizing", "p": 0.01, "gates": ["RZZ"]}]}
    assert task.hparams.zne_scale_factors == [1, 3] and type(task.hparams.zne_scale_factors[1]) is int


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(noise_model=tql.NoiseModel().add(mixed.depolarizing(0.1))), TypeError,
     "noise_model must be a noise spec .* got NoiseModel"),
    (dict(noise=SPEC), TypeError, r"noise is the standard deviation .* noise_model="),
    (dict(mitigation="zne"), ValueError, r"apply only with noise_model=\.\.\."),
    (dict(noise_model=SPEC), ValueError, "the adjoint method cannot un-compute; use diff_method='backprop'"),
    (dict(noise_model=SPEC, diff_method="backprop", optimizer="qng"), ValueError,
     "optimizer='qng' with noise_model=.*pure state"),
    (dict(noise_model=SPEC, diff_method="backprop", mixer="xy"), ValueError, "mixer='xy' needs a problem with one-hot"),
    (dict(noise_model=SPEC, diff_method="backprop", cvar_alpha=0.5), ValueError, "cvar_alpha with noise_model"),
    (dict(noise_model=depolarizing_spec(0.1, ["RZZ"]), diff_method="backprop", mitigation="readout"), ValueError,
     "needs readout errors"),
    (dict(noise_model=SPEC, diff_method="backprop", mitigation="pec"), ValueError, "mitigation must be"),
    (dict(noise_model=SPEC, diff_method="backprop", zne_scale_factors=[1, 3]), ValueError,
     "apply only with mitigation='zne'"),
    (dict(noise_model=SPEC, diff_method="backprop", mitigation="zne", zne_extrapolation="polynomial"), ValueError,
     "zne_extrapolation must be 'richardson', 'linear' or 'exponential'"),
    (dict(noise_model={"channels": [{"channel": "depolarise", "p": 0.1}]}, diff_method="backprop"), ValueError,
     "noise_model: channels\\[0\\]: unknown channel 'depolarise'"),
    (dict(noise_model=SPEC, diff_method="backprop", graph="cycle:13"), ValueError,
     "up to 12 qubits.*simulator='trajectories'"),
])
def test_task_noise_options_are_checked(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        QAOATask(**kwargs)
