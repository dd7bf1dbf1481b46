"""Readout errors (tql.mixed.ReadoutError) against NumPy confusion matrices and a measurement oracle.

The oracle of a noisy expectation measures each Pauli term as hardware does: rotate ρ so the term
is diagonal (H for X, H·S† for Y), take the probabilities of its wires, push them through the
Kronecker product of the wires' confusion matrices and average the eigenvalue signs.
"""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed

from . import oracle as O
from .conftest import ATOL, REAL
from .test_mixed import rand_rho_np, to_t

RATES = {0: (0.02, 0.07), 1: (0.1, 0.03), 2: (0.05, 0.05)}
H_TERMS = [(0.7, "Z0"), (-0.4, "X1 Z2"), (0.3, "Y0 Y1 X2"), (0.25, "Z0 Z1 Z2"), (0.1, "")]
TO_Z = {"X": O.H, "Y": O.H @ np.diag([1, -1j]), "Z": np.eye(2)}


def _readout():
    r = mixed.ReadoutError(*RATES[0], wires=[0])
    for w in (1, 2):
        r = r.then(mixed.ReadoutError(*RATES[w], wires=[w]))
    return r


def _confusion(w):
    p01, p10 = RATES[w]
    return np.array([[1 - p01, p10], [p01, 1 - p10]])


def _measured_value(rho, label, n, noisy):
    """⟨P⟩ of one Pauli label as measured shot by shot (with readout flips when ``noisy``)."""
    factors = tql.PauliString(label).ops if label else {}
    if not factors:
        return 1.0
    u = O.kron(*[TO_Z[factors.get(w, "Z")] if w in factors else np.eye(2) for w in range(n)])
    probs = np.real(np.diag(u @ rho @ u.conj().T)).reshape([2] * n)
    wires = sorted(factors)
    marg = probs.sum(axis=tuple(w for w in range(n) if w not in factors)).reshape(-1)
    if noisy:
        marg = O.kron(*[_confusion(w) for w in wires]) @ marg
    signs = np.array([(-1) ** bin(i).count("1") for i in range(2 ** len(wires))])
    return float(np.real(signs @ marg))


def _circuit_and_rho(dtype, device, rng):
    c = tql.Circuit(3, dtype=dtype)
    c.ry(0, 0.7).cnot(0, 2).rx(1, -0.4).crz(1, 2, 1.1)
    rho0 = rand_rho_np(3, rng, batch=2)
    ops = [("RY", (0,), (0.7,)), ("CNOT", (0, 2), ()), ("RX", (1,), (-0.4,)), ("CRZ", (1, 2), (1.1,))]
    u = O.run_ops(ops, 3, np.eye(8, dtype=complex)).T         # columns: the images of the basis states
    return c.to(device), rho0, np.einsum("ij,bjk,lk->bil", u, rho0, u.conj())


def test_noisy_and_mitigated_probabilities_are_the_confusion_products(dtype, device):
    rng = np.random.default_rng(0)
    p = rng.random((4, 8))
    p /= p.sum(1, keepdims=True)
    order = [2, 0, 1]                                   # bits of the outcome index: wires 2, 0, 1
    a = O.kron(*[_confusion(w) for w in order])
    pt = torch.as_tensor(p, dtype=REAL[dtype], device=device)
    r = _readout()
    noisy = r.noisy_probabilities(pt, wires=order)
    np.testing.assert_allclose(noisy.cpu().numpy(), p @ a.T, atol=ATOL[dtype])
    back = r.mitigated_probabilities(noisy, wires=order, clip=False)
    np.testing.assert_allclose(back.cpu().numpy(), p, atol=10 * ATOL[dtype])
    np.testing.assert_allclose(r.mitigated_probabilities(noisy, wires=order).cpu().numpy(), p, atol=10 * ATOL[dtype])
    # frequencies off the noisy simplex: the plain inverse goes negative, clipping renormalises
    raw = r.mitigated_probabilities(torch.tensor([[1.0, 0, 0, 0, 0, 0, 0, 0]], dtype=REAL[dtype]), wires=order,
                                    clip=False)
    clipped = r.mitigated_probabilities(torch.tensor([[1.0, 0, 0, 0, 0, 0, 0, 0]], dtype=REAL[dtype]), wires=order)
    assert float(raw.min()) < 0 and float(clipped.min()) >= 0
    assert float(clipped.sum()) == pytest.approx(1.0, abs=1e-6)


