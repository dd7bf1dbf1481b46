"""Variational quantum linear solver (Bravo-Prieto, LaRose, Cerezo, Subasi, Cincio & Coles,
Quantum 7, 1188 (2023), arXiv:1909.05820; Paddle Quantum's VQLS tutorial).

Solve ``A x = b`` for ``|x⟩ ∝ A⁻¹|b⟩``: A is a linear combination of Pauli strings
``A = Σ_l c_l A_l`` (a :class:`~tql.Hamiltonian`; complex ``c_l``, i.e. a non-Hermitian A, are
allowed; a dense matrix is decomposed by :func:`pauli_decompose`), ``|b⟩ = U_b|0⟩`` and
``|x⟩ = V(α)|0⟩`` for a trainable ansatz V. With ``|φ⟩ = A|x⟩`` and ``|χ⟩ = U_b†|φ⟩`` the
paper's two costs are

* global ``C_G = 1 − |⟨b|φ⟩|² / ⟨φ|φ⟩``;
* local ``C_L = ⟨φ|U_b (I − (1/n) Σ_j |0_j⟩⟨0_j| ⊗ I_rest) U_b†|φ⟩ / ⟨φ|φ⟩
  = 1/2 − Σ_j ⟨χ|Z_j|χ⟩ / (2n ⟨φ|φ⟩)``,

both in [0, 1], zero exactly where ``A|x⟩ ∝ |b⟩`` and invariant under rescaling |x⟩ (so states
need not be normalised). They are computed exactly on the simulator without any 2^n × 2^n
matrix: φ by :func:`~tql.observables.apply_hamiltonian` (one pass per X mask of A), χ by running
``U_b``'s inverse circuit on φ, ⟨Z_j⟩ of every wire in one pass; differentiable by autograd and
batched over states. Where ``⟨φ|φ⟩`` is zero to rounding (|x⟩ in the kernel of a singular A)
both costs are defined as 1, the value of "no overlap with b", never NaN.

Conventions: wire 0 is the most significant bit of a basis index, as everywhere in the package.
"""
from __future__ import annotations

import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import torch

from .. import templates
from ..circuit import Circuit
from ..exact import ground_state
from ..measure import expval_z
from ..observables import Hamiltonian, PauliString, apply_hamiltonian, pauli_decompose
from ..optim import make_optimizer
from ._common import count, seeded_uniform_

__all__ = ["vqls", "vqls_cost", "VQLSResult", "pauli_decompose", "ising_linear_system", "default_ansatz", "COSTS"]

COSTS = ("local", "global")

# the classical reference solves the dense system: refused beyond this many qubits
CLASSICAL_MAX_WIRES = 12


# ------------------------------------------------------------------------------------------------
# problem description: A (a dense matrix goes through tql.observables.pauli_decompose)
def ising_linear_system(n_wires: int, J: float = 0.1, condition_number: float = 10.0):
    """The paper's Ising-inspired problem (its Sec. IV A): ``(A, b)`` with
    ``A = (1/ζ)(Σ_j X_j + J Σ_j Z_j Z_{j+1} + η I)`` (open chain) and ``b = H^{⊗n}|0⟩`` as a
    :class:`Circuit` (complex128); η and ζ put the largest eigenvalue of A at 1 and the smallest at
    ``1/condition_number`` (exact diagonalisation of the Ising part)."""
    what = "ising_linear_system"
    n = count(n_wires, "n_wires", what)
    if isinstance(J, bool) or not isinstance(J, numbers.Real) or not math.isfinite(J):
        raise ValueError(f"{what}: J must be a finite real number, got {J!r}")
    if isinstance(condition_number, bool) or not isinstance(condition_number, numbers.Real) \
            or not math.isfinite(condition_number) or condition_number <= 1:
        raise ValueError(f"{what}: condition_number must be a finite number > 1, got {condition_number!r}")
    ising = Hamiltonian([(1.0, f"X{j}") for j in range(n)] + [(float(J), f"Z{j} Z{j + 1}") for j in range(n - 1)],
                        n_wires=n)
    low = float(ground_state(ising, 1)[0][0])
    high = -float(ground_state(-1.0 * ising, 1)[0][0])
    kappa = float(condition_number)
    # (high + η)/ζ = 1 and (low + η)/ζ = 1/κ
    eta = (high - kappa * low) / (kappa - 1)
    zeta = high + eta
    A = Hamiltonian([(c / zeta, p) for c, p in ising.terms] + [(eta / zeta, PauliString("I"))], n_wires=n)
    b = Circuit(n, dtype=torch.complex128)
    for w in range(n):
        b.h(w)
    return A, b


