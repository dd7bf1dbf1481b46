"""Read-out of an :class:`~.state.MPS`: Pauli expectations, marginals, sampling.

All use the mixed canonical form: sites left of the centre are left-orthonormal and those right
of it right-orthonormal, so a quantity supported on wires ``a … b`` only contracts the sites
between ``min(a, centre)`` and ``max(b, centre)``. The identity environments from the centre
outwards are computed once and shared by every Pauli term of every observable.
"""
from __future__ import annotations

import torch

from ..kernels.apply import check_wires
from .state import MPS, _transfer

_PAULI = {"X": ((0, 1), (1, 0)), "Y": ((0, -1j), (1j, 0)), "Z": ((1, 0), (0, -1))}
MAX_MARGINAL_WIRES = 20


def _transfer_right(env, bra, ket):
    """``env'[l, l'] = Σ conj(bra[l, s, r]) env[r, r'] ket[l', s, r']``; ``env`` None is the identity."""
    b, l, _, r = ket.shape
    k = ket.reshape(b, l, 2 * r) if env is None else \
        (ket.reshape(b, 2 * l, r) @ env.transpose(-1, -2)).reshape(b, l, 2 * r)
    return bra.reshape(b, bra.shape[1], 2 * r).conj() @ k.transpose(-1, -2)


def _trace(env, batch, dtype, device):
    if env is None:
        return torch.ones(batch, dtype=dtype, device=device)
    return env.diagonal(dim1=-2, dim2=-1).sum(-1)


class _Environments:
    """Lazy identity environments around the centre: ``left[k]`` contracts sites c … k−1,
    ``right[k]`` sites k+1 … c (None: the identity)."""

    def __init__(self, mps: MPS):
        self.mps = mps
        c = mps.center
        self.left = {c: None}
        self.right = {c: None}
        self.paulis = {}

    def pauli(self, letter):
        if letter not in self.paulis:
            self.paulis[letter] = torch.tensor(_PAULI[letter], dtype=self.mps.dtype, device=self.mps.device)
        return self.paulis[letter]

    def left_of(self, k):
        top = max(self.left)
        while top < k:
            a = self.mps.sites[top]
            self.left[top + 1] = _transfer(self.left[top], a, a)
            top += 1
        return self.left[k]

    def right_of(self, k):
        low = min(self.right)
        while low > k:
            a = self.mps.sites[low]
            self.right[low - 1] = _transfer_right(self.right[low], a, a)
            low -= 1
        return self.right[k]

    def value(self, pauli) -> torch.Tensor:
        """``⟨ψ|P|ψ⟩`` ``(B,)`` (complex; real up to rounding for a Hermitian P)."""
        mps, c = self.mps, self.mps.center
        ops = pauli.ops
        if not ops:
            return _trace(None, mps.batch, mps.dtype, mps.device)

        def ket(i):
            a = mps.sites[i]
            if i not in ops:
                return a
            return torch.matmul(self.pauli(ops[i]), a)             # (2, 2) @ (B, l, 2, r)
        a, b = min(ops), max(ops)
        if b < c:
            env = self.right_of(b)
            for i in range(b, a - 1, -1):
                env = _transfer_right(env, mps.sites[i], ket(i))
        else:
            env = None if a <= c else self.left_of(a)       # a ≤ c ≤ b, or the term right of c
            for i in range(a, b + 1):
                env = _transfer(env, mps.sites[i], ket(i))
        return _trace(env, mps.batch, mps.dtype, mps.device)


