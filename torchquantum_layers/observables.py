"""Pauli-sum observables: ``PauliString``, ``Hamiltonian``, batched ⟨ψ|H|ψ⟩ and H·ψ without matrices.

A Pauli string is two bit masks over wires, an X part and a Z part (a Y sets both):
``P = i^{|x∧z|} X^x Z^z``. On a basis state ``P|j⟩ = i^{|x∧z|} (-1)^{|j∧z|} |j⊕x⟩``, so P·ψ is
one index flip and one sign vector: no 2^n × 2^n matrix is ever needed.

A Hamiltonian ``H = Σ_t c_t P_t`` is compiled once per (n, dtype, device) by grouping its terms
by X mask. The terms of a group share the flip ``j ↦ j⊕x``, and their signs and phases combine
into ONE diagonal ``D_x[j] = Σ_t c_t i^{|x∧z_t|} (-1)^{|j∧z_t|}``:

    (H·ψ)[i] = Σ_x D_x[i⊕x] ψ[i⊕x]

so a call costs one pass per distinct X mask, not per term. The X-free group (all-Z terms and
the constant) is one precomputed real vector; its expectation is one weighted sum of |ψ|².

Expectations use the Hermitian pairing of j and j⊕x: with p the pivot wire (the last X wire)
and ψ₀, ψ₁ the halves of the state where wire p is 0 and 1,

    ⟨ψ|H_x|ψ⟩ = 2 Re Σ_k D_x[0,k] ψ₀[k] conj(ψ₁[k⊕x'])        (x' = x without p)

i.e. per group one pass that forms the products ψ₀[k] conj(ψ₁[k⊕x']) — a multiply per pattern
of the x' bits on strided views of the state, or one ``torch.flip`` and one multiply when x' is
large — and one GEMV against a precomputed table (the same GEMM serves a list of observables).
torch's CPU kernels are several times slower on short contiguous runs, which is what X masks
ending on the last wires produce; so batches of 8 or more states are transposed once per call
to put the batch innermost, and single states on many wires let such groups use a rotated wire
order (see :class:`_ExpvalPlan`). For small states, where the fixed cost of a torch call
dominates, all groups are evaluated at once by a single gather instead (``method="gather"``).

Memory: a group's table holds 2**(n-1) complex values (2**n for H·ψ). Tables are cached up to
:data:`TABLE_CACHE_BYTES` (512 MiB) per compiled form, the costliest to rebuild first; the
groups past that cap rebuild their table at each call (one small GEMM over the wires their Z
masks touch, then one expansion), so e.g. a 24-qubit Hamiltonian with hundreds of X masks stays
within memory at the price of speed.

Conventions: wire 0 is the most significant bit of a basis index; ⟨ψ|H|ψ⟩ is the bilinear form
ψ†Hψ (states are not renormalised); expectations are real and need a Hermitian observable.
"""
from __future__ import annotations

import math
import numbers
import re
import warnings
from collections import OrderedDict
from typing import Iterable, Optional, Union

import torch

from .kernels import native
from .kernels.apply import apply_matrix_unchecked
from .kernels.state import COMPLEX_DTYPES, REAL_OF, n_wires_of

__all__ = ["PauliString", "Hamiltonian", "expectation", "apply_hamiltonian", "commutator",
           "qwc_groups", "TABLE_CACHE_BYTES", "DENSE_MAX_WIRES"]

TABLE_CACHE_BYTES = 512 * 2 ** 20
"""Cap on the bytes of per-group tables one compiled form keeps (per Hamiltonian, n, dtype,
device and use). Groups past the cap rebuild their table at each call instead of caching it."""

DENSE_MAX_WIRES = 14
"""``to_dense`` refuses more wires than this unless ``force=True``."""

# Small states: below these sizes the X groups are done by gathers (torch call overhead dominates):
# G * 2**(n-1) entries of stacked index / table for ⟨H⟩ (G * 2**n for H·ψ), and as many gathered
# amplitudes per state in the batch.
_GATHER_MAX_TABLE = 2 ** 21
_GATHER_MAX_WORK = 2 ** 21

_HERMITIAN_RTOL = 1e-12

Number = Union[int, float, complex]

# ------------------------------------------------------------------------------------------------
# Pauli algebra on (x, z) bits: I=(0,0) X=(1,0) Z=(0,1) Y=(1,1)
_LETTER_BITS = {"I": (0, 0), "X": (1, 0), "Z": (0, 1), "Y": (1, 1)}
_BITS_LETTER = {v: k for k, v in _LETTER_BITS.items()}
_PHASES = (1, 1j, -1, -1j)


def _popcount(v: int) -> int:
    return bin(v).count("1")


def _mask_product(x1: int, z1: int, x2: int, z2: int):
    """(phase, x, z) with P(x1,z1) · P(x2,z2) = phase · P(x,z) for Hermitian Pauli strings.

    P(x,z) = i^{|x∧z|} X^x Z^z and Z^z X^x = (-1)^{|x∧z|} X^x Z^z.
    """
    x, z = x1 ^ x2, z1 ^ z2
    k = (_popcount(x1 & z1) + _popcount(x2 & z2) + 2 * _popcount(z1 & x2) - _popcount(x & z)) % 4
    return _PHASES[k], x, z


def _wires_of_mask(mask: int) -> tuple:
    out, w = [], 0
    while mask:
        if mask & 1:
            out.append(w)
        mask >>= 1
        w += 1
    return tuple(out)


def _mask_of(wires) -> int:
    m = 0
    for w in wires:
        m |= 1 << w
    return m


def _index_mask(wire_mask: int, n: int) -> int:
    """Wire mask (bit w = wire w) -> basis-index mask (wire w = bit n-1-w)."""
    out = 0
    for w in _wires_of_mask(wire_mask):
        out |= 1 << (n - 1 - w)
    return out


# ------------------------------------------------------------------------------------------------
# parsing
_FACTOR_RE = re.compile(r"([A-Za-z]+)(\d*)")


def _parse_factor(word: str, text, sole: bool):
    """One word of a Pauli string -> list of (letter, wire)."""
    m = _FACTOR_RE.fullmatch(word)
    if m is None:
        raise ValueError(f"cannot read Pauli factor {word!r} in {text!r}: write a letter I, X, Y or Z "
                         f"followed by a wire number, e.g. 'X0 Z2'")
    letters, digits = m.group(1).upper(), m.group(2)
    bad = [ch for ch in letters if ch not in _LETTER_BITS]
    if bad:
        raise ValueError(f"unknown Pauli factor {word!r} in {text!r}: {m.group(1)[letters.index(bad[0])]!r} "
                         f"is not one of I, X, Y, Z (write a letter then a wire number, e.g. 'X0 Z2')")
    if digits:
        if len(letters) != 1:
            raise ValueError(f"cannot read Pauli factor {word!r} in {text!r}: one letter then a wire "
                             f"number, e.g. 'X3'")
        return [(letters, int(digits))] if letters != "I" else []
    if letters == "I":
        return []
    if not sole:
        raise ValueError(f"Pauli factor {word!r} in {text!r} has no wire number: write e.g. "
                         f"'{letters[0]}0' (a letters-only label such as 'XIZ' must stand alone)")
    return [(ch, i) for i, ch in enumerate(letters) if ch != "I"]     # dense label: letter i on wire i


def _combine(factors, text, allow_product: bool):
    """Multiply factors left to right -> (phase, x, z); repeated wires only if allow_product."""
    phase, x, z = 1, 0, 0
    seen = set()
    for letter, wire in factors:
        if wire in seen and not allow_product:
            raise ValueError(f"Pauli string {text!r} repeats wire {wire}: one factor per wire (to "
                             f"multiply operators on one wire join them with '@', e.g. "
                             f"Hamiltonian.from_string('X0 @ Z0'))")
        seen.add(wire)
        bx, bz = _LETTER_BITS[letter]
        ph, x, z = _mask_product(x, z, bx << wire, bz << wire)
        phase *= ph
    return phase, x, z


def _check_wire(w, text) -> int:
    if isinstance(w, bool) or not isinstance(w, numbers.Integral):
        raise TypeError(f"Pauli string {text!r}: wire {w!r} is not an int")
    w = int(w)
    if w < 0:
        raise ValueError(f"Pauli string {text!r}: wire {w} is negative")
    return w


def _pairs_to_factors(pairs, text):
    factors = []
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"Pauli string {text!r}: expected (wire, letter) pairs, got {pair!r}")
        a, b = pair
        if isinstance(a, str) and not isinstance(b, str):
            a, b = b, a
        if not isinstance(b, str) or b.upper() not in _LETTER_BITS:
            raise ValueError(f"Pauli string {text!r}: unknown Pauli {b!r}, expected one of I, X, Y, Z")
        w = _check_wire(a, text)
        if b.upper() != "I":
            factors.append((b.upper(), w))
    return factors


def _check_n_wires(n_wires, what) -> int:
    if isinstance(n_wires, bool) or not isinstance(n_wires, numbers.Integral) or n_wires < 0:
        raise ValueError(f"{what}: n_wires must be a non-negative int, got {n_wires!r}")
    return int(n_wires)


