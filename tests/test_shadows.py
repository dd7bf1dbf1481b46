"""Classical shadows (tql.shadows) against NumPy.

Exact oracles: averaging a snapshot's estimate over all 3^n bases and their Born probabilities
(computed here from the eigenvectors of NumPy's Pauli matrices) must give back ρ and Tr(ρO)
exactly; the pair estimator of the purity must equal the mean of Tr(ρ̂_t ρ̂_t') over distinct
snapshots. Sampled estimates are allowed 5 standard deviations of the known variance bounds.
"""
import itertools
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import shadows

from . import oracle as O

PAULI = {"X": O.X, "Y": O.Y, "Z": O.Z}


def _eigenbasis(letter):
    """Columns: the +1 eigenvector (outcome bit 0) and the -1 one (bit 1)."""
    vals, vecs = np.linalg.eigh(PAULI[letter])
    return vecs[:, np.argsort(-vals)]


def _random_density(n, rng, rank=2):
    a = rng.normal(size=(2 ** n, rank)) + 1j * rng.normal(size=(2 ** n, rank))
    rho = a @ a.conj().T
    return rho / np.trace(rho)


def _born(rho, letters):
    """Outcome probabilities (bit strings in index order, wire 0 most significant) of measuring
    wire w in the eigenbasis of letters[w]."""
    basis = O.kron(*[_eigenbasis(c) for c in letters])
    return np.real(np.einsum("ib,ij,jb->b", basis.conj(), rho, basis))


def _all_snapshots(n):
    """Every (bases, bits) pair once: ((3^n 2^n, n) bases, bits)."""
    configs = list(itertools.product(range(3), repeat=n))
    outcomes = list(itertools.product(range(2), repeat=n))
    bases = torch.tensor([c for c in configs for _ in outcomes])
    bits = torch.tensor([b for _ in configs for b in outcomes])
    return bases, bits


def _born_weights(rho, n):
    return np.concatenate([_born(rho, ["XYZ"[i] for i in c]) for c in itertools.product(range(3), repeat=n)]) / 3 ** n


def test_snapshots_average_to_the_state_and_its_expectations_exactly():
    rng = np.random.default_rng(0)
    n = 2
    rho = _random_density(n, rng)
    bases, bits = _all_snapshots(n)
    w = _born_weights(rho, n)
    states = shadows.snapshot_states(bases, bits).numpy()
    np.testing.assert_allclose(np.einsum("t,tij->ij", w, states), rho, atol=1e-12)
    H = tql.Hamiltonian.from_string("0.7*X0 Y1 - 0.3*Z0 + 0.25*Y0 Y1 + 1.5 + 0.4*Z0 X1")
    dense = sum(c * O.kron(*[PAULI.get(p.letter(q), np.eye(2)) for q in range(n)]) for c, p in H.terms)
    sh = shadows.ClassicalShadow(bases[None], bits[None])
    values = sh.snapshot_values([H, "Y1"])[0].numpy()                       # (T, 2)
    np.testing.assert_allclose(w @ values, [np.trace(rho @ dense).real, np.trace(rho @ O.kron(np.eye(2), O.Y)).real],
                               atol=1e-12)


@pytest.mark.parametrize("density", [False, True])
def test_collect_draws_uniform_bases_and_born_outcomes(dtype, device, density):
    rng = np.random.default_rng(1)
    n, T = 2, 36000
    if density:
        rho = _random_density(n, rng)
        state = torch.tensor(rho, dtype=dtype, device=device)[None]
    else:
        psi = rng.normal(size=4) + 1j * rng.normal(size=4)
        psi /= np.linalg.norm(psi)
        rho = np.outer(psi, psi.conj())
        state = torch.tensor(psi, dtype=dtype, device=device)[None]
    sh = shadows.collect(state, T, generator=torch.Generator(device=device).manual_seed(2))
    bases, bits = sh.bases[0].cpu().numpy(), sh.bits[0].cpu().numpy()
    for config in itertools.product(range(3), repeat=n):
        rows = np.all(bases == config, axis=1)
        m = rows.sum()
        assert abs(m - T / 9) < 5 * math.sqrt(T / 9 * (1 - 1 / 9))
        p = _born(rho, ["XYZ"[i] for i in config])
        seen = np.bincount(bits[rows] @ np.array([2, 1]), minlength=4) / m
        assert np.all(np.abs(seen - p) < 5 * np.sqrt(p * (1 - p) / m) + 1e-9), (config, seen, p)


