"""Differentiation: backprop, adjoint and parameter-shift give the same values and gradients.

Oracles: torch.autograd.gradcheck (finite differences in float64), a dense NumPy simulator
(tests/oracle.py) for values and for the metric tensor by finite differences, analytic formulas.
"""
import math
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import torchquantum_layers as tql
from torchquantum_layers import gates as G
from torchquantum_layers.grad import circuit_expval, hessian, quantum_fisher
from torchquantum_layers.observables import Hamiltonian, PauliString

from . import oracle
from . import strategies as S

pytestmark = pytest.mark.usefixtures("engine_mode")  # both CPU engines

METHODS = ["backprop", "adjoint", "parameter-shift"]
PARAM_GATES = [g for g in G.GATES.values() if g.n_params > 0]


def random_hamiltonian(n, n_terms, rng):
    terms = []
    for _ in range(n_terms):
        k = rng.randint(1, min(3, n))
        wires = rng.sample(range(n), k)
        terms.append((rng.uniform(-1, 1), " ".join(f"{rng.choice('XYZ')}{w}" for w in wires)))
    return Hamiltonian(terms, n_wires=n)


def gate_circuit(gate, n):
    """The gate twice: once with trainable angles, once with input angles (reversed wires)."""
    k = gate.n_wires or 3
    wires = tuple(range(k))
    c = tql.Circuit(n).double()
    c.h(0)
    c.add(gate, wires, trainable=True)
    c.add(gate, tuple(reversed(wires)), input=tuple(range(gate.n_params)))
    c.add("RY", (n - 1,), trainable=True)
    return c


def _gradcheck(c, obs, n_inputs, batch, method, seed):
    """gradcheck of the circuit's values w.r.t. trainable angles, input angles and the input state."""
    torch.manual_seed(seed)
    w = (torch.rand(c.num_parameters, dtype=torch.float64) * 2 * math.pi).requires_grad_()
    x = torch.randn(batch, n_inputs, dtype=torch.float64, requires_grad=True)
    state = tql.random_state(c.n_wires, batch, dtype=torch.complex128).requires_grad_()

    def f(w, x, state):
        return circuit_expval(c, obs, x=x, state=state, diff_method=method, weights=w)
    assert torch.autograd.gradcheck(f, (w, x, state), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("gate", PARAM_GATES, ids=lambda g: g.name)
def test_gradcheck_every_parametrised_gate(gate, method):
    rng = random.Random(hash(gate.name) % 1000)
    n = max(gate.n_wires or 3, 2)
    obs = [random_hamiltonian(n, 3, rng), PauliString(f"Z{n - 1}")]
    _gradcheck(gate_circuit(gate, n), obs, gate.n_params, 2, method, seed=0)


INVERSE_CASES = [g for g in PARAM_GATES if g.kind == "dense"][:6] + [g for g in PARAM_GATES if g.kind == "two-level"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("gate", INVERSE_CASES, ids=lambda g: g.name)
def test_gradcheck_inverse_circuits(gate, method):
    """Adjoint (dagger) ops: the two-level fast paths un-compute with the block itself."""
    rng = random.Random(hash(gate.name) % 997)
    n = max(gate.n_wires or 3, 2)
    _gradcheck(gate_circuit(gate, n).inverse(), [random_hamiltonian(n, 3, rng)], gate.n_params, 3, method, seed=1)


def _random_circuit(rng, n, n_gates, shared):
    names = [name for name, g in G.GATES.items() if not g.takes_data]
    c = tql.Circuit(n, max_fused_wires=rng.choice([2, 3, 4, 5]))
    p = c.parameter(rng.uniform(-3, 3))
    for _ in range(n_gates):
        g = G.GATES[rng.choice(names)]
        k = g.n_wires or rng.randint(g.min_wires, max(n, g.min_wires))
        if k > n:
            continue
        wires = rng.sample(range(n), k)
        mode = rng.choice(["fixed", "trainable", "input", "shared"] if shared else ["fixed", "trainable", "input"])
        if g.n_params == 0:
            c.add(g, wires)
        elif mode == "fixed":
            c.add(g, wires, *[rng.uniform(-3, 3) for _ in range(g.n_params)])
        elif mode == "trainable":
            c.add(g, wires, trainable=True)
        elif mode == "shared":
            c.add(g, wires, *([tql.Param(p.index, rng.choice([1.0, -0.5, 2.0]))] * g.n_params))
        else:
            c.add(g, wires, input=tuple(rng.randrange(3) for _ in range(g.n_params)), scale=rng.choice([1.0, 0.7]))
    return c


def _grads(c, obs, method, x, state, upstream):
    c.zero_grad()
    x = x.clone().requires_grad_()
    state = state.clone().requires_grad_()
    values = circuit_expval(c, obs, x=x, state=state, diff_method=method)
    (values * upstream).sum().backward()
    gw = c.weights.grad if c.weights.grad is not None else torch.zeros_like(c.weights)
    gx = x.grad if x.grad is not None else torch.zeros_like(x)
    return values.detach(), gw.clone(), gx, state.grad


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 6), batch=st.integers(1, 16))
def test_three_methods_agree_on_random_circuits(seed, n, batch):
    rng = random.Random(seed)
    c = _random_circuit(rng, n, rng.randint(1, 25), shared=True).double()
    obs = [random_hamiltonian(n, rng.randint(1, 4), rng) for _ in range(rng.randint(1, 3))]
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, dtype=torch.float64, generator=gen)
    state = tql.random_state(n, batch, generator=gen, dtype=torch.complex128)
    upstream = torch.randn(batch, len(obs), dtype=torch.float64, generator=gen)
    ref = _grads(c, obs, "backprop", x, state, upstream)
    for method in ("adjoint", "parameter-shift"):
        got = _grads(c, obs, method, x, state, upstream)
        for a, b, what in zip(ref, got, ("values", "weights", "x", "state")):
            assert torch.allclose(a, b, atol=1e-9), f"{method} {what}: max err {(a - b).abs().max():.3g}"


