"""Identity terms of a Hamiltonian (chemistry: -73 Ha for H2O) are added as c·‖ψ₀‖² with ψ₀ the
input state, not evaluated on the state after the gates: a complex64 state's norm drifts by ~1e-6
through a deep circuit, which biased ⟨H⟩ by c·1e-6 and put c·ε rounding noise into every gradient.
Oracles: dense NumPy matrices of the same circuit in float64, gradcheck in complex128."""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers.grad import circuit_expval
from torchquantum_layers.observables import Hamiltonian

from . import oracle as O

METHODS = ["backprop", "adjoint", "parameter-shift"]


def test_split_constant():
    H = Hamiltonian.from_string("3 + 0.5*Z0 - 2 + X1")
    rest, c = H.split_constant()
    assert c == pytest.approx(1.0)
    assert rest.equals(Hamiltonian.from_string("0.5*Z0 + X1"))
    assert H.split_constant()[0] is rest                # cached: its compiled plans are kept
    plain = Hamiltonian.from_string("Z0 Z1 + 0.2*X0")
    assert plain.split_constant() == (plain, 0.0)
    only = Hamiltonian.from_string("4.5")
    assert only.split_constant() == (only, 0.0)


def _circuit(dtype, n=3, layers=2, seed=0):
    torch.manual_seed(seed)
    c = tql.Circuit(n, dtype=dtype)
    for _ in range(layers):
        for w in range(n):
            c.ry(w, trainable=True).rz(w, trainable=True)
        for w in range(n - 1):
            c.cnot(w, w + 1)
    c.rx(0, input=0)
    return c


def _dense_state(c, x_row, psi0):
    """The circuit's gates as dense NumPy matrices, in float64."""
    w = c.weights.detach().double().numpy()
    k = 0
    psi = psi0.astype(np.complex128)
    for op in c.ops:
        if op.gate.name == "CNOT":
            psi = O.apply_dense(psi, O.gate_matrix("CNOT"), op.wires, c.n_wires)
            continue
        angle = x_row[0] if op.gate.name == "RX" else w[k]
        k += op.gate.name != "RX"
        psi = O.apply_dense(psi, O.gate_matrix(op.gate.name, angle), op.wires, c.n_wires)
    return psi


H_CHEM = Hamiltonian([(-73.1, ""), (0.4, "Z0"), (-0.3, "Z1 Z2"), (0.2, "X0 X1"), (0.15, "Y1 Y2")])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("scale", [1.0, 1.3], ids=["normalised", "unnormalised"])
def test_values_match_the_dense_quadratic_form(method, scale, dtype, device, atol):
    """⟨ψ|H|ψ⟩ as a quadratic form, also for an unnormalised input state (c·‖ψ₀‖²)."""
    c = _circuit(dtype).to(device)
    rng = np.random.default_rng(3)
    psi0 = O.random_state(3, rng, batch=2) * scale
    x = np.array([[0.3], [1.1]])
    state = torch.as_tensor(psi0, dtype=dtype, device=device)
    got = circuit_expval(c, [H_CHEM, "Z0"], x=torch.as_tensor(x, device=device), state=state, diff_method=method)
    Hd = H_CHEM.to_dense(3).numpy()
    for b in range(2):
        psi = _dense_state(c, x[b], psi0[b])
        assert got[b, 0].item() == pytest.approx(np.vdot(psi, Hd @ psi).real, abs=20 * atol)
        assert got[b, 1].item() == pytest.approx(np.vdot(psi, O.kron(O.pauli_matrix("Z"), np.eye(4)) @ psi).real,
                                                 abs=atol)
    # no state: |000⟩, norm exactly 1
    got = circuit_expval(c, H_CHEM, x=torch.as_tensor(x[:1], device=device), diff_method=method)
    psi = _dense_state(c, x[0], np.eye(8)[0])
    assert got[0].item() == pytest.approx(np.vdot(psi, Hd @ psi).real, abs=20 * atol)


@pytest.mark.parametrize("method", METHODS)
def test_gradcheck_with_constant_terms(method):
    """Gradients w.r.t. weights, input angles and the input state (the constant's 2c·ψ₀ part)."""
    c = _circuit(torch.complex128)
    torch.manual_seed(1)
    w = (torch.rand(c.num_parameters, dtype=torch.float64) * 2 * math.pi).requires_grad_()
    x = torch.randn(2, 1, dtype=torch.float64, requires_grad=True)
    state = tql.random_state(3, 2, dtype=torch.complex128).requires_grad_()

    def f(w, x, state):
        return circuit_expval(c, [H_CHEM, Hamiltonian([(2.5, ""), (1.0, "X2")])], x=x, state=state,
                              diff_method=method, weights=w)
    assert torch.autograd.gradcheck(f, (w, x, state), eps=1e-6, atol=1e-6)


def test_deep_complex64_circuit_has_no_bias_from_the_constant():
    """800 rotations in complex64: the state's norm drifts, the constant must not follow it."""
    n, layers = 6, 50
    H = Hamiltonian([(-100.0, ""), (0.5, "Z0 Z1"), (0.25, "X3")])
    c64, c128 = _circuit(torch.complex64, n, layers, seed=5), _circuit(torch.complex128, n, layers, seed=5)
    with torch.no_grad():
        c128.weights.copy_(c64.weights.double())
        x = torch.tensor([[0.7]])
        psi = c64(x=x)
        drift = abs(float(torch.linalg.vector_norm(psi.to(torch.complex128))) ** 2 - 1)
        e64 = float(tql.expval(c64, H, x=x)[0])
        e128 = float(tql.expval(c128, H, x=x.double())[0])
    assert drift > 1e-7                          # the case the split is for (else this proves nothing)
    assert abs(e64 - e128) < 2e-5                # float32 resolution at 100 is 7.6e-6; before: ~100·drift


