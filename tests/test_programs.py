"""Local programs (kernels/program.c through kernels/program.py) against dense NumPy operators.

Oracles: per-sample dense 2^n x 2^n matrices built from Kronecker products and permutation
matrices (tests/oracle.py); gradients from the analytic formulas (ψ_in gradient U† g, a slot's
gradient Σ g_after ψ_before†) evaluated with those dense matrices; torch.autograd.gradcheck.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import engine
from torchquantum_layers.engine import build_plan
from torchquantum_layers.kernels import program as P
from torchquantum_layers.program_forms import program_form

from . import oracle
from .conftest import REAL

HAS_CC = any(shutil.which(c) for c in ("cc", "gcc"))
pytestmark = pytest.mark.skipif(not HAS_CC, reason="no C compiler: programs are off "
                                "(test_native.test_status_matches_the_machine checks the build)")


def _np(t):
    return t.detach().cpu().numpy()


def _random_program(n, rng, length=9):
    """Entries for Program.build: ("gate", wire, per_sample), ("diag", (wire0, wire1), per_sample),
    ("cgate", (controls..., target), per_sample) or ("perm", table[, phases]), at least one of
    each kind where n and length allow."""
    entries = []
    for i in range(length):
        if n >= 2 and i % 8 == 4:
            w0, w1 = (int(w) for w in rng.choice(n, 2, replace=False))
            entries.append(("diag", (w0, w1), bool(i % 16 == 4)))
            continue
        if n >= 2 and i % 8 == 7:     # a controlled slot: one or two controls, then the target
            wires = tuple(int(w) for w in rng.choice(n, min(n, 2 + i % 2), replace=False))
            entries.append(("cgate", wires, bool(i % 16 == 7)))
            continue
        if i % 8 == 2:
            entries.append(("perm", torch.as_tensor(rng.permutation(2 ** n))))
        elif i % 8 == 6:        # a monomial: phases on the permuted amplitudes
            phases = torch.as_tensor(np.exp(1j * rng.uniform(0, 2 * np.pi, 2 ** n)))
            entries.append(("perm", torch.as_tensor(rng.permutation(2 ** n)), phases))
        else:
            entries.append(("gate", int(rng.integers(n)), bool(i % 3 == 0)))
    return entries


def _real_rotation(rng):
    """A real 2 x 2 orthogonal matrix (RY, H and their products: the kernels' real path)."""
    t = rng.uniform(0, 2 * np.pi)
    m = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]], dtype=complex)
    return m if rng.random() < 0.5 else m @ np.diag([1, -1])


def _slot_values(entries, per_sample, rng):
    """The slots of one kind, 2 x 2 ones first, then diagonal and controlled ones in order:
    random unitaries (every third 2 x 2 one real), and for a diagonal slot four random phases in
    the slot's (2, 2) place."""
    gates = [_real_rotation(rng) if i % 3 == 1 else oracle.random_unitary(2, rng)
             for i, e in enumerate(entries) if e[0] == "gate" and e[2] == per_sample]
    extra = [np.exp(1j * rng.uniform(0, 2 * np.pi, 4)).reshape(2, 2) if e[0] == "diag" else oracle.random_unitary(2, rng)
             for e in entries if e[0] in ("diag", "cgate") and e[2] == per_sample]
    return gates + extra


def _slot_matrices(entries, B, rng):
    shared = _slot_values(entries, False, rng)
    shared = np.stack(shared) if shared else np.zeros((0, 2, 2))
    batched = [_slot_values(entries, True, rng) for _ in range(B)]
    return shared, (np.stack([np.stack(row) for row in batched]) if batched[0] else None)


def _local_index(n, w0, w1):
    """For each basis index, 2·bit(wire0) + bit(wire1): a diagonal slot's entry."""
    i = np.arange(2 ** n)
    return 2 * ((i >> (n - 1 - w0)) & 1) + ((i >> (n - 1 - w1)) & 1)


def _dense_ops(entries, shared, batched, n, b):
    """The program's operators for sample b, in order, as dense matrices, with the slot each
    gate reads (("shared" | "batched", index) or None for a permutation)."""
    count = {ps: sum(1 for e in entries if e[0] == "gate" and e[2] == ps) for ps in (False, True)}
    diag_count = dict(count)
    out, count = [], {False: 0, True: 0}
    for e in entries:
        if e[0] in ("diag", "cgate"):
            _, wires, per_sample = e
            i = diag_count[per_sample]
            diag_count[per_sample] += 1
            u = batched[b, i] if per_sample else shared[i]
            kind = "batched" if per_sample else "shared"
            if e[0] == "diag":
                out.append((np.diag(u.reshape(4)[_local_index(n, *wires)]), (kind, i, wires)))
            else:
                out.append((oracle.controlled_on_wires(u, wires[:-1], wires[-1:], n), (kind, i, ("c",) + wires)))
        elif e[0] == "perm":
            t = e[1].numpy()
            m = np.zeros((2 ** n, 2 ** n), dtype=complex)
            m[np.arange(2 ** n), t] = 1 if len(e) == 2 else e[2].numpy()     # new[j] = d[j] old[t[j]]
            out.append((m, None))
        else:
            _, wire, per_sample = e
            i = count[per_sample]
            count[per_sample] += 1
            u = batched[b, i] if per_sample else shared[i]
            out.append((oracle.full_operator(u, [wire], n), ("batched" if per_sample else "shared", i, wire)))
    return out


def _random_case(n, B, seed, length, dtype, leading=()):
    """(rng, program, shared, batched, ψ) of a random program after the ``leading`` entries."""
    rng = np.random.default_rng(seed)
    entries = list(leading) + _random_program(n, rng, length=length)
    shared, batched = _tensors(*_slot_matrices(entries, B, rng), dtype)
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    return rng, P.Program.build(n, entries), shared, batched, psi


