"""Zero-noise extrapolation (tql.mixed.zne) against analytic decays and NumPy.

Oracles: folded circuits are compared with the dense NumPy product of the original gates;
under one-wire depolarising noise after every gate the Bloch vector shrinks by s = 1 − 4p/3 per
gate whatever the rotations, so a folded circuit of m gates gives exactly s^m times the ideal
value; the extrapolations are checked against numpy.polyfit and the Lagrange formula.
"""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed

from . import oracle as O
from .conftest import REAL

TOL = {torch.complex64: 2e-5, torch.complex128: 1e-10}


def _folds(d, scale):
    return math.floor(d * (scale - 1) / 2 + 0.5)


@pytest.mark.parametrize("method", ["global", "left", "random"])
def test_folding_keeps_the_unitary_and_counts_gates(method):
    rng = np.random.default_rng(3)
    angles = rng.uniform(-np.pi, np.pi, 4)
    c = tql.Circuit(3, dtype=torch.complex128)
    c.h(0).cnot(0, 1).ry(1, trainable=True).crx(1, 2, float(angles[1])).u3(2, *map(float, angles[1:]))
    with torch.no_grad():
        c.weights[0] = float(angles[0])
    dense = np.eye(8, dtype=complex)
    for u, wires in [(O.gate_matrix("h"), [0]), (O.gate_matrix("cnot"), [0, 1]), (O.ry(angles[0]), [1]),
                     (O.controlled_matrix(O.rx(angles[1])), [1, 2]), (O.u3(*angles[1:]), [2])]:
        dense = O.full_operator(u, wires, 3) @ dense
    d = len(c.ops)
    for scale in [1, 1.4, 2, 2.6, 3, 4.2, 5]:
        f = mixed.fold_gates(c, scale, method, seed=7)
        assert len(f.ops) == d + 2 * _folds(d, scale)
        assert f.fold_scale == pytest.approx(1 + 2 * _folds(d, scale) / d)
        assert f.weights is c.weights
        np.testing.assert_allclose(f.unitary().detach().numpy(), dense, atol=1e-12)


def test_global_and_left_folding_order():
    c = tql.Circuit(2)
    c.h(0).cnot(0, 1).rz(1, 0.3)
    # scale 3 on 3 gates: 3 folds = C C† C; scale 2.4: 2 folds = C (the last two)† (the last two)
    names = [(op.gate.name, op.adjoint) for op in mixed.fold_gates(c, 3).ops]
    assert names == [("H", False), ("CNOT", False), ("RZ", False), ("RZ", True), ("CNOT", True), ("H", True),
                     ("H", False), ("CNOT", False), ("RZ", False)]
    names = [(op.gate.name, op.adjoint) for op in mixed.fold_gates(c, 2.4).ops]
    assert names == [("H", False), ("CNOT", False), ("RZ", False), ("RZ", True), ("CNOT", True),
                     ("CNOT", False), ("RZ", False)]
    # gate by gate from the left: the first two gates once each
    names = [(op.gate.name, op.adjoint) for op in mixed.fold_gates(c, 2.4, "left").ops]
    assert names == [("H", False), ("H", True), ("H", False), ("CNOT", False), ("CNOT", True), ("CNOT", False),
                     ("RZ", False)]


def _decaying_circuit(dtype, p, device="cpu"):
    c = mixed.MixedCircuit(1, dtype=dtype, noise_model=tql.NoiseModel().add(mixed.depolarizing(p)))
    c.rx(0, input=0).ry(0, trainable=True)
    return c.to(device)


@pytest.mark.parametrize("method", ["global", "left", "random"])
def test_raw_values_decay_by_the_depolarising_factor_per_gate(dtype, device, method):
    p, phi = 0.04, 0.45
    x = torch.tensor([[0.2], [1.1], [-2.0]], dtype=REAL[dtype], device=device)
    c = _decaying_circuit(dtype, p, device)
    with torch.no_grad():
        c.weights[0] = phi
    scales = [1, 2, 3.5]
    _, raw, reached = mixed.zne_expval(c, "Z0", scale_factors=scales, fold_method=method, x=x, return_raw=True)
    s = 1 - 4 * p / 3
    ideal = np.cos(x[:, 0].double().cpu().numpy()) * np.cos(phi)
    expected = np.stack([ideal * s ** (2 + 2 * _folds(2, lam)) for lam in scales])
    np.testing.assert_allclose(raw.detach().double().cpu().numpy(), expected, atol=TOL[dtype])
    np.testing.assert_allclose(reached.double().cpu().numpy(), [1 + _folds(2, lam) for lam in scales])  # 3.5 reaches 4


