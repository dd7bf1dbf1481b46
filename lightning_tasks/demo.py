"""``tql demo``: the three flagship applications end to end, each against an independent reference.

    tql demo [--out DIR] [--quick] [--no-plots] [--skip-lih] [--no-progress]
    python -m lightning_tasks.demo ...            # the same without the console script

Runs, each with a progress bar:

1. VQE on the bundled H2 (STO-3G, 4 qubits, UCCSD, Adam) through :class:`~lightning_tasks.vqe.VQETask`;
   reference: the bundled FCI energy; target: chemical accuracy (1.6 mHa).
2. The H2 dissociation curve (:func:`~lightning_tasks.vqe.pes_scan`, L-BFGS, warm starts) against
   FCI at every bond length; the table shows the worst point.
3. QAOA MaxCut on the Petersen graph (10 nodes, 15 edges, p = 3, 8 starts in one batch) with
   :mod:`torchquantum_layers.optimization`; reference: the maximum cut by brute force over all
   2^10 bitstrings (12 edges); target: approximation ratio >= 0.95.
4. The hybrid classifier (:class:`~lightning_tasks.classifier.HybridClassifier` on
   :class:`~lightning_tasks.data.CirclesDataModule`, Paddle Quantum's circle set); reference:
   Paddle Quantum's test accuracy of 1.00; target: test accuracy >= 0.95.
5. VQE on the bundled LiH (12 qubits, 92 UCCSD angles, L-BFGS) when it fits in the time budget
   (``--budget``): one energy-and-gradient evaluation is timed first, and LiH is reported as
   skipped, with the projection, when it would overrun.

Ends with one summary table (result, reference, error, target, time, status) and the paths of the
PNG figures saved under ``--out`` (with matplotlib, the ``plot`` extra). :func:`run_demo` returns
the rows. ``--quick`` runs a few steps of each (a smoke test: targets are not expected to be met).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import List

import torch

from torchquantum_layers import plotting
from torchquantum_layers.runtime import torch_threads

__all__ = ["run_demo", "DemoRow", "format_table", "exit_status", "PETERSEN_EDGES", "build_parser"]

# The Petersen graph: outer 5-cycle, spokes, inner pentagram. 3-regular; its maximum cut is 12 of 15 edges.
PETERSEN_EDGES = ([(i, (i + 1) % 5) for i in range(5)] + [(i, i + 5) for i in range(5)]
                  + [(5 + i, 5 + (i + 2) % 5) for i in range(5)])
CLASSIFIER_TARGET = 0.95         # test accuracy
PADDLE_ACCURACY = 1.0            # Paddle Quantum's "Quantum classifier" tutorial, same data set
QAOA_TARGET_RATIO = 0.95
DEFAULT_OUT = os.path.join("plots", "demo")     # *.png is git-ignored


@dataclass
class DemoRow:
    """One line of the summary: ``error = |result - reference|`` in ``unit``; ``status`` is "ok"
    (error <= target), "missed", "quick" (missed in a ``--quick`` run, whose few steps are not
    meant to reach the targets: not a failure) or "skipped" (``note`` says why). ``time_s``: the
    run's training and evaluation, figures excluded."""
    name: str
    unit: str
    result: float = math.nan
    reference: float = math.nan
    error: float = math.nan
    target: float = math.nan
    time_s: float = 0.0
    status: str = "skipped"
    note: str = ""
    plots: List[str] = field(default_factory=list)       # absolute paths of the PNGs saved
    details: dict = field(default_factory=dict)      # run-specific numbers (steps, bond length, ratio, ...)

    def judge(self, quick: bool = False) -> "DemoRow":
        self.error = abs(self.result - self.reference)
        self.status = "ok" if self.error <= self.target else ("quick" if quick else "missed")
        return self


# ------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tql demo", description="VQE (H2, LiH), QAOA MaxCut and a hybrid "
                                "classifier, each checked against an independent reference.")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder for the PNG figures (default: {DEFAULT_OUT})")
    p.add_argument("--quick", action="store_true", help="a few steps of each run (a smoke test, seconds)")
    p.add_argument("--no-plots", action="store_true", help="save no figures")
    p.add_argument("--skip-lih", action="store_true", help="leave out the 12-qubit LiH VQE")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--budget", type=float, default=110.0,
                   help="seconds for the whole demo; LiH runs only if its projected time fits (default 110)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: these states are too small to gain from more)")
    p.add_argument("--seed", type=int, default=0)
    return p


