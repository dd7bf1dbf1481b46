"""lightning_tasks.vqe: VQE through the Lightning Trainer (H2, bundled; no PySCF, no data)."""
import math
import warnings

import numpy as np
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


@pytest.mark.parametrize("optimizer, lr, steps", [("qng", 0.5, 15), ("spsa", None, 150), ("rotosolve", None, 3),
                                                   ("qnspsa", None, 150)])
def test_natural_gradient_and_spsa_through_the_trainer(optimizer, lr, steps):
    task = fit_vqe("H2", max_steps=steps, optimizer=optimizer, lr=lr)
    assert task.steps_to_accuracy is not None and task.steps_to_accuracy <= steps
    assert task.error_mha < CHEMICAL_ACCURACY_MHA and task.best_energy >= task.fci_energy - 1e-9
    assert len(task.history) == task.global_step
    assert task.automatic_optimization == (optimizer in ("qng",))


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


# ------------------------------------------------------------------------------------------------
# options the chosen ansatz does not use; mappings the ansatz cannot use
@pytest.mark.parametrize("kwargs, bad", [(dict(n_layers=3), "n_layers=3"), (dict(seed=7), "seed=7"),
                                         (dict(n_layers=1, seed=1), "n_layers=1, seed=1")])
def test_options_the_ansatz_does_not_use_are_refused(kwargs, bad):
    """VQETask("H2", ansatz="uccsd", n_layers=3) used to build the same UCCSD circuit silently."""
    with pytest.raises(ValueError, match=rf"{bad} (is|are) not used by ansatz='uccsd' without shots.*leave"):
        VQETask("H2", ansatz="uccsd", **kwargs)
    # the defaults, explicitly, are fine; hardware_efficient uses both; seed also seeds the shots
    VQETask("H2", ansatz="uccsd", n_layers=2, seed=0)
    VQETask("H2", ansatz="hardware_efficient", **kwargs)
    VQETask("H2", ansatz="uccsd", seed=7, shots=100)
    with pytest.raises(ValueError, match="n_layers=3 is not used by ansatz='uccsd' \\("):
        VQETask("H2", ansatz="uccsd", n_layers=3, shots=100)
    with pytest.raises(ValueError, match="seed must be an int, got 1.5"):
        VQETask("H2", seed=1.5)


def test_hardware_efficient_seed_and_layers_change_the_circuit():
    a, b = (VQETask("H2", ansatz="hardware_efficient", seed=s) for s in (0, 1))
    assert not torch.equal(a.circuit.weights, b.circuit.weights)
    assert VQETask("H2", ansatz="hardware_efficient", n_layers=3).circuit.num_parameters > a.circuit.num_parameters


def test_uccsd_refuses_a_non_jordan_wigner_hamiltonian(monkeypatch):
    import dataclasses
    import torchquantum_layers.chem as chem
    load = chem.load

    def parity_load(name, bond_length=None):
        H, info = load(name, bond_length=bond_length)
        return H, dataclasses.replace(info, mapping="parity")

    monkeypatch.setattr(chem, "load", parity_load)
    with pytest.raises(ValueError, match="ansatz='uccsd' needs a Jordan–Wigner Hamiltonian.*'parity'"):
        VQETask("H2")
    VQETask("H2", ansatz="hardware_efficient")                      # no particle-number assumption


# ------------------------------------------------------------------------------------------------
# shots
def _dense_h2_groups(H):
    """Dense matrices (NumPy Kronecker products) of the qubit-wise commuting groups of the H2
    Hamiltonian: all Z-type terms together, each X/Y term alone (for H2 under JW every X/Y term
    has X or Y on all four qubits, two differing letters from any other one: the partition is forced)."""
    from . import oracle as O
    z_group, others, const = 0, [], 0.0
    for c, p in H.terms:
        m = O.kron(*[O.PAULI[p.letter(w) if w in p.wires else "I"] for w in range(4)])
        if not p.wires:
            const += float(c)
        elif p.x_mask == 0:
            z_group = z_group + float(c) * m
        else:
            others.append(float(c) * m)
    assert len(others) == 4
    return const, [z_group] + others


