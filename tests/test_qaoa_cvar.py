"""CVaR objective of QAOA (optimization/cvar.py, QAOA.cvar, optimize(objective="cvar"), QAOATask).

Oracles written here, none of them the code under test:
* a dense NumPy QAOA state (phases exp(-iγC) from MaxCut costs counted over all bitstrings, the X
  mixer as a Kronecker product of RX(2β), the XY mixer as exp(-iβH) of the dense XX+YY Hamiltonian
  from numpy.linalg.eigh);
* the CVaR of a distribution by the Rockafellar–Uryasev formula
  CVaR_α = max_t { t - E[(t - C)_+] / α } (maximum over the distinct costs t), which never sorts;
* the analytic gradient dCVaR/dq_i = (c_i - VaR) / α on the states cheaper than the VaR;
* torch.autograd.gradcheck in float64 / complex128, the asymptotic standard error of the shot
  estimate, and a brute-force grid over (γ, β) for the optimiser comparison.
"""
import itertools
import math

import numpy as np
import pytest
import torch

from torchquantum_layers import optimization as opt
from torchquantum_layers.optimization.cvar import (cost_order, cvar_from_probabilities, cvar_from_samples,
                                                   tail_size)

from .conftest import ATOL, REAL

PADDLE = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]
WEIGHTED5 = [(0, 1, 1.0), (1, 2, 2.0), (2, 3, 1.0), (3, 4, 3.0), (4, 0, 1.0), (0, 2, 2.0)]


# ------------------------------------------------------------------------------------------------
# independent references
def maxcut_costs(n, edges):
    """C(x) = -(cut weight) for every bitstring, wire 0 the most significant bit."""
    out = np.zeros(2 ** n)
    for bits in itertools.product([0, 1], repeat=n):
        cut = sum((e[2] if len(e) == 3 else 1.0) for e in edges if bits[e[0]] != bits[e[1]])
        out[int("".join(map(str, bits)), 2)] = -cut
    return out


def pauli_on(n, ops):
    """Dense ⊗ of 2x2 matrices, ``ops`` = {wire: matrix}, identity elsewhere."""
    m = np.array([[1.0 + 0j]])
    for w in range(n):
        m = np.kron(m, ops.get(w, np.eye(2)))
    return m


X = np.array([[0, 1], [1, 0]], dtype=complex)
Y = np.array([[0, -1j], [1j, 0]])


def expm_hermitian(h, t):
    """exp(-i t h) by exact diagonalisation."""
    w, v = np.linalg.eigh(h)
    return (v * np.exp(-1j * t * w)) @ v.conj().T


def dense_state(costs, angles, psi0=None, mixer_h=None):
    """exp(-iβ_p B) exp(-iγ_p C) … ψ0, angles = [γ_1…γ_p, β_1…β_p]; B = Σ X_j unless ``mixer_h``."""
    costs = np.asarray(costs, float)
    N = costs.size
    n = int(round(math.log2(N)))
    p = len(angles) // 2
    psi = np.full(N, N ** -0.5, dtype=complex) if psi0 is None else np.asarray(psi0, complex)
    B = sum(pauli_on(n, {j: X}) for j in range(n)) if mixer_h is None else mixer_h
    for g, b in zip(angles[:p], angles[p:]):
        psi = expm_hermitian(B, b) @ (np.exp(-1j * g * costs) * psi)
    return psi


def cvar_oracle(costs, probs, alpha):
    """Rockafellar–Uryasev: CVaR_α = max_t t - E[(t - C)_+] / α, t over the distinct costs."""
    costs, probs = np.asarray(costs, float), np.asarray(probs, float)
    ts = np.unique(costs)
    vals = ts - (probs[None, :] * np.maximum(ts[:, None] - costs[None, :], 0)).sum(1) / alpha
    return float(vals.max())


def var_oracle(costs, probs, alpha):
    """VaR_α: the smallest cost t with P(C <= t) >= α."""
    for t in np.unique(costs):
        if probs[costs <= t].sum() >= alpha:
            return float(t)
    return float(costs.max())


