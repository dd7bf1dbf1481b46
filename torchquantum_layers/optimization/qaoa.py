"""Batched QAOA: many (γ, β) starts and several graphs of the same size in one batch.

``qaoa(problem, p, mixer="x")`` returns a :class:`QAOA` module. Its ``forward(angles)`` takes
``angles`` of shape ``(S, 2p)`` — row s is ``[γ_1 … γ_p, β_1 … β_p]`` of start s — and returns the
expected costs ``(S,)`` (``output="cost"``, default) or the final states ``(S, 2**n)``
(``output="state"``). The state after p layers is

    |ψ(γ, β)⟩ = U_B(β_p) U_C(γ_p) … U_B(β_1) U_C(γ_1) |ψ_0⟩ ,   U_C(γ) = exp(-iγ C),

with C the problem's cost (to minimise, see :mod:`.problems`; MaxCut's C is minus the cut) and

* ``mixer="x"``: ``U_B(β) = exp(-iβ Σ_j X_j) = ⊗_j RX(2β)``, ``|ψ_0⟩ = |+⟩^n``;
* ``mixer="xy"``: ring XY mixer ``Π_(a,b) exp(-iβ (X_a X_b + Y_a Y_b)/2)`` over consecutive wires of
  each of the problem's ``mixer_groups`` (one-hot registers: colouring, TSP rows; all wires:
  portfolio), which conserves the number of 1s in each group; ``|ψ_0⟩`` is the uniform
  superposition of the feasible bitstrings (a product of W states for one-hot groups, a Dicke
  state for the portfolio budget);
* ``mixer="swap"`` (TSP only): ``Π exp(-iβ T)`` with T exchanging two cities between two
  consecutive positions (``|u@t, v@t'⟩ ↔ |u@t', v@t⟩``), which keeps the whole set of valid tours;
  ``|ψ_0⟩`` = the uniform superposition of the tours.

The cost layer is ONE elementwise multiply of the batch by ``exp(-iγ_s C_j)``: the phases come from
a table of the distinct cost values (one gather) when the diagonal has few of them (integer
weights), else from one cos/sin pass. For ``S`` starts and ``G`` problems (a list of problems of
the same size, ``angles`` of shape ``(S, 2p)`` shared by all, or ``(G, S, 2p)``) the batch is
``G × S`` rows and the outputs have shape ``(G, S)`` / ``(G, S, 2**n)``.

Differentiation (``diff_method``):

* ``"adjoint"`` (default): a ``torch.autograd.Function`` that runs the layers in place on
  preallocated buffers and in ``backward`` runs the circuit in reverse once, un-computing the state
  and carrying one bra (both in one stacked buffer); its memory does not grow with p.
  ``loss.backward()`` works as usual; gradients match backprop. With ``create_graph=True``
  (Hessians, double backward) its backward differentiates the out-of-place replay instead. With the X mixer it works in the
  frame φ = S^{⊗n} ψ (S = diag(1, i) commutes with the cost and turns RX into the real RY), so the
  mixer is a few batched REAL GEMMs over blocks of wires of the (re, im) planes
  (``mixer_kernel="real"``; ``"complex"`` keeps the former complex-GEMM route).
* ``"backprop"``: plain autograd through out-of-place kernels (supports higher derivatives).

Angles are plain tensors: the module holds no parameters, so any optimiser (or a Lightning task)
owns them. :func:`linear_ramp`, :func:`fixed_angles`, :func:`interp`, :func:`random_angles` make
initial angles; :meth:`QAOA.analyse` reports expected cost, approximation ratio, probability of the
optimum, top-k bitstrings and seeded samples. :meth:`QAOA.cvar` is the CVaR objective of Barkoutsos
et al. (2020) (see :mod:`.cvar`): exact and differentiable, or estimated from shots.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ..caching import building_cache, lasting
from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import COMPLEX_DTYPES, REAL_OF, check_allocation
from .problems import MAX_EXACT_QUBITS, Problem, exact_solution
from .angles import _check_p, fixed_angles, linear_ramp, perturb, random_angles
from .qaoa_ops import (_flip_symmetric, _i_power, _kron_power, _level_table, _popcount, _real_blocks, _rx2,
                       _swap_matrix, _xy_matrix)
from .workspace import _Pool
from .cvar import check_alpha, cost_order, cvar_from_probabilities, cvar_from_samples
from .qaoa_adjoint import _AdjointCVaR, _AdjointQAOA, _InPlaceSweeps


__all__ = ["QAOA", "qaoa", "qaoa_circuit", "MultiStartQAOA", "QAOAResult", "MIXERS", "MIXER_KERNELS"]

MIXERS = ("x", "xy", "swap")
DIFF_METHODS = ("adjoint", "backprop")

# The ⊗RX mixer is applied as batched GEMMs over blocks of at most this many wires (measured on
# the 2-core CPU, benchmarks/qaoa.py: 4-5 wires balance GEMM efficiency against 2^k flops).
DEFAULT_BLOCK_WIRES = 4
# How the adjoint path applies the X mixer: "real" (default) conjugates every simulated wire by
# S = diag(1, i), which turns RX into the real rotation RY and leaves the diagonal cost alone, so
# the mixer is a few REAL GEMMs on the (re, im) planes (half the flops of complex ones, and sgemm
# runs nearer the memory bound on these skinny shapes); "complex" is the former route (complex
# GEMMs), kept for comparison and as a reference.
MIXER_KERNELS = ("real", "complex")



@dataclass
class QAOAResult:
    """Summary of QAOA states for a batch of angles (shapes ``(S,)`` or ``(G, S)`` per quantity)."""
    angles: torch.Tensor
    expected_cost: torch.Tensor
    expected_objective: torch.Tensor            # E[objective] in natural units, over all bitstrings
    approximation_ratio: Optional[torch.Tensor]
    optimum_probability: Optional[torch.Tensor]
    feasible_probability: torch.Tensor
    top_indices: torch.Tensor                    # (..., k) most probable basis states
    top_probabilities: torch.Tensor              # (..., k)
    top_bitstrings: list                         # nested lists of bitstrings, same layout
    samples: Optional[torch.Tensor] = None       # (..., shots) basis indices when shots were asked
    best: Optional[tuple] = None                 # index of the start with the lowest expected cost
    cvar: Optional[torch.Tensor] = None          # exact CVaR_alpha per start when cvar_alpha was asked
    cvar_alpha: Optional[float] = None

    def __repr__(self) -> str:
        def fmt(t):
            return "None" if t is None else (f"{float(t):.4f}" if t.numel() == 1 else
                                             f"tensor(shape={tuple(t.shape)})")
        return (f"QAOAResult(expected_cost={fmt(self.expected_cost)}, approximation_ratio="
                f"{fmt(self.approximation_ratio)}, optimum_probability={fmt(self.optimum_probability)}, "
                f"best={self.best})")


class QAOA(_InPlaceSweeps, nn.Module):
    """QAOA for one problem, or a list of problems of the same size, batched over starts.

    Args:
        problem: a :class:`~.problems.Problem` or a list of them (same ``n_qubits``).
        p: number of layers (int >= 1).
        mixer: ``"x"``, ``"xy"`` or ``"swap"`` (see the module docstring).
        initial_state: ``"auto"`` (``|+⟩^n`` for the X mixer, the uniform feasible superposition for
            the others), ``"plus"``, ``"feasible"``, a bitstring / basis index, or a state tensor
            ``(2**n,)`` / ``(G, 2**n)``.
        diff_method: ``"adjoint"`` (default) or ``"backprop"``.
        dtype: complex64 (default) or complex128; ``.double()`` / ``.to(device)`` also work.
        block_wires: width of the GEMM blocks of the ⊗RX mixer (default
            :data:`DEFAULT_BLOCK_WIRES`); the real route counts the re/im axis as one more wire
            and uses blocks of ``block_wires`` or ``block_wires + 1`` axes.
        symmetry: let the adjoint path simulate only half the register when the cost and the
            start state are invariant under flipping all bits (X mixer; MaxCut, partitioning, Ising
            without fields). Exact; ``False`` simulates the full register; ``None`` (default) is
            ``True`` for the X mixer. Must be a bool or None. With the XY and swap mixers, which
            use neither, ``block_wires`` and ``symmetry=True`` raise a ValueError.
        mixer_kernel: how the adjoint path applies the X mixer: ``"real"`` (default; real GEMMs in
            the frame where RX is the real rotation RY) or ``"complex"`` (complex GEMMs, the former
            route). Both are exact; see :data:`MIXER_KERNELS`.
    """

    def __init__(self, problem, p: int, mixer: str = "x", initial_state="auto",
                 diff_method: str = "adjoint", dtype=None, device=None,
                 block_wires: Optional[int] = None, symmetry: Optional[bool] = None, mixer_kernel: str = "real"):
        super().__init__()
        what = "qaoa"
        probs = list(problem) if isinstance(problem, (list, tuple)) else [problem]
        if not probs:
            raise ValueError(f"{what}: the list of problems is empty")
        for i, pr in enumerate(probs):
            if not isinstance(pr, Problem):
                raise TypeError(f"{what}: expected a Problem (from the optimization builders), got "
                                f"{type(pr).__name__}" + (f" at position {i}" if len(probs) > 1 else ""))
        n = probs[0].n_qubits
        for i, pr in enumerate(probs):
            if pr.n_qubits != n:
                raise ValueError(f"{what}: all problems in a batch need the same number of qubits; problem 0 "
                                 f"has {n}, problem {i} has {pr.n_qubits}")
        self.p = _check_p(p, what)
        if mixer not in MIXERS:
            raise ValueError(f"{what}: mixer must be one of {MIXERS}, got {mixer!r}")
        if diff_method not in DIFF_METHODS:
            raise ValueError(f"{what}: diff_method must be one of {DIFF_METHODS}, got {diff_method!r}")
        self.problems = tuple(probs)
        self.n_qubits = n
        self.mixer = mixer
        self.diff_method = diff_method
        self.single = not isinstance(problem, (list, tuple))
        if n > 30:
            raise ValueError(f"{what}: {n} qubits need a state of 2**{n} amplitudes; the state-vector QAOA "
                             f"is limited to 30 qubits")
        # mixer structure
        if symmetry is not None and not isinstance(symmetry, bool):
            raise TypeError(f"{what}: symmetry must be a bool (or None), got {symmetry!r}")
        if mixer != "x":
            # both only shape the ⊗RX mixer: refuse them rather than drop them silently
            if block_wires is not None:
                raise ValueError(f"{what}: block_wires={block_wires!r} sets the GEMM blocks of the X mixer; "
                                 f"mixer={mixer!r} does not use it (leave it None)")
            if symmetry:
                raise ValueError(f"{what}: symmetry=True (the half-register bit-flip route of the adjoint path) "
                                 f"exists for the X mixer only, not for mixer={mixer!r}; leave it None or False")
        if symmetry is None:
            symmetry = True
        if block_wires is None:
            block_wires = DEFAULT_BLOCK_WIRES
        if isinstance(block_wires, bool) or not isinstance(block_wires, numbers.Integral) or block_wires < 1:
            raise ValueError(f"{what}: block_wires must be a positive int, got {block_wires!r}")
        self.block_wires = int(block_wires)
        if mixer_kernel not in MIXER_KERNELS:
            raise ValueError(f"{what}: mixer_kernel must be one of {MIXER_KERNELS}, got {mixer_kernel!r}")
        self.mixer_kernel = mixer_kernel
        self._steps = self._mixer_steps()
        # the cost diagonal: a table of levels + index, or the raw values
        diags = torch.stack([pr.diagonal for pr in self.problems])              # (G, N) float64
        self._diag64 = diags
        self._levels64, self._index = _level_table(diags)
        self._init64 = self._initial_state(initial_state)                       # (1 or G, N) c128
        # Bit-flip symmetry: with a cost C(x) = C(x̄) (MaxCut, partitioning, Ising without fields) and
        # a start state with ψ(x) = ψ(x̄), the X-mixer QAOA stays in the symmetric subspace, so the
        # adjoint path simulates only the half with wire 0 = 0 (2^(n-1) amplitudes); RX on wire 0
        # then maps φ(y) to cos β φ(y) - i sin β φ(ȳ), a reversal of the half.
        self._z2 = (symmetry and self.mixer == "x" and n >= 2 and _flip_symmetric(diags)
                    and _flip_symmetric(self._init64))
        sim = n - 1 if self._z2 else n
        if self.mixer == "x":
            m = math.ceil(sim / self.block_wires)
            self._xsizes = [sim // m + (1 if i < sim % m else 0) for i in range(m)]
        else:
            self._xsizes = []
        self._rblocks = _real_blocks(sim, self.block_wires) if self.mixer == "x" else []
        real = torch.float32
        if dtype is not None:
            if dtype not in COMPLEX_DTYPES and dtype not in (torch.float32, torch.float64):
                raise TypeError(f"{what}: dtype must be torch.complex64 or torch.complex128, got {dtype}")
            real = REAL_OF[dtype] if dtype in REAL_OF else dtype
        self.register_buffer("_real_marker", torch.zeros((), dtype=real, device=device), persistent=False)
        self._cache: dict = {}
        self._pool = _Pool()
        self._exact = None

    # -- description ---------------------------------------------------------------------------
    @property
    def n_graphs(self) -> int:
        return len(self.problems)

    @property
    def problem(self) -> Problem:
        return self.problems[0]

    @property
    def dtype(self) -> torch.dtype:
        return {torch.float32: torch.complex64, torch.float64: torch.complex128}[self._real_marker.dtype]

    @property
    def device(self) -> torch.device:
        return self._real_marker.device

    @property
    def hamiltonian(self):
        return self.problems[0].hamiltonian

    def extra_repr(self) -> str:
        return (f"problem={self.problems[0].name}, n_qubits={self.n_qubits}, p={self.p}, mixer={self.mixer!r}, "
                f"graphs={self.n_graphs}, diff_method={self.diff_method!r}, bit-flip symmetry={self._z2}")

    @property
    def uses_symmetry(self) -> bool:
        """True when the adjoint path simulates only the wire-0 = 0 half (see ``symmetry``)."""
        return self._z2

    def release_workspace(self):
        """Free the buffers kept between calls (they make repeated large runs fast)."""
        self._pool.clear()

    # -- set-up ------------------------------------------------------------------------------------
    def _mixer_steps(self):
        """List of (kind, wires) gate steps of one mixer layer (for "x": the wire blocks)."""
        n, what = self.n_qubits, "qaoa"
        if self.mixer == "x":
            m = math.ceil(n / self.block_wires)
            sizes = [n // m + (1 if i < n % m else 0) for i in range(m)]
            out, w = [], 0
            for k in sizes:
                out.append(("x", tuple(range(w, w + k))))
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
                k = len(grp)
                if k < 2:
                    continue
                pairs = [(grp[i], grp[i + 1]) for i in range(k - 1)]
                if k > 2:
                    pairs.append((grp[k - 1], grp[0]))
                out += [("xy", pr) for pr in pairs]
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

        def q(c, t):
            return (c - first) * m + (t - first)
        n_c = first + m
        positions = list(range(first, n_c))
        tpairs = [(positions[i], positions[i + 1]) for i in range(len(positions) - 1)]
        if len(positions) > 2 and first == 0:
            tpairs.append((positions[-1], positions[0]))
        out = []
        for t1, t2 in tpairs:
            for u in range(first, n_c):
                for v in range(u + 1, n_c):
                    out.append(("swap", (q(u, t1), q(u, t2), q(v, t1), q(v, t2))))
        return out

    def _initial_state(self, spec) -> torch.Tensor:
        what = "qaoa"
        n = self.n_qubits
        N = 2 ** n
        if isinstance(spec, str) and spec in ("auto", "plus", "feasible"):
            kind = spec
            if kind == "auto":
                kind = "plus" if self.mixer == "x" else "feasible"
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

    @lasting
    def _consts(self):
        """Working copies of the diagonal data for the current dtype/device (cached)."""
        key = (self.dtype, self.device)
        c = self._cache.get(key)
        if c is None:
            dev, real, cplx = self.device, REAL_OF[self.dtype], self.dtype
            c = {"d": self._diag64.to(device=dev, dtype=real),                    # (G, N)
                 "init": self._init64.to(device=dev, dtype=cplx)}
            c["mid"] = (-1j * self._diag64).to(device=dev, dtype=cplx)           # -i C
            if self._levels64 is not None:
                c["levels"] = self._levels64.to(dev)                             # float64 (K,)
                c["index"] = self._index.to(dev)                                 # (G, N) int64
            # the simulated register of the adjoint path (the wire-0 = 0 half under bit-flip symmetry)
            Ns = 2 ** self.n_qubits // (2 if self._z2 else 1)
            for name in ("d", "init", "mid", "index"):
                if name in c:
                    c[name + "_s"] = c[name][:, :Ns].contiguous()
            if self.mixer == "x":
                # the real route works on φ = D ψ, D = S^{⊗m} = diag(i^{popcount(y)}) over the m
                # simulated wires: D commutes with the cost and turns each RX into RY
                m = Ns.bit_length() - 1
                pc = _popcount(Ns)
                c["frame"] = _i_power(pc).to(device=dev, dtype=cplx)
                c["frame_c"] = _i_power(-pc).to(device=dev, dtype=cplx)       # no conj() view: 5x slower
                c["init_f"] = c["init_s"] * c["frame"]
                c["rev"] = torch.arange(Ns - 1, -1, -1, device=dev)
                c["ones2"] = torch.ones(2 * Ns, dtype=real, device=dev)
                if self._z2:
                    # RX on wire 0 maps φ(y) to cos β φ(y) + sin β κ σ(y) φ(ȳ): the reversal picks
                    # up σ(y) = (-1)^{popcount(y)} and κ = -i^{1-m} from the frame
                    kappa = -_i_power(torch.tensor(1 - m))
                    sig = 1 - 2 * (pc % 2)
                    c["kappa"] = kappa.to(dev)
                    c["ksig"] = (kappa * sig).to(device=dev, dtype=cplx)
                    if kappa.imag == 0:               # Re(conj(a) κσ b) = κσ Re(conj(a) b)
                        c["ksig_w"] = (kappa.real * sig).repeat_interleave(2).to(device=dev, dtype=real)
                    if "index_s" in c:
                        c["index_sig"] = c["index_s"] + (pc % 2).to(dev) * self._levels64.numel()
            self._cache = {key: c}
        return c

    # -- angles ------------------------------------------------------------------------------------
    def _angles(self, angles):
        """-> (gammas (B, p), betas (B, p), out_shape tuple, S)."""
        what = "qaoa"
        if not isinstance(angles, torch.Tensor):
            angles = torch.as_tensor(angles, dtype=REAL_OF[self.dtype])
        if angles.is_complex() or not angles.is_floating_point():
            raise TypeError(f"{what}: angles must be a real floating tensor, got {angles.dtype}")
        p, G = self.p, self.n_graphs
        if angles.shape[-1:] != (2 * p,) or angles.dim() not in (1, 2, 3):
            raise ValueError(f"{what}: angles must have shape (S, {2 * p}) = [γ_1…γ_{p}, β_1…β_{p}] per start "
                             f"(or ({2 * p},), or (G, S, {2 * p}) per graph), got {tuple(angles.shape)}")
        if angles.device != self.device:
            raise TypeError(f"{what}: angles are on {angles.device} but the module is on {self.device}")
        if angles.device.type == "cpu" and not bool(torch.isfinite(angles).all()):
            raise ValueError(f"{what}: angles contain NaN or inf")
        angles = angles.to(REAL_OF[self.dtype])
        squeeze = angles.dim() == 1
        if angles.dim() == 3:
            if angles.shape[0] != G:
                raise ValueError(f"{what}: per-graph angles (G, S, {2 * p}) need G = {G}, got {angles.shape[0]}")
            S = angles.shape[1]
            flat = angles.reshape(G * S, 2 * p)
        else:
            a2 = angles.reshape(-1, 2 * p)
            S = a2.shape[0]
            flat = a2.unsqueeze(0).expand(G, S, 2 * p).reshape(G * S, 2 * p) if G > 1 else a2
        if self.single:
            shape = () if squeeze else (S,)
        else:
            shape = (G,) if squeeze else (G, S)
        if S < 1:
            raise ValueError(f"{what}: angles hold no start (shape {tuple(angles.shape)})")
        return flat[:, :p], flat[:, p:], shape, S

    # -- forward -----------------------------------------------------------------------------------
    def forward(self, angles, output: str = "cost", diff_method: Optional[str] = None):
        """Expected costs ``(S,)`` (``output="cost"``), final states ``(S, 2**n)`` (``"state"``) or
        probabilities ``(S, 2**n)`` (``"probabilities"``); ``(G, S, …)`` for a batch of problems."""
        if output not in ("cost", "state", "probabilities"):
            raise ValueError(f"qaoa: output must be 'cost', 'state' or 'probabilities', got {output!r}")
        method = self.diff_method if diff_method is None else diff_method
        if method not in DIFF_METHODS:
            raise ValueError(f"qaoa: diff_method must be one of {DIFF_METHODS}, got {method!r}")
        gam, bet, shape, S = self._angles(angles)
        B = gam.shape[0]
        check_allocation(self.n_qubits, B, self.dtype, self.device)
        want_state = output != "cost"
        if method == "adjoint":
            out = _AdjointQAOA.apply(gam, bet, self, want_state)
        else:
            psi = self._run_backprop(gam, bet)
            out = psi if want_state else self._energy(psi)
        if output == "probabilities":
            out = out.real.square() + out.imag.square()
        N = 2 ** self.n_qubits
        return out.reshape(shape + ((N,) if want_state else ()))

    def expected_cost(self, angles, diff_method: Optional[str] = None):
        """Alias of ``forward(angles)``: expected costs ``(S,)`` / ``(G, S)``, differentiable."""
        return self.forward(angles, "cost", diff_method)

    def states(self, angles, diff_method: Optional[str] = None):
        return self.forward(angles, "state", diff_method)

    def probabilities(self, angles):
        with torch.no_grad():
            return self.forward(angles, "probabilities")

    # -- CVaR objective (math in .cvar) ------------------------------------------------------------
    def _cvar_order(self):
        """The cost diagonal sorted once per dtype/device (the wire-0 = 0 half under bit-flip
        symmetry: the other half repeats it with the same probabilities)."""
        c = self._consts()
        order = c.get("cvar_order")
        if order is None:
            half = 2 ** self.n_qubits // 2 if self._z2 else None
            with building_cache():
                d = self._diag64 if half is None else self._diag64[:, :half]
                order = cost_order(d.to(self.device))
            c["cvar_order"] = order
        return order

    def cvar_of_probabilities(self, probabilities: torch.Tensor, alpha) -> torch.Tensor:
        """CVaR_alpha of probabilities ``(..., 2**n)`` as ``forward(angles, "probabilities")`` returns
        them (differentiable); shape ``(S,)`` / ``(G, S)`` as the expected cost."""
        alpha = check_alpha(alpha, "QAOA.cvar")
        N = 2 ** self.n_qubits
        if not isinstance(probabilities, torch.Tensor) or probabilities.shape[-1:] != (N,):
            got = tuple(probabilities.shape) if isinstance(probabilities, torch.Tensor) else type(probabilities).__name__
            raise ValueError(f"QAOA.cvar: probabilities must have shape (..., {N}), got {got}")
        if self._z2:
            return cvar_from_probabilities(probabilities[..., :N // 2], self._cvar_order(), alpha, multiplicity=2)
        return cvar_from_probabilities(probabilities, self._cvar_order(), alpha)

    def _cvar_rows(self, probabilities: torch.Tensor, alpha: float) -> torch.Tensor:
        """CVaR of the simulated register's probabilities (B, N_sim) (the half under symmetry), (B,)."""
        B, Ns = probabilities.shape
        G = self.n_graphs
        p = probabilities if G == 1 else probabilities.view(G, B // G, Ns)
        return cvar_from_probabilities(p, self._cvar_order(), alpha, multiplicity=2 if self._z2 else 1).reshape(B)

    def cvar(self, angles, alpha, diff_method: Optional[str] = None, shots: Optional[int] = None,
             generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """CVaR_alpha of the cost (Barkoutsos et al. 2020): the expected cost over the lowest-cost
        ``alpha`` fraction of each start's output distribution, ``(S,)`` / ``(G, S)`` as :meth:`forward`.

        ``alpha`` in (0, 1]: 1 is the expected cost, ``alpha -> 0`` the lowest cost of non-zero
        probability. Exact and differentiable by default (through the state path of ``diff_method``);
        with ``shots``, the estimate from :meth:`sample` (seeded by ``generator``): the mean of the
        lowest ``ceil(alpha * shots)`` sampled costs, not differentiable.
        """
        alpha = check_alpha(alpha, "QAOA.cvar")
        if shots is None:
            method = self.diff_method if diff_method is None else diff_method
            if method == "adjoint":
                gam, bet, shape, _ = self._angles(angles)
                check_allocation(self.n_qubits, gam.shape[0], self.dtype, self.device)
                return _AdjointCVaR.apply(gam, bet, self, alpha).reshape(shape)
            return self.cvar_of_probabilities(self.forward(angles, "probabilities", diff_method), alpha)
        samples = self.sample(angles, shots, generator=generator)          # shape + (shots,)
        d = self._diag64.to(samples.device)
        G = self.n_graphs
        sampled = torch.gather(d.unsqueeze(1).expand(G, samples.numel() // (G * shots), d.shape[1]), 2,
                               samples.reshape(G, -1, shots)).reshape(samples.shape)
        return cvar_from_samples(sampled, alpha, "QAOA.cvar").to(REAL_OF[self.dtype])

    # -- backprop path (plain autograd, out of place) -----------------------------------------------
    def _rows(self, t: torch.Tensor, B: int) -> torch.Tensor:
        """(1 or G, N) → per-row view (B, N)."""
        G = t.shape[0]
        if G == 1:
            return t.expand(B, -1)
        return t.unsqueeze(1).expand(G, B // G, t.shape[1]).reshape(B, t.shape[1])

    def _phase(self, gamma: torch.Tensor, conj: bool = False) -> torch.Tensor:
        """exp(∓iγ_b C_j): (B, N) complex."""
        c = self._consts()
        B, G, N = gamma.shape[0], self.n_graphs, 2 ** self.n_qubits
        sign = 1.0 if conj else -1.0
        if "levels" in c:
            ang = sign * gamma.to(torch.float64)[:, None] * c["levels"][None, :]
            tab = torch.polar(torch.ones_like(ang), ang).to(self.dtype)           # (B, K)
            if G == 1:
                return tab.index_select(1, c["index"][0])
            K = tab.shape[1]
            return torch.gather(tab.view(G, B // G, K), 2,
                                c["index"].unsqueeze(1).expand(G, B // G, N)).reshape(B, N)
        ang = sign * gamma.view(G, B // G, 1) * c["d"].unsqueeze(1)
        return torch.polar(torch.ones_like(ang), ang).reshape(B, N)

    def _step_matrix(self, kind, k, beta):
        cd = self.dtype
        if kind == "x":
            return _kron_power(_rx2(beta, cd), k)
        if kind == "xy":
            return _xy_matrix(beta, cd)
        return _swap_matrix(beta, cd)

    def _run_backprop(self, gam, bet):
        c = self._consts()
        B, n = gam.shape[0], self.n_qubits
        psi = self._rows(c["init"], B)
        for l in range(self.p):
            psi = psi * self._phase(gam[:, l])
            mats = {}
            for kind, wires in self._steps:
                key = (kind, len(wires))
                if key not in mats:
                    mats[key] = self._step_matrix(kind, len(wires), bet[:, l])
                psi = apply_matrix_unchecked(psi, mats[key], wires, n)
        return psi

    def _energy(self, psi):
        """Σ_j C_j |ψ_bj|² per row (B,), differentiable (backprop path, full register)."""
        c = self._consts()
        B, N = psi.shape
        G = self.n_graphs
        prob = psi.real.square() + psi.imag.square()
        return (prob.view(G, B // G, N) * c["d"].unsqueeze(1)).sum(-1).reshape(B)

    # -- analysis ----------------------------------------------------------------------------------
    def exact(self):
        """Exact solutions (brute force) of the problems, cached; ``None`` for > 26 qubits."""
        if self._exact is None:
            if self.n_qubits > MAX_EXACT_QUBITS:
                return None
            self._exact = [exact_solution(pr) for pr in self.problems]
        return self._exact

    def approximation_ratio(self, expected_cost: torch.Tensor) -> torch.Tensor:
        """``(C_worst - ⟨C⟩) / (C_worst - C_opt)`` with C_worst the largest cost of a feasible bitstring.

        1 at the optimum, 0 at the worst feasible bitstring; for MaxCut (C = -cut, C_worst = 0) it is
        ``⟨cut⟩ / max cut``. Needs the exact solution (≤ 26 qubits).
        """
        ex = self.exact()
        if ex is None:
            raise ValueError(f"approximation_ratio: {self.n_qubits} qubits is beyond brute force "
                             f"({MAX_EXACT_QUBITS} qubits)")
        e = torch.as_tensor(expected_cost)
        opt = torch.tensor([x.cost for x in ex], dtype=torch.float64, device=e.device)
        worst = torch.tensor([x.worst_cost for x in ex], dtype=torch.float64, device=e.device)
        span = worst - opt
        span = torch.where(span > 0, span, torch.ones_like(span))
        if self.single:
            return ((worst - e.to(torch.float64)) / span)[0] if e.dim() == 0 else (worst - e.to(torch.float64)) / span
        shape = (-1,) + (1,) * (e.dim() - 1)
        return (worst.view(shape) - e.to(torch.float64)) / span.view(shape)

    def analyse(self, angles, k: int = 5, shots: Optional[int] = None,
                generator: Optional[torch.Generator] = None, cvar_alpha: Optional[float] = None) -> QAOAResult:
        """Expected cost, approximation ratio, probability of the optimum and of feasibility, the top-k
        bitstrings per start, (with ``shots``) seeded samples and (with ``cvar_alpha``) the exact
        CVaR of each start (see :meth:`cvar`), for a batch of angles."""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"analyse: k must be a positive int, got {k!r}")
        if cvar_alpha is not None:
            cvar_alpha = check_alpha(cvar_alpha, "analyse", name="cvar_alpha")
        N = 2 ** self.n_qubits
        k = min(int(k), N)
        with torch.no_grad():
            psi = self.forward(angles, "state")
            shape = psi.shape[:-1]
            flat = psi.reshape(-1, N)
            prob = (flat.real.square() + flat.imag.square()).to(torch.float64)
            B, G = flat.shape[0], self.n_graphs
            d = self._diag64.to(prob.device)
            pg = prob.view(G, B // G, N)
            cost = (pg * d.unsqueeze(1)).sum(-1)
            feas = torch.stack([pr.feasible_mask() for pr in self.problems]).to(prob.device, torch.float64)
            feas_p = (pg * feas.unsqueeze(1)).sum(-1)
            ex = self.exact()
            ratio = opt_p = None
            if ex is not None:
                ratio = self.approximation_ratio(cost if not self.single else cost[0]).reshape(shape)
                optm = torch.zeros(G, N, dtype=torch.float64, device=prob.device)
                for g, x in enumerate(ex):
                    optm[g, x.indices.to(prob.device)] = 1
                opt_p = (pg * optm.unsqueeze(1)).sum(-1).reshape(shape)
            objv = torch.stack([pr.objective_vector() for pr in self.problems]).to(prob.device)
            obj = (pg * objv.unsqueeze(1)).sum(-1).reshape(shape)
            tp, ti = torch.topk(prob, k, dim=1)
            bits = [[format(int(i), f"0{self.n_qubits}b") for i in row] for row in ti.tolist()]
            if len(shape) == 2:
                bits = [bits[g * shape[1]:(g + 1) * shape[1]] for g in range(shape[0])]
            elif len(shape) == 0:
                bits = bits[0]
            samples = None
            if shots is not None:
                from ..measure import sample
                samples = sample(flat, shots, generator=generator).reshape(shape + (shots,))
            cost = cost.reshape(shape)
            cvar = None if cvar_alpha is None else self.cvar_of_probabilities(
                prob.reshape(shape + (N,)), cvar_alpha)
            best = None
            if cost.numel():
                j = int(torch.argmin(cost.reshape(-1)))
                best = tuple(int(x) for x in torch.unravel_index(torch.tensor(j), cost.shape)) if cost.dim() else ()
            return QAOAResult(angles=torch.as_tensor(angles).detach(), expected_cost=cost,
                              expected_objective=obj, approximation_ratio=ratio, optimum_probability=opt_p,
                              feasible_probability=feas_p.reshape(shape), top_indices=ti.reshape(shape + (k,)),
                              top_probabilities=tp.reshape(shape + (k,)), top_bitstrings=bits,
                              samples=samples, best=best, cvar=cvar, cvar_alpha=cvar_alpha)

    def sample(self, angles, shots: int, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """``shots`` measured basis indices per start: ``(S, shots)`` (seeded by ``generator``)."""
        from ..measure import sample
        with torch.no_grad():
            psi = self.forward(angles, "state")
            N = 2 ** self.n_qubits
            shape = psi.shape[:-1]
            return sample(psi.reshape(-1, N), shots, generator=generator).reshape(shape + (shots,))

    # -- routing through the library's Circuit ------------------------------------------------------
    def circuit(self):
        """The same QAOA as a :class:`~torchquantum_layers.Circuit` (see :func:`qaoa_circuit`); equal to
        :meth:`states` up to the global phase ``exp(-iγ c_0)`` of the constant term. Use it with
        ``tql.grad.circuit_expval(circ, qaoa.hamiltonian, x=angles, diff_method=...)`` for the
        library's backprop / adjoint / parameter-shift."""
        if self.mixer != "x" or self.n_graphs != 1:
            raise ValueError("circuit: only the X mixer on a single problem is available as a Circuit")
        init = self._init64
        if not torch.allclose(init, torch.full_like(init, 1 / math.sqrt(2 ** self.n_qubits))):
            raise ValueError("circuit: only the |+⟩ initial state is available as a Circuit")
        return qaoa_circuit(self.problems[0], self.p, dtype=self.dtype, device=self.device)




class MultiStartQAOA(nn.Module):
    """A :class:`QAOA` plus its trainable angles: ``angles`` is an ``nn.Parameter`` of shape
    ``(S, 2p)`` (or ``(G, S, 2p)``) and ``forward()`` returns the expected costs of all starts,
    so ``model().sum().backward()`` trains every start at once (what a Lightning task wraps).

    ``init`` is ``"ramp"`` (linear ramp), ``"fixed"`` (Wurtz–Lykov angles, 3-regular MaxCut),
    ``"random"``, or a tensor of initial angles. With a string, or a single point ``(2p,)``, the
    first start is exactly that point and the other ``n_starts - 1`` are perturbed by ``noise``
    (seeded by ``generator``). A tensor ``(S, 2p)`` (or ``(G, S, 2p)`` per problem of a batch of G)
    is used as given: its S is the number of starts, and an ``n_starts`` other than S is an error.
    ``n_starts`` defaults to 8 (and to S for a batch of starts).
    """

    def __init__(self, qaoa_module: QAOA, n_starts: Optional[int] = None, init="ramp", noise: float = 0.1,
                 generator: Optional[torch.Generator] = None):
        super().__init__()
        what = "MultiStartQAOA"
        if not isinstance(qaoa_module, QAOA):
            raise TypeError(f"{what}: expected a QAOA module, got {type(qaoa_module).__name__}")
        self.qaoa = qaoa_module
        p = qaoa_module.p
        if n_starts is not None and (isinstance(n_starts, bool) or not isinstance(n_starts, numbers.Integral)
                                     or n_starts < 1):
            raise ValueError(f"{what}: n_starts must be a positive int, got {n_starts!r}")
        if isinstance(noise, bool) or not isinstance(noise, numbers.Real) or not math.isfinite(noise) or noise < 0:
            raise ValueError(f"{what}: noise must be a finite number >= 0, got {noise!r}")
        if isinstance(init, str):
            S = 8 if n_starts is None else int(n_starts)
            if init == "ramp":
                a = perturb(linear_ramp(p), S, noise, generator)
            elif init == "fixed":
                a = perturb(fixed_angles(p), S, noise, generator)
            elif init == "random":
                a = random_angles(p, S, generator)
            else:
                raise ValueError(f"{what}: init must be 'ramp', 'fixed', 'random' or a tensor, got {init!r}")
        else:
            try:
                a = torch.as_tensor(init.detach() if isinstance(init, torch.Tensor) else init).cpu()
            except (TypeError, ValueError, RuntimeError):
                raise TypeError(f"{what}: init must be 'ramp', 'fixed', 'random' or a tensor of angles, got "
                                f"{type(init).__name__}") from None
            if a.is_complex() or a.dtype == torch.bool:
                raise TypeError(f"{what}: initial angles must be real, got {a.dtype}")
            a = a.to(torch.float64)
            G = qaoa_module.n_graphs
            if a.dim() == 0 or a.shape[-1] != 2 * p or a.dim() > 3 or (a.dim() == 3 and a.shape[0] != G):
                raise ValueError(f"{what}: initial angles must have shape ({2 * p},) (one point, perturbed into "
                                 f"n_starts starts), (S, {2 * p}) or ({G}, S, {2 * p}) (per problem), got "
                                 f"{tuple(a.shape)}")
            if not bool(torch.isfinite(a).all()):
                raise ValueError(f"{what}: initial angles contain NaN or inf")
            if a.dim() == 1:
                a = perturb(a, 8 if n_starts is None else int(n_starts), noise, generator)
            else:
                S = a.shape[-2]
                if S < 1:
                    raise ValueError(f"{what}: initial angles hold no start (shape {tuple(a.shape)})")
                if n_starts is not None and n_starts != S:
                    raise ValueError(f"{what}: n_starts={n_starts} but the initial angles hold {S} starts (shape "
                                     f"{tuple(a.shape)}); give angles ({2 * p},) to perturb into n_starts starts, "
                                     f"or leave n_starts out")
        real = REAL_OF[qaoa_module.dtype]
        self.angles = nn.Parameter(a.to(device=qaoa_module.device, dtype=real).clone())

    def forward(self) -> torch.Tensor:
        return self.qaoa(self.angles)

    def best(self):
        """``(angles (2p,), expected cost)`` of the start with the lowest expected cost (over all
        problems of a batch: angles shared by the G problems are the row of that start)."""
        with torch.no_grad():
            c = self.qaoa(self.angles)
            j = int(torch.argmin(c.reshape(-1)))
            rows = self.angles.detach().reshape(-1, self.angles.shape[-1])
            # costs are (G, S) for angles (S, 2p) shared by G problems: start j % S
            return rows[j % rows.shape[0]].clone(), float(c.reshape(-1)[j])

    def analyse(self, **kwargs) -> QAOAResult:
        return self.qaoa.analyse(self.angles.detach(), **kwargs)


def qaoa_circuit(problem: Problem, p: int, dtype=None, device=None):
    """QAOA with the X mixer as a gate-level :class:`~torchquantum_layers.Circuit` whose angles are
    input columns: ``circ(x)`` with ``x = angles (S, 2p)`` (``[γ_1…γ_p, β_1…β_p]``, the same layout
    and convention as :class:`QAOA`). Gates: H on every wire, then per layer ``RZ(2γ h_i)`` and
    ``RZZ(2γ J_ij)`` from the problem's Ising form (``RZ(θ) = exp(-iθZ/2)``) and ``RX(2β)`` on every
    wire. The constant term is left out (a global phase). Needs no 2^n diagonal."""
    from ..circuit import Circuit, Input
    if not isinstance(problem, Problem):
        raise TypeError(f"qaoa_circuit: expected a Problem, got {type(problem).__name__}")
    p = _check_p(p, "qaoa_circuit")
    n = problem.n_qubits
    h, J, _ = problem.ising()
    circ = Circuit(n)
    if device is not None:
        circ = circ.to(device)
    if dtype in (torch.complex128, torch.float64):
        circ = circ.double()
    for w in range(n):
        circ.h(w)
    pairs = torch.nonzero(J).tolist()
    for l in range(p):
        for i in range(n):
            if float(h[i]) != 0:
                circ.rz(i, Input(l, 2 * float(h[i])))
        for i, j in pairs:
            circ.rzz(i, j, Input(l, 2 * float(J[i, j])))
        for w in range(n):
            circ.rx(w, Input(p + l, 2.0))
    return circ


def qaoa(problem, p: int, mixer: str = "x", **kwargs) -> QAOA:
    """Build a :class:`QAOA` module for ``problem`` (or a list of problems of the same size) with
    ``p`` layers and the given ``mixer``; see :class:`QAOA` for the keyword arguments."""
    return QAOA(problem, p, mixer=mixer, **kwargs)
