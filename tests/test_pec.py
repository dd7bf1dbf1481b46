"""Probabilistic error cancellation (tql.mixed.pec) against a dense NumPy density-matrix simulation.

Oracles, none of them the code under test: the ideal and noisy expectations come from dense
2^n × 2^n gate matrices (tests/oracle.py) and Kraus operators written here from the textbook
definition of each channel (not the library's Channel objects); the inverse of a channel is
``numpy.linalg.inv`` of its superoperator ``Σ_K K ⊗ conj(K)`` built from those Kraus operators;
γ of depolarizing noise is checked against the closed form derived below.
"""
import itertools

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed

from . import oracle as O
from .conftest import ATOL, REAL

PAULI = O.PAULI


def _pauli(label):
    return O.kron(*(PAULI[c] for c in label))


def _labels(k):
    return ["".join(t) for t in itertools.product("IXYZ", repeat=k)]


# ------------------------------------------------------------------------------------------------
# textbook Kraus operators
def kraus_depolarizing(p, k=1):
    """√(1−p) I and √(p / (4^k − 1)) P for the other Pauli strings P on k wires."""
    m = 4 ** k - 1
    return [np.sqrt(1 - p if lab == "I" * k else p / m) * _pauli(lab) for lab in _labels(k)]


def kraus_pauli(probs, k):
    """√p_P P, with the identity taking the rest of the probability."""
    rest = 1 - sum(probs.values())
    return [np.sqrt(rest) * np.eye(2 ** k)] + [np.sqrt(p) * _pauli(lab) for lab, p in probs.items()]


def kraus_bit_flip(p):
    return [np.sqrt(1 - p) * np.eye(2), np.sqrt(p) * O.X]


def superop(kraus):
    """vec(E(ρ)) = S vec(ρ), row-major vec: S = Σ K ⊗ conj(K)."""
    return sum(np.kron(k, k.conj()) for k in kraus)


# noise settings: (tql rules, oracle rules), each rule (channel, gate names or None) /
# (Kraus list, number of wires, gate names or None); rules fire in order, a one-wire channel on
# each wire of the gate
NOISE = {
    "depolarizing1": ([(lambda: mixed.depolarizing(0.06), ["CNOT", "CZ"])],
                      [(kraus_depolarizing(0.06), 1, {"CNOT", "CZ"})]),
    "depolarizing2": ([(lambda: mixed.depolarizing(0.08, 2), ["CNOT", "CZ"])],
                      [(kraus_depolarizing(0.08, 2), 2, {"CNOT", "CZ"})]),
    "bit_flip": ([(lambda: mixed.bit_flip(0.05), None)],
                 [(kraus_bit_flip(0.05), 1, None)]),
    "pauli": ([(lambda: mixed.pauli_channel(0.02, 0.05, 0.03), ["RY", "RX"]),
               (lambda: mixed.pauli_channel(probs={"XZ": 0.03, "YY": 0.02, "ZI": 0.04}), ["CNOT", "CZ"])],
              [(kraus_pauli({"X": 0.02, "Y": 0.05, "Z": 0.03}, 1), 1, {"RY", "RX"}),
               (kraus_pauli({"XZ": 0.03, "YY": 0.02, "ZI": 0.04}, 2), 2, {"CNOT", "CZ"})]),
}


def noise_model(kind):
    model = tql.NoiseModel()
    for make, gates in NOISE[kind][0]:
        model.add(make(), gates=gates)
    return model


