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
  ``loss.backward()`` works as usual; gradients match backprop. With the X mixer it works in the
  frame φ = S^{⊗n} ψ (S = diag(1, i) commutes with the cost and turns RX into the real RY), so the
  mixer is a few batched REAL GEMMs over blocks of wires of the (re, im) planes
  (``mixer_kernel="real"``; ``"complex"`` keeps the former complex-GEMM route).
* ``"backprop"``: plain autograd through out-of-place kernels (supports higher derivatives).

Angles are plain tensors: the module holds no parameters, so any optimiser (or a Lightning task)
owns them. :func:`linear_ramp`, :func:`fixed_angles`, :func:`interp`, :func:`random_angles` make
initial angles; :meth:`QAOA.analyse` reports expected cost, approximation ratio, probability of the
optimum, top-k bitstrings and seeded samples.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from ..kernels.apply import apply_matrix_unchecked, kron
from ..kernels.state import COMPLEX_DTYPES, REAL_OF, check_allocation
from .problems import MAX_EXACT_QUBITS, Problem, exact_solution

__all__ = ["QAOA", "qaoa", "qaoa_circuit", "MultiStartQAOA", "QAOAResult", "linear_ramp", "fixed_angles", "interp", "random_angles",
           "perturb", "optimize", "split_angles", "join_angles", "MIXERS", "MIXER_KERNELS", "FIXED_ANGLES_3REGULAR"]

MIXERS = ("x", "xy", "swap")
DIFF_METHODS = ("adjoint", "backprop")

# The diagonal is stored as a table of distinct values when it has at most this many (and at most
# a quarter of 2^n): the phase of a cost layer is then one gather from a (batch, levels) table.
_MAX_LEVELS = 2 ** 16
# Buffers of at least this many amplitudes are kept between calls (no page faults per step).
_POOL_MIN = 2 ** 16
# Registers (batch × amplitudes) below this size run their adjoint sweeps on one thread: their ops
# are too small to gain from threads, and each OpenMP barrier costs a scheduler time slice (~15 ms)
# when the cores are oversubscribed (measured: 1 s vs 18 ms per step for a 9-qubit TSP, 8 starts).
SINGLE_THREAD_BELOW = 2 ** 18
# The ⊗RX mixer is applied as batched GEMMs over blocks of at most this many wires (measured on
# the 2-core CPU, benchmarks/qaoa.py: 4-5 wires balance GEMM efficiency against 2^k flops).
DEFAULT_BLOCK_WIRES = 4
# How the adjoint path applies the X mixer: "real" (default) conjugates every simulated wire by
# S = diag(1, i), which turns RX into the real rotation RY and leaves the diagonal cost alone, so
# the mixer is a few REAL GEMMs on the (re, im) planes (half the flops of complex ones, and sgemm
# runs nearer the memory bound on these skinny shapes); "complex" is the former route (complex
# GEMMs), kept for comparison and as a reference.
MIXER_KERNELS = ("real", "complex")


# ------------------------------------------------------------------------------------------------
# angle helpers
def split_angles(angles: torch.Tensor, p: int):
    """``(..., 2p)`` → ``(gammas (..., p), betas (..., p))``."""
    return angles[..., :p], angles[..., p:]


def join_angles(gammas, betas) -> torch.Tensor:
    """``gammas (..., p)``, ``betas (..., p)`` → ``(..., 2p)``."""
    return torch.cat([torch.as_tensor(gammas), torch.as_tensor(betas)], dim=-1)


def _check_p(p, what) -> int:
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError(f"{what}: p (the number of QAOA layers) must be an int, got {p!r}")
    if p < 1:
        raise ValueError(f"{what}: p (the number of QAOA layers) must be >= 1, got {p}")
    return int(p)


def linear_ramp(p: int, delta: float = 0.75, dtype=torch.float64) -> torch.Tensor:
    """Linear-ramp ("TQA") initial angles ``(2p,)`` in this module's convention.

    A Trotterised anneal from the mixer to the cost: with ``t_l = (l - 1/2) / p``,
    ``γ_l = -t_l δ`` and ``β_l = (1 - t_l) δ``. (The sign of γ is negative because ``|+⟩`` is the
    *highest* eigenstate of ``Σ X``; ``(γ, β) → (-γ, -β)`` gives the same expected cost for
    real diagonal costs.) ``δ ≈ 0.75`` suits costs of order 1 per term (MaxCut); scale it by the
    inverse cost scale for other problems.
    """
    p = _check_p(p, "linear_ramp")
    t = (torch.arange(p, dtype=torch.float64) + 0.5) / p
    return torch.cat([-t * delta, (1 - t) * delta]).to(dtype)


# Wurtz & Lykov, "The fixed angle conjecture for QAOA on regular MaxCut graphs" (PRA 104, 052419,
# 2021), 3-regular graphs, in their convention C = Σ_edges (1 - Z_i Z_j)/2 (the cut),
# U = exp(-iγ C), mixer exp(-iβ Σ X): (gammas, betas, tree approximation-ratio guarantee).
FIXED_ANGLES_3REGULAR = {
    1: ((0.616,), (0.393,), 0.6925),
    2: ((0.488, 0.898), (0.555, 0.293), 0.7559),
    3: ((0.4179, 0.7921, 0.9323), (0.6003, 0.4524, 0.2351), 0.7923),
    4: ((0.4072, 0.7787, 0.9779, 1.1439), (0.5941, 0.4406, 0.3125, 0.1631), 0.8167),
}


def fixed_angles(p: int, degree: int = 3, dtype=torch.float64) -> torch.Tensor:
    """Wurtz–Lykov fixed angles for MaxCut on 3-regular graphs, ``(2p,)`` in this module's convention.

    Our cost is minus the cut, so ``γ = -γ_WL``, ``β = β_WL``. Available for p = 1 … 4; they
    guarantee the listed approximation ratio on graphs without short cycles and are a good warm
    start on any 3-regular graph.
    """
    p = _check_p(p, "fixed_angles")
    if degree != 3:
        raise ValueError(f"fixed_angles: only degree 3 is tabulated, got degree={degree!r}")
    if p not in FIXED_ANGLES_3REGULAR:
        raise ValueError(f"fixed_angles: tabulated for p = 1 … {max(FIXED_ANGLES_3REGULAR)}, got p={p}; "
                         f"use interp() to go deeper")
    g, b, _ = FIXED_ANGLES_3REGULAR[p]
    return torch.tensor([-x for x in g] + list(b), dtype=dtype)


