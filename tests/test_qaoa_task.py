"""lightning_tasks.qaoa: multi-start QAOA through the Lightning Trainer.

Oracles written here: brute force over bitstrings (cuts, independent sets, partitions, tours), a
dense NumPy QAOA state vector (exp(-iγC) as phases, exp(-iβΣX) as ⊗RX(2β) applied axis by axis,
the convention of the module docstring), the INTERP formula of Zhou et al. written out by hand,
and an uninterrupted run for the resume checks.
"""
import csv
import itertools
import math
import warnings

import numpy as np
import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")

from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402
from pytorch_lightning.loggers import CSVLogger  # noqa: E402

from lightning_tasks.qaoa import QAOATask, named_graph  # noqa: E402

PADDLE = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def trainer(max_steps, **kw):
    opts = dict(accelerator="cpu", devices=1, max_steps=max_steps, max_epochs=-1, logger=False,
                enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                log_every_n_steps=1, num_sanity_val_steps=0)
    opts.update(kw)
    return pl.Trainer(**opts)


# ------------------------------------------------------------------------------------------------
# independent references
def all_bits(n):
    return [tuple(b) for b in itertools.product([0, 1], repeat=n)]       # index order, wire 0 first


def cut_value(bits, edges):
    return sum((e[2] if len(e) == 3 else 1.0) for e in edges if bits[e[0]] != bits[e[1]])


def dense_qaoa_probabilities(costs, angles):
    """|ψ|² of exp(-iβ_p ΣX) exp(-iγ_p C) … |+⟩^n with angles = [γ_1…γ_p, β_1…β_p]."""
    costs = np.asarray(costs, dtype=float)
    N = costs.size
    n = int(round(math.log2(N)))
    p = len(angles) // 2
    psi = np.full(N, 1 / math.sqrt(N), dtype=complex)
    for g, b in zip(angles[:p], angles[p:]):
        psi = np.exp(-1j * g * costs) * psi
        rx = np.array([[math.cos(b), -1j * math.sin(b)], [-1j * math.sin(b), math.cos(b)]])
        t = psi.reshape((2,) * n)
        for axis in range(n):
            t = np.moveaxis(np.tensordot(rx, t, axes=([1], [axis])), 0, axis)
        psi = t.reshape(N)
    return np.abs(psi) ** 2


# ------------------------------------------------------------------------------------------------
def test_paddle_graph_p4_expected_cut_and_optimal_bitstrings(tmp_path):
    task = QAOATask(problem="maxcut", graph="paddle", p=4, n_starts=8, dtype="complex128")
    logger = CSVLogger(tmp_path, name="qaoa")
    trainer(120, logger=logger).fit(task)

    cuts = {b: cut_value(b, PADDLE) for b in all_bits(4)}
    max_cut = max(cuts.values())
    optimal = {"".join(map(str, b)) for b, c in cuts.items() if c == max_cut}
    assert max_cut == 4 and optimal == {"0101", "1010"}

    # the library minimises C = -cut: a cut of at least 3 is a cost of at most -3
    best = task.best
    assert best.depth == 4 and best.angles.shape == (8,)
    costs = np.array([-cuts[b] for b in all_bits(4)])
    probs = dense_qaoa_probabilities(costs, best.angles.tolist())
    expected_cut = float(probs @ -costs)
    assert expected_cut >= 3.0
    assert best.expected_cost == pytest.approx(-expected_cut, abs=1e-8)
    assert best.approximation_ratio == pytest.approx(expected_cut / max_cut, abs=1e-8)
    p_opt = sum(probs[int(s, 2)] for s in optimal)
    assert best.optimum_probability == pytest.approx(p_opt, abs=1e-8)
    # the two most probable bitstrings are the two optimal cuts, and the decoded sides are a max cut
    assert set(best.top_bitstrings[:2]) == optimal
    assert best.top_probabilities[0] == pytest.approx(float(np.sort(probs)[-1]), abs=1e-8)
    side0, side1 = best.solution
    assert sorted(side0 + side1) == [0, 1, 2, 3]
    assert sum(1 for u, v in PADDLE if (u in side1) != (v in side1)) == max_cut
    assert best.objective == max_cut

    # the CSV log has the documented columns, one row per step, values of the angles before each step
    rows = list(csv.DictReader(open(tmp_path / "qaoa" / "version_0" / "metrics.csv")))
    cols = set(rows[0])
    assert {"expected_cost", "best_ratio", "optimum_probability", "expected_objective", "mean_cost", "depth"} <= cols
    cost_rows = [r for r in rows if r["expected_cost"]]
    assert len(cost_rows) == 120 == len(task.history)
    assert float(cost_rows[-1]["best_ratio"]) == pytest.approx(-float(cost_rows[-1]["expected_cost"]) / 4, abs=1e-9)
    # step 0 is the linear ramp (start 0 is unperturbed, δ = 0.75): evaluate it with the oracle
    t = (np.arange(4) + 0.5) / 4
    ramp = np.concatenate([-0.75 * t, 0.75 * (1 - t)])
    first = -float(dense_qaoa_probabilities(costs, ramp) @ costs)
    assert -float(cost_rows[0]["expected_cost"]) >= first - 1e-9        # the best start is at least the ramp
    assert task.history[-1] < task.history[0]


