"""Recursive QAOA (torchquantum_layers.optimization.rqaoa) against independent references.

Oracles: brute force over all 2^n bitstrings in NumPy (costs from the QUBO matrix, cut weights and
set weights from the edge lists), Ising energies evaluated in NumPy, a dense NumPy state-vector
QAOA (Kronecker products of RX, elementwise cost phases) with Z_k as Kronecker products, and
analytic correlators of basis states and of bit-flip-symmetric states.
"""
import itertools
import math
import random

import numpy as np
import pytest
import torch

from torchquantum_layers.optimization.graph_problems import max_independent_set, maxcut
from torchquantum_layers.optimization.numeric_problems import from_ising, from_qubo
from torchquantum_layers.optimization.qaoa import QAOA
from torchquantum_layers.optimization.rqaoa import (Elimination, IsingModel, expand_spins, qaoa_correlations, rqaoa,
                                                    spin_correlations)

from .conftest import REAL


# ------------------------------------------------------------------------------------------------
# independent references (NumPy)
def all_bits(n):
    """(2^n, n) bits, row b = basis state b with wire 0 the most significant bit."""
    return np.array(list(itertools.product([0, 1], repeat=n)), dtype=np.int64)


def qubo_costs(Q, offset, x):
    """offset + xᵀ Q x for rows x (any real Q; x binary)."""
    x = np.asarray(x, dtype=float)
    return offset + np.einsum("ki,ij,kj->k", x, np.asarray(Q, dtype=float), x)


def ising_energies(h, J_sym, offset, z):
    """offset + Σ h_k z_k + Σ_{k<l} J_kl z_k z_l for spin rows z (J symmetric, zero diagonal)."""
    z = np.asarray(z, dtype=float)
    h, J = np.asarray(h, dtype=float), np.asarray(J_sym, dtype=float)
    pair = sum(J[k, l] * z[:, k] * z[:, l] for k in range(len(h)) for l in range(k + 1, len(h)))
    return offset + z @ h + pair


def cut_weight(edges, bits):
    return sum(w for u, v, w in edges if bits[u] != bits[v])


def dense_qaoa_state(costs, gammas, betas):
    n = int(round(math.log2(len(costs))))
    psi = np.full(2 ** n, 2 ** (-n / 2), dtype=complex)
    for g, b in zip(gammas, betas):
        psi = np.exp(-1j * g * np.asarray(costs)) * psi
        rx = np.array([[math.cos(b), -1j * math.sin(b)], [-1j * math.sin(b), math.cos(b)]])
        M = np.array([[1.0 + 0j]])
        for _ in range(n):
            M = np.kron(M, rx)
        psi = M @ psi
    return psi


def z_operator(n, wires):
    Z, I = np.diag([1.0, -1.0]), np.eye(2)
    M = np.array([[1.0]])
    for w in range(n):
        M = np.kron(M, Z if w in wires else I)
    return M


def random_weighted_graph(n, seed, prob=0.5):
    """Seeded connected-ish random graph with integer weights 1-3 (every node on some edge)."""
    rng = random.Random(seed)
    while True:
        edges = [(u, v, rng.randint(1, 3)) for u in range(n) for v in range(u + 1, n) if rng.random() < prob]
        if len({x for e in edges for x in e[:2]}) == n:
            return edges


def random_qubo(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, (n, n), generator=g).double()


