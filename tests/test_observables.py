"""Pauli strings, Hamiltonians, expectations and H·ψ against dense NumPy Kronecker products.

The reference matrices are built here from the textbook 2×2 Paulis with ``np.kron`` (wire 0 is
the leftmost factor = the most significant bit); nothing of the library is used to build them.
"""
import itertools

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import torchquantum_layers as tql
from torchquantum_layers import observables as obsmod
from torchquantum_layers.observables import (Hamiltonian, PauliString, apply_hamiltonian, commutator,
                                             expectation, qwc_groups)

from .conftest import ATOL, REAL

# ------------------------------------------------------------------------------------------------
# oracle
PAULI = {
    "I": np.eye(2, dtype=np.complex128),
    "X": np.array([[0, 1], [1, 0]], dtype=np.complex128),
    "Y": np.array([[0, -1j], [1j, 0]], dtype=np.complex128),
    "Z": np.array([[1, 0], [0, -1]], dtype=np.complex128),
}


def dense_label(label: str) -> np.ndarray:
    m = np.eye(1, dtype=np.complex128)
    for ch in label:
        m = np.kron(m, PAULI[ch])
    return m


def dense_terms(terms, n) -> np.ndarray:
    """Σ c · ⊗ P for terms given as (coeff, label) with label of length n."""
    out = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, label in terms:
        assert len(label) == n
        out += c * dense_label(label)
    return out


def label_to_spec(label: str) -> str:
    """'XIZ' -> 'X0 Z2' (the factor form the library reads)."""
    return " ".join(f"{ch}{w}" for w, ch in enumerate(label) if ch != "I")


def random_state_np(n, batch, rng):
    v = rng.normal(size=(batch, 2 ** n)) + 1j * rng.normal(size=(batch, 2 ** n))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def to_t(a, dtype, device):
    return torch.tensor(a, dtype=dtype, device=device)


def _np(t):
    return t.detach().cpu().numpy()


def ref_expval(psi, m):
    return np.einsum("bi,ij,bj->b", psi.conj(), m, psi).real


