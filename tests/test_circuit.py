"""``Circuit`` end to end: random circuits against the NumPy oracle (tests/oracle.py), fused vs
unfused, batched vs per-sample, inverse, unitary, analytic states, input and trainable angles,
serialisation, introspection and the error messages of bad input."""
import copy
import io
import math
import pickle

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import torchquantum_layers as tql
from torchquantum_layers import gates as G

from . import oracle
from . import strategies as S
from .conftest import ATOL, REAL

pytestmark = pytest.mark.usefixtures("engine_mode")  # both CPU engines

HYP = settings(max_examples=30, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def N(t):
    return S.as_np(t)


def T(a, dtype, device="cpu"):
    return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)


def close(actual, expected, atol, msg=""):
    np.testing.assert_allclose(N(actual), expected, rtol=0, atol=atol, err_msg=str(msg))


# =============================================================================================
# random circuits against the oracle
def test_strategies_cover_the_table():
    """Every gate of the table (and every alias) is reachable by the random circuits."""
    assert set(S.ALL_GATES) == set(G.GATES)
    assert set(S.ALL_GATES) - set(S.DATA_GATES) == set(oracle.SIGNATURES)
    for gate in G.GATES:
        assert hasattr(tql.Circuit, gate.lower()), gate
    for alias in G.ALIASES:
        assert hasattr(tql.Circuit, alias.lower()), alias


def _gate_spec(name, n=5):
    """A fixed circuit around one gate: scattered, reversed wires; each angle kind used once."""
    k = S.min_wires_of(name) if name not in ("MULTIRZ", "MULTICONTROLLEDX") else 3
    k = 2 if name in S.DATA_GATES else k
    wires = (4, 1, 3, 0)[:k]
    p = S.n_params_of(name)
    recipes = [S.AngleSpec("input", 0.0, 1, 0.5), S.AngleSpec("new", 0.8, 0, -1.0),
               S.AngleSpec("fixed", -2.1), S.AngleSpec("shared", 0.0, 0, 2.0)]
    angles = tuple(recipes[i % 4] for i in range(p))
    ops = [S.OpSpec("H", "h", (w,)) for w in range(n)]
    ops += [S.OpSpec("RY", "ry", (w,), angles=(S.AngleSpec("fixed", 0.3 + w),)) for w in range(n)]
    ops.append(S.OpSpec(name, name.lower(), wires, angles=angles, seed=11))
    ops += [S.OpSpec("CNOT", "cnot", (w, w + 1)) for w in range(n - 1)]
    return S.CircuitSpec(n, tuple(ops), shared=(0.45,), batch=3, seed=3)


@pytest.mark.parametrize("name", S.ALL_GATES)
def test_every_gate_in_a_circuit_matches_oracle(name, dtype, device, atol):
    spec = _gate_spec(name)
    x = S.features(spec, dtype, device)
    psi0 = S.initial_states(spec)
    ref = None
    for fuse, k in [(False, None), (True, 2), (True, 4), (True, 5)]:
        c, recipe = S.build(spec, dtype, device, fuse=fuse, max_fused_wires=k)
        if ref is None:
            ref = S.oracle_states(recipe, spec.n_wires, S.weights_of(c), N(x), psi0)
            inv_ref = S.oracle_states(recipe, spec.n_wires, S.weights_of(c), N(x), psi0, inverse=True)
        close(c(x, state=T(psi0, dtype, device)), ref, atol, f"{name} fuse={fuse} k={k}")
        close(c.inverse()(x, state=T(psi0, dtype, device)), inv_ref, atol, f"{name} inverse fuse={fuse} k={k}")


@HYP
@given(spec=S.circuit_specs(max_wires=7, max_ops=12))
def test_random_circuit_matches_oracle(spec, dtype, device, atol):
    c, recipe = S.build(spec, dtype, device)
    x = S.features(spec, dtype, device)
    out = c(x)
    assert out.shape == (spec.batch, 2 ** spec.n_wires) and out.dtype == dtype
    assert out.device.type == device
    ref = S.oracle_states(recipe, spec.n_wires, S.weights_of(c), N(x))
    ref = np.broadcast_to(ref, (spec.batch, 2 ** spec.n_wires))
    close(out, ref, atol, spec)


@HYP
@given(spec=S.circuit_specs(max_wires=7, max_ops=12), k=st.integers(2, 5), start=st.booleans())
def test_fused_unfused_and_oracle_agree(spec, k, start, dtype, device, atol):
    x = S.features(spec, dtype, device)
    psi0 = S.initial_states(spec) if start else S.zero_states(spec.n_wires)
    fused, recipe = S.build(spec, dtype, device, fuse=True, max_fused_wires=k)
    plain, _ = S.build(spec, dtype, device, fuse=False)
    a = fused(x, state=T(psi0, dtype, device))
    b = plain(x, state=T(psi0, dtype, device))
    ref = S.oracle_states(recipe, spec.n_wires, S.weights_of(fused), N(x), psi0)
    ref = np.broadcast_to(ref, a.shape)
    close(a, ref, atol, f"fused k={k}\n{spec}")
    close(b, ref, atol, f"unfused\n{spec}")
    close(a, N(b), atol, f"fused k={k} vs unfused\n{spec}")


@HYP
@given(spec=S.circuit_specs(max_wires=6, max_ops=10, min_ops=1), own_states=st.booleans())
def test_batched_run_equals_loop_over_samples(spec, own_states, dtype, device, atol):
    c, _ = S.build(spec, dtype, device)
    x = S.features(spec, dtype, device)
    psi = T(S.initial_states(spec), dtype, device) if own_states else None
    out = c(x, state=psi)
    rows = [c(x[b:b + 1], state=None if psi is None else psi[b:b + 1]) for b in range(spec.batch)]
    assert all(r.shape == (1, 2 ** spec.n_wires) for r in rows)
    close(out, N(torch.cat(rows)), atol, spec)


