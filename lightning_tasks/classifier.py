"""``HybridClassifier``: optional classical pre-net → ``QuantumLayer`` → classical head.

Every constructor argument is a plain value (numbers, strings, lists, dicts), saved with
``save_hyperparameters`` so checkpoints rebuild the model and ``LightningCLI`` can construct it
from a config file::

    model = HybridClassifier(n_features=2, n_classes=2, n_qubits=4, n_layers=2,
                             encoding="reupload", optimizer="Adam", lr=0.05)
    pl.Trainer(max_epochs=20).fit(model, CirclesDataModule())

With ``dp_clip`` and ``dp_noise`` the training is differentially private (DP-SGD, see
:mod:`torchquantum_layers.qml.privacy`) and logs the privacy spent, ``epsilon``.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Optional, Sequence, Union

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch import nn

from torchquantum_layers import QuantumLayer
from torchquantum_layers.qml.privacy import clip_and_noise, epsilon_from_rdp, gaussian_rdp, per_sample_gradients

from .noise_spec import check_noise_options
from .single_point import plain_hparam

__all__ = ["HybridClassifier", "build_pre_net", "PRE_NETS", "HEADS", "ANGLE_ACTIVATIONS"]

PRE_NETS = ("none", "linear", "mlp", "cnn")
HEADS = ("linear", "none")
ANGLE_ACTIVATIONS = ("none", "tanh", "sigmoid")
_DTYPES = {"complex64": torch.complex64, "complex128": torch.complex128,
           "float32": torch.complex64, "float64": torch.complex128}


class _AngleActivation(nn.Module):
    """Maps pre-net outputs to rotation angles: ``π·tanh(z)`` or ``π·sigmoid(z)``."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, z):
        if self.kind == "tanh":
            return math.pi * torch.tanh(z)
        return math.pi * torch.sigmoid(z)

    def extra_repr(self) -> str:
        return f"pi * {self.kind}"


class _Image(nn.Module):
    """``(B, C·H·W)`` (or already ``(B, C, H, W)``) → ``(B, C, H, W)``."""

    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x):
        if x.dim() == 4:
            return x
        return x.reshape(x.shape[0], *self.shape)


