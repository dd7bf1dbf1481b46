"""Lattice models (tql.lattice): build time, size and exact ground state of standard lattice Hamiltonians.

For the transverse-field Ising model (J = h = 1, the critical point of the chain), the Heisenberg
XXX model (J = 1) on chains and square lattices, and the Fermi-Hubbard model (t = 1, U = 4,
μ = U/2 so half filling is the ground sector, Jordan-Wigner) on chains and small square lattices:
the time to build the Hamiltonian (median), its number of terms, its number of distinct X masks
(``H.num_x_masks``: passes over the state per H·ψ), the time of one ``tql.exact.ground_state``
call on a freshly built H (dense eigh up to 9 qubits, matrix-free Lanczos beyond) and its energy.
For the Ising chains the energy is compared with the free-fermion result (open: singular values of
the bidiagonal n × n block h·I + J·shift; periodic: E0 = −Σ_k sqrt(J² + h² − 2Jh cos k) over
k = (2m + 1)π/n).

    python benchmarks/lattice.py [--chains 8,12,16,20] [--squares 3x3,3x4,4x4,4x5]
                                 [--hubbard chain4,2x2,chain6,2x3,chain8,2x4] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import lattice as L  # noqa: E402

from common import add_runtime_flags, machine, set_threads, table, timeit, today  # noqa: E402


def tfim_exact(n, periodic, J=1.0, h=1.0):
    if periodic:
        k = np.pi * (2 * np.arange(n) + 1) / n
        return -np.sqrt(J * J + h * h - 2 * J * abs(h) * np.cos(k)).sum()
    B = h * np.eye(n) + J * np.eye(n, k=1)
    return -np.linalg.svd(B, compute_uv=False).sum()


def parse_grid(spec):
    """"chain6" -> chain(6); "2x3" -> square(2, 3)."""
    if spec.startswith("chain"):
        return f"chain {spec[5:]}", lambda: L.chain(int(spec[5:]))
    r, c = (int(v) for v in spec.split("x"))
    return f"square {r}x{c}", lambda: L.square(r, c)


def row(model, lattice_name, build, max_qubits, exact=None):
    t_build = timeit(build, repeats=5, min_time=0.02)
    H = build()
    n = H.n_wires
    out = {"model": model, "lattice": lattice_name, "qubits": n, "terms": len(H), "X masks": H.num_x_masks,
           "build ms": f"{t_build * 1e3:.2f}"}
    if n <= max_qubits:
        H = build()                                     # fresh: no compiled plan cached
        start = time.perf_counter()
        e0 = float(tql.exact.ground_state(H)[0][0])
        out["ground_state s"] = f"{time.perf_counter() - start:.3f}"
        out["E0"] = f"{e0:.8f}"
        if exact is not None:
            out["|E0 − exact|"] = f"{abs(e0 - exact):.1e}"
    print(f"done {model} {lattice_name}", file=sys.stderr, flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", default="8,12,16,20", help="chain lengths for the spin models")
    ap.add_argument("--squares", default="3x3,3x4,4x4,4x5", help="square lattices (rows x cols) for the spin models")
    ap.add_argument("--hubbard", default="chain4,2x2,chain6,2x3,chain8,2x4",
                    help="Hubbard lattices: chainN or RxC (2 qubits a site)")
    ap.add_argument("--max-qubits", type=int, default=20, help="skip ground_state beyond this many qubits")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    chains = [int(s) for s in args.chains.split(",") if s]
    squares = [s for s in args.squares.split(",") if s]
    hubbard = [s for s in args.hubbard.split(",") if s]
    rows = []
    for n in chains:
        for periodic in (False, True):
            name = f"chain {n}{' periodic' if periodic else ''}"
            rows.append(row("TFIM", name, lambda: L.transverse_field_ising(L.chain(n, periodic)), args.max_qubits,
                            tfim_exact(n, periodic)))
        rows.append(row("Heisenberg", f"chain {n} periodic", lambda: L.heisenberg(L.chain(n, True)), args.max_qubits))
    for spec in squares:
        name, lat = parse_grid(spec)
        rows.append(row("TFIM", name, lambda: L.transverse_field_ising(lat()), args.max_qubits))
        rows.append(row("Heisenberg", name, lambda: L.heisenberg(lat()), args.max_qubits))
    for spec in hubbard:
        name, lat = parse_grid(spec)
        rows.append(row("Hubbard U=4", name, lambda: L.fermi_hubbard(lat(), t=1.0, U=4.0, mu=2.0), args.max_qubits))
    headers = ["model", "lattice", "qubits", "terms", "X masks", "build ms", "ground_state s", "E0", "|E0 − exact|"]
    print(f"# lattice models, {today()}, {machine()}")
    print()
    print(table([[r.get(h, "") for h in headers] for r in rows], headers))


if __name__ == "__main__":
    main()
