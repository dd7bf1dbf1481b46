"""Timing helpers shared by the benchmarks: medians, ratios to a clone, machine description."""
from __future__ import annotations

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
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(str(r[i]).ljust(w) for i, w in enumerate(widths)) + " |" for r in rows]
    return "\n".join([line, sep, *body])
