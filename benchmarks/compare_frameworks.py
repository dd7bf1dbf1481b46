"""Head-to-head against PennyLane: the same circuits, parameters and observables in both libraries.

(1) hybrid classifier layer: RY angle encoding of n features + L strongly-entangling layers
    (Rot on every wire + CNOT ring of range l % (n-1) + 1, PennyLane's StronglyEntanglingLayers),
    ⟨Z_w⟩ on every wire, batch B: forward and forward + backward (loss = sum of the outputs,
    gradients w.r.t. the weights AND the inputs).
(2) VQE: energy and energy + gradient of a bundled molecule (tql.chem.load, default LiH, 12
    qubits, 631 Pauli terms) under the UCCSD ansatz of Givens excitations (HF state, 76
    DoubleExcitation + 16 SingleExcitation for LiH), the Hamiltonian converted term by term into a
    ``qml.Hamiltonian`` of Pauli words on the same wires.
(3) QAOA MaxCut on a random 3-regular graph (seed 1), p layers, one start: expected cost and its
    gradient. PennyLane: H on every wire, IsingZZ(2γ J_uv) per edge, RX(2β) per wire,
    ⟨Σ J_uv Z_u Z_v⟩ + constant; ours: ``tql.optimization.qaoa`` (the specialised engine) and the
    same gates as a plain ``tql.Circuit`` (``qaoa_circuit``).

PennyLane routes: ``default.qubit`` with ``diff_method="backprop"`` and parameter broadcasting over
the batch (one broadcast tape), ``qml.qnn.TorchLayer`` around that QNode, and ``lightning.qubit``
with ``diff_method="adjoint"`` (it does not broadcast: PennyLane splits a broadcast tape into B
tapes, ``broadcast_expand``). Ours: backprop and adjoint in complex128, and backprop in complex64
as an extra row. Every comparison is in float64 / complex128 and first checks that both libraries
give the same values and gradients (max |Δ| printed). Times are medians (ms); "PL / ours" divides
PennyLane's fastest route by our fastest complex128 route; "× clone" is our time over one
``torch.clone`` of a (B, 2**n) state of the row's dtype measured in the same run.

    python benchmarks/compare_frameworks.py --threads 1 [--sizes 8,12] [--batches 1,32,256]
        [--layers 4] [--molecules LiH] [--qaoa-sizes 12,16] [--p 3] [--skip layer,vqe,qaoa]

PennyLane and pennylane-lightning are not dependencies of this package: run it from an environment
that has them (see RESULTS.md); without PennyLane only our rows are printed.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
import torchquantum_layers.chem as chem  # noqa: E402
from torchquantum_layers import optimization as opt  # noqa: E402
from torchquantum_layers.grad import circuit_expval  # noqa: E402

from common import add_runtime_flags, clone_time, keep_memory_if_asked, machine, set_threads, table, timeit, today  # noqa: E402


def measure(fn, budget=0.4):
    """Median seconds per call of ``fn``: after a warm-up call, short calls through
    :func:`common.timeit`, long ones as 3-7 single calls (about ``budget`` seconds in all)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first < 0.02:
        return timeit(fn, repeats=5, min_time=0.05)
    k = 1 if first > 2.0 else max(3, min(7, int(budget / first)))
    ts = []
    for _ in range(k):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def pennylane():
    """``(qml, versions, lightning available)``, or ``(None, message, False)``."""
    try:
        import pennylane as qml
    except ImportError as e:
        return None, f"PennyLane is not installed ({e}); only our rows are printed", False
    try:
        qml.device("lightning.qubit", wires=1)
        import importlib.metadata as md
        light = md.version("pennylane_lightning")
        has_light = True
    except Exception as e:  # noqa: BLE001  (any failure: the lightning rows are left out)
        light, has_light = f"unavailable ({e})", False
    return qml, f"pennylane {qml.__version__}, pennylane-lightning {light}", has_light


