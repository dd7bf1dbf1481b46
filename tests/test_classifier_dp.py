"""HybridClassifier(dp_clip=..., dp_noise=...): DP-SGD through a real Trainer, against independent
references: one autograd backward per sample for the per-sample gradients, a plain SGD step for the
mechanism with negligible noise and no clipping, the clipping's norm bound, automatic optimization
for the schedulers, and tql.qml.privacy.rdp_epsilon for the logged ε."""
import copy
import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

pl = pytest.importorskip("pytorch_lightning")

from lightning_tasks.classifier import HybridClassifier  # noqa: E402
from lightning_tasks.data import CirclesDataModule  # noqa: E402
from torchquantum_layers.qml import privacy  # noqa: E402

from .test_classifier import quiet_single_thread  # noqa: F401,E402  (autouse: one thread, Lightning quiet)

try:
    from lightning_fabric.utilities.exceptions import MisconfigurationException
except ImportError:                      # pragma: no cover - older Lightning layouts
    from pytorch_lightning.utilities.exceptions import MisconfigurationException


def trainer(max_epochs=None, max_steps=-1, **kw):
    return pl.Trainer(max_epochs=max_epochs, max_steps=max_steps, accelerator="cpu", devices=1, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0, **kw)


def batch(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 2, generator=g) * 2 - 1, torch.randint(0, 2, (n,), generator=g)


def loop_gradients(model, x, y):
    """{name: (B, *shape)} by one plain loss.backward() per row."""
    out = {name: [] for name, p in model.named_parameters() if p.requires_grad}
    for b in range(x.shape[0]):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x[b:b + 1]), y[b:b + 1]).backward()
        for name, p in model.named_parameters():
            if p.requires_grad:
                out[name].append(p.grad.detach().clone())
    model.zero_grad()
    return {name: torch.stack(g) for name, g in out.items()}


def one_dp_step(model, x, y):
    """Parameters before and after one DP-SGD step of a Trainer on the batch (x, y)."""
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    trainer(max_steps=1).fit(model, train_dataloaders=DataLoader(TensorDataset(x, y), batch_size=x.shape[0]))
    return before, {k: v.detach().clone() for k, v in model.named_parameters()}


def flat(d):
    return torch.cat([v.reshape(-1) for v in d.values()])


