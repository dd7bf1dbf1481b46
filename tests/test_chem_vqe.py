"""Chemistry ansätze and the VQE / SSVQE drivers.

Oracles: PennyLane's excitation rules written out as loops, dense NumPy simulation of the gate
sequence (tests/oracle.py), exact diagonalisation (numpy eigh) and the bundled FCI energies.
"""
import itertools
import math
import os

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.observables import Hamiltonian

from . import oracle as O

CHEM_ACC = 1.6e-3


def popcounts(n):
    idx = np.arange(2 ** n)
    bits = (idx[:, None] >> (n - 1 - np.arange(n))[None, :]) & 1
    return bits


# ------------------------------------------------------------------------------------------------
# excitations
def pennylane_excitations(electrons, orbitals, delta_sz=0):
    """The loops of PennyLane's qml.qchem.excitations, written out."""
    sz = np.array([0.5 if (i % 2 == 0) else -0.5 for i in range(orbitals)])
    singles = [[r, p] for r in range(electrons) for p in range(electrons, orbitals)
               if sz[p] - sz[r] == delta_sz]
    doubles = [[s, r, q, p] for s in range(electrons - 1) for r in range(s + 1, electrons)
               for q in range(electrons, orbitals - 1) for p in range(q + 1, orbitals)
               if (sz[p] + sz[q] - sz[r] - sz[s]) == delta_sz]
    return singles, doubles


@pytest.mark.parametrize("electrons,orbitals", [(2, 4), (4, 12), (6, 14), (2, 6), (3, 8), (10, 14)])
@pytest.mark.parametrize("delta_sz", [0, 1, -1])
def test_excitations_match_pennylane_rules(electrons, orbitals, delta_sz):
    assert chem.excitations(electrons, orbitals, delta_sz) == pennylane_excitations(electrons, orbitals, delta_sz)


def test_excitation_counts():
    s, d = chem.excitations(4, 12)
    assert (len(s), len(d)) == (16, 76)                   # LiH, 12 qubits
    s, d = chem.excitations(2, 4)
    assert s == [[0, 2], [1, 3]] and d == [[0, 1, 2, 3]]   # H2
    s, d = chem.excitations(6, 14)
    assert (len(s), len(d)) == (24, 180)                  # BeH2
    assert chem.excitations(4, 4) == ([], [])
    with pytest.raises(ValueError, match="do not fit"):
        chem.excitations(5, 4)


# ------------------------------------------------------------------------------------------------
# circuits
def test_uccsd_structure_and_hf_start(dtype, device):
    c = chem.uccsd(12, 4, dtype=dtype).to(device)
    assert c.num_parameters == 92
    assert c.count_ops() == {"X": 4, "DOUBLEEXCITATION": 76, "SINGLEEXCITATION": 16}
    assert torch.all(c.weights == 0)
    state = c().detach()
    hf = int("111100000000", 2)
    assert state.shape == (1, 4096) and abs(complex(state[0, hf]) - 1) < 1e-6
    assert float(state.abs().sum()) == pytest.approx(1, abs=1e-5)


def test_uccsd_matches_dense_oracle(dtype, device, atol):
    rng = np.random.default_rng(0)
    c = chem.uccsd(6, 2, dtype=dtype).to(device)
    theta = rng.uniform(-math.pi, math.pi, c.num_parameters)
    with torch.no_grad():
        c.weights.copy_(torch.as_tensor(theta))
    singles, doubles = chem.excitations(2, 6)
    ops = [("X", 0, ()), ("X", 1, ())]
    k = 0
    for d in doubles:
        ops.append(("DOUBLEEXCITATION", d, (theta[k],)))
        k += 1
    for s in singles:
        ops.append(("SINGLEEXCITATION", s, (theta[k],)))
        k += 1
    zero = np.zeros((1, 64), dtype=np.complex128)
    zero[0, 0] = 1
    ref = O.run_ops(ops, 6, zero)
    np.testing.assert_allclose(c().detach().cpu().numpy(), ref, atol=10 * atol)


