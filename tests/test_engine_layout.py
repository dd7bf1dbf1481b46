"""The engine's rotating register layout and its product-state prefix, against dense NumPy.

Oracles: tests/oracle.py (Kronecker-product matrices), numpy transposes for the layouts,
numpy einsum for the Gram products, torch.autograd.gradcheck in complex128.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers.circuit import Input, Param
from torchquantum_layers.engine import build_plan
from torchquantum_layers.kernels import layout as L

from . import oracle
from . import strategies as S
from .conftest import REAL

pytestmark = pytest.mark.usefixtures("blocks_engine")  # the block engine's layouts


def _np(t):
    return t.detach().cpu().numpy()


def _state(n, batch, dtype, device, seed=0):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(oracle.random_state(n, rng, batch=batch), dtype=dtype, device=device)


# ---------------------------------------------------------------------------------------------
# kernels
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("per_sample", [False, True])
def test_rotations_apply_the_block_and_move_its_wires(k, per_sample, dtype, device, atol):
    n, B = 5, 3
    rng = np.random.default_rng(k)
    psi = _state(n, B, dtype, device)
    u = oracle.random_unitaries(B, 2 ** k, rng) if per_sample else oracle.random_unitary(2 ** k, rng)
    m = torch.as_tensor(u, dtype=dtype, device=device)
    back = list(range(n - k, n))
    # back_to_front: u on the last k wires, then those wires first
    want = oracle.apply_dense(_np(psi), u, back, n).reshape(B, *[2] * n)
    want = want.transpose([0] + [1 + w for w in back + list(range(n - k))]).reshape(B, -1)
    np.testing.assert_allclose(_np(L.back_to_front(psi, m, k)), want, atol=atol)
    # front_to_back: u on the first k wires, then those wires last
    front = list(range(k))
    want = oracle.apply_dense(_np(psi), u, front, n).reshape(B, *[2] * n)
    want = want.transpose([0] + [1 + w for w in list(range(k, n)) + front]).reshape(B, -1)
    np.testing.assert_allclose(_np(L.front_to_back(psi, m, k)), want, atol=atol)


def test_rotation_broadcasts_a_single_state_over_per_sample_matrices(dtype, device, atol):
    rng = np.random.default_rng(1)
    psi = _state(4, 1, dtype, device)
    u = oracle.random_unitaries(3, 4, rng)
    out = L.front_to_back(psi, torch.as_tensor(u, dtype=dtype, device=device), 2)
    assert out.shape == (3, 16)
    for b in range(3):
        np.testing.assert_allclose(_np(out[b]), _np(L.front_to_back(psi, torch.as_tensor(
            u[b], dtype=dtype, device=device), 2))[0], atol=atol)


@pytest.mark.parametrize("order_to", [(2, 3, 4, 0, 1), (4, 0, 1, 2, 3), (3, 0, 4, 1, 2)])
def test_relayout_is_the_numpy_transpose(order_to, dtype, device):
    n, B = 5, 2
    order_from = (0, 1, 2, 3, 4)
    psi = _state(n, B, dtype, device)
    want = _np(psi).reshape(B, *[2] * n).transpose([0] + [1 + w for w in order_to]).reshape(B, -1)
    np.testing.assert_array_equal(_np(L.relayout(psi, order_from, order_to)), want)
    back = L.relayout(L.relayout(psi, order_from, order_to), order_to, order_from)
    np.testing.assert_array_equal(_np(back), _np(psi))


@pytest.mark.parametrize("to_back", [False, True])
def test_gram_products_match_einsum(to_back, dtype, device, atol):
    n, k, B = 5, 2, 3
    d, X = 2 ** k, 2 ** (n - k)
    g, psi = _state(n, B, dtype, device, 1), _state(n, B, dtype, device, 2)
    gn, pn = _np(g), _np(psi)
    if to_back:     # λ after the block has its wires last, ψ before it first
        want = np.einsum("bxi,bjx->bij", gn.reshape(B, X, d), pn.reshape(B, d, X).conj())
    else:
        want = np.einsum("bix,bxj->bij", gn.reshape(B, d, X), pn.reshape(B, X, d).conj())
    np.testing.assert_allclose(_np(L.rotation_gram(g, psi, k, to_back)), want, atol=10 * atol)


def test_output_gram_equals_the_input_gram(dtype, device, atol):
    n, k, B = 5, 2, 3
    rng = np.random.default_rng(3)
    m = torch.as_tensor(oracle.random_unitary(2 ** k, rng), dtype=dtype, device=device)
    psi_in, g = _state(n, B, dtype, device, 4), _state(n, B, dtype, device, 5)
    psi_out = L.front_to_back(psi_in, m, k)
    want = L.rotation_gram(g, psi_in, k, to_back=True).sum(0)
    np.testing.assert_allclose(_np(L.output_gram(g, psi_out, m, k)), _np(want), atol=10 * atol)


@pytest.mark.parametrize("to_back", [False, True])
@pytest.mark.parametrize("matrix_batch", [None, 1, 3])
@pytest.mark.parametrize("state_batch", [1, 3])
def test_rotation_gradcheck(to_back, matrix_batch, state_batch, device):
    if matrix_batch == 3 and state_batch not in (1, 3):
        pytest.skip("incompatible batches")
    rng = np.random.default_rng(6)
    k = 2
    psi = _state(4, state_batch, torch.complex128, device).requires_grad_()
    shape = (4, 4) if matrix_batch is None else (matrix_batch, 4, 4)
    m = torch.as_tensor(rng.normal(size=shape) + 1j * rng.normal(size=shape), device=device).requires_grad_()
    assert torch.autograd.gradcheck(lambda s, a: L.rotate(s, a, k, to_back), (psi, m))
    # unitary blocks (what the engine passes): the shared front-to-back gradient comes from the output
    h = m.detach()

    def unitary_rotate(s, a):
        u = torch.linalg.matrix_exp(1j * (a + a.conj().transpose(-1, -2)))
        return L.rotate(s, u, k, to_back, unitary=True)
    assert torch.autograd.gradcheck(unitary_rotate, (psi, h.requires_grad_()))


# ---------------------------------------------------------------------------------------------
# the engine's schedule
def _layered(n, dtype, device, width):
    c = tql.Circuit(n, max_fused_wires=width, dtype=dtype)
    for w in range(n):
        c.ry(w, input=w)
    for _ in range(2):
        for w in range(n):
            c.rx(w, trainable=True)
            c.rz(w, trainable=True)
        for w in range(n):
            c.cnot(w, (w + 1) % n)
    c.rot(1, trainable=True)          # a lone block in the middle: stays in place
    c.ry(1, trainable=True)
    c.crx(3, 0, trainable=True)       # scattered wires
    return c.to(device)


def _oracle(c, x, psi0):
    w = _np(c.weights).astype(np.float64)
    ops = []
    for op in c.ops:
        vals = []
        for a in op.angles:
            if isinstance(a, Param):
                vals.append(w[a.index] * a.scale)
            elif isinstance(a, Input):
                vals.append(_np(x)[:, a.column].astype(np.float64) * a.scale)
            else:
                vals.append(float(a))
        data = c.data(op)
        ops.append((op.gate.name if data is None else _np(data).astype(np.complex128), op.wires, vals))
    return oracle.run_ops(ops, c.n_wires, psi0)


@pytest.mark.parametrize("width", [2, 3, 4])
def test_rotating_schedule_matches_oracle(width, dtype, device, atol):
    n, B = 6, 3
    c = _layered(n, dtype, device, width)
    modes = {s.mode for s in build_plan(c, layout=True).steps}
    assert "in-place" in modes and modes & {"front-to-back", "back-to-front"}, modes
    x = torch.rand(B, n, dtype=REAL[dtype], device=device)
    psi0 = _state(n, B, dtype, device, 7)
    np.testing.assert_allclose(_np(c(x, state=psi0)), _oracle(c, x, _np(psi0)), atol=atol)
    zero = np.zeros((B, 2 ** n))
    zero[:, 0] = 1
    np.testing.assert_allclose(_np(c(x)), _oracle(c, x, zero), atol=atol)   # via the prefix


def test_permutation_out_of_order_relayouts_first(dtype, device, atol):
    """A block that leaves the register rotated before a CNOT chain: the chain's span is out of
    logical order, so the plan goes back to the canonical order first."""
    n = 5
    c = tql.Circuit(n, max_fused_wires=2, dtype=dtype)
    for w in (0, 1):
        c.h(w)
        c.ry(w, trainable=True)
    for w in range(n - 1):
        c.cnot(w, w + 1)
    c = c.to(device)
    kinds = [(s.kind, s.mode) for s in build_plan(c, layout=True).steps]
    assert ("dense", "front-to-back") in kinds and kinds.index(("relayout", "in-place")) < [
        k for k, _ in kinds].index("perm"), kinds
    psi0 = _state(n, 2, dtype, device, 8)
    np.testing.assert_allclose(_np(c(state=psi0)), _oracle(c, None, _np(psi0)), atol=atol)


# ---------------------------------------------------------------------------------------------
# product-state prefix
def _prefix_circuit(dtype, device):
    c = tql.Circuit(4, dtype=dtype)
    c.h(0)
    c.ry(0, input=0)
    c.rz(0, trainable=True)
    c.rx(1, 0.4)
    c.s(1)
    c.qubitunitary(2, matrix=oracle.random_unitary(2, np.random.default_rng(9)))  # data: not tabulated
    c.ry(2, trainable=True)
    c.cnot(0, 1)
    c.ry(1, input=1)                  # after the CNOT: not in the prefix
    c.rx(3, trainable=True)           # wire 3 keeps its prefix to the end
    return c.to(device)


def test_prefix_collects_each_wires_leading_single_wire_gates():
    c = _prefix_circuit(torch.complex64, "cpu")
    plan = build_plan(c, layout=True, zero_start=True)
    prefix = plan.steps[0]
    assert prefix.kind == "prefix"
    assert [(op.gate.name, op.wires) for op in prefix.ops] == [
        ("H", (0,)), ("RY", (0,)), ("RZ", (0,)), ("RX", (1,)), ("S", (1,)), ("RX", (3,))]
    assert all(op not in prefix.ops for s in plan.steps[1:] for op in s.ops)


@pytest.mark.parametrize("method", ["backprop", "adjoint"])
def test_prefix_state_and_gradients(method, dtype, device, atol):
    c = _prefix_circuit(dtype, device)
    x = torch.rand(3, 2, dtype=REAL[dtype], device=device)
    zero = np.zeros((3, 16))
    zero[:, 0] = 1
    np.testing.assert_allclose(_np(c(x)), _oracle(c, x, zero), atol=atol)
    obs = [tql.PauliString("Z0 Z1"), tql.PauliString("X2"), tql.PauliString("Y3")]
    if dtype != torch.complex128:
        return
    w0 = c.weights.detach().clone()

    def f(w, xx):
        return tql.expval(c, obs, x=xx, diff_method=method, weights=w)
    assert torch.autograd.gradcheck(f, (w0.requires_grad_(), x.clone().requires_grad_()), eps=1e-6, atol=1e-6)


def test_prefix_without_gates_is_the_zero_state(dtype, device):
    c = tql.Circuit(3, dtype=dtype)
    c.cnot(0, 1)
    c = c.to(device)
    out = c()
    want = torch.zeros(1, 8, dtype=dtype, device=device)
    want[0, 0] = 1
    assert torch.equal(out, want)


def test_second_derivatives_through_rotating_blocks_and_the_prefix():
    """Hessian by double backprop (through the rotations' own backward and the product state)
    against central differences of first derivatives."""
    c = _layered(6, torch.complex128, "cpu", 3)
    assert {"front-to-back", "back-to-front"} & {s.mode for s in build_plan(c, layout=True).steps}
    obs = tql.Hamiltonian([(0.7, "Z0 Z3"), (-0.4, "X1"), (0.2, "Y5 Z2")])
    x = torch.rand(2, 6, dtype=torch.float64)
    hess = tql.grad.hessian(c, obs, x=x)
    np.testing.assert_allclose(hess.numpy(), S.gradient_differences(c, obs, x).numpy(), atol=1e-6)


def test_output_rows_are_their_own_memory(dtype, device):
    """A circuit whose state never depends on x still returns one writable row per sample."""
    c = tql.Circuit(3, dtype=dtype)
    c.h(0)
    c.ry(1, 0.3)
    c = c.to(device)
    out = c(torch.zeros(4, 1, dtype=REAL[dtype], device=device))   # the batch comes from x alone
    assert out.shape == (4, 8) and out.stride(0) == 8
    out[0, 0] = 0          # in place on one row only
    assert out[1, 0] != 0


@pytest.mark.parametrize("method", ["backprop", "adjoint"])
@pytest.mark.parametrize("width", [2, 3])
@pytest.mark.parametrize("given_state", [False, True])
def test_gradcheck_through_rotating_blocks(method, width, given_state):
    """Trainable angles, input angles and (when given) the input state, in complex128."""
    c = _layered(6, torch.complex128, "cpu", width)
    assert {s.mode for s in build_plan(c, layout=True).steps} & {"front-to-back", "back-to-front"}
    obs = [tql.PauliString("Z0 Z5"), tql.PauliString("X2 Y3"), tql.Hamiltonian([(0.3, "Z1"), (0.5, "X4")])]
    x = torch.rand(2, 6, dtype=torch.float64, requires_grad=True)
    w = c.weights.detach().clone().requires_grad_()
    psi = _state(6, 2, torch.complex128, "cpu", 11).requires_grad_() if given_state else None

    def f(w, x, *state):
        return tql.expval(c, obs, x=x, state=state[0] if state else None, diff_method=method, weights=w)
    args = (w, x) + ((psi,) if given_state else ())
    # with the state's 256 real inputs: fast mode (random-direction vJp against finite differences)
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, fast_mode=given_state)
