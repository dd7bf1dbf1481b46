"""Pure tensor functions: states and operator application. No modules, no gate names."""
from .apply import (apply_controlled, apply_diagonal, apply_matrix, apply_permutation, check_wires,
                    kron)
from .state import basis_state, random_state, zero_state

__all__ = ["apply_matrix", "apply_diagonal", "apply_permutation", "apply_controlled", "check_wires",
           "kron", "zero_state", "basis_state", "random_state"]
