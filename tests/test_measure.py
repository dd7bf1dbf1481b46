"""Measurements against brute-force NumPy over basis indices and analytic states."""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import measure as M

from . import oracle as O


def as_np(t):
    return t.detach().cpu().numpy()


def bit(i, w, n):
    return (i >> (n - 1 - w)) & 1


def local_index(i, wires, n):
    out = 0
    for w in wires:
        out = (out << 1) | bit(i, w, n)
    return out


def marginal_np(psi, wires, n):
    """Brute force: add |ψ_i|² into the index formed by the bits of ``wires`` (first = MSB)."""
    B = psi.shape[0]
    out = np.zeros((B, 2 ** len(wires)))
    for i in range(2 ** n):
        out[:, local_index(i, wires, n)] += np.abs(psi[:, i]) ** 2
    return out


def partial_trace_np(psi, wires, n):
    """ρ[a, b] = Σ ψ_i ψ_j* over pairs i, j that agree on every other wire."""
    rest = [w for w in range(n) if w not in wires]
    d = 2 ** len(wires)
    rho = np.zeros((psi.shape[0], d, d), dtype=np.complex128)
    for i in range(2 ** n):
        for j in range(2 ** n):
            if local_index(i, rest, n) == local_index(j, rest, n):
                rho[:, local_index(i, wires, n), local_index(j, wires, n)] += psi[:, i] * psi[:, j].conj()
    return rho


def random_state(n, batch, dtype, device, seed=0):
    psi = O.random_state(n, np.random.default_rng(seed), batch=batch)
    return psi, torch.tensor(psi, dtype=dtype, device=device)


def bell(dtype, device):
    return tql.Circuit(2, dtype=dtype).to(device).h(0).cnot(0, 1)()


def ghz(n, dtype, device):
    c = tql.Circuit(n, dtype=dtype).to(device).h(0)
    for w in range(n - 1):
        c.cnot(w, w + 1)
    return c()


# ---------------------------------------------------------------------------------------------
# probabilities
@pytest.mark.parametrize("wires", [None, (0, 1, 2, 3), (2, 0), (1,), (3, 1, 0), (0, 2, 1, 3)])
def test_probabilities_vs_brute_force(wires, dtype, device, atol):
    psi, state = random_state(4, 3, dtype, device)
    p = M.probabilities(state, wires)
    w = list(range(4)) if wires is None else list(wires)
    assert p.shape == (3, 2 ** len(w)) and not p.is_complex() and p.device.type == device
    np.testing.assert_allclose(as_np(p), marginal_np(psi, w, 4), atol=atol)


def test_probabilities_bell_ghz_and_order(dtype, device, atol):
    np.testing.assert_allclose(as_np(M.probabilities(bell(dtype, device))), [[0.5, 0, 0, 0.5]], atol=atol)
    np.testing.assert_allclose(as_np(M.probabilities(bell(dtype, device), [1])), [[0.5, 0.5]], atol=atol)
    g = ghz(3, dtype, device)
    np.testing.assert_allclose(as_np(M.probabilities(g, (2, 0))), [[0.5, 0, 0, 0.5]], atol=atol)
    # |wire0 wire1 wire2> = |1 0 0>: wires (2, 0) read bits (0, 1) -> index 0b01
    s = tql.basis_state("100", dtype=dtype, device=device)
    np.testing.assert_allclose(as_np(M.probabilities(s, (2, 0))), [[0, 1, 0, 0]])
    np.testing.assert_allclose(as_np(M.probabilities(s, (0, 2))), [[0, 0, 1, 0]])
    assert int(M.probabilities(s, 0).argmax()) == 1


def test_probabilities_gradient():
    theta = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    state = tql.functional.rx(tql.zero_state(2, dtype=torch.complex128), theta, wires=1)
    M.probabilities(state, [1])[0, 1].backward()          # P(1) = sin²(θ/2)
    np.testing.assert_allclose(float(theta.grad), 0.5 * math.sin(0.4), atol=1e-12)


