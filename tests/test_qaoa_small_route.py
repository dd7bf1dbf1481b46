"""QAOA's small-register route (``QAOA._small_circuit``): a few starts on a small register run as
the gate-level Circuit's native program instead of the in-place adjoint sweep.

Every test of tests/test_qaoa.py runs again here with the route switched off, so that the sweep
keeps its coverage on the small registers those tests use (with the route on, most of them take
the Circuit); the tests below pin the route itself: where it is taken, and that it agrees with the
sweep and with plain autograd."""
import importlib

import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import optimization as opt

from .conftest import ATOL
from .test_qaoa import *  # noqa: F401,F403  (re-collected below with the route off)
from .test_qaoa import CUBE, PADDLE

# the module (the package's name ``qaoa`` is the builder function)
qaoa_module = importlib.import_module("torchquantum_layers.optimization.qaoa")


@pytest.fixture(autouse=True)
def _sweep_only(request, monkeypatch):
    if not request.node.name.startswith("test_route_"):
        monkeypatch.setattr(qaoa_module, "CIRCUIT_ROUTE_MAX_AMPLITUDES", 0)


def _value_grad(m, a, **kw):
    x = a.clone().requires_grad_(True)
    v = m(x, **kw)
    v.sum().backward()
    return v.detach(), x.grad


@pytest.mark.parametrize("edges", [CUBE, [(0, 1, 1.0), (1, 2, 2.5), (2, 3, 0.7), (3, 0, 1.3), (0, 2, 2.0)]],
                         ids=["cube", "float-weights"])
@pytest.mark.parametrize("starts", [1, 3])
def test_route_agrees_with_sweep_and_backprop(edges, starts, dtype, monkeypatch):
    pr = opt.maxcut(edges)
    real = tql.kernels.state.REAL_OF[dtype]
    g = torch.Generator().manual_seed(7)
    a = (torch.rand(starts, 6, generator=g, dtype=torch.float64) - 0.5).to(real)
    m = opt.qaoa(pr, 3, dtype=dtype)
    assert m._small_circuit(starts) is not None
    routed = _value_grad(m, a)
    ref = _value_grad(m, a, diff_method="backprop")
    monkeypatch.setattr(qaoa_module, "CIRCUIT_ROUTE_MAX_AMPLITUDES", 0)
    assert m._small_circuit(starts) is None
    sweep = _value_grad(m, a)
    scale = float(pr.diagonal.abs().max())
    for got in (routed, sweep):
        torch.testing.assert_close(got[0], ref[0], rtol=0, atol=ATOL[dtype] * 50 * scale)
        torch.testing.assert_close(got[1], ref[1], rtol=0, atol=ATOL[dtype] * 200 * scale)
    # one start given as a 1-d row: a scalar, as on the sweep
    assert m(a[0]).shape == ()


def test_route_is_taken_only_where_it_computes_the_same():
    pr = opt.maxcut(CUBE)                                                   # 8 qubits
    m = opt.qaoa(pr, 2)
    cap = qaoa_module.CIRCUIT_ROUTE_MAX_AMPLITUDES
    assert m._small_circuit(1) is not None
    assert m._small_circuit(cap // 2 ** 8) is not None
    assert m._small_circuit(cap // 2 ** 8 + 1) is None                      # too many rows
    assert opt.qaoa(pr, 2, mixer_kernel="complex")._small_circuit(1) is None
    assert opt.qaoa([pr, opt.maxcut(PADDLE + [(0, 4), (4, 5), (5, 6), (6, 7)])], 2)._small_circuit(1) is None
    assert opt.qaoa(pr, 2, initial_state="00000000")._small_circuit(1) is None
    assert opt.qaoa(pr, 2, mixer="warm", warm_start="01010101")._small_circuit(1) is None
    # the states keep the sweep; the cost takes the Circuit (the autograd graph tells)
    a = torch.full((1, 4), 0.3, requires_grad=True)
    assert _has_node(m(a, output="state").grad_fn, "_AdjointQAOA")
    assert not _has_node(m(a).grad_fn, "_AdjointQAOA")


def _has_node(fn, name: str) -> bool:
    seen, todo = set(), [fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        if name in type(f).__name__:
            return True
        todo += [g for g, _ in f.next_functions]
    return False


def test_route_supports_second_derivatives():
    pr = opt.maxcut(PADDLE)
    m = opt.qaoa(pr, 2, dtype=torch.complex128)
    mb = opt.qaoa(pr, 2, dtype=torch.complex128, diff_method="backprop")
    a = torch.tensor([[0.3, -0.2, 0.5, 0.1]], dtype=torch.float64, requires_grad=True)
    assert m._small_circuit(1) is not None
    h1 = torch.autograd.functional.hessian(lambda x: m(x).sum(), a)
    h2 = torch.autograd.functional.hessian(lambda x: mb(x).sum(), a)
    torch.testing.assert_close(h1, h2, atol=1e-10, rtol=0)
