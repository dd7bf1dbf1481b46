"""Shot-based estimates of ⟨O⟩: qubit-wise commuting groups measured in a rotated basis."""
from __future__ import annotations

import math
import numbers

import torch

from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import REAL_OF
from .pauli import PauliString
from .tables import _table

# shots
_INV_SQRT2 = 1 / math.sqrt(2)


def _rotation(letter: str, dtype, device) -> torch.Tensor:
    """U with U P U† = Z: the Hadamard for X, H S† for Y."""
    if letter == "X":
        m = [[_INV_SQRT2, _INV_SQRT2], [_INV_SQRT2, -_INV_SQRT2]]
    else:
        m = [[_INV_SQRT2, -1j * _INV_SQRT2], [_INV_SQRT2, 1j * _INV_SQRT2]]
    return torch.tensor(m, dtype=dtype, device=device)


def qwc_groups(paulis) -> list:
    """Greedy partition of PauliStrings into qubit-wise commuting groups (heaviest first):
    a list of lists of indices into ``paulis``."""
    order = sorted(range(len(paulis)), key=lambda i: -paulis[i].weight)
    groups = []   # [x, z, support, indices]
    for i in order:
        p = paulis[i]
        s = p._x | p._z
        for g in groups:
            both = g[2] & s
            if (g[0] & both) == (p._x & both) and (g[1] & both) == (p._z & both):
                g[0] |= p._x
                g[1] |= p._z
                g[2] |= s
                g[3].append(i)
                break
        else:
            groups.append([p._x, p._z, s, [i]])
    return [g[3] for g in groups]


def _shot_estimate(state, hams, n, shots, generator):
    if isinstance(shots, bool) or not isinstance(shots, numbers.Integral) or shots < 1:
        raise ValueError(f"expectation: shots must be a positive int, got {shots!r}")
    shots = int(shots)
    if generator is not None and torch.device(generator.device).type != state.device.type:
        raise ValueError(f"expectation: the generator is on {generator.device} but the state is on "
                         f"{state.device}")
    B, N = state.shape
    n_obs = len(hams)
    device = state.device
    real = REAL_OF[state.dtype]
    mean = torch.zeros(B, n_obs, dtype=torch.float64, device=device)
    var = torch.zeros(B, n_obs, dtype=torch.float64, device=device)
    keys, where, by_key = [], {}, {}
    const = [0.0] * n_obs
    for o, h in enumerate(hams):
        for (x, z), c in h._term_dict().items():
            c = complex(c).real
            if c == 0:
                continue
            if x == 0 and z == 0:
                const[o] += c
                continue
            if (x, z) not in where:
                where[(x, z)] = len(keys)
                keys.append(PauliString.from_masks(x, z))
            by_key.setdefault(where[(x, z)], []).append((o, c))
    mean += torch.tensor(const, dtype=torch.float64, device=device)
    state = state.detach()
    chunk = max(1, 2 ** 22 // B)
    for members in qwc_groups(keys):
        basis, entries = {}, []
        for k in members:
            p = keys[k]
            for w in p.wires:
                basis[w] = p.letter(w)
            for o, c in by_key[k]:
                entries.append((o, p._x | p._z, c))   # eigenvalue (-1)^{|outcome ∧ support|}
        psi = state
        for w, letter in sorted(basis.items()):
            if letter != "Z":
                psi = apply_matrix_unchecked(psi, _rotation(letter, state.dtype, device), (w,), n)
        probs = torch.view_as_real(psi).pow(2).sum(-1).to(torch.float64)
        table = _table(entries, n_obs, range(n), device).real              # (n_obs, N)
        counts = torch.zeros(B, N, dtype=torch.float64, device=device)
        done = 0
        while done < shots:
            m = min(chunk, shots - done)
            samples = torch.multinomial(probs, m, replacement=True, generator=generator)
            counts.scatter_add_(1, samples, torch.ones(B, m, dtype=torch.float64, device=device))
            done += m
        g_mean = counts @ table.T / shots
        g_m2 = counts @ (table * table).T / shots
        mean += g_mean
        # variance of the group's sample mean: unbiased sample variance / shots
        var += (g_m2 - g_mean * g_mean).clamp_min(0) / (shots - 1) if shots > 1 else float("inf")
    return mean.to(real), var.sqrt().to(real)