def test_extrapolations_against_numpy_fits_and_the_exponential_recovers_the_ideal_value(dtype):
    p, phi = 0.05, 0.7
    c = _decaying_circuit(dtype, p)
    with torch.no_grad():
        c.weights[0] = phi
    x = torch.tensor([[0.3], [2.5]], dtype=REAL[dtype])
    s = 1 - 4 * p / 3
    ideal = np.cos(x[:, 0].double().numpy()) * np.cos(phi)
    scales = [1, 2, 3, 4]
    raw = np.stack([ideal * s ** (2 * lam) for lam in scales])
    for kwargs, degree in [({"extrapolation": "richardson"}, 3), ({"extrapolation": "linear"}, 1),
                           ({"extrapolation": "polynomial", "order": 2}, 2)]:
        got = mixed.zne_expval(c, "Z0", scale_factors=scales, x=x, fold_method="left", **kwargs)
        want = [np.polyval(np.polyfit(scales, raw[:, b], degree), 0.0) for b in range(2)]
        np.testing.assert_allclose(got.detach().double().numpy(), want, atol=10 * TOL[dtype])
    # the decay is exactly exponential toward 0 (the maximally mixed value of Z)
    got = mixed.zne_expval(c, "Z0", scale_factors=[1, 3], x=x, extrapolation="exponential")
    np.testing.assert_allclose(got.detach().double().numpy(), ideal, atol=10 * TOL[dtype])
    # the default (Richardson at 1, 3, 5) cuts the error of the noisy value about 26-fold here
    rich = mixed.zne_expval(c, "Z0", x=x).detach().double().numpy()
    assert np.all(np.abs(rich - ideal) < np.abs(raw[0] - ideal) / 20)


def test_exponential_default_asymptote_is_the_maximally_mixed_value_with_readout():
    # H = Z0 + 0.5: depolarising noise leads it to 0.5; read out through flips it leads to 0.5 + (p10 - p01)
    p, phi, p01, p10 = 0.05, 0.6, 0.02, 0.08
    model = tql.NoiseModel().add(mixed.depolarizing(p)).add_readout_error(p01, p10)
    c = mixed.MixedCircuit(1, dtype=torch.complex128, noise_model=model)
    c.ry(0, phi).rz(0, 0.2)
    s, cc, dd = 1 - 4 * p / 3, 1 - p01 - p10, p10 - p01
    got, raw, _ = mixed.zne_expval(c, tql.Hamiltonian.from_string("Z0 + 0.5"), scale_factors=[1, 2],
                                   extrapolation="exponential", return_raw=True)
    # read-out value at scale λ: cc s^(2λ) cos φ + dd + 0.5, an exact exponential toward dd + 0.5
    np.testing.assert_allclose(raw[:, 0].numpy(), [cc * s ** (2 * m) * math.cos(phi) + dd + 0.5 for m in (1, 2)],
                               atol=1e-12)
    assert float(got[0]) == pytest.approx(cc * math.cos(phi) + dd + 0.5, abs=1e-10)


def test_gradient_is_the_extrapolation_of_the_gradients():
    p, phi = 0.03, 0.8
    c = _decaying_circuit(torch.complex128, p)
    x = torch.tensor([[0.4]], dtype=torch.float64)
    scales = [1, 2, 4]
    s = 1 - 4 * p / 3
    lagrange = [np.prod([m / (m - j) for m in scales if m != j]) for j in scales]
    want = sum(w * -np.sin(phi) * np.cos(0.4) * s ** (2 * lam) for w, lam in zip(lagrange, scales))
    for diff_method in ["backprop", "parameter-shift"]:
        with torch.no_grad():
            c.weights[0] = phi
        c.zero_grad()
        mixed.zne_expval(c, "Z0", scale_factors=scales, x=x, diff_method=diff_method, fold_method="left").sum().backward()
        assert float(c.weights.grad[0]) == pytest.approx(want, abs=1e-10)
    w = torch.tensor([phi], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda w: mixed.zne_expval(c, "Z0", x=x, weights=w), (w,))


