"""tql.lattice: lattices and lattice-model Hamiltonians against independent oracles.

Oracles: edge lists written out by hand (and, for larger periodic lattices, neighbours found by
brute force over torus distances); dense NumPy Kronecker-product matrices of each model built here
from its textbook definition (the Hubbard one from hand-made Jordan–Wigner ladder matrices); exact
energies: the free-fermion ground energy of the transverse-field Ising chain (open: the singular
values of a bidiagonal matrix, and the closed form at h = J; periodic: the antiperiodic momenta),
the two-site Heisenberg spectrum, the Heisenberg 4-ring and the two-site Hubbard ground energy
at half filling. The library's Hamiltonians are turned into matrices here, term by term, from their
(coefficient, Pauli string) pairs (not with ``Hamiltonian.to_dense``).
"""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
import torchquantum_layers.chem  # noqa: F401
from torchquantum_layers import lattice as L

from .oracle import I2, X, Y, Z, kron

PAULI = {"X": X, "Y": Y, "Z": Z}


# ------------------------------------------------------------------------------------------------
# helpers (NumPy only)
def op_on(n, factors):
    """Kronecker product with ``factors[w]`` on wire w (wire 0 = most significant) and I elsewhere."""
    return kron(*[factors.get(w, I2) for w in range(n)])


def dense_of(H, n):
    """The library Hamiltonian as a matrix, from its terms (coefficient times Pauli Kronecker product)."""
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        out += complex(c) * op_on(n, {w: PAULI[ch] for w, ch in p.ops.items()})
    return out


def tfim_dense(n, bonds, J, h):
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for (i, j), Jb in zip(bonds, J):
        out -= Jb * op_on(n, {i: Z, j: Z})
    for i in range(n):
        out -= h[i] * op_on(n, {i: X})
    return out


def heisenberg_dense(n, bonds, Jx, Jy, Jz, h):
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for b, (i, j) in enumerate(bonds):
        out += Jx[b] * op_on(n, {i: X, j: X}) + Jy[b] * op_on(n, {i: Y, j: Y}) + Jz[b] * op_on(n, {i: Z, j: Z})
    for i in range(n):
        out -= h[i] * op_on(n, {i: Z})
    return out


def ladder(n_modes):
    """Jordan–Wigner creation matrices, occupied = |1⟩: a†_j = Z_0 … Z_{j-1} |1⟩⟨0|_j."""
    raise_ = np.array([[0, 0], [1, 0]], dtype=np.complex128)
    return [op_on(n_modes, {**{k: Z for k in range(j)}, j: raise_}) for j in range(n_modes)]


def hubbard_dense(n_sites, bonds, t, U, mu):
    m = 2 * n_sites
    cr = ladder(m)
    num = [c @ c.conj().T for c in cr]
    out = np.zeros((2 ** m, 2 ** m), dtype=np.complex128)
    for (i, j), tb in zip(bonds, t):
        for s in (0, 1):
            p, q = 2 * i + s, 2 * j + s
            out -= tb * (cr[p] @ cr[q].conj().T + cr[q] @ cr[p].conj().T)
    for i in range(n_sites):
        out += U[i] * num[2 * i] @ num[2 * i + 1] - mu[i] * (num[2 * i] + num[2 * i + 1])
    return out, sum(num)


def tfim_open_e0(n, J, h):
    """Free fermions: H = (i/4) Σ M_ab γ_a γ_b with M a chain of 2n Majoranas, couplings alternating
    2h (on-site) and 2J (bond); E0 = −½ Σ of the single-particle energies, which are the singular
    values of the n × n bidiagonal block 2 (h I + J shift)."""
    B = h * np.eye(n) + J * np.eye(n, k=1)
    return -np.linalg.svd(B, compute_uv=False).sum()


def tfim_ring_e0(n, J, h):
    """Periodic chain, J > 0: the ground state lies in the even-parity (antiperiodic) sector,
    momenta k = (2m + 1) π / n, E0 = −Σ_k sqrt(J² + h² − 2 J |h| cos k)."""
    assert J > 0
    k = np.pi * (2 * np.arange(n) + 1) / n
    return -np.sqrt(J * J + h * h - 2 * J * abs(h) * np.cos(k)).sum()