def float64_results(fn):
    """``fn`` run with torch's default dtype float64: PennyLane's torch interface converts the
    NumPy results of lightning.qubit with the default dtype, so under float32 (torch's default)
    its values come back rounded to float32 (errors ~1e-8) though the simulation is complex128."""
    def run():
        old = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return fn()
        finally:
            torch.set_default_dtype(old)
    return run


def ms(t):
    return f"{t * 1e3:.2f}" if t < 0.1 else f"{t * 1e3:.1f}"


def dev(a, b):
    return float((a.detach().to(torch.float64).reshape(-1) - b.detach().to(torch.float64).reshape(-1)).abs().max())


# ------------------------------------------------------------------------------------------------
# (1) hybrid classifier layer
def our_layer(n, L, weights, method, dtype):
    c = tql.Circuit(n)
    tql.templates.angle_encoding(c)                 # RY(x_i) on wire i
    tql.templates.strongly_entangling(c, n_layers=L)
    q = tql.QuantumLayer(c, [tql.PauliString(f"Z{w}") for w in range(n)], diff_method=method, dtype=dtype)
    with torch.no_grad():
        q.circuit.weights.copy_(weights.reshape(-1))
    return q


def pl_layer_qnode(qml, n, device, diff_method):
    dev_ = qml.device(device, wires=n)

    @qml.qnode(dev_, interface="torch", diff_method=diff_method)
    def circuit(inputs, weights):
        for w in range(n):
            qml.RY(inputs[..., w], wires=w)
        qml.StronglyEntanglingLayers(weights, wires=range(n))
        return [qml.expval(qml.PauliZ(w)) for w in range(n)]
    return circuit


def step_fns(forward, params, inference=None):
    """(forward without grad, forward + backward of the sum, values + grads for the check).
    ``inference``: the forward-only call, if not ``forward`` under ``torch.no_grad()`` (PennyLane:
    the same QNode on detached tensors, so that lightning's adjoint does not compute the Jacobian
    with the values, as it does for tensors that require grad even under no_grad)."""
    def fwd():
        with torch.no_grad():
            return forward() if inference is None else inference()

    def fb():
        for p in params:
            p.grad = None
        out = forward()
        out.sum().backward()
        return out

    def check():
        out = fb()
        return [out.detach().clone()] + [p.grad.detach().clone() for p in params]
    return fwd, fb, check


