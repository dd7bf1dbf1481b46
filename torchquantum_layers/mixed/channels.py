"""Quantum channels from their Kraus operators ``ρ ↦ Σ_a K_a ρ K_a†``.

A :class:`Channel` is built from Kraus operators (checked: ``Σ_a K_a† K_a = I``) or a Choi
matrix, and applied to wires of a density matrix as ONE matrix on ``2k`` wires of the vector
view of ρ: its superoperator ``S = Σ_a K_a ⊗ conj(K_a)`` acts on the row wires and the column
wires together, through the same kernel as a gate (one GEMM, whatever the number of Kraus
operators). Parameters may be numbers or real 0-d
tensors (then the channel is differentiable in them).

Conventions (PennyLane's): ``depolarizing(p)`` applies each of X, Y, Z with probability p/3
(p ∈ [0, 1]); ``amplitude_damping(γ)`` has K₁ = √γ |0⟩⟨1|; ``generalized_amplitude_damping(γ, p)``
relaxes towards |0⟩ with probability p and towards |1⟩ with 1 − p; ``phase_damping(γ)``
multiplies coherences by √(1 − γ). The Choi matrix is ``J = Σ_ij |i⟩⟨j| ⊗ E(|i⟩⟨j|)`` (input
first).
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import numpy as np
import torch

from ..caching import building_cache
from ..kernels.apply import apply_matrix_unchecked, check_wires
from .state import as_density

__all__ = ["Channel", "kraus_channel", "choi_channel", "unitary_channel", "bit_flip", "phase_flip",
           "bit_phase_flip", "depolarizing", "amplitude_damping", "generalized_amplitude_damping",
           "phase_damping", "pauli_channel", "reset_channel", "thermal_relaxation", "TP_ATOL"]

TP_ATOL = 1e-8
"""Default tolerance of the trace-preservation check ``max |Σ K†K − I|`` (1e-5 for complex64 input)."""

_PAULI = {"I": np.eye(2), "X": np.array([[0, 1], [1, 0]]), "Y": np.array([[0, -1j], [1j, 0]]),
          "Z": np.diag([1.0, -1.0])}


_LOW_PRECISION = (torch.complex64, torch.complex32, torch.float32, torch.float16, torch.bfloat16)


def _is_low_precision(m) -> bool:
    """Whether a matrix was given in single (or lower) precision: its round-off is ~1e-7, so the
    trace-preservation check uses the complex64 tolerance."""
    if isinstance(m, torch.Tensor):
        return m.dtype in _LOW_PRECISION
    if isinstance(m, np.ndarray):
        return m.dtype in (np.complex64, np.float32, np.float16)
    return False


def _as_kraus(ops, what):
    """(Kraus tensor (m, d, d), whether the input was in single precision)."""
    if isinstance(ops, torch.Tensor):
        k = ops
        low = _is_low_precision(ops)
    elif isinstance(ops, np.ndarray):
        k = torch.as_tensor(ops)
        low = _is_low_precision(ops)
    else:
        if isinstance(ops, (str, bytes)):
            raise TypeError(f"{what}: Kraus operators must be a tensor (m, d, d) or a list of (d, d) matrices, "
                            f"got the string {ops!r}")
        try:
            items = list(ops)
        except TypeError:
            raise TypeError(f"{what}: Kraus operators must be a tensor (m, d, d) or a list of (d, d) matrices, "
                            f"got {type(ops).__name__}") from None
        if not items:
            raise ValueError(f"{what}: no Kraus operators given")
        low = any(_is_low_precision(m) for m in items)
        mats = []
        for i, m in enumerate(items):
            try:
                mats.append(m if isinstance(m, torch.Tensor) else torch.as_tensor(np.asarray(m, dtype=np.complex128)))
            except (TypeError, ValueError):
                raise TypeError(f"{what}: Kraus operator {i} is not a numeric matrix: {m!r}") from None
        shapes = {tuple(m.shape) for m in mats}
        if len(shapes) != 1:
            raise ValueError(f"{what}: Kraus operators have different shapes {sorted(shapes)}")
        mats = [m.to(torch.complex128) if not m.is_complex() or m.dtype != torch.complex128 else m for m in mats]
        k = torch.stack(mats)
    if k.dim() == 2:
        k = k.unsqueeze(0)
    if k.dim() != 3 or k.shape[-1] != k.shape[-2]:
        raise ValueError(f"{what}: Kraus operators must be square matrices, got shape {tuple(k.shape)}")
    d = k.shape[-1]
    if d < 2 or d & (d - 1):
        raise ValueError(f"{what}: Kraus operator size {d} is not a power of two >= 2")
    if k.shape[0] == 0:
        raise ValueError(f"{what}: no Kraus operators given")
    return k, low


class Channel:
    """A completely positive, trace-preserving map given by Kraus operators ``(m, d, d)``.

    ``Channel(kraus, name=...)`` checks trace preservation (``max |Σ K†K − I| ≤ atol``, default
    :data:`TP_ATOL`; ``check=False`` skips it, e.g. for trace-decreasing maps). Apply it with
    ``channel(rho, wires)``.
    """

    def __init__(self, kraus, name: str = "Kraus", atol: Optional[float] = None, check: bool = True):
        k, self._low_precision = _as_kraus(kraus, name)
        if not k.is_complex():
            k = k.to(torch.complex128)
        elif k.dtype != torch.complex128:
            k = k.to(torch.complex128)
        self.kraus = k
        self.name = name
        self.n_wires = int(round(math.log2(k.shape[-1])))
        self._cache = {}
        if check:
            if atol is None:
                atol = 1e-5 if self._low_precision else TP_ATOL
            d = k.shape[-1]
            kd = k.detach()
            if not torch.isfinite(kd).all():
                raise ValueError(f"{name}: Kraus operators contain NaN or inf")
            err = (torch.einsum("aji,ajk->ik", kd.conj(), kd) - torch.eye(d, dtype=kd.dtype)).abs().max()
            if float(err) > atol:
                raise ValueError(f"{name}: the Kraus operators are not trace preserving: "
                                 f"max |sum_a K_a^dagger K_a - I| = {float(err):.3g} > {atol:g}")

    # -- description --------------------------------------------------------------------------
    @property
    def n_kraus(self) -> int:
        return self.kraus.shape[0]

    def __repr__(self) -> str:
        return f"Channel({self.name}, n_wires={self.n_wires}, kraus={self.n_kraus})"

    def superoperator(self, dtype=torch.complex128, device=None) -> torch.Tensor:
        """``S = Σ_a K_a ⊗ conj(K_a)`` ``(d², d²)``: vec(E(ρ)) = S vec(ρ) with row-major vec."""
        key = (dtype, str(device))
        if self.kraus.requires_grad:
            return self._super(dtype, device)
        if key not in self._cache:
            with building_cache():
                self._cache[key] = self._super(dtype, device)
        return self._cache[key]

    def _super(self, dtype, device):
        k = self.kraus.to(device=device)
        d = k.shape[-1]
        s = (k[:, :, None, :, None] * k.conj()[:, None, :, None, :]).sum(0).reshape(d * d, d * d)
        return s.to(dtype)

    def choi(self) -> torch.Tensor:
        """Choi matrix ``J = Σ_ij |i⟩⟨j| ⊗ E(|i⟩⟨j|)`` ``(d², d²)``, complex128."""
        vec = self.kraus.transpose(-1, -2).reshape(self.n_kraus, -1)        # vec[(i, k)] = K[k, i]
        return vec.transpose(0, 1) @ vec.conj()

    def adjoint_kraus(self) -> torch.Tensor:
        return self.kraus.conj().transpose(-1, -2)

    def compose(self, other: "Channel", name: Optional[str] = None) -> "Channel":
        """The channel ``other ∘ self`` (``self`` first), Kraus operators ``L_b K_a``."""
        if not isinstance(other, Channel):
            raise TypeError(f"compose: expected a Channel, got {type(other).__name__}")
        if other.n_wires != self.n_wires:
            raise ValueError(f"compose: {self.name} acts on {self.n_wires} wire(s) but {other.name} on "
                             f"{other.n_wires}")
        prods = (other.kraus[:, None] @ self.kraus[None, :]).reshape(-1, *self.kraus.shape[-2:])
        keep = prods.detach().abs().amax(dim=(-1, -2)) > 0
        return Channel(prods[keep], name or f"{other.name}∘{self.name}", check=False)

    # -- application --------------------------------------------------------------------------
    def __call__(self, rho, wires) -> torch.Tensor:
        return self.apply(rho, wires)

    def apply(self, rho, wires) -> torch.Tensor:
        """``Σ_a K_a ρ K_a†`` on ``wires`` of a ``(B, N, N)`` density matrix (or DensityMatrix)."""
        rho, n = as_density(rho, self.name)
        wires = check_wires(wires, n, self.name)
        if len(wires) != self.n_wires:
            raise ValueError(f"{self.name} acts on {self.n_wires} wire(s), got wires {wires}")
        N = 2 ** n
        s = self.superoperator(rho.dtype, rho.device)
        v = rho.reshape(rho.shape[0], -1)
        # measured (benchmarks/density.py): one GEMM with S on the row and column wires together
        # beats both a Kraus sum and recombining the (row bit, column bit) blocks of ρ
        v = apply_matrix_unchecked(v, s, tuple(wires) + tuple(w + n for w in wires), 2 * n)
        return v.reshape(-1, N, N)


# ------------------------------------------------------------------------------------------------
# parameters
def _param(value, name: str, what: str, lo: float = 0.0, hi: float = 1.0):
    """A real probability-like parameter: float or real 0-d tensor (kept for autograd)."""
    if isinstance(value, bool):
        raise TypeError(f"{what}: {name} must be a number, got {value!r}")
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.is_complex():
            raise TypeError(f"{what}: {name} must be a real scalar, got a tensor of shape {tuple(value.shape)} "
                            f"and dtype {value.dtype}")
        v = float(value.detach().reshape(()))
        t = value.reshape(()).to(torch.float64)
    else:
        if isinstance(value, (str, bytes)) or not isinstance(value, numbers.Real) and not hasattr(value, "__float__"):
            raise TypeError(f"{what}: {name} must be a number, got {value!r}")     # not "0.1": a typo in a config
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise TypeError(f"{what}: {name} must be a number, got {value!r}") from None
        t = torch.tensor(v, dtype=torch.float64)
    if not math.isfinite(v):
        raise ValueError(f"{what}: {name}={v} is not finite")
    if v < lo or v > hi:
        raise ValueError(f"{what}: {name}={v:g} is outside [{lo:g}, {hi:g}]")
    return t


def _mat(*rows):
    return torch.stack([torch.stack([torch.as_tensor(e).to(torch.complex128) for e in r]) for r in rows])


def _pauli_kraus(probs: dict, n_wires: int, what: str):
    ops = []
    for label, p in probs.items():
        m = np.eye(1, dtype=np.complex128)
        for ch in label:
            m = np.kron(m, _PAULI[ch])
        ops.append(torch.sqrt(p).to(torch.complex128) * torch.as_tensor(m, dtype=torch.complex128))
    return torch.stack(ops)


# ------------------------------------------------------------------------------------------------
# constructors
def kraus_channel(ops, name: str = "Kraus", atol: Optional[float] = None) -> Channel:
    """Custom channel from Kraus operators (list of ``(d, d)`` or a ``(m, d, d)`` tensor)."""
    return Channel(ops, name=name, atol=atol)


def unitary_channel(u, name: str = "Unitary") -> Channel:
    """``ρ ↦ U ρ U†`` as a channel (one Kraus operator; unitarity is the trace check)."""
    return Channel([u], name=name)


def choi_channel(choi, name: str = "Choi", atol: Optional[float] = None) -> Channel:
    """Channel from its Choi matrix ``J = Σ_ij |i⟩⟨j| ⊗ E(|i⟩⟨j|)`` ``(d², d²)``.

    Checks Hermiticity, positivity (complete positivity) and ``Tr_out J = I`` (trace
    preservation); Kraus operators come from the eigendecomposition of J.
    """
    if isinstance(choi, torch.Tensor):
        j = choi
    else:
        a = np.asarray(choi)
        if a.dtype.kind not in "biufc":
            raise TypeError(f"{name}: the Choi matrix must be a numeric tensor or array, got {type(choi).__name__}"
                            f" of dtype {a.dtype}")
        # nested lists of Python numbers are double precision: read them as complex128
        j = torch.as_tensor(a if _is_low_precision(a) else a.astype(np.complex128))
    low = _is_low_precision(j)
    if not j.is_complex():
        j = j.to(torch.complex128)
    j = j.to(torch.complex128)
    if j.dim() != 2 or j.shape[0] != j.shape[1]:
        raise ValueError(f"{name}: the Choi matrix must be square, got shape {tuple(j.shape)}")
    d2 = j.shape[0]
    d = int(round(math.sqrt(d2)))
    if d * d != d2 or d < 2 or d & (d - 1):
        raise ValueError(f"{name}: Choi matrix size {d2} is not d² for d a power of two >= 2")
    tol = (1e-5 if low else TP_ATOL) if atol is None else atol
    jd = j.detach()
    herr = float((jd - jd.conj().T).abs().max())
    if herr > tol:
        raise ValueError(f"{name}: the Choi matrix is not Hermitian (max |J - J^dagger| = {herr:.3g})")
    evals, evecs = torch.linalg.eigh((j + j.conj().T) / 2)
    if float(evals.detach().min()) < -tol * d2:
        raise ValueError(f"{name}: the Choi matrix is not positive semidefinite (eigenvalue "
                         f"{float(evals.detach().min()):.3g}): the map is not completely positive")
    tr_out = jd.reshape(d, d, d, d).diagonal(dim1=1, dim2=3).sum(-1)        # Σ_k J[(i,k),(j,k)]
    terr = float((tr_out - torch.eye(d, dtype=jd.dtype)).abs().max())
    if terr > tol * d:
        raise ValueError(f"{name}: the map is not trace preserving (max |Tr_out J - I| = {terr:.3g})")
    keep = evals.detach() > tol
    vecs = evecs[:, keep] * evals[keep].clamp_min(0).sqrt().to(evecs.dtype)      # (d², r)
    kraus = vecs.transpose(0, 1).reshape(-1, d, d).transpose(-1, -2)          # K[k, i] = v[i*d + k]
    return Channel(kraus, name=name, atol=max(tol * d, 1e-8))


def bit_flip(p) -> Channel:
    """X with probability p."""
    p = _param(p, "p", "bit_flip")
    return Channel(_pauli_kraus({"I": 1 - p, "X": p}, 1, "bit_flip"), name="bit_flip")


def phase_flip(p) -> Channel:
    """Z with probability p."""
    p = _param(p, "p", "phase_flip")
    return Channel(_pauli_kraus({"I": 1 - p, "Z": p}, 1, "phase_flip"), name="phase_flip")


def bit_phase_flip(p) -> Channel:
    """Y with probability p."""
    p = _param(p, "p", "bit_phase_flip")
    return Channel(_pauli_kraus({"I": 1 - p, "Y": p}, 1, "bit_phase_flip"), name="bit_phase_flip")


def depolarizing(p, n_wires: int = 1) -> Channel:
    """Each non-identity Pauli string on ``n_wires`` with probability ``p / (4**n_wires - 1)``
    (so p ∈ [0, 1] is the error probability; p = 3/4 on one wire gives I/2)."""
    if isinstance(n_wires, bool) or not isinstance(n_wires, int) or n_wires < 1:
        raise ValueError(f"depolarizing: n_wires must be a positive int, got {n_wires!r}")
    p = _param(p, "p", "depolarizing")
    labels = [""]
    for _ in range(n_wires):
        labels = [a + b for a in labels for b in "IXYZ"]
    m = 4 ** n_wires - 1
    probs = {lab: (1 - p) if set(lab) == {"I"} else p / m for lab in labels}
    return Channel(_pauli_kraus(probs, n_wires, "depolarizing"), name="depolarizing")


def pauli_channel(px=0.0, py=0.0, pz=0.0, probs: Optional[dict] = None) -> Channel:
    """X, Y, Z with probabilities px, py, pz (identity otherwise); or ``probs={"XX": .., "ZI": ..}``
    over Pauli labels of one length (letter i on wire i of the channel)."""
    what = "pauli_channel"
    if probs is None:
        probs = {"X": px, "Y": py, "Z": pz}
    elif any(float(v.detach()) != 0 if isinstance(v, torch.Tensor) and v.numel() == 1 else
             (not isinstance(v, (int, float)) or v != 0) for v in (px, py, pz)):
        raise ValueError(f"{what}: give px, py, pz or probs=, not both")
    if not isinstance(probs, dict) or not probs:
        raise ValueError(f"{what}: probs must be a non-empty dict of Pauli labels to probabilities")
    lengths = {len(k) for k in probs}
    if len(lengths) != 1 or any(not k or set(k) - set("IXYZ") for k in probs):
        raise ValueError(f"{what}: labels must be non-empty strings of I, X, Y, Z of one length, got "
                         f"{sorted(probs)}")
    k = lengths.pop()
    ps = {lab: _param(v, f"probability of {lab}", what) for lab, v in probs.items()}
    ident = "I" * k
    total = sum(v for lab, v in ps.items() if lab != ident)
    rest = (ps.get(ident, 1 - total) if ident in ps else 1 - total)
    if float(total.detach() if isinstance(total, torch.Tensor) else total) > 1 + 1e-12:
        raise ValueError(f"{what}: probabilities sum to {float(total):g} > 1")
    full = {ident: torch.as_tensor(rest, dtype=torch.float64).clamp_min(0)}
    full.update({lab: v for lab, v in ps.items() if lab != ident})
    return Channel(_pauli_kraus(full, k, what), name=what)


def amplitude_damping(gamma) -> Channel:
    """Energy relaxation |1⟩ → |0⟩ with probability γ: K₀ = diag(1, √(1−γ)), K₁ = √γ |0⟩⟨1|."""
    g = _param(gamma, "gamma", "amplitude_damping")
    z = torch.zeros((), dtype=torch.float64)
    k0 = _mat([1.0 + z, z], [z, torch.sqrt(1 - g)])
    k1 = _mat([z, torch.sqrt(g)], [z, z])
    return Channel(torch.stack([k0, k1]), name="amplitude_damping")


def generalized_amplitude_damping(gamma, p) -> Channel:
    """Relaxation with strength γ towards |0⟩ (probability p) or |1⟩ (probability 1 − p)."""
    g = _param(gamma, "gamma", "generalized_amplitude_damping")
    p = _param(p, "p", "generalized_amplitude_damping")
    z = torch.zeros((), dtype=torch.float64)
    sp, sq = torch.sqrt(p), torch.sqrt(1 - p)
    k0 = _mat([sp, z], [z, sp * torch.sqrt(1 - g)])
    k1 = _mat([z, sp * torch.sqrt(g)], [z, z])
    k2 = _mat([sq * torch.sqrt(1 - g), z], [z, sq])
    k3 = _mat([z, z], [sq * torch.sqrt(g), z])
    return Channel(torch.stack([k0, k1, k2, k3]), name="generalized_amplitude_damping")


def phase_damping(gamma) -> Channel:
    """Pure dephasing: K₀ = diag(1, √(1−γ)), K₁ = diag(0, √γ); coherences shrink by √(1−γ)."""
    g = _param(gamma, "gamma", "phase_damping")
    z = torch.zeros((), dtype=torch.float64)
    k0 = _mat([1.0 + z, z], [z, torch.sqrt(1 - g)])
    k1 = _mat([z, z], [z, torch.sqrt(g)])
    return Channel(torch.stack([k0, k1]), name="phase_damping")


def reset_channel(p0=1.0, p1=0.0) -> Channel:
    """Reset to |0⟩ with probability p0, to |1⟩ with p1, identity otherwise (p0 + p1 ≤ 1)."""
    what = "reset_channel"
    a = _param(p0, "p0", what)
    b = _param(p1, "p1", what)
    if float(a.detach() + b.detach()) > 1 + 1e-12:
        raise ValueError(f"{what}: p0 + p1 = {float(a + b):g} > 1")
    z = torch.zeros((), dtype=torch.float64)
    rest = torch.sqrt((1 - a - b).clamp_min(0))
    sa, sb = torch.sqrt(a), torch.sqrt(b)
    ops = [_mat([rest, z], [z, rest]),
           _mat([sa, z], [z, z]), _mat([z, sa], [z, z]),
           _mat([z, z], [sb, z]), _mat([z, z], [z, sb])]
    return Channel(torch.stack(ops), name=what)


def thermal_relaxation(t1, t2, time, excited_population=0.0) -> Channel:
    """Relaxation (T1) and dephasing (T2 ≤ 2·T1) during a gate of duration ``time``.

    Populations relax as ``e^{-t/T1}`` towards the thermal state with |1⟩-population
    ``excited_population``; coherences decay as ``e^{-t/T2}``. Built as generalized amplitude
    damping (γ = 1 − e^{-t/T1}) followed by the extra pure dephasing that brings the coherence
    decay from ``e^{-t/(2 T1)}`` to ``e^{-t/T2}``. ``t1`` may be ``math.inf``.
    """
    what = "thermal_relaxation"
    for name, v in (("t1", t1), ("t2", t2), ("time", time)):
        if isinstance(v, bool) or not isinstance(v, (int, float, torch.Tensor)):
            raise TypeError(f"{what}: {name} must be a number, got {v!r}")
        if isinstance(v, torch.Tensor) and (v.numel() != 1 or v.is_complex()):
            raise TypeError(f"{what}: {name} must be a real scalar, got a tensor of shape {tuple(v.shape)} "
                            f"and dtype {v.dtype}")
    t1f, t2f, tf = float(t1), float(t2), float(time)
    if not (t1f > 0) or math.isnan(t1f):
        raise ValueError(f"{what}: T1={t1f:g} must be > 0")
    if not (t2f > 0):
        raise ValueError(f"{what}: T2={t2f:g} must be > 0")
    if not (tf >= 0) or not math.isfinite(tf):
        raise ValueError(f"{what}: gate time {tf:g} must be finite and >= 0")
    if t2f > 2 * t1f:
        raise ValueError(f"{what}: T2={t2f:g} > 2*T1={2 * t1f:g} is unphysical (T2 must be <= 2*T1)")
    pe = _param(excited_population, "excited_population", what)

    def _t(v):
        return v.to(torch.float64) if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=torch.float64)
    T1, T2, t = _t(t1), _t(t2), _t(time)
    gamma = 1 - torch.exp(-t / T1)
    # extra dephasing λ with √(1−λ) = e^{-t/T2 + t/(2 T1)}
    lam = (1 - torch.exp(-2 * t / T2 + t / T1)).clamp(0, 1)
    gad = generalized_amplitude_damping(gamma, 1 - pe)
    pd = phase_damping(lam)
    out = gad.compose(pd, name=what)
    Channel(out.kraus, name=what)            # trace-preservation check of the composition
    return out
