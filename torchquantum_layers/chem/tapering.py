"""Qubit tapering by Z2 symmetries (Bravyi, Gambetta, Mezzacapo, Temme, arXiv:1701.08213).

A Pauli string τ that commutes with every term of H is a symmetry; k independent commuting ones
τ_1 … τ_k let H act on n − k qubits. With a qubit q_i for each τ_i on which τ_i has Z or Y and
every other τ_j has I or X, the Clifford U_i = (X_{q_i} + τ_i)/√2 (Hermitian and unitary: X_{q_i}
and τ_i anticommute) maps τ_i to X_{q_i}. In H' = U H U (U = U_k … U_1) every term has I or X on
the q_i, so each X_{q_i} may be replaced by its eigenvalue s_i = ±1 (the sector) and q_i dropped.
The ground state of H lies in the sector of its reference state: s_i = ⟨ref|τ_i|ref⟩ for the
Hartree–Fock determinant (an eigenstate of Z-type τ_i, which is what molecular Hamiltonians have
under Jordan–Wigner, parity and Bravyi–Kitaev: electron-number parities and point-group symmetries).

Conjugating one term is one Pauli product: a term P that anticommutes with X_{q_i} becomes
P τ_i X_{q_i}; one that commutes is unchanged (it commutes with U_i). No matrix is built.

    H, info = tql.chem.load("LiH")
    Ht, tapering = tql.chem.z2_taper(H, reference=info.hf_state)     # 12 → 8 qubits
    ref = tapering.reference_bits(info.hf_state)                     # the HF determinant on 8 qubits

Symmetries found: the GF(2) kernel of the terms' symplectic matrix, reduced to a commuting set
whose Z parts are independent (a symmetry with an X part needs ``sector=``; a set member with no
independent Z part is left out, so a pure-X symmetry is not tapered).
"""
from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from ..observables import Hamiltonian, PauliString

__all__ = ["z2_symmetries", "Z2Tapering", "z2_tapering", "z2_taper"]


def _terms(H, what):
    if isinstance(H, PauliString):
        H = Hamiltonian(H)
    if not hasattr(H, "terms") or not hasattr(H, "n_wires"):
        raise TypeError(f"{what}: expected a tql Hamiltonian (a Pauli sum), got {type(H).__name__}")
    return H, [(complex(c), int(p.x_mask), int(p.z_mask)) for c, p in H.terms]


def _bits_of(mask: int, n: int) -> np.ndarray:
    return np.array([(mask >> w) & 1 for w in range(n)], dtype=np.uint8)


def _mask_of(bits) -> int:
    return sum(int(b) << w for w, b in enumerate(bits))


def _rref(m: np.ndarray):
    """Reduced row echelon form over GF(2): (matrix, pivot columns)."""
    m = m.copy() % 2
    pivots, row = [], 0
    for col in range(m.shape[1]):
        hit = np.nonzero(m[row:, col])[0]
        if hit.size == 0:
            continue
        r = row + hit[0]
        m[[row, r]] = m[[r, row]]
        others = np.nonzero(m[:, col])[0]
        others = others[others != row]
        m[others] ^= m[row]
        pivots.append(col)
        row += 1
        if row == m.shape[0]:
            break
    return m[:row], pivots


def _kernel(m: np.ndarray) -> list:
    """A basis of {v : m v = 0} over GF(2)."""
    cols = m.shape[1]
    reduced, pivots = _rref(m) if m.shape[0] else (np.zeros((0, cols), np.uint8), [])
    free = [c for c in range(cols) if c not in pivots]
    basis = []
    for f in free:
        v = np.zeros(cols, dtype=np.uint8)
        v[f] = 1
        for r, p in enumerate(pivots):
            v[p] = reduced[r, f]
        basis.append(v)
    return basis


def _commute(x1, z1, x2, z2) -> bool:
    return (bin(x1 & z2).count("1") + bin(z1 & x2).count("1")) % 2 == 0


