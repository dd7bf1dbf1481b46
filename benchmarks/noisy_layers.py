"""Noisy QuantumLayer benchmark: forward + backward of a layer on a noisy device model.

The layer: RY angle encoding of n features, ``n_layers`` of RX, RY, RZ on every wire and a ring
of CNOTs, ⟨Z⟩ on every wire (``QuantumLayer.from_template(n, L, ansatz="rxryrz_ring")``),
complex64, batch 32; one step = ``layer(x).sum().backward()`` (gradients w.r.t. the weights and
the inputs). Noise models:

* ``pauli``: depolarizing(0.01) after every gate (trajectories fold it into U3 gates: one
  unitary engine call);
* ``damping``: depolarizing(0.01) after every CNOT and amplitude damping(0.002) after every gate
  (trajectories sample its state-dependent branches channel by channel).

Each is run on density matrices (``simulator="density"``, one ``(B, 4**n)`` batch) and on 256
trajectories per sample (``(B·256, 2**n)`` rows). The ratio divides the step time by that of
``torch.clone`` of the ``(B, 4**n)`` density batch, timed alternately with it (``common.paired``).

    python benchmarks/noisy_layers.py [--sizes 4,6,8] [--trajectories 256] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, paired, set_threads, table, today  # noqa: E402

mx = tql.mixed


def noise(kind: str) -> tql.NoiseModel:
    if kind == "pauli":
        return tql.NoiseModel().add(mx.depolarizing(0.01))
    return tql.NoiseModel().add(mx.depolarizing(0.01), gates="CNOT").add(mx.amplitude_damping(0.002))


def make_layer(n, n_layers, noise_kind=None, simulator="density", n_trajectories=None, device="cpu"):
    torch.manual_seed(0)
    kw = {} if noise_kind is None else dict(noise_model=noise(noise_kind), simulator=simulator,
                                            n_trajectories=n_trajectories, seed=0 if simulator == "trajectories" else None)
    return tql.QuantumLayer.from_template(n, n_layers, ansatz="rxryrz_ring", **kw).to(device)


def step_ratio(layer, n, batch, rounds, device):
    """(ms per forward + backward, ratio to a clone of the density batch, clone ms)."""
    x = torch.rand(batch, n, device=device, requires_grad=True)
    rho = torch.zeros(batch, 4 ** n, dtype=torch.complex64, device=device)

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).sum().backward()
        if device != "cpu":
            torch.cuda.synchronize()

    def clone():
        rho.clone()
        if device != "cpu":
            torch.cuda.synchronize()
    ratio, t, tc = paired(step, rho, rounds, min_time=0.05, yardstick=clone)
    return t * 1e3, ratio, tc * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,6,8")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--trajectories", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    kept = keep_memory_if_asked(args)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        cases = [("noiseless", None, "density", None)]
        for kind in ("pauli", "damping"):
            cases += [(kind, kind, "density", None), (kind, kind, "trajectories", args.trajectories)]
        for label, kind, simulator, T in cases:
            layer = make_layer(n, args.layers, kind, simulator, T, args.device)
            ms, ratio, clone_ms = step_ratio(layer, n, args.batch, args.rounds, args.device)
            sim = "-" if kind is None else (simulator if T is None else f"trajectories({T})")
            rows.append([n, label, sim, f"{ms:.2f}", f"{ratio:.1f}", f"{clone_ms:.3f}"])
            print(f"done n={n} {label} {sim}", file=sys.stderr, flush=True)
    print(f"# noisy layers benchmark, {today()}, {machine()}, device {args.device}"
          + (", keep_freed_memory() applied" if kept else ""))
    print(f"forward + backward of QuantumLayer.from_template(n, {args.layers}, ansatz='rxryrz_ring'), batch "
          f"{args.batch}, complex64; ratio = step time / torch.clone of the (B, 4**n) density batch")
    print(table(rows, ["n", "noise", "simulator", "ms fwd+bwd", "/ clone(rho)", "clone ms"]))


if __name__ == "__main__":
    main()
