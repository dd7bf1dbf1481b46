"""Chemistry benchmark (issue 6): LiH / STO-3G, 12 qubits, 631-term Hamiltonian, UCCSD 16 + 76.

(a) energy + gradient time per diff_method (median over repeats; parameter-shift: one evaluation),
    and the forward-only energy; target <= 50 ms per energy + gradient on the 2-core CPU.
(b) where the time goes: the forward pass split into building the gate matrices, applying them and
    the expectation (``--profile`` adds a torch.profiler table of one backprop energy + gradient).
(c) time to chemical accuracy (1.6 mHa from FCI) from Hartree–Fock with L-BFGS and Adam.

    python benchmarks/chemistry.py [--quick] [--no-write] [--dtype complex128]

Appends the figures to benchmarks/RESULTS.md under "## Chemistry (issue 6)".
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers.chem as chem  # noqa: E402
from torchquantum_layers import gates as G  # noqa: E402

from common import machine, table, timeit, today  # noqa: E402

TARGET_MS = 50.0
SECTION = "## Chemistry (issue 6)"
RESULTS = os.path.join(os.path.dirname(__file__), "RESULTS.md")


def lih_circuit(dtype):
    H, info = chem.load("LiH")
    c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=dtype)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():       # a generic point (not HF, where many gradients vanish)
        c.weights.copy_(0.05 * torch.randn(c.num_parameters, generator=gen, dtype=torch.float64))
    return H, info, c


def energy_grad_times(dtype, repeats):
    H, info, c = lih_circuit(dtype)

    def forward():
        with torch.no_grad():
            chem.energy(c, H)

    t_fwd = timeit(forward, repeats=repeats, min_time=0.0)
    rows = [["forward only (no grad)", f"{t_fwd * 1e3:.1f}", "-"]]
    for method in ("backprop", "adjoint", "parameter-shift"):
        def step():
            c.weights.grad = None
            chem.energy(c, H, diff_method=method).backward()
        if method == "parameter-shift":
            t0 = time.perf_counter()
            step()
            t = time.perf_counter() - t0
        else:
            t = timeit(step, repeats=repeats, min_time=0.0)
        verdict = "meets" if t * 1e3 <= TARGET_MS else f"misses ({t * 1e3 / TARGET_MS:.1f}x)"
        rows.append([f"{method} energy+grad", f"{t * 1e3:.1f}", verdict if method != "parameter-shift" else "-"])
    return rows, len(H), c.num_parameters


def time_to_accuracy(dtype, steps):
    rows = []
    for optimizer, diff in (("lbfgs", "backprop"), ("adam", "backprop"), ("lbfgs", "adjoint")):
        H, info = chem.load("LiH")
        c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=dtype)
        evals = {"n": 0}

        def count(k, e, _):
            evals["n"] += 1
        t0 = time.perf_counter()
        r = chem.vqe(H, c, steps=steps, optimizer=optimizer, diff_method=diff, target=info.fci_energy,
                     callback=count)
        wall = time.perf_counter() - t0
        err = (r.energy - info.fci_energy) * 1e3
        rows.append([optimizer, diff, r.n_steps, f"{err:+.3f}", "yes" if r.converged else "no", f"{wall:.2f}"])
    return rows


def fourteen_qubits(dtype, steps, names=("BeH2", "H2O")):
    """(d) the 14-qubit molecules: UCCSD from HF with L-BFGS (energy + gradient per evaluation)."""
    rows = []
    for name in names:
        H, info = chem.load(name)
        c = chem.uccsd(info.n_qubits, info.n_electrons, dtype=dtype)

        def step():
            c.weights.grad = None
            chem.energy(c, H, diff_method="backprop").backward()
        t_eval = timeit(step, repeats=3, min_time=0.0)
        with torch.no_grad():
            c.weights.zero_()
        t0 = time.perf_counter()
        r = chem.vqe(H, c, steps=steps, optimizer="lbfgs", diff_method="backprop", target=info.fci_energy)
        wall = time.perf_counter() - t0
        rows.append([name, info.n_qubits, len(H), c.num_parameters, f"{t_eval * 1e3:.0f}", r.n_steps,
                     f"{(r.energy - info.fci_energy) * 1e3:+.3f}", "yes" if r.converged else "no", f"{wall:.1f}"])
    return rows


def matrix_build_ms(dtype):
    p = (torch.tensor(0.3, dtype=torch.float64),)
    out = {}
    for gate in (G.DOUBLE_EXCITATION, G.SINGLE_EXCITATION):
        gate.matrix(p, dtype=dtype)
        out[gate.name] = timeit(lambda: gate.matrix(p, dtype=dtype), repeats=5, min_time=0.02) * 1e3
    return out


def breakdown(dtype, repeats):
    """Forward pass split by hand (the profiler's own overhead distorts these small ops): where
    the engine runs local programs (the CPU with the native library), building their slot
    matrices and running them; else building and applying the one-gate steps' matrices."""
    from torchquantum_layers import engine as E
    from torchquantum_layers.observables import expectation
    H, info, c = lih_circuit(dtype)
    _, state, _ = c.prepare()
    with torch.no_grad():
        psi = E.run_circuit(c, state)
        out = {"forward (engine)": timeit(lambda: E.run_circuit(c, state), repeats=repeats, min_time=0.0)}
        if E.uses_programs(c):
            out.update(_program_breakdown(c, state, repeats))
        else:
            out.update(_single_step_breakdown(c, state, repeats))
        out["expectation <psi|H|psi> (631 terms)"] = timeit(lambda: expectation(psi, H), repeats=repeats,
                                                            min_time=0.0)
    return [[k, f"{v * 1e3:.1f}"] for k, v in out.items()]


def _program_breakdown(c, state, repeats):
    from torchquantum_layers import engine as E
    from torchquantum_layers.block_matrices import extra_slot_tables, program_matrices, single_wire_tables
    from torchquantum_layers.kernels import program as programs
    plan = E.build_plan(c, layout=E.rotating_layout(c), zero_start=False, local_programs=True)
    steps = [s for s in plan.steps if s.kind == "program"]
    slots = sum(len(s.program.code) for s in steps)

    def build():
        tables = single_wire_tables(c, plan, None, None)
        extras = extra_slot_tables(c, plan, None, None)
        return [program_matrices(c, s, tables, extras) for s in steps]
    mats = build()

    def run():
        st = state
        for s, m in zip(steps, mats):
            st = programs.run(st, *m, s.program, unitary=True)
    others = len(plan.steps) - len(steps)
    return {f"  building the slot matrices of {len(steps)} program(s), {slots} instructions "
            f"({others} other steps)": timeit(build, repeats=repeats, min_time=0.0),
            "  running the programs, matrices prebuilt": timeit(run, repeats=repeats, min_time=0.0)}


def _single_step_breakdown(c, state, repeats):
    from collections import Counter
    from torchquantum_layers import engine as E
    from torchquantum_layers.kernels.apply import apply_matrix_unchecked, apply_two_level_unchecked
    plan = E.build_plan(c)
    singles = [s for s in plan.steps if s.kind == "single"]
    names = ", ".join(f"{k} {v}" for k, v in Counter(s.ops[0].gate.name for s in singles).items())

    def operator(op):
        """What the op's kernel takes: a Givens rotation's 2 x 2 block, else the dense matrix."""
        angles = c.angle_values(op, None)
        if op.gate.kind == "two-level":
            return op.gate.block_fn(angles, c.dtype, c.device)
        return op.gate.matrix(angles, n_wires=len(op.wires), dtype=c.dtype, device=c.device)

    def apply_operator(st, op, m):
        if op.gate.kind == "two-level":
            return apply_two_level_unchecked(st, m, op.gate.levels, op.wires, c.n_wires)
        return apply_matrix_unchecked(st, m, op.wires, c.n_wires)
    mats = [operator(s.ops[0]) for s in singles]

    def build():
        for s in singles:
            operator(s.ops[0])

    def apply():
        st = state
        for s, m in zip(singles, mats):
            st = apply_operator(st, s.ops[0], m)
    return {f"  building the matrices of the {len(singles)} one-gate steps ({names})":
            timeit(build, repeats=repeats, min_time=0.0),
            f"  applying those {len(singles)} matrices, prebuilt": timeit(apply, repeats=repeats, min_time=0.0)}


def profile_table(dtype, rows=12):
    from torch.profiler import ProfilerActivity, profile
    H, info, c = lih_circuit(dtype)
    c.weights.grad = None
    chem.energy(c, H).backward()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        c.weights.grad = None
        chem.energy(c, H).backward()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=40)


