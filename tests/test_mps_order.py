"""tql.mps.wire_order / bandwidth / bond_bounds / relabel / to_nodes / qaoa_circuit.

Oracles: bandwidths recomputed from the definition with list.index; known optimal bandwidths
(path 1, ring 2, r × c grid min(r, c)); QAOA states of the ORIGINAL graph written out in NumPy
(phases exp(−iγ C(x)) from cuts counted bit by bit, exp(−iβX) mixers by tensordot) for energies,
sampling distributions and Schmidt ranks; cut values of samples recounted edge by edge.
"""
import random

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import optimization as opt

METHODS = ("auto", "rcm-best", "rcm", "identity")


# -- NumPy oracle -------------------------------------------------------------------------------
def node_bits(n):
    """(2^n, n) bits of every basis index, node 0 the most significant bit."""
    idx = np.arange(2 ** n)
    return (idx[:, None] >> np.arange(n - 1, -1, -1)) & 1


def brute_cost(n, edges, fields=()):
    """C(x) of every bitstring: −(weighted cut) + Σ h_v z_v, counted term by term (z = 1 − 2x)."""
    bits = node_bits(n)
    cost = np.zeros(2 ** n)
    for e in edges:
        u, v, w = e if len(e) == 3 else (*e, 1.0)
        cost -= w * (bits[:, u] != bits[:, v])
    for v, h in fields:
        cost += h * (1 - 2 * bits[:, v])
    return cost


def qaoa_state(n, cost, gammas, betas):
    """Π_l [⊗ exp(−iβ_l X)] exp(−iγ_l C) |+⟩^n as a dense vector (node 0 most significant)."""
    psi = np.full(2 ** n, 2 ** (-n / 2), dtype=np.complex128)
    for g, b in zip(gammas, betas):
        psi = psi * np.exp(-1j * g * cost)
        rx = np.array([[np.cos(b), -1j * np.sin(b)], [-1j * np.sin(b), np.cos(b)]])
        t = psi.reshape([2] * n)
        for w in range(n):
            t = np.moveaxis(np.tensordot(rx, t, axes=([1], [w])), 0, w)
        psi = t.reshape(-1)
    return psi


def random_graph(n, m, seed, weighted=True):
    rng = random.Random(seed)
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    rng.shuffle(pairs)
    chosen = pairs[:m]
    return [(u, v, round(rng.uniform(0.3, 2.0), 3)) if weighted else (u, v) for u, v in chosen]


def shuffled(edges, n, seed):
    perm = list(range(n))
    random.Random(seed).shuffle(perm)
    return [(perm[u], perm[v]) for u, v in edges]


def brute_bandwidth(edges, order):
    return max((abs(order.index(e[0]) - order.index(e[1])) for e in edges), default=0)


def grid(r, c):
    at = lambda i, j: i * c + j    # noqa: E731
    return ([(at(i, j), at(i, j + 1)) for i in range(r) for j in range(c - 1)]
            + [(at(i, j), at(i + 1, j)) for i in range(r - 1) for j in range(c)])


# -- orders are permutations; bandwidth by definition ---------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_every_method_returns_a_permutation_also_with_components_and_isolated_nodes(method):
    for n, edges in [(12, random_graph(12, 18, 1)),
                     (9, [(0, 4), (4, 8), (1, 3), (3, 5), (5, 1)]),          # two components + isolated
                     (30, opt.random_regular_graph(3, 30, seed=2)),
                     (5, [])]:
        order = tql.mps.wire_order(edges, n_nodes=n, method=method)
        assert sorted(order) == list(range(n)) and all(type(v) is int for v in order)


def test_bandwidth_and_edge_spans_match_the_definition_under_random_orders():
    edges = random_graph(11, 20, 3)
    for seed in range(8):
        order = list(range(11))
        random.Random(seed).shuffle(order)
        assert tql.mps.bandwidth(edges, order) == brute_bandwidth(edges, order)
        assert tql.mps.edge_spans(edges, order) == [abs(order.index(u) - order.index(v)) for u, v, _ in edges]
    assert tql.mps.bandwidth(edges) == max(abs(u - v) for u, v, _ in edges)     # order=None: identity
    assert tql.mps.bandwidth([], n_nodes=4) == 0


