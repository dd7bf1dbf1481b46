"""The Triton kernels (kernels/gpu.py) against the dense NumPy oracle: compiled on CUDA where a
GPU is present, else run by Triton's interpreter on CPU tensors (TRITON_INTERPRET=1, which
conftest.py sets before anything imports triton), so CI checks the GPU fast path without a GPU. Small registers: the
interpreter runs each Triton op as a NumPy call."""
import os
import types
import zlib

import numpy as np
import pytest
import torch

pytest.importorskip("triton", reason="Triton ships for Linux x86_64 only (the test extra installs it there)")

from torchquantum_layers import gates  # noqa: E402
from torchquantum_layers.kernels import apply as kernels_apply  # noqa: E402
from torchquantum_layers.kernels import gpu  # noqa: E402

from . import oracle  # noqa: E402
from .conftest import ATOL  # noqa: E402

assert torch.cuda.is_available() or (gpu.INTERPRETED and os.environ.get("TRITON_INTERPRET") == "1"), \
    "without a GPU the kernels must run interpreted (tests/conftest.py sets TRITON_INTERPRET)"
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def T(x, dtype):
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=DEVICE)


def N(t):
    return t.detach().cpu().numpy()


def _matrices(mode, d, B, rng):
    """(matrix, state batch) for a sharing mode, as tests/test_kernels.py's modes."""
    if mode == "shared":
        return oracle.random_unitary(d, rng), B
    if mode == "per-sample":
        return oracle.random_unitaries(B, d, rng), B
    if mode == "broadcast-state":
        return oracle.random_unitaries(B, d, rng), 1
    return oracle.random_unitaries(1, d, rng), B


DENSE_CASES = [(5, (0,)), (5, (4,)), (5, (2,)), (5, (3, 4)), (5, (4, 0)), (6, (1, 3, 5)),
               (6, (5, 0, 2, 3)), (6, (2, 3, 4, 5)), (6, (4, 1, 0, 3, 5)), (1, (0,))]
MODES = ["shared", "per-sample", "broadcast-state", "broadcast-matrix"]


@pytest.fixture(params=["tile-2048", "tile-16"])
def tile(request, monkeypatch):
    """The amplitudes per program: the default (these registers' samples are shorter than a
    program: a matrix per group), and 16 (whole programs in one sample: its matrix read once)."""
    monkeypatch.setattr(gpu, "_TILE_AMPLITUDES", int(request.param.split("-")[1]))
    return request.param


@pytest.mark.parametrize("n,wires", DENSE_CASES)
@pytest.mark.parametrize("mode", MODES)
def test_dense_gate_matches_oracle(n, wires, mode, dtype, tile):
    rng = np.random.default_rng(zlib.crc32(repr((n, wires, mode)).encode()))
    u, B = _matrices(mode, 2 ** len(wires), 3, rng)
    psi = oracle.random_state(n, rng, batch=B)
    out = gpu.apply_levels(T(psi, dtype), T(u, dtype), wires, n)
    ref = oracle.apply_dense(psi, u, wires, n)
    assert out.dtype == dtype and out.shape == ref.shape
    np.testing.assert_allclose(N(out), ref, atol=ATOL[dtype])


CONTROL_CASES = [(4, (0,), (3,)), (4, (3,), (0,)), (5, (4, 1), (2,)), (5, (2,), (4, 0)),
                 (6, (5, 0), (3, 1, 2))]


@pytest.mark.parametrize("n,controls,targets", CONTROL_CASES)
@pytest.mark.parametrize("mode", ["shared", "per-sample"])
def test_controlled_gate_touches_only_the_controlled_block(n, controls, targets, mode, dtype, tile):
    rng = np.random.default_rng(zlib.crc32(repr((n, controls, targets)).encode()))
    u, B = _matrices(mode, 2 ** len(targets), 2, rng)
    psi = oracle.random_state(n, rng, batch=B)
    out = gpu.apply_levels(T(psi, dtype), T(u, dtype), targets, n, controls=controls)
    full = oracle.controlled_on_wires(u, controls, targets, n)
    np.testing.assert_allclose(N(out), oracle.apply_dense(psi, full, list(range(n)), n), atol=ATOL[dtype])


LEVEL_CASES = [(5, (1, 3), (0, 3)), (5, (4, 0, 2), (3, 4)), (6, (0, 5, 2, 3), (3, 12)),
               (6, (5, 4, 3, 2), (1, 2, 7, 14))]


