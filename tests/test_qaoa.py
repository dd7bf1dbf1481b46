"""Batched QAOA (torchquantum_layers.optimization.qaoa) against independent references.

Oracles: a dense NumPy state-vector QAOA written here (Kronecker products of RX, elementwise
phases), the closed-form p=1 MaxCut edge expectation (Wang, Hadfield, Jiang & Rieffel, PRA 97,
022304: ⟨C_uv⟩ = 1/2 + 1/4 sin4β sinγ (cos^{d_u}γ + cos^{d_v}γ) - 1/4 sin²2β cos^{d_u+d_v-2λ}γ
(1 - cos^λ 2γ), d = other neighbours, λ = triangles on the edge, for C_uv = (1 - Z_u Z_v)/2,
U = exp(-iγC), mixer exp(-iβΣX)), the Wurtz–Lykov tree values of the fixed angles, brute force
over bitstrings, finite differences and torch.autograd.gradcheck in complex128.
"""
import itertools
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import optimization as opt
from torchquantum_layers.grad import circuit_expval

from .conftest import ATOL

PADDLE = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]
K33 = [(u, v) for u in range(3) for v in range(3, 6)]                    # triangle-free 3-regular
CUBE = [(0, 1), (1, 3), (3, 2), (2, 0), (4, 5), (5, 7), (7, 6), (6, 4), (0, 4), (1, 5), (2, 6), (3, 7)]


# ------------------------------------------------------------------------------------------------
# independent references
def dense_qaoa(costs, gammas, betas, psi0=None, mixer=None):
    """exp(-iβΣX) exp(-iγC) … on a dense vector (wire 0 = most significant bit)."""
    costs = np.asarray(costs, dtype=float)
    N = costs.shape[0]
    n = int(round(math.log2(N)))
    psi = np.full(N, 1 / math.sqrt(N), dtype=complex) if psi0 is None else np.asarray(psi0, complex)
    for g, b in zip(gammas, betas):
        psi = np.exp(-1j * g * costs) * psi
        if mixer is None:
            r = np.array([[math.cos(b), -1j * math.sin(b)], [-1j * math.sin(b), math.cos(b)]])
            M = np.array([[1.0 + 0j]])
            for _ in range(n):
                M = np.kron(M, r)
        else:
            psi = mixer(psi, b)
            continue
        psi = M @ psi
    return psi


def maxcut_costs(n, edges):
    out = np.zeros(2 ** n)
    for bits in itertools.product([0, 1], repeat=n):
        out[int("".join(map(str, bits)), 2)] = -sum(1 for u, v in edges if bits[u] != bits[v])
    return out


def p1_edge_expectation(edges, n, u, v, gamma_wl, beta):
    """Closed-form ⟨(1 - Z_u Z_v)/2⟩ at p = 1 in the Wurtz–Lykov / Wang et al. convention."""
    nb = {w: set() for w in range(n)}
    for a, b in edges:
        nb[a].add(b)
        nb[b].add(a)
    du, dv = len(nb[u]) - 1, len(nb[v]) - 1
    lam = len(nb[u] & nb[v])
    g, b = gamma_wl, beta
    c = math.cos(g)
    return (0.5 + 0.25 * math.sin(4 * b) * math.sin(g) * (c ** du + c ** dv)
            - 0.25 * math.sin(2 * b) ** 2 * c ** (du + dv - 2 * lam) * (1 - math.cos(2 * g) ** lam))


def tree_around_edge(depth, degree=3):
    """The edge (0, 1) and every node within ``depth - 1`` further hops, in a d-regular tree."""
    edges, frontier, nxt = [(0, 1)], [0, 1], 2
    for _ in range(depth):
        new = []
        for v in frontier:
            for _ in range(degree - 1):
                edges.append((v, nxt))
                new.append(nxt)
                nxt += 1
        frontier = new
    return edges, nxt


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_states_match_dense_oracle(dtype, device, atol, diff_method):
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 3, 1.0), (3, 0, 3.0), (1, 3, 1.0), (0, 4, 2.0), (4, 2, 1.0)]
    pr = opt.maxcut(edges)
    m = opt.qaoa(pr, 3, dtype=dtype, device=device, diff_method=diff_method)
    g = torch.Generator().manual_seed(1)
    angles = (torch.rand(5, 6, generator=g, dtype=torch.float64) - 0.5) * 2
    psi = m.states(angles.to(device=device, dtype=tql.kernels.state.REAL_OF[dtype]))
    assert psi.shape == (5, 32) and psi.dtype == dtype
    costs = pr.diagonal.numpy()
    for s in range(5):
        want = dense_qaoa(costs, angles[s, :3].tolist(), angles[s, 3:].tolist())
        np.testing.assert_allclose(psi[s].cpu().numpy(), want, atol=10 * atol)
        e = float(m(angles[s].to(device=device, dtype=tql.kernels.state.REAL_OF[dtype])))
        assert e == pytest.approx(float(np.abs(want) ** 2 @ costs), abs=20 * atol * np.abs(costs).max())


def test_p1_closed_form_triangle_free_and_with_triangles():
    for edges, n in ((K33, 6), (CUBE, 8), (PADDLE, 4)):
        m = opt.qaoa(opt.maxcut(edges), 1, dtype=torch.complex128)
        for gamma_wl, beta in [(0.616, 0.393), (0.3, -0.2), (1.1, 0.7)]:
            want_cut = sum(p1_edge_expectation(edges, n, u, v, gamma_wl, beta) for u, v in edges)
            # our cost is minus the cut, so our γ is minus theirs
            e = float(m(torch.tensor([-gamma_wl, beta], dtype=torch.float64)))
            assert -e == pytest.approx(want_cut, abs=1e-10)


def test_fixed_angles_reproduce_the_tree_guarantees():
    # p = 1 and p = 2 on the 3-regular tree around an edge: ⟨C_e⟩ equals the tabulated ratio
    for p, tol in ((1, 2e-4), (2, 3e-4)):
        edges, n = tree_around_edge(p)
        m = opt.qaoa(opt.maxcut(edges), p, dtype=torch.complex128)
        prob = m(opt.fixed_angles(p), output="probabilities")
        idx = torch.arange(2 ** n)
        b0, b1 = (idx >> (n - 1)) & 1, (idx >> (n - 2)) & 1
        centre = float(prob[b0 != b1].sum())
        assert centre == pytest.approx(opt.FIXED_ANGLES_3REGULAR[p][2], abs=tol)
    # on a triangle-free 3-regular graph every edge has the p=1 value
    m = opt.qaoa(opt.maxcut(CUBE), 1, dtype=torch.complex128)
    assert -float(m(opt.fixed_angles(1))) / len(CUBE) == pytest.approx(0.6925, abs=2e-4)


