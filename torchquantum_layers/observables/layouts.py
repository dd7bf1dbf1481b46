"""Strided views of the state that pair j with j⊕x for one X mask, and the wire rotations that
turn short contiguous runs (slow in torch's CPU kernels) into long ones."""
from __future__ import annotations

import torch

from .pauli import _wires_of_mask


_BATCH_MINOR_MIN = 8
"""From this batch size on, the loop path works on the transposed state (2**n, B)."""

_MAX_SLICE_BITS = 3
"""Groups whose x has at most this many wires besides the pivot multiply strided slices
(2**bits multiplies) instead of flipping."""

_ROTATE_MIN_WIRES = 14
_ROTATION_COST = 6.0
"""With few states on n >= 14 wires, groups may use the wire order rotated by n/4, n/2 or 3n/4
(a transposed copy of the state and its conjugate, made once per call: about
``_ROTATION_COST`` clone-times). Rotations are taken greedily while the modelled saving
(:func:`_pair_cost`, from the length of the contiguous run after a group's last X wire)
exceeds that cost."""


def _pair_cost(gap: int) -> float:
    """Modelled clone-times of a group's pair products when ``gap`` wires follow its last X wire
    (measured on a 2-core CPU: runs of 1-4 amplitudes are 3-9x slower than long ones)."""
    return 1.2 + 8.0 / 2 ** gap


def _choose_rotations(xs, n: int) -> dict:
    """{x: rotation} for the batch-first loop path."""
    choice = {x: 0 for x in xs}
    if n < _ROTATE_MIN_WIRES:
        return choice
    cands = sorted({n // 4, n // 2, (3 * n) // 4} - {0})
    cost = {x: _pair_cost(_tail_gap(x, n, 0)) for x in xs}
    while cands:
        best, best_gain, best_moves = None, 0.0, []
        for r in cands:
            moves = [x for x in xs if _pair_cost(_tail_gap(x, n, r)) < cost[x]]
            gain = sum(cost[x] - _pair_cost(_tail_gap(x, n, r)) for x in moves) - _ROTATION_COST
            if gain > best_gain:
                best, best_gain, best_moves = r, gain, moves
        if best is None:
            break
        for x in best_moves:
            choice[x] = best
            cost[x] = _pair_cost(_tail_gap(x, n, best))
        cands.remove(best)
    return choice


class _Layout:
    __slots__ = ("order", "pivot", "pivot_pos", "xprime_pos", "dims")


def _tail_gap(x: int, n: int, r: int) -> int:
    """Number of non-X wires after the last X wire in the order r..n-1, 0..r-1."""
    order = list(range(r, n)) + list(range(r))
    last = max(i for i, w in enumerate(order) if (x >> w) & 1)
    return n - 1 - last


def _layout(x: int, n: int, r: int) -> _Layout:
    """Wire order r..n-1, 0..r-1; pivot = last X wire in it; axes: x' wires and free runs."""
    lay = _Layout()
    lay.order = list(range(r, n)) + list(range(r))
    pos = {w: i for i, w in enumerate(lay.order)}
    xpos = sorted(pos[w] for w in _wires_of_mask(x))
    pp = xpos[-1]
    lay.pivot, lay.pivot_pos = lay.order[pp], pp
    lay.xprime_pos = xpos[:-1]
    dims = []          # ["x", i, i] or ["f", first, last] over positions, pivot excluded
    for i in range(n):
        if i == pp:
            continue
        if i in lay.xprime_pos:
            dims.append(["x", i, i])
        elif dims and dims[-1][0] == "f" and dims[-1][2] == i - 1:
            dims[-1][2] = i
        else:
            dims.append(["f", i, i])
    lay.dims = dims
    return lay


def _group_spec(lay: _Layout, n: int, B: int, minor: bool):
    """as_strided arguments of a group for batch size B (batch first, or last when ``minor``)."""
    N, K = 2 ** n, 2 ** (n - 1)
    scale = B if minor else 1
    pp = lay.pivot_pos

    def full_st(i):          # stride of layout position i in the full state
        return scale * 2 ** (n - 1 - i)

    def half_st(i):          # ... in the pivot-0 half
        return scale * 2 ** (n - 2 - (i - 1 if i > pp else i))

    def finish(sizes, sf, sh):
        if minor:
            return tuple(sizes) + (B,), tuple(sf) + (1,), tuple(sh) + (1,)
        return (B,) + tuple(sizes), (N,) + tuple(sf), (K,) + tuple(sh)

    p_off = full_st(pp)
    nx = len(lay.xprime_pos)
    if nx <= _MAX_SLICE_BITS:
        sizes, sf, sh = [], [], []
        for kind, first, last in lay.dims:
            if kind == "f":
                sizes.append(2 ** (last - first + 1))
                sf.append(full_st(last))
                sh.append(half_st(last))
        size, st_full, st_half = finish(sizes, sf, sh)
        offsets = []
        for s in range(2 ** nx):
            bits = [(s >> (nx - 1 - j)) & 1 for j in range(nx)]
            a_off = sum(b * full_st(i) for b, i in zip(bits, lay.xprime_pos))
            b_off = sum((1 - b) * full_st(i) for b, i in zip(bits, lay.xprime_pos)) + p_off
            o_off = sum(b * half_st(i) for b, i in zip(bits, lay.xprime_pos))
            offsets.append((a_off, b_off, o_off))
        return ("slices", size, st_full, st_half, offsets)
    sizes, sf, sh, dims = [], [], [], []
    for kind, first, last in lay.dims:
        if kind == "x":
            dims.append(len(sizes) + (0 if minor else 1))
        sizes.append(2 ** (last - first + 1))
        sf.append(full_st(last))
        sh.append(half_st(last))
    size, st_full, st_half = finish(sizes, sf, sh)
    return ("flip", size, st_full, st_half, p_off, dims)


def _rotated(psi: torch.Tensor, n: int, r: int, minor: bool):
    """Flat (state, conj state) in the layout r..n-1, 0..r-1; batch innermost when ``minor``."""
    B, N = psi.shape
    if minor:
        src = psi.view(B, 2 ** r, 2 ** (n - r)).permute(2, 1, 0) if r else psi.T
    elif r:
        src = psi.view(B, 2 ** r, 2 ** (n - r)).transpose(1, 2)
    else:
        src = psi
    a = src.contiguous().view(-1)
    ac = torch.empty_like(a)
    torch.conj_physical(a, out=ac)
    return a, ac
