"""Quantum generative adversarial network (Dallaire-Demers & Killoran, PRA 2018; Paddle Quantum's
tutorial), learning a pure state.

The generator G prepares |x⟩ = G|0…0⟩ on the data wires. The discriminator D acts on the data
wires plus one output wire (in |0⟩) and reads ``P = (⟨Z_out⟩ + 1) / 2``, its belief that the
input is the target. Alternating training: the discriminator minimises ``P(gen) − P(target)``,
the generator minimises ``−P(gen)``. At the equilibrium D cannot tell them apart and |x⟩ is the
target state.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .. import qinfo
from ..circuit import Circuit
from ..kernels.state import n_wires_of
from ..measure import expval_z
from ._common import cnot_ring, count, seeded_uniform_

__all__ = ["QGAN", "QGANResult", "train_qgan", "default_target"]


def default_target(dtype=torch.complex128) -> torch.Tensor:
    """An entangled two-qubit pure state: RY(0.9π) RZ(0.2π) on wire 0, CNOT, RY(0.3π) on wire 1."""
    import math
    c = Circuit(2, dtype=dtype)
    c.ry(0, 0.9 * math.pi).rz(0, 0.2 * math.pi).cnot(0, 1).ry(1, 0.3 * math.pi)
    with torch.no_grad():
        return c()


class QGAN(nn.Module):
    """Generator and discriminator circuits for a target state ``(1, 2**n)``."""

    def __init__(self, target: torch.Tensor, gen_layers: int = 1, disc_layers: int = 2, seed: int = 7):
        super().__init__()
        gen_layers = count(gen_layers, "gen_layers", "QGAN", minimum=0)
        disc_layers = count(disc_layers, "disc_layers", "QGAN", minimum=0)
        if target.dim() == 1:
            target = target.unsqueeze(0)
        n = n_wires_of(target)
        if target.shape[0] != 1:
            raise ValueError(f"QGAN: give one target state, got a batch of {target.shape[0]}")
        norm = float(target.abs().square().sum())
        if abs(norm - 1) > 1e-4:
            raise ValueError(f"QGAN: the target state is not normalised (norm² = {norm:.6g})")
        self.n = n
        self.register_buffer("target", target.detach().clone())
        dtype = target.dtype
        g = Circuit(n, dtype=dtype)
        for _ in range(gen_layers):
            for w in range(n):
                g.u3(w, trainable=True)
            cnot_ring(g, range(n))
        for w in range(n):
            g.u3(w, trainable=True)
        d = Circuit(n + 1, dtype=dtype)
        for _ in range(disc_layers):
            for w in range(n + 1):
                d.u3(w, trainable=True)
            cnot_ring(d, range(n + 1))
        for w in range(n + 1):
            d.u3(w, trainable=True)
        self.generator = seeded_uniform_(g, seed, 0.0, torch.pi)
        self.discriminator = seeded_uniform_(d, seed + 1, 0.0, torch.pi)

    def generated(self) -> torch.Tensor:
        return self.generator()

    def p_target(self, psi: torch.Tensor) -> torch.Tensor:
        """Probability ``(⟨Z_out⟩ + 1) / 2`` that the discriminator calls ``psi`` the target."""
        ext = torch.stack([psi, torch.zeros_like(psi)], dim=-1).reshape(psi.shape[0], -1)   # ⊗ |0⟩ on wire n
        out = self.discriminator(state=ext)
        return (expval_z(out, [self.n])[:, 0] + 1) / 2

    def discriminator_loss(self) -> torch.Tensor:
        """``P(generated) − P(target)`` (both states in one batch)."""
        p = self.p_target(torch.cat([self.generated().detach(), self.target]))
        return p[0] - p[1]

    def generator_loss(self) -> torch.Tensor:
        return -self.p_target(self.generated()).sum()

    def fidelity(self) -> float:
        with torch.no_grad():
            return float(qinfo.fidelity(self.generated(), self.target))


@dataclass
class QGANResult:
    fidelity: float
    fidelities: list = field(default_factory=list)     # after each round
    disc_loss: list = field(default_factory=list)
    gen_loss: list = field(default_factory=list)
    model: QGAN = None


def train_qgan(target=None, rounds: int = 40, disc_steps: int = 15, gen_steps: int = 3, disc_lr: float = 0.05,
               gen_lr: float = 0.08, gen_decay: float = 0.9, optimizer: str = "adam", gen_layers: int = 1,
               disc_layers: int = 2, seed: int = 7) -> QGANResult:
    """Alternate ``disc_steps`` discriminator steps and ``gen_steps`` generator steps for
    ``rounds`` rounds; the generator's learning rate shrinks by ``gen_decay`` each round.

    Why the schedule: with a (near) optimal discriminator, the generator's gradient keeps a
    magnitude of order 1 however close it is to the target (the optimal measurement is a
    projector at 45° from the two states), so a fixed step size makes it circle the target at
    a distance of the step size. A well trained discriminator (several steps per generator
    step) and a decaying generator step make it converge. Paddle Quantum's schedule is
    ``optimizer="sgd", rounds=15, disc_steps=20, gen_steps=50, disc_lr=gen_lr=0.1, gen_decay=1``.
    """
    rounds = count(rounds, "rounds", "train_qgan")
    disc_steps = count(disc_steps, "disc_steps", "train_qgan")
    gen_steps = count(gen_steps, "gen_steps", "train_qgan")
    if target is None:
        target = default_target()
    if optimizer not in ("sgd", "adam"):
        raise ValueError(f"train_qgan: optimizer must be 'sgd' or 'adam', got {optimizer!r}")
    model = QGAN(target, gen_layers, disc_layers, seed)
    make = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    opt_d = make(model.discriminator.parameters(), lr=disc_lr)
    opt_g = make(model.generator.parameters(), lr=gen_lr)
    res = QGANResult(fidelity=0.0, model=model)
    for _ in range(rounds):
        for _ in range(disc_steps):
            loss = model.discriminator_loss()
            opt_d.zero_grad()
            loss.backward()
            opt_d.step()
        res.disc_loss.append(float(loss.detach()))
        for _ in range(gen_steps):
            loss = model.generator_loss()
            opt_g.zero_grad()
            loss.backward()
            opt_g.step()
        res.gen_loss.append(float(loss.detach()))
        res.fidelities.append(model.fidelity())
        for group in opt_g.param_groups:
            group["lr"] *= gen_decay
    res.fidelity = model.fidelity()
    return res
