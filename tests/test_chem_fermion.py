"""Fermion-to-qubit maps against dense fermionic matrices built here, independently of the library.

Oracle: the occupation-number basis of n modes with mode j on wire j (wire 0 = most significant
bit), ``a†_p |n⟩ = (1 − n_p) (−1)^{Σ_{k<p} n_k} |n + e_p⟩``, and Pauli strings as NumPy Kronecker
products. Under Jordan–Wigner the qubit matrix must equal the fermionic one entry by entry; parity
and Bravyi–Kitaev must equal it after the basis relabelling |n⟩ → |A n⟩ with A written out by
hand, and have the same spectrum.
"""
import itertools

import numpy as np
import pytest

from torchquantum_layers.chem import fermion as F
from torchquantum_layers.chem import hamiltonian as CH
from torchquantum_layers.chem.fermion import FermionOperator

from . import oracle as O

MAPPINGS = ["jordan_wigner", "parity", "bravyi_kitaev"]


# ------------------------------------------------------------------------------------------------
# independent oracles
def creation_dense(p, n):
    d = 2 ** n
    m = np.zeros((d, d))
    for i in range(d):
        occ = [(i >> (n - 1 - k)) & 1 for k in range(n)]
        if occ[p]:
            continue
        j = i | (1 << (n - 1 - p))
        m[j, i] = (-1) ** sum(occ[:p])
    return m


def fermion_dense(op: FermionOperator, n):
    d = 2 ** n
    out = np.zeros((d, d), dtype=np.complex128)
    cre = [creation_dense(p, n) for p in range(n)]
    for term, c in op.terms.items():
        m = np.eye(d, dtype=np.complex128)
        for p, a in term:
            m = m @ (cre[p] if a else cre[p].T)
        out += c * m
    return out


def pauli_dense(H, n):
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        letters = []
        for w in range(n):
            bits = ((p.x_mask >> w) & 1, (p.z_mask >> w) & 1)
            letters.append({(0, 0): "I", (1, 0): "X", (0, 1): "Z", (1, 1): "Y"}[bits])
        out += c * O.kron(*[O.PAULI[ch] for ch in letters])
    return out


# encodings written out by hand (rows: qubits, columns: modes)
HAND_A = {
    ("parity", 4): [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]],
    # Seeley, Richard & Love (2012), β_4
    ("bravyi_kitaev", 4): [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 1]],
    ("bravyi_kitaev", 5): [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [1, 1, 1, 1, 0], [0, 0, 0, 0, 1]],
}


def relabel(a, n):
    """Permutation matrix |n⟩ → |A n mod 2⟩ on basis indices (wire 0 = MSB)."""
    a = np.array(a)
    d = 2 ** n
    P = np.zeros((d, d))
    for i in range(d):
        occ = np.array([(i >> (n - 1 - k)) & 1 for k in range(n)])
        q = a @ occ % 2
        j = int("".join(map(str, q)), 2)
        P[j, i] = 1
    return P


def random_hermitian_fermion(n, rng, two_body=True):
    op = FermionOperator()
    for p, q in itertools.product(range(n), repeat=2):
        c = complex(rng.normal(), rng.normal()) if p != q else rng.normal()
        op += FermionOperator(((p, 1), (q, 0)), c)
    if two_body:
        for _ in range(12):
            p, q, r, s = rng.integers(0, n, 4)
            op += FermionOperator(((p, 1), (q, 1), (r, 0), (s, 0)), complex(rng.normal(), rng.normal()))
    return op + op.dagger()


def random_integrals(m, rng):
    """Real spatial integrals with the 8-fold symmetry of real orbitals."""
    h = rng.normal(size=(m, m))
    h = h + h.T
    g = rng.normal(size=(m, m, m, m))
    sym = [g, g.transpose(1, 0, 2, 3), g.transpose(0, 1, 3, 2), g.transpose(1, 0, 3, 2),
           g.transpose(2, 3, 0, 1), g.transpose(3, 2, 0, 1), g.transpose(2, 3, 1, 0), g.transpose(3, 2, 1, 0)]
    return h, sum(sym) / 8


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 3, 4])
def test_jw_single_ladder_operators(n):
    for p in range(n):
        np.testing.assert_allclose(pauli_dense(F.jordan_wigner(FermionOperator(((p, 1),)), n), n),
                                   creation_dense(p, n), atol=1e-15)
        np.testing.assert_allclose(pauli_dense(F.jordan_wigner(FermionOperator(f"{p}"), n), n),
                                   creation_dense(p, n).T, atol=1e-15)


