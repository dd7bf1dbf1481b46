"""Quantum trajectories: noisy circuits on state vectors, averaged over sampled Kraus branches.

A density matrix of n qubits holds 4**n amplitudes; a trajectory holds 2**n. Each channel
``E(ρ) = Σ_k K_k ρ K_k†`` met by a trajectory ψ picks one branch k with probability
``p_k = ||K_k ψ||²`` and continues with ``K_k ψ / √p_k``; the average of ⟨ψ|O|ψ⟩ over trajectories
is an unbiased estimate of ``Tr(O ρ_out)`` (the unravelling of Dalibard, Castin and Mølmer). All
trajectories of all samples are rows of one ``(B · T, 2**n)`` state: gate segments run through the
engine like any batch (programs on the CPU), and a channel is one reduced-density-matrix pass (the
branch probabilities), one draw per row and one pass of a per-row matrix: no loop over rows, no
host sync.

Gradients: the branch is scaled by ``1 / √p_k`` with ``p_k`` held constant, so a trajectory's
value is ``⟨ψ|O|ψ⟩`` as sampled, and its gradient is ``∇(p_k f_k) / p_k``: the average over
trajectories is an unbiased estimate of the gradient of ``Tr(O ρ_out)`` also where the branch
probabilities depend on the angles (amplitude damping, measurements): the score-function part of
the gradient comes with it. Channels whose Kraus operators are multiples of unitaries
(depolarizing, bit/phase flips, any Pauli channel) have state-independent probabilities and
skip the probability pass; where every channel of a run is such a one on one or two wires
(products of one-wire unitaries), the branches are drawn up front and become U3 gates reading
their angles from extra input columns (one row per trajectory; Pauli noise through a Pauli frame,
applied only before non-Clifford gates: see :mod:`.noise_folding`): the noisy circuit is then one
unitary circuit, run in one engine call (one program on the CPU), and every ``diff_method``
applies to it.
"""
from __future__ import annotations

import numbers
from typing import Optional

import torch

from ..caching import building_cache, lasting
from ..engine import run_circuit
from ..grad import circuit_expval
from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import REAL_OF, check_allocation, zero_state
from ..measure import reduced_density_matrix
from ..observables import expectation
from ..observables.hamiltonian import add_constants, split_constants
from . import noise_folding
from .noise_folding import constant_probabilities, draw_uniform
from .simulate import (_check_observables, _instructions, _noise_key, _observables, _resolve_noise, _segments,
                       read_out)

__all__ = ["run", "expval"]

_PROJECTORS = torch.tensor([[[1, 0], [0, 0]], [[0, 0], [0, 1]]], dtype=torch.complex128)     # measure a wire
_RESET = torch.tensor([[[1, 0], [0, 0]], [[0, 1], [0, 0]]], dtype=torch.complex128)          # |0⟩⟨0|, |0⟩⟨1|


class _Branches:
    """Kraus operators in a state's dtype and device, with their constant probabilities (if any)."""

    _cache: dict = {}

    @classmethod
    def of(cls, kraus: torch.Tensor, dtype, device):
        if kraus.requires_grad:      # trainable noise: the graph must reach the operators
            return cls(kraus, dtype, device)
        key = (id(kraus), dtype, str(device))
        hit = cls._cache.get(key)
        if hit is None or hit[0] is not kraus:
            if len(cls._cache) >= 256:      # channels made in a loop (a sweep over p) are not kept
                cls._cache.clear()
            with building_cache():
                hit = (kraus, cls(kraus, dtype, device))
            cls._cache[key] = hit
        return hit[1]

    def __init__(self, kraus, dtype, device):
        self.kraus = kraus.to(device=device, dtype=dtype)
        c = constant_probabilities(kraus)
        self.constant = None if c is None else c.to(device=device, dtype=REAL_OF[dtype])
        self.effects = None if c is not None else (self.kraus.conj().transpose(-1, -2) @ self.kraus).detach()


def _branch(psi, kraus, wires, n, generator):
    """(ψ after one sampled branch per row, the branch index per row)."""
    rows = psi.shape[0]
    b = _Branches.of(kraus, psi.dtype, psi.device)
    m = b.kraus.shape[0]
    if m == 1 and b.constant is not None:
        k = torch.zeros(rows, dtype=torch.int64, device=psi.device)
        return apply_matrix_unchecked(psi, b.kraus[0] / b.constant[0].sqrt(), wires, n), k
    if b.constant is not None:
        p = b.constant.expand(rows, m)
    else:
        rho = reduced_density_matrix(psi.detach(), wires)                  # (R, d, d)
        # p_k = Tr(K_k† K_k ρ_w): the squared norm of the branch, from one pass over the state
        p = torch.einsum("kij,rji->rk", b.effects, rho).real.clamp_min(0)
    cdf = p.cumsum(-1)
    u = draw_uniform((rows, 1), generator, psi.device, p.dtype) * cdf[:, -1:]
    k = (u > cdf).sum(-1).clamp(max=m - 1)
    pk = p.gather(1, k[:, None]).clamp_min(torch.finfo(p.dtype).tiny)
    mats = b.kraus[k] * pk.rsqrt()[:, :, None].to(psi.dtype)        # (R, d, d): K_k / √p_k, p_k held fixed
    return apply_matrix_unchecked(psi, mats, wires, n), k


