"""Variational quantum linear solver (tql.research.vqls) on the paper's Ising-inspired systems.

n qubits, ``A = (Σ_j X_j + J Σ_j Z_j Z_{j+1} + η I)/ζ`` (J = 0.1, condition number 10), ``b = H^{⊗n}|0⟩``,
the default ansatz (n layers of RY + a CZ chain, a last RY layer), complex128. Reported per cost
(local, global): the optimizer steps until the fidelity with the classical solution ``A⁻¹b``
(dense solve) reaches 0.99 (median over ``--seeds`` seeds, the slowest in brackets) and the wall
time to get there (median s), and the time of one cost evaluation with its backward pass, as a
ratio to ``torch.clone`` of the state: the cost alone (state → cost → ∂cost/∂state) and the full
training step's evaluation (ansatz → cost → ∂cost/∂weights), as :func:`vqls` evaluates them (A,
U_b† and |b⟩ prepared once). ``--eval-sizes`` are timed for these two ratios only, where a state
is large enough for the passes over it, not per-call overhead, to dominate.

    python benchmarks/vqls.py [--sizes 3,4,5,6,7,8] [--eval-sizes 12,16,20] [--seeds 3] [--steps 200] [--optimizer lbfgs] [--threads 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torchquantum_layers.research import linear_solver as V  # noqa: E402

from common import machine, paired, table, today  # noqa: E402


def steps_to(A, b, x_unit, cost, seed, steps, optimizer, target=0.99):
    """(steps until |⟨x_true|x⟩|² >= target or None, wall s until then)."""
    reached = {}

    def stop(k, value, state):
        if float(torch.vdot(x_unit, state).abs().square()) >= target:
            reached["k"] = k
            return True
        return False

    start = time.perf_counter()
    V.vqls(A, b, cost=cost, steps=steps, optimizer=optimizer, seed=seed, callback=stop)
    return reached.get("k"), time.perf_counter() - start


def evaluation_ratios(A, b, n, cost, rounds):
    """(cost fwd+bwd / clone, ansatz + cost fwd+bwd / clone, clone s): the cost as :func:`vqls`
    evaluates it (A, U_b† and |b⟩ prepared once), from a state or from the default ansatz."""
    g = torch.Generator().manual_seed(n)
    x = torch.randn(1, 2 ** n, dtype=torch.complex128, generator=g)
    x = (x / x.norm()).requires_grad_(True)
    rhs = V._RightHandSide(b, torch.complex128, "cpu", "benchmark")
    a_norm = V._coefficient_norm(A)
    ansatz = V.default_ansatz(n, n, real=True)

    def cost_only():
        V._costs(A, rhs, x, (cost,), a_norm)[cost].sum().backward()

    def training_evaluation():
        V._costs(A, rhs, ansatz(), (cost,), a_norm)[cost].sum().backward()

    r_cost, _, t_clone = paired(cost_only, x.detach(), rounds)
    r_step, _, _ = paired(training_evaluation, x.detach(), rounds)
    return r_cost, r_step, t_clone


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="3,4,5,6,7,8")
    ap.add_argument("--eval-sizes", default="12,16,20", help="sizes timed for the cost evaluation only")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--optimizer", default="lbfgs")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        A, b = V.ising_linear_system(n)
        x_true = torch.linalg.solve(A.to_dense(n), b()[0])
        x_unit = x_true / x_true.norm()
        for cost in V.COSTS:
            runs = [steps_to(A, b, x_unit, cost, seed, args.steps, args.optimizer) for seed in range(args.seeds)]
            ks = [k for k, _ in runs]
            done = [k for k in ks if k is not None]
            median = statistics.median(done) if done else None
            slowest = max(done) if done else None
            failed = len(ks) - len(done)
            steps_text = "–" if median is None else f"{median:g} ({slowest})" + (f", {failed} not" if failed else "")
            r_cost, r_step, t_clone = evaluation_ratios(A, b, n, cost, args.rounds)
            rows.append([n, cost, len(A), (n + 1) * n, steps_text,
                         f"{statistics.median(t for _, t in runs):.2f}", f"{r_cost:.0f}", f"{r_step:.0f}",
                         f"{t_clone * 1e6:.2f}"])
    for n in [int(s) for s in args.eval_sizes.split(",") if s]:
        A, b = V.ising_linear_system(n)
        for cost in V.COSTS:
            r_cost, r_step, t_clone = evaluation_ratios(A, b, n, cost, args.rounds)
            rows.append([n, cost, len(A), (n + 1) * n, "(not run)", "", f"{r_cost:.1f}", f"{r_step:.1f}",
                         f"{t_clone * 1e6:.0f}"])
    print(f"{today()}, {machine()}; optimizer {args.optimizer}, {args.seeds} seeds, at most {args.steps} steps")
    print(table(rows, ["n", "cost", "terms of A", "angles", "steps to F 0.99 (slowest)", "wall s",
                       "cost fwd+bwd / clone", "ansatz+cost fwd+bwd / clone", "clone µs"]))

if __name__ == "__main__":
    main()
