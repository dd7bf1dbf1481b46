"""Qiskit dynamic circuits in: ``MixedCircuit.from_qiskit`` (:func:`mixed_from_qiskit`).

A ``qiskit.QuantumCircuit`` with mid-circuit ``measure``, ``reset`` and classical feed-forward
(``if_test`` / ``IfElseOp``) becomes a :class:`~torchquantum_layers.mixed.MixedCircuit`, whose
density matrix is the Qiskit circuit's state averaged over the measurement outcomes. Gates,
angles, ``inputs=`` / ``trainable=`` and wire order are those of
:func:`~torchquantum_layers.qiskit_interop.from_qiskit` (the same reader); a global phase,
meaningless on a density matrix, is dropped.

Classical bits
    A MixedCircuit has no classical register: a measured wire holds its outcome (it stays
    classical until a gate, channel or reset acts on it), and a conditioned gate reads such wires.
    Qiskit clbit ``i`` (``qc.clbits[i]``) is therefore kept on a wire:

    - on the qubit measured into it, while nothing has acted on that qubit since;
    - on an extra wire otherwise, where the value must outlive that: a condition reads it after the
      qubit changed (or inside an ``if`` block that acts on the qubit), or, with
      ``keep_clbits=True`` (default), the qubit changes before the end of the circuit. Each such
      clbit gets one extra wire, ``qc.num_qubits + k`` for the k-th of them in clbit order, and
      each measurement into it is copied there by a noise-free classical copy channel (a noise
      model attaches nothing to it);
    - a clbit nothing was measured into reads 0, as in Qiskit.

    So the circuit has ``qc.num_qubits`` + (extra) wires; wire ``q < qc.num_qubits`` is qubit ``q``.
    ``return_clbits=True`` also returns ``clbits``, a tuple with, for each Qiskit clbit, the wire
    holding its final value (``None``: never written, so 0, or not kept with
    ``keep_clbits=False``). The distribution of the classical register is that of those wires in
    the final density matrix (``tql.mixed.probabilities``); the qubits' state, classical bits traced
    out, is the reduced density matrix of wires ``0 … qc.num_qubits − 1``.

Instructions
    ``measure`` → a non-selective mid-circuit measurement (the outcomes' average; collapsing runs
    and trajectories sample it); ``reset`` → reset. ``if_test`` / ``IfElseOp`` (an else branch
    too, nested blocks too) on a clbit, on a register compared to an integer, or on a classical
    expression of clbits and registers (``~ & | ^``, ``! && ||``, ``== != < <= > >=``, casts, bit
    index) → each gate of the branch conditioned on the wires holding those bits: the condition is
    split into disjoint sets of bit values (a register ``!= k`` into one set per bit), one
    conditioned copy of the gate each. ``switch_case`` on a clbit, a register or an integer
    expression of them → each case's gates conditioned the same way (a case's values, the default
    case on every value no case names). ``for_loop`` → unrolled, ``box`` → its body, ``barrier`` and
    ``delay`` dropped. Refused with a ValueError naming the instruction: ``while_loop``,
    ``break_loop`` / ``continue_loop``, ``store`` and conditions on classical
    variables or with arithmetic, a measurement or reset inside an ``if`` block (a MixedCircuit
    cannot condition them), a ``unitary`` inside one (a QubitUnitary has no conditioned form), and
    Qiskit 1.x ``c_if`` (write ``if_test``). Qiskit noise is not read.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from . import gates as G
from .qiskit_features import DerivedAngles
from .qiskit_interop import MAX_NESTING, _bindings, _Emitter, _initial, _qiskit, _Reader
from .circuit import Input

__all__ = ["mixed_from_qiskit"]

CALLER = "MixedCircuit.from_qiskit"
MAX_CONDITION_BITS = 16      # a condition is read through its truth table over the bits it reads


def mixed_from_qiskit(qc, *, inputs=None, trainable=None, initial_weights=None, init="uniform",
                      keep_clbits: bool = True, dtype=None, fuse: bool = True,
                      max_fused_wires: Optional[int] = None, return_clbits: bool = False,
                      return_feature_map: bool = False):
    """A :class:`~torchquantum_layers.mixed.MixedCircuit` from a Qiskit dynamic circuit (qubit i →
    wire i). ``inputs``, ``trainable``, ``initial_weights``, ``init``, ``dtype``, ``fuse``,
    ``max_fused_wires`` and ``return_feature_map`` are :func:`~torchquantum_layers.qiskit_interop.from_qiskit`'s.
    ``keep_clbits``: keep every clbit's final value in the state (on an extra wire where its qubit
    changed after the measurement); ``False`` adds extra wires only for values a condition reads.
    Returns the circuit, then ``clbits`` (``return_clbits=True``: the wire holding each clbit's
    final value, or None) and the feature map (``return_feature_map=True``), in that order. See
    the module docstring for the clbit mapping, the instructions read and those refused."""
    qiskit = _qiskit()
    from qiskit.circuit import Parameter
    from .mixed import MixedCircuit
    if not isinstance(qc, qiskit.QuantumCircuit):
        raise TypeError(f"{CALLER}: expected a qiskit.QuantumCircuit, got {type(qc).__name__}")
    if qc.num_qubits == 0:
        raise ValueError(f"{CALLER}: the circuit has no qubits, so there is nothing to act on")
    binding, n_weights = _bindings(qc, inputs, trainable, Parameter)
    derived = DerivedAngles(binding, sum(isinstance(b, Input) for b in binding.values()), return_feature_map)
    events = _Walker(qiskit, _Reader(qiskit, derived, CALLER)).read(qc)
    extra = _extra_clbits(events, qc.num_qubits, keep_clbits)
    circuit = MixedCircuit(qc.num_qubits + len(extra), fuse=fuse, max_fused_wires=max_fused_wires, dtype=dtype)
    _initial(circuit, n_weights, init, initial_weights)
    clbits = _emit(circuit, events, extra, binding, derived, qc.num_qubits, qc.num_clbits)
    out = (circuit,) + ((clbits,) if return_clbits else ()) + \
        ((derived.module(circuit.n_inputs),) if return_feature_map else ())
    return out if len(out) > 1 else circuit


# =============================================================================================
# reading: Qiskit instructions to a flat list of events
#   ("gates", items)                  unconditioned items of one instruction (the reader's)
#   ("measure", qubit, clbit)
#   ("reset", qubit)
#   ("block", parts)                  one top-level if_else: parts are (cubes, items) per gate, the
#                                     gate applying where the clbits match one of the disjoint
#                                     cubes {clbit: value}
class _Walker:
    def __init__(self, qiskit, reader: _Reader):
        from qiskit.circuit import Barrier, ControlFlowOp, Delay, Measure, Reset
        from qiskit.circuit.classical import expr, types
        self.reader, self.expr, self.types = reader, expr, types
        self.dropped, self.measure, self.reset, self.flow = (Barrier, Delay), Measure, Reset, ControlFlowOp

    def read(self, qc) -> list:
        events: list = []
        self.walk(qc, tuple(range(qc.num_qubits)), tuple(range(qc.num_clbits)), "the circuit", 0, None, events)
        return events

    def walk(self, qc, wires, clbits, where, depth, cubes, out):
        """Append the events of ``qc`` (qubit i on ``wires[i]``, clbit j being Qiskit clbit
        ``clbits[j]``) to ``out``; inside an if block ``cubes`` is its condition and ``out`` the
        block's parts."""
        if depth > MAX_NESTING:
            raise ValueError(f"{CALLER}: {where} nests more than {MAX_NESTING} levels deep")
        qindex = {q: i for i, q in enumerate(qc.qubits)}
        scope = {c: clbits[j] for j, c in enumerate(qc.clbits)}
        for inst in qc.data:
            op = inst.operation
            qs = tuple(wires[qindex[q]] for q in inst.qubits)
            cs = tuple(scope[c] for c in inst.clbits)
            what = self.reader.describe(op, qs, where)
            if isinstance(op, self.dropped):
                continue
            if isinstance(op, (self.measure, self.reset)):
                if cubes is not None:
                    raise ValueError(f"{what}: a {op.name} inside an if block cannot be represented in a "
                                     f"MixedCircuit, which conditions gates only")
                out.append(("measure", qs[0], cs[0]) if isinstance(op, self.measure) else ("reset", qs[0]))
            elif isinstance(op, self.flow):
                self.flow_op(op, qs, cs, scope, what, depth, cubes, out)
            elif getattr(op, "condition", None) is not None:
                raise ValueError(f"{what}: a c_if condition (Qiskit 1.x) is not read; write it as a "
                                 f"qc.if_test block")
            elif op.name == "store":
                raise ValueError(f"{what}: classical variables cannot be represented in a MixedCircuit")
            else:
                items = [it for it in self.reader.instruction(op, qs, depth, where) if it[0] != "phase"]
                if cubes is None:
                    out.append(("gates", items))
                    continue
                for it in items:
                    if it[0] != "op":
                        raise ValueError(f"{what}: a '{it[-1] if it[0] == 'reset' else 'unitary'}' inside an if "
                                         f"block cannot be represented in a MixedCircuit, which conditions table "
                                         f"gates only")
                out.append((cubes, items))

    def flow_op(self, op, qs, cs, scope, what, depth, cubes, out):
        inside = f"'{op.name}'"
        if op.name == "box":
            self.walk(op.blocks[0], qs, cs, inside, depth + 1, cubes, out)
        elif op.name == "for_loop":
            indexset, parameter, body = op.params
            for value in indexset:
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                    raise ValueError(f"{what}: the loop runs over {indexset!r}, not over constant integers")
                bound = body if parameter is None or parameter not in body.parameters else \
                    body.assign_parameters({parameter: int(value)})
                self.walk(bound, qs, cs, inside, depth + 1, cubes, out)
        elif op.name == "if_else":
            bits, table = self.condition(op.condition, scope, what)
            self.branches(bits, [(table, op.blocks[0]), (~table, op.blocks[1] if len(op.blocks) > 1 else None)],
                          qs, cs, inside, depth, cubes, out)
        elif op.name == "switch_case":
            from qiskit.circuit import CASE_DEFAULT as _CASE_DEFAULT
            bits, value = self.switch_target(op.target, scope, what)
            cases = list(op.cases_specifier())
            explicit = [v for labels, _ in cases for v in labels if v is not _CASE_DEFAULT]
            branches = []
            for labels, body in cases:
                table = np.isin(value, [v for v in labels if v is not _CASE_DEFAULT])
                if any(v is _CASE_DEFAULT for v in labels):
                    table |= ~np.isin(value, explicit)
                branches.append((table, body))
            self.branches(bits, branches, qs, cs, inside, depth, cubes, out)
        else:
            raise ValueError(f"{what}: '{op.name}' cannot be represented in a MixedCircuit (a fixed sequence of "
                             f"gates, measurements and resets; if_test, for_loop and box are read)")

    def branches(self, bits, branches, qs, cs, inside, depth, cubes, out):
        """Walk each (truth table over ``bits``, body or None) branch, its gates conditioned on the
        disjoint cubes where its table holds (combined with the enclosing ``cubes``)."""
        parts = [] if cubes is None else out
        for table, body in branches:
            if body is None:
                continue
            branch_cubes = _cubes(bits, table)
            if cubes is not None:
                branch_cubes = [{**a, **b} for a in cubes for b in branch_cubes
                                if all(a.get(k, v) == v for k, v in b.items())]
            self.walk(body, qs, cs, inside, depth + 1, branch_cubes, parts)
        if cubes is None:
            out.append(("block", parts))

    def switch_target(self, target, scope, what):
        """(bits read, the target's integer value over their assignments) of a switch."""
        node = target if isinstance(target, self.expr.Expr) else self.expr.lift(target)
        bits, value, is_bool = self.table(node, scope, what)
        return bits, value.astype(np.int64)

    # -- conditions: a truth table over the clbits read, bit j of the assignment index a being
    # (a >> (m - 1 - j)) & 1, so fixing the first bits selects a contiguous block (see _cubes)
    def condition(self, condition, scope, what):
        node = condition if isinstance(condition, self.expr.Expr) else self.expr.lift_legacy_condition(condition)
        bits, value, is_bool = self.table(node, scope, what)
        if not is_bool:
            raise ValueError(f"{what}: the condition `{node}` is not a boolean")
        return bits, value.astype(bool)

    def table(self, node, scope, what):
        """(clbit wires read, the node's value over their assignments, whether it is a boolean)."""
        from qiskit.circuit import Clbit, ClassicalRegister
        expr = self.expr
        bits = []
        for var in expr.iter_vars(node):
            # anything else (a classical variable) is refused, by name, in evaluate
            targets = [var.var] if isinstance(var.var, Clbit) else list(var.var) \
                if isinstance(var.var, ClassicalRegister) else []
            for b in targets:
                if b not in scope:
                    raise ValueError(f"{what}: the condition reads a classical bit the instruction does not hold")
                if scope[b] not in bits:
                    bits.append(scope[b])
        if len(bits) > MAX_CONDITION_BITS:
            raise ValueError(f"{what}: the condition reads {len(bits)} classical bits; at most {MAX_CONDITION_BITS} "
                             f"are read")
        m = len(bits)
        index = np.arange(2 ** m)
        values = {b: (index >> (m - 1 - j)) & 1 for j, b in enumerate(bits)}
        value, is_bool = self.evaluate(node, scope, values, 2 ** m, what)
        return bits, value, is_bool

    def evaluate(self, node, scope, values, size, what):
        """(int64 array over the ``size`` assignments, whether it is a boolean)."""
        from qiskit.circuit import Clbit, ClassicalRegister
        expr, types = self.expr, self.types
        unsupported = f"{what}: the condition `{node}` cannot be read"
        if isinstance(node, expr.Var):
            if isinstance(node.var, Clbit):
                return values[scope[node.var]], True
            if isinstance(node.var, ClassicalRegister):
                return sum((values[scope[b]] << j for j, b in enumerate(node.var)), np.zeros(size, np.int64)), False
            raise ValueError(f"{unsupported}: classical variables (here '{getattr(node, 'name', node.var)}') cannot be "
                             f"represented in a "
                             f"MixedCircuit; condition on clbits and registers")
        if isinstance(node, expr.Value):
            if isinstance(node.type, (types.Bool, types.Uint)):
                return np.full(size, int(node.value), dtype=np.int64), isinstance(node.type, types.Bool)
            raise ValueError(f"{unsupported}: only boolean and integer values are read")
        if isinstance(node, expr.Cast):
            x, _ = self.evaluate(node.operand, scope, values, size, what)
            if isinstance(node.type, types.Bool):
                return (x != 0).astype(np.int64), True
            if isinstance(node.type, types.Uint):
                return x & (2 ** node.type.width - 1), False
            raise ValueError(f"{unsupported}: only casts between booleans and integers are read")
        if isinstance(node, expr.Unary):
            x, is_bool = self.evaluate(node.operand, scope, values, size, what)
            if node.op == expr.Unary.Op.LOGIC_NOT or (node.op == expr.Unary.Op.BIT_NOT and is_bool):
                return (x == 0).astype(np.int64), True
            if node.op == expr.Unary.Op.BIT_NOT:
                return ~x & (2 ** node.type.width - 1), False
            raise ValueError(f"{unsupported}: the operation {node.op.name} is not read")
        if isinstance(node, expr.Index) and isinstance(node.index, expr.Value):
            x, _ = self.evaluate(node.target, scope, values, size, what)
            return (x >> int(node.index.value)) & 1, True
        if isinstance(node, expr.Binary) and node.op.name in _BINARY:
            x, _ = self.evaluate(node.left, scope, values, size, what)
            y, _ = self.evaluate(node.right, scope, values, size, what)
            return _BINARY[node.op.name](x, y).astype(np.int64), isinstance(node.type, types.Bool)
        raise ValueError(f"{unsupported}: {type(node).__name__}"
                         f"{' ' + node.op.name if hasattr(node, 'op') else ''} is not read (clbits, registers, "
                         f"integers, ~ & | ^, ! && ||, comparisons, casts and constant bit indices are)")