def tol(dtype, alpha):
    # probability rounding δq moves the CVaR by ~ Σ δq |c - VaR| / α (complex64 measured: <= 3e-6)
    return ATOL[dtype] * 4 / alpha


def angles_for(p, S, seed, dtype=torch.float64):
    return opt.perturb(opt.linear_ramp(p), S, 0.3, torch.Generator().manual_seed(seed)).to(dtype)


ALPHAS = (0.03, 0.2, 0.37, 0.75, 1.0)


# ------------------------------------------------------------------------------------------------
# exact CVaR of QAOA states
@pytest.mark.parametrize("symmetry", [True, False])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_cvar_matches_dense_oracle_x_mixer(dtype, symmetry, diff_method):
    n = 5
    costs = maxcut_costs(n, WEIGHTED5)
    pr = opt.maxcut(WEIGHTED5)
    m = opt.qaoa(pr, 2, dtype=dtype, symmetry=symmetry, diff_method=diff_method)
    assert m.uses_symmetry == symmetry
    a = angles_for(2, 3, seed=1, dtype=REAL[dtype])
    for alpha in ALPHAS:
        got = m.cvar(a, alpha)
        assert got.shape == (3,) and got.dtype == REAL[dtype]
        for s in range(3):
            probs = np.abs(dense_state(costs, a[s].double().tolist())) ** 2
            assert float(got[s]) == pytest.approx(cvar_oracle(costs, probs, alpha), abs=tol(dtype, alpha))
    # a single point (2p,) gives a 0-d result
    assert m.cvar(a[0], 0.5).shape == ()


def test_alpha_one_is_the_expected_cost_and_tiny_alpha_the_best_reachable_cost(dtype, atol):
    n = 4
    costs = maxcut_costs(n, PADDLE)
    m = opt.qaoa(opt.maxcut(PADDLE), 1, dtype=dtype)
    a = torch.tensor([[0.4, 0.3], [0.9, 0.2], [0.0, 0.0]], dtype=REAL[dtype])
    torch.testing.assert_close(m.cvar(a, 1.0), m(a), atol=atol * 10, rtol=0)
    for s in range(3):
        probs = np.abs(dense_state(costs, a[s].double().tolist())) ** 2
        assert float(m.cvar(a, 1.0)[s]) == pytest.approx(float(probs @ costs), abs=atol * 10)
        # α below the probability of the cheapest state with weight: CVaR is that cost exactly
        reachable = costs[probs > 1e-3].min()
        assert float(m.cvar(a, 1e-4)[s]) == pytest.approx(reachable, abs=atol * 10)
    # at γ = β = 0 every bitstring has probability 1/16: the 1/16 cheapest mass is the max cut alone
    assert float(m.cvar(a, 1 / 16)[2]) == pytest.approx(-4.0, abs=atol * 10)
    assert float(m.cvar(a, 2 / 16)[2]) == pytest.approx(-4.0, abs=atol * 10)          # two optimal cuts
    assert float(m.cvar(a, 3 / 16)[2]) == pytest.approx((2 * -4 - 3) / 3, abs=atol * 10)


