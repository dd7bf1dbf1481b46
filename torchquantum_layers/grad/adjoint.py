"""Adjoint differentiation: forward keeps only the final state; backward un-computes it.

Backward folds the upstream gradient g (B, n_obs) into ONE bra per sample,
λ = Σ_k g_k O_k ψ, then sweeps the circuit once in reverse:

    ψ ← U_i† ψ ;  ∂L/∂θ_i = 2 Re⟨λ| ∂U_i/∂θ ψ⟩ ;  λ ← U_i† λ

Memory is a few states whatever the depth. Gates with a generator use μ = -i G U ψ; other
parametrised gates take ∂U/∂θ from the gate table by forward-mode AD of their matrix function.
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from ..caching import lasting
from ..circuit import Input, Param
from ..observables import diagonal_table, weighted_bra
from ..block_matrices import (extra_slot_tables, prefix_state, program_matrices, shared_block_matrices,
                              single_wire_tables, step_matrix)
from ..engine import (apply_dense_step, apply_perm_step, build_plan, oriented_matrix, physical_wires,
                      rotating_layout, run_circuit, uses_programs)
from ..kernels import program as programs
from ..kernels.layout import output_gram, relayout, rotation_gram
from ..kernels.apply import (_level_positions, apply_diagonal_unchecked, apply_matrix_unchecked,
                             apply_two_level_unchecked)

_GEN_CACHE: dict = {}
_BLOCKS_PER_BACKWARD = 64


@lasting
def _generator_tensor(gate, k, dtype, device):
    """("diagonal" | "two-level" | "dense", operand) for the gate's generator."""
    key = (gate.name, k, dtype, str(device))
    if key not in _GEN_CACHE:
        g = gate.generator(k)
        if gate.kind == "two-level":
            # a two-level gate's generator vanishes outside its pair of levels
            form, op = "two-level", g[np.ix_(gate.levels, gate.levels)]
        elif np.allclose(g, np.diag(np.diag(g))):
            form, op = "diagonal", np.diag(g)
        else:
            form, op = "dense", g
        _GEN_CACHE[key] = (form, torch.as_tensor(np.array(op), dtype=dtype, device=device))
    return _GEN_CACHE[key]


def apply_generator(gate, state, wires, n):
    """G ψ for the gate's generator on ``wires``."""
    form, g = _generator_tensor(gate, len(wires), state.dtype, state.device)
    if form == "diagonal":
        return apply_diagonal_unchecked(state, g, wires, n)
    if form == "two-level":
        return apply_two_level_unchecked(state, g, gate.levels, wires, n, keep_rest=False)
    return apply_matrix_unchecked(state, g, wires, n)


def derivative_states(circuit, op, angles, psi_before, psi_after, n, wires=None):
    """[∂U/∂θ_j ψ_before for each angle j] of one op (U† instead of U when op.adjoint);
    ``wires``: where the op's wires are in the state (default: op.wires)."""
    gate = op.gate
    wires = op.wires if wires is None else wires
    k = len(wires)
    if gate.generator_fn is not None and gate.n_params == 1:
        # U = exp(-iθG) (or its adjoint exp(+iθG)): ∂U/∂θ ψ = ∓i G U ψ
        g_psi = apply_generator(gate, psi_after, wires, n)
        return [g_psi * (1j if op.adjoint else -1j)]
    out = []
    data = circuit.data(op)
    for j in range(len(angles)):
        def mat(t, j=j):
            a = list(angles)
            a[j] = t
            return gate.matrix_fn(tuple(a), k, psi_before.dtype, data, psi_before.device)
        with warnings.catch_warnings():
            # torch.func.jvp trips torch's own torch.jit.script deprecation warning
            warnings.simplefilter("ignore", DeprecationWarning)
            _, dm = torch.func.jvp(mat, (angles[j],), (torch.ones_like(angles[j]),))
        if op.adjoint:
            dm = dm.conj().transpose(-1, -2)
        out.append(apply_matrix_unchecked(psi_before, dm, wires, n))
    return out


