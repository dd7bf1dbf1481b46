"""Quantum state tomography from Pauli-basis measurements (all 3^n product bases).

:func:`collect` measures each state of a batch in every product basis ``b ∈ {X, Y, Z}^n`` with
``shots`` shots per basis and keeps the counts, a :class:`TomographyRecord` ``(B, 3**n, 2**n)``;
:func:`reconstruct` turns a record into density matrices ``(B, 2**n, 2**n)`` by

* ``"lstsq"``: linear inversion, the least-squares solution of ``Tr(E_bs ρ) = f_bs`` over the
  frequencies of all bases. For this (product) frame it is ``ρ = Σ_P ⟨P⟩ P / 2^n`` with each
  ⟨P⟩ the mean over the bases that measure P of the parity of its wires' outcomes. Unbiased,
  Hermitian, trace 1, not necessarily positive;
* ``"projected"``: the least-squares estimate projected onto the closest density matrix
  (Frobenius norm), by the eigenvalue projection of Smolin, Gambetta & Smith, PRL 108, 070502
  (2012) (:func:`closest_density_matrix`);
* ``"mle"``: maximum likelihood by Hradil's ``R ρ R`` iteration (``dilution`` ε gives the
  diluted, monotone version of Řeháček et al. ``(I + εR) ρ (I + εR)``), from ``I / 2^n``.

Layout: basis index ``b`` is the base-3 number of the wires' letters (X = 0, Y = 1, Z = 2, as
:data:`tql.shadows.BASES`), wire 0 the most significant digit; outcome index ``s`` has wire 0 as
the most significant bit (bit 0 = eigenvalue +1). Measuring X is H then Z, Y is H S† then Z.

Every map between a state, the outcome probabilities and the estimates is a tensor product of
one-wire maps, so each is applied as n batched passes (one small matrix product per wire over
the whole batch and all bases at once): the probabilities of all 3^n bases of a state vector
cost O(n 6^n) per state, never 3^n rotated copies of it, and a density matrix the same.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import torch

from .caching import lasting
from .kernels.state import COMPLEX_DTYPES, REAL_OF, resolve_dtype
from .shadows import _count

__all__ = ["TomographyRecord", "collect", "reconstruct", "state_tomography", "probabilities",
           "pauli_expectations", "expectation_from_record", "closest_density_matrix", "basis_labels",
           "MAX_WIRES"]

LETTERS = "XYZ"
MAX_WIRES = 8
METHODS = ("lstsq", "projected", "mle")
# elements (complex or real) of one chunk of the per-wire passes, and (row, shot) samples drawn at once
_CHUNK_ELEMENTS = 1 << 24
_CHUNK_SAMPLES = 1 << 22
# |norm² − 1| (trace − 1, hermiticity, negative probabilities) accepted from an input state
_STATE_TOL = {torch.complex64: 1e-4, torch.complex128: 1e-9}


# ------------------------------------------------------------------------------------------------
# one-wire maps
def _rotations() -> torch.Tensor:
    """(3, 2, 2) complex128: the unitary before a Z measurement that measures X (H), Y (H S†), Z (I)."""
    r = 1 / math.sqrt(2)
    h = torch.tensor([[r, r], [r, -r]], dtype=torch.complex128)
    sdg = torch.tensor([[1, 0], [0, -1j]], dtype=torch.complex128)
    return torch.stack([h, h @ sdg, torch.eye(2, dtype=torch.complex128)])


@functools.lru_cache(maxsize=None)
def _maps_cpu():
    """One-wire maps in complex128 (indices: (b, s) → 2b + s, (r, c) → 2r + c):
    amplitude ``A (6, 2)``: ⟨s|U_b|r⟩; probability ``M (6, 4)``: U_b[s,r] conj(U_b[s,c]);
    adjoint ``M^H (4, 6)``: the projector Π_bs = U_b† |s⟩⟨s| U_b as a vector;
    inverse ``D (4, 6)``: Π_bs − I/3 (the least-squares dual frame);
    Pauli ``T (4, 6)``: the frequencies' estimate of ⟨I⟩, ⟨X⟩, ⟨Y⟩, ⟨Z⟩ (I: the mean over bases)."""
    u = _rotations()
    amp = u.reshape(6, 2)
    prob = (u[:, :, :, None] * u[:, :, None, :].conj()).reshape(6, 4)
    adjoint = prob.conj().T.contiguous()
    eye = torch.eye(2, dtype=torch.complex128).reshape(4, 1)
    inverse = adjoint - eye / 3
    pauli = torch.zeros(4, 6, dtype=torch.float64)
    pauli[0] = 1 / 3
    for b in range(3):
        pauli[b + 1, 2 * b], pauli[b + 1, 2 * b + 1] = 1.0, -1.0
    return {"amplitude": amp, "probability": prob, "adjoint": adjoint, "inverse": inverse, "pauli": pauli}


