"""Clifford data regression (CDR): learn how the noise bends expectation values from circuits that
can be simulated without noise, and undo it (Czarnik, Arrasmith, Coles and Cincio, Quantum 5, 592
(2021)).

The training circuits are the circuit itself with all but a few of its non-Clifford rotations set
to Clifford angles (:func:`near_clifford_circuits`). Each runs twice: without noise (the
state-vector engine; on a device, a Clifford simulation) and with the noise model (density
matrices or trajectories, as the real circuit). A line ``ideal ≈ a · noisy + b`` fitted to those
pairs by least squares, one per observable and input row, then maps the noisy value of the real
circuit to the mitigated one (:func:`cdr_expval`). Noise that scales every traceless expectation
by one factor (global depolarizing noise) is undone exactly; other noise approximately, as far as
the training circuits resemble the circuit.

Which gates are replaced: the rotations whose angles become Clifford at multiples of π/2 —
``RX, RY, RZ, P, RXX, RYY, RZZ, RZX, MULTIRZ`` and the Euler gates ``U2, U3, ROT`` (each of their
angles is snapped; U3(θ, φ, λ) = RZ(φ) RY(θ) RZ(λ) up to a phase) — with fixed, trainable or
per-sample (input) angles. One of them is *non-Clifford* where some angle, in some input row, is
off the grid k·π/2. Gates without an angle grid (T, controlled rotations, Givens rotations,
QubitUnitary, …) are kept as they are in every training circuit: the state-vector engine does
not need the training circuits to be Clifford, but such circuits resemble the real one more.
Clifford gates (and rotations already at Clifford angles) are never changed.

How: each training circuit keeps ``round(fraction_non_clifford · L)`` of the L non-Clifford
rotations, drawn uniformly without replacement, and sets each angle of the others to a Clifford
angle: ``"weighted"`` (default, as the paper) draws one of the four classes k·π/2 (mod 2π) with
probability ∝ exp(−d²/σ²), d the distance of the angle from it on the circle and σ = 0.5 rad;
``"nearest"`` takes the nearest (then the training circuits differ only in the gates kept). Per-
sample angles are snapped row by row; which gates are kept is shared by the rows.

The default fraction is 0.25 (Mitiq's is 0.1): on 3-4 qubit circuits of 24 rotations with
depolarizing noise after the CNOTs, keeping 2 of them left most training values at exactly 0 and
the slope poorly determined (mean |error| 0.2-0.6 of the unmitigated one over groups of five
circuits, 16 training circuits); keeping 6 gave 0.07-0.22. The state-vector engine does not need
the training circuits to be near Clifford, only close to the circuit.
"""
from __future__ import annotations

import math
import numbers
import weakref
from dataclasses import dataclass
from typing import Optional

import torch

from ..circuit import Input, Op
from ..kernels.state import REAL_OF

__all__ = ["NearClifford", "CDRFit", "near_clifford_circuits", "cdr_expval", "ROTATIONS", "FITS",
           "REPLACEMENTS", "SIMULATORS"]

ROTATIONS = frozenset({"RX", "RY", "RZ", "P", "RXX", "RYY", "RZZ", "RZX", "MULTIRZ", "U2", "U3", "ROT"})
"""Gates whose angles are snapped to multiples of π/2 in the training circuits."""
FITS = ("linear", "proportional")
REPLACEMENTS = ("weighted", "nearest")
SIMULATORS = ("density", "trajectories")
SIGMA = 0.5
"""σ (radians) of the ``"weighted"`` replacement: P(k·π/2) ∝ exp(−d²/σ²)."""
_HALF_PI = math.pi / 2
_ROWS_BUDGET = 2 ** 22
"""At most this many density-matrix amplitudes per run of training rows (64 MiB of complex128)."""


