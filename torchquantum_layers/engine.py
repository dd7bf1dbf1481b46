"""Running a circuit: the fuser turns its ops into steps, the steps call the kernels.

Fusion (as in qsim/qulacs): an op joins the block already holding its wires, or the latest block
it may legally join (no later block touches its wires), while the block stays within
``max_fused_wires`` wires; each block is one GEMM. Runs of permutation gates (CNOT rings, SWAP
networks) merge into one gather over their span.

Python overhead dominates small states, so the matrices of all single-wire ops are computed
once per call, one vectorised call per (gate, angle kind) group, and each block of single-wire
ops is assembled from that table by an index, a few batched 2×2 products and a Kronecker product.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import torch

from .kernels.apply import apply_matrix_unchecked, apply_permutation_unchecked, kron, permute_span, reorder_matrix

# Measured on the 2-core CPU (benchmarks/kernels.py, benchmarks/layers.py): see RESULTS.md.
DEFAULT_MAX_FUSED_WIRES = 4
MAX_PERMUTATION_SPAN = 20


@dataclass
class Step:
    kind: str                 # "single" | "dense" | "perm"
    wires: tuple
    ops: list = field(default_factory=list)
    index_cache: dict = field(default_factory=dict)
    grid: object = None       # for blocks of single-wire ops: (batched, index tensor, W, P)


@dataclass
class Group:
    """Single-wire ops of one gate whose angles are of the same kinds: one matrix_fn call."""
    gate: object
    adjoint: bool
    batched: bool
    ops: list
    angle_index: list         # per parameter: ("param", idx, scale) | ("input", cols, scale) | ("fixed", values)


@dataclass
class Plan:
    steps: list
    groups: list
    n_shared: int
    n_batched: int


def _angle_kind(a):
    from .circuit import Input, Param
    return "param" if isinstance(a, Param) else "input" if isinstance(a, Input) else "fixed"


def build_plan(circuit, fuse=None, max_fused_wires=None) -> Plan:
    fuse = circuit.fuse if fuse is None else fuse
    k = max_fused_wires or circuit.max_fused_wires or DEFAULT_MAX_FUSED_WIRES
    key = (fuse, k, len(circuit.ops))
    cache = circuit._plan_cache
    if cache is not None and cache[0] == key:
        return cache[1]
    steps = _fuse(circuit.ops, k) if fuse else [Step("single", op.wires, [op]) for op in circuit.ops]
    plan = _tabulate(steps)
    circuit._plan_cache = (key, plan)
    return plan


def _fuse(ops, k):
    blocks: list[Step] = []
    frontier: dict[int, int] = {}
    for op in ops:
        if op.gate.kind == "two-level":
            # touching 2 of 2^k local states beats any dense block holding it: a barrier on its wires
            blocks.append(Step("single", tuple(sorted(op.wires)), [op]))
            for w in op.wires:
                frontier[w] = len(blocks) - 1
            continue
        kind = "perm" if op.gate.kind == "permutation" else "dense"
        limit = MAX_PERMUTATION_SPAN if kind == "perm" else k
        f = max((frontier.get(w, -1) for w in op.wires), default=-1)
        chosen = None
        # the block already holding the op's wires first: keeps blocks compact and contiguous
        candidates = ([f] if f >= 0 else []) + list(range(len(blocks) - 1, max(f, 0) - 1, -1))
        for b in candidates:
            blk = blocks[b]
            if blk.kind != kind:
                continue
            union = set(blk.wires) | set(op.wires)
            size = (max(union) - min(union) + 1) if kind == "perm" else len(union)
            if size <= limit:
                chosen = b
                break
        if chosen is None:
            blocks.append(Step("single" if len(op.wires) > limit else kind, tuple(sorted(op.wires)), [op]))
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


def _tabulate(steps) -> Plan:
    """Group the single-wire ops of single-wire blocks and index each block into the table."""
    groups: dict = {}
    where = {}
    for step in steps:
        if step.kind != "dense" or any(len(op.wires) != 1 or op.gate.takes_data for op in step.ops):
            continue
        for op in step.ops:
            kinds = tuple(_angle_kind(a) for a in op.angles)
            key = (op.gate.name, op.adjoint, kinds)
            if key not in groups:
                groups[key] = Group(op.gate, op.adjoint, "input" in kinds, [], [])
            where[id(op)] = (key, len(groups[key].ops))
            groups[key].ops.append(op)
    shared = [g for g in groups.values() if not g.batched]
    batched = [g for g in groups.values() if g.batched]
    offset = {}
    pos = 0
    for g in shared + batched:
        offset[id(g)] = pos
        pos += len(g.ops)
    n_shared = sum(len(g.ops) for g in shared)
    n_batched = pos - n_shared
    for g in shared + batched:
        for j in range(g.gate.n_params):
            specs = [op.angles[j] for op in g.ops]
            kind = _angle_kind(specs[0])
            if kind == "param":
                g.angle_index.append(("param", torch.tensor([a.index for a in specs]),
                                      torch.tensor([a.scale for a in specs], dtype=torch.float64)))
            elif kind == "input":
                g.angle_index.append(("input", torch.tensor([a.column for a in specs]),
                                      torch.tensor([a.scale for a in specs], dtype=torch.float64)))
            else:
                g.angle_index.append(("fixed", torch.tensor(specs, dtype=torch.float64)))
    identity = n_shared + n_batched
    for step in steps:
        if step.kind != "dense" or not step.ops or id(step.ops[0]) not in where:
            continue
        seqs = {w: [] for w in step.wires}
        batched_block = False
        for op in step.ops:
            key, i = where[id(op)]
            g = groups[key]
            seqs[op.wires[0]].append(offset[id(g)] + i)
            batched_block |= g.batched
        P = max(len(s) for s in seqs.values())
        idx = torch.tensor([s + [identity] * (P - len(s)) for s in (seqs[w] for w in step.wires)])
        if batched_block:
            # two tables: shared ops index the shared one (identity at n_shared), per-sample ops the
            # batched one (identity at n_batched); the mask says which one a slot reads
            from_batched = (idx >= n_shared) & (idx < identity)
            shared_idx = torch.where(idx < n_shared, idx, n_shared)
            batched_idx = torch.where(from_batched, idx - n_shared, n_batched)
            step.grid = (True, (shared_idx, batched_idx, from_batched), len(step.wires), P)
        else:
            step.grid = (False, idx.clamp(max=n_shared), len(step.wires), P)
    return Plan(steps, list(shared + batched), n_shared, n_batched)


# ------------------------------------------------------------------------------------------------
# evaluation
def _group_angles(group, weights, x, real, device):
    out = []
    for spec in group.angle_index:
        if spec[0] == "param":
            idx, scale = spec[1].to(device), spec[2].to(device=device, dtype=real)
            out.append(weights.to(real)[idx] * scale)
        elif spec[0] == "input":
            idx, scale = spec[1].to(device), spec[2].to(device=device, dtype=real)
            out.append(x[:, idx] * scale)
        else:
            out.append(spec[1].to(device=device, dtype=real))
    if group.batched:
        B = x.shape[0]
        out = [a.expand(B, -1) if a.dim() == 1 else a for a in out]
    return tuple(out)


def single_wire_tables(circuit, plan, x, weights):
    """(shared (Ms+1, 2, 2), batched (B, Mb+1, 2, 2) or None): every single-wire op's matrix.

    The last entry of each table is the identity (padding for wires with fewer ops). Shared ops
    are not copied into the batched table: that copy grew with depth times batch.
    """
    if not plan.groups:
        return None, None
    dtype, device = circuit.dtype, circuit.device
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    w = circuit.weights if weights is None else weights
    shared, batched = [], []
    for g in plan.groups:
        m = g.gate.matrix_fn(_group_angles(g, w, x, real, device), 1, dtype, None, device)
        if g.adjoint:
            m = m.conj().transpose(-1, -2)
        if m.dim() == 2:          # parameter-free gate: one constant matrix for all its ops
            m = m.expand(len(g.ops), 2, 2)
        (batched if g.batched else shared).append(m)
    eye = torch.eye(2, dtype=dtype, device=device)
    shared_t = torch.cat(shared + [eye[None]], dim=0) if shared else eye[None]
    batched_t = None
    if batched:
        B = batched[0].shape[0]
        batched_t = torch.cat([*batched, eye.expand(B, 1, 2, 2)], dim=1)
    return shared_t, batched_t


def _grid_matrix(step, tables):
    batched, idx, W, P = step.grid
    shared_t, batched_t = tables
    if batched:
        shared_idx, batched_idx, from_batched = (t.to(batched_t.device) for t in idx)
        grid = torch.where(from_batched[..., None, None], batched_t[:, batched_idx],
                           shared_t[shared_idx])             # (B, W, P, 2, 2)
    else:
        grid = shared_t[idx.to(shared_t.device)]              # (W, P, 2, 2)
    m = grid[..., 0, :, :]
    for s in range(1, P):
        m = grid[..., s, :, :] @ m
    out = m[..., 0, :, :]
    for i in range(1, W):
        out = kron(out, m[..., i, :, :])
    return out


def _embed(m, positions, n_block):
    """Matrix on block positions ``positions`` widened to all ``n_block`` block wires."""
    if len(positions) == n_block and list(positions) == list(range(n_block)):
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


def _general_block_matrix(circuit, step, x, weights):
    """Product of a block's ops; single-wire runs are multiplied per wire, then one kron."""
    bw = step.wires
    nb = len(bw)
    pos_of = {w: i for i, w in enumerate(bw)}
    pending: dict = {}
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