def test_jw_hopping_all_pairs():
    n = 4
    for p, q in itertools.product(range(n), repeat=2):
        H = F.jordan_wigner(FermionOperator(f"{p}^ {q}"), n)
        np.testing.assert_allclose(pauli_dense(H, n), creation_dense(p, n) @ creation_dense(q, n).T, atol=1e-15)


def test_jw_known_strings():
    # a†_0 = (X0 − i Y0)/2 ; a†_2 a_0 = ¼ (X0 Z1 X2 + i Y0 Z1 X2 − i X0 Z1 Y2 + Y0 Z1 Y2)
    got = {(p.x_mask, p.z_mask): c for c, p in F.jordan_wigner(FermionOperator("0^")).terms}
    assert got == {(1, 0): 0.5, (1, 1): -0.5j}
    got = {str(p): c for c, p in F.jordan_wigner(FermionOperator("2^ 0")).terms}
    assert len(got) == 4
    H = F.jordan_wigner(FermionOperator("2^ 0"))
    ref = 0.25 * (O.kron(O.X, O.Z, O.X) + 1j * O.kron(O.Y, O.Z, O.X) - 1j * O.kron(O.X, O.Z, O.Y)
                  + O.kron(O.Y, O.Z, O.Y))
    np.testing.assert_allclose(pauli_dense(H, 3), ref, atol=1e-15)


def test_jw_two_body_products_exact():
    n = 4
    rng = np.random.default_rng(1)
    for _ in range(25):
        p, q, r, s = (int(v) for v in rng.integers(0, n, 4))
        acts = [int(v) for v in rng.integers(0, 2, 4)]
        op = FermionOperator(tuple(zip((p, q, r, s), acts)), 0.7 - 0.2j)
        np.testing.assert_allclose(pauli_dense(F.jordan_wigner(op, n), n), fermion_dense(op, n), atol=1e-14)


@pytest.mark.parametrize("mapping,n", sorted(HAND_A))
def test_encoding_matrices_match_hand_written(mapping, n):
    np.testing.assert_array_equal(F.encoding_matrix(mapping, n), np.array(HAND_A[(mapping, n)]))


@pytest.mark.parametrize("mapping,n", sorted(HAND_A))
def test_parity_bk_are_relabelled_fermion_matrices(mapping, n):
    rng = np.random.default_rng(2)
    op = random_hermitian_fermion(n, rng)
    P = relabel(HAND_A[(mapping, n)], n)
    np.testing.assert_allclose(pauli_dense(F.fermion_to_qubit(op, mapping, n), n),
                               P @ fermion_dense(op, n) @ P.T, atol=1e-12)


@pytest.mark.parametrize("mapping", MAPPINGS)
@pytest.mark.parametrize("n", [4, 5])
def test_mappings_same_spectrum(mapping, n):
    rng = np.random.default_rng(n)
    op = random_hermitian_fermion(n, rng)
    ref = np.linalg.eigvalsh(fermion_dense(op, n))
    got = np.linalg.eigvalsh(pauli_dense(F.fermion_to_qubit(op, mapping, n), n))
    np.testing.assert_allclose(got, ref, atol=1e-10)


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_anticommutation_relations(mapping):
    n = 5
    for p, q in itertools.product(range(n), repeat=2):
        a_p, ad_q = FermionOperator(f"{p}"), FermionOperator(f"{q}^")
        H = F.fermion_to_qubit(a_p * ad_q + ad_q * a_p, mapping, n)
        expected = [(1.0, 0, 0)] if p == q else []
        assert [(c, x.x_mask, x.z_mask) for c, x in H.terms] == expected
        H2 = F.fermion_to_qubit(a_p * FermionOperator(f"{q}") + FermionOperator(f"{q}") * a_p, mapping, n)
        assert len(H2) == 0


@pytest.mark.parametrize("mapping", MAPPINGS)
def test_number_operator(mapping):
    n = 6
    N = FermionOperator.number(n_modes=n)
    H = F.fermion_to_qubit(N, mapping, n)
    M = pauli_dense(H, n)
    assert np.allclose(M, np.diag(np.diag(M)))           # diagonal in every one of these encodings
    ev = np.sort(np.diag(M).real)
    ref = np.sort([bin(i).count("1") for i in range(2 ** n)])
    np.testing.assert_allclose(ev, ref, atol=1e-14)
    if mapping == "jordan_wigner":
        expect = {(0, 0): n / 2, **{(0, 1 << p): -0.5 for p in range(n)}}
        assert {(p.x_mask, p.z_mask): c for c, p in H.terms} == expect


