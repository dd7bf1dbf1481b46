"""``SinglePointTask``: the base of tasks with no data (VQE, QAOA), where one epoch is one
optimizer step on a one-element dataset the task serves itself.

``tql validate|test|predict`` (or ``Trainer.validate`` …) evaluate the current angles, e.g. those
of ``--ckpt_path``: validation and test log :meth:`evaluation` under ``val_`` / ``test_``,
prediction returns it. During ``fit`` the task has no validation step, so training steps are
not followed by a second evaluation of the same angles and checkpoints resume as without one.
"""
from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

__all__ = ["SinglePointTask"]


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
