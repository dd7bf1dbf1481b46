"""Quantum information on batched states: partial traces, fidelities, entropies, entanglement.

Inputs are state vectors ``(B, 2**n)`` (or ``(2**n,)``) or density matrices ``(B, 2**n, 2**n)``
(or a :class:`~torchquantum_layers.mixed.DensityMatrix`); a 2-d tensor is always a batch of
state vectors. Every function is batched and differentiable by autograd where the quantity is
smooth. Matrix square roots go through :func:`psd_sqrt`, whose gradient solves the Sylvester
equation ``S dS + dS S = dA`` in the eigenbasis (``dS_ij = dA_ij / (s_i + s_j)``), so it never
divides by eigenvalue gaps and stays finite for rank-deficient (e.g. pure) states.

Conventions: ``fidelity`` is the squared Uhlmann fidelity ``(Tr √(√ρ σ √ρ))²`` (``|⟨ψ|φ⟩|²``
for pure states), as in Qiskit and PennyLane (Paddle Quantum's ``state_fidelity`` is its square
root: pass ``squared=False``). Entropies use the natural log unless ``base`` is given.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

from .kernels.apply import check_wires
from .kernels.state import REAL_OF, check_allocation, n_wires_of, resolve_dtype
from .mixed.state import DensityMatrix, as_density

__all__ = ["partial_trace", "partial_transpose", "reduced_density_matrix", "purity", "psd_sqrt", "fidelity",
           "trace_distance", "vn_entropy", "relative_entropy", "renyi_entropy", "mutual_information",
           "entanglement_entropy", "concurrence", "negativity", "log_negativity", "schmidt_decomposition",
           "gate_fidelity", "process_fidelity", "average_gate_fidelity", "haar_state", "haar_unitary",
           "random_density_matrix"]


# ------------------------------------------------------------------------------------------------
# helpers
def _is_vector(state) -> bool:
    if isinstance(state, DensityMatrix):
        return False
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"expected a tensor or DensityMatrix, got {type(state).__name__}")
    return state.dim() in (1, 2)


def _vector(state, what):
    squeeze = state.dim() == 1
    if squeeze:
        state = state.unsqueeze(0)
    n = n_wires_of(state)
    return state, n, squeeze


def _matrix(state, what):
    """(rho (B, N, N), n, squeeze) from anything; squeeze when a single vector was given."""
    squeeze = isinstance(state, torch.Tensor) and state.dim() == 1
    rho, n = as_density(state, what)
    return rho, n, squeeze


def _out(x, squeeze):
    return x[0] if squeeze else x


def _keep_wires(keep, n, what):
    if keep is None:
        raise ValueError(f"{what}: give the wires to keep")
    if isinstance(keep, int) and not isinstance(keep, bool):
        keep = (keep,)
    return check_wires(keep, n, what)


def _check_base(base, what):
    if base is not None and (isinstance(base, bool) or not isinstance(base, numbers.Real)
                             or not math.isfinite(base) or base <= 0 or base == 1):
        raise ValueError(f"{what}: base must be a finite number > 0 other than 1 (or None for the natural "
                         f"log), got {base!r}")


def _log(x, base):
    out = torch.log(x)
    if base is None:
        return out
    _check_base(base, "qinfo")
    return out / math.log(base)


def _pair(x, y, what):
    """Two batches (B, ...) of one common complex dtype whose batch sizes broadcast (equal or 1)."""
    bx, by = x.shape[0], y.shape[0]
    if bx != by and 1 not in (bx, by):
        raise ValueError(f"{what}: batch sizes {bx} and {by} do not broadcast (give equal batches or a batch of 1)")
    dt = torch.promote_types(x.dtype, y.dtype)
    return x.to(dt), y.to(dt)


def _tol(dtype, N):
    return N * (1e-6 if dtype in (torch.complex64, torch.float32) else 1e-13)


def _herm(a):
    return (a + a.conj().transpose(-1, -2)) / 2


# ------------------------------------------------------------------------------------------------
# partial trace / transpose
def partial_trace(state, keep) -> torch.Tensor:
    """Reduced density matrix of the wires ``keep`` (in that order: ``keep[0]`` is the most
    significant bit of the result): ``(B, d, d)``. Accepts state vectors (no ``N×N`` matrix is
    built) or density matrices."""
    what = "partial_trace"
    if _is_vector(state):
        from .measure import reduced_density_matrix as rdm
        psi, n, squeeze = _vector(state, what)
        return _out(rdm(psi, _keep_wires(keep, n, what)), squeeze)
    rho, n = as_density(state, what)
    keep = _keep_wires(keep, n, what)
    B = rho.shape[0]
    rest = [w for w in range(n) if w not in keep]
    dk, dr = 2 ** len(keep), 2 ** len(rest)
    order = list(keep) + rest
    t = rho.reshape(B, *([2] * (2 * n)))
    if order != list(range(n)):
        t = t.permute(0, *[w + 1 for w in order], *[w + 1 + n for w in order])
    t = t.reshape(B, dk, dr, dk, dr)
    return t.diagonal(dim1=2, dim2=4).sum(-1)


reduced_density_matrix = partial_trace


def partial_transpose(state, wires) -> torch.Tensor:
    """ρ^{T_A}: transpose of the row/column indices of ``wires`` (the subsystem A)."""
    what = "partial_transpose"
    rho, n, squeeze = _matrix(state, what)
    wires = _keep_wires(wires, n, what)
    B, N, _ = rho.shape
    t = rho.reshape(B, *([2] * (2 * n)))
    perm = list(range(2 * n + 1))
    for w in wires:
        perm[w + 1], perm[w + 1 + n] = perm[w + 1 + n], perm[w + 1]
    return _out(t.permute(perm).reshape(B, N, N), squeeze)


def purity(state, wires=None) -> torch.Tensor:
    """Tr(ρ²) ``(B,)`` (of the reduced state of ``wires`` when given)."""
    what = "purity"
    if wires is not None:
        rho = partial_trace(state, wires)
        squeeze = rho.dim() == 2
        rho = rho.unsqueeze(0) if squeeze else rho
    else:
        rho, _, squeeze = _matrix(state, what)
    p = (rho.real.square() + rho.imag.square()).sum(dim=(-1, -2))
    return _out(p, squeeze)


# ------------------------------------------------------------------------------------------------
# matrix square root of a PSD matrix with a gap-free gradient
class _PsdSqrt(torch.autograd.Function):
    """(√A, V, √λ); the last two are for the backward only. New-style (setup_context, torch ops
    only), so torch.func's grad and vmap go through it."""
    generate_vmap_rule = True

    @staticmethod
    def forward(a):
        evals, evecs = torch.linalg.eigh(a)
        N = a.shape[-1]
        tol = _tol(a.dtype, N) * evals.abs().amax(dim=-1, keepdim=True).clamp_min(1e-300)
        lam = torch.where(evals > tol, evals, torch.zeros_like(evals))
        s = lam.sqrt()
        out = (evecs * s.unsqueeze(-2).to(evecs.dtype)) @ evecs.conj().transpose(-1, -2)
        return out, evecs, s

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, evecs, s = output
        ctx.mark_non_differentiable(evecs, s)
        ctx.save_for_backward(evecs, s)

    @staticmethod
    def backward(ctx, grad, _gv, _gs):
        evecs, s = ctx.saved_tensors
        denom = s.unsqueeze(-1) + s.unsqueeze(-2)
        inv = torch.where(denom > 0, 1 / denom.clamp_min(1e-300), torch.zeros_like(denom))
        g = evecs.conj().transpose(-1, -2) @ grad @ evecs
        return evecs @ (g * inv.to(g.dtype)) @ evecs.conj().transpose(-1, -2)


