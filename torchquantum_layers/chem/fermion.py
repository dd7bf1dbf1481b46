"""Fermionic operators and their exact maps to qubit operators (Jordan–Wigner, parity, Bravyi–Kitaev).

A :class:`FermionOperator` is a sum of products of ladder operators, stored as
``{((p, 1), (q, 0)): coeff}`` (OpenFermion's convention: action 1 = creation a†_p, 0 = annihilation
a_q; products read left to right). ``FermionOperator("3^ 1", 0.5)`` is 0.5 a†_3 a_1.

All three mappings are one construction. An encoding is an invertible binary matrix A: qubit i
stores ``q_i = Σ_k A[i, k] n_k (mod 2)`` of the occupation numbers ``n_k`` (JW: A = I; parity:
``A[i, k] = [k <= i]``; Bravyi–Kitaev: the Fenwick tree, ``A[i, k] = [i & (i + 1) <= k <= i]``).
On an occupation basis state ``a†_j |n⟩ = (1 - n_j) (-1)^{Σ_{k<j} n_k} |n + e_j⟩``. In qubit
variables the flip ``n → n ⊕ e_j`` is ``X`` on column j of A (mask ``c_j``), the sign is ``Z`` on the
row ``π_j A⁻¹`` (π_j = indicator of modes k < j; mask ``p_j``) and ``(1 - n_j) = (1 + Z_{o_j}) / 2``
with ``o_j`` = row j of A⁻¹. Hence, in the form ``X^x Z^z``::

    a†_j = ½ X^{c_j} Z^{p_j} + ½ X^{c_j} Z^{p_j ⊕ o_j},        a_j = (a†_j)†.

A product of L ladder operators is then 2^L products of ``X^x Z^z`` factors, each a sign
``(X^{x1} Z^{z1})(X^{x2} Z^{z2}) = (-1)^{|z1 ∧ x2|} X^{x1⊕x2} Z^{z1⊕z2}``, and finally
``X^x Z^z = (-i)^{|x∧z|} P(x, z)`` with ``P`` the Hermitian Pauli string of the observables module.
Every phase is an exact power of i and every magnitude a power of ½, so the map is exact; it is
vectorised with NumPy over all terms of one length at once (masks are int64: at most 62 modes).
"""
from __future__ import annotations

import numbers
import re
from typing import Iterable, Optional, Union

import numpy as np

__all__ = ["FermionOperator", "jordan_wigner", "parity", "bravyi_kitaev", "fermion_to_qubit",
           "encoding_matrix", "occupation_to_qubits", "taper", "map_arrays", "MAPPINGS"]

MAPPINGS = ("jordan_wigner", "parity", "bravyi_kitaev")
_ALIASES = {"jw": "jordan_wigner", "jordan-wigner": "jordan_wigner", "jordanwigner": "jordan_wigner",
            "bk": "bravyi_kitaev", "bravyi-kitaev": "bravyi_kitaev", "bravyikitaev": "bravyi_kitaev"}
MAX_MODES = 62

Number = Union[int, float, complex]
_TERM_RE = re.compile(r"^(\d+)(\^?)$")


def _check_mode(p, what) -> int:
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError(f"{what}: mode index {p!r} is not an int")
    p = int(p)
    if p < 0:
        raise ValueError(f"{what}: mode index {p} is negative")
    if p >= MAX_MODES:
        raise ValueError(f"{what}: mode index {p} exceeds the limit of {MAX_MODES} modes")
    return p


def _parse_term(term, what="FermionOperator") -> tuple:
    if isinstance(term, str):
        out = []
        for word in term.split():
            m = _TERM_RE.match(word)
            if m is None:
                raise ValueError(f"{what}: cannot read {word!r} in {term!r}: write a mode index, with ^ "
                                 f"for a creation operator, e.g. '3^ 1'")
            out.append((_check_mode(int(m.group(1)), what), 1 if m.group(2) else 0))
        return tuple(out)
    try:
        items = list(term)
    except TypeError:
        raise TypeError(f"{what}: a term is a string like '3^ 1' or a sequence of (mode, action) pairs, got "
                        f"{term!r}") from None
    out = []
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise TypeError(f"{what}: {item!r} in {term!r} is not a (mode, action) pair")
        p, a = item
        if a not in (0, 1) or isinstance(a, float):
            raise ValueError(f"{what}: action {a!r} in {term!r} must be 1 (creation) or 0 (annihilation)")
        out.append((_check_mode(p, what), int(a)))
    return tuple(out)


