"""Quantum machine learning: quantum kernels and toy data sets for classifiers.

* :func:`fidelity_kernel` / :class:`FidelityKernel`: the Gram matrix ``|⟨φ(x1)|φ(x2)⟩|²`` of an
  encoding circuit, for kernel methods (scikit-learn's ``SVC(kernel="precomputed")``).
* :mod:`.datasets`: Paddle Quantum's circle set and two moons (NumPy only), Iris and Digits
  (scikit-learn, the ``data`` extra), with seeded train/val/test splits.

Trainable models are :class:`torchquantum_layers.QuantumLayer` and the Lightning task
``lightning_tasks.classifier.HybridClassifier``.
"""
from . import datasets
from .kernels import FidelityKernel, encode, fidelity_kernel

__all__ = ["fidelity_kernel", "FidelityKernel", "encode", "datasets"]
