"""Forward pass of a deep circuit without a graph (inference, and the forward run of the adjoint
and parameter-shift methods): ms per run, page faults per run, and clone-times per gate.

    python benchmarks/circuit_forward.py [--sizes 20,22,24] [--layers 3] [--dtypes c64,c128]
                                         [--repeats 5] [--threads T] [--keep-freed-memory]
                                         [--package-root DIR]

The circuit is ``layers`` times (RY on every wire, a chain of CNOTs) from a random state; on the
CPU the engine runs it as passes of tiled programs. Page faults count the kernel zeroing fresh
pages for new state-sized tensors (glibc maps every allocation above its mmap threshold anew).
``--package-root`` imports torchquantum_layers from another checkout (a ``git worktree`` of an
earlier commit), so two versions can be timed by the same script.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

import torch

_ROOT = os.path.join(os.path.dirname(__file__), "..")


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def circuit(tql, n, dtype, layers):
    c = tql.Circuit(n, dtype=dtype)
    for _ in range(layers):
        for w in range(n):
            c.ry(w, 0.1 + 0.01 * w)
        for w in range(n - 1):
            c.cnot(w, w + 1)
    return c


def bench(tql, run_circuit, n, dtype, layers, repeats):
    c = circuit(tql, n, dtype, layers)
    state = tql.random_state(n, 1, dtype=dtype, generator=torch.Generator().manual_seed(n))

    def run():
        with torch.no_grad():
            return run_circuit(c, state)
    run()
    times, faults, clones = [], [], []
    for _ in range(repeats):
        f0, t0 = _faults(), time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
        faults.append(_faults() - f0)
        t0 = time.perf_counter()
        state.clone()
        clones.append(time.perf_counter() - t0)
    t, tc = statistics.median(times), statistics.median(clones)
    gates = layers * (2 * n - 1)
    return {"n": n, "dtype": str(dtype).replace("torch.", ""), "layers": layers,
            "ms per run": f"{t * 1e3:.1f}", "page faults per run": f"{statistics.median(faults):.0f}",
            "state MiB": f"{state.numel() * state.element_size() / 2 ** 20:.0f}",
            "clone ms": f"{tc * 1e3:.2f}", "clones per gate": f"{t / tc / gates:.2f}"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="20,22,24")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dtypes", default="c64,c128")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--package-root", default=_ROOT, help="import torchquantum_layers from this checkout")
    sys.path.insert(0, os.path.dirname(__file__))
    from common import add_runtime_flags, keep_memory_if_asked, machine, rows_table, set_threads, today
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(args.package_root))
    import torchquantum_layers as tql
    from torchquantum_layers.engine import run_circuit
    set_threads(args)
    kept = keep_memory_if_asked(args)
    dts = {"c64": torch.complex64, "c128": torch.complex128}
    rows = [bench(tql, run_circuit, n, dts[d], args.layers, args.repeats)
            for d in args.dtypes.split(",") for n in map(int, args.sizes.split(","))]
    print(f"# circuit forward without a graph, {today()}, {machine()}, package {os.path.abspath(tql.__file__)}"
          + (", keep_freed_memory" if kept else ""))
    print(rows_table(rows))


if __name__ == "__main__":
    main()
