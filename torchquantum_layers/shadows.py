"""Classical shadows from random Pauli measurements (Huang, Kueng & Preskill, Nat. Phys. 2020).

Each snapshot measures every wire in a uniformly random basis X, Y or Z. Inverting the measurement
channel gives, per snapshot, the one-wire operators ``σ_w = 3 U_w† |b_w⟩⟨b_w| U_w − I`` whose
tensor product is an unbiased estimate of ρ. From T snapshots a :class:`ClassicalShadow`
estimates, with no further access to the state:

* Pauli sums: a string P of weight k gets ``∏_w 3 (±1)`` from snapshots whose bases match it on
  its wires and 0 from the others (variance ≤ 3^k); values are combined by median of means;
* reduced density matrices of a few wires (the mean of ``⊗ σ_w``);
* purities and second Rényi entropies of a few wires, from the pairs of distinct snapshots
  (``Tr(σ σ') = 5, −4, 1/2``: same basis and bit, same basis other bit, other basis).

``collect`` takes state vectors ``(B, 2**n)`` or density matrices ``(B, 2**n, 2**n)``; the bases
and outcomes of all rows are drawn at once (rows of T copies of the state, rotated by per-row
gates and sampled), in chunks of bounded memory.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import torch

from .caching import lasting
from .kernels.apply import apply_matrix_unchecked, check_wires, kron
from .kernels.state import n_wires_of
from .measure import sample, to_bits

__all__ = ["ClassicalShadow", "collect", "snapshot_states", "snapshot_bound", "BASES"]

BASES = "XYZ"                 # bases[..., w] = 0, 1, 2
# rows of copies rotated at once: a chunk that stays in cache (2 MiB of complex64) was 3.6x faster
# at 12 qubits and 3.5x at 16 than 2^24 amplitudes, whose passes went to memory (benchmarks/shadows.py)
_CHUNK_AMPLITUDES = 1 << 18
_CHUNK_FACTORS = 1 << 24      # (snapshot, term, wire) factors held at once while estimating


def _rotations(dtype, device) -> torch.Tensor:
    """(3, 2, 2): the unitary before a Z measurement that measures X (H), Y (H S†) or Z (I)."""
    r = 1 / math.sqrt(2)
    h = torch.tensor([[r, r], [r, -r]], dtype=torch.complex128)
    sdg = torch.tensor([[1, 0], [0, -1j]], dtype=torch.complex128)
    return torch.stack([h, h @ sdg, torch.eye(2, dtype=torch.complex128)]).to(dtype=dtype, device=device)


# per-row rotations of this many wires at once (3^k tabulated products): fewer passes over the
# copies of the state, each a batched (2^k x 2^k) product; 4 measured fastest at 12 qubits
_WIRES_PER_PASS = 4


@functools.lru_cache(maxsize=64)
@lasting
def _rotation_table(k: int, dtype, device) -> torch.Tensor:
    """(3^k, 2^k, 2^k): ⊗_i rotation[c_i] for the base-3 digits c of the row index (first wire first)."""
    one = _rotations(torch.complex128, "cpu")
    table = one
    for _ in range(k - 1):
        table = kron(table[:, None], one[None]).reshape(table.shape[0] * 3, 2 * table.shape[1], 2 * table.shape[2])
    return table.to(dtype=dtype, device=device)


@functools.lru_cache(maxsize=64)
@lasting
def _powers_of_three(k: int, device) -> torch.Tensor:
    return torch.tensor([3 ** (k - 1 - i) for i in range(k)], device=device)


def _one_wire_snapshots(dtype, device) -> torch.Tensor:
    """(3, 2, 2, 2): σ[basis, bit] = 3 U† |bit⟩⟨bit| U − I."""
    u = _rotations(torch.complex128, "cpu")
    ket = torch.eye(2, dtype=torch.complex128)
    proj = ket[:, :, None] * ket[:, None, :]                      # |b⟩⟨b|, (2, 2, 2)
    sigma = 3 * u.conj().transpose(-1, -2)[:, None] @ proj[None] @ u[:, None] - torch.eye(2)
    return sigma.to(dtype=dtype, device=device)


def _count(value, name: str, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"{what}: {name} must be >= {low}, got {value}")
    return value


def collect(state: torch.Tensor, n_snapshots: int, generator: Optional[torch.Generator] = None) -> "ClassicalShadow":
    """``n_snapshots`` random-Pauli snapshots of each state of the batch (module notes)."""
    what = "shadows.collect"
    T = _count(n_snapshots, "n_snapshots", what)
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{what}: state must be a tensor (B, 2**n) or (B, 2**n, 2**n), got {type(state).__name__}")
    density = state.dim() == 3
    if density:
        if state.shape[1] != state.shape[2]:
            raise ValueError(f"{what}: a density matrix must be square, got shape {tuple(state.shape)}")
        n = n_wires_of(state[:, 0])
    else:
        n = n_wires_of(state)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
    B, device = state.shape[0], state.device
    where = generator.device if generator is not None else device
    bases = torch.randint(0, 3, (B, T, n), generator=generator, device=where).to(device)
    flat = state.detach().reshape(B, -1)
    width, m = flat.shape[1], 2 * n if density else n

    def rotate(psi, wires, code):
        u = _rotation_table(len(wires), state.dtype, device)[code]
        psi = apply_matrix_unchecked(psi, u, wires, m)
        if density:                               # U ρ U† as (U ⊗ U*) vec ρ
            psi = apply_matrix_unchecked(psi, u.conj(), tuple(w + n for w in wires), m)
        return psi

    def block_code(chosen, lo):
        k = min(lo + _WIRES_PER_PASS, n) - lo
        return (chosen[:, lo:lo + k] * _powers_of_three(k, device)).sum(1), tuple(range(lo, lo + k))

    # the first wires' 3^k rotations of each state once, then a copy per snapshot picked from them
    first = tuple(range(min(_WIRES_PER_PASS, n)))
    options = 3 ** len(first)
    if B * options * width <= _CHUNK_AMPLITUDES:
        ahead = rotate(flat.repeat_interleave(options, 0), first,
                       torch.arange(options, device=device).repeat(B)).reshape(B, options, width)
    else:
        ahead = None
    rows = max(1, _CHUNK_AMPLITUDES // width)
    outcomes = []
    all_rows = bases.reshape(B * T, n)
    for start in range(0, B * T, rows):
        stop = min(start + rows, B * T)
        chosen = all_rows[start:stop]
        sample_of = torch.arange(start, stop, device=device) // T
        code, wires = block_code(chosen, 0)
        psi = ahead[sample_of, code] if ahead is not None else rotate(flat[sample_of], wires, code)
        for lo in range(len(first), n, _WIRES_PER_PASS):
            psi = rotate(psi, *reversed(block_code(chosen, lo)))
        if density:
            N = 2 ** n
            probs = torch.diagonal(psi.reshape(-1, N, N), dim1=1, dim2=2).real.clamp_min(0)
            psi = probs.sqrt().to(state.dtype)   # a state with the same outcome distribution
        outcomes.append(sample(psi, 1, generator=generator)[:, 0])
    bits = to_bits(torch.cat(outcomes), n).reshape(B, T, n)
    return ClassicalShadow(bases, bits)


def snapshot_states(bases: torch.Tensor, bits: torch.Tensor, dtype=torch.complex128) -> torch.Tensor:
    """``(..., 2**k, 2**k)``: each snapshot's estimate ``⊗_w σ_w`` of the state of its k wires,
    from ``bases`` and ``bits`` of shape ``(..., k)`` (wire order as given)."""
    sigma = _one_wire_snapshots(dtype, bases.device)[bases.long(), bits.long()]   # (..., k, 2, 2)
    out = sigma[..., 0, :, :]
    for w in range(1, sigma.shape[-3]):
        out = kron(out, sigma[..., w, :, :])
    return out


def snapshot_bound(error: float, observables, failure_probability: float = 0.01) -> tuple:
    """``(n_snapshots, n_groups)`` that Huang et al.'s Theorem 1 guarantees for estimating each of
    ``observables`` (Pauli sums) to within ``error`` with probability ``1 − failure_probability``:
    ``K = ⌈2 log(2M/δ)⌉`` groups of ``⌈34 ‖O‖²_shadow / ε²⌉`` snapshots, with the shadow norm of
    a Pauli sum bounded by ``Σ |c_P| 3^{k_P/2}`` (identity terms excluded)."""
    from .observables.hamiltonian import _as_observable_list
    what = "snapshot_bound"
    for name, v, hi in (("error", error, math.inf), ("failure_probability", failure_probability, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < hi:
            raise ValueError(f"{what}: {name} must be a number in (0, {hi}), got {v!r}")
    hams, _ = _as_observable_list(observables, what)
    norm = max(sum(abs(c) * 3 ** (p.weight / 2) for c, p in h.terms if p.weight) for h in hams)
    groups = math.ceil(2 * math.log(2 * len(hams) / failure_probability))
    return groups * max(1, math.ceil(34 * norm ** 2 / error ** 2)), groups


class ClassicalShadow:
    """Snapshots: ``bases`` ``(B, T, n)`` (0, 1, 2 = X, Y, Z) and ``bits`` ``(B, T, n)`` (0/1)."""

    def __init__(self, bases: torch.Tensor, bits: torch.Tensor):
        what = "ClassicalShadow"
        for name, t, hi in (("bases", bases, 3), ("bits", bits, 2)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.is_floating_point() or t.is_complex():
                raise ValueError(f"{what}: {name} must be an integer tensor (B, T, n), got "
                                 f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
            if t.numel() and (int(t.min()) < 0 or int(t.max()) >= hi):
                raise ValueError(f"{what}: {name} values must lie in [0, {hi}), got {int(t.min())}..{int(t.max())}")
        if bases.shape != bits.shape:
            raise ValueError(f"{what}: bases {tuple(bases.shape)} and bits {tuple(bits.shape)} differ in shape")
        if bases.shape[1] < 1:
            raise ValueError(f"{what}: there are no snapshots")
        self.bases, self.bits = bases.long(), bits.long()

    @property
    def batch(self) -> int:
        return self.bases.shape[0]

    @property
    def n_snapshots(self) -> int:
        return self.bases.shape[1]

    @property
    def n_wires(self) -> int:
        return self.bases.shape[2]

    def __repr__(self) -> str:
        return f"ClassicalShadow(batch={self.batch}, n_snapshots={self.n_snapshots}, n_wires={self.n_wires})"

    # -- Pauli sums ---------------------------------------------------------------------------
    def _terms(self, observables, what):
        from .observables.hamiltonian import _as_observable_list, _check_fits
        hams, single = _as_observable_list(observables, what)
        strings, index = [], {}
        for j, h in enumerate(hams):
            _check_fits(h, self.n_wires, what, f" (observable {j})")
            if not h.is_hermitian:
                raise ValueError(f"{what}: observable {j} ({h}) is not Hermitian; a shadow estimates real "
                                 f"expectation values")
            for _, p in h.terms:
                index.setdefault((p.x_mask, p.z_mask), len(strings))
                if len(strings) < len(index):
                    strings.append(p)
        coeffs = torch.zeros(len(strings), len(hams), dtype=torch.float64)
        for j, h in enumerate(hams):
            for c, p in h.terms:
                coeffs[index[(p.x_mask, p.z_mask)], j] += complex(c).real
        labels = torch.full((len(strings), self.n_wires), -1, dtype=torch.long)
        for m, p in enumerate(strings):
            for w, letter in p.ops.items():
                labels[m, w] = BASES.index(letter)
        return labels, coeffs, single

    def snapshot_values(self, observables, dtype=torch.float64) -> torch.Tensor:
        """``(B, T, n_obs)``: each snapshot's unbiased estimate of each observable."""
        labels, coeffs, _ = self._terms(observables, "ClassicalShadow.snapshot_values")
        return self._values(labels, coeffs, dtype)

    def _values(self, labels, coeffs, dtype):
        device = self.bases.device
        labels, coeffs = labels.to(device), coeffs.to(device=device, dtype=dtype)
        B, T, n = self.bases.shape
        out = torch.zeros(B, T, coeffs.shape[1], dtype=dtype, device=device)
        if n > 62:
            return self._values_by_wire(labels, coeffs, out)
        # wire masks: a string matches a snapshot where its X, Y and Z wires lie within the
        # snapshot's; the sign is the parity of the outcome bits on its wires
        bit = 2 ** torch.arange(n, device=device)
        snap = [((self.bases == b) * bit).sum(-1)[:, :, None] for b in range(3)]   # (B, T, 1)
        outcome = (self.bits * bit).sum(-1)[:, :, None]
        term = [((labels == b) * bit).sum(-1) for b in range(3)]                    # (m,)
        support = term[0] | term[1] | term[2]
        scale = 3.0 ** (labels >= 0).sum(-1).to(dtype)
        step = max(1, _CHUNK_FACTORS // max(1, B * T))
        for lo in range(0, labels.shape[0], step):
            hi = lo + step
            match = torch.ones((), dtype=torch.bool, device=device)
            for b in range(3):
                t = term[b][lo:hi]
                match = match & ((snap[b] & t) == t)
            parity = outcome & support[lo:hi]
            for shift in (32, 16, 8, 4, 2, 1):
                parity = parity ^ (parity >> shift)
            value = torch.where(match, scale[lo:hi] * (1 - 2 * (parity & 1)).to(dtype), 0.0)
            out += value @ coeffs[lo:hi]
        return out

    def _values_by_wire(self, labels, coeffs, out):
        dtype, device = out.dtype, out.device
        identity = labels < 0
        signs = (3 - 6 * self.bits).to(dtype)                    # 3 (±1) per wire, (B, T, n)
        B, T, n = self.bases.shape
        step = max(1, _CHUNK_FACTORS // max(1, B * T * n))
        for lo in range(0, labels.shape[0], step):
            lab, ident = labels[lo:lo + step], identity[lo:lo + step]
            match = self.bases[:, :, None, :] == lab                                # (B, T, m, n)
            factor = torch.where(ident, torch.ones((), dtype=dtype, device=device),
                                 torch.where(match, signs[:, :, None, :], torch.zeros((), dtype=dtype, device=device)))
            out += factor.prod(-1) @ coeffs[lo:lo + step]
        return out

    def expval(self, observables, n_groups: int = 1, dtype=torch.float64) -> torch.Tensor:
        """Estimates ``(B,)`` for one observable, ``(B, n_obs)`` for a list: the median over
        ``n_groups`` equal groups of snapshots of their means (1: the plain mean)."""
        what = "ClassicalShadow.expval"
        K = _count(n_groups, "n_groups", what)
        if K > self.n_snapshots:
            raise ValueError(f"{what}: n_groups={K} exceeds the {self.n_snapshots} snapshots")
        labels, coeffs, single = self._terms(observables, what)
        values = self._values(labels, coeffs, dtype)
        size = self.n_snapshots // K
        means = values[:, :K * size].reshape(self.batch, K, size, -1).mean(2)
        est = means[:, 0] if K == 1 else means.quantile(0.5, dim=1)
        return est[..., 0] if single else est

    # -- a few wires ----------------------------------------------------------------------------
    def _wires(self, wires, what) -> tuple:
        wires = (wires,) if isinstance(wires, int) and not isinstance(wires, bool) else tuple(wires)
        if not wires:
            raise ValueError(f"{what}: give at least one wire")
        return check_wires(wires, self.n_wires, what)

    def density_matrix(self, wires, dtype=torch.complex128) -> torch.Tensor:
        """``(B, 2**k, 2**k)``: the shadow's estimate of the reduced state of ``wires`` (in that
        order; unbiased, Hermitian and unit-trace, not necessarily positive)."""
        wires = self._wires(wires, "ClassicalShadow.density_matrix")
        idx = torch.tensor(wires, device=self.bases.device)
        T, d = self.n_snapshots, 2 ** len(wires)
        total = torch.zeros(self.batch, d, d, dtype=dtype, device=self.bases.device)
        step = max(1, _CHUNK_FACTORS // max(1, self.batch * d * d))
        for lo in range(0, T, step):
            total += snapshot_states(self.bases[:, lo:lo + step, idx], self.bits[:, lo:lo + step, idx], dtype).sum(1)
        return total / T

    def purity(self, wires, dtype=torch.float64) -> torch.Tensor:
        """``(B,)``: the unbiased estimate of ``Tr ρ_A²`` from all pairs of distinct snapshots."""
        what = "ClassicalShadow.purity"
        wires = self._wires(wires, what)
        T, k = self.n_snapshots, len(wires)
        if T < 2:
            raise ValueError(f"{what}: needs at least 2 snapshots, got {T}")
        if 6 ** k > _CHUNK_FACTORS // 8:
            raise ValueError(f"{what}: {k} wires are too many for a shadow estimate (6^{k} outcome patterns)")
        idx = torch.tensor(wires, device=self.bases.device)
        # Σ over pairs of ∏_w f(pattern_w, pattern'_w) = cᵀ (⊗ f) c for the counts c of the 6^k
        # (basis, bit) patterns: one pass over the snapshots, whatever T
        pattern = 2 * self.bases[:, :, idx] + self.bits[:, :, idx]                  # (B, T, k) in 0..5
        code = (pattern * torch.tensor([6 ** (k - 1 - i) for i in range(k)], device=idx.device)).sum(-1)
        code = code + 6 ** k * torch.arange(self.batch, device=idx.device)[:, None]
        c = torch.bincount(code.flatten(), minlength=self.batch * 6 ** k).to(dtype).reshape((self.batch,) + (6,) * k)
        f = torch.full((6, 6), 0.5, dtype=dtype, device=idx.device)
        for b in range(3):
            f[2 * b:2 * b + 2, 2 * b:2 * b + 2] = torch.tensor([[5.0, -4.0], [-4.0, 5.0]], dtype=dtype)
        fc = c
        for axis in range(1, k + 1):
            fc = torch.movedim(torch.tensordot(fc, f, dims=([axis], [0])), -1, axis)
        pairs = (c * fc).flatten(1).sum(1) - 5.0 ** k * T                            # t ≠ t'
        return pairs / (T * (T - 1))

    def renyi2_entropy(self, wires, base: Optional[float] = None, dtype=torch.float64) -> torch.Tensor:
        """``(B,)``: ``−log Tr ρ_A²`` of the purity estimate (natural log unless ``base``); NaN where
        the estimate is not positive (too few snapshots for these wires)."""
        if base is not None and (isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 0
                                 or base == 1):
            raise ValueError(f"ClassicalShadow.renyi2_entropy: base must be a positive number other than 1, "
                             f"got {base!r}")
        p = self.purity(wires, dtype)
        out = -torch.log(torch.where(p > 0, p, torch.full_like(p, float("nan"))))
        return out if base is None else out / math.log(base)
