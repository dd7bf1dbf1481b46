"""Variational time evolution (torchquantum_layers/varqte.py) against scipy.linalg.expm of dense
NumPy Hamiltonians: ansätze that contain the exact evolution must follow it (angles analytic,
residual zero), an incomplete one must report a residual, imaginary time must reach the ground
energy from numpy.linalg.eigh."""
import math

import numpy as np
import pytest
import scipy.linalg as sl
import torch

import torchquantum_layers as tql
from torchquantum_layers.varqte import INTEGRATORS, mclachlan_derivative, varqite, varqrte

from . import oracle as O

TOL = {torch.complex64: 2e-4, torch.complex128: 1e-9}
COMMUTING = tql.Hamiltonian.from_string("0.5*Z0 Z1 + 0.3*Y0 Y1 + 0.8*X0 X1")


def _dense(H, n):
    """Σ c P as Kronecker products of NumPy Pauli matrices (not the library's to_dense)."""
    out = np.zeros((2 ** n, 2 ** n), dtype=complex)
    for c, p in H.terms:
        letters = {int(tok[1:]): tok[0] for tok in str(p).split() if tok[1:].isdigit()}
        out += complex(c) * O.kron(*[O.pauli_matrix(letters.get(w, "I")) for w in range(n)])
    return out


def _prepared_commuting_ansatz(dtype, device="cpu"):
    """A generic entangled start V|00⟩, then RZZ, RYY, RXX: exp(−iHt) of COMMUTING is these three
    at angles 2·c·t (R_PP(θ) = exp(−iθPP/2)), so the ansatz holds the exact evolution."""
    c = tql.Circuit(2, dtype=dtype).to(device)
    c.ry(0, 0.7).ry(1, 1.3).cnot(0, 1).rx(1, 0.4).rz(0, 0.2)
    c.rzz(0, 1, trainable=True).ryy(0, 1, trainable=True).rxx(0, 1, trainable=True)
    with torch.no_grad():
        c.weights.zero_()
    return c


def test_dense_oracle_builds_the_hamiltonian():
    assert np.allclose(_dense(COMMUTING, 2), 0.5 * np.kron(O.pauli_matrix("Z"), O.pauli_matrix("Z"))
                       + 0.3 * np.kron(O.pauli_matrix("Y"), O.pauli_matrix("Y"))
                       + 0.8 * np.kron(O.pauli_matrix("X"), O.pauli_matrix("X")))


@pytest.mark.parametrize("integrator", list(INTEGRATORS))
def test_real_time_follows_the_exact_evolution(integrator, dtype, device):
    c = _prepared_commuting_ansatz(dtype, device)
    psi0 = c().detach().cpu().numpy().astype(complex)[0]
    t = 1.0
    r = varqrte(c, COMMUTING, t, steps=10, integrator=integrator)
    exact = sl.expm(-1j * t * _dense(COMMUTING, 2)) @ psi0
    got = r.state.detach().cpu().numpy().astype(complex)[0]
    tol = TOL[dtype]
    assert abs(np.vdot(exact, got)) ** 2 == pytest.approx(1.0, abs=tol)
    # θ̇ is constant here, so every integrator is exact: θ(t) = 2 c t
    assert r.weights[-1].double().cpu().numpy() == pytest.approx([1.0, 0.6, 1.6], abs=10 * tol)
    assert float(r.residuals.max()) < 10 * tol
    # energy is conserved
    e0 = np.vdot(psi0, _dense(COMMUTING, 2) @ psi0).real
    assert r.energies.double().cpu().numpy() == pytest.approx(np.full(11, e0), abs=10 * tol)
    assert r.times.tolist() == pytest.approx([k / 10 for k in range(11)])
    assert r.weights.shape == (11, 3) and r.kind == "real"
    # the circuit's own angles are left alone
    assert float(c.weights.detach().abs().max()) == 0.0


