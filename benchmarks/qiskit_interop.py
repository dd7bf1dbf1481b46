"""Qiskit interoperability: conversion times and a batched forward pass against Qiskit's Statevector.

    python benchmarks/qiskit_interop.py [--convert-qubits 20] [--gates 500] [--qubits 16]
                                        [--batch 64] [--qiskit-samples 4] [--rounds 5] [--threads T]

* conversion: ``tql.Circuit.from_qiskit`` and ``circuit.to_qiskit()`` of a seeded
  ``qiskit.circuit.random.random_circuit`` (1- and 2-qubit gates, cut to ``--gates`` instructions)
  on ``--convert-qubits`` qubits; medians of ``--rounds`` calls.
* forward: the same kind of circuit on ``--qubits`` qubits after an RY(x_i) encoding layer (one
  input column per qubit), ``--batch`` feature rows. tql: one batched forward ``c(x)`` in complex128
  (Qiskit's precision), median of ``--rounds``. Qiskit: ``Statevector(qc.assign_parameters(row))``
  per row, what TorchConnector's default estimator (StatevectorEstimator) runs; it is timed on
  ``--qiskit-samples`` rows and scaled to the batch (each row costs the same). The first rows'
  states are checked against each other before timing.

The script prints a Markdown section (date, machine, versions, table); it writes no file.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402

from common import add_runtime_flags, machine, set_threads, table, today  # noqa: E402


def random_gates(n: int, gates: int, seed: int):
    """A random Qiskit circuit of exactly ``gates`` instructions of 1 and 2 qubits."""
    from qiskit import QuantumCircuit
    from qiskit.circuit.random import random_circuit
    big = random_circuit(n, 2 * gates // n + 8, max_operands=2, seed=seed)
    qc = QuantumCircuit(n)
    for inst in big.data[:gates]:
        qc.append(inst)
    if len(qc.data) != gates:
        raise RuntimeError(f"random_circuit gave {len(qc.data)} instructions, fewer than {gates}")
    return qc


def median_time(fn, rounds: int) -> float:
    fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def conversion_rows(n: int, gates: int, rounds: int) -> list:
    qc = random_gates(n, gates, seed=1)
    t_from = median_time(lambda: tql.Circuit.from_qiskit(qc), rounds)
    c = tql.Circuit.from_qiskit(qc)
    t_to = median_time(c.to_qiskit, rounds)
    return [[f"from_qiskit, {n} qubits, {gates} gates ({len(c.ops)} tql ops)", f"{t_from * 1e3:.1f} ms", ""],
            [f"to_qiskit of that circuit ({len(c.to_qiskit().data)} Qiskit instructions)", f"{t_to * 1e3:.1f} ms", ""]]


def encoded(n: int, gates: int):
    from qiskit import QuantumCircuit
    from qiskit.circuit import ParameterVector
    x = ParameterVector("x", n)
    qc = QuantumCircuit(n)
    for i in range(n):
        qc.ry(x[i], i)
    qc.compose(random_gates(n, gates, seed=2), inplace=True)
    return qc, x


def forward_rows(n: int, gates: int, batch: int, samples: int, rounds: int) -> list:
    from qiskit.quantum_info import Statevector
    qc, x = encoded(n, gates)
    c = tql.Circuit.from_qiskit(qc, inputs=x, dtype=torch.complex128)
    feats = torch.rand(batch, n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def qiskit_state(row):
        return Statevector(qc.assign_parameters(dict(zip(x, row.tolist())))).data

    want = tql.from_qiskit_order(torch.as_tensor(qiskit_state(feats[0])).reshape(1, -1))
    err = (c(feats[:1]) - want).abs().max().item()
    if err > 1e-10:
        raise RuntimeError(f"tql and Qiskit states differ by {err:.3g}")
    t_tql = median_time(lambda: c(feats), rounds)
    start = time.perf_counter()
    for row in feats[:samples]:
        qiskit_state(row)
    t_qiskit = (time.perf_counter() - start) / samples * batch
    label = f"forward, {n} qubits, RY encoding + {gates} gates, B = {batch}"
    return [[f"{label}: tql c(x), complex128", f"{t_tql * 1e3:.0f} ms", ""],
            [f"{label}: Qiskit Statevector per row (x{batch} from {samples} rows)", f"{t_qiskit * 1e3:.0f} ms",
             f"{t_qiskit / t_tql:.0f}x tql"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--convert-qubits", type=int, default=20)
    ap.add_argument("--gates", type=int, default=500)
    ap.add_argument("--qubits", type=int, default=16)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--qiskit-samples", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    import qiskit
    load = os.getloadavg()[0]
    rows = conversion_rows(args.convert_qubits, args.gates, args.rounds)
    rows += forward_rows(args.qubits, args.gates, args.batch, args.qiskit_samples, args.rounds)
    print(f"### {today()} — {machine()}, qiskit {qiskit.__version__}, numpy {np.__version__}; "
          f"load average {load:.1f} → {os.getloadavg()[0]:.1f}\n")
    print(table(rows, ["case", "time", "ratio"]))


if __name__ == "__main__":
    main()
