"""``tql``: the recipes' command line, Lightning's ``LightningCLI`` with the tasks registered.

    tql fit --config examples/configs/vqe_lih.yaml
    tql fit --model QAOATask --model.problem maxcut --model.graph "[[0,1],[1,2],[2,3],[3,0],[1,3]]" --model.p 4
    tql fit --model HybridClassifier --data CirclesDataModule --trainer.max_epochs 20
    tql fit --config examples/configs/qaoa_maxcut.yaml --print_config
    tql fit --config examples/configs/qaoa_maxcut.yaml --ckpt_path lightning_logs/version_0/checkpoints/last.ckpt
    tql validate|test|predict ...          (as LightningCLI)
    tql demo ...                           (lightning_tasks.demo.run_demo)

``--model`` takes any LightningModule by class name (``VQETask``, ``QAOATask``,
``HybridClassifier``) or import path; ``--data`` any LightningDataModule (``CirclesDataModule``,
``MoonsDataModule``, ``IrisDataModule``, ``DigitsDataModule``). ``VQETask`` and ``QAOATask`` serve
their own one-element dataset and need no ``--data``; for ``HybridClassifier`` the data module's
``n_features`` and ``n_classes`` fill the model's arguments of the same names.

Differences from a bare ``LightningCLI``, each because these tasks log one step per epoch:
``trainer.log_every_n_steps`` defaults to 1, and the default logger is a ``CSVLogger`` under
``<default_root_dir>/lightning_logs/version_N/`` (``metrics.csv``; checkpoints in
``checkpoints/`` beside it) plus, when ``tensorboard`` is installed, a ``TensorBoardLogger`` in
its ``tensorboard/`` subfolder. ``--trainer.logger false`` turns logging off (``config.yaml``
and ``checkpoints/`` then go to the root dir, replaced by the next such run there); a logger
given in the config replaces both. ``validate``, ``test`` and ``predict`` evaluate the angles of
``--ckpt_path`` (or the initial ones): ``val_energy``, ``test_best_ratio``, ...
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
import warnings
from typing import Optional, Sequence

import pytorch_lightning as pl
from lightning_fabric.utilities.exceptions import MisconfigurationException
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI

from torchquantum_layers.runtime import keep_freed_memory
from .progress import LIGHTNING_NOISE

__all__ = ["main", "TQLCLI", "default_loggers"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OURS = {"VQETask", "QAOATask", "HybridClassifier", "CirclesDataModule", "MoonsDataModule", "IrisDataModule",
         "DigitsDataModule"}


def _register_tasks() -> None:
    """Import the recipes so that ``--model NAME`` / ``--data NAME`` find them by class name
    (jsonargparse resolves short names among the imported subclasses)."""
    from . import classifier, data, qaoa, vqe  # noqa: F401


def _subclass_names(base: type) -> list:
    seen, stack = set(), [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    return sorted({c.__name__ for c in seen if not c.__name__.startswith("_")})


def _check_class_names(argv: Sequence[str]) -> None:
    """A bare class name after ``--model`` / ``--data`` that names no known class: one clear
    line instead of jsonargparse's full usage dump. Import paths, configs and JSON are left to it."""
    for flag, base, kind in (("--model", pl.LightningModule, "model"),
                             ("--data", pl.LightningDataModule, "data module")):
        values = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]
        values += [a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")]
        known = _subclass_names(base)
        for v in values:
            if _NAME.match(v) and v not in known:
                ours = [n for n in known if n in _OURS] or known
                print(f"tql: error: unknown {kind} {v!r} for {flag}; choose one of {', '.join(ours)} "
                      f"or give an import path such as mypackage.module.MyClass", file=sys.stderr)
                raise SystemExit(2)


def default_loggers(root: str, name: str = "lightning_logs") -> list:
    """``[CSVLogger]``, plus a ``TensorBoardLogger`` (same version folder, ``tensorboard/`` inside)
    when tensorboard is installed. The CSV logger comes first: checkpoints follow its folder."""
    from pytorch_lightning.loggers import CSVLogger
    csv_logger = CSVLogger(save_dir=root, name=name)
    loggers = [csv_logger]
    if importlib.util.find_spec("tensorboard") is not None or importlib.util.find_spec("tensorboardX") is not None:
        from pytorch_lightning.loggers import TensorBoardLogger
        loggers.append(TensorBoardLogger(save_dir=root, name=name, version=csv_logger.version, sub_dir="tensorboard"))
    return loggers


class TQLCLI(LightningCLI):
    """``LightningCLI`` with the data → classifier links and the CSV/TensorBoard default loggers."""

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # a model without these arguments (VQETask, QAOATask) ignores the links
        for key in ("n_features", "n_classes"):
            parser.link_arguments(f"data.{key}", f"model.init_args.{key}", apply_on="instantiate")

    def before_instantiate_classes(self) -> None:
        # a local --ckpt_path that is not a file: one line now, not a traceback after the set-up
        sub = self.config.get("subcommand")
        ckpt = self.config[sub].get("ckpt_path") if sub else None
        if (isinstance(ckpt, str) and ckpt not in ("last", "best", "hpc") and ":" not in ckpt
                and not os.path.isfile(ckpt)):
            err = ValueError(f"--ckpt_path: no checkpoint file at {ckpt!r}")
            err._tql_bad_value = True
            raise err

    def instantiate_classes(self) -> None:
        try:
            super().instantiate_classes()
        except (ValueError, TypeError) as err:
            err._tql_bad_value = True       # main() reports it as one line on the console
            # jsonargparse wraps a constructor's error in a "Union subtypes" report around the whole
            # namespace; the task's own message (naming the value at fault) is the useful part
            inner = err
            while str(inner).startswith("Does not validate against any of the Union subtypes") and isinstance(
                    inner.__cause__, (ValueError, TypeError)):
                inner = inner.__cause__
            if inner is err:
                raise
            inner._tql_bad_value = True
            raise inner from None

    def instantiate_trainer(self, **kwargs) -> pl.Trainer:
        cfg = self._get(self.config_init, "trainer", default={})
        if "logger" not in kwargs and cfg.get("logger") in (None, True):
            root = cfg.get("default_root_dir") or os.getcwd()
            kwargs["logger"] = default_loggers(str(root))
        elif cfg.get("logger") is False:
            # no logger, no version folders: config.yaml lands in the root dir, as the checkpoints
            # do, and the next run there replaces both
            self.save_config_kwargs = {**self.save_config_kwargs, "overwrite": True}
        try:
            trainer = super().instantiate_trainer(**kwargs)
        except (ValueError, TypeError, MisconfigurationException) as err:     # e.g. max_epochs=-5, no GPU
            err._tql_bad_value = True
            raise
        for cb in trainer.checkpoint_callbacks:
            if isinstance(cb, ModelCheckpoint) and cb.save_last is None:
                cb.save_last = True         # `--ckpt_path .../checkpoints/last.ckpt` resumes any run
            if isinstance(cb, ModelCheckpoint) and cfg.get("logger") is False and cb.dirpath is None:
                # <root>/checkpoints is shared by every logger-less run there: replace last.ckpt
                # instead of writing last-v1.ckpt beside it (a resume would read the old one)
                cb._enable_version_counter = False
        return trainer


def main(argv: Optional[Sequence[str]] = None):
    """Entry point of the ``tql`` console script; ``argv`` defaults to ``sys.argv[1:]``.

    ``tql demo ...`` hands the rest of the line to :func:`lightning_tasks.demo.run_demo` and
    returns 1 when one of its checks missed its target, else 0; anything else is a LightningCLI
    command line (``fit``, ``validate``, ``test``, ``predict``), 0 after the run. A bad command line
    exits with status 2 (``SystemExit``), ``--help`` / ``--print_config`` with 0; a value a task
    (or the Trainer) refuses raises that task's own ``ValueError`` / ``TypeError``, which the
    console script (``argv`` None) prints as one ``tql: error: ...`` line before exiting with 2.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None:            # the console script owns its process: reuse freed state-sized blocks
        keep_freed_memory()
    if args and args[0] == "demo":
        from .demo import exit_status, run_demo     # imported only here: the demo pulls in its own dependencies
        return exit_status(run_demo(args[1:]))
    _register_tasks()
    _check_class_names(args)
    try:
        _run_cli(args, argv is None)
    except (ValueError, TypeError, MisconfigurationException) as err:
        if argv is not None or not getattr(err, "_tql_bad_value", False):
            raise
        # the console script: a value a task or the Trainer refuses is one line, not a traceback
        print(f"tql: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    return 0


def _run_cli(args: list, from_sys_argv: bool) -> None:
    with warnings.catch_warnings():
        for pattern in LIGHTNING_NOISE:
            warnings.filterwarnings("ignore", pattern)
        TQLCLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
               trainer_defaults={"log_every_n_steps": 1},
               args=None if from_sys_argv else args,        # None: LightningCLI reads sys.argv itself
               parser_kwargs={"prog": "tql", "description": "Train the torchquantum-layers recipes with Lightning "
                                                           "(tql demo: the guided demos)"})


if __name__ == "__main__":      # python -m lightning_tasks.cli
    sys.exit(main())
