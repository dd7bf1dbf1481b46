"""tql.qml: the fidelity kernel against NumPy overlaps of oracle states, its matrix properties,
scikit-learn's SVC, and the data-set generators and splits."""
import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import qml
from torchquantum_layers.layers import QuantumLayer
from torchquantum_layers.qml import datasets as D

from . import oracle
from .conftest import REAL

HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None
needs_sklearn = pytest.mark.skipif(not HAS_SKLEARN, reason="scikit-learn is optional (the 'data' extra)")
EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def encoder_circuit(dtype=None):
    """H; RZ(x0), RY(x1); CNOT; RX(x2) on wire 2; a fixed trainable RY; CRZ."""
    c = tql.Circuit(3, dtype=dtype)
    for w in range(3):
        c.h(w)
    c.rz(0, input=0)
    c.ry(1, input=1)
    c.cnot(0, 1)
    c.rx(2, input=2, scale=0.5)
    c.ry(1, 0.3)
    c.crz(1, 2, input=0)
    return c


def oracle_states(X):
    ops = [("H", w, ()) for w in range(3)]
    ops += [("RZ", 0, (X[:, 0],)), ("RY", 1, (X[:, 1],)), ("CNOT", (0, 1), ()), ("RX", 2, (0.5 * X[:, 2],)),
            ("RY", 1, (0.3,)), ("CRZ", (1, 2), (X[:, 0],))]
    zero = np.tile(np.eye(8)[0].astype(complex), (len(X), 1))
    return oracle.run_ops(ops, 3, zero)


def test_fidelity_kernel_matches_numpy_overlaps(dtype, device, atol):
    rng = np.random.default_rng(0)
    X1, X2 = rng.uniform(-3, 3, (5, 3)), rng.uniform(-3, 3, (4, 3))
    enc = encoder_circuit(dtype).to(device)
    real = REAL[dtype]
    K = qml.fidelity_kernel(enc, torch.tensor(X1, dtype=real, device=device),
                            torch.tensor(X2, dtype=real, device=device))
    s1, s2 = oracle_states(X1), oracle_states(X2)
    expected = np.abs(s1.conj() @ s2.T) ** 2
    assert K.shape == (5, 4) and K.dtype == real and K.device.type == device
    np.testing.assert_allclose(K.cpu().numpy(), expected, atol=10 * atol)


def test_training_kernel_is_symmetric_psd_with_unit_diagonal(dtype, atol):
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, (12, 3))
    K = qml.fidelity_kernel(encoder_circuit(dtype), torch.tensor(X, dtype=REAL[dtype]))
    assert torch.equal(K, K.T)
    torch.testing.assert_close(torch.diagonal(K), torch.ones(12, dtype=K.dtype), atol=10 * atol, rtol=0)
    assert torch.linalg.eigvalsh(K.double()).min() > -50 * atol
    assert float(K.min()) >= 0 and float(K.max()) <= 1 + 10 * atol
    s = oracle_states(X)
    np.testing.assert_allclose(K.numpy(), np.abs(s.conj() @ s.T) ** 2, atol=10 * atol)