def test_expval_within_the_shadow_variance_for_every_state_of_a_batch(dtype, device):
    rng = np.random.default_rng(3)
    n, T = 4, 6000
    psi = rng.normal(size=(3, 16)) + 1j * rng.normal(size=(3, 16))
    psi /= np.linalg.norm(psi, axis=1, keepdims=True)
    H = tql.Hamiltonian.from_string("0.5*Z0 Z1 + 0.8*X2 - 0.4*Y1 X3 + 0.3*Z0 Y2 Z3 - 1.0")
    obs = [H, "X0", "Y3"]
    dense = [sum(c * O.kron(*[PAULI.get(p.letter(q), np.eye(2)) for q in range(n)]) for c, p in h.terms)
             for h in [H, tql.Hamiltonian.from_string("X0"), tql.Hamiltonian.from_string("Y3")]]
    exact = np.array([[np.vdot(v, d @ v).real for d in dense] for v in psi])
    sh = shadows.collect(torch.tensor(psi, dtype=dtype, device=device), T,
                         generator=torch.Generator(device=device).manual_seed(4))
    est = sh.expval(obs).cpu().numpy()
    # the variance of a weight-k string's estimate is at most 3^k; a sum's deviation at most Σ|c| 3^{k/2}
    bound = np.array([sum(abs(c) * 3 ** (p.weight / 2) for c, p in H.terms if p.weight), math.sqrt(3), math.sqrt(3)])
    assert np.all(np.abs(est - exact) < 5 * bound / math.sqrt(T))
    mom = sh.expval(H, n_groups=6).cpu().numpy()
    assert mom.shape == (3,) and np.all(np.abs(mom - exact[:, 0]) < 5 * bound[0] / math.sqrt(T / 6))


def test_reduced_states_and_purities():
    rng = np.random.default_rng(5)
    T = 8000
    psi = rng.normal(size=8) + 1j * rng.normal(size=8)
    psi /= np.linalg.norm(psi)
    sh = shadows.collect(torch.tensor(psi)[None], T, generator=torch.Generator().manual_seed(6))
    full = np.outer(psi, psi.conj()).reshape(2, 2, 2, 2, 2, 2)
    rho_20 = np.einsum("abcdbf->cafd", full).reshape(4, 4)       # wires (2, 0), in that order
    est = sh.density_matrix([2, 0])[0].numpy()
    assert abs(np.trace(est) - 1) < 1e-12 and np.allclose(est, est.conj().T, atol=1e-14)
    # each entry is a mean of T values bounded by 3^2 = 9 in modulus
    assert np.abs(est - rho_20).max() < 5 * 9 / math.sqrt(T)
    purity = float(sh.purity([0, 2])[0])
    exact = np.trace(rho_20 @ rho_20).real
    assert abs(purity - exact) < 0.05
    # the pair formula is the mean of Tr(ρ̂_t ρ̂_t') over distinct snapshots
    few = shadows.ClassicalShadow(sh.bases[:, :300], sh.bits[:, :300])
    snaps = shadows.snapshot_states(few.bases[0][:, [0, 2]], few.bits[0][:, [0, 2]]).numpy()
    gram = np.einsum("sij,tji->st", snaps, snaps).real
    pairs = (gram.sum() - np.trace(gram)) / (300 * 299)
    assert float(few.purity([0, 2])[0]) == pytest.approx(pairs, abs=1e-9)
    assert float(few.renyi2_entropy([0, 2])[0]) == pytest.approx(-math.log(pairs), abs=1e-9)
    assert float(few.renyi2_entropy([0, 2], base=2)[0]) == pytest.approx(-math.log2(pairs), abs=1e-9)


def test_snapshot_bound_follows_the_theorem():
    # Z0 Z1: shadow norm² 3² = 9; K = ⌈2 ln(2/0.01)⌉ = 11 groups of ⌈34 · 9 / 0.1²⌉ = 30600
    assert shadows.snapshot_bound(0.1, "Z0 Z1", 0.01) == (11 * 30600, 11)
    n_tot, k = shadows.snapshot_bound(0.2, [tql.Hamiltonian.from_string("0.5*X0 + 0.5*Y1 + 3"), "Z2"], 0.05)
    assert k == math.ceil(2 * math.log(80)) and n_tot == k * math.ceil(34 * 3 / 0.04)


