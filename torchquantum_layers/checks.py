"""Consistency checks for gates of the table (and for user-defined :class:`~.gates.Gate` s).

``assert_valid_gate(gate)`` verifies that everything a gate declares agrees with its matrix:
unitarity, batching in the parameters, the diagonal / permutation / controlled structure the
kernels rely on, the generator and spectra the differentiation methods rely on, the
``self_inverse`` flag, and that :meth:`Gate.apply` (the fast kernels) agrees with plain dense
matrix application, adjoint included. A failure raises :class:`AssertionError` naming the gate
and the property at fault. Use it in the test suite of any package that adds gates::

    from torchquantum_layers.checks import assert_valid_gate
    assert_valid_gate(my_gate)

The dense reference used here does not go through the kernels: it builds the full
``2**n × 2**n`` operator by index arithmetic, so keep ``n`` small (gates of up to ~6 wires).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from . import gates as _gates

__all__ = ["assert_valid_gate", "assert_all_gates_valid", "dense_operator"]

DEFAULT_ATOL = {torch.complex64: 2e-5, torch.complex128: 1e-10}
_REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}


def _fail(gate, prop: str, detail: str):
    raise AssertionError(f"gate {gate.name}: {prop} check failed: {detail}")


def _err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) if a.numel() else 0.0


def _close(gate, prop, a, b, atol, what=""):
    if tuple(a.shape) != tuple(b.shape):
        _fail(gate, prop, f"{what}shape {tuple(a.shape)} != expected {tuple(b.shape)}")
    e = _err(a, b)
    if not math.isfinite(e) or e > atol:
        _fail(gate, prop, f"{what}max abs error {e:.3g} > atol {atol:g}")


def dense_operator(matrix: torch.Tensor, wires, n: int) -> torch.Tensor:
    """Full ``(…, 2^n, 2^n)`` operator of a ``(…, 2^k, 2^k)`` matrix acting on ``wires``.

    Entry (i, j) is ``matrix[local(i), local(j)]`` when i and j agree on every wire outside
    ``wires`` and 0 otherwise, where ``local`` reads the bits of ``wires`` (first wire = most
    significant). Independent of the kernels.
    """
    k = len(wires)
    idx = torch.arange(2 ** n, device=matrix.device)
    local = torch.zeros_like(idx)
    rest = idx.clone()
    for j, w in enumerate(wires):
        shift = n - 1 - w
        local |= ((idx >> shift) & 1) << (k - 1 - j)
        rest &= ~(1 << shift)
    same = (rest[:, None] == rest[None, :]).to(matrix.dtype)
    return matrix[..., local[:, None], local[None, :]] * same


def _random_angles(n_params, gen, real, device, batch=None):
    shape = () if batch is None else (batch,)
    return tuple(((torch.rand(shape, generator=gen, dtype=torch.float64) * 4 - 2) * math.pi)
                 .to(dtype=real, device=device) for _ in range(n_params))


def _random_state(n, batch, gen, dtype, device):
    parts = torch.randn(2, batch, 2 ** n, generator=gen, dtype=torch.float64)
    s = torch.complex(parts[0], parts[1])
    s = s / torch.linalg.vector_norm(s, dim=1, keepdim=True)
    return s.to(dtype=dtype, device=device)


def _derivative(mat, theta: torch.Tensor) -> torch.Tensor:
    """dU/dθ of ``mat((θ,))`` by autograd (θ is a scalar).

    Reverse mode twice (the "double vjp" trick): g(v) = vᵀ ∂U/∂θ is linear in v, so ∂g/∂v = ∂U/∂θ.
    This needs one forward and two backward passes, whatever the size of U.
    """
    t = theta.detach().clone().requires_grad_(True)
    out = torch.view_as_real(mat((t,)))
    zero = torch.view_as_complex(torch.zeros_like(out).contiguous())
    if not out.requires_grad:       # the matrix does not depend on θ through autograd
        return zero
    v = torch.zeros_like(out, requires_grad=True)
    (g,) = torch.autograd.grad(out, t, grad_outputs=v, create_graph=True, allow_unused=True)
    if g is None or not g.requires_grad:
        return zero
    (du,) = torch.autograd.grad(g, v, grad_outputs=torch.ones_like(g))
    return torch.view_as_complex(du.contiguous())


def _check_frequencies(gate, mat, params, gen, real, dtype, device, d, atol):
    """Each parameter's declared frequencies (:meth:`Gate.frequencies`, what the shift rules use)
    are exactly those of the matrix: for a random A, every entry of U(t)† A U(t) as a function of
    parameter j alone (the others fixed) is a trigonometric polynomial in exactly them. Checks the
    gates with no generator (U3, ROT, CU3, ...) too."""
    a = torch.randn(2, d, d, generator=gen, dtype=torch.float64)
    a = torch.complex(a[0], a[1]).to(dtype=dtype, device=device) / d
    for j in range(gate.n_params):
        freqs = (0.0,) + tuple(gate.frequencies(j))
        m = 4 * len(freqs) + 8
        t = ((torch.rand(m, generator=gen, dtype=torch.float64) * 2 - 1) * 4 * math.pi)
        point = tuple(t.to(dtype=real, device=device) if i == j else p.expand(m) for i, p in enumerate(params))
        u = mat(point)
        y = (u.conj().transpose(-1, -2) @ a @ u).reshape(m, -1).to(torch.complex128).cpu().numpy()
        tt = t.numpy()

        def residual(fs):
            basis = np.column_stack([np.cos(w * tt) for w in fs] + [np.sin(w * tt) for w in fs if w > 0])
            coef = np.linalg.lstsq(basis.astype(np.complex128), y, rcond=None)[0]
            return float(np.abs(basis @ coef - y).max())
        err = residual(freqs)
        if not math.isfinite(err) or err > 50 * atol:
            _fail(gate, "frequencies", f"parameter {j}: U^dagger A U is not a trigonometric polynomial in "
                                       f"the declared frequencies {freqs[1:]} (residual {err:.3g}): the "
                                       f"shift rules would be wrong")
        for w in freqs[1:]:
            if residual(tuple(f for f in freqs if f != w)) < 1e-3:
                _fail(gate, "frequencies", f"parameter {j}: declared frequency {w:g} does not occur "
                                           f"(frequencies {freqs[1:]})")


def _wires_of(gate, n_wires, data):
    if gate.n_wires is not None:
        if n_wires is not None and n_wires != gate.n_wires:
            raise ValueError(f"assert_valid_gate: gate {gate.name} acts on {gate.n_wires} wires, "
                             f"not {n_wires}")
        return gate.n_wires
    if n_wires is None and data is not None:
        d = data.shape[-1]
        n_wires = int(round(math.log2(d)))
    if n_wires is None:
        n_wires = max(gate.min_wires, 3)
    if n_wires < gate.min_wires:
        raise ValueError(f"assert_valid_gate: gate {gate.name} needs at least {gate.min_wires} wires, "
                         f"got {n_wires}")
    return n_wires


def assert_valid_gate(gate, n_wires=None, dtype=torch.complex128, atol=None, generator=None,
                      data=None, device=None, n_samples: int = 3, batch: int = 3) -> tuple:
    """Check that a gate's declared structure agrees with its matrix; raise AssertionError if not.

    Args:
        gate: a :class:`~torchquantum_layers.gates.Gate` or a gate name.
        n_wires: wires to check a variable-size gate (MULTIRZ, MULTICONTROLLEDX, ...) on;
            default ``max(min_wires, 3)`` (or what ``data`` implies).
        dtype: complex dtype of the matrices and states.
        atol: absolute tolerance (default 2e-5 for complex64, 1e-10 for complex128; derivative
            checks use 50× this).
        generator: a CPU ``torch.Generator`` for the random angles and states (default: seeded 0).
        data: the matrix (QubitUnitary) or diagonal (DiagonalUnitary) of a ``takes_data`` gate;
            such gates are skipped when it is None.
        device: device of the tensors (default CPU).
        n_samples: how many random parameter values to check.
        batch: batch size for the batched-parameter and apply checks.

    Returns:
        the names of the properties checked (empty when the gate was skipped).
    """
    gate = _gates.get_gate(gate)
    if dtype not in DEFAULT_ATOL:
        raise TypeError(f"assert_valid_gate: dtype must be complex64 or complex128, got {dtype}")
    if gate.takes_data and data is None:
        return ()
    if data is not None and not isinstance(data, torch.Tensor):
        data = torch.as_tensor(np.asarray(data), dtype=dtype)
    if data is not None:
        data = data.to(dtype=dtype, device=device)
    atol = DEFAULT_ATOL[dtype] if atol is None else atol
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    real = _REAL[dtype]
    k = _wires_of(gate, n_wires, data)
    d = 2 ** k
    checked = []

    def mat(params):
        return gate.matrix(params, n_wires=k, dtype=dtype, device=device, data=data)

    samples = [_random_angles(gate.n_params, gen, real, device) for _ in range(max(1, n_samples))]
    if gate.n_params == 0:
        samples = samples[:1]

    # -- shape and unitarity ------------------------------------------------------------------
    eye = torch.eye(d, dtype=dtype, device=device)
    mats = []
    for params in samples:
        m = mat(params)
        if tuple(m.shape) != (d, d):
            _fail(gate, "shape", f"matrix has shape {tuple(m.shape)}, expected ({d}, {d})")
        if m.dtype != dtype:
            _fail(gate, "dtype", f"matrix has dtype {m.dtype}, expected {dtype}")
        _close(gate, "unitarity", m @ m.conj().T, eye, atol * d, "U U^dagger vs I: ")
        mats.append(m)
    checked += ["shape", "unitarity"]

    # -- batched parameters ---------------------------------------------------------------------
    if gate.n_params:
        bparams = _random_angles(gate.n_params, gen, real, device, batch=batch)
        mb = mat(bparams)
        ref = torch.stack([mat(tuple(p[b] for p in bparams)) for b in range(batch)])
        _close(gate, "batched parameters", mb, ref, atol, "(B, d, d) vs stacked unbatched: ")
        if gate.kind == "diagonal":
            db = gate.diagonal(bparams, n_wires=k, dtype=dtype, device=device, data=data)
            _close(gate, "diagonal", db, torch.diagonal(ref, dim1=-2, dim2=-1), atol,
                   "batched diag_fn vs diagonal of the stacked matrices: ")
        checked.append("batched parameters")

    # -- structure ------------------------------------------------------------------------------
    if gate.kind not in ("dense", "diagonal", "permutation", "controlled", "two-level"):
        _fail(gate, "kind", f"unknown kind {gate.kind!r}")
    if gate.kind == "diagonal":
        if gate.diag_fn is None:
            _fail(gate, "diagonal", "kind is 'diagonal' but diag_fn is None")
        for params, m in zip(samples, mats):
            dg = gate.diagonal(params, n_wires=k, dtype=dtype, device=device, data=data)
            _close(gate, "diagonal", dg, torch.diagonal(m), atol, "diag_fn vs matrix diagonal: ")
            _close(gate, "diagonal", m - torch.diag_embed(torch.diagonal(m)),
                   torch.zeros_like(m), atol, "off-diagonal entries of a diagonal gate: ")
        checked.append("diagonal")
    if gate.kind == "permutation":
        if gate.perm_fn is None:
            _fail(gate, "permutation", "kind is 'permutation' but perm_fn is None")
        perm = tuple(int(p) for p in gate.perm_fn(k))
        if sorted(perm) != list(range(d)):
            _fail(gate, "permutation", f"perm_fn({k}) = {perm} is not a permutation of range({d})")
        pm = torch.zeros(d, d, dtype=dtype, device=device)
        pm[torch.arange(d), torch.tensor(perm)] = 1
        _close(gate, "permutation", mats[0], pm, atol, "matrix vs M[i, perm[i]] = 1: ")
        checked.append("permutation")
    if gate.kind == "two-level":
        lv = list(gate.levels)
        if gate.block_fn is None or len(set(lv)) != 2 or not all(0 <= v < d for v in lv):
            _fail(gate, "two-level", f"needs block_fn and two distinct levels in range({d}), got {gate.levels}")
        rest = [i for i in range(d) if i not in lv]
        for params, m in zip(samples, mats):
            blk = gate.block_fn(params, dtype, device)
            _close(gate, "two-level", m[lv][:, lv], blk, atol, "block_fn vs matrix on the levels: ")
            _close(gate, "two-level", m[rest][:, rest], torch.eye(len(rest), dtype=dtype, device=device),
                   atol, "matrix outside the levels vs identity: ")
            _close(gate, "two-level", m[rest][:, lv], torch.zeros(len(rest), 2, dtype=dtype, device=device),
                   atol, "coupling of the levels to the rest: ")
            _close(gate, "two-level", m[lv][:, rest], torch.zeros(2, len(rest), dtype=dtype, device=device),
                   atol, "coupling of the rest to the levels: ")
        checked.append("two-level")
    if gate.kind == "controlled" or gate.n_controls:
        c = gate.n_controls
        if c < 1 or gate.target is None:
            _fail(gate, "controlled", f"n_controls={c}, target={gate.target!r}")
        kt = k - c
        dt = 2 ** kt
        for params, m in zip(samples, mats):
            u = gate.target.matrix(params, n_wires=kt, dtype=dtype, device=device, data=data)
            top = torch.eye(d - dt, dtype=dtype, device=device)
            _close(gate, "controlled", m[:d - dt, :d - dt], top, atol, "control=0 block vs identity: ")
            _close(gate, "controlled", m[:d - dt, d - dt:], torch.zeros_like(m[:d - dt, d - dt:]), atol,
                   "off-diagonal block: ")
            _close(gate, "controlled", m[d - dt:, :d - dt], torch.zeros_like(m[d - dt:, :d - dt]), atol,
                   "off-diagonal block: ")
            _close(gate, "controlled", m[d - dt:, d - dt:], u, atol, "control=1 block vs target matrix: ")
        checked.append("controlled")

    if gate.diagonal_form:
        diagonal, *per_wire = gate.diagonal_form
        if diagonal.kind != "diagonal" or diagonal.n_params != gate.n_params or len(per_wire) != k \
                or any(g.n_wires != 1 or g.n_params for gates in per_wire for g in gates):
            _fail(gate, "diagonal form", "needs a diagonal gate of the same parameters and, per wire, "
                  "fixed single-wire gates")
        basis = eye[:1, :1]
        for gates in per_wire:
            w = torch.eye(2, dtype=dtype, device=device)
            for g in gates:
                w = g.matrix((), dtype=dtype, device=device) @ w
            basis = torch.kron(basis, w)
        for params, m in zip(samples, mats):
            dm = diagonal.matrix(params, n_wires=k, dtype=dtype, device=device)
            _close(gate, "diagonal form", basis.conj().T @ dm @ basis, m, atol, "W^dagger D W vs matrix: ")
        checked.append("diagonal form")

    # -- generator and spectra ------------------------------------------------------------------
    g_np = gate.generator(k) if gate.generator_fn is not None else None
    if g_np is not None:
        g_np = np.asarray(g_np, dtype=np.complex128)
        if g_np.shape != (d, d):
            _fail(gate, "generator", f"generator has shape {g_np.shape}, expected ({d}, {d})")
        if not np.allclose(g_np, g_np.conj().T, atol=1e-12):
            _fail(gate, "generator", "generator is not Hermitian")
        checked.append("generator hermitian")
        if gate.n_params == 1:
            g = torch.as_tensor(g_np, dtype=dtype, device=device)
            for params in samples:
                theta = params[0].detach()

                du = _derivative(mat, theta)
                expect = -1j * (g @ mat((theta,)))
                _close(gate, "generator", du, expect, 50 * atol, "dU/dtheta vs -i G U(theta): ")
            checked.append("generator derivative")
    if gate.spectra:
        if len(gate.spectra) != gate.n_params:
            _fail(gate, "spectra", f"{len(gate.spectra)} spectra for {gate.n_params} parameters")
        if g_np is not None and gate.n_params == 1:
            want = sorted(set(np.round(np.linalg.eigvalsh(g_np), 9).tolist()))
            got = sorted(set(np.round(np.asarray(gate.spectra[0], dtype=float), 9).tolist()))
            if len(want) != len(got) or not np.allclose(want, got, atol=1e-9):
                _fail(gate, "spectra", f"spectra[0] = {gate.spectra[0]} but eigvalsh(G) has distinct "
                                       f"values {tuple(want)}")
            checked.append("spectra")
        _check_frequencies(gate, mat, samples[0], gen, real, dtype, device, d, atol)
        checked.append("frequencies")

    # -- self inverse ---------------------------------------------------------------------------
    if gate.self_inverse:
        for m in mats:
            _close(gate, "self_inverse", m @ m, eye, atol * d, "U @ U vs I: ")
        checked.append("self_inverse")

    # -- apply vs dense application ---------------------------------------------------------------
    # wires: scattered in a random order, reversed, and a contiguous block at the end
    n = k + 2
    order = torch.randperm(n, generator=gen).tolist()
    wire_sets = [tuple(order[:k]), tuple(sorted(order[:k], reverse=True)), tuple(range(n - k, n))]
    for wires in wire_sets:
        params_list = [samples[0]]
        if gate.n_params:
            params_list.append(_random_angles(gate.n_params, gen, real, device, batch=batch))
        for params in params_list:
            per_sample = bool(params) and params[0].dim() > 0
            m = mat(params)
            # per-sample parameters also meet a state batch of 1, which must broadcast
            for state_batch in ((batch, 1) if per_sample else (batch,)):
                state = _random_state(n, state_batch, gen, dtype, device)
                for adjoint in (False, True):
                    u = m.conj().transpose(-1, -2) if adjoint else m
                    full = dense_operator(u, wires, n)
                    expect = (full @ state.unsqueeze(-1)).squeeze(-1)   # broadcasts the batches
                    what = (f"apply(wires={wires}, {'per-sample' if per_sample else 'shared'} params, "
                            f"state batch {state_batch}, adjoint={adjoint}) vs dense: ")
                    try:
                        got = gate.apply(state, params, wires, n, data=data, adjoint=adjoint)
                    except Exception as exc:  # noqa: BLE001 - report which case raised
                        _fail(gate, "apply", f"{what}raised {type(exc).__name__}: {exc}")
                    _close(gate, "apply", got, expect, atol * 4, what)
    checked.append("apply")
    return tuple(checked)


def assert_all_gates_valid(dtype=torch.complex128, data=None, generator=None, device=None) -> list:
    """Run :func:`assert_valid_gate` over every gate of :data:`gates.GATES`.

    Variable-size gates are checked on ``min_wires`` and 3 wires. ``data`` maps gate names to the
    data of ``takes_data`` gates; those without data are skipped. Returns the names checked.
    """
    data = data or {}
    gen = generator if generator is not None else torch.Generator().manual_seed(1234)
    done = []
    for name, gate in _gates.GATES.items():
        if gate.takes_data and name not in data:
            continue
        if gate.n_wires is None and not gate.takes_data:
            for k in sorted({gate.min_wires, max(gate.min_wires, 3)}):
                assert_valid_gate(gate, n_wires=k, dtype=dtype, generator=gen, device=device)
        else:
            assert_valid_gate(gate, dtype=dtype, generator=gen, data=data.get(name), device=device)
        done.append(name)
    return done
