"""scikit-learn estimators for quantum models: kernel SVMs (Qiskit's ``QSVC`` / ``QSVR``) and
variational classifiers / regressors (``VQC`` / ``VQR``).

* :class:`QuantumKernelSVC` / :class:`QuantumKernelSVR`: scikit-learn's ``SVC`` / ``SVR`` on a
  quantum kernel (fidelity ``|⟨φ(x)|φ(x')⟩|²`` or projected). ``fit`` simulates the training
  points once (batched, in memory-bounded row chunks) and hands the Gram matrix to
  ``SVC(kernel="precomputed")``; the states (or projected features) of the support vectors are
  kept, so ``predict`` / ``decision_function`` / ``score`` simulate the test points only and
  multiply them against the cached support-vector states.
* :class:`QuantumNeuralClassifier` / :class:`QuantumNeuralRegressor`: a
  :class:`~torchquantum_layers.QuantumLayer` (``from_template``: encoding, ansatz, ``n_layers``,
  readout) followed by a linear head (or the measured parity ``⟨Z⊗…⊗Z⟩`` read directly), trained
  by torch (Adam, SGD or L-BFGS) with a seed: same ``random_state``, same model.

They follow scikit-learn's conventions (``get_params`` / ``set_params`` / ``clone``, ``Pipeline``,
``cross_val_score``, ``GridSearchCV``, pickling; parameters are stored unchanged by ``__init__`` and
checked in ``fit``). scikit-learn is optional (``pip install 'torchquantum-layers[data]'``): this
module imports without it, and constructing an estimator without it raises ``ImportError``.

``sklearn.utils.estimator_checks.check_estimator`` (scikit-learn 1.9, default settings except
``reps=1`` and, for the variational ones, ``n_layers=1, epochs=5``) passes every check but these:

* ``check_sample_weight_equivalence_on_dense_data`` (kernel SVC / SVR): its data has 30 features,
  i.e. 30 qubits for the built encoders, which refuse more than ``MAX_QUBITS`` = 20;
* ``check_classifiers_train`` (variational classifier) with only 5 epochs (the default 100 pass);
  for the kernel SVC it fails on ``argmax(decision_function) == predict`` for 3 of 300 points,
  SVC's own one-vs-one voting with ``break_ties=False`` (passes with ``break_ties=True``).

The kernel SVC and all regressors declare ``poor_score`` (see their ``__sklearn_tags__``): the
checks' standardised, 10-feature data are far from what a default quantum kernel or a small
circuit fits well. The tests run the API subset of the checks (fast); the whole run takes minutes.
"""
from __future__ import annotations

import copy
import math
from typing import Optional

import numpy as np
import torch
from torch import nn

from ..circuit import Circuit
from ..kernels.state import REAL_OF
from .kernels import FidelityKernel, _encoder_parts, encode, encoder_width, row_chunk
from .projected import ProjectedKernel, _check_form, _check_gamma, projected_features, squared_distances

__all__ = ["QuantumKernelSVC", "QuantumKernelSVR", "QuantumNeuralClassifier", "QuantumNeuralRegressor",
           "KERNEL_ENCODINGS", "MAX_QUBITS"]

_EXTRA_HINT = ("needs scikit-learn, which is optional: install it with `pip install 'torchquantum-layers[data]'` "
               "(the `data` extra) or `pip install scikit-learn`")

try:  # scikit-learn is optional: the estimators need it, the rest of the library does not
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    HAVE_SKLEARN = True
except ImportError:  # pragma: no cover - exercised in a subprocess by the tests
    HAVE_SKLEARN = False

    class BaseEstimator:  # type: ignore[no-redef]
        """Stand-in without scikit-learn: constructing an estimator raises an ImportError."""

        def __new__(cls, *args, **kwargs):
            raise ImportError(f"{cls.__name__} {_EXTRA_HINT}")

    class ClassifierMixin:  # type: ignore[no-redef]
        pass

    class RegressorMixin:  # type: ignore[no-redef]
        pass

# encodings the kernel estimators build when no quantum_kernel is given
KERNEL_ENCODINGS = ("zz", "iqp", "angle")
# a built encoder puts one feature per qubit: 2**MAX_QUBITS amplitudes per sample at most
MAX_QUBITS = 20
_DTYPES = {"complex64": torch.complex64, "complex128": torch.complex128}


def _dtype(value, what):
    if isinstance(value, str) and value in _DTYPES:
        return _DTYPES[value]
    if value in (torch.complex64, torch.complex128):
        return value
    raise ValueError(f"{what}: dtype must be 'complex64' or 'complex128', got {value!r}")


_NO_Y = object()