HYP = settings(max_examples=12, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@st.composite
def hamiltonians(draw, max_wires=8, max_terms=10, complex_coeffs=False, letters="IXYZ"):
    n = draw(st.integers(1, max_wires))
    k = draw(st.integers(1, max_terms))
    labels = [draw(st.text(alphabet=letters, min_size=n, max_size=n)) for _ in range(k)]
    coeffs = [draw(st.floats(-2, 2, allow_nan=False)) for _ in range(k)]
    if complex_coeffs:
        coeffs = [c + 1j * draw(st.floats(-1, 1, allow_nan=False)) for c in coeffs]
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return n, list(zip(coeffs, labels)), seed


def build(terms, n=None):
    return Hamiltonian([(c, label_to_spec(label)) for c, label in terms], n_wires=n)


# ------------------------------------------------------------------------------------------------
# construction and parsing
def test_pauli_string_spec_forms():
    p = PauliString("X0 Z2 Y5")
    assert p.wires == (0, 2, 5)
    assert p.ops == {0: "X", 2: "Z", 5: "Y"}
    assert str(p) == "X0 Z2 Y5" and repr(p) == "PauliString('X0 Z2 Y5')"
    assert p.n_wires == 6 and p.weight == 3
    assert p.x_mask == 0b100001 and p.z_mask == 0b100100
    assert p.label() == "XIZIIY" and p.label(7) == "XIZIIYI"
    assert PauliString("Y5 X0 Z2") == p                     # order of factors does not matter
    assert PauliString("XIZIIY") == p                       # letters-only label
    assert PauliString({0: "X", 2: "Z", 5: "Y"}) == p
    assert PauliString([(0, "X"), (2, "Z"), (5, "Y")]) == p
    assert PauliString([("X", 0), ("Z", 2), ("Y", 5)]) == p
    assert PauliString("x0 z2 y5") == p
    assert PauliString("") == PauliString("I") == PauliString("I3") == PauliString()
    assert str(PauliString()) == "I" and PauliString().n_wires == 0
    assert PauliString("X0", n_wires=4).n_wires == 4
    assert hash(PauliString("X0 Z1")) == hash(PauliString("Z1 X0"))
    assert PauliString.from_masks(0b11, 0b10) == PauliString("X0 Y1")


def test_hamiltonian_from_string_and_terms():
    h = Hamiltonian.from_string("0.5*Z0 Z1 - 0.2*X0 + 1.1")
    assert len(h) == 3
    assert h.coeffs == [0.5, -0.2, 1.1]
    assert h.paulis == [PauliString("Z0 Z1"), PauliString("X0"), PauliString()]
    assert h.n_wires == 2 and h.constant == 1.1
    h2 = Hamiltonian([(0.5, "Z0 Z1"), (-0.2, "X0")]) + 1.1
    assert h == h2
    assert Hamiltonian([(0.5, "Z0 Z1")], n_wires=5).n_wires == 5
    assert Hamiltonian([("Z0 Z1", 0.5)]) == Hamiltonian([(0.5, "Z0 Z1")])   # either order
    # numbers: scientific notation, complex in parentheses, juxtaposition, several factors
    h3 = Hamiltonian.from_string("1e-3*Z0 + (0.5+1j) * X1 Y2 - 2 3 Z3 + -X0")
    assert h3.coeffs == [1e-3, 0.5 + 1j, -6.0, -1.0]
    assert h3.paulis[1] == PauliString("X1 Y2")
    assert Hamiltonian.from_string("2*XIZ") == Hamiltonian([(2, "X0 Z2")])
    assert Hamiltonian("X0 + Z1") == Hamiltonian.from_string("X0 + Z1")


def test_parenthesised_sums_multiply_as_operators():
    from . import oracle as O
    X, Y, Z, I = O.X, O.Y, O.Z, O.I2
    cases = {
        "0.5*(Z0 + X1)": 0.5 * (O.kron(Z, I) + O.kron(I, X)),
        "(Z0 + Z1) * (X0 - X1) + 1": (O.kron(Z, I) + O.kron(I, Z)) @ (O.kron(X, I) - O.kron(I, X)) + np.eye(4),
        "(X0 + Z0) * Z0": O.kron((X + Z) @ Z, I),
        "2*((Z0 + 1) (Z1 - 1)) - (0.5+1j) Y1": 2 * O.kron(Z + I, Z - I) - (0.5 + 1j) * O.kron(I, Y),
        "-(X0 @ Y0 - (Z1))": -(O.kron(X @ Y, I) - O.kron(I, Z)),
    }
    for text, want in cases.items():
        got = Hamiltonian.from_string(text, n_wires=2).to_dense(2, dtype=torch.complex128).numpy()
        np.testing.assert_allclose(got, want, atol=1e-12, err_msg=text)
    # str() reads back
    h = Hamiltonian.from_string("(Z0 + X1) * (Y2 - 0.25)")
    assert Hamiltonian.from_string(str(h)) == h


def test_from_pauli_dict_openfermion_keys():
    d = {((0, "X"), (1, "Z")): 0.5, (): -1.0, "Y2": 0.25, PauliString("Z3"): 2}
    h = Hamiltonian.from_pauli_dict(d)
    ref = Hamiltonian([(0.5, "X0 Z1"), (-1.0, ""), (0.25, "Y2"), (2, "Z3")])
    assert h == ref and len(h) == 4 and h.n_wires == 4
    assert Hamiltonian(d) == ref


def test_product_in_string_with_at():
    assert Hamiltonian.from_string("X0 @ Z0") == Hamiltonian([(-1j, "Y0")])
    assert Hamiltonian.from_string("2 * Y1 @ Y1") == Hamiltonian.from_string("2")
    assert Hamiltonian([(1.0, "Z0 @ X0 @ Z1")]) == Hamiltonian([(1j, "Y0 Z1")])
    assert PauliString.product_of("X0 @ Z0") == (-1j, PauliString("Y0"))


@given(hamiltonians(max_wires=4, complex_coeffs=True))
@HYP
def test_str_round_trip(case):
    n, terms, _ = case
    h = build(terms)
    back = Hamiltonian.from_string(str(h))
    assert back == h and len(back) == len(h)
    assert back.coeffs == h.coeffs


def test_repr_is_readable():
    h = Hamiltonian.from_string("0.5*Z0 Z1 - 0.2*X0 + 1.1")
    assert repr(h) == "Hamiltonian(0.5 * Z0 Z1 - 0.2 * X0 + 1.1, n_wires=2)"
    big = Hamiltonian([(1.0, f"Z{i}") for i in range(40)])
    assert "(40 terms)" in repr(big) and len(repr(big)) < 200
    assert str(Hamiltonian()) == "0"


# ------------------------------------------------------------------------------------------------
# bad input
@pytest.mark.parametrize("make,match", [
    (lambda: PauliString("Q3"), r"unknown Pauli factor 'Q3'"),
    (lambda: Hamiltonian.from_string("0.5*Q3 + Z0"), r"unknown Pauli factor 'Q3'"),
    (lambda: Hamiltonian([(1.0, "X0 Q1")]), r"unknown Pauli factor 'Q1'"),
    (lambda: PauliString("X0 Z0"), r"repeats wire 0"),
    (lambda: Hamiltonian.from_string("0.5*X1 Z1"), r"repeats wire 1"),
    (lambda: Hamiltonian([(1.0, "Y2 Y2")]), r"repeats wire 2"),
    (lambda: PauliString("X Z1"), r"'X' .* has no wire number"),
    (lambda: PauliString("XY3"), r"one letter then a wire number"),
    (lambda: PauliString({-1: "X"}), r"wire -1 is negative"),
    (lambda: PauliString({0: "W"}), r"unknown Pauli 'W'"),
    (lambda: PauliString("X0", n_wires=0), r"acts on wire 0 but n_wires=0"),
    (lambda: Hamiltonian([(1.0, "X3")], n_wires=2), r"X3 acts on wire 3 but n_wires=2"),
    (lambda: Hamiltonian.from_string("0.5*X0 +"), r"empty term"),
    (lambda: Hamiltonian.from_string("0.5 & X0"), r"unexpected '&'"),
    (lambda: Hamiltonian.from_string("(1+)*X0"), r"empty term in '\(1\+\)\*X0'"),
    (lambda: Hamiltonian.from_string("(X0 + Z1"), r"unclosed '\('"),
    (lambda: Hamiltonian.from_string("X0 + Z1)"), r"unmatched '\)'"),
    (lambda: Hamiltonian.from_string("0.5 * (Z0 + X1) *"), r"'\*' needs a factor on each side"),
    (lambda: Hamiltonian.from_string("X0 @ @ Z0"), r"'@' needs a factor on each side"),
    (lambda: Hamiltonian.from_string(""), r"empty expression"),
    (lambda: Hamiltonian([(float("nan"), "X0")]), r"not finite"),
    (lambda: Hamiltonian([(1.0, "X0")]) ** -1, r"non-negative int"),
])
def test_bad_construction_raises_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("make,match", [
    (lambda: Hamiltonian([(True, "X0")]), r"bool"),
    (lambda: Hamiltonian([("a", "X0")]), r"not a number"),
    (lambda: Hamiltonian([(1.0, "X0", 2)]), r"term 0 must be a \(coeff, pauli\) pair"),
    (lambda: Hamiltonian([(torch.tensor(1.0, requires_grad=True), "X0")]), r"requires grad"),
    (lambda: PauliString(3.5), r"cannot build a Pauli string"),
    (lambda: Hamiltonian.from_string(3), r"expected a str"),
])
def test_bad_construction_raises_type_error(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_bad_use_with_states():
    psi = tql.random_state(3, 2)
    with pytest.raises(ValueError, match=r"term 1 \(1.0 \* X5\) acts on wire 5 but the state has 3 qubits"):
        expectation(psi, Hamiltonian([(1.0, "Z0"), (1.0, "X5")]))
    with pytest.raises(ValueError, match=r"acts on wire 3 but the state has 3 qubits"):
        apply_hamiltonian(psi, PauliString("Y3"))
    with pytest.raises(ValueError, match=r"observable 1.*acts on wire 4"):
        expectation(psi, [PauliString("Z0"), PauliString("Z4")])
    with pytest.raises(ValueError, match=r"declared on 4 wires but the state has 3 qubits"):
        expectation(psi, Hamiltonian([(1.0, "Z0")], n_wires=4))
    with pytest.raises(ValueError, match=r"not Hermitian: term \(0.5j\) \* X0 .*apply_hamiltonian"):
        expectation(psi, Hamiltonian([(1.0, "Z0"), (0.5j, "X0")]))
    with pytest.raises(ValueError, match=r"not Hermitian"):
        expectation(psi, Hamiltonian([(1.0, "Z0"), (0.5j, "X0")]), shots=10)
    with pytest.raises(ValueError, match=r"shots must be a positive int, got 0"):
        expectation(psi, PauliString("Z0"), shots=0)
    with pytest.raises(ValueError, match=r"return_std=True needs shots"):
        expectation(psi, PauliString("Z0"), return_std=True)
    with pytest.raises(ValueError, match=r"list of observables is empty"):
        expectation(psi, [])
    with pytest.raises(ValueError, match=r"method must be"):
        expectation(psi, Hamiltonian.from_string("X0 + X1"), method="fast")
    with pytest.raises(ValueError, match=r"not a power of two"):
        expectation(torch.ones(2, 6, dtype=torch.complex64), PauliString("Z0"))
    with pytest.raises(TypeError, match=r"state must be a torch.Tensor"):
        expectation([1, 0], PauliString("Z0"))
    with pytest.raises(TypeError, match=r"observable must be"):
        expectation(psi, 3.0)
    with pytest.raises(ValueError, match=r"15 qubits need a 32768 x 32768 matrix.*force=True"):
        Hamiltonian([(1.0, "Z14")]).to_dense()


# ------------------------------------------------------------------------------------------------
# algebra
def test_single_qubit_multiplication_table():
    for a, b in itertools.product("IXYZ", repeat=2):
        pa, pb = PauliString({0: a}), PauliString({0: b})
        prod = pa @ pb
        np.testing.assert_allclose(_np(prod.to_dense(1)), PAULI[a] @ PAULI[b], atol=1e-15, err_msg=a + b)
        phase, q = pa.product(pb)
        np.testing.assert_allclose(phase * dense_label(q.label(1)), PAULI[a] @ PAULI[b], atol=1e-15)
        assert pa.commutes_with(pb) == np.allclose(PAULI[a] @ PAULI[b], PAULI[b] @ PAULI[a])
    assert (PauliString("X0") * PauliString("Y0")) == Hamiltonian([(1j, "Z0")])
    assert (PauliString("Y0") * PauliString("X0")) == Hamiltonian([(-1j, "Z0")])


@given(st.integers(1, 5).flatmap(lambda n: st.tuples(st.text("IXYZ", min_size=n, max_size=n),
                                                     st.text("IXYZ", min_size=n, max_size=n))))
@HYP
def test_string_products_and_commutation(labels):
    a, b = labels
    n = len(a)
    pa, pb = PauliString(a), PauliString(b)
    ma, mb = dense_label(a), dense_label(b)
    np.testing.assert_allclose(_np((pa @ pb).to_dense(n)), ma @ mb, atol=1e-14)
    assert pa.commutes_with(pb) == np.allclose(ma @ mb, mb @ ma)
    qwc = all(x == "I" or y == "I" or x == y for x, y in zip(a, b))
    assert pa.qubitwise_commutes(pb) == qwc


@given(hamiltonians(max_wires=4, max_terms=6, complex_coeffs=True), st.integers(0, 10 ** 6))
@HYP
def test_hamiltonian_algebra_against_dense(case, seed2):
    n, terms, seed = case
    rng = np.random.default_rng(seed2)
    terms2 = [(rng.normal() + 1j * rng.normal(), "".join(rng.choice(list("IXYZ"), n))) for _ in range(4)]
    h1, h2 = build(terms), build(terms2)
    m1, m2 = dense_terms(terms, n), dense_terms(terms2, n)
    d = lambda h: _np(h.to_dense(n))  # noqa: E731
    np.testing.assert_allclose(d(h1 + h2), m1 + m2, atol=1e-12)
    np.testing.assert_allclose(d(h1 - h2), m1 - m2, atol=1e-12)
    np.testing.assert_allclose(d(2.5 * h1), 2.5 * m1, atol=1e-12)
    np.testing.assert_allclose(d(h1 * (1 - 2j)), (1 - 2j) * m1, atol=1e-12)
    np.testing.assert_allclose(d(h1 / 4), m1 / 4, atol=1e-12)
    np.testing.assert_allclose(d(h1 @ h2), m1 @ m2, atol=1e-11)
    np.testing.assert_allclose(d(h1 * h2), m1 @ m2, atol=1e-11)
    np.testing.assert_allclose(d(h1 ** 2), m1 @ m1, atol=1e-11)
    np.testing.assert_allclose(d(commutator(h1, h2)), m1 @ m2 - m2 @ m1, atol=1e-11)
    np.testing.assert_allclose(d(h1.adjoint()), m1.conj().T, atol=1e-12)
    np.testing.assert_allclose(d(h1 + 0.75), m1 + 0.75 * np.eye(2 ** n), atol=1e-12)
    np.testing.assert_allclose(d(1 - h1), np.eye(2 ** n) - m1, atol=1e-12)
    assert h1.commutes_with(h2) == np.allclose(m1 @ m2, m2 @ m1, atol=1e-11)
    assert h1.is_hermitian == np.allclose(m1, m1.conj().T, atol=1e-12)
    assert (h1 + h2) == (h2 + h1)
    assert h1 @ (h2 + h1) == h1 @ h2 + h1 @ h1


def test_simplify_equality_len():
    h = Hamiltonian.from_string("X0 + 0.5*X0 - 1.5*X0 + Z1 + 0*Y2 + 0.1*Z1 Z0 + 0.2*Z0 Z1")
    assert len(h) == 7
    s = h.simplify()
    assert len(s) == 2
    assert s.coeffs == [1.0, pytest.approx(0.3)]
    assert s.paulis == [PauliString("Z1"), PauliString("Z0 Z1")]
    assert h == s and s == h
    assert h != s + 1e-3 * PauliString("X0")
    assert Hamiltonian.from_string("X0") == PauliString("X0") and PauliString("X0") == Hamiltonian("X0")
    assert (PauliString("X0") - PauliString("X0")).simplify().terms == ()
    assert Hamiltonian.from_string("(1+1e-15j)*X0").simplify().coeffs == [1.0]
    assert len(Hamiltonian()) == 0
    assert sum([PauliString("Z0"), PauliString("Z1")]) == Hamiltonian.from_string("Z0 + Z1")
    hx = Hamiltonian([(0.3j, "X0"), (1.0, "Z0")])
    assert not hx.is_hermitian and hx.adjoint() == Hamiltonian([(-0.3j, "X0"), (1.0, "Z0")])
    assert (hx + hx.adjoint()).is_hermitian
    assert PauliString("X0 Y1").commutes_with(PauliString("Y0 X1"))
    assert not PauliString("X0").commutes_with(Hamiltonian.from_string("Z0 + X0"))


def test_qwc_groups_partition():
    rng = np.random.default_rng(3)
    paulis = [PauliString("".join(rng.choice(list("IXYZ"), 5))) for _ in range(30)]
    groups = qwc_groups(paulis)
    assert sorted(i for g in groups for i in g) == list(range(30))
    for g in groups:
        for i, j in itertools.combinations(g, 2):
            assert paulis[i].qubitwise_commutes(paulis[j])


# ------------------------------------------------------------------------------------------------
# matrices
@given(hamiltonians(max_wires=6, complex_coeffs=True))
@HYP
def test_to_dense_and_to_sparse(case):
    n, terms, _ = case
    h = build(terms)
    ref = dense_terms(terms, n)
    np.testing.assert_allclose(_np(h.to_dense(n)), ref, atol=1e-12)
    np.testing.assert_allclose(_np(h.to_sparse(n).to_dense()), ref, atol=1e-12)
    assert h.to_dense(n, dtype=torch.complex64).dtype == torch.complex64
    # a larger n pads with identities on the extra (least significant) wires
    np.testing.assert_allclose(_np(h.to_dense(n + 1)), np.kron(ref, np.eye(2)), atol=1e-12)


def test_to_sparse_layout():
    s = Hamiltonian.from_string("X0 + Z0 Z1").to_sparse(2)
    assert s.layout == torch.sparse_csr and s.shape == (4, 4)
    assert s.values().numel() == 8        # one entry per row per X mask


# ------------------------------------------------------------------------------------------------
# fast kernels
@pytest.mark.parametrize("method", ["loop", "gather", "native", "auto"])
@given(case=hamiltonians())
@HYP
def test_expectation_matches_dense(case, method, dtype, device):
    if method == "native" and device != "cpu":
        method = "auto"          # the native kernel is CPU-only (its refusal is tested below)
    n, terms, seed = case
    rng = np.random.default_rng(seed)
    h = build(terms)
    m = dense_terms(terms, n)
    psi = random_state_np(n, 3, rng)
    state = to_t(psi, dtype, device)
    out = expectation(state, h, method=method)
    assert out.shape == (3,) and out.dtype == REAL[dtype] and out.device.type == device
    np.testing.assert_allclose(_np(out), ref_expval(psi, m), atol=20 * ATOL[dtype] * (1 + np.abs(m).sum(1).max()))


@pytest.mark.parametrize("method", ["loop", "gather"])
@given(case=hamiltonians(complex_coeffs=True))
@HYP
def test_apply_hamiltonian_matches_dense(case, method, dtype, device):
    n, terms, seed = case
    rng = np.random.default_rng(seed)
    h = build(terms)
    m = dense_terms(terms, n)
    psi = random_state_np(n, 2, rng)
    out = apply_hamiltonian(to_t(psi, dtype, device), h, method=method)
    assert out.shape == (2, 2 ** n) and out.dtype == dtype
    np.testing.assert_allclose(_np(out), psi @ m.T, atol=20 * ATOL[dtype] * (1 + np.abs(m).sum(1).max()))


@given(case=hamiltonians())
@HYP
def test_native_apply_hamiltonian_matches_dense(case, dtype):
    """Hermitian H on CPU: the native kernels (what auto picks there), values and H·g backward."""
    n, terms, seed = case
    rng = np.random.default_rng(seed)
    h = build(terms)
    m = dense_terms(terms, n)
    psi = random_state_np(n, 2, rng)
    state = to_t(psi, dtype, "cpu").requires_grad_()
    out = apply_hamiltonian(state, h, method="native")
    tol = 20 * ATOL[dtype] * (1 + np.abs(m).sum(1).max())
    np.testing.assert_allclose(_np(out), psi @ m.T, atol=tol)
    g = random_state_np(n, 2, rng)
    out.backward(to_t(g, dtype, "cpu"))
    np.testing.assert_allclose(_np(state.grad), g @ m.conj(), atol=tol)      # H† g, as rows


def test_native_apply_hamiltonian_gradcheck_and_refusals():
    torch.manual_seed(4)
    h = Hamiltonian.from_string("0.5*X0 Z1 - 0.3*Y0 Y2 + 0.8*Z1 + 0.2*X1 X3 - 0.4*X3 + 0.1*Y3 + 0.6")
    state = torch.randn(2, 16, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: apply_hamiltonian(s, h, method="native"), (state,))
    assert torch.autograd.gradgradcheck(lambda s: apply_hamiltonian(s, h, method="native"), (state,))
    with pytest.raises(ValueError, match=r"method='native' needs a Hermitian H"):
        apply_hamiltonian(state, Hamiltonian([(0.3j, "X0")]), method="native")


@pytest.mark.parametrize("kind", ["expval", "apply"])
@pytest.mark.parametrize("method", ["loop", "gather"])
def test_last_wire_and_pivot_layouts(kind, method, dtype, device, atol):
    """X masks on the first, the last and scattered wires, with Y's and Z strings around them."""
    n = 6
    terms = [(0.7, "XIIIII"), (-0.3, "IIIIIX"), (0.5, "YZZZZY"), (0.25, "XXIIXX"), (-1.1, "ZYIXIZ"),
             (0.9, "IIYIII"), (0.4, "XZIIIY"), (0.6, "ZZIIZZ"), (0.2, "IIIIII"), (-0.8, "YXYXYX")]
    h = build(terms)
    m = dense_terms(terms, n)
    psi = random_state_np(n, 4, np.random.default_rng(0))
    state = to_t(psi, dtype, device)
    if kind == "expval":
        out, ref = expectation(state, h, method=method), ref_expval(psi, m)
    else:
        out, ref = apply_hamiltonian(state, h, method=method), psi @ m.T
    np.testing.assert_allclose(_np(out), ref, atol=50 * atol)


@pytest.mark.parametrize("kind", ["expval", "apply"])
def test_tables_past_the_cache_cap_are_rebuilt(kind, dtype, device, atol):
    """cache_bytes=0: no table is cached, each is rebuilt per call, results unchanged."""
    terms = [(0.7, "XZIY"), (-0.3, "IXXI"), (0.5, "YYZZ"), (1.0, "ZIZI"), (0.3, "XIIX"), (0.2, "YIIY")]
    h = build(terms)
    m = dense_terms(terms, 4)
    psi = random_state_np(4, 3, np.random.default_rng(1))
    ref = ref_expval(psi, m)[:, None] if kind == "expval" else psi @ m.T
    plan = h.compile(4, dtype, device, kind=kind, cache_bytes=0)
    assert plan.cached_bytes == 0 and plan.n_cached == 0
    state = to_t(psi, dtype, device)
    for grad in (False, True):
        out = plan(state.clone().requires_grad_(grad), "loop")
        np.testing.assert_allclose(_np(out), ref, atol=50 * atol)
    # a cap of one table: one group cached, the others rebuilt
    one = (8 if kind == "expval" else 16) * torch.empty((), dtype=dtype).element_size()
    part = h.compile(4, dtype, device, kind=kind, cache_bytes=one)
    np.testing.assert_allclose(_np(part(state, "loop")), ref, atol=50 * atol)
    assert part.n_cached == 1 < len(part.groups) and part.cached_bytes == one
    np.testing.assert_allclose(_np(part(state, "loop")), ref, atol=50 * atol)


@pytest.mark.parametrize("n", [8, 9])
def test_loop_layouts_batch_minor_rotation_and_flip(n, dtype, monkeypatch):
    """The no-grad loop paths in all their layouts: batch first or innermost (B >= 8), the wire
    order rotated by n/2 (forced here on small n), slices or one flip per group; expval and H·ψ."""
    monkeypatch.setattr(obsmod.layouts, "_ROTATE_MIN_WIRES", 8)
    monkeypatch.setattr(obsmod.layouts, "_ROTATION_COST", 0.0)
    rng = np.random.default_rng(n)
    terms = [(rng.normal(), "".join(rng.choice(list("IXYZ"), n))) for _ in range(16)]
    terms += [(0.3, "X" * n), (0.2, "I" * (n - 2) + "XY"), (-0.4, "Y" + "I" * (n - 2) + "X"),
              (0.5, "Z" * n), (0.1, "XZ" * (n // 2) + "X" * (n % 2))]
    extra = [(0.25j, "Y" + "I" * (n - 2) + "X"), (-0.5j, "IZ" + "I" * (n - 2))]
    h, h2, hc = build(terms), build(terms[:6]), build(terms + extra)
    m, m2, mc = dense_terms(terms, n), dense_terms(terms[:6], n), dense_terms(terms + extra, n)
    plan = h.compile(n, dtype, "cpu")
    assert len({g.rot for g in plan.groups}) >= 2
    assert any(len(g.layouts[g.rot].xprime_pos) > obsmod.layouts._MAX_SLICE_BITS for g in plan.groups)
    tol = 200 * ATOL[dtype]
    for B in (1, obsmod.layouts._BATCH_MINOR_MIN + 1):
        psi = random_state_np(n, B, rng)
        state = to_t(psi, dtype, "cpu")
        np.testing.assert_allclose(_np(expectation(state, h, method="loop")), ref_expval(psi, m), atol=tol)
        both = expectation(state, [h, h2], method="loop")
        np.testing.assert_allclose(_np(both), np.stack([ref_expval(psi, m), ref_expval(psi, m2)], 1), atol=tol)
        np.testing.assert_allclose(_np(apply_hamiltonian(state, hc, method="loop")), psi @ mc.T, atol=tol)


def test_list_of_observables(dtype, device, atol):
    n = 4
    rng = np.random.default_rng(5)
    psi = random_state_np(n, 5, rng)
    obs_terms = [[(1.0, "ZIII")], [(1.0, "IIIZ")], [(0.5, "XXII"), (-0.25, "IYYI"), (2.0, "IIII")],
                 [(0.3, "XZZX"), (0.3, "YZZY"), (1.2, "ZZII")]]
    obs = [PauliString("Z0"), "Z3", build(obs_terms[2]), build(obs_terms[3])]
    for method in ("loop", "gather", "auto") + (("native",) if device == "cpu" else ()):
        out = expectation(to_t(psi, dtype, device), obs, method=method)
        assert out.shape == (5, 4) and out.dtype == REAL[dtype]
        ref = np.stack([ref_expval(psi, dense_terms(t, n)) for t in obs_terms], axis=1)
        np.testing.assert_allclose(_np(out), ref, atol=20 * atol)


def test_all_z_hamiltonian_is_one_diagonal(dtype, device, atol):
    """A QAOA-style cost: no X mask, so the compiled form has no group, only the diagonal."""
    n = 6
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0), (0, 3)]
    h = Hamiltonian([(0.5, f"Z{a} Z{b}") for a, b in edges]) - 0.5 * len(edges)
    plan = h.compile(n, dtype, device)
    assert plan.groups == [] and plan.w0 is not None and h.num_x_masks == 1
    psi = random_state_np(n, 3, np.random.default_rng(2))
    out = expectation(to_t(psi, dtype, device), h)
    # brute force over bitstrings: the cost of each basis state, weighted by |ψ|²
    cost = np.array([sum(0.5 * (1 if ((i >> (n - 1 - a)) & 1) == ((i >> (n - 1 - b)) & 1) else -1) - 0.5
                         for a, b in edges) for i in range(2 ** n)])
    np.testing.assert_allclose(_np(out), (np.abs(psi) ** 2) @ cost, atol=20 * atol)


def test_unbatched_state_and_strings(dtype, device, atol):
    psi = random_state_np(3, 1, np.random.default_rng(4))
    v = to_t(psi[0], dtype, device)
    m = dense_terms([(1.0, "XZI"), (0.5, "IIY")], 3)
    out = expectation(v, "X0 Z1 + 0.5*Y2")
    assert out.shape == ()
    np.testing.assert_allclose(float(out), ref_expval(psi, m)[0], atol=20 * atol)
    hv = apply_hamiltonian(v, "X0 Z1 + 0.5*Y2")
    assert hv.shape == (8,)
    np.testing.assert_allclose(_np(hv), m @ psi[0], atol=20 * atol)
    assert expectation(v, [PauliString("Z0"), PauliString("Z1")]).shape == (2,)


def test_identity_and_empty(dtype, device):
    psi = tql.random_state(3, 2, dtype=dtype, device=device)
    np.testing.assert_allclose(_np(expectation(psi, Hamiltonian.from_string("2.5"))), [2.5, 2.5], rtol=1e-5)
    np.testing.assert_allclose(_np(expectation(psi, Hamiltonian())), [0, 0])
    np.testing.assert_allclose(_np(apply_hamiltonian(psi, Hamiltonian())), 0)


def test_superposition_of_hamiltonians(dtype, device, atol):
    """(H1 + H2)·ψ = H1·ψ + H2·ψ and the same for expectations."""
    rng = np.random.default_rng(11)
    n = 5
    t1 = [(rng.normal(), "".join(rng.choice(list("IXYZ"), n))) for _ in range(8)]
    t2 = [(rng.normal() + 0.5j, "".join(rng.choice(list("IXYZ"), n))) for _ in range(8)]
    h1, h2 = build(t1), build(t2)
    psi = tql.random_state(n, 3, dtype=dtype, device=device)
    lhs = apply_hamiltonian(psi, h1 + h2)
    rhs = apply_hamiltonian(psi, h1) + apply_hamiltonian(psi, h2)
    np.testing.assert_allclose(_np(lhs), _np(rhs), atol=50 * atol)
    h3 = h1 + h1.adjoint() * 0.5
    e = expectation(psi, h1 + h3)
    np.testing.assert_allclose(_np(e), _np(expectation(psi, h1) + expectation(psi, h3)), atol=50 * atol)


def test_compiled_form_is_cached():
    h = Hamiltonian.from_string("X0 X1 + Y0 Y1 + Z0 + Z1")
    a = h.compile(2, torch.complex64, "cpu")
    assert h.compile(2, torch.complex64, "cpu") is a
    assert h.compile(2, torch.complex128, "cpu") is not a
    assert len(a.groups) == 1          # XX and YY share the X mask
    assert h.num_x_masks == 2
    assert set(h.x_groups()) == {0, 0b11}


# ------------------------------------------------------------------------------------------------
# gradients
@pytest.mark.parametrize("method", ["loop", "gather", "native"])
def test_gradcheck_expectation(method):
    torch.manual_seed(0)
    h = Hamiltonian.from_string("0.5*X0 Z1 - 0.3*Y0 Y2 + 0.8*Z1 + 0.2*X1 X2 + 0.1*Y1 + 1.0")
    state = torch.randn(2, 8, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: expectation(s, h, method=method), (state,))
    assert torch.autograd.gradcheck(lambda s: expectation(s, [h, PauliString("X2")], method=method), (state,),
                                    fast_mode=True)


@pytest.mark.parametrize("method", ["loop", "gather"])
def test_gradcheck_apply_hamiltonian(method):
    torch.manual_seed(1)
    h = Hamiltonian([(0.5, "X0 Z1"), (0.3j, "Y0 Y2"), (0.8, "Z1"), (0.2, "X1 X2"), (-0.4, "X2")])
    state = torch.randn(2, 8, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: apply_hamiltonian(s, h, method=method), (state,), fast_mode=True)


@pytest.mark.parametrize("theta", [0.3, 1.2, -2.0])
def test_d_expval_z_after_ry(theta, dtype, device):
    th = torch.tensor(theta, dtype=REAL[dtype], device=device, requires_grad=True)
    psi = tql.functional.ry(tql.zero_state(2, dtype=dtype, device=device), th, wires=0)
    e = expectation(psi, PauliString("Z0"))
    e.sum().backward()
    assert abs(float(e.detach()) - np.cos(theta)) < 1e-5
    assert abs(float(th.grad) + np.sin(theta)) < 1e-5


def test_grad_of_loop_gather_and_native_agree():
    torch.manual_seed(2)
    h = Hamiltonian.from_string("0.5*X0 Y1 Z2 X3 - 0.3*Y0 Y3 + 0.8*Z1 Z2 + 0.2*X1 X2 + 0.1*Y2")
    s = torch.randn(3, 16, dtype=torch.complex128)
    grads = []
    for method in ("loop", "gather", "native"):
        x = s.clone().requires_grad_()
        expectation(x, h, method=method).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])
    torch.testing.assert_close(grads[0], grads[2])


def test_native_second_derivatives():
    """create_graph through the native expectation (its backward switches to autograd's loop)."""
    torch.manual_seed(3)
    h = Hamiltonian.from_string("0.5*X0 Z1 - 0.3*Y0 Y2 + 0.7*X2 + 0.2*X1 Y2 + 0.4*Z0")
    state = torch.randn(2, 8, dtype=torch.complex128, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda s: expectation(s, h, method="native"), (state,))
    assert torch.autograd.gradgradcheck(lambda s: expectation(s, [h, PauliString("Y1")], method="native"), (state,))


@pytest.mark.parametrize("n", [3, 6, 11])
def test_native_expectation_pair_and_full_groups_match_dense(n, dtype):
    """Every pivot position (full sums for the last bits, vector pair runs above), a complex D
    (odd number of Y), batch > 1, several observables; values and gradients against NumPy."""
    rng = np.random.default_rng(n)
    terms = []
    for w in range(n):
        terms += [(float(rng.normal()), f"X{w}"), (float(rng.normal()), f"Y{w} Z{(w + 1) % n}"),
                  (float(rng.normal()), f"X{w} X{(w + 2) % n} Z{(w + 1) % n}")]
    h = Hamiltonian(terms, n_wires=n)
    m = h.to_dense(n).numpy()
    psi = random_state_np(n, 3, rng)
    state = to_t(psi, dtype, "cpu").requires_grad_()
    out = expectation(state, [h, PauliString(f"Y{n - 1}")], method="native")
    ref = np.stack([ref_expval(psi, m), ref_expval(psi, PauliString(f"Y{n - 1}").to_dense(n).numpy())], 1)
    tol = 20 * ATOL[dtype] * (1 + np.abs(m).sum(1).max())
    np.testing.assert_allclose(_np(out), ref, atol=tol)
    out[:, 0].sum().backward()
    np.testing.assert_allclose(_np(state.grad), 2 * psi @ m.T, atol=tol)     # torch: 2 ∂E/∂ψ*


@pytest.mark.parametrize("batch", [1, 3])
def test_native_diagonal_over_many_chunks_matches_bitstrings(batch, dtype):
    """Z-string observables on 2^13 amplitudes (several of the kernel's chunks, split among the
    threads even for one sample): values and gradients against sums over bitstrings."""
    n = 13
    rng = np.random.default_rng(batch)
    obs = [Hamiltonian([(0.5, f"Z{w} Z{(w + 3) % n}") for w in range(n)]) + 0.25, PauliString("Z0 Z12"),
           Hamiltonian([(-1.5, "Z5"), (0.75, "Z1 Z2 Z3")])]
    bits = (np.arange(2 ** n)[:, None] >> (n - 1 - np.arange(n))) & 1
    z = 1 - 2 * bits                                          # the eigenvalue of Z_w on each basis state
    diag = np.stack([0.5 * sum(z[:, w] * z[:, (w + 3) % n] for w in range(n)) + 0.25, z[:, 0] * z[:, 12],
                     -1.5 * z[:, 5] + 0.75 * z[:, 1] * z[:, 2] * z[:, 3]], 1)
    psi = random_state_np(n, batch, rng)
    state = to_t(psi, dtype, "cpu").requires_grad_()
    out = expectation(state, obs, method="native")
    tol = 20 * ATOL[dtype] * np.abs(diag).max()
    np.testing.assert_allclose(_np(out), (np.abs(psi) ** 2) @ diag, atol=tol)
    weights = rng.normal(size=(batch, 3))
    (out * torch.as_tensor(weights, dtype=out.dtype)).sum().backward()
    np.testing.assert_allclose(_np(state.grad), 2 * psi * (weights @ diag.T), atol=tol)


@pytest.mark.parametrize("batch", [1, 3])
def test_single_wire_z_readout_by_bit_sums_matches_bitstrings(batch, dtype):
    """⟨Z_w⟩ on every wire plus a constant-and-single-Z sum, through the native bit sums (no
    (n_obs, 2^n) table built): values, gradients, H·ψ and a second derivative against sums over
    bitstrings, on 2^13 amplitudes (several chunks; the bits above and inside a chunk) and 2^3."""
    from torchquantum_layers.observables.evaluate import _multi_plan
    from torchquantum_layers.observables.hamiltonian import _as_observable
    for n in (3, 13):
        rng = np.random.default_rng(batch + n)
        obs = [PauliString(f"Z{w}") for w in range(n)] + [Hamiltonian.from_string("0.5*Z2 - 0.3 + 1.25*Z0")]
        z = 1 - 2 * ((np.arange(2 ** n)[:, None] >> (n - 1 - np.arange(n))) & 1)      # (2^n, n) eigenvalues
        diag = np.concatenate([z, (0.5 * z[:, 2] - 0.3 + 1.25 * z[:, 0])[:, None]], 1)
        psi = random_state_np(n, batch, rng)
        state = to_t(psi, dtype, "cpu").requires_grad_()
        out = expectation(state, obs, method="native")
        tol = 20 * ATOL[dtype] * 2
        np.testing.assert_allclose(_np(out), (np.abs(psi) ** 2) @ diag, atol=tol)
        plan = _multi_plan([_as_observable(o) for o in obs], n, dtype, state.device)     # the call's own
        assert plan.bit_coef is not None and plan._w0 is None and plan._d0 is None
        weights = rng.normal(size=(batch, n + 1))
        (out * torch.as_tensor(weights, dtype=out.dtype)).sum().backward()
        np.testing.assert_allclose(_np(state.grad), 2 * psi * (weights @ diag.T), atol=tol)
        assert plan._w0 is None                                  # the backward kernel needs none either
        h = obs[-1]
        hpsi = apply_hamiltonian(to_t(psi, dtype, "cpu"), h, method="native")
        np.testing.assert_allclose(_np(hpsi), psi * diag[:, -1], atol=tol)
    if dtype == torch.complex128:
        s = to_t(random_state_np(3, batch, np.random.default_rng(0)), dtype, "cpu").requires_grad_()
        assert torch.autograd.gradgradcheck(lambda v: expectation(v, obs[:3] + obs[-1:], method="native"), (s,))


def test_native_method_refused_with_reason(monkeypatch):
    from torchquantum_layers.kernels import native
    monkeypatch.setattr(native, "_state", {"lib": None, "tried": True, "reason": "unavailable: test"})
    h = Hamiltonian.from_string("X0 X1 + Z0")
    psi = tql.random_state(2, 1)
    with pytest.raises(ValueError, match=r"method='native'.*unavailable: test"):
        expectation(psi, h, method="native")
    np.testing.assert_allclose(_np(expectation(psi, h)), _np(expectation(psi, h, method="loop")), atol=1e-6)


# ------------------------------------------------------------------------------------------------
# shots
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shot_estimates_within_four_standard_errors(seed, dtype, device):
    rng = np.random.default_rng(seed)
    n = 4
    terms = [(rng.normal(), "".join(rng.choice(list("IXYZ"), n))) for _ in range(8)] + [(0.7, "IIII")]
    h = build(terms)
    psi = random_state_np(n, 3, rng)
    gen = torch.Generator(device=device).manual_seed(seed)
    mean, std = expectation(to_t(psi, dtype, device), h, shots=4000, generator=gen, return_std=True)
    assert mean.shape == (3,) and std.shape == (3,) and mean.dtype == REAL[dtype]
    assert not mean.requires_grad
    exact = ref_expval(psi, dense_terms(terms, n))
    assert np.all(_np(std) > 0)
    assert np.all(np.abs(_np(mean) - exact) <= 4 * _np(std) + 1e-6), (_np(mean), exact, _np(std))


def test_shot_estimates_for_a_list_and_rotated_bases(device):
    n = 3
    psi = random_state_np(n, 2, np.random.default_rng(9))
    obs_terms = [[(1.0, "XII")], [(1.0, "IYI")], [(0.5, "XYZ"), (-0.7, "YYI"), (0.3, "IIX")]]
    obs = [build(t) for t in obs_terms]
    gen = torch.Generator(device=device).manual_seed(3)
    mean, std = expectation(to_t(psi, torch.complex128, device), obs, shots=20000, generator=gen,
                            return_std=True)
    assert mean.shape == (2, 3)
    exact = np.stack([ref_expval(psi, dense_terms(t, n)) for t in obs_terms], axis=1)
    assert np.all(np.abs(_np(mean) - exact) <= 4 * _np(std))
    # deterministic given the generator
    again = expectation(to_t(psi, torch.complex128, device), obs, shots=20000,
                        generator=torch.Generator(device=device).manual_seed(3))
    np.testing.assert_allclose(_np(again), _np(mean))


def test_shots_on_an_eigenstate_are_exact():
    psi = tql.basis_state("010", batch=2)
    mean, std = expectation(psi, Hamiltonian.from_string("Z0 - 2*Z1 + 0.5*Z0 Z1 Z2 + 3"), shots=50,
                            generator=torch.Generator().manual_seed(0), return_std=True)
    np.testing.assert_allclose(_np(mean), [1 + 2 - 0.5 + 3] * 2, rtol=1e-6)
    np.testing.assert_allclose(_np(std), 0, atol=1e-7)


def test_shots_mean_is_unbiased():
    """The mean of many independent 3-shot estimates (one per batch row) is the exact value."""
    psi = tql.functional.ry(tql.zero_state(1, dtype=torch.complex128), 1.0, wires=0)
    h = Hamiltonian.from_string("X0 + 0.5*Z0")
    exact = float(expectation(psi, h)[0])
    est = expectation(psi.expand(4000, -1), h, shots=3, generator=torch.Generator().manual_seed(5))
    assert est.shape == (4000,) and float(est.std()) > 0.1        # rows are sampled independently
    assert abs(float(est.mean()) - exact) < 4 * float(est.std()) / np.sqrt(4000)


def test_module_cap_constant_is_documented():
    assert obsmod.TABLE_CACHE_BYTES == 512 * 2 ** 20
    assert "TABLE_CACHE_BYTES" in obsmod.__doc__ and "512 MiB" in obsmod.__doc__


def test_diagonal_table_of_all_z_observables_matches_dense():
    from torchquantum_layers.observables import diagonal_table
    n = 4
    obs = [PauliString("Z0"), Hamiltonian.from_string("0.5*Z0 Z3 - 1.25*Z2 + 0.75"),
           Hamiltonian([(2.0, "Z1 Z2 Z3"), (-0.5, "Z1 Z2 Z3")])]
    for dtype in (torch.complex64, torch.complex128):
        table = diagonal_table(obs, n, dtype, "cpu")
        for row, o in zip(table, obs):
            dense = np.asarray(o.to_dense(n)) if hasattr(o, "to_dense") else None
            np.testing.assert_allclose(row.numpy(), np.real(np.diag(dense)), atol=1e-6)
    assert diagonal_table([PauliString("Z0"), PauliString("X1")], n, torch.complex64, "cpu") is None


@pytest.mark.parametrize("scale", [1e-9, 1.0, 1e3, 1e8])
def test_commutation_is_judged_relative_to_the_coefficients(scale):
    """[H, H²] = 0 and [H, 3H + 2] = 0 whatever the scale of H, and [aX, aZ] = −2a²iY ≠ 0 even for a
    tiny a (dense NumPy check of both). An absolute 1e-12 cut used to call H and H² non-commuting at
    scale 1e3 (rounding left 7 terms of ~5e-7 in the commutator) and aX, aZ commuting at a = 1e-9."""
    rng = np.random.default_rng(11)
    n = 4
    terms = [(scale * rng.normal(), "".join(rng.choice(list("IXYZ"), n))) for _ in range(10)]
    h = build(terms)
    m = dense_terms(terms, n)
    h2 = h @ h
    assert np.allclose(m @ (m @ m), (m @ m) @ m, rtol=0, atol=1e-12 * np.abs(m).max() ** 3 * 2 ** n)
    assert h.commutes_with(h2) and len(h.commutator(h2)) == 0
    assert h.commutes_with(3 * h + 2) and len(commutator(h, 3 * h + 2)) == 0
    x, z = Hamiltonian([(scale, "X0")]), Hamiltonian([(scale, "Z0")])
    want = dense_terms([(scale, "X")], 1) @ dense_terms([(scale, "Z")], 1) \
        - dense_terms([(scale, "Z")], 1) @ dense_terms([(scale, "X")], 1)
    assert not x.commutes_with(z) and not PauliString("X0").commutes_with(z)
    np.testing.assert_allclose(_np(x.commutator(z).to_dense(1)), want, rtol=1e-12, atol=0)


def test_hermiticity_is_judged_relative_to_the_coefficients():
    # all coefficients tiny: an imaginary part as large as them is not rounding (a floor of 1 called it real)
    assert not Hamiltonian([(1e-20j, "Z0"), (1e-20, "X1")]).is_hermitian
    assert Hamiltonian([(1e-20 + 1e-34j, "Z0")]).is_hermitian
    assert Hamiltonian([(1.0, "Z0"), (1e-14j, "X1")]).is_hermitian
    assert not Hamiltonian([(1.0, "Z0"), (1e-9j, "X1")]).is_hermitian
    assert Hamiltonian([]).is_hermitian


def test_hamiltonian_from_a_dense_matrix_round_trips():
    from . import oracle
    rng = np.random.default_rng(3)
    labels = ["XIZ", "YYI", "IZX", "ZZZ", "III"]
    coeffs = rng.normal(size=5) + 1j * rng.normal(size=5)
    dense = sum(c * oracle.pauli_matrix(lab) for c, lab in zip(coeffs, labels))
    H = tql.Hamiltonian.from_matrix(dense)
    np.testing.assert_allclose(H.to_dense().numpy(), dense, atol=1e-12)
    assert len(H.terms) == 5
    got = {p.label(3): complex(c) for c, p in H.terms}
    for c, lab in zip(coeffs, labels):
        assert got[lab] == pytest.approx(c, abs=1e-12)
    with pytest.raises(ValueError, match="not a power of two"):
        tql.Hamiltonian.from_matrix(np.eye(6))
