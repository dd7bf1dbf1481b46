"""lightning_tasks.qaoa: QAOATask(mixer="warm"), warm-start QAOA through the Lightning Trainer.

Oracles written here: brute-force cut values, a dense NumPy warm-start QAOA state vector built
from the formulas of Egger et al. (start ⊗ (√(1-c_i), √c_i) with c clipped to [ε, 1-ε], then per
layer exp(-iγC) as phases and exp(-iβ(sin θ_i X + cos θ_i Z)), θ_i = 2 arcsin √c_i, applied axis
by axis), an independent goemans_williamson call for the default warm start, and an
uninterrupted run for the resume check.
"""
import csv
import itertools
import math

import numpy as np
import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")

from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402
from pytorch_lightning.loggers import CSVLogger  # noqa: E402

from lightning_tasks.qaoa import QAOATask, named_graph  # noqa: E402
from torchquantum_layers import optimization as opt  # noqa: E402

from .test_qaoa_task import _quiet, trainer  # noqa: E402,F401  (_quiet: the autouse warning filter)

WEIGHTED = [[0, 1, 1.0], [1, 2, 2.0], [2, 3, 0.5], [3, 0, 1.5], [0, 2, 1.0], [3, 4, 0.7]]



# ------------------------------------------------------------------------------------------------
# independent references
def cut_values(edges, n):
    """Cut weight of every bitstring, in index order (wire 0 the most significant bit)."""
    return np.array([sum((e[2] if len(e) == 3 else 1.0) for e in edges if b[e[0]] != b[e[1]])
                     for b in itertools.product([0, 1], repeat=n)])


def dense_warm_qaoa_probabilities(costs, c, epsilon, angles):
    """|ψ|² of the warm-start QAOA with angles [γ_1…γ_p, β_1…β_p] (module notes)."""
    costs = np.asarray(costs, dtype=float)
    n = len(c)
    c = np.clip(np.asarray(c, dtype=float), epsilon, 1 - epsilon)
    theta = 2 * np.arcsin(np.sqrt(c))
    psi = np.array([1.0 + 0j])
    for ci in c:
        psi = np.kron(psi, [math.sqrt(1 - ci), math.sqrt(ci)])
    X, Z, I2 = np.array([[0, 1], [1, 0]]), np.diag([1.0, -1.0]), np.eye(2)
    p = len(angles) // 2
    for g, b in zip(angles[:p], angles[p:]):
        psi = np.exp(-1j * g * costs) * psi
        t = psi.reshape((2,) * n)
        for axis in range(n):
            H = math.sin(theta[axis]) * X + math.cos(theta[axis]) * Z
            U = math.cos(b) * I2 - 1j * math.sin(b) * H            # exp(-iβH), H² = 1
            t = np.moveaxis(np.tensordot(U, t, axes=([1], [axis])), 0, axis)
        psi = t.reshape(-1)
    return np.abs(psi) ** 2


def gw_bits(edges, seed):
    res = opt.goemans_williamson(opt.maxcut(edges), generator=torch.Generator().manual_seed(seed))
    return res, [float(ch) for ch in res.bitstring]


# ------------------------------------------------------------------------------------------------
def test_expected_cost_matches_the_dense_warm_start_oracle():
    c, eps = [0.1, 0.9, 0.3, 0.5, 1.0], 0.2
    task = QAOATask(graph=WEIGHTED, p=1, n_starts=3, init="random", mixer="warm", warm_start=c, epsilon=eps,
                    dtype="complex128", seed=4)
    assert task.warm_start == c and task.gw is None and task.epsilon == eps
    cuts = cut_values(WEIGHTED, 5)
    angles = task.current_angles().detach().numpy()
    want = [-(dense_warm_qaoa_probabilities(-cuts, c, eps, a) @ cuts) for a in angles]
    assert task.expected_costs().numpy() == pytest.approx(want, abs=1e-10)
    # p = 0 reference: the warm-start product distribution itself
    summary = task.warm_start_summary()
    p0 = dense_warm_qaoa_probabilities(-cuts, c, eps, [])
    assert summary["warm_start_cost"] == pytest.approx(-(p0 @ cuts), abs=1e-10)
    assert summary["warm_start_ratio"] == pytest.approx((p0 @ cuts) / cuts.max(), abs=1e-10)
    assert "gw_cut" not in summary

    # a bitstring warm start on another problem (independent sets: explicit warm start)
    mis = QAOATask(problem="mis", graph="cycle:4", p=1, n_starts=1, mixer="warm", warm_start="1010", epsilon=0.1,
                   dtype="complex128")
    assert mis.warm_start == [1.0, 0.0, 1.0, 0.0]
    costs = mis.problem.diagonal.numpy()
    p0 = dense_warm_qaoa_probabilities(costs, mis.warm_start, 0.1, [])
    assert mis.warm_start_summary()["warm_start_cost"] == pytest.approx(p0 @ costs, abs=1e-10)


