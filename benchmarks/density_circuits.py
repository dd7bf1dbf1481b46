"""Density-matrix circuits: a hardware-efficient classifier circuit on ρ, programs against blocks.

RY angle encoding + ``--layers`` hardware-efficient layers on n qubits, batch 8, run on
|0…0⟩⟨0…0| by ``tql.mixed``: without noise (one gate segment) and with a noise model that puts a
depolarizing channel after every CNOT (many short segments). Reported: ms of a forward pass and
of a backprop value + gradient of Σ⟨Z_w⟩, with the gate segments as programs on 2n wires (the
CPU default) and as walks over fused blocks (``engine.USE_PROGRAMS = False``), and the forward
over a ``torch.clone`` of ρ in the same rounds.

    python benchmarks/density_circuits.py [--sizes 4,6,8] [--layers 4] [--threads T]
"""
from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import mixed  # noqa: E402

from common import forward_and_step, layered_circuit_args, programs_engine, table  # noqa: E402



def circuit(n, layers):
    c = tql.Circuit(n)
    tql.templates.angle_encoding(c)
    tql.templates.hardware_efficient(c, n_layers=layers)
    return c


def measure(n, layers, noisy, programs, rounds):
    with programs_engine(programs):
        c = circuit(n, layers)
        noise = None
        if noisy:
            noise = tql.NoiseModel()
            noise.add(tql.mixed.channels.depolarizing(0.01), gates="CNOT")
        x = torch.rand(8, n)
        H = tql.Hamiltonian([(1.0, f"Z{w}") for w in range(n)])

        def forward():
            with torch.no_grad():
                mixed.run(c, x=x, noise_model=noise)

        def step():
            c.zero_grad()
            mixed.expval(c, H, x=x, noise_model=noise).sum().backward()
        rho = torch.zeros(8, 4 ** n, dtype=torch.complex64)
        return (len(c.ops),) + forward_and_step(forward, step, rho, rounds)


def main():
    args = layered_circuit_args(__doc__, "4,6,8", 5)
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        for noisy in (False, True):
            row = [n, "depolarizing after CNOT" if noisy else "none"]
            for programs in (True, False):
                ops, t_fwd, ratio, t_step = measure(n, args.layers, noisy, programs, args.rounds)
                if programs:
                    row.append(ops)
                row += [f"{t_fwd * 1e3:.2f}", f"{ratio:.1f}", f"{t_step * 1e3:.2f}"]
            rows.append(row)
    print(table(rows, ["n", "noise", "gates", "programs fwd ms", "/ clone", "step ms",
                       "blocks fwd ms", "/ clone", "step ms"]))


if __name__ == "__main__":
    main()
