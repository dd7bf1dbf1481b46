"""State tomography (tql.tomography) against NumPy.

Oracles, none of them the code under test: the outcome probabilities of every Pauli basis from a
NumPy density matrix rotated by H (X) or H·S† (Y) per wire (Kronecker products of textbook
matrices) and its diagonal; ρ = Σ_P Tr(ρP) P / 2^n with dense NumPy Pauli strings; fidelities
``(Tr √(√ρ σ √ρ))²`` by scipy.linalg.sqrtm and trace distances by NumPy eigenvalues; Smolin–
Gambetta–Smith's sequential eigenvalue loop written out here; a scipy maximum of the likelihood
over Cholesky factors; Bell and GHZ states written out by hand. Sampled quantities get 5-sigma
bounds of their binomial variance.
"""
import itertools
import warnings

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.optimize as so
import torch

import torchquantum_layers as tql
from torchquantum_layers import tomography

from . import oracle as O

SDG = np.diag([1, -1j])
ROTATION = {"X": O.H, "Y": O.H @ SDG, "Z": O.I2}
TOL = {torch.complex64: 1e-6, torch.complex128: 1e-12}


# ---------------------------------------------------------------------------------------------
# NumPy references
def labels(n):
    return ["".join(t) for t in itertools.product("XYZ", repeat=n)]


def np_probabilities(rho):
    """(3^n, 2^n): diag(U ρ U†) for U = ⊗ rotation of each letter, bases in XYZ-lexicographic order."""
    n = int(np.log2(len(rho)))
    out = []
    for lab in labels(n):
        u = O.kron(*[ROTATION[c] for c in lab])
        out.append(np.real(np.diag(u @ rho @ u.conj().T)))
    return np.array(out)


def random_pure(n, rng):
    v = rng.normal(size=2 ** n) + 1j * rng.normal(size=2 ** n)
    return v / np.linalg.norm(v)


def random_mixed(n, rng, rank=None):
    a = rng.normal(size=(2 ** n, rank or 2 ** n)) + 1j * rng.normal(size=(2 ** n, rank or 2 ** n))
    rho = a @ a.conj().T
    return rho / np.trace(rho).real


def fidelity(rho, sigma):
    with warnings.catch_warnings():          # sqrtm of a rank-deficient matrix warns, and is accurate to 1e-8
        warnings.simplefilter("ignore")
        a = sl.sqrtm(rho)
        return float(np.real(np.trace(sl.sqrtm(a @ sigma @ a))) ** 2)


def trace_distance(a, b):
    return float(np.abs(np.linalg.eigvalsh((a - b + (a - b).conj().T) / 2)).sum() / 2)


def assert_density(rho, dtype):
    tol = 1e-12 if dtype == torch.complex128 else 1e-6
    assert np.abs(rho - rho.conj().T).max() <= tol
    assert abs(np.trace(rho) - 1) <= tol
    assert np.linalg.eigvalsh((rho + rho.conj().T) / 2).min() >= -tol


def sgs_projection(mu):
    """Smolin, Gambetta & Smith (2012), their Algorithm, for a Hermitian trace-1 μ."""
    vals, vecs = np.linalg.eigh(mu)
    order = np.argsort(-vals)
    vals, vecs = vals[order], vecs[:, order]
    lam = vals.copy()
    i, a = len(vals), 0.0
    while vals[i - 1] + a / i < 0:
        lam[i - 1] = 0.0
        a += vals[i - 1]
        i -= 1
    lam[:i] = vals[:i] + a / i
    return (vecs * lam) @ vecs.conj().T


def t(x, dtype=torch.complex128):
    return torch.as_tensor(np.array(x)).to(dtype)


