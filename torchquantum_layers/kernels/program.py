"""Local programs: a run of single-wire matrices and monomials applied row by row in cache.

A layered circuit (rotations on every wire, then a ring of CNOTs or CZs) is a long sequence of
2 × 2 matrices and monomials (permutations of the basis times phases). Applied one by one, each costs a pass over the state; fused into
≤ k-wire blocks, each block is a GEMM whose cost grows as 2^k per amplitude. A program keeps
each row of the state (one sample, 2^n amplitudes) in the core's cache and runs the whole
sequence there (program.c): one read and one write of the state, 2 complex multiply-adds per
amplitude per gate. Its backward pass un-computes each row gate by gate (the adjoint method
applied inside the cache), returning the input's gradient and every matrix's gradient; the
adjoint method's λ/ψ sweep is the same call. Under backprop, where the states at the ends of
groups of commuting gates fit in CHECKPOINT_BYTES, the forward pass keeps them and the backward
pass reads ψ there instead of un-computing it.

A register whose rows exceed MAX_ROW_BYTES runs as *tiled* programs (``Program.active``): each
acts on at most local_bits index bits, and every value of the others is a tile gathered into
cache, run and scattered back (the engine cuts a circuit into such passes).

Programs run on CPU states of complex64/complex128 through the native library; the kernel sees
only (matrix, bit) pairs and index tables. :func:`replay` runs the same program with torch
kernels: it is what double backward differentiates, and a reference for the tests.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..caching import lasting
from . import native
from .apply import apply_controlled_unchecked, apply_diagonal_unchecked, apply_matrix_unchecked

# A row (or tile) lives in cache while its program runs: the backward sweep holds four (ψ, g and
# a spare of each for permutations), which must fit the 1 MiB L2 of the machines measured.
MAX_ROW_BYTES = 2 ** 17
# Backprop keeps the state at each group end (a layer of rotations) when all of them take at
# most this much: its backward then reads ψ instead of un-computing it (two thirds of the
# multiply-adds). Deeper programs sweep back from the output, like the adjoint method.
CHECKPOINT_BYTES = 2 ** 28
MIN_GATES_PER_CHECKPOINT = 4


@dataclass(eq=False)
class Program:
    """``code``: (kind, a, b) int64 rows — kind 0: shared slot matrix b on index bit a; kind 2: the
    sample's own slot matrix b there; kinds 3 / 4: the same for a two-wire diagonal slot (its four
    entries in the slot's (2, 2) place) on the bits packed in a as (b0 << 8) | b1; kinds 5 / 6:
    a controlled slot matrix on bit a & 255, where the control bits a >> 8 are set; kind 1: the monomial ``new[j] = d[j] old[t[j]]``,
    t = ``perms[a:a + 2^bits]`` (``inverse``: the inverse tables), d = ``phases[b:b + 2^bits]``
    or 1 when b < 0 (permutations and parameter-free diagonal gates, merged)."""
    bits: int
    n_shared: int
    n_batched: int
    code: torch.Tensor
    perms: torch.Tensor
    inverse: torch.Tensor
    phases: torch.Tensor = None       # complex128; see phase_tables
    # the ascending physical index bits of the state the program acts on (None: all of them);
    # each value of the other bits is a tile of its own, gathered into cache (program.c)
    active: torch.Tensor = None
    # backprop's checkpoints: consecutive gates on distinct bits form a group (they commute);
    # group[k] is the first op of k's group, save[k] the checkpoint after op k at a group's end
    group: torch.Tensor = None
    save: torch.Tensor = None
    n_checkpoints: int = 0
    worth_checkpoints: bool = False

    def __post_init__(self):
        self._phase_cache = {}
        kinds = self.code[:, 0].tolist()
        group, save, count, bits, start = [], [], 0, set(), None
        for k, (kind, a, _) in enumerate(self.code.tolist()):
            if kind == 1:
                group.append(k)
                bits, start = set(), None
            else:
                if kind in (3, 4):
                    mine = {a >> 8, a & 255}
                else:
                    mine = {a & 255} | {b for b in range(self.bits) if (a >> 8) >> b & 1}
                if start is None or mine & bits:
                    start, bits = k, set()
                bits |= mine
                group.append(start)
        for k in range(len(group)):
            ends = kinds[k] != 1 and (k + 1 == len(group) or kinds[k + 1] == 1 or group[k + 1] != group[k])
            save.append(count if ends else -1)
            count += ends
        self.group = torch.tensor(group, dtype=torch.int64)
        self.save = torch.tensor(save, dtype=torch.int64)
        self.n_checkpoints = count
        # a checkpoint costs a copy of the row and saves one un-computing pass per gate of its
        # group: measured a loss with ~2 gates per group (CRY rings), a gain with ~10 (layers)
        n_gates = sum(1 for kind in kinds if kind != 1)
        self.worth_checkpoints = count > 0 and n_gates >= MIN_GATES_PER_CHECKPOINT * count

    @classmethod
    def build(cls, n, entries, active=None):
        """``entries``: ("gate", wire, per_sample), ("diag", (wire0, wire1), per_sample), ("cgate",
        (controls..., target), per_sample) or ("perm", index tensor over the 2^n basis[, phases or
        None]), in order; the shared and the per-sample slots are each numbered in order of
        appearance, 2 x 2 slots first. Wires and tables are the program's own (n of them); a tiled
        program maps them to the state's ascending physical bits ``active``."""
        code, tables, phases = [], [], []
        # diagonal and controlled slots are numbered after the 2 x 2 ones of their kind (shared /
        # per sample), in order of appearance
        count = [0, 0]
        extra_count = [sum(1 for e in entries if e[0] == "gate" and bool(e[2]) == b) for b in (False, True)]
        for entry in entries:
            if entry[0] == "gate":
                per_sample = int(entry[2])
                code.append((2 * per_sample, n - 1 - entry[1], count[per_sample]))
                count[per_sample] += 1
            elif entry[0] in ("diag", "cgate"):
                per_sample = int(entry[2])
                wires = entry[1]
                if entry[0] == "diag":
                    code.append((3 + per_sample, ((n - 1 - wires[0]) << 8) | (n - 1 - wires[1]),
                                 extra_count[per_sample]))
                else:
                    cmask = sum(1 << (n - 1 - w) for w in wires[:-1])
                    code.append((5 + per_sample, (cmask << 8) | (n - 1 - wires[-1]), extra_count[per_sample]))
                extra_count[per_sample] += 1
            else:
                d = entry[2] if len(entry) > 2 else None
                code.append((1, len(tables) * 2 ** n, -1 if d is None else len(phases) * 2 ** n))
                tables.append(entry[1])
                if d is not None:
                    phases.append(d.to(torch.complex128))
        idx = torch.cat(tables) if tables else torch.zeros(1, dtype=torch.int64)
        inverse = torch.cat([torch.argsort(t) for t in tables]) if tables else idx
        return cls(n, extra_count[0], extra_count[1], torch.tensor(code, dtype=torch.int64).reshape(-1, 3),
                   idx.to(torch.int32), inverse.to(torch.int32), torch.cat(phases) if phases else None,
                   None if active is None else torch.as_tensor(active, dtype=torch.int64))

    @lasting
    def phase_tables(self, dtype):
        """(forward, inverse) phase tables in ``dtype`` (None without phases): the inverse of
        new[j] = d[j] old[t[j]] is old[i] = conj(d[u[i]]) new[u[i]], u = t⁻¹."""
        if self.phases is None:
            return None, None
        if dtype not in self._phase_cache:
            n, fwd, inv = 2 ** self.bits, [], []
            for kind, a, b in self.code.tolist():
                if kind == 1 and b >= 0:
                    d = self.phases[b:b + n]
                    fwd.append(d)
                    inv.append(d[self.inverse[a:a + n].long()].conj())
            self._phase_cache[dtype] = (torch.cat(fwd).to(dtype), torch.cat(inv).to(dtype))
        return self._phase_cache[dtype]


