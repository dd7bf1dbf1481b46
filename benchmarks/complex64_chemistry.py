"""Chemistry in complex64: what the identity-term split (``Hamiltonian.split_constant``) and ADAPT's
line-search-free L-BFGS change, "before" and "after" in the same run.

"before" runs with ``split_constant`` returning the Hamiltonian unchanged (the constant evaluated on
the gate-drifted state, as until 2026-12-07) and ADAPT's default strong-Wolfe L-BFGS; "after" is the
library as it is. complex128 is the reference. Reported per molecule (bundled data, singles_doubles
and qubit pools): operators chosen, energy − FCI (mHa; negative = below FCI, impossible for the
exact state), inner evaluations, seconds.

    python benchmarks/complex64_chemistry.py [--molecules H2,LiH_active,H2O_active] [--threads 1]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.chem import adapt as adapt_module  # noqa: E402
from torchquantum_layers.observables import hamiltonian as hamiltonian_module  # noqa: E402

from common import add_runtime_flags, machine, set_threads, table, today  # noqa: E402


@contextlib.contextmanager
def before():
    """The library as it was: no constant split, the strong-Wolfe L-BFGS in complex64 too."""
    split, lbfgs = hamiltonian_module.Hamiltonian.split_constant, adapt_module._lbfgs_on_gradients
    hamiltonian_module.Hamiltonian.split_constant = lambda self: (self, 0.0)
    adapt_module._lbfgs_on_gradients = lambda lr: "lbfgs"
    try:
        yield
    finally:
        hamiltonian_module.Hamiltonian.split_constant = split
        adapt_module._lbfgs_on_gradients = lbfgs


def run(molecule, pool, dtype):
    H, info = tql.chem.load(molecule)
    start = time.perf_counter()
    r = tql.chem.adapt_vqe(H, info.n_electrons, pool=pool, dtype=dtype)
    return (r.n_iterations, f"{(r.energy - info.fci_energy) * 1e3:+.4f}", r.n_evaluations,
            f"{time.perf_counter() - start:.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--molecules", default="H2,LiH_active,H2O_active")
    ap.add_argument("--pools", default="singles_doubles,qubit")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    rows = []
    for molecule in args.molecules.split(","):
        for pool in args.pools.split(","):
            ref = run(molecule, pool, torch.complex128)
            with before():
                old = run(molecule, pool, torch.complex64)
            new = run(molecule, pool, torch.complex64)
            for label, res in (("complex128", ref), ("complex64 before", old), ("complex64 after", new)):
                rows.append((molecule, pool, label, *res))
            print(f"done {molecule} {pool}", file=sys.stderr, flush=True)
    print(f"# ADAPT-VQE in complex64, {today()}, {machine()}")
    print(table(rows, ["molecule", "pool", "run", "operators", "E − FCI mHa", "evaluations", "s"]))


if __name__ == "__main__":
    main()
