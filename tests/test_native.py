"""The optional native CPU kernels (kernels/native.c) against NumPy and the torch kernels."""
from __future__ import annotations

import itertools
import platform
import shutil

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import gates as G
from torchquantum_layers.kernels import apply as A
from torchquantum_layers.kernels import native

from . import oracle

HAS_CC = any(shutil.which(c) for c in ("cc", "gcc"))


def _np(t):
    return t.detach().cpu().numpy()


def test_status_matches_the_machine():
    """Built and loaded wherever a C compiler exists (it does on the CI machines)."""
    if HAS_CC:
        assert native.library() is not None and native.status().startswith("in use"), native.status()
    else:
        assert native.library() is None and "compiler" in native.status()


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("TQL_NATIVE", "0")
    lib, reason = native._load()
    assert lib is None and "TQL_NATIVE=0" in reason


needs_native = pytest.mark.skipif(not HAS_CC, reason="no C compiler: the torch kernels run instead "
                                  "(test_status_matches_the_machine checks that)")


@needs_native
@pytest.mark.parametrize("wire", [0, 5, 8, 9, 10, 11])   # the last two: bits inside a register
@pytest.mark.parametrize("per_sample", [False, True, "real"])
def test_apply_2x2_matches_oracle(wire, per_sample, dtype, atol):
    n, B = 12, 2
    rng = np.random.default_rng(wire)
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    if per_sample == "real":        # RY-like: the kernels' real path
        u = oracle.ry(rng.uniform(0, 2 * np.pi)).astype(complex)
    else:
        u = oracle.random_unitaries(B, 2, rng) if per_sample else oracle.random_unitary(2, rng)
    out = native.apply_2x2(psi, torch.as_tensor(u, dtype=dtype), wire, n)
    assert out is not None
    # a NumPy contraction of the (L, 2, R) view (oracle.apply_dense's 4096 x 4096 matrix took ~1 s a case)
    view = _np(psi).reshape(B, 2 ** wire, 2, 2 ** (n - wire - 1))
    want = np.einsum("bij,bljr->blir", np.broadcast_to(u, (B, 2, 2)), view).reshape(B, -1)
    np.testing.assert_allclose(_np(out), want, atol=atol)


@needs_native
@pytest.mark.parametrize("per_sample", [False, True])
def test_apply_2x2_split_among_threads(per_sample, dtype, atol):
    """16 samples of 12 qubits: the pairs (shared matrix) or the samples (one matrix each) are
    split among two threads; against a NumPy contraction of each sample's (L, 2, R) view."""
    n, B = 12, 16
    rng = np.random.default_rng(7)
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    u = oracle.random_unitaries(B, 2, rng) if per_sample else np.repeat(oracle.random_unitary(2, rng)[None], B, 0)
    for wire in (0, 6, 9, 11):
        with tql.runtime.torch_threads(2):
            out = native.apply_2x2(psi, torch.as_tensor(u if per_sample else u[0], dtype=dtype), wire, n)
        assert out is not None
        view = _np(psi).reshape(B, 2 ** wire, 2, 2 ** (n - wire - 1))
        want = np.einsum("bij,bljr->blir", u, view).reshape(B, -1)
        np.testing.assert_allclose(_np(out), want, atol=atol)


@needs_native
@pytest.mark.parametrize("target,controls", [
    (0, (12,)), (12, (0,)), (11, (12,)), (12, (11,)), (10, (11, 12)), (5, (10,)), (9, (4,)), (12, (10,)),
    (3, (0, 7, 11)), (10, (9, 12)), (0, tuple(range(1, 13)))])
@pytest.mark.parametrize("per_sample", [False, True, "real"])
def test_controlled_2x2_matches_numpy(target, controls, per_sample, dtype, atol):
    """Controls inside a register (its lanes get the identity), on the register bit that splits a
    two-register step, and above it (whole registers copied); targets above and inside the
    register; two threads splitting the pairs or the samples (4 samples of 2^13). Reference: the
    gate on every (L, 2, R) pair by einsum, kept where the index has every control bit."""
    n, B = 13, 4
    rng = np.random.default_rng(target + 13 * len(controls))
    psi = oracle.random_state(n, rng, batch=B)
    if per_sample == "real":
        u = np.repeat(oracle.ry(rng.uniform(0, 2 * np.pi)).astype(complex)[None], B, 0)
    else:
        u = oracle.random_unitaries(B, 2, rng) if per_sample else np.repeat(oracle.random_unitary(2, rng)[None], B, 0)
    gated = np.einsum("bij,bljr->blir", u, psi.reshape(B, 2 ** target, 2, -1)).reshape(B, -1)
    index = np.arange(2 ** n)
    on = np.all([(index >> (n - 1 - c)) & 1 for c in controls], axis=0)
    want = np.where(on, gated, psi)
    matrix = torch.as_tensor(u if per_sample is True else u[0], dtype=dtype)
    for threads in (1, 2):
        with tql.runtime.torch_threads(threads):
            out = native.apply_2x2(torch.as_tensor(psi, dtype=dtype), matrix, target, n, controls)
        assert out is not None
        np.testing.assert_allclose(_np(out), want, atol=atol)


