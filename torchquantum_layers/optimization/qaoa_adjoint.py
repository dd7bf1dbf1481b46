"""The in-place engine of :class:`~.qaoa.QAOA` (``diff_method="adjoint"``): layers on pooled
buffers, the real route of the X mixer, and one reverse sweep that un-computes ψ and carries the
bra. :class:`_InPlaceSweeps` holds the methods (they read the QAOA's set-up); :class:`_AdjointQAOA`
is the autograd Function around them."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch

from ..caching import building_cache
from ..kernels.apply import apply_matrix_unchecked
from ..kernels.state import REAL_OF
from .qaoa_ops import _im_dot, _re_dot, _real_block_generator, _ry_block_matrices
from .qaoa_mixers import WIRE_MIXERS
from .workspace import SINGLE_THREAD_BELOW, _Lease, _threads

if TYPE_CHECKING:
    from .qaoa import QAOA


class _InPlaceSweeps:
    """The adjoint path's methods of :class:`~.qaoa.QAOA` (a mixin: no state of its own)."""

    # -- adjoint path (in place) ---------------------------------------------------------------------
    def _phase_into(self, gamma, out: torch.Tensor, conj: bool = False, fast: Optional[bool] = None):
        """Write exp(∓iγ_b C_j) into ``out`` (B, N) without temporaries of that size."""
        c = self._consts()
        B, G, N = gamma.shape[0], self.n_graphs, out.shape[1]
        sign = 1.0 if conj else -1.0
        if fast is None:
            fast = self._real_route
        if "levels" in c:
            ang = sign * gamma.to(torch.float64)[:, None] * c["levels"][None, :]
            tab = torch.polar(torch.ones_like(ang), ang).to(out.dtype)
            if G == 1 and fast:
                # gather with a broadcast index: 3x faster than index_select on the CPU (measured,
                # (16, 2^19) complex64: 6 ms vs 21 ms), which ran once per row
                torch.gather(tab, 1, c["index_s"][0].expand(B, N), out=out)
            elif G == 1:
                torch.index_select(tab, 1, c["index_s"][0], out=out)
            else:
                K = tab.shape[1]
                torch.gather(tab.view(G, B // G, K), 2, c["index_s"].unsqueeze(1).expand(G, B // G, N),
                             out=out.view(G, B // G, N))
            return out
        r = torch.view_as_real(out)                                               # (B, N, 2)
        im = r[..., 1]
        torch.mul((sign * gamma).view(G, B // G, 1), c["d_s"].unsqueeze(1), out=im.view(G, B // G, N))
        torch.cos(im, out=r[..., 0])
        im.sin_()
        return out

    def _x_blocks(self):
        return self._xsizes

    @property
    def _real_route(self) -> bool:
        return self.mixer == "x" and self.mixer_kernel == "real"

    def _threads_for(self, batch: int):
        """Thread count for an adjoint sweep over ``batch`` rows (None = leave torch's setting)."""
        if self.device.type != "cpu" or batch * self._sim_size >= SINGLE_THREAD_BELOW:
            return None
        return 1

    @property
    def _sim_size(self) -> int:
        return 2 ** self.n_qubits // (2 if self._z2 else 1)

    def _state_out(self, phi: torch.Tensor) -> torch.Tensor:
        """The caller's (B, 2^n) state from the simulated register (undoing the real route's frame)."""
        if self._real_route:
            phi = phi * self._consts()["frame_c"]
        return self._full_state(phi)

    def _full_state(self, phi: torch.Tensor) -> torch.Tensor:
        """The (B, 2^n) state from the simulated register (the half and its reversal under symmetry)."""
        if not self._z2:
            return phi
        B, Ns = phi.shape
        out = torch.empty(B, 2 * Ns, dtype=phi.dtype, device=phi.device)
        out[:, :Ns] = phi
        out[:, Ns:] = phi.flip(1)
        return out

    def _energy_sim(self, phi: torch.Tensor) -> torch.Tensor:
        c = self._consts()
        B, Ns = phi.shape
        G = self.n_graphs
        T = self._pool.take((B, Ns), phi.dtype, phi.device)
        torch.mul(phi.view(G, B // G, Ns), c["d_s"].unsqueeze(1), out=T.view(G, B // G, Ns))
        e = self._re_dot_w(phi, T, c["ones2"], T).to(c["d_s"].dtype) if self._real_route else _re_dot(phi, T)
        self._pool.give(T)
        return 2 * e if self._z2 else e

    def _reverse(self, X, out):
        """out[b, j] = X[b, N-1-j]: the complement of every bit (one gather; torch.flip is 2x slower)."""
        key = ("rev", X.shape[1], X.device)
        idx = self._cache.get(key)
        if idx is None:
            with building_cache():
                idx = torch.arange(X.shape[1] - 1, -1, -1, device=X.device)
            self._cache[key] = idx
        return torch.index_select(X, 1, idx, out=out)

    def _wire0(self, X, T, beta, sign: float):
        """exp(∓iβ F) on the half register, F = the reversal (X on wire 0 under symmetry)."""
        B = X.shape[0]
        self._reverse(X, T)
        c = torch.cos(beta).to(X.dtype).view(B, 1)
        ms = (torch.sin(beta) * (-1j * sign)).to(X.dtype).view(B, 1)
        X.mul_(c).addcmul_(T, ms)

    def _run_inplace(self, gam, bet, prep=None):
        """Forward without autograd; returns the final state in a pool buffer. ``prep``: the real
        route's :meth:`_sweep_prep` (made here when None)."""
        if self._real_route:
            return self._run_inplace_real(gam, bet, prep)
        c = self._consts()
        B, N = gam.shape[0], self._sim_size
        pool = self._pool
        X = pool.take((B, N), self.dtype, self.device)
        X.copy_(self._rows(c["init_s"], B))
        P = pool.take((B, N), self.dtype, self.device)
        Y = pool.take((B, N), self.dtype, self.device) if self._wire_blocks else None
        for l in range(self.p):
            X.mul_(self._phase_into(gam[:, l], P))
            if self._wire_blocks:
                X, Y = self._x_layer(X, Y, bet[:, l])
                if self._z2:
                    self._wire0(X, P, bet[:, l], 1.0)
            else:
                X = self._generic_layer(X, bet[:, l], inverse=False)
        pool.give(P, Y)
        return X

    @property
    def _wire_blocks(self) -> bool:
        """Whether the mixer is one rotation per wire, applied by :meth:`_x_layer` (X, warm start)."""
        return self.mixer in WIRE_MIXERS

    def _x_layer(self, X, Y, beta, inverse: bool = False):
        """⊗RX(2β) (or the warm-start rotations) on all wires: per block of k wires one batched GEMM
        that applies the block to the first k wires and moves them to the end (after all blocks the
        order is restored). ``inverse``: the adjoint, blocks in reverse (last k wires back to the
        front); the blocks are symmetric, so their adjoint is their conjugate."""
        B, N = X.shape
        sizes = self._x_blocks()
        blocks = list(zip(sizes, self._block_matrices(beta)))
        done = {}                                 # the X mixer's blocks of one width share a matrix
        for k, M in (reversed(blocks) if inverse else blocks):
            d = 2 ** k
            if id(M) not in done:
                done[id(M)] = M.conj() if inverse else M.transpose(1, 2).contiguous()
            M = done[id(M)]
            if inverse:
                # X holds (B, L, d) with the block last: Y (B, d, L) = M^H X^T
                torch.bmm(M, X.view(B, N // d, d).transpose(1, 2), out=Y.view(B, d, N // d))
            else:
                torch.bmm(X.view(B, d, N // d).transpose(1, 2), M, out=Y.view(B, N // d, d))
            X, Y = Y, X
        return X, Y

    # -- the real route of the X mixer (see MIXER_KERNELS) -----------------------------------------
    def _sweep_prep(self, gam, bet, backward: bool) -> dict:
        """What the real route's sweeps need that depends on the angles only, for all p layers at
        once (a few small ops in all; made layer by layer they dominated the time of one start on
        a small register): ``cos``/``sin`` (B, p); ``fwd``/``bwd``: per RY block the layers' Mᵀ
        (B, d, d) / stacked for [φ; λ] (2B, d, d); and with a level table, the phase tables of the
        forward (exp(-iγC), fused with wire 0's rotation under the symmetry) and, with
        ``backward``, of the reverse sweep (exp(+iγC)). Made once by the forward and reused by the
        backward (``ctx.prep``); elementwise the same products as the per-layer construction."""
        c = self._consts()
        B, p = gam.shape[0], self.p
        D = 2 if backward else 1
        cos_b, sin_b = torch.cos(bet), torch.sin(bet)                   # (B, p)
        mats = _ry_block_matrices(cos_b.t(), sin_b.t(), self._rblocks, transpose=True, reps=D)
        prep = {"cos": cos_b, "sin": sin_b,
                "fwd": {key: m.select(1, 0).unbind(0) for key, m in mats.items()}}
        if backward:
            prep["bwd"] = {key: m.view(p, 2 * B, *m.shape[-2:]).unbind(0) for key, m in mats.items()}
        if "levels" not in c:
            return prep
        dt = self.dtype
        g64 = gam.t().to(torch.float64)                                  # (p, B)
        sg = torch.stack([-g64, g64])[:D] if backward else (-1.0 * g64).unsqueeze(0)
        ang = sg[..., None] * c["levels"]                                # (D, p, B, K)
        tab = torch.polar(torch.ones_like(ang), ang)
        if not self._z2:
            tab = tab.to(dt)
            prep["tab"] = tab[0].unbind(0)
            if backward:
                prep["tab_c"] = tab[1].unbind(0)
            return prep
        # wire 0's rotation rides in the tables: forward layer l (≥ 1) with β_{l-1}, layer 0 plain
        # (cos = 1, sin = 0); backward layer l with β_l and the opposite sign of sin
        cb = cos_b.t().to(torch.float64)
        sb = sin_b.t().to(torch.float64)
        one = torch.ones(1, B, dtype=torch.float64, device=cb.device)
        cbf = torch.cat([one, cb[:-1]])
        sbf = torch.cat([one - 1, sb[:-1]])
        CB = torch.stack([cbf, cb])[:D] if backward else cbf.unsqueeze(0)
        SB = torch.stack([sbf, -sb])[:D] if backward else sbf.unsqueeze(0)
        t1 = (tab * CB[..., None]).to(dt)
        t2 = (tab * (SB[..., None] * c["kappa"])).to(dt)
        t2 = torch.cat([t2, -t2], dim=-1)                # second half: σ = -1 (index + K)
        prep["t1"], prep["t2"] = t1[0].unbind(0), t2[0].unbind(0)
        if backward:
            prep["t1_c"], prep["t2_c"] = t1[1].unbind(0), t2[1].unbind(0)
        return prep

    def _run_inplace_real(self, gam, bet, prep=None):
        """Forward in the frame φ = Dψ; returns φ in a pool buffer. Wire 0's rotation (half
        register) is fused with the next layer's cost phase, φ ← (c P) ⊙ φ + (s κσ P) ⊙ reverse(φ):
        the cos/sin and the signs ride in the gathered phase tables, which saves the sign multiply,
        a scaling pass and the separate phase multiply. The angle-only data of all layers
        (:meth:`_sweep_prep`) and the views of the buffers are made before the sweep."""
        c = self._consts()
        B, N = gam.shape[0], self._sim_size
        p = self.p
        pool = self._pool
        dt, dev = self.dtype, self.device
        if prep is None:
            prep = self._sweep_prep(gam, bet, backward=False)
        X, P, Y = (pool.take((B, N), dt, dev) for _ in range(3))
        T = pool.take((B, N), dt, dev) if self._z2 else None
        mats = prep["fwd"]
        levels = "levels" in c
        views = self._layer_views((X, Y), B)
        if not levels:
            self._phase_into(gam[:, 0], P, fast=True)
        else:
            self._gather_rows(prep["t1" if self._z2 else "tab"][0], c["index_s"], P)
        torch.mul(self._rows(c["init_f"], B), P, out=X)
        rev = c["rev"].expand(B, N) if self._z2 else None
        for l in range(self.p):
            X, Y = self._ry_layer(X, Y, mats, l, views)
            if not self._z2:
                if l + 1 < p:
                    if levels:
                        self._gather_rows(prep["tab"][l + 1], c["index_s"], P)
                    else:
                        self._phase_into(gam[:, l + 1], P, fast=True)
                    X.mul_(P)
            elif l + 1 < p:
                torch.gather(X, 1, rev, out=T)
                if levels:
                    self._gather_rows(prep["t1"][l + 1], c["index_s"], P)
                    self._gather_rows(prep["t2"][l + 1], c["index_sig"], Y)
                else:
                    self._w0_phase(gam[:, l + 1], bet[:, l], P, Y, conj=False)
                X.mul_(P).addcmul_(T, Y)
            else:
                self._wire0_real(X, P, prep["cos"][:, l], prep["sin"][:, l], 1.0)
        pool.give(P, Y, T)
        return X

    def _layer_views(self, bufs, B):
        """Per (B, N) buffer and RY block: the GEMM input view (B, R, d) and output view (B, R, d)
        of its real planes (see :meth:`_ry_layer`)."""
        out = {}
        for buf in bufs:
            N = buf.shape[1]
            r = torch.view_as_real(buf)
            per = {}
            for key in self._rblocks:
                d = 2 ** key[0]
                R = 2 * N // d
                per[key] = (r.view(B, d, R).transpose(1, 2), r.view(B, R, d))
            out[id(buf)] = per
        return out

    def _gather_rows(self, tab, index, out):
        """out (B, N) = tab (B, K) at index (G, N), the rows of graph g reading index[g]."""
        B, N = out.shape
        G = index.shape[0]
        if G == 1:
            torch.gather(tab, 1, index[0].expand(B, N), out=out)
        else:
            torch.gather(tab.view(G, B // G, tab.shape[-1]), 2, index.unsqueeze(1).expand(G, B // G, N),
                         out=out.view(G, B // G, N))
        return out

    def _w0_phase(self, gamma, beta, Q1, Q2, conj: bool):
        """Q1 = cos β · exp(∓iγC), Q2 = ±sin β · κσ · exp(∓iγC) (upper signs: forward), so that
        exp(∓iγC) after / before wire 0's rotation is Q1 ⊙ φ + Q2 ⊙ reverse(φ). For costs without a
        level table (with one, :meth:`_sweep_prep` makes these tables for all layers at once)."""
        c = self._consts()
        cb = torch.cos(beta).to(torch.float64)[:, None]
        sb = torch.sin(beta).to(torch.float64)[:, None] * (-1.0 if conj else 1.0)
        self._phase_into(gamma, Q1, conj=conj, fast=True)
        torch.mul(Q1, c["ksig"], out=Q2)
        Q2.mul_(sb.to(Q1.dtype))
        Q1.mul_(cb.to(Q1.dtype))

    def _ry_layer(self, X, Y, mats, l, views=None):
        """RY(2β_l)^{⊗m} on the real planes: per block one real bmm that applies the block to the
        leading axes and moves them to the end (after all blocks the layout is restored). ``mats``:
        {block: the transposed blocks of every layer}, indexable by layer (:func:`_ry_block_matrices`,
        unbound); ``views``: :meth:`_layer_views` of X and Y (made here when None)."""
        if views is None:
            views = self._layer_views((X, Y), X.shape[0])
        for key in self._rblocks:
            torch.bmm(views[id(X)][key][0], mats[key][l], out=views[id(Y)][key][1])
            X, Y = Y, X
        return X, Y

    def _wire0_real(self, X, T, cb, sb, sign: float):
        """RX(±2β) on wire 0 in the frame (half register): X ← cos β X ± sin β κσ ⊙ reverse(X)."""
        c = self._consts()
        B, N = X.shape
        torch.gather(X, 1, c["rev"].expand(B, N), out=T)
        T.mul_(c["ksig"])
        X.mul_(cb.to(X.dtype).view(B, 1)).addcmul_(T, (sign * sb).to(X.dtype).view(B, 1))

    def _backward_real(self, gam, bet, psi, grad_out, want_state, diag=None, prep=None):
        """Adjoint sweep of the real route with φ and λ stacked in one (2B, N) buffer, so that each
        un-compute (GEMM, reversal, phase) is one call over both. Per layer: the mixer blocks
        (wire 0's rotation commutes with them, so it is undone after them, fused with the cost
        phase); dL/dγ = Im⟨λ|Cφ⟩ does not change under the phase, so it is taken after it. The
        angle-dependent blocks and tables of all layers and the views of the buffers are made
        before the sweep (a few ops in all: for small registers the per-op overhead dominates)."""
        c = self._consts()
        B, N = psi.shape
        G, p = self.n_graphs, self.p
        pool, dt, dev = self._pool, self.dtype, psi.device
        Z = pool.take((2 * B, N), dt, dev)            # the saved state stays intact (retain_graph)
        Z[:B].copy_(psi)
        Lam = Z[B:]
        if diag is not None:                          # per-row real diagonal, frame-invariant
            torch.mul(Z[:B], diag, out=Lam)
            Lam.mul_(2)
        elif want_state:
            g = grad_out.reshape(B, -1)
            if self._z2:
                torch.add(g[:, :N], g[:, N:].flip(1), out=Lam)
            else:
                Lam.copy_(g)
            Lam.mul_(c["frame"])                      # ψ = D̄ φ, so dL/dφ* = D dL/dψ*
        else:
            torch.mul(Z[:B].view(G, B // G, N), c["d_s"].unsqueeze(1), out=Lam.view(G, B // G, N))
            Lam.mul_(((4 if self._z2 else 2) * grad_out.reshape(B, 1)).to(Lam.dtype))
        T = pool.take((2 * B, N), dt, dev)
        Y = pool.take((2 * B, N), dt, dev)
        if prep is None or "bwd" not in prep:
            prep = self._sweep_prep(gam, bet, backward=True)
        mats = prep["bwd"]
        levels = "levels" in c
        rdt = REAL_OF[dt]
        gens = {key: _real_block_generator(*key, rdt, dev).reshape(-1) for key in self._rblocks}
        views = self._stack_views((Z, Y), B, gens)
        halves = {id(buf): self._halves(buf, B, G) for buf in (Z, Y, T)}
        rev = c["rev"].expand(2 * B, N)
        ones2 = c["ones2"]
        mid = c["mid_s"] if G == 1 else c["mid_s"].unsqueeze(1)
        gterms, bterms = [None] * p, [None] * p
        for l in reversed(range(p)):
            Z, Y, terms = self._ry_layer_backward(Z, Y, mats, views, l)
            z, y, t = halves[id(Z)], halves[id(Y)], halves[id(T)]
            # Y is free scratch from here to the next layer's GEMMs
            if self._z2:
                # wire 0: dL/dβ += Re⟨λ|Kφ⟩, K = κσ reverse (taken anywhere in the mixer: K
                # commutes with every RY), then φ, λ ← exp(+iγC) (cos β - sin β K) (·)
                torch.gather(Z, 1, rev, out=T)
                if "ksig_w" in c:
                    torch.mul(z["lo_r"], t["up_r"], out=y["up_r"])
                    terms.append(torch.mv(y["up_r"], c["ksig_w"]))
                else:
                    torch.mul(t["up"], c["ksig"], out=y["lo"])
                    torch.mul(z["lo_r"], y["lo_r"], out=y["up_r"])
                    terms.append(torch.mv(y["up_r"], ones2))
                if levels:
                    self._gather_rows(prep["t1_c"][l], c["index_s"], y["up"])
                    self._gather_rows(prep["t2_c"][l], c["index_sig"], y["lo"])
                else:
                    self._w0_phase(gam[:, l], bet[:, l], y["up"], y["lo"], conj=True)
                z["both"].mul_(y["up"]).addcmul_(t["both"], y["lo"])
            else:
                if levels:
                    self._gather_rows(prep["tab_c"][l], c["index_s"], y["up"])
                else:
                    self._phase_into(gam[:, l], y["up"], conj=True, fast=True)
                z["both"].mul_(y["up"])
            bterms[l] = terms
            # cost layer: dL/dγ = Re⟨λ|-iC|φ⟩
            if G == 1:
                torch.mul(z["up"], mid, out=y["up"])
            else:
                torch.mul(z["up"].view(G, B // G, N), mid, out=y["up"].view(G, B // G, N))
            torch.mul(z["lo_r"], y["up_r"], out=y["up_r"])
            gterms[l] = torch.mv(y["up_r"], ones2)
        pool.give(T, Y, Z)
        # the terms of each layer summed in float64, in the order of the former per-layer sweep
        dgam = torch.stack(gterms, 1).to(torch.float64)
        nb = len(bterms[0])
        bt = torch.stack([x for terms in bterms for x in terms]).view(p, nb, B).to(torch.float64)
        dbet = bt[:, 0]
        for i in range(1, nb):
            dbet = dbet + bt[:, i]
        return dgam, dbet.t()

    @staticmethod
    def _halves(buf, B, G):
        """Views of a stacked (2B, N) buffer: the upper (φ) and lower (λ) halves, their real planes
        as (B, 2N), and the (2, B, N) stack."""
        N = buf.shape[1]
        r = torch.view_as_real(buf).view(2 * B, 2 * N)
        return {"up": buf[:B], "lo": buf[B:], "up_r": r[:B], "lo_r": r[B:], "both": buf.view(2, B, N)}

    @staticmethod
    def _re_dot_w(a, b, w, scratch):
        """Σ_j w_j Re(conj(a_bj) b_bj) per row (w: interleaved real weights (2N,)), as one real-plane
        product and one GEMV: 2x faster than a (1 × 2N)(2N × 1) bmm on the CPU, and a product with
        a conj() operand would take torch's 5x slower conjugate path."""
        B, N = a.shape
        sr = torch.view_as_real(scratch).view(B, 2 * N)
        torch.mul(torch.view_as_real(a).view(B, 2 * N), torch.view_as_real(b).view(B, 2 * N), out=sr)
        return torch.mv(sr, w).to(torch.float64)

    def _ry_layer_backward(self, Z, Y, mats, views, l):
        """Reverse of _ry_layer on the stacked [φ; λ], accumulating dL/dβ = Σ_blocks ⟨λ|K|φ⟩ from
        the Gram matrix Λᵀ Φ of each block (d × d, the block's axes trailing), contracted with the
        flattened generator K by one GEMV. ``views``: :meth:`_stack_views` of the two buffers;
        returns the per-block terms (B,) in the real dtype."""
        terms = []
        for key in reversed(self._rblocks):
            lam_t, phi, z_t, gen, _ = views[id(Z)][key]
            gram = torch.bmm(lam_t, phi)
            terms.append(torch.mv(gram.view(gram.shape[0], -1), gen))
            torch.bmm(mats[key][l], z_t, out=views[id(Y)][key][4])
            Z, Y = Y, Z
        return Z, Y, terms

    def _stack_views(self, bufs, B, gens):
        """Per (2B, N) buffer and RY block: (Λᵀ view, Φ view, Zᵀ view, flattened generator,
        output view) of its real planes — built once per sweep instead of once per layer."""
        out = {}
        N = bufs[0].shape[1]
        for buf in bufs:
            r = torch.view_as_real(buf)
            per = {}
            for key in self._rblocks:
                d = 2 ** key[0]
                R = 2 * N // d
                zr = r.view(2 * B, R, d)
                per[key] = (zr[B:].transpose(1, 2), zr[:B], zr.transpose(1, 2), gens[key],
                            r.view(2 * B, d, R))
            out[id(buf)] = per
        return out

    def _generic_layer(self, X, beta, inverse: bool):
        n = self.n_qubits
        mats = {}
        steps = reversed(self._steps) if inverse else self._steps
        for kind, wires in steps:
            key = self._step_key(kind, wires)
            if key not in mats:
                M = self._step_matrix(kind, wires, beta)
                mats[key] = M.conj().transpose(1, 2) if inverse else M
            X = apply_matrix_unchecked(X, mats[key], wires, n)
        return X

    def _backward(self, gam, bet, psi, grad_out, want_state, diag=None, prep=None):
        """Adjoint sweep: returns (dγ (B, p), dβ (B, p)) in float64. ``diag`` (B, N_sim) real: the
        loss's gradient in the simulated register's probabilities (the sweep of ⟨ψ|diag|ψ⟩ per row),
        replacing ``grad_out`` and the cost diagonal."""
        if self._real_route:
            return self._backward_real(gam, bet, psi, grad_out, want_state, diag, prep)
        c = self._consts()
        B, N = psi.shape
        G, p = self.n_graphs, self.p
        pool = self._pool
        dt = self.dtype
        Psi = pool.take((B, N), dt, psi.device)          # the saved state stays intact (retain_graph)
        Psi.copy_(psi)
        Lam = pool.take((B, N), dt, psi.device)
        if diag is not None:
            torch.mul(Psi, diag, out=Lam)
            Lam.mul_(2)
        elif want_state:
            g = grad_out.reshape(B, -1)
            if self._z2:                      # ψ = [φ, reverse(φ)]: the gradient of φ collects both halves
                torch.add(g[:, :N], g[:, N:].flip(1), out=Lam)
            else:
                Lam.copy_(g)
        else:
            # dE/dψ* convention of torch: grad = 2 g C ψ (E = 2 Σ_half C |φ|² under symmetry)
            torch.mul(Psi.view(G, B // G, N), c["d_s"].unsqueeze(1), out=Lam.view(G, B // G, N))
            Lam.mul_(((4 if self._z2 else 2) * grad_out.reshape(B, 1)).to(Lam.dtype))
        P = pool.take((B, N), dt, psi.device)
        spare = [pool.take((B, N), dt, psi.device), pool.take((B, N), dt, psi.device)] \
            if self._wire_blocks else None
        dgam = torch.zeros(B, p, dtype=torch.float64, device=psi.device)
        dbet = torch.zeros(B, p, dtype=torch.float64, device=psi.device)
        for l in reversed(range(p)):
            if self._wire_blocks:
                g0 = 0
                if self._z2:
                    # wire 0 (applied last): dL/dβ += Im⟨λ|Fψ⟩, then un-compute ψ and λ
                    self._reverse(Psi, P)
                    g0 = _im_dot(Lam, P).to(torch.float64)
                    cb = torch.cos(bet[:, l]).to(dt).view(B, 1)
                    isb = (torch.sin(bet[:, l]) * 1j).to(dt).view(B, 1)
                    Psi.mul_(cb).addcmul_(P, isb)
                    self._reverse(Lam, P)
                    Lam.mul_(cb).addcmul_(P, isb)
                Psi, Lam, g = self._x_layer_backward(Psi, Lam, spare, bet[:, l])
                g = g + g0
            else:
                Psi, Lam, g = self._generic_layer_backward(Psi, Lam, bet[:, l])
            dbet[:, l] = g
            # cost layer: dL/dγ = Re⟨λ|-iC|ψ⟩ (the same before or after the layer)
            torch.mul(Psi.view(G, B // G, N), c["mid_s"].unsqueeze(1), out=P.view(G, B // G, N))
            dgam[:, l] = _re_dot(Lam, P).to(torch.float64)
            if l:                                   # (the first layer's input is never needed)
                self._phase_into(gam[:, l], P, conj=True)
                Psi.mul_(P)
                Lam.mul_(P)
        pool.give(P, Lam, Psi, *(spare or []))
        return dgam, dbet

    def _x_layer_backward(self, Psi, Lam, spare, beta):
        """Reverse of _x_layer for ψ and λ, accumulating dL/dβ = Σ_blocks Im⟨λ|G_k|ψ⟩ (G_k real
        symmetric: ΣX on the block, or Σ (sin θ X + cos θ Z) for the warm-start mixer)."""
        B, N = Psi.shape
        grad = torch.zeros(B, dtype=torch.float64, device=Psi.device)
        blocks = list(zip(self._x_blocks(), self._block_matrices(beta), self._block_generators_real(B)))
        done = {}
        S1, S2 = spare
        for k, M, gen in reversed(blocks):
            d = 2 ** k
            L = N // d
            if id(M) not in done:
                done[id(M)] = M.conj()
            M = done[id(M)]
            # Im⟨λ|G|ψ⟩ = Σ_r Σ_ij G_ij Im(conj(λ_ri) ψ_rj) over rows r (block index last). On real
            # planes (a conj operand would make bmm copy the state): R = Λᵀ Ψ over interleaved
            # (re, im) columns, Im(conj(λ_i) ψ_j) = R[2i, 2j+1] - R[2i+1, 2j].
            c = max(1, min(L, L // 1024))
            pr = torch.view_as_real(Psi).view(B * c, L // c, 2 * d)
            lr = torch.view_as_real(Lam).view(B * c, L // c, 2 * d)
            R = torch.bmm(lr.transpose(1, 2), pr).view(B, c, d, 2, d, 2).sum(1)
            im = R[:, :, 0, :, 1] - R[:, :, 1, :, 0]                     # [b, i, j]
            grad += (im * gen).sum((1, 2)).to(torch.float64)
            torch.bmm(M, Psi.view(B, L, d).transpose(1, 2), out=S1.view(B, d, L))
            torch.bmm(M, Lam.view(B, L, d).transpose(1, 2), out=S2.view(B, d, L))
            Psi, S1 = S1, Psi
            Lam, S2 = S2, Lam
        spare[0], spare[1] = S1, S2
        return Psi, Lam, grad

    def _generic_layer_backward(self, Psi, Lam, beta):
        B, N = Psi.shape
        n = self.n_qubits
        grad = torch.zeros(B, dtype=torch.float64, device=Psi.device)
        mats = {}
        for kind, wires in reversed(self._steps):
            key = self._step_key(kind, wires)
            if key not in mats:
                M = self._step_matrix(kind, wires, beta)
                Gm = self._step_generator(kind, wires, B).to(device=Psi.device, dtype=self.dtype)
                mats[key] = (M.conj().transpose(1, 2), -1j * Gm)
            Minv, mG = mats[key]
            # dL/dβ += Re⟨λ|-iG|ψ⟩ at the gate's output
            grad += _re_dot(Lam, apply_matrix_unchecked(Psi, mG, wires, n)).to(torch.float64)
            Psi = apply_matrix_unchecked(Psi, Minv, wires, n)
            Lam = apply_matrix_unchecked(Lam, Minv, wires, n)
        return Psi, Lam, grad



class _AdjointQAOA(torch.autograd.Function):
    """Forward in place; backward by one reverse sweep (un-compute ψ, carry λ)."""

    @staticmethod
    def forward(ctx, gam, bet, model: QAOA, want_state: bool):
        needs = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        with torch.no_grad(), _threads(model._threads_for(gam.shape[0])):
            # the angle-only data of both sweeps, made once (the backward reuses it)
            prep = model._sweep_prep(gam, bet, backward=needs) if model._real_route else None
            psi = model._run_inplace(gam, bet, prep)       # the simulated register, a pool buffer
            out = model._state_out(psi) if want_state else model._energy_sim(psi)
            ctx.model, ctx.want_state = model, want_state
            ctx.psi = psi if needs else None
            ctx.prep = prep if needs else None
            if out is not psi:            # psi is not handed to the caller: recycle it
                if needs:
                    ctx.lease = _Lease(model._pool, psi)
                else:
                    model._pool.give(psi)
        ctx.save_for_backward(gam, bet)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        gam, bet = ctx.saved_tensors
        if torch.is_grad_enabled():
            # create_graph (Hessians, double backward): differentiate the out-of-place replay, so the
            # gradients carry a graph (the in-place sweep's would not: zero second derivatives)
            needs = ctx.needs_input_grad[:2]
            with torch.enable_grad():
                model = ctx.model
                psi = model._run_backprop(gam, bet)
                out = psi if ctx.want_state else model._energy(psi)
                ins = [t for t, need in zip((gam, bet), needs) if need]
                grads = iter(torch.autograd.grad(out, ins, grad_out, create_graph=True, allow_unused=True))
            dg, db = (next(grads) if need else None for need in needs)
            return dg, db, None, None
        with torch.no_grad(), _threads(ctx.model._threads_for(gam.shape[0])):
            dg, db = ctx.model._backward(gam.detach(), bet.detach(), ctx.psi, grad_out, ctx.want_state,
                                         prep=ctx.prep)
        return dg.to(gam.dtype), db.to(bet.dtype), None, None


class _AdjointCVaR(torch.autograd.Function):
    """CVaR_α of every row through the in-place engine. Its gradient is that of ⟨ψ|W|ψ⟩ for the
    per-row diagonal W = ∂CVaR/∂p (p = |ψ|²), so backward seeds the one reverse sweep with
    λ = 2 W ψ: neither the caller's full state nor |ψ|²'s autograd graph is built."""

    @staticmethod
    def forward(ctx, gam, bet, model: QAOA, alpha: float):
        needs = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]
        with torch.no_grad(), _threads(model._threads_for(gam.shape[0])):
            psi = model._run_inplace(gam, bet)
            probs = torch.view_as_real(psi).square().sum(-1)            # (B, N_sim), frame-invariant
        with torch.enable_grad():
            p = probs.requires_grad_(needs)
            value = model._cvar_rows(p, alpha)
        ctx.model, ctx.alpha = model, alpha
        if needs:
            ctx.psi, ctx.p, ctx.value = psi, p, value
            ctx.lease = _Lease(model._pool, psi)
        else:
            model._pool.give(psi)
        ctx.save_for_backward(gam, bet)
        return value.detach()

    @staticmethod
    def backward(ctx, grad_out):
        gam, bet = ctx.saved_tensors
        model = ctx.model
        if torch.is_grad_enabled():
            # create_graph: differentiate the out-of-place replay (as _AdjointQAOA does)
            needs = ctx.needs_input_grad[:2]
            with torch.enable_grad():
                psi = model._run_backprop(gam, bet)
                out = model.cvar_of_probabilities(psi.real.square() + psi.imag.square(), ctx.alpha).reshape(-1)
                ins = [t for t, need in zip((gam, bet), needs) if need]
                grads = iter(torch.autograd.grad(out, ins, grad_out, create_graph=True, allow_unused=True))
            dg, db = (next(grads) if need else None for need in needs)
            return dg, db, None, None
        # the small CVaR graph is kept: backward may run again (retain_graph=True, gradcheck)
        (w,) = torch.autograd.grad(ctx.value, ctx.p, grad_out, retain_graph=True)
        with torch.no_grad(), _threads(model._threads_for(gam.shape[0])):
            dg, db = model._backward(gam.detach(), bet.detach(), ctx.psi, None, False,
                                     diag=w.to(REAL_OF[model.dtype]))
        return dg.to(gam.dtype), db.to(bet.dtype), None, None
