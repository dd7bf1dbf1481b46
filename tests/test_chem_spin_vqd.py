"""Spin / particle-number observables (chem/operators.py) and Variational Quantum Deflation (chem/excited_states.py).

Oracles: N, S_z and S² built here in NumPy from the occupation-number basis (bit arithmetic, and
dense annihilation matrices with explicit Jordan–Wigner sign strings), parity / Bravyi–Kitaev
encodings as explicit GF(2) basis permutations (Seeley–Richard–Love recursion for BK), exact
diagonalisation (numpy eigh, restricted to symmetry sectors by projection), analytic spin values
(singlet 0, doublet ¾, triplet 2) and torch.autograd.gradcheck in complex128.
"""


import numpy as np
import pytest
import torch

import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.chem import operators as ops
from torchquantum_layers.chem import excited_states as V
from torchquantum_layers.observables import Hamiltonian


CHEM_ACC = 1.6e-3
MAPPINGS = ["jordan_wigner", "parity", "bravyi_kitaev"]


# ------------------------------------------------------------------------------------------------
# NumPy oracle (occupation basis = JW qubit basis: wire 0 is the most significant bit)
def occupations(n):
    """(2**n, n) array: occupation of mode j in basis state i."""
    idx = np.arange(2 ** n)
    return (idx[:, None] >> (n - 1 - np.arange(n))[None, :]) & 1


def annihilation(j, n):
    """a_j |occ> = occ_j (-1)^{sum_{k<j} occ_k} |occ - e_j>, by brute force over basis states."""
    a = np.zeros((2 ** n, 2 ** n))
    occ = occupations(n)
    for i in range(2 ** n):
        if occ[i, j]:
            a[i ^ (1 << (n - 1 - j)), i] = (-1) ** int(occ[i, :j].sum())
    return a


