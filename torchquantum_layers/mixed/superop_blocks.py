"""Gates and channels on at most two qubits merged into one superoperator pass over ρ.

A noise model that puts a channel after every gate cuts a circuit into one segment per gate:
each gate, then each channel, was a pass over the ``(B, 4**n)`` vector view of ρ (a 1-qubit
gate and its depolarizing channel: two passes; a CNOT and a channel on each of its wires:
three). Here runs of gates and channels that act within the same ≤ :data:`MAX_BLOCK_QUBITS`
qubits become one *block*: the product of their superoperators, applied as one dense
``(4**k, 4**k)`` matrix on the row wires ``Q`` and the column wires ``Q + n`` together
(a 4 × 4 for one qubit, a 16 × 16 for two; ``apply_matrix_unchecked``: one pass, recorded as one
autograd node). Gates and channels on other qubits commute with a block and are merged into
blocks of their own, so a layer "rotation + noise on every wire" is one pass per wire (the
rotations of the next layer and their channels join it while no two-qubit gate intervenes).
Two-qubit gates are routed by kind (:func:`route_of_wide_gate`): a permutation (CNOT) is one
gather pass of its own, a diagonal (RZZ) joins the gate runs, other ones form 16 × 16 blocks
with the channels around them.

Superoperator convention (row-major vec, as :meth:`Channel.superoperator`): a gate ``U`` on the
block's qubits is ``U ⊗ conj(U)``, ``vec(U ρ U†) = (U ⊗ conj(U)) vec(ρ)``; the block's index bits
are its row qubits in order, then its column qubits in the same order. Blocks whose gates and
channels are all constant (fixed angles, channels without gradients) keep their matrix per
dtype and device; others rebuild it from the angles on every call (small products, differentiable
by autograd in the weights, the input features and the channel parameters).

Gates that no channel follows directly (on one of their qubits) do not enter blocks, nor are
blocks without a channel applied as superoperators: those gates join the gate runs that the
state-vector engine runs on 2n wires (a program keeps a row in cache for a whole run of gates,
which a product of dense blocks would not beat, and rebuilding a block from trainable angles on
every call costs more than it saves on small registers).
"""
from __future__ import annotations

import heapq

import torch

from ..block_matrices import op_matrix
from ..caching import building_cache
from ..circuit import Input, Param
from ..kernels.apply import apply_matrix_unchecked, kron, reorder_matrix

__all__ = ["MAX_BLOCK_QUBITS", "SuperopBlock", "plan_blocks", "passes"]

MAX_BLOCK_QUBITS = 2
"""A block acts on at most this many qubits: a 16 × 16 superoperator on 4 of the 2n wires of the
vector view (a 64 × 64 on 3 qubits costs ~5 4 × 4 passes, more than the passes it would save)."""


def superop_of_unitary(m: torch.Tensor) -> torch.Tensor:
    """``m ⊗ conj(m)`` ``(..., d², d²)`` for a ``(..., d, d)`` matrix: vec(mρm†) = S vec(ρ)."""
    d = m.shape[-1]
    s = m[..., :, None, :, None] * m.conj()[..., None, :, None, :]
    return s.reshape(*m.shape[:-2], d * d, d * d)


def embed(matrix: torch.Tensor, positions, n_positions: int) -> torch.Tensor:
    """A matrix on the wires ``positions`` (its own order, the first the most significant bit) of
    a block of ``n_positions`` wires, widened to the whole block (identity on the others)."""
    positions = list(positions)
    if positions == list(range(n_positions)):
        return matrix
    rest = [i for i in range(n_positions) if i not in positions]
    eye = torch.eye(2 ** len(rest), dtype=matrix.dtype, device=matrix.device)
    wide = kron(matrix, eye) if rest else matrix
    order = positions + rest
    return reorder_matrix(wide, [order.index(i) for i in range(n_positions)])


def route_of_wide_gate(op) -> str:
    """Where a gate on 2+ qubits goes (measured at 8 qubits, benchmarks/density_fusion.py):
    ``"direct"``: a permutation on two qubits (CNOT, SWAP) is one gather of both wire sets at once,
    cheaper than a 16 × 16 block (whose backward costs ~4 passes of a 4 × 4); ``"ops"``: a
    diagonal (CZ, RZZ, CP) joins the gate runs, where a program applies it at almost no cost;
    ``"block"``: other two-qubit gates (CRX, RXX, ISWAP) with the channels around them."""
    if len(op.wires) > MAX_BLOCK_QUBITS or op.gate.kind == "diagonal":
        return "ops"
    return "direct" if op.gate.kind == "permutation" else "block"


def _constant_op(op) -> bool:
    return op.data_key is None and not any(isinstance(a, (Param, Input)) for a in op.angles)