# ---------------------------------------------------------------------------------------------
# sampling
def test_sample_frequencies_within_five_standard_errors(dtype, device):
    psi, state = random_state(3, 2, dtype, device, seed=1)
    shots = 20000
    gen = torch.Generator(device=device).manual_seed(1234)
    s = M.sample(state, shots, generator=gen)
    assert s.shape == (2, shots) and s.dtype == torch.int64 and s.device.type == device
    s = as_np(s)
    p = np.abs(psi) ** 2
    for b in range(2):
        freq = np.bincount(s[b], minlength=8) / shots
        se = np.sqrt(p[b] * (1 - p[b]) / shots)
        assert np.all(np.abs(freq - p[b]) <= 5 * se + 1e-12), (freq, p[b])


def test_sample_marginal_wires_and_zero_probabilities(dtype, device):
    psi, state = random_state(3, 1, dtype, device, seed=2)
    shots = 20000
    s = as_np(M.sample(state, shots, wires=(2, 0), generator=torch.Generator(device=device).manual_seed(5)))
    p = marginal_np(psi, [2, 0], 3)[0]
    freq = np.bincount(s[0], minlength=4) / shots
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / shots))
    # GHZ: only 000 and 111, on any wires
    s = as_np(M.sample(ghz(3, dtype, device), 2000, generator=torch.Generator(device=device).manual_seed(0)))
    assert set(np.unique(s).tolist()) == {0, 7}
    # basis state |101>: every shot is 5, on wires (2, 1) every shot is 0b10
    b = tql.basis_state("101", batch=2, dtype=dtype, device=device)
    assert (M.sample(b, 100) == 5).all()
    assert (M.sample(b, 100, wires=[2, 1]) == 2).all()
    # unnormalised rows are sampled from their own norm
    assert (M.sample(3 * b, 50) == 5).all()


def test_sample_reproducible_with_seed(device):
    _, state = random_state(4, 3, torch.complex64, device, seed=3)
    a = M.sample(state, 500, generator=torch.Generator(device=device).manual_seed(42))
    b = M.sample(state, 500, generator=torch.Generator(device=device).manual_seed(42))
    c = M.sample(state, 500, generator=torch.Generator(device=device).manual_seed(43))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_to_bits_and_counts(device):
    samples = torch.tensor([[5, 0, 7, 5], [1, 2, 3, 3]], device=device)
    bits = M.to_bits(samples, 3)
    assert bits.shape == (2, 4, 3) and bits.device.type == device
    expected = np.array([[[int(ch) for ch in format(v, "03b")] for v in row] for row in as_np(samples)])
    np.testing.assert_array_equal(as_np(bits), expected)
    assert M.counts(samples, 3) == {"000": 1, "101": 2, "111": 1}
    assert M.counts(samples, 3, batch_index=1) == {"001": 1, "010": 1, "011": 2}
    assert M.counts(samples[1], 2) == {"01": 1, "10": 1, "11": 2}
    # counts of a Bell state sample
    s = M.sample(bell(torch.complex64, device), 1000, generator=torch.Generator(device=device).manual_seed(0))
    cnt = M.counts(s, 2)
    assert set(cnt) == {"00", "11"} and sum(cnt.values()) == 1000 and abs(cnt["00"] - 500) < 5 * math.sqrt(250)
    # to_bits column i is the outcome of wires[i]
    st = tql.basis_state("110", dtype=torch.complex64, device=device)
    np.testing.assert_array_equal(as_np(M.to_bits(M.sample(st, 3, wires=[2, 0]), 2))[0], [[0, 1]] * 3)


# ---------------------------------------------------------------------------------------------
# reduced density matrices and <Z>
@pytest.mark.parametrize("wires", [(0,), (3, 1), (1, 2), (2, 0, 3), (0, 1, 2, 3)])
def test_reduced_density_matrix_vs_partial_trace(wires, dtype, device, atol):
    psi, state = random_state(4, 2, dtype, device, seed=4)
    rho = M.reduced_density_matrix(state, wires)
    d = 2 ** len(wires)
    assert rho.shape == (2, d, d) and rho.dtype == dtype
    r = as_np(rho)
    np.testing.assert_allclose(r, partial_trace_np(psi, list(wires), 4), atol=atol)
    np.testing.assert_allclose(np.trace(r, axis1=1, axis2=2), [1, 1], atol=atol)
    np.testing.assert_allclose(r, r.conj().transpose(0, 2, 1), atol=atol)
    assert np.linalg.eigvalsh(r.astype(np.complex128)).min() > -10 * atol


