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


def _read_through(hams):
    """``(observables to sample, ReadoutError or None)``: observables that are the read-out values
    of others (``ReadoutError.noisy_observable``) are sampled as those others with the read bits
    flipped, which gives the mean of the noisy observable and the spread of real readout."""
    sources = [h._read_through for h in hams]
    if sources and all(src is not None for src in sources) and all(src[1] is sources[0][1] for src in sources):
        return [src[0] for src in sources], sources[0][1]
    return hams, None


def _check_shots(shots, generator, device):
    if isinstance(shots, bool) or not isinstance(shots, numbers.Integral) or shots < 1:
        raise ValueError(f"expectation: shots must be a positive int, got {shots!r}")
    if generator is not None and torch.device(generator.device).type != device.type:
        raise ValueError(f"expectation: the generator is on {generator.device} but the state is on {device}")
    return int(shots)


def grouped_shot_estimate(hams, n: int, batch: int, device, shots, generator, rotated_probabilities):
    """``(mean, standard error)``, float64 ``(batch, n_obs)``, of the observables estimated from
    ``shots`` samples per qubit-wise commuting group. ``rotated_probabilities(basis)`` gives the
    ``(batch, 2**n)`` outcome probabilities after rotating each wire of ``basis`` (``{wire:
    letter}``) to its Pauli's eigenbasis: the only part that depends on the state's form."""
    shots = _check_shots(shots, generator, device)
    hams, readout = _read_through(hams)
    B, N, n_obs = batch, 2 ** n, len(hams)
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
    chunk = max(1, 2 ** 22 // B)
    for members in qwc_groups(keys):
        basis, entries = {}, []
        for k in members:
            p = keys[k]
            for w in p.wires:
                basis[w] = p.letter(w)
            for o, c in by_key[k]:
                entries.append((o, p._x | p._z, c))   # eigenvalue (-1)^{|outcome ∧ support|}
        probs = rotated_probabilities(basis).to(torch.float64).clamp_min(0)
        if readout is not None:
            probs = readout.noisy_probabilities(probs)     # the law of the read (flipped) outcomes
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
    return mean, var.sqrt()


def _shot_estimate(state, hams, n, shots, generator):
    real = REAL_OF[state.dtype]
    state = state.detach()

    def rotated_probabilities(basis):
        psi = state
        for w, letter in sorted(basis.items()):
            if letter != "Z":
                psi = apply_matrix_unchecked(psi, _rotation(letter, state.dtype, state.device), (w,), n)
        return torch.view_as_real(psi).pow(2).sum(-1)

    mean, std = grouped_shot_estimate(hams, n, state.shape[0], state.device, shots, generator,
                                      rotated_probabilities)
    return mean.to(real), std.to(real)