def test_all_graph_formats_give_the_same_order():
    edges = random_graph(10, 16, 4)
    ref = tql.mps.wire_order(edges)
    assert tql.mps.wire_order(opt.as_graph(edges)) == ref
    assert tql.mps.wire_order({(u, v): w for u, v, w in edges}) == ref
    assert tql.mps.wire_order(torch.tensor(edges)) == ref
    assert tql.mps.wire_order(np.array([(u, v) for u, v, _ in edges])) == ref
    assert tql.mps.wire_order(opt.maxcut(edges)) == ref                 # a Problem: its coupled pairs
    nx = pytest.importorskip("networkx")
    g = nx.Graph()
    g.add_weighted_edges_from(edges)
    assert tql.mps.wire_order(g) == ref


# -- known optimal bandwidths ---------------------------------------------------------------------
@pytest.mark.parametrize("n", [5, 9, 24])
@pytest.mark.parametrize("method", ["rcm", "rcm-best", "auto"])
def test_a_randomly_labelled_path_gets_bandwidth_1_and_a_ring_bandwidth_2(n, method):
    path = shuffled([(i, i + 1) for i in range(n - 1)], n, seed=n)
    ring = shuffled(opt.cycle_graph(n), n, seed=n + 1)
    assert tql.mps.bandwidth(path, tql.mps.wire_order(path, method=method)) == 1
    assert tql.mps.bandwidth(ring, tql.mps.wire_order(ring, method=method)) == 2


@pytest.mark.parametrize("r,c", [(2, 5), (3, 3), (3, 6), (4, 4), (4, 7), (5, 5)])
def test_a_shuffled_grid_gets_its_optimal_bandwidth_min_r_c(r, c):
    # Chvátalová: bandwidth(P_r × P_c) = min(r, c); plain RCM may be one above it
    edges = shuffled(grid(r, c), r * c, seed=r * 10 + c)
    k = min(r, c)
    assert tql.mps.bandwidth(edges, tql.mps.wire_order(edges, method="rcm-best")) == k
    assert tql.mps.bandwidth(edges, tql.mps.wire_order(edges, method="rcm")) <= k + 1
    # "auto" minimises the bond profile instead: the grid's exact p = 1 bond stays at 2^min(r, c)
    assert max(tql.mps.bond_bounds(edges, tql.mps.wire_order(edges))) <= 2 ** k


def test_auto_never_loosens_the_bond_bound_and_beats_plain_rcm_on_random_3_regular_graphs():
    gains = []
    for n in (30, 40):
        for seed in range(3):
            edges = opt.random_regular_graph(3, n, seed=seed)
            bound = {m: max(tql.mps.bond_bounds(edges, tql.mps.wire_order(edges, method=m))) for m in METHODS}
            assert bound["auto"] <= bound["rcm-best"] <= bound["rcm"] < bound["identity"]
            gains.append(bound["rcm"] / bound["auto"])
    assert min(gains) >= 2 and max(gains) >= 16


# -- bond_bounds: Schmidt ranks of the exact state ------------------------------------------------
@pytest.mark.parametrize("p", [1, 2])
def test_bond_bounds_bound_the_schmidt_ranks_of_the_exact_qaoa_state(p):
    n = 9
    edges = random_graph(n, 13, 5)
    psi = qaoa_state(n, brute_cost(n, edges), [0.41, -0.77][:p], [0.29, 0.63][:p])
    for order in (tql.mps.wire_order(edges), list(range(n)), [3, 7, 0, 8, 1, 5, 2, 6, 4]):
        wires = psi.reshape([2] * n).transpose(order)            # axis w = node order[w]
        bounds = tql.mps.bond_bounds(edges, order, p=p)
        assert len(bounds) == n - 1
        for b in range(n - 1):
            s = np.linalg.svd(wires.reshape(2 ** (b + 1), -1), compute_uv=False)
            rank = int((s > 1e-9 * s[0]).sum())
            assert rank <= bounds[b], (order, b, rank, bounds[b])
        q = tql.mps.qaoa_circuit(opt.maxcut(edges), p, order=order, dtype=torch.complex128)
        angles = torch.tensor([[0.41, -0.77][:p] + [0.29, 0.63][:p]], dtype=torch.float64)
        state = tql.mps.run(q.circuit, angles, max_bond=1024, cutoff=1e-14)
        assert all(d <= bd for d, bd in zip(state.bond_dims, bounds))


