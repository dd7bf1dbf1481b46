"""QAOA on a noisy device: the costs and bitstring distribution a device with a noise model reports.

:class:`NoisyQAOA` runs the gate-level QAOA of :func:`~.gate_level.gate_level_qaoa` (X mixer: H on
every wire, then per layer ``RZ(2γ h_i)``, ``RZZ(2γ J_ij)`` from the cost's Ising form and
``RX(2β)`` on every wire; ``mixer="xy"``: ``RXX(β) RYY(β)`` per ring pair of each one-hot group;
``mixer="swap"`` (TSP): one DOUBLEEXCITATION-based term per city exchange, both from the uniform
feasible superposition; ``mixer="warm"`` with ``warm_start=c, epsilon=ε``: ``RY(θ_i)`` from |0…0⟩ and
``RY(-θ_i) RZ(2β) RY(θ_i)`` per wire, see :mod:`.gate_level`) under a
:class:`~torchquantum_layers.mixed.NoiseModel`: each channel follows the gates its rule names (``gates="RZZ"``: after every cost interaction), readout errors flip the read bits.
``angles`` are ``(S, 2p)`` rows ``[γ_1 … γ_p, β_1 … β_p]`` as in :class:`~.qaoa.QAOA`; all S starts
run as ONE batch of density matrices ``(S, 2**n, 2**n)`` (``simulator="density"``, exact) or of
``S × n_trajectories`` state vectors (``simulator="trajectories"``, an unbiased estimate).

``forward(angles)`` returns the expected costs ``(S,)`` the device reports, ``Tr(ρ C)`` read
through the readout errors, with C the problem's cost Hamiltonian INCLUDING its constant offset
(so without noise it equals :class:`~.qaoa.QAOA`'s expected cost; on the maximally mixed state it
is the mean of the cost over all bitstrings, where depolarising noise leads). ``mitigation``:

* ``"readout"``: the readout-mitigated observable (``ReadoutError.mitigated_observable``), whose
  read-out value is exactly the pre-readout ``Tr(ρ C)``;
* ``"zne"``: zero-noise extrapolation by unitary folding (``tql.mixed.zne_expval``, at
  ``zne_scale_factors``, default 1, 3, 5, extrapolated by ``extrapolation``, default Richardson);
  every gate of the circuit is folded, the W-state preparation of the XY mixer on colouring
  included; an ideal start state (TSP, portfolio: ``preparation == "ideal"``) is not a gate and is
  neither noisy nor folded;
* ``"zne+readout"``: both.

Gradients with respect to the angles come by backprop through the simulation (``diff_method=
"backprop"``, default) or by the parameter-shift rule on density matrices (``"parameter-shift"``).

:meth:`NoisyQAOA.probabilities` is the output distribution ``(S, 2**n)`` as read out (readout
errors included; ``mitigation="readout"`` inverts the confusion matrices); :meth:`NoisyQAOA.analyse`
reports, per start, the reported cost, its approximation ratio ``(C_worst - E) / (C_worst - C_opt)``
(a mitigated cost may leave [0, 1]), and from the read-out distribution the probability of an
optimal bitstring, the expected objective and the top bitstrings, as a :class:`~.qaoa.QAOAResult`.

Density matrices hold ``4**n`` entries per start: above :data:`MAX_DENSITY_QUBITS` qubits the
density simulator is refused; ``simulator="trajectories"`` needs ``2**n`` per trajectory.
"""
from __future__ import annotations

import numbers
import weakref
from typing import Optional

import torch
from torch import nn

from ..kernels.state import COMPLEX_DTYPES, REAL_OF
from .angles import _check_p
from .problems import MAX_EXACT_QUBITS, Problem, exact_solution
from .gate_level import GATE_MIXERS, gate_level_qaoa
from .qaoa import QAOAResult

__all__ = ["NoisyQAOA", "noisy_expected_cost", "noisy_probabilities", "MAX_DENSITY_QUBITS", "SIMULATORS",
           "NOISY_MITIGATIONS"]

# A batch of S density matrices of n qubits holds S · 4**n complex entries: 12 qubits are 256 MiB
# per start in complex128, where a few starts and the backward pass still fit a workstation.
MAX_DENSITY_QUBITS = 12
SIMULATORS = ("density", "trajectories")
NOISY_MITIGATIONS = ("zne", "readout", "zne+readout")
DIFF_METHODS = ("backprop", "parameter-shift")


