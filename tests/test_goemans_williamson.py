"""Goemans–Williamson MaxCut (optimization.goemans_williamson) against closed forms and brute force.

Oracles: the SDP optimum of the 5-cycle, (5/2)(1 + cos(π/5)) = 25/8 + 5√5/8 (a regular pentagram in
the plane); of the complete graph K_n, n²/4 for every n (Σ_{i<j}(1 - v_i·v_j)/2 = n²/4 - |Σ v_i|²/4,
largest at Σ v_i = 0); of a bipartite graph, the total weight (= its max cut); the SDP is a
relaxation, so on random weighted graphs it is at least the brute-force max cut; the rounding
constant α = min 2θ / (π (1 - cos θ)) by scipy; cut values recomputed here edge by edge from the
returned bitstrings; the mean rounded cut at least 0.878 × max cut.
"""
import itertools
import math
import random

import pytest
import torch

from torchquantum_layers import optimization as opt

K33 = [(u, v) for u in range(3) for v in range(3, 6)]
CUBE = [(0, 1), (1, 3), (3, 2), (2, 0), (4, 5), (5, 7), (7, 6), (6, 4), (0, 4), (1, 5), (2, 6), (3, 7)]


def seeded(s=0):
    return torch.Generator().manual_seed(s)


def cut_of(bits, edges):
    return sum(w for u, v, w in edges if bits[u] != bits[v])


def brute_max_cut(n, edges):
    return max(cut_of(b, edges) for b in itertools.product([0, 1], repeat=n))


def random_weighted_graph(n, seed, density=0.6):
    rng = random.Random(seed)
    edges = [(u, v, round(rng.uniform(0.1, 3.0), 3)) for u in range(n) for v in range(u + 1, n)
             if rng.random() < density]
    if not edges:
        edges = [(0, 1, 1.0)]
    return edges


def test_five_cycle_sdp_value():
    r = opt.goemans_williamson(opt.cycle_graph(5), generator=seeded())
    want = 25 / 8 + 5 * math.sqrt(5) / 8
    assert want == pytest.approx(2.5 * (1 + math.cos(math.pi / 5)), abs=1e-14)
    assert r.sdp_value == pytest.approx(want, abs=1e-9)
    assert r.upper_bound == pytest.approx(want, abs=1e-7) and r.upper_bound >= r.sdp_value
    assert r.converged and r.gap >= 0
    assert r.cut == 4 and r.mean_cut == pytest.approx(4.0)    # every line through the pentagram cuts 4 edges
    # rank 2 is enough for the cycle (its optimum is planar)
    assert opt.goemans_williamson(opt.cycle_graph(5), rank=2, generator=seeded()).sdp_value == pytest.approx(want, abs=1e-8)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 11])