def test_xy_mixer_cvar_matches_dense_oracle(dtype):
    edges = [(0, 1), (1, 2)]
    pr = opt.graph_colouring(edges, 2)                          # 6 qubits, groups (0, 1) (2, 3) (4, 5)
    n = 6
    m = opt.qaoa(pr, 2, mixer="xy", dtype=dtype)
    costs = pr.diagonal.numpy()
    H = sum((pauli_on(n, {a: X, b: X}) + pauli_on(n, {a: Y, b: Y})) / 2 for a, b in pr.mixer_groups)
    onehot = np.array([all(sum(bits[w] for w in grp) == 1 for grp in pr.mixer_groups)
                       for bits in itertools.product([0, 1], repeat=n)], float)
    psi0 = onehot / math.sqrt(onehot.sum())
    a = torch.tensor([[0.3, 0.7, 0.5, 0.2], [0.1, 0.4, 0.9, 0.6]], dtype=REAL[dtype])
    for alpha in (0.1, 0.5, 1.0):
        got = m.cvar(a, alpha)
        for s in range(2):
            probs = np.abs(dense_state(costs, a[s].double().tolist(), psi0, H)) ** 2
            assert float(got[s]) == pytest.approx(cvar_oracle(costs, probs, alpha), abs=tol(dtype, alpha))


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_swap_mixer_cvar_of_the_module_distribution(diff_method):
    D = [[0, 2, 9, 10], [1, 0, 6, 4], [15, 7, 0, 8], [6, 3, 12, 0]]
    pr = opt.tsp(D)                                             # 9 qubits, 6 tours
    m = opt.qaoa(pr, 1, mixer="swap", dtype=torch.complex128, diff_method=diff_method)
    a = torch.tensor([[0.05, 0.6], [0.1, 1.1]], dtype=torch.float64, requires_grad=True)
    probs = m.probabilities(a.detach()).numpy()
    costs = pr.diagonal.numpy()
    got = m.cvar(a, 0.4)
    for s in range(2):
        assert float(got[s].detach()) == pytest.approx(cvar_oracle(costs, probs[s], 0.4), abs=1e-10)
    got.sum().backward()
    assert torch.isfinite(a.grad).all() and float(a.grad.abs().max()) > 0


def test_several_graphs_in_one_batch(dtype):
    g1, g2 = PADDLE, [(0, 1), (1, 2), (2, 3), (0, 3), (0, 2)]
    m = opt.qaoa([opt.maxcut(g1), opt.maxcut(g2)], 2, dtype=dtype)
    shared = angles_for(2, 3, seed=4, dtype=REAL[dtype])
    per_graph = torch.stack([shared, angles_for(2, 3, seed=5, dtype=REAL[dtype])])
    for a in (shared, per_graph):
        got = m.cvar(a, 0.3)
        assert got.shape == (2, 3)
        for g, edges in enumerate((g1, g2)):
            costs = maxcut_costs(4, edges)
            for s in range(3):
                row = (a if a.dim() == 2 else a[g])[s]
                probs = np.abs(dense_state(costs, row.double().tolist())) ** 2
                assert float(got[g, s]) == pytest.approx(cvar_oracle(costs, probs, 0.3), abs=tol(dtype, 0.3))


# ------------------------------------------------------------------------------------------------
# the function on any cost vector
def test_function_matches_oracle_and_analytic_gradient_on_random_distributions():
    rng = np.random.default_rng(0)
    costs = rng.integers(-3, 4, size=32).astype(float)          # many ties
    P = rng.dirichlet(np.ones(32) * 0.5, size=4)
    q = torch.tensor(P, requires_grad=True)
    for alpha in (0.01, 0.13, 0.5, 0.999, 1.0):
        q.grad = None
        val = cvar_from_probabilities(q, torch.tensor(costs), alpha)
        val.sum().backward()
        val = val.detach()
        for r in range(4):
            assert float(val[r]) == pytest.approx(cvar_oracle(costs, P[r], alpha), abs=1e-12)
            v = var_oracle(costs, P[r], alpha)
            # (α = 1: the expectation's gradient c; on the simplex it equals c - VaR)
            want = costs if alpha == 1 else np.where(costs < v, (costs - v) / alpha, 0.0)
            np.testing.assert_allclose(q.grad[r].numpy(), want, atol=1e-12)


