"""ADAPT-VQE: grow the ansatz one operator at a time (Grimsley, Economou, Barnes, Mayhall,
Nat. Commun. 10, 3007 (2019); qubit-ADAPT: Tang et al., PRX Quantum 2, 020310 (2021)).

Start from the Hartree–Fock state; each iteration measures, for every operator A_k of a pool, the
energy gradient of appending exp(θ A_k) at θ = 0,

    g_k = ∂E/∂θ |₀ = ⟨ψ|[H, A_k]|ψ⟩ = 2 Im ⟨Hψ | G_k ψ⟩      (gate exp(−iθ G_k), A_k = −i G_k),

appends the operator with the largest |g_k| (its angle starts at 0, so the energy is unchanged),
and re-optimises every angle. It stops when the pool gradient's norm ‖g‖ falls below
``grad_tol`` (the paper's criterion), when an iteration lowers the energy by less than
``energy_tol``, or at ``max_iterations``. One H·ψ serves the whole pool, and operators on the same
wires share one 2^k × 2^k transition matrix of (Hψ, ψ), from which each g_k is a k-wire sum.

Pools (:func:`operator_pool`):

* ``"singles_doubles"`` — the spin-conserving excitations of the HF reference (UCCSD's list) as
  :data:`SINGLEEXCITATION` / :data:`DOUBLEEXCITATION` Givens rotations;
* ``"generalized"`` — every spin-conserving single ``p < q`` and double ``{p, q} → {r, s}`` over all
  spin orbitals (the original fermionic ADAPT pool; it also reaches open shells and multireference states);
* ``"qubit"`` — qubit-ADAPT: the Pauli strings of the Jordan–Wigner excitation generators without their Z
  strings, i.e. every string on an excitation's qubits with an odd number of Y (2 per single, 8 per
  double), as rotations exp(−iθ/2 · P);
* or any list of :class:`PoolOperator` (``PoolOperator.gate(name, wires)``, ``PoolOperator.pauli(text)``).

Excitation pools conserve the particle number only under Jordan–Wigner, as :func:`uccsd` does; like
:func:`vqe`, a parity / Bravyi–Kitaev Hamiltonian is refused for them.
"""
from __future__ import annotations

import functools
import itertools
import math
import numbers
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

import numpy as np
import torch

from .. import gates as G
from ..circuit import Circuit
from ..observables import PauliString, apply_hamiltonian
from ..observables.hamiltonian import _as_observable
from ..optim import NAMED_LRS, lbfgs
from ..trotter import pauli_rotation
from .ansatz import _int, _reference_bits, _sz, excitations, hartree_fock
from .vqe import CHEMICAL_ACCURACY, GIVENS_GATES, _finite_real, _run, check_givens_hamiltonian, energy

__all__ = ["PoolOperator", "operator_pool", "pool_gradients", "adapt_vqe", "AdaptVQEResult", "POOLS"]

POOLS = ("singles_doubles", "generalized", "qubit")


