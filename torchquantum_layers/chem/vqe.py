"""Small VQE drivers: ``vqe`` (ground state) and ``ssvqe`` (lowest k states, subspace search).

They are plain PyTorch loops over :func:`torchquantum_layers.grad.circuit_expval`, so every
``diff_method`` works; a Lightning task can reuse :func:`energy` and :func:`ssvqe_loss`.
"""
from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..circuit import Circuit
from ..grad import circuit_expval
from ..optim import make_optimizer, needs_closure_without_backward

__all__ = ["energy", "vqe", "VQEResult", "ssvqe", "ssvqe_loss", "SSVQEResult", "make_optimizer",
           "CHEMICAL_ACCURACY", "check_givens_hamiltonian", "number_commutator_norm"]

CHEMICAL_ACCURACY = 1.6e-3
"""1.6 mHa (≈ 1 kcal/mol)."""


def energy(circuit: Circuit, H, state=None, diff_method: str = "backprop", shots: Optional[int] = None,
           generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """⟨H⟩ after ``circuit`` (a 0-d tensor; ``(B,)`` when ``state`` is a batch of B > 1 states);
    with ``shots``, its estimate from that many samples per group of commuting terms."""
    e = circuit_expval(circuit, H, state=state, diff_method=diff_method, shots=shots, generator=generator)
    return e[0] if e.dim() == 1 and e.shape[0] == 1 else e


GIVENS_GATES = ("SINGLEEXCITATION", "DOUBLEEXCITATION")


def number_commutator_norm(H) -> float:
    """Largest coefficient of ``[H, Σ_j Z_j] / 2`` (0 when ``H`` conserves the Jordan–Wigner particle
    number ``N = Σ_j (1 − Z_j)/2``), from the Pauli masks alone: ``P(x, z)`` anticommutes with
    ``Z_j`` for j in x, and then ``P(x, z) Z_j = ±i P(x, z ⊕ e_j)`` (+i where P has Y on j, −i for X)."""
    terms = [(complex(c), int(p.x_mask), int(p.z_mask)) for c, p in H.terms]
    if not terms:
        return 0.0
    c = np.array([t[0] for t in terms], dtype=np.complex128)
    x = np.array([t[1] for t in terms], dtype=np.int64)
    z = np.array([t[2] for t in terms], dtype=np.int64)
    keys, vals = [], []
    for j in range(int(H.n_wires)):
        sel = ((x >> j) & 1) == 1
        if not sel.any():
            continue
        zj = (z[sel] >> j) & 1
        keys.append(np.stack([x[sel], z[sel] ^ (1 << j)], axis=1))
        vals.append(c[sel] * np.where(zj == 1, 1j, -1j))
    if not keys:
        return 0.0
    uniq, inv = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
    v = np.concatenate(vals)
    inv = inv.reshape(-1)
    acc = np.bincount(inv, weights=v.real, minlength=len(uniq)) + 1j * np.bincount(inv, weights=v.imag,
                                                                                    minlength=len(uniq))
    return float(np.abs(acc).max())


def check_givens_hamiltonian(circuit: Circuit, H, what: str = "vqe") -> None:
    """Refuse a circuit of Givens excitations (``uccsd``, ``k_upccgsd``) with a Hamiltonian that does
    not conserve the number of 1s: the excitations are particle-number (and HF-reference) moves only
    under Jordan–Wigner, so on a parity- or Bravyi–Kitaev-mapped molecule they leave its sector."""
    if not hasattr(H, "terms") or not hasattr(H, "n_wires"):
        return
    if not any(op.gate.name in GIVENS_GATES for op in circuit.ops):
        return
    scale = max([1.0] + [abs(complex(c)) for c, _ in H.terms])
    residue = number_commutator_norm(H)
    if residue > 1e-9 * scale:
        raise ValueError(
            f"{what}: the circuit's Givens excitations (SINGLEEXCITATION / DOUBLEEXCITATION, as in uccsd and "
            f"k_upccgsd) conserve the number of 1s, i.e. the particle number under Jordan–Wigner, but this "
            f"Hamiltonian does not commute with the Jordan–Wigner number operator (|[H, N]| term up to "
            f"{residue:.3g}): it looks mapped with parity or Bravyi–Kitaev, where these gates are no "
            f"excitations and the ansatz leaves the molecule's sector. Build H with mapping='jordan_wigner' "
            f"(the default), or use hardware_efficient for other mappings")


def _finite_real(v, name, what, minimum=None):
    if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_complex():
        v = float(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{what}: {name} must be a real number, got {v!r}")
    v = float(v)
    if not math.isfinite(v) or (minimum is not None and v < minimum):
        need = "a finite number" + ("" if minimum is None else f" >= {minimum:g}")
        raise ValueError(f"{what}: {name} must be {need}, got {v!r}")
    return v


def _gradient_free(optimizer) -> bool:
    return (isinstance(optimizer, str) and optimizer.lower() == "spsa") or needs_closure_without_backward(optimizer)


def _run(loss_fn, circuit, optimizer, lr, steps, stop, callback, circuit_inputs):
    """Optimise; ``history[k]`` is the loss after k updates. Stops before an update once ``stop``."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    opt = make_optimizer(optimizer, [circuit.weights], lr, circuit=circuit, circuit_inputs=circuit_inputs)
    gradient_free = needs_closure_without_backward(opt)
    history = []
    start = time.perf_counter()
    converged = False
    last = {}

    def closure():
        opt.zero_grad()
        with torch.set_grad_enabled(not gradient_free):
            loss, extra = loss_fn()
        if not gradient_free:
            loss.backward()
        last["loss"], last["extra"] = loss.detach(), extra
        return loss

    n_updates = 0
    while True:
        loss = closure()                     # value and gradient at the current angles
        value = float(loss.detach())
        history.append(value)
        if callback is not None:
            callback(n_updates, value, last["extra"])
        if stop is not None and stop(value, last["extra"]):
            converged = True
            break
        if n_updates == steps:
            break
        fresh = [loss]

        def step_closure():                  # the optimizer's first call reuses this evaluation
            if fresh:
                return fresh.pop()
            return closure()

        # SPSA evaluates the loss at perturbed angles only: nothing to reuse, nothing to differentiate
        opt.step((lambda: loss_fn()[0]) if gradient_free else step_closure)
        n_updates += 1
    return history, n_updates, time.perf_counter() - start, converged, last


@dataclass
class VQEResult:
    """``energy``: ⟨H⟩ at the final angles ``weights``; ``history[k]``: the energy after k optimizer
    steps (``n_steps`` of them); ``converged``: the target was reached (always False without one)."""
    energy: float
    weights: torch.Tensor
    history: list
    n_steps: int
    wall_time: float
    converged: bool
    circuit: Circuit = field(repr=False)


def vqe(H, circuit: Circuit, steps: int = 100, optimizer="adam", lr: Optional[float] = None,
        diff_method: str = "backprop", target: Optional[float] = None, atol: float = CHEMICAL_ACCURACY,
        state=None, callback: Optional[Callable] = None, shots: Optional[int] = None,
        generator: Optional[torch.Generator] = None) -> VQEResult:
    """Minimise ⟨H⟩ over ``circuit.weights`` (in place) for at most ``steps`` optimizer steps.

    With ``target`` (e.g. the FCI energy) it stops as soon as ``|E − target| <= atol`` (default:
    chemical accuracy, 1.6 mHa; both finite, ``atol >= 0``). A circuit of Givens excitations
    (``uccsd``, ``k_upccgsd``) needs a Jordan–Wigner Hamiltonian (one that conserves the number of
    1s): with a parity or Bravyi–Kitaev one it raises ValueError. ``callback(k, energy, None)`` sees the energy after k steps.
    ``optimizer``: a name of :func:`tql.optim.make_optimizer` (``"adam"``, ``"lbfgs"``, ``"qng"``:
    natural gradient with this circuit's metric, ``"spsa"``: two energies per step, no gradient,
    ...), an optimizer class or instance, or a callable ``params -> optimizer``.
    ``shots``: every energy is estimated from samples (``generator`` seeds them), as on hardware;
    the gradient then needs ``diff_method="parameter-shift"`` (shifted estimates) or a
    gradient-free optimizer (``"spsa"``). ``history`` and ``energy`` are those estimates.
    """
    if not isinstance(circuit, Circuit):
        raise TypeError(f"vqe: circuit must be a tql.Circuit, got {type(circuit).__name__}")
    if circuit.num_parameters == 0:
        raise ValueError("vqe: the circuit has no trainable angles")

    if isinstance(state, torch.Tensor) and state.dim() == 2 and state.shape[0] != 1:
        raise ValueError(f"vqe: state must be one input state (shape (1, 2**n) or (2**n,)), got a batch of shape "
                         f"{tuple(state.shape)}; to target several states at once use tql.chem.ssvqe")
    if target is not None:
        target = _finite_real(target, "target", "vqe")
    atol = _finite_real(atol, "atol", "vqe", minimum=0)
    check_givens_hamiltonian(circuit, H, "vqe")
    if shots is not None and diff_method != "parameter-shift" and not _gradient_free(optimizer):
        raise ValueError(f"vqe: with shots the energy estimate has no {diff_method!r} gradient; use "
                         f"diff_method='parameter-shift' or optimizer='spsa'")

    def loss_fn():
        return energy(circuit, H, state, diff_method, shots, generator), None

    stop = None if target is None else (lambda e, _: abs(e - target) <= atol)
    history, n, wall, converged, _ = _run(loss_fn, circuit, optimizer, lr, steps, stop, callback,
                                          {"state": state})
    return VQEResult(history[-1], circuit.weights.detach().clone(), history, n, wall, converged, circuit)


# ------------------------------------------------------------------------------------------------
# subspace-search VQE
def _basis_states(states, k, n, dtype, device):
    if states is None:
        idx = torch.arange(k, device=device)
    elif isinstance(states, torch.Tensor) and states.dim() == 2 and states.shape[1] == 2 ** n:
        if states.shape[0] != k:
            raise ValueError(f"ssvqe: {states.shape[0]} input states for k={k}")
        out = states.to(dtype=dtype, device=device)
        gram = (out.conj() @ out.T).to(torch.complex128)
        tol = 1e-5 if dtype == torch.complex64 else 1e-10
        dev = float((gram - torch.eye(k, dtype=gram.dtype, device=gram.device)).abs().max())
        if not dev <= tol:
            raise ValueError(f"ssvqe: the {k} input states must be orthonormal (rows of a (k, 2**n) tensor); "
                             f"their overlaps deviate from the identity by {dev:.3g}")
        return out
    else:
        vals = []
        for s in states:
            if isinstance(s, str):
                if len(s) != n or any(ch not in "01" for ch in s):
                    raise ValueError(f"ssvqe: input bit string {s!r} must be {n} characters 0/1")
                s = int(s, 2)
            vals.append(int(s))
        if len(vals) != k or len(set(vals)) != k or min(vals) < 0 or max(vals) >= 2 ** n:
            raise ValueError(f"ssvqe: need {k} distinct basis indices in 0..{2 ** n - 1}, got {list(states)}")
        idx = torch.tensor(vals, device=device)
    out = torch.zeros(k, 2 ** n, dtype=dtype, device=device)
    out[torch.arange(k, device=device), idx] = 1
    return out


def ssvqe_loss(circuit: Circuit, H, states: torch.Tensor, weights: torch.Tensor, diff_method: str = "backprop"):
    """``(Σ_i w_i ⟨φ_i|U†HU|φ_i⟩, energies (k,))`` for orthonormal inputs φ_i (rows of ``states``)."""
    e = circuit_expval(circuit, H, state=states, diff_method=diff_method)
    return (weights.to(e) * e).sum(), e


@dataclass
class SSVQEResult:
    """``energies[i]``: ⟨H⟩ of the i-th input state through the trained circuit (ascending when the
    weights decrease and the search converged); ``history``: the weighted loss per step."""
    energies: torch.Tensor
    weights: torch.Tensor
    history: list
    n_steps: int
    wall_time: float
    circuit: Circuit = field(repr=False)


def ssvqe(H, circuit: Circuit, k: int, states=None, weights: Optional[Sequence[float]] = None, steps: int = 200,
          optimizer="lbfgs", lr: Optional[float] = None, diff_method: str = "backprop", tol: float = 1e-12,
          callback: Optional[Callable] = None) -> SSVQEResult:
    """Subspace-search VQE (Nakanishi, Mitarai & Fujii 2019): the lowest ``k`` levels of ``H``.

    ``k`` orthogonal input states φ_i (default: basis states |0⟩, |1⟩, …, |k−1⟩; or bit strings,
    indices, or a (k, 2**n) tensor) go through the same circuit U; minimising
    ``Σ_i w_i ⟨φ_i|U†HU|φ_i⟩`` with strictly decreasing weights (default ``k, k−1, …, 1``) sends
    φ_i to the i-th eigenstate, so ``energies`` approximates the k lowest eigenvalues (the
    circuit must be expressive enough to map the inputs onto them). Stops early when the loss
    changes by less than ``tol`` between steps.
    """
    if not isinstance(circuit, Circuit):
        raise TypeError(f"ssvqe: circuit must be a tql.Circuit, got {type(circuit).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 2 ** circuit.n_wires:
        raise ValueError(f"ssvqe: k must be an int in 1..{2 ** circuit.n_wires}, got {k!r}")
    real = torch.float64 if circuit.dtype == torch.complex128 else torch.float32
    if weights is None:
        w = torch.arange(k, 0, -1, dtype=real, device=circuit.device)
    else:
        w = torch.as_tensor(weights, dtype=real, device=circuit.device)
        if w.shape != (k,):
            raise ValueError(f"ssvqe: need {k} weights, got shape {tuple(w.shape)}")
        if k > 1 and not bool((w[:-1] > w[1:]).all()):
            raise ValueError(f"ssvqe: weights must decrease strictly (the first input state targets the ground "
                             f"state), got {w.tolist()}")
    phi = _basis_states(states, k, circuit.n_wires, circuit.dtype, circuit.device)
    check_givens_hamiltonian(circuit, H, "ssvqe")

    def loss_fn():
        return ssvqe_loss(circuit, H, phi, w, diff_method)

    prev = {"v": math.inf}

    def stop(value, _):
        done = abs(prev["v"] - value) < tol
        prev["v"] = value
        return done

    history, n, wall, _, last = _run(loss_fn, circuit, optimizer, lr, steps, stop, callback,
                                     {"state": phi, "batch_weights": w})
    return SSVQEResult(last["extra"].detach(), circuit.weights.detach().clone(), history, n, wall, circuit)