def test_expectations_read_out_and_mitigated(dtype, device):
    rng = np.random.default_rng(1)
    c, rho0, rho = _circuit_and_rho(dtype, device, rng)
    H = tql.Hamiltonian(H_TERMS)
    nm = tql.NoiseModel()
    for w, (p01, p10) in RATES.items():
        nm.add_readout_error(p01, p10, wires=w)
    state = to_t(rho0, dtype, device)
    got = tql.mixed.expval(c, H, state=state, noise_model=nm)
    want = [sum(k * _measured_value(r, lbl, 3, noisy=True) for k, lbl in H_TERMS) for r in rho]
    np.testing.assert_allclose(got.cpu().numpy(), want, atol=10 * ATOL[dtype])
    exact = [sum(k * _measured_value(r, lbl, 3, noisy=False) for k, lbl in H_TERMS) for r in rho]
    assert np.abs(np.array(want) - exact).max() > 0.01                 # the errors matter here
    mitigated = tql.mixed.expval(c, nm.readout.mitigated_observable(H), state=state, noise_model=nm)
    np.testing.assert_allclose(mitigated.cpu().numpy(), exact, atol=20 * ATOL[dtype])
    # a list of observables, gradients through the read-out values
    c2 = tql.Circuit(3, dtype=dtype)
    c2.ry(0, trainable=True, init=0.4)
    c2 = c2.to(device)
    values = tql.mixed.expval(c2, ["Z0", "X0"], noise_model=nm)
    p01, p10 = RATES[0]
    zc, zd = 1 - p01 - p10, p10 - p01
    want = torch.tensor([zc * np.cos(0.4) + zd, zc * np.sin(0.4) + zd], dtype=REAL[dtype])
    assert torch.allclose(values[0].detach().cpu(), want, atol=ATOL[dtype])
    values[0, 0].backward()
    assert float(c2.weights.grad[0]) == pytest.approx(-zc * np.sin(0.4), abs=10 * ATOL[dtype])


def test_trajectories_read_out_as_the_density_matrix():
    c = tql.Circuit(2, dtype=torch.complex128)
    c.h(0).cnot(0, 1).ry(1, 0.3)
    nm = tql.NoiseModel().add_readout_error(0.04, 0.09)
    H = tql.Hamiltonian([(1.0, "Z0 Z1"), (0.5, "X0 X1"), (0.2, "Z1")])
    traj = mixed.trajectories.expval(c, H, noise_model=nm, n_trajectories=4)
    rho = mixed.expval(c, H, noise_model=nm)
    assert torch.allclose(traj, rho, atol=1e-12)          # no channels: every trajectory is exact
    assert not torch.allclose(rho, tql.expval(c, H), atol=1e-3)


def test_shot_estimates_have_the_spread_of_real_readout(dtype, device):
    # one Pauli string read through flips is ±1 with mean m (the noisy value): over S shots the
    # estimate has variance (1 − m²) / S, more than sampling the noisy observable's terms gives
    rng = np.random.default_rng(4)
    c, rho0, rho = _circuit_and_rho(dtype, device, rng)
    nm = tql.NoiseModel()
    for w, (p01, p10) in RATES.items():
        nm.add_readout_error(p01, p10, wires=w)
    label, B, S = "Z0 X1 Z2", 4000, 100
    m = _measured_value(rho[0], label, 3, noisy=True)
    gen = torch.Generator(device=device).manual_seed(0)
    state = to_t(rho0[:1], dtype, device).expand(B, -1, -1)
    psi = tql.random_state(3, 1, generator=torch.Generator().manual_seed(1), dtype=dtype).to(device)
    psi_np = psi[0].cpu().numpy().astype(complex)
    m_psi = _measured_value(np.outer(psi_np, psi_np.conj()), label, 3, noisy=True)
    cases = {
        "density": (m, tql.mixed.expval(c, label, state=state, noise_model=nm, shots=S, generator=gen)),
        "state vector": (m_psi, tql.observables.expectation(psi.expand(B, -1), nm.readout.noisy_observable(label),
                                                             shots=S, generator=gen)),
        "trajectories": (m_psi, tql.mixed.trajectories.expval(tql.Circuit(3, dtype=dtype).to(device), label,
                                                               state=psi.expand(B, -1), noise_model=nm, shots=S,
                                                               n_trajectories=1, generator=gen)),
    }
    for what, (mean, est) in cases.items():
        sd = np.sqrt((1 - mean ** 2) / S)
        est = est.double().cpu().numpy()
        assert est.mean() == pytest.approx(mean, abs=4 * sd / np.sqrt(B)), what
        assert est.std() == pytest.approx(sd, rel=0.1), what
    # mitigated: unbiased for the exact value, and noisier still
    mitigated = tql.mixed.expval(c, nm.readout.mitigated_observable(label), state=state, noise_model=nm, shots=S,
                                 generator=gen).double().cpu().numpy()
    exact = _measured_value(rho[0], label, 3, noisy=False)
    assert mitigated.mean() == pytest.approx(exact, abs=6 * mitigated.std() / np.sqrt(B))
    assert mitigated.std() > np.sqrt((1 - m ** 2) / S)