class SuperopBlock:
    """Gates (``("op", op)``) and channels (``("channel", Channel, wires)``) on the qubits
    ``qubits``, in circuit order; :meth:`apply` runs them as one superoperator pass."""

    __slots__ = ("qubits", "items", "_cache")

    def __init__(self, qubits):
        self.qubits = tuple(qubits)
        self.items: list = []
        self._cache: dict = {}

    @property
    def has_channel(self) -> bool:
        return any(item[0] == "channel" for item in self.items)

    @property
    def ops(self) -> list:
        return [item[1] for item in self.items if item[0] == "op"]

    def _constant(self) -> bool:
        return all(_constant_op(item[1]) if item[0] == "op" else not item[1].kraus.requires_grad
                   for item in self.items)

    def matrix(self, circuit, x, weights) -> torch.Tensor:
        """The block's superoperator ``(4**k, 4**k)``, or ``(B, 4**k, 4**k)`` where an angle reads
        the input features."""
        if not self._constant():
            return self._build(circuit, x, weights)
        key = (circuit.dtype, str(circuit.device))
        if key not in self._cache:
            with building_cache(), torch.no_grad():
                self._cache[key] = self._build(circuit, None, weights)
        return self._cache[key]

    def _build(self, circuit, x, weights):
        dtype, device = circuit.dtype, circuit.device
        k = len(self.qubits)
        at = {q: i for i, q in enumerate(self.qubits)}
        unitary = None          # the gates since the last channel, multiplied as (2**k, 2**k)
        total = None            # the superoperator so far

        def then(acc, m):
            return m if acc is None else m @ acc

        for item in self.items:
            if item[0] == "op":
                op = item[1]
                m = op_matrix(circuit, op, x, weights).to(dtype)
                unitary = then(unitary, embed(m, [at[w] for w in op.wires], k))
            else:
                _, channel, wires = item
                if unitary is not None:
                    total = then(total, superop_of_unitary(unitary))
                    unitary = None
                s = channel.superoperator(dtype, device)
                pos = [at[w] for w in wires]
                total = then(total, embed(s, pos + [k + p for p in pos], 2 * k))
        if unitary is not None:
            total = then(total, superop_of_unitary(unitary))
        return total

    def apply(self, v: torch.Tensor, circuit, x, weights) -> torch.Tensor:
        """The block on the ``(B, 4**n)`` vector view of ρ."""
        n = circuit.n_wires
        wires = self.qubits + tuple(q + n for q in self.qubits)
        if not v.is_contiguous():       # ρ broadcast over the batch: the one-pass kernels read dense rows
            v = v.contiguous()
        return apply_matrix_unchecked(v, self.matrix(circuit, x, weights), wires, 2 * n)

    def __repr__(self) -> str:
        names = [item[1].gate.name if item[0] == "op" else item[1].name for item in self.items]
        return f"SuperopBlock({list(self.qubits)}: {', '.join(names)})"


def plan_blocks(items, hoist: bool = False) -> list:
    """Group a flat circuit into blocks.

    ``items``: ``("op", op)``, ``("channel", Channel, wires)`` or ``("inst", instruction)`` in
    execution order. Returns ``("ops", [op, ...])`` (gate runs for the state-vector engine),
    ``("direct", op)`` (a two-qubit permutation, see :func:`route_of_wide_gate`),
    ``("block", SuperopBlock)`` and ``("inst", instruction)`` in an order that keeps every
    wire's sequence: a block is closed before anything on its qubits that it cannot take is
    placed, and an instruction (measurement, reset, wider channel) closes every open block.
    ``hoist=True``: a closed block goes before the gate run just emitted when none of that run's
    gates touches its qubits (they commute), so the next gates join that run (with
    :func:`wave_order`).
    """
    out: list = []
    open_blocks: list = []          # in the order they were opened
    owner: dict = {}                # qubit -> its open block

    def emit(entry):
        if entry[0] == "ops":
            if out and out[-1][0] == "ops":
                out[-1][1].extend(entry[1])
                return
            out.append(("ops", list(entry[1])))
        elif hoist and entry[0] == "block" and out and out[-1][0] == "ops" and not any(
                set(op.wires) & set(entry[1].qubits) for op in out[-1][1]):
            out.insert(len(out) - 1, entry)
        else:
            out.append(entry)

    def close(block):
        open_blocks.remove(block)
        for q in block.qubits:
            del owner[q]
        if block.has_channel:
            emit(("block", block))
        else:
            emit(("ops", block.ops))

    items = list(items)
    noisy = _followed_by_channel(items)
    for i, item in enumerate(items):
        if item[0] == "inst":
            for block in list(open_blocks):
                close(block)
            emit(item)
            continue
        qubits = tuple(item[1].wires) if item[0] == "op" else tuple(item[2])
        touched = []
        for q in qubits:
            b = owner.get(q)
            if b is not None and b not in touched:
                touched.append(b)
        route = "block" if item[0] == "channel" or len(qubits) == 1 else route_of_wide_gate(item[1])
        if route == "block" and item[0] == "op" and not noisy[i]:
            route = "ops"       # no channel of its own to merge with: a program applies it for free
        if route != "block" or len(qubits) > MAX_BLOCK_QUBITS:
            for block in touched:
                close(block)
            if item[0] == "channel":
                emit(("inst", _ChannelStep(item[1], item[2])))
            else:
                emit((route, [item[1]]) if route == "ops" else (route, item[1]))
            continue
        union = list(dict.fromkeys(q for b in touched for q in b.qubits))
        union += [q for q in qubits if q not in union]
        if len(union) <= MAX_BLOCK_QUBITS:
            block = SuperopBlock(sorted(union))
            for b in touched:           # on disjoint qubits: their items commute
                block.items.extend(b.items)
                open_blocks.remove(b)
                for q in b.qubits:
                    del owner[q]
        else:
            for b in touched:
                close(b)
            block = SuperopBlock(sorted(qubits))
        block.items.append(item)
        open_blocks.append(block)
        for q in block.qubits:
            owner[q] = block
    for block in list(open_blocks):
        close(block)
    return _join_runs(out)


