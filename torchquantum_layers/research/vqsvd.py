"""Variational quantum singular value decomposition (Wang, Song & Wang, arXiv:2006.02336;
Paddle Quantum's tutorial).

Two circuits U(θ), V(φ) learn the left and right singular vectors of M: with weights
``q₁ > … > q_T > 0``, maximising ``Σ_j q_j Re⟨j|U† M V|j⟩`` aligns the basis states |j⟩ with
the singular pairs in decreasing order (von Neumann's trace inequality), and
``m_j = Re⟨j|U† M V|j⟩`` estimates the singular values.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import torch

from ..circuit import Circuit
from ._common import count, ry_rz_layers, seeded_uniform_

__all__ = ["vqsvd", "VQSVDResult", "paddle_random_matrix"]


def paddle_random_matrix(n_wires: int = 3, seed: int = 42) -> np.ndarray:
    """The random complex matrix of Paddle Quantum's VQSVD tutorial: integer real and imaginary
    parts in [0, 10) from NumPy's legacy generator seeded with ``seed``."""
    rs = np.random.RandomState(seed)
    d = 2 ** n_wires
    re = rs.randint(10, size=(d, d))
    im = rs.randint(10, size=(d, d))
    return re + 1j * im


@dataclass
class VQSVDResult:
    singular_values: torch.Tensor          # (T,) estimates m_j, in the order of the weights
    exact: torch.Tensor = None             # (T,) the top-T exact singular values
    U: torch.Tensor = None                 # (N, T) learned left singular vectors (columns)
    V: torch.Tensor = None                 # (N, T) learned right singular vectors
    loss: list = field(default_factory=list)
    circuits: tuple = ()


def _ansatz(n, depth, dtype, seed):
    c = Circuit(n, dtype=dtype)
    ry_rz_layers(c, range(n), depth)
    return seeded_uniform_(c, seed)


def vqsvd(matrix, rank=None, depth: int = 20, steps: int = 100, lr: float = 0.02, weights=None,
          seed: int = 14, refine_steps: int = 0, dtype=torch.complex128) -> VQSVDResult:
    """Learn the top ``rank`` singular values/vectors of a square ``2**n × 2**n`` matrix.

    Both circuits are ``depth`` layers of RY, RZ on every wire and a CNOT ring (Paddle's); the
    default weights are ``3·rank, 3·(rank−1), …, 3``. Trained with Adam on the exact unitaries
    of the circuits (each is run on the identity batch: 2**n columns). ``refine_steps`` > 0
    continues with that many L-BFGS iterations (strong Wolfe line search), which resolves close
    singular values that plain gradient steps approach slowly."""
    depth = count(depth, "depth", "vqsvd")
    steps = count(steps, "steps", "vqsvd")
    refine_steps = count(refine_steps, "refine_steps", "vqsvd", minimum=0)
    m = torch.as_tensor(np.asarray(matrix) if not isinstance(matrix, torch.Tensor) else matrix)
    if m.dim() != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"vqsvd: the matrix must be square, got shape {tuple(m.shape)}")
    N = m.shape[0]
    n = int(round(math.log2(N))) if N > 0 else 0
    if N < 2 or 2 ** n != N:
        raise ValueError(f"vqsvd: matrix size {N} is not a power of two >= 2")
    if dtype not in (torch.complex64, torch.complex128):
        raise TypeError(f"vqsvd: dtype must be complex64 or complex128, got {dtype}")
    m = m.to(dtype)
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, numbers.Integral)):
        raise ValueError(f"vqsvd: rank must be an int in [1, {N}], got {rank!r}")
    T = N if rank is None else int(rank)
    if not 1 <= T <= N:
        raise ValueError(f"vqsvd: rank must be in [1, {N}], got {rank!r}")
    if weights is None:
        weights = torch.arange(3 * T, 0, -3, dtype=torch.float64)
    weights = torch.as_tensor(weights, dtype=torch.float64)
    if weights.shape != (T,):
        raise ValueError(f"vqsvd: weights must have {T} entries, got shape {tuple(weights.shape)}")
    if not (weights[:-1] > weights[1:]).all() or not (weights > 0).all():
        raise ValueError("vqsvd: weights must be positive and strictly decreasing")
    cu, cv = _ansatz(n, depth, dtype, seed), _ansatz(n, depth, dtype, seed + 1)
    q = weights.to(m.real.dtype)
    opt = torch.optim.Adam(list(cu.parameters()) + list(cv.parameters()), lr=lr)
    res = VQSVDResult(singular_values=None, circuits=(cu, cv))
    def objective():
        u, v = cu.unitary(), cv.unitary()
        return -(q * torch.diagonal(u.conj().T @ m @ v).real[:T]).sum()

    for _ in range(steps):
        loss = objective()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.loss.append(float(loss.detach()))
    if refine_steps:
        params = list(cu.parameters()) + list(cv.parameters())
        lbfgs = torch.optim.LBFGS(params, lr=1, max_iter=int(refine_steps), history_size=20,
                                  line_search_fn="strong_wolfe", tolerance_grad=1e-10, tolerance_change=1e-14)

        def closure():
            lbfgs.zero_grad()
            loss = objective()
            loss.backward()
            res.loss.append(float(loss.detach()))
            return loss
        lbfgs.step(closure)
    with torch.no_grad():
        u, v = cu.unitary(), cv.unitary()
        res.singular_values = torch.diagonal(u.conj().T @ m @ v).real[:T].clone()
        res.U, res.V = u[:, :T].clone(), v[:, :T].clone()
        res.exact = torch.linalg.svdvals(m).real[:T]
    return res
