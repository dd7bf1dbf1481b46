"""The gate table: every gate is declared once, here.

A :class:`Gate` is data: wire and parameter counts, a matrix function batched in its parameters,
and what the kernels and the differentiation methods need to treat it well (a diagonal, a
permutation, a generator, the spectrum of each parameter for shift rules). Matrices follow
OpenQASM 3 / Qiskit; the first wire of a gate is the most significant bit of its matrix index.
"""
from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Optional

import numpy as np
import torch

from .kernels.apply import (apply_controlled_unchecked, apply_diagonal_unchecked,
                            apply_matrix_unchecked, apply_permutation_unchecked,
                            apply_two_level_unchecked)
from .caching import building_cache
from .kernels.state import COMPLEX_OF

UNITARY_ATOL = {torch.complex64: 1e-5, torch.complex128: 1e-10}
"""Tolerance of :func:`check_unitary` (max |U U† − I|) per dtype."""


@dataclass(frozen=True)
class Gate:
    name: str
    n_wires: Optional[int]                 # None: any number >= min_wires
    n_params: int
    matrix_fn: Callable                    # (params, n_wires, dtype, data) -> (..., d, d)
    kind: str = "dense"                    # "dense" | "diagonal" | "permutation" | "controlled" | "two-level"
    diag_fn: Optional[Callable] = None     # (params, n_wires, dtype, data) -> (..., d)
    perm_fn: Optional[Callable] = None     # n_wires -> tuple: new[i] = old[perm[i]]
    block_fn: Optional[Callable] = None    # two-level: (params, dtype, device) -> (..., 2, 2) on ``levels``
    levels: tuple = ()                     # two-level: the two local basis states the block mixes
    generator_fn: Optional[Callable] = None  # n_wires -> numpy G with U(θ) = exp(-iθG)
    spectra: tuple = ()                    # per parameter: eigenvalues of its effective generator
    self_inverse: bool = False
    min_wires: int = 1
    param_names: tuple = ()
    takes_data: bool = False               # QubitUnitary / DiagonalUnitary: a matrix, not angles
    n_controls: int = 0
    target: Optional["Gate"] = None
    # (D, per wire a tuple of fixed single-wire gates W_w, applied in order): the gate is
    # W† D W with W = ⊗_w W_w and D a diagonal gate of the same parameters. The CPU engine runs
    # it as D between single-wire gates, which a local program absorbs into its own slots.
    diagonal_form: tuple = ()
    doc: str = ""

    def wires_for(self, n_wires_given: int) -> int:
        if self.n_wires is not None:
            return self.n_wires
        return n_wires_given

    # -- matrices ---------------------------------------------------------------------------
    def matrix(self, params=(), n_wires=None, dtype=torch.complex64, device=None, data=None):
        """Dense matrix, batched over the leading shape of the parameters."""
        k = self.wires_for(n_wires)
        params = _as_params(params, dtype, device)
        return self.matrix_fn(params, k, dtype, data, device)

    def diagonal(self, params=(), n_wires=None, dtype=torch.complex64, device=None, data=None):
        k = self.wires_for(n_wires)
        params = _as_params(params, dtype, device)
        return self.diag_fn(params, k, dtype, data, device)

    def generator(self, n_wires=None) -> Optional[np.ndarray]:
        if self.generator_fn is None:
            return None
        return self.generator_fn(self.wires_for(n_wires))

    def frequencies(self, i: int = 0) -> tuple:
        """Distinct positive gaps of the spectrum of parameter i (drive the shift rules)."""
        spec = sorted(set(round(float(s), 12) for s in self.spectra[i]))
        gaps = sorted(set(round(b - a, 12) for a in spec for b in spec if b - a > 1e-12))
        return tuple(gaps)

    # -- application ------------------------------------------------------------------------
    def apply(self, state, params, wires, n, data=None, adjoint=False, conj=False):
        """Apply to ``wires`` of a (B, 2**n) state; params are real tensors (shape () or (B,)).

        ``conj`` applies the complex conjugate of the operator (U* or U^T with ``adjoint``): the
        density-matrix simulator's right factor.
        """
        dtype, device = state.dtype, state.device
        k = len(wires)

        def prepared(m, square=True):
            if adjoint:
                m = m.conj().transpose(-1, -2) if square else m.conj()
            return m.conj() if conj else m
        if self.kind == "permutation":
            perm = self.perm_fn(k)
            if adjoint:
                perm = tuple(np.argsort(perm).tolist())
            return apply_permutation_unchecked(state, perm, wires, n)
        if self.kind == "diagonal":
            diag = self.diag_fn(params, k, dtype, data, device)
            return apply_diagonal_unchecked(state, prepared(diag, square=False), wires, n)
        if self.kind == "two-level":
            block = prepared(self.block_fn(params, dtype, device))
            return apply_two_level_unchecked(state, block, self.levels, wires, n)
        if self.kind == "controlled":
            c = self.n_controls
            m = prepared(self.target.matrix_fn(params, k - c, dtype, data, device))
            return apply_controlled_unchecked(state, m, tuple(wires[:c]), tuple(wires[c:]), n)
        m = prepared(self.matrix_fn(params, k, dtype, data, device))
        return apply_matrix_unchecked(state, m, wires, n)


