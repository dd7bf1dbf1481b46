"""Optimizers by name (torchquantum_layers.optim), shared by the VQE drivers and the recipes."""
import pytest
import torch

from torchquantum_layers.optim import NAMED_LRS, make_optimizer, optimizer_class


def _params():
    return [torch.nn.Parameter(torch.zeros(3))]


def test_named_optimizers_and_their_default_rates():
    for name, cls in (("adam", torch.optim.Adam), ("SGD", torch.optim.SGD), ("lbfgs", torch.optim.LBFGS)):
        o = make_optimizer(name, _params())
        assert type(o) is cls and o.param_groups[0]["lr"] == NAMED_LRS[name.lower()]
    assert make_optimizer("adam", _params(), default_lrs={"adam": 0.05}).param_groups[0]["lr"] == 0.05
    assert make_optimizer("adam", _params(), lr=0.3, default_lrs={"adam": 0.05}).param_groups[0]["lr"] == 0.3
    # default_lrs also sets names outside NAMED_LRS, case-insensitively
    assert make_optimizer("AdamW", _params(), default_lrs={"adamw": 0.01}).param_groups[0]["lr"] == 0.01
    assert make_optimizer("adamw", _params()).param_groups[0]["lr"] == 1e-3          # the class default
    lb = make_optimizer("lbfgs", _params())
    assert lb.defaults["max_iter"] == 1 and lb.defaults["max_eval"] == 25     # a line search per step
    spsa = make_optimizer("SPSA", _params())
    assert type(spsa).__name__ == "SPSA" and spsa.param_groups[0]["lr"] == NAMED_LRS["spsa"]
    import torchquantum_layers as tql
    c = tql.Circuit(1)
    c.ry(0, trainable=True)
    qng = make_optimizer("qng", c.parameters(), circuit=c)
    assert type(qng).__name__ == "QNG" and qng.circuit is c and qng.param_groups[0]["lr"] == NAMED_LRS["qng"]


def test_other_torch_optimizers_by_name_class_or_callable():
    assert optimizer_class("adamw") is torch.optim.AdamW and optimizer_class("nope") is None
    o = make_optimizer("RMSprop", _params(), lr=0.01)
    assert type(o) is torch.optim.RMSprop and o.param_groups[0]["lr"] == 0.01
    assert type(make_optimizer(torch.optim.Adagrad, _params())) is torch.optim.Adagrad
    assert type(make_optimizer(lambda p: torch.optim.SGD(p, lr=1.0), _params())) is torch.optim.SGD


def test_bad_optimizers_are_named():
    with pytest.raises(ValueError, match="'adamx'"):
        make_optimizer("adamx", _params())
    with pytest.raises(TypeError, match="int"):
        make_optimizer(3, _params())
    # the abstract base matched by name and failed deep inside torch ("missing ... 'defaults'")
    with pytest.raises(ValueError, match="'optimizer'"):
        make_optimizer("optimizer", _params())
    with pytest.raises(TypeError, match="abstract base class"):
        make_optimizer(torch.optim.Optimizer, _params())


# ------------------------------------------------------------------------------------------------
# QNG and SPSA (oracles: analytic metrics and losses, dense NumPy states with finite differences)
import io  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402

import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.optim import QNG, SPSA  # noqa: E402

from . import oracle  # noqa: E402
from .conftest import REAL  # noqa: E402

STEP_TOL = {torch.complex64: 2e-4, torch.complex128: 1e-7}
OBS = tql.Hamiltonian([(1.0, "Z0"), (0.5, "X1"), (0.3, "Y0 Y1")])
OBS_NP = (oracle.kron(oracle.Z, oracle.I2) + 0.5 * oracle.kron(oracle.I2, oracle.X)
          + 0.3 * oracle.kron(oracle.Y, oracle.Y))


def _two_qubit_circuit(theta, dtype, device):
    c = tql.Circuit(2, dtype=dtype)
    c.rx(0, trainable=True, init=theta[0])
    c.ry(1, trainable=True, init=theta[1])
    c.cnot(0, 1)
    c.rz(0, trainable=True, init=theta[2])
    c.ry(0, 0.3)
    return c.to(device)


def _psi_np(t, init=None):
    ops = [("RX", (0,), (t[0],)), ("RY", (1,), (t[1],)), ("CNOT", (0, 1), ()), ("RZ", (0,), (t[2],)),
           ("RY", (0,), (0.3,))]
    init = np.eye(1, 4, dtype=complex) if init is None else np.asarray(init, dtype=complex).reshape(1, 4)
    return oracle.run_ops(ops, 2, init)[0]


