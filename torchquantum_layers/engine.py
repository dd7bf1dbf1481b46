"""Running a circuit: the fuser turns its ops into steps, the steps call the kernels.

Fusion (as in qsim/qulacs): an op joins the block already holding its wires, or the latest block
it may legally join (no later block touches its wires), while the block stays within
``max_fused_wires`` wires; each block is one GEMM. Runs of permutation gates (CNOT rings, SWAP
networks) merge into one gather over their span.

The state-vector plan also tracks where each wire physically sits: a block on the first or last
wires of the register is one transposed batched GEMM that moves them to the other end
(kernels.layout), so no block copies the state to bring its wires together. From |0…0⟩ the
leading single-wire gates become one product state. The matrices themselves are built in
block_matrices.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from itertools import groupby

import torch

from .block_matrices import (extra_slot_tables, prefix_state, program_matrices, shared_block_matrices,
                             single_wire_tables, step_matrix)
from .caching import building_cache, lasting
from .kernels.apply import (apply_diagonal_unchecked, apply_matrix_unchecked, apply_permutation_unchecked, permute_span,
                            reorder_matrix)
from .kernels.layout import relayout, rotate
from .kernels.transforms import inspectable, transforms_active
from .kernels import program as programs
from .program_forms import program_form

# Measured on the 2-core CPU (benchmarks/kernels.py, benchmarks/layers.py): see RESULTS.md.
DEFAULT_MAX_FUSED_WIRES = 4
# Beside local programs (the CPU engine) the ops left over are dense multi-wire gates, which the
# native 4 x 4 kernel applies in one pass each: 2-wire blocks beat 3- and 4-wire GEMMs there
# (a ring of RXX, measured before it became a program's diagonal slot, on 20 qubits: 1.0-1.6
# against 1.8-2.5 clones per gate; ISWAP 0.9-1.3 against 1.8-2.0; 12-16 qubits: 2-3.5 x), wider
# gates still get blocks as wide as they are.
PROGRAM_MAX_FUSED_WIRES = 2
MAX_PERMUTATION_SPAN = 20
# Off: every circuit takes the fused-block engine (the tests run both; see uses_programs).
USE_PROGRAMS = True
# a run of fewer programmable ops joins the fused blocks around it instead
_MIN_PROGRAM_OPS = 2


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
    position: dict = None     # logical wire -> physical position under ``order``
    mode: str = "in-place"
    target: tuple = None      # "relayout" steps: the order after
    slots: list = None        # "program" steps: (wire, [single-wire ops], per sample) per matrix slot
    extra_slots: list = field(default_factory=list)   # "program" steps: (op, per sample) per diagonal / controlled slot
    extra_index: tuple = None     # "program" steps: their indices into the extra tables (shared, per sample)
    batched_grid: object = None   # "program" steps: the grid of the per-sample slots
    program: object = None    # "program" steps: the kernels.program.Program


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
    # programs' diagonal and controlled slots, grouped by gate and angle kinds (shared groups first)
    extra_groups: list = field(default_factory=list)


def _angle_kind(a):
    from .circuit import Input, Param
    return "param" if isinstance(a, Param) else "input" if isinstance(a, Input) else "fixed"


def uses_programs(circuit, fuse=None) -> bool:
    """Whether the state-vector engine runs ``circuit`` as local programs (kernels.program): on
    the CPU, with the native library (registers whose rows do not fit in cache run as tiles)."""
    fuse = circuit.fuse if fuse is None else fuse
    return USE_PROGRAMS and fuse and programs.usable(circuit.dtype, circuit.device) and not transforms_active()


def rotating_layout(circuit) -> bool:
    """Whether the state-vector engine lets dense blocks at the register's ends rotate it
    (kernels.layout): a GEMM beats a copy that brings wires together. On CUDA with Triton a block
    of up to kernels.gpu.MAX_WIRES wires is one in-place pass of kernels.gpu instead, so blocks
    stay in place there (unmeasured against the rotations: benchmarks/kernels.py reports both);
    everywhere else the rotations stay. Under a torch.func transform blocks stay in place: the
    rotation's autograd.Function has no transform rules."""
    if transforms_active():
        return False
    if torch.device(circuit.device).type != "cuda":
        return True
    from .kernels import gpu
    return not gpu.available()