# -- energies and samples in the original labels -------------------------------------------------
TOL = {torch.complex64: 1e-5, torch.complex128: 1e-12}      # per unit of total edge weight


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("p", [1, 2])
def test_mps_energy_with_reordered_wires_equals_the_exact_energy_of_the_original_graph(dtype, p):
    n = 10
    edges = random_graph(n, 15, 6)
    gammas, betas = [0.37, -0.52][:p], [0.81, 0.24][:p]
    psi = qaoa_state(n, brute_cost(n, edges), gammas, betas)
    exact = float(np.sum(np.abs(psi) ** 2 * brute_cost(n, edges)))
    problem = opt.maxcut(edges)
    x = torch.tensor([gammas + betas], dtype=torch.float64)
    scale = sum(w for _, _, w in edges)
    perm = list(range(n))
    random.Random(0).shuffle(perm)
    for order in ("auto", "rcm", perm):
        q = tql.mps.qaoa_circuit(problem, p, order=order, dtype=dtype)
        assert q.circuit.dtype == dtype
        energy = tql.mps.expval(q.circuit, q.hamiltonian, x=x, max_bond=64, cutoff=0.0)
        assert abs(float(energy[0]) - exact) < TOL[dtype] * scale


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=["c64", "c128"])
def test_ising_problem_with_fields_relabelled_keeps_its_exact_energy(dtype):
    n = 8
    rng = random.Random(7)
    h = [round(rng.uniform(-1, 1), 3) for _ in range(n)]
    J = {(u, v): round(rng.uniform(-1, 1), 3) for u, v, _ in random_graph(n, 12, 7)}
    z = 1 - 2 * node_bits(n)                                # spins: bit 0 ↔ +1
    cost = z @ np.array(h) + sum(c * z[:, u] * z[:, v] for (u, v), c in J.items())
    psi = qaoa_state(n, cost, [0.3], [0.7])
    exact = float(np.sum(np.abs(psi) ** 2 * cost))
    q = tql.mps.qaoa_circuit(opt.from_ising(h, J), 1, order=[7, 2, 5, 0, 3, 6, 1, 4], dtype=dtype)
    x = torch.tensor([[0.3, 0.7]], dtype=torch.float64)
    energy = tql.mps.expval(q.circuit, q.hamiltonian, x=x, max_bond=64, cutoff=0.0)
    assert abs(float(energy[0]) - exact) < TOL[dtype] * 20


def test_samples_mapped_back_follow_the_original_distribution_and_are_valid_cuts():
    n = 6
    edges = [(0, 1, 1.7), (1, 2, 0.4), (2, 3, 1.1), (3, 4, 0.6), (4, 5, 1.9), (0, 3, 0.8), (1, 5, 1.3)]
    gamma, beta = 0.52, 0.33
    cost = brute_cost(n, edges)
    probs = np.abs(qaoa_state(n, cost, [gamma], [beta])) ** 2
    problem = opt.maxcut(edges)
    order = [4, 0, 5, 2, 1, 3]
    q = tql.mps.qaoa_circuit(problem, 1, order=order, dtype=torch.complex128)
    state = tql.mps.run(q.circuit, torch.tensor([[gamma, beta]], dtype=torch.float64), max_bond=64, cutoff=0.0)
    shots = 20000
    wire_bits = state.sample(shots, torch.Generator().manual_seed(3))[0]
    bits = q.to_nodes(wire_bits).numpy()
    assert bits.shape == (shots, n) and set(np.unique(bits)) <= {0, 1}
    index = bits @ (1 << np.arange(n - 1, -1, -1))
    freq = np.bincount(index, minlength=2 ** n) / shots
    assert 0.5 * np.abs(freq - probs).sum() < 0.04
    # the same samples NOT mapped back are far off: the test can tell the labellings apart
    raw = wire_bits.numpy() @ (1 << np.arange(n - 1, -1, -1))
    assert 0.5 * np.abs(np.bincount(raw, minlength=2 ** n) / shots - probs).sum() > 0.1
    cut = np.array([sum(w for u, v, w in edges if row[u] != row[v]) for row in bits])
    assert np.allclose(problem.objective(torch.as_tensor(bits)).numpy(), cut)
    assert np.allclose(cut, -cost[index])
    assert abs(cut.mean() + float(probs @ cost)) < 5 * cut.std() / np.sqrt(shots)


def test_to_nodes_and_to_wires_are_inverse_column_permutations():
    order = [2, 0, 1]                       # wire 0 holds node 2, wire 1 node 0, wire 2 node 1
    wire_bits = torch.tensor([[1, 0, 0], [0, 1, 1]])
    assert tql.mps.to_nodes(wire_bits, order).tolist() == [[0, 0, 1], [1, 1, 0]]
    b = torch.randint(0, 2, (4, 5, 7))
    perm = [6, 3, 0, 5, 1, 4, 2]
    assert torch.equal(tql.mps.to_wires(tql.mps.to_nodes(b, perm), perm), b)
    assert torch.equal(tql.mps.to_nodes(tql.mps.to_wires(b, torch.tensor(perm)), perm), b)


