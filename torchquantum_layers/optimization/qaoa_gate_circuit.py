""":func:`qaoa_circuit`: the X-mixer QAOA as a gate-level :class:`~torchquantum_layers.Circuit`."""
from __future__ import annotations

import torch

from .angles import _check_p
from .problems import Problem

__all__ = ["qaoa_circuit"]


def qaoa_circuit(problem: Problem, p: int, dtype=None, device=None):
    """QAOA with the X mixer as a gate-level :class:`~torchquantum_layers.Circuit` whose angles are
    input columns: ``circ(x)`` with ``x = angles (S, 2p)`` (``[γ_1…γ_p, β_1…β_p]``, the same layout
    and convention as :class:`QAOA`). Gates: H on every wire, then per layer ``RZ(2γ h_i)`` and
    ``RZZ(2γ J_ij)`` from the problem's Ising form (``RZ(θ) = exp(-iθZ/2)``) and ``RX(2β)`` on every
    wire. The constant term is left out (a global phase). Needs no 2^n diagonal."""
    from ..circuit import Input
    if not isinstance(problem, Problem):
        raise TypeError(f"qaoa_circuit: expected a Problem, got {type(problem).__name__}")
    p = _check_p(p, "qaoa_circuit")
    n = problem.n_qubits
    h, J, _ = problem.ising()
    circ = blank_circuit(n, dtype, device)
    for w in range(n):
        circ.h(w)
    pairs = torch.nonzero(J).tolist()
    for l in range(p):
        cost_layer(circ, h, pairs, J, l)
        for w in range(n):
            circ.rx(w, Input(p + l, 2.0))
    return circ


def blank_circuit(n: int, dtype=None, device=None):
    """An empty Circuit of n wires in complex128 for ``dtype`` complex128 / float64, on ``device``."""
    from ..circuit import Circuit
    circ = Circuit(n)
    if device is not None:
        circ = circ.to(device)
    if dtype in (torch.complex128, torch.float64):
        circ = circ.double()
    return circ


def cost_layer(circ, h, pairs, J, l: int) -> None:
    """Layer l's cost gates from the Ising form: ``RZ(2γ_l h_i)``, ``RZZ(2γ_l J_ij)`` (γ_l = input column l)."""
    from ..circuit import Input
    for i in range(circ.n_wires):
        if float(h[i]) != 0:
            circ.rz(i, Input(l, 2 * float(h[i])))
    for i, j in pairs:
        circ.rzz(i, j, Input(l, 2 * float(J[i, j])))
