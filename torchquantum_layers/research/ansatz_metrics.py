"""Ansatz descriptors that circuits are compared by (Sim, Johnson & Aspuru-Guzik, "Expressibility
and entangling capability of parameterized quantum circuits", Adv. Quantum Technol. 2, 1900070
(2019); Haug, Bharti & Kim, "Capacity and quantum geometry of parametrized quantum circuits",
PRX Quantum 2, 040309 (2021)):

* :func:`expressibility` — KL divergence of the circuit's fidelity distribution from Haar's;
* :func:`entangling_capability` — mean Meyer–Wallach measure over random parameters
  (:func:`meyer_wallach` of given states);
* :func:`parameter_dimension` — rank of the quantum Fisher information at random parameters;
* :func:`haar_fidelity_bins` / :func:`kl_to_haar` — the Haar reference and the estimator itself.

Random parameter vectors are drawn uniformly in ``[0, 2π)`` for every trainable angle (the
circuit's ``weights``), from ``generator`` (a ``torch.Generator`` or an int seed; None: torch's
global generator). All samples run as ONE batch: a copy of the circuit reads trainable angle i
from input column ``F + i`` (F = the columns the circuit already reads), so every row of the
batch has its own parameter vector; fixed input features ``x`` (one row) are repeated. Large
batches are split into chunks of at most :data:`MAX_BATCH_AMPLITUDES` amplitudes.

Expressibility estimator (Sim et al., Eq. 4): ``n_samples`` independent pairs (θ, φ) give
``F = |⟨ψ(θ)|ψ(φ)⟩|²``; their histogram over ``bins`` equal bins of [0, 1] (75, as in the paper)
is compared with the Haar distribution ``P(F) = (N−1)(1−F)^(N−2)``, ``N = 2^n``, integrated
EXACTLY over each bin: ``q_k = (1−a_k)^(N−1) − (1−b_k)^(N−1)`` (computed in logs, so no bin
underflows to 0 on many qubits). ``D_KL = Σ_k p_k ln(p_k / q_k)`` in nats over bins with
``p_k > 0``. The plug-in estimate is biased UP by finite sampling: for a circuit whose
distribution is Haar, ``2 S D_KL`` is asymptotically χ² with (occupied bins − 1) degrees of
freedom (the G-test), so its mean is about ``(K − 1) / (2 S)`` with K the occupied bins (at most
``bins − 1``: 0.0074 at 75 bins and 5000 pairs; fewer on many qubits, where the Haar fidelities
crowd near 0), reported as ``bias`` with the observed K; differences between circuits smaller
than a few times that are noise. Binning also caps the value: the idle circuit (F ≡ 1) gives ``(N−1) ln(bins)``, not ∞
(ln 75 ≈ 4.32 on one qubit, the paper's "idle" reference); and a finer binning of a continuous
distribution gives a larger value, so compare numbers at the same ``bins`` and ``n_samples``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Optional

import torch

from ..circuit import Circuit
from ..engine_transforms import weights_as_inputs
from ..kernels.state import REAL_OF

__all__ = ["expressibility", "entangling_capability", "meyer_wallach", "parameter_dimension",
           "haar_fidelity_bins", "kl_to_haar", "sample_fidelities", "weights_as_inputs", "ExpressibilityResult",
           "EntanglingResult", "ParameterDimensionResult"]

MAX_BATCH_AMPLITUDES = 2 ** 23
"""Largest number of amplitudes (rows × 2^n) one batched run holds; more samples run in chunks."""


# ------------------------------------------------------------------------------------------------
# argument checks and the batched-weights circuit
def _int_at_least(value, minimum, name, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{what}: {name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _check_circuit(circuit, what):
    if not isinstance(circuit, Circuit):
        raise TypeError(f"{what}: expected a tql.Circuit, got {type(circuit).__name__}")
    if circuit.is_noisy:
        raise ValueError(f"{what}: needs pure output states; this circuit has channels, measurements, resets "
                         f"or a noise model")


def _generator(generator, what):
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        return torch.Generator().manual_seed(int(generator))
    raise TypeError(f"{what}: generator must be a torch.Generator, an int seed or None, got "
                    f"{type(generator).__name__}")


def _fixed_row(circuit, x, what):
    """The fixed input features as one row ``(1, F)`` (None when the circuit reads none)."""
    if x is None:
        if circuit.n_inputs:
            raise ValueError(f"{what}: the circuit reads {circuit.n_inputs} input column(s); pass x (one row of "
                             f"features, held fixed while the weights are sampled)")
        return None
    x = torch.as_tensor(x)
    if x.is_complex():
        raise TypeError(f"{what}: input features must be real, got {x.dtype}")
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2 or x.shape[0] != 1:
        raise ValueError(f"{what}: x must be ONE row of features, shape (F,) or (1, F), got {tuple(x.shape)}")
    if x.shape[1] < circuit.n_inputs:
        raise ValueError(f"{what}: the circuit reads {circuit.n_inputs} input column(s) but x has {x.shape[1]}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{what}: x contains NaN or inf")
    return x.to(device=circuit.device, dtype=REAL_OF[circuit.dtype])


def _random_weights(circuit, rows, generator):
    """``(rows, P)`` angles uniform in [0, 2π), float64 on the generator's device."""
    device = generator.device if generator is not None else torch.device("cpu")
    return torch.rand(rows, circuit.num_parameters, generator=generator, dtype=torch.float64,
                      device=device) * (2 * math.pi)