def test_parameter_shift_follows_a_circuit_that_grows_or_changes_dtype():
    """Parameter-shift runs cached suffixes of the circuit through the engine: after gates are
    appended, or the circuit turns complex128, its gradient is still backprop's."""
    rng = random.Random(3)
    c = _random_circuit(rng, 4, 20, shared=True)
    obs = [random_hamiltonian(4, 3, rng)]
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 3, generator=gen)
    state = tql.random_state(4, 5, generator=gen)
    upstream = torch.randn(5, 1, generator=gen)
    for change in (None, lambda: c.rx(2, trainable=True), lambda: c.cnot(3, 0), c.double):
        if change is not None:
            change()
        dt = c.dtype
        xs, st = x.to(torch.float64 if dt == torch.complex128 else torch.float32), state.to(dt)
        ref = _grads(c, obs, "backprop", xs, st, upstream.to(xs.dtype))
        got = _grads(c, obs, "parameter-shift", xs, st, upstream.to(xs.dtype))
        tol = 1e-9 if dt == torch.complex128 else 2e-4
        for a, b in zip(ref, got):
            assert torch.allclose(a, b, atol=tol)


def test_values_match_dense_oracle():
    rng = random.Random(7)
    n = 4
    c = tql.Circuit(n).double()
    ops = []
    for w in range(n):
        th = rng.uniform(-2, 2)
        c.ry(w, th)
        ops.append(("RY", (w,), (th,)))
    for w in range(n - 1):
        c.cnot(w, w + 1)
        ops.append(("CNOT", (w, w + 1), ()))
    th = rng.uniform(-2, 2)
    c.crx(3, 0, th)
    ops.append(("CRX", (3, 0), (th,)))
    psi = oracle.run_ops(ops, n, np.eye(1, 2 ** n, dtype=complex))[0]
    H = np.kron(oracle.pauli_matrix("XZ"), np.eye(4)) * 0.5 + oracle.pauli_matrix("IZIY") * -1.2
    exact = float(np.real(psi.conj() @ H @ psi))
    obs = Hamiltonian([(0.5, "X0 Z1"), (-1.2, "Z1 Y3")])
    for method in METHODS:
        got = circuit_expval(c, obs, diff_method=method)
        assert got.shape == (1,)
        assert abs(got.item() - exact) < 1e-12


