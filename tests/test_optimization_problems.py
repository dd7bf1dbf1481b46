"""Problem builders of torchquantum_layers.optimization against independent brute force.

Oracles: the natural objective of every bitstring written here with itertools (no library code),
the dense Hamiltonian of the observables module (its diagonal), and exhaustive search for optima.
Bitstrings are wire 0 first (most significant bit of the basis index).
"""
import itertools
import math

import numpy as np
import pytest
import torch

from torchquantum_layers import optimization as opt
from torchquantum_layers.optimization.problems import qubo_diagonal

PADDLE = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]


def all_bits(n):
    return list(itertools.product([0, 1], repeat=n))


def index(bits):
    return int("".join(map(str, bits)), 2)


def brute_diag(n, fn):
    out = np.zeros(2 ** n)
    for b in all_bits(n):
        out[index(b)] = fn(b)
    return torch.tensor(out)


def cut(bits, edges):
    return sum(w for u, v, w in edges if bits[u] != bits[v])


def weighted(edges, seed=0):
    rng = np.random.default_rng(seed)
    return [(u, v, float(rng.integers(1, 5))) for u, v in edges]


# ------------------------------------------------------------------------------------------------
# diagonals and Hamiltonians
def test_maxcut_diagonal_hamiltonian_and_sign_convention():
    edges = weighted(PADDLE + [(0, 2)], seed=1)
    pr = opt.maxcut(edges)
    n = 4
    want = brute_diag(n, lambda b: -cut(b, edges))          # cost = -cut (minimised)
    torch.testing.assert_close(pr.diagonal, want, rtol=0, atol=1e-12)
    # the all-Z Hamiltonian: Σ w (Z_u Z_v - 1)/2, checked through its dense matrix
    dense = pr.hamiltonian.to_dense(n).diagonal().real
    torch.testing.assert_close(dense, want, rtol=0, atol=1e-12)
    assert not pr.hamiltonian.to_dense(n).imag.any()
    for u, v, w in edges:
        coeff = dict(((p.z_mask, p.x_mask), c) for c, p in pr.hamiltonian.simplify().terms)
        assert coeff[((1 << u) | (1 << v), 0)] == pytest.approx(w / 2)
    # objective in natural units, vectorised over every bitstring
    torch.testing.assert_close(pr.objective(torch.arange(16)), -want)
    assert pr.sense == "max" and pr.objective_name == "cut weight"


def test_qubo_diagonal_split_path_matches_direct_bits():
    g = torch.Generator().manual_seed(3)
    n = 14                                       # > 12: the hi/lo GEMM split is used
    Q = torch.triu(torch.randint(-5, 6, (n, n), generator=g).double())
    d = qubo_diagonal(Q, 2.5)
    idx = torch.randint(0, 2 ** n, (300,), generator=g)
    X = ((idx[:, None] >> torch.arange(n - 1, -1, -1)) & 1).double()
    want = 2.5 + torch.einsum("ki,ij,kj->k", X, Q, X)
    torch.testing.assert_close(d[idx], want, rtol=0, atol=1e-9)


def test_ising_form_reproduces_the_cost():
    pr = opt.max_independent_set(PADDLE, node_weights=[1, 2, 3, 1])
    h, J, c = pr.ising()
    for b in all_bits(4):
        z = 1 - 2 * np.array(b)
        e = c + h.numpy() @ z + sum(J[i, j].item() * z[i] * z[j] for i in range(4) for j in range(i + 1, 4))
        assert e == pytest.approx(float(pr.diagonal[index(b)]))


def test_cost_of_bitstrings_in_every_format():
    pr = opt.maxcut(PADDLE)
    assert float(pr.cost("0101")) == -4.0
    assert pr.cost(["0101", "0000"]).tolist() == [-4.0, 0.0]
    assert float(pr.cost(5)) == -4.0
    assert pr.cost(torch.tensor([[0, 1, 0, 1], [1, 1, 1, 1]])).tolist() == [-4.0, 0.0]
    assert pr.evaluate("1010")["objective"] == 4.0


