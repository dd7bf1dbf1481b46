"""torch.func (grad, vjp, jacrev, jacfwd, hessian, vmap, functional_call) over circuits and layers.

Oracles: the NumPy Kronecker simulator (tests/oracle.py, via tests/strategies.py) for states and
expectations, central finite differences of it for Jacobians, closed forms for the Hessian and
marginals. The library's own autograd is never the reference.
"""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, stack_module_state, vjp, vmap

import torchquantum_layers as tql

from . import oracle
from .strategies import as_np as x_np, build, circuit_specs, features, oracle_states, weights_of

TERMS = [(0.7, "Z"), (-0.4, "XY"), (0.25, "YZX"), (0.3, "XXZZ")]      # (coefficient, label on wires 0..)
FD_STEP = 1e-6


def _hamiltonian(n):
    """(tql Hamiltonian, dense NumPy matrix) of the TERMS that fit on n wires."""
    terms = [(c, label) for c, label in TERMS if len(label) <= n]
    text = " + ".join(f"{c} " + " ".join(f"{p}{w}" for w, p in enumerate(label)) for c, label in terms)
    dense = sum(c * oracle.pauli_matrix(label + "I" * (n - len(label))) for c, label in terms)
    return tql.Hamiltonian.from_string(text), dense


def _oracle_energies(recipe, n, weights, x, dense):
    psi = oracle_states(recipe, n, weights, x)
    return np.einsum("bi,ij,bj->b", psi.conj(), dense, psi).real


def _fd_jacobian(f, w):
    """Central differences of the NumPy function f: (P,) -> (B,), as (B, P)."""
    cols = []
    for i in range(len(w)):
        e = np.zeros_like(w)
        e[i] = FD_STEP
        cols.append((f(w + e) - f(w - e)) / (2 * FD_STEP))
    return np.stack(cols, axis=-1)


SLOW_OK = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@SLOW_OK
@given(spec=circuit_specs(max_wires=4, max_ops=8, max_batch=4))
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("route", ["folded", "plain"])
def test_vmap_over_samples_matches_oracle(spec, fuse, route, dtype):
    """Every gate of the table, every angle kind: vmap of a one-sample call over the batch, folded
    into the engine's batch or (as under forward-mode transforms) on the plain torch kernels."""
    from torchquantum_layers import engine_transforms
    c, recipe = build(spec, dtype=dtype, fuse=fuse)
    x = features(spec, dtype)
    folding = engine_transforms.folding_applies
    if route == "plain":
        engine_transforms.folding_applies = lambda circuit: False
    try:
        out = vmap(lambda xi: c(xi[None])[0])(x)
    finally:
        engine_transforms.folding_applies = folding
    ref = oracle_states(recipe, spec.n_wires, weights_of(c), x_np(x))
    ref = np.broadcast_to(ref, (spec.batch, 2 ** spec.n_wires))
    tol = 2e-5 if dtype == torch.complex64 else 1e-10
    np.testing.assert_allclose(out.detach().numpy(), ref, atol=tol)


@SLOW_OK
@given(spec=circuit_specs(min_wires=2, max_wires=4, min_ops=1, max_ops=8, max_batch=3,
                          kinds=("fixed", "new", "shared", "input")))
def test_jacrev_and_jacfwd_match_finite_differences(spec):
    c, recipe = build(spec, dtype=torch.complex128)
    if c.num_parameters == 0:
        return
    H, dense = _hamiltonian(spec.n_wires)
    x = features(spec, torch.complex128)
    w0 = c.weights.detach().clone()

    def energies(w):
        return tql.expval(c, H, x=x, weights=w)

    ref = _fd_jacobian(lambda w: _oracle_energies(recipe, spec.n_wires, w, x_np(x), dense), weights_of(c))
    for transform in (jacrev, jacfwd):
        J = transform(energies)(w0)
        assert J.shape == (spec.batch, c.num_parameters)
        ref = np.broadcast_to(ref, J.shape)      # the oracle keeps one row when no gate reads x
        np.testing.assert_allclose(J.detach().numpy(), ref, atol=1e-7, err_msg=transform.__name__)