def psd_sqrt(a: torch.Tensor) -> torch.Tensor:
    """Square root of Hermitian positive semidefinite matrices ``(..., d, d)`` (negative round-off
    eigenvalues clamped to 0). Differentiable; the gradient is finite for singular matrices
    (the directions with two zero eigenvalues, where √ is not differentiable, get 0)."""
    return _PsdSqrt.apply(_herm(a))[0]


def _sqrt_trace(a):
    """Tr √A for PSD A (…, d, d), differentiable as psd_sqrt."""
    return torch.diagonal(psd_sqrt(a), dim1=-2, dim2=-1).sum(-1).real


# ------------------------------------------------------------------------------------------------
# distances
def fidelity(a, b, squared: bool = True) -> torch.Tensor:
    """State fidelity of two batches of states (broadcast over a batch of 1).

    pure–pure ``|⟨a|b⟩|²``, pure–mixed ``⟨ψ|ρ|ψ⟩``, mixed–mixed Uhlmann ``(Tr √(√ρ σ √ρ))²``.
    ``squared=False`` returns the root fidelity ``Tr √(√ρ σ √ρ)`` (Paddle Quantum's convention).
    Inputs are not renormalised. Differentiable in both arguments (see :func:`psd_sqrt`).
    """
    what = "fidelity"
    va, vb = _is_vector(a), _is_vector(b)
    squeeze = all(isinstance(t, torch.Tensor) and t.dim() == (1 if v else 2) for t, v in ((a, va), (b, vb)))
    if va and vb:
        a, n, _ = _vector(a, what)
        b, m, _ = _vector(b, what)
        _same(n, m, what)
        a, b = _pair(a, b, what)
        ov = (a.conj() * b).sum(-1)
        f = ov.real.square() + ov.imag.square() if squared else ov.abs()
    elif va or vb:
        psi, rho = (a, b) if va else (b, a)
        psi, n, _ = _vector(psi, what)
        rho, m = as_density(rho, what)
        _same(n, m, what)
        psi, rho = _pair(psi, rho, what)
        f = torch.einsum("bi,bij,bj->b", psi.conj(), rho, psi).real
        if not squared:                      # √F, with gradient 0 (not NaN) where F = 0
            pos = f > 0
            f = torch.where(pos, torch.where(pos, f, torch.ones_like(f)).sqrt(), torch.zeros_like(f))
    else:
        rho, n = as_density(a, what)
        sigma, m = as_density(b, what)
        _same(n, m, what)
        rho, sigma = _pair(rho, sigma, what)
        sr = psd_sqrt(rho)
        f = _sqrt_trace(sr @ sigma @ sr)     # the root fidelity (√ of its square: NaN gradient at 0)
        if squared:
            f = f.square()
    return f[0] if squeeze and f.shape[0] == 1 else f