def _per_wire(psi, ops, wires, n, generator):
    """A one-wire Kraus set on each wire in turn: (ψ, outcomes with wires[0] most significant)."""
    out = torch.zeros(psi.shape[0], dtype=torch.int64, device=psi.device)
    for w in wires:
        psi, k = _branch(psi, ops, (w,), n, generator)
        out = 2 * out + k
    return psi, out


def _instruction(psi, inst, n, generator, rows_per_sample):
    from .circuit import ChannelInstruction, MeasureInstruction, ResetInstruction
    if isinstance(inst, ChannelInstruction):
        return _branch(psi, inst.channel.kraus, inst.wires, n, generator)[0]
    if isinstance(inst, (MeasureInstruction, ResetInstruction)):
        ops = _PROJECTORS if isinstance(inst, MeasureInstruction) else _RESET
        psi, out = _per_wire(psi, ops, inst.wires, n, generator)
        if inst.collapses and inst.owner is not None:
            inst.owner.last_outcomes.append((inst.wires, out.reshape(-1, rows_per_sample)))
        return psi
    raise TypeError(f"trajectories: cannot run the instruction {inst!r}")


def _folded(circuit, noise_model) -> Optional[noise_folding.Folded]:
    return noise_folding.folded(circuit, noise_model, _instructions(circuit), _noise_key(noise_model))


@lasting
def _segment_circuit(circuit, ops, cache):
    """The segment's gates as a state-vector circuit sharing the weights (cached per dtype, device)."""
    if len(ops) == len(circuit.ops):
        return circuit
    key = ("pure", circuit.dtype, str(circuit.device))
    if key not in cache:
        cache[key] = circuit._sharing(list(ops))
    return cache[key]


def _count(n_trajectories) -> int:
    if isinstance(n_trajectories, bool) or not isinstance(n_trajectories, numbers.Integral) or n_trajectories < 1:
        raise ValueError(f"trajectories: n_trajectories must be a positive int, got {n_trajectories!r}")
    return int(n_trajectories)


def _start(circuit, x, state, T, what):
    """(x repeated per trajectory or None, the initial rows or None for |0…0⟩, B)."""
    if state is not None and isinstance(state, torch.Tensor) and state.dim() == 3:
        raise TypeError(f"{what}: trajectories start from state vectors (B, 2**n); for a density matrix "
                        f"use tql.mixed.run / tql.mixed.expval")
    x, state, _ = circuit.prepare(x, state, materialize=False)
    B = x.shape[0] if x is not None else (state.shape[0] if state is not None else 1)
    if state is not None and x is not None and state.shape[0] not in (1, B):
        raise ValueError(f"{what}: state batch {state.shape[0]} does not match input batch {B}")
    check_allocation(circuit.n_wires, B * T, circuit.dtype, circuit.device)
    if x is not None:
        x = x.repeat_interleave(T, 0)
    if state is not None:
        state = state.expand(B, -1).repeat_interleave(T, 0)
    return x, state, B


def _evolve(circuit, x, psi, weights, noise_model, generator, rows, T):
    n = circuit.n_wires
    for kind, item in _segments(circuit, noise_model):
        if kind == "plan":
            _, ops, cache = item
            psi = run_circuit(_segment_circuit(circuit, ops, cache), psi, x, weights)
        else:
            if psi is None:
                psi = zero_state(n, dtype=circuit.dtype, device=circuit.device)
            if psi.shape[0] != rows:
                psi = psi.expand(rows, -1).contiguous()
            psi = _instruction(psi, item, n, generator, T)
    if psi is None:
        psi = zero_state(n, dtype=circuit.dtype, device=circuit.device)
    return psi.expand(rows, -1) if psi.shape[0] != rows else psi


def _check_generator(generator, what):
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")


