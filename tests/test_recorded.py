"""Gates under autograd through the one-pass kernels (kernels/recorded.py): gradients by
gradcheck / gradgradcheck in complex128 and the matrix gradient (gram) against NumPy."""
import numpy as np
import pytest
import torch

from torchquantum_layers.kernels import native, recorded
from torchquantum_layers.kernels.apply import (apply_controlled_unchecked, apply_matrix_unchecked,
                                               apply_two_level_unchecked)

from . import oracle
from .conftest import ATOL


def _numpy_gram(psi, g, wires, n, levels=None, controls=(), per_sample=False):
    """Σ g_i conj(ψ_j) from the dense oracle: ⟨e_i| G_rest |e_j⟩ via index arithmetic."""
    k = len(wires)
    M = 2 ** k if levels is None else len(levels)
    levels = list(range(2 ** k)) if levels is None else list(levels)
    out = np.zeros((g.shape[0], M, M), dtype=complex)
    for idx in range(2 ** n):
        bits = [(idx >> (n - 1 - w)) & 1 for w in range(n)]
        if any(bits[c] == 0 for c in controls):
            continue
        local = sum(bits[w] << (k - 1 - t) for t, w in enumerate(wires))
        if local not in levels:
            continue
        j = levels.index(local)
        base = idx
        for t, w in enumerate(wires):
            base &= ~(1 << (n - 1 - w))
        for i, lv in enumerate(levels):
            other = base | sum(((lv >> (k - 1 - t)) & 1) << (n - 1 - w) for t, w in enumerate(wires))
            out[:, i, j] += g[:, other] * np.conj(psi[:, idx])
    return out if per_sample else out.sum(0)


GRAM_CASES = [(5, (2,), None, ()), (5, (4, 0), None, ()), (6, (1, 4, 3), None, (0,)),
              (6, (0, 5, 2, 3), (3, 12), ()), (5, (4,), None, (3, 1))]


@pytest.mark.parametrize("n,wires,levels,controls", GRAM_CASES)
@pytest.mark.parametrize("per_sample", [False, True])
def test_gram_matches_numpy(n, wires, levels, controls, per_sample, dtype):
    rng = np.random.default_rng(n + len(wires))
    psi, g = oracle.random_state(n, rng, batch=3), oracle.random_state(n, rng, batch=3)
    T = lambda a: torch.as_tensor(a, dtype=dtype)  # noqa: E731
    with torch.no_grad():
        got = recorded.gram(T(psi), T(g), wires, n, levels, controls, per_sample)
    ref = _numpy_gram(psi, g, wires, n, levels, controls, per_sample)
    np.testing.assert_allclose(got.numpy(), ref, atol=ATOL[dtype])
    np.testing.assert_allclose(recorded.gram_torch(T(psi), T(g), wires, n, levels, controls, per_sample).numpy(),
                               ref, atol=ATOL[dtype])
    assert native.gram_levels(T(psi), T(g), wires, n, levels, controls, per_sample) is not None


def _c128(a, grad=True):
    return torch.as_tensor(a, dtype=torch.complex128).requires_grad_(grad)


DENSE = [(5, (2,)), (5, (4, 0)), (5, (0, 3, 1)), (5, (4, 0, 1, 3)), (5, (1, 2))]