@pytest.mark.parametrize("n,wires,levels", LEVEL_CASES)
@pytest.mark.parametrize("keep_rest", [True, False])
@pytest.mark.parametrize("controlled", [False, True])
@pytest.mark.parametrize("one_state", [False, True])
def test_levels_subset_matches_oracle(n, wires, levels, keep_rest, controlled, one_state, dtype):
    """A block on some local levels (Givens rotations; zeroed elsewhere: their generators), per
    sample, on as many states or on one state every sample reads."""
    rng = np.random.default_rng(zlib.crc32(repr((n, wires, levels, keep_rest)).encode()))
    m = len(levels)
    B = 2
    blocks = rng.standard_normal((B, m, m)) + 1j * rng.standard_normal((B, m, m))
    psi = oracle.random_state(n, rng, batch=1 if one_state else B)
    controls = tuple(w for w in range(n) if w not in wires)[:1] if controlled else ()
    out = gpu.apply_levels(T(psi, dtype), T(blocks, dtype), wires, n, levels=levels, controls=controls,
                           keep_rest=keep_rest)
    d = 2 ** len(wires)
    expect = []
    for b in range(B):
        full = np.eye(d, dtype=complex) if keep_rest else np.zeros((d, d), dtype=complex)
        full[np.ix_(levels, levels)] = blocks[b]
        op = oracle.controlled_on_wires(full[None], controls, wires, n)[0] if controls else \
            oracle.full_operator(full, wires, n)
        if controls and not keep_rest:      # a generator: zero where a control is 0 too
            op = op - oracle.controlled_on_wires(np.zeros((1, d, d)), controls, wires, n)[0]
        expect.append(op @ psi[0 if one_state else b])
    np.testing.assert_allclose(N(out), np.stack(expect), atol=10 * ATOL[dtype])


@pytest.mark.parametrize("n,wires", [(5, (2,)), (5, (4, 0)), (6, (5, 1, 3)), (6, (0, 2, 3, 5))])
def test_permutation_matches_oracle(n, wires, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((n, wires)).encode()))
    perm = rng.permutation(2 ** len(wires)).tolist()
    psi = oracle.random_state(n, rng, batch=2)
    out = gpu.permute_local(T(psi, dtype), perm, wires, n)
    ref = oracle.apply_dense(psi, oracle.permutation_matrix(perm), wires, n)
    np.testing.assert_array_equal(N(out), N(T(ref, dtype)))     # amplitudes move exactly


@pytest.mark.parametrize("n,lo,hi", [(5, 0, 4), (5, 1, 3), (6, 3, 5), (6, 0, 2), (4, 2, 2)])
def test_span_gather_matches_numpy(n, lo, hi, dtype):
    """The engine's fused permutation runs: new[.., s, ..] = old[.., idx[s], ..] on wires lo..hi."""
    rng = np.random.default_rng(n * 10 + lo + hi)
    S = 2 ** (hi - lo + 1)
    idx = rng.permutation(S)
    psi = oracle.random_state(n, rng, batch=2)
    out = gpu.gather_span(T(psi, dtype), torch.as_tensor(idx, device=DEVICE), lo, hi, n)
    want = psi.reshape(2, 2 ** lo, S, 2 ** (n - hi - 1))[:, :, idx, :].reshape(2, -1)
    np.testing.assert_array_equal(N(out), N(T(want, dtype)))


@pytest.mark.parametrize("n,wires", [(5, (2,)), (5, (4, 0)), (6, (5, 1, 3)), (6, (0, 2, 3, 5, 1))])
@pytest.mark.parametrize("per_sample", [False, True, "one state"])
def test_diagonal_matches_oracle(n, wires, per_sample, dtype):
    rng = np.random.default_rng(zlib.crc32(repr((n, wires, per_sample)).encode()))
    d, B = 2 ** len(wires), 3
    diag = np.stack([oracle.random_phases(d, rng) for _ in range(B)]) if per_sample else oracle.random_phases(d, rng)
    psi = oracle.random_state(n, rng, batch=1 if per_sample == "one state" else B)
    out = gpu.apply_diagonal(T(psi, dtype), T(diag, dtype), wires, n)
    np.testing.assert_allclose(N(out), oracle.apply_diagonal_dense(psi, diag, wires, n), atol=ATOL[dtype])


