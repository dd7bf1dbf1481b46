"""Mixed-unitary noise folded into one unitary circuit per trajectory, Pauli noise through a frame.

Where every channel of a run is a mixture of unitaries that are products of one-wire ones, each
trajectory's branches are drawn up front and the noisy circuit becomes a unitary circuit whose
extra gates (U3s) read their angles from extra input columns, one row per trajectory.

Pauli noise (depolarizing, bit/phase flips, any Pauli channel) is not inserted where it occurs:
it joins a Pauli frame, a Pauli string per trajectory carried through Clifford gates
(C P C† is again a Pauli string: a GF(2)-linear map of its x/z bits) and applied as U3 gates
only on the wires of a gate that is not Clifford (only the X part before a diagonal gate, which
commutes with Z) and at the end. Every frame bit at such a point is a fixed XOR of drawn bits,
worked out once per circuit: a draw is one matrix product over GF(2), and the CNOT ladders of a
noisy circuit stay whole (one merged permutation instead of one cut after every channel).
States are those of the unfolded trajectories up to a global phase per row.
"""
from __future__ import annotations

import cmath
import math
import weakref
from collections import defaultdict
from typing import Optional

import numpy as np
import torch

from .. import gates as G
from ..circuit import Input, Op

__all__ = ["folded", "constant_probabilities", "draw_uniform", "fold_table", "pauli_table", "symplectic"]

# K_k† K_k = c_k I to this tolerance (relative to c_k): the branch probabilities are c_k whatever ψ
_MIXED_UNITARY_ATOL = 1e-10
_MAX_CLIFFORD_WIRES = 3
# U3 angles of I, X, Z, Y (Pauli code x + 2 z), each up to a global phase
_PAULI_ANGLES = torch.tensor([[0.0, 0.0, 0.0], [math.pi, 0.0, math.pi], [0.0, 0.0, math.pi],
                              [math.pi, math.pi / 2, math.pi / 2]], dtype=torch.float64)
_PAULIS = [np.eye(2), np.array([[0, 1], [1, 0]]), np.diag([1.0, -1.0]), np.array([[0, -1j], [1j, 0]])]


def constant_probabilities(kraus: torch.Tensor) -> Optional[torch.Tensor]:
    """(m,) real c_k where every K_k† K_k = c_k I (a mixed-unitary channel), else None."""
    k = kraus.detach().to(torch.complex128)
    e = k.conj().transpose(-1, -2) @ k
    d = k.shape[-1]
    c = torch.diagonal(e, dim1=-2, dim2=-1).real.mean(-1)
    off = (e - c[:, None, None] * torch.eye(d, dtype=e.dtype)).abs().amax()
    return c if float(off) <= _MIXED_UNITARY_ATOL * max(float(c.max()), 1e-300) else None


def draw_uniform(shape, generator, device, dtype) -> torch.Tensor:
    """Uniforms in (0, 1] of ``shape``, from ``generator`` (on its own device) moved to ``device``."""
    where = generator.device if generator is not None else device
    u = torch.rand(shape, generator=generator, device=where, dtype=dtype)
    return (1 - u).to(device)


def _u3_angles(u: torch.Tensor):
    """(θ, φ, λ) with u = e^{iα} U3(θ, φ, λ) for a 2 x 2 unitary u (complex128), or None."""
    u00, u01, u10, u11 = (complex(v) for v in u.reshape(4).tolist())
    theta = 2 * math.atan2(abs(u10), abs(u00))
    if abs(u00) > 1e-12:
        alpha = cmath.phase(u00)
        phi = cmath.phase(u10) - alpha if abs(u10) > 1e-12 else 0.0
        lam = cmath.phase(-u01) - alpha if abs(u01) > 1e-12 else cmath.phase(u11) - alpha - phi
    else:
        alpha, phi = cmath.phase(u10), 0.0
        lam = cmath.phase(-u01) - alpha
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    rebuilt = cmath.exp(1j * alpha) * torch.tensor(
        [[c, -cmath.exp(1j * lam) * s], [cmath.exp(1j * phi) * s, cmath.exp(1j * (phi + lam)) * c]],
        dtype=torch.complex128)
    return (theta, phi, lam) if float((rebuilt - u).abs().max()) < 1e-9 else None


