"""``Molecule``: geometry, charge, spin and active space, validated before any computation.

Nothing here needs PySCF: elements, electron counts, spin and (for STO-3G) the number of orbitals
are known from tables, so bad input fails at once with a ValueError that says what is wrong.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Union

import numpy as np

__all__ = ["Molecule", "ELEMENTS", "atomic_number"]

ELEMENTS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr "
    "Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb "
    "Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf "
    "Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og").split()
_Z = {s.lower(): i + 1 for i, s in enumerate(ELEMENTS)}

# spatial orbitals of the STO-3G minimal basis per element (as in PySCF), H .. Sr
_STO3G_ORBITALS = {**{z: 1 for z in (1, 2)}, **{z: 5 for z in range(3, 11)}, **{z: 9 for z in range(11, 19)},
                   **{z: 13 for z in (19, 20)}, **{z: 18 for z in range(21, 37)}, **{z: 22 for z in (37, 38)}}

MIN_DISTANCE = 0.1
"""Atoms closer than this (Å) are refused as a geometry error."""


def atomic_number(symbol: str) -> int:
    """Z of an element symbol (case-insensitive); ValueError for an unknown symbol."""
    if not isinstance(symbol, str):
        raise TypeError(f"Molecule: an element symbol must be a string, got {symbol!r}")
    z = _Z.get(symbol.strip().lower())
    if z is None:
        raise ValueError(f"Molecule: unknown element {symbol!r}; use a chemical symbol such as 'H', 'Li', 'O'")
    return z


def _parse_geometry(geometry) -> list:
    """-> list of (symbol, (x, y, z)) with canonical symbols and float coordinates (Å)."""
    if isinstance(geometry, str):
        lines = [ln.strip() for part in geometry.splitlines() for ln in part.split(";")]
        lines = [ln for ln in lines if ln]
        if lines and lines[0].isdigit():                 # XYZ file: count, comment, atoms
            count = int(lines[0])
            raw = geometry.strip().splitlines()          # blank lines before the count line are no comment
            body = [ln.strip() for ln in raw[2:] if ln.strip()]
            if len(body) != count:
                raise ValueError(f"Molecule: the XYZ header says {count} atoms but {len(body)} atom lines follow")
            lines = body
        atoms = []
        for ln in lines:
            words = ln.replace(",", " ").split()
            if len(words) != 4:
                raise ValueError(f"Molecule: cannot read atom line {ln!r}: write 'symbol x y z' (Å)")
            try:
                xyz = tuple(float(w) for w in words[1:])
            except ValueError:
                raise ValueError(f"Molecule: coordinates in {ln!r} are not numbers") from None
            atoms.append((words[0], xyz))
    else:
        try:
            items = list(geometry)
        except TypeError:
            raise TypeError(f"Molecule: geometry must be a list of (symbol, (x, y, z)) or an XYZ string, got "
                            f"{type(geometry).__name__}") from None
        atoms = []
        for item in items:
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise ValueError(f"Molecule: geometry entry {item!r} is not (symbol, (x, y, z))")
            sym, xyz = item
            try:
                xyz = tuple(float(v) for v in xyz)
            except (TypeError, ValueError):
                raise ValueError(f"Molecule: coordinates {xyz!r} of {sym!r} are not three numbers") from None
            atoms.append((sym, xyz))
    if not atoms:
        raise ValueError("Molecule: the geometry has no atoms")
    out = []
    for sym, xyz in atoms:
        z = atomic_number(sym)
        if len(xyz) != 3:
            raise ValueError(f"Molecule: atom {sym!r} needs three coordinates, got {len(xyz)}")
        if not all(math.isfinite(v) for v in xyz):
            raise ValueError(f"Molecule: coordinates {xyz} of atom {sym!r} are not finite")
        out.append((ELEMENTS[z - 1], tuple(float(v) for v in xyz)))
    xyz = np.array([c for _, c in out])
    if len(out) > 1:
        d = np.linalg.norm(xyz[:, None] - xyz[None], axis=-1) + np.eye(len(out)) * 1e9
        i, j = np.unravel_index(np.argmin(d), d.shape)
        if d[i, j] < MIN_DISTANCE:
            raise ValueError(f"Molecule: atoms {i} ({out[i][0]}) and {j} ({out[j][0]}) are {d[i, j]:.3g} Å apart; "
                             f"coordinates are in Å and atoms may not be closer than {MIN_DISTANCE} Å")
    return out


def _int(value, name) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"Molecule: {name} must be an int, got {value!r}")
    return int(value)


def _formula(symbols) -> str:
    counts: dict = {}
    for s in symbols:
        counts[s] = counts.get(s, 0) + 1
    return "".join(f"{s}{c if c > 1 else ''}" for s, c in counts.items())


class Molecule:
    """A molecule for :func:`~torchquantum_layers.chem.molecular_hamiltonian`.

    Args:
        geometry: a list of ``(symbol, (x, y, z))`` in Å, or an XYZ string (``"H 0 0 0; H 0 0 0.74"``,
            one atom per line, or a whole .xyz file with its count and comment lines).
        basis: a PySCF basis name (default ``"sto-3g"``).
        charge, multiplicity: total charge and 2S + 1.
        active_electrons: electrons on the qubits (default: all); the others fill the lowest
            orbitals as a frozen core (their energy goes into the constant term).
        active_orbitals: the number of active spatial orbitals above the core (default: all the
            rest), or a list of orbital indices (0-based, by orbital energy) to make active.
        name: label used in reports (default: the formula in order of appearance).

    Raises ValueError on unknown elements, impossible charge / multiplicity combinations (for
    example an odd number of electrons with multiplicity 1) and inconsistent active spaces.
    """

    def __init__(self, geometry, basis: str = "sto-3g", charge: int = 0, multiplicity: int = 1,
                 active_electrons: Optional[int] = None,
                 active_orbitals: Optional[Union[int, Sequence[int]]] = None, name: Optional[str] = None):
        self.atoms = _parse_geometry(geometry)
        if not isinstance(basis, str) or not basis.strip():
            raise TypeError(f"Molecule: basis must be a basis-set name such as 'sto-3g', got {basis!r}")
        self.basis = basis.strip()
        self.charge = _int(charge, "charge")
        self.multiplicity = _int(multiplicity, "multiplicity")
        if self.multiplicity < 1:
            raise ValueError(f"Molecule: multiplicity (2S+1) must be >= 1, got {multiplicity}")
        n_e = sum(atomic_number(s) for s, _ in self.atoms) - self.charge
        if n_e < 1:
            raise ValueError(f"Molecule {self._label(name)}: charge {self.charge} leaves {n_e} electrons")
        self.n_electrons = n_e
        unpaired = self.multiplicity - 1
        if (n_e - unpaired) % 2 or unpaired > n_e:
            kind = "odd" if n_e % 2 else "even"
            raise ValueError(f"Molecule {self._label(name)}: {n_e} electrons ({kind}) cannot have multiplicity "
                             f"{self.multiplicity} ({unpaired} unpaired); an {kind} electron count needs an "
                             f"{'even' if n_e % 2 else 'odd'} multiplicity (e.g. "
                             f"{2 if n_e % 2 else 1}), or change the charge")
        self.n_alpha = (n_e + unpaired) // 2
        self.n_beta = (n_e - unpaired) // 2
        self.name = name if name is not None else _formula([s for s, _ in self.atoms])
        self._n_orbitals = None
        self._set_active_space(active_electrons, active_orbitals)

    def _label(self, name=None) -> str:
        return name or _formula([s for s, _ in self.atoms])

    # -- description --------------------------------------------------------------------------
    @property
    def symbols(self) -> list:
        return [s for s, _ in self.atoms]

    @property
    def coordinates(self) -> np.ndarray:
        """(n_atoms, 3) in Å."""
        return np.array([c for _, c in self.atoms], dtype=np.float64)

    @property
    def geometry(self) -> list:
        return [(s, tuple(c)) for s, c in self.atoms]

    def xyz(self) -> str:
        return "; ".join(f"{s} {x:.10g} {y:.10g} {z:.10g}" for s, (x, y, z) in self.atoms)

    @property
    def n_orbitals(self) -> int:
        """Spatial orbitals of the basis (from a table for STO-3G; otherwise PySCF builds the basis)."""
        if self._n_orbitals is None:
            known = None
            if self.basis.lower().replace("-", "") == "sto3g":
                counts = [_STO3G_ORBITALS.get(atomic_number(s)) for s in self.symbols]
                if None not in counts:
                    known = sum(counts)
            if known is None:
                known = int(self.to_pyscf().nao)
            self._n_orbitals = known
        return self._n_orbitals

    def _known_orbitals(self) -> Optional[int]:
        """n_orbitals if it needs no PySCF, else None."""
        if self._n_orbitals is not None:
            return self._n_orbitals
        if self.basis.lower().replace("-", "") == "sto3g":
            return self.n_orbitals if all(atomic_number(s) in _STO3G_ORBITALS for s in self.symbols) else None
        return None

    @property
    def n_core(self) -> int:
        """Frozen doubly occupied orbitals."""
        return (self.n_electrons - self.active_electrons) // 2

    @property
    def n_active_orbitals(self) -> int:
        if self._active_list is not None:
            return len(self._active_list)
        if self._active_count is not None:
            return self._active_count
        return self.n_orbitals - self.n_core

    @property
    def n_qubits(self) -> int:
        """Spin orbitals of the active space (qubits under Jordan–Wigner)."""
        return 2 * self.n_active_orbitals

    def orbital_indices(self):
        """(core, active): tuples of spatial-orbital indices (0-based, by orbital energy)."""
        if self._active_list is not None:
            active = self._active_list
            core = tuple(i for i in range(self.n_orbitals) if i not in active)[:self.n_core]
        else:
            core = tuple(range(self.n_core))
            active = tuple(range(self.n_core, self.n_core + self.n_active_orbitals))
        return core, active

    # -- active space ---------------------------------------------------------------------------
    def _set_active_space(self, active_electrons, active_orbitals):
        label = self.name
        if active_electrons is None:
            active_electrons = self.n_electrons
        active_electrons = _int(active_electrons, "active_electrons")
        if not 1 <= active_electrons <= self.n_electrons:
            raise ValueError(f"Molecule {label}: active_electrons={active_electrons} must be between 1 and the "
                             f"{self.n_electrons} electrons of the molecule")
        core_e = self.n_electrons - active_electrons
        if core_e % 2:
            raise ValueError(f"Molecule {label}: active_electrons={active_electrons} leaves {core_e} core "
                             f"electrons; the frozen core must be doubly occupied (an even number)")
        n_core = core_e // 2
        if n_core > self.n_beta:
            raise ValueError(f"Molecule {label}: a frozen core of {n_core} doubly occupied orbitals exceeds the "
                             f"{self.n_beta} doubly occupied orbitals of multiplicity {self.multiplicity}")
        self.active_electrons = active_electrons
        self.active_alpha = self.n_alpha - n_core
        self.active_beta = self.n_beta - n_core
        self._active_list = None
        self._active_count = None
        total = self._known_orbitals()
        if active_orbitals is None:
            if total is not None:
                self._check_fit(total - n_core, total, label)
            return
        if isinstance(active_orbitals, numbers.Integral) and not isinstance(active_orbitals, bool):
            k = int(active_orbitals)
            if k < 1:
                raise ValueError(f"Molecule {label}: active_orbitals must be >= 1, got {k}")
            self._active_count = k
            if total is not None:
                if n_core + k > total:
                    raise ValueError(f"Molecule {label}: {k} active orbitals above a core of {n_core} need "
                                     f"{n_core + k} orbitals, but the {self.basis} basis has only {total}")
            self._check_fit(k, total, label)
            return
        try:
            idx = tuple(_int(i, "active orbital index") for i in active_orbitals)
        except TypeError:
            raise TypeError(f"Molecule {label}: active_orbitals must be an int or a list of orbital indices, got "
                            f"{active_orbitals!r}") from None
        if not idx:
            raise ValueError(f"Molecule {label}: active_orbitals is empty")
        if len(set(idx)) != len(idx) or min(idx) < 0:
            raise ValueError(f"Molecule {label}: active orbital indices {idx} must be distinct and >= 0")
        if total is not None and max(idx) >= total:
            raise ValueError(f"Molecule {label}: active orbital {max(idx)} does not exist: the {self.basis} basis "
                             f"has {total} orbitals (indices 0..{total - 1})")
        self._active_list = tuple(sorted(idx))
        core = [i for i in range(max(idx) + n_core + 1) if i not in idx][:n_core]
        if any(i >= self.n_beta for i in core):
            raise ValueError(f"Molecule {label}: with active orbitals {idx} the frozen core would include orbital "
                             f"{max(core)}, which is not doubly occupied in the reference")
        # every orbital occupied in the reference must be frozen or active, or the active-space
        # "Hartree–Fock" determinant (hf_state, hf_energy) would not be the Hartree–Fock state
        dropped = [i for i in range(self.n_alpha) if i not in idx and i not in core]
        if dropped:
            raise ValueError(f"Molecule {label}: with active orbitals {idx} and {active_electrons} active electrons, "
                             f"orbital(s) {dropped} occupied in the Hartree–Fock reference are neither in the frozen "
                             f"core {tuple(core)} nor active; add them to active_orbitals or freeze them "
                             f"(fewer active_electrons)")
        self._check_fit(len(idx), total, label)

    def _check_fit(self, k, total, label):
        if self.active_alpha > k or self.active_beta > k:
            raise ValueError(f"Molecule {label}: {self.active_alpha} alpha and {self.active_beta} beta active "
                             f"electrons do not fit in {k} active orbitals")

    # -- PySCF ----------------------------------------------------------------------------------
    def to_pyscf(self):
        """The ``pyscf.gto.Mole`` (built: basis functions known; no integrals computed)."""
        from .hamiltonian import _require_pyscf
        _require_pyscf("Molecule.to_pyscf")
        from pyscf import gto
        try:
            return gto.M(atom=[(s, c) for s, c in self.atoms], basis=self.basis, charge=self.charge,
                         spin=self.multiplicity - 1, unit="Angstrom", verbose=0)
        except Exception as err:       # BasisNotFoundError, KeyError, RuntimeError … from PySCF
            if "basis" in str(err).lower() or type(err).__name__ == "BasisNotFoundError":
                raise ValueError(f"Molecule {self.name}: PySCF has no basis {self.basis!r} for "
                                 f"{sorted(set(self.symbols))}: {err}") from None
            raise

    def __repr__(self) -> str:
        extra = ""
        if self.active_electrons != self.n_electrons or self._active_count or self._active_list:
            extra = f", active_electrons={self.active_electrons}, active_orbitals=" + \
                    (repr(self._active_list) if self._active_list else repr(self._active_count))
        return (f"Molecule({self.name!r}, basis={self.basis!r}, charge={self.charge}, "
                f"multiplicity={self.multiplicity}{extra})")