def _as_params(params, dtype, device):
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    return tuple(p if isinstance(p, torch.Tensor) and p.dtype == real
                 else torch.as_tensor(p, dtype=real, device=device) for p in params)


# ---------------------------------------------------------------------------------------------
# helpers to write matrices batched in their parameters
def _expi(x: torch.Tensor, dtype) -> torch.Tensor:
    return torch.polar(torch.ones_like(x), x).to(dtype)


def _const(values):
    """A parameter-free matrix or diagonal, converted once per (dtype, device)."""
    arr = np.asarray(values, dtype=np.complex128)
    cache = {}

    def fn(params, k, dtype, data, device):
        key = (dtype, str(device))
        if key not in cache:
            with building_cache():
                cache[key] = torch.as_tensor(arr, dtype=dtype, device=device)
        return cache[key]
    return fn


_const_diag = _const


def _diag_to_matrix(diag_fn):
    def fn(params, k, dtype, data, device):
        d = diag_fn(params, k, dtype, data, device)
        if k == 1:
            zero = torch.zeros_like(d[..., 0])
            return _m2(d[..., 0], zero, zero, d[..., 1])
        return torch.diag_embed(d)
    return fn


def _perm_to_matrix(perm_fn):
    def fn(params, k, dtype, data, device):
        perm = perm_fn(k)
        m = torch.zeros(2 ** k, 2 ** k, dtype=dtype, device=device)
        m[torch.arange(2 ** k), torch.tensor(perm)] = 1
        return m
    return fn


def _pauli(label):
    return {"I": np.eye(2), "X": np.array([[0, 1], [1, 0]]), "Y": np.array([[0, -1j], [1j, 0]]),
            "Z": np.diag([1.0, -1.0])}[label].astype(np.complex128)


def _kron_np(*ms):
    out = np.eye(1, dtype=np.complex128)
    for m in ms:
        out = np.kron(out, m)
    return out


# ---------------------------------------------------------------------------------------------
# matrix functions of the parametrised gates
def _m2(a, b, c, d):
    """(..., 2, 2) from four equally shaped complex tensors."""
    return torch.stack([a, b, c, d], dim=-1).unflatten(-1, (2, 2))


# Entries of the rotation gates, as sin(a·θ + b) for the real and the imaginary part: the
# whole matrix is then one addcmul and one sin on a real vector, viewed as complex (the
# cos / sin / to / stack construction took ~30 µs a gate, more than a 1-qubit kernel at n ≤ 18).
_C, _S, _NS = (0.5, math.pi / 2), (0.5, 0.0), (0.5, math.pi)          # cos θ/2, sin θ/2, -sin θ/2
_0, _1 = (0.0, 0.0), (0.0, math.pi / 2)
_COS, _SIN = (1.0, math.pi / 2), (1.0, 0.0)                             # cos θ, sin θ