@pytest.mark.parametrize("builder", ["uccsd", "k_upccgsd"])
def test_particle_number_and_sz_conserved(builder, dtype, device):
    torch.manual_seed(1)
    n, ne = 8, 3
    c = chem.uccsd(n, ne, dtype=dtype) if builder == "uccsd" else chem.k_upccgsd(n, ne, k=2, dtype=dtype)
    c = c.to(device)
    with torch.no_grad():
        c.weights.uniform_(-3, 3)
    p = (c().detach().abs() ** 2)[0].cpu().numpy()
    bits = popcounts(n)
    number = bits.sum(1)
    sz = bits[:, 0::2].sum(1) - bits[:, 1::2].sum(1)
    assert p.sum() == pytest.approx(1, abs=1e-5)
    assert p[(number != ne) | (sz != 1)].sum() < 1e-6     # HF: α0 β0 α1 → S_z = +½ (2 α, 1 β)


def test_k_upccgsd_parameter_count():
    s, d = chem.generalized_excitations(8)
    assert len(d) == 6 and len(s) == 12 and d[0] == [0, 1, 2, 3] and [1, 7] in s
    c = chem.k_upccgsd(8, 4, k=3)
    assert c.num_parameters == 3 * 18 and c.count_ops()["X"] == 4
    with pytest.raises(ValueError, match="pairs"):
        chem.generalized_excitations(7)


def test_hardware_efficient_starts_at_hf(dtype, device):
    for n_layers, pattern in [(1, "linear"), (3, "linear"), (2, "ring")]:
        c = chem.hardware_efficient(6, n_layers, n_electrons=2, pattern=pattern, dtype=dtype).to(device)
        with torch.no_grad():
            c.weights.zero_()
        s = c().detach()[0]
        assert abs(abs(complex(s[0b110000])) - 1) < 1e-6, (n_layers, pattern)
    torch.manual_seed(0)
    c = chem.hardware_efficient(4, 2, n_electrons=2, dtype=dtype).to(device)          # init "small"
    assert float(c().detach()[0, 0b1100].abs()) > 0.99
    assert c.count_ops()["RY"] == 12 and c.count_ops()["CNOT"] == 6


def test_hartree_fock_and_errors():
    assert chem.hf_state(2, 6) == (1, 1, 0, 0, 0, 0)
    c = chem.hartree_fock(4, state="1010")
    assert c.count_ops() == {"X": 2}
    with pytest.raises(ValueError, match="not both"):
        chem.hartree_fock(4, 2, state="1100")
    with pytest.raises(ValueError, match="do not fit"):
        chem.uccsd(4, 5)
    with pytest.raises(ValueError, match="distinct wires"):
        chem.uccsd(4, 2, singles=[[0, 0]], doubles=[])
    with pytest.raises(ValueError, match="holds 1 electrons"):
        chem.uccsd(4, 2, reference="1000")
    with pytest.raises(TypeError):
        chem.uccsd(4.0, 2)
    c = tql.Circuit(4)
    assert chem.uccsd(c, 2) is c and c.num_parameters == 3


def test_diff_methods_agree_on_givens_circuit():
    H, info = chem.load("LiH_active")
    c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=torch.complex128)
    with torch.no_grad():
        c.weights.copy_(torch.linspace(-0.4, 0.5, c.num_parameters, dtype=torch.float64))
    grads, values = [], []
    for method in ("backprop", "adjoint", "parameter-shift"):
        c.weights.grad = None
        e = chem.energy(c, H, diff_method=method)
        e.backward()
        values.append(float(e.detach()))
        grads.append(c.weights.grad.clone())
    assert max(values) - min(values) < 1e-12
    for g in grads[1:]:
        torch.testing.assert_close(g, grads[0], atol=1e-10, rtol=0)


# ------------------------------------------------------------------------------------------------
# VQE (acceptance: H2 within chemical accuracy in <= 100 steps)
def test_vqe_h2_uccsd(dtype, device):
    H, info = chem.load("H2")
    c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=dtype).to(device)
    r = chem.vqe(H, c, steps=100, optimizer="adam")
    assert r.n_steps == 100 and len(r.history) == 101
    assert abs(r.energy - info.fci_energy) < CHEM_ACC
    assert abs(r.energy - (-1.13728)) < CHEM_ACC
    first = next(k for k, e in enumerate(r.history) if abs(e - info.fci_energy) < CHEM_ACC)
    assert first <= 100
    assert r.history[0] == pytest.approx(info.hf_energy, abs=1e-5)