def layer_case(args, qml, has_light):
    rows, summary = [], []
    L = args.layers
    for n in [int(s) for s in args.sizes.split(",")]:
        gen = torch.Generator().manual_seed(n)
        W = torch.rand(L, n, 3, generator=gen, dtype=torch.float64) * 6.28
        for B in [int(s) for s in args.batches.split(",")]:
            X = torch.rand(B, n, generator=gen, dtype=torch.float64) * 3.14
            routes = []         # (library, route, dtype, fwd, fb, check, clone dtype or None)
            for method in ("backprop", "adjoint"):
                q = our_layer(n, L, W, method, torch.complex128)
                x = X.clone().requires_grad_(True)
                routes.append(("tql", f"QuantumLayer {method}", "c128",
                               *step_fns(lambda q=q, x=x: q(x), [q.circuit.weights, x]), torch.complex128))
            q = our_layer(n, L, W, "backprop", torch.complex64)
            x = X.float().requires_grad_(True)
            routes.append(("tql", "QuantumLayer backprop", "c64",
                           *step_fns(lambda q=q, x=x: q(x), [q.circuit.weights, x]), torch.complex64))
            if qml is not None:
                w = W.clone().requires_grad_(True)
                x = X.clone().requires_grad_(True)
                qn = pl_layer_qnode(qml, n, "default.qubit", "backprop")
                routes.append(("PennyLane", "default.qubit backprop, broadcast", "c128",
                               *step_fns(lambda qn=qn, x=x, w=w: torch.stack(qn(x, w), -1), [w, x],
                                         lambda qn=qn: torch.stack(qn(X, W), -1)), None))
                tl = qml.qnn.TorchLayer(qn, {"weights": (L, n, 3)}).double()
                with torch.no_grad():
                    tl.weights.copy_(W)
                x = X.clone().requires_grad_(True)
                routes.append(("PennyLane", "TorchLayer(default.qubit backprop)", "c128",
                               *step_fns(lambda tl=tl, x=x: tl(x), [tl.weights, x], lambda tl=tl: tl(X)), None))
                if has_light:
                    w = W.clone().requires_grad_(True)
                    x = X.clone().requires_grad_(True)
                    ql = pl_layer_qnode(qml, n, "lightning.qubit", "adjoint")
                    routes.append(("PennyLane", f"lightning.qubit adjoint ({B} tapes)" if B > 1 else
                                   "lightning.qubit adjoint", "c128",
                                   *step_fns(float64_results(lambda ql=ql, x=x, w=w: torch.stack(ql(x, w), -1)), [w, x],
                                             float64_results(lambda ql=ql: torch.stack(ql(X, W), -1))), None))
            ref = routes[0][5]()
            clones = {}
            best = {}
            for lib, route, dt, fwd, fb, check, cdt in routes:
                got = check()
                d = max(dev(a, b) for a, b in zip(got, ref))
                tf, tb = measure(fwd, args.budget), measure(fb, args.budget)
                xc = ""
                if cdt is not None:
                    if cdt not in clones:
                        clones[cdt] = clone_time(torch.zeros(B, 2 ** n, dtype=cdt))
                    xc = f"{tb / clones[cdt]:.0f}"
                rows.append([n, B, lib, route, dt, ms(tf), ms(tb), xc, f"{d:.1e}"])
                if dt == "c128":
                    for k, t in (("f", tf), ("b", tb)):
                        cur = best.get((lib, k))
                        if cur is None or t < cur[0]:
                            best[(lib, k)] = (t, route)
                print(f"  layer n={n} B={B} {lib} {route} {dt}: {tf * 1e3:.2f} / {tb * 1e3:.2f} ms, "
                      f"max dev {d:.1e}", file=sys.stderr, flush=True)
            if qml is not None:
                summary.append([n, B, ms(best[("PennyLane", "f")][0]), ms(best[("tql", "f")][0]),
                                f"{best[('PennyLane', 'f')][0] / best[('tql', 'f')][0]:.1f}",
                                ms(best[("PennyLane", "b")][0]), ms(best[("tql", "b")][0]),
                                f"{best[('PennyLane', 'b')][0] / best[('tql', 'b')][0]:.1f}",
                                _short(best[("PennyLane", "b")][1]), _short(best[("tql", "b")][1])])
    return rows, summary


def _short(route):
    return (route.replace("QuantumLayer ", "").replace("default.qubit backprop, broadcast", "default.qubit bp")
            .replace("TorchLayer(default.qubit backprop)", "TorchLayer")
            .replace("lightning.qubit adjoint", "lightning adj"))


# ------------------------------------------------------------------------------------------------
# a tql Circuit / Hamiltonian in PennyLane
def pl_ops(qml, circuit, weights, x=None):
    """Queue the ops of ``circuit`` in PennyLane, angles from ``weights`` (our Param indices) and
    ``x`` (our Input columns). Gates whose conventions agree by definition: Rot = RZ RY RZ,
    RZZ = IsingZZ, Givens Single/DoubleExcitation; checked numerically by the callers."""
    from torchquantum_layers.circuit import Input, Param
    names = {"X": qml.PauliX, "H": qml.Hadamard, "CNOT": qml.CNOT, "RX": qml.RX, "RY": qml.RY, "RZ": qml.RZ,
             "ROT": qml.Rot, "RZZ": qml.IsingZZ, "SINGLEEXCITATION": qml.SingleExcitation,
             "DOUBLEEXCITATION": qml.DoubleExcitation}
    for op in circuit.ops:
        if op.gate.name not in names or op.adjoint:
            raise NotImplementedError(f"pl_ops: no PennyLane twin for {op.name}")
        angles = []
        for a in op.angles:
            if isinstance(a, Param):
                angles.append(a.scale * weights[a.index])
            elif isinstance(a, Input):
                angles.append(a.scale * x[..., a.column])
            else:
                angles.append(float(a))
        names[op.gate.name](*angles, wires=list(op.wires))