def test_ties_in_cost_change_neither_value_nor_gradient():
    rng = np.random.default_rng(3)
    costs = np.array([2.0, -1.0, 0.0, -1.0, 2.0, -1.0, 0.0, 5.0])
    P = rng.dirichlet(np.ones(8), size=3)
    alpha = 0.41
    q = torch.tensor(P, requires_grad=True)
    v = cvar_from_probabilities(q, torch.tensor(costs), alpha)
    (g,) = torch.autograd.grad(v.sum(), q)
    v = v.detach()
    # relabel the basis states (a permutation that reorders every run of equal costs): the stable
    # sort then meets tied states in another order
    perm = np.array([7, 5, 4, 3, 6, 1, 0, 2])
    qp = torch.tensor(P[:, perm], requires_grad=True)
    vp = cvar_from_probabilities(qp, torch.tensor(costs[perm]), alpha)
    (gp,) = torch.autograd.grad(vp.sum(), qp)
    vp = vp.detach()
    torch.testing.assert_close(vp, v, atol=1e-14, rtol=0)
    torch.testing.assert_close(gp, g[:, perm], atol=1e-14, rtol=0)
    for r in range(3):
        assert float(v[r]) == pytest.approx(cvar_oracle(costs, P[r], alpha), abs=1e-12)
    # the cut falls inside the tied level -1 when its mass exceeds α: CVaR = -1, gradient 0
    flat = torch.tensor([[0.1, 0.3, 0.1, 0.2, 0.0, 0.2, 0.05, 0.05]], dtype=torch.float64, requires_grad=True)
    vf = cvar_from_probabilities(flat, torch.tensor(costs), 0.5)
    assert float(vf.detach()) == pytest.approx(-1.0, abs=1e-14)
    (gf,) = torch.autograd.grad(vf.sum(), flat)
    assert float(gf.abs().max()) == 0.0


def test_gradcheck_of_the_function_away_from_kinks():
    rng = np.random.default_rng(5)
    costs = torch.tensor(rng.normal(size=16))
    q = torch.tensor(rng.dirichlet(np.ones(16), size=3), requires_grad=True)
    order = cost_order(costs)
    for alpha in (0.17, 0.6):
        assert torch.autograd.gradcheck(lambda x: cvar_from_probabilities(x, order, alpha), (q,), eps=1e-7,
                                        atol=1e-7)


def test_per_problem_costs_and_multiplicity():
    rng = np.random.default_rng(7)
    c = rng.normal(size=(2, 8))
    P = rng.dirichlet(np.ones(8), size=(2, 3))
    got = cvar_from_probabilities(torch.tensor(P), torch.tensor(c), 0.3)
    assert got.shape == (2, 3)
    for g in range(2):
        for s in range(3):
            assert float(got[g, s]) == pytest.approx(cvar_oracle(c[g], P[g, s], 0.3), abs=1e-12)
    # a symmetric distribution given by its first half, each entry standing for two states
    half = rng.dirichlet(np.ones(4), size=2) / 2
    hc = rng.normal(size=4)
    full_p, full_c = np.concatenate([half, half[:, ::-1]], 1), np.concatenate([hc, hc[::-1]])
    got = cvar_from_probabilities(torch.tensor(half), torch.tensor(hc), 0.45, multiplicity=2)
    for r in range(2):
        assert float(got[r]) == pytest.approx(cvar_oracle(full_c, full_p[r], 0.45), abs=1e-12)


# ------------------------------------------------------------------------------------------------
# gradients through QAOA
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
@pytest.mark.parametrize("symmetry", [True, False])
def test_gradcheck_through_qaoa_complex128(diff_method, symmetry):
    m = opt.qaoa(opt.maxcut(WEIGHTED5), 2, dtype=torch.complex128, diff_method=diff_method, symmetry=symmetry)
    a = angles_for(2, 2, seed=2).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: m.cvar(x, 0.29), (a,), eps=1e-6, atol=1e-6)


