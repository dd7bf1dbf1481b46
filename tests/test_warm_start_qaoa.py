"""Warm-start QAOA (optimization.warm_start; Egger, Mareček & Woerner, Quantum 5, 479 (2021)).

Oracles: a dense NumPy simulation written here (the start state as a Kronecker product of
RY(θ_i)|0⟩, the mixer as a Kronecker product of the 2 × 2 matrices RY(θ_i) RZ(2β) RY(-θ_i), the
cost layer as exp(-iγC) of a cost diagonal brute-forced here from the edges / the QUBO matrix);
the closed forms: β = 0 keeps the warm-start product distribution at every depth, the start state
is an eigenstate of the mixer (γ = 0 only changes the global phase), and ε = 1/2 is the standard
X-mixer QAOA with the same angles; finite differences and torch.autograd.gradcheck in complex128;
the gate-level circuit through the library's own Circuit simulator.
"""
import itertools
import math

import numpy as np
import pytest
import torch

from torchquantum_layers import optimization as opt
from torchquantum_layers.grad import circuit_expval

from .conftest import ATOL, REAL

WEIGHTED = [(0, 1, 1.0), (1, 2, 2.0), (2, 3, 0.5), (3, 0, 1.5), (0, 2, 1.0), (3, 4, 1.0), (4, 5, 2.5), (5, 1, 1.0)]
Q6 = [[1.0, -2.0, 0.0, 0.5, 0.0, 0.0], [0.0, -1.0, 1.5, 0.0, 0.0, -1.0], [0.0, 0.0, 0.5, -1.0, 0.0, 0.0],
      [0.0, 0.0, 0.0, -0.5, 2.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0, -1.5], [0.0, 0.0, 0.0, 0.0, 0.0, -0.5]]


# ------------------------------------------------------------------------------------------------
# independent references
def all_bits(n):
    return [np.array(b) for b in itertools.product([0, 1], repeat=n)]        # wire 0 = most significant


def cut_costs(n, edges):
    return np.array([-sum(w for u, v, w in edges if b[u] != b[v]) for b in all_bits(n)])


def qubo_costs(Q):
    Q = np.asarray(Q)
    return np.array([b @ Q @ b for b in all_bits(Q.shape[0])])


def ry(t):
    return np.array([[math.cos(t / 2), -math.sin(t / 2)], [math.sin(t / 2), math.cos(t / 2)]], dtype=complex)


def rz(t):
    return np.diag([np.exp(-0.5j * t), np.exp(0.5j * t)])


def kron_all(ms):
    out = np.array([[1.0 + 0j]])
    for m in ms:
        out = np.kron(out, m)
    return out


def dense_warm_qaoa(costs, c, gammas, betas):
    """⊗RY(θ_i)|0⟩, then per layer exp(-iγC) and ⊗ RY(θ_i) RZ(2β) RY(-θ_i)."""
    thetas = [2 * math.asin(math.sqrt(x)) for x in c]
    psi = kron_all([ry(t) for t in thetas])[:, 0]
    for g, b in zip(gammas, betas):
        psi = np.exp(-1j * g * costs) * psi
        psi = kron_all([ry(t) @ rz(2 * b) @ ry(-t) for t in thetas]) @ psi
    return psi


def clip(c, eps):
    return [min(max(x, eps), 1 - eps) for x in c]


def product_distribution(c):
    return np.array([np.prod([x if bit else 1 - x for x, bit in zip(c, b)]) for b in all_bits(len(c))])