def build_pre_net(kind: str, n_features: int, n_out: int, hidden: int = 32,
                  image_shape: Optional[Sequence[int]] = None) -> nn.Module:
    """Classical pre-net ``(B, n_features)`` → ``(B, n_out)``.

    ``"linear"``; ``"mlp"`` (Linear-ReLU-Linear with ``hidden`` units); ``"cnn"`` for images
    (``image_shape`` = ``(H, W)`` or ``(C, H, W)``, rows of ``C·H·W`` pixels): two 3×3
    conv-ReLU-maxpool blocks (8 and 16 channels), then a linear layer.
    """
    if kind == "linear":
        return nn.Linear(n_features, n_out)
    if kind == "mlp":
        return nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, n_out))
    if kind == "cnn":
        if image_shape is None:
            raise ValueError("HybridClassifier: pre_net='cnn' needs image_shape, e.g. (8, 8) for the digits")
        shape = tuple(int(s) for s in image_shape)
        if len(shape) == 2:
            shape = (1,) + shape
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"HybridClassifier: image_shape must be (H, W) or (C, H, W), got {image_shape}")
        if shape[0] * shape[1] * shape[2] != n_features:
            raise ValueError(f"HybridClassifier: image_shape {shape} holds {shape[0] * shape[1] * shape[2]} "
                             f"values but n_features={n_features}")
        c, h, w = shape
        h2, w2 = max(h // 4, 1), max(w // 4, 1)
        return nn.Sequential(
            _Image(shape),
            nn.Conv2d(c, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d((h2, w2)),
            nn.Flatten(), nn.Linear(16 * h2 * w2, n_out))
    raise ValueError(f"HybridClassifier: pre_net must be one of {PRE_NETS} or None, got {kind!r}")


def _is_subclass(obj, base, abstract) -> bool:
    """``obj`` is a subclass of ``base`` (a class or tuple of classes) other than the ``abstract``
    base classes (which cannot be built)."""
    return isinstance(obj, type) and issubclass(obj, base) and obj not in tuple(abstract)


def _check_choice(value, choices, name):
    if value not in choices:
        raise ValueError(f"HybridClassifier: {name} must be one of {choices}, got {value!r}")
    return value


def _check_dp_options(dp_clip, dp_noise, dp_delta) -> None:
    for name, v in (("dp_clip", dp_clip), ("dp_noise", dp_noise), ("dp_delta", dp_delta)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, Real):
            raise TypeError(f"HybridClassifier: {name} must be a number or None, got {v!r}")
        if not math.isfinite(v) or not v > 0:
            raise ValueError(f"HybridClassifier: {name} must be a positive finite number, got {v!r}")
    if dp_delta is not None and not dp_delta < 1:
        raise ValueError(f"HybridClassifier: dp_delta must be in (0, 1), got {dp_delta!r}")
    if dp_noise is not None and dp_clip is None:
        raise ValueError("HybridClassifier: dp_noise needs dp_clip, the bound C every sample's gradient norm is "
                         "clipped to (the noise has standard deviation dp_noise * dp_clip)")
    if dp_clip is not None and dp_noise is None:
        raise ValueError("HybridClassifier: dp_clip needs dp_noise, the noise multiplier σ: clipping without "
                         "noise is not differentially private")
    if dp_delta is not None and dp_noise is None:
        raise ValueError("HybridClassifier: dp_delta is the δ of DP-SGD's (ε, δ); it needs dp_noise and dp_clip")


class HybridClassifier(pl.LightningModule):
    """Hybrid quantum-classical classifier trained with cross-entropy.

    Model: ``pre_net`` (``None``/"none", "linear", "mlp", "cnn"; followed by ``angle_activation``
    "tanh" → π·tanh or "sigmoid" → π·sigmoid, or "none") → ``QuantumLayer.from_template(n_qubits,
    n_layers, encoding, ansatz, measure, ...)`` → ``head`` ("linear": ``Linear(n_obs, n_classes)``;
    "none": logits = ``logit_scale`` · expectations, needs ``n_obs == n_classes``).

    Without a pre-net the quantum layer reads the ``n_features`` raw features: ``encoding="angle"``
    needs ``n_features <= n_qubits`` (wire ``w`` reads feature ``w % n_features``), ``"iqp"``
    needs ``n_features == n_qubits``, ``"reupload"`` takes any number. With a pre-net the pre-net
    produces ``quantum_features`` angles (default ``n_qubits``).

    Optimisation by name: ``optimizer`` is a class name of ``torch.optim`` ("Adam", "SGD",
    "AdamW", …) built with ``lr`` and ``optimizer_kwargs``; ``scheduler`` a class name of
    ``torch.optim.lr_scheduler`` ("StepLR", "CosineAnnealingLR", "ReduceLROnPlateau", …) built
    with ``scheduler_kwargs``, stepped every ``scheduler_interval`` ("epoch"/"step"), monitoring
    ``scheduler_monitor`` for ReduceLROnPlateau.

    A noisy device: ``noise`` is a noise model as plain data (a dict of channel rules and readout
    errors, :mod:`lightning_tasks.noise_spec`); the quantum layer then runs on it (see
    :class:`~torchquantum_layers.QuantumLayer`: ``simulator`` "density" or "trajectories" with
    ``n_trajectories`` per sample, seeded by ``quantum_seed``; ``mitigation`` None, "readout",
    "zne" or "zne+readout", with ``zne_scale_factors`` / ``zne_extrapolation``). Training and
    evaluation both see the noisy (mitigated) values. The spec is saved as a hyperparameter like
    every other argument, so a checkpoint rebuilds the same noisy model; a resumed run with
    trajectories continues their seeded sequence.

    Differentially private training (DP-SGD, Abadi et al. 2016): with ``dp_clip`` C and
    ``dp_noise`` σ (both or neither) each training step takes every sample's own gradient of its
    cross-entropy with respect to all trainable parameters (``torch.func``: ``vmap(grad)`` of the
    whole module's forward through ``functional_call``; the circuit engine folds the samples into
    its batch), scales each to norm at most C, sums them, adds Gaussian noise of standard deviation
    σC to every coordinate, divides by the batch's size and hands that gradient to the optimizer
    (Lightning manual optimization; the scheduler steps as in automatic mode). The noise comes from
    a generator seeded from torch's global one on the first step (``seed_everything`` fixes it)
    whose state is checkpointed with the number of DP steps taken, so a resumed run continues both.
    ``epsilon`` (the epoch's last value) is the privacy spent by every DP step these weights have
    taken, by the Rényi-DP accountant :func:`torchquantum_layers.qml.privacy.rdp_epsilon` with
    sample rate q = batch_size / N (N the training set's size) and δ = ``dp_delta`` or 1/N². The
    accountant assumes Poisson-sampled batches; the shuffled fixed-size batches of a DataLoader are
    not that, and q = batch_size / N for them is the standard approximation (Opacus's default
    data loader), not a proof. The count assumes the same data and batch size across resumed fits.
    Lightning refuses ``Trainer(accumulate_grad_batches > 1)`` and ``gradient_clip_val`` under
    manual optimization (a MisconfigurationException); this mode also refuses several processes
    (the per-sample gradients are not all-reduced) and fp16 loss scaling. With ``noise`` the
    per-sample gradients are those of the noisy device (density matrices: exact; trajectories:
    one independent draw per sample); with ``shots`` they are shot estimates; clipping still
    bounds each sample's influence. Validation, test and predict are as
    without DP. The extra cost per step: ``benchmarks/classifier_dp.py``.

    Logs ``train_loss``, ``train_acc``, ``val_loss``, ``val_acc``, ``test_loss``, ``test_acc``
    (epoch means), and ``epsilon`` with DP.
    """

    def __init__(self, n_features: int, n_classes: int, n_qubits: int = 4, n_layers: int = 2,
                 encoding: str = "angle", ansatz: str = "hardware_efficient",
                 measure: Union[str, Sequence[str]] = "Z", encoding_kwargs: Optional[dict] = None,
                 ansatz_kwargs: Optional[dict] = None, quantum_features: Optional[int] = None,
                 pre_net: Optional[str] = None, pre_net_hidden: int = 32,
                 image_shape: Optional[Sequence[int]] = None, angle_activation: str = "tanh",
                 head: str = "linear", logit_scale: float = 5.0, diff_method: Optional[str] = None,
                 shots: Optional[int] = None, quantum_seed: Optional[int] = None, init: str = "uniform",
                 dtype: str = "complex64", optimizer: str = "Adam", lr: float = 0.01,
                 optimizer_kwargs: Optional[dict] = None, scheduler: Optional[str] = None,
                 scheduler_kwargs: Optional[dict] = None, scheduler_interval: str = "epoch",
                 scheduler_monitor: str = "val_loss", noise: Optional[dict] = None,
                 mitigation: Optional[str] = None, simulator: str = "density",
                 n_trajectories: Optional[int] = None, zne_scale_factors: Optional[list] = None,
                 zne_extrapolation: Optional[str] = None, dp_clip: Optional[float] = None,
                 dp_noise: Optional[float] = None, dp_delta: Optional[float] = None):
        super().__init__()
        # NumPy numbers as plain ones before they are saved: a NumPy scalar in the hyperparameters
        # keeps the checkpoint from loading with torch.load(weights_only=True)
        lr, logit_scale, dp_clip, dp_noise, dp_delta = (v.item() if isinstance(v, np.generic) else v
                                                        for v in (lr, logit_scale, dp_clip, dp_noise, dp_delta))
        # the same checks and messages as VQETask / QAOATask (None: the layer's default, Richardson)
        noise_model = check_noise_options(noise, mitigation, zne_scale_factors, zne_extrapolation or "richardson",
                                          "HybridClassifier")
        noise = plain_hparam(noise, "HybridClassifier: noise")
        zne_scale_factors = plain_hparam(zne_scale_factors, "HybridClassifier: zne_scale_factors")
        self.save_hyperparameters()
        for name, v in (("n_features", n_features), ("n_classes", n_classes)):
            if v is None:
                raise TypeError(f"HybridClassifier: {name} is required (from the command line, --data fills it: "
                                f"e.g. --data CirclesDataModule), got None")
        for name, v, lo in (("n_features", n_features, 1), ("n_classes", n_classes, 2),
                            ("n_qubits", n_qubits, 1), ("pre_net_hidden", pre_net_hidden, 1)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"HybridClassifier: {name} must be an int, got {v!r}")
            if v < lo:
                raise ValueError(f"HybridClassifier: {name} must be >= {lo}, got {v}")
        pre_net = "none" if pre_net is None else pre_net
        _check_choice(pre_net, PRE_NETS, "pre_net")
        _check_choice(head, HEADS, "head")
        _check_choice(angle_activation, ANGLE_ACTIVATIONS, "angle_activation")
        _check_choice(scheduler_interval, ("epoch", "step"), "scheduler_interval")
        if dtype not in _DTYPES:
            raise ValueError(f"HybridClassifier: dtype must be one of {tuple(_DTYPES)}, got {dtype!r}")
        if not isinstance(optimizer, str) or not _is_subclass(getattr(torch.optim, optimizer, None),
                                                              torch.optim.Optimizer, (torch.optim.Optimizer,)):
            raise ValueError(f"HybridClassifier: optimizer {optimizer!r} is not an optimizer class of torch.optim")
        lrs = torch.optim.lr_scheduler
        if scheduler is not None and (not isinstance(scheduler, str) or not _is_subclass(
                getattr(lrs, scheduler, None), (lrs.LRScheduler, lrs.ReduceLROnPlateau),
                abstract=tuple(getattr(lrs, n) for n in ("LRScheduler", "_LRScheduler") if hasattr(lrs, n)))):
            raise ValueError(f"HybridClassifier: scheduler {scheduler!r} is not a scheduler class of "
                             f"torch.optim.lr_scheduler")
        if not isinstance(scheduler_monitor, str):
            raise TypeError(f"HybridClassifier: scheduler_monitor must be a metric name, got {scheduler_monitor!r}")
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0 or not math.isfinite(lr):
            raise ValueError(f"HybridClassifier: lr must be a positive number, got {lr!r}")
        for name, kw in (("encoding_kwargs", encoding_kwargs), ("ansatz_kwargs", ansatz_kwargs),
                         ("optimizer_kwargs", optimizer_kwargs), ("scheduler_kwargs", scheduler_kwargs)):
            if kw is not None and not isinstance(kw, dict):
                raise TypeError(f"HybridClassifier: {name} must be a dict or None, got {kw!r}")
        if isinstance(logit_scale, bool) or not isinstance(logit_scale, (int, float)) \
                or not math.isfinite(logit_scale) or not logit_scale > 0:
            raise ValueError(f"HybridClassifier: logit_scale must be a positive finite number, got {logit_scale!r}")
        if quantum_features is not None:
            if isinstance(quantum_features, bool) or not isinstance(quantum_features, int):
                raise TypeError(f"HybridClassifier: quantum_features must be an int or None, got "
                                f"{quantum_features!r}")
            if quantum_features < 1:
                raise ValueError(f"HybridClassifier: quantum_features must be >= 1, got {quantum_features}")
        if image_shape is not None and (isinstance(image_shape, (str, bytes)) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in image_shape)):
            raise TypeError(f"HybridClassifier: image_shape must be a sequence of ints, got {image_shape!r}")
        _check_dp_options(dp_clip, dp_noise, dp_delta)

        if pre_net == "none":
            if quantum_features not in (None, n_features):
                raise ValueError(f"HybridClassifier: without a pre-net the quantum layer reads the "
                                 f"{n_features} features; quantum_features={quantum_features} disagrees")
            q_features = n_features
            self.pre_net = None
        else:
            q_features = n_qubits if quantum_features is None else quantum_features
            layers = [build_pre_net(pre_net, n_features, q_features, pre_net_hidden, image_shape)]
            if angle_activation != "none":
                layers.append(_AngleActivation(angle_activation))
            self.pre_net = nn.Sequential(*layers)
        self.quantum = QuantumLayer.from_template(
            n_qubits, n_layers, encoding=encoding, ansatz=ansatz,
            measure=list(measure) if isinstance(measure, (list, tuple)) else measure,
            n_features=q_features,
            encoding_kwargs=encoding_kwargs, ansatz_kwargs=ansatz_kwargs, init=init,
            diff_method=diff_method, dtype=_DTYPES[dtype], shots=shots, seed=quantum_seed,
            noise_model=noise_model,
            simulator=simulator, n_trajectories=n_trajectories, mitigation=mitigation,
            zne_scale_factors=zne_scale_factors, zne_extrapolation=zne_extrapolation)
        n_obs = self.quantum.n_outputs
        if head == "linear":
            self.head = nn.Linear(n_obs, n_classes)
        else:
            if n_obs != n_classes:
                raise ValueError(f"HybridClassifier: head='none' needs one observable per class, got "
                                 f"{n_obs} observables for {n_classes} classes")
            self.head = None
        self.logit_scale = float(logit_scale)
        self._private = dp_noise is not None
        if self._private:
            self.automatic_optimization = False
        self._dp_steps = 0
        self._dp_generator = None
        self._dp_accountant = None         # (q, δ, per-step RDP at each order) of the current fit
        self._dp_epoch_done = False

    @property
    def is_private(self) -> bool:
        """Training runs DP-SGD (``dp_noise`` and ``dp_clip`` given)."""
        return self._private

    @property
    def dp_steps(self) -> int:
        """DP-SGD steps these weights have taken, over every fit and resumed checkpoint."""
        return self._dp_steps

    # ------------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, n_classes)`` of a ``(B, n_features)`` batch (``(B, C, H, W)`` images
        for ``pre_net="cnn"`` too)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"HybridClassifier: input must be a torch.Tensor, got {type(x).__name__}")
        n = self.hparams.n_features
        image = self.hparams.pre_net == "cnn" and x.dim() == 4
        if not image and (x.dim() != 2 or x.shape[1] != n):
            raise ValueError(f"HybridClassifier: input must have shape (B, {n}) (n_features={n}), got "
                             f"{tuple(x.shape)}")
        if image and x.shape[1:].numel() != n:
            raise ValueError(f"HybridClassifier: images of shape {tuple(x.shape[1:])} hold "
                             f"{x.shape[1:].numel()} values but n_features={n}")
        if self.pre_net is not None:
            x = self.pre_net(x)
        q = self.quantum(x)
        return self.head(q) if self.head is not None else self.logit_scale * q

    def _step(self, batch, stage: str):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self._log_metrics(stage, loss, logits, y)
        return loss

    def _log_metrics(self, stage, loss, logits, y):
        acc = (logits.argmax(dim=-1) == y).float().mean()
        show = stage != "train"
        self.log(f"{stage}_loss", loss, on_step=False, on_epoch=True, prog_bar=show, batch_size=y.shape[0])
        self.log(f"{stage}_acc", acc, on_step=False, on_epoch=True, prog_bar=show, batch_size=y.shape[0])

    def training_step(self, batch, batch_idx):
        if self.is_private:
            return self._dp_training_step(batch, batch_idx)
        return self._step(batch, "train")

    # -- DP-SGD ---------------------------------------------------------------------------------
    def per_sample_gradients(self, x: torch.Tensor, y: torch.Tensor, return_outputs: bool = False):
        """Each sample's gradient of its cross-entropy, ``{name: (B, *shape)}`` for every trainable
        parameter (names of ``named_parameters()``), by ``torch.func`` on the whole forward; with
        ``return_outputs`` also the per-sample losses ``(B,)`` and logits ``(B, n_classes)``."""
        params = {k: v.detach() for k, v in self.named_parameters() if v.requires_grad}
        if not params:
            raise ValueError("HybridClassifier: DP-SGD needs trainable parameters; every parameter is frozen")
        return per_sample_gradients(self, params, x, y, return_outputs=return_outputs)

    def _noise_generator(self, device: torch.device) -> torch.Generator:
        gen = self._dp_generator
        if gen is None or gen.device != device:
            # seeded from torch's global generator, so seed_everything fixes the noise; kept in
            # the checkpoint afterwards, so a resumed run draws what an uninterrupted one would
            gen = torch.Generator(device=device)
            gen.manual_seed(int(torch.randint(0, 2 ** 62, (1,)).item()))
            self._dp_generator = gen
        return gen

    def _accountant(self):
        if self._dp_accountant is None:
            loader = self.trainer.train_dataloader
            batch_size = getattr(loader, "batch_size", None)
            try:
                n = len(loader.dataset)
            except (AttributeError, TypeError):
                n = None
            if not isinstance(batch_size, int) or not n:
                raise ValueError(f"HybridClassifier: dp_noise (DP-SGD) needs one training DataLoader with a "
                                 f"batch_size and a sized dataset to account the privacy spent, got "
                                 f"{type(loader).__name__}")
            delta = self.hparams.dp_delta
            if delta is None:
                if n < 2:
                    raise ValueError(f"HybridClassifier: the default dp_delta 1/N² needs N >= 2 training "
                                     f"samples, got {n}: set dp_delta")
                delta = 1.0 / n ** 2
            q = min(1.0, batch_size / n)
            self._dp_accountant = (q, delta, gaussian_rdp(q, self.hparams.dp_noise))
        return self._dp_accountant

    def dp_epsilon(self) -> float:
        """ε spent by the DP steps taken so far, for the current (or last) fit's sample rate and δ."""
        if not self.is_private:
            raise ValueError("HybridClassifier: dp_epsilon() needs DP-SGD training (dp_noise and dp_clip)")
        if self._dp_accountant is None and self._trainer is None:
            raise ValueError("HybridClassifier: dp_epsilon() needs the training data's size and batch size: "
                             "call it during or after Trainer.fit, or use tql.qml.privacy.rdp_epsilon with "
                             "dp_steps")
        q, delta, rdp = self._accountant()
        if self._dp_steps == 0:
            return 0.0
        return epsilon_from_rdp([self._dp_steps * r for r in rdp], delta)

    def _dp_training_step(self, batch, batch_idx):
        x, y = batch
        hp = self.hparams
        self._accountant()                    # a loader it cannot account fails before any step
        opt = self.optimizers()
        grads, losses, logits = self.per_sample_gradients(x, y, return_outputs=True)
        update, _ = clip_and_noise(grads, hp.dp_clip, hp.dp_noise, y.shape[0], self._noise_generator(x.device))
        opt.zero_grad()
        for name, p in self.named_parameters():
            if name in update:
                p.grad = update[name]
        opt.step()
        self._dp_steps += 1
        loss = losses.mean()
        self._log_metrics("train", loss, logits, y)
        self.log("epsilon", self.dp_epsilon(), on_step=False, on_epoch=True, reduce_fx="max", prog_bar=True,
                 batch_size=y.shape[0])
        # Lightning steps no scheduler under manual optimization: the same points as automatic
        # mode (after each step; "epoch" ones after the epoch's last batch, before validation)
        self._step_schedulers("step", plateau=False, batch_idx=batch_idx)
        if batch_idx + 1 >= self.trainer.num_training_batches or self.trainer.is_last_batch:
            self._dp_epoch_done = True
            self._step_schedulers("epoch", plateau=False)
        return loss

    def _step_schedulers(self, interval: str, plateau: bool, batch_idx: int = 0) -> None:
        # manual optimization drops the config's monitor and plateau flag: from the hyperparameters
        for config in self.trainer.lr_scheduler_configs:
            is_plateau = isinstance(config.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
            if config.interval != interval or is_plateau != plateau:
                continue
            index = (batch_idx if interval == "step" else self.current_epoch) + 1
            if index % config.frequency:
                continue
            metric = None
            if plateau:
                monitor = self.hparams.scheduler_monitor
                metric = self.trainer.callback_metrics.get(monitor)
                if metric is None:       # automatic mode's default (strict) refuses it too
                    raise ValueError(f"HybridClassifier: scheduler_monitor {monitor!r} (ReduceLROnPlateau) is not "
                                     f"logged at the {interval}'s end; available: "
                                     f"{sorted(self.trainer.callback_metrics)}")
            self.lr_scheduler_step(config.scheduler, metric)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.is_private:
            self._step_schedulers("step", plateau=True, batch_idx=batch_idx)

    def on_train_epoch_end(self) -> None:
        if self.is_private and self._dp_epoch_done:
            self._dp_epoch_done = False
            self._step_schedulers("epoch", plateau=True)

    def on_fit_start(self) -> None:
        self._dp_accountant = None            # the data (N, batch size) may differ from the last fit
        self._dp_epoch_done = False
        if not self.is_private:
            return
        # Lightning itself refuses accumulate_grad_batches > 1 and gradient_clip_val under manual
        # optimization (before this hook); these it would let through with a wrong result
        if self.trainer.world_size > 1:
            raise ValueError(f"HybridClassifier: dp_noise (DP-SGD) runs in one process: the per-sample "
                             f"gradients are not all-reduced across the {self.trainer.world_size} processes")
        if getattr(self.trainer.precision_plugin, "scaler", None) is not None:
            raise ValueError("HybridClassifier: dp_noise (DP-SGD) sets the gradients itself, which a loss "
                             "scaler (precision='16-mixed') would unscale: use 32-bit or bf16 precision")

    def validation_step(self, batch, batch_idx):
        return self._step(batch, "val")

    def test_step(self, batch, batch_idx):
        return self._step(batch, "test")

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        x = batch[0] if isinstance(batch, (list, tuple)) else batch
        return self(x).argmax(dim=-1)

    # ------------------------------------------------------------------------------------------
    # the shot / trajectory sampler's generator is not part of state_dict: keep its state in the
    # checkpoint so that a resumed sampled run draws the same samples as an uninterrupted one
    _GEN_KEY = "quantum_shot_generator"
    # DP-SGD: the accountant's step count (ε must continue, not restart, on resume) and the noise
    # generator's state (plain ints and a uint8 tensor: loads with weights_only=True)
    _DP_KEY = "dp_sgd"

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        gen = getattr(self.quantum, "_generator", None)
        if gen is not None:
            checkpoint[self._GEN_KEY] = {"device": gen.device.type, "state": gen.get_state()}
        if self.is_private:
            saved = {"steps": int(self._dp_steps)}
            if self._dp_generator is not None:
                saved["noise_generator"] = {"device": self._dp_generator.device.type,
                                            "state": self._dp_generator.get_state()}
            checkpoint[self._DP_KEY] = saved

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        dp = checkpoint.get(self._DP_KEY)
        if dp is not None and self.is_private:
            self._dp_steps = int(dp["steps"])
            noise_gen = dp.get("noise_generator")
            self._dp_generator = None
            if noise_gen is not None:
                device = noise_gen["device"]
                if device == "cpu" or getattr(torch, device).is_available():
                    gen = torch.Generator(device=device)
                    gen.set_state(noise_gen["state"])
                    self._dp_generator = gen
        self._load_shot_generator(checkpoint)

    def _load_shot_generator(self, checkpoint: dict) -> None:
        saved = checkpoint.get(self._GEN_KEY)
        if saved is None or not self.quantum.is_stochastic or self.quantum.seed is None:
            return
        device = saved["device"]
        if device != "cpu" and not getattr(torch, device).is_available():
            return                  # restarts from quantum_seed, as a copy of the layer does
        gen = torch.Generator(device=device)
        gen.set_state(saved["state"])
        self.quantum._generator = gen

    def configure_optimizers(self):
        hp = self.hparams
        opt_cls = getattr(torch.optim, hp.optimizer)
        try:
            opt = opt_cls(self.parameters(), lr=hp.lr, **(hp.optimizer_kwargs or {}))
        except TypeError as err:
            raise TypeError(f"HybridClassifier: optimizer {hp.optimizer} rejected optimizer_kwargs "
                            f"{hp.optimizer_kwargs}: {err}") from None
        if hp.scheduler is None:
            return opt
        sched_cls = getattr(torch.optim.lr_scheduler, hp.scheduler)
        try:
            sched = sched_cls(opt, **(hp.scheduler_kwargs or {}))
        except TypeError as err:
            raise TypeError(f"HybridClassifier: scheduler {hp.scheduler} rejected scheduler_kwargs "
                            f"{hp.scheduler_kwargs}: {err}") from None
        config = {"scheduler": sched, "interval": hp.scheduler_interval}
        # under DP-SGD (manual optimization) Lightning warns about and ignores "monitor": the task
        # steps the scheduler itself
        if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau) and not self.is_private:
            config["monitor"] = hp.scheduler_monitor
        return {"optimizer": opt, "lr_scheduler": config}