def test_bad_input_is_named():
    psi = tql.zero_state(2, dtype=torch.complex128)
    with pytest.raises(ValueError, match="n_snapshots must be >= 1, got 0"):
        shadows.collect(psi, 0)
    with pytest.raises(TypeError, match="n_snapshots must be an int"):
        shadows.collect(psi, 10.0)
    with pytest.raises(TypeError, match="state must be a tensor"):
        shadows.collect(psi.numpy(), 10)
    with pytest.raises(ValueError, match="must be square"):
        shadows.collect(torch.zeros(1, 4, 2, dtype=torch.complex128), 10)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        shadows.collect(psi, 10, generator=3)
    sh = shadows.collect(psi, 20, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="n_groups=21 exceeds the 20 snapshots"):
        sh.expval("Z0", n_groups=21)
    with pytest.raises(ValueError, match="acts on wire 2"):
        sh.expval("Z2")
    with pytest.raises(ValueError, match="not Hermitian"):
        sh.expval(tql.Hamiltonian([(1j, "Z0")]))
    with pytest.raises(ValueError, match="wire"):
        sh.density_matrix([0, 0])
    with pytest.raises(ValueError, match="wire"):
        sh.purity([3])
    with pytest.raises(ValueError, match="base must be a positive number other than 1, got 1"):
        sh.renyi2_entropy([0], base=1)
    with pytest.raises(ValueError, match=r"bases values must lie in \[0, 3\), got 0..3"):
        shadows.ClassicalShadow(torch.tensor([[[0, 3]]]), torch.zeros(1, 1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="differ in shape"):
        shadows.ClassicalShadow(torch.zeros(1, 2, 2, dtype=torch.long), torch.zeros(1, 1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="error must be a number in"):
        shadows.snapshot_bound(0, "Z0")


@pytest.mark.parametrize("n", [5, 70])
def test_snapshot_values_follow_the_definition_also_beyond_62_wires(n):
    # 70 wires: recorded device data, too wide for the wire-mask path
    g = torch.Generator().manual_seed(7)
    bases, bits = torch.randint(0, 3, (2, 50, n), generator=g), torch.randint(0, 2, (2, 50, n), generator=g)
    strings = [{0: "X"}, {1: "Y", n - 1: "Z"}, {2: "Z", 3: "X", n - 2: "Y"}, {}]
    H = [tql.Hamiltonian([(1.0, tql.PauliString(s))]) if s else tql.Hamiltonian([(1.0, "I")]) for s in strings]
    got = shadows.ClassicalShadow(bases, bits).snapshot_values(H).numpy()
    for b in range(2):
        for t in range(50):
            for j, s in enumerate(strings):
                want = 1.0
                for w, letter in s.items():
                    want *= 3 * (1 - 2 * int(bits[b, t, w])) if "XYZ"[int(bases[b, t, w])] == letter else 0.0
                assert got[b, t, j] == want


def test_purity_of_too_many_wires_is_refused():
    sh = shadows.ClassicalShadow(torch.zeros(1, 4, 9, dtype=torch.long), torch.zeros(1, 4, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="9 wires are too many"):
        sh.purity(list(range(9)))


@pytest.mark.parametrize("density", [False, True])
def test_chunks_of_rows_draw_the_same_snapshots(monkeypatch, density):
    """Rows are rotated and sampled a cache-sized chunk at a time, the first wires' rotations
    shared when they fit: the snapshots must not depend on either (the unchunked run is the one
    checked against NumPy above)."""
    rng = np.random.default_rng(8)
    psi = rng.normal(size=(3, 32)) + 1j * rng.normal(size=(3, 32))
    psi /= np.linalg.norm(psi, axis=1, keepdims=True)
    state = torch.tensor(psi)
    if density:
        state = torch.einsum("bi,bj->bij", state, state.conj())
    whole = shadows.collect(state, 200, generator=torch.Generator().manual_seed(3))
    monkeypatch.setattr(shadows, "_CHUNK_AMPLITUDES", 7 * state[0].numel())     # 7 rows, nothing shared
    chunked = shadows.collect(state, 200, generator=torch.Generator().manual_seed(3))
    assert torch.equal(whole.bases, chunked.bases) and torch.equal(whole.bits, chunked.bits)