def _energies_np(thetas):
    """⟨OBS⟩ of _two_qubit_circuit's state for M angle triples at once: the same gates as
    _psi_np, written out for a batch (checked against it in test_batched_energy_oracle)."""
    t0, t1, t2 = (thetas[:, i, None] for i in range(3))
    a = np.concatenate([np.cos(t0 / 2), -1j * np.sin(t0 / 2)], 1)          # RX(t0)|0>
    b = np.concatenate([np.cos(t1 / 2), np.sin(t1 / 2)], 1)                # RY(t1)|0>
    psi = (a[:, :, None] * b[:, None, :]).reshape(-1, 4)[:, [0, 1, 3, 2]]  # CNOT(0, 1)
    psi = psi * np.exp(1j * t2 / 2 * np.array([-1, -1, 1, 1]))             # RZ(t2) on wire 0
    psi = psi @ oracle.kron(oracle.gate_matrix("RY", 0.3), oracle.I2).T
    return np.einsum("mi,ij,mj->m", psi.conj(), OBS_NP, psi).real


def test_batched_energy_oracle():
    thetas = np.random.default_rng(1).uniform(-np.pi, np.pi, (5, 3))
    want = [np.real(_psi_np(t).conj() @ OBS_NP @ _psi_np(t)) for t in thetas]
    np.testing.assert_allclose(_energies_np(thetas), want, atol=1e-12)


def _metric_and_gradient_np(theta, eps=1e-6, init=None):
    psi = _psi_np(theta, init)
    d, grad = [], []
    for i in range(len(theta)):
        tp, tm = list(theta), list(theta)
        tp[i] += eps
        tm[i] -= eps
        d.append((_psi_np(tp, init) - _psi_np(tm, init)) / (2 * eps))
        energy = [np.real(v.conj() @ OBS_NP @ v) for v in (_psi_np(tp, init), _psi_np(tm, init))]
        grad.append((energy[0] - energy[1]) / (2 * eps))
    metric = np.array([[np.real(a.conj() @ b - (a.conj() @ psi) * (psi.conj() @ b)) for b in d] for a in d])
    return metric, np.array(grad)


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])
def test_qng_step_is_the_metric_solve(dtype, device, diff_method):
    theta, lr, lam = [0.4, -1.1, 0.8], 0.2, 1e-2
    c = _two_qubit_circuit(theta, dtype, device)
    opt = QNG(c, lr=lr, regularization=lam)
    opt.zero_grad()
    tql.expval(c, OBS, diff_method=diff_method).sum().backward()
    opt.step()
    metric, grad = _metric_and_gradient_np(theta)
    want = np.array(theta) - lr * np.linalg.solve(metric + lam * np.eye(3), grad)
    got = c.weights.detach().cpu().double().numpy()
    assert np.allclose(got, want, atol=STEP_TOL[dtype]), (got, want)


def test_qng_averages_the_metric_over_the_batch(dtype, device):
    # RY(θ) after RX(x) on |0⟩: ⟨Z⟩ = cos θ cos x, g = (1 − ⟨Y⟩²) / 4 = cos² x / 4
    theta, lr, lam = 0.7, 0.1, 1e-3
    x = torch.tensor([[0.3], [1.2]], dtype=REAL[dtype], device=device)
    c = tql.Circuit(1, dtype=dtype)
    c.rx(0, input=0)
    c.ry(0, trainable=True, init=theta)
    c = c.to(device)
    opt = QNG(c, lr=lr, regularization=lam, x=x)

    def closure():
        opt.zero_grad()
        loss = tql.expval(c, "Z0", x=x).mean()
        loss.backward()
        return loss
    loss = opt.step(closure)
    cx = np.cos([0.3, 1.2])
    assert float(loss.detach()) == pytest.approx(math.cos(theta) * cx.mean(), abs=STEP_TOL[dtype])
    want = theta - lr * (-math.sin(theta) * cx.mean()) / ((cx ** 2).mean() / 4 + lam)
    assert float(c.weights.detach()[0]) == pytest.approx(want, abs=STEP_TOL[dtype])


def _orthonormal_states(k, seed=3):
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4)))
    return q[:, :k].T.copy()                       # rows: k orthonormal 2-qubit states


