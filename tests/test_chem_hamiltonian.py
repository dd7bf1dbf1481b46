"""Molecular Hamiltonians: exact diagonalisation against PySCF's FCI, bundled data, bad input.

Oracles (independent of the library's observables): Pauli sums as NumPy Kronecker products for
small n, and, for up to 14 qubits, the Hamiltonian restricted to the (N_α, N_β) sector built here
from the Pauli masks (P|j⟩ = i^{|x∧z|} (−1)^{|j∧z|} |j⊕x⟩); FCI / CASCI energies from PySCF.
"""
import itertools
import sys

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
import torchquantum_layers.chem as chem
from torchquantum_layers.chem import Molecule
from torchquantum_layers.grad import circuit_expval

from . import oracle as O

BOHR = 0.529177210903          # Å (CODATA 2018, as PySCF)
FCI_TOL = 1e-8


# ------------------------------------------------------------------------------------------------
# oracles
def pauli_dense(H, n):
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        letters = [{(0, 0): "I", (1, 0): "X", (0, 1): "Z", (1, 1): "Y"}[((p.x_mask >> w) & 1, (p.z_mask >> w) & 1)]
                   for w in range(n)]
        out += c * O.kron(*[O.PAULI[ch] for ch in letters])
    return out


def _index_mask(wire_mask, n):
    return sum(1 << (n - 1 - w) for w in range(n) if (wire_mask >> w) & 1)


def sector_states(n, n_alpha, n_beta):
    """Basis indices with n_alpha ones on even wires and n_beta on odd wires (JW, interleaved)."""
    out = []
    for a in itertools.combinations(range(0, n, 2), n_alpha):
        for b in itertools.combinations(range(1, n, 2), n_beta):
            out.append(sum(1 << (n - 1 - w) for w in a + b))
    return np.array(sorted(out), dtype=np.int64)


def sector_matrix(H, n, n_alpha, n_beta):
    states = sector_states(n, n_alpha, n_beta)
    cols = np.arange(len(states))
    m = np.zeros((len(states), len(states)), dtype=np.complex128)
    for c, p in H.terms:
        xi, zi = _index_mask(p.x_mask, n), _index_mask(p.z_mask, n)
        ny = bin(p.x_mask & p.z_mask).count("1")
        t = states ^ xi
        pos = np.clip(np.searchsorted(states, t), 0, len(states) - 1)
        ok = states[pos] == t
        sign = 1 - 2 * (np.bitwise_count((states & zi).astype(np.uint64)).astype(np.int64) % 2)
        np.add.at(m, (pos[ok], cols[ok]), (c * 1j ** ny * sign)[ok])
    return m


def sector_ground(H, info):
    return float(np.linalg.eigvalsh(sector_matrix(H, info.n_qubits, info.n_alpha, info.n_beta))[0])


def diagonal_element(H, bits):
    """⟨b|H|b⟩ for a basis state: only X-free terms contribute."""
    n = len(bits)
    j = int("".join(map(str, bits)), 2)
    total = 0.0
    for c, p in H.terms:
        if p.x_mask == 0:
            total += c * (-1) ** bin(j & _index_mask(p.z_mask, n)).count("1")
    return float(np.real(total))


def h2(r=0.74):
    return [("H", (0.0, 0.0, 0.0)), ("H", (0.0, 0.0, r))]


LIH = "Li 0 0 0; H 0 0 1.5949"


# ------------------------------------------------------------------------------------------------
# PySCF: our Hamiltonians against FCI
@pytest.fixture(scope="module")
def pyscf():
    return pytest.importorskip("pyscf")


def test_h2_dense_ground_state_is_fci(pyscf):
    H, info = chem.molecular_hamiltonian(Molecule(h2()))
    assert (info.n_qubits, info.n_electrons, info.hf_state, len(H)) == (4, 2, (1, 1, 0, 0), 15)
    assert info.nuclear_repulsion == pytest.approx(BOHR / 0.74, rel=1e-9)
    ev = np.linalg.eigvalsh(pauli_dense(H, 4))
    assert abs(ev[0] - info.fci_energy) < FCI_TOL
    assert info.fci_energy == pytest.approx(-1.13728, abs=1e-5)
    assert diagonal_element(H, info.hf_state) == pytest.approx(info.hf_energy, abs=FCI_TOL)
    assert info.provenance["pyscf_version"] == pyscf.__version__ and info.provenance["scf_converged"]
    assert all(isinstance(c, float) for c in H.coeffs)


