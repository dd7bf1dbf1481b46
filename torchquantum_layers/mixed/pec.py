"""Probabilistic error cancellation (PEC): the noise of every gate inverted as a quasi-probability
mixture of Pauli corrections (Temme, Bravyi and Gambetta, PRL 119, 180509 (2017)).

A Pauli channel ``N(ρ) = Σ_P p_P P ρ P`` is diagonal in the Pauli basis: ``N(Q) = λ_Q Q`` with the
Pauli-transfer eigenvalues ``λ_Q = Σ_P p_P s(P, Q)``, where ``s(P, Q) = ±1`` as P and Q commute or
anticommute. The signs form a symmetric matrix with ``s s = d² I`` (d = 2**k on k wires), so
``p = s λ / d²``; the inverse channel has the eigenvalues ``1 / λ_Q`` (it exists while no λ is 0)
and is the same kind of sum with real weights of either sign::

    N⁻¹ = Σ_P η_P P·P,   η = s (1/λ) / d²,   Σ_P η_P = 1 (λ_I = 1),   γ = Σ_P |η_P| ≥ 1.

A circuit whose gates are each followed by such noise then runs ideally, in expectation, as the
noisy circuit with a Pauli correction P drawn after each noise location with probability
``|η_P| / γ``, its result weighted by ``γ_total · Π sign(η_P)`` (``γ_total``: the product of the
locations' γ, :func:`pec_overhead`). The estimator is unbiased; its standard deviation grows with
``γ_total``, so reaching a given precision takes about ``γ_total²`` times the samples of the noisy
circuit.

* :func:`pauli_inverse` — the quasi-probabilities of one channel (``labels``, ``eta``, ``gamma``);
* :func:`pec_expval` — ``n_samples=None``: the exact quasi-probability sum, computed by applying
  each inverse map ``N⁻¹`` itself right after its channel on density matrices (the noisy
  engine with the inverses as extra superoperators; no enumeration of Pauli products);
  ``n_samples=N``: the Monte-Carlo estimator above, samples as batch rows;
* :func:`pec_overhead` — ``γ_total``.

What is cancelled: the channels a :class:`NoiseModel` attaches to gates, which must be Pauli
channels (depolarizing, bit/phase flips, ``pauli_channel``, or any channel whose Pauli transfer
matrix is diagonal) with fixed (not trainable) parameters. Channels, measurements and resets
written into a MixedCircuit are part of the computation and stay as they are (collapsing
measurements are refused); readout errors of the model are read as by ``mixed.expval`` (pass
``noise_model.readout.mitigated_observable(H)`` to cancel them too).
"""
from __future__ import annotations

import numbers
import weakref
from typing import Optional

import torch

from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import REAL_OF
from .channels import Channel

__all__ = ["PauliInverse", "pauli_inverse", "pec_expval", "pec_overhead", "SIMULATORS"]

SIMULATORS = ("density", "trajectories")

_LETTERS = "IXYZ"
_ONE = torch.tensor([[[1, 0], [0, 1]], [[0, 1], [1, 0]], [[0, -1j], [1j, 0]], [[1, 0], [0, -1]]],
                    dtype=torch.complex128)
_ROWS_BUDGET = 2 ** 22
"""At most this many density-matrix (or state-vector) amplitudes per run of sampled rows: samples
beyond it run in further chunks (4M complex128 amplitudes = 64 MiB per copy of the state)."""


def _labels(k: int) -> list:
    labels = [""]
    for _ in range(k):
        labels = [a + b for a in labels for b in _LETTERS]
    return labels


def _pauli_matrices(k: int) -> torch.Tensor:
    """(4**k, 2**k, 2**k), index j = Σ_i letter_i 4**(k-1-i) (wire 0 of the channel first)."""
    mats = _ONE
    for _ in range(k - 1):
        mats = (mats[:, None, :, None, :, None] * _ONE[None, :, None, :, None, :]).reshape(
            mats.shape[0] * 4, mats.shape[1] * 2, mats.shape[2] * 2)
    return mats


