"""tql.runtime.keep_freed_memory: applied on glibc, refused values named, results unchanged."""
import platform
import subprocess
import sys

import pytest

import numpy as np
import torch

import torchquantum_layers as tql

from torchquantum_layers.runtime import keep_freed_memory, max_threads, torch_threads

SCRIPT = """
import torch, torchquantum_layers as tql
from torchquantum_layers.runtime import keep_freed_memory
applied = keep_freed_memory()
torch.manual_seed(0)
c = tql.templates.hardware_efficient(tql.Circuit(3), n_layers=2).double()
print(applied, float(tql.expval(c, tql.PauliString("Z0 Z2"))[0]))
"""


def _run(code):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_applied_on_glibc_and_results_unchanged():
    applied, value = _run(SCRIPT)
    # the reference in this process, where nothing changed the allocator (one interpreter start less)
    torch.manual_seed(0)
    c = tql.templates.hardware_efficient(tql.Circuit(3), n_layers=2).double()
    reference = str(float(tql.expval(c, tql.PauliString("Z0 Z2"))[0].detach()))
    assert applied == str(platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    assert value == reference


@pytest.mark.parametrize("bad", [0, -1, 2 ** 40, 1.5, True])
def test_bad_limits_are_named(bad):
    with pytest.raises(ValueError, match="limit_bytes"):
        keep_freed_memory(bad)


def test_torch_threads_sets_and_restores():
    old = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == old
    with torch_threads(np.int64(1)):
        assert torch.get_num_threads() == 1
    with torch_threads(None):
        assert torch.get_num_threads() == old
    with pytest.raises(RuntimeError, match="inside"):
        with torch_threads(1):
            raise RuntimeError("inside")
    assert torch.get_num_threads() == old


@pytest.mark.parametrize("bad,error", [(0, ValueError), (-1, ValueError), (10 ** 6, ValueError),
                                       (1.5, TypeError), ("2", TypeError), (True, TypeError)])
def test_torch_threads_bad_counts_are_named(bad, error):
    """Before: torch's RuntimeError for most, and 10**6 threads accepted (the process segfaulted)."""
    old = torch.get_num_threads()
    with pytest.raises(error, match="torch_threads: n must"):
        with torch_threads(bad):
            pass
    assert torch.get_num_threads() == old
    assert max_threads() >= 4
