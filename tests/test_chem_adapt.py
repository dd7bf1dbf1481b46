"""ADAPT-VQE (tql.chem.adapt_vqe): pool gradients against finite differences of dense NumPy
energies, pools against brute-force enumeration, energies against PySCF's FCI (bundled)."""
import itertools

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.chem.adapt import PoolOperator, adapt_vqe, operator_pool, pool_gradients

from . import oracle

CHEM_ACC = 1.6e-3


def _dense_h(H, n):
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        out += complex(c) * oracle.pauli_matrix(p.label(n))
    return out


def _dense_unitary(op, theta, n):
    if op.kind == "gate":
        return oracle.full_operator(oracle.gate_matrix(op.name, theta), op.wires, n)
    label = ["I"] * n
    for word in op.pauli.split():
        label[int(word[1:])] = word[0]
    return oracle.pauli_rotation(theta, "".join(label))


def _random_hamiltonian(n, rng, n_terms=12):
    terms = []
    for _ in range(n_terms):
        label = "".join(rng.choice(list("IXYZ"), size=n))
        words = [f"{a}{w}" for w, a in enumerate(label) if a != "I"]
        terms.append((float(rng.normal()), tql.PauliString(" ".join(words), n_wires=n)))
    return tql.Hamiltonian(terms, n_wires=n), terms


def _dense_from_terms(terms, n):
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in terms:
        out += c * oracle.pauli_matrix(p.label(n))
    return out


def _number_and_sz(n):
    """Dense N and S_z from the occupation bits (qubit j = spin orbital j, even = α)."""
    occ = np.array([[(i >> (n - 1 - j)) & 1 for j in range(n)] for i in range(2 ** n)])
    number = occ.sum(axis=1)
    sz = 0.5 * (occ[:, 0::2].sum(axis=1) - occ[:, 1::2].sum(axis=1))
    return np.diag(number).astype(np.complex128), np.diag(sz).astype(np.complex128)


POOL_CASES = [("singles_doubles", 6, 2), ("generalized", 4, 2), ("qubit", 4, 2)]


@pytest.mark.parametrize("pool,n,ne", POOL_CASES)
def test_pool_gradients_match_finite_differences_of_dense_energies(pool, n, ne, dtype, device):
    rng = np.random.default_rng(7)
    H, terms = _random_hamiltonian(n, rng)
    Hd = _dense_from_terms(terms, n)
    psi = rng.normal(size=2 ** n) + 1j * rng.normal(size=2 ** n)
    psi /= np.linalg.norm(psi)
    ops = operator_pool(pool, n, ne)
    c = tql.Circuit(n, dtype=dtype).to(device)         # no gates: ψ is the given state
    got = pool_gradients(c, H, ops, state=torch.tensor(psi[None], dtype=dtype, device=device))
    assert got.shape == (len(ops),) and got.dtype == (torch.float32 if dtype == torch.complex64 else torch.float64)
    h = 1e-5
    want = []
    for op in ops:
        ep, em = (np.vdot(u @ psi, Hd @ (u @ psi)).real
                  for u in (_dense_unitary(op, t, n) for t in (h, -h)))
        want.append((ep - em) / (2 * h))
    tol = 1e-4 if dtype == torch.complex64 else 1e-8
    np.testing.assert_allclose(got.cpu().double().numpy(), want, atol=tol * max(1.0, np.abs(want).max()))
    assert np.abs(want).max() > 0.1                    # a state where the gradients are not trivially 0


def _brute_force_excitations(n, occupied):
    sz = lambda q: 0.5 if q % 2 == 0 else -0.5        # noqa: E731
    virt = [q for q in range(n) if q not in occupied]
    singles = [(r, p) for r in occupied for p in virt if sz(r) == sz(p)]
    doubles = [(a, b, c, d) for a, b in itertools.combinations(occupied, 2)
               for c, d in itertools.combinations(virt, 2) if sz(a) + sz(b) == sz(c) + sz(d)]
    return singles, doubles