@HYP
@given(spec=S.circuit_specs(max_wires=6, max_ops=10), k=st.sampled_from([None, 2, 5]))
def test_inverse_undoes_the_circuit(spec, k, dtype, device, atol):
    c, recipe = S.build(spec, dtype, device, max_fused_wires=k)
    x = S.features(spec, dtype, device)
    psi0 = T(S.initial_states(spec), dtype, device)
    inv = c.inverse()
    assert inv.weights is c.weights and len(inv) == len(c)
    assert inv.dtype == c.dtype and inv.device == c.device
    back = inv(x, state=c(x, state=psi0))
    close(back, N(psi0), 4 * atol, spec)
    # the inverse on its own against the oracle's reversed, conjugate-transposed gate list
    ref = S.oracle_states(recipe, spec.n_wires, S.weights_of(c), N(x), N(psi0), inverse=True)
    close(inv(x, state=psi0), ref, atol, spec)
    # and the inverse of the inverse is the circuit again
    close(inv.inverse()(x, state=psi0), N(c(x, state=psi0)), atol, spec)


@HYP
@given(spec=S.circuit_specs(max_wires=6, max_ops=10, kinds=("fixed", "tensor", "new", "shared")),
       fuse=st.booleans())
def test_unitary_matches_oracle_product(spec, fuse, dtype, device, atol):
    c, recipe = S.build(spec, dtype, device, fuse=fuse)
    u = c.unitary()
    d = 2 ** spec.n_wires
    assert u.shape == (d, d) and u.dtype == dtype
    ref = S.oracle_unitary(recipe, spec.n_wires, S.weights_of(c))
    close(u, ref, atol, spec)
    eye = np.eye(d)
    close(u @ u.conj().T, eye, 4 * atol, spec)
    close(c.inverse().unitary(), ref.conj().T, atol, spec)


def test_unitary_of_input_circuits_needs_the_features():
    c = tql.Circuit(2)
    c.ry(0, input=0)
    with pytest.raises(ValueError, match="input column"):
        c.unitary()
    with pytest.raises(ValueError, match="input column 0 but x has only 0"):
        c.unitary(torch.zeros(3, 0))


@HYP
@given(spec=S.circuit_specs(max_wires=4, max_ops=8, kinds=("fixed", "tensor", "new", "shared", "input")),
       fuse=st.booleans(), one_row=st.booleans())
def test_unitary_for_given_features_matches_oracle_product(spec, fuse, one_row, dtype, device, atol):
    """One matrix per row of x (or one for a single row (F,)), as the oracle multiplies them."""
    c, recipe = S.build(spec, dtype, device, fuse=fuse)
    x = S.features(spec, dtype, device)
    d = 2 ** spec.n_wires
    if one_row:
        u = c.unitary(x[0])
        assert u.shape == (d, d)
        close(u, S.oracle_unitary(recipe, spec.n_wires, S.weights_of(c), x[:1].cpu())[0], atol, spec)
    else:
        u = c.unitary(x)
        assert u.shape == (spec.batch, d, d) and u.dtype == dtype
        close(u, S.oracle_unitary(recipe, spec.n_wires, S.weights_of(c), x.cpu()), atol, spec)
        close(u[:, :, 0], c(x).detach().cpu().numpy(), atol, spec)     # its first column is the circuit's output on |0…0⟩


# =============================================================================================
# analytic states
@pytest.mark.parametrize("fuse", [True, False])
def test_bell_state(fuse, dtype, device, atol):
    c = tql.Circuit(2, fuse=fuse).to(device)
    if dtype == torch.complex128:
        c.double()
    c.h(0)
    c.cnot(0, 1)
    s = 1 / math.sqrt(2)
    close(c(), np.array([[s, 0, 0, s]]), atol)


@pytest.mark.parametrize("fuse", [True, False])
def test_ghz_state_on_5_wires(fuse, dtype, device, atol):
    c = tql.Circuit(5, fuse=fuse, dtype=dtype).to(device)
    c.h(0)
    for w in range(4):
        c.cx(w, w + 1)
    ref = np.zeros((1, 32))
    ref[0, 0] = ref[0, 31] = 1 / math.sqrt(2)
    close(c(), ref, atol)


