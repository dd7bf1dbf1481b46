"""Quantum kernels: ``K[i, j] = |⟨φ(x1_i)|φ(x2_j)⟩|²`` for an encoding circuit ``φ``.

The encoder runs once on each set of samples (one batched simulation each), and the whole Gram
matrix is one complex matrix product of the two batches of states: no Python loop over pairs.
Use it with scikit-learn's ``SVC(kernel="precomputed")``::

    enc = tql.templates.iqp_encoding(tql.Circuit(4))          # reads iqp_features(x) columns
    K_train = tql.qml.fidelity_kernel(enc, iqp_features(X_train))
    svc = SVC(kernel="precomputed").fit(K_train, y_train)
    svc.predict(tql.qml.fidelity_kernel(enc, iqp_features(X_test), iqp_features(X_train)))

or hand ``SVC(kernel=tql.qml.FidelityKernel(layer))`` the callable form (``kernel.gram(X1, X2)``
builds the NumPy matrix in memory-bounded row chunks; ``kernel.matrix`` is the differentiable
tensor that kernel training uses), or pass a
:class:`~torchquantum_layers.QuantumLayer` built with ``from_template(n, 0, encoding="iqp",
ansatz="none")``, whose input map computes the products itself.
"""
from __future__ import annotations

from typing import Callable, Optional, Union

import numpy as np
import torch

from ..circuit import Circuit
from ..kernels.state import REAL_OF

__all__ = ["encode", "fidelity_kernel", "FidelityKernel", "CHUNK_ELEMENTS"]

Encoder = Union[Circuit, "torch.nn.Module", Callable]


