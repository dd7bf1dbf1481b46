"""The public entry points: :func:`expectation`, :func:`apply_hamiltonian`, and the adjoint
method's helpers (:func:`weighted_bra`, :func:`diagonal_table`)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Optional

import torch

from ..caching import lasting
from ..kernels import native
from ..kernels.state import REAL_OF, n_wires_of
from .hamiltonian import TABLE_CACHE_BYTES, _as_observable, _check_fits, _require_hermitian
from .tables import _groups_of, _table
from .expval_plan import _ExpvalPlan, _prepare_state
from .shots import _shot_estimate


_MULTI_CACHE: "OrderedDict" = OrderedDict()
_MULTI_CACHE_SIZE = 16


@lasting
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




_DIAGONAL_CACHE: "OrderedDict" = OrderedDict()


@lasting
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