def test_lih_full_12_qubits(pyscf):
    H, info = chem.molecular_hamiltonian(Molecule(LIH))
    assert info.n_qubits == 12 and info.n_electrons == 4 and len(H) == 631
    assert abs(sector_ground(H, info) - info.fci_energy) < FCI_TOL
    from pyscf import fci, gto, scf
    mol = gto.M(atom=LIH, basis="sto-3g", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-11)
    e_fci = fci.FCI(mf).kernel()[0]                     # PySCF's own FCI driver, independently
    assert abs(info.fci_energy - e_fci) < FCI_TOL
    assert diagonal_element(H, info.hf_state) == pytest.approx(mf.e_tot, abs=FCI_TOL)


@pytest.mark.parametrize("active", [dict(active_electrons=2, active_orbitals=3),
                                    dict(active_electrons=2, active_orbitals=5),
                                    dict(active_electrons=2, active_orbitals=[1, 2, 5])])
def test_lih_active_space_matches_casci(pyscf, active):
    H, info = chem.molecular_hamiltonian(Molecule(LIH, **active))
    k = active["active_orbitals"]
    n_act = k if isinstance(k, int) else len(k)
    assert info.n_qubits == 2 * n_act and info.frozen_orbitals == (0,)
    from pyscf import gto, mcscf, scf
    mf = scf.RHF(gto.M(atom=LIH, basis="sto-3g", verbose=0)).run(conv_tol=1e-11)
    mc = mcscf.CASCI(mf, n_act, 2)
    mc.verbose = 0
    mc.fcisolver.conv_tol = 1e-12
    mo = mc.sort_mo([i + 1 for i in k]) if not isinstance(k, int) else None
    e_cas = mc.kernel(mo)[0]
    assert abs(info.fci_energy - e_cas) < FCI_TOL
    assert abs(sector_ground(H, info) - e_cas) < FCI_TOL
    assert diagonal_element(H, info.hf_state) == pytest.approx(mf.e_tot, abs=FCI_TOL)


def test_beh2_full_14_qubits(pyscf):
    geom = [("Be", (0, 0, 0)), ("H", (0, 0, -1.3264)), ("H", (0, 0, 1.3264))]
    H, info = chem.molecular_hamiltonian(Molecule(geom))
    assert info.n_qubits == 14 and info.n_electrons == 6
    assert abs(sector_ground(H, info) - info.fci_energy) < FCI_TOL


@pytest.mark.parametrize("mapping,reduce", [("parity", False), ("bravyi_kitaev", False), ("parity", True)])
def test_other_mappings_of_a_molecule(pyscf, mapping, reduce):
    mol = Molecule(LIH, active_electrons=2, active_orbitals=3)
    Hjw, ijw = chem.molecular_hamiltonian(mol)
    H, info = chem.molecular_hamiltonian(mol, mapping=mapping, two_qubit_reduction=reduce)
    n = info.n_qubits
    assert n == (4 if reduce else 6) and info.mapping == mapping
    assert diagonal_element(H, info.hf_state) == pytest.approx(info.hf_energy, abs=FCI_TOL)
    got = np.linalg.eigvalsh(pauli_dense(H, n))
    full = pauli_dense(Hjw, 6)
    if not reduce:
        ref = np.linalg.eigvalsh(full)
    else:       # the kept levels: JW sectors with N_α odd and N even (N_α = N_β = 1)
        sel = [i for i in range(64) if sum((i >> (5 - w)) & 1 for w in (0, 2, 4)) % 2 == 1
               and bin(i).count("1") % 2 == 0]
        ref = np.linalg.eigvalsh(full[np.ix_(sel, sel)])
    np.testing.assert_allclose(got, ref, atol=1e-9)
    assert abs(info.fci_energy - ijw.fci_energy) < 1e-10


def test_open_shell_doublet(pyscf):
    mol = Molecule("H 0 0 0; H 0 0 0.9; H 0 0 1.8", multiplicity=2)
    H, info = chem.molecular_hamiltonian(mol)
    assert (info.n_alpha, info.n_beta, info.hf_state) == (2, 1, (1, 1, 1, 0, 0, 0))
    assert info.provenance["scf"].startswith("ROHF")
    assert abs(sector_ground(H, info) - info.fci_energy) < FCI_TOL
    assert diagonal_element(H, info.hf_state) == pytest.approx(info.hf_energy, abs=FCI_TOL)


def test_bundled_h2_reproduces_from_pyscf(pyscf):
    Hb, ib = chem.load("H2")
    H, info = chem.molecular_hamiltonian(Molecule(ib.geometry))
    np.testing.assert_allclose(pauli_dense(H, 4), pauli_dense(Hb, 4), atol=1e-9)
    assert info.fci_energy == pytest.approx(ib.fci_energy, abs=1e-9)


