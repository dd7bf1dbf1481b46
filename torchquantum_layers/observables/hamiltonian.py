"""``Hamiltonian``: an immutable weighted sum of Pauli strings, its string grammar, dense and
sparse forms, and its cached compiled forms (see :mod:`.expval_plan` and :mod:`.apply_plan`)."""
from __future__ import annotations

import math
import numbers
import re
import warnings
from collections import OrderedDict
from typing import Optional

import torch

from ..caching import building_cache
from .pauli import (Number, PauliString, _as_coeff, _check_n_wires, _combine, _fmt_coeff, _is_number,
                    _mask_product, _merge_n, _parse_factor, _popcount, _wires_of_mask)
from .tables import _sparse_entries


TABLE_CACHE_BYTES = 512 * 2 ** 20
"""Cap on the bytes of per-group tables one compiled form keeps (per Hamiltonian, n, dtype,
device and use). Groups past the cap rebuild their table at each call instead of caching it."""

DENSE_MAX_WIRES = 14
"""``to_dense`` refuses more wires than this unless ``force=True``."""

_HERMITIAN_RTOL = 1e-12

# ------------------------------------------------------------------------------------------------
# Hamiltonian string grammar: terms separated by + / -; a term is numbers, Pauli words and
# parenthesised sums joined by spaces or '*'; '@' between factors makes the term an operator
# product (repeated wires allowed). A parenthesised sum multiplies as an operator: "0.5*(Z0 + X1)",
# "(X0 + Y0) @ Z0", "(0.5+1j)*X0" (a sum of numbers is a complex coefficient).
_TOKEN_RE = re.compile(r"""\s*(?:
    (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[jJ]?)
  | (?P<word>[A-Za-z]+\d*)
  | (?P<op>[-+*@()])
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


_SIGNS = (("op", "+"), ("op", "-"))


class _Parser:
    """Recursive descent over the tokens: sum := term (± term)*; term := factor+;
    factor := number | Pauli word | '(' sum ')'. Terms are lists of (coeff, x mask, z mask)."""

    def __init__(self, text: str):
        self.text, self.toks, self.i = text, _tokenize(text), 0

    def _peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def parse(self) -> list:
        if not self.toks:
            raise ValueError(f"Hamiltonian.from_string: empty expression {self.text!r}")
        terms = self._sum()
        if self._peek() is not None:            # only an unmatched ')' stops a sum early
            raise ValueError(f"Hamiltonian.from_string: unmatched ')' in {self.text!r}")
        return [(c, PauliString.from_masks(x, z)) for c, x, z in terms]

    def _sum(self) -> list:
        terms = []
        while True:
            sign = 1
            while self._peek() in _SIGNS:
                sign = -sign if self._peek()[1] == "-" else sign
                self.i += 1
            terms += [(sign * c, x, z) for c, x, z in self._term()]
            if self._peek() not in _SIGNS:
                return terms

    def _term_end(self) -> int:
        """Index of the token that ends the term starting here (a sign or ')' at this depth)."""
        depth, j = 0, self.i
        while j < len(self.toks):
            tok = self.toks[j]
            if tok == ("op", "("):
                depth += 1
            elif tok == ("op", ")"):
                if depth == 0:
                    return j
                depth -= 1
            elif depth == 0 and tok in _SIGNS:
                return j
            j += 1
        return j

    def _term(self) -> list:
        end = self._term_end()
        flat = self.toks[self.i:end]
        product = ("op", "@") in flat
        words = [v for k, v in flat if k == "word"]
        sole = len(words) == 1 and ("op", "(") not in flat
        acc, seen, items = [(complex(1), 0, 0)], set(), 0
        while self.i < end:
            kind, val = self.toks[self.i]
            self.i += 1
            if kind == "num":
                acc = [(c * complex(val), x, z) for c, x, z in acc]
            elif kind == "word":
                factors = _parse_factor(val, self.text, sole=sole)
                for _, w in factors:
                    if w in seen and not product:
                        _combine([("Z", w), ("Z", w)], " ".join(words), allow_product=False)   # its error
                    seen.add(w)
                _, fx, fz = _combine(factors, val, allow_product=True)
                acc = _times(acc, [(complex(1), fx, fz)])
            elif val == "(":
                inner = self._sum()
                if self._peek() != ("op", ")"):
                    raise ValueError(f"Hamiltonian.from_string: unclosed '(' in {self.text!r}")
                self.i += 1
                if not inner:
                    raise ValueError(f"Hamiltonian.from_string: empty parentheses in {self.text!r}")
                merged = {}                     # "(0.5+1j)" is one complex coefficient
                for c, x, z in inner:
                    merged[(x, z)] = merged.get((x, z), 0) + c
                acc = _times(acc, [(c, x, z) for (x, z), c in merged.items()])
            elif val in "*@":
                if items == 0 or self.i >= end or self.toks[self.i][1] in "*@":
                    raise ValueError(f"Hamiltonian.from_string: {val!r} needs a factor on each side in "
                                     f"{self.text!r}")
                continue
            else:
                raise ValueError(f"Hamiltonian.from_string: unmatched ')' in {self.text!r}")
            items += kind != "op" or val == "("
        if items == 0:
            raise ValueError(f"Hamiltonian.from_string: empty term in {self.text!r}")
        return acc


def _times(left: list, right: list) -> list:
    """Operator product of two sums of (coeff, x, z), expanded term by term."""
    out = []
    for c1, x1, z1 in left:
        for c2, x2, z2 in right:
            phase, x, z = _mask_product(x1, z1, x2, z2)
            out.append((c1 * c2 * phase, x, z))
    return out


def _parse_hamiltonian(text: str):
    return _Parser(text).parse()


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

    __slots__ = ("_terms", "_n_wires", "_merged", "_plans", "_support", "_herm", "_read_through", "_split")

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
        self._read_through = None       # (observable, ReadoutError) this one is the read-out value of
        self._split = None

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_string(cls, text: str, n_wires: Optional[int] = None) -> "Hamiltonian":
        """Parse ``"0.5*Z0 Z1 - 0.2*X0 + 1.1"``.

        Terms are separated by ``+``/``-``; a term is numbers (``2``, ``1e-3``, ``(0.5+1j)``),
        Pauli factors (``X0``, or one letters-only label like ``XIZ``) and parenthesised sums
        (``0.5*(Z0 + X1)``, nested as deep as wanted) joined by spaces or ``*``, each wire at most
        once among the Pauli factors. Joining factors with ``@`` makes the term an operator product
        instead: ``"X0 @ Z0"`` is ``-1j * Y0`` (repeated wires allowed, phases kept); a
        parenthesised sum always multiplies as an operator: ``"(X0 + Z0) * Z0"`` is
        ``-1j * Y0 + 1``.
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
    def declared_n_wires(self) -> Optional[int]:
        """The ``n_wires`` given when it was built (None where it is inferred from the terms)."""
        return self._n_wires

    @property
    def wires(self) -> tuple:
        return _wires_of_mask(self._support)

    @property
    def constant(self) -> Number:
        """Sum of the coefficients of the identity terms."""
        return sum((c for c, p in self._terms if p._x == 0 and p._z == 0), 0.0)

    def split_constant(self) -> tuple:
        """``(H − c·I, c)``: the Hamiltonian without its identity terms and their coefficient sum
        ``c`` (:attr:`constant`), or ``(self, 0.0)`` where there is nothing to split (no identity
        term, or nothing but identity terms). Cached, so the first part's compiled plans are kept.

        Why: in complex64 a chemistry Hamiltonian's constant (−73 Ha for H2O) multiplies a state
        whose norm has drifted by ~1e-6 through the gates, a bias of ~1e-4 Ha in ⟨H⟩, and adds
        rounding noise of c·ε to every gradient; ⟨H⟩ = ⟨H − c⟩ + c·‖ψ‖² with ‖ψ‖ that of the
        input state (gates are unitary) has neither."""
        if self._split is None:
            rest = [(c, p) for c, p in self._terms if p._x or p._z]
            # a read-out value of another observable (ReadoutError.noisy_observable) is sampled
            # through its source with shots: a split copy would lose that link
            if len(rest) in (0, len(self._terms)) or self._read_through is not None:
                self._split = (self, 0.0)
            else:
                self._split = (Hamiltonian(rest, n_wires=self._n_wires), self.constant)
        return self._split

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
        tol = _HERMITIAN_RTOL * max([0.0] + [abs(c) for c in d.values()])
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

    def _commutator_terms(self, other):
        """(``{(x, z): coeff}`` of ``[self, other]`` unsimplified, max |c1| · max |c2|): the scale
        its rounding errors are relative to."""
        o = self._coerce(other)
        if o is None:
            raise TypeError(f"commutator: expected a Hamiltonian or PauliString, got {type(other).__name__}")
        a, b = self._term_dict(), o._term_dict()
        scale = max([abs(c) for c in a.values()], default=0.0) * max([abs(c) for c in b.values()], default=0.0)
        # commuting pairs cancel; anticommuting ones give 2 c1 c2 P1 P2
        out = OrderedDict()
        for (x1, z1), c1 in a.items():
            for (x2, z2), c2 in b.items():
                if c1 == 0 or c2 == 0 or (_popcount(x1 & z2) + _popcount(z1 & x2)) % 2 == 0:
                    continue
                ph, x, z = _mask_product(x1, z1, x2, z2)
                out[(x, z)] = out.get((x, z), 0) + 2 * ph * c1 * c2
        return o, out, scale

    def commutator(self, other) -> "Hamiltonian":
        """``[self, other] = self @ other - other @ self``, simplified: coefficients within 1e-12
        of the largest product of coefficients (rounding of cancelling sums) are dropped."""
        o, out, scale = self._commutator_terms(other)
        terms = [(_as_coeff(c, "commutator"), PauliString.from_masks(x, z)) for (x, z), c in out.items()]
        return Hamiltonian(terms, n_wires=_merge_n(self._n_wires, o._n_wires)).simplify(1e-12 * scale)

    def commutes_with(self, other, tol: float = 1e-12) -> bool:
        """True when ``[self, other]`` vanishes: every coefficient within ``tol`` times the largest
        product of a coefficient of each (a relative test, whatever the scale of the two)."""
        _, out, scale = self._commutator_terms(other)
        return all(abs(c) <= tol * scale for c in out.values())

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

    @classmethod
    def from_matrix(cls, matrix, tol: float = 1e-12) -> "Hamiltonian":
        """The Pauli sum of a dense ``(2**n, 2**n)`` matrix (:func:`~.decompose.pauli_decompose`):
        ``Hamiltonian.from_matrix(H.to_dense())`` gives ``H`` back."""
        from .decompose import pauli_decompose
        return pauli_decompose(matrix, tol)

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
            # the plans are built on this algebra, so they are imported late
            from .apply_plan import _ApplyPlan
            from .expval_plan import _ExpvalPlan

            _check_fits(self, n_wires, "compile")
            cb = TABLE_CACHE_BYTES if cache_bytes is None else int(cache_bytes)
            if kind not in ("expval", "apply"):
                raise ValueError(f"compile: kind must be 'expval' or 'apply', got {kind!r}")
            if kind == "expval":
                _require_hermitian([self], "expectation")
            with building_cache():
                plan = (_ExpvalPlan([self], n_wires, dtype, device, cb) if kind == "expval"
                        else _ApplyPlan(self, n_wires, dtype, device, cb))
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
# validation helpers
_STRING_CACHE: "OrderedDict" = OrderedDict()


def split_constants(observables) -> tuple:
    """``(observables without their identity terms, the terms' coefficients)`` for a list of
    Hamiltonians (:meth:`Hamiltonian.split_constant`); the coefficients are None where no
    observable has an identity term (then the list comes back as it is)."""
    split = [o.split_constant() if isinstance(o, Hamiltonian) else (o, 0.0) for o in observables]
    if all(c == 0 for _, c in split):
        return observables, None
    return [h for h, _ in split], [c for _, c in split]


def add_constants(values: torch.Tensor, constants, weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``values`` ``(B, n_obs)`` plus the identity terms' expectations: ``c`` times ``weights``
    ``(B,)`` (‖ψ₀‖² of the input states, or Tr ρ₀ for density matrices: conserved by unitary
    gates and trace-preserving channels), or ``c`` alone where ``weights`` is None (normalised
    default states). Through ``weights`` the input state's gradient keeps the constant's part."""
    c = torch.tensor([complex(k).real for k in constants], dtype=values.dtype, device=values.device)
    if weights is None:
        return values + c
    return values + weights.to(values.dtype)[:, None] * c


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


def _as_observable_list(obs, what: str):
    """``(Hamiltonians, single)``: one observable (``single``) or a non-empty list of them."""
    single = not isinstance(obs, (list, tuple))
    hams = [_as_observable(obs, what)] if single else [_as_observable(o, what) for o in obs]
    if not hams:
        raise ValueError(f"{what}: the list of observables is empty")
    return hams, single


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