def qft(n, **kw):
    """Textbook QFT: H and controlled phases, then reverse the wires with SWAPs."""
    c = tql.Circuit(n, **kw)
    for j in range(n):
        c.h(j)
        for m in range(j + 1, n):
            c.cp(m, j, math.pi / 2 ** (m - j))
    for j in range(n // 2):
        c.swap(j, n - 1 - j)
    return c


@pytest.mark.parametrize("n", [1, 3, 4])
@pytest.mark.parametrize("fuse", [True, False])
def test_qft_of_basis_states_is_the_dft(n, fuse, dtype, device, atol):
    c = qft(n, fuse=fuse, dtype=dtype).to(device)
    d = 2 ** n
    omega = np.exp(2j * np.pi / d)
    dft = omega ** np.outer(np.arange(d), np.arange(d)) / math.sqrt(d)
    for k in range(d):
        bits = [(k >> (n - 1 - w)) & 1 for w in range(n)]
        out = c(state=tql.basis_state(bits, dtype=dtype, device=device))
        close(out, dft[:, k][None], atol, f"|{k}>")
    close(c.unitary(), dft, atol)


# =============================================================================================
# per-sample input angles
@pytest.mark.parametrize("fuse", [True, False])
def test_ry_input_angle_per_row(fuse, dtype, device, atol):
    c = tql.Circuit(1, fuse=fuse, dtype=dtype).to(device)
    c.ry(0, input=0)
    x = torch.linspace(-3, 3, 7, dtype=REAL[dtype], device=device)[:, None]
    out = c(x)
    assert out.shape == (7, 2)
    xs = N(x)[:, 0]
    close(out, np.stack([np.cos(xs / 2), np.sin(xs / 2)], 1), atol)


@pytest.mark.parametrize("fuse", [True, False])
def test_input_scale_and_column(fuse, dtype, device, atol):
    c = tql.Circuit(2, fuse=fuse, dtype=dtype).to(device)
    c.ry(0, input=2, scale=0.5)
    c.rx(1, tql.Input(0, -2.0))
    assert c.n_inputs == 3
    x = torch.rand(4, 3, dtype=REAL[dtype], device=device) * 6 - 3
    xs = N(x)
    a = np.stack([np.cos(xs[:, 2] / 4), np.sin(xs[:, 2] / 4)], 1)
    b = np.stack([np.cos(-xs[:, 0]), -1j * np.sin(-xs[:, 0])], 1)
    ref = np.einsum("bi,bj->bij", a, b).reshape(4, 4)
    close(c(x), ref, atol)


@pytest.mark.parametrize("fuse", [True, False])
def test_state_batch_of_one_broadcasts_against_x(fuse, dtype, device, atol):
    c = tql.Circuit(1, fuse=fuse, dtype=dtype).to(device)
    c.ry(0, input=0)
    x = torch.tensor([[0.1], [0.7], [-2.0], [3.0]], dtype=REAL[dtype], device=device)
    one = tql.basis_state([1], dtype=dtype, device=device)            # |1>, batch 1
    out = c(x, state=one)
    assert out.shape == (4, 2)
    xs = N(x)[:, 0]
    close(out, np.stack([-np.sin(xs / 2), np.cos(xs / 2)], 1), atol)
    # a 1-D state is a batch of one too
    close(c(x, state=one[0]), N(out), atol)


def test_state_batch_of_one_broadcasts_even_without_input_gates():
    c = tql.Circuit(1)
    c.h(0)
    x = torch.zeros(4, 1)
    assert c(x).shape == (4, 2)
    assert c(x, state=tql.zero_state(1)).shape == (4, 2)


def test_unbatched_features_are_a_batch_of_one(dtype, atol):
    c = tql.Circuit(1, dtype=dtype)
    c.ry(0, input=0)
    out = c(torch.tensor([0.4], dtype=REAL[dtype]))
    assert out.shape[-1] == 2
    close(out.reshape(-1), np.array([math.cos(0.2), math.sin(0.2)]), atol)


# =============================================================================================
# trainable angles and gradients
def _z0z1(state):
    """<Z0 Z1> of a 2-wire state batch, differentiable (independent of the library)."""
    signs = torch.tensor([1.0, -1.0, -1.0, 1.0], dtype=state.real.dtype, device=state.device)
    return ((state.abs() ** 2) * signs).sum(-1)


@pytest.mark.parametrize("fuse", [True, False])
def test_gradients_flow_to_weights(fuse, dtype, device):
    c = tql.Circuit(2, fuse=fuse, dtype=dtype).to(device)
    c.rx(0, trainable=True, init=0.3)
    c.ry(1, trainable=True, init=-0.8)
    c.cnot(0, 1)
    c.rot(1, trainable=True, init="normal")
    assert c.num_parameters == 5
    assert c.weights.requires_grad and c.weights.dtype == REAL[dtype]
    loss = _z0z1(c()).sum()
    loss.backward()
    assert c.weights.grad is not None and c.weights.grad.shape == (5,)
    assert torch.isfinite(c.weights.grad).all()
    assert c.weights.grad[:2].abs().sum() > 0


def _finite_difference(c, loss_fn, h=1e-6):
    w = c.weights
    grads = []
    with torch.no_grad():
        for i in range(w.shape[0]):
            old = w[i].item()
            w[i] = old + h
            up = loss_fn().item()
            w[i] = old - h
            down = loss_fn().item()
            w[i] = old
            grads.append((up - down) / (2 * h))
    return np.array(grads)


@pytest.mark.parametrize("fuse", [True, False])
def test_shared_parameter_gets_the_summed_gradient(fuse, device):
    def build(shared):
        c = tql.Circuit(2, fuse=fuse, dtype=torch.complex128).to(device)
        c.h(1)
        if shared:
            p = c.parameter(init=0.37)
            c.rx(0, p)
            c.ry(1, tql.Param(p.index, 0.5))
        else:
            c.rx(0, c.parameter(init=0.37))
            c.ry(1, c.parameter(init=0.37 * 0.5))
        c.cnot(0, 1)
        c.rz(0, 0.2)
        c.crx(1, 0, 1.1)
        return c

    c = build(True)
    assert c.num_parameters == 1
    loss_fn = lambda: _z0z1(c()).sum()  # noqa: E731
    loss_fn().backward()
    g = c.weights.grad.clone()
    fd = _finite_difference(c, loss_fn)
    np.testing.assert_allclose(N(g), fd, atol=1e-8)
    # the same circuit with two separate parameters: the shared gradient is their sum
    c2 = build(False)
    _z0z1(c2()).sum().backward()
    g2 = N(c2.weights.grad)
    np.testing.assert_allclose(N(g)[0], g2[0] + 0.5 * g2[1], atol=1e-10)


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec=S.circuit_specs(max_wires=4, max_ops=8, min_ops=1, gates=S.PARAMETRIC_GATES,
                            kinds=("fixed", "new", "shared", "input"), max_batch=3))
def test_random_circuit_gradients_match_oracle_finite_differences(spec, device):
    """float64: d/dw of Σ_b <Z0> (…) from autograd, fused and unfused, vs central differences
    of the oracle's states (independent of the library)."""
    dtype = torch.complex128
    x = S.features(spec, dtype, device)
    fused, recipe = S.build(spec, dtype, device, fuse=True, max_fused_wires=3)
    plain, _ = S.build(spec, dtype, device, fuse=False)
    n = spec.n_wires
    z0 = np.array([1.0 if ((i >> (n - 1)) & 1) == 0 else -1.0 for i in range(2 ** n)])
    if not any(a[0] == "param" for step in recipe for a in step.angles):
        return                                        # output does not depend on the weights

    def loss(c):
        return ((c(x).abs() ** 2) * torch.as_tensor(z0, device=device)).sum()

    def oracle_loss(w):
        psi = S.oracle_states(recipe, n, w, N(x))
        return float(((np.abs(psi) ** 2) * z0).sum() * (spec.batch if psi.shape[0] == 1 else 1))

    loss(fused).backward()
    loss(plain).backward()
    w0 = S.weights_of(fused)
    h = 1e-6
    fd = np.array([(oracle_loss(w0 + h * e) - oracle_loss(w0 - h * e)) / (2 * h)
                   for e in np.eye(len(w0))])
    np.testing.assert_allclose(N(fused.weights.grad), fd, atol=1e-7, err_msg=str(spec))
    np.testing.assert_allclose(N(plain.weights.grad), fd, atol=1e-7, err_msg=str(spec))


