"""torchquantum-layers: quantum circuits as batched, differentiable PyTorch modules."""
from . import chem, checks, exact, functional, gates, grad, kernels, lattice, measure, mixed, mps, observables, optim, optimization, plotting, qasm, qasm3, qinfo, qml, research, runtime, shadows, templates, tomography, varqte
from .circuit import Circuit, Input, Param
from .gates import Gate, controlled, get_gate
from .grad import expval
from .kernels.state import basis_state, from_qiskit_order, random_state, reverse_wire_order, to_qiskit_order, zero_state
from .layers import QuantumLayer
from .mixed import DensityMatrix, MixedCircuit, NoiseModel
from .observables import Hamiltonian, PauliString, apply_hamiltonian, expectation
from . import qiskit_interop  # qiskit itself is imported only inside its functions

__version__ = "0.1.0"

__all__ = ["Circuit", "Param", "Input", "Gate", "controlled", "get_gate", "zero_state", "basis_state",
           "random_state", "reverse_wire_order", "to_qiskit_order", "from_qiskit_order", "expval", "expectation", "apply_hamiltonian", "PauliString", "Hamiltonian", "QuantumLayer",
           "functional", "gates", "grad", "kernels", "measure", "templates", "exact", "checks", "observables", "chem", "qml", "mixed", "qasm", "qasm3", "qinfo", "research", "runtime", "shadows", "plotting", "optim", "optimization", "varqte", "lattice", "tomography", "DensityMatrix", "MixedCircuit", "NoiseModel"]