# ------------------------------------------------------------------------------------------------
# states against the dense oracle
@pytest.mark.parametrize("case", ["maxcut-bits", "maxcut-continuous", "qubo"])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_states_match_dense_oracle(case, p, diff_method, dtype, device, atol):
    if case == "qubo":
        problem, costs, warm, eps = opt.from_qubo(Q6), qubo_costs(Q6), [0.9, 0.1, 0.6, 0.3, 0.5, 0.0], 0.1
    elif case == "maxcut-bits":
        problem, costs, warm, eps = opt.maxcut(WEIGHTED), cut_costs(6, WEIGHTED), "011010", 0.25
    else:
        edges = WEIGHTED[:5]                                                # 4 nodes
        problem, costs, warm, eps = opt.maxcut(edges), cut_costs(4, edges), [0.2, 0.7, 1.0, 0.45], 0.0
    n = problem.n_qubits
    c = clip([float(ch) for ch in warm] if isinstance(warm, str) else warm, eps)
    m = opt.qaoa(problem, p, mixer="warm", warm_start=warm, epsilon=eps, dtype=dtype, device=device,
                 diff_method=diff_method)
    angles = (torch.rand(3, 2 * p, generator=torch.Generator().manual_seed(p), dtype=torch.float64) - 0.5) * 2
    a = angles.to(device=device, dtype=REAL[dtype])
    psi = m.states(a)
    assert psi.shape == (3, 2 ** n) and psi.dtype == dtype
    scale = float(np.abs(costs).max())
    for s in range(3):
        want = dense_warm_qaoa(costs, c, angles[s, :p].tolist(), angles[s, p:].tolist())
        np.testing.assert_allclose(psi[s].cpu().numpy(), want, atol=atol * 10 * scale, rtol=0)
        e = float(m(a[s]))
        assert e == pytest.approx(float(np.abs(want) ** 2 @ costs), abs=atol * 20 * scale)
    probs = m.probabilities(a)
    torch.testing.assert_close(probs, psi.real ** 2 + psi.imag ** 2, atol=atol, rtol=0)


def test_mixer_is_the_rotation_about_the_warm_start_bloch_vector():
    """exp(-iβ (sin θ X + cos θ Z)) = RY(θ) RZ(2β) RY(-θ), and RY(θ)|0⟩ is its eigenvector of
    eigenvalue exp(-iβ): the convention stated in optimization.warm_start."""
    X, Z = np.array([[0, 1], [1, 0]]), np.diag([1, -1])
    for c in (0.1, 0.5, 0.8):
        t = 2 * math.asin(math.sqrt(c))
        H = math.sin(t) * X + math.cos(t) * Z
        for b in (0.3, -1.1):
            w, V = np.linalg.eigh(H)
            expm = V @ np.diag(np.exp(-1j * b * w)) @ V.conj().T
            np.testing.assert_allclose(expm, ry(t) @ rz(2 * b) @ ry(-t), atol=1e-14)
            start = ry(t)[:, 0]
            np.testing.assert_allclose(expm @ start, np.exp(-1j * b) * start, atol=1e-14)
        np.testing.assert_allclose(ry(t)[:, 0] ** 2, [1 - c, c], atol=1e-14)      # P(bit 1) = c


def test_beta_zero_keeps_the_warm_start_distribution(dtype, atol):
    problem = opt.maxcut(WEIGHTED)
    warm, eps = [1.0, 0.0, 0.3, 1.0, 0.9, 0.0], 0.2
    for p in (1, 3):
        m = opt.qaoa(problem, p, mixer="warm", warm_start=warm, epsilon=eps, dtype=dtype)
        gam = torch.tensor([[0.4, -0.9, 1.3][:p] + [0.0] * p, [0.0] * (2 * p)], dtype=REAL[dtype])
        want = torch.tensor(product_distribution(clip(warm, eps)), dtype=REAL[dtype]).expand(2, -1)
        torch.testing.assert_close(m.probabilities(gam), want, atol=atol, rtol=0)
    # the same start state through initial_state="auto"
    m = opt.qaoa(problem, 1, mixer="warm", warm_start=warm, epsilon=eps, dtype=torch.complex128)
    amp = torch.tensor(np.sqrt(product_distribution(clip(warm, eps))), dtype=torch.complex128)
    torch.testing.assert_close(m._init64[0], amp, atol=1e-15, rtol=0)


