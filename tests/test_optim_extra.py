"""Rotosolve and QN-SPSA (torchquantum_layers.optim_rotosolve / optim_qnspsa, re-exported from
tql.optim); oracles: dense NumPy energies on a grid, exact diagonalisation, tql.grad.quantum_fisher."""
import io
import itertools
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers.circuit import Param
from torchquantum_layers.optim import QNSPSA, SPSA, Rotosolve, make_optimizer, needs_closure_without_backward

from . import oracle

OBS = tql.Hamiltonian([(1.0, "Z0"), (0.5, "X1"), (0.3, "Y0 Y1"), (0.4, "Z0 Z1")])
OBS_NP = (oracle.kron(oracle.Z, oracle.I2) + 0.5 * oracle.kron(oracle.I2, oracle.X)
          + 0.3 * oracle.kron(oracle.Y, oracle.Y) + 0.4 * oracle.kron(oracle.Z, oracle.Z))
# per complex dtype: energies of a float32 / float64 simulation
ENERGY_TOL = {torch.complex64: 1e-5, torch.complex128: 1e-10}
# (gate, wires) of the ansatz; RX / RY / RZ one frequency, CRY two ({½, 1})
ANSATZ = [("RY", (0,)), ("RY", (1,)), ("CNOT", (0, 1)), ("RY", (0,)), ("RY", (1,)), ("CNOT", (1, 0)),
          ("RX", (0,)), ("CRY", (0, 1))]


def _circuit(theta, dtype):
    c = tql.Circuit(2, dtype=dtype)
    i = 0
    for name, wires in ANSATZ:
        if name == "CNOT":
            c.cnot(*wires)
        else:
            c.add(name, wires, trainable=True, init=float(theta[i]))
            i += 1
    return c


def _ops_np(theta):
    ops, i = [], 0
    for name, wires in ANSATZ:
        if name == "CNOT":
            ops.append((name, wires, ()))
        else:
            ops.append((name, wires, (theta[i],)))
            i += 1
    return ops


def _energies_along_np(theta, d, grid):
    """Dense energies with angle d of ``theta`` set to each grid value (the other gates run once)."""
    ops = _ops_np(theta)
    k = [i for i, op in enumerate(ops) if op[2]][d]
    before = oracle.run_ops(ops[:k], 2, np.eye(1, 4, dtype=complex))[0]
    after = oracle.run_ops(ops[k + 1:], 2, np.eye(4, dtype=complex)).T          # columns: U_after e_j
    obs = after.conj().T @ OBS_NP @ after
    name, wires, _ = ops[k]
    # full(M) is linear in M's entries: phi(t) = Σ_ab M(t)_ab · full(E_ab) before, one matmul for the grid
    d = 2 ** len(wires)
    units = np.stack([oracle.full_operator(np.eye(d * d)[j].reshape(d, d), wires, 2) @ before for j in range(d * d)])
    mats = np.stack([oracle.gate_matrix(name, t) for t in grid]).reshape(len(grid), d * d)
    phi = mats @ units
    return np.einsum("gi,ij,gj->g", phi.conj(), obs, phi).real


def test_dense_energy_along_an_angle():
    theta = list(np.random.default_rng(2).uniform(-np.pi, np.pi, 6))
    for d in (0, 5):
        psi = oracle.run_ops(_ops_np(theta), 2, np.eye(1, 4, dtype=complex))[0]
        want = np.real(psi.conj() @ OBS_NP @ psi)
        assert _energies_along_np(theta, d, [theta[d]])[0] == pytest.approx(want, abs=1e-12)
        c = _circuit(theta, torch.complex128)
        assert float(tql.expval(c, OBS).detach()) == pytest.approx(want, abs=1e-12)


THETA = [0.4, -1.1, 0.8, 0.3, -0.5, 1.2]


def _energy(c):
    return tql.expval(c, OBS)


