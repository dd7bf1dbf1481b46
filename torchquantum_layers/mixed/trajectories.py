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
(products of one-wire unitaries), the branches are drawn up front and each becomes a U3 gate per
wire reading its angles from extra input columns (one row per trajectory): the noisy circuit is
then one unitary circuit, run in one engine call (one program on the CPU), and every
``diff_method`` applies to it.
"""
from __future__ import annotations

import cmath
import math
import numbers
import weakref
from collections import defaultdict
from typing import Optional

import torch

from .. import gates as G
from ..circuit import Input, Op
from ..engine import run_circuit
from ..grad import circuit_expval
from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import REAL_OF, check_allocation, zero_state
from ..measure import reduced_density_matrix
from ..observables import expectation
from .simulate import _check_observables, _instructions, _noise_key, _observables, _resolve_noise, _segments

__all__ = ["run", "expval"]

# K_k† K_k = c_k I to this tolerance (relative to c_k): the branch probabilities are c_k whatever ψ
_MIXED_UNITARY_ATOL = 1e-10
_PROJECTORS = torch.tensor([[[1, 0], [0, 0]], [[0, 0], [0, 1]]], dtype=torch.complex128)     # measure a wire
_RESET = torch.tensor([[[1, 0], [0, 0]], [[0, 1], [0, 0]]], dtype=torch.complex128)          # |0⟩⟨0|, |0⟩⟨1|


def _constant_probabilities(kraus: torch.Tensor) -> Optional[torch.Tensor]:
    """(m,) real c_k where every K_k† K_k = c_k I (a mixed-unitary channel), else None."""
    k = kraus.detach().to(torch.complex128)
    e = k.conj().transpose(-1, -2) @ k
    d = k.shape[-1]
    c = torch.diagonal(e, dim1=-2, dim2=-1).real.mean(-1)
    off = (e - c[:, None, None] * torch.eye(d, dtype=e.dtype)).abs().amax()
    return c if float(off) <= _MIXED_UNITARY_ATOL * max(float(c.max()), 1e-300) else None


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
            hit = (kraus, cls(kraus, dtype, device))
            cls._cache[key] = hit
        return hit[1]

    def __init__(self, kraus, dtype, device):
        self.kraus = kraus.to(device=device, dtype=dtype)
        c = _constant_probabilities(kraus)
        self.constant = None if c is None else c.to(device=device, dtype=REAL_OF[dtype])
        self.effects = None if c is not None else (self.kraus.conj().transpose(-1, -2) @ self.kraus).detach()


def _draw(shape, generator, device, dtype) -> torch.Tensor:
    """Uniforms in (0, 1] of ``shape``, from ``generator`` (on its own device) moved to ``device``."""
    where = generator.device if generator is not None else device
    u = torch.rand(shape, generator=generator, device=where, dtype=dtype)
    return (1 - u).to(device)


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
    u = _draw((rows, 1), generator, psi.device, p.dtype) * cdf[:, -1:]
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


# ------------------------------------------------------------------------------------------------
# mixed-unitary noise folded into one circuit
def _u3_angles(u: torch.Tensor):
    """(θ, φ, λ) with u = e^{iα} U3(θ, φ, λ) for a 2 x 2 unitary u (complex128), or None."""
    u00, u01, u10, u11 = (complex(v) for v in u.reshape(4).tolist())
    theta = 2 * math.atan2(abs(u10), abs(u00))
    if abs(u00) > 1e-12:
        alpha = cmath.phase(u00)
        phi = cmath.phase(u10) - alpha if abs(u10) > 1e-12 else 0.0
        lam = cmath.phase(-u01) - alpha if abs(u01) > 1e-12 else cmath.phase(u11) - alpha - phi
    else:
        alpha, phi = cmath.phase(u10), 0.0
        lam = cmath.phase(-u01) - alpha
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    rebuilt = cmath.exp(1j * alpha) * torch.tensor(
        [[c, -cmath.exp(1j * lam) * s], [cmath.exp(1j * phi) * s, cmath.exp(1j * (phi + lam)) * c]],
        dtype=torch.complex128)
    return (theta, phi, lam) if float((rebuilt - u).abs().max()) < 1e-9 else None


def _one_wire_factors(u: torch.Tensor):
    """[u] for a 2 x 2 unitary, [a, b] with u ∝ a ⊗ b (both unitary) for a 4 x 4 one, else None."""
    d = u.shape[-1]
    if d == 2:
        return [u]
    if d != 4:
        return None
    # u[(i1 i2), (j1 j2)] = a[i1, j1] b[i2, j2]: the realigned matrix vec(a) vec(b)^T has rank one
    r = u.reshape(2, 2, 2, 2).permute(0, 2, 1, 3).reshape(4, 4)
    left, sv, right = torch.linalg.svd(r)
    if float(sv[1]) > 1e-9 * float(sv[0]):
        return None
    a, b = left[:, 0].reshape(2, 2), right[0].reshape(2, 2)
    a = a / (a.conj().T @ a)[0, 0].real.sqrt()
    b = b / (b.conj().T @ b)[0, 0].real.sqrt()
    return [a, b]


def _fold_table(kraus: torch.Tensor):
    """(probabilities (m,), U3 angles (m, wires, 3)) of a mixed-unitary channel whose unitaries are
    products of one-wire ones, or None."""
    if kraus.requires_grad:        # trainable noise needs the branch path's gradient
        return None
    c = _constant_probabilities(kraus)
    if c is None:
        return None
    angles = []
    for k, ck in zip(kraus.detach().to(torch.complex128), c.tolist()):
        if ck <= 0:
            angles.append(None)
            continue
        factors = _one_wire_factors(k / math.sqrt(ck))
        if factors is None:
            return None
        per_wire = [_u3_angles(f) for f in factors]
        if any(a is None for a in per_wire):
            return None
        angles.append(per_wire)
    n_w = int(round(math.log2(kraus.shape[-1])))
    table = torch.tensor([a if a is not None else [(0.0, 0.0, 0.0)] * n_w for a in angles], dtype=torch.float64)
    return c, table


class _Folded:
    """The circuit with a U3 per wire after each channel (angles: input columns ``first..``), and
    the tables its branches are drawn from."""

    def __init__(self, circuit, ops, channels):
        self.first = circuit.n_inputs
        # None: nothing was inserted, the circuit runs as it is (and is not referenced from here)
        self.circuit = circuit._sharing(ops) if len(ops) != len(circuit.ops) else None
        n_ch = len(channels)
        m_max = max((len(c) for c, _ in channels), default=1)
        w_max = max((t.shape[1] for _, t in channels), default=1)
        cdf = torch.full((max(n_ch, 1), m_max), math.inf, dtype=torch.float64)
        table = torch.zeros(max(n_ch, 1), m_max, w_max, 3, dtype=torch.float64)
        src = []
        for j, (c, t) in enumerate(channels):
            cdf[j, :len(c)] = c.cumsum(0) / c.sum()
            table[j, :len(c), :t.shape[1]] = t
            src += [(j * w_max + w) * 3 + q for w in range(t.shape[1]) for q in range(3)]
        self.n_channels, self.cdf, self.table = n_ch, cdf, table.reshape(max(n_ch, 1), m_max, -1)
        self.last = torch.tensor([len(c) - 1 for c, _ in channels] or [0])
        self.src = torch.tensor(src, dtype=torch.int64)
        self._on = {}

    def tables(self, dtype, device):
        key = (dtype, str(device))
        if key not in self._on:
            self._on[key] = tuple(t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
                                  for t in (self.cdf, self.table, self.last, self.src))
        return self._on[key]

    def inputs(self, x, rows, generator, dtype, device):
        """x's columns the circuit reads, then the drawn branches' angles: (rows, first + 3 · wires)."""
        parts = [] if x is None else [x[:, :self.first]]
        if self.n_channels:
            cdf, table, last, src = self.tables(dtype, device)
            u = _draw((rows, self.n_channels), generator, device, dtype)
            k = torch.minimum((u[:, :, None] > cdf).sum(-1), last)                    # (rows, channels)
            angles = table[torch.arange(self.n_channels, device=device), k]            # (rows, channels, w * 3)
            parts.append(angles.reshape(rows, -1)[:, src])
        if not parts:
            return None
        return torch.cat(parts, 1) if len(parts) > 1 else parts[0]


_FOLDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _folded(circuit, noise_model) -> Optional[_Folded]:
    """The circuit's noise folded into U3 gates (cached), or None where some channel, measurement or
    reset does not fold."""
    from .circuit import ChannelInstruction
    insts = _instructions(circuit)
    key = (len(circuit.ops), circuit.n_inputs, circuit.dtype, str(circuit.device), _noise_key(noise_model),
           tuple((p, id(i)) for p, i in insts))
    hit = _FOLDED.get(circuit)
    if hit is not None and hit[0] == key:
        return hit[1]
    at = defaultdict(list)
    for pos, inst in insts:
        at[pos].append(inst)
    ops, channels, column = [], [], circuit.n_inputs
    folded = None

    def fold(channel, wires):
        nonlocal column
        t = _fold_table(channel.kraus)
        if t is None:
            return False
        channels.append(t)
        for w in wires:
            ops.append(Op(G.U3, (w,), tuple(Input(column + q) for q in range(3))))
            column += 3
        return True

    ok = True
    for i in range(len(circuit.ops) + 1):
        for inst in at.get(i, ()):
            ok = ok and isinstance(inst, ChannelInstruction) and fold(inst.channel, inst.wires)
        if i == len(circuit.ops) or not ok:
            break
        op = circuit.ops[i]
        ops.append(op)
        for ch, w in (noise_model.channels_for(op) if noise_model is not None else ()):
            ok = ok and fold(ch, w)
    if ok:
        folded = _Folded(circuit, ops, channels)
    _FOLDED[circuit] = (key, folded)
    return folded


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
        values = expectation(psi.reshape(B * T, N), hams, shots=shots, generator=generator if shots else None)
    else:
        weights = circuit.weights_or(weights, what)
        x, psi, B = _start(circuit, x, state, T, what)
        x = folded.inputs(x, B * T, generator, REAL_OF[circuit.dtype], circuit.device)
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