@pytest.mark.parametrize("n,wires", DENSE)
@pytest.mark.parametrize("batch", ["shared", "per-sample", "broadcast-state", "broadcast-matrix"])
def test_dense_gate_gradients(n, wires, batch):
    rng = np.random.default_rng(len(wires) * 7 + n)
    d = 2 ** len(wires)
    B_state = 1 if batch == "broadcast-state" else 2
    shape = {"shared": (d, d), "per-sample": (2, d, d), "broadcast-state": (2, d, d),
             "broadcast-matrix": (1, d, d)}[batch]
    psi = _c128(oracle.random_state(n, rng, batch=B_state))
    m = _c128(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    out = apply_matrix_unchecked(psi, m, wires, n)
    assert type(out.grad_fn).__name__ == "_OnePassBackward"     # the kernels, not torch's ops
    fn = lambda s, u: apply_matrix_unchecked(s, u, wires, n)  # noqa: E731
    # 3-4 wires: 1000+ real inputs; fast mode checks the vector-Jacobian products along random
    # directions against finite differences instead of building the whole Jacobian
    assert torch.autograd.gradcheck(fn, (psi, m), fast_mode=len(wires) >= 3)
    if len(wires) <= 2:     # second derivatives: the backward recorded through the same kernels
        assert torch.autograd.gradgradcheck(fn, (psi, m))


@pytest.mark.parametrize("controls,targets", [((0,), (4,)), ((4, 1), (2,)), ((3,), (0, 2, 4))])
def test_controlled_gate_gradients(controls, targets):
    rng = np.random.default_rng(len(controls) + 3 * len(targets))
    d = 2 ** len(targets)
    psi = _c128(oracle.random_state(5, rng, batch=2))
    m = _c128(rng.standard_normal((2, d, d)) + 1j * rng.standard_normal((2, d, d)))
    out = apply_controlled_unchecked(psi, m, controls, targets, 5)
    assert type(out.grad_fn).__name__ == "_OnePassBackward"
    assert torch.autograd.gradcheck(lambda s, u: apply_controlled_unchecked(s, u, controls, targets, 5), (psi, m))


@pytest.mark.parametrize("keep_rest", [True, False])
@pytest.mark.parametrize("wires,levels", [((1, 3), (0, 3)), ((4, 0, 2, 3), (3, 12))])
def test_two_level_gradients(wires, levels, keep_rest):
    rng = np.random.default_rng(len(wires))
    psi = _c128(oracle.random_state(5, rng, batch=2))
    m = _c128(rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2)))
    fn = lambda s, u: apply_two_level_unchecked(s, u, levels, wires, 5, keep_rest)  # noqa: E731
    assert type(fn(psi, m).grad_fn).__name__ == "_OnePassBackward"
    assert torch.autograd.gradcheck(fn, (psi, m))


def test_only_the_state_or_only_the_matrix_needs_a_gradient(dtype):
    rng = np.random.default_rng(9)
    psi = torch.as_tensor(oracle.random_state(5, rng, batch=2), dtype=dtype)
    m = torch.as_tensor(oracle.random_unitary(4, rng), dtype=dtype)
    for s, u in ((psi.clone().requires_grad_(True), m), (psi, m.clone().requires_grad_(True))):
        out = apply_matrix_unchecked(s, u, (4, 1), 5)
        (out.abs() ** 2 * torch.arange(32)).sum().backward()
        leaf = s if s.requires_grad else u
        assert leaf.grad is not None and leaf.grad.shape == leaf.shape
    # the same numbers as torch's own ops (the path taken without the native library)
    s = psi.clone().requires_grad_(True)
    u = m.clone().requires_grad_(True)
    loss = (apply_matrix_unchecked(s, u, (4, 1), 5).abs() ** 2 * torch.arange(32)).sum()
    gs, gu = torch.autograd.grad(loss, (s, u))
    s2, u2 = psi.clone().requires_grad_(True), m.clone().requires_grad_(True)
    ref = torch.einsum("ij,bj...->bi...", u2, s2.reshape(2, 2, 2, 2, 2, 2).movedim((5, 2), (1, 2)).reshape(2, 4, 8))
    ref = ref.reshape(2, 2, 2, 2, 2, 2).movedim((1, 2), (5, 2)).reshape(2, 32)
    loss2 = (ref.abs() ** 2 * torch.arange(32)).sum()
    rs, ru = torch.autograd.grad(loss2, (s2, u2))
    np.testing.assert_allclose(gs.numpy(), rs.numpy(), atol=10 * ATOL[dtype])
    np.testing.assert_allclose(gu.numpy(), ru.numpy(), atol=10 * ATOL[dtype])


@pytest.mark.parametrize("wires,controls", [((9, 0, 14), (4,)), ((9, 0, 3), (4,)), ((12,), ()), ((14, 2), ()),
                                            ((13, 14), ()), ((0, 9), (14,)), ((13,), (14, 3))])