def _same(n, m, what):
    if n != m:
        raise ValueError(f"{what}: the states have {n} and {m} qubits")


def trace_distance(a, b) -> torch.Tensor:
    """½‖ρ − σ‖₁ ``(B,)`` (pure states are turned into density matrices)."""
    what = "trace_distance"
    rho, n, sq1 = _matrix(a, what)
    sigma, m, sq2 = _matrix(b, what)
    _same(n, m, what)
    rho, sigma = _pair(rho, sigma, what)
    d = torch.linalg.eigvalsh(_herm(rho - sigma)).abs().sum(-1) / 2
    return _out(d, sq1 and sq2)


# ------------------------------------------------------------------------------------------------
# entropies
def _spectrum(state, wires, what):
    if wires is not None:
        rho = partial_trace(state, wires)
        squeeze = rho.dim() == 2
        rho = rho.unsqueeze(0) if squeeze else rho
    else:
        rho, _, squeeze = _matrix(state, what)
    return torch.linalg.eigvalsh(_herm(rho)), squeeze


def _xlogx(lam, base):
    tiny = torch.finfo(lam.dtype).tiny
    safe = lam.clamp_min(tiny)
    return torch.where(lam > tiny, lam * _log(safe, base), torch.zeros_like(lam))


def vn_entropy(state, wires=None, base: Optional[float] = None) -> torch.Tensor:
    """von Neumann entropy ``−Tr ρ log ρ`` ``(B,)``, of the reduced state of ``wires`` if given."""
    _check_base(base, "vn_entropy")
    lam, squeeze = _spectrum(state, wires, "vn_entropy")
    return _out(-_xlogx(lam, base).sum(-1), squeeze)