class _Context:
    def __init__(self, args):
        self.args = args
        self.start = time.perf_counter()
        self.plots = not args.no_plots and plotting.available()
        self.progress = not args.no_progress

    def path(self, name: str) -> str:
        return os.path.abspath(os.path.join(self.args.out, name))

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def _steps(ctx, quick: int, full: int) -> int:
    return quick if ctx.args.quick else full


def _fit(task, max_steps: int, ctx, description: str):
    """Train a VQETask for ``max_steps`` steps (no early stop: the curve shows where it goes below
    chemical accuracy) on a quiet CPU Trainer with a step bar; restore the best angles seen."""
    from .progress import StepProgressBar, quiet_lightning
    from .vqe import make_trainer
    callbacks = [StepProgressBar(description, metrics=("energy", "error_mha"))] if ctx.progress else []
    with quiet_lightning():
        trainer = make_trainer(max_steps, callbacks, enable_progress_bar=ctx.progress)
        trainer.fit(task)
    task.restore_best()
    return task


# ------------------------------------------------------------------------------------------------
def vqe_h2(ctx) -> DemoRow:
    from .vqe import CHEMICAL_ACCURACY_MHA, VQETask
    t0 = time.perf_counter()
    task = VQETask("H2", ansatz="uccsd", optimizer="adam", lr=0.1)
    _fit(task, _steps(ctx, 10, 80), ctx, "VQE H2")
    row = DemoRow("VQE H2 (4 qubits, UCCSD, Adam)", "Ha", result=task.final_energy(), reference=task.fci_energy,
                  target=CHEMICAL_ACCURACY_MHA / 1e3, note=f"{task.global_step} steps; reference: bundled FCI",
                  details={"steps": task.global_step})
    row.time_s = time.perf_counter() - t0
    if ctx.plots:
        curve = task.history + [row.result]
        row.plots.append(ctx.path("h2_vqe_convergence.png"))
        plotting.vqe_convergence({"UCCSD, Adam": curve}, task.fci_energy, hf_energy=task.hf_energy,
                                 title="VQE, H2 / STO-3G at 0.74 Å", path=row.plots[-1])
        row.plots.append(ctx.path("h2_uccsd_circuit.png"))
        task.circuit.draw("mpl", path=row.plots[-1], show_values=True)
    return row.judge(ctx.args.quick)