def test_hessian_matches_closed_form(dtype):
    """⟨Z⟩ after RY(a) RX(b) on one wire is cos a cos b."""
    c = tql.Circuit(1, dtype=dtype)
    c.ry(0, trainable=True)
    c.rx(0, trainable=True)
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    w = torch.tensor([0.7, -1.3], dtype=real)
    Hs = hessian(lambda w: functional_call(c, {"weights": w}, ()).abs().square() @ torch.tensor(
        [1.0, -1.0], dtype=real))(w)
    a, b = 0.7, -1.3
    ref = np.array([[-np.cos(a) * np.cos(b), np.sin(a) * np.sin(b)],
                    [np.sin(a) * np.sin(b), -np.cos(a) * np.cos(b)]])
    np.testing.assert_allclose(Hs[0].detach().numpy(), ref, atol=1e-5 if dtype == torch.complex64 else 1e-12)
    He = hessian(lambda w: tql.expval(c, "Z0", weights=w)[0])(w)
    np.testing.assert_allclose(He.detach().numpy(), ref, atol=1e-5 if dtype == torch.complex64 else 1e-12)


def _layer_and_recipe(dtype, seed):
    """A 3-wire QuantumLayer (trainable RYs, CNOT chain, input RZs, a trainable CRX) and its oracle
    gate list as a function of (weights, x)."""
    c = tql.Circuit(3, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    for w in range(3):
        c.ry(w, trainable=True)
    c.cnot(0, 1)
    c.cnot(1, 2)
    for w in range(3):
        c.rz(w, input=w)
    c.crx(2, 0, trainable=True)
    with torch.no_grad():
        c.weights.copy_(torch.rand(c.weights.shape, generator=g) * 6 - 3)

    def recipe(w, x):
        return ([("RY", i, (w[i],)) for i in range(3)] + [("CNOT", (0, 1), ()), ("CNOT", (1, 2), ())]
                + [("RZ", i, (x[:, i],)) for i in range(3)] + [("CRX", (2, 0), (w[3],))])
    return tql.QuantumLayer(c, observables=["Z0", "X1 Z2"]), recipe


def _layer_oracle(recipe, w, x):
    psi = oracle.run_ops(recipe(w, x), 3, np.eye(8)[:1])
    obs = [oracle.pauli_matrix("ZII"), oracle.pauli_matrix("IXZ")]
    return np.stack([np.einsum("bi,ij,bj->b", psi.conj(), o, psi).real for o in obs], axis=-1)


def test_ensemble_of_layers_by_vmap_over_stacked_parameters(dtype):
    layers, recipes = zip(*[_layer_and_recipe(dtype, seed) for seed in range(3)])
    params, buffers = stack_module_state(list(layers))
    x = torch.rand(5, 3, dtype=torch.float64 if dtype == torch.complex128 else torch.float32) * 3

    def one(p, b, x):
        return functional_call(layers[0], (p, b), (x,))
    out = vmap(one, in_dims=(0, 0, None))(params, buffers, x)
    assert out.shape == (3, 5, 2)
    for k in range(3):
        ref = _layer_oracle(recipes[k], weights_of(layers[k].circuit), x.double().numpy())
        np.testing.assert_allclose(out[k].detach().numpy(), ref, atol=2e-5 if dtype == torch.complex64 else 1e-10)


def test_per_sample_gradients_by_vmap_of_grad():
    layer, recipe = _layer_and_recipe(torch.complex128, 7)
    params = {k: v.detach() for k, v in layer.named_parameters()}
    x = torch.rand(4, 3, dtype=torch.float64) * 3
    y = torch.rand(4, 2, dtype=torch.float64)

    def loss(p, xi, yi):
        return ((functional_call(layer, p, (xi[None],))[0] - yi) ** 2).sum()
    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)["circuit.weights"]
    w = weights_of(layer.circuit)
    for b in range(4):
        ref = _fd_jacobian(lambda v: np.atleast_1d(((_layer_oracle(recipe, v, x[b:b + 1].numpy())[0] - y[b].numpy())
                                                    ** 2).sum()), w)[0]
        np.testing.assert_allclose(per_sample[b].numpy(), ref, atol=1e-7)