def random_circuit(n, seed, dtype=torch.complex128):
    """(Circuit, spec) with per-sample RX angles from x, fixed and trainable RY/RZ and at least
    two entangling gates; spec: (name, wires, angle) with angle a float, ("x", col) or ("w", i)."""
    rng = np.random.default_rng(seed)
    c = tql.Circuit(n, dtype=dtype)
    spec = []
    for w in range(n):
        c.rx(w, input=w)
        spec.append(("RX", (w,), ("x", w)))
    n_weights = 0
    entanglers = [(a, b) for a in range(n) for b in range(n) if a != b]
    for layer in range(3):
        for w in range(n):
            if rng.random() < 0.5:
                c.ry(w, trainable=True)
                spec.append(("RY", (w,), ("w", n_weights)))
                n_weights += 1
            else:
                t = float(rng.uniform(-np.pi, np.pi))
                c.rz(w, t)
                spec.append(("RZ", (w,), t))
        for _ in range(2):
            a, b = entanglers[rng.integers(len(entanglers))]
            name = "CNOT" if rng.random() < 0.6 else "CZ"
            (c.cnot if name == "CNOT" else c.cz)(a, b)
            spec.append((name, (a, b), None))
        t = float(rng.uniform(-np.pi, np.pi))
        c.ry(int(rng.integers(n)), t)
        spec.append(("RY", (c.ops[-1].wires[0],), t))
    with torch.no_grad():
        c.weights.copy_(torch.as_tensor(rng.uniform(-np.pi, np.pi, c.weights.shape)))
    return c, spec


def gate_matrix(name, angle, x_row, weights):
    if name == "CNOT":
        return O.controlled_matrix(O.X)
    if name == "CZ":
        return np.diag([1, 1, 1, -1]).astype(np.complex128)
    if isinstance(angle, tuple):
        angle = x_row[angle[1]] if angle[0] == "x" else weights[angle[1]]
    return {"RX": O.rx, "RY": O.ry, "RZ": O.rz}[name](angle)


def oracle_expvals(spec, n, x, weights, observables, noise_rules=()):
    """Tr(O ρ) per row of x: dense ρ → U ρ U†, then the matching rules' Kraus maps."""
    out = []
    for row in x:
        rho = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
        rho[0, 0] = 1
        for name, wires, angle in spec:
            u = O.full_operator(gate_matrix(name, angle, row, weights), wires, n)
            rho = u @ rho @ u.conj().T
            for kraus, k, gates in noise_rules:
                if gates is not None and name not in gates:
                    continue
                targets = [(w,) for w in wires] if k == 1 else [tuple(wires)]
                for t in targets:
                    ks = [O.full_operator(kk, t, n) for kk in kraus]
                    rho = sum(kk @ rho @ kk.conj().T for kk in ks)
        out.append([np.trace(o @ rho).real for o in observables])
    return np.array(out)


def observables(n):
    """(tql observables, dense matrices): 0.7 Z0 Z1 + 0.4 X_{n-1} + 0.2 Y0 + 0.1 I, and Z1."""
    def dense(ops):
        return O.kron(*(PAULI[ops.get(w, "I")] for w in range(n)))
    h = tql.Hamiltonian([(0.7, "Z0 Z1"), (0.4, f"X{n - 1}"), (0.2, "Y0"), (0.1, "")])
    hd = 0.7 * dense({0: "Z", 1: "Z"}) + 0.4 * dense({n - 1: "X"}) + 0.2 * dense({0: "Y"}) + 0.1 * np.eye(2 ** n)
    return [h, "Z1"], [hd, dense({1: "Z"})]


# ------------------------------------------------------------------------------------------------
# (1) exact PEC equals the ideal value
@pytest.mark.parametrize("kind", sorted(NOISE))
@pytest.mark.parametrize("n", [2, 3])
def test_exact_pec_equals_the_ideal_expectation(dtype, kind, n):
    c, spec = random_circuit(n, seed=10 * n + len(kind), dtype=dtype)
    rng = np.random.default_rng(n)
    x_np = rng.uniform(-np.pi, np.pi, (4, n))
    x = torch.as_tensor(x_np, dtype=REAL[dtype])
    obs, dense = observables(n)
    w = c.weights.detach().double().numpy()
    ideal = oracle_expvals(spec, n, x_np, w, dense)
    noisy = oracle_expvals(spec, n, x_np, w, dense, NOISE[kind][1])
    model = noise_model(kind)
    # the oracle's noise is the library's (so the cancellation below is of real noise), and it matters
    got_noisy = mixed.expval(c, obs, x=x, noise_model=model).detach().double().numpy()
    np.testing.assert_allclose(got_noisy, noisy, atol=ATOL[dtype])
    assert np.abs(noisy - ideal).max() > 5e-3
    pec = mixed.pec_expval(c, obs, noise_model=model, x=x)
    assert pec.shape == (4, 2) and pec.dtype == REAL[dtype]
    np.testing.assert_allclose(pec.detach().double().numpy(), ideal, atol=ATOL[dtype])


