"""Ground states and spectra against ``numpy.linalg.eigh`` of dense Kronecker-product matrices."""
import sys

import numpy as np
import pytest
import torch

from torchquantum_layers import exact
from torchquantum_layers.observables import Hamiltonian, PauliString

from .test_observables import build, dense_terms


def random_terms(n, k, rng, letters="IXYZ"):
    return [(rng.normal(), "".join(rng.choice(list(letters), n))) for _ in range(k)]


def check_eigenpairs(terms, n, e, v, k):
    m = dense_terms(terms, n)
    ref = np.linalg.eigvalsh(m)[:k]
    e, v = e.numpy(), v.numpy()
    assert e.shape == (k,) and v.shape == (k, 2 ** n)
    np.testing.assert_allclose(e, ref, atol=1e-8)
    # eigenvectors: normalised, orthogonal, and H v = e v (phases and degenerate mixes are free)
    np.testing.assert_allclose(v.conj() @ v.T, np.eye(k), atol=1e-7)
    np.testing.assert_allclose(v @ m.T, e[:, None] * v, atol=1e-6)


@pytest.mark.parametrize("method", ["auto", "dense", "eigsh", "lobpcg"])
@pytest.mark.parametrize("letters", ["IXZ", "IXYZ"], ids=["real", "complex"])
def test_ground_state_matches_numpy(method, letters):
    rng = np.random.default_rng(len(method) + len(letters))
    n = 4
    terms = random_terms(n, 10, rng, letters)
    for k in (1, 3):
        e, v = exact.ground_state(build(terms), k=k, method=method)
        assert e.dtype == torch.float64 and v.dtype == torch.complex128
        check_eigenpairs(terms, n, e, v, k)


def test_known_ground_energies():
    e, v = exact.ground_state(PauliString("X0"))
    np.testing.assert_allclose(e.numpy(), [-1.0])
    np.testing.assert_allclose(np.abs(v.numpy()[0]), [2 ** -0.5] * 2, atol=1e-12)
    # a Bell-state projector: -(XX + YY + ZZ)/... has the singlet on top; -(XX - YY + ZZ) the |Φ+⟩
    h = -Hamiltonian.from_string("X0 X1 - Y0 Y1 + Z0 Z1")
    e, v = exact.ground_state(h)
    np.testing.assert_allclose(e.numpy(), [-3.0], atol=1e-12)
    np.testing.assert_allclose(np.abs(v.numpy()[0]), [2 ** -0.5, 0, 0, 2 ** -0.5], atol=1e-12)
    # n_wires pads with idle wires: the ground level becomes degenerate
    e, v = exact.ground_state(PauliString("Z0"), k=2, n_wires=2)
    np.testing.assert_allclose(e.numpy(), [-1.0, -1.0])


def test_sparse_path_beyond_dense_limit(monkeypatch):
    """Past the dense limit "auto" goes iterative (limit lowered to 8 to keep the test fast): two
    decoupled blocks on 5 + 4 wires, whose ground energies add (numpy oracle)."""
    monkeypatch.setattr(exact, "DENSE_EIGH_MAX_WIRES", 8)
    calls = []
    real = exact._eigsh
    monkeypatch.setattr(exact, "_eigsh", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(7)
    # random couplings plus a field on every wire: a gapped ground state, so Lanczos converges fast
    ta = random_terms(5, 8, rng) + [(-1.5, "I" * w + "Z" + "I" * (4 - w)) for w in range(5)]
    tb = random_terms(4, 8, rng) + [(-1.5, "I" * w + "Z" + "I" * (3 - w)) for w in range(4)]
    h = build([(c, lab + "I" * 4) for c, lab in ta] + [(c, "I" * 5 + lab) for c, lab in tb])
    assert h.n_wires == 9
    e, v = exact.ground_state(h)
    assert calls
    ea = np.linalg.eigvalsh(dense_terms(ta, 5))[0]
    eb = np.linalg.eigvalsh(dense_terms(tb, 4))[0]
    np.testing.assert_allclose(e.numpy(), [ea + eb], atol=1e-8)
    assert exact._residual(h, e, v) < 1e-6


def test_lobpcg_fallback_without_scipy(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.sparse.linalg", None)     # import raises ImportError
    monkeypatch.setattr(exact, "DENSE_EIGH_MAX_WIRES", 3)
    calls = []
    real = exact._lobpcg
    monkeypatch.setattr(exact, "_lobpcg", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(3)
    terms = random_terms(4, 8, rng, "IXZ")
    e, v = exact.ground_state(build(terms), k=2)
    assert calls
    check_eigenpairs(terms, 4, e, v, 2)


def test_spectrum():
    rng = np.random.default_rng(1)
    terms = random_terms(4, 10, rng)
    np.testing.assert_allclose(exact.spectrum(build(terms)).numpy(),
                               np.linalg.eigvalsh(dense_terms(terms, 4)), atol=1e-10)


@pytest.mark.parametrize("call,match", [
    (lambda: exact.ground_state(Hamiltonian([(1.0, "Z0"), (0.5j, "X1")])), r"not Hermitian .*0.5j"),
    (lambda: exact.spectrum(Hamiltonian([(1j, "Z0")])), r"not Hermitian"),
    (lambda: exact.ground_state(PauliString("Z0"), k=3), r"k must be an int in \[1, 2\]"),
    (lambda: exact.ground_state(PauliString("Z0"), k=0), r"k must be"),
    (lambda: exact.ground_state(PauliString("Z0"), method="qr"), r"method must be"),
    (lambda: exact.ground_state(PauliString("Z3"), n_wires=2), r"Z3 acts on wire 3 but n_wires=2"),
    (lambda: exact.ground_state(PauliString("Z15"), method="dense"), r"16 qubits.*limit is 14"),
    (lambda: exact.spectrum(PauliString("Z15")), r"16 qubits need a 65536 x 65536 matrix"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_type():
    with pytest.raises(TypeError, match=r"expected a Hamiltonian or PauliString"):
        exact.ground_state(np.eye(2))


def test_eigsh_failure_falls_back_to_block_lanczos(monkeypatch):
    import scipy.sparse.linalg as sla

    def fail(*a, **k):
        raise sla.ArpackNoConvergence("no convergence", np.zeros(0), np.zeros((0, 0)))

    monkeypatch.setattr(sla, "eigsh", fail)
    rng = np.random.default_rng(5)
    terms = random_terms(5, 10, rng)
    e, v = exact.ground_state(build(terms), k=2, method="eigsh")
    check_eigenpairs(terms, 5, e, v, 2)
