"""Lattice-model Hamiltonians: transverse-field Ising, Heisenberg (XXZ / XYZ), XY and Fermi–Hubbard.

A :class:`Lattice` is a list of sites ``0 … n_sites − 1`` and of undirected edges ``(i, j)``
(``i < j``) with a weight each (1 by default). Constructors::

    chain(n, periodic=False)                  # n sites in a line (a ring when periodic)
    square(rows, cols, periodic=False)        # rows × cols grid
    triangular(rows, cols, periodic=False)    # square grid + one diagonal per plaquette
    honeycomb(rows, cols, periodic=False)     # brick-wall embedding of the honeycomb lattice

Grid sites are numbered row-major, site ``(r, c)`` is ``r * cols + c`` (``Lattice.coords[s]``
gives ``(r, c)`` back). Edges come in a fixed order, the order of per-edge couplings: for each
bond direction in turn — right ``(0, +1)``, down ``(+1, 0)``, then (triangular) down-right
``(+1, +1)`` — every site in row-major order adds the bond to its neighbour in that direction,
wrapping around where ``periodic``. So a chain lists ``(0, 1), (1, 2), …, (n − 2, n − 1)`` and,
when periodic, ``(0, n − 1)`` last; a 2 × 3 square lists its horizontal bonds
``(0, 1), (1, 2), (3, 4), (4, 5)`` before its vertical ones ``(0, 3), (1, 4), (2, 5)``.
``periodic`` is a bool or a ``(along_rows, along_cols)`` pair (``along_cols``: the bond from the
last column to the first); a direction of length 1 never wraps, and wrapping a direction of length 2
is refused (it would repeat the open bond).

Spin models act on ``n_sites`` wires (wire = site) and are written with Pauli matrices (not spin
operators ``S = σ/2``)::

    transverse_field_ising:  H = −Σ_<ij> J_ij Z_i Z_j − Σ_i h_i X_i          (J > 0 ferromagnetic)
    heisenberg:              H =  Σ_<ij> (Jx X_i X_j + Jy Y_i Y_j + Jz Z_i Z_j) − Σ_i h_i Z_i
                                                                           (J > 0 antiferromagnetic)
    xy_model:                H =  Σ_<ij> J_ij (X_i X_j + Y_i Y_j) − Σ_i h_i Z_i

(the coupling signs of PennyLane's ``qml.spin``; the field of ``heisenberg`` / ``xy_model``
lowers the energy of |0⟩, Z = +1, for h > 0). ``fermi_hubbard`` acts on ``2 n_sites`` spin orbitals in
the order of :mod:`torchquantum_layers.chem` (interleaved: mode ``2i`` = site i spin up (α),
mode ``2i + 1`` = site i spin down (β); occupied = |1⟩ under Jordan–Wigner)::

    H = −Σ_<ij>,σ t_ij (a†_iσ a_jσ + a†_jσ a_iσ) + Σ_i U_i n_i↑ n_i↓ − Σ_i μ_i (n_i↑ + n_i↓)

mapped to qubits by the chemistry package's exact maps (``"jordan_wigner"``, ``"parity"``,
``"bravyi_kitaev"``), so it commutes with ``tql.chem.particle_number`` and ``tql.chem.spin_z``
of the same mapping. At ``μ = U / 2`` half filling is the ground-state sector.

Every coupling (``J``, ``h``, ``t``, ``U``, ``mu``) is a real number or one value per edge
(``J``, ``t``) / per site (``h``, ``U``, ``mu``); edge couplings are multiplied by the lattice's
edge weights. Zero couplings add no term. Bad input raises ``ValueError`` / ``TypeError`` naming
the function and the argument.
"""
from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from .chem.fermion import MAX_MODES, _resolve_mapping, map_arrays
from .observables import Hamiltonian, PauliString

__all__ = ["Lattice", "chain", "square", "triangular", "honeycomb", "transverse_field_ising", "heisenberg",
           "xy_model", "fermi_hubbard"]

Coupling = Union[float, Sequence[float]]


# ------------------------------------------------------------------------------------------------
# argument checks
def _int_arg(value, what: str, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}: {name} must be an int, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{what}: {name} must be at least {minimum}, got {value}")
    return value


def _real(value, what: str, name: str) -> float:
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        if isinstance(value, numbers.Complex) and not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what}: {name} must be real, got {value!r}")
        raise TypeError(f"{what}: {name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{what}: {name} must be finite, got {value!r}")
    return value