def test_linear_ramp_and_interp():
    r = opt.linear_ramp(4, delta=0.8)
    t = (torch.arange(4, dtype=torch.float64) + 0.5) / 4
    torch.testing.assert_close(r, torch.cat([-0.8 * t, 0.8 * (1 - t)]))
    # INTERP: x'_i = (i-1)/p x_{i-1} + (p-i+1)/p x_i, x_0 = x_{p+1} = 0
    a = torch.tensor([1.0, 2.0, 3.0, 10.0, 20.0, 30.0], dtype=torch.float64)
    want_g = [1.0, 1 / 3 * 1 + 2 / 3 * 2, 2 / 3 * 2 + 1 / 3 * 3, 3.0]
    want_b = [10.0, 1 / 3 * 10 + 2 / 3 * 20, 2 / 3 * 20 + 1 / 3 * 30, 30.0]
    torch.testing.assert_close(opt.interp(a), torch.tensor(want_g + want_b, dtype=torch.float64))
    assert opt.interp(torch.zeros(7, 4)).shape == (7, 6)
    # warm start: INTERP of optimised p=1 angles is at least as good at p=2 as p=1 was
    pr = opt.maxcut(CUBE)
    a1, c1 = opt.optimize(opt.qaoa(pr, 1), opt.fixed_angles(1).float().unsqueeze(0), steps=30)
    c2 = opt.qaoa(pr, 2)(opt.interp(a1))
    assert float(c2) <= float(c1) + 1e-4


# ------------------------------------------------------------------------------------------------
# differentiation
def test_gradcheck_adjoint_complex128():
    pr = opt.maxcut([(0, 1, 1.0), (1, 2, 2.0), (2, 0, 1.5), (2, 3, 1.0)])
    m = opt.qaoa(pr, 2, dtype=torch.complex128)
    a = torch.tensor([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.7, 0.2, -0.3]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: m(x), (a,))
    # through the states too (probabilities of a few bitstrings)
    assert torch.autograd.gradcheck(lambda x: m(x, output="probabilities")[:, :5], (a,))
    # and the backprop path supports second derivatives
    mb = opt.qaoa(pr, 2, dtype=torch.complex128, diff_method="backprop")
    assert torch.autograd.gradgradcheck(lambda x: mb(x), (a,))


@pytest.mark.parametrize("case", ["maxcut", "colour-xy", "tsp-swap", "tsp-xy", "portfolio-xy", "mis-x"])
def test_adjoint_equals_backprop(case, dtype):
    pr, mixer = {
        "maxcut": (lambda: opt.maxcut(PADDLE + [(0, 4), (4, 2)]), "x"),
        "colour-xy": (lambda: opt.graph_colouring([(0, 1), (1, 2), (0, 2)], 3), "xy"),
        "tsp-swap": (lambda: opt.tsp([[0, 2, 3, 1], [2, 0, 1, 4], [3, 1, 0, 2], [1, 4, 2, 0]]), "swap"),
        "tsp-xy": (lambda: opt.tsp([[0, 2, 3, 1], [2, 0, 1, 4], [3, 1, 0, 2], [1, 4, 2, 0]]), "xy"),
        "portfolio-xy": (lambda: opt.portfolio([0.1, 0.2, 0.3, 0.1, 0.2], np.eye(5) * 0.1, 2), "xy"),
        "mis-x": (lambda: opt.max_independent_set(PADDLE), "x"),
    }[case]
    pr = pr()
    real = tql.kernels.state.REAL_OF[dtype]
    g = torch.Generator().manual_seed(4)
    a = (torch.rand(3, 4, generator=g, dtype=torch.float64) * 0.6 - 0.3).to(real)
    grads, vals = [], []
    for method in ("adjoint", "backprop"):
        m = opt.qaoa(pr, 2, mixer=mixer, dtype=dtype, diff_method=method)
        x = a.clone().requires_grad_(True)
        c = m(x)
        c.sum().backward()
        grads.append(x.grad)
        vals.append(c.detach())
    scale = float(pr.diagonal.abs().max())
    torch.testing.assert_close(vals[0], vals[1], rtol=0, atol=ATOL[dtype] * 50 * scale)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=ATOL[dtype] * 200 * scale)


def test_bit_flip_symmetry_half_register_is_exact():
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 3, 1.0), (3, 0, 3.0), (1, 3, 1.0), (0, 4, 2.0), (4, 2, 1.0)]
    g = torch.Generator().manual_seed(5)
    a = torch.rand(3, 6, generator=g, dtype=torch.float64) - 0.5
    w = torch.randn(3, 32, dtype=torch.complex128, generator=g)
    outs = []
    for sym in (True, False):
        m = opt.qaoa(opt.maxcut(edges), 3, dtype=torch.complex128, symmetry=sym)
        assert m.uses_symmetry is sym
        x = a.clone().requires_grad_(True)
        (m(x).sum() + (m.states(x) * w).real.sum()).backward()
        outs.append((m.states(a), x.grad))
    torch.testing.assert_close(outs[0][0], outs[1][0], atol=1e-12, rtol=0)
    torch.testing.assert_close(outs[0][1], outs[1][1], atol=1e-10, rtol=0)
    # fields break the symmetry; so does a non-symmetric start
    assert not opt.qaoa(opt.max_independent_set(PADDLE), 1).uses_symmetry
    assert not opt.qaoa(opt.maxcut(PADDLE), 1, initial_state="0101").uses_symmetry
    assert opt.qaoa(opt.number_partitioning([3, 1, 2]), 1).uses_symmetry


def test_gradient_matches_finite_differences_for_state_output():
    pr = opt.maxcut(PADDLE)
    m = opt.qaoa(pr, 2, dtype=torch.complex128)
    w = torch.randn(16, dtype=torch.complex128, generator=torch.Generator().manual_seed(2))
    a = torch.tensor([0.2, -0.4, 0.3, 0.6], dtype=torch.float64, requires_grad=True)

    def f(x):
        return (m.states(x) * w).real.sum()
    f(a).backward()
    eps = 1e-6
    fd = torch.tensor([(f(a.detach() + eps * e) - f(a.detach() - eps * e)).item() / (2 * eps)
                       for e in torch.eye(4, dtype=torch.float64)], dtype=torch.float64)
    torch.testing.assert_close(a.grad, fd, atol=1e-7, rtol=0)