def test_exact_pec_gradient_is_the_ideal_gradient():
    c, spec = random_circuit(3, seed=5)
    x_np = np.array([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7]])
    obs, dense = observables(3)
    model = noise_model("pauli")
    value = mixed.pec_expval(c, obs[0], noise_model=model, x=torch.as_tensor(x_np)).sum()
    grad, = torch.autograd.grad(value, c.weights)
    w = c.weights.detach().numpy()
    eps = 1e-6
    fd = []
    for i in range(len(w)):
        wp, wm = w.copy(), w.copy()
        wp[i] += eps
        wm[i] -= eps
        fd.append((oracle_expvals(spec, 3, x_np, wp, dense[:1]).sum()
                   - oracle_expvals(spec, 3, x_np, wm, dense[:1]).sum()) / (2 * eps))
    np.testing.assert_allclose(grad.numpy(), fd, atol=1e-7)


def test_exact_pec_with_readout_errors_and_the_mitigated_observable():
    c, spec = random_circuit(2, seed=8)
    x_np = np.array([[0.5, -0.9]])
    obs, dense = observables(2)
    model = noise_model("depolarizing1").add_readout_error(0.03, 0.05)
    ideal = oracle_expvals(spec, 2, x_np, c.weights.detach().numpy(), dense[:1])[:, 0]
    h = tql.Hamiltonian([(0.7, "Z0 Z1"), (0.4, "X1"), (0.2, "Y0"), (0.1, "")])
    read = mixed.pec_expval(c, h, noise_model=model, x=torch.as_tensor(x_np))
    assert abs(float(read[0].detach()) - ideal[0]) > 1e-3           # readout errors are not gate noise: they stay
    fixed = mixed.pec_expval(c, model.readout.mitigated_observable(h), noise_model=model, x=torch.as_tensor(x_np))
    np.testing.assert_allclose(fixed.detach().numpy(), ideal, atol=1e-10)


def test_noise_that_never_fires_is_a_no_op():
    """Documented: a model whose rules meet no gate of the circuit cancels nothing (γ = 1)."""
    c, _ = random_circuit(2, seed=1)
    model = tql.NoiseModel().add(mixed.depolarizing(0.1), gates="SWAP")
    x = torch.tensor([[0.2, 0.9]], dtype=torch.float64)
    assert mixed.pec_overhead(c, model) == 1.0
    ideal = tql.expval(c, "Z0", x=x)
    torch.testing.assert_close(mixed.pec_expval(c, "Z0", noise_model=model, x=x), ideal, atol=1e-12, rtol=0)
    m, s = mixed.pec_expval(c, "Z0", noise_model=model, x=x, n_samples=8, return_std=True)
    torch.testing.assert_close(m, ideal, atol=1e-12, rtol=0)
    assert float(s.abs().max()) < 1e-12


# ------------------------------------------------------------------------------------------------
# (2) quasi-probabilities
CHANNELS = {
    "depolarizing1": (lambda: mixed.depolarizing(0.1), kraus_depolarizing(0.1)),
    "depolarizing2": (lambda: mixed.depolarizing(0.07, 2), kraus_depolarizing(0.07, 2)),
    "bit_flip": (lambda: mixed.bit_flip(0.2), kraus_bit_flip(0.2)),
    "phase_flip": (lambda: mixed.phase_flip(0.15), kraus_pauli({"Z": 0.15}, 1)),
    "pauli1": (lambda: mixed.pauli_channel(0.05, 0.1, 0.02), kraus_pauli({"X": 0.05, "Y": 0.1, "Z": 0.02}, 1)),
    "pauli2": (lambda: mixed.pauli_channel(probs={"XI": 0.04, "ZY": 0.06, "YZ": 0.01, "XX": 0.03}),
               kraus_pauli({"XI": 0.04, "ZY": 0.06, "YZ": 0.01, "XX": 0.03}, 2)),
}