@pytest.mark.parametrize("method", ["adjoint", "parameter-shift"])
def test_first_order_transforms_run_the_requested_method(method):
    """torch.func.grad / vjp with diff_method='adjoint' or 'parameter-shift': weights and inputs."""
    layer, recipe = _layer_and_recipe(torch.complex128, 3)
    c = layer.circuit
    x = torch.rand(3, 3, dtype=torch.float64) * 3
    w0 = c.weights.detach().clone()
    obs = ["Z0", "X1 Z2"]

    def total(w, x):
        return tql.expval(c, obs, x=x, weights=w, diff_method=method).sum()
    gw, gx = grad(total, argnums=(0, 1))(w0, x)
    xs = x.numpy()
    ref_w = _fd_jacobian(lambda v: np.atleast_1d(_layer_oracle(recipe, v, xs).sum()), w0.numpy())[0]
    np.testing.assert_allclose(gw.numpy(), ref_w, atol=1e-7)
    ref_x = np.stack([_fd_jacobian(lambda r: np.atleast_1d(_layer_oracle(recipe, w0.numpy(), np.concatenate(
        [xs[:b], r[None], xs[b + 1:]])).sum()), xs[b])[0] for b in range(3)])
    np.testing.assert_allclose(gx.numpy(), ref_x, atol=1e-7)
    values, pullback = vjp(lambda w: tql.expval(c, obs, x=x, weights=w, diff_method=method), w0)
    np.testing.assert_allclose(values.numpy(), _layer_oracle(recipe, w0.numpy(), xs), atol=1e-10)
    cot = torch.tensor([[1.0, -2.0], [0.5, 0.0], [0.0, 3.0]], dtype=torch.float64)
    ref_vjp = np.einsum("bo,bop->p", cot.numpy(), np.stack(
        [_fd_jacobian(lambda v, o=o: _layer_oracle(recipe, v, xs)[:, o], w0.numpy()) for o in range(2)], axis=1))
    np.testing.assert_allclose(pullback(cot)[0].numpy(), ref_vjp, atol=1e-7)


@pytest.mark.parametrize("method", ["adjoint", "parameter-shift"])
def test_batching_transforms_run_the_requested_method(method):
    """vmap, vmap(grad) and jacrev with diff_method='adjoint' / 'parameter-shift' (folded into the
    circuit's batch) against the oracle and its finite differences; vmap over stacked weights too."""
    layer, recipe = _layer_and_recipe(torch.complex128, 3)
    c = layer.circuit
    x = torch.rand(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(8)) * 3
    w0 = c.weights.detach().clone()
    xs, ws = x.numpy(), w0.numpy()
    obs = ["Z0", "X1 Z2"]

    def f(w, xx):
        return tql.expval(c, obs, x=xx, weights=w, diff_method=method)
    rows = vmap(lambda xi: f(w0, xi[None])[0])(x)
    np.testing.assert_allclose(rows.numpy(), _layer_oracle(recipe, ws, xs), atol=1e-10)
    J = jacrev(f)(w0, x)                                          # (3, 2, P)
    ref = np.stack([_fd_jacobian(lambda v, o=o: _layer_oracle(recipe, v, xs)[:, o], ws) for o in range(2)], axis=1)
    np.testing.assert_allclose(J.numpy(), ref, atol=1e-7)
    per_sample = vmap(grad(lambda w, xi: f(w, xi[None])[0, 1]), in_dims=(None, 0))(w0, x)
    np.testing.assert_allclose(per_sample.numpy(), ref[:, 1], atol=1e-7)
    Jx = jacrev(lambda xx: f(w0, xx)[:, 0])(x)                    # (3, 3, 3): row b depends on x[b] only
    for b in range(3):
        ref_x = _fd_jacobian(lambda r: np.atleast_1d(_layer_oracle(recipe, ws, r[None])[0, 0]), xs[b])[0]
        np.testing.assert_allclose(Jx[b, b].numpy(), ref_x, atol=1e-7)
    stacked = torch.stack([w0, w0 + 0.3])
    out = vmap(lambda w: f(w, x))(stacked)
    np.testing.assert_allclose(out[1].numpy(), _layer_oracle(recipe, ws + 0.3, xs), atol=1e-10)


