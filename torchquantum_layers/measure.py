"""Measurement of batched state vectors ``(B, 2**n)``: probabilities, samples, reduced states.

Everything works on the whole batch at once, on the state's device, and is differentiable
where that makes sense (probabilities, reduced density matrices, ⟨Z⟩). ``wires`` are listed in
the order the result should use: the first listed wire is the most significant bit of the
result's index (``probabilities(state, wires=(2, 0))[:, 0b10]`` is P(wire 2 = 1, wire 0 = 0)).
No operation builds a dense ``2**n × 2**n`` matrix.
"""
from __future__ import annotations

from typing import Optional

import torch

from .kernels import native
from .kernels.apply import apply_matrix_unchecked, check_wires
from .kernels.state import n_wires_of
from .kernels.transforms import transforms_active

__all__ = ["probabilities", "sample", "to_bits", "counts", "reduced_density_matrix", "expval_z"]


def _wires(wires, n: int, what: str) -> tuple:
    if wires is None:
        return tuple(range(n))
    if isinstance(wires, (str, bytes)):
        raise TypeError(f"{what}: wires must be an int or a sequence of ints, got {wires!r}")
    wires = check_wires(wires, n, what)
    if not wires:
        raise ValueError(f"{what}: wires must not be empty")
    return wires


def _abs2(state: torch.Tensor) -> torch.Tensor:
    if native.runs_on(state):
        return _NativeAbs2.apply(state)
    return state.real.square() + state.imag.square()


class _NativeAbs2(torch.autograd.Function):
    """|ψ|² by the native one-pass kernel; backward 2 ψ g natively, by torch ops where a graph of
    it is asked for."""

    @staticmethod
    def forward(ctx, state):
        ctx.save_for_backward(state)
        return native.abs2(state)

    @staticmethod
    def backward(ctx, grad):
        state, = ctx.saved_tensors
        if torch.is_grad_enabled() or state.dim() != 2:
            return 2 * state * grad
        return native.scale_by_real(state, grad, 2.0)


def probabilities(state: torch.Tensor, wires=None) -> torch.Tensor:
    """Marginal probabilities of the computational basis of ``wires``: ``(B, 2**len(wires))``, real.

    ``wires`` default: all wires in order (then this is ``|ψ|²``). The state is not renormalised.
    """
    return _probabilities(state, wires, "probabilities")


def _probabilities(state, wires, what):
    n = n_wires_of(state)
    return marginal(_abs2(state), _wires(wires, n, what), n)


def marginal(p: torch.Tensor, wires: tuple, n: int) -> torch.Tensor:
    """Marginal of basis probabilities ``(B, 2**n)`` onto validated ``wires``, in the given order."""
    if wires == tuple(range(n)):
        return p
    B = p.shape[0]
    t = p.reshape(B, *([2] * n))
    others = [w + 1 for w in range(n) if w not in wires]
    if others:
        t = t.sum(dim=others)
    # remaining axes are the kept wires in increasing order; put them in the requested order
    kept = sorted(wires)
    order = [kept.index(w) + 1 for w in wires]
    if order != sorted(order):
        t = t.permute(0, *order)
    return t.reshape(B, 2 ** len(wires))