def _tensors(shared, batched, dtype):
    sh = torch.as_tensor(shared, dtype=dtype)
    ba = None if batched is None else torch.as_tensor(batched, dtype=dtype)
    return sh, ba


@pytest.mark.parametrize("n", [1, 2, 3, 6, 9])
def test_program_matches_dense_oracle(n, dtype, atol):
    B = 3
    rng = np.random.default_rng(n)
    entries = _random_program(n, rng)
    program = P.Program.build(n, entries)
    shared, batched = _slot_matrices(entries, B, rng)
    psi = oracle.random_state(n, rng, batch=B)
    out = P.run(torch.as_tensor(psi, dtype=dtype), *_tensors(shared, batched, dtype), program)
    for b in range(B):
        ref = psi[b]
        for m, _ in _dense_ops(entries, shared, batched, n, b):
            ref = m @ ref
        np.testing.assert_allclose(_np(out[b]), ref, atol=atol)


def _unitary_part(grads, slots):
    """What of a slot gradient G reaches the angles of a unitary slot U (dU = B U, B anti-Hermitian):
    ((G U† − U G†) / 2) U, per slot."""
    g, u = np.asarray(grads), np.asarray(slots)
    m = g @ np.swapaxes(u.conj(), -1, -2)
    return (m - np.swapaxes(m.conj(), -1, -2)) / 2 @ u


@pytest.mark.parametrize("n", [2, 3, 7])
@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoints", "uncompute"])
@pytest.mark.parametrize("unitary", [False, True], ids=["matrices", "unitary"])
def test_program_gradients_match_the_analytic_formulas(n, checkpoints, unitary, dtype, monkeypatch):
    """L = Re Σ conj(c) ψ_out: ∂L/∂ψ_in = U† c per sample; a slot's gradient is Σ g_after ψ_before†
    over the other wires (summed over samples for shared slots). Backward either reads the
    states kept at group ends or un-computes ψ from the output. Told the slots are unitary, the
    kernels may return less: only its part along unitary directions must agree."""
    monkeypatch.setattr(P, "CHECKPOINT_BYTES", 2 ** 28 if checkpoints else 0)
    monkeypatch.setattr(P, "MIN_GATES_PER_CHECKPOINT", 0)     # however small the groups
    B = 4
    rng = np.random.default_rng(10 + n)
    entries = _random_program(n, rng, length=11)
    program = P.Program.build(n, entries)
    shared, batched = _slot_matrices(entries, B, rng)
    psi = oracle.random_state(n, rng, batch=B)
    c = oracle.random_state(n, rng, batch=B)
    psi_t = torch.as_tensor(psi, dtype=dtype).requires_grad_()
    sh, ba = (t.requires_grad_() if t is not None else None for t in _tensors(shared, batched, dtype))
    assert program.worth_checkpoints
    out = P.run(psi_t, sh, ba, program, unitary=unitary)
    (torch.as_tensor(c, dtype=dtype).conj() * out).real.sum().backward()

    want_sh = np.zeros_like(shared)
    want_ba = None if batched is None else np.zeros_like(batched)
    for b in range(B):
        ops = _dense_ops(entries, shared, batched, n, b)
        states = [psi[b]]
        for m, _ in ops:
            states.append(m @ states[-1])
        g = c[b]
        for k in range(len(ops) - 1, -1, -1):
            m, slot = ops[k]
            if slot is not None:
                kind, i, wire = slot
                if isinstance(wire, tuple) and wire[0] == "c":     # controlled: the control-1 part
                    *controls, t = wire[1:]
                    idx = np.arange(2 ** n)
                    on = np.all([(idx >> (n - 1 - w)) & 1 for w in controls], axis=0) & ((idx >> (n - 1 - t)) & 1 == 0)
                    lo, hi = idx[on], idx[on] + (1 << (n - 1 - t))
                    before = states[k]
                    gram = np.array([[np.sum(g[r] * before[q].conj()) for q in (lo, hi)] for r in (lo, hi)])
                elif isinstance(wire, tuple):       # a diagonal slot: Σ g ψ_before* per entry
                    prod = g * states[k].conj()
                    gram = np.bincount(_local_index(n, *wire), weights=prod.real, minlength=4) \
                        + 1j * np.bincount(_local_index(n, *wire), weights=prod.imag, minlength=4)
                    gram = gram.reshape(2, 2)
                else:
                    before = states[k].reshape(2 ** wire, 2, -1)
                    gram = np.einsum("lar,lbr->ab", g.reshape(2 ** wire, 2, -1), before.conj())
                if kind == "shared":
                    want_sh[i] += gram
                else:
                    want_ba[b, i] += gram
            g = m.conj().T @ g
        tol = 2e-4 if dtype == torch.complex64 else 1e-10
        np.testing.assert_allclose(_np(psi_t.grad[b]), g, atol=tol)
    tol = 2e-4 * B if dtype == torch.complex64 else 1e-10
    part = _unitary_part if unitary else (lambda g, u: g)
    np.testing.assert_allclose(part(_np(sh.grad), shared), part(want_sh, shared), atol=tol)
    if ba is not None:
        np.testing.assert_allclose(part(_np(ba.grad), batched), part(want_ba, batched), atol=tol)
    if unitary and n == 7:      # the vector kernels did return less than the whole gradient
        assert not np.allclose(_np(sh.grad), want_sh, atol=tol)


def test_adjoint_sweep_recovers_the_input_state(dtype, atol):
    n, B = 8, 5
    rng, program, shared, batched, psi = _random_case(n, B, 3, 30, dtype)
    lam = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    out = P.run(psi, shared, batched, program)
    lam_out = P.run(lam, shared, batched, program)
    psi_in, lam_in, _, _ = P.sweep_back(out, lam_out, shared, batched, program)
    np.testing.assert_allclose(_np(psi_in), _np(psi), atol=10 * atol)
    np.testing.assert_allclose(_np(lam_in), _np(lam), atol=10 * atol)