def test_vqe_h2_hardware_efficient(dtype, device):
    H, info = chem.load("H2")
    torch.manual_seed(0)
    c = chem.hardware_efficient(info.n_qubits, 2, n_electrons=info.n_electrons, dtype=dtype).to(device)
    r = chem.vqe(H, c, steps=100, optimizer="adam")
    assert abs(r.energy - info.fci_energy) < CHEM_ACC


@pytest.mark.parametrize("optimizer", ["lbfgs", "sgd", torch.optim.Adam, "qng", "spsa"])
def test_vqe_stops_at_target(optimizer):
    H, info = chem.load("H2")
    c = chem.uccsd(4, 2, dtype=torch.complex128)
    seen = []
    r = chem.vqe(H, c, steps=100, optimizer=optimizer, lr=0.1 if optimizer is torch.optim.Adam else None,
                 target=info.fci_energy, callback=lambda k, e, _: seen.append(k))
    assert r.converged and abs(r.energy - info.fci_energy) <= CHEM_ACC
    assert r.n_steps < 100 and seen == list(range(r.n_steps + 1))
    assert float(chem.energy(c, H).detach()) == pytest.approx(r.energy, abs=1e-12)


@pytest.mark.parametrize("optimizer, diff_method", [("spsa", "backprop"), ("adam", "parameter-shift")])
def test_vqe_from_shot_estimates(optimizer, diff_method):
    H, info = chem.load("H2")
    c = chem.uccsd(4, 2, dtype=torch.complex128)
    r = chem.vqe(H, c, steps=60, optimizer=optimizer, diff_method=diff_method, shots=20000,
                 generator=torch.Generator().manual_seed(0))
    exact = float(chem.energy(c, H).detach())
    assert abs(exact - info.fci_energy) < CHEM_ACC                 # the angles found from estimates
    assert exact >= info.fci_energy - 1e-9
    assert r.history[-1] != pytest.approx(exact, abs=1e-9)          # the history holds estimates
    with pytest.raises(ValueError, match="with shots the energy estimate has no 'backprop' gradient"):
        chem.vqe(H, c, shots=100)


def test_vqe_errors():
    H, _ = chem.load("H2")
    with pytest.raises(ValueError, match="no trainable"):
        chem.vqe(H, tql.Circuit(4))
    with pytest.raises(TypeError):
        chem.vqe(H, "circuit")
    with pytest.raises(ValueError, match="optimizer"):
        chem.vqe(H, chem.uccsd(4, 2), optimizer="newton")
    with pytest.raises(ValueError, match="steps"):
        chem.vqe(H, chem.uccsd(4, 2), steps=-1)
    with pytest.raises(ValueError, match="'qng' needs the tql.Circuit"):
        tql.optim.make_optimizer("qng", chem.uccsd(4, 2).parameters())


def test_vqe_refuses_a_batch_of_input_states():
    """A (2, 16) state used to fail in backward() ("grad can be implicitly created only for scalar outputs")."""
    H, info = chem.load("H2")
    batch = torch.zeros(2, 16, dtype=torch.complex128)
    batch[0, 0b1100] = batch[1, 0b0011] = 1
    with pytest.raises(ValueError, match=r"one input state.*\(2, 16\).*ssvqe"):
        chem.vqe(H, chem.uccsd(4, 2, hf=False, dtype=torch.complex128), steps=1, state=batch)
    r = chem.vqe(H, chem.uccsd(4, 2, hf=False, dtype=torch.complex128), steps=0, state=batch[1])
    assert r.energy == pytest.approx(float(np.real(H.to_dense().numpy()[3, 3])), abs=1e-12)   # <0011|H|0011>


def test_excitation_wires_must_be_ints_and_hartree_fock_needs_an_argument():
    with pytest.raises(ValueError, match="int wires"):
        chem.uccsd(4, 2, singles=[[0.5, 2]], doubles=[])              # was truncated to wire 0
    with pytest.raises(ValueError, match="neither"):
        chem.hartree_fock(4)