def build_plan(circuit, fuse=None, max_fused_wires=None, layout=False, zero_start=False,
               local_programs=False) -> Plan:
    """The fused steps of ``circuit``. ``layout=True`` (the state-vector engine): dense blocks
    at either end of the register rotate it (see kernels.layout) and every step records the
    physical wire order it meets; other walkers (the density-matrix one) take the canonical plan.
    ``zero_start``: the circuit starts from |0…0⟩, so the single-wire gates before each wire's
    first multi-wire gate form a product state, built directly (a ``"prefix"`` step).
    ``local_programs``: runs of programmable ops (single-wire gates, monomials, two-wire diagonals,
    controlled single-target gates) become ``"program"`` steps (see :func:`uses_programs`); the
    other ops are fused into blocks in canonical order."""
    fuse = circuit.fuse if fuse is None else fuse
    local_programs = local_programs and fuse
    k = max_fused_wires or circuit.max_fused_wires or (PROGRAM_MAX_FUSED_WIRES if local_programs
                                                       else DEFAULT_MAX_FUSED_WIRES)
    key = (fuse, k, layout, zero_start, local_programs and programs.local_bits(circuit.dtype))
    if circuit._plan_cache is None or circuit._plan_cache.get("n_ops") != len(circuit.ops):
        circuit._plan_cache = {"n_ops": len(circuit.ops)}
    cache = circuit._plan_cache
    if key not in cache:
        with building_cache():
            # a program applies its leading gates in cache anyway: from |0…0⟩ it starts from that
            # state (an empty prefix step), not from a product state built in torch
            product_start = zero_start and not local_programs
            prefix, ops = _product_prefix(circuit.ops) if product_start else ([], circuit.ops)
            if local_programs:
                steps = _program_fuse(ops, k, circuit.n_wires, programs.local_bits(circuit.dtype))
            else:
                steps = _fuse(ops, k) if fuse else [Step("single", op.wires, [op]) for op in ops]
            if layout and not local_programs:
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


def _reads_input(op):
    return any(_angle_kind(a) == "input" for a in op.angles)


def _monomial(op):
    """A permutation, a diagonal gate without parameters (CZ, CCZ) or another fixed gate whose
    matrix has one entry per row (ISWAP, a controlled ISWAP): merged into index tables."""
    gate = op.gate
    if gate.takes_data:
        return False
    return gate.kind == "permutation" or (gate.kind == "diagonal" and gate.n_params == 0) or \
        _fixed_monomial(gate, len(op.wires)) is not None


@lru_cache(maxsize=None)
@lasting
def _fixed_monomial(gate, k):
    """(t, d) with U[j, t[j]] = d[j] the only entries of a parameter-free k-wire gate's matrix,
    or None when it has none or more per row."""
    if gate.n_params or gate.takes_data or gate.kind not in ("dense", "controlled"):
        return None
    m = gate.matrix((), n_wires=k, dtype=torch.complex128)
    nonzero = m.abs() > 1e-12
    if not bool((nonzero.sum(1) == 1).all()):
        return None
    t = nonzero.to(torch.int8).argmax(1)
    return t, m[torch.arange(2 ** k), t]


def _diagonal_slot(op):
    """A two-wire diagonal gate with parameters (RZZ, CP, CRZ): a diagonal slot of a program."""
    gate = op.gate
    return gate.kind == "diagonal" and gate.n_params > 0 and len(op.wires) == 2 and not gate.takes_data


def _controlled_slot(op):
    """A gate controlled by any wires with a single-wire target (CRX, CRY, CRot, CU3, CH, CY, and
    the diagonal ones beyond two wires: CCRZ, CCP)."""
    gate = op.gate
    if gate.takes_data or not gate.n_controls or gate.target.n_wires != 1:
        return False
    # a parameter-free diagonal (CZ, CCZ) joins the index tables instead
    return gate.kind == "controlled" or (gate.kind == "diagonal" and gate.n_params > 0 and not _diagonal_slot(op))


