"""The cost of a DP-SGD step of HybridClassifier against a plain step, and against DP-SGD without
torch.func.

For each batch size (default 32) and register size (default: the classifier's default model, 4
qubits, 2 hardware-efficient layers, angle encoding, a linear head), on random circle-like data:

* plain: forward, batch-mean cross-entropy, ``backward()``, ``Adam.step()`` (what automatic
  optimization runs per batch, without Lightning's own bookkeeping);
* DP-SGD: what ``HybridClassifier(dp_clip=1, dp_noise=1)`` runs per batch — per-sample gradients
  of every trainable parameter by ``vmap(grad)`` over ``functional_call`` (the task's
  ``per_sample_gradients``), ``tql.qml.privacy.clip_and_noise``, ``Adam.step()``;
* DP-SGD, loop: the same update with the per-sample gradients from one ``backward()`` per sample
  (what DP-SGD costs without torch.func);
* in a Trainer: seconds per training step of ``pl.Trainer.fit`` over 10 batches × 5 epochs, with
  and without DP (Lightning's bookkeeping and the logging included, no validation).

The DP / plain ratio is the median over rounds of back-to-back timings (robust to the load of a
shared machine drifting). The accountant (ε) is computed once per fit, not per step, and is not
timed. Run: ``python benchmarks/classifier_dp.py [--batch 32] [--qubits 4] [--threads 1]``.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import torch
import torch.nn.functional as F

from common import add_runtime_flags, keep_memory_if_asked, machine, paired, rows_table, set_threads, today

from lightning_tasks.classifier import HybridClassifier
from torchquantum_layers.qml.privacy import clip_and_noise


def case(n_qubits, layers, batch, rounds):
    torch.manual_seed(0)
    model = HybridClassifier(2, 2, n_qubits=n_qubits, n_layers=layers, dp_clip=1.0, dp_noise=1.0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.rand(batch, 2) * 2 - 1
    y = (x.norm(dim=1) > 0.7).long()
    gen = torch.Generator().manual_seed(1)
    names = [k for k, p in model.named_parameters() if p.requires_grad]

    def plain():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    def apply(update):
        opt.zero_grad()
        for k, p in model.named_parameters():
            p.grad = update[k]
        opt.step()

    def private():
        grads = model.per_sample_gradients(x, y)
        apply(clip_and_noise(grads, 1.0, 1.0, batch, gen)[0])

    def private_loop():
        rows = {k: [] for k in names}
        for b in range(batch):
            model.zero_grad()
            F.cross_entropy(model(x[b:b + 1]), y[b:b + 1]).backward()
            for k, p in model.named_parameters():
                rows[k].append(p.grad.clone())
        apply(clip_and_noise({k: torch.stack(v) for k, v in rows.items()}, 1.0, 1.0, batch, gen)[0])

    ratio, t_dp, t_plain = paired(private, None, rounds, yardstick=plain)
    ratio_loop, t_loop, _ = paired(private_loop, None, rounds, yardstick=plain)
    P = sum(p.numel() for p in model.parameters())
    fit_plain, fit_dp = trainer_step_times(n_qubits, layers, batch, x, y, max(1, rounds // 2))
    return {"qubits": n_qubits, "layers": layers, "batch": batch, "params": P,
            "plain step ms": f"{t_plain * 1e3:.2f}", "DP-SGD step ms": f"{t_dp * 1e3:.2f}",
            "DP / plain": f"{ratio:.1f}x", "DP-SGD loop ms": f"{t_loop * 1e3:.1f}",
            "loop / plain": f"{ratio_loop:.1f}x", "Trainer plain ms/step": f"{fit_plain * 1e3:.1f}",
            "Trainer DP ms/step": f"{fit_dp * 1e3:.1f}"}


def trainer_step_times(n_qubits, layers, batch, x, y, rounds):
    """Median seconds per step of Trainer.fit, (plain, DP), alternating the two each round."""
    import pytorch_lightning as pl
    from torch.utils.data import DataLoader, TensorDataset
    for name in ("pytorch_lightning", "lightning_fabric", "lightning.pytorch"):
        logging.getLogger(name).setLevel(logging.ERROR)
    data = TensorDataset(x.repeat(10, 1), y.repeat(10))
    out = {False: [], True: []}
    for _ in range(rounds):
        for dp in (False, True):
            model = HybridClassifier(2, 2, n_qubits=n_qubits, n_layers=layers,
                                     **({"dp_clip": 1.0, "dp_noise": 1.0} if dp else {}))
            trainer = pl.Trainer(max_epochs=5, accelerator="cpu", logger=False, enable_checkpointing=False,
                                 enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
            loader = DataLoader(data, batch_size=batch, shuffle=True, generator=torch.Generator().manual_seed(0))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                trainer.fit(model, train_dataloaders=loader)
                out[dp].append((time.perf_counter() - start) / trainer.global_step)
    return statistics.median(out[False]), statistics.median(out[True])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[32])
    ap.add_argument("--qubits", type=int, nargs="+", default=[4])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    add_runtime_flags(ap)
    args = ap.parse_args(argv)
    set_threads(args)
    keep_memory_if_asked(args)
    rows = [case(n, args.layers, b, args.rounds) for n in args.qubits for b in args.batch]
    print(f"### HybridClassifier: DP-SGD step vs plain step, {today()}, {machine()}\n")
    print(rows_table(rows))


if __name__ == "__main__":
    main()
