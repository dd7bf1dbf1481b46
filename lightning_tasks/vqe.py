"""``VQETask``: the variational quantum eigensolver as a LightningModule.

Every constructor argument is a plain value (strings, numbers, lists), saved with
``save_hyperparameters`` so checkpoints rebuild the task and ``LightningCLI`` can construct it::

    task = VQETask(molecule="H2", ansatz="uccsd", optimizer="adam", lr=0.1)
    pl.Trainer(max_steps=100, callbacks=[ChemicalAccuracyStopping()]).fit(task)
    task = fit_vqe("H2", max_steps=100)            # the same, with a quiet CPU Trainer
    task.best_energy, task.steps_to_accuracy

There is no data: the module serves a one-element dataset itself, so one epoch is one optimizer
step. Each training step evaluates ⟨H⟩ (``diff_method``: "auto" by default) and logs
``energy`` (Ha), ``error_mha`` (|E − E_FCI| in mHa) and ``chemical_accuracy`` (1.0 when the
error is below 1.6 mHa). The logged values at global step k are those of the angles after k
updates (before update k+1), as ``tql.chem.vqe``'s history.

Molecules: a bundled name (``tql.chem.available()``: H2, LiH, ...; ``bond_length=`` picks a point
of a bundled scan), or ``geometry=[["H", [0, 0, 0]], ["H", [0, 0, 0.74]]]`` (or an XYZ string)
with ``basis`` (PySCF needed). :func:`pes_scan` runs a bundled bond-length scan with warm starts.

Lattice models: ``VQETask(model={"name": "tfim", "lattice": "chain", "size": 6, "J": 1.0, "h": 1.0})``
(transverse-field Ising, Heisenberg, XY, Fermi–Hubbard of ``tql.lattice``; keys, ansätze and the
exact reference energy in :mod:`lightning_tasks.lattice_models`). They log ``energy``, ``error``
(|E − E_exact|) and ``relative_error`` instead of ``error_mha`` / ``chemical_accuracy``;
:class:`~lightning_tasks.lattice_models.ExactEnergyStopping` stops them.
"""
from __future__ import annotations

import inspect
import logging
import math
import time
import warnings
from typing import Optional, Sequence, Union

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping

import torchquantum_layers.chem as chem
from torchquantum_layers.chem.vqe import CHEMICAL_ACCURACY, check_givens_hamiltonian, energy as _energy
from torchquantum_layers.optim import GRADIENT_FREE, make_optimizer, needs_closure_without_backward, optimizer_class
from torchquantum_layers.grad import AUTO, DIFF_METHODS, circuit_expval, resolve_diff_method

from .lattice_models import (LATTICE_ACCURACY, ExactEnergyStopping, build_model, check_lattice_options,
                             lattice_circuit, parse_model)
from .adapt_growth import AdaptGrowth, _finite_tol, grow_optimizer_state, pad_weights
from .noise_spec import check_noise_optimizer, check_noise_options
from .progress import LIGHTNING_NOISE
from .single_point import SinglePointTask, plain_hparam

__all__ = ["VQETask", "ChemicalAccuracyStopping", "ExactEnergyStopping", "fit_vqe", "pes_scan", "ANSATZE", "OPTIMIZERS",
           "CHEMICAL_ACCURACY_MHA"]

ANSATZE = ("uccsd", "hardware_efficient", "adapt", "hva")
OPTIMIZERS = ("adam", "sgd", "lbfgs", "qng", "spsa", "rotosolve", "qnspsa")
CHEMICAL_ACCURACY_MHA = 1e3 * CHEMICAL_ACCURACY          # 1.6 mHa
_DTYPES = {"complex128": torch.complex128, "complex64": torch.complex64,
           "float64": torch.complex128, "float32": torch.complex64}


def _plain_geometry(geometry):
    """Geometry as plain lists (``[[symbol, [x, y, z]], ...]``) or an XYZ string."""
    if geometry is None or isinstance(geometry, str):
        return geometry
    try:
        return [[str(s), [float(v) for v in xyz]] for s, xyz in geometry]
    except (TypeError, ValueError):
        raise ValueError(f"VQETask: geometry must be [[symbol, [x, y, z]], ...] (Å) or an XYZ string, got "
                         f"{geometry!r}") from None