def _programmable(op):
    return _tabulated(op) or _monomial(op) or _diagonal_slot(op) or _controlled_slot(op)


def _program_fuse(ops, k, n, max_bits):
    """Maximal runs of programmable ops become programs, the ops between them fused blocks. A
    register of more than ``max_bits`` wires runs each run as passes of tiled programs."""
    low = _tile_run_wires(n, max_bits)
    ops = program_form(ops)
    steps, others = [], []
    for programmable, run in groupby(ops, key=lambda op: _programmable(op) and len(op.wires) <= max_bits - low):
        run = list(run)
        if programmable and len(run) >= _MIN_PROGRAM_OPS:
            steps.extend(_fuse(others, k))
            others = []
            if n <= max_bits:
                steps.append(_program_step(run, n))
            else:
                steps.extend(_program_step(part, n, active) for part, active in _passes(run, n, max_bits, low))
        else:
            others.extend(run)
    return steps + _fuse(others, k)


def _tile_run_wires(n, max_bits):
    """How many of the last wires every tile holds (none for programs on whole rows): a tile is
    then runs of 2^low contiguous amplitudes (1 KiB of complex64 at low = 7), long enough for its
    gather to stream; at most half the tile's bits, so the others can take the remaining wires."""
    return 0 if n <= max_bits else min(7, max_bits // 2)


def _passes(run, n, max_bits, low):
    """[(ops, active wires)]: ``run`` cut into passes of at most ``max_bits`` wires, each holding
    the last ``low`` wires. An op joins the current pass unless it shares a wire with an op left
    for later (it commutes with those it overtakes) or its wires do not fit."""
    base = set(range(n - low, n))
    out = []
    while run:
        active, blocked, take, rest = set(base), set(), [], []
        for i, op in enumerate(run):
            wires = set(op.wires)
            if not wires & blocked and len(active | wires) <= max_bits:
                active |= wires
                take.append(op)
            else:
                rest.append(op)
                blocked |= wires
                if len(blocked) == n:
                    rest.extend(run[i + 1:])
                    break
        out.append((take, tuple(sorted(active))))
        run = rest
    return out


def _program_step(ops, n, active=None):
    """One program: each wire's single-wire ops multiply into one slot matrix until a permutation
    touches the wire; consecutive permutations merge into one index table. A wire's pending ops
    go before the open run of permutations unless one of them touched that wire. ``active``: the
    wires of a tiled program (all ``n`` when None); the program numbers them 0.. in order."""
    local = {w: i for i, w in enumerate(range(n) if active is None else active)}
    m = len(local)
    entries, pending = [], {}
    run, run_wires = [], set()

    def close_run():
        if run:
            entries.append(("perm", *_merged_monomial(run, m, local)))
            run.clear()
            run_wires.clear()

    def emit(w):
        # a slot's ops all share or all read inputs: shared matrices stay (G, 2, 2)
        for level, (per_sample, run_ops) in enumerate(groupby(pending.pop(w), key=_reads_input)):
            entries.append(("gate", local[w], per_sample, list(run_ops), level))

    for op in ops:
        if _tabulated(op):
            pending.setdefault(op.wires[0], []).append(op)
            continue
        for w in op.wires:
            if w in pending:
                if w in run_wires:
                    close_run()
                emit(w)
        if _diagonal_slot(op) or _controlled_slot(op):
            # after the open permutations only where they touch its wires (else it commutes)
            if run_wires & set(op.wires):
                close_run()
            entries.append(("diag" if _diagonal_slot(op) else "cgate", tuple(local[w] for w in op.wires),
                            _reads_input(op), op))
            continue
        run.append(op)
        run_wires.update(op.wires)
    close_run()
    for w in sorted(pending):
        emit(w)
    entries = _by_level(entries)
    slots = [(e[1], e[3], e[2]) for e in entries if e[0] == "gate"]
    step = Step("program", tuple(local), list(ops), slots=slots,
                extra_slots=[(e[3], e[2]) for e in entries if e[0] in ("diag", "cgate")])
    bits = None if active is None else sorted(n - 1 - w for w in active)
    step.program = programs.Program.build(m, [e if e[0] == "perm" else e[:3] for e in entries], bits)
    return step


def _merged_monomial(run, n, local):
    """(t, d or None): consecutive permutations and fixed diagonals as new[j] = d[j] old[t[j]],
    on the ``n`` wires numbered by ``local``."""
    idx, phase = torch.arange(2 ** n), None
    for op in run:
        wires = tuple(local[w] for w in op.wires)
        if op.gate.kind == "permutation":
            perm, _, adjoint = _perm_signature(op)
            t = _merged_permutation(((perm, wires, adjoint),), n, "cpu", False)
            idx = idx[t]
            phase = None if phase is None else phase[t]
        elif op.gate.kind != "diagonal":          # a fixed monomial: new[j] = d[j] old[t[j]]
            local_t, d = _fixed_monomial(op.gate, len(op.wires))
            if op.adjoint:                        # U†[t[j], j] = conj(d[j])
                local_t, d = torch.argsort(local_t), d.conj()[torch.argsort(local_t)]
            t = _merged_permutation(((tuple(local_t.tolist()), wires, False),), n, "cpu", False)
            idx = idx[t]
            phase = None if phase is None else phase[t]
            row = apply_diagonal_unchecked(torch.ones(1, 2 ** n, dtype=torch.complex128), d, wires, n)[0]
            phase = row if phase is None else phase * row
        else:
            diag = op.gate.diag_fn((), len(op.wires), torch.complex128, None, "cpu")
            diag = diag.conj() if op.adjoint else diag
            row = apply_diagonal_unchecked(torch.ones(1, 2 ** n, dtype=torch.complex128), diag, wires, n)[0]
            phase = row if phase is None else phase * row
    return idx, phase


def _by_level(entries):
    """Between permutations, each wire's slots in order but the wires' first slots first: the
    gates of different wires commute, and the encoding's per-sample slots, all first, then need
    neither a Gram product nor an un-computed ψ in the backward sweep when inputs take no
    gradient (kernels/program.c stops the sweep before them)."""
    out, gates = [], []
    for e in entries + [("end",)]:
        if e[0] == "gate":
            gates.append(e)
            continue
        out += sorted(gates, key=lambda g: g[4])          # stable: each wire keeps its order
        gates = []
        if e[0] != "end":
            out.append(e)
    return out


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
        step.order, step.position = order, (pos if order != identity else None)
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


def _slot_sequences(step):
    """(shared-or-mixed slots, per-sample slots): the single-wire ops of each matrix slot of a
    step built from the table (per wire of a block of single-wire ops; per slot of a program,
    whose per-sample slots form a second grid), or None for other steps."""
    if step.kind == "program":
        return ([ops for _, ops, per_sample in step.slots if not per_sample],
                [ops for _, ops, per_sample in step.slots if per_sample])
    if step.kind not in ("dense", "prefix") or not all(_tabulated(op) for op in step.ops):
        return None
    return [[op for op in step.ops if op.wires[0] == w] for w in step.wires], []


def _grid(seqs, where, groups, offset, n_shared, n_batched):
    """The table indices of slots' op sequences: (per_sample, index, W, P), or None for no ops.
    The last entry of each table is the identity, padding shorter sequences."""
    if not any(seqs):
        return None
    identity = n_shared + n_batched
    rows = [[offset[id(groups[where[id(op)][0]])] + where[id(op)][1] for op in seq] for seq in seqs]
    batched_block = any(groups[where[id(op)][0]].batched for seq in seqs for op in seq)
    P = max(len(r) for r in rows)
    idx = torch.tensor([r + [identity] * (P - len(r)) for r in rows])
    if batched_block:
        # two tables: shared ops index the shared one (identity at n_shared), per-sample ops the
        # batched one (identity at n_batched); the mask says which one a slot reads
        from_batched = (idx >= n_shared) & (idx < identity)
        # None: the slots hold no shared op (the encoding's), so they do not depend on the weights
        shared_idx = torch.where(idx < n_shared, idx, n_shared) if bool((idx < n_shared).any()) else None
        batched_idx = torch.where(from_batched, idx - n_shared, n_batched)
        return True, (shared_idx, batched_idx, from_batched), len(rows), P
    return False, idx.clamp(max=n_shared), len(rows), P


def _tabulate(steps) -> Plan:
    """Group the single-wire ops of single-wire blocks and index each block into the table."""
    slotted = [(step, seqs) for step in steps if (seqs := _slot_sequences(step)) is not None]
    groups, where = _group_ops(op for _, seqs in slotted for part in seqs for seq in part for op in seq)
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
        _index_angles(g)
    for step, (seqs, batched_seqs) in slotted:
        step.grid = _grid(seqs, where, groups, offset, n_shared, n_batched)
        step.batched_grid = _grid(batched_seqs, where, groups, offset, n_shared, n_batched)
    similar: dict = {}
    for step in steps:
        if step.kind == "dense" and step.grid is not None and not step.grid[0]:
            similar.setdefault(tuple(step.grid[1].shape), []).append(step)
    shared_blocks = [(members, torch.stack([st.grid[1] for st in members]))
                     for members in similar.values() if len(members) > 1]
    return Plan(steps, list(shared + batched), n_shared, n_batched, shared_blocks, _tabulate_extra(steps))


def _group_ops(ops):
    """({(gate, adjoint, angle kinds): Group}, {id(op): (key, position in its group)})."""
    groups, where = {}, {}
    for op in ops:
        kinds = tuple(_angle_kind(a) for a in op.angles)
        key = (op.gate.name, op.adjoint, kinds)
        if key not in groups:
            groups[key] = Group(op.gate, op.adjoint, "input" in kinds, [], [])
        where[id(op)] = (key, len(groups[key].ops))
        groups[key].ops.append(op)
    return groups, where


def _index_angles(g):
    """Each parameter's (kind, index/values, scale) over the group's ops: one gather per call."""
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


def _tabulate_extra(steps):
    """Group the programs' diagonal and controlled slots like the single-wire ops (one matrix call
    per gate and angle kinds); each program step gets its slots' indices into the concatenated
    shared and per-sample values."""
    groups, where = _group_ops(op for step in steps if step.kind == "program" for op, _ in step.extra_slots)
    ordered = [g for g in groups.values() if not g.batched] + [g for g in groups.values() if g.batched]
    offset, seen = {}, {False: 0, True: 0}
    for g in ordered:
        _index_angles(g)
        offset[id(g)] = seen[g.batched]
        seen[g.batched] += len(g.ops)
    for step in steps:
        if step.kind == "program":
            idx = {False: [], True: []}
            for op, per_sample in step.extra_slots:
                key, i = where[id(op)]
                idx[per_sample].append(offset[id(groups[key])] + i)
            step.extra_index = tuple(torch.tensor(idx[b], dtype=torch.int64) for b in (False, True))
    return ordered


def perm_index(step, device, inverse=False):
    """The step's merged permutation over its span (or its inverse), shared by identical steps:
    a layered circuit repeats the same CNOT ring, and each copy would keep 2^span indices."""
    key = (str(device), inverse)
    if key not in step.index_cache:
        lo = step.wires[0]
        signature = tuple(_perm_signature(op, lo) for op in step.ops)
        step.index_cache[key] = _merged_permutation(signature, step.wires[-1] - lo + 1, str(device), inverse)
    return step.index_cache[key]


def _perm_signature(op, lo=0):
    """(local permutation, wires relative to ``lo``, adjoint): an op's key for _merged_permutation."""
    return tuple(op.gate.perm_fn(len(op.wires))), tuple(w - lo for w in op.wires), op.adjoint


@lru_cache(maxsize=64)
@lasting
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
    if step.position is None:         # canonical order (or a plan without layouts)
        return tuple(wires)
    return tuple(step.position[w] for w in wires)


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
        target = tuple(sorted(step.wires, key=lambda w: physical_wires(step, (w,))[0]))
    if target != step.wires:
        m = reorder_matrix(m, [step.wires.index(w) for w in target])
    return m, physical_wires(step, target)


def apply_dense_step(step, state, m, wires, n, undo=False):
    """Apply a dense step's oriented matrix ``m`` on physical ``wires`` (from
    :func:`oriented_matrix`); ``undo``: ``m`` is the adjoint, and a rotation runs backwards."""
    if step.mode == "in-place":
        return apply_matrix_unchecked(state, m, wires, n)
    return rotate(state, m, len(wires), to_back=(step.mode == "front-to-back") != undo, unitary=True)


def check_finite_weights(w: torch.Tensor) -> None:
    """ValueError naming the NaN / inf trainable angles: on the CPU only (elsewhere the check would
    wait for the device), and never inside a compiled graph."""
    if w.device.type == "cpu" and w.numel() and not torch.compiler.is_compiling() and inspectable(w) \
            and not bool(torch.isfinite(w.detach()).all()):
        bad = torch.nonzero(~torch.isfinite(w.detach())).flatten().tolist()
        raise ValueError(f"Circuit: trainable angle(s) at weights index {bad[:8]} are NaN or inf (a diverging "
                         f"optimizer? a smaller learning rate helps)")


def run_circuit(circuit, state, x=None, weights=None, fuse=None, tables=None, prepared=None):
    """The state after ``circuit``; ``state=None`` is |0…0⟩ (batch from ``x``, else 1).
    ``tables`` (:func:`single_wire_tables`) and ``prepared`` ({id(step): program_matrices}) may
    come from the caller (the adjoint method builds them once, with their graph)."""
    if fuse is None and tables is None and prepared is None and transforms_active():
        from . import engine_transforms
        if engine_transforms.folding_applies(circuit):
            return engine_transforms.run(circuit, state, x, circuit.weights if weights is None else weights)
    check_finite_weights(circuit.weights if weights is None else weights)
    plan = build_plan(circuit, fuse, layout=rotating_layout(circuit), zero_start=state is None,
                      local_programs=uses_programs(circuit, fuse))
    n = circuit.n_wires
    if tables is None:
        tables = single_wire_tables(circuit, plan, x, weights)
    extras = extra_slot_tables(circuit, plan, x, weights) if plan.extra_groups and not prepared else None
    built = shared_block_matrices(plan, tables)
    # True while ``state`` is the output of this run's last program pass, which nothing else has
    # seen: the next pass may overwrite it (never the caller's state, a prefix, another kernel's)
    owned = False
    for step in plan.steps:
        reused, owned = owned, False
        if step.kind == "prefix":
            state = prefix_state(circuit, step, x, tables)
        elif step.kind == "single":
            op = step.ops[0]
            state = apply_single(circuit, op, state, x, weights, wires=physical_wires(step, op.wires))
        elif step.kind == "perm":
            state = apply_perm_step(step, state, n)
        elif step.kind == "relayout":
            state = relayout(state, step.order, step.target)
        elif step.kind == "program":
            mats = prepared[id(step)] if prepared else program_matrices(circuit, step, tables, extras)
            state = programs.run(state, *mats, step.program, unitary=True, reuse=reused)  # gates' matrices
            owned = state.grad_fn is None and state.stride(0) != 0      # (not a graph's, not a broadcast row)
        else:
            m, wires = oriented_matrix(step, step_matrix(circuit, step, x, weights, tables, built))
            state = apply_dense_step(step, state, m, wires, n)
    if state.shape[0] > 1 and state.stride(0) == 0:
        state = state.contiguous()      # a shared product state broadcast over x's batch: own rows
    return state
