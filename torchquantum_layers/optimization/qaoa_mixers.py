"""Mixer construction and validation for :class:`~.qaoa.QAOA`, and the start state each mixer needs.

:data:`MIXERS`, :data:`MIXER_KERNELS` and :data:`DEFAULT_BLOCK_WIRES`; :func:`_check_mixer_options`
validates ``symmetry`` / ``block_wires`` / ``mixer_kernel`` against the mixer; the mixin
:class:`_MixerSetup` builds the gate steps of one mixer layer (wire blocks of ⊗RX or of the
warm-start rotations, XY ring pairs of the one-hot groups, TSP tour exchanges), their matrices and
generators, and the initial state (``|+⟩^n``, the warm-start product state, the uniform feasible
superposition, a bitstring / basis index or a given state tensor).

The wire-block mixers (:data:`WIRE_MIXERS`) are products of one rotation per wire, applied as GEMMs
over blocks of ``block_wires`` wires: ``"x"`` (the same RX(2β) on every wire) and ``"warm"``
(``exp(-iβ (sin θ_i X + cos θ_i Z))`` on wire i, :mod:`.warm_start`). Their block matrices are
symmetric, which the in-place sweeps use (the inverse of a block is its conjugate).
"""
from __future__ import annotations

import math
import numbers

import torch

from .qaoa_ops import _generator, _generator_real, _kron_power, _rx2, _swap_matrix, _xy_matrix
from ..caching import building_cache
from ..kernels.apply import kron
from .warm_start import _block_generator, _block_rotation, _product_state, _rotations


def ring_pairs(group) -> list:
    """The XY mixer's wire pairs on one one-hot group: consecutive wires, then (last, first) for
    groups of 3 or more (none for a group of one)."""
    k = len(group)
    pairs = [(group[i], group[i + 1]) for i in range(k - 1)]
    if k > 2:
        pairs.append((group[k - 1], group[0]))
    return pairs


def tour_exchange_terms(first: int, m: int) -> list:
    """The TSP swap mixer's terms for the tour layout ``(first, m)`` (wire of city c at position t:
    ``(c - first)·m + (t - first)``): wires ``(u@t, u@t', v@t, v@t')`` per position pair (t, t')
    — consecutive, and the closing one for a free start — and city pair u < v."""
    def q(c, t):
        return (c - first) * m + (t - first)
    n_c = first + m
    positions = list(range(first, n_c))
    tpairs = [(positions[i], positions[i + 1]) for i in range(len(positions) - 1)]
    if len(positions) > 2 and first == 0:
        tpairs.append((positions[-1], positions[0]))
    return [(q(u, t1), q(u, t2), q(v, t1), q(v, t2))
            for t1, t2 in tpairs for u in range(first, n_c) for v in range(u + 1, n_c)]

__all__ = ["MIXERS", "MIXER_KERNELS", "DEFAULT_BLOCK_WIRES", "WIRE_MIXERS"]

MIXERS = ("x", "xy", "swap", "warm")
# mixers made of one rotation per wire, applied over blocks of wires
WIRE_MIXERS = ("x", "warm")

# The ⊗RX mixer is applied as batched GEMMs over blocks of at most this many wires (measured on
# the 2-core CPU, benchmarks/qaoa.py: 4-5 wires balance GEMM efficiency against 2^k flops).
DEFAULT_BLOCK_WIRES = 4
# How the adjoint path applies the X mixer: "real" (default) conjugates every simulated wire by
# S = diag(1, i), which turns RX into the real rotation RY and leaves the diagonal cost alone, so
# the mixer is a few REAL GEMMs on the (re, im) planes (half the flops of complex ones, and sgemm
# runs nearer the memory bound on these skinny shapes); "complex" is the former route (complex
# GEMMs), kept for comparison and as a reference.
MIXER_KERNELS = ("real", "complex")