class VQETask(SinglePointTask):
    """Minimise ⟨H⟩ of a molecular Hamiltonian over the angles of a chemistry ansatz.

    Args:
        molecule: a bundled name (``tql.chem.available()``), or a label when ``geometry`` is given;
            ``None`` (default) is ``"H2"`` unless ``model`` is given.
        model: a lattice model as a plain dict (``{"name": "tfim" | "heisenberg" | "xy" | "hubbard",
            "lattice": ..., "size": ..., "periodic": ..., couplings}``; see
            :mod:`lightning_tasks.lattice_models`) instead of a molecule; not with ``molecule``.
        bond_length: picks a point of the bundled scan of ``molecule`` (``tql.chem.available_scans()``).
        geometry, basis, charge, multiplicity, active_electrons, active_orbitals: build the
            Hamiltonian with PySCF (``tql.chem.Molecule`` + ``molecular_hamiltonian``) instead.
        ansatz: default ``"uccsd"`` for molecules, ``"hva"`` for spin models and
            ``"hardware_efficient"`` for Hubbard (``"uccsd"`` with ``n_electrons``, Jordan–Wigner) (``"hva"``: the Hamiltonian variational ansatz of
            a spin model, ``n_layers`` layers). ``"uccsd"`` (HF + Givens excitations, angles 0; needs a Jordan–Wigner Hamiltonian)
            or ``"hardware_efficient"`` (``n_layers`` RY/CNOT layers starting at HF, small random
            angles from ``seed``) or ``"adapt"`` (ADAPT-VQE: from HF with no angle, the operator of
            ``pool`` with the largest energy gradient is appended whenever the current ones are
            optimised — the last step changed the energy by less than ``adapt_tol`` Ha — or have had
            ``adapt_steps`` steps; the run stops once the pool gradient's norm is below
            ``adapt_grad_tol`` or ``adapt_max_operators`` are in; see :mod:`lightning_tasks.adapt_growth`;
            exact energies only: no ``shots`` or ``noise``). An option the chosen ansatz does not use (``n_layers`` with
            ``"uccsd"``; ``seed`` with ``"uccsd"`` and no ``shots``) must keep its default: a
            ValueError says so instead of ignoring it.
        optimizer, lr: ``"adam"`` (default lr 0.1), ``"sgd"``, ``"lbfgs"`` (Lightning's closure
            drives its line search), ``"qng"`` (quantum natural gradient with the ansatz's metric,
            that of a pure state: refused with ``noise``),
            ``"spsa"`` (two energies per step, no gradient; the task then steps it itself, as
            Lightning's manual optimisation), ``"rotosolve"`` (one sweep of exact coordinate
            minimisations per step, no lr; gradient-free too), ``"qnspsa"`` (SPSA preconditioned
            by a 2-SPSA estimate of the metric from four fidelities; gradient-free), or another
            ``torch.optim`` class name.
        diff_method: ``"auto"`` (default: backprop while its stored states fit in
            ``tql.grad.AUTO_BACKPROP_BYTES``, the faster method there; adjoint beyond; with
            ``shots``, parameter-shift), ``"adjoint"``, ``"backprop"`` or ``"parameter-shift"``.
        shots: ``None`` (default: exact ⟨H⟩), or the number of samples per group of qubit-wise
            commuting terms from which each energy (and each parameter-shift term of its
            gradient) is estimated, as on hardware. The samples of step k come from a
            ``torch.Generator`` seeded with (``seed``, k), so a resumed run draws what an
            uninterrupted one would. Needs ``diff_method="auto"`` or ``"parameter-shift"``
            (``"backprop"`` too with ``optimizer="spsa"``, which takes no gradient). The logged
            ``energy`` / ``error_mha`` and ``history`` are then estimates; ``final_energy()``,
            ``error_mha``, ``best_energy`` and ``validate``/``test``/``predict`` stay exact.
        dtype: ``"complex128"`` (default) or ``"complex64"``.
        taper: remove the qubits of the Hamiltonian's Z2 symmetries (``tql.chem.z2_taper``, in the
            Hartree–Fock sector: LiH 12 → 8 qubits, same FCI energy); needs
            ``ansatz="hardware_efficient"`` (excitations are no moves in the tapered frame).
        init_weights: starting angles (a list of floats), e.g. from a neighbouring geometry.
        noise: ``None`` (default: a pure state), or a noise model as plain data (a dict; a
            ``NoiseModel`` object is refused, as it could not be saved in a checkpoint or config)
            (:mod:`lightning_tasks.noise_spec`: channels after gates, readout errors): the energy
            is then ``Tr(ρ H)`` on density matrices, read through the readout errors, as a device
            would report it; gradients by backprop (``"auto"``) or parameter-shift, not adjoint.
        mitigation: with ``noise``, ``"zne"`` (zero-noise extrapolation, ``tql.mixed.zne_expval``:
            global folding at ``zne_scale_factors``, default 1, 3, 5, extrapolated by
            ``zne_extrapolation``, default Richardson), ``"readout"`` (the readout-mitigated
            observable) or ``"zne+readout"``; the optimised and logged energy is the mitigated one.
            As with shots, the logged ``energy`` / ``history`` are what the device reports;
            ``final_energy()``, ``error_mha``, ``best_energy`` and ``validate``/``test``/``predict``
            are the noiseless energies of the angles (the latter also log ``reported_energy``).
    """

    def __init__(self, molecule: Optional[str] = None, bond_length: Optional[float] = None,
                 geometry: Optional[Union[str, list]] = None, basis: str = "sto-3g", charge: int = 0,
                 multiplicity: int = 1, active_electrons: Optional[int] = None,
                 active_orbitals: Optional[Union[int, list]] = None, ansatz: Optional[str] = None, n_layers: int = 2,
                 optimizer: str = "adam", lr: Optional[float] = None, diff_method: str = "auto",
                 dtype: str = "complex128", seed: int = 0, init_weights: Optional[list] = None,
                 shots: Optional[int] = None, noise: Optional[dict] = None, mitigation: Optional[str] = None,
                 zne_scale_factors: Optional[list] = None, zne_extrapolation: str = "richardson",
                 pool: str = "singles_doubles", adapt_grad_tol: float = 1e-3, adapt_steps: int = 30,
                 adapt_tol: float = 1e-7, adapt_max_operators: Optional[int] = None, taper: bool = False,
                 model: Optional[dict] = None):
        super().__init__()
        # validate everything cheap before building anything
        spec = None
        if model is not None:
            if molecule is not None:
                raise ValueError(f"VQETask: give molecule or model (a lattice model), not both; got "
                                 f"molecule={molecule!r} and model={model!r}")
            model = plain_hparam(model, "VQETask: model")
            spec = parse_model(model)
            if ansatz is None:
                ansatz = ("hva" if spec["name"] != "hubbard" else "uccsd" if spec.get("n_electrons") is not None
                          and spec["mapping"] in ("jordan_wigner", "jw") else "hardware_efficient")
        else:
            molecule = "H2" if molecule is None else molecule
            if ansatz is None:
                ansatz = "uccsd"
        if not isinstance(ansatz, str) or ansatz.lower().replace("-", "_") not in ANSATZE:
            raise ValueError(f"VQETask: unknown ansatz {ansatz!r}; choose one of {', '.join(ANSATZE)}")
        ansatz = ansatz.lower().replace("-", "_")
        if spec is not None:
            check_lattice_options(spec, ansatz, bond_length=bond_length, geometry=geometry, basis=basis,
                                  charge=charge, multiplicity=multiplicity, active_electrons=active_electrons,
                                  active_orbitals=active_orbitals, taper=taper)
        elif ansatz == "hva":
            raise ValueError("VQETask: ansatz='hva' (the Hamiltonian variational ansatz) is for lattice spin models "
                             "(model={'name': 'tfim', ...}); molecules use 'uccsd', 'hardware_efficient' or 'adapt'")
        if diff_method not in DIFF_METHODS + (AUTO,):
            raise ValueError(f"VQETask: unknown diff_method {diff_method!r}; choose one of "
                             f"{', '.join(DIFF_METHODS + (AUTO,))}")
        if not isinstance(optimizer, str) or (optimizer.lower() not in OPTIMIZERS and optimizer_class(optimizer) is None):
            raise ValueError(f"VQETask: unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)} "
                             f"or a torch.optim class name")
        if dtype not in _DTYPES:
            raise ValueError(f"VQETask: dtype must be one of {', '.join(_DTYPES)}, got {dtype!r}")
        if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 1:
            raise ValueError(f"VQETask: n_layers must be a positive int, got {n_layers!r}")
        if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr)
                               or lr <= 0):
            raise ValueError(f"VQETask: lr must be a positive number, got {lr!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"VQETask: seed must be an int, got {seed!r}")
        if shots is not None and (isinstance(shots, bool) or not isinstance(shots, int) or shots < 1):
            raise ValueError(f"VQETask: shots must be a positive int or None (exact energies), got {shots!r}")
        if shots is not None and (diff_method == "adjoint" or (diff_method == "backprop"
                                                               and not needs_closure_without_backward(optimizer))):
            raise ValueError(f"VQETask: with shots={shots} the energy is an estimate from samples, which has no "
                             f"{diff_method!r} gradient; use diff_method='auto' (parameter-shift with shots) or "
                             f"'parameter-shift', or a gradient-free optimizer ({', '.join(GRADIENT_FREE)})")
        self._check_unused_options(ansatz, n_layers=n_layers, seed=seed, shots=shots, pool=pool,
                                   adapt_grad_tol=adapt_grad_tol, adapt_steps=adapt_steps, adapt_tol=adapt_tol,
                                   adapt_max_operators=adapt_max_operators)
        if ansatz == "adapt":
            self._check_adapt(pool, adapt_grad_tol, adapt_steps, adapt_tol, adapt_max_operators, shots, noise,
                              init_weights)
        if not isinstance(taper, bool):
            raise ValueError(f"VQETask: taper must be True or False, got {taper!r}")
        if taper and ansatz != "hardware_efficient":
            raise ValueError(f"VQETask: taper=True needs ansatz='hardware_efficient': the Givens excitations of "
                             f"ansatz={ansatz!r} move electrons between the spin orbitals of the full register, "
                             f"which the tapered qubits no longer are")
        self.noise_model = self._check_noise(noise, mitigation, zne_scale_factors, zne_extrapolation, diff_method)
        if noise is not None:
            check_noise_optimizer(optimizer, "VQETask")
        # plain Python values: numpy scalars or tuples would not load with torch.load(weights_only=True)
        # or not round-trip through a YAML config
        geometry = _plain_geometry(geometry)
        bond_length = None if bond_length is None else float(bond_length)
        lr = None if lr is None else float(lr)
        noise = plain_hparam(noise, "VQETask: noise")
        zne_scale_factors = plain_hparam(zne_scale_factors, "VQETask: zne_scale_factors")
        active_orbitals = plain_hparam(active_orbitals, "VQETask: active_orbitals")
        self.save_hyperparameters(ignore=["init_weights"])     # plain values only (weights_only=True loads)

        self.lattice = None                # the tql.lattice.Lattice of a lattice model (None: a molecule)
        if spec is not None:
            self.H, self.info = build_model(spec)
            self.lattice = self.info.lattice
            # the lattice counterparts: exact diagonalisation (None beyond EXACT_MAX_QUBITS); no FCI / HF
            self.exact_energy = self.info.exact_energy
            self.fci_energy = self.hf_energy = None
            self.reference = tuple(self.info.reference)
        else:
            self.H, self.info = self._hamiltonian(molecule, bond_length, geometry, basis, charge, multiplicity,
                                                  active_electrons, active_orbitals)
            if self.info.fci_energy is None:
                raise ValueError(f"VQETask: {self.info.name} has no FCI reference energy (error_mha needs one)")
            self.fci_energy = self.exact_energy = float(self.info.fci_energy)
            self.hf_energy = float(self.info.hf_energy)
            self.reference = tuple(self.info.hf_state)   # the HF bits of the register the circuit acts on
        n, ne, cdtype = self.info.n_qubits, self.info.n_electrons, _DTYPES[dtype]
        self.tapering = None
        if taper:
            self.H, self.tapering = chem.z2_taper(self.H, reference=self.reference)
            self.reference = self.tapering.reference_bits(self.reference)
            n = self.tapering.n_tapered_qubits
        self._adapt = None
        if ansatz in ("uccsd", "adapt"):
            if self.info.mapping != "jordan_wigner":
                raise ValueError(f"VQETask: ansatz={ansatz!r} needs a Jordan–Wigner Hamiltonian, but {self.info.name} is "
                                 f"mapped with {self.info.mapping!r}: there its Givens excitations do not move "
                                 f"electrons between spin orbitals (nor conserve their number); use "
                                 f"ansatz='hardware_efficient' or a Jordan–Wigner Hamiltonian")
        if ansatz == "uccsd":
            self.circuit = chem.uccsd(n, ne, reference=self.reference, dtype=cdtype)
            check_givens_hamiltonian(self.circuit, self.H, "VQETask")
        elif ansatz == "adapt":
            self.circuit = chem.hartree_fock(n, state=self.reference, dtype=cdtype)
            self._adapt = AdaptGrowth(self.circuit, self.H, ne, self.reference, pool, adapt_grad_tol, adapt_steps,
                                      adapt_tol, adapt_max_operators)
        elif spec is not None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self.circuit = lattice_circuit(self.H, self.info, ansatz, n_layers, cdtype)
        else:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                self.circuit = chem.hardware_efficient(n, n_layers, reference=self.reference,
                                                       dtype=cdtype)
        if init_weights is not None:
            self.set_weights(init_weights)
        self.history: list = []            # history[k]: energy after k optimizer steps
        # SPSA's closure may only evaluate the energy, which Lightning's automatic closure does not
        self.automatic_optimization = not needs_closure_without_backward(optimizer)
        self._seen_step = -1
        self._best = None                  # (energy, angles) of the lowest energy logged (checkpointed)
        self._generator = None             # (step, torch.Generator) of the shot samples

    # -- construction -----------------------------------------------------------------------------
    @staticmethod
    def _check_unused_options(ansatz, **given) -> None:
        """An option the chosen ansatz does not use must keep its default (it was ignored silently)."""
        defaults = {k: p.default for k, p in inspect.signature(VQETask.__init__).parameters.items()}
        adapt_options = ("pool", "adapt_grad_tol", "adapt_steps", "adapt_tol", "adapt_max_operators")
        uses = {"n_layers": ansatz in ("hardware_efficient", "hva"),
                "seed": ansatz in ("hardware_efficient", "hva") or given["shots"] is not None,
                **{k: ansatz == "adapt" for k in adapt_options}}
        why = {"n_layers": "only ansatz='hardware_efficient' and 'hva' have layers",
               "seed": "it seeds ansatz='hardware_efficient''s (or 'hva''s) initial angles and the samples of shots=N",
               **{k: "it steers ansatz='adapt''s growth" for k in adapt_options}}
        bad = [k for k in ("n_layers", "seed") + adapt_options if not uses[k] and given[k] != defaults[k]]
        if bad:
            opts = ", ".join(f"{k}={given[k]!r}" for k in bad)
            raise ValueError(f"VQETask: {opts} {'is' if len(bad) == 1 else 'are'} not used by ansatz={ansatz!r}"
                             f"{'' if given['shots'] is not None else ' without shots'} ("
                             f"{'; '.join(why[k] for k in bad)}); leave "
                             f"{', '.join(f'{k}={defaults[k]!r}' for k in bad)} (the default)")

    @staticmethod
    def _check_adapt(pool, grad_tol, steps, tol, max_operators, shots, noise, init_weights) -> None:
        if not isinstance(pool, str) or pool not in chem.POOLS:
            raise ValueError(f"VQETask: pool must be one of {', '.join(chem.POOLS)}, got {pool!r}")
        _finite_tol(grad_tol, "adapt_grad_tol")
        _finite_tol(tol, "adapt_tol")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"VQETask: adapt_steps must be a positive int, got {steps!r}")
        if max_operators is not None and (isinstance(max_operators, bool) or not isinstance(max_operators, int)
                                          or max_operators < 1):
            raise ValueError(f"VQETask: adapt_max_operators must be a positive int or None, got {max_operators!r}")
        if shots is not None or noise is not None:
            raise ValueError("VQETask: ansatz='adapt' screens its pool with exact energy gradients of the pure state; "
                             "it does not take shots= or noise= (use ansatz='uccsd' or 'hardware_efficient' there)")
        if init_weights is not None:
            raise ValueError("VQETask: ansatz='adapt' starts with no angle (its operators are chosen as it trains); "
                             "init_weights does not apply: resume from a checkpoint instead")

    @staticmethod
    def _hamiltonian(molecule, bond_length, geometry, basis, charge, multiplicity, active_electrons,
                     active_orbitals):
        if geometry is not None:
            if bond_length is not None:
                raise ValueError("VQETask: give geometry or bond_length (a bundled scan point), not both")
            geom = geometry if isinstance(geometry, str) else [(s, tuple(xyz)) for s, xyz in geometry]
            mol = chem.Molecule(geom, basis=basis, charge=charge, multiplicity=multiplicity,
                                active_electrons=active_electrons, active_orbitals=active_orbitals,
                                # the default molecule="H2" is no label for another geometry
                                name=molecule if isinstance(molecule, str) and molecule and molecule != "H2" else None)
            return chem.molecular_hamiltonian(mol)
        if not isinstance(molecule, str):
            raise ValueError(f"VQETask: molecule must be a bundled name ({', '.join(chem.available())}) or use "
                             f"geometry=..., got {molecule!r}")
        H, info = chem.load(molecule, bond_length=bond_length)   # ValueError listing the bundled names
        # a bundled Hamiltonian is fixed (basis, charge, spin, active space): options that would
        # change the molecule must not be dropped silently; values that agree with it are fine
        same = {"basis": lambda v: str(v).lower().replace("-", "") == info.basis.lower().replace("-", ""),
                "charge": lambda v: v == info.charge, "multiplicity": lambda v: v == info.multiplicity,
                "active_electrons": lambda v: v is None or v == info.n_electrons,
                "active_orbitals": lambda v: v is None or v == info.n_orbitals
                or (isinstance(v, (list, tuple)) and tuple(v) == tuple(info.active_orbitals))}
        given = dict(basis=basis, charge=charge, multiplicity=multiplicity, active_electrons=active_electrons,
                     active_orbitals=active_orbitals)
        bad = {k: v for k, v in given.items() if not same[k](v)}
        if bad:
            opts = ", ".join(f"{k}={v!r}" for k, v in bad.items())
            verb = "does" if len(bad) == 1 else "do"
            raise ValueError(f"VQETask: {opts} {verb} not match the bundled Hamiltonian {molecule!r} ({info.basis}, "
                             f"charge {info.charge}, multiplicity {info.multiplicity}, {info.n_electrons} electrons in "
                             f"{info.n_orbitals} active orbitals); bundled: {', '.join(chem.available())}. Give "
                             f"geometry=... to build the molecule with these options (PySCF needed)")
        return H, info

    def set_weights(self, weights) -> None:
        """Copy angles in (a list, tensor or another task's ``circuit.weights``)."""
        w = torch.as_tensor(weights, dtype=self.circuit.weights.dtype).reshape(-1)
        if w.shape != self.circuit.weights.shape:
            raise ValueError(f"VQETask: {w.numel()} initial weights for {self.circuit.num_parameters} parameters")
        with torch.no_grad():
            self.circuit.weights.copy_(w)

    # -- Lightning hooks --------------------------------------------------------------------------
    def forward(self) -> torch.Tensor:
        """⟨H⟩ at the current angles (a 0-d tensor); with ``shots``, its estimate from samples;
        with ``noise``, the energy the noisy device reports (after ``mitigation``)."""
        shots = self.hparams.get("shots")
        sampling = {} if shots is None else {"shots": shots, "generator": self.shot_generator()}
        if self.noise_model is not None:
            return self.reported_energy(**sampling)
        return _energy(self.circuit, self.H, diff_method=self.hparams.diff_method, **sampling)

    def reported_energy(self, shots: Optional[int] = None, generator=None) -> torch.Tensor:
        """The energy of the current angles as the noisy device reports it, after ``mitigation``."""
        from torchquantum_layers import mixed
        mitigation = self.hparams.get("mitigation") or ""
        H = self.H
        if "readout" in mitigation:
            H = self.noise_model.readout.mitigated_observable(H)
        dm = resolve_diff_method(self.hparams.diff_method, self.circuit, shots=shots, density=True)
        kwargs = dict(noise_model=self.noise_model, diff_method=dm, shots=shots, generator=generator)
        if "zne" in mitigation:
            scales = self.hparams.get("zne_scale_factors")
            value = mixed.zne_expval(self.circuit, H, extrapolation=self.hparams.get("zne_extrapolation", "richardson"),
                                     **({} if scales is None else {"scale_factors": scales}), **kwargs)
        else:
            value = mixed.expval(self.circuit, H, **kwargs)
        return value.reshape(())

    @staticmethod
    def _check_noise(noise, mitigation, scale_factors, extrapolation, diff_method):
        model = check_noise_options(noise, mitigation, scale_factors, extrapolation, "VQETask")
        if model is not None and diff_method == "adjoint":
            raise ValueError("VQETask: with noise the state is a density matrix, which the adjoint method cannot "
                             "un-compute; use diff_method='auto' (backprop) or 'parameter-shift'")
        return model

    def shot_generator(self, step: Optional[int] = None) -> torch.Generator:
        """The generator of the shot samples of optimizer step ``step`` (default: the current one),
        seeded from (``seed``, step) alone: fresh at the first energy of a step, then continued by
        its later evaluations (parameter-shift terms, line searches, SPSA's two energies)."""
        step = int(self.global_step) if step is None else int(step)
        device = self.circuit.weights.device
        if self._generator is None or self._generator[0] != step or self._generator[1].device != device:
            entropy = np.random.SeedSequence([self.hparams.seed % 2 ** 63, step]).generate_state(2, np.uint32)
            gen = torch.Generator(device=device)
            gen.manual_seed(int(entropy[0]) << 31 | int(entropy[1]) >> 1)
            self._generator = (step, gen)
        return self._generator[1]

    def on_train_batch_start(self, batch, batch_idx):
        # before the optimizer step (L-BFGS evaluates its closure several times inside it)
        if self._adapt is not None and self._adapt.due(self.global_step, self.history):
            self.grow_adapt()

    def grow_adapt(self) -> bool:
        """ADAPT: screen the pool and append its best operator (True), or mark convergence and stop
        the run (False); the best-so-far angles and the optimizers' state follow the new angle."""
        index = self._adapt.screen()
        if index is None:
            if self._trainer is not None:
                self.trainer.should_stop = True        # converged: this step still runs, at the optimum
            return False
        self._adapt.append(index, self.global_step)
        if self._best is not None:
            self._best = (self._best[0], pad_weights(self._best[1], self.circuit.num_parameters))
        for o in (self.trainer.optimizers if self._trainer is not None else []):
            grow_optimizer_state(o, self.circuit.weights)
        return True

    def training_step(self, batch, batch_idx):
        if self.circuit.num_parameters == 0:            # ADAPT converged at Hartree–Fock: nothing to train
            return None
        if not self.automatic_optimization:
            with torch.no_grad():
                e = self()
        else:
            e = self()
        if self._seen_step != self.global_step:        # L-BFGS evaluates several times per step
            self._seen_step = self.global_step
            value = float(e.detach())
            self.history.append(value)
            if self._best is None or value < self._best[0]:
                self._best = (value, self.circuit.weights.detach().clone())
            # float64 tensors: Lightning stores Python floats as float32 (7 digits of an energy in Ha)
            self.log("energy", torch.tensor(value, dtype=torch.float64), on_step=True, on_epoch=False,
                     prog_bar=True, batch_size=1)
            for name, v in self._errors(value).items():
                self.log(name, torch.tensor(v, dtype=torch.float64), on_step=True, on_epoch=False,
                         prog_bar=name != "chemical_accuracy", batch_size=1)
            if self._adapt is not None:
                self.log("adapt_operators", float(len(self._adapt.chosen)), on_step=True, on_epoch=False,
                         batch_size=1)
                self.log("adapt_gradient_norm", torch.tensor(self._adapt.gradient_norms[-1], dtype=torch.float64),
                         on_step=True, on_epoch=False, batch_size=1)
        if not self.automatic_optimization:
            self.optimizers().step(closure=self)
            return None
        return e

    def configure_optimizers(self):
        return make_optimizer(self.hparams.optimizer, self.parameters(), self.hparams.lr, circuit=self.circuit)

    def on_save_checkpoint(self, checkpoint) -> None:
        # plain floats and a CPU tensor: the checkpoint loads with torch.load(weights_only=True)
        checkpoint["vqe_history"] = [float(v) for v in self.history]
        if self._adapt is not None:
            checkpoint["vqe_adapt"] = self._adapt.state()
        if self._best is not None:
            checkpoint["vqe_best_energy"] = float(self._best[0])
            checkpoint["vqe_best_weights"] = self._best[1].detach().cpu().clone()

    def on_load_checkpoint(self, checkpoint) -> None:
        self.history = [float(v) for v in checkpoint.get("vqe_history", [])]
        if self._adapt is not None:
            # grow the circuit to the saved operators before the weights of that shape load
            self._adapt.load(checkpoint.get("vqe_adapt", {}))
        weights = checkpoint.get("vqe_best_weights")
        if weights is None:
            # a checkpoint written before the best angles were saved: without them, forget the
            # best of this process rather than report one of another run
            self._best = None
            return
        if not isinstance(weights, torch.Tensor) or weights.shape != self.circuit.weights.shape:
            raise ValueError(f"VQETask: the checkpoint's vqe_best_weights must be a tensor of shape "
                             f"{tuple(self.circuit.weights.shape)} (this task's angles), got "
                             f"{tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__}")
        self._best = (float(checkpoint["vqe_best_energy"]), weights.to(self.circuit.weights.dtype))

    def on_train_start(self) -> None:
        # a resumed run starts at the saved step: drop history entries the checkpoint did not reach
        del self.history[self.global_step:]
        self._seen_step = -1

    # -- results ----------------------------------------------------------------------------------
    def _errors(self, value: float) -> dict:
        """The logged errors of an energy: ``error_mha`` and ``chemical_accuracy`` (molecule), or
        ``error`` and ``relative_error`` (lattice model; none without an exact energy)."""
        if self.lattice is None:
            err = abs(value - self.fci_energy) * 1e3
            return {"error_mha": err, "chemical_accuracy": float(err < CHEMICAL_ACCURACY_MHA)}
        errors = self._exact_errors(value)
        return {} if errors is None else dict(zip(("error", "relative_error"), errors))

    def _exact_errors(self, value: float) -> Optional[tuple]:
        """``(|E − exact_energy|, that / |exact_energy|)``, None without an exact energy."""
        if self.exact_energy is None:
            return None
        err = abs(value - self.exact_energy)
        return err, err / max(abs(self.exact_energy), 1e-12)

    def _reached(self, value: float) -> bool:
        if self.lattice is None:
            return abs(value - self.fci_energy) < CHEMICAL_ACCURACY
        return self.exact_energy is not None and self._errors(value)["relative_error"] < LATTICE_ACCURACY

    def evaluation(self) -> dict:
        """``energy`` (Ha), ``error_mha`` and ``chemical_accuracy`` of the current angles (what
        ``tql validate|test|predict`` report, as ``val_energy``, ...)."""
        value = self.final_energy()
        out = {"energy": value, **self._errors(value)}
        if self.noise_model is not None:
            with torch.no_grad():
                out["reported_energy"] = float(self.reported_energy())
        if self._adapt is not None:
            out["adapt_operators"] = float(len(self._adapt.chosen))
        return out

    @property
    def adapt_operators(self) -> list:
        """ADAPT: the labels of the operators appended so far, in order (``[]`` for other ansätze)."""
        return [] if self._adapt is None else self._adapt.labels

    @property
    def adapt_converged(self) -> bool:
        """ADAPT: the pool gradient's norm fell below ``adapt_grad_tol`` (or the operator cap was reached)."""
        return self._adapt is not None and self._adapt.converged

    @torch.no_grad()
    def final_energy(self) -> float:
        """⟨H⟩ at the current angles, in Ha."""
        return float(_energy(self.circuit, self.H, diff_method="backprop"))

    def _reports_estimates(self) -> bool:
        """Whether logged energies differ from the noiseless ⟨H⟩ of the angles (shots or noise)."""
        return self.hparams.get("shots") is not None or self.noise_model is not None

    def _best_exact(self) -> Optional[float]:
        """The exact energy of the best-logged angles (with shots or noise the logged value is an
        estimate or a noisy report)."""
        if self._best is None:
            return None
        if not self._reports_estimates():
            return self._best[0]
        with torch.no_grad():
            weights = self._best[1].to(self.circuit.weights.device)   # a checkpoint's are on the CPU
            return float(circuit_expval(self.circuit, self.H, weights=weights).reshape(()))

    def restore_best(self) -> bool:
        """Put back the angles of the lowest logged energy if they beat the current ones (the last
        optimizer step, taken after the stopping check, can overshoot; with ``shots`` the two are
        compared by their exact energies). True if it changed them."""
        best = self._best_exact()
        if best is None or best >= self.final_energy():
            return False
        with torch.no_grad():
            self.circuit.weights.copy_(self._best[1])
        return True

    @property
    def best_energy(self) -> float:
        """The lowest energy seen (the history and the current angles). With ``shots``: the exact
        energy of the best-logged angles or of the current ones (the minimum of noisy estimates
        would be biased low)."""
        if self._reports_estimates():
            best = self._best_exact()
            return self.final_energy() if best is None else min(best, self.final_energy())
        return min(self.history + [self.final_energy()])

    @property
    def error_mha(self) -> float:
        """|E − E_FCI| in mHa (molecules; a lattice model has :attr:`error` instead)."""
        if self.lattice is not None:
            raise AttributeError("VQETask: error_mha is a molecule's error in mHa; a lattice model has "
                                 "error (|E - exact_energy|) and relative_error")
        return abs(self.final_energy() - self.fci_energy) * 1e3

    @property
    def error(self) -> Optional[float]:
        """|E − exact_energy| of the current angles (Ha for molecules; None without an exact energy)."""
        errors = self._exact_errors(self.final_energy())
        return None if errors is None else errors[0]

    @property
    def relative_error(self) -> Optional[float]:
        """|E − exact_energy| / |exact_energy| of the current angles (None without an exact energy)."""
        errors = self._exact_errors(self.final_energy())
        return None if errors is None else errors[1]

    @property
    def steps_to_accuracy(self) -> Optional[int]:
        """Optimizer steps until the energy was within 1.6 mHa of FCI (a lattice model: a relative
        error below ``LATTICE_ACCURACY``, 1e-3, of ``exact_energy``) (None if never; with
        ``shots``, the logged estimates)."""
        for k, e in enumerate(self.history):
            if self._reached(e):
                return k
        if self._reached(self.final_energy()):
            return len(self.history)
        return None