# -- relabelled problems, graphs and operators ----------------------------------------------------
def test_relabelled_problem_costs_decodes_and_solves_in_the_original_labels():
    n = 7
    edges = random_graph(n, 11, 8)
    problem = opt.maxcut(edges)
    order = [5, 1, 6, 0, 3, 2, 4]
    wired = tql.mps.relabel(problem, order)
    cost = brute_cost(n, edges)
    wire_bits = torch.as_tensor(node_bits(n))               # every bitstring, read in wire order
    as_nodes = wire_bits[:, [order.index(v) for v in range(n)]].numpy()
    idx = as_nodes @ (1 << np.arange(n - 1, -1, -1))
    assert np.allclose(wired.cost(wire_bits).numpy(), cost[idx])
    assert np.allclose(wired.objective(wire_bits).numpy(), -cost[idx])
    assert np.allclose(wired.diagonal.numpy(), cost[idx])
    best = opt.exact_solution(wired)
    assert abs(best.objective + cost.min()) < 1e-9
    side0, side1 = wired.decode(best.bitstring)               # original node labels
    node = [0] * n
    for v in side1:
        node[v] = 1
    assert sum(w for u, v, w in edges if node[u] != node[v]) == pytest.approx(best.objective)
    assert wired.encode((side0, side1)) == best.index
    gw = opt.goemans_williamson(wired, generator=torch.Generator().manual_seed(0))
    assert gw.cut <= -cost.min() + 1e-9 and gw.upper_bound >= -cost.min() - 1e-6


def test_relabelled_constrained_problem_checks_feasibility_on_the_original_edges():
    edges = [(0, 1), (1, 2), (2, 3), (0, 3), (1, 3), (3, 4)]
    problem = opt.max_independent_set(edges)
    order = [3, 0, 4, 1, 2]
    wired = tql.mps.relabel(problem, order)
    wire_bits = torch.as_tensor(node_bits(5))
    nodes = wire_bits[:, [order.index(v) for v in range(5)]]          # column v: node v's bit
    independent = torch.tensor([not any(r[u] and r[v] for u, v in edges) for r in nodes.tolist()])
    assert torch.equal(wired.is_feasible(wire_bits), independent)
    assert torch.equal(wired.objective(wire_bits), nodes.sum(1).to(torch.float64))
    best = opt.exact_solution(wired)
    assert best.objective == float(nodes.sum(1)[independent].max()) == 3      # {0, 2, 4}
    assert sorted(best.solution) == [0, 2, 4]
    assert all(not (u in best.solution and v in best.solution) for u, v in edges)


def test_relabelled_graph_and_operators():
    edges = [(0, 1, 2.0), (1, 3, 0.5), (2, 3, 1.0)]
    order = [3, 1, 0, 2]                    # node 3 on wire 0, node 1 on wire 1, node 0 on wire 2, …
    g = tql.mps.relabel(edges, order)
    assert g.edge_list() == [(1, 2, 2.0), (0, 1, 0.5), (0, 3, 1.0)]
    assert tql.mps.bandwidth(g) == tql.mps.bandwidth(edges, order)
    assert tql.mps.relabel(tql.PauliString("X0 Z3"), order) == tql.PauliString("Z0 X2")
    h = tql.Hamiltonian([(0.5, "Z0 Z1"), (-1.0, "Y2"), (0.25, "")], n_wires=4)
    assert tql.mps.relabel(h, order) == tql.Hamiltonian([(0.5, "Z2 Z1"), (-1.0, "Y3"), (0.25, "")], n_wires=4)


def test_reordered_qaoa_runs_in_an_mps_quantum_layer():
    n = 8
    edges = random_graph(n, 12, 9)
    problem = opt.maxcut(edges)
    q = tql.mps.qaoa_circuit(problem, 1, dtype=torch.complex128)
    layer = tql.QuantumLayer(q.circuit, [q.hamiltonian], simulator="mps", max_bond=32, cutoff=0.0)
    x = torch.tensor([[0.4, 0.3], [-0.2, 0.9]], dtype=torch.float64)
    cost = brute_cost(n, edges)
    exact = [float(np.sum(np.abs(qaoa_state(n, cost, [g], [b])) ** 2 * cost)) for g, b in x.tolist()]
    assert torch.allclose(layer(x)[:, 0], torch.tensor(exact, dtype=torch.float64), atol=1e-9)