def _record_gram_calls(monkeypatch):
    """The wires of every native gram call, in order."""
    calls = []
    gram = M.native.gram_levels
    monkeypatch.setattr(M.native, "gram_levels", lambda *a, **k: calls.append(a[2]) or gram(*a, **k))
    return calls


def test_reduced_density_matrix_of_a_large_register(dtype, device, atol, monkeypatch):
    """16 qubits (the CPU's one-pass gram for up to 3 wires) against NumPy's partial trace by
    transpose and product; under autograd the torch path, with the same values."""
    n = 16
    rng = np.random.default_rng(6)
    psi = O.random_state(n, rng, batch=2)
    state = torch.tensor(psi, dtype=dtype, device=device)
    calls = _record_gram_calls(monkeypatch)
    for wires in ((0,), (15, 0), (3, 14, 7)):
        t = psi.reshape(2, *([2] * n)).transpose(0, *[1 + w for w in wires],
                                                   *[1 + w for w in range(n) if w not in wires])
        m = t.reshape(2, 2 ** len(wires), -1)
        want = m @ m.conj().transpose(0, 2, 1)
        np.testing.assert_allclose(as_np(M.reduced_density_matrix(state, wires)), want, atol=10 * atol)
        # torch's gradient of Σ Re(W ∘ ρ) is conj(W + W†) on the wires: NumPy's product on that view
        w = rng.normal(size=want.shape) + 1j * rng.normal(size=want.shape)
        leaf = state.clone().requires_grad_()
        rho = M.reduced_density_matrix(leaf, wires)
        (rho * torch.as_tensor(w, dtype=dtype, device=device)).real.sum().backward()
        g = ((w + w.conj().transpose(0, 2, 1)).conj() @ m).reshape(t.shape)
        inverse = np.argsort([0, *[1 + v for v in wires], *[1 + v for v in range(n) if v not in wires]])
        want_grad = g.transpose(*inverse).reshape(2, -1)
        np.testing.assert_allclose(as_np(leaf.grad), want_grad, atol=20 * atol)
    native_here = device == "cpu" and M.native.runs_on(state)
    assert calls == ([w for w in ((0,), (15, 0), (3, 14, 7)) for _ in (0, 1)] if native_here else [])
    if dtype == torch.complex128:
        small = torch.tensor(O.random_state(16, rng, batch=1), dtype=dtype, device=device, requires_grad=True)
        f = lambda s: M.reduced_density_matrix(s, (2, 9))            # noqa: E731
        u = torch.randn(1, 4, 4, dtype=dtype, generator=torch.Generator().manual_seed(0)).to(device)
        direction = torch.randn_like(small)
        # a directional derivative against a central difference (gradcheck on 2^16 inputs is too slow)
        eps = 1e-6
        (f(small) * u).real.sum().backward()
        with torch.no_grad():
            numeric = ((f(small + eps * direction) - f(small - eps * direction)) * u).real.sum() / (2 * eps)
            analytic = (small.grad.conj() * direction).real.sum()
        np.testing.assert_allclose(float(analytic), float(numeric), rtol=1e-6, atol=1e-9)


def test_reduced_density_matrix_of_one_wire_in_a_large_batch(dtype, device, atol, monkeypatch):
    """One wire of 10-15 qubits also takes the CPU's gram (trajectories' branch probabilities)."""
    n = 11
    rng = np.random.default_rng(7)
    psi = O.random_state(n, rng, batch=33)
    state = torch.tensor(psi, dtype=dtype, device=device)
    calls = _record_gram_calls(monkeypatch)
    for w in (0, 5, 10):
        t = np.moveaxis(psi.reshape(33, *([2] * n)), 1 + w, 1).reshape(33, 2, -1)
        want = t @ t.conj().transpose(0, 2, 1)
        np.testing.assert_allclose(as_np(M.reduced_density_matrix(state, [w])), want, atol=10 * atol)
    native_here = device == "cpu" and M.native.runs_on(state)
    assert calls == ([(0,), (5,), (10,)] if native_here else [])


