"""Readout errors: classical bit flips at measurement, and their mitigation.

A wire read out with error rates ``p01 = P(read 1 | 0)`` and ``p10 = P(read 0 | 1)`` turns its
probabilities ``p`` into ``A p`` with the confusion matrix ``A = [[1 − p01, p10], [p01, 1 − p10]]``
(columns: the true bit). Flips on different wires are independent, so for a Pauli term measured in
its eigenbasis each read eigenvalue ``z'`` has ``E[z' | z] = c z + d`` with ``c = 1 − p01 − p10``,
``d = p10 − p01``: the noisy value of a Pauli string ``P = ∏_w P_w`` is that of the observable
``∏_w (c_w P_w + d_w)``, and the mitigated one ``∏_w (P_w − d_w) / c_w`` read under the same noise
gives back ⟨P⟩ (unbiased; its variance grows as ``1 / c²`` per wire). Both are Pauli sums, so they
go through every expectation path (exact, trajectories, gradients) unchanged. A shot estimate of
a noisy observable samples the original one and flips the read bits instead, so it has the
spread of real readout too, not only its mean.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional

import torch

__all__ = ["ReadoutError"]


def _rate(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or not 0 <= value <= 1:
        raise ValueError(f"ReadoutError: {name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def _then(first, second):
    """The rates of reading through ``first`` and then ``second``."""
    (a01, a10), (b01, b10) = first, second
    return (1 - a01) * b01 + a01 * (1 - b10), a10 * (1 - b01) + (1 - a10) * b10


class ReadoutError:
    """Bit flips at readout: ``p01 = P(read 1 | 0)``, ``p10 = P(read 0 | 1)`` (default ``p01``).

    ``wires=None`` puts them on every wire; otherwise on the listed wires only (the others read
    perfectly). ``a.then(b)`` reads through ``a`` and then ``b``. ``p01 + p10`` must stay below 1,
    where the read bit still carries information about the true one.
    """

    def __init__(self, p01, p10=None, wires=None):
        p01 = _rate(p01, "p01")
        p10 = p01 if p10 is None else _rate(p10, "p10")
        if p01 + p10 >= 1:
            raise ValueError(f"ReadoutError: p01 + p10 = {p01 + p10:g} must be < 1 (at 1 the read bit says "
                             f"nothing about the true one)")
        self.default = (p01, p10) if wires is None else (0.0, 0.0)
        self.per_wire: dict = {}
        if wires is not None:
            ws = [wires] if isinstance(wires, int) and not isinstance(wires, bool) else list(wires)
            if not ws:
                raise ValueError("ReadoutError: wires is empty (use None for every wire)")
            for w in ws:
                if isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 0:
                    raise ValueError(f"ReadoutError: wire {w!r} is not a non-negative int")
                self.per_wire[int(w)] = (p01, p10)

    def rates(self, wire: int) -> tuple:
        """``(p01, p10)`` of ``wire``."""
        return self.per_wire.get(wire, self.default)

    def then(self, other: "ReadoutError") -> "ReadoutError":
        if not isinstance(other, ReadoutError):
            raise TypeError(f"ReadoutError.then: expected a ReadoutError, got {type(other).__name__}")
        out = ReadoutError(0.0)
        out.default = _then(self.default, other.default)
        out.per_wire = {w: _then(self.rates(w), other.rates(w)) for w in set(self.per_wire) | set(other.per_wire)}
        return out

    def __repr__(self) -> str:
        body = [f"p01={self.default[0]:g}, p10={self.default[1]:g}"] if self.default != (0.0, 0.0) else []
        body += [f"wire {w}: p01={a:g}, p10={b:g}" for w, (a, b) in sorted(self.per_wire.items())]
        return "ReadoutError(" + "; ".join(body or ["none"]) + ")"

    # -- observables ----------------------------------------------------------------------------
    @staticmethod
    def _hamiltonian(H):
        from ..observables import Hamiltonian, PauliString
        if isinstance(H, (str, PauliString)):
            H = Hamiltonian([(1.0, H)] if isinstance(H, PauliString) else H)
        if not isinstance(H, Hamiltonian):
            raise TypeError(f"ReadoutError: expected a Hamiltonian, PauliString or string, got {type(H).__name__}")
        return H

    def _affine(self, H, mitigate: bool):
        from ..observables import Hamiltonian, PauliString
        H = self._hamiltonian(H)
        terms = []
        for coeff, p in H.terms:
            parts = [(coeff, 0)]                # (coefficient, kept wires mask)
            for w in p.wires:
                p01, p10 = self.rates(w)
                c, d = 1 - p01 - p10, p10 - p01
                keep, drop = (1 / c, -d / c) if mitigate else (c, d)
                bit = 1 << w
                parts = [(k * f, m | b) for k, m in parts for f, b in ((keep, bit), (drop, 0)) if f != 0]
            terms += [(k, PauliString.from_masks(p.x_mask & m, p.z_mask & m)) for k, m in parts]
        return Hamiltonian(terms, n_wires=H.declared_n_wires).simplify(tol=0.0)

    def noisy_observable(self, H):
        """The observable whose exact value is ``H``'s value read out through these errors (shot
        estimates of it sample ``H`` and flip the read bits)."""
        noisy = self._affine(H, mitigate=False)
        noisy._read_through = (self._hamiltonian(H), self)
        return noisy

    def mitigated_observable(self, H):
        """The observable whose value read out through these errors is ``H``'s exact value."""
        return self._affine(H, mitigate=True)

    # -- probabilities and samples ----------------------------------------------------------------
    def _wires(self, k: int, wires, what: str) -> list:
        if wires is None:
            return list(range(k))
        wires = list(wires)
        if len(wires) != k:
            raise ValueError(f"ReadoutError.{what}: {len(wires)} wires for {k} bits per outcome")
        return wires

    def _per_bit(self, probs, wires, what, invert):
        if not isinstance(probs, torch.Tensor) or probs.is_complex() or probs.dim() < 1:
            raise TypeError(f"ReadoutError.{what}: probabilities must be a real tensor (..., 2**k)")
        k = int(round(math.log2(probs.shape[-1]))) if probs.shape[-1] > 0 else -1
        if k < 0 or 2 ** k != probs.shape[-1]:
            raise ValueError(f"ReadoutError.{what}: the last dimension {probs.shape[-1]} is not a power of 2")
        lead = probs.shape[:-1]
        out = probs.reshape(-1, probs.shape[-1])
        for i, w in enumerate(self._wires(k, wires, what)):
            p01, p10 = self.rates(w)
            a = torch.tensor([[1 - p01, p10], [p01, 1 - p10]], dtype=torch.float64)
            a = torch.linalg.inv(a) if invert else a
            out = torch.einsum("rt,aitb->airb", a.to(out), out.reshape(out.shape[0], 2 ** i, 2, -1)).reshape(out.shape)
        return out.reshape(*lead, 2 ** k)

    def noisy_probabilities(self, probs: torch.Tensor, wires=None) -> torch.Tensor:
        """``(..., 2**k)`` outcome probabilities of ``wires`` (default ``0 … k−1``, the first the
        most significant bit, as :func:`tql.measure.probabilities`) as read out."""
        return self._per_bit(probs, wires, "noisy_probabilities", invert=False)

    def mitigated_probabilities(self, probs: torch.Tensor, wires=None, clip: bool = True) -> torch.Tensor:
        """Read-out probabilities (or frequencies) through the inverse confusion matrices. Exact
        inputs give the true probabilities back; estimated ones may come out slightly negative,
        and ``clip=True`` sets those to 0 and renormalises each row."""
        out = self._per_bit(probs, wires, "mitigated_probabilities", invert=True)
        if clip:
            out = out.clamp_min(0)
            out = out / out.sum(-1, keepdim=True).clamp_min(torch.finfo(out.dtype).tiny)
        return out

    def noisy_samples(self, samples: torch.Tensor, wires, generator: Optional[torch.Generator] = None):
        """Basis indices ``(...)`` of ``wires`` (as :func:`tql.measure.sample` returns them) with
        each bit flipped as read out (reproducible with ``generator``, on the samples' device)."""
        if not isinstance(samples, torch.Tensor) or samples.dtype not in (torch.int32, torch.int64):
            raise TypeError("ReadoutError.noisy_samples: samples must be an int tensor of basis indices")
        wires = list(wires)
        k = len(wires)
        if k == 0:
            raise ValueError("ReadoutError.noisy_samples: wires is empty")
        shifts = torch.arange(k - 1, -1, -1, device=samples.device, dtype=torch.int64)
        bits = (samples.to(torch.int64).unsqueeze(-1) >> shifts) & 1
        p01 = torch.tensor([self.rates(w)[0] for w in wires], dtype=torch.float64, device=samples.device)
        p10 = torch.tensor([self.rates(w)[1] for w in wires], dtype=torch.float64, device=samples.device)
        u = torch.rand(bits.shape, generator=generator, dtype=torch.float64, device=samples.device)
        flip = (u < torch.where(bits == 1, p10, p01)).to(torch.int64)
        return ((bits ^ flip) << shifts).sum(-1).to(samples.dtype)