def _check_mixer_options(what: str, mixer: str, block_wires, symmetry, mixer_kernel):
    """Validate the X-mixer options against ``mixer``; -> (symmetry, block_wires, mixer_kernel) with
    defaults filled (``mixer_kernel=None``: "real", or "complex" for the warm-start mixer)."""
    if symmetry is not None and not isinstance(symmetry, bool):
        raise TypeError(f"{what}: symmetry must be a bool (or None), got {symmetry!r}")
    if mixer not in WIRE_MIXERS and block_wires is not None:
        # it only shapes the wire-block mixers: refuse it rather than drop it silently
        raise ValueError(f"{what}: block_wires={block_wires!r} sets the GEMM blocks of the X mixer; "
                         f"mixer={mixer!r} does not use it (only {' and '.join(map(repr, WIRE_MIXERS))} do; "
                         f"leave it None)")
    if mixer != "x" and symmetry:
        why = (": the warm-start state and mixer are not invariant under flipping all bits" if mixer == "warm"
               else "")
        raise ValueError(f"{what}: symmetry=True (the half-register bit-flip route of the adjoint path) "
                         f"exists for the X mixer only, not for mixer={mixer!r}{why}; leave it None or False")
    if symmetry is None:
        symmetry = True
    if block_wires is None:
        block_wires = DEFAULT_BLOCK_WIRES
    if isinstance(block_wires, bool) or not isinstance(block_wires, numbers.Integral) or block_wires < 1:
        raise ValueError(f"{what}: block_wires must be a positive int, got {block_wires!r}")
    if mixer_kernel is None:
        mixer_kernel = "complex" if mixer == "warm" else "real"
    if mixer_kernel not in MIXER_KERNELS:
        raise ValueError(f"{what}: mixer_kernel must be one of {MIXER_KERNELS}, got {mixer_kernel!r}")
    if mixer == "warm" and mixer_kernel == "real":
        raise ValueError(f"{what}: mixer_kernel='real' (the frame in which RX is a real rotation) exists for the "
                         f"X mixer only; the warm-start rotations stay complex there: use mixer_kernel='complex' "
                         f"(the default for mixer='warm')")
    return symmetry, int(block_wires), mixer_kernel