# ------------------------------------------------------------------------------------------------
def test_per_sample_gradients_equal_one_backward_per_sample():
    torch.manual_seed(1)
    model = HybridClassifier(2, 3, n_qubits=3, n_layers=2, encoding="reupload", pre_net="mlp", pre_net_hidden=5,
                             dp_clip=1.0, dp_noise=1.0)
    model.pre_net[0][0].bias.requires_grad_(False)          # frozen: no gradient, not in the update
    x, _ = batch(6)
    y = torch.tensor([0, 1, 2, 2, 1, 0])
    per, losses, logits = model.per_sample_gradients(x, y, return_outputs=True)
    ref = loop_gradients(model, x, y)
    assert set(per) == set(ref) == {k for k, p in model.named_parameters() if p.requires_grad}
    assert "pre_net.0.0.bias" not in per and any(k.startswith("quantum.") for k in per)
    for name in ref:
        torch.testing.assert_close(per[name], ref[name], atol=2e-6, rtol=1e-4, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(logits, model(x))
        torch.testing.assert_close(losses, torch.nn.functional.cross_entropy(model(x), y, reduction="none"))


@pytest.mark.parametrize("simulator", ["density", "trajectories"])
def test_per_sample_gradients_of_a_noisy_layer(simulator):
    """A noisy device (depolarizing after CNOTs, amplitude damping): on density matrices the
    per-sample gradients equal one backward per sample; on trajectories (sampled) they run, one
    independent draw per sample, and a DP step trains."""
    torch.manual_seed(2)
    noise = {"channels": [{"channel": "depolarizing", "p": 0.02, "gates": ["CNOT"]},
                          {"channel": "amplitude_damping", "gamma": 0.01}]}
    model = HybridClassifier(2, 2, n_qubits=3, n_layers=1, noise=noise, simulator=simulator,
                             dp_clip=1.0, dp_noise=1.0)
    x, _ = batch(4)
    y = torch.tensor([0, 1, 1, 0])
    per = model.per_sample_gradients(x, y)
    if simulator == "density":
        ref = loop_gradients(model, x, y)
        for name in ref:
            torch.testing.assert_close(per[name], ref[name], atol=2e-6, rtol=1e-4, msg=name)
    else:
        assert all(torch.isfinite(g).all() and g.shape[0] == 4 for g in per.values())
    before, after = one_dp_step(model, x, y)
    assert not torch.equal(flat(before), flat(after))


def test_tiny_noise_and_a_large_clip_give_a_plain_sgd_step():
    """σ = 1e-7 and C = 100 (above every per-sample norm): the DP update is the SGD step on the
    batch-mean loss up to noise of std lr·σC/B = 6.25e-7 per coordinate."""
    torch.manual_seed(0)
    model = HybridClassifier(2, 2, n_qubits=4, n_layers=2, optimizer="SGD", lr=0.5, dp_clip=100.0, dp_noise=1e-7)
    x, y = batch(8)
    assert flat(loop_gradients(model, x, y)).reshape(8, -1).norm(dim=1).max() < 100.0
    plain = copy.deepcopy(model)
    torch.nn.functional.cross_entropy(plain(x), y).backward()
    expected = {k: (p - 0.5 * p.grad).detach() for k, p in plain.named_parameters()}
    before, after = one_dp_step(model, x, y)
    assert not torch.equal(flat(after), flat(before))
    for k in expected:
        torch.testing.assert_close(after[k], expected[k], atol=1e-5, rtol=0, msg=k)
    assert model.dp_steps == 1


def test_a_small_clip_clips_every_sample_and_bounds_the_update():
    """Δθ = −(lr/B)(Σ_i c_i + σC z), ‖c_i‖ ≤ C, z ~ N(0, I_P). So ‖Δθ‖ ≤ lr·C·(1 + σ‖z‖/B), and
    ‖z‖ ≤ √P + t except with probability e^{−t²/2} (t = 8: 1e-14). With σ tiny the update is
    −(lr/B) Σ_i C g_i/‖g_i‖ exactly; with σ = 1 the noise part has norm ≈ lr·σC√P/B."""
    lr, C, B = 20.0, 1e-3, 8              # lr large enough that float32 resolves the parameter change
    x, y = batch(B, seed=3)
    torch.manual_seed(0)
    base = HybridClassifier(2, 2, n_qubits=4, n_layers=2, optimizer="SGD", lr=lr, dp_clip=C, dp_noise=1e-6)
    g = loop_gradients(base, x, y)
    flat_rows = torch.cat([v.reshape(B, -1) for v in g.values()], dim=1)
    norms = flat_rows.norm(dim=1)
    assert norms.min() > 10 * C                                      # every sample is clipped
    P = flat_rows.shape[1]
    clipped_mean = (flat_rows * (C / norms)[:, None]).sum(0) / B

    tiny = copy.deepcopy(base)
    before, after = one_dp_step(tiny, x, y)
    step = flat(before) - flat(after)
    torch.testing.assert_close(step, lr * clipped_mean, atol=2e-6, rtol=1e-3)
    assert step.norm() <= lr * C * (1 + 1e-6 * (math.sqrt(P) + 8) / B) * (1 + 1e-4)

    noisy = HybridClassifier(**{**base.hparams, "dp_noise": 1.0})
    noisy.load_state_dict(base.state_dict())
    pl.seed_everything(5, verbose=False)
    before, after = one_dp_step(noisy, x, y)
    step = flat(before) - flat(after)
    assert step.norm() <= lr * C * (1 + 1.0 * (math.sqrt(P) + 8) / B)
    noise_norm = (step - lr * clipped_mean).norm() / (lr * 1.0 * C / B)       # ‖z‖ ~ √P ± 1
    assert 0.6 * math.sqrt(P) < noise_norm < 1.4 * math.sqrt(P)


def test_trains_on_circles_with_sigma_1_and_logs_the_accountants_epsilon():
    pl.seed_everything(0, verbose=False)
    dm = CirclesDataModule(n_train=200, n_val=50, n_test=100, batch_size=20, seed=2)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=4, n_layers=2, optimizer="Adam", lr=0.1,
                             dp_clip=1.0, dp_noise=1.0)
    assert not model.automatic_optimization
    t = trainer(8)
    t.fit(model, datamodule=dm)
    assert t.global_step == model.dp_steps == 80
    logged = {k: float(v) for k, v in t.callback_metrics.items()}
    assert {"train_loss", "train_acc", "val_loss", "val_acc", "epsilon"} <= set(logged)
    eps = privacy.rdp_epsilon(20 / 200, 1.0, 80, 1 / 200 ** 2)
    assert logged["epsilon"] == pytest.approx(eps, rel=1e-6) and model.dp_epsilon() == eps
    assert 5 < eps < 10
    test = t.test(model, datamodule=dm, verbose=False)[0]
    assert test["test_acc"] >= 0.85                                # chance: 0.5