def test_pools_hold_every_spin_conserving_excitation_once():
    n, ne = 8, 4
    singles, doubles = _brute_force_excitations(n, list(range(ne)))
    sd = operator_pool("singles_doubles", n, ne)
    assert {(op.name, op.wires) for op in sd} == (
        {("SINGLEEXCITATION", s) for s in singles} | {("DOUBLEEXCITATION", d) for d in doubles})
    assert len(sd) == len(singles) + len(doubles)
    qubit = operator_pool("qubit", n, ne)
    assert len(qubit) == 2 * len(singles) + 8 * len(doubles) == len({op.pauli for op in qubit})
    for op in qubit:
        assert op.kind == "pauli" and op.pauli.count("Y") % 2 == 1 and "Z" not in op.pauli
    # generalized: every spin-conserving pair p < q, and every double {p, q} -> {r, s} of disjoint pairs
    gen = operator_pool("generalized", n, ne)
    orbitals = range(n)
    sz = lambda q: 0.5 if q % 2 == 0 else -0.5        # noqa: E731
    g_singles = [(p, q) for p, q in itertools.combinations(orbitals, 2) if sz(p) == sz(q)]
    g_doubles = {frozenset([frozenset(a), frozenset(b)])
                 for a, b in itertools.combinations(itertools.combinations(orbitals, 2), 2)
                 if not set(a) & set(b) and sz(a[0]) + sz(a[1]) == sz(b[0]) + sz(b[1])}
    got_doubles = {frozenset([frozenset(op.wires[:2]), frozenset(op.wires[2:])]) for op in gen
                   if op.name == "DOUBLEEXCITATION"}
    assert got_doubles == g_doubles and len(got_doubles) == len(gen) - len(g_singles)
    assert {op.wires for op in gen if op.name == "SINGLEEXCITATION"} == set(g_singles)


@pytest.mark.parametrize("pool", ["singles_doubles", "generalized"])
def test_excitation_pools_conserve_number_and_spin(pool):
    n = 6
    N, SZ = _number_and_sz(n)
    for op in operator_pool(pool, n, 2):
        u = _dense_unitary(op, 0.7, n)
        assert np.allclose(u @ N, N @ u) and np.allclose(u @ SZ, SZ @ u), op.label


@pytest.mark.parametrize("pool", ["singles_doubles", "generalized", "qubit"])
def test_h2_reaches_fci_with_the_double_excitation_first(pool, dtype, device):
    H, info = chem.load("H2")
    r = adapt_vqe(H, info.n_electrons, pool=pool, dtype=dtype, device=device)
    assert r.converged and r.reason == "grad_tol" and r.n_iterations == 1
    assert set(r.operators[0].wires) == {0, 1, 2, 3}
    tol = 1e-5 if dtype == torch.complex64 else 1e-8
    assert abs(r.energy - info.fci_energy) < tol
    assert r.gradient_norms[-1] < 1e-3 <= r.gradient_norms[0]
    assert r.energies[0] == pytest.approx(-1.1167, abs=1e-3)     # the HF energy at 0.74 Å (STO-3G)


@pytest.mark.parametrize("molecule,pool", [("LiH_active", "singles_doubles"), ("LiH_active", "qubit"),
                                           ("H2O_active", "singles_doubles"), ("H2O_active", "generalized")])
def test_active_space_molecules_reach_chemical_accuracy_with_fewer_operators_than_the_pool(molecule, pool, dtype):
    H, info = chem.load(molecule)
    r = adapt_vqe(H, info.n_electrons, pool=pool, dtype=dtype)
    assert r.converged and abs(r.energy - info.fci_energy) < CHEM_ACC
    assert r.n_iterations < len(operator_pool(pool, info.n_qubits, info.n_electrons))
    assert len(r.energies) == r.n_iterations + 1 == len(r.gradient_norms)
    # complex64 energies carry float32 rounding RELATIVE to |E| (H2O: 75 Ha, 1e-4 Ha on AMD EPYC)
    slack = 2e-6 * abs(info.fci_energy) if dtype == torch.complex64 else 1e-9
    assert all(b <= a + slack for a, b in zip(r.energies, r.energies[1:]))   # a new angle starts at 0
    assert r.circuit.num_parameters == r.n_iterations
    # the returned circuit and angles give the reported energy (dense NumPy ⟨ψ|H|ψ⟩), and the state
    # is variational: evaluated in complex128 on the normalised state, never below FCI
    psi = r.circuit().detach().cpu().numpy().astype(np.complex128)[0]
    psi /= np.linalg.norm(psi)
    dense_energy = np.vdot(psi, _dense_h(H, info.n_qubits) @ psi).real
    assert dense_energy == pytest.approx(r.energy, abs=10 * slack)
    assert dense_energy > info.fci_energy - 1e-9


def test_stopping_rules():
    H, info = chem.load("LiH_active")
    r = adapt_vqe(H, info.n_electrons, max_iterations=1)
    assert r.n_iterations == 1 and not r.converged and r.reason == "max_iterations"
    r = adapt_vqe(H, info.n_electrons, max_iterations=0)
    assert r.n_iterations == 0 and r.energy == pytest.approx(r.energies[0])
    r = adapt_vqe(H, info.n_electrons, energy_tol=1.0)                # any gain is below 1 Ha
    assert r.n_iterations == 1 and r.converged and r.reason == "energy_tol"
    r = adapt_vqe(H, info.n_electrons, target=info.fci_energy, atol=5e-3)
    assert r.reason == "target" and abs(r.energy - info.fci_energy) <= 5e-3
    seen = []
    r = adapt_vqe(H, info.n_electrons, callback=lambda k, res: seen.append((k, res.n_iterations, res.energy)))
    assert [s[0] for s in seen] == list(range(1, r.n_iterations + 1)) == [s[1] for s in seen]
    assert seen[-1][2] == pytest.approx(r.energy)