def _signs(k: int) -> torch.Tensor:
    """s[P, Q] = +1 where the Pauli strings commute, −1 where they anticommute (4**k, 4**k)."""
    one = torch.tensor([[1 if a == 0 or b == 0 or a == b else -1 for b in range(4)] for a in range(4)],
                       dtype=torch.float64)
    s = one
    for _ in range(k - 1):
        s = (s[:, None, :, None] * one[None, :, None, :]).reshape(s.shape[0] * 4, s.shape[1] * 4)
    return s


class PauliInverse:
    """The inverse of a Pauli channel on ``k`` wires as ``Σ_P η_P P·P``: ``labels`` (``"IX"``…,
    letter i on wire i of the channel), ``eta`` (float64 ``(4**k,)``, same order), ``gamma``
    (``Σ|η|``, a float), ``eigenvalues`` (the channel's Pauli-transfer eigenvalues λ) and
    ``probabilities`` (the channel's own Pauli probabilities p)."""

    def __init__(self, channel: Channel, eigenvalues: torch.Tensor):
        k = channel.n_wires
        s = _signs(k)
        self.channel = channel
        self.n_wires = k
        self.labels = _labels(k)
        self.eigenvalues = eigenvalues
        self.probabilities = s @ eigenvalues / 4 ** k
        self.eta = s @ (1 / eigenvalues) / 4 ** k
        self.gamma = float(self.eta.abs().sum())
        self._q = self.eta.abs() / self.gamma
        self._sign = torch.sign(self.eta)
        self._cache: dict = {}

    def __repr__(self) -> str:
        return f"PauliInverse({self.channel.name}, n_wires={self.n_wires}, gamma={self.gamma:.6g})"

    def as_dict(self) -> dict:
        return {lab: float(e) for lab, e in zip(self.labels, self.eta)}

    def superoperator(self, dtype=torch.complex128, device=None) -> torch.Tensor:
        """``Σ_P η_P P ⊗ conj(P)`` ``(d², d²)`` (row-major vec, as :meth:`Channel.superoperator`)."""
        return self._tables(dtype, device)["inverse"]

    def _tables(self, dtype, device) -> dict:
        key = (dtype, str(device))
        hit = self._cache.get(key)
        if hit is None:
            d = 2 ** self.n_wires
            p = _pauli_matrices(self.n_wires)
            pp = (p[:, :, None, :, None] * p.conj()[:, None, :, None, :]).reshape(-1, d * d, d * d)
            s = self.channel.superoperator(torch.complex128).detach().cpu()
            hit = {
                "inverse": (self.eta.to(torch.complex128)[:, None, None] * pp).sum(0).to(dtype=dtype, device=device),
                # per Pauli P: the channel followed by P·P, one superoperator pass per noise location
                "corrected": (pp @ s).to(dtype=dtype, device=device),
                "paulis": p.to(dtype=dtype, device=device),
                "q": self._q.to(device=device),
                "sign": self._sign.to(dtype=REAL_OF[dtype], device=device),
            }
            self._cache[key] = hit
        return hit