def test_instructions_keep_their_place_among_folded_gates():
    # RY(θ), a measurement, RY(φ): <Z> = cos θ cos φ, times s per noisy gate run
    theta, phi, p = 0.9, 0.5, 0.06
    s = 1 - 4 * p / 3
    c = mixed.MixedCircuit(1, dtype=torch.complex128, noise_model=tql.NoiseModel().add(mixed.depolarizing(p)))
    c.ry(0, theta).measure(0).ry(0, phi).measure(0)
    for method, scale, gates, places in [("left", 3, 6, [[3, 6]]), ("random", 2, 4, [[3, 4], [1, 4]]),
                                         ("left", 1, 2, [[1, 2]])]:
        f = mixed.fold_gates(c, scale, method, seed=1)
        assert [pos for pos, _ in f.instructions] in places
        value = float(mixed.expval(f, "Z0")[0])
        assert value == pytest.approx(math.cos(theta) * math.cos(phi) * s ** gates, abs=1e-12)
        # without noise the folded circuit is the original one
        f.noise_model = None
        assert float(mixed.expval(f, "X0")[0]) == pytest.approx(0.0, abs=1e-12)
        assert float(mixed.expval(f, "Z0")[0]) == pytest.approx(math.cos(theta) * math.cos(phi), abs=1e-12)
    with pytest.raises(ValueError, match="global folding.*measure"):
        mixed.fold_gates(c, 3, "global")
    # measurements before the first gate or after the last stay there under global folding
    e = mixed.MixedCircuit(1, dtype=torch.complex128)
    e.ry(0, theta).rx(0, phi).measure(0)
    f = mixed.fold_gates(e, 3, "global")
    assert [pos for pos, _ in f.instructions] == [6]
    assert f.instructions[0][1].owner is f


def test_plain_circuit_with_a_separate_noise_model_and_trajectories():
    p, theta = 0.05, 0.6
    model = tql.NoiseModel().add(mixed.depolarizing(p))
    c = tql.Circuit(2, dtype=torch.complex128)
    c.ry(0, theta).rx(1, 2 * theta)
    s = 1 - 4 * p / 3
    # Z0 Z1 keeps a non-identity Pauli on both wires: every gate's channel shrinks it by s
    _, raw, _ = mixed.zne_expval(c, "Z0 Z1", scale_factors=[1, 3], noise_model=model, return_raw=True)
    np.testing.assert_allclose(raw[:, 0].numpy(), [math.cos(theta) * math.cos(2 * theta) * s ** (2 * m) for m in (1, 3)],
                               atol=1e-12)
    exact = mixed.zne_expval(c, "Z0 Z1", scale_factors=[1, 3], noise_model=model)
    T = 4000
    sampled = mixed.zne_expval(c, "Z0 Z1", scale_factors=[1, 3], noise_model=model, simulator="trajectories",
                               n_trajectories=T, generator=torch.Generator().manual_seed(5))
    # Richardson weights (3/2, -1/2) on trajectory means of values in [-1, 1]
    assert abs(float(sampled[0]) - float(exact[0])) < 5 * math.sqrt(1.5 ** 2 + 0.5 ** 2) / math.sqrt(T)


