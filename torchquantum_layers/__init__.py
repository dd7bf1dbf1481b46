"""torchquantum-layers: quantum circuits as batched, differentiable PyTorch modules."""
from . import functional, gates, kernels, measure, templates
from .circuit import Circuit, Input, Param
from .gates import Gate, controlled, get_gate
from .kernels.state import basis_state, random_state, zero_state

__version__ = "0.1.0"

__all__ = ["Circuit", "Param", "Input", "Gate", "controlled", "get_gate", "zero_state", "basis_state",
           "random_state", "functional", "gates", "kernels", "measure", "templates"]