# ------------------------------------------------------------------------------------------------
# density matrices: the identity terms are c·Tr ρ₀ (channels are trace preserving)
def _noisy_circuit(dtype, device="cpu", n=2, layers=1, gamma=0.2):
    c = tql.MixedCircuit(n, dtype=dtype).to(device)
    for _ in range(layers):
        for w in range(n):
            c.ry(w, trainable=True)
            c.channel(tql.mixed.amplitude_damping(gamma), w)
        for w in range(n - 1):
            c.cnot(w, w + 1)
    return c


def _kraus_oracle(c, rho0, gamma=0.2):
    """The same circuit on a dense NumPy ρ: RY matrices, amplitude-damping Kraus maps, CNOTs."""
    n = c.n_wires
    w = iter(c.weights.detach().double().cpu().numpy())
    k = [np.array([[1, 0], [0, math.sqrt(1 - gamma)]]), np.array([[0, math.sqrt(gamma)], [0, 0]])]
    rho = rho0.astype(np.complex128)
    for op in c.ops:
        u = O.full_operator(O.gate_matrix(op.gate.name, *([next(w)] if op.gate.name == "RY" else [])), op.wires, n)
        rho = u @ rho @ u.conj().T
        if op.gate.name == "RY":
            ks = [O.full_operator(m, op.wires, n) for m in k]
            rho = sum(m @ rho @ m.conj().T for m in ks)
    return rho


@pytest.mark.parametrize("method", ["backprop", "parameter-shift"])
def test_density_values_match_the_kraus_oracle_for_unnormalised_states(method, dtype, device, atol):
    c = _noisy_circuit(dtype, device)
    rng = np.random.default_rng(7)
    a = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    rho0 = a @ a.conj().T
    rho0 = 1.3 * rho0 / np.trace(rho0).real                      # trace 1.3: c·Tr ρ₀, not c
    H = Hamiltonian([(-73.1, ""), (0.4, "Z0"), (0.2, "X0 X1")])
    got = tql.mixed.expval(c, H, state=torch.as_tensor(rho0[None], dtype=dtype, device=device), diff_method=method)
    rho = _kraus_oracle(c, rho0)
    assert float(got[0].detach()) == pytest.approx(np.trace(rho @ H.to_dense(2).numpy()).real, abs=100 * atol)


def test_density_gradcheck_with_constant_terms():
    c = _noisy_circuit(torch.complex128)
    rng = np.random.default_rng(8)
    a = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    rho0 = torch.as_tensor((a @ a.conj().T / np.trace(a @ a.conj().T).real)[None]).requires_grad_()
    w = c.weights.detach().clone().requires_grad_()
    H = Hamiltonian([(2.5, ""), (0.4, "Z0"), (0.2, "X0 X1")])
    assert torch.autograd.gradcheck(lambda w, r: tql.mixed.expval(c, H, state=r, weights=w), (w, rho0))


def test_deep_complex64_density_has_no_bias_from_the_constant():
    H = Hamiltonian([(-100.0, ""), (0.5, "Z0 Z1"), (0.25, "X2")])
    c64, c128 = _noisy_circuit(torch.complex64, n=3, layers=60, gamma=0.02), \
        _noisy_circuit(torch.complex128, n=3, layers=60, gamma=0.02)
    torch.manual_seed(3)
    with torch.no_grad():
        c64.weights.uniform_(-3, 3)
        c128.weights.copy_(c64.weights.double())
        rho = tql.mixed.run(c64)
        drift = abs(float(rho[0].diagonal().sum().real.double()) - 1)
        e64 = float(tql.mixed.expval(c64, H)[0])
        e128 = float(tql.mixed.expval(c128, H)[0])
    assert drift > 1e-7                          # the case the split is for
    assert abs(e64 - e128) < 2e-5


def test_trajectory_gradients_carry_no_score_noise_from_the_constant(dtype, device, atol):
    # sampled amplitude-damping branches: the identity term's c·∇p_k/p_k has mean zero, so it is
    # left out; value = c + ⟨H − c⟩ per trajectory, gradient that of H − c, draw for draw
    c = _noisy_circuit(dtype, device)
    H = Hamiltonian([(-73.1, ""), (0.4, "Z0"), (0.2, "X0 X1")])
    rest = Hamiltonian([(0.4, "Z0"), (0.2, "X0 X1")])
    w = c.weights.detach().clone().requires_grad_()
    out = []
    for h in (H, rest):
        g = torch.Generator(device=device).manual_seed(5)
        v = tql.mixed.trajectories.expval(c, h, n_trajectories=32, generator=g, weights=w)
        grad, = torch.autograd.grad(v.sum(), w)
        out.append((v.detach(), grad))
    (v_h, g_h), (v_rest, g_rest) = out
    torch.testing.assert_close(v_h, v_rest - 73.1, atol=100 * atol, rtol=0)
    torch.testing.assert_close(g_h, g_rest, atol=atol, rtol=0)
    assert float(g_rest.abs().max()) > 1e-3