def _validate(est, X, y=_NO_Y, *, reset: bool, what: str, **kw):
    """scikit-learn's ``validate_data`` (numeric float arrays, no NaN/inf, feature count checked
    against the fitted one; ``y`` given, even as None: ``(X, y)`` checked together), its
    ValueErrors prefixed with the estimator's name."""
    from sklearn.utils.validation import validate_data
    try:
        if y is _NO_Y:
            return validate_data(est, X, reset=reset, dtype=[np.float64, np.float32], **kw)
        return validate_data(est, X, y, reset=reset, dtype=[np.float64, np.float32], **kw)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None


def _check_number(value, name, what, *, positive=True, integer=False, allow_none=False, minimum=None):
    if value is None and allow_none:
        return None
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(float(value)):
        raise ValueError(f"{what}: {name} must be a finite {'int' if integer else 'number'}"
                         f"{' or None' if allow_none else ''}, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"{what}: {name} must be > 0, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{what}: {name} must be >= {minimum}, got {value!r}")
    return int(value) if integer else float(value)


# ----------------------------------------------------------------------------------------------
# kernel estimators
class ZZFeatureAngles(nn.Module):
    """``(B, n)`` → ``(B, n + n(n-1)/2)``: ``2 x_i`` then ``2 (π − x_i)(π − x_j)`` (i < j,
    lexicographic), the angles of Havlíček et al.'s ZZ feature map (Qiskit's ``ZZFeatureMap``) in
    the columns :func:`templates.iqp_encoding` reads."""

    def __init__(self, n_features: int):
        super().__init__()
        self.in_features = int(n_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.in_features
        i, j = torch.triu_indices(n, n, offset=1, device=x.device)
        s = math.pi - x
        return torch.cat([2 * x, 2 * s[:, i] * s[:, j]], dim=1)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}"


def build_kernel_encoder(n_features: int, encoding: str = "zz", reps: int = 2, dtype=torch.complex64):
    """The encoder a kernel estimator builds: a :class:`QuantumLayer` on ``n_features`` qubits.

    ``"zz"``: Havlíček et al.'s ZZ feature map (Qiskit's ``ZZFeatureMap(n, reps)``: per repeat H,
    ``P(2x_i)`` and ``RZZ(2(π − x_i)(π − x_j))`` on all pairs, up to a global phase);
    ``"iqp"``: PennyLane's ``IQPEmbedding`` (``RZ(x_i)``, ``RZZ(x_i x_j)``); ``"angle"``:
    ``RY(x_i)`` on wire ``i`` (a product state: ``k = Π cos²((x_i − x'_i)/2)``, ``reps`` unused).
    """
    from .. import templates as T
    from ..layers import QuantumLayer
    what = "build_kernel_encoder"
    if encoding not in KERNEL_ENCODINGS:
        raise ValueError(f"{what}: encoding must be one of {KERNEL_ENCODINGS}, got {encoding!r}")
    reps = _check_number(reps, "reps", what, integer=True)
    if n_features > MAX_QUBITS:
        raise ValueError(f"{what}: {n_features} features would be {n_features} qubits (2**{n_features} amplitudes "
                         f"per sample, at most {MAX_QUBITS} qubits): reduce the features first (e.g. PCA in a "
                         f"Pipeline) or pass a quantum_kernel of your own")
    if encoding == "angle":
        return QuantumLayer.from_template(n_features, 0, encoding="angle", ansatz="none", dtype=dtype)
    if encoding == "iqp":
        return QuantumLayer.from_template(n_features, 0, encoding="iqp", ansatz="none", dtype=dtype,
                                          encoding_kwargs={"n_repeats": reps})
    c = T.iqp_encoding(Circuit(n_features), n_repeats=reps)
    return QuantumLayer(c, "Z0", dtype=dtype, input_map=ZZFeatureAngles(n_features))


class _KernelSpec:
    """A resolved kernel: encoder, ``"fidelity"`` or ``"projected"``, gamma, feature form, chunk."""

    def __init__(self, encoder, kind, gamma=1.0, features="rdm", batch_size=None):
        self.encoder, self.kind, self.gamma, self.features, self.batch_size = (encoder, kind, gamma, features,
                                                                               batch_size)

    def rows(self, width: int, what: str) -> int:
        return row_chunk(self.batch_size, max(encoder_width(self.encoder), width), what)

    def embed(self, x: torch.Tensor, what: str) -> torch.Tensor:
        """What the kernel is computed from: states ``(N, 2**n)`` (fidelity) or float64 projected
        features (projected), in row chunks (only one chunk of states alive at once)."""
        rows = self.rows(1, what)
        out = []
        for i in range(0, x.shape[0], rows):
            psi = encode(self.encoder, x[i:i + rows], what=what, name="X")
            out.append(psi if self.kind == "fidelity" else projected_features(psi, self.features).to(torch.float64))
        return out[0] if len(out) == 1 else torch.cat(out, dim=0)

    def block(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Kernel block between embedded rows ``a`` and ``b`` (float64)."""
        if self.kind == "fidelity":
            ov = a.conj() @ b.to(a.dtype).transpose(0, 1)
            return (ov.real.square() + ov.imag.square()).to(torch.float64)
        return torch.exp(-self.gamma * squared_distances(a, b))

    def train_gram(self, x: torch.Tensor, what: str):
        """``(K(x, x) as float64 NumPy, embedded rows)``: exactly symmetric, built in row chunks."""
        e = self.embed(x, what)
        n = e.shape[0]
        rows = self.rows(n, what)
        K = torch.empty(n, n, dtype=torch.float64, device=e.device)
        for i in range(0, n, rows):
            K[i:i + rows] = self.block(e[i:i + rows], e)
        K = 0.5 * (K + K.transpose(0, 1))
        if self.kind == "projected":
            K.fill_diagonal_(1.0)
        return K.cpu().numpy(), e

    def cross_gram(self, x: torch.Tensor, e_ref: torch.Tensor, what: str) -> np.ndarray:
        """``K(x, ref)`` ``(N, M)``: the test rows are encoded and multiplied chunk by chunk
        against the cached embedded reference rows (the support vectors)."""
        m = e_ref.shape[0]
        rows = self.rows(max(m, 1), what)
        K = torch.empty(x.shape[0], m, dtype=torch.float64, device=e_ref.device)
        for i in range(0, x.shape[0], rows):
            e = self.embed(x[i:i + rows], what)
            if e.shape[1] != e_ref.shape[1]:
                raise ValueError(f"{what}: the test points were encoded into {e.shape[1]} values per sample but "
                                 f"the training points into {e_ref.shape[1]}")
            K[i:i + rows] = self.block(e, e_ref) if m else K[i:i + rows]
        return K.cpu().numpy()


class _QuantumKernelBase(BaseEstimator):
    """Shared fit / predict machinery of :class:`QuantumKernelSVC` and :class:`QuantumKernelSVR`."""

    _what = "QuantumKernel"

    def _spec(self, n_features: int) -> _KernelSpec:
        what = f"{type(self).__name__}.fit"
        qk = self.quantum_kernel
        if self.kernel not in ("fidelity", "projected"):
            raise ValueError(f"{what}: kernel must be 'fidelity' or 'projected', got {self.kernel!r}")
        _check_number(self.bandwidth, "bandwidth", what)
        if self.batch_size is not None:
            row_chunk(self.batch_size, 1, what)
        if qk is None:
            enc = build_kernel_encoder(n_features, self.encoding, self.reps, _dtype(self.dtype, what)) \
                if self.encoding in KERNEL_ENCODINGS else None
            if enc is None:
                raise ValueError(f"{what}: encoding must be one of {KERNEL_ENCODINGS}, got {self.encoding!r}")
            kind = self.kernel
        elif isinstance(qk, FidelityKernel):
            return _KernelSpec(copy.deepcopy(qk.encoder), "fidelity", batch_size=qk.batch_size or self.batch_size)
        elif isinstance(qk, ProjectedKernel):
            return _KernelSpec(copy.deepcopy(qk.encoder), "projected", qk.gamma, qk.features,
                               qk.batch_size or self.batch_size)
        else:
            try:
                _encoder_parts(qk, what)
            except TypeError:
                raise TypeError(f"{what}: quantum_kernel must be None, a tql.qml.FidelityKernel or ProjectedKernel, "
                                f"or an encoder (tql.Circuit, tql.QuantumLayer, callable X -> states), got "
                                f"{type(qk).__name__}") from None
            enc, kind = copy.deepcopy(qk), self.kernel
        gamma, features = 1.0, "rdm"
        if kind == "projected":
            gamma = _check_gamma(self.gamma, what)
            _check_form(self.features, what)
            features = self.features
        return _KernelSpec(enc, kind, gamma, features, self.batch_size)

    def _features(self, X, what):
        x = torch.as_tensor(np.array(X, dtype=np.float64) * float(self.bandwidth))
        circuit, _, _ = _encoder_parts(self.spec_.encoder, what)
        if circuit is not None:
            x = x.to(device=circuit.device, dtype=REAL_OF[circuit.dtype])
        return x

    def _fit_kernel(self, X, y, sample_weight, estimator):
        what = f"{type(self).__name__}.fit"
        self.spec_ = self._spec(X.shape[1])
        with torch.no_grad():
            K, emb = self.spec_.train_gram(self._features(X, what), what)
        estimator.fit(K, y, sample_weight=sample_weight)
        keep = torch.as_tensor(estimator.support_, dtype=torch.long, device=emb.device)
        self.support_embedding_ = emb.index_select(0, keep).detach().clone()    # only these rows are kept
        self.n_train_ = X.shape[0]
        return estimator

    def _test_kernel(self, X, what):
        """Full-width ``(N, n_train)`` test kernel: computed against the support vectors only,
        zero in the other columns (their dual coefficients are zero)."""
        from sklearn.utils.validation import check_is_fitted
        check_is_fitted(self, "spec_")
        X = _validate(self, X, reset=False, what=what)
        with torch.no_grad():
            K_sv = self.spec_.cross_gram(self._features(X, what), self.support_embedding_, what)
        K = np.zeros((X.shape[0], self.n_train_), dtype=np.float64)
        K[:, self._estimator().support_] = K_sv
        return K

    def kernel_matrix(self, X, Y=None) -> np.ndarray:
        """The fitted model's quantum kernel between ``X`` and ``Y`` (``Y=None``: ``K(X, X)``), float64."""
        from sklearn.utils.validation import check_is_fitted
        what = f"{type(self).__name__}.kernel_matrix"
        check_is_fitted(self, "spec_")
        X = _validate(self, X, reset=False, what=what)
        with torch.no_grad():
            if Y is None:
                return self.spec_.train_gram(self._features(X, what), what)[0]
            Y = _validate(self, Y, reset=False, what=what)
            ref = self.spec_.embed(self._features(Y, what), what)
            return self.spec_.cross_gram(self._features(X, what), ref, what)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


_KERNEL_DOC = """
    Parameters (all stored unchanged; checked in ``fit``):
        quantum_kernel: ``None`` (build the encoder from ``encoding`` / ``reps`` / ``dtype`` on
            ``n_features_in_`` qubits at ``fit``), a :class:`~tql.qml.FidelityKernel` or
            :class:`~tql.qml.ProjectedKernel` (its encoder, gamma, features and batch size are
            used; ``kernel``, ``gamma``, ``features``, ``encoding``, ``reps``, ``dtype`` are then
            not), or an encoder (a ``tql.Circuit``, a ``tql.QuantumLayer``, a callable
            ``X -> states``) used with ``kernel``. ``fit`` works on a deep copy, so training the
            kernel object afterwards does not change a fitted model.
        kernel: ``"fidelity"`` (``|⟨φ(x)|φ(x')⟩|²``) or ``"projected"``
            (``exp(−γ Σ_k ‖ρ_k(x) − ρ_k(x')‖_F²)``, Huang et al. 2021).
        encoding: ``"zz"`` (Qiskit's ``ZZFeatureMap``, default), ``"iqp"`` or ``"angle"``
            (see :func:`build_kernel_encoder`); ``reps``: its repetitions.
        bandwidth: the features are multiplied by it before encoding (the kernel bandwidth of
            Shaydulin & Wild 2022: smaller values keep the fidelity kernel from concentrating).
        gamma, features: of the projected kernel.
        dtype: ``"complex64"`` or ``"complex128"`` (default) for a built encoder.
        batch_size: rows per chunk of the Gram matrix (``None``: chunks of at most
            ``tql.qml.kernels.CHUNK_ELEMENTS`` values per intermediate).
"""


class QuantumKernelSVC(ClassifierMixin, _QuantumKernelBase):
    __doc__ = """Support-vector classifier on a quantum kernel (Qiskit's ``QSVC``).

    ``fit`` builds the training Gram matrix in one batched simulation and fits scikit-learn's
    ``SVC(kernel="precomputed")`` (``svc_``) on it; the support vectors' states are cached
    (``support_embedding_``) so ``predict`` / ``decision_function`` / ``score`` simulate the test
    points only. ``C``, ``class_weight``, ``tol``, ``max_iter``, ``decision_function_shape``,
    ``break_ties``, ``random_state`` go to ``SVC``. For probabilities wrap it as scikit-learn now
    advises for ``SVC`` (its ``probability`` option is deprecated since 1.9):
    ``CalibratedClassifierCV(QuantumKernelSVC(...), ensemble=False)``.
    """ + _KERNEL_DOC

    def __init__(self, quantum_kernel=None, *, kernel="fidelity", encoding="zz", reps=2, bandwidth=1.0, gamma=1.0,
                 features="rdm", dtype="complex128", batch_size=None, C=1.0, class_weight=None, tol=1e-3,
                 max_iter=-1, decision_function_shape="ovr", break_ties=False, random_state=None):
        self.quantum_kernel = quantum_kernel
        self.kernel = kernel
        self.encoding = encoding
        self.reps = reps
        self.bandwidth = bandwidth
        self.gamma = gamma
        self.features = features
        self.dtype = dtype
        self.batch_size = batch_size
        self.C = C
        self.class_weight = class_weight
        self.tol = tol
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state

    def _estimator(self):
        return self.svc_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the default ZZ map at bandwidth 1 on scikit-learn's standardised check data (features
        # up to ±3, so angles 2(π − x_i)(π − x_j) up to ~80 rad) gives a kernel close to the
        # identity: 57% training accuracy on its blobs (0.89 at bandwidth 0.25, 0.92 with "iqp");
        # the kernel bandwidth is a hyperparameter to tune, not a bug to hide
        tags.classifier_tags.poor_score = True
        return tags

    def fit(self, X, y, sample_weight=None):
        from sklearn.svm import SVC
        from sklearn.utils.multiclass import check_classification_targets
        what = "QuantumKernelSVC.fit"
        X, y = _validate(self, X, y, reset=True, what=what)
        check_classification_targets(y)
        if np.unique(y).size < 2:
            raise ValueError(f"{what}: y has only 1 class ({np.unique(y)[0]!r}); a classifier needs at least 2 classes")
        svc = SVC(kernel="precomputed", C=self.C, class_weight=self.class_weight, tol=self.tol, max_iter=self.max_iter, decision_function_shape=self.decision_function_shape,
                  break_ties=self.break_ties, random_state=self.random_state)
        self.svc_ = self._fit_kernel(X, y, sample_weight, svc)
        self.classes_ = self.svc_.classes_
        self.support_ = self.svc_.support_
        self.n_support_ = self.svc_.n_support_
        self.n_iter_ = self.svc_.n_iter_
        return self

    def decision_function(self, X):
        K = self._test_kernel(X, "QuantumKernelSVC.decision_function")
        return self.svc_.decision_function(K)

    def predict(self, X):
        K = self._test_kernel(X, "QuantumKernelSVC.predict")
        return self.svc_.predict(K)


class QuantumKernelSVR(RegressorMixin, _QuantumKernelBase):
    __doc__ = """Support-vector regressor on a quantum kernel (Qiskit's ``QSVR``).

    As :class:`QuantumKernelSVC`, around ``SVR(kernel="precomputed")`` (``svr_``); ``C``,
    ``epsilon``, ``tol``, ``max_iter`` go to ``SVR``.
    """ + _KERNEL_DOC

    def __init__(self, quantum_kernel=None, *, kernel="fidelity", encoding="zz", reps=2, bandwidth=1.0, gamma=1.0,
                 features="rdm", dtype="complex128", batch_size=None, C=1.0, epsilon=0.1, tol=1e-3, max_iter=-1):
        self.quantum_kernel = quantum_kernel
        self.kernel = kernel
        self.encoding = encoding
        self.reps = reps
        self.bandwidth = bandwidth
        self.gamma = gamma
        self.features = features
        self.dtype = dtype
        self.batch_size = batch_size
        self.C = C
        self.epsilon = epsilon
        self.tol = tol
        self.max_iter = max_iter

    def _estimator(self):
        return self.svr_

    def fit(self, X, y, sample_weight=None):
        from sklearn.svm import SVR
        X, y = _validate(self, X, y, reset=True, what="QuantumKernelSVR.fit", y_numeric=True)
        svr = SVR(kernel="precomputed", C=self.C, epsilon=self.epsilon, tol=self.tol, max_iter=self.max_iter)
        self.svr_ = self._fit_kernel(X, y, sample_weight, svr)
        self.support_ = self.svr_.support_
        self.n_iter_ = self.svr_.n_iter_
        return self

    def predict(self, X):
        K = self._test_kernel(X, "QuantumKernelSVR.predict")
        return self.svr_.predict(K)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the default encoder on scikit-learn's 10-feature regression check data is a 10-qubit
        # ZZ map, whose fidelity kernel is nearly the identity there: no R² > 0.5 to expect
        tags.regressor_tags.poor_score = True
        return tags


# ----------------------------------------------------------------------------------------------
# variational (neural-network) estimators
_OPTIMIZERS = ("adam", "sgd", "lbfgs")


class _QNNModel(nn.Module):
    """QuantumLayer → head. ``mode``: ``"logits"`` (linear head), ``"parity"`` (classifier: log
    of ``[P(even), P(odd)] = [(1 + ⟨P⟩)/2, (1 − ⟨P⟩)/2]`` of the parity ``P = Z⊗…⊗Z``),
    ``"linear"`` (regressor: linear head, one output), ``"expval"`` (regressor: ``⟨P⟩`` itself)."""

    def __init__(self, layer, head, mode):
        super().__init__()
        self.layer, self.head, self.mode = layer, head, mode

    def forward(self, x):
        q = self.layer(x)
        if self.mode == "parity":
            p_odd = ((1 - q[:, 0]) / 2).clamp(1e-7, 1 - 1e-7)
            return torch.stack([torch.log1p(-p_odd), torch.log(p_odd)], dim=1)
        if self.mode == "expval":
            return q[:, 0]
        out = self.head(q)
        return out[:, 0] if self.mode == "linear" else out


class _QuantumNeuralBase(BaseEstimator):
    """Shared parameters and training loop of the variational estimators."""

    _is_classifier = True

    def __init__(self, n_qubits=None, n_layers=2, *, encoding="angle", ansatz="hardware_efficient", measure="Z",
                 head="linear", optimizer="adam", lr=0.05, epochs=100, batch_size=None, diff_method="backprop",
                 dtype="complex64", warm_start=False, random_state=None, verbose=False):
        self.n_qubits = n_qubits
        self.n_layers = n_layers
        self.encoding = encoding
        self.ansatz = ansatz
        self.measure = measure
        self.head = head
        self.optimizer = optimizer
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.diff_method = diff_method
        self.dtype = dtype
        self.warm_start = warm_start
        self.random_state = random_state
        self.verbose = verbose

    # -- checks and model ----------------------------------------------------------------------
    def _check_params(self, what):
        heads = ("linear", "parity")
        if self.head not in heads:
            raise ValueError(f"{what}: head must be one of {heads}, got {self.head!r}")
        if self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"{what}: optimizer must be one of {_OPTIMIZERS}, got {self.optimizer!r}")
        _check_number(self.lr, "lr", what)
        _check_number(self.epochs, "epochs", what, integer=True, positive=False, minimum=0)
        _check_number(self.batch_size, "batch_size", what, integer=True, allow_none=True)
        _check_number(self.n_qubits, "n_qubits", what, integer=True, allow_none=True)
        _check_number(self.n_layers, "n_layers", what, integer=True, positive=False, minimum=0)
        if self.diff_method not in ("backprop", "adjoint", "parameter-shift"):
            raise ValueError(f"{what}: diff_method must be 'backprop', 'adjoint' or 'parameter-shift', got "
                             f"{self.diff_method!r}")
        return _dtype(self.dtype, what)

    def _seed(self):
        from sklearn.utils import check_random_state
        return int(check_random_state(self.random_state).randint(0, 2 ** 31 - 1))

    def _build(self, n_features, n_out, what, seed):
        from ..layers import QuantumLayer
        dtype = self._check_params(what)
        n = n_features if self.n_qubits is None else self.n_qubits
        if n > MAX_QUBITS:
            raise ValueError(f"{what}: {n} qubits (2**{n} amplitudes per sample; at most {MAX_QUBITS}): reduce the "
                             f"features (e.g. PCA in a Pipeline) or give n_qubits with encoding='reupload'")
        if self.encoding == "angle" and n_features > n:
            raise ValueError(f"{what}: encoding='angle' puts one feature per qubit: {n_features} features > "
                             f"n_qubits={n} (use encoding='reupload', or reduce the features)")
        measure = self.measure
        mode = "logits" if self._is_classifier else "linear"
        if self.head == "parity":
            measure = [" ".join(f"Z{w}" for w in range(n))]
            mode = "parity" if self._is_classifier else "expval"
        elif isinstance(measure, (list, tuple)):
            measure = list(measure)
        n_feat_arg = None if self.encoding in ("iqp", "none") else n_features
        with torch.random.fork_rng(devices=[]):      # seeded init, global RNG untouched
            torch.manual_seed(seed)
            try:
                layer = QuantumLayer.from_template(n, self.n_layers, encoding=self.encoding, ansatz=self.ansatz,
                                                   measure=measure, n_features=n_feat_arg,
                                                   diff_method=self.diff_method, dtype=dtype)
            except (TypeError, ValueError) as err:
                raise ValueError(f"{what}: {err}") from None
            head = None
            if mode in ("logits", "linear"):
                head = nn.Linear(layer.n_outputs, n_out).to(REAL_OF[dtype])
        return _QNNModel(layer, head, mode)

    def _make_optimizer(self):
        params = [p for p in self.model_.parameters() if p.requires_grad]
        if self.optimizer == "adam":
            return torch.optim.Adam(params, lr=self.lr)
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=self.lr, momentum=0.9)
        return torch.optim.LBFGS(params, lr=self.lr, max_iter=1, history_size=20,
                                 line_search_fn="strong_wolfe")

    def _tensor(self, X):
        real = REAL_OF[self.model_.layer.circuit.dtype]
        return torch.as_tensor(np.array(X, dtype=np.float64)).to(real)

    def _loss(self, out, t):
        if self._is_classifier:
            if self.model_.mode == "parity":
                return nn.functional.nll_loss(out, t)
            return nn.functional.cross_entropy(out, t)
        return nn.functional.mse_loss(out, t)

    def _run_epochs(self, x, t, epochs, seed):
        model, opt = self.model_, self._optimizer
        n = x.shape[0]
        gen = torch.Generator().manual_seed(seed)
        bs = n if self.batch_size is None or self.optimizer == "lbfgs" else min(self.batch_size, n)
        model.train()
        for epoch in range(epochs):
            order = torch.randperm(n, generator=gen) if bs < n else None
            total = 0.0
            for start in range(0, n, bs):
                idx = None if order is None else order[start:start + bs]
                xb, tb = (x, t) if idx is None else (x[idx], t[idx])

                def closure():
                    opt.zero_grad()
                    loss = self._loss(model(xb), tb)
                    loss.backward()
                    return loss
                if self.optimizer == "lbfgs":
                    loss = opt.step(closure)
                else:
                    loss = closure()
                    opt.step()
                total += float(loss.detach()) * xb.shape[0]
            self.loss_ = total / n
            self.loss_curve_.append(self.loss_)
            self.n_iter_ += 1
            if self.verbose:
                print(f"{type(self).__name__}: epoch {self.n_iter_}, loss {self.loss_:.6f}")
        model.eval()

    def _targets(self, y):
        raise NotImplementedError

    def _fit(self, X, y, *, epochs, incremental, classes=None):
        what = f"{type(self).__name__}.{'partial_fit' if incremental else 'fit'}"
        first = not (incremental or self.warm_start) or not hasattr(self, "model_")
        kw = {} if self._is_classifier else {"y_numeric": True}
        X, y = _validate(self, X, y, reset=first, what=what, **kw)
        t = self._targets(y, first, what, classes)
        if first:
            seed = self._seed()
            self.seed_ = seed
            self.model_ = self._build(X.shape[1], len(self.classes_) if self._is_classifier else 1, what, seed)
            self._optimizer = self._make_optimizer()
            self.loss_curve_ = []
            self.n_iter_ = 0
        elif not incremental:
            self._check_params(what)
            self._optimizer = self._make_optimizer()
        x = self._tensor(X)
        self._run_epochs(x, t, epochs, self.seed_ + self.n_iter_)
        return self

    def _output(self, X, what):
        from sklearn.utils.validation import check_is_fitted
        check_is_fitted(self, "model_")
        X = _validate(self, X, reset=False, what=what)
        with torch.no_grad():
            return self.model_(self._tensor(X)).to(torch.float64).cpu().numpy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