def _values(value, count: int, what: str, name: str, per: str) -> np.ndarray:
    """A real number broadcast to ``count`` values, or a sequence of exactly ``count`` of them."""
    if hasattr(value, "detach"):                        # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (numbers.Number, np.generic)) or isinstance(value, bool):
        return np.full(count, _real(value, what, name))
    if isinstance(value, (str, bytes, dict, set)):
        raise TypeError(f"{what}: {name} must be a real number or one per {per}, got {type(value).__name__}")
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"{what}: {name} must be a real number or one per {per}, "
                        f"got {type(value).__name__}") from None
    if len(items) != count:
        raise ValueError(f"{what}: {name} has {len(items)} values but the lattice has {count} {per}s")
    return np.array([_real(v, what, f"{name}[{k}]") for k, v in enumerate(items)], dtype=np.float64)


def _check_lattice(lattice, what: str) -> "Lattice":
    if not isinstance(lattice, Lattice):
        raise TypeError(f"{what}: lattice must be a Lattice (tql.lattice.chain, square, ...), "
                        f"got {type(lattice).__name__}")
    return lattice


# ------------------------------------------------------------------------------------------------
class Lattice:
    """Sites ``0 … n_sites − 1`` and undirected weighted edges (immutable).

    ``Lattice(n_sites, edges, weights=None)`` takes any graph: ``edges`` a sequence of distinct
    ``(i, j)`` pairs of sites, ``i != j`` (stored as ``(min, max)``, in the given order),
    ``weights`` one finite real number per edge (default all 1). The grid constructors
    (:func:`chain`, :func:`square`, :func:`triangular`, :func:`honeycomb`) also set ``shape``
    ``(rows, cols)``, ``periodic`` ``(along_rows, along_cols)`` and ``coords`` (``(r, c)`` of each site).
    """

    __slots__ = ("n_sites", "edges", "weights", "name", "shape", "periodic", "coords")

    def __init__(self, n_sites: int, edges, weights=None, name: str = "custom",
                 shape: Optional[Tuple[int, int]] = None, periodic: Tuple[bool, bool] = (False, False)):
        what = "Lattice"
        n_sites = _int_arg(n_sites, what, "n_sites", 1)
        if isinstance(edges, (str, bytes)):
            raise TypeError(f"{what}: edges must be a sequence of (i, j) pairs, got a string")
        try:
            items = list(edges)
        except TypeError:
            raise TypeError(f"{what}: edges must be a sequence of (i, j) pairs, got {type(edges).__name__}") from None
        out, seen = [], {}
        for k, e in enumerate(items):
            if isinstance(e, (str, bytes)) or not hasattr(e, "__len__") or len(e) != 2:
                raise TypeError(f"{what}: edges[{k}] must be an (i, j) pair of sites, got {e!r}")
            i, j = (_int_arg(s, what, f"edges[{k}] site", 0) for s in e)
            if i >= n_sites or j >= n_sites:
                raise ValueError(f"{what}: edges[{k}] = {tuple(e)} names site {max(i, j)} but n_sites={n_sites}")
            if i == j:
                raise ValueError(f"{what}: edges[{k}] = {tuple(e)} joins site {i} to itself")
            key = (min(i, j), max(i, j))
            if key in seen:
                raise ValueError(f"{what}: edges[{k}] = {tuple(e)} repeats edges[{seen[key]}] = {key}")
            seen[key] = k
            out.append(key)
        if weights is None:
            w = (1.0,) * len(out)
        else:
            w = tuple(float(v) for v in _values(weights, len(out), what, "weights", "edge"))
        self.n_sites = n_sites
        self.edges = tuple(out)
        self.weights = w
        self.name = str(name)
        if shape is not None and (len(shape) != 2 or int(shape[0]) * int(shape[1]) != n_sites):
            raise ValueError(f"{what}: shape {tuple(shape)} does not hold n_sites={n_sites} sites")
        self.shape = None if shape is None else (int(shape[0]), int(shape[1]))
        self.periodic = (bool(periodic[0]), bool(periodic[1]))
        self.coords = None if shape is None else tuple(divmod(s, self.shape[1]) for s in range(n_sites))

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    def neighbours(self, site: int) -> tuple:
        """The sites joined to ``site`` by an edge, ascending."""
        site = _int_arg(site, "Lattice.neighbours", "site", 0)
        if site >= self.n_sites:
            raise ValueError(f"Lattice.neighbours: site {site} does not exist (n_sites={self.n_sites})")
        return tuple(sorted({j for i, j in self.edges if i == site} | {i for i, j in self.edges if j == site}))

    def adjacency(self) -> np.ndarray:
        """The symmetric ``(n_sites, n_sites)`` matrix of edge weights (0 where no edge)."""
        a = np.zeros((self.n_sites, self.n_sites))
        for (i, j), w in zip(self.edges, self.weights):
            a[i, j] = a[j, i] = w
        return a

    def with_weights(self, weights) -> "Lattice":
        """The same lattice with new per-edge weights."""
        out = Lattice(self.n_sites, self.edges, weights, self.name, self.shape, self.periodic)
        return out

    def __eq__(self, other) -> bool:
        if not isinstance(other, Lattice):
            return NotImplemented
        return (self.n_sites, self.edges, self.weights) == (other.n_sites, other.edges, other.weights)

    def __hash__(self):
        return hash((self.n_sites, self.edges, self.weights))

    def __repr__(self) -> str:
        shape = "" if self.shape is None else f", shape={self.shape}, periodic={self.periodic}"
        return f"Lattice({self.name}, n_sites={self.n_sites}, n_edges={self.n_edges}{shape})"


