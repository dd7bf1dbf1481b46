"""Quantum classifier on Paddle Quantum's circle data set, trained with a plain PyTorch loop.

``--model paddle`` (default) reproduces Paddle Quantum's "Quantum classifier" tutorial exactly:
4 qubits; qubit i encodes feature x_{i mod 2} as RY(arcsin x) then RZ(arccos x²); trainable
RZ RY RZ on every qubit, then (depth 1) a CNOT ring and a trainable RY per qubit; prediction
⟨Z_0⟩/2 + 1/2 + bias, squared loss, Adam (lr 0.01), batch 20, 20 epochs over 200 training points,
accuracy on 100 test points (threshold 0.5). Paddle reports test accuracy 1.00 in about 45 s.

``--model template`` is the one-liner alternative: ``QuantumLayer.from_template(4, 2)`` (RY angle
encoding with the two features repeated over the four wires, RY + CNOT layers, ⟨Z_w⟩ on every
wire) followed by a linear head, trained with cross-entropy.

Run ``python examples/hybrid_classifier.py [--model template] [--out plots] [--no-plots]``; prints
accuracy and time. With matplotlib (the ``plot`` extra) the decision boundary over the test points
is saved to ``<out>/hybrid_classifier_<model>.png``.
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

import torchquantum_layers as tql
from torchquantum_layers import plotting
from torchquantum_layers.qml import datasets
from torchquantum_layers.runtime import torch_threads


def paddle_features(x: torch.Tensor) -> torch.Tensor:
    """(B, 2) points → (B, 4) angles: arcsin x0, arcsin x1, arccos x0², arccos x1²."""
    return torch.cat([torch.asin(x), torch.acos(x * x)], dim=1)


def paddle_circuit(n_qubits: int = 4, depth: int = 1) -> tql.Circuit:
    c = tql.Circuit(n_qubits)
    for i in range(n_qubits):
        c.ry(i, input=i % 2)              # RY(arcsin x_{i mod 2})
        c.rz(i, input=2 + i % 2)          # RZ(arccos x_{i mod 2}²)
    for i in range(n_qubits):
        c.rz(i, trainable=True)
        c.ry(i, trainable=True)
        c.rz(i, trainable=True)
    for _ in range(depth):
        for i in range(n_qubits - 1):
            c.cnot(i, i + 1)
        c.cnot(n_qubits - 1, 0)
        for i in range(n_qubits):
            c.ry(i, trainable=True)
    return c


class PaddleClassifier(nn.Module):
    """Paddle's model: P(label 1) ≈ ⟨Z_0⟩/2 + 1/2 + bias."""

    def __init__(self, n_qubits=4, depth=1, diff_method="backprop"):
        super().__init__()
        self.quantum = tql.QuantumLayer(paddle_circuit(n_qubits, depth), "Z0", diff_method=diff_method)
        self.bias = nn.Parameter(torch.randn(1) * 0.01)

    def forward(self, x):
        return self.quantum(paddle_features(x))[:, 0] * 0.5 + 0.5 + self.bias


class TemplateClassifier(nn.Module):
    def __init__(self, n_qubits=4, n_layers=2, diff_method="backprop"):
        super().__init__()
        self.quantum = tql.QuantumLayer.from_template(n_qubits, n_layers, n_features=2, diff_method=diff_method)
        self.head = nn.Linear(n_qubits, 2)

    def forward(self, x):
        return self.head(self.quantum(x))


def main(model: str = "paddle", n_train: int = 200, n_test: int = 100, epochs: int = 20, batch_size: int = 20,
         lr: float = None, gap: float = 0.5, seed: int = 19, data_seed: int = 2,
         diff_method: str = "backprop", verbose: bool = True, threads=1, plot_path=None) -> dict:
    """Train and evaluate; returns ``{"test_acc", "train_acc", "train_time_s", "model"}`` (and
    ``"plot"`` when ``plot_path`` is given: the decision boundary saved there as a PNG)."""
    with torch_threads(threads):
        return _main(model, n_train, n_test, epochs, batch_size, lr, gap, seed, data_seed, diff_method, verbose,
                     plot_path)


def _main(model, n_train, n_test, epochs, batch_size, lr, gap, seed, data_seed, diff_method, verbose,
          plot_path=None):
    X, y = datasets.make_circles(n_train + n_test, gap=gap, seed=data_seed)
    x_train, y_train = torch.as_tensor(X[:n_train]), torch.as_tensor(y[:n_train])
    x_test, y_test = torch.as_tensor(X[n_train:]), torch.as_tensor(y[n_train:])
    torch.manual_seed(seed)
    if model == "paddle":
        net = PaddleClassifier(diff_method=diff_method)
        lr = 0.01 if lr is None else lr

        def loss_fn(out, target):
            return (out - target.to(out.dtype)).pow(2).mean()

        def predict(out):
            return (out > 0.5).long()
    elif model == "template":
        net = TemplateClassifier(diff_method=diff_method)
        lr = 0.05 if lr is None else lr
        loss_fn = F.cross_entropy

        def predict(out):
            return out.argmax(dim=-1)
    else:
        raise ValueError(f"model must be 'paddle' or 'template', got {model!r}")
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    start = time.perf_counter()
    for epoch in range(epochs):
        # Paddle iterates over the batches in order; so do we
        for i in range(0, n_train - batch_size + 1, batch_size):
            loss = loss_fn(net(x_train[i:i + batch_size]), y_train[i:i + batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if verbose and (epoch % 5 == 4 or epoch == epochs - 1):
            with torch.no_grad():
                acc = (predict(net(x_test)) == y_test).float().mean().item()
            print(f"epoch {epoch + 1:3d}  loss {loss.item():.4f}  test acc {acc:.3f}")
    train_time = time.perf_counter() - start
    with torch.no_grad():
        test_acc = (predict(net(x_test)) == y_test).float().mean().item()
        train_acc = (predict(net(x_train)) == y_train).float().mean().item()
    if verbose:
        print(f"{model}: train acc {train_acc:.3f}, test acc {test_acc:.3f}, training time {train_time:.2f} s "
              f"(Paddle Quantum's tutorial: 1.00 in about 45 s)")
    out = {"model": model, "test_acc": test_acc, "train_acc": train_acc, "train_time_s": train_time}
    if plot_path is not None:
        # Paddle's features arcsin x, arccos x² exist on [-1, 1] only: the grid stays inside the data square
        plotting.decision_boundary(net, x_test, y_test, extent=(-1, 1, -1, 1), title=f"{model} classifier, test set",
                                   path=plot_path)
        out["plot"] = plot_path
        if verbose:
            print(f"figure saved to {plot_path}")
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["paddle", "template"], default="paddle")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--n-train", type=int, default=200)
    p.add_argument("--n-test", type=int, default=100)
    p.add_argument("--diff-method", default="backprop", choices=["backprop", "adjoint", "parameter-shift"])
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (0: torch's default)")
    p.add_argument("--out", default="plots", help="folder for the PNG figure (default: plots)")
    p.add_argument("--no-plots", action="store_true", help="save no figure")
    a = p.parse_args()
    plot = not a.no_plots and plotting.available()
    main(model=a.model, epochs=a.epochs, n_train=a.n_train, n_test=a.n_test, diff_method=a.diff_method,
         threads=a.threads or None,
         plot_path=os.path.join(a.out, f"hybrid_classifier_{a.model}.png") if plot else None)