# ------------------------------------------------------------------------------------------------
class PauliString:
    """A tensor product of single-qubit Paulis, e.g. ``PauliString("X0 Z2 Y5")``.

    Specs: factors ``"X0 Z2 Y5"`` (a letter and a wire, any order, each wire at most once; ``""``
    or ``"I"`` is the identity), a letters-only label ``"XIZ"`` (letter i on wire i), a mapping
    ``{0: "X", 2: "Z"}``, pairs ``[(0, "X"), (2, "Z")]`` (OpenFermion order; ``("X", 0)`` works
    too) or another PauliString. Stored as two bit masks (bit w = wire w).

    A PauliString is Hermitian and carries no coefficient: the product of two (``P @ Q`` or
    ``P * Q``) is a one-term :class:`Hamiltonian` whose coefficient is the phase (±1, ±i), and
    ``P.product(Q)`` returns ``(phase, PauliString)``. Numbers times strings, sums and
    differences are Hamiltonians.
    """

    __slots__ = ("_x", "_z", "_n_wires", "_ham")

    def __init__(self, spec: Union[str, dict, Iterable, "PauliString"] = "", n_wires: Optional[int] = None):
        if isinstance(spec, PauliString):
            x, z = spec._x, spec._z
            if n_wires is None:
                n_wires = spec._n_wires
        elif isinstance(spec, str):
            words = spec.split()
            factors = []
            for word in words:
                factors += _parse_factor(word, spec, sole=len(words) == 1)
            _, x, z = _combine(factors, spec, allow_product=False)
        elif isinstance(spec, dict):
            _, x, z = _combine(_pairs_to_factors(spec.items(), spec), spec, allow_product=False)
        elif isinstance(spec, (list, tuple)):
            _, x, z = _combine(_pairs_to_factors(spec, spec), spec, allow_product=False)
        else:
            raise TypeError(f"PauliString: cannot build a Pauli string from {type(spec).__name__} {spec!r}")
        self._x, self._z, self._ham = x, z, None
        if n_wires is not None:
            n_wires = _check_n_wires(n_wires, f"PauliString {self}")
            if (x | z) >> n_wires:
                raise ValueError(f"PauliString {self}: acts on wire {max(self.wires)} but n_wires={n_wires}")
        self._n_wires = n_wires

    @classmethod
    def from_masks(cls, x_mask: int, z_mask: int, n_wires: Optional[int] = None) -> "PauliString":
        """From wire bit masks (bit w set: wire w has an X, resp. Z, part; both: Y)."""
        if x_mask < 0 or z_mask < 0:
            raise ValueError(f"PauliString.from_masks: masks must be non-negative, got {x_mask}, {z_mask}")
        p = cls.__new__(cls)
        p._x, p._z, p._n_wires, p._ham = int(x_mask), int(z_mask), None, None
        if n_wires is not None:
            p = PauliString(p, n_wires=n_wires)
        return p

    @classmethod
    def product_of(cls, text: str):
        """Multiply the factors of ``text`` left to right, repeated wires allowed:
        ``PauliString.product_of("X0 @ Z0") == (-1j, PauliString("Y0"))``."""
        factors = []
        for word in text.replace("@", " ").split():
            factors += _parse_factor(word, text, sole=False)
        phase, x, z = _combine(factors, text, allow_product=True)
        return phase, cls.from_masks(x, z)

    # -- description --------------------------------------------------------------------------
    @property
    def x_mask(self) -> int:
        return self._x

    @property
    def z_mask(self) -> int:
        return self._z

    @property
    def wires(self) -> tuple:
        """Wires with a non-identity factor, sorted."""
        return _wires_of_mask(self._x | self._z)

    @property
    def weight(self) -> int:
        return _popcount(self._x | self._z)

    @property
    def n_wires(self) -> int:
        """The given ``n_wires``, else 1 + the largest wire (0 for the identity)."""
        if self._n_wires is not None:
            return self._n_wires
        return (self._x | self._z).bit_length()

    def letter(self, wire: int) -> str:
        return _BITS_LETTER[((self._x >> wire) & 1, (self._z >> wire) & 1)]

    @property
    def ops(self) -> dict:
        """``{wire: letter}`` of the non-identity factors."""
        return {w: self.letter(w) for w in self.wires}

    def label(self, n_wires: Optional[int] = None) -> str:
        """Dense label, letter i on wire i: ``PauliString("X0 Z2").label(4) == "XIZI"``."""
        n = self.n_wires if n_wires is None else _check_n_wires(n_wires, "label")
        if (self._x | self._z) >> n:
            raise ValueError(f"PauliString {self}: acts on wire {max(self.wires)}, beyond {n} wires")
        return "".join(self.letter(w) for w in range(n))

    def __str__(self) -> str:
        return " ".join(f"{self.letter(w)}{w}" for w in self.wires) or "I"

    def __repr__(self) -> str:
        return f"PauliString({str(self)!r})"

    def __hash__(self) -> int:
        return hash((self._x, self._z))

    def __eq__(self, other) -> bool:
        if isinstance(other, PauliString):
            return self._x == other._x and self._z == other._z
        if isinstance(other, Hamiltonian):
            return other == self
        return NotImplemented

    def _as_hamiltonian(self) -> "Hamiltonian":
        if self._ham is None:
            self._ham = Hamiltonian(self)
        return self._ham

    # -- algebra ------------------------------------------------------------------------------
    def product(self, other: "PauliString"):
        """``(phase, Q)`` with ``self · other = phase · Q``."""
        if not isinstance(other, PauliString):
            raise TypeError(f"PauliString.product: expected a PauliString, got {type(other).__name__}")
        phase, x, z = _mask_product(self._x, self._z, other._x, other._z)
        return phase, PauliString.from_masks(x, z)

    def commutes_with(self, other) -> bool:
        """True when the operators commute (they anticommute on an even number of wires)."""
        if isinstance(other, PauliString):
            return (_popcount(self._x & other._z) + _popcount(self._z & other._x)) % 2 == 0
        return Hamiltonian(self).commutes_with(other)

    def qubitwise_commutes(self, other: "PauliString") -> bool:
        """True when on every wire the two factors are equal or one is the identity."""
        both = (self._x | self._z) & (other._x | other._z)
        return (self._x & both) == (other._x & both) and (self._z & both) == (other._z & both)

    def adjoint(self) -> "PauliString":
        return self

    @property
    def is_hermitian(self) -> bool:
        return True

    def __matmul__(self, other):
        if isinstance(other, PauliString):
            phase, q = self.product(other)
            return Hamiltonian([(phase, q)], n_wires=_merge_n(self._n_wires, other._n_wires))
        if isinstance(other, Hamiltonian):
            return Hamiltonian(self) @ other
        return NotImplemented

    def __mul__(self, other):
        if isinstance(other, (PauliString, Hamiltonian)):
            return self @ other
        if _is_number(other):
            return Hamiltonian([(other, self)])
        return NotImplemented

    def __rmul__(self, other):
        if _is_number(other):
            return Hamiltonian([(other, self)])
        return NotImplemented

    def __truediv__(self, other):
        if _is_number(other):
            return Hamiltonian([(1 / _as_coeff(other, "PauliString / number"), self)])
        return NotImplemented

    def __neg__(self):
        return Hamiltonian([(-1.0, self)])

    def __add__(self, other):
        return Hamiltonian(self).__add__(other)

    def __radd__(self, other):
        return Hamiltonian(self).__radd__(other)

    def __sub__(self, other):
        return Hamiltonian(self).__sub__(other)

    def __rsub__(self, other):
        return Hamiltonian(self).__rsub__(other)

    def to_dense(self, n_wires: Optional[int] = None, **kwargs) -> torch.Tensor:
        return Hamiltonian(self).to_dense(n_wires, **kwargs)

    def to_sparse(self, n_wires: Optional[int] = None, **kwargs) -> torch.Tensor:
        return Hamiltonian(self).to_sparse(n_wires, **kwargs)