def test_generator_rewrites_the_bundled_files(pyscf, tmp_path, capsys):
    """``python -m torchquantum_layers.chem.generate_data`` reproduces the shipped JSON (active space too)."""
    import json
    from torchquantum_layers.chem import generate_data
    written = generate_data.main(["H2", "LiH_active"], out_dir=tmp_path)
    assert [p.name for p in written] == ["H2.json", "LiH_active.json"]
    for path in written:
        fresh = json.loads(path.read_text(encoding="utf-8"))
        shipped = json.loads((chem.data.DATA_DIR / path.name).read_text(encoding="utf-8"))
        assert fresh["format"] == shipped["format"] and fresh["generated_by"] == shipped["generated_by"]
        (new_entry,), (old_entry,) = fresh["entries"], shipped["entries"]
        new_terms, old_terms = dict((t, c) for c, t in new_entry["terms"]), dict((t, c) for c, t in old_entry["terms"])
        assert new_terms.keys() == old_terms.keys()
        np.testing.assert_allclose([new_terms[k] for k in old_terms], list(old_terms.values()), atol=1e-9)
        for key in ("fci_energy", "hf_energy", "core_energy", "n_qubits", "n_electrons", "hf_state"):
            assert new_entry["info"][key] == pytest.approx(old_entry["info"][key], abs=1e-9), key
    assert "LiH_active.json" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown molecule.*'CH4'"):
        generate_data.main(["CH4"], out_dir=tmp_path)


# ------------------------------------------------------------------------------------------------
# bundled data (always)
@pytest.mark.parametrize("name", chem.available())
def test_bundled_fci_is_exact_ground_energy(name):
    H, info = chem.load(name)
    assert info.n_qubits <= 14 and H.n_wires == info.n_qubits and len(H) == info.n_terms
    assert abs(sector_ground(H, info) - info.fci_energy) < FCI_TOL
    assert diagonal_element(H, info.hf_state) == pytest.approx(info.hf_energy, abs=FCI_TOL)
    assert info.hf_state == tuple([1] * info.n_electrons + [0] * (info.n_qubits - info.n_electrons))
    prov = info.provenance
    for key in ("pyscf_version", "date", "description", "source"):
        assert prov.get(key), key
    assert info.basis == "sto-3g" and info.geometry and info.mapping == "jordan_wigner"
    if info.frozen_orbitals:
        assert info.core_energy < info.nuclear_repulsion          # the frozen core's energy is negative
    else:
        assert info.core_energy == info.nuclear_repulsion > 0


def test_bundled_names_and_sizes():
    names = chem.available()
    for want in ("H2", "LiH", "BeH2", "H2O"):
        assert want in names
    sizes = {name: chem.load(name)[1].n_qubits for name in names}
    assert sizes["H2"] == 4 and sizes["LiH"] == 12 and sizes["BeH2"] == 14 and sizes["H2O"] == 14
    assert len(chem.load("LiH")[0]) == 631
    assert chem.load("lih")[0] is chem.load("LiH")[0]                # case-insensitive, cached
    with pytest.raises(ValueError, match="available: .*BeH2.*H2"):
        chem.load("CH4")


def test_bundled_h2_scan():
    scan = chem.load_scan("H2")
    lengths = [r for r, _, _ in scan]
    assert len(scan) == 21 and lengths[0] == pytest.approx(0.5) and lengths[-1] == pytest.approx(2.5)
    assert np.allclose(np.diff(lengths), 0.1)
    for r, H, info in scan:
        ev = np.linalg.eigvalsh(pauli_dense(H, 4))
        assert abs(ev[0] - info.fci_energy) < FCI_TOL
        assert info.geometry[1][1][2] == pytest.approx(r)
    e = [info.fci_energy for _, _, info in scan]
    assert lengths[int(np.argmin(e))] == pytest.approx(0.7)           # minimum near 0.74 Å
    H, info = chem.load("H2", bond_length=1.5)
    assert info.provenance["bond_length"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="bond lengths"):
        chem.load("H2", bond_length=0.55)
    with pytest.raises(ValueError, match="no bundled scan"):
        chem.load_scan("LiH")
    assert chem.available_scans() == ["H2"]


def test_info_roundtrip_and_hf_state(dtype, device):
    H, info = chem.load("H2")
    again = chem.MoleculeInfo.from_dict(info.to_dict())
    assert again == info
    assert info.hf_bitstring == "1100"
    s = info.hf_basis_state(dtype=dtype, device=device)
    assert s.shape == (1, 16) and s.dtype == dtype and s[0, 0b1100] == 1 and s.abs().sum() == 1
    e = circuit_expval(tql.Circuit(4, dtype=dtype).to(device), H, state=s)
    tol = 1e-5 if dtype == torch.complex64 else 1e-10
    assert float(e) == pytest.approx(info.hf_energy, abs=tol)