def test_hf_state_in_each_encoding_is_a_number_eigenstate():
    n, occ = 6, [1, 1, 1, 0, 0, 0]
    for mapping in MAPPINGS:
        bits = F.occupation_to_qubits(occ, mapping)
        H = F.fermion_to_qubit(FermionOperator.number(n_modes=n), mapping, n)
        idx = int("".join(map(str, bits)), 2)
        assert pauli_dense(H, n)[idx, idx].real == pytest.approx(3)


def test_molecular_terms_against_dense_second_quantisation():
    """qubit_hamiltonian(h, (pq|rs)) equals Σ h a†a + ½ Σ (pq|rs) a†_pσ a†_rτ a_sτ a_qσ built densely."""
    rng = np.random.default_rng(3)
    m = 3
    h, g = random_integrals(m, rng)
    n = 2 * m
    cre = [creation_dense(p, n) for p in range(n)]
    ref = 0.3 * np.eye(2 ** n)
    for p, q in itertools.product(range(m), repeat=2):
        for s in (0, 1):
            ref = ref + h[p, q] * cre[2 * p + s] @ cre[2 * q + s].T
    for p, q, r, t in itertools.product(range(m), repeat=4):
        for s, u in itertools.product((0, 1), repeat=2):
            ref = ref + 0.5 * g[p, q, r, t] * (cre[2 * p + s] @ cre[2 * r + u] @ cre[2 * t + u].T @ cre[2 * q + s].T)
    H = CH.qubit_hamiltonian(h, g, 0.3)
    assert all(isinstance(c, float) for c in H.coeffs)
    np.testing.assert_allclose(pauli_dense(H, n), ref, atol=1e-12)
    # the FermionOperator route gives the same Pauli sum
    H2 = F.jordan_wigner(CH.fermionic_hamiltonian(h, g, 0.3), n)
    np.testing.assert_allclose(pauli_dense(H2, n), ref, atol=1e-12)


def test_two_qubit_reduction_spectrum():
    """Parity with block spin order: qubits m−1 and 2m−1 hold the parities of N_α and N; tapering them
    keeps exactly the JW levels of the matching parity sectors."""
    rng = np.random.default_rng(4)
    m = 3
    h, g = random_integrals(m, rng)
    n = 2 * m
    Hjw = pauli_dense(CH.qubit_hamiltonian(h, g), n)
    Hp = CH.qubit_hamiltonian(h, g, mapping="parity", spin_order="block")
    for pa, pn in itertools.product((0, 1), repeat=2):
        red = F.taper(Hp, [m - 1, n - 1], [pa, pn])
        assert red.n_wires == n - 2
        got = np.linalg.eigvalsh(pauli_dense(red, n - 2))
        sel = []
        for i in range(2 ** n):
            occ = [(i >> (n - 1 - k)) & 1 for k in range(n)]
            na, nb = sum(occ[0::2]), sum(occ[1::2])
            if na % 2 == pa and (na + nb) % 2 == pn:
                sel.append(i)
        ref = np.linalg.eigvalsh(Hjw[np.ix_(sel, sel)])
        np.testing.assert_allclose(got, ref, atol=1e-10)


def test_taper_refuses_non_symmetry():
    H = F.jordan_wigner(FermionOperator("0^ 1") + FermionOperator("1^ 0"))
    with pytest.raises(ValueError, match="not a Z symmetry"):
        F.taper(H, [0], [0])


def test_taper_validates_qubits_and_values():
    """Out-of-range or repeated qubits and values other than 0/1 were silently ignored or applied twice."""
    H = F.jordan_wigner(FermionOperator("0^ 0") + FermionOperator("1^ 1"), n_modes=3)
    # oracle: n_0 + n_1 with n_0 fixed to 1 (Z_0 = -1) is 1 + n_1 = 1.5 - 0.5 Z on the remaining qubit 0
    T = F.taper(H, [0], [1])
    np.testing.assert_allclose(pauli_dense(T, 2), np.diag([1.0, 1.0, 2.0, 2.0]), atol=1e-12)
    with pytest.raises(ValueError, match="qubit 7 is not a wire of the 3-qubit"):
        F.taper(H, [7], [0])
    with pytest.raises(ValueError, match="qubit -1 is not a wire"):
        F.taper(H, [-1], [0])
    with pytest.raises(ValueError, match="distinct"):
        F.taper(H, [0, 0], [1, 1])
    with pytest.raises(ValueError, match="value 2 must be 0"):
        F.taper(H, [0], [2])