# ---------------------------------------------------------------------------------------------
# (1) the infinite-shot limit
@pytest.mark.parametrize("n", [1, 2, 3])
def test_probabilities_match_numpy_rotations(n, dtype):
    rng = np.random.default_rng(n)
    psi, rho = random_pure(n, rng), random_mixed(n, rng)
    tol = 1e-12 if dtype == torch.complex128 else 2e-6
    got_vec = tomography.probabilities(t(psi[None], dtype))[0].double().numpy()
    got_rho = tomography.probabilities(t(rho[None], dtype))[0].double().numpy()
    np.testing.assert_allclose(got_vec, np_probabilities(np.outer(psi, psi.conj())), atol=tol)
    np.testing.assert_allclose(got_rho, np_probabilities(rho), atol=tol)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_linear_inversion_of_exact_frequencies_is_exact(n, dtype):
    rng = np.random.default_rng(10 + n)
    states = [np.outer(v, v.conj()) for v in (random_pure(n, rng), random_pure(n, rng))]
    states += [random_mixed(n, rng), random_mixed(n, rng, rank=2)]
    freqs = torch.tensor(np.array([np_probabilities(r) for r in states]))       # NumPy's, float64
    record = tomography.TomographyRecord(freqs, dtype=dtype)
    assert record.labels == tuple(labels(n))
    got = tomography.reconstruct(record, "lstsq")
    assert got.dtype == dtype and got.shape == (4, 2 ** n, 2 ** n)
    np.testing.assert_allclose(got.numpy(), np.array(states), atol=TOL[dtype])
    # projecting a valid estimate changes nothing
    np.testing.assert_allclose(tomography.reconstruct(record, "projected").numpy(), np.array(states),
                               atol=10 * TOL[dtype])


def test_pauli_expectations_and_observables_of_exact_frequencies():
    rng = np.random.default_rng(3)
    n = 3
    rho = random_mixed(n, rng)
    record = tomography.TomographyRecord(torch.tensor(np_probabilities(rho))[None])
    e = tomography.pauli_expectations(record)[0].numpy()
    for k, lab in enumerate(itertools.product("IXYZ", repeat=n)):
        assert abs(e[k] - np.real(np.trace(rho @ O.pauli_matrix("".join(lab))))) < 1e-12
    h = tql.Hamiltonian([(0.5, "X0 Y1"), (-1.25, "Z2"), (0.75, "Y0 Y1 X2"), (0.3, "")])
    want = sum(c * np.real(np.trace(rho @ O.pauli_matrix(lab)))
               for c, lab in ((0.5, "XYI"), (-1.25, "IIZ"), (0.75, "YYX"), (0.3, "III")))
    got = tomography.expectation_from_record(record, [h, "Z2"])
    assert got.shape == (1, 2)
    assert abs(float(got[0, 0]) - want) < 1e-12
    assert abs(float(got[0, 1]) - np.real(np.trace(rho @ O.pauli_matrix("IIZ")))) < 1e-12


# ---------------------------------------------------------------------------------------------
# (2) counts
def test_counts_total_shots_and_average_to_the_probabilities(dtype):
    rng = np.random.default_rng(4)
    n, B, shots = 2, 300, 60
    rho, psi = random_mixed(n, rng, rank=2), random_pure(n, rng)
    g = torch.Generator().manual_seed(7)
    for state, dm in ((t(np.broadcast_to(rho, (B,) + rho.shape), dtype), rho),
                      (t(np.broadcast_to(psi, (B, len(psi))), dtype), np.outer(psi, psi.conj()))):
        record = tomography.collect(state, shots, generator=g)
        assert record.counts.shape == (B, 9, 4) and not record.counts.is_floating_point()
        assert bool((record.shots == shots).all())
        p = np_probabilities(dm)
        mean = record.counts.double().mean(0).numpy() / shots
        sigma = np.sqrt(p * (1 - p) / (B * shots))
        assert np.all(np.abs(mean - p) <= 5 * sigma + 1e-9)
        # per basis, a chi-square of the pooled counts well inside its 3^n (2^n − 1) degrees of freedom
        pooled, expect = record.counts.sum(0).double().numpy(), B * shots * p
        mask = expect > 0
        chi2 = (((pooled - expect) ** 2)[mask] / expect[mask]).sum()
        dof = mask.sum() - 9
        assert chi2 < dof + 5 * np.sqrt(2 * dof)


# ---------------------------------------------------------------------------------------------
# (3) projected and maximum-likelihood estimates
def _estimates(rho_true, shots, seed, dtype=torch.complex128, methods=tomography.METHODS):
    record = tomography.collect(t(rho_true[None], dtype), shots, generator=torch.Generator().manual_seed(seed))
    return {m: tomography.reconstruct(record, m).to(torch.complex128)[0].numpy() for m in methods}


def test_projected_and_mle_are_states_close_to_a_pure_target(dtype):
    rng = np.random.default_rng(5)
    psi = random_pure(2, rng)
    target = np.outer(psi, psi.conj())
    est = _estimates(target, 2000, seed=11, dtype=dtype)
    for method in ("projected", "mle"):
        assert_density(est[method], dtype)
        assert fidelity(est[method], target) > 0.97, method
    # linear inversion is Hermitian with trace 1, and here not positive
    assert np.abs(est["lstsq"] - est["lstsq"].conj().T).max() <= TOL[dtype]


