"""Noise models written as plain data, for configs and the command line.

A spec is a dict (YAML / JSON in a config)::

    noise:
      channels:                       # rules, in order: after matching gates, apply the channel
        - {channel: depolarizing, p: 0.01, gates: [CNOT]}
        - {channel: amplitude_damping, gamma: 0.002}          # after every gate, on each wire
        - {channel: thermal_relaxation, t1: 50, t2: 30, time: 0.1, wires: [0, 1]}
      readout: {p01: 0.02, p10: 0.05}  # optional; "wires" too

``channel`` names a channel factory of :mod:`torchquantum_layers.mixed` (its other keys are that
factory's arguments); ``gates`` / ``wires`` are :meth:`NoiseModel.add`'s filters.
"""
from __future__ import annotations

import inspect

from torchquantum_layers import mixed
from torchquantum_layers.mixed import NoiseModel

__all__ = ["noise_model_from_spec", "CHANNELS"]

CHANNELS = ("bit_flip", "phase_flip", "bit_phase_flip", "depolarizing", "pauli_channel", "amplitude_damping",
            "generalized_amplitude_damping", "phase_damping", "reset_channel", "thermal_relaxation")


def _rule(k: int, rule, what: str):
    if not isinstance(rule, dict):
        raise TypeError(f"{what}: channels[{k}] must be a mapping with a 'channel' key, got {rule!r}")
    args = dict(rule)
    name = args.pop("channel", None)
    if name not in CHANNELS:
        raise ValueError(f"{what}: channels[{k}]: unknown channel {name!r}; choose one of {', '.join(CHANNELS)}")
    gates, wires = args.pop("gates", None), args.pop("wires", None)
    factory = getattr(mixed, name)
    try:
        inspect.signature(factory).bind(**args)
    except TypeError as err:
        params = ", ".join(inspect.signature(factory).parameters)
        raise TypeError(f"{what}: channels[{k}]: {name} takes ({params}), got {sorted(args)}: {err}") from None
    return factory(**args), gates, wires


def noise_model_from_spec(spec, what: str = "noise") -> NoiseModel:
    """The :class:`~tql.NoiseModel` of a spec (module notes); a NoiseModel passes through."""
    if isinstance(spec, NoiseModel):
        return spec
    if not isinstance(spec, dict):
        raise TypeError(f"{what}: expected a mapping with 'channels' and/or 'readout', got {type(spec).__name__}")
    unknown = sorted(set(spec) - {"channels", "readout"})
    if unknown:
        raise ValueError(f"{what}: unknown key(s) {unknown}; a noise spec has 'channels' and 'readout'")
    channels = spec.get("channels") or []
    if not isinstance(channels, (list, tuple)):
        raise TypeError(f"{what}: 'channels' must be a list of rules, got {channels!r}")
    model = NoiseModel()
    for k, rule in enumerate(channels):
        channel, gates, wires = _rule(k, rule, what)
        model.add(channel, gates=gates, wires=wires)
    readout = spec.get("readout")
    if readout is not None:
        if not isinstance(readout, dict) or "p01" not in readout or set(readout) - {"p01", "p10", "wires"}:
            raise ValueError(f"{what}: 'readout' must be {{p01: ..., p10: ... (optional), wires: ... (optional)}}, "
                             f"got {readout!r}")
        model.add_readout_error(readout["p01"], readout.get("p10"), readout.get("wires"))
    if not model.rules and model.readout is None:
        raise ValueError(f"{what}: the spec has no channels and no readout errors")
    return model