# ------------------------------------------------------------------------------------------------
# lattices: edge lists by hand
HAND_EDGES = [
    (lambda: L.chain(2), 2, [(0, 1)]),
    (lambda: L.chain(4), 4, [(0, 1), (1, 2), (2, 3)]),
    (lambda: L.chain(4, periodic=True), 4, [(0, 1), (1, 2), (2, 3), (0, 3)]),
    (lambda: L.square(2, 3), 6, [(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (1, 4), (2, 5)]),
    (lambda: L.square(1, 3), 3, [(0, 1), (1, 2)]),
    (lambda: L.square(3, 1), 3, [(0, 1), (1, 2)]),
    (lambda: L.square(2, 3, periodic=(False, True)), 6,
     [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (0, 3), (1, 4), (2, 5)]),
    (lambda: L.square(1, 4, periodic=True), 4, [(0, 1), (1, 2), (2, 3), (0, 3)]),
    (lambda: L.square(3, 3, periodic=True), 9,
     [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (6, 7), (7, 8), (6, 8),
      (0, 3), (1, 4), (2, 5), (3, 6), (4, 7), (5, 8), (0, 6), (1, 7), (2, 8)]),
    (lambda: L.triangular(2, 3), 6, [(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (1, 4), (2, 5), (0, 4), (1, 5)]),
    (lambda: L.honeycomb(2, 4), 8, [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7), (0, 4), (2, 6)]),
    (lambda: L.honeycomb(3, 2), 6, [(0, 1), (2, 3), (4, 5), (0, 2), (3, 5)]),
]


@pytest.mark.parametrize("build,n,edges", HAND_EDGES, ids=range(len(HAND_EDGES)))
def test_edges_written_out_by_hand(build, n, edges):
    lat = build()
    assert lat.n_sites == n
    assert list(lat.edges) == edges
    assert lat.weights == (1.0,) * len(edges)


def test_coords_row_major_and_neighbours():
    lat = L.square(2, 3)
    assert lat.coords == ((0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2))
    assert lat.shape == (2, 3)
    assert lat.neighbours(1) == (0, 2, 4)
    a = lat.adjacency()
    assert a[4, 1] == a[1, 4] == 1 and a[0, 4] == 0 and a.sum() == 2 * 7


def _torus_neighbours(rows, cols, vectors, pr, pc):
    """Brute force: pairs of sites whose difference is ± a bond vector modulo the periodic sizes."""
    out = set()
    sites = [(r, c) for r in range(rows) for c in range(cols)]
    for a, (r1, c1) in enumerate(sites):
        for b, (r2, c2) in enumerate(sites):
            if a >= b:
                continue
            for dr, dc in vectors:
                for sgn in (1, -1):
                    er, ec = r2 - r1 - sgn * dr, c2 - c1 - sgn * dc
                    if (er == 0 or (pr and er % rows == 0)) and (ec == 0 or (pc and ec % cols == 0)):
                        out.add((a, b))
    return out


@pytest.mark.parametrize("rows,cols,periodic", [(3, 4, False), (4, 4, True), (3, 5, (True, False)),
                                                (4, 3, (False, True))])
def test_square_and_triangular_by_brute_force(rows, cols, periodic):
    sq = L.square(rows, cols, periodic)
    pr, pc = (periodic, periodic) if isinstance(periodic, bool) else periodic
    assert set(sq.edges) == _torus_neighbours(rows, cols, [(0, 1), (1, 0)], pr, pc)
    assert len(set(sq.edges)) == len(sq.edges)
    tri = L.triangular(rows, cols, periodic)
    assert set(tri.edges) == _torus_neighbours(rows, cols, [(0, 1), (1, 0), (1, 1)], pr, pc)
    if periodic is True:
        assert all(len(sq.neighbours(s)) == 4 for s in range(sq.n_sites))
        assert all(len(tri.neighbours(s)) == 6 for s in range(tri.n_sites))


def test_honeycomb_periodic_is_three_regular_and_bipartite():
    lat = L.honeycomb(4, 6, periodic=True)
    assert lat.n_sites == 24 and lat.n_edges == 36
    assert all(len(lat.neighbours(s)) == 3 for s in range(24))
    colour = [(r + c) % 2 for r, c in lat.coords]
    assert all(colour[i] != colour[j] for i, j in lat.edges)


def test_custom_lattice_and_weights():
    lat = L.Lattice(3, [(2, 0), (1, 2)], weights=[0.5, 2.0])
    assert lat.edges == ((0, 2), (1, 2)) and lat.weights == (0.5, 2.0)
    assert lat.with_weights([1, 1]) == L.Lattice(3, [(0, 2), (1, 2)])
    assert "n_sites=3" in repr(lat)


# ------------------------------------------------------------------------------------------------
# spin models against dense Kronecker oracles
LATTICES = [L.chain(3), L.chain(4, periodic=True), L.square(2, 2), L.triangular(2, 3),
            L.Lattice(4, [(0, 3), (1, 2), (0, 2)], weights=[0.5, -1.5, 2.0])]


@pytest.mark.parametrize("lat", LATTICES, ids=repr)
def test_tfim_matches_kronecker_oracle(lat):
    rng = np.random.default_rng(lat.n_sites + lat.n_edges)
    n, E = lat.n_sites, lat.n_edges
    w = np.array(lat.weights)
    J, h = rng.normal(size=E), rng.normal(size=n)
    H = L.transverse_field_ising(lat, J=J.tolist(), h=h)
    assert H.n_wires == n
    np.testing.assert_allclose(dense_of(H, n), tfim_dense(n, lat.edges, J * w, h), atol=1e-12)
    H = L.transverse_field_ising(lat, J=0.7, h=-0.3)
    np.testing.assert_allclose(dense_of(H, n), tfim_dense(n, lat.edges, 0.7 * w, [-0.3] * n), atol=1e-12)


def test_tfim_term_order_and_zero_couplings():
    H = L.transverse_field_ising(L.chain(3), J=[2.0, 0.0], h=[0.0, 1.0, 3.0])
    assert [(c, str(p)) for c, p in H.terms] == [(-2.0, "Z0 Z1"), (-1.0, "X1"), (-3.0, "X2")]
    assert H.n_wires == 3


@pytest.mark.parametrize("lat", LATTICES, ids=repr)
def test_heisenberg_and_xy_match_kronecker_oracle(lat):
    rng = np.random.default_rng(7 + lat.n_edges)
    n, E = lat.n_sites, lat.n_edges
    w = np.array(lat.weights)
    Jx, Jz, h = rng.normal(size=E), rng.normal(size=E), rng.normal(size=n)
    H = L.heisenberg(lat, J=(Jx, 0.4, torch.tensor(Jz)), h=h)
    ref = heisenberg_dense(n, lat.edges, Jx * w, 0.4 * w, Jz * w, h)
    np.testing.assert_allclose(dense_of(H, n), ref, atol=1e-12)
    H = L.heisenberg(lat, J=1.3, h=0.2)
    ref = heisenberg_dense(n, lat.edges, 1.3 * w, 1.3 * w, 1.3 * w, [0.2] * n)
    np.testing.assert_allclose(dense_of(H, n), ref, atol=1e-12)
    H = L.xy_model(lat, J=Jx, h=0.5)
    ref = heisenberg_dense(n, lat.edges, Jx * w, Jx * w, 0 * w, [0.5] * n)
    np.testing.assert_allclose(dense_of(H, n), ref, atol=1e-12)
    # the XY and XXZ models conserve Σ Z; a generic XYZ model does not
    total_z = sum(op_on(n, {i: Z}) for i in range(n))
    assert np.abs(ref @ total_z - total_z @ ref).max() < 1e-12
    xyz = dense_of(L.heisenberg(lat, J=(1.0, 0.3, 0.5)), n)
    assert np.abs(xyz @ total_z - total_z @ xyz).max() > 0.1


# ------------------------------------------------------------------------------------------------
# exact energies
@pytest.mark.parametrize("n", [3, 4, 5, 6])
@pytest.mark.parametrize("J,h", [(1.0, 1.0), (1.0, 0.4), (0.6, 1.3), (1.0, -0.7)])
def test_tfim_free_fermion_formula_checked_against_eigh(n, J, h):
    """The free-fermion formulas against NumPy eigh of the hand-built matrix (so they can be trusted
    at sizes beyond dense diagonalisation)."""
    ring = [(i, i + 1) for i in range(n - 1)] + [(0, n - 1)]
    e_open = np.linalg.eigvalsh(tfim_dense(n, ring[:-1], [J] * (n - 1), [h] * n))[0]
    e_ring = np.linalg.eigvalsh(tfim_dense(n, ring, [J] * n, [h] * n))[0]
    assert e_open == pytest.approx(tfim_open_e0(n, J, h), abs=1e-12)
    assert e_ring == pytest.approx(tfim_ring_e0(n, J, h), abs=1e-12)
    if J == h == 1.0:       # critical open chain in closed form
        assert e_open == pytest.approx(1 - 1 / math.sin(math.pi / (2 * (2 * n + 1))), abs=1e-12)


@pytest.mark.parametrize("n", [10, 12])
@pytest.mark.parametrize("periodic", [False, True])
@pytest.mark.parametrize("J,h", [(1.0, 1.0), (1.0, 0.5), (0.8, 1.5)])
def test_tfim_ground_energy_free_fermions(n, periodic, J, h):
    H = L.transverse_field_ising(L.chain(n, periodic=periodic), J=J, h=h)
    e0 = float(tql.exact.ground_state(H)[0][0])
    exact = tfim_ring_e0(n, J, h) if periodic else tfim_open_e0(n, J, h)
    assert e0 == pytest.approx(exact, abs=1e-8)


@pytest.mark.parametrize("Jx,Jy,Jz", [(1.0, 1.0, 1.0), (1.0, 1.0, 0.3), (0.5, -1.2, 2.0)])
def test_heisenberg_two_sites_analytic(Jx, Jy, Jz):
    H = L.heisenberg(L.chain(2), J=(Jx, Jy, Jz))
    # {|00>, |11>}: Jz ± (Jx − Jy); {|01>, |10>}: −Jz ± (Jx + Jy)
    expected = sorted([Jz + (Jx - Jy), Jz - (Jx - Jy), -Jz + (Jx + Jy), -Jz - (Jx + Jy)])
    np.testing.assert_allclose(np.linalg.eigvalsh(dense_of(H, 2)), expected, atol=1e-12)
    if Jx == Jy == Jz:      # singlet −3J, triplet +J (threefold)
        np.testing.assert_allclose(np.linalg.eigvalsh(dense_of(H, 2)), [-3, 1, 1, 1], atol=1e-12)


def test_heisenberg_four_site_ring():
    """σ·σ = 4 S·S; the spin-½ 4-ring has E0 = −2J in S·S units, so −8J here."""
    H = L.heisenberg(L.chain(4, periodic=True), J=0.75)
    assert float(tql.exact.ground_state(H)[0][0]) == pytest.approx(-8 * 0.75, abs=1e-10)


HUBBARD_LATTICES = [L.chain(2), L.chain(3), L.square(2, 2), L.Lattice(3, [(0, 2), (1, 2)], weights=[1.0, 0.5])]


@pytest.mark.parametrize("lat", HUBBARD_LATTICES, ids=repr)
def test_hubbard_matches_hand_built_jordan_wigner(lat):
    rng = np.random.default_rng(3 + lat.n_edges)
    n, E = lat.n_sites, lat.n_edges
    w = np.array(lat.weights)
    t, U, mu = rng.normal(size=E), rng.uniform(0, 4, size=n), rng.normal(size=n)
    H = L.fermi_hubbard(lat, t=t, U=U, mu=mu)
    assert H.n_wires == 2 * n
    ref, number = hubbard_dense(n, lat.edges, t * w, U, mu)
    np.testing.assert_allclose(dense_of(H, 2 * n), ref, atol=1e-12)
    spectrum = np.linalg.eigvalsh(ref)
    for mapping in ("parity", "bravyi_kitaev"):     # other encodings: same spectrum
        Hm = L.fermi_hubbard(lat, t=t, U=U, mu=mu, mapping=mapping)
        np.testing.assert_allclose(np.linalg.eigvalsh(dense_of(Hm, 2 * n)), spectrum, atol=1e-10)


@pytest.mark.parametrize("mapping", ["jordan_wigner", "parity", "bravyi_kitaev"])
def test_hubbard_conserves_number_and_spin(mapping):
    lat = L.square(2, 2)
    H = L.fermi_hubbard(lat, t=0.8, U=3.0, mu=0.4, mapping=mapping)
    N = tql.chem.particle_number(8, mapping=mapping)
    Sz = tql.chem.spin_z(8, mapping=mapping)
    assert H.commutes_with(N) and H.commutes_with(Sz)
    h, nd = dense_of(H, 8), dense_of(N, 8)
    assert np.abs(h @ nd - nd @ h).max() < 1e-12


@pytest.mark.parametrize("U,t", [(4.0, 1.0), (1.0, 1.0), (0.0, 0.5), (8.0, 0.3)])
def test_hubbard_two_sites_half_filling(U, t):
    exact = (U - math.sqrt(U * U + 16 * t * t)) / 2
    H = L.fermi_hubbard(L.chain(2), t=t, U=U)
    # the N = 2 sector of the library's matrix (the hand-built number operator is diagonal)
    _, number = hubbard_dense(2, [(0, 1)], [t], [U, U], [0, 0])
    sector = np.isclose(np.diag(number).real, 2)
    h = dense_of(H, 4)[np.ix_(sector, sector)]
    assert np.linalg.eigvalsh(h)[0] == pytest.approx(exact, abs=1e-12)
    # at mu = U/2 (particle-hole symmetric) half filling is the ground-state sector
    for mapping in ("jw", "parity", "bk"):
        Hm = L.fermi_hubbard(L.chain(2), t=t, U=U, mu=U / 2, mapping=mapping)
        assert float(tql.exact.ground_state(Hm)[0][0]) == pytest.approx(exact - U, abs=1e-10)


def test_hubbard_orbital_order_is_interleaved():
    H = L.fermi_hubbard(L.chain(2), t=0.0, U=2.0, mu=0.0)       # U n_0↑ n_0↓ + U n_1↑ n_1↓
    assert H.equals(tql.Hamiltonian.from_string("1 - 0.5*Z0 - 0.5*Z1 + 0.5*Z0 Z1 - 0.5*Z2 - 0.5*Z3 + 0.5*Z2 Z3",
                                                n_wires=4))


# ------------------------------------------------------------------------------------------------
# bad input
BAD = [
    (lambda: L.chain(1), ValueError, r"chain: n must be at least 2"),
    (lambda: L.chain(2.0), TypeError, r"chain: n must be an int"),
    (lambda: L.chain(2, periodic=True), ValueError, r"chain: a periodic chain needs n >= 3"),
    (lambda: L.chain(4, periodic="yes"), TypeError, r"chain: periodic"),
    (lambda: L.square(0, 3), ValueError, r"square: rows must be at least 1"),
    (lambda: L.square(1, 1), ValueError, r"square: a lattice needs at least 2 sites"),
    (lambda: L.square(2, 3, periodic=True), ValueError, r"square: periodic along rows needs rows >= 3"),
    (lambda: L.square(3, 3, periodic=(True,)), TypeError, r"square: periodic"),
    (lambda: L.honeycomb(3, 4, periodic=True), ValueError, r"honeycomb: periodic along rows needs an even rows"),
    (lambda: L.Lattice(3, [(0, 3)]), ValueError, r"Lattice: edges\[0\].*site 3.*n_sites=3"),
    (lambda: L.Lattice(3, [(1, 1)]), ValueError, r"Lattice: edges\[0\].*itself"),
    (lambda: L.Lattice(3, [(0, 1), (1, 0)]), ValueError, r"Lattice: edges\[1\].*repeats edges\[0\]"),
    (lambda: L.Lattice(3, [(0, 1, 2)]), TypeError, r"Lattice: edges\[0\]"),
    (lambda: L.Lattice(3, [(0, 1)], weights=[1, 2]), ValueError, r"Lattice: weights has 2 values.*1 edge"),
    (lambda: L.Lattice(3, [(0, 1)], weights=[float("nan")]), ValueError, r"Lattice: weights\[0\] must be finite"),
    (lambda: L.transverse_field_ising("chain", J=1), TypeError, r"transverse_field_ising: lattice must be a Lattice"),
    (lambda: L.transverse_field_ising(L.chain(3), J=[1.0]), ValueError,
     r"transverse_field_ising: J has 1 values but the lattice has 2 edges"),
    (lambda: L.transverse_field_ising(L.chain(3), h=[1.0, 2.0]), ValueError,
     r"transverse_field_ising: h has 2 values but the lattice has 3 sites"),
    (lambda: L.transverse_field_ising(L.chain(3), J=float("inf")), ValueError,
     r"transverse_field_ising: J must be finite"),
    (lambda: L.transverse_field_ising(L.chain(3), h=[1, float("nan"), 0]), ValueError,
     r"transverse_field_ising: h\[1\] must be finite"),
    (lambda: L.transverse_field_ising(L.chain(3), J=1j), TypeError, r"transverse_field_ising: J must be real"),
    (lambda: L.transverse_field_ising(L.chain(3), J=True), TypeError, r"transverse_field_ising: J must be a real"),
    (lambda: L.transverse_field_ising(L.chain(3), J="1"), TypeError, r"transverse_field_ising: J must be a real"),
    (lambda: L.heisenberg(L.chain(3), J=(1.0, 1.0)), ValueError, r"heisenberg: J must be a number or a triple"),
    (lambda: L.heisenberg(L.chain(3), J=None), TypeError, r"heisenberg: J must be a number or a triple"),
    (lambda: L.heisenberg(L.chain(4), J=(1.0, [1.0, 2.0], 1.0)), ValueError,
     r"heisenberg: J\[1\] \(y\) has 2 values but the lattice has 3 edges"),
    (lambda: L.heisenberg(L.chain(3), h=float("nan")), ValueError, r"heisenberg: h must be finite"),
    (lambda: L.xy_model(L.chain(3), J=[1, 2, 3]), ValueError, r"xy_model: J has 3 values"),
    (lambda: L.fermi_hubbard(L.chain(2), mapping="qiskit"), ValueError,
     r"fermi_hubbard: mapping: unknown fermion-to-qubit mapping 'qiskit'"),
    (lambda: L.fermi_hubbard(L.chain(2), mapping=3), TypeError, r"fermi_hubbard: mapping"),
    (lambda: L.fermi_hubbard(L.chain(32), U=1), ValueError, r"fermi_hubbard: lattice has 32 sites"),
    (lambda: L.fermi_hubbard(L.chain(3), t=[1.0, 2.0, 3.0]), ValueError, r"fermi_hubbard: t has 3 values"),
    (lambda: L.fermi_hubbard(L.chain(3), U=float("-inf")), ValueError, r"fermi_hubbard: U must be finite"),
    (lambda: L.fermi_hubbard(L.chain(3), mu=[0, 0]), ValueError, r"fermi_hubbard: mu has 2 values"),
    (lambda: L.chain(3).neighbours(3), ValueError, r"Lattice.neighbours: site 3"),
    (lambda: L.Lattice(4, [(0, 1)], shape=(2, 3)), ValueError, r"Lattice: shape \(2, 3\) does not hold n_sites=4"),
]


@pytest.mark.parametrize("call,exc,match", BAD, ids=[m for _, _, m in BAD])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
