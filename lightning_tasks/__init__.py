"""Recipes: LightningModules and DataModules for the flagship applications.

Submodules are imported on first use (``lightning_tasks.HybridClassifier`` imports
``lightning_tasks.classifier``), so importing one recipe does not import the others.
"""
from importlib import import_module

_LAZY = {
    "HybridClassifier": "classifier",
    "CirclesDataModule": "data",
    "MoonsDataModule": "data",
    "IrisDataModule": "data",
    "DigitsDataModule": "data",
    "ArrayDataModule": "data",
    "VQETask": "vqe",
    "ChemicalAccuracyStopping": "vqe",
    "fit_vqe": "vqe",
    "pes_scan": "vqe",
    "QAOATask": "qaoa",
    "named_graph": "qaoa",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
