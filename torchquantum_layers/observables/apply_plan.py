"""The compiled form of H·ψ: ``(H·ψ)[i] = Σ_x D_x[i⊕x] ψ[i⊕x]``, one pass per X mask."""
from __future__ import annotations

from collections import OrderedDict

import torch

from ..caching import lasting
from ..kernels.state import COMPLEX_DTYPES, REAL_OF
from .pauli import _index_mask, _wires_of_mask
from .hamiltonian import Hamiltonian
from .tables import _groups_of, _segments, _table
from .expval_plan import _GATHER_MAX_TABLE, _GATHER_MAX_WORK, _Group, _grad_mode
from .layouts import _BATCH_MINOR_MIN


class _ApplyPlan:
    """Compiled H·ψ (any coefficients) on n wires: ``out[i] = Σ_x F_x[i] ψ[i⊕x]`` with
    ``F_x[i] = D_x[i⊕x]``.

    No-grad loop path: per group, one ``addcmul_`` per pattern of the X bits on strided views
    (``out[s] += F[s] ψ[s̄]``) when x has at most :data:`_MAX_APPLY_SLICE_BITS` wires, else one
    ``flip`` of the state and one ``addcmul_``; from :data:`_BATCH_MINOR_MIN` states on it works
    on the transposed state (2**n, B) so that no contiguous run is shorter than B.
    """

    def __init__(self, h: Hamiltonian, n: int, dtype, device, cache_bytes: int):
        if dtype not in COMPLEX_DTYPES:
            raise TypeError(f"apply_hamiltonian: dtype must be complex64 or complex128, got {dtype}")
        self.n, self.dtype, self.device = n, dtype, device
        N = 2 ** n
        diag, groups = _groups_of(h)
        self.d0 = None
        if diag:
            d0 = _table(diag, 1, range(n), device)[0]
            self.d0 = d0.real.to(REAL_OF[dtype]) if not bool(d0.imag.any()) else d0.to(dtype)
        self.groups = []
        itemsize = torch.empty((), dtype=dtype).element_size()
        budget = cache_bytes
        for x, entries in groups.items():
            g = _Group()
            g.x, g.xb, g.entries = x, _index_mask(x, n), entries
            shape, kinds = _segments(n, lambda w: "x" if (x >> w) & 1 else "o")
            g.shape = tuple(shape)
            g.flip_dims = [i + 1 for i, k in enumerate(kinds) if k == "x"]
            g.table = None
            if N * itemsize <= budget:
                g.table = self._build(g)
                budget -= N * itemsize
            self.groups.append(g)
        self.cached_bytes = cache_bytes - budget
        self._stack = None
        self._specs = OrderedDict()

    @property
    def n_cached(self) -> int:
        """Number of groups with a cached table."""
        return sum(g.table is not None for g in self.groups)

    def _build(self, g: _Group) -> torch.Tensor:
        """F[i] = D[i⊕x] over all wires (natural order), complex (N,)."""
        return _table(g.entries, 1, range(self.n), self.device, sign_mask=g.x)[0].to(self.dtype).contiguous()

    @lasting
    def table(self, g):
        return g.table if g.table is not None else self._build(g)

    @lasting
    def _stacked(self):
        if self._stack is None:
            N = 2 ** self.n
            idx = torch.arange(N, device=self.device)
            xs = torch.tensor([g.xb for g in self.groups], dtype=torch.int64, device=self.device)
            index = (idx[None, :] ^ xs[:, None]).reshape(-1)
            table = torch.stack([self.table(g) for g in self.groups])          # (G, N)
            self._stack = (index, table)
        return self._stack

    @lasting
    def _spec(self, B: int):
        spec = self._specs.get(B)
        if spec is None:
            minor = B >= _BATCH_MINOR_MIN
            spec = (minor, [_apply_spec(g.x, self.n, B, minor) for g in self.groups])
            self._specs[B] = spec
            while len(self._specs) > 8:
                self._specs.popitem(last=False)
        return spec

    def __call__(self, psi: torch.Tensor, method: str = "auto") -> torch.Tensor:
        if method not in ("auto", "loop", "gather"):
            raise ValueError(f"apply_hamiltonian: method must be 'auto', 'loop' or 'gather', got {method!r}")
        B, N = psi.shape
        grad = _grad_mode(psi)
        G = len(self.groups)
        if not G:
            if self.d0 is not None:
                return psi * self.d0
            # no terms at all (an empty sum): 0·ψ, still a function of ψ where autograd records
            return psi * 0 if grad else torch.zeros_like(psi)
        if method == "gather" or (method == "auto" and G > 1 and G * N <= _GATHER_MAX_TABLE
                                  and B * G * N <= _GATHER_MAX_WORK):
            out = psi * self.d0 if self.d0 is not None else torch.zeros_like(psi)
            index, table = self._stacked()
            P = torch.gather(psi, 1, index.expand(B, -1)).view(B, G, N)
            P = P * table if grad else P.mul_(table)
            return out + P.sum(1)
        if grad:
            out = psi * self.d0 if self.d0 is not None else torch.zeros_like(psi)
            for g in self.groups:
                f = torch.flip(psi.view((B,) + g.shape), g.flip_dims)
                out = out + (f * self.table(g).view(g.shape)).reshape(B, N)
            return out
        minor, specs = self._spec(B)
        v = psi.T.contiguous().view(-1) if minor else psi.reshape(-1)
        if self.d0 is not None:
            out = (v.view(N, B) * self.d0[:, None]).view(-1) if minor else (psi * self.d0).view(-1)
        else:
            out = torch.zeros_like(v)
        for g, sp in zip(self.groups, specs):
            t = self.table(g)
            if sp[0] == "slices":
                _, size, st, st_t, offsets = sp
                for o_off, p_off, t_off in offsets:
                    out.as_strided(size, st, o_off).addcmul_(v.as_strided(size, st, p_off),
                                                             t.as_strided(size, st_t, t_off))
            else:
                _, size, st, st_t, dims = sp
                out.as_strided(size, st, 0).addcmul_(torch.flip(v.as_strided(size, st, 0), dims),
                                                     t.as_strided(size, st_t, 0))
        return out.view(N, B).T.contiguous() if minor else out.view(B, N)


