"""Encoders and ansatz templates.

Every template appends gates to a :class:`~torchquantum_layers.Circuit` and returns it, so
templates chain::

    c = tql.Circuit(4)
    templates.angle_encoding(c)                       # RY(x[:, i]) on wire i
    templates.strongly_entangling(c, n_layers=2)      # trainable Rot layers + CNOTs
    states = c(x)

``wires`` defaults to all wires of the circuit; when given, the template acts on those wires in
the given order (wire ``wires[0]`` gets the first feature / is the first qubit of the pattern).
In place of a circuit every template also takes an int ``n``: it then builds and returns a new
``Circuit(n)`` (``templates.qft(3)`` is the same as :func:`qft_circuit` ``(3)``).

Trainable angles are new entries of ``circuit.weights`` created with ``init`` (see
:meth:`Circuit.parameter`). Input angles read columns of the features ``x`` passed to the
circuit: per-sample angles, no Python loop over the batch.

State encoders that do not fit a gate sequence return a state instead of a circuit:
:func:`amplitude_encoding` and :func:`basis_encoding` give a ``(B, 2**n)`` state to pass as
``circuit(state=...)``.
"""
from __future__ import annotations

import cmath
import math
import operator
from typing import Optional, Sequence, Union

import numpy as np
import torch

from . import gates as G
from .circuit import Circuit, Input
from .kernels.apply import check_wires
from .kernels.state import COMPLEX_DTYPES, check_allocation

__all__ = ["angle_encoding", "amplitude_encoding", "basis_encoding", "iqp_features", "iqp_encoding",
           "hardware_efficient", "strongly_entangling", "basic_entangler", "data_reuploading", "qft",
           "qft_circuit", "entangler_pairs", "pauli_rotation", "trotter", "product_formula",
           "hamiltonian_variational", "qcnn", "qcnn_readout_wires", "qpe", "hadamard_test", "swap_test",
           "controlled_unitary", "phase_oracle", "grover_operator", "amplitude_amplification", "grover_iterations"]

CircuitLike = Union[Circuit, int]


# ---------------------------------------------------------------------------------------------
# argument checks shared by the templates
def _circuit(circuit: CircuitLike, what: str) -> Circuit:
    if isinstance(circuit, Circuit):
        return circuit
    if isinstance(circuit, int) and not isinstance(circuit, bool):
        if circuit < 1:
            raise ValueError(f"{what}: n_wires must be a positive int, got {circuit}")
        return Circuit(circuit)
    raise TypeError(f"{what}: expected a Circuit or a number of wires, got {type(circuit).__name__}")


def _wires(circuit: Circuit, wires, what: str) -> tuple:
    if wires is None:
        return tuple(range(circuit.n_wires))
    if isinstance(wires, (str, bytes)):
        raise TypeError(f"{what}: wires must be an int or a sequence of ints, got {wires!r}")
    wires = check_wires(wires, circuit.n_wires, what)
    if not wires:
        raise ValueError(f"{what}: wires must not be empty")
    return wires


def _pos_int(value, name: str, what: str, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what}: {name} must be >= {minimum}, got {value}")
    return value