def test_circuit_route_and_library_diff_methods():
    pr = opt.maxcut([(0, 1, 1.0), (1, 2, 2.0), (2, 3, 1.0), (3, 0, 1.0), (0, 2, 1.0)])
    m = opt.qaoa(pr, 2, dtype=torch.complex128)
    circ = m.circuit()
    assert len(opt.qaoa_circuit(pr, 2)) == len(circ) == 4 + 2 * (5 + 4)       # H, then RZZ per edge + RX
    a = torch.tensor([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.7, 0.2, -0.3]], dtype=torch.float64)
    ours = m.states(a)
    theirs = circ(a)
    # equal up to the global phase exp(-iγ c0) of the constant term
    overlap = (ours.conj() * theirs).sum(1)
    torch.testing.assert_close(overlap.abs(), torch.ones(2, dtype=torch.float64), atol=1e-12, rtol=0)
    ref = None
    for method in ("backprop", "adjoint", "parameter-shift"):
        x = a.clone().requires_grad_(True)
        e = circuit_expval(circ, pr.hamiltonian, x=x, diff_method=method)
        e.sum().backward()
        if ref is None:
            y = a.clone().requires_grad_(True)
            mine = m(y)
            mine.sum().backward()
            ref = (mine.detach(), y.grad)
        torch.testing.assert_close(e.detach(), ref[0], atol=1e-10, rtol=0)
        torch.testing.assert_close(x.grad, ref[1], atol=1e-9, rtol=0)


def test_adjoint_backward_twice_with_retain_graph():
    m = opt.qaoa(opt.maxcut(PADDLE), 1)
    a = torch.tensor([0.1, 0.2], requires_grad=True)
    c = m(a)
    c.backward(retain_graph=True)
    g1 = a.grad.clone()
    c.backward()
    torch.testing.assert_close(a.grad, 2 * g1)


# ------------------------------------------------------------------------------------------------
# batching
def test_several_graphs_in_one_batch(dtype):
    g1 = opt.maxcut(PADDLE + [(0, 4)])
    g2 = opt.maxcut([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)])
    g3 = opt.maxcut([(0, 2, 2.0), (1, 3), (2, 4, 0.5)], n_nodes=5)
    a = opt.random_angles(2, 4, generator=torch.Generator().manual_seed(0)).to(tql.kernels.state.REAL_OF[dtype])
    mb = opt.qaoa([g1, g2, g3], 2, dtype=dtype)
    both = mb(a)
    assert both.shape == (3, 4)
    for k, g in enumerate((g1, g2, g3)):
        torch.testing.assert_close(both[k], opt.qaoa(g, 2, dtype=dtype)(a), atol=ATOL[dtype] * 20, rtol=0)
    # per-graph angles (G, S, 2p), states and gradients
    per = torch.stack([a, a.flip(0), a * 0.5])
    st = mb.states(per)
    assert st.shape == (3, 4, 32)
    torch.testing.assert_close(st[2], opt.qaoa(g3, 2, dtype=dtype).states(a * 0.5), atol=ATOL[dtype] * 10, rtol=0)
    x = per.clone().requires_grad_(True)
    mb(x).sum().backward()
    y = (a * 0.5).clone().requires_grad_(True)
    opt.qaoa(g3, 2, dtype=dtype, diff_method="backprop")(y).sum().backward()
    torch.testing.assert_close(x.grad[2], y.grad, atol=ATOL[dtype] * 100, rtol=0)


def test_weighted_costs_use_the_trigonometric_path():
    rng = np.random.default_rng(0)
    edges = [(u, v, float(rng.random())) for u, v in itertools.combinations(range(6), 2)]
    pr = opt.maxcut(edges)
    m = opt.qaoa(pr, 2, dtype=torch.complex128)
    assert m._levels64 is None                    # many distinct costs: no level table
    a = torch.tensor([[0.2, -0.5, 0.4, 0.3]], dtype=torch.float64)
    want = dense_qaoa(pr.diagonal.numpy(), [0.2, -0.5], [0.4, 0.3])
    np.testing.assert_allclose(m.states(a)[0].numpy(), want, atol=1e-12)
    x = a.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: m(t), (x,))


# ------------------------------------------------------------------------------------------------
# constraint-preserving mixers
def xy_ring_apply(psi, groups, n, beta):
    """Apply exp(-iβ(XX+YY)/2) = rotation of |01⟩, |10⟩ over the ring pairs, in the module's order."""
    t = np.array(psi, dtype=complex).reshape([2] * n)
    c, s = math.cos(beta), math.sin(beta)
    for grp in groups:
        k = len(grp)
        pairs = [(grp[i], grp[i + 1]) for i in range(k - 1)] + ([(grp[-1], grp[0])] if k > 2 else [])
        for a, b in pairs:
            i01 = tuple(0 if w == a else 1 if w == b else slice(None) for w in range(n))
            i10 = tuple(1 if w == a else 0 if w == b else slice(None) for w in range(n))
            v01, v10 = t[i01].copy(), t[i10].copy()
            t[i01] = c * v01 - 1j * s * v10
            t[i10] = c * v10 - 1j * s * v01
    return t.reshape(-1)


def test_xy_mixer_matches_dense_and_keeps_the_feasible_subspace():
    pr = opt.graph_colouring([(0, 1), (1, 2)], 3)              # 9 qubits, 3 one-hot groups
    m = opt.qaoa(pr, 2, mixer="xy", dtype=torch.complex128)
    a = torch.tensor([[0.4, 0.9, 0.3, 0.7]], dtype=torch.float64)
    mask = pr.feasible_mask().numpy()
    psi0 = mask / math.sqrt(mask.sum())                         # product of W states
    want = dense_qaoa(pr.diagonal.numpy(), [0.4, 0.9], [0.3, 0.7], psi0=psi0,
                      mixer=lambda v, b: xy_ring_apply(v, pr.mixer_groups, 9, b))
    np.testing.assert_allclose(m.states(a)[0].numpy(), want, atol=1e-12)
    r = m.analyse(a)
    assert float(r.feasible_probability) == pytest.approx(1.0, abs=1e-12)