def test_complete_graph_sdp_value_is_n_squared_over_four(n):
    r = opt.goemans_williamson(opt.complete_graph(n), generator=seeded(n))
    assert r.sdp_value == pytest.approx(n * n / 4, abs=1e-8)
    assert r.upper_bound == pytest.approx(n * n / 4, abs=1e-6)
    assert r.cut == (n // 2) * (n - n // 2)                       # the balanced cut, the max cut of K_n
    torch.testing.assert_close(r.vectors.sum(0), torch.zeros(r.rank, dtype=torch.float64), atol=1e-4, rtol=0)


@pytest.mark.parametrize("edges", [K33, CUBE, opt.cycle_graph(8), [(0, 3, 2.5), (0, 4, 0.5), (1, 3, 1.0), (2, 4, 3.0),
                                                                    (1, 5, 1.5), (2, 5, 0.25)]],
                         ids=["K33", "cube", "C8", "weighted-bipartite"])
def test_bipartite_sdp_is_the_total_weight_and_the_cut_is_found(edges):
    r = opt.goemans_williamson(edges, generator=seeded())
    total = sum(e[2] if len(e) == 3 else 1.0 for e in edges)
    assert r.sdp_value == pytest.approx(total, abs=1e-8)
    assert r.upper_bound == pytest.approx(total, abs=1e-6)
    assert r.cut == pytest.approx(total) and r.mean_cut == pytest.approx(total)     # every hyperplane cuts all


@pytest.mark.parametrize("seed", range(6))
def test_random_weighted_graphs_against_brute_force(seed):
    n = 5 + seed % 5
    edges = random_weighted_graph(n, seed)
    problem = opt.maxcut(edges, n_nodes=n)
    best = brute_max_cut(n, edges)
    assert opt.exact_solution(problem).objective == pytest.approx(best)
    r = opt.goemans_williamson(problem, rounds=4000, generator=seeded(seed))
    scale = sum(w for *_, w in edges)
    assert r.sdp_value >= best - 1e-9 * scale                   # a relaxation
    assert r.upper_bound >= r.sdp_value and r.gap <= 1e-6 * scale
    # the vectors: unit rows, and the value is their SDP objective (recomputed here)
    V = r.vectors
    assert V.shape == (n, math.ceil(math.sqrt(2 * n)) + 1) and r.rank == V.shape[1]
    torch.testing.assert_close(V.norm(dim=1), torch.ones(n, dtype=torch.float64), atol=1e-12, rtol=0)
    assert r.sdp_value == pytest.approx(sum(w * (1 - float(V[u] @ V[v])) / 2 for u, v, w in edges), abs=1e-10)
    # cuts recomputed from the bitstrings
    assert r.cut == pytest.approx(cut_of([int(b) for b in r.bitstring], edges), abs=1e-12)
    for s in r.bitstrings:
        assert cut_of([int(b) for b in s], edges) == pytest.approx(r.cut, abs=1e-12)
    assert r.bits.tolist() == [int(b) for b in r.bitstring]
    assert r.cut <= best + 1e-12 and r.cut == pytest.approx(float(r.cuts.max()))
    assert r.cuts.shape == (4000,)
    # the 0.878 guarantee: exactly in expectation over hyperplanes, and for the sample mean with margin
    assert r.expected_cut >= opt.GW_ALPHA * r.sdp_value - 1e-12
    assert r.guarantee_ratio >= opt.GW_ALPHA - 1e-12
    assert r.mean_cut >= 0.878 * best
    assert r.mean_cut == pytest.approx(r.expected_cut, abs=0.05 * scale)   # Monte Carlo, 4000 hyperplanes
    assert r.ratio_lower_bound() <= r.cut / best + 1e-12


def test_gw_alpha_is_the_minimum_of_the_rounding_ratio():
    scipy_opt = pytest.importorskip("scipy.optimize")
    res = scipy_opt.minimize_scalar(lambda t: 2 * t / (math.pi * (1 - math.cos(t))), bounds=(1.0, math.pi),
                                    method="bounded", options={"xatol": 1e-12})
    assert opt.GW_ALPHA == pytest.approx(res.fun, abs=1e-12)
    assert opt.GW_ALPHA == pytest.approx(0.87856720578, abs=1e-11)


def test_the_certificate_bounds_the_sdp_even_when_the_solver_stops_early():
    want = 25 / 8 + 5 * math.sqrt(5) / 8
    r = opt.goemans_williamson(opt.cycle_graph(5), restarts=1, max_iter=1, generator=seeded(3))
    assert not r.converged and r.iterations == 1
    assert r.sdp_value < want - 1e-6 <= r.upper_bound


def test_input_forms_give_the_same_result():
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 3, 0.5), (3, 0, 1.5), (0, 2, 1.0)]
    ref = opt.goemans_williamson(edges, generator=seeded(7))
    forms = [opt.maxcut(edges), opt.as_graph(edges), {(u, v): w for u, v, w in edges}, torch.tensor(edges)]
    nx = pytest.importorskip("networkx")
    g = nx.Graph()
    g.add_weighted_edges_from(edges)
    forms.append(g)
    for form in forms:
        r = opt.goemans_williamson(form, generator=seeded(7))
        assert r.bitstring == ref.bitstring and r.sdp_value == pytest.approx(ref.sdp_value, abs=1e-12)
        torch.testing.assert_close(r.cuts, ref.cuts)
    # isolated nodes through n_nodes
    r = opt.goemans_williamson(edges, n_nodes=6, generator=seeded(7))
    assert r.n_nodes == 6 and r.vectors.shape[0] == 6 and len(r.bitstring) == 6
    assert r.sdp_value == pytest.approx(ref.sdp_value, abs=1e-8)
    assert "GoemansWilliamsonResult(n_nodes=6" in repr(r)