def test_a_user_pool_of_gates_and_pauli_rotations():
    H, info = chem.load("H2")
    pool = [PoolOperator.gate("SINGLEEXCITATION", (0, 2)), PoolOperator.pauli_rotation("X0 X1 X2 Y3")]
    r = adapt_vqe(H, 2, pool=pool)
    assert r.labels == ["exp(-iθ/2 X0 X1 X2 Y3)"] and abs(r.energy - info.fci_energy) < 1e-8


def test_bad_input_is_refused_with_a_clear_error():
    H, info = chem.load("H2")
    with pytest.raises(ValueError, match="pool must be one of"):
        adapt_vqe(H, 2, pool="triples")
    with pytest.raises(TypeError, match="pool entries must be PoolOperator"):
        adapt_vqe(H, 2, pool=[("SINGLEEXCITATION", (0, 2))])
    with pytest.raises(ValueError, match="acts on wire 5 but the Hamiltonian has 4 qubits"):
        adapt_vqe(H, 2, pool=[PoolOperator.gate("SINGLEEXCITATION", (0, 5))])
    with pytest.raises(ValueError, match="pool is empty"):
        adapt_vqe(H, 0)
    with pytest.raises(ValueError, match="grad_tol must be a finite number >= 0"):
        adapt_vqe(H, 2, grad_tol=-1)
    with pytest.raises(ValueError, match="energy_tol must be a finite number"):
        adapt_vqe(H, 2, energy_tol=float("nan"))
    with pytest.raises(TypeError, match="max_iterations must be an int"):
        adapt_vqe(H, 2, max_iterations="3")
    with pytest.raises(ValueError, match="steps must be >= 1"):
        adapt_vqe(H, 2, steps=0)
    with pytest.raises(ValueError, match="5 electrons do not fit in 4 qubits"):
        adapt_vqe(H, 5)
    with pytest.raises(TypeError, match="H must be a tql Hamiltonian"):
        adapt_vqe(np.eye(16), 2)
    with pytest.raises(ValueError, match="dtype must be"):
        adapt_vqe(H, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="DOUBLEEXCITATION acts on 4 distinct wires"):
        PoolOperator.gate("DOUBLEEXCITATION", (0, 1, 1, 2))
    with pytest.raises(ValueError, match="CNOT must be a gate of one angle"):
        PoolOperator.gate("CNOT", (0, 1))
    with pytest.raises(ValueError, match="identity string"):
        PoolOperator.pauli_rotation("")
    with pytest.raises(ValueError, match="spin orbitals come in pairs"):
        operator_pool("generalized", 5, 2)
    # Givens excitations with a parity-mapped Hamiltonian: they would leave the molecule's sector
    hop = chem.FermionOperator("0^ 2") + chem.FermionOperator("2^ 0")
    with pytest.raises(ValueError, match="parity or Bravyi–Kitaev"):
        adapt_vqe(chem.fermion_to_qubit(hop, "parity", n_modes=4), 2)


@pytest.mark.parametrize("molecule,n_tapered", [("H2", 1), ("LiH_active", 3), ("H2O_active", 4)])
def test_tapered_qubit_adapt_reaches_fci_on_fewer_qubits(molecule, n_tapered, dtype):
    H, info = chem.load(molecule)
    grad_tol = 1e-3 if dtype == torch.complex128 else 5e-3        # float32 gradients are noisier
    r = adapt_vqe(H, info.n_electrons, pool="qubit", taper=True, dtype=dtype, grad_tol=grad_tol)
    assert r.circuit.n_wires == n_tapered == r.tapering.n_tapered_qubits
    assert r.converged and abs(r.energy - info.fci_energy) < CHEM_ACC           # PySCF's FCI of the full H
    assert r.energy > info.fci_energy - (1e-5 if dtype == torch.complex64 else 1e-9)
    # the reported energy is that of the tapered Hamiltonian in the returned state (dense NumPy)
    psi = r.circuit().detach().cpu().numpy().astype(np.complex128)[0]
    Ht = r.tapering.apply(H)
    assert np.vdot(psi, _dense_h(Ht, n_tapered) @ psi).real == pytest.approx(
        r.energy, abs=1e-4 if dtype == torch.complex64 else 1e-9)


def test_tapering_needs_a_pauli_rotation_pool():
    H, info = chem.load("H2")
    with pytest.raises(ValueError, match="taper=True needs a pool of Pauli rotations"):
        adapt_vqe(H, 2, taper=True)
    with pytest.raises(TypeError, match="taper must be True or False"):
        adapt_vqe(H, 2, pool="qubit", taper=1)