def test_swap_mixer_keeps_valid_tours():
    D = [[0, 2, 9, 10, 7], [2, 0, 6, 4, 3], [9, 6, 0, 8, 5], [10, 4, 8, 0, 6], [7, 3, 5, 6, 0]]
    pr = opt.tsp(D)                                            # 16 qubits, 24 tours
    m = opt.qaoa(pr, 2, mixer="swap")
    a = opt.random_angles(2, 3, generator=torch.Generator().manual_seed(1)).float()
    r = m.analyse(a)
    torch.testing.assert_close(r.feasible_probability, torch.ones(3, dtype=torch.float64), atol=1e-5, rtol=0)
    # every expected tour length lies between the best and worst tours
    ex = opt.exact_solution(pr)
    assert bool((r.expected_cost >= ex.cost - 1e-3).all() and (r.expected_cost <= ex.worst_cost + 1e-3).all())
    # the X mixer leaks out of the subspace
    assert float(opt.qaoa(pr, 1).analyse(torch.tensor([0.1, 0.3])).feasible_probability) < 0.5


def test_initial_state_options():
    pr = opt.maxcut(PADDLE)
    a = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    m = opt.qaoa(pr, 1, initial_state="0110", dtype=torch.complex128)
    assert float(m(a)) == -3.0                                  # zero angles keep the basis state (cut 3)
    m = opt.qaoa(pr, 1, initial_state=5, dtype=torch.complex128)
    assert float(m(a)) == -4.0
    psi = torch.zeros(16, dtype=torch.complex128)
    psi[[5, 10]] = 1 / math.sqrt(2)
    assert float(opt.qaoa(pr, 1, initial_state=psi, dtype=torch.complex128)(a)) == pytest.approx(-4.0)


# ------------------------------------------------------------------------------------------------
# results
def test_analyse_top_k_samples_and_ratio():
    pr = opt.maxcut(PADDLE)
    m = opt.qaoa(pr, 1, dtype=torch.complex128)
    a = torch.stack([opt.fixed_angles(1), torch.zeros(2, dtype=torch.float64)])
    r = m.analyse(a, k=3, shots=2000, generator=torch.Generator().manual_seed(0))
    prob = m.probabilities(a)
    torch.testing.assert_close(r.top_probabilities, prob.topk(3, dim=1).values)
    assert r.top_bitstrings[1] == [format(i, "04b") for i in r.top_indices[1].tolist()]
    # ratio = ⟨cut⟩ / max cut for MaxCut
    torch.testing.assert_close(r.approximation_ratio, -r.expected_cost / 4)
    torch.testing.assert_close(r.expected_objective, -r.expected_cost)       # expected cut
    torch.testing.assert_close(r.optimum_probability, prob[:, 5] + prob[:, 10])
    assert r.samples.shape == (2, 2000)
    r2 = m.analyse(a, k=3, shots=2000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(r.samples, r2.samples)
    # sample frequencies agree with the probabilities (4 sigma)
    freq = torch.bincount(r.samples[0], minlength=16).double() / 2000
    assert bool(((freq - prob[0]).abs() <= 4 * (prob[0] * (1 - prob[0]) / 2000).sqrt() + 1e-3).all())
    assert r.best == (0,)
    assert torch.equal(m.sample(a, 50, generator=torch.Generator().manual_seed(3)),
                       m.sample(a, 50, generator=torch.Generator().manual_seed(3)))


# ------------------------------------------------------------------------------------------------
# acceptance
def test_paddle_quantum_maxcut_tutorial_graph():
    pr = opt.maxcut(PADDLE)
    m = opt.qaoa(pr, 4)
    starts = opt.perturb(opt.linear_ramp(4), 8, 0.1, generator=torch.Generator().manual_seed(0)).float()
    angles, costs = opt.optimize(m, starts, steps=120, lr=0.05)
    best = int(torch.argmin(costs))
    r = m.analyse(angles[best], k=2)
    assert float(-r.expected_cost) >= 3.0                      # expected cut
    assert opt.exact_solution(pr).objective == 4
    assert set(r.top_bitstrings) == {"0101", "1010"}           # most probable = the optimal cuts
    assert float(r.optimum_probability) > 0.5


def test_3regular_16_nodes_fixed_angles_quick():
    """Fast version of the acceptance check: 2 graphs, p=1 and p=3 at the fixed angles plus a few
    Adam steps from 4 starts in one batch (examples/qaoa_maxcut.py --acceptance runs 5 seeds)."""
    ratios = {1: [], 3: []}
    for seed in (0, 1):
        pr = opt.maxcut(opt.random_regular_graph(3, 16, seed=seed))
        for p in (1, 3):
            m = opt.qaoa(pr, p)
            fixed = float(m.approximation_ratio(m(opt.fixed_angles(p).float())))
            starts = opt.perturb(opt.fixed_angles(p), 4, 0.02, generator=torch.Generator().manual_seed(seed)).float()
            _, costs = opt.optimize(m, starts, steps=3, lr=0.01)
            best = float(m.approximation_ratio(costs.min()))
            assert best >= fixed - 2e-3
            ratios[p].append(best)
    assert np.mean(ratios[1]) >= 0.69
    assert np.mean(ratios[3]) >= 0.79


# ------------------------------------------------------------------------------------------------
# bad input
def test_bad_qaoa_arguments():
    pr = opt.maxcut(PADDLE)
    with pytest.raises(ValueError, match=r"p \(the number of QAOA layers\) must be >= 1, got 0"):
        opt.qaoa(pr, 0)
    with pytest.raises(TypeError, match="p .* must be an int, got 1.5"):
        opt.qaoa(pr, 1.5)
    with pytest.raises(TypeError, match="must be an int, got True"):
        opt.qaoa(pr, True)
    with pytest.raises(ValueError, match="mixer must be one of"):
        opt.qaoa(pr, 1, mixer="z")
    with pytest.raises(ValueError, match="mixer='xy' needs a problem with one-hot groups"):
        opt.qaoa(pr, 1, mixer="xy")
    with pytest.raises(ValueError, match="'swap' is the TSP tour-exchange mixer"):
        opt.qaoa(opt.graph_colouring([(0, 1)], 2), 1, mixer="swap")
    with pytest.raises(ValueError, match="same number of qubits; problem 0 has 4, problem 1 has 3"):
        opt.qaoa([pr, opt.maxcut([(0, 1), (1, 2)])], 1)
    with pytest.raises(TypeError, match="expected a Problem"):
        opt.qaoa("maxcut", 1)
    with pytest.raises(ValueError, match="diff_method must be one of"):
        opt.qaoa(pr, 1, diff_method="magic")
    m = opt.qaoa(pr, 2)
    with pytest.raises(ValueError, match=r"angles must have shape \(S, 4\)"):
        m(torch.zeros(3, 3))
    with pytest.raises(ValueError, match="NaN or inf"):
        m(torch.tensor([0.1, float("nan"), 0.2, 0.3]))
    with pytest.raises(TypeError, match="real floating"):
        m(torch.zeros(1, 4, dtype=torch.complex64))
    with pytest.raises(ValueError, match="output must be"):
        m(torch.zeros(1, 4), output="energy")
    with pytest.raises(ValueError, match="initial_state '01' must be"):
        opt.qaoa(pr, 1, initial_state="01")
    with pytest.raises(ValueError, match="normalised"):
        opt.qaoa(pr, 1, initial_state=torch.ones(16))
    with pytest.raises(ValueError, match="tabulated for p = 1 … 4"):
        opt.fixed_angles(7)
    with pytest.raises(ValueError, match="optimizer must be"):
        opt.optimize(m, torch.zeros(1, 4), optimizer="sgd")



def test_beyond_brute_force_the_qaoa_still_runs(monkeypatch):
    # (a real 27-qubit diagonal is 1 GiB: lower the brute-force limit instead)
    import sys
    # QAOA.exact / approximation_ratio read the limit in qaoa_analysis (split out of qaoa.py)
    monkeypatch.setattr(sys.modules["torchquantum_layers.optimization.qaoa_analysis"], "MAX_EXACT_QUBITS", 3)
    m = opt.qaoa(opt.maxcut(PADDLE), 1)
    assert m.exact() is None
    assert m(torch.tensor([[0.1, 0.2]])).shape == (1,)
    with pytest.raises(ValueError, match="4 qubits is beyond brute force"):
        m.approximation_ratio(torch.tensor([-1.0]))
    r = m.analyse(torch.tensor([0.1, 0.2]))
    assert r.approximation_ratio is None and r.optimum_probability is None


def test_optimize_lbfgs_and_module_conversions():
    pr = opt.maxcut(CUBE)
    m = opt.qaoa(pr, 1).double()
    assert m.dtype == torch.complex128
    a, c = opt.optimize(m, opt.linear_ramp(1).unsqueeze(0), steps=30, optimizer="lbfgs")
    # the p=1 optimum of a triangle-free 3-regular graph is the fixed-angle value 0.6925 per edge
    assert -float(c) / 12 == pytest.approx(0.6925, abs=1e-3)


def test_multistart_module_trains_all_starts_with_any_optimizer():
    pr = opt.maxcut(PADDLE)
    model = opt.MultiStartQAOA(opt.qaoa(pr, 2), n_starts=6, init="ramp", generator=torch.Generator().manual_seed(0))
    assert model.angles.shape == (6, 4) and isinstance(model.angles, torch.nn.Parameter)
    sgd = torch.optim.SGD(model.parameters(), lr=0.05)
    first = model().detach()
    for _ in range(20):
        sgd.zero_grad()
        model().sum().backward()
        sgd.step()
    assert bool((model().detach() < first).all())
    angles, cost = model.best()
    assert angles.shape == (4,) and cost == pytest.approx(float(model().detach().min()))
    assert model.analyse(k=2).top_indices.shape == (6, 2)
    with pytest.raises(ValueError, match="init must be"):
        opt.MultiStartQAOA(opt.qaoa(pr, 2), init="zeros")


# ------------------------------------------------------------------------------------------------
# the real route of the X mixer (mixer_kernel="real": S-conjugated frame, real GEMMs, stacked
# adjoint sweep, wire 0 fused with the cost phase) against the dense oracle, gradcheck and the
# complex route
REAL_ROUTE_CASES = {
    "even n, symmetric": (opt.maxcut(CUBE[:10] + [(0, 7), (2, 5)]), True),         # n = 8, κ real
    "odd n, symmetric": (opt.maxcut([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)]), True),   # κ = ±i
    "full register": (opt.maxcut(PADDLE + [(0, 4)]), False),
    "fields (no symmetry)": (opt.max_independent_set(PADDLE), True),
}