def test_seeded_runs_repeat():
    edges = opt.random_regular_graph(3, 12, seed=2)
    a = opt.goemans_williamson(edges, generator=seeded(5))
    b = opt.goemans_williamson(edges, generator=seeded(5))
    assert a.bitstrings == b.bitstrings and torch.equal(a.cuts, b.cuts) and torch.equal(a.vectors, b.vectors)


def test_invalid_input_is_refused():
    tri = [(0, 1), (1, 2), (0, 2)]
    cases = [
        (lambda: opt.goemans_williamson([(0, 1, 1.0), (1, 2, -1.0)]), ValueError, "negative"),
        (lambda: opt.goemans_williamson([], n_nodes=3), ValueError, "no edge of positive weight"),
        (lambda: opt.goemans_williamson([(0, 1, 0.0)]), ValueError, "no edge of positive weight"),
        (lambda: opt.goemans_williamson([]), ValueError, "no nodes"),
        (lambda: opt.goemans_williamson(opt.from_qubo([[1.0, 2.0], [0.0, 1.0]])), ValueError, "solves MaxCut"),
        (lambda: opt.goemans_williamson(opt.maxcut(tri), n_nodes=4), ValueError, "n_nodes is read from"),
        (lambda: opt.goemans_williamson("0-1"), TypeError, "got a string"),
        (lambda: opt.goemans_williamson(torch.zeros(3, 4)), ValueError, r"shape \(m, 2\) or \(m, 3\)"),
        (lambda: opt.goemans_williamson(tri, rank=1), ValueError, "rank must be >= 2"),
        (lambda: opt.goemans_williamson(tri, rank=2.5), TypeError, "rank must be an int"),
        (lambda: opt.goemans_williamson(tri, rank=True), TypeError, "rank must be an int"),
        (lambda: opt.goemans_williamson(tri, rounds=0), ValueError, "rounds must be >= 1"),
        (lambda: opt.goemans_williamson(tri, restarts=0), ValueError, "restarts must be >= 1"),
        (lambda: opt.goemans_williamson(tri, max_iter=0), ValueError, "max_iter must be >= 1"),
        (lambda: opt.goemans_williamson(tri, tol=0.0), ValueError, "tol must be a positive"),
        (lambda: opt.goemans_williamson(tri, tol=float("nan")), ValueError, "tol must be a positive"),
        (lambda: opt.goemans_williamson(tri, generator=0), TypeError, "generator must be a torch.Generator"),
    ]
    for fn, err, msg in cases:
        with pytest.raises(err, match=msg):
            fn()


# ------------------------------------------------------------------------------------------------
# MaxCut results are those of the implementation before ising_sdp shared its solver (saved outputs)
@pytest.mark.parametrize("graph, seed, sdp, upper, strings, mean, expected", [
    (opt.cycle_graph(5), 0, 4.522542485937369, 4.522542485958997,
     ['11010', '10100', '10110', '10010', '01101', '01010', '00101', '01011', '10101', '01001'], 4.0, 4.0),
    (opt.random_regular_graph(3, 12, seed=2), 5, 16.49285945771046, 16.492859458195003,
     ['010101001011', '101010110100', '000101011011', '111010100100'], 15.2998046875, 15.287616117175764),
    (opt.random_regular_graph(3, 10, seed=1), 0, 13.101475511960402, 13.10147551200545,
     ['1110110000', '0001001111'], 12.169921875, 12.193960843865007),
], ids=["C5", "3reg12", "3reg10"])
def test_maxcut_results_are_unchanged(graph, seed, sdp, upper, strings, mean, expected):
    r = opt.goemans_williamson(graph, generator=seeded(seed))
    assert r.sdp_value == pytest.approx(sdp, abs=1e-12) and r.upper_bound == pytest.approx(upper, abs=1e-12)
    assert r.bitstrings == strings
    assert r.mean_cut == pytest.approx(mean, abs=1e-12) and r.expected_cut == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# ising_sdp: the same SDP on any problem's Ising form, in cost units