_NEURAL_DOC = """
    Parameters (all stored unchanged; checked in ``fit``):
        n_qubits: wires (default ``n_features_in_``; ``encoding="angle"`` needs ``n_qubits >=
            n_features``, ``"iqp"`` equality, ``"reupload"`` any number).
        n_layers, encoding, ansatz, measure: as :meth:`tql.QuantumLayer.from_template`
            (``measure``: ``"Z"`` on every wire, or a list of observables such as ``"Z0 Z1"``).
        head: ``"linear"`` (a ``Linear(n_obs, n_out)`` head on the expectation values) or
            ``"parity"`` (Qiskit's parity interpretation, no classical parameters: the
            expectation of ``Z⊗…⊗Z`` on every wire is read directly).
        optimizer: ``"adam"`` (default), ``"sgd"`` (momentum 0.9) or ``"lbfgs"`` (full batch,
            one L-BFGS step with a strong-Wolfe line search per epoch); ``lr``; ``epochs``;
            ``batch_size`` (``None``: full batch).
        diff_method: ``"backprop"``, ``"adjoint"`` or ``"parameter-shift"`` (same gradients).
        dtype: ``"complex64"`` (default) or ``"complex128"``.
        warm_start: ``fit`` continues from the fitted model (same features and classes) instead of
            starting again.
        random_state: ``None``, an int or a ``RandomState``: seeds the initial weights (torch's
            global RNG is left alone) and the minibatch order, so a fixed int gives the same model.
        verbose: print the loss every epoch.

    Fitted attributes: ``model_`` (the torch module: ``model_.layer`` is the
    :class:`~tql.QuantumLayer`, ``model_.head`` the linear head or ``None``), ``loss_curve_``,
    ``loss_``, ``n_iter_`` (epochs run), ``n_features_in_``.
"""