def _trig(entries, shape=None):
    """A matrix function for one angle whose entries (real spec, imaginary spec) are sin(aθ + b).

    The coefficient tables have the output's shape (entries, (re, im)), so a shared angle
    broadcasts into them without a view: addcmul, sin, view_as_complex (3 torch calls; the
    unsqueeze / view / view_as_complex / view chain before took ~20 µs a gate)."""
    flat = [v for entry in entries for v in entry]
    out_shape = (shape or (len(entries),)) + (2,)
    cache = {}

    def fn(p, k, dtype, data, device):
        theta = p[0]
        key = (theta.dtype, theta.device)
        if key not in cache:
            with building_cache():
                cache[key] = tuple(torch.tensor(col, dtype=theta.dtype, device=theta.device).view(out_shape)
                                   for col in zip(*flat))
        scale, offset = cache[key]
        if theta.dim():
            theta = theta.reshape(theta.shape + (1,) * len(out_shape))
        z = torch.view_as_complex(torch.addcmul(offset, theta, scale).sin())
        return z if z.dtype == dtype else z.to(dtype)
    return fn


_E_MINUS, _E_PLUS = (_C, _NS), (_C, _S)                                 # e^{-iθ/2}, e^{+iθ/2}
_c, _z, _mis, _pis = (_C, _0), (_0, _0), (_0, _NS), (_0, _S)           # c, 0, -i s, +i s
_rx = _trig([_c, _mis, _mis, _c], (2, 2))
_ry = _trig([_c, (_NS, _0), (_S, _0), _c], (2, 2))
_rz_diag = _trig([_E_MINUS, _E_PLUS])
_phase_diag = _trig([(_1, _0), (_COS, _SIN)])


def _u3_from(theta, phi, lam, dtype, device):
    c, s = torch.cos(theta / 2).to(dtype), torch.sin(theta / 2).to(dtype)
    c, s, el, ep = torch.broadcast_tensors(c, s, _expi(lam, dtype), _expi(phi, dtype))
    return _m2(c, -el * s, ep * s, ep * el * c)


def _u3(p, k, dtype, data, device):
    return _u3_from(p[0], p[1], p[2], dtype, device)


def _u2(p, k, dtype, data, device):
    half_pi = torch.full_like(p[0], math.pi / 2)
    return _u3_from(half_pi, p[0], p[1], dtype, device)


def _rot(p, k, dtype, data, device):
    # Rot(φ, θ, ω) = RZ(ω) RY(θ) RZ(φ)
    phi, theta, omega = p
    c, s = torch.cos(theta / 2).to(dtype), torch.sin(theta / 2).to(dtype)
    ea, eb = _expi((phi + omega) / 2, dtype), _expi((phi - omega) / 2, dtype)
    c, s, ea, eb = torch.broadcast_tensors(c, s, ea, eb)
    return _m2(ea.conj() * c, -eb * s, eb.conj() * s, ea * c)


_rxx = _trig([_c, _z, _z, _mis, _z, _c, _mis, _z, _z, _mis, _c, _z, _mis, _z, _z, _c], (4, 4))
_ryy = _trig([_c, _z, _z, _pis, _z, _c, _mis, _z, _z, _mis, _c, _z, _pis, _z, _z, _c], (4, 4))
# exp(-iθ/2 Z⊗X), Z on the first wire
_rzx = _trig([_c, _mis, _z, _z, _mis, _c, _z, _z, _z, _z, _c, _pis, _z, _z, _pis, _c], (4, 4))
_rzz_diag = _trig([_E_MINUS, _E_PLUS, _E_PLUS, _E_MINUS])


def _multirz_diag(p, k, dtype, data, device):
    parity = torch.tensor([bin(i).count("1") % 2 for i in range(2 ** k)], device=device)
    sign = (1 - 2 * parity).to(p[0].dtype)
    return _expi(-p[0].unsqueeze(-1) * sign / 2, dtype)


