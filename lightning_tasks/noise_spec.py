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

:func:`check_noise_options` and :func:`check_noise_optimizer` are the checks the tasks that take a
spec share (``VQETask(noise=...)``, ``QAOATask(noise_model=...)``): the spec itself, the mitigation
options and the optimizers that need a pure state.
"""
from __future__ import annotations

import inspect

from torchquantum_layers import mixed
from torchquantum_layers.mixed import NoiseModel

__all__ = ["noise_model_from_spec", "check_noise_options", "check_noise_optimizer", "CHANNELS", "MITIGATIONS"]

CHANNELS = ("bit_flip", "phase_flip", "bit_phase_flip", "depolarizing", "pauli_channel", "amplitude_damping",
            "generalized_amplitude_damping", "phase_damping", "reset_channel", "thermal_relaxation")
MITIGATIONS = ("zne", "readout", "zne+readout")


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


def check_noise_options(noise, mitigation, scale_factors, extrapolation, what: str, arg: str = "noise"):
    """The :class:`NoiseModel` of a task's noise spec ``noise`` (given as the argument named ``arg``),
    or None without one, after checking the mitigation options that come with it:
    ``mitigation`` (None or one of :data:`MITIGATIONS`; ``"readout"`` needs readout errors in the
    spec), ``scale_factors`` (None or at least two distinct numbers >= 1, with ZNE only) and
    ``extrapolation`` (``"richardson"``, ``"linear"`` or ``"exponential"``; not ``"polynomial"``,
    whose order the tasks do not take). Errors name ``what`` (the task) and the argument at fault."""
    from torchquantum_layers.mixed.zne import EXTRAPOLATIONS, _check_scales
    if noise is not None and not isinstance(noise, dict):
        # a NoiseModel object would be pickled into the hyperparameters: the checkpoint would no
        # longer load with torch.load(weights_only=True), nor the config round-trip through YAML
        raise TypeError(f"{what}: {arg} must be a noise spec (a dict of plain values, see "
                        f"lightning_tasks.noise_spec), got {type(noise).__name__}: the task saves its arguments "
                        f"in checkpoints and configs")
    if noise is None:
        if mitigation is not None or scale_factors is not None or extrapolation != "richardson":
            raise ValueError(f"{what}: mitigation and the zne_ options apply only with {arg}=... (a pure state "
                             f"has nothing to mitigate)")
        return None
    model = noise_model_from_spec(noise, f"{what}: {arg}")
    if mitigation not in (None,) + MITIGATIONS:
        raise ValueError(f"{what}: mitigation must be None, 'zne', 'readout' or 'zne+readout', got {mitigation!r}")
    if mitigation and "readout" in mitigation and model.readout is None:
        raise ValueError(f"{what}: mitigation={mitigation!r} needs readout errors in the noise spec")
    if (scale_factors is not None or extrapolation != "richardson") and not (mitigation and "zne" in mitigation):
        raise ValueError(f"{what}: zne_scale_factors / zne_extrapolation apply only with mitigation='zne'")
    if scale_factors is not None:
        _check_scales(scale_factors, f"{what}: zne_scale_factors")
    # not "polynomial": it needs an order, which the tasks do not take
    if extrapolation not in tuple(e for e in EXTRAPOLATIONS if e != "polynomial"):
        raise ValueError(f"{what}: zne_extrapolation must be 'richardson', 'linear' or 'exponential', got "
                         f"{extrapolation!r}")
    return model


def check_noise_optimizer(optimizer: str, what: str, arg: str = "noise") -> None:
    """Refuse ``optimizer='qng'`` with a noise spec: QNG's metric is that of a pure state."""
    if isinstance(optimizer, str) and optimizer.lower() == "qng":
        raise ValueError(f"{what}: optimizer='qng' with {arg}=...: QNG solves with the Fubini–Study metric of the "
                         f"pure state, not the metric of the noisy density matrix being optimised; use "
                         f"optimizer='adam', 'sgd', 'lbfgs' or 'spsa' with noise, or qng without it")
