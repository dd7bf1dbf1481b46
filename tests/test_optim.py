"""Optimizers by name (torchquantum_layers.optim), shared by the VQE drivers and the recipes."""
import pytest
import torch

from torchquantum_layers.optim import NAMED_LRS, make_optimizer, optimizer_class


def _params():
    return [torch.nn.Parameter(torch.zeros(3))]


def test_named_optimizers_and_their_default_rates():
    for name, cls in (("adam", torch.optim.Adam), ("SGD", torch.optim.SGD), ("lbfgs", torch.optim.LBFGS)):
        o = make_optimizer(name, _params())
        assert type(o) is cls and o.param_groups[0]["lr"] == NAMED_LRS[name.lower()]
    assert make_optimizer("adam", _params(), default_lrs={"adam": 0.05}).param_groups[0]["lr"] == 0.05
    assert make_optimizer("adam", _params(), lr=0.3, default_lrs={"adam": 0.05}).param_groups[0]["lr"] == 0.3
    lb = make_optimizer("lbfgs", _params())
    assert lb.defaults["max_iter"] == 1 and lb.defaults["max_eval"] == 25     # a line search per step


def test_other_torch_optimizers_by_name_class_or_callable():
    assert optimizer_class("adamw") is torch.optim.AdamW and optimizer_class("nope") is None
    o = make_optimizer("RMSprop", _params(), lr=0.01)
    assert type(o) is torch.optim.RMSprop and o.param_groups[0]["lr"] == 0.01
    assert type(make_optimizer(torch.optim.Adagrad, _params())) is torch.optim.Adagrad
    assert type(make_optimizer(lambda p: torch.optim.SGD(p, lr=1.0), _params())) is torch.optim.SGD


def test_bad_optimizers_are_named():
    with pytest.raises(ValueError, match="'adamx'"):
        make_optimizer("adamx", _params())
    with pytest.raises(TypeError, match="int"):
        make_optimizer(3, _params())