_INVERSES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def pauli_inverse(channel: Channel, what: str = "pauli_inverse") -> PauliInverse:
    """The quasi-probability representation of ``channel``'s inverse (:class:`PauliInverse`).

    Raises ValueError, naming the channel, where it is not a Pauli channel (its Pauli transfer
    matrix has an off-diagonal entry above 1e-8, 1e-5 for single-precision Kraus operators), where it
    is not invertible (an eigenvalue λ below 1e-9: e.g. depolarizing(3/4), bit_flip(1/2)) or
    where its parameters are trainable."""
    if not isinstance(channel, Channel):
        raise TypeError(f"{what}: expected a Channel, got {type(channel).__name__}")
    hit = _INVERSES.get(channel)
    if hit is not None:
        return hit
    if channel.kraus.requires_grad:
        raise ValueError(f"{what}: the channel {channel.name} has trainable parameters; probabilistic error "
                         f"cancellation needs the noise as fixed numbers (detach them)")
    k = channel.n_wires
    d = 2 ** k
    s = channel.superoperator(torch.complex128).detach().cpu()
    vec = _pauli_matrices(k).reshape(4 ** k, d * d).transpose(0, 1)         # columns: vec(P), row-major
    ptm = (vec.conj().transpose(0, 1) @ s @ vec) / d                         # R[P, Q] = Tr(P N(Q)) / d
    off = (ptm - torch.diag(torch.diagonal(ptm))).abs().max()
    tol = 1e-5 if getattr(channel, "_low_precision", False) else 1e-8
    if float(off) > tol:
        raise ValueError(f"{what}: the channel {channel.name} is not a Pauli channel (its Pauli transfer matrix "
                         f"has an off-diagonal entry of size {float(off):.3g}); probabilistic error cancellation "
                         f"here inverts Pauli channels only (depolarizing, bit/phase flips, pauli_channel)")
    lam = torch.diagonal(ptm).real.to(torch.float64)
    small = lam.abs().min()
    if float(small) < 1e-9:
        raise ValueError(f"{what}: the channel {channel.name} is not invertible (a Pauli-transfer eigenvalue is "
                         f"{float(small):.3g}): its noise cannot be cancelled")
    out = PauliInverse(channel, lam)
    _INVERSES[channel] = out
    return out


class _InverseMap(Channel):
    """``N⁻¹`` placed after ``N`` in the noise model that exact PEC runs. Not a channel (not
    completely positive): it has no Kraus form, and only its superoperator is ever read (the
    density engine, Channel.apply); ``kraus`` holds the identity so that checks reading
    ``kraus.requires_grad`` find a constant map. It never leaves this module."""

    def __init__(self, inverse: PauliInverse):
        d = 2 ** inverse.n_wires
        self.kraus = torch.eye(d, dtype=torch.complex128)[None]
        self.name = f"{inverse.channel.name}^-1 (PEC)"
        self.n_wires = inverse.n_wires
        self._low_precision = False
        self._cache = {}
        self._inverse = inverse

    def superoperator(self, dtype=torch.complex128, device=None) -> torch.Tensor:
        return self._inverse.superoperator(dtype, device)


# ------------------------------------------------------------------------------------------------
# locations of the noise in a circuit
def _resolve(circuit, noise_model, what):
    from .simulate import _resolve_noise
    noise_model = _resolve_noise(circuit, noise_model)
    if noise_model is None:
        raise ValueError(f"{what}: no noise_model given and the circuit carries none: there is no noise to "
                         f"cancel (use tql.expval / mixed.expval for the noiseless value)")
    for _, inst in list(getattr(circuit, "instructions", ()) or ()):
        if getattr(inst, "collapses", False):
            raise ValueError(f"{what}: the circuit has a collapsing (selective) {inst!r}; probabilistic error "
                             f"cancellation needs a circuit that is a linear map (collapse=False)")
    return noise_model


_STEPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _steps(circuit, noise_model, what):
    """[("ops", sub-circuit) | ("noise", PauliInverse, channel, wires) | ("inst", instruction)] in
    execution order, cached per circuit (its gates, instructions, dtype, device, fusion) and the
    noise model's rules."""
    from .simulate import _noise_key
    insts = list(getattr(circuit, "instructions", ()) or ())
    key = (len(circuit.ops), _noise_key(noise_model), tuple((p, id(i)) for p, i in insts), circuit.dtype,
           str(circuit.device), circuit.fuse, circuit.max_fused_wires, id(circuit.weights))
    hit = _STEPS.get(circuit)
    if hit is not None and hit[0] == key:
        return hit[1]
    at: dict = {}
    for pos, inst in insts:
        at.setdefault(pos, []).append(inst)
    steps, run = [], []

    def flush():
        if run:
            steps.append(("ops", circuit._sharing(list(run))))
            run.clear()

    for i, op in enumerate(circuit.ops):
        if at.get(i):
            flush()
            steps.extend(("inst", inst) for inst in at[i])
        run.append(op)
        noise = noise_model.channels_for(op)
        if noise:
            flush()
            for ch, wires in noise:
                try:
                    inv = pauli_inverse(ch, what)
                except ValueError as err:
                    raise ValueError(f"{err} (after {op.gate.name} on wires {list(op.wires)})") from None
                steps.append(("noise", inv, ch, tuple(wires)))
    flush()
    steps.extend(("inst", inst) for inst in at.get(len(circuit.ops), ()))
    _STEPS[circuit] = (key, steps)
    return steps