@needs_native
@pytest.mark.parametrize("wires", [(0, 12), (3, 4), (2, 9), (0, 11), (4, 11), (5, 12), (11, 12), (10, 12)])
@pytest.mark.parametrize("per_sample", [False, True])
def test_4x4_on_two_wires_matches_numpy(wires, per_sample, dtype, atol):
    """Both wires above the register bits (four whole registers), the lower one inside a register
    (complex64: bits 0 and 1, complex128: bit 0) and both inside (complex64, the last two wires);
    4 samples of 2^13, one and two threads, shared and per-sample matrices. Reference: an einsum
    over the (L, 2, M, 2, R) view."""
    n, B = 13, 4
    a, b = wires
    rng = np.random.default_rng(a + 17 * b)
    psi = oracle.random_state(n, rng, batch=B)
    u = oracle.random_unitaries(B, 4, rng) if per_sample else np.repeat(oracle.random_unitary(4, rng)[None], B, 0)
    view = psi.reshape(B, 2 ** a, 2, 2 ** (b - a - 1), 2, 2 ** (n - b - 1))
    want = np.einsum("bxyuv,blumvr->blxmyr", u.reshape(B, 2, 2, 2, 2), view).reshape(B, -1)
    matrix = torch.as_tensor(u if per_sample else u[0], dtype=dtype)
    for threads in (1, 2):
        with tql.runtime.torch_threads(threads):
            out = native.apply_4x4(torch.as_tensor(psi, dtype=dtype), matrix, wires, n)
        assert out is not None
        np.testing.assert_allclose(_np(out), want, atol=atol)


def _on_levels(u, levels, k, keep_rest, n_controls=0):
    """The dense operator on (controls + wires) of a matrix acting on ``levels`` of k wires: the
    identity (``keep_rest``) or zero on every other level and wherever a control is 0."""
    d = 2 ** k
    full = np.eye(d, dtype=complex) if keep_rest else np.zeros((d, d), complex)
    full[np.ix_(levels, levels)] = u
    if not n_controls:
        return full
    big = np.eye(d << n_controls, dtype=complex) if keep_rest else np.zeros((d << n_controls,) * 2, complex)
    big[-d:, -d:] = full
    return big


def _tensordot_apply(psi, u, wires, n):
    """u on ``wires`` of one 2^n state: NumPy's tensordot over the wires' axes of the (2,)*n view."""
    k = len(wires)
    out = np.tensordot(u.reshape([2] * (2 * k)), psi.reshape([2] * n), axes=(list(range(k, 2 * k)), list(wires)))
    return np.moveaxis(out, list(range(k)), list(wires)).reshape(-1)


# (wires in the matrix's order, levels (None: all), controls, per sample, keep the rest)
LEVEL_CASES = [
    ((0, 6, 12), None, (), False, True),             # the last wire among them: positions gathered
    ((11, 3, 7), None, (2,), True, True),            # the next-to-last wire, a control above the lanes
    ((12, 11, 5, 0), None, (), False, True),         # both of complex64's lane bits
    ((2, 5, 9), None, (), True, True),               # every bit above a register: whole registers
    ((9, 2, 5, 0), None, (), False, True),           # descending and mixed order, 4 wires
    ((0, 4, 8, 12), (3, 12), (), True, True),        # DoubleExcitation's levels
    ((1, 3, 5, 7), (3, 12), (), False, False),       # ... its generator: zero off the levels
    ((11, 4), None, (12,), False, True),             # a control on the last wire
    ((3, 7, 10), None, (0, 12), True, False),        # two controls, zeroed where they are 0
    ((1, 6, 10), (0, 2, 3, 5, 7), (), False, True),  # five levels: a register of rows half used
    ((0, 2, 4, 8, 12), None, (), False, True),       # 32 levels: rows in blocks of registers
    ((1, 3, 5, 7, 9, 11), None, (), True, True),     # 64 levels, the largest
]


