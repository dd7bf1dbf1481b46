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
