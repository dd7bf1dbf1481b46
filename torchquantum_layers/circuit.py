"""``Circuit``: an ``nn.Module`` holding a list of gate operations and its trainable angles.

Every builder method (``c.rx``, ``c.cnot`` …) is generated from the gate table. An angle is a
fixed number, a trainable entry of ``c.weights`` (a :class:`Param`), or a column of the input
features (an :class:`Input`), so one circuit encodes a whole batch.
"""
from __future__ import annotations

import math
import numbers
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Union

import torch
from torch import nn

from . import gates as G
from .kernels.apply import check_wires
from .kernels.state import COMPLEX_OF, REAL_OF, check_allocation, n_wires_of
from .kernels.transforms import inspectable


@dataclass(frozen=True)
class Param:
    """Angle = ``scale * circuit.weights[index]``; the same Param may feed several gates."""
    index: int
    scale: float = 1.0


@dataclass(frozen=True)
class Input:
    """Angle = ``scale * x[:, column]`` (per sample)."""
    column: int
    scale: float = 1.0


Angle = Union[float, Param, Input]


@dataclass(frozen=True)
class Op:
    gate: G.Gate
    wires: tuple
    angles: tuple = ()
    data_key: Optional[str] = None   # buffer name holding a QubitUnitary/DiagonalUnitary matrix
    adjoint: bool = False

    @property
    def name(self) -> str:
        return self.gate.name + ("†" if self.adjoint and not self.gate.self_inverse else "")

    def __reduce__(self):
        # gates hold closures: pickle them by name (controlled gates by target and count)
        return (_rebuild_op, (G.gate_key(self.gate), self.wires, self.angles, self.data_key, self.adjoint))


def _rebuild_op(gate_key, wires, angles, data_key, adjoint):
    return Op(G.gate_from_key(gate_key), wires, angles, data_key, adjoint)


_INIT = ("uniform", "normal", "zeros", "small")


def _check_scale(scale, what):
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"{what}: scale {scale!r} must be a finite number")


