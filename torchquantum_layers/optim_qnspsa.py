"""QN-SPSA (Gacon, Zoufal, Carleo, Woerner, Quantum 5, 567 (2021)): SPSA's two-evaluation gradient
preconditioned by a running 2-SPSA estimate of the Fubini–Study metric from four fidelities.

With ``F(h) = |⟨ψ(θ)|ψ(θ + h)⟩|² = 1 − hᵀ g h + O(h³)`` (g: the Fubini–Study metric, a quarter of
the quantum Fisher information) and independent random ±1 vectors Δ₁, Δ₂,

    δF = F(ε(Δ₁ + Δ₂)) − F(εΔ₁) − F(ε(−Δ₁ + Δ₂)) + F(−εΔ₁) = −4ε² Δ₁ᵀ g Δ₂ + O(ε⁴)

(the cubic terms cancel in expectation: odd moments of Δ₂ vanish), so
``ĝ = −δF / (8ε²) · (Δ₁Δ₂ᵀ + Δ₂Δ₁ᵀ)`` has ``E[ĝ] = g + O(ε²)``. Each entry's variance is at most
``‖g‖²_F``: one sample is a poor metric, so QN-SPSA averages them over the steps,
``ḡ_k = (k ḡ_{k−1} + ĝ_k) / (k + 1)``, makes the average positive definite as
``√(ḡ²) + β I`` (|eigenvalues|, then the regularization β) and steps
``θ ← θ − a_k (√(ḡ²) + β I)⁻¹ ∇̂L`` with SPSA's gradient ``∇̂L`` along Δ₁ and Spall's gains.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

import torch

__all__ = ["QNSPSA"]


def _number(value, name: str, allow_zero: bool) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        bound = "≥ 0" if allow_zero else "> 0"
        raise ValueError(f"QNSPSA: {name} must be a finite number {bound}, got {value!r}")
    return float(value)


class QNSPSA(torch.optim.Optimizer):
    """Quantum natural SPSA: 2 loss evaluations and 4 fidelities per step, any number of angles.

    ``QNSPSA(circuit, ...)`` optimises ``circuit.weights`` and takes the fidelities
    ``|⟨ψ(θ)|ψ(θ')⟩|²`` from the circuit's output states (run with the weights overridden; five
    states per step, no autograd; averaged over the batch of ``x`` / ``state``, weighted by
    ``batch_weights``, as :class:`~tql.optim.QNG` averages its metric). ``QNSPSA(params,
    fidelity=f, ...)`` optimises plain tensors with ``f(θ, θ')`` (two 1-d tensors: all parameters
    flattened and concatenated) returning the fidelity, e.g. a sampled one on hardware.

    Step k (from 0): ``a_k = lr / (k + 1 + stability)**alpha``, ``c_k = perturbation / (k + 1)**gamma``
    (``alpha = gamma = 0``: constant gains, as Qiskit's QNSPSA uses), random ±1 Δ₁, Δ₂ from
    ``seed`` and k (so a run resumed from ``state_dict()``, which keeps the step and the averaged
    metric, continues exactly), the gradient ``(L(θ + c_kΔ₁) − L(θ − c_kΔ₁)) / (2c_k) · Δ₁`` and the
    metric sample of the module notes with ε = c_k, both averaged over ``resamplings`` draws. The
    first ``hessian_delay`` steps only accumulate the metric and take plain SPSA steps.
    ``regularization`` is β. ``step(closure)`` needs a closure that returns the loss; it runs
    under ``no_grad`` and must not call ``backward``. It returns the mean of the evaluated losses;
    :attr:`metric` is the current average ḡ (``None`` before the first step).
    """

    def __init__(self, circuit_or_params, lr: float = 0.1, perturbation: float = 0.1,
                 regularization: float = 0.01, alpha: float = 0.602, gamma: float = 0.101,
                 stability: float = 0.0, resamplings: int = 1, hessian_delay: int = 0, seed: int = 0,
                 fidelity: Optional[Callable] = None, x=None, state=None, batch_weights=None):
        from .circuit import Circuit
        self.circuit = None
        if isinstance(circuit_or_params, Circuit):
            c = circuit_or_params
            if c.num_parameters == 0:
                raise ValueError("QNSPSA: the circuit has no trainable parameters")
            if c.is_noisy:
                raise ValueError("QNSPSA: the circuit has channels, measurements, resets or a noise model; the "
                                 "Fubini–Study metric QNSPSA estimates is that of a pure state")
            if fidelity is not None:
                raise ValueError("QNSPSA: fidelity= is for plain parameters; a circuit's comes from its states")
            self.circuit = c
            params = [c.weights]
        elif isinstance(circuit_or_params, (torch.Tensor, str, bytes)) or not hasattr(circuit_or_params, "__iter__"):
            raise TypeError(f"QNSPSA: circuit_or_params must be a tql.Circuit or an iterable of tensors, "
                            f"got {type(circuit_or_params).__name__}")
        else:
            params = list(circuit_or_params)
            if fidelity is None or not callable(fidelity):
                raise TypeError(f"QNSPSA: plain parameters need fidelity=, a callable (θ, θ') -> |⟨ψ(θ)|ψ(θ')⟩|², "
                                f"got {type(fidelity).__name__}")
            if x is not None or state is not None or batch_weights is not None:
                raise ValueError("QNSPSA: x, state and batch_weights are the inputs of a circuit's states")
        lr = _number(lr, "lr", False)
        perturbation = _number(perturbation, "perturbation", False)
        for name, value in (("regularization", regularization), ("alpha", alpha), ("gamma", gamma),
                            ("stability", stability)):
            _number(value, name, True)
        for name, value, low in (("resamplings", resamplings, 1), ("hessian_delay", hessian_delay, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"QNSPSA: {name} must be an int ≥ {low}, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"QNSPSA: seed must be an int, got {type(seed).__name__}")
        if batch_weights is not None:
            batch_weights = torch.as_tensor(batch_weights).detach()
            if batch_weights.dim() != 1 or not bool(torch.isfinite(batch_weights).all()) \
                    or bool((batch_weights < 0).any()) or not bool(batch_weights.sum() > 0):
                raise ValueError(f"QNSPSA: batch_weights must be a 1-d tensor of finite non-negative weights with "
                                 f"a positive sum, got {batch_weights.tolist()}")
        super().__init__(params, dict(lr=lr, perturbation=perturbation, regularization=float(regularization),
                                      alpha=float(alpha), gamma=float(gamma), stability=float(stability),
                                      resamplings=resamplings, hessian_delay=hessian_delay, seed=seed))
        if len(self.param_groups) != 1:
            raise ValueError("QNSPSA: one parameter group (the metric couples all parameters)")
        for p in self.param_groups[0]["params"]:
            if p.is_complex() or not p.is_floating_point():
                raise TypeError(f"QNSPSA: parameters must be real floating tensors, got {p.dtype}")
        self.fidelity = fidelity
        self.inputs = {"x": x, "state": state}
        self.batch_weights = batch_weights

    # -- pieces -----------------------------------------------------------------------------------
    @property
    def metric(self) -> Optional[torch.Tensor]:
        first = self.param_groups[0]["params"][0]
        return self.state[first].get("metric")

    def _directions(self, group, k: int, r: int, which: int, n: int, like: torch.Tensor) -> torch.Tensor:
        g = torch.Generator().manual_seed(((group["seed"] * 1_000_003 + k) * 131 + r) * 17 + 7 * which + 5)
        return (torch.randint(0, 2, (n,), generator=g, dtype=torch.int8) * 2 - 1).to(like.device, like.dtype)

    def _state_fidelities(self, theta: torch.Tensor, others: list) -> list:
        from .engine import run_circuit
        c = self.circuit
        x, state, _ = c.prepare(self.inputs["x"], self.inputs["state"], materialize=False)
        psi = run_circuit(c, state, x, theta.reshape(c.weights.shape))
        out = []
        bw = self.batch_weights
        for other in others:
            phi = run_circuit(c, state, x, other.reshape(c.weights.shape))
            f = ((psi.conj() * phi).sum(-1).abs() ** 2).to(torch.float64)
            if bw is None:
                out.append(float(f.mean()))
            else:
                if bw.shape[0] != f.shape[0]:
                    raise ValueError(f"QNSPSA: {bw.shape[0]} batch_weights for a batch of {f.shape[0]} states")
                w = bw.to(device=f.device, dtype=torch.float64)
                out.append(float((w * f).sum() / w.sum()))
        return out

    def _fidelities(self, theta, others) -> list:
        if self.circuit is not None:
            return self._state_fidelities(theta, others)
        return [float(torch.as_tensor(self.fidelity(theta.clone(), o.clone())).detach()) for o in others]

    # -- the step ---------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure=None):
        if closure is None or not callable(closure):
            raise ValueError("QNSPSA: step needs a closure that returns the loss (without backward)")
        group = self.param_groups[0]
        params = group["params"]
        if self.circuit is not None and params[0] is not self.circuit.weights:
            raise ValueError("QNSPSA: circuit.weights was replaced after the optimizer was made (e.g. by "
                             "load_state_dict(assign=True)); make the optimizer after loading the circuit")
        state = self.state[params[0]]
        k = int(state.get("step", 0))
        a_k = group["lr"] / (k + 1 + group["stability"]) ** group["alpha"]
        c_k = group["perturbation"] / (k + 1) ** group["gamma"]
        sizes = [p.numel() for p in params]
        n = sum(sizes)
        theta = torch.cat([p.detach().reshape(-1) for p in params]).to(torch.float64)

        def assign(vec):
            for p, chunk in zip(params, torch.split(vec, sizes)):
                p.copy_(chunk.reshape(p.shape).to(p.dtype))

        gradient = torch.zeros(n, dtype=torch.float64, device=theta.device)
        sample = torch.zeros(n, n, dtype=torch.float64, device=theta.device)
        losses = []
        for r in range(group["resamplings"]):
            d1 = self._directions(group, k, r, 1, n, theta)
            d2 = self._directions(group, k, r, 2, n, theta)
            values = []
            for point in (theta + c_k * d1, theta - c_k * d1):
                assign(point)
                value = torch.as_tensor(closure()).detach()
                if value.numel() != 1:
                    raise ValueError(f"QNSPSA: the closure must return a scalar loss, got shape {tuple(value.shape)}")
                values.append(float(value.reshape(())))
            assign(theta)
            gradient += (values[0] - values[1]) / (2 * c_k) * d1 / group["resamplings"]
            f = self._fidelities(theta, [theta + c_k * (d1 + d2), theta + c_k * d1,
                                         theta + c_k * (d2 - d1), theta - c_k * d1])
            delta_f = f[0] - f[1] - f[2] + f[3]
            outer = torch.outer(d1, d2)
            sample += -delta_f / (8 * c_k ** 2) * (outer + outer.T) / group["resamplings"]
            losses += values
        previous = state.get("metric")
        if previous is not None and previous.shape != (n, n):
            raise ValueError(f"QNSPSA: the parameters changed from {previous.shape[0]} to {n} entries; make a new "
                             f"optimizer for the grown circuit")
        like = params[0]
        average = sample if previous is None else (k * previous.to(torch.float64) + sample) / (k + 1)
        state["metric"] = average.to(like.dtype)          # the dtype load_state_dict restores it to
        average = state["metric"].to(torch.float64)
        if k >= group["hessian_delay"]:
            eigenvalues, vectors = torch.linalg.eigh(average)
            conditioned = (vectors * eigenvalues.abs()) @ vectors.T \
                + group["regularization"] * torch.eye(n, dtype=torch.float64, device=theta.device)
            direction = torch.linalg.solve(conditioned, gradient)
        else:
            direction = gradient
        assign(theta - a_k * direction)
        state["step"] = torch.tensor(k + 1)
        return torch.tensor(losses, dtype=torch.float64).mean()