def test_vqe_lih_12_qubits_uccsd():
    H, info = chem.load("LiH")
    c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=torch.complex128)
    r = chem.vqe(H, c, steps=30, optimizer="lbfgs", target=info.fci_energy)
    assert r.converged and abs(r.energy - info.fci_energy) < CHEM_ACC


# ------------------------------------------------------------------------------------------------
# SSVQE (acceptance: every level of a random 2-qubit Hamiltonian within 1e-3)
def random_two_qubit_hamiltonian(seed):
    rng = np.random.default_rng(seed)
    terms = []
    for a, b in itertools.product("IXYZ", repeat=2):
        label = " ".join(f"{p}{w}" for p, w in ((a, 0), (b, 1)) if p != "I")
        terms.append((float(rng.normal()), label))
    H = Hamiltonian(terms, n_wires=2)
    dense = sum(c * O.kron(O.PAULI[a], O.PAULI[b])
                for c, (a, b) in zip([t[0] for t in terms], itertools.product("IXYZ", repeat=2)))
    return H, np.linalg.eigvalsh(dense)


@pytest.mark.parametrize("seed", [0, 1])
def test_ssvqe_all_levels_of_random_two_qubit_hamiltonian(seed, dtype, device):
    H, exact = random_two_qubit_hamiltonian(seed)
    torch.manual_seed(seed)
    c = tql.templates.strongly_entangling(tql.Circuit(2, dtype=dtype), n_layers=3).to(device)
    r = chem.ssvqe(H, c, k=4, steps=200, tol=1e-9)
    got = r.energies.detach().cpu().numpy()
    assert np.all(np.abs(got - exact) < 1e-3), (got, exact)
    assert r.n_steps <= 200 and r.history[-1] <= r.history[0]


def test_ssvqe_inputs_and_errors():
    H, exact = random_two_qubit_hamiltonian(3)
    torch.manual_seed(3)
    c = tql.templates.strongly_entangling(tql.Circuit(2, dtype=torch.float64), n_layers=3)
    r = chem.ssvqe(H, c, k=2, states=["11", "01"], weights=[1.0, 0.5], tol=1e-10)
    np.testing.assert_allclose(np.sort(r.energies.numpy()), exact[:2], atol=1e-3)
    with pytest.raises(ValueError, match="decrease"):
        chem.ssvqe(H, c, k=2, weights=[0.5, 1.0])
    with pytest.raises(ValueError, match="distinct"):
        chem.ssvqe(H, c, k=2, states=[1, 1])
    with pytest.raises(ValueError, match="k must be"):
        chem.ssvqe(H, c, k=5)


