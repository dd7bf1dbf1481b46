"""One-pass Triton kernels for CUDA states: the GPU twin of native.c / levels.c.

torch has no call that applies a matrix to some wires of a state in one pass: on CUDA a gate on
scattered wires moved every axis there and back (two extra copies), a controlled gate copied,
gathered and scattered. These kernels see only (matrix, wires), as the C ones do:

- :func:`apply_levels`: an (M, M) matrix, shared or one per sample, on M local levels of any k
  wires (all 2^k of them: a dense gate), only where every control wire is 1; the other levels
  copied or zeroed. Covers 1- and 2-qubit gates, controlled gates, dense gates on scattered
  wires and Givens rotations, in one read and one write of the state.
- :func:`permute_local`: a permutation of the local basis of k wires (X, CNOT, SWAP, Toffoli),
  no arithmetic and no index over the register.
- :func:`apply_diagonal`: a diagonal on k wires, shared or per sample.
- :func:`gather_span`: a permutation of the basis of a span of wires given by its index (the
  engine's fused permutation runs), the index read from cache instead of one of 2^n entries.

Triton has no complex type, so a state is read as its float view (``torch.view_as_real``): each
amplitude a (re, im) pair, split and joined in registers. The kernels run where Triton is
importable and the state lives on CUDA, with no autograd graph to record; anywhere else each
function returns None and the torch kernels apply. Under ``TRITON_INTERPRET=1`` (set before this
module is imported) they also take CPU tensors, which is how the tests check them without a GPU.
"""
from __future__ import annotations

import functools
import os

import torch

from ..caching import lasting

try:
    import triton
    import triton.language as tl
except ImportError:         # CPU-only installs: the torch kernels apply everywhere
    triton = None

INTERPRETED = triton is not None and os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
# at most this many wires: 2^k levels per group held in registers (a dense 6-wire gate: 64 x 64
# multiply-adds per amplitude, compute-bound on any device; torch's GEMM takes it)
MAX_WIRES = 5
_DTYPES = {torch.complex64: torch.float32, torch.complex128: torch.float64}
# complex64 amplitudes one program moves (complex128: half as many, the same bytes): large enough
# to hide latency, small enough for registers (benchmarks/gpu_codegen.py)
_TILE_AMPLITUDES = 2048


# Triton 3.9 fuses a*b + c into one instruction by default, 3.10 will not: ask, every launch
_FUSE = dict(enable_fp_fusion=True)


def available() -> bool:
    return triton is not None


def usable(state: torch.Tensor, *operands) -> bool:
    """CUDA (or, interpreted, any) complex64/complex128 state; no autograd graph to record."""
    if triton is None or state.dtype not in _DTYPES or not (state.is_cuda or INTERPRETED):
        return False
    if torch.is_grad_enabled() and (state.requires_grad or any(o.requires_grad for o in operands)):
        return False
    return all(o.device == state.device and o.dtype == state.dtype for o in operands)


def _floats(t: torch.Tensor) -> torch.Tensor:
    """The interleaved (re, im) float view of a contiguous, unconjugated complex tensor."""
    return torch.view_as_real(t.resolve_conj().contiguous())


@functools.lru_cache(maxsize=1024)
@lasting
def _offsets(wires: tuple, levels: tuple, n: int, device_str: str):
    """Flat offsets of local ``levels`` of ``wires`` (wires[0]: their most significant bit), and
    the index bits of the wires sorted ascending (where the group index gets its zeros)."""
    k = len(wires)
    offs = [sum(((lv >> (k - 1 - j)) & 1) << (n - 1 - w) for j, w in enumerate(wires)) for lv in levels]
    bits = sorted(n - 1 - w for w in wires)
    return (torch.tensor(offs, dtype=torch.int64, device=device_str),
            torch.tensor(bits, dtype=torch.int64, device=device_str))