class _MixerSetup:
    """Mixer steps, their matrices and the initial state of :class:`~.qaoa.QAOA` (a mixin)."""

    def _mixer_steps(self):
        """List of (kind, wires) gate steps of one mixer layer (for "x": the wire blocks)."""
        n, what = self.n_qubits, "qaoa"
        if self.mixer in WIRE_MIXERS:
            m = math.ceil(n / self.block_wires)
            sizes = [n // m + (1 if i < n % m else 0) for i in range(m)]
            out, w = [], 0
            for k in sizes:
                out.append((self.mixer, tuple(range(w, w + k))))
                w += k
            return out
        groups = self.problems[0].mixer_groups
        for i, pr in enumerate(self.problems):
            if pr.mixer_groups != groups:
                raise ValueError(f"{what}: mixer={self.mixer!r} needs the same one-hot groups in every problem "
                                 f"of the batch; problem {i} differs from problem 0")
        if self.mixer == "xy":
            if not groups:
                raise ValueError(f"{what}: mixer='xy' needs a problem with one-hot groups (graph_colouring, tsp, "
                                 f"portfolio); {self.problems[0].name} has none, use mixer='x'")
            out = []
            for grp in groups:
                out += [("xy", pr) for pr in ring_pairs(grp)]
            return out
        # swap
        pr0 = self.problems[0]
        if pr0.name != "tsp":
            raise ValueError(f"{what}: mixer='swap' is the TSP tour-exchange mixer; {pr0.name} is not a TSP "
                             f"(use mixer='xy' for one-hot groups)")
        first, m = pr0.data["layout"]
        for i, pr in enumerate(self.problems):
            if pr.name != "tsp" or pr.data["layout"] != (first, m):
                raise ValueError(f"{what}: mixer='swap' needs TSPs of the same layout; problem {i} differs")
        return [("swap", wires) for wires in tour_exchange_terms(first, m)]

    def _initial_state(self, spec) -> torch.Tensor:
        what = "qaoa"
        n = self.n_qubits
        N = 2 ** n
        if isinstance(spec, str) and spec in ("auto", "plus", "feasible"):
            kind = spec
            if kind == "auto":
                kind = {"x": "plus", "warm": "warm"}.get(self.mixer, "feasible")
            if kind == "warm":                     # ⊗ RY(θ_i)|0⟩, per problem of a batch
                return _product_state(self._warm64)
            if kind == "plus":
                return torch.full((1, N), 1 / math.sqrt(N), dtype=torch.complex128)
            rows = []
            for i, pr in enumerate(self.problems):
                mask = pr.feasible_mask().to(torch.float64)
                cnt = float(mask.sum())
                if cnt == 0:
                    raise ValueError(f"{what}: problem {i} ({pr.name}) has no feasible bitstring to start from")
                rows.append((mask / math.sqrt(cnt)).to(torch.complex128))
            st = torch.stack(rows)
            if bool((st == st[:1]).all()):
                st = st[:1]
            return st
        if isinstance(spec, (str, numbers.Integral)) and not isinstance(spec, bool):
            if isinstance(spec, str):
                if len(spec) != n or any(ch not in "01" for ch in spec):
                    raise ValueError(f"{what}: initial_state {spec!r} must be 'auto', 'plus', 'feasible', a "
                                     f"bitstring of {n} bits or a state tensor")
                idx = int(spec, 2)
            else:
                idx = int(spec)
                if not 0 <= idx < N:
                    raise ValueError(f"{what}: initial basis index {idx} is out of range [0, 2**{n})")
            st = torch.zeros(1, N, dtype=torch.complex128)
            st[0, idx] = 1
            return st
        if isinstance(spec, torch.Tensor):
            st = spec.detach().to(torch.complex128).cpu()
            if st.dim() == 1:
                st = st.unsqueeze(0)
            if st.dim() != 2 or st.shape[1] != N or st.shape[0] not in (1, self.n_graphs):
                raise ValueError(f"{what}: initial_state tensor must have shape ({N},) or ({self.n_graphs}, {N}), "
                                 f"got {tuple(spec.shape)}")
            norms = torch.linalg.vector_norm(st, dim=1)
            if not bool((norms - 1).abs().max() < 1e-6):
                raise ValueError(f"{what}: initial_state must be normalised (norms {norms.tolist()})")
            return st
        raise TypeError(f"{what}: initial_state must be 'auto', 'plus', 'feasible', a bitstring, an index or a "
                        f"tensor, got {type(spec).__name__}")

    # -- the matrices of the steps ------------------------------------------------------------------
    def _step_key(self, kind, wires):
        """Steps with equal keys share their matrix within a layer: kind and width, except the
        warm-start blocks, whose matrices depend on their wires' warm start."""
        return (kind, tuple(wires)) if kind == "warm" else (kind, len(wires))

    def _warm_rows(self, wires, B: int) -> torch.Tensor:
        """(sin θ_w, cos θ_w) of ``wires`` (all wires: None) per row of a batch of B: (B, 2, k)
        float64, or (1, 2, k) when every problem has the same warm start."""
        sc = self._consts()["warm_sc"]
        if wires is not None:
            sc = sc[:, :, wires[0]:wires[-1] + 1]                # the blocks are runs of wires
        if sc.shape[0] == 1:
            return sc
        G = sc.shape[0]
        return sc.unsqueeze(1).expand(G, B // G, *sc.shape[1:]).reshape(B, *sc.shape[1:])

    def _step_matrix(self, kind, wires, beta):
        """exp(-iβ_b G) of one step on ``wires``: (B, d, d) in the module's dtype."""
        cd = self.dtype
        if kind == "x":
            return _kron_power(_rx2(beta, cd), len(wires))
        if kind == "warm":
            return _block_rotation(beta, self._warm_rows(wires, beta.shape[0]).expand(beta.shape[0], -1, -1), cd)
        if kind == "xy":
            return _xy_matrix(beta, cd)
        return _swap_matrix(beta, cd)

    def _step_generator(self, kind, wires, B: int) -> torch.Tensor:
        """The Hermitian G of a step (U = exp(-iβG)), complex128 on the module's device: (d, d), or
        (B, d, d) for warm-start blocks of a batch of problems with different warm starts."""
        if kind == "warm":
            G = _block_generator(self._warm_rows(wires, B))
            return (G[0] if G.shape[0] == 1 else G).to(torch.complex128)
        return _generator(kind, len(wires)).to(self.device)

    def _block_matrices(self, beta):
        """The rotation of each wire block of a wire-block mixer layer, in block order: (B, d, d) each
        (the X mixer's blocks of one width are one tensor)."""
        if self.mixer == "x":
            m1 = _rx2(beta, self.dtype)
            mats = {}
            for k in self._xsizes:
                if k not in mats:
                    mats[k] = _kron_power(m1, k)
            return [mats[k] for k in self._xsizes]
        B = beta.shape[0]
        U = _rotations(beta, self._warm_rows(None, B).expand(B, -1, -1), self.dtype)     # (B, n, 2, 2)
        out = []
        for _, wires in self._steps:
            M = U[:, wires[0]]
            for w in wires[1:]:
                M = kron(M, U[:, w])
            out.append(M)
        return out

    def _block_generators_real(self, B: int):
        """The real symmetric generator of each wire block, in block order: (d, d) or (B, d, d)
        (the warm-start ones cached per batch size)."""
        if self.mixer == "x":
            return [_generator_real(k, self.device) for k in self._xsizes]
        c = self._consts()
        key = ("warm_generators", B if c["warm_sc"].shape[0] > 1 else 1)
        if key not in c:
            real = {torch.complex64: torch.float32, torch.complex128: torch.float64}[self.dtype]
            with building_cache():
                c[key] = [self._step_generator(kind, wires, B).real.to(real) for kind, wires in self._steps]
        return c[key]
