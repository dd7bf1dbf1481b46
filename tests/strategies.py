"""Hypothesis strategies for random circuits, shared by the circuit and differentiation tests.

A drawn :class:`CircuitSpec` is plain data: gate names, wires, angle recipes and seeds. From it
:func:`build` makes a ``tql.Circuit`` through the public builder API (generated methods, aliases,
``c.add``, ``c.parameter``, ``tql.Param``/``tql.Input``, ``trainable=`` and ``input=``) and, while
doing so, writes down independently what every angle is (a :class:`Recipe`). :func:`oracle_states`
and :func:`oracle_unitary` then simulate the same gate list with the NumPy oracle
(tests/oracle.py), never with the library's own matrices.

Typical use::

    @given(spec=circuit_specs(max_wires=5))
    def test_something(spec, dtype):
        c, recipe = build(spec, dtype=dtype)
        x = features(spec, dtype)                       # (B, F) real tensor
        psi0 = initial_states(spec)                     # (B or 1, 2**n) complex128 numpy
        out = c(x, state=torch.as_tensor(psi0, dtype=dtype))
        ref = oracle_states(recipe, spec.n_wires, weights_of(c), x_np(x), psi0)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from hypothesis import strategies as st

import torchquantum_layers as tql
from torchquantum_layers import gates as G

from . import oracle

# ---------------------------------------------------------------------------------------------
# the gate table as the tests see it
VARIABLE_WIRES = {"MULTIRZ": 1, "MULTICONTROLLEDX": 2}     # gate -> minimum number of wires
DATA_GATES = ("QUBITUNITARY", "DIAGONALUNITARY")
MAX_DATA_WIRES = 3
ALL_GATES = tuple(sorted(G.GATES))
PARAMETRIC_GATES = tuple(sorted(g for g, gate in G.GATES.items() if gate.n_params))
ALIASES_OF: dict = {}
for _alias, _target in G.ALIASES.items():
    ALIASES_OF.setdefault(_target, []).append(_alias)

ANGLE_KINDS = ("fixed", "tensor", "new", "shared", "input")
MODES = ("angles", "trainable", "input")
N_FEATURES = 3


def n_params_of(name: str) -> int:
    return G.GATES[name].n_params


def min_wires_of(name: str) -> int:
    if name in VARIABLE_WIRES:
        return VARIABLE_WIRES[name]
    if name in DATA_GATES:
        return 1
    return G.GATES[name].n_wires


def max_wires_of(name: str, n: int) -> int:
    if name in VARIABLE_WIRES:
        return n
    if name in DATA_GATES:
        return min(n, MAX_DATA_WIRES)
    return G.GATES[name].n_wires


# ---------------------------------------------------------------------------------------------
# specs: plain data
@dataclass(frozen=True)
class AngleSpec:
    kind: str            # "fixed" float | "tensor" (fixed, as a 0-d tensor) | "new" (c.parameter)
    value: float = 0.0   # | "shared" (a pre-declared parameter) | "input" (tql.Input)
    index: int = 0       # shared parameter number, or input column
    scale: float = 1.0


@dataclass(frozen=True)
class OpSpec:
    gate: str                     # canonical name in gates.GATES
    method: str                   # builder method used (lower-case name or alias), or "add"
    wires: tuple
    mode: str = "angles"          # "angles" | "trainable" (trainable=True) | "input" (input=cols)
    angles: tuple = ()            # AngleSpecs, mode "angles"
    init: float = 0.0             # mode "trainable"
    cols: tuple = ()              # mode "input"
    scale: float = 1.0            # modes "trainable" / "input"
    seed: int = 0                 # QubitUnitary / DiagonalUnitary data


@dataclass(frozen=True)
class CircuitSpec:
    n_wires: int
    ops: tuple
    shared: tuple = ()            # init values of parameters declared before the gates
    batch: int = 1
    seed: int = 0                 # for the input features and the initial states

    @property
    def reads_inputs(self) -> bool:
        return any(op.mode == "input" or any(a.kind == "input" for a in op.angles) for op in self.ops)

    def __str__(self) -> str:     # readable falsifying examples
        lines = [f"CircuitSpec(n_wires={self.n_wires}, batch={self.batch}, shared={self.shared}, "
                 f"seed={self.seed})"]
        lines += [f"  {op}" for op in self.ops]
        return "\n".join(lines)


_angle_values = st.floats(-2 * np.pi, 2 * np.pi, allow_nan=False, allow_infinity=False)
_scales = st.sampled_from([1.0, 0.5, -1.0, 2.0, 0.25])


@st.composite
def angle_specs(draw, kinds=ANGLE_KINDS, n_shared=0):
    kinds = [k for k in kinds if k != "shared" or n_shared]
    kind = draw(st.sampled_from(kinds))
    if kind in ("fixed", "tensor", "new"):
        scale = draw(_scales) if kind == "new" else 1.0
        return AngleSpec(kind, draw(_angle_values), 0, scale)
    if kind == "shared":
        return AngleSpec(kind, 0.0, draw(st.integers(0, n_shared - 1)), draw(_scales))
    return AngleSpec(kind, 0.0, draw(st.integers(0, N_FEATURES - 1)), draw(_scales))


@st.composite
def op_specs(draw, n, gates=ALL_GATES, kinds=ANGLE_KINDS, modes=MODES, n_shared=0):
    names = [g for g in gates if min_wires_of(g) <= n]
    gate = draw(st.sampled_from(names))
    k = draw(st.integers(min_wires_of(gate), max_wires_of(gate, n)))
    wires = tuple(draw(st.permutations(range(n)))[:k])          # any order, possibly scattered
    method = draw(st.sampled_from([gate.lower(), "add"] + [a.lower() for a in ALIASES_OF.get(gate, [])]))
    if gate in DATA_GATES:
        return OpSpec(gate, method, wires, seed=draw(st.integers(0, 2 ** 32 - 1)))
    p = n_params_of(gate)
    if p == 0:
        return OpSpec(gate, method, wires)
    usable = [m for m in modes if m != "input" or "input" in kinds]
    usable = [m for m in usable if m != "trainable" or any(k in kinds for k in ("new", "shared"))]
    mode = draw(st.sampled_from(usable or ["angles"]))
    if mode == "trainable":
        return OpSpec(gate, method, wires, "trainable", init=draw(_angle_values), scale=draw(_scales))
    if mode == "input":
        cols = tuple(draw(st.integers(0, N_FEATURES - 1)) for _ in range(p))
        return OpSpec(gate, method, wires, "input", cols=cols, scale=draw(_scales))
    angles = tuple(draw(angle_specs(kinds, n_shared)) for _ in range(p))
    return OpSpec(gate, method, wires, "angles", angles=angles)


@st.composite
def circuit_specs(draw, min_wires=1, max_wires=5, min_ops=0, max_ops=10, gates=ALL_GATES,
                  kinds=ANGLE_KINDS, modes=MODES, max_batch=5, max_shared=2):
    """Random circuits over ``gates`` (default: the whole table, QubitUnitary and
    DiagonalUnitary with random data included). ``kinds`` restricts the angle recipes: drop
    "input" for circuits with a ``unitary()``, keep only "new"/"shared" for fully trainable ones."""
    n = draw(st.integers(min_wires, max_wires))
    n_shared = draw(st.integers(0, max_shared)) if "shared" in kinds else 0
    shared = tuple(draw(_angle_values) for _ in range(n_shared))
    ops = tuple(draw(st.lists(op_specs(n, gates, kinds, modes, n_shared), min_size=min_ops,
                              max_size=max_ops)))
    batch = draw(st.integers(1, max_batch))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return CircuitSpec(n, ops, shared, batch, seed)


# ---------------------------------------------------------------------------------------------
# building, independently recording every angle
@dataclass(frozen=True)
class Step:
    """One gate as the oracle sees it: a name (or an explicit matrix) and angle recipes
    ("fixed", v) | ("param", index into c.weights, scale) | ("input", column, scale)."""
    gate: str
    wires: tuple
    angles: tuple = ()
    matrix: Optional[np.ndarray] = None


Recipe = tuple


def data_of(op: OpSpec) -> np.ndarray:
    rng = np.random.default_rng(op.seed)
    d = 2 ** len(op.wires)
    if op.gate == "QUBITUNITARY":
        return oracle.random_unitary(d, rng)
    return oracle.random_phases(d, rng)


def build(spec: CircuitSpec, dtype=torch.complex64, device="cpu", fuse=True, max_fused_wires=None):
    """(circuit, recipe): the circuit built through the public API, and the oracle's gate list."""
    c = tql.Circuit(spec.n_wires, fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    shared = [c.parameter(init=v) for v in spec.shared]
    recipe = []
    for op in spec.ops:
        gate = G.GATES[op.gate]
        fixed_k = gate.n_wires is not None and not gate.takes_data

        def call(*angles, **kw):
            if op.method == "add":
                return c.add(op.gate, op.wires, *angles, **kw)
            method = getattr(c, op.method)
            if fixed_k:
                return method(*op.wires, *angles, **kw)
            return method(list(op.wires), *angles, **kw)

        if op.gate in DATA_GATES:
            m = data_of(op)
            if op.method == "add":
                c.add(op.gate, op.wires, matrix=torch.as_tensor(m))
            else:
                getattr(c, op.method)(list(op.wires), torch.as_tensor(m))
            recipe.append(Step(op.gate, op.wires, (), m if m.ndim == 2 else np.diag(m)))
            continue
        if op.mode == "trainable":
            start = c.num_parameters
            call(trainable=True, init=op.init, scale=op.scale)
            angles = tuple(("param", start + i, op.scale) for i in range(gate.n_params))
        elif op.mode == "input":
            call(input=op.cols if len(op.cols) > 1 else op.cols[0], scale=op.scale)
            angles = tuple(("input", col, op.scale) for col in op.cols)
        else:
            args, angles = [], []
            for a in op.angles:
                if a.kind == "fixed":
                    args.append(a.value)
                    angles.append(("fixed", a.value))
                elif a.kind == "tensor":
                    args.append(torch.tensor(a.value, dtype=torch.float64))
                    angles.append(("fixed", a.value))
                elif a.kind == "new":
                    idx = c.num_parameters
                    args.append(c.parameter(init=a.value, scale=a.scale))
                    angles.append(("param", idx, a.scale))
                elif a.kind == "shared":
                    idx = shared[a.index].index
                    args.append(tql.Param(idx, a.scale))
                    angles.append(("param", idx, a.scale))
                else:
                    args.append(tql.Input(a.index, a.scale))
                    angles.append(("input", a.index, a.scale))
            call(*args)
            angles = tuple(angles)
        recipe.append(Step(op.gate, op.wires, angles))
    return c.to(device), tuple(recipe)


# ---------------------------------------------------------------------------------------------
# inputs for a spec
def features(spec: CircuitSpec, dtype=torch.complex64, device="cpu") -> torch.Tensor:
    """(B, N_FEATURES) real features, drawn from the spec's seed."""
    rng = np.random.default_rng(spec.seed)
    x = rng.uniform(-np.pi, np.pi, (spec.batch, N_FEATURES))
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    return torch.as_tensor(x, dtype=real, device=device)


def initial_states(spec: CircuitSpec, batch=None) -> np.ndarray:
    """(batch, 2**n) random normalised states (complex128 numpy), from the spec's seed."""
    rng = np.random.default_rng(spec.seed + 1)
    return oracle.random_state(spec.n_wires, rng, batch=spec.batch if batch is None else batch)


def zero_states(n: int, batch: int = 1) -> np.ndarray:
    s = np.zeros((batch, 2 ** n), dtype=np.complex128)
    s[:, 0] = 1
    return s


def weights_of(c) -> np.ndarray:
    return c.weights.detach().cpu().double().numpy()


def as_np(t) -> Optional[np.ndarray]:
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        return t.numpy().astype(np.complex128 if t.is_complex() else np.float64)
    return np.asarray(t)


# ---------------------------------------------------------------------------------------------
# the oracle side
def angle_value(a, weights, x):
    """A recipe angle as a float or a (B,) float64 array."""
    if a[0] == "fixed":
        return float(a[1])
    if a[0] == "param":
        return float(weights[a[1]]) * a[2]
    return np.asarray(x, dtype=np.float64)[:, a[1]] * a[2]


def step_matrix(step: Step, weights, x, adjoint=False) -> np.ndarray:
    """(d, d) or per-sample (B, d, d) matrix of one gate, from the oracle's definitions."""
    if step.matrix is not None:
        m = np.asarray(step.matrix, dtype=np.complex128)
    else:
        vals = [angle_value(a, weights, x) for a in step.angles]
        k = len(step.wires)
        per_sample = [v for v in vals if isinstance(v, np.ndarray)]
        if not per_sample:
            m = oracle.gate_matrix(step.gate, *vals, n_wires=k)
        else:
            B = per_sample[0].shape[0]
            full = [np.broadcast_to(v, (B,)) for v in vals]
            m = np.stack([oracle.gate_matrix(step.gate, *[float(v[b]) for v in full], n_wires=k)
                          for b in range(B)])
    return np.swapaxes(m.conj(), -1, -2) if adjoint else m


def oracle_states(recipe: Recipe, n: int, weights, x=None, state=None, inverse=False) -> np.ndarray:
    """Run the recipe (or its inverse) with the oracle on ``state`` ((B or 1, 2**n); |0…0⟩ if None).

    A state batch of 1 broadcasts against per-sample gates, as in the library."""
    psi = zero_states(n) if state is None else np.asarray(state, dtype=np.complex128)
    if psi.ndim == 1:
        psi = psi[None]
    steps = reversed(recipe) if inverse else recipe
    for step in steps:
        psi = oracle.apply_dense(psi, step_matrix(step, weights, x, adjoint=inverse), step.wires, n)
    return psi


def oracle_unitary(recipe: Recipe, n: int, weights, x=None) -> np.ndarray:
    """The product of the full 2^n × 2^n operators of the recipe: (2^n, 2^n) for an input-free
    recipe, or one per row of the features ``x`` (B, F): (B, 2^n, 2^n)."""
    rows = [None] if x is None else [np.asarray(x, dtype=np.float64)[b:b + 1] for b in range(len(x))]
    out = []
    for row in rows:
        u = np.eye(2 ** n, dtype=np.complex128)
        for step in recipe:
            m = step_matrix(step, weights, row)
            u = oracle.full_operator(m[0] if m.ndim == 3 else m, step.wires, n) @ u
        out.append(u)
    return out[0] if x is None else np.stack(out)


def gradient_differences(circuit, obs, x, eps=1e-5):
    """(P, P) central differences of ∂⟨obs⟩/∂w (summed over the batch) in each weight: the
    reference for second derivatives taken by double backprop."""
    import torchquantum_layers as tql
    w0 = circuit.weights.detach().clone()
    rows = []
    for i in range(len(w0)):
        grads = []
        for sign in (1, -1):
            w = w0.clone()
            w[i] += sign * eps
            w.requires_grad_()
            (g,) = torch.autograd.grad(tql.expval(circuit, obs, x=x, weights=w).sum(), w)
            grads.append(g)
        rows.append((grads[0] - grads[1]) / (2 * eps))
    return torch.stack(rows)
