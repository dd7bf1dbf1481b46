"""Lattice models for :class:`lightning_tasks.vqe.VQETask`: ``model={...}`` as plain data.

``VQETask(model=spec)`` solves a condensed-matter Hamiltonian of :mod:`torchquantum_layers.lattice`
instead of a molecule (``molecule`` and ``model`` are mutually exclusive). ``spec`` is a dict::

    {"name": "tfim",                 # "tfim" | "heisenberg" | "xy" | "hubbard"
     "lattice": "chain",             # "chain" | "square" | "triangular" | "honeycomb" (default "chain")
     "size": 8,                      # chain: n sites (int); 2D: [rows, cols]
     "periodic": False,              # bool; 2D also [along_rows, along_cols]
     "J": 1.0, "h": 1.0}             # the model's couplings (below), numbers or per-edge / per-site lists

Couplings (defaults those of ``tql.lattice``): ``tfim``: ``J`` (1), ``h`` (1) of
``transverse_field_ising``; ``heisenberg``: ``J`` (1, or ``[Jx, Jy, Jz]``), ``h`` (0);
``xy``: ``J`` (1), ``h`` (0); ``hubbard``: ``t`` (1), ``U`` (1), ``mu`` (0), ``mapping``
(``"jordan_wigner"``), and optionally ``n_electrons``. Any other key, an unknown name or
lattice, a bad size or coupling is a ValueError naming the key (``VQETask: model['size'] ...``).

Hubbard and electrons: without ``n_electrons`` the reference energy is the ground state over
every particle number (the chemical potential ``mu`` picks the filling) and the ansatz starts
at the empty state. With ``n_electrons`` the run is in that sector: the circuit starts at the
occupation of the lowest ``n_electrons`` spin orbitals (site 0 ↑, site 0 ↓, site 1 ↑, …,
mapped with ``mapping``), ``ansatz="uccsd"`` / ``"adapt"`` (particle-conserving Givens
excitations; Jordan–Wigner only) become available, and ``exact_energy`` is the ground energy
*of that sector* (the ground state of ``H + λ (N − n_electrons)²`` with λ above the spectral
width, N = ``tql.chem.particle_number``). The chemistry-only task options (``bond_length``,
``geometry``, ``basis``, ``charge``, ``multiplicity``, ``active_electrons``,
``active_orbitals``, ``taper``) are refused with a model.

Ansätze: ``"hva"`` (default for spin models; ``tql.templates.hamiltonian_variational``:
TFIM from |+…+⟩ with a ZZ and an X angle per layer; Heisenberg / XY from singlets on the first
colour class of a greedy edge colouring, one angle per colour class (and one for the field) per
layer) and ``"hardware_efficient"`` (default for Hubbard without ``n_electrons``; ``tql.chem.hardware_efficient`` from
|0…0⟩ for TFIM, the Néel state ((r + c) odd sites flipped) for Heisenberg / XY, the reference
above for Hubbard). ``"uccsd"`` / ``"adapt"`` need electrons: Hubbard with ``n_electrons`` only,
where ``"uccsd"`` is the default (Jordan–Wigner; ``"hardware_efficient"`` with another mapping).
The hardware-efficient circuit does not conserve the particle number: with ``n_electrons`` its
energy can fall below the sector's ``exact_energy`` (into another filling), so ``error`` is then
no bound; prefer ``"uccsd"`` there.

Reference energy: ``exact_energy`` = ``tql.exact.ground_state`` of the register when it has at
most :data:`EXACT_MAX_QUBITS` (20) qubits, else None (then only ``energy`` is logged). A
lattice task logs ``energy``, ``error`` = |E − E_exact| (in the units of the couplings) and
``relative_error`` = ``error`` / |E_exact| — the counterparts of a molecule's ``error_mha`` and
``chemical_accuracy`` — and :class:`ExactEnergyStopping` stops on ``relative_error``.
"""
from __future__ import annotations

import numbers
from typing import Optional

import torch
from pytorch_lightning.callbacks import EarlyStopping

import torchquantum_layers.chem as chem
from torchquantum_layers import lattice as L
from torchquantum_layers.exact import ground_state
from torchquantum_layers.trotter import hamiltonian_variational

__all__ = ["MODELS", "LATTICES", "EXACT_MAX_QUBITS", "LATTICE_ACCURACY", "parse_model", "build_model",
           "LatticeInfo", "lattice_circuit", "check_lattice_options", "ExactEnergyStopping"]