def test_the_start_state_is_an_eigenstate_of_the_mixer(dtype, atol):
    problem = opt.from_qubo(Q6)
    warm, n = [0.9, 0.1, 0.6, 0.3, 0.5, 0.0], 6
    m = opt.qaoa(problem, 2, mixer="warm", warm_start=warm, epsilon=0.05, dtype=dtype)
    betas = [0.37, -0.8]
    psi = m.states(torch.tensor([0.0, 0.0] + betas, dtype=REAL[dtype]))
    start = m._init64[0].to(dtype)
    phase = complex(np.exp(-1j * n * sum(betas)))              # Σ_i H_i has eigenvalue n on it
    torch.testing.assert_close(psi, start * phase, atol=atol * 10, rtol=0)


@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_epsilon_one_half_is_the_standard_x_mixer_qaoa(diff_method, dtype, atol):
    """c_i = 1/2: θ = π/2, H_i = X_i and RY(π/2)|0⟩ = |+⟩, so the states are equal angle for angle."""
    for problem in (opt.maxcut(WEIGHTED), opt.from_qubo(Q6)):
        a = opt.perturb(opt.linear_ramp(2), 4, 0.3, torch.Generator().manual_seed(1)).to(REAL[dtype])
        warm = opt.qaoa(problem, 2, mixer="warm", warm_start="101100", epsilon=0.5, dtype=dtype,
                        diff_method=diff_method)
        std = opt.qaoa(problem, 2, dtype=dtype, diff_method=diff_method)
        torch.testing.assert_close(warm.states(a), std.states(a), atol=atol * 10, rtol=0)
        x, y = a.clone().requires_grad_(True), a.clone().requires_grad_(True)
        warm(x).sum().backward()
        std(y).sum().backward()
        torch.testing.assert_close(x.grad, y.grad, atol=atol * 200, rtol=0)


# ------------------------------------------------------------------------------------------------
# gradients
@pytest.mark.parametrize("diff_method", ["adjoint", "backprop"])
def test_gradcheck_complex128(diff_method):
    m = opt.qaoa(opt.maxcut(WEIGHTED), 2, mixer="warm", warm_start=[0.9, 0.2, 0.5, 0.0, 1.0, 0.7],
                 epsilon=0.1, dtype=torch.complex128, diff_method=diff_method)
    a = torch.tensor([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.7, 0.2, -0.3]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: m(t), (a,))
    w = torch.randn(2, 64, dtype=torch.complex128, generator=torch.Generator().manual_seed(3))
    assert torch.autograd.gradcheck(lambda t: (m.states(t) * w).real.sum(), (a,))
    assert torch.autograd.gradcheck(lambda t: m.cvar(t, 0.3), (a,))


def test_adjoint_equals_backprop_and_finite_differences(dtype):
    problem = opt.from_qubo(Q6)
    a = (torch.rand(3, 6, generator=torch.Generator().manual_seed(5), dtype=torch.float64) - 0.5)
    vals, grads = [], []
    for method in ("adjoint", "backprop"):
        m = opt.qaoa(problem, 3, mixer="warm", warm_start=[0.9, 0.1, 0.6, 0.3, 0.5, 0.0], dtype=dtype,
                     diff_method=method)
        x = a.to(REAL[dtype]).clone().requires_grad_(True)
        c = m(x)
        c.sum().backward()
        vals.append(c.detach())
        grads.append(x.grad)
    torch.testing.assert_close(vals[0], vals[1], atol=ATOL[dtype] * 100, rtol=0)
    torch.testing.assert_close(grads[0], grads[1], atol=ATOL[dtype] * 500, rtol=0)
    if dtype == torch.complex128:
        m = opt.qaoa(problem, 3, mixer="warm", warm_start=[0.9, 0.1, 0.6, 0.3, 0.5, 0.0], dtype=dtype)
        eps = 1e-6
        fd = torch.stack([(m(a + eps * e) - m(a - eps * e)) / (2 * eps) for e in torch.eye(6, dtype=torch.float64)], 1)
        torch.testing.assert_close(grads[0], fd, atol=1e-7, rtol=0)