def _followed_by_channel(items) -> list:
    """Per item: whether it is a gate whose next item on one of its qubits is a channel."""
    out = [False] * len(items)
    next_on: dict = {}              # qubit -> the next item touching it
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if item[0] == "inst":
            next_on = {}
            continue
        qubits = tuple(item[1].wires) if item[0] == "op" else tuple(item[2])
        if item[0] == "op":
            out[i] = any(next_on.get(q, ("",))[0] == "channel" for q in qubits)
        for q in qubits:
            next_on[q] = item
    return out


def _join_runs(entries) -> list:
    """A two-qubit permutation next to a gate run joins it (the program applies it in the same
    pass); only one between blocks and instructions stays a pass of its own."""
    out: list = []
    for i, entry in enumerate(entries):
        if entry[0] == "direct" and any(0 <= j < len(entries) and entries[j][0] == "ops" for j in (i - 1, i + 1)):
            entry = ("ops", [entry[1]])
        if entry[0] == "ops" and out and out[-1][0] == "ops":
            out[-1] = ("ops", out[-1][1] + entry[1])
        else:
            out.append(entry)
    return out


def passes(segments) -> float:
    """Estimated cost of a segment list in passes over ρ (measured, benchmarks/density_fusion.py):
    a gate run (one program), a channel, a one-qubit block or a direct permutation: 1; a 16 × 16
    block: 3 (its forward ~1.5 and its backward ~4 times a 4 × 4's)."""
    cost = 0.0
    for kind, item in segments:
        cost += 1 + 2 * (kind == "block" and len(item.qubits) > 1)
    return cost


class _ChannelStep:
    """A channel on more than :data:`MAX_BLOCK_QUBITS` qubits, applied on its own."""
    collapses = False

    def __init__(self, channel, wires):
        self.channel, self.wires = channel, tuple(wires)

    def apply(self, rho, generator=None):
        return self.channel(rho, self.wires)


def _item_qubits(item) -> tuple:
    return tuple(item[1].wires) if item[0] == "op" else tuple(item[2])


def wave_order(items) -> list:
    """The same gates and channels in an order that keeps every qubit's sequence (so the same map:
    items on disjoint qubits commute) but runs the gates as early as they can go: all gates ready
    (every earlier item on their qubits placed), repeatedly, then all channels ready, and again.
    Gates between channels then share one run (one program call) where the circuit's order
    alternated them: a QAOA cost layer with a channel after each RZZ, its edges listed vertex by
    vertex, was one run per edge. Instructions (measurements, resets) stay barriers."""
    out: list = []
    chunk: list = []
    for item in items:
        if item[0] == "inst":
            out.extend(_waves(chunk))
            out.append(item)
            chunk = []
        else:
            chunk.append(item)
    out.extend(_waves(chunk))
    return out


def _waves(items) -> list:
    """Gates / channels without instructions in :func:`wave_order`'s order, in O(items · wires)."""
    if len(items) < 3:
        return list(items)
    queues: dict = {}
    for i, item in enumerate(items):
        for q in _item_qubits(item):
            queues.setdefault(q, []).append(i)
    heads = {q: 0 for q in queues}
    queued = [False] * len(items)
    ready_ops: list = []
    ready_channels: list = []
    out: list = []

    def offer(i):
        if not queued[i] and all(queues[q][heads[q]] == i for q in _item_qubits(items[i])):
            queued[i] = True
            heapq.heappush(ready_ops if items[i][0] == "op" else ready_channels, i)

    def place(i):
        out.append(items[i])
        for q in _item_qubits(items[i]):
            heads[q] += 1
            if heads[q] < len(queues[q]):
                offer(queues[q][heads[q]])
    for q in queues:
        offer(queues[q][0])
    while len(out) < len(items):
        while ready_ops:                # gates, as long as placing one frees another
            place(heapq.heappop(ready_ops))
        wave, ready_channels[:] = sorted(ready_channels), []
        for i in wave:                  # then every channel ready now, as one wave
            place(i)
    return out