def _dense_uccsd_h2_state(w):
    from . import oracle as O
    ops = [("X", 0, ()), ("X", 1, ()), ("DOUBLEEXCITATION", [0, 1, 2, 3], (w[0],)),
           ("SINGLEEXCITATION", [0, 2], (w[1],)), ("SINGLEEXCITATION", [1, 3], (w[2],))]
    zero = np.zeros((1, 16), dtype=np.complex128)
    zero[0, 0] = 1
    return O.run_ops(ops, 4, zero)[0]


class _Angles(pl.Callback):
    def __init__(self):
        self.seen = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.seen.append(module.circuit.weights.detach().clone().numpy())


def test_shots_logged_energy_has_the_right_mean_and_spread():
    """Each logged energy is an estimate from `shots` samples per QWC group: its mean is the exact
    <H> and its variance Σ_g Var_ψ(O_g) / shots, both from the dense oracle at the angles of that step."""
    import torchquantum_layers.chem as chem
    H, _ = chem.load("H2")
    const, groups = _dense_h2_groups(H)
    shots, z = 500, []
    histories = []
    for seed in range(4):
        task = VQETask("H2", shots=shots, seed=seed, init_weights=[0.3, -0.2, 0.1], optimizer="sgd", lr=0.05)
        rec = _Angles()
        make_trainer(max_steps=30, callbacks=[rec]).fit(task)
        assert len(rec.seen) == len(task.history) == 30
        histories.append(task.history)
        for w, logged in zip(rec.seen, task.history):
            psi = _dense_uccsd_h2_state(w)
            means = [float(np.real(psi.conj() @ g @ psi)) for g in groups]
            var = sum(float(np.real(psi.conj() @ g @ g @ psi)) - m * m for g, m in zip(groups, means)) / shots
            z.append((logged - const - sum(means)) / math.sqrt(var))
    z = np.array(z)
    m = len(z)
    assert abs(z.mean()) < 5 / math.sqrt(m), z.mean()                       # 5 standard errors
    assert abs(z.var(ddof=1) - 1) < 5 * math.sqrt(2 / (m - 1)), z.var(ddof=1)
    assert len({h[0] for h in histories}) == 4                             # the seeds differ


def test_shots_h2_run_gets_near_fci():
    task = fit_vqe("H2", max_steps=50, stop_at_accuracy=False, shots=2000, seed=1)
    assert task.hparams.shots == 2000 and task.global_step == 50
    assert task.error_mha < 3.0                                            # exact energy of the angles found
    assert task.best_energy >= task.fci_energy - 1e-9                      # exact, so variational
    assert task.final_energy() >= task.fci_energy - 1e-9
    assert task.history[-1] != pytest.approx(task.final_energy(), abs=1e-9)   # the history holds estimates
    (val,) = make_trainer().validate(task, verbose=False)
    assert val["val_energy"] == pytest.approx(task.final_energy(), abs=1e-9)  # evaluation stays exact


def test_shots_resume_reproduces_an_uninterrupted_run(tmp_path):
    kw = dict(shots=300, seed=3, lr=0.05)
    task = VQETask("H2", **kw)
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    make_trainer(max_steps=3, callbacks=[ckpt], enable_checkpointing=True).fit(task)
    raw = torch.load(tmp_path / "last.ckpt", weights_only=True)
    assert raw["hyper_parameters"]["shots"] == 300
    fresh = VQETask(**raw["hyper_parameters"])
    make_trainer(max_steps=6).fit(fresh, ckpt_path=str(tmp_path / "last.ckpt"))
    straight = VQETask("H2", **kw)
    make_trainer(max_steps=6).fit(straight)
    assert fresh.history == straight.history                               # the same samples, step by step
    assert torch.equal(fresh.circuit.weights, straight.circuit.weights)
    # each step draws its own samples (seeded by seed and step)
    a = torch.rand(4, generator=straight.shot_generator(7))
    assert not torch.equal(a, torch.rand(4, generator=straight.shot_generator(8)))
    assert torch.equal(a, torch.rand(4, generator=VQETask("H2", **kw).shot_generator(7)))