# ------------------------------------------------------------------------------------------------
# bad input: clear errors before any heavy computation (none of these needs PySCF)
def test_odd_electrons_singlet():
    with pytest.raises(ValueError, match="3 electrons .*multiplicity 1"):
        Molecule("H 0 0 0; H 0 0 0.74; H 0 0 1.5")
    with pytest.raises(ValueError, match="multiplicity 3"):
        Molecule("H 0 0 0; H 0 0 0.74; H 0 0 1.5", multiplicity=3)
    Molecule("H 0 0 0; H 0 0 0.74; H 0 0 1.5", multiplicity=2)          # fine
    Molecule("H 0 0 0; H 0 0 0.74; H 0 0 1.5", charge=1)                 # fine
    with pytest.raises(ValueError, match="leaves 0 electrons"):
        Molecule(h2(), charge=2)


def test_unknown_element_and_bad_geometry():
    with pytest.raises(ValueError, match="unknown element 'Xx'"):
        Molecule([("Xx", (0, 0, 0)), ("H", (0, 0, 1))])
    with pytest.raises(ValueError, match="unknown element"):
        Molecule("Q 0 0 0")
    with pytest.raises(ValueError, match="Å apart"):
        Molecule("H 0 0 0; H 0 0 0.01")
    with pytest.raises(ValueError, match="symbol x y z"):
        Molecule("H 0 0")
    with pytest.raises(ValueError, match="not three numbers"):
        Molecule([("H", ("a", 0, 0))])
    with pytest.raises(ValueError, match="no atoms"):
        Molecule([])
    with pytest.raises(TypeError):
        Molecule(h2(), multiplicity=1.0)


def test_geometry_formats():
    xyz_file = "2\nhydrogen molecule\nH 0.0 0.0 0.0\nH 0.0 0.0 0.74\n"
    for g in (h2(), "H 0 0 0; H 0 0 0.74", "H 0 0 0\nH 0 0 0.74", xyz_file, [["h", [0, 0, 0]], ["H", [0, 0, 0.74]]]):
        m = Molecule(g)
        assert m.symbols == ["H", "H"] and m.coordinates[1, 2] == pytest.approx(0.74)
        assert m.n_electrons == 2 and m.n_qubits == 4 and m.name == "H2"
    assert Molecule("Li 0 0 0; H 0 0 1.6").name == "LiH"
    with pytest.raises(ValueError, match="XYZ header says 3"):
        Molecule("3\ncomment\nH 0 0 0\nH 0 0 0.74\n")
    # a file read with a leading blank line: the comment is still the line after the count
    m = Molecule("\n2\nhydrogen molecule\nH 0 0 0\nH 0 0 0.74\n")
    assert m.symbols == ["H", "H"] and m.coordinates[1, 2] == pytest.approx(0.74)


def test_active_space_errors():
    with pytest.raises(ValueError, match="only 6"):
        Molecule(LIH, active_orbitals=7)
    with pytest.raises(ValueError, match="only 6"):
        Molecule(LIH, active_electrons=2, active_orbitals=6)           # core 1 + 6 > 6
    with pytest.raises(ValueError, match="does not exist"):
        Molecule(LIH, active_electrons=2, active_orbitals=[1, 2, 6])
    with pytest.raises(ValueError, match="doubly occupied"):
        Molecule(LIH, active_electrons=3)
    with pytest.raises(ValueError, match="between 1 and the 4"):
        Molecule(LIH, active_electrons=6)
    with pytest.raises(ValueError, match="do not fit"):
        Molecule(LIH, active_electrons=4, active_orbitals=1)
    with pytest.raises(ValueError, match="not doubly occupied"):
        Molecule(LIH, active_electrons=2, active_orbitals=[0, 1])       # core would be orbital 2 (virtual)
    m = Molecule(LIH, active_electrons=2, active_orbitals=3)
    assert m.n_qubits == 6 and m.orbital_indices() == ((0,), (1, 2, 3)) and "active" in repr(m)