def test_conjugated_and_strided_operands(dtype):
    """A conjugate view (the density-matrix simulator's right factor) and a strided state."""
    rng = np.random.default_rng(11)
    u = oracle.random_unitary(4, rng)
    psi = oracle.random_state(5, rng, batch=4)
    state = T(psi, dtype)[::2]
    out = gpu.apply_levels(state, T(u, dtype).conj(), (3, 1), 5)
    np.testing.assert_allclose(N(out), oracle.apply_dense(psi[::2], u.conj(), (3, 1), 5), atol=ATOL[dtype])


def test_declines_what_it_does_not_take():
    s = torch.zeros(1, 2 ** 7, dtype=torch.complex64, device=DEVICE)
    assert gpu.apply_levels(s, torch.eye(64, dtype=s.dtype, device=DEVICE), tuple(range(6)), 7) is None
    assert gpu.apply_levels(s, torch.eye(3, dtype=s.dtype, device=DEVICE), (0, 1), 7, levels=(0, 1, 2)) is None
    assert gpu.apply_levels(s, torch.eye(2, dtype=torch.complex128, device=DEVICE), (0,), 7) is None
    assert gpu.apply_levels(s.real, torch.eye(2, device=DEVICE), (0,), 7) is None
    m = torch.eye(2, dtype=s.dtype, device=DEVICE).requires_grad_(True)
    assert gpu.apply_levels(s, m, (0,), 7) is None       # autograd records the torch kernels
    with torch.no_grad():
        assert gpu.apply_levels(s, m, (0,), 7) is not None
    three = torch.eye(2, dtype=s.dtype, device=DEVICE).expand(3, 2, 2)
    assert gpu.apply_levels(torch.zeros(2, 2 ** 7, dtype=s.dtype, device=DEVICE), three, (0,), 7) is None


def _route_every_state(monkeypatch) -> list:
    """apply.py sends every state to these kernels; the list returned fills with whether each call
    on a complex state was taken (not the int64 index a fused permutation step is built from)."""
    calls = []

    def counted(fn):
        def run(state, *args, **kwargs):
            out = fn(state, *args, **kwargs)
            if state.is_complex():
                calls.append(out is not None)
            return out
        return run
    routed = types.SimpleNamespace(**{f: counted(getattr(gpu, f))
                                      for f in ("apply_levels", "permute_local", "apply_diagonal", "gather_span")})
    monkeypatch.setattr(kernels_apply, "_gpu_kernels", lambda state: routed)
    return calls


def test_every_gate_of_the_table_routes_through_the_kernels(monkeypatch, dtype):
    """Gate.apply for the whole table with apply.py sending every state to these kernels: the
    wire order, permutation and level conventions handed over agree with the oracle."""
    calls = _route_every_state(monkeypatch)
    n = 5
    for name, g in gates.GATES.items():
        if g.takes_data:
            continue
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        k = g.n_wires or max(g.min_wires, 3)
        wires = tuple(int(w) for w in rng.permutation(n)[:k])
        params = oracle.random_params(g.n_params, rng)
        psi = oracle.random_state(n, rng, batch=2)
        real = torch.float64 if dtype == torch.complex128 else torch.float32
        before = len(calls)
        out = g.apply(T(psi, dtype), tuple(torch.tensor(p, dtype=real, device=DEVICE) for p in params), wires, n)
        assert calls[before:] == [True], name       # one kernel call did the gate
        ref = oracle.apply_dense(psi, oracle.gate_matrix(name, *params, n_wires=k), wires, n)
        np.testing.assert_allclose(N(out), ref, atol=10 * ATOL[dtype], err_msg=f"{name} on {wires}")


@pytest.mark.parametrize("width", [2, 4])
def test_the_cuda_engine_route_matches_oracle(monkeypatch, width, dtype):
    """The fused-block engine as it runs on CUDA with Triton: blocks in place (no rotations),
    each one kernel call."""
    from torchquantum_layers import engine
    from torchquantum_layers.engine import build_plan

    from .test_engine_layout import _layered, _oracle
    hits = _route_every_state(monkeypatch)
    monkeypatch.setattr(engine, "rotating_layout", lambda circuit: False)
    monkeypatch.setattr(engine, "USE_PROGRAMS", False)
    n, B = 6, 3
    c = _layered(n, dtype, DEVICE, width)
    assert {s.mode for s in build_plan(c, layout=False).steps if s.kind == "dense"} == {"in-place"}
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    x = torch.rand(B, n, dtype=real, device=DEVICE)
    psi0 = oracle.random_state(n, np.random.default_rng(5), batch=B)
    with torch.no_grad():
        out = c(x, state=T(psi0, dtype))
    assert hits and all(hits)
    np.testing.assert_allclose(N(out), _oracle(c, x, psi0), atol=10 * ATOL[dtype])


