"""Shared fixtures: every test runs over both dtypes and every device present."""
import os

import pytest
import torch

if not torch.cuda.is_available():
    # Triton's interpreter runs the CUDA kernels (kernels/gpu.py) on CPU tensors; it must be on
    # before anything imports triton (pytorch-lightning does), or triton.language's own jit
    # functions are built for a GPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

DTYPES = [torch.complex64, torch.complex128]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# absolute tolerance for amplitudes / expectations per complex dtype
ATOL = {torch.complex64: 2e-5, torch.complex128: 1e-10}
REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}


@pytest.fixture(params=DTYPES, ids=["c64", "c128"])
def dtype(request):
    return request.param


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture
def atol(dtype):
    return ATOL[dtype]


@pytest.fixture(scope="module", params=["programs", "tiles", "blocks"])
def engine_mode(request):
    """Run a module's tests through both CPU engines: local programs (the default where the
    native library is built), the same as passes of tiled programs (as registers beyond 14
    qubits run: here a tile of 16 complex64 amplitudes, so 5-8 qubit circuits take several
    passes) and the fused-block engine (GPU, TQL_NATIVE=0)."""
    from torchquantum_layers import engine
    from torchquantum_layers.kernels import native, program
    if request.param != "blocks" and native.library() is None:
        pytest.fail(f"the native library is needed for the programs engine: {native.status()}")
    old, old_row = engine.USE_PROGRAMS, program.MAX_ROW_BYTES
    engine.USE_PROGRAMS = request.param != "blocks"
    if request.param == "tiles":
        program.MAX_ROW_BYTES = 128
    yield request.param
    engine.USE_PROGRAMS, program.MAX_ROW_BYTES = old, old_row


@pytest.fixture(scope="module")
def blocks_engine():
    """The fused-block engine only (for tests of its layouts and schedules)."""
    from torchquantum_layers import engine
    old = engine.USE_PROGRAMS
    engine.USE_PROGRAMS = False
    yield
    engine.USE_PROGRAMS = old