def rounded_costs_ok(problem, r):
    """bound <= SDP <= min cost <= every rounded cost; costs recomputed from the bitstrings."""
    best = opt.exact_solution(problem).cost
    scale = max(1.0, float(problem.diagonal.abs().max()))
    assert r.lower_bound <= r.sdp_value <= best + 1e-9 * scale
    assert 0 <= r.gap <= 1e-6 * scale and r.converged
    assert r.cost >= best - 1e-9 * scale and r.optimality_gap >= r.cost - best - 1e-12
    assert r.cost == pytest.approx(float(problem.cost(r.bitstring)), abs=1e-12)
    for s in r.bitstrings:
        assert float(problem.cost(s)) == pytest.approx(r.cost, abs=1e-9 * scale)
    assert float(r.costs.min()) == pytest.approx(r.cost) and bool((r.costs >= best - 1e-9 * scale).all())
    assert r.bits.tolist() == [int(b) for b in r.bitstring]
    # unit vectors: row 0 the reference, and the value is the SDP objective recomputed from them
    n = problem.n_qubits
    V = r.vectors
    assert V.shape == (n + 1, r.rank)
    torch.testing.assert_close(V.norm(dim=1), torch.ones(n + 1, dtype=torch.float64), atol=1e-12, rtol=0)
    h, J, c = problem.ising()
    G = V @ V.T
    value = c + float(h @ G[0, 1:]) + float((torch.triu(J, 1) * G[1:, 1:]).sum())
    assert r.sdp_value == pytest.approx(value, abs=1e-10 * scale)
    # the exact expectation over hyperplanes against the sample mean
    assert r.mean_cost == pytest.approx(r.expected_cost, abs=0.06 * scale)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_ising_sdp_random_qubos_against_brute_force(seed):
    n = 4 + seed
    g = seeded(100 + seed)
    Q = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64))
    problem = opt.from_qubo(Q, offset=0.5)
    r = opt.ising_sdp(problem, rounds=2000, generator=seeded(seed))
    rounded_costs_ok(problem, r)


@pytest.mark.parametrize("seed", range(4))
def test_ising_sdp_ising_with_fields_against_brute_force(seed):
    n = 6 + seed
    g = seeded(200 + seed)
    h = torch.randn(n, generator=g, dtype=torch.float64)
    J = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64), 1) * (torch.rand(n, n, generator=g) < 0.6)
    problem = opt.from_ising(h, J, offset=-1.0)
    r = opt.ising_sdp(problem, rounds=2000, generator=seeded(seed))
    best = rounded_costs_ok(problem, r)
    # brute force over spins, independently of the problem's diagonal
    import itertools
    energies = [float(h @ torch.tensor(z, dtype=torch.float64)) + float(torch.tensor(z, dtype=torch.float64) @ J
                @ torch.tensor(z, dtype=torch.float64)) - 1.0 for z in itertools.product([1, -1], repeat=n)]
    assert best == pytest.approx(min(energies), abs=1e-10)
    assert r.lower_bound <= min(energies) + 1e-9


def test_ising_sdp_independent_set_and_number_partitioning():
    mis = opt.max_independent_set(opt.random_regular_graph(3, 8, seed=4))
    r = opt.ising_sdp(mis, generator=seeded(1))
    rounded_costs_ok(mis, r)
    assert r.feasible == bool(mis.is_feasible(r.bitstring)) and r.objective == float(mis.objective(r.bitstring))
    npp = opt.number_partitioning([3, 1, 4, 1, 5, 9, 2, 6])
    r = opt.ising_sdp(npp, generator=seeded(2))
    rounded_costs_ok(npp, r)


def test_ising_sdp_of_fields_only_is_tight():
    # C = c + Σ h_i z_i: the SDP is c - Σ|h_i| exactly (v_i = -sign(h_i) v_0), and every hyperplane rounds
    # to the optimum, bit i = 1 (z_i = -1) exactly where h_i > 0
    h = torch.tensor([1.5, -0.5, 2.0, -3.0, 0.25], dtype=torch.float64)
    problem = opt.from_ising(h, torch.zeros(5, 5), offset=2.0)
    r = opt.ising_sdp(problem, generator=seeded(0))
    want = 2.0 - float(h.abs().sum())
    assert r.sdp_value == pytest.approx(want, abs=1e-9) and r.lower_bound == pytest.approx(want, abs=1e-7)
    assert r.lower_bound <= r.sdp_value
    assert r.bitstring == "10101" and r.bitstrings == ["10101"] and r.cost == pytest.approx(want, abs=1e-12)
    assert bool((r.costs == r.cost).all()) and r.expected_cost == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["antiferromagnetic", "ferromagnetic"])