class ChemicalAccuracyStopping(EarlyStopping):
    """Stop once ``error_mha`` < ``threshold_mha`` (chemical accuracy, 1.6 mHa), or when it has not
    improved by ``min_delta`` mHa for ``patience`` steps (converged, e.g. an ansatz that cannot
    reach FCI).

    The check runs at the end of every optimizer step (a VQE epoch is one step), before the
    checkpoint callbacks of that step: a checkpoint taken every N steps holds the stopping state
    of its last step, and a resumed run stops where an uninterrupted one does (checked at epoch
    end, a step-end checkpoint missed the last check, which a resumed run never made)."""

    def __init__(self, patience: int = 20, min_delta: float = 1e-3, threshold_mha: float = CHEMICAL_ACCURACY_MHA,
                 verbose: bool = False):
        super().__init__(monitor="error_mha", mode="min", patience=patience, min_delta=min_delta,
                         stopping_threshold=threshold_mha, check_on_train_epoch_end=True, verbose=verbose)

    def setup(self, trainer, pl_module, stage) -> None:
        if getattr(pl_module, "lattice", None) is not None:
            raise ValueError("ChemicalAccuracyStopping monitors a molecule's error_mha; a lattice VQETask "
                             "(model=...) logs relative_error: use ExactEnergyStopping")
        super().setup(trainer, pl_module, stage)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        pass                               # checked at the end of the step instead

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.state.fn != "fit" or trainer.sanity_checking:
            return
        self._run_early_stopping_check(trainer)


