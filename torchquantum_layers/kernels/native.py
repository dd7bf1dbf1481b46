"""Optional one-pass CPU kernels (native.c), compiled on first use with the system C compiler.

torch has no call that applies a 2 × 2 matrix to one wire, or permutes amplitudes, in one pass
at memory speed (measured: 2.2–3.6 clone-times for a 1-qubit gate at n = 24; see
benchmarks/RESULTS.md). native.c does both in plain C with OpenMP; no torch headers, so it
compiles in well under a second. It is used only where it applies — CPU, complex64/complex128,
contiguous states, and no autograd graph to record (inference, the adjoint method's sweeps,
parameter-shift) — and the torch kernels stay the fallback and the test reference. The same
library carries the local-program kernels (program.c, driven by kernels/program.py, which do
record gradients through their own autograd.Function) and the diagonal-observable kernels;
levels.c applies a matrix to some or all local levels of any wires (dense gates on scattered
wires, Givens rotations, controlled multi-wire gates) in one pass; simd.h is the vector macro
layer the C files share.

``TQL_NATIVE=0`` turns it off; ``TQL_CACHE_DIR`` sets where the library is built (default
``~/.cache/torchquantum_layers``). :func:`status` says whether it is in use, and why not.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading

import torch

from ..caching import lasting
from .transforms import transforms_active

_HERE = os.path.dirname(__file__)
_SOURCES = [os.path.join(_HERE, name) for name in ("native.c", "program.c", "levels.c")]
_HEADERS = [os.path.join(_HERE, "simd.h")]
_FLAGS = ["-O3", "-march=native", "-fopenmp", "-fPIC", "-shared"]
_lock = threading.Lock()
_state: dict = {"lib": None, "tried": False, "reason": "not loaded yet"}
# Dense, controlled and permutation gates take the native kernels at every size: their call
# (15-35 us, checks and ctypes included) beat torch's at 2^2-2^11 amplitudes (RY 45-120 us: widening
# GEMMs; CRX 80-240 us: a copy, a gather and a scatter). A diagonal below this many amplitudes
# stays a torch broadcast multiply (27-31 vs 33-53 us at 2^6-2^8: the lane table's gather).
MIN_DIAGONAL_AMPLITUDES = 2 ** 10
# Dense gates on up to this many scattered wires take levels.c's kernel (beyond, torch's GEMM on
# the moved axes: 2^k multiply-adds per amplitude are compute-bound either way)
LEVELS_MAX_DENSE_WIRES = 6


def _cpu_key() -> str:
    """The CPU's feature flags: a library built with -march=native must not run elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        flags = ""
    return platform.machine() + flags


