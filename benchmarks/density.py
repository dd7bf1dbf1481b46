"""Density-matrix benchmark (issue 9): a one-qubit gate and a depolarizing channel on 10- and
12-qubit density matrices, as ratios to one clone of ρ (``torch.clone``: one read + one write
of the 4**n amplitudes), measured in the same run.

    python benchmarks/density.py [--n 10,12] [--dtypes c64,c128] [--threads T] [--append]

A gate is two kernel passes (U on the row wires, conj(U) on the column wires of ρ viewed as a
vector on 2n wires), so ≈ 2× a state-vector gate on 2n qubits; a one-qubit channel is one
4×4 superoperator GEMM on the (row, column) wire pair, whatever its number of Kraus operators.
``--append`` adds the table to benchmarks/RESULTS.md under "## Density matrices (issue 9)".
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torchquantum_layers import gates as G  # noqa: E402
from torchquantum_layers import mixed, qinfo  # noqa: E402
from torchquantum_layers.mixed.simulate import _apply_op_vec  # noqa: E402

from common import clone_time, machine, table, timeit, today  # noqa: E402

DT = {"c64": torch.complex64, "c128": torch.complex128}
SECTION = "## Density matrices (issue 9)"


def bench(n, dtype, device):
    rho = qinfo.random_density_matrix(n, 1, rank=4, generator=torch.Generator().manual_seed(0), dtype=dtype)
    rho = rho.to(device)
    tc = clone_time(rho)
    v = rho.reshape(1, -1)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    theta = torch.tensor(0.3, dtype=real, device=device)
    wires = [0, n // 2, n - 1]
    ry = [timeit(lambda w=w: _apply_op_vec(G.RY, v, (theta,), (w,), n), device) / tc for w in wires]
    ry_api = timeit(lambda: mixed.apply_gate(rho, "RY", theta, wires=n // 2), device) / tc
    cnot = [timeit(lambda a=a, b=b: _apply_op_vec(G.CNOT, v, (), (a, b), n), device) / tc
            for a, b in [(0, 1), (n // 2, n // 2 + 1), (n - 2, n - 1)]]
    dep, ad = mixed.depolarizing(0.05), mixed.amplitude_damping(0.05)
    dp = [timeit(lambda w=w: dep(rho, w), device) / tc for w in wires]
    am = [timeit(lambda w=w: ad(rho, w), device) / tc for w in wires]
    ex = timeit(lambda: mixed.expectation(rho, "Z0 Z1 + 0.5*X2 + Y3 Y4"), device) / tc

    def fmt(xs):
        return f"{sum(xs) / len(xs):.2f} / {max(xs):.2f}"
    return {"n": n, "dtype": str(dtype).replace("torch.", ""), "clone ms": f"{tc * 1e3:.2f}",
            "RY mean/max": fmt(ry), "RY (apply_gate)": f"{ry_api:.2f}", "CNOT mean/max": fmt(cnot),
            "depolarizing mean/max": fmt(dp), "amp. damping mean/max": fmt(am), "Tr(ρH), 4 terms": f"{ex:.3f}"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="10,12")
    ap.add_argument("--dtypes", default="c64,c128")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--append", action="store_true", help="append the table to benchmarks/RESULTS.md")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    rows = [bench(int(n), DT[d], a.device) for n in a.n.split(",") for d in a.dtypes.split(",")]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    head = f"### {today()}, {machine()}, {a.device}, load average {load:.1f} at end"
    note = ("Ratios to one clone of ρ (B = 1, 4**n amplitudes); gates and channels on wires 0, n/2, n−1 "
            "(CNOT on (0,1), (n/2,n/2+1), (n−2,n−1)); mean / max over the wires. `RY` calls the gate "
            "kernel path directly, `RY (apply_gate)` the checked public function on wire n/2.")
    text = "\n".join([head, "", note, "", table([list(r.values()) for r in rows], list(rows[0]))])
    print(text)
    if a.append:
        path = os.path.join(os.path.dirname(__file__), "RESULTS.md")
        existing = open(path).read() if os.path.exists(path) else "# Benchmark results\n"
        if SECTION not in existing:
            existing = existing.rstrip("\n") + f"\n\n{SECTION}\n"
        # at the end of the section, before the next "## " heading (the file has more after it)
        start = existing.index(SECTION) + len(SECTION)
        end = existing.find("\n## ", start)
        end = len(existing) if end < 0 else end + 1
        body = existing[:end].rstrip("\n") + "\n\n" + text + "\n\n"
        with open(path, "w") as f:
            f.write(body + existing[end:])


if __name__ == "__main__":
    main()
