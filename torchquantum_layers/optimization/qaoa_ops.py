"""Small tensor builders QAOA's layers use: mixer blocks (⊗RX, XY, SWAP, their generators, the
real RY blocks of the S-conjugated frame), the cost diagonal's level table, and batched dots."""
from __future__ import annotations

import math

import torch

from ..caching import lasting
from ..kernels.apply import kron


# The diagonal is stored as a table of distinct values when it has at most this many (and at most
# a quarter of 2^n): the phase of a cost layer is then one gather from a (batch, levels) table.
_MAX_LEVELS = 2 ** 16

def _rx2(beta: torch.Tensor, cdtype) -> torch.Tensor:
    """RX(2β) = exp(-iβX): (B, 2, 2)."""
    c = torch.cos(beta).to(cdtype)
    ms = (torch.sin(beta) * -1j).to(cdtype)
    return torch.stack([c, ms, ms, c], dim=-1).unflatten(-1, (2, 2))


def _kron_power(m: torch.Tensor, k: int) -> torch.Tensor:
    out = m
    for _ in range(k - 1):
        out = kron(out, m)
    return out


def _pair_rotation(beta: torch.Tensor, cdtype, d: int, a: int, b: int) -> torch.Tensor:
    """exp(-iβ (|a⟩⟨b| + |b⟩⟨a|)) on a d-dim space: (B, d, d)."""
    B = beta.shape[0]
    c = torch.cos(beta).to(cdtype)
    ms = (-1j * torch.sin(beta)).to(cdtype)
    eye = torch.eye(d, dtype=cdtype, device=beta.device).expand(B, d, d)
    e = torch.zeros(d, d, dtype=cdtype, device=beta.device)
    diag = e.clone()
    diag[a, a] = diag[b, b] = 1
    off = e.clone()
    off[a, b] = off[b, a] = 1
    return eye + (c - 1)[:, None, None] * diag + ms[:, None, None] * off


def _xy_matrix(beta, cdtype):
    """exp(-iβ (XX + YY)/2) on two wires: rotates |01⟩ ↔ |10⟩."""
    return _pair_rotation(beta, cdtype, 4, 1, 2)


def _swap_matrix(beta, cdtype):
    """On wires (u@t, u@t', v@t, v@t'): rotates |1001⟩ ↔ |0110⟩."""
    return _pair_rotation(beta, cdtype, 16, 0b1001, 0b0110)


def _generator(kind: str, k: int) -> torch.Tensor:
    """Hermitian generator G with U(β) = exp(-iβ G), complex128 (d, d)."""
    if kind == "x":
        d = 2 ** k
        G = torch.zeros(d, d, dtype=torch.complex128)
        i = torch.arange(d)
        for q in range(k):
            G[i, i ^ (1 << q)] = 1
        return G
    d, (a, b) = {"xy": (4, (1, 2)), "swap": (16, (0b1001, 0b0110))}[kind]
    G = torch.zeros(d, d, dtype=torch.complex128)
    G[a, b] = G[b, a] = 1
    return G


