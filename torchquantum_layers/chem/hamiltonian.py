"""Molecular qubit Hamiltonians: PySCF integrals → second quantisation → our own fermion-to-qubit map.

PySCF (the optional extra ``chem``) is imported only inside :func:`molecular_hamiltonian`; the
bundled Hamiltonians (:func:`~torchquantum_layers.chem.load`) need nothing beyond the core.

Second quantisation with spatial molecular-orbital integrals ``h[p, q]`` and ``(pq|rs)``
(chemists' notation) on spin orbitals ``2p + σ`` (interleaved α, β as PennyLane / OpenFermion)::

    H = E_core + Σ_{pq,σ} h_pq a†_{pσ} a_{qσ} + ½ Σ_{pqrs,στ} (pq|rs) a†_{pσ} a†_{rτ} a_{sτ} a_{qσ}

A frozen core C (doubly occupied) adds ``Σ_{i∈C} 2 h_ii + Σ_{i,j∈C} [2 (ii|jj) − (ij|ji)]`` to
the constant and ``Σ_{i∈C} [2 (pq|ii) − (pi|iq)]`` to the active one-body integrals.
"""
from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Optional

import numpy as np

from .fermion import FermionOperator, _check_tol, _resolve_mapping, map_arrays, occupation_to_qubits, taper
from .molecule import Molecule

__all__ = ["MoleculeInfo", "molecular_hamiltonian", "qubit_hamiltonian", "fermionic_hamiltonian",
           "spin_orbital_terms", "hf_occupations", "BUNDLED_HINT"]

BUNDLED_HINT = "H2, LiH, BeH2, H2O (see tql.chem.available())"

STATE_BYTES = 16          # complex128 amplitude
MEMORY_STATES = 4         # a VQE step keeps a few states alive (state, adjoint bra, gradients)


def _require_pyscf(what: str = "molecular_hamiltonian"):
    try:
        import pyscf  # noqa: F401
        from pyscf import ao2mo, fci, gto, scf  # noqa: F401
    except ImportError as err:
        try:
            from .data import available
            names = ", ".join(available())
        except Exception:             # pragma: no cover - data module broken
            names = BUNDLED_HINT
        raise ImportError(
            f"{what} needs PySCF for the molecular integrals, and it is not installed ({err}). Install the "
            f"optional extra: pip install 'torchquantum-layers[chem]' (or pip install pyscf). Without PySCF, "
            f"use a bundled Hamiltonian: tql.chem.load(name) for name in: {names}") from err


@dataclass
class MoleculeInfo:
    """What goes with a molecular qubit Hamiltonian. Energies in Hartree, lengths in Å.

    ``n_electrons`` counts the active electrons (those on the qubits); ``hf_state`` is the
    Hartree–Fock basis state as bits, qubit 0 first (under JW: the first ``n_electrons`` qubits
    are 1 for a closed shell). ``core_energy`` is the constant of H: nuclear repulsion plus the
    frozen-core energy. ``fci_energy`` is the exact ground energy of H in the molecule's
    (N_α, N_β) sector, i.e. FCI in the full space or CASCI in an active space (None if skipped).
    """
    name: str
    n_qubits: int
    n_electrons: int
    hf_state: tuple
    nuclear_repulsion: float
    hf_energy: float
    fci_energy: Optional[float]
    core_energy: float
    n_orbitals: int
    n_alpha: int
    n_beta: int
    mapping: str = "jordan_wigner"
    two_qubit_reduction: bool = False
    spin_order: str = "interleaved"
    basis: str = "sto-3g"
    charge: int = 0
    multiplicity: int = 1
    geometry: list = field(default_factory=list)
    active_orbitals: tuple = ()
    frozen_orbitals: tuple = ()
    n_terms: int = 0
    provenance: dict = field(default_factory=dict)

    @property
    def hf_bitstring(self) -> str:
        return "".join(str(b) for b in self.hf_state)

    @property
    def correlation_energy(self) -> Optional[float]:
        return None if self.fci_energy is None else self.fci_energy - self.hf_energy

    def hf_basis_state(self, batch: int = 1, dtype=None, device=None):
        """The Hartree–Fock state as a ``(batch, 2**n_qubits)`` tensor."""
        from ..kernels.state import basis_state
        return basis_state(list(self.hf_state), batch=batch, dtype=dtype, device=device)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hf_state"] = self.hf_bitstring
        d["geometry"] = [[s, list(c)] for s, c in self.geometry]
        d["active_orbitals"] = list(self.active_orbitals)
        d["frozen_orbitals"] = list(self.frozen_orbitals)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "MoleculeInfo":
        """The inverse of :meth:`to_dict` (unknown keys are ignored; keys with defaults may be absent)."""
        if not isinstance(d, Mapping):
            raise TypeError(f"MoleculeInfo.from_dict: expected a dict, got {type(d).__name__}")
        d = dict(d)
        required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"MoleculeInfo.from_dict: missing key{'s' if len(missing) > 1 else ''} "
                             f"{', '.join(map(repr, missing))} (required: {', '.join(required)})")
        names = set(cls.__dataclass_fields__)
        d = {k: v for k, v in d.items() if k in names}
        bits = d["hf_state"]
        try:
            bits = tuple(int(b) for b in bits)
        except (TypeError, ValueError):
            bits = None
        if bits is None or any(b not in (0, 1) for b in bits):
            raise ValueError(f"MoleculeInfo.from_dict: hf_state must be bits 0/1 (a string such as '1100' or a "
                             f"list), got {d['hf_state']!r}")
        d["hf_state"] = bits
        d["geometry"] = [(s, tuple(c)) for s, c in d.get("geometry", [])]
        d["active_orbitals"] = tuple(d.get("active_orbitals", ()))
        d["frozen_orbitals"] = tuple(d.get("frozen_orbitals", ()))
        return cls(**d)