def _tile(dtype: torch.dtype) -> int:
    return _TILE_AMPLITUDES if dtype == torch.complex64 else max(1, _TILE_AMPLITUDES // 2)


def _block(levels: int, dtype: torch.dtype) -> int:
    return max(16, _tile(dtype) // max(1, levels))


def _warps(levels: int) -> int:
    """Warps per program: a 32-level matrix at 16 amplitudes a thread spills registers (what
    ``benchmarks/gpu_codegen.py`` reports for sm_90); twice the threads hold half as many each."""
    return 8 if levels >= 32 else 4


if triton is not None:
    @triton.jit
    def _group_positions(g, bits_ptr, K: tl.constexpr):
        """Insert a zero at each (ascending) target bit of the group index g: its level-0 position.
        Bits of the sample index above n shift up with the rest, so g runs over the whole batch."""
        for t in tl.static_range(K):
            b = tl.load(bits_ptr + t)
            low = g & ((1 << b) - 1)
            g = ((g >> b) << (b + 1)) | low
        return g

    @triton.jit
    def _program_items(count, BLOCK: tl.constexpr):
        """This program's BLOCK indices (int64: registers past 2^31 floats) and which are < count."""
        i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        return i, i < count

    @triton.jit
    def _controlled_groups(groups, bits_ptr, cmask, K: tl.constexpr, BLOCK: tl.constexpr):
        """This program's groups, which exist, their level-0 positions, and where every control is 1."""
        g, live = _program_items(groups, BLOCK)
        pos = _group_positions(g, bits_ptr, K)
        return g, live, pos, live & ((pos & cmask) == cmask)

    @triton.jit
    def _levels_kernel(x_ptr, out_ptr, m_ptr, offs_ptr, others_ptr, bits_ptr, groups, rest_bits, cmask, read_mask,
                       K: tl.constexpr, ML: tl.constexpr, MO: tl.constexpr, PER_SAMPLE: tl.constexpr,
                       KEEP: tl.constexpr, CONTROLLED: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        g, live, pos, on = _controlled_groups(groups, bits_ptr, cmask, K, BLOCK)
        # (level, group): the group axis innermost, as the loads lay it out, so the accumulator
        # needs no re-layout through shared memory before the store
        rows = tl.arange(0, ML)
        two = tl.arange(0, 2)
        acc_re = tl.zeros((ML, BLOCK), dtype=x_ptr.dtype.element_ty)
        acc_im = tl.zeros((ML, BLOCK), dtype=x_ptr.dtype.element_ty)
        # PER_SAMPLE 0: one shared matrix; 1: one per sample, the same for the whole program (its
        # groups lie in one sample); 2: one per group (samples shorter than a program)
        mat = m_ptr
        if PER_SAMPLE == 1:
            mat = m_ptr + ((pid.to(tl.int64) * BLOCK) >> rest_bits) * (2 * ML * ML)
        if PER_SAMPLE == 2:
            own = m_ptr + (g >> rest_bits)[None, :, None] * (2 * ML * ML)
        for j in tl.static_range(ML):
            # read_mask: the sample bits cleared where one input state serves every sample
            pj = (pos & read_mask) + tl.load(offs_ptr + j)
            a = tl.load(x_ptr + (2 * pj)[:, None] + two[None, :], mask=live[:, None], other=0.0)
            a_re, a_im = tl.split(a)
            # column j of the matrix; where a control is 0, of the identity
            if PER_SAMPLE == 2:
                u = tl.load(own + (2 * (rows * ML + j))[:, None, None] + two[None, None, :],
                            mask=live[None, :, None], other=0.0)
                u_re, u_im = tl.split(u)
            else:
                u = tl.load(mat + (2 * (rows * ML + j))[:, None] + two[None, :])
                u_re, u_im = tl.split(u)
                u_re = u_re[:, None]
                u_im = u_im[:, None]
            if CONTROLLED:     # a 1 selected per group costs a select per multiply-add: only if asked
                eye = (rows == j).to(acc_re.dtype)[:, None] if KEEP else tl.zeros((ML, 1), dtype=acc_re.dtype)
                u_re = tl.where(on[None, :], u_re, eye)
                u_im = tl.where(on[None, :], u_im, 0.0)
            # one fused multiply-add per product (acc += a*u - b*v would add a multiply and an add)
            acc_re = acc_re + a_re[None, :] * u_re
            acc_re = acc_re - a_im[None, :] * u_im
            acc_im = acc_im + a_re[None, :] * u_im
            acc_im = acc_im + a_im[None, :] * u_re
        offs = tl.load(offs_ptr + rows)
        dest = (2 * (offs[:, None] + pos[None, :]))[:, :, None] + two[None, None, :]
        tl.store(out_ptr + dest, tl.join(acc_re, acc_im), mask=live[None, :, None])
        for j in tl.static_range(MO):
            pj = pos + tl.load(others_ptr + j)
            at = (2 * pj)[:, None] + two[None, :]
            if KEEP:
                src = (2 * ((pos & read_mask) + tl.load(others_ptr + j)))[:, None] + two[None, :]
                v = tl.load(x_ptr + src, mask=live[:, None], other=0.0)
            else:       # a generator vanishes off its levels and where a control is 0 (as levels.c)
                v = tl.zeros((BLOCK, 2), dtype=acc_re.dtype)
            tl.store(out_ptr + at, v, mask=live[:, None])

    @triton.jit
    def _permute_kernel(x_ptr, out_ptr, dst_ptr, src_ptr, bits_ptr, groups,
                        K: tl.constexpr, M: tl.constexpr, BLOCK: tl.constexpr):
        g, live = _program_items(groups, BLOCK)
        pos = _group_positions(g, bits_ptr, K)
        two = tl.arange(0, 2)
        for j in tl.static_range(M):
            src = (2 * (pos + tl.load(src_ptr + j)))[:, None] + two[None, :]
            dst = (2 * (pos + tl.load(dst_ptr + j)))[:, None] + two[None, :]
            tl.store(out_ptr + dst, tl.load(x_ptr + src, mask=live[:, None]), mask=live[:, None])

    @triton.jit
    def _diagonal_kernel(x_ptr, out_ptr, d_ptr, bits_ptr, total, n, read_mask,
                         K: tl.constexpr, PER_SAMPLE: tl.constexpr, BLOCK: tl.constexpr):
        i, live = _program_items(total, BLOCK)
        local = tl.zeros((BLOCK,), dtype=tl.int64)
        for t in tl.static_range(K):        # bits_ptr in wire order: wires[0] the top bit
            local = (local << 1) | ((i >> tl.load(bits_ptr + t)) & 1)
        if PER_SAMPLE:
            local += (i >> n) << K
        two = tl.arange(0, 2)
        a_re, a_im = tl.split(tl.load(x_ptr + (2 * (i & read_mask))[:, None] + two[None, :], mask=live[:, None],
                                      other=0.0))
        d_re, d_im = tl.split(tl.load(d_ptr + (2 * local)[:, None] + two[None, :], mask=live[:, None], other=0.0))
        out = tl.join(a_re * d_re - a_im * d_im, a_re * d_im + a_im * d_re)
        tl.store(out_ptr + (2 * i)[:, None] + two[None, :], out, mask=live[:, None])


if triton is not None:
    @triton.jit
    def _gram_kernel(x_ptr, g_ptr, acc_ptr, offs_ptr, bits_ptr, groups, rest_bits, cmask,
                     K: tl.constexpr, ML: tl.constexpr, PER_SAMPLE: tl.constexpr, DIAGONAL: tl.constexpr,
                     BLOCK: tl.constexpr):
        """acc[(b,) i, j] += Σ_groups g_i conj(x_j) in float64 (DIAGONAL: only j = i); per sample, a
        program's groups lie in one sample (BLOCK divides the groups of one)."""
        pid = tl.program_id(0)
        g, live, pos, on = _controlled_groups(groups, bits_ptr, cmask, K, BLOCK)
        cols = tl.arange(0, ML)
        two = tl.arange(0, 2)
        out = acc_ptr
        if PER_SAMPLE:
            out = acc_ptr + ((pid.to(tl.int64) * BLOCK) >> rest_bits) * (2 * ML * ML)
        if DIAGONAL:
            for i in tl.static_range(ML):
                at = (2 * (pos + tl.load(offs_ptr + i)))[:, None] + two[None, :]
                x_re, x_im = tl.split(tl.load(x_ptr + at, mask=on[:, None], other=0.0).to(tl.float64))
                g_re, g_im = tl.split(tl.load(g_ptr + at, mask=on[:, None], other=0.0).to(tl.float64))
                tl.atomic_add(out + 2 * (i * ML + i), tl.sum(g_re * x_re + g_im * x_im, axis=0))
                tl.atomic_add(out + 2 * (i * ML + i) + 1, tl.sum(g_im * x_re - g_re * x_im, axis=0))
        else:
            offs = tl.load(offs_ptr + cols)
            at = (2 * (pos[:, None] + offs[None, :]))[:, :, None] + two[None, None, :]
            x_re, x_im = tl.split(tl.load(x_ptr + at, mask=on[:, None, None], other=0.0).to(tl.float64))
            for i in tl.static_range(ML):
                gi = (2 * (pos + tl.load(offs_ptr + i)))[:, None] + two[None, :]
                g_re, g_im = tl.split(tl.load(g_ptr + gi, mask=on[:, None], other=0.0).to(tl.float64))
                row_re = tl.sum(g_re[:, None] * x_re + g_im[:, None] * x_im, axis=0)
                row_im = tl.sum(g_im[:, None] * x_re - g_re[:, None] * x_im, axis=0)
                tl.atomic_add(out + 2 * (i * ML + cols), row_re)
                tl.atomic_add(out + 2 * (i * ML + cols) + 1, row_im)


def gram_levels(state: torch.Tensor, grad: torch.Tensor, wires, n: int, levels=None, controls=(),
                per_sample=False, diagonal_only=False):
    """The matrix gradient of :func:`apply_levels` (torch's convention): Σ grad_i conj(state_j) over
    the levels of ``wires`` where every control is 1, summed over the batch ``(M, M)`` or one per
    sample ``(B, M, M)``, in complex128 (``diagonal_only``: the i ≠ j entries skipped, left zero,
    as a diagonal's gradient needs); one pass over both states, or None where these kernels do
    not apply."""
    wires = tuple(wires)
    k = len(wires)
    if k > MAX_WIRES or not usable(state, grad) or state.shape != grad.shape:
        return None
    levels = tuple(range(2 ** k)) if levels is None else tuple(int(v) for v in levels)
    ml = len(levels)
    if ml & (ml - 1):
        return None
    B = state.shape[0]
    offs, bits = _offsets(wires, levels, n, str(state.device))
    acc = torch.zeros((B, ml, ml) if per_sample else (ml, ml), dtype=torch.complex128, device=state.device)
    groups = B * 2 ** (n - k)
    block = min(_block(ml, state.dtype), 2 ** (n - k)) if per_sample else _block(ml, state.dtype)
    cmask = sum(1 << (n - 1 - c) for c in controls)
    _gram_kernel[_grid(groups, block)](_floats(state), _floats(grad), torch.view_as_real(acc), offs, bits, groups,
                                       n - k, cmask, K=k, ML=ml, PER_SAMPLE=bool(per_sample),
                                       DIAGONAL=bool(diagonal_only), BLOCK=block,
                                       num_warps=_warps(ml), **_FUSE)
    return acc


if triton is not None:
    @triton.jit
    def _span_gather_kernel(x_ptr, out_ptr, idx_ptr, total, log_r, log_s, BLOCK: tl.constexpr):
        """out[.., s, r] = x[.., idx[s], r] with r the low log_r bits of the flat index and s the
        log_s bits above them: the index table is read per amplitude from cache, not a 2^n one."""
        i, live = _program_items(total, BLOCK)
        r = i & ((1 << log_r) - 1)
        s = (i >> log_r) & ((1 << log_s) - 1)
        src = ((i >> (log_r + log_s)) << (log_r + log_s)) | (tl.load(idx_ptr + s, mask=live, other=0) << log_r) | r
        two = tl.arange(0, 2)
        v = tl.load(x_ptr + (2 * src)[:, None] + two[None, :], mask=live[:, None], other=0.0)
        tl.store(out_ptr + (2 * i)[:, None] + two[None, :], v, mask=live[:, None])


def gather_span(state: torch.Tensor, idx: torch.Tensor, lo: int, hi: int, n: int):
    """``new[.., i, ..] = old[.., idx[i], ..]`` on the span of wires lo..hi (``idx``: 2^(hi-lo+1)
    int64 on the state's device); one pass, or None where these kernels do not apply."""
    if not usable(state) or idx.dtype != torch.int64 or idx.device != state.device:
        return None
    out = torch.empty_like(state, memory_format=torch.contiguous_format)
    total = out.numel()
    tile = _tile(state.dtype)
    _span_gather_kernel[_grid(total, tile)](_floats(state), torch.view_as_real(out), idx.contiguous(), total,
                                            n - 1 - hi, hi - lo + 1, BLOCK=tile, **_FUSE)
    return out


def _grid(groups: int, block: int):
    return (triton.cdiv(groups, block),)


def apply_levels(state: torch.Tensor, matrix: torch.Tensor, wires, n: int, levels=None, controls=(),
                 keep_rest=True):
    """``matrix`` ((M, M) shared or (B, M, M) per sample) on the local ``levels`` of ``wires`` (any
    order, wires[0] the levels' most significant bit; None: all 2^k, a dense gate), only where
    every wire of ``controls`` is 1; the other amplitudes copied (zeroed unless ``keep_rest``: a
    generator, which vanishes off its levels and its controls, as levels.c). One pass, or None
    where these kernels do not apply."""
    wires = tuple(wires)
    k = len(wires)
    if k > MAX_WIRES or not usable(state, matrix):
        return None
    M = 2 ** k
    levels = tuple(range(M)) if levels is None else tuple(int(v) for v in levels)
    ml = len(levels)
    if ml & (ml - 1) or matrix.shape[-2:] != (ml, ml):
        return None             # tl.arange needs a power of two
    B = state.shape[0]
    per_sample = matrix.dim() == 3 and matrix.shape[0] != 1
    read_mask = -1
    if per_sample and matrix.shape[0] != B:
        if B != 1:
            return None
        # one state under per-sample matrices: every sample reads it (no expanded copy)
        B, read_mask = matrix.shape[0], 2 ** n - 1
    matrix = matrix.reshape(ml, ml) if matrix.dim() == 3 and not per_sample else matrix
    dev = str(state.device)
    offs, bits = _offsets(wires, levels, n, dev)
    others = tuple(v for v in range(M) if v not in levels)
    other_offs = _offsets(wires, others, n, dev)[0] if others else offs
    x = _floats(state)
    out = torch.empty((B, 2 ** n), dtype=state.dtype, device=state.device)
    groups = B * 2 ** (n - k)
    block = _block(ml, state.dtype)
    mode = 0
    if per_sample:      # whole programs in one sample read its matrix once, not once per group
        mode = 1 if 2 ** (n - k) >= block else 2
    cmask = sum(1 << (n - 1 - c) for c in controls)
    _levels_kernel[_grid(groups, block)](x, torch.view_as_real(out), _floats(matrix), offs, other_offs, bits,
                                         groups, n - k, cmask, read_mask, K=k, ML=ml, MO=len(others),
                                         PER_SAMPLE=mode, KEEP=bool(keep_rest), CONTROLLED=bool(cmask), BLOCK=block,
                                         num_warps=_warps(ml), **_FUSE)
    return out


def permute_local(state: torch.Tensor, perm, wires, n: int):
    """``new[i] = old[perm[i]]`` in the local basis of ``wires`` (wires[0]: the local state's most
    significant bit); one pass, or None where these kernels do not apply."""
    wires = tuple(wires)
    k = len(wires)
    if k > MAX_WIRES or not usable(state):
        return None
    M = 2 ** k
    dev = str(state.device)
    dst, bits = _offsets(wires, tuple(range(M)), n, dev)
    src = _offsets(wires, tuple(int(p) for p in perm), n, dev)[0]
    out = torch.empty_like(state, memory_format=torch.contiguous_format)
    groups = state.shape[0] * 2 ** (n - k)
    block = _block(M, state.dtype)
    _permute_kernel[_grid(groups, block)](_floats(state), torch.view_as_real(out), dst, src, bits, groups,
                                          K=k, M=M, BLOCK=block, **_FUSE)
    return out


@functools.lru_cache(maxsize=512)
@lasting
def _wire_bits(wires: tuple, n: int, device_str: str):
    return torch.tensor([n - 1 - w for w in wires], dtype=torch.int64, device=device_str)


def apply_diagonal(state: torch.Tensor, diag: torch.Tensor, wires, n: int):
    """A diagonal ``(2^k,)`` shared or ``(B, 2^k)`` per sample on ``wires`` (wires[0]: the top bit
    of its index); one pass, or None where these kernels do not apply."""
    wires = tuple(wires)
    if not usable(state, diag) or len(wires) > 16:
        return None
    per_sample = diag.dim() == 2 and diag.shape[0] != 1
    B = state.shape[0]
    read_mask = -1
    if per_sample and diag.shape[0] != B:
        if B != 1:
            return None
        B, read_mask = diag.shape[0], 2 ** n - 1      # one state, read by every sample in place
    out = torch.empty((B, 2 ** n), dtype=state.dtype, device=state.device)
    total = out.numel()
    tile = _tile(state.dtype)
    _diagonal_kernel[_grid(total, tile)](
        _floats(state), torch.view_as_real(out), _floats(diag.reshape(-1) if not per_sample else diag),
        _wire_bits(wires, n, str(state.device)), total, n, read_mask, K=len(wires), PER_SAMPLE=per_sample,
        BLOCK=tile, **_FUSE)
    return out