@pytest.mark.parametrize("method", METHODS)
def test_gradients_reach_a_linear_layer_before_the_circuit(method, dtype, device):
    torch.manual_seed(0)
    n = 3
    c = tql.templates.angle_encoding(tql.Circuit(n), rotation="Y")
    tql.templates.hardware_efficient(c, n_layers=1)
    c = c.to(device)
    if dtype == torch.complex128:
        c = c.double()
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    linear = torch.nn.Linear(2, n).to(device=device, dtype=real)
    x = torch.randn(5, 2, device=device, dtype=real)
    values = circuit_expval(c, [PauliString(f"Z{w}") for w in range(n)], x=linear(x), diff_method=method)
    values.pow(2).sum().backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0
    # same gradient as plain autograd
    g = linear.weight.grad.clone()
    linear.zero_grad()
    c.zero_grad()
    circuit_expval(c, [PauliString(f"Z{w}") for w in range(n)], x=linear(x)).pow(2).sum().backward()
    tol = 1e-4 if dtype == torch.complex64 else 1e-9
    assert torch.allclose(g, linear.weight.grad, atol=tol)


@pytest.mark.parametrize("dtype_", [torch.complex64, torch.complex128], ids=["c64", "c128"])
def test_adjoint_long_circuit_matches_backprop_and_keeps_norm(dtype_):
    torch.manual_seed(1)
    n, layers = 5, 25
    c = tql.templates.angle_encoding(tql.Circuit(n), rotation="X")
    for _ in range(layers):                # 25 layers × (3 rotations × 5 + 5 CNOT) = 500 gates + encoding
        for w in range(n):
            c.rx(w, trainable=True)
            c.ry(w, trainable=True)
            c.rz(w, trainable=True)
        for w in range(n):
            c.cnot(w, (w + 1) % n)
    assert len(c.ops) >= 500
    if dtype_ == torch.complex128:
        c = c.double()
    real = torch.float64 if dtype_ == torch.complex128 else torch.float32
    x = torch.rand(4, n, dtype=real)
    obs = [PauliString(f"Z{w}") for w in range(n)]
    grads = {}
    for method in ("backprop", "adjoint"):
        c.zero_grad()
        circuit_expval(c, obs, x=x, diff_method=method).sum().backward()
        grads[method] = c.weights.grad.clone()
    tol = 2e-3 if dtype_ == torch.complex64 else 1e-9
    assert torch.allclose(grads["backprop"], grads["adjoint"], atol=tol)
    # un-computing the whole circuit returns a normalised state: run it and its inverse
    with torch.no_grad():
        psi = c(x)
        back = c.inverse()(x, state=psi)
    norm_tol = 1e-4 if dtype_ == torch.complex64 else 1e-12
    assert torch.allclose(torch.linalg.vector_norm(back, dim=1), torch.ones(4, dtype=real), atol=norm_tol)
    assert torch.allclose(back[:, 0].abs(), torch.ones(4, dtype=real), atol=10 * norm_tol)


def test_second_derivative_through_backprop():
    c = tql.Circuit(1).double()
    c.rx(0, trainable=True, init=0.7)
    e = circuit_expval(c, PauliString("Z0"))
    (g,) = torch.autograd.grad(e.sum(), c.weights, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), c.weights)
    assert abs(g.item() + math.sin(0.7)) < 1e-12
    assert abs(h.item() + math.cos(0.7)) < 1e-12


def test_hessian_against_finite_differences_of_gradients():
    rng = random.Random(3)
    c = _random_circuit(rng, 3, 12, shared=False).double()
    if c.num_parameters < 2:
        c.ry(0, trainable=True)
    obs = random_hamiltonian(3, 4, rng)
    x = torch.randn(2, 3, dtype=torch.float64)
    hess = hessian(c, obs, x=x)
    assert torch.allclose(hess, S.gradient_differences(c, obs, x), atol=1e-6)


