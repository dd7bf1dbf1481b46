"""Timing helpers shared by the benchmarks: medians, ratios to a clone, machine description."""
from __future__ import annotations

import contextlib
import datetime
import os
import platform
import statistics
import time

import torch


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timeit(fn, device="cpu", repeats=7, min_time=0.05):
    """Median seconds per call; each sample loops until it lasts ``min_time``."""
    fn()
    sync(device)
    samples = []
    for _ in range(repeats):
        loops, start = 0, time.perf_counter()
        while True:
            fn()
            loops += 1
            sync(device)
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        samples.append(elapsed / loops)
    return statistics.median(samples)


def clone_time(state, repeats=7):
    return timeit(lambda: state.clone(), state.device, repeats)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    gpu = ""
    if torch.cuda.is_available():
        gpu = ", " + torch.cuda.get_device_name(0)
    return f"{os.cpu_count()}-core {cpu}{gpu}, torch {torch.__version__}, threads {torch.get_num_threads()}"


def today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def table(rows, headers) -> str:
    # a "|" inside a cell or header ("|noisy − ideal|") would split a Markdown row: escape it
    headers = [str(h).replace("|", "\\|") for h in headers]
    rows = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(str(r[i]).ljust(w) for i, w in enumerate(widths)) + " |" for r in rows]
    return "\n".join([line, sep, *body])


def rows_table(rows) -> str:
    """:func:`table` of dict rows whose keys may differ (the columns: every key, first seen first)."""
    headers = []
    for r in rows:
        headers += [h for h in r if h not in headers]
    return table([[r.get(h, "") for h in headers] for r in rows], headers)


def _run_for(fn, min_time):
    loops, start = 0, time.perf_counter()
    while True:
        fn()
        loops += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / loops


def synced(fn, device):
    """``fn`` followed by a CUDA synchronisation on a CUDA device (``fn`` itself elsewhere)."""
    if torch.device(device).type != "cuda":
        return fn

    def run():
        fn()
        torch.cuda.synchronize()
    return run


def paired(fn, state, rounds, min_time=0.05, yardstick=None):
    """Median over rounds of time(fn) / time(yardstick), each round timing yardstick, fn,
    yardstick in turn (robust to the load of a shared machine drifting during the run); the
    yardstick defaults to ``state.clone()``. Returns (ratio, t, t_yardstick)."""
    yard = yardstick if yardstick is not None else (lambda: state.clone())
    fn()
    ratios, ts, tcs = [], [], []
    for _ in range(rounds):
        t0 = _run_for(yard, min_time)
        t = _run_for(fn, min_time)
        t1 = _run_for(yard, min_time)
        tc = (t0 + t1) / 2
        ratios.append(t / tc)
        ts.append(t)
        tcs.append(tc)
    return statistics.median(ratios), statistics.median(ts), statistics.median(tcs)


def add_runtime_flags(ap, keep_help="tql.runtime.keep_freed_memory() first (as the tql command does)"):
    """``--threads`` and ``--keep-freed-memory``, the process settings every timing depends on."""
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--keep-freed-memory", action="store_true", help=keep_help)


def set_threads(args):
    if args.threads:
        torch.set_num_threads(args.threads)


def keep_memory_if_asked(args) -> bool:
    """Apply ``--keep-freed-memory``; True when it took effect (glibc)."""
    if not args.keep_freed_memory:
        return False
    from torchquantum_layers.runtime import keep_freed_memory
    return keep_freed_memory()


@contextlib.contextmanager
def programs_engine(on: bool):
    """The CPU engine's local programs on or off (``engine.USE_PROGRAMS``) inside the block."""
    from torchquantum_layers import engine
    old = engine.USE_PROGRAMS
    engine.USE_PROGRAMS = on
    try:
        yield
    finally:
        engine.USE_PROGRAMS = old


def forward_and_step(forward, step, state, rounds):
    """(forward s, forward / clone of ``state``, step s): both timed by :func:`paired`."""
    ratio, t_fwd, _ = paired(forward, state, rounds, min_time=0.1)
    _, t_step, _ = paired(step, state, rounds, min_time=0.1)
    return t_fwd, ratio, t_step


def layered_circuit_args(doc, sizes, rounds, **extra):
    """Parse the flags of the layered-circuit benchmarks (--sizes, --layers, --rounds, ``extra``
    int flags with their defaults, runtime flags), apply the runtime ones and print the header."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--sizes", default=sizes)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=rounds)
    for name, default in extra.items():
        ap.add_argument(f"--{name}", type=int, default=default)
    add_runtime_flags(ap)
    args = ap.parse_args()
    set_threads(args)
    kept = keep_memory_if_asked(args)
    print(f"{today()}, {machine()}, B = 8, {args.layers} layers{', freed memory kept' if kept else ''}")
    return args


def noisy_hea_case(n, layers, p):
    """The mitigation benchmarks' case (zne.py, pec.py): angle encoding + ``layers`` hardware-
    efficient layers in complex128 with seeded angles, one input row, depolarizing ``p`` after
    every CNOT, and the mean nearest-neighbour ZZ: ``(circuit, x, noise_model, H)``."""
    import torchquantum_layers as tql
    from torchquantum_layers import mixed
    c = tql.Circuit(n).double()
    tql.templates.angle_encoding(c)
    tql.templates.hardware_efficient(c, n_layers=layers)
    with torch.no_grad():
        c.weights.copy_(torch.rand(c.weights.shape, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
                        * 6.28)
    x = torch.rand(1, n, generator=torch.Generator().manual_seed(n + 1), dtype=torch.float64)
    noise = tql.NoiseModel().add(mixed.depolarizing(p), gates="CNOT")
    H = tql.Hamiltonian([(1.0 / (n - 1), f"Z{w} Z{w + 1}") for w in range(n - 1)])
    return c, x, noise, H