def test_growth_interp_schedule_and_optimizer_reset():
    edges = named_graph("3regular:8:seed=2")
    task = QAOATask(graph=edges, p=3, n_starts=4, grow=True, steps_per_layer=6, dtype="complex128")
    assert task.depth == 1 and [task.depth_at(s) for s in (0, 5, 6, 11, 12, 100)] == [1, 1, 2, 2, 3, 3]

    # INTERP by hand: p=1 → 2 gives (x1, x1); p=2 → 3 gives (x1, (x1 + x2)/2, x2)
    before = task.current_angles().detach().clone()                     # (4, 2): γ1, β1
    task.grow_to(2)
    g, b = before[:, 0], before[:, 1]
    assert torch.allclose(task.current_angles(), torch.stack([g, g, b, b], 1))
    two = task.current_angles().detach().clone()
    task.grow_to(3)
    g1, g2, b1, b2 = two.unbind(1)
    want = torch.stack([g1, (g1 + g2) / 2, g2, b1, (b1 + b2) / 2, b2], 1)
    assert torch.allclose(task.current_angles(), want)
    with pytest.raises(ValueError, match="not to 3"):
        task.grow_to(3)

    # through the Trainer: depth 1 for 6 steps, 2 for 6, then 3; Adam restarts at each growth
    task = QAOATask(graph=edges, p=3, n_starts=4, grow=True, steps_per_layer=6, dtype="complex128")
    tr = trainer(20)
    tr.fit(task)
    assert task.depth == 3 and task.global_step == 20
    assert int(tr.optimizers[0].state[task.angles]["step"]) == 20 - 12
    cuts = [cut_value(bits, edges) for bits in all_bits(8)]
    max_cut = max(cuts)
    best = task.best
    probs = dense_qaoa_probabilities(-np.array(cuts), best.angles.tolist())
    ratio = float(probs @ np.array(cuts)) / max_cut
    assert best.approximation_ratio == pytest.approx(ratio, abs=1e-8)
    # depth 3 after growth beats the best depth-1 QAOA on this graph (γ, β grid by the oracle)
    grid = np.linspace(-1.5, 0, 31), np.linspace(0, math.pi / 2, 31)
    p1_best = max(float(dense_qaoa_probabilities(-np.array(cuts), [gg, bb]) @ np.array(cuts))
                  for gg in grid[0] for bb in grid[1]) / max_cut
    assert ratio > p1_best