def test_quantum_fisher_against_dense_finite_differences():
    th = [0.4, -1.1, 0.8]
    c = tql.Circuit(2).double()
    c.rx(0, trainable=True, init=th[0])
    c.ry(1, trainable=True, init=th[1])
    c.cnot(0, 1)
    c.rz(0, trainable=True, init=th[2])
    c.ry(0, 0.3)

    def psi_np(t):
        ops = [("RX", (0,), (t[0],)), ("RY", (1,), (t[1],)), ("CNOT", (0, 1), ()), ("RZ", (0,), (t[2],)),
               ("RY", (0,), (0.3,))]
        return oracle.run_ops(ops, 2, np.eye(1, 4, dtype=complex))[0]
    eps = 1e-6
    psi = psi_np(th)
    d = []
    for i in range(3):
        tp, tm = list(th), list(th)
        tp[i] += eps
        tm[i] -= eps
        d.append((psi_np(tp) - psi_np(tm)) / (2 * eps))
    ref = np.array([[np.real(d[i].conj() @ d[j] - (d[i].conj() @ psi) * (psi.conj() @ d[j])) for j in range(3)]
                    for i in range(3)])
    got = quantum_fisher(c)[0].numpy()
    assert np.allclose(got, ref, atol=1e-7)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(spec=S.circuit_specs(max_wires=4, max_ops=8, min_ops=1, gates=S.PARAMETRIC_GATES,
                            kinds=("fixed", "new", "shared", "input"), max_batch=3),
       inverse=st.booleans())
def test_quantum_fisher_on_random_circuits_against_oracle_differences(spec, inverse):
    """Every parametrised gate of the table, shared angles, input angles per sample, inverse
    circuits: the metric per sample vs central differences of the oracle's states."""
    c, recipe = S.build(spec, torch.complex128, fuse=False)
    if inverse:
        c = c.inverse()
    x = S.features(spec, torch.complex128)
    x_np, P, eps = S.as_np(x), c.num_parameters, 1e-6
    w = S.weights_of(c)
    got = quantum_fisher(c, x=x).numpy()
    assert got.shape == (spec.batch, P, P)

    def states(weights):
        return np.broadcast_to(S.oracle_states(recipe, spec.n_wires, weights, x_np, inverse=inverse),
                               (spec.batch, 2 ** spec.n_wires))
    psi = states(w)
    d = []
    for i in range(P):
        step = np.zeros(P)
        step[i] = eps
        d.append((states(w + step) - states(w - step)) / (2 * eps))
    d = np.array(d).reshape(P, spec.batch, 2 ** spec.n_wires)
    ref = (np.einsum("pbn,qbn->bpq", d.conj(), d)
           - np.einsum("pbn,bn->bp", d.conj(), psi)[:, :, None] * np.einsum("bn,qbn->bq", psi.conj(), d)[:, None, :])
    np.testing.assert_allclose(got, ref.real, atol=1e-6, err_msg=str(spec))


def test_parameter_shift_with_shots_is_unbiased():
    c = tql.Circuit(2).double()
    c.rx(0, trainable=True, init=0.9)
    c.cnot(0, 1)
    c.ry(1, trainable=True, init=-0.4)
    obs = Hamiltonian([(1.0, "Z1"), (0.5, "X1")])
    exact_w = None
    c.zero_grad()
    circuit_expval(c, obs).sum().backward()
    exact_w = c.weights.grad.clone()
    estimates = []
    gen = torch.Generator().manual_seed(5)
    for _ in range(20):
        c.zero_grad()
        circuit_expval(c, obs, diff_method="parameter-shift", shots=2000, generator=gen).sum().backward()
        estimates.append(c.weights.grad.clone())
    est = torch.stack(estimates)
    mean, sem = est.mean(0), est.std(0) / math.sqrt(len(estimates))
    assert torch.all((mean - exact_w).abs() < 5 * sem + 1e-3), (mean, exact_w, sem)


def test_shift_rules():
    from torchquantum_layers.grad import shift_rule
    shifts, coeffs = shift_rule((1.0,))
    assert shifts == (math.pi / 2,) and coeffs == (0.5,)
    shifts, coeffs = shift_rule(G.CRX.frequencies(0))           # the four-term rule
    assert np.allclose(shifts, [math.pi / 2, 3 * math.pi / 2])
    c1 = (math.sqrt(2) + 1) / (4 * math.sqrt(2))
    c2 = (math.sqrt(2) - 1) / (4 * math.sqrt(2))
    assert np.allclose(coeffs, [c1, -c2])


