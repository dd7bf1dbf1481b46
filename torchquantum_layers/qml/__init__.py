"""Quantum machine learning: quantum kernels and toy data sets for classifiers.

* :func:`fidelity_kernel` / :class:`FidelityKernel`: the Gram matrix ``|⟨φ(x1)|φ(x2)⟩|²`` of an
  encoding circuit, for kernel methods (scikit-learn's ``SVC(kernel="precomputed")``).
* :class:`ProjectedKernel` / :func:`projected_kernel`: projected quantum kernels (Huang et al. 2021)
  from one-qubit reduced states; :func:`kernel_target_alignment` and :func:`train_kernel`
  (Hubregtsen et al. 2022) train an encoding's weights for a kernel.
* :class:`QuantumKernelSVC` / :class:`QuantumKernelSVR` (Qiskit's QSVC / QSVR) and
  :class:`QuantumNeuralClassifier` / :class:`QuantumNeuralRegressor` (VQC / VQR): scikit-learn
  estimators (:mod:`.estimators`; scikit-learn is imported on first use of these names).
* :mod:`.privacy`: differentially private training (DP-SGD): :func:`per_sample_gradients` by
  ``torch.func``, :func:`clip_and_noise`, and the Rényi-DP accountant :func:`rdp_epsilon`.
* :mod:`.datasets`: Paddle Quantum's circle set and two moons (NumPy only), Iris and Digits
  (scikit-learn, the ``data`` extra), with seeded train/val/test splits.

Trainable models are :class:`torchquantum_layers.QuantumLayer` and the Lightning task
``lightning_tasks.classifier.HybridClassifier``.
"""
from . import datasets, privacy
from .kernels import FidelityKernel, encode, fidelity_kernel

from .alignment import kernel_target_alignment, train_kernel
from .privacy import clip_and_noise, per_sample_gradients, rdp_epsilon
from .projected import ProjectedKernel, bloch_vectors, one_qubit_rdms, projected_kernel

__all__ = ["fidelity_kernel", "FidelityKernel", "encode", "datasets", "kernel_target_alignment", "train_kernel",
           "ProjectedKernel", "projected_kernel", "one_qubit_rdms", "bloch_vectors",
           "privacy", "rdp_epsilon", "per_sample_gradients", "clip_and_noise",
           "QuantumKernelSVC", "QuantumKernelSVR", "QuantumNeuralClassifier", "QuantumNeuralRegressor"]

_ESTIMATORS = ("QuantumKernelSVC", "QuantumKernelSVR", "QuantumNeuralClassifier", "QuantumNeuralRegressor")


def __getattr__(name):
    # the estimators module imports sklearn.base (when installed): loaded on first use, so that
    # `import torchquantum_layers` pays nothing for it
    if name in _ESTIMATORS or name == "estimators":
        import importlib
        module = importlib.import_module(".estimators", __name__)
        return module if name == "estimators" else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