def test_numpy_in_numpy_out_and_encoder_kinds():
    rng = np.random.default_rng(2)
    X1, X2 = rng.uniform(-2, 2, (6, 3)), rng.uniform(-2, 2, (3, 3))
    enc = encoder_circuit(torch.complex128)
    K = qml.fidelity_kernel(enc, X1, X2)
    assert isinstance(K, np.ndarray) and K.dtype == np.float64 and K.shape == (6, 3)
    np.testing.assert_allclose(K, np.abs(oracle_states(X1).conj() @ oracle_states(X2).T) ** 2, atol=1e-10)
    # a QuantumLayer encoder uses its input map (IQP products) then its circuit
    layer = QuantumLayer.from_template(3, 0, encoding="iqp", ansatz="none", dtype=torch.complex128)
    Kl = qml.fidelity_kernel(layer, X1, X2)
    Kc = qml.fidelity_kernel(layer.circuit, tql.templates.iqp_features(torch.tensor(X1)),
                             tql.templates.iqp_features(torch.tensor(X2)))
    np.testing.assert_allclose(Kl, Kc.numpy(), atol=1e-12)
    # any callable X -> states, and chunked encoding gives the same matrix
    Kf = qml.fidelity_kernel(lambda x: enc(x), X1, X2)
    np.testing.assert_allclose(Kf, K, atol=1e-12)
    np.testing.assert_allclose(qml.fidelity_kernel(enc, X1, X2, batch_size=4), K, atol=1e-12)
    # a list of samples and a single sample (F,)
    assert qml.fidelity_kernel(enc, X1.tolist()).shape == (6, 6)
    assert qml.fidelity_kernel(enc, torch.tensor(X1[0]), torch.tensor(X2)).shape == (1, 3)


def test_each_set_is_encoded_once():
    """No loop over pairs: the encoder runs once per data set, the Gram matrix is one product."""
    enc = encoder_circuit()
    calls = []

    def counting(x):
        calls.append(x.shape[0])
        return enc(x)
    qml.fidelity_kernel(counting, torch.rand(7, 3), torch.rand(5, 3))
    assert calls == [7, 5]
    calls.clear()
    qml.fidelity_kernel(counting, torch.rand(7, 3))
    assert calls == [7]


def test_kernel_is_differentiable_in_weights_and_inputs():
    c = tql.Circuit(2, dtype=torch.complex128)
    c.ry(0, input=0)
    c.ry(1, input=1)
    c.rx(0, trainable=True)     # before the CNOT: RX(w)† ... RX(w) does not cancel in ⟨φ1|φ2⟩
    c.cnot(0, 1)
    c.rz(1, input=0)
    with torch.no_grad():
        c.weights.fill_(0.7)
    g = torch.Generator().manual_seed(4)
    x1 = torch.rand(3, 2, dtype=torch.float64, generator=g).requires_grad_()
    x2 = torch.rand(2, 2, dtype=torch.float64, generator=g)

    assert torch.autograd.gradcheck(lambda a: qml.fidelity_kernel(c, a, x2), (x1,), eps=1e-6, atol=1e-6)
    K = qml.fidelity_kernel(c, x1, x2)
    K.sum().backward()
    # the weight's gradient against a central finite difference
    h = 1e-6
    with torch.no_grad():
        c.weights += h
        up = qml.fidelity_kernel(c, x1, x2).sum()
        c.weights -= 2 * h
        down = qml.fidelity_kernel(c, x1, x2).sum()
        c.weights += h
    fd = float((up - down) / (2 * h))
    assert abs(fd) > 1e-3 and abs(float(c.weights.grad[0]) - fd) < 1e-6


def test_kernel_rejects_bad_input():
    enc = encoder_circuit()
    with pytest.raises(TypeError, match="encoder must be"):
        qml.fidelity_kernel(3, torch.rand(2, 3))
    with pytest.raises(ValueError, match="reads 3 feature.*X2 has 2"):
        qml.fidelity_kernel(enc, torch.rand(2, 3), torch.rand(2, 2))
    with pytest.raises(ValueError, match=r"X1 must have shape \(N, F\)"):
        qml.fidelity_kernel(enc, torch.rand(2, 3, 1))
    with pytest.raises(ValueError, match="X1 has no samples"):
        qml.fidelity_kernel(enc, torch.rand(0, 3))
    with pytest.raises(ValueError, match="NaN"):
        qml.fidelity_kernel(enc, np.array([[0.0, np.nan, 1.0]]))
    with pytest.raises(TypeError, match="real numbers"):
        qml.fidelity_kernel(enc, torch.rand(2, 3, dtype=torch.complex64))
    with pytest.raises(TypeError, match="array of numbers"):
        qml.fidelity_kernel(enc, [["a", "b", "c"]])
    with pytest.raises(ValueError, match="reads no input"):
        qml.fidelity_kernel(tql.Circuit(2), torch.rand(2, 0))
    with pytest.raises(ValueError, match="callable must return states"):
        qml.fidelity_kernel(lambda x: x.sum(1), torch.rand(2, 3))
    with pytest.raises(ValueError, match="batch_size"):
        qml.fidelity_kernel(enc, torch.rand(2, 3), batch_size=0)
    with pytest.raises(TypeError, match="encoder must be"):
        qml.FidelityKernel("iqp")