def interp(angles: torch.Tensor) -> torch.Tensor:
    """INTERP warm start (Zhou et al., PRX 10, 021067, 2020): angles ``(..., 2p)`` optimised at depth
    p → initial angles ``(..., 2(p+1))`` for depth p+1, by linear interpolation of each of the γ and
    β schedules: ``x'_i = (i-1)/p x_{i-1} + (p-i+1)/p x_i`` for i = 1 … p+1 (x_0 = x_{p+1} = 0)."""
    a = torch.as_tensor(angles)
    if a.shape[-1] % 2 or a.shape[-1] == 0:
        raise ValueError(f"interp: angles must have an even last dimension 2p, got shape {tuple(a.shape)}")
    p = a.shape[-1] // 2

    def one(x):
        pad = torch.nn.functional.pad(x, (1, 1))              # x_0 = x_{p+1} = 0
        i = torch.arange(1, p + 2, dtype=a.dtype if a.is_floating_point() else torch.float64,
                         device=a.device)
        return (i - 1) / p * pad[..., :-1] + (p - i + 1) / p * pad[..., 1:]
    return torch.cat([one(a[..., :p]), one(a[..., p:])], dim=-1)


def random_angles(p: int, n_starts: int, generator: Optional[torch.Generator] = None,
                  gamma_range=(-math.pi / 2, 0.0), beta_range=(0.0, math.pi / 4),
                  dtype=torch.float64) -> torch.Tensor:
    """``(n_starts, 2p)`` angles uniform in the given ranges (seeded by ``generator``)."""
    p = _check_p(p, "random_angles")
    u = torch.rand(n_starts, 2 * p, generator=generator, dtype=torch.float64)
    lo = torch.tensor([gamma_range[0]] * p + [beta_range[0]] * p, dtype=torch.float64)
    hi = torch.tensor([gamma_range[1]] * p + [beta_range[1]] * p, dtype=torch.float64)
    return (lo + u * (hi - lo)).to(dtype)


def perturb(angles: torch.Tensor, n_starts: int, scale: float = 0.1,
            generator: Optional[torch.Generator] = None, keep_first: bool = True) -> torch.Tensor:
    """``n_starts`` copies of ``angles (2p,)`` with Gaussian noise of std ``scale`` (row 0 exact when
    ``keep_first``): a multi-start batch around a good initial point."""
    a = torch.as_tensor(angles, dtype=torch.float64)
    noise = torch.randn(n_starts, a.shape[-1], generator=generator, dtype=torch.float64) * scale
    if keep_first:
        noise[0] = 0
    return a.unsqueeze(0) + noise


# ------------------------------------------------------------------------------------------------
# small matrices (batched over the leading dim of beta)
def _rx2(beta: torch.Tensor, cdtype) -> torch.Tensor:
    """RX(2β) = exp(-iβX): (B, 2, 2)."""
    c = torch.cos(beta).to(cdtype)
    ms = (torch.sin(beta) * -1j).to(cdtype)
    return torch.stack([c, ms, ms, c], dim=-1).unflatten(-1, (2, 2))


def _kron_power(m: torch.Tensor, k: int) -> torch.Tensor:
    out = m
    for _ in range(k - 1):
        out = kron(out, m)
    return out


def _pair_rotation(beta: torch.Tensor, cdtype, d: int, a: int, b: int) -> torch.Tensor:
    """exp(-iβ (|a⟩⟨b| + |b⟩⟨a|)) on a d-dim space: (B, d, d)."""
    B = beta.shape[0]
    c = torch.cos(beta).to(cdtype)
    ms = (-1j * torch.sin(beta)).to(cdtype)
    eye = torch.eye(d, dtype=cdtype, device=beta.device).expand(B, d, d)
    e = torch.zeros(d, d, dtype=cdtype, device=beta.device)
    diag = e.clone()
    diag[a, a] = diag[b, b] = 1
    off = e.clone()
    off[a, b] = off[b, a] = 1
    return eye + (c - 1)[:, None, None] * diag + ms[:, None, None] * off


def _xy_matrix(beta, cdtype):
    """exp(-iβ (XX + YY)/2) on two wires: rotates |01⟩ ↔ |10⟩."""
    return _pair_rotation(beta, cdtype, 4, 1, 2)


def _swap_matrix(beta, cdtype):
    """On wires (u@t, u@t', v@t, v@t'): rotates |1001⟩ ↔ |0110⟩."""
    return _pair_rotation(beta, cdtype, 16, 0b1001, 0b0110)


def _generator(kind: str, k: int) -> torch.Tensor:
    """Hermitian generator G with U(β) = exp(-iβ G), complex128 (d, d)."""
    if kind == "x":
        d = 2 ** k
        G = torch.zeros(d, d, dtype=torch.complex128)
        i = torch.arange(d)
        for q in range(k):
            G[i, i ^ (1 << q)] = 1
        return G
    d, (a, b) = {"xy": (4, (1, 2)), "swap": (16, (0b1001, 0b0110))}[kind]
    G = torch.zeros(d, d, dtype=torch.complex128)
    G[a, b] = G[b, a] = 1
    return G


