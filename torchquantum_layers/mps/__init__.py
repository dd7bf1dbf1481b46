"""Matrix-product-state simulation of wide, shallow circuits: ``tql.mps``.

``tql.mps.run(circuit, x)`` returns an :class:`MPS` (batched site tensors ``(B, χl, 2, χr)``,
truncated to ``max_bond`` / ``cutoff``, discarded weight per sample); ``tql.mps.expval`` mirrors
``tql.expval`` for Pauli strings and Hamiltonians (``shots=N, generator=`` for sampled
estimates per qubit-wise commuting group, no gradient). Differentiable by backprop on CPU and CUDA.
``tql.QuantumLayer(circuit, observables, simulator="mps", max_bond=…, cutoff=…)`` is the nn.Module.
Graph problems: ``tql.mps.wire_order(graph)`` places nodes on wires so that edges stay short
(reverse Cuthill–McKee and a multi-start variant), ``tql.mps.relabel`` / ``to_nodes`` move problems
and samples between node and wire labels, ``tql.mps.qaoa_circuit(problem, p, order="auto")`` does both.
"""
from .linalg import split, svd_left
from .ordering import (ORDER_METHODS, QAOAOnWires, bandwidth, bond_bounds, check_order, edge_spans, qaoa_circuit,
                       relabel, to_nodes, to_wires, wire_order)
from .measure import expval_mps, probabilities, sample, shot_expval_mps
from .simulate import MAX_GATE_WIRES, expval, run
from .state import MAX_DENSE_WIRES, MPS

__all__ = ["MPS", "run", "expval", "expval_mps", "shot_expval_mps", "probabilities", "sample", "split", "svd_left",
           "MAX_GATE_WIRES", "MAX_DENSE_WIRES", "wire_order", "bandwidth", "edge_spans", "bond_bounds", "relabel",
           "to_nodes", "to_wires", "check_order", "qaoa_circuit", "QAOAOnWires", "ORDER_METHODS"]
