"""Noisy circuits as quantum trajectories against density matrices.

RY angle encoding + ``--layers`` hardware-efficient layers on n qubits, batch 8, with a channel
after every CNOT on both its wires: depolarizing (mixed-unitary: folded into U3 gates, one
engine call) or amplitude damping (state-dependent branches: one probability pass and one
per-row matrix per channel). Reported: ms of a forward pass and of a backprop value + gradient
of Σ⟨Z_w⟩ by ``tql.mixed.trajectories`` with T trajectories per sample, the largest standard
error of the 8 estimates, and where ρ fits (n ≤ 8) the same for ``tql.mixed.expval`` with the
largest deviation of the estimate from it; forwards also as a ratio to a ``torch.clone`` of the
B · T trajectory rows in the same rounds.

    python benchmarks/trajectories.py [--sizes 6,8,12,16] [--trajectories 128] [--threads T]
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import mixed  # noqa: E402

from common import forward_and_step, layered_circuit_args, table  # noqa: E402



def setup(n, layers, channel):
    c = tql.Circuit(n)
    tql.templates.angle_encoding(c)
    tql.templates.hardware_efficient(c, n_layers=layers)
    noise = tql.NoiseModel()
    noise.add(mixed.depolarizing(0.01) if channel == "depolarizing" else mixed.amplitude_damping(0.01),
              gates="CNOT")
    x = torch.rand(8, n, generator=torch.Generator().manual_seed(n))
    return c, noise, x, tql.Hamiltonian([(1.0, f"Z{w}") for w in range(n)])


def measure(n, layers, channel, T, rounds):
    c, noise, x, H = setup(n, layers, channel)
    g = torch.Generator().manual_seed(0)

    def forward():
        with torch.no_grad():
            mixed.trajectories.expval(c, H, x=x, noise_model=noise, n_trajectories=T, generator=g)

    def step():
        c.zero_grad()
        mixed.trajectories.expval(c, H, x=x, noise_model=noise, n_trajectories=T, generator=g).sum().backward()
    rows = torch.zeros(8 * T, 2 ** n, dtype=torch.complex64)
    t_fwd, ratio, t_step = forward_and_step(forward, step, rows, rounds)
    with torch.no_grad():
        est, se = mixed.trajectories.expval(c, H, x=x, noise_model=noise, n_trajectories=T, generator=g,
                                            return_std=True)
    row = [n, channel, len(c.ops), T, f"{t_fwd * 1e3:.1f}", f"{ratio:.1f}", f"{t_step * 1e3:.1f}",
           f"{float(se.max()):.3f}"]
    if n <= 8:
        def dforward():
            with torch.no_grad():
                mixed.expval(c, H, x=x, noise_model=noise)

        def dstep():
            c.zero_grad()
            mixed.expval(c, H, x=x, noise_model=noise).sum().backward()
        d_fwd, _, d_step = forward_and_step(dforward, dstep, rows, rounds)
        with torch.no_grad():
            exact = mixed.expval(c, H, x=x, noise_model=noise)
        row += [f"{d_fwd * 1e3:.1f}", f"{d_step * 1e3:.1f}", f"{float((est - exact).abs().max()):.3f}"]
    else:
        row += ["(4**n too big)" if n >= 14 else "-", "-", "-"]
    return row


def main():
    args = layered_circuit_args(__doc__, "6,8,12,16", 3, trajectories=128)
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        for channel in ("depolarizing", "amplitude damping"):
            T = args.trajectories if n < 16 else max(args.trajectories // 4, 2)
            rows.append(measure(n, args.layers, channel, T, args.rounds))
    print(table(rows, ["n", "channel after CNOT", "gates", "T", "traj fwd ms", "/ clone", "traj step ms",
                       "max s.e.", "rho fwd ms", "rho step ms", "|traj - rho| max"]))


if __name__ == "__main__":
    main()