_BINARY = {
    "BIT_AND": lambda x, y: x & y, "BIT_OR": lambda x, y: x | y, "BIT_XOR": lambda x, y: x ^ y,
    "LOGIC_AND": lambda x, y: (x != 0) & (y != 0), "LOGIC_OR": lambda x, y: (x != 0) | (y != 0),
    "EQUAL": lambda x, y: x == y, "NOT_EQUAL": lambda x, y: x != y, "LESS": lambda x, y: x < y,
    "LESS_EQUAL": lambda x, y: x <= y, "GREATER": lambda x, y: x > y, "GREATER_EQUAL": lambda x, y: x >= y,
}


def _cubes(bits, table) -> list:
    """Disjoint cubes ({bit: value}) whose union is where ``table`` holds: split on the bits in
    order (Shannon expansion), stopping where the table is constant, so ``reg == k`` is one cube
    and ``reg != k`` one per bit."""
    out = []

    def split(lo, hi, j, fixed):
        block = table[lo:hi]
        if not block.any():
            return
        if block.all():
            out.append(dict(fixed))
            return
        mid = (lo + hi) // 2
        split(lo, mid, j + 1, fixed + [(bits[j], 0)])
        split(mid, hi, j + 1, fixed + [(bits[j], 1)])
    split(0, len(table), 0, [])
    return out