def _merge_n(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _is_number(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, numbers.Number):
        return True
    return isinstance(v, torch.Tensor) and v.dim() == 0


def _as_coeff(c, where) -> Number:
    if isinstance(c, bool):
        raise TypeError(f"{where}: coefficient {c!r} is a bool, not a number")
    if isinstance(c, torch.Tensor):
        if c.dim() != 0:
            raise TypeError(f"{where}: a coefficient must be a number, got a tensor of shape {tuple(c.shape)}")
        if c.requires_grad:
            raise TypeError(f"{where}: coefficients are plain numbers; a tensor that requires grad "
                            f"cannot be one (trainable coefficients are not supported)")
        c = c.item()
    if not isinstance(c, numbers.Number):
        raise TypeError(f"{where}: coefficient {c!r} is not a number")
    c = complex(c)
    if not (math.isfinite(c.real) and math.isfinite(c.imag)):
        raise ValueError(f"{where}: coefficient {c} is not finite")
    return c.real if c.imag == 0 else c


def _fmt_coeff(c) -> str:
    if isinstance(c, complex):
        s = repr(c)
        return s if s.startswith("(") else f"({s})"
    return repr(float(c))


# ------------------------------------------------------------------------------------------------
# Hamiltonian string grammar: terms separated by + / -; a term is numbers and Pauli words joined by
# spaces or '*'; '@' between factors makes the term an operator product (repeats allowed).
_TOKEN_RE = re.compile(r"""\s*(?:
    (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[jJ]?)
  | \((?P<paren>[^()]*)\)
  | (?P<word>[A-Za-z]+\d*)
  | (?P<op>[-+*@])
  | (?P<bad>\S)
)""", re.X)


def _tokenize(text: str):
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        pos = m.end()
        kind = m.lastgroup
        if kind == "bad":
            raise ValueError(f"Hamiltonian.from_string: unexpected {m.group('bad')!r} at position "
                             f"{m.start('bad')} in {text!r}")
        out.append((kind, m.group(kind)))
    return out


def _parse_hamiltonian(text: str):
    toks = _tokenize(text)
    if not toks:
        raise ValueError(f"Hamiltonian.from_string: empty expression {text!r}")
    terms = []
    i = 0
    while i < len(toks):
        sign = 1
        while i < len(toks) and toks[i] in (("op", "+"), ("op", "-")):
            sign = -sign if toks[i][1] == "-" else sign
            i += 1
        coeff, words, product, items = complex(sign), [], False, 0
        start = i
        while i < len(toks) and toks[i] not in (("op", "+"), ("op", "-")):
            kind, val = toks[i]
            if kind == "num":
                coeff *= complex(val)
                items += 1
            elif kind == "paren":
                try:
                    coeff *= complex(val.replace(" ", ""))
                except ValueError:
                    raise ValueError(f"Hamiltonian.from_string: cannot read the number ({val}) in "
                                     f"{text!r}") from None
                items += 1
            elif kind == "word":
                words.append(val)
                items += 1
            elif val == "@":
                product = True
            i += 1
        if items == 0:
            raise ValueError(f"Hamiltonian.from_string: empty term in {text!r}")
        term_text = " ".join(v for k, v in toks[start:i] if k == "word")
        factors = []
        for w in words:
            factors += _parse_factor(w, text, sole=len(words) == 1)
        phase, x, z = _combine(factors, term_text, allow_product=product)
        terms.append((coeff * phase, PauliString.from_masks(x, z)))
    return terms


# ------------------------------------------------------------------------------------------------
class Hamiltonian:
    """A weighted sum of Pauli strings ``Σ_t c_t P_t`` (immutable).

    Build it from ``(coeff, pauli)`` pairs, ``Hamiltonian([(0.5, "Z0 Z1"), (-0.2, "X0")])``
    (``pauli``: any :class:`PauliString` spec; a string with ``@`` is a product), from a string
    ``Hamiltonian.from_string("0.5*Z0 Z1 - 0.2*X0 + 1.1")`` (a bare number is a constant term), or
    from a ``{pauli: coeff}`` dict (:meth:`from_pauli_dict`; OpenFermion's ``QubitOperator.terms``
    works as is). ``n_wires`` is given or inferred (1 + the largest wire).

    ``len(H)`` is the number of stored terms; :meth:`simplify` merges equal strings and drops
    zeros. ``+``, ``-``, ``*`` by a number, ``/``, ``@`` (or ``*``) operator product and ``**`` a
    non-negative int build new Hamiltonians; ``==`` compares the operators (merged coefficients,
    up to 1e-12). ``str(H)`` reads back with :meth:`from_string`.
    """

    __slots__ = ("_terms", "_n_wires", "_merged", "_plans", "_support", "_herm")

    def __init__(self, terms=(), n_wires: Optional[int] = None):
        if isinstance(terms, Hamiltonian):
            parsed = terms._terms
            n_wires = terms._n_wires if n_wires is None else n_wires
        elif isinstance(terms, PauliString):
            parsed = ((1.0, terms),)
            n_wires = terms._n_wires if n_wires is None else n_wires
        elif isinstance(terms, str):
            parsed = tuple((_as_coeff(c, "Hamiltonian"), p) for c, p in _parse_hamiltonian(terms))
        elif isinstance(terms, dict):
            parsed = Hamiltonian.from_pauli_dict(terms)._terms
        else:
            try:
                items = list(terms)
            except TypeError:
                raise TypeError(f"Hamiltonian: expected (coeff, pauli) pairs, a string or a dict, got "
                                f"{type(terms).__name__}") from None
            parsed = []
            for k, item in enumerate(items):
                if isinstance(item, PauliString):
                    parsed.append((1.0, item))
                    continue
                if not isinstance(item, (tuple, list)) or len(item) != 2:
                    raise TypeError(f"Hamiltonian: term {k} must be a (coeff, pauli) pair, got {item!r}")
                c, p = item
                if not _is_number(c) and _is_number(p):
                    c, p = p, c
                c = _as_coeff(c, f"Hamiltonian term {k} ({p!r})")
                if not isinstance(p, PauliString):
                    if isinstance(p, str) and "@" in p:
                        phase, p = PauliString.product_of(p)
                        c = _as_coeff(c * phase, f"Hamiltonian term {k}")
                    else:
                        p = PauliString(p)
                parsed.append((c, p))
        self._terms = tuple(parsed)
        support = 0
        for _, p in self._terms:
            support |= p._x | p._z
        self._support = support
        if n_wires is not None:
            n_wires = _check_n_wires(n_wires, "Hamiltonian")
            if support >> n_wires:
                c, p = next((c, p) for c, p in self._terms if (p._x | p._z) >> n_wires)
                raise ValueError(f"Hamiltonian: term {_fmt_coeff(c)} * {p} acts on wire {max(p.wires)} "
                                 f"but n_wires={n_wires}")
        self._n_wires = n_wires
        self._merged = None
        self._herm = None
        self._plans = {}

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_string(cls, text: str, n_wires: Optional[int] = None) -> "Hamiltonian":
        """Parse ``"0.5*Z0 Z1 - 0.2*X0 + 1.1"``.

        Terms are separated by ``+``/``-``; a term is numbers (``2``, ``1e-3``, ``(0.5+1j)``) and
        Pauli factors (``X0``, or one letters-only label like ``XIZ``) joined by spaces or ``*``,
        each wire at most once. Joining factors with ``@`` makes the term an operator product
        instead: ``"X0 @ Z0"`` is ``-1j * Y0`` (repeated wires allowed, phases kept).
        """
        if not isinstance(text, str):
            raise TypeError(f"Hamiltonian.from_string: expected a str, got {type(text).__name__}")
        return cls(_parse_hamiltonian(text), n_wires=n_wires)

    @classmethod
    def from_pauli_dict(cls, terms: dict, n_wires: Optional[int] = None) -> "Hamiltonian":
        """From ``{pauli: coeff}``; keys are PauliString specs: ``"X0 Z1"``, ``"XIZ"``, a PauliString,
        or a tuple of ``(wire, letter)`` pairs as in OpenFermion (``()`` is the identity)."""
        if not isinstance(terms, dict):
            raise TypeError(f"Hamiltonian.from_pauli_dict: expected a dict, got {type(terms).__name__}")
        return cls([(c, p) for p, c in terms.items()], n_wires=n_wires)

    # -- description --------------------------------------------------------------------------
    @property
    def terms(self) -> tuple:
        """The stored ``(coeff, PauliString)`` pairs."""
        return self._terms

    @property
    def coeffs(self) -> list:
        return [c for c, _ in self._terms]

    @property
    def paulis(self) -> list:
        return [p for _, p in self._terms]

    @property
    def n_wires(self) -> int:
        """The given ``n_wires``, else 1 + the largest wire."""
        if self._n_wires is not None:
            return self._n_wires
        return max([self._support.bit_length()] + [p._n_wires or 0 for _, p in self._terms])

    @property
    def wires(self) -> tuple:
        return _wires_of_mask(self._support)

    @property
    def constant(self) -> Number:
        """Sum of the coefficients of the identity terms."""
        return sum((c for c, p in self._terms if p._x == 0 and p._z == 0), 0.0)

    def __len__(self) -> int:
        return len(self._terms)

    def __iter__(self):
        return iter(self._terms)

    def _term_dict(self) -> "OrderedDict":
        """Merged ``{(x, z): coeff}`` (exact sums, first-appearance order, zeros kept)."""
        if self._merged is None:
            d = OrderedDict()
            for c, p in self._terms:
                key = (p._x, p._z)
                d[key] = d.get(key, 0) + c
            self._merged = d
        return self._merged

    def simplify(self, tol: float = 1e-12) -> "Hamiltonian":
        """Merge equal strings (first-appearance order), drop coefficients with |c| <= tol, and
        make coefficients with |imag| <= tol real."""
        out = []
        for (x, z), c in self._term_dict().items():
            c = complex(c)
            if abs(c) <= tol:
                continue
            out.append((c.real if abs(c.imag) <= tol else c, PauliString.from_masks(x, z)))
        return Hamiltonian(out, n_wires=self._n_wires)

    @property
    def num_x_masks(self) -> int:
        """Number of distinct X masks among the merged non-zero terms (passes per call)."""
        return len({x for (x, z), c in self._term_dict().items() if c != 0})

    def x_groups(self) -> dict:
        """``{x_mask: [(coeff, PauliString), ...]}`` of the merged non-zero terms."""
        out = {}
        for (x, z), c in self._term_dict().items():
            if c != 0:
                out.setdefault(x, []).append((c, PauliString.from_masks(x, z)))
        return out

    @property
    def is_hermitian(self) -> bool:
        """True when every merged coefficient is real (up to 1e-12 of the largest)."""
        if self._herm is None:
            self._herm = self._non_hermitian_term() is None
        return self._herm

    def _non_hermitian_term(self):
        d = self._term_dict()
        tol = _HERMITIAN_RTOL * max([1.0] + [abs(c) for c in d.values()])
        for (x, z), c in d.items():
            if abs(complex(c).imag) > tol:
                return c, PauliString.from_masks(x, z)
        return None

    def adjoint(self) -> "Hamiltonian":
        return Hamiltonian([(_conj(c), p) for c, p in self._terms], n_wires=self._n_wires)

    def __repr__(self) -> str:
        n = len(self._terms)
        body = _format_terms(self._terms if n <= 12 else self._terms[:6])
        if n > 12:
            body += f" + ... ({n} terms)"
        return f"Hamiltonian({body}, n_wires={self.n_wires})"

    def __str__(self) -> str:
        return _format_terms(self._terms)

    # -- algebra ------------------------------------------------------------------------------
    @staticmethod
    def _coerce(other):
        if isinstance(other, Hamiltonian):
            return other
        if isinstance(other, PauliString):
            return Hamiltonian(other)
        if _is_number(other):
            return Hamiltonian([(other, PauliString())])
        return None

    def __add__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return Hamiltonian(self._terms + o._terms, n_wires=_merge_n(self._n_wires, o._n_wires))

    def __radd__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o + self

    def __neg__(self):
        return Hamiltonian([(-c, p) for c, p in self._terms], n_wires=self._n_wires)

    def __sub__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self + (-o)

    def __rsub__(self, other):
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o + (-self)

    def __mul__(self, other):
        if _is_number(other):
            a = _as_coeff(other, "Hamiltonian * number")
            return Hamiltonian([(_as_coeff(a * c, "Hamiltonian * number"), p) for c, p in self._terms],
                               n_wires=self._n_wires)
        if isinstance(other, (Hamiltonian, PauliString)):
            return self @ other
        return NotImplemented

    def __rmul__(self, other):
        if _is_number(other):
            return self * other
        return NotImplemented

    def __truediv__(self, other):
        if _is_number(other):
            return self * (1 / _as_coeff(other, "Hamiltonian / number"))
        return NotImplemented

    def __matmul__(self, other):
        o = None if _is_number(other) else self._coerce(other)
        if o is None:
            return NotImplemented
        out = OrderedDict()
        for (x1, z1), c1 in self._term_dict().items():
            if c1 == 0:
                continue
            for (x2, z2), c2 in o._term_dict().items():
                if c2 == 0:
                    continue
                ph, x, z = _mask_product(x1, z1, x2, z2)
                out[(x, z)] = out.get((x, z), 0) + ph * c1 * c2
        terms = [(_as_coeff(c, "product"), PauliString.from_masks(x, z)) for (x, z), c in out.items()]
        return Hamiltonian(terms, n_wires=_merge_n(self._n_wires, o._n_wires))

    def __rmatmul__(self, other):
        o = None if _is_number(other) else self._coerce(other)
        if o is None:
            return NotImplemented
        return o @ self

    def __pow__(self, k):
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
            raise ValueError(f"Hamiltonian ** {k!r}: the power must be a non-negative int")
        out = Hamiltonian([(1.0, PauliString())], n_wires=self._n_wires)
        base, k = self, int(k)
        while k:
            if k & 1:
                out = out @ base
            k >>= 1
            if k:
                base = base @ base
        return out

    def commutator(self, other) -> "Hamiltonian":
        """``[self, other] = self @ other - other @ self``, simplified."""
        o = self._coerce(other)
        if o is None:
            raise TypeError(f"commutator: expected a Hamiltonian or PauliString, got {type(other).__name__}")
        # commuting pairs cancel; anticommuting ones give 2 c1 c2 P1 P2
        out = OrderedDict()
        for (x1, z1), c1 in self._term_dict().items():
            for (x2, z2), c2 in o._term_dict().items():
                if c1 == 0 or c2 == 0 or (_popcount(x1 & z2) + _popcount(z1 & x2)) % 2 == 0:
                    continue
                ph, x, z = _mask_product(x1, z1, x2, z2)
                out[(x, z)] = out.get((x, z), 0) + 2 * ph * c1 * c2
        terms = [(_as_coeff(c, "commutator"), PauliString.from_masks(x, z)) for (x, z), c in out.items()]
        return Hamiltonian(terms, n_wires=_merge_n(self._n_wires, o._n_wires)).simplify()

    def commutes_with(self, other, tol: float = 1e-12) -> bool:
        """True when ``[self, other]`` vanishes (coefficients within ``tol``)."""
        return len(self.commutator(other).simplify(tol)) == 0

    def equals(self, other, tol: float = 1e-12) -> bool:
        """Operator equality: merged coefficients agree within ``tol`` (absolute) or 1e-9 relative."""
        o = self._coerce(other)
        if o is None:
            return False
        a, b = self._term_dict(), o._term_dict()
        for key in set(a) | set(b):
            ca, cb = complex(a.get(key, 0)), complex(b.get(key, 0))
            if abs(ca - cb) > max(tol, 1e-9 * max(abs(ca), abs(cb))):
                return False
        return True

    def __eq__(self, other):
        if self._coerce(other) is None:
            return NotImplemented
        return self.equals(other)

    __hash__ = None

    # -- matrices -----------------------------------------------------------------------------
    def _resolve_n(self, n_wires, what) -> int:
        if n_wires is None:
            return self.n_wires
        n = _check_n_wires(n_wires, what)
        if self._support >> n:
            c, p = next((c, p) for c, p in self._terms if (p._x | p._z) >> n)
            raise ValueError(f"{what}: term {_fmt_coeff(c)} * {p} acts on wire {max(p.wires)} "
                             f"but n_wires={n}")
        return n

    def to_dense(self, n_wires: Optional[int] = None, dtype=torch.complex128, device=None,
                 force: bool = False) -> torch.Tensor:
        """The 2^n × 2^n matrix (wire 0 = most significant bit). Refuses n > 14 unless ``force``."""
        n = self._resolve_n(n_wires, "to_dense")
        N = 2 ** n
        if n > DENSE_MAX_WIRES and not force:
            itemsize = torch.empty((), dtype=dtype).element_size()
            raise ValueError(f"to_dense: {n} qubits need a {N} x {N} matrix ({N * N * itemsize / 2 ** 30:.1f} "
                             f"GiB as {dtype}); the limit is {DENSE_MAX_WIRES} qubits: pass force=True to "
                             f"build it anyway, or use to_sparse / apply_hamiltonian")
        out = torch.zeros(N, N, dtype=torch.complex128, device=device)
        rows, cols, vals = _sparse_entries(self, n, device)
        if rows is not None:
            out.index_put_((rows, cols), vals, accumulate=True)
        return out.to(dtype)

    def to_sparse(self, n_wires: Optional[int] = None, dtype=torch.complex128, device=None) -> torch.Tensor:
        """The matrix as a torch sparse CSR tensor (at most one entry per row per X mask)."""
        n = self._resolve_n(n_wires, "to_sparse")
        N = 2 ** n
        rows, cols, vals = _sparse_entries(self, n, device)
        if rows is None:
            rows = cols = torch.zeros(0, dtype=torch.int64, device=device)
            vals = torch.zeros(0, dtype=torch.complex128, device=device)
        coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals.to(dtype), (N, N),
                                      check_invariants=False).coalesce()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return coo.to_sparse_csr()

    # -- compiled forms -----------------------------------------------------------------------
    def compile(self, n_wires: int, dtype=torch.complex64, device="cpu", kind: str = "expval",
                cache_bytes: Optional[int] = None):
        """The cached compiled form for (n_wires, dtype, device): ``kind`` is ``"expval"`` (needs
        a Hermitian H) or ``"apply"``; ``cache_bytes`` caps its cached per-group tables
        (default :data:`TABLE_CACHE_BYTES`)."""
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        key = (kind, n_wires, dtype, device, cache_bytes)
        plan = self._plans.get(key)
        if plan is None:
            _check_fits(self, n_wires, "compile")
            cb = TABLE_CACHE_BYTES if cache_bytes is None else int(cache_bytes)
            if kind == "expval":
                _require_hermitian([self], "expectation")
                plan = _ExpvalPlan([self], n_wires, dtype, device, cb)
            elif kind == "apply":
                plan = _ApplyPlan(self, n_wires, dtype, device, cb)
            else:
                raise ValueError(f"compile: kind must be 'expval' or 'apply', got {kind!r}")
            self._plans[key] = plan
        return plan