@pytest.mark.parametrize("active", [(0, 2, 3, 5), (1, 2, 4, 5), (0, 1, 2, 4), (2, 3, 4, 5)])
@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoints", "uncompute"])
def test_a_tiled_program_acts_on_its_bits_of_a_larger_state(active, checkpoints, dtype, atol, monkeypatch):
    """A program on 4 of a 6-qubit state's index bits runs on every tile (value of the other two):
    the output is the dense local operators on the state's wires of those bits, the input's
    gradient their adjoint applied to the upstream one; the slots' gradients pass gradcheck
    (complex128), with and without checkpoints; the adjoint sweep gives back ψ and λ."""
    monkeypatch.setattr(P, "CHECKPOINT_BYTES", 2 ** 28 if checkpoints else 0)
    monkeypatch.setattr(P, "MIN_GATES_PER_CHECKPOINT", 0)
    n_local, n, B = 4, 6, 3
    rng = np.random.default_rng(sum(active) + 7 * checkpoints)
    entries = _random_program(n_local, rng, length=11)
    program = P.Program.build(n_local, entries, active)
    shared, batched = _slot_matrices(entries, B, rng)
    psi, c = oracle.random_state(n, rng, batch=B), oracle.random_state(n, rng, batch=B)
    wires = [n - 1 - active[n_local - 1 - k] for k in range(n_local)]     # local wire k's wire
    psi_t = torch.as_tensor(psi, dtype=dtype).requires_grad_()
    out = P.run(psi_t, *_tensors(shared, batched, dtype), program)
    (torch.as_tensor(c, dtype=dtype).conj() * out).real.sum().backward()
    for b in range(B):
        u = np.eye(2 ** n)
        for m, _ in _dense_ops(entries, shared, batched, n_local, b):
            u = oracle.full_operator(m, wires, n) @ u
        np.testing.assert_allclose(_np(out[b]), u @ psi[b], atol=atol)
        np.testing.assert_allclose(_np(psi_t.grad[b]), u.conj().T @ c[b], atol=10 * atol)
    sh, ba = _tensors(shared, batched, dtype)
    lam = torch.as_tensor(c, dtype=dtype)
    psi_in, lam_in, _, _ = P.sweep_back(P.run(psi_t.detach(), sh, ba, program), P.run(lam, sh, ba, program),
                                        sh, ba, program)
    np.testing.assert_allclose(_np(psi_in), psi, atol=10 * atol)
    np.testing.assert_allclose(_np(lam_in), c, atol=10 * atol)
    if dtype == torch.complex128:
        inputs = (psi_t.detach().requires_grad_(), sh.requires_grad_(), ba.requires_grad_())
        # the full Jacobian (~1000 real inputs) for one set of bits, random-direction vJps for the others
        assert torch.autograd.gradcheck(lambda s, a, q: P.run(s, a, q, program), inputs,
                                        fast_mode=active != (0, 2, 3, 5))


def test_wide_registers_run_as_passes_of_tiled_programs(monkeypatch):
    """Beyond the tile size the ops are scheduled into passes: each holds at most the tile's
    wires, always the last ones, and an op only overtakes ops on other wires."""
    monkeypatch.setattr(P, "MAX_ROW_BYTES", 2 ** 7)         # complex64 tiles of 4 bits
    n = 7
    c = _layered(n, 2, torch.complex64)
    c.rzz(0, 6, trainable=True)
    plan = build_plan(c, layout=True, zero_start=True, local_programs=True)
    passes = [s for s in plan.steps if s.kind == "program"]
    assert len(passes) > 1 and all(len(s.wires) <= 4 and {5, 6} <= set(s.wires) for s in passes)
    position = {id(op): i for i, op in enumerate(op for s in passes for op in s.ops)}
    assert sorted(position) == sorted(map(id, c.ops))
    for i, op in enumerate(c.ops):          # ops sharing a wire keep their order
        for later in c.ops[i + 1:]:
            if set(op.wires) & set(later.wires):
                assert position[id(op)] < position[id(later)]


@pytest.mark.parametrize("with_input", [False, True], ids=["shared", "per-sample"])
def test_passes_after_the_first_overwrite_their_own_output_when_nothing_is_differentiated(with_input, dtype, atol,
                                                                                         monkeypatch):
    """Without a graph, every pass of tiled programs but the first writes over the previous
    pass's output (one state less, no allocation): the result is the dense oracle's, the caller's
    state is untouched; with a graph every pass writes a new tensor."""
    from torchquantum_layers.kernels import native
    monkeypatch.setattr(P, "MAX_ROW_BYTES", 2 ** 7)         # tiles of 4 (complex64) / 3 bits: several passes
    n, B = 7, 3
    rng = np.random.default_rng(11 + with_input)
    c, ops = tql.Circuit(n, dtype=dtype), []
    x = torch.as_tensor(rng.uniform(-2, 2, size=(B, n)), dtype=REAL[dtype])
    for w in range(n):
        if with_input:
            c.ry(w, input=w)
            ops.append(("RY", (w,), (x[:, w].double().numpy(),)))
        t = float(rng.uniform(-3, 3))
        c.rx(w, t)
        ops.append(("RX", (w,), (t,)))
    for layer in range(2):
        for w in range(n):
            c.cnot(w, (w + 1) % n)
            ops.append(("CNOT", (w, (w + 1) % n), ()))
        for w in range(n):
            t = float(rng.uniform(-3, 3))
            c.rz(w, t)
            ops.append(("RZ", (w,), (t,)))
    assert sum(s.kind == "program" for s in build_plan(c, layout=True, zero_start=False,
                                                       local_programs=True).steps) > 2
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    before = psi.clone()
    flags = []
    real = native.run_program

    def spy(state, *args, in_place=False, **kwargs):
        flags.append(in_place)
        return real(state, *args, in_place=in_place, **kwargs)
    monkeypatch.setattr(native, "run_program", spy)
    with torch.no_grad():
        out = c(x if with_input else None, state=psi)
    assert flags[0] is False and len(flags) > 2 and all(flags[1:])
    np.testing.assert_allclose(_np(out), oracle.run_ops(ops, n, _np(psi)), atol=atol)
    assert torch.equal(psi, before)
    flags.clear()
    c.rz(0, trainable=True)
    out_graph = c(x if with_input else None, state=psi)
    assert out_graph.grad_fn is not None and flags and not any(flags)
    assert torch.equal(psi, before)