def _as_number(c, what) -> Number:
    if isinstance(c, bool) or not isinstance(c, numbers.Number):
        if hasattr(c, "item") and getattr(c, "ndim", 1) == 0:
            c = c.item()
        else:
            raise TypeError(f"{what}: coefficient {c!r} is not a number")
    c = complex(c)
    if not (np.isfinite(c.real) and np.isfinite(c.imag)):
        raise ValueError(f"{what}: coefficient {c!r} is not finite")
    return c.real if c.imag == 0 else c


class FermionOperator:
    """A sum of products of fermionic ladder operators (OpenFermion-like, no dependency).

    ``FermionOperator("3^ 1", 0.5)`` is ``0.5 a†_3 a_1``; ``FermionOperator(((3, 1), (1, 0)), 0.5)``
    is the same; ``FermionOperator()`` is zero and ``FermionOperator("")`` the identity. Sums,
    differences, products (operator products, not normal ordered) and scalars work as expected;
    :meth:`dagger` is the Hermitian conjugate. :meth:`to_qubit` (or :func:`jordan_wigner`,
    :func:`parity`, :func:`bravyi_kitaev`) gives the qubit :class:`~torchquantum_layers.observables.Hamiltonian`.
    """

    __slots__ = ("terms",)

    def __init__(self, term=None, coeff: Number = 1.0):
        self.terms: dict = {}
        if term is None:
            return
        key = _parse_term(term)
        c = _as_number(coeff, "FermionOperator")
        if c != 0:
            self.terms[key] = c

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def _from_dict(cls, d) -> "FermionOperator":
        out = cls()
        out.terms = {k: v for k, v in d.items() if v != 0}
        return out

    @classmethod
    def creation(cls, p: int) -> "FermionOperator":
        return cls(((p, 1),))

    @classmethod
    def annihilation(cls, p: int) -> "FermionOperator":
        return cls(((p, 0),))

    @classmethod
    def number(cls, p: Optional[int] = None, n_modes: Optional[int] = None) -> "FermionOperator":
        """``n_p = a†_p a_p``; with ``p=None``, the total number operator over ``n_modes`` modes."""
        if p is not None:
            return cls(((p, 1), (p, 0)))
        if n_modes is None:
            raise ValueError("FermionOperator.number: give a mode p or n_modes for the total number")
        return cls._from_dict({((q, 1), (q, 0)): 1.0 for q in range(n_modes)})

    @classmethod
    def identity(cls, coeff: Number = 1.0) -> "FermionOperator":
        return cls((), coeff)

    # -- description --------------------------------------------------------------------------
    @property
    def n_modes(self) -> int:
        """1 + the largest mode index (0 for a constant)."""
        return max((p for t in self.terms for p, _ in t), default=-1) + 1

    def __len__(self) -> int:
        return len(self.terms)

    def __iter__(self):
        return iter(self.terms.items())

    def __repr__(self) -> str:
        if not self.terms:
            return "FermionOperator(0)"
        parts = []
        for t, c in list(self.terms.items())[:12]:
            label = " ".join(f"{p}{'^' if a else ''}" for p, a in t) or "1"
            parts.append(f"{c!r} [{label}]")
        more = f" + … ({len(self.terms) - 12} more)" if len(self.terms) > 12 else ""
        return "FermionOperator(" + " + ".join(parts) + more + ")"

    # -- algebra ------------------------------------------------------------------------------
    def _coerce(self, other):
        if isinstance(other, FermionOperator):
            return other
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return FermionOperator.identity(other)
        return NotImplemented

    def __add__(self, other):
        other = self._coerce(other)
        if other is NotImplemented:
            return other
        d = dict(self.terms)
        for k, v in other.terms.items():
            d[k] = d.get(k, 0) + v
        return FermionOperator._from_dict(d)

    __radd__ = __add__

    def __neg__(self):
        return FermionOperator._from_dict({k: -v for k, v in self.terms.items()})

    def __sub__(self, other):
        other = self._coerce(other)
        if other is NotImplemented:
            return other
        return self + (-other)

    def __rsub__(self, other):
        other = self._coerce(other)
        if other is NotImplemented:
            return other
        return other + (-self)

    def __mul__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            c = _as_number(other, "FermionOperator *")
            return FermionOperator._from_dict({k: v * c for k, v in self.terms.items()})
        if not isinstance(other, FermionOperator):
            return NotImplemented
        d = {}
        for k1, v1 in self.terms.items():
            for k2, v2 in other.terms.items():
                k = k1 + k2
                d[k] = d.get(k, 0) + v1 * v2
        return FermionOperator._from_dict(d)

    def __rmul__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self * other
        return NotImplemented

    __matmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            return self * (1 / other)
        return NotImplemented

    def __pow__(self, k: int):
        if not isinstance(k, int) or k < 0:
            raise ValueError(f"FermionOperator ** {k!r}: the power must be a non-negative int")
        out = FermionOperator.identity()
        for _ in range(k):
            out = out * self
        return out

    def dagger(self) -> "FermionOperator":
        """Hermitian conjugate: reverse each product, swap creation and annihilation, conjugate."""
        d = {}
        for k, v in self.terms.items():
            kk = tuple((p, 1 - a) for p, a in reversed(k))
            d[kk] = d.get(kk, 0) + (v.conjugate() if isinstance(v, complex) else v)
        return FermionOperator._from_dict(d)

    def __eq__(self, other):
        other = self._coerce(other)
        if other is NotImplemented:
            return other
        diff = (self - other).terms
        return all(abs(v) <= 1e-12 for v in diff.values())

    def __hash__(self):
        return id(self)

    # -- maps ---------------------------------------------------------------------------------
    def to_qubit(self, mapping: str = "jordan_wigner", n_modes: Optional[int] = None, tol: float = 1e-12):
        """The qubit Hamiltonian of this operator under ``mapping`` (see :func:`fermion_to_qubit`)."""
        return fermion_to_qubit(self, mapping, n_modes, tol)