# ------------------------------------------------------------------------------------------------
# integrals -> second-quantised terms -> qubits
def _spin_mode(p, sigma, n_spatial, spin_order):
    return 2 * p + sigma if spin_order == "interleaved" else p + sigma * n_spatial


def spin_orbital_terms(h1: np.ndarray, eri: np.ndarray, spin_order: str = "interleaved", tol: float = 0.0):
    """Arrays of the one- and two-body products of the molecular Hamiltonian.

    Returns ``[(modes (M1, 2), actions, coeffs), (modes (M2, 4), actions, coeffs)]`` for
    :func:`~torchquantum_layers.chem.fermion.map_arrays`: ``h_pq a†_{pσ} a_{qσ}`` and
    ``½ (pq|rs) a†_{pσ} a†_{rτ} a_{sτ} a_{qσ}`` (products that vanish identically are left out).
    """
    h1 = np.asarray(h1, dtype=np.float64)
    eri = np.asarray(eri, dtype=np.float64)
    n = h1.shape[0]
    if h1.shape != (n, n) or eri.shape != (n, n, n, n):
        raise ValueError(f"spin_orbital_terms: need h1 (n, n) and eri (n, n, n, n), got {h1.shape}, {eri.shape}")
    if spin_order not in ("interleaved", "block"):
        raise ValueError(f"spin_order must be 'interleaved' or 'block', got {spin_order!r}")
    p, q = np.nonzero(np.abs(h1) > tol)
    one_modes, one_coef = [], []
    for s in (0, 1):
        one_modes.append(np.stack([_spin_mode(p, s, n, spin_order), _spin_mode(q, s, n, spin_order)], axis=1))
        one_coef.append(h1[p, q])
    one = (np.concatenate(one_modes), np.tile([1, 0], (2 * len(p), 1)), np.concatenate(one_coef))
    p, q, r, s_ = np.nonzero(np.abs(eri) > tol)
    two_modes, two_coef = [], []
    for sig in (0, 1):
        for tau in (0, 1):
            P, Q = _spin_mode(p, sig, n, spin_order), _spin_mode(q, sig, n, spin_order)
            R, S = _spin_mode(r, tau, n, spin_order), _spin_mode(s_, tau, n, spin_order)
            keep = (P != R) & (Q != S)          # a†_P a†_P = 0 = a_Q a_Q
            two_modes.append(np.stack([P, R, S, Q], axis=1)[keep])
            two_coef.append(0.5 * eri[p, q, r, s_][keep])
    modes = np.concatenate(two_modes)
    two = (modes, np.tile([1, 1, 0, 0], (len(modes), 1)), np.concatenate(two_coef))
    return [one, two]