@pytest.mark.parametrize("name", sorted(CHANNELS))
def test_quasi_probabilities_are_the_inverse_superoperator(name):
    make, kraus = CHANNELS[name]
    rep = mixed.pauli_inverse(make())
    k = int(np.log2(kraus[0].shape[0]))
    eta = rep.as_dict()
    assert sorted(eta) == sorted(_labels(k))
    inverse = sum(e * np.kron(_pauli(lab), _pauli(lab).conj()) for lab, e in eta.items())
    np.testing.assert_allclose(inverse, np.linalg.inv(superop(kraus)), atol=1e-12)
    assert sum(eta.values()) == pytest.approx(1, abs=1e-12)            # N⁻¹ is trace preserving
    assert rep.gamma == pytest.approx(sum(abs(e) for e in eta.values()), abs=1e-12)
    assert rep.gamma > 1


# Closed form of γ for depolarizing(p) on k wires (d² = 4^k, m = d² − 1; each non-identity Pauli
# string with probability p/m). A Pauli string Q ≠ I commutes with d²/2 strings and anticommutes
# with d²/2, so Σ_{P≠I} s(P, Q) = −1 and the Pauli-transfer eigenvalues are λ_I = 1 and
# λ_Q = (1 − p) − p/m = 1 − p d²/m =: f. The inverse has eigenvalues 1 and 1/f; with
# η = s (1/λ) / d²:  η_I = (1 + m/f) / d²  and, for P ≠ I (Σ_{Q≠I} s(P, Q) = −1),
# η_P = (1 − 1/f) / d² < 0. Hence
#     γ = η_I + m |η_P| = (1 + m/f + m/f − m) / d² = (1 − m + 2m/f) / d²,
# on one wire (1 + 2p/3) / (1 − 4p/3), as in Temme et al.
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("p", [0.001, 0.03, 0.2])
def test_gamma_of_depolarizing_noise_has_the_closed_form(k, p):
    d2 = 4 ** k
    m = d2 - 1
    f = 1 - p * d2 / m
    rep = mixed.pauli_inverse(mixed.depolarizing(p, k))
    assert rep.gamma == pytest.approx((1 - m + 2 * m / f) / d2, rel=1e-12)
    if k == 1:
        assert rep.gamma == pytest.approx((1 + 2 * p / 3) / (1 - 4 * p / 3), rel=1e-12)
    eta = rep.as_dict()
    assert eta["I" * k] == pytest.approx((1 + m / f) / d2, rel=1e-12)
    assert eta["X" * k] == pytest.approx((1 - 1 / f) / d2, rel=1e-12)


def test_overhead_is_the_product_over_noise_locations():
    c, spec = random_circuit(3, seed=2)
    model = noise_model("pauli")
    g1 = mixed.pauli_inverse(mixed.pauli_channel(0.02, 0.05, 0.03)).gamma
    g2 = mixed.pauli_inverse(mixed.pauli_channel(probs={"XZ": 0.03, "YY": 0.02, "ZI": 0.04})).gamma
    n1 = sum(1 for name, _, _ in spec if name in ("RY", "RX"))
    n2 = sum(1 for name, _, _ in spec if name in ("CNOT", "CZ"))
    assert mixed.pec_overhead(c, model) == pytest.approx(g1 ** n1 * g2 ** n2, rel=1e-12)


# ------------------------------------------------------------------------------------------------
# (3) sampled
def _sampled_setup():
    c, spec = random_circuit(3, seed=4)
    x_np = np.array([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7], [-2.5, 0.9, 0.1]])
    obs, dense = observables(3)
    ideal = oracle_expvals(spec, 3, x_np, c.weights.detach().numpy(), dense)
    return c, torch.as_tensor(x_np), obs, ideal