def _periodic_pair(periodic, what: str) -> Tuple[bool, bool]:
    if isinstance(periodic, (bool, np.bool_)):
        return bool(periodic), bool(periodic)
    if isinstance(periodic, (tuple, list)) and len(periodic) == 2 and all(isinstance(p, (bool, np.bool_))
                                                                          for p in periodic):
        return bool(periodic[0]), bool(periodic[1])
    raise TypeError(f"{what}: periodic must be a bool or an (along_rows, along_cols) pair of bools, got {periodic!r}")


def _grid(what: str, rows: int, cols: int, periodic, directions, keep=None) -> Lattice:
    rows = _int_arg(rows, what, "rows", 1)
    cols = _int_arg(cols, what, "cols", 1)
    if rows * cols < 2:
        raise ValueError(f"{what}: a lattice needs at least 2 sites, got rows={rows}, cols={cols}")
    pr, pc = _periodic_pair(periodic, what)
    pr, pc = pr and rows > 1, pc and cols > 1           # a direction of length 1 has no bonds to wrap
    for flag, length, name in ((pr, rows, "rows"), (pc, cols, "cols")):
        if flag and length < 3:
            raise ValueError(f"{what}: periodic along {name} needs {name} >= 3 (with {name}={length} the "
                             f"wrap-around bond repeats the open one)")
    edges = []
    for dr, dc in directions:
        for r in range(rows):
            for c in range(cols):
                if keep is not None and not keep(r, c, dr, dc):
                    continue
                r2, c2 = r + dr, c + dc
                if r2 >= rows:
                    if not pr:
                        continue
                    r2 -= rows
                if c2 >= cols:
                    if not pc:
                        continue
                    c2 -= cols
                edges.append((r * cols + c, r2 * cols + c2))
    return Lattice(rows * cols, edges, name=what, shape=(rows, cols), periodic=(pr, pc))


def chain(n: int, periodic: bool = False) -> Lattice:
    """``n`` sites in a line: edges ``(0, 1), …, (n − 2, n − 1)``, then ``(0, n − 1)`` when periodic
    (a ring; needs n >= 3). ``n`` >= 2."""
    n = _int_arg(n, "chain", "n", 2)
    if not isinstance(periodic, (bool, np.bool_)):
        raise TypeError(f"chain: periodic must be a bool, got {periodic!r}")
    if periodic and n < 3:
        raise ValueError(f"chain: a periodic chain needs n >= 3 (with n={n} the wrap-around bond repeats (0, 1))")
    return _grid("chain", 1, n, (False, bool(periodic)), [(0, 1)])


def square(rows: int, cols: int, periodic=False) -> Lattice:
    """``rows × cols`` square grid, site ``(r, c)`` = ``r * cols + c``; horizontal bonds first
    (row-major by their left site), then vertical ones (row-major by their upper site); wrap-around
    bonds take the place of the bond that would leave the grid."""
    return _grid("square", rows, cols, periodic, [(0, 1), (1, 0)])


def triangular(rows: int, cols: int, periodic=False) -> Lattice:
    """Triangular lattice on a ``rows × cols`` grid: the square bonds plus the diagonal
    ``(r, c) — (r + 1, c + 1)`` of each plaquette (listed third); every bulk site has 6 neighbours."""
    return _grid("triangular", rows, cols, periodic, [(0, 1), (1, 0), (1, 1)])