def _states(circuit, x_row, weights):
    """The output states ``(rows, 2^n)`` for the weight vectors ``weights (rows, P)``, batched
    (chunks of at most MAX_BATCH_AMPLITUDES amplitudes)."""
    F = circuit.n_inputs if x_row is None else x_row.shape[1]
    batched = weights_as_inputs(circuit, F)
    real = REAL_OF[circuit.dtype]
    weights = weights.to(device=circuit.device, dtype=real)
    rows = weights.shape[0]
    chunk = max(1, MAX_BATCH_AMPLITUDES // 2 ** circuit.n_wires)
    out = []
    with torch.no_grad():
        for start in range(0, rows, chunk):
            w = weights[start:start + chunk]
            cols = [w] if x_row is None else [x_row.expand(w.shape[0], -1), w]
            out.append(batched(torch.cat(cols, 1)))
    return torch.cat(out, 0)


# ------------------------------------------------------------------------------------------------
# expressibility
def haar_fidelity_bins(n_wires: int, bins: int = 75, log: bool = False) -> torch.Tensor:
    """Haar probability of each of ``bins`` equal bins of F ∈ [0, 1] (float64 ``(bins,)``): the
    exact integral of ``(N−1)(1−F)^(N−2)``, ``(1−a)^(N−1) − (1−b)^(N−1)``, evaluated as
    ``exp((N−1) ln(1−a)) · (−expm1((N−1) ln((1−b)/(1−a))))`` so that no bin underflows; ``log``
    returns the natural logs (finite for every bin, even where the probability underflows)."""
    what = "haar_fidelity_bins"
    n_wires = _int_at_least(n_wires, 1, "n_wires", what)
    bins = _int_at_least(bins, 2, "bins", what)
    m = float(2 ** n_wires - 1)
    edges = torch.linspace(0, 1, bins + 1, dtype=torch.float64)
    la, lb = torch.log1p(-edges[:-1]), torch.log1p(-edges[1:])       # lb[-1] = −inf
    logq = m * la + torch.log(-torch.expm1(m * (lb - la)))
    return logq if log else logq.exp()


def kl_to_haar(fidelities, n_wires: int, bins: int = 75):
    """``(D_KL(P || P_Haar), P)`` of fidelity samples: P the normalised histogram over ``bins``
    equal bins of [0, 1] (values are clamped into [0, 1]; F = 1 counts in the last bin)."""
    what = "kl_to_haar"
    bins = _int_at_least(bins, 2, "bins", what)
    f = torch.as_tensor(fidelities).detach().to("cpu", torch.float64).reshape(-1)
    if f.numel() < 2:
        raise ValueError(f"{what}: needs at least 2 fidelity samples, got {f.numel()}")
    if not bool(torch.isfinite(f).all()):
        raise ValueError(f"{what}: fidelities contain NaN or inf")
    idx = (f.clamp(0, 1) * bins).floor().to(torch.int64).clamp_(0, bins - 1)
    p = torch.bincount(idx, minlength=bins).to(torch.float64) / f.numel()
    logq = haar_fidelity_bins(n_wires, bins, log=True)
    nz = p > 0
    kl = float((p[nz] * (p[nz].log() - logq[nz])).sum())
    return kl, p


@dataclass
class ExpressibilityResult:
    """``kl``: D_KL(P_circuit || P_Haar) in nats (lower: more expressive); ``histogram``: P_circuit
    per bin and ``haar``: P_Haar per bin (``(bins,)``, each sums to 1) over ``edges``
    (``(bins + 1,)``): ``plt.stairs(r.histogram, r.edges)``; ``fidelities``: the ``n_samples``
    sampled fidelities; ``bias``: ``(K − 1) / (2 n_samples)`` with K the occupied bins, about the
    plug-in estimator's mean value for a Haar-distributed circuit (module notes)."""
    kl: float
    histogram: torch.Tensor
    haar: torch.Tensor
    edges: torch.Tensor
    fidelities: torch.Tensor
    n_samples: int
    bins: int
    bias: float


def sample_fidelities(circuit: Circuit, n_samples: int = 5000, generator=None, x=None) -> torch.Tensor:
    """``n_samples`` fidelities ``|⟨ψ(θ)|ψ(φ)⟩|²`` of independent uniform parameter pairs (float64
    ``(n_samples,)`` on the CPU), all ``2 n_samples`` states from one batched run."""
    what = "sample_fidelities"
    _check_circuit(circuit, what)
    n_samples = _int_at_least(n_samples, 2, "n_samples", what)
    gen = _generator(generator, what)
    x_row = _fixed_row(circuit, x, what)
    w = _random_weights(circuit, 2 * n_samples, gen)       # rows [0, S): θ, rows [S, 2S): φ
    psi = _states(circuit, x_row, w)
    a, b = psi[:n_samples], psi[n_samples:]
    overlap = (a.conj() * b).sum(-1)
    return (overlap.real.double().square() + overlap.imag.double().square()).cpu()


def expressibility(circuit: Circuit, n_samples: int = 5000, bins: int = 75, generator=None,
                   x=None) -> ExpressibilityResult:
    """Expressibility of Sim et al. (module notes): D_KL of the fidelity distribution of
    ``n_samples`` random parameter pairs from the Haar one, over ``bins`` bins (in nats: lower
    is more expressive; 0 is Haar). A circuit without trainable angles gives ``(N−1) ln(bins)``
    (every F = 1). ``x``: one row of input features, held fixed, for circuits that read them."""
    what = "expressibility"
    _check_circuit(circuit, what)
    n_samples = _int_at_least(n_samples, 2, "n_samples", what)
    bins = _int_at_least(bins, 2, "bins", what)
    f = sample_fidelities(circuit, n_samples, generator, x)
    kl, p = kl_to_haar(f, circuit.n_wires, bins)
    return ExpressibilityResult(kl=kl, histogram=p, haar=haar_fidelity_bins(circuit.n_wires, bins),
                                edges=torch.linspace(0, 1, bins + 1, dtype=torch.float64), fidelities=f,
                                n_samples=n_samples, bins=bins,
                                bias=(int((p > 0).sum()) - 1) / (2 * n_samples))


# ------------------------------------------------------------------------------------------------
# entangling capability
def meyer_wallach(state: torch.Tensor) -> torch.Tensor:
    """Meyer–Wallach entanglement ``Q = 2 (1 − (1/n) Σ_k Tr ρ_k²)`` of pure states ``(B, 2^n)``
    (or ``(2^n,)``): real ``(B,)`` (or a scalar), 0 for product states, 1 for GHZ states. ρ_k is
    the reduced state of wire k (:func:`tql.measure.reduced_density_matrix`)."""
    from ..kernels.state import n_wires_of
    from ..measure import reduced_density_matrix
    if not isinstance(state, torch.Tensor) or state.dim() not in (1, 2):
        raise ValueError(f"meyer_wallach: expected state vectors (B, 2**n) or (2**n,), got "
                         f"{type(state).__name__ if not isinstance(state, torch.Tensor) else tuple(state.shape)}")
    squeeze = state.dim() == 1
    psi = state.unsqueeze(0) if squeeze else state
    n = n_wires_of(psi)
    purity = 0
    for k in range(n):
        rho = reduced_density_matrix(psi, [k])
        purity = purity + (rho.real.square() + rho.imag.square()).sum(dim=(-1, -2))
    q = 2 * (1 - purity / n)
    return q[0] if squeeze else q


@dataclass
class EntanglingResult:
    """``mean``: the entangling capability (mean Q over the samples), ``std``: the samples'
    standard deviation, ``stderr``: the mean's standard error, ``samples``: Q per parameter
    vector (float64 ``(n_samples,)``)."""
    mean: float
    std: float
    stderr: float
    samples: torch.Tensor
    n_samples: int


def entangling_capability(circuit: Circuit, n_samples: int = 1000, generator=None, x=None) -> EntanglingResult:
    """Entangling capability of Sim et al.: the mean Meyer–Wallach measure :func:`meyer_wallach`
    over ``n_samples`` parameter vectors uniform in [0, 2π), one batched run. A circuit without
    trainable angles is refused (nothing to average: use ``meyer_wallach(circuit(x))``)."""
    what = "entangling_capability"
    _check_circuit(circuit, what)
    n_samples = _int_at_least(n_samples, 2, "n_samples", what)
    if circuit.num_parameters == 0:
        raise ValueError(f"{what}: the circuit has no trainable parameters to sample; for its one state use "
                         f"meyer_wallach(circuit(x))")
    gen = _generator(generator, what)
    x_row = _fixed_row(circuit, x, what)
    q = meyer_wallach(_states(circuit, x_row, _random_weights(circuit, n_samples, gen))).double().cpu()
    std = float(q.std(unbiased=True))
    return EntanglingResult(mean=float(q.mean()), std=std, stderr=std / math.sqrt(n_samples), samples=q,
                            n_samples=n_samples)


# ------------------------------------------------------------------------------------------------
# parameter dimension
@dataclass
class ParameterDimensionResult:
    """``dimension``: the largest QFI rank seen (Haug et al.'s parameter dimension D_C, the
    number of independent directions the parameters move the state in); ``ranks``: per random
    point; ``n_parameters``: P; ``redundancy``: ``P − dimension`` (parameters that add nothing);
    ``max_dimension``: ``2^(n+1) − 2``, the real dimension of the pure states of n qubits."""
    dimension: int
    ranks: list
    n_parameters: int
    redundancy: int
    max_dimension: int


def parameter_dimension(circuit: Circuit, n_samples: int = 5, generator=None, x=None,
                        rtol: Optional[float] = None) -> ParameterDimensionResult:
    """Rank of the quantum Fisher information (the Fubini–Study metric of
    :func:`tql.grad.metric.tangent_states`) at ``n_samples`` random parameter vectors: an
    eigenvalue counts when above ``rtol`` × the largest (default 1e-4 in complex64, 1e-9 in
    complex128). The rank is the same at almost every point; the maximum over the points is
    reported so that an unlucky degenerate point does not lower it."""
    from ..grad.metric import fubini_study, tangent_states
    what = "parameter_dimension"
    _check_circuit(circuit, what)
    n_samples = _int_at_least(n_samples, 1, "n_samples", what)
    P = circuit.num_parameters
    if P == 0:
        raise ValueError(f"{what}: the circuit has no trainable parameters")
    if rtol is None:
        rtol = 1e-4 if circuit.dtype == torch.complex64 else 1e-9
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not 0 < rtol < 1:
        raise ValueError(f"{what}: rtol must be a number in (0, 1), got {rtol!r}")
    gen = _generator(generator, what)
    x_row = _fixed_row(circuit, x, what)
    ranks = []
    # one tangent-state pass per point: P + 1 states each (the weights are shared in that pass)
    for w in _random_weights(circuit, n_samples, gen):
        psi, d = tangent_states(circuit, x_row, weights=w.to(circuit.weights))
        ev = torch.linalg.eigvalsh(fubini_study(psi, d)[0].double())
        top = float(ev.max())
        ranks.append(int((ev > rtol * top).sum()) if top > 0 else 0)
    dim = max(ranks)
    return ParameterDimensionResult(dimension=dim, ranks=ranks, n_parameters=P, redundancy=P - dim,
                                    max_dimension=2 ** (circuit.n_wires + 1) - 2)
