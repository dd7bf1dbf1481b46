"""lightning_tasks.vqe: VQE through the Lightning Trainer (H2, bundled; no PySCF, no data)."""
import warnings

import pytest
import torch

pl = pytest.importorskip("pytorch_lightning")

from pytorch_lightning.callbacks import ModelCheckpoint  # noqa: E402

from lightning_tasks.vqe import (CHEMICAL_ACCURACY_MHA, ChemicalAccuracyStopping, VQETask, fit_vqe,  # noqa: E402
                                 make_trainer, pes_scan)

FCI_H2 = -1.13728


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_h2_uccsd_reaches_chemical_accuracy_through_the_trainer():
    task = fit_vqe("H2", max_steps=100)
    assert task.fci_energy == pytest.approx(FCI_H2, abs=1e-5)
    assert task.steps_to_accuracy is not None and task.steps_to_accuracy <= 100
    assert task.global_step <= 100
    assert abs(task.best_energy - FCI_H2) < 1.6e-3
    assert task.best_energy >= task.fci_energy - 1e-9          # variational
    assert task.error_mha < CHEMICAL_ACCURACY_MHA
    m = task.trainer.callback_metrics
    assert {"energy", "error_mha", "chemical_accuracy"} <= set(m)
    assert float(m["chemical_accuracy"]) == 1.0
    assert float(m["error_mha"]) < CHEMICAL_ACCURACY_MHA
    assert float(m["energy"]) == pytest.approx(task.history[-1], abs=1e-6)
    assert len(task.history) == task.global_step


def test_lbfgs_through_lightning_closure_and_hparams_are_plain():
    task = fit_vqe("H2", max_steps=20, optimizer="lbfgs", diff_method="backprop")
    assert task.error_mha < CHEMICAL_ACCURACY_MHA
    assert task.hparams.optimizer == "lbfgs" and task.hparams.diff_method == "backprop"
    assert all(isinstance(v, (str, int, float, bool, list, type(None))) for v in task.hparams.values())


def test_hardware_efficient_runs_and_logs():
    task = fit_vqe("H2", max_steps=5, stop_at_accuracy=False, ansatz="hardware_efficient", n_layers=1)
    assert task.global_step == 5 and len(task.history) == 5
    assert task.history[-1] < task.hf_energy + 1e-6            # starts at HF, goes down