_GIVENS_PARTS: dict = {}


def _givens(p, k, dtype, data, device, a, b):
    """Identity except the rotation [[c, -s], [s, c]] on basis states a, b: fixed + c·A + s·Bm."""
    key = (k, a, b, dtype, str(device))
    if key not in _GIVENS_PARTS:
        d = 2 ** k
        fixed = torch.eye(d, dtype=dtype, device=device)
        fixed[a, a] = fixed[b, b] = 0
        cos_part = torch.zeros(d, d, dtype=dtype, device=device)
        cos_part[a, a] = cos_part[b, b] = 1
        sin_part = torch.zeros(d, d, dtype=dtype, device=device)
        sin_part[b, a], sin_part[a, b] = 1, -1
        _GIVENS_PARTS[key] = (fixed, cos_part, sin_part)
    fixed, cos_part, sin_part = _GIVENS_PARTS[key]
    c = torch.cos(p[0] / 2).to(dtype)[..., None, None]
    s = torch.sin(p[0] / 2).to(dtype)[..., None, None]
    return fixed + c * cos_part + s * sin_part


def _givens_block(p, dtype, device):
    c = torch.cos(p[0] / 2).to(dtype)
    s = torch.sin(p[0] / 2).to(dtype)
    return _m2(c, -s, s, c)


def _single_excitation(p, k, dtype, data, device):
    return _givens(p, k, dtype, data, device, 1, 2)


def _double_excitation(p, k, dtype, data, device):
    return _givens(p, k, dtype, data, device, 3, 12)


def _givens_generator(d, a, b):
    g = np.zeros((d, d), dtype=np.complex128)
    g[a, b], g[b, a] = -0.5j, 0.5j
    return g


def _qubit_unitary(p, k, dtype, data, device):
    return data.to(dtype=dtype, device=device)


def _diagonal_unitary(p, k, dtype, data, device):
    return data.to(dtype=dtype, device=device)


def _mcx_perm(k):
    d = 2 ** k
    perm = list(range(d))
    perm[d - 2], perm[d - 1] = d - 1, d - 2
    return tuple(perm)


# ---------------------------------------------------------------------------------------------
# constructors for the table
def _fixed(name, matrix, **kw):
    return Gate(name, n_wires=int(round(math.log2(len(matrix)))), n_params=0, matrix_fn=_const(matrix), **kw)


def _diag_gate(name, n_wires, n_params, diag_fn, **kw):
    return Gate(name, n_wires=n_wires, n_params=n_params, matrix_fn=_diag_to_matrix(diag_fn),
                kind="diagonal", diag_fn=diag_fn, **kw)


def _perm_gate(name, n_wires, perm_fn, **kw):
    return Gate(name, n_wires=n_wires, n_params=0, matrix_fn=_perm_to_matrix(perm_fn),
                kind="permutation", perm_fn=perm_fn, self_inverse=True, **kw)


def _spectrum_of(g: np.ndarray) -> tuple:
    return tuple(np.round(np.linalg.eigvalsh(g), 12).tolist())