@pytest.mark.parametrize("n,wires,levels,controls", [(5, (2,), None, ()), (5, (4, 0), None, (2,)),
                                                     (6, (0, 5, 2, 3), (3, 12), ()), (6, (1, 4, 3), None, (0,))])
@pytest.mark.parametrize("per_sample", [False, True])
def test_gram_matches_numpy(n, wires, levels, controls, per_sample, dtype):
    """The matrix gradient kernel of the recorded gates on CUDA."""
    from .test_recorded import _numpy_gram
    rng = np.random.default_rng(n * 3 + len(wires))
    psi, g = oracle.random_state(n, rng, batch=3), oracle.random_state(n, rng, batch=3)
    got = gpu.gram_levels(T(psi, dtype), T(g, dtype), wires, n, levels, controls, per_sample)
    np.testing.assert_allclose(N(got), _numpy_gram(psi, g, wires, n, levels, controls, per_sample),
                               atol=ATOL[dtype])


@pytest.mark.parametrize("n,wires,controls", [(5, (4,), ()), (5, (0, 4), ()), (6, (3, 1), (5,))])
@pytest.mark.parametrize("per_sample", [False, True])
def test_diagonal_gram_matches_numpy_on_the_diagonal(n, wires, controls, per_sample, dtype):
    """A diagonal gate's gradient: the gram's diagonal, the rest skipped (left zero)."""
    from .test_recorded import _numpy_gram
    rng = np.random.default_rng(n + 7 * len(wires))
    psi, g = oracle.random_state(n, rng, batch=3), oracle.random_state(n, rng, batch=3)
    got = N(gpu.gram_levels(T(psi, dtype), T(g, dtype), wires, n, None, controls, per_sample, diagonal_only=True))
    want = _numpy_gram(psi, g, wires, n, None, controls, per_sample)
    diagonal = np.eye(2 ** len(wires), dtype=bool)
    np.testing.assert_allclose(got[..., diagonal], want[..., diagonal], atol=ATOL[dtype])
    assert not got[..., ~diagonal].any()


def test_recorded_gates_take_the_kernels_both_ways(monkeypatch):
    """Under autograd on CUDA a gate is one node whose forward, adjoint and matrix gradient are
    these kernels (kernels/recorded.py): gradcheck in complex128 through them, the kernels counted."""
    from torchquantum_layers.kernels import recorded
    from torchquantum_layers.kernels.apply import (apply_controlled_unchecked, apply_diagonal_unchecked,
                                                   apply_matrix_unchecked, apply_two_level_unchecked)
    calls = {}

    def counted(name):
        kernel = getattr(gpu, name)

        def call(*args, **kwargs):
            out = kernel(*args, **kwargs)
            calls[name] = calls.get(name, 0) + (out is not None)
            return out
        return call
    routed = types.SimpleNamespace(**{name: counted(name) for name in ("apply_levels", "apply_diagonal",
                                                                         "gram_levels")})
    routed.MAX_WIRES = gpu.MAX_WIRES
    monkeypatch.setattr(kernels_apply, "_gpu_kernels", lambda state: routed)
    monkeypatch.setattr(recorded, "gpu_kernels", lambda state: routed)
    rng = np.random.default_rng(11)
    n = 3

    def c128(a):
        return torch.as_tensor(a, dtype=torch.complex128, device=DEVICE).requires_grad_(True)
    psi = c128(oracle.random_state(n, rng, batch=2))
    cases = [
        (lambda s, u: apply_matrix_unchecked(s, u, (2, 0), n), c128(oracle.random_unitary(4, rng))),
        (lambda s, u: apply_controlled_unchecked(s, u, (0,), (2,), n), c128(oracle.random_unitaries(2, 2, rng))),
        (lambda s, u: apply_two_level_unchecked(s, u, (1, 2), (0, 2), n, True), c128(oracle.random_unitary(2, rng))),
        (lambda s, d: apply_diagonal_unchecked(s, d, (2, 0), n), c128(np.exp(1j * rng.standard_normal(4)))),
    ]
    for fn, operator in cases:
        assert type(fn(psi, operator).grad_fn).__name__ == "_OnePassBackward"
        assert torch.autograd.gradcheck(fn, (psi, operator), fast_mode=True)
    assert calls.get("apply_levels", 0) > 0 and calls.get("gram_levels", 0) > 0 and calls.get("apply_diagonal", 0) > 0