def test_qaoa_metric_matches_finite_differences_of_the_states():
    m = opt.qaoa(opt.maxcut(WEIGHTED[:5]), 2, mixer="warm", warm_start="0110", epsilon=0.2, dtype=torch.complex128)
    a = torch.tensor([0.4, -0.3, 0.6, 0.2], dtype=torch.float64)
    g = opt.qaoa_metric(m, a)
    psi = m.states(a)
    eps = 1e-6
    d = torch.stack([(m.states(a + eps * e) - m.states(a - eps * e)) / (2 * eps) for e in torch.eye(4, dtype=torch.float64)])
    over = d.conj() @ psi
    want = ((d.conj() @ d.T) - over[:, None] * over.conj()[None, :]).real
    torch.testing.assert_close(g, want, atol=1e-8, rtol=0)


# ------------------------------------------------------------------------------------------------
# the gate-level circuit
def test_circuit_agrees_with_the_engine_and_the_library_gradients():
    problem = opt.maxcut(WEIGHTED)
    m = opt.qaoa(problem, 2, mixer="warm", warm_start="011010", epsilon=0.25, dtype=torch.complex128)
    circ = m.circuit()
    assert len(circ) == 6 + 2 * (len(WEIGHTED) + 3 * 6)               # RY, then per layer RZZ per edge + 3 per wire
    a = torch.tensor([[0.3, -0.2, 0.5, 0.1], [-0.4, 0.7, 0.2, -0.3]], dtype=torch.float64)
    overlap = (m.states(a).conj() * circ(a)).sum(1)                   # equal up to exp(-iγ c_0)
    torch.testing.assert_close(overlap.abs(), torch.ones(2, dtype=torch.float64), atol=1e-12, rtol=0)
    y = a.clone().requires_grad_(True)
    mine = m(y)
    mine.sum().backward()
    for method in ("backprop", "adjoint", "parameter-shift"):
        x = a.clone().requires_grad_(True)
        e = circuit_expval(circ, problem.hamiltonian, x=x, diff_method=method)
        e.sum().backward()
        torch.testing.assert_close(e.detach(), mine.detach(), atol=1e-10, rtol=0)
        torch.testing.assert_close(x.grad, y.grad, atol=1e-9, rtol=0)


def test_circuit_refuses_what_it_cannot_express():
    problem = opt.maxcut(WEIGHTED[:5])
    with pytest.raises(ValueError, match="warm-start state only"):
        opt.qaoa(problem, 1, mixer="warm", warm_start="0110", initial_state="plus").circuit()
    with pytest.raises(ValueError, match="single problem"):
        opt.qaoa([problem, problem], 1, mixer="warm", warm_start="0110").circuit()


# ------------------------------------------------------------------------------------------------
# batching, blocks and training
def test_problem_batches_take_one_warm_start_each(dtype, atol):
    p1, p2 = opt.maxcut(WEIGHTED), opt.maxcut([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)])
    warm = torch.tensor([[1, 0, 1, 0, 0, 1], [0.2, 0.9, 0.4, 0.6, 0.5, 0.1]], dtype=torch.float64)
    a = opt.random_angles(2, 4, generator=torch.Generator().manual_seed(0)).to(REAL[dtype])
    both = opt.qaoa([p1, p2], 2, mixer="warm", warm_start=warm, epsilon=0.15, dtype=dtype)
    out = both(a)
    assert out.shape == (2, 4)
    for k, pr in enumerate((p1, p2)):
        one = opt.qaoa(pr, 2, mixer="warm", warm_start=warm[k], epsilon=0.15, dtype=dtype)
        torch.testing.assert_close(out[k], one(a), atol=atol * 50, rtol=0)
    # the gradient of the batch is the sum of the problems' own gradients
    x = a.clone().requires_grad_(True)
    both(x).sum().backward()
    ref = torch.zeros_like(a)
    for k, pr in enumerate((p1, p2)):
        y = a.clone().requires_grad_(True)
        opt.qaoa(pr, 2, mixer="warm", warm_start=warm[k], epsilon=0.15, dtype=dtype)(y).sum().backward()
        ref += y.grad
    torch.testing.assert_close(x.grad, ref, atol=atol * 500, rtol=0)
    # one shared warm start broadcasts over the problems
    shared = opt.qaoa([p1, p2], 1, mixer="warm", warm_start="110010", dtype=dtype)
    assert shared.warm_start.shape == (1, 6)
    torch.testing.assert_close(shared(a[:, [0, 2]])[1], opt.qaoa(p2, 1, mixer="warm", warm_start="110010",
                                                                   dtype=dtype)(a[:, [0, 2]]), atol=atol * 50, rtol=0)