@pytest.mark.parametrize("method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("transform", ["jacfwd", "hessian", "grad-of-grad"])
def test_forward_mode_and_second_derivatives_are_refused_by_name(method, transform):
    layer, _ = _layer_and_recipe(torch.complex128, 3)
    c = layer.circuit
    x = torch.rand(3, 3, dtype=torch.float64)
    w0 = c.weights.detach().clone()

    def f(w, x):
        return tql.expval(c, "Z0", x=x, weights=w, diff_method=method)
    calls = {
        "jacfwd": lambda: jacfwd(f)(w0, x),
        "hessian": lambda: hessian(lambda w: f(w, x).sum())(w0),
        "grad-of-grad": lambda: grad(lambda w: grad(lambda v: f(v, x).sum())(w).sum())(w0),
    }
    with pytest.raises(ValueError, match=f"diff_method='{method}'.*backprop"):
        calls[transform]()


def test_measurements_under_vmap_and_jacrev(dtype):
    """P(0) = cos²(θ/2), ⟨Z⟩ = cos θ and ρ = |ψ⟩⟨ψ| after RY(θ) on wire 0 of two."""
    real = torch.float32 if dtype == torch.complex64 else torch.float64
    tol = 1e-5 if dtype == torch.complex64 else 1e-12
    c = tql.Circuit(2, dtype=dtype)
    c.ry(0, input=0)
    theta = torch.tensor([0.3, 1.1, -2.0], dtype=real)

    def marginal(t):
        return tql.measure.probabilities(c(t[None, None]), wires=[0])[0, 0]
    np.testing.assert_allclose(vmap(marginal)(theta).numpy(), np.cos(theta.double().numpy() / 2) ** 2, atol=tol)
    np.testing.assert_allclose(vmap(jacrev(marginal))(theta).numpy(), -np.sin(theta.double().numpy()) / 2, atol=tol)

    def z(t):
        return tql.measure.expval_z(c(t[None, None]))[0, 0]
    np.testing.assert_allclose(vmap(jacfwd(z))(theta).numpy(), -np.sin(theta.double().numpy()), atol=tol)

    def rho01(t):
        return tql.measure.reduced_density_matrix(c(t[None, None]), wires=[0])[0, 0, 1].real
    # ρ01 = cos(θ/2) sin(θ/2) = sin(θ)/2
    np.testing.assert_allclose(vmap(jacrev(rho01))(theta).numpy(), np.cos(theta.double().numpy()) / 2, atol=tol)


def test_nan_angles_still_named_under_grad():
    c = tql.Circuit(1, dtype=torch.complex128)
    c.ry(0, trainable=True)
    w = torch.tensor([float("nan")], dtype=torch.float64)
    with pytest.raises(ValueError, match="NaN"):
        grad(lambda w: tql.expval(c, "Z0", weights=w).sum())(w)
    with pytest.raises(ValueError, match="NaN"):
        grad(lambda x: tql.expval(c, "Z0", x=x).sum())(torch.tensor([[float("nan")]], dtype=torch.float64))


def test_qaoa_jacobian_and_vmap_with_backprop():
    """Expected cuts of p=2 QAOA on a 5-ring: jacrev and vmap against the dense QAOA oracle."""
    from torchquantum_layers import optimization as opt

    from .test_qaoa import dense_qaoa, maxcut_costs
    edges = [(i, (i + 1) % 5) for i in range(5)]
    q = opt.QAOA(opt.maxcut(opt.cycle_graph(5)), p=2, dtype=torch.complex128)
    costs = maxcut_costs(5, edges)
    angles = torch.tensor([[0.3, 0.8, 0.5, 0.2], [1.1, -0.4, 0.7, 0.9]], dtype=torch.float64)

    def oracle(a):
        psi = dense_qaoa(costs, a[:2], a[2:])
        return float(np.abs(psi) ** 2 @ costs)
    values = vmap(lambda a: q(a[None], diff_method="backprop")[0])(angles)
    np.testing.assert_allclose(values.numpy(), [oracle(a) for a in angles.numpy()], atol=1e-10)
    J = jacrev(lambda a: q(a, diff_method="backprop"))(angles)
    for s, a in enumerate(angles.numpy()):
        ref = _fd_jacobian(lambda v: np.atleast_1d(oracle(v)), a)[0]
        np.testing.assert_allclose(J[s, s].numpy(), ref, atol=1e-7)
        assert torch.all(J[s, 1 - s] == 0)           # starts are independent


@pytest.mark.parametrize("route", ["small-register circuit", "adjoint sweep"])
def test_qaoa_default_adjoint_under_transforms(route, monkeypatch):
    """QAOA's default adjoint method under grad, vmap, vmap(grad) and jacrev (the vmapped dimension
    folded into the starts), per graph too, against the dense QAOA oracle and its finite
    differences; forward mode and second derivatives refused by name."""
    import importlib

    from torchquantum_layers import optimization as opt

    from .test_qaoa import dense_qaoa, maxcut_costs
    if route == "adjoint sweep":        # what registers beyond 2^13 amplitudes take
        monkeypatch.setattr(importlib.import_module("torchquantum_layers.optimization.qaoa"),
                            "CIRCUIT_ROUTE_MAX_AMPLITUDES", 0)
    n = 6
    graphs = [opt.random_regular_graph(3, n, seed=s) for s in (1, 2)]
    edges = [[(int(u), int(v)) for u, v, *_ in opt.as_graph(g).edges] if hasattr(opt.as_graph(g), "edges") else g
             for g in graphs]
    q = opt.QAOA(opt.maxcut(graphs[0]), p=1, dtype=torch.complex128)
    assert q.diff_method == "adjoint"
    costs = maxcut_costs(n, edges[0])

    def oracle(a, c=costs):
        return float(np.abs(dense_qaoa(c, a[:1], a[1:])) ** 2 @ c)
    angles = torch.tensor([[0.3, 0.8], [1.1, -0.4], [0.5, 0.2]], dtype=torch.float64)
    ref = np.array([oracle(a) for a in angles.numpy()])
    ref_grad = np.stack([_fd_jacobian(lambda v: np.atleast_1d(oracle(v)), a)[0] for a in angles.numpy()])
    np.testing.assert_allclose(vmap(lambda a: q(a))(angles).numpy(), ref, atol=1e-10)
    np.testing.assert_allclose(grad(lambda a: q(a).sum())(angles).numpy(), ref_grad, atol=1e-7)
    np.testing.assert_allclose(vmap(grad(lambda a: q(a)))(angles).numpy(), ref_grad, atol=1e-7)
    J = jacrev(q)(angles)
    np.testing.assert_allclose(J[torch.arange(3), torch.arange(3)].numpy(), ref_grad, atol=1e-7)
    stacked = torch.stack([angles[:2], angles[1:]])                      # (V=2, S=2, 2)
    np.testing.assert_allclose(vmap(q)(stacked).numpy(), np.stack([ref[:2], ref[1:]]), atol=1e-10)
    both = opt.QAOA([opt.maxcut(g) for g in graphs], p=1, dtype=torch.complex128)   # (G, S, 2p) per graph
    per_graph = torch.stack([angles[:2], angles[1:]])[:, None].expand(2, 2, 2, 2)       # (V, G, S, 2)
    costs2 = maxcut_costs(n, edges[1])
    out = vmap(both)(per_graph)
    for g, c in enumerate((costs, costs2)):
        np.testing.assert_allclose(out[0, g].numpy(), [oracle(a, c) for a in angles[:2].numpy()], atol=1e-10)
        np.testing.assert_allclose(out[1, g].numpy(), [oracle(a, c) for a in angles[1:].numpy()], atol=1e-10)
    with pytest.raises(ValueError, match="diff_method='adjoint'.*backprop"):
        jacfwd(q)(angles)
    with pytest.raises(ValueError, match="diff_method='adjoint'.*backprop"):
        hessian(lambda a: q(a).sum())(angles)


def test_vmap_over_parameter_sets_states_and_inputs_matches_oracle(dtype, monkeypatch):
    """vmap over stacked parameter vectors (an ensemble), over input states and over features:
    the vmapped dimension runs as more rows of one batched call (counted), matching the oracle."""
    from torchquantum_layers import engine_transforms
    folds = []
    original = engine_transforms._Fold.__init__

    def counting(self, *args, **kwargs):
        folds.append(args[0])
        original(self, *args, **kwargs)
    monkeypatch.setattr(engine_transforms._Fold, "__init__", counting)
    tol = 2e-5 if dtype == torch.complex64 else 1e-10
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    layers, recipes = zip(*[_layer_and_recipe(dtype, seed) for seed in range(3)])
    x = torch.rand(5, 3, dtype=real, generator=torch.Generator().manual_seed(1)) * 3
    stacked = torch.stack([lay.circuit.weights.detach() for lay in layers])
    out = vmap(lambda w: functional_call(layers[0], {"circuit.weights": w}, (x,)))(stacked)
    for k in range(3):
        ref = _layer_oracle(recipes[k], weights_of(layers[k].circuit), x.double().numpy())
        np.testing.assert_allclose(out[k].detach().numpy(), ref, atol=tol)
    assert folds[-1] == 3

    c = layers[0].circuit
    rng = np.random.default_rng(3)
    psi0 = oracle.random_state(3, rng, batch=4)
    states = torch.as_tensor(psi0, dtype=dtype)
    out = vmap(lambda s, xi: c(xi[None], state=s[None])[0])(states, x[:4])
    w = weights_of(c)
    ref = np.concatenate([oracle.run_ops(recipes[0](w, x[b:b + 1].double().numpy()), 3, psi0[b:b + 1])
                          for b in range(4)])
    np.testing.assert_allclose(out.detach().numpy(), ref, atol=tol)
    assert folds[-1] == 4


def test_jacobian_in_the_features_matches_finite_differences():
    """∂⟨O⟩/∂x by jacrev (the backward's vmap rule) and vmap(grad) against the oracle."""
    layer, recipe = _layer_and_recipe(torch.complex128, 9)
    x = torch.rand(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5)) * 3
    w = weights_of(layer.circuit)
    J = jacrev(lambda xx: layer(xx))(x)                      # (3, 2, 3, 3)
    xs = x.numpy()
    for b in range(3):
        ref = np.stack([_fd_jacobian(lambda r, o=o: np.atleast_1d(_layer_oracle(recipe, w, r[None])[0, o]), xs[b])[0]
                        for o in range(2)])
        np.testing.assert_allclose(J[b, :, b].detach().numpy(), ref, atol=1e-7)
    per_row = vmap(grad(lambda xi: layer(xi[None])[0, 1]))(x)
    np.testing.assert_allclose(per_row.detach().numpy(), J[torch.arange(3), 1, torch.arange(3)].detach().numpy(),
                               atol=1e-12)


