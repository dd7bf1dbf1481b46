"""Running a :class:`~tql.Circuit` as a matrix-product state.

One-qubit gates are contracted into their site. A gate on k ≤ :data:`MAX_GATE_WIRES` wires is
routed by SWAPs: its wires, sorted, are brought next to the lowest one, the gate (its matrix
permuted to the sorted order) is applied to the k adjacent sites (contract, k − 1 truncated
SVDs), and the SWAPs are undone. Toffoli, CSWAP, DoubleExcitation… thus run as they are; a
wider gate (a MultiRZ or multi-controlled X on many wires) raises a ValueError naming it:
decompose it first.
"""
from __future__ import annotations

import numbers

import torch

from ..kernels.state import REAL_OF
from ..kernels.transforms import vmap_active
from .state import MPS

MAX_GATE_WIRES = 4
"""Widest gate applied as one block (a 2**k-square matrix on k contracted sites)."""
DIFF_METHODS = ("backprop",)


def _check(circuit, max_bond, cutoff, what):
    from ..circuit import Circuit
    if not isinstance(circuit, Circuit):
        raise TypeError(f"{what}: expected a tql.Circuit, got {type(circuit).__name__}")
    from ..mixed import MixedCircuit
    if circuit.is_noisy or isinstance(circuit, MixedCircuit):
        raise TypeError(f"{what}: the circuit has channels, measurements, resets or a noise model "
                        f"or is a MixedCircuit; the MPS simulator runs pure-state Circuits only")
    if isinstance(max_bond, bool) or not isinstance(max_bond, numbers.Integral) or max_bond < 1:
        raise ValueError(f"{what}: max_bond must be an int >= 1, got {max_bond!r}")
    if isinstance(cutoff, bool) or not isinstance(cutoff, numbers.Real) or not 0 <= cutoff < 1:
        raise ValueError(f"{what}: cutoff must be a number in [0, 1), got {cutoff!r}")
    for op in circuit.ops:
        if len(op.wires) > MAX_GATE_WIRES:
            raise ValueError(f"{what}: {op.gate.name} acts on {len(op.wires)} wires {op.wires}; the MPS "
                             f"simulator applies gates of at most {MAX_GATE_WIRES} wires: decompose it")
        if any(not 0 <= w < circuit.n_wires for w in op.wires):
            raise ValueError(f"{what}: {op.gate.name} on wires {op.wires} is out of range for "
                             f"{circuit.n_wires} wires")


def _features(circuit, x, what):
    """``x`` as a validated real (B, F) tensor (or None) and whether it was one row."""
    if x is None:
        if circuit.n_inputs:
            raise ValueError(f"{what}: gates read {circuit.n_inputs} input column(s) but no x was given")
        return None, False
    x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if x.is_complex():
        raise TypeError(f"{what}: input features must be real, got {x.dtype}")
    squeeze = x.dim() == 1
    if squeeze:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise ValueError(f"{what}: input features must have shape (B, F) or (F,), got {tuple(x.shape)}")
    if x.shape[1] < circuit.n_inputs:
        raise ValueError(f"{what}: gates read input column {circuit.n_inputs - 1} but x has only "
                         f"{x.shape[1]} column(s)")
    if x.device != circuit.device:
        raise TypeError(f"{what}: input x is on {x.device} but the circuit is on {circuit.device}")
    # on CUDA this check would be a host sync per call (as Circuit.prepare, CPU only)
    if x.device.type == "cpu" and not torch.isfinite(x).all():
        raise ValueError(f"{what}: input features contain NaN or inf")
    return x.to(REAL_OF[circuit.dtype]), squeeze


def _op_matrix(circuit, op, x, weights):
    angles = circuit.angle_values(op, x, weights)
    m = op.gate.matrix(angles, n_wires=len(op.wires), dtype=circuit.dtype, device=circuit.device,
                       data=circuit.data(op))
    return m.conj().transpose(-1, -2) if op.adjoint else m


# Matrices (wires sorted) of gates with fixed angles and no data buffer, shared across runs: key
# (id(gate), angles, adjoint, wire order, dtype, device) → (gate, matrix); the gate is kept and
# compared by identity so a recycled id cannot return another gate's matrix.
_FIXED = {}
_FIXED_MAX = 4096


def _fixed_key(circuit, op):
    if op.data_key is not None or any(not isinstance(a, numbers.Real) or isinstance(a, bool)
                                      for a in op.angles):
        return None
    order = tuple(sorted(range(len(op.wires)), key=lambda j: op.wires[j]))
    return (id(op.gate), tuple(float(a) for a in op.angles), op.adjoint, order, circuit.dtype,
            circuit.device)


def _sorted_op_matrix(circuit, op, x, weights):
    """The op's matrix with its wires sorted; fixed-angle gates come from a cache."""
    key = _fixed_key(circuit, op)
    if key is not None and not torch.is_inference_mode_enabled():
        hit = _FIXED.get(key)
        if hit is not None and hit[0] is op.gate:
            return hit[1]
        with torch.no_grad():
            m = _sorted_matrix(_op_matrix(circuit, op, x, weights), op.wires).contiguous()
        if len(_FIXED) >= _FIXED_MAX:
            _FIXED.clear()
        _FIXED[key] = (op.gate, m)
        return m
    return _sorted_matrix(_op_matrix(circuit, op, x, weights), op.wires)


