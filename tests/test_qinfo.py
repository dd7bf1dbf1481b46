"""qinfo against NumPy / SciPy formulas on random inputs, analytic states and gradcheck."""
import math

import numpy as np
import pytest
import scipy.linalg as sla
import torch

from torchquantum_layers import mixed, qinfo as Q

from . import oracle as O
from .conftest import ATOL


def as_np(t):
    return t.detach().cpu().numpy()


def rand_rho(n, rng, batch=3, rank=None):
    d = 2 ** n
    g = rng.standard_normal((batch, d, rank or d)) + 1j * rng.standard_normal((batch, d, rank or d))
    r = g @ g.conj().transpose(0, 2, 1)
    return r / np.trace(r, axis1=1, axis2=2)[:, None, None]


def t(a, dtype=torch.complex128, device="cpu"):
    return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)


def ptrace_np(rho, keep, n):
    """Brute force: ρ_A[a, a'] = Σ_r ρ[(a, r), (a', r)] with the wires of ``keep`` first."""
    rest = [w for w in range(n) if w not in keep]
    idx = O._order_index(list(keep) + rest, n)        # standard index -> reordered index
    inv = np.argsort(idx)
    r = rho[:, inv][:, :, inv]
    dk = 2 ** len(keep)
    r = r.reshape(rho.shape[0], dk, -1, dk, r.shape[-1] // dk)
    return np.einsum("birjr->bij", r)


def sqrtm_psd(a):
    w, v = np.linalg.eigh(a)
    return (v * np.sqrt(np.clip(w, 0, None))) @ v.conj().T


def fid_np(r, s):
    sr = sqrtm_psd(r)
    return np.real(np.trace(sqrtm_psd(sr @ s @ sr))) ** 2


# ------------------------------------------------------------------------------------------------
def test_partial_trace_and_transpose(dtype, device):
    rng = np.random.default_rng(0)
    n = 3
    rho = rand_rho(n, rng)
    for keep in [(0,), (2,), (1, 0), (0, 2), (2, 1, 0)]:
        got = Q.partial_trace(t(rho, dtype, device), keep)
        np.testing.assert_allclose(as_np(got), ptrace_np(rho, keep, n), atol=10 * ATOL[dtype])
    psi = O.random_state(n, rng, batch=2)
    got = Q.partial_trace(t(psi, dtype, device), (2, 0))
    ref = ptrace_np(np.einsum("bi,bj->bij", psi, psi.conj()), (2, 0), n)
    np.testing.assert_allclose(as_np(got), ref, atol=10 * ATOL[dtype])
    # partial transpose of wire 1 swaps that wire's row and column bits
    pt = as_np(Q.partial_transpose(t(rho, dtype, device), [1]))
    r6 = rho.reshape(3, 2, 2, 2, 2, 2, 2)
    np.testing.assert_allclose(pt, r6.transpose(0, 1, 5, 3, 4, 2, 6).reshape(3, 8, 8), atol=10 * ATOL[dtype])


def test_purity_fidelity_trace_distance_against_numpy(dtype, device):
    rng = np.random.default_rng(1)
    r, s = rand_rho(2, rng), rand_rho(2, rng, rank=2)
    tol = 10 * ATOL[dtype] if dtype == torch.complex128 else 2e-4
    np.testing.assert_allclose(as_np(Q.purity(t(r, dtype, device))),
                               np.real(np.einsum("bij,bji->b", r, r)), atol=tol)
    np.testing.assert_allclose(as_np(Q.fidelity(t(r, dtype, device), t(s, dtype, device))),
                               [fid_np(a, b) for a, b in zip(r, s)], atol=tol)
    np.testing.assert_allclose(as_np(Q.fidelity(t(r, dtype, device), t(s, dtype, device), squared=False)),
                               [math.sqrt(fid_np(a, b)) for a, b in zip(r, s)], atol=tol)
    np.testing.assert_allclose(as_np(Q.fidelity(t(r, dtype, device), t(r, dtype, device))), np.ones(3), atol=tol)
    psi, phi = O.random_state(2, rng, 3), O.random_state(2, rng, 3)
    np.testing.assert_allclose(as_np(Q.fidelity(t(psi, dtype, device), t(phi, dtype, device))),
                               np.abs(np.einsum("bi,bi->b", psi.conj(), phi)) ** 2, atol=tol)
    np.testing.assert_allclose(as_np(Q.fidelity(t(psi, dtype, device), t(r, dtype, device))),
                               np.real(np.einsum("bi,bij,bj->b", psi.conj(), r, psi)), atol=tol)
    # mixed–mixed with a pure argument agrees with the pure–mixed formula
    pure = np.einsum("bi,bj->bij", psi, psi.conj())
    np.testing.assert_allclose(as_np(Q.fidelity(t(pure, dtype, device), t(r, dtype, device))),
                               np.real(np.einsum("bi,bij,bj->b", psi.conj(), r, psi)), atol=tol)
    td = [0.5 * np.abs(np.linalg.eigvalsh(a - b)).sum() for a, b in zip(r, s)]
    np.testing.assert_allclose(as_np(Q.trace_distance(t(r, dtype, device), t(s, dtype, device))), td, atol=tol)
    # pure states: T = sqrt(1 - F)
    np.testing.assert_allclose(as_np(Q.trace_distance(t(psi, dtype, device), t(phi, dtype, device))),
                               np.sqrt(1 - np.abs(np.einsum("bi,bi->b", psi.conj(), phi)) ** 2), atol=tol)


def test_entropies_against_scipy():
    rng = np.random.default_rng(2)
    r, s = rand_rho(2, rng), rand_rho(2, rng)
    vn = [-np.real(np.trace(a @ sla.logm(a))) for a in r]
    np.testing.assert_allclose(as_np(Q.vn_entropy(t(r))), vn, atol=1e-10)
    np.testing.assert_allclose(as_np(Q.vn_entropy(t(r), base=2)), np.array(vn) / math.log(2), atol=1e-10)
    rel = [np.real(np.trace(a @ (sla.logm(a) - sla.logm(b)))) for a, b in zip(r, s)]
    np.testing.assert_allclose(as_np(Q.relative_entropy(t(r), t(s))), rel, atol=1e-9)
    assert torch.isinf(Q.relative_entropy(t(r[:1]), t(np.diag([1.0, 0, 0, 0])[None]))).all()
    lam = np.linalg.eigvalsh(r)
    for alpha in (0.5, 2, 3.5):
        ref = np.log((lam ** alpha).sum(-1)) / (1 - alpha)
        np.testing.assert_allclose(as_np(Q.renyi_entropy(t(r), alpha)), ref, atol=1e-10)
    np.testing.assert_allclose(as_np(Q.renyi_entropy(t(r), math.inf)), -np.log(lam.max(-1)), atol=1e-10)
    np.testing.assert_allclose(as_np(Q.renyi_entropy(t(r), 0)), np.log(4) * np.ones(3), atol=1e-10)
    np.testing.assert_allclose(as_np(Q.renyi_entropy(t(r), 1)), vn, atol=1e-10)
    # entanglement entropy and mutual information of a Bell pair (+ a spectator)
    bell = np.zeros((1, 8), dtype=complex)
    bell[0, 0] = bell[0, 6] = 1 / math.sqrt(2)           # (|00> + |11>)|0> on wires 0, 1 | 2
    assert abs(float(Q.entanglement_entropy(t(bell), [0], base=2)) - 1) < 1e-12
    assert abs(float(Q.mutual_information(t(bell), [0], [1])) - 2 * math.log(2)) < 1e-12
    assert abs(float(Q.mutual_information(t(bell), [0], [2]))) < 1e-12


def werner(p):
    phi = np.array([1, 0, 0, 1]) / math.sqrt(2)
    return (p * np.outer(phi, phi) + (1 - p) * np.eye(4) / 4)[None].astype(complex)


def test_concurrence_and_negativity():
    rng = np.random.default_rng(3)
    psi = O.random_state(2, rng, 4)
    ref = 2 * np.abs(psi[:, 0] * psi[:, 3] - psi[:, 1] * psi[:, 2])
    np.testing.assert_allclose(as_np(Q.concurrence(t(psi))), ref, atol=1e-12)
    pure = np.einsum("bi,bj->bij", psi, psi.conj())
    np.testing.assert_allclose(as_np(Q.concurrence(t(pure))), ref, atol=1e-7)
    for p in (0.2, 0.5, 0.9):
        assert abs(float(Q.concurrence(t(werner(p)))) - max(0, (3 * p - 1) / 2)) < 1e-9
        assert abs(float(Q.negativity(t(werner(p)), [0])) - max(0, (3 * p - 1) / 4)) < 1e-12
        assert abs(float(Q.log_negativity(t(werner(p)), [1])) - math.log2(max(1, (3 * p + 1) / 2))) < 1e-12
    # concurrence of two wires of a larger state
    ghz = np.zeros((1, 8), dtype=complex)
    ghz[0, 0] = ghz[0, 7] = 1 / math.sqrt(2)
    assert abs(float(Q.concurrence(t(ghz), wires=(0, 2)))) < 1e-9
    with pytest.raises(ValueError, match="has 3 qubits"):
        Q.concurrence(t(ghz))


def test_schmidt_decomposition():
    rng = np.random.default_rng(4)
    psi = O.random_state(3, rng, 2)
    s, a, b = Q.schmidt_decomposition(t(psi), [2])
    assert s.shape == (2, 2) and a.shape == (2, 2, 2) and b.shape == (2, 4, 2)
    recon = torch.einsum("bk,bik,bjk->bij", s.to(a.dtype), a, b)           # (wire 2) x (wires 0, 1)
    ref = psi.reshape(2, 4, 2).transpose(0, 2, 1)                          # [b, wire2, (w0 w1)]
    np.testing.assert_allclose(as_np(recon), ref, atol=1e-12)
    lam = np.linalg.eigvalsh(as_np(Q.partial_trace(t(psi), [2])))[:, ::-1]
    np.testing.assert_allclose(as_np(s) ** 2, lam, atol=1e-12)


def test_gate_and_process_fidelity():
    rng = np.random.default_rng(5)
    u, v = O.random_unitary(4, rng), O.random_unitary(4, rng)
    ref = abs(np.trace(u.conj().T @ v)) / 4
    assert abs(float(Q.gate_fidelity(t(u), t(v))) - ref) < 1e-12
    assert abs(float(Q.gate_fidelity(t(u), t(u * np.exp(0.7j)))) - 1) < 1e-12
    assert abs(float(Q.process_fidelity(t(u), t(v))) - ref ** 2) < 1e-12
    p = 0.3
    ch = mixed.depolarizing(p)
    assert abs(float(Q.process_fidelity(ch, t(np.eye(2)))) - (1 - p)) < 1e-12
    assert abs(float(Q.average_gate_fidelity(ch, t(np.eye(2)))) - (2 * (1 - p) + 1) / 3) < 1e-12


def test_haar_and_random_density_matrices():
    g = torch.Generator().manual_seed(0)
    u = Q.haar_unitary(2, 500, generator=g, dtype=torch.complex128)
    eye = torch.eye(4, dtype=torch.complex128)
    assert torch.allclose(u @ u.conj().transpose(-1, -2), eye.expand(500, 4, 4), atol=1e-12)
    u2 = Q.haar_unitary(2, 500, generator=torch.Generator().manual_seed(0), dtype=torch.complex128)
    assert torch.equal(u, u2)
    # Haar moments: E|U_ij|^2 = 1/d, E|U_ij|^4 = 2/(d(d+1))
    m2 = (u.abs() ** 2).mean().item()
    m4 = (u.abs() ** 4).mean().item()
    assert abs(m2 - 0.25) < 0.01 and abs(m4 - 2 / 20) < 0.01
    # Haar: the phase of det is uniform, not stuck at the QR convention
    assert abs(torch.linalg.det(u).angle().mean().item()) < 0.3
    rho = Q.random_density_matrix(3, 4, rank=2, generator=g, dtype=torch.complex128)
    assert bool(mixed.is_density(rho).all())
    assert (torch.linalg.matrix_rank(rho, hermitian=True) == 2).all()
    rb = Q.random_density_matrix(2, 4, kind="bures", generator=g)
    assert rb.dtype == torch.complex64 and bool(mixed.is_density(rb).all())
    psi = Q.haar_state(3, 2, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(psi.abs().square().sum(-1), torch.ones(2))
    with pytest.raises(ValueError, match="rank must be"):
        Q.random_density_matrix(2, rank=5)
    with pytest.raises(ValueError, match="kind must be"):
        Q.random_density_matrix(2, kind="x")


# ------------------------------------------------------------------------------------------------
# gradients
def _rho_from(m):
    r = m @ m.conj().transpose(-1, -2)
    return r / torch.diagonal(r, dim1=-2, dim2=-1).sum(-1).real[:, None, None]


def _param(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.complex128, generator=g).requires_grad_(True)


def test_fidelity_gradcheck_mixed_mixed():
    a, b = _param((2, 4, 4), 0), _param((2, 4, 2), 1)
    assert torch.autograd.gradcheck(lambda x, y: Q.fidelity(_rho_from(x), _rho_from(y)), (a, b))


def test_fidelity_gradcheck_pure_arguments():
    psi, a = _param((2, 4), 2), _param((2, 4, 4), 3)

    def norm(v):
        return v / torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    assert torch.autograd.gradcheck(lambda v, x: Q.fidelity(norm(v), _rho_from(x)), (psi, a))
    phi = _param((2, 4), 4)
    assert torch.autograd.gradcheck(lambda v, w: Q.fidelity(norm(v), norm(w)), (psi, phi))
    # a pure state given as a density matrix: the Uhlmann path has a finite, correct gradient
    g_pure = torch.autograd.grad(Q.fidelity(norm(psi), _rho_from(a)).sum(), a)[0]
    g_dm = torch.autograd.grad(Q.fidelity(mixed.density_from_state(norm(psi)), _rho_from(a)).sum(), a)[0]
    assert torch.isfinite(g_dm).all()
    torch.testing.assert_close(g_dm, g_pure, atol=1e-6, rtol=1e-5)


def test_entropy_sqrt_and_trace_distance_gradcheck():
    a = _param((2, 4, 4), 5)
    assert torch.autograd.gradcheck(lambda x: Q.vn_entropy(_rho_from(x)), (a,))
    assert torch.autograd.gradcheck(lambda x: Q.renyi_entropy(_rho_from(x), 2.5), (a,))
    assert torch.autograd.gradcheck(lambda x: Q.psd_sqrt(_rho_from(x)), (a,))
    b = _param((2, 4, 4), 6)
    assert torch.autograd.gradcheck(lambda x, y: Q.trace_distance(_rho_from(x), _rho_from(y)), (a, b))


def test_fidelity_on_circuit_output_trains():
    import torchquantum_layers as tql
    target = mixed.DensityMatrix.random(2, rank=2, generator=torch.Generator().manual_seed(0), dtype=torch.complex128)
    c = tql.Circuit(3).double()
    for w in range(3):
        c.u3(w, trainable=True)
    c.cnot(0, 1).cnot(1, 2).cnot(2, 0)
    for w in range(3):
        c.u3(w, trainable=True)
    c.cnot(0, 1).cnot(1, 2)
    for w in range(3):
        c.u3(w, trainable=True)
    opt = torch.optim.Adam(c.parameters(), lr=0.15)
    for _ in range(80):
        f = Q.fidelity(Q.partial_trace(c(), [0, 1]), target.tensor)
        opt.zero_grad()
        (-f).sum().backward()
        opt.step()
    assert float(f.detach()) > 0.98


# ------------------------------------------------------------------------------------------------
def test_bad_input():
    r2, r3 = mixed.zero_density(2), mixed.zero_density(3)
    with pytest.raises(ValueError, match="2 and 3 qubits"):
        Q.fidelity(r2, r3)
    with pytest.raises(ValueError, match="2 and 3 qubits"):
        Q.trace_distance(r2, r3)
    with pytest.raises(ValueError, match="alpha must be"):
        Q.renyi_entropy(r2, -1)
    with pytest.raises(ValueError, match="wire 4 is out of range"):
        Q.partial_trace(r2, [4])
    with pytest.raises(ValueError, match="give the wires"):
        Q.partial_trace(r2, None)
    with pytest.raises(ValueError, match="shape"):
        Q.purity(torch.zeros(2, 4, 3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="exactly two wires"):
        Q.concurrence(r3, wires=(0, 1, 2))
    with pytest.raises(ValueError, match="needs pure states"):
        Q.schmidt_decomposition(r2, [0])
    with pytest.raises(ValueError, match="in both subsystems"):
        Q.mutual_information(r3, [0, 1], [1])
    with pytest.raises(ValueError, match="size 4 and 2"):
        Q.gate_fidelity(torch.eye(4), torch.eye(2))


# ------------------------------------------------------------------------------------------------
# audit regressions
def _with_spectrum(p, seed):
    """V diag(p) V† for a Haar-ish random unitary V (QR of a complex Ginibre matrix, NumPy)."""
    rng = np.random.default_rng(seed)
    d = len(p)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)) + 1j * rng.standard_normal((d, d)))
    return ((q * np.asarray(p, dtype=float)) @ q.conj().T)[None]