def step_matrix(circuit, step, x, weights, tables):
    if step.grid is not None:
        return _grid_matrix(step, tables)
    return _general_block_matrix(circuit, step, x, weights)


def perm_index(step, device, inverse=False):
    """The step's merged permutation over its span (or its inverse), shared by identical steps:
    a layered circuit repeats the same CNOT ring, and each copy would keep 2^span indices."""
    key = (str(device), inverse)
    if key not in step.index_cache:
        lo = step.wires[0]
        signature = tuple((tuple(op.gate.perm_fn(len(op.wires))), tuple(w - lo for w in op.wires), op.adjoint)
                          for op in step.ops)
        step.index_cache[key] = _merged_permutation(signature, step.wires[-1] - lo + 1, str(device), inverse)
    return step.index_cache[key]


@lru_cache(maxsize=64)
def _merged_permutation(signature, span, device_str, inverse):
    """``signature``: ((local perm, wires relative to the span, adjoint), ...) in circuit order."""
    idx = torch.arange(2 ** span, device=device_str).reshape(1, -1)
    for perm, wires, adjoint in signature:
        if adjoint:
            perm = tuple(torch.argsort(torch.tensor(perm)).tolist())
        idx = apply_permutation_unchecked(idx, perm, wires, span)
    idx = idx.reshape(-1)
    return torch.argsort(idx) if inverse else idx


def apply_perm_step(step, state, n, inverse=False):
    lo, hi = step.wires[0], step.wires[-1]
    return permute_span(state, perm_index(step, state.device, inverse),
                        perm_index(step, state.device, not inverse), lo, hi, n)


def apply_single(circuit, op, state, x, weights, inverse=False):
    angles = circuit.angle_values(op, x, weights)
    return op.gate.apply(state, angles, op.wires, circuit.n_wires, circuit.data(op), op.adjoint ^ inverse)


def run_circuit(circuit, state, x=None, weights=None, fuse=None):
    plan = build_plan(circuit, fuse)
    n = circuit.n_wires
    tables = single_wire_tables(circuit, plan, x, weights)
    for step in plan.steps:
        if step.kind == "single":
            state = apply_single(circuit, step.ops[0], state, x, weights)
        elif step.kind == "perm":
            state = apply_perm_step(step, state, n)
        else:
            state = apply_matrix_unchecked(state, step_matrix(circuit, step, x, weights, tables), step.wires, n)
    return state