def honeycomb(rows: int, cols: int, periodic=False) -> Lattice:
    """Honeycomb lattice as a brick wall on a ``rows × cols`` grid: every horizontal bond, and the
    vertical bond ``(r, c) — (r + 1, c)`` only where ``r + c`` is even; every bulk site has 3
    neighbours. Periodic wrapping needs an even length in that direction (to keep the lattice
    bipartite with 3 bonds a site)."""
    what = "honeycomb"
    pr, pc = _periodic_pair(periodic, what)
    for flag, length, name in ((pr, rows, "rows"), (pc, cols, "cols")):
        if flag and isinstance(length, numbers.Integral) and length > 1 and length % 2:
            raise ValueError(f"{what}: periodic along {name} needs an even {name}, got {name}={length}")
    return _grid(what, rows, cols, (pr, pc), [(0, 1), (1, 0)],
                 keep=lambda r, c, dr, dc: dr == 0 or (r + c) % 2 == 0)


# ------------------------------------------------------------------------------------------------
# spin models
def _edge_couplings(value, lattice: Lattice, what: str, name: str) -> np.ndarray:
    return _values(value, lattice.n_edges, what, name, "edge") * np.asarray(lattice.weights, dtype=np.float64)


def _pair(i: int, j: int, x: bool, z: bool) -> PauliString:
    m = (1 << i) | (1 << j)
    return PauliString.from_masks(m if x else 0, m if z else 0)


def _single(i: int, x: bool, z: bool) -> PauliString:
    return PauliString.from_masks((1 << i) if x else 0, (1 << i) if z else 0)


def transverse_field_ising(lattice: Lattice, J: Coupling = 1.0, h: Coupling = 1.0) -> Hamiltonian:
    """``H = −Σ_<ij> J_ij Z_i Z_j − Σ_i h_i X_i`` on ``lattice.n_sites`` wires.

    ``J``: a number or one per edge (times the edge weights); ``h``: a number or one per site.
    J > 0 is ferromagnetic; on a chain the quantum critical point is ``h = J``. Terms: the ZZ bonds in
    edge order, then the X fields by site.
    """
    what = "transverse_field_ising"
    lattice = _check_lattice(lattice, what)
    Jv = _edge_couplings(J, lattice, what, "J")
    hv = _values(h, lattice.n_sites, what, "h", "site")
    terms = [(-float(c), _pair(i, j, False, True)) for (i, j), c in zip(lattice.edges, Jv) if c != 0]
    terms += [(-float(c), _single(i, True, False)) for i, c in enumerate(hv) if c != 0]
    return Hamiltonian(terms, n_wires=lattice.n_sites)


def _heisenberg(what: str, lattice: Lattice, comps, h) -> Hamiltonian:
    hv = _values(h, lattice.n_sites, what, "h", "site")
    terms = []
    for e, (i, j) in enumerate(lattice.edges):
        for (x, z), c in zip(((True, False), (True, True), (False, True)), comps):    # XX, YY, ZZ
            if c[e] != 0:
                terms.append((float(c[e]), _pair(i, j, x, z)))
    terms += [(-float(c), _single(i, False, True)) for i, c in enumerate(hv) if c != 0]
    return Hamiltonian(terms, n_wires=lattice.n_sites)


def heisenberg(lattice: Lattice, J=1.0, h: Coupling = 0.0) -> Hamiltonian:
    """``H = Σ_<ij> (Jx X_i X_j + Jy Y_i Y_j + Jz Z_i Z_j) − Σ_i h_i Z_i`` (XXX / XXZ / XYZ).

    ``J``: a number (isotropic, XXX) or a triple ``(Jx, Jy, Jz)`` whose entries are each a number or
    one value per edge (a length-3 ``J`` is always read as the triple; an isotropic per-edge
    coupling is ``(Je, Je, Je)``, or use the lattice's edge weights). Couplings are multiplied by
    the edge weights. ``h``: field along z, a number or one per site. J > 0 is antiferromagnetic:
    on two sites the singlet has energy −3J and the triplet +J. Terms: XX, YY, ZZ of each edge in
    edge order, then the Z fields.
    """
    what = "heisenberg"
    lattice = _check_lattice(lattice, what)
    if hasattr(J, "detach"):
        J = J.detach().cpu().numpy()
    if isinstance(J, np.ndarray) and J.ndim == 0:
        J = J[()]
    if isinstance(J, (numbers.Number, np.generic)):
        comps = [_edge_couplings(J, lattice, what, "J")] * 3
    elif isinstance(J, (tuple, list, np.ndarray)) and len(J) == 3:
        comps = [_edge_couplings(c, lattice, what, f"J[{k}] ({'xyz'[k]})") for k, c in enumerate(J)]
    elif isinstance(J, (tuple, list, np.ndarray)):
        raise ValueError(f"heisenberg: J must be a number or a triple (Jx, Jy, Jz), got {len(J)} values "
                         f"(per-edge couplings go inside the triple: J=(Je, Je, Je))")
    else:
        raise TypeError(f"heisenberg: J must be a number or a triple (Jx, Jy, Jz), got {type(J).__name__}")
    return _heisenberg(what, lattice, comps, h)


