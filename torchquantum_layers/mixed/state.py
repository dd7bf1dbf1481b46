"""Density matrices ``(B, 2**n, 2**n)``: checks, constructors and the ``DensityMatrix`` wrapper.

A density matrix is a plain complex tensor of shape ``(batch, 2**n, 2**n)`` (a single ``(2**n,
2**n)`` matrix is read as a batch of one). Its row index uses the library's convention (wire 0
is the most significant bit). Viewed as a vector of length ``4**n``, ``rho.reshape(B, -1)`` is a
state on ``2n`` wires: wires ``0..n-1`` index the rows, wires ``n..2n-1`` the columns, so a
gate ``U`` acts as ``U`` on the row wires and ``conj(U)`` on the column wires (``U ρ U†``), and
the state-vector kernels do all the work.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..kernels.state import COMPLEX_DTYPES, REAL_OF, check_allocation, n_wires_of, resolve_dtype

__all__ = ["n_wires_of_density", "as_density", "density_from_state", "zero_density", "basis_density",
           "maximally_mixed", "is_density", "DensityMatrix"]


def n_wires_of_density(rho: torch.Tensor, what: str = "density matrix") -> int:
    """Number of qubits of a ``(B, 2**n, 2**n)`` density matrix; a clear error otherwise."""
    if not isinstance(rho, torch.Tensor):
        raise TypeError(f"{what}: expected a torch.Tensor, got {type(rho).__name__}")
    if rho.dim() != 3 or rho.shape[1] != rho.shape[2]:
        raise ValueError(f"{what}: a density matrix must have shape (batch, 2**n, 2**n), got shape "
                         f"{tuple(rho.shape)}")
    size = rho.shape[1]
    n = size.bit_length() - 1
    if size < 1 or (1 << n) != size:
        raise ValueError(f"{what}: matrix size {size} is not a power of two (shape {tuple(rho.shape)})")
    if rho.dtype not in COMPLEX_DTYPES:
        raise TypeError(f"{what}: dtype must be complex64 or complex128, got {rho.dtype}")
    return n


def density_from_state(psi: torch.Tensor) -> torch.Tensor:
    """``|ψ⟩⟨ψ|`` for a batch of state vectors ``(B, 2**n)`` (or one ``(2**n,)``): ``(B, 2**n, 2**n)``."""
    if psi.dim() == 1:
        psi = psi.unsqueeze(0)
    n_wires_of(psi)
    return psi[:, :, None] * psi.conj()[:, None, :]


def as_density(state, what: str = "density matrix", square_is_matrix: bool = False):
    """(rho (B, N, N), n) from a DensityMatrix, a (B, N, N) matrix or a (B, N) / (N,) state vector.

    A 2-d tensor is a batch of state vectors unless ``square_is_matrix`` (then a square
    ``(N, N)`` tensor is one density matrix, as ``DensityMatrix(m)`` reads it).
    """
    if isinstance(state, DensityMatrix):
        state = state.tensor
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor or DensityMatrix, got {type(state).__name__}")
    if state.dim() == 2 and square_is_matrix and state.shape[0] == state.shape[1]:
        state = state.unsqueeze(0)
    elif state.dim() in (1, 2):
        if state.dtype not in COMPLEX_DTYPES:
            raise TypeError(f"{what}: dtype must be complex64 or complex128, got {state.dtype}")
        state = density_from_state(state)
    n = n_wires_of_density(state, what)
    return state, n


def basis_density(bits, batch: int = 1, dtype=None, device=None) -> torch.Tensor:
    """``|b⟩⟨b|`` for a bit sequence or bit string (wire 0 first), repeated ``batch`` times."""
    if isinstance(bits, str):
        if any(ch not in "01" for ch in bits):
            raise ValueError(f"basis_density: bit string must contain only 0 and 1, got {bits!r}")
        bits = [int(ch) for ch in bits]
    bits = [int(b) for b in bits]
    if any(b not in (0, 1) for b in bits):
        raise ValueError(f"basis_density: bits must be 0 or 1, got {bits}")
    n = len(bits)
    dtype = resolve_dtype(dtype)
    check_allocation(2 * n, batch, dtype, device)
    index = 0
    for b in bits:
        index = (index << 1) | b
    rho = torch.zeros(batch, 2 ** n, 2 ** n, dtype=dtype, device=device)
    rho[:, index, index] = 1
    return rho


def zero_density(n_wires: int, batch: int = 1, dtype=None, device=None) -> torch.Tensor:
    """``|0…0⟩⟨0…0|`` repeated ``batch`` times."""
    _check_n(n_wires, "zero_density")
    return basis_density([0] * n_wires, batch, dtype, device)


def maximally_mixed(n_wires: int, batch: int = 1, dtype=None, device=None) -> torch.Tensor:
    """``I / 2**n`` repeated ``batch`` times."""
    _check_n(n_wires, "maximally_mixed")
    dtype = resolve_dtype(dtype)
    check_allocation(2 * n_wires, batch, dtype, device)
    N = 2 ** n_wires
    eye = torch.eye(N, dtype=dtype, device=device) / N
    return eye.expand(batch, N, N).clone()


def _check_n(n, what):
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what}: n_wires must be a positive int, got {n!r}")


def is_density(rho, atol: Optional[float] = None) -> torch.Tensor:
    """Per batch element: Hermitian, unit trace and positive semidefinite within ``atol``
    (default 1e-5 for complex64, 1e-10 for complex128). Returns a bool tensor ``(B,)``."""
    rho, _ = as_density(rho, "is_density")
    if atol is None:
        atol = 1e-5 if rho.dtype == torch.complex64 else 1e-10
    herm = (rho - rho.conj().transpose(-1, -2)).abs().amax(dim=(-1, -2)) <= atol
    tr = (torch.diagonal(rho, dim1=-2, dim2=-1).sum(-1) - 1).abs() <= atol * rho.shape[-1]
    h = (rho + rho.conj().transpose(-1, -2)) / 2
    psd = torch.linalg.eigvalsh(h).amin(dim=-1) >= -atol * rho.shape[-1]
    return herm & tr & psd


class DensityMatrix:
    """A batch of density matrices ``(B, 2**n, 2**n)`` with the operations of the simulator.

    ``DensityMatrix(t)`` accepts a ``(B, N, N)`` or ``(N, N)`` matrix or a ``(B, N)`` (non-square) /
    ``(N,)`` state vector (turned into ``|ψ⟩⟨ψ|``; use :meth:`from_state` for a square batch); ``.tensor`` is the underlying tensor (autograd flows
    through every method). Methods return new objects; nothing is modified in place.
    """

    __slots__ = ("tensor", "n_wires")

    def __init__(self, data):
        if isinstance(data, DensityMatrix):
            data = data.tensor
        self.tensor, self.n_wires = as_density(data, "DensityMatrix", square_is_matrix=True)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def zeros(cls, n_wires: int, batch: int = 1, dtype=None, device=None) -> "DensityMatrix":
        return cls(zero_density(n_wires, batch, dtype, device))

    @classmethod
    def basis(cls, bits, batch: int = 1, dtype=None, device=None) -> "DensityMatrix":
        return cls(basis_density(bits, batch, dtype, device))

    @classmethod
    def from_state(cls, psi: torch.Tensor) -> "DensityMatrix":
        return cls(density_from_state(psi))

    @classmethod
    def maximally_mixed(cls, n_wires: int, batch: int = 1, dtype=None, device=None) -> "DensityMatrix":
        return cls(maximally_mixed(n_wires, batch, dtype, device))

    @classmethod
    def random(cls, n_wires: int, batch: int = 1, rank: Optional[int] = None, generator=None,
               dtype=None, device=None) -> "DensityMatrix":
        from ..qinfo import random_density_matrix
        return cls(random_density_matrix(n_wires, batch, rank=rank, generator=generator, dtype=dtype,
                                         device=device))

    # -- description --------------------------------------------------------------------------
    @property
    def batch(self) -> int:
        return self.tensor.shape[0]

    @property
    def dtype(self):
        return self.tensor.dtype

    @property
    def device(self):
        return self.tensor.device

    @property
    def shape(self):
        return self.tensor.shape

    def __repr__(self) -> str:
        return f"DensityMatrix(n_wires={self.n_wires}, batch={self.batch}, dtype={self.dtype}, device={self.device})"

    def to(self, *args, **kwargs) -> "DensityMatrix":
        return DensityMatrix(self.tensor.to(*args, **kwargs))

    def double(self) -> "DensityMatrix":
        return self.to(torch.complex128)

    def trace(self) -> torch.Tensor:
        """Real ``(B,)`` traces."""
        return torch.diagonal(self.tensor, dim1=-2, dim2=-1).sum(-1).real

    def is_valid(self, atol: Optional[float] = None) -> torch.Tensor:
        return is_density(self.tensor, atol)

    # -- evolution ----------------------------------------------------------------------------
    def evolve(self, circuit, x=None, noise_model=None, generator=None) -> "DensityMatrix":
        """Run ``circuit`` (a Circuit or MixedCircuit) on this state, with an optional NoiseModel."""
        from .simulate import run
        return DensityMatrix(run(circuit, x=x, state=self.tensor, noise_model=noise_model, generator=generator))

    def apply_gate(self, gate, *params, wires, matrix=None, adjoint: bool = False) -> "DensityMatrix":
        from .simulate import apply_gate
        return DensityMatrix(apply_gate(self.tensor, gate, *params, wires=wires, matrix=matrix, adjoint=adjoint))

    def apply_channel(self, channel, wires) -> "DensityMatrix":
        return DensityMatrix(channel(self.tensor, wires))

    # -- measurement --------------------------------------------------------------------------
    def expval(self, observables) -> torch.Tensor:
        from .simulate import expectation
        return expectation(self.tensor, observables)

    def probabilities(self, wires=None) -> torch.Tensor:
        from .simulate import probabilities
        return probabilities(self.tensor, wires)

    def sample(self, shots: int, wires=None, generator=None) -> torch.Tensor:
        from .simulate import sample
        return sample(self.tensor, shots, wires, generator)

    def measure(self, wires, generator=None):
        """Selective measurement: ``(outcomes (B,), collapsed DensityMatrix)``."""
        from .simulate import measure
        out, rho = measure(self.tensor, wires, generator)
        return out, DensityMatrix(rho)

    def measure_channel(self, wires) -> "DensityMatrix":
        """Non-selective measurement (dephasing of ``wires``)."""
        from .simulate import measure_channel
        return DensityMatrix(measure_channel(self.tensor, wires))

    def reset(self, wires, generator=None) -> "DensityMatrix":
        """Reset ``wires`` to |0⟩: the non-selective channel, or measure-and-flip with ``generator``."""
        from .simulate import reset
        return DensityMatrix(reset(self.tensor, wires, generator=generator))

    # -- quantum information ------------------------------------------------------------------
    def partial_trace(self, keep) -> "DensityMatrix":
        from ..qinfo import partial_trace
        return DensityMatrix(partial_trace(self.tensor, keep))

    def purity(self) -> torch.Tensor:
        from ..qinfo import purity
        return purity(self.tensor)

    def entropy(self, base=None) -> torch.Tensor:
        from ..qinfo import vn_entropy
        return vn_entropy(self.tensor, base=base)

    def fidelity(self, other) -> torch.Tensor:
        from ..qinfo import fidelity
        other = other.tensor if isinstance(other, DensityMatrix) else other
        return fidelity(self.tensor, other)


def real_dtype_of(rho):
    return REAL_OF[rho.dtype]
