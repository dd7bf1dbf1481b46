"""Regenerate the bundled molecular Hamiltonians in torchquantum_layers/chem/data/ (needs PySCF).

    python -m torchquantum_layers.chem.generate_data            # all files
    python -m torchquantum_layers.chem.generate_data H2 LiH     # some of them

Every file records its provenance: geometry (Å), basis, active space, HF / FCI energies, nuclear
repulsion, PySCF version and date. Each stored FCI energy is checked on the spot against exact
diagonalisation of the stored Hamiltonian in its particle-number sector.
"""
from __future__ import annotations

import datetime
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from . import molecule, hamiltonian
from .data import DATA_DIR, FORMAT, entry_to_json

GENERATED_BY = "python -m torchquantum_layers.chem.generate_data"

BASIS = "sto-3g"


def h2(r=0.74):
    return [("H", (0.0, 0.0, 0.0)), ("H", (0.0, 0.0, r))]


def lih(r=1.5949):
    return [("Li", (0.0, 0.0, 0.0)), ("H", (0.0, 0.0, r))]


def beh2(r=1.3264):
    return [("Be", (0.0, 0.0, 0.0)), ("H", (0.0, 0.0, -r)), ("H", (0.0, 0.0, r))]


def h2o(r=0.9578, angle=104.4776):
    half = math.radians(angle) / 2
    y, z = r * math.sin(half), r * math.cos(half)
    return [("O", (0.0, 0.0, 0.0)), ("H", (0.0, y, z)), ("H", (0.0, -y, z))]


# name: (description, Molecule kwargs)
MOLECULES = {
    "H2": ("H2 at 0.74 Å, STO-3G, full space (2 electrons, 2 orbitals)", dict(geometry=h2())),
    "LiH": ("LiH at 1.5949 Å, STO-3G, full space (4 electrons, 6 orbitals)", dict(geometry=lih())),
    "LiH_active": ("LiH at 1.5949 Å, STO-3G, frozen Li 1s core; 2 electrons in 3 orbitals (HOMO, LUMO, LUMO+1)",
                   dict(geometry=lih(), active_electrons=2, active_orbitals=3, name="LiH")),
    "BeH2": ("linear BeH2, Be-H 1.3264 Å, STO-3G, full space (6 electrons, 7 orbitals)", dict(geometry=beh2())),
    "H2O": ("H2O, O-H 0.9578 Å, H-O-H 104.4776°, STO-3G, full space (10 electrons, 7 orbitals)",
            dict(geometry=h2o(), name="H2O")),
    "H2O_active": ("H2O, O-H 0.9578 Å, H-O-H 104.4776°, STO-3G; 3 lowest orbitals frozen, 4 electrons in 4 "
                   "orbitals (HOMO-1, HOMO, LUMO, LUMO+1)",
                   dict(geometry=h2o(), active_electrons=4, active_orbitals=4, name="H2O")),
}
SCANS = {"H2": ("H2 bond-length scan, STO-3G, full space", h2, [round(0.5 + 0.1 * i, 10) for i in range(21)])}


def sector_ground(H, info) -> float:
    """Exact ground energy of the stored Pauli sum in the (N_alpha, N_beta) sector (JW)."""
    n = info.n_qubits
    from itertools import combinations
    states = []
    for a in combinations(range(0, n, 2), info.n_alpha):
        for b in combinations(range(1, n, 2), info.n_beta):
            states.append(sum(1 << (n - 1 - q) for q in a + b))
    states = np.array(sorted(states), dtype=np.int64)
    pos = {int(s): i for i, s in enumerate(states)}
    m = np.zeros((len(states), len(states)), dtype=np.complex128)
    for c, p in H.terms:
        xi = sum(1 << (n - 1 - w) for w in range(n) if (p.x_mask >> w) & 1)
        zi = sum(1 << (n - 1 - w) for w in range(n) if (p.z_mask >> w) & 1)
        ny = bin(p.x_mask & p.z_mask).count("1")
        for j, s in enumerate(states):
            t = int(s) ^ xi
            if t in pos:
                sign = -1 if bin(int(s) & zi).count("1") % 2 else 1
                m[pos[t], j] += c * (1j ** ny) * sign
    return float(np.linalg.eigvalsh(m)[0])


def build(mol_kwargs, description, **extra):
    mol = molecule.Molecule(basis=BASIS, **mol_kwargs)
    t = time.perf_counter()
    H, info = hamiltonian.molecular_hamiltonian(mol)
    exact = sector_ground(H, info)
    if abs(exact - info.fci_energy) > 1e-8:
        raise SystemExit(f"{mol.name}: exact diagonalisation {exact} != FCI {info.fci_energy}")
    print(f"  {mol.name:5s} {info.n_qubits:2d} qubits {len(H):5d} terms  HF {info.hf_energy:.8f}  "
          f"FCI {info.fci_energy:.8f}  ({time.perf_counter() - t:.1f} s)")
    return entry_to_json(H, info, description=description, **extra)


def write(stem, entries, out_dir: Path = DATA_DIR) -> Path:
    import pyscf
    doc = {"format": FORMAT, "generated_by": GENERATED_BY,
           "pyscf_version": pyscf.__version__,
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
           "entries": entries}
    path = Path(out_dir) / f"{stem}.json"
    text = json.dumps(doc, separators=(",", ":"))
    # one term per line keeps the files diff-able
    text = text.replace('],[', '],\n[')
    path.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size / 1024:.1f} KiB)")
    return path


def main(names=(), out_dir: Path = DATA_DIR) -> list:
    """Write the named files (all when ``names`` is empty) to ``out_dir``; returns their paths."""
    unknown = set(names) - set(MOLECULES) - {f"{k}_scan" for k in SCANS}
    if unknown:
        raise ValueError(f"generate_data: unknown molecule(s) {sorted(unknown)}; "
                         f"known: {sorted(MOLECULES) + [f'{k}_scan' for k in SCANS]}")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    written = []
    for name, (description, kwargs) in MOLECULES.items():
        if names and name not in names:
            continue
        written.append(write(name, [build(kwargs, description)], out_dir))
    for name, (description, geom, lengths) in SCANS.items():
        if names and f"{name}_scan" not in names:
            continue
        entries = [build(dict(geometry=geom(r)), f"{description}, {r:g} Å", bond_length=r) for r in lengths]
        written.append(write(f"{name}_scan", entries, out_dir))
    return written


if __name__ == "__main__":
    main(sys.argv[1:])