@pytest.mark.parametrize("case", sorted(REAL_ROUTE_CASES))
@pytest.mark.parametrize("block_wires", [1, 2, 3, 4, 5])
def test_real_route_matches_dense_oracle(case, block_wires, dtype, atol):
    pr, sym = REAL_ROUTE_CASES[case]
    m = opt.qaoa(pr, 3, dtype=dtype, symmetry=sym, block_wires=block_wires)
    assert m.mixer_kernel == "real"
    g = torch.Generator().manual_seed(3)
    a64 = (torch.rand(4, 6, generator=g, dtype=torch.float64) - 0.5) * 3
    a = a64.to(tql.kernels.state.REAL_OF[dtype])
    psi = m.states(a).numpy()
    e = m(a).numpy()
    costs = pr.diagonal.numpy()
    for s in range(4):
        want = dense_qaoa(costs, a64[s, :3].tolist(), a64[s, 3:].tolist())
        np.testing.assert_allclose(psi[s], want, atol=10 * atol)
        assert e[s] == pytest.approx(float(np.abs(want) ** 2 @ costs), abs=20 * atol * np.abs(costs).max())


@pytest.mark.parametrize("case", sorted(REAL_ROUTE_CASES))
def test_real_route_gradcheck_complex128(case):
    pr, sym = REAL_ROUTE_CASES[case]
    m = opt.qaoa(pr, 2, dtype=torch.complex128, symmetry=sym, block_wires=3)
    a = (torch.rand(3, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64) - 0.5).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: m(x), (a,))
    w = torch.randn(3, 2 ** pr.n_qubits, dtype=torch.complex128, generator=torch.Generator().manual_seed(6))
    assert torch.autograd.gradcheck(lambda x: (m(x, output="state") * w).real.sum(-1), (a,))


@pytest.mark.parametrize("case", sorted(REAL_ROUTE_CASES))
def test_real_route_equals_complex_route_and_backprop(case, dtype):
    pr, sym = REAL_ROUTE_CASES[case]
    a = opt.random_angles(3, 5, generator=torch.Generator().manual_seed(2)).to(tql.kernels.state.REAL_OF[dtype])
    out = {}
    for kernel in ("real", "complex"):
        m = opt.qaoa(pr, 3, dtype=dtype, symmetry=sym, mixer_kernel=kernel)
        x = a.clone().requires_grad_(True)
        m(x).sum().backward()
        y = a.clone().requires_grad_(True)
        st = m(y, output="state")
        (st.real * torch.linspace(-1, 1, st.shape[-1], dtype=st.real.dtype)).sum().backward()
        out[kernel] = (m(a), x.grad, st.detach(), y.grad)
    mb = opt.qaoa(pr, 3, dtype=dtype, diff_method="backprop")
    x = a.clone().requires_grad_(True)
    mb(x).sum().backward()
    tol = dict(atol=ATOL[dtype] * 100, rtol=0)
    for u, v in zip(out["real"], out["complex"]):
        torch.testing.assert_close(u, v, **tol)
    torch.testing.assert_close(out["real"][1], x.grad, **tol)