def test_reduced_density_matrix_bell_and_product(dtype, device, atol):
    rho = as_np(M.reduced_density_matrix(bell(dtype, device), [1]))
    np.testing.assert_allclose(rho, [np.eye(2) / 2], atol=atol)
    rho = as_np(M.reduced_density_matrix(bell(dtype, device), [1, 0]))
    np.testing.assert_allclose(rho[0], np.outer([1, 0, 0, 1], [1, 0, 0, 1]) / 2, atol=atol)
    # product state: the reduced state of wire 1 is pure
    s = tql.Circuit(3, dtype=dtype).to(device).ry(1, 0.8).h(0).cnot(0, 2)()
    v = np.array([math.cos(0.4), math.sin(0.4)])
    np.testing.assert_allclose(as_np(M.reduced_density_matrix(s, 1))[0], np.outer(v, v), atol=atol)


def test_expval_z(dtype, device, atol):
    psi, state = random_state(3, 4, dtype, device, seed=5)
    z = M.expval_z(state, (2, 0, 1))
    expected = np.stack([sum(np.abs(psi[:, i]) ** 2 * (1 - 2 * bit(i, w, 3)) for i in range(8))
                         for w in (2, 0, 1)], axis=1)
    assert z.shape == (4, 3) and not z.is_complex()
    np.testing.assert_allclose(as_np(z), expected, atol=atol)
    np.testing.assert_allclose(as_np(M.expval_z(state)), expected[:, [1, 2, 0]], atol=atol)
    # analytic: <Z> = cos θ after RX(θ), per sample
    thetas = np.array([0.0, 0.3, 1.7, 3.1])
    c = tql.Circuit(2, dtype=dtype).to(device)
    c.rx(1, input=0)
    out = M.expval_z(c(torch.tensor(thetas[:, None], device=device)), [0, 1])
    np.testing.assert_allclose(as_np(out), np.stack([np.ones(4), np.cos(thetas)], 1), atol=atol)
    np.testing.assert_allclose(as_np(M.expval_z(bell(dtype, device))), [[0, 0]], atol=atol)


@pytest.mark.parametrize("path", ["native bit sums", "folds"])
def test_expval_z_on_every_wire_of_a_large_register(path, dtype, device, atol, monkeypatch):
    """All 13 wires (and a subset out of order) against sums over bitstrings, with gradients; both
    the CPU's native pass and the folds every device runs."""
    if path == "folds":
        monkeypatch.setattr(M.native, "runs_on", lambda state: False)
    elif device != "cpu" or not M.native.runs_on(torch.zeros(1, 2, dtype=torch.complex64)):
        pytest.skip("the native kernels run on the CPU with the library built (the folds run here)")
    n = 13
    rng = np.random.default_rng(3)
    psi = O.random_state(n, rng, batch=2)
    state = torch.tensor(psi, dtype=dtype, device=device, requires_grad=True)
    z = 1 - 2 * ((np.arange(2 ** n)[:, None] >> (n - 1 - np.arange(n))) & 1)         # (2^n, n)
    out = M.expval_z(state)
    np.testing.assert_allclose(as_np(out), (np.abs(psi) ** 2) @ z, atol=10 * atol)
    sub = M.expval_z(state, (5, 0, 12))
    np.testing.assert_allclose(as_np(sub), (np.abs(psi) ** 2) @ z[:, [5, 0, 12]], atol=10 * atol)
    g = rng.normal(size=(2, n))
    weights = torch.as_tensor(g, dtype=out.dtype, device=device)
    (out * weights).sum().backward()
    np.testing.assert_allclose(as_np(state.grad), 2 * psi * (g @ z.T), atol=10 * atol)
    # the same gradient with a graph of it (the backward's torch-ops form)
    graph, = torch.autograd.grad((M.expval_z(state) * weights).sum(), state, create_graph=True)
    assert graph.requires_grad
    np.testing.assert_allclose(as_np(graph), 2 * psi * (g @ z.T), atol=10 * atol)
    if dtype == torch.complex128:
        small = torch.tensor(O.random_state(3, rng, batch=2), dtype=dtype, device=device, requires_grad=True)
        assert torch.autograd.gradgradcheck(lambda s: M.expval_z(s, (2, 0)), (small,))