def _inner_real(lam, mu):
    """Re⟨λ|μ⟩ per sample."""
    return torch.linalg.vecdot(lam, mu, dim=-1).real


def outer_on_wires(lam, psi, wires, n, per_sample):
    """Σ over the other wires of λ ψ† restricted to sorted ``wires``: (d, d), or (B, d, d)."""
    B = lam.shape[0]
    k = len(wires)
    d = 2 ** k
    if wires[-1] - wires[0] + 1 == k:
        L, R = 2 ** wires[0], 2 ** (n - wires[-1] - 1)
        if R == 1 and not per_sample:
            a, b = lam.reshape(B * L, d), psi.reshape(B * L, d)
            return a.transpose(0, 1) @ b.conj()
        a, b = lam.reshape(B, L, d, R), psi.reshape(B, L, d, R).conj()
        if per_sample:
            return torch.einsum("bldr,bler->bde", a, b)
        return torch.einsum("bldr,bler->de", a, b)
    src = [w + 1 for w in wires]
    dst = list(range(n - k + 1, n + 1))

    def move(t):
        return t.reshape(B, *([2] * n)).movedim(src, dst).reshape(B, -1, d)
    g = torch.matmul(move(lam).transpose(1, 2), move(psi).conj())
    return g if per_sample else g.sum(0)


def block_gram(step, lam, psi, wires, n, per_sample):
    """Σ λ_out ψ_in† on a dense step's wires, in the orientation of its kernel: λ after the
    step, ψ before it (a rotating block finds its wires at opposite ends of the two)."""
    if step.mode == "in-place":
        return outer_on_wires(lam, psi, wires, n, per_sample)
    g = rotation_gram(lam, psi, len(wires), to_back=step.mode == "front-to-back")
    return g if per_sample else g.sum(0)


def _two_level_backward(circuit, op, psi, lam, x, weights, n, need_w, need_x, grad_w, grad_x, wires):
    """Un-compute ψ and λ through a two-level gate touching only its pair of levels.

    The gate's generator vanishes outside the pair, so ⟨λ| -iG ψ⟩ needs only the gathered
    pair amplitudes too: one gather of each state, three 2 x 2 products, two scatters.
    """
    gate = op.gate
    angles = circuit.angle_values(op, x, weights)
    B = psi.shape[0]
    idx = _level_positions(tuple(gate.levels), tuple(wires), n, str(psi.device))
    p_psi = psi.index_select(1, idx).reshape(B, 2, -1)
    p_lam = lam.index_select(1, idx).reshape(B, 2, -1)
    wants = [(isinstance(a, Param) and need_w) or (isinstance(a, Input) and need_x) for a in op.angles]
    if any(wants):
        _, g = _generator_tensor(gate, len(op.wires), psi.dtype, psi.device)
        mu = torch.matmul(g, p_psi) * (1j if op.adjoint else -1j)
        d = 2 * (p_lam.conj() * mu).real.sum((1, 2))
        a = op.angles[0]
        if isinstance(a, Param):
            grad_w[a.index] += a.scale * d.sum()
        else:
            grad_x[:, a.column] += a.scale * d
    block = gate.block_fn(angles, psi.dtype, psi.device)
    undo = block if op.adjoint else block.conj().transpose(-1, -2)
    psi = psi.index_copy(1, idx, torch.matmul(undo, p_psi).reshape(B, -1))
    lam = lam.index_copy(1, idx, torch.matmul(undo, p_lam).reshape(B, -1))
    return psi, lam


