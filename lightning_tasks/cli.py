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

``--ckpt_path``: LightningCLI rebuilds the model from the checkpoint's saved arguments. A
checkpoint of another task class than the configured one, or a model argument given explicitly
that differs from the saved one (it would be replaced silently), is a one-line error; a
checkpoint written outside the CLI (a plain ``Trainer``, ``fit_vqe``) resumes too. A model with no
loaders of its own (``HybridClassifier``) needs ``--data``; ``VQETask`` / ``QAOATask`` take none.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
import warnings
from typing import Optional, Sequence

import pytorch_lightning as pl
import torch
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


def _all_subclasses(base: type) -> set:
    seen, stack = set(), [base]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
    return seen


def _subclass_names(base: type) -> list:
    return sorted({c.__name__ for c in _all_subclasses(base) if not c.__name__.startswith("_")})


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


def _resolve_class(class_path):
    """The class a ``class_path`` (``"lightning_tasks.vqe.VQETask"``) names, or None."""
    if not isinstance(class_path, str) or "." not in class_path:
        return None
    module, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _init_parameters(cls) -> set:
    """The named constructor arguments of ``cls`` (empty when its signature cannot be read)."""
    try:
        params = inspect.signature(cls.__init__).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {p.name for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _checkpoint_class_name(hparams: dict) -> Optional[str]:
    """The name of the task class that wrote a checkpoint: its ``_class_path`` (written by the CLI),
    else the module class whose constructor takes every saved hyperparameter (the fewest others
    first), else None."""
    path = hparams.get("_class_path")
    if isinstance(path, str):
        cls = _resolve_class(path)
        return cls.__name__ if cls is not None else path.rpartition(".")[2]
    keys = {k for k in hparams if not k.startswith("_")}
    fits = []
    for cls in _all_subclasses(pl.LightningModule):
        params = _init_parameters(cls)
        if keys and keys <= params and not cls.__name__.startswith("_"):
            fits.append((len(params - keys), cls.__name__))
    return min(fits)[1] if fits else None


def _bad_value(message: str) -> ValueError:
    err = ValueError(message)
    err._tql_bad_value = True           # main() reports it as one line on the console
    return err


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

    def parse_arguments(self, parser, args) -> None:
        super().parse_arguments(parser, args)
        # LightningCLI next reads the checkpoint's hyperparameters INTO the model's config, class
        # path included: a checkpoint of another task class silently replaced the configured
        # model (or failed later, e.g. a callback's metric missing). Compare the two first.
        sub = self.config.get("subcommand")
        ckpt = self.config[sub].get("ckpt_path") if sub else None
        model = self.config[sub].get("model") if sub else None
        if not isinstance(ckpt, str) or not os.path.isfile(ckpt) or model is None:
            return
        try:
            saved = torch.load(ckpt, weights_only=True, map_location="cpu")
        except Exception as exc:          # any unpickling / zip error: one line naming the file
            raise _bad_value(f"--ckpt_path: {ckpt!r} does not load with torch.load(weights_only=True): "
                             f"{str(exc).splitlines()[0]}") from None
        hparams = saved.get("hyper_parameters") if isinstance(saved, dict) else None
        wanted = _resolve_class(model.get("class_path"))
        if not isinstance(hparams, dict) or not hparams or wanted is None:
            return
        path = hparams.get("_class_path")
        written_by = _resolve_class(path) if isinstance(path, str) else None
        keys = {k for k in hparams if not k.startswith("_")}
        if not (written_by is wanted or (written_by is None and path is None and keys <= _init_parameters(wanted))):
            name = _checkpoint_class_name(hparams) or "another task"
            raise _bad_value(f"--ckpt_path: {ckpt!r} is a checkpoint of {name}, but the model is {wanted.__name__}; "
                             f"resume it with the config (or --model) of {name}, or give a {wanted.__name__} "
                             f"checkpoint")
        self._check_ckpt_arguments(ckpt, wanted, model.get("init_args"), hparams)
        if path is None:
            # written outside the CLI (a plain Trainer, fit_vqe): LightningCLI's reader of the saved
            # hyperparameters needs the class path, and failed with "Parser key model"
            init_args = {k: v for k, v in hparams.items() if not k.startswith("_")}
            self.config = self.parser.parse_object(
                {sub: {"model": {"class_path": model.get("class_path"), "init_args": init_args}}}, self.config)
            self._ckpt_hparams_applied = True

    def _parse_ckpt_path(self) -> None:
        if not getattr(self, "_ckpt_hparams_applied", False):
            super()._parse_ckpt_path()

    @staticmethod
    def _check_ckpt_arguments(ckpt: str, cls: type, init_args, hparams: dict) -> None:
        """The checkpoint's hyperparameters replace the model's arguments: one given explicitly (not
        None, not the default) that differs from the saved one was silently ignored."""
        if init_args is None:
            return
        given = init_args.as_dict() if hasattr(init_args, "as_dict") else dict(init_args)
        defaults = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()}
        clash = {k: v for k, v in given.items()
                 if k in hparams and v is not None and v != defaults.get(k) and v != hparams[k]}
        if clash:
            ours = ", ".join(f"{k}={hparams[k]!r}" for k in clash)
            yours = ", ".join(f"{k}={v!r}" for k, v in clash.items())
            raise _bad_value(f"--ckpt_path: the {cls.__name__} of {ckpt!r} has {ours}, but the config / command line "
                             f"gives {yours}; a run from a checkpoint continues its task with the saved arguments: "
                             f"drop {'this option' if len(clash) == 1 else 'these options'}, or start a new run "
                             f"without --ckpt_path")

    def before_instantiate_classes(self) -> None:
        # a local --ckpt_path that is not a file: one line now, not a traceback after the set-up
        sub = self.config.get("subcommand")
        ckpt = self.config[sub].get("ckpt_path") if sub else None
        if (isinstance(ckpt, str) and ckpt not in ("last", "best", "hpc") and ":" not in ckpt
                and not os.path.isfile(ckpt)):
            raise _bad_value(f"--ckpt_path: no checkpoint file at {ckpt!r}")
        if sub:
            self._check_data(sub, self.config[sub].get("model"), self.config[sub].get("data"))

    @staticmethod
    def _check_data(sub: str, model, data) -> None:
        """A model without loaders of its own needs --data (it failed with a missing n_features or
        Lightning's "train_dataloader must be implemented" traceback); a task that serves its own
        one-element dataset takes none (the data module's batches would silently become its steps)."""
        from .single_point import SinglePointTask
        cls = _resolve_class(model.get("class_path")) if model is not None else None
        if not isinstance(cls, type):
            return
        if data is None:
            hook = {"fit": "train_dataloader", "validate": "val_dataloader", "test": "test_dataloader",
                    "predict": "predict_dataloader"}.get(sub)
            if hook is not None and getattr(cls, hook) is getattr(pl.LightningModule, hook):
                fills = (" (its n_features and n_classes then come from the data module)"
                         if {"n_features", "n_classes"} <= _init_parameters(cls) else "")
                raise _bad_value(f"--data: {cls.__name__} has no data of its own; pass a data module, e.g. --data "
                                 f"CirclesDataModule (or MoonsDataModule, IrisDataModule, DigitsDataModule){fills}")
        elif issubclass(cls, SinglePointTask):
            raise _bad_value(f"--data: {cls.__name__} serves its own one-element dataset (one epoch is one optimizer "
                             f"step) and takes no data module; drop --data")

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