def test_fidelity_and_relative_entropy_under_vmap_and_grad():
    """Uhlmann fidelity and relative entropy of ρ(t) = (1−p)|ψ(t)⟩⟨ψ(t)| + p I/2 (ψ(t) = RY(t)|0⟩)
    against a fixed mixed σ: vmap over t against SciPy's sqrtm/logm, grad against their central
    differences."""
    from scipy.linalg import logm, sqrtm
    p = 0.3
    sigma_np = np.array([[0.7, 0.2 - 0.1j], [0.2 + 0.1j, 0.3]])
    sigma = torch.as_tensor(sigma_np)

    def rho_np(t):
        psi = np.array([np.cos(t / 2), np.sin(t / 2)])
        return (1 - p) * np.outer(psi, psi.conj()) + p * np.eye(2) / 2

    def fid_np(t):
        r = sqrtm(rho_np(t))
        return np.trace(sqrtm(r @ sigma_np @ r)).real ** 2

    def rel_np(t):
        r = rho_np(t)
        return np.trace(r @ (logm(r) - logm(sigma_np))).real

    def rho(t):
        psi = torch.stack([torch.cos(t / 2), torch.sin(t / 2)]).to(torch.complex128)
        return ((1 - p) * torch.outer(psi, psi.conj()) + p * torch.eye(2, dtype=torch.complex128) / 2)[None]

    ts = torch.tensor([0.2, 1.3, -2.1], dtype=torch.float64)
    for f, ref in ((lambda t: tql.qinfo.fidelity(rho(t), sigma[None])[0], fid_np),
                   (lambda t: tql.qinfo.relative_entropy(rho(t), sigma[None])[0], rel_np)):
        np.testing.assert_allclose(vmap(f)(ts).numpy(), [ref(t) for t in ts.numpy()], atol=1e-10)
        fd = [(ref(t + FD_STEP) - ref(t - FD_STEP)) / (2 * FD_STEP) for t in ts.numpy()]
        np.testing.assert_allclose(vmap(grad(f))(ts).numpy(), fd, atol=1e-6)


