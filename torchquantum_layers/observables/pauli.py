"""Pauli strings as two bit masks (X part, Z part) and the parsing of Pauli words.

``P = i^{|x∧z|} X^x Z^z``: products, commutation and phases are bit operations on the masks.
Arithmetic that leaves the Pauli group (sums, scalar multiples) returns a :class:`Hamiltonian`.
"""
from __future__ import annotations

import math
import numbers
import re
from typing import Iterable, Optional, Union

import torch

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


# PauliString and Hamiltonian are one algebra: the package imports this module first
from .hamiltonian import Hamiltonian  # noqa: E402