def test_resume_from_checkpoint(tmp_path):
    task = VQETask("H2", lr=0.02)                              # slow enough not to converge in 3 steps
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    make_trainer(max_steps=3, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    path = tmp_path / "last.ckpt"
    assert path.exists()
    saved_weights = task.circuit.weights.detach().clone()
    saved_energy = task.final_energy()

    # the whole Lightning checkpoint loads with weights_only=True (hyperparameters are plain values)
    raw = torch.load(path, weights_only=True)
    assert raw["global_step"] == 3
    assert torch.allclose(raw["state_dict"]["circuit.weights"], saved_weights)
    assert raw["hyper_parameters"]["molecule"] == "H2"
    assert len(raw["vqe_history"]) == 3

    # a fresh task resumes: step continues from 3, first logged energy is the saved state's energy
    fresh = VQETask(**raw["hyper_parameters"])
    assert not torch.allclose(fresh.circuit.weights, saved_weights)
    make_trainer(max_steps=6, enable_checkpointing=False).fit(fresh, ckpt_path=str(path))
    assert fresh.global_step == 6
    assert len(fresh.history) == 6
    assert fresh.history[:3] == pytest.approx(raw["vqe_history"])
    assert fresh.history[3] == pytest.approx(saved_energy, abs=1e-10)
    assert fresh.history[5] < fresh.history[3]

    # ... and the same as an uninterrupted run of 6 steps (Adam state restored too)
    straight = VQETask("H2", lr=0.02)
    make_trainer(max_steps=6).fit(straight)
    assert torch.allclose(fresh.circuit.weights, straight.circuit.weights, atol=1e-10)

    # load_from_checkpoint rebuilds the task from the saved hyperparameters
    loaded = VQETask.load_from_checkpoint(path, weights_only=True)
    assert torch.allclose(loaded.circuit.weights, saved_weights)


@pytest.mark.parametrize("optimizer, lr, steps", [("qng", 0.5, 15), ("spsa", None, 150)])
def test_natural_gradient_and_spsa_through_the_trainer(optimizer, lr, steps):
    task = fit_vqe("H2", max_steps=steps, optimizer=optimizer, lr=lr)
    assert task.steps_to_accuracy is not None and task.steps_to_accuracy <= steps
    assert task.error_mha < CHEMICAL_ACCURACY_MHA and task.best_energy >= task.fci_energy - 1e-9
    assert len(task.history) == task.global_step
    assert task.automatic_optimization == (optimizer != "spsa")


def test_spsa_resumes_from_a_lightning_checkpoint(tmp_path):
    task = VQETask("H2", optimizer="spsa", lr=0.1)
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    make_trainer(max_steps=3, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    raw = torch.load(tmp_path / "last.ckpt", weights_only=True)
    assert raw["global_step"] == 3 and int(raw["optimizer_states"][0]["state"][0]["step"]) == 3
    fresh = VQETask(**raw["hyper_parameters"])
    make_trainer(max_steps=6, enable_checkpointing=False).fit(fresh, ckpt_path=str(tmp_path / "last.ckpt"))
    straight = VQETask("H2", optimizer="spsa", lr=0.1)
    make_trainer(max_steps=6).fit(straight)
    assert fresh.global_step == 6
    assert torch.allclose(fresh.circuit.weights, straight.circuit.weights, atol=1e-12)
    assert not torch.allclose(fresh.circuit.weights, task.circuit.weights)


def test_pes_scan_three_points_warm_started(tmp_path):
    table = pes_scan("H2", bond_lengths=[0.5, 0.7, 1.5], max_steps=100, plot=str(tmp_path / "pes.png"))
    assert [row["bond_length"] for row in table] == [0.5, 0.7, 1.5]
    for row in table:
        assert set(row) >= {"bond_length", "vqe", "hf", "fci", "error_mha"}
        assert row["error_mha"] < CHEMICAL_ACCURACY_MHA, row
        assert row["fci"] <= row["vqe"] + 1e-9 <= row["hf"] + 2e-9
    assert table[1]["fci"] < table[0]["fci"] and table[1]["fci"] < table[2]["fci"]   # the well is near 0.74 Å


def test_early_stopping_callback_stops_at_chemical_accuracy():
    task = VQETask("H2")
    stop = ChemicalAccuracyStopping()
    make_trainer(max_steps=100, callbacks=[stop]).fit(task)
    assert task.global_step < 100
    assert abs(task.history[-1] - task.fci_energy) * 1e3 < CHEMICAL_ACCURACY_MHA
    assert all(abs(e - task.fci_energy) * 1e3 >= CHEMICAL_ACCURACY_MHA for e in task.history[:-1])


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"no bundled Hamiltonian named 'XeF6'.*available: .*H2.*LiH"):
        VQETask("XeF6")
    with pytest.raises(ValueError, match=r"unknown ansatz 'qaoa'.*uccsd.*hardware_efficient"):
        VQETask("H2", ansatz="qaoa")
    with pytest.raises(ValueError, match=r"unknown diff_method 'finite-diff'.*adjoint"):
        VQETask("H2", diff_method="finite-diff")
    with pytest.raises(ValueError, match=r"unknown optimizer 'newton'"):
        VQETask("H2", optimizer="newton")
    with pytest.raises(ValueError, match=r"not in the bundled scan"):
        VQETask("H2", bond_length=0.123)
    with pytest.raises(ValueError, match=r"bond length 0.123 is not in the bundled H2 scan"):
        pes_scan("H2", bond_lengths=[0.123])
    for geometry in ([("H",)], [("H", 0), ("H", 1)]):                # was an unpacking / iteration error
        with pytest.raises(ValueError, match=r"geometry must be \[\[symbol, \[x, y, z\]\]"):
            VQETask(geometry=geometry)
    for lr in (True, float("inf")):
        with pytest.raises(ValueError, match="lr must be a positive number"):
            VQETask("H2", lr=lr)


@pytest.mark.parametrize("kwargs", [dict(charge=1), dict(multiplicity=3), dict(basis="6-31g"),
                                    dict(active_electrons=2, active_orbitals=3)])
def test_options_that_change_a_bundled_molecule_are_not_ignored(kwargs):
    """They were dropped silently: VQETask("LiH", active_electrons=2, active_orbitals=3) ran 12 qubits."""
    name = "LiH" if "active_electrons" in kwargs else "H2"
    with pytest.raises(ValueError, match=f"{next(iter(kwargs))}=.* not match the bundled Hamiltonian '{name}'"):
        VQETask(name, **kwargs)


def test_options_that_agree_with_a_bundled_molecule_are_accepted():
    task = VQETask("LiH_active", basis="STO-3G", active_electrons=2, active_orbitals=[1, 2, 3])
    assert task.info.n_qubits == 6 and task.circuit.n_wires == 6


def test_geometry_task_is_named_after_its_molecule():
    """The default molecule="H2" used to label every geometry (a LiH run reported as "H2")."""
    pytest.importorskip("pyscf")
    from pyscf import gto, mcscf, scf
    geom = "Li 0 0 0; H 0 0 1.6"
    task = VQETask(geometry=geom, active_electrons=2, active_orbitals=2)
    assert task.info.name == "LiH" and task.info.n_qubits == 4
    mf = scf.RHF(gto.M(atom=geom, basis="sto-3g", verbose=0)).run(conv_tol=1e-11)
    mc = mcscf.CASCI(mf, 2, 2)
    mc.verbose = 0
    assert task.fci_energy == pytest.approx(mc.kernel()[0], abs=1e-8)          # PySCF CASCI oracle
    assert VQETask("lithium hydride", geometry=geom, active_electrons=2, active_orbitals=2).info.name == \
        "lithium hydride"


def test_validate_test_and_predict_evaluate_the_angles(tmp_path):
    # UCCSD starts at the HF state: its energy is PySCF's HF energy (shipped with the molecule)
    task = VQETask("H2")
    t = make_trainer(max_steps=1)
    (val,) = t.validate(task, verbose=False)
    (test,) = t.test(task, verbose=False)
    (pred,) = t.predict(task)
    for metrics, prefix in ((val, "val_"), (test, "test_"), (pred, "")):
        assert metrics[prefix + "energy"] == pytest.approx(task.hf_energy, abs=1e-9)
        assert metrics[prefix + "error_mha"] == pytest.approx((task.hf_energy - task.fci_energy) * 1e3, abs=1e-6)
        assert metrics[prefix + "chemical_accuracy"] == 0.0
    # fit runs no validation of its own; a checkpoint's angles are what validate evaluates
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    fitter = make_trainer(max_steps=40, callbacks=[ckpt], enable_checkpointing=True)
    fitter.fit(task)
    assert not any(k.startswith("val_") for k in fitter.callback_metrics)
    (val,) = make_trainer().validate(VQETask("H2"), ckpt_path=str(tmp_path / "last.ckpt"), verbose=False)
    assert val["val_energy"] == pytest.approx(task.final_energy(), abs=1e-9)
    assert val["val_error_mha"] < CHEMICAL_ACCURACY_MHA
