"""Odd shapes and layouts of the state the kernels must take as any other: conjugate views,
non-contiguous rows, batches off every power of two. Compared against the NumPy oracle."""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql

from . import oracle as O


def _conj_view(state_np, dtype):
    """A conjugate view (``t.conj()``, unresolved) whose values are ``state_np``."""
    t = torch.tensor(np.conj(state_np), dtype=dtype).conj()
    assert t.is_conj()
    return t


@pytest.mark.parametrize("batch", [1, 3, 129])
def test_permutation_of_a_conjugate_view(dtype, atol, batch):
    # the torch fallback of a span gather reinterpreted complex64 rows as float64, which a
    # conjugate view refuses (RuntimeError from deep inside torch)
    rng = np.random.default_rng(batch)
    n = 4
    psi = O.random_state(n, rng, batch)
    for name, wires in [("TOFFOLI", (2, 1, 3)), ("CNOT", (0, 3)), ("SWAP", (1, 3)), ("X", (3,)),
                        ("CSWAP", (3, 0, 2))]:
        out = tql.functional.apply_gate(_conj_view(psi, dtype), name, wires=wires)
        want = O.apply_dense(psi, O.gate_matrix(name), wires, n)
        np.testing.assert_allclose(out.resolve_conj().numpy(), want, atol=atol, err_msg=name)


def test_circuit_on_a_conjugate_view(engine_mode, dtype, atol):
    rng = np.random.default_rng(7)
    n, batch = 5, 7
    psi = O.random_state(n, rng, batch)
    ops = [("TOFFOLI", (4, 1, 2), ()), ("RY", 2, (0.3,)), ("CNOT", (0, 4), ()), ("SWAP", (3, 1), ()),
           ("RX", 0, (-1.2,)), ("CSWAP", (2, 4, 0), ())]
    c = tql.Circuit(n, dtype=dtype)
    for name, wires, angles in ops:
        c.add(name, wires, *angles)
    out = c(state=_conj_view(psi, dtype))
    np.testing.assert_allclose(out.detach().resolve_conj().numpy(), O.run_ops(ops, n, psi), atol=atol)


def test_permutation_gradient_of_a_conjugate_view(dtype, atol):
    rng = np.random.default_rng(3)
    n, batch = 3, 5
    psi = O.random_state(n, rng, batch)
    w = O.random_state(n, rng, batch)
    state = _conj_view(psi, dtype).requires_grad_(True)
    out = tql.functional.toffoli(state, wires=(0, 2, 1))
    (out * torch.tensor(w, dtype=dtype).conj()).real.sum().backward()
    # d/d psi of Re <w|U|psi> (torch's convention): U^dagger w
    u = O.gate_matrix("TOFFOLI")
    want = O.apply_dense(w, u.conj().T, (0, 2, 1), n)
    np.testing.assert_allclose(state.grad.resolve_conj().numpy(), want, atol=atol)


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])
def test_program_gradients_repeat_exactly(diff_method):
    # the threads' sums of a shared slot's gradient were added in arrival order (an OpenMP
    # critical section): identical calls differed in the last bits. Oversubscribed threads
    # vary the order; the sums must not depend on it.
    from torchquantum_layers import engine
    from torchquantum_layers.kernels import native, program
    if native.library() is None:
        pytest.skip(f"needs the native library: {native.status()}")
    old = torch.get_num_threads(), engine.USE_PROGRAMS, program.MAX_ROW_BYTES
    torch.set_num_threads(4)
    engine.USE_PROGRAMS, program.MAX_ROW_BYTES = True, 2 ** 17
    try:
        n, batch = 10, 129
        c = tql.Circuit(n, dtype=torch.complex128)
        for w in range(n):
            c.ry(w, trainable=True)
            c.rx(w, input=w % 2)
        for w in range(n):
            c.cnot(w, (w + 1) % n)
        for w in range(n):
            c.rz(w, trainable=True)
        x = torch.linspace(-2, 2, 2 * batch, dtype=torch.float64).reshape(batch, 2)
        H = tql.Hamiltonian([(0.7, "Z0 X1"), (-0.3, "Y2"), (0.2, "Z1 Z5")], n_wires=n)
        first = None
        for _ in range(12):
            c.weights.grad = None
            tql.expval(c, H, x=x, diff_method=diff_method).sum().backward()
            if first is None:
                first = c.weights.grad.clone()
            else:
                assert torch.equal(c.weights.grad, first), (c.weights.grad - first).abs().max()
    finally:
        torch.set_num_threads(old[0])
        engine.USE_PROGRAMS, program.MAX_ROW_BYTES = old[1:]


def test_expectations_of_a_conjugate_view(dtype):
    """view_as_real refuses a conjugate view: tql.expval(psi.conj(), H) crashed (NumPy oracle)."""
    rng = np.random.default_rng(21)
    psi = rng.normal(size=(3, 8)) + 1j * rng.normal(size=(3, 8))
    psi /= np.linalg.norm(psi, axis=1, keepdims=True)
    H = tql.Hamiltonian.from_string("0.5*Z0 Z1 + 0.3*X2 - 0.2*Y0 Y2 + 0.7*Y1")
    dense = H.to_dense(3).numpy()
    view = torch.tensor(psi, dtype=dtype).conj()
    assert view.is_conj()
    want = np.einsum("bi,ij,bj->b", psi, dense, psi.conj()).real      # <ψ*|H|ψ*>
    np.testing.assert_allclose(tql.expval(view, H).numpy(), want, atol=1e-5 if dtype == torch.complex64 else 1e-12)