def _one_wire_factors(u: torch.Tensor):
    """[u] for a 2 x 2 unitary, [a, b] with u ∝ a ⊗ b (both unitary) for a 4 x 4 one, else None."""
    d = u.shape[-1]
    if d == 2:
        return [u]
    if d != 4:
        return None
    # u[(i1 i2), (j1 j2)] = a[i1, j1] b[i2, j2]: the realigned matrix vec(a) vec(b)^T has rank one
    r = u.reshape(2, 2, 2, 2).permute(0, 2, 1, 3).reshape(4, 4)
    left, sv, right = torch.linalg.svd(r)
    if float(sv[1]) > 1e-9 * float(sv[0]):
        return None
    a, b = left[:, 0].reshape(2, 2), right[0].reshape(2, 2)
    a = a / (a.conj().T @ a)[0, 0].real.sqrt()
    b = b / (b.conj().T @ b)[0, 0].real.sqrt()
    return [a, b]


def _unitary_branches(kraus: torch.Tensor):
    """(c, per branch the one-wire unitary factors or None for c_k = 0), or None."""
    if kraus.requires_grad:        # trainable noise needs the branch path's gradient
        return None
    c = constant_probabilities(kraus)
    if c is None:
        return None
    branches = []
    for k, ck in zip(kraus.detach().to(torch.complex128), c.tolist()):
        if ck <= 0:
            branches.append(None)
            continue
        factors = _one_wire_factors(k / math.sqrt(ck))
        if factors is None:
            return None
        branches.append(factors)
    return c, branches


def _branch_rows(found, dim: int, read, identity, dtype):
    """(probabilities, per branch and wire ``read(one-wire factor)``) or None where one reads None."""
    if found is None:
        return None
    c, branches = found
    n_w = int(round(math.log2(dim)))
    rows = [[identity] * n_w if f is None else [read(u) for u in f] for f in branches]
    if any(v is None for row in rows for v in row):
        return None
    return c, torch.tensor(rows, dtype=dtype)


def _u3_rows(found, dim: int):
    return _branch_rows(found, dim, _u3_angles, (0.0, 0.0, 0.0), torch.float64)


def _pauli_rows(found, dim: int):
    return _branch_rows(found, dim, _pauli_code, 0, torch.int64)


def fold_table(kraus: torch.Tensor):
    """(probabilities (m,), U3 angles (m, wires, 3)) of a mixed-unitary channel whose unitaries are
    products of one-wire ones, or None."""
    return _u3_rows(_unitary_branches(kraus), kraus.shape[-1])


def _pauli_code(u: torch.Tensor) -> Optional[int]:
    """x + 2 z where u ∝ X^x Z^z (a one-wire Pauli up to phase), else None."""
    m = u.numpy()
    for code, p in enumerate(_PAULIS):
        if abs(abs(np.trace(p.conj().T @ m)) - 2) < 1e-9:
            return code
    return None


def pauli_table(kraus: torch.Tensor):
    """(probabilities (m,), Pauli codes (m, wires)) of a channel whose branches are Pauli strings
    up to phase, or None."""
    return _pauli_rows(_unitary_branches(kraus), kraus.shape[-1])


def _string(bits: np.ndarray, k: int) -> np.ndarray:
    """⊗_i X^{x_i} Z^{z_i} (wire 0 most significant) for bits = (x_0..x_{k-1}, z_0..z_{k-1})."""
    out = np.eye(1)
    for i in range(k):
        out = np.kron(out, _PAULIS[int(bits[i]) + 2 * int(bits[k + i])])
    return out


_SYMPLECTIC: dict = {}


def symplectic(u: np.ndarray) -> Optional[np.ndarray]:
    """The (2k, 2k) GF(2) matrix S with U P U† ∝ the string of S·bits(P) (columns: images of
    X_0..X_{k-1}, Z_0..Z_{k-1}) when the k-wire unitary ``u`` is a Clifford, else None."""
    d = u.shape[0]
    k = int(round(math.log2(d)))
    candidates = [np.array([(j >> (2 * k - 1 - i)) & 1 for i in range(2 * k)]) for j in range(4 ** k)]
    strings = [_string(b, k) for b in candidates]
    cols = []
    for g in range(2 * k):
        unit = np.zeros(2 * k, dtype=np.int64)
        unit[g] = 1
        image = u @ _string(unit, k) @ u.conj().T
        hit = next((b for b, s in zip(candidates, strings) if abs(abs(np.trace(s.conj().T @ image)) - d) < 1e-8), None)
        if hit is None:
            return None
        cols.append(hit)
    return np.stack(cols, 1)