@pytest.mark.parametrize("alpha", [0.01, 0.1, 0.5, 0.9])
def test_renyi_entropy_below_one_ignores_round_off_eigenvalues(alpha, dtype):
    """Rényi entropy of rank-deficient states from the known spectrum: log Σ p^α / (1 − α) over
    the non-zero p (a pure state: 0). Round-off eigenvalues (±1e-17) must not count as weight."""
    tol = 1e-9 if dtype == torch.complex128 else 2e-4
    for p in ([1, 0, 0, 0], [0.6, 0.4, 0, 0], [0.5, 0.25, 0.25, 0, 0, 0, 0, 0]):
        nz = np.array([x for x in p if x > 0])
        ref = np.log((nz ** alpha).sum()) / (1 - alpha)
        rho = _with_spectrum(p, seed=len(p))
        assert abs(float(Q.renyi_entropy(t(rho, dtype), alpha)) - ref) < tol
    rng = np.random.default_rng(7)
    psi = O.random_state(3, rng, 2)                          # pure state vectors; reduced states of rank 2
    np.testing.assert_allclose(as_np(Q.renyi_entropy(t(psi, dtype), alpha)), 0, atol=tol)
    lam = np.linalg.eigvalsh(ptrace_np(np.einsum("bi,bj->bij", psi, psi.conj()), (0, 1), 3))[:, 2:]   # the 2 non-zero
    ref = np.log((lam ** alpha).sum(-1)) / (1 - alpha)
    np.testing.assert_allclose(as_np(Q.renyi_entropy(t(psi, dtype), alpha, wires=(0, 1))), ref, atol=tol)