def _as_operator(A, n: Optional[int], what: str) -> Hamiltonian:
    """A as a Hamiltonian (from a Hamiltonian, PauliString, string or dense matrix), checked non-empty."""
    if isinstance(A, PauliString):
        A = Hamiltonian(A)
    elif isinstance(A, str):
        A = Hamiltonian.from_string(A)
    elif isinstance(A, (torch.Tensor, np.ndarray)):
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"{what}: A as a matrix must be square (2**n, 2**n), got shape {tuple(A.shape)}")
        if n is not None and A.shape[0] != 2 ** n:
            raise ValueError(f"{what}: A is a {A.shape[0]} x {A.shape[1]} matrix but b has {n} qubits "
                             f"(needs {2 ** n} x {2 ** n})")
        A = pauli_decompose(A)
    elif not isinstance(A, Hamiltonian):
        raise TypeError(f"{what}: A must be a tql.Hamiltonian, a PauliString, a string or a square matrix, "
                        f"got {type(A).__name__}")
    if len(A) == 0:
        raise ValueError(f"{what}: A has no terms")
    merged = A.simplify()
    if len(merged) == 0 or all(c == 0 for c in merged.coeffs):
        raise ValueError(f"{what}: A is the zero operator (all its coefficients cancel)")
    for k, (c, _) in enumerate(A.terms):
        if not math.isfinite(abs(complex(c))):
            raise ValueError(f"{what}: coefficient {k} of A is not finite ({c!r})")
    return A


def _check_width(A: Hamiltonian, n: int, what: str) -> None:
    declared = A.declared_n_wires
    if declared is not None and declared != n:
        raise ValueError(f"{what}: A is declared on {declared} wires but b has {n} qubits")
    if A.n_wires > n:
        raise ValueError(f"{what}: A acts on wire {max(A.wires)} but b has only {n} qubits")