def test_active_list_may_not_drop_an_occupied_orbital():
    """LiH (orbitals 0, 1 occupied) with all 4 electrons on orbitals [0, 3, 4]: orbital 1 would be neither
    frozen nor active, so the "HF" bits would be a determinant ~0.67 Ha above the HF energy reported."""
    with pytest.raises(ValueError, match=r"orbital\(s\) \[1\] occupied in the Hartree–Fock reference"):
        Molecule(LIH, active_electrons=4, active_orbitals=[0, 3, 4])
    with pytest.raises(ValueError, match=r"orbital\(s\) \[1\]"):
        Molecule(LIH, active_electrons=2, active_orbitals=[2, 3])         # core (0,), orbital 1 dropped
    assert Molecule(LIH, active_electrons=2, active_orbitals=[1, 3]).orbital_indices() == ((0,), (1, 3))


def test_too_large_for_memory_fails_before_pyscf(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyscf", None)        # PySCF must not even be needed
    chain = "; ".join(f"C 0 0 {1.3 * i}" for i in range(20)) + "; H 0 0 -1; H 0 0 26"
    with pytest.raises(ValueError, match="qubits.*active space"):
        chem.molecular_hamiltonian(Molecule(chain))
    ethane_like = Molecule("C 0 0 0; C 0 0 1.5; " + "; ".join(f"H {x} {y} {z}" for x, y, z in
                           [(1, 0, -0.4), (-1, 0, -0.4), (0, 1, -0.4), (1, 0, 1.9), (-1, 0, 1.9), (0, 1, 1.9)]))
    assert ethane_like.n_qubits == 32
    from torchquantum_layers.kernels import state as S
    monkeypatch.setattr(S, "_available_bytes", lambda device: 8 * 2 ** 30)     # an 8 GiB machine
    with pytest.raises(ValueError, match="32 qubits.*GiB"):
        chem.molecular_hamiltonian(ethane_like)


def test_missing_pyscf_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyscf", None)
    with pytest.raises(ImportError) as err:
        chem.molecular_hamiltonian(Molecule(h2()))
    msg = str(err.value)
    assert "torchquantum-layers[chem]" in msg and "pip install pyscf" in msg
    for name in ("H2", "LiH", "BeH2", "H2O"):
        assert name in msg
    H, info = chem.load("H2")                # bundled data still works without PySCF
    assert info.n_qubits == 4


def test_mapping_argument_errors():
    with pytest.raises(ValueError, match="two_qubit_reduction needs mapping='parity'"):
        chem.molecular_hamiltonian(Molecule(h2()), two_qubit_reduction=True)
    with pytest.raises(ValueError, match="unknown fermion-to-qubit mapping"):
        chem.molecular_hamiltonian(Molecule(h2()), mapping="ternary_tree")
    with pytest.raises(TypeError, match="tql.chem.Molecule"):
        chem.molecular_hamiltonian(h2())


@pytest.mark.filterwarnings("ignore:Basis may be available")
def test_unknown_basis_is_a_value_error(pyscf):
    with pytest.raises(ValueError, match="basis"):
        chem.molecular_hamiltonian(Molecule(h2(), basis="no-such-basis"))


def test_info_from_dict_names_missing_keys_and_bad_values():
    """A dict without "n_qubits" raised a bare KeyError: 'hf_state' (or a dataclass TypeError)."""
    _, info = chem.load("H2")
    d = info.to_dict()
    for missing in (["n_qubits"], ["hf_state", "fci_energy"]):
        bad = {k: v for k, v in d.items() if k not in missing}
        with pytest.raises(ValueError, match=r"MoleculeInfo.from_dict: missing keys? " +
                           ", ".join(f"'{k}'" for k in missing) + r" \(required: name, n_qubits"):
            chem.MoleculeInfo.from_dict(bad)
    optional = {k: v for k, v in d.items() if k not in ("geometry", "provenance", "mapping", "basis")}
    again = chem.MoleculeInfo.from_dict(optional)                  # keys with defaults may be absent
    assert again.hf_state == (1, 1, 0, 0) and again.mapping == "jordan_wigner" and again.geometry == []
    assert chem.MoleculeInfo.from_dict({**d, "unknown": 1}) == info
    for hf in ("11x0", [1, 2, 0, 0], 5):
        with pytest.raises(ValueError, match=r"hf_state must be bits 0/1.*got " + repr(hf).replace("[", r"\[")):
            chem.MoleculeInfo.from_dict({**d, "hf_state": hf})
    with pytest.raises(TypeError, match="from_dict: expected a dict, got list"):
        chem.MoleculeInfo.from_dict([("name", "H2")])


def test_molecular_hamiltonian_tol_checked_before_pyscf(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyscf", None)                 # no PySCF needed to refuse it
    with pytest.raises(ValueError, match=r"molecular_hamiltonian: tol must be a finite number >= 0 .*got -1.0"):
        chem.molecular_hamiltonian(Molecule(h2()), tol=-1)