def test_real_route_several_graphs_and_trigonometric_costs():
    rng = np.random.default_rng(1)
    g1 = opt.maxcut(PADDLE + [(0, 4)])
    g2 = opt.maxcut([(u, v, float(rng.random())) for u, v in itertools.combinations(range(5), 2)])
    a = (torch.rand(2, 3, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64) - 0.5)
    real = opt.qaoa([g1, g2], 2, dtype=torch.complex128)
    assert real._levels64 is None and real.uses_symmetry           # no level table: cos/sin phases
    x = a.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: real(t), (x,))
    for k, g in enumerate((g1, g2)):
        for s in range(3):
            want = dense_qaoa(g.diagonal.numpy(), a[k, s, :2].tolist(), a[k, s, 2:].tolist())
            np.testing.assert_allclose(real.states(a)[k, s].numpy(), want, atol=1e-12)
    # the level-table gathers (fused wire-0 phase) with per-graph tables
    g3 = opt.maxcut([(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)])
    lv = opt.qaoa([g1, g3], 2, dtype=torch.complex128)
    assert lv._levels64 is not None
    x = a.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: lv(t), (x,))
    cx = opt.qaoa([g1, g3], 2, dtype=torch.complex128, mixer_kernel="complex")
    torch.testing.assert_close(lv.states(a), cx.states(a), atol=1e-12, rtol=0)


def test_mixer_kernel_argument():
    with pytest.raises(ValueError, match="mixer_kernel"):
        opt.qaoa(opt.maxcut(PADDLE), 1, mixer_kernel="fast")
    # other mixers ignore it (they run the generic gate steps)
    assert opt.qaoa(opt.graph_colouring([(0, 1)], 2), 1, mixer="xy", mixer_kernel="complex").mixer_kernel == "complex"


def test_multistart_best_over_several_graphs_with_shared_angles():
    # angles (S, 2p) shared by G = 2 graphs: costs are (G, S) and the best start may be on graph 1
    # (it used to index the S angle rows with the flat G·S position: IndexError)
    g0, g1 = [(0, 1), (1, 2)], [(0, 1, 3.0), (1, 2, 3.0), (0, 2, 3.0)]
    model = opt.MultiStartQAOA(opt.qaoa([opt.maxcut(g0), opt.maxcut(g1)], 1, dtype=torch.complex128),
                               n_starts=3, generator=torch.Generator().manual_seed(0))
    costs = [[-cut_of(probs, edges) for probs in
              (np.abs(dense_qaoa(weighted_maxcut_costs(3, edges), [a[0]], [a[1]])) ** 2
               for a in model.angles.detach().tolist())] for edges in (g0, g1)]
    g, s = np.unravel_index(int(np.argmin(costs)), (2, 3))
    assert g == 1                                          # the case that used to fail
    angles, cost = model.best()
    assert torch.equal(angles, model.angles.detach()[s])
    assert cost == pytest.approx(costs[g][s], abs=1e-10)


def weighted_maxcut_costs(n, edges):
    out = np.zeros(2 ** n)
    for bits in itertools.product([0, 1], repeat=n):
        out[int("".join(map(str, bits)), 2)] = -sum((e[2] if len(e) == 3 else 1.0) for e in edges
                                                    if bits[e[0]] != bits[e[1]])
    return out


def cut_of(probs, edges):
    n = int(round(math.log2(probs.size)))
    return float(probs @ -weighted_maxcut_costs(n, edges))


def test_second_derivatives_match_finite_differences_for_both_diff_methods():
    # the adjoint's in-place sweep carries no graph: with create_graph it used to give zero second
    # derivatives (a zero Hessian from torch.autograd.functional.hessian), silently
    edges = [(0, 1), (1, 2), (2, 3)]
    pr = opt.maxcut(edges)
    costs = maxcut_costs(4, edges)

    def energy(x):                                          # the dense oracle, p = 2
        psi = dense_qaoa(costs, x[:2], x[2:])
        return float(np.abs(psi) ** 2 @ costs)
    x0 = np.array([0.3, -0.2, 0.4, 0.7])
    h = 1e-4
    E = np.eye(4)
    fd2 = [[(energy(x0 + h * ei + h * ej) - energy(x0 + h * ei - h * ej) - energy(x0 - h * ei + h * ej)
             + energy(x0 - h * ei - h * ej)) / (4 * h * h) for ej in E] for ei in E]
    fd1 = [(energy(x0 + 1e-6 * e) - energy(x0 - 1e-6 * e)) / 2e-6 for e in E]
    for method in ("adjoint", "backprop"):
        m = opt.qaoa(pr, 2, dtype=torch.complex128, diff_method=method)
        a = torch.tensor(x0, requires_grad=True)
        H = torch.autograd.functional.hessian(lambda x: m(x), a)
        np.testing.assert_allclose(H.numpy(), fd2, atol=1e-5)
        (g,) = torch.autograd.grad(m(a), a, create_graph=True)
        np.testing.assert_allclose(g.detach().numpy(), fd1, atol=1e-8)
        (g2,) = torch.autograd.grad(g[0], a)                  # double backward: row 0 of the Hessian
        np.testing.assert_allclose(g2.numpy(), fd2[0], atol=1e-5)


def test_angle_helpers_check_n_starts():
    for fn in (lambda n: opt.random_angles(2, n), lambda n: opt.perturb(opt.linear_ramp(2), n)):
        with pytest.raises(ValueError, match="n_starts must be >= 1, got 0"):
            fn(0)
        with pytest.raises(ValueError, match="n_starts must be >= 1, got -1"):
            fn(-1)
        with pytest.raises(TypeError, match="n_starts must be an int, got 2.5"):
            fn(2.5)
    assert opt.random_angles(2, 3).shape == (3, 4) and opt.perturb(opt.linear_ramp(2), 3).shape == (3, 4)