class QuantumNeuralClassifier(ClassifierMixin, _QuantumNeuralBase):
    __doc__ = """Variational quantum classifier (Qiskit's ``VQC``): a trained QuantumLayer + head.

    Labels may be anything ``numpy.unique`` sorts (strings, ints, …): ``classes_`` holds them and
    the model predicts indices into it. ``head="parity"`` is for two classes: ``P(classes_[1])``
    is the probability of an odd parity. The loss is the cross-entropy.
    ``partial_fit(X, y, classes=None)`` runs one epoch (``classes`` needed on the first call).
    """ + _NEURAL_DOC

    _is_classifier = True

    def _targets(self, y, first, what, classes):
        from sklearn.utils.multiclass import check_classification_targets
        check_classification_targets(y)
        if first:
            labels = np.unique(y) if classes is None else np.unique(np.asarray(classes))
            if labels.size < 2:
                raise ValueError(f"{what}: y has only 1 class ({labels[0]!r}); a classifier needs at least 2 "
                                 f"classes")
            if self.head == "parity" and labels.size != 2:
                raise ValueError(f"{what}: head='parity' is for 2 classes, y has {labels.size}: use head='linear'")
            self.classes_ = labels
        unknown = np.setdiff1d(np.unique(y), self.classes_)
        if unknown.size:
            raise ValueError(f"{what}: y has labels {unknown.tolist()} not in classes_ {self.classes_.tolist()}")
        return torch.as_tensor(np.searchsorted(self.classes_, y), dtype=torch.long)

    def fit(self, X, y):
        return self._fit(X, y, epochs=self.epochs, incremental=False)

    def partial_fit(self, X, y, classes=None):
        """One epoch on ``(X, y)``; the first call builds the model (``classes``: every label)."""
        if not hasattr(self, "model_") and classes is None:
            raise ValueError("QuantumNeuralClassifier.partial_fit: the first call needs classes=(every label)")
        return self._fit(X, y, epochs=1, incremental=True, classes=classes)

    def predict_proba(self, X):
        out = self._output(X, "QuantumNeuralClassifier.predict_proba")
        if self.model_.mode == "parity":
            p = np.exp(out)
        else:
            out = out - out.max(axis=1, keepdims=True)
            p = np.exp(out)
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))

    def predict(self, X):
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = self.head != "parity"
        return tags