@dataclass
class NearClifford:
    """Training circuits of CDR, as one circuit run on ``T · B`` input rows.

    * ``circuit``: the circuit with each angle of a non-Clifford rotation read from an extra input
      column (``n_features + j`` for the j-th such angle), sharing the original's weights;
    * ``angles``: ``(T, B, A)`` the A angles of every training circuit t in every input row b
      (kept ones: the original value; replaced ones: a multiple of π/2);
    * ``kept``: ``(T, L)`` bool, which of the L non-Clifford rotations training circuit t keeps;
    * ``positions``: the L indices in ``original.ops`` of the non-Clifford rotations;
    * ``n_features``: the input columns of the original's ``x`` (0 without ``x``).
    """
    original: object
    circuit: object
    angles: torch.Tensor
    kept: torch.Tensor
    positions: tuple
    n_features: int

    @property
    def n_circuits(self) -> int:
        return self.angles.shape[0]

    def inputs(self, x: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``(T · B, F + A)`` input rows of :attr:`circuit`: row ``t · B + b`` is training circuit
        t on the input row b of ``x`` (``(B, F)``, the ``x`` the circuits were drawn for)."""
        T, B, A = self.angles.shape
        angles = self.angles.reshape(T * B, A)
        if x is None:
            return angles
        x = torch.as_tensor(x)
        x = x.unsqueeze(0) if x.dim() == 1 else x
        x = x.to(device=angles.device, dtype=angles.dtype).expand(B, -1)
        return torch.cat([x.repeat(T, 1), angles], 1)

    def circuits(self, row: int = 0) -> list:
        """The T training circuits for input row ``row`` as circuits of their own (sharing the
        original's weights): replaced rotations with fixed Clifford angles, every other op (kept
        rotations included) the original's."""
        ops = list(self.original.ops)
        out = []
        for t in range(self.n_circuits):
            new = list(ops)
            j = 0
            for pos in self.positions:
                op = ops[pos]
                k = len(op.angles)
                vals = tuple(float(v) for v in self.angles[t, row, j:j + k])
                j += k
                if not bool(self.kept[t, self.positions.index(pos)]):
                    new[pos] = Op(op.gate, op.wires, vals, op.data_key, op.adjoint)
            out.append(self.original._sharing(new))
        return out


@dataclass
class CDRFit:
    """What :func:`cdr_expval` fitted (``return_fit=True``), shaped as its value ``V`` (``(B,)``,
    ``(B, n_obs)``, …): ``slope`` and ``intercept`` (``mitigated = slope · noisy + intercept``),
    ``noisy`` (the unmitigated value), ``training_noisy`` / ``training_ideal`` (``(T,) + V``), and
    ``training`` (the :class:`NearClifford` circuits)."""
    slope: torch.Tensor
    intercept: torch.Tensor
    noisy: torch.Tensor
    training_noisy: torch.Tensor
    training_ideal: torch.Tensor
    training: NearClifford


# ------------------------------------------------------------------------------------------------
def _count(value, name, what, least):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: {name} must be an int >= {least}, got {value!r}")
    if value < least:
        raise ValueError(f"{what}: {name} must be an int >= {least}, got {value}")
    return int(value)


def _fraction(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what}: fraction_non_clifford must be a real number in [0, 1], got {value!r}")
    v = float(value)
    if not 0.0 <= v <= 1.0:           # NaN fails too
        raise ValueError(f"{what}: fraction_non_clifford must be in [0, 1], got {value!r}")
    return v


def _check_generator(generator, what):
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")


def _check_circuit(circuit, what):
    from ..circuit import Circuit
    if not isinstance(circuit, Circuit):
        raise TypeError(f"{what}: expected a Circuit, got {type(circuit).__name__}")
    insts = list(getattr(circuit, "instructions", ()) or ())
    if insts:
        raise ValueError(f"{what}: the circuit has {insts[0][1]!r} written into it; Clifford data regression "
                         f"runs the training circuits on the noiseless state-vector engine, which needs a "
                         f"unitary circuit (put the noise into a NoiseModel)")


_TEMPLATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _template(circuit, positions, n_features):
    """``circuit`` with the angles of the ops at ``positions`` read from input columns
    ``n_features, n_features + 1, …`` (cached while the circuit and its settings stay, so that
    repeated calls reuse its plan)."""
    key = (len(circuit.ops), tuple(positions), n_features, circuit.dtype, str(circuit.device), circuit.fuse,
           circuit.max_fused_wires)
    hit = _TEMPLATES.get(circuit)
    if hit is not None and hit[0] == key and hit[1] is circuit.weights and hit[3] == tuple(circuit.ops):
        return hit[2]
    ops = list(circuit.ops)
    col = n_features
    for pos in positions:
        op = ops[pos]
        ops[pos] = Op(op.gate, op.wires, tuple(Input(col + i) for i in range(len(op.angles))), op.data_key,
                      op.adjoint)
        col += len(op.angles)
    out = circuit._sharing(ops)
    _TEMPLATES[circuit] = (key, circuit.weights, out, tuple(circuit.ops))
    return out


def _angle_table(circuit, x, weights, rows):
    """The rotations' positions and their angles ``(rows, A)`` (float64), A over all rotations."""
    positions, cols = [], []
    for i, op in enumerate(circuit.ops):
        if op.gate.name not in ROTATIONS or op.data_key is not None:
            continue
        positions.append(i)
        for v in circuit.angle_values(op, x, weights):
            cols.append(v.detach().to(torch.float64).reshape(-1).expand(rows))
    table = torch.stack(cols, 1) if cols else torch.zeros(rows, 0, dtype=torch.float64, device=circuit.device)
    return positions, table


def _draws(circuit, n_circuits, fraction, replacement, generator, x, weights, what):
    """(positions of the L non-Clifford rotations, angles (T, B, A), kept (T, L))."""
    rows = x.shape[0] if x is not None else 1
    positions, table = _angle_table(circuit, x, weights, rows)
    real = REAL_OF[circuit.dtype]
    tol = 64 * torch.finfo(real).eps
    nearest_k = torch.round(table / _HALF_PI)
    off = (table - nearest_k * _HALF_PI).abs() > tol * table.abs().clamp(min=1.0)      # (B, A)
    # the non-Clifford rotations: an angle off the grid in some row
    widths = [len(circuit.ops[p].angles) for p in positions]
    owner = torch.repeat_interleave(torch.arange(len(positions)), torch.tensor(widths, dtype=torch.int64)) \
        if positions else torch.zeros(0, dtype=torch.int64)
    per_op = torch.zeros(len(positions), dtype=torch.bool)
    if positions:
        per_op.index_put_((owner,), off.any(0).cpu(), accumulate=True)
    chosen = [i for i in range(len(positions)) if bool(per_op[i])]
    if not chosen:
        names = sorted({op.gate.name for op in circuit.ops})
        raise ValueError(f"{what}: the circuit has no non-Clifford rotation ({'/'.join(sorted(ROTATIONS))} at an "
                         f"angle off the multiples of pi/2) to replace (its gates: {names}); its training "
                         f"circuits would all be the circuit itself, so there is nothing to learn from them")
    cols = torch.cat([torch.arange(sum(widths[:i]), sum(widths[:i + 1])) for i in chosen])
    table = table[:, cols]                                                  # (B, A)
    owner = torch.repeat_interleave(torch.arange(len(chosen)),
                                    torch.tensor([widths[i] for i in chosen], dtype=torch.int64))
    L, T = len(chosen), n_circuits
    n_keep = math.floor(fraction * L + 0.5)
    order = torch.rand(T, L, generator=generator, dtype=torch.float64).argsort(1)
    kept = torch.zeros(T, L, dtype=torch.bool)
    kept.scatter_(1, order[:, :n_keep], True)
    base = torch.round(table / _HALF_PI)                                    # (B, A) nearest k
    if replacement == "nearest":
        snapped = (base * _HALF_PI).expand(T, *table.shape)
    else:
        e = table - base * _HALF_PI                                          # in [−π/4, π/4]
        steps = torch.tensor([-1.0, 0.0, 1.0, 2.0], dtype=torch.float64)
        d = (e[..., None] - steps * _HALF_PI).abs()                          # (B, A, 4)
        d[..., 3] = math.pi - e.abs()                                        # k + 2 ≡ k − 2 (mod 4)
        w = torch.exp(-(d / SIGMA) ** 2)
        B, A = table.shape
        pick = torch.multinomial(w.reshape(B * A, 4).cpu().repeat(T, 1), 1, replacement=True,
                                 generator=generator).reshape(T, B, A)
        snapped = (base.cpu() + steps[pick]) * _HALF_PI
    snapped = snapped.to(table.device)
    keep_cols = kept[:, owner].to(table.device)[:, None, :]                  # (T, 1, A)
    angles = torch.where(keep_cols, table.expand(T, *table.shape), snapped)
    return tuple(positions[i] for i in chosen), angles, kept


def near_clifford_circuits(circuit, n_circuits: int, fraction_non_clifford: float = 0.25,
                           replacement: str = "weighted", generator: Optional[torch.Generator] = None,
                           x=None, weights=None) -> NearClifford:
    """``n_circuits`` training circuits of CDR for ``circuit`` (module notes): each keeps
    ``round(fraction_non_clifford · L)`` of its L non-Clifford rotations (uniformly drawn) and sets
    the angles of the others to multiples of π/2 (``replacement``: ``"weighted"`` or
    ``"nearest"``). ``generator`` seeds the draws; ``x`` ``(B, F)``: the inputs whose per-sample
    angles are snapped (row by row); ``weights`` replaces the circuit's weights.

    Returns a :class:`NearClifford`: all training circuits as one circuit with the angles as extra
    input columns (``.circuit`` on ``.inputs(x)`` runs them as ``T · B`` batch rows), and
    ``.circuits(row)`` as separate circuits.

    Raises ValueError for ``n_circuits < 1``, a fraction outside [0, 1], an unknown replacement,
    a circuit with instructions (channels, measurements, resets) and a circuit with no
    non-Clifford rotation (its training circuits would all be itself); TypeError for a
    ``generator`` that is not a ``torch.Generator``.
    """
    what = "near_clifford_circuits"
    _check_circuit(circuit, what)
    n_circuits = _count(n_circuits, "n_circuits", what, 1)
    return _near_clifford(circuit, n_circuits, fraction_non_clifford, replacement, generator, x, weights, what)


def _near_clifford(circuit, n_circuits, fraction, replacement, generator, x, weights, what):
    fraction = _fraction(fraction, what)
    if replacement not in REPLACEMENTS:
        raise ValueError(f"{what}: replacement must be one of {REPLACEMENTS}, got {replacement!r}")
    _check_generator(generator, what)
    weights = circuit.weights_or(weights, what)
    if x is not None:
        x, _, _ = circuit.prepare(x, None, materialize=False)
    elif circuit.n_inputs:
        raise ValueError(f"{what}: gates read {circuit.n_inputs} input column(s) but no x was given")
    with torch.no_grad():
        positions, angles, kept = _draws(circuit, n_circuits, fraction, replacement, generator, x, weights, what)
    F = x.shape[1] if x is not None else 0
    template = _template(circuit, positions, F)
    angles = angles.to(REAL_OF[circuit.dtype])
    return NearClifford(circuit, template, angles, kept, positions, F)


# ------------------------------------------------------------------------------------------------
def _fit(xs, ys, fit):
    """Least-squares ``y ≈ a x + b`` over the first axis (T) of ``xs``, ``ys`` ``(T, …)``; ``b = 0``
    for ``"proportional"``. Degenerate data (the noisy training values all equal, for
    ``"linear"``; all zero, for ``"proportional"``): linear falls back to proportional, and
    proportional to ``a = 1`` (the noisy value is returned as it is)."""
    T = xs.shape[0]
    tiny = T * (1e3 * torch.finfo(xs.dtype).eps) ** 2
    sxx = (xs * xs).sum(0)
    prop_ok = sxx > tiny
    a_prop = torch.where(prop_ok, (xs * ys).sum(0) / torch.where(prop_ok, sxx, torch.ones_like(sxx)),
                         torch.ones_like(sxx))
    if fit == "proportional":
        return a_prop, torch.zeros_like(a_prop)
    xm, ym = xs.mean(0), ys.mean(0)
    dx = xs - xm
    var = (dx * dx).sum(0)
    ok = var > tiny
    a = (dx * (ys - ym)).sum(0) / torch.where(ok, var, torch.ones_like(var))
    a = torch.where(ok, a, a_prop)
    b = torch.where(ok, ym - a * xm, torch.zeros_like(ym))
    return a, b


def _as_state_rows(state, B, T):
    """The input state of every training row (row t·B + b: row b), or None."""
    if state is None:
        return None
    lead = state.shape[0]
    s = state.expand(B, *state.shape[1:]) if lead == 1 and B > 1 else state
    return s.repeat(T, *([1] * (s.dim() - 1)))


def cdr_expval(circuit, observables, noise_model=None, n_training: int = 16, fraction_non_clifford: float = 0.25,
               fit: str = "linear", replacement: str = "weighted", generator: Optional[torch.Generator] = None,
               x=None, state=None, simulator: str = "density", n_trajectories: int = 64,
               return_fit: bool = False, weights=None):
    """Clifford-data-regressed ``Tr(O ρ_ideal)`` of ``circuit`` under ``noise_model`` (default: the
    circuit's), shaped as ``mixed.expval``'s result: ``(B,)`` or ``(B, n_obs)``.

    ``n_training`` training circuits (:func:`near_clifford_circuits` with
    ``fraction_non_clifford``, ``replacement``, ``generator``) run as ``n_training · B`` batch rows,
    once on the noiseless state-vector engine (density matrices where ``state`` is one) and once
    with the noise (``simulator``: ``"density"``, or ``"trajectories"`` with ``n_trajectories``
    per row, seeded by ``generator``). Per observable and input row, ``ideal ≈ a · noisy + b`` is
    fitted by least squares over the training circuits (``fit="linear"``; ``"proportional"``:
    ``b = 0``; degenerate data: see :func:`_fit`) and applied to the noisy value of ``circuit``.
    Readout errors of the model are in the noisy values, so the fit undoes them too.

    Differentiable by autograd through the noisy value of ``circuit`` (the fit is held fixed: it
    is computed without gradient). ``x``: input features ``(B, F)``; ``state``: input states
    ``(B, 2**n)`` or density matrices ``(B, N, N)`` (not with trajectories); ``weights`` replaces
    the circuit's weights for this call. ``return_fit=True`` also returns a :class:`CDRFit`.

    Raises ValueError for ``n_training < 2``, a fraction outside [0, 1], an unknown ``fit``,
    ``replacement`` or ``simulator``, no noise model, a circuit with channels / measurements /
    resets written into it, and a circuit with no non-Clifford rotation (module notes);
    TypeError for a ``generator`` that is not a ``torch.Generator``.
    """
    from . import trajectories
    from ..grad import circuit_expval
    from .noise import NoiseModel
    from .simulate import _check_observables, _observables, _resolve_noise, expval
    what = "cdr_expval"
    _check_circuit(circuit, what)
    T = _count(n_training, "n_training", what, 2)
    _fraction(fraction_non_clifford, what)
    if fit not in FITS:
        raise ValueError(f"{what}: fit must be one of {FITS}, got {fit!r}")
    if simulator not in SIMULATORS:
        raise ValueError(f"{what}: simulator must be one of {SIMULATORS}, got {simulator!r}")
    _check_generator(generator, what)
    hams, single = _observables(observables, what)
    _check_observables(hams, circuit.n_wires, what)
    noise_model = _resolve_noise(circuit, noise_model)
    if noise_model is None:
        raise ValueError(f"{what}: no noise_model given and the circuit carries none: there is no noise to "
                         f"learn (use tql.expval / mixed.expval for the noiseless value)")
    density_in = isinstance(state, torch.Tensor) and state.dim() == 3
    if density_in and simulator == "trajectories":
        raise TypeError(f"{what}: trajectories start from state vectors (B, 2**n); for density matrices use "
                        f"simulator='density'")
    squeeze = isinstance(x, torch.Tensor) and x.dim() == 1
    xp = None
    if x is not None:
        xp, _, _ = circuit.prepare(x, None, materialize=False)
    B = xp.shape[0] if xp is not None else (state.shape[0] if isinstance(state, torch.Tensor) and
                                            state.dim() >= 2 else 1)
    run_kwargs = dict(noise_model=noise_model, weights=weights)
    if simulator == "trajectories":
        run_kwargs.update(n_trajectories=n_trajectories, generator=generator)
    noisy_run = expval if simulator == "density" else trajectories.expval

    # the real circuit's noisy value (with gradient)
    noisy = noisy_run(circuit, hams, x=xp, state=state, **run_kwargs)                 # (B, O)
    B = noisy.shape[0]
    with torch.no_grad():
        train = _near_clifford(circuit, T, fraction_non_clifford, replacement, generator,
                               None if xp is None else xp.expand(B, -1), weights, what)
        if train.angles.shape[1] != B:            # no input rows: the same angles for every state row
            train.angles = train.angles.expand(T, B, -1)
        X = train.inputs(None if xp is None else xp.expand(B, -1))                   # (T B, F + A)
        S = _as_state_rows(state, B, T)
        tw = train.circuit.weights_or(weights, what)
        if density_in:
            ideal = expval(train.circuit, hams, x=X, state=S, noise_model=NoiseModel(), weights=tw)
        else:
            ideal = circuit_expval(train.circuit, hams, x=X, state=S, weights=tw)
        ideal = ideal.reshape(T * B, -1)
        # the noisy training rows, in chunks of at most _ROWS_BUDGET density-matrix amplitudes
        per_row = 4 ** circuit.n_wires if simulator == "density" else 2 ** circuit.n_wires * n_trajectories
        chunk = max(1, _ROWS_BUDGET // per_row)
        parts = []
        for start in range(0, T * B, chunk):
            sl = slice(start, start + chunk)
            parts.append(noisy_run(train.circuit, hams, x=X[sl], state=None if S is None else S[sl],
                                   **run_kwargs).reshape(-1, len(hams)))
        train_noisy = torch.cat(parts)
        xs = train_noisy.reshape(T, B, -1)
        ys = ideal.reshape(T, B, -1).to(xs.dtype)
        a, b = _fit(xs, ys, fit)
    value = a * noisy + b
    if single:
        value, a, b, noisy = value[..., 0], a[..., 0], b[..., 0], noisy[..., 0]
        xs, ys = xs[..., 0], ys[..., 0]
    if squeeze:
        value, a, b, noisy = value[0], a[0], b[0], noisy[0]
        xs, ys = xs[:, 0], ys[:, 0]
    if return_fit:
        return value, CDRFit(a, b, noisy, xs, ys, train)
    return value