@pytest.mark.parametrize("per_sample", [False, True])
def test_gram_threads_split_the_groups(wires, controls, per_sample, dtype):
    """Past 2^15 amplitudes the gram sums in one part per thread (positions one by one, in
    registers where every bit is above them, with lane permutations for gate bits inside them and
    lane masks for controls there; a diagonal's as one stream): the same as the torch reference."""
    gen = torch.Generator().manual_seed(3)
    psi = torch.randn(2, 2 ** 15, dtype=dtype, generator=gen)
    g = torch.randn(2, 2 ** 15, dtype=dtype, generator=gen)
    old = torch.get_num_threads()
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            got = native.gram_levels(psi, g, wires, 15, None, controls, per_sample)
            ref = recorded.gram_torch(psi.to(torch.complex128), g.to(torch.complex128), wires, 15, None, controls,
                                      per_sample)
            # complex64 products sum in float registers for 64 steps before double: float rounding
            # of the sum's scale (the largest entry), as torch's own complex64 product would have
            scale = float(ref.abs().max()) * (1e-6 if dtype == torch.complex64 else 1e-12)
            np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=0, atol=scale)
            if not controls:
                only = native.gram_levels(psi, g, wires, 15, None, controls, per_sample, diagonal_only=True)
                diagonal = np.eye(2 ** len(wires), dtype=bool)
                np.testing.assert_allclose(only.numpy()[..., diagonal], ref.numpy()[..., diagonal], rtol=0, atol=scale)
                assert not only.numpy()[..., ~diagonal].any()
    finally:
        torch.set_num_threads(old)


def test_a_fixed_gate_keeps_no_copy_of_the_state():
    """Only a matrix that needs a gradient makes the node save the state it was applied to."""
    psi = torch.randn(1, 2 ** 6, dtype=torch.complex128).requires_grad_(True)
    fixed = torch.eye(4, dtype=torch.complex128)
    out = apply_matrix_unchecked(psi * 1, fixed, (5, 0), 6)
    saved = out.grad_fn.saved_tensors
    assert saved[0] is None and saved[1].shape == (4, 4)
    out.abs().sum().backward()
    assert psi.grad is not None


def test_wide_cpu_gates_keep_torchs_ops():
    """Past recorded.MAX_CPU_WIRES the CPU records torch's ops (their GEMM beats the scalar gram)."""
    psi = torch.randn(1, 2 ** 6, dtype=torch.complex128).requires_grad_(True)
    k = recorded.MAX_CPU_WIRES + 1
    assert k <= 5
    out = apply_matrix_unchecked(psi, torch.eye(2 ** k, dtype=torch.complex128), (5, 0, 2, 3, 1)[:k], 6)
    assert type(out.grad_fn).__name__ != "_OnePassBackward"


@pytest.mark.parametrize("wires", [(2,), (4, 0), (1, 2)])
@pytest.mark.parametrize("batch", ["shared", "per-sample", "broadcast-state"])
def test_diagonal_gate_gradients(wires, batch):
    """RZ / RZZ / CP-like diagonals: one node, the gradient the diagonal of the gram."""
    from torchquantum_layers.kernels.apply import apply_diagonal_unchecked
    rng = np.random.default_rng(len(wires) * 5 + len(batch))
    d = 2 ** len(wires)
    psi = _c128(oracle.random_state(5, rng, batch=1 if batch == "broadcast-state" else 2))
    shape = (d,) if batch == "shared" else (2, d)
    diag = _c128(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))
    fn = lambda s, v: apply_diagonal_unchecked(s, v, wires, 5)  # noqa: E731
    assert type(fn(psi, diag).grad_fn).__name__ == "_OnePassBackward"
    assert torch.autograd.gradcheck(fn, (psi, diag))
    assert torch.autograd.gradgradcheck(fn, (psi, diag))


@pytest.mark.parametrize("wires", [(3, 0), (4,), (1, 2)])   # positions one by one, and in registers
def test_diagonal_only_gram_is_the_grams_diagonal(wires, dtype):
    rng = np.random.default_rng(3)
    psi, g = oracle.random_state(5, rng, batch=2), oracle.random_state(5, rng, batch=2)
    T = lambda a: torch.as_tensor(a, dtype=dtype)  # noqa: E731
    full = native.gram_levels(T(psi), T(g), wires, 5)
    only = native.gram_levels(T(psi), T(g), wires, 5, diagonal_only=True)
    np.testing.assert_allclose(only.diagonal().numpy(), full.diagonal().numpy(), atol=1e-12)
    assert not only.numpy()[~np.eye(2 ** len(wires), dtype=bool)].any()
