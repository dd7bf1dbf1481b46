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
from .kernels.layout import relayout, rotate

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
    # where the step finds the wires (physical order before it; order[p] = logical wire at p) and
    # how a dense block is applied: "in-place", "back-to-front" or "front-to-back" (kernels.layout)
    order: tuple = None
    mode: str = "in-place"
    target: tuple = None      # "relayout" steps: the order after


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
    # dense steps of shared single-wire ops with the same (wires, ops per wire), and their
    # stacked table indices (G, W, P): their matrices are built together, a few ops per group
    shared_blocks: list = field(default_factory=list)


def _angle_kind(a):
    from .circuit import Input, Param
    return "param" if isinstance(a, Param) else "input" if isinstance(a, Input) else "fixed"


def build_plan(circuit, fuse=None, max_fused_wires=None, layout=False, zero_start=False) -> Plan:
    """The fused steps of ``circuit``. ``layout=True`` (the state-vector engine): dense blocks
    at either end of the register rotate it (see kernels.layout) and every step records the
    physical wire order it meets; other walkers (the density-matrix one) take the canonical plan.
    ``zero_start``: the circuit starts from |0…0⟩, so the single-wire gates before each wire's
    first multi-wire gate form a product state, built directly (a ``"prefix"`` step)."""
    fuse = circuit.fuse if fuse is None else fuse
    k = max_fused_wires or circuit.max_fused_wires or DEFAULT_MAX_FUSED_WIRES
    key = (fuse, k, layout, zero_start)
    if circuit._plan_cache is None or circuit._plan_cache.get("n_ops") != len(circuit.ops):
        circuit._plan_cache = {"n_ops": len(circuit.ops)}
    cache = circuit._plan_cache
    if key not in cache:
        prefix, ops = _product_prefix(circuit.ops) if zero_start else ([], circuit.ops)
        steps = _fuse(ops, k) if fuse else [Step("single", op.wires, [op]) for op in ops]
        if layout:
            steps = _assign_layouts(steps, circuit.n_wires)
        if zero_start:
            wires = tuple(sorted({op.wires[0] for op in prefix}))
            steps = [Step("prefix", wires, prefix)] + steps
        cache[key] = _tabulate(steps)
    return cache[key]


def _tabulated(op):
    return len(op.wires) == 1 and not op.gate.takes_data


def _product_prefix(ops):
    """(ops acting on each wire before anything entangles it, the rest), both in circuit order."""
    closed = set()
    prefix, rest = [], []
    for op in ops:
        if _tabulated(op) and op.wires[0] not in closed:
            prefix.append(op)
        else:
            closed.update(op.wires)
            rest.append(op)
    return prefix, rest


# A rotating block reads the rest of the register as (d, X) matrices: below this X the GEMMs are
# too small and the in-place kernels (which widen short rows) win.
_MIN_ROTATION_REST_WIRES = 3


def _in_order(pos, wires):
    """Do logical wires min..max sit at consecutive physical positions, in that order?"""
    first = pos[wires[0]]
    return all(pos[w] == first + i for i, w in enumerate(range(wires[0], wires[-1] + 1)))


