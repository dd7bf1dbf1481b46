"""Recursive QAOA (RQAOA): Bravyi, Kliesch, Koenig & Tang, "Obstacles to variational quantum
optimization from symmetry protection", PRL 125, 260505 (2020).

Every :class:`~.problems.Problem` (MaxCut, penalty QUBOs, QUBOs with linear terms, Ising models)
is first written as an Ising cost over spins ``z_k = ±1``,

    C(z) = offset + Σ_k h_k z_k + Σ_{k<l} J_kl z_k z_l ,

with the library's bit convention ``z_k = 1 - 2 x_k``: bit 0 ↔ spin +1, bit 1 ↔ spin -1 (the
eigenvalues of ``Z_k``; :meth:`Problem.ising`). Each round of :func:`rqaoa`

1. trains a multi-start QAOA (X mixer, all starts in one batch, :func:`~.training.optimize`) on
   the current Ising cost, rescaled so that its largest coefficient is 1/2 (as unit-weight MaxCut,
   for which the linear-ramp start suits; the rescaling is the same as a rescaling of γ);
2. takes the start with the lowest expected cost and computes every ``⟨Z_k⟩`` and ``⟨Z_k Z_l⟩`` of
   its state in one pass (:func:`spin_correlations`: probabilities times a ±1 matrix, one GEMM);
3. picks the correlator of largest magnitude. A pair ``(k, l)`` (k < l) imposes
   ``z_l = sign(⟨Z_k Z_l⟩) z_k`` and substitutes it into the cost (:meth:`IsingModel.substitute`:
   ``h_k += s h_l``, ``J_km += s J_lm``, ``offset += s J_kl``); a single spin is fixed to
   ``z_k = sign(⟨Z_k⟩)`` (:meth:`IsingModel.fix`). Costs without fields (``h = 0``: MaxCut,
   number partitioning) are symmetric under flipping all spins, so ``⟨Z_k⟩ = 0`` exactly and only
   pairs are considered (the reduction keeps ``h = 0``). ``sign(0)`` is taken as +1.

Rounds repeat until at most ``n_cutoff`` spins remain; those are brute-forced
(:func:`~.problems.exact_solution` of the remaining Ising model as a Problem, its constant term
included, so its cost IS the original cost of the expanded assignment), and the eliminated spins
are recovered by back-substitution in reverse order (:func:`expand_spins`). When
``n_cutoff >= n`` no round runs: the whole problem is brute-forced.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import NamedTuple, Optional

import torch

from ..kernels.state import COMPLEX_DTYPES
from .angles import _check_p, _check_starts, linear_ramp, perturb
from .bitstrings import bits_of
from .numeric_problems import from_ising
from .problems import MAX_DIAGONAL_QUBITS, MAX_EXACT_QUBITS, ExactSolution, Problem, exact_solution
from .qaoa import QAOA
from .training import optimize

__all__ = ["rqaoa", "RQAOAResult", "Elimination", "IsingModel", "spin_correlations", "qaoa_correlations",
           "expand_spins", "RATIO_MAX_QUBITS"]

RATIO_MAX_QUBITS = 20
""":func:`rqaoa` reports an approximation ratio (from a brute-force optimum) up to this many variables."""

# Spread of the multi-start angles around the linear ramp (as MultiStartQAOA's default noise).
START_NOISE = 0.1
# Target size of the largest Ising coefficient in the QAOA of a round: unit-weight MaxCut has
# J = 1/2, the scale for which the linear ramp (δ = 0.75) is a good start.
COEFFICIENT_SCALE = 0.5


class Elimination(NamedTuple):
    """One RQAOA round, in the ORIGINAL problem's variable indices.

    ``kept is None``: spin ``eliminated`` was fixed to ``value`` (+1 ↔ bit 0, -1 ↔ bit 1) because
    ``⟨Z_eliminated⟩ = correlation``. Otherwise ``z_eliminated = value · z_kept`` was imposed
    (``value = +1``: same bit, ``-1``: opposite bits) because ``⟨Z_kept Z_eliminated⟩ = correlation``.
    """
    kept: Optional[int]
    eliminated: int
    value: int
    correlation: float


@dataclass(frozen=True)
class IsingModel:
    """``C(z) = offset + Σ_k h_k z_k + Σ_{k<l} J[k, l] z_k z_l`` over spins of ``variables``.

    ``h`` is ``(m,)`` float64; ``J`` is ``(m, m)`` float64, symmetric with a zero diagonal (each pair
    counted once in the sum over k < l); ``variables[k]`` is the original variable index of spin k.
    Spins follow the library's convention ``z = 1 - 2x`` (bit 0 ↔ +1).
    """
    h: torch.Tensor
    J: torch.Tensor
    offset: float
    variables: tuple

    @classmethod
    def from_problem(cls, problem: Problem) -> "IsingModel":
        h, J_upper, c = problem.ising()
        return cls(h.clone(), J_upper + J_upper.T, float(c), tuple(range(problem.n_qubits)))

    @property
    def n_spins(self) -> int:
        return len(self.variables)

    @property
    def has_fields(self) -> bool:
        return bool((self.h != 0).any())

    @property
    def scale(self) -> float:
        """The largest magnitude of a field or coupling (0 for a constant cost)."""
        if not self.h.numel():
            return 0.0
        return max(float(self.h.abs().max()), float(self.J.abs().max()))

    def cost(self, spins) -> torch.Tensor:
        """Costs ``(K,)`` float64 of spin rows ``(K, m)`` with entries ±1."""
        z = torch.as_tensor(spins, dtype=torch.float64)
        return self.offset + z @ self.h + 0.5 * ((z @ self.J) * z).sum(-1)

    def substitute(self, kept: int, eliminated: int, sign: int) -> "IsingModel":
        """Impose ``z_eliminated = sign · z_kept`` (positions in this model, ``sign = ±1``).

        ``h_l z_l → s h_l z_k``, ``J_kl z_k z_l → s J_kl`` (z_k² = 1: a constant) and
        ``J_lm z_l z_m → s J_lm z_k z_m`` for every other m.
        """
        k, l, s = kept, eliminated, float(sign)
        h, J = self.h.clone(), self.J.clone()
        h[k] += s * h[l]
        offset = self.offset + s * float(J[k, l])
        moved = s * J[l].clone()
        moved[k] = 0.0                        # J_kl became the constant above
        J[k] += moved
        J[:, k] += moved
        return self._drop(h, J, offset, l)

    def fix(self, position: int, value: int) -> "IsingModel":
        """Fix spin ``position`` to ``value = ±1``: ``h_l z_l → value h_l`` and
        ``J_lm z_l z_m → value J_lm z_m``."""
        v = float(value)
        h = self.h + v * self.J[position]
        offset = self.offset + v * float(self.h[position])
        return self._drop(h, self.J, offset, position)

    def _drop(self, h, J, offset, position) -> "IsingModel":
        keep = [k for k in range(self.n_spins) if k != position]
        idx = torch.tensor(keep, dtype=torch.int64)
        return IsingModel(h[idx], J[idx][:, idx], offset, tuple(self.variables[k] for k in keep))

    def problem(self, scale: float = 1.0) -> Problem:
        """This cost divided by ``scale`` as a :class:`Problem` (:func:`~.numeric_problems.from_ising`);
        with ``scale=1`` its :meth:`Problem.cost` of a bitstring is this model's cost of its spins."""
        return from_ising(self.h / scale, torch.triu(self.J, 1) / scale, self.offset / scale)