def _rel_np(r, s):
    return np.real(np.trace(r @ (sla.logm(r) - sla.logm(s))))


@pytest.mark.parametrize("spectrum", [[0.25] * 4, [0.4, 0.4, 0.1, 0.1], [0.5, 0.2, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]])
def test_relative_entropy_gradient_at_degenerate_sigma(spectrum):
    """∂D(ρ‖σ)/∂σ at a degenerate σ (maximally mixed, pairs of equal eigenvalues) is finite and
    equals central finite differences of the SciPy logm formula along Hermitian directions."""
    rng = np.random.default_rng(11)
    r = rand_rho(2, rng, batch=1)[0]
    s = _with_spectrum(spectrum, seed=3)[0]
    st = t(s[None]).requires_grad_(True)
    rt = t(r[None]).requires_grad_(True)
    d = Q.relative_entropy(rt, st)
    assert abs(float(d.detach()) - _rel_np(r, s)) < 1e-10
    gs, gr = torch.autograd.grad(d.sum(), (st, rt))
    assert torch.isfinite(gs).all() and torch.isfinite(gr).all()
    h = 1e-5
    for _ in range(3):
        e = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
        e = (e + e.conj().T) / 2
        fd_s = (_rel_np(r, s + h * e) - _rel_np(r, s - h * e)) / (2 * h)
        fd_r = (_rel_np(r + h * e, s) - _rel_np(r - h * e, s)) / (2 * h)
        assert abs(np.real(np.vdot(as_np(gs[0]), e)) - fd_s) < 1e-6
        assert abs(np.real(np.vdot(as_np(gr[0]), e)) - fd_r) < 1e-6