@dataclass(frozen=True)
class PoolOperator:
    """One candidate of an ADAPT pool: a one-angle gate of the gate table on ``wires``
    (``kind="gate"``, unitary exp(−iθ G) with G the gate's generator), or a Pauli rotation
    exp(−iθ/2 · P) (``kind="pauli"``, ``pauli`` its text such as ``'X0 Y2'``)."""
    kind: str
    name: str = ""
    wires: tuple = ()
    pauli: str = ""

    @classmethod
    def gate(cls, name: str, wires) -> "PoolOperator":
        gate = G.get_gate(name)
        if gate.n_params != 1 or gate.generator_fn is None:
            raise ValueError(f"PoolOperator.gate: {gate.name} must be a gate of one angle with a generator "
                             f"(e.g. SINGLEEXCITATION, DOUBLEEXCITATION, RY, MULTIRZ)")
        wires = tuple(wires)
        if any(isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 0 for w in wires):
            raise ValueError(f"PoolOperator.gate: {gate.name} wires {list(wires)} must be non-negative ints")
        wires = tuple(int(w) for w in wires)
        k = gate.wires_for(len(wires))
        if len(wires) != k or len(set(wires)) != k or len(wires) < gate.min_wires:
            raise ValueError(f"PoolOperator.gate: {gate.name} acts on {k} distinct wires, got {list(wires)}")
        return cls("gate", gate.name, wires)

    @classmethod
    def pauli_rotation(cls, pauli) -> "PoolOperator":
        p = pauli if isinstance(pauli, PauliString) else PauliString(pauli)
        if not p.wires:
            raise ValueError("PoolOperator.pauli_rotation: the identity string is a global phase, not an operator")
        return cls("pauli", wires=tuple(p.wires), pauli=str(p))

    @property
    def label(self) -> str:
        return f"{self.name}{list(self.wires)}" if self.kind == "gate" else f"exp(-iθ/2 {self.pauli})"

    def append_to(self, circuit: Circuit) -> None:
        """Append the operator with one new trainable angle initialised to 0."""
        if self.kind == "gate":
            circuit.add(self.name, self.wires, trainable=True, init=0.0)
        else:
            pauli_rotation(circuit, self.pauli, 0.0, trainable=True)

    def generator(self, dtype=torch.complex128, device=None) -> torch.Tensor:
        """G of the unitary exp(−iθ G) on ``wires`` (their order): the gate's generator, or P/2."""
        key = (self, dtype, str(device))
        if key not in _GENERATORS:
            if self.kind == "gate":
                g = G.get_gate(self.name).generator_fn(len(self.wires))
            else:
                p = PauliString(self.pauli)
                g = 0.5 * functools.reduce(np.kron, [_PAULI[p.letter(w)] for w in self.wires])
            _GENERATORS[key] = torch.as_tensor(g, dtype=dtype, device=device)
        return _GENERATORS[key]


_GENERATORS: dict = {}


_PAULI = {"X": np.array([[0, 1], [1, 0]]), "Y": np.array([[0, -1j], [1j, 0]]), "Z": np.array([[1, 0], [0, -1]])}


def _pairs(orbitals):
    return list(itertools.combinations(orbitals, 2))


def _generalized_excitations(n: int):
    singles = [[p, q] for p, q in _pairs(range(n)) if _sz(p) == _sz(q)]
    doubles = []
    for (p, q), (r, s) in itertools.combinations(_pairs(range(n)), 2):
        if len({p, q, r, s}) == 4 and _sz(p) + _sz(q) == _sz(r) + _sz(s):
            doubles.append([p, q, r, s])
    return singles, doubles


def _odd_y_strings(wires) -> list:
    out = []
    for letters in itertools.product("XY", repeat=len(wires)):
        if letters.count("Y") % 2 == 1:
            out.append(" ".join(f"{a}{w}" for a, w in zip(letters, wires)))
    return out


def operator_pool(pool: str, n_qubits: int, n_electrons: int, reference: Optional[Sequence[int]] = None) -> list:
    """The ADAPT pool ``pool`` (one of :data:`POOLS`) for ``n_electrons`` in ``n_qubits`` spin orbitals.

    ``"singles_doubles"`` and ``"qubit"`` use the excitations of the reference determinant
    (default HF: the first ``n_electrons`` qubits; ``reference`` bits otherwise);
    ``"generalized"`` does not depend on it. Operators are listed doubles first, then singles."""
    what = "operator_pool"
    if not isinstance(pool, str) or pool not in POOLS:
        raise ValueError(f"{what}: pool must be one of {POOLS} or a list of PoolOperator, got {pool!r}")
    n_qubits = _int(n_qubits, "n_qubits", what, 1)
    n_electrons = _int(n_electrons, "n_electrons", what, 0)
    bits = _reference_bits(n_electrons, n_qubits, reference, what)
    if pool == "generalized":
        if n_qubits % 2:
            raise ValueError(f"{what}: spin orbitals come in pairs (α, β), got {n_qubits} qubits")
        singles, doubles = _generalized_excitations(n_qubits)
    else:
        occupied = [i for i, b in enumerate(bits) if b]
        singles, doubles = excitations(n_electrons, n_qubits, occupied=occupied)
    if pool == "qubit":
        strings = dict.fromkeys(s for ex in doubles + singles for s in _odd_y_strings(sorted(ex)))
        return [PoolOperator.pauli_rotation(s) for s in strings]
    return ([PoolOperator.gate("DOUBLEEXCITATION", d) for d in doubles]
            + [PoolOperator.gate("SINGLEEXCITATION", s) for s in singles])