def h2_dissociation(ctx) -> DemoRow:
    from tqdm import tqdm
    import torchquantum_layers.chem as chem
    from .progress import TickCallback, quiet_lightning
    from .vqe import CHEMICAL_ACCURACY_MHA, pes_scan
    t0 = time.perf_counter()
    scan = [r for r, _, _ in chem.load_scan("H2")]
    points = [scan[0], scan[len(scan) // 2], scan[-1]] if ctx.args.quick else scan
    bar = tqdm(total=len(points), desc="H2 dissociation", unit="point", disable=not ctx.progress,
               dynamic_ncols=True, file=sys.stderr)
    with quiet_lightning(), bar:
        table = pes_scan("H2", bond_lengths=points, max_steps=_steps(ctx, 2, 10), optimizer="lbfgs",
                         stop_at_accuracy=False, callbacks=[TickCallback(bar)])
    worst = max(table, key=lambda r: abs(r["vqe"] - r["fci"]))
    row = DemoRow(f"H2 dissociation curve ({len(table)} points, worst)", "Ha", result=worst["vqe"],
                  reference=worst["fci"], target=CHEMICAL_ACCURACY_MHA / 1e3,
                  note=f"worst point R = {worst['bond_length']:.2f} Å; reference: bundled FCI scan",
                  details={"bond_length": worst["bond_length"], "table": table})
    row.time_s = time.perf_counter() - t0
    if ctx.plots:
        row.plots.append(ctx.path("h2_dissociation.png"))
        plotting.dissociation_curve(table, title="H2 / STO-3G: VQE (UCCSD) vs HF vs FCI", path=row.plots[-1])
    return row.judge(ctx.args.quick)


def qaoa_maxcut(ctx) -> DemoRow:
    from tqdm import tqdm
    from torchquantum_layers import optimization as opt
    t0 = time.perf_counter()
    problem = opt.maxcut(PETERSEN_EDGES)
    exact = opt.exact_solution(problem)                 # brute force over the 2^10 bitstrings
    p, n_starts = 3, 8
    model = opt.qaoa(problem, p)
    starts = opt.perturb(opt.linear_ramp(p), n_starts, 0.1,
                         generator=torch.Generator().manual_seed(ctx.args.seed)).float()
    steps = _steps(ctx, 10, 100)
    with tqdm(total=steps, desc="QAOA MaxCut", unit="step", disable=not ctx.progress, dynamic_ncols=True,
              file=sys.stderr) as bar:
        def tick(step, costs):
            bar.set_postfix({"best expected cut": f"{-float(costs.min()):.4f}"}, refresh=False)
            bar.update(1)
        angles, costs = opt.optimize(model, starts, steps=steps, lr=0.05, callback=tick)
    best = int(torch.argmin(costs))
    res = model.analyse(angles[best])
    cut = -float(res.expected_cost)
    ratio = float(res.approximation_ratio)
    row = DemoRow(f"QAOA MaxCut, Petersen graph (p={p}, {n_starts} starts)", "edges", result=cut,
                  reference=exact.objective, target=(1 - QAOA_TARGET_RATIO) * exact.objective,
                  note=f"expected cut; ratio {ratio:.3f}, P(optimal cut) {float(res.optimum_probability):.3f}; "
                       f"reference: brute force ({exact.n_optimal} optimal bitstrings)",
                  details={"approximation_ratio": ratio, "optimum_probability": float(res.optimum_probability),
                           "steps": steps})
    row.time_s = time.perf_counter() - t0
    if ctx.plots:
        row.plots.append(ctx.path("qaoa_maxcut_histogram.png"))
        probs = model.probabilities(angles[best]).reshape(-1)
        plotting.bitstring_histogram(probs, exact.bitstrings, top=32,
                                     title=f"QAOA p={p}, Petersen graph: max cut {exact.objective:.0f}",
                                     path=row.plots[-1])
    return row.judge(ctx.args.quick)


def classifier(ctx) -> DemoRow:
    import pytorch_lightning as pl
    from .classifier import HybridClassifier
    from .data import CirclesDataModule
    from .progress import StepProgressBar, quiet_lightning
    t0 = time.perf_counter()
    pl.seed_everything(ctx.args.seed, verbose=False)
    sizes = dict(n_train=60, n_val=20, n_test=40) if ctx.args.quick else dict(n_train=200, n_val=100, n_test=100)
    dm = CirclesDataModule(batch_size=20, seed=2, **sizes)
    model = HybridClassifier(n_features=dm.n_features, n_classes=dm.n_classes, n_qubits=4, n_layers=2,
                             encoding="angle", ansatz="hardware_efficient", lr=0.05)
    callbacks = [StepProgressBar("hybrid classifier", metrics=("val_loss", "val_acc"))] if ctx.progress else []
    with quiet_lightning():
        trainer = pl.Trainer(max_epochs=_steps(ctx, 2, 20), accelerator="cpu", devices=1, logger=False,
                             enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0,
                             enable_progress_bar=ctx.progress, callbacks=callbacks)
        trainer.fit(model, datamodule=dm)
        acc = float(trainer.test(model, datamodule=dm, verbose=False)[0]["test_acc"])
    row = DemoRow("Hybrid classifier, circles (4 qubits)", "accuracy", result=acc, reference=PADDLE_ACCURACY,
                  target=PADDLE_ACCURACY - CLASSIFIER_TARGET,
                  note=f"test accuracy on {sizes['n_test']} points after {trainer.current_epoch} epochs; "
                       f"reference: Paddle Quantum's tutorial",
                  details={"epochs": trainer.current_epoch})
    row.time_s = time.perf_counter() - t0
    if ctx.plots:
        _, _, _, _, x_test, y_test = dm.splits()
        row.plots.append(ctx.path("classifier_decision_boundary.png"))
        plotting.decision_boundary(model, x_test, y_test, title="circles, test set", path=row.plots[-1])
    return row.judge(ctx.args.quick)


def vqe_lih(ctx) -> DemoRow:
    from .vqe import CHEMICAL_ACCURACY_MHA, VQETask
    name = "VQE LiH (12 qubits, UCCSD, L-BFGS)"
    if ctx.args.skip_lih:
        return DemoRow(name, "Ha", status="skipped", note="--skip-lih")
    t0 = time.perf_counter()
    task = VQETask("LiH", ansatz="uccsd", optimizer="lbfgs")
    steps = _steps(ctx, 2, 10)
    # an L-BFGS step with its strong-Wolfe line search costs a few energy-and-gradient evaluations
    tic = time.perf_counter()
    task().backward()
    task.circuit.zero_grad()
    projected = (time.perf_counter() - tic) * 4 * steps
    left = ctx.args.budget - ctx.elapsed()
    if projected > left:
        return DemoRow(name, "Ha", status="skipped", time_s=time.perf_counter() - t0,
                       note=f"projected {projected:.0f} s for {steps} steps, {max(left, 0):.0f} s of the "
                            f"{ctx.args.budget:.0f} s budget left (--budget)")
    _fit(task, steps, ctx, "VQE LiH")
    row = DemoRow(name, "Ha", result=task.final_energy(), reference=task.fci_energy,
                  target=CHEMICAL_ACCURACY_MHA / 1e3, note=f"{task.global_step} steps; reference: bundled FCI",
                  details={"steps": task.global_step})
    row.time_s = time.perf_counter() - t0
    if ctx.plots:
        row.plots.append(ctx.path("lih_vqe_convergence.png"))
        plotting.vqe_convergence({"UCCSD, L-BFGS": task.history + [row.result]}, task.fci_energy,
                                 hf_energy=task.hf_energy, title="VQE, LiH / STO-3G (12 qubits)",
                                 path=row.plots[-1])
    return row.judge(ctx.args.quick)


# ------------------------------------------------------------------------------------------------
def _value(v: float, unit: str) -> str:
    if math.isnan(v):
        return "-"
    return f"{v:.6f}" if unit == "Ha" else f"{v:.3f}"


def _error(v: float, unit: str) -> str:
    if math.isnan(v):
        return "-"
    return f"{v:.2e}" if unit == "Ha" else f"{v:.3f}"


def format_table(rows: List[DemoRow]) -> str:
    """The summary as aligned text: one line per run, then its note, then the saved figures."""
    head = ("run", "result", "reference", "error", "target", "unit", "time", "status")
    body = [(r.name, _value(r.result, r.unit), _value(r.reference, r.unit), _error(r.error, r.unit),
             "-" if math.isnan(r.target) else "<= " + _error(r.target, r.unit), r.unit,
             f"{r.time_s:.1f} s", r.status) for r in rows]
    widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
    right = {1, 2, 3, 4, 6}

    def fmt(line):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(line, widths)))
    lines = [fmt(head), "  ".join("-" * w for w in widths)]
    for r, line in zip(rows, body):
        lines.append(fmt(line))
        if r.note:
            lines.append(" " * 4 + r.note)
    plots = [p for r in rows for p in r.plots]
    if plots:
        lines.append("\nfigures:")
        lines.extend("  " + p for p in plots)
    return "\n".join(lines)