def _sorted_matrix(m, wires):
    """``m`` (…, d, d) for gate order ``wires`` → the same operator with its wires sorted."""
    k = len(wires)
    order = sorted(range(k), key=lambda j: wires[j])
    if order == list(range(k)):
        return m
    lead = m.dim() - 2
    t = m.reshape(*m.shape[:lead], *([2] * (2 * k)))
    perm = list(range(lead)) + [lead + j for j in order] + [lead + k + j for j in order]
    return t.permute(perm).reshape(m.shape)


def _route(wires):
    """``(start, swaps)``: the block's first site and the SWAPs (left site of each) that bring the
    sorted wires next to it, in order."""
    ws = sorted(wires)
    start = ws[0]
    swaps = []
    for t in range(1, len(ws)):
        for p in range(ws[t] - 1, start + t - 1, -1):      # bubble the t-th wire next to the block
            swaps.append(p)
    return start, tuple(swaps)


def _apply_sorted(mps: MPS, m, wires, plan=None):
    """Apply ``m`` (its wires already sorted) to ``wires``; ``plan``: :func:`_route` of them."""
    k = len(wires)
    if k == 1:
        mps.apply_one(m, wires[0])
        return
    start, swaps = plan if plan is not None else _route(wires)
    for p in swaps:
        mps.swap(p, toward="left")
    mps.apply_block(m, start, k, toward="right")
    for p in reversed(swaps):
        mps.swap(p, toward="right")


def _apply(mps: MPS, m, wires):
    _apply_sorted(mps, _sorted_matrix(m, wires), wires)


def run(circuit, x=None, *, max_bond: int = 64, cutoff: float = 1e-10, weights=None) -> MPS:
    """Simulate ``circuit`` from ``|0…0⟩`` as a batch of matrix-product states.

    ``x`` ``(B, F)`` (or one row ``(F,)``) sets the batch and the input angles; ``weights``
    replaces ``circuit.weights`` for this call. Each SVD keeps at most ``max_bond`` singular
    values, and drops the smallest while their relative weight ``Σ s²/‖s‖²`` stays within
    ``cutoff``; the discarded weights add up in ``mps.discarded`` (per sample). Differentiable
    (autograd through the contractions and SVDs; see :mod:`.linalg`), also under torch.func.grad;
    not under vmap: the bond dimensions are shapes decided by the values."""
    if vmap_active():
        raise ValueError("mps.run: torch.func.vmap (and jacrev, which vmaps) cannot run an MPS: its bond dimensions "
                         "are shapes decided by the singular values; batch the rows in x instead (one call runs "
                         "them all), or use the state-vector simulator")
    _check(circuit, max_bond, cutoff, "mps.run")
    x, _ = _features(circuit, x, "mps.run")
    weights = circuit.weights_or(weights, "mps.run")
    batch = x.shape[0] if x is not None else 1
    mps = MPS.zeros(circuit.n_wires, batch, circuit.dtype, circuit.device, max_bond=int(max_bond),
                    cutoff=float(cutoff))
    plans = {}
    for op in circuit.ops:
        plan = None
        if len(op.wires) > 1:
            plan = plans.get(op.wires)
            if plan is None:
                plan = plans[op.wires] = _route(op.wires)
        _apply_sorted(mps, _sorted_op_matrix(circuit, op, x, weights), op.wires, plan)
    return mps


def expval(circuit, observables, x=None, *, shots=None, generator=None, max_bond: int = 64,
           cutoff: float = 1e-10, weights=None, diff_method: str = "backprop", return_std: bool = False):
    """``tql.expval`` on the MPS simulator: ``(B,)`` for one observable, ``(B, n_obs)`` for a
    list (a 1-D ``x`` drops the batch axis). Observables: PauliStrings, Hamiltonians or strings.
    Gradients by backprop through the MPS contractions (the only ``diff_method``).

    ``shots=N`` estimates the values from samples instead, with the estimator of
    ``tql.expval(..., shots=N)``: the Pauli terms are split into qubit-wise commuting groups, each
    measured with N bit strings drawn from the MPS rotated into the group's basis; identity terms
    are exact. ``generator`` (a ``torch.Generator``) makes it reproducible; ``return_std=True``
    returns ``(estimate, standard_error)``. Shot estimates carry no gradient (computed from the
    detached state, as ``tql.expval(state, obs, shots=N)``)."""
    if shots is not None:
        from .measure import _check_mps_shots
        _check_mps_shots(shots, generator, generator.device if generator is not None else "cpu", "mps.expval")
    elif generator is not None:
        raise ValueError("mps.expval: generator is only used with shots=N")
    elif return_std:
        raise ValueError("mps.expval: return_std=True needs shots=N (exact values have no error)")
    if diff_method not in DIFF_METHODS:
        raise ValueError(f"mps.expval: diff_method must be one of {DIFF_METHODS}, got {diff_method!r}")
    _check(circuit, max_bond, cutoff, "mps.expval")
    from ..grad import _observable_list
    obs, _ = _observable_list(observables)
    for o in obs:
        if o.n_wires > circuit.n_wires:
            raise ValueError(f"mps.expval: observable {o} acts on wire {max(o.wires)} but the circuit has "
                             f"{circuit.n_wires} wires")
    _, squeeze = _features(circuit, x, "mps.expval")
    mps = run(circuit, x, max_bond=max_bond, cutoff=cutoff, weights=weights)
    if shots is None:
        values = mps.expval(observables)
        return values[0] if squeeze else values
    from .measure import shot_expval_mps
    mean, std = shot_expval_mps(mps, observables, shots, generator, True, "mps.expval")
    if squeeze:
        mean, std = mean[0], std[0]
    return (mean, std) if return_std else mean