def _transition_matrix(bra: torch.Tensor, ket: torch.Tensor, wires: tuple, n: int) -> torch.Tensor:
    """M[r, c] = Σ_rest conj(bra[r, rest]) ket[c, rest] over the basis states of ``wires`` (in that
    order), so that ⟨bra| G |ket⟩ = Σ G ⊙ M for any G on those wires: one permuted copy of each
    vector and one (2^k × N/2^k) product instead of applying G to the state."""
    order = list(wires) + [w for w in range(n) if w not in wires]
    d = 2 ** len(wires)
    b = bra.reshape((2,) * n).permute(order).reshape(d, -1)
    k = ket.reshape((2,) * n).permute(order).reshape(d, -1)
    return b.conj() @ k.transpose(0, 1)


def pool_gradients(circuit: Circuit, H, pool: Sequence[PoolOperator], state=None) -> torch.Tensor:
    """∂E/∂θ at θ = 0 of appending each pool operator to ``circuit`` (a real tensor ``(len(pool),)``):
    ``2 Im ⟨Hψ | G_k ψ⟩`` with ψ the circuit's state (no gradient is recorded). Operators on the
    same wires share one transition matrix (:func:`_transition_matrix`): a pool screening costs one
    H·ψ plus O(2^k N) per distinct wire tuple, whatever the number of operators on it."""
    with torch.no_grad():
        psi = circuit(state=state)
        if psi.dim() != 2 or psi.shape[0] != 1:
            raise ValueError(f"pool_gradients: needs one state, got a batch of shape {tuple(psi.shape)}")
        # the identity terms add c·2Im⟨ψ|Gψ⟩ = 0 (G Hermitian); left in, they add c·ε rounding
        # noise (H2O: ~1e-3 in complex64, above the default grad_tol)
        h_psi = apply_hamiltonian(psi, _as_observable(H, "pool_gradients").split_constant()[0])
        n = circuit.n_wires
        grads = torch.zeros(len(pool), dtype=psi.real.dtype, device=psi.device)
        groups: dict = {}
        for i, op in enumerate(pool):
            groups.setdefault(op.wires, []).append(i)
        for wires, members in groups.items():
            m = _transition_matrix(h_psi[0], psi[0], wires, n)
            gens = torch.stack([pool[i].generator(psi.dtype, psi.device) for i in members])
            grads[members] = 2 * (gens * m).sum(dim=(-2, -1)).imag
    return grads


@dataclass
class AdaptVQEResult:
    """``energy``: ⟨H⟩ of the final ansatz ``circuit`` (angles ``weights``); ``operators``: the pool
    operators appended, in order; ``energies[k]`` and ``gradient_norms[k]``: the energy and the pool
    gradient's norm ‖g‖ before iteration k adds its operator (the last entry: after the last one);
    ``tapering``: the :class:`~tql.chem.Z2Tapering` the run used (``taper=True``), else None;
    ``converged``: stopped by ``grad_tol`` / ``energy_tol`` / ``target`` (``reason`` says which) rather
    than by ``max_iterations``; ``n_evaluations``: energy evaluations of all the inner optimisations."""
    energy: float
    weights: torch.Tensor
    operators: list
    energies: list
    gradient_norms: list
    max_gradients: list
    n_iterations: int
    converged: bool
    reason: str
    n_evaluations: int
    wall_time: float
    circuit: Circuit = field(repr=False)
    tapering: Optional[object] = field(default=None, repr=False)

    @property
    def labels(self) -> list:
        return [op.label for op in self.operators]


def _check_pool(pool, n, n_electrons, reference, what) -> list:
    if isinstance(pool, str):
        return operator_pool(pool, n, n_electrons, reference)
    try:
        ops = list(pool)
    except TypeError:
        raise TypeError(f"{what}: pool must be one of {POOLS} or a list of PoolOperator, got "
                        f"{type(pool).__name__}") from None
    for op in ops:
        if not isinstance(op, PoolOperator):
            raise TypeError(f"{what}: pool entries must be PoolOperator, got {type(op).__name__}")
        if max(op.wires) >= n:
            raise ValueError(f"{what}: pool operator {op.label} acts on wire {max(op.wires)} but the "
                             f"Hamiltonian has {n} qubits")
    return ops


