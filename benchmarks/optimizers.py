"""Optimizers for VQE (tql.optim.QNG, tql.optim.SPSA against torch's Adam and SGD), and the cost of
the metric QNG solves with.

(a) steps to chemical accuracy (1.6 mHa from the bundled FCI energy) from three random starts of a
    real hardware-efficient ansatz (RY + CNOT chain) on H2 (4 qubits) and LiH_active (6 qubits),
    exact energies, complex128; ms per step. SPSA takes two energies per step and no gradient.
(b) ``tql.grad.quantum_fisher`` (derivative states as extra rows of one pass) against a
    reverse-mode Jacobian of the state (``torch.autograd.functional.jacobian``), RY layers.

    python benchmarks/optimizers.py [--max-steps 400] [--layers 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.engine import run_circuit  # noqa: E402

from common import machine, table, timeit, today  # noqa: E402

CHEMICAL_ACCURACY = 1.6e-3


def optimizer(name, c, seed):
    if name == "adam (lr 0.1)":
        return torch.optim.Adam(c.parameters(), lr=0.1)
    if name == "sgd (lr 0.2)":
        return torch.optim.SGD(c.parameters(), lr=0.2)
    if name.startswith("qng"):
        return tql.optim.QNG(c, lr=float(name.split("lr ")[1].rstrip(")")))
    return tql.optim.SPSA(c.parameters(), lr=0.5, perturbation=0.1, stability=10, seed=seed)


def steps_to_accuracy(molecule, name, layers, max_steps, seed):
    H, info = tql.chem.load(molecule)
    torch.manual_seed(seed)
    c = tql.templates.hardware_efficient(tql.Circuit(info.n_qubits, dtype=torch.complex128), n_layers=layers)
    opt = optimizer(name, c, seed)

    def energy():
        return tql.expval(c, H).sum()
    start = time.perf_counter()
    for step in range(1, max_steps + 1):
        if name.startswith("spsa"):
            e = opt.step(energy)
        else:
            opt.zero_grad()
            e = energy()
            e.backward()
            opt.step()
        if abs(float(e.detach()) - info.fci_energy) < CHEMICAL_ACCURACY:
            break
    else:
        step = None
    error = (float(energy().detach()) - info.fci_energy) * 1e3
    return c.num_parameters, step, (time.perf_counter() - start) / (step or max_steps) * 1e3, error


def jacobian_metric(c):
    x, state, _ = c.prepare()
    w0 = c.weights.detach().clone()
    jac = torch.autograd.functional.jacobian(lambda w: torch.view_as_real(run_circuit(c, state, x, w)), w0)
    d = torch.complex(jac[:, :, 0], jac[:, :, 1])
    psi = run_circuit(c, state, x, w0).detach()
    berry = torch.einsum("bnp,bn->bp", d.conj(), psi)
    return (torch.einsum("bnp,bnq->bpq", d.conj(), d) - berry[:, :, None] * berry.conj()[:, None, :]).real


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-steps", type=int, default=400)
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    print(f"{today()}, {machine()}")
    rows = []
    for molecule in ("H2", "LiH_active"):
        for name in ("adam (lr 0.1)", "sgd (lr 0.2)", "qng (lr 0.2)", "qng (lr 1.0)",
                     "spsa (lr 0.5, c 0.1, A 10)"):
            runs = [steps_to_accuracy(molecule, name, args.layers, args.max_steps, seed) for seed in range(3)]
            steps = " / ".join("–" if s is None else str(s) for _, s, _, _ in runs)
            errors = " / ".join(f"{e:.1f}" for *_, e in runs)
            ms = sorted(t for _, _, t, _ in runs)
            rows.append([molecule, runs[0][0], name, steps, errors, f"{ms[0]:.2f}–{ms[-1]:.2f}"])
    print(table(rows, ["molecule", "angles", "optimizer", f"steps to 1.6 mHa (3 starts, – = not in {args.max_steps})",
                       "error at the end (mHa)", "ms / step"]))
    rows = []
    for n, layers in ((6, 2), (8, 3), (10, 3), (12, 3)):
        c = tql.Circuit(n, dtype=torch.complex128)
        for _ in range(layers):
            for w in range(n):
                c.ry(w, trainable=True)
            for w in range(n - 1):
                c.cnot(w, w + 1)
        fast = timeit(lambda: tql.grad.quantum_fisher(c), repeats=5)
        slow = timeit(lambda: jacobian_metric(c), repeats=3, min_time=0.0)
        err = float((tql.grad.quantum_fisher(c) - jacobian_metric(c)).abs().max())
        rows.append([n, c.num_parameters, f"{fast * 1e3:.2f}", f"{slow * 1e3:.1f}", f"{slow / fast:.0f}×", f"{err:.1e}"])
    print(table(rows, ["n", "angles", "quantum_fisher ms", "state Jacobian ms", "speed-up", "max abs diff"]))


if __name__ == "__main__":
    main()