def test_density_matrix_layers_under_transforms():
    """A noisy layer (density matrices, depolarizing after every gate): vmap over samples against the
    Kraus-sum oracle; parameter-shift there is refused by name under a transform."""
    c = tql.Circuit(1, dtype=torch.complex128)
    c.ry(0, input=0)
    c.rx(0, trainable=True)
    with torch.no_grad():
        c.weights.fill_(0.4)
    p = 0.1
    noise = tql.NoiseModel().add(tql.mixed.depolarizing(p))
    layer = tql.QuantumLayer(c, observables="Z0", noise_model=noise)
    x = torch.tensor([[0.3], [1.2], [-0.8]], dtype=torch.float64)
    out = vmap(lambda xi: layer(xi[None])[0])(x)
    # depolarizing(p) shrinks the Bloch vector by 1 − 4p/3 after each gate; ⟨Z⟩ = cos(a) cos(b)
    shrink = (1 - 4 * p / 3) ** 2
    np.testing.assert_allclose(out.detach().numpy().reshape(-1), shrink * np.cos(x[:, 0].numpy()) * np.cos(0.4),
                               atol=1e-10)
    shifted = tql.QuantumLayer(c, observables="Z0", noise_model=noise, diff_method="parameter-shift")
    with pytest.raises(ValueError, match="parameter-shift.*backprop"):
        grad(lambda w: functional_call(shifted, {"circuit.weights": w}, (x,)).sum())(c.weights.detach())