# =============================================================================================
# where each clbit lives: the qubit measured into it while that qubit holds the outcome (its
# "stamp", the count of instructions that changed it, is unchanged), else an extra wire
def _block_wires(parts) -> set:
    return {w for _, items in parts for it in items for w in it[2]}


def _block_clbits(parts) -> set:
    return {c for cubes, _ in parts for cube in cubes for c in cube}


def _item_wires(it) -> tuple:
    return it[2] if it[0] == "op" else it[1]


def _extra_clbits(events, n_qubits: int, keep: bool) -> list:
    """The clbits that need an extra wire, in clbit order."""
    stamp = [0] * n_qubits
    version, extra = {}, set()
    for ev in events:
        if ev[0] == "gates":
            for it in ev[1]:
                for w in _item_wires(it):
                    stamp[w] += 1
        elif ev[0] == "measure":
            version[ev[2]] = (ev[1], stamp[ev[1]])
        elif ev[0] == "reset":
            stamp[ev[1]] += 1
        else:
            touched = _block_wires(ev[1])
            for c in _block_clbits(ev[1]):
                # a condition wire must still hold the value, and no gate of the block may act on it
                if c in version and (stamp[version[c][0]] != version[c][1] or version[c][0] in touched):
                    extra.add(c)
            for w in touched:
                stamp[w] += 1
    if keep:
        extra.update(c for c, (q, s) in version.items() if stamp[q] != s)
    return sorted(extra)