def _fixed_symplectic(op: Op) -> Optional[np.ndarray]:
    """``symplectic`` of a gate with fixed angles (cached), None for others and non-Cliffords."""
    k = len(op.wires)
    if op.gate.takes_data or k > _MAX_CLIFFORD_WIRES or any(not isinstance(a, (int, float)) for a in op.angles):
        return None
    key = (id(op.gate), tuple(float(a) for a in op.angles), op.adjoint, k)
    hit = _SYMPLECTIC.get(key)
    if hit is None or hit[0] is not op.gate:
        if len(_SYMPLECTIC) >= 4096:      # fixed angles swept in a loop are not all kept
            _SYMPLECTIC.clear()
        u = op.gate.matrix(tuple(float(a) for a in op.angles), k, dtype=torch.complex128).numpy()
        hit = (op.gate, symplectic(u.conj().T if op.adjoint else u))
        _SYMPLECTIC[key] = hit
    return hit[1]


class _Frame:
    """Per wire the x and z bits of the frame, each an int whose set bits are the drawn bits it
    is the XOR of."""

    def __init__(self):
        self.x, self.z = defaultdict(int), defaultdict(int)
        self.n_drawn = 0

    def add(self, wire):
        """A drawn Pauli (two new drawn bits) on ``wire``: their indices."""
        i = self.n_drawn
        self.n_drawn += 2
        self.x[wire] ^= 1 << i
        self.z[wire] ^= 1 << (i + 1)
        return i

    def conjugate(self, s: np.ndarray, wires):
        k = len(wires)
        old = [self.x[w] for w in wires] + [self.z[w] for w in wires]
        new = []
        for row in s:
            v = 0
            for bit, o in zip(row, old):
                if bit:
                    v ^= o
            new.append(v)
        for i, w in enumerate(wires):
            self.x[w], self.z[w] = new[i], new[k + i]

    def take(self, wire, x_only=False):
        """(x, z) applied now on ``wire`` (z = 0 with ``x_only``); the rest stays in the frame."""
        x, z = self.x[wire], 0 if x_only else self.z[wire]
        self.x[wire] = 0
        if not x_only:
            self.z[wire] = 0
        return x, z


