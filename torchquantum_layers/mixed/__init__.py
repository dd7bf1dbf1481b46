"""Density matrices, channels and noise.

* :class:`DensityMatrix` and plain ``(B, 2**n, 2**n)`` tensors; every gate of the table acts as
  ``U ρ U†`` through the state-vector kernels (ρ as a vector on 2n wires).
* :func:`run` / :func:`expval`: any :class:`~torchquantum_layers.Circuit` on density matrices,
  with a :class:`NoiseModel`; :class:`MixedCircuit` adds channels, measurements and resets.
* Channels from Kraus operators or Choi matrices (:mod:`.channels`).
* Zero-noise extrapolation by unitary folding (:mod:`.zne`): :func:`zne_expval`.
* Probabilistic error cancellation of Pauli noise (:mod:`.pec`): :func:`pec_expval`, :func:`pec_overhead`.
* Clifford data regression (:mod:`.cdr`): :func:`cdr_expval`, :func:`near_clifford_circuits`.
"""
from .channels import (TP_ATOL, Channel, amplitude_damping, bit_flip, bit_phase_flip, choi_channel, depolarizing,
                       generalized_amplitude_damping, kraus_channel, pauli_channel, phase_damping, phase_flip,
                       reset_channel, thermal_relaxation, unitary_channel)
from .circuit import MixedCircuit
from .noise import NoiseModel
from .readout import ReadoutError
from . import cdr, pec, trajectories, zne
from .cdr import CDRFit, NearClifford, cdr_expval, near_clifford_circuits
from .pec import PauliInverse, pauli_inverse, pec_expval, pec_overhead
from .zne import extrapolate, fold_gates, zne_expval
from .simulate import (apply_gate, apply_hamiltonian_density, apply_operator, expectation, expval, measure,
                       measure_channel, probabilities, reset, run, sample)
from .state import (DensityMatrix, as_density, basis_density, density_from_state, is_density, maximally_mixed,
                    n_wires_of_density, zero_density)

__all__ = ["DensityMatrix", "MixedCircuit", "trajectories", "zne", "zne_expval", "fold_gates", "extrapolate",
           "pec", "pec_expval", "pec_overhead", "pauli_inverse", "PauliInverse", "cdr", "cdr_expval",
           "near_clifford_circuits", "NearClifford", "CDRFit", "NoiseModel", "ReadoutError",
           "Channel", "run", "expval", "expectation",
           "apply_gate", "apply_operator", "apply_hamiltonian_density", "probabilities", "sample", "measure",
           "measure_channel", "reset", "as_density", "basis_density", "density_from_state", "is_density",
           "maximally_mixed", "n_wires_of_density", "zero_density", "kraus_channel", "choi_channel",
           "unitary_channel", "bit_flip", "phase_flip", "bit_phase_flip", "depolarizing", "amplitude_damping",
           "generalized_amplitude_damping", "phase_damping", "pauli_channel", "reset_channel",
           "thermal_relaxation", "TP_ATOL"]
