"""torch.func over quantum layers: per-sample gradients, Jacobians, vmap'd forward passes and the
neural tangent kernel, against the loops a user would otherwise write.

For each register size: a QuantumLayer (angle-encoded inputs, ``--layers`` of trainable RY + CNOT
ring, ⟨Z_w⟩ on every wire) at batch ``--batch``:

* per-sample gradients of a squared loss: ``vmap(grad(loss))`` against a Python loop of one
  ``backward()`` per sample (what Opacus-style code without torch.func does);
* the (B·O, P) Jacobian of the outputs: ``jacrev`` and ``jacfwd`` of the batched call, and ``vmap``
  of a one-sample ``jacrev``, against a loop of one backward per output number;
* the forward pass: batched (the native engine) and as ``vmap`` of a one-sample call (the plain
  torch kernels every transform runs on), both also in clone-times of the batch's state;
* ``tql.research.neural_tangent_kernel`` of the batch against itself.

Run: ``python benchmarks/torch_func.py [--qubits 6 10] [--batch 64] [--layers 3]``.
"""
from __future__ import annotations

import argparse

import torch
from torch.func import functional_call, grad, jacfwd, jacrev, vmap

from common import add_runtime_flags, clone_time, keep_memory_if_asked, machine, rows_table, set_threads, timeit, today

import torchquantum_layers as tql
from torchquantum_layers.research import neural_tangent_kernel


def layer_for(n, layers, dtype):
    c = tql.Circuit(n, dtype=dtype)
    for w in range(n):
        c.ry(w, input=w)
    for _ in range(layers):
        for w in range(n):
            c.ry(w, trainable=True)
        for w in range(n):
            c.cnot(w, (w + 1) % n)
    return tql.QuantumLayer(c, observables=[f"Z{w}" for w in range(n)])


def case(n, batch, layers, dtype, repeats):
    torch.manual_seed(0)
    layer = layer_for(n, layers, dtype)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    x = torch.rand(batch, n, dtype=real) * 3
    y = torch.rand(batch, n, dtype=real)
    params = {k: v.detach() for k, v in layer.named_parameters()}
    P = sum(v.numel() for v in params.values())

    def loss(p, xi, yi):
        return ((functional_call(layer, p, (xi[None],))[0] - yi) ** 2).sum()
    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))

    def loop_per_sample():
        for b in range(batch):
            layer.zero_grad(set_to_none=True)
            ((layer(x[b:b + 1])[0] - y[b]) ** 2).sum().backward()

    def outputs(w):
        return functional_call(layer, {"circuit.weights": w}, (x,))
    w0 = params["circuit.weights"]

    def one_row(w, xi):
        return functional_call(layer, {"circuit.weights": w}, (xi[None],))[0]

    def loop_jacobian():
        out = layer(x).reshape(-1)
        for k in range(out.shape[0]):
            torch.autograd.grad(out[k], layer.circuit.weights, retain_graph=True)

    state = torch.zeros(batch, 2 ** n, dtype=dtype)
    clone = clone_time(state, repeats)
    t = {
        "per-sample grads, vmap(grad)": timeit(lambda: per_sample(params, x, y), repeats=repeats),
        "per-sample grads, loop": timeit(loop_per_sample, repeats=repeats),
        "Jacobian, jacrev": timeit(lambda: jacrev(outputs)(w0), repeats=repeats),
        "Jacobian, jacfwd": timeit(lambda: jacfwd(outputs)(w0), repeats=repeats),
        "Jacobian, vmap(jacrev) per sample": timeit(lambda: vmap(jacrev(one_row), in_dims=(None, 0))(w0, x),
                                                    repeats=repeats),
        "Jacobian, loop of backward": timeit(loop_jacobian, repeats=repeats),
    }
    with torch.no_grad():
        t["forward, batched"] = timeit(lambda: layer(x), repeats=repeats)
        t["forward, vmap of one-sample calls"] = timeit(lambda: vmap(lambda xi: layer(xi[None]))(x), repeats=repeats)
    t["NTK (B x B x O x O)"] = timeit(lambda: neural_tangent_kernel(layer, x), repeats=repeats)
    rows = [{"qubits": n, "batch": batch, "params": P, "what": what, "ms": f"{s * 1e3:.2f}",
             "clone-times": f"{s / clone:.0f}"} for what, s in t.items()]
    rows[0]["vs loop"] = f"{t['per-sample grads, loop'] / t['per-sample grads, vmap(grad)']:.1f}x faster"
    for key in ("Jacobian, jacrev", "Jacobian, jacfwd", "Jacobian, vmap(jacrev) per sample"):
        rows[list(t).index(key)]["vs loop"] = f"{t['Jacobian, loop of backward'] / t[key]:.1f}x faster"
    rows[list(t).index("forward, vmap of one-sample calls")]["vs loop"] = \
        f"{t['forward, vmap of one-sample calls'] / t['forward, batched']:.1f}x the batched call"
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qubits", type=int, nargs="+", default=[6, 10])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dtype", choices=["complex64", "complex128"], default="complex64")
    ap.add_argument("--repeats", type=int, default=5)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    dtype = getattr(torch, args.dtype)
    rows = []
    for n in args.qubits:
        rows += case(n, args.batch, args.layers, dtype, args.repeats)
    print(f"### torch.func over QuantumLayer, {today()}, {machine()}, {args.dtype}, {args.layers} layers\n")
    print(rows_table(rows))


if __name__ == "__main__":
    main()