# ------------------------------------------------------------------------------------------------
# problem description: b
class _RightHandSide:
    """|b⟩ and the inverse of a unitary U_b with ``U_b|0⟩ = |b⟩`` (up to a phase).

    From a circuit: U_b is the circuit (a private detached copy: its angles are not trained).
    From a state vector: U_b is the Householder reflection ``R = I − 2ww†/‖w‖²`` with
    ``w = e^{iα}|0⟩ − |b⟩``, ``α = arg⟨0|b⟩``, which maps ``e^{iα}|0⟩`` to |b⟩; ``R† = R``, and
    the phase e^{iα} drops out of both costs. (The local cost depends on U_b, not only on |b⟩.)
    """

    def __init__(self, b, dtype, device, what: str):
        self.circuit_inverse = None
        self.reflection = None
        if isinstance(b, Circuit):
            if b.is_noisy:
                raise ValueError(f"{what}: b must be a unitary circuit; it has channels, measurements, resets "
                                 f"or a noise model")
            if b.n_inputs:
                raise ValueError(f"{what}: the circuit b reads {b.n_inputs} input column(s); U_b must be a fixed "
                                 f"circuit (bind its angles first)")
            ub = b.copy().to(device)
            ub = ub.double() if dtype == torch.complex128 else ub.float()
            ub.weights.requires_grad_(False)
            self.n = ub.n_wires
            with torch.no_grad():
                self.state = ub()[0]
            self.circuit_inverse = ub.inverse()
        else:
            vec = self._vector(b, what)
            self.n = vec.shape[0].bit_length() - 1
            self.state = vec.to(device=device, dtype=dtype)
            b0 = vec[0]
            alpha = torch.angle(b0) if abs(complex(b0)) > 0 else torch.zeros((), dtype=torch.float64)
            w = -vec.clone()
            w[0] += torch.exp(1j * alpha)
            w_norm2 = float((w.abs() ** 2).sum())
            # w = 0 where |b⟩ = e^{iα}|0⟩: U_b is that phase, which drops out; no reflection then
            if w_norm2 > 1e-24:
                self.reflection = ((w / math.sqrt(w_norm2)).to(device=device, dtype=dtype))

    @staticmethod
    def _vector(b, what: str) -> torch.Tensor:
        try:
            vec = b.detach() if isinstance(b, torch.Tensor) else torch.as_tensor(np.asarray(b))
        except (TypeError, ValueError):
            raise TypeError(f"{what}: b must be a tql.Circuit or a state vector, got {type(b).__name__}") from None
        if not (vec.dtype.is_complex or vec.dtype.is_floating_point or vec.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"{what}: b must be a tql.Circuit or a numeric state vector, got dtype {vec.dtype}")
        if vec.dim() == 2 and vec.shape[0] == 1:
            vec = vec[0]
        if vec.dim() != 1:
            raise ValueError(f"{what}: b as a state must have shape (2**n,) or (1, 2**n), got {tuple(vec.shape)}")
        N = vec.shape[0]
        if N < 2 or (1 << (N.bit_length() - 1)) != N:
            raise ValueError(f"{what}: b has length {N}, not a power of two >= 2")
        vec = vec.to("cpu", torch.complex128)
        if not bool(torch.isfinite(torch.view_as_real(vec)).all()):
            raise ValueError(f"{what}: b contains NaN or inf")
        norm = float(torch.linalg.vector_norm(vec))
        if norm == 0:
            raise ValueError(f"{what}: b is the zero vector")
        return vec / norm

    def inverse_apply(self, phi: torch.Tensor) -> torch.Tensor:
        """U_b†·φ for a batch ``(B, 2**n)`` (up to a global phase)."""
        if self.circuit_inverse is not None:
            return self.circuit_inverse(state=phi)
        if self.reflection is None:
            return phi
        w = self.reflection
        return phi - 2 * (phi @ w.conj())[:, None] * w[None, :]


# ------------------------------------------------------------------------------------------------
# costs
def _coefficient_norm(A: Hamiltonian) -> float:
    """Σ_l |c_l|, a bound on ‖A‖ (what rounding in A·ψ scales with)."""
    return float(sum(abs(complex(c)) for c in A.coeffs))


def _costs(A: Hamiltonian, rhs: _RightHandSide, psi: torch.Tensor, which=COSTS, a_norm=None) -> dict:
    """``{"local": (B,), "global": (B,)}`` (those in ``which``) and ``"phi"``, ``"norm2"`` for
    states ``psi`` ``(B, 2**n)``; ``a_norm``: :func:`_coefficient_norm` of A (computed if None)."""
    phi = apply_hamiltonian(psi, A)
    norm2 = torch.view_as_real(phi).square().sum((1, 2))
    # |φ| at the rounding level of the terms' sum means A|x⟩ = 0: the ratio would be noise (or 0/0)
    a_norm = _coefficient_norm(A) if a_norm is None else a_norm
    rounding = (4 * torch.finfo(norm2.dtype).eps * a_norm) ** 2
    degenerate = norm2.detach() <= torch.view_as_real(psi.detach()).square().sum((1, 2)) * rounding
    safe = torch.where(degenerate, 1.0, norm2)
    out = {"phi": phi, "norm2": norm2}
    if "global" in which:
        overlap = phi @ rhs.state.conj()                       # ⟨b|φ⟩
        out["global"] = torch.where(degenerate, 1.0, 1 - torch.view_as_real(overlap).square().sum(1) / safe)
    if "local" in which:
        chi = rhs.inverse_apply(phi)
        out["local"] = torch.where(degenerate, 1.0, 0.5 - expval_z(chi).sum(1) / (2 * rhs.n * safe))
    return out


