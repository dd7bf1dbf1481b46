"""Ansatz descriptors (Sim et al. 2019; Haug et al. 2021): exact limits, analytic distributions,
statistical bounds for sampled values, template ordering, seeding and bad input."""
import math

import numpy as np
import pytest
import torch
from scipy import integrate
from scipy.stats import unitary_group

import torchquantum_layers as tql
from torchquantum_layers.research import ansatz_metrics as M


def _circuit(n, dtype):
    return tql.Circuit(n, dtype=dtype)


# ------------------------------------------------------------------------------------------------
# Meyer–Wallach
def test_meyer_wallach_ghz_is_one(dtype, atol):
    for n in (2, 3, 5):
        c = _circuit(n, dtype).h(0)
        for w in range(n - 1):
            c.cnot(w, w + 1)
        # fixed angles that leave the GHZ state alone: RZ(2π) = −I on every wire (a global phase)
        for w in range(n):
            c.rz(w, 2 * math.pi)
        assert abs(float(M.meyer_wallach(c()[0])) - 1) < 10 * atol


def test_meyer_wallach_product_is_zero_and_bell_on_two_of_four_is_half(dtype, atol):
    c = _circuit(4, dtype)
    for w in range(4):
        c.ry(w, 0.3 + w).rz(w, 1.1 * w)
    assert abs(float(M.meyer_wallach(c()[0]))) < 10 * atol
    # Bell pair on wires 1, 3: Tr ρ² = 1/2 there, 1 on wires 0, 2 → Q = 2 (1 − 3/4) = 1/2
    bell = _circuit(4, dtype).h(1).cnot(1, 3)
    assert abs(float(M.meyer_wallach(bell())) - 0.5) < 10 * atol


def test_meyer_wallach_of_haar_states_matches_the_haar_average():
    # E[Tr ρ_k²] = (d_A + d_B) / (d_A d_B + 1) with d_A = 2, d_B = N / 2 → E[Q] = (N − 2) / (N + 1)
    S = 20000
    for n in (2, 3):
        N = 2 ** n
        q = M.meyer_wallach(tql.qinfo.haar_state(n, S, generator=torch.Generator().manual_seed(n),
                                                 dtype=torch.complex128))
        stderr = float(q.std()) / math.sqrt(S)
        assert abs(float(q.mean()) - (N - 2) / (N + 1)) < 5 * stderr


def test_entangling_capability_product_zero_ghz_family_and_seeding(dtype, atol):
    # no entangler at all: only single-wire rotations
    prod = _circuit(3, dtype)
    for w in range(3):
        prod.ry(w, trainable=True).rz(w, trainable=True)
    r = M.entangling_capability(prod, 200, generator=0)
    assert abs(r.mean) < 10 * atol and r.samples.shape == (200,)
    # H, CNOT chain, then trainable RZ: the GHZ state with relative phases stays maximally entangled
    ghz = _circuit(3, dtype).h(0).cnot(0, 1).cnot(1, 2)
    for w in range(3):
        ghz.rz(w, trainable=True)
    r = M.entangling_capability(ghz, 100, generator=0)
    assert abs(r.mean - 1) < 10 * atol and r.std < 10 * atol
    c = tql.templates.strongly_entangling(_circuit(3, dtype), 2)
    a, b = M.entangling_capability(c, 300, generator=7), M.entangling_capability(c, 300, generator=7)
    assert a.mean == b.mean and torch.equal(a.samples, b.samples)
    assert M.entangling_capability(c, 300, generator=8).mean != a.mean
    assert 0 < a.mean < 1


# ------------------------------------------------------------------------------------------------
# the Haar reference
def test_haar_bins_sum_to_one_and_match_numerical_integrals():
    for n in (1, 2, 4, 7):
        N = 2 ** n
        q = M.haar_fidelity_bins(n, 75).numpy()
        assert abs(q.sum() - 1) < 1e-12 and (q > 0).all()
        edges = np.linspace(0, 1, 76)
        ref = [integrate.quad(lambda f: (N - 1) * (1 - f) ** (N - 2), a, b, epsabs=1e-300)[0]
               for a, b in zip(edges[:-1], edges[1:])]
        np.testing.assert_allclose(q, ref, rtol=1e-9, atol=1e-300)
    # on many qubits the high bins underflow as probabilities but not as logs
    logq = M.haar_fidelity_bins(20, 75, log=True)
    assert torch.isfinite(logq).all() and float(logq[-1]) < -1e6


