"""QAOA benchmark (issue 7): value+gradient per step and the cost layer, as ratios to torch.clone.

    python benchmarks/qaoa.py [--n 20] [--p 5] [--starts 16] [--threads T] [--circuit] [--no-append]
                              [--no-backprop] [--no-former] [--half-only] [--repeats R]
    python benchmarks/qaoa.py --single-start [--sizes 10,12,14,16,18,20] [--p 3] [--dtypes c64,c128]

* value + gradient of the expected cost of a batch of starts (MaxCut, random 3-regular graph with
  n nodes, seed 1) for each differentiation route: our adjoint sweep on the half register (the
  default: MaxCut is invariant under flipping all bits) with the real-GEMM mixer (the default
  ``mixer_kernel="real"``) and with the former complex-GEMM mixer (``mixer_kernel="complex"``,
  measured in the same run for comparison), on the full register, plain autograd
  (backprop) through out-of-place kernels, and (``--circuit``) the same QAOA routed through the
  library's ``Circuit`` with ``circuit_expval(..., diff_method="backprop" | "adjoint")``;
* the same step for a weighted (integer weights 1-3) 20-node MaxCut;
* one cost layer exp(-iγ_s C) on a (starts, 2^n) complex64 state, in place (the phase table gather
  + one multiply, what the adjoint path runs) and out of place (what backprop runs), in units of
  one ``torch.clone`` of that state measured in the same run.

``--single-start`` times instead the most common use, ONE start (angles (1, 2p)): value + gradient
through the engine (``opt.qaoa``, adjoint) and through the same QAOA as a plain ``Circuit``
(``opt.qaoa_circuit`` + ``tql.expval``, adjoint and backprop), timed in turn in the same run, for
n = 10 … 20 in complex64 and complex128, with each time as a multiple of one ``torch.clone`` of the
(1, 2^n) state and the engine / best-Circuit ratio.

Prints a table and appends it to benchmarks/RESULTS.md under "## QAOA (issue 7)" with the date,
machine, torch threads and load average (the 2-core CI machine is shared: its load changes the
numbers, see the notes there).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torchquantum_layers import optimization as opt  # noqa: E402
from torchquantum_layers.grad import circuit_expval  # noqa: E402

from common import clone_time, machine, table, timeit, today  # noqa: E402

RESULTS = os.path.join(os.path.dirname(__file__), "RESULTS.md")
HEADER = "## QAOA (issue 7)"


def step_time(fn, repeats: int) -> float:
    """Median wall time of ``fn`` (one warm-up call first)."""
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def step_times_interleaved(fns, repeats: int):
    """Median wall time of each of ``fns``, timed in turn (A B A B …) so that a change in the load
    of the shared machine hits every route alike (one warm-up call each first)."""
    for fn in fns:
        fn()
    ts = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            ts[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in ts]


def value_and_grad(model, angles, **kw):
    def fn():
        a = angles.clone().requires_grad_(True)
        model(a, **kw).sum().backward()
        return a.grad
    return fn


def circuit_value_and_grad(circ, ham, angles, method):
    def fn():
        a = angles.clone().requires_grad_(True)
        circuit_expval(circ, ham, x=a, diff_method=method).sum().backward()
        return a.grad
    return fn


def single_start(args):
    """Rows of the ``--single-start`` mode (see the module docstring)."""
    import torchquantum_layers as tql
    p = args.p
    rows = []
    load0 = os.getloadavg()[0]
    for dts in args.dtypes.split(","):
        dt = {"c64": torch.complex64, "c128": torch.complex128}[dts]
        rdt = torch.float32 if dt == torch.complex64 else torch.float64
        for n in [int(v) for v in args.sizes.split(",")]:
            problem = opt.maxcut(opt.random_regular_graph(3, n, seed=1))
            angles = opt.perturb(opt.linear_ramp(p, 0.6), 1, 0.05,
                                 generator=torch.Generator().manual_seed(0)).to(rdt).reshape(1, 2 * p)
            model = opt.qaoa(problem, p, dtype=dt)
            circ = opt.qaoa_circuit(problem, p, dtype=dt)
            ham = problem.hamiltonian

            def circ_fn(method):
                def fn():
                    a = angles[0].clone().requires_grad_(True)
                    tql.expval(circ, ham, x=a, diff_method=method).sum().backward()
                    return a.grad
                return fn
            fns = [value_and_grad(model, angles), circ_fn("adjoint"), circ_fn("backprop")]
            g_eng, g_adj, g_bp = (fn() for fn in fns)
            agree = max(float((g_adj - g_eng[0]).abs().max()), float((g_bp - g_eng[0]).abs().max()))
            # many short calls per sample: the step is ~ms, the clone ~µs
            reps = max(args.repeats, 15)
            loops = 1 if n >= 18 else 10

            def looped(fn):
                def run():
                    for _ in range(loops):
                        fn()
                return run
            ts = [t / loops for t in step_times_interleaved([looped(f) for f in fns], reps)]
            tc = clone_time(torch.zeros(1, 2 ** n, dtype=dt))
            best = min(ts[1], ts[2])
            rows.append([dts, n, *(f"{t * 1e3:.2f}" for t in ts), *(f"{t / tc:.0f}" for t in ts),
                         f"{ts[0] / best:.2f}", f"{agree:.0e}"])
            print("  " + " ".join(str(c) for c in rows[-1]), flush=True)
    load1 = os.getloadavg()[0]
    text = [f"### {today()} — {machine()} — single start",
            f"MaxCut on a random 3-regular graph (seed 1), p = {p}, ONE start (angles (1, {2 * p})): value + "
            f"gradient; engine = ``opt.qaoa`` (adjoint), Circuit = ``opt.qaoa_circuit`` + ``tql.expval``; "
            f"the three routes timed in turn (A B C A B C …), medians; × clone = over one torch.clone of the "
            f"(1, 2^n) state. torch threads {torch.get_num_threads()}; load average {load0:.1f} → {load1:.1f}.",
            "",
            table(rows, ["dtype", "n", "engine ms", "Circuit adjoint ms", "Circuit backprop ms",
                         "engine × clone", "Circ adj × clone", "Circ bp × clone", "engine / best Circuit",
                         "max |Δgrad|"]),
            ""]
    return "\n".join(text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--single-start", action="store_true",
                    help="one start, engine vs qaoa_circuit + tql.expval, n in --sizes (see above)")
    ap.add_argument("--sizes", default="10,12,14,16,18,20", help="--single-start: register sizes")
    ap.add_argument("--dtypes", default="c64,c128", help="--single-start: c64 and/or c128")
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--p", type=int, default=None, help="layers (default 5; 3 with --single-start)")
    ap.add_argument("--starts", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--circuit", action="store_true", help="also time the Circuit route (slow at n=20)")
    ap.add_argument("--no-backprop", action="store_true", help="skip our backprop row")
    ap.add_argument("--half-only", action="store_true",
                    help="only the half-register rows (default and former route) and the cost layer")
    ap.add_argument("--no-former", action="store_true",
                    help="skip the former complex-GEMM route (mixer_kernel='complex')")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.p is None:
        args.p = 3 if args.single_start else 5
    if args.single_start:
        out = single_start(args)
        print()
        print(out)
        if not args.no_append:
            append_section(out)
        return
    n, p, S = args.n, args.p, args.starts
    load0 = os.getloadavg()[0]
    gen = torch.Generator().manual_seed(0)
    problem = opt.maxcut(opt.random_regular_graph(3, n, seed=1))
    t0 = time.perf_counter()
    model = opt.qaoa(problem, p)
    setup = time.perf_counter() - t0
    angles = opt.perturb(opt.linear_ramp(p, 0.6), S, 0.05, generator=gen).float()
    rows = []
    checks = {}

    def add(route, fn, note="", t=None):
        t = step_time(fn, args.repeats) if t is None else t
        g = fn()
        checks[route] = g
        rows.append([route, f"{t:.2f}", f"{t / S * 1e3:.0f}", note])
        print(f"  {route:38s} {t:7.2f} s   (load average now {os.getloadavg()[0]:.1f})", flush=True)

    print(f"MaxCut, 3-regular graph n={n}, p={p}, {S} starts; threads {torch.get_num_threads()}, "
          f"load average {load0:.1f}")
    new_fn = value_and_grad(model, angles)
    if args.no_former:
        add("adjoint, half register (default)", new_fn, "bit-flip symmetry: 2^(n-1) amplitudes; real GEMMs")
    else:
        former_fn = value_and_grad(opt.qaoa(problem, p, mixer_kernel="complex"), angles)
        t_new, t_old = step_times_interleaved([new_fn, former_fn], args.repeats)
        add("adjoint, half register (default)", new_fn, "bit-flip symmetry: 2^(n-1) amplitudes; real GEMMs",
            t=t_new)
        add("adjoint, half register, former route", former_fn,
            "mixer_kernel='complex' (complex GEMMs), timed in turn with the row above",
            t=t_old)
    if not args.half_only:
        full = opt.qaoa(problem, p, symmetry=False)
        add("adjoint, full register", value_and_grad(full, angles))
    if not args.no_backprop and not args.half_only:
        add("backprop (plain autograd)", value_and_grad(model, angles, diff_method="backprop"),
            "out-of-place kernels, allocates per op")
    if args.circuit:
        circ = model.circuit()
        for method in ("backprop", "adjoint"):
            add(f"Circuit + circuit_expval {method}",
                circuit_value_and_grad(circ, problem.hamiltonian, angles, method),
                "RZZ per edge, RX per wire (library engine)")
    ref = checks["adjoint, half register (default)"]
    agree = max(float((g - ref).abs().max()) for g in checks.values())

    wedges = [(u, v, float(torch.randint(1, 4, (1,), generator=gen))) for u, v in
              opt.random_regular_graph(3, 20, seed=11)]
    wmodel = opt.qaoa(opt.maxcut(wedges), 5)
    wangles = opt.perturb(opt.linear_ramp(5, 0.3), 16, 0.05, generator=gen).float()
    if not args.half_only:
        add("weighted 20-node MaxCut, p=5, 16 starts", value_and_grad(wmodel, wangles), "adjoint, half register")

    # cost layer vs clone on the full (S, 2^n) complex64 state
    state = torch.randn(S, 2 ** n, dtype=torch.complex64, generator=gen)
    tc = clone_time(state)
    gam = angles[:, 0].contiguous()
    full1 = opt.qaoa(problem, 1, symmetry=False)
    P = torch.empty_like(state)
    t_in = timeit(lambda: state.mul_(full1._phase_into(gam, P)))
    t_old = timeit(lambda: state.mul_(full1._phase_into(gam, P, fast=False)))
    t_out = timeit(lambda: state * full1._phase(gam))
    load1 = os.getloadavg()[0]
    cost_rows = [["cost layer in place (gather + mul_)", f"{t_in * 1e3:.1f}", f"{t_in / tc:.2f}"],
                 ["former: index_select + mul_", f"{t_old * 1e3:.1f}", f"{t_old / tc:.2f}"],
                 ["cost layer out of place (backprop)", f"{t_out * 1e3:.1f}", f"{t_out / tc:.2f}"],
                 ["torch.clone of the state", f"{tc * 1e3:.1f}", "1.00"]]
    print(f"  cost layer: in place {t_in / tc:.2f} clones, out of place {t_out / tc:.2f} clones "
          f"(clone {tc * 1e3:.1f} ms)")
    print(f"  gradients of all routes agree to {agree:.2e}; set-up (diagonal, tables) {setup:.2f} s")

    text = [f"### {today()} — {machine()}",
            f"MaxCut on a random 3-regular graph (seed 1), n = {n}, p = {p}, {S} starts in one batch, complex64; "
            f"torch threads {torch.get_num_threads()}; load average {load0:.1f} → {load1:.1f} (shared machine). "
            f"Median of {args.repeats} steps after a warm-up"
            + ("." if args.no_former else "; the first two rows were timed in turn (A B A B …)."),
            "",
            table(rows, ["value + gradient route", "s / step", "ms / start", "note"]),
            "",
            table(cost_rows, [f"cost layer, ({S}, 2^{n}) complex64", "ms", "clones"]),
            "",
            f"Gradients of all routes agree to {agree:.1e}. Set-up (cost diagonal, level table) {setup:.2f} s.",
            ""]
    out = "\n".join(text)
    print()
    print(out)
    if not args.no_append:
        append_section(out)


def append_section(block: str):
    """Add ``block`` at the end of this benchmark's section of RESULTS.md (created if absent)."""
    text = open(RESULTS).read() if os.path.exists(RESULTS) else "# Benchmark results\n"
    if HEADER not in text:
        text = text.rstrip("\n") + f"\n\n{HEADER}\n\n{block}\n"
    else:
        start = text.index(HEADER) + len(HEADER)
        nxt = text.find("\n## ", start)
        end = len(text) if nxt < 0 else nxt + 1
        section = text[:end].rstrip("\n") + "\n\n" + block + "\n"
        text = section + ("\n" + text[end:] if nxt >= 0 else "")
    with open(RESULTS, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