def pl_hamiltonian(qml, H):
    """Our Hamiltonian as a ``qml.Hamiltonian`` of Pauli words (bit w of the masks = wire w)."""
    coeffs, obs = [], []
    for c, p in H.terms:
        c = complex(c)
        assert abs(c.imag) < 1e-12
        word = []
        for w in range(H.n_wires if hasattr(H, "n_wires") else 64):
            xb, zb = (p.x_mask >> w) & 1, (p.z_mask >> w) & 1
            if xb or zb:
                word.append({(1, 0): qml.PauliX, (0, 1): qml.PauliZ, (1, 1): qml.PauliY}[(xb, zb)](w))
            if not (p.x_mask | p.z_mask) >> (w + 1):
                break
        coeffs.append(c.real)
        obs.append(qml.prod(*word) if len(word) > 1 else word[0] if word else qml.Identity(0))
    return qml.Hamiltonian(coeffs, obs)


def wire_order_check(qml, H, n):
    """max |⟨ψ|H|ψ⟩_ours − ⟨ψ|H|ψ⟩_PennyLane| on a random normalised state (wire 0 = MSB in both)."""
    g = torch.Generator().manual_seed(7)
    psi = torch.randn(2 ** n, generator=g, dtype=torch.complex128)
    psi = psi / psi.norm()
    ours = tql.expval(psi[None], H)[0]
    Hp = pl_hamiltonian(qml, H)
    dev_ = qml.device("default.qubit", wires=n)

    @qml.qnode(dev_, interface="torch")
    def e():
        qml.StatePrep(psi, wires=range(n))
        return qml.expval(Hp)
    return abs(float(ours) - float(e())), Hp


def energy_routes(qml, has_light, circuit, H_ours, H_pl, n, x=None, const=0.0, ours_extra=()):
    """Routes ``(library, route, dtype, fwd, fb, check, clone dtype)`` for ⟨H⟩ of ``circuit``."""
    routes = []
    for method in ("backprop", "adjoint"):
        c = circuit.copy() if hasattr(circuit, "copy") else circuit
        if x is None:
            f = (lambda c=c, m=method: chem.energy(c, H_ours, diff_method=m))
            params = [c.weights]
        else:
            xx = x.clone().requires_grad_(True)
            f = (lambda c=c, m=method, xx=xx: circuit_expval(c, H_ours, x=xx, diff_method=m).sum())
            params = [xx]
        routes.append(("tql", f"Circuit {method}", "c128", *step_fns(f, params), torch.complex128))
    routes += list(ours_extra)
    if qml is None:
        return routes
    w0 = circuit.weights.detach().clone()
    devices = [("default.qubit", "backprop")] + ([("lightning.qubit", "adjoint")] if has_light else [])
    for name, method in devices:
        dev_ = qml.device(name, wires=n)

        @qml.qnode(dev_, interface="torch", diff_method=method)
        def qn(w, xx):
            pl_ops(qml, circuit, w, xx)
            return qml.expval(H_pl)
        w = w0.clone().requires_grad_(x is None)
        xx = None if x is None else x.clone().requires_grad_(True)
        f = (lambda qn=qn, w=w, xx=xx: qn(w, xx) + const)
        inf = (lambda qn=qn: qn(w0, x) + const)
        if name == "lightning.qubit":
            f, inf = float64_results(f), float64_results(inf)
        routes.append(("PennyLane", f"{name} {method}", "c128", *step_fns(f, [w] if x is None else [xx], inf),
                       None))
    return routes