@pytest.mark.parametrize("path", ["native", "torch"])
def test_probabilities_of_a_large_register_and_their_gradient(path, dtype, device, atol, monkeypatch):
    """|ψ|² on 2^13 amplitudes (the CPU's one-pass kernel, or torch's ops) against NumPy, with
    the gradient 2 ψ g, also with a graph of it."""
    if path == "torch":
        monkeypatch.setattr(M.native, "runs_on", lambda state: False)
    elif device != "cpu" or not M.native.runs_on(torch.zeros(1, 2, dtype=torch.complex64)):
        pytest.skip("the native kernels run on the CPU with the library built (torch's ops run here)")
    rng = np.random.default_rng(4)
    psi = O.random_state(13, rng, batch=2)
    state = torch.tensor(psi, dtype=dtype, device=device, requires_grad=True)
    p = M.probabilities(state)
    assert p.dtype == state.real.dtype and p.shape == (2, 2 ** 13)
    np.testing.assert_allclose(as_np(p), np.abs(psi) ** 2, atol=atol)
    np.testing.assert_allclose(as_np(M.probabilities(state, (12, 0))), marginal_np(psi, (12, 0), 13), atol=10 * atol)
    g = torch.as_tensor(rng.normal(size=p.shape), dtype=p.dtype, device=device)
    (M.probabilities(state) * g).sum().backward()
    np.testing.assert_allclose(as_np(state.grad), 2 * psi * as_np(g), atol=10 * atol)
    state.grad = None
    M.probabilities(state).sum().backward()                   # the gradient arrives expanded
    np.testing.assert_allclose(as_np(state.grad), 2 * psi, atol=10 * atol)
    graph, = torch.autograd.grad((M.probabilities(state) * g).sum(), state, create_graph=True)
    assert graph.requires_grad
    np.testing.assert_allclose(as_np(graph), 2 * psi * as_np(g), atol=10 * atol)


def test_sampling_all_wires_of_a_large_register_by_the_native_cdf(dtype, device, monkeypatch):
    """2^13 amplitudes, not normalised, 2 samples: the native running sums against NumPy's cumsum,
    and the same draws from a seeded generator as torch's cumsum path gives."""
    if device != "cpu" or not M.native.runs_on(torch.zeros(1, 2, dtype=torch.complex64)):
        pytest.skip("the native kernels run on the CPU with the library built (torch's cumsum runs here)")
    rng = np.random.default_rng(8)
    psi = 1.7 * O.random_state(13, rng, batch=2)
    state = torch.tensor(psi, dtype=dtype, device=device)
    want = np.cumsum(np.abs(as_np(state).astype(np.complex128)) ** 2, axis=1)
    tol = 1e-6 if dtype == torch.complex64 else 1e-12        # squares in the state's precision
    np.testing.assert_allclose(as_np(M.native.cdf(state)), want, rtol=tol, atol=tol)
    # upper bounds with ties (zero probabilities), draws on a boundary and past the end
    rows = torch.tensor([[0.1, 0.1, 0.1, 0.5, 1.0], [0.0, 0.0, 0.2, 0.2, 0.2]], dtype=torch.float64)
    u = torch.tensor([[0.0, 0.1, 0.3, 1.0, 1.5, 0.05], [0.0, 0.1, 0.2, 0.25, -1.0, 0.19]], dtype=torch.float64)
    want_idx = torch.searchsorted(rows, u, right=True).clamp(max=4)
    assert torch.equal(M.native.upper_bound(rows, u), want_idx)
    native_draws = M.sample(state, 500, generator=torch.Generator().manual_seed(5))
    monkeypatch.setattr(M.native, "runs_on", lambda s: False)
    torch_draws = M.sample(state, 500, generator=torch.Generator().manual_seed(5))
    assert torch.equal(native_draws, torch_draws)
    bad = state.clone()
    bad[1, 7] = float("nan")
    monkeypatch.undo()
    with pytest.raises(ValueError, match="state 1 has zero norm or contains NaN"):
        M.sample(bad, 10)