def test_a_program_run_in_place_is_the_program_run_out_of_place(dtype):
    from torchquantum_layers.kernels import native
    _, program, shared, batched, psi = _random_case(6, 3, 21, 17, dtype)
    args = (shared, batched, program.code, program.perms, program.bits)
    kw = dict(phases=program.phase_tables(dtype)[0])
    want = native.run_program(psi, *args, **kw)
    work = psi.clone()
    got = native.run_program(work, *args, **kw, in_place=True)
    assert got.data_ptr() == work.data_ptr()
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    with pytest.raises(ValueError, match="in place needs a contiguous state of 3 rows"):
        native.run_program(psi[:1].clone(), *args, **kw, in_place=True)      # one row read by 3 samples
    with pytest.raises(ValueError, match="contiguous: False"):
        native.run_program(psi.repeat(1, 2)[:, ::2], *args, **kw, in_place=True)


def _apply_on_wires(state, u, wires, n):
    """u (2^k x 2^k) on ``wires`` of (B, 2^n) states, by a tensor contraction (no 2^n matrix)."""
    B, k = state.shape[0], len(wires)
    t = np.moveaxis(state.reshape(B, *([2] * n)), [1 + w for w in wires], list(range(1, k + 1)))
    t = np.tensordot(u.reshape([2] * (2 * k)), t, axes=(list(range(k, 2 * k)), list(range(1, k + 1))))
    t = np.moveaxis(t, list(range(k)) + [k], list(range(1, k + 1)) + [0])     # back to (B, wires..., rest...)
    return np.moveaxis(t, list(range(1, k + 1)), [1 + w for w in wires]).reshape(B, -1)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=["c64", "c128"])
def test_a_register_of_several_tiles_and_megabytes_matches_a_contraction_oracle(dtype):
    """17 qubits: passes of tiled programs whose outputs (4 MiB and more) are written with
    streaming stores; the output and the input state's gradient U† c against tensor contractions."""
    n, B = 17, 4 if dtype == torch.complex64 else 2
    rng = np.random.default_rng(17)
    c = tql.Circuit(n, dtype=dtype)
    plan_ops = []
    for w in range(n):
        t0, t1 = rng.uniform(0, 2 * np.pi, 2)
        c.ry(w, float(t0))
        c.rz(w, float(t1))
        plan_ops += [(oracle.ry(t0), (w,)), (oracle.rz(t1), (w,))]
    for w in range(n):
        c.cnot(w, (w + 1) % n)
        plan_ops.append((oracle.gate_matrix("CNOT"), (w, (w + 1) % n)))
    t = float(rng.uniform(0, 2 * np.pi))
    c.cry(3, 15, t)
    plan_ops.append((oracle.gate_matrix("CRY", t), (3, 15)))
    plan = build_plan(c, layout=True, zero_start=False, local_programs=True)
    assert sum(s.kind == "program" for s in plan.steps) > 1
    psi = oracle.random_state(n, rng, batch=B)
    cvec = oracle.random_state(n, rng, batch=B)
    psi_t = torch.as_tensor(psi, dtype=dtype).requires_grad_()
    out = c(state=psi_t)
    (torch.as_tensor(cvec, dtype=dtype).conj() * out).real.sum().backward()
    want, back = psi, cvec
    for u, wires in plan_ops:
        want = _apply_on_wires(want, u, wires, n)
    for u, wires in reversed(plan_ops):
        back = _apply_on_wires(back, u.conj().T, wires, n)
    tol = 1e-4 if dtype == torch.complex64 else 1e-10
    np.testing.assert_allclose(_np(out), want, atol=tol)
    np.testing.assert_allclose(_np(psi_t.grad), back, atol=tol)


def test_replay_is_the_same_program(dtype, atol):
    _, program, shared, batched, psi = _random_case(5, 2, 4, 13, dtype)
    np.testing.assert_allclose(_np(P.replay(psi, shared, batched, program)),
                               _np(P.run(psi, shared, batched, program)), atol=atol)


def test_gradcheck_and_gradgradcheck_through_a_program():
    n, B = 3, 2
    rng = np.random.default_rng(5)
    entries = _random_program(n, rng, length=7)
    program = P.Program.build(n, entries)
    shared, batched = (t.requires_grad_() for t in _tensors(*_slot_matrices(entries, B, rng), torch.complex128))
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=torch.complex128).requires_grad_()

    def f(psi, shared, batched):
        return P.run(psi, shared, batched, program)
    assert torch.autograd.gradcheck(f, (psi, shared, batched))
    # double backward differentiates the torch replay of the same program
    assert torch.autograd.gradgradcheck(f, (psi, shared, batched))