def make_trainer(max_steps: int = 100, callbacks: Optional[list] = None, logger=False,
                 enable_progress_bar: bool = False, enable_checkpointing: bool = False, **kwargs) -> pl.Trainer:
    """A quiet CPU Trainer for VQE: one step per epoch, no model summary."""
    opts = dict(accelerator="cpu", devices=1, max_steps=max_steps, max_epochs=-1, logger=logger,
                enable_progress_bar=enable_progress_bar, enable_model_summary=False,
                enable_checkpointing=enable_checkpointing, log_every_n_steps=1, num_sanity_val_steps=0,
                callbacks=callbacks or [])
    opts.update(kwargs)
    return pl.Trainer(**opts)


def fit_vqe(molecule: Optional[str] = None, max_steps: int = 100, stop_at_accuracy: bool = True,
            patience: int = 20, min_delta: Optional[float] = None, restore_best: bool = True, callbacks: Optional[list] = None, logger=False,
            enable_progress_bar: bool = False, trainer_kwargs: Optional[dict] = None, **task_kwargs) -> VQETask:
    """Build a :class:`VQETask` (``task_kwargs``: ansatz, optimizer, lr, diff_method, bond_length,
    geometry, ...) and train it for at most ``max_steps`` steps on the CPU.

    With ``stop_at_accuracy`` a :class:`ChemicalAccuracyStopping` ends training at chemical
    accuracy or convergence (``min_delta`` default 1e-3 mHa; a lattice ``model=...``:
    :class:`ExactEnergyStopping`, relative error, ``min_delta`` default 1e-6, none beyond the
    exact-diagonalisation limit); ``restore_best`` then puts back the angles of the lowest energy seen
    (the optimizer step after the last check may overshoot). Returns the task; ``task.best_energy``, ``task.steps_to_accuracy``,
    ``task.error_mha``, ``task.wall_time`` (seconds in ``fit``) and ``task.trainer`` report.
    """
    task = VQETask(molecule=molecule, **task_kwargs)
    cbs = list(callbacks or [])
    if stop_at_accuracy and task.lattice is None:
        cbs.append(ChemicalAccuracyStopping(patience=patience, min_delta=1e-3 if min_delta is None else min_delta))
    elif stop_at_accuracy and task.exact_energy is not None:
        cbs.append(ExactEnergyStopping(patience=patience, min_delta=1e-6 if min_delta is None else min_delta))
    quiet = not enable_progress_bar
    loggers = [logging.getLogger(n) for n in ("pytorch_lightning.utilities.rank_zero",
                                                "lightning.pytorch.utilities.rank_zero")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        for pattern in LIGHTNING_NOISE:
            warnings.filterwarnings("ignore", pattern)
        if quiet:
            for lg in loggers:
                lg.setLevel(logging.WARNING)
        try:
            trainer = make_trainer(max_steps, cbs, logger=logger, enable_progress_bar=enable_progress_bar,
                                   **(trainer_kwargs or {}))
            start = time.perf_counter()
            trainer.fit(task)
            task.wall_time = time.perf_counter() - start
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)
    task.trainer = trainer
    if restore_best:
        task.restore_best()
    return task


