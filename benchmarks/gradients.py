"""Gradient benchmark (issue 4).

(a) value + gradient time per diff_method for n = 10, B = 256, L = 4 hardware-efficient layers
    (RY angle encoding; RX RY RZ on every wire + CNOT ring per layer), ⟨Z_w⟩ on every wire;
    also the forward-only time, so "adjoint within 3× of a forward pass" can be read off.
(b) peak memory against depth L = 10, 50, 200 for n = 14, B = 64, backprop vs adjoint. Each
    point runs in a fresh subprocess: CUDA reports torch.cuda.max_memory_allocated, CPU the
    process's peak RSS minus its RSS before the run.

    python benchmarks/gradients.py [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers import engine  # noqa: E402

from common import (  # noqa: E402
    add_runtime_flags, keep_memory_if_asked, machine, paired, set_threads, synced, table, timeit, today)


def model(n, layers, device):
    c = tql.Circuit(n)
    for w in range(n):
        c.ry(w, input=w)
    for _ in range(layers):
        for w in range(n):
            c.rx(w, trainable=True)
            c.ry(w, trainable=True)
            c.rz(w, trainable=True)
        for w in range(n):
            c.cnot(w, (w + 1) % n)
    return c.to(device)


METHODS = ("backprop", "adjoint", "parameter-shift")


def timing(device, repeats):
    """Value + gradient per method, and its ratio to a forward pass: the median over rounds that
    time forward, method, forward in turn (a shared machine's drifting load cancels)."""
    n, B, L = 10, 256, 4
    c = model(n, L, device)
    x = torch.rand(B, n, device=device)
    obs = [tql.PauliString(f"Z{w}") for w in range(n)]

    def forward():
        with torch.no_grad():
            tql.expval(c, obs, x=x)
    t_fwd = timeit(forward, device, repeats)
    rows = []
    for method in METHODS:
        def step():
            c.zero_grad()
            tql.expval(c, obs, x=x, diff_method=method).sum().backward()
        if method == "parameter-shift":
            t = timeit(step, device, 1, min_time=0.0)
            rows.append([method, f"{t * 1e3:.1f}", f"{t / t_fwd:.1f}"])
            continue
        ratio, t, _ = paired(synced(step, device), None, repeats, min_time=0.1,
                             yardstick=synced(forward, device))
        rows.append([method, f"{t * 1e3:.1f}", f"{ratio:.2f}"])
    return t_fwd, rows


def memory_point(method, layers, device):
    n, B = 14, 64
    c = model(n, layers, device)
    x = torch.rand(B, n, device=device)
    obs = [tql.PauliString(f"Z{w}") for w in range(n)]
    with torch.no_grad():      # build the execution plan first: it is circuit structure, not state memory
        tql.expval(c, obs, x=x[:1])
    base = _rss()
    _reset_peak_rss()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    tql.expval(c, obs, x=x, diff_method=method).sum().backward()
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else _peak_rss()
    return {"method": method, "layers": layers, "peak_bytes": peak - base, "gates": len(c.ops)}


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak_rss():
    """Start the peak over from the current RSS (Linux: "5" to clear_refs resets VmHWM), so the
    peak of building the plan or importing torch is not taken for the run's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_rss():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory(device, depths):
    rows = []
    for method in ("backprop", "adjoint"):
        for layers in depths:
            if method == "backprop" and layers > 50 and device == "cpu" and not engine.uses_programs(model(14, 1, device)):
                # the fused-block engine's autograd keeps a state per block (local programs keep two)
                rows.append([method, layers, "-", "skipped: ~17 GiB by extrapolation, over this machine's 24 GiB "
                                                  "with the OS and other processes"])
                continue
            # glibc keeps freed 8 MiB blocks in its heap once its mmap threshold has grown, so peak RSS
            # would count dead memory; a fixed threshold returns them and RSS tracks live tensors
            env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
            out = subprocess.run([sys.executable, __file__, "--point", method, str(layers), device],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                rows.append([method, layers, "-", f"failed ({out.returncode}): {out.stderr.strip()[-80:]}"])
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append([method, layers, r["gates"], f"{r['peak_bytes'] / 2 ** 20:.0f}"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="depths 10, 50 only")
    ap.add_argument("--point", nargs=3)
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    add_runtime_flags(ap, "tql.runtime.keep_freed_memory() before the timings of (a), as the tql command does")
    args = ap.parse_args(argv)
    set_threads(args)
    if args.point:
        method, layers, device = args.point
        print(json.dumps(memory_point(method, int(layers), device)))
        return
    print(f"# gradients benchmark, {today()}, {machine()}, device {args.device}")
    if not args.memory_only:
        # the memory part (b) runs in fresh subprocesses with their own allocator settings
        kept = keep_memory_if_asked(args)
        t_fwd, rows = timing(args.device, 5)
        print(f"(a) n=10, B=256, L=4: forward only {t_fwd * 1e3:.1f} ms"
              + (" (keep_freed_memory() applied)" if kept else ""))
        print(table(rows, ["diff_method", "value+grad ms", "x forward"]))
    depths = [10, 50] if args.quick else [10, 50, 200]
    print("(b) n=14, B=64: peak memory of value+grad (MiB above the process baseline)")
    print(table(memory(args.device, depths), ["diff_method", "layers", "gates", "peak MiB"]))


if __name__ == "__main__":
    main()
