"""The state-vector engine under ``torch.func``: vmap folded into the circuit's own batch.

A circuit already runs a whole batch at once, so a vmapped dimension is just more rows: the rule
here moves it into the batch (x and the input state row by row; a vmapped weight vector — an
ensemble, a per-sample gradient — becomes per-row input columns, :func:`weights_as_inputs`), runs
the engine once on ordinary tensors with its native kernels, and splits the rows back. Gradients
take the same route: the backward is a second Function whose forward is the engine's own
vector-Jacobian product (autograd over the recorded one-pass kernels) and whose vmap rule folds
the same way, so ``vmap(grad(f))`` and ``jacrev`` cost one batched backward each.

It applies while the transforms on the stack are vmaps and at most one grad/vjp level, and the
circuit's buffers are ordinary tensors; forward-mode levels (jacfwd, jvp, hessian) and nested
grads take the plain torch kernels instead (kernels.transforms), which every transform composes
with.
"""
from __future__ import annotations

import torch

from .circuit import Circuit, Input, Op, Param
from .kernels.transforms import outside_transforms, transforms_active, wrapped


def weights_as_inputs(circuit: Circuit, first_column: int, weights=None) -> Circuit:
    """``circuit`` with every trainable angle ``Param(i, s)`` read from input column
    ``first_column + i`` (scale s kept): a batch of rows then carries a batch of weight vectors.
    Shares the circuit's matrices, dtype and device (and its weights, or takes ``weights``)."""
    ops = [Op(op.gate, op.wires,
              tuple(Input(first_column + a.index, a.scale) if isinstance(a, Param) else a for a in op.angles),
              op.data_key, op.adjoint) for op in circuit.ops]
    return circuit._sharing(ops, weights=weights)


def _rows_circuit(circuit: Circuit, first_column: int, weights_like: torch.Tensor) -> Circuit:
    """:func:`weights_as_inputs`, kept on the circuit (its plans are built once). Its own weights
    are zeros no angle reads: the circuit's may be a transform's wrapper (functional_call), which
    must not outlive the call."""
    cache = circuit.__dict__.setdefault("_rows_circuits", {})
    key = (len(circuit.ops), first_column, circuit.dtype, str(circuit.device))
    if key not in cache:
        cache.clear()
        cache[key] = weights_as_inputs(circuit, first_column, torch.nn.Parameter(
            torch.zeros(weights_like.shape, dtype=weights_like.dtype, device=weights_like.device),
            requires_grad=False))
    return cache[key]


def _interpreter_kinds():
    try:
        from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters
        return [i.key() for i in retrieve_all_functorch_interpreters()]
    except (ImportError, AttributeError):
        return None


def folding_applies(circuit) -> bool:
    """Whether :func:`run` may fold the transforms into the batch here."""
    kinds = _interpreter_kinds()
    if kinds is None:
        return False
    kind = torch._C._functorch.TransformType
    if any(k not in (kind.Vmap, kind.Grad) for k in kinds) or sum(k == kind.Grad for k in kinds) > 1:
        return False
    return not any(wrapped(b) for b in circuit.buffers())


def run(circuit, state, x, weights, observables=None):
    """The circuit's output state under the transforms on the stack, or with ``observables`` (a
    list of PauliString/Hamiltonian) their expectations ``(B, n_obs)`` (``weights``: the tensor
    the angles read, never None here)."""
    if not weights.numel():
        weights = weights.detach()      # nothing reads it: no graph through it
    return _Forward.apply((circuit, observables), x, state, weights)


def _plain_run(spec, x, state, weights):
    from .engine import run_circuit
    from .observables import expectation
    circuit, observables = spec
    psi = run_circuit(circuit, state, x, weights)
    return psi if observables is None else expectation(psi, observables)


class _Forward(torch.autograd.Function):
    """``spec = (circuit, observables or None)``: the state, or the expectations, of the run."""

    @staticmethod
    def forward(spec, x, state, weights):
        with outside_transforms(), torch.no_grad():
            return _plain_run(spec, x, state, weights)

    @staticmethod
    def setup_context(ctx, inputs, output):
        spec, x, state, weights = inputs
        ctx.spec = spec
        ctx.save_for_backward(x, state, weights)

    @staticmethod
    def backward(ctx, grad_out):
        x, state, weights = ctx.saved_tensors
        return (None,) + grads_for(ctx.needs_input_grad[1:4], (x, state, weights),
                                   lambda needs: _Backward.apply(ctx.spec, needs, x, state, weights, grad_out))

    @staticmethod
    def vmap(info, in_dims, spec, x, state, weights):
        folded = _Fold(info.batch_size, in_dims[1:], spec[0], x, state, weights)
        out = _Forward.apply((folded.circuit, spec[1]), folded.x, folded.state, folded.weights)
        return folded.unfold_rows(out), 0


class _Backward(torch.autograd.Function):
    """(∂/∂x, ∂/∂state, ∂/∂weights) of ⟨grad_out, run(spec, x, state, weights)⟩, the ones
    ``needs`` asks for: autograd over the engine's recorded kernels, on ordinary tensors."""

    @staticmethod
    def forward(spec, needs, x, state, weights, grad_out):
        return vjp_of(lambda *t: _plain_run(spec, *t), needs, (x, state, weights), grad_out)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.circuit = inputs[0][0]

    @staticmethod
    def backward(ctx, *grads):
        raise ValueError(f"{ctx.circuit.__class__.__name__}: a second derivative through torch.func.grad "
                         "inside vmap/grad is not available on this path; use torch.func.hessian or "
                         "jacfwd(jacrev(...)), which take the plain kernels")

    @staticmethod
    def vmap(info, in_dims, spec, needs, x, state, weights, grad_out):
        return vjp_by_rows(info.batch_size, in_dims[2:6], spec[0], needs, x, state, weights, grad_out,
                           lambda c, row_needs, *args: _Backward.apply((c, spec[1]), row_needs, *args))


