"""What Triton's compiler makes of each CUDA kernel specialisation (kernels/gpu_compile.py), on a
machine without a GPU: shared memory, registers and spills per thread (ptxas), and the widths of
the global loads and stores in the PTX, SASS instructions per output amplitude (per thread: a
warp issues them for 32). Not a timing: the static side of the bandwidth target
(whole-amplitude accesses, no shared-memory round trip, no spills), for review before a device run.

    python benchmarks/gpu_codegen.py [--arch 90] [--arch 80]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common import machine, table, today  # noqa: E402


def widths(counts: dict) -> str:
    return " ".join(f"{bits}b×{count}" for bits, count in counts.items()) or "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", type=int, action="append", help="sm_<arch>: 90 (H100/H200), 80 (A100), ...")
    args = parser.parse_args()
    # Unset here, not at import: importing this script (tests/test_benchmark_scripts.py) must not turn
    # the interpreter off for the rest of the process. The kernels are defined when the package's
    # kernels/gpu.py is first imported, so this only works in a fresh process, as a script.
    os.environ.pop("TRITON_INTERPRET", None)
    import triton
    from torchquantum_layers.kernels import gpu_compile
    print(f"# {today()}, {machine()}, triton {triton.__version__}")
    for arch in args.arch or [90]:
        start = time.perf_counter()
        rows = [(label, c.constexprs.get("BLOCK", "-"), c.shared_bytes, c.registers, c.spill_bytes,
                 widths(c.global_loads), widths(c.global_stores), f"{c.instructions / c.amplitudes_per_thread:.1f}")
                for label, c in gpu_compile.compile_all(arch)]
        print(f"\n## sm_{arch} ({time.perf_counter() - start:.0f} s to compile)\n")
        print(table(rows, ["launch", "BLOCK", "shared B", "registers", "spill B", "ld.global", "st.global",
                           "SASS instr. / amplitude"]))


if __name__ == "__main__":
    main()
