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
* ``mixer="warm"`` (warm start, Egger et al. 2021, :mod:`.warm_start`): from a warm start
  ``c ∈ [0, 1]^n`` (``warm_start=``, clipped to ``[ε, 1 - ε]`` by ``epsilon=``),
  ``U_B(β) = ⊗_i exp(-iβ (sin θ_i X_i + cos θ_i Z_i))``, ``|ψ_0⟩ = ⊗_i RY(θ_i)|0⟩``,
  ``θ_i = 2 arcsin √c_i``; at ``c_i = 1/2`` it is the X mixer from ``|+⟩^n``.

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
  (``mixer_kernel="real"``; ``"complex"`` keeps the former complex-GEMM route). The warm-start
  mixer runs the complex-GEMM route over the same wire blocks, one matrix per block.
* ``"backprop"``: plain autograd through out-of-place kernels (supports higher derivatives).

Angles are plain tensors: the module holds no parameters, so any optimiser (or a Lightning task)
owns them. :func:`linear_ramp`, :func:`fixed_angles`, :func:`interp`, :func:`random_angles` make
initial angles; :meth:`QAOA.analyse` reports expected cost, approximation ratio, probability of the
optimum, top-k bitstrings and seeded samples. :meth:`QAOA.cvar` is the CVaR objective of Barkoutsos
et al. (2020) (see :mod:`.cvar`): exact and differentiable, or estimated from shots.

Layout of the implementation (this module re-exports every name it used to hold):

