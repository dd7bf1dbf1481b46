"""ADAPT-VQE on a bundled molecule (default LiH, 12 qubits): the ansatz grows one operator at a time.

Prints each iteration's chosen operator, the energy error against FCI and the pool gradient's
norm, then compares the operator count with UCCSD's. With matplotlib (the ``plot`` extra) the
energy per iteration, one curve per pool, is saved to ``<out>/adapt_vqe_<molecule>.png``.

    python examples/adapt_vqe.py [--molecule LiH] [--pools singles_doubles,qubit] [--grad-tol 1e-3]
                                 [--out plots] [--no-plots]
"""
import argparse
import os
import time

import torchquantum_layers.chem as chem
from torchquantum_layers import plotting


def run(H, info, pool, args):
    print(f"\npool {pool!r}: {len(chem.operator_pool(pool, info.n_qubits, info.n_electrons))} operators")

    def show(k, res):
        print(f"  {k:3d}  {res.operators[-1].label:34s} E - FCI = {1e3 * (res.energy - info.fci_energy):+9.4f} mHa"
              f"   |g| before = {res.gradient_norms[-1]:.2e}")

    t = time.perf_counter()
    r = chem.adapt_vqe(H, info.n_electrons, pool=pool, grad_tol=args.grad_tol, max_iterations=args.max_iterations,
                       callback=show)
    print(f"  stopped by {r.reason} after {r.n_iterations} operators ({time.perf_counter() - t:.2f} s): "
          f"E - FCI = {1e3 * (r.energy - info.fci_energy):+.4f} mHa, |g| = {r.gradient_norms[-1]:.2e}")
    return r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--molecule", default="LiH", choices=chem.available())
    p.add_argument("--pools", default="singles_doubles,qubit")
    p.add_argument("--grad-tol", type=float, default=1e-3)
    p.add_argument("--max-iterations", type=int, default=80)
    p.add_argument("--out", default="plots", help="folder for the PNG figure (default: plots)")
    p.add_argument("--no-plots", action="store_true", help="save no figure")
    args = p.parse_args(argv)

    H, info = chem.load(args.molecule)
    n_uccsd = sum(map(len, chem.excitations(info.n_electrons, info.n_qubits)))
    print(f"{args.molecule}: {info.n_qubits} qubits, {len(H)} Pauli terms, {info.n_electrons} electrons; "
          f"UCCSD has {n_uccsd} angles\n  HF  {info.hf_energy:+.8f} Ha\n  FCI {info.fci_energy:+.8f} Ha")
    results = {pool: run(H, info, pool, args) for pool in args.pools.split(",")}
    if not args.no_plots and plotting.available():
        path = os.path.join(args.out, f"adapt_vqe_{args.molecule}.png")
        plotting.vqe_convergence({f"ADAPT, {pool} pool": r.energies for pool, r in results.items()},
                                 info.fci_energy, hf_energy=info.hf_energy,
                                 title=f"ADAPT-VQE, {args.molecule}", path=path, xlabel="operators appended")
        print(f"figure saved to {path}")
    return results


if __name__ == "__main__":
    main()
