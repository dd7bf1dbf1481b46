"""lightning_tasks.cli: the ``tql`` LightningCLI, run in-process on every bundled config.

References: H2's FCI energy (-1.13728 Ha, STO-3G, 0.74 Å) for the logged VQE error, brute-force
max cuts written here for the logged QAOA ratios, and an uninterrupted run for resuming.
"""
import csv
import itertools
import pathlib
import sys
import types
import warnings

import pytest
import torch

pytest.importorskip("pytorch_lightning")
pytest.importorskip("jsonargparse")
yaml = pytest.importorskip("yaml")

from lightning_tasks.cli import main  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "examples" / "configs").glob("*.yaml"))
FCI_H2 = -1.13728
PADDLE = [(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)]
COLUMNS = {"VQETask": {"energy", "error_mha", "chemical_accuracy"},
           "QAOATask": {"expected_cost", "best_ratio", "optimum_probability", "expected_objective"},
           "HybridClassifier": {"train_loss", "train_acc"}}
LATTICE_COLUMNS = {"energy", "error", "relative_error"}          # VQETask with model=... (a lattice)
QUICK = ["--trainer.accelerator", "cpu", "--trainer.enable_progress_bar", "false",
         "--trainer.enable_model_summary", "false"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def max_cut(edges):
    n = 1 + max(max(e[:2]) for e in edges)
    return max(sum(1 for u, v in edges if b[u] != b[v]) for b in itertools.product([0, 1], repeat=n))


def tfim_ring_ground_energy(n):
    """numpy.linalg.eigvalsh of -sum Z_i Z_i+1 - sum X_i on a ring, built from Kronecker products."""
    import numpy as np
    x, z = np.array([[0.0, 1.0], [1.0, 0.0]]), np.diag([1.0, -1.0])

    def op(mats):
        out = np.ones((1, 1))
        for k in range(n):
            out = np.kron(out, mats.get(k, np.eye(2)))
        return out
    H = -sum(op({i: z, (i + 1) % n: z}) for i in range(n)) - sum(op({i: x}) for i in range(n))
    return float(np.linalg.eigvalsh(H)[0])


def metrics(root, version=0):
    path = pathlib.Path(root) / "lightning_logs" / f"version_{version}" / "metrics.csv"
    assert path.exists(), path
    return list(csv.DictReader(open(path)))


def model_name(config):
    return yaml.safe_load(open(config))["model"]["class_path"].rsplit(".", 1)[-1]


def test_every_task_has_a_config():
    assert {"vqe_h2.yaml", "vqe_lih.yaml", "qaoa_maxcut.yaml", "classifier_circles.yaml"} <= {c.name for c in CONFIGS}
    assert set(COLUMNS) == {model_name(c) for c in CONFIGS}


@pytest.mark.parametrize("config", CONFIGS, ids=[c.stem for c in CONFIGS])
def test_config_runs_two_steps_and_logs(config, tmp_path):
    assert main(["fit", "--config", str(config), "--trainer.max_steps", "2",
                 "--trainer.default_root_dir", str(tmp_path)] + QUICK) == 0
    rows = metrics(tmp_path)
    name = model_name(config)
    lattice = "model" in yaml.safe_load(open(config))["model"].get("init_args", {})
    assert (LATTICE_COLUMNS if lattice else COLUMNS[name]) <= set(rows[0])
    run = tmp_path / "lightning_logs" / "version_0"
    assert list((run / "checkpoints").glob("*.ckpt")) and (run / "config.yaml").exists()
    ckpt = torch.load(next((run / "checkpoints").glob("*.ckpt")), weights_only=True)
    assert ckpt["global_step"] == 2
    if name in ("VQETask", "QAOATask"):                # one step per epoch, one row per step
        assert [int(r["step"]) for r in rows] == [0, 1]
    if config.stem == "vqe_h2":
        for r in rows:
            assert float(r["error_mha"]) == pytest.approx(abs(float(r["energy"]) - FCI_H2) * 1e3, abs=0.01)
    if config.stem == "vqe_tfim_chain":                 # 6-spin TFIM ring at h = J = 1: a NumPy Kronecker oracle
        e0 = tfim_ring_ground_energy(6)
        for r in rows:
            assert float(r["error"]) == pytest.approx(abs(float(r["energy"]) - e0), abs=1e-9)
            assert float(r["relative_error"]) == pytest.approx(abs(float(r["energy"]) - e0) / abs(e0), abs=1e-9)
    if config.stem == "qaoa_maxcut":
        for r in rows:
            assert float(r["best_ratio"]) == pytest.approx(-float(r["expected_cost"]) / max_cut(PADDLE), abs=1e-6)
    if name == "HybridClassifier":
        assert 0.0 <= float(rows[-1]["train_acc"]) <= 1.0


def test_model_from_the_command_line(tmp_path):
    triangle = [(0, 1), (1, 2), (2, 0)]
    main(["fit", "--model", "QAOATask", "--model.problem", "maxcut", "--model.graph", "[[0,1],[1,2],[2,0]]",
          "--model.p", "1", "--model.n_starts", "2", "--trainer.max_steps", "3",
          "--trainer.default_root_dir", str(tmp_path)] + QUICK)
    rows = metrics(tmp_path)
    assert len(rows) == 3
    for r in rows:                                     # the library minimises C = -cut
        assert float(r["expected_objective"]) == pytest.approx(-float(r["expected_cost"]), abs=1e-5)
        assert float(r["best_ratio"]) == pytest.approx(-float(r["expected_cost"]) / max_cut(triangle), abs=1e-6)

    # the classifier takes n_features and n_classes from the data module
    main(["fit", "--model", "HybridClassifier", "--data", "CirclesDataModule", "--trainer.max_epochs", "1",
          "--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "2",
          "--trainer.default_root_dir", str(tmp_path / "clf")] + QUICK)
    rows = metrics(tmp_path / "clf")
    assert {"train_loss", "val_loss", "val_acc"} <= set(rows[0])
    hp = yaml.safe_load(open(tmp_path / "clf" / "lightning_logs" / "version_0" / "hparams.yaml"))
    assert hp["n_features"] == 2 and hp["n_classes"] == 2


def test_print_config(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", str(ROOT / "examples" / "configs" / "qaoa_maxcut.yaml"),
              "--trainer.max_epochs", "7", "--print_config"])
    assert exc.value.code in (0, None)
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["model"]["class_path"].endswith("QAOATask")
    assert cfg["model"]["init_args"]["graph"] == [list(e) for e in PADDLE]
    assert cfg["trainer"]["max_epochs"] == 7

    with pytest.raises(SystemExit):
        main(["fit", "--model", "QAOATask", "--model.graph", "3regular:16:seed=1", "--print_config"])
    cfg = yaml.safe_load(capsys.readouterr().out)
    assert cfg["model"]["init_args"]["graph"] == "3regular:16:seed=1"