def _oracle_from_zero(c, x=None, weights=None):
    """The dense oracle's states (B, 2^n) of circuit ``c`` from |0…0⟩ (inputs from ``x``; the
    circuit's weights unless ``weights``, float64 values, are given)."""
    n = c.n_wires
    w = _np(c.weights) if weights is None else weights
    xs = None if x is None else _np(x).astype(np.float64)
    B = 1 if x is None else xs.shape[0]
    zero = np.zeros(2 ** n)
    zero[0] = 1
    out = []
    for b in range(B):
        ops = []
        for op in c.ops:
            params = [a.scale * (w[a.index] if hasattr(a, "index") else xs[b, a.column]) if hasattr(a, "scale")
                      else float(a) for a in op.angles]
            gate = op.gate
            if gate.takes_data:                     # the matrix (or diagonal) the circuit holds
                u = _np(c.data(op)).astype(np.complex128)
                u = np.diag(u) if u.ndim == 1 else u
                ops.append((u.conj().T if op.adjoint else u, op.wires, []))
            elif gate.n_controls and gate.name not in oracle.SIGNATURES:   # CCRY, CSINGLEEXCITATION
                # the oracle's own controlled matrix of the oracle's target gate
                u = oracle.controlled_matrix(oracle.gate_matrix(gate.target.name, *params), gate.n_controls)
                ops.append((u.conj().T if op.adjoint else u, op.wires, []))
            elif op.adjoint:
                u = oracle.gate_matrix(gate.name, *params, n_wires=len(op.wires))
                ops.append((u.conj().T, op.wires, []))
            else:
                ops.append((op.gate.name, op.wires, params))
        out.append(oracle.run_ops(ops, n, zero[None])[0])
    return np.stack(out)


def _one_program(c):
    """The program a circuit starting from |0…0⟩ compiles to, asserting it is one (after an
    empty prefix step)."""
    plan = build_plan(c, layout=True, zero_start=True, local_programs=True)
    assert [s.kind for s in plan.steps] == ["prefix", "program"]
    return plan.steps[1].program


def _layered(n, layers, dtype):
    """RY angle encoding, then per layer an RZ and an RX on every wire and a ring of CNOTs."""
    c = tql.Circuit(n, dtype=dtype)
    tql.templates.angle_encoding(c)
    for _ in range(layers):
        for w in range(n):
            c.rz(w, trainable=True)
        tql.templates.basic_entangler(c, n_layers=1)
    return c


def test_a_layered_circuit_is_one_program_with_one_table_per_ring(dtype):
    n, layers = 5, 3
    c = _layered(n, layers, dtype)
    prog = _one_program(c)
    kinds = prog.code[:, 0].tolist()
    assert kinds.count(1) == layers                      # one merged permutation per CNOT ring
    assert prog.n_batched == n                           # the encoding: one per-sample slot per wire
    assert kinds[:n] == [2] * n                          # ... all first (the sweep can stop above them)
    assert prog.n_shared == n * layers                   # RZ·RX of each wire and layer: one slot
    plan = build_plan(c, layout=True, zero_start=True, local_programs=True)
    assert plan.steps[0].ops == []                       # no product state built in torch


def test_encoding_slots_take_a_gradient_only_from_the_inputs(dtype):
    """Per-sample slots hold only input gates, so without an input gradient they take none (and
    the sweeps stop above them)."""
    from torchquantum_layers.block_matrices import program_matrices, single_wire_tables
    n, B = 4, 3
    x = torch.rand(B, n, dtype=REAL[dtype])

    def slot_matrices(circuit, x):
        plan = build_plan(circuit, layout=True, zero_start=True, local_programs=True)
        step = plan.steps[1]
        w = circuit.weights.detach().requires_grad_(True)
        return program_matrices(circuit, step, single_wire_tables(circuit, plan, x, w), None)

    c = _layered(n, 2, dtype)
    shared, batched = slot_matrices(c, x)
    assert shared.requires_grad and not batched.requires_grad
    assert slot_matrices(c, x.requires_grad_(True))[1].requires_grad


def test_other_gates_split_programs_and_run_as_blocks(dtype, atol):
    n = 4
    c = tql.Circuit(n, dtype=dtype)
    for w in range(n):
        c.h(w)
    c.cnot(0, 1)
    c.qubitunitary((1, 2), oracle.random_unitary(4, np.random.default_rng(2)))   # dense: not a program op
    c.rz(3, trainable=True)
    c.ry(0, 0.4)
    c.cnot(2, 3)
    plan = build_plan(c, layout=True, zero_start=True, local_programs=True)
    kinds = [s.kind for s in plan.steps]
    assert kinds[0] == "prefix" and kinds[1] == "program" and kinds[-1] == "program" and len(kinds) >= 4
    assert all(k not in ("program", "prefix") for k in kinds[2:-1])
    np.testing.assert_allclose(_np(c()), _oracle_from_zero(c), atol=atol)


def test_programs_run_on_cpu_states_in_chunks_that_fit_in_cache():
    assert P.usable(torch.complex64, "cpu") and P.usable(torch.complex128, "cpu")
    assert not P.usable(torch.complex64, "cuda") and not P.usable(torch.float32, "cpu")
    assert P.local_bits(torch.complex64) == 14 and P.local_bits(torch.complex128) == 13


def test_the_engine_switch_turns_programs_off(monkeypatch):
    c = _layered(4, 1, torch.complex64)
    assert engine.uses_programs(c)
    monkeypatch.setattr(engine, "USE_PROGRAMS", False)
    assert not engine.uses_programs(c)
    assert not engine.uses_programs(tql.Circuit(4, fuse=False))


@pytest.mark.parametrize("wanted", [(True, True, True, True), (False, False, True, False),
                                    (False, False, False, True), (False, True, False, False),
                                    (True, False, True, True)])