RUNS = (vqe_h2, h2_dissociation, qaoa_maxcut, classifier, vqe_lih)


def run_demo(argv=None) -> List[DemoRow]:
    """Run the demo with command-line arguments ``argv`` (``sys.argv[1:]`` when None); print the
    summary table and return its rows."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.threads < 1:        # a usage error (exit status 2), not a traceback
        parser.error(f"argument --threads: must be >= 1, got {args.threads}")
    ctx = _Context(args)
    with torch_threads(args.threads):
        if not args.no_plots and not ctx.plots:
            print("matplotlib is not installed: no figures (pip install 'torchquantum-layers[plot]')")
        rows = [run(ctx) for run in RUNS]
    print()
    print(format_table(rows))
    total = ctx.elapsed()
    print(f"\nruns took {total:.1f} s" + ("  (--quick: a smoke run; status 'quick' = target not reached in so few "
                                      "steps, not a failure)" if args.quick else ""))
    return rows


def exit_status(rows: List[DemoRow]) -> int:
    """1 when a run missed its target (a failure of the library), else 0."""
    return int(any(r.status == "missed" for r in rows))


if __name__ == "__main__":
    from torchquantum_layers.runtime import keep_freed_memory
    keep_freed_memory()         # this process is ours: reuse freed state-sized blocks
    sys.exit(exit_status(run_demo()))
