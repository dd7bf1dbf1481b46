"""The gate table against the hand-written NumPy oracle (tests/oracle.py)."""
import dataclasses
import zlib

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import gates
from torchquantum_layers.checks import assert_all_gates_valid, assert_valid_gate, dense_operator
from torchquantum_layers.gates import check_unitary, controlled, get_gate

from . import oracle
from .conftest import ATOL

TABLE = [name for name, g in gates.GATES.items() if not g.takes_data]
VARIABLE = {"MULTIRZ": (1, 2, 3, 4), "MULTICONTROLLEDX": (2, 3, 4)}

EXCITATIONS = ("SINGLEEXCITATION", "DOUBLEEXCITATION")


def _cases():
    for name in TABLE:
        for k in VARIABLE.get(name, (None,)):
            yield pytest.param(name, k, id=name if k is None else f"{name}-{k}")


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def test_oracle_covers_the_table():
    assert set(TABLE) == set(oracle.SIGNATURES)
    for name in TABLE:
        g = gates.GATES[name]
        k, n_params = oracle.SIGNATURES[name]
        assert g.n_wires == k, name
        assert g.n_params == n_params, name


@pytest.mark.parametrize("name,k", list(_cases()))
def test_matrix_matches_oracle(name, k, dtype, device):
    g = gates.GATES[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for _ in range(3):
        params = oracle.random_params(g.n_params, rng)
        m = g.matrix(params, n_wires=k, dtype=dtype, device=device)
        assert m.dtype == dtype and m.device.type == device
        ref = oracle.gate_matrix(name, *params, n_wires=k)
        np.testing.assert_allclose(_np(m), ref, atol=ATOL[dtype], err_msg=name)


@pytest.mark.parametrize("name,k", [c for c in _cases() if gates.GATES[c.values[0]].n_params])
def test_batched_params_match_oracle(name, k, dtype):
    g = gates.GATES[name]
    rng = np.random.default_rng(7)
    B = 4
    params = oracle.random_params(g.n_params, rng, batch=B)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    m = g.matrix(tuple(torch.tensor(p, dtype=real) for p in params), n_wires=k, dtype=dtype)
    d = 2 ** oracle.gate_n_wires(name, k)
    assert m.shape == (B, d, d)
    ref = np.stack([oracle.gate_matrix(name, *[p[b] for p in params], n_wires=k) for b in range(B)])
    np.testing.assert_allclose(_np(m), ref, atol=ATOL[dtype])


@pytest.mark.parametrize("name", ["ROT", "U3", "CU3", "U2"])
def test_mixed_batched_and_scalar_params(name, dtype):
    """One parameter per sample, the others shared: they broadcast."""
    g = gates.GATES[name]
    rng = np.random.default_rng(3)
    B = 3
    batched = rng.uniform(-3, 3, B)
    scalars = oracle.random_params(g.n_params - 1, rng)
    params = (torch.tensor(batched),) + tuple(torch.tensor(s) for s in scalars)
    m = g.matrix(params, dtype=dtype)
    ref = np.stack([oracle.gate_matrix(name, batched[b], *scalars) for b in range(B)])
    np.testing.assert_allclose(_np(m), ref, atol=ATOL[dtype])


def test_known_values():
    c128 = torch.complex128
    np.testing.assert_allclose(_np(gates.RX.matrix((np.pi,), dtype=c128)), -1j * oracle.X, atol=1e-12)
    np.testing.assert_allclose(_np(gates.RY.matrix((np.pi,), dtype=c128)), -1j * oracle.Y, atol=1e-12)
    np.testing.assert_allclose(_np(gates.RZ.matrix((np.pi,), dtype=c128)), -1j * oracle.Z, atol=1e-12)
    sx = _np(gates.SX.matrix(dtype=c128))
    np.testing.assert_allclose(sx @ sx, oracle.X, atol=1e-12)
    np.testing.assert_allclose(_np(gates.S.matrix(dtype=c128)) @ _np(gates.SDG.matrix(dtype=c128)),
                               np.eye(2), atol=1e-12)
    t = _np(gates.T.matrix(dtype=c128))
    np.testing.assert_allclose(t @ t, _np(gates.S.matrix(dtype=c128)), atol=1e-12)
    # U3(θ, -π/2, π/2) = RX(θ); U2(0, π) = H; P(λ) = e^{iλ/2} RZ(λ)
    np.testing.assert_allclose(_np(gates.U3.matrix((0.3, -np.pi / 2, np.pi / 2), dtype=c128)),
                               oracle.rx(0.3), atol=1e-12)
    np.testing.assert_allclose(_np(gates.U2.matrix((0.0, np.pi), dtype=c128)), oracle.H, atol=1e-12)
    np.testing.assert_allclose(_np(gates.P.matrix((0.4,), dtype=c128)),
                               np.exp(0.2j) * oracle.rz(0.4), atol=1e-12)
    # ISWAP = RXX(-π/2) RYY(-π/2)
    np.testing.assert_allclose(_np(gates.ISWAP.matrix(dtype=c128)),
                               oracle.pauli_rotation(-np.pi / 2, "XX") @ oracle.pauli_rotation(-np.pi / 2, "YY"),
                               atol=1e-12)


def test_oracle_against_matrix_exponentials():
    """The oracle's rotations agree with scipy's expm of their generators."""
    from scipy.linalg import expm
    t = 0.917
    for name, label in [("RX", "X"), ("RY", "Y"), ("RZ", "Z"), ("RXX", "XX"), ("RYY", "YY"),
                        ("RZZ", "ZZ"), ("RZX", "ZX")]:
        np.testing.assert_allclose(oracle.gate_matrix(name, t), expm(-0.5j * t * oracle.pauli_matrix(label)),
                                   atol=1e-12, err_msg=name)
    # Givens [[c, -s], [s, c]] on |01>, |10> is exp(-iθG) with G = Y/2 on that subspace
    for name, d, a, b in [("SINGLEEXCITATION", 4, 1, 2), ("DOUBLEEXCITATION", 16, 3, 12)]:
        gen = np.zeros((d, d), complex)
        gen[a, b], gen[b, a] = -0.5j, 0.5j
        np.testing.assert_allclose(oracle.gate_matrix(name, t), expm(-1j * t * gen), atol=1e-12, err_msg=name)
    np.testing.assert_allclose(oracle.gate_matrix("MULTIRZ", t, n_wires=3),
                               expm(-0.5j * t * oracle.pauli_matrix("ZZZ")), atol=1e-12)
    np.testing.assert_allclose(oracle.gate_matrix("ROT", 0.1, 0.2, 0.3),
                               expm(-0.15j * oracle.Z) @ expm(-0.1j * oracle.Y) @ expm(-0.05j * oracle.Z),
                               atol=1e-12)


# ---------------------------------------------------------------------------------------------
# lookup
@pytest.mark.parametrize("alias,name", [("CX", "CNOT"), ("CCX", "TOFFOLI"), ("PHASE", "P"), ("U1", "P"),
                                        ("MCX", "MULTICONTROLLEDX"), ("ID", "I"), ("FREDKIN", "CSWAP"),
                                        ("CPHASE", "CP"), ("U", "U3"), ("cx", "CNOT"), ("rx", "RX"),
                                        ("single_excitation", "SINGLEEXCITATION"), ("Toffoli", "TOFFOLI")])
def test_aliases(alias, name):
    assert get_gate(alias) is gates.GATES[name]


@pytest.mark.parametrize("name", sorted(gates.WORD_NAMES))
def test_snake_case_builders_and_functional_gates_are_the_gates(name, dtype):
    """c.single_excitation(...) builds what c.singleexcitation(...) does, tql.functional's
    spellings apply the same gate (against the dense matrix), every spelling names its gate."""
    import torchquantum_layers as tql
    word, gate = gates.WORD_NAMES[name], gates.GATES[name]
    assert get_gate(word) is gate
    k = gate.n_wires or 3
    wires = tuple(range(k))
    rng = np.random.default_rng(1)
    if gate.takes_data:
        data = oracle.random_unitary(2 ** k, rng) if gate.kind != "diagonal" else oracle.random_phases(2 ** k, rng)
        extra, kw = (), {"matrix": torch.as_tensor(data, dtype=dtype)}
        dense = data if gate.kind != "diagonal" else np.diag(data)
    else:
        extra, kw = (0.3,) * gate.n_params, {}
        dense = gate.matrix(tuple(torch.tensor(0.3, dtype=torch.float64) for _ in extra), n_wires=k,
                            dtype=torch.complex128).numpy()
    a, b = tql.Circuit(k, dtype=dtype), tql.Circuit(k, dtype=dtype)
    args = (wires + extra) if gate.n_wires and not gate.takes_data else ((wires,) + extra)
    getattr(a, word)(*args, **kw)
    getattr(b, name.lower())(*args, **kw)
    assert [op.gate for op in a.ops] == [gate] == [op.gate for op in b.ops]
    state = torch.as_tensor(oracle.random_state(k, rng, batch=2), dtype=dtype)
    f_args = (state,) + extra
    f_kw = {"wires": wires, **({"matrix": kw["matrix"]} if kw else {})}
    got = getattr(tql.functional, word)(*f_args, **f_kw)
    np.testing.assert_allclose(got.numpy(), state.numpy() @ dense.T, atol=ATOL[dtype])


def test_get_gate_passes_gates_through():
    assert get_gate(gates.RX) is gates.RX


@pytest.mark.parametrize("bad", ["NOTAGATE", "rxx2", ""])
def test_get_gate_unknown(bad):
    with pytest.raises(ValueError, match=f"unknown gate '{bad}'"):
        get_gate(bad)


# ---------------------------------------------------------------------------------------------
# controlled()
def test_controlled_ry_two_controls(dtype):
    g = controlled(gates.RY, 2)
    assert g.n_wires == 3 and g.n_controls == 2 and g.n_params == 1 and g.name == "CCRY"
    m = g.matrix((0.71,), dtype=dtype)
    np.testing.assert_allclose(_np(m), oracle.controlled_matrix(oracle.ry(0.71), 2), atol=ATOL[dtype])
    assert g.frequencies() == (0.5, 1.0)
    assert_valid_gate(g, dtype=dtype)


def test_controlled_h_is_ch(dtype):
    g = controlled(gates.H, 1)
    np.testing.assert_allclose(_np(g.matrix(dtype=dtype)), oracle.gate_matrix("CH"), atol=ATOL[dtype])
    np.testing.assert_allclose(_np(g.matrix(dtype=dtype)), _np(gates.CH.matrix(dtype=dtype)), atol=0)


def test_controlled_cnot_is_toffoli(dtype):
    g = controlled(gates.CNOT, 1)
    assert g.n_wires == 3 and g.n_controls == 2 and g.kind == "permutation"
    np.testing.assert_allclose(_np(g.matrix(dtype=dtype)), oracle.gate_matrix("TOFFOLI"), atol=0)
    np.testing.assert_allclose(_np(g.matrix(dtype=dtype)), _np(gates.TOFFOLI.matrix(dtype=dtype)), atol=0)
    assert g.perm_fn(3) == gates.TOFFOLI.perm_fn(3)
    assert_valid_gate(g, dtype=dtype)


@pytest.mark.parametrize("base,n,kind", [("RZ", 1, "diagonal"), ("Z", 3, "diagonal"), ("SWAP", 1, "permutation"),
                                         ("X", 3, "permutation"), ("U3", 1, "controlled"),
                                         ("RXX", 1, "controlled"), ("ISWAP", 2, "controlled"),
                                         ("CRY", 1, "controlled")])
def test_controlled_matches_oracle(base, n, kind, dtype):
    bg = gates.GATES[base]
    g = controlled(bg, n)
    assert g.kind == kind
    rng = np.random.default_rng(11)
    params = oracle.random_params(bg.n_params, rng)
    ref = oracle.controlled_matrix(oracle.gate_matrix(base, *params), n)
    np.testing.assert_allclose(_np(g.matrix(params, dtype=dtype)), ref, atol=ATOL[dtype])
    assert_valid_gate(g, dtype=dtype)


def test_controlled_errors():
    with pytest.raises(TypeError, match="expected a Gate"):
        controlled("RX", 1)
    with pytest.raises(ValueError, match="n_controls"):
        controlled(gates.RX, 0)
    with pytest.raises(ValueError, match="MULTIRZ"):
        controlled(gates.MULTIRZ, 1)


# ---------------------------------------------------------------------------------------------
# check_unitary
def test_check_unitary_accepts_unitaries(dtype):
    rng = np.random.default_rng(5)
    check_unitary(torch.tensor(oracle.random_unitary(8, rng), dtype=dtype))
    check_unitary(torch.tensor(oracle.random_unitaries(3, 4, rng), dtype=dtype))
    check_unitary(torch.eye(2, dtype=torch.float64))


@pytest.mark.parametrize("bad,match", [
    (np.array([[1, 1], [0, 1]]), "not unitary"),
    (np.eye(2) * 1.001, "not unitary"),
    (np.full((2, 2), np.nan), "not unitary"),
    (np.eye(3), "power of two"),
    (np.ones((2, 4)), "square"),
    (np.ones(4), "square"),
])
def test_check_unitary_rejects(bad, match, dtype):
    with pytest.raises(ValueError, match=match):
        check_unitary(torch.tensor(bad, dtype=dtype))


@pytest.mark.parametrize("call, match", [
    (lambda F, psi: F.qubit_unitary(psi, wires=[0, 1], matrix=torch.eye(2)),
     r"QUBITUNITARY on wires \(0, 1\) needs a matrix of shape \(4, 4\) or \(B, 4, 4\), got \(2, 2\)"),
    (lambda F, psi: F.qubit_unitary(psi, wires=[0, 1], matrix=torch.eye(8)), r"got \(8, 8\)"),
    (lambda F, psi: F.qubit_unitary(psi, wires=[0], matrix=torch.eye(2).expand(3, 2, 2)),
     "3 matrices for a batch of 2"),
    (lambda F, psi: F.diagonal_unitary(psi, wires=[0], matrix=torch.tensor([2.0, 0.5])), "modulus 1"),
    (lambda F, psi: F.diagonal_unitary(psi, wires=[0], matrix=torch.ones(3)),
     r"DIAGONALUNITARY on wires \(0,\) needs a diagonal of shape \(2,\)"),
    (lambda F, psi: tql.mixed.apply_gate(tql.mixed.zero_density(3, batch=2, dtype=psi.dtype), "qubit_unitary",
                                         wires=[0, 1], matrix=torch.eye(2)), "needs a matrix of shape"),
])
def test_functional_data_gates_check_the_matrix_against_the_wires(call, match, dtype):
    """Before these checks a 2 x 2 matrix on two wires read past its end in the C kernels."""
    psi = tql.basis_state("011", batch=2, dtype=dtype)
    with pytest.raises(ValueError, match=match):
        call(tql.functional, psi)


def test_functional_qubit_unitary_per_sample(dtype):
    psi = tql.basis_state("011", batch=2, dtype=dtype)
    x = torch.tensor([[0, 1], [1, 0]], dtype=dtype)
    out = tql.functional.qubit_unitary(psi, wires=[2], matrix=torch.stack([torch.eye(2, dtype=dtype), x]))
    assert torch.equal(out.abs().argmax(-1), torch.tensor([0b011, 0b010]))


def test_check_unitary_names_what():
    with pytest.raises(ValueError, match="my_gate"):
        check_unitary(torch.ones(2, 2, dtype=torch.complex128), what="my_gate")


# ---------------------------------------------------------------------------------------------
# frequencies, spectra
def test_frequencies():
    assert gates.RX.frequencies() == (1.0,)
    assert gates.CRX.frequencies() == (0.5, 1.0)
    assert gates.P.frequencies() == (1.0,)
    assert gates.CP.frequencies() == (1.0,)
    assert gates.ROT.frequencies(1) == (1.0,)
    assert gates.MULTIRZ.frequencies() == (1.0,)


@pytest.mark.parametrize("name", EXCITATIONS)
def test_excitation_spectra_include_zero(name):
    """The Givens generator is zero outside its 2-d subspace: frequencies (0.5, 1.0), as in
    PennyLane (four-term shift rule)."""
    g = gates.GATES[name]
    assert g.frequencies() == (0.5, 1.0)


@pytest.mark.parametrize("name", EXCITATIONS)
def test_excitation_two_term_rule_is_wrong(name):
    """Why the spectrum matters: with frequency 1 alone, the two-term shift rule does not
    reproduce the derivative of an expectation for a generic state."""
    g = gates.GATES[name]
    d = 2 ** g.n_wires
    rng = np.random.default_rng(0)
    psi = oracle.random_state(g.n_wires, rng)
    a = rng.standard_normal((d, d)) + 1j * rng.standard_normal((d, d))
    obs = a + a.conj().T

    def f(t):
        u = oracle.gate_matrix(name, t)
        phi = u @ psi
        return float(np.real(phi.conj() @ obs @ phi))
    t, h = 0.3, 1e-6
    exact = (f(t + h) - f(t - h)) / (2 * h)
    two_term = (f(t + np.pi / 2) - f(t - np.pi / 2)) / 2
    assert abs(two_term - exact) > 1e-3


# ---------------------------------------------------------------------------------------------
# the library checker over the whole table
@pytest.mark.parametrize("name,k", list(_cases()))
def test_assert_valid_gate(name, k, dtype):
    checked = assert_valid_gate(name, n_wires=k, dtype=dtype, generator=torch.Generator().manual_seed(2))
    assert "apply" in checked and "unitarity" in checked


@pytest.mark.parametrize("k", [1, 2, 3])
def test_assert_valid_gate_data_gates(k, dtype):
    rng = np.random.default_rng(k)
    u = torch.tensor(oracle.random_unitary(2 ** k, rng), dtype=dtype)
    assert "apply" in assert_valid_gate(gates.QUBIT_UNITARY, dtype=dtype, data=u)
    np.testing.assert_allclose(_np(gates.QUBIT_UNITARY.matrix(n_wires=k, dtype=dtype, data=u)), _np(u))
    ph = torch.tensor(oracle.random_phases(2 ** k, rng), dtype=dtype)
    checked = assert_valid_gate(gates.DIAGONAL_UNITARY, dtype=dtype, data=ph)
    assert "diagonal" in checked and "apply" in checked
    np.testing.assert_allclose(_np(gates.DIAGONAL_UNITARY.matrix(n_wires=k, dtype=dtype, data=ph)),
                               np.diag(_np(ph)))


def test_assert_valid_gate_skips_data_gates_without_data():
    assert assert_valid_gate(gates.QUBIT_UNITARY) == ()
    assert assert_valid_gate(gates.DIAGONAL_UNITARY) == ()


def test_assert_all_gates_valid(monkeypatch):
    """The loop itself (every gate is covered by test_assert_valid_gate): on a few table entries."""
    names = ["RX", "CNOT", "MULTIRZ", "MULTICONTROLLEDX", "QUBITUNITARY", "DIAGONALUNITARY"]
    monkeypatch.setattr(gates, "GATES", {k: gates.GATES[k] for k in names})
    rng = np.random.default_rng(0)
    data = {"QUBITUNITARY": oracle.random_unitary(4, rng), "DIAGONALUNITARY": oracle.random_phases(8, rng)}
    assert assert_all_gates_valid(data=data) == names
    assert assert_all_gates_valid(dtype=torch.complex64) == names[:4]
    monkeypatch.setattr(gates, "GATES", {"S": dataclasses.replace(gates.S, self_inverse=True)})
    with pytest.raises(AssertionError, match="gate S: self_inverse"):
        assert_all_gates_valid()


# the checker must catch broken gates
def _broken():
    X2 = oracle.X / 2
    yield "generator", dataclasses.replace(gates.RX, generator_fn=lambda k: -X2)
    yield "generator", dataclasses.replace(gates.RY, generator_fn=lambda k: oracle.X / 2)
    yield "generator", dataclasses.replace(gates.RX, generator_fn=lambda k: np.array([[0, 1], [0, 0]]))
    yield "spectra", dataclasses.replace(gates.RX, spectra=((-1.0, 1.0),))
    yield "spectra", dataclasses.replace(gates.CRX, spectra=((-0.5, 0.5),))
    yield "spectra", dataclasses.replace(gates.SINGLE_EXCITATION, spectra=((-0.5, 0.5),))
    # gates with no generator: only the frequencies check sees their spectra
    yield "frequencies", dataclasses.replace(gates.CROT, spectra=(gates.HALF,) * 3)      # lost the 0
    yield "frequencies", dataclasses.replace(gates.ROT, spectra=((-1.0, 1.0),) * 3)
    yield "frequencies", dataclasses.replace(gates.U2, spectra=(gates.PHASE_SPEC, (-1.0, 0.0, 1.0)))
    yield "frequencies", dataclasses.replace(gates.CU3, spectra=(gates.HALF, gates.PHASE_SPEC, gates.PHASE_SPEC))
    yield "self_inverse", dataclasses.replace(gates.S, self_inverse=True)
    yield "diagonal", dataclasses.replace(gates.RZ, diag_fn=gates._phase_diag)
    yield "diagonal", dataclasses.replace(gates.RX, kind="diagonal", diag_fn=gates._rz_diag)
    yield "permutation", dataclasses.replace(gates.SWAP, perm_fn=lambda k: (0, 1, 2, 3))
    yield "permutation", dataclasses.replace(gates.X, perm_fn=lambda k: (0, 0))
    yield "controlled", dataclasses.replace(gates.CRX, target=gates.RY)
    yield "diagonal form", dataclasses.replace(gates.RYY, diagonal_form=(gates.RZZ, (gates.S, gates.H), (gates.SDG, gates.H)))
    yield "diagonal form", dataclasses.replace(gates.RZX, diagonal_form=(gates.RZZ, (gates.H,), ()))
    yield "diagonal form", dataclasses.replace(gates.RXX, diagonal_form=(gates.RX, (gates.H,), (gates.H,)))
    yield "unitarity", dataclasses.replace(gates.H, matrix_fn=lambda p, k, dt, data, dev:
                                           torch.ones(2, 2, dtype=dt, device=dev))
    yield "shape", dataclasses.replace(gates.RX, n_wires=2)
    yield "batched parameters", dataclasses.replace(
        gates.RX, matrix_fn=lambda p, k, dt, data, dev: gates._rx((p[0].reshape(-1)[:1].reshape(()),), k, dt, data, dev))

    def bad_apply(self, state, params, wires, n, data=None, adjoint=False):
        return gates.Gate.apply(self, state, params, wires, n, data=data, adjoint=False)
    cls = type("NoAdjointGate", (gates.Gate,), {"apply": bad_apply})
    yield "apply", cls(**{f.name: getattr(gates.RY, f.name) for f in dataclasses.fields(gates.Gate)})


@pytest.mark.parametrize("prop,gate", list(_broken()), ids=lambda v: v if isinstance(v, str) else "")
def test_assert_valid_gate_catches(prop, gate):
    with pytest.raises(AssertionError, match=f"gate {gate.name}: {prop}"):
        assert_valid_gate(gate)


def test_dense_operator_matches_oracle():
    rng = np.random.default_rng(9)
    u = oracle.random_unitary(8, rng)
    for wires in [(0, 1, 2), (3, 0, 2), (4, 1, 3)]:
        got = dense_operator(torch.tensor(u), wires, 5).numpy()
        np.testing.assert_allclose(got, oracle.full_operator(u, wires, 5), atol=1e-12)


@pytest.mark.parametrize("name,k", list(_cases()))
def test_frequencies_match_a_fourier_fit_of_the_oracle(name, k):
    """For every parameter j of every gate: f(t) = <psi| U(t)^dagger O U(t) |psi> (the other angles
    fixed, U from the NumPy oracle) is a trigonometric polynomial in exactly the frequencies the
    shift rules use: the fit with them is exact, and without any one of them it is not."""
    g = gates.GATES[name]
    kk = oracle.gate_n_wires(name, k)
    d = 2 ** kk
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    base = np.asarray(oracle.random_params(g.n_params, rng), dtype=float)
    ts = np.linspace(-7, 7, 61)
    for j in range(g.n_params):
        psi = oracle.random_state(kk, rng)
        a = rng.standard_normal((d, d)) + 1j * rng.standard_normal((d, d))
        obs = a + a.conj().T

        def f(t):
            p = base.copy()
            p[j] = t
            phi = oracle.gate_matrix(name, *p, n_wires=k) @ psi
            return float(np.real(phi.conj() @ obs @ phi))
        y = np.array([f(t) for t in ts])

        def residual(freqs):
            basis = np.column_stack([np.cos(w * ts) for w in freqs] + [np.sin(w * ts) for w in freqs if w > 0])
            return np.abs(basis @ np.linalg.lstsq(basis, y, rcond=None)[0] - y).max()
        freqs = (0.0,) + g.frequencies(j)
        assert residual(freqs) < 1e-8, (name, j, freqs)
        for w in freqs[1:]:
            assert residual([v for v in freqs if v != w]) > 1e-4, (name, j, w)


def test_frequencies_check_covers_gates_without_a_generator():
    for name in ("ROT", "U2", "U3", "CROT", "CU3"):
        assert gates.GATES[name].generator_fn is None
        assert "frequencies" in assert_valid_gate(name)


@pytest.mark.parametrize("angle,match", [("a", "angle 'a' is not a real number"), (None, "angle None is not a real"),
                                         (1j, r"angle 1j is not a real"), (True, "angle True is a bool"),
                                         (torch.tensor(True), r"angle tensor\(True\) is a bool")])
def test_functional_bad_angles_name_the_gate(angle, match):
    psi = tql.basis_state("00", batch=2)
    with pytest.raises(TypeError, match="RX: " + match):
        tql.functional.rx(psi, angle, wires=0)
    with pytest.raises(TypeError, match="CRZ: " + match):
        tql.functional.crz(psi, angle, wires=[0, 1])