def adapt_vqe(H, n_electrons: int, pool: Union[str, Sequence[PoolOperator]] = "singles_doubles",
              max_iterations: int = 50, grad_tol: float = 1e-3, energy_tol: Optional[float] = None,
              target: Optional[float] = None, atol: float = CHEMICAL_ACCURACY, optimizer="lbfgs",
              lr: Optional[float] = None, steps: int = 100, inner_tol: float = 1e-10,
              diff_method: str = "auto", reference: Optional[Sequence[int]] = None,
              dtype=torch.complex128, device=None, callback: Optional[Callable] = None,
              taper: bool = False) -> AdaptVQEResult:
    """Run ADAPT-VQE on the qubit Hamiltonian ``H`` for ``n_electrons`` (module docstring).

    Each iteration appends the pool operator of largest |∂E/∂θ| and re-optimises all angles with
    ``optimizer`` (a :func:`tql.optim.make_optimizer` name or object; ``lr``; ``"lbfgs"`` in complex64
    takes quasi-Newton steps without a line search: float32 energies are too coarse for one) for at most ``steps``
    steps, stopping early once a step changes the energy by less than ``inner_tol`` while every
    angle's gradient is below ``grad_tol / 10``. Stops when
    ‖g‖ < ``grad_tol``, when an iteration gains less than ``energy_tol`` Ha (if given), when
    ``|E − target| <= atol`` (if ``target`` is given, e.g. the FCI energy) or after
    ``max_iterations`` operators. ``callback(k, result_so_far)`` runs after each iteration.

    ``taper=True`` runs on the Z2-tapered register (:func:`tql.chem.z2_taper`, the reference's
    sector): H, the reference and a Pauli-rotation pool (``"qubit"`` or a list of Pauli rotations)
    are tapered by the same Clifford — pool strings that do not commute with the symmetries are
    dropped (their gradient vanishes on the sector) — and the circuit acts on the fewer qubits
    (``result.tapering`` maps back). Givens excitations are no moves there and are refused.
    """
    what = "adapt_vqe"
    if not hasattr(H, "terms") or not hasattr(H, "n_wires"):
        raise TypeError(f"{what}: H must be a tql Hamiltonian (a Pauli sum), got {type(H).__name__}")
    n = int(H.n_wires)
    n_electrons = _int(n_electrons, "n_electrons", what, 0)
    bits = _reference_bits(n_electrons, n, reference, what)
    ops = _check_pool(pool, n, n_electrons, reference, what)
    if not isinstance(taper, bool):
        raise TypeError(f"{what}: taper must be True or False, got {taper!r}")
    tapering = None
    if taper:
        if any(op.kind == "gate" for op in ops):
            raise ValueError(f"{what}: taper=True needs a pool of Pauli rotations (pool='qubit'): Givens excitations "
                             f"move electrons between spin orbitals of the full register, which the tapered qubits "
                             f"are not")
        from .tapering import z2_taper
        H, tapering = z2_taper(H, reference=bits)
        bits = tapering.reference_bits(bits)
        n = tapering.n_tapered_qubits
        ops = _tapered_pool(ops, tapering)
    if not ops:
        raise ValueError(f"{what}: the operator pool is empty (no excitation exists for {n_electrons} electrons "
                         f"in {n} spin orbitals)")
    max_iterations = _int(max_iterations, "max_iterations", what, 0)
    steps = _int(steps, "steps", what, 1)
    grad_tol = _finite_real(grad_tol, "grad_tol", what, minimum=0)
    inner_tol = _finite_real(inner_tol, "inner_tol", what, minimum=0)
    atol = _finite_real(atol, "atol", what, minimum=0)
    if energy_tol is not None:
        energy_tol = _finite_real(energy_tol, "energy_tol", what, minimum=0)
    if target is not None:
        target = _finite_real(target, "target", what)
    if dtype not in (torch.complex64, torch.complex128):
        raise ValueError(f"{what}: dtype must be torch.complex64 or torch.complex128, got {dtype!r}")

    givens = [op for op in ops if op.kind == "gate" and op.name in GIVENS_GATES]
    if givens:
        probe = Circuit(n)
        givens[0].append_to(probe)
        check_givens_hamiltonian(probe, H, what)

    inner_optimizer = optimizer
    if isinstance(optimizer, str) and optimizer.lower() == "lbfgs" and dtype == torch.complex64:
        inner_optimizer = _lbfgs_on_gradients(lr)
    circuit = Circuit(n, dtype=dtype)
    if device is not None:
        circuit = circuit.to(device)
    hartree_fock(circuit, state=bits)
    start = time.perf_counter()
    chosen, energies, norms, maxima = [], [], [], []
    n_evaluations = 0
    reason = "max_iterations"
    converged = False

    def loss_fn():
        return energy(circuit, H, diff_method=diff_method), None

    def inner_stop():
        previous = []

        def stop(value, _):
            # an unchanged energy alone is no convergence in complex64 (a float32 energy of 1 Ha
            # moves in steps of 1e-7, so angles 1e-4 from the optimum look converged): the angles'
            # own gradient (what re-selecting their operators would see) must be well under grad_tol
            grad = circuit.weights.grad
            flat = grad is None or grad.numel() == 0 or float(grad.abs().max()) <= grad_tol / 10
            done = bool(previous) and abs(previous[-1] - value) < inner_tol and flat
            previous.append(value)
            return done
        return stop

    with torch.no_grad():
        current = float(energy(circuit, H))
    while True:
        grads = pool_gradients(circuit, H, ops)
        magnitudes = grads.abs().double().cpu()          # one transfer per iteration
        norm = float(magnitudes.norm())
        best = int(magnitudes.argmax())
        energies.append(current)
        norms.append(norm)
        maxima.append(float(magnitudes[best]))
        if target is not None and abs(current - target) <= atol:
            reason, converged = "target", True
            break
        if norm < grad_tol:
            reason, converged = "grad_tol", True
            break
        if len(chosen) == max_iterations:
            break
        ops[best].append_to(circuit)
        chosen.append(ops[best])
        history, _, _, _, _ = _run(loss_fn, circuit, inner_optimizer, lr, steps, inner_stop(), None, {})
        n_evaluations += len(history)
        gain = current - history[-1]
        current = history[-1]
        if callback is not None:
            callback(len(chosen), _result(circuit, chosen, energies + [current], norms, maxima, False,
                                          "running", n_evaluations, start))
        if energy_tol is not None and gain < energy_tol:
            energies.append(current)
            norms.append(float(pool_gradients(circuit, H, ops).abs().double().cpu().norm()))
            maxima.append(math.nan)
            reason, converged = "energy_tol", True
            break
    return _result(circuit, chosen, energies, norms, maxima, converged, reason, n_evaluations, start, tapering)


