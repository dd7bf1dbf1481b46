"""DataModules for the hybrid classifier; none needs a download.

``CirclesDataModule`` (Paddle Quantum's circle set) and ``MoonsDataModule`` are generated with
NumPy; ``IrisDataModule`` and ``DigitsDataModule`` read the copies shipped inside scikit-learn
(optional: ``pip install 'torchquantum-layers[data]'``). Every module has seeded train/val/test
splits, scales features with statistics of the training split only, and exposes ``n_features``
and ``n_classes`` (available right after construction, so a model can be sized from them).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from torchquantum_layers.qml import datasets as D

__all__ = ["ArrayDataModule", "CirclesDataModule", "MoonsDataModule", "IrisDataModule", "DigitsDataModule"]


def _positive_int(value, name, what, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what}: {name} must be >= {minimum}, got {value}")
    return value


class ArrayDataModule(pl.LightningDataModule):
    """Base: subclasses implement ``_arrays()`` returning the six split arrays (unscaled).

    ``scaling``: ``"standard"``, ``"minmax"`` (to ``feature_range``, default ``(0, π)``) or
    ``"none"``, fitted on the training split. ``batch_size`` applies to every loader;
    the training loader shuffles with a generator seeded by ``seed`` (a fresh one each time
    ``train_dataloader()`` is called). ``seed`` is a non-negative int.

    The shuffling generator's state is the module's ``state_dict()`` (a uint8 tensor, so it loads
    with ``torch.load(weights_only=True)``), which Lightning saves in checkpoints: a run resumed
    from an end-of-epoch checkpoint sees the same batches as an uninterrupted one (without it the
    rebuilt loader replayed the first epoch's order).
    """

    default_scaling = "standard"

    def __init__(self, batch_size: int = 32, seed: int = 0, scaling: Optional[str] = None,
                 feature_range: Sequence[float] = (0.0, math.pi), num_workers: int = 0):
        super().__init__()
        what = type(self).__name__
        self.batch_size = _positive_int(batch_size, "batch_size", what)
        self.num_workers = _positive_int(num_workers, "num_workers", what, 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"{what}: seed must be an int, got {seed!r}")
        if seed < 0:
            raise ValueError(f"{what}: seed must be >= 0, got {seed}")
        self.seed = seed
        self.scaling = self.default_scaling if scaling is None else scaling
        self._scaler = D.Scaler(self.scaling, tuple(feature_range))
        self._splits = None
        self._train_generator = None         # the training loader's shuffling generator
        self._pending_generator_state = None  # restored from a checkpoint before the loader exists

    # -- to implement ---------------------------------------------------------------------------
    def _arrays(self):
        raise NotImplementedError

    # -- data -----------------------------------------------------------------------------------
    def splits(self):
        """``(X_train, y_train, X_val, y_val, X_test, y_test)`` as scaled NumPy arrays (cached)."""
        if self._splits is None:
            xtr, ytr, xva, yva, xte, yte = self._arrays()
            self._scaler.fit(xtr)
            t = self._scaler.transform
            self._splits = (t(xtr), ytr, t(xva), yva, t(xte), yte)
        return self._splits

    def setup(self, stage: Optional[str] = None) -> None:
        xtr, ytr, xva, yva, xte, yte = self.splits()

        def ds(x, y):
            return TensorDataset(torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y, dtype=torch.int64))
        self.train_set, self.val_set, self.test_set = ds(xtr, ytr), ds(xva, yva), ds(xte, yte)

    @property
    def n_features(self) -> int:
        return int(self.splits()[0].shape[1])

    @property
    def n_classes(self) -> int:
        return int(max(int(self.splits()[i].max()) for i in (1, 3, 5) if len(self.splits()[i])) + 1)

    def _loader(self, name, shuffle):
        if not hasattr(self, name):          # a loader asked for outside a Trainer, before setup()
            self.setup()
        gen = None
        if shuffle:
            gen = torch.Generator().manual_seed(self.seed)
            if self._pending_generator_state is not None:
                gen.set_state(self._pending_generator_state)
                self._pending_generator_state = None
            self._train_generator = gen
        return DataLoader(getattr(self, name), batch_size=self.batch_size, shuffle=shuffle, generator=gen,
                          num_workers=self.num_workers)

    def train_dataloader(self):
        return self._loader("train_set", True)

    def state_dict(self) -> dict:
        """The training loader's shuffling-generator state (empty before the loader exists)."""
        if self._train_generator is None:
            return {}
        return {"train_generator_state": self._train_generator.get_state()}

    def load_state_dict(self, state_dict: dict) -> None:
        state = state_dict.get("train_generator_state")
        if state is None:
            return
        if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8:
            raise TypeError(f"{type(self).__name__}.load_state_dict: train_generator_state must be a uint8 "
                            f"tensor (torch.Generator.get_state()), got {type(state).__name__}")
        if self._train_generator is not None:
            self._train_generator.set_state(state)
        else:
            self._pending_generator_state = state

    def val_dataloader(self):
        return self._loader("val_set", False)

    def test_dataloader(self):
        return self._loader("test_set", False)

    def predict_dataloader(self):
        """The test split, in order (``trainer.predict`` gives one prediction per test sample)."""
        return self._loader("test_set", False)


class CirclesDataModule(ArrayDataModule):
    """Paddle Quantum's circle set (see :func:`torchquantum_layers.qml.datasets.make_circles`):
    uniform points in [-1, 1]², label 0 for ``r < radius - gap/2``, 1 for ``r > radius + gap/2``,
    points in the band between are redrawn. Defaults follow Paddle's tutorial: 200 training and
    100 test points, ``radius=0.7``, ``gap=0.5``; a separate validation set of ``n_val`` points is
    drawn from the same stream. Features are left unscaled by default (they already lie in
    [-1, 1]); ``seed`` fixes the points and the shuffling.
    """

    default_scaling = "none"

    def __init__(self, n_train: int = 200, n_val: int = 100, n_test: int = 100, gap: float = 0.5,
                 radius: float = 0.7, batch_size: int = 20, seed: int = 2, scaling: Optional[str] = None,
                 **kwargs):
        super().__init__(batch_size=batch_size, seed=seed, scaling=scaling, **kwargs)
        what = "CirclesDataModule"
        self.n_train = _positive_int(n_train, "n_train", what)
        self.n_val = _positive_int(n_val, "n_val", what)
        self.n_test = _positive_int(n_test, "n_test", what)
        self.gap, self.radius = gap, radius
        D.make_circles(1, gap=gap, radius=radius, seed=0)       # validate the geometry now

    def _arrays(self):
        n = self.n_train + self.n_val + self.n_test
        X, y = D.make_circles(n, gap=self.gap, radius=self.radius, seed=self.seed)
        a, b = self.n_train, self.n_train + self.n_test
        # train first and test next, as Paddle's generator, then validation
        return X[:a], y[:a], X[b:], y[b:], X[a:b], y[a:b]


class MoonsDataModule(ArrayDataModule):
    """Two interleaving half circles (:func:`torchquantum_layers.qml.datasets.make_moons`),
    ``n_samples`` points split by ``val_fraction``/``test_fraction`` (stratified), standardised."""

    def __init__(self, n_samples: int = 300, noise: float = 0.1, val_fraction: float = 0.2,
                 test_fraction: float = 0.2, batch_size: int = 32, seed: int = 0,
                 scaling: Optional[str] = None, **kwargs):
        super().__init__(batch_size=batch_size, seed=seed, scaling=scaling, **kwargs)
        self.n_samples = _positive_int(n_samples, "n_samples", "MoonsDataModule", 2)
        self.noise, self.val_fraction, self.test_fraction = noise, val_fraction, test_fraction
        D.make_moons(2, noise=noise, seed=0)

    def _arrays(self):
        X, y = D.make_moons(self.n_samples, noise=self.noise, seed=self.seed)
        return D.train_val_test_split(X, y, self.val_fraction, self.test_fraction, seed=self.seed)


class _SklearnDataModule(ArrayDataModule):
    _loader_fn = None
    _name = ""

    def __init__(self, classes: Optional[Sequence[int]] = None, val_fraction: float = 0.15,
                 test_fraction: float = 0.2, batch_size: int = 16, seed: int = 0,
                 scaling: Optional[str] = None, **kwargs):
        D.require_sklearn(type(self).__name__)
        super().__init__(batch_size=batch_size, seed=seed, scaling=scaling, **kwargs)
        if classes is not None and (isinstance(classes, (str, bytes)) or not hasattr(classes, "__iter__")
                                    or not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool)
                                               for c in classes)):
            raise TypeError(f"{type(self).__name__}: classes must be a sequence of int labels, got {classes!r}")
        self.classes = None if classes is None else [int(c) for c in classes]
        self.val_fraction, self.test_fraction = val_fraction, test_fraction

    def _arrays(self):
        X, y = type(self)._loader_fn(self.classes)
        return D.train_val_test_split(X, y, self.val_fraction, self.test_fraction, seed=self.seed)


class IrisDataModule(_SklearnDataModule):
    """Fisher's Iris from scikit-learn (4 features, 3 classes; ``classes=(0, 1)`` for setosa vs
    versicolor). Default scaling ``"minmax"`` to ``[0, π]``, ready for angle encoding.
    Stratified, seeded splits (default 65/15/20 %)."""

    default_scaling = "minmax"
    _loader_fn = staticmethod(D.load_iris)


class DigitsDataModule(_SklearnDataModule):
    """UCI 8×8 digits from scikit-learn (64 pixel features in [0, 1], 10 classes; ``classes`` to
    select some). Default scaling ``"none"``; reshape rows to ``(1, 8, 8)`` for a CNN (the
    classifier's ``pre_net="cnn"`` does). Stratified, seeded splits (default 65/15/20 %)."""

    default_scaling = "none"
    _loader_fn = staticmethod(D.load_digits)