def test_expval_z_gradient():
    c = tql.Circuit(2, dtype=torch.complex128)
    c.rx(0, trainable=True)
    M.expval_z(c(), [0]).sum().backward()
    np.testing.assert_allclose(c.weights.grad.numpy(), [-math.sin(float(c.weights.detach()[0]))], atol=1e-12)


# ---------------------------------------------------------------------------------------------
# bad input
def test_bad_states_and_wires():
    s = tql.zero_state(2)
    with pytest.raises(ValueError, match="probabilities: wire 2 is out of range for 2 wires"):
        M.probabilities(s, [0, 2])
    with pytest.raises(ValueError, match="probabilities: repeated wires"):
        M.probabilities(s, [1, 1])
    with pytest.raises(TypeError, match="probabilities: wire 0.5 is not an int"):
        M.probabilities(s, [0.5])
    with pytest.raises(ValueError, match="needs at least one wire|wires must not be empty"):
        M.expval_z(s, [])
    with pytest.raises(TypeError, match="wires must be an int or a sequence"):
        M.expval_z(s, "01")
    with pytest.raises(ValueError, match="not a power of two"):
        M.probabilities(torch.zeros(1, 3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="shape \\(batch, 2\\*\\*n\\)"):
        M.probabilities(torch.zeros(4, dtype=torch.complex64))
    with pytest.raises(TypeError, match="complex64 or complex128"):
        M.expval_z(torch.zeros(1, 4))
    with pytest.raises(TypeError, match="must be a torch.Tensor"):
        M.reduced_density_matrix([[1, 0]], [0])
    with pytest.raises(ValueError, match="reduced_density_matrix: wire 3 is out of range"):
        M.reduced_density_matrix(s, [3])
    with pytest.raises(ValueError, match="give the wires"):
        M.reduced_density_matrix(s, None)


def test_bad_sampling_arguments():
    s = tql.zero_state(2)
    with pytest.raises(ValueError, match="shots must be >= 1"):
        M.sample(s, 0)
    with pytest.raises(TypeError, match="shots must be an int"):
        M.sample(s, 10.0)
    with pytest.raises(TypeError, match="generator must be a torch.Generator"):
        M.sample(s, 10, generator=0)
    with pytest.raises(ValueError, match="state 1 has zero norm"):
        M.sample(torch.cat([s, torch.zeros_like(s)]), 10)
    with pytest.raises(ValueError, match="sample: wire 4 is out of range"):
        M.sample(s, 10, wires=[4])
    with pytest.raises(TypeError, match="samples must be an integer tensor"):
        M.to_bits(torch.tensor([1.0]), 2)
    with pytest.raises(ValueError, match="sample value 4 is out of range \\[0, 4\\) for n=2"):
        M.to_bits(torch.tensor([1, 4]), 2)
    with pytest.raises(ValueError, match="sample value -1"):
        M.counts(torch.tensor([-1, 0]), 2)
    with pytest.raises(ValueError, match="n must be in"):
        M.to_bits(torch.tensor([0]), 0)
    with pytest.raises(TypeError, match="n must be an int"):
        M.counts(torch.tensor([0]), "2")
    with pytest.raises(ValueError, match="batch_index 2 is out of range for 2"):
        M.counts(torch.zeros(2, 5, dtype=torch.int64), 2, batch_index=2)
    with pytest.raises(ValueError, match="shape \\(B, shots\\) or \\(shots,\\)"):
        M.counts(torch.zeros(1, 2, 3, dtype=torch.int64), 2)