def _conj(c):
    return c.conjugate() if isinstance(c, complex) else c


def _format_terms(terms) -> str:
    if not terms:
        return "0"
    parts = []
    for k, (c, p) in enumerate(terms):
        word = "" if (p._x == 0 and p._z == 0) else str(p)
        if isinstance(c, complex):
            s = _fmt_coeff(c) + (f" * {word}" if word else "")
            parts.append(s if k == 0 else "+ " + s)
            continue
        neg = math.copysign(1.0, c) < 0
        a = abs(c)
        s = (word if a == 1 else f"{_fmt_coeff(a)} * {word}") if word else _fmt_coeff(a)
        parts.append((("-" if neg else "") if k == 0 else ("- " if neg else "+ ")) + s)
    return " ".join(parts)


def commutator(a, b) -> Hamiltonian:
    """``[a, b] = a b - b a`` for Pauli strings or Hamiltonians, simplified."""
    if not isinstance(a, (PauliString, Hamiltonian)):
        raise TypeError(f"commutator: expected a PauliString or Hamiltonian, got {type(a).__name__}")
    return Hamiltonian(a).commutator(b)


# ------------------------------------------------------------------------------------------------
# tables
def _parity_signs(k: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """(-1)^{popcount(k & m)} as float64, shape (len(k), len(masks))."""
    v = k[:, None] & masks[None, :]
    for s in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> s)
    return 1.0 - 2.0 * (v & 1).to(torch.float64)


def _walsh(coeffs: torch.Tensor, zloc, nbits: int, device) -> torch.Tensor:
    """T[o, k] = Σ_t coeffs[t, o] (-1)^{popcount(k & zloc[t])} for k < 2**nbits (complex128).

    One GEMM through a split of k into high and low bits: cost 2**nbits × terms.
    """
    coeffs = coeffs.to(device=device, dtype=torch.complex128)
    n_obs = coeffs.shape[1]
    if nbits == 0 or len(zloc) == 0:
        return coeffs.sum(0)[:, None].expand(n_obs, 2 ** nbits).clone()
    a = nbits // 2
    b = nbits - a
    z = torch.tensor(zloc, dtype=torch.int64, device=device)
    ah = _parity_signs(torch.arange(2 ** a, device=device), z >> b)             # (2^a, T)
    al = _parity_signs(torch.arange(2 ** b, device=device), z & ((1 << b) - 1))  # (2^b, T)
    parts = []
    for part in (coeffs.real, coeffs.imag):
        # (o, 2^a, T) @ (T, 2^b) -> (o, 2^a, 2^b)
        parts.append(((ah[None, :, :] * part.T[:, None, :]) @ al.T).reshape(n_obs, -1))
    return torch.complex(parts[0], parts[1])


_DIAGONAL_CACHE: "OrderedDict" = OrderedDict()


def diagonal_table(observables, n: int, dtype, device) -> Optional[torch.Tensor]:
    """``(n_obs, 2**n)`` real diagonals of all-Z Hermitian observables, or None if one is not.

    The adjoint method's bra Σ_k g_k O_k ψ is then ``ψ * (g @ table)``: one GEMM and one product
    instead of a pass per observable. Cached by content (the last 16 sets).
    """
    hams = [_as_observable(o) for o in observables]
    entries = []
    for o, h in enumerate(hams):
        if any(complex(c).imag != 0 for c in h._term_dict().values()):
            return None
        diag, groups = _groups_of(h, o, hermitian=True)
        if groups:
            return None
        entries += diag
    key = (tuple(entries), len(hams), n, dtype, str(device))
    table = _DIAGONAL_CACHE.get(key)
    if table is None:
        # the same table _ExpvalPlan builds for the diagonal terms of an expectation
        table = _table(entries, len(hams), range(n), device).real.to(REAL_OF[dtype])
        _DIAGONAL_CACHE[key] = table
        while len(_DIAGONAL_CACHE) > 16:
            _DIAGONAL_CACHE.popitem(last=False)
    return table


def _local(mask: int, support) -> int:
    """Wire mask -> bits over ``support`` (support[0] = most significant)."""
    s = len(support)
    out = 0
    for i, w in enumerate(support):
        if (mask >> w) & 1:
            out |= 1 << (s - 1 - i)
    return out


def _table(entries, n_obs: int, target_wires, device, sign_mask: int = 0) -> torch.Tensor:
    """Table over ``target_wires`` (ordered, first = most significant bit), per observable:
    ``T[o, k] = Σ_t c_t (-1)^{|z_t ∧ sign_mask|} (-1)^{|k ∧ z_t|}``, complex128 (n_obs, 2**len).

    ``entries``: (obs_index, z_mask, c) with c already carrying the i^{#Y} phase. Z bits on
    wires outside ``target_wires`` are ignored (they are 0 on the slice the table is for).
    """
    target = list(target_wires)
    keep = _mask_of(target)
    support_mask = 0
    for _, z, _ in entries:
        support_mask |= z & keep
    support = [w for w in target if (support_mask >> w) & 1]
    coeffs = torch.zeros(len(entries), n_obs, dtype=torch.complex128)
    zloc = []
    for t, (o, z, c) in enumerate(entries):
        coeffs[t, o] += -c if _popcount(z & sign_mask) % 2 else c
        zloc.append(_local(z & keep, support))
    compact = _walsh(coeffs, zloc, len(support), device)          # (n_obs, 2^|S|)
    if len(support) == len(target):
        return compact
    sset = set(support)
    shape = [n_obs] + [2 if w in sset else 1 for w in target]
    return compact.reshape(shape).expand([n_obs] + [2] * len(target)).contiguous().view(n_obs, -1)


def _segments(n: int, kind_of):
    """Axes of a view of the state: runs of consecutive wires of one kind merge ('p' never)."""
    shape, kinds = [], []
    for w in range(n):
        k = kind_of(w)
        if kinds and kinds[-1] == k and k != "p":
            shape[-1] *= 2
        else:
            shape.append(2)
            kinds.append(k)
    return shape, kinds


def _groups_of(h: "Hamiltonian", obs: int = 0, hermitian: bool = False):
    """Split merged terms: diagonal entries (obs, z, c) and {x: [(obs, z, c i^{#Y})]}."""
    diag, groups = [], {}
    for (x, z), c in h._term_dict().items():
        if c == 0:
            continue
        c = complex(c).real if hermitian else complex(c)
        if x == 0:
            diag.append((obs, z, c))
        else:
            groups.setdefault(x, []).append((obs, z, c * _PHASES[_popcount(x & z) % 4]))
    return diag, groups


def _sparse_entries(h: Hamiltonian, n: int, device):
    """COO entries of H on n wires: row j⊕x, column j, value D_x[j]."""
    diag, groups = _groups_of(h)
    if diag:
        groups = {0: diag, **groups}
    if not groups:
        return None, None, None
    idx = torch.arange(2 ** n, device=device)
    rows, cols, vals = [], [], []
    for x, entries in groups.items():
        rows.append(idx ^ _index_mask(x, n))
        cols.append(idx)
        vals.append(_table(entries, 1, range(n), device)[0])
    return torch.cat(rows), torch.cat(cols), torch.cat(vals)


# ------------------------------------------------------------------------------------------------
# validation helpers
_STRING_CACHE: "OrderedDict" = OrderedDict()


def _as_observable(obs, what="expectation") -> Hamiltonian:
    if isinstance(obs, Hamiltonian):
        return obs
    if isinstance(obs, PauliString):
        return obs._as_hamiltonian()
    if isinstance(obs, str):
        h = _STRING_CACHE.get(obs)
        if h is None:
            h = Hamiltonian.from_string(obs)
            _STRING_CACHE[obs] = h
            while len(_STRING_CACHE) > 64:
                _STRING_CACHE.popitem(last=False)
        return h
    raise TypeError(f"{what}: an observable must be a PauliString, a Hamiltonian or a string, got "
                    f"{type(obs).__name__}")


def _check_fits(h: Hamiltonian, n: int, what: str, where: str = "") -> None:
    if h._n_wires is not None and h._n_wires != n:
        raise ValueError(f"{what}: the Hamiltonian{where} is declared on {h._n_wires} wires but the state "
                         f"has {n} qubits")
    if h._support >> n:
        k, (c, p) = next((k, t) for k, t in enumerate(h._terms) if (t[1]._x | t[1]._z) >> n)
        raise ValueError(f"{what}: term {k} ({_fmt_coeff(c)} * {p}){where} acts on wire {max(p.wires)} "
                         f"but the state has {n} qubits")