def test_resume_from_checkpoint_across_growth(tmp_path):
    kw = dict(graph="cycle:6", p=2, n_starts=3, grow=True, steps_per_layer=3, dtype="complex128", lr=0.02)
    task = QAOATask(**kw)
    ckpt = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1, filename="{step}")
    trainer(4, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    straight = QAOATask(**kw)
    trainer(8).fit(straight)

    for step, depth in ((2, 1), (4, 2)):            # before and after the growth at step 3
        path = tmp_path / f"step={step}.ckpt"
        raw = torch.load(path, weights_only=True)  # hyperparameters are plain values
        assert raw["global_step"] == step and raw["qaoa_depth"] == depth
        assert raw["hyper_parameters"]["graph"] == "cycle:6" and raw["hyper_parameters"]["grow"] is True
        assert len(raw["qaoa_history"]) == step
        assert not any(v.numel() >= 2 ** 6 for v in raw["state_dict"].values())   # no 2^n vectors saved
        fresh = QAOATask(**raw["hyper_parameters"])
        trainer(8).fit(fresh, ckpt_path=str(path))
        assert fresh.global_step == 8 and fresh.depth == 2 and len(fresh.history) == 8
        assert fresh.history[:step] == pytest.approx(raw["qaoa_history"])
        # identical to the uninterrupted run: angles, Adam state, growth step and best start
        assert torch.allclose(fresh.angles, straight.angles, atol=1e-12)
        assert fresh.history == pytest.approx(straight.history, abs=1e-12)
        assert torch.equal(fresh.best_angles_, straight.best_angles_)

    loaded = QAOATask.load_from_checkpoint(tmp_path / "step=4.ckpt", weights_only=True)
    assert loaded.depth == 2
    saved = torch.load(tmp_path / "step=4.ckpt", weights_only=True)["state_dict"]["angles"]
    assert torch.allclose(loaded.angles, saved)


def test_other_problems_match_brute_force():
    # number partitioning: the optimum splits [3, 1, 1, 2, 2, 1] into equal sums (5 and 5)
    nums = [3, 1, 1, 2, 2, 1]
    diffs = {b: abs(sum(a if x else -a for a, x in zip(nums, b))) for b in all_bits(6)}
    task = QAOATask(problem="number_partitioning", numbers=nums, p=2, n_starts=4, dtype="complex128")
    assert task.exact.objective == min(diffs.values()) == 0
    trainer(30).fit(task)
    s0, s1 = task.best.solution
    assert sorted(s0 + s1) == list(range(6))
    assert 0 < task.best.approximation_ratio <= 1

    # maximum independent set of the 5-cycle: size 2, five of them
    c5 = named_graph("cycle:5")
    sizes = {b: sum(b) for b in all_bits(5) if all(not (b[u] and b[v]) for u, v in c5)}
    task = QAOATask(problem="mis", graph="cycle:5", p=2, n_starts=4)
    assert task.exact.objective == max(sizes.values()) == 2 and task.exact.n_optimal == 5
    trainer(20).fit(task)
    chosen = task.best.solution
    assert all(not (u in chosen and v in chosen) for u, v in c5)       # decoded sets are independent
    assert "feasible_probability" in task.trainer.callback_metrics

    # TSP on 4 cities with the tour-exchange mixer, which never leaves the valid tours: the optimum
    # is the shortest of the 3 distinct tours
    D = [[0, 1, 4, 2], [1, 0, 1, 5], [4, 1, 0, 1], [2, 5, 1, 0]]
    length = {t: sum(D[t[i]][t[(i + 1) % 4]] for i in range(4)) for t in
              ((0,) + q for q in itertools.permutations([1, 2, 3]))}
    task = QAOATask(problem="tsp", distances=D, mixer="swap", p=1, n_starts=4)
    assert task.n_qubits == 9 and task.exact.objective == min(length.values()) == 5
    trainer(10).fit(task)
    tour = task.best.solution
    assert sorted(tour) == [0, 1, 2, 3] and tour[0] == 0
    assert float(task.trainer.callback_metrics["feasible_probability"]) == pytest.approx(1.0, abs=1e-5)

    # QUBO and Ising: minimum of x^T Q x and of h·z + z^T J z by brute force
    Q = [[-1, 2, 0], [0, -1, 2], [0, 0, -1]]
    qubo = {b: sum(Q[i][j] * b[i] * b[j] for i in range(3) for j in range(3)) for b in all_bits(3)}
    task = QAOATask(problem="qubo", Q=Q, p=1, n_starts=2)
    assert task.exact.cost == min(qubo.values()) == -2
    h, J = [0.5, -1.0], [[0, 1.0], [0, 0]]
    ising = {b: sum(hi * (1 - 2 * x) for hi, x in zip(h, b)) + (1 - 2 * b[0]) * (1 - 2 * b[1]) for b in all_bits(2)}
    task = QAOATask(problem="ising", h=h, J=J, p=1, n_starts=2)
    assert task.exact.cost == pytest.approx(min(ising.values()))


def test_named_graphs_and_plain_hyperparameters():
    g = named_graph("3regular:8:seed=2")
    deg = np.zeros(8, int)
    for u, v in g:
        deg[u] += 1
        deg[v] += 1
    assert len(g) == 12 and (deg == 3).all() and len({tuple(e) for e in g}) == 12
    assert g == named_graph("3-regular:8:seed=2") and g != named_graph("3regular:8:seed=3")
    assert named_graph("3regular:8") == named_graph("3regular:8:seed=0")
    assert len(named_graph("complete:5")) == 10 and len(named_graph("cycle:5")) == 5
    assert named_graph("paddle") == [list(e) for e in PADDLE]

    task = QAOATask(graph=torch.tensor([[0, 1, 2.0], [1, 2, 1.0]]), p=1, n_starts=2,
                    init_angles=[-0.3, 0.4])
    hp = dict(task.hparams)
    assert hp["graph"] == [[0, 1, 2.0], [1, 2, 1.0]] and isinstance(hp["graph"][0][0], int)
    assert "init_angles" not in hp
    assert torch.allclose(task.angles[0].double(), torch.tensor([-0.3, 0.4], dtype=torch.float64))

    def plain(v):
        return v is None or isinstance(v, (str, int, float, bool)) or (isinstance(v, list) and all(map(plain, v)))
    assert all(plain(v) for v in hp.values())
    # the weighted path graph 0-1 (2), 1-2 (1): max cut 3 (node 1 alone on one side)
    assert task.exact.objective == 3.0


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"p \(the number of QAOA layers\) must be >= 1, got 0"):
        QAOATask(p=0)
    with pytest.raises(ValueError, match=r"must be >= 1, got -2"):
        QAOATask(p=-2)
    with pytest.raises(TypeError, match=r"p .* must be an int, got 2.5"):
        QAOATask(p=2.5)
    with pytest.raises(ValueError, match=r"unknown problem 'maxflow'.*maxcut.*tsp"):
        QAOATask(problem="maxflow")
    with pytest.raises(ValueError, match=r"self-loop on node 1"):
        QAOATask(graph=[[0, 1], [1, 1]])
    with pytest.raises(ValueError, match=r"weight of edge \(1, 2\) is negative \(-1.0\)"):
        QAOATask(graph=[[0, 1, 1.0], [1, 2, -1.0]])
    with pytest.raises(ValueError, match=r"weight of edge \(0, 1\) is nan"):
        QAOATask(graph=[[0, 1, float("nan")], [1, 2, 1.0]])
    with pytest.raises(ValueError, match=r"edge \(0, 1\) is given twice"):
        QAOATask(graph=[[0, 1], [1, 0]])
    with pytest.raises(ValueError, match=r"unknown graph spec 'petersen'"):
        QAOATask(graph="petersen")
    with pytest.raises(ValueError, match=r"'3regular:5'.*no simple 3-regular graph on 5 nodes"):
        QAOATask(graph="3regular:5")
    with pytest.raises(ValueError, match=r"numbers is not used by problem 'maxcut'"):
        QAOATask(numbers=[1, 2])
    with pytest.raises(ValueError, match=r"problem 'tsp' needs distances"):
        QAOATask(problem="tsp")
    with pytest.raises(ValueError, match=r"distance D\[0, 1\] is negative"):
        QAOATask(problem="tsp", distances=[[0, -1, 2], [1, 0, 1], [2, 1, 0]])
    with pytest.raises(ValueError, match=r"init='fixed'.*needs problem='maxcut'"):
        QAOATask(problem="mis", init="fixed")
    with pytest.raises(ValueError, match=r"init='fixed' is tabulated for p = 1 … 4, got p=6"):
        QAOATask(init="fixed", p=6)
    with pytest.raises(ValueError, match=r"mixer='xy' needs a problem with one-hot groups"):
        QAOATask(mixer="xy")
    with pytest.raises(ValueError, match=r"diff_method must be one of adjoint, backprop.*'parameter-shift'"):
        QAOATask(diff_method="parameter-shift")
    with pytest.raises(ValueError, match=r"unknown optimizer 'newton'"):
        QAOATask(optimizer="newton")
    with pytest.raises(ValueError, match=r"n_starts must be >= 1, got 0"):
        QAOATask(n_starts=0)
    with pytest.raises(ValueError, match=r"init_angles must have shape \(6,\) or \(16, 6\)"):
        QAOATask(init_angles=[0.1, 0.2])