def test_bad_input_is_named():
    c = _decaying_circuit(torch.complex128, 0.01)
    values = torch.ones(3, 2)
    with pytest.raises(ValueError, match="scale factor must be a real number >= 1, got 0.5"):
        mixed.fold_gates(c, 0.5)
    with pytest.raises(ValueError, match=">= 1, got nan"):
        mixed.zne_expval(c, "Z0", scale_factors=[1, float("nan")])
    with pytest.raises(TypeError, match="scale factor"):
        mixed.zne_expval(c, "Z0", scale_factors=[1, "3"])
    with pytest.raises(TypeError, match="scale_factors must be a sequence"):
        mixed.zne_expval(c, "Z0", scale_factors=3)
    with pytest.raises(ValueError, match="at least two scale factors"):
        mixed.zne_expval(c, "Z0", scale_factors=[3])
    with pytest.raises(ValueError, match="scale factor 1 appears twice"):
        mixed.zne_expval(c, "Z0", scale_factors=[1, 1.2])   # 2 gates: 1.2 folds nothing
    with pytest.raises(ValueError, match="method must be one of.*'twice'"):
        mixed.fold_gates(c, 3, "twice")
    with pytest.raises(ValueError, match="no gates to fold"):
        mixed.fold_gates(mixed.MixedCircuit(1), 3)
    with pytest.raises(ValueError, match="method must be one of.*'cubic'"):
        mixed.extrapolate([1, 2, 3], values, "cubic")
    with pytest.raises(ValueError, match="'polynomial' needs an int order with 0 <= order < 3.*got None"):
        mixed.extrapolate([1, 2, 3], values, "polynomial")
    with pytest.raises(ValueError, match="got 3"):
        mixed.extrapolate([1, 2, 3], values, "polynomial", order=3)
    with pytest.raises(ValueError, match="order applies to method='polynomial' only"):
        mixed.extrapolate([1, 2, 3], values, "richardson", order=1)
    with pytest.raises(ValueError, match="asymptote applies to method='exponential' only"):
        mixed.extrapolate([1, 2, 3], values, "linear", asymptote=0.0)
    with pytest.raises(ValueError, match=r"one row per scale factor \(3\), got \(2, 2\)"):
        mixed.extrapolate([1, 2, 3], torch.ones(2, 2))
    with pytest.raises(ValueError, match="one side of the asymptote"):
        mixed.extrapolate([1, 2], torch.tensor([0.5, -0.1]), "exponential")
    with pytest.raises(ValueError, match="simulator must be 'density' or 'trajectories', got 'gpu'"):
        mixed.zne_expval(c, "Z0", simulator="gpu")
    with pytest.raises(ValueError, match="return_std does not apply"):
        mixed.zne_expval(c, "Z0", simulator="trajectories", return_std=True)


def test_folded_circuits_follow_changes_to_the_circuit():
    """zne_expval keeps folded circuits between calls: a new gate, new weights or a new noise model
    must not reuse stale ones (analytic depolarising decays)."""
    p, theta = 0.05, 0.7
    s = 1 - 4 * p / 3
    c = mixed.MixedCircuit(1, dtype=torch.complex128, noise_model=tql.NoiseModel().add(mixed.depolarizing(p)))
    c.ry(0, trainable=True)
    with torch.no_grad():
        c.weights[0] = theta
    _, raw, _ = mixed.zne_expval(c, "Z0", scale_factors=[1, 3], return_raw=True)
    np.testing.assert_allclose(raw[:, 0].detach().numpy(), [math.cos(theta) * s, math.cos(theta) * s ** 3], atol=1e-12)
    c.rx(0, 0.0)                                              # one more noisy gate
    _, raw, _ = mixed.zne_expval(c, "Z0", scale_factors=[1, 3], return_raw=True)
    np.testing.assert_allclose(raw[:, 0].detach().numpy(), [math.cos(theta) * s ** 2, math.cos(theta) * s ** 6], atol=1e-12)
    c.weights = torch.nn.Parameter(torch.tensor([0.2], dtype=torch.float64))
    _, raw, _ = mixed.zne_expval(c, "Z0", scale_factors=[1, 3], return_raw=True)
    np.testing.assert_allclose(raw[:, 0].detach().numpy(), [math.cos(0.2) * s ** 2, math.cos(0.2) * s ** 6], atol=1e-12)
    q = 0.1
    c.noise_model = tql.NoiseModel().add(mixed.depolarizing(q))
    _, raw, _ = mixed.zne_expval(c, "Z0", scale_factors=[1, 3], return_raw=True)
    t = 1 - 4 * q / 3
    np.testing.assert_allclose(raw[:, 0].detach().numpy(), [math.cos(0.2) * t ** 2, math.cos(0.2) * t ** 6], atol=1e-12)