def _bra(psi, observables, g, apply_hamiltonian):
    """λ = Σ_k g_k O_k ψ per sample (the observables are Hermitian)."""
    lam = weighted_bra(psi, list(observables), g)
    if lam is not None:
        return lam
    with torch.no_grad():
        table = diagonal_table(observables, psi.shape[1].bit_length() - 1, psi.dtype, psi.device)
        if table is not None:       # all-Z observables: the bra is one diagonal, g @ table
            lam = psi * (g @ table)
        else:
            lam = None
            for k, obs in enumerate(observables):
                term = apply_hamiltonian(psi, obs) * g[:, k:k + 1]
                lam = term if lam is None else lam + term
        return lam.expand_as(psi) if lam.shape[0] != psi.shape[0] else lam


class AdjointExpval(torch.autograd.Function):
    """Expectations of ``observables`` after ``circuit``; gradients by the adjoint method.

    Backward walks the same fused plan as the forward pass in reverse. A fused block M is
    un-computed with M† and its gradient is the (d × d) matrix 2 Σ λ ψ_in† (one GEMM); the
    angles' gradients follow by autograd through the small block matrices only. Unfused
    parametrised gates use their generator (or ∂U/∂θ from the table). No state is stored.
    """

    @staticmethod
    def forward(ctx, circuit, observables, x, state, weights):
        from ..observables import apply_hamiltonian, expectation
        need_x, need_w = ctx.needs_input_grad[2] and x is not None, ctx.needs_input_grad[4]
        plan = build_plan(circuit, layout=rotating_layout(circuit), zero_start=state is None,
                          local_programs=uses_programs(circuit))
        # the small matrices are built once, recording their graph: the forward pass runs them
        # detached, the backward pass sends the slots' Gram products through them
        w_leaf = weights.detach().requires_grad_(need_w)
        x_leaf = x.detach().requires_grad_(need_x) if x is not None else None
        with torch.enable_grad():
            tables = single_wire_tables(circuit, plan, x_leaf, w_leaf)
            extras = extra_slot_tables(circuit, plan, x_leaf, w_leaf) if plan.extra_groups else None
            prepared = {id(step): program_matrices(circuit, step, tables, extras)
                        for step in plan.steps if step.kind == "program"}
        with torch.no_grad():
            psi = run_circuit(circuit, state, x, weights, tables=tables, prepared=prepared)
            values = expectation(psi, list(observables))
        ctx.circuit = circuit
        ctx.observables = observables
        ctx.apply_hamiltonian = apply_hamiltonian
        ctx.plan, ctx.leaves, ctx.tables, ctx.prepared = plan, (w_leaf, x_leaf), tables, prepared
        ctx.state_batch = None if state is None else state.shape[0]
        ctx.save_for_backward(psi, x, weights)
        return values

    @staticmethod
    def backward(ctx, grad_values):
        circuit, observables = ctx.circuit, ctx.observables
        psi, x, weights = ctx.saved_tensors
        need_x, need_state, need_w = ctx.needs_input_grad[2], ctx.needs_input_grad[3], ctx.needs_input_grad[4]
        need_x = need_x and x is not None
        n = circuit.n_wires
        plan = ctx.plan
        w_leaf, x_leaf = ctx.leaves
        for leaf in ctx.leaves:
            if leaf is not None:
                leaf.grad = None        # a second backward (gradcheck) starts from zero
        tables = ctx.tables
        lam = _bra(psi, observables, grad_values.to(psi.real.dtype), ctx.apply_hamiltonian)
        grad_w = torch.zeros_like(weights) if need_w else None
        grad_x = torch.zeros_like(x) if need_x else None
        with torch.enable_grad():
            built = shared_block_matrices(plan, tables)
        mats, mat_grads = [], []
        for index in range(len(plan.steps) - 1, -1, -1):
            step = plan.steps[index]
            if step.kind == "prefix":
                # the product state's gates: autograd through the small per-wire vectors
                if (need_w or need_x) and step.ops:
                    with torch.enable_grad():
                        start = prefix_state(circuit, step, x_leaf, tables)
                    if start.requires_grad:
                        mats.append(start)
                        mat_grads.append(2 * lam)
                continue
            if step.kind == "relayout":
                psi = relayout(psi, step.target, step.order)
                lam = relayout(lam, step.target, step.order)
                continue
            if step.kind == "program":
                shared, batched = ctx.prepared[id(step)]
                # ψ and λ before the program: for earlier steps, or for the input state's gradient
                earlier = need_state or any(st.kind != "prefix" or st.ops for st in plan.steps[:index])
                psi, lam, gram, gram_batched = programs.sweep_back(psi, lam, shared, batched, step.program,
                                                                   want_states=earlier, unitary=True)
                for m, gram in ((shared, gram), (batched, gram_batched)):
                    if gram is not None:
                        mats.append(m)
                        mat_grads.append(2 * gram)
                continue
            if step.kind == "perm":
                psi = apply_perm_step(step, psi, n, inverse=True)
                lam = apply_perm_step(step, lam, n, inverse=True)
                continue
            if step.kind == "single" and step.ops[0].gate.kind == "two-level":
                with torch.no_grad():
                    psi, lam = _two_level_backward(circuit, step.ops[0], psi, lam, x, weights, n,
                                                   need_w, need_x, grad_w, grad_x,
                                                   physical_wires(step, step.ops[0].wires))
                continue
            if step.kind == "single":
                op = step.ops[0]
                wires = physical_wires(step, op.wires)
                psi_after = psi
                with torch.no_grad():
                    angles = circuit.angle_values(op, x, weights)
                    psi = op.gate.apply(psi, angles, wires, n, circuit.data(op), not op.adjoint)
                    wants = [(isinstance(a, Param) and need_w) or (isinstance(a, Input) and need_x)
                             for a in op.angles]
                    if any(wants):
                        mus = derivative_states(circuit, op, angles, psi, psi_after, n, wires)
                        for a, want, mu in zip(op.angles, wants, mus):
                            if want:
                                d = 2 * _inner_real(lam, mu)
                                if isinstance(a, Param):
                                    grad_w[a.index] += a.scale * d.sum()
                                else:
                                    grad_x[:, a.column] += a.scale * d
                    lam = op.gate.apply(lam, angles, wires, n, circuit.data(op), not op.adjoint)
                continue
            with torch.enable_grad():
                m, wires = oriented_matrix(step, step_matrix(circuit, step, x_leaf, w_leaf, tables, built))
            with torch.no_grad():
                m_dag = m.detach().conj().transpose(-1, -2)
                from_output = m.requires_grad and step.mode == "front-to-back" and m.dim() == 2
                if from_output:
                    # before un-computing ψ: the Gram of λ and ψ after the block, one GEMM
                    gram = output_gram(lam, psi, m.detach(), len(wires))
                psi = apply_dense_step(step, psi, m_dag, wires, n, undo=True)
                if m.requires_grad:
                    mats.append(m)
                    if not from_output:
                        gram = block_gram(step, lam, psi, wires, n, m.dim() == 3)
                    mat_grads.append(2 * gram)
                    if len(mats) >= _BLOCKS_PER_BACKWARD:
                        # flush in chunks: keeps memory flat in depth (the shared tables' graph stays)
                        torch.autograd.backward(mats, mat_grads, retain_graph=True)
                        mats, mat_grads = [], []
                lam = apply_dense_step(step, lam, m_dag, wires, n, undo=True)
        if mats:
            # the tables' graph belongs to the forward pass: kept for a second backward (gradcheck)
            torch.autograd.backward(mats, mat_grads, retain_graph=True)
        if need_w and w_leaf.grad is not None:
            grad_w += w_leaf.grad
        if need_x and x_leaf.grad is not None:
            grad_x += x_leaf.grad
        grad_state = None
        if need_state:
            grad_state = 2 * lam
            if ctx.state_batch == 1 and lam.shape[0] > 1:
                grad_state = grad_state.sum(0, keepdim=True)
        return None, None, grad_x, grad_state, grad_w