def _require_hermitian(hs, what: str) -> None:
    for i, h in enumerate(hs):
        if h.is_hermitian:
            continue
        c, p = h._non_hermitian_term()
        where = f" (observable {i})" if len(hs) > 1 else ""
        raise ValueError(f"{what}: the Hamiltonian{where} is not Hermitian: term {_fmt_coeff(c)} * {p} has "
                         f"a complex coefficient, so ⟨ψ|H|ψ⟩ is not real; use apply_hamiltonian(state, H) "
                         f"for H·ψ and take the inner product yourself")


def _prepare_state(state, what: str):
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{what}: state must be a torch.Tensor, got {type(state).__name__}")
    squeeze = state.dim() == 1
    if squeeze:
        state = state.unsqueeze(0)
    n = n_wires_of(state)
    if not state.is_contiguous():
        state = state.contiguous()
    return state, n, squeeze


class _DiagonalExpectation(torch.autograd.Function):
    """(r ∘ r) @ w for the amplitudes' real view r; backward is one GEMM and one product
    (autograd's own is a GEMM, two products and a sum of two state-sized terms)."""

    @staticmethod
    def forward(ctx, r, w):
        ctx.save_for_backward(r, w)
        return torch.mm(r * r, w)

    @staticmethod
    def backward(ctx, grad):
        r, w = ctx.saved_tensors
        grad_r = torch.mm(grad, w.T).mul_(r).mul_(2) if ctx.needs_input_grad[0] else None
        grad_w = torch.mm((r * r).T, grad) if ctx.needs_input_grad[1] else None
        return grad_r, grad_w


class _NativeDiagonal(torch.autograd.Function):
    """Σ_i |ψ_i|² D[o, i] by the native kernel; backward 2 ψ Σ_o g_o D[o] natively, or by torch
    ops when a graph of the backward is asked for (Hessians)."""

    @staticmethod
    def forward(ctx, psi, table):
        ctx.save_for_backward(psi)
        ctx.table = table
        return native.diagonal_expval(psi, table).to(table.dtype)

    @staticmethod
    def backward(ctx, grad):
        psi, = ctx.saved_tensors
        if torch.is_grad_enabled():
            return 2 * psi * (grad.to(ctx.table.dtype) @ ctx.table), None
        return native.diagonal_expval_grad(psi, grad, ctx.table), None


class _NativeBitSums(torch.autograd.Function):
    """The diagonal part of a plan whose Z's are single wires, from the native bit sums (E =
    sums @ bit_coef); backward one native pass, or torch ops on the table for a graph of it."""

    @staticmethod
    def forward(ctx, psi, plan):
        ctx.save_for_backward(psi)
        ctx.plan = plan
        return (native.bit_sums(psi) @ plan.bit_coef).to(plan.real)

    @staticmethod
    def backward(ctx, grad):
        psi, = ctx.saved_tensors
        plan = ctx.plan
        if torch.is_grad_enabled():
            return 2 * psi * (grad.to(plan.real) @ plan.d0), None
        return native.bit_sums_grad(psi, grad.to(torch.float64) @ plan.bit_coef.T), None


def _bit_coefficients(diag, n_obs: int, n: int) -> torch.Tensor:
    """(n + 1, n_obs) float64 C with ⟨O_o⟩ = Σ_j S_j C[j, o] for the native bit sums S: the
    observables' weights on [1, Z_0, …, Z_{n−1}] mapped by ``native.z_of_bit_sums``."""
    weights = torch.zeros(n + 1, n_obs, dtype=torch.float64)
    for o, z, c in diag:
        weights[z.bit_length(), o] += c          # z: 0 (a constant) or the bit of wire w (row 1 + w)
    return native.z_of_bit_sums(n) @ weights


def _grad_mode(state) -> bool:
    return torch.is_grad_enabled() and state.requires_grad


_flip_out = torch.ops.aten.flip.out
# the native kernel sums a group over all amplitudes (not its pairs) when the pivot is on one of
# this many last index bits: pair runs shorter than a vector register (4 complex64, 2 complex128)
_FULL_SUM_BITS = {torch.complex64: 2, torch.complex128: 1}


# ------------------------------------------------------------------------------------------------
class _NativePairs(torch.autograd.Function):
    """The X-mask groups' part of ⟨ψ|O_o|ψ⟩ by the native kernel; backward by the native gradient
    kernel, or (when a graph of the backward is asked for: Hessians) by autograd through the
    plan's torch loop."""

    @staticmethod
    def forward(ctx, psi, plan):
        ctx.save_for_backward(psi)
        ctx.plan = plan
        spec, _tables = plan.native_spec()
        return native.expval_pairs(psi, spec, plan.n_obs).to(plan.real)

    @staticmethod
    def backward(ctx, grad):
        psi, = ctx.saved_tensors
        plan = ctx.plan
        if torch.is_grad_enabled():
            E = plan._loop_grad(psi, torch.zeros(psi.shape[0], plan.n_obs, dtype=plan.real))
            return torch.autograd.grad(E, psi, grad, create_graph=True)[0], None
        spec, _tables = plan.native_spec()
        return native.expval_grad(psi, spec, grad), None


class _Group:
    __slots__ = ("x", "xb", "entries", "shape", "pdim", "half_shape", "flip_dims", "table", "cost",
                 "rot", "tables", "layouts", "native", "pivot_bit")


