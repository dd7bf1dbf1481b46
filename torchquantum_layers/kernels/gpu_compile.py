"""Compile the Triton kernels of :mod:`gpu` for a CUDA architecture on a machine with no GPU.

The interpreter (``TRITON_INTERPRET=1``) checks what the kernels compute, not that Triton's
compiler accepts them, nor what it makes of them. This module runs the real compiler down to a
cubin for a chosen architecture, specialised as a launch on a device would be: the public
functions of :mod:`gpu` are called on CPU tensors with each kernel's launch replaced by a
recorder, and each recorded launch is compiled by Triton's own argument binder. What the
compiler produced (shared memory, registers, spills, widths of the global loads and stores, SASS
instructions per amplitude) is what ``benchmarks/gpu_codegen.py`` prints and the tests check.

Run it in a process where ``TRITON_INTERPRET`` is unset: under the interpreter the kernels are
not compilable objects. It leans on Triton internals (the binder, ``_pack_args``) that are not a
public API; a Triton release that moves them fails here loudly, not silently.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
import tempfile
from typing import Optional

from . import gpu

KERNELS = ("_levels_kernel", "_permute_kernel", "_diagonal_kernel", "_gram_kernel", "_span_gather_kernel")


@dataclasses.dataclass
class Launch:
    kernel: object
    args: tuple
    kwargs: dict


@contextlib.contextmanager
def recorded_launches():
    """Within the block, :mod:`gpu`'s functions take CPU tensors and record their launches (in the
    yielded list) instead of running them."""
    if gpu.triton is None or gpu.INTERPRETED:
        raise RuntimeError("compiling the kernels needs triton installed and TRITON_INTERPRET unset")
    launches = []
    saved = {name: getattr(gpu, name) for name in KERNELS}
    saved_interpreted = gpu.INTERPRETED

    class Recorder:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append(Launch(self.kernel, args, kwargs))

    try:
        gpu.INTERPRETED = True      # let usable() take CPU tensors: nothing runs on them
        for name, kernel in saved.items():
            setattr(gpu, name, Recorder(kernel))
        yield launches
    finally:
        gpu.INTERPRETED = saved_interpreted
        for name, kernel in saved.items():
            setattr(gpu, name, kernel)


@dataclasses.dataclass
class Compiled:
    name: str
    constexprs: dict
    shared_bytes: int
    registers: int
    spill_bytes: int
    global_loads: dict      # width in bits -> count of ld.global instructions in the PTX
    global_stores: dict
    instructions: Optional[int]   # SASS instructions per thread (straight-line kernels); None: not disassembled
    amplitudes_per_thread: int
    ptx: str


_WIDTH = {"": 1, ".v2": 2, ".v4": 4, ".v8": 8}
_BITS = {"b32": 32, "f32": 32, "u32": 32, "s32": 32, "b64": 64, "f64": 64, "u64": 64, "s64": 64,
         "b16": 16, "b8": 8, "u8": 8, "s8": 8}


def _access_widths(ptx: str, op: str) -> dict:
    """``{bits per instruction: count}`` of ``op`` (ld.global / st.global) in the PTX."""
    counts = {}
    for vec, kind in re.findall(rf"{op}(?:\.[a-z_]+)*?(\.v\d)?\.([bfus]\d+)\s", ptx):
        bits = _WIDTH[vec] * _BITS[kind]
        counts[bits] = counts.get(bits, 0) + 1
    return dict(sorted(counts.items()))


def _sass_instructions(cubin: bytes, arch: int, tmp: str) -> int:
    """SASS instructions in the cubin (cuobjdump's disassembly: about a second per kernel)."""
    from triton.backends.nvidia.compiler import get_ptxas
    path = os.path.join(tmp, "compiled.cubin")
    with open(path, "wb") as f:
        f.write(cubin)
    cuobjdump = os.path.join(os.path.dirname(get_ptxas(arch).path), "cuobjdump")
    sass = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in sass.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+\S", line))


def compile_launch(launch: Launch, arch: int = 90, sass: bool = True) -> Compiled:
    """The launch compiled for ``sm_<arch>`` (all stages, down to the cubin), as a device would;
    ``sass=False`` skips the disassembly (``instructions`` None: it is most of the time taken)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    kernel = launch.kernel
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*launch.args, **launch.kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, launch.kwargs, bound, specialization, options)
    compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=target,
                              options=options.__dict__)
    ptx = compiled.asm["ptx"]
    sm = re.search(r"\.target\s+(sm_\w+)", ptx).group(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        info = subprocess.run([get_ptxas(arch).path, f"-arch={sm}", "-v", "-o", os.path.join(tmp, "kernel.cubin"),
                               path], capture_output=True, text=True, check=True).stderr
        instructions = _sass_instructions(compiled.asm["cubin"], arch, tmp) if sass else None
    registers = int(re.search(r"Used (\d+) registers", info).group(1))
    spills = sum(int(v) for v in re.findall(r"(\d+) bytes spill (?:stores|loads)", info))
    names = kernel.arg_names
    consts = {names[p[0]]: v for p, v in constexprs.items()}
    # amplitudes of the output one program writes: a group of 2^K per index, else one
    per_index = 2 ** consts["K"] if kernel.__name__ in ("_levels_kernel", "_permute_kernel", "_gram_kernel") else 1
    threads = 32 * compiled.metadata.num_warps
    return Compiled(kernel.__name__, consts, int(compiled.metadata.shared), registers, spills,
                    _access_widths(ptx, "ld.global"), _access_widths(ptx, "st.global"), instructions,
                    max(1, consts["BLOCK"] * per_index // threads), ptx)


def representative_calls():
    """(label, thunk) pairs: one call of each public kernel function per specialisation the
    engine makes (dense, controlled, two-level, per-sample matrices in both modes, generators,
    permutations, diagonals, span gathers, grams) on CPU tensors."""
    import torch

    def state(n, batch=1, dtype=torch.complex64):
        return torch.zeros(batch, 2 ** n, dtype=dtype)

    def mat(m, batch=None, dtype=torch.complex64):
        return torch.zeros((m, m) if batch is None else (batch, m, m), dtype=dtype)

    n, c128 = 20, torch.complex128
    return [
        ("1-qubit gate", lambda: gpu.apply_levels(state(n), mat(2), (7,), n)),
        ("1-qubit gate, last wire", lambda: gpu.apply_levels(state(n), mat(2), (n - 1,), n)),
        ("1-qubit gate, complex128",
         lambda: gpu.apply_levels(state(n, dtype=c128), mat(2, dtype=c128), (7,), n)),
        ("2-qubit dense (RXX)", lambda: gpu.apply_levels(state(n), mat(4), (0, n - 1), n)),
        ("controlled RY (CRY)", lambda: gpu.apply_levels(state(n), mat(2), (5,), n, controls=(2,))),
        ("Givens, 2 of 16 levels (DoubleExcitation)",
         lambda: gpu.apply_levels(state(n), mat(2), (0, 1, 2, 3), n, levels=(3, 12))),
        ("3-qubit dense", lambda: gpu.apply_levels(state(n), mat(8), (2, 6, 13), n)),
        ("4-qubit dense (a fused block)", lambda: gpu.apply_levels(state(n), mat(16), (0, 3, 4, 19), n)),
        ("5-qubit dense", lambda: gpu.apply_levels(state(n), mat(32), (0, 4, 8, 12, 16), n)),
        ("1-qubit, one matrix per sample", lambda: gpu.apply_levels(state(n, 4), mat(2, 4), (3,), n)),
        ("1-qubit, per sample, small n", lambda: gpu.apply_levels(state(6, 64), mat(2, 64), (3,), 6)),
        ("1-qubit, per sample, one input state", lambda: gpu.apply_levels(state(n), mat(2, 4), (3,), n)),
        ("generator (keep_rest=False)",
         lambda: gpu.apply_levels(state(n), mat(2), (1, 2), n, levels=(1, 2), keep_rest=False)),
        ("CNOT, complex128", lambda: gpu.permute_local(state(n, dtype=c128), (0, 1, 3, 2), (4, 9), n)),
        ("RZZ, complex128",
         lambda: gpu.apply_diagonal(state(n, dtype=c128), torch.ones(4, dtype=c128), (2, 11), n)),
        ("4-qubit dense, complex128",
         lambda: gpu.apply_levels(state(n, dtype=c128), mat(16, dtype=c128), (0, 3, 4, 19), n)),
        ("CNOT (permutation)", lambda: gpu.permute_local(state(n), (0, 1, 3, 2), (4, 9), n)),
        ("Toffoli (permutation)", lambda: gpu.permute_local(state(n), (0, 1, 2, 3, 4, 5, 7, 6), (0, 1, 2), n)),
        ("RZZ (diagonal)", lambda: gpu.apply_diagonal(state(n), torch.ones(4, dtype=torch.complex64), (2, 11), n)),
        ("diagonal per sample",
         lambda: gpu.apply_diagonal(state(n, 4), torch.ones(4, 2, dtype=torch.complex64), (5,), n)),
        ("span gather (fused permutations)",
         lambda: gpu.gather_span(state(n), torch.arange(16, dtype=torch.int64), 3, 6, n)),
        ("gram, shared matrix", lambda: gpu.gram_levels(state(n), state(n), (3,), n)),
        ("gram, 4 wires", lambda: gpu.gram_levels(state(n), state(n), (0, 3, 4, 19), n)),
        ("gram, 5 wires", lambda: gpu.gram_levels(state(n), state(n), (0, 4, 8, 12, 16), n)),
        ("5-qubit permutation", lambda: gpu.permute_local(state(n), tuple(reversed(range(32))), (0, 4, 8, 12, 16), n)),
        ("gram, diagonal (RZZ)", lambda: gpu.gram_levels(state(n), state(n), (2, 11), n, diagonal_only=True)),
        ("gram, per sample", lambda: gpu.gram_levels(state(n, 4), state(n, 4), (3, 9), n, per_sample=True)),
    ]


# Registers past 2^31 amplitudes (an H200 holds 2^33 complex64): the same launches with the
# integer arguments such a state gives, so the 64-bit index arithmetic compiles too
WIDE = [("1-qubit gate, 2^33 amplitudes", "1-qubit gate", {"groups": 2 ** 32, "rest_bits": 32}),
        ("RZZ (diagonal), 2^33 amplitudes", "RZZ (diagonal)", {"total": 2 ** 33, "n": 33}),
        ("CNOT (permutation), 2^33 amplitudes", "CNOT (permutation)", {"groups": 2 ** 31})]


def labels():
    return [label for label, _ in representative_calls()] + [label for label, _, _ in WIDE]


def compile_all(arch: int = 90, sass: bool = True):
    """[(label, Compiled)] for every representative call, then the WIDE ones (``sass``: as in
    :func:`compile_launch`)."""
    recorded = {}
    for label, call in representative_calls():
        with recorded_launches() as launches:
            call()
        if len(launches) != 1:
            raise RuntimeError(f"{label}: expected one kernel launch, recorded {len(launches)}")
        recorded[label] = launches[0]
    for label, base, wide in WIDE:
        launch = recorded[base]
        args = list(launch.args)
        for name, value in wide.items():
            args[launch.kernel.arg_names.index(name)] = value
        recorded[label] = Launch(launch.kernel, tuple(args), launch.kwargs)
    return [(label, compile_launch(launch, arch, sass)) for label, launch in recorded.items()]