def vjp_of(fn, needs, tensors, grad):
    """∂⟨grad, fn(*tensors)⟩ for the tensors ``needs`` marks (a tuple, in order), by autograd on
    ordinary tensors with the transforms set aside (for a Function's forward)."""
    with outside_transforms(), torch.enable_grad():
        leaves = [None if t is None else t.detach().requires_grad_(need) for t, need in zip(tensors, needs)]
        out = fn(*leaves)
        wanted = [t for t, need in zip(leaves, needs) if need]
        if not out.requires_grad:           # nothing asked for is read
            return tuple(torch.zeros_like(t) for t in wanted)
        return tuple(torch.autograd.grad(out, wanted, grad, allow_unused=True, materialize_grads=True))


def grads_for(needs_input_grad, tensors, vjp):
    """A backward's gradients for ``tensors`` (None where not needed): ``vjp(needs)`` returns one
    per true entry of ``needs``."""
    needs = tuple(bool(n) and t is not None for n, t in zip(needs_input_grad, tensors))
    if not any(needs):
        return (None,) * len(tensors)
    grads = iter(vjp(needs))
    return tuple(next(grads) if need else None for need in needs)


def vjp_by_rows(V, dims, circuit, needs, x, state, weights, grad, vjp):
    """The vmap rule of a vector-Jacobian product ``vjp(circuit, needs, x, state, weights, grad)``
    (a tuple: one gradient per true entry of ``needs`` for x, state, weights): V·B rows with the
    weights as per-row columns, one call, the rows' gradients split back per vmapped index (the
    weights' summed over each index's rows). Only the rows whose cotangent is not zero run where
    no outer vmap remains (jacrev's cotangents are one-hot: about V of its V·B rows carry one)."""
    folded = _Fold(V, dims[:3], circuit, x, state, weights, always_rows=True)
    grad_rows = folded.fold_rows(grad, dims[3])
    row_needs = (needs[0] or needs[2], needs[1], False)      # weights are x columns now
    rows = grad_rows.shape[0]
    sparse = folded.x is not None and not transforms_active()
    if sparse:
        keep = torch.nonzero(grad_rows.reshape(rows, -1).abs().sum(dim=1)).flatten()
        sparse = keep.numel() < rows
    pick = (lambda t: None if t is None else t.index_select(0, keep)) if sparse else (lambda t: t)
    grads = iter(vjp(folded.circuit, row_needs, pick(folded.x), pick(folded.state), folded.weights, pick(grad_rows)))
    gx, gs = (next(grads) if need else None for need in row_needs[:2])
    if sparse:
        gx, gs = (None if g is None else torch.zeros((rows,) + tuple(like.shape[1:]), dtype=g.dtype, device=g.device)
                  .index_copy(0, keep, g) for g, like in ((gx, folded.x), (gs, folded.state)))
    out = []
    if needs[0]:
        out.append(folded.unfold_rows(gx[:, :folded.n_features]))
    if needs[1]:
        out.append(folded.unfold_state_grad(gs))
    if needs[2]:
        out.append(folded.unfold_rows(gx[:, folded.n_features:]).sum(dim=1))
    return tuple(out), (0,) * len(out)


class _Fold:
    """The vmapped dimension (size V) moved into the circuit's batch: V·B rows."""

    def __init__(self, V, dims, circuit, x, state, weights, always_rows=False):
        x_dim, state_dim, w_dim = dims
        self.V = V
        x = None if x is None else (x.movedim(x_dim, 0) if x_dim is not None else x.expand(V, *x.shape))
        state = None if state is None else (state.movedim(state_dim, 0) if state_dim is not None
                                            else state.expand(V, *state.shape))
        B = max(1, x.shape[1] if x is not None else 1, state.shape[1] if state is not None else 1)
        self.B, self.state_rows = B, None if state is None else state.shape[1]
        self.n_features = 0 if x is None else x.shape[2]
        x_rows = None if x is None else x.expand(V, B, -1).reshape(V * B, -1)
        self.state = None if state is None else state.expand(V, B, -1).reshape(V * B, -1)
        if w_dim is None and not always_rows:
            self.circuit, self.x, self.weights = circuit, x_rows, weights
            return
        w = weights.movedim(w_dim, 0) if w_dim is not None else weights.expand(V, *weights.shape)
        w_rows = w[:, None, :].expand(V, B, -1).reshape(V * B, -1)
        self.circuit = _rows_circuit(circuit, self.n_features, w[0])
        self.x = w_rows if x_rows is None else torch.cat([x_rows, w_rows], dim=1)
        self.weights = self.circuit.weights.detach()            # read by no angle now

    def fold_rows(self, t, dim):
        """A (…, B', N) per-sample tensor (vmapped at ``dim`` or shared) as V·B rows."""
        t = t.movedim(dim, 0) if dim is not None else t.expand(self.V, *t.shape)
        return t.expand(self.V, self.B, -1).reshape(self.V * self.B, -1)

    def unfold_rows(self, t):
        return t.reshape(self.V, -1, *t.shape[1:])

    def unfold_state_grad(self, g):
        g = g.reshape(self.V, self.B, -1)
        return g.sum(dim=1, keepdim=True) if self.state_rows == 1 and self.B > 1 else g
