"""Noisy QuantumLayer and the noisy HybridClassifier against independent references.

Oracle: dense NumPy density matrices written here (Kronecker-product gate matrices from
``tests/oracle.py``, the channels' Kraus operators in NumPy, noise applied by the rules' own
definition), readout errors by brute force over bitstrings (rotate to the measured basis, push the
bitstring probabilities through the per-wire confusion matrices), zero-noise extrapolation from the
oracle's globally folded circuits, gradients by central finite differences of the oracle.
"""
import copy
import io
import logging
import math
import pickle
import warnings

import numpy as np
import pytest
import torch

import torchquantum_layers as tql

from . import oracle as O
from .conftest import REAL

mx = tql.mixed

# ------------------------------------------------------------------------------------------------
# the circuit: three angle-encoded inputs, six trainable angles, two CNOTs
N_WIRES = 3
GATES = [("RY", (0,), "x", 0), ("RY", (1,), "x", 1), ("RX", (2,), "x", 2),
         ("RY", (0,), "w", 0), ("RX", (1,), "w", 1), ("RY", (2,), "w", 2),
         ("CNOT", (0, 1), None, None), ("CNOT", (1, 2), None, None),
         ("RZ", (1,), "w", 3), ("RY", (2,), "w", 4), ("RX", (0,), "w", 5)]
THETA = np.array([0.4, -1.1, 0.9, 0.7, -0.3, 1.3])
OBSERVABLES = ["Z0", "X1", "Z0 Z2", "Y2"]
LABELS = ["ZII", "IXI", "ZIZ", "IIY"]          # the same, as oracle Pauli labels (wire 0 first)
P_DEP, GAMMA, DEPHASE, P01, P10 = 0.08, 0.06, 0.1, 0.03, 0.07


def circuit(dtype=torch.complex128, theta=THETA):
    c = tql.Circuit(N_WIRES, dtype=dtype)
    for name, wires, kind, index in GATES:
        if kind == "x":
            c.add(name, wires, input=index)
        elif kind == "w":
            c.add(name, wires, trainable=True)
        else:
            c.add(name, wires)
    with torch.no_grad():
        c.weights.copy_(torch.as_tensor(theta))
    return c


def noise_model(p=P_DEP, gamma=GAMMA, dephase=DEPHASE, p01=P01, p10=P10, readout=True):
    nm = (tql.NoiseModel().add(mx.depolarizing(p), gates="CNOT").add(mx.amplitude_damping(gamma))
          .add(mx.phase_damping(dephase), wires=[2]))
    return nm.add_readout_error(p01, p10) if readout else nm


def features(batch=4, seed=0, dtype=torch.float64):
    return torch.as_tensor(np.random.default_rng(seed).uniform(-math.pi, math.pi, (batch, N_WIRES)), dtype=dtype)


# ------------------------------------------------------------------------------------------------
# NumPy oracle
def kraus_depolarizing(p):
    return [math.sqrt(1 - p) * O.I2] + [math.sqrt(p / 3) * P for P in (O.X, O.Y, O.Z)]


def kraus_amplitude_damping(g):
    return [np.array([[1, 0], [0, math.sqrt(1 - g)]], dtype=complex), np.array([[0, math.sqrt(g)], [0, 0]], dtype=complex)]


def kraus_phase_damping(g):
    return [np.diag([1, math.sqrt(1 - g)]).astype(complex), np.diag([0, math.sqrt(g)]).astype(complex)]


def oracle_rules(p=P_DEP, gamma=GAMMA, dephase=DEPHASE):
    """(Kraus list, gate names or None, wires or None), as NoiseModel.add documents them."""
    return [(kraus_depolarizing(p), {"CNOT"}, None), (kraus_amplitude_damping(gamma), None, None),
            (kraus_phase_damping(dephase), None, {2})]


def oracle_ops(x_row, theta):
    ops = []
    for name, wires, kind, index in GATES:
        params = () if kind is None else ((x_row[index] if kind == "x" else theta[index]),)
        ops.append((name, O.gate_matrix(name, *params), wires))
    return ops