def test_adjoint_equals_backprop_gradients(dtype):
    atol = 1e-4 if dtype == torch.complex64 else 1e-10
    for problems, mixer in (([opt.maxcut(PADDLE), opt.maxcut([(0, 1, 1.0), (1, 2, 2.0), (2, 3, 1.0), (3, 0, 2.0)])], "x"),
                            (opt.graph_colouring([(0, 1), (1, 2)], 2), "xy")):
        n_graphs = len(problems) if isinstance(problems, list) else 1
        m = opt.qaoa(problems, 2, mixer=mixer, dtype=dtype)
        a = angles_for(2, 3, seed=9, dtype=REAL[dtype])
        if n_graphs > 1:
            a = a.expand(n_graphs, 3, 4).clone()
        grads = []
        for method in ("adjoint", "backprop"):
            x = a.clone().requires_grad_(True)
            w = torch.arange(1.0, 1.0 + x[..., 0].numel(), dtype=x.dtype).reshape(x.shape[:-1])
            (m.cvar(x, 0.33, diff_method=method) * w).sum().backward()
            grads.append(x.grad)
        assert float(grads[0].abs().max()) > 1e-3
        torch.testing.assert_close(grads[0], grads[1], atol=atol, rtol=0)


# ------------------------------------------------------------------------------------------------
# shots
def test_shot_estimate_converges_within_standard_errors():
    n = 5
    costs = maxcut_costs(n, WEIGHTED5)
    m = opt.qaoa(opt.maxcut(WEIGHTED5), 1, dtype=torch.complex128)
    a = torch.tensor([[0.35, 0.45], [0.2, 0.3]], dtype=torch.float64)
    shots = 40000
    est = m.cvar(a, 0.25, shots=shots, generator=torch.Generator().manual_seed(11))
    assert est.shape == (2,)
    for s in range(2):
        probs = np.abs(dense_state(costs, a[s].tolist())) ** 2
        exact = cvar_oracle(costs, probs, 0.25)
        v = var_oracle(costs, probs, 0.25)
        # asymptotic variance of the tail mean: Var[(v - C)_+] / (α² shots)
        tail = np.maximum(v - costs, 0)
        se = math.sqrt((probs @ tail ** 2 - (probs @ tail) ** 2) / (0.25 ** 2 * shots))
        assert abs(float(est[s]) - exact) < 4 * se + 1e-12
        assert se < 0.02
    # the same generator seed gives the same estimate
    again = m.cvar(a, 0.25, shots=shots, generator=torch.Generator().manual_seed(11))
    assert torch.equal(est, again)


def test_sample_estimate_is_the_mean_of_the_lowest_ceil_alpha_shots():
    assert tail_size(0.3, 10) == 3 and tail_size(0.1 + 0.2, 10) == 4 and tail_size(1e-9, 7) == 1
    assert tail_size(1.0, 7) == 7
    v = torch.tensor([[5.0, -1.0, 3.0, 0.0, 2.0, -4.0, 1.0, 7.0, 0.5, 6.0]])
    assert float(cvar_from_samples(v, 0.3)) == pytest.approx((-4 - 1 + 0) / 3)
    assert float(cvar_from_samples(v, 1.0)) == pytest.approx(float(v.mean()))
    assert float(cvar_from_samples(v, 0.01)) == -4.0
    ints = torch.tensor([[3, 1, 2, 2]])
    assert float(cvar_from_samples(ints, 0.5)) == 1.5
    # QAOA samples mapped to costs: bitstrings of the optimum only at the cut of the distribution
    m = opt.qaoa(opt.maxcut(PADDLE), 1, dtype=torch.complex128)
    a = torch.tensor([0.0, 0.0], dtype=torch.float64)
    samples = m.sample(a, 4000, generator=torch.Generator().manual_seed(0))
    costs = torch.tensor(maxcut_costs(4, PADDLE))[samples]
    est = m.cvar(a, 0.1, shots=4000, generator=torch.Generator().manual_seed(0))
    assert float(est) == pytest.approx(float(torch.sort(costs).values[:400].mean()), abs=1e-12)


# ------------------------------------------------------------------------------------------------
# analyse and optimize
def test_analyse_reports_cvar_when_asked(dtype):
    m = opt.qaoa(opt.maxcut(PADDLE), 2, dtype=dtype)
    a = angles_for(2, 3, seed=0, dtype=REAL[dtype])
    r = m.analyse(a, cvar_alpha=0.2)
    assert r.cvar_alpha == 0.2 and r.cvar.shape == (3,)
    costs = maxcut_costs(4, PADDLE)
    for s in range(3):
        probs = np.abs(dense_state(costs, a[s].double().tolist())) ** 2
        assert float(r.cvar[s]) == pytest.approx(cvar_oracle(costs, probs, 0.2), abs=tol(dtype, 0.2))
    assert m.analyse(a).cvar is None