def _cost_name(cost, what: str) -> str:
    if cost not in COSTS:
        raise ValueError(f"{what}: cost must be 'local' or 'global', got {cost!r}")
    return cost


def vqls_cost(A, b, state, cost: str = "local") -> torch.Tensor:
    """The VQLS cost of states |x⟩: ``(B,)`` real for ``state`` ``(B, 2**n)``, a scalar for
    ``(2**n,)``; differentiable in ``state``. ``cost``: ``"local"`` (C_L) or ``"global"`` (C_G),
    see the module docstring. ``A``: Hamiltonian / Pauli sum / dense matrix; ``b``: a circuit
    U_b or a state vector (normalised here). The state need not be normalised (both costs are
    scale invariant); its dtype and device set those of the computation."""
    what = "vqls_cost"
    cost = _cost_name(cost, what)
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"{what}: state must be a torch.Tensor, got {type(state).__name__}")
    if not state.is_complex():
        raise TypeError(f"{what}: state must be complex64 or complex128, got {state.dtype}")
    squeeze = state.dim() == 1
    psi = state[None] if squeeze else state
    if psi.dim() != 2:
        raise ValueError(f"{what}: state must have shape (2**n,) or (B, 2**n), got {tuple(state.shape)}")
    rhs = _RightHandSide(b, psi.dtype, psi.device, what)
    if psi.shape[1] != 2 ** rhs.n:
        raise ValueError(f"{what}: state has length {psi.shape[1]} but b has {rhs.n} qubits "
                         f"(length {2 ** rhs.n})")
    A = _as_operator(A, rhs.n, what)
    _check_width(A, rhs.n, what)
    value = _costs(A, rhs, psi, (cost,))[cost]
    return value[0] if squeeze else value


# ------------------------------------------------------------------------------------------------
# training
@dataclass
class VQLSResult:
    """``state``: the normalised solution |x⟩ ``(2**n,)``; ``solution``: ``scale · state``, the
    estimate of the un-normalised ``A⁻¹b`` (``scale = ⟨Ax|b⟩/⟨Ax|Ax⟩`` is the least-squares
    multiple, exact where ``A|x⟩ ∝ |b⟩``); ``history[k]``: the trained cost after k updates;
    ``fidelity = |⟨b|Ax⟩|²/‖Ax‖² = 1 − C_G``; ``residual = min_θ ‖A x/‖A x‖ − e^{iθ} b‖
    = √(2 − 2√fidelity)``. With ``classical=True``: ``classical_solution = A⁻¹b`` (dense solve),
    ``classical_fidelity = |⟨x_true|x⟩|²/‖x_true‖²`` and its value per step."""
    state: torch.Tensor
    weights: torch.Tensor
    cost: float
    local_cost: float
    global_cost: float
    fidelity: float
    residual: float
    scale: complex
    solution: torch.Tensor
    history: list = field(default_factory=list)
    n_steps: int = 0
    converged: bool = False
    wall_time: float = 0.0
    classical_solution: Optional[torch.Tensor] = None
    classical_fidelity: Optional[float] = None
    classical_fidelities: list = field(default_factory=list)
    circuit: Circuit = field(default=None, repr=False)


def _is_real_problem(A: Hamiltonian, rhs: _RightHandSide) -> bool:
    """True where A has a real matrix and |b⟩ real amplitudes, so A⁻¹b is real: a string's
    matrix is real iff it has an even number of Y factors (P = i^{|x∧z|} X^x Z^z)."""
    for c, p in A.terms:
        phase = complex(c) * (1j ** (bin(p._x & p._z).count("1") % 4))
        if abs(phase.imag) > 1e-14 * max(1.0, abs(phase)):
            return False
    return float(rhs.state.imag.abs().max()) <= 1e-6 if rhs.state.is_complex() else True