# ------------------------------------------------------------------------------------------------
# (1) the Ising form and the elimination step
@pytest.mark.parametrize("seed", range(3))
def test_ising_form_matches_the_qubo_by_brute_force(seed):
    n = 5
    Q = random_qubo(n, seed)
    model = IsingModel.from_problem(from_qubo(Q, offset=1.5))
    x = all_bits(n)
    z = 1 - 2 * x                                   # bit 0 ↔ spin +1
    np.testing.assert_allclose(ising_energies(model.h, model.J, model.offset, z), qubo_costs(Q, 1.5, x),
                               atol=1e-12)
    np.testing.assert_allclose(model.cost(torch.tensor(z)).numpy(), qubo_costs(Q, 1.5, x), atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_elimination_and_back_substitution_preserve_the_original_cost(seed):
    """Every assignment of the reduced problem, expanded by back-substitution, has the ORIGINAL cost
    (NumPy brute force) equal to the reduced cost; the expansions are exactly the 2^m assignments
    of the original that obey the imposed relations."""
    rng = random.Random(seed)
    n = 6
    Q = random_qubo(n, 100 + seed)
    offset = rng.uniform(-2, 2)
    model = IsingModel.from_problem(from_qubo(Q, offset=offset))
    history = []
    for _ in range(rng.choice([2, 3, 4])):
        m = model.n_spins
        if rng.random() < 0.35:                     # fix one spin
            k, value = rng.randrange(m), rng.choice([1, -1])
            history.append(Elimination(None, model.variables[k], value, 0.0))
            model = model.fix(k, value)
        else:                                       # impose z_l = s z_k
            k, l = sorted(rng.sample(range(m), 2))
            if rng.random() < 0.5:
                k, l = l, k                         # the kept spin may come after the eliminated one
            s = rng.choice([1, -1])
            history.append(Elimination(model.variables[k], model.variables[l], s, 0.0))
            model = model.substitute(k, l, s)
    m = model.n_spins
    reduced_z = 1 - 2 * all_bits(m)
    reduced = ising_energies(model.h, model.J, model.offset, reduced_z)
    full = expand_spins(torch.tensor(reduced_z), model.variables, history, n).numpy()
    original = qubo_costs(Q, offset, (1 - full) // 2)
    np.testing.assert_allclose(reduced, original, atol=1e-10)
    # the relations hold on every expansion, and the expansions are the solutions of the relations
    ok = np.ones(2 ** n, dtype=bool)
    allz = 1 - 2 * all_bits(n)
    for step in history:
        if step.kept is None:
            ok &= allz[:, step.eliminated] == step.value
            assert (full[:, step.eliminated] == step.value).all()
        else:
            ok &= allz[:, step.eliminated] == step.value * allz[:, step.kept]
            assert (full[:, step.eliminated] == step.value * full[:, step.kept]).all()
    assert sorted(map(tuple, full.tolist())) == sorted(map(tuple, allz[ok].tolist()))
    # the reduced model as a Problem: its diagonal is the same reduced cost (bit order: wire 0 first)
    np.testing.assert_allclose(model.problem().diagonal.numpy(), reduced, atol=1e-10)


def test_substitution_on_a_hand_example():
    # C = 1 + 2 z0 - z1 + 3 z0 z1 + 0.5 z1 z2 ; z1 = -z0  →  C = 1 - 3 + (2 + 1) z0 - 0.5 z0 z2
    model = IsingModel(torch.tensor([2.0, -1.0, 0.0], dtype=torch.float64),
                       torch.tensor([[0, 3, 0], [3, 0, 0.5], [0, 0.5, 0]], dtype=torch.float64), 1.0, (0, 1, 2))
    out = model.substitute(0, 1, -1)
    assert out.variables == (0, 2)
    assert out.offset == pytest.approx(-2.0)
    np.testing.assert_allclose(out.h.numpy(), [3.0, 0.0])
    np.testing.assert_allclose(out.J.numpy(), [[0, -0.5], [-0.5, 0]])
    # z0 = -1: C = 1 - 2 - z1 - 3 z1 + 0.5 z1 z2
    fixed = model.fix(0, -1)
    assert fixed.offset == pytest.approx(-1.0)
    np.testing.assert_allclose(fixed.h.numpy(), [-4.0, 0.0])
    np.testing.assert_allclose(fixed.J.numpy(), [[0, 0.5], [0.5, 0]])


# ------------------------------------------------------------------------------------------------
# (2) correlators
def test_spin_correlations_of_basis_states_are_their_spins(dtype):
    real = REAL[dtype]
    prob = torch.zeros(2, 16, dtype=real)
    prob[0, int("0110", 2)] = 1
    prob[1, int("1011", 2)] = 0.5
    prob[1, int("0000", 2)] = 0.5
    one, two = spin_correlations(prob)
    z0 = np.array([1, -1, -1, 1])
    z1 = np.array([-1, 1, -1, -1])
    np.testing.assert_allclose(one[0].numpy(), z0)
    np.testing.assert_allclose(two[0].numpy(), np.outer(z0, z0))
    np.testing.assert_allclose(one[1].numpy(), 0.5 * z1 + 0.5)
    np.testing.assert_allclose(two[1].numpy(), 0.5 * np.outer(z1, z1) + 0.5)


@pytest.mark.parametrize("n", [3, 4])
def test_qaoa_correlations_match_a_dense_numpy_state(n, dtype, atol, device):
    g = torch.Generator().manual_seed(n)
    h = torch.randn(n, generator=g, dtype=torch.float64)
    J = torch.triu(torch.randn(n, n, generator=g, dtype=torch.float64), 1)
    problem = from_ising(h, J, 0.3)
    p = 2
    angles = torch.randn(3, 2 * p, generator=g, dtype=torch.float64)
    model = QAOA(problem, p, dtype=dtype, device=device)
    one, two = qaoa_correlations(model, angles.to(device=device, dtype=REAL[dtype]))
    one, two = one.cpu(), two.cpu()
    z = 1 - 2 * all_bits(n)
    costs = ising_energies(h, (J + J.T).numpy(), 0.3, z)
    for s in range(3):
        psi = dense_qaoa_state(costs, angles[s, :p].tolist(), angles[s, p:].tolist())
        want1 = [np.vdot(psi, z_operator(n, {k}) @ psi).real for k in range(n)]
        want2 = [[np.vdot(psi, z_operator(n, {k}) @ z_operator(n, {l}) @ psi).real for l in range(n)] for k in range(n)]
        np.testing.assert_allclose(one[s].double().numpy(), want1, atol=5 * atol)
        np.testing.assert_allclose(two[s].double().numpy(), want2, atol=5 * atol)


def test_symmetric_cost_has_vanishing_one_point_correlators(dtype, atol):
    problem = maxcut([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)])
    model = QAOA(problem, 1, dtype=dtype)
    one, two = qaoa_correlations(model, torch.tensor([[-0.4, 0.3], [-0.9, 0.2]]).to(REAL[dtype]))
    assert float(one.abs().max()) <= 5 * atol
    assert float(two.abs().max()) > 0.05                       # the state is correlated
    torch.testing.assert_close(two, two.transpose(1, 2))


# ------------------------------------------------------------------------------------------------
# (3) RQAOA finds the optimum on small instances (brute force in NumPy)
def brute_force_min(Q_upper, offset, n):
    costs = qubo_costs(Q_upper, offset, all_bits(n))
    return costs.min()


def check_result_cost(problem, result):
    bits = np.array([[int(b) for b in result.bitstring]])
    recomputed = qubo_costs(problem.qubo, problem.offset, bits)[0]
    assert result.cost == pytest.approx(recomputed, abs=1e-9)
    assert result.subproblem_solution.cost == pytest.approx(recomputed, abs=1e-9)
    assert sorted(list(result.subproblem_variables) + [s.eliminated for s in result.history]) == \
        list(range(problem.n_qubits))
    return recomputed


@pytest.mark.parametrize("n, seed", [(6, 0), (7, 1), (8, 2)])
def test_rqaoa_solves_weighted_maxcut_exactly(n, seed, dtype):
    edges = random_weighted_graph(n, seed)
    problem = maxcut(edges)
    result = rqaoa(problem, p=1, n_cutoff=3, steps=60, dtype=dtype)
    cost = check_result_cost(problem, result)
    best_cut = max(cut_weight(edges, b) for b in all_bits(n))
    assert cost == pytest.approx(-best_cut)
    assert result.objective == pytest.approx(cut_weight(edges, [int(b) for b in result.bitstring]))
    assert result.objective == pytest.approx(best_cut)
    assert result.approximation_ratio == pytest.approx(1.0)
    assert result.n_rounds == n - 3
    # h = 0: only pair eliminations (⟨Z_k⟩ = 0 by symmetry)
    assert all(step.kept is not None and step.value in (1, -1) for step in result.history)
    assert len(result.round_costs) == n - 3
    assert result.round_costs[0] >= cost - 1e-6                 # a variational upper bound


def test_rqaoa_solves_a_qubo_with_linear_terms(dtype, device):
    Q = random_qubo(6, 1)
    problem = from_qubo(Q, offset=0.5)
    result = rqaoa(problem, n_cutoff=2, steps=60, dtype=dtype, device=device)
    cost = check_result_cost(problem, result)
    assert cost == pytest.approx(brute_force_min(Q.numpy(), 0.5, 6))
    assert result.optimum_cost == pytest.approx(cost)


def test_rqaoa_solves_a_penalty_independent_set(dtype):
    edges = [(u, v) for u, v, _ in random_weighted_graph(7, 0, 0.4)]
    problem = max_independent_set(edges)
    result = rqaoa(problem, n_cutoff=2, steps=60, dtype=dtype)
    check_result_cost(problem, result)
    chosen = [k for k, b in enumerate(result.bitstring) if b == "1"]
    assert all(not (u in chosen and v in chosen) for u, v in edges)           # independent
    best = max(sum(b) for b in all_bits(7) if all(not (b[u] and b[v]) for u, v in edges))
    assert len(chosen) == best
    assert result.feasible and result.objective == pytest.approx(best)
    assert result.solution == chosen
    # linear terms: single-spin fixes take part
    assert any(step.kept is None for step in result.history)


def test_strong_fields_are_fixed_one_spin_at_a_time():
    h = [2.0, -1.5, 1.0, -2.5, 0.7]
    J = {(0, 1): 0.2, (1, 2): -0.3, (2, 3): 0.1, (3, 4): 0.25}
    problem = from_ising(h, J)
    result = rqaoa(problem, n_cutoff=1, steps=40, dtype=torch.complex128)
    z = 1 - 2 * all_bits(5)
    Jsym = np.zeros((5, 5))
    for (i, j), v in J.items():
        Jsym[i, j] = Jsym[j, i] = v
    energies = ising_energies(h, Jsym, 0.0, z)
    assert result.cost == pytest.approx(energies.min())
    assert result.spins == (z[np.argmin(energies)]).tolist()
    assert any(step.kept is None for step in result.history)
    for step in result.history:                                # fixed spins follow sign(⟨Z⟩)
        if step.kept is None:
            assert step.value == (1 if step.correlation >= 0 else -1)


def test_lbfgs_and_deeper_circuits():
    edges = random_weighted_graph(6, 3)
    problem = maxcut(edges)
    result = rqaoa(problem, p=2, n_cutoff=2, n_starts=3, steps=15, optimizer="lbfgs", dtype=torch.complex128)
    cost = check_result_cost(problem, result)
    assert -cost == pytest.approx(max(cut_weight(edges, b) for b in all_bits(6)))


def test_constant_reduced_cost_is_eliminated_without_qaoa():
    # one edge among five nodes: after tying 0 and 1 the cost is constant
    problem = maxcut([(0, 1)], n_nodes=5)
    result = rqaoa(problem, n_cutoff=1, steps=20)
    assert result.cost == pytest.approx(-1.0)
    assert result.bitstring[0] != result.bitstring[1]
    assert result.n_rounds == 4
    assert [s.correlation for s in result.history[1:]] == [0.0, 0.0, 0.0]


# ------------------------------------------------------------------------------------------------
# (4) n_cutoff >= n; (5) determinism
def test_cutoff_at_least_n_brute_forces_everything():
    Q = random_qubo(5, 7)
    problem = from_qubo(Q)
    for cutoff in (5, 9):
        result = rqaoa(problem, n_cutoff=cutoff)
        assert result.history == [] and result.round_costs == []
        assert result.subproblem_variables == tuple(range(5))
        costs = qubo_costs(Q.numpy(), 0.0, all_bits(5))
        assert result.cost == pytest.approx(costs.min())
        assert int(result.bitstring, 2) == int(np.argmin(costs))


def test_same_seed_same_result(dtype):
    problem = maxcut(random_weighted_graph(7, 4))
    a = rqaoa(problem, n_cutoff=3, steps=30, seed=5, dtype=dtype)
    b = rqaoa(problem, n_cutoff=3, steps=30, seed=5, dtype=dtype)
    assert a.history == b.history
    assert a.bitstring == b.bitstring
    assert a.round_costs == b.round_costs


# ------------------------------------------------------------------------------------------------
# argument errors
SMALL = maxcut([(0, 1), (1, 2), (2, 0), (2, 3)])


@pytest.mark.parametrize("kwargs, error, word", [
    ({"p": 0}, ValueError, "p"),
    ({"p": 1.5}, TypeError, "p"),
    ({"n_cutoff": 0}, ValueError, "n_cutoff"),
    ({"n_cutoff": 27}, ValueError, "n_cutoff"),
    ({"n_cutoff": "3"}, TypeError, "n_cutoff"),
    ({"n_cutoff": True}, TypeError, "n_cutoff"),
    ({"n_starts": 0}, ValueError, "n_starts"),
    ({"n_starts": 2.0}, TypeError, "n_starts"),
    ({"steps": -1}, ValueError, "steps"),
    ({"steps": 1.0}, TypeError, "steps"),
    ({"optimizer": "sgd"}, ValueError, "optimizer"),
    ({"lr": -0.1}, ValueError, "lr"),
    ({"lr": float("nan")}, ValueError, "lr"),
    ({"lr": "fast"}, TypeError, "lr"),
    ({"seed": 1.5}, TypeError, "seed"),
    ({"seed": None}, TypeError, "seed"),
    ({"dtype": torch.float32}, TypeError, "dtype"),
    ({"device": "nowhere"}, ValueError, "device"),
    ({"device": 3.0}, TypeError, "device"),
])
def test_bad_arguments(kwargs, error, word):
    with pytest.raises(error, match=word):
        rqaoa(SMALL, **kwargs)


def test_bad_problem_type():
    with pytest.raises(TypeError, match="problem"):
        rqaoa([(0, 1)])
    with pytest.raises(TypeError, match="problem"):
        rqaoa(SMALL.qubo)


def test_too_many_variables_for_the_state_vector():
    big = maxcut([(k, k + 1) for k in range(30)])              # 31 nodes
    with pytest.raises(ValueError, match="31 variables"):
        rqaoa(big, n_cutoff=4)


def test_helper_argument_errors():
    with pytest.raises(TypeError, match="probabilities"):
        spin_correlations(torch.ones(1, 4, dtype=torch.complex64))
    with pytest.raises(ValueError, match="shape"):
        spin_correlations(torch.ones(4))
    with pytest.raises(ValueError, match="power of two"):
        spin_correlations(torch.ones(1, 6))
    with pytest.raises(TypeError, match="QAOA"):
        qaoa_correlations(SMALL, torch.zeros(1, 2))
    with pytest.raises(ValueError, match="cover"):
        expand_spins(torch.ones(1, 2), (0, 1), [Elimination(0, 1, 1, 0.5)], 3)
    with pytest.raises(ValueError, match="shape"):
        expand_spins(torch.ones(1, 3), (0, 1), [], 2)