def grid_optimum_probabilities(costs, alpha, optimal, size=61):
    """P(optimum) at the p = 1 grid minimum of the expected cost and of CVaR_α (dense oracle)."""
    n = int(round(math.log2(costs.size)))
    best = {}
    for g in np.linspace(-1.0, 0.0, size):
        phased = np.exp(-1j * g * costs) * costs.size ** -0.5
        for b in np.linspace(0.0, math.pi / 2, size):
            rx = np.array([[math.cos(b), -1j * math.sin(b)], [-1j * math.sin(b), math.cos(b)]])
            t = phased.reshape((2,) * n)
            for axis in range(n):
                t = np.moveaxis(np.tensordot(rx, t, axes=([1], [axis])), 0, axis)
            probs = np.abs(t.reshape(-1)) ** 2
            for key, val in (("expectation", probs @ costs), ("cvar", cvar_oracle(costs, probs, alpha))):
                if key not in best or val < best[key][0]:
                    best[key] = (val, probs[optimal].sum())
    return best["expectation"][1], best["cvar"][1]


def test_cvar_objective_raises_the_optimum_probability_over_the_expectation():
    edges = opt.random_regular_graph(3, 8, seed=1)
    costs = maxcut_costs(8, edges)
    optimal = costs == costs.min()
    m = opt.qaoa(opt.maxcut(edges), 1, dtype=torch.complex128)
    # the landscape itself: P(optimum) is higher at the CVaR_0.5 minimum than at the expectation's
    p_exp, p_cvar = grid_optimum_probabilities(costs, 0.5, optimal)
    assert p_cvar > 1.05 * p_exp
    mask = torch.tensor(optimal)
    for seed in (0, 3):                    # checked with margin (ratio >= 1.08) for seeds 0-5
        a0 = angles_for(1, 4, seed)
        ae, ve = opt.optimize(m, a0, steps=60)
        ac, vc = opt.optimize(m, a0, steps=60, objective="cvar", alpha=0.5)
        pe = m.probabilities(ae)[:, mask].sum(1)
        pc = m.probabilities(ac)[:, mask].sum(1)
        assert bool((pc > pe).all()) and float(pc.mean()) > 1.05 * float(pe.mean())
        # both reached their landscape's minimum region, and report their own objective
        assert float(pe.mean()) == pytest.approx(p_exp, abs=0.02)
        assert float(pc.mean()) == pytest.approx(p_cvar, abs=0.02)
        torch.testing.assert_close(vc, m.cvar(ac, 0.5), atol=1e-12, rtol=0)
        torch.testing.assert_close(ve, m(ae), atol=1e-12, rtol=0)
        assert bool((vc <= m.cvar(a0, 0.5) + 1e-12).all())


def test_optimize_lbfgs_with_cvar_and_callback():
    m = opt.qaoa(opt.maxcut(PADDLE), 1, dtype=torch.complex128)
    seen = []
    a, v = opt.optimize(m, angles_for(1, 2, 0), steps=15, optimizer="lbfgs", objective="cvar", alpha=0.4,
                        callback=lambda step, vals: seen.append(vals))
    assert seen and seen[0].shape == (2,)
    assert bool((v <= seen[0] + 1e-12).all())
    torch.testing.assert_close(v, m.cvar(a, 0.4), atol=1e-12, rtol=0)


# ------------------------------------------------------------------------------------------------
# bad inputs
BAD_ALPHAS = [True, float("nan"), 0, 0.0, -0.1, 1.5, "0.5", None, float("inf")]