def qubit_hamiltonian(h1, eri, constant: float = 0.0, mapping: str = "jordan_wigner",
                      spin_order: str = "interleaved", tol: float = 1e-12):
    """Qubit Hamiltonian of spatial-orbital integrals ``h1 (n, n)``, ``eri (n, n, n, n)`` (chemists'
    notation, real orbitals) and a constant, on ``2 n`` qubits; vectorised over all terms."""
    tol = _check_tol(tol, "qubit_hamiltonian")
    n = np.asarray(h1).shape[0]
    groups = spin_orbital_terms(h1, eri, spin_order)
    return map_arrays(groups, 2 * n, mapping, float(constant), tol)


def fermionic_hamiltonian(h1, eri, constant: float = 0.0, spin_order: str = "interleaved") -> FermionOperator:
    """The same operator as a :class:`FermionOperator` (for inspection; slower than the arrays)."""
    out = {(): float(constant)} if constant else {}
    for modes, actions, coeffs in spin_orbital_terms(h1, eri, spin_order, tol=0.0):
        for row, act, c in zip(modes.tolist(), actions.tolist(), coeffs.tolist()):
            key = tuple(zip(row, act))
            out[key] = out.get(key, 0.0) + c
    return FermionOperator._from_dict(out)


def hf_occupations(n_orbitals: int, n_alpha: int, n_beta: int, spin_order: str = "interleaved") -> list:
    """Occupation numbers of the Hartree–Fock determinant on the 2·n_orbitals spin orbitals."""
    occ = [0] * (2 * n_orbitals)
    for i in range(n_alpha):
        occ[_spin_mode(i, 0, n_orbitals, spin_order)] = 1
    for i in range(n_beta):
        occ[_spin_mode(i, 1, n_orbitals, spin_order)] = 1
    return occ


# ------------------------------------------------------------------------------------------------
def _check_memory(n_qubits: int, n_orbitals_total: int, label: str, active_hint: str):
    from ..kernels.state import _available_bytes
    import torch
    if n_qubits > 62:
        raise ValueError(f"molecular_hamiltonian: {label} needs {n_qubits} qubits; the limit is 62 "
                         f"(and a state vector is practical up to ~30). {active_hint}")
    need = MEMORY_STATES * STATE_BYTES * 2 ** n_qubits + 8 * n_orbitals_total ** 4
    avail = _available_bytes(torch.device("cpu"))
    if avail is not None and need > avail:
        raise ValueError(f"molecular_hamiltonian: {label} needs {n_qubits} qubits: simulating it takes about "
                         f"{need / 2 ** 30:.3g} GiB ({MEMORY_STATES} complex128 states of 2^{n_qubits} amplitudes), "
                         f"more than the {avail / 2 ** 30:.3g} GiB available. {active_hint} "
                         f"(or pass check_memory=False to build the Pauli sum anyway)")