class _ExpvalPlan:
    """Compiled ⟨ψ|O_o|ψ⟩ for a tuple of Hermitian observables on n wires.

    No-grad loop path, per group: the pivot p is the last wire of x in the group's wire layout.
    The pairs ψ₀[k] conj(ψ₁[k⊕x']) are formed by one multiply per pattern of the x' bits on
    strided views (no flip pass) when x' has at most :data:`_MAX_SLICE_BITS` wires, else by one
    ``flip`` and one multiply; then one complex GEMM/GEMV against the group's table.
    torch's elementwise kernels are slow on short contiguous runs, which is what X masks ending
    near the last wire produce, so: from :data:`_BATCH_MINOR_MIN` states on, the batch is
    transposed to the innermost axis once per call (every run is then >= B long); for fewer
    states on many wires a group may use the wire order rotated by r in {n/4, n/2, 3n/4}
    (wires r..n-1, 0..r-1) when that leaves a much longer run after its last X wire
    (:func:`_choose_rotations`). The autograd path uses plain ``torch.flip`` on the natural order.
    """

    def __init__(self, hams, n: int, dtype, device, cache_bytes: int):
        if dtype not in COMPLEX_DTYPES:
            raise TypeError(f"expectation: dtype must be complex64 or complex128, got {dtype}")
        self.n, self.dtype, self.device = n, dtype, device
        self.real = REAL_OF[dtype]
        self.n_obs = len(hams)
        N = 2 ** n
        diag, groups = [], {}
        for o, h in enumerate(hams):
            d, g = _groups_of(h, o, hermitian=True)
            diag += d
            for x, entries in g.items():
                groups.setdefault(x, []).extend(entries)
        self.has_diagonal, self._diag = bool(diag), diag
        self._w0 = self._d0 = None
        # constants and single-wire Z's (the ⟨Z_w⟩ readout): the native kernel's bit sums need no
        # table, so (n_obs, N) tables are built only where another path asks for them
        self.bit_coef = _bit_coefficients(diag, self.n_obs, n) \
            if diag and all(_popcount(z) <= 1 for _, z, _ in diag) else None
        self.groups = []
        rotations = _choose_rotations(list(groups), n)
        for x, entries in groups.items():
            g = _Group()
            g.x, g.xb, g.entries = x, _index_mask(x, n), entries
            g.rot = rotations[x]
            support = 0
            for _, z, _ in entries:
                support |= z
            g.cost = len(entries) * 2 ** _popcount(support)
            g.tables, g.native = {}, None
            g.pivot_bit = n - x.bit_length()      # index bit of the pivot (the last wire of x)
            g.layouts = {r: _layout(x, n, r) for r in {0, g.rot}}
            # autograd path: natural order, pivot = last wire of x, torch.flip on the view
            p = x.bit_length() - 1
            xp = x & ~(1 << p)
            shape, kinds = _segments(n, lambda w: "p" if w == p else ("x" if (xp >> w) & 1 else "o"))
            pd = kinds.index("p")
            g.shape, g.pdim = tuple(shape), pd + 1
            g.half_shape = tuple(shape[:pd] + shape[pd + 1:])
            g.flip_dims = [i + 1 for i, k in enumerate(kinds[:pd] + kinds[pd + 1:]) if k == "x"]
            self.groups.append(g)
        # Tables are cached while within budget. Where the native kernel runs (CPU), only its
        # compact tables are needed: everything is built on first use. Elsewhere the costliest to
        # rebuild are built now (natural order always; the rotated one too for groups that use it).
        self.table_bytes = N * self.n_obs * torch.empty((), dtype=self.real).element_size()
        self.cache_bytes = self.budget = cache_bytes
        if not (torch.device(device).type == "cpu" and native.library() is not None):
            for g in sorted(self.groups, key=lambda g: -g.cost):
                for r in sorted({0, g.rot}):
                    if self.table_bytes <= self.budget:
                        self.table(g, r)
        self._stack = None
        self._native = None
        self._specs = OrderedDict()

    def _diagonal_tables(self):
        if self._w0 is None and self.has_diagonal:
            d0 = _table(self._diag, self.n_obs, range(self.n), self.device).real            # (n_obs, N)
            # each weight twice (re, im rows), so Σ D |ψ|² is one GEMM on view_as_real(ψ)²
            self._w0 = d0.T.repeat_interleave(2, dim=0).to(self.real).contiguous()       # (2N, n_obs)
            self._d0 = d0.to(self.real).contiguous()                                      # native: (n_obs, N)
        return self._w0, self._d0

    @property
    def w0(self):
        """The diagonal part as a (2N, n_obs) real table (None without one), built on first use."""
        return self._diagonal_tables()[0]

    @property
    def d0(self):
        """The diagonal part as the native kernel's (n_obs, N) table, built on first use."""
        return self._diagonal_tables()[1]

    @property
    def cached_bytes(self) -> int:
        return self.cache_bytes - self.budget

    @property
    def n_cached(self) -> int:
        """Number of groups with at least one cached table."""
        return sum(bool(g.tables) or g.native is not None for g in self.groups)

    def _keep(self, nbytes: int) -> bool:
        if nbytes <= self.budget:
            self.budget -= nbytes
            return True
        return False

    def _build(self, g, r: int) -> torch.Tensor:
        """Real (2K, n_obs) table over the pivot-0 half in layout r: rows 2 Re D, -2 Im D
        interleaved, so that Re Σ w D is one real GEMV on view_as_real(w) (real BLAS is several
        times faster than complex GEMV here)."""
        d = self._diagonals(g, r)
        w = torch.stack([2 * d.real, -2 * d.imag], dim=-1)             # (n_obs, K, 2)
        return w.reshape(self.n_obs, -1).T.to(self.real).contiguous()

    def _diagonals(self, g, r: int) -> torch.Tensor:
        """The group's D over its pivot-0 half in layout r: (n_obs, K) complex128."""
        lay = g.layouts[r]
        return _table(g.entries, self.n_obs, [w for w in lay.order if w != lay.pivot], self.device)

    def table(self, g, r: int) -> torch.Tensor:
        t = g.tables.get(r)
        if t is None:
            t = self._build(g, r)
            if self._keep(self.table_bytes):
                g.tables[r] = t
        return t

    def native_tables(self, g):
        """The native kernel's tables of a group: real (2 Re D, -2 Im D or None) over the
        pivot-0 half as (K, n_obs); for a single observable whose pivot is on the last
        :data:`_FULL_SUM_BITS` index bits, (Re F, -Im F) over all N amplitudes instead
        (F = D on the pivot-0 half, the partner's conj(D) on the other; see native.c)."""
        if g.native is not None:
            return g.native
        d = self._diagonals(g, 0)
        re, im = 2 * d.real, (-2 * d.imag if bool(d.imag.any()) else None)
        full = self.n_obs == 1 and self.n >= 3 and g.pivot_bit < _FULL_SUM_BITS[self.dtype]
        if full:
            i, j = self._pair_indices(g, "cpu")
            fr = torch.empty(2 ** self.n, dtype=torch.float64)
            fr[i] = fr[j] = re[0] / 2
            re = fr[None]
            if im is not None:
                fi = torch.empty(2 ** self.n, dtype=torch.float64)
                fi[i], fi[j] = im[0] / 2, -im[0] / 2
                im = fi[None]
        tables = tuple(None if t is None else t.T.to(self.real).contiguous() for t in (re, im)) + (full,)
        if self._keep(sum(t.numel() * t.element_size() for t in tables[:2] if t is not None)):
            g.native = tables
        return tables

    def _pair_indices(self, g, device):
        """i over the group's pivot-0 half (k with a 0 inserted at the pivot bit, in k order) and
        its partner j = i ^ x, as index tensors."""
        k = torch.arange(2 ** (self.n - 1), device=device)
        i = k + (k & ~((1 << g.pivot_bit) - 1))
        return i, i ^ g.xb

    def _stacked(self):
        """Gather path, all groups at once: the indices (ΣG·K,) of ψ₀[k] and of ψ₁[k⊕x'] for k over
        each group's pivot-0 half (pivot p = last X wire, natural order), and the groups' tables
        stacked to (ΣG·2K, n_obs). Two gathers, one product and one GEMM per call, whatever the
        number of X masks (one set per pivot class cost ~4 calls per class)."""
        if self._stack is None:
            zeros, flips, tables = [], [], []
            for g in sorted(self.groups, key=lambda g: g.x.bit_length()):
                i, j = self._pair_indices(g, self.device)
                zeros.append(i)
                flips.append(j)
                tables.append(self.table(g, 0))
            self._stack = (torch.cat(zeros), torch.cat(flips), torch.cat(tables, 0))
        return self._stack

    def use_gather(self, batch: int) -> bool:
        G, N = len(self.groups), 2 ** self.n
        return G > 1 and G * N // 2 <= _GATHER_MAX_TABLE and batch * G * N // 2 <= _GATHER_MAX_WORK

    def native_spec(self):
        """(xb, pbit, full, re, im) of every group for the native kernel (see
        :func:`native.expval_pairs`), and the tables they point at. Cached when every table is;
        tables past the cache cap are rebuilt per call, as on the other paths."""
        if self._native is not None:
            return self._native
        tables = [self.native_tables(g) for g in self.groups]
        xb = torch.tensor([g.xb for g in self.groups], dtype=torch.int64)
        pbit = torch.tensor([g.pivot_bit for g in self.groups], dtype=torch.int64)
        full = torch.tensor([f for _, _, f in tables], dtype=torch.int64)
        tre = torch.tensor([re.data_ptr() for re, _, _ in tables], dtype=torch.int64)
        tim = torch.tensor([0 if im is None else im.data_ptr() for _, im, _ in tables], dtype=torch.int64)
        spec = ((xb, pbit, full, tre, tim), tables)
        if all(g.native is not None for g in self.groups):
            self._native = spec
        return spec

    def apply_native(self, psi: torch.Tensor) -> torch.Tensor:
        """H·ψ of the plan's single (Hermitian) observable by the native kernels."""
        return self.weighted_apply(psi, torch.ones(psi.shape[0], 1))

    def weighted_apply(self, psi: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Σ_o weights[:, o] O_o ψ per sample by the native kernels: half the gradient of
        Σ weights·⟨O⟩, so the expectation kernels' backward does it."""
        half = 0.5 * weights
        if self.bit_coef is not None:
            out = native.bit_sums_grad(psi, half.to(torch.float64) @ self.bit_coef.T)
        elif self.has_diagonal:
            out = native.diagonal_expval_grad(psi, half, self.d0)
        else:
            out = torch.zeros_like(psi)
        if self.groups:
            spec, _tables = self.native_spec()
            native.expval_grad(psi, spec, half, out=out)
        return out

    def __call__(self, psi: torch.Tensor, method: str = "auto") -> torch.Tensor:
        if method not in ("auto", "loop", "gather", "native"):
            raise ValueError(f"expectation: method must be 'auto', 'loop', 'gather' or 'native', got {method!r}")
        if method == "native" and not native.runs_on(psi):
            raise ValueError("expectation: method='native' needs a contiguous complex CPU state and the native "
                             f"library ({native.status()})")
        B, N = psi.shape
        grad = _grad_mode(psi)
        r = torch.view_as_real(psi).reshape(B, 2 * N)
        if not self.has_diagonal:
            E = torch.zeros(B, self.n_obs, dtype=self.real, device=psi.device)
        elif method in ("auto", "native") and native.runs_on(psi) and self.bit_coef is not None:
            E = _NativeBitSums.apply(psi, self) if grad else (native.bit_sums(psi) @ self.bit_coef).to(self.real)
        elif method in ("auto", "native") and native.runs_on(psi):
            E = _NativeDiagonal.apply(psi, self.d0) if grad else native.diagonal_expval(psi, self.d0).to(self.real)
        elif self.n_obs == 1 and not grad:
            E = torch.mv(r * r, self.w0[:, 0]).unsqueeze(1)
        elif grad:
            E = _DiagonalExpectation.apply(r, self.w0)
        else:
            E = torch.mm(r * r, self.w0)
        if not self.groups:
            return E
        if method == "native" or (method == "auto" and native.runs_on(psi)):
            if grad:
                return E + _NativePairs.apply(psi, self)
            spec, _tables = self.native_spec()
            return E.add_(native.expval_pairs(psi, spec, self.n_obs))
        if method == "gather" or (method == "auto" and self.use_gather(B)):
            # torch.gather: ~5x faster than index_select here
            index_0, index_1, table = self._stacked()
            A = torch.gather(psi, 1, index_0.expand(B, -1))
            P = torch.gather(torch.conj_physical(psi), 1, index_1.expand(B, -1))
            W = torch.view_as_real(P * A if grad else P.mul_(A)).reshape(B, -1)
            E = E + W @ table if grad else _accumulate(E, W, table)
            return E
        if grad:
            return self._loop_grad(psi, E)
        return self._loop(psi, E)

    def _loop_grad(self, psi, E):
        B, N = psi.shape
        psic = torch.conj_physical(psi)
        for g in self.groups:
            shp = (B,) + g.shape
            f = psic.view(shp).select(g.pdim, 1)
            if g.flip_dims:
                f = torch.flip(f, g.flip_dims)
            w = torch.view_as_real(f * psi.view(shp).select(g.pdim, 0)).reshape(B, N)
            E = E + w @ self.table(g, 0)
        return E

    def _spec(self, B: int):
        """Per-call argument tuples for batch size B (cached for a few B per plan)."""
        spec = self._specs.get(B)
        if spec is None:
            minor = B >= _BATCH_MINOR_MIN
            spec = (minor, [_group_spec(g.layouts[0 if minor else g.rot], self.n, B, minor)
                            for g in self.groups])
            self._specs[B] = spec
            while len(self._specs) > 8:
                self._specs.popitem(last=False)
        return spec

    def _loop(self, psi, E):
        B, N = psi.shape
        n, K = self.n, N // 2
        minor, specs = self._spec(B)
        layouts = {}
        for g in self.groups:
            r = 0 if minor else g.rot
            if r not in layouts:
                layouts[r] = _rotated(psi, n, r, minor)
        n_obs = self.n_obs
        buf = torch.empty(K * B, dtype=psi.dtype, device=psi.device)
        if minor:
            W = torch.view_as_real(buf).view(K, 2 * B)
            acc = torch.zeros(2 * n_obs, 2 * B, dtype=self.real, device=psi.device)
        else:
            W = torch.view_as_real(buf).view(B, 2 * K)
        for g, sp in zip(self.groups, specs):
            r = 0 if minor else g.rot
            a, ac = layouts[r]
            if sp[0] == "slices":
                _, size, st_full, st_half, offsets = sp
                for a_off, b_off, o_off in offsets:
                    torch.mul(a.as_strided(size, st_full, a_off), ac.as_strided(size, st_full, b_off),
                              out=buf.as_strided(size, st_half, o_off))
            else:
                _, size, st_full, st_half, p_off, dims = sp
                dst = buf.as_strided(size, st_half, 0)
                _flip_out(ac.as_strided(size, st_full, p_off), dims, out=dst)
                dst.mul_(a.as_strided(size, st_full, 0))
            t = self.table(g, r)
            if minor:
                acc.addmm_(t.view(K, 2 * n_obs).T, W)     # [(c, o), (b, c')]
            else:
                E = _accumulate(E, W, t)
        if minor:
            acc = acc.view(2, n_obs, B, 2)
            E = E + (acc[0, :, :, 0] + acc[1, :, :, 1]).T
        return E


def _accumulate(E: torch.Tensor, W: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """E += W @ table in place (no autograd), as a GEMV when there is one observable."""
    if table.shape[1] == 1:
        E.view(-1).addmv_(W, table.view(-1))
    else:
        E.addmm_(W, table)
    return E


_BATCH_MINOR_MIN = 8
"""From this batch size on, the loop path works on the transposed state (2**n, B)."""

_MAX_SLICE_BITS = 3
"""Groups whose x has at most this many wires besides the pivot multiply strided slices
(2**bits multiplies) instead of flipping."""

_ROTATE_MIN_WIRES = 14
_ROTATION_COST = 6.0
"""With few states on n >= 14 wires, groups may use the wire order rotated by n/4, n/2 or 3n/4
(a transposed copy of the state and its conjugate, made once per call: about
``_ROTATION_COST`` clone-times). Rotations are taken greedily while the modelled saving
(:func:`_pair_cost`, from the length of the contiguous run after a group's last X wire)
exceeds that cost."""


def _pair_cost(gap: int) -> float:
    """Modelled clone-times of a group's pair products when ``gap`` wires follow its last X wire
    (measured on a 2-core CPU: runs of 1-4 amplitudes are 3-9x slower than long ones)."""
    return 1.2 + 8.0 / 2 ** gap


def _choose_rotations(xs, n: int) -> dict:
    """{x: rotation} for the batch-first loop path."""
    choice = {x: 0 for x in xs}
    if n < _ROTATE_MIN_WIRES:
        return choice
    cands = sorted({n // 4, n // 2, (3 * n) // 4} - {0})
    cost = {x: _pair_cost(_tail_gap(x, n, 0)) for x in xs}
    while cands:
        best, best_gain, best_moves = None, 0.0, []
        for r in cands:
            moves = [x for x in xs if _pair_cost(_tail_gap(x, n, r)) < cost[x]]
            gain = sum(cost[x] - _pair_cost(_tail_gap(x, n, r)) for x in moves) - _ROTATION_COST
            if gain > best_gain:
                best, best_gain, best_moves = r, gain, moves
        if best is None:
            break
        for x in best_moves:
            choice[x] = best
            cost[x] = _pair_cost(_tail_gap(x, n, best))
        cands.remove(best)
    return choice


class _Layout:
    __slots__ = ("order", "pivot", "pivot_pos", "xprime_pos", "dims")


def _tail_gap(x: int, n: int, r: int) -> int:
    """Number of non-X wires after the last X wire in the order r..n-1, 0..r-1."""
    order = list(range(r, n)) + list(range(r))
    last = max(i for i, w in enumerate(order) if (x >> w) & 1)
    return n - 1 - last


def _layout(x: int, n: int, r: int) -> _Layout:
    """Wire order r..n-1, 0..r-1; pivot = last X wire in it; axes: x' wires and free runs."""
    lay = _Layout()
    lay.order = list(range(r, n)) + list(range(r))
    pos = {w: i for i, w in enumerate(lay.order)}
    xpos = sorted(pos[w] for w in _wires_of_mask(x))
    pp = xpos[-1]
    lay.pivot, lay.pivot_pos = lay.order[pp], pp
    lay.xprime_pos = xpos[:-1]
    dims = []          # ["x", i, i] or ["f", first, last] over positions, pivot excluded
    for i in range(n):
        if i == pp:
            continue
        if i in lay.xprime_pos:
            dims.append(["x", i, i])
        elif dims and dims[-1][0] == "f" and dims[-1][2] == i - 1:
            dims[-1][2] = i
        else:
            dims.append(["f", i, i])
    lay.dims = dims
    return lay


def _group_spec(lay: _Layout, n: int, B: int, minor: bool):
    """as_strided arguments of a group for batch size B (batch first, or last when ``minor``)."""
    N, K = 2 ** n, 2 ** (n - 1)
    scale = B if minor else 1
    pp = lay.pivot_pos

    def full_st(i):          # stride of layout position i in the full state
        return scale * 2 ** (n - 1 - i)

    def half_st(i):          # ... in the pivot-0 half
        return scale * 2 ** (n - 2 - (i - 1 if i > pp else i))

    def finish(sizes, sf, sh):
        if minor:
            return tuple(sizes) + (B,), tuple(sf) + (1,), tuple(sh) + (1,)
        return (B,) + tuple(sizes), (N,) + tuple(sf), (K,) + tuple(sh)

    p_off = full_st(pp)
    nx = len(lay.xprime_pos)
    if nx <= _MAX_SLICE_BITS:
        sizes, sf, sh = [], [], []
        for kind, first, last in lay.dims:
            if kind == "f":
                sizes.append(2 ** (last - first + 1))
                sf.append(full_st(last))
                sh.append(half_st(last))
        size, st_full, st_half = finish(sizes, sf, sh)
        offsets = []
        for s in range(2 ** nx):
            bits = [(s >> (nx - 1 - j)) & 1 for j in range(nx)]
            a_off = sum(b * full_st(i) for b, i in zip(bits, lay.xprime_pos))
            b_off = sum((1 - b) * full_st(i) for b, i in zip(bits, lay.xprime_pos)) + p_off
            o_off = sum(b * half_st(i) for b, i in zip(bits, lay.xprime_pos))
            offsets.append((a_off, b_off, o_off))
        return ("slices", size, st_full, st_half, offsets)
    sizes, sf, sh, dims = [], [], [], []
    for kind, first, last in lay.dims:
        if kind == "x":
            dims.append(len(sizes) + (0 if minor else 1))
        sizes.append(2 ** (last - first + 1))
        sf.append(full_st(last))
        sh.append(half_st(last))
    size, st_full, st_half = finish(sizes, sf, sh)
    return ("flip", size, st_full, st_half, p_off, dims)


def _rotated(psi: torch.Tensor, n: int, r: int, minor: bool):
    """Flat (state, conj state) in the layout r..n-1, 0..r-1; batch innermost when ``minor``."""
    B, N = psi.shape
    if minor:
        src = psi.view(B, 2 ** r, 2 ** (n - r)).permute(2, 1, 0) if r else psi.T
    elif r:
        src = psi.view(B, 2 ** r, 2 ** (n - r)).transpose(1, 2)
    else:
        src = psi
    a = src.contiguous().view(-1)
    ac = torch.empty_like(a)
    torch.conj_physical(a, out=ac)
    return a, ac


class _ApplyPlan:
    """Compiled H·ψ (any coefficients) on n wires: ``out[i] = Σ_x F_x[i] ψ[i⊕x]`` with
    ``F_x[i] = D_x[i⊕x]``.

    No-grad loop path: per group, one ``addcmul_`` per pattern of the X bits on strided views
    (``out[s] += F[s] ψ[s̄]``) when x has at most :data:`_MAX_APPLY_SLICE_BITS` wires, else one
    ``flip`` of the state and one ``addcmul_``; from :data:`_BATCH_MINOR_MIN` states on it works
    on the transposed state (2**n, B) so that no contiguous run is shorter than B.
    """

    def __init__(self, h: Hamiltonian, n: int, dtype, device, cache_bytes: int):
        if dtype not in COMPLEX_DTYPES:
            raise TypeError(f"apply_hamiltonian: dtype must be complex64 or complex128, got {dtype}")
        self.n, self.dtype, self.device = n, dtype, device
        N = 2 ** n
        diag, groups = _groups_of(h)
        self.d0 = None
        if diag:
            d0 = _table(diag, 1, range(n), device)[0]
            self.d0 = d0.real.to(REAL_OF[dtype]) if not bool(d0.imag.any()) else d0.to(dtype)
        self.groups = []
        itemsize = torch.empty((), dtype=dtype).element_size()
        budget = cache_bytes
        for x, entries in groups.items():
            g = _Group()
            g.x, g.xb, g.entries = x, _index_mask(x, n), entries
            shape, kinds = _segments(n, lambda w: "x" if (x >> w) & 1 else "o")
            g.shape = tuple(shape)
            g.flip_dims = [i + 1 for i, k in enumerate(kinds) if k == "x"]
            g.table = None
            if N * itemsize <= budget:
                g.table = self._build(g)
                budget -= N * itemsize
            self.groups.append(g)
        self.cached_bytes = cache_bytes - budget
        self._stack = None
        self._specs = OrderedDict()

    @property
    def n_cached(self) -> int:
        """Number of groups with a cached table."""
        return sum(g.table is not None for g in self.groups)

    def _build(self, g: _Group) -> torch.Tensor:
        """F[i] = D[i⊕x] over all wires (natural order), complex (N,)."""
        return _table(g.entries, 1, range(self.n), self.device, sign_mask=g.x)[0].to(self.dtype).contiguous()

    def table(self, g):
        return g.table if g.table is not None else self._build(g)

    def _stacked(self):
        if self._stack is None:
            N = 2 ** self.n
            idx = torch.arange(N, device=self.device)
            xs = torch.tensor([g.xb for g in self.groups], dtype=torch.int64, device=self.device)
            index = (idx[None, :] ^ xs[:, None]).reshape(-1)
            table = torch.stack([self.table(g) for g in self.groups])          # (G, N)
            self._stack = (index, table)
        return self._stack

    def _spec(self, B: int):
        spec = self._specs.get(B)
        if spec is None:
            minor = B >= _BATCH_MINOR_MIN
            spec = (minor, [_apply_spec(g.x, self.n, B, minor) for g in self.groups])
            self._specs[B] = spec
            while len(self._specs) > 8:
                self._specs.popitem(last=False)
        return spec

    def __call__(self, psi: torch.Tensor, method: str = "auto") -> torch.Tensor:
        if method not in ("auto", "loop", "gather"):
            raise ValueError(f"apply_hamiltonian: method must be 'auto', 'loop' or 'gather', got {method!r}")
        B, N = psi.shape
        grad = _grad_mode(psi)
        G = len(self.groups)
        if not G:
            return psi * self.d0 if self.d0 is not None else torch.zeros_like(psi)
        if method == "gather" or (method == "auto" and G > 1 and G * N <= _GATHER_MAX_TABLE
                                  and B * G * N <= _GATHER_MAX_WORK):
            out = psi * self.d0 if self.d0 is not None else torch.zeros_like(psi)
            index, table = self._stacked()
            P = torch.gather(psi, 1, index.expand(B, -1)).view(B, G, N)
            P = P * table if grad else P.mul_(table)
            return out + P.sum(1)
        if grad:
            out = psi * self.d0 if self.d0 is not None else torch.zeros_like(psi)
            for g in self.groups:
                f = torch.flip(psi.view((B,) + g.shape), g.flip_dims)
                out = out + (f * self.table(g).view(g.shape)).reshape(B, N)
            return out
        minor, specs = self._spec(B)
        v = psi.T.contiguous().view(-1) if minor else psi.reshape(-1)
        if self.d0 is not None:
            out = (v.view(N, B) * self.d0[:, None]).view(-1) if minor else (psi * self.d0).view(-1)
        else:
            out = torch.zeros_like(v)
        for g, sp in zip(self.groups, specs):
            t = self.table(g)
            if sp[0] == "slices":
                _, size, st, st_t, offsets = sp
                for o_off, p_off, t_off in offsets:
                    out.as_strided(size, st, o_off).addcmul_(v.as_strided(size, st, p_off),
                                                             t.as_strided(size, st_t, t_off))
            else:
                _, size, st, st_t, dims = sp
                out.as_strided(size, st, 0).addcmul_(torch.flip(v.as_strided(size, st, 0), dims),
                                                     t.as_strided(size, st_t, 0))
        return out.view(N, B).T.contiguous() if minor else out.view(B, N)


_MAX_APPLY_SLICE_BITS = 4
"""Groups whose x has at most this many wires use 2**bits strided ``addcmul_`` (no flip)."""


def _apply_spec(x: int, n: int, B: int, minor: bool):
    """as_strided arguments (state/out, and the (N,) table broadcast over the batch)."""
    N = 2 ** n
    scale = B if minor else 1
    xpos = list(_wires_of_mask(x))
    runs = []                         # ["x", i, i] / ["f", first, last] over wires
    for w in range(n):
        if w in xpos:
            runs.append(["x", w, w])
        elif runs and runs[-1][0] == "f" and runs[-1][2] == w - 1:
            runs[-1][2] = w
        else:
            runs.append(["f", w, w])

    def st(i, s=scale):
        return s * 2 ** (n - 1 - i)

    def finish(sizes, s, t):
        if minor:
            return tuple(sizes) + (B,), tuple(s) + (1,), tuple(t) + (0,)
        return (B,) + tuple(sizes), (N,) + tuple(s), (0,) + tuple(t)

    if len(xpos) <= _MAX_APPLY_SLICE_BITS:
        sizes, s_, t_ = [], [], []
        for kind, first, last in runs:
            if kind == "f":
                sizes.append(2 ** (last - first + 1))
                s_.append(st(last))
                t_.append(st(last, 1))
        size, stv, stt = finish(sizes, s_, t_)
        k = len(xpos)
        offsets = []
        for pat in range(2 ** k):
            bits = [(pat >> (k - 1 - j)) & 1 for j in range(k)]
            o_off = sum(b * st(w) for b, w in zip(bits, xpos))
            p_off = sum((1 - b) * st(w) for b, w in zip(bits, xpos))
            t_off = sum(b * st(w, 1) for b, w in zip(bits, xpos))
            offsets.append((o_off, p_off, t_off))
        return ("slices", size, stv, stt, offsets)
    sizes, s_, t_, dims = [], [], [], []
    for kind, first, last in runs:
        if kind == "x":
            dims.append(len(sizes) + (0 if minor else 1))
        sizes.append(2 ** (last - first + 1))
        s_.append(st(last))
        t_.append(st(last, 1))
    size, stv, stt = finish(sizes, s_, t_)
    return ("flip", size, stv, stt, dims)


# ------------------------------------------------------------------------------------------------
_MULTI_CACHE: "OrderedDict" = OrderedDict()
_MULTI_CACHE_SIZE = 16


def _multi_plan(hams, n, dtype, device):
    """Compiled form for a list of observables (LRU keyed by identity; Hamiltonians are immutable)."""
    key = (tuple(id(h) for h in hams), n, dtype, device)
    hit = _MULTI_CACHE.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], hams)):
        _MULTI_CACHE.move_to_end(key)
        return hit[1]
    plan = _ExpvalPlan(hams, n, dtype, device, TABLE_CACHE_BYTES)
    _MULTI_CACHE[key] = (tuple(hams), plan)
    while len(_MULTI_CACHE) > _MULTI_CACHE_SIZE:
        _MULTI_CACHE.popitem(last=False)
    return plan


def _plan_for(hams, n, dtype, device):
    return hams[0].compile(n, dtype, device, "expval") if len(hams) == 1 else _multi_plan(hams, n, dtype, device)


def weighted_bra(state: torch.Tensor, observables, weights: torch.Tensor):
    """Σ_k weights[:, k] O_k ψ per sample by the native kernels (the adjoint method's bra: half
    the gradient of Σ weights·⟨O⟩), or None where they do not run on this state."""
    if not native.runs_on(state):
        return None
    hams = [_as_observable(o) for o in observables]
    return _plan_for(hams, n_wires_of(state), state.dtype, state.device).weighted_apply(state, weights)


def expectation(state: torch.Tensor, obs, shots: Optional[int] = None,
                generator: Optional[torch.Generator] = None, return_std: bool = False,
                method: str = "auto"):
    """⟨ψ|O|ψ⟩ for a batch of states ``(B, 2**n)`` (or one state ``(2**n,)``).

    ``obs`` is a PauliString, a Hamiltonian (or a string, read by ``Hamiltonian.from_string``),
    or a list of them. Returns a real ``(B,)`` tensor — ``(B, n_obs)`` for a list — in the
    state's real dtype, differentiable by autograd with respect to the state. Observables must
    be Hermitian (real coefficients); for others use :func:`apply_hamiltonian`.

    With ``shots=N`` the value is estimated from samples instead: the terms are split into
    qubit-wise commuting groups, each measured with N shots in its rotated basis, which gives an
    unbiased estimate of ⟨ψ|O|ψ⟩/⟨ψ|ψ⟩; ``generator`` seeds the sampling and
    ``return_std=True`` returns ``(estimate, standard_error)``. Shot estimates carry no gradient.

    ``method``: ``"auto"`` (default), ``"native"`` (one C call for all X masks: what ``"auto"``
    picks on CPU when :mod:`tql.kernels.native` is available), ``"loop"`` (one flip per X mask) or
    ``"gather"`` (all X masks in one gather, what ``"auto"`` picks otherwise for small states).
    """
    state, n, squeeze = _prepare_state(state, "expectation")
    single = not isinstance(obs, (list, tuple))
    hams = [_as_observable(obs)] if single else [_as_observable(o) for o in obs]
    if not hams:
        raise ValueError("expectation: the list of observables is empty")
    for i, h in enumerate(hams):
        _check_fits(h, n, "expectation", "" if single else f" (observable {i})")
    _require_hermitian(hams, "expectation")
    if shots is not None:
        mean, std = _shot_estimate(state, hams, n, shots, generator)
        if single:
            mean, std = mean[:, 0], std[:, 0]
        if squeeze:
            mean, std = mean[0], std[0]
        return (mean, std) if return_std else mean
    if return_std:
        raise ValueError("expectation: return_std=True needs shots=N (exact values have no error)")
    if generator is not None:
        raise ValueError("expectation: generator is only used with shots=N")
    plan = _plan_for(hams, n, state.dtype, state.device)
    out = plan(state, method)
    if single:
        out = out[:, 0]
    return out[0] if squeeze else out


def apply_hamiltonian(state: torch.Tensor, H, method: str = "auto") -> torch.Tensor:
    """H·ψ for a batch of states ``(B, 2**n)`` (or one ``(2**n,)``), one pass per distinct X mask.

    ``H``: any Pauli sum (Hermitian or not), a PauliString or a string. Differentiable by autograd.
    ``method``: ``"auto"``, ``"native"`` (the C kernels, for a Hermitian H on CPU: what ``"auto"``
    picks there), ``"loop"`` or ``"gather"``.
    """
    state, n, squeeze = _prepare_state(state, "apply_hamiltonian")
    h = _as_observable(H, "apply_hamiltonian")
    _check_fits(h, n, "apply_hamiltonian")
    native_ok = native.runs_on(state) and h.is_hermitian
    if method == "native" and not native_ok:
        raise ValueError("apply_hamiltonian: method='native' needs a Hermitian H and a contiguous complex CPU "
                         f"state (native library: {native.status()})")
    if method == "native" or (method == "auto" and native_ok):
        out = _NativeApply.apply(state, h.compile(n, state.dtype, state.device, "expval"))
    else:
        out = h.compile(n, state.dtype, state.device, "apply")(state, method)
    return out[0] if squeeze else out


class _NativeApply(torch.autograd.Function):
    """H·ψ for a Hermitian H by the native kernels on the expectation plan's tables (H·ψ is
    half the gradient of ⟨ψ|H|ψ⟩); backward is H·g again, so higher derivatives come free."""

    @staticmethod
    def forward(ctx, psi, plan):
        ctx.plan = plan
        return plan.apply_native(psi)

    @staticmethod
    def backward(ctx, grad):
        return _NativeApply.apply(grad.contiguous(), ctx.plan), None


# ------------------------------------------------------------------------------------------------
# shots
_INV_SQRT2 = 1 / math.sqrt(2)


def _rotation(letter: str, dtype, device) -> torch.Tensor:
    """U with U P U† = Z: the Hadamard for X, H S† for Y."""
    if letter == "X":
        m = [[_INV_SQRT2, _INV_SQRT2], [_INV_SQRT2, -_INV_SQRT2]]
    else:
        m = [[_INV_SQRT2, -1j * _INV_SQRT2], [_INV_SQRT2, 1j * _INV_SQRT2]]
    return torch.tensor(m, dtype=dtype, device=device)


def qwc_groups(paulis) -> list:
    """Greedy partition of PauliStrings into qubit-wise commuting groups (heaviest first):
    a list of lists of indices into ``paulis``."""
    order = sorted(range(len(paulis)), key=lambda i: -paulis[i].weight)
    groups = []   # [x, z, support, indices]
    for i in order:
        p = paulis[i]
        s = p._x | p._z
        for g in groups:
            both = g[2] & s
            if (g[0] & both) == (p._x & both) and (g[1] & both) == (p._z & both):
                g[0] |= p._x
                g[1] |= p._z
                g[2] |= s
                g[3].append(i)
                break
        else:
            groups.append([p._x, p._z, s, [i]])
    return [g[3] for g in groups]


def _shot_estimate(state, hams, n, shots, generator):
    if isinstance(shots, bool) or not isinstance(shots, numbers.Integral) or shots < 1:
        raise ValueError(f"expectation: shots must be a positive int, got {shots!r}")
    shots = int(shots)
    if generator is not None and torch.device(generator.device).type != state.device.type:
        raise ValueError(f"expectation: the generator is on {generator.device} but the state is on "
                         f"{state.device}")
    B, N = state.shape
    n_obs = len(hams)
    device = state.device
    real = REAL_OF[state.dtype]
    mean = torch.zeros(B, n_obs, dtype=torch.float64, device=device)
    var = torch.zeros(B, n_obs, dtype=torch.float64, device=device)
    keys, where, by_key = [], {}, {}
    const = [0.0] * n_obs
    for o, h in enumerate(hams):
        for (x, z), c in h._term_dict().items():
            c = complex(c).real
            if c == 0:
                continue
            if x == 0 and z == 0:
                const[o] += c
                continue
            if (x, z) not in where:
                where[(x, z)] = len(keys)
                keys.append(PauliString.from_masks(x, z))
            by_key.setdefault(where[(x, z)], []).append((o, c))
    mean += torch.tensor(const, dtype=torch.float64, device=device)
    state = state.detach()
    chunk = max(1, 2 ** 22 // B)
    for members in qwc_groups(keys):
        basis, entries = {}, []
        for k in members:
            p = keys[k]
            for w in p.wires:
                basis[w] = p.letter(w)
            for o, c in by_key[k]:
                entries.append((o, p._x | p._z, c))   # eigenvalue (-1)^{|outcome ∧ support|}
        psi = state
        for w, letter in sorted(basis.items()):
            if letter != "Z":
                psi = apply_matrix_unchecked(psi, _rotation(letter, state.dtype, device), (w,), n)
        probs = torch.view_as_real(psi).pow(2).sum(-1).to(torch.float64)
        table = _table(entries, n_obs, range(n), device).real              # (n_obs, N)
        counts = torch.zeros(B, N, dtype=torch.float64, device=device)
        done = 0
        while done < shots:
            m = min(chunk, shots - done)
            samples = torch.multinomial(probs, m, replacement=True, generator=generator)
            counts.scatter_add_(1, samples, torch.ones(B, m, dtype=torch.float64, device=device))
            done += m
        g_mean = counts @ table.T / shots
        g_m2 = counts @ (table * table).T / shots
        mean += g_mean
        # variance of the group's sample mean: unbiased sample variance / shots
        var += (g_m2 - g_mean * g_mean).clamp_min(0) / (shots - 1) if shots > 1 else float("inf")
    return mean.to(real), var.sqrt().to(real)
