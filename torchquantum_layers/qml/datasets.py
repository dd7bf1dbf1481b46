"""Small classification data sets that need no download, with seeded splits.

* :func:`make_circles`: Paddle Quantum's "circle" set (points in [-1, 1]², class by radius).
* :func:`make_moons`: two interleaving half circles (the formula of scikit-learn's
  ``make_moons``, written in NumPy).
* :func:`load_iris`, :func:`load_digits`: the copies shipped inside scikit-learn (no download);
  scikit-learn is optional: ``pip install 'torchquantum-layers[data]'``.
* :func:`train_val_test_split`, :class:`Scaler`: seeded, stratified splits and feature scaling
  fitted on the training split.

Features are float32 NumPy arrays ``(N, F)`` and labels int64 ``(N,)`` in ``0..n_classes-1``.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

__all__ = ["make_circles", "make_moons", "load_iris", "load_digits", "train_val_test_split", "Scaler",
           "require_sklearn"]


def require_sklearn(what: str):
    """Import scikit-learn or raise an ImportError that names the extra to install."""
    try:
        import sklearn  # noqa: F401
        import sklearn.datasets
    except ImportError as err:
        raise ImportError(f"{what} needs scikit-learn, which is optional: install it with "
                          f"`pip install 'torchquantum-layers[data]'` (or `pip install scikit-learn`)") from err
    return sklearn


def _count(value, name, what, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what}: {name} must be >= {minimum}, got {value}")
    return int(value)


def _real(value, name, what):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{what}: {name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {value}")
    return value


def make_circles(n_samples: int, gap: float = 0.5, radius: float = 0.7, seed: Optional[int] = None):
    """Paddle Quantum's circle data set ("Quantum classifier" tutorial).

    Points are drawn uniformly from the square [-1, 1]²; a point with norm ``r < radius - gap/2``
    gets label 0, one with ``r > radius + gap/2`` label 1, and points inside the band
    ``|r - radius| <= gap/2`` are rejected and drawn again. Paddle's defaults are ``radius=0.7``,
    ``gap=0.5`` (so class 0 is ``r < 0.45`` and class 1 is ``r > 0.95``) with 200 training and 100
    test points. Paddle reseeds NumPy's global RNG per point; here a ``numpy.random.default_rng
    (seed)`` draws the same distribution (not the same points) and leaves the global RNG alone.

    Returns ``X`` float32 ``(n_samples, 2)`` and ``y`` int64 ``(n_samples,)`` in draw order.
    """
    what = "make_circles"
    n_samples = _count(n_samples, "n_samples", what)
    gap, radius = _real(gap, "gap", what), _real(radius, "radius", what)
    if gap < 0:
        raise ValueError(f"{what}: gap must be >= 0, got {gap}")
    inner, outer = radius - gap / 2, radius + gap / 2
    if inner <= 0 or outer >= math.sqrt(2):
        raise ValueError(f"{what}: radius {radius} ± gap/2 ({inner:.3g}..{outer:.3g}) must lie inside "
                         f"(0, √2) so that both classes exist in [-1, 1]²")
    rng = np.random.default_rng(seed)
    xs, ys, have = [], [], 0
    while have < n_samples:
        pts = rng.uniform(-1.0, 1.0, size=(2 * (n_samples - have) + 16, 2))
        r = np.linalg.norm(pts, axis=1)
        keep = (r < inner) | (r > outer)
        pts, r = pts[keep], r[keep]
        xs.append(pts)
        ys.append((r > outer).astype(np.int64))
        have += len(pts)
    X = np.concatenate(xs)[:n_samples].astype(np.float32)
    y = np.concatenate(ys)[:n_samples]
    return X, y


def make_moons(n_samples: int, noise: float = 0.1, seed: Optional[int] = None):
    """Two interleaving half circles: class 0 on ``(cos t, sin t)``, class 1 on
    ``(1 - cos t, 0.5 - sin t)``, ``t`` evenly spaced in [0, π] (``n_samples // 2`` points on the
    first moon), shuffled, plus Gaussian noise of standard deviation ``noise``."""
    what = "make_moons"
    n_samples = _count(n_samples, "n_samples", what, 2)
    noise = _real(noise, "noise", what)
    if noise < 0:
        raise ValueError(f"{what}: noise must be >= 0, got {noise}")
    rng = np.random.default_rng(seed)
    n0 = n_samples // 2
    n1 = n_samples - n0
    t0 = np.linspace(0, np.pi, n0)
    t1 = np.linspace(0, np.pi, n1)
    X = np.concatenate([np.stack([np.cos(t0), np.sin(t0)], 1),
                        np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)])
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n1, np.int64)])
    order = rng.permutation(n_samples)
    X, y = X[order], y[order]
    if noise:
        X = X + rng.normal(scale=noise, size=X.shape)
    return X.astype(np.float32), y


def _select_classes(X, y, classes, what):
    if classes is None:
        return X, y
    classes = [int(c) for c in classes]
    known = sorted(set(y.tolist()))
    bad = [c for c in classes if c not in known]
    if bad or len(set(classes)) != len(classes) or len(classes) < 2:
        raise ValueError(f"{what}: classes must be at least two distinct labels of {known}, got {classes}")
    mask = np.isin(y, classes)
    relabel = {c: i for i, c in enumerate(classes)}
    return X[mask], np.array([relabel[int(v)] for v in y[mask]], dtype=np.int64)


def load_iris(classes: Optional[Sequence[int]] = None):
    """Fisher's Iris (150 × 4 features, 3 classes), from the copy inside scikit-learn.

    ``classes`` keeps only those labels and renumbers them ``0..k-1`` in the given order
    (``classes=(0, 1)``: setosa vs versicolor, linearly separable).
    """
    require_sklearn("load_iris")
    from sklearn.datasets import load_iris as _load
    data = _load()
    return _select_classes(data.data.astype(np.float32), data.target.astype(np.int64), classes, "load_iris")


def load_digits(classes: Optional[Sequence[int]] = None):
    """The UCI 8×8 handwritten digits (1797 × 64 pixels in [0, 1], 10 classes), from the copy inside
    scikit-learn. Reshape a row to ``(1, 8, 8)`` for a CNN. ``classes`` as in :func:`load_iris`."""
    require_sklearn("load_digits")
    from sklearn.datasets import load_digits as _load
    data = _load()
    X = (data.data / 16.0).astype(np.float32)
    return _select_classes(X, data.target.astype(np.int64), classes, "load_digits")


def train_val_test_split(X, y, val_fraction: float = 0.15, test_fraction: float = 0.15,
                         seed: Optional[int] = 0, stratify: bool = True):
    """Seeded split into ``(X_train, y_train, X_val, y_val, X_test, y_test)``.

    Fractions may also be ints (sample counts). With ``stratify`` each class is split in the same
    proportions (sizes rounded per class), so small test sets still hold every class.
    """
    what = "train_val_test_split"
    X, y = np.asarray(X), np.asarray(y)
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"{what}: X has {X.shape[0]} samples but y has {y.shape[0]}")
    n = len(y)

    def size(frac, name):
        if isinstance(frac, (int, np.integer)) and not isinstance(frac, bool):
            if not 0 <= frac < n:
                raise ValueError(f"{what}: {name}={frac} must be in [0, {n})")
            return int(frac) / n
        frac = _real(frac, name, what)
        if not 0 <= frac < 1:
            raise ValueError(f"{what}: {name} must be in [0, 1), got {frac}")
        return frac
    fv, ft = size(val_fraction, "val_fraction"), size(test_fraction, "test_fraction")
    if fv + ft >= 1:
        raise ValueError(f"{what}: val_fraction + test_fraction leave no training samples")
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(y == c) for c in np.unique(y)] if stratify else [np.arange(n)]
    tr, va, te = [], [], []
    for idx in groups:
        idx = rng.permutation(idx)
        k = len(idx)
        n_te, n_va = int(round(ft * k)), int(round(fv * k))
        te.append(idx[:n_te])
        va.append(idx[n_te:n_te + n_va])
        tr.append(idx[n_te + n_va:])
    tr, va, te = (rng.permutation(np.concatenate(p)) for p in (tr, va, te))
    return X[tr], y[tr], X[va], y[va], X[te], y[te]


class Scaler:
    """Feature scaling fitted on training data.

    ``method``: ``"standard"`` (zero mean, unit variance), ``"minmax"`` (each feature to
    ``feature_range``, default ``(0, π)``, convenient for angle encoding) or ``"none"``.
    """

    METHODS = ("standard", "minmax", "none")

    def __init__(self, method: str = "standard", feature_range=(0.0, math.pi)):
        if method not in self.METHODS:
            raise ValueError(f"Scaler: method must be one of {self.METHODS}, got {method!r}")
        if isinstance(feature_range, (str, bytes)) or not hasattr(feature_range, "__len__") \
                or len(feature_range) != 2:
            raise ValueError(f"Scaler: feature_range must be a pair (low, high), got {feature_range!r}")
        lo, hi = (_real(v, "feature_range", "Scaler") for v in feature_range)
        if not lo < hi:
            raise ValueError(f"Scaler: feature_range must be increasing, got {feature_range}")
        self.method, self.feature_range = method, (lo, hi)
        self.shift = self.scale = None

    def fit(self, X) -> "Scaler":
        X = np.asarray(X, dtype=np.float64)
        if self.method == "standard":
            std = X.std(axis=0)
            self.shift, self.scale = X.mean(axis=0), np.where(std > 0, std, 1.0)
        elif self.method == "minmax":
            lo, hi = X.min(axis=0), X.max(axis=0)
            span = np.where(hi > lo, hi - lo, 1.0)
            a, b = self.feature_range
            self.shift, self.scale = lo - a * span / (b - a), span / (b - a)
        else:
            self.shift, self.scale = np.zeros(X.shape[1]), np.ones(X.shape[1])
        return self

    def transform(self, X) -> np.ndarray:
        if self.shift is None:
            raise RuntimeError("Scaler: call fit() first")
        X = np.asarray(X)
        return ((X - self.shift) / self.scale).astype(np.float32)

    def fit_transform(self, X) -> np.ndarray:
        return self.fit(X).transform(X)
