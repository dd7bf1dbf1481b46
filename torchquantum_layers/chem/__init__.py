"""Quantum chemistry: molecular Hamiltonians, fermion-to-qubit maps, ansätze and VQE helpers.

    import torchquantum_layers as tql
    import torchquantum_layers.chem                      # (tql.chem once imported)
    H, info = tql.chem.load("LiH")                        # bundled: no PySCF needed
    c = tql.chem.uccsd(info.n_qubits, info.n_electrons)  # HF state + Givens excitations
    result = tql.chem.vqe(H, c.double(), steps=100)

With PySCF (``pip install 'torchquantum-layers[chem]'``)::

    mol = tql.chem.Molecule([("H", (0, 0, 0)), ("H", (0, 0, 0.74))])
    H, info = tql.chem.molecular_hamiltonian(mol)         # Jordan–Wigner, interleaved spin orbitals

Conventions: qubit j = spin orbital j, ordered (α0, β0, α1, β1, …); occupied = |1⟩; the
Hartree–Fock state fills the first ``n_electrons`` qubits (closed shell). Energies in Hartree.
"""
from .data import available, available_scans, load, load_scan
from .fermion import (FermionOperator, bravyi_kitaev, encoding_matrix, fermion_to_qubit, jordan_wigner,
                      occupation_to_qubits, parity, taper)
from .hamiltonian import MoleculeInfo, fermionic_hamiltonian, molecular_hamiltonian, qubit_hamiltonian
from .molecule import Molecule

__all__ = ["Molecule", "MoleculeInfo", "molecular_hamiltonian", "qubit_hamiltonian", "fermionic_hamiltonian",
           "load", "load_scan", "available", "available_scans", "FermionOperator", "jordan_wigner", "parity",
           "bravyi_kitaev", "fermion_to_qubit", "encoding_matrix", "occupation_to_qubits", "taper"]
from .ansatz import excitations, generalized_excitations, hardware_efficient, hartree_fock, hf_state, k_upccgsd, uccsd
from .vqe import CHEMICAL_ACCURACY, SSVQEResult, VQEResult, energy, ssvqe, ssvqe_loss, vqe

__all__ += ["hf_state", "hartree_fock", "excitations", "generalized_excitations", "uccsd", "k_upccgsd",
            "hardware_efficient", "vqe", "ssvqe", "ssvqe_loss", "energy", "VQEResult", "SSVQEResult",
            "CHEMICAL_ACCURACY"]
from .adapt import POOLS, AdaptVQEResult, PoolOperator, adapt_vqe, operator_pool, pool_gradients

__all__ += ["adapt_vqe", "AdaptVQEResult", "PoolOperator", "operator_pool", "pool_gradients", "POOLS"]
from .tapering import Z2Tapering, z2_symmetries, z2_taper, z2_tapering

__all__ += ["z2_symmetries", "z2_tapering", "z2_taper", "Z2Tapering"]
from .operators import SpinNumber, particle_number, spin_and_number, spin_minus, spin_plus, spin_squared, spin_z
from .excited_states import VQDResult, sector_hamiltonian, spectral_width_bound, vqd, vqd_loss

__all__ += ["particle_number", "spin_z", "spin_plus", "spin_minus", "spin_squared", "spin_and_number",
            "SpinNumber", "vqd", "vqd_loss", "VQDResult", "sector_hamiltonian", "spectral_width_bound"]