def pes_scan(molecule: str = "H2", bond_lengths: Optional[Sequence[float]] = None, max_steps: int = 100,
             warm_start: bool = True, plot: Optional[str] = None, **fit_kwargs) -> list:
    """VQE along a bundled potential-energy scan (``tql.chem.load_scan``), each point started from the
    angles of the previous one.

    ``bond_lengths``: a subset of the scan's (Å; default all). Returns a list of dicts with
    ``bond_length``, ``vqe``, ``hf``, ``fci`` (Ha), ``error_mha``, ``steps`` (optimizer steps) and
    ``chemical_accuracy`` (bool). ``plot="pes.png"`` also draws the curves with matplotlib if it is
    installed (a warning otherwise).
    """
    available = [r for r, _, _ in chem.load_scan(molecule)]
    if bond_lengths is None:
        bond_lengths = available
    try:
        bond_lengths = [float(r) for r in bond_lengths]
    except (TypeError, ValueError):
        raise ValueError(f"pes_scan: bond_lengths must be numbers (Å), got {bond_lengths!r}") from None
    for r in bond_lengths:
        if not any(abs(r - a) < 1e-6 for a in available):
            raise ValueError(f"pes_scan: bond length {r} is not in the bundled {molecule} scan "
                             f"({', '.join(f'{a:g}' for a in available)})")
    table, previous = [], None
    for r in bond_lengths:
        if warm_start and previous is not None:
            fit_kwargs["init_weights"] = previous
        task = fit_vqe(molecule, max_steps=max_steps, bond_length=r, **fit_kwargs)
        previous = task.circuit.weights.detach().tolist()
        e = task.final_energy()
        err = abs(e - task.fci_energy) * 1e3
        table.append({"bond_length": float(r), "vqe": e, "hf": task.hf_energy, "fci": task.fci_energy,
                      "error_mha": err, "steps": int(task.global_step),
                      "chemical_accuracy": bool(err < CHEMICAL_ACCURACY_MHA)})
    if plot is not None:
        plot_pes(table, plot)
    return table


def plot_pes(table: list, path: str) -> Optional[str]:
    """Save the HF / FCI / VQE curves of a :func:`pes_scan` table as a PNG
    (:func:`torchquantum_layers.plotting.dissociation_curve`); None, with a warning, without matplotlib."""
    from torchquantum_layers import plotting
    try:
        plotting.require_matplotlib("pes_scan(plot=...)")
    except ImportError as exc:
        warnings.warn(f"{exc}; no plot written")
        return None
    plotting.dissociation_curve(table, path=path)
    return str(path)
