"""``QuantumLayer``: a circuit plus observables as a drop-in ``nn.Module``."""
from __future__ import annotations

import torch
from torch import nn

from .circuit import Circuit
from .grad import _observable_list, check_diff_method, circuit_expval


class QuantumLayer(nn.Module):
    """``(B, F)`` real features → ``(B, n_obs)`` expectation values, same float dtype as the input.

    ``diff_method`` picks how gradients are computed ("backprop", "adjoint", "parameter-shift");
    nothing else changes. ``shots=N`` returns sampled estimates (seeded by ``seed``).
    """

    def __init__(self, circuit: Circuit, observables, diff_method: str = "backprop", dtype=None,
                 shots: int | None = None, seed: int | None = None):
        super().__init__()
        if not isinstance(circuit, Circuit):
            raise TypeError(f"QuantumLayer: circuit must be a tql.Circuit, got {type(circuit).__name__}")
        self.circuit = circuit
        self.observables, self._single = _observable_list(observables)
        self.diff_method = check_diff_method(diff_method)
        if shots is not None and (not isinstance(shots, int) or shots < 1):
            raise ValueError(f"QuantumLayer: shots must be a positive int or None, got {shots!r}")
        if shots is not None and diff_method == "adjoint":
            raise ValueError("QuantumLayer: shots need diff_method='parameter-shift' or 'backprop', not 'adjoint'")
        self.shots = shots
        self.seed = seed
        self._generator = None
        if dtype is not None:
            if dtype in (torch.complex128, torch.float64):
                self.circuit.double()
            elif dtype in (torch.complex64, torch.float32):
                self.circuit.float()
            else:
                raise TypeError(f"QuantumLayer: dtype must be complex64/complex128, got {dtype}")

    @property
    def n_inputs(self) -> int:
        return self.circuit.n_inputs

    @property
    def n_outputs(self) -> int:
        return len(self.observables)

    def _gen(self, device):
        if self.shots is None:
            return None
        if self._generator is None or self._generator.device != torch.device(device):
            self._generator = torch.Generator(device=device)
            if self.seed is not None:
                self._generator.manual_seed(self.seed)
            else:
                self._generator.seed()
        return self._generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"QuantumLayer: input must be a tensor, got {type(x).__name__}")
        if x.dim() not in (1, 2):
            raise ValueError(f"QuantumLayer: input must have shape (B, F) or (F,), got {tuple(x.shape)}")
        if x.shape[-1] != self.n_inputs:
            raise ValueError(f"QuantumLayer: the circuit reads {self.n_inputs} input feature(s) but x has "
                             f"{x.shape[-1]} (shape {tuple(x.shape)})")
        out_dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
        obs = self.observables[0] if self._single else self.observables
        values = circuit_expval(self.circuit, obs, x=x if self.n_inputs else None,
                                state=None, diff_method=self.diff_method, shots=self.shots,
                                generator=self._gen(x.device))
        if not self.n_inputs and x.dim() == 2:
            values = values.expand(x.shape[0], *values.shape[1:])
        if self._single:
            values = values.unsqueeze(-1)
        return values.to(out_dtype)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_generator"] = None
        return state

    def __deepcopy__(self, memo):
        import copy
        cls = self.__class__
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            setattr(new, k, None if k == "_generator" else copy.deepcopy(v, memo))
        return new

    def extra_repr(self) -> str:
        return (f"n_inputs={self.n_inputs}, n_outputs={self.n_outputs}, diff_method={self.diff_method!r}"
                + (f", shots={self.shots}" if self.shots else ""))