def _spin_matrix(n: int, dtype, device) -> torch.Tensor:
    """``(2^n, n)``: entry [b, k] is the spin ``1 - 2 x_k`` of wire k in basis state b."""
    bits = bits_of(torch.arange(2 ** n, device=device), n)
    return (1 - 2 * bits).to(dtype)


def spin_correlations(probabilities: torch.Tensor):
    """All one- and two-point spin correlators of measurement distributions.

    ``probabilities`` ``(S, 2^n)`` (real; wire 0 the most significant bit of the index) →
    ``(⟨Z_k⟩ (S, n), ⟨Z_k Z_l⟩ (S, n, n))``, the second with ones on its diagonal. One product with a
    precomputed ±1 matrix and one batched GEMM; no loop over basis states or rows.
    """
    if not isinstance(probabilities, torch.Tensor) or probabilities.is_complex() \
            or not probabilities.is_floating_point():
        raise TypeError("spin_correlations: probabilities must be a real floating tensor")
    if probabilities.dim() != 2:
        raise ValueError(f"spin_correlations: probabilities must have shape (S, 2**n), got "
                         f"{tuple(probabilities.shape)}")
    N = probabilities.shape[1]
    n = N.bit_length() - 1
    if N < 2 or 2 ** n != N:
        raise ValueError(f"spin_correlations: the last dimension must be a power of two >= 2, got {N}")
    spins = _spin_matrix(n, probabilities.dtype, probabilities.device)
    one = probabilities @ spins
    two = (probabilities.unsqueeze(-1) * spins).transpose(-1, -2) @ spins
    return one, two


