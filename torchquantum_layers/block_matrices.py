"""The matrices the engine applies, built from the circuit's angles (autograd records this part).

The matrices of all single-wire ops are computed once per call, one vectorised call per (gate,
angle kind) group (:func:`single_wire_tables`); each block of single-wire ops is assembled from
that table by an index, a few batched 2×2 products and a Kronecker product, and similar shared
blocks are assembled together (:func:`shared_block_matrices`). Other blocks multiply their ops'
matrices (:func:`step_matrix`). A circuit that starts from |0…0⟩ starts from the product state
of its leading single-wire gates (:func:`prefix_state`).
"""
from __future__ import annotations

import torch

from .kernels.apply import kron, reorder_matrix
from .kernels.transforms import transforms_active


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


def _grid_matrix(grid_spec, tables, kron_wires):
    batched, idx, W, P = grid_spec
    shared_t, batched_t = tables
    if batched:
        shared_idx, batched_idx, from_batched = (None if t is None else t.to(batched_t.device) for t in idx)
        if shared_idx is None:        # the batched table's last entry is the identity padding
            grid = batched_t[:, batched_idx]                 # (B, W, P, 2, 2)
        else:
            grid = torch.where(from_batched[..., None, None], batched_t[:, batched_idx], shared_t[shared_idx])
    else:
        grid = shared_t[idx.to(shared_t.device)]              # (W, P, 2, 2)
    return _product_and_kron(grid, W, P, kron_wires=kron_wires)


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
        return _grid_matrix(step.grid, tables, kron_wires=True)
    return _general_block_matrix(circuit, step, x, weights)


def extra_slot_tables(circuit, plan, x, weights):
    """(shared (E, 2, 2), per sample (B, Eb, 2, 2) or None): every program diagonal slot's four
    entries and controlled slot's target matrix, one matrix call per group (see single_wire_tables)."""
    dtype, device = circuit.dtype, circuit.device
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    w = circuit.weights if weights is None else weights
    parts = {False: [], True: []}
    for g in plan.extra_groups:
        angles = _group_angles(g, w, x, real, device)
        if g.gate.kind == "diagonal" and len(g.ops[0].wires) == 2:  # a diagonal slot (else a controlled one)
            m = g.gate.diag_fn(angles, 2, dtype, None, device)
            m = (m.conj() if g.adjoint else m).reshape(*m.shape[:-1], 2, 2)
        else:
            m = g.gate.target.matrix_fn(angles, 1, dtype, None, device)
            m = m.conj().transpose(-1, -2) if g.adjoint else m
        if m.dim() == 2:          # parameter-free (CH, CY): one matrix for all the group's ops
            m = m.expand(len(g.ops), 2, 2)
        parts[g.batched].append(m)
    shared = torch.cat(parts[False]) if parts[False] else None
    return shared, (torch.cat(parts[True], dim=1) if parts[True] else None)


def program_matrices(circuit, step, tables, extras=None):
    """A program's slot matrices: (shared (G, 2, 2), per sample (B, Gb, 2, 2) or None); its
    diagonal slots (after the 2 x 2 ones of their kind) hold their four entries as (2, 2), its
    controlled slots their target matrix (``extras``: from :func:`extra_slot_tables`)."""
    parts = {False: [], True: []}
    if step.grid is not None:
        parts[False].append(_grid_matrix(step.grid, tables, kron_wires=False))
    if step.batched_grid is not None:
        parts[True].append(_grid_matrix(step.batched_grid, tables, kron_wires=False))
    for per_sample in (False, True):
        idx = step.extra_index[per_sample] if step.extra_index is not None else ()
        if len(idx):
            values = extras[per_sample]
            parts[per_sample].append(values[..., idx.to(values.device), :, :])
    if parts[False]:
        shared = torch.cat(parts[False], dim=0)
    else:
        shared = torch.zeros(0, 2, 2, dtype=circuit.dtype, device=circuit.device)
    if not parts[True]:
        return shared, None
    B = max(p.shape[0] for p in parts[True])
    return shared, torch.cat([p.expand(B, *p.shape[1:]) for p in parts[True]], dim=1)


def prefix_state(circuit, step, x, tables):
    """|0…0⟩ after the prefix step's single-wire gates: a Kronecker product of one 2-vector per
    wire, ``(B, 2^n)`` (B = 1 when no gate reads inputs), in about two writes of the state."""
    n = circuit.n_wires
    dtype, device = circuit.dtype, circuit.device
    batch = x.shape[0] if x is not None else 1
    if not step.ops:
        state = torch.zeros(1, 2 ** n, dtype=dtype, device=device)
        state[0, 0] = 1
        return state.expand(batch, -1)
    zero = torch.zeros(2, dtype=dtype, device=device)
    zero[0] = 1
    per_wire = _grid_matrix(step.grid, tables, kron_wires=False)[..., 0]        # (W, 2) or (B, W, 2): columns U|0⟩
    if per_wire.dim() == 2:
        per_wire = per_wire[None]
    slot = {w: i for i, w in enumerate(step.wires)}
    state = _kron_rows([per_wire[:, slot[w]] if w in slot else zero[None] for w in range(n)])
    return state.expand(batch, -1) if state.shape[0] != batch else state


# a Python autograd.Function costs ~40 µs a call: below this many outputs autograd's own
# broadcast product (and its slow conjugate path) is cheaper
_ROW_OUTER_MIN = 2 ** 14


def _kron_rows(parts):
    """Row-wise Kronecker product of (B_i, 2) vectors, halves first: only the last product is
    state-sized, and as (2^(n/2) x 2^(n/2)) it broadcasts fast (a long-by-2 one runs 4x slower)."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    a, b = _kron_rows(parts[:half]), _kron_rows(parts[half:])
    big = max(a.shape[0], b.shape[0]) * a.shape[1] * b.shape[1] >= _ROW_OUTER_MIN
    if big and torch.is_grad_enabled() and (a.requires_grad or b.requires_grad) and not transforms_active():
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
