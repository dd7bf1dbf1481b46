"""tql.runtime.keep_freed_memory: applied on glibc, refused values named, results unchanged."""
import platform
import subprocess
import sys

import pytest

from torchquantum_layers.runtime import keep_freed_memory

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
    _, reference = _run(SCRIPT.replace("applied = keep_freed_memory()", "applied = None"))
    assert applied == str(platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
    assert value == reference


@pytest.mark.parametrize("bad", [0, -1, 2 ** 40, 1.5, True])
def test_bad_limits_are_named(bad):
    with pytest.raises(ValueError, match="limit_bytes"):
        keep_freed_memory(bad)
