"""Shared fixtures: every test runs over both dtypes and every device present."""
import pytest
import torch

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


@pytest.fixture(scope="module", params=["programs", "blocks"])
def engine_mode(request):
    """Run a module's tests through both CPU engines: local programs (the default where the
    native library is built) and the fused-block engine (GPU, large registers, TQL_NATIVE=0)."""
    from torchquantum_layers import engine
    from torchquantum_layers.kernels import native
    if request.param == "programs" and native.library() is None:
        pytest.fail(f"the native library is needed for the programs engine: {native.status()}")
    old = engine.USE_PROGRAMS
    engine.USE_PROGRAMS = request.param == "programs"
    yield request.param
    engine.USE_PROGRAMS = old


@pytest.fixture(scope="module")
def blocks_engine():
    """The fused-block engine only (for tests of its layouts and schedules)."""
    from torchquantum_layers import engine
    old = engine.USE_PROGRAMS
    engine.USE_PROGRAMS = False
    yield
    engine.USE_PROGRAMS = old