# ------------------------------------------------------------------------------------------------
# every builder: diagonal and optimum against itertools
def test_max_independent_set_brute_force():
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0), (0, 2)]
    w = [2.0, 1.0, 3.0, 1.0, 2.5]
    pr = opt.max_independent_set(edges, node_weights=w)

    def independent(b):
        return all(not (b[u] and b[v]) for u, v in edges)
    best = max((b for b in all_bits(5) if independent(b)), key=lambda b: sum(wi for wi, x in zip(w, b) if x))
    ex = opt.exact_solution(pr)
    assert ex.solution == [i for i, x in enumerate(best) if x]
    assert ex.feasible and ex.objective == pytest.approx(sum(wi for wi, x in zip(w, best) if x))
    feas = brute_diag(5, lambda b: float(independent(b))).bool()
    assert torch.equal(pr.feasible_mask(), feas)
    # on feasible bitstrings the cost is minus the set weight
    want = brute_diag(5, lambda b: -sum(wi for wi, x in zip(w, b) if x))
    torch.testing.assert_close(pr.diagonal[feas], want[feas])


def test_min_vertex_cover_brute_force():
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3), (3, 4)]
    pr = opt.min_vertex_cover(edges)

    def covers(b):
        return all(b[u] or b[v] for u, v in edges)
    best = min(sum(b) for b in all_bits(5) if covers(b))
    ex = opt.exact_solution(pr)
    assert ex.feasible and ex.objective == best
    for i in ex.indices.tolist():
        b = all_bits(5)[i]
        assert covers(b) and sum(b) == best


def test_max_clique_brute_force():
    edges = [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (2, 4), (1, 3)]
    pr = opt.max_clique(edges)
    es = {tuple(sorted(e)) for e in edges}

    def clique(b):
        nodes = [i for i, x in enumerate(b) if x]
        return all((u, v) in es for u, v in itertools.combinations(nodes, 2))
    best = max(sum(b) for b in all_bits(5) if clique(b))
    ex = opt.exact_solution(pr)
    assert ex.objective == best and clique([1 if i in ex.solution else 0 for i in range(5)])


def test_number_partitioning_brute_force():
    a = [4, 5, 6, 7, 8, 3]
    pr = opt.number_partitioning(a)
    want = brute_diag(6, lambda b: (sum(x * (1 - 2 * s) for x, s in zip(a, b))) ** 2)
    torch.testing.assert_close(pr.diagonal, want)
    ex = opt.exact_solution(pr)
    best = min(abs(sum(x * (1 - 2 * s) for x, s in zip(a, b))) for b in all_bits(6))
    assert ex.objective == best == 1
    s0, s1 = ex.solution
    assert sorted(s0 + s1) == list(range(6))
    assert abs(sum(a[i] for i in s0) - sum(a[i] for i in s1)) == best


def test_graph_colouring_brute_force():
    edges = [(0, 1), (1, 2), (0, 2), (2, 3)]
    k = 3
    pr = opt.graph_colouring(edges, k)
    assert pr.n_qubits == 12
    ex = opt.exact_solution(pr)
    colours = ex.solution
    assert all(colours[u] != colours[v] for u, v in edges) and ex.objective == 0 and ex.feasible
    # K4 is not 3-colourable: the optimum has exactly one monochromatic edge
    k4 = opt.graph_colouring(list(itertools.combinations(range(4), 2)), 3)
    ex4 = opt.exact_solution(k4)
    best = min(sum(c[u] == c[v] for u, v in itertools.combinations(range(4), 2))
               for c in itertools.product(range(3), repeat=4))
    assert ex4.feasible and ex4.objective == best == 1
    assert pr.mixer_groups == tuple(tuple(range(3 * v, 3 * v + 3)) for v in range(4))


def tsp_instance(n, seed):
    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    return np.round(np.linalg.norm(pts[:, None] - pts[None], axis=-1) * 10, 1)


def tour_length(D, tour):
    return sum(D[tour[i], tour[(i + 1) % len(tour)]] for i in range(len(tour)))


@pytest.mark.parametrize("fix_start", [True, False])
def test_tsp_brute_force(fix_start):
    n = 4 if fix_start else 3
    D = tsp_instance(n, 5)
    pr = opt.tsp(D, fix_start=fix_start)
    assert pr.n_qubits == ((n - 1) ** 2 if fix_start else n * n)
    best = min(tour_length(D, (0,) + p) for p in itertools.permutations(range(1, n)))
    ex = opt.exact_solution(pr)
    assert ex.feasible
    assert ex.objective == pytest.approx(best)
    assert tour_length(D, ex.solution) == pytest.approx(best)
    assert ex.solution[0] == 0 and sorted(ex.solution) == list(range(n))
    # on valid tours the cost is the tour length; the feasible set is the n! (or (n-1)!) permutations
    mask = pr.feasible_mask()
    assert int(mask.sum()) == math.factorial(n - 1 if fix_start else n)
    for i in torch.nonzero(mask).reshape(-1).tolist():
        tour = pr.decode(i)
        assert float(pr.diagonal[i]) == pytest.approx(tour_length(D, tour))
        assert pr.encode(tour) in ([i] if fix_start else torch.nonzero(mask).reshape(-1).tolist())