def default_ansatz(n_wires: int, depth: int, real: bool = True, dtype=torch.complex128) -> Circuit:
    """The paper's fixed-structure ansatz: ``depth`` layers of trainable RY on every wire and a
    chain of CZ, then a last RY layer (real amplitudes); ``real=False`` uses U3 rotations."""
    c = Circuit(n_wires, dtype=dtype)
    templates.hardware_efficient(c, n_layers=depth, rotations=("RY",) if real else ("U3",), entangler="CZ",
                                 kind="real" if real else "complex")
    return c


def _classical(A: Hamiltonian, rhs: _RightHandSide, what: str) -> torch.Tensor:
    n = rhs.n
    if n > CLASSICAL_MAX_WIRES:
        raise ValueError(f"{what}: classical=True solves the dense {2 ** n} x {2 ** n} system; the limit is "
                         f"{CLASSICAL_MAX_WIRES} qubits")
    m = A.to_dense(n, dtype=torch.complex128)
    s = torch.linalg.svdvals(m)
    if float(s[-1]) <= 1e-12 * float(s[0]):
        raise ValueError(f"{what}: A is singular (smallest singular value {float(s[-1]):.3g}, largest "
                         f"{float(s[0]):.3g}): there is no unique A⁻¹b to compare with; pass classical=False")
    return torch.linalg.solve(m, rhs.state.detach().to("cpu", torch.complex128))