@pytest.mark.parametrize("d", [0, 4, 5])             # RY, RX (one frequency), CRY (two)
def test_rotosolve_update_is_the_grid_minimum(dtype, d):
    c = _circuit(THETA, dtype)
    # start the sweep at coordinate d: load a state that says so
    opt = Rotosolve(c, coordinates_per_step=1)
    opt.state[c.weights]["coordinate"] = torch.tensor(d)
    opt.step(lambda: _energy(c))
    period = 2 * math.pi if d < 5 else 4 * math.pi
    grid = THETA[d] + np.linspace(-period / 2, period / 2, 8001)
    energies = _energies_along_np(THETA, d, grid)
    best = int(energies.argmin())
    got = c.weights.detach().double().numpy()
    assert np.allclose(np.delete(got, d), np.delete(THETA, d), atol=1e-6)        # one coordinate moved
    step = period / 8000
    gap = (got[d] - grid[best] + period / 2) % period - period / 2
    assert abs(gap) < 2 * step + (3e-3 if dtype == torch.complex64 else 0), (got[d], grid[best])
    # the dense energy at the jump is the grid's minimum or below it (by at most the grid's resolution)
    at_jump = _energies_along_np(THETA, d, [got[d]])[0]
    assert energies[best] - 1e-6 <= at_jump <= energies[best] + 10 * ENERGY_TOL[dtype]
    assert opt.last_minima[0] == pytest.approx(at_jump, abs=10 * ENERGY_TOL[dtype])
    assert float(_energy(c).detach()) == pytest.approx(opt.last_minima[0], abs=10 * ENERGY_TOL[dtype])
    evaluations = {0: 3, 4: 3, 5: 5}[d]             # E(θ) and 2 (one frequency) or 4 (two) more
    assert int(opt.state_dict()["state"][0]["evaluations"]) == evaluations


def test_rotosolve_reaches_the_ground_energy_monotonically(dtype):
    # RY + CNOT layers reach every real 2-qubit state, and OBS is a real symmetric matrix
    c = _circuit([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], dtype)
    ground = np.linalg.eigh(OBS_NP)[0][0]
    opt = Rotosolve(c, coordinates_per_step=1)
    energies = [float(_energy(c).detach())]
    for _ in range(8 * c.num_parameters):               # 8 sweeps, one coordinate per step
        opt.step(lambda: _energy(c))
        energies.append(float(_energy(c).detach()))
    assert all(b <= a + 20 * ENERGY_TOL[dtype] for a, b in zip(energies, energies[1:])), energies
    assert energies[-1] == pytest.approx(ground, abs=1e-6 if dtype == torch.complex128 else 1e-4)


def test_rotosolve_on_plain_parameters_and_by_name():
    # the assumed model: a + b cos θ + c sin θ per coordinate, minimum at θ = atan2(−c, −b)
    theta = torch.nn.Parameter(torch.tensor([0.3, -2.0], dtype=torch.float64))
    b, s = torch.tensor([1.0, -0.5], dtype=torch.float64), torch.tensor([0.2, 0.7], dtype=torch.float64)
    opt = Rotosolve([theta])
    loss = opt.step(lambda: (b * torch.cos(theta) + s * torch.sin(theta)).sum())
    assert float(loss) == pytest.approx(float((b * torch.cos(torch.tensor([0.3, -2.0])) +
                                               s * torch.sin(torch.tensor([0.3, -2.0]))).sum()))
    gap = torch.remainder(theta.detach() - torch.atan2(-s, -b) + math.pi, 2 * math.pi) - math.pi
    assert torch.allclose(gap, torch.zeros(2, dtype=torch.float64), atol=1e-12)
    # frequencies (½, 1) on plain parameters: 5-point reconstruction
    phi = torch.nn.Parameter(torch.tensor([0.5], dtype=torch.float64))
    opt = Rotosolve([phi], frequencies=(0.5, 1.0))
    opt.step(lambda: (torch.cos(phi / 2) + 0.3 * torch.sin(phi) + 0.2 * torch.cos(phi)).sum())
    grid = torch.linspace(-2 * math.pi, 2 * math.pi, 200001, dtype=torch.float64)
    values = torch.cos(grid / 2) + 0.3 * torch.sin(grid) + 0.2 * torch.cos(grid)
    assert float(values.min()) == pytest.approx(opt.last_minima[0], abs=1e-9)
    # by name: through make_optimizer and chem.vqe (its closure gets no backward)
    c = _circuit([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], torch.complex128)
    assert type(make_optimizer("Rotosolve", [c.weights], circuit=c)) is Rotosolve
    assert needs_closure_without_backward("rotosolve") and needs_closure_without_backward("QNSPSA")
    result = tql.chem.vqe(OBS, c, steps=8, optimizer="rotosolve")
    assert result.energy == pytest.approx(np.linalg.eigh(OBS_NP)[0][0], abs=1e-6)
    with pytest.raises(ValueError, match="'rotosolve' takes no learning rate"):
        make_optimizer("rotosolve", [c.weights], lr=0.1, circuit=c)


def test_rotosolve_resumes_from_its_state_dict():
    def run(split):
        c = _circuit(THETA, torch.complex128)
        opt = Rotosolve(c, coordinates_per_step=4)
        for k in range(5):
            if k == split:
                buf = io.BytesIO()
                torch.save({"c": c.state_dict(), "opt": opt.state_dict()}, buf)
                buf.seek(0)
                saved = torch.load(buf, weights_only=True)
                c = _circuit(THETA, torch.complex128)
                c.load_state_dict(saved["c"])
                opt = Rotosolve(c, coordinates_per_step=4)
                opt.load_state_dict(saved["opt"])
            opt.step(lambda: _energy(c))
        return c.weights.detach()
    assert torch.equal(run(None), run(2))


