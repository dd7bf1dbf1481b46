"""Optimizers by name, shared by the VQE drivers and the Lightning recipes, and the two that
variational circuits want and ``torch.optim`` lacks: :class:`QNG`, :class:`SPSA`, :class:`Rotosolve`
(optim_rotosolve.py) and :class:`QNSPSA` (optim_qnspsa.py)."""
from __future__ import annotations

import math
from typing import Optional

import torch

__all__ = ["make_optimizer", "lbfgs", "optimizer_class", "needs_closure_without_backward", "NAMED_LRS", "QNG", "SPSA",
           "Rotosolve", "QNSPSA", "GRADIENT_FREE"]

NAMED_LRS = {"adam": 0.1, "sgd": 0.2, "lbfgs": 1.0, "qng": 0.2, "spsa": 0.5, "qnspsa": 0.1}
"""Default learning rates of the named optimizers (a caller may pass its own)."""


def optimizer_class(name: str):
    """A ``torch.optim`` class by case-insensitive name (``"AdamW"``, ``"rmsprop"``), or None."""
    for attr in dir(torch.optim):
        cls = getattr(torch.optim, attr)
        if attr.lower() == str(name).lower() and isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) \
                and cls is not torch.optim.Optimizer:      # the abstract base is no optimizer to make
            return cls
    return None


GRADIENT_FREE = ("spsa", "rotosolve", "qnspsa")
"""The names of :func:`make_optimizer` whose optimizers evaluate the loss only."""


def needs_closure_without_backward(optimizer) -> bool:
    """True for optimizers (SPSA, Rotosolve, QNSPSA; or their names, case-insensitive) whose
    closure must only evaluate the loss: a training loop that calls ``backward`` inside its
    closure has to give them another one."""
    if isinstance(optimizer, str):
        return optimizer.lower() in GRADIENT_FREE
    return isinstance(optimizer, (SPSA, Rotosolve, QNSPSA))


def lbfgs(params, lr: float = 1.0, line_search: bool = True) -> torch.optim.LBFGS:
    """The ``"lbfgs"`` optimizer: one iteration per step, history 50, with a strong-Wolfe line
    search of up to 25 evaluations; ``line_search=False`` takes the quasi-Newton step as it is
    (where energies are too coarse to search on, e.g. float32 near an optimum)."""
    if line_search:
        # max_eval must be given: its default (max_iter * 5 // 4 = 1) leaves the line search no evaluation
        return torch.optim.LBFGS(params, lr=lr, max_iter=1, max_eval=25, history_size=50,
                                 tolerance_grad=1e-10, tolerance_change=1e-14, line_search_fn="strong_wolfe")
    return torch.optim.LBFGS(params, lr=lr, max_iter=1, history_size=50, tolerance_grad=1e-10,
                             tolerance_change=1e-14)


def make_optimizer(optimizer, params, lr: Optional[float] = None,
                   default_lrs: Optional[dict] = None, circuit=None,
                   circuit_inputs: Optional[dict] = None) -> torch.optim.Optimizer:
    """``"adam"`` (lr 0.1), ``"sgd"`` (lr 0.2), ``"lbfgs"`` (lr 1, one iteration per step with a
    strong-Wolfe line search of up to 25 evaluations), ``"qng"`` (lr 0.2; :class:`QNG` of
    ``circuit``, which must then be given), ``"spsa"`` (lr 0.5, :class:`SPSA`), any other
    ``torch.optim`` class name (case-insensitive, its own default lr), a ``torch.optim.Optimizer``
    class, or a callable ``params -> optimizer``; ``"rotosolve"`` (:class:`Rotosolve`, no lr: it jumps
    to each angle's exact minimum; of ``circuit`` when given, else of the plain ``params``) and
    ``"qnspsa"`` (lr 0.1, :class:`QNSPSA` of ``circuit``, which must be given, with ``circuit_inputs``
    as QNG) evaluate the loss only, as SPSA does. ``default_lrs`` (``{name: lr}``) overrides
    :data:`NAMED_LRS` and the class defaults per name. ``circuit_inputs`` (``x``, ``state``,
    ``batch_weights``) is where QNG takes the metric: the circuit's inputs in the loss."""
    params = list(params)
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if lr is None:
            lr = {**NAMED_LRS, **{str(k).lower(): v for k, v in (default_lrs or {}).items()}}.get(key)
        if key == "adam":
            return torch.optim.Adam(params, lr=lr)
        if key == "sgd":
            return torch.optim.SGD(params, lr=lr)
        if key == "lbfgs":
            return lbfgs(params, lr)
        if key == "qng":
            if circuit is None:
                raise ValueError("optimizer 'qng' needs the tql.Circuit whose metric it solves with (circuit=...); "
                                 "it applies to circuits' angles only")
            return QNG(circuit, lr=lr, **(circuit_inputs or {}))
        if key == "spsa":
            return SPSA(params, lr=lr)
        if key == "rotosolve":
            if lr is not None:
                raise ValueError(f"optimizer 'rotosolve' takes no learning rate (it jumps to each angle's minimum), "
                                 f"got lr={lr!r}")
            return Rotosolve(circuit if circuit is not None else params)
        if key == "qnspsa":
            if circuit is None:
                raise ValueError("optimizer 'qnspsa' needs the tql.Circuit whose states give its fidelities "
                                 "(circuit=...); for plain parameters make tql.optim.QNSPSA(params, fidelity=...)")
            return QNSPSA(circuit, lr=lr, **(circuit_inputs or {}))
        cls = optimizer_class(optimizer)
        if cls is None:
            raise ValueError(f"optimizer must be 'adam', 'sgd', 'lbfgs', 'qng', 'spsa', 'rotosolve', 'qnspsa', "
                             f"a torch.optim class name, "
                             f"an Optimizer class or a callable, got {optimizer!r}")
        optimizer = cls
    if isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer):
        if optimizer is torch.optim.Optimizer:
            raise TypeError("optimizer: torch.optim.Optimizer is the abstract base class; give a concrete one "
                            "(torch.optim.Adam, 'sgd', ...)")
        return optimizer(params, lr=lr) if lr is not None else optimizer(params)
    if callable(optimizer):
        return optimizer(params)
    raise TypeError(f"optimizer must be a name, an Optimizer class or a callable, got {type(optimizer).__name__}")