def test_portfolio_brute_force():
    mu = [0.10, 0.20, 0.15, 0.05, 0.12]
    rng = np.random.default_rng(2)
    A = rng.normal(size=(5, 5)) * 0.1
    cov = A @ A.T + 0.01 * np.eye(5)
    q, B = 0.5, 2
    pr = opt.portfolio(mu, cov, B, risk_factor=q)

    def f(b):
        x = np.array(b, float)
        return q * x @ cov @ x - np.array(mu) @ x
    feas = [b for b in all_bits(5) if sum(b) == B]
    best = min(feas, key=f)
    ex = opt.exact_solution(pr)
    assert ex.feasible and ex.solution == [i for i, x in enumerate(best) if x]
    assert ex.objective == pytest.approx(f(best))
    for b in feas:
        assert float(pr.diagonal[index(b)]) == pytest.approx(f(b))


def test_from_qubo_and_from_ising_conventions():
    Q = np.array([[1.0, -2.0, 0.5], [0.0, -1.0, 3.0], [1.0, 0.0, 2.0]])
    pr = opt.from_qubo(Q, offset=0.25)
    want = brute_diag(3, lambda b: np.array(b) @ Q @ np.array(b) + 0.25)
    torch.testing.assert_close(pr.diagonal, want)
    h = [0.5, -1.0, 0.25]
    J = np.array([[0.0, 1.0, -2.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    pi = opt.from_ising(h, J, offset=1.0)

    def energy(b):
        z = 1 - 2 * np.array(b)                 # bit 0 -> spin +1
        return 1.0 + np.array(h) @ z + z @ J @ z
    torch.testing.assert_close(pi.diagonal, brute_diag(3, energy))
    pd = opt.from_ising(h, {(0, 1): 1.0, (0, 2): -2.0, (1, 2): 0.5}, offset=1.0)
    torch.testing.assert_close(pd.diagonal, pi.diagonal)
    ex = opt.exact_solution(pi)
    assert ex.solution == [1 - 2 * x for x in all_bits(3)[ex.index]]
    # the Ising Hamiltonian has the given fields and couplings
    terms = {(p.z_mask): c for c, p in pi.hamiltonian.simplify().terms}
    assert terms[0b001] == pytest.approx(0.5) and terms[0b011] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------
# decoders
@pytest.mark.parametrize("name", ["mis", "vc", "clique", "tsp", "colouring", "portfolio"])
def test_every_decoder_returns_a_feasible_solution(name):
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (2, 4)]
    pr = {"mis": lambda: opt.max_independent_set(edges),
          "vc": lambda: opt.min_vertex_cover(edges),
          "clique": lambda: opt.max_clique(edges),
          "tsp": lambda: opt.tsp(tsp_instance(4, 1)),
          "colouring": lambda: opt.graph_colouring([(0, 1), (1, 2), (0, 2)], 3),
          "portfolio": lambda: opt.portfolio([0.1, 0.2, 0.3, 0.1], np.eye(4) * 0.1, 2)}[name]()
    n = pr.n_qubits
    mask = pr.feasible_mask()
    assert 0 < int(mask.sum()) < 2 ** n
    for i in range(2 ** n):
        sol = pr.decode(i)
        j = pr.encode(sol)
        assert bool(pr.is_feasible(j)), (name, pr.bitstring(i), sol)
        if mask[i]:
            assert j == i                      # feasible bitstrings decode unchanged
    assert bool(pr.is_feasible(opt.exact_solution(pr).index))


def test_decode_accepts_bit_lists_and_strings():
    pr = opt.max_independent_set(PADDLE)
    assert pr.decode("1010") == [0, 2] == pr.decode([1, 0, 1, 0]) == pr.decode(0b1010)
    assert pr.decode("1110") in ([0, 2], [2, 0]) or bool(pr.is_feasible(pr.encode(pr.decode("1110"))))
    assert pr.decode("1110", repair=False) == [0, 1, 2]


def test_exact_solution_lists_all_optima():
    pr = opt.maxcut(PADDLE)
    ex = opt.exact_solution(pr)
    assert ex.cost == -4 and set(ex.bitstrings) == {"0101", "1010"} and ex.objective == 4
    assert ex.worst_cost == 0


# ------------------------------------------------------------------------------------------------
# graph inputs
def test_graph_inputs_are_equivalent():
    a = opt.maxcut([(0, 1, 2.0), (1, 2), (2, 0, 3)])
    b = opt.maxcut({(0, 1): 2.0, (1, 2): 1, (0, 2): 3})
    c = opt.maxcut(torch.tensor([[0, 1, 2.0], [1, 2, 1.0], [2, 0, 3.0]]))
    d = opt.maxcut(np.array([[0, 1, 2.0], [1, 2, 1.0], [2, 0, 3.0]]))
    for p in (b, c, d):
        torch.testing.assert_close(p.diagonal, a.diagonal)
    e = opt.maxcut([(0, 1)], n_nodes=3)             # isolated node 2
    assert e.n_qubits == 3


def test_networkx_graphs():
    nx = pytest.importorskip("networkx")
    g = nx.Graph()
    g.add_edge(0, 1, weight=2.0)
    g.add_edge(1, 2)
    g.add_edge(2, 0, weight=3)
    torch.testing.assert_close(opt.maxcut(g).diagonal, opt.maxcut([(0, 1, 2.0), (1, 2), (2, 0, 3)]).diagonal)
    r = nx.random_regular_graph(3, 8, seed=1)
    assert opt.maxcut(r).n_qubits == 8
    bad = nx.Graph([(0, 1), (1, 5)])
    with pytest.raises(ValueError, match="convert_node_labels_to_integers"):
        opt.maxcut(bad)
    with pytest.raises(TypeError, match="'a' is not an int.*convert_node_labels_to_integers"):
        opt.maxcut(nx.Graph([("a", "b")]))
    with pytest.raises(ValueError, match="directed"):
        opt.maxcut(nx.DiGraph([(0, 1)]))


def test_random_regular_graph():
    for seed in range(5):
        e = opt.random_regular_graph(3, 16, seed=seed)
        assert len(e) == 24 and len(set(e)) == 24
        deg = np.bincount(np.array(e).reshape(-1), minlength=16)
        assert (deg == 3).all() and all(u < v for u, v in e)
    assert opt.random_regular_graph(3, 16, seed=7) == opt.random_regular_graph(3, 16, seed=7)
    with pytest.raises(ValueError, match="no simple 3-regular graph on 5 nodes"):
        opt.random_regular_graph(3, 5)


# ------------------------------------------------------------------------------------------------
# bad input
def test_bad_weights():
    with pytest.raises(ValueError, match=r"weight of edge \(0, 1\) is negative"):
        opt.maxcut([(0, 1, -1.0), (1, 2)])
    with pytest.raises(ValueError, match="must be finite"):
        opt.maxcut([(0, 1, float("nan")), (1, 2)])
    with pytest.raises(ValueError, match="finite"):
        opt.maxcut([(0, 1, float("inf"))])
    with pytest.raises(ValueError, match=r"node_weights\[1\] is negative"):
        opt.max_independent_set(PADDLE, node_weights=[1, -2, 1, 1])
    with pytest.raises(ValueError, match=r"node_weights\[2\] is nan"):
        opt.min_vertex_cover(PADDLE, node_weights=[1, 1, float("nan"), 1])
    with pytest.raises(ValueError, match=r"distance D\[0, 1\] is negative"):
        opt.tsp([[0, -1, 2], [1, 0, 1], [2, 1, 0]])
    with pytest.raises(ValueError, match=r"numbers\[1\] is nan"):
        opt.number_partitioning([1.0, float("nan"), 2.0])
    with pytest.raises(TypeError, match="bool"):
        opt.maxcut([(0, 1, True)])
    with pytest.raises(ValueError, match="penalty must be > 0"):
        opt.max_independent_set(PADDLE, penalty=-1)
    with pytest.warns(UserWarning, match="infeasible"):
        opt.max_independent_set(PADDLE, penalty=0.5)


def test_bad_graphs():
    with pytest.raises(ValueError, match="self-loop on node 1"):
        opt.maxcut([(0, 1), (1, 1)])
    with pytest.raises(ValueError, match=r"edge \(0, 1\) is given twice"):
        opt.maxcut([(0, 1), (1, 0)])
    with pytest.raises(ValueError, match="node 5 does not exist for n_nodes=3"):
        opt.maxcut([(0, 1), (1, 5)], n_nodes=3)
    with pytest.raises(ValueError, match="without gaps.*not 2, 3, 4.*n_nodes=6"):
        opt.max_independent_set([(0, 1), (1, 5)])
    with pytest.raises(TypeError, match="not an int"):
        opt.maxcut([(0, 1.5)])
    with pytest.raises(TypeError, match=r"\(u, v\) or \(u, v, weight\)"):
        opt.maxcut([(0, 1, 2, 3)])
    with pytest.raises(ValueError, match="no edge of positive weight"):
        opt.maxcut([(0, 1, 0.0)])
    with pytest.raises(ValueError, match="n_nodes must be >= 1"):
        opt.maxcut([], n_nodes=0)
    with pytest.raises(TypeError, match="edge list"):
        opt.maxcut(42)


def test_bad_problem_arguments():
    with pytest.raises(ValueError, match="n_colours must be >= 2"):
        opt.graph_colouring(PADDLE, 1)
    with pytest.raises(TypeError, match="n_colours must be an int"):
        opt.graph_colouring(PADDLE, 2.0)
    with pytest.raises(ValueError, match="at least 3 cities"):
        opt.tsp([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="shape"):
        opt.tsp([[0, 1, 2], [1, 0, 3]])
    with pytest.raises(ValueError, match="not positive semi-definite"):
        opt.portfolio([0.1, 0.2], [[1.0, 2.0], [2.0, 1.0]], 1)
    with pytest.raises(ValueError, match="symmetric"):
        opt.portfolio([0.1, 0.2], [[1.0, 0.5], [0.0, 1.0]], 1)
    with pytest.raises(ValueError, match="budget must be between 0 and the number of assets 2"):
        opt.portfolio([0.1, 0.2], np.eye(2), 3)
    with pytest.raises(ValueError, match="at least 2 numbers"):
        opt.number_partitioning([3.0])
    with pytest.raises(ValueError, match=r"Q must have shape square"):
        opt.from_qubo(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"J key \(0, 3\)"):
        opt.from_ising([0.0, 0.0], {(0, 3): 1.0})
    with pytest.raises(ValueError, match="bitstring '012' must have 3 characters"):
        opt.maxcut([(0, 1), (1, 2)]).cost("012")
    with pytest.raises(ValueError, match="out of range"):
        opt.maxcut([(0, 1), (1, 2)]).cost(8)


def test_too_large_for_brute_force_names_the_size_and_the_rest_works():
    n = 28
    edges = [(i, (i + 1) % n) if i < (i + 1) % n else ((i + 1) % n, i) for i in range(n)]
    pr = opt.maxcut(edges)
    with pytest.raises(ValueError, match=r"maxcut has 28 qubits \(2\*\*28 = 268,435,456 bitstrings\).*26 qubits"):
        opt.exact_solution(pr)
    # the Hamiltonian, costs of given bitstrings, objective and decoding still work
    assert len(pr.hamiltonian) == n + 1
    alt = "01" * 14
    assert float(pr.cost(alt)) == -28 and float(pr.objective(alt)) == 28
    assert pr.decode(alt)[1] == list(range(1, 28, 2))
    big = opt.maxcut([(0, 1), (30, 31)], n_nodes=32)
    with pytest.raises(ValueError, match="limit is 30 qubits"):
        big.diagonal


def test_bipartition_encode_takes_a_tuple_of_nodes_as_side_one():
    # side 1 = {1, 3} of 4 nodes is the bitstring 0101 (wire 0 first): index 5, by hand
    for pr in (opt.maxcut(PADDLE), opt.number_partitioning([1, 2, 3, 4])):
        want = index([0, 1, 0, 1])
        assert pr.encode((1, 3)) == pr.encode([1, 3]) == pr.encode({1, 3}) == want   # (1, 3) used to crash
        assert pr.encode(([0, 2], [1, 3])) == pr.encode(pr.decode("0101")) == want
        assert pr.encode(()) == 0
        with pytest.raises(TypeError, match=r"encode: expected the nodes of side 1 .* got 3"):
            pr.encode(3)


def test_named_graph_builders_check_their_size():
    assert opt.complete_graph(3) == [(0, 1), (0, 2), (1, 2)] and len(opt.cycle_graph(4)) == 4
    with pytest.raises(TypeError, match="cycle_graph: n_nodes must be an int, got 3.0"):
        opt.cycle_graph(3.0)
    with pytest.raises(ValueError, match="cycle_graph: a cycle needs at least 3 nodes, got 2"):
        opt.cycle_graph(2)
    with pytest.raises(ValueError, match="complete_graph: the graph needs at least 1 nodes, got -1"):
        opt.complete_graph(-1)
    with pytest.raises(TypeError, match="complete_graph: n_nodes must be an int"):
        opt.complete_graph("4")


# ------------------------------------------------------------------------------------------------
# audit leftovers: the TSP diagonal, decoding arrays, optima that violate the constraints
def test_tsp_ignores_whatever_the_diagonal_holds():
    D = tsp_instance(4, 3)
    ref = opt.tsp(D)
    for fill in (float("inf"), float("nan"), 7.0, -3.0):
        E = np.array(D, dtype=float)
        np.fill_diagonal(E, fill)
        pr = opt.tsp(E)
        torch.testing.assert_close(pr.diagonal, ref.diagonal, rtol=0, atol=0)
        best = min(tour_length(np.array(D), (0,) + p) for p in itertools.permutations(range(1, 4)))
        assert opt.exact_solution(pr).objective == pytest.approx(best)
    E = np.array(D, dtype=float)
    E[1, 2] = float("inf")                                     # off the diagonal it is still an error
    with pytest.raises(ValueError, match=r"distances\[1, 2\] is inf"):
        opt.tsp(E)
    E[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"distances\[1, 2\] is nan"):
        opt.tsp(E)


def test_decode_takes_numpy_and_bool_bit_arrays():
    pr = opt.max_independent_set(PADDLE)
    want = pr.decode("1010")
    assert want == [0, 2]
    for bits in (np.array([1, 0, 1, 0]), np.array([1.0, 0.0, 1.0, 0.0]), np.array([True, False, True, False]),
                 torch.tensor([True, False, True, False]), [True, False, True, False], (1, 0, 1, 0),
                 np.array([[1, 0, 1, 0]]), np.int64(0b1010), torch.tensor(0b1010)):
        assert pr.decode(bits) == want, bits
    assert pr.decode(np.array([1, 1, 1, 0]), repair=False) == [0, 1, 2]
    with pytest.raises(ValueError, match=r"max_independent_set.decode: 4 values are read as the bits of one "
                                         r"bitstring .*bit 2 is 2, not 0 or 1"):
        pr.decode(np.array([1, 0, 2, 0]))
    with pytest.raises(ValueError, match=r"max_independent_set.decode: give one bitstring: 4 bits 0/1.*got 3 values"):
        pr.decode(np.array([1, 0, 1]))
    with pytest.raises(TypeError, match=r"max_independent_set.decode: expected one bitstring"):
        pr.decode(object())


def test_exact_solution_warns_when_the_optimum_is_infeasible():
    import warnings
    # TSP: with penalty 0.1 the empty assignment (only the pinned city 0, cost = 0 + 6 * 0.1 of
    # broken one-hot rows and columns, by hand) beats every tour (length >= 5)
    D = [[0, 1, 4, 2], [1, 0, 1, 5], [4, 1, 0, 1], [2, 5, 1, 0]]
    pr = opt.tsp(D, penalty=0.1)
    assert float(pr.cost(0)) == pytest.approx(0.6)
    with pytest.warns(UserWarning, match=r"exact_solution: the minimum of the tsp cost .* violates the constraints: "
                                         r"the penalty 0.1 is too small.*ratios .* are meaningless"):
        ex = opt.exact_solution(pr)
    assert not ex.feasible
    # portfolio: choosing every asset pays 0.01 * (3 - 1)^2 = 0.04 and gains 6, by hand
    pr = opt.portfolio([1.0, 2.0, 3.0], np.eye(3) * 0.01, 1, penalty=0.01)
    with pytest.warns(UserWarning, match=r"the minimum of the portfolio cost \(bitstring 111.*penalty 0.01 is too small"):
        assert not opt.exact_solution(pr).feasible
    # the default penalties keep the optimum feasible: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert opt.exact_solution(opt.tsp(D)).feasible
        assert opt.exact_solution(opt.portfolio([1.0, 2.0, 3.0], np.eye(3) * 0.01, 1)).feasible