def test_idle_circuit_gives_the_exact_kl_of_a_delta_at_the_last_bin(dtype):
    # F ≡ 1: P = δ at the last bin, q = (1/bins)^(N−1) → D_KL = (N − 1) ln(bins) (ln 75 ≈ 4.32
    # on one qubit: Sim et al.'s idle-circuit reference)
    for n, bins in ((1, 75), (2, 75), (3, 20)):
        c = _circuit(n, dtype).h(0)
        if n > 1:
            c.cnot(0, 1)
        r = M.expressibility(c, 50, bins=bins, generator=0)
        assert r.kl == pytest.approx((2 ** n - 1) * math.log(bins), rel=1e-12)
        assert float(r.histogram[-1]) == 1.0 and abs(float(r.haar.sum()) - 1) < 1e-12
        assert r.edges.shape == (bins + 1,) and r.fidelities.shape == (50,)


def test_circuit_a_h_rz_matches_the_binned_arcsine_distribution(dtype):
    # H·RZ(θ) on |0⟩: F = cos²(Δ/2), Δ = θ − φ uniform mod 2π → the arcsine law, CDF (2/π) asin √F;
    # Haar on one qubit is uniform. Binned exactly: D_KL = 0.1961 at 75 bins (Sim et al. report
    # ≈ 0.22 for this "circuit A"; the continuous value is −ln(π/4) = 0.2416).
    K, S = 75, 20000
    e = np.linspace(0, 1, K + 1)
    p = 2 / np.pi * (np.arcsin(np.sqrt(e[1:])) - np.arcsin(np.sqrt(e[:-1])))
    exact = float((p * np.log(p * K)).sum())
    assert exact == pytest.approx(0.1961, abs=1e-4)
    r = M.expressibility(_circuit(1, dtype).h(0).rz(0, trainable=True), S, generator=3)
    # plug-in error: bias ≈ (K − 1)/(2S) = 0.0019, std ≈ sqrt(Var_p[ln(p/q)] / S) ≈ 0.006
    var = float((p * np.log(p * K) ** 2).sum() - exact ** 2)
    assert abs(r.kl - exact) < r.bias + 4 * math.sqrt(var / S)
    assert abs(r.kl - 0.22) < 0.04


def test_haar_fidelities_give_kl_near_the_sampling_bias():
    # Haar states (scipy's unitary_group on |0…0⟩ and tql.qinfo.haar_state): 2 S D_KL is ~χ² with
    # K − 1 degrees of freedom (K occupied bins), mean K − 1, std sqrt(2 (K − 1)); bound at mean + 6 std
    S = 4000
    for n in (1, 2, 3):
        d = 2 ** n
        u = unitary_group.rvs(d, size=2 * S, random_state=n)
        psi = torch.as_tensor(u[:, :, 0])
        f = (psi[:S].conj() * psi[S:]).sum(-1).abs().square()
        kl, p = M.kl_to_haar(f, n)
        k = int((p > 0).sum())
        assert kl < (k - 1 + 6 * math.sqrt(2 * (k - 1))) / (2 * S)
        g = tql.qinfo.haar_state(n, 2 * S, generator=torch.Generator().manual_seed(n), dtype=torch.complex128)
        kl2, _ = M.kl_to_haar((g[:S].conj() * g[S:]).sum(-1).abs().square(), n)
        assert kl2 < (74 + 6 * math.sqrt(148)) / (2 * S)
    # uniform U3 angles are NOT Haar (cos θ must be uniform, not θ): D_KL ≈ 0.011 (2·10⁵ pairs),
    # small but above the Haar bound at 2·10⁴ pairs (0.0037) by more than twice
    S = 20000
    r = M.expressibility(_circuit(1, torch.complex128).u3(0, trainable=True), S, generator=0)
    assert r.kl > 2 * (74 + 6 * math.sqrt(148)) / (2 * S)


