"""Shared pieces of the research models: ansatz builders, seeding, results."""
from __future__ import annotations

import math
import numbers

import torch

from ..circuit import Circuit


def count(value, name: str, what: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum`` (a depth, a number of steps), else a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        kind = "a positive int" if minimum == 1 else f"an int >= {minimum}"
        raise ValueError(f"{what}: {name} must be {kind}, got {value!r}")
    return int(value)


def seeded_uniform_(circuit: Circuit, seed: int, low: float = 0.0, high: float = 2 * math.pi) -> Circuit:
    """Re-initialise all trainable angles uniformly in [low, high) from ``seed`` (reproducible)."""
    g = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        w = torch.rand(circuit.weights.shape, generator=g, dtype=torch.float64) * (high - low) + low
        circuit.weights.copy_(w.to(circuit.weights))
    return circuit


def cnot_ring(c: Circuit, wires) -> None:
    wires = list(wires)
    for a, b in zip(wires, wires[1:]):
        c.cnot(a, b)
    if len(wires) > 2:
        c.cnot(wires[-1], wires[0])


def real_entangled_layers(c: Circuit, wires, depth: int) -> Circuit:
    """``depth`` × (RY on every wire, CNOT ring), then a last RY layer (real amplitudes)."""
    for _ in range(depth):
        for w in wires:
            c.ry(w, trainable=True)
        cnot_ring(c, wires)
    for w in wires:
        c.ry(w, trainable=True)
    return c


def ry_rz_layers(c: Circuit, wires, depth: int) -> Circuit:
    """``depth`` × (RY and RZ on every wire, CNOT ring)."""
    for _ in range(depth):
        for w in wires:
            c.ry(w, trainable=True)
            c.rz(w, trainable=True)
        cnot_ring(c, wires)
    return c


def universal_two_qubit(c: Circuit, wires=(0, 1)) -> Circuit:
    """Any two-qubit unitary up to a phase with 15 angles and 3 CNOTs (Vatan–Williams):
    U3⊗U3 · CNOT(b,a) · RZ(a) RY(b) · CNOT(a,b) · RY(b) · CNOT(b,a) · U3⊗U3."""
    a, b = wires
    c.u3(a, trainable=True).u3(b, trainable=True)
    c.cnot(b, a)
    c.rz(a, trainable=True).ry(b, trainable=True)
    c.cnot(a, b)
    c.ry(b, trainable=True)
    c.cnot(b, a)
    c.u3(a, trainable=True).u3(b, trainable=True)
    return c


def real_dtype(dtype):
    return torch.float64 if dtype == torch.complex128 else torch.float32