def molecular_hamiltonian(mol: Molecule, mapping: str = "jordan_wigner", two_qubit_reduction: bool = False,
                          fci: bool = True, tol: float = 1e-12, check_memory: bool = True,
                          conv_tol: float = 1e-11):
    """``(Hamiltonian, MoleculeInfo)`` of a :class:`Molecule` from PySCF integrals.

    ``mapping``: ``"jordan_wigner"`` (default; qubit j = spin orbital j, interleaved α/β,
    occupied = |1⟩), ``"bravyi_kitaev"`` or ``"parity"``. ``two_qubit_reduction=True`` (parity only)
    orders spin orbitals in blocks (all α, then all β), so qubits n/2−1 and n−1 hold the parities
    of N_α and N, and removes them: n − 2 qubits. Terms with |coeff| <= ``tol`` are dropped.
    ``fci=False`` skips the FCI/CASCI reference energy. Runs restricted (closed shell) or
    restricted open-shell Hartree–Fock; the orbitals are its canonical orbitals.
    """
    if not isinstance(mol, Molecule):
        raise TypeError(f"molecular_hamiltonian: expected a tql.chem.Molecule, got {type(mol).__name__}")
    mapping = _resolve_mapping(mapping)
    tol = _check_tol(tol, "molecular_hamiltonian")
    if two_qubit_reduction and mapping != "parity":
        raise ValueError(f"molecular_hamiltonian: two_qubit_reduction needs mapping='parity', got {mapping!r}")
    hint = ("Choose a smaller active space, e.g. Molecule(..., active_electrons=2, active_orbitals=4).")
    known = mol._known_orbitals()
    if check_memory and known is not None:
        _check_memory(mol.n_qubits, known, mol.name, hint)
    _require_pyscf()
    import pyscf
    from pyscf import ao2mo, fci as pyscf_fci, scf

    pmol = mol.to_pyscf()
    nao = int(pmol.nao)
    core, active = mol.orbital_indices()
    if (mol._active_count or 0) + mol.n_core > nao or any(i >= nao for i in active):
        raise ValueError(f"molecular_hamiltonian: the active space of {mol.name} ({len(active)} orbitals above a "
                         f"core of {mol.n_core}) is larger than the {nao} orbitals of the {mol.basis} basis")
    if check_memory:
        _check_memory(2 * len(active), nao, mol.name, hint)

    mf = scf.RHF(pmol) if mol.multiplicity == 1 else scf.ROHF(pmol)
    mf.conv_tol = conv_tol
    mf.verbose = 0
    mf.kernel()
    if not mf.converged:
        mf = mf.newton()
        mf.kernel()
    if not mf.converged:
        import warnings
        warnings.warn(f"molecular_hamiltonian: Hartree–Fock did not converge for {mol.name}; integrals use the "
                      f"last orbitals")
    mo = mf.mo_coeff
    h1 = mo.T @ mf.get_hcore() @ mo
    eri = ao2mo.restore(1, ao2mo.kernel(pmol, mo), nao)
    e_nuc = float(pmol.energy_nuc())
    c, a = list(core), list(active)
    e_core = e_nuc
    h_act = h1[np.ix_(a, a)].copy()
    if c:
        e_core += 2 * np.einsum("ii->", h1[np.ix_(c, c)])
        jj = np.einsum("iijj->ij", eri[np.ix_(c, c, c, c)])
        kk = np.einsum("ijji->ij", eri[np.ix_(c, c, c, c)])
        e_core += float(np.sum(2 * jj - kk))
        h_act += np.einsum("pqii->pq", 2 * eri[np.ix_(a, a, c, c)]) - np.einsum("piiq->pq", eri[np.ix_(a, c, c, a)])
    eri_act = np.ascontiguousarray(eri[np.ix_(a, a, a, a)])
    n_act = len(a)
    na, nb = mol.active_alpha, mol.active_beta

    e_fci = None
    if fci:
        solver = pyscf_fci.direct_spin1.FCI()
        solver.conv_tol = 1e-12
        solver.max_cycle = 400
        solver.verbose = 0
        e_fci, _ = solver.kernel(h_act, eri_act, n_act, (na, nb), ecore=e_core)
        e_fci = float(e_fci)

    spin_order = "block" if two_qubit_reduction else "interleaved"
    H = qubit_hamiltonian(h_act, eri_act, e_core, mapping, spin_order, tol)
    occ = hf_occupations(n_act, na, nb, spin_order)
    hf = occupation_to_qubits(occ, mapping)
    n_qubits = 2 * n_act
    if two_qubit_reduction:
        fixed = [n_act - 1, 2 * n_act - 1]
        values = [na % 2, (na + nb) % 2]
        H = taper(H, fixed, values)
        hf = tuple(b for i, b in enumerate(hf) if i not in fixed)
        n_qubits -= 2
    info = MoleculeInfo(
        name=mol.name, n_qubits=n_qubits, n_electrons=na + nb, hf_state=tuple(hf), nuclear_repulsion=e_nuc,
        hf_energy=float(mf.e_tot), fci_energy=e_fci, core_energy=float(e_core), n_orbitals=n_act,
        n_alpha=na, n_beta=nb, mapping=mapping, two_qubit_reduction=bool(two_qubit_reduction),
        spin_order=spin_order, basis=mol.basis, charge=mol.charge, multiplicity=mol.multiplicity,
        geometry=mol.geometry, active_orbitals=tuple(a), frozen_orbitals=tuple(c), n_terms=len(H),
        provenance={"source": "pyscf", "pyscf_version": pyscf.__version__,
                    "scf": type(mf).__name__.replace("SymAdaptedR", "R"), "scf_converged": bool(mf.converged),
                    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                    "tolerance": tol})
    return H, info