def _lbfgs_on_gradients(lr):
    """L-BFGS without a line search, for complex64: a strong-Wolfe search compares energies, and
    float32 energies near an optimum move in steps larger than the decrease it looks for (H2 at
    1e-4 rad from the optimum: 6e-8 Ha against steps of 1.2e-7), so it stalled with gradients of
    1e-3; quasi-Newton steps from gradient differences still converge (measured: H2O 122 -> 26
    evaluations, H2 qubit pool 2 -> 1 operator)."""
    return lambda params: lbfgs(params, NAMED_LRS["lbfgs"] if lr is None else lr, line_search=False)


def _tapered_pool(ops, tapering) -> list:
    """Each Pauli-rotation pool string through the tapering's Clifford (a ±1 multiple of one string:
    the sign joins the angle), those that commute with every symmetry, without repeats."""
    out = {}
    for op in ops:
        p = PauliString(op.pauli, n_wires=tapering.n_qubits)
        if not all(p.commutes_with(g) for g in tapering.generators):
            continue
        terms = tapering.apply(p).terms
        if len(terms) == 1 and terms[0][1].wires:
            out.setdefault(str(terms[0][1]), PoolOperator.pauli_rotation(terms[0][1]))
    return list(out.values())


def _result(circuit, chosen, energies, norms, maxima, converged, reason, n_evaluations, start,
            tapering=None) -> AdaptVQEResult:
    return AdaptVQEResult(energies[-1], circuit.weights.detach().clone(), list(chosen), list(energies),
                          list(norms), list(maxima), len(chosen), converged, reason, n_evaluations,
                          time.perf_counter() - start, circuit, tapering)
