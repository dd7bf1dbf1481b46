"""ADAPT-VQE (tql.chem.adapt_vqe) against a fixed UCCSD ansatz on the bundled molecules.

For each molecule and pool: operators appended (= angles), E − FCI (PySCF, bundled), wall time and
energy evaluations of the whole ADAPT run (L-BFGS re-optimisation after every operator, grad_tol
1e-3), next to UCCSD's angle count and its energy after L-BFGS (same inner optimiser, same energy
tolerance). Also the cost of one pool screening (all pool gradients: one H·ψ, one generator
application per operator) in ms and as a ratio to a torch.clone of the state.

    python benchmarks/adapt_vqe.py [--molecules H2,LiH_active,H2O_active,LiH,BeH2] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers.chem as chem  # noqa: E402
from torchquantum_layers.chem.adapt import _run, operator_pool, pool_gradients  # noqa: E402

from common import clone_time, machine, table, timeit, today  # noqa: E402


def uccsd_run(H, info, steps=200, tol=1e-10):
    c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=torch.complex128)
    prev = []

    def stop(v, _):
        done = bool(prev) and abs(prev[-1] - v) < tol
        prev.append(v)
        return done
    t = time.perf_counter()
    history, *_ = _run(lambda: (chem.energy(c, H, diff_method="auto"), None), c, "lbfgs", None, steps, stop, None, {})
    return c.num_parameters, history[-1], time.perf_counter() - t, len(history)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--molecules", default="H2,LiH_active,H2O_active,LiH,BeH2")
    ap.add_argument("--pools", default="singles_doubles,qubit")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows, screen = [], []
    for name in args.molecules.split(","):
        H, info = chem.load(name)
        n_u, e_u, t_u, ev_u = uccsd_run(H, info)
        for pool in args.pools.split(","):
            t = time.perf_counter()
            r = chem.adapt_vqe(H, info.n_electrons, pool=pool, max_iterations=80)
            wall = time.perf_counter() - t
            ops = operator_pool(pool, info.n_qubits, info.n_electrons)
            rows.append([name, info.n_qubits, pool, len(ops), r.n_iterations, f"{(r.energy - info.fci_energy) * 1e3:+.4f}",
                         r.reason, f"{wall:.2f}", r.n_evaluations, n_u, f"{(e_u - info.fci_energy) * 1e3:+.4f}",
                         f"{t_u:.2f}", ev_u])
            psi = r.circuit().detach()
            t_screen = timeit(lambda: pool_gradients(r.circuit, H, ops), repeats=5, min_time=0.2)
            screen.append([name, pool, len(ops), f"{t_screen * 1e3:.2f}", f"{t_screen / clone_time(psi):.0f}"])
    print(f"{today()}, {machine()}, complex128, grad_tol 1e-3, L-BFGS (energy change < 1e-10 stops it)")
    print(table(rows, ["molecule", "qubits", "pool", "pool size", "ADAPT operators", "ADAPT E−FCI mHa", "stopped by",
                       "ADAPT s", "ADAPT evals", "UCCSD angles", "UCCSD E−FCI mHa", "UCCSD s", "UCCSD evals"]))
    print()
    print(table(screen, ["molecule", "pool", "operators", "one screening ms", "÷ clone"]))


if __name__ == "__main__":
    main()