# -- bad input: one case each ---------------------------------------------------------------------
EDGES = [(0, 1), (1, 2), (2, 3)]


@pytest.mark.parametrize("order,error,pattern", [
    ([0, 1, 1, 3], ValueError, r"order is not a permutation: node 1 appears twice and node 2 is missing"),
    ([0, 1, 2], ValueError, r"order has 3 entries but there are 4 nodes"),
    ([0, 1, 2, 3, 4], ValueError, r"order has 5 entries"),
    ([0, 1, 2, 4], ValueError, r"order\[3\] = 4 is not a node"),
    ([0, -1, 2, 3], ValueError, r"order\[1\] = -1 is not a node"),
    ([0.0, 1.0, 2.0, 3.0], TypeError, r"order\[0\] is 0.0 \(float\)"),
    ([0, 1, "2", 3], TypeError, r"order\[2\] is '2'"),
    ([True, False, 2, 3], TypeError, r"order\[0\] is True"),
    (torch.tensor([0.0, 1.0, 2.0, 3.0]), TypeError, r"order must hold integer node labels"),
    (torch.tensor([[0, 1], [2, 3]]), ValueError, r"order must be one-dimensional"),
    ("0123", TypeError, r"order must be a sequence"),
    (7, TypeError, r"order must be a sequence"),
], ids=["repeat", "short", "long", "out-of-range", "negative", "float", "str-entry", "bool", "float-tensor",
        "2d", "string", "int"])
def test_bad_order_is_refused_naming_it(order, error, pattern):
    with pytest.raises(error, match=pattern):
        tql.mps.bandwidth(EDGES, order)


@pytest.mark.parametrize("call", ["relabel", "qaoa_circuit", "bond_bounds", "to_nodes"])
def test_every_entry_point_names_the_order_argument(call):
    bad = [0, 1, 1, 3]
    with pytest.raises(ValueError, match=rf"{call}: order is not a permutation"):
        if call == "relabel":
            tql.mps.relabel(EDGES, bad)
        elif call == "qaoa_circuit":
            tql.mps.qaoa_circuit(opt.maxcut(EDGES), 1, order=bad)
        elif call == "bond_bounds":
            tql.mps.bond_bounds(EDGES, bad)
        else:
            tql.mps.to_nodes(torch.zeros(2, 4), bad)


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="wire_order: method must be one of"):
        tql.mps.wire_order(EDGES, method="spectral")


def test_unknown_order_name_in_qaoa_circuit_is_refused():
    with pytest.raises(ValueError, match="mps.qaoa_circuit: order must be one of"):
        tql.mps.qaoa_circuit(opt.maxcut(EDGES), 1, order="best")


def test_steps_must_be_a_non_negative_int_for_auto():
    with pytest.raises(ValueError, match="wire_order: steps must be an int >= 0"):
        tql.mps.wire_order(EDGES, steps=-1)
    with pytest.raises(ValueError, match="steps refines method='auto' only"):
        tql.mps.wire_order(EDGES, method="rcm", steps=10)


def test_bits_of_the_wrong_width_are_refused():
    with pytest.raises(ValueError, match=r"to_nodes: bits must have shape \(\.\.\., 4\)"):
        tql.mps.to_nodes(torch.zeros(3, 5), [0, 1, 2, 3])


def test_a_non_problem_is_refused_by_qaoa_circuit():
    with pytest.raises(TypeError, match="mps.qaoa_circuit: problem must be a tql.optimization.Problem"):
        tql.mps.qaoa_circuit(EDGES, 1)


def test_bad_graph_is_refused_naming_the_graph():
    with pytest.raises(ValueError, match="wire_order: graph: self-loop"):
        tql.mps.wire_order([(0, 0), (0, 1)])
    with pytest.raises(TypeError, match="wire_order: graph: node label 1.5"):
        tql.mps.wire_order([(0, 1.5)])


def test_operator_wider_than_the_order_is_refused():
    with pytest.raises(ValueError, match="relabel: the operator acts on wire 4 but order has 4 entries"):
        tql.mps.relabel(tql.PauliString("Z4"), [0, 1, 2, 3])


def test_bond_bounds_p_must_be_positive():
    with pytest.raises(ValueError, match="bond_bounds: p must be an int >= 1"):
        tql.mps.bond_bounds(EDGES, p=0)