def _independent_commuting(cands, n):
    """Greedy commuting subset of the candidates (x, z), then Z parts brought to reduced echelon
    form by multiplying members (products of commuting symmetries are symmetries): returns
    [(x, z, pivot qubit)] with z_i having the pivot and z_j (j ≠ i) not."""
    chosen = []
    for x, z in cands:
        if (x or z) and all(_commute(x, z, x2, z2) for x2, z2 in chosen):
            chosen.append((x, z))
    if not chosen:
        return []
    full = np.array([np.concatenate([_bits_of(z, n), _bits_of(x, n)]) for x, z in chosen], dtype=np.uint8)
    reduced, pivots = _rref(full)
    out = []
    for r, p in enumerate(pivots):
        if p >= n:            # no Z part left: a pure-X symmetry, which X_q cannot pivot on
            break
        out.append((_mask_of(reduced[r, n:]), _mask_of(reduced[r, :n]), p))
    return out


def z2_symmetries(H) -> list:
    """Independent, mutually commuting Pauli strings τ that commute with every term of ``H``,
    each paired with its pivot qubit: ``[(τ, q), ...]`` (τ has Z or Y on q, the others I or X)."""
    H, terms = _terms(H, "z2_symmetries")
    n = int(H.n_wires)
    rows = [np.concatenate([_bits_of(x, n), _bits_of(z, n)]) for _, x, z in terms if x or z]
    m = np.array(rows, dtype=np.uint8).reshape(-1, 2 * n)
    # τ = (a | b) commutes with (x | z) iff x·b + z·a = 0: the kernel of [X | Z] acting on (b; a)
    cands = [(_mask_of(v[n:]), _mask_of(v[:n])) for v in _kernel(m)]
    return [(PauliString.from_masks(x, z, n_wires=n), q) for x, z, q in _independent_commuting(cands, n)]


def _eigenvalue(x: int, z: int, bits: Sequence[int]) -> int:
    if x:
        return 0
    return -1 if bin(z & _mask_of(bits)).count("1") % 2 else 1


@dataclass(frozen=True)
class Z2Tapering:
    """Symmetries ``generators`` (τ_i), their pivot ``qubits`` (q_i) and ``sector`` (s_i = ±1, the
    eigenvalue of τ_i kept) on ``n_qubits``: :meth:`apply` tapers any operator that commutes with
    every τ_i (the Hamiltonian, N, S², …) to the ``n_qubits − k`` qubits :attr:`kept_qubits`
    (renumbered 0, 1, … in their order)."""
    n_qubits: int
    generators: tuple
    qubits: tuple
    sector: tuple

    @property
    def kept_qubits(self) -> tuple:
        return tuple(w for w in range(self.n_qubits) if w not in self.qubits)

    @property
    def n_tapered_qubits(self) -> int:
        return self.n_qubits - len(self.qubits)

    def with_sector(self, sector) -> "Z2Tapering":
        return Z2Tapering(self.n_qubits, self.generators, self.qubits, _check_sector(sector, len(self.qubits)))

    def sectors(self):
        """Every sector, as tapering objects (2^k of them): their spectra together are H's."""
        return [self.with_sector(s) for s in itertools.product((1, -1), repeat=len(self.qubits))]

    def apply(self, op, tol: float = 1e-12) -> Hamiltonian:
        """The tapered operator on :attr:`n_tapered_qubits` qubits."""
        op, terms = _terms(op, "Z2Tapering.apply")
        if int(op.n_wires) > self.n_qubits:
            raise ValueError(f"Z2Tapering.apply: the operator acts on {op.n_wires} qubits, the tapering on "
                             f"{self.n_qubits}")
        gens = [(int(t.x_mask), int(t.z_mask)) for t in self.generators]
        for c, x, z in terms:
            for tau, (gx, gz) in zip(self.generators, gens):
                if not _commute(x, z, gx, gz):
                    raise ValueError(f"Z2Tapering.apply: term {c:g} * {PauliString.from_masks(x, z)} does not commute "
                                     f"with the symmetry {tau}: only symmetric operators can be tapered")
        acc: dict = {}
        for c, x, z in terms:
            p = PauliString.from_masks(x, z)
            for tau, q in zip(self.generators, self.qubits):
                if (int(p.z_mask) >> q) & 1:                 # anticommutes with X_q: P → P τ X_q
                    ph1, p = p.product(tau)
                    ph2, p = p.product(PauliString.from_masks(1 << q, 0))
                    c *= ph1 * ph2
            x, z = int(p.x_mask), int(p.z_mask)
            for q, s in zip(self.qubits, self.sector):
                if (z >> q) & 1:
                    raise AssertionError(f"Z2Tapering: term {p} still has Z or Y on tapered qubit {q}")
                if (x >> q) & 1:
                    c *= s
            nx = nz = 0
            for i, w in enumerate(self.kept_qubits):
                nx |= ((x >> w) & 1) << i
                nz |= ((z >> w) & 1) << i
            acc[(nx, nz)] = acc.get((nx, nz), 0) + c
        scale = max([1.0] + [abs(c) for c in acc.values()])
        out = []
        for (x, z), c in acc.items():
            if abs(c) <= tol * scale:
                continue
            out.append((c.real if abs(c.imag) <= tol * scale else c, PauliString.from_masks(x, z)))
        return Hamiltonian(out, n_wires=self.n_tapered_qubits)

    def reference_bits(self, bits) -> tuple:
        """A basis state of the full register (e.g. the HF determinant) in the tapered frame: the kept
        qubits' bits. It must lie in this sector (every τ_i Z-type with eigenvalue s_i on it)."""
        bits = _check_bits(bits, self.n_qubits, "Z2Tapering.reference_bits")
        for tau, s in zip(self.generators, self.sector):
            e = _eigenvalue(int(tau.x_mask), int(tau.z_mask), bits)
            if e != s:
                why = "is not an eigenstate of" if e == 0 else f"has eigenvalue {e:+d} of"
                raise ValueError(f"Z2Tapering.reference_bits: the state {''.join(map(str, bits))} {why} the "
                                 f"symmetry {tau} (this tapering keeps {s:+d})")
        return tuple(bits[w] for w in self.kept_qubits)