def test_callable_encoder_must_return_normalised_states():
    """|<a|b>|^2 of unnormalised vectors is no fidelity: K[i, i] was ||a||^4 and could exceed 1."""
    rng = np.random.default_rng(8)
    X = rng.uniform(0.1, 2, (5, 4))
    with pytest.raises(ValueError, match=r"unnormalised state: sample \d has squared norm [0-9.]+, not 1"):
        qml.fidelity_kernel(lambda x: x.to(torch.complex128), X)         # raw features as amplitudes
    with pytest.raises(ValueError, match="unnormalised state: sample 0"):
        qml.fidelity_kernel(lambda x: torch.zeros(x.shape[0], 4, dtype=torch.complex128), X)
    with pytest.raises(ValueError, match="2\\*\\*n amplitudes, got 3"):
        qml.fidelity_kernel(lambda x: x[:, :3] / x[:, :3].norm(dim=1, keepdim=True), X)
    # normalised states pass and give NumPy's overlaps (real amplitude-encoded vectors: (a.b)^2)
    K = qml.fidelity_kernel(lambda x: tql.templates.amplitude_encoding(x, 2), X)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(K, (U @ U.T) ** 2, atol=1e-6)
    np.testing.assert_allclose(np.diag(K), 1, atol=1e-6)


@needs_sklearn
def test_svc_with_precomputed_and_callable_kernels():
    from sklearn.svm import SVC
    X, y = D.make_moons(160, noise=0.1, seed=0)
    xtr, ytr, _, _, xte, yte = D.train_val_test_split(X, y, 0, 0.25, seed=0)
    sc = D.Scaler("standard").fit(xtr)
    xtr, xte = sc.transform(xtr), sc.transform(xte)
    enc = QuantumLayer.from_template(4, 0, encoding="angle", ansatz="none", n_features=2)
    svc = SVC(kernel="precomputed", C=10).fit(qml.fidelity_kernel(enc, xtr), ytr)
    pred = svc.predict(qml.fidelity_kernel(enc, xte, xtr))
    assert (pred == yte).mean() >= 0.95
    svc2 = SVC(kernel=qml.FidelityKernel(enc), C=10).fit(xtr, ytr)
    assert (svc2.predict(xte) == pred).all()


