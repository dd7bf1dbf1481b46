"""The sweep engine of :class:`~.qaoa.QAOA` shared by both paths, and its out-of-place (backprop) path.

The mixin :class:`_BackpropSweeps` holds the per-dtype/device constants (:meth:`_consts`: the cost
diagonal, its level table, the start state, the frames of the real X-mixer route and of the bit-flip
symmetry), the parsing of the angles ``(S, 2p)`` / ``(G, S, 2p)`` (:meth:`_angles`), the cost phases
``exp(∓iγC)`` (:meth:`_phase`) and the plain-autograd sweep (:meth:`_run_backprop`, :meth:`_energy`).
The in-place adjoint engine is in :mod:`.qaoa_adjoint`.
"""
from __future__ import annotations

import torch

from ..caching import lasting
from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import REAL_OF
from ..kernels.transforms import inspectable
from .qaoa_ops import _i_power, _popcount
from .warm_start import _bloch


class _BackpropSweeps:
    """Constants, angle parsing and the backprop path of :class:`~.qaoa.QAOA` (a mixin)."""

    @lasting
    def _consts(self):
        """Working copies of the diagonal data for the current dtype/device (cached)."""
        key = (self.dtype, self.device)
        c = self._cache.get(key)
        if c is None:
            dev, real, cplx = self.device, REAL_OF[self.dtype], self.dtype
            c = {"d": self._diag64.to(device=dev, dtype=real),                    # (G, N)
                 "init": self._init64.to(device=dev, dtype=cplx)}
            c["mid"] = (-1j * self._diag64).to(device=dev, dtype=cplx)           # -i C
            if self._warm64 is not None:                                         # (sin θ, cos θ) per wire
                c["warm_sc"] = _bloch(self._warm64).to(dev)                      # (1 or G, 2, n) float64
            if self._levels64 is not None:
                c["levels"] = self._levels64.to(dev)                             # float64 (K,)
                c["index"] = self._index.to(dev)                                 # (G, N) int64
            # the simulated register of the adjoint path (the wire-0 = 0 half under bit-flip symmetry)
            Ns = 2 ** self.n_qubits // (2 if self._z2 else 1)
            for name in ("d", "init", "mid", "index"):
                if name in c:
                    c[name + "_s"] = c[name][:, :Ns].contiguous()
            if self.mixer == "x":
                # the real route works on φ = D ψ, D = S^{⊗m} = diag(i^{popcount(y)}) over the m
                # simulated wires: D commutes with the cost and turns each RX into RY
                m = Ns.bit_length() - 1
                pc = _popcount(Ns)
                c["frame"] = _i_power(pc).to(device=dev, dtype=cplx)
                c["frame_c"] = _i_power(-pc).to(device=dev, dtype=cplx)       # no conj() view: 5x slower
                c["init_f"] = c["init_s"] * c["frame"]
                c["rev"] = torch.arange(Ns - 1, -1, -1, device=dev)
                c["ones2"] = torch.ones(2 * Ns, dtype=real, device=dev)
                if self._z2:
                    # RX on wire 0 maps φ(y) to cos β φ(y) + sin β κ σ(y) φ(ȳ): the reversal picks
                    # up σ(y) = (-1)^{popcount(y)} and κ = -i^{1-m} from the frame
                    kappa = -_i_power(torch.tensor(1 - m))
                    sig = 1 - 2 * (pc % 2)
                    c["kappa"] = kappa.to(dev)
                    c["ksig"] = (kappa * sig).to(device=dev, dtype=cplx)
                    if kappa.imag == 0:               # Re(conj(a) κσ b) = κσ Re(conj(a) b)
                        c["ksig_w"] = (kappa.real * sig).repeat_interleave(2).to(device=dev, dtype=real)
                    if "index_s" in c:
                        c["index_sig"] = c["index_s"] + (pc % 2).to(dev) * self._levels64.numel()
            self._cache = {key: c}
        return c

    # -- angles ------------------------------------------------------------------------------------
    def _angles(self, angles, with_rows: bool = False):
        """-> (gammas (B, p), betas (B, p), out_shape tuple, S), and with ``with_rows`` the rows
        (B, 2p) they are the halves of, last."""
        what = "qaoa"
        if not isinstance(angles, torch.Tensor):
            angles = torch.as_tensor(angles, dtype=REAL_OF[self.dtype])
        if angles.is_complex() or not angles.is_floating_point():
            raise TypeError(f"{what}: angles must be a real floating tensor, got {angles.dtype}")
        p, G = self.p, self.n_graphs
        if angles.shape[-1:] != (2 * p,) or angles.dim() not in (1, 2, 3):
            raise ValueError(f"{what}: angles must have shape (S, {2 * p}) = [γ_1…γ_{p}, β_1…β_{p}] per start "
                             f"(or ({2 * p},), or (G, S, {2 * p}) per graph), got {tuple(angles.shape)}")
        if angles.device != self.device:
            raise TypeError(f"{what}: angles are on {angles.device} but the module is on {self.device}")
        if angles.device.type == "cpu" and inspectable(angles) and not bool(torch.isfinite(angles).all()):
            raise ValueError(f"{what}: angles contain NaN or inf")
        angles = angles.to(REAL_OF[self.dtype])
        squeeze = angles.dim() == 1
        if angles.dim() == 3:
            if angles.shape[0] != G:
                raise ValueError(f"{what}: per-graph angles (G, S, {2 * p}) need G = {G}, got {angles.shape[0]}")
            S = angles.shape[1]
            flat = angles.reshape(G * S, 2 * p)
        else:
            a2 = angles.reshape(-1, 2 * p)
            S = a2.shape[0]
            flat = a2.unsqueeze(0).expand(G, S, 2 * p).reshape(G * S, 2 * p) if G > 1 else a2
        if self.single:
            shape = () if squeeze else (S,)
        else:
            shape = (G,) if squeeze else (G, S)
        if S < 1:
            raise ValueError(f"{what}: angles hold no start (shape {tuple(angles.shape)})")
        if with_rows:
            return flat[:, :p], flat[:, p:], shape, S, flat
        return flat[:, :p], flat[:, p:], shape, S

    # -- backprop path (plain autograd, out of place) -----------------------------------------------
    def _rows(self, t: torch.Tensor, B: int) -> torch.Tensor:
        """(1 or G, N) → per-row view (B, N)."""
        G = t.shape[0]
        if G == 1:
            return t.expand(B, -1)
        return t.unsqueeze(1).expand(G, B // G, t.shape[1]).reshape(B, t.shape[1])

    def _phase(self, gamma: torch.Tensor, conj: bool = False) -> torch.Tensor:
        """exp(∓iγ_b C_j): (B, N) complex."""
        c = self._consts()
        B, G, N = gamma.shape[0], self.n_graphs, 2 ** self.n_qubits
        sign = 1.0 if conj else -1.0
        if "levels" in c:
            ang = sign * gamma.to(torch.float64)[:, None] * c["levels"][None, :]
            tab = torch.polar(torch.ones_like(ang), ang).to(self.dtype)           # (B, K)
            if G == 1:
                return tab.index_select(1, c["index"][0])
            K = tab.shape[1]
            return torch.gather(tab.view(G, B // G, K), 2,
                                c["index"].unsqueeze(1).expand(G, B // G, N)).reshape(B, N)
        ang = sign * gamma.view(G, B // G, 1) * c["d"].unsqueeze(1)
        return torch.polar(torch.ones_like(ang), ang).reshape(B, N)


    def _run_backprop(self, gam, bet):
        c = self._consts()
        B, n = gam.shape[0], self.n_qubits
        psi = self._rows(c["init"], B)
        for l in range(self.p):
            psi = psi * self._phase(gam[:, l])
            mats = {}
            for kind, wires in self._steps:
                key = self._step_key(kind, wires)
                if key not in mats:
                    mats[key] = self._step_matrix(kind, wires, bet[:, l])
                psi = apply_matrix_unchecked(psi, mats[key], wires, n)
        return psi

    def _energy(self, psi):
        """Σ_j C_j |ψ_bj|² per row (B,), differentiable (backprop path, full register)."""
        c = self._consts()
        B, N = psi.shape
        G = self.n_graphs
        prob = psi.real.square() + psi.imag.square()
        return (prob.view(G, B // G, N) * c["d"].unsqueeze(1)).sum(-1).reshape(B)
