"""Combinatorial optimisation: problem Hamiltonians and batched QAOA.

* :mod:`.problems` — :class:`Problem` and :func:`exact_solution`; its builders are in
  :mod:`.graph_problems` (MaxCut, independent set, vertex cover, clique, graph colouring) and
  :mod:`.numeric_problems` (number partitioning, TSP, portfolio, QUBO / Ising).
* :mod:`.qaoa` — :func:`qaoa` / :class:`QAOA`: many (γ, β) starts (and several graphs of one size)
  in one batch, differentiable; result analysis. Its in-place adjoint engine is :mod:`.qaoa_adjoint`.
* :mod:`.angles` — initial angles (linear ramp, fixed angles, INTERP, random); :mod:`.training` —
  :func:`optimize`, all starts at once; :mod:`.natural_gradient` — :func:`qaoa_metric` (Fubini–Study
  metric of the angles), :class:`QAOANaturalGradient` and :class:`MultiStartSPSA` (per-start QNG / SPSA).
* :mod:`.cvar` — the CVaR objective (Barkoutsos et al. 2020): exact from probabilities, or from shots.
* :mod:`.noisy` — :class:`NoisyQAOA`: the costs a noisy device reports (density matrices or
  trajectories of the gate-level circuit, readout errors), with readout / zero-noise mitigation.
* :mod:`.rqaoa` — :func:`rqaoa`, recursive QAOA (eliminate the most correlated spins round by round,
  brute-force the rest).
* :mod:`.goemans_williamson` — :func:`goemans_williamson`, the classical MaxCut baseline: the SDP
  relaxation (Burer–Monteiro, with a certified upper bound) and random-hyperplane rounding;
  :func:`ising_sdp`, the same SDP and rounding for any problem's Ising form (certified lower bound).
* :mod:`.warm_start` — warm-start QAOA (Egger, Mareček & Woerner 2021): ``qaoa(problem, p,
  mixer="warm", warm_start=c, epsilon=ε)`` or :func:`warm_start_qaoa` (default: GW / ``ising_sdp``).
* :mod:`.graphs` — edge-list / networkx graph validation and seeded random regular graphs.

Sign convention: every problem's cost is MINIMISED; maximisation objectives (cut, set weight) are
negated in the cost and reported in natural units by ``Problem.objective``.
"""
from .graphs import Graph, as_graph, complete_graph, cycle_graph, random_regular_graph
from .bitstrings import bits_of, index_of
from .problems import MAX_EXACT_QUBITS, ExactSolution, Problem, exact_solution
from .graph_problems import (graph_coloring, graph_colouring, max_clique, max_independent_set, maxcut,
                             min_vertex_cover)
from .numeric_problems import from_ising, from_qubo, number_partitioning, portfolio, tsp
from .angles import (FIXED_ANGLES_3REGULAR, fixed_angles, interp, join_angles, linear_ramp, perturb,
                     random_angles, split_angles)
from .qaoa import MIXERS, QAOA, MultiStartQAOA, QAOAResult, qaoa, qaoa_circuit
from .training import optimize
from .natural_gradient import MultiStartSPSA, QAOANaturalGradient, qaoa_metric
from .rqaoa import Elimination, IsingModel, RQAOAResult, rqaoa
from .cvar import CostOrder, cost_order, cvar_from_probabilities, cvar_from_samples
from .noisy import MAX_DENSITY_QUBITS, NoisyQAOA, noisy_expected_cost, noisy_probabilities
from .goemans_williamson import GW_ALPHA, GoemansWilliamsonResult, IsingSDPResult, goemans_williamson, ising_sdp
from .warm_start import default_warm_start, warm_start_probabilities, warm_start_qaoa

__all__ = ["Graph", "as_graph", "complete_graph", "cycle_graph", "random_regular_graph", "Problem",
           "ExactSolution", "exact_solution", "maxcut", "max_independent_set", "min_vertex_cover",
           "max_clique", "number_partitioning", "graph_colouring", "graph_coloring", "tsp", "portfolio",
           "from_qubo", "from_ising", "bits_of", "index_of", "MAX_EXACT_QUBITS", "QAOA", "qaoa",
           "qaoa_circuit", "MultiStartQAOA", "QAOAResult", "linear_ramp", "fixed_angles", "interp",
           "random_angles", "perturb", "optimize", "split_angles", "join_angles", "MIXERS",
           "FIXED_ANGLES_3REGULAR", "qaoa_metric", "QAOANaturalGradient", "MultiStartSPSA",
           "rqaoa", "RQAOAResult", "Elimination", "IsingModel", "CostOrder", "cost_order",
           "cvar_from_probabilities", "cvar_from_samples", "NoisyQAOA", "noisy_expected_cost", "noisy_probabilities",
           "MAX_DENSITY_QUBITS", "goemans_williamson", "GoemansWilliamsonResult", "GW_ALPHA", "warm_start_qaoa",
           "warm_start_probabilities", "ising_sdp", "IsingSDPResult", "default_warm_start"]
