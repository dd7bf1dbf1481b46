"""Energy error against the number of circuit evaluations for Rotosolve, SPSA, QN-SPSA,
Adam (parameter-shift gradients) and QNG on VQEs of the bundled molecules.

A real hardware-efficient ansatz (RY + CNOT chain, ``--layers``) from three seeded random starts,
exact energies, complex128. Evaluations are counted as hardware would run circuits: a loss is 1,
a parameter-shift gradient of P angles 2P, a fidelity 1 (QN-SPSA: 2 losses + 4 fidelities per
step), QNG's metric P(P+1)/2 overlap circuits (the full metric) on top of its 2P + 1; Rotosolve
counts its closure calls (1 + 2P per sweep of one-frequency angles). The table gives the median
|E − E_FCI| (mHa) over the starts once each budget of evaluations is spent.

    python benchmarks/optimizers_extra.py [--molecules H2,LiH_active] [--layers 2] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, keep_memory_if_asked, machine, set_threads, table, today  # noqa: E402

BUDGETS = (100, 300, 1000, 3000)


def trace(molecule, name, layers, seed, budget):
    """[(evaluations, |E − E_FCI| in mHa)] after each step until ``budget`` evaluations are spent."""
    H, info = tql.chem.load(molecule)
    torch.manual_seed(seed)
    c = tql.templates.hardware_efficient(tql.Circuit(info.n_qubits, dtype=torch.complex128), n_layers=layers)
    P = c.num_parameters

    def energy():
        return tql.expval(c, H, diff_method="parameter-shift").sum()
    if name == "rotosolve":
        opt, cost = tql.optim.Rotosolve(c), None
    elif name == "spsa":
        opt, cost = tql.optim.SPSA(c.parameters(), lr=0.5, perturbation=0.1, stability=10, seed=seed), 2
    elif name == "qnspsa":
        opt, cost = tql.optim.QNSPSA(c, lr=0.5, perturbation=0.1, stability=10, seed=seed), 6
    elif name == "adam":
        opt, cost = torch.optim.Adam(c.parameters(), lr=0.1), 2 * P + 1
    else:
        opt, cost = tql.optim.QNG(c, lr=0.2), 2 * P + 1 + P * (P + 1) // 2
    spent, out = 0, []
    while spent < budget:
        if name == "rotosolve":
            opt.step(energy)
            spent = int(opt.state[c.weights]["evaluations"])
        elif name in ("spsa", "qnspsa"):
            opt.step(energy)
            spent += cost
        else:
            opt.zero_grad()
            energy().backward()
            opt.step()
            spent += cost
        with torch.no_grad():
            out.append((spent, abs(float(energy()) - info.fci_energy) * 1e3))
    return out


def error_at(points, budget):
    """The error after the last step that fits in ``budget`` evaluations (None before the first)."""
    fit = [e for n, e in points if n <= budget]
    return fit[-1] if fit else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--molecules", default="H2,LiH_active")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--starts", type=int, default=3)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    print(f"{today()}, {machine()}")
    rows = []
    for molecule in args.molecules.split(","):
        for name in ("rotosolve", "spsa", "qnspsa", "adam", "qng"):
            runs = [trace(molecule, name, args.layers, seed, BUDGETS[-1]) for seed in range(args.starts)]
            cells = []
            for b in BUDGETS:
                errs = [error_at(r, b) for r in runs]
                cells.append("–" if any(e is None for e in errs) else f"{statistics.median(errs):.2f}")
            rows.append([molecule, name, *cells])
    labels = {"rotosolve": "Rotosolve", "spsa": "SPSA (lr 0.5, c 0.1, A 10)", "qnspsa": "QN-SPSA (lr 0.5, c 0.1, A 10)",
              "adam": "Adam lr 0.1 (parameter shift)", "qng": "QNG lr 0.2 (+ full metric)"}
    rows = [[m, labels[n], *rest] for m, n, *rest in rows]
    print(table(rows, ["molecule", "optimizer", *(f"error (mHa) at {b} evals" for b in BUDGETS)]))


if __name__ == "__main__":
    main()