# ------------------------------------------------------------------------------------------------
# FermionOperator algebra and errors
def test_fermion_operator_algebra():
    a = FermionOperator("3^ 1", 0.5)
    assert a.terms == {((3, 1), (1, 0)): 0.5}
    assert a == FermionOperator(((3, 1), (1, 0)), 0.5)
    assert a.dagger() == FermionOperator("1^ 3", 0.5)
    assert (FermionOperator("2^", 1j).dagger()).terms == {((2, 0),): -1j}
    assert (a - a).terms == {}
    assert (2 * a + 1).terms == {((3, 1), (1, 0)): 1.0, (): 1.0}
    assert (a * FermionOperator("0")).terms == {((3, 1), (1, 0), (0, 0)): 0.5}
    assert a.n_modes == 4 and FermionOperator.identity().n_modes == 0
    assert "3^ 1" in repr(a)


@pytest.mark.parametrize("bad,err", [("3^^ 1", ValueError), ("x", ValueError), (((1, 2),), ValueError),
                                     (((-1, 1),), ValueError), ((1,), TypeError), (3.5, TypeError)])
def test_fermion_operator_bad_terms(bad, err):
    with pytest.raises(err):
        FermionOperator(bad)


def test_fermion_to_qubit_errors():
    with pytest.raises(ValueError, match="unknown fermion-to-qubit mapping"):
        F.fermion_to_qubit(FermionOperator("0^"), "ternary")
    with pytest.raises(ValueError, match="n_modes"):
        F.jordan_wigner(FermionOperator("3^"), n_modes=2)
    with pytest.raises(TypeError):
        F.jordan_wigner("0^ 1")
    for bad in (3.5, "3"):                        # a float was truncated, a string failed inside a comparison
        with pytest.raises(TypeError, match="n_modes must be an int"):
            F.jordan_wigner(FermionOperator("0^ 1"), n_modes=bad)
    assert len(F.fermion_to_qubit(FermionOperator("0^ 1"), "jw")) == 4          # alias


def test_vectorised_map_scales():
    """A 20-mode two-body operator (≈ 40k products) maps in well under a second."""
    import time
    rng = np.random.default_rng(5)
    h, g = random_integrals(10, rng)
    t = time.perf_counter()
    H = CH.qubit_hamiltonian(h, g)
    assert time.perf_counter() - t < 5
    assert H.n_wires == 20 and H.is_hermitian


def test_negative_or_non_finite_tol_is_refused():
    """tol=-1 kept exactly-zero terms (a 0.0 * I in the result); nan/inf dropped everything or nothing."""
    op = FermionOperator("0^ 0") - FermionOperator("0^ 0")          # cancels: the zero operator
    assert len(F.fermion_to_qubit(op)) == 0
    for bad in (-1.0, -1e-15, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=rf"fermion_to_qubit: tol must be a finite number >= 0.*{bad}"):
            F.fermion_to_qubit(op, tol=bad)
        with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
            F.jordan_wigner(FermionOperator("0^ 1") + FermionOperator("1^ 0"), tol=bad)
        with pytest.raises(ValueError, match="qubit_hamiltonian: tol must be"):
            CH.qubit_hamiltonian(np.eye(2), np.zeros((2, 2, 2, 2)), tol=bad)
    for bad in ("1e-12", None, True):
        with pytest.raises(TypeError, match="fermion_to_qubit: tol must be a real number"):
            F.fermion_to_qubit(op, tol=bad)
    # tol=0 is allowed and keeps every non-zero term: n_0 = (I - Z_0)/2, dense oracle
    H = F.fermion_to_qubit(FermionOperator("0^ 0"), tol=0)
    np.testing.assert_allclose(pauli_dense(H, 1), fermion_dense(FermionOperator("0^ 0"), 1), atol=1e-15)
    assert sorted(abs(c) for c in H.coeffs) == [0.5, 0.5]