def test_gradient_flows_to_input_features(device):
    c = tql.Circuit(1, dtype=torch.complex128).to(device)
    c.ry(0, input=0, scale=0.5)
    x = torch.tensor([[0.3], [1.2]], dtype=torch.float64, device=device, requires_grad=True)
    p1 = c(x).abs()[:, 1] ** 2             # sin²(x/4)
    p1.sum().backward()
    xs = N(x)[:, 0]
    np.testing.assert_allclose(N(x.grad)[:, 0], 0.25 * np.sin(xs / 2), atol=1e-12)


def test_parameter_init_is_exact_in_double():
    c = tql.Circuit(1, dtype=torch.complex128)
    p = c.parameter(init=0.1)
    c.rx(0, p)
    c.ry(0, trainable=True, init=0.1)
    assert c.weights.dtype == torch.float64
    assert c.weights[0].item() == 0.1, "init value was rounded to float32"
    assert c.weights[1].item() == 0.1, "init value was rounded to float32"


def test_parameter_init_strategies():
    torch.manual_seed(0)
    c = tql.Circuit(1)
    for init in ("uniform", "normal", "zeros", "small", 1.5):
        c.parameter(init=init)
    w = N(c.weights)
    assert 0 <= w[0] < 2 * math.pi and w[2] == 0 and abs(w[3]) < 0.1 and w[4] == 1.5
    with pytest.raises(ValueError, match="init"):
        c.parameter(init="gaussian")
    with pytest.raises(ValueError, match="not finite"):
        c.parameter(init=float("nan"))


# =============================================================================================
# serialisation, dtype, drawing, introspection, composition
def _sample_circuit(dtype=None, init="uniform"):
    c = tql.Circuit(3, dtype=dtype)
    c.h(0)
    c.rx(1, trainable=True, init=init)
    c.cnot(0, 2)
    c.rot(2, trainable=True, init=init)
    c.rz(0, input=1, scale=0.5)
    c.qubitunitary([2, 0], oracle.random_unitary(4, np.random.default_rng(5)))
    c.diagonalunitary([1], oracle.random_phases(2, np.random.default_rng(6)))
    c.crx(1, 0, 0.4)
    return c


def test_state_dict_round_trip(dtype, device, atol):
    torch.manual_seed(1)
    a = _sample_circuit(dtype).to(device)
    b = _sample_circuit(dtype).to(device)            # different random init
    x = torch.rand(3, 2, dtype=REAL[dtype], device=device)
    assert not torch.allclose(a.weights, b.weights)
    sd = a.state_dict()
    assert "weights" in sd
    b.load_state_dict(sd)
    assert torch.equal(a(x), b(x))
    # also through torch.save / torch.load of the state dict
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    c = _sample_circuit(dtype).to(device)
    c.load_state_dict(torch.load(buf))
    assert torch.equal(a(x), c(x))


def test_deepcopy_is_independent(device):
    a = _sample_circuit().to(device)
    x = torch.rand(2, 2, device=device)
    a(x)                                              # plans cached
    b = copy.deepcopy(a)
    assert torch.equal(a(x), b(x))
    assert b.weights is not a.weights
    with torch.no_grad():
        b.weights += 0.5
    assert not torch.allclose(a(x), b(x))
    b.h(1)
    assert len(b) == len(a) + 1


def test_copy_method_and_torch_module_api():
    a = _sample_circuit()
    b = a.copy()
    assert torch.equal(a(torch.ones(1, 2)), b(torch.ones(1, 2)))
    assert [n for n, _ in a.named_parameters()] == ["weights"]
    assert "n_wires=3" in repr(a)


def test_pickle_round_trip():
    a = _sample_circuit()
    x = torch.rand(2, 2)
    b = pickle.loads(pickle.dumps(a))
    assert torch.equal(a(x), b(x))


def test_double_switches_to_complex128(atol):
    c = _sample_circuit()
    x = torch.rand(2, 2)
    out32 = c(x)
    assert c.dtype == torch.complex64 and out32.dtype == torch.complex64
    assert c.double() is c
    assert c.dtype == torch.complex128 and c.weights.dtype == torch.float64
    out64 = c(x.double())
    assert out64.dtype == torch.complex128
    close(out64, N(out32), ATOL[torch.complex64])
    # float() goes back
    c.float()
    assert c.dtype == torch.complex64 and c(x).dtype == torch.complex64


def test_double_after_build_matches_oracle():
    c = _sample_circuit()
    c.double()
    x = torch.rand(2, 2, dtype=torch.float64)
    w = S.weights_of(c)
    u = oracle.random_unitary(4, np.random.default_rng(5))
    dg = oracle.random_phases(2, np.random.default_rng(6))
    xs = N(x)
    ops = [("H", 0, ()), ("RX", 1, (w[0],)), ("CNOT", (0, 2), ()), ("ROT", 2, tuple(w[1:4])),
           ("RZ", 0, (0.5 * xs[:, 1],)), (u, (2, 0), ()), (np.diag(dg), (1,), ()), ("CRX", (1, 0), (0.4,))]
    ref = oracle.run_ops(ops, 3, S.zero_states(3))
    close(c(x), ref, 1e-10)


def test_text_drawing():
    c = tql.Circuit(4)
    c.h(0)
    c.cnot(0, 1)
    c.rx(2, 0.3)
    c.ry(3, trainable=True)
    c.rz(1, input=0, scale=0.5)
    c.swap(2, 3)
    text = str(c)
    lines = text.splitlines()
    assert len(lines) == 4
    for w, line in enumerate(lines):
        assert line.startswith(f"q{w}:")
    assert len({len(line) for line in lines}) == 1, "wires are not aligned:\n" + text
    for piece in ("H", "●", "X", "RX(0.3)", "RY(w0)", "RZ(0.5*x0)", "SWAP"):
        assert piece in text, piece
    assert "●" in lines[0] and "X" in lines[1]
    assert c.draw() == text
    with pytest.raises(ValueError, match="style"):
        c.draw("svg")