def _check_noise_model(noise_model, what):
    from ..mixed import NoiseModel
    if isinstance(noise_model, NoiseModel):
        return noise_model
    hint = (" (build one from a plain-data spec with lightning_tasks.noise_spec.noise_model_from_spec)"
            if isinstance(noise_model, dict) else "")
    if noise_model is None:
        hint = " (without noise use tql.optimization.qaoa, the exact state-vector engine)"
    raise TypeError(f"{what}: noise_model must be a tql.NoiseModel, got {type(noise_model).__name__}{hint}")


def _positive_int(value, name, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{what}: {name} must be a positive int, got {value!r}")
    return int(value)


class NoisyQAOA(nn.Module):
    """The X-mixer QAOA of ``problem`` with ``p`` layers, run under ``noise_model`` (module notes).

    Args:
        problem: a :class:`~.problems.Problem` (one; graph batches are not simulated noisily).
        p: number of layers (int >= 1).
        noise_model: a :class:`~torchquantum_layers.mixed.NoiseModel` (channels after gates,
            readout errors).
        mitigation: None, ``"zne"``, ``"readout"`` or ``"zne+readout"``.
        zne_scale_factors: noise scales of ZNE (default 1, 3, 5; at least two distinct, >= 1).
        extrapolation: ``"richardson"`` (default), ``"linear"``, ``"polynomial"`` (with
            ``order``) or ``"exponential"`` (toward the read-out value on the maximally mixed state).
        fold_method: ``"global"`` (default), ``"left"`` or ``"random"`` (see ``tql.mixed.fold_gates``).
        simulator: ``"density"`` (default, exact) or ``"trajectories"`` (estimates from
            ``n_trajectories`` sampled Kraus branches per start; pass a ``generator`` to seed them).
        diff_method: ``"backprop"`` (default) or ``"parameter-shift"``.
        mixer: ``"x"`` (default), ``"xy"`` (one-hot problems: colouring, TSP, portfolio) or
            ``"swap"`` (TSP): the gate-level circuits of :func:`~.gate_level.gate_level_qaoa`. The XY
            and swap mixers start from the uniform feasible superposition, prepared by gates (W
            states) for colouring, else given as an ideal, noise-free start state that ZNE does not
            fold (``self.preparation``: ``"gates"`` or ``"ideal"``).
        warm_start, epsilon: with ``mixer="warm"`` (warm-start QAOA) only: the warm start (a bitstring,
            probabilities of bit 1, or a ``goemans_williamson`` / ``ising_sdp`` result) and its
            regularisation ε (default 0.25), as ``qaoa(mixer="warm")``; its ``RY`` preparation is
            gates, noisy and folded by ZNE.
        dtype: complex64 (default) or complex128; ``.double()`` / ``.to(device)`` also work.
    """

    def __init__(self, problem, p: int, noise_model, mitigation: Optional[str] = None,
                 zne_scale_factors=(1, 3, 5), extrapolation: str = "richardson", order: Optional[int] = None,
                 fold_method: str = "global", simulator: str = "density", n_trajectories: int = 64,
                 diff_method: str = "backprop", mixer: str = "x", dtype=None, device=None, warm_start=None,
                 epsilon: Optional[float] = None):
        super().__init__()
        what = "NoisyQAOA"
        from ..mixed.zne import EXTRAPOLATIONS, FOLD_METHODS, _check_scales
        if not isinstance(problem, Problem):
            raise TypeError(f"{what}: expected a Problem (from the optimization builders), got "
                            f"{type(problem).__name__}")
        self.p = _check_p(p, what)
        if mixer not in GATE_MIXERS:
            raise ValueError(f"{what}: mixer must be one of {GATE_MIXERS} (the gate-level circuits of "
                             f"optimization.gate_level), got {mixer!r}")
        self.noise_model = _check_noise_model(noise_model, what)
        if mitigation is not None and mitigation not in NOISY_MITIGATIONS:
            raise ValueError(f"{what}: mitigation must be None, 'zne', 'readout' or 'zne+readout', got {mitigation!r}")
        if mitigation and "readout" in mitigation and self.noise_model.readout is None:
            raise ValueError(f"{what}: mitigation={mitigation!r} needs readout errors in the noise model "
                             f"(NoiseModel.add_readout_error)")
        if mitigation and "zne" in mitigation and not self.noise_model.rules:
            raise ValueError(f"{what}: mitigation={mitigation!r} amplifies the noise of gates, but the noise model has "
                             f"no channel rules (only readout errors): use mitigation='readout'")
        self.mitigation = mitigation
        self.zne_scale_factors = _check_scales(zne_scale_factors, f"{what}: zne_scale_factors")
        if extrapolation not in EXTRAPOLATIONS:
            raise ValueError(f"{what}: extrapolation must be one of {EXTRAPOLATIONS}, got {extrapolation!r}")
        if extrapolation == "polynomial":
            S = len(self.zne_scale_factors)
            if order is None or isinstance(order, bool) or not isinstance(order, int) or not 0 <= order < S:
                raise ValueError(f"{what}: extrapolation='polynomial' needs an int order with 0 <= order < {S} (the "
                                 f"number of zne_scale_factors), got order={order!r}")
        elif order is not None:
            raise ValueError(f"{what}: order applies to extrapolation='polynomial' only, got "
                             f"extrapolation={extrapolation!r}")
        self.extrapolation, self.order = extrapolation, order
        if fold_method not in FOLD_METHODS:
            raise ValueError(f"{what}: fold_method must be one of {FOLD_METHODS}, got {fold_method!r}")
        self.fold_method = fold_method
        if simulator not in SIMULATORS:
            raise ValueError(f"{what}: simulator must be one of {SIMULATORS}, got {simulator!r}")
        n = problem.n_qubits
        if simulator == "density" and n > MAX_DENSITY_QUBITS:
            raise ValueError(f"{what}: {n} qubits need density matrices of 4**{n} entries per start; the density "
                             f"simulator is limited to {MAX_DENSITY_QUBITS} qubits: use simulator='trajectories' "
                             f"(state vectors of 2**{n} entries, an unbiased estimate)")
        self.simulator = simulator
        self.n_trajectories = _positive_int(n_trajectories, "n_trajectories", what)
        if diff_method not in DIFF_METHODS:
            raise ValueError(f"{what}: diff_method must be one of {DIFF_METHODS}, got {diff_method!r} (the adjoint "
                             f"method cannot un-compute a noisy state)")
        if simulator == "trajectories" and diff_method != "backprop":
            raise ValueError(f"{what}: simulator='trajectories' differentiates by backprop only, got "
                             f"diff_method={diff_method!r}")
        self.diff_method = diff_method
        if dtype is not None and dtype not in COMPLEX_DTYPES:
            raise TypeError(f"{what}: dtype must be torch.complex64 or torch.complex128, got {dtype}")
        self.problem = problem
        self.mixer = mixer
        gl = gate_level_qaoa(problem, self.p, mixer, dtype=dtype, device=device, warm_start=warm_start,
                             epsilon=epsilon)
        self.warm_start = gl.warm_start          # mixer="warm": the regularised c (1, n) float64, else None
        self.epsilon = None if mixer != "warm" else (0.25 if epsilon is None else float(epsilon))
        self.circuit = gl.circuit
        self.preparation = gl.preparation
        self._init64 = gl.initial_state          # (1, 2**n) complex128, or None: |0…0⟩ (prepared by gates)
        self._init_cache = {}
        self._exact = None
        self._mitigated = (None, None)          # (readout error, its mitigated cost observable)

    # -- description ----------------------------------------------------------------------------
    @property
    def n_qubits(self) -> int:
        return self.problem.n_qubits

    @property
    def dtype(self) -> torch.dtype:
        return self.circuit.dtype

    @property
    def device(self) -> torch.device:
        return self.circuit.device

    @property
    def hamiltonian(self):
        """The cost Hamiltonian C, constant offset included (an all-Z Hamiltonian)."""
        return self.problem.hamiltonian

    def extra_repr(self) -> str:
        return (f"problem={self.problem.name}, n_qubits={self.n_qubits}, p={self.p}, mixer={self.mixer!r}, "
                f"noise={self.noise_model!r}, "
                f"mitigation={self.mitigation!r}, simulator={self.simulator!r}")

    # -- evaluation ------------------------------------------------------------------------------
    def _angles(self, angles, what):
        angles = _as_tensor(angles, what, f"(S, {2 * self.p})")
        if angles.is_complex() or angles.dtype == torch.bool or not angles.is_floating_point():
            raise TypeError(f"{what}: angles must be a real floating tensor, got {angles.dtype}")
        if angles.dim() not in (1, 2) or angles.shape[-1] != 2 * self.p or (angles.dim() == 2 and angles.shape[0] < 1):
            raise ValueError(f"{what}: angles must have shape (S, {2 * self.p}) or ({2 * self.p},) for p={self.p} "
                             f"([γ_1 … γ_p, β_1 … β_p] per start), got {tuple(angles.shape)}")
        if angles.device != self.device:
            raise TypeError(f"{what}: angles are on {angles.device} but the model is on {self.device}")
        return angles.to(REAL_OF[self.dtype])

    def _start_state(self):
        """The ideal start state ``(1, 2**n)`` in the model's dtype and device (None: |0…0⟩, the
        preparation is gates of the circuit); converted once per dtype/device."""
        if self._init64 is None:
            return None
        key = (self.dtype, str(self.device))
        st = self._init_cache.get(key)
        if st is None:
            st = self._init64.to(device=self.device, dtype=self.dtype)
            self._init_cache = {key: st}
        return st

    def _check_generator(self, generator, what):
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
        if generator is not None and self.simulator == "density":
            raise ValueError(f"{what}: generator seeds the trajectories; the density simulator is exact and "
                             f"draws nothing (leave generator=None)")

    def _observable(self):
        """C, or with readout mitigation the observable whose read-out value is C's: built once per
        readout error of the model (a training loop then reuses it and its expectation tables)."""
        if not (self.mitigation and "readout" in self.mitigation):
            return self.hamiltonian
        readout = self.noise_model.readout
        if readout is None:
            raise ValueError(f"NoisyQAOA: mitigation={self.mitigation!r} needs readout errors, and the noise model "
                             f"no longer has any")
        if self._mitigated[0] is not readout:
            self._mitigated = (readout, readout.mitigated_observable(self.hamiltonian))
        return self._mitigated[1]

    def forward(self, angles, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """Expected costs ``(S,)`` (0-d for angles ``(2p,)``) as the noisy device reports them,
        after ``mitigation``; differentiable with respect to ``angles``."""
        from .. import mixed
        what = "NoisyQAOA"
        x = self._angles(angles, what)
        self._check_generator(generator, what)
        H = self._observable()
        kwargs = dict(x=x, state=self._start_state(), noise_model=self.noise_model, diff_method=self.diff_method)
        if self.simulator == "trajectories":
            kwargs.update(n_trajectories=self.n_trajectories, generator=generator)
        if self.mitigation and "zne" in self.mitigation:
            return mixed.zne_expval(self.circuit, H, scale_factors=self.zne_scale_factors,
                                    extrapolation=self.extrapolation, order=self.order,
                                    fold_method=self.fold_method, simulator=self.simulator, **kwargs)
        if self.simulator == "trajectories":
            return mixed.trajectories.expval(self.circuit, H, **kwargs)
        return mixed.expval(self.circuit, H, **kwargs)

    def probabilities(self, angles, generator: Optional[torch.Generator] = None,
                      mitigation: Optional[str] = None) -> torch.Tensor:
        """Probabilities ``(S, 2**n)`` (``(2**n,)`` for angles ``(2p,)``) of reading each bitstring
        (index = basis state, wire 0 the most significant bit), readout errors included;
        ``mitigation="readout"`` passes them through the inverse confusion matrices (exact
        probabilities come back as before readout). Differentiable by backprop. ZNE is not applied
        to distributions (an extrapolated distribution is no distribution)."""
        from .. import mixed
        what = "NoisyQAOA.probabilities"
        x = self._angles(angles, what)
        self._check_generator(generator, what)
        if mitigation not in (None, "readout"):
            raise ValueError(f"{what}: mitigation must be None or 'readout' (ZNE extrapolates expectation values, "
                             f"not distributions), got {mitigation!r}")
        readout = self.noise_model.readout
        if mitigation == "readout" and readout is None:
            raise ValueError(f"{what}: mitigation='readout' needs readout errors in the noise model")
        squeeze = x.dim() == 1
        x = x.reshape(-1, 2 * self.p)
        if self.simulator == "density":
            rho = mixed.run(self.circuit, x=x, state=self._start_state(), noise_model=self.noise_model)
            probs = torch.diagonal(rho, dim1=-2, dim2=-1).real
        else:
            psi = mixed.trajectories.run(self.circuit, x=x, state=self._start_state(), noise_model=self.noise_model,
                                         n_trajectories=self.n_trajectories, generator=generator)
            probs = (psi.real.square() + psi.imag.square()).mean(1)
        if readout is not None:
            probs = readout.noisy_probabilities(probs)
            if mitigation == "readout":
                probs = readout.mitigated_probabilities(probs)
        return probs[0] if squeeze else probs

    # -- analysis --------------------------------------------------------------------------------
    def exact(self):
        """The brute-force optimum (:func:`~.problems.exact_solution`), None above
        ``MAX_EXACT_QUBITS`` qubits; computed once."""
        if self._exact is None and self.n_qubits <= MAX_EXACT_QUBITS:
            self._exact = exact_solution(self.problem)
        return self._exact

    def approximation_ratio(self, cost: torch.Tensor) -> Optional[torch.Tensor]:
        """``(C_worst - cost) / (C_worst - C_opt)`` (float64, same shape; None without the optimum).
        1 at the optimum, 0 at the worst bitstring; a ZNE-mitigated cost can leave [0, 1]."""
        ex = self.exact()
        if ex is None:
            return None
        span = float(ex.worst_cost) - float(ex.cost)
        return (float(ex.worst_cost) - cost.to(torch.float64)) / (span if span > 0 else 1.0)

    @torch.no_grad()
    def analyse(self, angles, k: int = 5, shots: Optional[int] = None,
                generator: Optional[torch.Generator] = None) -> QAOAResult:
        """Per start: ``expected_cost`` as reported (after ``mitigation``), its
        ``approximation_ratio``, and from the read-out distribution (:meth:`probabilities`,
        unmitigated: what sampling the device gives) ``optimum_probability``,
        ``feasible_probability``, ``expected_objective``, the ``k`` most probable bitstrings and,
        with ``shots``, that many samples per start (seeded by ``generator``; with trajectories
        the generator seeds those first). ``best`` is the start of the lowest reported cost."""
        what = "NoisyQAOA.analyse"
        k = _positive_int(k, "k", what)
        if shots is not None:
            shots = _positive_int(shots, "shots", what)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"{what}: generator must be a torch.Generator, got {type(generator).__name__}")
        x = self._angles(angles, what)
        squeeze = x.dim() == 1
        x = x.reshape(-1, 2 * self.p)
        traj = generator if self.simulator == "trajectories" else None
        cost = self.forward(x, traj).to(torch.float64)
        prob = self.probabilities(x, traj).to(torch.float64)
        N = 2 ** self.n_qubits
        k = min(k, N)
        dev = prob.device
        feas = (prob @ self.problem.feasible_mask().to(dev, torch.float64))
        obj = prob @ self.problem.objective_vector().to(dev)
        ex = self.exact()
        ratio = opt_p = None
        if ex is not None:
            ratio = self.approximation_ratio(cost)
            optimum = torch.zeros(N, dtype=torch.float64, device=dev)
            optimum[ex.indices.to(dev)] = 1.0
            opt_p = prob @ optimum
        tp, ti = torch.topk(prob, k, dim=1)
        bits = [[format(int(i), f"0{self.n_qubits}b") for i in row] for row in ti.tolist()]
        samples = None
        if shots is not None:
            # clamp: exact probabilities may be -1e-17 after the readout maps
            samples = torch.multinomial(prob.clamp_min(0), shots, replacement=True, generator=generator)
        best = (int(torch.argmin(cost)),)
        if squeeze:
            cost, feas, obj, tp, ti, bits = cost[0], feas[0], obj[0], tp[0], ti[0], bits[0]
            ratio = None if ratio is None else ratio[0]
            opt_p = None if opt_p is None else opt_p[0]
            samples = None if samples is None else samples[0]
            best = ()
        return QAOAResult(angles=torch.as_tensor(angles).detach(), expected_cost=cost, expected_objective=obj,
                          approximation_ratio=ratio, optimum_probability=opt_p, feasible_probability=feas,
                          top_indices=ti, top_probabilities=tp, top_bitstrings=bits, samples=samples, best=best)


# the functional forms build the module once per (problem, settings): the folded circuits and the
# segment plans that the density simulator caches per circuit are then reused call after call
_MODULES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _module(problem, p, noise_model, dtype, device, **settings) -> NoisyQAOA:
    if not isinstance(problem, Problem):
        raise TypeError(f"noisy QAOA: expected a Problem (from the optimization builders), got "
                        f"{type(problem).__name__}")
    key = (p, id(noise_model), noise_model.version if hasattr(noise_model, "version") else None,
           id(getattr(noise_model, "readout", None)), dtype, str(device),
           tuple((k, tuple(v) if isinstance(v, list) else
                  ("tensor", tuple(v.shape), tuple(v.reshape(-1).tolist())) if isinstance(v, torch.Tensor) else v)
                 for k, v in sorted(settings.items())))
    cache = _MODULES.setdefault(problem, {})
    hit = cache.get(key)
    # held, not only its id: a freed model's id could be reused by a new one
    if hit is not None and hit[1] is noise_model:
        return hit[0]
    if len(cache) > 16:
        cache.clear()
    module = NoisyQAOA(problem, p, noise_model, dtype=dtype, device=device, **settings)
    cache[key] = (module, noise_model)
    return module


def _dtype_of(angles, dtype):
    if dtype is not None:
        return dtype
    return torch.complex128 if angles.dtype == torch.float64 else torch.complex64


def _as_tensor(angles, what, shape: str) -> torch.Tensor:
    """Angles as a tensor (lists and arrays become float64); a TypeError names what is not one."""
    if isinstance(angles, torch.Tensor):
        return angles
    try:
        return torch.as_tensor(angles, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{what}: angles must be a real tensor of shape {shape}, got "
                        f"{type(angles).__name__}") from None


def _settings(p, angles, what):
    angles = _as_tensor(angles, what, "(S, 2p)")
    if p is None:
        if not isinstance(angles, torch.Tensor) or angles.dim() == 0 or angles.shape[-1] % 2:
            raise ValueError(f"{what}: give p, or angles of shape (S, 2p) to read it from")
        p = angles.shape[-1] // 2
    return p, angles


def noisy_expected_cost(problem, angles, p: Optional[int] = None, noise_model=None, mitigation: Optional[str] = None,
                        zne_scale_factors=(1, 3, 5), extrapolation: str = "richardson", simulator: str = "density",
                        n_trajectories: int = 64, generator: Optional[torch.Generator] = None, dtype=None,
                        **options) -> torch.Tensor:
    """Expected costs ``(S,)`` of ``angles (S, 2p)`` that a device with ``noise_model`` reports,
    after ``mitigation`` (:class:`NoisyQAOA`; ``options``: order, fold_method, diff_method, mixer,
    warm_start, epsilon).
    ``p`` defaults to ``angles.shape[-1] // 2``; ``dtype`` to complex128 for float64 angles,
    complex64 otherwise. Differentiable with respect to ``angles``."""
    what = "noisy_expected_cost"
    p, angles = _settings(p, angles, what)
    _check_noise_model(noise_model, what)
    device = angles.device
    model = _module(problem, p, noise_model, _dtype_of(angles, dtype), device, mitigation=mitigation,
                    zne_scale_factors=list(zne_scale_factors) if hasattr(zne_scale_factors, "__iter__")
                    and not isinstance(zne_scale_factors, (str, bytes)) else zne_scale_factors,
                    extrapolation=extrapolation, simulator=simulator, n_trajectories=n_trajectories, **options)
    return model(angles, generator)


def noisy_probabilities(problem, angles, p: Optional[int] = None, noise_model=None, mitigation: Optional[str] = None,
                        simulator: str = "density", n_trajectories: int = 64,
                        generator: Optional[torch.Generator] = None, dtype=None, mixer: str = "x",
                        warm_start=None, epsilon: Optional[float] = None) -> torch.Tensor:
    """Probabilities ``(S, 2**n)`` of reading each bitstring off the noisy device, readout errors
    included (``mitigation="readout"``: through the inverse confusion matrices); see
    :meth:`NoisyQAOA.probabilities`."""
    what = "noisy_probabilities"
    p, angles = _settings(p, angles, what)
    _check_noise_model(noise_model, what)
    device = angles.device
    model = _module(problem, p, noise_model, _dtype_of(angles, dtype), device, simulator=simulator,
                    n_trajectories=n_trajectories, mixer=mixer, warm_start=warm_start, epsilon=epsilon)
    return model.probabilities(angles, generator, mitigation=mitigation)
