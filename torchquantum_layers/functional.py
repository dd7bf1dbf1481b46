"""Functional API generated from the gate table: ``tql.functional.rx(state, theta, wires=0)``.

Each function applies one gate to a (B, 2**n) state and returns the new state; angles may be
numbers, 0-d tensors or per-sample (B,) tensors, and gradients flow through them.
"""
from __future__ import annotations

import torch

from . import gates as G
from .kernels.apply import check_wires
from .kernels.state import REAL_OF, n_wires_of


def prepare_gate_call(gate, params, wires, n, batch, dtype, device, matrix=None):
    """Validate one functional gate call: (gate, wires, real angle tensors, data) or a clear error.

    Shared by the state-vector and the density-matrix functional APIs.
    """
    gate = G.get_gate(gate)
    wires = check_wires(wires, n, gate.name)
    if gate.n_wires is not None and len(wires) != gate.n_wires:
        raise ValueError(f"{gate.name} acts on {gate.n_wires} wire(s), got wires {wires}")
    if len(wires) < gate.min_wires:
        raise ValueError(f"{gate.name} needs at least {gate.min_wires} wires, got {wires}")
    if len(params) != gate.n_params:
        raise ValueError(f"{gate.name} takes {gate.n_params} parameter(s), got {len(params)}")
    real = REAL_OF[dtype]
    angles = []
    for p in params:
        if isinstance(p, bool) or (isinstance(p, torch.Tensor) and p.dtype == torch.bool):
            raise TypeError(f"{gate.name}: angle {p!r} is a bool, not a number")
        if isinstance(p, torch.Tensor):
            t = p.to(device)
        else:
            try:
                t = torch.as_tensor(p, dtype=real, device=device)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise TypeError(f"{gate.name}: angle {p!r} is not a real number or tensor "
                                f"({type(p).__name__})") from exc
        if t.is_complex():
            raise TypeError(f"{gate.name}: angles must be real, got {t.dtype}")
        if t.dim() > 1 or (t.dim() == 1 and t.shape[0] not in (1, batch)):
            raise ValueError(f"{gate.name}: angle shape {tuple(t.shape)} must be () or (B,) with B={batch}")
        if t.device.type == "cpu" and not torch.isfinite(t).all():
            raise ValueError(f"{gate.name}: angle is NaN or inf")
        angles.append(t.to(real))
    data = None
    if gate.takes_data:
        if matrix is None:
            raise ValueError(f"{gate.name} needs matrix=")
        data = torch.as_tensor(matrix, device=device).to(dtype)
        G.check_gate_data(gate, wires, data, batched=True)
        if data.dim() == (1 if gate.kind == "diagonal" else 2) + 1 and data.shape[0] not in (1, batch):
            raise ValueError(f"{gate.name}: {data.shape[0]} matrices for a batch of {batch}")
    return gate, wires, tuple(angles), data


def apply_gate(state, gate, *params, wires, matrix=None, adjoint=False):
    """Apply ``gate`` (a Gate or its name) to ``wires`` of ``state``."""
    n = n_wires_of(state)
    gate, wires, angles, data = prepare_gate_call(gate, params, wires, n, state.shape[0], state.dtype,
                                                  state.device, matrix)
    return gate.apply(state, angles, wires, n, data, adjoint)


def _make(gate):
    def fn(state, *params, wires, matrix=None, adjoint=False):
        return apply_gate(state, gate, *params, wires=wires, matrix=matrix, adjoint=adjoint)
    names = ", ".join(gate.param_names)
    fn.__name__ = gate.name.lower()
    fn.__doc__ = f"Apply {gate.name}({names}) to ``wires`` of a (B, 2**n) state. {gate.doc}"
    return fn


__all__ = ["apply_gate"]
for _name, _gate in G.builder_names().items():
    globals()[_name] = _make(_gate)
    __all__.append(_name)