def test_text_drawing_of_the_inverse():
    c = tql.Circuit(2)
    c.crx(0, 1, 0.3)
    c.rx(0, 0.2)
    c.h(1)
    lines = str(c.inverse()).splitlines()
    assert len(lines) == 2
    assert "RX†(0.2)" in lines[0] and "●" in lines[0]
    assert "RX†(0.3)" in lines[1] and "H" in lines[1] and "H†" not in lines[1]   # H is self-inverse
    assert lines[1].index("H") < lines[1].index("RX†(0.3)")                    # reversed order


def _conditioned_circuit():
    c = tql.MixedCircuit(4)
    c.h(0).h(1).measure([0, 1])
    c.x(3, condition={0: 0})                  # reads q0 as 0: built as flips around IF1:X
    c.x(2, condition={0: 0})                  # again: the flips of both share position 3
    c.x(3, condition=0)                       # reads q0 as 1
    c.cnot(2, 3, condition={0: 1, 1: 0})
    return c


def test_text_drawing_of_classical_conditions():
    """◉ on a wire read as 1, ○ on one read as 0; the flips that implement a 0 condition are
    not drawn (they are no gate of the user's)."""
    c = _conditioned_circuit()
    lines = str(c).splitlines()
    assert len(lines) == 4 and "flip" not in str(c)
    q0 = [ch for ch in lines[0] if ch in "◉○"]
    assert q0 == ["○", "○", "◉", "◉"]
    assert [ch for ch in lines[1] if ch in "◉○●"] == ["○"]
    assert [ch for ch in lines[2] if ch in "◉○●X"] == ["X", "●"]
    assert lines[3].count("X") == 3
    # each op in its own column: the marks line up with their targets
    for col in (lines[0].index("○"), lines[0].rindex("◉")):
        assert lines[3][col] in "X│" or lines[2][col] in "X│"


def test_text_drawing_of_multicontrolled_x_and_instructions():
    c = tql.MixedCircuit(3)
    c.mcx([2, 0, 1]).measure(0).reset([1, 2]).channel(tql.mixed.bit_flip(0.1), 2)
    lines = str(c).splitlines()
    assert "●" in lines[2] and "●" in lines[0] and "X" in lines[1] and "MULTICONTROLLEDX" not in str(c)
    assert "measure" in lines[0] and "reset[0]" in lines[1] and "reset[1]" in lines[2]
    assert "bit_flip" in lines[2]


def test_text_drawing_folds_wide_circuits():
    from torchquantum_layers.drawing import MAX_WIDTH, draw_text
    c = tql.Circuit(3)
    labels = []
    for i in range(60):
        c.rx(i % 3, 0.01 * i + 0.001)
        labels.append(f"RX({0.01 * i + 0.001:.3g})")
    c.cnot(0, 2)
    text = str(c)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= MAX_WIDTH
    blocks = text.split("\n\n")
    assert len(blocks) > 2
    for b, block in enumerate(blocks):
        rows = block.splitlines()
        assert [r[:4] for r in rows] == ["q0: ", "q1: ", "q2: "]
        assert len({len(r) for r in rows}) == 1, block
        assert all(r.endswith("»") for r in rows) == (b + 1 < len(blocks))
        assert all(r[4] == "«" for r in rows) == (b > 0)
    # nothing lost, in order: the unfolded drawing has the same labels on each wire
    flat = draw_text(c, max_width=None).splitlines()
    assert len(flat) == 3 and len(flat[0]) > MAX_WIDTH
    for w in range(3):
        got = "".join(block.splitlines()[w][4:].strip("«»") for block in blocks)
        assert got.replace("─", "") == flat[w][4:].replace("─", "")
        assert [lab for lab in labels[w::3]] == [p for p in got.replace("│", "─").split("─")
                                                  if p.startswith("RX")]
    assert "●" in blocks[-1] and "X" in blocks[-1].splitlines()[2]
    with pytest.raises(ValueError, match="max_width"):
        draw_text(c, max_width=0)


def test_count_ops_and_depth():
    c = tql.Circuit(3)
    c.h(0)
    c.h(1)
    c.cx(0, 1)
    c.rz(2, 0.1)
    c.cnot(1, 2)
    c.h(0)
    c.toffoli(0, 1, 2)
    assert c.count_ops() == {"H": 3, "CNOT": 2, "RZ": 1, "TOFFOLI": 1}
    # levels: h0,h1 | cx01 | rz2 (1) | cnot12 -> 3 | h0 -> 3 | toffoli -> 4
    assert c.depth == 4
    assert len(c) == 7
    assert tql.Circuit(2).depth == 0 and tql.Circuit(2).count_ops() == {}
    assert c.num_parameters == 0 and c.n_inputs == 0


def test_num_parameters_and_n_inputs():
    c = tql.Circuit(3)
    p = c.parameter(init=0.3)
    c.rx(0, p)
    c.ry(1, p)
    c.u3(2, trainable=True)
    c.rot(0, input=(0, 4, 1))
    c.crz(0, 1, tql.Input(2))
    assert c.num_parameters == 4
    assert c.n_inputs == 5


def _pair(dtype=None):
    """(a on 3 wires, b on 2 wires, b_wide: the same gates as b on 3 wires, for references)."""
    a = tql.Circuit(3, dtype=dtype)
    a.h(0)
    a.ry(0, trainable=True, init=0.2)
    p = a.parameter(init=-0.7)
    a.ry(1, p)
    a.cnot(0, 2)
    a.rz(2, tql.Param(p.index, 2.0))

    def make_b(n):
        b = tql.Circuit(n, dtype=dtype)
        q = b.parameter(init=1.3)
        b.crx(0, 1, q)
        b.qubitunitary([1], oracle.random_unitary(2, np.random.default_rng(3)))
        b.ry(0, input=0)
        b.rz(1, tql.Param(q.index, -0.5))
        return b
    return a, make_b(2), make_b(3)