def sample(state: torch.Tensor, shots: int, wires=None,
           generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Draw ``shots`` computational-basis measurements of ``wires`` per batch element.

    Returns int64 ``(B, shots)`` of basis indices on ``wires`` (first listed wire = most
    significant bit; see :func:`to_bits`). Sampling is by inverse CDF (one ``searchsorted``), so
    it works for any number of outcomes, draws from the rows' own norms (states need not be
    normalised) and is reproducible with a seeded ``generator`` (on the state's device).
    """
    what = "sample"
    if not isinstance(shots, int) or isinstance(shots, bool):
        raise TypeError(f"{what}: shots must be an int, got {shots!r}")
    if shots < 1:
        raise ValueError(f"{what}: shots must be >= 1, got {shots}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
    n = n_wires_of(state)
    every_wire = wires is None or _wires(wires, n, what) == tuple(range(n))
    # all wires on the CPU: the CDF and the searches natively (torch's cumsum runs on one thread)
    fast = native.runs_on(state)
    cdf = native.cdf(state.detach()) if every_wire and fast else None
    if cdf is None:
        cdf = torch.cumsum(_probabilities(state, wires, what).detach().to(torch.float64), dim=1)
    if generator is not None and generator.device.type != cdf.device.type:
        raise ValueError(f"{what}: generator is on {generator.device} but the state is on {cdf.device}")
    total = cdf[:, -1:]
    if cdf.device.type == "cpu":
        bad = ~(total[:, 0] > 0) | ~torch.isfinite(total[:, 0])
        if bool(bad.any()):
            row = int(bad.nonzero()[0, 0])
            raise ValueError(f"{what}: state {row} has zero norm or contains NaN/inf")
    u = torch.rand(cdf.shape[0], shots, generator=generator, device=cdf.device, dtype=torch.float64) * total
    if fast:
        return native.upper_bound(cdf, u)
    idx = torch.searchsorted(cdf, u, right=True)
    return idx.clamp_(max=cdf.shape[1] - 1)


def _check_n(n, what):
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"{what}: n must be an int, got {n!r}")
    if not 1 <= n <= 62:
        raise ValueError(f"{what}: n must be in [1, 62], got {n}")


def _check_samples(samples, n, what):
    if not isinstance(samples, torch.Tensor):
        samples = torch.as_tensor(samples)
    if samples.is_floating_point() or samples.is_complex() or samples.dtype == torch.bool:
        raise TypeError(f"{what}: samples must be an integer tensor, got {samples.dtype}")
    if samples.device.type == "cpu" and samples.numel():
        lo, hi = int(samples.min()), int(samples.max())
        if lo < 0 or hi >= 2 ** n:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{what}: sample value {bad} is out of range [0, {2 ** n}) for n={n}")
    return samples


def to_bits(samples: torch.Tensor, n: int) -> torch.Tensor:
    """Basis indices ``(...,)`` → bits ``(..., n)`` (0/1, int64), most significant bit first, so
    ``to_bits(sample(state, s, wires), len(wires))[..., i]`` is the outcome of ``wires[i]``."""
    what = "to_bits"
    _check_n(n, what)
    samples = _check_samples(samples, n, what)
    shifts = torch.arange(n - 1, -1, -1, device=samples.device, dtype=torch.int64)
    return (samples.to(torch.int64).unsqueeze(-1) >> shifts) & 1


def counts(samples: torch.Tensor, n: int, batch_index: int = 0) -> dict:
    """``{bitstring: count}`` of one batch element's samples, sorted by bitstring, zero counts left
    out. ``samples``: ``(B, shots)`` (row ``batch_index`` is used) or ``(shots,)``."""
    what = "counts"
    _check_n(n, what)
    samples = _check_samples(samples, n, what)
    if samples.dim() == 2:
        if not isinstance(batch_index, int) or not -samples.shape[0] <= batch_index < samples.shape[0]:
            raise ValueError(f"{what}: batch_index {batch_index!r} is out of range for "
                             f"{samples.shape[0]} batch element(s)")
        samples = samples[batch_index]
    elif samples.dim() != 1:
        raise ValueError(f"{what}: samples must have shape (B, shots) or (shots,), got {tuple(samples.shape)}")
    values, cnt = torch.unique(samples.cpu(), return_counts=True)
    return {format(int(v), f"0{n}b"): int(c) for v, c in zip(values.tolist(), cnt.tolist())}


def reduced_density_matrix(state: torch.Tensor, wires) -> torch.Tensor:
    """Reduced density matrix of ``wires`` (partial trace over the others): ``(B, d, d)``,
    ``d = 2**len(wires)``, indexed with ``wires[0]`` as most significant bit.

    One reshape/permute of the state to ``(B, d, 2**n / d)`` and one batched ``ψ ψ†`` product:
    O(d · 2**n) work, no dense ``2**n``-square matrix; on the CPU, for up to 3 wires of 16 or more,
    one native pass instead, and its gradient one pass of a (d × d) gate.
    """
    what = "reduced_density_matrix"
    n = n_wires_of(state)
    if wires is None:
        raise ValueError(f"{what}: give the wires to keep")
    wires = _wires(wires, n, what)
    if (len(wires) <= 3 and n >= 16 or len(wires) == 1 and n >= 10) and native.runs_on(state):
        # one pass of levels.c's gram (Σ ψ_i conj(ψ_j) over the other wires, in double): torch's
        # permute + batched product took 4-12 clones at 2^20-2^22, the gram 1.1-5 for 1-3 wires
        # (more wires, or states below 2^10, were slower than torch's); one wire of 2^10-2^15 in
        # large batches (trajectories' branch probabilities): 1.2-2.0 vs 1.4-6.7 ms at 32 MiB
        return _NativeReducedDensity.apply(state, wires, n)
    return _reduced_by_product(state, wires, n)


def _reduced_by_product(state, wires, n):
    B, d = state.shape[0], 2 ** len(wires)
    order = list(wires) + [w for w in range(n) if w not in wires]
    if order == list(range(n)):
        m = state.reshape(B, d, -1)
    else:
        m = state.reshape(B, *([2] * n)).permute(0, *[w + 1 for w in order]).reshape(B, d, -1)
    return m @ m.conj().transpose(1, 2)


class _NativeReducedDensity(torch.autograd.Function):
    """ρ of ``wires`` by the native gram; backward (G + G†) acting on those wires of ψ (the
    gradient of ψ ↦ m m† for m = ψ as (d, rest)), by the gate kernels."""

    @staticmethod
    def forward(ctx, state, wires, n):
        ctx.save_for_backward(state)
        ctx.wires, ctx.n = wires, n
        rho = native.gram_levels(state, state, wires, n, per_sample=True)
        return _reduced_by_product(state, wires, n) if rho is None else rho.to(state.dtype)

    @staticmethod
    def backward(ctx, grad):
        state, = ctx.saved_tensors
        return apply_matrix_unchecked(state, grad + grad.conj().transpose(1, 2), ctx.wires, ctx.n), None, None


def expval_z(state: torch.Tensor, wires=None) -> torch.Tensor:
    """⟨Z_w⟩ for each of ``wires`` (default all): real ``(B, len(wires))``, in the given order.

    P(w = 0) − P(w = 1) for every wire at once, differentiable: on the CPU one native pass of bit
    sums (``native.bit_sums``), elsewhere |ψ|² folded in half once per wire, each fold's upper half
    giving that wire's share (about two passes over |ψ|² in all; a strided sum per wire was
    n passes: 86 clone-times for all 20 wires of one state). The gradient 2 ψ Σ_w g_w z_w is one
    pass too (native, or its diagonal built a wire at a time).
    """
    n = n_wires_of(state)
    wires = _wires(wires, n, "expval_z")
    z = _z_by_folding(state) if transforms_active() else _ZOfEveryWire.apply(state)
    return z[:, list(wires)]


def _z_by_folding(state):
    """(B, n) ⟨Z_w⟩ by torch ops: |ψ|² folded in half once per wire."""
    p = _abs2(state)
    B, n = p.shape[0], n_wires_of(state)
    total = p.sum(dim=1)
    out = []
    for _ in range(n):
        halves = p.reshape(B, 2, -1)            # the top index bit: the next wire
        out.append(total - 2 * halves[:, 1].sum(dim=1))
        p = halves[:, 0] + halves[:, 1]
    return torch.stack(out, dim=1)


class _ZOfEveryWire(torch.autograd.Function):
    """(B, n) ⟨Z_w⟩ of every wire; the index bit of wire w is n − 1 − w."""

    @staticmethod
    def forward(ctx, state):
        ctx.save_for_backward(state)
        if native.runs_on(state):
            return (native.bit_sums(state) @ native.z_of_bit_sums(n_wires_of(state))[:, 1:]).to(state.real.dtype)
        return _z_by_folding(state)

    @staticmethod
    def backward(ctx, grad):
        state, = ctx.saved_tensors
        B, n = grad.shape
        if native.runs_on(state) and not torch.is_grad_enabled():
            return native.bit_sums_grad(state, grad.to(torch.float64) @ native.z_of_bit_sums(n)[:, 1:].T)
        # z_w(i) = 1 − 2 bit_w(i): Σ_w g_w z_w built one wire (index bit) at a time, by torch ops
        # (so a graph of the gradient is there when one is asked for)
        d = grad.sum(dim=1, keepdim=True)
        for w in range(n):
            d = torch.stack([d, d - 2 * grad[:, w:w + 1]], dim=2).reshape(B, -1)
        return 2 * state * d.to(state.real.dtype)