@functools.lru_cache(maxsize=64)
@lasting
def _map(name: str, dtype, device) -> torch.Tensor:
    m = _maps_cpu()[name]
    if not m.is_complex():
        dtype = REAL_OF.get(dtype, dtype)
    return m.to(dtype=dtype, device=device)


def _per_wire(x: torch.Tensor, m: torch.Tensor, n: int) -> torch.Tensor:
    """``(B, d_in**n)`` → ``(B, d_out**n)``: the one-wire map ``m (d_out, d_in)`` on every axis
    (axis 0 = wire 0, the most significant digit), one batched product per wire."""
    d_out, d_in = m.shape
    B = x.shape[0]
    for w in range(n):
        rest = d_in ** (n - 1 - w)
        if rest == 1:
            x = x.reshape(-1, d_in) @ m.T
        else:
            x = torch.matmul(m, x.reshape(-1, d_in, rest))
    return x.reshape(B, d_out ** n)


def _interleave(x: torch.Tensor, n: int, first: int, second: int) -> torch.Tensor:
    """``(B, first**n · second**n)`` with all first digits before all second ones →
    ``(B, (first·second)**n)`` with each wire's pair together (and :func:`_separate` back)."""
    B = x.shape[0]
    order = [0] + [a for w in range(n) for a in (1 + w, 1 + n + w)]
    return x.reshape(B, *([first] * n + [second] * n)).permute(order).reshape(B, -1)


def _separate(x: torch.Tensor, n: int, first: int, second: int) -> torch.Tensor:
    B = x.shape[0]
    order = [0] + [1 + 2 * w for w in range(n)] + [2 + 2 * w for w in range(n)]
    return x.reshape(B, *([first, second] * n)).permute(order).reshape(B, first ** n, second ** n)


# ------------------------------------------------------------------------------------------------
# checks
def _check_size(n: int, what: str) -> None:
    if n > MAX_WIRES:
        bases, outcomes = 3 ** n, 2 ** n
        raise ValueError(f"{what}: {n} qubits need {bases:,} Pauli bases × {outcomes:,} outcomes = "
                         f"{bases * outcomes:,} counts per state ({bases * outcomes * 8 / 2 ** 20:,.0f} MiB of "
                         f"int64) and a {outcomes}-square density matrix; state tomography is limited to "
                         f"{MAX_WIRES} qubits (for larger registers estimate observables with tql.shadows)")


def _check_generator(generator, what):
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")


def _as_state(state, what):
    """(tensor (B, N) or (B, N, N), n, density) from a batch of state vectors, density matrices,
    one vector (N,) or a DensityMatrix; checks normalisation."""
    from .mixed.state import DensityMatrix
    if isinstance(state, DensityMatrix):
        state = state.tensor
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{what}: state must be a tensor (B, 2**n) or (B, 2**n, 2**n), got "
                        f"{type(state).__name__}")
    if state.dim() == 1:
        state = state.unsqueeze(0)
    if state.dim() not in (2, 3) or (state.dim() == 3 and state.shape[1] != state.shape[2]):
        raise ValueError(f"{what}: state must be state vectors (B, 2**n) or density matrices (B, 2**n, 2**n), "
                         f"got shape {tuple(state.shape)}")
    if state.dtype not in COMPLEX_DTYPES:
        raise TypeError(f"{what}: state dtype must be complex64 or complex128, got {state.dtype}")
    size = state.shape[1]
    n = size.bit_length() - 1
    if size < 2 or (1 << n) != size:
        raise ValueError(f"{what}: state size {size} is not a power of two >= 2 (shape {tuple(state.shape)})")
    if state.shape[0] < 1:
        raise ValueError(f"{what}: the batch is empty (shape {tuple(state.shape)})")
    _check_size(n, what)
    density = state.dim() == 3
    state = state.detach()
    tol = _STATE_TOL[state.dtype]
    if density:
        herm = (state - state.conj().transpose(1, 2)).abs().amax(dim=(1, 2))
        norm = torch.diagonal(state, dim1=1, dim2=2).sum(-1)
        bad = (herm > tol) | ((norm - 1).abs() > tol)
        kind = "a density matrix must be Hermitian with trace 1"
    else:
        norm = state.real.square().sum(-1) + state.imag.square().sum(-1)
        bad = (norm - 1).abs() > tol
        kind = "a state vector must have norm 1"
    bad = bad | ~torch.isfinite(norm.abs())
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        detail = f"trace {complex(norm[row]):.6g}" if density else f"squared norm {float(norm[row]):.6g}"
        raise ValueError(f"{what}: state {row} is not normalised ({detail}): {kind}")
    return state, n, density


