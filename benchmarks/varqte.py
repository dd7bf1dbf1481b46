"""Variational time evolution (tql.varqte): cost of one McLachlan evaluation and accuracy on a quench.

(a) one (G, V) evaluation (``mclachlan_derivative``: P + 1 rows through the circuit gate by gate,
    one H·ψ, a P×P solve) for a real-and-complex ansatz (RY·RZ on every wire + CNOT ring, L layers,
    P = 2nL) under the transverse-field Ising chain, complex128; ms, and as multiples of one
    forward pass of the circuit (the least any method pays per derivative state is one pass,
    so P + 1 is the floor) and of a ``torch.clone`` of the state, timed in the same run.
(b) accuracy: a quench of the Ising chain from |+…+⟩ (a Hamiltonian-variational ansatz: RZZ on
    every bond, RX·RY on every wire, per layer) evolved to t with RK4 against
    ``scipy.linalg.expm``: fidelity, the McLachlan residual, wall time; and imaginary time from
    |+…+⟩ (same ansatz, angles ±0.1 at random: at 0 it is a stationary point) to τ = 10: energy above
    the exact ground (numpy eigh).

    python benchmarks/varqte.py [--sizes 4,6,8,10] [--layers 2] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.varqte import mclachlan_derivative, varqite, varqrte  # noqa: E402

from common import add_runtime_flags, clone_time, machine, set_threads, table, timeit, today  # noqa: E402


def ising(n, h=1.0):
    terms = [(1.0, f"Z{i} Z{i + 1}") for i in range(n - 1)] + [(h, f"X{i}") for i in range(n)]
    return tql.Hamiltonian(terms)


def ansatz(n, layers, start="zero", seed=0):
    """``start="zero"``: RY·RZ on every wire + CNOT ring per layer, angles near 0 (for (a) and the
    imaginary-time run). ``"plus"``: |+…+⟩, then per layer RZZ on every bond and RX·RY on every
    wire, angles 0 (a Hamiltonian-variational form for the quench: the Ising terms are its
    directions at the start)."""
    c = tql.Circuit(n, dtype=torch.complex128)
    if start == "plus":
        for w in range(n):
            c.h(w)
        for _ in range(layers):
            for w in range(n - 1):
                c.rzz(w, w + 1, trainable=True)
            for w in range(n):
                c.rx(w, trainable=True).ry(w, trainable=True)
        with torch.no_grad():
            c.weights.zero_()
        return c
    for _ in range(layers):
        for w in range(n):
            c.ry(w, trainable=True).rz(w, trainable=True)
        for w in range(n):
            c.cnot(w, (w + 1) % n)
    torch.manual_seed(seed)
    with torch.no_grad():
        c.weights.uniform_(-0.05, 0.05)
    return c


def cost_rows(sizes, layers):
    rows = []
    for n in sizes:
        c, H = ansatz(n, layers), ising(n)
        state = c().detach()
        t_eval = timeit(lambda: mclachlan_derivative(c, H), repeats=5)
        with torch.no_grad():
            t_fwd = timeit(lambda: c(), repeats=5)
        t_clone = clone_time(state)
        P = c.num_parameters
        rows.append((n, P, f"{t_eval * 1e3:.2f}", f"{t_eval / t_fwd:.1f}", P + 1, f"{t_eval / t_clone:.0f}"))
        print(f"done cost n={n}", file=sys.stderr, flush=True)
    return rows


def accuracy_rows(sizes, layers, t_end, steps):
    import scipy.linalg as sl
    rows = []
    for n in sizes:
        if n > 10:
            continue
        H = ising(n)
        Hd = H.to_dense(n).numpy()
        c = ansatz(n, layers, start="plus")
        psi0 = c().detach().numpy()[0]
        start = time.perf_counter()
        r = varqrte(c, H, t_end, steps=steps)
        wall = time.perf_counter() - start
        exact = sl.expm(-1j * t_end * Hd) @ psi0
        fid = abs(np.vdot(exact, r.state.numpy()[0])) ** 2
        torch.manual_seed(1)
        with torch.no_grad():       # |+…+⟩ is a stationary point of imaginary time (top of the X part)
            c.weights.uniform_(-0.1, 0.1)
        start = time.perf_counter()
        ri = varqite(c, H, 10.0, steps=5 * steps, integrator="heun")
        wall_i = time.perf_counter() - start
        ground = np.linalg.eigvalsh(Hd)[0]
        rows.append((n, c.num_parameters, f"{fid:.6f}", f"{float(r.residuals.max()):.2e}", f"{wall:.2f}",
                     f"{float(ri.energies[-1]) - ground:.2e}", f"{wall_i:.2f}"))
        print(f"done accuracy n={n}", file=sys.stderr, flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4,6,8,10")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--time", type=float, default=0.5, help="real-time quench length t")
    ap.add_argument("--steps", type=int, default=20)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"# variational time evolution, {today()}, {machine()}, complex128, layers {args.layers}")
    print("\n(a) one McLachlan evaluation (G, V, solve)\n")
    print(table(cost_rows(sizes, args.layers),
                ["n", "P", "ms", "/ forward pass", "floor (P+1)", "/ clone"]))
    print(f"\n(b) Ising chain (J = h = 1): real-time quench from |+…+⟩ to t = {args.time} (RK4, {args.steps} steps) "
          f"and imaginary time from near |+…+⟩ to τ = 10 (Heun, {5 * args.steps} steps)\n")
    print(table(accuracy_rows(sizes, args.layers, args.time, args.steps),
                ["n", "P", "fidelity vs expm", "max residual", "s", "E(τ) − E0", "s (imag.)"]))


if __name__ == "__main__":
    main()