def test_add_combines_parameters(dtype, atol):
    a, b, b_wide = _pair(dtype)
    wa, wb = N(a.weights), N(b.weights)
    x = torch.rand(3, 1, dtype=REAL[dtype])
    c = a + b
    assert isinstance(c, tql.Circuit) and c.n_wires == 3
    assert len(c) == len(a) + len(b) and len(a) == 5 and len(b) == 4    # a and b untouched
    assert c.num_parameters == 3 and a.num_parameters == 2 and b.num_parameters == 1
    np.testing.assert_array_equal(N(c.weights), np.concatenate([wa, wb]))
    # b's Param(0) now points at c.weights[2], scales kept
    assert c.ops[5].angles == (tql.Param(2, 1.0),) and c.ops[8].angles == (tql.Param(2, -0.5),)
    close(c(x), N(b_wide(x, state=a(x))), atol)
    # gradient of the combined circuit reaches all three parameters
    c(x).abs().pow(2)[:, 1].sum().backward()
    assert c.weights.grad.shape == (3,) and (c.weights.grad != 0).all()


def test_append_in_place(dtype, atol):
    a, b, b_wide = _pair(dtype)
    ref_a = a.copy()
    x = torch.rand(2, 1, dtype=REAL[dtype])
    out = a.append(b)
    assert out is a and a.num_parameters == 3 and len(a) == 9
    close(a(x), N(b_wide(x, state=ref_a(x))), atol)
    # appending b again: the second copy gets its own parameter
    a.append(b)
    assert a.num_parameters == 4 and len(a) == 13
    assert a.ops[12].angles == (tql.Param(3, -0.5),)
    b_moved = b_wide.copy()
    with torch.no_grad():
        a.weights[3] += 1.0
        b_moved.weights[0] += 1.0
    close(a(x), N(b_moved(x, state=b_wide(x, state=ref_a(x)))), atol)


def test_append_bad_arguments():
    a = tql.Circuit(2)
    with pytest.raises(TypeError, match="Circuit"):
        a.append("H")
    with pytest.raises(ValueError, match="3 wires"):
        a.append(tql.Circuit(3))


# =============================================================================================
# bad input: ValueError / TypeError naming the fault
def test_wire_out_of_range():
    c = tql.Circuit(3)
    with pytest.raises(ValueError, match=r"CNOT: wire 3 is out of range for 3 wires"):
        c.cnot(0, 3)
    with pytest.raises(ValueError, match=r"RX: wire -1 is out of range"):
        c.rx(-1, 0.1)
    with pytest.raises(ValueError, match=r"MULTIRZ: wire 7 is out of range"):
        c.multirz([0, 7], 0.1)
    with pytest.raises(TypeError, match=r"H: wire 0.5 is not an int"):
        c.h(0.5)


def test_repeated_wires():
    c = tql.Circuit(3)
    with pytest.raises(ValueError, match=r"CNOT: repeated wires \(1, 1\)"):
        c.cnot(1, 1)
    with pytest.raises(ValueError, match=r"MULTIRZ: repeated wires"):
        c.multirz([0, 2, 0], 0.3)
    with pytest.raises(ValueError, match="repeated wires"):
        c.qubitunitary([1, 1], np.eye(4))


def test_wrong_number_of_wires():
    c = tql.Circuit(4)
    with pytest.raises(ValueError, match=r"CNOT acts on 2 wire\(s\)"):
        c.add("CNOT", (0,))
    with pytest.raises(ValueError, match=r"TOFFOLI acts on 3 wire\(s\)"):
        c.add("toffoli", (0, 1))
    with pytest.raises(TypeError, match=r"cnot acts on 2 wire\(s\)"):
        c.cnot(0)
    with pytest.raises(ValueError, match=r"MULTICONTROLLEDX needs at least 2 wires"):
        c.multicontrolledx([0])
    with pytest.raises(ValueError, match=r"QUBITUNITARY on wires \(0, 1\) needs a matrix of shape \(4, 4\)"):
        c.qubitunitary([0, 1], np.eye(2))
    with pytest.raises(ValueError, match=r"DIAGONALUNITARY on wires \(0,\) needs a diagonal of shape \(2,\)"):
        c.diagonalunitary([0], np.ones(4))
    assert len(c) == 0, "a failed add must not leave an op behind"


def test_wrong_number_of_parameters():
    c = tql.Circuit(2)
    with pytest.raises(ValueError, match=r"RX takes 1 parameter\(s\), got 0"):
        c.rx(0)
    with pytest.raises(ValueError, match=r"ROT takes 3 parameter\(s\), got 2"):
        c.rot(0, 0.1, 0.2)
    with pytest.raises(ValueError, match=r"H takes 0 parameter\(s\), got 1"):
        c.h(0, 0.1)
    with pytest.raises(ValueError, match=r"CNOT takes 0 parameter\(s\), got 1"):
        c.cnot(0, 1, 0.3)
    with pytest.raises(ValueError, match=r"ROT takes 3 parameter\(s\) but input= names 1 column"):
        c.rot(0, input=0)
    with pytest.raises(ValueError, match=r"RY: give angles positionally, or trainable=True, or input="):
        c.ry(0, 0.3, input=0)
    with pytest.raises(ValueError, match=r"RX: Param index 5 does not exist"):
        c.rx(0, tql.Param(5))
    with pytest.raises(ValueError, match=r"H takes no matrix"):
        c.add("H", 0, matrix=np.eye(2))
    with pytest.raises(ValueError, match=r"QUBITUNITARY needs matrix="):
        c.add("QubitUnitary", [0])
    assert len(c) == 0 and c.num_parameters == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_fixed_angle(bad):
    c = tql.Circuit(2)
    with pytest.raises(ValueError, match=r"RX: angle .* is not finite"):
        c.rx(0, bad)
    with pytest.raises(ValueError, match=r"CRZ: angle .* is not finite"):
        c.crz(0, 1, torch.tensor(bad))
    with pytest.raises(ValueError, match=r"U3: angle .* is not finite"):
        c.u3(1, 0.1, bad, 0.2)


@pytest.mark.parametrize("diff_method", ["backprop", "adjoint", "parameter-shift"])
def test_non_finite_trainable_angles_are_named_when_run(diff_method):
    c = tql.Circuit(2)
    c.ry(0, trainable=True).rx(1, trainable=True).cnot(0, 1)
    with torch.no_grad():
        c.weights[1] = float("nan")
    with pytest.raises(ValueError, match=r"trainable angle\(s\) at weights index \[1\] are NaN or inf"):
        tql.expval(c, "Z0", diff_method=diff_method)
    with pytest.raises(ValueError, match=r"weights index \[0\]"):
        c.weights.data[:] = 0.0
        tql.expval(c, "Z0", diff_method=diff_method, weights=torch.tensor([float("inf"), 0.0]))
    with torch.no_grad():
        c.weights.zero_()
    assert float(tql.expval(c, "Z0", diff_method=diff_method).detach()) == pytest.approx(1.0)