def oracle_density(x_row, theta, rules, fold=1):
    """ρ after the circuit (globally folded to scale ``fold`` = 1, 3, 5…) with noise after each gate."""
    ops = oracle_ops(x_row, theta)
    backwards = [(name, u.conj().T, wires) for name, u, wires in reversed(ops)]
    ops = ops + (backwards + ops) * ((fold - 1) // 2)
    rho = np.zeros((2 ** N_WIRES, 2 ** N_WIRES), dtype=complex)
    rho[0, 0] = 1
    for name, u, wires in ops:
        full = O.full_operator(u, wires, N_WIRES)
        rho = full @ rho @ full.conj().T
        for kraus, names, only in rules:
            if names is not None and name not in names:
                continue
            if only is not None and not set(wires) & only:
                continue
            for w in wires:
                if only is None or w in only:
                    ks = [O.full_operator(k, [w], N_WIRES) for k in kraus]
                    rho = sum(k @ rho @ k.conj().T for k in ks)
    return rho


_TO_Z = {"X": O.H, "Y": O.H @ np.diag([1, -1j]), "Z": O.I2, "I": O.I2}     # U P U† = Z


def read_value(rho, label, p01=0.0, p10=0.0):
    """⟨P⟩ as read out: measure in P's eigenbasis, flip each measured bit with P(1|0) = p01,
    P(0|1) = p10, average the product of the read eigenvalues (brute force over bitstrings)."""
    u = O.kron(*(_TO_Z[ch] for ch in label))
    probs = np.real(np.diag(u @ rho @ u.conj().T))
    a = np.array([[1 - p01, p10], [p01, 1 - p10]])
    read = O.kron(*(a if ch != "I" else np.eye(2) for ch in label)).real @ probs
    support = [w for w, ch in enumerate(label) if ch != "I"]
    signs = [np.prod([1 - 2 * ((i >> (N_WIRES - 1 - w)) & 1) for w in support]) for i in range(2 ** N_WIRES)]
    return float(read @ np.array(signs))


def oracle_values(x, theta=THETA, rules=None, readout=(P01, P10), fold=1):
    rules = oracle_rules() if rules is None else rules
    x = np.asarray(x, dtype=np.float64)
    return np.array([[read_value(oracle_density(row, theta, rules, fold), lab, *readout) for lab in LABELS]
                     for row in x])


def oracle_gradients(x, weights_out, theta=THETA, h=1e-6, **kw):
    """d/dθ and d/dx of Σ weights_out · values, by central differences of the oracle."""
    x = np.asarray(x, dtype=np.float64)

    def f(xx, tt):
        return float((oracle_values(xx, tt, **kw) * weights_out).sum())
    g_theta = np.zeros_like(theta)
    for i in range(len(theta)):
        e = np.zeros_like(theta)
        e[i] = h
        g_theta[i] = (f(x, theta + e) - f(x, theta - e)) / (2 * h)
    g_x = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        g_x[idx] = (f(x + e, theta) - f(x - e, theta)) / (2 * h)
    return g_theta, g_x


def layer(dtype=torch.complex128, **kw):
    kw.setdefault("noise_model", noise_model())
    return tql.QuantumLayer(circuit(dtype), OBSERVABLES, **kw)


# ------------------------------------------------------------------------------------------------
# values
def test_density_layer_matches_the_numpy_density_oracle(dtype, device, atol):
    x = features(5, dtype=REAL[dtype])
    want = oracle_values(x)
    q = layer(dtype).to(device)
    out = q(x.to(device))
    assert out.shape == (5, 4) and out.dtype == REAL[dtype]
    np.testing.assert_allclose(out.detach().cpu().double().numpy(), want, atol=5 * atol, rtol=0)
    # a single sample (F,) gives (n_obs,)
    np.testing.assert_allclose(q(x[1].to(device)).detach().cpu().double().numpy(), want[1], atol=5 * atol, rtol=0)
    # the noise visibly matters: the pure-state values differ
    pure = oracle_values(x, rules=[], readout=(0.0, 0.0))
    assert np.abs(pure - want).max() > 0.05


def test_readout_mitigation_recovers_the_pre_readout_value(dtype, atol):
    x = features(4, seed=1, dtype=REAL[dtype])
    before_readout = oracle_values(x, readout=(0.0, 0.0))
    read = layer(dtype)(x).double().detach().numpy()
    mitigated = layer(dtype, mitigation="readout")(x).double().detach().numpy()
    np.testing.assert_allclose(mitigated, before_readout, atol=10 * atol, rtol=0)
    assert np.abs(read - before_readout).max() > 0.02         # the readout errors were there to undo


def test_zero_strength_noise_equals_the_noiseless_layer(dtype, atol):
    x = features(4, seed=2, dtype=REAL[dtype]).requires_grad_(True)
    zero = noise_model(p=0.0, gamma=0.0, dephase=0.0, p01=0.0, p10=0.0)
    pure = tql.QuantumLayer(circuit(dtype), OBSERVABLES)
    want = oracle_values(x.detach(), rules=[], readout=(0.0, 0.0))
    out_pure = pure(x)
    np.testing.assert_allclose(out_pure.double().detach().numpy(), want, atol=5 * atol, rtol=0)
    g_pure = torch.autograd.grad(out_pure.sum(), [x, pure.weights])
    for kw in (dict(), dict(simulator="trajectories", n_trajectories=3, seed=0)):
        noisy = tql.QuantumLayer(circuit(dtype), OBSERVABLES, noise_model=zero, **kw)
        out = noisy(x)
        torch.testing.assert_close(out, out_pure, atol=5 * atol, rtol=0)
        for a, b in zip(torch.autograd.grad(out.sum(), [x, noisy.weights]), g_pure):
            torch.testing.assert_close(a, b, atol=20 * atol, rtol=0)


def test_zne_layer_equals_richardson_over_the_oracles_folded_circuits(dtype, atol):
    x = features(3, seed=3, dtype=REAL[dtype])
    e1 = oracle_values(x, readout=(0.0, 0.0), fold=1)
    e3 = oracle_values(x, readout=(0.0, 0.0), fold=3)
    want = (3 * e1 - e3) / 2                                   # the line through (1, E1), (3, E3) at 0
    q = layer(dtype, mitigation="zne+readout", zne_scale_factors=[1, 3])
    np.testing.assert_allclose(q(x).double().detach().numpy(), want, atol=20 * atol, rtol=0)
    # and closer to the noiseless values than the raw noisy ones
    pure = oracle_values(x, rules=[], readout=(0.0, 0.0))
    assert np.abs(want - pure).mean() < 0.75 * np.abs(oracle_values(x) - pure).mean()


# ------------------------------------------------------------------------------------------------
# gradients
@pytest.mark.parametrize("method", ["backprop", "parameter-shift"])
def test_gradients_match_finite_differences_of_the_oracle(method):
    x = features(3, seed=4).requires_grad_(True)
    weights_out = np.random.default_rng(5).normal(size=(3, 4))
    q = layer(diff_method=method)
    assert q.diff_method == method
    (q(x) * torch.as_tensor(weights_out)).sum().backward()
    g_theta, g_x = oracle_gradients(x.detach(), weights_out)
    np.testing.assert_allclose(q.weights.grad.numpy(), g_theta, atol=1e-7, rtol=0)
    np.testing.assert_allclose(x.grad.numpy(), g_x, atol=1e-7, rtol=0)


def test_gradcheck_of_the_noisy_layer_in_float64():
    q = layer(mitigation="readout")
    x = features(2, seed=6).requires_grad_(True)
    assert torch.autograd.gradcheck(q, (x,), eps=1e-6, atol=1e-6)


def test_auto_resolves_to_backprop_or_parameter_shift_with_shots():
    assert layer(diff_method="auto").diff_method == "backprop"
    assert layer(diff_method="auto", shots=10, seed=0).diff_method == "parameter-shift"


# ------------------------------------------------------------------------------------------------
# trajectories and shots
def test_trajectories_converge_to_the_density_values_and_gradients():
    x = features(3, seed=7).requires_grad_(True)
    exact = torch.as_tensor(oracle_values(x.detach()))
    q = layer(simulator="trajectories", n_trajectories=300, seed=11)
    dense = layer()
    dense(x).sum().backward()
    exact_grad = dense.weights.grad.clone()
    runs, grads = [], []
    for _ in range(8):                 # every forward pass draws new trajectories
        q.zero_grad()
        out = q(x)
        out.sum().backward()
        runs.append(out.detach())
        grads.append(q.weights.grad.clone())
    runs, grads = torch.stack(runs), torch.stack(grads)
    assert not torch.equal(runs[0], runs[1])
    se = runs.std(0) / math.sqrt(len(runs))
    assert ((runs.mean(0) - exact).abs() <= 5 * se + 1e-3).all()
    g_se = grads.std(0) / math.sqrt(len(grads))
    assert ((grads.mean(0) - exact_grad).abs() <= 5 * g_se + 1e-3).all()
    # seeded: a fresh layer (or reset_generator) repeats the sequence
    q.reset_generator()
    torch.testing.assert_close(q(x), runs[0], rtol=0, atol=0)
    torch.testing.assert_close(layer(simulator="trajectories", n_trajectories=300, seed=11)(x), runs[0],
                               rtol=0, atol=0)


def test_trajectories_of_mixed_unitary_noise_take_adjoint_and_parameter_shift():
    x = features(2, seed=8).requires_grad_(True)
    pauli = tql.NoiseModel().add(mx.depolarizing(0.1))
    grads = []
    for method in ("backprop", "adjoint", "parameter-shift"):
        q = layer(noise_model=pauli, simulator="trajectories", n_trajectories=50, seed=3, diff_method=method)
        out = q(x)
        grads.append((out.detach(), *torch.autograd.grad(out.sum(), [x, q.weights])))
    for other in grads[1:]:          # the same seeded draws: the same unitary circuits
        for a, b in zip(other, grads[0]):
            torch.testing.assert_close(a, b, atol=1e-9, rtol=0)


def test_shots_sample_the_noisy_read_out_distribution():
    x = features(2, seed=9)
    shots = 20000
    want = oracle_values(x)
    q = layer(shots=shots, seed=5)
    assert q.diff_method == "parameter-shift"
    out = q(x)
    assert (out - torch.as_tensor(want)).abs().max() < 5 / math.sqrt(shots)   # |each read value| <= 1
    assert not torch.equal(out, q(x))
    # the parameter-shift gradient of the estimates estimates the exact gradient
    g_theta, _ = oracle_gradients(x, np.ones((2, 4)))
    q.zero_grad()
    q(x).sum().backward()
    assert np.abs(q.weights.grad.numpy() - g_theta).max() < 8 * 8 / math.sqrt(shots)


# ------------------------------------------------------------------------------------------------
# as a module
def test_noisy_layer_trains_inside_a_sequential_with_adam():
    torch.manual_seed(0)
    q = tql.QuantumLayer.from_template(3, 1, noise_model=noise_model(), mitigation="readout")
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), q, torch.nn.Linear(3, 1))
    x = torch.rand(16, 2) * 2 - 1
    y = (x[:, :1] * x[:, 1:]).sign()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(15):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        assert model[0].weight.grad.abs().sum() > 0 and q.weights.grad.abs().sum() > 0
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0]