def _assign_layouts(steps, n):
    identity = tuple(range(n))
    order = identity
    out = []
    for step in steps:
        pos = {w: p for p, w in enumerate(order)}
        phys = sorted(pos[w] for w in step.wires)
        k = len(step.wires)
        new = order
        if step.kind == "perm" and not _in_order(pos, step.wires):
            # a permutation acts on its span in logical order: go back to that first
            out.append(Step("relayout", (), order=order, target=identity))
            order = new = identity
        elif step.kind == "dense" and n - k >= _MIN_ROTATION_REST_WIRES:
            if phys == list(range(k)):
                step.mode, new = "front-to-back", order[k:] + order[:k]
            elif phys == list(range(n - k, n)):
                step.mode, new = "back-to-front", order[n - k:] + order[:n - k]
        step.order = order
        out.append(step)
        order = new
    if order != identity:
        out.append(Step("relayout", (), order=order, target=identity))
    return out


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
        if step.kind not in ("dense", "prefix") or not all(_tabulated(op) for op in step.ops):
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
        if step.kind not in ("dense", "prefix") or not step.ops or id(step.ops[0]) not in where:
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
    similar: dict = {}
    for step in steps:
        if step.kind == "dense" and step.grid is not None and not step.grid[0]:
            similar.setdefault(tuple(step.grid[1].shape), []).append(step)
    shared_blocks = [(members, torch.stack([st.grid[1] for st in members]))
                     for members in similar.values() if len(members) > 1]
    return Plan(steps, list(shared + batched), n_shared, n_batched, shared_blocks)


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


def shared_block_matrices(plan, tables) -> dict:
    """{id(step): matrix} for the plan's groups of similar shared blocks, one group at a time."""
    out = {}
    if tables is None or tables[0] is None:
        return out
    for members, idx in plan.shared_blocks:
        W, P = idx.shape[1:]
        mats = _product_and_kron(tables[0][idx.to(tables[0].device)], W, P)   # (G, d, d)
        out.update(zip((id(st) for st in members), mats.unbind(0)))
    return out


def _grid_matrix(step, tables):
    batched, idx, W, P = step.grid
    shared_t, batched_t = tables
    if batched:
        shared_idx, batched_idx, from_batched = (t.to(batched_t.device) for t in idx)
        grid = torch.where(from_batched[..., None, None], batched_t[:, batched_idx],
                           shared_t[shared_idx])             # (B, W, P, 2, 2)
    else:
        grid = shared_t[idx.to(shared_t.device)]              # (W, P, 2, 2)
    return _product_and_kron(grid, W, P, kron_wires=step.kind != "prefix")


def _product_and_kron(grid, W, P, kron_wires=True):
    """(..., W, P, 2, 2) per-wire gate matrices -> (..., d, d) block (or (..., W, 2, 2) per wire)."""
    m = grid[..., 0, :, :]
    for s in range(1, P):
        m = grid[..., s, :, :] @ m
    if not kron_wires:
        return m
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


def step_matrix(circuit, step, x, weights, tables, built=None):
    """The dense step's matrix on its (sorted logical) wires; ``built``: from shared_block_matrices."""
    if built and id(step) in built:
        return built[id(step)]
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


def physical_wires(step, wires):
    """``wires`` (logical) where the step finds them."""
    if step.order is None:
        return tuple(wires)
    pos = {w: p for p, w in enumerate(step.order)}
    return tuple(pos[w] for w in wires)


def apply_perm_step(step, state, n, inverse=False):
    phys = physical_wires(step, step.wires)
    return permute_span(state, perm_index(step, state.device, inverse),
                        perm_index(step, state.device, not inverse), min(phys), max(phys), n)


def apply_single(circuit, op, state, x, weights, inverse=False, wires=None):
    angles = circuit.angle_values(op, x, weights)
    return op.gate.apply(state, angles, op.wires if wires is None else wires, circuit.n_wires,
                         circuit.data(op), op.adjoint ^ inverse)


def oriented_matrix(step, m):
    """(matrix, physical wires it acts on) for a dense step: the block's matrix re-expressed
    on its wires in the physical order the step's kernel reads them."""
    if step.order is None:
        return m, step.wires
    k = len(step.wires)
    if step.mode == "front-to-back":
        target = step.order[:k]
    elif step.mode == "back-to-front":
        target = step.order[-k:]
    else:
        pos = {w: p for p, w in enumerate(step.order)}
        target = tuple(sorted(step.wires, key=pos.__getitem__))
    if target != step.wires:
        m = reorder_matrix(m, [step.wires.index(w) for w in target])
    return m, physical_wires(step, target)