def _copy_channel():
    """Overwrite the second wire with the (measured) value of the first: Kraus operators
    |a⟩⟨a| ⊗ |a⟩⟨b|, trace preserving; a channel, not a gate, so noise models leave it alone."""
    from .mixed.channels import kraus_channel
    ops = []
    for a in (0, 1):
        for b in (0, 1):
            k = np.zeros((4, 4), dtype=np.complex128)
            k[2 * a + a, 2 * a + b] = 1.0
            ops.append(k)
    return kraus_channel(ops, name="copy")


class _MixedEmitter(_Emitter):
    def __init__(self, circuit, binding, derived):
        super().__init__(circuit, binding, False, derived)

    def gate(self, it, condition=None):
        if it[0] == "unitary":
            _, wires, m = it
            self.circuit.add(G.QUBIT_UNITARY, list(wires), matrix=torch.from_numpy(m))
        else:
            _, gate, wires, angles, adjoint = it
            self.add(gate, wires, angles, adjoint, **({"condition": condition} if condition else {}))


def _emit(circuit, events, extra, binding, derived, n_qubits: int, n_clbits: int) -> tuple:
    emitter = _MixedEmitter(circuit, binding, derived)
    wire_of = {c: n_qubits + k for k, c in enumerate(extra)}
    copy = _copy_channel() if extra else None
    stamp = [0] * n_qubits
    version = {}
    for ev in events:
        if ev[0] == "gates":
            for it in ev[1]:
                if it[0] == "reset":
                    circuit.reset(list(it[1]))
                else:
                    emitter.gate(it)
                for w in _item_wires(it):
                    stamp[w] += 1
        elif ev[0] == "measure":
            _, q, c = ev
            if c in wire_of:
                # the copy dephases q as the measurement does; measuring both again changes
                # nothing but marks them as holding the outcome, which conditions require
                circuit.channel(copy, (q, wire_of[c]))
                circuit.measure([q, wire_of[c]])
            else:
                circuit.measure([q])
            version[c] = (q, stamp[q])
        elif ev[0] == "reset":
            circuit.reset([ev[1]])
            stamp[ev[1]] += 1
        else:
            _, parts = ev
            for cubes, items in parts:
                for cube in cubes:
                    condition = {}
                    for c, v in cube.items():
                        if c not in version:            # never measured: reads 0
                            if v:
                                break
                            continue
                        w = wire_of.get(c, version[c][0])
                        if condition.setdefault(w, v) != v:     # two bits of one qubit read differently
                            break
                    else:
                        for it in items:
                            emitter.gate(it, condition)
            for w in _block_wires(parts):
                stamp[w] += 1
    def final(c):
        if c in wire_of:
            return wire_of[c]
        q, s = version.get(c, (None, None))
        # lost only with keep=False: the qubit changed after the measurement
        return q if q is not None and stamp[q] == s else None
    return tuple(final(c) for c in range(n_clbits))
