"""Functional API generated from the gate table: ``tql.functional.rx(state, theta, wires=0)``.

Each function applies one gate to a (B, 2**n) state and returns the new state; angles may be
numbers, 0-d tensors or per-sample (B,) tensors, and gradients flow through them.
"""
from __future__ import annotations

import torch

from . import gates as G
from .kernels.apply import check_wires
from .kernels.state import REAL_OF, n_wires_of


def apply_gate(state, gate, *params, wires, matrix=None, adjoint=False):
    """Apply ``gate`` (a Gate or its name) to ``wires`` of ``state``."""
    gate = G.get_gate(gate)
    n = n_wires_of(state)
    wires = check_wires(wires, n, gate.name)
    if gate.n_wires is not None and len(wires) != gate.n_wires:
        raise ValueError(f"{gate.name} acts on {gate.n_wires} wire(s), got wires {wires}")
    if len(params) != gate.n_params:
        raise ValueError(f"{gate.name} takes {gate.n_params} parameter(s), got {len(params)}")
    real = REAL_OF[state.dtype]
    angles = []
    for p in params:
        t = p if isinstance(p, torch.Tensor) else torch.as_tensor(p, dtype=real, device=state.device)
        if t.is_complex():
            raise TypeError(f"{gate.name}: angles must be real, got {t.dtype}")
        if t.dim() > 1 or (t.dim() == 1 and t.shape[0] not in (1, state.shape[0])):
            raise ValueError(f"{gate.name}: angle shape {tuple(t.shape)} must be () or (B,) with B={state.shape[0]}")
        if t.device.type == "cpu" and not torch.isfinite(t).all():
            raise ValueError(f"{gate.name}: angle is NaN or inf")
        angles.append(t.to(real))
    data = None
    if gate.takes_data:
        if matrix is None:
            raise ValueError(f"{gate.name} needs matrix=")
        data = torch.as_tensor(matrix, device=state.device).to(state.dtype)
        if gate.kind == "dense":
            G.check_unitary(data, gate.name)
    return gate.apply(state, tuple(angles), wires, n, data, adjoint)


def _make(gate):
    def fn(state, *params, wires, matrix=None, adjoint=False):
        return apply_gate(state, gate, *params, wires=wires, matrix=matrix, adjoint=adjoint)
    names = ", ".join(gate.param_names)
    fn.__name__ = gate.name.lower()
    fn.__doc__ = f"Apply {gate.name}({names}) to ``wires`` of a (B, 2**n) state. {gate.doc}"
    return fn


__all__ = ["apply_gate"]
for _name, _gate in {**G.GATES, **{a: G.GATES[t] for a, t in G.ALIASES.items()}}.items():
    globals()[_name.lower()] = _make(_gate)
    __all__.append(_name.lower())
