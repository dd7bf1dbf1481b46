"""One signature, three differentiation methods (as torchdiffeq's odeint / odeint_adjoint).

``expval(circuit, observables, x=None, state=None, diff_method="backprop")`` returns the same
values and the same gradients whichever method is chosen:

* ``"backprop"``: plain autograd through the (fused) kernels; supports higher derivatives.
* ``"adjoint"``: :class:`AdjointExpval`; memory flat in depth.
* ``"parameter-shift"``: :class:`ParameterShiftExpval`; the only one valid with ``shots``.
* ``"auto"``: backprop while the states autograd keeps fit in :data:`AUTO_BACKPROP_BYTES`, adjoint
  beyond (measured on the 2-core CPU: backprop is the faster of the two wherever it fits, e.g.
  LiH UCCSD 41 ms vs 51 ms per energy + gradient; adjoint keeps a few states whatever the depth);
  parameter-shift with ``shots``.
"""
from __future__ import annotations

import torch

from .adjoint import AdjointExpval
from .metric import quantum_fisher
from .parameter_shift import ParameterShiftExpval, shift_rule
from .under_transforms import TransformExpval
from ..kernels.transforms import transforms_active
from ..engine_transforms import folding_applies, run as run_folded

DIFF_METHODS = ("backprop", "adjoint", "parameter-shift")
AUTO = "auto"
AUTO_BACKPROP_BYTES = 2 * 2 ** 30
"""``diff_method="auto"`` switches from backprop to adjoint when backprop would keep more than this."""


def _observable_list(observables):
    from ..observables import Hamiltonian, PauliString
    if isinstance(observables, (PauliString, Hamiltonian, str)):
        return [_coerce(observables)], True
    if isinstance(observables, (list, tuple)):
        if not observables:
            raise ValueError("expval: the list of observables is empty")
        return [_coerce(o) for o in observables], False
    raise TypeError(f"expval: observables must be a PauliString, Hamiltonian, string or a list of them, "
                    f"got {type(observables).__name__}")


def _coerce(o):
    from ..observables import Hamiltonian, PauliString
    if isinstance(o, str):
        return Hamiltonian.from_string(o)
    if not isinstance(o, (PauliString, Hamiltonian)):
        raise TypeError(f"expval: observable {o!r} is not a PauliString, Hamiltonian or string")
    return o


def check_diff_method(diff_method: str) -> str:
    if diff_method not in DIFF_METHODS + (AUTO,):
        raise ValueError(f"diff_method must be one of {DIFF_METHODS + (AUTO,)}, got {diff_method!r}")
    return diff_method


def resolve_diff_method(diff_method: str, circuit, batch: int = 1, shots=None, density: bool = False) -> str:
    """The method ``"auto"`` stands for on this circuit and batch; other names pass through."""
    if diff_method != AUTO:
        return diff_method
    if shots is not None:
        return "parameter-shift"
    if density:
        return "backprop"
    from ..engine import build_plan
    itemsize = torch.empty((), dtype=circuit.dtype).element_size()
    # autograd keeps about one state per fused step (its input) plus the output
    kept = batch * 2 ** circuit.n_wires * itemsize * (len(build_plan(circuit).steps) + 1)
    return "backprop" if kept <= AUTO_BACKPROP_BYTES else "adjoint"