def usable(dtype: torch.dtype, device) -> bool:
    """Whether programs run here: a CPU state of a native dtype, with the native library."""
    return torch.device(device).type == "cpu" and dtype in native._NATIVE_DTYPES and native.library() is not None


def local_bits(dtype: torch.dtype) -> int:
    """The most index bits one program acts on: its chunks (rows or tiles) fit in cache."""
    return (MAX_ROW_BYTES // dtype.itemsize).bit_length() - 1


def _spread(values, bits):
    """Each value's bits i moved to positions bits[i]."""
    out = torch.zeros_like(values)
    for i, bit in enumerate(bits):
        out |= ((values >> i) & 1) << bit
    return out


def _wire(program, bit, n_total):
    """The state's wire of the program's local bit."""
    return n_total - 1 - (bit if program.active is None else int(program.active[bit]))


def replay(state, shared, batched, program: Program) -> torch.Tensor:
    """The program by torch kernels (differentiable to any order)."""
    n, N = program.bits, state.shape[1]
    n_total = N.bit_length() - 1
    if program.active is not None:
        bits = program.active.tolist()
        j = torch.arange(N)
        local = sum(((j >> bit) & 1) << i for i, bit in enumerate(bits))     # each index's tile-local one
        rest = j & ~sum(1 << bit for bit in bits)
    for kind, a, b in program.code.tolist():
        if kind == 1:
            t = program.perms[a:a + 2 ** n].long()
            d = None if b < 0 else program.phases[b:b + 2 ** n].to(state.dtype)
            if program.active is not None:      # the local table on every tile
                t = rest | _spread(t, bits)[local]
                d = None if d is None else d[local]
            state = state[:, t]
            if d is not None:
                state = state * d
        else:
            m = shared[b] if kind in (0, 3, 5) else batched[:, b]
            if kind in (3, 4):
                wires = (_wire(program, a >> 8, n_total), _wire(program, a & 255, n_total))
                state = apply_diagonal_unchecked(state, m.reshape(*m.shape[:-2], 4), wires, n_total)
            elif kind in (5, 6):
                controls = tuple(_wire(program, bit, n_total) for bit in range(n) if (a >> 8) >> bit & 1)
                state = apply_controlled_unchecked(state, m, controls, (_wire(program, a & 255, n_total),), n_total)
            else:
                state = apply_matrix_unchecked(state, m, (_wire(program, a, n_total),), n_total)
    return state


def _operands(state, batched=None):
    """The state as the kernels read it: plain and contiguous, one row per sample of ``batched``
    (or a single row, which the forward kernel reads for every sample). A row broadcast over the
    batch (as from the prefix step) is run once, not copied."""
    if state.shape[0] > 1 and state.stride(0) == 0 and (batched is None or batched.shape[0] == state.shape[0]):
        state = state[:1]
    if batched is not None and state.shape[0] not in (1, batched.shape[0]):
        raise ValueError(f"program: a state of {state.shape[0]} rows against {batched.shape[0]} matrix sets")
    return state.resolve_conj().contiguous()


class _Run(torch.autograd.Function):
    @staticmethod
    def forward(ctx, state, shared, batched, program, unitary):
        rows = state.shape[0] if batched is None else batched.shape[0]
        size = program.n_checkpoints * rows * state.shape[1] * state.element_size()
        ckpt = None
        if 0 < size <= CHECKPOINT_BYTES and program.worth_checkpoints:
            ckpt = torch.empty(program.n_checkpoints, rows, state.shape[1], dtype=state.dtype)
        out = native.run_program(state, shared.detach(), None if batched is None else batched.detach(),
                                 program.code, program.perms, program.bits, ckpt, program.save,
                                 program.phase_tables(state.dtype)[0], program.active)
        ctx.program, ctx.checkpoints, ctx.unitary = program, ckpt, unitary
        ctx.save_for_backward(state, out, shared, batched)
        return out

    @staticmethod
    def backward(ctx, grad):
        state, out, shared, batched = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        if torch.is_grad_enabled():
            # create_graph (Hessians, gradgradcheck): differentiate the torch replay instead
            with torch.enable_grad():
                ins = [t for t, need in zip((state, shared, batched), needs) if need]
                grads = iter(torch.autograd.grad(replay(state, shared, batched, ctx.program), ins, grad,
                                                 create_graph=True, allow_unused=True))
            return tuple(next(grads) if need else None for need in needs) + (None, None)
        mats = (shared.detach(), None if batched is None else batched.detach())
        p = ctx.program
        if ctx.checkpoints is not None:
            g_in, g_shared, g_batched = native.program_grad_checkpointed(
                grad, *mats, p.code, p.inverse, p.bits, ctx.checkpoints, p.save, p.group,
                want_input_grad=needs[0], want_shared=needs[1], want_batched=needs[2],
                inverse_phases=p.phase_tables(grad.dtype)[1], active=p.active, unitary=ctx.unitary)
        else:
            _, g_in, g_shared, g_batched = native.program_grad(
                out, grad, *mats, p.code, p.inverse, p.bits, p.group, want_state=False, want_input_grad=needs[0],
                want_shared=needs[1], want_batched=needs[2], inverse_phases=p.phase_tables(grad.dtype)[1],
                active=p.active, unitary=ctx.unitary)
        if needs[0] and state.shape[0] != g_in.shape[0]:
            g_in = g_in.sum(0, keepdim=True)          # one row read by every sample
        return g_in, g_shared if needs[1] else None, g_batched if needs[2] else None, None, None


def run(state: torch.Tensor, shared: torch.Tensor, batched, program: Program, unitary: bool = False,
        reuse: bool = False) -> torch.Tensor:
    """``program`` on every row of ``state``: shared slot matrices ``shared`` (G, 2, 2), per-sample
    ones ``batched`` (B, Gb, 2, 2) or None; differentiable in all three. ``unitary``: the slot
    matrices are unitary functions of real angles (the engine's), so their gradients need only
    be right along the unitary directions (``native.program_grad``): a quarter of the Gram work
    less. ``reuse``: the caller owns ``state`` and needs it no more, so where nothing is
    differentiated the result may overwrite it (one state less in memory, no allocation)."""
    rows = state.shape[0]
    given = state
    state = _operands(state, batched)
    inputs = (state, shared) if batched is None else (state, shared, batched)
    if torch.is_grad_enabled() and any(t.requires_grad for t in inputs):
        out = _Run.apply(state, shared, batched, program, unitary)
    else:
        in_place = reuse and state is given and (batched is None or batched.shape[0] == rows)
        out = native.run_program(state, shared, batched, program.code, program.perms, program.bits,
                                 phases=program.phase_tables(state.dtype)[0], active=program.active,
                                 in_place=in_place)
    return out.expand(rows, -1) if out.shape[0] < rows else out


def sweep_back(psi, lam, shared, batched, program: Program, want_states=True, unitary=False):
    """The adjoint method's step over a program: (ψ and λ before it, or None where not
    ``want_states``; Σ λ_after ψ_before† per shared slot, the same per sample for the batched
    slots — where ``unitary``, only the part of them that reaches unitary slots' angles, see
    :func:`run`; None for slots without gradient) from ψ and λ after it."""
    return native.program_grad(psi.resolve_conj().contiguous(), lam.resolve_conj().contiguous(), shared.detach(),
                               None if batched is None else batched.detach(), program.code, program.inverse,
                               program.bits, program.group, want_state=want_states, want_input_grad=want_states,
                               want_shared=shared.requires_grad,
                               want_batched=batched is not None and batched.requires_grad,
                               inverse_phases=program.phase_tables(psi.dtype)[1], active=program.active,
                               unitary=unitary)
