"""Variational quantum state diagonalization (LaRose et al., npj QI 2019; Paddle Quantum's tutorial).

A trainable unitary U maps ρ to ρ̃ = U ρ U†; minimising ``Tr(σ ρ̃)`` for a fixed diagonal σ with
increasing entries drives ρ̃ to a diagonal matrix whose entries are the eigenvalues of ρ in
decreasing order (rearrangement inequality), and the rows of U are its eigenvectors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .. import mixed, qinfo
from ..circuit import Circuit
from ._common import count, ry_rz_layers, seeded_uniform_, universal_two_qubit

__all__ = ["vqsd", "VQSDResult", "spectrum_state"]


def spectrum_state(spectrum, seed: int = 0, dtype=torch.complex128) -> torch.Tensor:
    """``V diag(spectrum) V†`` ``(N, N)`` with a Haar-random V drawn from ``seed``."""
    p = torch.as_tensor(spectrum, dtype=torch.float64)
    N = p.shape[0]
    n = int(round(math.log2(N)))
    if 2 ** n != N or N < 2:
        raise ValueError(f"spectrum_state: the spectrum has {N} entries, not a power of two >= 2")
    if p.dim() != 1:
        raise ValueError(f"spectrum_state: the spectrum must be a flat list of numbers, got shape {tuple(p.shape)}")
    if not torch.isfinite(p).all() or (p < 0).any() or abs(float(p.sum()) - 1) > 1e-9:
        raise ValueError("spectrum_state: the spectrum must be non-negative and sum to 1")
    v = qinfo.haar_unitary(n, 1, generator=torch.Generator().manual_seed(int(seed)), dtype=torch.complex128)[0]
    return ((v * p.to(v.dtype)) @ v.conj().T).to(dtype)


@dataclass
class VQSDResult:
    eigenvalues: torch.Tensor             # diag of U ρ U†: the spectrum in decreasing order
    eigenvectors: torch.Tensor = None     # (N, N): column j is the eigenvector of eigenvalue j
    loss: list = field(default_factory=list)
    circuit: Circuit = None


def vqsd(rho, steps: int = 150, lr: float = 0.1, seed: int = 14, weights=None, depth: int = 4) -> VQSDResult:
    """Diagonalise the density matrix ``rho`` ``(N, N)``: two qubits use the universal 15-angle
    two-qubit circuit (as Paddle's tutorial), more qubits ``depth`` RY–RZ–CNOT layers.

    ``weights``: the diagonal of σ (increasing); default ``1, 2, …, N`` normalised (Paddle's
    ``0.1, 0.2, 0.3, 0.4`` for two qubits)."""
    steps = count(steps, "steps", "vqsd")
    depth = count(depth, "depth", "vqsd")
    r, n = mixed.as_density(rho, "vqsd", square_is_matrix=True)
    if r.shape[0] != 1:
        raise ValueError(f"vqsd: give one density matrix, got a batch of {r.shape[0]}")
    herm_err = float((r - r.conj().transpose(-1, -2)).abs().max())
    if herm_err > (1e-5 if r.dtype == torch.complex64 else 1e-10) * max(1.0, float(r.abs().max())):
        raise ValueError(f"vqsd: the matrix is not Hermitian (max |ρ − ρ†| = {herm_err:.3g})")
    N = 2 ** n
    if weights is None:
        weights = torch.arange(1, N + 1, dtype=torch.float64) / (N * (N + 1) / 2)
    weights = torch.as_tensor(weights, dtype=torch.float64)
    if weights.shape != (N,):
        raise ValueError(f"vqsd: weights must have {N} entries, got shape {tuple(weights.shape)}")
    if not (weights[1:] > weights[:-1]).all():
        raise ValueError("vqsd: weights must be strictly increasing")
    c = Circuit(n, dtype=r.dtype)
    if n == 2:
        universal_two_qubit(c, (0, 1))
    else:
        ry_rz_layers(c, range(n), depth)
    seeded_uniform_(c, seed)
    sigma = weights.to(r.real.dtype)
    opt = torch.optim.Adam(c.parameters(), lr=lr)
    res = VQSDResult(eigenvalues=None, circuit=c)
    for _ in range(steps):
        out = mixed.run(c, state=r)
        loss = (torch.diagonal(out[0]).real * sigma).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.loss.append(float(loss.detach()))
    with torch.no_grad():
        out = mixed.run(c, state=r)
        res.eigenvalues = torch.diagonal(out[0]).real.clone()
        res.eigenvectors = c.unitary().conj().T
    return res
