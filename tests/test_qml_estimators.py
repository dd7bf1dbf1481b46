"""scikit-learn estimators of tql.qml (QuantumKernelSVC/SVR, QuantumNeuralClassifier/Regressor):
kernels against the dense NumPy oracle, sklearn integration (clone, Pipeline, cross_val_score,
GridSearchCV, pickling, a subset of sklearn's estimator checks), training and input errors."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

sklearn = pytest.importorskip("sklearn")
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from sklearn.utils import estimator_checks as ec  # noqa: E402

import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.qml import datasets  # noqa: E402
from torchquantum_layers.qml.estimators import (QuantumKernelSVC, QuantumKernelSVR,  # noqa: E402
                                                QuantumNeuralClassifier, QuantumNeuralRegressor)

from . import oracle  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..")


# ------------------------------------------------------------------------------------------------
# the dense oracle: the feature maps written out gate by gate
def oracle_states(X, encoding, reps):
    X = np.asarray(X, dtype=np.float64)
    B, n = X.shape
    state = np.zeros((B, 2 ** n), dtype=np.complex128)
    state[:, 0] = 1
    ops = []
    for _ in range(reps):
        for w in range(n):
            ops.append(("H", w, ()))
        for w in range(n):
            ops.append(("RZ", w, (2 * X[:, w] if encoding == "zz" else X[:, w],)))
        for i in range(n):
            for j in range(i + 1, n):
                angle = 2 * (np.pi - X[:, i]) * (np.pi - X[:, j]) if encoding == "zz" else X[:, i] * X[:, j]
                ops.append(("RZZ", (i, j), (angle,)))
    return oracle.run_ops(ops, n, state)


def oracle_kernel(X1, X2, encoding="zz", reps=2):
    a, b = oracle_states(X1, encoding, reps), oracle_states(X2, encoding, reps)
    return np.abs(a.conj() @ b.T) ** 2


def oracle_projected(X1, X2, gamma, encoding="zz", reps=2):
    def rdms(states):
        n = int(np.log2(states.shape[1]))
        out = []
        for k in range(n):
            psi = states.reshape(len(states), 2 ** k, 2, 2 ** (n - k - 1))
            out.append(np.einsum("bpis,bpjs->bij", psi, psi.conj()))        # ρ_k = Tr_rest |ψ⟩⟨ψ|
        return np.stack(out, 1)
    r1, r2 = rdms(oracle_states(X1, encoding, reps)), rdms(oracle_states(X2, encoding, reps))
    d = np.abs(r1[:, None] - r2[None]) ** 2
    return np.exp(-gamma * d.sum(axis=(2, 3, 4)))


def toy(n=40, seed=0, features=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, np.pi, size=(n, features))
    y = (np.sin(X[:, 0]) * np.cos(X[:, 1]) > 0.2).astype(int)
    return X, y


# ------------------------------------------------------------------------------------------------
# kernel estimators
@pytest.mark.parametrize("encoding", ["zz", "iqp"])
@pytest.mark.parametrize("dtype,tol", [("complex64", 2e-5), ("complex128", 1e-12)])
def test_kernel_matrix_matches_oracle(encoding, dtype, tol):
    X, y = toy(30, features=3)
    Xt = toy(7, seed=1, features=3)[0]
    est = QuantumKernelSVC(encoding=encoding, reps=2, dtype=dtype, batch_size=8).fit(X, y)
    np.testing.assert_allclose(est.kernel_matrix(X), oracle_kernel(X, X, encoding), atol=tol, rtol=0)
    np.testing.assert_allclose(est.kernel_matrix(Xt, X), oracle_kernel(Xt, X, encoding), atol=tol, rtol=0)
    # the test kernel predict uses: support-vector columns from the cached states, zeros elsewhere
    K = est._test_kernel(Xt, "t")
    sv = est.support_
    np.testing.assert_allclose(K[:, sv], oracle_kernel(Xt, X[sv], encoding), atol=tol, rtol=0)
    assert np.all(np.delete(K, sv, axis=1) == 0)


def test_projected_kernel_matches_oracle():
    X, y = toy(20, features=3)
    est = QuantumKernelSVC(kernel="projected", gamma=0.7, dtype="complex128").fit(X, y)
    np.testing.assert_allclose(est.kernel_matrix(X), oracle_projected(X, X, 0.7), atol=1e-10, rtol=0)
    user = QuantumKernelSVC(tql.qml.ProjectedKernel(est.spec_.encoder, gamma=0.7, features="pauli")).fit(X, y)
    np.testing.assert_allclose(user.kernel_matrix(X), oracle_projected(X, X, 0.7), atol=1e-10, rtol=0)


def test_svc_equals_precomputed_svc_on_oracle_kernel():
    X, y = toy(40, features=3)
    Xt = toy(25, seed=2, features=3)[0]
    est = QuantumKernelSVC(reps=1, bandwidth=0.5, C=3.0, dtype="complex128").fit(X, y)
    ref = SVC(kernel="precomputed", C=3.0).fit(oracle_kernel(0.5 * X, 0.5 * X, reps=1), y)
    Kt = oracle_kernel(0.5 * Xt, 0.5 * X, reps=1)
    np.testing.assert_array_equal(est.predict(Xt), ref.predict(Kt))
    np.testing.assert_allclose(est.decision_function(Xt), ref.decision_function(Kt), atol=1e-8)
    np.testing.assert_array_equal(est.support_, ref.support_)
    assert est.score(Xt, ref.predict(Kt)) == 1.0


def test_kernel_estimators_accept_user_kernels_and_encoders():
    X, y = toy(30, features=2)
    enc = tql.templates.angle_encoding(tql.Circuit(2))
    a = QuantumKernelSVC(tql.qml.FidelityKernel(enc)).fit(X, y)
    b = QuantumKernelSVC(enc).fit(X, y)
    np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-6)
    expect = np.prod(np.cos((X[:, None] - X[None]) / 2) ** 2, axis=2)   # RY product states
    np.testing.assert_allclose(b.kernel_matrix(X), expect, atol=1e-5)
    with pytest.raises(TypeError, match="quantum_kernel must be"):
        QuantumKernelSVC(quantum_kernel="fidelity").fit(X, y)


def test_svr_fits_a_smooth_target():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(40, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1]
    est = QuantumKernelSVR(encoding="angle", C=10.0, epsilon=0.01).fit(X, y)
    assert est.score(X, y) > 0.95
    assert len(est.support_) <= 40


def test_pipeline_cross_val_and_grid_search():
    X, y = datasets.make_moons(48, noise=0.1, seed=0)
    pipe = make_pipeline(MinMaxScaler((0, np.pi)), QuantumKernelSVC(encoding="angle"))
    scores = cross_val_score(pipe, X, y, cv=3)
    assert scores.shape == (3,) and scores.mean() > 0.7
    grid = GridSearchCV(pipe, {"quantumkernelsvc__bandwidth": [0.5, 1.0], "quantumkernelsvc__C": [1.0, 10.0]},
                        cv=3).fit(X, y)
    assert set(grid.best_params_) == {"quantumkernelsvc__bandwidth", "quantumkernelsvc__C"}
    assert grid.score(X, y) > 0.7


# ------------------------------------------------------------------------------------------------
# variational estimators
def iris01(n=40):
    X, y = datasets.load_iris(classes=(0, 1))
    X = MinMaxScaler((0, np.pi)).fit_transform(X)
    idx = np.random.default_rng(0).permutation(len(y))[:n]
    return X[idx], y[idx]


def test_classifier_learns_a_separable_set_with_string_labels():
    X, y = iris01(40)
    labels = np.array(["setosa", "versicolor"])[y]
    clf = QuantumNeuralClassifier(n_layers=1, epochs=30, lr=0.1, random_state=0).fit(X, labels)
    assert list(clf.classes_) == ["setosa", "versicolor"]
    assert clf.score(X, labels) >= 0.95
    proba = clf.predict_proba(X)
    assert proba.shape == (40, 2) and np.allclose(proba.sum(1), 1)
    assert clf.loss_curve_[-1] < clf.loss_curve_[0] and clf.n_iter_ == 30


def test_parity_head_and_lbfgs():
    X, y = iris01(30)
    clf = QuantumNeuralClassifier(n_layers=1, head="parity", optimizer="lbfgs", lr=1.0, epochs=10,
                                  random_state=0).fit(X, y)
    assert clf.model_.head is None and clf.score(X, y) >= 0.9
    with pytest.raises(ValueError, match="parity.*2 classes"):
        QuantumNeuralClassifier(head="parity", epochs=1).fit(X[:6], [0, 1, 2, 0, 1, 2])


def test_seed_reproducibility_and_global_rng_untouched():
    X, y = toy(24, features=2)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    kw = dict(n_layers=1, epochs=4, batch_size=8, random_state=7)
    p1 = QuantumNeuralClassifier(**kw).fit(X, y).predict_proba(X)
    assert torch.rand(1) == before                       # fit left torch's global RNG alone
    p2 = QuantumNeuralClassifier(**kw).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(p1, p2)
    p3 = QuantumNeuralClassifier(**{**kw, "random_state": 8}).fit(X, y).predict_proba(X)
    assert not np.allclose(p1, p3)


def test_diff_methods_train_the_same_model():
    X, y = toy(16, features=2)
    kw = dict(n_layers=1, epochs=3, dtype="complex128", random_state=0)
    a = QuantumNeuralClassifier(diff_method="backprop", **kw).fit(X, y).predict_proba(X)
    b = QuantumNeuralClassifier(diff_method="adjoint", **kw).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(a, b, atol=1e-9)


def test_warm_start_and_partial_fit():
    X, y = toy(20, features=2)
    clf = QuantumNeuralClassifier(n_layers=1, epochs=2, warm_start=True, random_state=0).fit(X, y)
    w = clf.model_.layer.weights.detach().clone()
    clf.fit(X, y)
    assert clf.n_iter_ == 4 and not torch.equal(w, clf.model_.layer.weights)
    inc = QuantumNeuralClassifier(n_layers=1, random_state=0)
    with pytest.raises(ValueError, match="classes"):
        inc.partial_fit(X, y)
    inc.partial_fit(X[:10], y[:10], classes=[0, 1]).partial_fit(X[10:], y[10:])
    assert inc.n_iter_ == 2 and list(inc.classes_) == [0, 1]


def test_regressor():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, np.pi, size=(30, 2))
    y = 3 + 2 * np.cos(X[:, 0])
    reg = QuantumNeuralRegressor(n_layers=1, epochs=40, lr=0.1, random_state=0).fit(X, y)
    assert reg.score(X, y) > 0.9
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        QuantumNeuralRegressor(head="parity").fit(X, y)


# ------------------------------------------------------------------------------------------------
# scikit-learn conventions
SMALL = [QuantumKernelSVC(reps=1), QuantumKernelSVR(encoding="angle"),
         QuantumNeuralClassifier(n_layers=1, epochs=2), QuantumNeuralRegressor(n_layers=1, epochs=2)]


@pytest.mark.parametrize("est", SMALL, ids=lambda e: type(e).__name__)
def test_clone_get_params_round_trip(est):
    est = clone(est).set_params(random_state=3) if "random_state" in est.get_params() else clone(est)
    params = est.get_params()
    twin = clone(est)
    assert twin is not est and twin.get_params() == params
    assert type(est)(**params).get_params() == params


@pytest.mark.parametrize("est", SMALL, ids=lambda e: type(e).__name__)
def test_pickle_fitted_estimator(est):
    X, y = toy(20, features=2)
    fitted = clone(est).fit(X, y)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict(X), fitted.predict(X))


# the API checks of sklearn.utils.estimator_checks (fast). The full check_estimator run (about
# 3 minutes for the four) passes except where noted in the module docstring of estimators.py.
API_CHECKS = ["check_no_attributes_set_in_init", "check_parameters_default_constructible",
              "check_get_params_invariance", "check_set_params", "check_estimators_unfitted",
              "check_fit_check_is_fitted", "check_n_features_in", "check_dont_overwrite_parameters",
              "check_estimators_fit_returns_self", "check_estimators_nan_inf", "check_dtype_object",
              "check_complex_data", "check_requires_y_none", "check_fit2d_1feature"]


@pytest.mark.parametrize("check", API_CHECKS)
@pytest.mark.parametrize("est", SMALL, ids=lambda e: type(e).__name__)
def test_sklearn_api_checks(est, check):
    getattr(ec, check)(type(est).__name__, clone(est))


# ------------------------------------------------------------------------------------------------
# input errors
def fitted_clf():
    X, y = toy(12, features=3)
    return QuantumKernelSVC(reps=1).fit(X, y), QuantumNeuralClassifier(n_layers=1, epochs=1).fit(X, y)


def test_wrong_feature_count_at_predict():
    for est in fitted_clf():
        with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
            est.predict(np.zeros((2, 2)))


def test_nan_inputs():
    X, y = toy(12, features=3)
    X[3, 1] = np.nan
    for est in (QuantumKernelSVC(), QuantumNeuralClassifier(epochs=1)):
        with pytest.raises(ValueError, match="contains NaN"):
            est.fit(X, y)


def test_one_class_only():
    X, _ = toy(12, features=3)
    for est in (QuantumKernelSVC(), QuantumNeuralClassifier(epochs=1)):
        with pytest.raises(ValueError, match="only 1 class"):
            est.fit(X, np.zeros(12))


def test_non_numeric_x():
    X = np.array([["a", "b"], ["c", "d"], ["e", "f"]])
    for est in (QuantumKernelSVC(), QuantumNeuralClassifier(epochs=1)):
        with pytest.raises(ValueError, match="could not convert string to float"):
            est.fit(X, [0, 1, 0])


def test_too_many_features_for_qubits():
    with pytest.raises(ValueError, match="30 qubits"):
        QuantumKernelSVC().fit(np.zeros((4, 30)), [0, 1, 0, 1])


def test_imports_without_sklearn_and_constructing_raises():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "import torchquantum_layers as tql\n"
            "from torchquantum_layers.qml import QuantumKernelSVC\n"
            "try:\n    QuantumKernelSVC()\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "IMPORTERROR" in out.stdout and "[data]" in out.stdout
