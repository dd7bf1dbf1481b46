"""Running a circuit: the fuser turns its ops into steps, the steps call the kernels.

Fusion (as in qsim/qulacs): ops go into the latest block they may legally join (no later block
touches their wires) while the block stays within ``max_fused_wires`` wires; each block is one
GEMM. Runs of permutation gates (CNOT rings, SWAP networks) merge into one gather over their span.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .kernels.apply import apply_matrix_unchecked, kron, reorder_matrix

# Measured on the 2-core CPU (benchmarks/kernels.py): 3-wire blocks (8x8 GEMMs) beat 4 and 5
# once the python cost of building bigger matrices is counted; see benchmarks/RESULTS.md.
DEFAULT_MAX_FUSED_WIRES = 3
MAX_PERMUTATION_SPAN = 20


@dataclass
class Step:
    kind: str                 # "single" | "dense" | "perm"
    wires: tuple
    ops: list = field(default_factory=list)
    index_cache: dict = field(default_factory=dict)


def build_plan(circuit, fuse=None, max_fused_wires=None):
    fuse = circuit.fuse if fuse is None else fuse
    k = max_fused_wires or circuit.max_fused_wires or DEFAULT_MAX_FUSED_WIRES
    key = (fuse, k, len(circuit.ops))
    cache = circuit._plan_cache
    if cache is not None and cache[0] == key:
        return cache[1]
    steps = _fuse(circuit.ops, k) if fuse else [Step("single", op.wires, [op]) for op in circuit.ops]
    circuit._plan_cache = (key, steps)
    return steps


def _fuse(ops, k):
    blocks: list[Step] = []
    frontier: dict[int, int] = {}
    for op in ops:
        kind = "perm" if op.gate.kind == "permutation" else "dense"
        limit = MAX_PERMUTATION_SPAN if kind == "perm" else k
        f = max((frontier.get(w, -1) for w in op.wires), default=-1)
        chosen = None
        for b in range(len(blocks) - 1, f - 1, -1):
            if b < 0:
                break
            blk = blocks[b]
            if blk.kind != kind:
                continue
            union = set(blk.wires) | set(op.wires)
            size = (max(union) - min(union) + 1) if kind == "perm" else len(union)
            if size <= limit:
                chosen = b
                break
        if chosen is None:
            if len(op.wires) > limit:
                blocks.append(Step("single", op.wires, [op]))
            else:
                blocks.append(Step(kind, tuple(sorted(op.wires)), [op]))
            chosen = len(blocks) - 1
        else:
            blk = blocks[chosen]
            blk.ops.append(op)
            blk.wires = tuple(sorted(set(blk.wires) | set(op.wires)))
        for w in op.wires:
            frontier[w] = chosen
    for blk in blocks:
        if len(blk.ops) == 1:
            blk.kind = "single"
    return blocks


def _embed(m, positions, n_block):
    """Matrix on block positions ``positions`` widened to all ``n_block`` block wires."""
    k = len(positions)
    if k == n_block and list(positions) == list(range(n_block)):
        return m
    rest = [i for i in range(n_block) if i not in positions]
    eye = torch.eye(2 ** len(rest), dtype=m.dtype, device=m.device)
    wide = kron(m, eye)
    order = list(positions) + rest
    return reorder_matrix(wide, [order.index(i) for i in range(n_block)])


def op_matrix(circuit, op, x, weights=None):
    angles = circuit.angle_values(op, x, weights)
    m = op.gate.matrix_fn(angles, len(op.wires), circuit.dtype, circuit.data(op), circuit.device)
    return m.conj().transpose(-1, -2) if op.adjoint else m


def block_matrix(circuit, step, x, weights=None):
    """Product of the block's ops as one (d, d) or (B, d, d) matrix on ``step.wires``.

    Single-wire ops are multiplied per wire first and joined by one Kronecker product, which
    keeps the number of small matrix products low for layers of rotations.
    """
    bw = step.wires
    nb = len(bw)
    pos_of = {w: i for i, w in enumerate(bw)}
    pending: dict[int, torch.Tensor] = {}
    total = None

    def flush(positions):
        nonlocal total
        mats = [(p, pending.pop(p)) for p in sorted(positions) if p in pending]
        if not mats:
            return
        m = mats[0][1]
        for _, nxt in mats[1:]:
            m = kron(m, nxt)
        wide = _embed(m, [p for p, _ in mats], nb)
        total = wide if total is None else wide @ total

    for op in step.ops:
        m = op_matrix(circuit, op, x, weights)
        positions = [pos_of[w] for w in op.wires]
        if len(positions) == 1:
            p = positions[0]
            pending[p] = m if p not in pending else m @ pending[p]
            continue
        flush(positions)
        wide = _embed(m, positions, nb)
        total = wide if total is None else wide @ total
    flush(list(pending))
    return total


def _perm_index(circuit, step, device):
    key = str(device)
    if key not in step.index_cache:
        lo, hi = step.wires[0], step.wires[-1]
        s = hi - lo + 1
        idx = torch.arange(2 ** s, device=device).reshape(1, -1)
        for op in step.ops:
            idx = op.gate.apply(idx, (), tuple(w - lo for w in op.wires), s, adjoint=op.adjoint)
        step.index_cache[key] = idx.reshape(-1)
    return step.index_cache[key]


def apply_step(circuit, step, state, x, weights=None):
    n = circuit.n_wires
    if step.kind == "single":
        op = step.ops[0]
        angles = circuit.angle_values(op, x, weights)
        return op.gate.apply(state, angles, op.wires, n, circuit.data(op), op.adjoint)
    if step.kind == "perm":
        idx = _perm_index(circuit, step, state.device)
        B = state.shape[0]
        lo, hi = step.wires[0], step.wires[-1]
        return state.reshape(B, 2 ** lo, idx.shape[0], 2 ** (n - hi - 1)).index_select(2, idx).reshape(B, -1)
    m = block_matrix(circuit, step, x, weights)
    return apply_matrix_unchecked(state, m, step.wires, n)


def run_circuit(circuit, state, x=None, weights=None, fuse=None):
    for step in build_plan(circuit, fuse):
        state = apply_step(circuit, step, state, x, weights)
    return state