def test_mixed_dtypes_and_batch_sizes():
    """complex128 with complex64 arguments promote (NumPy oracle); non-broadcasting batch sizes
    are a ValueError naming them, not a torch shape error."""
    rng = np.random.default_rng(12)
    r, s = rand_rho(2, rng), rand_rho(2, rng)
    psi = O.random_state(2, rng, 3)
    lo = dict(dtype=torch.complex64)
    np.testing.assert_allclose(as_np(Q.fidelity(t(r), t(s, **lo))), [fid_np(a, b) for a, b in zip(r, s)], atol=1e-5)
    np.testing.assert_allclose(as_np(Q.fidelity(t(psi, **lo), t(r))),
                               np.real(np.einsum("bi,bij,bj->b", psi.conj(), r, psi)), atol=1e-5)
    rel = [_rel_np(a, b) for a, b in zip(r, s)]
    np.testing.assert_allclose(as_np(Q.relative_entropy(t(r, **lo), t(s))), rel, atol=1e-4)
    for f in (Q.fidelity, Q.trace_distance, Q.relative_entropy):
        with pytest.raises(ValueError, match="batch sizes 3 and 2"):
            f(t(r), t(s[:2]))
    with pytest.raises(ValueError, match="batch sizes 2 and 3"):
        Q.fidelity(t(psi[:2]), t(psi))
    with pytest.raises(ValueError, match="batch sizes 2 and 3"):
        Q.gate_fidelity(torch.eye(4).expand(2, 4, 4), torch.eye(4).expand(3, 4, 4))


