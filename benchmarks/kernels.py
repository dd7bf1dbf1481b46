"""Kernel benchmark (issue 2): single gates (a 1-qubit rotation, CNOT, RZZ, a controlled rotation, a dense
two-wire RXX) and a layered circuit, as ratios to ``torch.clone``.

    python benchmarks/kernels.py [--nmin 16] [--nmax 24] [--dtypes c64,c128] [--fuse-widths 2,3,4,5]

One clone = one read + one write of the state, measured in the same run, so the ratios are
comparable across noisy shared machines. The layered circuit runs unfused, as fused blocks of
each width (the GPU's engine) and, on the CPU, as (tiled) local programs, the engine's default. On CUDA every
kernel is also reported as achieved bandwidth in % of a device-to-device copy of the same bytes
(the 1-qubit gate timed on its own, the others as the inverse of their worst clone ratio).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import engine, gates as G  # noqa: E402
from torchquantum_layers.engine import run_circuit  # noqa: E402

from common import (  # noqa: E402
    add_runtime_flags, keep_memory_if_asked, machine, paired, rows_table, set_threads, synced, timeit, today)

DT = {"c64": torch.complex64, "c128": torch.complex128}


def layered(n, dtype, device, fuse, width):
    c = tql.Circuit(n, fuse=fuse, max_fused_wires=width)
    for w in range(n):
        c.ry(w, 0.1 + 0.01 * w)
    for w in range(n - 1):
        c.cnot(w, w + 1)
    c = c.to(device)
    return c.double() if dtype == torch.complex128 else c


def bench(n, dtype, device, widths, rounds):
    """Every ratio is a median over rounds that time clone, operation, clone in turn (a shared
    machine's drifting load cancels); CUDA syncs inside the timed calls."""
    state = tql.random_state(n, 1, dtype=dtype, device=device)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    theta = torch.tensor(0.3, dtype=real, device=device)

    def ratio(fn):
        return paired(synced(fn, device), state, rounds)[0]
    wires_1q = [0, n // 2, n - 1]
    one_q = [ratio(lambda w=w: G.RY.apply(state, (theta,), (w,), n)) for w in wires_1q]
    pairs = [(0, 1), (n // 2, n // 2 + 1), (n - 2, n - 1), (0, n - 1)]
    cnot = [ratio(lambda a=a, b=b: G.CNOT.apply(state, (), (a, b), n)) for a, b in pairs]
    rzz = [ratio(lambda a=a, b=b: G.RZZ.apply(state, (theta,), (a, b), n)) for a, b in [(0, 1), (n // 2, n - 1)]]
    # a controlled block: only the controls=1 half changes (control and target far apart, both ways, and adjacent)
    cry_pairs = [(0, n - 1), (n - 1, 0), (n // 2, n // 2 + 1)]
    cry = [ratio(lambda a=a, b=b: G.CRY.apply(state, (theta,), (a, b), n)) for a, b in cry_pairs]
    # a dense two-wire gate: far apart (the lower bit inside a register), adjacent in the middle, the last two
    rxx_pairs = [(0, n - 1), (n // 2, n // 2 + 1), (n - 2, n - 1)]
    rxx = [ratio(lambda a=a, b=b: G.RXX.apply(state, (theta,), (a, b), n)) for a, b in rxx_pairs]
    gates_per_layer = 2 * n - 1
    layers = {}
    variants = [("unfused", False, None, False)] + [(f"fused k={w}", True, w, False) for w in widths]
    if torch.device(device).type == "cpu":
        variants.append(("programs", True, None, True))
    elif widths:
        # CUDA: blocks in place (Triton) against the register-rotating GEMMs they replaced
        variants.append((f"fused k={widths[-1]} rotating", True, widths[-1], "rotating"))
    for label, fuse, width, use_programs in variants:
        c = layered(n, dtype, device, fuse, width)

        def run(c=c):
            with torch.no_grad():
                run_circuit(c, state)
        saved, saved_layout = engine.USE_PROGRAMS, engine.rotating_layout
        engine.USE_PROGRAMS = use_programs is True
        if use_programs == "rotating":
            engine.rotating_layout = lambda circuit: True
        try:
            layers[label] = ratio(run) / gates_per_layer
        finally:
            engine.USE_PROGRAMS, engine.rotating_layout = saved, saved_layout
    tc = paired(lambda: None, state, 1)[2]
    row = {"n": n, "dtype": str(dtype).replace("torch.", ""), "clone ms": f"{tc * 1e3:.3f}",
           "1q mean": f"{sum(one_q) / len(one_q):.2f}",
           "1q max (wire)": f"{max(one_q):.2f} ({wires_1q[one_q.index(max(one_q))]})",
           "CNOT max (pair)": "{:.2f} ({},{})".format(max(cnot), *pairs[cnot.index(max(cnot))]),
           "RZZ max": f"{max(rzz):.2f}",
           "CRY max (pair)": "{:.2f} ({},{})".format(max(cry), *cry_pairs[cry.index(max(cry))]),
           "RXX max (pair)": "{:.2f} ({},{})".format(max(rxx), *rxx_pairs[rxx.index(max(rxx))])}
    for k, v in layers.items():
        row[f"layer/gate {k}"] = f"{v:.2f}"
    if torch.device(device).type == "cuda":
        nbytes = state.numel() * state.element_size()
        copy_t = timeit(lambda: state.clone(), device)
        gate_t = timeit(lambda: G.RY.apply(state, (theta,), (n // 2,), n), device)
        row["1q % of copy bw"] = f"{100 * copy_t / gate_t:.0f}%"
        row["copy GB/s"] = f"{2 * nbytes / copy_t / 1e9:.0f}"
        # every kernel reads and writes the state once: its bandwidth against the copy's is the
        # inverse of its clone ratio (worst case over the wires measured)
        for name, ratios in (("CNOT", cnot), ("RZZ", rzz), ("CRY", cry), ("RXX", rxx)):
            row[f"{name} % of copy bw (worst)"] = f"{100 / max(ratios):.0f}%"
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--nmin", type=int, default=16)
    ap.add_argument("--nmax", type=int, default=24)
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--dtypes", default="c64,c128")
    ap.add_argument("--fuse-widths", default="2,3,4,5")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved clone/operation rounds (median)")
    add_runtime_flags(ap, "tql.runtime.keep_freed_memory() first: no page faults for the clone or the gates")
    args = ap.parse_args(argv)
    set_threads(args)
    kept = keep_memory_if_asked(args)
    widths = [int(w) for w in args.fuse_widths.split(",") if w]
    rows = []
    for n in range(args.nmin, args.nmax + 1, args.step):
        for d in args.dtypes.split(","):
            rows.append(bench(n, DT[d], args.device, widths, args.rounds))
            print(f"done n={n} {d}", file=sys.stderr, flush=True)
    print(f"# kernels benchmark, {today()}, {machine()}, device {args.device}"
          + (", keep_freed_memory() applied" if kept else ""))
    print("ratios are time / time of torch.clone of the same state, median of interleaved rounds (lower is better)")
    print(rows_table(rows))


if __name__ == "__main__":
    main()