def test_validate_test_and_predict_evaluate_the_angles():
    # one start, the linear ramp exactly: the dense oracle gives every reported value
    task = QAOATask(problem="maxcut", graph="paddle", p=2, n_starts=1, dtype="complex128")
    t = (np.arange(2) + 0.5) / 2
    ramp = np.concatenate([-0.75 * t, 0.75 * (1 - t)])
    costs = np.array([-cut_value(b, PADDLE) for b in all_bits(4)])
    probs = dense_qaoa_probabilities(costs, ramp)
    expected_cut = float(probs @ -costs)
    optimum = sum(probs[int(s, 2)] for s in ("0101", "1010"))
    tr = trainer(1)
    (val,) = tr.validate(task, verbose=False)
    (test,) = tr.test(task, verbose=False)
    (pred,) = tr.predict(task)
    for metrics, prefix in ((val, "val_"), (test, "test_"), (pred, "")):
        assert metrics[prefix + "expected_cost"] == pytest.approx(-expected_cut, abs=1e-9)
        assert metrics[prefix + "expected_objective"] == pytest.approx(expected_cut, abs=1e-9)
        assert metrics[prefix + "best_ratio"] == pytest.approx(expected_cut / 4, abs=1e-9)
        assert metrics[prefix + "optimum_probability"] == pytest.approx(optimum, abs=1e-9)