def test_a_partial_sweep_returns_what_the_full_one_does(wanted, dtype):
    """Asked for fewer outputs (no input state, no input gradient, some slots without gradient),
    the sweep stops or skips work; what it returns must equal the full sweep's (which the
    analytic-formula test checks)."""
    from torchquantum_layers.kernels import native
    n, B = 6, 3
    rng, program, shared, batched, psi = _random_case(n, B, 6, 10, dtype, [("gate", w, True) for w in range(n)])
    g = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    args = (psi, g, shared, batched, program.code, program.inverse, n, program.group)
    full = native.program_grad(*args, want_state=True)
    part = native.program_grad(*args, *wanted)
    for want, a, b in zip(wanted, full, part):
        if want:
            np.testing.assert_allclose(_np(b), _np(a), atol=1e-5 if dtype == torch.complex64 else 1e-12)
        else:
            assert b is None


def test_groups_of_commuting_gates_end_in_checkpoints():
    """Gates on distinct bits between permutations form one group; a repeated bit or a
    permutation starts the next; each group's last op keeps a checkpoint."""
    n = 3
    perm = torch.arange(2 ** n).flip(0)
    entries = [("gate", 0, False), ("gate", 1, True), ("gate", 0, False), ("perm", perm), ("gate", 2, False)]
    program = P.Program.build(n, entries)
    assert program.group.tolist() == [0, 0, 2, 3, 4]
    assert program.save.tolist() == [-1, 0, 1, -1, 2]
    assert program.n_checkpoints == 3
    assert not program.worth_checkpoints             # 4 gates for 3 checkpoints: un-compute instead


def test_fixed_diagonal_gates_merge_into_the_permutation_tables(dtype, atol):
    """CZ / CCZ rings between rotation layers: one program, one monomial table per ring (the
    permutation part the identity, the phases ±1), against the dense oracle."""
    n = 4
    c = tql.Circuit(n, dtype=dtype)
    for _ in range(2):
        for w in range(n):
            c.ry(w, trainable=True)
        for w in range(n - 1):
            c.cz(w, w + 1)
        c.ccz(0, 2, 3)
        c.cnot(3, 0)
    prog = _one_program(c)
    assert prog.code[:, 0].tolist().count(1) == 2 and prog.phases is not None
    np.testing.assert_allclose(_np(c()), _oracle_from_zero(c), atol=atol)


def test_an_iqp_feature_map_is_one_program(dtype, atol):
    """H, RZ(x_i), RZZ(x_i x_j) (per-sample diagonal slots) and trainable CP / CRZ on reversed
    wire pairs: one program, against the dense oracle per sample."""
    n, B = 4, 3
    c = tql.Circuit(n, dtype=dtype)
    tql.templates.iqp_encoding(c)
    c.cp(3, 1, trainable=True)
    c.crz(2, 0, trainable=True)
    program = _one_program(c)
    assert sorted(program.code[:, 0].tolist()).count(4) == n * (n - 1) // 2
    rng = np.random.default_rng(8)
    x = tql.templates.iqp_features(torch.as_tensor(rng.uniform(-1, 1, (B, n)), dtype=REAL[dtype]))
    np.testing.assert_allclose(_np(c(x)), _oracle_from_zero(c, x), atol=atol)


def test_controlled_rotations_are_program_slots(dtype, atol):
    """CRY entanglers (and a doubly controlled RY, a CH): one program, against the oracle."""
    n = 4
    c = tql.Circuit(n, dtype=dtype)
    tql.templates.hardware_efficient(c, n_layers=2, entangler="CRY", pattern="ring")
    c.ch(0, 3)
    c.add(tql.gates.controlled(tql.gates.RY, 2), (3, 1, 0), trainable=True)
    program = _one_program(c)
    assert any(k in (5, 6) for k in program.code[:, 0].tolist())
    np.testing.assert_allclose(_np(c()), _oracle_from_zero(c), atol=atol)


def _pauli_rotation_circuit(n, dtype):
    """RY layers with RXX, RYY and RZX entanglers (trainable, reversed pairs, one angle from the
    input, one adjoint), between rotation layers."""
    c = tql.Circuit(n, dtype=dtype)
    tql.templates.angle_encoding(c, rotation="Y")
    for layer in range(2):
        for w in range(n):
            c.ry(w, trainable=True)
        c.rxx(0, 1, trainable=True)
        c.rxx(1, 2, trainable=True)          # chains: the basis changes between them cancel
        c.ryy(2, 1, trainable=True)
        c.ryy(1, 0, trainable=True)
        c.rzx(3, 2, trainable=True)
        c.rzx(1, 3, input=layer, scale=0.7)
    c.append(tql.Circuit(n, dtype=dtype).ryy(0, 3, trainable=True).rz(0, 0.3).inverse())
    return c


def test_pauli_rotations_are_diagonal_slots_between_the_rotations(dtype, atol):
    """RXX / RYY / RZX run as RZZ slots in a rotated basis (gates.Gate.diagonal_form): the whole
    circuit is one program, whose basis changes merge into the rotations' slots; the state
    against the dense oracle per sample."""
    n, B = 4, 3
    c = _pauli_rotation_circuit(n, dtype)
    program = _one_program(c)
    kinds = program.code[:, 0].tolist()
    assert kinds.count(3) == 11 and kinds.count(4) == 2
    x = torch.rand(B, n, dtype=REAL[dtype])
    np.testing.assert_allclose(_np(c(x)), _oracle_from_zero(c, x), atol=atol)