def controlled(gate: Gate, n_controls: int = 1, name: Optional[str] = None) -> Gate:
    """The gate acting on its target wires only where all of the first ``n_controls`` wires are 1."""
    if not isinstance(gate, Gate):
        raise TypeError(f"controlled: expected a Gate, got {type(gate).__name__}")
    if not isinstance(n_controls, int) or n_controls < 1:
        raise ValueError(f"controlled({gate.name}): n_controls must be a positive int, got {n_controls!r}")
    if gate.n_wires is None:
        raise ValueError(f"controlled({gate.name}): the target gate must have a fixed number of wires")
    base, c = gate, n_controls
    if gate.n_controls:
        base, c = gate.target, gate.n_controls + n_controls
    kt = base.n_wires
    k = kt + c
    name = name or ("C" * c + base.name)

    def matrix_fn(p, kk, dtype, data, device):
        u = base.matrix_fn(p, kt, dtype, data, device)
        lead = u.shape[:-2]
        d, dt = 2 ** k, 2 ** kt
        # out of place (u padded into the corner, plus the identity above it): a write into a
        # shared identity fails under vmap when u is batched
        top = torch.diag(torch.cat([torch.ones(d - dt, dtype=dtype, device=device),
                                    torch.zeros(dt, dtype=dtype, device=device)]))
        return torch.nn.functional.pad(u, (d - dt, 0, d - dt, 0)) + top.expand(*lead, d, d)

    gen_fn = None
    if base.generator_fn is not None:
        def gen_fn(kk):
            proj = np.zeros((2 ** c, 2 ** c))
            proj[-1, -1] = 1
            return np.kron(proj, base.generator_fn(kt))
    spectra = tuple(tuple(sorted(set(s) | {0.0})) for s in base.spectra)
    common = dict(n_wires=k, n_params=base.n_params, spectra=spectra, self_inverse=base.self_inverse,
                  param_names=base.param_names, n_controls=c, target=base, generator_fn=gen_fn,
                  takes_data=base.takes_data, doc=f"{base.name} controlled by {c} wire(s)")
    if base.kind == "diagonal":
        def diag_fn(p, kk, dtype, data, device):
            dt = base.diag_fn(p, kt, dtype, data, device)
            ones = torch.ones(*dt.shape[:-1], 2 ** k - 2 ** kt, dtype=dtype, device=device)
            return torch.cat([ones, dt], dim=-1)
        return Gate(name, matrix_fn=_diag_to_matrix(diag_fn), kind="diagonal", diag_fn=diag_fn, **common)
    if base.kind == "permutation":
        def perm_fn(kk):
            tp = base.perm_fn(kt)
            off = 2 ** k - 2 ** kt
            return tuple(range(off)) + tuple(off + t for t in tp)
        return Gate(name, matrix_fn=_perm_to_matrix(perm_fn), kind="permutation", perm_fn=perm_fn, **common)
    if base.kind == "two-level":
        off = 2 ** k - 2 ** kt
        return Gate(name, matrix_fn=matrix_fn, kind="two-level", block_fn=base.block_fn,
                    levels=tuple(off + lv for lv in base.levels), **common)
    return Gate(name, matrix_fn=matrix_fn, kind="controlled", **common)


HALF = (-0.5, 0.5)
PHASE_SPEC = (-1.0, 0.0)
GIVENS_SPEC = (-0.5, 0.0, 0.5)   # the Givens generator is zero outside its 2-d subspace
_S2 = 1 / math.sqrt(2)

I = _fixed("I", np.eye(2), self_inverse=True)
X = _perm_gate("X", 1, lambda k: (1, 0))
Y = _fixed("Y", _pauli("Y"), self_inverse=True)
Z = _diag_gate("Z", 1, 0, _const_diag([1, -1]), self_inverse=True)
H = _fixed("H", np.array([[1, 1], [1, -1]]) * _S2, self_inverse=True)
S = _diag_gate("S", 1, 0, _const_diag([1, 1j]))
SDG = _diag_gate("SDG", 1, 0, _const_diag([1, -1j]))
T = _diag_gate("T", 1, 0, _const_diag([1, np.exp(1j * np.pi / 4)]))
TDG = _diag_gate("TDG", 1, 0, _const_diag([1, np.exp(-1j * np.pi / 4)]))
SX = _fixed("SX", np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2)
SXDG = _fixed("SXDG", np.array([[1 - 1j, 1 + 1j], [1 + 1j, 1 - 1j]]) / 2)

RX = Gate("RX", 1, 1, _rx, generator_fn=lambda k: _pauli("X") / 2, spectra=(HALF,), param_names=("theta",))
RY = Gate("RY", 1, 1, _ry, generator_fn=lambda k: _pauli("Y") / 2, spectra=(HALF,), param_names=("theta",))
RZ = _diag_gate("RZ", 1, 1, _rz_diag, generator_fn=lambda k: _pauli("Z") / 2, spectra=(HALF,),
                param_names=("theta",))