def qaoa_correlations(model: QAOA, angles: torch.Tensor):
    """:func:`spin_correlations` of the QAOA states of ``angles`` ``(S, 2p)`` (single problem)."""
    if not isinstance(model, QAOA) or not model.single:
        raise TypeError("qaoa_correlations: model must be a QAOA of one problem")
    with torch.no_grad():
        prob = model(angles, output="probabilities")
    return spin_correlations(prob.reshape(-1, prob.shape[-1]))


def expand_spins(spins, variables, history, n_variables: int) -> torch.Tensor:
    """Back-substitution: spins ``(K, m)`` of the reduced problem on ``variables`` (original
    indices) → spins ``(K, n_variables)`` of the original problem, undoing ``history`` (a list of
    :class:`Elimination`) from the last round to the first. Raises ValueError when the variables
    and the eliminated spins do not cover every original variable exactly once."""
    z = torch.as_tensor(spins, dtype=torch.int64)
    if z.dim() != 2 or z.shape[1] != len(variables):
        raise ValueError(f"expand_spins: spins must have shape (K, {len(variables)}), got {tuple(z.shape)}")
    covered = sorted(list(variables) + [step.eliminated for step in history])
    if covered != list(range(n_variables)):
        raise ValueError(f"expand_spins: the variables {tuple(variables)} and the eliminated spins do not cover "
                         f"0 … {n_variables - 1} exactly once")
    full = torch.zeros(z.shape[0], n_variables, dtype=torch.int64)
    full[:, list(variables)] = z
    for step in reversed(history):
        if step.kept is None:
            full[:, step.eliminated] = step.value
        else:
            full[:, step.eliminated] = step.value * full[:, step.kept]
    return full


@dataclass
class RQAOAResult:
    """What :func:`rqaoa` found, in the ORIGINAL problem's variables.

    ``cost`` is :meth:`Problem.cost` (minimised) of ``bitstring``, ``objective`` its natural
    objective, ``solution`` its :meth:`Problem.decode` (repaired when infeasible). ``history`` lists
    the eliminations in order; ``subproblem`` is the brute-forced remainder (its spin k is original
    variable ``subproblem_variables[k]``; its constant term is included, so
    ``subproblem_solution.cost == cost``). ``round_costs`` are the best expected costs of the QAOA
    of each round, in the original cost's units. ``approximation_ratio`` is
    ``(C_worst - cost) / (C_worst - C_opt)`` (C_worst: the largest cost of a feasible bitstring)
    when the problem has at most :data:`RATIO_MAX_QUBITS` variables, else None.
    """
    bitstring: str
    cost: float
    objective: float
    feasible: bool
    solution: object
    history: list
    subproblem: Problem
    subproblem_variables: tuple
    subproblem_solution: ExactSolution
    round_costs: list = field(default_factory=list)
    approximation_ratio: Optional[float] = None
    optimum_cost: Optional[float] = None

    @property
    def n_rounds(self) -> int:
        return len(self.history)

    @property
    def spins(self) -> list:
        """The spins ``1 - 2 x_k`` of :attr:`bitstring`."""
        return [1 - 2 * int(b) for b in self.bitstring]