# ------------------------------------------------------------------------------------------------
# encodings as binary matrices
def _resolve_mapping(mapping: str) -> str:
    if not isinstance(mapping, str):
        raise TypeError(f"mapping must be a string, one of {MAPPINGS}, got {type(mapping).__name__}")
    key = mapping.lower().replace(" ", "_")
    key = _ALIASES.get(key, key)
    if key not in MAPPINGS:
        raise ValueError(f"unknown fermion-to-qubit mapping {mapping!r}; choose one of {MAPPINGS}")
    return key


def encoding_matrix(mapping: str, n_modes: int) -> np.ndarray:
    """The binary (n, n) matrix A of an encoding: qubit i stores ``Σ_k A[i, k] n_k mod 2``."""
    mapping = _resolve_mapping(mapping)
    n = int(n_modes)
    if n < 0 or n > MAX_MODES:
        raise ValueError(f"encoding_matrix: n_modes must be in [0, {MAX_MODES}], got {n_modes}")
    i = np.arange(n)[:, None]
    k = np.arange(n)[None, :]
    if mapping == "jordan_wigner":
        a = i == k
    elif mapping == "parity":
        a = k <= i
    else:                                   # Fenwick tree (Bravyi–Kitaev)
        a = ((i & (i + 1)) <= k) & (k <= i)
    return a.astype(np.uint8)


def _gf2_inverse(a: np.ndarray) -> np.ndarray:
    n = a.shape[0]
    m = np.concatenate([a.astype(np.uint8) & 1, np.eye(n, dtype=np.uint8)], axis=1)
    for col in range(n):
        rows = np.nonzero(m[col:, col])[0]
        if rows.size == 0:
            raise ValueError("encoding matrix is not invertible over GF(2)")
        piv = col + rows[0]
        if piv != col:
            m[[col, piv]] = m[[piv, col]]
        others = np.nonzero(m[:, col])[0]
        others = others[others != col]
        m[others] ^= m[col]
    return m[:, n:]


def _row_masks(a: np.ndarray) -> np.ndarray:
    """Row i of a binary matrix -> int64 mask with bit j = a[i, j]."""
    weights = np.left_shift(np.int64(1), np.arange(a.shape[1], dtype=np.int64))
    return (a.astype(np.int64) * weights).sum(axis=1).astype(np.int64)