def pec_overhead(circuit, noise_model=None) -> float:
    """``γ_total``: the product over the noise locations of ``circuit`` under ``noise_model``
    (default: the circuit's own) of each inverse's ``γ = Σ_P |η_P|``.

    It is the sampling overhead of PEC: one sample's weight is ``±γ_total``, so the standard
    deviation of the estimator grows by up to ``γ_total`` and its variance by up to ``γ_total²``
    compared with the noisy circuit's: the same precision takes about ``γ_total²`` times the
    samples. 1.0 where no noise fires."""
    what = "pec_overhead"
    noise_model = _resolve(circuit, noise_model, what)
    gamma = 1.0
    for step in _steps(circuit, noise_model, what):
        if step[0] == "noise":
            gamma *= step[1].gamma
    return gamma


# ------------------------------------------------------------------------------------------------
# exact: the noisy engine with N⁻¹ after every N
_EXACT_MODELS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _exact_model(noise_model, what):
    """A NoiseModel with each Pauli rule followed by its inverse map on the same gates and wires
    (rules fire in order, so each location meets N then N⁻¹; maps on other wires commute)."""
    from .noise import NoiseModel
    key = (tuple(noise_model.rules), id(noise_model.readout))
    hit = _EXACT_MODELS.get(noise_model)
    if hit is not None and hit[0] == key and hit[1].readout is noise_model.readout:
        return hit[1]
    model = NoiseModel()
    for ch, names, ws in noise_model.rules:
        model.rules.append((ch, names, ws))
        try:
            inverse = pauli_inverse(ch, what)
        except ValueError:
            continue            # _steps has already refused such a channel where it fires
        model.rules.append((_InverseMap(inverse), names, ws))
    model.readout = noise_model.readout
    model.version = 1
    model.warn_unused_wires = lambda n_wires: None      # the caller's model has warned already
    _EXACT_MODELS[noise_model] = (key, model)
    return model


# ------------------------------------------------------------------------------------------------
def _check_samples(n_samples, what):
    if n_samples is None:
        return None
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral):
        raise TypeError(f"{what}: n_samples must be None (exact) or a positive int, got {n_samples!r}")
    if n_samples < 1:
        raise ValueError(f"{what}: n_samples must be None (exact) or a positive int, got {n_samples}")
    return int(n_samples)


