"""Per-X-mask diagonal tables ``D_x[j] = Σ_t c_t i^{|x∧z_t|} (-1)^{|j∧z_t|}``, built by one
small GEMM over the wires the Z masks touch (a Walsh transform), and the grouping of terms."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .pauli import _PHASES, _index_mask, _mask_of, _popcount

if TYPE_CHECKING:
    from .hamiltonian import Hamiltonian


def _parity_signs(k: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """(-1)^{popcount(k & m)} as float64, shape (len(k), len(masks))."""
    v = k[:, None] & masks[None, :]
    for s in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> s)
    return 1.0 - 2.0 * (v & 1).to(torch.float64)


def _walsh(coeffs: torch.Tensor, zloc, nbits: int, device) -> torch.Tensor:
    """T[o, k] = Σ_t coeffs[t, o] (-1)^{popcount(k & zloc[t])} for k < 2**nbits (complex128).

    One GEMM through a split of k into high and low bits: cost 2**nbits × terms.
    """
    coeffs = coeffs.to(device=device, dtype=torch.complex128)
    n_obs = coeffs.shape[1]
    if nbits == 0 or len(zloc) == 0:
        return coeffs.sum(0)[:, None].expand(n_obs, 2 ** nbits).clone()
    a = nbits // 2
    b = nbits - a
    z = torch.tensor(zloc, dtype=torch.int64, device=device)
    ah = _parity_signs(torch.arange(2 ** a, device=device), z >> b)             # (2^a, T)
    al = _parity_signs(torch.arange(2 ** b, device=device), z & ((1 << b) - 1))  # (2^b, T)
    parts = []
    for part in (coeffs.real, coeffs.imag):
        # (o, 2^a, T) @ (T, 2^b) -> (o, 2^a, 2^b)
        parts.append(((ah[None, :, :] * part.T[:, None, :]) @ al.T).reshape(n_obs, -1))
    return torch.complex(parts[0], parts[1])



def _local(mask: int, support) -> int:
    """Wire mask -> bits over ``support`` (support[0] = most significant)."""
    s = len(support)
    out = 0
    for i, w in enumerate(support):
        if (mask >> w) & 1:
            out |= 1 << (s - 1 - i)
    return out


def _table(entries, n_obs: int, target_wires, device, sign_mask: int = 0) -> torch.Tensor:
    """Table over ``target_wires`` (ordered, first = most significant bit), per observable:
    ``T[o, k] = Σ_t c_t (-1)^{|z_t ∧ sign_mask|} (-1)^{|k ∧ z_t|}``, complex128 (n_obs, 2**len).

    ``entries``: (obs_index, z_mask, c) with c already carrying the i^{#Y} phase. Z bits on
    wires outside ``target_wires`` are ignored (they are 0 on the slice the table is for).
    """
    target = list(target_wires)
    keep = _mask_of(target)
    support_mask = 0
    for _, z, _ in entries:
        support_mask |= z & keep
    support = [w for w in target if (support_mask >> w) & 1]
    coeffs = torch.zeros(len(entries), n_obs, dtype=torch.complex128)
    zloc = []
    for t, (o, z, c) in enumerate(entries):
        coeffs[t, o] += -c if _popcount(z & sign_mask) % 2 else c
        zloc.append(_local(z & keep, support))
    compact = _walsh(coeffs, zloc, len(support), device)          # (n_obs, 2^|S|)
    if len(support) == len(target):
        return compact
    sset = set(support)
    shape = [n_obs] + [2 if w in sset else 1 for w in target]
    return compact.reshape(shape).expand([n_obs] + [2] * len(target)).contiguous().view(n_obs, -1)


def _segments(n: int, kind_of):
    """Axes of a view of the state: runs of consecutive wires of one kind merge ('p' never)."""
    shape, kinds = [], []
    for w in range(n):
        k = kind_of(w)
        if kinds and kinds[-1] == k and k != "p":
            shape[-1] *= 2
        else:
            shape.append(2)
            kinds.append(k)
    return shape, kinds


def _groups_of(h: "Hamiltonian", obs: int = 0, hermitian: bool = False):
    """Split merged terms: diagonal entries (obs, z, c) and {x: [(obs, z, c i^{#Y})]}."""
    diag, groups = [], {}
    for (x, z), c in h._term_dict().items():
        if c == 0:
            continue
        c = complex(c).real if hermitian else complex(c)
        if x == 0:
            diag.append((obs, z, c))
        else:
            groups.setdefault(x, []).append((obs, z, c * _PHASES[_popcount(x & z) % 4]))
    return diag, groups


def _sparse_entries(h: Hamiltonian, n: int, device):
    """COO entries of H on n wires: row j⊕x, column j, value D_x[j]."""
    diag, groups = _groups_of(h)
    if diag:
        groups = {0: diag, **groups}
    if not groups:
        return None, None, None
    idx = torch.arange(2 ** n, device=device)
    rows, cols, vals = [], [], []
    for x, entries in groups.items():
        rows.append(idx ^ _index_mask(x, n))
        cols.append(idx)
        vals.append(_table(entries, 1, range(n), device)[0])
    return torch.cat(rows), torch.cat(cols), torch.cat(vals)