def test_imaginary_time_matches_normalised_exp_minus_h_tau(dtype, device):
    """RY(θ)|0⟩ under a real H stays on the RY circle: the ansatz holds exp(−Hτ)ψ0/‖·‖ exactly."""
    H = tql.Hamiltonian.from_string("0.6*Z0 + 0.8*X0")
    c = tql.Circuit(1, dtype=dtype).to(device)
    c.ry(0, trainable=True)
    with torch.no_grad():
        c.weights.fill_(0.3)
    psi0 = np.array([math.cos(0.15), math.sin(0.15)], dtype=complex)
    r = varqite(c, H, 2.0, steps=40)
    for k in (10, 20, 40):
        tau = float(r.times[k])
        exact = sl.expm(-tau * _dense(H, 1)) @ psi0
        exact /= np.linalg.norm(exact)
        theta = float(r.weights[k, 0])
        got = np.array([math.cos(theta / 2), math.sin(theta / 2)])
        assert abs(np.vdot(exact, got)) ** 2 == pytest.approx(1.0, abs=max(TOL[dtype], 1e-7))
    assert float(r.residuals.max()) < 10 * TOL[dtype]
    assert (np.diff(r.energies.double().cpu().numpy()) < 1e-6).all()          # energy decreases
    assert r.kind == "imaginary"


def test_integrators_converge_at_their_orders():
    """Coarse steps on the RY case: the error at τ = 2 shrinks from Euler to Heun to RK4."""
    H = tql.Hamiltonian.from_string("0.6*Z0 + 0.8*X0")
    c = tql.Circuit(1, dtype=torch.complex128)
    c.ry(0, trainable=True)
    with torch.no_grad():
        c.weights.fill_(0.3)
    exact = sl.expm(-2.0 * _dense(H, 1)) @ np.array([math.cos(0.15), math.sin(0.15)])
    exact /= np.linalg.norm(exact)
    errors = {}
    for integrator in INTEGRATORS:
        theta = float(varqite(c, H, 2.0, steps=8, integrator=integrator).weights[-1, 0])
        errors[integrator] = 1 - abs(np.vdot(exact, [math.cos(theta / 2), math.sin(theta / 2)])) ** 2
    assert errors["rk4"] < errors["heun"] / 10 and errors["heun"] < errors["euler"] / 3, errors
    assert errors["rk4"] < 1e-6


def test_imaginary_time_reaches_the_ground_energy():
    """A real two-layer ansatz on 3 qubits: ⟨H⟩ falls to the lowest eigenvalue (numpy eigh)."""
    H = tql.Hamiltonian.from_string("Z0 Z1 + Z1 Z2 + 0.7*X0 + 0.7*X1 + 0.7*X2")
    c = tql.Circuit(3, dtype=torch.complex128)
    for layer in range(3):
        for w in range(3):
            c.ry(w, trainable=True)
        c.cnot(0, 1).cnot(1, 2)
    for w in range(3):
        c.ry(w, trainable=True)
    torch.manual_seed(0)
    with torch.no_grad():
        c.weights.uniform_(-0.1, 0.1)
    r = varqite(c, H, 6.0, steps=60, integrator="heun")
    ground = np.linalg.eigvalsh(_dense(H, 3))[0]
    assert float(r.energies[-1]) == pytest.approx(ground, abs=5e-3)
    assert float(r.energies[-1]) >= ground - 1e-9
    assert float(r.energies[0]) > ground + 0.5


def test_residual_flags_an_ansatz_that_cannot_follow():
    """RZ on wire 0 alone cannot follow X0 X1: the McLachlan distance is Var(H) there."""
    c = tql.Circuit(2, dtype=torch.complex128)
    c.h(0).rz(0, trainable=True)
    H = tql.Hamiltonian.from_string("X0 X1")
    theta_dot, energy, residual = mclachlan_derivative(c, H)
    # ψ = (|0⟩+|1⟩)/√2 ⊗ |0⟩ (up to phase): ⟨X0X1⟩ = 0, Var = 1, and the tangent −iZ0ψ/2 is
    # orthogonal to X0X1ψ, so θ̇ = 0 and the whole variance is left
    assert float(energy) == pytest.approx(0.0, abs=1e-12)
    assert float(theta_dot[0]) == pytest.approx(0.0, abs=1e-12)
    assert float(residual) == pytest.approx(1.0, abs=1e-12)