# ------------------------------------------------------------------------------------------------
# the record
def basis_labels(n_wires: int) -> tuple:
    """The ``3**n`` basis labels in record order: ``("XX", "XY", "XZ", "YX", …)`` (letter i: wire i)."""
    n = _count(n_wires, "n_wires", "basis_labels")
    labels = [""]
    for _ in range(n):
        labels = [a + c for a in labels for c in LETTERS]
    return tuple(labels)


class TomographyRecord:
    """Counts ``(B, 3**n, 2**n)``: ``counts[i, b, s]`` outcomes ``s`` of basis ``b`` for state ``i``
    (module notes for the order; :attr:`labels` names the bases).

    ``counts`` are usually integers from :func:`collect`; any non-negative real numbers are
    accepted (frequencies or exact probabilities, e.g. to test the infinite-shot limit), each
    basis read by its own total. ``dtype`` is the complex dtype of the reconstructions (default:
    the library's; :func:`collect` passes the state's)."""

    def __init__(self, counts: torch.Tensor, dtype=None):
        what = "TomographyRecord"
        if not isinstance(counts, torch.Tensor):
            raise TypeError(f"{what}: counts must be a tensor (B, 3**n, 2**n), got {type(counts).__name__}")
        if counts.is_complex() or counts.dtype == torch.bool:
            raise TypeError(f"{what}: counts must be integer or real, got {counts.dtype}")
        if counts.dim() != 3:
            raise ValueError(f"{what}: counts must have shape (B, 3**n, 2**n), got {tuple(counts.shape)}")
        B, n_bases, n_outcomes = counts.shape
        n = n_outcomes.bit_length() - 1
        if n < 1 or (1 << n) != n_outcomes:
            raise ValueError(f"{what}: the last axis must hold 2**n outcomes, got {n_outcomes} (counts of shape "
                             f"{tuple(counts.shape)})")
        if n_bases != 3 ** n:
            raise ValueError(f"{what}: {n_outcomes} outcomes mean {n} qubits and 3**{n} = {3 ** n} Pauli bases, "
                             f"but counts has {n_bases} bases (shape {tuple(counts.shape)}); records of "
                             f"different registers cannot be mixed")
        _check_size(n, what)
        if B < 1:
            raise ValueError(f"{what}: the batch is empty")
        if counts.numel():
            if counts.is_floating_point() and not bool(torch.isfinite(counts).all()):
                raise ValueError(f"{what}: counts contain NaN or inf")
            if bool((counts < 0).any()):
                raise ValueError(f"{what}: counts must be non-negative, got {counts.min().item()}")
            empty = counts.sum(-1) <= 0
            if bool(empty.any()):
                i, b = empty.nonzero()[0].tolist()
                raise ValueError(f"{what}: basis {basis_labels(n)[b]} of state {i} has no counts")
        self.counts = counts
        self.n_wires = n
        self.dtype = resolve_dtype(dtype)

    @property
    def batch(self) -> int:
        return self.counts.shape[0]

    @property
    def labels(self) -> tuple:
        """Basis labels, one per row of :attr:`counts` (``"XZ"``: X on wire 0, Z on wire 1)."""
        return basis_labels(self.n_wires)

    @property
    def bases(self) -> torch.Tensor:
        """``(3**n, n)`` long: each basis's letters (0, 1, 2 = X, Y, Z), wire 0 first."""
        n = self.n_wires
        idx = torch.arange(3 ** n)
        return torch.stack([(idx // 3 ** (n - 1 - w)) % 3 for w in range(n)], dim=1).to(self.counts.device)

    @property
    def shots(self) -> torch.Tensor:
        """``(B, 3**n)``: the total count of each basis."""
        return self.counts.sum(-1)

    def frequencies(self, dtype=torch.float64) -> torch.Tensor:
        """``(B, 3**n, 2**n)``: counts over their basis's total."""
        c = self.counts.to(dtype)
        return c / c.sum(-1, keepdim=True)

    def __repr__(self) -> str:
        return (f"TomographyRecord(batch={self.batch}, n_wires={self.n_wires}, bases={3 ** self.n_wires}, "
                f"dtype={self.dtype})")


def _record(record, what) -> TomographyRecord:
    if not isinstance(record, TomographyRecord):
        raise TypeError(f"{what}: record must be a TomographyRecord (from tomography.collect), got "
                        f"{type(record).__name__}")
    return record


# ------------------------------------------------------------------------------------------------
# measuring
def probabilities(state) -> torch.Tensor:
    """``(B, 3**n, 2**n)`` real: the exact outcome distribution of every Pauli basis (the counts'
    expectation over ``shots``), in n batched passes (no rotated copy of the state per basis)."""
    state, n, density = _as_state(state, "tomography.probabilities")
    return _probabilities(state, n, density)


def _probabilities(state, n, density):
    B, dtype, device = state.shape[0], state.dtype, state.device
    per_row = 6 ** n
    rows = max(1, _CHUNK_ELEMENTS // per_row)
    out = []
    for lo in range(0, B, rows):
        part = state[lo:lo + rows]
        if density:
            vec = _interleave(part.reshape(part.shape[0], -1), n, 2, 2)          # (b, [r_w c_w]...)
            p = _per_wire(vec, _map("probability", dtype, device), n).real
        else:
            amp = _per_wire(part, _map("amplitude", dtype, device), n)
            p = amp.real.square() + amp.imag.square()
        out.append(_separate(p, n, 3, 2))
    return torch.cat(out) if len(out) > 1 else out[0]


def collect(state, shots: int, generator: Optional[torch.Generator] = None, bases: str = "pauli") -> TomographyRecord:
    """Measure each state of the batch (vectors ``(B, 2**n)`` or density matrices
    ``(B, 2**n, 2**n)``, n ≤ 8) ``shots`` times in each of the 3^n Pauli product bases.

    The distributions of all bases come from :func:`probabilities`; the shots of all (state,
    basis) rows are drawn together by the library's seeded inverse-CDF sampler
    (:func:`tql.measure.sample`, a ``generator`` on the state's device makes it reproducible)
    in chunks of bounded memory, and counted by one ``bincount`` per chunk."""
    what = "tomography.collect"
    shots = _count(shots, "shots", what)
    _check_generator(generator, what)
    if bases != "pauli":
        raise ValueError(f"{what}: bases must be 'pauli' (all 3^n products of X, Y and Z), got {bases!r}")
    state, n, density = _as_state(state, what)
    if generator is not None and generator.device.type != state.device.type:
        raise ValueError(f"{what}: generator is on {generator.device} but the state is on {state.device}")
    from .measure import sample
    p = _probabilities(state, n, density)
    tol = _STATE_TOL[state.dtype]
    low = p.amin(dim=(1, 2))
    if bool((low < -tol).any()):
        row = int((low < -tol).nonzero()[0, 0])
        raise ValueError(f"{what}: density matrix {row} is not positive semidefinite (an outcome probability "
                         f"of {float(low[row]):.3g})")
    B, N = state.shape[0], 2 ** n
    flat = p.reshape(B * 3 ** n, N).clamp_min(0)
    amplitudes = flat.sqrt().to(state.dtype)        # a state per row with that outcome distribution
    rows = max(1, _CHUNK_SAMPLES // shots)
    counts = []
    for lo in range(0, flat.shape[0], rows):
        part = amplitudes[lo:lo + rows]
        drawn = sample(part, shots, generator=generator)                          # (rows, shots)
        offset = torch.arange(part.shape[0], device=drawn.device)[:, None] * N
        counts.append(torch.bincount((drawn + offset).flatten(), minlength=part.shape[0] * N).reshape(-1, N))
    counts = torch.cat(counts) if len(counts) > 1 else counts[0]
    return TomographyRecord(counts.reshape(B, 3 ** n, N), dtype=state.dtype)


# ------------------------------------------------------------------------------------------------
# estimating
def pauli_expectations(record: TomographyRecord) -> torch.Tensor:
    """``(B, 4**n)`` float64: the linear-inversion estimate of every Pauli string's ⟨P⟩, index
    the base-4 number of its letters (I, X, Y, Z = 0..3), wire 0 most significant; ⟨P⟩ is the
    mean over the 3^(n−k) bases that measure P of its outcome parity (⟨I…I⟩ = 1)."""
    record = _record(record, "tomography.pauli_expectations")
    n = record.n_wires
    f = _interleave(record.frequencies(torch.float64).reshape(record.batch, -1), n, 3, 2)
    return _per_wire(f, _map("pauli", torch.float64, f.device), n)


def expectation_from_record(record: TomographyRecord, observables) -> torch.Tensor:
    """Estimates ``(B,)`` of one observable (a PauliString, Hamiltonian or string), ``(B, n_obs)``
    of a list: ``Σ c_P ⟨P⟩`` with :func:`pauli_expectations` (the same as ``Tr(ρ O)`` for the
    ``"lstsq"`` reconstruction), float64."""
    from .observables.hamiltonian import _as_observable_list, _check_fits
    what = "tomography.expectation_from_record"
    record = _record(record, what)
    n = record.n_wires
    hams, single = _as_observable_list(observables, what)
    index, coeffs = {}, []
    for j, h in enumerate(hams):
        _check_fits(h, n, what, f" (observable {j})" if len(hams) > 1 else "")
        if not h.is_hermitian:
            raise ValueError(f"{what}: observable {j} ({h}) is not Hermitian; its expectation is not real")
        for c, p in h.terms:
            code = 0
            for w in range(n):
                code = 4 * code + " XYZ".index(p.letter(w).replace("I", " "))
            k = index.setdefault(code, len(index))
            if k == len(coeffs):
                coeffs.append([0.0] * len(hams))
            coeffs[k][j] += complex(c).real
    e = pauli_expectations(record)
    idx = torch.tensor(list(index), dtype=torch.long, device=e.device)
    out = e[:, idx] @ torch.tensor(coeffs, dtype=torch.float64, device=e.device)
    return out[:, 0] if single else out


def closest_density_matrix(matrix: torch.Tensor) -> torch.Tensor:
    """The density matrix (Hermitian, PSD, trace 1) nearest in Frobenius norm to the Hermitian
    part of each ``(B, d, d)`` matrix: its eigenvalues projected onto the probability simplex
    (Smolin, Gambetta & Smith 2012: the negative ones set to 0 and their sum spread equally over
    the others, repeated), eigenvectors kept. A density matrix is returned unchanged (to rounding)."""
    what = "tomography.closest_density_matrix"
    if not isinstance(matrix, torch.Tensor) or not matrix.is_complex():
        raise TypeError(f"{what}: matrix must be a complex tensor (B, d, d), got "
                        f"{matrix.dtype if isinstance(matrix, torch.Tensor) else type(matrix).__name__}")
    if matrix.dim() != 3 or matrix.shape[1] != matrix.shape[2]:
        raise ValueError(f"{what}: matrix must have shape (B, d, d), got {tuple(matrix.shape)}")
    h = (matrix + matrix.conj().transpose(1, 2)) / 2
    lam, vecs = torch.linalg.eigh(h)
    u = lam.flip(-1)                                            # descending
    d = u.shape[-1]
    j = torch.arange(1, d + 1, dtype=u.dtype, device=u.device)
    css = u.cumsum(-1)
    keep = (u - (css - 1) / j > 0) * torch.arange(1, d + 1, device=u.device)
    k = keep.amax(-1, keepdim=True).clamp_min(1)                # how many eigenvalues stay positive
    theta = (css.gather(-1, k - 1) - 1) / k.to(u.dtype)
    new = (u - theta).clamp_min(0).flip(-1)
    return (vecs * new.to(vecs.dtype)[:, None, :]) @ vecs.conj().transpose(1, 2)


def _lstsq(record, work):
    n, B = record.n_wires, record.batch
    f = _interleave(record.frequencies(REAL_OF[work]).reshape(B, -1), n, 3, 2).to(work)
    vec = _per_wire(f, _map("inverse", work, f.device), n)                # (B, [r_w c_w]...)
    rho = _separate(vec, n, 2, 2)
    # the real inversion gives a Hermitian matrix; average away the rounding
    return (rho + rho.conj().transpose(1, 2)) / 2


def _mle(record, work, iterations, tol, dilution):
    n, B = record.n_wires, record.batch
    N = 2 ** n
    real = REAL_OF[work]
    counts = _interleave(record.counts.to(real).reshape(B, -1), n, 3, 2)
    total = counts.sum(-1)[:, None, None]
    device = counts.device
    forward, adjoint = _map("probability", work, device), _map("adjoint", work, device)
    eye = torch.eye(N, dtype=work, device=device)
    rho = eye.expand(B, N, N) / N
    tiny = torch.finfo(real).tiny
    for it in range(iterations):
        p = _per_wire(_interleave(rho.reshape(B, -1), n, 2, 2), forward, n).real
        weight = torch.where(counts > 0, counts / p.clamp_min(tiny), torch.zeros_like(counts))
        r = _separate(_per_wire(weight.to(work), adjoint, n), n, 2, 2) / total
        if dilution is not None:
            r = (eye + dilution * r) / (1 + dilution)
        new = r @ rho @ r
        new = (new + new.conj().transpose(1, 2)) / 2
        new = new / torch.diagonal(new, dim1=1, dim2=2).sum(-1).real[:, None, None]
        if tol is not None and (it + 1) % 20 == 0 and float((new - rho).abs().amax()) < tol:
            return new
        rho = new
    return rho


def reconstruct(record: TomographyRecord, method: str = "lstsq", dtype=None, iterations: int = 300,
                tol: Optional[float] = 1e-10, dilution: Optional[float] = None) -> torch.Tensor:
    """Density matrices ``(B, 2**n, 2**n)`` estimated from ``record`` by ``method`` (module notes):
    ``"lstsq"`` (linear inversion), ``"projected"`` (its closest density matrix) or ``"mle"``
    (``iterations`` of R ρ R at most, stopping once an iteration changes no entry by ``tol``,
    checked every 20; ``dilution`` ε > 0: the diluted iteration). Computed in complex128 and
    returned in ``dtype`` (default ``record.dtype``)."""
    what = "tomography.reconstruct"
    record = _record(record, what)
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"{what}: method must be one of {METHODS}, got {method!r}")
    dtype = record.dtype if dtype is None else resolve_dtype(dtype)
    work = torch.complex128
    if method == "mle":
        iterations = _count(iterations, "iterations", what)
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0):
            raise ValueError(f"{what}: tol must be a number >= 0 or None, got {tol!r}")
        if dilution is not None and (isinstance(dilution, bool) or not isinstance(dilution, (int, float))
                                     or not 0 < dilution < math.inf):
            raise ValueError(f"{what}: dilution must be a positive number or None, got {dilution!r}")
        rho = _mle(record, work, iterations, tol, dilution)
    else:
        rho = _lstsq(record, work)
        if method == "projected":
            rho = closest_density_matrix(rho)
    return rho.to(dtype)


def state_tomography(circuit_or_state, shots: int, generator: Optional[torch.Generator] = None,
                     method: str = "projected", x=None, return_record: bool = False, **options):
    """Tomography in one call: run a :class:`~tql.Circuit` (on ``x`` if it reads inputs; a
    :class:`~tql.MixedCircuit` gives density matrices) or take states as they are, :func:`collect`
    ``shots`` per basis and :func:`reconstruct` by ``method`` (default ``"projected"``: a valid
    density matrix; ``options`` go to :func:`reconstruct`). Returns ``ρ̂ (B, 2**n, 2**n)``, or
    ``(ρ̂, record)`` with ``return_record``."""
    from .circuit import Circuit
    what = "tomography.state_tomography"
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"{what}: method must be one of {METHODS}, got {method!r}")
    if isinstance(circuit_or_state, Circuit):
        _check_size(circuit_or_state.n_wires, what)
        with torch.no_grad():
            if circuit_or_state.is_noisy:
                state = circuit_or_state(x=x, generator=generator)
            else:
                state = circuit_or_state(x=x)
    elif x is not None:
        raise ValueError(f"{what}: x is only read when a circuit is given")
    else:
        state = circuit_or_state
    record = collect(state, shots, generator=generator)
    rho = reconstruct(record, method, **options)
    return (rho, record) if return_record else rho