def _real_blocks(m: int, block_wires: int):
    """GEMM blocks of the real-plane register ``[w_1 … w_m, c]`` (``c`` = the re/im axis of the
    complex storage, last): ``[(axes, has_c), …]``. The last block takes ``c`` along, so that after
    the blocks have rotated through the register the planes are interleaved again and the cost
    layer stays one complex multiply."""
    a = m + 1
    # widths block_wires or block_wires + 1 rather than narrower: real sgemm on 8-wide blocks runs at
    # a quarter of the rate of 16- and 32-wide ones (measured, (16, 2^20) reals: 33 / 15 / 25 ms)
    q = max(1, a // block_wires)
    if a > q * (block_wires + 1):
        q = math.ceil(a / (block_wires + 1))
    sizes = [a // q + (1 if i < a % q else 0) for i in range(q)]
    return [(k, i == q - 1) for i, k in enumerate(sizes)]


def _ry2(beta: torch.Tensor, rdtype) -> torch.Tensor:
    """S RX(2β) S† = RY(2β) = [[cos β, -sin β], [sin β, cos β]]: (B, 2, 2) real."""
    c, s = torch.cos(beta).to(rdtype), torch.sin(beta).to(rdtype)
    return torch.stack([c, -s, s, c], dim=-1).unflatten(-1, (2, 2))


def _real_block_matrix(r: torch.Tensor, k: int, has_c: bool) -> torch.Tensor:
    """RY^{⊗(k - has_c)} (⊗ I_2 on the re/im axis): (B, 2^k, 2^k) real."""
    w = k - int(has_c)
    M = _kron_power(r, w) if w else torch.ones(r.shape[0], 1, 1, dtype=r.dtype, device=r.device)
    if has_c:
        M = kron(M, torch.eye(2, dtype=r.dtype, device=r.device))
    return M


_RGEN_CACHE: dict = {}


def _real_block_generator(k: int, has_c: bool, dtype, device) -> torch.Tensor:
    """K = Σ_w J_w (⊗ I_2), J = [[0, -1], [1, 0]] = d RY(2β)/dβ at β = 0: (2^k, 2^k) real."""
    key = (k, has_c, dtype, str(device))
    K = _RGEN_CACHE.get(key)
    if K is None:
        w = k - int(has_c)
        d = 2 ** w
        K = torch.zeros(d, d, dtype=torch.float64)
        j = torch.arange(d)
        for q in range(w):
            bit = 1 << q
            up = (j & bit) == 0
            K[(j | bit)[up], j[up]] = 1.0
            K[(j & ~bit)[~up], j[~up]] = -1.0
        if has_c:
            K = kron(K, torch.eye(2, dtype=torch.float64))
        K = K.to(device=device, dtype=dtype)
        _RGEN_CACHE[key] = K
    return K


def _i_power(k: torch.Tensor) -> torch.Tensor:
    """i^k elementwise for integer k: complex128."""
    table = torch.tensor([1, 1j, -1, -1j], dtype=torch.complex128)
    return table[k % 4]


def _popcount(N: int) -> torch.Tensor:
    j = torch.arange(N)
    pc = torch.zeros(N, dtype=torch.int64)
    for q in range(max(1, (N - 1).bit_length())):
        pc += (j >> q) & 1
    return pc


def _level_table(diags: torch.Tensor):
    """(levels (K,) float64, index (G, N) int64) when the costs take few distinct values, else
    (None, None). Integer costs are binned in O(N) (levels = min … max); other costs are sorted
    only up to 2^22 entries."""
    N = diags.shape[-1]
    cap = min(_MAX_LEVELS, max(16, N // 4))
    lo, hi = float(diags.min()), float(diags.max())
    if bool(torch.equal(diags, diags.round())) and hi - lo + 1 <= cap:
        levels = torch.arange(lo, hi + 1, dtype=torch.float64)
        return levels, (diags - lo).to(torch.int64)
    if diags.numel() <= 2 ** 22:
        vals, inv = torch.unique(diags, return_inverse=True)
        if vals.numel() <= cap:
            return vals, inv.reshape(diags.shape)
    return None, None


def _flip_symmetric(t: torch.Tensor) -> bool:
    """Whether every row satisfies t[j] == t[2^n - 1 - j] (invariance under flipping all bits)."""
    scale = max(1.0, float(t.abs().max()))
    return bool(((t - t.flip(-1)).abs() <= 1e-12 * scale).all())


def _im_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Im Σ_j conj(a_bj) b_bj per row from one (2 × N)(N × 2) real product: (B,)."""
    B, N = a.shape
    R = torch.bmm(torch.view_as_real(a).transpose(1, 2), torch.view_as_real(b))     # (B, 2, 2)
    return R[:, 0, 1] - R[:, 1, 0]


def _re_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Re Σ_j conj(a_bj) b_bj per row, without temporaries: (B,) real."""
    B, N = a.shape
    ar = torch.view_as_real(a).reshape(B, 1, 2 * N)
    br = torch.view_as_real(b).reshape(B, 2 * N, 1)
    return torch.bmm(ar, br).view(B)


class _threads:
    """Temporarily run torch on ``n`` threads (no-op when n is None or already the setting)."""

    def __init__(self, n):
        self.n, self.old = n, None

    def __enter__(self):
        if self.n is not None and torch.get_num_threads() != self.n:
            self.old = torch.get_num_threads()
            torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        if self.old is not None:
            torch.set_num_threads(self.old)
        return False


class _Pool:
    """Reusable big buffers (allocating 100s of MB per step costs page faults on every call)."""

    def __init__(self, limit: int = 8):
        self.free: dict = {}
        self.limit = limit

    def take(self, shape, dtype, device) -> torch.Tensor:
        key = (tuple(shape), dtype, torch.device(device))
        lst = self.free.get(key)
        if lst:
            return lst.pop()
        return torch.empty(shape, dtype=dtype, device=device)

    def give(self, *tensors):
        for t in tensors:
            if t is None or t.numel() < _POOL_MIN:
                continue
            key = (tuple(t.shape), t.dtype, t.device)
            lst = self.free.setdefault(key, [])
            if len(lst) < self.limit and all(x.data_ptr() != t.data_ptr() for x in lst):
                lst.append(t)

    def clear(self):
        self.free.clear()


# ------------------------------------------------------------------------------------------------
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

    def __repr__(self) -> str:
        def fmt(t):
            return "None" if t is None else (f"{float(t):.4f}" if t.numel() == 1 else
                                             f"tensor(shape={tuple(t.shape)})")
        return (f"QAOAResult(expected_cost={fmt(self.expected_cost)}, approximation_ratio="
                f"{fmt(self.approximation_ratio)}, optimum_probability={fmt(self.optimum_probability)}, "
                f"best={self.best})")


class QAOA(nn.Module):
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
            without fields). Exact; ``False`` simulates the full register.
        mixer_kernel: how the adjoint path applies the X mixer: ``"real"`` (default; real GEMMs in
            the frame where RX is the real rotation RY) or ``"complex"`` (complex GEMMs, the former
            route). Both are exact; see :data:`MIXER_KERNELS`.
    """

    def __init__(self, problem, p: int, mixer: str = "x", initial_state="auto",
                 diff_method: str = "adjoint", dtype=None, device=None,
                 block_wires: Optional[int] = None, symmetry: bool = True, mixer_kernel: str = "real"):
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
        self._z2 = (bool(symmetry) and self.mixer == "x" and n >= 2 and _flip_symmetric(diags)
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

    # -- adjoint path (in place) ---------------------------------------------------------------------
    def _phase_into(self, gamma, out: torch.Tensor, conj: bool = False, fast: Optional[bool] = None):
        """Write exp(∓iγ_b C_j) into ``out`` (B, N) without temporaries of that size."""
        c = self._consts()
        B, G, N = gamma.shape[0], self.n_graphs, out.shape[1]
        sign = 1.0 if conj else -1.0
        if fast is None:
            fast = self._real_route
        if "levels" in c:
            ang = sign * gamma.to(torch.float64)[:, None] * c["levels"][None, :]
            tab = torch.polar(torch.ones_like(ang), ang).to(out.dtype)
            if G == 1 and fast:
                # gather with a broadcast index: 3x faster than index_select on the CPU (measured,
                # (16, 2^19) complex64: 6 ms vs 21 ms), which ran once per row
                torch.gather(tab, 1, c["index_s"][0].expand(B, N), out=out)
            elif G == 1:
                torch.index_select(tab, 1, c["index_s"][0], out=out)
            else:
                K = tab.shape[1]
                torch.gather(tab.view(G, B // G, K), 2, c["index_s"].unsqueeze(1).expand(G, B // G, N),
                             out=out.view(G, B // G, N))
            return out
        r = torch.view_as_real(out)                                               # (B, N, 2)
        im = r[..., 1]
        torch.mul((sign * gamma).view(G, B // G, 1), c["d_s"].unsqueeze(1), out=im.view(G, B // G, N))
        torch.cos(im, out=r[..., 0])
        im.sin_()
        return out

    def _x_blocks(self):
        return self._xsizes

    @property
    def _real_route(self) -> bool:
        return self.mixer == "x" and self.mixer_kernel == "real"

    def _threads_for(self, batch: int):
        """Thread count for an adjoint sweep over ``batch`` rows (None = leave torch's setting)."""
        if self.device.type != "cpu" or batch * self._sim_size >= SINGLE_THREAD_BELOW:
            return None
        return 1

    @property
    def _sim_size(self) -> int:
        return 2 ** self.n_qubits // (2 if self._z2 else 1)

    def _state_out(self, phi: torch.Tensor) -> torch.Tensor:
        """The caller's (B, 2^n) state from the simulated register (undoing the real route's frame)."""
        if self._real_route:
            phi = phi * self._consts()["frame_c"]
        return self._full_state(phi)

    def _full_state(self, phi: torch.Tensor) -> torch.Tensor:
        """The (B, 2^n) state from the simulated register (the half and its reversal under symmetry)."""
        if not self._z2:
            return phi
        B, Ns = phi.shape
        out = torch.empty(B, 2 * Ns, dtype=phi.dtype, device=phi.device)
        out[:, :Ns] = phi
        out[:, Ns:] = phi.flip(1)
        return out

    def _energy_sim(self, phi: torch.Tensor) -> torch.Tensor:
        c = self._consts()
        B, Ns = phi.shape
        G = self.n_graphs
        T = self._pool.take((B, Ns), phi.dtype, phi.device)
        torch.mul(phi.view(G, B // G, Ns), c["d_s"].unsqueeze(1), out=T.view(G, B // G, Ns))
        e = self._re_dot_w(phi, T, c["ones2"], T).to(c["d_s"].dtype) if self._real_route else _re_dot(phi, T)
        self._pool.give(T)
        return 2 * e if self._z2 else e

    def _reverse(self, X, out):
        """out[b, j] = X[b, N-1-j]: the complement of every bit (one gather; torch.flip is 2x slower)."""
        key = ("rev", X.shape[1], X.device)
        idx = self._cache.get(key)
        if idx is None:
            idx = torch.arange(X.shape[1] - 1, -1, -1, device=X.device)
            self._cache[key] = idx
        return torch.index_select(X, 1, idx, out=out)

    def _wire0(self, X, T, beta, sign: float):
        """exp(∓iβ F) on the half register, F = the reversal (X on wire 0 under symmetry)."""
        B = X.shape[0]
        self._reverse(X, T)
        c = torch.cos(beta).to(X.dtype).view(B, 1)
        ms = (torch.sin(beta) * (-1j * sign)).to(X.dtype).view(B, 1)
        X.mul_(c).addcmul_(T, ms)

    def _run_inplace(self, gam, bet):
        """Forward without autograd; returns the final state in a pool buffer."""
        if self._real_route:
            return self._run_inplace_real(gam, bet)
        c = self._consts()
        B, N = gam.shape[0], self._sim_size
        pool = self._pool
        X = pool.take((B, N), self.dtype, self.device)
        X.copy_(self._rows(c["init_s"], B))
        P = pool.take((B, N), self.dtype, self.device)
        Y = pool.take((B, N), self.dtype, self.device) if self.mixer == "x" else None
        for l in range(self.p):
            X.mul_(self._phase_into(gam[:, l], P))
            if self.mixer == "x":
                X, Y = self._x_layer(X, Y, bet[:, l])
                if self._z2:
                    self._wire0(X, P, bet[:, l], 1.0)
            else:
                X = self._generic_layer(X, bet[:, l], inverse=False)
        pool.give(P, Y)
        return X

    def _x_layer(self, X, Y, beta, inverse: bool = False):
        """⊗RX(2β) on all wires: per block of k wires one batched GEMM that applies the block to the
        first k wires and moves them to the end (after all blocks the order is restored).
        ``inverse``: the adjoint, blocks in reverse (last k wires back to the front)."""
        B, N = X.shape
        m1 = _rx2(beta, self.dtype)
        mats = {}
        sizes = self._x_blocks()
        order = reversed(sizes) if inverse else sizes
        for k in order:
            d = 2 ** k
            if k not in mats:
                M = _kron_power(m1, k)
                mats[k] = M.conj() if inverse else M.transpose(1, 2).contiguous()
            if inverse:
                # X holds (B, L, d) with the block last: Y (B, d, L) = M^H X^T
                torch.bmm(mats[k], X.view(B, N // d, d).transpose(1, 2), out=Y.view(B, d, N // d))
            else:
                torch.bmm(X.view(B, d, N // d).transpose(1, 2), mats[k], out=Y.view(B, N // d, d))
            X, Y = Y, X
        return X, Y

    # -- the real route of the X mixer (see MIXER_KERNELS) -----------------------------------------
    def _run_inplace_real(self, gam, bet):
        """Forward in the frame φ = Dψ; returns φ in a pool buffer. Wire 0's rotation (half
        register) is fused with the next layer's cost phase, φ ← (c P) ⊙ φ + (s κσ P) ⊙ reverse(φ):
        the cos/sin and the signs ride in the gathered phase tables, which saves the sign multiply,
        a scaling pass and the separate phase multiply."""
        c = self._consts()
        B, N = gam.shape[0], self._sim_size
        pool = self._pool
        take = lambda: pool.take((B, N), self.dtype, self.device)      # noqa: E731
        X, P, Y = take(), take(), take()
        T = take() if self._z2 else None
        torch.mul(self._rows(c["init_f"], B), self._phase_into(gam[:, 0], P, fast=True), out=X)
        for l in range(self.p):
            X, Y = self._ry_layer(X, Y, bet[:, l])
            if not self._z2:
                if l + 1 < self.p:
                    X.mul_(self._phase_into(gam[:, l + 1], P, fast=True))
            elif l + 1 < self.p:
                torch.gather(X, 1, c["rev"].expand(B, N), out=T)
                self._w0_phase(gam[:, l + 1], bet[:, l], P, Y, conj=False)
                X.mul_(P).addcmul_(T, Y)
            else:
                self._wire0_real(X, P, bet[:, l], 1.0)
        pool.give(P, Y, T)
        return X

    def _w0_phase(self, gamma, beta, Q1, Q2, conj: bool):
        """Q1 = cos β · exp(∓iγC), Q2 = ±sin β · κσ · exp(∓iγC) (upper signs: forward), so that
        exp(∓iγC) after / before wire 0's rotation is Q1 ⊙ φ + Q2 ⊙ reverse(φ)."""
        c = self._consts()
        B, G, N = gamma.shape[0], self.n_graphs, Q1.shape[1]
        cb = torch.cos(beta).to(torch.float64)[:, None]
        sb = torch.sin(beta).to(torch.float64)[:, None] * (-1.0 if conj else 1.0)
        if "levels" in c:
            sign = 1.0 if conj else -1.0
            ang = sign * gamma.to(torch.float64)[:, None] * c["levels"][None, :]
            tab = torch.polar(torch.ones_like(ang), ang)                         # (B, K) c128
            K = tab.shape[1]
            t1 = (tab * cb).to(Q1.dtype)
            t2 = (tab * (sb * c["kappa"])).to(Q1.dtype)
            t2 = torch.cat([t2, -t2], dim=1)          # second half: σ = -1 (index + K)
            if G == 1:
                torch.gather(t1, 1, c["index_s"][0].expand(B, N), out=Q1)
                torch.gather(t2, 1, c["index_sig"][0].expand(B, N), out=Q2)
            else:
                torch.gather(t1.view(G, B // G, K), 2, c["index_s"].unsqueeze(1).expand(G, B // G, N),
                             out=Q1.view(G, B // G, N))
                torch.gather(t2.view(G, B // G, 2 * K), 2, c["index_sig"].unsqueeze(1).expand(G, B // G, N),
                             out=Q2.view(G, B // G, N))
            return
        self._phase_into(gamma, Q1, conj=conj, fast=True)
        torch.mul(Q1, c["ksig"], out=Q2)
        Q2.mul_(sb.to(Q1.dtype))
        Q1.mul_(cb.to(Q1.dtype))

    def _ry_mats(self, beta):
        """{(axes, has_c): Mᵀ (B, d, d)} for one layer (Mᵀ is what both sweeps multiply by)."""
        r = _ry2(beta, REAL_OF[self.dtype])
        mats = {}
        for key in self._rblocks:
            if key not in mats:
                mats[key] = _real_block_matrix(r, *key).transpose(1, 2).contiguous()
        return mats

    def _ry_layer(self, X, Y, beta):
        """RY(2β)^{⊗m} on the real planes: per block one real bmm that applies the block to the
        leading axes and moves them to the end (after all blocks the layout is restored)."""
        B, N = X.shape
        mats = self._ry_mats(beta)
        for key in self._rblocks:
            d = 2 ** key[0]
            R = 2 * N // d
            torch.bmm(torch.view_as_real(X).view(B, d, R).transpose(1, 2), mats[key],
                      out=torch.view_as_real(Y).view(B, R, d))
            X, Y = Y, X
        return X, Y

    def _wire0_real(self, X, T, beta, sign: float):
        """RX(±2β) on wire 0 in the frame (half register): X ← cos β X ± sin β κσ ⊙ reverse(X)."""
        c = self._consts()
        B, N = X.shape
        torch.gather(X, 1, c["rev"].expand(B, N), out=T)
        T.mul_(c["ksig"])
        X.mul_(torch.cos(beta).to(X.dtype).view(B, 1)).addcmul_(T, (sign * torch.sin(beta)).to(X.dtype).view(B, 1))

    def _backward_real(self, gam, bet, psi, grad_out, want_state):
        """Adjoint sweep of the real route with φ and λ stacked in one (2B, N) buffer, so that each
        un-compute (GEMM, reversal, phase) is one call over both. Per layer: the mixer blocks
        (wire 0's rotation commutes with them, so it is undone after them, fused with the cost
        phase); dL/dγ = Im⟨λ|Cφ⟩ does not change under the phase, so it is taken after it."""
        c = self._consts()
        B, N = psi.shape
        G, p = self.n_graphs, self.p
        pool, dt, dev = self._pool, self.dtype, psi.device
        Z = pool.take((2 * B, N), dt, dev)            # the saved state stays intact (retain_graph)
        Z[:B].copy_(psi)
        Lam = Z[B:]
        if want_state:
            g = grad_out.reshape(B, -1)
            if self._z2:
                torch.add(g[:, :N], g[:, N:].flip(1), out=Lam)
            else:
                Lam.copy_(g)
            Lam.mul_(c["frame"])                      # ψ = D̄ φ, so dL/dφ* = D dL/dψ*
        else:
            torch.mul(Z[:B].view(G, B // G, N), c["d_s"].unsqueeze(1), out=Lam.view(G, B // G, N))
            Lam.mul_(((4 if self._z2 else 2) * grad_out.reshape(B, 1)).to(Lam.dtype))
        T = pool.take((2 * B, N), dt, dev)
        Y = pool.take((2 * B, N), dt, dev)
        dgam = torch.zeros(B, p, dtype=torch.float64, device=dev)
        dbet = torch.zeros(B, p, dtype=torch.float64, device=dev)
        for l in reversed(range(p)):
            Z, Y, g = self._ry_layer_backward(Z, Y, bet[:, l])
            # Y is free scratch from here to the next layer's GEMMs
            if self._z2:
                # wire 0: dL/dβ += Re⟨λ|Kφ⟩, K = κσ reverse (taken anywhere in the mixer: K
                # commutes with every RY), then φ, λ ← exp(+iγC) (cos β - sin β K) (·)
                torch.gather(Z, 1, c["rev"].expand(2 * B, N), out=T)
                if "ksig_w" in c:
                    g = g + self._re_dot_w(Z[B:], T[:B], c["ksig_w"], Y[:B])
                else:
                    g = g + self._re_dot_w(Z[B:], torch.mul(T[:B], c["ksig"], out=Y[B:]), c["ones2"], Y[:B])
                Q1, Q2 = Y[:B], Y[B:]
                self._w0_phase(gam[:, l], bet[:, l], Q1, Q2, conj=True)
                Z.view(2, B, N).mul_(Q1).addcmul_(T.view(2, B, N), Q2)
            else:
                self._phase_into(gam[:, l], Y[:B], conj=True, fast=True)
                Z.view(2, B, N).mul_(Y[:B])
            dbet[:, l] = g
            # cost layer: dL/dγ = Re⟨λ|-iC|φ⟩
            W = Y[:B]
            torch.mul(Z[:B].view(G, B // G, N), c["mid_s"].unsqueeze(1), out=W.view(G, B // G, N))
            dgam[:, l] = self._re_dot_w(Z[B:], W, c["ones2"], W)
        pool.give(T, Y, Z)
        return dgam, dbet

    @staticmethod
    def _re_dot_w(a, b, w, scratch):
        """Σ_j w_j Re(conj(a_bj) b_bj) per row (w: interleaved real weights (2N,)), as one real-plane
        product and one GEMV: 2x faster than a (1 × 2N)(2N × 1) bmm on the CPU, and a product with
        a conj() operand would take torch's 5x slower conjugate path."""
        B, N = a.shape
        sr = torch.view_as_real(scratch).view(B, 2 * N)
        torch.mul(torch.view_as_real(a).view(B, 2 * N), torch.view_as_real(b).view(B, 2 * N), out=sr)
        return torch.mv(sr, w).to(torch.float64)

    def _ry_layer_backward(self, Z, Y, beta):
        """Reverse of _ry_layer on the stacked [φ; λ], accumulating dL/dβ = Σ_blocks ⟨λ|K|φ⟩ from
        the Gram matrix Λᵀ Φ of each block (d × d, the block's axes trailing)."""
        B2, N = Z.shape
        B = B2 // 2
        rdt = REAL_OF[self.dtype]
        mats = self._ry_mats(beta)
        mats2 = {}
        grad = torch.zeros(B, dtype=torch.float64, device=Z.device)
        for key in reversed(self._rblocks):
            d = 2 ** key[0]
            R = 2 * N // d
            if key not in mats2:
                mats2[key] = torch.cat([mats[key], mats[key]])
            zr = torch.view_as_real(Z).view(B2, R, d)
            gram = torch.bmm(zr[B:].transpose(1, 2), zr[:B])
            grad += (gram * _real_block_generator(*key, rdt, Z.device)).sum((1, 2)).to(torch.float64)
            torch.bmm(mats2[key], zr.transpose(1, 2), out=torch.view_as_real(Y).view(B2, d, R))
            Z, Y = Y, Z
        return Z, Y, grad

    def _generic_layer(self, X, beta, inverse: bool):
        n = self.n_qubits
        mats = {}
        steps = reversed(self._steps) if inverse else self._steps
        for kind, wires in steps:
            key = (kind, len(wires))
            if key not in mats:
                M = self._step_matrix(kind, len(wires), beta)
                mats[key] = M.conj().transpose(1, 2) if inverse else M
            X = apply_matrix_unchecked(X, mats[key], wires, n)
        return X

    def _backward(self, gam, bet, psi, grad_out, want_state):
        """Adjoint sweep: returns (dγ (B, p), dβ (B, p)) in float64."""
        if self._real_route:
            return self._backward_real(gam, bet, psi, grad_out, want_state)
        c = self._consts()
        B, N = psi.shape
        G, p = self.n_graphs, self.p
        pool = self._pool
        dt = self.dtype
        Psi = pool.take((B, N), dt, psi.device)          # the saved state stays intact (retain_graph)
        Psi.copy_(psi)
        Lam = pool.take((B, N), dt, psi.device)
        if want_state:
            g = grad_out.reshape(B, -1)
            if self._z2:                      # ψ = [φ, reverse(φ)]: the gradient of φ collects both halves
                torch.add(g[:, :N], g[:, N:].flip(1), out=Lam)
            else:
                Lam.copy_(g)
        else:
            # dE/dψ* convention of torch: grad = 2 g C ψ (E = 2 Σ_half C |φ|² under symmetry)
            torch.mul(Psi.view(G, B // G, N), c["d_s"].unsqueeze(1), out=Lam.view(G, B // G, N))
            Lam.mul_(((4 if self._z2 else 2) * grad_out.reshape(B, 1)).to(Lam.dtype))
        P = pool.take((B, N), dt, psi.device)
        spare = [pool.take((B, N), dt, psi.device), pool.take((B, N), dt, psi.device)] \
            if self.mixer == "x" else None
        dgam = torch.zeros(B, p, dtype=torch.float64, device=psi.device)
        dbet = torch.zeros(B, p, dtype=torch.float64, device=psi.device)
        for l in reversed(range(p)):
            if self.mixer == "x":
                g0 = 0
                if self._z2:
                    # wire 0 (applied last): dL/dβ += Im⟨λ|Fψ⟩, then un-compute ψ and λ
                    self._reverse(Psi, P)
                    g0 = _im_dot(Lam, P).to(torch.float64)
                    cb = torch.cos(bet[:, l]).to(dt).view(B, 1)
                    isb = (torch.sin(bet[:, l]) * 1j).to(dt).view(B, 1)
                    Psi.mul_(cb).addcmul_(P, isb)
                    self._reverse(Lam, P)
                    Lam.mul_(cb).addcmul_(P, isb)
                Psi, Lam, g = self._x_layer_backward(Psi, Lam, spare, bet[:, l])
                g = g + g0
            else:
                Psi, Lam, g = self._generic_layer_backward(Psi, Lam, bet[:, l])
            dbet[:, l] = g
            # cost layer: dL/dγ = Re⟨λ|-iC|ψ⟩ (the same before or after the layer)
            torch.mul(Psi.view(G, B // G, N), c["mid_s"].unsqueeze(1), out=P.view(G, B // G, N))
            dgam[:, l] = _re_dot(Lam, P).to(torch.float64)
            if l:                                   # (the first layer's input is never needed)
                self._phase_into(gam[:, l], P, conj=True)
                Psi.mul_(P)
                Lam.mul_(P)
        pool.give(P, Lam, Psi, *(spare or []))
        return dgam, dbet

    def _x_layer_backward(self, Psi, Lam, spare, beta):
        """Reverse of _x_layer for ψ and λ, accumulating dL/dβ = Σ_blocks Im⟨λ|G_k|ψ⟩."""
        B, N = Psi.shape
        m1 = _rx2(beta, self.dtype)
        grad = torch.zeros(B, dtype=torch.float64, device=Psi.device)
        mats = {}
        S1, S2 = spare
        for k in reversed(self._x_blocks()):
            d = 2 ** k
            L = N // d
            if k not in mats:
                mats[k] = _kron_power(m1, k).conj()
            # Im⟨λ|G|ψ⟩ = Σ_r Σ_ij G_ij Im(conj(λ_ri) ψ_rj) over rows r (block index last). On real
            # planes (a conj operand would make bmm copy the state): R = Λᵀ Ψ over interleaved
            # (re, im) columns, Im(conj(λ_i) ψ_j) = R[2i, 2j+1] - R[2i+1, 2j].
            c = max(1, min(L, L // 1024))
            pr = torch.view_as_real(Psi).view(B * c, L // c, 2 * d)
            lr = torch.view_as_real(Lam).view(B * c, L // c, 2 * d)
            R = torch.bmm(lr.transpose(1, 2), pr).view(B, c, d, 2, d, 2).sum(1)
            im = R[:, :, 0, :, 1] - R[:, :, 1, :, 0]                     # [b, i, j]
            grad += (im * _generator_real(k, im.device)).sum((1, 2)).to(torch.float64)
            torch.bmm(mats[k], Psi.view(B, L, d).transpose(1, 2), out=S1.view(B, d, L))
            torch.bmm(mats[k], Lam.view(B, L, d).transpose(1, 2), out=S2.view(B, d, L))
            Psi, S1 = S1, Psi
            Lam, S2 = S2, Lam
        spare[0], spare[1] = S1, S2
        return Psi, Lam, grad

    def _generic_layer_backward(self, Psi, Lam, beta):
        B, N = Psi.shape
        n = self.n_qubits
        grad = torch.zeros(B, dtype=torch.float64, device=Psi.device)
        mats = {}
        for kind, wires in reversed(self._steps):
            key = (kind, len(wires))
            if key not in mats:
                M = self._step_matrix(kind, len(wires), beta)
                Gm = _generator(kind, len(wires)).to(device=Psi.device, dtype=self.dtype)
                mats[key] = (M.conj().transpose(1, 2), -1j * Gm)
            Minv, mG = mats[key]
            # dL/dβ += Re⟨λ|-iG|ψ⟩ at the gate's output
            grad += _re_dot(Lam, apply_matrix_unchecked(Psi, mG, wires, n)).to(torch.float64)
            Psi = apply_matrix_unchecked(Psi, Minv, wires, n)
            Lam = apply_matrix_unchecked(Lam, Minv, wires, n)
        return Psi, Lam, grad

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
                generator: Optional[torch.Generator] = None) -> QAOAResult:
        """Expected cost, approximation ratio, probability of the optimum and of feasibility, the top-k
        bitstrings per start and (with ``shots``) seeded samples, for a batch of angles."""
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"analyse: k must be a positive int, got {k!r}")
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
            best = None
            if cost.numel():
                j = int(torch.argmin(cost.reshape(-1)))
                best = tuple(int(x) for x in torch.unravel_index(torch.tensor(j), cost.shape)) if cost.dim() else ()
            return QAOAResult(angles=torch.as_tensor(angles).detach(), expected_cost=cost,
                              expected_objective=obj, approximation_ratio=ratio, optimum_probability=opt_p,
                              feasible_probability=feas_p.reshape(shape), top_indices=ti.reshape(shape + (k,)),
                              top_probabilities=tp.reshape(shape + (k,)), top_bitstrings=bits,
                              samples=samples, best=best)

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


def _generator_real(k: int, device) -> torch.Tensor:
    key = (k, str(device))
    g = _GEN_CACHE.get(key)
    if g is None:
        g = _generator("x", k).real.to(device=device, dtype=torch.float32)
        _GEN_CACHE[key] = g
    return g


_GEN_CACHE: dict = {}


class _Lease:
    """Returns a pool buffer when the autograd graph holding it is freed."""

    def __init__(self, pool: _Pool, tensor: torch.Tensor):
        self.pool, self.tensor = pool, tensor

    def __del__(self):
        try:
            self.pool.give(self.tensor)
        except Exception:       # interpreter shutdown
            pass


class _AdjointQAOA(torch.autograd.Function):
    """Forward in place; backward by one reverse sweep (un-compute ψ, carry λ)."""

    @staticmethod
    def forward(ctx, gam, bet, model: QAOA, want_state: bool):
        with torch.no_grad(), _threads(model._threads_for(gam.shape[0])):
            psi = model._run_inplace(gam, bet)             # the simulated register, a pool buffer
            needs = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
            out = model._state_out(psi) if want_state else model._energy_sim(psi)
            ctx.model, ctx.want_state = model, want_state
            ctx.psi = psi if needs else None
            if out is not psi:            # psi is not handed to the caller: recycle it
                if needs:
                    ctx.lease = _Lease(model._pool, psi)
                else:
                    model._pool.give(psi)
        ctx.save_for_backward(gam, bet)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        gam, bet = ctx.saved_tensors
        with torch.no_grad(), _threads(ctx.model._threads_for(gam.shape[0])):
            dg, db = ctx.model._backward(gam.detach(), bet.detach(), ctx.psi, grad_out, ctx.want_state)
        return dg.to(gam.dtype), db.to(bet.dtype), None, None


class MultiStartQAOA(nn.Module):
    """A :class:`QAOA` plus its trainable angles: ``angles`` is an ``nn.Parameter`` of shape
    ``(S, 2p)`` (or ``(G, S, 2p)``) and ``forward()`` returns the expected costs of all starts,
    so ``model().sum().backward()`` trains every start at once (what a Lightning task wraps).

    ``init`` is a tensor of initial angles, or ``"ramp"`` (linear ramp), ``"fixed"`` (Wurtz–Lykov
    angles, 3-regular MaxCut) or ``"random"``; with a string the first start is exactly that point and
    the others are perturbed by ``noise`` (seeded by ``generator``).
    """

    def __init__(self, qaoa_module: QAOA, n_starts: int = 8, init="ramp", noise: float = 0.1,
                 generator: Optional[torch.Generator] = None):
        super().__init__()
        if not isinstance(qaoa_module, QAOA):
            raise TypeError(f"MultiStartQAOA: expected a QAOA module, got {type(qaoa_module).__name__}")
        self.qaoa = qaoa_module
        p = qaoa_module.p
        if isinstance(init, str):
            if isinstance(n_starts, bool) or not isinstance(n_starts, numbers.Integral) or n_starts < 1:
                raise ValueError(f"MultiStartQAOA: n_starts must be a positive int, got {n_starts!r}")
            if init == "ramp":
                a = perturb(linear_ramp(p), n_starts, noise, generator)
            elif init == "fixed":
                a = perturb(fixed_angles(p), n_starts, noise, generator)
            elif init == "random":
                a = random_angles(p, n_starts, generator)
            else:
                raise ValueError(f"MultiStartQAOA: init must be 'ramp', 'fixed', 'random' or a tensor, got {init!r}")
        else:
            a = torch.as_tensor(init, dtype=torch.float64)
            if a.shape[-1] != 2 * p:
                raise ValueError(f"MultiStartQAOA: initial angles need a last dimension of {2 * p}, got "
                                 f"{tuple(a.shape)}")
        real = REAL_OF[qaoa_module.dtype]
        self.angles = nn.Parameter(a.to(device=qaoa_module.device, dtype=real).clone())

    def forward(self) -> torch.Tensor:
        return self.qaoa(self.angles)

    def best(self):
        """``(angles (2p,), expected cost)`` of the start with the lowest expected cost."""
        with torch.no_grad():
            c = self.qaoa(self.angles)
            j = int(torch.argmin(c.reshape(-1)))
            return self.angles.detach().reshape(-1, self.angles.shape[-1])[j].clone(), float(c.reshape(-1)[j])

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


# ------------------------------------------------------------------------------------------------
def optimize(model: QAOA, angles, steps: int = 100, lr: Optional[float] = None, optimizer: str = "adam",
             diff_method: Optional[str] = None, callback=None):
    """Minimise the expected cost of every start in ``angles`` (``(S, 2p)`` or ``(G, S, 2p)``) at once.

    Adam on the sum of the costs is Adam on each start independently (its update is elementwise).
    ``optimizer="lbfgs"`` runs torch's L-BFGS (strong Wolfe line search) on the sum. ``lr`` defaults to
    0.05 for Adam and 1 for L-BFGS (where ``steps`` is its ``max_iter``). Returns
    ``(angles, costs)`` at the end, detached; ``callback(step, costs)`` is called every step.
    """
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"optimize: optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise ValueError(f"optimize: steps must be a non-negative int, got {steps!r}")
    a = torch.as_tensor(angles).detach().to(device=model.device, dtype=REAL_OF[model.dtype]).clone()
    a.requires_grad_(True)
    if optimizer == "adam":
        opt = torch.optim.Adam([a], lr=0.05 if lr is None else lr)
        for step in range(steps):
            opt.zero_grad()
            costs = model(a, diff_method=diff_method)
            costs.sum().backward()
            opt.step()
            if callback is not None:
                callback(step, costs.detach())
    else:
        opt = torch.optim.LBFGS([a], lr=1.0 if lr is None else lr, max_iter=steps, line_search_fn="strong_wolfe",
                                tolerance_grad=1e-9, tolerance_change=1e-12)

        def closure():
            opt.zero_grad()
            c = model(a, diff_method=diff_method)
            loss = c.sum()
            loss.backward()
            if callback is not None:
                callback(None, c.detach())
            return loss
        if steps:
            opt.step(closure)
    with torch.no_grad():
        final = model(a, diff_method=diff_method)
    return a.detach(), final.detach()