def _ladder_tables(a: np.ndarray):
    """Per mode j: (c_j, p_j, o_j) int64 masks of the X part, the sign part and the occupation."""
    n = a.shape[0]
    ainv = _gf2_inverse(a)
    c = _row_masks(a.T)                               # column j of A
    lower = np.tril(np.ones((n, n), dtype=np.int64), -1)      # lower[j, k] = [k < j]
    p = _row_masks((lower @ ainv.astype(np.int64)) & 1)
    o = _row_masks(ainv)
    return c, p, o


def _popcount(v: np.ndarray) -> np.ndarray:
    return np.bitwise_count(v.astype(np.uint64)).astype(np.int64)


def _map_products(modes: np.ndarray, actions: np.ndarray, coeffs: np.ndarray, tables):
    """Map M products of L ladder operators (arrays (M, L)) to XZ-form terms.

    Returns flat arrays ``x, z`` (int64 masks) and complex coefficients of the Pauli strings
    ``P(x, z)`` (P = i^{|x∧z|} X^x Z^z) whose weighted sum is Σ_m coeffs[m] Π_l op(m, l).
    """
    c_t, p_t, o_t = tables
    M, L = modes.shape
    x = np.zeros(M, dtype=np.int64)
    z = np.zeros((M, 1), dtype=np.int64)
    sign = np.ones((M, 1), dtype=np.int64)
    for l in range(L):
        j, creation = modes[:, l], actions[:, l].astype(bool)
        xk = c_t[j]
        z0, z1 = p_t[j], p_t[j] ^ o_t[j]
        zk = np.stack([z0, z1], axis=1)                             # (M, 2)
        # a_j = Z^z X^x = (-1)^{|x∧z|} X^x Z^z; a†_j needs no sign
        sk = np.where(creation[:, None], 1, 1 - 2 * (_popcount(xk[:, None] & zk) & 1))
        # (X^x Z^z)(X^xk Z^zk) = (-1)^{|z ∧ xk|} X^{x⊕xk} Z^{z⊕zk}
        cross = 1 - 2 * (_popcount(z & xk[:, None]) & 1)            # (M, 2^l)
        sign = (sign * cross)[:, :, None] * sk[:, None, :]
        z = (z[:, :, None] ^ zk[:, None, :]).reshape(M, -1)
        sign = sign.reshape(M, -1)
        x = x ^ xk
    # X^x Z^z = (-i)^{|x∧z|} P(x, z)
    k = _popcount(x[:, None] & z) & 3
    phase = np.array([1, -1j, -1, 1j])[k]
    coef = coeffs[:, None] * (0.5 ** L) * sign * phase
    return np.broadcast_to(x[:, None], z.shape).reshape(-1), z.reshape(-1), coef.reshape(-1)


def _accumulate(x, z, coef, n):
    """Sum the coefficients of equal (x, z) pairs -> sorted unique arrays."""
    if x.size == 0:
        return x, z, coef.astype(np.complex128)
    if 2 * n <= 62:
        key = (x << n) | z
        uniq, inv = np.unique(key, return_inverse=True)
        ux, uz = uniq >> n, uniq & ((1 << n) - 1)
    else:
        pairs = np.stack([x, z], axis=1)
        uniq, inv = np.unique(pairs, axis=0, return_inverse=True)
        ux, uz = uniq[:, 0], uniq[:, 1]
    inv = inv.reshape(-1)
    re_ = np.bincount(inv, weights=coef.real, minlength=len(ux))
    im_ = np.bincount(inv, weights=coef.imag, minlength=len(ux))
    return ux, uz, re_ + 1j * im_


def _check_tol(tol, what: str) -> float:
    """``tol`` as a float: a finite number >= 0 (a negative one would keep exactly-zero terms)."""
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real):
        raise TypeError(f"{what}: tol must be a real number >= 0, got {tol!r}")
    tol = float(tol)
    if not (tol >= 0 and np.isfinite(tol)):
        raise ValueError(f"{what}: tol must be a finite number >= 0 (|coeff| <= tol is dropped), got {tol!r}")
    return tol


