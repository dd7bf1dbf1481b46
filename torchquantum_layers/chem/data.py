"""Bundled molecular Hamiltonians (no PySCF needed): ``load``, ``load_scan``, ``available``.

The files ``torchquantum_layers/chem/data/*.json`` are written by ``python -m torchquantum_layers.chem.generate_data``
from PySCF (STO-3G, Jordan–Wigner, interleaved spin orbitals). Each holds ``entries``: a list of
``{"info": {...MoleculeInfo...}, "terms": [[coeff, "X0 Z1 ..."], ...]}`` with the provenance
(geometry in Å, basis, active space, HF and FCI energies, nuclear repulsion, PySCF version, date).

=============  =======  ======================================================================
name           qubits   content
=============  =======  ======================================================================
H2             4        H–H 0.74 Å, full space (2 e, 2 orbitals)
LiH            12       Li–H 1.5949 Å, full space (4 e, 6 orbitals)
LiH_active     6        LiH, frozen Li 1s core, 2 e in 3 orbitals (HOMO, LUMO, LUMO+1)
BeH2           14       linear H–Be–H, 1.3264 Å, full space (6 e, 7 orbitals)
H2O            14       O–H 0.9578 Å, H–O–H 104.4776°, full space (10 e, 7 orbitals)
H2O_active     8        H2O, 3 lowest orbitals frozen, 4 e in 4 orbitals (HOMO-1 .. LUMO+1)
=============  =======  ======================================================================

Scans: ``load_scan("H2")`` gives the H2 curve at 21 bond lengths 0.5, 0.6, …, 2.5 Å;
``load("H2", bond_length=1.1)`` picks one point of it.
"""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Optional

from .hamiltonian import MoleculeInfo

__all__ = ["load", "load_scan", "available", "available_scans", "DATA_DIR", "FORMAT",
           "hamiltonian_to_terms", "entry_to_json"]

DATA_DIR = Path(__file__).resolve().parent / "data"
FORMAT = "torchquantum-layers/chem-hamiltonian/1"
_SCAN_SUFFIX = "_scan"


def _files() -> dict:
    return {p.stem: p for p in sorted(DATA_DIR.glob("*.json"))}


def available() -> list:
    """Names :func:`load` accepts (bundled single-geometry Hamiltonians)."""
    return sorted((k for k in _files() if not k.endswith(_SCAN_SUFFIX)), key=str.lower)


def available_scans() -> list:
    """Names :func:`load_scan` accepts (bundled potential-energy scans)."""
    return sorted(k[: -len(_SCAN_SUFFIX)] for k in _files() if k.endswith(_SCAN_SUFFIX))


@functools.lru_cache(maxsize=None)
def _read(stem: str):
    path = _files()[stem]
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("format") != FORMAT:
        raise ValueError(f"{path.name}: unknown format {doc.get('format')!r} (expected {FORMAT!r})")
    out = []
    for entry in doc["entries"]:
        out.append(_entry(entry, path.name, doc))
    return tuple(out)


def _entry(entry, filename, doc):
    from ..observables import Hamiltonian
    info = MoleculeInfo.from_dict(entry["info"])
    info.provenance = {**info.provenance, "source": f"bundled:{filename}",
                       "generated_by": doc.get("generated_by", "")}
    H = Hamiltonian([(float(c), p) for c, p in entry["terms"]], n_wires=info.n_qubits)
    info.n_terms = len(H)
    return H, info


def _lookup(name: str, scans: bool) -> str:
    if not isinstance(name, str):
        raise TypeError(f"tql.chem.load: name must be a string, got {type(name).__name__}")
    names = available_scans() if scans else available()
    for k in names:
        if k.lower() == name.strip().lower():
            return k
    what = "load_scan" if scans else "load"
    raise ValueError(f"tql.chem.{what}: no bundled {'scan' if scans else 'Hamiltonian'} named {name!r}; "
                     f"available: {', '.join(names)}"
                     + ("" if scans else " (other molecules: tql.chem.molecular_hamiltonian with PySCF)"))


def load(name: str, bond_length: Optional[float] = None):
    """``(Hamiltonian, MoleculeInfo)`` of a bundled molecule (STO-3G, Jordan–Wigner); no PySCF needed.

    ``bond_length`` (Å) picks a point of the molecule's bundled scan (``available_scans()``),
    e.g. ``load("H2", bond_length=1.5)``. The returned Hamiltonian is shared between calls
    (Hamiltonians are immutable); the info is a fresh copy.
    """
    if bond_length is not None:
        key = _lookup(name, scans=True)
        points = _read(key + _SCAN_SUFFIX)
        for H, info in points:
            if abs(info.provenance.get("bond_length", float("nan")) - float(bond_length)) < 1e-6:
                return H, copy.deepcopy(info)
        lengths = ", ".join(f"{i.provenance['bond_length']:g}" for _, i in points)
        raise ValueError(f"tql.chem.load({name!r}, bond_length={bond_length}): not in the bundled scan; bond "
                         f"lengths (Å): {lengths}")
    H, info = _read(_lookup(name, scans=False))[0]
    return H, copy.deepcopy(info)


def load_scan(name: str) -> list:
    """``[(bond_length, Hamiltonian, MoleculeInfo), ...]`` of a bundled scan, by bond length."""
    key = _lookup(name, scans=True)
    points = [(info.provenance["bond_length"], H, copy.deepcopy(info)) for H, info in _read(key + _SCAN_SUFFIX)]
    return sorted(points, key=lambda t: t[0])


# ------------------------------------------------------------------------------------------------
# writing (used by generate_data.py)
def _label(p) -> str:
    letters = {(1, 0): "X", (0, 1): "Z", (1, 1): "Y"}
    x, z = p.x_mask, p.z_mask
    out, w = [], 0
    while (x | z) >> w:
        bits = ((x >> w) & 1, (z >> w) & 1)
        if bits != (0, 0):
            out.append(f"{letters[bits]}{w}")
        w += 1
    return " ".join(out)


def hamiltonian_to_terms(H) -> list:
    """``[[coeff, "X0 Z1"], ...]`` with real coefficients (ValueError if one is complex)."""
    out = []
    for c, p in H.terms:
        c = complex(c)
        if abs(c.imag) > 1e-12:
            raise ValueError(f"hamiltonian_to_terms: coefficient {c} of {_label(p)} is not real")
        out.append([c.real, _label(p)])
    return out


def entry_to_json(H, info: MoleculeInfo, **provenance) -> dict:
    d = info.to_dict()
    d["provenance"] = {**d.get("provenance", {}), **provenance}
    return {"info": d, "terms": hamiltonian_to_terms(H)}