def expval_mps(mps: MPS, observables) -> torch.Tensor:
    """Expectations of PauliStrings / Hamiltonians / strings: ``(B,)`` for one, ``(B, n_obs)`` for a list."""
    from ..grad import _observable_list
    from ..observables import PauliString
    obs, single = _observable_list(observables)
    for o in obs:
        if o.n_wires > mps.n_wires:
            raise ValueError(f"mps.expval: observable {o} acts on wire {max(o.wires)} but the state has "
                             f"{mps.n_wires} wires")
    envs = _Environments(mps)
    cache = {}

    def term(p):
        key = (p.x_mask, p.z_mask)
        if key not in cache:
            cache[key] = envs.value(p).real
        return cache[key]
    columns = []
    for o in obs:
        if isinstance(o, PauliString):
            columns.append(term(o))
            continue
        total = None
        for coeff, p in o.terms:
            if complex(coeff).imag != 0:
                raise ValueError(f"mps.expval: observable {o} has a complex coefficient {coeff}; the MPS "
                                 f"simulator takes Hermitian observables (real coefficients)")
            v = float(complex(coeff).real) * term(p)
            total = v if total is None else total + v
        if total is None:
            total = torch.zeros(mps.batch, dtype=mps.sites[0].real.dtype, device=mps.device)
        columns.append(total)
    values = torch.stack(columns, -1)
    return values[..., 0] if single else values


def probabilities(mps: MPS, wires) -> torch.Tensor:
    """Marginal outcome probabilities ``(B, 2**m)`` of ``wires`` (first given wire most significant)."""
    wires = check_wires(wires, mps.n_wires, "MPS.probabilities")
    if len(wires) > MAX_MARGINAL_WIRES:
        raise ValueError(f"MPS.probabilities: {len(wires)} wires give 2**{len(wires)} outcomes; limit is "
                         f"{MAX_MARGINAL_WIRES}")
    ws = sorted(wires)
    c = mps.center
    lo, hi = min(ws[0], c), max(ws[-1], c)
    l = mps.sites[lo].shape[1]
    env = torch.eye(l, dtype=mps.dtype, device=mps.device).expand(mps.batch, 1, l, l)
    chosen = set(ws)
    for i in range(lo, hi + 1):
        a = mps.sites[i]
        if i in chosen:
            env = torch.einsum("blsr,bklm,bmsq->bksrq", a.conj(), env, a)
            env = env.reshape(env.shape[0], -1, *env.shape[-2:])
        else:
            env = torch.einsum("blsr,bklm,bmsq->bkrq", a.conj(), env, a)
    probs = env.diagonal(dim1=-2, dim2=-1).sum(-1).real.clamp_min(0)
    m = len(ws)
    order = [ws.index(w) for w in wires]
    probs = probs.reshape(mps.batch, *([2] * m)).permute(0, *[1 + j for j in order])
    return probs.reshape(mps.batch, 2 ** m)


def sample(mps: MPS, shots: int, generator=None) -> torch.Tensor:
    """``(B, shots, n)`` int64 bits, wire 0 first: each site's outcome drawn from its conditional
    probability given the outcomes left of it (exact for the MPS; no autograd)."""
    if isinstance(shots, bool) or not isinstance(shots, int) or shots < 1:
        raise ValueError(f"MPS.sample: shots must be a positive int, got {shots!r}")
    with torch.no_grad():
        work = MPS(list(mps.sites), mps.center, mps.discarded, mps.max_bond, 0.0)
        work.move_center(0)
        b = work.batch
        real = work.sites[0].real.dtype
        vec = torch.ones(b, shots, 1, dtype=work.dtype, device=work.device)
        out = torch.empty(b, shots, work.n_wires, dtype=torch.long, device=work.device)
        gen_device = generator.device if generator is not None else work.device
        for i, a in enumerate(work.sites):
            w = torch.einsum("bsl,blxr->bsxr", vec, a)
            p = (w.abs() ** 2).sum(-1)
            p0 = p[..., 0] / p.sum(-1).clamp_min(torch.finfo(real).tiny)
            u = torch.rand(b, shots, generator=generator, device=gen_device, dtype=real).to(work.device)
            bit = (u >= p0).long()
            out[..., i] = bit
            w = torch.gather(w, 2, bit[..., None, None].expand(b, shots, 1, w.shape[-1]))[:, :, 0]
            vec = w / torch.linalg.vector_norm(w, dim=-1, keepdim=True).clamp_min(torch.finfo(real).tiny)
        return out