def _to_hamiltonian(x, z, coef, n, tol):
    from ..observables import Hamiltonian, PauliString
    scale = max(1.0, float(np.abs(coef).max())) if coef.size else 1.0
    keep = np.abs(coef) > tol
    x, z, coef = x[keep], z[keep], coef[keep]
    real = bool(np.all(np.abs(coef.imag) <= tol * scale))
    # identity first, then by weight, then masks: a stable, readable order
    weight = _popcount(x | z)
    order = np.lexsort((z, x, weight))
    terms = []
    for i in order:
        c = float(coef[i].real) if real else complex(coef[i])
        terms.append((c, PauliString.from_masks(int(x[i]), int(z[i]))))
    return Hamiltonian(terms, n_wires=n)


def map_arrays(groups, n_modes: int, mapping: str = "jordan_wigner", constant: Number = 0.0,
               tol: float = 1e-12):
    """Vectorised map of sums of products of ladder operators to a qubit Hamiltonian.

    ``groups`` is a list of ``(modes, actions, coeffs)``: integer arrays of shape (M, L) (one row
    per product of L ladder operators, action 1 = creation) and M coefficients; the operator is
    ``constant + Σ_groups Σ_m coeffs[m] Π_l op(modes[m, l], actions[m, l])``. Returns the
    :class:`~torchquantum_layers.observables.Hamiltonian` on ``n_modes`` qubits (|coeff| <= tol dropped).
    """
    mapping = _resolve_mapping(mapping)
    tol = _check_tol(tol, "map_arrays")
    n_modes = int(n_modes)
    if not 1 <= n_modes <= MAX_MODES:
        raise ValueError(f"map_arrays: n_modes must be in [1, {MAX_MODES}], got {n_modes}")
    tables = _ladder_tables(encoding_matrix(mapping, n_modes))
    xs, zs, cs = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], [np.array([complex(constant)])]
    for md, ac, co in groups:
        md = np.asarray(md, dtype=np.int64)
        if md.size == 0:
            continue
        if md.ndim != 2:
            raise ValueError(f"map_arrays: modes must have shape (M, L), got {md.shape}")
        if md.max() >= n_modes or md.min() < 0:
            raise ValueError(f"map_arrays: mode {int(md.max())} does not exist with n_modes={n_modes}")
        ac = np.asarray(ac, dtype=np.int64)
        if ac.shape != md.shape:
            raise ValueError(f"map_arrays: actions of shape {ac.shape} do not match modes {md.shape}")
        co = np.asarray(co, dtype=np.complex128).reshape(-1)
        if co.shape[0] != md.shape[0]:
            raise ValueError(f"map_arrays: {co.shape[0]} coefficients for {md.shape[0]} products")
        x, z, c = _map_products(md, ac, co, tables)
        xs.append(x)
        zs.append(z)
        cs.append(c)
    x, z, c = _accumulate(np.concatenate(xs), np.concatenate(zs), np.concatenate(cs), n_modes)
    return _to_hamiltonian(x, z, c, n_modes, tol)


def fermion_to_qubit(op: FermionOperator, mapping: str = "jordan_wigner", n_modes: Optional[int] = None,
                     tol: float = 1e-12):
    """Map a :class:`FermionOperator` to a qubit Hamiltonian (qubit j ↔ mode j for JW).

    ``mapping``: ``"jordan_wigner"``, ``"parity"`` or ``"bravyi_kitaev"`` (Fenwick tree). The
    result acts on ``n_modes`` qubits (default ``op.n_modes``, at least 1); coefficients with
    |c| <= tol are dropped and, when every imaginary part is within tol, coefficients are real.
    """
    if not isinstance(op, FermionOperator):
        raise TypeError(f"fermion_to_qubit: expected a FermionOperator, got {type(op).__name__}")
    tol = _check_tol(tol, "fermion_to_qubit")
    need = op.n_modes
    if n_modes is None:
        n_modes = max(need, 1)
    if isinstance(n_modes, bool) or not isinstance(n_modes, numbers.Integral):
        raise TypeError(f"fermion_to_qubit: n_modes must be an int, got {n_modes!r}")
    if n_modes < need:
        raise ValueError(f"fermion_to_qubit: the operator acts on mode {need - 1} but n_modes={n_modes}")
    by_len: dict = {}
    constant = 0.0
    for term, c in op.terms.items():
        if not term:
            constant += c
            continue
        by_len.setdefault(len(term), []).append((term, c))
    groups = []
    for items in by_len.values():
        modes = np.array([[p for p, _ in t] for t, _ in items], dtype=np.int64)
        actions = np.array([[a for _, a in t] for t, _ in items], dtype=np.int64)
        coeffs = np.array([c for _, c in items], dtype=np.complex128)
        groups.append((modes, actions, coeffs))
    return map_arrays(groups, n_modes, mapping, constant, tol)