P = _diag_gate("P", 1, 1, _phase_diag, generator_fn=lambda k: np.diag([0.0, -1.0]).astype(complex),
               spectra=(PHASE_SPEC,), param_names=("lambda",))
ROT = Gate("ROT", 1, 3, _rot, spectra=(HALF, HALF, HALF), param_names=("phi", "theta", "omega"))
U2 = Gate("U2", 1, 2, _u2, spectra=(PHASE_SPEC, PHASE_SPEC), param_names=("phi", "lambda"))
U3 = Gate("U3", 1, 3, _u3, spectra=(HALF, PHASE_SPEC, PHASE_SPEC), param_names=("theta", "phi", "lambda"))

CNOT = controlled(X, 1, "CNOT")
CY = controlled(Y, 1, "CY")
CZ = controlled(Z, 1, "CZ")
CH = controlled(H, 1, "CH")
SWAP = _perm_gate("SWAP", 2, lambda k: (0, 2, 1, 3))
ISWAP = _fixed("ISWAP", np.array([[1, 0, 0, 0], [0, 0, 1j, 0], [0, 1j, 0, 0], [0, 0, 0, 1]]))
CP = controlled(P, 1, "CP")
CRX = controlled(RX, 1, "CRX")
CRY = controlled(RY, 1, "CRY")
CRZ = controlled(RZ, 1, "CRZ")
CROT = controlled(ROT, 1, "CROT")
CU3 = controlled(U3, 1, "CU3")
RZZ = _diag_gate("RZZ", 2, 1, _rzz_diag, generator_fn=lambda k: _kron_np(_pauli("Z"), _pauli("Z")) / 2,
                 spectra=(HALF,), param_names=("theta",))
# X = H Z H and Y = (S H) Z (S H)†: the Pauli rotations are RZZ in a rotated basis
RXX = Gate("RXX", 2, 1, _rxx, generator_fn=lambda k: _kron_np(_pauli("X"), _pauli("X")) / 2,
           spectra=(HALF,), param_names=("theta",), diagonal_form=(RZZ, (H,), (H,)))
RYY = Gate("RYY", 2, 1, _ryy, generator_fn=lambda k: _kron_np(_pauli("Y"), _pauli("Y")) / 2,
           spectra=(HALF,), param_names=("theta",), diagonal_form=(RZZ, (SDG, H), (SDG, H)))
RZX = Gate("RZX", 2, 1, _rzx, generator_fn=lambda k: _kron_np(_pauli("Z"), _pauli("X")) / 2,
           spectra=(HALF,), param_names=("theta",), diagonal_form=(RZZ, (), (H,)))
SINGLE_EXCITATION = Gate("SINGLEEXCITATION", 2, 1, _single_excitation, kind="two-level",
                         block_fn=_givens_block, levels=(1, 2),
                         generator_fn=lambda k: _givens_generator(4, 1, 2), spectra=(GIVENS_SPEC,),
                         param_names=("theta",), doc="Givens rotation of |01>, |10> (PennyLane convention)")
TOFFOLI = controlled(X, 2, "TOFFOLI")
CCZ = controlled(Z, 2, "CCZ")
CSWAP = controlled(SWAP, 1, "CSWAP")
MULTIRZ = _diag_gate("MULTIRZ", None, 1, _multirz_diag,
                     generator_fn=lambda k: np.diag([(-1.0) ** bin(i).count("1") / 2 for i in range(2 ** k)])
                     .astype(complex), spectra=(HALF,), param_names=("theta",))
MULTICONTROLLEDX = _perm_gate("MULTICONTROLLEDX", None, _mcx_perm, min_wires=2,
                              doc="X on the last wire, controlled by all the others")