# ------------------------------------------------------------------------------------------------
# audit leftovers: tensor starts, ramp step, bool symmetry, options the other mixers do not use
def test_multistart_tensor_init_broadcasts_a_point_and_checks_n_starts():
    pr = opt.maxcut(PADDLE)
    m = opt.qaoa(pr, 2, dtype=torch.complex128)
    point = torch.tensor([-0.2, -0.5, 0.6, 0.3], dtype=torch.float64)
    # a single point (2p,) becomes n_starts starts: start 0 exact, the others Gaussian around it
    model = opt.MultiStartQAOA(m, n_starts=400, init=point, noise=0.1, generator=torch.Generator().manual_seed(1))
    a = model.angles.detach()
    assert a.shape == (400, 4) and torch.equal(a[0], point)
    dev = (a[1:] - point).numpy()
    # 399 x 4 draws of N(0, 0.1^2): the sample std has standard error 0.1 / sqrt(2 * 1596) ~ 0.0018
    assert abs(dev.std() - 0.1) < 5 * 0.1 / math.sqrt(2 * dev.size)
    assert abs(dev.mean()) < 5 * 0.1 / math.sqrt(dev.size)
    # the costs are those of the dense oracle at each start
    costs = maxcut_costs(4, PADDLE)
    for s in (0, 7):
        want = float(np.abs(dense_qaoa(costs, a[s, :2].tolist(), a[s, 2:].tolist())) ** 2 @ costs)
        assert float(model()[s].detach()) == pytest.approx(want, abs=1e-10)
    assert opt.MultiStartQAOA(m, init=point).angles.shape == (8, 4)          # the default n_starts
    # a batch (S, 2p) is used as given; an n_starts that disagrees is refused, not ignored
    batch = torch.rand(3, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert torch.equal(opt.MultiStartQAOA(m, init=batch).angles.detach(), batch)
    assert torch.equal(opt.MultiStartQAOA(m, n_starts=3, init=batch).angles.detach(), batch)
    with pytest.raises(ValueError, match=r"n_starts=5 but the initial angles hold 3 starts"):
        opt.MultiStartQAOA(m, n_starts=5, init=batch)
    with pytest.raises(ValueError, match=r"initial angles must have shape \(4,\).*got \(3, 6\)"):
        opt.MultiStartQAOA(m, init=torch.zeros(3, 6))
    with pytest.raises(ValueError, match=r"initial angles must have shape.*\(1, S, 4\).*got \(2, 3, 4\)"):
        opt.MultiStartQAOA(m, init=torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="NaN or inf"):
        opt.MultiStartQAOA(m, init=torch.tensor([0.1, float("nan"), 0.2, 0.3]))
    with pytest.raises(ValueError, match="n_starts must be a positive int, got 0"):
        opt.MultiStartQAOA(m, n_starts=0, init=point)
    with pytest.raises(ValueError, match="noise must be a finite number >= 0, got nan"):
        opt.MultiStartQAOA(m, init=point, noise=float("nan"))
    # per-problem starts (G, S, 2p) for a batch of two graphs
    mm = opt.qaoa([pr, opt.maxcut([(0, 1), (1, 2), (2, 3)])], 2)
    assert opt.MultiStartQAOA(mm, init=torch.zeros(2, 3, 4)).forward().shape == (2, 3)


def test_linear_ramp_checks_delta():
    # the formula by hand for p = 2, delta = 0.5: t = (1/4, 3/4)
    want = [-0.125, -0.375, 0.375, 0.125]
    assert opt.linear_ramp(2, delta=0.5).tolist() == pytest.approx(want)
    assert opt.linear_ramp(2, delta=torch.tensor(0.5)).tolist() == pytest.approx(want)
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=f"linear_ramp: delta must be finite, got {bad}"):
            opt.linear_ramp(2, delta=bad)
    for bad in ("0.5", True, None, 1j):
        with pytest.raises(TypeError, match="linear_ramp: delta must be a real number"):
            opt.linear_ramp(2, delta=bad)


def test_symmetry_must_be_a_bool_and_other_mixers_refuse_x_mixer_options():
    pr = opt.maxcut(PADDLE)
    for bad in ("no", 0, 1, 1.0):
        with pytest.raises(TypeError, match=r"symmetry must be a bool \(or None\), got"):
            opt.qaoa(pr, 1, symmetry=bad)
    assert opt.qaoa(pr, 1).uses_symmetry and opt.qaoa(pr, 1, symmetry=None).uses_symmetry
    assert not opt.qaoa(pr, 1, symmetry=False).uses_symmetry
    col = opt.graph_colouring([(0, 1), (1, 2)], 2)
    tsp = opt.tsp([[0, 1, 4, 2], [1, 0, 1, 5], [4, 1, 0, 1], [2, 5, 1, 0]])
    for problem, mixer in ((col, "xy"), (tsp, "swap"), (tsp, "xy")):
        with pytest.raises(ValueError, match=rf"block_wires=2 sets the GEMM blocks of the X mixer; mixer='{mixer}'"):
            opt.qaoa(problem, 1, mixer=mixer, block_wires=2)
        with pytest.raises(ValueError, match=rf"symmetry=True .* X mixer only, not for mixer='{mixer}'"):
            opt.qaoa(problem, 1, mixer=mixer, symmetry=True)
        # False / None ask for nothing the mixer lacks
        a = torch.tensor([0.3, 0.4])
        torch.testing.assert_close(opt.qaoa(problem, 1, mixer=mixer, symmetry=False)(a),
                                   opt.qaoa(problem, 1, mixer=mixer)(a))


# ------------------------------------------------------------------------------------------------
# the Fubini–Study metric of the angles, QNG and per-start SPSA
def fd_metric(state_fn, x, h=1e-5):
    """g_ij = Re[<d_i psi|d_j psi> - <d_i psi|psi><psi|d_j psi>] from central differences of the
    dense oracle's state (NumPy)."""
    x = np.asarray(x, float)
    psi = state_fn(x)
    D = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        D.append((state_fn(x + e) - state_fn(x - e)) / (2 * h))
    D = np.array(D)
    gram = D.conj() @ D.T
    over = D.conj() @ psi
    return (gram - np.outer(over, over.conj())).real


