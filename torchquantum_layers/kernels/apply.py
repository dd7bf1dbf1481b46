"""Pure functions that apply an operator to some wires of a batched state ``(B, 2**n)``.

Kernels see only (matrix, wires): never a gate name. None of them permutes all n axes
on the common paths: a block of contiguous wires is viewed as ``(B*L, d, R)`` and hit with one
GEMM, diagonals are one broadcast multiply, permutations one gather; on the CPU a gate on up to 6
scattered wires is one pass of levels.c, on CUDA every gate on up to 5 wires one pass of a Triton
kernel (kernels/gpu.py). Only the torch fallback for scattered wires (more wires than those,
autograd recording, CUDA without Triton) moves their axes together and back.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from ..caching import lasting
from . import native, recorded
from .state import n_wires_of
from .transforms import transforms_active

# A block whose trailing part is this small is widened to a row GEMM (measured: BLAS is
# slow on many tiny (d, R) right-hand sides, fast on (rows, ≤16) @ (16, 16)).
_ROW_GEMM_MAX = 16
# MKL's complex64 row GEMM is 3-5x slower with 2 columns than with 8 (complex128: no gain)
_MIN_ROW_GEMM = {torch.complex64: 8}
# From this many amplitudes after a block on, the broadcast batched GEMM beats einsum's permutes
# (measured at n = 10..22; below it MKL's many small (d, R) products lose, 6-37x a clone).
_LONG_ROWS = 128


_gpu_kernels = recorded.gpu_kernels


def _on_gpu(kernel: str, state: torch.Tensor, *args, **kwargs):
    """``kernels.gpu.<kernel>(state, ...)`` for a CUDA state, or None where it does not apply."""
    gpu = _gpu_kernels(state)
    return None if gpu is None else getattr(gpu, kernel)(state, *args, **kwargs)


def check_wires(wires, n_wires: int, what: str = "operator") -> tuple:
    """Validate a wire tuple against n_wires; names what is at fault."""
    if isinstance(wires, int) or (isinstance(wires, torch.Tensor) and wires.dim() == 0) or \
            (hasattr(wires, "__index__") and not hasattr(wires, "__iter__")):      # NumPy integers too
        wires = (wires,)
    if not hasattr(wires, "__iter__") or isinstance(wires, (str, bytes)):
        raise TypeError(f"{what}: wires must be an int or a sequence of ints, got {wires!r}")
    wires = tuple(_as_wire(w, what) for w in wires)
    if not wires:
        raise ValueError(f"{what}: needs at least one wire")
    for w in wires:
        if w < 0 or w >= n_wires:
            raise ValueError(f"{what}: wire {w} is out of range for {n_wires} wires")
    if len(set(wires)) != len(wires):
        raise ValueError(f"{what}: repeated wires {wires}")
    return wires


def _as_wire(w, what):
    """Accept Python, NumPy and 0-d torch integers as wire labels."""
    if isinstance(w, bool) or not hasattr(w, "__index__"):
        raise TypeError(f"{what}: wire {w!r} is not an int")
    return int(w.__index__())


def _check_operand(op: torch.Tensor, state: torch.Tensor, what: str):
    if not isinstance(op, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(op).__name__}")
    if op.dtype != state.dtype or op.device != state.device:
        raise TypeError(f"{what}: operand is {op.dtype} on {op.device} but the state is "
                        f"{state.dtype} on {state.device}")


def kron(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Kronecker product of the last two axes, batched over leading axes."""
    da0, da1 = a.shape[-2:]
    db0, db1 = b.shape[-2:]
    out = a[..., :, None, :, None] * b[..., None, :, None, :]
    return out.reshape(*out.shape[:-4], da0 * db0, da1 * db1)


def reorder_matrix(matrix: torch.Tensor, perm) -> torch.Tensor:
    """Re-express a k-wire matrix acting on wires (w_0..w_{k-1}) on wires (w_perm[0], ...)."""
    k = len(perm)
    lead = matrix.shape[:-2]
    t = matrix.reshape(*lead, *([2] * (2 * k)))
    nl = len(lead)
    axes = list(range(nl)) + [nl + p for p in perm] + [nl + k + p for p in perm]
    return t.permute(axes).reshape(*lead, 2 ** k, 2 ** k)