@needs_native
@pytest.mark.parametrize("wires, levels, controls, per_sample, keep_rest", LEVEL_CASES)
def test_levels_kernel_matches_numpy(wires, levels, controls, per_sample, keep_rest, dtype, atol):
    """levels.c: a matrix on some (or all) local levels of any wires in any order, controls on
    other wires, the rest copied or zeroed; 4 samples of 2^13, one and two threads, shared and
    per-sample matrices. Reference: the dense operator built around it, applied by NumPy's tensordot."""
    n, B, k = 13, 4, len(wires)
    lv = list(range(2 ** k)) if levels is None else list(levels)
    rng = np.random.default_rng(sum(wires) + 7 * len(lv))
    psi = oracle.random_state(n, rng, batch=B)
    u = oracle.random_unitaries(B, len(lv), rng) if per_sample else np.repeat(oracle.random_unitary(len(lv), rng)[None], B, 0)
    want = np.stack([_tensordot_apply(psi[b], _on_levels(u[b], lv, k, keep_rest, len(controls)),
                                      list(controls) + list(wires), n) for b in range(B)])
    matrix = torch.as_tensor(u if per_sample else u[0], dtype=dtype)
    for threads in (1, 2):
        with tql.runtime.torch_threads(threads):
            out = native.apply_levels(torch.as_tensor(psi, dtype=dtype), matrix, wires, n, levels=levels,
                                      controls=controls, keep_rest=keep_rest)
        assert out is not None
        np.testing.assert_allclose(_np(out), want, atol=atol * 4)


@needs_native
def test_levels_kernel_declines_what_it_does_not_take(dtype):
    """More levels than LEVELS_MAX_MATRIX (a dense 7-wire gate) or a state the kernels do not read:
    None, and the callers' torch paths run (checked against NumPy)."""
    n = 9
    rng = np.random.default_rng(5)
    psi = oracle.random_state(n, rng, batch=2)
    u = oracle.random_unitary(2 ** 7, rng)
    t, m = torch.as_tensor(psi, dtype=dtype), torch.as_tensor(u, dtype=dtype)
    wires = (0, 1, 3, 4, 5, 6, 8)
    max_wires, max_matrix = native.levels_limits()
    assert len(wires) <= max_wires and 2 ** len(wires) > max_matrix      # the C library's own limits
    assert native.apply_levels(t, m, wires, n) is None
    assert native.apply_levels(t.to(torch.complex128 if dtype == torch.complex64 else torch.complex64),
                               m, wires, n) is None
    want = np.stack([oracle.apply_dense(psi[b], u, list(wires), n) for b in range(2)])
    tol = 1e-4 if dtype == torch.complex64 else 1e-10
    np.testing.assert_allclose(_np(A.apply_matrix(t, m, wires)), want, atol=tol)
    # levels.c's own checks, behind the Python guard: too many levels, a repeated bit
    bits = torch.tensor([n - 1 - w for w in wires])
    out = torch.empty_like(t)
    fn = native._kernel("tql_gate_levels", dtype)
    assert fn(t.data_ptr(), out.data_ptr(), t.numel(), 7, bits.data_ptr(), 128, torch.arange(128).data_ptr(),
              m.data_ptr(), 0, 0, 1, 1) == 0
    twice = torch.tensor([3, 3])
    assert fn(t.data_ptr(), out.data_ptr(), t.numel(), 2, twice.data_ptr(), 4, torch.arange(4).data_ptr(),
              m.data_ptr(), 0, 0, 1, 1) == 0