def test_state_dict_weights_only_deepcopy_and_pickle(tmp_path):
    x = features(3, seed=10)
    for kw in (dict(), dict(simulator="trajectories", n_trajectories=20, seed=2, mitigation="readout")):
        q = layer(**kw)
        first = q(x)
        assert list(q.state_dict()) == ["circuit.weights"]       # the noise model is configuration
        torch.save(q.state_dict(), tmp_path / "w.pt")
        fresh = tql.QuantumLayer(circuit(theta=np.zeros(6)), OBSERVABLES, noise_model=noise_model(), **kw)
        fresh.load_state_dict(torch.load(tmp_path / "w.pt", weights_only=True))
        for other in (fresh, copy.deepcopy(q), pickle.loads(pickle.dumps(q))):
            assert other.is_noisy and other.simulator == q.simulator and other.mitigation == q.mitigation
            torch.testing.assert_close(other(x), first, rtol=0, atol=1e-12)   # copies restart from seed
        assert copy.deepcopy(q).noise_model is not q.noise_model
        buf = io.BytesIO()
        torch.save(q, buf)            # the whole module too (not weights_only)
        buf.seek(0)
        assert torch.load(buf, weights_only=False).noise_model.readout is not None


def test_torch_compile_gives_the_eager_values_and_gradients():
    q = layer(mitigation="readout")
    model = torch.nn.Sequential(torch.nn.Linear(2, 3, dtype=torch.float64), q)
    x = torch.rand(4, 2, dtype=torch.float64)
    eager = model(x)
    eager.sum().backward()
    grad = q.weights.grad.clone()
    q.zero_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch.compile(model, backend="aot_eager")(x)
        out.sum().backward()
    torch.testing.assert_close(out, eager, rtol=0, atol=1e-12)
    torch.testing.assert_close(q.weights.grad, grad, rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# bad inputs
def test_bad_noise_arguments_are_refused_with_the_argument_named():
    c = circuit
    with pytest.raises(TypeError, match="noise_model must be a tql.NoiseModel.*dict.*noise_model_from_spec"):
        tql.QuantumLayer(c(), OBSERVABLES, noise_model={"channels": []})
    with pytest.raises(TypeError, match="noise_model must be a tql.NoiseModel or None, got str"):
        tql.QuantumLayer(c(), OBSERVABLES, noise_model="depolarizing")
    with pytest.raises(ValueError, match="simulator must be one of .*'density', 'trajectories'.*got 'mps'"):
        layer(simulator="mps")
    with pytest.raises(ValueError, match="diff_method='adjoint' cannot differentiate density matrices"):
        layer(diff_method="adjoint")
    with pytest.raises(ValueError, match="diff_method='adjoint' on trajectories needs every channel to be a mixture"):
        layer(simulator="trajectories", diff_method="adjoint")            # amplitude damping is not
    with pytest.raises(ValueError, match="diff_method='parameter-shift' on trajectories"):
        layer(simulator="trajectories", diff_method="parameter-shift")
    with pytest.raises(ValueError, match="shots=5 needs diff_method='parameter-shift'"):
        layer(shots=5, diff_method="backprop")
    big = tql.Circuit(13)
    big.ry(0, trainable=True)
    with pytest.raises(ValueError, match="13 wires need 0.5 GiB per sample.*at most 12.*simulator='trajectories'"):
        tql.QuantumLayer(big, ["Z0"], noise_model=noise_model())
    assert tql.QuantumLayer(big, ["Z0"], noise_model=noise_model(), simulator="trajectories").n_trajectories == 64
    for bad, err in ((0, ValueError), (2.5, TypeError), (True, TypeError)):
        with pytest.raises(err, match="n_trajectories must be"):
            layer(simulator="trajectories", n_trajectories=bad)
    with pytest.raises(ValueError, match="n_trajectories=8 applies to simulator='trajectories' only"):
        layer(n_trajectories=8)
    with pytest.raises(ValueError, match="mitigation must be None or one of .*got 'richardson'"):
        layer(mitigation="richardson")
    with pytest.raises(ValueError, match="mitigation='readout' needs readout errors"):
        layer(noise_model=noise_model(readout=False), mitigation="readout")
    with pytest.raises(ValueError, match="mitigation='zne' amplifies the gate noise.*no channel rules"):
        layer(noise_model=tql.NoiseModel().add_readout_error(0.1), mitigation="zne")
    with pytest.raises(ValueError, match="zne_scale_factors / zne_extrapolation apply only with mitigation='zne'"):
        layer(mitigation="readout", zne_scale_factors=[1, 3])
    with pytest.raises(ValueError, match="zne_scale_factors.*at least two"):
        layer(mitigation="zne", zne_scale_factors=[3])
    with pytest.raises(ValueError, match="zne_extrapolation must be one of .*got 'polynomial'"):
        layer(mitigation="zne", zne_extrapolation="polynomial")
    for kw, name in ((dict(simulator="trajectories"), "simulator='trajectories'"), (dict(mitigation="zne"), "mitigation"),
                     (dict(n_trajectories=4), "n_trajectories")):
        with pytest.raises(ValueError, match=f"{name} apply only to a noisy layer"):
            tql.QuantumLayer(c(), OBSERVABLES, **kw)
    with pytest.raises(TypeError, match="noise_model must be a tql.NoiseModel or None, got list"):
        tql.QuantumLayer.from_template(2, 1, noise_model=[1, 2])


# ------------------------------------------------------------------------------------------------
# HybridClassifier on a noisy device
pl = pytest.importorskip("pytorch_lightning")
yaml = pytest.importorskip("yaml")

NOISE_SPEC = {"channels": [{"channel": "depolarizing", "p": 0.02, "gates": ["CNOT"]},
                           {"channel": "amplitude_damping", "gamma": 0.01}],
              "readout": {"p01": 0.02, "p10": 0.05}}


@pytest.fixture
def quiet():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    torch.set_num_threads(old)


def _trainer(epochs):
    return pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)