# -- argument checks --------------------------------------------------------------------------------
def _check_int(value, name: str, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"rqaoa: {name} must be an int, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise ValueError(f"rqaoa: {name} must be {rng}, got {value}")
    return int(value)


def _check_lr(lr):
    if lr is None:
        return None
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
        raise TypeError(f"rqaoa: lr must be a positive number or None, got {lr!r}")
    if not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"rqaoa: lr must be a finite number > 0, got {lr!r}")
    return float(lr)


def _check_device(device):
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"rqaoa: device must be None, a string or a torch.device, got {type(device).__name__}")
    try:
        return torch.device(device)
    except RuntimeError:
        raise ValueError(f"rqaoa: device {device!r} is not a valid torch device") from None


# -- one round --------------------------------------------------------------------------------------
def _strongest(one: torch.Tensor, two: torch.Tensor, allow_single: bool):
    """``(k, l or None, correlation)``: the pair k < l (or single spin k) of largest |correlator|,
    chosen on the device; one small transfer of the winner."""
    m = two.shape[0]
    iu = torch.triu_indices(m, m, 1, device=two.device)
    pairs = two[iu[0], iu[1]]
    candidates = torch.cat([pairs, one]) if allow_single else pairs
    best = int(torch.argmax(candidates.abs()))
    value = float(candidates[best])
    if best < pairs.numel():
        return int(iu[0, best]), int(iu[1, best]), value
    return best - pairs.numel(), None, value


def _train_round(model: QAOA, p: int, n_starts: int, steps: int, optimizer: str, lr, generator, previous):
    """Multi-start training in one batch; ``(best angles (1, 2p), best expected cost)``."""
    starts = perturb(linear_ramp(p), n_starts, START_NOISE, generator)
    if previous is not None and n_starts > 1:
        starts[1] = previous                     # warm start from the last round's optimum
    angles, costs = optimize(model, starts, steps=steps, lr=lr, optimizer=optimizer)
    best = int(torch.argmin(costs))
    return angles[best:best + 1], float(costs[best])


