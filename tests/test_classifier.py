"""lightning_tasks: HybridClassifier and the DataModules, trained with a real Trainer at small
sizes; the example scripts' main() with small arguments."""
import importlib.util
import logging
import math
import pathlib
import warnings

import numpy as np
import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")

from lightning_tasks.classifier import HybridClassifier  # noqa: E402
from lightning_tasks.data import (CirclesDataModule, DigitsDataModule, IrisDataModule,  # noqa: E402
                                  MoonsDataModule)

HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None
needs_sklearn = pytest.mark.skipif(not HAS_SKLEARN, reason="scikit-learn is optional (the 'data' extra)")
EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def quiet_single_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*does not have many workers.*")
        warnings.filterwarnings("ignore", ".*LeafSpec.*")
        warnings.filterwarnings("ignore", ".*log_every_n_steps.*")
        warnings.filterwarnings("ignore", ".*no `val_dataloader`.*")
        yield
    torch.set_num_threads(old)


def trainer(max_epochs):
    return pl.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                      num_sanity_val_steps=0)


def fit_and_test(model, dm, epochs):
    t = trainer(epochs)
    t.fit(model, datamodule=dm)
    val = {k: float(v) for k, v in t.callback_metrics.items()}
    test = t.test(model, datamodule=dm, verbose=False)[0]
    return val, test


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------------------------------------
# training (acceptance at small sizes; the examples run the full sizes)
def test_circles_reach_high_accuracy_log_every_metric_and_checkpoint(tmp_path):
    pl.seed_everything(0, verbose=False)
    dm = CirclesDataModule(n_train=80, n_val=40, n_test=60, batch_size=20, seed=2)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=4, n_layers=2, lr=0.05)
    t = trainer(6)
    t.fit(model, datamodule=dm)
    val = {k: float(v) for k, v in t.callback_metrics.items()}
    test = t.test(model, datamodule=dm, verbose=False)[0]
    assert {"train_loss", "train_acc", "val_loss", "val_acc"} <= set(val)
    assert set(test) == {"test_loss", "test_acc"}
    assert test["test_acc"] >= 0.95
    assert val["train_loss"] < math.log(2)
    # a checkpoint rebuilds the model from its saved hyperparameters
    t.save_checkpoint(tmp_path / "circles.ckpt")
    restored = HybridClassifier.load_from_checkpoint(tmp_path / "circles.ckpt")
    x = torch.as_tensor(dm.splits()[4])
    torch.testing.assert_close(restored(x), model(x))


@needs_sklearn
def test_iris_setosa_versicolor_angle_encoding_is_perfect():
    pl.seed_everything(0, verbose=False)
    dm = IrisDataModule(classes=(0, 1), batch_size=16, seed=0)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=4, n_layers=1, encoding="angle", lr=0.05)
    _, test = fit_and_test(model, dm, 6)
    assert test["test_acc"] == 1.0


@needs_sklearn
def test_digits_cnn_pre_net_learns_four_classes():
    pl.seed_everything(0, verbose=False)
    dm = DigitsDataModule(classes=(0, 1, 2, 3), batch_size=32, seed=0)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=8, n_layers=1, pre_net="cnn",
                             image_shape=(8, 8), lr=0.02)
    _, test = fit_and_test(model, dm, 3)
    assert test["test_acc"] >= 0.85


def test_moons_with_reuploading_shots_and_a_scheduler():
    """Shot-based training (parameter-shift) through the Trainer, with a scheduler stepping."""
    pl.seed_everything(0, verbose=False)
    dm = MoonsDataModule(n_samples=60, batch_size=30, seed=0)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=2, n_layers=1, encoding="reupload",
                             shots=200, quantum_seed=3, lr=0.05, scheduler="StepLR",
                             scheduler_kwargs={"step_size": 1, "gamma": 0.5})
    t = trainer(2)
    t.fit(model, datamodule=dm)
    assert model.quantum.diff_method == "parameter-shift" and model.quantum.shots == 200
    assert t.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.05 * 0.25)


def _tiny_fit(epochs, ckpt=None, save=None):
    pl.seed_everything(0, verbose=False)
    dm = CirclesDataModule(n_train=24, n_val=8, n_test=8, batch_size=6, seed=2)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=2, n_layers=1, lr=0.05,
                             shots=40, quantum_seed=1)
    t = trainer(epochs)
    t.fit(model, datamodule=dm, ckpt_path=ckpt)
    if save is not None:
        t.save_checkpoint(save)
    return model


