"""Whether a ``torch.func`` transform (grad, vjp, jacrev, jacfwd, hessian, vmap) is running.

Under a transform the tensors are functorch wrappers: they have no data pointer for the native
kernels, vmap cannot follow data-dependent branches, and an ``autograd.Function`` needs rules of
its own for every transform. So while one runs, the engine takes its plain torch kernels (the
reference path every fast kernel is tested against) and skips its host-side value checks; every
transform then composes with every other, at the plain kernels' speed.
"""
from __future__ import annotations

import contextlib

import torch

_peek = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)


def transforms_active() -> bool:
    """True inside ``torch.func.grad`` / ``vjp`` / ``jacrev`` / ``jacfwd`` / ``hessian`` / ``vmap``."""
    return _peek is not None and _peek() is not None


def inspectable(t: torch.Tensor) -> bool:
    """Whether a host-side check may read ``t``'s values (a NaN test, say): not under ``vmap``,
    whose batched tensors, at whatever level they sit under other transforms' wrappers, cannot
    become Python booleans. Under grad/jacfwd alone the checks still run."""
    if not transforms_active():
        return True
    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(t):
        if functorch.is_batchedtensor(t):
            return False
        t = functorch.get_unwrapped(t)
    return True


def wrapped(t) -> bool:
    """Whether ``t`` is a functorch wrapper (a tensor seen from inside a transform)."""
    return isinstance(t, torch.Tensor) and torch._C._functorch.is_functorch_wrapped_tensor(t)


@contextlib.contextmanager
def outside_transforms():
    """Run the block as plain eager PyTorch, with the transforms' interpreters set aside.

    For an ``autograd.Function``'s forward/backward, which functorch calls with its unwrapped
    (ordinary) tensors while its interpreters stay on the stack: there ``requires_grad_`` and
    ``torch.autograd.grad`` are refused and the engine would avoid its native kernels. Only valid
    when no tensor the block touches is a wrapper (:func:`wrapped`); the caller checks that.
    """
    from torch._functorch.pyfunctorch import temporarily_clear_interpreter_stack
    with temporarily_clear_interpreter_stack():
        yield


def plain_value(t):
    """``t`` as an ordinary tensor: itself, or the tensor inside ONE grad-tracking wrapper (what an
    ``autograd.Function``'s backward receives under a single torch.func.grad / vjp). None where
    that would drop something: a vmap level or several transform levels."""
    if not wrapped(t):
        return t
    functorch = torch._C._functorch
    if not functorch.is_gradtrackingtensor(t):
        return None
    inner = functorch.get_unwrapped(t)
    return None if wrapped(inner) else inner


def vmap_active() -> bool:
    """Whether a vmap level is on the transform stack (for code whose shapes depend on values)."""
    if not transforms_active():
        return False
    try:
        from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
    except ImportError:
        return True
    vmap_kind = torch._C._functorch.TransformType.Vmap
    return any(i.key() == vmap_kind for i in retrieve_all_functorch_interpreters())
