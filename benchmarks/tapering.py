"""Z2 qubit tapering (tql.chem.z2_taper) on the bundled molecules.

Per molecule: qubits before → after, the symmetries, Pauli terms before → after, ms to find the
symmetries and taper H (Pauli algebra only, no matrix), the tapered ground energy's distance from
FCI (PySCF, bundled) and the time of ``tql.exact.ground_state`` (eigsh, matrix-free) on the full
and on the tapered Hamiltonian; and ms of one energy + gradient of a 3-layer hardware-efficient
ansatz on either register (backprop), as a ratio to a torch.clone of the full state.

    python benchmarks/tapering.py [--molecules H2,LiH_active,H2O_active,LiH,BeH2,H2O] [--threads T]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
import torchquantum_layers.chem as chem  # noqa: E402

from common import clone_time, machine, table, timeit, today  # noqa: E402


def step_time(H, n, reference):
    torch.manual_seed(0)
    c = chem.hardware_efficient(n, 3, reference=reference, dtype=torch.complex128)

    def step():
        c.weights.grad = None
        tql.expval(c, H).sum().backward()
    return timeit(step, repeats=5, min_time=0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--molecules", default="H2,LiH_active,H2O_active,LiH,BeH2,H2O")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for name in args.molecules.split(","):
        H, info = chem.load(name)
        t = time.perf_counter()
        Ht, tap = chem.z2_taper(H, reference=info.hf_state)
        t_taper = time.perf_counter() - t
        n, m = info.n_qubits, tap.n_tapered_qubits
        t = time.perf_counter()
        e_full = float(tql.exact.ground_state(H, method="eigsh")[0][0])
        t_full = time.perf_counter() - t
        t = time.perf_counter()
        e_tap = float(tql.exact.ground_state(Ht, method="eigsh" if m > 1 else "dense")[0][0])
        t_tap = time.perf_counter() - t
        clone = clone_time(tql.zero_state(n, dtype=torch.complex128))
        s_full = step_time(H, n, tuple(info.hf_state))
        s_tap = step_time(Ht, m, tap.reference_bits(info.hf_state))
        rows.append([name, f"{n} → {m}", len(tap.generators), f"{len(H.terms)} → {len(Ht.terms)}",
                     f"{t_taper * 1e3:.1f}", f"{(e_tap - info.fci_energy) * 1e3:+.2e}", f"{(e_full - info.fci_energy) * 1e3:+.2e}",
                     f"{t_full * 1e3:.0f}", f"{t_tap * 1e3:.0f}", f"{s_full * 1e3:.2f} ({s_full / clone:.0f})",
                     f"{s_tap * 1e3:.2f} ({s_tap / clone:.0f})"])
    print(f"{today()}, {machine()}, complex128")
    print(table(rows, ["molecule", "qubits", "symmetries", "terms", "taper ms", "tapered E0 − FCI mHa",
                       "full E0 − FCI mHa", "eigsh full ms", "eigsh tapered ms", "HEA step full ms (÷ clone)",
                       "HEA step tapered ms (÷ clone)"]))


if __name__ == "__main__":
    main()