QUBIT_UNITARY = Gate("QUBITUNITARY", None, 0, _qubit_unitary, takes_data=True)
DIAGONAL_UNITARY = _diag_gate("DIAGONALUNITARY", None, 0, _diagonal_unitary, takes_data=True)
DOUBLE_EXCITATION = Gate("DOUBLEEXCITATION", 4, 1, _double_excitation, kind="two-level",
                         block_fn=_givens_block, levels=(3, 12),
                         generator_fn=lambda k: _givens_generator(16, 3, 12), spectra=(GIVENS_SPEC,),
                         param_names=("theta",), doc="Givens rotation of |0011>, |1100> (PennyLane convention)")

GATES: dict[str, Gate] = {g.name: g for g in [
    I, X, Y, Z, H, S, SDG, T, TDG, SX, SXDG, P, RX, RY, RZ, ROT, U2, U3,
    CNOT, CY, CZ, CH, SWAP, ISWAP, CP, CRX, CRY, CRZ, CROT, CU3, RXX, RYY, RZZ, RZX,
    SINGLE_EXCITATION, TOFFOLI, CCZ, CSWAP, MULTIRZ, MULTICONTROLLEDX, QUBIT_UNITARY,
    DIAGONAL_UNITARY, DOUBLE_EXCITATION]}

ALIASES = {"CX": "CNOT", "CCX": "TOFFOLI", "PHASE": "P", "U1": "P", "ID": "I", "MCX": "MULTICONTROLLEDX",
           "FREDKIN": "CSWAP", "CPHASE": "CP", "U": "U3"}
# snake-case spellings of the names of several words: builder methods and functional gates
# take both (c.single_excitation, c.singleexcitation); get_gate ignores underscores anyway
WORD_NAMES = {"SINGLEEXCITATION": "single_excitation", "DOUBLEEXCITATION": "double_excitation",
              "MULTIRZ": "multi_rz", "MULTICONTROLLEDX": "multi_controlled_x",
              "QUBITUNITARY": "qubit_unitary", "DIAGONALUNITARY": "diagonal_unitary"}


def builder_names() -> dict:
    """{method name: gate} for every gate: its name and aliases in lower case, and WORD_NAMES."""
    names = {n.lower(): g for n, g in GATES.items()}
    names.update({a.lower(): GATES[t] for a, t in ALIASES.items()})
    names.update({word: GATES[n] for n, word in WORD_NAMES.items()})
    return names


_CONDITION_PREFIX = "IF"


def classically_controlled(gate: Gate, n_conditions: int) -> Gate:
    """``gate`` applied where ``n_conditions`` measured wires (its first wires) read 1: on a
    density matrix whose condition wires were just measured (block diagonal in them) this is the
    controlled gate (deferred measurement); its name, ``IF<k>:<gate>``, keeps the gate's own for
    noise models, which treat it as ``gate`` on its target wires."""
    return controlled(gate, n_conditions, name=f"{_CONDITION_PREFIX}{n_conditions}:{gate.name}")


def condition_of(gate: Gate):
    """``(n_conditions, name of the conditioned gate)`` of a classically controlled gate, else None."""
    head, sep, name = gate.name.partition(":")
    if sep and head.startswith(_CONDITION_PREFIX) and head[len(_CONDITION_PREFIX):].isdigit():
        return int(head[len(_CONDITION_PREFIX):]), name
    return None


def get_gate(name) -> Gate:
    """Look a gate up by name or alias, case-insensitively."""
    if isinstance(name, Gate):
        return name
    key = str(name).upper().replace("_", "")
    key = ALIASES.get(key, key)
    if key not in GATES:
        raise ValueError(f"unknown gate {name!r}; known gates: {', '.join(sorted(GATES))}")
    return GATES[key]