def _real_blocks(m: int, block_wires: int):
    """GEMM blocks of the real-plane register ``[w_1 … w_m, c]`` (``c`` = the re/im axis of the
    complex storage, last): ``[(axes, has_c), …]``. The last block takes ``c`` along, so that after
    the blocks have rotated through the register the planes are interleaved again and the cost
    layer stays one complex multiply."""
    a = m + 1
    # widths block_wires or block_wires + 1 rather than narrower: real sgemm on 8-wide blocks runs at
    # a quarter of the rate of 16- and 32-wide ones (measured, (16, 2^20) reals: 33 / 15 / 25 ms)
    q = max(1, a // block_wires)
    if a > q * (block_wires + 1):
        q = math.ceil(a / (block_wires + 1))
    sizes = [a // q + (1 if i < a % q else 0) for i in range(q)]
    return [(k, i == q - 1) for i, k in enumerate(sizes)]


def _ry2(beta: torch.Tensor, rdtype) -> torch.Tensor:
    """S RX(2β) S† = RY(2β) = [[cos β, -sin β], [sin β, cos β]]: (B, 2, 2) real."""
    c, s = torch.cos(beta).to(rdtype), torch.sin(beta).to(rdtype)
    return torch.stack([c, -s, s, c], dim=-1).unflatten(-1, (2, 2))


def _real_block_matrix(r: torch.Tensor, k: int, has_c: bool) -> torch.Tensor:
    """RY^{⊗(k - has_c)} (⊗ I_2 on the re/im axis): (B, 2^k, 2^k) real."""
    w = k - int(has_c)
    M = _kron_power(r, w) if w else torch.ones(r.shape[0], 1, 1, dtype=r.dtype, device=r.device)
    if has_c:
        M = kron(M, torch.eye(2, dtype=r.dtype, device=r.device))
    return M


_RYIDX_CACHE: dict = {}


@lasting
def _ry_block_index(k: int, has_c: bool, transpose: bool, device) -> torch.Tensor:
    """Where each entry of RY(2β)^{⊗w} (⊗ I_2 when ``has_c``; w = k - has_c), or of its transpose,
    sits in the table ``[v_0 … v_w, -v_0 … -v_w, 0]`` with ``v_h = cos^(w-h) β sin^h β``:
    entry (i, j) is ``±v_h``, h = popcount(i ^ j), minus for an odd count of bits with i = 0, j = 1
    (RY = [[c, -s], [s, c]]), 0 where the re/im bits differ: (2^k · 2^k,) int64. One gather from
    that (layers, rows, 2w + 3) table builds every layer's block at once (the Kronecker powers cost
    about 5 small ops per wire per layer)."""
    key = (k, has_c, transpose, str(device))
    idx = _RYIDX_CACHE.get(key)
    if idx is None:
        w = k - int(has_c)
        d = 2 ** w
        i = torch.arange(d).view(d, 1)
        j = torch.arange(d).view(1, d)
        if transpose:
            i, j = j, i
        h = _popcount_of(i ^ j)
        neg = _popcount_of(~i & j & (d - 1)) % 2
        idx = h + (w + 1) * neg
        if has_c:
            zero = 2 * (w + 1)
            full = torch.full((d, 2, d, 2), zero, dtype=torch.int64)
            full[:, 0, :, 0] = idx
            full[:, 1, :, 1] = idx
            idx = full.view(2 * d, 2 * d)
        idx = idx.reshape(-1).to(device)
        _RYIDX_CACHE[key] = idx
    return idx


def _popcount_of(x: torch.Tensor) -> torch.Tensor:
    pc = torch.zeros_like(x)
    for q in range(max(1, int(x.max()).bit_length())):
        pc += (x >> q) & 1
    return pc


def _ry_block_matrices(cos: torch.Tensor, sin: torch.Tensor, blocks, transpose: bool, reps: int = 1) -> dict:
    """{(axes, has_c): (L, reps, B, d, d)} blocks of :func:`_real_block_matrix` (transposed when
    ``transpose``) for every layer at once, from ``cos``/``sin`` (L, B) real: the powers
    ``cos^a sin^b`` by one cumulative product, the tables ``[v, -v]`` of every block width side by
    side, and ONE gather for all blocks (each op costs microseconds of overhead, which is the whole
    time of one start on a small register)."""
    L, B = cos.shape
    keys = list(dict.fromkeys(blocks))
    widths = sorted({k - int(has_c) for k, has_c in keys})
    wmax = widths[-1]
    cs = torch.stack([cos, sin]).unsqueeze(-1)                                           # (2, L, B, 1)
    pw = torch.cat([torch.ones_like(cs), cs.expand(2, L, B, wmax)], -1).cumprod(-1)   # cos^a, sin^a
    cpow, spow = pw[0], pw[1]
    parts = []
    for w in widths:                  # the layout of _blocks_index: per width [v, -v], then the zero
        v = cpow[..., :w + 1].flip(-1) * spow[..., :w + 1]                            # v_h, h = 0 … w
        parts += [v, -v]
    parts.append(torch.zeros(L, B, 1, dtype=cos.dtype, device=cos.device))          # the zero entry
    tab = torch.cat(parts, -1)
    if reps > 1:
        tab = tab.unsqueeze(1).expand(L, reps, B, tab.shape[-1])
    tab = tab.reshape(L * reps * B, tab.shape[-1])             # index_select is slow on 4-d views
    cat_idx, sizes = _blocks_index(tuple(keys), transpose, cos.device)
    flat = tab.index_select(1, cat_idx)
    out = {}
    for key, part in zip(keys, flat.split(sizes, 1)):
        d = 2 ** key[0]
        out[key] = part.view(L, reps, B, d, d)       # rows of the gathered table: no copy
    return out


_BLOCKS_INDEX_CACHE: dict = {}


@lasting
def _blocks_index(keys, transpose: bool, device):
    """The gather index of :func:`_ry_block_matrices` for the blocks ``keys``, and their sizes:
    each block's :func:`_ry_block_index` moved into the side-by-side table (its width's
    ``[v, -v]`` at that width's offset, the shared zero last), concatenated; cached."""
    ck = (keys, transpose, str(device))
    hit = _BLOCKS_INDEX_CACHE.get(ck)
    if hit is None:
        widths = sorted({k - int(has_c) for k, has_c in keys})
        offset, pos = {}, 0
        for w in widths:
            offset[w] = pos
            pos += 2 * (w + 1)
        parts = []
        for k, has_c in keys:
            w = k - int(has_c)
            i = _ry_block_index(k, has_c, transpose, device)
            parts.append(torch.where(i == 2 * (w + 1), torch.full_like(i, pos), i + offset[w]))
        hit = (torch.cat(parts), [t.numel() for t in parts])
        _BLOCKS_INDEX_CACHE[ck] = hit
    return hit


_RGEN_CACHE: dict = {}


@lasting
def _real_block_generator(k: int, has_c: bool, dtype, device) -> torch.Tensor:
    """K = Σ_w J_w (⊗ I_2), J = [[0, -1], [1, 0]] = d RY(2β)/dβ at β = 0: (2^k, 2^k) real."""
    key = (k, has_c, dtype, str(device))
    K = _RGEN_CACHE.get(key)
    if K is None:
        w = k - int(has_c)
        d = 2 ** w
        K = torch.zeros(d, d, dtype=torch.float64)
        j = torch.arange(d)
        for q in range(w):
            bit = 1 << q
            up = (j & bit) == 0
            K[(j | bit)[up], j[up]] = 1.0
            K[(j & ~bit)[~up], j[~up]] = -1.0
        if has_c:
            K = kron(K, torch.eye(2, dtype=torch.float64))
        K = K.to(device=device, dtype=dtype)
        _RGEN_CACHE[key] = K
    return K


def _i_power(k: torch.Tensor) -> torch.Tensor:
    """i^k elementwise for integer k: complex128."""
    table = torch.tensor([1, 1j, -1, -1j], dtype=torch.complex128)
    return table[k % 4]


def _popcount(N: int) -> torch.Tensor:
    j = torch.arange(N)
    pc = torch.zeros(N, dtype=torch.int64)
    for q in range(max(1, (N - 1).bit_length())):
        pc += (j >> q) & 1
    return pc


def _level_table(diags: torch.Tensor):
    """(levels (K,) float64, index (G, N) int64) when the costs take few distinct values, else
    (None, None). Integer costs are binned in O(N) (levels = min … max); other costs are sorted
    only up to 2^22 entries."""
    N = diags.shape[-1]
    cap = min(_MAX_LEVELS, max(16, N // 4))
    lo, hi = float(diags.min()), float(diags.max())
    if bool(torch.equal(diags, diags.round())) and hi - lo + 1 <= cap:
        levels = torch.arange(lo, hi + 1, dtype=torch.float64)
        return levels, (diags - lo).to(torch.int64)
    if diags.numel() <= 2 ** 22:
        vals, inv = torch.unique(diags, return_inverse=True)
        if vals.numel() <= cap:
            return vals, inv.reshape(diags.shape)
    return None, None


def _flip_symmetric(t: torch.Tensor) -> bool:
    """Whether every row satisfies t[j] == t[2^n - 1 - j] (invariance under flipping all bits)."""
    scale = max(1.0, float(t.abs().max()))
    return bool(((t - t.flip(-1)).abs() <= 1e-12 * scale).all())


def _im_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Im Σ_j conj(a_bj) b_bj per row from one (2 × N)(N × 2) real product: (B,)."""
    B, N = a.shape
    R = torch.bmm(torch.view_as_real(a).transpose(1, 2), torch.view_as_real(b))     # (B, 2, 2)
    return R[:, 0, 1] - R[:, 1, 0]


def _re_dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Re Σ_j conj(a_bj) b_bj per row, without temporaries: (B,) real."""
    B, N = a.shape
    ar = torch.view_as_real(a).reshape(B, 1, 2 * N)
    br = torch.view_as_real(b).reshape(B, 2 * N, 1)
    return torch.bmm(ar, br).view(B)




@lasting
def _generator_real(k: int, device) -> torch.Tensor:
    key = (k, str(device))
    g = _GEN_CACHE.get(key)
    if g is None:
        g = _generator("x", k).real.to(device=device, dtype=torch.float32)
        _GEN_CACHE[key] = g
    return g


_GEN_CACHE: dict = {}
