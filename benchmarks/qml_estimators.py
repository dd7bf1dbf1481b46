"""scikit-learn quantum estimators (tql.qml.estimators): kernel-matrix cost and accuracy.

1. The training Gram matrix of ``QuantumKernelSVC`` (the ZZ feature map, ``reps=2``, complex64;
   encoding included, float64 NumPy out), for N samples on n qubits, in ms and as a ratio to
   ``torch.clone`` of the ``(N, 2**n)`` complex64 state batch (the memory-traffic yardstick).
2. Test accuracy and wall time (fit + predict) on two standard small sets, against scikit-learn's
   ``SVC(kernel="rbf")``: two moons (200 points, noise 0.15, 2 features → 2 qubits) and Iris
   versicolor vs virginica (100 points, 4 features → 4 qubits), 30% held out (stratified, seeded),
   features scaled to [0, π] in a Pipeline.

    python benchmarks/qml_estimators.py [--sizes 6,8,10] [--samples 100,200,400] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402,F401

from common import add_runtime_flags, keep_memory_if_asked, machine, paired, set_threads, table, today  # noqa: E402


def gram_rows(sizes, samples, rounds):
    # imported here: scikit-learn sets environment variables on import (KMP_*), which --help must not
    from torchquantum_layers.qml.estimators import _KernelSpec, build_kernel_encoder
    rows = []
    for n in sizes:
        spec = _KernelSpec(build_kernel_encoder(n, "zz", 2, torch.complex64), "fidelity")
        for N in samples:
            x = torch.rand(N, n, generator=torch.Generator().manual_seed(N + n)) * np.pi
            states = torch.zeros(N, 2 ** n, dtype=torch.complex64)
            with torch.no_grad():
                ratio, t, tc = paired(lambda: spec.train_gram(x, "bench"), states, rounds, min_time=0.1)
            rows.append([n, N, f"{t * 1e3:.2f}", f"{t / N ** 2 * 1e6:.3f}", f"{tc * 1e6:.1f}", f"{ratio:.0f}"])
    return rows


def datasets_for_accuracy():
    from sklearn.datasets import load_iris, make_moons
    X, y = make_moons(200, noise=0.15, random_state=0)
    iris = load_iris()
    keep = iris.target > 0
    return {"moons (2 qubits)": (X, y), "Iris 1 vs 2 (4 qubits)": (iris.data[keep], iris.target[keep])}


def accuracy_rows(epochs):
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler
    from sklearn.svm import SVC

    from torchquantum_layers.qml.estimators import QuantumKernelSVC, QuantumNeuralClassifier
    models = {
        "SVC rbf (classical)": lambda: SVC(kernel="rbf"),
        "QSVC zz reps=2": lambda: QuantumKernelSVC(encoding="zz", reps=2),
        "QSVC zz reps=2 bandwidth=0.25": lambda: QuantumKernelSVC(encoding="zz", reps=2, bandwidth=0.25),
        "QSVC iqp reps=2": lambda: QuantumKernelSVC(encoding="iqp", reps=2),
        "QSVC projected (zz)": lambda: QuantumKernelSVC(kernel="projected", gamma=1.0),
        f"VQC reupload 3 layers, Adam {epochs} epochs": lambda: QuantumNeuralClassifier(
            n_layers=3, encoding="reupload", lr=0.05, epochs=epochs, random_state=0),
    }
    rows = []
    for dname, (X, y) in datasets_for_accuracy().items():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
        for mname, make in models.items():
            pipe = make_pipeline(MinMaxScaler((0, np.pi)), make())
            t0 = time.perf_counter()
            pipe.fit(Xtr, ytr)
            t1 = time.perf_counter()
            acc = pipe.score(Xte, yte)
            t2 = time.perf_counter()
            rows.append([dname, mname, f"{pipe.score(Xtr, ytr):.3f}", f"{acc:.3f}", f"{(t1 - t0) * 1e3:.0f}",
                         f"{(t2 - t1) * 1e3:.1f}"])
    return rows


def main():
    ap = argparse.ArgumentParser(description="Quantum scikit-learn estimators: Gram-matrix cost and accuracy")
    ap.add_argument("--sizes", default="6,8,10")
    ap.add_argument("--samples", default="100,200,400")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=100, help="VQC training epochs")
    add_runtime_flags(ap)
    args = ap.parse_args()
    set_threads(args)
    keep_memory_if_asked(args)
    print(f"{today()}, {machine()}")
    sizes = [int(s) for s in args.sizes.split(",")]
    samples = [int(s) for s in args.samples.split(",")]
    print("\nTraining Gram matrix K(X, X) of QuantumKernelSVC (ZZ map, reps=2, complex64)\n")
    print(table(gram_rows(sizes, samples, args.rounds),
                ["n", "N", "K ms", "µs/entry", "clone(N×2^n) µs", "K / clone"]))
    print("\nTest accuracy (30% held out) and wall time\n")
    print(table(accuracy_rows(args.epochs), ["data", "model", "train acc", "test acc", "fit ms", "predict ms"]))


if __name__ == "__main__":
    main()
