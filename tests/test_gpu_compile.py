"""Triton's real compiler on every kernel specialisation the engine launches, for the H100/H200
architecture (sm_90), on this GPU-less machine (kernels/gpu_compile.py): the interpreter checks
what the kernels compute (tests/test_gpu_kernels.py), this checks that they compile to a cubin
and keep the properties the bandwidth target rests on."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="Triton ships for Linux x86_64 only (the test extra installs it there)")

_SCRIPT = """
import json
from torchquantum_layers.kernels import gpu_compile
print(json.dumps([dict(label=label, shared=c.shared_bytes, registers=c.registers, spills=c.spill_bytes,
                       loads=c.global_loads, stores=c.global_stores)
                  for label, c in gpu_compile.compile_all(90, sass=False)]))
"""


@pytest.fixture(scope="module")
def compiled():
    # the kernels compile only where the interpreter is off (conftest.py turns it on here)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert done.returncode == 0, done.stderr[-4000:]
    return {row["label"]: row for row in json.loads(done.stdout.strip().splitlines()[-1])}


def test_every_launch_compiles_without_spilling_registers(compiled):
    from torchquantum_layers.kernels import gpu_compile
    assert set(compiled) == set(gpu_compile.labels())
    spilling = {label: row["spills"] for label, row in compiled.items() if row["spills"]}
    assert not spilling, f"register spills (bytes) on sm_90: {spilling}"
    assert all(row["registers"] <= 255 for row in compiled.values())


@pytest.mark.parametrize("label", ["1-qubit gate", "1-qubit gate, last wire", "controlled RY (CRY)",
                                   "2-qubit dense (RXX)", "CNOT (permutation)", "RZZ (diagonal)",
                                   "1-qubit gate, 2^33 amplitudes"])
def test_streaming_kernels_move_whole_amplitudes_without_shared_memory(compiled, label):
    """Each thread loads and stores whole complex64 amplitudes (64-bit accesses, coalesced over a
    warp) and no layout change goes through shared memory: one read and one write of the state."""
    row = compiled[label]
    assert row["shared"] == 0, row
    assert set(row["loads"]) >= {"64"} and min(int(b) for b in row["loads"]) >= 64, row
    assert set(row["stores"]) == {"64"}, row


def test_recorder_rejects_the_interpreter(monkeypatch):
    from torchquantum_layers.kernels import gpu, gpu_compile
    monkeypatch.setattr(gpu, "INTERPRETED", True)       # as conftest.py runs the suite without a GPU
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        with gpu_compile.recorded_launches():
            pass
