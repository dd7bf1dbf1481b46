"""Hybrid quantum classifiers trained with the PyTorch Lightning ``Trainer``.

Data sets and models (``--dataset``; ``all`` runs the three acceptance runs in turn):

* ``circles``: Paddle Quantum's circle set (200 train / 100 test), 4 qubits, RY angle encoding,
  2 hardware-efficient layers, ⟨Z⟩ on every wire, linear head.
* ``iris``: Iris setosa vs versicolor (features scaled to [0, π]), 4 qubits angle encoding,
  1 layer.
* ``digits``: 8×8 digits, all 10 classes: small CNN pre-net → 8-qubit layer → linear head.
* ``moons``: two moons, data re-uploading on 4 qubits.

Iris and digits need scikit-learn (``pip install 'torchquantum-layers[data]'``).
Run ``python examples/lightning_classifier.py --dataset all``.
"""
from __future__ import annotations

import argparse
import time

import pytorch_lightning as pl

from lightning_tasks.classifier import HybridClassifier
from lightning_tasks.data import CirclesDataModule, DigitsDataModule, IrisDataModule, MoonsDataModule
from torchquantum_layers.runtime import torch_threads


# data module kwargs, model kwargs, epochs
CONFIGS = {
    "circles": (CirclesDataModule, dict(n_train=200, n_val=100, n_test=100, batch_size=20),
                dict(n_qubits=4, n_layers=2, encoding="angle", ansatz="hardware_efficient", lr=0.05), 20),
    "iris": (IrisDataModule, dict(classes=(0, 1), batch_size=16),
             dict(n_qubits=4, n_layers=1, encoding="angle", lr=0.05), 10),
    "digits": (DigitsDataModule, dict(batch_size=64),
               dict(n_qubits=8, n_layers=2, pre_net="cnn", image_shape=(8, 8), lr=0.02), 10),
    "moons": (MoonsDataModule, dict(n_samples=300, batch_size=32),
              dict(n_qubits=4, n_layers=3, encoding="reupload", ansatz="strongly_entangling", lr=0.05), 20),
}


def run(dataset: str, max_epochs: int = None, seed: int = 0, verbose: bool = True, data_kwargs=None,
        model_kwargs=None, diff_method: str = None) -> dict:
    dm_cls, dkw, mkw, epochs = CONFIGS[dataset]
    dkw = {**dkw, "seed": seed, **(data_kwargs or {})}
    mkw = {**mkw, **(model_kwargs or {})}
    if diff_method is not None:
        mkw["diff_method"] = diff_method
    pl.seed_everything(seed, verbose=False)
    dm = dm_cls(**dkw)
    model = HybridClassifier(n_features=dm.n_features, n_classes=dm.n_classes, **mkw)
    trainer = pl.Trainer(max_epochs=epochs if max_epochs is None else max_epochs, accelerator="cpu",
                         devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    start = time.perf_counter()
    trainer.fit(model, datamodule=dm)
    fit_time = time.perf_counter() - start
    val_acc = float(trainer.callback_metrics.get("val_acc", float("nan")))
    result = trainer.test(model, datamodule=dm, verbose=False)[0]
    out = {"dataset": dataset, "test_acc": float(result["test_acc"]), "test_loss": float(result["test_loss"]),
           "val_acc": val_acc, "fit_time_s": fit_time,
           "epochs": trainer.current_epoch}
    if verbose:
        print(f"{dataset:8s} test acc {out['test_acc']:.3f}  val acc {out['val_acc']:.3f}  "
              f"fit {fit_time:.1f} s ({out['epochs']} epochs)", flush=True)
    return out


def main(dataset: str = "all", max_epochs: int = None, seed: int = 0, verbose: bool = True, threads=1,
         **kwargs):
    """Run one data set (or ``"all"``: circles, iris, digits); returns a result dict (or a list)."""
    if dataset != "all" and dataset not in CONFIGS:
        raise ValueError(f"dataset must be 'all' or one of {sorted(CONFIGS)}, got {dataset!r}")
    with torch_threads(threads):
        if dataset == "all":
            return [run(name, max_epochs, seed, verbose, **kwargs) for name in ("circles", "iris", "digits")]
        return run(dataset, max_epochs, seed, verbose, **kwargs)


if __name__ == "__main__":
    import logging
    logging.getLogger("pytorch_lightning").setLevel(logging.WARNING)
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", default="all", choices=["all", *CONFIGS])
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (0: torch's default)")
    a = p.parse_args()
    main(a.dataset, a.max_epochs, a.seed, threads=a.threads or None)
