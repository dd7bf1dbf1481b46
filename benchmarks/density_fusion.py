"""Noisy density-matrix circuits before and after merging gates and channels into superoperator
blocks (mixed/superop_blocks.py), in the same run.

"before" is ``mixed.simulate.FUSE_CHANNELS = False``: one segment per run of gates between
channels (a program on 2n wires) and one pass per channel; "after" is the default: gates and
the channels after them on at most two qubits as one 4 × 4 / 16 × 16 superoperator pass. Cases:

* ``layer pauli`` / ``layer damping``: ``QuantumLayer.from_template(n, 2, ansatz="rxryrz_ring")``,
  batch 32, depolarizing(0.01) after every gate / depolarizing after CNOT and amplitude
  damping(0.002) after every gate (benchmarks/noisy_layers.py);
* ``qaoa``: ``NoisyQAOA`` MaxCut on a random 3-regular graph, p = 2, 8 starts, depolarizing(0.01)
  after every RZZ (benchmarks/qaoa_noisy.py);
* ``hea cnot-noise``: angle encoding + 4 hardware-efficient layers, batch 8, depolarizing after
  every CNOT (benchmarks/density_circuits.py).

Each is timed as a forward pass without grad and as forward + backward, complex64; "/ clone" is
the time over a ``torch.clone`` of the ``(B, 4**n)`` density batch, timed alternately with it
(``common.paired``).

``--compare lean`` times instead ``mixed.simulate.LEAN_SEGMENTS`` off ("before": a lone CNOT
between channels is a program call on 2n wires, channels go through ``Channel.apply``) and on
("after": one direct gather, the cached superoperator applied without re-validation), both with
the superoperator blocks; ``--cases qaoa,hea`` picks cases.

    python benchmarks/density_fusion.py [--sizes 6,8] [--rounds 3] [--threads 1] [--compare lean]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import mixed, optimization as opt  # noqa: E402
from torchquantum_layers.mixed import simulate  # noqa: E402
from torchquantum_layers.optimization.noisy import NoisyQAOA  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, paired, set_threads, table, today  # noqa: E402


@contextlib.contextmanager
def simulate_flag(name: str, on: bool):
    """``mixed.simulate.<name>`` (FUSE_CHANNELS or LEAN_SEGMENTS) set to ``on`` for the block."""
    old = getattr(simulate, name)
    setattr(simulate, name, on)
    try:
        yield
    finally:
        setattr(simulate, name, old)


def layer_case(n, kind):
    if kind == "pauli":
        noise = tql.NoiseModel().add(mixed.depolarizing(0.01))
    else:
        noise = tql.NoiseModel().add(mixed.depolarizing(0.01), gates="CNOT").add(mixed.amplitude_damping(0.002))
    torch.manual_seed(0)
    layer = tql.QuantumLayer.from_template(n, 2, ansatz="rxryrz_ring", noise_model=noise, simulator="density")
    x = torch.rand(32, n, requires_grad=True)

    def forward():
        with torch.no_grad():
            layer(x)

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x).sum().backward()
    return forward, step, 32


def qaoa_case(n):
    problem = opt.maxcut(opt.random_regular_graph(3, n, seed=n))
    angles = opt.perturb(opt.linear_ramp(2), 8, 0.1, torch.Generator().manual_seed(n)).float()
    module = NoisyQAOA(problem, 2, tql.NoiseModel().add(mixed.depolarizing(0.01), gates="RZZ"))

    def forward():
        with torch.no_grad():
            module(angles)

    def step():
        a = angles.detach().requires_grad_(True)
        torch.autograd.grad(module(a).sum(), a)
    return forward, step, 8


def hea_case(n):
    c = tql.Circuit(n)
    tql.templates.angle_encoding(c)
    tql.templates.hardware_efficient(c, n_layers=4)
    noise = tql.NoiseModel().add(mixed.depolarizing(0.01), gates="CNOT")
    x = torch.rand(8, n)
    H = tql.Hamiltonian([(1.0, f"Z{w}") for w in range(n)])

    def forward():
        with torch.no_grad():
            mixed.run(c, x=x, noise_model=noise)

    def step():
        c.zero_grad()
        mixed.expval(c, H, x=x, noise_model=noise).sum().backward()
    return forward, step, 8


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="6,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", choices=("fusion", "lean"), default="fusion",
                    help="fusion: FUSE_CHANNELS off/on; lean: LEAN_SEGMENTS off/on (module notes)")
    ap.add_argument("--cases", default="layer,qaoa,hea", help="comma-separated among layer, qaoa, hea")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    kept = keep_memory_if_asked(args)
    rows = []
    flag = "FUSE_CHANNELS" if args.compare == "fusion" else "LEAN_SEGMENTS"
    picked = set(args.cases.split(","))
    for n in [int(s) for s in args.sizes.split(",")]:
        cases = [("layer pauli", lambda: layer_case(n, "pauli")), ("layer damping", lambda: layer_case(n, "damping")),
                 ("qaoa", lambda: qaoa_case(n)), ("hea cnot-noise", lambda: hea_case(n))]
        for label, make in cases:
            if label.split()[0] not in picked:
                continue
            forward, step, batch = make()
            rho = torch.zeros(batch, 4 ** n, dtype=torch.complex64)
            for what, fn in (("forward", forward), ("fwd+bwd", step)):
                res = {}
                for on in (False, True):
                    with simulate_flag(flag, on):
                        ratio, t, _ = paired(fn, rho, args.rounds, min_time=0.05)
                    res[on] = (t * 1e3, ratio)
                (tb, rb), (ta, ra) = res[False], res[True]
                rows.append([n, label, what, f"{tb:.2f}", f"{rb:.0f}", f"{ta:.2f}", f"{ra:.0f}", f"{tb / ta:.2f}x"])
                print(f"done n={n} {label} {what}", file=sys.stderr, flush=True)
    print(f"# density fusion benchmark, {today()}, {machine()}"
          + (", keep_freed_memory() applied" if kept else ""))
    if args.compare == "fusion":
        print("complex64; before = FUSE_CHANNELS False (one pass per gate run and per channel), after = superoperator "
              "blocks; / clone = time over torch.clone of the (B, 4**n) density batch")
    else:
        print("complex64; before = LEAN_SEGMENTS False (a lone CNOT between channels is a program call, channels via "
              "Channel.apply), after = LEAN_SEGMENTS True; both with superoperator blocks; / clone = time over "
              "torch.clone of the (B, 4**n) density batch")
    print(table(rows, ["n", "case", "pass", "before ms", "/ clone", "after ms", "/ clone", "speed-up"]))


if __name__ == "__main__":
    main()