def circuit_expval(circuit, observables, x=None, state=None, diff_method="backprop", shots=None,
                   generator=None, weights=None):
    """Expectation values ``(B, n_obs)`` (or ``(B,)`` for one observable) after ``circuit``.

    ``weights`` replaces ``circuit.weights`` for this call (functional use, e.g. gradcheck).
    """
    from ..circuit import _is_density_input
    from ..engine import run_circuit
    from ..observables import expectation
    from ..observables.hamiltonian import add_constants, split_constants
    check_diff_method(diff_method)
    # channels, measurements, resets and noise exist only on density matrices
    density = _is_density_input(state) or circuit.is_noisy
    if diff_method == AUTO:
        batch = max(x.shape[0] if isinstance(x, torch.Tensor) and x.dim() == 2 else 1,
                    state.shape[0] if isinstance(state, torch.Tensor) and state.dim() >= 2 else 1)
        diff_method = resolve_diff_method(diff_method, circuit, batch, shots, density)
    if density:
        from ..mixed import expval as mixed_expval
        return mixed_expval(circuit, observables, x=x, state=state, diff_method=diff_method,
                            shots=shots, generator=generator, weights=weights)
    obs, single = _observable_list(observables)
    for o in obs:
        if getattr(o, "n_wires", None) and o.n_wires > circuit.n_wires:
            raise ValueError(f"expval: observable {o!r} acts on {o.n_wires} wires but the circuit has "
                             f"{circuit.n_wires}")
    if shots is not None and diff_method == "adjoint":
        raise ValueError("expval: diff_method='adjoint' needs exact expectations; with shots use "
                         "'parameter-shift' (as hardware would) or 'backprop' for a value only")
    x, state, squeeze = circuit.prepare(x, state, materialize=diff_method == "parameter-shift")
    weights = circuit.weights_or(weights, "expval")
    obs, constants = split_constants(obs)
    if diff_method == "backprop" and shots is None and transforms_active() and folding_applies(circuit):
        # circuit and expectations as one folded call (engine_transforms): under vmap the
        # expectation's own backward then runs natively too
        values = run_folded(circuit, state, x, circuit.weights if weights is None else weights, obs)
    elif diff_method == "backprop":
        psi = run_circuit(circuit, state, x, weights)
        values = expectation(psi, obs, shots=shots, generator=generator)
    elif transforms_active():
        values = TransformExpval.apply(diff_method, circuit, obs, shots, generator, x, state, weights)
    elif diff_method == "adjoint":
        values = AdjointExpval.apply(circuit, obs, x, state, weights)
    else:
        values = ParameterShiftExpval.apply(circuit, obs, shots, generator, x, state, weights)
    if constants is not None:
        # gates are unitary: the identity terms are c·‖ψ₀‖², not c times the drifted output norm
        norms = None if state is None else torch.linalg.vector_norm(state, dim=-1) ** 2
        values = add_constants(values, constants, norms)
    if single:
        values = values[..., 0]
    if squeeze:
        values = values[0]
    return values


def hessian(circuit, observable, x=None, state=None):
    """Hessian of ⟨observable⟩ (summed over the batch) w.r.t. ``circuit.weights``, by double backprop."""
    from ..engine import run_circuit
    from ..observables import expectation
    x, state, _ = circuit.prepare(x, state)
    obs, _ = _observable_list(observable)
    if len(obs) != 1:
        raise ValueError("hessian: give one observable")

    def energy(w):
        return expectation(run_circuit(circuit, state, x, w), obs[0]).sum()
    return torch.autograd.functional.hessian(energy, circuit.weights.detach().clone())


__all__ = ["expval", "circuit_expval", "hessian", "quantum_fisher", "AdjointExpval", "ParameterShiftExpval",
           "shift_rule", "DIFF_METHODS", "AUTO", "AUTO_BACKPROP_BYTES", "check_diff_method",
           "resolve_diff_method"]


def expval(target, observables, x=None, state=None, diff_method="backprop", shots=None, generator=None,
           weights=None):
    """``tql.expval``: expectation values of a state tensor or of a circuit's output.

    * ``expval(state, obs, shots=None, generator=None)``: ``state`` is ``(B, 2**n)``.
    * ``expval(circuit, obs, x=None, state=None, diff_method="backprop", shots=None, ...)``.

    One observable gives ``(B,)``, a list gives ``(B, n_obs)``.
    """
    from ..circuit import Circuit
    if isinstance(target, Circuit):
        return circuit_expval(target, observables, x=x, state=state, diff_method=diff_method, shots=shots,
                              generator=generator, weights=weights)
    if isinstance(target, torch.Tensor):
        if x is not None or state is not None or weights is not None:
            raise ValueError("expval(state, obs): x=, state= and weights= apply only when the first "
                             "argument is a Circuit")
        obs, single = _observable_list(observables)
        if target.dim() == 3:
            from ..mixed import expectation
        else:
            from ..observables import expectation
        values = expectation(target, obs, shots=shots, generator=generator)
        return values[..., 0] if single else values
    raise TypeError(f"expval: first argument must be a Circuit or a (B, 2**n) state tensor, got "
                    f"{type(target).__name__}")