def _positive(value, name: str, what: str, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = "≥ 0" if allow_zero else "> 0"
        raise ValueError(f"{what}: {name} must be a finite number {bound}, got {value!r}")
    return float(value)


def loss_of(closure):
    """The closure's loss, evaluated with gradients on (optimizers step under no_grad), or None."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def natural_gradient_update(param: torch.Tensor, metric: torch.Tensor, lr: float, regularization: float) -> None:
    """``θ ← θ − lr (g + λ I)⁻¹ ∇L`` in place, with one metric ``(M, M)`` for ``θ`` ``(M,)`` or one
    per row, ``(..., M, M)`` for ``(..., M)``, and ``∇L`` in ``param.grad``."""
    M = param.shape[-1]
    g = metric.reshape(-1, M, M).to(param.grad.dtype)
    eye = torch.eye(M, dtype=g.dtype, device=g.device)
    step = torch.linalg.solve(g + regularization * eye, param.grad.reshape(-1, M, 1))
    param.sub_(lr * step.reshape(param.shape))


class QNG(torch.optim.Optimizer):
    """Quantum natural gradient (Stokes, Izaac, Killoran, Carleo 2020) for a :class:`~tql.Circuit`.

    ``θ ← θ − lr · (g + λ I)⁻¹ ∇L`` with ``g`` the Fubini–Study metric of the circuit's output state
    at θ (:func:`tql.grad.quantum_fisher`, averaged over the batch of ``x`` / ``state`` when
    given, weighted by ``batch_weights`` when the loss weights the batch rows unequally, as
    SSVQE does) and ``λ = regularization`` keeping the solve well posed where ``g`` is singular.
    ``∇L`` is what ``backward`` left in ``circuit.weights.grad`` (any ``diff_method``); the metric
    costs one Jacobian of the state per step, so this pays where steps are few and expensive
    (VQE), not for wide classifiers. ``x`` / ``state`` may be changed between steps through
    :attr:`inputs`.
    """

    def __init__(self, circuit, lr: float = 0.1, regularization: float = 1e-3, x=None, state=None,
                 batch_weights=None):
        from .circuit import Circuit
        if not isinstance(circuit, Circuit):
            raise TypeError(f"QNG: expected a tql.Circuit, got {type(circuit).__name__}")
        if circuit.num_parameters == 0:
            raise ValueError("QNG: the circuit has no trainable parameters")
        if circuit.is_noisy:
            raise ValueError("QNG: the circuit has channels, measurements, resets or a noise model; the metric QNG "
                             "solves with is that of a pure state")
        lr = _positive(lr, "lr", "QNG")
        regularization = _positive(regularization, "regularization", "QNG", allow_zero=True)
        super().__init__([circuit.weights], dict(lr=lr, regularization=regularization))
        self.circuit = circuit
        self.inputs = {"x": x, "state": state}
        if batch_weights is not None:
            batch_weights = torch.as_tensor(batch_weights).detach()
            if batch_weights.dim() != 1 or not bool(torch.isfinite(batch_weights).all()) \
                    or bool((batch_weights < 0).any()) or not bool(batch_weights.sum() > 0):
                raise ValueError(f"QNG: batch_weights must be a 1-d tensor of finite non-negative weights with a "
                                 f"positive sum, got {batch_weights.tolist()}")
        self.batch_weights = batch_weights

    @torch.no_grad()
    def step(self, closure=None):
        from .grad import quantum_fisher
        loss = loss_of(closure)
        group = self.param_groups[0]
        (w,) = group["params"]
        if w is not self.circuit.weights:
            raise ValueError("QNG: circuit.weights was replaced after the optimizer was made (e.g. by "
                             "load_state_dict(assign=True)); make the optimizer after loading the circuit")
        if w.grad is None:
            return loss
        with torch.enable_grad():
            metrics = quantum_fisher(self.circuit, **self.inputs)
        if self.batch_weights is None:
            metric = metrics.mean(0)
        else:
            bw = self.batch_weights.to(device=metrics.device, dtype=metrics.dtype)
            if bw.shape[0] != metrics.shape[0]:
                raise ValueError(f"QNG: {bw.shape[0]} batch_weights for a batch of {metrics.shape[0]} states")
            metric = (bw[:, None, None] * metrics).sum(0) / bw.sum()
        natural_gradient_update(w, metric, group["lr"], group["regularization"])
        return loss


class SPSA(torch.optim.Optimizer):
    """Simultaneous perturbation stochastic approximation (Spall 1992): a gradient estimate from two
    loss evaluations per step whatever the number of parameters, no backward pass: for finite
    ``shots`` or any loss autograd cannot reach.

    Step k (from 0): ``a_k = lr / (k + 1 + stability)**alpha``, ``c_k = perturbation / (k + 1)**gamma``,
    ``Δ`` random ±1 per parameter, ``ĝ = (L(θ + c_k Δ) − L(θ − c_k Δ)) / (2 c_k) · Δ`` (averaged over
    ``resamplings`` draws of Δ), ``θ ← θ − a_k ĝ``. Spall's exponents 0.602 / 0.101 are the
    defaults. ``step(closure)`` needs a closure that returns the loss; it runs under
    ``torch.no_grad()``, so it must not call ``backward``. Δ of step k comes from ``seed`` and k
    alone, so a run resumed from ``state_dict()`` continues exactly as an uninterrupted one.
    ``step`` returns the mean of the evaluated losses (the loss near θ before the update).
    """

    def __init__(self, params, lr: float = 0.1, perturbation: float = 0.1, alpha: float = 0.602,
                 gamma: float = 0.101, stability: float = 0.0, resamplings: int = 1, seed: int = 0):
        for name, value in (("lr", lr), ("perturbation", perturbation), ("alpha", alpha), ("gamma", gamma)):
            _positive(value, name, "SPSA")
        _positive(stability, "stability", "SPSA", allow_zero=True)
        if isinstance(resamplings, bool) or not isinstance(resamplings, int) or resamplings < 1:
            raise ValueError(f"SPSA: resamplings must be a positive int, got {resamplings!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"SPSA: seed must be an int, got {type(seed).__name__}")
        super().__init__(params, dict(lr=float(lr), perturbation=float(perturbation), alpha=float(alpha),
                                      gamma=float(gamma), stability=float(stability),
                                      resamplings=resamplings, seed=seed))

    def _directions(self, group, index: int, k: int, r: int) -> list:
        g = torch.Generator().manual_seed(((group["seed"] * 1_000_003 + k) * 131 + r) * 17 + index)
        return [(torch.randint(0, 2, p.shape, generator=g, dtype=torch.int8) * 2 - 1).to(p.device, p.dtype)
                for p in group["params"]]

    @torch.no_grad()
    def step(self, closure=None):
        what = type(self).__name__
        if closure is None:
            raise ValueError(f"{what}: step needs a closure that returns the loss")
        losses = []
        for index, group in enumerate(self.param_groups):
            params = group["params"]
            state = self.state[params[0]]
            k = int(state.get("step", 0))
            a_k = group["lr"] / (k + 1 + group["stability"]) ** group["alpha"]
            c_k = group["perturbation"] / (k + 1) ** group["gamma"]
            estimate = [torch.zeros_like(p) for p in params]
            for r in range(group["resamplings"]):
                deltas = self._directions(group, index, k, r)
                for p, d in zip(params, deltas):
                    p.add_(d, alpha=c_k)
                plus = torch.as_tensor(closure()).detach()
                for p, d in zip(params, deltas):
                    p.sub_(d, alpha=2 * c_k)
                minus = torch.as_tensor(closure()).detach()
                for p, d in zip(params, deltas):
                    p.add_(d, alpha=c_k)
                for p, e, d in zip(params, estimate, deltas):
                    e.add_(d * self._slope(plus, minus, c_k, p).to(e.dtype) / group["resamplings"])
                losses += [plus.sum().to(torch.float64), minus.sum().to(torch.float64)]
            for p, e in zip(params, estimate):
                p.sub_(e, alpha=a_k)
            state["step"] = torch.tensor(k + 1)
        return torch.stack(losses).mean()

    def _slope(self, plus: torch.Tensor, minus: torch.Tensor, c_k: float, p: torch.Tensor) -> torch.Tensor:
        """The loss's slope along the direction, shaped to scale the direction of ``p``."""
        if plus.numel() != 1 or minus.numel() != 1:
            raise ValueError(f"SPSA: the closure must return a scalar loss, got shape {tuple(plus.shape)}")
        return (plus - minus).reshape(()) / (2 * c_k)


from .optim_qnspsa import QNSPSA  # noqa: E402  (re-exported: tql.optim.QNSPSA)
from .optim_rotosolve import Rotosolve  # noqa: E402  (re-exported: tql.optim.Rotosolve)
