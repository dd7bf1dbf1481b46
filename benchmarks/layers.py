"""QuantumLayer training-step benchmark (issue 5).

One step = forward + backward + Adam step of a QuantumLayer (RY angle encoding of n features;
per layer RX, RY, RZ on every wire then a ring of CNOTs; ⟨Z⟩ on every wire; MSE loss),
complex64, batch 256, per diff_method, for n = 10 and n = 14 with 4 layers.

    python benchmarks/layers.py [--engines programs,blocks] [--widths 4,5] [--threads 2]

On the CPU the engine runs these circuits as local programs (kernels/program.py; the fusion
width does not apply); ``blocks`` is the fused-block engine (GPU, registers past 14 qubits).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import engine  # noqa: E402

from common import (  # noqa: E402
    add_runtime_flags, keep_memory_if_asked, machine, set_threads, table, timeit, today)
from gradients import model  # noqa: E402  (the same circuit as the gradient benchmark)


def layer(n, n_layers, width, diff_method):
    c = model(n, n_layers, "cpu")
    c.max_fused_wires = width
    return tql.QuantumLayer(c, [tql.PauliString(f"Z{w}") for w in range(n)], diff_method=diff_method)


def step_time(n, width, method, batch=256, n_layers=4, device="cpu"):
    torch.manual_seed(0)
    q = layer(n, n_layers, width, method).to(device)
    opt = torch.optim.Adam(q.parameters(), lr=0.01)
    x = torch.rand(batch, n, device=device)
    y = torch.rand(batch, n, device=device) * 2 - 1

    def step():
        loss = torch.nn.functional.mse_loss(q(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return timeit(step, device, repeats=5, min_time=0.2 if method != "parameter-shift" else 0.0)


def controlled_ansatz_step(n=10, batch=256, device="cpu"):
    """One backprop training step of RY encoding + 4 hardware-efficient layers with a ring of CRY
    entanglers (controlled rotations: program slots, not permutations)."""
    c = tql.Circuit(n)
    for w in range(n):
        c.ry(w, input=w)
    tql.templates.hardware_efficient(c, n_layers=4, entangler="CRY", pattern="ring")
    q = tql.QuantumLayer(c.to(device), [tql.PauliString(f"Z{w}") for w in range(n)])
    opt = torch.optim.Adam(q.parameters(), lr=0.01)
    x = torch.rand(batch, n, device=device)
    y = torch.rand(batch, n, device=device)

    def step():
        loss = torch.nn.functional.mse_loss(q(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return timeit(step, device, repeats=5, min_time=0.2)


def feature_map_time(n=8, batch=256, device="cpu"):
    """Forward time of an IQP feature map (two repeats: H, RZ(x_i), RZZ(x_i x_j) on all pairs),
    the encoder of tql.qml.fidelity_kernel, without gradients."""
    c = tql.Circuit(n).to(device)
    tql.templates.iqp_encoding(c, n_repeats=2)
    x = tql.templates.iqp_features(torch.rand(batch, n, device=device))

    def forward():
        with torch.no_grad():
            c(x)
    return timeit(forward, device, repeats=5, min_time=0.2)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="4,5", help="max_fused_wires of the blocks engine")
    ap.add_argument("--engines", default="programs,blocks")
    ap.add_argument("--sizes", default="10,14")
    ap.add_argument("--methods", default="backprop,adjoint,parameter-shift")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    kept = keep_memory_if_asked(args)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        for method in args.methods.split(","):
            if method == "parameter-shift" and n > 10:
                continue
            for name in args.engines.split(","):
                if method == "parameter-shift" and name != args.engines.split(",")[0]:
                    continue
                engine.USE_PROGRAMS = name == "programs"
                widths = [None] if name == "programs" or method == "parameter-shift" else \
                    [int(w) for w in args.widths.split(",")]
                for width in widths:
                    t = step_time(n, width, method, device=args.device)
                    rows.append([n, method, name, width or "-", f"{t * 1e3:.1f}"])
                    print(f"done n={n} {method} {name} k={width}", file=sys.stderr, flush=True)
    feature_rows = []
    for name in args.engines.split(","):
        engine.USE_PROGRAMS = name == "programs"
        feature_rows.append([name, f"{feature_map_time(device=args.device) * 1e3:.2f}",
                             f"{controlled_ansatz_step(device=args.device) * 1e3:.1f}"])
    engine.USE_PROGRAMS = True
    print(f"# layers benchmark, {today()}, {machine()}, device {args.device}")
    print("one training step (forward + backward + Adam) at batch 256, 4 layers, complex64"
          + (", keep_freed_memory() applied" if kept else ""))
    print(table(rows, ["n", "diff_method", "engine", "max_fused_wires", "ms/step"]))
    print("IQP feature map (8 qubits, 2 repeats, 28 RZZ each), batch 256, forward only; and one backprop"
          " step of a 10-qubit, 4-layer hardware-efficient ansatz with CRY ring entanglers, batch 256")
    print(table(feature_rows, ["engine", "IQP forward ms", "CRY ansatz ms/step"]))


if __name__ == "__main__":
    main()