def check_gate_data(gate: "Gate", wires, matrix: torch.Tensor, batched: bool = False) -> None:
    """Raise ValueError unless ``matrix`` fits a data gate on ``wires``: a ``(d, d)`` unitary
    (``QubitUnitary``) or a ``(d,)`` diagonal of unit-modulus entries (``DiagonalUnitary``),
    d = 2**len(wires); ``batched`` also allows one per sample, ``(B, d, d)`` or ``(B, d)``."""
    d = 2 ** len(wires)
    if gate.kind == "diagonal":
        shape, kind = (d,), "diagonal"
    else:
        shape, kind = (d, d), "matrix"
    ok = tuple(matrix.shape) == shape or (batched and matrix.dim() == len(shape) + 1
                                          and tuple(matrix.shape[1:]) == shape)
    if not ok:
        want = str(shape) + (f" or (B, {', '.join(map(str, shape))})" if batched else "")
        raise ValueError(f"{gate.name} on wires {tuple(wires)} needs a {kind} of shape {want}, got "
                         f"{tuple(matrix.shape)}")
    if gate.kind == "diagonal":
        m = matrix if matrix.is_complex() else matrix.to(COMPLEX_OF.get(matrix.dtype, torch.complex128))
        if not torch.allclose(m.abs(), torch.ones_like(m.abs()), atol=UNITARY_ATOL.get(m.dtype, 1e-5)):
            raise ValueError(f"{gate.name}: diagonal entries must have modulus 1")
    else:
        check_unitary(matrix, gate.name)


def check_unitary(matrix: torch.Tensor, what: str = "QubitUnitary") -> None:
    """Raise ValueError when ``matrix`` (…, d, d) is not unitary within :data:`UNITARY_ATOL`."""
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(f"{what}: matrix must be square, got shape {tuple(matrix.shape)}")
    d = matrix.shape[-1]
    if d & (d - 1) or d < 2:
        raise ValueError(f"{what}: matrix size {d} is not a power of two >= 2")
    m = matrix if matrix.is_complex() else matrix.to(COMPLEX_OF.get(matrix.dtype, torch.complex128))
    tol = UNITARY_ATOL.get(m.dtype, 1e-5)
    eye = torch.eye(d, dtype=m.dtype, device=m.device)
    err = (m @ m.conj().transpose(-1, -2) - eye).abs().max()
    if not torch.isfinite(err) or err > tol:
        raise ValueError(f"{what}: matrix is not unitary (max |U U^dagger - I| = {float(err):.3g} > {tol:g})")


@lru_cache(maxsize=None)
def conjugate(gate: Gate) -> Gate:
    """The gate whose matrix is the complex conjugate of ``gate``'s (same kind, wires and angles;
    the generator −G*): what a density matrix's column index sees, U ρ U† being U ⊗ U* on vec ρ."""
    def conj_of(fn):
        return None if fn is None else (lambda *a: torch.conj_physical(fn(*a)))
    spectra = tuple(tuple(sorted(-v for v in spec)) for spec in gate.spectra)
    generator_fn = None if gate.generator_fn is None else (lambda k: -np.conj(gate.generator_fn(k)))
    form = ()
    if gate.diagonal_form:
        diagonal, *per_wire = gate.diagonal_form
        form = (conjugate(diagonal), *(tuple(conjugate(g) for g in fixed) for fixed in per_wire))
    return dataclasses.replace(gate, name=gate.name + "*", matrix_fn=conj_of(gate.matrix_fn),
                               diag_fn=conj_of(gate.diag_fn), block_fn=conj_of(gate.block_fn),
                               generator_fn=generator_fn, spectra=spectra, diagonal_form=form,
                               target=None if gate.target is None else conjugate(gate.target))


def gate_key(gate: Gate):
    """A picklable description of a gate: its table name, or (target name, controls, name)."""
    if GATES.get(gate.name) is gate:
        return gate.name
    if gate.n_controls and GATES.get(gate.target.name) is gate.target:
        return (gate.target.name, gate.n_controls, gate.name)
    raise ValueError(f"gate {gate.name} is neither in the table nor a controlled table gate: cannot pickle it")


def gate_from_key(key) -> Gate:
    if isinstance(key, str):
        return GATES[key]
    target, n_controls, name = key
    return controlled(GATES[target], n_controls, name)