def _tiny_fit(epochs, ckpt=None, save=None, seed=0):
    pl.seed_everything(seed, verbose=False)
    dm = CirclesDataModule(n_train=24, n_val=8, n_test=8, batch_size=6, seed=2)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=2, n_layers=1, optimizer="SGD", lr=0.3,
                             dp_clip=0.5, dp_noise=1.0, dp_delta=1e-4)
    t = trainer(epochs)
    t.fit(model, datamodule=dm, ckpt_path=ckpt)
    if save is not None:
        t.save_checkpoint(save)
    return model, float(t.callback_metrics["epsilon"])


def test_a_resumed_fit_continues_the_step_count_epsilon_and_noise(tmp_path):
    """4 steps an epoch: 2 epochs, checkpoint, 2 more == 4 epochs, ε for 16 steps (not 8 again)."""
    full, eps_full = _tiny_fit(4)
    again, _ = _tiny_fit(4)
    other, _ = _tiny_fit(4, seed=1)
    assert torch.equal(again.quantum.weights, full.quantum.weights)          # seed_everything fixes the noise
    assert not torch.equal(other.quantum.weights, full.quantum.weights)
    half, eps_half = _tiny_fit(2, save=tmp_path / "half.ckpt")
    resumed, eps_resumed = _tiny_fit(4, ckpt=tmp_path / "half.ckpt")
    assert half.dp_steps == 8 and resumed.dp_steps == full.dp_steps == 16
    assert eps_half == pytest.approx(privacy.rdp_epsilon(6 / 24, 1.0, 8, 1e-4), rel=1e-6)
    assert eps_resumed == eps_full == pytest.approx(privacy.rdp_epsilon(6 / 24, 1.0, 16, 1e-4), rel=1e-6)
    assert eps_resumed > eps_half
    assert torch.equal(resumed.quantum.weights, full.quantum.weights)
    assert torch.equal(resumed.head.weight, full.head.weight)

    ck = torch.load(tmp_path / "half.ckpt", weights_only=True)
    assert ck["dp_sgd"]["steps"] == 8 and ck["dp_sgd"]["noise_generator"]["state"].dtype == torch.uint8
    assert (ck["hyper_parameters"]["dp_clip"], ck["hyper_parameters"]["dp_noise"]) == (0.5, 1.0)
    restored = HybridClassifier.load_from_checkpoint(tmp_path / "half.ckpt")
    assert restored.dp_steps == 8 and not restored.automatic_optimization


