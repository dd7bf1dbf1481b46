"""Pauli rotations and Trotter–Suzuki evolution (torchquantum_layers/trotter.py).

Oracles: exp(−iθ/2 P) = cos(θ/2) I − i sin(θ/2) P with P a Kronecker product of Pauli matrices
(tests/oracle.py); exp(−iHt) by the eigendecomposition of the dense H built from the same
Kronecker products; the product formulas' known error orders (n_steps^−order); central finite
differences of the dense energy for the time's gradient.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers.engine import build_plan

from . import oracle
from .conftest import ATOL, REAL

N = 3
# (coefficient, label over the N wires): X, Y and Z factors, one, two and three wires
TERMS = [(0.5, "XXI"), (0.3, "IYY"), (0.7, "ZZZ"), (0.2, "IIX"), (-0.4, "YII"), (0.25, "XIY")]


def _hamiltonian(terms=TERMS):
    text = " + ".join(f"({c})*" + " ".join(f"{ch}{w}" for w, ch in enumerate(label) if ch != "I")
                      for c, label in terms)
    return tql.Hamiltonian.from_string(text)


def _dense(terms=TERMS):
    return sum(c * oracle.pauli_matrix(label) for c, label in terms)


def _exact(terms, t):
    e, v = np.linalg.eigh(_dense(terms))
    return (v @ np.diag(np.exp(-1j * e * t)) @ v.conj().T)[:, 0]


def _state(c, **kw):
    return c(**kw).detach().cpu().numpy().astype(np.complex128)


def test_one_first_order_step_is_the_product_of_the_term_exponentials(dtype, device):
    t = 0.9
    c = tql.templates.trotter(tql.Circuit(N, dtype=dtype), _hamiltonian(), time=t).to(device)
    u = np.eye(2 ** N, dtype=complex)
    for coeff, label in TERMS:
        u = oracle.pauli_rotation(2 * coeff * t, label) @ u
    np.testing.assert_allclose(_state(c)[0], u[:, 0], atol=ATOL[dtype])


@pytest.mark.parametrize("order,steps,t", [(1, (4, 8), 0.6), (2, (2, 4), 0.6), (4, (2, 4), 1.2)])
def test_the_error_falls_with_the_formula_order(order, steps, t, dtype):
    """error(2r) / error(r) ≈ 2^−order against the exact exp(−iHt)."""
    errors = []
    for r in steps:
        c = tql.templates.trotter(tql.Circuit(N, dtype=dtype), _hamiltonian(), time=t, n_steps=r, order=order)
        errors.append(np.abs(_state(c)[0] - _exact(TERMS, t)).max())
    assert errors[1] > 100 * torch.finfo(REAL[dtype]).eps        # well above the dtype's rounding
    assert errors[1] / errors[0] == pytest.approx(2.0 ** -order, rel=0.25)


def test_commuting_terms_evolve_exactly_in_one_step(dtype, atol):
    terms = [(0.8, "ZZI"), (-0.3, "IZZ"), (0.45, "ZIZ"), (1.1, "ZZZ"), (0.6, "IIZ")]
    h = _hamiltonian(terms)
    c = tql.Circuit(N, dtype=dtype)
    for w in range(N):
        c.h(w)
    tql.templates.trotter(c, h, time=1.3, order=2)
    e, v = np.linalg.eigh(_dense(terms))
    plus = np.full(2 ** N, 2 ** (-N / 2), dtype=complex)
    np.testing.assert_allclose(_state(c)[0], v @ (np.exp(-1.3j * e) * (v.conj().T @ plus)), atol=atol)


@pytest.mark.parametrize("label", ["X", "Y", "Z", "XY", "YZ", "ZX", "XYZ", "YYXZ", "XIYIZ"])
def test_a_pauli_rotation_is_the_analytic_exponential(label, dtype, device, atol):
    n = len(label)
    spec = " ".join(f"{ch}{w}" for w, ch in enumerate(label) if ch != "I")
    rng = np.random.default_rng(len(label))
    psi = oracle.random_state(n, rng, batch=2)
    c = tql.templates.pauli_rotation(tql.Circuit(n, dtype=dtype), spec, 0.8, scale=1.5).to(device)
    out = c(state=torch.as_tensor(psi, dtype=dtype, device=device)).detach().cpu().numpy()
    np.testing.assert_allclose(out, psi @ oracle.pauli_rotation(1.2, label).T, atol=atol)


def test_the_evolution_is_one_program():
    c = tql.templates.trotter(tql.Circuit(N), _hamiltonian(), time=0.5, n_steps=3, order=2)
    plan = build_plan(c, layout=True, zero_start=True, local_programs=True)
    assert [s.kind for s in plan.steps] == ["prefix", "program"]


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint"])
def test_a_trainable_time_takes_the_gradient_of_the_evolution(diff_method, dtype):
    """One parameter for the whole evolution; d⟨O⟩/dt against central differences of the dense
    product of the term exponentials (order 2, two steps: the same product, built here)."""
    t0, h = 0.7, 1e-5
    c = tql.templates.trotter(tql.Circuit(N, dtype=dtype), _hamiltonian(), time=t0, n_steps=2, order=2,
                              trainable=True)
    assert c.num_parameters == 1 and float(c.weights.detach()[0]) == pytest.approx(t0)
    obs = tql.Hamiltonian.from_string("Z0 Z1 + 0.5*X2")
    tql.expval(c, obs, diff_method=diff_method).sum().backward()
    dense_obs = oracle.pauli_matrix("ZZI") + 0.5 * oracle.pauli_matrix("IIX")

    def energy(t):
        u = np.eye(2 ** N, dtype=complex)
        half = [(coeff, label) for coeff, label in TERMS]
        for _ in range(2):
            for coeff, label in half + half[::-1]:
                u = oracle.pauli_rotation(coeff * t / 2, label) @ u      # 2 c (t / 2 steps / 2)
        psi = u[:, 0]
        return float((psi.conj() @ dense_obs @ psi).real)
    want = (energy(t0 + h) - energy(t0 - h)) / (2 * h)
    tol = 2e-4 if dtype == torch.complex64 else 1e-7
    assert float(c.weights.grad[0]) == pytest.approx(want, abs=tol)


def test_an_input_time_evolves_each_sample_by_its_own_time(dtype, device, atol):
    times = torch.tensor([[0.1, 0.0], [0.5, 0.0], [1.2, 0.0]], dtype=REAL[dtype], device=device)
    c = tql.templates.trotter(tql.Circuit(N, dtype=dtype), _hamiltonian(), n_steps=2, order=2, input=0).to(device)
    out = _state(c, x=times)
    for b, t in enumerate(times[:, 0].tolist()):
        fixed = tql.templates.trotter(tql.Circuit(N, dtype=dtype), _hamiltonian(), time=t, n_steps=2, order=2)
        np.testing.assert_allclose(out[b], _state(fixed)[0], atol=atol)


@pytest.mark.parametrize("order", [1, 2, 4, 6])
@pytest.mark.parametrize("n_steps", [1, 3])
def test_every_term_gets_the_whole_time_and_higher_orders_are_symmetric(order, n_steps):
    seq = tql.templates.product_formula(4, order, n_steps)
    totals = np.zeros(4)
    for j, f in seq:
        totals[j] += f
    np.testing.assert_allclose(totals, 1.0, atol=1e-12)
    assert all(a[0] != b[0] for a, b in zip(seq, seq[1:]))          # neighbours merged
    if order > 1:
        assert [j for j, _ in seq] == [j for j, _ in seq[::-1]]
        np.testing.assert_allclose([f for _, f in seq], [f for _, f in seq[::-1]], atol=1e-12)


@pytest.mark.parametrize("call,error,match", [
    (lambda c: tql.templates.trotter(c, tql.Hamiltonian.from_string("(0.5+1j)*X0")), ValueError, "not Hermitian"),
    (lambda c: tql.templates.trotter(c, "0.5j*X0 + Z1"), ValueError, "not Hermitian"),
    (lambda c: tql.templates.trotter(c, "Z0 Z3"), ValueError, "acts on wire 3 but the circuit has 3 wires"),
    (lambda c: tql.templates.trotter(c, "Z0", order=3), ValueError, "order must be 1 or even"),
    (lambda c: tql.templates.trotter(c, "Z0", n_steps=0), ValueError, "n_steps must be >= 1"),
    (lambda c: tql.templates.trotter(c, "Z0", time=float("nan")), ValueError, "time must be finite"),
    (lambda c: tql.templates.trotter(c, "Z0", trainable=True, input=0), ValueError, "not both"),
    (lambda c: tql.templates.trotter(c, "Z0", input=-1), ValueError, "feature column"),
    (lambda c: tql.templates.trotter(c, 3.0), TypeError, "expected a Hamiltonian"),
    (lambda c: tql.templates.pauli_rotation(c, "Q0", 0.1), ValueError, "pauli_rotation: unknown Pauli factor 'Q0'"),
    (lambda c: tql.templates.pauli_rotation(c, "X5", 0.1), ValueError, "acts on wire 5"),
    (lambda c: tql.templates.pauli_rotation(c, 7, 0.1), TypeError, "expected a PauliString"),
])
def test_bad_arguments_are_refused_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call(tql.Circuit(N))


# -- exact evolution (tql.exact.evolve) ---------------------------------------------------------
@pytest.mark.parametrize("t", [0.0, 0.4, -1.7, 12.0])
def test_exact_evolution_is_the_eigendecomposition_exponential(t, dtype, device, atol):
    """exp(−iHt)ψ matrix-free against V e^{−iEt} V† ψ from the dense H's eigendecomposition; a
    constant term (a global phase) included."""
    terms = TERMS + [(0.35, "III")]
    h = tql.Hamiltonian.from_string(" + ".join(f"({c})*" + (" ".join(f"{ch}{w}" for w, ch in enumerate(label)
                                                                     if ch != "I") or "1")
                                                for c, label in terms))
    rng = np.random.default_rng(4)
    psi = oracle.random_state(N, rng, batch=3)
    got = tql.exact.evolve(h, torch.as_tensor(psi, dtype=dtype, device=device), t)
    assert got.dtype == dtype and got.shape == (3, 2 ** N) and got.device.type == device
    got = got.cpu()
    e, v = np.linalg.eigh(_dense(terms))
    want = psi @ (v @ np.diag(np.exp(-1j * e * t)) @ v.conj().T).T
    np.testing.assert_allclose(got.numpy(), want, atol=10 * atol)
    one = tql.exact.evolve(h, torch.as_tensor(psi[0], dtype=dtype), t)
    np.testing.assert_allclose(one.numpy(), want[0], atol=10 * atol)


def test_trotter_converges_to_the_exact_evolution(dtype):
    """The product formula of order 2 approaches tql.exact.evolve as n_steps^-2."""
    h, t = _hamiltonian(), 0.8
    zero = tql.zero_state(N, dtype=torch.complex128)
    exact = tql.exact.evolve(h, zero, t).numpy()
    errors = [np.abs(_state(tql.templates.trotter(tql.Circuit(N, dtype=dtype), h, time=t, n_steps=r, order=2))
                     - exact).max() for r in (2, 4)]
    assert errors[1] / errors[0] == pytest.approx(0.25, rel=0.25)


@pytest.mark.parametrize("call,error,match", [
    (lambda s: tql.exact.evolve(tql.Hamiltonian.from_string("1j*X0"), s, 1.0), ValueError, "not Hermitian"),
    (lambda s: tql.exact.evolve("X0", s[:, :6], 1.0), ValueError, r"shape \(B, 2\*\*n\)"),
    (lambda s: tql.exact.evolve("Z5", s, 1.0), ValueError, "acts on wire 5 but the state has 3 qubits"),
    (lambda s: tql.exact.evolve("Z0", s, float("inf")), ValueError, "time must be a finite"),
    (lambda s: tql.exact.evolve("Z0", s, 1.0, tol=0), ValueError, "tol must be in"),
    (lambda s: tql.exact.evolve("Z0", s.real, 1.0), TypeError, "complex tensor"),
    (lambda s: tql.exact.evolve(3, s, 1.0), TypeError, "expected a Hamiltonian"),
])
def test_exact_evolution_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(tql.zero_state(N, 2))


# -- Hamiltonian variational ansatz ------------------------------------------------------------
def _tfim_groups(n, g):
    zz = [(-1.0, "".join("Z" if v in (w, w + 1) else "I" for v in range(n))) for w in range(n - 1)]
    xs = [(-g, "".join("X" if v == w else "I" for v in range(n))) for w in range(n)]
    return zz, xs


def test_a_variational_layer_is_the_exponential_of_each_group(dtype, atol):
    """Each layer is exp(−iθ H_k) per group (commuting terms), θ trainable: the state against
    V e^{−iθE} V† of each dense group in turn."""
    n, layers = 3, 2
    groups = _tfim_groups(n, 0.7)
    c = tql.Circuit(n, dtype=dtype)
    tql.templates.hamiltonian_variational(c, [_hamiltonian(grp) for grp in groups], layers, init="uniform")
    assert c.num_parameters == layers * len(groups)
    theta = c.weights.detach().numpy().astype(np.float64)
    psi = np.zeros(2 ** n, dtype=complex)
    psi[0] = 1
    k = 0
    for _ in range(layers):
        for grp in groups:
            e, v = np.linalg.eigh(_dense(grp))
            psi = v @ (np.exp(-1j * theta[k] * e) * (v.conj().T @ psi))
            k += 1
    np.testing.assert_allclose(_state(c)[0], psi, atol=atol)


def test_the_variational_ansatz_finds_the_ising_ground_state():
    """4-spin transverse-field Ising chain (g = 0.8) from |++++⟩, 5 layers, L-BFGS: the energy
    within 1e-5 of exact diagonalisation."""
    n = 4
    zz, xs = (_hamiltonian(grp) for grp in _tfim_groups(n, 0.8))
    h = zz + xs
    e0 = float(tql.exact.ground_state(h)[0][0])
    torch.manual_seed(1)
    c = tql.Circuit(n, dtype=torch.complex128)
    for w in range(n):
        c.h(w)
    tql.templates.hamiltonian_variational(c, [zz, xs], 5)
    opt = torch.optim.LBFGS(c.parameters(), lr=1, max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        e = tql.expval(c, h).sum()
        e.backward()
        return e
    for _ in range(3):
        opt.step(closure)
    with torch.no_grad():
        assert float(tql.expval(c, h).sum()) - e0 < 1e-5


@pytest.mark.parametrize("call,error,match", [
    (lambda c: tql.templates.hamiltonian_variational(c, [], 1), ValueError, "groups must not be empty"),
    (lambda c: tql.templates.hamiltonian_variational(c, "Z0", 1), TypeError, "list of Hamiltonians"),
    (lambda c: tql.templates.hamiltonian_variational(c, ["Z0", "Q1"], 1), ValueError, r"\(group 1\)"),
    (lambda c: tql.templates.hamiltonian_variational(c, ["Z0", "X4"], 1), ValueError, "group 1 acts on wire 4"),
    (lambda c: tql.templates.hamiltonian_variational(c, ["Z0"], 0), ValueError, "n_layers must be >= 1"),
    (lambda c: tql.templates.hamiltonian_variational(c, [tql.Hamiltonian.from_string("1j*Z0")], 1),
     ValueError, "not Hermitian"),
])
def test_the_variational_ansatz_refuses_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(tql.Circuit(N))


# -- times given as 0-d tensors and NumPy scalars -------------------------------------------------
@pytest.mark.parametrize("make", [lambda t: torch.tensor(t), lambda t: torch.tensor(t, dtype=torch.float64),
                                  np.float32, np.float64], ids=["tensor32", "tensor64", "np32", "np64"])
def test_a_scalar_tensor_or_numpy_time_is_a_number(make):
    """trotter and exact.evolve take a 0-d real tensor or a NumPy scalar as the number it holds
    (evolve refused a 0-d tensor with ValueError, trotter with TypeError)."""
    t = float(make(0.7))
    want = _exact(TERMS, t)
    got = tql.exact.evolve(_hamiltonian(), tql.zero_state(N, dtype=torch.complex128), make(0.7))[0].numpy()
    np.testing.assert_allclose(got, want, atol=1e-10)
    c = tql.templates.trotter(tql.Circuit(N, dtype=torch.complex128), _hamiltonian(), time=make(0.7))
    u = np.eye(2 ** N, dtype=complex)
    for coeff, label in TERMS:
        u = oracle.pauli_rotation(2 * coeff * t, label) @ u
    np.testing.assert_allclose(_state(c)[0], u[:, 0], atol=1e-10)
    r = tql.templates.pauli_rotation(tql.Circuit(N, dtype=torch.complex128), "XYZ", make(0.7), scale=make(2.0))
    np.testing.assert_allclose(_state(r)[0], oracle.pauli_rotation(2 * t, "XYZ")[:, 0], atol=1e-6)


def test_exact_evolution_is_differentiable_in_a_tensor_time():
    """d/dt ⟨φ|e^{−iHt}ψ⟩ = ⟨φ|−iH e^{−iHt}ψ⟩ (analytic, dense NumPy H) by autograd through a 0-d time."""
    rng = np.random.default_rng(2)
    psi, phi = oracle.random_state(N, rng), oracle.random_state(N, rng)
    t = torch.tensor(0.45, dtype=torch.float64, requires_grad=True)
    out = tql.exact.evolve(_hamiltonian(), torch.as_tensor(psi[None]), t)[0]
    amp = (torch.as_tensor(phi).conj() * out).sum()
    grad_re, = torch.autograd.grad(amp.real, t, retain_graph=True)
    grad_im, = torch.autograd.grad(amp.imag, t)
    e, v = np.linalg.eigh(_dense())
    u = v @ np.diag(np.exp(-0.45j * e)) @ v.conj().T
    want = phi.conj() @ (-1j * _dense() @ u @ psi)
    assert complex(grad_re, grad_im) == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize("call,error,match", [
    (lambda c: tql.templates.trotter(c, "Z0", time=torch.tensor([0.5])), TypeError, r"time must be a real number .*shape \(1,\)"),
    (lambda c: tql.templates.trotter(c, "Z0", time=torch.tensor(0.5j)), TypeError, "complex64"),
    (lambda c: tql.templates.trotter(c, "Z0", time=torch.tensor(0.5, requires_grad=True)), TypeError, "trainable=True"),
    (lambda c: tql.templates.trotter(c, "Z0", time=torch.tensor(float("nan"))), ValueError, "time must be finite"),
    (lambda c: tql.templates.pauli_rotation(c, "Z0", 0.1, scale=torch.ones(2)), TypeError, "scale must be a real"),
    (lambda c: tql.exact.evolve("Z0", tql.zero_state(N), torch.tensor(float("inf"))), ValueError, "time must be a finite"),
    (lambda c: tql.exact.evolve("Z0", tql.zero_state(N), torch.tensor([1.0])), ValueError, "time must be a finite real"),
    (lambda c: tql.exact.evolve("Z0", tql.zero_state(N), torch.tensor(1j)), ValueError, "time must be a finite real"),
])
def test_tensor_times_that_are_not_real_numbers_are_refused(call, error, match):
    with pytest.raises(error, match=match):
        call(tql.Circuit(N))


def test_a_trainable_time_may_start_from_a_tensor():
    c = tql.templates.trotter(tql.Circuit(N), "Z0", time=torch.tensor(0.5, requires_grad=True), trainable=True)
    assert float(c.weights.detach()[0]) == pytest.approx(0.5)