def _number(value, name: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: {name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {value!r}")
    return float(value)


_AXES = {"X": "RX", "Y": "RY", "Z": "RZ", "RX": "RX", "RY": "RY", "RZ": "RZ"}


def _axis_rotation(rotation, what: str) -> str:
    key = str(rotation).upper() if isinstance(rotation, str) else None
    if key not in _AXES:
        raise ValueError(f"{what}: rotation must be one of 'X', 'Y', 'Z' (or 'RX', 'RY', 'RZ'), "
                         f"got {rotation!r}")
    return _AXES[key]


def _gate(name, what: str, n_wires: int) -> G.Gate:
    try:
        gate = G.get_gate(name)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None
    if gate.takes_data:
        raise ValueError(f"{what}: {gate.name} needs a matrix and cannot be used in a template")
    if gate.n_wires != n_wires:
        raise ValueError(f"{what}: gate {gate.name} acts on {gate.n_wires or 'any number of'} wire(s), "
                         f"need a {n_wires}-wire gate")
    return gate


def _is_real_gate(gate: G.Gate) -> bool:
    """True when the gate's matrix is real for generic angles (it keeps real amplitudes real)."""
    params = tuple(torch.tensor(0.3 + 0.7 * i, dtype=torch.float64) for i in range(gate.n_params))
    m = gate.matrix(params, gate.n_wires, torch.complex128)
    return bool(m.imag.abs().max() < 1e-12)


def entangler_pairs(wires: Sequence[int], pattern: str = "linear") -> list:
    """Pairs of wires coupled by an entangling layer.

    ``"linear"``: (w0, w1), (w1, w2), …; ``"ring"``: linear plus (w_{n-1}, w0) when n > 2 (for two
    wires the ring is the single pair, as in PennyLane); ``"all"``: every pair (wi, wj), i < j.
    """
    wires = list(wires)
    n = len(wires)
    if pattern == "linear":
        return [(wires[i], wires[i + 1]) for i in range(n - 1)]
    if pattern == "ring":
        pairs = [(wires[i], wires[i + 1]) for i in range(n - 1)]
        if n > 2:
            pairs.append((wires[-1], wires[0]))
        return pairs
    if pattern == "all":
        return [(wires[i], wires[j]) for i in range(n) for j in range(i + 1, n)]
    raise ValueError(f"entangler pattern must be 'linear', 'ring' or 'all', got {pattern!r}")


def _entangle(circuit: Circuit, gate: G.Gate, pairs, init):
    for a, b in pairs:
        if gate.n_params:
            circuit.add(gate, (a, b), trainable=True, init=init)
        else:
            circuit.add(gate, (a, b))


# ---------------------------------------------------------------------------------------------
# encoders that append gates
def angle_encoding(circuit: CircuitLike, wires=None, rotation: str = "Y", first_column: int = 0,
                   scale: float = 1.0) -> Circuit:
    """One input column per wire: ``R_rotation(scale * x[:, first_column + i])`` on ``wires[i]``.

    With ``rotation="Y"`` on |0…0⟩ this prepares ⊗_i (cos(x_i/2)|0⟩ + sin(x_i/2)|1⟩).
    """
    what = "angle_encoding"
    circuit = _circuit(circuit, what)
    wires = _wires(circuit, wires, what)
    gate = _axis_rotation(rotation, what)
    first_column = _pos_int(first_column, "first_column", what, 0)
    scale = _number(scale, "scale", what)
    for i, w in enumerate(wires):
        circuit.add(gate, w, input=first_column + i, scale=scale)
    return circuit


def iqp_features(x: torch.Tensor, n_features: Optional[int] = None, first_column: int = 0) -> torch.Tensor:
    """Append the pairwise products of features, the angles of :func:`iqp_encoding`'s ZZ terms.

    Takes ``x`` ``(B, F)`` (or ``(F,)``) and the ``n_features`` columns starting at ``first_column``
    (default: all columns from ``first_column`` on), and returns ``(B, F + m(m-1)/2)``: ``x``
    followed by ``x_i * x_j`` for i < j in lexicographic order (0,1), (0,2), …, (1,2), …
    Differentiable in ``x``.
    """
    what = "iqp_features"
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    if x.is_complex():
        raise TypeError(f"{what}: features must be real, got {x.dtype}")
    if not x.is_floating_point():
        x = x.to(torch.get_default_dtype())
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise ValueError(f"{what}: x must have shape (B, F) or (F,), got {tuple(x.shape)}")
    first_column = _pos_int(first_column, "first_column", what, 0)
    F = x.shape[1]
    if n_features is None:
        n_features = F - first_column
        if n_features < 1:
            raise ValueError(f"{what}: first_column {first_column} leaves no feature in x of shape "
                             f"{tuple(x.shape)}")
    n_features = _pos_int(n_features, "n_features", what, 1)
    if first_column + n_features > F:
        raise ValueError(f"{what}: columns {first_column}..{first_column + n_features - 1} do not exist "
                         f"in x of shape {tuple(x.shape)}")
    sel = x[:, first_column:first_column + n_features]
    i, j = torch.triu_indices(n_features, n_features, 1, device=x.device)
    return torch.cat([x, sel[:, i] * sel[:, j]], dim=1)


def _pair_index(m: int) -> dict:
    """(i, j) -> position among the pairs i < j of range(m) in lexicographic order."""
    out, k = {}, 0
    for i in range(m):
        for j in range(i + 1, m):
            out[(i, j)] = k
            k += 1
    return out


def iqp_encoding(circuit: CircuitLike, wires=None, n_repeats: int = 1, first_column: int = 0,
                 product_column: Optional[int] = None, pattern: str = "all") -> Circuit:
    """IQP feature map, as PennyLane's ``IQPEmbedding``.

    Each repeat: H on every wire, ``RZ(x_i)`` on ``wires[i]``, then ``RZZ(x_i x_j)`` on
    ``(wires[i], wires[j])`` for the pairs of ``pattern`` (``"all"`` pairs i < j, or ``"linear"``
    neighbours). ``RZZ(θ) = MultiRZ(θ) = exp(-iθ Z⊗Z/2)``.

    This is not Havlíček et al.'s ZZ feature map (Qiskit's ``ZZFeatureMap``), whose angles are
    ``2 x_i`` and ``2 (π - x_i)(π - x_j)``. The gates are the same, only the angles differ, so
    that map is this template fed other columns, ``2 x_i`` in the feature columns and
    ``2 (π - x_i)(π - x_j)`` in the product columns::

        f = 2 * iqp_features(math.pi - x)          # (B, n + n(n-1)/2)
        f[:, :n] = 2 * x
        states = c(f)                              # Havlíček's ZZ map, up to a global phase

    (tested against Qiskit's H / P(2φ) / CNOT-P(2φ)-CNOT definition).

    The products are not computed by the circuit: pass the features through
    :func:`iqp_features` first, e.g. ``c(templates.iqp_features(x))``. Feature ``x_i`` is read from
    column ``first_column + i`` and the product of pair (i, j) from ``product_column + k`` where
    k is the pair's lexicographic position among all pairs i < j of the ``n = len(wires)``
    features. ``product_column`` defaults to ``first_column + n``, which is where
    ``iqp_features(x, first_column=first_column)`` puts them when ``x`` has exactly
    ``first_column + n`` columns; give it explicitly otherwise.
    """
    what = "iqp_encoding"
    circuit = _circuit(circuit, what)
    wires = _wires(circuit, wires, what)
    n_repeats = _pos_int(n_repeats, "n_repeats", what)
    first_column = _pos_int(first_column, "first_column", what, 0)
    n = len(wires)
    if product_column is None:
        product_column = first_column + n
    product_column = _pos_int(product_column, "product_column", what, 0)
    if product_column < first_column + n and product_column + n * (n - 1) // 2 > first_column and n > 1:
        raise ValueError(f"{what}: product columns starting at {product_column} overlap the feature "
                         f"columns {first_column}..{first_column + n - 1}")
    if pattern not in ("all", "linear"):
        raise ValueError(f"{what}: pattern must be 'all' or 'linear', got {pattern!r}")
    index = _pair_index(n)
    pairs = list(index) if pattern == "all" else [(i, i + 1) for i in range(n - 1)]
    for _ in range(n_repeats):
        for w in wires:
            circuit.h(w)
        for i, w in enumerate(wires):
            circuit.rz(w, input=first_column + i)
        for i, j in pairs:
            circuit.rzz(wires[i], wires[j], Input(product_column + index[(i, j)]))
    return circuit


# ---------------------------------------------------------------------------------------------
# encoders that return states
def _state_dtype(dtype, like: torch.Tensor, what: str) -> torch.dtype:
    if dtype is None:
        return torch.complex128 if like.dtype in (torch.float64, torch.complex128) else torch.complex64
    if dtype in COMPLEX_DTYPES:
        return dtype
    if dtype in (torch.float32, torch.float64):
        return {torch.float32: torch.complex64, torch.float64: torch.complex128}[dtype]
    raise TypeError(f"{what}: dtype must be torch.complex64 or torch.complex128, got {dtype}")


def _first_true(mask: torch.Tensor) -> int:
    return int(mask.nonzero()[0, 0])


def amplitude_encoding(x, n_wires: int, pad_value: float = 0.0, normalize: bool = True,
                       dtype=None) -> torch.Tensor:
    """The state whose amplitudes are the features: ``(B, F)`` → ``(B, 2**n_wires)``.

    Each row is padded with ``pad_value`` to length ``2**n_wires`` and divided by its norm
    (``normalize=True``); with ``normalize=False`` every row must already have norm 1. ``x`` may
    be real or complex; the result is complex64, or complex128 for float64/complex128 input
    (``dtype`` overrides). Differentiable in ``x``. Pass the result as ``circuit(state=...)``.

    Raises ValueError for more than ``2**n_wires`` features, for a row of norm 0 (naming it) and
    for a non-normalised row when ``normalize=False``. The checks cost one reduction of the norms
    (one synchronisation on CUDA).
    """
    what = "amplitude_encoding"
    n_wires = _pos_int(n_wires, "n_wires", what)
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    if not (x.is_floating_point() or x.is_complex()):
        x = x.to(torch.get_default_dtype())
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise ValueError(f"{what}: x must have shape (B, F) or (F,), got {tuple(x.shape)}")
    B, F = x.shape
    d = 2 ** n_wires
    if F > d:
        raise ValueError(f"{what}: {F} features do not fit in the {d} amplitudes of {n_wires} wires")
    if F == 0:
        raise ValueError(f"{what}: x has no features (shape {tuple(x.shape)})")
    cdtype = _state_dtype(dtype, x, what)
    if isinstance(pad_value, bool) or not isinstance(pad_value, (int, float, complex)):
        raise TypeError(f"{what}: pad_value must be a number, got {pad_value!r}")
    if not cmath.isfinite(pad_value):
        raise ValueError(f"{what}: pad_value must be finite, got {pad_value!r}")
    check_allocation(n_wires, max(B, 1), cdtype, x.device)
    state = x.to(cdtype)
    if F < d:
        fill = torch.full((B, d - F), pad_value, dtype=cdtype, device=x.device)
        state = torch.cat([state, fill], dim=1)
    norm = torch.linalg.vector_norm(state, dim=1)
    if normalize:
        bad = ~(norm > 0) | ~torch.isfinite(norm)
        if bool(bad.any()):
            row = _first_true(bad)
            reason = "is all zeros" if norm[row] == 0 else "contains NaN or inf"
            raise ValueError(f"{what}: row {row} of x {reason} (after padding) and cannot be normalised")
        return state / norm.unsqueeze(1).to(cdtype)
    tol = 1e-5 if cdtype == torch.complex64 else 1e-10
    bad = ~((norm - 1).abs() <= tol)
    if bool(bad.any()):
        row = _first_true(bad)
        raise ValueError(f"{what}: row {row} has norm {float(norm[row]):.6g} != 1; pass normalize=True")
    return state


def basis_encoding(x, n_wires: int, dtype=None, device=None) -> torch.Tensor:
    """Computational basis states from bits or integers: returns ``(B, 2**n_wires)``.

    ``x`` may be a bit string ``"0110"`` or a list of them, or a tensor / array / nested list of
    shape ``(B, n_wires)`` of 0/1 bits (wire 0 first), or ``(B, 1)`` of integer basis indices in
    ``[0, 2**n_wires)``; a 1-D ``x`` is one sample. The result is complex64 unless ``dtype`` says
    otherwise, on ``x``'s device unless ``device`` is given. The 0/1 and range checks are one
    vectorised reduction.
    """
    what = "basis_encoding"
    n_wires = _pos_int(n_wires, "n_wires", what)
    if isinstance(x, str):
        x = [x]
    if isinstance(x, (list, tuple)) and x and all(isinstance(s, str) for s in x):
        for s in x:
            if len(s) != n_wires or any(ch not in "01" for ch in s):
                raise ValueError(f"{what}: bit string {s!r} must have {n_wires} characters 0/1")
        x = [[int(ch) for ch in s] for s in x]
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x)
    if x.is_complex():
        raise TypeError(f"{what}: bits must be real or integer, got {x.dtype}")
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2 or x.shape[1] not in (1, n_wires):
        raise ValueError(f"{what}: x must have shape (B, {n_wires}) of bits or (B, 1) of integer indices, "
                         f"got {tuple(x.shape)}")
    device = x.device if device is None else torch.device(device)
    cdtype = _state_dtype(torch.complex64 if dtype is None else dtype, x, what)
    check_allocation(n_wires, max(x.shape[0], 1), cdtype, device)
    x = x.to(device=device)
    if x.shape[1] == n_wires:
        bad = (x != 0) & (x != 1)
        if bool(bad.any()):
            row = _first_true(bad.any(dim=1))
            raise ValueError(f"{what}: row {row} has values other than 0 and 1: {x[row].tolist()}")
        weights = 2 ** torch.arange(n_wires - 1, -1, -1, device=device, dtype=torch.int64)
        index = (x.to(torch.int64) * weights).sum(dim=1)
    else:
        col = x[:, 0]
        bad = (col < 0) | (col >= 2 ** n_wires)
        if col.is_floating_point():
            bad |= col != torch.round(col)
        if bool(bad.any()):
            row = _first_true(bad)
            raise ValueError(f"{what}: index {col[row].item()} in row {row} is not an integer in "
                             f"[0, {2 ** n_wires}) for {n_wires} wires")
        index = col.to(torch.int64)
    B = x.shape[0]
    state = torch.zeros(B, 2 ** n_wires, dtype=cdtype, device=device)
    state.scatter_(1, index.unsqueeze(1), 1)
    return state


# ---------------------------------------------------------------------------------------------
# ansatz templates (all angles trainable)
def hardware_efficient(circuit: CircuitLike, n_layers: int, wires=None, rotations=None,
                       entangler: str = "CNOT", pattern: str = "linear", kind: str = "real",
                       final_rotations: bool = True, init="uniform") -> Circuit:
    """Hardware-efficient ansatz: layers of trainable rotations and a fixed entangler.

    Each of the ``n_layers`` layers puts every gate of ``rotations`` (trainable) on every wire,
    then ``entangler`` on the pairs of ``pattern`` (``"linear"`` chain, ``"ring"``, ``"all"``, see
    :func:`entangler_pairs`); a last rotation layer follows when ``final_rotations``.
    ``kind="real"`` defaults to ``rotations=("RY",)`` and requires real gates (the state keeps real
    amplitudes); ``kind="complex"`` defaults to ``("U3",)``; ``("RZ", "RY", "RZ")`` is the other
    usual choice. A parametrised entangler (e.g. ``"CRY"``) gets trainable angles too.

    The defaults (a linear CNOT chain and a final rotation layer) are not Paddle Quantum's
    entangled layers. ``pattern="ring", final_rotations=False`` is: with ``kind="real"`` it is
    Paddle's ``RealEntangledLayer`` / ``real_entangled_layer`` (per layer RY on every qubit, then
    CNOT(q_i, q_(i+1) mod n)), and with ``kind="complex"`` its ``ComplexEntangledLayer`` (U3
    instead of RY), weights in Paddle's ``[depth, qubit(, 3)]`` order, for three or more wires.
    On two wires Paddle's ring applies CNOT(0, 1) then CNOT(1, 0), while this ring is the single
    pair (see :func:`entangler_pairs`). Tested against dense matrices of Paddle's definition.
    """
    what = "hardware_efficient"
    circuit = _circuit(circuit, what)
    n_layers = _pos_int(n_layers, "n_layers", what)
    wires = _wires(circuit, wires, what)
    if kind not in ("real", "complex"):
        raise ValueError(f"{what}: kind must be 'real' or 'complex', got {kind!r}")
    if rotations is None:
        rotations = ("RY",) if kind == "real" else ("U3",)
    if isinstance(rotations, (str, G.Gate)):
        rotations = (rotations,)
    rotations = tuple(_gate(r, what, 1) for r in rotations)
    if not rotations:
        raise ValueError(f"{what}: rotations must not be empty")
    for r in rotations:
        if r.n_params == 0:
            raise ValueError(f"{what}: rotation {r.name} has no angle to train")
    ent = _gate(entangler, what, 2)
    if pattern not in ("linear", "ring", "all"):
        raise ValueError(f"{what}: pattern must be 'linear', 'ring' or 'all', got {pattern!r}")
    if kind == "real":
        for g in rotations + (ent,):
            if not _is_real_gate(g):
                raise ValueError(f"{what}: kind='real' needs real gates, but {g.name} is complex "
                                 f"(use kind='complex')")
    pairs = entangler_pairs(wires, pattern)

    def rotation_layer():
        for w in wires:
            for r in rotations:
                circuit.add(r, w, trainable=True, init=init)

    for _ in range(n_layers):
        rotation_layer()
        _entangle(circuit, ent, pairs, init)
    if final_rotations:
        rotation_layer()
    return circuit


def strongly_entangling(circuit: CircuitLike, n_layers: int, wires=None, ranges=None,
                        imprimitive: str = "CNOT", init="uniform") -> Circuit:
    """PennyLane's ``StronglyEntanglingLayers``.

    Layer l: a trainable ``Rot(φ, θ, ω)`` on every wire, then ``imprimitive(wires[i],
    wires[(i + r) % n])`` for i = 0..n-1 with ``r = ranges[l]``, default ``l % (n - 1) + 1``
    (no entanglers on one wire). ``3 * n * n_layers`` parameters.
    """
    what = "strongly_entangling"
    circuit = _circuit(circuit, what)
    n_layers = _pos_int(n_layers, "n_layers", what)
    wires = _wires(circuit, wires, what)
    n = len(wires)
    gate = _gate(imprimitive, what, 2)
    if ranges is None:
        ranges = [l % (n - 1) + 1 for l in range(n_layers)] if n > 1 else [0] * n_layers
    else:
        ranges = list(ranges)
        if len(ranges) != n_layers:
            raise ValueError(f"{what}: ranges has {len(ranges)} entries for {n_layers} layers")
        for j, r in enumerate(ranges):
            try:        # NumPy / torch integers too, as a PennyLane user's ranges array holds
                if isinstance(r, (bool, np.bool_)) or (isinstance(r, torch.Tensor) and r.dtype == torch.bool):
                    raise TypeError
                ranges[j] = r = operator.index(r)
            except TypeError:
                raise TypeError(f"{what}: range {r!r} is not an int") from None
            if n > 1 and not 1 <= r <= n - 1:
                raise ValueError(f"{what}: range {r} must be in [1, {n - 1}] for {n} wires")
    for l in range(n_layers):
        for w in wires:
            circuit.rot(w, trainable=True, init=init)
        if n > 1:
            _entangle(circuit, gate, [(wires[i], wires[(i + ranges[l]) % n]) for i in range(n)], init)
    return circuit


def basic_entangler(circuit: CircuitLike, n_layers: int, wires=None, rotation: str = "RX",
                    init="uniform") -> Circuit:
    """PennyLane's ``BasicEntanglerLayers``: per layer, one trainable rotation per wire, then a ring
    of CNOTs (one CNOT for two wires, none for one). ``n * n_layers`` parameters."""
    what = "basic_entangler"
    circuit = _circuit(circuit, what)
    n_layers = _pos_int(n_layers, "n_layers", what)
    wires = _wires(circuit, wires, what)
    gate = _axis_rotation(rotation, what)
    pairs = entangler_pairs(wires, "ring")
    for _ in range(n_layers):
        for w in wires:
            circuit.add(gate, w, trainable=True, init=init)
        for a, b in pairs:
            circuit.cnot(a, b)
    return circuit


def data_reuploading(circuit: CircuitLike, n_layers: int, n_features: int, wires=None,
                     first_column: int = 0, encoding=("Y", "Z"), scale: float = 1.0,
                     entangler: str = "CNOT", pattern: str = "ring", init="uniform") -> Circuit:
    """Data re-uploading classifier body (Pérez-Salinas et al.): the input is encoded again in
    every layer.

    Layer: feature i (column ``first_column + i``) is encoded by ``R_a(scale * x_i)`` on wire
    ``wires[i % n]`` with axis ``a = encoding[(i // n) % len(encoding)]`` (so with more features
    than wires, successive features on a wire alternate RY, RZ, …); then a trainable ``Rot`` on
    every wire and ``entangler`` on the pairs of ``pattern``. ``3 * n * n_layers`` parameters.
    """
    what = "data_reuploading"
    circuit = _circuit(circuit, what)
    n_layers = _pos_int(n_layers, "n_layers", what)
    n_features = _pos_int(n_features, "n_features", what)
    wires = _wires(circuit, wires, what)
    first_column = _pos_int(first_column, "first_column", what, 0)
    scale = _number(scale, "scale", what)
    if isinstance(encoding, str):
        encoding = (encoding,)
    axes = tuple(_axis_rotation(a, what) for a in encoding)
    if not axes:
        raise ValueError(f"{what}: encoding must name at least one rotation axis")
    ent = _gate(entangler, what, 2)
    if pattern not in ("linear", "ring", "all"):
        raise ValueError(f"{what}: entangler pattern must be 'linear', 'ring' or 'all', got {pattern!r}")
    pairs = entangler_pairs(wires, pattern)
    n = len(wires)
    for _ in range(n_layers):
        for i in range(n_features):
            circuit.add(axes[(i // n) % len(axes)], wires[i % n], input=first_column + i, scale=scale)
        for w in wires:
            circuit.rot(w, trainable=True, init=init)
        _entangle(circuit, ent, pairs, init)
    return circuit


# ---------------------------------------------------------------------------------------------
# quantum Fourier transform
def qft(circuit: CircuitLike, wires=None, swaps: bool = True, inverse: bool = False) -> Circuit:
    """Quantum Fourier transform on ``wires`` (``wires[0]`` the most significant bit).

    H on each wire followed by ``CP(π / 2**(j - i))`` controlled by every later wire j, then SWAPs
    reversing the wire order (``swaps=False`` leaves the output bit-reversed). On ``N = 2**n``
    amplitudes it is the unitary DFT ``F[j, k] = ω^{jk} / √N`` with ``ω = e^{2πi/N}``;
    ``inverse=True`` appends ``F†`` instead.
    """
    what = "qft"
    circuit = _circuit(circuit, what)
    wires = _wires(circuit, wires, what)
    n = len(wires)
    if not inverse:
        for i in range(n):
            circuit.h(wires[i])
            for j in range(i + 1, n):
                circuit.cp(wires[j], wires[i], math.pi / 2 ** (j - i))
        if swaps:
            for i in range(n // 2):
                circuit.swap(wires[i], wires[n - 1 - i])
        return circuit
    if swaps:
        for i in range(n // 2):
            circuit.swap(wires[i], wires[n - 1 - i])
    for i in reversed(range(n)):
        for j in reversed(range(i + 1, n)):
            circuit.cp(wires[j], wires[i], -math.pi / 2 ** (j - i))
        circuit.h(wires[i])
    return circuit


def qft_circuit(n_wires: int, inverse: bool = False, **circuit_kwargs) -> Circuit:
    """A new ``Circuit(n_wires)`` holding the (inverse) QFT; ``circuit_kwargs`` go to Circuit."""
    n_wires = _pos_int(n_wires, "n_wires", "qft_circuit")
    return qft(Circuit(n_wires, **circuit_kwargs), inverse=inverse)


def qaoa(problem, p: int, mixer: str = "x", **kwargs):
    """``tql.templates.qaoa``: the batched QAOA module of :mod:`torchquantum_layers.optimization`."""
    from .optimization import qaoa as build
    return build(problem, p, mixer=mixer, **kwargs)


# Hamiltonian evolution lives in its own module (it needs the observables); templates re-exports it
from .trotter import hamiltonian_variational, pauli_rotation, product_formula, trotter  # noqa: E402
# the QCNN template lives in its own module (its schedule and blocks); templates re-exports it
from .qcnn import qcnn, qcnn_readout_wires  # noqa: E402
# the algorithm templates (phase estimation, Hadamard / swap tests, amplitude amplification) live in their own module
from .algorithms import amplitude_amplification, controlled_unitary, grover_iterations, grover_operator, hadamard_test, phase_oracle, qpe, swap_test  # noqa: E402,E501
