"""Process-level settings that make CPU simulation faster; opt-in, because they are process-wide.

Large states meet glibc's malloc at its worst: every allocation above its mmap threshold (at most
32 MiB by default) is a fresh ``mmap`` whose pages the kernel faults in and zeroes, and every free
gives them back. One training step of a 14-qubit QuantumLayer at batch 256 (32 MiB states) spent
two thirds of its time there (benchmarks/RESULTS.md: 3.2–5.0 s per step, 1.7–1.9 s with
:func:`keep_freed_memory`).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import platform

import torch

__all__ = ["keep_freed_memory", "torch_threads", "max_threads"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2 ** 31 - 1


def keep_freed_memory(limit_bytes: int = 2 ** 30) -> bool:
    """Let glibc keep and reuse freed blocks up to ``limit_bytes`` instead of unmapping them.

    The process's resident memory then stays near its peak (as with PyTorch's CUDA caching
    allocator) in exchange for no page-fault storm per state-sized tensor. Returns True when
    applied; False where the C library is not glibc (nothing is changed there).
    """
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or not 0 < limit_bytes <= _INT_MAX:
        raise ValueError(f"keep_freed_memory: limit_bytes must be an int in 1..{_INT_MAX}, got {limit_bytes!r}")
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    path = ctypes.util.find_library("c")
    if path is None:
        return False
    libc = ctypes.CDLL(path)
    ok = libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(limit_bytes))
    ok &= libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(_INT_MAX))
    return bool(ok)


@contextlib.contextmanager
def torch_threads(n):
    """Run with ``n`` intra-op threads (``None``: leave torch's setting), then restore it.

    States of a few qubits are far too small for intra-op parallelism; one thread avoids the
    spinning worker threads that make a busy machine many times slower. ``n`` is an int in
    1..:func:`max_threads` (4 per CPU: beyond that a thread pool only thrashes, and torch's
    OpenMP pool crashes the process at exit for absurd counts).
    """
    if n is None:
        yield
        return
    limit = max_threads()
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"torch_threads: n must be an int or None, got {n!r}")
    n = int(n.__index__())
    if not 1 <= n <= limit:
        raise ValueError(f"torch_threads: n must be in 1..{limit} (4 per CPU), got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def max_threads() -> int:
    """The largest thread count :func:`torch_threads` accepts: 4 per CPU of the machine."""
    return 4 * (os.cpu_count() or 1)