def test_unknown_model_and_bad_values(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--model", "QAOATaskk"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown model 'QAOATaskk'" in err and "QAOATask" in err and "VQETask" in err
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--model=VQETask", "--data", "Cirkles"])
    assert exc.value.code == 2 and "unknown data module 'Cirkles'" in capsys.readouterr().err
    # the task's own error, not jsonargparse's report around it
    with pytest.raises(ValueError, match=r"^QAOATask: p \(the number of QAOA layers\) must be >= 1, got 0$"):
        main(["fit", "--model", "QAOATask", "--model.p", "0", "--trainer.max_steps", "1"])
    with pytest.raises(ValueError, match=r"unknown graph spec 'petersen'"):
        main(["fit", "--model", "QAOATask", "--model.graph", "petersen", "--trainer.max_steps", "1"])


def test_resume_with_ckpt_path(tmp_path):
    cfg = str(ROOT / "examples" / "configs" / "qaoa_maxcut.yaml")
    main(["fit", "--config", cfg, "--trainer.max_steps", "2", "--trainer.default_root_dir", str(tmp_path)] + QUICK)
    ckpt = tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt"     # save_last default
    assert ckpt.exists()
    main(["fit", "--config", cfg, "--trainer.max_steps", "4", "--trainer.default_root_dir", str(tmp_path),
          "--ckpt_path", str(ckpt)] + QUICK)
    resumed = metrics(tmp_path, version=1)
    assert [int(r["step"]) for r in resumed] == [2, 3]
    main(["fit", "--config", cfg, "--trainer.max_steps", "4", "--trainer.default_root_dir", str(tmp_path / "s")]
         + QUICK)
    straight = metrics(tmp_path / "s")
    for a, b in zip(resumed, straight[2:]):
        assert float(a["expected_cost"]) == pytest.approx(float(b["expected_cost"]), abs=1e-6)


def test_validate_test_and_predict_commands(tmp_path, capsys):
    root = ["--trainer.default_root_dir", str(tmp_path), "--trainer.logger", "false"]
    main(["fit", "--model", "QAOATask", "--model.p", "1", "--trainer.max_steps", "2"] + root + QUICK)
    ckpt = tmp_path / "checkpoints" / "last.ckpt"
    for command in ("validate", "test"):
        main([command, "--model", "QAOATask", "--model.p", "1", "--ckpt_path", str(ckpt)] + root + QUICK)
    out = capsys.readouterr().out
    assert "val_best_ratio" in out and "test_expected_cost" in out
    main(["test", "--model", "VQETask"] + root + QUICK)
    assert "test_error_mha" in capsys.readouterr().out
    main(["predict", "--model", "VQETask"] + root + QUICK)


def test_logger_off_and_gpu_flag(tmp_path):
    main(["fit", "--model", "QAOATask", "--model.p", "1", "--model.n_starts", "2", "--trainer.max_steps", "1",
          "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
          "--trainer.default_root_dir", str(tmp_path)] + QUICK)
    assert not (tmp_path / "lightning_logs").exists()
    # twice in one root dir without a logger: the second run replaces config.yaml and the checkpoint
    for _ in range(2):
        main(["fit", "--model", "QAOATask", "--model.p", "1", "--model.n_starts", "2", "--trainer.max_steps", "1",
              "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path / "twice")] + QUICK)
    assert (tmp_path / "twice" / "config.yaml").exists()
    if not torch.cuda.is_available():                  # Lightning's own error for a missing GPU
        with pytest.raises(Exception, match="(?i)gpu|cuda|accelerator"):
            main(["fit", "--model", "QAOATask", "--trainer.accelerator", "gpu", "--trainer.max_steps", "1",
                  "--trainer.default_root_dir", str(tmp_path)])


def test_demo_dispatch_and_console_script(monkeypatch):
    from lightning_tasks.demo import exit_status
    calls = []
    fake = types.ModuleType("lightning_tasks.demo")
    fake.exit_status = exit_status
    fake.run_demo = lambda argv: calls.append(argv) or [types.SimpleNamespace(status="ok")]
    monkeypatch.setitem(sys.modules, "lightning_tasks.demo", fake)
    assert main(["demo", "--quick", "--no-plots"]) == 0 and calls == [["--quick", "--no-plots"]]
    fake.run_demo = lambda argv: [types.SimpleNamespace(status="ok"), types.SimpleNamespace(status="missed")]
    assert main(["demo"]) == 1

    from importlib.metadata import entry_points
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts.get("tql") == "lightning_tasks.cli:main"


def test_console_script_reports_refused_values_in_one_line(monkeypatch, capsys, tmp_path):
    # `tql ...` (argv from sys.argv): a value the task or the Trainer refuses is one line, status 2
    import lightning_tasks.cli as cli
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: None)
    for extra, message in ((["--model.p", "0"], "QAOATask: p (the number of QAOA layers) must be >= 1, got 0"),
                           (["--trainer.max_epochs", "-5"], "You passed in -5"),
                           (["--ckpt_path", "no/such.ckpt"], "--ckpt_path: no checkpoint file at 'no/such.ckpt'")):
        monkeypatch.setattr(sys, "argv", ["tql", "fit", "--model", "QAOATask", "--trainer.max_steps", "1",
                                          "--trainer.default_root_dir", str(tmp_path)] + extra)
        with pytest.raises(SystemExit) as exc:
            main()
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "tql: error: " in err and message in err and "Traceback" not in err, err


def test_logger_off_twice_replaces_last_checkpoint(tmp_path):
    # the second logger-less run in a root dir replaces checkpoints/last.ckpt (no last-v1.ckpt
    # beside a stale one): resuming from last.ckpt continues the latest run
    for steps in (1, 3):
        main(["fit", "--model", "QAOATask", "--model.p", "1", "--model.n_starts", "2", "--trainer.max_steps",
              str(steps), "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path)] + QUICK)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["epoch=2-step=3.ckpt", "last.ckpt"], names
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3


def test_step_progress_bar_is_rate_limited(monkeypatch):
    # tqdm draws at most every mininterval: with its clock frozen a 20-step fit draws the bar when
    # it opens and when it closes, not once per step
    import io
    import pytorch_lightning as pl
    import tqdm.std
    from lightning_tasks.progress import StepProgressBar
    from lightning_tasks.qaoa import QAOATask
    monkeypatch.setattr(tqdm.std, "time", lambda: 1000.0)
    out = io.StringIO()
    trainer = pl.Trainer(max_steps=20, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_model_summary=False, callbacks=[StepProgressBar("qaoa", file=out)])
    trainer.fit(QAOATask(graph=[[0, 1], [1, 2], [2, 0]], p=1, n_starts=2))
    draws = [d for d in out.getvalue().replace("\n", "\r").split("\r") if d.strip()]
    assert len(draws) <= 3, draws
    assert "20/20" in draws[-1] and "expected_cost=" in draws[-1], draws[-1]


def test_validate_and_test_metrics_are_those_of_the_checkpoint(tmp_path):
    # the angles of a 2-step checkpoint are those a 3-step run logs at step 2 (values after k
    # updates); validate and test report them exactly, with the error against H2's FCI energy
    cfg = ["--config", str(ROOT / "examples" / "configs" / "vqe_h2.yaml")]
    main(["fit"] + cfg + ["--trainer.max_steps", "2", "--trainer.default_root_dir", str(tmp_path / "a")] + QUICK)
    main(["fit"] + cfg + ["--trainer.max_steps", "3", "--trainer.default_root_dir", str(tmp_path / "b")] + QUICK)
    ckpt = tmp_path / "a" / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt"
    assert torch.load(ckpt, weights_only=True)["global_step"] == 2
    for command in ("validate", "test"):
        main([command] + cfg + ["--ckpt_path", str(ckpt), "--trainer.default_root_dir", str(tmp_path / "a")] + QUICK)
    logged = float(metrics(tmp_path / "b")[2]["energy"])                 # float32 in the training log
    (val,), (test,) = metrics(tmp_path / "a", version=1), metrics(tmp_path / "a", version=2)
    for prefix, row in (("val", val), ("test", test)):
        energy = float(row[f"{prefix}_energy"])
        assert energy == pytest.approx(logged, abs=1e-6)
        assert float(row[f"{prefix}_error_mha"]) == pytest.approx(abs(energy - FCI_H2) * 1e3, abs=0.01)
        assert float(row[f"{prefix}_chemical_accuracy"]) == float(abs(energy - FCI_H2) * 1e3 < 1.6)


# ------------------------------------------------------------------------------------------------
# --ckpt_path of another task, of a plain Trainer, with clashing arguments; --data
def _console(monkeypatch, capsys, argv):
    """Run `tql argv` as the console script; (exit status, stderr)."""
    import lightning_tasks.cli as cli
    monkeypatch.setattr(cli, "keep_freed_memory", lambda: None)
    monkeypatch.setattr(sys, "argv", ["tql"] + argv)
    with pytest.raises(SystemExit) as exc:
        main()
    return exc.value.code, capsys.readouterr().err


def _qaoa_checkpoint(root):
    main(["fit", "--model", "QAOATask", "--model.p", "1", "--model.n_starts", "2", "--trainer.max_steps", "1",
          "--trainer.default_root_dir", str(root)] + QUICK)
    return root / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt"


def test_checkpoint_of_another_task_is_refused_naming_both(tmp_path, monkeypatch, capsys):
    """LightningCLI reads the checkpoint's class path into the model config: a QAOATask checkpoint
    given to the VQE config silently trained a QAOATask (then failed: the config's
    ChemicalAccuracyStopping found no error_mha)."""
    ckpt = _qaoa_checkpoint(tmp_path / "q")
    vqe = ["--config", str(ROOT / "examples" / "configs" / "vqe_h2.yaml"), "--trainer.max_steps", "2",
           "--trainer.default_root_dir", str(tmp_path / "v")]
    want = r"--ckpt_path: .* is a checkpoint of QAOATask, but the model is VQETask"
    for command in ("fit", "validate"):
        with pytest.raises(ValueError, match=want):
            main([command] + vqe + ["--ckpt_path", str(ckpt)] + QUICK)
    code, err = _console(monkeypatch, capsys, ["fit"] + vqe + ["--ckpt_path", str(ckpt)] + QUICK)
    lines = [ln for ln in err.splitlines() if ln.startswith("tql: error")]
    assert code == 2 and len(lines) == 1 and "QAOATask" in lines[0] and "VQETask" in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "v" / "lightning_logs").exists()          # refused before anything ran
    # a checkpoint written outside the CLI (no class path in it) is recognised by its arguments
    from lightning_tasks.vqe import VQETask, make_trainer
    trainer = make_trainer(max_steps=1)
    trainer.fit(VQETask("H2"))
    trainer.save_checkpoint(tmp_path / "vqe.ckpt")
    with pytest.raises(ValueError, match=r"is a checkpoint of VQETask, but the model is QAOATask"):
        main(["fit", "--model", "QAOATask", "--ckpt_path", str(tmp_path / "vqe.ckpt")] + QUICK)
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"junk.ckpt' does not load with torch.load\(weights_only=True\)"):
        main(["fit", "--model", "VQETask", "--ckpt_path", str(tmp_path / "junk.ckpt")] + QUICK)


def test_plain_trainer_checkpoint_resumes_through_the_cli(tmp_path):
    """A checkpoint of a plain Trainer (fit_vqe, the Python API) has no class path: LightningCLI
    failed with "Parser key model". It resumes now, with the checkpoint's own arguments."""
    from lightning_tasks.vqe import VQETask, make_trainer
    trainer = make_trainer(max_steps=2)
    task = VQETask("H2", lr=0.05)
    trainer.fit(task)
    trainer.save_checkpoint(tmp_path / "plain.ckpt")
    main(["fit", "--model", "VQETask", "--trainer.max_steps", "4", "--ckpt_path", str(tmp_path / "plain.ckpt"),
          "--trainer.default_root_dir", str(tmp_path)] + QUICK)
    rows = metrics(tmp_path)
    straight = VQETask("H2", lr=0.05)
    make_trainer(max_steps=4).fit(straight)
    assert [int(r["step"]) for r in rows] == [2, 3]
    for r, want in zip(rows, straight.history[2:]):
        assert float(r["energy"]) == pytest.approx(want, abs=1e-12)   # the saved lr=0.05, not the default


def test_arguments_that_clash_with_the_checkpoint_are_refused(tmp_path, monkeypatch, capsys):
    """The checkpoint's hyperparameters replaced the model arguments silently: --model.init_args.lr
    0.5 (or another molecule) with --ckpt_path was accepted and ignored."""
    cfg = ["--config", str(ROOT / "examples" / "configs" / "vqe_h2.yaml")]
    main(["fit"] + cfg + ["--trainer.max_steps", "1", "--trainer.default_root_dir", str(tmp_path)] + QUICK)
    ckpt = str(tmp_path / "lightning_logs" / "version_0" / "checkpoints" / "last.ckpt")
    with pytest.raises(ValueError, match=r"has lr=0.1, but the config / command line gives lr=0.5.*drop this option"):
        main(["fit"] + cfg + ["--model.init_args.lr", "0.5", "--ckpt_path", ckpt] + QUICK)
    code, err = _console(monkeypatch, capsys, ["validate"] + cfg + ["--model.init_args.molecule", "LiH",
                                                                    "--ckpt_path", ckpt] + QUICK)
    assert code == 2 and "molecule='H2'" in err and "molecule='LiH'" in err and "Traceback" not in err, err


def test_classifier_without_data_and_tasks_with_data_say_what_to_pass(tmp_path, monkeypatch, capsys):
    """`tql fit --model HybridClassifier` said "n_features must be an int, got None"; with
    n_features given it ended in Lightning's "train_dataloader must be implemented" traceback."""
    root = ["--trainer.default_root_dir", str(tmp_path), "--trainer.max_steps", "1"] + QUICK
    for command, extra in (("fit", []), ("fit", ["--model.n_features", "2", "--model.n_classes", "2"]),
                           ("test", ["--model.n_features", "2", "--model.n_classes", "2"])):
        code, err = _console(monkeypatch, capsys, [command, "--model", "HybridClassifier"] + extra + root)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1, err
        assert lines[0].startswith("tql: error: --data: HybridClassifier has no data of its own; pass a data "
                                   "module, e.g. --data CirclesDataModule"), lines[0]
    # VQETask / QAOATask serve their own one-element dataset: a data module's batches became steps
    with pytest.raises(ValueError, match=r"--data: VQETask serves its own one-element dataset .* drop --data"):
        main(["fit", "--model", "VQETask", "--data", "CirclesDataModule"] + root)