def oracle_ops(n):
    occ = occupations(n)
    number = np.diag(occ.sum(axis=1).astype(float))
    sz = np.diag(0.5 * (occ[:, 0::2].sum(axis=1) - occ[:, 1::2].sum(axis=1)))
    a = [annihilation(j, n) for j in range(n)]
    s_plus = sum(a[2 * p].T @ a[2 * p + 1] for p in range(n // 2))
    s_minus = s_plus.T
    s2 = s_minus @ s_plus + sz + sz @ sz
    return {"number": number, "spin_z": sz, "spin_plus": s_plus, "spin_minus": s_minus, "spin_squared": s2}


def parity_matrix(n):
    return np.tril(np.ones((n, n), dtype=int))


def bk_matrix(n):
    """Seeley, Richard & Love (2012): beta_1 = [1], beta_{2m} = [[beta_m, 0], [ones-row, beta_m]]
    (the last row of the lower-left block all ones); other n: the leading n x n block."""
    b = np.ones((1, 1), dtype=int)
    while b.shape[0] < n:
        m = b.shape[0]
        low = np.zeros((m, m), dtype=int)
        low[-1, :] = 1
        b = np.block([[b, np.zeros((m, m), dtype=int)], [low, b]])
    return b[:n, :n]


def encoding_permutation(mapping, n):
    """Pi with Pi |occ> = |A occ mod 2>: a mapped operator is Pi O_JW Pi^T."""
    if mapping == "jordan_wigner":
        return np.eye(2 ** n)
    a = parity_matrix(n) if mapping == "parity" else bk_matrix(n)
    occ = occupations(n)
    q = (occ @ a.T) % 2
    target = (q * (1 << (n - 1 - np.arange(n)))).sum(axis=1)
    pi = np.zeros((2 ** n, 2 ** n))
    pi[target, np.arange(2 ** n)] = 1
    return pi


def dense(H, n):
    return H.to_dense(n_wires=n).numpy()


@pytest.fixture(scope="module")
def h2():
    H, info = chem.load("H2")
    return H, info, dense(H, 4)


def sector_levels(M, projectors):
    """Eigenvalues of M restricted to the common +1 space of the given 0/1 projectors."""
    P = np.eye(M.shape[0])
    for p in projectors:
        P = P @ p
    w, U = np.linalg.eigh(P)
    basis = U[:, w > 0.5]
    return np.linalg.eigvalsh(basis.conj().T @ M @ basis)


def eigen_projector(O, value):
    w, U = np.linalg.eigh(O)
    sel = np.abs(w - value) < 1e-8
    return U[:, sel] @ U[:, sel].conj().T


# ------------------------------------------------------------------------------------------------
# operators against the NumPy oracle
BUILDERS = {"number": ops.particle_number, "spin_z": ops.spin_z, "spin_plus": ops.spin_plus,
            "spin_minus": ops.spin_minus, "spin_squared": ops.spin_squared}


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("n", [2, 4, 6])
def test_operators_match_occupation_basis_oracle(n, mapping):
    want = oracle_ops(n)
    pi = encoding_permutation(mapping, n)
    for name, build in BUILDERS.items():
        H = build(n, mapping)
        assert H.n_wires == n
        got = dense(H, n)
        np.testing.assert_allclose(got, pi @ want[name] @ pi.T, atol=1e-12, err_msg=f"{name}, {mapping}")
        if name not in ("spin_plus", "spin_minus"):
            assert all(isinstance(c, float) for c in H.coeffs), name      # Hermitian: real coefficients


@pytest.mark.parametrize("n", [2, 4, 6])
def test_oracle_spin_squared_spectrum_is_s_s_plus_1(n):
    # sanity of the oracle itself: S^2 eigenvalues are s(s+1) with multiplicities of SU(2) multiplets
    w = np.linalg.eigvalsh(oracle_ops(n)["spin_squared"])
    allowed = [s * (s + 1) for s in np.arange(0, n / 4 + 0.1, 0.5)]
    assert all(min(abs(v - a) for a in allowed) < 1e-10 for v in w)
    assert np.isclose(w.sum(), np.trace(oracle_ops(n)["spin_squared"]))


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_mapped_occupation_states_have_the_right_quantum_numbers(mapping):
    # every occupation vector, encoded by the library's map, against bit counting
    n = 4
    for occ in occupations(n):
        bits = chem.occupation_to_qubits(occ, mapping)
        state = torch.zeros(2 ** n, dtype=torch.complex128)
        state[int("".join(map(str, bits)), 2)] = 1
        r = ops.spin_and_number(state, mapping=mapping)
        assert float(r.n_electrons) == pytest.approx(occ.sum(), abs=1e-12)
        assert float(r.spin_z) == pytest.approx(0.5 * (occ[0::2].sum() - occ[1::2].sum()), abs=1e-12)


def test_jordan_wigner_closed_forms():
    # N = sum (1 - Z_j)/2 and S_z = sum (-1)^{j+1} Z_j / 4 (alpha on even qubits)
    assert ops.particle_number(4).equals(Hamiltonian.from_string("2 - 0.5*Z0 - 0.5*Z1 - 0.5*Z2 - 0.5*Z3"))
    assert ops.spin_z(4).equals(Hamiltonian.from_string("-0.25*Z0 + 0.25*Z1 - 0.25*Z2 + 0.25*Z3"))


def test_h2_commutes_with_number_and_spin(h2):
    H, _, M = h2
    o = oracle_ops(4)
    for name in ("number", "spin_z", "spin_squared"):
        np.testing.assert_allclose(M @ o[name] - o[name] @ M, 0, atol=1e-12, err_msg=name)
        assert H.commutes_with(BUILDERS[name](4))
    assert not ops.spin_squared(4).commutes_with(Hamiltonian.from_string("Z0"))   # S^2 is not diagonal


def test_hf_and_triplet_quantum_numbers(dtype, atol):
    n = 4
    hf = chem.hartree_fock(n, 2, dtype=dtype)
    r = ops.spin_and_number(hf, n)
    assert float(r.n_electrons) == pytest.approx(2, abs=atol)
    assert float(r.spin_z) == pytest.approx(0, abs=atol)
    assert float(r.spin_squared) == pytest.approx(0, abs=atol)
    # triplet: |alpha0 alpha1> (S_z = 1) and its S_- partner (S_z = 0) built with the NumPy oracle
    up = np.zeros(16)
    up[0b1010] = 1
    t0 = oracle_ops(n)["spin_minus"] @ up
    t0 /= np.linalg.norm(t0)
    open_shell = np.zeros(16)
    open_shell[0b1001] = 1                      # alpha0 beta1: half singlet, half triplet
    states = torch.tensor(np.stack([up, t0, open_shell]), dtype=dtype)
    r = ops.spin_and_number(states)
    np.testing.assert_allclose(r.n_electrons.numpy(), [2, 2, 2], atol=atol)
    np.testing.assert_allclose(r.spin_z.numpy(), [1, 0, 0], atol=atol)
    np.testing.assert_allclose(r.spin_squared.numpy(), [2, 2, 1], atol=atol)
    np.testing.assert_allclose(r.spin.numpy()[:2], [1, 1], atol=1e-4)
    # a doublet (one alpha electron): S^2 = 3/4, s = 1/2
    doublet = torch.zeros(16, dtype=dtype)
    doublet[0b1000] = 1
    assert float(ops.spin_and_number(doublet).spin_squared) == pytest.approx(0.75, abs=atol)
    assert float(ops.spin_and_number(doublet).spin) == pytest.approx(0.5, abs=1e-5)


def test_spin_and_number_of_ground_state_matches_numpy(h2):
    _, _, M = h2
    w, U = np.linalg.eigh(M)
    ground = torch.tensor(U[:, 0], dtype=torch.complex128)
    r = ops.spin_and_number(ground.unsqueeze(0), 4)
    o = oracle_ops(4)
    for got, name in ((r.n_electrons, "number"), (r.spin_z, "spin_z"), (r.spin_squared, "spin_squared")):
        assert got.dim() == 0
        assert float(got) == pytest.approx(float(np.real(U[:, 0].conj() @ o[name] @ U[:, 0])), abs=1e-10)
    assert "n_electrons=2" in repr(r)


@pytest.mark.parametrize("bad,exc,match", [
    (0, ValueError, "n_qubits must be in"), (-2, ValueError, "n_qubits must be in"),
    (64, ValueError, "n_qubits must be in"), (3, ValueError, "must be even"),
    (4.0, TypeError, "n_qubits must be an int"), (True, TypeError, "n_qubits must be an int"),
    ("4", TypeError, "n_qubits must be an int")])
def test_spin_operator_bad_n_qubits(bad, exc, match):
    for build in (ops.spin_z, ops.spin_squared, ops.spin_plus, ops.spin_minus):
        with pytest.raises(exc, match=match):
            build(bad)


def test_particle_number_bad_inputs_and_odd_width():
    assert dense(ops.particle_number(3), 3).trace().real == pytest.approx(12)   # sum_i popcount(i), n = 3
    with pytest.raises(ValueError, match="n_qubits must be in"):
        ops.particle_number(0)
    with pytest.raises(TypeError, match="n_qubits must be an int"):
        ops.particle_number(2.5)
    with pytest.raises(ValueError, match="unknown fermion-to-qubit mapping 'jw2'"):
        ops.particle_number(4, "jw2")
    with pytest.raises(TypeError, match="mapping must be a string"):
        ops.spin_squared(4, 3)


def test_spin_and_number_bad_inputs():
    good = torch.zeros(16, dtype=torch.complex128)
    good[0] = 1
    with pytest.raises(TypeError, match="expected a tql.Circuit or a state tensor"):
        ops.spin_and_number([1, 0, 0, 0])
    with pytest.raises(ValueError, match="complex tensor"):
        ops.spin_and_number(torch.zeros(16))
    with pytest.raises(ValueError, match="not 2\\*\\*n"):
        ops.spin_and_number(torch.zeros(15, dtype=torch.complex64))
    with pytest.raises(ValueError, match="must be even"):
        ops.spin_and_number(torch.zeros(8, dtype=torch.complex64))
    with pytest.raises(ValueError, match="n_qubits=6 but the state has 4 qubits"):
        ops.spin_and_number(good, 6)
    with pytest.raises(ValueError, match="x applies only to a circuit"):
        ops.spin_and_number(good, x=torch.zeros(1, 1))
    with pytest.raises(ValueError, match="unknown fermion-to-qubit mapping"):
        ops.spin_and_number(good, mapping="nope")


# ------------------------------------------------------------------------------------------------
# bounds, sector Hamiltonian, loss
def test_spectral_width_bound_is_a_bound_and_tight_for_disjoint_terms(h2):
    H, _, M = h2
    w = np.linalg.eigvalsh(M)
    assert V.spectral_width_bound(H) >= w[-1] - w[0]
    # commuting terms on different qubits reach the bound: range = 2 (0.5 + 0.25) = 1.5
    toy = Hamiltonian.from_string("3 + 0.5*Z0 + 0.25*X1")
    assert V.spectral_width_bound(toy) == pytest.approx(1.5)
    wt = np.linalg.eigvalsh(dense(toy, 2))
    assert wt[-1] - wt[0] == pytest.approx(1.5)
    # equal strings are merged before summing |c|
    assert V.spectral_width_bound(Hamiltonian([(0.5, "Z0"), (-0.5, "Z0"), (1.0, "X0")])) == pytest.approx(2.0)


def test_sector_hamiltonian_matches_numpy_and_default_weights(h2):
    H, _, M = h2
    o = oracle_ops(4)
    Hs, mus = V.sector_hamiltonian(H, 4, {"spin_squared": 0, "n_electrons": 2})
    width = 2 * sum(abs(c) for c, p in H.terms if p.x_mask or p.z_mask)
    # d = 1 for N; d = 3/4 between S^2 = 0 and the doublet's 3/4
    assert mus["n_electrons"] == pytest.approx(1.5 * width)
    assert mus["spin_squared"] == pytest.approx(1.5 * width / 0.75 ** 2)
    N2 = o["number"] - 2 * np.eye(16)
    want = M + mus["n_electrons"] * N2 @ N2 + mus["spin_squared"] * o["spin_squared"] @ o["spin_squared"]
    np.testing.assert_allclose(dense(Hs, 4), want, atol=1e-10)
    # the default mu puts every out-of-sector level above every in-sector one
    inside = sector_levels(M, [eigen_projector(o["number"], 2), eigen_projector(o["spin_squared"], 0)])
    w = np.linalg.eigvalsh(dense(Hs, 4))
    np.testing.assert_allclose(w[:len(inside)], inside, atol=1e-10)
    # explicit weights: one number for all, or per key; spin_z's d is 1/2
    Hz, mz = V.sector_hamiltonian(H, 4, {"spin_z": 0.5}, weights=2.0)
    np.testing.assert_allclose(dense(Hz, 4), M + 2.0 * (o["spin_z"] - 0.5 * np.eye(16)) @ (o["spin_z"] - 0.5 * np.eye(16)),
                               atol=1e-10)
    assert mz == {"spin_z": 2.0}
    _, mz = V.sector_hamiltonian(H, 4, {"spin_z": 0})
    assert mz["spin_z"] == pytest.approx(1.5 * width / 0.25)


def test_vqd_loss_value_and_gradcheck():
    torch.manual_seed(3)
    H = Hamiltonian.from_string("0.4*Z0 Z1 - 0.3*X0 + 0.2*Y1 X2 + 0.7*Z2")
    c = tql.templates.hardware_efficient(tql.Circuit(3, dtype=torch.complex128), 2, kind="complex", init="normal")
    rng = np.random.default_rng(0)
    prev = rng.normal(size=(2, 8)) + 1j * rng.normal(size=(2, 8))
    prev /= np.linalg.norm(prev, axis=1, keepdims=True)
    beta = torch.tensor([1.3, 0.6], dtype=torch.float64)
    prev_t = torch.tensor(prev)
    loss, e, ov = V.vqd_loss(c, H, prev_t, beta)
    psi = c().detach().numpy()[0]
    Md = dense(H, 3)
    ov_np = np.abs(prev.conj() @ psi) ** 2
    assert float(e.detach()) == pytest.approx(float(np.real(psi.conj() @ Md @ psi)), abs=1e-12)
    np.testing.assert_allclose(ov.detach().numpy(), ov_np, atol=1e-12)
    assert float(loss.detach()) == pytest.approx(float(np.real(psi.conj() @ Md @ psi) + (beta.numpy() * ov_np).sum()), abs=1e-12)
    w = c.weights.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda w: V.vqd_loss(c, H, prev_t, beta, weights=w)[0], (w,))
    # the adjoint energy gradient gives the same total gradient
    g_back, = torch.autograd.grad(V.vqd_loss(c, H, prev_t, beta, weights=w)[0], w)
    g_adj, = torch.autograd.grad(V.vqd_loss(c, H, prev_t, beta, diff_method="adjoint", weights=w)[0], w)
    torch.testing.assert_close(g_adj, g_back, atol=1e-10, rtol=0)


# ------------------------------------------------------------------------------------------------
# VQD on H2 against exact diagonalisation
def hea(seed, dtype=torch.complex128, layers=3):
    torch.manual_seed(seed)
    return chem.hardware_efficient(4, layers, n_electrons=2, dtype=dtype)


def upccgsd(seed):
    torch.manual_seed(seed)
    return chem.k_upccgsd(4, 2, k=2, init="small", dtype=torch.complex128)


def test_vqd_full_spectrum_lowest_three(h2):
    H, _, M = h2
    exact = np.linalg.eigvalsh(M)[:3]            # -1.137, then the doubly degenerate N = 1 / 3 doublet
    steps = []
    r = V.vqd(H, hea(0), 3, steps=100, seed=0, callback=lambda lv, s, loss: steps.append((lv, s)))
    np.testing.assert_allclose(r.energies.numpy(), exact, atol=CHEM_ACC)
    np.testing.assert_allclose(r.overlaps.numpy(), np.eye(3), atol=1e-3)
    assert r.states.shape == (3, 16) and r.weights.shape == (3, r.circuit.num_parameters)
    assert [len(h) for h in r.histories] == [n + 1 for n in r.n_steps]
    assert sorted({lv for lv, _ in steps}) == [0, 1, 2] and len(steps) == sum(len(h) for h in r.histories)
    # states are what the reported angles prepare, and energies are their <H> (NumPy)
    c = r.circuit.copy()
    for level in range(3):
        with torch.no_grad():
            c.weights.copy_(r.weights[level])
        psi = c().detach().numpy()[0]
        np.testing.assert_allclose(psi, r.states[level].numpy(), atol=1e-10)
        assert float(np.real(psi.conj() @ M @ psi)) == pytest.approx(float(r.energies[level]), abs=1e-10)
    # the default beta exceeds every gap among the levels found
    assert torch.all(r.beta == 1.5 * V.spectral_width_bound(H)) and r.beta.shape == (2,)
    assert float(r.beta.min()) > exact[-1] - exact[0]


def test_vqd_two_levels_both_dtypes(h2, dtype):
    H, _, M = h2
    r = V.vqd(H, hea(1, dtype), 2, steps=100, seed=1)
    np.testing.assert_allclose(r.energies.numpy(), np.linalg.eigvalsh(M)[:2], atol=CHEM_ACC)
    assert r.energies.dtype == (torch.float64 if dtype == torch.complex128 else torch.float32)


def test_vqd_number_conserving_ansatz_finds_its_sector_with_triplet(h2):
    # k-UpCCGSD stays in N = 2, S_z = 0: the levels there are the singlet ground state, the
    # S_z = 0 triplet component, then the open-shell singlet
    H, _, M = h2
    o = oracle_ops(4)
    exact = sector_levels(M, [eigen_projector(o["number"], 2), eigen_projector(o["spin_z"], 0)])[:3]
    r = V.vqd(H, upccgsd(0), 3, steps=100, perturbation=1.0, seed=0)
    np.testing.assert_allclose(r.energies.numpy(), exact, atol=CHEM_ACC)
    s2 = np.real(np.einsum("ki,ij,kj->k", r.states.numpy().conj(), o["spin_squared"], r.states.numpy()))
    np.testing.assert_allclose(s2, [0, 2, 0], atol=1e-3)


def test_vqd_spin_sector_penalty_skips_the_triplet(h2):
    H, _, M = h2
    o = oracle_ops(4)
    exact = sector_levels(M, [eigen_projector(o["number"], 2), eigen_projector(o["spin_squared"], 0)])
    assert len(exact) == 3
    r = V.vqd(H, upccgsd(0), 3, steps=100, perturbation=1.0, seed=0,
              sector={"n_electrons": 2, "spin_squared": 0})
    np.testing.assert_allclose(r.energies.numpy(), exact, atol=CHEM_ACC)
    psi = r.states.numpy()
    s2 = np.real(np.einsum("ki,ij,kj->k", psi.conj(), o["spin_squared"], psi))
    np.testing.assert_allclose(s2, 0, atol=1e-3)
    assert set(r.sector_weights) == {"n_electrons", "spin_squared"}


def test_vqd_sector_penalty_with_a_number_breaking_ansatz(h2):
    # the hardware-efficient ansatz leaves N = 2 freely: only the penalty keeps it there
    H, _, M = h2
    o = oracle_ops(4)
    exact = sector_levels(M, [eigen_projector(o["number"], 2), eigen_projector(o["spin_squared"], 0)])[:2]
    r = V.vqd(H, hea(0), 2, steps=100, perturbation=1.0, seed=0, restarts=3,
              sector={"n_electrons": 2, "spin_squared": 0})
    np.testing.assert_allclose(r.energies.numpy(), exact, atol=CHEM_ACC)
    n_exp = np.real(np.einsum("ki,ij,kj->k", r.states.numpy().conj(), o["number"], r.states.numpy()))
    np.testing.assert_allclose(n_exp, 2, atol=1e-3)
    # without the sector, the second level is the N = 1 / 3 doublet below the sector's level
    assert np.linalg.eigvalsh(M)[1] < exact[1] - 0.1


def test_vqd_beta_below_the_gap_returns_the_ground_state_again(h2):
    # Higgott et al.: with beta < E_1 - E_0 the deflated minimum is E_0 + beta, at the ground state
    H, _, M = h2
    exact = np.linalg.eigvalsh(M)
    r = V.vqd(H, hea(1), 2, beta=0.05, steps=100, seed=1)
    assert float(r.energies[1]) == pytest.approx(exact[0], abs=CHEM_ACC)
    assert float(r.overlaps[0, 1]) > 0.99
    assert r.histories[1][-1] == pytest.approx(exact[0] + 0.05, abs=CHEM_ACC)


def test_vqd_explicit_init_and_restarts(h2):
    H, _, M = h2
    c = upccgsd(0)
    init = torch.zeros(2, c.num_parameters, dtype=torch.float64)
    init[1] = 0.7
    r = V.vqd(H, c, 2, steps=60, init=init)
    np.testing.assert_allclose(r.energies.numpy(), np.linalg.eigvalsh(M)[[0, 3]], atol=CHEM_ACC)
    # more restarts never end level 0 higher (its first start is the same)
    one = V.vqd(H, hea(4), 1, steps=30, seed=4)
    three = V.vqd(H, hea(4), 1, steps=30, seed=4, restarts=3)
    assert three.histories[0][-1] <= one.histories[0][-1] + 1e-12


def test_vqd_from_an_input_state(h2):
    # the HF determinant as input state instead of X gates in the circuit: the same sector levels
    H, _, M = h2
    o = oracle_ops(4)
    torch.manual_seed(0)
    c = chem.k_upccgsd(4, 2, k=2, hf=False, init="small", dtype=torch.complex128)
    hf = torch.zeros(1, 16, dtype=torch.complex128)
    hf[0, 0b1100] = 1
    r = V.vqd(H, c, 2, steps=100, perturbation=1.0, seed=0, state=hf, sector={"spin_squared": 0})
    exact = sector_levels(M, [eigen_projector(o["number"], 2), eigen_projector(o["spin_squared"], 0)])[:2]
    np.testing.assert_allclose(r.energies.numpy(), exact, atol=CHEM_ACC)


# ------------------------------------------------------------------------------------------------
# bad inputs
@pytest.fixture(scope="module")
def setup():
    H, _ = chem.load("H2")
    return H, hea(0)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"k": 0}, ValueError, "k must be an int in 1..16"),
    ({"k": -1}, ValueError, "k must be an int in 1..16"),
    ({"k": 17}, ValueError, "k must be an int in 1..16"),
    ({"k": 2.0}, ValueError, "k must be an int"),
    ({"k": True}, ValueError, "k must be an int"),
    ({"beta": -1.0}, ValueError, "beta must be > 0"),
    ({"beta": 0}, ValueError, "beta must be > 0"),
    ({"k": 1, "beta": -1.0}, ValueError, "beta must be > 0"),
    ({"beta": torch.tensor([1.0, -0.5])}, ValueError, r"beta\[1\] must be > 0"),
    ({"beta": [1.0, -2.0]}, ValueError, r"beta\[1\] must be > 0"),
    ({"beta": [1.0]}, ValueError, "beta needs k-1 = 2 values"),
    ({"beta": [1.0, 2.0, 3.0]}, ValueError, "beta needs k-1 = 2 values"),
    ({"beta": float("nan")}, ValueError, "beta must be a finite number"),
    ({"beta": "big"}, TypeError, r"beta\[0\] must be a real number"),
    ({"beta": object()}, TypeError, "beta must be a number or a sequence"),
    ({"sector": {"electrons": 2}}, ValueError, "unknown sector key 'electrons'"),
    ({"sector": {}}, ValueError, "sector is empty"),
    ({"sector": [("n_electrons", 2)]}, TypeError, "sector must be a dict"),
    ({"sector": {"n_electrons": 5}}, ValueError, r"sector\['n_electrons'\] = 5.0 is not an eigenvalue"),
    ({"sector": {"n_electrons": 1.5}}, ValueError, "is not an eigenvalue of n_electrons"),
    ({"sector": {"spin_squared": 1}}, ValueError, r"sector\['spin_squared'\] = 1.0 is not an eigenvalue"),
    ({"sector": {"spin_z": 0.3}}, ValueError, r"sector\['spin_z'\] = 0.3"),
    ({"sector": {"spin_z": "up"}}, TypeError, r"sector\['spin_z'\] must be a finite real number"),
    ({"sector": {"n_electrons": 2}, "sector_weight": -1.0}, ValueError, r"sector_weight\['n_electrons'\] must be > 0"),
    ({"sector": {"n_electrons": 2}, "sector_weight": {"spin_z": 1.0}}, ValueError, "sector_weight has key 'spin_z'"),
    ({"sector_weight": 1.0}, ValueError, "sector_weight is given without a sector"),
    ({"sector": {"n_electrons": 2}, "mapping": "parity"}, ValueError, "H does not commute with n_electrons"),
    ({"mapping": "bogus"}, ValueError, "unknown fermion-to-qubit mapping 'bogus'"),
    ({"restarts": 0}, ValueError, "restarts must be an int >= 1"),
    ({"perturbation": -0.1}, ValueError, "perturbation must be a finite number >= 0"),
    ({"seed": 1.5}, TypeError, "seed must be an int"),
    ({"init": torch.zeros(2, 3)}, ValueError, r"init must have shape \(k, P\)"),
    ({"init": [[0.0]]}, TypeError, "init must be a \\(k, P\\) tensor"),
    ({"tol": -1.0}, ValueError, "tol must be a finite number >= 0"),
    ({"steps": -1}, ValueError, "steps must be a non-negative int"),
    ({"diff_method": "magic"}, ValueError, "diff_method must be one of .* got 'magic'"),
    ({"state": torch.zeros(2, 16, dtype=torch.complex128)}, ValueError, "state must be one input state"),
    ({"state": torch.zeros(1, 8, dtype=torch.complex128)}, ValueError, "state has 3 qubits"),
])
def test_vqd_bad_inputs(setup, kwargs, exc, match):
    H, c = setup
    args = {"k": 3, "steps": 1, **kwargs}
    with pytest.raises(exc, match=match):
        V.vqd(H, c, **args)