_MAX_APPLY_SLICE_BITS = 4
"""Groups whose x has at most this many wires use 2**bits strided ``addcmul_`` (no flip)."""


def _apply_spec(x: int, n: int, B: int, minor: bool):
    """as_strided arguments (state/out, and the (N,) table broadcast over the batch)."""
    N = 2 ** n
    scale = B if minor else 1
    xpos = list(_wires_of_mask(x))
    runs = []                         # ["x", i, i] / ["f", first, last] over wires
    for w in range(n):
        if w in xpos:
            runs.append(["x", w, w])
        elif runs and runs[-1][0] == "f" and runs[-1][2] == w - 1:
            runs[-1][2] = w
        else:
            runs.append(["f", w, w])

    def st(i, s=scale):
        return s * 2 ** (n - 1 - i)

    def finish(sizes, s, t):
        if minor:
            return tuple(sizes) + (B,), tuple(s) + (1,), tuple(t) + (0,)
        return (B,) + tuple(sizes), (N,) + tuple(s), (0,) + tuple(t)

    if len(xpos) <= _MAX_APPLY_SLICE_BITS:
        sizes, s_, t_ = [], [], []
        for kind, first, last in runs:
            if kind == "f":
                sizes.append(2 ** (last - first + 1))
                s_.append(st(last))
                t_.append(st(last, 1))
        size, stv, stt = finish(sizes, s_, t_)
        k = len(xpos)
        offsets = []
        for pat in range(2 ** k):
            bits = [(pat >> (k - 1 - j)) & 1 for j in range(k)]
            o_off = sum(b * st(w) for b, w in zip(bits, xpos))
            p_off = sum((1 - b) * st(w) for b, w in zip(bits, xpos))
            t_off = sum(b * st(w, 1) for b, w in zip(bits, xpos))
            offsets.append((o_off, p_off, t_off))
        return ("slices", size, stv, stt, offsets)
    sizes, s_, t_, dims = [], [], [], []
    for kind, first, last in runs:
        if kind == "x":
            dims.append(len(sizes) + (0 if minor else 1))
        sizes.append(2 ** (last - first + 1))
        s_.append(st(last))
        t_.append(st(last, 1))
    size, stv, stt = finish(sizes, s_, t_)
    return ("flip", size, stv, stt, dims)