def test_block_width_does_not_change_the_state():
    problem = opt.from_qubo(Q6)
    a = opt.random_angles(2, 3, generator=torch.Generator().manual_seed(2))
    ref = None
    for bw in (1, 2, 4, 6):
        m = opt.qaoa(problem, 2, mixer="warm", warm_start=[0.9, 0.1, 0.6, 0.3, 0.5, 0.0], dtype=torch.complex128,
                     block_wires=bw)
        psi = m.states(a)
        ref = psi if ref is None else ref
        torch.testing.assert_close(psi, ref, atol=1e-13, rtol=0)


def test_optimize_analyse_and_goemans_williamson_warm_start():
    problem = opt.maxcut(opt.random_regular_graph(3, 8, seed=3))
    gw = opt.goemans_williamson(problem, generator=torch.Generator().manual_seed(0))
    m = opt.warm_start_qaoa(problem, 1, generator=torch.Generator().manual_seed(0), epsilon=0.25)
    assert m.mixer == "warm" and m.epsilon == 0.25
    torch.testing.assert_close(m.warm_start[0], torch.tensor([float(b) for b in gw.bitstring]).clamp(0.25, 0.75).double())
    via_result = opt.qaoa(problem, 1, mixer="warm", warm_start=gw)
    torch.testing.assert_close(via_result.warm_start, m.warm_start)
    starts = opt.perturb(opt.linear_ramp(1), 6, 0.2, torch.Generator().manual_seed(1))
    angles, costs = opt.optimize(m, starts, steps=40)
    assert costs.shape == (6,) and bool((costs <= m(starts.float()) + 1e-5).all())
    res = m.analyse(angles, k=2)
    exact = opt.exact_solution(problem)
    # the expected cut of the trained warm start beats the warm-start distribution itself (β = 0)
    base = m.analyse(torch.zeros(1, 2))
    assert float(res.approximation_ratio.max()) > float(base.approximation_ratio[0])
    assert res.top_bitstrings[0][0] in exact.bitstrings or float(res.approximation_ratio.max()) > 0.8
    # the warm-start distribution puts weight (1-ε)^n on the GW cut itself
    assert float(base.top_probabilities[0, 0]) == pytest.approx(0.75 ** 8, rel=1e-5)
    ms = opt.MultiStartQAOA(m, n_starts=3, generator=torch.Generator().manual_seed(0))
    assert ms().shape == (3,)