def _check_mps_shots(shots, generator, device, what):
    import numbers
    if isinstance(shots, bool) or not isinstance(shots, numbers.Integral) or shots < 1:
        raise ValueError(f"{what}: shots must be a positive int, got {shots!r}")
    if generator is not None and torch.device(generator.device).type != torch.device(device).type:
        raise ValueError(f"{what}: the generator is on {generator.device} but the state is on {device}")
    return int(shots)


def shot_expval_mps(mps: MPS, observables, shots: int, generator=None, return_std: bool = False,
                    what: str = "mps.expval"):
    """Shot estimates of Pauli expectations on an MPS, with the estimator of ``tql.expval(...,
    shots=N)``: the distinct non-identity Pauli terms of all observables are split into
    qubit-wise commuting groups (:func:`~torchquantum_layers.observables.shots.qwc_groups`); each
    group is measured with ``shots`` samples, drawn by :func:`sample` from a copy of the MPS whose
    measured wires are rotated to the Z basis (one-qubit gates: no truncation); each term is
    the mean of its parity ``(-1)^{Σ bits on its support}`` weighted by its coefficient; identity
    terms are exact. Returns the mean ``(B,)`` / ``(B, n_obs)`` in the state's real dtype, and
    with ``return_std`` also the standard error (Σ over groups of the unbiased sample variance /
    shots, square-rooted; inf for ``shots=1``). No gradient: like ``tql.expval(state, obs,
    shots=N)``, the estimate is computed from the detached state."""
    from ..grad import _observable_list
    from ..observables import PauliString
    from ..observables.shots import _rotation, qwc_groups
    shots = _check_mps_shots(shots, generator, mps.device, what)
    obs, single = _observable_list(observables)
    for o in obs:
        if o.n_wires > mps.n_wires:
            raise ValueError(f"{what}: observable {o} acts on wire {max(o.wires)} but the state has "
                             f"{mps.n_wires} wires")
    real = mps.sites[0].real.dtype
    B, n_obs, device = mps.batch, len(obs), mps.device
    keys, where, by_key = [], {}, {}
    const = [0.0] * n_obs
    for j, o in enumerate(obs):
        terms = [(1.0, o)] if isinstance(o, PauliString) else o.terms
        for coeff, p in terms:
            if complex(coeff).imag != 0:
                raise ValueError(f"{what}: observable {o} has a complex coefficient {coeff}; the MPS "
                                 f"simulator takes Hermitian observables (real coefficients)")
            c = float(complex(coeff).real)
            if c == 0:
                continue
            if not p.ops:
                const[j] += c
                continue
            key = (p.x_mask, p.z_mask)
            if key not in where:
                where[key] = len(keys)
                keys.append(p)
            by_key.setdefault(where[key], []).append((j, c))
    mean = torch.tensor(const, dtype=torch.float64, device=device).expand(B, n_obs).clone()
    var = torch.zeros(B, n_obs, dtype=torch.float64, device=device)
    with torch.no_grad():
        base = [a.detach() for a in mps.sites]
        for members in qwc_groups(keys):
            basis = {}
            for k in members:
                for w, letter in keys[k].ops.items():
                    basis[w] = letter
            work = MPS(list(base), mps.center, mps.discarded, mps.max_bond, 0.0)
            for w, letter in sorted(basis.items()):
                if letter != "Z":
                    work.apply_one(_rotation(letter, mps.dtype, device), w)
            bits = sample(work, shots, generator)                       # (B, shots, n)
            values = torch.zeros(B, shots, n_obs, dtype=torch.float64, device=device)
            for k in members:
                wires = sorted(keys[k].ops)
                sign = 1.0 - 2.0 * (bits[..., wires].sum(-1) % 2).to(torch.float64)   # (B, shots)
                for j, c in by_key[k]:
                    values[..., j] += c * sign
            g_mean = values.mean(1)
            mean += g_mean
            if shots > 1:
                g_m2 = (values * values).mean(1)
                var += (g_m2 - g_mean * g_mean).clamp_min(0) / (shots - 1)
            else:
                var += float("inf")
    mean, std = mean.to(real), var.sqrt().to(real)
    if single:
        mean, std = mean[:, 0], std[:, 0]
    return (mean, std) if return_std else mean