class Folded:
    """The circuit with the noise's U3 gates (angles: input columns ``first..``), and the tables
    its branches are drawn from."""

    def __init__(self, circuit, ops, direct, pauli, direct_columns, frame_rows, frame_columns, n_drawn):
        self.first = circuit.n_inputs
        # None: nothing was inserted, the circuit runs as it is (and is not referenced from here)
        self.circuit = circuit._sharing(ops) if len(ops) != len(circuit.ops) else None
        self.n_columns = len(direct_columns) + len(frame_columns)
        cols = torch.tensor(direct_columns + frame_columns, dtype=torch.int64) - self.first
        self.order = torch.argsort(cols)        # the columns in insertion order
        self.direct = _Draws(direct, flatten=True)
        self.pauli = _Draws([(c, self._bits(codes)) for c, codes in pauli], flatten=False)
        self.n_frame = len(frame_columns) // 3
        # (2 · inserts, drawn) over GF(2): row 2j / 2j + 1 is insert j's x / z bit
        width = max((n_drawn + 7) // 8, 1)
        a = [np.unpackbits(np.frombuffer(mask.to_bytes(width, "little"), dtype=np.uint8), bitorder="little")[:n_drawn]
             for pair in frame_rows for mask in pair]
        self.frame_map = torch.from_numpy(np.array(a, dtype=np.float64).reshape(2 * self.n_frame, n_drawn))
        self._on = {}

    @staticmethod
    def _bits(codes):
        """(m, 2 · wires) drawn bits of each branch: x, z of each wire in turn."""
        return torch.stack([codes % 2, codes // 2], -1).reshape(codes.shape[0], -1).to(torch.float64)

    def inputs(self, x, rows, generator, dtype, device):
        """x's columns the circuit reads, then the drawn noise's angles: (rows, first + columns)."""
        parts = [] if x is None else [x[:, :self.first]]
        if self.n_columns:
            angles = []
            if self.direct.n:
                angles.append(self.direct.sample(rows, generator, dtype, device))
            if self.n_frame:
                drawn = self.pauli.sample(rows, generator, dtype, device)     # (rows, drawn)
                a, table = self._tables(dtype, device)
                bits = torch.remainder(drawn @ a.T, 2).reshape(rows, self.n_frame, 2)
                codes = (bits[..., 0] + 2 * bits[..., 1]).round().long()
                angles.append(table[codes].reshape(rows, -1))
            angles = torch.cat(angles, 1) if len(angles) > 1 else angles[0]
            parts.append(angles[:, self._order(device)])
        if not parts:
            return None
        return torch.cat(parts, 1) if len(parts) > 1 else parts[0]

    def _tables(self, dtype, device):
        key = (dtype, str(device))
        if key not in self._on:
            self._on[key] = (self.frame_map.to(device=device, dtype=dtype), _PAULI_ANGLES.to(device=device, dtype=dtype))
        return self._on[key]

    def _order(self, device):
        key = ("order", str(device))
        if key not in self._on:
            self._on[key] = self.order.to(device)
        return self._on[key]


class _Draws:
    """Channels' branch tables: a draw per row and channel, then the drawn branches' rows."""

    def __init__(self, channels, flatten):
        self.n = len(channels)
        m_max = max((len(c) for c, _ in channels), default=1)
        w_max = max((t[0].numel() for _, t in channels), default=1)
        cdf = torch.full((max(self.n, 1), m_max), math.inf, dtype=torch.float64)
        table = torch.zeros(max(self.n, 1), m_max, w_max, dtype=torch.float64)
        src = []
        for j, (c, t) in enumerate(channels):
            cdf[j, :len(c)] = c.cumsum(0) / c.sum()
            t = t.reshape(len(c), -1)
            table[j, :len(c), :t.shape[1]] = t
            src += [j * w_max + q for q in range(t.shape[1])]
        self.cdf, self.table = cdf, table
        self.last = torch.tensor([len(c) - 1 for c, _ in channels] or [0])
        self.src = torch.tensor(src, dtype=torch.int64)
        self._on = {}

    def sample(self, rows, generator, dtype, device):
        key = (dtype, str(device))
        if key not in self._on:
            self._on[key] = tuple(t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
                                  for t in (self.cdf, self.table, self.last, self.src))
        cdf, table, last, src = self._on[key]
        u = draw_uniform((rows, self.n), generator, device, dtype)
        k = torch.minimum((u[:, :, None] > cdf).sum(-1), last)                    # (rows, channels)
        picked = table[torch.arange(self.n, device=device), k]                     # (rows, channels, w_max)
        return picked.reshape(rows, -1)[:, src]


_FOLDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def folded(circuit, noise_model, instructions, noise_key) -> Optional[Folded]:
    """The circuit's noise folded into U3 gates (cached), or None where some channel, measurement or
    reset does not fold. ``instructions``: the circuit's (position, instruction) list."""
    from .circuit import ChannelInstruction
    key = (len(circuit.ops), circuit.n_inputs, circuit.dtype, str(circuit.device), noise_key,
           tuple((p, id(i)) for p, i in instructions))
    hit = _FOLDED.get(circuit)
    if hit is not None and hit[0] == key:
        return hit[1]
    at = defaultdict(list)
    for pos, inst in instructions:
        at[pos].append(inst)
    ops, direct, pauli = [], [], []
    direct_columns, frame_rows, frame_columns = [], [], []
    frame = _Frame()
    column = circuit.n_inputs

    def u3(wire):
        nonlocal column
        ops.append(Op(G.U3, (wire,), tuple(Input(column + q) for q in range(3))))
        column += 3
        return list(range(column - 3, column))

    def flush(wires, x_only=False):
        for w in wires:
            bits = frame.take(w, x_only)
            if bits != (0, 0):
                frame_rows.append(bits)
                frame_columns.extend(u3(w))

    def fold(channel, wires):
        # one SVD pass per branch serves both readings of the channel
        found, dim = _unitary_branches(channel.kraus), channel.kraus.shape[-1]
        t = _pauli_rows(found, dim)
        if t is not None:
            pauli.append(t)
            for w in wires:
                frame.add(w)
            return True
        t = _u3_rows(found, dim)
        if t is None:
            return False
        flush(wires)
        direct.append(t)
        for w in wires:
            direct_columns.extend(u3(w))
        return True

    ok = True
    for i in range(len(circuit.ops) + 1):
        for inst in at.get(i, ()):
            ok = ok and isinstance(inst, ChannelInstruction) and fold(inst.channel, inst.wires)
        if i == len(circuit.ops) or not ok:
            break
        op = circuit.ops[i]
        s = _fixed_symplectic(op)
        if s is not None:
            frame.conjugate(s, op.wires)
        else:
            flush(op.wires, x_only=op.gate.kind == "diagonal")
        ops.append(op)
        for ch, w in (noise_model.channels_for(op) if noise_model is not None else ()):
            ok = ok and fold(ch, w)
    result = None
    if ok:
        flush(range(circuit.n_wires))
        result = Folded(circuit, ops, direct, pauli, direct_columns, frame_rows, frame_columns, frame.n_drawn)
    # the instructions are held with the key: alive, their ids cannot be reused by new ones
    _FOLDED[circuit] = (key, result, tuple(inst for _, inst in instructions))
    return result