def entanglement_entropy(state, wires, base: Optional[float] = None) -> torch.Tensor:
    """Entropy of the reduced state of ``wires`` (entanglement entropy for pure states)."""
    return vn_entropy(state, wires, base)


def renyi_entropy(state, alpha: float, wires=None, base: Optional[float] = None) -> torch.Tensor:
    """Rényi entropy ``log(Tr ρ^α) / (1 − α)``; α = 1 is von Neumann, α = ∞ is ``−log λ_max``,
    α = 0 is ``log rank``."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or math.isnan(alpha) or alpha < 0:
        raise ValueError(f"renyi_entropy: alpha must be a number >= 0, got {alpha!r}")
    _check_base(base, "renyi_entropy")
    if alpha == 1:
        return vn_entropy(state, wires, base)
    lam, squeeze = _spectrum(state, wires, "renyi_entropy")
    lam = lam.clamp_min(0)
    if math.isinf(alpha):
        out = -_log(lam.amax(-1), base)
    elif alpha == 0:
        tol = _tol(lam.dtype, lam.shape[-1])
        out = _log((lam > tol).sum(-1).to(lam.dtype), base)
    elif alpha == 2:
        out = -_log(lam.square().sum(-1), base)
    else:
        # eigenvalues at the round-off level are zeros (as for α = 0): for α < 1, λ^α would
        # inflate them (1e-17 ** 0.01 = 0.68), making a pure state look mixed
        tol = _tol(lam.dtype, lam.shape[-1]) * lam.amax(-1, keepdim=True).detach()
        keep = lam > tol
        powered = torch.where(keep, torch.where(keep, lam, torch.ones_like(lam)) ** alpha, torch.zeros_like(lam))
        out = _log(powered.sum(-1), base) / (1 - alpha)
    return _out(out, squeeze)


class _SupportLog(torch.autograd.Function):
    """(L, μ, V) for Hermitian PSD σ: ``L = V diag(log μ) V†`` on the support (μ > tol; 0 on the
    kernel). The gradient is the Daleckii–Krein formula ``dL = V (K ∘ V† dσ V) V†`` with the
    divided differences ``K_ij = (log μ_i − log μ_j) / (μ_i − μ_j)`` (``1 / μ`` at equal μ),
    evaluated stably, so it stays finite at degenerate spectra (eigh's own backward divides by
    eigenvalue gaps: NaN for the maximally mixed state); 0 for kernel directions."""

    generate_vmap_rule = True           # new-style, torch ops only: torch.func goes through it

    @staticmethod
    def forward(a, tol):
        mu, v = torch.linalg.eigh(a)
        supp = mu > tol
        logmu = torch.where(supp, torch.log(torch.where(supp, mu, torch.ones_like(mu))), torch.zeros_like(mu))
        out = (v * logmu.unsqueeze(-2).to(v.dtype)) @ v.conj().transpose(-1, -2)
        return out, mu, v

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, mu, v = output
        ctx.tol = inputs[1]
        ctx.mark_non_differentiable(mu, v)
        ctx.save_for_backward(v, mu)

    @staticmethod
    def backward(ctx, grad, _gmu, _gv):
        v, mu = ctx.saved_tensors
        supp = mu > ctx.tol
        safe = torch.where(supp, mu, torch.ones_like(mu))
        mi, mj = safe.unsqueeze(-1), safe.unsqueeze(-2)
        mean = (mi + mj) / 2
        x = (mi - mj) / (mi + mj)                          # |x| < 1: log(mi/mj) = 2 atanh(x)
        small = x.abs() < 1e-4
        xs = torch.where(small, torch.ones_like(x), x)
        k = torch.where(small, 1 + x * x / 3, torch.atanh(xs) / xs) / mean
        k = torch.where(supp.unsqueeze(-1) & supp.unsqueeze(-2), k, torch.zeros_like(k))
        g = v.conj().transpose(-1, -2) @ grad @ v
        return v @ (g * k.to(g.dtype)) @ v.conj().transpose(-1, -2), None


def relative_entropy(rho, sigma, base: Optional[float] = None) -> torch.Tensor:
    """Quantum relative entropy ``Tr ρ (log ρ − log σ)`` ``(B,)``; ``inf`` where the support of ρ
    is not inside that of σ. Differentiable in both arguments, with a finite gradient at
    degenerate σ (e.g. the maximally mixed state)."""
    what = "relative_entropy"
    _check_base(base, what)
    r, n, sq1 = _matrix(rho, what)
    s, m, sq2 = _matrix(sigma, what)
    _same(n, m, what)
    r, s = _pair(r, s, what)
    lam = torch.linalg.eigvalsh(_herm(r))
    tol = _tol(r.dtype, r.shape[-1])
    log_s, mu, v = _SupportLog.apply(_herm(s), tol)
    weights = torch.einsum("bji,bjk,bki->bi", v.conj(), r.detach(), v).real          # ⟨v_i|ρ|v_i⟩
    cross = torch.einsum("bij,bji->b", r, log_s).real                                 # Tr ρ log σ (support)
    bad = ((mu <= tol) & (weights > tol)).any(-1)
    out = _xlogx(lam, None).sum(-1) - cross
    if base is not None:
        out = out / math.log(base)
    out = torch.where(bad, torch.full_like(out, math.inf), out)
    return _out(out, sq1 and sq2)


def mutual_information(state, wires_a, wires_b, base: Optional[float] = None) -> torch.Tensor:
    """``S(A) + S(B) − S(AB)`` of the reduced states of ``wires_a`` and ``wires_b``."""
    a = tuple([wires_a] if isinstance(wires_a, numbers.Integral) else wires_a)
    b = tuple([wires_b] if isinstance(wires_b, numbers.Integral) else wires_b)
    if set(a) & set(b):
        raise ValueError(f"mutual_information: wires {sorted(set(a) & set(b))} are in both subsystems")
    return vn_entropy(state, a, base) + vn_entropy(state, b, base) - vn_entropy(state, a + b, base)


# ------------------------------------------------------------------------------------------------
# entanglement
def concurrence(state, wires=None) -> torch.Tensor:
    """Wootters concurrence of two qubits ``(B,)``: ``2|ad − bc|`` for a pure 2-qubit state,
    ``max(0, λ₁ − λ₂ − λ₃ − λ₄)`` for a mixed one (λ: decreasing eigenvalues of
    ``√(√ρ ρ̃ √ρ)``, ρ̃ = (Y⊗Y) ρ* (Y⊗Y)). ``wires`` picks two wires of a larger state."""
    what = "concurrence"
    if wires is not None:
        wires = (wires,) if isinstance(wires, numbers.Integral) else tuple(wires)
        if len(wires) != 2:
            raise ValueError(f"{what}: give exactly two wires, got {wires}")
        rho = partial_trace(state, wires)
        squeeze = rho.dim() == 2
        rho = rho.unsqueeze(0) if squeeze else rho
    elif _is_vector(state):
        psi, n, squeeze = _vector(state, what)
        if n != 2:
            raise ValueError(f"{what}: the state has {n} qubits; give wires= to pick two")
        c = 2 * (psi[:, 0] * psi[:, 3] - psi[:, 1] * psi[:, 2]).abs()
        return _out(c, squeeze)
    else:
        rho, n, squeeze = _matrix(state, what)
        if n != 2:
            raise ValueError(f"{what}: the state has {n} qubits; give wires= to pick two")
    yy = torch.tensor([[0, 0, 0, -1], [0, 0, 1, 0], [0, 1, 0, 0], [-1, 0, 0, 0]], dtype=rho.dtype,
                      device=rho.device)
    tilde = yy @ rho.conj() @ yy
    sr = psd_sqrt(rho)
    lam = torch.linalg.eigvalsh(_herm(sr @ tilde @ sr)).clamp_min(0)
    # round-off eigenvalues (1e-17 for a rank-deficient ρ) are zeros: their square roots
    # (3e-9) would otherwise be subtracted from λ₁
    tol = _tol(lam.dtype, lam.shape[-1]) * lam.amax(-1, keepdim=True).detach()
    keep = lam > tol
    lam = torch.where(keep, torch.where(keep, lam, torch.ones_like(lam)).sqrt(), torch.zeros_like(lam))
    lam = lam.flip(-1)                       # decreasing
    c = (lam[:, 0] - lam[:, 1:].sum(-1)).clamp_min(0)
    return _out(c, squeeze)


def negativity(state, wires, log: bool = False) -> torch.Tensor:
    """Negativity ``(‖ρ^{T_A}‖₁ − 1) / 2`` for the bipartition A = ``wires`` vs the rest
    (``log=True``: logarithmic negativity ``log₂ ‖ρ^{T_A}‖₁``)."""
    what = "negativity"
    rho, n, squeeze = _matrix(state, what)
    pt = partial_transpose(rho, wires)
    norm = torch.linalg.eigvalsh(_herm(pt)).abs().sum(-1)
    out = torch.log2(norm) if log else (norm - 1) / 2
    return _out(out, squeeze)


def log_negativity(state, wires) -> torch.Tensor:
    return negativity(state, wires, log=True)


def schmidt_decomposition(state, wires):
    """Schmidt decomposition of pure states across ``wires`` (A, in the given order) vs the rest
    (B, increasing order): ``(coeffs (B, r), a (B, d_A, r), b (B, d_B, r))`` with
    ``ψ = Σ_k coeffs[k] a[:, k] ⊗ b[:, k]`` and r = min(d_A, d_B), coefficients decreasing."""
    what = "schmidt_decomposition"
    if not _is_vector(state):
        raise ValueError(f"{what}: needs pure states (B, 2**n), got a density matrix")
    psi, n, squeeze = _vector(state, what)
    wires = _keep_wires(wires, n, what)
    rest = [w for w in range(n) if w not in wires]
    if not rest:
        raise ValueError(f"{what}: wires {wires} cover the whole register; nothing to split")
    B = psi.shape[0]
    order = list(wires) + rest
    m = psi.reshape(B, *([2] * n)).permute(0, *[w + 1 for w in order]).reshape(B, 2 ** len(wires), -1)
    u, s, vh = torch.linalg.svd(m, full_matrices=False)
    out = (s, u, vh.transpose(-1, -2))
    return tuple(t[0] for t in out) if squeeze else out


# ------------------------------------------------------------------------------------------------
# gates and channels
def _unitary(u, what):
    if not isinstance(u, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(u).__name__}")
    squeeze = u.dim() == 2
    if squeeze:
        u = u.unsqueeze(0)
    if u.dim() != 3 or u.shape[-1] != u.shape[-2]:
        raise ValueError(f"{what}: expected square matrices (d, d) or (B, d, d), got shape {tuple(u.shape)}")
    if not u.is_complex():
        u = u.to(torch.complex128 if u.dtype == torch.float64 else torch.complex64)
    return u, squeeze


def gate_fidelity(u, v) -> torch.Tensor:
    """``|Tr(U† V)| / d`` (Paddle Quantum's gate fidelity; 1 iff U = V up to a phase)."""
    u, s1 = _unitary(u, "gate_fidelity")
    v, s2 = _unitary(v, "gate_fidelity")
    if u.shape[-1] != v.shape[-1]:
        raise ValueError(f"gate_fidelity: matrices of size {u.shape[-1]} and {v.shape[-1]}")
    u, v = _pair(u, v, "gate_fidelity")
    tr = torch.einsum("bij,bij->b", u.conj(), v)
    return _out(tr.abs() / u.shape[-1], s1 and s2)


def process_fidelity(channel, target) -> torch.Tensor:
    """Process (entanglement) fidelity to a target unitary: ``|Tr(U†V)|² / d²`` for a unitary
    ``channel``, ``Σ_a |Tr(U† K_a)|² / d²`` for a :class:`~torchquantum_layers.mixed.Channel`."""
    from .mixed.channels import Channel
    t, s = _unitary(target, "process_fidelity")
    d = t.shape[-1]
    if isinstance(channel, Channel):
        k = channel.kraus.to(device=t.device)
        if k.shape[-1] != d:
            raise ValueError(f"process_fidelity: the channel acts on dimension {k.shape[-1]}, the target on {d}")
        tr = torch.einsum("bij,aij->ba", t.conj().to(k.dtype), k)
        return _out((tr.real.square() + tr.imag.square()).sum(-1) / d ** 2, s)
    return gate_fidelity(channel, target) ** 2


def average_gate_fidelity(channel, target) -> torch.Tensor:
    """Average gate fidelity ``(d F_pro + 1) / (d + 1)`` (Nielsen's formula)."""
    t, _ = _unitary(target, "average_gate_fidelity")
    d = t.shape[-1]
    return (d * process_fidelity(channel, target) + 1) / (d + 1)


# ------------------------------------------------------------------------------------------------
# random states and unitaries
def _gaussian(shape, generator, dtype, device):
    real = REAL_OF[dtype]
    gen_device = generator.device if generator is not None else device
    parts = torch.randn(2, *shape, dtype=real, generator=generator, device=gen_device)
    return torch.complex(parts[0], parts[1]).to(device=device)


def _check_n(n, what):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what}: n_wires must be a positive int, got {n!r}")