def test_default_warm_start_is_the_goemans_williamson_cut_of_the_seed():
    edges = named_graph("3regular:8:seed=2")
    cuts = cut_values(edges, 8)
    for seed in (0, 3):
        res, bits = gw_bits(edges, seed)
        task = QAOATask(graph="3regular:8:seed=2", p=1, n_starts=2, mixer="warm", seed=seed, dtype="complex128")
        assert task.hparams.warm_start is None and task.epsilon == 0.25
        assert task.warm_start == bits
        assert task.gw["bitstring"] == res.bitstring and task.gw["cut"] == res.cut
        assert task.gw["upper_bound"] == res.upper_bound and task.gw["sdp_value"] == res.sdp_value
        assert res.cut == cuts[int(res.bitstring, 2)]                                  # brute force
        assert res.upper_bound >= cuts.max() - 1e-9
        angles = task.current_angles().detach().numpy()
        want = [-(dense_warm_qaoa_probabilities(-cuts, bits, 0.25, a) @ cuts) for a in angles]
        assert task.expected_costs().numpy() == pytest.approx(want, abs=1e-10)
    # the name, in any spelling, is the same default
    named = QAOATask(graph="3regular:8:seed=2", p=1, n_starts=2, mixer="warm", warm_start="Goemans-Williamson", seed=3)
    assert named.warm_start == bits and named.hparams.warm_start == "goemans_williamson"


