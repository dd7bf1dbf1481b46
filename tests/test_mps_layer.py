"""QuantumLayer(simulator="mps"): the MPS simulator behind the nn.Module, against the
state-vector layer, inside an nn.Sequential that trains, and its refusals."""
import copy
import pickle

import pytest
import torch
from torch import nn

import torchquantum_layers as tql


def _pair(n, dtype, **mps_kwargs):
    """The same template layer on the state vector and on MPS (same weights)."""
    torch.manual_seed(0)
    sv = tql.QuantumLayer.from_template(n, 2, measure=["Z0", "Z3 Z4", "X1", "0.5*Y2 Y5 - Z7"], dtype=dtype)
    mp = tql.QuantumLayer.from_template(n, 2, measure=["Z0", "Z3 Z4", "X1", "0.5*Y2 Y5 - Z7"], dtype=dtype,
                                        simulator="mps", **mps_kwargs)
    mp.load_state_dict(sv.state_dict())
    return sv, mp


def test_values_and_gradients_equal_the_state_vector_layer(dtype, atol):
    sv, mp = _pair(10, dtype, max_bond=1024, cutoff=0.0)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    x = torch.rand(5, 10, dtype=real, requires_grad=True)
    out_sv, out_mp = sv(x), mp(x)
    assert out_mp.shape == (5, 4) and out_mp.dtype == real
    torch.testing.assert_close(out_mp, out_sv, atol=10 * atol, rtol=0)
    w = torch.randn(5, 4, dtype=real)
    g_sv = torch.autograd.grad((out_sv * w).sum(), (x, sv.weights))
    g_mp = torch.autograd.grad((out_mp * w).sum(), (x, mp.weights))
    for a, b in zip(g_mp, g_sv):
        torch.testing.assert_close(a, b, atol=100 * atol, rtol=0)
    torch.testing.assert_close(mp(x[0]), out_sv[0], atol=10 * atol, rtol=0)       # one row (F,)


def test_24_qubit_classifier_trains_in_sequential():
    torch.manual_seed(1)
    n = 24
    layer = tql.QuantumLayer.from_template(n, 1, simulator="mps", max_bond=16)
    model = nn.Sequential(nn.Linear(6, n), nn.Tanh(), layer, nn.Linear(n, 2))
    x = torch.randn(16, 6)
    y = (x[:, 0] > 0).long()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        assert torch.isfinite(layer.weights.grad).all() and layer.weights.grad.abs().sum() > 0
        opt.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < losses[0]


def test_state_dict_round_trip_and_copies_keep_the_options():
    sv, mp = _pair(8, torch.complex64, max_bond=8, cutoff=1e-8)
    assert set(mp.state_dict()) == set(sv.state_dict())
    fresh = tql.QuantumLayer.from_template(8, 2, measure=["Z0", "Z3 Z4", "X1", "0.5*Y2 Y5 - Z7"],
                                           simulator="mps", max_bond=8, cutoff=1e-8)
    fresh.load_state_dict(mp.state_dict())
    x = torch.rand(3, 8)
    torch.testing.assert_close(fresh(x), mp(x), atol=0, rtol=0)
    for other in (copy.deepcopy(mp), pickle.loads(pickle.dumps(mp))):
        assert (other.simulator, other.max_bond, other.cutoff) == ("mps", 8, 1e-8)
        torch.testing.assert_close(other(x), mp(x), atol=0, rtol=0)
    assert "simulator='mps', max_bond=8" in repr(mp)


def test_truncation_is_the_mps_simulators():
    torch.manual_seed(2)
    layer = tql.QuantumLayer.from_template(12, 3, simulator="mps", max_bond=2)
    x = torch.rand(2, 12)
    ref = tql.mps.expval(layer.circuit, layer.observables, x, max_bond=2)
    torch.testing.assert_close(layer(x), ref, atol=0, rtol=0)


def test_refusals():
    c = tql.Circuit(3)
    tql.templates.angle_encoding(c)
    with pytest.raises(ValueError, match="shots"):
        tql.QuantumLayer(c, "Z0", simulator="mps", shots=100)
    for method in ("adjoint", "parameter-shift"):
        with pytest.raises(ValueError, match="backprop only"):
            tql.QuantumLayer(c, "Z0", simulator="mps", diff_method=method)
    assert tql.QuantumLayer(c, "Z0", simulator="mps", diff_method="auto").diff_method == "backprop"
    noise = tql.NoiseModel().add(tql.mixed.depolarizing(0.01))
    with pytest.raises(ValueError, match="pure states only"):
        tql.QuantumLayer(c, "Z0", simulator="mps", noise_model=noise)
    with pytest.raises(ValueError, match="pure states only"):
        tql.QuantumLayer(tql.MixedCircuit(3).h(0).measure(0), "Z0", simulator="mps")
    with pytest.raises(ValueError, match="only to simulator='mps'"):
        tql.QuantumLayer(c, "Z0", max_bond=4)
    with pytest.raises(ValueError, match="max_bond"):
        tql.QuantumLayer(c, "Z0", simulator="mps", max_bond=0)
    with pytest.raises(ValueError, match="cutoff"):
        tql.QuantumLayer(c, "Z0", simulator="mps", cutoff=1.5)
    wide = tql.Circuit(6).multirz(list(range(5)), 0.3)
    with pytest.raises(ValueError, match="MULTIRZ"):
        tql.QuantumLayer(wide, "Z0", simulator="mps")