def test_rotosolve_bad_input_is_named():
    c = _circuit(THETA, torch.complex128)
    with pytest.raises(TypeError, match="Rotosolve: circuit_or_params must be a tql.Circuit"):
        Rotosolve(3)
    with pytest.raises(ValueError, match="Rotosolve: step needs a closure"):
        Rotosolve(c).step()
    with pytest.raises(ValueError, match="Rotosolve: the closure must return a scalar loss"):
        Rotosolve(c).step(lambda: tql.expval(c, [OBS, "Z0"]))
    with pytest.raises(ValueError, match="coordinates_per_step must be a positive int"):
        Rotosolve(c, coordinates_per_step=0)
    with pytest.raises(ValueError, match="frequencies are for plain parameters"):
        Rotosolve(c, frequencies=(1.0,))
    with pytest.raises(ValueError, match="frequencies must be positive"):
        Rotosolve([torch.nn.Parameter(torch.zeros(2))], frequencies=(0.0,))
    with pytest.raises(ValueError, match="no trainable parameters"):
        Rotosolve(tql.Circuit(1))
    # an angle read by RY(θ) and RX(√2 θ): frequencies 1 and √2 share no base
    odd = tql.Circuit(2)
    p = odd.parameter(0.3)
    odd.ry(0, p)
    odd.rx(1, Param(p.index, math.sqrt(2)))
    odd.ry(1, trainable=True)
    with pytest.raises(ValueError, match="Rotosolve: parameter 0: frequencies"):
        Rotosolve(odd)


# ------------------------------------------------------------------------------------------------
# QN-SPSA
def _metric_variance(g):
    """Exact per-entry variance of one QN-SPSA metric sample (Δ₁ᵀgΔ₂)(Δ₁Δ₂ᵀ + Δ₂Δ₁ᵀ)/2 over all
    ±1 vectors Δ₁, Δ₂ (the O(ε²) terms left out)."""
    P = len(g)
    signs = [np.array(s) for s in itertools.product([-1.0, 1.0], repeat=P)]
    samples = np.array([(a @ g @ b) * (np.outer(a, b) + np.outer(b, a)) / 2 for a in signs for b in signs])
    assert np.allclose(samples.mean(0), g)
    return samples.var(0)


def test_qnspsa_metric_average_converges_to_the_fubini_study_metric(dtype):
    c = _circuit(THETA, dtype)
    g = tql.grad.quantum_fisher(c)[0].double().numpy()
    steps = 500
    # a constant loss: the gradient estimate is 0, θ stays put and the metric averages over 500 draws
    eps = 0.01 if dtype == torch.complex128 else 0.05    # float32 fidelities: δF ~ ε² needs ε larger
    opt = QNSPSA(c, lr=0.1, perturbation=eps, gamma=0.0, seed=11)
    before = c.weights.detach().clone()
    for _ in range(steps):
        opt.step(lambda: torch.tensor(0.0))
    assert torch.equal(c.weights.detach(), before)
    std = np.sqrt(_metric_variance(g) / steps)
    # 5 standard errors, plus the O(ε²) bias (and float32 rounding of δF / ε² in complex64)
    tol = 5 * std + (2e-3 if dtype == torch.complex128 else 1e-2)
    err = np.abs(opt.metric.double().numpy() - g)
    assert np.all(err < tol), (err, tol)
    assert np.abs(opt.metric.double().numpy() - g).max() > 1e-4          # an estimate, not the metric