@needs_sklearn
def test_quantum_kernel_svm_example_runs():
    spec = importlib.util.spec_from_file_location("quantum_kernel_svm", EXAMPLES / "quantum_kernel_svm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(n_samples=120, verbose=False)
    assert out["test_acc"] >= 0.9 and out["kernel_time_s"] < 5
    assert mod.main(dataset="circles", encoding="iqp", n_samples=80, verbose=False)["test_acc"] >= 0.9


# ------------------------------------------------------------------------------------------------
# data sets
def test_make_circles_follows_paddles_geometry_and_is_seeded():
    X, y = D.make_circles(500, gap=0.5, radius=0.7, seed=3)
    r = np.linalg.norm(X, axis=1)
    assert X.shape == (500, 2) and X.dtype == np.float32 and y.dtype == np.int64
    assert np.all(np.abs(X) <= 1)
    assert np.all((r < 0.45) | (r > 0.95))                 # nothing in the gap
    assert np.array_equal(y, (r > 0.7).astype(np.int64))  # label by radius
    assert 0.1 < y.mean() < 0.9
    X2, y2 = D.make_circles(500, seed=3)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert not np.array_equal(X, D.make_circles(500, seed=4)[0])
    with pytest.raises(ValueError, match="inside"):
        D.make_circles(10, gap=1.5)
    with pytest.raises(ValueError, match="gap"):
        D.make_circles(10, gap=-0.1)
    with pytest.raises(TypeError, match="n_samples"):
        D.make_circles(10.0)


def test_make_moons_points_lie_on_the_two_arcs():
    X, y = D.make_moons(101, noise=0.0, seed=0)
    assert X.shape == (101, 2) and (y == 0).sum() == 50 and (y == 1).sum() == 51
    a, b = X[y == 0], X[y == 1]
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(b - [1, 0.5], axis=1), 1, atol=1e-6)
    assert (a[:, 1] >= -1e-6).all() and (b[:, 1] <= 0.5 + 1e-6).all()
    Xn, yn = D.make_moons(101, noise=0.1, seed=0)
    assert np.array_equal(yn, y) and 0.03 < np.abs(Xn - X).mean() < 0.2
    with pytest.raises(ValueError, match="noise"):
        D.make_moons(10, noise=-1)


def test_split_is_stratified_disjoint_and_seeded():
    X = np.arange(100, dtype=np.float32)[:, None]
    y = np.array([0] * 60 + [1] * 40)
    parts = D.train_val_test_split(X, y, 0.2, 0.1, seed=5)
    xtr, ytr, xva, yva, xte, yte = parts
    assert (len(xtr), len(xva), len(xte)) == (70, 20, 10)
    assert (yva == 0).sum() == 12 and (yte == 0).sum() == 6
    ids = np.concatenate([xtr, xva, xte])[:, 0]
    assert sorted(ids.tolist()) == list(range(100))
    again = D.train_val_test_split(X, y, 0.2, 0.1, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    assert not np.array_equal(D.train_val_test_split(X, y, 0.2, 0.1, seed=6)[0], xtr)
    assert len(D.train_val_test_split(X, y, 10, 20, seed=0)[4]) == 20
    with pytest.raises(ValueError, match="no training samples"):
        D.train_val_test_split(X, y, 0.5, 0.5)
    with pytest.raises(ValueError, match="samples but y"):
        D.train_val_test_split(X, y[:10])


def test_scaler():
    X = np.array([[0.0, 10.0], [2.0, 30.0], [4.0, 20.0]])
    mm = D.Scaler("minmax").fit(X)
    out = mm.transform(X)
    np.testing.assert_allclose(out.min(0), 0, atol=1e-6)
    np.testing.assert_allclose(out.max(0), math.pi, atol=1e-6)
    st = D.Scaler("standard").fit_transform(X)
    np.testing.assert_allclose(st.mean(0), 0, atol=1e-6)
    np.testing.assert_allclose(st.std(0), 1, atol=1e-6)
    np.testing.assert_array_equal(D.Scaler("none").fit_transform(X), X.astype(np.float32))
    with pytest.raises(ValueError, match="method"):
        D.Scaler("robust")
    with pytest.raises(RuntimeError, match="fit"):
        D.Scaler().transform(X)


@needs_sklearn
def test_iris_and_digits_class_selection():
    X, y = D.load_iris(classes=(2, 0))
    assert X.shape == (100, 4) and sorted(set(y.tolist())) == [0, 1]
    X, y = D.load_digits()
    assert X.shape == (1797, 64) and X.max() == 1.0 and len(set(y.tolist())) == 10
    with pytest.raises(ValueError, match="classes"):
        D.load_iris(classes=(0, 7))


def test_missing_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"torchquantum-layers\[data\]"):
        D.load_iris()
    with pytest.raises(ImportError, match="scikit-learn"):
        D.load_digits()