def test_more_hardware_efficient_layers_are_more_expressive(dtype):
    # real kind, 3 qubits, 2000 pairs: 0.26 / 0.17 / 0.15 for 1 / 2 / 3 layers; over other seeds the
    # values move by ~0.02-0.03, so 1 layer is clearly less expressive, 2 vs 3 is within the noise
    # (Sim et al. also saw the gains saturate after a few layers)
    kl = [M.expressibility(tql.templates.hardware_efficient(_circuit(3, dtype), L), 2000, generator=1).kl
          for L in (1, 2, 3)]
    assert kl[0] > kl[1] + 0.05 and kl[0] > kl[2] + 0.05 and kl[2] < kl[1] + 0.03
    one = M.expressibility(tql.templates.hardware_efficient(_circuit(3, dtype), 1, kind="complex"), 2000, generator=1)
    three = M.expressibility(tql.templates.hardware_efficient(_circuit(3, dtype), 3, kind="complex"), 2000,
                             generator=1)
    assert one.kl > three.kl and three.kl < kl[2] / 5      # complex amplitudes reach Haar, real ones cannot


def test_expressibility_seeding_and_fixed_inputs(dtype):
    c = tql.templates.strongly_entangling(_circuit(2, dtype), 1)
    a = M.expressibility(c, 500, generator=torch.Generator().manual_seed(5))
    b = M.expressibility(c, 500, generator=5)
    assert a.kl == b.kl and torch.equal(a.fidelities, b.fidelities)
    assert M.expressibility(c, 500, generator=6).kl != a.kl
    # the batched run equals one run per weight vector with the weights set
    torch.manual_seed(0)
    f = M.sample_fidelities(c, 3, generator=11)
    w = torch.rand(6, c.num_parameters, generator=torch.Generator().manual_seed(11), dtype=torch.float64) * 2 * math.pi
    states = []
    for row in w:
        with torch.no_grad():
            c.weights.copy_(row)
            states.append(c()[0])
    ref = torch.stack([(states[i].conj() * states[i + 3]).sum().abs() ** 2 for i in range(3)]).double()
    torch.testing.assert_close(f, ref, atol=1e-5 if dtype == torch.complex64 else 1e-12, rtol=0)
    # input features are held fixed: an encoding + trainable layer takes x
    enc = tql.templates.angle_encoding(_circuit(2, dtype))
    tql.templates.hardware_efficient(enc, 1)
    r = M.expressibility(enc, 200, generator=0, x=torch.tensor([0.3, 0.7]))
    assert r.kl > 0


def test_parameter_dimension(dtype):
    u3 = _circuit(1, dtype).u3(0, trainable=True)
    r = M.parameter_dimension(u3, 3, generator=0)
    assert (r.dimension, r.n_parameters, r.redundancy, r.max_dimension) == (2, 3, 1, 2)
    # RZ after RZ: one direction, not two
    c = _circuit(1, dtype).ry(0, trainable=True).rz(0, trainable=True).rz(0, trainable=True)
    assert M.parameter_dimension(c, 3, generator=0).dimension == 2
    # an overparametrised 2-qubit ansatz saturates 2^(n+1) − 2 = 6
    h = tql.templates.hardware_efficient(_circuit(2, dtype), 3, kind="complex")
    r = M.parameter_dimension(h, 2, generator=0)
    assert r.dimension == 6 and r.ranks == [6, 6] and r.redundancy == h.num_parameters - 6


def test_bad_input():
    c = tql.templates.hardware_efficient(tql.Circuit(2), 1)
    with pytest.raises(ValueError, match="n_samples must be an int >= 2"):
        M.expressibility(c, 1)
    with pytest.raises(ValueError, match="bins must be an int >= 2"):
        M.expressibility(c, 100, bins=1)
    with pytest.raises(ValueError, match="no trainable parameters"):
        M.entangling_capability(tql.Circuit(2).h(0).cnot(0, 1), 10)
    with pytest.raises(ValueError, match="no trainable parameters"):
        M.parameter_dimension(tql.Circuit(2).h(0), 2)
    with pytest.raises(ValueError, match="pass x"):
        M.expressibility(tql.templates.angle_encoding(tql.Circuit(2)), 10)
    with pytest.raises(ValueError, match="ONE row"):
        M.expressibility(tql.templates.angle_encoding(tql.Circuit(2)), 10, x=torch.zeros(3, 2))
    with pytest.raises(TypeError, match="generator must be"):
        M.expressibility(c, 10, generator="seed")
    with pytest.raises(TypeError, match="expected a tql.Circuit"):
        M.entangling_capability("circuit", 10)
    noisy = tql.MixedCircuit(1)
    noisy.rx(0, trainable=True).channel(tql.mixed.depolarizing(0.1), 0)
    with pytest.raises(ValueError, match="pure output states"):
        M.expressibility(noisy, 10)
    with pytest.raises(ValueError, match="at least 2"):
        M.kl_to_haar(torch.tensor([0.5]), 1)