def test_shots_choose_parameter_shift_and_refuse_exact_gradients():
    from torchquantum_layers.grad import resolve_diff_method
    task = VQETask("H2", shots=100)
    assert resolve_diff_method(task.hparams.diff_method, task.circuit, shots=100) == "parameter-shift"
    task.circuit.weights.data.fill_(0.1)
    e = task()
    e.backward()                                                           # parameter-shift with samples
    assert task.circuit.weights.grad is not None and e.requires_grad
    for method in ("adjoint", "backprop"):
        with pytest.raises(ValueError, match=f"shots=100 .* no '{method}' gradient.*parameter-shift"):
            VQETask("H2", shots=100, diff_method=method)
    VQETask("H2", shots=100, diff_method="backprop", optimizer="spsa")      # SPSA takes no gradient
    VQETask("H2", shots=100, diff_method="parameter-shift")
    for bad in (0, -5, 2.5, True, "100"):
        with pytest.raises(ValueError, match="shots must be a positive int or None"):
            VQETask("H2", shots=bad)


# ---------------------------------------------------------------------------------------------
# noise and mitigation, against a NumPy density-matrix simulation of the same ops
from lightning_tasks.noise_spec import noise_model_from_spec  # noqa: E402

from . import oracle as O  # noqa: E402
from torchquantum_layers.grad import circuit_expval  # noqa: E402

_PAULIS = (O.X, O.Y, O.Z)


def _dense_noisy_energy(task, p, ops=None):
    """Tr(ρ H) with depolarizing(p) after every op on each of its wires (ρ → (1-p) ρ + p/3 Σ P ρ P)."""
    n = task.circuit.n_wires
    rho = np.zeros((2 ** n, 2 ** n), dtype=complex)
    rho[0, 0] = 1
    w = task.circuit.weights.detach().numpy()
    for op in (task.circuit.ops if ops is None else ops):
        u = O.gate_matrix(op.gate.name, *[w[a.index] * a.scale for a in op.angles])
        U = O.full_operator(u.conj().T if op.adjoint else u, list(op.wires), n)
        rho = U @ rho @ U.conj().T
        for q in op.wires:
            rho = (1 - p) * rho + p / 3 * sum(O.full_operator(P, [q], n) @ rho @ O.full_operator(P, [q], n)
                                              for P in _PAULIS)
    return np.trace(rho @ task.H.to_dense(n).numpy()).real


def _global_fold(ops, k):
    from torchquantum_layers.circuit import Op
    back = [Op(o.gate, o.wires, o.angles, o.data_key, not o.adjoint) for o in reversed(ops)]
    return list(ops) + (back + list(ops)) * k


def test_noisy_energy_and_zne_against_numpy_densities():
    p = 0.01
    spec = {"channels": [{"channel": "depolarizing", "p": p}]}
    noisy = VQETask("H2", noise=spec, init_weights=[0.1, -0.05, 0.02])
    assert float(noisy()) == pytest.approx(_dense_noisy_energy(noisy, p), abs=1e-10)
    zne = VQETask("H2", noise=spec, mitigation="zne", init_weights=[0.1, -0.05, 0.02])
    raw = [_dense_noisy_energy(zne, p, _global_fold(zne.circuit.ops, k)) for k in (0, 1, 2)]
    want = np.polyval(np.polyfit([1, 3, 5], raw, 2), 0.0)
    assert float(zne()) == pytest.approx(want, abs=1e-10)
    ideal = zne.final_energy()
    assert abs(float(zne()) - ideal) < abs(float(noisy()) - ideal) / 10
    ev = zne.evaluation()
    assert ev["energy"] == pytest.approx(ideal) and ev["reported_energy"] == pytest.approx(want, abs=1e-10)