* :mod:`.qaoa_mixers` — :data:`MIXERS`, :data:`MIXER_KERNELS`, the mixer steps and the initial state;
* :mod:`.qaoa_engine` — constants per dtype/device, angle parsing, the backprop path;
* :mod:`.qaoa_adjoint` — the in-place adjoint path;
* :mod:`.qaoa_cvar_objective` — :meth:`QAOA.cvar`;
* :mod:`.qaoa_analysis` — :class:`QAOAResult`, :meth:`QAOA.analyse` and the exact references;
* :mod:`.qaoa_multistart` — :class:`MultiStartQAOA`;
* :mod:`.qaoa_gate_circuit` — :func:`qaoa_circuit`;
* here — the :class:`QAOA` module itself (validation, ``forward``) and the builder :func:`qaoa`.
"""
from __future__ import annotations

import math
import numbers  # noqa: F401  (formerly used here; kept for ``qaoa.numbers`` users)
from dataclasses import dataclass  # noqa: F401  (re-exported: formerly imported here)
from typing import Optional

import torch
from torch import nn

from ..kernels.state import COMPLEX_DTYPES, REAL_OF, check_allocation
from ..kernels.transforms import transforms_active
from .problems import Problem
from .angles import _check_p
from .qaoa_ops import _flip_symmetric, _level_table, _real_blocks
from .workspace import _Pool
from .qaoa_adjoint import _AdjointQAOA, _InPlaceSweeps
from .qaoa_analysis import QAOAResult, _QAOAAnalysis
from .qaoa_cvar_objective import _CVaRObjective
from .qaoa_engine import _BackpropSweeps
from .qaoa_gate_circuit import qaoa_circuit
from ..grad import circuit_expval
from ..kernels import native
from .qaoa_mixers import MIXER_KERNELS, MIXERS, _MixerSetup, _check_mixer_options
from .qaoa_mixers import DEFAULT_BLOCK_WIRES  # noqa: F401  (documented in QAOA's docstring)
from .qaoa_multistart import MultiStartQAOA
from .warm_start import DEFAULT_EPSILON, _product_state, warm_start_circuit, warm_start_probabilities

# Names this module imported before the split, re-exported unchanged for ``from .qaoa import …``.
from ..caching import building_cache, lasting  # noqa: F401
from ..kernels.apply import apply_matrix_unchecked  # noqa: F401
from .problems import MAX_EXACT_QUBITS, exact_solution  # noqa: F401
from .angles import fixed_angles, linear_ramp, perturb, random_angles  # noqa: F401
from .qaoa_ops import (_i_power, _kron_power, _popcount, _rx2, _swap_matrix, _xy_matrix)  # noqa: F401
from .cvar import check_alpha, cost_order, cvar_from_probabilities, cvar_from_samples  # noqa: F401
from .qaoa_adjoint import _AdjointCVaR  # noqa: F401


__all__ = ["QAOA", "qaoa", "qaoa_circuit", "MultiStartQAOA", "QAOAResult", "MIXERS", "MIXER_KERNELS"]

DIFF_METHODS = ("adjoint", "backprop")
# ``diff_method="adjoint"`` runs registers of at most this many amplitudes in all (rows × 2^n) as the
# gate-level Circuit through its native program (see QAOA._small_circuit). Measured on the 2-core
# AMD EPYC, p = 3, one thread, value + gradient: n = 10 / 12, one start, the Circuit 1.5x / 1.3x
# faster than the sweep; n = 10, 8 starts (2^13) 1.2-1.4x; at 2^14 (n = 14, one start) even, above
# it the sweep wins (n = 12, 8 starts: 0.8x; n = 16, one start: 0.5x).
CIRCUIT_ROUTE_MAX_AMPLITUDES = 2 ** 13
_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


class QAOA(_QAOAAnalysis, _CVaRObjective, _BackpropSweeps, _MixerSetup, _InPlaceSweeps, nn.Module):
    """QAOA for one problem, or a list of problems of the same size, batched over starts.

    Args:
        problem: a :class:`~.problems.Problem` or a list of them (same ``n_qubits``).
        p: number of layers (int >= 1).
        mixer: ``"x"``, ``"xy"``, ``"swap"`` or ``"warm"`` (see the module docstring).
        initial_state: ``"auto"`` (``|+⟩^n`` for the X mixer, the warm-start product state for the
            warm-start mixer, the uniform feasible superposition for the others), ``"plus"``,
            ``"feasible"``, a bitstring / basis index, or a state tensor ``(2**n,)`` / ``(G, 2**n)``.
        diff_method: ``"adjoint"`` (default) or ``"backprop"``.
        dtype: complex64 (default) or complex128; ``.double()`` / ``.to(device)`` also work.
        block_wires: width of the GEMM blocks of the ⊗RX mixer (default
            :data:`DEFAULT_BLOCK_WIRES`); the real route counts the re/im axis as one more wire
            and uses blocks of ``block_wires`` or ``block_wires + 1`` axes.
        symmetry: let the adjoint path simulate only half the register when the cost and the
            start state are invariant under flipping all bits (X mixer; MaxCut, partitioning, Ising
            without fields). Exact; ``False`` simulates the full register; ``None`` (default) is
            ``True`` for the X mixer. Must be a bool or None. With the XY and swap mixers, which
            use neither, ``block_wires`` and ``symmetry=True`` raise a ValueError; the warm-start
            mixer uses ``block_wires`` (its rotations are GEMMs over wire blocks too) but refuses
            ``symmetry=True`` (its start state is not flip-invariant).
        mixer_kernel: how the adjoint path applies the X mixer: ``"real"`` (default; real GEMMs in
            the frame where RX is the real rotation RY) or ``"complex"`` (complex GEMMs, the former
            route). Both are exact; see :data:`MIXER_KERNELS`. The warm-start mixer takes the
            complex route only (its default; ``"real"`` raises a ValueError).
        warm_start: with ``mixer="warm"`` only (and required there): the warm start ``c`` — a
            bitstring, ``n`` probabilities of bit 1, ``(G, n)`` for a batch of G problems, or a
            :class:`~.goemans_williamson.GoemansWilliamsonResult` (its best cut); see :mod:`.warm_start`.
            ``initial_state="auto"`` is then the warm-start product state.
        epsilon: the regularisation of the warm start, ``c ← clip(c, ε, 1 - ε)``, in [0, 0.5]
            (default 0.25; ``mixer="warm"`` only).
    """

    def __init__(self, problem, p: int, mixer: str = "x", initial_state="auto",
                 diff_method: str = "adjoint", dtype=None, device=None,
                 block_wires: Optional[int] = None, symmetry: Optional[bool] = None,
                 mixer_kernel: Optional[str] = None, warm_start=None, epsilon: Optional[float] = None):
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
        symmetry, self.block_wires, self.mixer_kernel = _check_mixer_options(what, mixer, block_wires, symmetry,
                                                                             mixer_kernel)
        self._warm64 = self.warm_start = self.epsilon = None
        if mixer == "warm":
            if warm_start is None:
                raise ValueError(f"{what}: mixer='warm' needs warm_start= (a bitstring, n probabilities of bit 1 "
                                 f"or a goemans_williamson() result); see optimization.warm_start")
            self.epsilon = DEFAULT_EPSILON if epsilon is None else epsilon
            self._warm64 = warm_start_probabilities(warm_start, n, self.epsilon, len(probs), what)
            self.warm_start = self._warm64.clone()                             # (1 or G, n), regularised
        elif warm_start is not None or epsilon is not None:
            raise ValueError(f"{what}: warm_start / epsilon set the warm-start mixer; mixer={mixer!r} does not use "
                             f"them (use mixer='warm')")
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
        else:                                   # the warm-start blocks are the steps (no symmetry)
            self._xsizes = [len(wires) for _, wires in self._steps] if self.mixer == "warm" else []
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

    # read on every op of a sweep: straight from the buffer dict (nn.Module.__getattr__ is slow)
    @property
    def dtype(self) -> torch.dtype:
        return _COMPLEX_OF[self._buffers["_real_marker"].dtype]

    @property
    def device(self) -> torch.device:
        return self._buffers["_real_marker"].device

    @property
    def hamiltonian(self):
        return self.problems[0].hamiltonian

    def extra_repr(self) -> str:
        warm = f", epsilon={self.epsilon}" if self.mixer == "warm" else ""
        return (f"problem={self.problems[0].name}, n_qubits={self.n_qubits}, p={self.p}, mixer={self.mixer!r}{warm}, "
                f"graphs={self.n_graphs}, diff_method={self.diff_method!r}, bit-flip symmetry={self._z2}")

    @property
    def uses_symmetry(self) -> bool:
        """True when the adjoint path simulates only the wire-0 = 0 half (see ``symmetry``)."""
        return self._z2

    def release_workspace(self):
        """Free the buffers kept between calls (they make repeated large runs fast)."""
        self._pool.clear()

    # -- forward -----------------------------------------------------------------------------------
    def forward(self, angles, output: str = "cost", diff_method: Optional[str] = None):
        """Expected costs ``(S,)`` (``output="cost"``), final states ``(S, 2**n)`` (``"state"``) or
        probabilities ``(S, 2**n)`` (``"probabilities"``); ``(G, S, …)`` for a batch of problems."""
        if output not in ("cost", "state", "probabilities"):
            raise ValueError(f"qaoa: output must be 'cost', 'state' or 'probabilities', got {output!r}")
        method = self.diff_method if diff_method is None else diff_method
        if method not in DIFF_METHODS:
            raise ValueError(f"qaoa: diff_method must be one of {DIFF_METHODS}, got {method!r}")
        if method == "adjoint" and transforms_active():
            if output != "cost":
                raise ValueError(f"qaoa: output={output!r} under torch.func transforms needs diff_method='backprop' "
                                 f"(the adjoint method gives costs)")
            from .qaoa_transforms import cost
            return cost(self, angles if isinstance(angles, torch.Tensor) else torch.as_tensor(
                angles, dtype=REAL_OF[self.dtype]))
        gam, bet, shape, S, rows = self._angles(angles, with_rows=True)
        B = gam.shape[0]
        check_allocation(self.n_qubits, B, self.dtype, self.device)
        want_state = output != "cost"
        circ = self._small_circuit(B) if (method == "adjoint" and not want_state) else None
        if circ is not None:
            # a few starts on a small register: the same QAOA as ONE native gate program per pass
            out = circuit_expval(circ, self.problems[0].hamiltonian, x=rows,
                                 diff_method="backprop")
            return out.reshape(shape)
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

    def _small_circuit(self, B: int):
        """The :meth:`circuit` of this QAOA when the adjoint sweep would lose to it, else None.

        For ``B`` rows of ``2^n`` amplitudes with ``B · 2^n <= CIRCUIT_ROUTE_MAX_AMPLITUDES`` the
        in-place sweep is all per-op overhead (about 300 small torch ops for p = 3, each a few µs),
        while the gate-level Circuit runs each pass as one native program (kernels/program.py), a
        few dozen ops in all. Only where the two compute the same function: the default X mixer
        route (``mixer_kernel="real"``) on one problem from ``|+⟩^n``, cost output, a CPU tensor,
        the native library loaded, and a problem with an Ising form. Its values and gradients
        agree with the sweep's to rounding (tests/test_qaoa.py pins both against the oracles)."""
        if (B * 2 ** self.n_qubits > CIRCUIT_ROUTE_MAX_AMPLITUDES or self.mixer != "x"
                or self.mixer_kernel != "real" or self.n_graphs != 1 or self.device.type != "cpu"):
            return None
        key = ("small_circuit", self.dtype, self.device)
        hit = self._cache.get(key, False)
        if hit is False:
            hit = None
            N = 2 ** self.n_qubits
            plus = bool(torch.allclose(self._init64, torch.full_like(self._init64, 1 / math.sqrt(N)),
                                       atol=1e-15, rtol=0))
            if plus and native.library() is not None and self.problems[0].hamiltonian is not None:
                try:
                    with building_cache():
                        hit = qaoa_circuit(self.problems[0], self.p, dtype=self.dtype, device=self.device)
                except (ValueError, TypeError, NotImplementedError):      # no Ising form
                    hit = None
            self._cache[key] = hit
        return hit

    # -- routing through the library's Circuit ------------------------------------------------------
    def circuit(self):
        """The same QAOA as a :class:`~torchquantum_layers.Circuit` (see :func:`qaoa_circuit`); equal to
        :meth:`states` up to the global phase ``exp(-iγ c_0)`` of the constant term. Use it with
        ``tql.grad.circuit_expval(circ, qaoa.hamiltonian, x=angles, diff_method=...)`` for the
        library's backprop / adjoint / parameter-shift."""
        if self.mixer not in ("x", "warm") or self.n_graphs != 1:
            raise ValueError("circuit: only the X and warm-start mixers on a single problem are available as a "
                             "Circuit")
        init = self._init64
        if self.mixer == "warm":
            if not torch.allclose(init, _product_state(self._warm64)):
                raise ValueError("circuit: the warm-start mixer is available as a Circuit from its warm-start "
                                 "state only (initial_state='auto')")
            return warm_start_circuit(self.problems[0], self.p, self._warm64, dtype=self.dtype, device=self.device)
        if not torch.allclose(init, torch.full_like(init, 1 / math.sqrt(2 ** self.n_qubits))):
            raise ValueError("circuit: only the |+⟩ initial state is available as a Circuit")
        return qaoa_circuit(self.problems[0], self.p, dtype=self.dtype, device=self.device)


def qaoa(problem, p: int, mixer: str = "x", **kwargs) -> QAOA:
    """Build a :class:`QAOA` module for ``problem`` (or a list of problems of the same size) with
    ``p`` layers and the given ``mixer``; see :class:`QAOA` for the keyword arguments."""
    return QAOA(problem, p, mixer=mixer, **kwargs)