def test_networkx_and_graph_inputs_keep_isolated_nodes():
    # the path 0-1-2 plus the isolated node 3: the maximum independent set {0, 2, 3} has size 3
    # (brute force); the task used to rebuild the graph from its edges alone and drop node 3
    edges = [(0, 1), (1, 2)]
    best = max(sum(b) for b in all_bits(4) if all(not (b[u] and b[v]) for u, v in edges))
    assert best == 3
    nx = pytest.importorskip("networkx")
    g = nx.Graph()
    g.add_nodes_from(range(4))
    g.add_edges_from(edges)
    from torchquantum_layers import optimization as opt
    for graph in (g, opt.as_graph(edges, n_nodes=4)):
        task = QAOATask(problem="mis", graph=graph, p=1, n_starts=1)
        assert task.n_qubits == 4 and task.exact.objective == best
        assert task.hparams.n_nodes == 4
        # the saved hyperparameters rebuild the same problem (a checkpoint)
        again = QAOATask(**dict(task.hparams))
        assert again.n_qubits == 4 and again.exact.objective == best


def test_best_objective_is_that_of_the_reported_solution():
    # at these angles the most probable bitstring is infeasible (all nodes chosen for MIS, none for
    # vertex cover), so decode repairs it: the reported objective must be the repaired solution's
    # (checked by counting its nodes), not the raw bitstring's (5 for MIS, more than the optimum 2)
    c5 = named_graph("cycle:5")
    for problem in ("mis", "vertex_cover"):
        task = QAOATask(problem=problem, graph="cycle:5", p=1, n_starts=1, init_angles=[0.3, 0.05],
                        dtype="complex128")
        b = task.best
        top = [int(ch) for ch in b.top_bitstrings[0]]
        if problem == "mis":
            assert any(top[u] and top[v] for u, v in c5)                      # infeasible top
            assert all(not (u in b.solution and v in b.solution) for u, v in c5)
        else:
            assert any(not (top[u] or top[v]) for u, v in c5)
            assert all(u in b.solution or v in b.solution for u, v in c5)
        assert b.objective == len(b.solution)                               # unit node weights


