"""Quantum autoencoder (Romero, Olson & Aspuru-Guzik, QST 2017; Paddle Quantum's tutorial).

An encoder circuit E compresses ρ_in into the "latent" wires; the "trash" wires are measured and
discarded (reset to |0⟩) and the decoder E† restores ρ_out = E† (|0⟩⟨0|_trash ⊗ Tr_trash(E ρ E†)) E.
Training maximises the trash population of |0…0⟩, whose optimum keeps the 2^latent largest
eigenvalues of ρ_in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .. import mixed, qinfo
from ..circuit import Circuit
from ._common import count, ry_rz_layers, seeded_uniform_
from .vqsd import spectrum_state

__all__ = ["quantum_autoencoder", "AutoencoderResult", "autoencode"]


@dataclass
class AutoencoderResult:
    fidelity: float                 # squared Uhlmann fidelity F(ρ_in, ρ_out)
    loss: list = field(default_factory=list)
    rho_out: torch.Tensor = None
    encoder: Circuit = None


def autoencode(encoder: Circuit, rho_in: torch.Tensor, trash):
    """(loss 1 − ⟨0|ρ_trash|0⟩ (B,), ρ_out (B, N, N)) for an encoder circuit on density matrices."""
    enc = mixed.run(encoder, state=rho_in)
    loss = 1 - mixed.probabilities(enc, trash)[:, 0]
    rho_out = mixed.run(encoder.inverse(), state=mixed.reset(enc, trash))
    return loss, rho_out


def quantum_autoencoder(rho_in=None, n_trash: int = 1, depth: int = 6, steps: int = 100, lr: float = 0.2,
                        seed: int = 14, state_seed: int = 1) -> AutoencoderResult:
    """Train the encoder (``depth`` × RY, RZ on every wire + CNOT ring, as Paddle's) on
    ``rho_in`` (default: 3 qubits with spectrum 0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0 in a Haar-random
    basis from ``state_seed``); the trash is wires ``0..n_trash-1``."""
    depth = count(depth, "depth", "quantum_autoencoder")
    steps = count(steps, "steps", "quantum_autoencoder")
    if rho_in is None:
        rho_in = spectrum_state([0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0], seed=state_seed)
    rho, n = mixed.as_density(rho_in, "quantum_autoencoder", square_is_matrix=True)
    if rho.shape[0] != 1:
        raise ValueError(f"quantum_autoencoder: give one density matrix, got a batch of {rho.shape[0]}")
    if isinstance(n_trash, bool) or not isinstance(n_trash, int) or not 1 <= n_trash < n:
        raise ValueError(f"quantum_autoencoder: n_trash must be in [1, {n - 1}], got {n_trash!r}")
    trash = tuple(range(n_trash))
    c = Circuit(n, dtype=rho.dtype)
    ry_rz_layers(c, range(n), depth)
    seeded_uniform_(c, seed)
    opt = torch.optim.Adam(c.parameters(), lr=lr)
    res = AutoencoderResult(fidelity=0.0, encoder=c)
    for _ in range(steps):
        enc = mixed.run(c, state=rho)
        loss = (1 - mixed.probabilities(enc, trash)[:, 0]).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.loss.append(float(loss.detach()))
    with torch.no_grad():
        _, rho_out = autoencode(c, rho, trash)
    res.rho_out = rho_out[0]
    res.fidelity = float(qinfo.fidelity(rho, rho_out))
    return res