def test_numpy_numbers_as_angles_and_columns():
    c = tql.Circuit(1)
    c.rx(0, np.float32(0.5)).ry(0, np.int64(1)).rz(0, np.array(0.25)).rx(0, input=np.int64(0))
    c.ry(0, tql.Input(np.int64(0), 0.5))
    assert [op.angles for op in c.ops[:3]] == [(pytest.approx(0.5),), (1.0,), (0.25,)]
    assert c.ops[3].angles == (tql.Input(0),) and type(c.ops[4].angles[0].column) is int
    with pytest.raises(TypeError, match=r"RX: a fixed angle must be a number, got an array of shape \(2,\)"):
        c.rx(0, np.array([0.1, 0.2]))


@pytest.mark.parametrize("how", ["input=", "Input", "Param", "parameter", "trainable"])
def test_non_finite_scale(how):
    c = tql.Circuit(1)
    bad = float("nan")
    with pytest.raises(ValueError, match="finite"):
        if how == "input=":
            c.ry(0, input=0, scale=bad)
        elif how == "Input":
            c.ry(0, tql.Input(0, float("inf")))
        elif how == "Param":
            c.ry(0, tql.Param(c.parameter(init=0.1).index, bad))
        elif how == "parameter":
            c.parameter(init=0.1, scale=bad)
        else:
            c.ry(0, trainable=True, init=0.1, scale=bad)


def test_non_number_angle():
    c = tql.Circuit(1)
    with pytest.raises(TypeError, match=r"RX: angle '0.3' is not a number"):
        c.rx(0, "0.3")
    with pytest.raises(TypeError, match=r"RX: a fixed angle must be a number, got a tensor of shape \(2,\)"):
        c.rx(0, torch.tensor([0.1, 0.2]))


@pytest.mark.parametrize("col", [-1, 1.5, "0", True])
def test_bad_input_column(col):
    c = tql.Circuit(1)
    with pytest.raises(ValueError, match=rf"RY: input column {col!r} must be a non-negative int"):
        c.ry(0, input=col)
    assert len(c) == 0


def test_bad_input_column_as_input_object():
    c = tql.Circuit(1)
    with pytest.raises(ValueError, match="input column -1"):
        c.ry(0, tql.Input(-1))


def test_input_column_out_of_range_at_call_time():
    c = tql.Circuit(2)
    c.ry(0, input=0)
    c.rx(1, input=3)
    assert c.n_inputs == 4
    with pytest.raises(ValueError, match=r"input column 3 but x has only 2 column\(s\) \(shape \(5, 2\)\)"):
        c(torch.zeros(5, 2))


def test_missing_x_for_input_circuit():
    c = tql.Circuit(2)
    c.ry(0, input=0)
    with pytest.raises((ValueError, TypeError), match=r"(?i)input|\bx\b"):
        c()


def test_x_of_wrong_dimension():
    c = tql.Circuit(2)
    c.ry(0, input=0)
    with pytest.raises(ValueError, match=r"input features must have shape \(B, F\) or \(F,\), got \(2, 3, 1\)"):
        c(torch.zeros(2, 3, 1))
    with pytest.raises(ValueError, match=r"input features must have shape .*got \(\)"):
        c(torch.tensor(0.5))


def test_complex_x():
    c = tql.Circuit(1)
    c.ry(0, input=0)
    with pytest.raises(TypeError, match=r"input features must be real, got torch.complex64"):
        c(torch.zeros(3, 1, dtype=torch.complex64))


def test_non_finite_x():
    c = tql.Circuit(1)
    c.ry(0, input=0)
    with pytest.raises(ValueError, match="NaN or inf"):
        c(torch.tensor([[0.1], [float("nan")]]))


