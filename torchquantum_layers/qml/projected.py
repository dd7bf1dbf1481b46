"""Projected quantum kernels (Huang et al., "Power of data in quantum machine learning",
Nat. Commun. 12, 2631 (2021), eq. (9)):

    k(x, x') = exp(−γ Σ_k ‖ρ_k(x) − ρ_k(x')‖_F²)

with ``ρ_k(x)`` the one-qubit reduced density matrix of wire ``k`` of the encoded state
``|φ(x)⟩``. Only ``n`` 2×2 matrices per sample enter the kernel, so it sees the data through
local observables and does not concentrate like the fidelity kernel on many qubits.

Each sample becomes a short real feature vector ``f(x)`` with ``‖f(x) − f(x')‖² = Σ_k ‖ρ_k(x) −
ρ_k(x')‖_F²``, and the Gram matrix is ``exp(−γ D)`` of the pairwise squared distances in matmul
form ``D = |f1|² + |f2|²ᵀ − 2 f1 f2ᵀ`` (one GEMM, no loop over pairs). Two feature forms:

* ``features="rdm"`` (default): the real and imaginary parts of every entry of the ``n`` RDMs
  (``8n`` reals): the Frobenius distance itself.
* ``features="pauli"``: the Bloch vectors ``r_k = (⟨X_k⟩, ⟨Y_k⟩, ⟨Z_k⟩)`` over ``√2`` (``3n``
  reals). A qubit's state is ``ρ = (I + r·σ)/2``, so ``ρ − σ' = (r − s)·σ/2`` and, as
  ``Tr(σ_a σ_b) = 2δ_ab``, ``‖ρ − σ'‖_F² = ¼ Σ_ab (r−s)_a (r−s)_b Tr(σ_a σ_b) = ½‖r − s‖²``.
  Both forms give the same kernel (tested); this one reads expectation values, as hardware does.

Conventions: states ``(B, 2**n)``, wire 0 the most significant bit; ``γ`` multiplies the summed
squared Frobenius distances (dimensionless; Huang et al. pick it near ``1 / median(D)``).
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import numpy as np
import torch

from ..kernels.state import n_wires_of
from ..measure import reduced_density_matrix
from ..observables import PauliString, expectation
from .kernels import (Encoder, _encoder_parts, as_tensor_features, encode, encoder_width, features_on_device,
                      row_chunk, trainable_parameters)

__all__ = ["one_qubit_rdms", "bloch_vectors", "projected_features", "projected_kernel", "ProjectedKernel",
           "FEATURE_FORMS"]

FEATURE_FORMS = ("rdm", "pauli")


def _states(states, what: str) -> torch.Tensor:
    if not isinstance(states, torch.Tensor):
        raise TypeError(f"{what}: states must be a complex torch.Tensor (B, 2**n), got {type(states).__name__}")
    if states.dim() == 1:
        states = states.unsqueeze(0)
    try:
        n = n_wires_of(states)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{what}: {err}") from None
    if n == 0:
        raise ValueError(f"{what}: states of one amplitude have no qubits (shape {tuple(states.shape)})")
    return states


def one_qubit_rdms(states: torch.Tensor) -> torch.Tensor:
    """The reduced density matrix of every single wire: ``(B, n, 2, 2)``, ``[:, k]`` = ``ρ_k``.

    Each wire's RDMs of the whole batch come from one call of
    :func:`~torchquantum_layers.measure.reduced_density_matrix` (one native pass on the CPU for
    10+ qubits, a batched ``ψψ†`` product elsewhere); the loop runs over the ``n`` wires, never
    over samples. Measured at n = 12, B = 1000, one thread: 46 ms, against 173 ms for all
    ``3n`` Pauli expectations in one :func:`expectation` call and 470 ms for strided views.
    Differentiable with respect to the states.
    """
    states = _states(states, "one_qubit_rdms")
    n = n_wires_of(states)
    return torch.stack([reduced_density_matrix(states, (wire,)) for wire in range(n)], dim=1)


@functools.lru_cache(maxsize=32)
def _bloch_observables(n: int) -> tuple:
    # the same objects on every call: expectation's compiled plans are cached by identity
    return tuple(PauliString(f"{letter}{wire}", n_wires=n) for wire in range(n) for letter in "XYZ")


def bloch_vectors(states: torch.Tensor) -> torch.Tensor:
    """``(B, n, 3)`` real: ``(⟨X_k⟩, ⟨Y_k⟩, ⟨Z_k⟩)`` of every wire ``k``, from one
    :func:`~torchquantum_layers.observables.expectation` call of the ``3n`` one-wire Paulis.
    Differentiable with respect to the states."""
    states = _states(states, "bloch_vectors")
    n = n_wires_of(states)
    return expectation(states, list(_bloch_observables(n))).reshape(states.shape[0], n, 3)


def projected_features(states: torch.Tensor, features: str = "rdm") -> torch.Tensor:
    """Real ``(B, D)`` vectors whose squared Euclidean distances are ``Σ_k ‖ρ_k − σ_k‖_F²``:
    ``D = 8n`` for ``"rdm"`` (Re/Im of every RDM entry), ``3n`` for ``"pauli"`` (Bloch vectors
    over √2; see the module docstring for the identity)."""
    _check_form(features, "projected_features")
    states = _states(states, "projected_features")
    B = states.shape[0]
    if features == "rdm":
        return torch.view_as_real(one_qubit_rdms(states)).reshape(B, -1)
    return bloch_vectors(states).reshape(B, -1) * (1 / math.sqrt(2))


def _check_form(features, what: str) -> None:
    if not isinstance(features, str) or features not in FEATURE_FORMS:
        raise ValueError(f"{what}: features must be one of {FEATURE_FORMS}, got {features!r}")


def _check_gamma(gamma, what: str) -> float:
    ok = isinstance(gamma, (int, float)) and not isinstance(gamma, bool) and math.isfinite(gamma)
    if not ok or gamma <= 0:
        raise ValueError(f"{what}: gamma must be a finite number > 0, got {gamma!r}")
    return float(gamma)


def _encoded_features(encoder, x: torch.Tensor, features: str, rows: int, what: str, name: str) -> torch.Tensor:
    """Features of the samples ``x``, encoded ``rows`` at a time: only one chunk of states is
    alive at once (the features are ``8n`` or ``3n`` reals per sample)."""
    chunks = [projected_features(encode(encoder, x[i:i + rows], what=what, name=name), features)
              for i in range(0, x.shape[0], rows)]
    return chunks[0] if len(chunks) == 1 else torch.cat(chunks, dim=0)


def squared_distances(f1: torch.Tensor, f2: Optional[torch.Tensor]) -> torch.Tensor:
    """``D[i, j] = ‖f1_i − f2_j‖²`` in matmul form, clamped at 0 (round-off of the expansion);
    ``f2=None``: ``D(f1, f1)``, exactly symmetric with an exactly zero diagonal."""
    other = f1 if f2 is None else f2
    sq1 = f1.square().sum(dim=1)
    sq2 = sq1 if f2 is None else other.square().sum(dim=1)
    D = (sq1[:, None] + sq2[None, :] - 2 * (f1 @ other.transpose(0, 1))).clamp_min(0)
    if f2 is None:
        D = 0.5 * (D + D.transpose(0, 1))
        D = D - torch.diag_embed(torch.diagonal(D))
    return D


def projected_kernel(encoder: Encoder, X1, X2=None, *, gamma: float = 1.0, features: str = "rdm",
                     batch_size: Optional[int] = None):
    """Gram matrix ``K[i, j] = exp(−γ Σ_k ‖ρ_k(X1_i) − ρ_k(X2_j)‖_F²)`` of shape ``(N1, N2)``.

    ``encoder``, ``X1``, ``X2`` and ``batch_size`` as in
    :func:`~torchquantum_layers.qml.fidelity_kernel`; ``gamma > 0``; ``features`` is ``"rdm"``
    or ``"pauli"`` (same kernel, see the module docstring). NumPy in, float64 NumPy out; tensor
    in, a tensor in ``X1``'s float dtype on the circuit's device, differentiable with respect to
    the encoder's weights and the inputs. ``X2=None``: exactly symmetric with unit diagonal.
    """
    what = "projected_kernel"
    gamma = _check_gamma(gamma, what)
    _check_form(features, what)
    to_numpy = not isinstance(X1, torch.Tensor)
    f1 = projected_features(encode(encoder, X1, batch_size=batch_size, what=what, name="X1"), features)
    f2 = None
    if X2 is not None:
        f2 = projected_features(encode(encoder, X2, batch_size=batch_size, what=what, name="X2"), features)
        if f2.shape[1] != f1.shape[1]:
            raise ValueError(f"{what}: X1 and X2 were encoded on different numbers of qubits "
                             f"({f1.shape[1] // _width_per_wire(features)} and {f2.shape[1] // _width_per_wire(features)})")
        f2 = f2.to(f1.dtype)
    K = torch.exp(-gamma * squared_distances(f1, f2))
    if to_numpy:
        return K.detach().cpu().to(torch.float64).numpy()
    return K.to(X1.dtype) if X1.is_floating_point() else K


def _width_per_wire(features: str) -> int:
    return 8 if features == "rdm" else 3


class ProjectedKernel:
    """The projected kernel of an encoder, for scikit-learn and for training.

    * ``kernel(X, Y)`` / ``kernel.gram(X1, X2=None)``: float64 NumPy Gram matrix without
      gradients (``SVC(kernel=kernel)`` or ``SVC(kernel="precomputed")``). Samples are encoded
      ``batch_size`` at a time (default: chunks of at most ``CHUNK_ELEMENTS`` amplitudes) and
      reduced to their features at once, so the states of only one chunk are ever alive; the
      Gram matrix is then built in row chunks on the circuit's device (CPU or CUDA, same code)
      in float64 and copied to the host once.
    * ``kernel.matrix(X1, X2=None)``: the differentiable tensor (:func:`projected_kernel`).
    """

    def __init__(self, encoder: Encoder, gamma: float = 1.0, features: str = "rdm",
                 batch_size: Optional[int] = None):
        what = "ProjectedKernel"
        _encoder_parts(encoder, what)
        self.gamma = _check_gamma(gamma, what)
        _check_form(features, what)
        row_chunk(batch_size, 1, what)
        self.encoder, self.features, self.batch_size = encoder, features, batch_size

    def __call__(self, X, Y=None) -> np.ndarray:
        return self.gram(X, Y)

    def parameters(self) -> list:
        """The encoder's trainable tensors (what kernel training updates)."""
        return trainable_parameters(self.encoder)

    def matrix(self, X1, X2=None) -> torch.Tensor:
        """Differentiable ``(N1, N2)`` tensor: :func:`projected_kernel` of tensors."""
        return projected_kernel(self.encoder, as_tensor_features(X1),
                                None if X2 is None else as_tensor_features(X2), gamma=self.gamma,
                                features=self.features, batch_size=self.batch_size)

    def gram(self, X1, X2=None) -> np.ndarray:
        """``(N1, N2)`` float64 NumPy Gram matrix (``X2=None``: ``K(X1, X1)``)."""
        what = "ProjectedKernel.gram"
        with torch.no_grad():
            rows = row_chunk(self.batch_size, encoder_width(self.encoder), what)
            x1 = features_on_device(self.encoder, X1, what, "X1")
            f1 = _encoded_features(self.encoder, x1, self.features, rows, what, "X1").to(torch.float64)
            f2 = None
            if X2 is not None:
                x2 = features_on_device(self.encoder, X2, what, "X2")
                f2 = _encoded_features(self.encoder, x2, self.features, rows, what, "X2").to(torch.float64)
                if f2.shape[1] != f1.shape[1]:
                    raise ValueError(f"{what}: X1 and X2 were encoded on different numbers of qubits")
            if f2 is None:
                K = torch.exp(-self.gamma * squared_distances(f1, None))
            else:
                n1, n2 = f1.shape[0], f2.shape[0]
                K = torch.empty(n1, n2, dtype=torch.float64, device=f1.device)
                block = row_chunk(self.batch_size, n2, what)
                for start in range(0, n1, block):
                    K[start:start + block] = torch.exp(-self.gamma * squared_distances(f1[start:start + block], f2))
            return K.cpu().numpy()

    def __repr__(self) -> str:
        return f"ProjectedKernel({type(self.encoder).__name__}, gamma={self.gamma:g}, features={self.features!r})"