def jordan_wigner(op: FermionOperator, n_modes: Optional[int] = None, tol: float = 1e-12):
    """Jordan–Wigner: ``a†_j = Z_0 … Z_{j-1} (X_j − i Y_j)/2`` (occupied = |1⟩)."""
    return fermion_to_qubit(op, "jordan_wigner", n_modes, tol)


def parity(op: FermionOperator, n_modes: Optional[int] = None, tol: float = 1e-12):
    """Parity encoding: qubit i stores the parity of modes 0..i."""
    return fermion_to_qubit(op, "parity", n_modes, tol)


def bravyi_kitaev(op: FermionOperator, n_modes: Optional[int] = None, tol: float = 1e-12):
    """Bravyi–Kitaev (Fenwick-tree) encoding: qubit i stores the parity of modes (i & (i+1))..i."""
    return fermion_to_qubit(op, "bravyi_kitaev", n_modes, tol)


def occupation_to_qubits(occupations: Iterable[int], mapping: str = "jordan_wigner") -> tuple:
    """The qubit basis state (bits, qubit 0 first) encoding an occupation-number vector."""
    occ = np.array([int(b) for b in occupations], dtype=np.int64)
    if np.any((occ != 0) & (occ != 1)):
        raise ValueError(f"occupation_to_qubits: occupations must be 0 or 1, got {occ.tolist()}")
    a = encoding_matrix(mapping, len(occ)).astype(np.int64)
    return tuple(int(b) for b in (a @ occ) % 2)


def taper(H, qubits, values):
    """Remove qubits on which every term of ``H`` is I or Z, fixing ``Z_q = (-1)^{values[i]}``.

    The remaining qubits keep their order and are renumbered 0, 1, … Raises ValueError when a
    term has X or Y on a tapered qubit (the qubit is not a Z symmetry of H).
    """
    from ..observables import Hamiltonian, PauliString
    qubits, values = list(qubits), list(values)
    if len(qubits) != len(values):
        raise ValueError("taper: give one value per tapered qubit")
    n = H.n_wires
    for q in qubits:
        if isinstance(q, bool) or not isinstance(q, numbers.Integral) or not 0 <= q < n:
            raise ValueError(f"taper: qubit {q!r} is not a wire of the {n}-qubit Hamiltonian (0..{n - 1})")
    if len(set(int(q) for q in qubits)) != len(qubits):
        raise ValueError(f"taper: tapered qubits {qubits} must be distinct")
    for v in values:
        if isinstance(v, bool) or v not in (0, 1):
            raise ValueError(f"taper: value {v!r} must be 0 (Z = +1) or 1 (Z = -1)")
    qubits, values = [int(q) for q in qubits], [int(v) for v in values]
    keep = [w for w in range(n) if w not in qubits]
    acc: dict = {}
    for c, p in H.terms:
        x, z = p.x_mask, p.z_mask
        sign = 1
        for q, v in zip(qubits, values):
            if (x >> q) & 1:
                raise ValueError(f"taper: term {c} * {p} has X or Y on qubit {q}, which is not a Z symmetry")
            if (z >> q) & 1 and v:
                sign = -sign
        nx = nz = 0
        for i, w in enumerate(keep):
            nx |= ((x >> w) & 1) << i
            nz |= ((z >> w) & 1) << i
        acc[(nx, nz)] = acc.get((nx, nz), 0) + sign * c
    terms = [(c, PauliString.from_masks(x, z)) for (x, z), c in acc.items() if abs(c) > 1e-12]
    return Hamiltonian(terms, n_wires=len(keep))
