"""``NoiseModel``: channels inserted after chosen gates when a circuit runs on density matrices."""
from __future__ import annotations

import warnings

from typing import Optional

from .. import gates as G
from .channels import Channel
from .readout import ReadoutError

__all__ = ["NoiseModel"]


class NoiseModel:
    """Rules "after gate G (on wires W), apply channel E".

    ``model.add(channel, gates=None, wires=None)``:

    * ``gates``: a gate name / alias / Gate or a list of them (``None``: every gate);
    * ``wires``: a wire or list of wires (``None``: any); the rule fires for an op touching at
      least one listed wire;
    * a one-wire channel is applied to each wire of the op (only the listed ones when ``wires``
      is given); a k-wire channel (k > 1) needs a k-wire op and acts on its wires in the op's
      order.

    ``model.add_readout_error(p01, p10=None, wires=None)``: bit flips at readout.

    Rules fire in the order they were added. Pass the model to ``mixed.run`` / ``mixed.expval``
    / ``DensityMatrix.evolve`` or set it on a ``MixedCircuit``.
    """

    def __init__(self):
        self.rules: list = []
        self.version = 0
        self.readout: Optional[ReadoutError] = None
        self._warned: set = set()

    def add_readout_error(self, p01, p10=None, wires=None) -> "NoiseModel":
        """Bit flips when expectation values are read (:class:`ReadoutError`; after any added
        before). ``mixed.expval`` and ``trajectories.expval`` then return the values as read out:
        exactly those of ``readout.noisy_observable(H)``."""
        new = ReadoutError(p01, p10, wires)
        self.readout = new if self.readout is None else self.readout.then(new)
        return self

    def add(self, channel: Channel, gates=None, wires=None) -> "NoiseModel":
        if not isinstance(channel, Channel):
            raise TypeError(f"NoiseModel.add: expected a Channel, got {type(channel).__name__}")
        names = None
        if gates is not None:
            if isinstance(gates, (str, G.Gate)):
                gates = [gates]
            names = frozenset(G.get_gate(g).name for g in gates)
            if not names:
                raise ValueError("NoiseModel.add: gates is empty (use None for every gate)")
        ws = None
        if wires is not None:
            if isinstance(wires, int) and not isinstance(wires, bool):
                wires = [wires]
            ws = []
            for w in wires:
                if isinstance(w, bool) or not hasattr(w, "__index__") or int(w) < 0:
                    raise ValueError(f"NoiseModel.add: wire {w!r} is not a non-negative int")
                ws.append(int(w))
            ws = frozenset(ws)
            if not ws:
                raise ValueError("NoiseModel.add: wires is empty (use None for any wire)")
        self.rules.append((channel, names, ws))
        self.version += 1
        return self

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        parts = []
        for ch, names, ws in self.rules:
            g = "any gate" if names is None else "/".join(sorted(names))
            w = "" if ws is None else f" on wires {sorted(ws)}"
            parts.append(f"{ch.name} after {g}{w}")
        if self.readout is not None:
            parts.append(repr(self.readout))
        return "NoiseModel(" + "; ".join(parts) + ")"

    def warn_unused_wires(self, n_wires: int) -> None:
        """Warn (once per model and register size) about rules and readout errors that name only
        wires a circuit of ``n_wires`` lacks: a model written for a larger device is fine, but a
        typo there would otherwise go unnoticed."""
        key = (self.version, self.readout is not None and id(self.readout), n_wires)
        if key in self._warned:
            return
        self._warned.add(key)
        unused = [f"{ch.name} on wires {sorted(ws)}" for ch, _, ws in self.rules
                  if ws is not None and min(ws) >= n_wires]
        if self.readout is not None:
            lost = sorted(w for w in self.readout.per_wire if w >= n_wires)
            if lost:
                unused.append(f"readout errors on wires {lost}")
        if unused:
            warnings.warn(f"NoiseModel: a circuit of {n_wires} wire(s) never meets {'; '.join(unused)}",
                          stacklevel=4)        # the caller of mixed.expval / run / trajectories

    def channels_for(self, op) -> list:
        """``[(channel, wires), ...]`` to apply right after ``op`` (an Op of a circuit)."""
        out = []
        name, wires = op.gate.name, tuple(op.wires)
        condition = G.condition_of(op.gate)
        if condition is not None:           # a classically controlled gate: noise as on the gate itself
            name, wires = condition[1], wires[condition[0]:]
        for ch, names, ws in self.rules:
            if names is not None and name not in names:
                continue
            if ws is not None and not (set(wires) & ws):
                continue
            if ch.n_wires == 1:
                out.extend((ch, (w,)) for w in wires if ws is None or w in ws)
            elif ch.n_wires == len(wires):
                out.append((ch, wires))
            else:
                raise ValueError(f"NoiseModel: the {ch.n_wires}-wire channel {ch.name} cannot follow "
                                 f"{name} on {len(wires)} wire(s) {wires}")
        return out