def vqls(A, b, ansatz: Optional[Circuit] = None, cost: str = "local", steps: int = 100,
         optimizer="lbfgs", lr: Optional[float] = None, seed: Optional[int] = 0, depth: Optional[int] = None,
         tol: Optional[float] = None, classical: bool = False, dtype=None, device=None,
         callback: Optional[Callable] = None) -> VQLSResult:
    """Train V(α) so that ``A V(α)|0⟩ ∝ |b⟩``; returns a :class:`VQLSResult`.

    ``A``: a :class:`~tql.Hamiltonian` (any complex coefficients), a Pauli string or string, or
    a dense ``(2**n, 2**n)`` matrix (decomposed into Pauli strings). ``b``: a :class:`Circuit`
    U_b (``|b⟩ = U_b|0⟩``) or a state vector (normalised here; see :class:`_RightHandSide` for
    the U_b it implies). ``ansatz``: a Circuit with trainable weights and no input features,
    trained in place; default :func:`default_ansatz` with ``depth`` layers (default n), real RY
    where A and b are real, else U3. ``cost``: ``"local"`` or ``"global"``. ``optimizer``/``lr``:
    as :func:`tql.optim.make_optimizer` (default L-BFGS with a strong-Wolfe line search, lr 1).
    ``seed``: re-draws the ansatz's angles uniformly in [0, 2π) (None keeps the given ones).
    ``tol``: stop once the cost is below it. ``dtype``: complex64/complex128 (default: the
    ansatz's, complex128 for the default ansatz); ``device``: where the default ansatz runs
    (CPU by default; a given ansatz runs where it is). ``callback(step, cost, state)`` after every
    evaluation of the cost at a new point; returning True stops."""
    what = "vqls"
    cost = _cost_name(cost, what)
    steps = count(steps, "steps", what, minimum=0)
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol >= 0):
        raise ValueError(f"{what}: tol must be a number >= 0 or None, got {tol!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise TypeError(f"{what}: seed must be an int or None, got {seed!r}")
    if callback is not None and not callable(callback):
        raise TypeError(f"{what}: callback must be callable, got {type(callback).__name__}")
    if ansatz is not None:
        if not isinstance(ansatz, Circuit):
            raise TypeError(f"{what}: ansatz must be a tql.Circuit, got {type(ansatz).__name__}")
        if ansatz.num_parameters == 0:
            raise ValueError(f"{what}: the ansatz has no trainable weights")
        if ansatz.n_inputs:
            raise ValueError(f"{what}: the ansatz reads {ansatz.n_inputs} input column(s); V(α) takes no input")
        if ansatz.is_noisy:
            raise ValueError(f"{what}: the ansatz has channels, measurements, resets or a noise model; VQLS "
                             f"trains a pure state")
    if dtype is None:
        dtype = ansatz.dtype if ansatz is not None else torch.complex128
    if dtype not in (torch.complex64, torch.complex128):
        raise TypeError(f"{what}: dtype must be complex64 or complex128, got {dtype}")
    if ansatz is not None:
        if device is not None and torch.device(device).type != ansatz.device.type:
            raise ValueError(f"{what}: device={device!r} but the ansatz is on {ansatz.device}; move the ansatz")
        device = ansatz.device
    device = torch.device("cpu" if device is None else device)
    rhs = _RightHandSide(b, dtype, device, what)
    n = rhs.n
    A = _as_operator(A, n, what)
    _check_width(A, n, what)
    if ansatz is None:
        depth = count(n if depth is None else depth, "depth", what)
        ansatz = default_ansatz(n, depth, real=_is_real_problem(A, rhs), dtype=dtype).to(device)
    elif ansatz.n_wires != n:
        raise ValueError(f"{what}: the ansatz has {ansatz.n_wires} wires but b has {n} qubits")
    if ansatz.dtype != dtype:
        ansatz = ansatz.double() if dtype == torch.complex128 else ansatz.float()
    if seed is not None:
        seeded_uniform_(ansatz, int(seed))
    x_true = _classical(A, rhs, what) if classical else None
    x_true_unit = None if x_true is None else (x_true / torch.linalg.vector_norm(x_true)).to(device, dtype)

    a_norm = _coefficient_norm(A)
    opt = make_optimizer(optimizer, [ansatz.weights], lr, circuit=ansatz)
    result_history, classical_history = [], []
    last = {}

    def closure():
        opt.zero_grad()
        psi = ansatz()
        value = _costs(A, rhs, psi, (cost,), a_norm)[cost].sum()
        value.backward()
        last["psi"] = psi.detach()
        return value

    start = time.perf_counter()
    converged, n_updates, stopped = False, 0, False
    while True:
        loss = closure()
        value = float(loss.detach())
        result_history.append(value)
        psi = last["psi"][0]
        if x_true_unit is not None:
            classical_history.append(_fidelity_with(psi, x_true_unit))
        if callback is not None and callback(n_updates, value, psi):
            stopped = True
        if tol is not None and value < tol:
            converged = True
        if converged or stopped or n_updates == steps:
            break
        fresh = [loss]

        def step_closure():                  # the optimizer's first evaluation is the one just made
            return fresh.pop() if fresh else closure()

        opt.step(step_closure)
        n_updates += 1
    wall = time.perf_counter() - start

    with torch.no_grad():
        psi = ansatz()
        both = _costs(A, rhs, psi, COSTS, a_norm)
        x = psi[0] / torch.linalg.vector_norm(psi[0])
        phi = both["phi"][0] / torch.linalg.vector_norm(psi[0])
        norm2 = float(phi.abs().square().sum())
        overlap = complex(torch.vdot(phi, rhs.state))          # ⟨Ax|b⟩
        scale = overlap / norm2 if norm2 > 0 else complex("nan")
        fidelity = 1.0 - float(both["global"][0])
    return VQLSResult(
        state=x, weights=ansatz.weights.detach().clone(), cost=float(both[cost][0]),
        local_cost=float(both["local"][0]), global_cost=float(both["global"][0]), fidelity=fidelity,
        residual=math.sqrt(max(0.0, 2.0 - 2.0 * math.sqrt(max(0.0, fidelity)))), scale=scale,
        solution=x * scale, history=result_history, n_steps=n_updates, converged=converged, wall_time=wall,
        classical_solution=x_true,
        classical_fidelity=None if x_true_unit is None else _fidelity_with(x, x_true_unit),
        classical_fidelities=classical_history, circuit=ansatz)


def _fidelity_with(psi: torch.Tensor, unit: torch.Tensor) -> float:
    """|⟨unit|ψ⟩|² / ‖ψ‖²."""
    return float(torch.vdot(unit.to(psi.device), psi).abs().square() / psi.abs().square().sum())
