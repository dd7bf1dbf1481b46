"""Z2 tapering (tql.chem.z2_taper): dense NumPy spectra of the full and tapered Hamiltonians and
PySCF's FCI energies (bundled) as the oracles."""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.chem.tapering import Z2Tapering, z2_symmetries, z2_taper, z2_tapering


def _dense(H, n):
    """Dense matrix from the terms' letters alone: P|i⟩ = i^{#Y} (−1)^{|i ∧ z|} |i ⊕ x⟩ (wire 0 = MSB)."""
    idx = np.arange(2 ** n)
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        label = p.label(n)
        x = sum(1 << (n - 1 - w) for w, a in enumerate(label) if a in "XY")
        z = sum(1 << (n - 1 - w) for w, a in enumerate(label) if a in "YZ")
        parity = np.array([bin(v).count("1") % 2 for v in idx & z])
        out[idx ^ x, idx] += complex(c) * (1j ** label.count("Y")) * (1 - 2 * parity)
    return out


def _basis_energy(H, bits):
    n = len(bits)
    i = int("".join(map(str, bits)), 2)
    return _dense(H, n)[i, i].real


def test_dense_builder_agrees_with_kronecker_products():
    from . import oracle
    H = tql.Hamiltonian([(0.3, "X0 Y1"), (-1.2, "Z0 Z2"), (0.7j, "Y2"), (0.5, "X1 Z2")], n_wires=3)
    want = sum(complex(c) * oracle.pauli_matrix(p.label(3)) for c, p in H.terms)
    np.testing.assert_allclose(_dense(H, 3), want, atol=1e-14)


@pytest.mark.parametrize("molecule,n_tapered", [("H2", 1), ("LiH_active", 3), ("H2O_active", 4), ("LiH", 8),
                                                ("BeH2", 9)])
def test_tapered_ground_energy_is_fci_and_the_hf_state_keeps_its_energy(molecule, n_tapered):
    H, info = chem.load(molecule)
    Ht, t = z2_taper(H, reference=info.hf_state)
    assert t.n_tapered_qubits == n_tapered == Ht.n_wires
    assert all(abs(complex(c).imag) == 0 for c, _ in Ht.terms)                  # Hermitian, real
    ground = np.linalg.eigvalsh(_dense(Ht, n_tapered))[0]
    assert ground == pytest.approx(info.fci_energy, abs=1e-8)
    ref = t.reference_bits(info.hf_state)
    assert len(ref) == n_tapered
    assert _basis_energy(Ht, ref) == pytest.approx(info.hf_energy, abs=1e-8)


@pytest.mark.parametrize("molecule", ["H2", "LiH_active", "H2O_active"])
def test_the_sectors_spectra_together_are_the_full_spectrum(molecule):
    H, info = chem.load(molecule)
    full = np.linalg.eigvalsh(_dense(H, info.n_qubits))
    t = z2_tapering(H, reference=info.hf_state)
    parts = np.concatenate([np.linalg.eigvalsh(_dense(s.apply(H), t.n_tapered_qubits)) for s in t.sectors()])
    np.testing.assert_allclose(np.sort(parts), full, atol=1e-9)


@pytest.mark.parametrize("molecule", ["H2", "LiH_active", "H2O_active"])
def test_generators_are_independent_commuting_symmetries_with_pivots(molecule):
    H, info = chem.load(molecule)
    n = info.n_qubits
    Hd = _dense(H, n)
    found = z2_symmetries(H)
    mats = [_dense(tql.Hamiltonian([(1.0, tau)], n_wires=n), n) for tau, _ in found]
    for i, ((tau, q), m) in enumerate(zip(found, mats)):
        assert np.allclose(m @ Hd, Hd @ m), str(tau)
        assert tau.letter(q) in "ZY"
        for j, ((other, _), m2) in enumerate(zip(found, mats)):
            assert np.allclose(m @ m2, m2 @ m)
            if j != i:
                assert other.letter(q) in "IX"
    # independent: no product of a non-empty subset is ±I (every other Pauli string is traceless)
    for s in range(1, 2 ** len(found)):
        prod = np.eye(2 ** n)
        for i, m in enumerate(mats):
            if (s >> i) & 1:
                prod = prod @ m
        assert abs(np.trace(prod)) < 1e-9