def _check_bits(bits, n, what) -> tuple:
    if isinstance(bits, str):
        bits = [ch for ch in bits if ch in "01"]
    try:
        out = tuple(int(b) for b in bits)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: reference must be {n} bits 0/1, got {bits!r}") from None
    if len(out) != n or any(b not in (0, 1) for b in out):
        raise ValueError(f"{what}: reference must be {n} bits 0/1, got {list(out)}")
    return out


def _check_sector(sector, k) -> tuple:
    try:
        values = list(sector)
    except TypeError:
        raise TypeError(f"z2_tapering: sector must be a sequence of {k} values ±1, got {sector!r}") from None
    if len(values) != k or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v not in (1, -1)
                               for v in values):
        raise ValueError(f"z2_tapering: sector must be {k} values +1 / -1 (one per symmetry), got {values}")
    return tuple(int(v) for v in values)


def z2_tapering(H, reference: Optional[Sequence[int]] = None, sector: Optional[Sequence[int]] = None) -> Z2Tapering:
    """The tapering of ``H`` by its :func:`z2_symmetries`, in the sector of ``reference`` (basis-state
    bits, e.g. ``info.hf_state``: where the ground state of a molecule lies) or the explicit
    ``sector`` (±1 per symmetry, in the order of ``generators``); give one of them."""
    what = "z2_tapering"
    H, _ = _terms(H, what)
    n = int(H.n_wires)
    found = z2_symmetries(H)
    gens, qubits = tuple(t for t, _ in found), tuple(q for _, q in found)
    if (reference is None) == (sector is None):
        raise ValueError(f"{what}: give reference= (bits of the state whose sector to keep, e.g. the HF state) or "
                         f"sector= (±1 per symmetry), {'neither was given' if reference is None else 'not both'}")
    if sector is not None:
        return Z2Tapering(n, gens, qubits, _check_sector(sector, len(gens)))
    bits = _check_bits(reference, n, what)
    values = []
    for tau in gens:
        e = _eigenvalue(int(tau.x_mask), int(tau.z_mask), bits)
        if e == 0:
            raise ValueError(f"{what}: the reference {''.join(map(str, bits))} is not an eigenstate of the symmetry "
                             f"{tau} (it has X or Y parts); give sector= instead")
        values.append(e)
    return Z2Tapering(n, gens, qubits, tuple(values))


def z2_taper(H, reference: Optional[Sequence[int]] = None, sector: Optional[Sequence[int]] = None):
    """``(tapered H, tapering)``: :func:`z2_tapering` then :meth:`Z2Tapering.apply` to ``H``."""
    t = z2_tapering(H, reference=reference, sector=sector)
    return t.apply(H), t