def reorder_vector(vec: torch.Tensor, perm) -> torch.Tensor:
    k = len(perm)
    lead = vec.shape[:-1]
    t = vec.reshape(*lead, *([2] * k))
    nl = len(lead)
    return t.permute(list(range(nl)) + [nl + p for p in perm]).reshape(*lead, 2 ** k)


def _sorted(wires):
    perm = sorted(range(len(wires)), key=lambda i: wires[i])
    return tuple(wires[i] for i in perm), perm


def expand_to_span(matrix: torch.Tensor, wires) -> tuple[torch.Tensor, tuple]:
    """Widen a matrix on sorted wires to the contiguous span they cover (identity on the gaps)."""
    span = tuple(range(wires[0], wires[-1] + 1))
    gaps = [w for w in span if w not in wires]
    if not gaps:
        return matrix, span
    eye = torch.eye(2 ** len(gaps), dtype=matrix.dtype, device=matrix.device)
    wide = kron(matrix, eye)
    order = list(wires) + gaps
    perm = [order.index(w) for w in span]
    return reorder_matrix(wide, perm), span


def _broadcast_batch(state: torch.Tensor, op: torch.Tensor, op_batched: bool):
    if op_batched and op.shape[0] != state.shape[0]:
        if state.shape[0] == 1:
            state = state.expand(op.shape[0], -1)
        elif op.shape[0] != 1:
            raise ValueError(f"per-sample operator batch {op.shape[0]} does not match state batch "
                             f"{state.shape[0]}")
    return state