@pytest.mark.parametrize("alpha", BAD_ALPHAS)
def test_bad_alpha_is_a_value_error_naming_alpha(alpha):
    m = opt.qaoa(opt.maxcut(PADDLE), 1)
    a = torch.zeros(2, 2)
    q = torch.full((1, 16), 1 / 16)
    with pytest.raises(ValueError, match=r"QAOA\.cvar: alpha must"):
        m.cvar(a, alpha)
    with pytest.raises(ValueError, match=r"QAOA\.cvar: alpha must"):
        m.cvar(a, alpha, shots=10)
    with pytest.raises(ValueError, match=r"cvar_from_probabilities: alpha must"):
        cvar_from_probabilities(q, torch.zeros(16), alpha)
    with pytest.raises(ValueError, match=r"cvar_from_samples: alpha must"):
        cvar_from_samples(torch.zeros(1, 4), alpha)
    if alpha is not None:                        # (None: no CVaR asked / objective without alpha)
        with pytest.raises(ValueError, match=r"analyse: cvar_alpha must"):
            m.analyse(a, cvar_alpha=alpha)
        with pytest.raises(ValueError, match=r"optimize: alpha must"):
            opt.optimize(m, a, steps=1, objective="cvar", alpha=alpha)


def test_bad_objective_and_alpha_combinations():
    m = opt.qaoa(opt.maxcut(PADDLE), 1)
    a = torch.zeros(2, 2)
    with pytest.raises(ValueError, match=r"optimize: objective must be one of \('expectation', 'cvar'\), got 'mean'"):
        opt.optimize(m, a, steps=1, objective="mean")
    with pytest.raises(ValueError, match=r"optimize: objective='cvar' needs alpha"):
        opt.optimize(m, a, steps=1, objective="cvar")
    with pytest.raises(ValueError, match=r"optimize: alpha=0\.5 is read by objective='cvar' only"):
        opt.optimize(m, a, steps=1, alpha=0.5)


def test_bad_function_inputs():
    q = torch.full((2, 8), 1 / 8)
    with pytest.raises(ValueError, match=r"probabilities must have shape \(\.\.\., 8\)"):
        cvar_from_probabilities(torch.full((2, 4), 0.25), torch.zeros(8), 0.5)
    with pytest.raises(ValueError, match=r"probabilities must have shape \(3, 8\) or \(3, S, 8\)"):
        cvar_from_probabilities(q, torch.zeros(3, 8), 0.5)
    with pytest.raises(TypeError, match=r"probabilities must be a real floating tensor, got torch.complex64"):
        cvar_from_probabilities(q.to(torch.complex64), torch.zeros(8), 0.5)
    with pytest.raises(TypeError, match=r"probabilities must be a real floating tensor, got list"):
        cvar_from_probabilities(q.tolist(), torch.zeros(8), 0.5)
    with pytest.raises(ValueError, match=r"cost_order: costs contain NaN or inf"):
        cvar_from_probabilities(q, torch.tensor([0.0] * 7 + [float("nan")]), 0.5)
    with pytest.raises(ValueError, match=r"cost_order: costs must have shape \(N,\) or \(G, N\), got \(1, 2, 8\)"):
        cvar_from_probabilities(q, torch.zeros(1, 2, 8), 0.5)
    with pytest.raises(TypeError, match=r"cost_order: costs must be real, got torch.complex128"):
        cvar_from_probabilities(q, torch.zeros(8, dtype=torch.complex128), 0.5)
    with pytest.raises(TypeError, match=r"cost_order: costs must be a real tensor"):
        cvar_from_probabilities(q, object(), 0.5)
    for bad in (0, -2.0, True, float("nan"), "2"):
        with pytest.raises(ValueError, match=r"multiplicity must be a positive number"):
            cvar_from_probabilities(q, torch.zeros(8), 0.5, multiplicity=bad)
    with pytest.raises(TypeError, match=r"sampled_costs must be a real tensor \(\.\.\., shots\), got torch.bool"):
        cvar_from_samples(torch.zeros(2, 3, dtype=torch.bool), 0.5)
    with pytest.raises(TypeError, match=r"sampled_costs must be a real tensor \(\.\.\., shots\), got list"):
        cvar_from_samples([1.0, 2.0], 0.5)
    with pytest.raises(ValueError, match=r"sampled_costs must have shape \(\.\.\., shots\) with shots >= 1"):
        cvar_from_samples(torch.zeros(2, 0), 0.5)
    m = opt.qaoa(opt.maxcut(PADDLE), 1)
    with pytest.raises(ValueError, match=r"QAOA\.cvar: probabilities must have shape \(\.\.\., 16\), got \(2, 8\)"):
        m.cvar_of_probabilities(torch.zeros(2, 8), 0.5)
    with pytest.raises(ValueError, match=r"qaoa: diff_method must be one of"):
        m.cvar(torch.zeros(2), 0.5, diff_method="parameter-shift")