def test_concurrence_of_a_rank_deficient_state_is_exact():
    """ρ = p|Φ⁺⟩⟨Φ⁺| + (1 − p)|01⟩⟨01| (rank 2): Wootters' R = ρ ρ̃ has eigenvalues p² and 0, so
    C = p; the zero eigenvalues of √ρ ρ̃ √ρ must not leak their round-off square roots."""
    phi = np.array([1, 0, 0, 1]) / math.sqrt(2)
    for p in (0.3, 0.8):
        rho = (p * np.outer(phi, phi) + (1 - p) * np.diag([0, 1, 0, 0]))[None].astype(complex)
        assert abs(float(Q.concurrence(t(rho))) - p) < 1e-12
    ghz = np.zeros((1, 8), dtype=complex)
    ghz[0, 0] = ghz[0, 7] = 1 / math.sqrt(2)
    with pytest.raises(ValueError, match="exactly two wires"):
        Q.concurrence(t(ghz), wires=0)


def test_bad_log_base():
    r2 = mixed.maximally_mixed(2, dtype=torch.complex128)
    assert abs(float(Q.vn_entropy(r2, base=4)) - 1) < 1e-12                # log_4 4
    for f in (lambda b: Q.vn_entropy(r2, base=b), lambda b: Q.renyi_entropy(r2, 2, base=b),
              lambda b: Q.relative_entropy(r2, r2, base=b), lambda b: Q.mutual_information(r2, 0, 1, base=b)):
        for bad in (0, -2, 1, math.inf):
            with pytest.raises(ValueError, match="base must be"):
                f(bad)