class QuantumNeuralRegressor(RegressorMixin, _QuantumNeuralBase):
    __doc__ = """Variational quantum regressor (Qiskit's ``VQR``), trained on the mean squared error.

    ``head="linear"`` standardises the targets (``y_mean_``, ``y_scale_``) and fits a linear head;
    ``head="parity"`` predicts ``⟨Z⊗…⊗Z⟩`` itself, so the targets must lie in [-1, 1] (scale
    them, e.g. with ``TransformedTargetRegressor``). ``partial_fit(X, y)`` runs one epoch.
    """ + _NEURAL_DOC

    _is_classifier = False

    def _targets(self, y, first, what, classes):
        y = np.asarray(y, dtype=np.float64)
        if first:
            if self.head == "linear":
                std = float(y.std())
                self.y_mean_, self.y_scale_ = float(y.mean()), (std if std > 0 else 1.0)
            else:
                if np.abs(y).max() > 1:
                    raise ValueError(f"{what}: head='parity' predicts ⟨Z⊗…⊗Z⟩ in [-1, 1] but y reaches "
                                     f"{np.abs(y).max():.4g}: scale the targets or use head='linear'")
                self.y_mean_, self.y_scale_ = 0.0, 1.0
        dtype = REAL_OF[_dtype(self.dtype, what)] if first else REAL_OF[self.model_.layer.circuit.dtype]
        return torch.as_tensor((y - self.y_mean_) / self.y_scale_).to(dtype)

    def fit(self, X, y):
        return self._fit(X, y, epochs=self.epochs, incremental=False)

    def partial_fit(self, X, y):
        """One epoch on ``(X, y)`` (the first call builds the model)."""
        return self._fit(X, y, epochs=1, incremental=True)

    def predict(self, X):
        return self._output(X, "QuantumNeuralRegressor.predict") * self.y_scale_ + self.y_mean_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # scikit-learn's regression check data (10 features, linear target) with a small circuit
        # trained for the default epochs: an R² > 0.5 is not what such a model promises
        tags.regressor_tags.poor_score = True
        return tags