def test_ssvqe_input_tensor_must_be_orthonormal():
    """Unnormalised rows gave "energies" far below the spectrum (here < -7 Ha for H2, ground -1.137)."""
    H, info = chem.load("H2")
    c = chem.uccsd(4, 2, hf=False, dtype=torch.complex128)
    with pytest.raises(ValueError, match="orthonormal"):
        chem.ssvqe(H, c, k=2, states=torch.ones(2, 16, dtype=torch.complex128), steps=0)
    overlapping = torch.zeros(2, 16, dtype=torch.complex128)       # unit rows with overlap 1/sqrt(2)
    overlapping[0, 3], overlapping[0, 12] = 2 ** -0.5, -1j * 2 ** -0.5
    overlapping[1, 3] = 1
    with pytest.raises(ValueError, match="orthonormal"):
        chem.ssvqe(H, c, k=2, states=overlapping, steps=0)
    # an orthonormal, non-basis pair is accepted; at zero angles the circuit is the identity
    good = torch.zeros(2, 16, dtype=torch.complex128)
    good[0, 3], good[0, 12], good[1, 3], good[1, 12] = 0.6, 0.8j, 0.8, -0.6j
    r = chem.ssvqe(H, c, k=2, states=good, steps=0)
    dense = H.to_dense().numpy()
    ref = [float(np.real(v.conj() @ dense @ v)) for v in good.numpy()]
    np.testing.assert_allclose(r.energies.numpy(), ref, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# examples run with their defaults' data (bundled, no PySCF)
def _example(name):
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_vqe_h2(capsys):
    errors = _example("vqe_h2").main(["--every", "50", "--no-plots"])   # figures: test_examples
    assert all(abs(e) < CHEM_ACC for e in errors.values())
    assert "within chemical accuracy: yes" in capsys.readouterr().out


def test_example_h2_dissociation(capsys):
    rows = _example("h2_dissociation").main(["--points", "3", "--no-plots"])
    assert [round(r[0], 2) for r in rows] == [0.5, 1.5, 2.5]
    assert all(abs(r[4]) < CHEM_ACC for r in rows) and all(r[2] < r[1] for r in rows)
    assert "VQE-FCI" in capsys.readouterr().out


def test_example_vqe_lih_active(capsys):
    r, info = _example("vqe_lih").main(["--active"])
    assert r.converged and abs(r.energy - info.fci_energy) < CHEM_ACC
    assert "chemical accuracy reached" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# k-UpCCGSD from an open-shell reference; Givens ansätze need a Jordan-Wigner Hamiltonian
def dense_pauli_sum(H, n):
    """NumPy Kronecker-product matrix of a Pauli sum (qubit 0 = most significant bit)."""
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        out += complex(c) * O.kron(*[O.PAULI[p.letter(w) if w in p.wires else "I"] for w in range(n)])
    return out


H4_TRIPLET = "H 0 0 0; H 0 0 1.0; H 0 0 2.0; H 0 0 3.0"


@pytest.fixture(scope="module")
def h4_triplet():
    pytest.importorskip("pyscf")
    from pyscf import gto, scf
    H, info = chem.molecular_hamiltonian(chem.Molecule(H4_TRIPLET, multiplicity=3))
    mf = scf.ROHF(gto.M(atom=H4_TRIPLET, basis="sto-3g", spin=2, verbose=0)).run(conv_tol=1e-11)
    return H, info, float(mf.e_tot), dense_pauli_sum(H, info.n_qubits)


def test_k_upccgsd_open_shell_reference_against_pyscf_rohf(h4_triplet, dtype):
    """Triplet H4 (3 α, 1 β): the ROHF determinant α0 β0 α1 α2 = 11101000 is not the first four
    qubits. At zero angles the circuit must prepare it (energy = PySCF's ROHF energy = the dense
    diagonal element); trained, it reaches the dense ground energy of the (3, 1) sector."""
    H, info, e_rohf, D = h4_triplet
    n = info.n_qubits
    assert info.hf_state == (1, 1, 1, 0, 1, 0, 0, 0)
    ref = int("11101000", 2)
    assert D[ref, ref].real == pytest.approx(e_rohf, abs=1e-8)                 # dense oracle vs PySCF
    tol = 1e-4 if dtype == torch.complex64 else 1e-8
    c = chem.k_upccgsd(n, 4, k=2, reference=info.hf_state, dtype=dtype)
    assert c.count_ops()["X"] == 4
    assert float(chem.energy(c, H).detach()) == pytest.approx(e_rohf, abs=tol)
    default = chem.k_upccgsd(n, 4, k=2, dtype=dtype)                          # closed-shell 11110000
    assert float(chem.energy(default, H).detach()) == pytest.approx(D[0b11110000, 0b11110000].real, abs=tol)
    assert abs(D[0b11110000, 0b11110000].real - e_rohf) > 0.1
    # the sector's exact ground energy (dense, eigh) is what the trained circuit reaches
    bits = popcounts(n)
    sector = (bits[:, 0::2].sum(1) == 3) & (bits[:, 1::2].sum(1) == 1)
    e0 = np.linalg.eigvalsh(D[np.ix_(sector, sector)])[0]
    assert e0 == pytest.approx(info.fci_energy, abs=1e-8)
    if dtype == torch.complex128:
        torch.manual_seed(0)
        c = chem.k_upccgsd(n, 4, k=2, reference=info.hf_state, init="small", dtype=dtype)
        r = chem.vqe(H, c, steps=100, optimizer="lbfgs")
        assert r.energy == pytest.approx(e0, abs=1e-6) and r.energy >= e0 - 1e-9
        p = c().detach()[0].abs().numpy() ** 2
        assert p[~sector].sum() < 1e-10                                       # stays in the (3, 1) sector


def test_k_upccgsd_reference_errors():
    with pytest.raises(ValueError, match="holds 1 electrons, not 2"):
        chem.k_upccgsd(4, 2, reference="1000")
    with pytest.raises(ValueError, match="reference state must be 4 bits"):
        chem.k_upccgsd(4, 2, reference="11000")
    with pytest.raises(ValueError, match="do not fit"):
        chem.k_upccgsd(4, 5)
    assert chem.k_upccgsd(4, 2, reference="1010").count_ops()["X"] == 2


@pytest.mark.parametrize("geometry, mapping, conserved", [
    ("H 0 0 0; H 0 0 0.74", "jordan_wigner", True), ("H 0 0 0; H 0 0 0.74", "parity", False),
    ("H 0 0 0; H 0 0 0.74", "bravyi_kitaev", True),        # an accident of 4 qubits, see the dense check
    ("H 0 0 0; H 0 0 1.0; H 0 0 2.0; H 0 0 3.0", "bravyi_kitaev", False)])
def test_number_commutator_against_dense_matrices(geometry, mapping, conserved):
    pytest.importorskip("pyscf")
    from torchquantum_layers.chem.vqe import number_commutator_norm
    H, info = chem.molecular_hamiltonian(chem.Molecule(geometry), mapping=mapping, fci=False)
    n = info.n_qubits
    D = dense_pauli_sum(H, n)
    weight = popcounts(n).sum(1)
    comm = D * (weight[:, None] - weight[None, :])              # [H, N] with N = number of 1s
    assert (np.abs(comm).max() < 1e-12) == conserved
    # [H, Σ Z]/2 = -[H, N]: its largest Pauli coefficient, by projecting on every Pauli string (n = 4)
    if n == 4:
        coeffs = [abs(np.trace(O.pauli_matrix("".join(s)) @ -comm)) / 2 ** n
                  for s in itertools.product("IXYZ", repeat=n)]
        assert number_commutator_norm(H) == pytest.approx(max(coeffs), abs=1e-12)
    else:
        assert (number_commutator_norm(H) < 1e-12) == conserved
    c = chem.uccsd(n, info.n_electrons, dtype=torch.complex128)
    if conserved:
        chem.vqe(H, c, steps=0)
    else:
        with pytest.raises(ValueError, match=r"vqe: the circuit's Givens excitations.*does not commute.*"
                                             r"parity or Bravyi–Kitaev.*mapping='jordan_wigner'"):
            chem.vqe(H, c, steps=1)
        with pytest.raises(ValueError, match="ssvqe: the circuit's Givens excitations"):
            chem.ssvqe(H, chem.k_upccgsd(n, info.n_electrons), k=2, steps=1)
        torch.manual_seed(0)                                    # no number assumption: accepted
        chem.vqe(H, chem.hardware_efficient(n, 1, reference=info.hf_state, dtype=torch.complex128), steps=1)


def test_vqe_target_and_atol_must_be_finite():
    """target=nan and atol<0 were accepted and the run could never converge."""
    H, info = chem.load("H2")
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=f"vqe: target must be a finite number, got {bad}"):
            chem.vqe(H, chem.uccsd(4, 2), steps=1, target=bad)
    with pytest.raises(ValueError, match=r"vqe: atol must be a finite number >= 0, got -0.001"):
        chem.vqe(H, chem.uccsd(4, 2), steps=1, target=info.fci_energy, atol=-1e-3)
    with pytest.raises(ValueError, match="atol must be a finite number >= 0, got nan"):
        chem.vqe(H, chem.uccsd(4, 2), steps=1, atol=float("nan"))
    for name, kw in (("target", dict(target="-1.1")), ("atol", dict(atol=True)), ("target", dict(target=1j))):
        with pytest.raises(TypeError, match=f"vqe: {name} must be a real number"):
            chem.vqe(H, chem.uccsd(4, 2), steps=1, **kw)
    r = chem.vqe(H, chem.uccsd(4, 2, dtype=torch.complex128), steps=100, target=torch.tensor(info.fci_energy),
                 atol=0.01)
    assert r.converged and abs(r.energy - info.fci_energy) <= 0.01