def test_error_decreases_with_shots():
    rng = np.random.default_rng(6)
    target = random_mixed(2, rng, rank=1)
    few, many = _estimates(target, 200, seed=1), _estimates(target, 20000, seed=2)
    for method in tomography.METHODS:
        d_few, d_many = trace_distance(few[method], target), trace_distance(many[method], target)
        assert d_many < d_few / 2, (method, d_few, d_many)
        assert d_many < 0.03, method


def test_projection_matches_smolin_gambetta_smith_and_keeps_states():
    rng = np.random.default_rng(8)
    d = 8
    a = rng.normal(size=(d, d)) + 1j * rng.normal(size=(d, d))
    h = (a + a.conj().T) / 2
    mu = h - (np.trace(h).real - 1) / d * np.eye(d)              # Hermitian, trace 1, indefinite
    assert np.linalg.eigvalsh(mu).min() < -0.1
    rho = random_mixed(3, rng, rank=3)
    got = tomography.closest_density_matrix(t(np.array([mu, rho]))).numpy()
    np.testing.assert_allclose(got[0], sgs_projection(mu), atol=1e-12)
    assert_density(got[0], torch.complex128)
    np.testing.assert_allclose(got[1], rho, atol=1e-12)


def test_mle_maximises_the_likelihood_like_scipy():
    rng = np.random.default_rng(9)
    rho = random_mixed(1, rng)
    record = tomography.collect(t(rho[None]), 300, generator=torch.Generator().manual_seed(3))
    counts = record.counts[0].numpy()

    def nll(sigma):
        return -float((counts * np.log(np.maximum(np_probabilities(sigma), 1e-300))).sum())

    def nll_of_cholesky(params):
        lower = np.array([[params[0], 0], [params[1] + 1j * params[2], params[3]]])
        sigma = lower @ lower.conj().T
        return nll(sigma / np.trace(sigma).real)

    best = min((so.minimize(nll_of_cholesky, rng.normal(size=4), method="Nelder-Mead",
                            options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000}) for _ in range(3)),
               key=lambda r: r.fun)
    got = tomography.reconstruct(record, "mle", iterations=2000, tol=1e-13)[0].numpy()
    assert_density(got, torch.complex128)
    assert nll(got) <= best.fun + 1e-6
    # one qubit: three bases fit any Bloch vector, so where linear inversion is a state (here a
    # well mixed one) it is the maximum of the likelihood
    rho = 0.6 * np.eye(2) / 2 + 0.4 * random_mixed(1, rng)
    record = tomography.collect(t(rho[None]), 500, generator=torch.Generator().manual_seed(4))
    lin = tomography.reconstruct(record, "lstsq")[0].numpy()
    assert np.linalg.eigvalsh(lin).min() > 0.05
    np.testing.assert_allclose(tomography.reconstruct(record, "mle", iterations=2000, tol=1e-14)[0].numpy(),
                               lin, atol=1e-8)


# ---------------------------------------------------------------------------------------------
# (4) Bell and GHZ states from circuits
def test_bell_and_ghz_states_from_circuits(dtype):
    bell = np.array([1, 0, 0, 1]) / np.sqrt(2)
    ghz = np.zeros(8)
    ghz[[0, 7]] = 1 / np.sqrt(2)
    g = torch.Generator().manual_seed(12)
    cases = ((tql.Circuit(2, dtype=dtype).h(0).cnot(0, 1), bell),
             (tql.Circuit(3, dtype=dtype).h(0).cnot(0, 1).cnot(1, 2), ghz))
    for circuit, psi in cases:
        target = np.outer(psi, psi.conj())
        for method in ("projected", "mle"):
            rho = tomography.state_tomography(circuit, 1000, generator=g, method=method)
            assert rho.dtype == dtype and rho.shape == (1, len(psi), len(psi))
            rho = rho[0].to(torch.complex128).numpy()
            assert_density(rho, dtype)
            assert fidelity(rho, target) >= 0.98, (len(psi), method)


