"""Noisy QAOA with the XY and swap mixers (NoisyQAOA(mixer="xy"|"swap")): error and price.

Small one-hot problems: graph colouring of a path of 3 nodes with 2 colours (6 qubits, XY mixer,
W-state preparation by gates), of one edge with 3 colours (6 qubits, XY ring) and a 4-city TSP with
fixed start (9 qubits, XY and swap mixers, ideal start state). p = ``--layers``, ``--starts``
starts (seeded), depolarizing noise (p = ``--p``) after every RZZ and every mixer gate (RXX, RYY;
DOUBLEEXCITATION) on each of its wires. Reported: the largest over the starts of |noisy − ideal|
and |ZNE − ideal| (ideal = the exact QAOA(mixer=...) engine; ZNE = global folding at 1, 3, 5,
Richardson, on density matrices), the trajectory estimate's largest error against the exact density
value (|traj. − density|, one seeded draw), and ms of one forward + backward (gradient of the summed costs
with respect to the angles) with the density simulator and with ``--trajectories`` trajectories
per start, each also as a multiple of one ``torch.clone`` of the same state: the
``(S, 2**n, 2**n)`` density batch, the ``(S·T, 2**n)`` trajectory batch (timed in turn with it).

    python benchmarks/qaoa_noisy_mixers.py [--p 0.01] [--starts 4] [--layers 2] [--trajectories 64]
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import mixed, optimization as opt  # noqa: E402
from torchquantum_layers.optimization.noisy import NoisyQAOA  # noqa: E402

from common import add_runtime_flags, machine, paired, set_threads, table, today  # noqa: E402

DTYPES = {"complex64": torch.complex64, "complex128": torch.complex128}
D4 = [[0, 1.0, 2.5, 3.0], [1.5, 0, 4.0, 1.2], [2.0, 3.5, 0, 2.2], [0.7, 1.9, 2.6, 0]]


def problems():
    return [("colouring path3 x2", opt.graph_colouring([(0, 1), (1, 2)], 2), "xy"),
            ("colouring edge x3", opt.graph_colouring([(0, 1)], 3), "xy"),
            ("tsp 4 cities", opt.tsp(D4), "xy"),
            ("tsp 4 cities", opt.tsp(D4), "swap")]


def forward_backward(module, angles, generator=None):
    def run():
        x = angles.detach().requires_grad_(True)
        out = module(x, generator) if generator is not None else module(x)
        torch.autograd.grad(out.sum(), x)
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=float, default=0.01, help="depolarizing probability after each noisy gate")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--trajectories", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="complex64")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    dtype = DTYPES[args.dtype]
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    rows = []
    for name, problem, mixer in problems():
        gen = torch.Generator().manual_seed(problem.n_qubits)
        angles = (0.4 * torch.rand(args.starts, 2 * args.layers, generator=gen, dtype=torch.float64) + 0.1).to(real)
        gates = ["RZZ"] + (["RXX", "RYY"] if mixer == "xy" else ["DOUBLEEXCITATION"])
        noise = tql.NoiseModel().add(mixed.depolarizing(args.p), gates=gates)
        noisy = NoisyQAOA(problem, args.layers, noise, mixer=mixer, dtype=dtype)
        zne = NoisyQAOA(problem, args.layers, noise, mixer=mixer, mitigation="zne", dtype=dtype)
        traj = NoisyQAOA(problem, args.layers, noise, mixer=mixer, dtype=dtype, simulator="trajectories",
                         n_trajectories=args.trajectories)
        with torch.no_grad():
            ideal = opt.qaoa(problem, args.layers, mixer=mixer, dtype=torch.complex128)(angles.double())
            e_noisy = noisy(angles).double()
            err_noisy = float((e_noisy - ideal).abs().max())
            err_zne = float((zne(angles).double() - ideal).abs().max())
            # the trajectory estimate's own error: against the exact density value of the same angles
            err_traj = float((traj(angles, torch.Generator().manual_seed(1)).double() - e_noisy).abs().max())
        N = 2 ** problem.n_qubits
        rho = torch.zeros(args.starts, N, N, dtype=dtype)
        psi = torch.zeros(args.starts * args.trajectories, N, dtype=dtype)
        r_d, t_d, _ = paired(forward_backward(noisy, angles), rho, args.rounds, min_time=0.1)
        r_t, t_t, _ = paired(forward_backward(traj, angles, torch.Generator().manual_seed(0)), psi, args.rounds,
                             min_time=0.1)
        rows.append([name, mixer, problem.n_qubits, noisy.preparation, len(noisy.circuit.ops),
                     f"{float(ideal.mean()):.3f}", f"{float(e_noisy.mean()):.3f}", f"{err_noisy:.2e}",
                     f"{err_zne:.2e}", f"{err_noisy / err_zne:.0f}x", f"{t_d * 1e3:.2f}", f"{r_d:.0f}",
                     f"{err_traj:.2e}", f"{t_t * 1e3:.2f}", f"{r_t:.0f}"])
    print(f"{today()}, {machine()}; p = {args.layers}, {args.starts} starts, depolarizing {args.p} after every "
          f"RZZ and mixer gate, {args.trajectories} trajectories per start, {args.dtype}")
    print(table(rows, ["problem", "mixer", "n", "start", "gates", "ideal cost", "noisy cost", "|noisy − ideal|",
                       "|ZNE − ideal|", "error cut", "density fwd+bwd ms", "/ ρ clone", "|traj. − density|",
                       "traj. fwd+bwd ms", "/ ψ clone"]))


if __name__ == "__main__":
    main()