def test_resumed_fit_equals_an_uninterrupted_one_and_the_checkpoint_loads_weights_only(tmp_path):
    """2 epochs, checkpoint, 2 more == 4 epochs: the shuffling generator (DataModule state) and the
    shot sampler's generator (model checkpoint hook) are restored. Before, the rebuilt loader
    replayed epoch 0's order and the shots restarted from quantum_seed."""
    full = _tiny_fit(4)
    _tiny_fit(2, save=tmp_path / "half.ckpt")
    resumed = _tiny_fit(4, ckpt=tmp_path / "half.ckpt")
    assert torch.equal(resumed.quantum.weights, full.quantum.weights)
    assert torch.equal(resumed.head.weight, full.head.weight)
    ck = torch.load(tmp_path / "half.ckpt", weights_only=True)
    assert ck["CirclesDataModule"]["train_generator_state"].dtype == torch.uint8
    clone = HybridClassifier(**ck["hyper_parameters"])
    clone.load_state_dict(ck["state_dict"])
    torch.save(clone.state_dict(), tmp_path / "weights.pt")
    sd = torch.load(tmp_path / "weights.pt", weights_only=True)
    assert sd.keys() == clone.state_dict().keys()
    with pytest.raises(TypeError, match="train_generator_state must be a uint8 tensor"):
        CirclesDataModule().load_state_dict({"train_generator_state": [1, 2]})


@needs_sklearn
def test_logged_metrics_equal_scikit_learn_on_the_predictions():
    """test_acc / test_loss (epoch means over uneven batches of 7) against accuracy_score and
    log_loss of the same model's predictions; trainer.predict covers the test split in order."""
    from sklearn.metrics import accuracy_score, log_loss
    pl.seed_everything(0, verbose=False)
    dm = IrisDataModule(batch_size=7, seed=0)
    model = HybridClassifier(dm.n_features, dm.n_classes, n_qubits=4, n_layers=1, lr=0.05)
    t = trainer(1)
    t.fit(model, datamodule=dm)
    res = t.test(model, datamodule=dm, verbose=False)[0]
    pred = torch.cat(t.predict(model, datamodule=dm))
    x, y = torch.as_tensor(dm.splits()[4]), dm.splits()[5]
    assert len(y) % 7 != 0 and pred.dtype == torch.int64 and pred.shape == (len(y),)
    with torch.no_grad():
        prob = torch.softmax(model(x).double(), dim=-1).numpy()
    np.testing.assert_array_equal(pred.numpy(), prob.argmax(1))
    assert res["test_acc"] == pytest.approx(accuracy_score(y, pred.numpy()), abs=1e-6)
    assert res["test_loss"] == pytest.approx(log_loss(y, prob, labels=[0, 1, 2]), abs=1e-5)


def test_head_none_logits_are_the_scaled_expectations():
    """Multi-class readout without a head: logits = logit_scale * <Z_w>; RY(x_w)|0>: <Z_w> = cos x_w."""
    model = HybridClassifier(3, 3, n_qubits=3, n_layers=0, ansatz="none", head="none", logit_scale=2.5,
                             dtype="complex128")
    x = torch.rand(5, 3) * 3
    np.testing.assert_allclose(model(x).detach().numpy(), 2.5 * np.cos(x.numpy()), atol=1e-6)
    pred = model.predict_step((x, torch.zeros(5, dtype=torch.int64)), 0)
    np.testing.assert_array_equal(pred.numpy(), np.cos(x.numpy()).argmax(1))
    np.testing.assert_array_equal(model.predict_step(x, 0).numpy(), pred.numpy())