def test_noisy_samples_flip_at_the_given_rates(device):
    r = _readout()
    shots = 40000
    samples = torch.zeros(shots, dtype=torch.int64, device=device)                 # all bits 0
    ones = torch.full((shots,), 7, dtype=torch.int64, device=device)                # all bits 1
    gen = torch.Generator(device=device).manual_seed(0)
    got0 = tql.measure.to_bits(r.noisy_samples(samples, [0, 1, 2], generator=gen), 3).double().mean(0)
    got1 = 1 - tql.measure.to_bits(r.noisy_samples(ones, [0, 1, 2], generator=gen), 3).double().mean(0)
    for i, w in enumerate((0, 1, 2)):
        tol = 4 * np.sqrt(0.1 / shots)
        assert float(got0[i]) == pytest.approx(RATES[w][0], abs=tol)
        assert float(got1[i]) == pytest.approx(RATES[w][1], abs=tol)
    a = r.noisy_samples(ones[:50], [2, 1, 0], generator=torch.Generator(device=device).manual_seed(3))
    b = r.noisy_samples(ones[:50], [2, 1, 0], generator=torch.Generator(device=device).manual_seed(3))
    assert torch.equal(a, b) and a.dtype == torch.int64


def test_composition_and_repr():
    a, b = mixed.ReadoutError(0.1, 0.2), mixed.ReadoutError(0.05, 0.01, wires=[1])
    ab = a.then(b)
    want = np.array([[1 - 0.05, 0.01], [0.05, 1 - 0.01]]) @ np.array([[0.9, 0.2], [0.1, 0.8]])
    p01, p10 = ab.rates(1)
    np.testing.assert_allclose([[1 - p01, p10], [p01, 1 - p10]], want, atol=1e-15)
    assert ab.rates(0) == pytest.approx((0.1, 0.2))
    assert mixed.ReadoutError(0.1).rates(5) == (0.1, 0.1)
    assert mixed.ReadoutError(0.1, wires=2).rates(1) == (0.0, 0.0)
    nm = tql.NoiseModel().add_readout_error(0.1, 0.2).add_readout_error(0.05, 0.01, wires=[1])
    assert nm.readout.rates(1) == pytest.approx(ab.rates(1), abs=1e-15) and "ReadoutError(" in repr(nm)
    # symmetric flips: one term per string, scaled by (1 − 2p) per wire
    noisy = mixed.ReadoutError(0.1).noisy_observable(tql.Hamiltonian("0.5*X0 Z2"))
    assert noisy.equals(tql.Hamiltonian("0.32*X0 Z2"))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"p01 must be a probability in \[0, 1\], got 1.2"):
        mixed.ReadoutError(1.2)
    with pytest.raises(ValueError, match="p10 must be a probability"):
        mixed.ReadoutError(0.1, float("nan"))
    with pytest.raises(ValueError, match="p01 \\+ p10 = 1 must be < 1"):
        mixed.ReadoutError(0.5, 0.5)
    with pytest.raises(ValueError, match="wire -1 is not a non-negative int"):
        mixed.ReadoutError(0.1, wires=[-1])
    with pytest.raises(ValueError, match="wires is empty"):
        mixed.ReadoutError(0.1, wires=[])
    r = mixed.ReadoutError(0.1)
    with pytest.raises(TypeError, match="must be a real tensor"):
        r.noisy_probabilities(torch.ones(4, dtype=torch.complex64))
    with pytest.raises(ValueError, match="last dimension 3 is not a power of 2"):
        r.noisy_probabilities(torch.ones(2, 3))
    with pytest.raises(ValueError, match="3 wires for 2 bits"):
        r.mitigated_probabilities(torch.ones(1, 4) / 4, wires=[0, 1, 2])
    with pytest.raises(TypeError, match="int tensor of basis indices"):
        r.noisy_samples(torch.zeros(3), [0])
    with pytest.raises(TypeError, match="expected a ReadoutError"):
        r.then(0.1)
    with pytest.raises(TypeError, match="expected a Hamiltonian"):
        r.noisy_observable(3)