def _compile(cc: str, flags: list, tmp: str, objects_dir: str) -> str:
    """Compile every source at once (one compiler process each: the first build takes the time
    of the largest file, not of all three), then link into ``tmp``; '' or the compiler's error."""
    compile_flags = [f for f in flags if f != "-shared"]
    objects = [os.path.join(objects_dir, os.path.basename(src) + ".o") for src in _SOURCES]
    procs = [subprocess.Popen([cc, *compile_flags, "-c", src, "-o", obj], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for src, obj in zip(_SOURCES, objects)]
    failed = []
    for proc in procs:
        try:
            stderr = proc.communicate(timeout=120)[1]
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        if proc.returncode:
            failed.append(stderr or f"{cc} exited with {proc.returncode}")
    if failed:
        return failed[0]
    link = subprocess.run([cc, *flags, *objects, "-o", tmp], capture_output=True, text=True, timeout=120)
    return (link.stderr or f"{cc} (link) exited with {link.returncode}") if link.returncode else ""


def _build(path: str) -> None:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc/gcc) on PATH")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(fd)
    try:
        with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as objects_dir:
            error = _compile(cc, _FLAGS, tmp, objects_dir)
            if error:
                # a compiler without OpenMP (clang without libomp): the same kernels on one thread
                if _compile(cc, [f for f in _FLAGS if f != "-fopenmp"], tmp, objects_dir):
                    raise RuntimeError(f"{cc} failed: {error.strip()[-300:]}")
        os.replace(tmp, path)       # atomic: concurrent processes never load a half-written file
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _load():
    if os.environ.get("TQL_NATIVE", "1") == "0":
        return None, "disabled by TQL_NATIVE=0"
    text = b""
    for name in _SOURCES + _HEADERS:
        with open(name, "rb") as f:
            text += f.read()
    digest = hashlib.sha256(text + " ".join(_FLAGS).encode() + _cpu_key().encode()).hexdigest()[:16]
    cache = os.environ.get("TQL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                             "torchquantum_layers")
    path = os.path.join(cache, f"native-{digest}.so")
    try:
        if not os.path.exists(path):
            _build(path)
        lib = ctypes.CDLL(path)
    except (OSError, RuntimeError, subprocess.SubprocessError) as err:
        return None, f"unavailable: {err}"
    i64, vp, cint = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    for name in ("tql_apply_2x2_c64", "tql_apply_2x2_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, vp, i64, cint]
        getattr(lib, name).restype = None
    lib.tql_permute.argtypes = [vp, vp, i64, i64, i64, vp, i64, cint]
    lib.tql_permute.restype = None
    lib.tql_permute_blocks.argtypes = [vp, vp, i64, i64, i64, i64, i64, vp, vp, i64, cint]
    lib.tql_permute_blocks.restype = None
    for name in ("tql_diag_blocks_c64", "tql_diag_blocks_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, i64, i64, i64, vp, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_expval_pairs_c64", "tql_expval_pairs_c128"):
        getattr(lib, name).argtypes = [vp, i64, i64, i64, vp, vp, vp, vp, vp, i64, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_expval_grad_c64", "tql_expval_grad_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, i64, vp, vp, vp, vp, vp, i64, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_diag_expval_c64", "tql_diag_expval_c128"):
        getattr(lib, name).argtypes = [vp, i64, i64, i64, vp, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_diag_expval_grad_c64", "tql_diag_expval_grad_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, i64, vp, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_abs2_c64", "tql_abs2_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, cint]
        getattr(lib, name).restype = None
    for name in ("tql_scale_by_real_c64", "tql_scale_by_real_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, i64, i64, ctypes.c_double, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_cdf_c64", "tql_cdf_c128"):
        getattr(lib, name).argtypes = [vp, i64, i64, vp, cint]
        getattr(lib, name).restype = cint
    lib.tql_upper_bound.argtypes = [vp, i64, i64, vp, i64, vp, cint]
    lib.tql_upper_bound.restype = None
    for name in ("tql_bit_sums_c64", "tql_bit_sums_c128"):
        getattr(lib, name).argtypes = [vp, i64, i64, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_bit_sums_grad_c64", "tql_bit_sums_grad_c128"):
        getattr(lib, name).argtypes = [vp, vp, vp, i64, i64, vp, cint]
        getattr(lib, name).restype = None
    for name in ("tql_gate_2x2_c64", "tql_gate_2x2_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, vp, i64, i64, cint]
        getattr(lib, name).restype = cint
    for name in ("tql_gate_4x4_c64", "tql_gate_4x4_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, i64, vp, i64, cint]
        getattr(lib, name).restype = None
    for name in ("tql_gate_levels_c64", "tql_gate_levels_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, vp, i64, vp, vp, i64, i64, cint, cint]
        getattr(lib, name).restype = cint
    for name in ("tql_gram_levels_c64", "tql_gram_levels_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, vp, i64, vp, i64, i64, vp, cint, cint]
        getattr(lib, name).restype = cint
    for name in ("tql_program_c64", "tql_program_c128"):
        getattr(lib, name).argtypes = [vp, i64, vp, i64, i64, i64, vp, i64, vp, vp, vp, i64, i64, vp, vp, vp, vp,
                                       cint]
        getattr(lib, name).restype = None
    for name in ("tql_program_grad_c64", "tql_program_grad_c128"):
        getattr(lib, name).argtypes = [vp, vp, vp, vp, i64, i64, i64, vp, i64, vp, vp, vp, i64, i64, vp, vp, vp,
                                       i64, vp, i64, vp, cint, cint]
        getattr(lib, name).restype = None
    for name in ("tql_program_grad_ckpt_c64", "tql_program_grad_ckpt_c128"):
        getattr(lib, name).argtypes = [vp, vp, i64, i64, i64, vp, i64, vp, vp, vp, i64, i64, vp, vp, vp, vp, vp,
                                       i64, vp, i64, vp, cint, cint]
        getattr(lib, name).restype = None
    lib.tql_stream_bytes.argtypes = []
    lib.tql_stream_bytes.restype = i64
    _state["stream_bytes"] = int(lib.tql_stream_bytes())
    lib.tql_levels_limits.argtypes = [vp]
    lib.tql_levels_limits.restype = None
    limits = (ctypes.c_int64 * 2)()
    lib.tql_levels_limits(limits)
    _state["levels_limits"] = tuple(limits)
    return lib, f"in use ({path})"


def library():
    """The loaded library, or None (see :func:`status`)."""
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["lib"], _state["reason"] = _load()
                _state["tried"] = True
    return _state["lib"]


def levels_limits():
    """(most wires, most levels of the matrix) levels.c takes; (0, 0) without the library."""
    return _state.get("levels_limits", (0, 0)) if library() is not None else (0, 0)


def stream_bytes() -> int:
    """Outputs of at least this many bytes are written with streaming stores (simd.h); 0 without
    the library."""
    return _state.get("stream_bytes", 0) if library() is not None else 0


def status() -> str:
    library()
    return _state["reason"]


_NATIVE_DTYPES = (torch.complex64, torch.complex128)


def _ptr(t):
    return None if t is None else t.data_ptr()


def _kernel(name, dtype):
    """The library's ``name`` kernel for the state's precision (``_c64`` / ``_c128``)."""
    return getattr(library(), f"{name}_c64" if dtype == torch.complex64 else f"{name}_c128")


def _plain_cpu_state(state: torch.Tensor) -> bool:
    """What every kernel here reads: a contiguous, unconjugated complex CPU tensor."""
    return state.is_cpu and state.dtype in _NATIVE_DTYPES and state.is_contiguous() and not state.is_conj() \
        and not transforms_active()


def _usable(state: torch.Tensor, *operands) -> bool:
    if not _plain_cpu_state(state):
        return False
    if torch.is_grad_enabled() and (state.requires_grad or any(o.requires_grad for o in operands)):
        return False        # autograd records the torch kernels' graph instead
    return library() is not None


def _gate_operand(state: torch.Tensor, matrix: torch.Tensor):
    """The matrix as the kernels read it — shared (d, d) or one per sample (B, d, d), contiguous,
    unconjugated — or None where the native kernels do not apply."""
    if not _usable(state, matrix) or matrix.dtype != state.dtype:
        return None
    if matrix.dim() == 3:
        if matrix.shape[0] == 1:
            matrix = matrix[0]
        elif matrix.shape[0] != state.shape[0]:
            return None
    return matrix if matrix.is_contiguous() and not matrix.is_conj() else matrix.resolve_conj().contiguous()


def apply_2x2(state: torch.Tensor, matrix: torch.Tensor, wire: int, n: int, controls=()):
    """``matrix`` ((2, 2) shared or (B, 2, 2) per sample) on ``wire``, or None where not usable.
    With ``controls`` (wires) it acts only where all of them are 1 and copies the rest."""
    m = _gate_operand(state, matrix)
    if m is None:
        return None
    cmask = sum(1 << (n - 1 - c) for c in controls)      # as program.py writes a controlled slot's
    out = torch.empty_like(state)
    per = 0 if m.dim() == 2 else 2 ** n
    if _kernel("tql_gate_2x2", state.dtype)(state.data_ptr(), out.data_ptr(), state.numel(), n - 1 - wire,
                                            m.data_ptr(), per, cmask, torch.get_num_threads()):
        return out          # the programs' vector bodies (AVX2); a controlled gate always
    L, R = 2 ** wire, 2 ** (n - wire - 1)
    shift = -1 if m.dim() == 2 else wire       # per sample: one matrix per 2^wire blocks
    fn = _kernel("tql_apply_2x2", state.dtype)
    fn(state.data_ptr(), out.data_ptr(), state.shape[0] * L, R, m.data_ptr(), shift, torch.get_num_threads())
    return out


def apply_4x4(state: torch.Tensor, matrix: torch.Tensor, wires, n: int):
    """``matrix`` ((4, 4) shared or (B, 4, 4) per sample) on two wires ``wires[0] < wires[1]``
    (its first wire the more significant bit of its index), or None where not usable."""
    m = _gate_operand(state, matrix)
    if m is None:
        return None
    out = torch.empty_like(state)
    _kernel("tql_gate_4x4", state.dtype)(state.data_ptr(), out.data_ptr(), state.numel(), n - 1 - wires[0],
                                         n - 1 - wires[1], m.data_ptr(), 0 if m.dim() == 2 else 2 ** n,
                                         torch.get_num_threads())
    return out


@functools.lru_cache(maxsize=1024)
@lasting
def _levels_operands(wires: tuple, levels, n: int):
    """(index bits of ``wires``, the matrix's levels: all of them when None) as int64 tensors."""
    bits = torch.tensor([n - 1 - w for w in wires], dtype=torch.int64)
    return bits, torch.arange(2 ** len(wires)) if levels is None else torch.tensor(levels, dtype=torch.int64)


def apply_levels(state: torch.Tensor, matrix: torch.Tensor, wires, n: int, levels=None, controls=(),
                 keep_rest=True):
    """``matrix`` ((M, M) shared or (B, M, M) per sample) on the local levels ``levels`` of
    ``wires`` (any order; wires[0] the levels' most significant bit; None: all 2^k of them, a
    dense gate), only where every wire of ``controls`` is 1; the other amplitudes copied (zeroed
    unless ``keep_rest``). One pass (levels.c), or None where not usable."""
    max_wires, max_matrix = levels_limits()
    if len(wires) > max_wires or (2 ** len(wires) if levels is None else len(levels)) > max_matrix:
        return None             # what levels.c declines, before anything is allocated
    m = _gate_operand(state, matrix)
    if m is None:
        return None
    bits, lev = _levels_operands(tuple(wires), None if levels is None else tuple(levels), n)
    cmask = sum(1 << (n - 1 - c) for c in controls)
    out = torch.empty_like(state)
    if not _kernel("tql_gate_levels", state.dtype)(
            state.data_ptr(), out.data_ptr(), state.numel(), bits.numel(), bits.data_ptr(), lev.numel(),
            lev.data_ptr(), m.data_ptr(), 0 if m.dim() == 2 else 2 ** n, cmask, int(keep_rest),
            torch.get_num_threads()):
        return None
    return out


def gram_levels(state: torch.Tensor, grad: torch.Tensor, wires, n: int, levels=None, controls=(),
                per_sample=False, diagonal_only=False):
    """The matrix gradient of :func:`apply_levels` (torch's convention): Σ grad_i conj(state_j) over
    the levels of ``wires`` where every control is 1, summed over the batch ``(M, M)`` or one per
    sample ``(B, M, M)``, in complex128 (``diagonal_only``: the i = j entries, zeros elsewhere);
    one pass over both states (levels.c), or None where the kernel does not apply."""
    if library() is None or not all(_plain_cpu_state(t) for t in (state, grad)) or state.shape != grad.shape:
        return None
    bits, lev = _levels_operands(tuple(wires), None if levels is None else tuple(levels), n)
    M = lev.numel()
    acc = torch.zeros((state.shape[0], M, M) if per_sample else (M, M), dtype=torch.complex128)
    cmask = sum(1 << (n - 1 - c) for c in controls)
    if not _kernel("tql_gram_levels", state.dtype)(
            state.data_ptr(), grad.data_ptr(), state.numel(), bits.numel(), bits.data_ptr(), M, lev.data_ptr(),
            2 ** n if per_sample else 0, cmask, acc.data_ptr(), int(diagonal_only), torch.get_num_threads()):
        return None
    return acc


def permute(state: torch.Tensor, idx: torch.Tensor, lo: int, hi: int, n: int):
    """``new[.., i, ..] = old[.., idx[i], ..]`` on the span lo..hi, or None where not usable."""
    if not _usable(state) or idx.device.type != "cpu" or idx.dtype != torch.int64:
        return None
    B = state.shape[0]
    S = idx.shape[0]
    L, R = 2 ** lo, 2 ** (n - hi - 1)
    out = torch.empty_like(state)
    library().tql_permute(state.data_ptr(), out.data_ptr(), B * L, S, R, idx.contiguous().data_ptr(),
                          state.element_size(), torch.get_num_threads())
    return out



def line_bits(state: torch.Tensor) -> int:
    """log2 of the amplitudes in one 64-byte line: the block of :func:`permute_local`."""
    return 3 if state.element_size() == 8 else 2


def permute_local(state: torch.Tensor, perm, wires, n: int):
    """``new[i] = old[perm[i]]`` in the local basis of ``wires`` (wires[0]: the local state's most
    significant bit), with no index over the register, or None where not usable: one pass in
    blocks of one 64-byte line (see ``tql_permute_blocks`` in native.c)."""
    if not _usable(state):
        return None
    b = line_bits(state)
    if n < b:
        return None
    maskH, dstoff, srcoff = _block_offsets(tuple(int(p) for p in perm), tuple(wires), n, b)
    out = torch.empty_like(state)
    library().tql_permute_blocks(state.data_ptr(), out.data_ptr(), state.shape[0], n, b, maskH, dstoff.numel(),
                                 dstoff.data_ptr(), srcoff.data_ptr(), state.element_size(), torch.get_num_threads())
    return out


def apply_diagonal(state: torch.Tensor, diag: torch.Tensor, wires, n: int):
    """A shared diagonal ``(2^k,)`` on sorted ``wires`` in one pass of line blocks (see
    :func:`permute_local`), or None where not usable (per-sample diagonals included)."""
    if diag.dim() != 1 or state.numel() < MIN_DIAGONAL_AMPLITUDES or not _usable(state, diag) \
            or diag.dtype != state.dtype:
        return None
    b = line_bits(state)
    if n < b:
        return None
    maskH, dstoff, local = _block_locals(tuple(wires), n, b)
    lanes = diag[local].contiguous()
    out = torch.empty_like(state)
    fn = _kernel("tql_diag_blocks", state.dtype)
    fn(state.data_ptr(), out.data_ptr(), state.shape[0], n, b, maskH, dstoff.numel(), dstoff.data_ptr(),
       lanes.data_ptr(), torch.get_num_threads())
    return out


@functools.lru_cache(maxsize=256)
@lasting
def _block_locals(wires: tuple, n: int, b: int):
    """(maskH, dstoff (KH,), local (KH, 2^b)) of the line blocks: wires whose bit lies in the low b
    bits of the index act inside a block (their bits come from the lane), the others (high) pick
    the block; local[jh, lane] is the lane's local state of ``wires`` (wires[0]: its top bit)."""
    k = len(wires)
    bit = [1 << (n - 1 - w) for w in wires]
    high = [j for j in range(k) if bit[j] >= 1 << b]
    maskH = sum(bit[j] for j in high)
    dstoff, local = [], []
    for jh in range(2 ** len(high)):
        hbits = {j: (jh >> (len(high) - 1 - h)) & 1 for h, j in enumerate(high)}
        dstoff.append(sum(bit[j] for j in high if hbits[j]))
        local.append([sum(1 << (k - 1 - j) for j in range(k)
                          if (hbits[j] if j in hbits else (lane & bit[j]) != 0)) for lane in range(2 ** b)])
    return maskH, torch.tensor(dstoff, dtype=torch.int64), torch.tensor(local, dtype=torch.int64)


@functools.lru_cache(maxsize=256)
@lasting
def _block_offsets(perm: tuple, wires: tuple, n: int, b: int):
    """(maskH, dstoff, srcoff (KH, 2^b)) of :func:`permute_local`: where each lane's source
    amplitude lies relative to the block's base."""
    maskH, dstoff, local = _block_locals(wires, n, b)
    k = len(wires)
    bit = [1 << (n - 1 - w) for w in wires]
    low_mask = sum(x for x in bit if x < 1 << b)
    place = [sum(bit[j] for j in range(k) if (s >> (k - 1 - j)) & 1) for s in range(2 ** k)]
    srcoff = [[place[perm[j]] + (lane & ~low_mask) for lane, j in enumerate(row)] for row in local.tolist()]
    return maskH, dstoff, torch.tensor(srcoff, dtype=torch.int64)


def runs_on(state: torch.Tensor) -> bool:
    """Whether the kernels that take only a state and their own tables (:func:`expval_pairs`,
    :func:`diagonal_expval`, :func:`abs2`, :func:`bit_sums`, …) run on it, at any size."""
    return _plain_cpu_state(state) and library() is not None


def expval_pairs(state: torch.Tensor, groups, n_obs: int) -> torch.Tensor:
    """Σ over X-mask groups of Re(conj ψ[j] ψ[i]) against each group's table, as (B, n_obs) float64.

    ``groups``: (xb, pbit, full, re, im) int64 tensors — per group the index mask, the pivot bit,
    whether it sums over all amplitudes, and the addresses of its real tables (0 for an absent
    imaginary part); see native.c. The caller keeps the tables alive."""
    xb, pbit, full, tre, tim = groups
    B, N = state.shape
    out = torch.zeros(B, n_obs, dtype=torch.float64)
    fn = _kernel("tql_expval_pairs", state.dtype)
    fn(state.data_ptr(), B, N.bit_length() - 1, xb.numel(), xb.data_ptr(), pbit.data_ptr(), full.data_ptr(),
       tre.data_ptr(), tim.data_ptr(), n_obs, out.data_ptr(), torch.get_num_threads())
    return out


def diagonal_expval(state: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Σ_i |ψ[b, i]|² table[o, i] as (B, n_obs) float64, for a real contiguous ``table`` (n_obs, N)
    of the state's real dtype (see :func:`runs_on`)."""
    B, N = state.shape
    out = torch.empty(B, table.shape[0], dtype=torch.float64)
    fn = _kernel("tql_diag_expval", state.dtype)
    fn(state.data_ptr(), B, N, table.shape[0], table.data_ptr(), out.data_ptr(), torch.get_num_threads())
    return out


def diagonal_expval_grad(state: torch.Tensor, weights: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The gradient (torch's convention) of Σ_{b,o} weights[b, o] · :func:`diagonal_expval` w.r.t. ψ."""
    B, N = state.shape
    w = weights.to(table.dtype).contiguous()
    out = torch.empty_like(state)
    fn = _kernel("tql_diag_expval_grad", state.dtype)
    fn(state.data_ptr(), w.data_ptr(), B, N, table.shape[0], table.data_ptr(), out.data_ptr(), torch.get_num_threads())
    return out


def abs2(state: torch.Tensor) -> torch.Tensor:
    """|ψ|² as a real tensor of the state's shape (where :func:`runs_on`; no autograd: see
    ``measure.probabilities``)."""
    out = torch.empty(state.shape, dtype=state.real.dtype)
    _kernel("tql_abs2", state.dtype)(state.data_ptr(), out.data_ptr(), state.numel(), torch.get_num_threads())
    return out


def scale_by_real(state: torch.Tensor, g: torch.Tensor, c: float) -> torch.Tensor:
    """``c · state · g`` for a real ``g`` broadcastable to the state's (B, N) (the gradient of
    :func:`abs2` is ``scale_by_real(state, grad, 2)``), in one pass where :func:`runs_on`; g may be
    expanded (stride 0) along either axis."""
    B, N = state.shape
    g = g.to(state.real.dtype).expand(B, N)
    if g.stride(1) not in (0, 1):
        g = g.contiguous()
    out = torch.empty_like(state)
    _kernel("tql_scale_by_real", state.dtype)(state.data_ptr(), g.data_ptr(), B, N, g.stride(0), g.stride(1),
                                              float(c), out.data_ptr(), torch.get_num_threads())
    return out


def cdf(state: torch.Tensor):
    """(B, N) float64 running sums of |ψ|² along each sample (where :func:`runs_on`), or None
    when the kernel's scratch could not be allocated."""
    B, N = state.shape
    out = torch.empty(B, N, dtype=torch.float64)
    if not _kernel("tql_cdf", state.dtype)(state.data_ptr(), B, N, out.data_ptr(), torch.get_num_threads()):
        return None
    return out


def upper_bound(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``torch.searchsorted(cdf, u, right=True).clamp(max=N - 1)`` for float64 CPU rows
    ``cdf`` (B, N) and draws ``u`` (B, shots), threaded over the draws."""
    B, N = cdf.shape
    cdf, u = cdf.contiguous(), u.contiguous()
    out = torch.empty(u.shape, dtype=torch.int64)
    library().tql_upper_bound(cdf.data_ptr(), B, N, u.data_ptr(), u.shape[1], out.data_ptr(), torch.get_num_threads())
    return out


def bit_sums(state: torch.Tensor) -> torch.Tensor:
    """(B, n + 1) float64: column 0 Σ_i |ψ[b, i]|², column 1 + k the same over the i whose index
    bit k is set (wire n − 1 − k is 1), in one pass (see ``tql_bit_sums`` in native.c)."""
    B, N = state.shape
    n = N.bit_length() - 1
    out = torch.empty(B, n + 1, dtype=torch.float64)
    _kernel("tql_bit_sums", state.dtype)(state.data_ptr(), B, n, out.data_ptr(), torch.get_num_threads())
    return out


@functools.lru_cache(maxsize=64)
@lasting
def z_of_bit_sums(n: int) -> torch.Tensor:
    """(n + 1, n + 1) float64 M with [Σ|ψ|², ⟨Z_0⟩, …, ⟨Z_{n−1}⟩] = :func:`bit_sums` @ M, as
    ⟨Z_w⟩ = S_0 − 2 S_{1+k} for wire w's index bit k = n − 1 − w (shared: do not modify)."""
    m = torch.zeros(n + 1, n + 1, dtype=torch.float64)
    m[0] = 1
    w = torch.arange(n)
    m[1 + (n - 1 - w), 1 + w] = -2
    return m


def bit_sums_grad(state: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """The gradient (torch's convention) of Σ_b Σ_j weights[b, j] · :func:`bit_sums`[b, j] w.r.t. ψ:
    2 ψ[b, i] (weights[b, 0] + Σ over i's set bits k of weights[b, 1 + k])."""
    B, N = state.shape
    n = N.bit_length() - 1
    w = weights.to(torch.float64)
    G, H = w[:, 0].contiguous(), w[:, 1:].contiguous()
    out = torch.empty_like(state)
    _kernel("tql_bit_sums_grad", state.dtype)(state.data_ptr(), G.data_ptr(), H.data_ptr(), B, n, out.data_ptr(),
                                              torch.get_num_threads())
    return out


def expval_grad(state: torch.Tensor, groups, weights: torch.Tensor, out=None) -> torch.Tensor:
    """The gradient (torch's convention) of Σ_{b,o} weights[b, o] · :func:`expval_pairs` w.r.t. ψ,
    added to ``out`` when given (a contiguous tensor like ``state``)."""
    xb, pbit, full, tre, tim = groups
    B, N = state.shape
    real = torch.float32 if state.dtype == torch.complex64 else torch.float64
    w = weights.to(real).contiguous()
    grad = torch.zeros_like(state) if out is None else out
    fn = _kernel("tql_expval_grad", state.dtype)
    fn(state.data_ptr(), grad.data_ptr(), B, N.bit_length() - 1, xb.numel(), xb.data_ptr(), pbit.data_ptr(),
       full.data_ptr(), tre.data_ptr(), tim.data_ptr(), w.shape[1], w.data_ptr(), torch.get_num_threads())
    return grad


def _gram_results(gram_shared, gram_own, dtype):
    return (None if gram_shared is None else gram_shared.to(dtype),
            None if gram_own is None else gram_own.to(dtype))


def _program_operands(state, shared, batched, bits):
    """(chunks, shared (G, 2, 2), batched (B, Gb, 2, 2), reals per sample's set, log2 chunks per
    sample) as the C kernels read them; an absent set is a dummy matrix."""
    B, N = state.shape
    dummy = torch.zeros(1, 2, 2, dtype=state.dtype)
    shared = shared.resolve_conj().contiguous() if shared is not None and shared.numel() else dummy
    if batched is None or batched.numel() == 0:
        return B * N >> bits, shared, dummy, 0, 0
    batched = batched.resolve_conj().contiguous()
    return B * N >> bits, shared, batched, batched[0].numel() * 2, (N >> bits).bit_length() - 1


def _tile(state, bits, active):
    """(log2 of the row length, the program's ascending physical index bits: all by default)."""
    n_total = state.shape[1].bit_length() - 1
    if active is None:
        active = _all_bits(n_total)
    if active.numel() != bits:
        raise ValueError(f"program: {active.numel()} active bits for a program on {bits}")
    return n_total, active


@functools.lru_cache(maxsize=None)
@lasting
def _all_bits(n):
    return torch.arange(n, dtype=torch.int64)


def run_program(state: torch.Tensor, shared, batched, code: torch.Tensor, perms: torch.Tensor,
                bits: int, checkpoints=None, save=None, phases=None, active=None, in_place=False) -> torch.Tensor:
    """The local program ``code`` (see program.c) on every chunk of 2^bits amplitudes of a plain
    CPU state: ``shared`` (G, 2, 2) matrices, ``batched`` (B, Gb, 2, 2) ones per sample (or None).
    A state of one row with B sets of ``batched`` gives B rows (the row is read, not copied).
    ``checkpoints`` (K, B, N) receives the state after each op k with ``save[k]`` >= 0;
    ``phases``: the monomials' phase tables, of the state's dtype. ``active``: the index bits the
    program acts on (ascending; default all), each other value of the rest being one chunk.
    ``in_place``: the result overwrites ``state`` (contiguous, as many rows as the result), which
    is returned."""
    rows = state.shape[0] if batched is None else batched.shape[0]
    if in_place:
        if not state.is_contiguous() or state.shape[0] != rows:
            raise ValueError(f"run_program: in place needs a contiguous state of {rows} rows, got "
                             f"{tuple(state.shape)} (contiguous: {state.is_contiguous()})")
        out = state
    else:
        out = torch.empty(rows, state.shape[1], dtype=state.dtype)
    chunks, sh, ba, stride, shift = _program_operands(out, shared, batched, bits)
    n_total, active = _tile(state, bits, active)
    fn = _kernel("tql_program", state.dtype)
    fn(state.data_ptr(), state.shape[0], out.data_ptr(), chunks, bits, n_total, active.data_ptr(), code.shape[0],
       code.data_ptr(), sh.data_ptr(), ba.data_ptr(), stride, shift, perms.data_ptr(), _ptr(phases),
       _ptr(checkpoints), _ptr(save), torch.get_num_threads())
    return out


def _grams(rows, shared, batched, want_shared, want_batched):
    n_shared = shared.shape[-3] if shared is not None else 0
    n_own = batched.shape[-3] if batched is not None else 0
    gram_shared = torch.zeros(n_shared, 2, 2, dtype=torch.complex128) if want_shared and n_shared else None
    gram_own = torch.zeros(rows, n_own, 2, 2, dtype=torch.complex128) if want_batched and n_own else None
    return n_shared, gram_shared, n_own, gram_own


def program_grad_checkpointed(grad: torch.Tensor, shared, batched, code, inverse_perms, bits: int, checkpoints,
                              save, group, want_input_grad=True, want_shared=True, want_batched=True,
                              inverse_phases=None, active=None, unitary=False):
    """:func:`program_grad` for backprop from the states :func:`run_program` kept in
    ``checkpoints`` (see program.c): ψ is read there, never un-computed. Returns (grad before the
    program, shared slots' gradient, per-sample slots' gradient), each None where not asked.
    ``unitary``: see :func:`program_grad`."""
    g = grad.resolve_conj().contiguous()
    chunks, sh, ba, stride, shift = _program_operands(g, shared, batched, bits)
    n_shared, gram_shared, n_own, gram_own = _grams(g.shape[0], shared, batched, want_shared, want_batched)
    g_in = torch.empty_like(g) if want_input_grad else None
    n_total, active = _tile(g, bits, active)
    fn = _kernel("tql_program_grad_ckpt", g.dtype)
    fn(g.data_ptr(), _ptr(g_in), chunks, bits, n_total, active.data_ptr(), code.shape[0], code.data_ptr(),
       sh.data_ptr(), ba.data_ptr(), stride, shift, inverse_perms.data_ptr(), _ptr(inverse_phases),
       checkpoints.data_ptr(), save.data_ptr(), group.data_ptr(), n_shared, _ptr(gram_shared), n_own,
       _ptr(gram_own), int(unitary), torch.get_num_threads())
    return (g_in, *_gram_results(gram_shared, gram_own, g.dtype))


def program_grad(psi: torch.Tensor, grad: torch.Tensor, shared, batched, code: torch.Tensor,
                 inverse_perms: torch.Tensor, bits: int, group: torch.Tensor, want_state: bool,
                 want_input_grad: bool = True,
                 want_shared: bool = True, want_batched: bool = True, inverse_phases=None, active=None,
                 unitary: bool = False):
    """The reverse sweep of :func:`run_program` from its output ``psi`` and the gradient ``grad``
    there: (psi before the program, grad before it, Σ grad_after · psi_before† per shared slot
    (G, 2, 2), the same per sample for the batched slots (B, Gb, 2, 2)); each None where not
    asked for (or absent), and the sweep does only what the asked ones need. ``group``: the first
    op of each op's group of commuting gates (``Program.group``). ``unitary``: the slot matrices
    are unitary functions of real angles, so only the anti-Hermitian part of each 2 x 2 slot's
    Σ grad_after ψ_after† reaches the angles; the kernels then return the gradient of that part
    (cheaper; exact for the angles, not for arbitrary matrices)."""
    chunks, sh, ba, stride, shift = _program_operands(psi, shared, batched, bits)
    g = grad.resolve_conj().contiguous()
    n_shared, gram_shared, n_own, gram_own = _grams(psi.shape[0], shared, batched, want_shared, want_batched)
    psi_in = torch.empty_like(psi) if want_state else None
    g_in = torch.empty_like(psi) if want_input_grad else None
    n_total, active = _tile(psi, bits, active)
    fn = _kernel("tql_program_grad", psi.dtype)
    fn(psi.data_ptr(), g.data_ptr(), _ptr(psi_in), _ptr(g_in), chunks, bits, n_total, active.data_ptr(),
       code.shape[0], code.data_ptr(), sh.data_ptr(), ba.data_ptr(), stride, shift, inverse_perms.data_ptr(),
       _ptr(inverse_phases), group.data_ptr(), n_shared, _ptr(gram_shared), n_own, _ptr(gram_own), int(unitary),
       torch.get_num_threads())
    return (psi_in, g_in, *_gram_results(gram_shared, gram_own, psi.dtype))
