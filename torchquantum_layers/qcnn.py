"""Quantum convolutional neural network (Cong, Choi & Lukin, Nat. Phys. 15, 1273 (2019); the
pooling of Hur, Kim & Park, Quantum Mach. Intell. 4, 3 (2022)) as a circuit template.

A QCNN halves the register level by level until ``n_readout`` wires are left:

* **convolution**: one two-qubit block (``conv``) on every neighbouring pair of the active wires,
  first the pairs (0, 1), (2, 3), …, then (1, 2), (3, 4), … and, on more than two active wires, the
  pair that closes the ring. All blocks of one convolution layer share their angles (translation
  invariance: the "convolutional" weight sharing); ``n_conv`` layers per level, each with its own.
* **pooling**: the active wires pair up (a, b) as (0, 1), (2, 3), …; a measurement of ``a`` would
  pick one of two rotations of ``b``: ``CRZ(θ₁)(a→b)``, then ``X(a)``, ``CRX(θ₂)(a→b)`` (by the
  deferred-measurement principle the controlled gates do that without measuring). ``a`` then leaves
  the active set; one (θ₁, θ₂) per level, shared by its pairs. An odd wire out passes on as it is;
  a level pools only as many pairs as keep ``n_readout`` wires.

The readout wires (:func:`qcnn_readout_wires`) carry the result: measure them, e.g. ⟨Z⟩.
Angles: ``levels × (n_conv × conv parameters + 2)`` in all, created in that order (level by level:
its convolution layers, then its pooling pair).

``conv`` blocks on a pair (a, b), angles t:

* ``"su4"`` (default, 15 angles): ``U3(t₀₋₂)(a) U3(t₃₋₅)(b)``, ``RXX(t₆) RYY(t₇) RZZ(t₈)``,
  ``U3(t₉₋₁₁)(a) U3(t₁₂₋₁₄)(b)``: every two-qubit unitary up to a phase (the KAK decomposition);
* ``"ry_cnot"`` (2 angles): ``RY(t₀)(a) RY(t₁)(b)``, ``CNOT(a, b)`` (real amplitudes stay real).
"""
from __future__ import annotations

from .circuit import Circuit
from .templates import CircuitLike, _circuit, _pos_int, _wires

__all__ = ["qcnn", "qcnn_readout_wires", "qcnn_schedule", "CONV_BLOCKS"]

CONV_BLOCKS = {"su4": 15, "ry_cnot": 2}
"""Convolution blocks and their number of angles."""


def qcnn_schedule(wires, n_readout: int = 1) -> list:
    """The levels of a QCNN on ``wires``: ``[(active wires, pooled pairs (a, b))]``; ``a`` leaves
    the active set at the end of its level."""
    what = "qcnn"
    wires = list(wires)
    n_readout = _pos_int(n_readout, "n_readout", what)
    if n_readout >= len(wires):
        raise ValueError(f"{what}: n_readout={n_readout} must be smaller than the {len(wires)} wires it pools "
                         f"(a QCNN needs something to pool)")
    levels = []
    active = wires
    while len(active) > n_readout:
        n_pairs = min(len(active) // 2, len(active) - n_readout)
        pairs = [(active[2 * i], active[2 * i + 1]) for i in range(n_pairs)]
        levels.append((list(active), pairs))
        gone = {a for a, _ in pairs}
        active = [w for w in active if w not in gone]
    return levels


def qcnn_readout_wires(wires, n_readout: int = 1) -> list:
    """The wires a QCNN on ``wires`` (an int n: ``range(n)``) leaves active: the ones to measure."""
    wires = list(range(wires)) if isinstance(wires, int) and not isinstance(wires, bool) else list(wires)
    gone = {a for _, pairs in qcnn_schedule(wires, n_readout) for a, _ in pairs}
    return [w for w in wires if w not in gone]


def _conv_pairs(active):
    even = [(active[i], active[i + 1]) for i in range(0, len(active) - 1, 2)]
    odd = [(active[i], active[i + 1]) for i in range(1, len(active) - 1, 2)]
    if len(active) > 2:
        odd.append((active[-1], active[0]))
    return even + odd


def _conv_block(circuit: Circuit, kind: str, pair, t) -> None:
    a, b = pair
    if kind == "ry_cnot":
        circuit.ry(a, t[0]).ry(b, t[1]).cnot(a, b)
        return
    circuit.u3(a, *t[0:3]).u3(b, *t[3:6])
    circuit.rxx(a, b, t[6]).ryy(a, b, t[7]).rzz(a, b, t[8])
    circuit.u3(a, *t[9:12]).u3(b, *t[12:15])


def qcnn(circuit: CircuitLike, wires=None, n_readout: int = 1, conv: str = "su4", n_conv: int = 1,
         pooling: bool = True, init="uniform") -> Circuit:
    """Append a QCNN (module notes) on ``wires`` (default all, in order) that leaves
    ``n_readout`` wires (:func:`qcnn_readout_wires`). ``conv``: ``"su4"`` or ``"ry_cnot"``;
    ``n_conv``: convolution layers per level; ``pooling=False`` drops the controlled rotations (the
    pooled wire is then simply no longer used). Trainable angles are created with ``init``."""
    what = "qcnn"
    circuit = _circuit(circuit, what)
    wires = _wires(circuit, wires, what)
    if not isinstance(conv, str) or conv not in CONV_BLOCKS:
        raise ValueError(f"{what}: conv must be one of {tuple(CONV_BLOCKS)}, got {conv!r}")
    n_conv = _pos_int(n_conv, "n_conv", what)
    if not isinstance(pooling, bool):
        raise TypeError(f"{what}: pooling must be True or False, got {pooling!r}")
    for active, pairs in qcnn_schedule(wires, n_readout):
        for _ in range(n_conv):
            t = [circuit.parameter(init) for _ in range(CONV_BLOCKS[conv])]
            for pair in _conv_pairs(active):
                _conv_block(circuit, conv, pair, t)
        if pooling:
            t1, t2 = circuit.parameter(init), circuit.parameter(init)
            for a, b in pairs:
                circuit.crz(a, b, t1).x(a).crx(a, b, t2)
    return circuit