def test_training_improves_on_the_warm_start_and_logs_the_gw_references(tmp_path):
    edges = named_graph("3regular:8:seed=2")
    cuts = cut_values(edges, 8)
    task = QAOATask(graph="3regular:8:seed=2", p=2, n_starts=4, mixer="warm", seed=1, lr=0.05)
    trainer(30, logger=CSVLogger(tmp_path, name="w")).fit(task)
    rows = list(csv.DictReader(open(tmp_path / "w" / "version_0" / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == list(range(30))
    first = rows[0]
    res, _ = gw_bits(edges, 1)
    assert float(first["gw_cut"]) == res.cut and float(first["gw_upper_bound"]) == pytest.approx(res.upper_bound)
    assert float(first["gw_upper_bound"]) >= cuts.max() - 1e-9 >= float(first["gw_cut"]) - 1e-9
    assert float(first["gw_sdp_value"]) <= float(first["gw_upper_bound"]) + 1e-12
    # logged once, in the first row of the fit
    assert all(r["gw_cut"] == "" and r["warm_start_ratio"] == "" for r in rows[1:])
    for r in rows:
        assert float(r["ratio_to_gw"]) == pytest.approx(float(r["expected_objective"]) / res.cut, abs=1e-6)
        assert float(r["best_ratio"]) == pytest.approx(-float(r["expected_cost"]) / cuts.max(), abs=1e-6)
    p0 = float(first["warm_start_ratio"])
    c = [float(ch) for ch in res.bitstring]
    assert p0 == pytest.approx(dense_warm_qaoa_probabilities(-cuts, c, 0.25, []) @ cuts / cuts.max(), abs=1e-9)
    # training beats the warm-start state it started from (p = 0) by a wide margin
    assert task.best_ratio > p0 + 0.15
    assert float(rows[-1]["best_ratio"]) > float(rows[0]["best_ratio"])
    ev = task.evaluation()
    assert ev["gw_cut"] == res.cut and ev["ratio_to_gw"] == pytest.approx(ev["expected_objective"] / res.cut)


def test_other_problems_default_to_the_ising_sdp_warm_start(tmp_path):
    # independent set (penalties in the Ising form) and number partitioning: ising_sdp's best rounded
    # bitstring of the seed, the SDP references in the summary, the first logged row and evaluation()
    for kw in (dict(problem="mis", graph="cycle:5"), dict(problem="number_partitioning", numbers=[3, 1, 4, 2, 2])):
        for seed in (0, 2):
            task = QAOATask(p=1, n_starts=2, mixer="warm", seed=seed, dtype="complex128", **kw)
            res = opt.ising_sdp(task.problem, generator=torch.Generator().manual_seed(seed))
            assert task.warm_start == [float(ch) for ch in res.bitstring]
            assert task.gw["kind"] == "ising_sdp" and task.gw["cost"] == res.cost
            summary = task.warm_start_summary()
            assert "gw_cut" not in summary
            assert summary["sdp_cost"] == res.cost and summary["sdp_value"] == res.sdp_value
            costs = task.problem.diagonal.numpy()
            assert summary["sdp_lower_bound"] <= costs.min() + 1e-9 <= summary["sdp_cost"] + 1e-9
            assert summary["sdp_cost"] == pytest.approx(costs[int(res.bitstring, 2)], abs=1e-12)  # brute force
            angles = task.current_angles().detach().numpy()
            want = [dense_warm_qaoa_probabilities(costs, task.warm_start, 0.25, a) @ costs for a in angles]
            assert task.expected_costs().numpy() == pytest.approx(want, abs=1e-10)
        # the spelled-out default is the same
        named = QAOATask(p=1, n_starts=2, mixer="warm", warm_start="gw", seed=2, **kw)
        assert named.warm_start == task.warm_start
    trainer(3, logger=CSVLogger(tmp_path, name="m")).fit(task)
    rows = list(csv.DictReader(open(tmp_path / "m" / "version_0" / "metrics.csv")))
    assert float(rows[0]["sdp_cost"]) == task.gw["cost"] and "ratio_to_gw" not in rows[0]
    assert float(rows[0]["sdp_lower_bound"]) == pytest.approx(task.gw["lower_bound"])
    ev = task.evaluation()
    assert ev["sdp_value"] == task.gw["sdp_value"] and "ratio_to_gw" not in ev
    # a checkpoint's SDP warm start replaces the one another seed would round
    ck = {}
    task.on_save_checkpoint(ck)
    other = QAOATask(p=1, n_starts=2, mixer="warm", seed=5, **kw)
    other.on_load_checkpoint(ck)
    assert other.warm_start == task.warm_start and other.gw == task.gw


def test_resume_across_growth_reuses_the_saved_cut(tmp_path):
    kw = dict(graph=WEIGHTED, p=2, n_starts=3, grow=True, steps_per_layer=3, dtype="complex128", lr=0.02,
              mixer="warm", seed=2)
    task = QAOATask(**kw)
    ckpt = ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1, filename="{step}")
    trainer(4, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    straight = QAOATask(**kw)
    trainer(7).fit(straight)
    assert straight.depth == 2 and straight.qaoas["2"].warm_start.tolist() == straight.qaoas["1"].warm_start.tolist()

    for step, depth in ((2, 1), (4, 2)):               # before and after the growth at step 3
        path = tmp_path / f"step={step}.ckpt"
        raw = torch.load(path, weights_only=True)   # hyperparameters and the warm start are plain values
        assert raw["qaoa_depth"] == depth and raw["hyper_parameters"]["mixer"] == "warm"
        assert raw["hyper_parameters"]["warm_start"] is None and raw["hyper_parameters"]["epsilon"] is None
        assert raw["qaoa_warm_start"]["values"] == task.warm_start
        assert raw["qaoa_warm_start"]["gw"] == task.gw
        fresh = QAOATask(**raw["hyper_parameters"])
        trainer(7).fit(fresh, ckpt_path=str(path))
        assert fresh.global_step == 7 and fresh.depth == 2
        assert torch.allclose(fresh.angles, straight.angles, atol=1e-12)
        assert fresh.history == pytest.approx(straight.history, abs=1e-12)
    # the final depth-2 cost against the oracle
    cuts = cut_values(WEIGHTED, 5)
    want = [-(dense_warm_qaoa_probabilities(-cuts, straight.warm_start, 0.25, a) @ cuts)
            for a in straight.current_angles().detach().numpy()]
    assert straight.expected_costs().numpy() == pytest.approx(want, abs=1e-10)

    # the checkpoint's cut wins over a new GW run (here: a different saved cut than GW rounds now)
    raw = torch.load(tmp_path / "step=4.ckpt", weights_only=True)
    other = [1.0 - v if i == 0 else v for i, v in enumerate(raw["qaoa_warm_start"]["values"])]
    raw["qaoa_warm_start"]["values"] = other
    torch.save(raw, tmp_path / "edited.ckpt")
    loaded = QAOATask.load_from_checkpoint(tmp_path / "edited.ckpt", weights_only=True)
    assert loaded.warm_start == other and loaded.depth == 2
    assert loaded.qaoas["2"].warm_start.tolist() == [[min(max(v, 0.25), 0.75) for v in other]]
    assert torch.equal(loaded.angles, raw["state_dict"]["angles"])
    # an explicit warm start that is not the checkpoint's is refused
    with pytest.raises(ValueError, match=r"checkpoint was trained from warm_start="):
        QAOATask.load_from_checkpoint(tmp_path / "step=4.ckpt", weights_only=True, warm_start="00000")


NOISE = {"channels": [{"channel": "depolarizing", "p": 0.01, "gates": ["RZZ"]}]}


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(warm_start="0101"), ValueError, r"warm_start is the warm start of the warm-start mixer; mixer='x'"),
    (dict(epsilon=0.1), ValueError, r"epsilon regularises .* mixer='x' does not use it"),
    (dict(mixer="warm", warm_start=[0.5, 0.5, 0.5]), ValueError, r"warm_start must have one value per qubit, "
                                                                 r"shape \(4,\), got \(3,\)"),
    (dict(mixer="warm", warm_start="01010"), ValueError, r"warm_start '01010' has 5 characters.*\(4, wire 0"),
    (dict(mixer="warm", warm_start=[0.5, 1.2, 0.0, 0.3]), ValueError, r"warm_start values .* must lie in \[0, 1\]"),
    (dict(mixer="warm", warm_start="random"), ValueError, r"unknown warm_start 'random'; use 'goemans_williamson'"),
    (dict(mixer="warm", epsilon=0.7), ValueError, r"epsilon must be in \[0, 0.5\]"),
    (dict(mixer="warm", warm_start={"c": 1}), TypeError, r"warm_start must be 'goemans_williamson'"),
])
def test_refusals(kwargs, error, match):
    with pytest.raises(error, match=match):
        QAOATask(p=1, n_starts=1, **kwargs)