def test_time_dependent_hamiltonian():
    """H(t) = cos(t)·Z0 on RZ(θ)H|0⟩: θ(t) = 2 sin t."""
    c = tql.Circuit(1, dtype=torch.complex128)
    c.h(0).rz(0, trainable=True)
    with torch.no_grad():
        c.weights.zero_()
    r = varqrte(c, lambda t: tql.Hamiltonian([(math.cos(t), "Z0")]), 1.2, steps=24)
    assert float(r.weights[-1, 0]) == pytest.approx(2 * math.sin(1.2), abs=1e-7)
    assert float(r.energies[-1]) == pytest.approx(0.0, abs=1e-12)


def test_redundant_angles_are_solved_by_the_pseudo_inverse():
    """Two RZs on one wire: G is singular; the minimum-norm solution splits the velocity."""
    c = tql.Circuit(1, dtype=torch.complex128)
    c.h(0).rz(0, trainable=True).rz(0, trainable=True)
    with torch.no_grad():
        c.weights.zero_()
    r = varqrte(c, "0.5*Z0", 1.0, steps=5)
    assert r.weights[-1].tolist() == pytest.approx([0.5, 0.5], abs=1e-9)
    r = varqrte(c, "0.5*Z0", 1.0, steps=5, regularization=1e-3)
    assert float(r.weights[-1].sum()) == pytest.approx(1.0, abs=1e-2)


@pytest.mark.parametrize("call, exc, match", [
    (lambda c: varqrte(c, "Z0", -1.0), ValueError, "time must be a finite number >= 0"),
    (lambda c: varqrte(c, "Z0", float("nan")), ValueError, "time must be a finite number"),
    (lambda c: varqrte(c, "Z0", 1.0, steps=0), ValueError, "steps must be an int >= 1"),
    (lambda c: varqrte(c, "Z0", 1.0, integrator="rk45"), ValueError, "integrator must be one of euler, heun, rk4"),
    (lambda c: varqite(c, "Z0", 1.0, rcond=-1), ValueError, "rcond must be a finite number >= 0"),
    (lambda c: varqite(c, "Z5", 1.0), ValueError, "acts on 6 wires but the circuit has 2"),
    (lambda c: varqite(c, tql.Hamiltonian([(1j, "Z0")]), 1.0), ValueError, "not Hermitian"),
    (lambda c: varqite(c, lambda t: tql.Hamiltonian([(1j * t, "Z0")]), 1.0, steps=2), ValueError,
     "not Hermitian"),
    (lambda c: varqrte(c, "Z0", 1.0, state=tql.random_state(2, 3, dtype=torch.complex128)), ValueError,
     "evolves one state"),
    (lambda c: varqrte("circuit", "Z0", 1.0), TypeError, "circuit must be a tql.Circuit"),
    (lambda c: varqrte(tql.Circuit(2).h(0), "Z0", 1.0), ValueError, "no trainable angles"),
])
def test_bad_input(call, exc, match):
    c = tql.Circuit(2, dtype=torch.complex128)
    c.ry(0, trainable=True).cnot(0, 1)
    with pytest.raises(exc, match=match):
        call(c)


def test_noisy_circuit_is_refused():
    mc = tql.MixedCircuit(1)
    mc.ry(0, trainable=True).channel(tql.mixed.depolarizing(0.1), 0)
    with pytest.raises((ValueError, TypeError), match="pure output state|tql.Circuit"):
        varqrte(mc, "Z0", 1.0)
