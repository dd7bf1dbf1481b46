"""``MixedCircuit``: a Circuit that also holds channels, measurements and resets."""
from __future__ import annotations

from typing import Optional

import torch

from .. import gates as G
from ..circuit import Circuit
from ..kernels.apply import check_wires
from .channels import Channel, unitary_channel

__all__ = ["MixedCircuit", "ChannelInstruction", "MeasureInstruction", "ResetInstruction"]


class ChannelInstruction:
    collapses = False

    def __init__(self, channel: Channel, wires):
        self.channel, self.wires = channel, tuple(wires)

    def apply(self, rho, generator=None):
        return self.channel(rho, self.wires)

    @property
    def label(self) -> str:
        return self.channel.name

    def __repr__(self):
        return f"{self.channel.name}{list(self.wires)}"


class _ConditionFlip(ChannelInstruction):
    """X on a measured wire around a gate conditioned on outcome 0 (relabels the classical value:
    not noise, and the wire still holds its measurement)."""
    condition_flip = True

    def __init__(self, wire: int):
        super().__init__(unitary_channel(torch.tensor([[0, 1], [1, 0]], dtype=torch.complex128), "flip"), (wire,))


class MeasureInstruction:
    """Mid-circuit measurement: the non-selective channel, or a collapse (``collapse=True``)."""

    def __init__(self, wires, collapse: bool = False, owner=None):
        self.wires, self.collapses = tuple(wires), bool(collapse)
        self.owner = owner

    def apply(self, rho, generator=None):
        from .simulate import measure, measure_channel
        if not self.collapses:
            return measure_channel(rho, self.wires)
        out, rho = measure(rho, self.wires, generator)
        if self.owner is not None:
            self.owner.last_outcomes.append((self.wires, out))
        return rho

    @property
    def label(self) -> str:
        return "measure" + ("(collapse)" if self.collapses else "")

    def __repr__(self):
        return f"measure{list(self.wires)}" + ("(collapse)" if self.collapses else "")


class ResetInstruction:
    """Reset to |0⟩: the non-selective channel, or measure-and-flip (``collapse=True``)."""

    def __init__(self, wires, collapse: bool = False, owner=None):
        self.wires, self.collapses = tuple(wires), bool(collapse)
        self.owner = owner

    def apply(self, rho, generator=None):
        from .simulate import reset
        if not self.collapses:
            return reset(rho, self.wires)
        out, rho = reset(rho, self.wires, generator=generator, collapse=True, return_outcomes=True)
        if self.owner is not None:
            self.owner.last_outcomes.append((self.wires, out))
        return rho

    @property
    def label(self) -> str:
        return "reset" + ("(collapse)" if self.collapses else "")

    def __repr__(self):
        return f"reset{list(self.wires)}" + ("(collapse)" if self.collapses else "")


