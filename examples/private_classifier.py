"""Differentially private training of a hybrid quantum classifier (DP-SGD) with torch.func.

DP-SGD (Abadi et al. 2016) needs every sample's own gradient: each is clipped to norm C, their sum
gets Gaussian noise of standard deviation σC, and the average takes the step. With torch.func that
is ``vmap(grad(loss))`` over the batch; the circuit engine folds the vmap into its own batch, so
the per-sample gradients of the whole model (quantum and classical parameters) cost one batched
backward pass, not a loop.

Model: ``QuantumLayer.from_template(4, 2)`` (RY angle encoding of the two features, two
hardware-efficient layers, ⟨Z_w⟩ on every wire) and a linear head, on Paddle Quantum's circle data
set. Batches are Poisson-sampled (each point with probability q), as the privacy accountant
assumes; ε is reported for δ = 1/N² by the Rényi-DP bound of the subsampled Gaussian mechanism
(Mironov et al. 2019, integer orders), a standard upper bound (Opacus's accountant is tighter by a
little). The per-sample gradients, the clipping and noise, and the accountant are
``tql.qml.privacy``'s. A non-private run with the same steps is the reference.

Run ``python examples/private_classifier.py [--steps 300] [--noise 2.0] [--clip 1.0]``.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad

import torchquantum_layers as tql
from torchquantum_layers.qml import datasets
from torchquantum_layers.qml.privacy import clip_and_noise, per_sample_gradients, rdp_epsilon
from torchquantum_layers.runtime import torch_threads


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(tql.QuantumLayer.from_template(4, 2, n_features=2), nn.Linear(4, 2))


def train(private: bool, steps: int, q: float, lr: float, clip: float, noise: float, seed: int, data):
    X, y, Xt, yt = data
    model = make_model(seed)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    g = torch.Generator().manual_seed(seed + 1)
    N = X.shape[0]
    max_norm = 0.0
    for _ in range(steps):
        take = torch.rand(N, generator=g) < q                 # Poisson sampling
        xb, yb = X[take], y[take]
        if xb.shape[0] == 0:
            continue
        if private:
            grads = per_sample_gradients(model, params, xb, yb)
            step, clipped = clip_and_noise(grads, clip, noise, q * N, g)
            max_norm = max(max_norm, float(clipped.max()))
        else:
            step = grad(lambda p: F.cross_entropy(functional_call(model, p, (xb,)), yb))(params)
        params = {k: v - lr * step[k] for k, v in params.items()}
    with torch.no_grad():
        accuracy = (functional_call(model, params, (Xt,)).argmax(1) == yt).float().mean().item()
    return accuracy, max_norm


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--train", type=int, default=400, help="training points")
    ap.add_argument("--rate", type=float, default=0.1, help="Poisson sampling rate q")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--noise", type=float, default=2.0, help="noise multiplier σ")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    X, y = datasets.make_circles(args.train + 200, seed=args.seed)
    X, y = torch.as_tensor(X), torch.as_tensor(y)
    data = (X[:args.train], y[:args.train], X[args.train:], y[args.train:])
    out = {}
    with torch_threads(args.threads):
        train(True, 2, args.rate, args.lr, args.clip, args.noise, args.seed, data)     # warm-up: caches, native build
        for private in (False, True):
            start = time.perf_counter()
            acc, max_norm = train(private, args.steps, args.rate, args.lr, args.clip, args.noise, args.seed, data)
            out["private" if private else "plain"] = (acc, max_norm, time.perf_counter() - start)
    delta = 1 / args.train ** 2
    eps = rdp_epsilon(args.rate, args.noise, args.steps, delta)
    print(f"plain SGD:  test accuracy {out['plain'][0]:.3f} ({out['plain'][2]:.1f} s)")
    print(f"DP-SGD:     test accuracy {out['private'][0]:.3f} ({out['private'][2]:.1f} s), "
          f"clip {args.clip}, σ {args.noise}, q {args.rate}, {args.steps} steps: (ε = {eps:.2f}, δ = {delta:.1e})")
    return {"plain": out["plain"][0], "private": out["private"][0], "max_clipped_norm": out["private"][1],
            "epsilon": eps}


if __name__ == "__main__":
    main()
