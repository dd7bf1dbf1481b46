"""Pauli decomposition of a dense matrix: ``M = Σ_P c_P P`` (the inverse of ``Hamiltonian.to_dense``)."""
from __future__ import annotations

import numpy as np
import torch

from .hamiltonian import Hamiltonian
from .pauli import PauliString

__all__ = ["pauli_decompose", "DECOMPOSE_MAX_WIRES"]

# a dense matrix is decomposed into 4**n Pauli strings: beyond this the decomposition is the bottleneck
DECOMPOSE_MAX_WIRES = 10


def pauli_decompose(matrix, tol: float = 1e-12) -> Hamiltonian:
    """The Pauli strings of a dense ``(2**n, 2**n)`` matrix: ``M = Σ_P c_P P`` with
    ``c_P = Tr(P† M) / 2**n`` (wire 0 = most significant bit of the row index).

    For each X mask x the vector ``v_x[j] = M[j⊕x, j]`` carries every string with that X part;
    the Walsh–Hadamard transform of ``v_x`` gives all their Z parts at once, so the whole
    decomposition costs ``O(n 4**n)``. Terms with ``|c_P| <= tol · max|c|`` are dropped;
    coefficients whose imaginary part is below that threshold are made real (so a Hermitian
    matrix gives a Hermitian :class:`Hamiltonian`). Up to 10 qubits."""
    what = "pauli_decompose"
    if isinstance(matrix, Hamiltonian):
        raise TypeError(f"{what}: matrix is already a Hamiltonian")
    m = matrix if isinstance(matrix, torch.Tensor) else torch.as_tensor(np.asarray(matrix))
    if m.dim() != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{what}: matrix must be square (2**n, 2**n), got shape {tuple(m.shape)}")
    N = m.shape[0]
    n = N.bit_length() - 1
    if N < 2 or (1 << n) != N:
        raise ValueError(f"{what}: matrix size {N} is not a power of two >= 2")
    if n > DECOMPOSE_MAX_WIRES:
        raise ValueError(f"{what}: {n} qubits give 4**{n} Pauli strings; the limit is {DECOMPOSE_MAX_WIRES} qubits")
    if not (m.dtype.is_complex or m.dtype.is_floating_point or m.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{what}: matrix must hold numbers, got dtype {m.dtype}")
    m = m.detach().to("cpu", torch.complex128)
    if not bool(torch.isfinite(torch.view_as_real(m)).all()):
        raise ValueError(f"{what}: matrix contains NaN or inf")
    idx = torch.arange(N)
    x_masks = idx[:, None]
    v = m[idx[None, :] ^ x_masks, idx[None, :]]                # v[x, j] = M[j ⊕ x, j]
    # Walsh–Hadamard transform along j: w[x, z] = Σ_j (−1)^{|j∧z|} v[x, j]
    w = v.reshape(N, *([2] * n))
    for axis in range(1, n + 1):
        a, b = w.narrow(axis, 0, 1), w.narrow(axis, 1, 1)
        w = torch.cat([a + b, a - b], dim=axis)
    w = w.reshape(N, N)
    # P = i^{|x∧z|} X^x Z^z  ⇒  Tr(P† M) = (−i)^{|x∧z|} w[x, z]
    overlaps = torch.tensor([bin(k).count("1") for k in range(N)])[idx[:, None] & idx[None, :]]
    coeffs = w * (torch.tensor([1, -1j, -1, 1j], dtype=torch.complex128)[overlaps % 4]) / N
    threshold = tol * float(coeffs.abs().max()) if N else 0.0
    keep = torch.nonzero(coeffs.abs() > threshold).tolist()
    terms = []
    for x, z in keep:
        c = complex(coeffs[x, z])
        c = c.real if abs(c.imag) <= threshold else c
        terms.append((c, PauliString(_label(x, z, n))))
    return Hamiltonian(terms, n_wires=n)


def _label(x: int, z: int, n: int) -> str:
    """Dense label (letter i on wire i) of index masks x, z (wire w = index bit n−1−w)."""
    letters = "IXZY"
    return "".join(letters[((x >> (n - 1 - w)) & 1) | (((z >> (n - 1 - w)) & 1) << 1)] for w in range(n))