def test_bad_arguments_are_named_at_build_time():
    with pytest.raises(ValueError, match="logit_scale must be a positive finite number, got 'abc'"):
        HybridClassifier(2, 2, logit_scale="abc")
    with pytest.raises(ValueError, match="logit_scale must be a positive finite number, got nan"):
        HybridClassifier(2, 2, logit_scale=float("nan"))
    with pytest.raises(ValueError, match="logit_scale must be a positive finite number, got 0"):
        HybridClassifier(2, 2, logit_scale=0)       # constant logits: nothing to train
    with pytest.raises(TypeError, match="quantum_features must be an int or None, got 2.5"):
        HybridClassifier(2, 2, pre_net="linear", quantum_features=2.5)
    with pytest.raises(ValueError, match="quantum_features must be >= 1, got 0"):
        HybridClassifier(2, 2, pre_net="linear", quantum_features=0)
    # iqp reads one feature per wire: the mismatch is named at build time, not at the first batch
    with pytest.raises(ValueError, match="encoding='iqp'.*n_features must be 4, got 3"):
        HybridClassifier(3, 2, n_qubits=4, encoding="iqp")
    with pytest.raises(ValueError, match="encoding='iqp'.*n_features must be 4, got 3"):
        HybridClassifier(5, 2, n_qubits=4, encoding="iqp", pre_net="linear", quantum_features=3)
    with pytest.raises(TypeError, match=r"ansatz_kwargs\['n_layers'\]=3 clashes with the n_layers argument"):
        HybridClassifier(2, 2, ansatz_kwargs={"n_layers": 3})
    with pytest.raises(ValueError, match="optimizer 'Optimizer' is not an optimizer class"):
        HybridClassifier(2, 2, optimizer="Optimizer")
    with pytest.raises(ValueError, match="scheduler 'LRScheduler' is not a scheduler class"):
        HybridClassifier(2, 2, scheduler="LRScheduler")
    with pytest.raises(TypeError, match="optimizer_kwargs must be a dict or None, got \\[1\\]"):
        HybridClassifier(2, 2, optimizer_kwargs=[1])
    with pytest.raises(TypeError, match="scheduler_monitor must be a metric name"):
        HybridClassifier(2, 2, scheduler_monitor=3)
    with pytest.raises(TypeError, match="image_shape must be a sequence of ints, got '22'"):
        HybridClassifier(4, 2, pre_net="cnn", image_shape="22")
    # a batch of the wrong width is named before the pre-net's matmul fails
    with pytest.raises(ValueError, match=r"input must have shape \(B, 2\) \(n_features=2\), got \(3, 5\)"):
        HybridClassifier(2, 2, pre_net="linear")(torch.rand(3, 5))
    with pytest.raises(ValueError, match="images of shape \\(1, 7, 7\\) hold 49 values but n_features=64"):
        HybridClassifier(64, 2, pre_net="cnn", image_shape=(8, 8))(torch.rand(2, 1, 7, 7))
    assert HybridClassifier(64, 2, pre_net="cnn", image_shape=(8, 8))(torch.rand(2, 1, 8, 8)).shape == (2, 2)


# ------------------------------------------------------------------------------------------------
# model construction
def test_hyperparameters_are_saved_and_rebuild_the_model():
    model = HybridClassifier(4, 3, n_qubits=3, n_layers=2, pre_net="mlp", pre_net_hidden=8,
                             ansatz="strongly_entangling", measure=["Z0", "Z1 Z2"], optimizer="SGD", lr=0.1,
                             optimizer_kwargs={"momentum": 0.9})
    hp = dict(model.hparams)
    assert hp["n_qubits"] == 3 and hp["measure"] == ["Z0", "Z1 Z2"] and hp["optimizer_kwargs"] == {"momentum": 0.9}
    clone = HybridClassifier(**hp)
    clone.load_state_dict(model.state_dict())
    x = torch.rand(5, 4)
    torch.testing.assert_close(clone(x), model(x))
    assert model(x).shape == (5, 3)
    opt = model.configure_optimizers()
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["momentum"] == 0.9 and opt.defaults["lr"] == 0.1


@pytest.mark.parametrize("pre_net, kwargs, n_features", [
    (None, {"encoding": "angle"}, 2),                 # 2 features on 4 wires, repeated
    (None, {"encoding": "reupload"}, 7),
    (None, {"encoding": "iqp"}, 4),
    ("linear", {}, 7),
    ("mlp", {"angle_activation": "sigmoid"}, 7),
    ("cnn", {"image_shape": (1, 4, 6)}, 24),
    ("linear", {"head": "none", "measure": ["Z0", "Z1", "Z2"], "angle_activation": "none"}, 5),
])
def test_forward_shapes_for_every_pre_net_and_head(pre_net, kwargs, n_features):
    n_classes = 3
    model = HybridClassifier(n_features, n_classes, n_qubits=4, n_layers=1, pre_net=pre_net, **kwargs)
    out = model(torch.rand(6, n_features))
    assert out.shape == (6, n_classes) and out.dtype == torch.float32
    out.sum().backward()
    assert model.quantum.circuit.weights.grad is not None


