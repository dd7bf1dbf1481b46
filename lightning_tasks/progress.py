"""Console output for the recipes: one progress bar per run, and Lightning's banners silenced.

Lightning's own bar starts a new bar every epoch; the VQE and QAOA tasks take one optimizer step
per epoch, so :class:`StepProgressBar` counts optimizer steps over the whole run instead (up to
``max_steps``, or the Trainer's estimated total for epoch-limited runs such as the classifier)
and shows chosen logged metrics beside it.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from typing import Optional, Sequence

from pytorch_lightning.callbacks import Callback
from pytorch_lightning.callbacks.progress import ProgressBar
from tqdm import tqdm

__all__ = ["StepProgressBar", "TickCallback", "quiet_lightning", "LIGHTNING_NOISE"]

# Lightning's start-up notes ("GPU available: False …", few dataloader workers, …): noise for tasks
# that serve a one-element dataset (the demo, the CLI, fit_vqe / pes_scan)
LIGHTNING_NOISE = (".*does not have many workers.*", ".*GPU available but not used.*", ".*TPU available.*",
                   ".*fewer steps than.*", ".*has fewer than.*log.*", ".*`training_step` returned `None`.*",
                   ".*LightningModule.*has parameters that were not used.*",
                   ".*isinstance\\(treespec, LeafSpec\\)` is deprecated.*")
_LOGGERS = ("pytorch_lightning.utilities.rank_zero", "lightning.pytorch.utilities.rank_zero",
            "pytorch_lightning.accelerators.cuda", "lightning.pytorch.accelerators.cuda")


@contextlib.contextmanager
def quiet_lightning():
    """Silence Lightning's start-up log lines and routine warnings inside the block."""
    loggers = [logging.getLogger(n) for n in _LOGGERS]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        for pattern in LIGHTNING_NOISE:
            warnings.filterwarnings("ignore", pattern)
        for lg in loggers:
            lg.setLevel(logging.WARNING)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def _fmt(v) -> str:
    v = float(v)
    return f"{v:.6g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"


class StepProgressBar(ProgressBar):
    """One tqdm bar over the optimizer steps of a ``fit``, with the metrics named in ``metrics``
    (those the task logs with ``prog_bar=True``; all of them when None)."""

    def __init__(self, description: str = "training", metrics: Optional[Sequence[str]] = None, file=None):
        super().__init__()
        self.description = description
        self.metrics = None if metrics is None else tuple(metrics)
        self.file = file
        self._enabled = True
        self._bar = None

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args, **kwargs) -> None:
        (self._bar.write if self._bar is not None else print)(" ".join(map(str, args)))

    def _total(self, trainer):
        if trainer.max_steps is not None and trainer.max_steps > 0:
            return trainer.max_steps
        try:
            return int(trainer.estimated_stepping_batches)
        except (TypeError, ValueError, OverflowError):     # an infinite loader: no total
            return None

    def on_train_start(self, trainer, pl_module) -> None:
        if self._enabled:
            self._bar = tqdm(total=self._total(trainer), initial=trainer.global_step, desc=self.description,
                             unit="step", dynamic_ncols=True, leave=True,
                             file=self.file if self.file is not None else sys.stderr)

    def _refresh(self, trainer, pl_module) -> None:
        if self._bar is None:
            return
        shown = {k: v for k, v in self.get_metrics(trainer, pl_module).items()
                 if k != "v_num" and (self.metrics is None or k in self.metrics)}
        if shown:
            self._bar.set_postfix({k: _fmt(v) for k, v in shown.items()}, refresh=False)
        # tqdm redraws at most every `mininterval` (a forced refresh would print a line per step
        # to a log file); close() draws the final state
        self._bar.update(trainer.global_step - self._bar.n)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._refresh(trainer, pl_module)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            self._refresh(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        if self._bar is not None:
            self._refresh(trainer, pl_module)
            self._bar.close()
            self._bar = None


class TickCallback(Callback):
    """Advance an outer tqdm bar by one at the end of each ``fit`` (one tick per scan point when the
    same callback is handed to a series of short runs, as ``pes_scan`` makes)."""

    def __init__(self, bar):
        self.bar = bar

    def on_train_end(self, trainer, pl_module) -> None:
        self.bar.update(1)