@pytest.mark.parametrize("simulator,n_samples", [("density", 4000), ("trajectories", 2000)])
def test_sampled_pec_is_unbiased_and_its_error_scales_with_gamma(simulator, n_samples):
    c, x, obs, ideal = _sampled_setup()
    model = noise_model("depolarizing1")
    gamma = mixed.pec_overhead(c, model)
    assert gamma > 1.2
    mean, std = mixed.pec_expval(c, obs, noise_model=model, x=x, n_samples=n_samples,
                                 generator=torch.Generator().manual_seed(11), simulator=simulator, return_std=True)
    assert mean.shape == std.shape == (3, 2)
    z = np.abs(mean.detach().numpy() - ideal) / std.numpy()
    assert z.max() < 4, z
    # each sample is ±γ_total Tr(O ρ_P) with |Tr(O ρ_P)| ≤ ‖O‖ (‖O‖ ≤ 1.3, 1): the standard error is
    # at most γ ‖O‖ / √N, and of that order (the noisy values are not near 0 for every P)
    norms = np.array([1.3, 1.0])
    assert (std.numpy() <= gamma * norms / np.sqrt(n_samples) * 1.001).all()
    assert (std.numpy() >= 0.05 * gamma / np.sqrt(n_samples)).all()


def test_sampled_pec_is_reproducible_with_a_seeded_generator():
    c, x, obs, _ = _sampled_setup()
    model = noise_model("depolarizing2")
    a = mixed.pec_expval(c, obs, noise_model=model, x=x, n_samples=64, generator=torch.Generator().manual_seed(3))
    b = mixed.pec_expval(c, obs, noise_model=model, x=x, n_samples=64, generator=torch.Generator().manual_seed(3))
    other = mixed.pec_expval(c, obs, noise_model=model, x=x, n_samples=64, generator=torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    assert not torch.equal(a, other)


def test_sampled_pec_in_complex64(dtype):
    c, spec = random_circuit(2, seed=6, dtype=dtype)
    x_np = np.array([[0.7, -0.4], [2.1, 1.3]])
    obs, dense = observables(2)
    ideal = oracle_expvals(spec, 2, x_np, c.weights.detach().double().numpy(), dense)
    x = torch.as_tensor(x_np, dtype=REAL[dtype])
    mean, std = mixed.pec_expval(c, obs, noise_model=noise_model("bit_flip"), x=x, n_samples=3000, generator=torch.Generator().manual_seed(5), return_std=True)
    assert mean.dtype == REAL[dtype]
    assert (np.abs(mean.detach().double().numpy() - ideal) / std.double().numpy()).max() < 4


# ------------------------------------------------------------------------------------------------
# (4) bad input
def test_non_pauli_channel_is_refused_by_name():
    c, _ = random_circuit(2, seed=0)
    model = tql.NoiseModel().add(mixed.amplitude_damping(0.1), gates="CNOT")
    with pytest.raises(ValueError, match="amplitude_damping is not a Pauli channel"):
        mixed.pec_expval(c, "Z0", noise_model=model, x=torch.zeros(1, 2, dtype=torch.float64))


def test_non_invertible_pauli_channel_is_refused():
    with pytest.raises(ValueError, match="depolarizing is not invertible"):
        mixed.pauli_inverse(mixed.depolarizing(0.75))


def test_trainable_noise_is_refused():
    p = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match="trainable"):
        mixed.pauli_inverse(mixed.bit_flip(p))


def test_n_samples_below_one_is_refused():
    c, _ = random_circuit(2, seed=0)
    with pytest.raises(ValueError, match="n_samples"):
        mixed.pec_expval(c, "Z0", noise_model=noise_model("bit_flip"), n_samples=0, x=torch.zeros(1, 2,
                                                                                                   dtype=torch.float64))


def test_n_samples_of_the_wrong_type_is_refused():
    c, _ = random_circuit(2, seed=0)
    with pytest.raises(TypeError, match="n_samples"):
        mixed.pec_expval(c, "Z0", noise_model=noise_model("bit_flip"), n_samples=10.0,
                         x=torch.zeros(1, 2, dtype=torch.float64))