def pec_expval(circuit, observables, noise_model=None, n_samples: Optional[int] = None,
               generator: Optional[torch.Generator] = None, x=None, state=None, simulator: str = "density",
               return_std: bool = False, weights=None):
    """Error-cancelled ``Tr(O ρ_ideal)`` of ``circuit`` under ``noise_model`` (default: the
    circuit's), shaped as ``mixed.expval``'s result: ``(B,)`` or ``(B, n_obs)``.

    * ``n_samples=None``: exact — the noisy circuit on density matrices with each noise channel
      followed by its inverse map ``N⁻¹ = Σ η_P P·P`` (module notes); differentiable by autograd.
    * ``n_samples=N``: the Monte-Carlo estimator — per sample one Pauli correction per noise
      location drawn with probability ``|η_P| / γ`` (``generator`` seeds the draws), the corrected
      noisy circuit run, its value weighted by ``γ_total · Π sign(η_P)``; the mean over the
      samples. The corrections of all samples are drawn up front; on density matrices each
      distinct pattern of corrections runs once (at low noise most samples draw the identity
      everywhere), as batch rows of one run (several runs where the rows would exceed 4M
      amplitudes). ``simulator``: ``"density"`` (each corrected circuit exactly) or
      ``"trajectories"`` (state vectors; the noise branches are sampled too, one trajectory per
      sample). Differentiable by autograd (an unbiased estimate of the gradient).

    ``return_std=True`` also returns the standard error of the mean (the spread of the weighted
    samples / √N; zeros when exact, NaN for one sample). ``x``: input features ``(B, F)``;
    ``state``: the input ``(B, N, N)`` density matrices or ``(B, N)`` states (trajectories: state
    vectors only); ``weights`` replaces the circuit's weights for this call.

    Raises ValueError where there is no noise model, where a channel that fires is not an
    invertible Pauli channel (named), for collapsing measurements, or for ``n_samples < 1``;
    TypeError for a ``generator`` that is not a ``torch.Generator``.
    """
    from .simulate import _check_observables, _observables, expval
    what = "pec_expval"
    n_samples = _check_samples(n_samples, what)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
    if simulator not in SIMULATORS:
        raise ValueError(f"{what}: simulator must be one of {SIMULATORS}, got {simulator!r}")
    hams, single = _observables(observables, what)
    _check_observables(hams, circuit.n_wires, what)
    noise_model = _resolve(circuit, noise_model, what)
    steps = _steps(circuit, noise_model, what)
    if n_samples is None:
        if simulator != "density":
            raise ValueError(f"{what}: the exact quasi-probability sum (n_samples=None) runs on density matrices; "
                             f"simulator={simulator!r} needs n_samples=N")
        value = expval(circuit, hams if not single else hams[0], x=x, state=state,
                       noise_model=_exact_model(noise_model, what), weights=weights)
        return (value, torch.zeros_like(value.detach())) if return_std else value
    squeeze = isinstance(x, torch.Tensor) and x.dim() == 1
    mean, std = _sampled(circuit, steps, hams, noise_model, n_samples, generator, x, state, simulator, weights,
                         what)
    if single:
        mean, std = mean[..., 0], std[..., 0]
    if squeeze:
        mean, std = mean[0], std[0]
    return (mean, std) if return_std else mean