def run_routes(routes, n, B, budget, label):
    ref = routes[0][5]()
    rows, best, clones = [], {}, {}
    for lib, route, dt, fwd, fb, check, cdt in routes:
        got = check()
        d = max(dev(a, b) for a, b in zip(got, ref))
        tf, tb = measure(fwd, budget), measure(fb, budget)
        xc = ""
        if cdt is not None:
            if cdt not in clones:
                clones[cdt] = clone_time(torch.zeros(B, 2 ** n, dtype=cdt))
            xc = f"{tb / clones[cdt]:.0f}"
        rows.append([label, lib, route, dt, ms(tf), ms(tb), xc, f"{float(got[0]):.10f}", f"{d:.1e}"])
        if dt == "c128":
            for k, t in (("f", tf), ("b", tb)):
                cur = best.get((lib, k))
                if cur is None or t < cur[0]:
                    best[(lib, k)] = (t, route)
        print(f"  {label} {lib} {route} {dt}: {tf * 1e3:.2f} / {tb * 1e3:.2f} ms, max dev {d:.1e}",
              file=sys.stderr, flush=True)
    summary = None
    if ("PennyLane", "f") in best:
        summary = [label, ms(best[("PennyLane", "f")][0]), ms(best[("tql", "f")][0]),
                   f"{best[('PennyLane', 'f')][0] / best[('tql', 'f')][0]:.1f}",
                   ms(best[("PennyLane", "b")][0]), ms(best[("tql", "b")][0]),
                   f"{best[('PennyLane', 'b')][0] / best[('tql', 'b')][0]:.1f}",
                   best[("PennyLane", "b")][1], best[("tql", "b")][1]]
    return rows, summary


# ------------------------------------------------------------------------------------------------
# (2) VQE
def vqe_case(args, qml, has_light):
    rows, summary, checks = [], [], []
    for name in args.molecules.split(","):
        H, info = chem.load(name)
        n = info.n_qubits
        c = chem.uccsd(n, info.n_electrons, dtype=torch.complex128)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():       # a generic point (not HF, where many gradients vanish)
            c.weights.copy_(0.05 * torch.randn(c.num_parameters, generator=gen, dtype=torch.float64))
        H_pl = None
        if qml is not None:
            d, H_pl = wire_order_check(qml, H, n)
            checks.append(f"{name}: ⟨ψ|H|ψ⟩ of a random {n}-qubit state, ours vs PennyLane: |Δ| = {d:.1e}")
        c64 = c.copy().float() if hasattr(c, "copy") else None
        extra = []
        if c64 is not None:
            extra.append(("tql", "Circuit backprop", "c64",
                          *step_fns(lambda: chem.energy(c64, H), [c64.weights]), torch.complex64))
        routes = energy_routes(qml, has_light, c, H, H_pl, n, ours_extra=extra)
        label = f"{name} ({n} q, {len(H.terms)} terms, {c.num_parameters} angles)"
        r, s = run_routes(routes, n, 1, args.budget, label)
        rows += r
        if s:
            summary.append(s)
    return rows, summary, checks