@pytest.fixture(scope="module")
def portable_library(tmp_path_factory):
    """The library built with AVX off: the plain-C bodies a CPU without AVX2 runs."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("the -mno-avx flags are x86 flags; elsewhere every test runs the plain-C bodies")
    mp = pytest.MonkeyPatch()
    mp.setenv("TQL_CACHE_DIR", str(tmp_path_factory.mktemp("portable")))
    mp.setattr(native, "_FLAGS", native._FLAGS + ["-mno-avx", "-mno-avx2", "-mno-fma"])
    lib, reason = native._load()
    mp.undo()
    assert lib is not None, reason
    return lib


@needs_native
def test_plain_c_bodies_without_avx2(portable_library, monkeypatch, dtype, atol):
    """Without AVX2: the 4 x 4 quad loop (wires far apart, adjacent, the last two), controlled
    gates as a copy and the scalar loop, the portable 2 x 2 kernel (shared and per sample), the
    levels kernel's scalar product (dense, and two levels with a control, zeroed), against NumPy
    on 3 samples of 6 qubits (and 1-2 samples of 14 for the 2 x 2 kernel's thread split)."""
    # "tried" too: a first library() call would otherwise load the AVX2 build over this one
    monkeypatch.setitem(native._state, "lib", portable_library)
    monkeypatch.setitem(native._state, "tried", True)
    n, B = 6, 3
    rng = np.random.default_rng(11)
    psi = oracle.random_state(n, rng, batch=B)
    t = torch.as_tensor(psi, dtype=dtype)
    for wires in ((0, 5), (2, 3), (4, 5)):
        u = oracle.random_unitaries(B, 4, rng)
        want = np.stack([oracle.apply_dense(psi[b], u[b], wires, n) for b in range(B)])
        np.testing.assert_allclose(_np(native.apply_4x4(t, torch.as_tensor(u, dtype=dtype), wires, n)), want, atol=atol)
    for target, controls, per_sample in ((5, (0,), True), (0, (4, 5), False), (3, (), True), (2, (1,), False)):
        u = oracle.random_unitaries(B, 2, rng) if per_sample else np.repeat(oracle.random_unitary(2, rng)[None], B, 0)
        want = np.stack([oracle.apply_dense(psi[b], oracle.controlled_matrix(u[b], len(controls)),
                                            list(controls) + [target], n) for b in range(B)])
        out = native.apply_2x2(t, torch.as_tensor(u if per_sample else u[0], dtype=dtype), target, n, controls)
        np.testing.assert_allclose(_np(out), want, atol=atol)
    # one sample of 14 qubits: the high wires' pairs cut into runs among the threads
    big = oracle.random_state(14, rng, batch=2)
    for wire, per_sample in ((0, False), (1, True), (9, False)):
        u = oracle.random_unitaries(2, 2, rng)
        for b in (1, 2):
            # (the dense 2^14 operator would take 4 GiB: NumPy's einsum on the wire's axis instead)
            mats = u[:b] if per_sample else np.repeat(u[:1], b, 0)
            want = np.einsum("bij,bljr->blir", mats, big[:b].reshape(b, 2 ** wire, 2, -1)).reshape(b, -1)
            m = torch.as_tensor(u[:b] if per_sample else u[0], dtype=dtype)
            out = native.apply_2x2(torch.as_tensor(big[:b], dtype=dtype), m, wire, 14)
            np.testing.assert_allclose(_np(out), want, atol=atol)
    for wires, levels, controls, keep_rest in (((5, 0, 3), None, (), True), ((1, 2, 4, 5), (3, 12), (0,), False)):
        k = len(wires)
        lv = list(range(2 ** k)) if levels is None else list(levels)
        u = oracle.random_unitaries(B, len(lv), rng)
        want = np.stack([oracle.apply_dense(psi[b], _on_levels(u[b], lv, k, keep_rest, len(controls)),
                                            list(controls) + list(wires), n) for b in range(B)])
        out = native.apply_levels(t, torch.as_tensor(u, dtype=dtype), wires, n, levels=levels, controls=controls,
                                  keep_rest=keep_rest)
        np.testing.assert_allclose(_np(out), want, atol=atol)
    # the matrix-gradient gram's scalar loop (with AVX2, wires above the lanes take registers)
    from .test_recorded import _numpy_gram
    g = oracle.random_state(n, rng, batch=B)
    for wires, levels, controls in (((1, 3), None, (0,)), ((0, 2, 1, 3), (3, 12), ())):
        for per_sample in (False, True):
            got = native.gram_levels(t, torch.as_tensor(g, dtype=dtype), wires, n, levels, controls, per_sample)
            np.testing.assert_allclose(_np(got), _numpy_gram(psi, g, wires, n, levels, controls, per_sample),
                                       atol=atol)


@needs_native
@pytest.mark.parametrize("keep_rest", [True, False])
def test_two_level_block_on_two_wires_as_a_4x4(keep_rest, dtype, atol):
    """A Givens block on levels (1, 2) of wires (5, 2) in one 4 x 4 pass: the block on those two
    local states, the other two kept (a gate) or zeroed (its generator)."""
    n, B = 6, 3
    rng = np.random.default_rng(3)
    psi = oracle.random_state(n, rng, batch=B)
    block = oracle.random_unitaries(B, 2, rng)
    full = np.repeat(np.eye(4, dtype=complex)[None] if keep_rest else np.zeros((1, 4, 4), complex), B, 0)
    full[:, 1:3, 1:3] = block
    want = np.stack([oracle.apply_dense(psi[i], full[i], [5, 2], n) for i in range(B)])
    out = A.apply_two_level_unchecked(torch.as_tensor(psi, dtype=dtype), torch.as_tensor(block, dtype=dtype),
                                      (1, 2), (5, 2), n, keep_rest=keep_rest)
    np.testing.assert_allclose(_np(out), want, atol=atol)


@needs_native
@pytest.mark.parametrize("n", [1, 2])
def test_per_sample_rotation_of_a_tiny_register_with_a_large_batch(n, dtype, atol):
    """4096 samples of 1-2 qubits pass the size threshold while each sample is shorter than an
    AVX2 register (4 complex64 amplitudes): the vector kernel must not read or write across
    samples or past the end (it did, and crashed)."""
    B = 4096
    rng = np.random.default_rng(n)
    psi = torch.as_tensor(oracle.random_state(n, rng, batch=B), dtype=dtype)
    theta = rng.uniform(-3, 3, size=4)[np.arange(B) % 4]
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    out = _np(tql.functional.ry(psi, torch.as_tensor(theta, dtype=real), wires=n - 1))
    for v in range(4):
        rows = np.arange(B) % 4 == v
        np.testing.assert_allclose(out[rows], oracle.apply_dense(_np(psi)[rows], oracle.ry(theta[v]), [n - 1], n),
                                   atol=atol)


@needs_native
@pytest.mark.parametrize("name", list(oracle.SIGNATURES))
def test_every_gate_on_tiny_states_through_the_native_kernels(name, dtype, atol, monkeypatch):
    """Every gate on every wire order of 1-4 qubit registers, 1 or 3 samples, shared and
    per-sample angles, through the native kernels (the diagonals' size threshold, a speed
    choice, set to one amplitude) against the dense oracle."""
    monkeypatch.setattr(native, "MIN_DIAGONAL_AMPLITUDES", 1)
    k, n_params = oracle.SIGNATURES[name]
    k = k or 2
    rng = np.random.default_rng(len(name))
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    gate = G.get_gate(name)
    for n in range(k, min(k + 1, 4) + 1):
        for wires in itertools.permutations(range(n), k):
            for B in (1, 3):
                values = rng.uniform(-3, 3, size=(B, n_params))
                psi = oracle.random_state(n, rng, batch=B)
                for per_sample in (False, True) if n_params else (False,):
                    rows = values if per_sample else values[:1].repeat(B, 0)
                    params = [torch.as_tensor(rows[:, j] if per_sample else rows[0, j], dtype=real)
                              for j in range(n_params)]
                    out = gate.apply(torch.as_tensor(psi, dtype=dtype), params, wires, n)
                    want = np.stack([oracle.apply_dense(psi[b], oracle.gate_matrix(name, *rows[b], n_wires=k),
                                                        wires, n) for b in range(B)])
                    np.testing.assert_allclose(_np(out), want, atol=atol, err_msg=f"{name} on {wires} of {n}")


@needs_native
@pytest.mark.parametrize("n,wires", [(12, (0, 1)), (12, (4, 6)), (12, (10, 11)), (12, (0, 11)),
                                     # rows of 128 and 64 KiB cut into thread segments, 16-32 KiB
                                     # rows (prefetched one row on) in complex64 / complex128
                                     (16, (0, 1)), (16, (1, 2)), (16, (3, 4)), (16, (2, 4))])
def test_permutation_matches_torch_gather(n, wires, dtype):
    B = 2
    psi = tql.random_state(n, B, dtype=dtype, generator=torch.Generator().manual_seed(1))
    idx, _ = A._span_permutation_uncached((0, 1, 3, 2), wires, "cpu")
    lo, hi = wires[0], wires[-1]
    L, R = 2 ** lo, 2 ** (n - hi - 1)
    want = psi.reshape(B * L, -1, R)[:, idx].reshape(B, -1)
    got = A.gather_span(psi, idx, lo, hi, n)          # native, widened when R == 1
    assert torch.equal(got, want)
    assert torch.equal(native.permute(psi, idx, lo, hi, n), want)


def test_not_used_where_autograd_records(dtype):
    psi = tql.random_state(12, 2, dtype=dtype).requires_grad_()
    m = torch.eye(2, dtype=dtype)
    assert native.apply_2x2(psi, m, 3, 12) is None
    with torch.no_grad():
        assert (native.apply_2x2(psi, m, 3, 12) is not None) == HAS_CC
    tiny = tql.random_state(4, 1, dtype=dtype)
    assert (native.apply_2x2(tiny, m, 1, 4) is not None) == HAS_CC      # dense gates: at any size
    assert native.apply_diagonal(tiny, torch.ones(2, dtype=dtype), (1,), 4) is None   # torch's is cheaper


@pytest.mark.parametrize("gate,wires", [("CNOT", (0, 16)), ("CNOT", (16, 0)), ("TOFFOLI", (0, 9, 16)),
                                        ("SWAP", (16, 0))])
@pytest.mark.parametrize("use_native", [True, False])
def test_long_range_permutations_without_a_register_index(gate, wires, use_native, dtype, monkeypatch):
    """Spans beyond 16 wires take the native local-basis kernel (or one strided copy per local
    state without it): the same result as the register-wide index path."""
    if not use_native:
        monkeypatch.setattr(native, "_usable", lambda *a: False)
    n = 17
    g = G.get_gate(gate)
    psi = tql.random_state(n, 1, dtype=dtype, generator=torch.Generator().manual_seed(2)).requires_grad_()
    out = g.apply(psi, (), wires, n)
    sw, order = A._sorted(wires)
    perm = tuple(int(p) for p in g.perm_fn(len(wires)))
    if sw != tuple(wires):
        perm = tuple(A._relabel(p, order) for p in A.reorder_vector(torch.tensor(perm), order).tolist())
    idx, _ = A._span_permutation_uncached(perm, sw, "cpu")
    want = psi.detach()[:, idx]
    assert torch.equal(out.detach(), want)
    weights = torch.randn_like(out)
    (out * weights).real.sum().backward()
    back = torch.empty_like(weights)
    back[:, idx] = weights.conj()              # d Re(w·ψ[idx]) / dψ*: w̄ moved back by the inverse
    np.testing.assert_allclose(_np(psi.grad), _np(back), atol=0)


def test_build_failure_falls_back_with_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("TQL_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    lib, reason = native._load()
    assert lib is None and reason.startswith("unavailable")


@needs_native
def test_builds_into_the_cache_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("TQL_CACHE_DIR", str(tmp_path))
    lib, reason = native._load()
    assert lib is not None and str(tmp_path) in reason
    assert [p.suffix for p in tmp_path.iterdir()] == [".so"]      # no temporary file left behind


def _permuted_np(psi: np.ndarray, perm, wires, n: int) -> np.ndarray:
    """new[i] = old[perm[i]] in the local basis of ``wires``, by NumPy slices of the (B, 2, ..., 2) view."""
    k = len(wires)
    view = psi.reshape(psi.shape[0], *([2] * n))
    out = np.empty_like(view)
    for new, old in enumerate(perm):
        at_new, at_old = [slice(None)] * (n + 1), [slice(None)] * (n + 1)
        for j, w in enumerate(wires):
            at_new[1 + w], at_old[1 + w] = (new >> (k - 1 - j)) & 1, (old >> (k - 1 - j)) & 1
        out[tuple(at_new)] = view[tuple(at_old)]
    return out.reshape(psi.shape)


@pytest.mark.parametrize("n", [12, 13])
def test_block_permutation_kernel_against_numpy(n, dtype):
    """The line-block kernel for any wires (all in the last bits, mixed, far apart) and any
    permutation of their local basis."""
    rng = np.random.default_rng(n)
    psi = tql.random_state(n, 2, dtype=dtype, generator=torch.Generator().manual_seed(n))
    cases = [(n - 2, n - 1), (n - 1, n - 2), (n - 3, n - 1, n - 2), (0, n - 1), (n - 1, 3, 0), (5,), (n - 1,)]
    cases += [tuple(int(w) for w in rng.choice(n, size=int(rng.integers(1, 5)), replace=False)) for _ in range(12)]
    for wires in cases:
        perm = tuple(int(p) for p in rng.permutation(2 ** len(wires)))
        got = native.permute_local(psi, perm, wires, n)
        assert got is not None, native.status()
        np.testing.assert_array_equal(_np(got), _permuted_np(_np(psi), perm, wires, n))


@pytest.mark.parametrize("gate,wires", [("CNOT", (10, 11)), ("CNOT", (11, 10)), ("SWAP", (11, 10))])
def test_permutation_gates_on_the_last_wires_take_the_native_kernel(gate, wires, dtype, monkeypatch):
    """Every wire in the last two index bits: one line-block pass (a span gather there moves one
    amplitude at a time)."""
    n = 12
    g = G.get_gate(gate)
    psi = tql.random_state(n, 3, dtype=dtype, generator=torch.Generator().manual_seed(5))
    calls = []
    real = native.permute_local
    monkeypatch.setattr(native, "permute_local", lambda *a: calls.append(a) or real(*a))
    with torch.no_grad():
        out = g.apply(psi, (), wires, n)
    assert calls
    perm = tuple(int(p) for p in g.perm_fn(len(wires)))
    np.testing.assert_array_equal(_np(out), _permuted_np(_np(psi), perm, wires, n))


@pytest.mark.parametrize("gate,wires", [
    ("CNOT", (8, 9)), ("CNOT", (9, 8)), ("CNOT", (7, 8)), ("CNOT", (2, 3)),      # span rows of 32-512 bytes
    ("CNOT", (5, 11)), ("CNOT", (11, 0)), ("CNOT", (9, 10)), ("SWAP", (9, 11)),  # the last line's wires with others
    ("CCX", (0, 10, 11)), ("CCX", (11, 4, 9)), ("CSWAP", (1, 9, 11)), ("SWAP", (0, 1)),
    # controls in the last line, targets above it: blends alone, two lines or four a block
    ("CNOT", (10, 6)), ("CCX", (11, 10, 0)), ("CCX", (11, 3, 0)), ("CSWAP", (11, 0, 1))])
def test_permutation_gates_on_every_row_length(gate, wires, dtype):
    """Each path of a permutation gate (span rows, prefetching row copies, line blocks with one,
    two or more patterns, blends across registers) against NumPy slices."""
    n = 12
    g = G.get_gate(gate)
    psi = tql.random_state(n, 2, dtype=dtype, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = g.apply(psi, (), wires, n)
    perm = tuple(int(p) for p in g.perm_fn(len(wires)))
    np.testing.assert_array_equal(_np(out), _permuted_np(_np(psi), perm, wires, n))


@pytest.mark.parametrize("n", [12, 13])
def test_block_diagonal_kernel_against_numpy(n, dtype):
    """A shared diagonal on any wires (last bits, mixed, far apart) against the dense NumPy oracle;
    the gates that are diagonals take it where no graph is recorded."""
    rng = np.random.default_rng(n + 7)
    psi = tql.random_state(n, 2, dtype=dtype, generator=torch.Generator().manual_seed(n))
    cases = [(n - 1,), (0,), (n - 2, n - 1), (0, n - 1), (3, n - 1, 0), (n // 2, n - 3)]
    cases += [tuple(sorted(int(w) for w in rng.choice(n, size=int(rng.integers(1, 5)), replace=False)))
              for _ in range(8)]
    for wires in cases:
        d = np.exp(1j * rng.uniform(0, 2 * np.pi, 2 ** len(wires)))
        got = native.apply_diagonal(psi, torch.as_tensor(d, dtype=dtype), wires, n)
        assert got is not None, native.status()
        want = _diagonal_np(_np(psi), d, wires, n)
        np.testing.assert_allclose(_np(got), want, atol=1e-5 if dtype == torch.complex64 else 1e-12)
    theta = torch.tensor(0.7, dtype=torch.float32 if dtype == torch.complex64 else torch.float64)
    with torch.no_grad():
        out = G.RZZ.apply(psi, (theta,), (n - 1, 0), n)
    m = G.RZZ.matrix((theta,), dtype=torch.complex128).numpy()
    assert np.allclose(m, np.diag(np.diag(m)))
    np.testing.assert_allclose(_np(out), _diagonal_np(_np(psi), np.diag(m), (n - 1, 0), n),
                               atol=1e-5 if dtype == torch.complex64 else 1e-12)
    # the elementwise oracle itself against the dense Kronecker one, on a size the latter affords
    small = oracle.random_state(5, rng, batch=2)
    d = np.exp(1j * rng.uniform(0, 2 * np.pi, 8))
    np.testing.assert_allclose(_diagonal_np(small, d, (4, 1, 2), 5),
                               oracle.apply_dense(small, np.diag(d), [4, 1, 2], 5), atol=1e-13)


def _diagonal_np(psi, d, wires, n):
    """A diagonal on ``wires`` (``wires[0]`` the most significant bit of its index) by indexing:
    the dense Kronecker oracle builds a 2^n × 2^n matrix, 1 GiB at 13 qubits (40 s a case)."""
    index = np.arange(2 ** n)
    sub = np.zeros_like(index)
    for w in wires:
        sub = (sub << 1) | ((index >> (n - 1 - w)) & 1)
    return psi * d[sub]


def _torch_gate(psi, matrix, wires, n):
    """matrix on wires by torch's own reshape and einsum (the reference at sizes NumPy's dense
    oracle cannot reach)."""
    k = len(wires)
    t = psi.reshape(psi.shape[0], *([2] * n)).movedim([1 + w for w in wires], list(range(1, 1 + k)))
    shape = t.shape
    t = (matrix @ t.reshape(psi.shape[0], 2 ** k, -1))
    return t.reshape(shape).movedim(list(range(1, 1 + k)), [1 + w for w in wires]).reshape(psi.shape)


@needs_native
def test_outputs_written_around_the_caches(dtype):
    """From native.stream_bytes() on, the one-pass kernels write with streaming stores: 2x2 and 4x4
    gates on high, middle and last wires, diagonals and CNOTs at that size, against torch's einsum."""
    n = 22 if dtype == torch.complex64 else 21
    assert 2 ** n * (8 if dtype == torch.complex64 else 16) >= native.stream_bytes() > 0
    psi = tql.random_state(n, 1, dtype=dtype, generator=torch.Generator().manual_seed(1))
    atol = 1e-5 if dtype == torch.complex64 else 1e-12
    u = torch.linalg.qr(torch.randn(2, 2, dtype=torch.complex128, generator=torch.Generator().manual_seed(2)))[0]
    cnot = torch.eye(4, dtype=torch.complex128)[[0, 1, 3, 2]]
    with torch.no_grad():
        for w in (0, n // 2, n - 3, n - 1):
            got = A.apply_matrix_unchecked(psi, u.to(dtype), (w,), n)
            torch.testing.assert_close(got, _torch_gate(psi, u.to(dtype), (w,), n), atol=atol, rtol=0)
        u4 = torch.linalg.qr(torch.randn(4, 4, dtype=torch.complex128, generator=torch.Generator().manual_seed(3)))[0]
        for wires in ((0, n // 2), (3, 8), (n - 1, 2)):
            got = A.apply_matrix_unchecked(psi, u4.to(dtype), wires, n)
            torch.testing.assert_close(got, _torch_gate(psi, u4.to(dtype), wires, n), atol=atol, rtol=0)
        for wires in ((n // 2,), (0, n - 1)):
            d = torch.exp(1j * torch.arange(1.0, 1 + 2 ** len(wires), dtype=torch.float64)).to(dtype)
            got = native.apply_diagonal(psi, d, wires, n)
            torch.testing.assert_close(got, _torch_gate(psi, torch.diag(d), wires, n), atol=atol, rtol=0)
        for wires in ((0, 1), (n // 2, n // 2 + 1), (n - 2, n - 1)):
            got = native.permute_local(psi, (0, 1, 3, 2), wires, n)
            torch.testing.assert_close(got, _torch_gate(psi, cnot.to(dtype), wires, n), atol=0, rtol=0)
        # CNOT(n - 1, 0): lanes from two lines 2^(n-1) apart
        got = native.permute_local(psi, (0, 3, 2, 1), (0, n - 1), n)
        reverse = torch.eye(4, dtype=torch.complex128)[[0, 3, 2, 1]].to(dtype)
        torch.testing.assert_close(got, _torch_gate(psi, reverse, (0, n - 1), n), atol=0, rtol=0)
        # CSWAP(n - 1, 0, 1): blends of four lines a block
        cswap = (0, 1, 2, 3, 4, 6, 5, 7)
        got = native.permute_local(psi, cswap, (n - 1, 0, 1), n)
        torch.testing.assert_close(got, _torch_gate(psi, torch.eye(8, dtype=torch.complex128)[list(cswap)].to(dtype),
                                                    (n - 1, 0, 1), n), atol=0, rtol=0)
        for wires in ((0, 1), (1, 0), (n // 2, n // 2 + 1), (n - 8, n - 7)):
            # span rows: whole-row segments, prefetched rows of at most 16 KiB
            got = A.apply_permutation_unchecked(psi, (0, 1, 3, 2), wires, n)
            torch.testing.assert_close(got, _torch_gate(psi, cnot.to(dtype), wires, n), atol=0, rtol=0)