def test_bad_input():
    c = tql.Circuit(2)
    c.rx(0, trainable=True)
    with pytest.raises(ValueError, match="diff_method must be one of"):
        circuit_expval(c, PauliString("Z0"), diff_method="finite-diff")
    with pytest.raises(ValueError, match="adjoint.*shots|shots.*parameter-shift"):
        circuit_expval(c, PauliString("Z0"), diff_method="adjoint", shots=100)
    with pytest.raises(ValueError, match="weights of shape"):
        circuit_expval(c, PauliString("Z0"), weights=torch.zeros(3))
    with pytest.raises(TypeError, match="expval: weights must be a tensor"):
        circuit_expval(c, PauliString("Z0"), weights=[0.1])
    with pytest.raises(ValueError, match="acts on 3 wires"):
        circuit_expval(c, PauliString("Z2"))
    with pytest.raises(TypeError, match="observable"):
        circuit_expval(c, [PauliString("Z0"), 3])


def test_auto_diff_method_picks_backprop_until_memory_runs_out(monkeypatch):
    import torchquantum_layers.grad as tgrad
    c = tql.templates.hardware_efficient(tql.Circuit(3), n_layers=2).double()
    H = Hamiltonian.from_string("0.5*Z0 Z1 - 0.3*X2")
    assert tgrad.resolve_diff_method("auto", c, batch=4) == "backprop"
    assert tgrad.resolve_diff_method("auto", c, batch=4, shots=100) == "parameter-shift"
    assert tgrad.resolve_diff_method("adjoint", c) == "adjoint"
    kept = 4 * 2 ** 3 * 16 * (len(tql.engine.build_plan(c).steps) + 1)
    monkeypatch.setattr(tgrad, "AUTO_BACKPROP_BYTES", kept - 1)
    assert tgrad.resolve_diff_method("auto", c, batch=4) == "adjoint"
    # the choice changes nothing a user sees: values and gradients agree with backprop
    x = tql.random_state(3, 4, dtype=torch.complex128)
    c.zero_grad()
    tql.expval(c, H, state=x, diff_method="auto").sum().backward()
    g_auto = c.weights.grad.clone()
    c.zero_grad()
    tql.expval(c, H, state=x, diff_method="backprop").sum().backward()
    assert torch.allclose(g_auto, c.weights.grad, atol=1e-10)
    with pytest.raises(ValueError, match="diff_method must be one of"):
        tql.expval(c, H, diff_method="fast")
    # a layer resolves "auto" with shots as expval does: the method that differentiates samples
    assert tql.QuantumLayer(c, [H], diff_method="auto", shots=100, seed=0).diff_method == "parameter-shift"
    assert tql.QuantumLayer(c, [H], diff_method="auto").diff_method == "auto"


@pytest.mark.parametrize("method", ["backprop", "adjoint", "parameter-shift", "auto"])
@pytest.mark.parametrize("obs", ["empty", "zeros", "list"])
def test_an_empty_observable_has_zero_gradient_by_every_method(method, obs):
    """⟨0⟩ = 0 for the empty sum (or one whose terms are all 0): its gradient is 0 (analytic) by every
    method, and the input state's too. Backprop used to return a tensor outside the graph, so
    backward() raised 'does not require grad' where adjoint and parameter-shift gave 0."""
    h = {"empty": Hamiltonian([]), "zeros": Hamiltonian.from_string("0*X0 + 0*Z1 Y2"),
         "list": [Hamiltonian([]), Hamiltonian([])]}[obs]
    c = tql.Circuit(3, dtype=torch.complex128)
    c.rx(0, trainable=True).cnot(0, 1).u3(2, trainable=True).ry(1, input=0, scale=0.5)
    w = c.weights.detach().clone().requires_grad_(True)
    x = torch.tensor([[0.3], [-1.2]], dtype=torch.float64, requires_grad=True)
    s = torch.randn(2, 8, dtype=torch.complex128)
    s = (s / s.norm(dim=1, keepdim=True)).requires_grad_(True)
    v = tql.expval(c, h, x=x, state=s, diff_method=method, weights=w)
    assert v.shape == ((2, 2) if obs == "list" else (2,)) and (v == 0).all()
    v.sum().backward()
    for t in (w, x, s):
        assert t.grad is not None and (t.grad == 0).all()


def test_h_psi_of_an_empty_hamiltonian_is_zero_and_differentiable():
    from torchquantum_layers.observables import apply_hamiltonian, expectation
    for method in ("auto", "loop", "gather"):
        s = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
        out = apply_hamiltonian(s, Hamiltonian([]), method=method)
        assert (out == 0).all()
        (out.real.sum() + expectation(s, Hamiltonian([]), method=method).sum()).backward()
        assert (s.grad == 0).all()