def test_basis_changes_between_chained_pauli_rotations_cancel():
    """RXX on (0, 1), (1, 2), (2, 3): H on each end wire before and after, one H pair on each
    inner wire (the two that would meet between the links cancel); RYY's S† H likewise."""
    for gate, per_link in (("rxx", ("H",)), ("ryy", ("SDG", "H"))):
        c = tql.Circuit(4)
        for w in range(3):
            getattr(c, gate)(w, w + 1, 0.3)
        ops = program_form(c.ops)
        assert [op.gate.name for op in ops].count("RZZ") == 3
        for w in range(4):
            assert [op.gate.name for op in ops if op.wires == (w,)] == list(per_link) + list(reversed(per_link))


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])
def test_pauli_rotation_gradients_match_the_oracle_parameter_shift(diff_method, dtype):
    """Each weight's gradient of Σ⟨Z_w⟩ against the two-term shift rule evaluated with the dense
    oracle (every weight enters one Pauli rotation, eigenvalues ±1/2)."""
    n, B = 4, 2
    c = _pauli_rotation_circuit(n, dtype)
    x = torch.rand(B, n, dtype=REAL[dtype])
    obs = [tql.PauliString(f"Z{w}") for w in range(n)]
    tql.expval(c, obs, x=x, diff_method=diff_method).sum().backward()
    z = np.array([sum(1 - 2 * ((i >> (n - 1 - w)) & 1) for w in range(n)) for i in range(2 ** n)])

    def energy(weights):
        with torch.no_grad():
            c.weights.copy_(torch.as_tensor(weights))
        return float((np.abs(_oracle_from_zero(c, x)) ** 2 @ z).sum())
    w0 = _np(c.weights).copy()
    want = []
    for k in range(len(w0)):
        plus, minus = w0.copy(), w0.copy()
        plus[k] += np.pi / 2
        minus[k] -= np.pi / 2
        want.append((energy(plus) - energy(minus)) / 2)
    tol = 2e-4 if dtype == torch.complex64 else 1e-9
    np.testing.assert_allclose(_np(c.weights.grad), want, atol=tol)


def _excitation_circuit(n, dtype):
    """Hartree-Fock, then Givens rotations on scattered and reversed wires: single and double
    excitations (trainable, one angle from the input, adjoints) and their controlled forms,
    between rotations."""
    c = tql.Circuit(n, dtype=dtype)
    c.x(0)
    c.x(1)
    c.ry(2, trainable=True)
    c.singleexcitation(1, 3, trainable=True)
    c.singleexcitation(4, 0, trainable=True)
    c.doubleexcitation(0, 1, 3, 4, trainable=True)
    c.doubleexcitation(5, 2, 1, 0, input=0)
    c.add(tql.gates.controlled(tql.gates.SINGLE_EXCITATION, 1), (5, 2, 0), trainable=True)
    c.add(tql.gates.controlled(tql.gates.DOUBLE_EXCITATION, 1), (1, 4, 0, 2, 5), trainable=True)
    c.append(tql.Circuit(n, dtype=dtype).singleexcitation(2, 5, trainable=True)
             .doubleexcitation(3, 5, 0, 4, trainable=True).inverse())
    c.rz(3, trainable=True)
    return c


def test_excitations_are_controlled_slots_between_permutations(dtype, atol):
    """Two-level gates run as the block controlled by the other wires between permutations that
    bring the two levels there (program_forms): one program; states against the oracle."""
    n, B = 6, 3
    c = _excitation_circuit(n, dtype)
    with torch.no_grad():
        c.weights.uniform_(-np.pi, np.pi)
    program = _one_program(c)
    kinds = program.code[:, 0].tolist()
    assert kinds.count(5) == 7 and kinds.count(6) == 1
    x = torch.rand(B, n, dtype=REAL[dtype])
    np.testing.assert_allclose(_np(c(x)), _oracle_from_zero(c, x), atol=atol)


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])
def test_excitation_gradients_match_the_oracle_finite_differences(diff_method, dtype):
    """The gradient of ⟨Z0 Z3 + X1 X4⟩ through the excitations against central differences of
    the dense oracle's energy (complex128 oracle: ~1e-10 error at h = 1e-5)."""
    n, B = 6, 2
    c = _excitation_circuit(n, dtype)
    with torch.no_grad():
        c.weights.uniform_(-np.pi, np.pi)
    x = torch.rand(B, n, dtype=REAL[dtype])
    ham = tql.Hamiltonian([(1.0, "Z0 Z3"), (1.0, "X1 X4")])
    tql.expval(c, ham, x=x, diff_method=diff_method).sum().backward()
    dense = oracle.kron(*[oracle.Z if w in (0, 3) else oracle.I2 for w in range(n)]) + \
        oracle.kron(*[oracle.X if w in (1, 4) else oracle.I2 for w in range(n)])

    def energy(weights):
        states = _oracle_from_zero(c, x, weights)
        return float(np.einsum("bi,ij,bj->", states.conj(), dense, states).real)
    w0 = _np(c.weights).astype(np.float64)
    h = 1e-5
    want = [(energy(w0 + h * e) - energy(w0 - h * e)) / (2 * h) for e in np.eye(len(w0))]
    tol = 2e-4 if dtype == torch.complex64 else 1e-7
    np.testing.assert_allclose(_np(c.weights.grad), want, atol=tol)


def test_two_level_permutations_take_the_levels_to_the_controlled_pair():
    """σ of each two-level gate: a permutation taking its two levels to (all ones but the
    target, all ones), in the block's order."""
    from torchquantum_layers.program_forms import _two_level_parts
    for gate in (tql.gates.SINGLE_EXCITATION, tql.gates.DOUBLE_EXCITATION,
                 tql.gates.controlled(tql.gates.SINGLE_EXCITATION, 2)):
        k = gate.n_wires
        sigma, block, target = _two_level_parts(gate, k)
        table = sigma.perm_fn(k)                       # new[i] = old[table[i]]
        assert sorted(table) == list(range(2 ** k))
        full, bit = 2 ** k - 1, 1 << (k - 1 - target)
        assert table[full & ~bit] == gate.levels[0] and table[full] == gate.levels[1]
        assert block.n_controls == k - 1 and block.target.n_wires == 1