def test_mps_layer_under_grad_and_refused_under_vmap():
    """QuantumLayer(simulator="mps") at a bond that truncates nothing: torch.func.grad against finite
    differences of the dense oracle; vmap refused by name (bond dimensions are value-dependent shapes)."""
    c = tql.Circuit(4, dtype=torch.complex128)
    for w in range(4):
        c.ry(w, trainable=True)
    for w in range(3):
        c.cnot(w, w + 1)
    c.rx(3, trainable=True)
    with torch.no_grad():
        c.weights.copy_(torch.tensor([0.3, -1.1, 0.7, 2.0, 0.4], dtype=torch.float64))
    layer = tql.QuantumLayer(c, observables="Z0 Z3", simulator="mps", max_bond=8)
    x = torch.zeros(2, 0, dtype=torch.float64)
    g = grad(lambda w: functional_call(layer, {"circuit.weights": w}, (x,)).sum())(c.weights.detach())

    def energy(w):
        ops = ([("RY", i, (w[i],)) for i in range(4)] + [("CNOT", (i, i + 1), ()) for i in range(3)]
               + [("RX", 3, (w[4],))])
        psi = oracle.run_ops(ops, 4, np.eye(16)[:1])[0]
        return np.atleast_1d(2 * (psi.conj() @ oracle.pauli_matrix("ZIIZ") @ psi).real)
    np.testing.assert_allclose(g.detach().numpy(), _fd_jacobian(energy, weights_of(c))[0], atol=1e-7)
    with pytest.raises(ValueError, match="vmap.*MPS"):
        vmap(lambda w: functional_call(layer, {"circuit.weights": w}, (x,)))(torch.stack([c.weights.detach()] * 2))


def test_functional_call_on_a_trajectories_layer():
    """A layer on quantum trajectories: functional_call (the weights swapped for a plain tensor)
    gives what the layer gives with those weights, draw for draw (same seed); grad through it
    works, and vmap with randomness="different" runs."""
    c = tql.Circuit(2, dtype=torch.complex128)
    c.ry(0, input=0)
    c.ry(1, trainable=True)
    c.cnot(0, 1)
    c.rx(0, trainable=True)
    noise = tql.NoiseModel().add(tql.mixed.amplitude_damping(0.1))
    x = torch.tensor([[0.4], [1.3], [-0.7]], dtype=torch.float64)
    w = torch.tensor([0.9, -0.5], dtype=torch.float64)

    def layer():
        return tql.QuantumLayer(c, observables="Z0", noise_model=noise, simulator="trajectories",
                                n_trajectories=32, seed=5)
    swapped = functional_call(layer(), {"circuit.weights": w}, (x,))
    reference = layer()
    with torch.no_grad():
        reference.circuit.weights.copy_(w)
    np.testing.assert_allclose(swapped.detach().numpy(), reference(x).detach().numpy(), atol=1e-12)
    g = grad(lambda v: functional_call(layer(), {"circuit.weights": v}, (x,)).sum())(w)
    assert g.shape == w.shape and torch.isfinite(g).all()
    out = vmap(lambda xi: functional_call(layer(), {"circuit.weights": w}, (xi[None],)), randomness="different")(x)
    assert out.shape == (3, 1, 1)
