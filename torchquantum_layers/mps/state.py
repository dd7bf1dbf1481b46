"""``MPS``: a batch of matrix-product states and the site operations gates need.

Site ``i`` holds a tensor ``(B, χ_l, 2, χ_r)`` (batch first; the outer bonds have χ = 1); wire 0
is the first site, so a dense index reads the sites' physical indices most significant first
(the library's convention). The state is kept in mixed canonical form around ``center``: sites
left of it are left-orthonormal, sites right of it right-orthonormal, so every SVD on a bond
next to the centre sees the true Schmidt values and truncates optimally. All factorisations go
through :func:`.linalg.split` (differentiable; global phase kept exactly). Contractions are
batched ``matmul`` on reshaped views (no einsum: its dispatch dominated at these small shapes).
"""
from __future__ import annotations

import torch

from .linalg import _split

MAX_DENSE_WIRES = 20
"""``to_dense`` refuses more wires than this (2**20 amplitudes per sample)."""


class MPS:
    """A batch of matrix-product states (see the module notes).

    ``sites``: list of ``(B, χ_l, 2, χ_r)`` tensors; ``center``: the orthogonality centre;
    ``discarded``: ``(B,)`` real, the summed discarded weight ``Σ s²/‖s‖²`` of every truncation
    (``1 − fidelity`` is at most about this); ``max_bond`` / ``cutoff``: the truncation rules."""

    def __init__(self, sites, center: int = 0, discarded=None, max_bond: int = 64, cutoff: float = 1e-10):
        self.sites = list(sites)
        self.center = center
        first = self.sites[0]
        real = first.real.dtype
        self.discarded = (torch.zeros(first.shape[0], dtype=real, device=first.device)
                          if discarded is None else discarded)
        self.max_bond = max_bond
        self.cutoff = cutoff

    @classmethod
    def zeros(cls, n_wires: int, batch: int = 1, dtype=torch.complex64, device=None, **kwargs) -> "MPS":
        """``|0…0⟩`` on ``n_wires`` qubits, ``batch`` copies (bond dimension 1)."""
        site = torch.zeros(batch, 1, 2, 1, dtype=dtype, device=device)
        site[:, 0, 0, 0] = 1
        return cls([site] * n_wires, 0, None, **kwargs)

    # -- description --------------------------------------------------------------------------
    @property
    def n_wires(self) -> int:
        return len(self.sites)

    @property
    def batch(self) -> int:
        return self.sites[0].shape[0]

    @property
    def dtype(self):
        return self.sites[0].dtype

    @property
    def device(self):
        return self.sites[0].device

    @property
    def bond_dims(self) -> list:
        """The ``n − 1`` inner bond dimensions, left to right."""
        return [t.shape[-1] for t in self.sites[:-1]]

    @property
    def max_bond_dim(self) -> int:
        return max(self.bond_dims, default=1)

    def __repr__(self) -> str:
        return (f"MPS(n_wires={self.n_wires}, batch={self.batch}, max bond={self.max_bond_dim}, "
                f"center={self.center}, discarded≤{float(self.discarded.max()):.2e})")

    # -- canonical form -----------------------------------------------------------------------
    def _record(self, discarded):
        if discarded is not None:                # None: nothing dropped (known on the host)
            self.discarded = self.discarded + discarded

    def move_center(self, target: int) -> None:
        """Shift the orthogonality centre to site ``target`` (SVD sweeps, truncating as they go)."""
        while self.center < target:
            c = self.center
            a = self.sites[c]
            b, l, _, r = a.shape
            u, rest, disc = _split(a.reshape(b, 2 * l, r), self.max_bond, self.cutoff)
            self.sites[c] = u.reshape(b, l, 2, -1)
            nxt = self.sites[c + 1]
            self.sites[c + 1] = (rest @ nxt.reshape(b, r, -1)).reshape(b, -1, 2, nxt.shape[-1])
            self._record(disc)
            self.center = c + 1
        while self.center > target:
            c = self.center
            a = self.sites[c]
            b, l, _, r = a.shape
            u, rest, disc = _split(a.reshape(b, l, 2 * r).mH, self.max_bond, self.cutoff)
            self.sites[c] = u.mH.reshape(b, -1, 2, r)
            prv = self.sites[c - 1]
            self.sites[c - 1] = (prv.reshape(b, -1, l) @ rest.mH).reshape(b, prv.shape[1], 2, -1)
            self._record(disc)
            self.center = c - 1

    # -- gates --------------------------------------------------------------------------------
    def apply_one(self, matrix: torch.Tensor, site: int) -> None:
        """A one-qubit gate ``(2, 2)`` or ``(B, 2, 2)``: contracted into the site; a unitary on the
        physical index keeps the site's orthonormality, so the centre stays where it is."""
        a = self.sites[site]
        # (2, 2) @ (B, l, 2, r) broadcasts; a batched (B, 2, 2) gets the l axis
        self.sites[site] = torch.matmul(matrix if matrix.dim() == 2 else matrix.unsqueeze(1), a)

    def apply_block(self, matrix: torch.Tensor, start: int, k: int, toward: str = "right") -> None:
        """A k-qubit gate ``(d, d)`` or ``(B, d, d)`` (d = 2**k) on the adjacent sites
        ``start … start+k−1`` (its first wire on ``start``): contract them, apply, split back
        with k − 1 truncated SVDs. The centre ends on the last site (``toward="right"``) or
        the first (``"left"``)."""
        stop = start + k - 1
        self.move_center(min(max(self.center, start), stop))
        theta = self.sites[start]
        b, l = theta.shape[:2]
        for i in range(start + 1, stop + 1):
            nxt = self.sites[i]
            j, rr = nxt.shape[1], nxt.shape[-1]
            theta = (theta.reshape(b, -1, j) @ nxt.reshape(b, j, 2 * rr)).reshape(b, l, -1, rr)
        r = theta.shape[-1]
        theta = torch.matmul(matrix.unsqueeze(-3), theta)         # (…, d, d) @ (B, l, d, r)
        if toward == "right":
            for i in range(start, stop):
                rest_dim = theta.shape[2] // 2
                u, theta, disc = _split(theta.reshape(b, l * 2, rest_dim * r), self.max_bond, self.cutoff)
                self.sites[i] = u.reshape(b, l, 2, -1)
                l = u.shape[-1]
                theta = theta.reshape(b, l, rest_dim, r)
                self._record(disc)
            self.sites[stop] = theta
            self.center = stop
        else:
            for i in range(stop, start, -1):
                rest_dim = theta.shape[2] // 2
                u, rest, disc = _split(theta.reshape(b, l * rest_dim, 2 * r).mH, self.max_bond, self.cutoff)
                self.sites[i] = u.mH.reshape(b, -1, 2, r)
                r = u.shape[-1]
                theta = rest.mH.reshape(b, l, rest_dim, r)
                self._record(disc)
            self.sites[start] = theta
            self.center = start

    def swap(self, site: int, toward: str = "right") -> None:
        """Exchange the qubits on sites ``site`` and ``site + 1`` (a SWAP gate, no matrix product)."""
        self.move_center(min(max(self.center, site), site + 1))
        a, c = self.sites[site], self.sites[site + 1]
        b, l = a.shape[:2]
        r = c.shape[-1]
        j = a.shape[-1]
        theta = (a.reshape(b, 2 * l, j) @ c.reshape(b, j, 2 * r)).reshape(b, l, 2, 2, r)
        theta = theta.transpose(2, 3).reshape(b, l, 4, r)                  # physical order swapped
        self._split_pair(theta, site, toward)

    def _split_pair(self, theta, site, toward):
        b, l, _, r = theta.shape
        if toward == "right":
            u, rest, disc = _split(theta.reshape(b, l * 2, 2 * r), self.max_bond, self.cutoff)
            self.sites[site] = u.reshape(b, l, 2, -1)
            self.sites[site + 1] = rest.reshape(b, -1, 2, r)
            self.center = site + 1
        else:
            u, rest, disc = _split(theta.reshape(b, l * 2, 2 * r).mH, self.max_bond, self.cutoff)
            self.sites[site + 1] = u.mH.reshape(b, -1, 2, r)
            self.sites[site] = rest.mH.reshape(b, l, 2, -1)
            self.center = site
        self._record(disc)

    # -- read-out -----------------------------------------------------------------------------
    def to_dense(self) -> torch.Tensor:
        """The state vectors ``(B, 2**n)`` (n ≤ :data:`MAX_DENSE_WIRES`)."""
        if self.n_wires > MAX_DENSE_WIRES:
            raise ValueError(f"MPS.to_dense: {self.n_wires} wires would need 2**{self.n_wires} amplitudes "
                             f"per sample; limit is {MAX_DENSE_WIRES} (use amplitude(), probabilities(), "
                             f"expval() or sample() instead)")
        psi = self.sites[0].reshape(self.batch, 2, -1)
        for a in self.sites[1:]:
            b, l, _, r = a.shape
            psi = (psi @ a.reshape(b, l, 2 * r)).reshape(b, -1, r)
        return psi[..., 0]

    def norm(self) -> torch.Tensor:
        """``‖ψ‖`` per sample ``(B,)``, by a full transfer-matrix contraction."""
        env = None
        for a in self.sites:
            env = _transfer(env, a, a)
        return env[:, 0, 0].real.clamp_min(0).sqrt()

    def amplitude(self, bits) -> torch.Tensor:
        """``⟨bits|ψ⟩`` ``(B,)``; ``bits``: a string ``"0110…"``, a sequence of 0/1 (wire 0 first)
        or an int basis index (wire 0 the most significant bit)."""
        bits = _bits(bits, self.n_wires)
        vec = self.sites[0][:, :, bits[0], :]
        for a, s in zip(self.sites[1:], bits[1:]):
            vec = vec @ a[:, :, s, :]
        return vec[:, 0, 0]

    def expval(self, observables, shots=None, generator=None, return_std: bool = False):
        """Expectation values of PauliStrings / Hamiltonians: ``(B,)`` for one, ``(B, n_obs)`` for a list.

        ``shots=None``: exact (differentiable). ``shots=N``: estimated from N samples per
        qubit-wise commuting group (``generator`` seeds them; ``return_std=True`` adds the
        standard error), as ``tql.expval(..., shots=N)``; no gradient (the state is detached)."""
        from .measure import expval_mps, shot_expval_mps
        if shots is not None:
            return shot_expval_mps(self, observables, shots, generator, return_std, "MPS.expval")
        if generator is not None:
            raise ValueError("MPS.expval: generator is only used with shots=N")
        if return_std:
            raise ValueError("MPS.expval: return_std=True needs shots=N (exact values have no error)")
        return expval_mps(self, observables)

    def probabilities(self, wires) -> torch.Tensor:
        """Marginal probabilities ``(B, 2**len(wires))`` of a few wires (the first given wire is the
        most significant bit of the outcome index)."""
        from .measure import probabilities
        return probabilities(self, wires)

    def sample(self, shots: int, generator=None) -> torch.Tensor:
        """``(B, shots, n)`` bit strings (int64, wire 0 first) by sequential conditional sampling."""
        from .measure import sample
        return sample(self, shots, generator)