def test_ising_sdp_of_a_chain_is_tight(sign):
    # a chain has no frustration: SDP = min = c - Σ|J| and every hyperplane gives a ground state
    n = 7
    J = torch.zeros(n, n, dtype=torch.float64)
    w = torch.tensor([1.0, 0.5, 2.0, 1.5, 0.75, 1.25], dtype=torch.float64)
    for i in range(n - 1):
        J[i, i + 1] = sign * w[i]
    problem = opt.from_ising(torch.zeros(n), J, offset=0.5)
    r = opt.ising_sdp(problem, generator=seeded(3))
    want = 0.5 - float(w.sum())
    assert opt.exact_solution(problem).cost == pytest.approx(want, abs=1e-12)
    assert r.sdp_value == pytest.approx(want, abs=1e-9) and r.lower_bound == pytest.approx(want, abs=1e-7)
    assert r.cost == pytest.approx(want, abs=1e-12) and bool((r.costs - want).abs().max() < 1e-9)
    z = [1 - 2 * int(b) for b in r.bitstring]
    assert all(z[i] * z[i + 1] == -sign for i in range(n - 1))


def test_ising_sdp_of_maxcut_is_minus_the_goemans_williamson_sdp():
    for graph in (opt.cycle_graph(5), opt.random_regular_graph(3, 10, seed=1), opt.complete_graph(6)):
        problem = opt.maxcut(graph)
        gw = opt.goemans_williamson(problem, generator=seeded(0))
        r = opt.ising_sdp(problem, generator=seeded(0))
        assert r.sdp_value == pytest.approx(-gw.sdp_value, abs=1e-8)
        assert r.lower_bound == pytest.approx(-gw.upper_bound, abs=1e-6) and r.lower_bound <= -opt.exact_solution(
            problem).objective + 1e-9
        assert -r.cost <= opt.exact_solution(problem).objective + 1e-12
        assert float(problem.objective(r.bitstring)) == pytest.approx(-r.cost, abs=1e-12)


def test_ising_sdp_certificate_holds_when_the_solver_stops_early():
    g = seeded(9)
    problem = opt.from_ising(torch.randn(8, generator=g, dtype=torch.float64),
                             torch.triu(torch.randn(8, 8, generator=g, dtype=torch.float64), 1))
    best = opt.exact_solution(problem).cost
    full = opt.ising_sdp(problem, generator=seeded(0))
    early = opt.ising_sdp(problem, restarts=1, max_iter=1, generator=seeded(0))
    assert not early.converged and early.iterations == 1
    assert early.lower_bound <= full.lower_bound + 1e-9 and early.lower_bound <= best
    assert early.sdp_value > full.sdp_value + 1e-6                   # not at the optimum, yet a valid bound
    # a fixed seed repeats
    again = opt.ising_sdp(problem, generator=seeded(0))
    assert again.bitstrings == full.bitstrings and torch.equal(again.vectors, full.vectors)
    assert "IsingSDPResult(problem='ising'" in repr(full) or "IsingSDPResult(problem=" in repr(full)


def test_ising_sdp_constant_cost_and_refusals():
    const = opt.from_qubo(torch.zeros(3, 3), offset=1.5)
    r = opt.ising_sdp(const, rounds=8, generator=seeded(0))
    assert r.sdp_value == r.lower_bound == r.cost == 1.5 and r.costs.shape == (8,)
    one = opt.ising_sdp(opt.from_ising([1.0], [[0.0]]), rounds=1, generator=seeded(0))
    assert one.bitstring == "1" and one.cost == pytest.approx(-1.0) and one.costs.shape == (1,)
    tri = opt.from_qubo(torch.triu(torch.ones(3, 3)))
    cases = [
        (lambda: opt.ising_sdp([(0, 1), (1, 2)]), TypeError, "expected a Problem"),
        (lambda: opt.ising_sdp(tri, rank=1), ValueError, "rank must be >= 2"),
        (lambda: opt.ising_sdp(tri, rounds=0), ValueError, "rounds must be >= 1"),
        (lambda: opt.ising_sdp(tri, restarts=0), ValueError, "restarts must be >= 1"),
        (lambda: opt.ising_sdp(tri, tol=-1.0), ValueError, "tol must be a positive"),
        (lambda: opt.ising_sdp(tri, generator=1), TypeError, "generator must be a torch.Generator"),
        (lambda: opt.goemans_williamson(tri), ValueError, r"solves MaxCut.*ising_sdp"),
    ]
    for fn, err, msg in cases:
        with pytest.raises(err, match=msg):
            fn()