def _noisy_fit(epochs, ckpt=None, save=None, **kw):
    from lightning_tasks.classifier import HybridClassifier
    from lightning_tasks.data import CirclesDataModule
    pl.seed_everything(0, verbose=False)
    dm = CirclesDataModule(n_train=24, n_val=8, n_test=8, batch_size=8, seed=2)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=2, n_layers=1, lr=0.1, noise=NOISE_SPEC,
                             mitigation="readout", **kw)
    t = _trainer(epochs)
    t.fit(model, datamodule=dm, ckpt_path=ckpt)
    if save is not None:
        t.save_checkpoint(save)
    return model, dm, t


def test_noisy_classifier_trains_and_resumes_from_a_checkpoint(tmp_path, quiet):
    from lightning_tasks.classifier import HybridClassifier
    kw = dict(simulator="trajectories", n_trajectories=16, quantum_seed=4)
    full, dm, t = _noisy_fit(2, **kw)
    assert full.quantum.is_noisy and full.quantum.simulator == "trajectories"
    assert full.quantum.noise_model.readout is not None and full.quantum.mitigation == "readout"
    assert math.isfinite(float(t.callback_metrics["train_loss"]))
    _noisy_fit(1, save=tmp_path / "half.ckpt", **kw)
    resumed, _, _ = _noisy_fit(2, ckpt=tmp_path / "half.ckpt", **kw)
    # the trajectory sampler's generator is restored: the resumed run draws what the full one drew
    assert torch.equal(resumed.quantum.weights, full.quantum.weights)
    assert torch.equal(resumed.head.weight, full.head.weight)
    ck = torch.load(tmp_path / "half.ckpt", weights_only=True)
    hp = yaml.safe_load(yaml.safe_dump(dict(ck["hyper_parameters"])))       # plain data: YAML round trip
    assert hp["noise"] == NOISE_SPEC and hp["simulator"] == "trajectories"
    clone = HybridClassifier(**hp)
    clone.load_state_dict(ck["state_dict"])
    x = torch.as_tensor(dm.splits()[0][:5])
    ref = HybridClassifier.load_from_checkpoint(tmp_path / "half.ckpt")
    clone.quantum.reset_generator()
    ref.quantum.reset_generator()
    torch.testing.assert_close(clone(x), ref(x), rtol=0, atol=0)