def test_readout_mitigation_is_exact_and_linear_zne_options():
    spec = {"readout": {"p01": 0.03, "p10": 0.07}}
    plain = VQETask("H2", noise=spec, init_weights=[0.2, 0.0, 0.0])
    ideal = plain.final_energy()
    assert abs(float(plain()) - ideal) > 1e-3                # the flips move the reported energy
    mitigated = VQETask("H2", noise=spec, mitigation="readout", init_weights=[0.2, 0.0, 0.0])
    assert float(mitigated()) == pytest.approx(ideal, abs=1e-10)
    spec2 = {"channels": [{"channel": "depolarizing", "p": 0.01}], "readout": {"p01": 0.03, "p10": 0.07}}
    t = VQETask("H2", noise=spec2, mitigation="zne+readout", zne_scale_factors=[1, 2, 3], zne_extrapolation="linear",
                init_weights=[0.2, 0.0, 0.0])
    assert abs(float(t()) - ideal) < abs(float(VQETask("H2", noise=spec2, init_weights=[0.2, 0.0, 0.0])()) - ideal)


def test_noisy_zne_training_reaches_chemical_accuracy_and_logs_the_reported_energy():
    task = VQETask("H2", noise={"channels": [{"channel": "depolarizing", "p": 0.002}]}, mitigation="zne", lr=0.1)
    trainer = pl.Trainer(max_epochs=40, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(task)
    assert task.error_mha < CHEMICAL_ACCURACY_MHA                         # the noiseless energy of the angles
    assert len(task.history) == 40 and abs(task.history[-1] - task.fci_energy) * 1e3 < 1.0   # the ZNE report
    # the best energy is a noiseless one: of the best-reported angles or of the current ones
    with torch.no_grad():
        at_best = float(circuit_expval(task.circuit, task.H, weights=task._best[1]).reshape(()))
    assert task.best_energy == pytest.approx(min(at_best, task.final_energy()), abs=1e-12)


def test_noise_spec_builds_the_analytic_channels():
    model = noise_model_from_spec({"channels": [{"channel": "amplitude_damping", "gamma": 0.3, "gates": ["X"]}],
                                   "readout": {"p01": 0.1}})
    import torchquantum_layers as tql
    c = tql.Circuit(1).double()
    c.x(0)
    # |1> damped: P(1) = 0.7; read with p01 = p10 = 0.1: <Z> = 0.8 * (0.3 - 0.7)
    assert float(tql.mixed.expval(c, "Z0", noise_model=model)[0]) == pytest.approx(0.8 * (0.3 - 0.7), abs=1e-12)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(noise={"channels": [{"channel": "depolarise", "p": 0.1}]}), ValueError, "unknown channel 'depolarise'"),
    (dict(noise={"channels": [{"channel": "depolarizing", "q": 0.1}]}), TypeError, r"depolarizing takes \(p, n_wires\)"),
    (dict(noise={"channel": []}), ValueError, "unknown key"),
    (dict(noise={}), ValueError, "no channels and no readout"),
    (dict(noise={"readout": {"p10": 0.1}}), ValueError, "'readout' must be"),
    (dict(noise={"channels": [{"channel": "depolarizing", "p": 0.1}]}, mitigation="readout"), ValueError,
     "needs readout errors"),
    (dict(noise={"channels": [{"channel": "depolarizing", "p": 0.1}]}, mitigation="pec"), ValueError,
     "mitigation must be"),
    (dict(mitigation="zne"), ValueError, "apply only with noise"),
    (dict(noise={"channels": [{"channel": "depolarizing", "p": 0.1}]}, zne_scale_factors=[1, 3]), ValueError,
     "apply only with mitigation='zne'"),
    (dict(noise={"channels": [{"channel": "depolarizing", "p": 0.1}]}, mitigation="zne", zne_scale_factors=[1, 0.5]),
     ValueError, "got 0.5"),
    (dict(noise={"channels": [{"channel": "depolarizing", "p": 0.1}]}, diff_method="adjoint"), ValueError,
     "adjoint method cannot"),
])
def test_noise_options_are_checked(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        VQETask("H2", **kwargs)


def test_logged_energies_keep_double_precision():
    task = VQETask("H2", lr=0.1)
    trainer = pl.Trainer(max_epochs=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(task)
    logged = trainer.callback_metrics["energy"]
    assert logged.dtype == torch.float64 and float(logged) == task.history[-1]
    assert float(trainer.callback_metrics["error_mha"]) == pytest.approx(abs(task.history[-1] - task.fci_energy) * 1e3,
                                                                         abs=1e-9)


# ------------------------------------------------------------------------------------------------
# resuming keeps every piece of task state; arguments stay plain data
def _fit_with_angles(task, max_steps, **fit_kwargs):
    rec = _Angles()
    make_trainer(max_steps=max_steps, callbacks=[rec]).fit(task, **fit_kwargs)
    return rec.seen


def test_resume_keeps_the_best_energy_and_angles(tmp_path):
    """The best-so-far (energy, angles) was kept only in memory: after a resume the best of the
    steps before the checkpoint was lost. With shots the logged energies are estimates that
    fluctuate, and this seed's lowest estimate comes at step 2, before the 4-step checkpoint."""
    kw = dict(shots=50, seed=5, lr=0.05, init_weights=[0.1, 0.0, 0.0])
    straight = VQETask("H2", **kw)
    seen = _fit_with_angles(straight, 8)
    k = int(np.argmin(straight.history))
    assert k < 4                                                   # the premise of the test

    first = VQETask("H2", **kw)
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    make_trainer(max_steps=4, callbacks=[ckpt], enable_checkpointing=True).fit(first)
    raw = torch.load(tmp_path / "last.ckpt", weights_only=True)      # plain floats and tensors only
    assert raw["vqe_best_energy"] == straight.history[k]
    resumed = VQETask(**raw["hyper_parameters"])
    make_trainer(max_steps=8).fit(resumed, ckpt_path=str(tmp_path / "last.ckpt"))

    assert resumed.history == straight.history
    assert resumed._best[0] == straight._best[0] == straight.history[k]
    torch.testing.assert_close(resumed._best[1], straight._best[1], rtol=0, atol=0)
    # independent of the task: the best angles are those of step k, and best_energy is the exact
    # (dense NumPy) energy of the better of them and the final angles
    np.testing.assert_allclose(resumed._best[1].numpy(), seen[k], rtol=0, atol=1e-15)
    H = resumed.H.to_dense(4).numpy()

    def dense_energy(w):
        psi = _dense_uccsd_h2_state(np.asarray(w))
        return float(np.real(psi.conj() @ H @ psi))
    want = min(dense_energy(seen[k]), dense_energy(resumed.circuit.weights.detach().numpy()))
    assert resumed.best_energy == pytest.approx(want, abs=1e-10)
    assert straight.best_energy == pytest.approx(want, abs=1e-10)
    assert resumed.restore_best() == straight.restore_best()
    torch.testing.assert_close(resumed.circuit.weights, straight.circuit.weights, rtol=0, atol=0)


def test_a_checkpoint_without_best_angles_still_resumes(tmp_path):
    task = VQETask("H2", lr=0.02)
    trainer = make_trainer(max_steps=2)
    trainer.fit(task)
    trainer.save_checkpoint(tmp_path / "old.ckpt")
    raw = torch.load(tmp_path / "old.ckpt", weights_only=True)
    for key in ("vqe_best_energy", "vqe_best_weights"):              # as written before they were saved
        del raw[key]
    torch.save(raw, tmp_path / "old.ckpt")
    fresh = VQETask("H2", lr=0.02)
    make_trainer(max_steps=3).fit(fresh, ckpt_path=str(tmp_path / "old.ckpt"))
    assert fresh.global_step == 3 and fresh._best[0] == fresh.history[2]   # only what it saw itself
    raw["vqe_best_energy"], raw["vqe_best_weights"] = -1.0, torch.zeros(5, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"vqe_best_weights must be a tensor of shape \(3,\).*got \(5,\)"):
        VQETask("H2").on_load_checkpoint(raw)


def test_chemical_accuracy_stopping_resumes_where_an_uninterrupted_run_stops(tmp_path):
    """min_delta=1000 mHa: no step counts as an improvement after the first, so patience=3 stops
    after step 3 (4 steps). The check ran at epoch end, after a step-end checkpoint was written:
    a run resumed from the step-2 checkpoint lost one check and ran 5 steps."""
    def stopping():
        return ChemicalAccuracyStopping(patience=3, min_delta=1000.0)
    straight = VQETask("H2", lr=0.02)
    make_trainer(max_steps=50, callbacks=[stopping()]).fit(straight)
    assert straight.global_step == 4
    first = VQETask("H2", lr=0.02)
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    make_trainer(max_steps=2, callbacks=[stopping(), ckpt], enable_checkpointing=True).fit(first)
    raw = torch.load(tmp_path / "last.ckpt", weights_only=True)
    (state,) = [v for k, v in raw["callbacks"].items() if k.startswith("ChemicalAccuracyStopping")]
    assert state["wait_count"] == 1                                 # steps 0 (best) and 1 (no better) checked
    resumed = VQETask("H2", lr=0.02)
    make_trainer(max_steps=50, callbacks=[stopping()]).fit(resumed, ckpt_path=str(tmp_path / "last.ckpt"))
    assert resumed.global_step == 4 and resumed.history == straight.history


def test_natural_gradient_with_noise_is_refused():
    """QNG's metric is the Fubini–Study metric of the pure state; with noise the energy is that of
    a density matrix, so the "natural" gradient was silently that of another state."""
    spec = {"channels": [{"channel": "depolarizing", "p": 0.01}]}
    with pytest.raises(ValueError, match=r"optimizer='qng' with noise=.*pure state.*'adam', 'sgd', 'lbfgs' or 'spsa'"):
        VQETask("H2", noise=spec, optimizer="qng")
    with pytest.raises(ValueError, match="optimizer='qng' with noise"):
        VQETask("H2", noise=spec, optimizer="QNG", lr=0.1)
    VQETask("H2", noise=spec, optimizer="spsa")
    VQETask("H2", optimizer="qng")                                  # noiseless: the metric is right


def test_arguments_are_kept_as_plain_data(tmp_path):
    """A NoiseModel object or NumPy numbers in the arguments used to be pickled into the
    checkpoint, which then failed torch.load(weights_only=True)."""
    yaml = pytest.importorskip("yaml")
    from lightning_tasks.single_point import plain_hparam
    spec = {"channels": [{"channel": "depolarizing", "p": np.float64(0.01), "gates": ("CNOT",)}],
            "readout": {"p01": np.float32(0.25), "p10": 0.0}}
    task = VQETask("H2", lr=np.float64(0.1), noise=spec, mitigation="zne", zne_scale_factors=(1, np.int64(3), 5))
    trainer = make_trainer(max_steps=1)
    trainer.fit(task)
    trainer.save_checkpoint(tmp_path / "plain.ckpt")
    hp = torch.load(tmp_path / "plain.ckpt", weights_only=True)["hyper_parameters"]
    assert type(hp["lr"]) is float and hp["zne_scale_factors"] == [1, 3, 5]
    assert hp["noise"] == {"channels": [{"channel": "depolarizing", "p": 0.01, "gates": ["CNOT"]}],
                           "readout": {"p01": 0.25, "p10": 0.0}}
    again = VQETask(**yaml.safe_load(yaml.safe_dump(dict(hp))))     # the config round-trips through YAML
    again.set_weights(task.circuit.weights.detach())
    assert float(again()) == pytest.approx(float(task()), abs=1e-12)

    with pytest.raises(TypeError, match="noise must be a noise spec .* got NoiseModel"):
        VQETask("H2", noise=noise_model_from_spec(spec))
    with pytest.raises(TypeError, match=r"noise\['a'\]: expected plain data .* got object"):
        plain_hparam({"a": [object()]}, "noise")
    with pytest.raises(TypeError, match="noise: mapping keys must be strings, got 1"):
        plain_hparam({1: 2}, "noise")
    assert plain_hparam(torch.tensor([1.5, 2.0]), "x") == [1.5, 2.0] and plain_hparam(np.int64(4), "x") == 4


# ------------------------------------------------------------------------------------------------
# ADAPT-VQE grown by the training loop; Z2-tapered Hamiltonians
def _straight_adapt(max_steps, **kw):
    task = VQETask("LiH_active", ansatz="adapt", optimizer="lbfgs", **kw)
    make_trainer(max_steps=max_steps).fit(task)
    return task


def test_adapt_grows_until_the_pool_gradient_vanishes_and_reaches_fci():
    from torchquantum_layers import chem
    task = _straight_adapt(200)
    H, info = chem.load("LiH_active")
    assert task.adapt_converged and task.global_step < 200         # stopped by the gradient norm
    assert task.error_mha < 1e-3                                   # vs PySCF's FCI (bundled)
    assert task.best_energy >= info.fci_energy - 1e-9
    assert task.circuit.num_parameters == len(task.adapt_operators) == 4
    assert task.adapt_operators[0] == "DOUBLEEXCITATION[0, 1, 4, 5]"   # the largest HF gradient
    assert task._adapt.gradient_norms[-1] < 1e-3 <= min(task._adapt.gradient_norms[:-1])
    m = task.trainer.callback_metrics
    assert float(m["adapt_operators"]) == 4.0 and "adapt_gradient_norm" in m
    assert task.evaluation()["adapt_operators"] == 4.0
    # the energy never rises when an operator joins (its angle starts at 0)
    grown = task._adapt.grown_at
    assert all(task.history[s] <= task.history[s - 1] + 1e-9 for s in grown[1:])


def test_adapt_resumes_from_a_checkpoint_with_its_grown_circuit(tmp_path):
    straight = _straight_adapt(30)
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    first = VQETask("LiH_active", ansatz="adapt", optimizer="lbfgs")
    make_trainer(max_steps=9, callbacks=[ckpt], enable_checkpointing=True).fit(first)
    path = tmp_path / "last.ckpt"
    raw = torch.load(path, weights_only=True)
    n_saved = len(raw["vqe_adapt"]["chosen"])
    assert 1 < n_saved < len(straight.adapt_operators)             # stopped in the middle of the growth
    assert raw["state_dict"]["circuit.weights"].shape == (n_saved,)
    resumed = VQETask(**raw["hyper_parameters"])
    make_trainer(max_steps=30).fit(resumed, ckpt_path=str(path))
    assert resumed.adapt_operators == straight.adapt_operators
    assert resumed.history == pytest.approx(straight.history, abs=1e-10)
    assert torch.allclose(resumed.circuit.weights, straight.circuit.weights, atol=1e-8)
    loaded = VQETask.load_from_checkpoint(path, weights_only=True)
    assert loaded.circuit.num_parameters == n_saved
    assert loaded.final_energy() == pytest.approx(first.final_energy(), abs=1e-12)


def test_adam_keeps_the_moments_of_the_optimised_angles_when_the_ansatz_grows():
    from lightning_tasks.adapt_growth import grow_optimizer_state
    w = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    adam = torch.optim.Adam([w], lr=0.1)
    w.grad = torch.tensor([1.0, -2.0], dtype=torch.float64)
    adam.step()
    m, v = adam.state[w]["exp_avg"].clone(), adam.state[w]["exp_avg_sq"].clone()
    w.data = torch.cat([w.data, torch.zeros(1, dtype=torch.float64)])
    grow_optimizer_state(adam, w)
    assert torch.equal(adam.state[w]["exp_avg"], torch.cat([m, torch.zeros(1, dtype=torch.float64)]))
    assert torch.equal(adam.state[w]["exp_avg_sq"], torch.cat([v, torch.zeros(1, dtype=torch.float64)]))
    lbfgs = torch.optim.LBFGS([w])
    w.grad = torch.ones(3, dtype=torch.float64)
    lbfgs.step(lambda: (w ** 2).sum())
    w.data = torch.cat([w.data, torch.zeros(1, dtype=torch.float64)])
    grow_optimizer_state(lbfgs, w)
    assert not lbfgs.state and lbfgs._numel_cache is None
    # the LiH_active ADAPT run with Adam gets within chemical accuracy with its moments kept
    task = VQETask("LiH_active", ansatz="adapt", optimizer="adam")
    make_trainer(max_steps=150).fit(task)
    assert task.error_mha < CHEMICAL_ACCURACY_MHA
    state = task.trainer.optimizers[0].state[task.circuit.weights]
    assert int(state["step"]) == task.global_step                 # never restarted by a growth
    assert state["exp_avg"].shape == (task.circuit.num_parameters,)


def test_tapered_hamiltonian_trains_on_fewer_qubits_to_fci():
    task = VQETask("LiH_active", ansatz="hardware_efficient", n_layers=3, optimizer="lbfgs", taper=True)
    assert task.circuit.n_wires == task.H.n_wires == 3 and task.tapering.n_qubits == 6
    make_trainer(max_steps=60).fit(task)
    assert task.error_mha < CHEMICAL_ACCURACY_MHA                 # the full register's FCI (PySCF)


@pytest.mark.parametrize("kwargs, match", [
    (dict(ansatz="uccsd", pool="qubit"), r"pool='qubit' is not used by ansatz='uccsd'"),
    (dict(ansatz="hardware_efficient", adapt_steps=5), r"adapt_steps=5 is not used by ansatz='hardware_efficient'"),
    (dict(ansatz="adapt", pool="triples"), r"pool must be one of singles_doubles, generalized, qubit"),
    (dict(ansatz="adapt", adapt_steps=0), r"adapt_steps must be a positive int"),
    (dict(ansatz="adapt", adapt_grad_tol=-1.0), r"adapt_grad_tol must be a finite number >= 0"),
    (dict(ansatz="adapt", adapt_max_operators=0), r"adapt_max_operators must be a positive int"),
    (dict(ansatz="adapt", shots=100, diff_method="parameter-shift"), r"does not take shots= or noise="),
    (dict(ansatz="adapt", init_weights=[0.1]), r"init_weights does not apply"),
    (dict(ansatz="uccsd", taper=True), r"taper=True needs ansatz='hardware_efficient'"),
    (dict(ansatz="hardware_efficient", taper="yes"), r"taper must be True or False"),
])
def test_adapt_and_taper_options_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VQETask("H2", **kwargs)


def test_adapt_stops_at_its_operator_cap():
    task = _straight_adapt(100, adapt_max_operators=2)
    assert task.adapt_converged and len(task.adapt_operators) == 2 and task.global_step < 100


def test_adapt_growth_keeps_the_best_angles_usable():
    task = _straight_adapt(3)
    best_energy = task._best[0]                                    # the lowest logged energy
    assert task.grow_adapt()                                       # one more operator, angle 0
    assert task._best[1].shape == task.circuit.weights.shape
    with torch.no_grad():
        task.circuit.weights.add_(0.3)                             # somewhere worse
    assert task.restore_best()
    assert task.final_energy() == pytest.approx(best_energy, abs=1e-12)
