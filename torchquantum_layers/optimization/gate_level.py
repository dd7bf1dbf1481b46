"""Gate-level QAOA circuits for every mixer: what a device runs (and what the noisy simulators take).

:func:`gate_level_qaoa` returns a :class:`GateLevelQAOA` — a :class:`~torchquantum_layers.Circuit`
whose angles are input columns (``circ(x)``, ``x = angles (S, 2p)``, rows
``[γ_1 … γ_p, β_1 … β_p]`` as in :class:`~.qaoa.QAOA`) and the start state it runs on:

* ``mixer="x"``: :func:`~.qaoa.qaoa_circuit` (H on every wire; per layer ``RZ(2γ h_i)``,
  ``RZZ(2γ J_ij)`` from the Ising form, ``RX(2β)`` on every wire), started from |0…0⟩.
* ``mixer="xy"``: the same cost layer; the mixer is, for every pair (a, b) of QAOA's ring over the
  wires of each ``mixer_group`` (consecutive wires, then last → first for groups of 3 or more, in
  that order), ``RXX(β) RYY(β)`` on (a, b) = ``exp(-iβ (X_a X_b + Y_a Y_b)/2)`` (XX and YY commute).
* ``mixer="swap"`` (TSP): per position pair (t, t') of QAOA's order and city pair u < v, the term
  ``exp(-iβ T)``, T = ``|u@t, v@t'⟩⟨u@t', v@t| + h.c.``, as ``S · DOUBLEEXCITATION(2β) · S†`` on the
  wires ``(u@t', v@t, u@t, v@t')`` (the Givens rotation of |0011⟩, |1100⟩ turned into an X-type
  rotation by the phase S on ``u@t'``; identity outside that two-level subspace).

The XY and swap mixers start from the uniform superposition of the feasible bitstrings (as
``QAOA(initial_state="auto")``):

* where the feasible set is exactly "one 1 in each group" and the groups cover all wires (graph
  colouring), it is prepared BY GATES: per group of k wires a W state, ``X`` on its first wire then
  ``SINGLEEXCITATION(θ_i)`` on (g_i, g_{i+1}) with ``cos(θ_i/2) = 1/√(k-i)`` (``preparation =
  "gates"``; the gates are noisy and folded by ZNE like the others);
* otherwise (TSP tours, the portfolio's Dicke state) it is an IDEAL, noise-free start state vector
  given to the simulator (``initial_state``, ``preparation = "ideal"``): its preparation is neither
  noisy nor folded by ZNE.

* ``mixer="warm"`` (warm-start QAOA, :mod:`.warm_start`): ``warm_start=c`` and ``epsilon=ε`` as in
  ``qaoa(mixer="warm")``; :func:`~.warm_start.warm_start_circuit`: ``RY(θ_i)`` on every wire from
  |0…0⟩ (``preparation = "gates"``: noisy and folded like the rest), per layer the cost gates and
  ``RY(-θ_i) RZ(2β) RY(θ_i)`` on every wire, ``θ_i = 2 arcsin √clip(c_i, ε, 1 - ε)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from .angles import _check_p
from .problems import Problem
from .qaoa_mixers import ring_pairs, tour_exchange_terms
from .qaoa_gate_circuit import blank_circuit, cost_layer

__all__ = ["GateLevelQAOA", "gate_level_qaoa", "GATE_MIXERS", "mixer_pairs", "swap_terms"]

GATE_MIXERS = ("x", "xy", "swap", "warm")


@dataclass
class GateLevelQAOA:
    """A gate-level QAOA: ``circuit`` (angles = input columns) run on ``initial_state`` ((1, 2**n)
    complex128, or None: |0…0⟩, the preparation is in the circuit). ``preparation``: ``"gates"``
    or ``"ideal"`` (module notes)."""
    circuit: object
    initial_state: Optional[torch.Tensor]
    preparation: str
    mixer: str
    warm_start: Optional[torch.Tensor] = None    # mixer="warm": the regularised c, (1, n) float64


def mixer_pairs(problem: Problem, what: str = "gate_level_qaoa") -> list:
    """The wire pairs of the XY mixer in QAOA's order: per group, consecutive wires, then the
    closing pair (last, first) for groups of 3 or more."""
    groups = problem.mixer_groups
    if not groups:
        raise ValueError(f"{what}: mixer='xy' needs a problem with one-hot groups (graph_colouring, tsp, "
                         f"portfolio); {problem.name} has none, use mixer='x'")
    return [pair for grp in groups for pair in ring_pairs(grp)]


def swap_terms(problem: Problem, what: str = "gate_level_qaoa") -> list:
    """The swap-mixer terms in QAOA's order: wires ``(u@t, u@t', v@t, v@t')`` per position pair
    (t, t') and city pair u < v; T rotates |1001⟩ ↔ |0110⟩ on them."""
    if problem.name != "tsp":
        raise ValueError(f"{what}: mixer='swap' is the TSP tour-exchange mixer; {problem.name} is not a TSP "
                         f"(use mixer='xy' for one-hot groups)")
    return tour_exchange_terms(*problem.data["layout"])


def _product_of_one_hot(problem: Problem) -> bool:
    """Whether the feasible set is exactly 'one 1 in each group' with groups partitioning the wires."""
    n = problem.n_qubits
    groups = problem.mixer_groups
    wires = sorted(w for g in groups for w in g)
    if wires != list(range(n)) or any(len(g) < 1 for g in groups):
        return False
    if math.prod(len(g) for g in groups) != int(problem.feasible_mask().sum()):
        return False
    # every product bitstring is feasible (counts match, so the sets are equal)
    idx = torch.zeros(1, dtype=torch.int64)
    for g in groups:
        choice = torch.tensor([1 << (n - 1 - w) for w in g], dtype=torch.int64)
        idx = (idx[:, None] + choice[None, :]).reshape(-1)
    return bool(problem.feasible_mask()[idx].all())


def _w_state(circ, grp) -> None:
    """|W_k⟩ on the wires of ``grp`` from |0…0⟩: X on g_0, then Givens rotations down the chain."""
    k = len(grp)
    circ.x(grp[0])
    for i in range(k - 1):
        # keep amplitude 1/√k on g_i, pass the rest (positive) on to g_{i+1}
        theta = -2.0 * math.acos(1.0 / math.sqrt(k - i))
        circ.single_excitation(grp[i], grp[i + 1], theta)


def gate_level_qaoa(problem: Problem, p: int, mixer: str = "x", dtype=None, device=None, warm_start=None,
                    epsilon: Optional[float] = None) -> GateLevelQAOA:
    """The gate-level QAOA of ``problem`` with ``p`` layers and ``mixer`` (module notes);
    ``warm_start`` / ``epsilon`` (default 0.25) for ``mixer="warm"`` only, as ``qaoa(mixer="warm")``."""
    from ..circuit import Input
    from .qaoa import qaoa_circuit
    what = "gate_level_qaoa"
    if not isinstance(problem, Problem):
        raise TypeError(f"{what}: expected a Problem, got {type(problem).__name__}")
    p = _check_p(p, what)
    if mixer not in GATE_MIXERS:
        raise ValueError(f"{what}: mixer must be one of {GATE_MIXERS}, got {mixer!r}")
    if mixer == "warm":
        from .warm_start import DEFAULT_EPSILON, warm_start_circuit, warm_start_probabilities
        if warm_start is None:
            raise ValueError(f"{what}: mixer='warm' needs warm_start= (a bitstring, probabilities of bit 1 or a "
                             f"goemans_williamson / ising_sdp result)")
        c = warm_start_probabilities(warm_start, problem.n_qubits, DEFAULT_EPSILON if epsilon is None else epsilon,
                                     what=what)
        return GateLevelQAOA(warm_start_circuit(problem, p, c, dtype=dtype, device=device), None, "gates", "warm", c)
    if warm_start is not None or epsilon is not None:
        raise ValueError(f"{what}: warm_start and epsilon belong to mixer='warm'; mixer={mixer!r} does not use them")
    if mixer == "x":
        return GateLevelQAOA(qaoa_circuit(problem, p, dtype=dtype, device=device), None, "gates", "x")
    n = problem.n_qubits
    steps = mixer_pairs(problem, what) if mixer == "xy" else swap_terms(problem, what)
    mask = problem.feasible_mask()
    count = int(mask.sum())
    if count == 0:
        raise ValueError(f"{what}: {problem.name} has no feasible bitstring to start the {mixer!r} mixer from")
    circ = blank_circuit(n, dtype, device)
    init = None
    if _product_of_one_hot(problem):
        for grp in problem.mixer_groups:
            _w_state(circ, grp)
        prep = "gates"
    else:
        init = (mask.to(torch.float64) / math.sqrt(count)).to(torch.complex128).reshape(1, -1)
        prep = "ideal"
    h, J, _ = problem.ising()
    pairs = torch.nonzero(J).tolist()
    for l in range(p):
        cost_layer(circ, h, pairs, J, l)
        beta = Input(p + l, 1.0)
        if mixer == "xy":
            for a, b in steps:
                circ.rxx(a, b, beta)
                circ.ryy(a, b, beta)
        else:
            for ut, ut2, vt, vt2 in steps:
                circ.s(ut2)
                circ.double_excitation(ut2, vt, ut, vt2, Input(p + l, 2.0))
                circ.sdg(ut2)
    return GateLevelQAOA(circ, init, prep, mixer)
