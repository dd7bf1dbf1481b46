"""Kernels (apply_matrix / apply_diagonal / apply_permutation / apply_controlled) and state
constructors against the dense NumPy oracle (tests/oracle.py)."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from torchquantum_layers.kernels.apply import (apply_controlled, apply_diagonal, apply_matrix,
                                               apply_permutation, apply_two_level_unchecked)
from torchquantum_layers.kernels.state import (basis_state, n_wires_of, random_state, resolve_dtype,
                                               zero_state)

from . import oracle
from .conftest import ATOL

HYP = settings(max_examples=25, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture])


def T(x, dtype, device="cpu"):
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def N(t):
    return t.detach().cpu().numpy()


@st.composite
def wire_cases(draw, max_n=7, max_k=4, min_n=1):
    """(n, wires, seed): wires in any order, possibly scattered, reversed, spanning > 4."""
    n = draw(st.integers(min_n, max_n))
    k = draw(st.integers(1, min(max_k, n)))
    wires = tuple(draw(st.permutations(range(n)))[:k])
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return n, wires, seed


@st.composite
def control_cases(draw, max_n=7):
    n = draw(st.integers(2, max_n))
    order = draw(st.permutations(range(n)))
    kc = draw(st.integers(1, min(3, n - 1)))
    kt = draw(st.integers(1, min(3, n - kc)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return n, tuple(order[:kc]), tuple(order[kc:kc + kt]), seed


# wire tuples that hit every code path: contiguous block (with and without a trailing part
# small enough to be widened to a row GEMM), reversed, scattered within a span of 4 (widened
# with identities), scattered over more than 4 (moved), all wires in a shuffled order.
EXPLICIT_WIRES = [
    (7, (0,)), (7, (6,)), (7, (3,)), (7, (5, 6)), (7, (6, 5)), (7, (0, 1)), (7, (2, 3, 4)),
    (7, (4, 2)), (7, (3, 0)), (7, (1, 3, 2)), (7, (0, 6)), (7, (6, 0, 3)), (7, (5, 1, 3, 0)),
    (7, (0, 2, 4, 6)), (7, (4, 5, 6, 3)), (5, (4, 3, 2, 1)), (4, (2, 0, 3, 1)), (3, (2, 1, 0)),
    (2, (1, 0)), (1, (0,)), (6, (5, 0)),
]


# ---------------------------------------------------------------------------------------------
# the oracle itself
def test_oracle_full_operator_basics():
    rng = np.random.default_rng(0)
    u = oracle.random_unitary(4, rng)
    np.testing.assert_allclose(oracle.full_operator(u, (0, 1), 2), u)
    np.testing.assert_allclose(oracle.full_operator(u, (0, 1), 3), np.kron(u, np.eye(2)))
    np.testing.assert_allclose(oracle.full_operator(u, (1, 2), 3), np.kron(np.eye(2), u))
    swap = oracle.gate_matrix("SWAP")
    np.testing.assert_allclose(oracle.full_operator(u, (1, 0), 2), swap @ u @ swap)
    # X on wire 1 of 3 flips the middle bit of the index
    x1 = oracle.full_operator(oracle.X, (1,), 3)
    for i in range(8):
        assert x1[i ^ 0b010, i] == 1
    np.testing.assert_allclose(oracle.pauli_matrix("XZ"), np.kron(oracle.X, oracle.Z))


# ---------------------------------------------------------------------------------------------
# apply_matrix
def _check_matrix(n, wires, seed, dtype, device, mode):
    rng = np.random.default_rng(seed)
    d, B = 2 ** len(wires), 3
    if mode == "shared":
        u, psi = oracle.random_unitary(d, rng), oracle.random_state(n, rng, batch=B)
    elif mode == "per-sample":
        u, psi = oracle.random_unitaries(B, d, rng), oracle.random_state(n, rng, batch=B)
    elif mode == "broadcast-state":     # state batch 1, per-sample matrices
        u, psi = oracle.random_unitaries(B, d, rng), oracle.random_state(n, rng, batch=1)
    elif mode == "broadcast-matrix":    # matrix batch 1, state batch B
        u, psi = oracle.random_unitaries(1, d, rng), oracle.random_state(n, rng, batch=B)
    else:
        raise AssertionError(mode)
    out = apply_matrix(T(psi, dtype, device), T(u, dtype, device), wires)
    assert out.dtype == dtype and out.device.type == device
    ref = oracle.apply_dense(psi, u, wires, n)
    assert out.shape == ref.shape
    np.testing.assert_allclose(N(out), ref, atol=ATOL[dtype], err_msg=f"n={n} wires={wires} {mode}")


MODES = ["shared", "per-sample", "broadcast-state", "broadcast-matrix"]


@pytest.mark.parametrize("n,wires", EXPLICIT_WIRES)
def test_apply_matrix_paths(n, wires, dtype, device):
    for mode in MODES:
        _check_matrix(n, wires, 100 + n + sum(wires), dtype, device, mode)


@HYP
@given(case=wire_cases(), mode=st.sampled_from(MODES))
def test_apply_matrix_random_wires(case, mode, dtype, device):
    n, wires, seed = case
    _check_matrix(n, wires, seed, dtype, device, mode)


def test_apply_matrix_non_unitary_and_non_contiguous(dtype):
    """Kernels are linear maps: any matrix, and a non-contiguous state view, must work."""
    rng = np.random.default_rng(1)
    n, wires = 5, (3, 0, 4)
    a = rng.standard_normal((8, 8)) + 1j * rng.standard_normal((8, 8))
    psi = oracle.random_state(n, rng, batch=4)
    state = T(psi.T.copy(), dtype).T      # (4, 32) with strides (1, 4)
    assert not state.is_contiguous()
    out = apply_matrix(state, T(a, dtype), wires)
    np.testing.assert_allclose(N(out), oracle.apply_dense(psi, a, wires, n), atol=10 * ATOL[dtype])


def test_apply_matrix_does_not_modify_input(dtype):
    rng = np.random.default_rng(2)
    state = T(oracle.random_state(4, rng, batch=2), dtype)
    before = state.clone()
    for wires in [(1,), (2, 0), (0, 3), (3, 1, 2)]:
        apply_matrix(state, T(oracle.random_unitary(2 ** len(wires), rng), dtype), wires)
        free = [w for w in range(4) if w not in wires]
        apply_controlled(state, T(oracle.random_unitary(2, rng), dtype), [free[0]], [wires[0]])
        apply_diagonal(state, T(oracle.random_phases(2 ** len(wires), rng), dtype), wires)
        apply_permutation(state, rng.permutation(2 ** len(wires)).tolist(), wires)
    assert torch.equal(state, before)


def test_apply_matrix_known_states():
    # X on wire 0 of |000> gives |100> = index 4 (wire 0 is the most significant bit)
    s = apply_matrix(zero_state(3, dtype=torch.complex128), T(oracle.X, torch.complex128), [0])
    assert int(s.abs().argmax()) == 4
    # CNOT(0 -> 2) then on |100>: |101> = 5; with wires reversed (2 -> 0) it does nothing
    cnot = T(oracle.gate_matrix("CNOT"), torch.complex128)
    assert int(apply_matrix(s, cnot, [0, 2]).abs().argmax()) == 5
    assert int(apply_matrix(s, cnot, [2, 0]).abs().argmax()) == 4


def test_apply_matrix_gradcheck():
    rng = np.random.default_rng(3)
    psi = T(oracle.random_state(3, rng, batch=2), torch.complex128).requires_grad_(True)
    for wires, batch in [((1,), None), ((2, 0), 2), ((0, 2), None)]:
        d = 2 ** len(wires)
        u = oracle.random_unitary(d, rng) if batch is None else oracle.random_unitaries(batch, d, rng)
        u = T(u, torch.complex128).requires_grad_(True)
        assert torch.autograd.gradcheck(lambda s, m: apply_matrix(s, m, wires), (psi, u))


# ---------------------------------------------------------------------------------------------
# two-level blocks (Givens rotations): a 2 x 2 block on two local basis states, identity elsewhere
@HYP
@given(case=wire_cases(max_k=4), batched=st.booleans(), keep_rest=st.booleans())
def test_two_level_against_dense(case, batched, keep_rest, dtype, device):
    n, wires, seed = case
    rng = np.random.default_rng(seed)
    d = 2 ** len(wires)
    if d < 2:
        return
    a, b = (int(v) for v in rng.choice(d, size=2, replace=False))
    B = 3
    blocks = rng.standard_normal((B, 2, 2)) + 1j * rng.standard_normal((B, 2, 2))
    psi = oracle.random_state(n, rng, batch=B)
    block = T(blocks if batched else blocks[0], dtype, device)
    out = apply_two_level_unchecked(T(psi, dtype, device), block, (a, b), wires, n, keep_rest=keep_rest)
    expect = []
    for i in range(B):
        full = np.eye(d, dtype=complex) if keep_rest else np.zeros((d, d), dtype=complex)
        full[np.ix_([a, b], [a, b])] = blocks[i if batched else 0]
        expect.append(oracle.apply_dense(psi[i:i + 1], full, wires, n)[0])
    np.testing.assert_allclose(N(out), np.stack(expect), atol=10 * ATOL[dtype])


def test_two_level_gradcheck():
    rng = np.random.default_rng(4)
    psi = T(oracle.random_state(4, rng, batch=2), torch.complex128).requires_grad_(True)
    m = T(rng.standard_normal((2, 2, 2)) + 1j * rng.standard_normal((2, 2, 2)), torch.complex128)
    m.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s, b: apply_two_level_unchecked(s, b, (3, 12), (2, 0, 3, 1), 4),
                                    (psi, m))


# ---------------------------------------------------------------------------------------------
# apply_diagonal
def _check_diagonal(n, wires, seed, dtype, device, mode):
    rng = np.random.default_rng(seed)
    d, B = 2 ** len(wires), 3
    if mode == "shared":
        diag, psi = oracle.random_phases(d, rng), oracle.random_state(n, rng, batch=B)
    elif mode == "per-sample":
        diag, psi = np.stack([oracle.random_phases(d, rng) for _ in range(B)]), oracle.random_state(n, rng, batch=B)
    elif mode == "broadcast-state":
        diag, psi = np.stack([oracle.random_phases(d, rng) for _ in range(B)]), oracle.random_state(n, rng, batch=1)
    else:
        diag, psi = oracle.random_phases(d, rng)[None], oracle.random_state(n, rng, batch=B)
    out = apply_diagonal(T(psi, dtype, device), T(diag, dtype, device), wires)
    assert out.dtype == dtype
    ref = oracle.apply_diagonal_dense(psi, diag, wires, n)
    assert out.shape == ref.shape
    np.testing.assert_allclose(N(out), ref, atol=ATOL[dtype], err_msg=f"n={n} wires={wires} {mode}")


@pytest.mark.parametrize("n,wires", EXPLICIT_WIRES)
def test_apply_diagonal_paths(n, wires, dtype, device):
    for mode in MODES:
        _check_diagonal(n, wires, 200 + n + sum(wires), dtype, device, mode)


@HYP
@given(case=wire_cases(), mode=st.sampled_from(MODES))
def test_apply_diagonal_random_wires(case, mode, dtype, device):
    n, wires, seed = case
    _check_diagonal(n, wires, seed, dtype, device, mode)


# ---------------------------------------------------------------------------------------------
# apply_permutation
def _check_permutation(n, wires, seed, dtype, device):
    rng = np.random.default_rng(seed)
    d = 2 ** len(wires)
    perm = rng.permutation(d).tolist()
    psi = oracle.random_state(n, rng, batch=2)
    out = apply_permutation(T(psi, dtype, device), perm, wires)
    ref = oracle.apply_dense(psi, oracle.permutation_matrix(perm), wires, n)
    np.testing.assert_allclose(N(out), ref, atol=ATOL[dtype], err_msg=f"n={n} wires={wires} perm={perm}")
    # a permutation moves amplitudes exactly
    np.testing.assert_array_equal(np.sort(np.abs(N(out)), axis=1),
                                  np.sort(np.abs(N(T(psi, dtype))), axis=1))


@pytest.mark.parametrize("n,wires", EXPLICIT_WIRES)
def test_apply_permutation_paths(n, wires, dtype, device):
    _check_permutation(n, wires, 300 + n + sum(wires), dtype, device)


@HYP
@given(case=wire_cases())
def test_apply_permutation_random_wires(case, dtype, device):
    n, wires, seed = case
    _check_permutation(n, wires, seed, dtype, device)


def test_apply_permutation_convention():
    """new[i] = old[perm[i]]: a 3-cycle on one 2-wire block, reversed wires relabel bits."""
    psi = torch.arange(4, dtype=torch.float64).to(torch.complex128)[None]
    out = apply_permutation(psi, [1, 2, 0, 3], [0, 1])
    assert N(out).real.tolist() == [[1, 2, 0, 3]]
    # on wires (1, 0) the local index of global index i has its two bits swapped
    out = apply_permutation(psi, [1, 2, 0, 3], [1, 0])
    # global i -> local l(i) = swap bits; new[i] = old[l^-1(perm[l(i)])]
    swap = [0, 2, 1, 3]
    assert N(out).real.tolist() == [[swap[[1, 2, 0, 3][swap[i]]] for i in range(4)]]


def test_apply_permutation_accepts_tensors_and_tuples():
    psi = random_state(3, generator=torch.Generator().manual_seed(0), dtype=torch.complex128)
    a = apply_permutation(psi, torch.tensor([1, 0]), [2])
    b = apply_permutation(psi, (1, 0), (2,))
    assert torch.equal(a, b)


# ---------------------------------------------------------------------------------------------
# apply_controlled
def _check_controlled(n, controls, targets, seed, dtype, device, mode):
    rng = np.random.default_rng(seed)
    d, B = 2 ** len(targets), 3
    if mode == "shared":
        u, psi = oracle.random_unitary(d, rng), oracle.random_state(n, rng, batch=B)
    elif mode == "per-sample":
        u, psi = oracle.random_unitaries(B, d, rng), oracle.random_state(n, rng, batch=B)
    elif mode == "broadcast-state":
        u, psi = oracle.random_unitaries(B, d, rng), oracle.random_state(n, rng, batch=1)
    else:
        u, psi = oracle.random_unitaries(1, d, rng), oracle.random_state(n, rng, batch=B)
    out = apply_controlled(T(psi, dtype, device), T(u, dtype, device), controls, targets)
    assert out.dtype == dtype
    ref = oracle.apply_dense(psi, oracle.controlled_on_wires(u, controls, targets, n), list(range(n)), n)
    assert out.shape == ref.shape
    np.testing.assert_allclose(N(out), ref, atol=ATOL[dtype],
                               err_msg=f"n={n} controls={controls} targets={targets} {mode}")


CONTROL_CASES = [
    (2, (0,), (1,)), (2, (1,), (0,)), (3, (0, 1), (2,)), (3, (2, 0), (1,)), (4, (3,), (0, 1)),
    (4, (1,), (3, 0)), (5, (0, 4), (2,)), (6, (5,), (0, 3, 1)), (7, (6, 0, 3), (5, 1)),
    (7, (2,), (6, 0)), (7, (1, 5), (0, 3, 6)),
]


@pytest.mark.parametrize("n,controls,targets", CONTROL_CASES)
def test_apply_controlled_paths(n, controls, targets, dtype, device):
    for mode in MODES:
        _check_controlled(n, controls, targets, 400 + n + sum(controls), dtype, device, mode)


@HYP
@given(case=control_cases(), mode=st.sampled_from(MODES))
def test_apply_controlled_random_wires(case, mode, dtype, device):
    n, controls, targets, seed = case
    _check_controlled(n, controls, targets, seed, dtype, device, mode)


def test_apply_controlled_equals_dense_controlled_matrix(dtype):
    """apply_controlled(U, c, t) == apply_matrix(controlled(U), c + t)."""
    rng = np.random.default_rng(4)
    u = oracle.random_unitary(4, rng)
    psi = T(oracle.random_state(5, rng, batch=2), dtype)
    a = apply_controlled(psi, T(u, dtype), [3], [4, 0])
    b = apply_matrix(psi, T(oracle.controlled_matrix(u, 1), dtype), [3, 4, 0])
    np.testing.assert_allclose(N(a), N(b), atol=ATOL[dtype])


def test_apply_controlled_gradcheck():
    rng = np.random.default_rng(5)
    psi = T(oracle.random_state(3, rng, batch=2), torch.complex128).requires_grad_(True)
    u = T(oracle.random_unitaries(2, 2, rng), torch.complex128).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda s, m: apply_controlled(s, m, [2], [0]), (psi, u))


# ---------------------------------------------------------------------------------------------
# bad input: ValueError / TypeError naming the fault
S3 = zero_state(3)                        # complex64, n = 3
U1 = torch.eye(2, dtype=torch.complex64)
U2 = torch.eye(4, dtype=torch.complex64)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: apply_matrix(S3, U1, [3]), ValueError, "apply_matrix: wire 3 is out of range for 3 wires"),
    (lambda: apply_matrix(S3, U1, [-1]), ValueError, "wire -1 is out of range"),
    (lambda: apply_matrix(S3, U2, [1, 1]), ValueError, r"repeated wires \(1, 1\)"),
    (lambda: apply_matrix(S3, U1, [1.0]), TypeError, "wire 1.0 is not an int"),
    (lambda: apply_matrix(S3, U1, [True]), TypeError, "wire True is not an int"),
    (lambda: apply_matrix(S3, U2, [0]), ValueError, r"shape \(4, 4\) does not act on 1 wires"),
    (lambda: apply_matrix(S3, torch.eye(2, 4, dtype=torch.complex64), [0]), ValueError, "does not act on"),
    (lambda: apply_matrix(S3, torch.ones(2, dtype=torch.complex64), [0]), ValueError, "does not act on"),
    (lambda: apply_matrix(S3, U1.to(torch.complex128), [0]), TypeError, "complex128.*complex64"),
    (lambda: apply_matrix(S3, torch.eye(2), [0]), TypeError, "float32"),
    (lambda: apply_matrix(zero_state(3, batch=2), U1.expand(3, 2, 2), [0]), ValueError,
     "per-sample operator batch 3 does not match state batch 2"),
    (lambda: apply_matrix(torch.zeros(1, 6, dtype=torch.complex64), U1, [0]), ValueError,
     "state length 6 is not a power of two"),
    (lambda: apply_matrix(torch.zeros(8, dtype=torch.complex64), U1, [0]), ValueError,
     r"state must have shape \(batch, 2\*\*n\), got shape \(8,\)"),
    (lambda: apply_matrix(torch.zeros(1, 2, 4, dtype=torch.complex64), U1, [0]), ValueError,
     r"got shape \(1, 2, 4\)"),
    (lambda: apply_matrix(torch.zeros(1, 8), U1, [0]), TypeError, "state dtype must be complex64 or complex128"),
    (lambda: apply_matrix(np.zeros((1, 8), complex), U1, [0]), TypeError, "state must be a torch.Tensor"),
    (lambda: apply_diagonal(S3, torch.ones(4, dtype=torch.complex64), [0]), ValueError,
     r"apply_diagonal: diagonal of shape \(4,\) does not act on 1 wires"),
    (lambda: apply_diagonal(S3, torch.ones(2, 2, 2, dtype=torch.complex64), [0]), ValueError, "does not act on"),
    (lambda: apply_diagonal(S3, torch.ones(2, dtype=torch.complex64), [4]), ValueError,
     "apply_diagonal: wire 4 is out of range"),
    (lambda: apply_diagonal(S3, torch.ones(4, dtype=torch.complex64), [2, 2]), ValueError, "repeated wires"),
    (lambda: apply_diagonal(zero_state(3, batch=2), torch.ones(3, 2, dtype=torch.complex64), [0]), ValueError,
     "per-sample operator batch 3 does not match state batch 2"),
    (lambda: apply_permutation(S3, [0, 0], [1]), ValueError, r"\[0, 0\] is not a permutation of range\(2\)"),
    (lambda: apply_permutation(S3, [0, 1, 2], [1]), ValueError, "is not a permutation"),
    (lambda: apply_permutation(S3, [1, 2], [1]), ValueError, "is not a permutation"),
    (lambda: apply_permutation(S3, [1, 0], [3]), ValueError, "apply_permutation: wire 3 is out of range"),
    (lambda: apply_permutation(S3, [0, 1, 2, 3], [0, 0]), ValueError, "repeated wires"),
    (lambda: apply_controlled(S3, U1, [0], [0]), ValueError, r"wires \[0\] are both control and target"),
    (lambda: apply_controlled(S3, U2, [0, 1], [1, 2]), ValueError, "both control and target"),
    (lambda: apply_controlled(S3, U1, [3], [0]), ValueError, "apply_controlled: wire 3 is out of range"),
    (lambda: apply_controlled(S3, U1, [0], [5]), ValueError, "wire 5 is out of range"),
    (lambda: apply_controlled(S3, U1, [0, 0], [1]), ValueError, "repeated wires"),
    (lambda: apply_controlled(zero_state(3, batch=2), U1.expand(3, 2, 2), [0], [1]), ValueError,
     "per-sample operator batch 3 does not match state batch 2"),
], ids=lambda v: "" if callable(v) or isinstance(v, type) else v[:40])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# Operand dtype and shape are checked before any torch operation runs.
def test_apply_diagonal_dtype_mismatch():
    with pytest.raises(TypeError, match="apply_diagonal"):
        apply_diagonal(S3, torch.ones(2, dtype=torch.complex128), [0])


def test_apply_controlled_dtype_mismatch():
    with pytest.raises(TypeError, match="apply_controlled"):
        apply_controlled(S3, U1.to(torch.complex128), [0], [1])


def test_apply_controlled_wrong_matrix_shape():
    with pytest.raises(ValueError, match="apply_controlled"):
        apply_controlled(S3, U2, [0], [1])


# ---------------------------------------------------------------------------------------------
# states
def test_zero_state(dtype, device):
    s = zero_state(3, batch=2, dtype=dtype, device=device)
    assert s.shape == (2, 8) and s.dtype == dtype and s.device.type == device
    ref = np.zeros((2, 8))
    ref[:, 0] = 1
    np.testing.assert_array_equal(N(s), ref)
    assert zero_state(2).dtype == torch.complex64
    assert zero_state(0).shape == (1, 1)


@pytest.mark.parametrize("bits,index", [("0110", 6), ("1", 1), ("0", 0), ("100", 4), ("001", 1),
                                        ("1011", 11), ([0, 1, 1, 0], 6), ((1, 1, 1), 7)])
def test_basis_state(bits, index, dtype):
    s = basis_state(bits, batch=3, dtype=dtype)
    n = len(bits)
    assert s.shape == (3, 2 ** n) and s.dtype == dtype
    ref = np.zeros((3, 2 ** n))
    ref[:, index] = 1
    np.testing.assert_array_equal(N(s), ref)


def test_basis_state_wire0_is_most_significant():
    """X on wire w of |0...0> gives basis_state with a 1 at position w."""
    n = 4
    for w in range(n):
        s = apply_permutation(zero_state(n), [1, 0], [w])
        bits = ["0"] * n
        bits[w] = "1"
        assert torch.equal(s, basis_state("".join(bits)))


@pytest.mark.parametrize("bits,match", [("012", "only 0 and 1"), ("01a", "only 0 and 1"),
                                        ([0, 2], "bits must be 0 or 1"), ([-1], "bits must be 0 or 1")])
def test_basis_state_errors(bits, match):
    with pytest.raises(ValueError, match=match):
        basis_state(bits)


def test_state_dtype_resolution():
    assert resolve_dtype(None) == torch.complex64
    assert resolve_dtype(torch.float64) == torch.complex128
    assert zero_state(1, dtype=torch.float32).dtype == torch.complex64
    with pytest.raises(TypeError, match="torch.int64"):
        zero_state(1, dtype=torch.int64)
    with pytest.raises(TypeError, match="complex64 or torch.complex128"):
        random_state(1, dtype=torch.float16)


def test_state_allocation_refused():
    with pytest.raises(MemoryError, match="60 qubits"):
        zero_state(60)
    with pytest.raises(ValueError, match="batch >= 1"):
        zero_state(2, batch=0)


def test_random_state(dtype, device):
    g = torch.Generator().manual_seed(123)
    s = random_state(5, batch=4, generator=g, dtype=dtype, device=device)
    assert s.shape == (4, 32) and s.dtype == dtype and s.device.type == device
    np.testing.assert_allclose(N(torch.linalg.vector_norm(s, dim=1)), np.ones(4), atol=ATOL[dtype])
    again = random_state(5, batch=4, generator=torch.Generator().manual_seed(123), dtype=dtype, device=device)
    assert torch.equal(s, again)
    other = random_state(5, batch=4, generator=torch.Generator().manual_seed(124), dtype=dtype, device=device)
    assert not torch.allclose(s, other)
    # the rows of a batch differ and carry complex phases
    assert not torch.allclose(s[0], s[1])
    assert s.imag.abs().max() > 0
    assert random_state(3).dtype == torch.complex64


def test_n_wires_of():
    assert n_wires_of(zero_state(5)) == 5
    assert n_wires_of(torch.zeros(3, 1, dtype=torch.complex128)) == 0
    with pytest.raises(ValueError, match="not a power of two"):
        n_wires_of(torch.zeros(1, 0, dtype=torch.complex64))


def test_qiskit_order_conversion(dtype, device):
    # Qiskit indexes |q_{n-1} … q1 q0>: wire w is bit w of the index (little-endian).
    from torchquantum_layers import from_qiskit_order, to_qiskit_order
    n = 4
    s = random_state(n, 3, generator=torch.Generator().manual_seed(2), dtype=dtype).to(device)
    q = to_qiskit_order(s)
    for i in range(2 ** n):
        rev = int(format(i, f"0{n}b")[::-1], 2)
        assert torch.equal(q[:, rev], s[:, i])
    assert torch.equal(from_qiskit_order(q), s)
    # X on our wire 0 flips Qiskit's bit 0 (the least significant one)
    from torchquantum_layers.functional import x as xgate
    b = basis_state("0000", dtype=dtype, device=device)
    assert to_qiskit_order(xgate(b, wires=0))[0, 1] == 1


def test_uncached_index_paths_match_the_cached_ones(monkeypatch, dtype):
    """Large spans and registers build their index vectors per call instead of caching them."""
    import torchquantum_layers.kernels.apply as K
    rng = np.random.default_rng(7)
    n = 5
    psi = oracle.random_state(n, rng, batch=2)
    block = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    perm = rng.permutation(8).tolist()
    cached_two = K.apply_two_level_unchecked(T(psi, dtype), T(block, dtype), (3, 12), (4, 0, 2, 1), n)
    cached_perm = apply_permutation(T(psi, dtype), perm, (4, 0, 2))
    monkeypatch.setattr(K, "_CACHED_INDEX_MAX", 1)
    assert torch.equal(K.apply_two_level_unchecked(T(psi, dtype), T(block, dtype), (3, 12), (4, 0, 2, 1), n),
                       cached_two)
    assert torch.equal(apply_permutation(T(psi, dtype), perm, (4, 0, 2)), cached_perm)
    full = np.eye(16, dtype=complex)
    full[np.ix_([3, 12], [3, 12])] = block
    np.testing.assert_allclose(N(cached_two), oracle.apply_dense(psi, full, (4, 0, 2, 1), n), atol=10 * ATOL[dtype])


# ---------------------------------------------------------------------------------------------
# large batches of small registers: the batch's rows times the free positions of a gate are
# not always a multiple of the one-pass kernels' work units (levels.c left a row unwritten)
@pytest.mark.parametrize("n,wires", [(6, (0, 2, 3)), (4, (3, 0, 1)), (7, (6, 1, 3, 4)), (6, (5, 0)), (5, (2, 4))])
@pytest.mark.parametrize("batch", [129, 200, 385])
def test_odd_large_batches_against_dense(n, wires, batch, dtype):
    rng = np.random.default_rng(batch + n)
    d = 2 ** len(wires)
    u = oracle.random_unitary(d, rng)
    psi = oracle.random_state(n, rng, batch=batch)
    state = T(psi, dtype)
    expect = oracle.apply_dense(psi, u, wires, n)
    np.testing.assert_allclose(N(apply_matrix(state, T(u, dtype), wires)), expect, atol=10 * ATOL[dtype])
    a, b = (int(v) for v in rng.choice(d, size=2, replace=False))
    block = oracle.random_unitary(2, rng)
    full = np.eye(d, dtype=complex)
    full[np.ix_([a, b], [a, b])] = block
    np.testing.assert_allclose(N(apply_two_level_unchecked(state, T(block, dtype), (a, b), wires, n)),
                               oracle.apply_dense(psi, full, wires, n), atol=10 * ATOL[dtype])
    phases = np.exp(1j * rng.uniform(0, 2 * np.pi, d))
    np.testing.assert_allclose(N(apply_diagonal(state, T(phases, dtype), wires)),
                               oracle.apply_dense(psi, np.diag(phases), wires, n), atol=10 * ATOL[dtype])
    perm = rng.permutation(d)
    np.testing.assert_allclose(N(apply_permutation(state, tuple(int(p) for p in perm), wires)),
                               oracle.apply_dense(psi, oracle.permutation_matrix(perm), wires, n), atol=10 * ATOL[dtype])
    controls, targets = wires[:1], wires[1:]
    v = oracle.random_unitary(2 ** len(targets), rng)
    np.testing.assert_allclose(N(apply_controlled(state, T(v, dtype), controls, targets)),
                               oracle.apply_dense(psi, oracle.controlled_matrix(v, 1), wires, n), atol=10 * ATOL[dtype])
    # the matrix gradient (one-pass gram kernels under autograd): d Re<g, U psi>/dU = g psi^H summed
    g = oracle.random_state(n, rng, batch=batch)
    m = T(u, dtype).requires_grad_(True)
    out = apply_matrix(state, m, wires)
    (out * T(g, dtype).conj()).real.sum().backward()
    # torch's convention for a complex leaf: dL/dRe + i dL/dIm = Σ_b g_b ψ_b^H, the wires' axes first
    axes = list(wires) + [w for w in range(n) if w not in wires]
    G = np.zeros((d, d), dtype=complex)
    for gb, pb in zip(g, psi):
        G += gb.reshape([2] * n).transpose(axes).reshape(d, -1) @ pb.reshape([2] * n).transpose(axes).reshape(d, -1).conj().T
    np.testing.assert_allclose(N(m.grad), G, atol=100 * ATOL[dtype] * batch ** 0.5)