def apply_dense_step(step, state, m, wires, n, undo=False):
    """Apply a dense step's oriented matrix ``m`` on physical ``wires`` (from
    :func:`oriented_matrix`); ``undo``: ``m`` is the adjoint, and a rotation runs backwards."""
    if step.mode == "in-place":
        return apply_matrix_unchecked(state, m, wires, n)
    return rotate(state, m, len(wires), to_back=(step.mode == "front-to-back") != undo, unitary=True)


def prefix_state(circuit, step, x, tables):
    """|0…0⟩ after the prefix step's single-wire gates: a Kronecker product of one 2-vector per
    wire, ``(B, 2^n)`` (B = 1 when no gate reads inputs), in about two writes of the state."""
    n = circuit.n_wires
    dtype, device = circuit.dtype, circuit.device
    zero = torch.zeros(2, dtype=dtype, device=device)
    zero[0] = 1
    if step.ops:
        per_wire = _grid_matrix(step, tables)[..., 0]        # (W, 2) or (B, W, 2): columns U|0⟩
        if per_wire.dim() == 2:
            per_wire = per_wire[None]
    slot = {w: i for i, w in enumerate(step.wires)}
    state = _kron_rows([per_wire[:, slot[w]] if w in slot else zero[None] for w in range(n)])
    batch = x.shape[0] if x is not None else 1
    return state.expand(batch, -1) if state.shape[0] != batch else state


def _kron_rows(parts):
    """Row-wise Kronecker product of (B_i, 2) vectors, halves first: only the last product is
    state-sized, and as (2^(n/2) x 2^(n/2)) it broadcasts fast (a long-by-2 one runs 4x slower)."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    a, b = _kron_rows(parts[:half]), _kron_rows(parts[half:])
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _RowOuter.apply(a, b)
    return (a[:, :, None] * b[:, None, :]).reshape(max(a.shape[0], b.shape[0]), -1)


class _RowOuter(torch.autograd.Function):
    """Row-wise outer product whose backward is two batched matrix-vector products: autograd's
    multiplies the state-sized gradient by a lazily conjugated operand (a slow path) and sums."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return (a[:, :, None] * b[:, None, :]).reshape(max(a.shape[0], b.shape[0]), -1)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        B = grad.shape[0]
        g = grad.reshape(B, a.shape[1], b.shape[1])
        ga = gb = None
        if ctx.needs_input_grad[0]:
            ga = torch.bmm(g, b.conj().resolve_conj().expand(B, -1)[:, :, None])[:, :, 0]
            ga = ga.sum(0, keepdim=True) if a.shape[0] != B else ga
        if ctx.needs_input_grad[1]:
            gb = torch.bmm(a.conj().resolve_conj().expand(B, -1)[:, None, :], g)[:, 0, :]
            gb = gb.sum(0, keepdim=True) if b.shape[0] != B else gb
        return ga, gb


def run_circuit(circuit, state, x=None, weights=None, fuse=None):
    """The state after ``circuit``; ``state=None`` is |0…0⟩ (batch from ``x``, else 1)."""
    plan = build_plan(circuit, fuse, layout=True, zero_start=state is None)
    n = circuit.n_wires
    tables = single_wire_tables(circuit, plan, x, weights)
    built = shared_block_matrices(plan, tables)
    for step in plan.steps:
        if step.kind == "prefix":
            state = prefix_state(circuit, step, x, tables)
        elif step.kind == "single":
            op = step.ops[0]
            state = apply_single(circuit, op, state, x, weights, wires=physical_wires(step, op.wires))
        elif step.kind == "perm":
            state = apply_perm_step(step, state, n)
        elif step.kind == "relayout":
            state = relayout(state, step.order, step.target)
        else:
            m, wires = oriented_matrix(step, step_matrix(circuit, step, x, weights, tables, built))
            state = apply_dense_step(step, state, m, wires, n)
    return state