class MixedCircuit(Circuit):
    """A :class:`Circuit` for density matrices: gates (every builder method of Circuit) plus
    ``channel(ch, wires)``, ``measure(wires, collapse=False)`` and ``reset(wires, collapse=False)``
    at their place in the sequence, and an optional ``noise_model`` applied after gates.

    ``c(x=None, state=None, generator=None)`` returns density matrices ``(B, N, N)`` (the input
    state defaults to |0…0⟩⟨0…0|; state vectors are accepted). Collapsing measurements draw from
    ``generator`` and record ``(wires, outcomes)`` in ``c.last_outcomes``.
    """

    def __init__(self, n_wires: int, *, noise_model=None, **kwargs):
        super().__init__(n_wires, **kwargs)
        self.instructions: list = []
        self.noise_model = noise_model
        self.last_outcomes: list = []

    @property
    def is_noisy(self) -> bool:
        return bool(self.instructions) or self.noise_model is not None

    # -- building -----------------------------------------------------------------------------
    def _wires(self, wires, what):
        return check_wires(wires, self.n_wires, what)

    def channel(self, channel: Channel, wires) -> "MixedCircuit":
        if not isinstance(channel, Channel):
            raise TypeError(f"channel: expected a Channel, got {type(channel).__name__}")
        wires = self._wires(wires, channel.name)
        if len(wires) != channel.n_wires:
            raise ValueError(f"{channel.name} acts on {channel.n_wires} wire(s), got wires {wires}")
        self.instructions.append((len(self.ops), ChannelInstruction(channel, wires)))
        return self

    def add(self, gate, wires, *angles, condition=None, **kwargs) -> "MixedCircuit":
        """Circuit.add, and ``condition``: the gate acts only where measured wires read given
        outcomes, ``{wire: 0 or 1}`` (a wire or a list of wires: all 1). Each condition wire must
        hold its last measurement (no gate, channel or reset on it since); the gate may not act on
        it. Exact on density matrices and trajectories, collapsing or not (the measured wires are
        classical there, so the conditioned gate is the controlled one); a noise model treats it
        as the gate on its own wires, in either branch (its time slot passes either way)."""
        if condition is None:
            return super().add(gate, wires, *angles, **kwargs)
        gate = G.get_gate(gate)
        wires = check_wires(wires, self.n_wires, gate.name)
        cond = self._condition(condition, gate, wires)
        zeros = [w for w, v in cond.items() if v == 0]
        self.instructions += [(len(self.ops), _ConditionFlip(w)) for w in zeros]
        super().add(G.classically_controlled(gate, len(cond)), tuple(cond) + wires, *angles, **kwargs)
        self.instructions += [(len(self.ops), _ConditionFlip(w)) for w in zeros]
        return self

    def _condition(self, condition, gate, wires) -> dict:
        what = f"{gate.name} condition"
        if isinstance(condition, dict):
            items = list(condition.items())
        else:
            items = [(w, 1) for w in ((condition,) if isinstance(condition, int) else tuple(condition))]
        if not items:
            raise ValueError(f"{what}: no wire given (None for an unconditional gate)")
        cond = dict(zip(check_wires(tuple(w for w, _ in items), self.n_wires, what), (v for _, v in items)))
        for w, v in cond.items():
            if isinstance(v, bool) or v not in (0, 1):
                raise ValueError(f"{what}: wire {w} must read 0 or 1, got {v!r}")
            if w in wires:
                raise ValueError(f"{what}: wire {w} is read as a measurement and acted on by the gate")
        readable = self._holding_measurements()
        for w in cond:
            if w not in readable:
                raise ValueError(f"{what}: wire {w} does not hold a measurement outcome (not measured, or a gate, "
                                 f"channel or reset acted on it since)")
        return {w: int(v) for w, v in cond.items()}

    def _holding_measurements(self) -> set:
        """Wires whose last measurement is still on the qubit, after the ops so far."""
        at: dict = {}
        for pos, inst in self.instructions:
            at.setdefault(pos, []).append(inst)
        held: set = set()
        for i in range(len(self.ops) + 1):
            for inst in at.get(i, ()):
                if isinstance(inst, MeasureInstruction):
                    held.update(inst.wires)
                elif not isinstance(inst, _ConditionFlip):
                    held.difference_update(inst.wires)
            if i < len(self.ops):
                op = self.ops[i]
                condition = G.condition_of(op.gate)
                held.difference_update(op.wires[condition[0] if condition else 0:])
        return held

    def measure(self, wires, collapse: bool = False) -> "MixedCircuit":
        self.instructions.append((len(self.ops), MeasureInstruction(self._wires(wires, "measure"), collapse, self)))
        return self

    def reset(self, wires, collapse: bool = False) -> "MixedCircuit":
        self.instructions.append((len(self.ops), ResetInstruction(self._wires(wires, "reset"), collapse, self)))
        return self

    def append(self, other) -> "MixedCircuit":
        """Append another circuit's gates and instructions. Its noise model's channels become
        instructions after its gates (this circuit's own model then acts on them too); its
        readout errors become this circuit's, which may have none or the same ones."""
        noise = getattr(other, "noise_model", None)
        readout = getattr(noise, "readout", None)
        mine = getattr(self.noise_model, "readout", None)
        if readout is not None and mine is not None and readout is not mine:
            raise ValueError("MixedCircuit.append: both circuits have readout errors, and they differ; a "
                             "circuit reads out once, through one set")
        offset = len(self.ops)
        super().append(other)
        by_position = {}
        for pos, inst in getattr(other, "instructions", ()):
            by_position.setdefault(pos, []).append(inst)
        if noise is not None and noise.rules:
            for i, op in enumerate(other.ops):      # after op i: before the instructions at i + 1
                channels = [ChannelInstruction(ch, w) for ch, w in noise.channels_for(op)]
                by_position[i + 1] = channels + by_position.get(i + 1, [])
        for pos in sorted(by_position):
            for inst in by_position[pos]:
                if isinstance(inst, (MeasureInstruction, ResetInstruction)):
                    inst = type(inst)(inst.wires, inst.collapses, self)
                self.instructions.append((pos + offset, inst))
        if readout is not None and mine is None:
            from .noise import NoiseModel
            model = NoiseModel()
            model.rules = list(self.noise_model.rules) if self.noise_model is not None else []
            model.readout = readout
            self.noise_model = model
        return self

    @classmethod
    def from_qasm(cls, source, **kwargs) -> "MixedCircuit":
        """A MixedCircuit from OpenQASM 2.0: ``measure`` and ``reset`` stay where they stand."""
        from ..qasm import from_qasm
        return from_qasm(source, mixed=True, **kwargs)

    def inverse(self):
        if self.instructions:
            raise ValueError("MixedCircuit.inverse: channels, measurements and resets have no inverse")
        return super().inverse()

    def extra_repr(self) -> str:
        return super().extra_repr() + f", instructions={len(self.instructions)}"

    # -- running ------------------------------------------------------------------------------
    def forward(self, x=None, state=None, generator: Optional[torch.Generator] = None):
        from .simulate import run
        self.last_outcomes = []
        return run(self, x=x, state=state, generator=generator)

    def expval(self, observables, x=None, state=None, diff_method="backprop", shots=None, generator=None):
        from .simulate import expval
        return expval(self, observables, x=x, state=state, diff_method=diff_method, shots=shots,
                      generator=generator)

    def unitary(self):
        if self.instructions or self.noise_model is not None:
            raise ValueError("MixedCircuit.unitary: the circuit has channels or noise; it has no unitary")
        return super().unitary()

    @classmethod
    def from_qiskit(cls, qc, **kwargs):
        """A MixedCircuit from a Qiskit dynamic circuit: ``measure``, ``reset`` and ``if_test`` /
        ``IfElseOp`` feed-forward stay mid-circuit (clbits live on measured wires, or extra wires);
        ``return_clbits=True`` also returns each clbit's wire. See
        :func:`torchquantum_layers.qiskit_dynamic.mixed_from_qiskit`."""
        from ..qiskit_dynamic import mixed_from_qiskit
        return mixed_from_qiskit(qc, **kwargs)