def test_qnspsa_converges_in_fewer_steps_than_spsa_at_the_same_gains():
    # the same seed, lr, perturbation and Spall gains; only the metric preconditioning differs.
    # (a larger SPSA lr, 1.0, gets there faster still on this problem: benchmarks/optimizers_extra.py)
    H = tql.Hamiltonian([(1.0, "Z0"), (0.5, "X1"), (0.3, "Y0 Y1"), (0.4, "Z0 Z1"), (0.2, "X0 X2"), (-0.6, "Z2")])
    ground = np.linalg.eigvalsh(H.to_dense().numpy())[0]

    def circuit():
        c = tql.Circuit(3, dtype=torch.complex128)
        init = torch.rand(12, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 0.5
        for layer in range(2):
            for w in range(3):
                c.ry(w, trainable=True, init=float(init[6 * layer + 2 * w]))
                c.rz(w, trainable=True, init=float(init[6 * layer + 2 * w + 1]))
            c.cnot(0, 1).cnot(1, 2)
        return c

    def steps_to(make, limit=300):
        c = circuit()
        opt = make(c)
        for k in range(1, limit + 1):
            opt.step(lambda: tql.expval(c, H))
            if float(tql.expval(c, H).detach()) - ground < 0.1:
                return k
        return limit + 1
    spsa = steps_to(lambda c: SPSA(c.parameters(), lr=0.5, perturbation=0.1, seed=0))
    qnspsa = steps_to(lambda c: QNSPSA(c, lr=0.5, perturbation=0.1, seed=0))
    assert qnspsa < spsa, (qnspsa, spsa)
    assert qnspsa <= 200


def test_qnspsa_resumes_from_its_state_dict(dtype):
    def run(split):
        c = _circuit(THETA, dtype)
        opt = QNSPSA(c, lr=0.2, seed=7, hessian_delay=1)
        for k in range(6):
            if k == split:
                buf = io.BytesIO()
                torch.save({"c": c.state_dict(), "opt": opt.state_dict()}, buf)
                buf.seek(0)
                saved = torch.load(buf, weights_only=True)
                c = _circuit(THETA, dtype)
                c.load_state_dict(saved["c"])
                opt = QNSPSA(c, lr=0.2, seed=7, hessian_delay=1)
                opt.load_state_dict(saved["opt"])
            opt.step(lambda: _energy(c))
        return c.weights.detach(), opt.metric
    (w1, m1), (w2, m2) = run(None), run(3)
    assert torch.equal(w1, w2) and torch.equal(m1, m2)


def test_qnspsa_with_a_fidelity_callable_and_by_name():
    # plain parameters with the fidelity of the same circuit's states: the same run as QNSPSA(circuit)
    c = _circuit(THETA, torch.complex128)
    twin = _circuit(THETA, torch.complex128)

    def fidelity(a, b):
        from torchquantum_layers.engine import run_circuit
        return (run_circuit(twin, None, None, a).conj() * run_circuit(twin, None, None, b)).sum(-1).abs() ** 2
    plain = QNSPSA([twin.weights], lr=0.2, seed=3, fidelity=fidelity)
    made = make_optimizer("qnspsa", [c.weights], lr=0.2, circuit=c)
    assert type(made) is QNSPSA and made.param_groups[0]["lr"] == 0.2
    opt = QNSPSA(c, lr=0.2, seed=3)
    for _ in range(3):
        opt.step(lambda: _energy(c))
        plain.step(lambda: _energy(twin))
    assert torch.allclose(c.weights.detach(), twin.weights.detach(), atol=1e-12)
    with pytest.raises(ValueError, match="'qnspsa' needs the tql.Circuit"):
        make_optimizer("qnspsa", [c.weights])


def test_qnspsa_bad_input_is_named():
    c = _circuit(THETA, torch.complex128)
    for kwargs, match in (({"lr": 0}, "QNSPSA: lr must be a finite number > 0"),
                          ({"lr": -1.0}, "QNSPSA: lr must be"),
                          ({"perturbation": float("nan")}, "QNSPSA: perturbation must be"),
                          ({"regularization": -1e-3}, "QNSPSA: regularization must be a finite number ≥ 0"),
                          ({"resamplings": 0}, "QNSPSA: resamplings must be an int ≥ 1"),
                          ({"hessian_delay": -1}, "QNSPSA: hessian_delay must be an int ≥ 0"),
                          ({"fidelity": lambda a, b: 1.0}, "fidelity= is for plain parameters")):
        with pytest.raises(ValueError, match=match):
            QNSPSA(c, **kwargs)
    with pytest.raises(TypeError, match="QNSPSA: seed must be an int"):
        QNSPSA(c, seed=1.5)
    with pytest.raises(TypeError, match="QNSPSA: circuit_or_params must be a tql.Circuit"):
        QNSPSA(torch.zeros(3))
    with pytest.raises(TypeError, match="QNSPSA: plain parameters need fidelity="):
        QNSPSA([torch.nn.Parameter(torch.zeros(2))])
    with pytest.raises(ValueError, match="QNSPSA: step needs a closure"):
        QNSPSA(c).step()
    with pytest.raises(ValueError, match="QNSPSA: the closure must return a scalar loss"):
        QNSPSA(c).step(lambda: tql.expval(c, [OBS, "Z0"]))
    noisy = tql.MixedCircuit(1)
    noisy.ry(0, trainable=True).channel(tql.mixed.bit_flip(0.1), 0)
    with pytest.raises(ValueError, match="QNSPSA: the circuit has channels"):
        QNSPSA(noisy)