def rqaoa(problem: Problem, p: int = 1, n_cutoff: int = 8, n_starts: int = 8, steps: int = 100,
          optimizer: str = "adam", lr: Optional[float] = None, seed: int = 0, device=None,
          dtype=torch.complex64) -> RQAOAResult:
    """Recursive QAOA on ``problem`` (see the module docstring for the algorithm and conventions).

    Args:
        problem: a :class:`~.problems.Problem` (any builder: graph problems, penalty QUBOs, Ising).
        p: QAOA layers per round (int >= 1).
        n_cutoff: brute-force the remaining problem once at most this many spins remain
            (1 … :data:`~.problems.MAX_EXACT_QUBITS`); ``n_cutoff >= problem.n_qubits`` runs no
            round and brute-forces the whole problem.
        n_starts: QAOA starts per round, trained in one batch: the linear ramp, (from the second
            round) the previous round's best angles, and Gaussian perturbations of the ramp.
        steps: optimiser steps per round (Adam steps, or L-BFGS ``max_iter``); 0 keeps the starts.
        optimizer: ``"adam"`` or ``"lbfgs"`` (:func:`~.training.optimize`); ``lr`` its learning
            rate (None: its default).
        seed: seeds the perturbation of the starts; the same seed gives the same result.
        device, dtype: where the QAOA state lives and its precision (complex64 or complex128).

    Returns an :class:`RQAOAResult`. A penalty QUBO is solved as a QUBO: the result may be
    infeasible (``result.feasible``; ``result.solution`` is then repaired by the problem's decoder).
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"rqaoa: problem must be a Problem (from the optimization builders), got "
                        f"{type(problem).__name__}")
    p = _check_p(p, "rqaoa")
    n_cutoff = _check_int(n_cutoff, "n_cutoff", 1, MAX_EXACT_QUBITS)
    n_starts = _check_starts(n_starts, "rqaoa")
    steps = _check_int(steps, "steps", 0)
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"rqaoa: optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    lr = _check_lr(lr)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"rqaoa: seed must be an int, got {seed!r}")
    if dtype not in COMPLEX_DTYPES:
        raise TypeError(f"rqaoa: dtype must be torch.complex64 or torch.complex128, got {dtype!r}")
    device = _check_device(device)
    n = problem.n_qubits
    if n > n_cutoff and n > MAX_DIAGONAL_QUBITS:
        raise ValueError(f"rqaoa: problem {problem.name} has {n} variables; the state-vector QAOA of a round "
                         f"is limited to {MAX_DIAGONAL_QUBITS} qubits")

    generator = torch.Generator().manual_seed(int(seed))
    ising = IsingModel.from_problem(problem)
    history, round_costs, previous = [], [], None
    while ising.n_spins > n_cutoff:
        scale = ising.scale
        if scale == 0:
            # a constant cost: every assignment is optimal, so no QAOA is needed to choose
            history.append(Elimination(None, ising.variables[-1], 1, 0.0))
            round_costs.append(ising.offset)
            ising = ising.fix(ising.n_spins - 1, 1)
            continue
        qaoa_scale = scale / COEFFICIENT_SCALE
        model = QAOA(ising.problem(qaoa_scale), p, dtype=dtype, device=device)
        previous, best_cost = _train_round(model, p, n_starts, steps, optimizer, lr, generator, previous)
        round_costs.append(best_cost * qaoa_scale)      # from_ising kept offset / scale
        one, two = qaoa_correlations(model, previous)
        k, l, corr = _strongest(one[0], two[0], ising.has_fields)
        sign = 1 if corr >= 0 else -1
        if l is None:
            history.append(Elimination(None, ising.variables[k], sign, corr))
            ising = ising.fix(k, sign)
        else:
            history.append(Elimination(ising.variables[k], ising.variables[l], sign, corr))
            ising = ising.substitute(k, l, sign)
        previous = previous[0].detach().to("cpu", torch.float64)

    sub = ising.problem()
    sub_solution = exact_solution(sub)
    sub_spins = 1 - 2 * bits_of(torch.tensor([sub_solution.index]), ising.n_spins)
    full = expand_spins(sub_spins, ising.variables, history, n)
    bits = ((1 - full[0]) // 2).tolist()
    bitstring = "".join(str(b) for b in bits)
    cost = float(problem.cost(bitstring))
    if not math.isclose(cost, sub_solution.cost, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, abs(cost))):
        raise RuntimeError(f"rqaoa: internal error: the reduced cost {sub_solution.cost} differs from the cost "
                           f"{cost} of the expanded bitstring {bitstring}")
    ratio = optimum = None
    if n <= RATIO_MAX_QUBITS:
        exact = exact_solution(problem)
        optimum = exact.cost
        span = exact.worst_cost - exact.cost
        ratio = (exact.worst_cost - cost) / span if span > 0 else 1.0
    return RQAOAResult(bitstring=bitstring, cost=cost, objective=float(problem.objective(bitstring)),
                       feasible=bool(problem.is_feasible(bitstring)), solution=problem.decode(bitstring),
                       history=history, subproblem=sub, subproblem_variables=ising.variables,
                       subproblem_solution=sub_solution, round_costs=round_costs,
                       approximation_ratio=ratio, optimum_cost=optimum)