def _sampled(circuit, steps, hams, noise_model, N, generator, x, state, simulator, weights, what):
    from ..observables.hamiltonian import add_constants, split_constants
    from .simulate import read_out
    weights = circuit.weights_or(weights, what)
    n = circuit.n_wires
    hams, constants = split_constants(read_out(hams, noise_model))
    density = simulator == "density"
    dtype, device = circuit.dtype, circuit.device
    if density:
        from .simulate import _prepare
        x, rho = _prepare(circuit, x, state, what)
        B = rho.shape[0]
        norms = rho.diagonal(dim1=-2, dim2=-1).sum(-1).real
        size = 4 ** n
    else:
        from .trajectories import _start
        x, rho, B = _start(circuit, x, state, 1, what)
        norms = None if rho is None else (rho.abs() ** 2).sum(-1)
        size = 2 ** n
    noise = [step[1] for step in steps if step[0] == "noise"]
    gamma = 1.0
    for inv in noise:
        gamma *= inv.gamma
    # every sample's corrections up front: one draw of N per noise location, in circuit order
    tables = [inv._tables(dtype, device) for inv in noise]
    draws = torch.stack([torch.multinomial(t["q"], N, replacement=True, generator=generator) for t in tables], 1) \
        if noise else torch.zeros(N, 0, dtype=torch.int64, device=device)              # (N, L)
    sign = torch.ones(N, dtype=REAL_OF[dtype], device=device)
    for j, t in enumerate(tables):
        sign = sign * t["sign"][draws[:, j]]
    if density and noise:
        # on density matrices a sample is a function of its corrections alone: run each distinct
        # pattern once (at low noise most samples correct nothing) and give its value to every
        # sample that drew it; the estimator is the same
        patterns, inverse = torch.unique(draws, dim=0, return_inverse=True)
    else:
        patterns, inverse = draws, None
    # the gates before the first noise location (and, on density matrices, the deterministic
    # instructions there) are the same for every sample: run once on the B input rows
    first = 0
    while first < len(steps) and (steps[first][0] == "ops" or (density and steps[first][0] == "inst")):
        first += 1
    rho = _walk(steps[:first], rho, x, weights, n, density, generator, None, (dtype, device))
    U = patterns.shape[0]
    chunk = max(1, min(U, _ROWS_BUDGET // (B * size)))
    values = []
    for start in range(0, U, chunk):
        m = min(chunk, U - start)
        r = None if rho is None else (rho.expand(B, *rho.shape[1:]) if rho.shape[0] != B else rho)
        r = None if r is None else r.repeat(m, *([1] * (r.dim() - 1)))
        xr = None if x is None else x.repeat(m, 1)
        rows = patterns[start:start + m].repeat_interleave(B, 0)                      # (m B, L)
        r = _walk(steps[first:], r, xr, weights, n, density, generator, rows, (dtype, device))
        if density:
            from .simulate import expectation
            v = expectation(r, hams)
        else:
            from ..observables import expectation as sv_expectation
            if r is None:
                from ..kernels.state import zero_state
                r = zero_state(n, m * B, dtype=dtype, device=device)
            v = sv_expectation(r, hams)
        values.append(v.reshape(m, B, -1))
    values = torch.cat(values)                                  # (U, B, n_obs)
    if inverse is not None:
        values = values[inverse]                                # (N, B, n_obs)
    values = gamma * sign[:, None, None] * values
    mean = values.mean(0)
    std = values.detach().std(0) / N ** 0.5 if N > 1 else torch.full_like(mean.detach(), float("nan"))
    if constants is not None:
        mean = add_constants(mean, constants, None if norms is None else norms.expand(B))
    return mean, std


def _walk(steps, r, x, weights, n, density, generator, patterns, where):
    """Run ``steps`` on the rows ``r`` (density matrices (R, N, N) or states (R, 2**n); None for
    |0…0⟩ before any row exists); the j-th noise location applies its channel and the Pauli
    ``patterns[:, j]`` of each row (``patterns`` (R, L); None: no noise location in ``steps``)."""
    from ..engine import run_circuit
    j = 0
    for step in steps:
        kind = step[0]
        if kind == "ops":
            if density:
                from .simulate import _evolve
                r = _evolve(step[1], r, x, weights, None, None)
            else:
                r = run_circuit(step[1], r, x, weights)
            continue
        rows = patterns.shape[0] if patterns is not None else (1 if r is None else r.shape[0])
        if r is None:
            from ..kernels.state import zero_state
            r = zero_state(n, 1, dtype=where[0], device=where[1])
        if r.shape[0] != rows:
            r = r.expand(rows, *r.shape[1:]).contiguous()
        if kind == "inst":
            if density:
                r = step[1].apply(r, generator)
            else:
                from .trajectories import _instruction
                r = _instruction(r, step[1], n, generator, 1)
            continue
        _, inv, ch, wires = step
        t = inv._tables(r.dtype, r.device)
        idx = patterns[:, j]
        j += 1
        if density:
            N = 2 ** n
            v = r.reshape(r.shape[0], -1)
            both = tuple(wires) + tuple(w + n for w in wires)
            r = apply_matrix_unchecked(v, t["corrected"][idx], both, 2 * n).reshape(-1, N, N)
        else:
            from .trajectories import _branch
            r, _ = _branch(r, ch.kraus, wires, n, generator)
            r = apply_matrix_unchecked(r, t["paulis"][idx], tuple(wires), n)
    return r