def run(circuit, x=None, state=None, noise_model=None, n_trajectories: int = 64,
        generator: Optional[torch.Generator] = None, weights=None) -> torch.Tensor:
    """States ``(B, T, 2**n)`` of ``T = n_trajectories`` sampled trajectories per input sample.

    ``circuit``: a Circuit with a ``noise_model`` (channels after matching gates) or a
    MixedCircuit (its channels, measurements and resets; collapsing ones record ``(wires,
    outcomes (B, T))`` in ``circuit.last_outcomes``). ``state``: state vectors ``(B, 2**n)``
    (default |0…0⟩). ``generator`` seeds the branch choices. Every row is normalised; the mean of
    ``|ψ⟩⟨ψ|`` over the trajectories estimates the density matrix ``tql.mixed.run`` returns.
    Where the noise folds into gates, each row is its trajectory up to a global phase.
    """
    what = "trajectories.run"
    T = _count(n_trajectories)
    _check_generator(generator, what)
    noise_model = _resolve_noise(circuit, noise_model)
    weights = circuit.weights_or(weights, what)
    if hasattr(circuit, "last_outcomes"):
        circuit.last_outcomes = []
    x, psi, B = _start(circuit, x, state, T, what)
    folded = _folded(circuit, noise_model)
    if folded is not None:
        target = folded.circuit or circuit
        x = folded.inputs(x, B * T, generator, REAL_OF[circuit.dtype], circuit.device)
        psi = run_circuit(target, psi, x, weights)
        psi = psi.expand(B * T, -1) if psi.shape[0] != B * T else psi
    else:
        psi = _evolve(circuit, x, psi, weights, noise_model, generator, B * T, T)
    return psi.reshape(B, T, -1)


def expval(circuit, observables, x=None, state=None, noise_model=None, n_trajectories: int = 64,
           generator: Optional[torch.Generator] = None, diff_method: str = "backprop",
           shots: Optional[int] = None, return_std: bool = False, weights=None):
    """``Tr(O ρ_out)`` estimated as the mean of ⟨ψ|O|ψ⟩ over ``n_trajectories`` trajectories per
    sample: ``(B,)`` for one observable, ``(B, n_obs)`` for a list; ``return_std=True`` also
    returns the standard error of each mean (the spread over trajectories / √T).

    The gradient is an unbiased estimate of the exact one (see the module's notes). Where all
    the noise folds into U3 gates (mixed-unitary channels on one or two wires, not trainable)
    every ``diff_method`` of ``tql.expval`` applies, since each trajectory is then a unitary
    circuit; otherwise only ``"backprop"`` (sampled Kraus branches are not unitary: neither the
    adjoint method nor shift rules hold). ``shots=N`` estimates each trajectory's value from N
    samples instead (no gradient).
    """
    what = "trajectories.expval"
    hams, single = _observables(observables, what)
    _check_observables(hams, circuit.n_wires, what)
    squeeze = isinstance(x, torch.Tensor) and x.dim() == 1
    T = _count(n_trajectories)
    _check_generator(generator, what)
    noise_model = _resolve_noise(circuit, noise_model)
    hams = read_out(hams, noise_model)
    folded = _folded(circuit, noise_model)
    if folded is None:
        if diff_method != "backprop":
            raise ValueError(f"{what}: diff_method={diff_method!r} needs every channel to be a mixture of "
                             "unitaries (depolarizing, Pauli channels...); this circuit has channels, "
                             "measurements or resets whose sampled branches are not unitary, so the adjoint "
                             "method and shift rules do not apply: use 'backprop'")
        psi = run(circuit, x=x, state=state, noise_model=noise_model, n_trajectories=T, generator=generator,
                  weights=weights)
        B, _, N = psi.shape
        psi = psi.reshape(B * T, N)
        # a trajectory's norm is ∇-free (p_k held fixed), but c·‖ψ‖² would carry c·∇p_k/p_k into
        # the gradient: a zero-mean score term, pure variance for a large identity term
        terms, constants = split_constants(hams) if shots is None else (hams, None)
        values = expectation(psi, terms, shots=shots, generator=generator if shots else None)
        if constants is not None:
            values = add_constants(values, constants, torch.linalg.vector_norm(psi.detach(), dim=-1) ** 2)
    else:
        weights = circuit.weights_or(weights, what)
        x, psi, B = _start(circuit, x, state, T, what)
        x = folded.inputs(x, B * T, generator, REAL_OF[circuit.dtype], circuit.device)
        if shots is not None and x is None and psi is None:
            # nothing differs between the rows, but each trajectory draws its own shots
            psi = zero_state(circuit.n_wires, B * T, dtype=circuit.dtype, device=circuit.device)
        values = circuit_expval(folded.circuit or circuit, hams, x=x, state=psi, diff_method=diff_method,
                                shots=shots, generator=generator if shots else None, weights=weights)
        values = values.reshape(values.shape[0], -1)
        if values.shape[0] != B * T:        # no inputs and no noise: one row for every trajectory
            values = values.expand(B * T, -1)
    values = values.reshape(B, T, -1)
    mean = values.mean(1)
    std = (values.detach().std(1) / T ** 0.5) if T > 1 else torch.full_like(mean.detach(), float("nan"))
    if single:
        mean, std = mean[..., 0], std[..., 0]
    if squeeze:
        mean, std = mean[0], std[0]
    return (mean, std) if return_std else mean