def test_qng_weights_the_metric_of_each_batch_row(dtype, device):
    theta, lr, lam, bw = [0.4, -1.1, 0.8], 0.2, 1e-2, np.array([3.0, 1.0])
    init = _orthonormal_states(2)
    c = _two_qubit_circuit(theta, dtype, device)
    states = torch.tensor(init, dtype=dtype, device=device)
    opt = QNG(c, lr=lr, regularization=lam, state=states, batch_weights=torch.tensor(bw))
    opt.zero_grad()
    (torch.tensor(bw, device=device).to(REAL[dtype]) * tql.expval(c, OBS, state=states)).sum().backward()
    opt.step()
    parts = [_metric_and_gradient_np(theta, init=row) for row in init]
    metric = sum(w * m for w, (m, _) in zip(bw, parts)) / bw.sum()
    grad = sum(w * g for w, (_, g) in zip(bw, parts))
    want = np.array(theta) - lr * np.linalg.solve(metric + lam * np.eye(3), grad)
    assert np.allclose(c.weights.detach().cpu().double().numpy(), want, atol=STEP_TOL[dtype])
    with pytest.raises(ValueError, match="QNG: batch_weights must be"):
        QNG(c, state=states, batch_weights=torch.tensor([1.0, -1.0]))
    short = QNG(c, state=states, batch_weights=torch.tensor([1.0]))
    tql.expval(c, OBS, state=states).sum().backward()
    with pytest.raises(ValueError, match="QNG: 1 batch_weights for a batch of 2 states"):
        short.step()


def test_vqe_and_ssvqe_take_the_metric_at_their_input_states():
    # the oracle step uses the metric at the given state(s); at |00⟩ it would differ
    theta, lr = [0.4, -1.1, 0.8], 0.1
    lam = 1e-3                                             # QNG's default regularization
    init = _orthonormal_states(2)
    H = tql.Hamiltonian([(1.0, "Z0"), (0.5, "X1"), (0.3, "Y0 Y1")])
    c = _two_qubit_circuit(theta, torch.complex128, "cpu")
    tql.chem.vqe(H, c, steps=1, optimizer="qng", lr=lr, state=torch.tensor(init[:1]))
    metric, grad = _metric_and_gradient_np(theta, init=init[0])
    want = np.array(theta) - lr * np.linalg.solve(metric + lam * np.eye(3), grad)
    assert np.allclose(c.weights.detach().numpy(), want, atol=1e-7)
    at_zero, _ = _metric_and_gradient_np(theta)
    assert not np.allclose(metric, at_zero, atol=1e-2)     # the check can tell the two apart

    c = _two_qubit_circuit(theta, torch.complex128, "cpu")
    tql.chem.ssvqe(H, c, k=2, states=torch.tensor(init), steps=1, optimizer="qng", lr=lr)
    parts = [_metric_and_gradient_np(theta, init=row) for row in init]
    bw = np.array([2.0, 1.0])                              # ssvqe's default weights k, ..., 1
    metric = sum(w * m for w, (m, _) in zip(bw, parts)) / bw.sum()
    grad = sum(w * g for w, (_, g) in zip(bw, parts))
    want = np.array(theta) - lr * np.linalg.solve(metric + lam * np.eye(3), grad)
    assert np.allclose(c.weights.detach().numpy(), want, atol=1e-7)


def test_qng_reaches_the_ground_energy():
    c = _two_qubit_circuit([0.1, 0.2, 0.3], torch.complex128, "cpu")
    c.ry(1, trainable=True, init=0.1)
    c.cnot(1, 0)
    c.rx(1, trainable=True, init=0.2)
    opt = QNG(c, lr=0.2)
    for _ in range(60):
        opt.zero_grad()
        energy = tql.expval(c, OBS).sum()
        energy.backward()
        opt.step()
    ground = np.linalg.eigvalsh(OBS_NP)[0]
    assert float(tql.expval(c, OBS).sum()) == pytest.approx(ground, abs=1e-3)


def test_qng_bad_input_is_named():
    c = _two_qubit_circuit([0.1, 0.2, 0.3], torch.complex128, "cpu")
    with pytest.raises(TypeError, match="QNG: expected a tql.Circuit"):
        QNG(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="no trainable parameters"):
        QNG(tql.Circuit(2))
    with pytest.raises(ValueError, match="QNG: lr must be a finite number > 0"):
        QNG(c, lr=-0.1)
    with pytest.raises(ValueError, match="QNG: regularization must be a finite number ≥ 0"):
        QNG(c, regularization=float("nan"))
    opt = QNG(c)
    c.load_state_dict(c.state_dict(), assign=True)      # a new weights Parameter
    tql.expval(c, OBS).sum().backward()
    with pytest.raises(ValueError, match="circuit.weights was replaced"):
        opt.step()
    noisy = tql.MixedCircuit(1)
    noisy.ry(0, trainable=True).channel(tql.mixed.bit_flip(0.1), 0)
    with pytest.raises(ValueError, match="QNG: the circuit has channels"):
        QNG(noisy)