def test_generator_of_the_wrong_type_is_refused():
    c, _ = random_circuit(2, seed=0)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        mixed.pec_expval(c, "Z0", noise_model=noise_model("bit_flip"), n_samples=10,
                         generator=np.random.default_rng(0), x=torch.zeros(1, 2, dtype=torch.float64))


def test_no_noise_model_is_refused():
    c, _ = random_circuit(2, seed=0)
    with pytest.raises(ValueError, match="no noise_model"):
        mixed.pec_expval(c, "Z0", x=torch.zeros(1, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="no noise_model"):
        mixed.pec_overhead(c)


def test_exact_pec_on_trajectories_is_refused():
    c, _ = random_circuit(2, seed=0)
    with pytest.raises(ValueError, match="n_samples=N"):
        mixed.pec_expval(c, "Z0", noise_model=noise_model("bit_flip"), simulator="trajectories",
                         x=torch.zeros(1, 2, dtype=torch.float64))


def test_collapsing_measurement_is_refused():
    c = mixed.MixedCircuit(2, dtype=torch.complex128, noise_model=noise_model("bit_flip"))
    c.h(0).measure(0, collapse=True).cnot(0, 1)
    with pytest.raises(ValueError, match="collapsing"):
        mixed.pec_expval(c, "Z1")


def test_channels_and_measurements_of_a_mixed_circuit_stay():
    """Channels and non-collapsing measurements written into a MixedCircuit are part of the
    computation: PEC cancels the noise model's channels only."""
    n = 2
    c = mixed.MixedCircuit(n, dtype=torch.complex128)
    c.channel(mixed.phase_damping(0.3), 0)
    c.rx(0, input=0).ry(1, 0.8).cnot(0, 1)
    c.measure(1)
    c.ry(0, -0.6).cz(0, 1).rx(1, input=1)
    x_np = np.array([[0.4, 1.3], [-1.0, 0.2]])
    damping = [np.diag([1, np.sqrt(0.7)]), np.diag([0, np.sqrt(0.3)])]
    projectors = [np.diag([1.0, 0]), np.diag([0, 1.0])]
    dep = kraus_depolarizing(0.1)
    obs, dense = observables(n)

    def oracle(noisy):
        out = []
        for row in x_np:
            rho = np.zeros((4, 4), dtype=np.complex128)
            rho[0, 0] = 1
            ks = [O.full_operator(k, (0,), n) for k in damping]
            rho = sum(k @ rho @ k.conj().T for k in ks)
            for item in [("RX", (0,), row[0]), ("RY", (1,), 0.8), ("CNOT", (0, 1), None), "measure",
                         ("RY", (0,), -0.6), ("CZ", (0, 1), None), ("RX", (1,), row[1])]:
                if item == "measure":
                    ks = [O.full_operator(k, (1,), n) for k in projectors]
                    rho = sum(k @ rho @ k.conj().T for k in ks)
                    continue
                name, wires, angle = item
                u = O.full_operator(gate_matrix(name, angle, row, None), wires, n)
                rho = u @ rho @ u.conj().T
                if noisy and name in ("CNOT", "CZ"):
                    for w in wires:
                        ks = [O.full_operator(k, (w,), n) for k in dep]
                        rho = sum(k @ rho @ k.conj().T for k in ks)
            out.append([np.trace(o @ rho).real for o in dense])
        return np.array(out)
    model = tql.NoiseModel().add(mixed.depolarizing(0.1), gates=["CNOT", "CZ"])
    x = torch.as_tensor(x_np)
    target = oracle(False)
    assert np.abs(oracle(True) - target).max() > 1e-2
    np.testing.assert_allclose(mixed.expval(c, obs, x=x, noise_model=model).detach().numpy(), oracle(True),
                               atol=1e-10)
    np.testing.assert_allclose(mixed.pec_expval(c, obs, noise_model=model, x=x).detach().numpy(), target,
                               atol=1e-10)
    mean, std = mixed.pec_expval(c, obs, noise_model=model, x=x, n_samples=2000, return_std=True,
                                 generator=torch.Generator().manual_seed(2))
    assert (np.abs(mean.detach().numpy() - target) / std.numpy()).max() < 4
