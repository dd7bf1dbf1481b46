"""Creating and checking batched state vectors of shape ``(batch, 2**n)``.

Wire 0 is the most significant bit of the basis index.
"""
from __future__ import annotations

import math

import torch

DEFAULT_DTYPE = torch.complex64
COMPLEX_DTYPES = (torch.complex64, torch.complex128)
REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}
COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128,
              torch.float16: torch.complex64, torch.bfloat16: torch.complex64}


def resolve_dtype(dtype) -> torch.dtype:
    if dtype is None:
        return DEFAULT_DTYPE
    if dtype in COMPLEX_DTYPES:
        return dtype
    if dtype in (torch.float32, torch.float64):
        return COMPLEX_OF[dtype]
    raise TypeError(f"state dtype must be torch.complex64 or torch.complex128, got {dtype}")


def n_wires_of(state: torch.Tensor) -> int:
    """Number of qubits of a ``(B, 2**n)`` state; raises a clear error otherwise."""
    if not isinstance(state, torch.Tensor):
        raise TypeError(f"state must be a torch.Tensor, got {type(state).__name__}")
    if state.dim() != 2:
        raise ValueError(f"state must have shape (batch, 2**n), got shape {tuple(state.shape)}")
    size = state.shape[1]
    n = size.bit_length() - 1
    if size < 1 or (1 << n) != size:
        raise ValueError(f"state length {size} is not a power of two (shape {tuple(state.shape)})")
    if state.dtype not in COMPLEX_DTYPES:
        raise TypeError(f"state dtype must be complex64 or complex128, got {state.dtype}")
    return n


_CHECK_ABOVE_BYTES = 64 * 2 ** 20


def check_allocation(n_wires: int, batch: int, dtype: torch.dtype, device) -> None:
    """Refuse, before allocating, a state that cannot fit in the device's memory."""
    if n_wires < 0 or batch < 1:
        raise ValueError(f"need n_wires >= 0 and batch >= 1, got n_wires={n_wires}, batch={batch}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    needed = batch * (2 ** n_wires) * itemsize
    if needed < _CHECK_ABOVE_BYTES:
        return       # small states: skip the (system-call) memory query on every circuit call
    device = torch.device(device) if device is not None else torch.device("cpu")
    available = _available_bytes(device)
    if available is not None and needed > available:
        raise MemoryError(
            f"a state of {n_wires} qubits, batch {batch}, {dtype} needs {needed:,} bytes "
            f"but the {device.type} device has about {available:,} bytes available")


def _available_bytes(device: torch.device):
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
    return None


def zero_state(n_wires: int, batch: int = 1, dtype=None, device=None) -> torch.Tensor:
    """|0…0⟩ repeated ``batch`` times."""
    return basis_state([0] * n_wires, batch=batch, dtype=dtype, device=device)


def basis_state(bits, batch: int = 1, dtype=None, device=None) -> torch.Tensor:
    """|b0 b1 … b_{n-1}⟩ from a bit sequence (or a bit string like ``"0110"``); wire 0 first."""
    if isinstance(bits, str):
        if any(ch not in "01" for ch in bits):
            raise ValueError(f"basis_state: bit string must contain only 0 and 1, got {bits!r}")
        bits = [int(ch) for ch in bits]
    bits = [int(b) for b in bits]
    if any(b not in (0, 1) for b in bits):
        raise ValueError(f"basis_state: bits must be 0 or 1, got {bits}")
    dtype = resolve_dtype(dtype)
    n = len(bits)
    check_allocation(n, batch, dtype, device)
    index = 0
    for b in bits:
        index = (index << 1) | b
    state = torch.zeros(batch, 2 ** n, dtype=dtype, device=device)
    state[:, index] = 1
    return state


def random_state(n_wires: int, batch: int = 1, generator: torch.Generator | None = None,
                 dtype=None, device=None) -> torch.Tensor:
    """Haar-random pure states (normalised complex Gaussian vectors)."""
    dtype = resolve_dtype(dtype)
    check_allocation(n_wires, batch, dtype, device)
    real = REAL_OF[dtype]
    gen_device = generator.device if generator is not None else device
    parts = torch.randn(2, batch, 2 ** n_wires, dtype=real, generator=generator, device=gen_device)
    state = torch.complex(parts[0], parts[1]).to(device=device)
    return state / torch.linalg.vector_norm(state, dim=1, keepdim=True)


def num_qubits_for(size: int) -> int:
    n = int(round(math.log2(size)))
    if 2 ** n != size:
        raise ValueError(f"size {size} is not a power of two")
    return n


def reverse_wire_order(state: torch.Tensor) -> torch.Tensor:
    """Convert between our order (wire 0 = most significant bit) and Qiskit's little-endian one.

    The map reverses the bit order of every basis index, so it is its own inverse: use it both
    ways (``to_qiskit = from_qiskit = reverse_wire_order``). Works on (B, 2**n) states.
    """
    n = n_wires_of(state)
    B = state.shape[0]
    if n < 2:
        return state.clone()
    return state.reshape(B, *([2] * n)).permute(0, *range(n, 0, -1)).reshape(B, -1)


to_qiskit_order = reverse_wire_order
from_qiskit_order = reverse_wire_order