def test_vqd_bad_circuit_hamiltonian_and_optimizer(setup):
    H, c = setup
    with pytest.raises(ValueError, match="H acts on 4 qubits but the circuit has 3 wires"):
        V.vqd(H, tql.templates.hardware_efficient(tql.Circuit(3), 1), 2)
    with pytest.raises(ValueError, match="H acts on 4 qubits but the circuit has 5 wires"):
        V.vqd(H, tql.templates.hardware_efficient(tql.Circuit(5), 1), 2)
    with pytest.raises(TypeError, match="circuit must be a tql.Circuit"):
        V.vqd(H, "ansatz", 2)
    with pytest.raises(ValueError, match="no trainable angles"):
        V.vqd(H, chem.hartree_fock(4, 2), 2)
    with pytest.raises(TypeError, match="H must be a tql Hamiltonian"):
        V.vqd(np.eye(16), c, 2)
    with pytest.raises(ValueError, match="H must be Hermitian"):
        V.vqd(Hamiltonian([(1j, "Z0 Z3")]), c, 2)
    with pytest.raises(TypeError, match="an instance would carry its state"):
        V.vqd(H, c, 2, optimizer=torch.optim.Adam([c.weights]))
    with pytest.raises(ValueError, match="Givens excitations"):
        V.vqd(ops.spin_squared(4) + Hamiltonian.from_string("X0"), upccgsd(0), 2)