def test_schedulers_by_name():
    model = HybridClassifier(2, 2, scheduler="ReduceLROnPlateau", scheduler_kwargs={"patience": 2},
                             optimizer="AdamW", lr=0.02)
    cfg = model.configure_optimizers()
    assert isinstance(cfg["optimizer"], torch.optim.AdamW)
    assert isinstance(cfg["lr_scheduler"]["scheduler"], torch.optim.lr_scheduler.ReduceLROnPlateau)
    assert cfg["lr_scheduler"]["monitor"] == "val_loss"
    cfg = HybridClassifier(2, 2, scheduler="CosineAnnealingLR", scheduler_kwargs={"T_max": 5},
                           scheduler_interval="step").configure_optimizers()
    assert cfg["lr_scheduler"]["interval"] == "step" and "monitor" not in cfg["lr_scheduler"]


def test_classifier_rejects_bad_configuration():
    with pytest.raises(ValueError, match="pre_net must be one of"):
        HybridClassifier(2, 2, pre_net="transformer")
    with pytest.raises(ValueError, match="head must be one of"):
        HybridClassifier(2, 2, head="mlp")
    with pytest.raises(ValueError, match="head='none' needs one observable per class"):
        HybridClassifier(2, 2, head="none")
    with pytest.raises(ValueError, match="optimizer 'Adamm'"):
        HybridClassifier(2, 2, optimizer="Adamm")
    with pytest.raises(ValueError, match="scheduler 'StepLRR'"):
        HybridClassifier(2, 2, scheduler="StepLRR")
    with pytest.raises(ValueError, match="lr must be a positive"):
        HybridClassifier(2, 2, lr=0)
    with pytest.raises(ValueError, match="dtype"):
        HybridClassifier(2, 2, dtype="complex32")
    with pytest.raises(ValueError, match="n_classes must be >= 2"):
        HybridClassifier(2, 1)
    with pytest.raises(TypeError, match="n_features must be an int"):
        HybridClassifier(2.0, 2)
    with pytest.raises(ValueError, match="needs image_shape"):
        HybridClassifier(64, 10, pre_net="cnn")
    with pytest.raises(ValueError, match="holds 49 values but n_features=64"):
        HybridClassifier(64, 10, pre_net="cnn", image_shape=(7, 7))
    with pytest.raises(ValueError, match="quantum_features=3 disagrees"):
        HybridClassifier(2, 2, quantum_features=3)
    with pytest.raises(ValueError, match="n_features=5 > n_wires=4"):
        HybridClassifier(5, 2, n_qubits=4)
    with pytest.raises(TypeError, match="rejected optimizer_kwargs"):
        HybridClassifier(2, 2, optimizer_kwargs={"momentun": 0.9}, optimizer="SGD").configure_optimizers()
    with pytest.raises(TypeError, match="rejected scheduler_kwargs"):
        HybridClassifier(2, 2, scheduler="StepLR").configure_optimizers()   # step_size missing


# ------------------------------------------------------------------------------------------------
# data modules
def test_circles_data_module_splits():
    dm = CirclesDataModule(n_train=50, n_val=20, n_test=30, batch_size=16, seed=1)
    xtr, ytr, xva, yva, xte, yte = dm.splits()
    assert (len(xtr), len(xva), len(xte)) == (50, 20, 30) and dm.n_features == 2 and dm.n_classes == 2
    r = np.linalg.norm(np.concatenate([xtr, xva, xte]), axis=1)
    assert np.all((r < 0.45) | (r > 0.95))
    dm.setup("fit")
    xb, yb = next(iter(dm.train_dataloader()))
    assert xb.shape == (16, 2) and xb.dtype == torch.float32 and yb.dtype == torch.int64
    assert len(dm.val_dataloader().dataset) == 20 and len(dm.test_dataloader().dataset) == 30
    same = CirclesDataModule(n_train=50, n_val=20, n_test=30, batch_size=16, seed=1)
    same.setup("fit")
    assert torch.equal(next(iter(same.train_dataloader()))[0], xb)     # seeded shuffling too
    other = CirclesDataModule(n_train=50, n_val=20, n_test=30, seed=2).splits()[0]
    assert not np.array_equal(other, xtr)
    with pytest.raises(ValueError, match="n_train"):
        CirclesDataModule(n_train=0)
    with pytest.raises(TypeError, match="batch_size"):
        CirclesDataModule(batch_size=2.5)
    with pytest.raises(ValueError, match="inside"):
        CirclesDataModule(gap=2.0)