def _transfer(env, bra, ket):
    """``env'[r, r'] = Σ conj(bra[l, s, r]) env[l, l'] ket[l', s, r']``; ``env`` None is the identity."""
    b, l, _, r = ket.shape
    if env is None:
        tmp = ket.reshape(b, l, 2 * r)
    else:
        tmp = env @ ket.reshape(b, l, 2 * r)
    tmp = tmp.reshape(b, -1, r)                               # (B, l·2, r')
    return bra.reshape(b, -1, bra.shape[-1]).mH @ tmp          # (B, r, r')


def _bits(bits, n):
    if isinstance(bits, str):
        if len(bits) != n or set(bits) - {"0", "1"}:
            raise ValueError(f"MPS.amplitude: bit string {bits!r} must have {n} characters 0/1")
        return [int(c) for c in bits]
    if isinstance(bits, int) and not isinstance(bits, bool):
        if not 0 <= bits < 2 ** n:
            raise ValueError(f"MPS.amplitude: basis index {bits} out of range for {n} wires")
        return [(bits >> (n - 1 - w)) & 1 for w in range(n)]
    bits = [int(v) for v in bits]
    if len(bits) != n or set(bits) - {0, 1}:
        raise ValueError(f"MPS.amplitude: expected {n} bits 0/1, got {bits}")
    return bits