# ------------------------------------------------------------------------------------------------
# (3) QAOA
def qaoa_case(args, qml, has_light):
    rows, summary = [], []
    p = args.p
    for n in [int(s) for s in args.qaoa_sizes.split(",")]:
        problem = opt.maxcut(opt.random_regular_graph(3, n, seed=1))
        angles = opt.perturb(opt.linear_ramp(p, 0.6), 1, 0.05,
                             generator=torch.Generator().manual_seed(0)).to(torch.float64)
        circ = opt.qaoa_circuit(problem, p, dtype=torch.complex128)
        h, J, const = problem.ising()
        assert float(h.abs().max()) == 0.0
        H_ours = problem.hamiltonian
        H_pl = None
        if qml is not None:
            pairs = torch.nonzero(J).tolist()
            H_pl = qml.Hamiltonian([float(J[i, j]) for i, j in pairs],
                                   [qml.PauliZ(i) @ qml.PauliZ(j) for i, j in pairs])
        extra = []
        for method in ("adjoint", "backprop"):
            m = opt.qaoa(problem, p, dtype=torch.complex128, diff_method=method)
            a = angles.clone().requires_grad_(True)
            extra.append(("tql", f"qaoa engine {method}", "c128",
                          *step_fns(lambda m=m, a=a: m(a).sum(), [a]), torch.complex128))
        m64 = opt.qaoa(problem, p)
        a = angles.float().requires_grad_(True)
        extra.append(("tql", "qaoa engine adjoint", "c64", *step_fns(lambda: m64(a).sum(), [a]), torch.complex64))
        # problem.hamiltonian holds the constant as an identity term; the PennyLane H (ZZ terms) adds it
        routes = energy_routes(qml, has_light, circ, H_ours, H_pl, n, x=angles, const=const, ours_extra=extra)
        label = f"MaxCut n={n}, p={p}, {len(problem.hamiltonian.terms)} terms"
        r, s = run_routes(routes, n, 1, args.budget, label)
        rows += r
        if s:
            summary.append(s)
    return rows, summary


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,12", help="qubits of the classifier layer")
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--molecules", default="LiH", help="bundled molecules (tql.chem.available())")
    ap.add_argument("--qaoa-sizes", default="12,16")
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma list of layer,vqe,qaoa")
    ap.add_argument("--budget", type=float, default=0.4, help="seconds per timing of a slow route")
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    qml, versions, has_light = pennylane()
    skip = set(args.skip.split(","))
    print(f"# PennyLane comparison, {today()}, {machine()}; {versions}; load average "
          f"{os.getloadavg()[0]:.1f} at start")
    if qml is None:
        print(versions)
    if "layer" not in skip:
        rows, summary = layer_case(args, qml, has_light)
        print(f"\n(1) classifier layer: RY encoding + {args.layers} strongly-entangling layers, ⟨Z⟩ on every "
              "wire; loss = sum of outputs, gradients w.r.t. weights and inputs; max |Δ| = largest deviation of "
              "outputs and gradients from our complex128 backprop")
        print(table(rows, ["n", "B", "library", "route", "dtype", "forward ms", "fwd+bwd ms", "fwd+bwd × clone",
                           "max |Δ|"]))
        if summary:
            print("\nfastest complex128 route of each library (PL / ours > 1: ours faster)")
            print(table(summary, ["n", "B", "PL fwd ms", "ours fwd ms", "PL / ours fwd", "PL fwd+bwd ms",
                                  "ours fwd+bwd ms", "PL / ours fwd+bwd", "PL fastest f+b", "ours fastest f+b"]))
    if "vqe" not in skip:
        rows, summary, checks = vqe_case(args, qml, has_light)
        print("\n(2) VQE, UCCSD (Givens excitations) from Hartree–Fock, energy (forward) and energy + gradient")
        for line in checks:
            print(line)
        print(table(rows, ["case", "library", "route", "dtype", "energy ms", "energy+grad ms", "e+g × clone",
                           "energy (Ha)", "max |Δ|"]))
        if summary:
            print()
            print(table(summary, ["case", "PL energy ms", "ours energy ms", "PL / ours energy", "PL e+g ms",
                                  "ours e+g ms", "PL / ours e+g", "PL fastest", "ours fastest"]))
    if "qaoa" not in skip:
        rows, summary = qaoa_case(args, qml, has_light)
        print(f"\n(3) QAOA MaxCut, random 3-regular graph (seed 1), p = {args.p}, one start: expected cost "
              "(forward) and cost + gradient w.r.t. the 2p angles")
        print(table(rows, ["case", "library", "route", "dtype", "cost ms", "cost+grad ms", "c+g × clone",
                           "expected cost", "max |Δ|"]))
        if summary:
            print()
            print(table(summary, ["case", "PL cost ms", "ours cost ms", "PL / ours cost", "PL c+g ms",
                                  "ours c+g ms", "PL / ours c+g", "PL fastest", "ours fastest"]))
    print(f"\n{today()}, load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