def test_qaoa_metric_matches_finite_differences_of_the_dense_state():
    # X mixer, MaxCut on the Paddle graph (bit-flip symmetric: the metric runs on the full register)
    costs = maxcut_costs(4, PADDLE)
    m = opt.qaoa(opt.maxcut(PADDLE), 2, dtype=torch.complex128)
    a = torch.tensor([[0.3, -0.2, 0.4, 0.7], [-0.5, 0.1, 0.2, -0.3], [0.0, 0.0, 0.0, 0.0]], dtype=torch.float64)
    g = opt.qaoa_metric(m, a)
    assert g.shape == (3, 4, 4) and g.dtype == torch.float64
    for s in range(3):
        want = fd_metric(lambda x: dense_qaoa(costs, x[:2], x[2:]), a[s].numpy())
        np.testing.assert_allclose(g[s].numpy(), want, atol=1e-8)
    # at p = 1 the γ entry is the variance of the cost in |+>: over uniform bitstrings, by brute force
    g1 = opt.qaoa_metric(opt.qaoa(opt.maxcut(PADDLE), 1, dtype=torch.complex128), torch.tensor([0.4, 0.3]))
    assert g1.shape == (2, 2) and float(g1[0, 0]) == pytest.approx(float(np.var(costs)), abs=1e-12)
    # XY mixer on a one-hot colouring from the W-state product (dense oracle of the XY ring)
    pr = opt.graph_colouring([(0, 1), (1, 2)], 3)
    mask = pr.feasible_mask().numpy()
    psi0 = mask / math.sqrt(mask.sum())
    mx = opt.qaoa(pr, 2, mixer="xy", dtype=torch.complex128)
    x = np.array([0.4, 0.9, 0.3, 0.7])
    want = fd_metric(lambda y: dense_qaoa(pr.diagonal.numpy(), y[:2], y[2:], psi0=psi0,
                                          mixer=lambda v, b: xy_ring_apply(v, pr.mixer_groups, 9, b)), x)
    np.testing.assert_allclose(opt.qaoa_metric(mx, torch.tensor(x)).numpy(), want, atol=1e-8)
    # a batch of two graphs: (G, S, 2p, 2p), each graph's own metric
    g2 = [(0, 1, 2.0), (1, 2, 1.0), (2, 3, 0.5)]
    mm = opt.qaoa([opt.maxcut(PADDLE), opt.maxcut(g2)], 2, dtype=torch.complex128)
    gb = opt.qaoa_metric(mm, a[:2])
    assert gb.shape == (2, 2, 4, 4)
    c2 = weighted_maxcut_costs(4, g2)
    np.testing.assert_allclose(gb[1, 0].numpy(), fd_metric(lambda y: dense_qaoa(c2, y[:2], y[2:]), a[0].numpy()),
                               atol=1e-8)
    with pytest.raises(TypeError, match="qaoa_metric: expected a QAOA module"):
        opt.qaoa_metric("m", a)
    with pytest.raises(ValueError, match=r"angles must have shape \(S, 4\)"):
        opt.qaoa_metric(m, torch.zeros(2, 3))


def test_natural_gradient_step_is_the_metric_solve_of_the_gradient():
    # one step by hand: theta - lr (g + lam I)^-1 grad, g and grad from central differences of the
    # dense oracle, per start
    costs = maxcut_costs(4, PADDLE)
    m = opt.qaoa(opt.maxcut(PADDLE), 2, dtype=torch.complex128)
    a0 = torch.tensor([[-0.3, -0.5, 0.6, 0.3], [-0.1, -0.4, 0.2, 0.5]], dtype=torch.float64)
    a = a0.clone().requires_grad_(True)
    step = opt.QAOANaturalGradient(a, m, lr=0.2, regularization=1e-3)
    m(a).sum().backward()
    step.step()

    def energy(x):
        return float(np.abs(dense_qaoa(costs, x[:2], x[2:])) ** 2 @ costs)
    for s in range(2):
        x = a0[s].numpy()
        grad = np.array([(energy(x + 1e-6 * e) - energy(x - 1e-6 * e)) / 2e-6 for e in np.eye(4)])
        g = fd_metric(lambda y: dense_qaoa(costs, y[:2], y[2:]), x)
        want = x - 0.2 * np.linalg.solve(g + 1e-3 * np.eye(4), grad)
        np.testing.assert_allclose(a.detach()[s].numpy(), want, atol=1e-6)
    # twenty steps improve every start's expected cut (the dense oracle)
    for _ in range(20):
        step.zero_grad()
        m(a).sum().backward()
        step.step()
    for s in range(2):
        assert energy(a.detach()[s].numpy()) < energy(a0[s].numpy()) - 0.1
    with pytest.raises(ValueError, match="angles have 6 columns, the QAOA \\(p=2\\) takes 4"):
        opt.QAOANaturalGradient(torch.zeros(2, 6, requires_grad=True), m)
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        opt.QAOANaturalGradient(a, m, lr=float("nan"))
    with pytest.raises(TypeError, match="metric must be a QAOA module or a callable"):
        opt.QAOANaturalGradient(a, 3)


def test_multistart_spsa_gives_every_start_its_own_estimate():
    # SPSA step 0 by hand: a_0 = lr, c_0 = perturbation; each row moves by -a_0 slope_s Delta_s with
    # slope_s = (C_s(theta_s + c Delta_s) - C_s(theta_s - c Delta_s)) / 2c from the dense oracle, where
    # Delta_s = +-1 is read off the signs of the displacement (so every entry of a row moves by the
    # same amount, a_0 |slope_s|: the other starts' costs add nothing)
    costs = maxcut_costs(4, PADDLE)
    m = opt.qaoa(opt.maxcut(PADDLE), 2, dtype=torch.complex128)
    a0 = opt.perturb(opt.linear_ramp(2), 3, 0.2, torch.Generator().manual_seed(4))
    a = a0.clone()
    lr, c = 0.3, 0.1
    spsa = opt.MultiStartSPSA([a], lr=lr, perturbation=c, seed=5)
    spsa.step(lambda: m(a))

    def energy(x):
        return float(np.abs(dense_qaoa(costs, x[:2], x[2:])) ** 2 @ costs)
    move = (a - a0).numpy()
    for s in range(3):
        delta = np.sign(move[s])
        slope = (energy(a0[s].numpy() + c * delta) - energy(a0[s].numpy() - c * delta)) / (2 * c)
        assert slope < 0                                   # moving along +delta lowered the cost
        np.testing.assert_allclose(np.abs(move[s]), lr * abs(slope) * np.ones(4), atol=1e-10)
    with pytest.raises(ValueError, match=r"losses of shape \(2,\) for a parameter of shape \(3, 4\)"):
        opt.MultiStartSPSA([a]).step(lambda: m(a)[:2])