# ------------------------------------------------------------------------------------------------
# QNG (the Fubini–Study metric of every start's state) and SPSA (one estimate per start)
@pytest.mark.parametrize("optimizer, ratio", [("qng", 0.83), ("spsa", 0.8)])
def test_qng_and_spsa_improve_the_expected_cut(optimizer, ratio):
    # MaxCut on the 6-cycle: the maximum cut is 6 (brute force); p = 2 QAOA reaches 5 / 6 = 0.833
    edges = named_graph("cycle:6")
    cuts = np.array([cut_value(b, edges) for b in all_bits(6)])
    assert cuts.max() == 6
    task = QAOATask(graph="cycle:6", p=2, n_starts=4, noise=0.3, optimizer=optimizer, dtype="complex128")
    assert task.automatic_optimization == (optimizer != "spsa")
    trainer(20).fit(task)
    assert task.global_step == 20 and len(task.history) == 20
    best = task.best
    probs = dense_qaoa_probabilities(-cuts, best.angles.tolist())
    expected_cut = float(probs @ cuts)
    assert best.expected_cost == pytest.approx(-expected_cut, abs=1e-8)
    assert best.approximation_ratio == pytest.approx(expected_cut / 6, abs=1e-8)
    # the best start at step 0 (the oracle at the initial angles of every start) is beaten
    start = QAOATask(graph="cycle:6", p=2, n_starts=4, noise=0.3, dtype="complex128").angles.detach()
    first = max(float(dense_qaoa_probabilities(-cuts, row.tolist()) @ cuts) for row in start)
    assert -task.history[0] == pytest.approx(first, abs=1e-9)
    assert expected_cut > first + 0.3
    assert best.approximation_ratio >= ratio


def test_qng_step_at_a_lower_depth_moves_only_the_columns_it_reads():
    # growth: at depth 1 of p = 2 the angles (S, 4) = [g1, g2, b1, b2] use columns 0 and 2; one QNG
    # step there is theta - lr (g + lam I)^-1 grad on those (g, grad by central differences of the
    # dense oracle), the others stay put
    edges = named_graph("cycle:6")
    costs = -np.array([cut_value(b, edges) for b in all_bits(6)], float)
    task = QAOATask(graph="cycle:6", p=2, n_starts=2, grow=True, steps_per_layer=5, optimizer="qng", lr=0.2,
                    dtype="complex128")
    before = task.angles.detach().clone()
    trainer(1).fit(task)
    after = task.angles.detach()

    def state(x):
        n = 6
        psi = np.full(2 ** n, 2 ** (-n / 2), complex)
        psi = np.exp(-1j * x[0] * costs) * psi
        rx = np.array([[math.cos(x[1]), -1j * math.sin(x[1])], [-1j * math.sin(x[1]), math.cos(x[1])]])
        t = psi.reshape((2,) * n)
        for axis in range(n):
            t = np.moveaxis(np.tensordot(rx, t, axes=([1], [axis])), 0, axis)
        return t.reshape(-1)

    def energy(x):
        return float(np.abs(state(x)) ** 2 @ costs)
    for s in range(2):
        x = before[s, [0, 2]].numpy()
        grad = np.array([(energy(x + 1e-6 * e) - energy(x - 1e-6 * e)) / 2e-6 for e in np.eye(2)])
        D = np.array([(state(x + 1e-5 * e) - state(x - 1e-5 * e)) / 2e-5 for e in np.eye(2)])
        over = D.conj() @ state(x)
        g = (D.conj() @ D.T - np.outer(over, over.conj())).real
        want = x - 0.2 * np.linalg.solve(g + 1e-3 * np.eye(2), grad)
        np.testing.assert_allclose(after[s, [0, 2]].numpy(), want, atol=1e-6)
        assert torch.equal(after[s, [1, 3]], before[s, [1, 3]])


@pytest.mark.parametrize("optimizer", ["qng", "spsa"])
def test_qng_and_spsa_resume_exactly_across_growth(tmp_path, optimizer):
    kw = dict(graph="cycle:6", p=2, n_starts=3, grow=True, steps_per_layer=3, dtype="complex128",
              optimizer=optimizer)
    task = QAOATask(**kw)
    ckpt = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1, filename="{step}")
    trainer(4, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    straight = QAOATask(**kw)
    trainer(7).fit(straight)
    assert straight.history[-1] < straight.history[0]
    for step in (2, 4):                              # before and after the growth at step 3
        path = tmp_path / f"step={step}.ckpt"
        raw = torch.load(path, weights_only=True)
        assert raw["global_step"] == step and raw["hyper_parameters"]["optimizer"] == optimizer
        fresh = QAOATask(**raw["hyper_parameters"])
        trainer(7).fit(fresh, ckpt_path=str(path))
        assert fresh.global_step == 7 and fresh.depth == 2
        assert torch.allclose(fresh.angles, straight.angles, atol=1e-12, rtol=0)
        assert fresh.history == pytest.approx(straight.history, abs=1e-12)
        assert torch.equal(fresh.best_angles_, straight.best_angles_)