def test_noisy_classifier_learns_on_density_matrices(quiet):
    from lightning_tasks.classifier import HybridClassifier
    from lightning_tasks.data import CirclesDataModule
    pl.seed_everything(0, verbose=False)
    dm = CirclesDataModule(n_train=60, n_val=20, n_test=20, batch_size=20, seed=2)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=3, n_layers=2, encoding="reupload", lr=0.1,
                             noise=NOISE_SPEC, mitigation="zne+readout", zne_scale_factors=[1, 3])
    X, y = (torch.as_tensor(a) for a in dm.splits()[:2])

    def loss():
        with torch.no_grad():
            return float(torch.nn.functional.cross_entropy(model(X), y))
    before = loss()
    t = _trainer(10)
    t.fit(model, datamodule=dm)
    assert loss() < 0.8 * before
    test = t.test(model, datamodule=dm, verbose=False)[0]
    assert test["test_acc"] >= 0.75


def test_noisy_classifier_rejects_bad_noise_arguments():
    from lightning_tasks.classifier import HybridClassifier
    with pytest.raises(TypeError, match="HybridClassifier: noise must be a noise spec.*got NoiseModel"):
        HybridClassifier(2, 2, n_qubits=2, n_layers=1, noise=noise_model())
    with pytest.raises(ValueError, match="HybridClassifier: noise: channels\\[0\\]: unknown channel 'depolarising'"):
        HybridClassifier(2, 2, n_qubits=2, n_layers=1, noise={"channels": [{"channel": "depolarising", "p": 0.1}]})
    with pytest.raises(ValueError, match="HybridClassifier: mitigation must be None, 'zne', 'readout' or"):
        HybridClassifier(2, 2, n_qubits=2, n_layers=1, noise=NOISE_SPEC, mitigation="everything")
    with pytest.raises(ValueError, match="HybridClassifier: mitigation and the zne_ options apply only with noise="):
        HybridClassifier(2, 2, n_qubits=2, n_layers=1, mitigation="readout")
    with pytest.raises(ValueError, match="simulator must be one of"):
        HybridClassifier(2, 2, n_qubits=2, n_layers=1, noise=NOISE_SPEC, simulator="exact")