def haar_state(n_wires: int, batch: int = 1, generator: Optional[torch.Generator] = None, dtype=None,
               device=None) -> torch.Tensor:
    """Haar-random pure states ``(batch, 2**n)`` (normalised complex Gaussian vectors)."""
    from .kernels.state import random_state
    _check_n(n_wires, "haar_state")
    return random_state(n_wires, batch, generator=generator, dtype=dtype, device=device)


def haar_unitary(n_wires: int, batch: int = 1, generator: Optional[torch.Generator] = None, dtype=None,
                 device=None) -> torch.Tensor:
    """Haar-random unitaries ``(batch, 2**n, 2**n)``: QR of a complex Ginibre matrix with the
    phases of R's diagonal moved into Q (Mezzadri's recipe)."""
    _check_n(n_wires, "haar_unitary")
    dtype = resolve_dtype(dtype)
    d = 2 ** n_wires
    check_allocation(2 * n_wires, batch, dtype, device)
    z = _gaussian((batch, d, d), generator, dtype, device)
    q, r = torch.linalg.qr(z)
    diag = torch.diagonal(r, dim1=-2, dim2=-1)
    return q * (diag / diag.abs()).unsqueeze(-2)


def random_density_matrix(n_wires: int, batch: int = 1, rank: Optional[int] = None, kind: str = "hs",
                          generator: Optional[torch.Generator] = None, dtype=None, device=None) -> torch.Tensor:
    """Random density matrices ``(batch, 2**n, 2**n)``: ``G G† / Tr`` for a Ginibre ``G`` of
    ``rank`` columns (default full: the Hilbert–Schmidt measure), or the Bures measure
    (``kind="bures"``: ``(I + U) G G† (I + U)†`` normalised, U Haar)."""
    _check_n(n_wires, "random_density_matrix")
    dtype = resolve_dtype(dtype)
    d = 2 ** n_wires
    if rank is None:
        rank = d
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= d:
        raise ValueError(f"random_density_matrix: rank must be an int in [1, {d}], got {rank!r}")
    if kind not in ("hs", "bures"):
        raise ValueError(f"random_density_matrix: kind must be 'hs' or 'bures', got {kind!r}")
    check_allocation(2 * n_wires, batch, dtype, device)
    g = _gaussian((batch, d, rank), generator, dtype, device)
    if kind == "bures":
        u = haar_unitary(n_wires, batch, generator, dtype, device)
        g = (torch.eye(d, dtype=dtype, device=device) + u) @ g
    rho = g @ g.conj().transpose(-1, -2)
    return rho / torch.diagonal(rho, dim1=-2, dim2=-1).sum(-1).real[:, None, None]
