"""Working memory and threads of the in-place QAOA sweeps: a buffer pool (no page faults per
step), leases that return a buffer when its graph is freed, and a thread-count guard."""
from __future__ import annotations

import torch


# Buffers of at least this many amplitudes are kept between calls (no page faults per step).
_POOL_MIN = 2 ** 16
# Registers (batch × amplitudes) below this size run their adjoint sweeps on one thread: their ops
# are too small to gain from threads, and each OpenMP barrier costs a scheduler time slice (~15 ms)
# when the cores are oversubscribed (measured: 1 s vs 18 ms per step for a 9-qubit TSP, 8 starts).
SINGLE_THREAD_BELOW = 2 ** 18

class _threads:
    """Temporarily run torch on ``n`` threads (no-op when n is None or already the setting)."""

    def __init__(self, n):
        self.n, self.old = n, None

    def __enter__(self):
        if self.n is not None and torch.get_num_threads() != self.n:
            self.old = torch.get_num_threads()
            torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        if self.old is not None:
            torch.set_num_threads(self.old)
        return False


class _Pool:
    """Reusable big buffers (allocating 100s of MB per step costs page faults on every call)."""

    def __init__(self, limit: int = 8):
        self.free: dict = {}
        self.limit = limit

    def take(self, shape, dtype, device) -> torch.Tensor:
        key = (tuple(shape), dtype, torch.device(device))
        lst = self.free.get(key)
        if lst:
            return lst.pop()
        return torch.empty(shape, dtype=dtype, device=device)

    def give(self, *tensors):
        for t in tensors:
            if t is None or t.numel() < _POOL_MIN:
                continue
            key = (tuple(t.shape), t.dtype, t.device)
            lst = self.free.setdefault(key, [])
            if len(lst) < self.limit and all(x.data_ptr() != t.data_ptr() for x in lst):
                lst.append(t)

    def clear(self):
        self.free.clear()




class _Lease:
    """Returns a pool buffer when the autograd graph holding it is freed."""

    def __init__(self, pool: _Pool, tensor: torch.Tensor):
        self.pool, self.tensor = pool, tensor

    def __del__(self):
        try:
            self.pool.give(self.tensor)
        except Exception:       # interpreter shutdown
            pass