def test_qng_follows_a_circuit_that_grows():
    c = _two_qubit_circuit([0.4, -1.1, 0.8], torch.complex128, "cpu")
    opt = QNG(c, lr=0.1)
    more = tql.Circuit(2, dtype=torch.complex128)
    more.ry(1, trainable=True, init=0.2)
    c.append(more)                                   # the same Parameter, one angle longer
    opt.zero_grad()
    tql.expval(c, OBS).sum().backward()
    before = c.weights.detach().clone()
    opt.step()
    assert c.weights.shape == (4,) and not torch.equal(before, c.weights.detach())


def _spsa_gains(lr, perturbation, alpha, gamma, stability, k):
    return lr / (k + 1 + stability) ** alpha, perturbation / (k + 1) ** gamma


def test_spsa_on_one_parameter_is_gradient_descent_with_spall_gains():
    # one parameter: Δ = ±1 and the central difference of a quadratic is its exact slope
    theta = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
    opt = SPSA([theta], lr=0.4, perturbation=0.2, alpha=0.7, gamma=0.2, stability=2.0)
    want = 3.0
    for k in range(6):
        loss = opt.step(lambda: ((theta - 1.0) ** 2).sum())
        a_k, c_k = _spsa_gains(0.4, 0.2, 0.7, 0.2, 2.0, k)
        assert float(loss) == pytest.approx((want - 1) ** 2 + c_k ** 2)      # mean of L(θ ± c_k)
        want -= a_k * 2 * (want - 1.0)
        assert float(theta) == pytest.approx(want, abs=1e-12)


def test_spsa_estimate_is_unbiased_over_resamplings():
    # a linear loss w·θ: each draw gives (w·Δ) Δ, whose mean over Δ is w
    w = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=torch.float64)
    theta = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
    opt = SPSA([theta], lr=1.0, perturbation=0.1, resamplings=4000, seed=3)
    opt.step(lambda: (w * theta).sum())
    estimate = -theta.detach()                   # a_0 = 1
    assert torch.allclose(estimate, w, atol=0.15), estimate
    assert not torch.allclose(estimate, w, atol=1e-3)          # an estimate, not the gradient


def test_spsa_trains_a_circuit_with_shots(dtype, device):
    c = _two_qubit_circuit([0.1, 0.2, 0.3], dtype, device)
    gen = torch.Generator(device=device).manual_seed(0)
    opt = SPSA(c.parameters(), lr=1.0, perturbation=0.2, stability=5, seed=1)
    for _ in range(150):
        opt.step(lambda: tql.expval(c, OBS, shots=2000, generator=gen).sum())
    reachable = _energies_np(np.random.default_rng(0).uniform(-np.pi, np.pi, (4000, 3))).min()
    final = float(tql.expval(c, OBS).sum().detach())
    assert final == pytest.approx(reachable, abs=0.08), (final, reachable)


def test_spsa_resumes_from_its_state_dict():
    def run(split):
        theta = torch.nn.Parameter(torch.tensor([0.3, -0.2, 1.0], dtype=torch.float64))
        opt = SPSA([theta], lr=0.2, seed=7)

        def loss():
            return (theta ** 2 * torch.tensor([1.0, 2.0, 3.0], dtype=theta.dtype)).sum() + theta.prod()
        for k in range(6):
            if k == split:
                buf = io.BytesIO()
                torch.save({"theta": theta.detach(), "opt": opt.state_dict()}, buf)
                buf.seek(0)
                saved = torch.load(buf, weights_only=True)
                theta = torch.nn.Parameter(saved["theta"].clone())
                opt = SPSA([theta], lr=0.2, seed=7)
                opt.load_state_dict(saved["opt"])
            opt.step(loss)
        return theta.detach()
    assert torch.equal(run(split=None), run(split=3))


def test_spsa_bad_input_is_named():
    theta = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="SPSA: step needs a closure"):
        SPSA([theta]).step()
    with pytest.raises(ValueError, match="SPSA: the closure must return a scalar loss"):
        SPSA([theta]).step(lambda: theta * 2)
    for kwargs, match in (({"lr": 0}, "SPSA: lr must be"), ({"perturbation": float("inf")}, "perturbation"),
                          ({"stability": -1}, "stability must be a finite number ≥ 0"),
                          ({"resamplings": 0}, "resamplings must be a positive int")):
        with pytest.raises(ValueError, match=match):
            SPSA([theta], **kwargs)
    with pytest.raises(TypeError, match="SPSA: seed must be an int"):
        SPSA([theta], seed="1")