# ------------------------------------------------------------------------------------------------
# Lightning task
pl = pytest.importorskip("pytorch_lightning")


@pytest.fixture
def quiet():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


from .test_qaoa_task import trainer  # noqa: E402  (the QAOA task tests' quiet Trainer)


def test_task_trains_on_cvar_logs_it_and_resumes(tmp_path, quiet):
    import csv
    from pytorch_lightning.callbacks import ModelCheckpoint
    from pytorch_lightning.loggers import CSVLogger
    from lightning_tasks.qaoa import QAOATask

    kw = dict(graph="cycle:6", p=2, n_starts=3, dtype="complex128", cvar_alpha=0.5, lr=0.05)
    task = QAOATask(**kw)
    assert task.hparams.cvar_alpha == 0.5
    costs = maxcut_costs(6, [(i, (i + 1) % 6) for i in range(6)])
    a = task.current_angles().detach()
    for s in range(3):
        probs = np.abs(dense_state(costs, a[s].tolist())) ** 2
        assert float(task()[s]) == pytest.approx(cvar_oracle(costs, probs, 0.5), abs=1e-10)
    start = task().detach().clone()
    ckpt = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1, filename="{step}")
    trainer(3, callbacks=[ckpt], enable_checkpointing=True, logger=CSVLogger(tmp_path, name="log")).fit(task)
    straight = QAOATask(**kw)
    trainer(6).fit(straight)
    assert bool((straight().detach() < start).all())             # every start's CVaR went down
    # the log holds the lowest CVaR over the starts next to the expected cost, one row per step
    rows = [r for r in csv.DictReader(open(tmp_path / "log" / "version_0" / "metrics.csv")) if r["cvar"]]
    assert len(rows) == 3 and rows[0]["expected_cost"]
    assert float(rows[0]["cvar"]) == pytest.approx(float(start.min()), abs=1e-10)
    assert float(rows[0]["cvar"]) <= float(rows[0]["expected_cost"])
    # the best start is still chosen and reported by its expected cost
    assert task.history[0] == pytest.approx(float(rows[0]["expected_cost"]), abs=1e-12)
    ev = task.evaluation()
    assert ev["cvar"] == pytest.approx(float(task().min()), abs=1e-12)
    assert ev["expected_cost"] == pytest.approx(float(task.expected_costs().min()), abs=1e-12)

    path = tmp_path / "step=2.ckpt"
    raw = torch.load(path, weights_only=True)
    assert raw["hyper_parameters"]["cvar_alpha"] == 0.5
    fresh = QAOATask(**raw["hyper_parameters"])
    trainer(6).fit(fresh, ckpt_path=str(path))
    assert fresh.global_step == 6
    assert torch.allclose(fresh.angles, straight.angles, atol=1e-12)
    assert fresh.history == pytest.approx(straight.history, abs=1e-12)


def test_task_rejects_bad_cvar_alpha(quiet):
    from lightning_tasks.qaoa import QAOATask
    for bad in (0, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match=r"QAOATask: cvar_alpha must"):
            QAOATask(graph="cycle:4", p=1, n_starts=2, cvar_alpha=bad)