def _as_features(X, what: str, name: str, dtype, device) -> torch.Tensor:
    if isinstance(X, torch.Tensor):
        t = X
    else:
        try:
            t = torch.as_tensor(np.asarray(X))
        except (TypeError, ValueError) as err:
            raise TypeError(f"{what}: {name} must be a tensor or an array of numbers, got "
                            f"{type(X).__name__} ({err})") from None
    if t.is_complex() or t.dtype == torch.bool or not (t.is_floating_point() or t.dtype in (
            torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
        raise TypeError(f"{what}: {name} must hold real numbers, got {t.dtype}")
    if t.dim() == 1:
        t = t.unsqueeze(0)
    if t.dim() != 2:
        raise ValueError(f"{what}: {name} must have shape (N, F) or (F,), got {tuple(t.shape)}")
    if t.shape[0] == 0:
        raise ValueError(f"{what}: {name} has no samples (shape {tuple(t.shape)})")
    if dtype is not None:
        t = t.to(dtype)
    elif not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    if device is not None:
        t = t.to(device)
    if t.device.type == "cpu" and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{what}: {name} contains NaN or inf")
    return t


def _encoder_parts(encoder, what):
    """(circuit or None, input map or None, callable or None) of an encoder."""
    from ..layers import QuantumLayer
    if isinstance(encoder, QuantumLayer):
        return encoder.circuit, encoder.input_map, None
    if isinstance(encoder, Circuit):
        return encoder, None, None
    if callable(encoder):
        return None, None, encoder
    raise TypeError(f"{what}: encoder must be a tql.Circuit, a tql.QuantumLayer or a callable X -> states, "
                    f"got {type(encoder).__name__}")


def encode(encoder: Encoder, X, *, batch_size: Optional[int] = None, what: str = "encode",
           name: str = "X") -> torch.Tensor:
    """The encoded states ``(N, 2**n)`` of the samples ``X`` ``(N, F)``.

    ``encoder`` is a :class:`Circuit` whose input columns read the features (``F`` must equal
    ``circuit.n_inputs``), a :class:`QuantumLayer` (its input map, then its circuit; its
    observables are ignored) or any callable mapping a ``(N, F)`` tensor to ``(N, 2**n)`` states,
    which must be normalised (squared norm 1 within 1e-4 in complex64, 1e-9 in complex128): an
    unnormalised state is refused with a ``ValueError`` naming the sample and its norm.
    ``X`` may be a tensor or a NumPy array; it is moved to the circuit's device and real dtype.
    ``batch_size`` runs the encoder on chunks of samples (same result, less peak memory).
    """
    circuit, input_map, fn = _encoder_parts(encoder, what)
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise ValueError(f"{what}: batch_size must be a positive int or None, got {batch_size!r}")
    if circuit is not None:
        x = _as_features(X, what, name, REAL_OF[circuit.dtype], circuit.device)
        need = encoder.n_inputs if input_map is not None else circuit.n_inputs
        if need == 0 or circuit.n_inputs == 0:
            raise ValueError(f"{what}: the encoder reads no input features, so every sample gives the "
                             f"same state")
        if need is not None and x.shape[1] != need:     # None: an input map of unknown input width
            raise ValueError(f"{what}: the encoder reads {need} feature(s) but {name} has {x.shape[1]} "
                             f"(shape {tuple(x.shape)})")

        def run(chunk):
            if input_map is not None:
                chunk = input_map(chunk)
                if not isinstance(chunk, torch.Tensor) or chunk.dim() != 2 or chunk.shape[1] != circuit.n_inputs:
                    got = tuple(chunk.shape) if isinstance(chunk, torch.Tensor) else type(chunk).__name__
                    width = f"{chunk.shape[-1]} column(s), " if isinstance(chunk, torch.Tensor) and chunk.dim() else ""
                    raise ValueError(f"{what}: the encoder's input_map must return (N, F) features with "
                                     f"F = {circuit.n_inputs}, the circuit's input columns, got {width}shape {got}")
            return circuit(chunk)
    else:
        x = _as_features(X, what, name, None, None)

        def run(chunk):
            out = fn(chunk)
            if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != chunk.shape[0]:
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise ValueError(f"{what}: the encoder callable must return states of shape "
                                 f"({chunk.shape[0]}, 2**n), got {got}")
            d = out.shape[1]
            if d < 1 or d & (d - 1):
                raise ValueError(f"{what}: the encoder callable must return states of 2**n amplitudes, got "
                                 f"{d} per sample")
            if not out.is_complex():
                out = out.to(torch.complex128 if out.dtype == torch.float64 else torch.complex64)
            _check_normalised(out, what)
            return out
    if batch_size is None or batch_size >= x.shape[0]:
        return run(x)
    return torch.cat([run(x[i:i + batch_size]) for i in range(0, x.shape[0], batch_size)], dim=0)


def _check_normalised(states: torch.Tensor, what: str) -> None:
    """Refuse states whose norm is not 1 (within the dtype's round-off): |⟨a|b⟩|² of unnormalised
    vectors is no fidelity (it can exceed 1, and K[i, i] != 1)."""
    with torch.no_grad():
        sq = states.real.square() + states.imag.square()
        norms = sq.sum(dim=1).to(torch.float64)
        tol = 1e-4 if states.dtype == torch.complex64 else 1e-9
        dev = (norms - 1).abs()
        if not bool(torch.isfinite(norms).all()) or bool((dev > tol).any()):
            i = int(torch.nan_to_num(dev, nan=float("inf")).argmax())
            raise ValueError(f"{what}: the encoder callable returned an unnormalised state: sample {i} has "
                             f"squared norm {float(norms[i]):.6g}, not 1 (normalise the states, e.g. "
                             f"templates.amplitude_encoding(..., normalize=True))")


def fidelity_kernel(encoder: Encoder, X1, X2=None, *, batch_size: Optional[int] = None):
    """Gram matrix ``K[i, j] = |⟨φ(X1_i)|φ(X2_j)⟩|²`` of shape ``(N1, N2)``.

    ``X2=None`` gives the training kernel ``K(X1, X1)`` (states computed once, symmetrised
    exactly); for a test kernel pass ``fidelity_kernel(enc, X_test, X_train)``, which is the
    shape ``SVC(kernel="precomputed").predict`` expects. See :func:`encode` for ``encoder`` and
    ``batch_size``.

    Returns a NumPy float64 array when ``X1`` is a NumPy array (or list), else a tensor in
    ``X1``'s float dtype (the simulation runs in the circuit's dtype) on the circuit's device,
    differentiable with respect to the encoder's weights and the inputs (kernel training).
    """
    what = "fidelity_kernel"
    to_numpy = not isinstance(X1, torch.Tensor)
    psi1 = encode(encoder, X1, batch_size=batch_size, what=what, name="X1")
    if X2 is None:
        psi2 = psi1
    else:
        psi2 = encode(encoder, X2, batch_size=batch_size, what=what, name="X2")
        if psi2.shape[1] != psi1.shape[1]:
            raise ValueError(f"{what}: X1 and X2 were encoded into states of different sizes "
                             f"{psi1.shape[1]} and {psi2.shape[1]}")
        if psi2.dtype != psi1.dtype:
            psi2 = psi2.to(psi1.dtype)
    overlap = psi1.conj() @ psi2.transpose(0, 1)                  # (N1, N2): ⟨φ(x1_i)|φ(x2_j)⟩
    K = overlap.real.square() + overlap.imag.square()
    if X2 is None:
        K = 0.5 * (K + K.transpose(0, 1))
    if to_numpy:
        return K.detach().cpu().to(torch.float64).numpy()
    out_dtype = X1.dtype if X1.is_floating_point() else K.dtype
    return K.to(out_dtype)


# A row chunk of a Gram matrix holds at most this many values per intermediate (states of the
# chunk, its block of overlaps): 2**23 complex64 values are 64 MiB, whatever N and n are.
CHUNK_ELEMENTS = 2 ** 23


def row_chunk(batch_size: Optional[int], width: int, what: str) -> int:
    """Rows per chunk: ``batch_size`` if given, else as many as keep ``rows * width`` within
    :data:`CHUNK_ELEMENTS` (``width`` the widest per-row intermediate)."""
    if batch_size is not None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"{what}: batch_size must be a positive int or None, got {batch_size!r}")
        return batch_size
    return max(1, CHUNK_ELEMENTS // max(1, width))


def features_on_device(encoder: Encoder, X, what: str, name: str) -> torch.Tensor:
    """``X`` as a ``(N, F)`` tensor in the encoder circuit's real dtype and on its device (a
    callable encoder: as given), so that row slices of it can be encoded chunk by chunk."""
    circuit, _, _ = _encoder_parts(encoder, what)
    if circuit is None:
        return _as_features(X, what, name, None, None)
    return _as_features(X, what, name, REAL_OF[circuit.dtype], circuit.device)


def encoder_width(encoder: Encoder) -> int:
    """``2**n`` of a circuit encoder, or 1 where it is unknown before running (a callable)."""
    circuit, _, _ = _encoder_parts(encoder, "encoder_width")
    return 1 if circuit is None else 2 ** circuit.n_wires


def trainable_parameters(encoder: Encoder) -> list:
    """The encoder's tensors that require a gradient (a Circuit's or QuantumLayer's weights)."""
    if isinstance(encoder, torch.nn.Module):
        return [p for p in encoder.parameters() if p.requires_grad and p.numel() > 0]
    return []


def as_tensor_features(X) -> torch.Tensor:
    """Arrays and lists as tensors (dtype conversion is left to :func:`encode`)."""
    return X if isinstance(X, torch.Tensor) else torch.as_tensor(np.asarray(X))


class FidelityKernel:
    """The fidelity kernel ``|⟨φ(x)|φ(x')⟩|²`` of an encoder, for scikit-learn and for training.

    * ``kernel(X, Y)`` / ``kernel.gram(X1, X2=None)``: float64 NumPy Gram matrix without
      gradients, so ``SVC(kernel=kernel)`` and ``SVC(kernel="precomputed").fit(kernel.gram(X), y)``
      both work. Rows of ``X1`` are encoded and multiplied in chunks of ``batch_size`` (default:
      chunks of at most :data:`CHUNK_ELEMENTS` values per intermediate), so the peak memory is
      the ``N2`` states of ``X2`` plus one chunk, besides the ``(N1, N2)`` result. The result is
      assembled on the circuit's device (CPU or CUDA, same code) and copied to the host once.
    * ``kernel.matrix(X1, X2=None)``: the same matrix as a differentiable tensor
      (:func:`fidelity_kernel`), what :func:`~torchquantum_layers.qml.train_kernel` optimises.
    """

    def __init__(self, encoder: Encoder, batch_size: Optional[int] = None):
        _encoder_parts(encoder, "FidelityKernel")
        row_chunk(batch_size, 1, "FidelityKernel")
        self.encoder = encoder
        self.batch_size = batch_size

    def __call__(self, X, Y=None) -> np.ndarray:
        return self.gram(X, Y)

    def parameters(self) -> list:
        """The encoder's trainable tensors (what kernel training updates)."""
        return trainable_parameters(self.encoder)

    def matrix(self, X1, X2=None) -> torch.Tensor:
        """Differentiable ``(N1, N2)`` tensor: :func:`fidelity_kernel` of tensors."""
        return fidelity_kernel(self.encoder, as_tensor_features(X1), None if X2 is None else as_tensor_features(X2),
                               batch_size=self.batch_size)

    def gram(self, X1, X2=None) -> np.ndarray:
        """``(N1, N2)`` float64 NumPy Gram matrix (``X2=None``: ``K(X1, X1)``, exactly symmetric)."""
        what = "FidelityKernel.gram"
        with torch.no_grad():
            x1 = features_on_device(self.encoder, X1, what, "X1")
            symmetric = X2 is None
            n1 = x1.shape[0]
            n2 = n1 if symmetric else None
            if not symmetric:
                x2 = features_on_device(self.encoder, X2, what, "X2")
                n2 = x2.shape[0]
            rows = row_chunk(self.batch_size, max(encoder_width(self.encoder), n2), what)
            psi1_all = encode(self.encoder, x1, batch_size=rows, what=what, name="X1") if symmetric else None
            psi2 = psi1_all if symmetric else encode(self.encoder, x2, batch_size=rows, what=what, name="X2")
            out = torch.empty(n1, n2, dtype=torch.float64, device=psi2.device)
            for start in range(0, n1, rows):
                stop = min(start + rows, n1)
                psi1 = psi1_all[start:stop] if symmetric else encode(self.encoder, x1[start:stop], what=what,
                                                                     name="X1")
                if psi1.shape[1] != psi2.shape[1]:
                    raise ValueError(f"{what}: X1 and X2 were encoded into states of different sizes "
                                     f"{psi1.shape[1]} and {psi2.shape[1]}")
                overlap = psi1.conj() @ psi2.to(psi1.dtype).transpose(0, 1)
                out[start:stop] = overlap.real.square() + overlap.imag.square()
            if symmetric:
                out = 0.5 * (out + out.transpose(0, 1))
            return out.cpu().numpy()

    def __repr__(self) -> str:
        return f"FidelityKernel({type(self.encoder).__name__})"
