"""Rotosolve (Ostaszewski, Grant, Benedetti, Quantum 5, 391 (2021)): coordinate descent that jumps
to the exact minimum of the loss along one angle at a time, from a few loss evaluations.

Along one angle θ_d with the others fixed, an expectation value of a circuit is a trigonometric
polynomial whose frequencies are the gaps of the spectrum of the angle's generator. One gap ω
(RX, RY, RZ, P, RXX, RYY, RZZ, RZX, MultiRZ, U3's angles, ROT's: spectrum {±½} or {0, −1},
ω = 1) gives ``E(θ_d + x) = A + B cos ωx + C sin ωx``; with ``E₀ = E(θ_d)`` and
``E± = E(θ_d ± π/(2ω))``: ``A = (E₊ + E₋)/2``, ``B = E₀ − A``, ``C = (E₊ − E₋)/2``, and the minimum
``A − √(B² + C²)`` sits at ``ωx* = −π/2 − atan2(2E₀ − E₊ − E₋, E₊ − E₋)`` (i.e. ``π + atan2(C, B)``).
Several gaps that are integer multiples ``ω, 2ω, …, Rω`` of one base (controlled rotations and
Givens excitations: {½, 1}; an angle fed to several gates: the sums of their gaps) take the
general reconstruction: ``2R + 1`` equidistant evaluations over one period give the polynomial's
coefficients exactly (a discrete Fourier transform), and its minimum is found on a grid of
``64 R`` points refined by Newton's method.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

import torch

__all__ = ["Rotosolve", "angle_spectra"]

_MAX_R = 16


def _base_and_order(freqs, what: str) -> tuple:
    """(ω, R) with every frequency an integer multiple of ω and the largest R ω."""
    freqs = sorted(set(round(float(f), 10) for f in freqs if f > 1e-10))
    if not freqs:
        return None
    low = freqs[0]
    ratios = [Fraction(f / low).limit_denominator(32) for f in freqs]
    if any(abs(float(r) - f / low) > 1e-8 for r, f in zip(ratios, freqs)):
        raise ValueError(f"{what}: frequencies {freqs} are not integer multiples of one base frequency")
    den = math.lcm(*(r.denominator for r in ratios))
    base = low / den
    order = round(freqs[-1] / base)
    if order > _MAX_R:
        raise ValueError(f"{what}: frequencies {freqs} need a reconstruction of {2 * order + 1} points "
                         f"(more than {2 * _MAX_R + 1})")
    return base, order


def angle_spectra(circuit) -> list:
    """Per trainable angle of ``circuit``: ``(ω, R)`` (the loss along it is a trigonometric polynomial of
    frequencies ω, 2ω, …, Rω), or None for an angle no gate reads. ValueError names an angle whose
    gate has no known spectrum (e.g. a matrix gate) or whose frequencies share no base."""
    diffs = [None] * circuit.num_parameters
    from .circuit import Param
    for op in circuit.ops:
        for j, a in enumerate(getattr(op, "angles", ())):
            if not isinstance(a, Param):
                continue
            spectra = getattr(op.gate, "spectra", ())
            if j >= len(spectra) or not spectra[j]:
                raise ValueError(f"Rotosolve: parameter {a.index} feeds {op.gate.name}, whose generator spectrum "
                                 f"is unknown; Rotosolve needs a sum of sinusoids in every angle")
            spec = [float(s) * abs(a.scale) for s in spectra[j]]
            gaps = {round(b - c, 10) for b in spec for c in spec}
            old = diffs[a.index] if diffs[a.index] is not None else {0.0}
            diffs[a.index] = {round(u + v, 10) for u in old for v in gaps}
    out = []
    for d, gaps in enumerate(diffs):
        out.append(None if gaps is None else _base_and_order([g for g in gaps if g > 0],
                                                             f"Rotosolve: parameter {d}"))
    return out


def _minimise_one(E0: float, Ep: float, Em: float, omega: float):
    """(x*, E(θ + x*)) for ``E(θ + x) = A + B cos ωx + C sin ωx`` from E(θ), E(θ ± π/(2ω))."""
    A = (Ep + Em) / 2
    x = (-math.pi / 2 - math.atan2(2 * E0 - Ep - Em, Ep - Em)) / omega
    period = 2 * math.pi / omega
    x = x - period * round(x / period)                    # the nearest minimum: |x| ≤ π/ω
    return x, A - math.hypot(E0 - A, (Ep - Em) / 2)


def _minimise_many(values, omega: float, R: int):
    """(x*, f(x*)) of the trigonometric polynomial through ``values`` at x_k = 2πk/((2R+1)ω), k = −R…R."""
    N = 2 * R + 1
    ks = torch.arange(-R, R + 1, dtype=torch.float64)
    f = torch.tensor(values, dtype=torch.float64)
    ls = torch.arange(1, R + 1, dtype=torch.float64)
    phase = 2 * math.pi * ls[:, None] * ks[None, :] / N                  # l ω x_k
    a0 = f.mean()
    a = 2 / N * (torch.cos(phase) * f).sum(1)
    b = 2 / N * (torch.sin(phase) * f).sum(1)

    def value(x):
        t = ls * omega * x
        return float(a0 + (a * torch.cos(t) + b * torch.sin(t)).sum())

    period = 2 * math.pi / omega
    grid = torch.linspace(-period / 2, period / 2, 64 * R + 1, dtype=torch.float64)
    t = ls[:, None] * omega * grid[None, :]
    curve = a0 + (a[:, None] * torch.cos(t) + b[:, None] * torch.sin(t)).sum(0)
    i = int(curve.argmin())
    x, best = float(grid[i]), float(curve[i])
    for _ in range(8):                                                 # Newton on f'(x) = 0
        t = ls * omega * x
        d1 = float((ls * omega * (-a * torch.sin(t) + b * torch.cos(t))).sum())
        d2 = float(((ls * omega) ** 2 * (-a * torch.cos(t) - b * torch.sin(t))).sum())
        if d2 <= 0:
            break
        x_new = x - d1 / d2
        if abs(x_new - x) > period / (64 * R):                         # left the grid point's basin
            break
        v = value(x_new)
        if v > best:
            break
        x, best = x_new, v
    return x, best


class Rotosolve(torch.optim.Optimizer):
    """Rotosolve: exact coordinate minimisation, one angle at a time, from loss evaluations only.

    ``Rotosolve(circuit)`` optimises ``circuit.weights``: each angle's frequencies come from the
    spectra of the gates that read it (:func:`angle_spectra`): a single gap (RX, RY, RZ, P, RXX,
    …) costs 2 new evaluations per angle and a closed-form jump; a controlled rotation or Givens
    excitation (gaps ½ and 1), or an angle shared by several gates, costs 2R (R = largest gap /
    base gap) and a numerical minimum of the reconstructed polynomial. An angle no gate reads is
    left alone; one whose gate has no spectrum (a matrix gate) raises ValueError naming it.
    ``Rotosolve(params, frequencies=(1.0,))`` optimises plain tensors under the *assumption* that
    the loss along every entry is a trigonometric polynomial with those frequencies (default: one,
    period 2π, as for the angle of a Pauli rotation); nothing can check that.

    The loss the closure returns must be an expectation value of the circuit (linear in its
    density matrix: an energy, a weighted sum of them), not a nonlinear function of one (a
    square, a log-likelihood): the reconstruction is exact only then. ``step(closure)`` sweeps
    ``coordinates_per_step`` angles (default: all, one sweep) in cyclic order, carrying on next
    step where it stopped; the closure only evaluates (no ``backward``), under ``no_grad``.
    ``reuse_minimum=True`` takes each angle's E(θ_d) from the previous angle's reconstructed
    minimum (exact for exact losses; with shots a slightly optimistic value) instead of a fresh
    evaluation. ``step`` returns the loss at the angles it started from; ``last_minima`` holds the
    reconstructed minimum after each angle of the last step, and ``state_dict`` keeps the step,
    the next angle and the number of closure calls (``evaluations``).
    """

    def __init__(self, circuit_or_params, frequencies=None, coordinates_per_step: Optional[int] = None,
                 reuse_minimum: bool = True):
        from .circuit import Circuit
        self.circuit = None
        if isinstance(circuit_or_params, Circuit):
            if frequencies is not None:
                raise ValueError("Rotosolve: frequencies are for plain parameters; a circuit's come from its gates")
            if circuit_or_params.num_parameters == 0:
                raise ValueError("Rotosolve: the circuit has no trainable parameters")
            self.circuit = circuit_or_params
            self._spectra = angle_spectra(self.circuit)
            self._n_ops = len(self.circuit.ops)
            params = [self.circuit.weights]
        elif isinstance(circuit_or_params, (torch.Tensor, str, bytes)) or not hasattr(circuit_or_params, "__iter__"):
            raise TypeError(f"Rotosolve: circuit_or_params must be a tql.Circuit or an iterable of tensors, "
                            f"got {type(circuit_or_params).__name__}")
        else:
            params = list(circuit_or_params)
            if frequencies is None:
                frequencies = (1.0,)
            if isinstance(frequencies, (int, float)):
                frequencies = (frequencies,)
            try:
                frequencies = tuple(float(f) for f in frequencies)
            except (TypeError, ValueError):
                raise TypeError(f"Rotosolve: frequencies must be positive numbers, got {frequencies!r}") from None
            if not frequencies or not all(math.isfinite(f) and f > 0 for f in frequencies):
                raise ValueError(f"Rotosolve: frequencies must be positive finite numbers, got {frequencies!r}")
            self._plain = _base_and_order(frequencies, "Rotosolve")
        if coordinates_per_step is not None and (isinstance(coordinates_per_step, bool)
                                                 or not isinstance(coordinates_per_step, int)
                                                 or coordinates_per_step < 1):
            raise ValueError(f"Rotosolve: coordinates_per_step must be a positive int or None, "
                             f"got {coordinates_per_step!r}")
        if not isinstance(reuse_minimum, bool):
            raise TypeError(f"Rotosolve: reuse_minimum must be a bool, got {type(reuse_minimum).__name__}")
        super().__init__(params, dict(coordinates_per_step=coordinates_per_step, reuse_minimum=reuse_minimum))
        for p in self._all_params():
            if p.is_complex() or not p.is_floating_point():
                raise TypeError(f"Rotosolve: parameters must be real floating tensors, got {p.dtype}")
        self.last_minima = []

    def _all_params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def _coordinates(self):
        """[(param, flat index, (ω, R) or None)] in sweep order."""
        if self.circuit is not None:
            (w,) = self._all_params()
            if w is not self.circuit.weights:
                raise ValueError("Rotosolve: circuit.weights was replaced after the optimizer was made (e.g. by "
                                 "load_state_dict(assign=True)); make the optimizer after loading the circuit")
            if len(self.circuit.ops) != self._n_ops or len(self._spectra) != w.numel():
                self._spectra, self._n_ops = angle_spectra(self.circuit), len(self.circuit.ops)
            return [(w, d, s) for d, s in enumerate(self._spectra)]
        return [(p, i, self._plain) for p in self._all_params() for i in range(p.numel())]

    @torch.no_grad()
    def step(self, closure=None):
        if closure is None or not callable(closure):
            raise ValueError("Rotosolve: step needs a closure that returns the loss (without backward)")
        coords = self._coordinates()
        first = self._all_params()[0]
        state = self.state[first]
        group = self.param_groups[0]
        start = int(state.get("coordinate", 0)) % max(len(coords), 1)
        count = group["coordinates_per_step"] or len(coords)
        evaluations = int(state.get("evaluations", 0))

        def loss():
            nonlocal evaluations
            evaluations += 1
            value = torch.as_tensor(closure()).detach()
            if value.numel() != 1:
                raise ValueError(f"Rotosolve: the closure must return a scalar loss, got shape {tuple(value.shape)}")
            return float(value.reshape(()))

        initial = current = loss()
        self.last_minima = []
        for i in range(count):
            p, d, spectrum = coords[(start + i) % len(coords)]
            if spectrum is None:                    # no gate reads this angle: the loss ignores it
                continue
            omega, R = spectrum
            flat = p.data.view(-1)
            theta = float(flat[d])
            if i > 0 and not group["reuse_minimum"]:
                current = loss()

            def at(x):
                flat[d] = theta + x
                return loss()
            if R == 1:
                shift = math.pi / (2 * omega)
                plus, minus = at(shift), at(-shift)
                x, current = _minimise_one(current, plus, minus, omega)
            else:
                N = 2 * R + 1
                values = [current if k == 0 else at(2 * math.pi * k / (N * omega)) for k in range(-R, R + 1)]
                x, current = _minimise_many(values, omega, R)
            flat[d] = theta + x
            self.last_minima.append(current)
        state["coordinate"] = torch.tensor((start + count) % max(len(coords), 1))
        state["step"] = torch.tensor(int(state.get("step", 0)) + 1)
        state["evaluations"] = torch.tensor(evaluations)
        return torch.tensor(initial, dtype=torch.float64)
