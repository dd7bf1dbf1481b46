"""``SinglePointTask``: the base of tasks with no data (VQE, QAOA), where one epoch is one
optimizer step on a one-element dataset the task serves itself.

``tql validate|test|predict`` (or ``Trainer.validate`` …) evaluate the current angles, e.g. those
of ``--ckpt_path``: validation and test log :meth:`evaluation` under ``val_`` / ``test_``,
prediction returns it. During ``fit`` the task has no validation step, so training steps are
not followed by a second evaluation of the same angles and checkpoints resume as without one.
"""
from __future__ import annotations

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

__all__ = ["SinglePointTask", "plain_hparam"]


def plain_hparam(value, what: str):
    """``value`` as plain Python data: NumPy scalars and 0-d tensors → numbers, tuples and arrays →
    lists, recursively through lists and str-keyed dicts. Hyperparameters must be such values: a
    checkpoint then loads with ``torch.load(weights_only=True)`` and a config round-trips through
    YAML. Anything else is a TypeError naming ``what`` (e.g. ``"VQETask: noise"``)."""
    if isinstance(value, np.generic) or (isinstance(value, torch.Tensor) and value.dim() == 0):
        return value.item()           # before the float test: np.float64 is a float subclass
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return plain_hparam(value.tolist(), what)
    if isinstance(value, (list, tuple)):
        return [plain_hparam(v, what) for v in value]
    if isinstance(value, dict):
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise TypeError(f"{what}: mapping keys must be strings, got {bad[0]!r}")
        return {k: plain_hparam(v, f"{what}[{k!r}]") for k, v in value.items()}
    raise TypeError(f"{what}: expected plain data (numbers, strings, lists, dicts), got {type(value).__name__}; "
                    f"a task's arguments are saved in checkpoints and configs")


class SinglePointTask(pl.LightningModule):
    """Subclasses define ``evaluation() -> dict`` (metric name → float at the current angles)."""

    @staticmethod
    def _one_element() -> DataLoader:
        return DataLoader(TensorDataset(torch.zeros(1)), batch_size=1)

    def train_dataloader(self):
        return self._one_element()

    def test_dataloader(self):
        return self._one_element()

    def predict_dataloader(self):
        return self._one_element()

    def _log_evaluation(self, prefix: str) -> None:
        for name, value in self.evaluation().items():
            self.log(f"{prefix}_{name}", torch.tensor(float(value), dtype=torch.float64), batch_size=1)

    def _fitting(self) -> bool:
        return self._trainer is not None and self.trainer.state.fn == "fit"

    @property
    def validation_step(self):
        # Lightning validates during fit when the hook is overridden; here only `validate` should
        # (a validation loop also changes how Lightning counts steps when a run resumes)
        return super().validation_step if self._fitting() else self._validation_step

    @property
    def val_dataloader(self):
        # not overridden during fit either, so Lightning does not warn of a loader without a step
        return super().val_dataloader if self._fitting() else self._one_element

    def _validation_step(self, batch, batch_idx):
        self._log_evaluation("val")

    def test_step(self, batch, batch_idx):
        self._log_evaluation("test")

    def predict_step(self, batch, batch_idx):
        return self.evaluation()