def test_state_length_not_power_of_two():
    c = tql.Circuit(2)
    c.h(0)
    with pytest.raises(ValueError, match=r"state length 6 is not a power of two \(shape \(1, 6\)\)"):
        c(state=torch.zeros(1, 6, dtype=torch.complex64))
    with pytest.raises(ValueError, match=r"state must have shape \(batch, 2\*\*n\)"):
        c(state=torch.zeros(1, 2, 2, 2, dtype=torch.complex64))
    # a 3-d state is a batch of density matrices: here one of 1 qubit, for a 2-wire circuit
    with pytest.raises(ValueError, match=r"state has 1 qubits \(shape \(1, 2, 2\)\) but the circuit has 2"):
        c(state=torch.zeros(1, 2, 2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="state must be a tensor"):
        c(state=[1, 0, 0, 0])


def test_state_with_wrong_qubit_count():
    c = tql.Circuit(3)
    with pytest.raises(ValueError, match=r"state has 2 qubits \(shape \(4, 4\)\) but the circuit has 3 wires"):
        c(state=tql.zero_state(2, batch=4))


def test_state_batch_mismatch_with_x():
    c = tql.Circuit(1)
    c.ry(0, input=0)
    with pytest.raises(ValueError, match="state batch 3 does not match input batch 4"):
        c(torch.zeros(4, 1), state=tql.zero_state(1, batch=3))


def test_state_dtype_mismatch():
    c = tql.Circuit(2)
    with pytest.raises(TypeError, match=r"state dtype torch.complex128 does not match the circuit's "
                                        r"torch.complex64.*double\(\)"):
        c(state=tql.zero_state(2, dtype=torch.complex128))
    c.double()
    with pytest.raises(TypeError, match="state dtype torch.complex64 does not match"):
        c(state=tql.zero_state(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="state dtype must be complex64 or complex128, got torch.float64"):
        c(state=torch.zeros(1, 4, dtype=torch.float64))


def test_device_mismatch():
    c = tql.Circuit(1)
    c.ry(0, input=0)
    with pytest.raises(TypeError, match="input x is on meta but the circuit is on cpu"):
        c(torch.zeros(2, 1, device="meta"))
    with pytest.raises(TypeError, match="state is on meta but the circuit is on cpu"):
        c(torch.zeros(2, 1), state=torch.zeros(1, 2, dtype=torch.complex64, device="meta"))


def test_non_unitary_qubit_unitary():
    c = tql.Circuit(2)
    with pytest.raises(ValueError, match=r"QUBITUNITARY: matrix is not unitary"):
        c.qubitunitary([0, 1], 2 * np.eye(4))
    with pytest.raises(ValueError, match=r"QUBITUNITARY: matrix is not unitary"):
        c.qubitunitary([0], np.array([[1.0, 1.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"QUBITUNITARY: matrix is not unitary"):
        c.qubitunitary([0], np.array([[np.nan, 0], [0, 1]]))
    with pytest.raises(ValueError, match=r"DIAGONALUNITARY: diagonal entries must have modulus 1"):
        c.diagonalunitary([0], np.array([1.0, 0.5]))
    assert len(c) == 0


def test_unknown_gate_name():
    c = tql.Circuit(2)
    with pytest.raises(ValueError, match=r"unknown gate 'FOO'; known gates: .*CNOT"):
        c.add("FOO", 0)
    with pytest.raises(ValueError, match=r"unknown gate 'rxy'"):
        c.add("rxy", 0, 0.1)
    # names and aliases are case-insensitive
    c.add("cx", (0, 1)).add("Phase", 0, 0.2).add("multi_rz", (0, 1), 0.1)
    assert c.count_ops() == {"CNOT": 1, "P": 1, "MULTIRZ": 1}


@pytest.mark.parametrize("n", [0, -1, 2.0, True, "3"])
def test_bad_n_wires(n):
    with pytest.raises(ValueError, match=r"Circuit: n_wires must be a positive int"):
        tql.Circuit(n)


def test_state_too_large_fails_before_allocating():
    with pytest.raises(MemoryError, match=r"60 qubits.*needs [\d,]+ bytes"):
        tql.zero_state(60)
    c = tql.Circuit(60)
    c.h(0)
    with pytest.raises(MemoryError, match="bytes"):
        c()
    with pytest.raises(MemoryError, match="bytes"):
        tql.random_state(61, batch=4)


def test_a_nearly_unitary_matrix_is_stored_as_its_nearest_unitary():
    """A complex64 unitary passes the check to ~1e-7; stored as the polar factor, every diff_method
    of a complex128 circuit then sees one exactly unitary gate (the adjoint drifted by ~1e-7)."""
    rng = np.random.default_rng(11)
    a = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
    q, _ = np.linalg.qr(a)
    u32 = torch.tensor(q, dtype=torch.complex64)
    phases = torch.exp(1j * torch.tensor(rng.uniform(0, 6.28, 4), dtype=torch.float32))
    c = tql.Circuit(2, dtype=torch.complex128)
    c.ry(0, trainable=True).qubit_unitary([0, 1], u32).diagonal_unitary([0, 1], phases).rx(1, trainable=True)
    for key in ("_data0", "_data1"):
        m = getattr(c, key).numpy()
        np.testing.assert_allclose(m @ m.conj().T if m.ndim == 2 else np.abs(m), np.eye(4) if m.ndim == 2 else 1,
                                   atol=1e-14)
    # the polar factor is the unitary nearest the given matrix (numpy's SVD as the oracle)
    w, _, vh = np.linalg.svd(u32.numpy().astype(np.complex128))
    np.testing.assert_allclose(c._data0.numpy(), w @ vh, atol=1e-14)
    grads = []
    for method in ("backprop", "adjoint", "parameter-shift"):
        c.zero_grad()
        tql.expval(c, "Z0 X1", diff_method=method).sum().backward()
        grads.append(c.weights.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-13) and torch.allclose(grads[0], grads[2], atol=1e-13)


def test_wires_that_are_not_ints_are_named():
    c = tql.Circuit(2)
    with pytest.raises(TypeError, match="X: wires must be an int or a sequence of ints, got 0.5"):
        c.add("x", 0.5)
    with pytest.raises(TypeError, match="X: wire 0.5 is not an int"):
        c.x(0.5)
    with pytest.raises(TypeError, match="CNOT: wires must be an int or a sequence of ints, got 'ab'"):
        c.add("cnot", "ab")
    c.add("x", np.int64(1)).add("cnot", (np.int64(1), torch.tensor(0)))
    assert [op.wires for op in c.ops] == [(1,), (1, 0)]
    # the text drawing folds at max_width=, and keeps one line per wire with None
    for _ in range(40):
        c.rx(0, 0.25)
    assert max(len(line) for line in c.draw("text", max_width=60).splitlines()) <= 60
    assert len(c.draw("text", max_width=None).splitlines()) == 2


def test_import_weights_and_extend_ops():
    """Shared-angle copies of another circuit's ops (templates.qpe's route): the angles are copied
    once, every copy reads them, and records that point outside the circuit are refused."""
    from torchquantum_layers.circuit import Op, Param
    sub = tql.Circuit(1, dtype=torch.complex128)
    sub.ry(0, trainable=True)
    with torch.no_grad():
        sub.weights.fill_(0.4)
    c = tql.Circuit(2, dtype=torch.complex128)
    c.rx(1, trainable=True)
    offset = c.import_weights(sub)
    assert offset == 1 and c.weights.detach().tolist() == pytest.approx([c.weights[0].item(), 0.4])
    ry = sub.ops[0]
    c.extend_ops([Op(ry.gate, (0,), (Param(offset, 1.0),)), Op(ry.gate, (0,), (Param(offset, 1.0),))])
    psi = c()[0].detach().numpy()
    expected = np.kron(oracle.ry(0.8) @ [1, 0], oracle.rx(c.weights[0].item()) @ [1, 0])
    np.testing.assert_allclose(psi, expected, atol=1e-12)
    with pytest.raises(TypeError, match="expected Op records"):
        c.extend_ops(["RY"])
    with pytest.raises(ValueError, match="reads a trainable angle this circuit does not have"):
        c.extend_ops([Op(ry.gate, (0,), (Param(5, 1.0),))])
    with pytest.raises(ValueError, match="reads matrix '_data9'"):
        c.extend_ops([Op(tql.get_gate("QUBITUNITARY"), (0,), (), "_data9")])
