"""ADAPT-VQE inside a training loop: when to append the next pool operator, and its checkpoint.

``VQETask(ansatz="adapt")`` starts at Hartree–Fock with no angle. Before an optimizer step, the
ansatz grows when the current operators are optimised (the last step changed the energy by less
than ``tol``) or have had ``steps_per_operator`` steps: the pool is screened
(:func:`tql.chem.pool_gradients`) and the operator of largest |∂E/∂θ| is appended with angle 0
(the energy is unchanged), or, when the pool gradient's norm is below ``grad_tol`` (or
``max_operators`` are in), ADAPT has converged and the run stops. The optimizer's state follows
(:func:`grow_optimizer_state`: per-angle moments padded, L-BFGS's curvature pairs dropped).

The chosen operators are pool indices (plain ints) and the pool follows from the task's
arguments, so a checkpoint rebuilds the grown circuit before its weights load.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from torchquantum_layers.chem.adapt import operator_pool, pool_gradients

__all__ = ["AdaptGrowth"]


class AdaptGrowth:
    def __init__(self, circuit, H, n_electrons: int, reference, pool: str, grad_tol: float,
                 steps_per_operator: int, tol: float, max_operators: Optional[int]):
        self.circuit, self.H = circuit, H
        self.pool = operator_pool(pool, circuit.n_wires, n_electrons, reference=reference)
        if not self.pool:
            raise ValueError(f"VQETask: the {pool!r} pool is empty for {n_electrons} electrons in "
                             f"{circuit.n_wires} spin orbitals")
        self.grad_tol, self.steps_per_operator, self.tol = grad_tol, steps_per_operator, tol
        self.max_operators = max_operators
        self.chosen: list = []            # pool indices, in the order appended
        self.grown_at: list = []          # the optimizer step before which each was appended
        self.gradient_norms: list = []    # ‖g‖ of every screening
        self.converged = False

    @property
    def labels(self) -> list:
        return [self.pool[i].label for i in self.chosen]

    def due(self, step: int, history: list) -> bool:
        """Whether to screen the pool before optimizer step ``step`` (``history[k]``: energy after k steps)."""
        if self.converged:
            return False
        if not self.chosen:
            return True
        since = step - self.grown_at[-1]
        if since >= self.steps_per_operator:
            return True
        return since >= 2 and len(history) >= 2 and abs(history[-1] - history[-2]) < self.tol

    @torch.no_grad()
    def screen(self) -> Optional[int]:
        """The pool index to append, or None once converged (``converged`` is then set)."""
        grads = pool_gradients(self.circuit, self.H, self.pool).abs().double().cpu()   # one transfer
        norm = float(grads.norm())
        self.gradient_norms.append(norm)
        full = self.max_operators is not None and len(self.chosen) >= self.max_operators
        if norm < self.grad_tol or full:
            self.converged = True
            return None
        return int(grads.argmax())

    def append(self, index: int, step: int) -> None:
        self.pool[index].append_to(self.circuit)
        self.chosen.append(int(index))
        self.grown_at.append(int(step))

    def state(self) -> dict:
        return {"chosen": list(self.chosen), "grown_at": list(self.grown_at),
                "gradient_norms": [float(v) for v in self.gradient_norms], "converged": bool(self.converged)}

    def load(self, state: dict) -> None:
        chosen = [int(i) for i in state.get("chosen", [])]
        if chosen[:len(self.chosen)] != self.chosen:
            raise ValueError(f"VQETask: the checkpoint's ADAPT operators {chosen} do not extend this task's "
                             f"{self.chosen}; load it into a fresh task (VQETask.load_from_checkpoint)")
        bad = [i for i in chosen if not 0 <= i < len(self.pool)]
        if bad:
            raise ValueError(f"VQETask: the checkpoint's ADAPT operator {bad[0]} is not in this task's pool of "
                             f"{len(self.pool)} (another pool or molecule?)")
        grown_at = [int(s) for s in state.get("grown_at", [])]
        if len(grown_at) != len(chosen):
            raise ValueError("VQETask: the checkpoint's ADAPT record is inconsistent (grown_at vs chosen)")
        for i, s in zip(chosen[len(self.chosen):], grown_at[len(self.chosen):]):
            self.append(i, s)
        self.grown_at = grown_at
        self.gradient_norms = [float(v) for v in state.get("gradient_norms", [])]
        self.converged = bool(state.get("converged", False))


def pad_weights(weights: torch.Tensor, size: int) -> torch.Tensor:
    """Angles of a smaller ADAPT ansatz as angles of the grown one: appended operators start at 0,
    so the padded angles prepare the same state."""
    if weights.shape[0] >= size:
        return weights
    return torch.cat([weights, weights.new_zeros(size - weights.shape[0])])


def grow_optimizer_state(optimizer, param: torch.Tensor) -> None:
    """After ``param`` grew: per-element state of the old angles (Adam's moments, SGD's momentum, …)
    is padded with zeros for the new ones, so the optimised angles keep their step sizes (fresh
    moments would move every angle by about lr at once); state of another shape (L-BFGS's
    curvature pairs) belongs to the old parameter space and is dropped."""
    state = optimizer.state.get(param)
    if state:
        old = None
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.dim() == 1:
                old = value.shape[0]
        elementwise = all(not isinstance(v, (list, tuple)) and (not isinstance(v, torch.Tensor) or v.dim() == 0
                                                                or (v.dim() == 1 and v.shape[0] == old))
                          for v in state.values())
        if old is not None and elementwise:
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.dim() == 1:
                    state[key] = pad_weights(value, param.shape[0])
        else:
            optimizer.state.clear()
    elif optimizer.state:
        optimizer.state.clear()               # L-BFGS keeps its state under its first parameter
    if hasattr(optimizer, "_numel_cache"):    # torch's L-BFGS caches the parameter count
        optimizer._numel_cache = None


def _finite_tol(value, name) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"VQETask: {name} must be a finite number >= 0, got {value!r}")
    return float(value)