def write_results(text):
    if not os.path.exists(RESULTS):
        with open(RESULTS, "w", encoding="utf-8") as f:
            f.write("# Benchmark results\n")
    with open(RESULTS, encoding="utf-8") as f:
        doc = f.read()
    if SECTION not in doc:
        doc = doc.rstrip("\n") + f"\n\n{SECTION}\n\n{text}\n"
    else:                                   # add this run at the end of our section only
        start = doc.index(SECTION)
        nxt = doc.find("\n## ", start + len(SECTION))
        end = len(doc) if nxt < 0 else nxt
        doc = doc[:end].rstrip("\n") + f"\n\n{text}\n" + doc[end:]
    with open(RESULTS, "w", encoding="utf-8") as f:
        f.write(doc)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats, no time-to-accuracy runs")
    p.add_argument("--no-write", action="store_true", help="do not append to benchmarks/RESULTS.md")
    p.add_argument("--dtype", default="complex128", choices=["complex64", "complex128"])
    p.add_argument("--steps", type=int, default=60, help="most optimizer steps for time to accuracy")
    p.add_argument("--profile", action="store_true", help="print the torch.profiler table")
    p.add_argument("--no-14", action="store_true", help="skip (d), the 14-qubit BeH2 / H2O runs")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = p.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = 3 if args.quick else 7
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = f"{today()}, {machine()}, {args.dtype}, load average {load:.1f} at start"
    print(header)

    t_rows, n_terms, n_params = energy_grad_times(dtype, repeats)
    t1 = table(t_rows, ["LiH 12 qubits, UCCSD", "ms", f"target {TARGET_MS:.0f} ms"])
    print(f"\n(a) {n_terms} Pauli terms, {n_params} angles\n{t1}")

    builds = matrix_build_ms(dtype)
    note = (f"one gate matrix: DOUBLEEXCITATION {builds['DOUBLEEXCITATION']:.2f} ms, "
            f"SINGLEEXCITATION {builds['SINGLEEXCITATION']:.2f} ms (gates.Gate.matrix)")
    b_rows = breakdown(dtype, repeats)
    t3 = table(b_rows, ["where a forward pass goes", "ms"])
    print(f"\n(b) {note}\n{t3}")

    a_rows = []
    if not args.quick:
        a_rows = time_to_accuracy(dtype, args.steps)
        t2 = table(a_rows, ["optimizer", "diff_method", "steps", "E - FCI (mHa)", "chem. acc.", "wall s"])
        print(f"\n(c) time to chemical accuracy from HF\n{t2}")
    d_rows = []
    if not args.quick and not args.no_14:
        d_rows = fourteen_qubits(dtype, args.steps)
        t4 = table(d_rows, ["molecule", "qubits", "terms", "angles", "energy+grad ms", "L-BFGS steps",
                            "E - FCI (mHa)", "chem. acc.", "wall s"])
        print(f"\n(d) 14 qubits, UCCSD from HF, L-BFGS, backprop\n{t4}")
    if args.profile:
        print("\ntorch.profiler, one backprop energy + gradient\n" + profile_table(dtype))

    if not args.no_write:
        parts = [f"### {header}", "", f"(a) energy + gradient, {n_terms} terms, {n_params} angles", "", t1, "",
                 f"(b) {note}", "", t3]
        if a_rows:
            parts += ["", "(c) time to chemical accuracy (1.6 mHa) from Hartree–Fock", "", t2]
        if d_rows:
            parts += ["", "(d) 14 qubits: UCCSD from Hartree–Fock, L-BFGS, backprop", "", t4]
        write_results("\n".join(parts))
        print(f"\nappended to {os.path.relpath(RESULTS)}")


if __name__ == "__main__":
    main()