MODELS = ("tfim", "heisenberg", "xy", "hubbard")
_ALIASES = {"tfim": "tfim", "ising": "tfim", "transverse_field_ising": "tfim", "heisenberg": "heisenberg",
            "xy": "xy", "xy_model": "xy", "hubbard": "hubbard", "fermi_hubbard": "hubbard"}
LATTICES = ("chain", "square", "triangular", "honeycomb")
EXACT_MAX_QUBITS = 20
LATTICE_ACCURACY = 1e-3            # relative error counted as "reached" (steps_to_accuracy, stopping)
_COUPLINGS = {"tfim": ("J", "h"), "heisenberg": ("J", "h"), "xy": ("J", "h"),
              "hubbard": ("t", "U", "mu", "mapping", "n_electrons")}
_COMMON = ("name", "lattice", "size", "periodic")
_WHAT = "VQETask: model"


def _err(key: Optional[str], message: str) -> ValueError:
    where = _WHAT if key is None else f"{_WHAT}[{key!r}]"
    return ValueError(f"{where}: {message}")


def _int(value, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise _err(key, f"must be an int >= {minimum}, got {value!r}")
    return int(value)


def parse_model(spec) -> dict:
    """Check ``spec`` and return it canonical (``name`` resolved, every key filled): a dict of
    plain values. ValueError naming the key at fault otherwise."""
    if not isinstance(spec, dict):
        raise ValueError(f"{_WHAT} must be a dict such as {{'name': 'tfim', 'lattice': 'chain', 'size': 6}}, "
                         f"got {type(spec).__name__}")
    if "name" not in spec:
        raise _err(None, f"missing key 'name' (one of {', '.join(MODELS)})")
    name = spec["name"]
    if not isinstance(name, str) or name.lower() not in _ALIASES:
        raise _err("name", f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    name = _ALIASES[name.lower()]
    allowed = _COMMON + _COUPLINGS[name]
    extra = [k for k in spec if k not in allowed]
    if extra:
        raise _err(extra[0], f"is not a key of the {name!r} model (keys: {', '.join(allowed)})")
    if "size" not in spec:
        raise _err(None, "missing key 'size' (chain: a number of sites; 2D lattices: [rows, cols])")
    lattice = spec.get("lattice", "chain")
    if not isinstance(lattice, str) or lattice.lower() not in LATTICES:
        raise _err("lattice", f"unknown lattice {lattice!r}; choose one of {', '.join(LATTICES)}")
    lattice = lattice.lower()
    size = spec["size"]
    if lattice == "chain":
        if isinstance(size, (list, tuple)) and len(size) == 1:
            size = size[0]
        size = _int(size, "size", 2)
    else:
        if not isinstance(size, (list, tuple)) or len(size) != 2:
            raise _err("size", f"a {lattice} lattice needs [rows, cols], got {size!r}")
        size = [_int(size[0], "size", 1), _int(size[1], "size", 1)]
    periodic = spec.get("periodic", False)
    if isinstance(periodic, (list, tuple)):
        if lattice == "chain" or len(periodic) != 2 or not all(isinstance(p, bool) for p in periodic):
            raise _err("periodic", f"must be true/false{'' if lattice == 'chain' else ' or [along_rows, along_cols]'}, "
                                   f"got {periodic!r}")
        periodic = [bool(p) for p in periodic]
    elif not isinstance(periodic, bool):
        raise _err("periodic", f"must be true or false, got {periodic!r}")
    out = {"name": name, "lattice": lattice, "size": size, "periodic": periodic}
    defaults = {"J": 1.0, "h": 1.0 if name == "tfim" else 0.0, "t": 1.0, "U": 1.0, "mu": 0.0,
                "mapping": "jordan_wigner", "n_electrons": None}
    for key in _COUPLINGS[name]:
        out[key] = spec.get(key, defaults[key])
    if name == "hubbard":
        if not isinstance(out["mapping"], str):
            raise _err("mapping", f"must be a mapping name, got {out['mapping']!r}")
        if out["n_electrons"] is not None:
            out["n_electrons"] = _int(out["n_electrons"], "n_electrons", 0)
    return out


class LatticeInfo:
    """What the task needs of a lattice problem (the counterpart of ``tql.chem.MoleculeInfo``)."""

    def __init__(self, spec: dict, lattice: L.Lattice, n_qubits: int, reference: tuple, mapping: Optional[str]):
        self.spec, self.lattice, self.n_qubits, self.reference = spec, lattice, n_qubits, reference
        self.name = f"{spec['name']} on a {spec['lattice']} {spec['size']}"
        self.mapping = mapping
        self.n_electrons = spec.get("n_electrons")
        self.exact_energy: Optional[float] = None


def _make_lattice(spec: dict) -> L.Lattice:
    try:
        if spec["lattice"] == "chain":
            return L.chain(spec["size"], periodic=spec["periodic"])
        rows, cols = spec["size"]
        periodic = tuple(spec["periodic"]) if isinstance(spec["periodic"], list) else spec["periodic"]
        return getattr(L, spec["lattice"])(rows, cols, periodic=periodic)
    except (TypeError, ValueError) as err:
        key = "periodic" if "periodic" in str(err) else "size"
        raise _err(key, str(err)) from None


def _hamiltonian(spec: dict, lat: L.Lattice):
    name = spec["name"]
    try:
        if name == "tfim":
            return L.transverse_field_ising(lat, J=spec["J"], h=spec["h"])
        if name == "heisenberg":
            return L.heisenberg(lat, J=spec["J"], h=spec["h"])
        if name == "xy":
            return L.xy_model(lat, J=spec["J"], h=spec["h"])
        return L.fermi_hubbard(lat, t=spec["t"], U=spec["U"], mu=spec["mu"], mapping=spec["mapping"])
    except (TypeError, ValueError) as err:
        text = str(err)
        # tql.lattice names the argument after the function name: "fermi_hubbard: mapping: ..."
        arg = text.split(":", 2)[1].strip().split(" ")[0].split("[")[0] if ":" in text else None
        raise _err(arg if arg in spec else None, text) from None


def build_model(spec: dict, exact: bool = True):
    """``(H, info)`` of a canonical spec (:func:`parse_model`); ``info.exact_energy`` is filled when
    ``exact`` and the register has at most :data:`EXACT_MAX_QUBITS` qubits."""
    lat = _make_lattice(spec)
    H = _hamiltonian(spec, lat)
    name = spec["name"]
    if name == "hubbard":
        n = 2 * lat.n_sites
        mapping = chem.fermion._resolve_mapping(spec["mapping"])
        ne = spec["n_electrons"]
        if ne is not None and ne > n:
            raise _err("n_electrons", f"{ne} electrons do not fit in {n} spin orbitals ({lat.n_sites} sites)")
        occ = [1] * (ne or 0) + [0] * (n - (ne or 0))
        reference = tuple(chem.occupation_to_qubits(occ, mapping))
    else:
        n, mapping = lat.n_sites, None
        if name == "tfim":
            reference = (0,) * n
        else:                                   # Néel: sites with (r + c) odd flipped
            reference = tuple(sum(lat.coords[s]) % 2 for s in range(n))
    info = LatticeInfo(spec, lat, n, reference, mapping)
    if exact and n <= EXACT_MAX_QUBITS:
        info.exact_energy = exact_ground_energy(H, n, mapping if spec.get("n_electrons") is not None else None,
                                                spec.get("n_electrons"))
    return H, info


def exact_ground_energy(H, n_qubits: int, mapping: Optional[str] = None, n_electrons: Optional[int] = None) -> float:
    """The lowest eigenvalue of ``H`` (``tql.exact.ground_state``); with ``n_electrons``, the lowest
    in that particle-number sector (penalty λ (N − n_electrons)², λ = 2 Σ|c| + 1 > the spectral width)."""
    if n_electrons is not None:
        N = chem.particle_number(n_qubits, mapping)
        lam = 2.0 * float(sum(abs(c) for c, _ in H.terms)) + 1.0
        shifted = N + (-float(n_electrons))
        H = H + lam * (shifted * shifted)
    energies, _ = ground_state(H, k=1, n_wires=n_qubits)
    return float(energies[0])


def _edge_classes(lat: L.Lattice) -> list:
    """Greedy edge colouring in edge order: lists of edges no two of which share a site."""
    classes: list = []
    for e in lat.edges:
        for cls in classes:
            if all(not set(e) & set(f) for f in cls[1]):
                cls[1].append(e)
                break
        else:
            classes.append((len(classes), [e]))
    return [c[1] for c in classes]


def lattice_circuit(H, info: LatticeInfo, ansatz: str, n_layers: int, dtype):
    """The ansatz circuit of a lattice problem (module docstring); ``uccsd`` / ``adapt`` are built by
    the task (chemistry ansätze on the Hubbard reference)."""
    from torchquantum_layers import Circuit
    n = info.n_qubits
    if ansatz == "hardware_efficient":
        ref = info.reference if any(info.reference) else None
        return chem.hardware_efficient(n, n_layers, reference=ref, dtype=dtype)
    # hva
    c = Circuit(n, dtype=dtype)
    two = [(coef, p) for coef, p in H.terms if len(p.wires) == 2]
    one = [(coef, p) for coef, p in H.terms if len(p.wires) == 1]
    if info.spec["name"] == "tfim":
        for w in range(n):
            c.h(w)
        groups = [two, one]
    else:
        classes = _edge_classes(info.lattice)
        for i, j in classes[0]:                 # singlet (|01> - |10>)/sqrt2 on each first-class bond
            c.h(i)
            c.cnot(i, j)
            c.x(j)
            c.z(i)
        site_class = {e: k for k, cls in enumerate(classes) for e in cls}
        groups = [[(coef, p) for coef, p in two if site_class[tuple(sorted(p.wires))] == k]
                  for k in range(len(classes))] + [one]
    from torchquantum_layers.observables import Hamiltonian
    groups = [Hamiltonian(g, n_wires=n) for g in groups if g]
    return hamiltonian_variational(c, groups, n_layers, init="small")


_CHEM_DEFAULTS = {"bond_length": None, "geometry": None, "basis": "sto-3g", "charge": 0, "multiplicity": 1,
                  "active_electrons": None, "active_orbitals": None, "taper": False}


def check_lattice_options(spec: dict, ansatz: str, **given) -> None:
    """Chemistry-only options keep their defaults; the ansatz suits the model."""
    bad = [k for k, d in _CHEM_DEFAULTS.items() if given.get(k, d) != d]
    if bad:
        raise ValueError(f"VQETask: {', '.join(f'{k}={given[k]!r}' for k in bad)} "
                         f"{'is a molecule option' if len(bad) == 1 else 'are molecule options'}, not used with "
                         f"model= (a lattice {spec['name']!r}); leave "
                         f"{', '.join(f'{k}={_CHEM_DEFAULTS[k]!r}' for k in bad)} (the default)")
    if ansatz in ("uccsd", "adapt") and (spec["name"] != "hubbard" or spec.get("n_electrons") is None):
        where = ("a spin model has no electrons" if spec["name"] != "hubbard"
                 else "give model['n_electrons'] to fix the particle number it conserves")
        raise ValueError(f"VQETask: ansatz={ansatz!r} moves electrons from a reference occupation; {where}. "
                         f"Use ansatz='hva' or 'hardware_efficient'")
    if ansatz == "hva" and spec["name"] == "hubbard":
        raise ValueError("VQETask: ansatz='hva' is built for the spin models (tfim, heisenberg, xy); for "
                         "model['name']='hubbard' use 'hardware_efficient' (or 'uccsd' with n_electrons)")


class ExactEnergyStopping(EarlyStopping):
    """Stop a lattice :class:`~lightning_tasks.vqe.VQETask` once ``relative_error`` (|E − E_exact| /
    |E_exact|) < ``threshold`` (default 1e-3), or when it has not improved by ``min_delta`` for
    ``patience`` steps; the lattice counterpart of ``ChemicalAccuracyStopping`` (checked at the end
    of every step, so resumed runs stop where uninterrupted ones do)."""

    def __init__(self, patience: int = 20, min_delta: float = 1e-6, threshold: float = LATTICE_ACCURACY,
                 verbose: bool = False):
        super().__init__(monitor="relative_error", mode="min", patience=patience, min_delta=min_delta,
                         stopping_threshold=threshold, check_on_train_epoch_end=True, verbose=verbose)

    def setup(self, trainer, pl_module, stage) -> None:
        if getattr(pl_module, "exact_energy", 0.0) is None or getattr(pl_module, "lattice", True) is None:
            raise ValueError("ExactEnergyStopping monitors relative_error, which a lattice VQETask logs when its "
                             f"register has at most {EXACT_MAX_QUBITS} qubits; for a molecule use "
                             "ChemicalAccuracyStopping")
        super().setup(trainer, pl_module, stage)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        pass

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.state.fn != "fit" or trainer.sanity_checking:
            return
        self._run_early_stopping_check(trainer)