@pytest.mark.parametrize("kwargs", [
    {"scheduler": "StepLR", "scheduler_kwargs": {"step_size": 1, "gamma": 0.5}},
    {"scheduler": "StepLR", "scheduler_kwargs": {"step_size": 3, "gamma": 0.5}, "scheduler_interval": "step"},
    {"scheduler": "ReduceLROnPlateau", "scheduler_kwargs": {"patience": 0, "factor": 0.5, "threshold": 0.5}},
    {"scheduler": "ReduceLROnPlateau", "scheduler_kwargs": {"patience": 0, "factor": 0.5, "threshold": 0.5},
     "scheduler_monitor": "train_loss"},
], ids=["epoch", "step", "plateau-val", "plateau-train"])
def test_schedulers_step_as_in_automatic_optimization(kwargs):
    """Negligible noise and no clipping: DP-SGD follows the plain run's trajectory, so the learning
    rates (and plateau schedulers' states) must agree step for step."""
    out = []
    for dp in ({}, {"dp_clip": 1e4, "dp_noise": 1e-9}):
        pl.seed_everything(0, verbose=False)
        dm = CirclesDataModule(n_train=24, n_val=8, n_test=8, batch_size=6, seed=2)
        model = HybridClassifier(2, 2, n_qubits=2, n_layers=1, optimizer="SGD", lr=0.1, **kwargs, **dp)
        t = trainer(4)
        t.fit(model, datamodule=dm)
        out.append((t.optimizers[0].param_groups[0]["lr"], t.lr_scheduler_configs[0].scheduler.state_dict(),
                    model.head.weight.detach()))
    (lr_plain, state_plain, w_plain), (lr_dp, state_dp, w_dp) = out
    assert lr_dp == lr_plain < 0.1
    assert state_dp.keys() == state_plain.keys()
    for k in state_plain:
        if isinstance(state_plain[k], float):            # "best": a loss, equal to float32 rounding
            assert state_dp[k] == pytest.approx(state_plain[k], rel=1e-5), k
        else:
            assert state_dp[k] == state_plain[k], k
    torch.testing.assert_close(w_dp, w_plain, atol=1e-5, rtol=0)


def test_bad_arguments_are_named():
    ok = dict(n_features=2, n_classes=2)
    with pytest.raises(ValueError, match="dp_noise needs dp_clip"):
        HybridClassifier(**ok, dp_noise=1.0)
    with pytest.raises(ValueError, match="dp_clip needs dp_noise"):
        HybridClassifier(**ok, dp_clip=1.0)
    with pytest.raises(ValueError, match="dp_delta is the δ"):
        HybridClassifier(**ok, dp_delta=1e-5)
    for name, bad in (("dp_clip", 0.0), ("dp_clip", -1.0), ("dp_noise", 0), ("dp_noise", -0.5),
                      ("dp_clip", math.inf), ("dp_noise", math.nan), ("dp_delta", 0.0), ("dp_delta", -1e-3)):
        args = {"dp_clip": 1.0, "dp_noise": 1.0, name: bad}
        with pytest.raises(ValueError, match=f"{name} must be a positive finite number"):
            HybridClassifier(**ok, **args)
    for bad in (1.0, 2.0):
        with pytest.raises(ValueError, match=r"dp_delta must be in \(0, 1\)"):
            HybridClassifier(**ok, dp_clip=1.0, dp_noise=1.0, dp_delta=bad)
    for name, bad in (("dp_clip", "1"), ("dp_noise", True), ("dp_delta", [1e-5])):
        with pytest.raises(TypeError, match=f"{name} must be a number"):
            HybridClassifier(**ok, **{"dp_clip": 1.0, "dp_noise": 1.0, name: bad})
    import numpy as np                   # NumPy numbers are saved as plain ones (weights_only checkpoints)
    m = HybridClassifier(**ok, dp_clip=np.float64(1.0), dp_noise=np.float32(2.0), dp_delta=np.float64(1e-5))
    assert type(m.hparams.dp_clip) is float and type(m.hparams.dp_noise) is float and m.is_private
    assert HybridClassifier(**ok).automatic_optimization and not HybridClassifier(**ok).is_private
    with pytest.raises(ValueError, match="needs DP-SGD training"):
        HybridClassifier(**ok).dp_epsilon()
    with pytest.raises(ValueError, match="during or after Trainer.fit"):
        m.dp_epsilon()

    # what manual optimization cannot honour, Lightning refuses before the first step
    x, y = batch(8)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    for kw, match in (({"accumulate_grad_batches": 2}, "accumulation"), ({"gradient_clip_val": 1.0}, "clipping")):
        model = HybridClassifier(**ok, n_qubits=2, n_layers=1, dp_clip=1.0, dp_noise=1.0)
        with pytest.raises(MisconfigurationException, match=match):
            trainer(max_steps=1, **kw).fit(model, train_dataloaders=loader)
        assert model.dp_steps == 0