def test_noisy_bell_state_from_a_mixed_circuit():
    p = 0.2
    c = tql.MixedCircuit(2, dtype=torch.complex128).h(0).cnot(0, 1)
    c.channel(tql.mixed.depolarizing(p), [1])
    bell = np.array([1, 0, 0, 1]) / np.sqrt(2)
    b = np.outer(bell, bell.conj())
    # depolarizing on wire 1: (1 − p) ρ + p/3 Σ_P (I ⊗ P) ρ (I ⊗ P)
    want = (1 - p) * b + p / 3 * sum(O.kron(O.I2, q) @ b @ O.kron(O.I2, q) for q in (O.X, O.Y, O.Z))
    rho, record = tomography.state_tomography(c, 4000, generator=torch.Generator().manual_seed(2),
                                              method="mle", return_record=True)
    assert record.n_wires == 2 and bool((record.shots == 4000).all())
    assert trace_distance(rho[0].numpy(), want) < 0.03


# ---------------------------------------------------------------------------------------------
# (5) reproducibility
def test_same_generator_seed_gives_the_same_record():
    state = tql.qinfo.haar_state(3, batch=4, generator=torch.Generator().manual_seed(0))
    a = tomography.collect(state, 100, generator=torch.Generator().manual_seed(5))
    b = tomography.collect(state, 100, generator=torch.Generator().manual_seed(5))
    c = tomography.collect(state, 100, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a.counts, b.counts)
    assert not torch.equal(a.counts, c.counts)
    for method in tomography.METHODS:
        assert torch.equal(tomography.reconstruct(a, method, iterations=30),
                           tomography.reconstruct(b, method, iterations=30))


# ---------------------------------------------------------------------------------------------
# (6) refusals, one each
def test_refuses_more_than_eight_qubits():
    state = torch.zeros(1, 2 ** 9, dtype=torch.complex64)
    state[0, 0] = 1
    with pytest.raises(ValueError, match=r"19,683 Pauli bases .* 512 outcomes"):
        tomography.collect(state, 10)


def test_refuses_shots_below_one():
    state = tql.qinfo.haar_state(1)
    with pytest.raises(ValueError, match="shots must be >= 1"):
        tomography.collect(state, 0)
    with pytest.raises(TypeError, match="shots must be an int"):
        tomography.collect(state, 10.0)


def test_refuses_an_unknown_method():
    record = tomography.collect(tql.qinfo.haar_state(1), 10)
    with pytest.raises(ValueError, match="method must be one of"):
        tomography.reconstruct(record, "bayesian")


def test_refuses_a_state_that_is_not_normalised():
    with pytest.raises(ValueError, match=r"state 1 is not normalised \(squared norm 4"):
        tomography.collect(torch.tensor([[1, 0], [2, 0]], dtype=torch.complex64), 10)
    with pytest.raises(ValueError, match=r"state 0 is not normalised \(trace"):
        tomography.collect(torch.eye(2, dtype=torch.complex128)[None], 10)


def test_refuses_a_density_matrix_that_is_not_positive():
    rho = torch.tensor([[[1.5, 0], [0, -0.5]]], dtype=torch.complex128)
    with pytest.raises(ValueError, match="not positive semidefinite"):
        tomography.collect(rho, 10)


def test_refuses_a_generator_of_the_wrong_type():
    with pytest.raises(TypeError, match="generator must be a torch.Generator, got int"):
        tomography.collect(tql.qinfo.haar_state(1), 10, generator=3)


def test_refuses_unknown_bases():
    with pytest.raises(ValueError, match="bases must be 'pauli'"):
        tomography.collect(tql.qinfo.haar_state(1), 10, bases="clifford")


def test_refuses_a_mismatched_record():
    with pytest.raises(ValueError, match="8 outcomes mean 3 qubits and 3\\*\\*3 = 27 Pauli bases"):
        tomography.TomographyRecord(torch.ones(1, 9, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="record must be a TomographyRecord"):
        tomography.reconstruct(torch.ones(1, 9, 4, dtype=torch.long))
    record = tomography.TomographyRecord(torch.ones(1, 9, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="acts on wire 2 but the state has 2 qubits"):
        tomography.expectation_from_record(record, "Z2")


def test_refuses_negative_or_empty_counts():
    with pytest.raises(ValueError, match="non-negative"):
        tomography.TomographyRecord(-torch.ones(1, 3, 2))
    counts = torch.ones(1, 3, 2, dtype=torch.long)
    counts[0, 1] = 0
    with pytest.raises(ValueError, match="basis Y of state 0 has no counts"):
        tomography.TomographyRecord(counts)
