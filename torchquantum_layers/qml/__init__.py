"""Quantum machine learning: quantum kernels and toy data sets for classifiers.

* :func:`fidelity_kernel` / :class:`FidelityKernel`: the Gram matrix ``|⟨φ(x1)|φ(x2)⟩|²`` of an
  encoding circuit, for kernel methods (scikit-learn's ``SVC(kernel="precomputed")``).
* :class:`ProjectedKernel` / :func:`projected_kernel`: projected quantum kernels (Huang et al. 2021)
  from one-qubit reduced states; :func:`kernel_target_alignment` and :func:`train_kernel`
  (Hubregtsen et al. 2022) train an encoding's weights for a kernel.
* :mod:`.datasets`: Paddle Quantum's circle set and two moons (NumPy only), Iris and Digits
  (scikit-learn, the ``data`` extra), with seeded train/val/test splits.

Trainable models are :class:`torchquantum_layers.QuantumLayer` and the Lightning task
``lightning_tasks.classifier.HybridClassifier``.
"""
from . import datasets
from .kernels import FidelityKernel, encode, fidelity_kernel

from .alignment import kernel_target_alignment, train_kernel
from .projected import ProjectedKernel, bloch_vectors, one_qubit_rdms, projected_kernel

__all__ = ["fidelity_kernel", "FidelityKernel", "encode", "datasets", "kernel_target_alignment", "train_kernel",
           "ProjectedKernel", "projected_kernel", "one_qubit_rdms", "bloch_vectors"]