def test_privacy_functions_name_bad_arguments():
    f = privacy.rdp_epsilon
    for args, match in (((0.0, 1.0, 10, 1e-5), "sample_rate"), ((1.5, 1.0, 10, 1e-5), "sample_rate"),
                        ((0.1, 0.0, 10, 1e-5), "noise_multiplier"), ((0.1, -1.0, 10, 1e-5), "noise_multiplier"),
                        ((0.1, 1.0, -1, 1e-5), "steps"), ((0.1, 1.0, 10, 0.0), "delta"),
                        ((0.1, 1.0, 10, 1.0), "delta")):
        with pytest.raises(ValueError, match=match):
            f(*args)
    with pytest.raises(TypeError, match="steps must be an int"):
        f(0.1, 1.0, 2.5, 1e-5)
    with pytest.raises(ValueError, match="orders must be >= 2"):
        f(0.1, 1.0, 10, 1e-5, orders=[1, 2])
    assert f(0.1, 1.0, 0, 1e-5) == 0.0
    # the two halves compose to the whole, and more steps or less noise cost more ε
    rdp = privacy.gaussian_rdp(0.1, 1.0)
    assert privacy.epsilon_from_rdp([50 * r for r in rdp], 1e-5) == f(0.1, 1.0, 50, 1e-5)
    assert f(0.1, 1.0, 50, 1e-5) < f(0.1, 1.0, 100, 1e-5) < f(0.1, 0.8, 100, 1e-5)
    grads = {"w": torch.ones(3, 2)}
    for kw, match in (({"clip": 0.0}, "clip must be > 0"), ({"clip": -1.0}, "clip must be > 0"),
                      ({"noise_multiplier": -1.0}, "noise_multiplier must be >= 0"),
                      ({"batch_size": 0}, "batch_size must be > 0")):
        with pytest.raises(ValueError, match=match):
            privacy.clip_and_noise(grads, **{"clip": 1.0, "noise_multiplier": 1.0, "batch_size": 3, **kw})
    with pytest.raises(ValueError, match="same leading"):
        privacy.clip_and_noise({"a": torch.ones(3), "b": torch.ones(2)}, 1.0, 1.0, 3)
    with pytest.raises(ValueError, match="x has 3 samples but y has 2"):
        privacy.per_sample_gradients(torch.nn.Linear(2, 2), {"weight": torch.ones(2, 2)}, torch.ones(3, 2),
                                     torch.zeros(2, dtype=torch.long))
    update, norms = privacy.clip_and_noise({"w": torch.tensor([[3.0, 4.0], [0.3, 0.4]])}, 1.0, 0.0, 2)
    torch.testing.assert_close(norms, torch.tensor([1.0, 0.5]))
    torch.testing.assert_close(update["w"], torch.tensor([0.45, 0.6]))
