"""``QAOATask``: multi-start QAOA for a combinatorial problem as a LightningModule.

Every constructor argument is a plain value (strings, numbers, lists), saved with
``save_hyperparameters`` so checkpoints rebuild the task and ``LightningCLI`` can construct it::

    task = QAOATask(problem="maxcut", graph=[[0, 1], [1, 2], [2, 3], [3, 0], [1, 3]], p=4, n_starts=16)
    pl.Trainer(max_steps=150).fit(task)
    task.best_cost, task.best_ratio, task.top_bitstrings, task.solution

There is no data: the module serves a one-element dataset itself, so one epoch is one optimizer
step. All ``n_starts`` angle vectors live in one ``(n_starts, 2p)`` parameter and run as one batch
of the library's :class:`~torchquantum_layers.optimization.QAOA` (the loss is the SUM of the
starts' expected costs, so Adam or SGD trains each start exactly as if it were alone).

CVaR (``cvar_alpha=α`` in (0, 1]): the loss is the sum of the starts' CVaR_α instead, the mean
cost of the lowest-cost α fraction of each state's distribution (Barkoutsos et al. 2020,
:meth:`QAOA.cvar <torchquantum_layers.optimization.QAOA.cvar>`), which rewards concentrating
probability on good bitstrings over lowering the mean. The best start is still the one of the
lowest expected cost, and everything below is logged as without it.

Sign convention: as everywhere in :mod:`torchquantum_layers.optimization`, the cost C is
MINIMISED; MaxCut's cost is minus the cut, so ``expected_cost`` is ``-⟨cut⟩`` and
``expected_objective`` is ``⟨cut⟩``.

Logged every step (values of the angles after k updates, before update k+1, as ``VQETask``):

* ``expected_cost``: ⟨C⟩ of the best start (the lowest over the batch); ``mean_cost`` over starts;
* ``best_ratio``: approximation ratio ``(C_worst - ⟨C⟩) / (C_worst - C_opt)`` of that start
  against the brute-force optimum (1 at the optimum; ``⟨cut⟩ / max cut`` for MaxCut);
* ``optimum_probability``: probability of measuring an optimal bitstring in the best start's state;
* ``expected_objective`` (natural units: cut weight, tour length, ...), ``depth`` (the current p),
  and ``feasible_probability`` for constrained problems;
* ``cvar`` (with ``cvar_alpha``): the lowest CVaR_α over the starts, the quantity trained.

``best_ratio`` and ``optimum_probability`` need the brute-force optimum (at most 26 qubits); above
that only the costs are logged.

Problems (``problem=``) and the arguments each one reads (any other argument must stay None):

=====================================  ==========================================================
``"maxcut"``                           ``graph``, ``n_nodes``
``"max_independent_set"`` (``"mis"``)  ``graph``, ``n_nodes``, ``node_weights``, ``penalty``
``"min_vertex_cover"``                 same (alias ``"vertex_cover"``)
``"max_clique"``                       same (alias ``"clique"``)
``"graph_colouring"``                  ``graph``, ``n_nodes``, ``n_colours``, ``penalty``
``"number_partitioning"``              ``numbers``
``"tsp"``                              ``distances``, ``penalty``, ``fix_start``
``"portfolio"``                        ``expected_returns``, ``covariance``, ``budget``,
                                       ``risk_factor``, ``penalty``
``"qubo"``                             ``Q``, ``offset``
``"ising"``                            ``h``, ``J``, ``offset``
=====================================  ==========================================================

Graphs: an edge list ``[[u, v], ...]`` or ``[[u, v, w], ...]`` (nodes 0 … n-1 are wires), or a
named graph (:func:`named_graph`): ``"paddle"`` (Paddle Quantum's MaxCut tutorial graph, edges
0-1, 1-2, 2-3, 3-0, 1-3; the default of the graph problems), ``"cycle:N"``, ``"complete:N"`` or
``"Dregular:N[:seed=S]"`` (a seeded random D-regular graph, e.g. ``"3regular:16:seed=1"``; seed 0
when left out, so a checkpoint always rebuilds the same graph).

Noisy device (``noise_model=`` a plain-data noise spec, :mod:`lightning_tasks.noise_spec`, e.g.
``{"channels": [{"channel": "depolarizing", "p": 0.01, "gates": ["RZZ"]}], "readout": {"p01": 0.02}}``):
the starts run as one batch of density matrices (``noise_simulator="density"``, default, exact) or
of ``n_trajectories`` sampled state vectors each (``noise_simulator="trajectories"``, an unbiased
estimate drawn from torch's global generator: seed it, e.g. ``lightning.seed_everything``) of the
gate-level circuit of the chosen ``mixer``
(:class:`~torchquantum_layers.optimization.noisy.NoisyQAOA`: H, then per layer RZ / RZZ / RX for
``mixer="x"``; RXX·RYY per ring pair for ``"xy"``, the tour-exchange terms for ``"swap"``, both from
the uniform feasible superposition, see :mod:`torchquantum_layers.optimization.gate_level`; each
channel after the gates its rule names) and the task trains on the expected cost the device
reports, after ``mitigation`` (``"zne"``, ``"readout"`` or ``"zne+readout"``). Every logged and
reported quantity is then the device's: the best start is the one of the lowest REPORTED cost (the
only cost a device user sees), ``expected_cost`` / ``mean_cost`` / ``history`` / ``best_cost`` are
reported costs, ``best_ratio`` is the approximation ratio of the reported cost (a mitigated cost can
leave [0, 1]), ``optimum_probability``, ``expected_objective``, ``feasible_probability`` and the
top bitstrings of :attr:`best` come from the distribution as read out (readout errors included,
no mitigation: what sampling the device gives). Next to them ``ideal_expected_cost`` and
``ideal_ratio`` are the noiseless values of the same angles (the exact QAOA engine), so the effect
of the noise and of its mitigation shows; :attr:`best` carries them too, and :meth:`result` stays
the noiseless analysis of every start. Density matrices need ``4**n`` entries per start: up to
:data:`~torchquantum_layers.optimization.noisy.MAX_DENSITY_QUBITS` (12) qubits; trajectories
``2**n`` per trajectory. With noise: ``diff_method="backprop"``, no ``cvar_alpha`` and no ``optimizer="qng"`` (its metric
is that of a pure state); Adam, SGD, L-BFGS and SPSA train, and checkpoints resume exactly.

Warm start (``mixer="warm"``, Egger, Mareček & Woerner 2021, :mod:`torchquantum_layers.optimization.warm_start`):
the QAOA starts from the product state in which bit i is 1 with probability ``clip(c_i, ε, 1 - ε)``
(``epsilon=``, default 0.25) and mixes with ``exp(-iβ (sin θ_i X + cos θ_i Z))`` per wire, ``θ_i =
2 arcsin √c_i``. ``warm_start=`` is plain data: ``"goemans_williamson"`` (the default on MaxCut: the
best rounded cut of :func:`~torchquantum_layers.optimization.goemans_williamson`, seeded by ``seed``;
on every other problem the best rounded bitstring of :func:`~torchquantum_layers.optimization.ising_sdp`,
the same SDP on the problem's Ising form, penalties included), a bitstring ``"0110"`` (wire 0 first;
quote it in YAML) or a list of n probabilities of bit 1. The resolved warm start is :attr:`QAOATask.warm_start` (n floats) and
is saved in every checkpoint, so a resumed or reloaded task uses the same cut without rerunning
GW. Logged next to the ratios: ``ratio_to_gw`` (``⟨cut⟩ / gw_cut`` of the best start, every step,
with the GW warm start), and in the first step's row of each fit the references ``warm_start_cost``
/ ``warm_start_ratio`` (the warm-start state itself, p = 0) and ``gw_cut``, ``gw_sdp_value``,
``gw_upper_bound`` (the certified SDP bound, >= the max cut) — on other problems ``sdp_cost``,
``sdp_value``, ``sdp_lower_bound`` (certified, <= the minimum cost); :meth:`QAOATask.warm_start_summary`
returns them. The warm mixer trains with every optimizer, ``cvar_alpha`` and ``grow`` (each depth
uses the same warm start) and with ``noise_model`` (NoisyQAOA's gate-level warm circuit: RY preparation,
``RY(-θ_i) RZ(2β) RY(θ_i)`` mixer, all noisy and folded by ZNE).

Layer-by-layer growth (``grow=True``): training starts at depth 1 and adds one layer every
``steps_per_layer`` optimizer steps until depth ``p``, each new depth warm-started by INTERP
(Zhou et al. 2020) from every start's angles; the optimizer state is reset at each growth (its
moments belong to the old angles). The depth is a function of the global step, so a resumed run
grows exactly where an uninterrupted one would.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from torchquantum_layers import optimization as opt
from torchquantum_layers.optim import make_optimizer, optimizer_class
from torchquantum_layers.optimization.cvar import check_alpha
from torchquantum_layers.optimization.noisy import MAX_DENSITY_QUBITS, SIMULATORS as NOISE_SIMULATORS, NoisyQAOA
from torchquantum_layers.optimization.problems import MAX_EXACT_QUBITS
from torchquantum_layers.optimization.warm_start import DEFAULT_EPSILON

from .noise_spec import check_noise_optimizer, check_noise_options
from .qaoa_problems import (_ALIASES, _PROBLEM_ARGS, PADDLE_GRAPH, PROBLEMS, _plain, _plain_graph, build_problem,
                            named_graph)
from .single_point import SinglePointTask, plain_hparam

__all__ = ["QAOATask", "QAOABest", "named_graph", "PROBLEMS", "PADDLE_GRAPH", "INITS", "OPTIMIZERS"]

INITS = ("ramp", "fixed", "random")
OPTIMIZERS = ("adam", "sgd", "lbfgs", "qng", "spsa")
# QAOA angles move on a smaller scale than VQE's: gentler default steps
DEFAULT_LRS = {"adam": 0.05, "sgd": 0.05, "qng": 0.1, "spsa": 0.05}
DIFF_METHODS = ("adjoint", "backprop")
_DTYPES = {"complex64": torch.complex64, "complex128": torch.complex128,
           "float32": torch.complex64, "float64": torch.complex128}

# the names of the Goemans–Williamson warm start (the default of mixer="warm": GW on MaxCut, ising_sdp otherwise)
_GW_NAMES = ("goemans_williamson", "gw")


def _warm_key(spec: str) -> str:
    return spec.strip().lower().replace("-", "_").replace(" ", "_").replace("–", "_")


def _check_warm_options(mixer, warm_start, epsilon, noise_model):
    """``(warm_start, epsilon)`` as plain values after the checks that need no problem: the
    warm-start mixer's options only with it, not with a device noise model, a known string, ε in
    [0, 0.5] (the length and the values of a list are checked against the problem later)."""
    what = "QAOATask"
    if mixer != "warm":
        if warm_start is not None:
            raise ValueError(f"{what}: warm_start is the warm start of the warm-start mixer; mixer={mixer!r} does "
                             f"not use it (set mixer='warm', or leave warm_start=None)")
        if epsilon is not None:
            raise ValueError(f"{what}: epsilon regularises the warm start of mixer='warm'; mixer={mixer!r} does "
                             f"not use it (leave epsilon=None)")
        return None, None
    if epsilon is not None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, Real) or not math.isfinite(epsilon):
            raise ValueError(f"{what}: epsilon must be a number in [0, 0.5], got {epsilon!r}")
        if not 0 <= epsilon <= 0.5:
            raise ValueError(f"{what}: epsilon must be in [0, 0.5] (the warm start is clipped to [ε, 1 - ε]), "
                             f"got {epsilon}")
        epsilon = float(epsilon)
    if isinstance(warm_start, str):
        if _warm_key(warm_start) in _GW_NAMES:
            return "goemans_williamson", epsilon
        bits = warm_start.strip()
        if not bits or any(ch not in "01" for ch in bits):
            raise ValueError(f"{what}: unknown warm_start {warm_start!r}; use 'goemans_williamson' (any problem), a "
                             f"bitstring of 0/1 characters (wire 0 first, quoted in YAML: '0110') or a list of "
                             f"probabilities of bit 1")
        return bits, epsilon
    if warm_start is None:
        return None, epsilon
    if isinstance(warm_start, (bytes, dict, set, bool)) or type(warm_start).__name__ in ("GoemansWilliamsonResult",
                                                                                       "IsingSDPResult"):
        raise TypeError(f"{what}: warm_start must be 'goemans_williamson', a bitstring or a list of "
                        f"probabilities of bit 1 (plain values, saved in checkpoints and configs; of a "
                        f"goemans_williamson() result pass its .bitstring), got {type(warm_start).__name__}")
    return plain_hparam(warm_start, f"{what}: warm_start"), epsilon


def _positive_int(value, name):
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"QAOATask: {name} must be an int, got {value!r}")
    if value < 1:
        raise ValueError(f"QAOATask: {name} must be >= 1, got {value}")
    return int(value)


@dataclass
class QAOABest:
    """The best start kept by a :class:`QAOATask` (lowest expected cost seen in training)."""
    depth: int
    angles: torch.Tensor             # (2 * depth,): [γ_1 … γ_p, β_1 … β_p]
    expected_cost: float
    approximation_ratio: Optional[float]
    optimum_probability: Optional[float]
    top_bitstrings: list             # most probable bitstrings, wire 0 first
    top_probabilities: list
    solution: object                 # problem.decode(top_bitstrings[0]) (repaired when infeasible)
    objective: float                 # natural objective of that solution (cut weight, tour length, ...)
    # with a noise model the fields above are as the device reports them; these are the noiseless
    # values of the same angles (None without noise)
    ideal_expected_cost: Optional[float] = None
    ideal_approximation_ratio: Optional[float] = None


class QAOATask(SinglePointTask):
    """Minimise the expected cost of a combinatorial problem over a batch of QAOA angle vectors.

    Args:
        problem: a name from :data:`PROBLEMS` (or an alias: ``"mis"``, ``"vertex_cover"``, ...).
        graph, n_nodes, node_weights, n_colours, numbers, distances, fix_start, expected_returns,
            covariance, budget, risk_factor, penalty, Q, h, J, offset: the problem's data, passed to
            its builder in :mod:`torchquantum_layers.optimization` (table in the module docstring);
            graph problems default to the ``"paddle"`` graph.
        p: number of QAOA layers (the final depth with ``grow``).
        n_starts: angle vectors trained together in one batch.
        init: ``"ramp"`` (linear ramp with ``delta``, start 0 exact, the others perturbed by
            ``noise``), ``"fixed"`` (Wurtz–Lykov angles, MaxCut on 3-regular graphs, p <= 4 or with
            ``grow``) or ``"random"`` (uniform, seeded).
        noise: standard deviation of the perturbation of starts 1 … n_starts-1 (ramp / fixed).
        delta: the ramp's step; default ``0.75 / s`` with ``s = 2 max(|h_i|, |J_ij|)`` of the cost's
            Ising form (s = 1 for unit-weight MaxCut).
        mixer: ``"x"``, ``"xy"`` (one-hot problems: colouring, TSP, portfolio), ``"swap"`` (TSP) or
            ``"warm"`` (the warm-start mixer, with ``warm_start`` and ``epsilon``; module notes).
        optimizer, lr: ``"adam"`` (default lr 0.05), ``"sgd"`` (lr 0.05), ``"lbfgs"`` (lr 1, one
            strong-Wolfe iteration per step), ``"qng"`` (lr 0.1: the quantum natural gradient,
            every start solved with the Fubini–Study metric of its own state,
            :class:`~torchquantum_layers.optimization.QAOANaturalGradient`), ``"spsa"`` (lr 0.05:
            two cost evaluations per step and no gradient, each start with its own estimate,
            :class:`~torchquantum_layers.optimization.MultiStartSPSA`; the task steps it itself, as
            Lightning's manual optimisation) or another ``torch.optim`` class name.
        grow, steps_per_layer: layer-by-layer growth p = 1 … ``p`` with INTERP warm starts, one new
            layer every ``steps_per_layer`` steps.
        diff_method: ``"adjoint"`` (default) or ``"backprop"``.
        dtype: ``"complex64"`` (default) or ``"complex128"``.
        seed: seeds the perturbations and random angles (independent of the global RNG).
        top_k: how many bitstrings :attr:`best` reports.
        init_angles: starting angles of the first depth d0 (1 with ``grow``, else ``p``): ``(2·d0,)``
            (start 0 exact, the others perturbed by ``noise``) or ``(n_starts, 2·d0)``; not a
            hyperparameter (a checkpoint holds the trained angles).
        cvar_alpha: None (default) trains the expected cost; a number in (0, 1] trains CVaR_α.
        noise_model: None (default: the exact pure-state QAOA), or a noise spec as plain data (a
            dict, :mod:`lightning_tasks.noise_spec`; a ``NoiseModel`` object is refused, as it
            could not be saved in a checkpoint or config): the task then trains on the costs a
            noisy device reports (module notes). Not ``noise``, which is the spread of the starts.
        mitigation: with ``noise_model``, ``"zne"`` (zero-noise extrapolation by global folding
            at ``zne_scale_factors``, default 1, 3, 5, extrapolated by ``zne_extrapolation``:
            ``"richardson"`` (default), ``"linear"`` or ``"exponential"``), ``"readout"`` (the
            readout-mitigated cost observable) or ``"zne+readout"``.
        noise_simulator: with ``noise_model``, ``"density"`` (default, exact, up to 12 qubits) or
            ``"trajectories"`` (``n_trajectories`` sampled state vectors per start, default 64).
        warm_start: with ``mixer="warm"`` only: ``"goemans_williamson"`` (default: on MaxCut the GW
            best cut, on other problems the best rounded bitstring of ``opt.ising_sdp``, seeded by
            ``seed``), a bitstring of n characters 0/1 or a list of n probabilities of bit 1.
        epsilon: with ``mixer="warm"`` only: the warm start is clipped to ``[ε, 1 - ε]``, ε in
            [0, 0.5] (default 0.25; 0.5 is the standard QAOA).
    """

    def __init__(self, problem: str = "maxcut", graph: Optional[Union[list, str]] = None,
                 n_nodes: Optional[int] = None, node_weights: Optional[list] = None,
                 n_colours: Optional[int] = None, numbers: Optional[list] = None,
                 distances: Optional[list] = None, fix_start: Optional[bool] = None,
                 expected_returns: Optional[list] = None, covariance: Optional[list] = None,
                 budget: Optional[int] = None, risk_factor: Optional[float] = None,
                 penalty: Optional[float] = None, Q: Optional[list] = None, h: Optional[list] = None,
                 J: Optional[list] = None, offset: Optional[float] = None,
                 p: int = 3, n_starts: int = 16, init: str = "ramp", noise: float = 0.1,
                 delta: Optional[float] = None, mixer: str = "x", optimizer: str = "adam",
                 lr: Optional[float] = None, grow: bool = False, steps_per_layer: int = 50,
                 diff_method: str = "adjoint", dtype: str = "complex64", seed: int = 0, top_k: int = 5,
                 init_angles: Optional[list] = None, cvar_alpha: Optional[float] = None,
                 noise_model: Optional[dict] = None, mitigation: Optional[str] = None,
                 zne_scale_factors: Optional[list] = None, zne_extrapolation: str = "richardson",
                 noise_simulator: str = "density", n_trajectories: int = 64,
                 warm_start: Optional[Union[str, list]] = None, epsilon: Optional[float] = None):
        super().__init__()
        what = "QAOATask"
        # validate everything cheap before building the problem
        if isinstance(p, bool) or not isinstance(p, Integral):
            raise TypeError(f"{what}: p (the number of QAOA layers) must be an int, got {p!r}")
        if p < 1:
            raise ValueError(f"{what}: p (the number of QAOA layers) must be >= 1, got {p}")
        n_starts = _positive_int(n_starts, "n_starts")
        steps_per_layer = _positive_int(steps_per_layer, "steps_per_layer")
        top_k = _positive_int(top_k, "top_k")
        if not isinstance(problem, str):
            raise TypeError(f"{what}: problem must be a name ({', '.join(PROBLEMS)}), got {type(problem).__name__}")
        key = problem.strip().lower().replace("-", "_").replace(" ", "_")
        key = _ALIASES.get(key, key)
        if key not in PROBLEMS:
            raise ValueError(f"{what}: unknown problem {problem!r}; choose one of {', '.join(PROBLEMS)} "
                             f"(aliases: {', '.join(sorted(_ALIASES))})")
        problem = key
        if init not in INITS:
            raise ValueError(f"{what}: init must be one of {', '.join(INITS)}, got {init!r}")
        if init == "fixed" and problem != "maxcut":
            raise ValueError(f"{what}: init='fixed' (the Wurtz–Lykov angles of MaxCut on 3-regular graphs) "
                             f"needs problem='maxcut', got problem={problem!r}; use init='ramp'")
        if init == "fixed" and not grow and p not in opt.FIXED_ANGLES_3REGULAR:
            raise ValueError(f"{what}: init='fixed' is tabulated for p = 1 … {max(opt.FIXED_ANGLES_3REGULAR)}, "
                             f"got p={p}; use grow=True (INTERP from p = 1) or init='ramp'")
        if mixer not in opt.MIXERS:
            raise ValueError(f"{what}: mixer must be one of {', '.join(opt.MIXERS)}, got {mixer!r}")
        warm_start, epsilon = _check_warm_options(mixer, warm_start, epsilon, noise_model)
        if diff_method not in DIFF_METHODS:
            raise ValueError(f"{what}: diff_method must be one of {', '.join(DIFF_METHODS)} for QAOA, "
                             f"got {diff_method!r}")
        if not isinstance(optimizer, str) or (optimizer.lower() not in OPTIMIZERS
                                              and optimizer_class(optimizer) is None):
            raise ValueError(f"{what}: unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)} "
                             f"or a torch.optim class name")
        if dtype not in _DTYPES:
            raise ValueError(f"{what}: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        for name, v in (("lr", lr), ("delta", delta)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, Real)
                                  or not math.isfinite(v) or v <= 0):
                raise ValueError(f"{what}: {name} must be a positive number, got {v!r}")
        if isinstance(noise, dict) or type(noise).__name__ == "NoiseModel":
            raise TypeError(f"{what}: noise is the standard deviation of the perturbation of the starts (a number); "
                            f"a device noise spec goes in noise_model={{...}}")
        if isinstance(noise, bool) or not isinstance(noise, Real) or not math.isfinite(noise) or noise < 0:
            raise ValueError(f"{what}: noise must be a non-negative number, got {noise!r}")
        if not isinstance(grow, bool):
            raise TypeError(f"{what}: grow must be a bool, got {grow!r}")
        if isinstance(seed, bool) or not isinstance(seed, Integral):
            raise TypeError(f"{what}: seed must be an int, got {seed!r}")
        if cvar_alpha is not None:
            cvar_alpha = check_alpha(cvar_alpha, what, name="cvar_alpha")
        device_noise = self._check_device_noise(noise_model, mitigation, zne_scale_factors, zne_extrapolation,
                                                diff_method, optimizer, mixer, cvar_alpha)
        self._check_simulator(noise_model, noise_simulator, n_trajectories)
        noise_model = plain_hparam(noise_model, f"{what}: noise_model")
        zne_scale_factors = plain_hparam(zne_scale_factors, f"{what}: zne_scale_factors")
        graph, n_nodes = _plain_graph(graph, n_nodes)
        node_weights, numbers, distances = _plain(node_weights), _plain(numbers), _plain(distances)
        expected_returns, covariance = _plain(expected_returns), _plain(covariance)
        Q, h, J = _plain(Q), _plain(h), _plain(J)
        self.save_hyperparameters(ignore=["init_angles"])   # plain values only (weights_only=True loads)

        self.problem = build_problem(problem, {k: self.hparams[k] for k in _PROBLEM_ARGS})
        self.cdtype = _DTYPES[dtype]
        real = torch.float64 if self.cdtype == torch.complex128 else torch.float32
        self.max_depth = int(p)
        self.depth = 1 if grow else self.max_depth
        depths = range(1, self.max_depth + 1) if grow else [self.max_depth]
        n = self.problem.n_qubits
        # the warm start c (plain floats, before the ε clipping) and the Goemans–Williamson summary
        # it came from (None when given): resolved once here, saved in checkpoints (on_save_checkpoint)
        self.warm_start, self.gw = (self._resolve_warm_start(problem, warm_start, int(seed))
                                    if mixer == "warm" else (None, None))
        self.qaoas = self._build_qaoas()
        self.device_noise = device_noise
        if device_noise is not None:
            if noise_simulator == "density" and n > MAX_DENSITY_QUBITS:
                raise ValueError(f"{what}: noise_model on {n} qubits needs density matrices of 4**{n} entries per "
                                 f"start; the density simulator simulates noise up to {MAX_DENSITY_QUBITS} qubits. For "
                                 f"larger problems use noise_simulator='trajectories' (state vectors of 2**{n} "
                                 f"entries per trajectory, an unbiased estimate)")
            zne = dict(zne_scale_factors=zne_scale_factors) if zne_scale_factors is not None else {}
            self._noisy_kw = dict(mitigation=mitigation, extrapolation=zne_extrapolation, dtype=self.cdtype,
                                  mixer=mixer, simulator=noise_simulator, n_trajectories=n_trajectories, **zne)
            self.noisy = self._build_noisy()
        self.exact = opt.exact_solution(self.problem) if n <= MAX_EXACT_QUBITS else None
        N = 2 ** n
        # per-basis-state vectors for the logged quantities; not persistent (2^n entries do not
        # belong in a checkpoint: the problem rebuilds them)
        self.register_buffer("_objective_vec", self.problem.objective_vector().clone(), persistent=False)
        self.register_buffer("_feasible_vec", self.problem.feasible_mask().to(torch.float64), persistent=False)
        self.register_buffer("_cost_vec", self.problem.diagonal.to(torch.float64).clone(), persistent=False)
        opt_mask = torch.zeros(N, dtype=torch.float64)
        if self.exact is not None:
            opt_mask[self.exact.indices] = 1.0
            self._opt_cost, self._worst_cost = float(self.exact.cost), float(self.exact.worst_cost)
        self.register_buffer("_optimum_vec", opt_mask, persistent=False)

        first = self._initial_angles(self.depth, init_angles).to(real)
        P = self.max_depth
        full = torch.zeros(n_starts, 2 * P, dtype=real)
        full[:, :self.depth] = first[:, :self.depth]
        full[:, P:P + self.depth] = first[:, self.depth:]
        # (n_starts, 2P) = [γ_1 … γ_P, β_1 … β_P]; at depth d < P only γ_1…γ_d, β_1…β_d are used
        self.angles = nn.Parameter(full)
        # the best start seen (persistent: a resumed run keeps it)
        self.register_buffer("best_cost_", torch.tensor(math.inf, dtype=torch.float64))
        self.register_buffer("best_angles_", torch.zeros(2 * P, dtype=real))
        self.register_buffer("best_depth_", torch.tensor(self.depth, dtype=torch.int64))
        self._history: list = []          # best-start cost per step (0-d tensors, no device sync)
        self._seen_step = -1
        self._warm_logged = False
        # SPSA's closure may only evaluate the costs, which Lightning's automatic closure does not
        self.automatic_optimization = optimizer.lower() != "spsa"

    # -- construction -----------------------------------------------------------------------------
    @staticmethod
    def _check_device_noise(spec, mitigation, scale_factors, extrapolation, diff_method, optimizer, mixer,
                            cvar_alpha):
        """The NoiseModel of ``noise_model=`` (None without), after the checks shared with VQETask
        and those of QAOA's noisy circuit."""
        what = "QAOATask"
        model = check_noise_options(spec, mitigation, scale_factors, extrapolation, what, arg="noise_model")
        if model is None:
            return None
        if diff_method != "backprop":
            raise ValueError(f"{what}: with noise_model the state is a density matrix, which the {diff_method} "
                             f"method cannot un-compute; use diff_method='backprop'")
        check_noise_optimizer(optimizer, what, arg="noise_model")
        if cvar_alpha is not None:
            raise ValueError(f"{what}: cvar_alpha with noise_model is not available: CVaR needs the cost distribution "
                             f"of the state, and the noisy task trains on the reported (mitigated) expected cost; "
                             f"leave cvar_alpha=None")
        return model

    @staticmethod
    def _check_simulator(spec, simulator, n_trajectories) -> None:
        """``noise_simulator`` / ``n_trajectories``: plain values, meaningful only with a noise spec."""
        what = "QAOATask"
        if not isinstance(simulator, str) or simulator not in NOISE_SIMULATORS:
            raise ValueError(f"{what}: noise_simulator must be one of {', '.join(NOISE_SIMULATORS)}, got "
                             f"{simulator!r}")
        if isinstance(n_trajectories, bool) or not isinstance(n_trajectories, Integral):
            raise TypeError(f"{what}: n_trajectories must be an int, got {n_trajectories!r}")
        if n_trajectories < 1:
            raise ValueError(f"{what}: n_trajectories must be >= 1, got {n_trajectories}")
        if spec is None and (simulator != "density" or n_trajectories != 64):
            raise ValueError(f"{what}: noise_simulator / n_trajectories apply only with noise_model=... (without "
                             f"noise the task runs the exact state-vector engine)")
        if simulator == "density" and n_trajectories != 64:
            raise ValueError(f"{what}: n_trajectories={n_trajectories} applies to noise_simulator='trajectories'; "
                             f"the density simulator is exact (leave n_trajectories at its default)")

    def _resolve_warm_start(self, problem: str, spec, seed: int):
        """``(c, gw)`` of ``warm_start=`` (already checked for type): c as n plain floats in [0, 1],
        and for the Goemans–Williamson default a plain summary of the run (else None)."""
        what = "QAOATask"
        n = self.problem.n_qubits
        if spec is None or (isinstance(spec, str) and _warm_key(spec) in _GW_NAMES):
            # MaxCut: goemans_williamson (cut units); any other problem: ising_sdp (cost units)
            try:
                res = opt.default_warm_start(self.problem, generator=torch.Generator().manual_seed(seed))
            except ValueError as err:
                raise ValueError(f"{what}: warm_start='goemans_williamson': {err}") from None
            if isinstance(res, opt.GoemansWilliamsonResult):
                gw = {"bitstring": res.bitstring, "cut": float(res.cut), "sdp_value": float(res.sdp_value),
                      "upper_bound": float(res.upper_bound), "seed": int(seed)}
            else:
                gw = {"kind": "ising_sdp", "bitstring": res.bitstring, "cost": float(res.cost),
                      "sdp_value": float(res.sdp_value), "lower_bound": float(res.lower_bound), "seed": int(seed)}
            return [float(ch) for ch in res.bitstring], gw
        if isinstance(spec, str):
            bits = spec.strip()
            if len(bits) != n:
                raise ValueError(f"{what}: warm_start {spec!r} has {len(bits)} characters; a bitstring warm start "
                                 f"needs one 0/1 per qubit ({n}, wire 0 first)")
            return [float(ch) for ch in bits], None
        try:
            c = torch.as_tensor(spec, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{what}: warm_start must be a flat list of {n} probabilities of bit 1, got "
                             f"{spec!r}") from None
        if c.dim() != 1 or c.shape[0] != n:
            raise ValueError(f"{what}: warm_start must have one value per qubit, shape ({n},), got "
                             f"{tuple(c.shape)}")
        if not bool(torch.isfinite(c).all()) or bool(((c < 0) | (c > 1)).any()):
            raise ValueError(f"{what}: warm_start values are probabilities of bit 1 and must lie in [0, 1], got "
                             f"{c.tolist()}")
        return [float(v) for v in c.tolist()], None

    def _build_qaoas(self, device=None) -> nn.ModuleDict:
        """One QAOA module per trained depth (the cost diagonal is computed once, cached on the
        problem), with the task's mixer and, for ``mixer="warm"``, its resolved warm start."""
        hp = self.hparams
        depths = range(1, self.max_depth + 1) if hp.grow else [self.max_depth]
        kw = dict(mixer=hp.mixer, diff_method=hp.diff_method, dtype=self.cdtype, device=device)
        if hp.mixer == "warm":
            kw.update(warm_start=torch.tensor(self.warm_start, dtype=torch.float64), epsilon=self.epsilon)
        try:
            return nn.ModuleDict({str(d): opt.qaoa(self.problem, d, **kw) for d in depths})
        except ValueError as err:
            raise ValueError(f"QAOATask: {err}") from None

    def _build_noisy(self, device=None) -> nn.ModuleDict:
        """One NoisyQAOA per trained depth, as the noiseless ones (each holds its gate-level circuit),
        with the resolved warm start for ``mixer="warm"``."""
        depths = range(1, self.max_depth + 1) if self.hparams.grow else [self.max_depth]
        kw = dict(self._noisy_kw)
        if self.hparams.mixer == "warm":
            kw.update(warm_start=torch.tensor(self.warm_start, dtype=torch.float64), epsilon=self.epsilon)
        try:
            mods = nn.ModuleDict({str(d): NoisyQAOA(self.problem, d, self.device_noise, **kw) for d in depths})
        except ValueError as err:
            raise ValueError(f"QAOATask: {err}") from None
        return mods if device is None else mods.to(device)

    @property
    def epsilon(self) -> Optional[float]:
        """The regularisation ε of the warm start (``c ← clip(c, ε, 1 - ε)``); None without it."""
        if self.hparams.mixer != "warm":
            return None
        eps = self.hparams.epsilon
        return float(DEFAULT_EPSILON if eps is None else eps)

    def _ramp_delta(self) -> float:
        if self.hparams.delta is not None:
            return float(self.hparams.delta)
        hv, Jm, _ = self.problem.ising()
        s = 2 * max(float(hv.abs().max()) if hv.numel() else 0.0, float(Jm.abs().max()) if Jm.numel() else 0.0)
        return 0.75 / s if s > 0 else 0.75

    def _initial_angles(self, depth: int, init_angles) -> torch.Tensor:
        """(n_starts, 2·depth) float64 starting angles."""
        hp = self.hparams
        S = hp.n_starts
        gen = torch.Generator().manual_seed(int(hp.seed))
        if init_angles is not None:
            a = torch.as_tensor(_plain(init_angles), dtype=torch.float64)
            if a.shape[-1] != 2 * depth or a.dim() not in (1, 2) or (a.dim() == 2 and a.shape[0] != S):
                raise ValueError(f"QAOATask: init_angles must have shape ({2 * depth},) or ({S}, {2 * depth}) "
                                 f"for depth {depth}, got {tuple(a.shape)}")
            if not bool(torch.isfinite(a).all()):
                raise ValueError("QAOATask: init_angles contain NaN or inf")
            return opt.perturb(a, S, hp.noise, gen) if a.dim() == 1 else a
        if hp.init == "random":
            return opt.random_angles(depth, S, gen)
        base = opt.fixed_angles(depth) if hp.init == "fixed" else opt.linear_ramp(depth, self._ramp_delta())
        return opt.perturb(base, S, hp.noise, gen)

    # -- angles and depth -------------------------------------------------------------------------
    def depth_at(self, step: int) -> int:
        """The depth trained at optimizer step ``step`` (growth schedule)."""
        if not self.hparams.grow:
            return self.max_depth
        return min(self.max_depth, 1 + int(step) // self.hparams.steps_per_layer)

    def _layout(self, flat: torch.Tensor, d: int) -> torch.Tensor:
        """(..., 2P) → (..., 2d): the angles a depth-d QAOA reads."""
        P = self.max_depth
        return flat if d == P else torch.cat([flat[..., :d], flat[..., P:P + d]], dim=-1)

    def current_angles(self) -> torch.Tensor:
        """``(n_starts, 2·depth)`` angles of the current depth (a differentiable view of ``angles``)."""
        return self._layout(self.angles, self.depth)

    @torch.no_grad()
    def grow_to(self, depth: int) -> None:
        """Warm-start ``depth`` from the current angles by INTERP (every start at once)."""
        if not self.depth < depth <= self.max_depth:
            raise ValueError(f"QAOATask: can grow from depth {self.depth} to {self.depth + 1} … {self.max_depth}, "
                             f"not to {depth}")
        a = self.current_angles().detach()
        for _ in range(depth - self.depth):            # a loop over layers, not over starts
            a = opt.interp(a)
        P = self.max_depth
        self.angles[:, :depth] = a[:, :depth]
        self.angles[:, P:P + depth] = a[:, depth:]
        self.depth = depth
        trainer = self._trainer
        if trainer is not None:
            # the moments (Adam) or curvature pairs (L-BFGS) belong to the old angles
            for o in trainer.optimizers:
                o.state.clear()

    # -- Lightning hooks --------------------------------------------------------------------------
    def forward(self) -> torch.Tensor:
        """The trained objective ``(n_starts,)`` of the current angles (differentiable): the expected
        costs (with ``noise_model``: as the device reports them, after ``mitigation``), or CVaR_α
        with ``cvar_alpha``."""
        if self.device_noise is not None:
            return self.noisy[str(self.depth)](self.current_angles())
        model, alpha = self.qaoas[str(self.depth)], self.hparams.cvar_alpha
        if alpha is None:
            return model(self.current_angles())
        return model.cvar(self.current_angles(), alpha)

    @torch.no_grad()
    def expected_costs(self) -> torch.Tensor:
        """Expected costs ``(n_starts,)`` of the current angles (whatever the objective trained;
        with ``noise_model`` the reported ones, see :meth:`ideal_expected_costs`)."""
        if self.device_noise is not None:
            return self.noisy[str(self.depth)](self.current_angles())
        return self.qaoas[str(self.depth)](self.current_angles())

    @torch.no_grad()
    def ideal_expected_costs(self) -> torch.Tensor:
        """The noiseless expected costs ``(n_starts,)`` of the current angles (the exact engine)."""
        return self.qaoas[str(self.depth)](self.current_angles())

    def _probabilities(self, depth: int, rows: torch.Tensor) -> torch.Tensor:
        """Bitstring probabilities ``(R, 2**n)`` float64 of angle rows ``(R, 2·depth)``: of the
        state, or with ``noise_model`` as read out from the device."""
        if self.device_noise is not None:
            return self.noisy[str(depth)].probabilities(rows).to(torch.float64)
        return self.qaoas[str(depth)](rows, output="probabilities").to(torch.float64)

    def _ratio(self, cost):
        span = self._worst_cost - self._opt_cost
        return (self._worst_cost - cost) / (span if span > 0 else 1.0)

    def _objective_and_costs(self):
        """(trained objective (n_starts,), expected costs (n_starts,) detached), from one simulation
        (with CVaR both come from the same probabilities)."""
        if self.device_noise is not None:
            costs = self()
            return costs, costs.detach()
        model, alpha = self.qaoas[str(self.depth)], self.hparams.cvar_alpha
        if alpha is None:
            costs = model(self.current_angles())
            return costs, costs.detach()
        prob = model(self.current_angles(), output="probabilities")
        return model.cvar_of_probabilities(prob, alpha), prob.detach().to(torch.float64) @ self._cost_vec

    def on_train_batch_start(self, batch, batch_idx):
        # before the optimizer step (L-BFGS evaluates its closure several times inside it)
        target = self.depth_at(self.global_step)
        if target > self.depth:
            self.grow_to(target)

    def training_step(self, batch, batch_idx):
        manual = not self.automatic_optimization
        with torch.set_grad_enabled(torch.is_grad_enabled() and not manual):
            values, costs = self._objective_and_costs()
        if self._seen_step != self.global_step:        # L-BFGS evaluates several times per step
            self._seen_step = self.global_step
            self._log_step(costs, None if self.hparams.cvar_alpha is None else values.detach())
        if manual:
            # SPSA: the closure returns every start's objective, so each start gets its own estimate
            self.optimizers().step(closure=lambda: self().detach())
            return None
        return values.sum()

    @torch.no_grad()
    def _log_step(self, costs: torch.Tensor, cvars: Optional[torch.Tensor] = None) -> None:
        d = self.depth
        j = torch.argmin(costs).reshape(1)
        best = costs.index_select(0, j)[0].to(torch.float64)
        row = self.current_angles().detach().index_select(0, j)               # (1, 2d)
        prob = self._probabilities(d, row)[0]
        self._history.append(best)
        better = best < self.best_cost_
        padded = torch.zeros_like(self.best_angles_)
        P = self.max_depth
        padded[:d] = row[0, :d]
        padded[P:P + d] = row[0, d:]
        self.best_cost_.copy_(torch.where(better, best, self.best_cost_))
        self.best_angles_.copy_(torch.where(better, padded, self.best_angles_))
        self.best_depth_.copy_(torch.where(better, torch.full_like(self.best_depth_, d), self.best_depth_))
        log = dict(on_step=True, on_epoch=False, batch_size=1)
        self.log("expected_cost", best, prog_bar=True, **log)
        self.log("mean_cost", costs.to(torch.float64).mean(), **log)
        self.log("expected_objective", prob @ self._objective_vec, **log)
        self.log("depth", float(d), **log)
        if cvars is not None:
            self.log("cvar", cvars.to(torch.float64).min(), prog_bar=True, **log)
        if self.problem.is_constrained:
            self.log("feasible_probability", prob @ self._feasible_vec, **log)
        if self.exact is not None:
            self.log("best_ratio", self._ratio(best), prog_bar=True, **log)
            self.log("optimum_probability", prob @ self._optimum_vec, prog_bar=True, **log)
        if self.device_noise is not None:
            ideal = self.qaoas[str(d)](row)[0].to(torch.float64)
            self.log("ideal_expected_cost", ideal, **log)
            if self.exact is not None:
                self.log("ideal_ratio", self._ratio(ideal), **log)
        if self.gw is not None and "cut" in self.gw:
            self.log("ratio_to_gw", (prob @ self._objective_vec) / self.gw["cut"], **log)
        if not self._warm_logged and self.warm_start is not None:
            # the references of the warm start, once per fit (in the first step's row)
            self._warm_logged = True
            for name, value in self.warm_start_summary().items():
                self.log(name, torch.tensor(value, dtype=torch.float64), **log)

    @torch.no_grad()
    def _metric(self, angles: torch.Tensor) -> torch.Tensor:
        """Fubini–Study metric ``(n_starts, 2P, 2P)`` of the current depth d's states w.r.t. the
        columns of ``angles`` that depth reads (identity on the unused ones, whose gradient is 0)."""
        d, P = self.depth, self.max_depth
        g = opt.qaoa_metric(self.qaoas[str(d)], self._layout(angles, d))
        if d == P:
            return g
        cols = torch.cat([torch.arange(d), torch.arange(P, P + d)]).to(g.device)
        full = torch.eye(2 * P, dtype=g.dtype, device=g.device).repeat(g.shape[0], 1, 1)
        full[:, cols[:, None], cols[None, :]] = g
        return full

    def configure_optimizers(self):
        name = self.hparams.optimizer.lower()
        lr = self.hparams.lr if self.hparams.lr is not None else DEFAULT_LRS.get(name)
        if name == "qng":
            return opt.QAOANaturalGradient(self.angles, self._metric, lr=lr)
        if name == "spsa":
            return opt.MultiStartSPSA([self.angles], lr=lr, seed=int(self.hparams.seed))
        return make_optimizer(self.hparams.optimizer, [self.angles], lr, default_lrs=DEFAULT_LRS)

    @torch.no_grad()
    def warm_start_summary(self) -> dict:
        """The references of ``mixer="warm"`` (empty dict without it): ``warm_start_cost``, the
        expected cost of the warm-start state itself (p = 0: every angle 0), its approximation ratio
        ``warm_start_ratio`` where the optimum is known, and for the Goemans–Williamson warm start
        ``gw_cut`` (the best rounded cut, the warm start), ``gw_sdp_value`` and ``gw_upper_bound``
        (the certified SDP bound, >= the max cut) on MaxCut; on other problems, from
        :func:`~torchquantum_layers.optimization.ising_sdp`, ``sdp_cost`` (the cost of the best
        rounded bitstring, the warm start), ``sdp_value`` and ``sdp_lower_bound`` (certified, <= the
        minimum cost)."""
        if self.warm_start is None:
            return {}
        model = self.qaoas[str(self.depth)]
        cost = float(model(torch.zeros(1, 2 * model.p, dtype=self.angles.dtype, device=self.angles.device))[0])
        out = {"warm_start_cost": cost}
        if self.exact is not None:
            out["warm_start_ratio"] = float(self._ratio(cost))
        if self.gw is not None and "cut" in self.gw:
            out.update(gw_cut=self.gw["cut"], gw_sdp_value=self.gw["sdp_value"],
                       gw_upper_bound=self.gw["upper_bound"])
        elif self.gw is not None:
            out.update(sdp_cost=self.gw["cost"], sdp_value=self.gw["sdp_value"],
                       sdp_lower_bound=self.gw["lower_bound"])
        return out

    def on_save_checkpoint(self, checkpoint) -> None:
        checkpoint["qaoa_depth"] = int(self.depth)
        checkpoint["qaoa_history"] = [float(v) for v in self._history]
        if self.warm_start is not None:
            # the resolved warm start: a resumed or reloaded task uses this one, not a new GW run
            checkpoint["qaoa_warm_start"] = {"values": list(self.warm_start),
                                             "gw": None if self.gw is None else dict(self.gw)}

    def on_load_checkpoint(self, checkpoint) -> None:
        depth = int(checkpoint.get("qaoa_depth", self.depth))
        if str(depth) not in self.qaoas:
            raise ValueError(f"QAOATask: the checkpoint is at depth {depth}, which this task (p={self.max_depth}, "
                             f"grow={self.hparams.grow}) does not train")
        self.depth = depth
        self._history = [torch.tensor(v, dtype=torch.float64) for v in checkpoint.get("qaoa_history", [])]
        saved = checkpoint.get("qaoa_warm_start")
        if saved is not None and self.warm_start is not None:
            self._restore_warm_start(saved)

    def _restore_warm_start(self, saved: dict) -> None:
        """Take the checkpoint's warm start (the one its angles were trained from). A GW default is
        replaced by the saved cut (GW is not trusted to round the same cut on another machine); an
        explicit warm start must equal the saved one."""
        values = [float(v) for v in saved["values"]]
        if values == self.warm_start:
            if saved.get("gw") is not None:
                self.gw = dict(saved["gw"])           # the saved numbers, bit for bit
            return
        spec = self.hparams.warm_start
        if saved.get("gw") is None or not (spec is None or spec == "goemans_williamson"):
            raise ValueError(f"QAOATask: the checkpoint was trained from warm_start={values}, this task has "
                             f"warm_start={self.warm_start} (from {spec!r}); resume with the checkpoint's warm start")
        if len(values) != self.problem.n_qubits:
            raise ValueError(f"QAOATask: the checkpoint's warm start has {len(values)} values, this problem "
                             f"{self.problem.n_qubits} qubits")
        self.warm_start, self.gw = values, dict(saved["gw"])
        self.qaoas = self._build_qaoas(device=self.angles.device)
        if self.device_noise is not None:
            self.noisy = self._build_noisy(device=self.angles.device)

    def on_train_start(self) -> None:
        # a resumed run starts at the saved step: drop history entries the checkpoint did not reach
        del self._history[self.global_step:]
        self._seen_step = -1
        self._warm_logged = False

    # -- results ----------------------------------------------------------------------------------
    @property
    def history(self) -> list:
        """``expected_cost`` of the best start at each optimizer step (floats)."""
        return [float(v) for v in self._history]

    @property
    def n_qubits(self) -> int:
        return self.problem.n_qubits

    @torch.no_grad()
    def _best_state(self):
        """(depth, angles (2d,), cost) of the best start kept, evaluating the current angles too
        (the last optimizer step is not logged before fit ends)."""
        costs = self.expected_costs()
        j = int(torch.argmin(costs))
        now = (float(costs[j]), self.depth, self.current_angles()[j].detach().clone())
        kept = float(self.best_cost_)
        if math.isfinite(kept) and kept <= now[0]:
            d = int(self.best_depth_)
            return d, self._layout(self.best_angles_, d).clone(), kept
        return now[1], now[2], now[0]

    @property
    def best(self) -> QAOABest:
        """The best start: depth, angles, expected cost, ratio, optimum probability, top bitstrings
        and the decoded solution of the most probable one."""
        d, angles, cost = self._best_state()
        noisy = self.device_noise is not None
        res = (self.noisy if noisy else self.qaoas)[str(d)].analyse(angles, k=self.hparams.top_k)
        bits = list(res.top_bitstrings)
        top = bits[0]
        solution = self.problem.decode(top)
        # the objective of the solution reported (an infeasible top bitstring is repaired by decode,
        # and the objective of the raw bitstring, e.g. the weight of a non-independent set, is not
        # that of any solution)
        objective = float(self.problem.objective(self.problem.encode(solution)))
        ideal = ideal_ratio = None
        if noisy:
            with torch.no_grad():
                ideal = float(self.qaoas[str(d)](angles))
            ideal_ratio = None if self.exact is None else float(self._ratio(ideal))
        return QAOABest(depth=d, angles=angles.cpu(), expected_cost=cost,
                        approximation_ratio=None if res.approximation_ratio is None else float(res.approximation_ratio),
                        optimum_probability=None if res.optimum_probability is None else float(res.optimum_probability),
                        top_bitstrings=bits, top_probabilities=[float(x) for x in res.top_probabilities],
                        solution=solution, objective=objective, ideal_expected_cost=ideal,
                        ideal_approximation_ratio=ideal_ratio)

    def evaluation(self) -> dict:
        """The best start at the current angles: ``expected_cost``, ``expected_objective``, where
        the optimum is known ``best_ratio`` and ``optimum_probability``, and with ``cvar_alpha`` the
        lowest ``cvar`` over the starts (what ``tql validate|test|predict`` report, as
        ``val_expected_cost``, ...). With ``noise_model`` these are as the device reports them
        (module notes), plus ``ideal_expected_cost`` and ``ideal_ratio`` of the same start."""
        with torch.no_grad():
            costs = self.expected_costs()
            j = torch.argmin(costs).reshape(1)
            row = self.current_angles().detach().index_select(0, j)
            prob = self._probabilities(self.depth, row)[0]
        best = float(costs[j[0]])
        out = {"expected_cost": best, "expected_objective": float(prob @ self._objective_vec)}
        if self.problem.is_constrained:
            out["feasible_probability"] = float(prob @ self._feasible_vec)
        if self.exact is not None:
            out["best_ratio"] = float(self._ratio(best))
            out["optimum_probability"] = float(prob @ self._optimum_vec)
        if self.device_noise is not None:
            with torch.no_grad():
                ideal = float(self.qaoas[str(self.depth)](row)[0])
            out["ideal_expected_cost"] = ideal
            if self.exact is not None:
                out["ideal_ratio"] = float(self._ratio(ideal))
        if self.hparams.cvar_alpha is not None:
            with torch.no_grad():
                out["cvar"] = float(self().min())
        if self.gw is not None and "cut" in self.gw:
            out["ratio_to_gw"] = out["expected_objective"] / self.gw["cut"]
        out.update(self.warm_start_summary())
        return out

    @property
    def best_cost(self) -> float:
        return self._best_state()[2]

    @property
    def best_angles(self) -> torch.Tensor:
        return self._best_state()[1].cpu()

    @property
    def best_ratio(self) -> Optional[float]:
        return self.best.approximation_ratio

    @property
    def top_bitstrings(self) -> list:
        return self.best.top_bitstrings

    @property
    def solution(self):
        return self.best.solution

    @torch.no_grad()
    def result(self, shots: Optional[int] = None, seed: int = 0):
        """:meth:`QAOA.analyse <torchquantum_layers.optimization.QAOA.analyse>` of every start at the
        current depth (expected costs, ratios, top bitstrings, optional seeded samples); noiseless
        also with ``noise_model`` (the device's view of a start: :attr:`best`, :meth:`evaluation`,
        or ``task.noisy[str(task.depth)].analyse(angles)``)."""
        gen = torch.Generator(device=self.angles.device).manual_seed(seed) if shots else None
        return self.qaoas[str(self.depth)].analyse(self.current_angles().detach(), k=self.hparams.top_k,
                                                   shots=shots, generator=gen)
