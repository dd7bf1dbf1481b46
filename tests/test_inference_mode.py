"""Running anything under torch.inference_mode() (as Lightning's validate/test/predict do) must not
leave inference tensors in the library's caches: the next training step would fail to save them
for backward. Each case runs once in inference mode, then trains; the oracle for the gradient is
a central finite difference of the loss."""
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import optimization as opt

from .conftest import REAL

H = tql.Hamiltonian("0.5*Z0 Z1 + X2 + 0.3*Y0 Y1 + Z3")


def _circuit(dtype, device):
    c = tql.Circuit(4, dtype=dtype)
    c.h(0).ry(1, trainable=True).cnot(0, 1).rz(2, input=0).rxx(0, 2, trainable=True).crx(1, 2, trainable=True)
    c.toffoli(0, 1, 3).u3(3, trainable=True).cz(2, 3).rot(1, trainable=True).swap(0, 3).rzz(1, 2, trainable=True)
    c.t(0).sx(2).multirz([0, 1, 3], trainable=True)
    return c.to(device)


def _cases(dtype, device):
    x = torch.rand(3, 1, generator=torch.Generator().manual_seed(0), dtype=REAL[dtype]).to(device)
    for dm in ("backprop", "adjoint", "parameter-shift"):
        c = _circuit(dtype, device)
        yield f"expval-{dm}", c.weights, (lambda c=c, dm=dm: tql.expval(c, H, x=x, diff_method=dm).sum())
    for method in ("loop", "gather", "native"):
        c = _circuit(dtype, device)
        yield f"expectation-{method}", c.weights, (
            lambda c=c, method=method: tql.observables.expectation(c(x), H, method=method).sum())
    c = _circuit(dtype, device)
    layer = tql.QuantumLayer(c, [H, "X1"])
    yield "layer", c.weights, (lambda: layer(x).sum())
    c = _circuit(dtype, device)
    yield "probabilities", c.weights, (lambda: tql.measure.probabilities(c(x), wires=[0, 2])[:, 1].sum())
    problem = opt.maxcut([(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)])
    for dm in ("backprop", "adjoint"):
        q = opt.QAOA(problem, p=2, diff_method=dm, dtype=dtype, device=device)
        angles = torch.nn.Parameter(torch.tensor([[0.3, 0.5, -0.2, 0.4]], dtype=REAL[dtype], device=device))
        yield f"qaoa-{dm}", angles, (lambda q=q, a=angles: q(a).sum())
    m = tql.MixedCircuit(3, dtype=dtype)
    m.ry(0, trainable=True).cnot(0, 1).channel(tql.mixed.depolarizing(0.1), 1).rx(2, trainable=True)
    m = m.to(device)
    yield "density", m.weights, (lambda: tql.mixed.expval(m, "Z0 Z1 + X2").sum())
    yield "density-shift", m.weights, (lambda: tql.mixed.expval(m, "Z0 Z1 + X2", diff_method="parameter-shift").sum())
    t = tql.MixedCircuit(3, dtype=dtype)
    # Pauli branches drawn independently of the angles: a seeded estimate is smooth in them
    t.ry(0, trainable=True).cnot(0, 1).channel(tql.mixed.depolarizing(0.2), 1).rx(2, trainable=True)
    t = t.to(device)
    seeded = (lambda: tql.mixed.trajectories.expval(
        t, "Z0 Z1 + X2", n_trajectories=8, generator=torch.Generator(device=device).manual_seed(1)).sum())
    yield "trajectories", t.weights, seeded


def test_kraus_trajectories_after_inference_mode(dtype, device):
    # sampled Kraus branches: the seeded estimate jumps with the angles, so the oracle is the same
    # estimate on a circuit never run in inference mode
    def circuit():
        t = tql.MixedCircuit(2, dtype=dtype)
        t.ry(0, trainable=True, init=0.7).channel(tql.mixed.amplitude_damping(0.3), 0).rx(1, trainable=True, init=0.2)
        return t.to(device)

    def loss(t):
        gen = torch.Generator(device=device).manual_seed(2)
        return tql.mixed.trajectories.expval(t, "Z0 + X1", n_trajectories=8, generator=gen).sum()

    used, fresh = circuit(), circuit()
    with torch.inference_mode():
        loss(used)
    loss(used).backward()
    loss(fresh).backward()
    assert torch.allclose(used.weights.grad, fresh.weights.grad)


def _finite_difference(loss, w, eps):
    grad = torch.zeros_like(w)
    with torch.no_grad():
        for i in range(w.numel()):
            flat = w.view(-1)
            flat[i] += eps
            up = float(loss())
            flat[i] -= 2 * eps
            down = float(loss())
            flat[i] += eps
            grad.view(-1)[i] = (up - down) / (2 * eps)
    return grad


def test_caches_filled_in_inference_mode_serve_training(dtype, device):
    eps, tol = (1e-3, 2e-2) if dtype == torch.complex64 else (1e-6, 1e-6)
    for name, weights, loss in _cases(dtype, device):
        with torch.inference_mode():
            inside = float(loss().detach())
        value = loss()
        assert float(value.detach()) == pytest.approx(inside, abs=1e-4), name
        weights.grad = None
        value.backward()
        want = _finite_difference(loss, weights, eps)
        assert torch.allclose(weights.grad, want, atol=tol), (name, weights.grad, want)
