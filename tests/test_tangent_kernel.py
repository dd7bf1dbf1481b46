"""tql.research.neural_tangent_kernel / parameter_jacobian against finite differences of the NumPy
oracle (tests/oracle.py), for a QuantumLayer and for a hybrid classical-quantum model."""
import numpy as np
import pytest
import torch
from torch import nn

import torchquantum_layers as tql
from torchquantum_layers.research import neural_tangent_kernel, parameter_jacobian

from .test_torch_func import _fd_jacobian, _layer_and_recipe, _layer_oracle


def _oracle_jacobian(recipe, w, x):
    """(N, O, P) by central differences of the oracle's outputs."""
    return np.stack([_fd_jacobian(lambda v, o=o: _layer_oracle(recipe, v, x)[:, o], w) for o in range(2)], axis=1)


@pytest.mark.parametrize("mode", ["reverse", "forward", "auto"])
def test_kernel_matches_oracle_jacobians(mode, dtype):
    layer, recipe = _layer_and_recipe(dtype, 11)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    g = torch.Generator().manual_seed(2)
    x1, x2 = torch.rand(4, 3, generator=g, dtype=real) * 3, torch.rand(3, 3, generator=g, dtype=real) * 3
    w = layer.circuit.weights.detach().double().numpy()
    J1, J2 = _oracle_jacobian(recipe, w, x1.double().numpy()), _oracle_jacobian(recipe, w, x2.double().numpy())
    tol = 1e-4 if dtype == torch.complex64 else 1e-7
    np.testing.assert_allclose(parameter_jacobian(layer, x1, mode=mode).double().numpy(), J1, atol=tol)
    K = neural_tangent_kernel(layer, x1, x2, mode=mode)
    assert K.shape == (4, 3, 2, 2)
    np.testing.assert_allclose(K.double().numpy(), np.einsum("iap,jbp->ijab", J1, J2), atol=tol)


def test_gram_matrix_of_a_hybrid_model_is_symmetric_psd_and_matches_oracle():
    """A classical linear map into the circuit's inputs, one output: the (N, N) kernel over both
    the classical and the quantum parameters."""
    layer, recipe = _layer_and_recipe(torch.complex128, 5)
    lin = nn.Linear(2, 3, dtype=torch.float64)
    model = nn.Sequential(lin, layer, nn.Linear(2, 1, dtype=torch.float64), nn.Flatten(0))
    x = torch.rand(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    K = neural_tangent_kernel(model, x)
    assert K.shape == (5, 5)
    Kn = K.numpy()
    np.testing.assert_allclose(Kn, Kn.T, atol=1e-12)
    assert np.linalg.eigvalsh(Kn).min() > -1e-10

    A, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    head = model[2]
    c, d = head.weight.detach().numpy()[0], float(head.bias.detach())
    w_q = layer.circuit.weights.detach().numpy()
    flat = np.concatenate([A.ravel(), b, w_q, c, [d]])
    sizes = [A.size, b.size, w_q.size, c.size, 1]

    def f(theta):
        A_, b_, wq, c_, d_ = np.split(theta, np.cumsum(sizes)[:-1])
        return _layer_oracle(recipe, wq, x.numpy() @ A_.reshape(3, 2).T + b_) @ c_ + d_[0]
    J = _fd_jacobian(f, flat)
    np.testing.assert_allclose(Kn, J @ J.T, atol=1e-7)
    # the kernel of the quantum parameters alone
    Kq = neural_tangent_kernel(model, x, params=["1.circuit.weights"]).detach().numpy()
    Jq = J[:, A.size + b.size:A.size + b.size + w_q.size]
    np.testing.assert_allclose(Kq, Jq @ Jq.T, atol=1e-7)


def test_bad_arguments_are_named():
    layer, _ = _layer_and_recipe(torch.complex64, 0)
    x = torch.rand(2, 3)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        neural_tangent_kernel(lambda t: t, x)
    with pytest.raises(ValueError, match="no parameter.*'nope'"):
        neural_tangent_kernel(layer, x, params=["nope"])
    with pytest.raises(TypeError, match="sequence of parameter names"):
        neural_tangent_kernel(layer, x, params="circuit.weights")
    with pytest.raises(ValueError, match="mode must be one of"):
        neural_tangent_kernel(layer, x, mode="sideways")
    with pytest.raises(TypeError, match="x must be a tensor"):
        parameter_jacobian(layer, [[0.1, 0.2, 0.3]])
    frozen = tql.QuantumLayer(tql.Circuit(1), observables="Z0")
    with pytest.raises(ValueError, match="no trainable parameters"):
        neural_tangent_kernel(frozen, torch.zeros(2, 0))
    with pytest.raises(ValueError, match="output must be"):
        neural_tangent_kernel(nn.Sequential(layer, nn.Unflatten(1, (2, 1))), x)