def test_a_symmetric_operator_tapers_to_the_same_expectation():
    H, info = chem.load("LiH_active")
    n = info.n_qubits
    number = tql.Hamiltonian([(0.5 * n, "")] + [(-0.5, f"Z{j}") for j in range(n)], n_wires=n)
    t = z2_tapering(H, reference=info.hf_state)
    nt = t.apply(number)
    assert _basis_energy(nt, t.reference_bits(info.hf_state)) == pytest.approx(info.n_electrons)
    # ⟨N⟩ of the tapered ground state is the electron count (N commutes with the tapering)
    w, v = np.linalg.eigh(_dense(t.apply(H), t.n_tapered_qubits))
    g = v[:, 0]
    assert np.vdot(g, _dense(nt, t.n_tapered_qubits) @ g).real == pytest.approx(info.n_electrons, abs=1e-8)


def test_vqe_on_the_tapered_hamiltonian_reaches_fci(dtype):
    H, info = chem.load("LiH_active")
    Ht, t = z2_taper(H, reference=info.hf_state)
    torch.manual_seed(0)
    c = chem.hardware_efficient(t.n_tapered_qubits, 3, reference=t.reference_bits(info.hf_state), dtype=dtype)
    r = chem.vqe(Ht, c, steps=150, optimizer="lbfgs")
    assert abs(r.energy - info.fci_energy) < 1.6e-3


def test_no_symmetry_means_no_tapering():
    H = tql.Hamiltonian([(1.0, "X0"), (1.0, "Z0"), (0.5, "Y0 Y1"), (0.2, "X1"), (0.1, "Z1")], n_wires=2)
    Ht, t = z2_taper(H, sector=())
    assert t.generators == () and Ht.n_wires == 2
    np.testing.assert_allclose(_dense(Ht, 2), _dense(H, 2), atol=1e-14)


def test_bad_input_is_refused_with_a_clear_error():
    H, info = chem.load("H2")
    with pytest.raises(ValueError, match="give reference="):
        z2_tapering(H)
    with pytest.raises(ValueError, match="not both"):
        z2_tapering(H, reference=info.hf_state, sector=(1, 1, 1))
    with pytest.raises(ValueError, match="sector must be 3 values"):
        z2_tapering(H, sector=(1, 1))
    with pytest.raises(ValueError, match="sector must be 3 values"):
        z2_tapering(H, sector=(1, 0, 1))
    with pytest.raises(ValueError, match="reference must be 4 bits"):
        z2_tapering(H, reference=(1, 1, 0))
    with pytest.raises(TypeError, match="expected a tql Hamiltonian"):
        z2_tapering(np.eye(16), reference=info.hf_state)
    t = z2_tapering(H, reference=info.hf_state)
    with pytest.raises(ValueError, match="does not commute with the symmetry"):
        t.apply(tql.Hamiltonian([(1.0, "X0")], n_wires=4))
    with pytest.raises(ValueError, match="has eigenvalue"):
        t.reference_bits((1, 0, 0, 0))                    # one electron: another number-parity sector
    with pytest.raises(ValueError, match="acts on 6 qubits"):
        t.apply(tql.Hamiltonian([(1.0, "Z5")], n_wires=6))
    xsym = tql.Hamiltonian([(1.0, "X0 X1"), (1.0, "Y0 Y1")], n_wires=2)     # Z0 Z1 and X0 X1 symmetries
    with pytest.raises(ValueError, match="not an eigenstate"):
        z2_tapering(xsym, reference=(0, 1)) if any(int(g.x_mask) for g, _ in z2_symmetries(xsym)) else \
            Z2Tapering(2, (tql.PauliString("X0 X1"),), (0,), (1,)).reference_bits((0, 1))