def test_root_fidelity_gradient_is_finite_at_orthogonal_states():
    """√F is |⟨a|b⟩| etc.: at F = 0 (orthogonal states) the gradient must not be NaN (it poisons
    shared parameters of the whole batch); elsewhere it equals finite differences of NumPy's
    root fidelity."""
    rng = np.random.default_rng(13)
    orth = np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=complex)       # sample 0: orthogonal to b[0]
    orth[1] = O.random_state(2, rng, 1)[0]
    b = np.array([[0, 0, 1, 0], O.random_state(2, rng, 1)[0]], dtype=complex)
    dm = lambda v: np.einsum("bi,bj->bij", v, v.conj())
    cases = [("pure-pure", orth, b, lambda x, y: np.abs(np.vdot(x, y))),
             ("pure-mixed", orth, dm(b), lambda x, y: np.sqrt(max(np.real(np.vdot(x, y @ x)), 0))),
             ("mixed-mixed", np.stack([dm(orth)[0], 0.7 * dm(orth)[1] + 0.3 * np.eye(4) / 4]),   # sample 1 full rank
              np.stack([0.9 * dm(b)[0] + 0.1 * np.diag([0, 0, 0, 1]), 0.9 * dm(b)[1] + 0.1 * np.eye(4) / 4]),
              lambda x, y: math.sqrt(fid_np(x, y)))]
    h = 1e-4                      # central differences: O(h²) truncation; NumPy round-off / h stays far below
    for name, x, y, ref in cases:
        xt = t(x).requires_grad_(True)
        f = Q.fidelity(xt, t(y), squared=False)
        np.testing.assert_allclose(as_np(f), [ref(x[i], y[i]) for i in range(2)], atol=1e-8, err_msg=name)
        g, = torch.autograd.grad(f.sum(), xt)
        assert torch.isfinite(g).all(), name
        e = rng.standard_normal(x[1].shape) + 1j * rng.standard_normal(x[1].shape)
        if x.ndim == 3:
            e = (e + e.conj().T) / 2
        fd = (ref(x[1] + h * e, y[1]) - ref(x[1] - h * e, y[1])) / (2 * h)
        assert abs(np.real(np.vdot(as_np(g[1].resolve_conj()), e)) - fd) < 1e-5, name