def apply_block(state: torch.Tensor, matrix: torch.Tensor, first: int, k: int, n: int) -> torch.Tensor:
    """Apply a (d, d) or (B, d, d) matrix to the contiguous wires first..first+k-1.

    Layouts measured on the 2-core CPU (benchmarks/kernels.py): a row GEMM ``(rows, d) @ (d, d)``
    when the block ends the register (R = 1) or can be widened to do so cheaply (d·R ≤ 16), with
    at least 8 columns in complex64; a broadcast batched GEMM for long trailing runs (R ≥ 128);
    otherwise an einsum, which torch lowers to one permuted GEMM.
    """
    if matrix.dim() == 3 and matrix.shape[0] == 1:
        matrix = matrix[0]
    if k == 1:
        fast = native.apply_2x2(state, matrix, first, n)
        if fast is not None:
            return fast
    batched = matrix.dim() == 3
    state = _broadcast_batch(state, matrix, batched)
    B = state.shape[0]
    d = 2 ** k
    L = 2 ** first
    R = 2 ** (n - first - k)
    if 1 < R and d * R <= _ROW_GEMM_MAX:
        matrix = kron(matrix, torch.eye(R, dtype=matrix.dtype, device=matrix.device))
        d, R = d * R, 1
    narrow = _MIN_ROW_GEMM.get(state.dtype, 1)
    if R == 1 and d < narrow and L >= narrow // d:
        matrix = kron(torch.eye(narrow // d, dtype=matrix.dtype, device=matrix.device), matrix)
        L, d = L * d // narrow, narrow
    if not batched:
        if R == 1:
            return (state.reshape(B * L, d) @ matrix.transpose(-1, -2)).reshape(B, -1)
        if R >= _LONG_ROWS:
            # long rows: a broadcast batched GEMM reads and writes the state once; einsum would
            # permute it to one (d, B·L·R) GEMM and back (measured 1.2–1.4 vs 2.2–2.4 clone-times)
            return torch.matmul(matrix, state.reshape(B * L, d, R)).reshape(B, -1)
        return torch.einsum("ij,njr->nir", matrix, state.reshape(B * L, d, R)).reshape(B, -1)
    if R == 1:
        return torch.bmm(state.reshape(B, L, d), matrix.transpose(1, 2)).reshape(B, -1)
    return torch.einsum("bij,bljr->blir", matrix, state.reshape(B, L, d, R)).reshape(B, -1)


def _apply_matrix_moved(state, matrix, wires, n):
    """General path for scattered wires: bring them together, one GEMM, move back."""
    batched = matrix.dim() == 3
    state = _broadcast_batch(state, matrix, batched)
    B = state.shape[0]
    k = len(wires)
    src = [w + 1 for w in wires]
    dst = list(range(n - k + 1, n + 1))
    x = state.reshape(B, *([2] * n)).movedim(src, dst).reshape(B, -1, 2 ** k)
    y = x @ matrix.transpose(-1, -2)
    return y.reshape(B, *([2] * n)).movedim(dst, src).reshape(B, -1)


# widening a scattered gate to its span costs 2**span MACs per amplitude: worth it up to here
_MAX_SPAN = 4


def _record_one_pass(state, matrix, wires, contiguous_gemm_ok=True):
    """Whether to record a gate as one node over the one-pass kernels (see kernels.recorded):
    under autograd, where they exist. On the CPU a contiguous block of 3+ wires keeps torch's
    GEMM and its GEMM gradient (BLAS beats the scalar gram there)."""
    if not recorded.records(state, matrix) or not recorded.available(state, len(wires)):
        return False
    if state.is_cuda or len(wires) <= 2 or not contiguous_gemm_ok:
        return True
    return max(wires) - min(wires) + 1 != len(wires)


def apply_matrix_unchecked(state, matrix, wires, n):
    wires = tuple(wires)
    if _record_one_pass(state, matrix, wires):
        return recorded.record(lambda s, m: apply_matrix_unchecked(s, m, wires, n), state, matrix, wires, n)
    fast = _on_gpu("apply_levels", state, matrix, wires, n)
    if fast is not None:
        return fast
    k = len(wires)
    sw, perm = _sorted(wires)
    if 2 < k <= native.LEVELS_MAX_DENSE_WIRES and sw[-1] - sw[0] + 1 != k:
        # scattered wires in one pass (the span's widened GEMM or the transpose of every axis: 16-126
        # clones at 2^20 for 3-6 wires, 2.2-13 natively), in the matrix's own wire order (no
        # reordered copy); contiguous ones keep the GEMM (MKL's blocked products beat it there:
        # 3.2-7.2 vs 2.3-7.5)
        fast = native.apply_levels(state, matrix, wires, n)
        if fast is not None:
            return fast
    if sw != wires:
        matrix = reorder_matrix(matrix, perm)
    if k == 2:
        fast = native.apply_4x4(state, matrix, sw, n)
        if fast is not None:
            return fast         # one pass on any two wires (the einsum / transposes: 5-47 clones)
    if sw[-1] - sw[0] + 1 != k:
        if sw[-1] - sw[0] + 1 <= _MAX_SPAN:
            matrix, sw = expand_to_span(matrix, sw)
            k = len(sw)
        else:
            return _apply_matrix_moved(state, matrix, sw, n)
    return apply_block(state, matrix, sw[0], k, n)


def apply_matrix(state: torch.Tensor, matrix: torch.Tensor, wires) -> torch.Tensor:
    """Apply a dense k-wire matrix, shared ``(2^k, 2^k)`` or per sample ``(B, 2^k, 2^k)``.

    ``wires`` may be in any order; ``matrix`` is written in that order (its first wire is the
    most significant bit of its row index).
    """
    n = n_wires_of(state)
    wires = check_wires(wires, n, "apply_matrix")
    d = 2 ** len(wires)
    if matrix.dim() not in (2, 3) or matrix.shape[-2:] != (d, d):
        raise ValueError(f"apply_matrix: matrix of shape {tuple(matrix.shape)} does not act on "
                         f"{len(wires)} wires (expected ({d}, {d}) or (B, {d}, {d}))")
    _check_operand(matrix, state, "apply_matrix")
    return apply_matrix_unchecked(state, matrix, wires, n)


def apply_diagonal_unchecked(state, diag, wires, n):
    wires = tuple(wires)
    if len(wires) <= recorded.MAX_DIAGONAL_WIRES and _record_one_pass(state, diag, wires, contiguous_gemm_ok=False):
        # one node: one pass each way (torch's broadcast multiply and its reduction: 6-20 clones
        # for RZ / RZZ / CP forward + backward at 2^20)
        return recorded.record(lambda s, d: apply_diagonal_unchecked(s, d, wires, n), state, diag, wires, n,
                               diagonal=True)
    fast = _on_gpu("apply_diagonal", state, diag, wires, n)
    if fast is not None:
        return fast
    sw, perm = _sorted(wires)
    if sw != wires:
        diag = reorder_vector(diag, perm)
    batched = diag.dim() == 2
    if not batched:
        # one pass in line blocks (torch's broadcast multiply on far-apart wires: 5-16 clone-times)
        fast = native.apply_diagonal(state, diag, sw, n)
        if fast is not None:
            return fast
    state = _broadcast_batch(state, diag, batched)
    B = state.shape[0]
    if sw[-1] - sw[0] + 1 == len(sw):
        d = 2 ** len(sw)
        L, R = 2 ** sw[0], 2 ** (n - sw[-1] - 1)
        shape = (diag.shape[0] if batched else 1, 1, d, 1)
        return (state.reshape(B, L, d, R) * diag.reshape(shape)).reshape(B, -1)
    shape = [diag.shape[0] if batched else 1] + [2 if i in sw else 1 for i in range(n)]
    return (state.reshape(B, *([2] * n)) * diag.reshape(shape)).reshape(B, -1)


def apply_diagonal(state: torch.Tensor, diag: torch.Tensor, wires) -> torch.Tensor:
    """Multiply by a diagonal operator given by its ``(2^k,)`` or ``(B, 2^k)`` diagonal."""
    n = n_wires_of(state)
    wires = check_wires(wires, n, "apply_diagonal")
    d = 2 ** len(wires)
    if diag.dim() not in (1, 2) or diag.shape[-1] != d:
        raise ValueError(f"apply_diagonal: diagonal of shape {tuple(diag.shape)} does not act on "
                         f"{len(wires)} wires (expected ({d},) or (B, {d}))")
    _check_operand(diag, state, "apply_diagonal")
    return apply_diagonal_unchecked(state, diag, wires, n)


# Index vectors are cached only up to this many entries each: a span or register beyond it would
# keep 2^span int64 per distinct gate placement (a 20-wire span: 16 MiB with its inverse).
_CACHED_INDEX_MAX = 2 ** 16


def _span_permutation(perm: tuple, wires: tuple, device_str: str):
    """(index, inverse index) over the span of sorted ``wires`` for a local permutation ``perm``."""
    if 2 ** (wires[-1] - wires[0] + 1) <= _CACHED_INDEX_MAX:
        return _span_permutation_cached(perm, wires, device_str)
    return _span_permutation_uncached(perm, wires, device_str)


def _span_permutation_uncached(perm: tuple, wires: tuple, device_str: str):
    span = range(wires[0], wires[-1] + 1)
    s = len(span)
    k = len(wires)
    idx = torch.arange(2 ** s)
    # bit of wire w inside the span index: position (s - 1 - (w - wires[0]))
    local = torch.zeros_like(idx)
    for j, w in enumerate(wires):
        bit = (idx >> (s - 1 - (w - wires[0]))) & 1
        local |= bit << (k - 1 - j)
    src_local = torch.tensor(perm)[local]
    src = idx.clone()
    for j, w in enumerate(wires):
        shift = s - 1 - (w - wires[0])
        src &= ~(1 << shift)
        src |= ((src_local >> (k - 1 - j)) & 1) << shift
    return src.to(device_str), torch.argsort(src).to(device_str)


_span_permutation_cached = lru_cache(maxsize=512)(lasting(_span_permutation_uncached))


# A gather along the last axis pays a fixed cost per row: rows shorter than this are merged
# (measured: 64+ amplitudes per row run at ~2.7 clone-times, 4 per row at 4-11).
_MIN_GATHER_ROW = 64


def gather_span(state: torch.Tensor, idx: torch.Tensor, lo: int, hi: int, n: int) -> torch.Tensor:
    """``new[..., i, ...] = old[..., idx[i], ...]`` on the span of wires lo..hi (one pass).

    Runs of R > 1 contiguous amplitudes go through ``index_select`` (row copies, ~1 clone);
    a span that ends the register is a ``gather`` on rows widened to at least
    ``_MIN_GATHER_ROW`` amplitudes: ``index_select`` there copies one amplitude at a time.
    """
    fast = _on_gpu("gather_span", state, idx, lo, hi, n)
    if fast is not None:
        return fast
    B = state.shape[0]
    S = idx.shape[0]
    L, R = 2 ** lo, 2 ** (n - hi - 1)
    if R == 1:
        widen = min(L, max(1, _MIN_GATHER_ROW // S))
        if widen > 1:
            idx = (torch.arange(widen, device=idx.device)[:, None] * S + idx).reshape(-1)
            lo -= widen.bit_length() - 1
    fast = native.permute(state, idx, lo, hi, n)
    if fast is not None:
        return fast
    if R > 1:
        return state.reshape(B * L, S, R).index_select(1, idx).reshape(B, -1)
    rows = state.reshape(-1, idx.shape[0])
    if rows.dtype == torch.complex64 and rows.is_contiguous() and not rows.is_conj() and not transforms_active():
        # the same 8 bytes as one float64: torch's real gather runs ~1.7x faster than its complex one
        # (not through a conjugate view: torch refuses to reinterpret one, and its bits are unconjugated)
        moved = torch.gather(rows.view(torch.float64), 1, idx.expand(rows.shape[0], -1))
        return moved.view(torch.complex64).reshape(B, -1)
    return torch.gather(rows, 1, idx.expand(rows.shape[0], -1)).reshape(B, -1)


class _GatherSpan(torch.autograd.Function):
    """A permutation of amplitudes whose backward is the inverse permutation (a gather, not the
    scatter-add torch would use for index_select / gather)."""

    @staticmethod
    def forward(ctx, state, idx, inv, lo, hi, n):
        ctx.inv, ctx.lo, ctx.hi, ctx.n = inv, lo, hi, n
        return gather_span(state, idx, lo, hi, n)

    @staticmethod
    def backward(ctx, grad):
        return gather_span(grad, ctx.inv, ctx.lo, ctx.hi, ctx.n), None, None, None, None, None


def permute_span(state, idx, inv, lo, hi, n):
    """:func:`gather_span`, differentiable through the inverse index ``inv`` when needed."""
    if state.requires_grad and torch.is_grad_enabled() and not transforms_active():
        return _GatherSpan.apply(state, idx, inv, lo, hi, n)
    return gather_span(state, idx, lo, hi, n)


def apply_permutation_unchecked(state, perm, wires, n):
    """``new[i] = old[perm[i]]`` in the local basis of ``wires``."""
    wires = tuple(wires)
    perm = tuple(int(p) for p in perm)
    fast = _on_gpu("permute_local", state, perm, wires, n)
    if fast is not None:
        return fast
    sw, order = _sorted(wires)
    if sw != wires:
        perm = tuple(reorder_vector(torch.tensor(perm), order).tolist())
        # perm values are local indices in the old wire order: relabel them too
        perm = tuple(_relabel(p, order) for p in perm)
    if 2 ** (n - 1 - sw[-1]) * state.element_size() < 128:
        # rows of the span shorter than two 64-byte lines: the native kernel moves whole lines
        # (a span gather there copies one amplitude or one short row at a time: 2.2-3.9
        # clone-times at n = 16-20 with every wire in the last line, 2.5-2.8 for CNOT(10, 19) or
        # CNOT(16, 17))
        fast = native.permute_local(state, perm, sw, n)
        if fast is not None:
            return fast
    if 2 ** (sw[-1] - sw[0] + 1) > _CACHED_INDEX_MAX:
        # far-apart wires (a long-range CNOT): an index over the whole span would be built per
        # call (2^span int64); copying the 2^k local slices is one pass with no index at all
        return _permute_local_slices(state, perm, sw, n)
    index, inverse = _span_permutation(perm, sw, str(state.device))
    return permute_span(state, index, inverse, sw[0], sw[-1], n)


def _permute_local_slices(state, perm, wires, n):
    """``new[i] = old[perm[i]]`` in the local basis of sorted ``wires``: one pass of the native
    kernel, else one strided copy per local state."""
    fast = native.permute_local(state, perm, wires, n)
    if fast is not None:
        return fast
    B = state.shape[0]
    k = len(wires)
    view = state.reshape(B, *([2] * n))
    out = torch.empty_like(view)

    def at(local):
        bits = {w: (local >> (k - 1 - j)) & 1 for j, w in enumerate(wires)}
        return (slice(None),) + tuple(bits.get(w, slice(None)) for w in range(n))
    for new, old in enumerate(perm):
        out[at(new)] = view[at(old)]
    return out.reshape(B, -1)


def _relabel(value: int, order) -> int:
    k = len(order)
    bits = [(value >> (k - 1 - j)) & 1 for j in range(k)]
    out = 0
    for i in range(k):
        out = (out << 1) | bits[order[i]]
    return out


def apply_permutation(state: torch.Tensor, perm, wires) -> torch.Tensor:
    """Permute basis states of ``wires``: the new amplitude of local index i is the old one of perm[i]."""
    n = n_wires_of(state)
    wires = check_wires(wires, n, "apply_permutation")
    d = 2 ** len(wires)
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(d)):
        raise ValueError(f"apply_permutation: {perm} is not a permutation of range({d})")
    return apply_permutation_unchecked(state, perm, wires, n)


def _level_positions(levels: tuple, wires: tuple, n: int, device_str: str) -> torch.Tensor:
    """Flat indices ``(2 * 2^(n-k),)`` of the amplitudes whose local state on ``wires`` is
    levels[0] (first half) or levels[1] (second half), in the same order within each half."""
    if 2 ** (n - len(wires) + 1) <= _CACHED_INDEX_MAX:
        return _level_positions_cached(levels, wires, n, device_str)
    return _level_positions_uncached(levels, wires, n, device_str)


def _level_positions_uncached(levels: tuple, wires: tuple, n: int, device_str: str) -> torch.Tensor:
    k = len(wires)
    rest = [w for w in range(n) if w not in wires]
    r = torch.arange(2 ** (n - k))
    base = torch.zeros_like(r)
    for j, w in enumerate(rest):
        base |= ((r >> (n - k - 1 - j)) & 1) << (n - 1 - w)
    halves = []
    for level in levels:
        offset = sum(((level >> (k - 1 - j)) & 1) << (n - 1 - w) for j, w in enumerate(wires))
        halves.append(base + offset)
    return torch.cat(halves).to(device_str)


_level_positions_cached = lru_cache(maxsize=1024)(lasting(_level_positions_uncached))


@lru_cache(maxsize=64)
@lasting
def _two_level_frame(levels, keep_rest, dtype):
    """(the 4 x 4 matrix around a two-level block, flattened: the identity on the other two levels
    when ``keep_rest`` else zero; the flat positions of the block's four entries)."""
    a, b = levels
    base = torch.zeros(16, dtype=dtype)
    if keep_rest:
        base[[5 * j for j in range(4) if j not in levels]] = 1
    return base, torch.tensor([5 * a, 4 * a + b, 4 * b + a, 5 * b])


def apply_two_level_unchecked(state, block, levels, wires, n, keep_rest=True):
    """A ``(2, 2)`` or ``(B, 2, 2)`` block acting on two local basis states of ``wires`` only.

    Givens rotations (the chemistry excitations) touch 2 of the 2^k local states: on the CPU one
    pass of levels.c's kernel (on two wires, of the 4 x 4 one), else a gather of 2^(n-k+1)
    amplitudes, one 2 x 2 product and a scatter back, instead of a dense 2^k x 2^k product.
    Every other amplitude is kept (``keep_rest``) or zeroed (a generator, which
    vanishes outside the pair).
    """
    batched = block.dim() == 3
    if _record_one_pass(state, block, wires, contiguous_gemm_ok=False):
        return recorded.record(lambda s, m: apply_two_level_unchecked(s, m, levels, wires, n, keep_rest), state,
                               block, wires, n, levels=tuple(levels))
    fast = _on_gpu("apply_levels", state, block, wires, n, levels=levels, keep_rest=keep_rest)
    if fast is not None:
        return fast
    if len(wires) != 2:
        fast = native.apply_levels(state, block, wires, n, levels=levels, keep_rest=keep_rest)
        if fast is not None:
            return fast         # one pass (the gather, product, clone and scatter: 4-15 clones)
    elif native._usable(state, block):
        # on two wires the 4 x 4 matrix in one pass beats the gather, product, clone and scatter;
        # wires in descending order swap the bits of each level instead of the matrix's axes
        if wires[0] > wires[1]:
            wires, levels = wires[::-1], tuple(((lv & 1) << 1) | (lv >> 1) for lv in levels)
        base, at = _two_level_frame(tuple(levels), keep_rest, block.dtype)
        lead = block.shape[:-2]
        full = base.expand(*lead, 16).clone().index_copy_(-1, at, block.reshape(*lead, 4))
        fast = native.apply_4x4(state, full.reshape(*lead, 4, 4), tuple(wires), n)
        if fast is not None:
            return fast     # else (dtype or batch the kernel does not take) the gather below
    state = _broadcast_batch(state, block, batched)
    B = state.shape[0]
    idx = _level_positions(tuple(levels), tuple(wires), n, str(state.device))
    pair = state.index_select(1, idx).reshape(B, 2, -1)
    mixed = torch.matmul(block, pair).reshape(B, -1)
    out = state.clone() if keep_rest else torch.zeros_like(state)
    if transforms_active():     # vmap: ``mixed`` may be batched where ``out`` is not
        return out.index_copy(1, idx, mixed)
    return out.index_copy_(1, idx, mixed)


def apply_controlled_unchecked(state, matrix, controls, targets, n):
    """Apply ``matrix`` on ``targets`` only where every control wire is 1."""
    if _record_one_pass(state, matrix, targets, contiguous_gemm_ok=False):
        return recorded.record(lambda s, m: apply_controlled_unchecked(s, m, controls, targets, n), state, matrix,
                               targets, n, controls=controls)
    fast = _on_gpu("apply_levels", state, matrix, targets, n, controls=controls)
    if fast is not None:
        return fast
    if len(targets) == 1:
        fast = native.apply_2x2(state, matrix, targets[0], n, controls)
    elif len(targets) > 2:
        # two targets keep the copy, the 4 x 4 kernel on the half and the scatter below (measured
        # 2.0-5.2 clones at 2^20-2^22 against levels.c's 1.6-6.1: its gathered positions lose
        # where a target or control is the last wire)
        fast = native.apply_levels(state, matrix, targets, n, controls=controls)
    if fast is not None:
        return fast             # one pass: the controls=0 amplitudes copied on the way
    if transforms_active():
        # out of place for vmap (a batched matrix written into an unbatched state fails): the
        # matrix on every amplitude, kept where the controls are all 1
        return torch.where(_controls_set(controls, n, state.device), apply_matrix_unchecked(state, matrix, targets, n),
                           state)
    batched = matrix.dim() == 3
    state = _broadcast_batch(state, matrix, batched)
    B = state.shape[0]
    view = state.reshape(B, *([2] * n))
    index = (slice(None),) + tuple(1 if i in controls else slice(None) for i in range(n))
    sub_wires = [i for i in range(n) if i not in controls]
    sub_targets = tuple(sub_wires.index(t) for t in targets)
    block = view[index].reshape(B, -1)
    new_block = apply_matrix_unchecked(block, matrix, sub_targets, n - len(controls))
    out = state.clone()
    out.reshape(B, *([2] * n))[index] = new_block.reshape(view[index].shape)
    return out


def _controls_set(controls, n, device):
    """(2^n,) bool: whether every control wire's bit is 1 at each basis index."""
    index = torch.arange(2 ** n, device=device)
    mask = sum(1 << (n - 1 - c) for c in controls)
    return (index & mask) == mask


def apply_controlled(state: torch.Tensor, matrix: torch.Tensor, controls, targets) -> torch.Tensor:
    """Controlled block: ``matrix`` acts on ``targets`` in the subspace where all controls are 1."""
    n = n_wires_of(state)
    controls = check_wires(controls, n, "apply_controlled")
    targets = check_wires(targets, n, "apply_controlled")
    if set(controls) & set(targets):
        raise ValueError(f"apply_controlled: wires {sorted(set(controls) & set(targets))} are both "
                         f"control and target")
    d = 2 ** len(targets)
    if matrix.dim() not in (2, 3) or matrix.shape[-2:] != (d, d):
        raise ValueError(f"apply_controlled: matrix of shape {tuple(matrix.shape)} does not act on "
                         f"{len(targets)} target wire(s) (expected ({d}, {d}) or (B, {d}, {d}))")
    _check_operand(matrix, state, "apply_controlled")
    return apply_controlled_unchecked(state, matrix, controls, targets, n)