class Circuit(nn.Module):
    """A parametrised quantum circuit on ``n_wires`` qubits.

    ``c(x=None, state=None)`` returns the final states ``(B, 2**n)``; B comes from ``x`` or
    ``state`` (1 if neither is given). ``fuse`` merges runs of gates into blocks of at most
    ``max_fused_wires`` wires applied as one matrix product each (exact to float rounding).
    """

    def __init__(self, n_wires: int, *, fuse: bool = True, max_fused_wires: Optional[int] = None,
                 dtype=None):
        super().__init__()
        if not isinstance(n_wires, int) or isinstance(n_wires, bool) or n_wires < 1:
            raise ValueError(f"Circuit: n_wires must be a positive int, got {n_wires!r}")
        self.n_wires = n_wires
        self.ops: list[Op] = []
        self.fuse = fuse
        self.max_fused_wires = max_fused_wires
        real = torch.float32
        if dtype is not None:
            real = REAL_OF[dtype] if dtype in REAL_OF else dtype
        self.weights = nn.Parameter(torch.zeros(0, dtype=real))
        # follows .double()/.float()/.to(device): sets the simulation dtype and device
        self.register_buffer("_real_marker", torch.zeros((), dtype=real), persistent=False)
        self._n_data = 0
        self._plan_cache = None

    # -- dtype / device -----------------------------------------------------------------------
    @property
    def is_noisy(self) -> bool:
        """True where the circuit has channels, measurements, resets or a noise model (a
        :class:`~tql.mixed.MixedCircuit`): it then runs on density matrices only."""
        return False

    @property
    def dtype(self) -> torch.dtype:
        return COMPLEX_OF[self._real_marker.dtype]

    @property
    def device(self) -> torch.device:
        return self._real_marker.device

    # -- building -----------------------------------------------------------------------------
    def parameter(self, init: Union[float, str] = "uniform", scale: float = 1.0) -> Param:
        """Add one trainable angle and return a reference usable in several gates."""
        if isinstance(init, str):
            if init not in _INIT:
                raise ValueError(f"Circuit.parameter: init must be a number or one of {_INIT}, got {init!r}")
            value = {"uniform": lambda: torch.rand(()) * 2 * math.pi,
                     "normal": lambda: torch.randn(()),
                     "small": lambda: torch.randn(()) * 0.01,
                     "zeros": lambda: torch.zeros(())}[init]()
        else:
            value = torch.tensor(float(init), dtype=torch.float64)
            if not torch.isfinite(value):
                raise ValueError(f"Circuit.parameter: init {init!r} is not finite")
        _check_scale(scale, "Circuit.parameter")
        with torch.no_grad():
            new = torch.cat([self.weights.detach(), value.reshape(1).to(self.weights)])
        # grow in place: the Parameter object (shared with inverse() circuits) stays the same
        self.weights.data = new
        self._plan_cache = None
        return Param(new.shape[0] - 1, float(scale))

    def add(self, gate, wires, *angles, trainable: bool = False, input=None, scale: float = 1.0,
            init: Union[float, str] = "uniform", matrix=None, condition=None) -> "Circuit":
        """Append ``gate`` on ``wires``. Angles: positional values/Param/Input, or
        ``trainable=True`` (new parameters, ``init``), or ``input=col`` / ``input=(c0, c1, ...)``.
        ``condition`` (measurement outcomes) needs a :class:`~tql.MixedCircuit`."""
        if condition is not None:
            raise ValueError(f"{G.get_gate(gate).name}: condition= reads mid-circuit measurement outcomes, which a "
                             f"state-vector Circuit does not hold: build a tql.MixedCircuit")
        gate = G.get_gate(gate)
        wires = check_wires(wires, self.n_wires, f"{gate.name}")
        if gate.n_wires is not None and len(wires) != gate.n_wires:
            raise ValueError(f"{gate.name} acts on {gate.n_wires} wire(s), got wires {wires}")
        if len(wires) < gate.min_wires:
            raise ValueError(f"{gate.name} needs at least {gate.min_wires} wires, got {wires}")
        angles = self._resolve_angles(gate, angles, trainable, input, scale, init)
        data_key = None
        if gate.takes_data:
            data_key = self._store_data(gate, wires, matrix)
        elif matrix is not None:
            raise ValueError(f"{gate.name} takes no matrix")
        self.ops.append(Op(gate, wires, angles, data_key))
        self._plan_cache = None
        return self

    def _resolve_angles(self, gate, angles, trainable, input, scale, init):
        n = gate.n_params
        given = sum(x is not None for x in (trainable or None, input))
        if given > 1 or (given and angles):
            raise ValueError(f"{gate.name}: give angles positionally, or trainable=True, or input=, not several")
        _check_scale(scale, gate.name)
        if trainable:
            angles = tuple(self.parameter(init, scale) for _ in range(n))
        elif input is not None:
            cols = (input,) if not isinstance(input, (tuple, list)) else tuple(input)
            if len(cols) != n:
                raise ValueError(f"{gate.name} takes {n} parameter(s) but input= names {len(cols)} column(s)")
            angles = tuple(Input(c, float(scale)) for c in cols)
        if len(angles) != n:
            raise ValueError(f"{gate.name} takes {n} parameter(s), got {len(angles)}")
        out = []
        for a in angles:
            if isinstance(a, (Param, Input)):
                _check_scale(a.scale, gate.name)
                if isinstance(a, Param) and not 0 <= a.index < self.weights.shape[0]:
                    raise ValueError(f"{gate.name}: Param index {a.index} does not exist in this circuit")
                if isinstance(a, Input):
                    if isinstance(a.column, bool) or not isinstance(a.column, numbers.Integral) or a.column < 0:
                        raise ValueError(f"{gate.name}: input column {a.column!r} must be a non-negative int")
                    a = Input(int(a.column), a.scale)          # NumPy ints too
                out.append(a)
                continue
            if isinstance(a, torch.Tensor) or (hasattr(a, "shape") and hasattr(a, "item")):   # NumPy arrays too
                if math.prod(a.shape) != 1:
                    kind = "a tensor" if isinstance(a, torch.Tensor) else "an array"
                    raise TypeError(f"{gate.name}: a fixed angle must be a number, got {kind} of shape "
                                    f"{tuple(a.shape)}")
                a = a.item()
            if not isinstance(a, numbers.Real) or isinstance(a, bool):
                raise TypeError(f"{gate.name}: angle {a!r} is not a number, Param or Input")
            if not math.isfinite(a):
                raise ValueError(f"{gate.name}: angle {a!r} is not finite")
            out.append(float(a))
        return tuple(out)

    def _store_data(self, gate, wires, matrix):
        if matrix is None:
            raise ValueError(f"{gate.name} needs matrix=")
        m = torch.as_tensor(matrix)
        if not m.is_complex():
            m = m.to(torch.complex128)
        G.check_gate_data(gate, wires, m)
        m = m.to(torch.complex128)
        # stored as the nearest unitary (polar factor; unit-modulus diagonal): a complex64 matrix
        # passes the check at ~1e-7, and the adjoint method, which un-computes with U†, then drifted
        # from backprop by as much in a complex128 circuit
        if gate.kind == "diagonal":
            m = m / m.abs()
        else:
            left, _, right = torch.linalg.svd(m)
            m = left @ right
        key = f"_data{self._n_data}"
        self._n_data += 1
        self.register_buffer(key, m)
        return key

    def import_weights(self, other: "Circuit") -> int:
        """Copy ``other``'s trainable angles to the end of this circuit's and return where they
        start: ops that read ``Param(i)`` of ``other`` read ``Param(i + offset)`` here."""
        offset = self.weights.shape[0]
        if other.weights.shape[0]:
            with torch.no_grad():
                new = torch.cat([self.weights.detach(), other.weights.detach().to(self.weights)])
            # the same Parameter grows (as parameter() does): inverse() views and optimizers keep it
            self.weights.data = new
        return offset

    def extend_ops(self, ops) -> "Circuit":
        """Append prepared :class:`Op` records (templates that build controlled or shared-angle
        copies of other circuits' ops); their Params must index this circuit's weights and their
        data keys its buffers."""
        ops = list(ops)
        for op in ops:
            if not isinstance(op, Op):
                raise TypeError(f"extend_ops: expected Op records, got {type(op).__name__}")
            if any(isinstance(a, Param) and a.index >= self.weights.shape[0] for a in op.angles):
                raise ValueError(f"extend_ops: {op.gate.name} reads a trainable angle this circuit does not have")
            if op.data_key is not None and not hasattr(self, op.data_key):
                raise ValueError(f"extend_ops: {op.gate.name} reads matrix {op.data_key!r}, not one of this circuit's")
        self.ops.extend(ops)
        self._plan_cache = None
        return self

    def append(self, other: "Circuit") -> "Circuit":
        """Append another circuit's operations; its trainable angles are copied in."""
        if not isinstance(other, Circuit):
            raise TypeError(f"append: expected a Circuit, got {type(other).__name__}")
        if other.is_noisy and not hasattr(self, "instructions"):
            raise TypeError("append: the appended circuit has channels, measurements, resets or a noise model, "
                            "which a Circuit cannot hold; append it to a tql.MixedCircuit")
        if other.n_wires > self.n_wires:
            raise ValueError(f"append: circuit on {other.n_wires} wires does not fit in {self.n_wires}")
        offset = self.import_weights(other)
        for op in other.ops:
            angles = tuple(Param(a.index + offset, a.scale) if isinstance(a, Param) else a for a in op.angles)
            key = None
            if op.data_key is not None:
                key = f"_data{self._n_data}"
                self._n_data += 1
                self.register_buffer(key, getattr(other, op.data_key).clone())
            self.ops.append(Op(op.gate, op.wires, angles, key, op.adjoint))
        self._plan_cache = None
        return self

    def __getstate__(self):
        # the execution plan is derived data holding gate closures: rebuild it after unpickling
        state = self.__dict__.copy()
        state["_plan_cache"] = None
        return state

    def copy(self) -> "Circuit":
        import copy
        return copy.deepcopy(self)

    def __add__(self, other: "Circuit") -> "Circuit":
        return self.copy().append(other)

    def inverse(self) -> "Circuit":
        """The adjoint circuit; it shares this circuit's ``weights`` Parameter."""
        return self._sharing([Op(op.gate, op.wires, op.angles, op.data_key, not op.adjoint)
                              for op in reversed(self.ops)])

    def _sharing(self, ops, n_wires: Optional[int] = None, cls=None, weights=None) -> "Circuit":
        """A circuit of ``ops`` (on ``n_wires``, default this one's) sharing this one's weights
        Parameter (or taking ``weights``), matrices, dtype and device; a ``cls`` (a Circuit
        subclass) instance if given."""
        other = (cls or Circuit)(n_wires or self.n_wires, fuse=self.fuse, max_fused_wires=self.max_fused_wires)
        shared = self.weights if weights is None else weights
        if isinstance(shared, nn.Parameter):
            other.weights = shared
        else:       # a plain tensor standing in for the Parameter (torch.func.functional_call): as is
            other._parameters["weights"] = shared
        other._real_marker = self._real_marker.clone()
        for name, buf in self.named_buffers():
            if name.startswith("_data"):
                other.register_buffer(name, buf)
        other._n_data = self._n_data
        other.ops = list(ops)
        return other

    def _suffix(self, start: int) -> "Circuit":
        """The ops from ``start`` on as a circuit sharing this one's weights and matrices (what
        parameter-shift runs after a shifted gate), cached with its plan until the circuit,
        its dtype or its device change."""
        key = (len(self.ops), self.dtype, str(self.device), self.fuse, self.max_fused_wires)
        cache = self.__dict__.setdefault("_suffix_cache", {})
        if cache.get("key") != key:
            cache.clear()
            cache["key"] = key
        if start not in cache:
            cache[start] = self._sharing(self.ops[start:])
        return cache[start]

    # -- introspection ------------------------------------------------------------------------
    @property
    def num_parameters(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_inputs(self) -> int:
        """Number of input feature columns the circuit reads (max column + 1)."""
        cols = [a.column for op in self.ops for a in op.angles if isinstance(a, Input)]
        return max(cols) + 1 if cols else 0

    @property
    def depth(self) -> int:
        level = [0] * self.n_wires
        for op in self.ops:
            d = max(level[w] for w in op.wires) + 1
            for w in op.wires:
                level[w] = d
        return max(level) if level else 0

    def count_ops(self) -> dict:
        return dict(Counter(op.gate.name for op in self.ops))

    def __len__(self) -> int:
        return len(self.ops)

    def extra_repr(self) -> str:
        return f"n_wires={self.n_wires}, ops={len(self.ops)}, parameters={self.num_parameters}"

    def __str__(self) -> str:
        from .drawing import draw_text
        return draw_text(self)

    def draw(self, style: str = "text", **kwargs):
        """``"text"``: the drawing ``print(circuit)`` shows (a str; ``max_width=`` characters per
        line before it folds, None never). ``"mpl"``: a matplotlib Figure (the ``plot`` extra)
        with the same columns; keywords ``path=`` (save a PNG), ``ax=``, ``show_values=`` (print
        trainable angles' values), see :func:`.drawing.draw_mpl`."""
        from .drawing import MAX_WIDTH, draw_text
        if style == "text":
            unknown = sorted(set(kwargs) - {"max_width"})
            if unknown:
                raise TypeError(f"draw('text') takes only max_width=, got {', '.join(unknown)}")
            return draw_text(self, max_width=kwargs.get("max_width", MAX_WIDTH))
        if style == "mpl":
            from .drawing import draw_mpl
            return draw_mpl(self, **kwargs)
        raise ValueError(f"draw: style must be 'text' or 'mpl', got {style!r}")

    # -- running ------------------------------------------------------------------------------
    def data(self, op: Op):
        return None if op.data_key is None else getattr(self, op.data_key)

    def prepare(self, x=None, state=None, materialize=True):
        """Validate inputs; return (x as (B, F) real or None, initial state, squeezed flag).

        ``materialize=False``: with no state given, return None for |0…0⟩ (the engine then
        builds the circuit's leading single-wire gates as a product state instead).

        ``x`` may have more columns than the gates read (``F >= n_inputs``): gates address columns
        by index, so one feature table can feed circuits that read different columns, and a
        circuit without input gates takes ``x`` to set the batch. Too few columns is an error.
        Wrappers that own the mapping to the circuit's columns (``QuantumLayer``, the kernels'
        input maps) demand exactly ``n_inputs``, so extra columns there cannot go unnoticed."""
        dtype, device = self.dtype, self.device
        squeeze = False
        if x is not None:
            if not isinstance(x, torch.Tensor):
                x = torch.as_tensor(x)
            if x.is_complex():
                raise TypeError(f"Circuit: input features must be real, got {x.dtype}")
            if x.dim() == 1:
                x, squeeze = x.unsqueeze(0), True
            if x.dim() != 2:
                raise ValueError(f"Circuit: input features must have shape (B, F) or (F,), got {tuple(x.shape)}")
            need = self.n_inputs
            if x.shape[1] < need:
                raise ValueError(f"Circuit: gates read input column {need - 1} but x has only "
                                 f"{x.shape[1]} column(s) (shape {tuple(x.shape)})")
            if x.device != device:
                raise TypeError(f"Circuit: input x is on {x.device} but the circuit is on {device}")
            if x.device.type == "cpu" and inspectable(x) and not torch.isfinite(x).all():
                raise ValueError("Circuit: input features contain NaN or inf")
            x = x.to(REAL_OF[dtype])
        elif self.n_inputs:
            raise ValueError(f"Circuit: gates read {self.n_inputs} input column(s) but no x was given")
        if state is None:
            batch = x.shape[0] if x is not None else 1
            check_allocation(self.n_wires, batch, dtype, device)
            if materialize:
                state = torch.zeros(batch, 2 ** self.n_wires, dtype=dtype, device=device)
                state[:, 0] = 1
        else:
            if not isinstance(state, torch.Tensor):
                raise TypeError(f"Circuit: state must be a tensor, got {type(state).__name__}")
            if state.dim() == 1:
                state = state.unsqueeze(0)
            n = n_wires_of(state)
            if n != self.n_wires:
                raise ValueError(f"Circuit: state has {n} qubits (shape {tuple(state.shape)}) but the "
                                 f"circuit has {self.n_wires} wires")
            if state.dtype != dtype:
                raise TypeError(f"Circuit: state dtype {state.dtype} does not match the circuit's {dtype} "
                                f"(use circuit.double() for complex128 or state.to({dtype}))")
            if state.device != device:
                raise TypeError(f"Circuit: state is on {state.device} but the circuit is on {device}")
            if x is not None and state.shape[0] not in (1, x.shape[0]):
                raise ValueError(f"Circuit: state batch {state.shape[0]} does not match input batch {x.shape[0]}")
            if x is not None and state.shape[0] == 1 and x.shape[0] > 1:
                state = state.expand(x.shape[0], -1)   # the output batch is always x's
        return x, state, squeeze

    def weights_or(self, weights, what: str) -> torch.Tensor:
        """``weights`` (a stand-in for ``self.weights`` in one call) after a shape check, or
        ``self.weights`` when None; ``what`` names the calling function in the error."""
        if weights is None:
            return self.weights
        if not isinstance(weights, torch.Tensor):
            raise TypeError(f"{what}: weights must be a tensor, got {type(weights).__name__}")
        if weights.shape != self.weights.shape:
            raise ValueError(f"{what}: weights of shape {tuple(weights.shape)} do not match the circuit's "
                             f"{tuple(self.weights.shape)}")
        return weights

    def angle_values(self, op: Op, x, weights=None):
        """Real tensors for the op's angles: shape () for shared angles, (B,) for input ones."""
        w = self.weights if weights is None else weights
        real = REAL_OF[self.dtype]
        vals = []
        for a in op.angles:
            if isinstance(a, Param):
                v = w[a.index].to(real)
                vals.append(v if a.scale == 1.0 else v * a.scale)
            elif isinstance(a, Input):
                v = x[:, a.column]
                vals.append(v if a.scale == 1.0 else v * a.scale)
            else:
                vals.append(torch.tensor(a, dtype=real, device=self.device))
        return tuple(vals)

    def forward(self, x=None, state=None):
        if _is_density_input(state):
            from .mixed import run
            return run(self, x=x, state=state)
        x, state, _ = self.prepare(x, state, materialize=False)
        from .engine import run_circuit
        return run_circuit(self, state, x)

    def unitary(self, x=None) -> torch.Tensor:
        """The circuit's 2^n × 2^n matrix (n ≤ 12), built by running it on every basis state.

        A circuit that reads input features needs ``x``: one row ``(F,)`` gives the matrix for
        those features, a batch ``(B, F)`` one matrix per row, ``(B, 2^n, 2^n)``."""
        if self.n_inputs and x is None:
            raise ValueError(f"unitary: the circuit reads {self.n_inputs} input column(s); pass x "
                             f"(one row (F,) or a batch (B, F))")
        if self.n_wires > 12:
            raise ValueError(f"unitary: {self.n_wires} wires would need a {2 ** self.n_wires}-square matrix; "
                             f"limit is 12")
        d = 2 ** self.n_wires
        eye = torch.eye(d, dtype=self.dtype, device=self.device)
        if x is None:
            return self(state=eye).transpose(0, 1)
        x, _, squeeze = self.prepare(x, None, materialize=False)
        B = x.shape[0]
        check_allocation(self.n_wires, B * d, self.dtype, self.device)
        # row b·d + j: basis state j under the features of row b
        columns = self(x.repeat_interleave(d, 0), state=eye.repeat(B, 1))
        u = columns.reshape(B, d, d).transpose(1, 2)
        return u[0] if squeeze else u

    # -- OpenQASM 2.0 (torchquantum_layers.qasm; imported late, as it imports this module) -----
    @classmethod
    def from_qasm(cls, source, **kwargs) -> "Circuit":
        """A circuit from OpenQASM 2.0 text or a file path; q[0] of the first qreg is wire 0."""
        from .qasm import from_qasm
        return from_qasm(source, **kwargs)

    def to_qasm(self, *, bind: bool = True, measure: bool = False) -> str:
        """OpenQASM 2.0 text on ``qreg q[n]``; trainable angles are written as their current values."""
        from .qasm import to_qasm
        return to_qasm(self, bind=bind, measure=measure)

    # -- OpenQASM 3 (torchquantum_layers.qasm3, qasm3_import) ---------------------------------
    @classmethod
    def from_qasm3(cls, source, **kwargs) -> "Circuit":
        """A circuit from OpenQASM 3 text or a file path (the ``qasm3`` extra: openqasm3[parser]);
        ``input float`` declarations become trainable weights or input columns (``inputs=``), see
        :func:`torchquantum_layers.qasm3_import.from_qasm3`. On ``MixedCircuit`` it keeps
        ``measure`` and ``reset`` (``mixed=True``)."""
        from .mixed import MixedCircuit
        from .qasm3_import import from_qasm3
        if issubclass(cls, MixedCircuit):
            kwargs.setdefault("mixed", True)
        return from_qasm3(source, **kwargs)

    def to_qasm3(self, *, parameters: str = "bound") -> str:
        """OpenQASM 3 text on ``qubit[n] q``: stdgates.inc names, ``ctrl(k) @`` / ``inv @``
        modifiers; ``parameters="input"`` writes trainable and input angles as ``input float[64]``."""
        from .qasm3 import to_qasm3
        return to_qasm3(self, parameters=parameters)

    # -- Qiskit (torchquantum_layers.qiskit_interop; the qiskit extra) -------------------------
    @classmethod
    def from_qiskit(cls, qc, **kwargs):
        """A circuit from a ``qiskit.QuantumCircuit`` (qubit i → wire i); ``inputs=`` / ``trainable=``
        map its Parameters; ``return_feature_map=True`` returns ``(circuit, feature_map)`` for angles
        that are non-affine in the inputs. See :func:`torchquantum_layers.qiskit_interop.from_qiskit`."""
        from .qiskit_interop import from_qiskit
        return from_qiskit(qc, **kwargs)

    def to_qiskit(self, **kwargs):
        """A ``qiskit.QuantumCircuit`` (wire i → qubit i), see :func:`torchquantum_layers.qiskit_interop.to_qiskit`."""
        from .qiskit_interop import to_qiskit
        return to_qiskit(self, **kwargs)


def _is_density_input(state) -> bool:
    """A (B, 2^n, 2^n) tensor or a DensityMatrix: run on the density-matrix simulator."""
    if isinstance(state, torch.Tensor):
        return state.dim() == 3
    if state is None:
        return False
    from .mixed import DensityMatrix
    return isinstance(state, DensityMatrix)


def _builder(gate: G.Gate):
    k = gate.n_wires

    def method(self, *args, **kwargs):
        if gate.takes_data:
            if len(args) == 2 and "matrix" not in kwargs:
                wires, matrix = args
            elif len(args) == 1:
                wires, matrix = args[0], kwargs.pop("matrix", None)
            else:
                raise TypeError(f"{gate.name.lower()}(wires, matrix) takes 2 arguments, got {len(args)}")
            return self.add(gate, wires, matrix=matrix, **kwargs)
        if k is None:
            if not args:
                raise TypeError(f"{gate.name.lower()}: give the wires as a list first")
            wires, angles = args[0], args[1:]
        else:
            if len(args) < k:
                raise TypeError(f"{gate.name.lower()} acts on {k} wire(s): got {len(args)} positional "
                                f"argument(s) {args}")
            wires, angles = args[:k], args[k:]
        return self.add(gate, wires, *angles, **kwargs)

    argdoc = "wires" if k is None else ", ".join(f"wire{i}" for i in range(k))
    params = ", ".join(gate.param_names) if gate.param_names else ""
    method.__doc__ = (f"Append {gate.name} on ({argdoc}){' with angles (' + params + ')' if params else ''}. "
                      f"{gate.doc}")
    method.__name__ = gate.name.lower()
    return method


for _name, _gate in G.builder_names().items():
    setattr(Circuit, _name, _builder(_gate))