def test_every_problem_is_warm_started_from_its_sdp_by_default():
    # not MaxCut: the best rounded bitstring of ising_sdp (the GW relaxation of the Ising form), seeded
    qubo = opt.from_qubo(Q6)
    mis = opt.max_independent_set(opt.cycle_graph(6))
    for problem in (qubo, mis):
        sdp = opt.ising_sdp(problem, generator=torch.Generator().manual_seed(4))
        assert isinstance(opt.default_warm_start(problem, torch.Generator().manual_seed(4)), opt.IsingSDPResult)
        m = opt.warm_start_qaoa(problem, 1, generator=torch.Generator().manual_seed(4), epsilon=0.1)
        want = torch.tensor([[float(b) for b in sdp.bitstring]], dtype=torch.float64).clamp(0.1, 0.9)
        torch.testing.assert_close(m.warm_start, want)
        ref = opt.qaoa(problem, 1, mixer="warm", warm_start=sdp, epsilon=0.1)      # a result is a warm start
        a = opt.random_angles(1, 3, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(m(a), ref(a))
        assert sdp.lower_bound <= opt.exact_solution(problem).cost <= sdp.cost
    # MaxCut keeps the GW cut; a batch of problems gets one row each
    mc = opt.maxcut(WEIGHTED)
    assert isinstance(opt.default_warm_start(mc), opt.GoemansWilliamsonResult)
    q2 = opt.from_qubo([[-1.0, 2.0, 0.5, 0.0, 0.0, 1.0], [0.0, 1.0, -1.0, 0.0, 0.0, 0.0], [0.0] * 6, [0.0] * 6,
                        [0.0] * 6, [0.0] * 6])
    m = opt.warm_start_qaoa([qubo, q2], 1, generator=torch.Generator().manual_seed(0))
    assert m.warm_start.shape == (2, 6)


# ------------------------------------------------------------------------------------------------
# refusals
def test_invalid_options_are_refused():
    problem = opt.maxcut(WEIGHTED[:5])
    cases = [
        (lambda: opt.qaoa(problem, 1, mixer="warm"), ValueError, "mixer='warm' needs warm_start="),
        (lambda: opt.qaoa(problem, 1, warm_start="0101"), ValueError, "mixer='x' does not use them"),
        (lambda: opt.qaoa(problem, 1, epsilon=0.1), ValueError, "use mixer='warm'"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", epsilon=0.6), ValueError,
         r"epsilon must be in \[0, 0.5\]"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", epsilon=-0.1), ValueError, "epsilon must be"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", epsilon="0.2"), TypeError, "epsilon must be"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", epsilon=True), TypeError, "epsilon must be"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="01012"), ValueError, "4 characters 0/1"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start=[0.1, 0.2, 0.3]), ValueError, r"shape \(4,\)"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start=[0.1, 1.2, 0.3, 0.0]), ValueError, r"in \[0, 1\]"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start=[0.1, float("nan"), 0.3, 0.0]), ValueError,
         r"in \[0, 1\]"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start=torch.zeros(4, dtype=torch.complex64)), TypeError,
         "must be real"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start={0: 1}), TypeError, "expected a bitstring"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start=torch.zeros(2, 4)), ValueError, r"shape \(4,\)"),
        (lambda: opt.qaoa([problem, problem], 1, mixer="warm", warm_start=torch.zeros(3, 4)), ValueError,
         r"\(2, 4\)"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", symmetry=True), ValueError,
         "not invariant under flipping all bits"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", mixer_kernel="real"), ValueError,
         "mixer_kernel='real'"),
        (lambda: opt.qaoa(problem, 1, mixer="warm", warm_start="0101", mixer_kernel="fast"), ValueError,
         "mixer_kernel must be one of"),
        (lambda: opt.warm_start_qaoa(["not a problem"], 1), TypeError, "expected a Problem"),
        (lambda: opt.default_warm_start("0101"), TypeError, "expected a Problem"),
        (lambda: opt.warm_start_qaoa(problem, 1, warm_start="0101", generator=torch.Generator()), ValueError,
         "leave generator None"),
    ]
    for fn, err, msg in cases:
        with pytest.raises(err, match=msg):
            fn()
    # what the warm mixer does use is accepted
    m = opt.qaoa(problem, 1, mixer="warm", warm_start="0101", symmetry=False, mixer_kernel="complex", block_wires=2)
    assert not m.uses_symmetry and m.mixer_kernel == "complex" and "epsilon=0.25" in repr(m)
    assert opt.qaoa(problem, 1).mixer_kernel == "real"                 # the X mixer's default is unchanged