def test_moons_data_module_scaling_uses_training_statistics():
    dm = MoonsDataModule(n_samples=200, val_fraction=0.25, test_fraction=0.25, seed=0)
    xtr, ytr, xva, yva, xte, yte = dm.splits()
    assert (len(xtr), len(xva), len(xte)) == (100, 50, 50)
    np.testing.assert_allclose(xtr.mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(xtr.std(0), 1, atol=1e-4)
    assert abs(xte.mean()) > 1e-4 or abs(xte.std() - 1) > 1e-4       # test split not re-standardised
    assert (ytr == 0).sum() == 50
    with pytest.raises(ValueError, match="method must be"):
        MoonsDataModule(scaling="robust")


def test_data_module_arguments_are_named_and_loaders_work_before_setup():
    with pytest.raises(ValueError, match="CirclesDataModule: seed must be >= 0, got -1"):
        CirclesDataModule(seed=-1)
    with pytest.raises(ValueError, match=r"feature_range must be a pair \(low, high\), got \(0, 1, 2\)"):
        MoonsDataModule(scaling="minmax", feature_range=(0, 1, 2))
    dm = CirclesDataModule(n_train=10, n_val=4, n_test=6, batch_size=4)
    assert len(dm.test_dataloader().dataset) == 6          # setup() runs on demand outside a Trainer
    x, y = next(iter(dm.predict_dataloader()))
    torch.testing.assert_close(x, torch.as_tensor(dm.splits()[4][:4]))    # the test split, in order
    if HAS_SKLEARN:
        with pytest.raises(TypeError, match="classes must be a sequence of int labels, got '01'"):
            IrisDataModule(classes="01")


@needs_sklearn
def test_iris_and_digits_data_modules():
    iris = IrisDataModule(classes=(0, 1), seed=0)
    xtr, ytr, xva, yva, xte, yte = iris.splits()
    assert iris.n_features == 4 and iris.n_classes == 2 and len(xtr) + len(xva) + len(xte) == 100
    assert xtr.min() >= -1e-6 and xtr.max() <= math.pi + 1e-6          # min-max to [0, π] on train
    digits = DigitsDataModule(seed=0)
    assert digits.n_features == 64 and digits.n_classes == 10
    assert sum(len(a) for a in digits.splits()[::2]) == 1797


# ------------------------------------------------------------------------------------------------
# examples (small arguments; the full runs are the acceptance numbers)
def test_hybrid_classifier_example_runs():
    ex = load_example("hybrid_classifier")
    out = ex.main(model="paddle", n_train=200, n_test=50, epochs=10, verbose=False)
    assert out["test_acc"] >= 0.9
    out = ex.main(model="template", n_train=100, n_test=50, epochs=5, verbose=False)
    assert out["test_acc"] >= 0.9


@needs_sklearn
def test_lightning_classifier_example_runs():
    ex = load_example("lightning_classifier")
    out = ex.main("iris", max_epochs=4, verbose=False)
    assert out["test_acc"] == 1.0
    out = ex.main("circles", max_epochs=2, verbose=False,
                  data_kwargs={"n_train": 40, "n_val": 20, "n_test": 20})
    assert 0 <= out["test_acc"] <= 1 and out["epochs"] == 2


def test_numpy_numbers_and_missing_sizes(tmp_path):
    """lr=np.float64(...) was saved as a NumPy scalar: the checkpoint failed
    torch.load(weights_only=True). n_features=None (the CLI without --data) said only "must be an int"."""
    dm = CirclesDataModule(n_train=8, n_val=4, n_test=4, batch_size=4, seed=2)
    model = HybridClassifier(2, 2, n_qubits=2, n_layers=1, lr=np.float64(0.05),
                             logit_scale=np.float32(2.0))
    t = trainer(1)
    t.fit(model, datamodule=dm)
    t.save_checkpoint(tmp_path / "np.ckpt")
    hp = torch.load(tmp_path / "np.ckpt", weights_only=True)["hyper_parameters"]
    assert type(hp["lr"]) is float and hp["lr"] == 0.05 and type(hp["logit_scale"]) is float
    assert t.optimizers[0].param_groups[0]["lr"] == 0.05
    for kwargs, name in ((dict(n_features=None, n_classes=2), "n_features"), (dict(n_features=2, n_classes=None),
                                                                                 "n_classes")):
        with pytest.raises(TypeError, match=rf"{name} is required .*--data fills it.*got None"):
            HybridClassifier(**kwargs)