@pytest.mark.parametrize("levels", [(3, 1), (2, 3), (0, 3), (3, 0), (1, 2)])
def test_any_two_levels_run_in_a_program(levels, dtype, atol):
    """Givens rotations on every kind of level pair (one of them all ones, so σ is a 3-cycle, not
    an involution), forward and adjoint, against the oracle's Givens matrices."""
    import dataclasses
    from torchquantum_layers import gates
    a, b = levels
    gate = dataclasses.replace(gates.SINGLE_EXCITATION, name=f"GIVENS{a}{b}", levels=levels,
                               matrix_fn=lambda p, k, dt, data, dev: gates._givens(p, k, dt, data, dev, a, b),
                               generator_fn=lambda k: gates._givens_generator(4, a, b))
    tql.checks.assert_valid_gate(gate, dtype=dtype)
    n, rng = 3, np.random.default_rng(3)
    angles = rng.uniform(-np.pi, np.pi, 7)
    c = tql.Circuit(n, dtype=dtype)
    want = []
    for w in range(n):
        c.ry(w, float(angles[w]))
        want.append(("RY", (w,), [angles[w]]))
    c.add(gate, (2, 0), float(angles[3]))
    want.append((oracle.givens(angles[3], 4, a, b), (2, 0), []))
    c.append(tql.Circuit(n, dtype=dtype).add(gate, (1, 2), float(angles[4])).inverse())
    want.append((oracle.givens(angles[4], 4, a, b).conj().T, (1, 2), []))
    c.rx(1, float(angles[5]))
    want.append(("RX", (1,), [angles[5]]))
    _one_program(c)
    zero = np.zeros((1, 2 ** n))
    zero[0, 0] = 1
    np.testing.assert_allclose(_np(c()), oracle.run_ops(want, n, zero), atol=atol)


def test_fixed_monomial_gates_merge_into_the_permutation_tables(dtype, atol):
    """ISWAP and a controlled ISWAP (one entry per row of their matrices), forward and adjoint,
    between rotations: one program with no slot for them; against the oracle."""
    n = 4
    c = tql.Circuit(n, dtype=dtype)
    for w in range(n):
        c.ry(w, trainable=True)
    c.iswap(2, 0)
    c.add(tql.gates.controlled(tql.gates.ISWAP, 1), (1, 3, 0))
    c.append(tql.Circuit(n, dtype=dtype).iswap(1, 3).add(tql.gates.controlled(tql.gates.ISWAP, 1), (0, 2, 3))
             .inverse())
    for w in range(n):
        c.rx(w, trainable=True)
    prog = _one_program(c)
    assert prog.code[:, 0].tolist().count(1) == 1 and prog.phases is not None
    np.testing.assert_allclose(_np(c()), _oracle_from_zero(c), atol=atol)


def test_multi_rz_is_a_rotation_between_parity_permutations(dtype, atol):
    """MultiRZ on 3-5 scattered wires (fixed, trainable, from the input, adjoint): one program
    whose only slots are the rotations; against the oracle's exp(-iθ/2 Z…Z)."""
    n, B = 5, 3
    c = tql.Circuit(n, dtype=dtype)
    for w in range(n):
        c.ry(w, trainable=True)
    c.multirz((0, 2, 4), 0.7)
    c.multirz((3, 1, 0, 4), input=0)
    c.multirz((4, 3, 2, 1, 0), trainable=True)
    c.append(tql.Circuit(n, dtype=dtype).multirz((4, 1, 2), trainable=True).inverse())
    program = _one_program(c)
    kinds = program.code[:, 0].tolist()
    assert all(k in (0, 1, 2) for k in kinds)
    x = torch.rand(B, n, dtype=REAL[dtype])
    np.testing.assert_allclose(_np(c(x)), _oracle_from_zero(c, x), atol=atol)


def test_controlled_diagonals_beyond_two_wires_are_controlled_slots(dtype, atol):
    """CCRZ, a triply controlled P and a CCRZ from the input, adjoint too: controlled slots of one
    program; against the oracle's controlled matrices."""
    n, B = 5, 3
    c = tql.Circuit(n, dtype=dtype)
    for w in range(n):
        c.ry(w, trainable=True)
    c.add(tql.gates.controlled(tql.gates.RZ, 2), (4, 1, 2), trainable=True)
    c.add(tql.gates.controlled(tql.gates.P, 3), (0, 3, 2, 4), trainable=True)
    c.add(tql.gates.controlled(tql.gates.RZ, 2), (2, 0, 3), input=1)
    c.append(tql.Circuit(n, dtype=dtype).add(tql.gates.controlled(tql.gates.P, 2), (1, 4, 0), trainable=True)
             .inverse())
    c.cp(1, 0, trainable=True)                  # two wires: still a diagonal slot
    kinds = _one_program(c).code[:, 0].tolist()
    assert kinds.count(5) == 3 and kinds.count(6) == 1 and kinds.count(3) == 1
    with torch.no_grad():
        c.weights.uniform_(-np.pi, np.pi)
    x = torch.rand(B, n, dtype=REAL[dtype])
    np.testing.assert_allclose(_np(c(x)), _oracle_from_zero(c, x), atol=atol)


def test_a_state_whose_rows_do_not_match_the_per_sample_matrices_is_refused():
    n = 3
    rng, program, shared, batched, _ = _random_case(n, 4, 9, 7, torch.complex64)
    assert batched is not None and batched.shape[0] == 4
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=3), dtype=torch.complex64)
    with pytest.raises(ValueError, match="a state of 3 rows against 4 matrix sets"):
        P.run(psi, shared, batched, program)