def xy_model(lattice: Lattice, J: Coupling = 1.0, h: Coupling = 0.0) -> Hamiltonian:
    """``H = Σ_<ij> J_ij (X_i X_j + Y_i Y_j) − Σ_i h_i Z_i`` (the Heisenberg model with Jz = 0).

    ``J``: a number or one per edge (times the edge weights); ``h``: a number or one per site.
    Conserves the number of 1s (Σ Z_i commutes with it)."""
    what = "xy_model"
    lattice = _check_lattice(lattice, what)
    Jv = _edge_couplings(J, lattice, what, "J")
    return _heisenberg(what, lattice, [Jv, Jv, np.zeros_like(Jv)], h)


# ------------------------------------------------------------------------------------------------
# Fermi-Hubbard
def fermi_hubbard(lattice: Lattice, t: Coupling = 1.0, U: Coupling = 1.0, mu: Coupling = 0.0,
                  mapping: str = "jordan_wigner") -> Hamiltonian:
    """Fermi–Hubbard model on ``2 * lattice.n_sites`` qubits.

    ``H = −Σ_<ij>,σ t_ij (a†_iσ a_jσ + h.c.) + Σ_i U_i n_i↑ n_i↓ − Σ_i μ_i (n_i↑ + n_i↓)`` with
    spin orbitals interleaved as in :mod:`torchquantum_layers.chem` (mode ``2i`` = site i ↑,
    ``2i + 1`` = site i ↓). ``t``: a number or one per edge (times the edge weights); ``U``, ``mu``:
    a number or one per site. ``mapping``: ``"jordan_wigner"`` (default), ``"parity"`` or
    ``"bravyi_kitaev"`` (the chemistry package's exact maps; aliases ``"jw"``, ``"bk"``). At most
    31 sites (62 modes). Two sites at half filling: ground energy ``(U − sqrt(U² + 16 t²)) / 2``.
    """
    what = "fermi_hubbard"
    lattice = _check_lattice(lattice, what)
    try:
        mapping = _resolve_mapping(mapping)
    except (TypeError, ValueError) as err:
        raise type(err)(f"{what}: mapping: {err}") from None
    n = lattice.n_sites
    if 2 * n > MAX_MODES:
        raise ValueError(f"{what}: lattice has {n} sites, {2 * n} spin orbitals; at most {MAX_MODES // 2} "
                         f"sites ({MAX_MODES} modes) are supported")
    tv = _edge_couplings(t, lattice, what, "t")
    Uv = _values(U, n, what, "U", "site")
    mv = _values(mu, n, what, "mu", "site")
    hop_modes, hop_coeffs = [], []
    for (i, j), c in zip(lattice.edges, tv):
        if c == 0:
            continue
        for s in (0, 1):
            p, q = 2 * i + s, 2 * j + s
            hop_modes += [(p, q), (q, p)]
            hop_coeffs += [-c, -c]
    sites = np.arange(n)
    groups = []
    if hop_modes:
        m = np.array(hop_modes, dtype=np.int64)
        groups.append((m, np.tile([1, 0], (len(m), 1)), np.array(hop_coeffs)))
    on = sites[Uv != 0]
    if on.size:
        m = np.stack([2 * on, 2 * on, 2 * on + 1, 2 * on + 1], axis=1)
        groups.append((m, np.tile([1, 0, 1, 0], (len(m), 1)), Uv[on]))
    on = sites[mv != 0]
    if on.size:
        modes = np.concatenate([2 * on, 2 * on + 1])
        groups.append((np.stack([modes, modes], axis=1), np.tile([1, 0], (len(modes), 1)),
                       -np.concatenate([mv[on], mv[on]])))
    return map_arrays(groups, 2 * n, mapping)
