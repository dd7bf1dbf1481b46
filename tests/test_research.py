"""Research models (Paddle Quantum tutorials): fast runs that still meet a meaningful bar, exact
references for their building blocks, bad input, and smoke runs of the examples."""
import importlib.util
import math
import pathlib

import numpy as np
import pytest
import scipy.linalg as sla
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed, qinfo
from torchquantum_layers import research as R

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
H3 = "-Z0 Z1 - Z1 Z2 - Z0 Z2"


def test_gibbs_state_matches_scipy_expm_and_minimises_free_energy():
    beta = 1.5
    h = tql.Hamiltonian(H3)
    g = R.gibbs_state(h, beta)
    hd = h.to_dense(3).numpy()
    ref = sla.expm(-beta * hd)
    np.testing.assert_allclose(g.numpy(), ref / np.trace(ref), atol=1e-12)
    # F(ρ_G) = −ln Z / β with the exact entropy, and any other state has a larger free energy
    z = np.trace(sla.expm(-beta * hd)).real
    f_g = R.free_energy_loss(g[None], h, beta, entropy="von-neumann")
    assert abs(float(f_g) + math.log(z) / beta) < 1e-10
    other = qinfo.random_density_matrix(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.complex128)
    assert (R.free_energy_loss(other, h, beta, entropy="von-neumann") > f_g).all()
    with pytest.raises(ValueError, match="entropy must be"):
        R.free_energy_loss(g[None], h, beta, entropy="shannon")
    with pytest.raises(ValueError, match="beta must be"):
        R.gibbs_state(h, -1.0)


def test_gibbs_preparation_fast():
    res = R.prepare_gibbs_state(H3, beta=1.5, depth=2, lr=0.3, steps=60, seed=14)
    # one ancilla: rank <= 2, so the ceiling is 0.9926 (sum of the two largest Gibbs weights)
    assert res.fidelity >= 0.99
    assert res.loss[-1] < res.loss[0]
    assert bool(mixed.is_density(res.rho[None]).all())
    assert R.prepare_gibbs_state(H3).fidelity >= 0.98          # the defaults converge


def test_vqsd_reaches_the_spectrum():
    spectrum = torch.tensor([0.5, 0.3, 0.1, 0.1], dtype=torch.float64)
    rho = R.spectrum_state(spectrum.tolist(), seed=1)
    torch.testing.assert_close(torch.linalg.eigvalsh(rho).flip(0), spectrum)
    res = R.vqsd(rho, steps=100, seed=14)
    assert float((res.eigenvalues - spectrum).abs().max()) < 2e-3
    # the learned eigenvectors diagonalise ρ
    v = res.eigenvectors
    assert torch.allclose((v.conj().T @ rho @ v).diagonal().real, res.eigenvalues, atol=1e-12)
    with pytest.raises(ValueError, match="strictly increasing"):
        R.vqsd(rho, weights=[0.4, 0.3, 0.2, 0.1])
    with pytest.raises(ValueError, match="sum to 1"):
        R.spectrum_state([0.5, 0.5, 0.5, 0.5])


def test_vqsvd_small_matrix():
    # Paddle's first example: M = 2 X⊗Z + 6 Z⊗X + 3 I, singular values 11, 7, 5, 1
    m = (2 * tql.Hamiltonian("X0 Z1") + 6 * tql.Hamiltonian("Z0 X1") + 3 * tql.Hamiltonian("I")).to_dense(2)
    res = R.vqsvd(m, depth=3, steps=30, lr=0.1, refine_steps=30, seed=14)
    torch.testing.assert_close(res.exact, torch.tensor([11.0, 7.0, 5.0, 1.0], dtype=torch.float64))
    assert float(((res.singular_values - res.exact).abs() / res.exact).max()) < 1e-2
    # the learned vectors are singular vectors: M v_j = m_j u_j
    mv = m @ res.V
    assert torch.allclose(mv, res.U * res.singular_values.to(mv.dtype), atol=0.1)
    with pytest.raises(ValueError, match="must be square"):
        R.vqsvd(np.ones((4, 2)))
    with pytest.raises(ValueError, match="not a power of two"):
        R.vqsvd(np.eye(3))
    with pytest.raises(ValueError, match="strictly decreasing"):
        R.vqsvd(np.eye(4), weights=[1, 2, 3, 4])


def test_paddle_random_matrix_is_paddles():
    s = np.linalg.svd(R.paddle_random_matrix(3, 42), compute_uv=False)
    np.testing.assert_allclose(s[:4], [54.83484985, 19.18141073, 14.98866247, 11.61419557], atol=1e-7)


def test_autoencoder_fast():
    res = R.quantum_autoencoder(steps=60, seed=14, state_seed=1)
    assert res.fidelity >= 0.885
    assert res.loss[-1] < 0.11               # the optimum is 0.1 (weight beyond the 4 largest eigenvalues)
    with pytest.raises(ValueError, match="n_trash must be"):
        R.quantum_autoencoder(n_trash=3, steps=1)


def test_autoencode_with_perfectly_compressible_state():
    # ρ_in = |0><0| ⊗ σ: the identity encoder is already optimal, decoding is exact
    sigma = qinfo.random_density_matrix(2, generator=torch.Generator().manual_seed(2), dtype=torch.complex128)
    rho = mixed.basis_density([0], dtype=torch.complex128)[0]
    rho_in = torch.kron(rho, sigma[0])[None]
    enc = tql.Circuit(3).double()
    loss, out = R.autoencode(enc, rho_in, (0,))
    assert abs(float(loss)) < 1e-12
    assert abs(float(qinfo.fidelity(rho_in, out)) - 1) < 1e-10


def test_qgan_fast():
    res = R.train_qgan(rounds=20, seed=7)
    assert res.fidelity >= 0.99
    with pytest.raises(ValueError, match="not normalised"):
        R.QGAN(torch.ones(1, 4, dtype=torch.complex128))
    with pytest.raises(ValueError, match="optimizer must be"):
        R.train_qgan(rounds=1, optimizer="lbfgs")


def test_barren_plateau_batching_matches_explicit_circuits():
    n, depth = 3, 2
    g = R.gradient_samples(n, samples=4, depth=depth, seed=5)
    rng = np.random.default_rng(5)
    k = depth * n
    theta = rng.uniform(0, 2 * math.pi, (4, k))
    axis = rng.integers(0, 3, (4, k))
    for b in range(4):
        def cost(t0):
            c = tql.Circuit(n).double()
            for w in range(n):
                c.ry(w, math.pi / 4)
            for layer in range(depth):
                for w in range(n):
                    j = layer * n + w
                    angle = t0 if j == 0 else float(theta[b, j])
                    c.add(["RX", "RY", "RZ"][axis[b, j]], w, angle)
                for w in range(n - 1):
                    c.cz(w, w + 1)
            return float(c()[0, 0].abs() ** 2)
        shift = (cost(theta[b, 0] + math.pi / 2) - cost(theta[b, 0] - math.pi / 2)) / 2
        assert abs(float(g[b]) - shift) < 1e-10


def test_barren_plateau_variance_decays():
    res = R.gradient_variance((2, 4, 6), samples=200, seed=42)
    assert res.variance[0] > res.variance[1] > res.variance[2]
    assert res.slope < -0.4
    with pytest.raises(ValueError, match="samples must be"):
        R.gradient_samples(2, samples=1)


def test_plot_needs_matplotlib_or_saves(tmp_path):
    res = R.BarrenResult(n_wires=[2, 3], variance=[0.1, 0.05], mean=[0.0, 0.0], slope=-0.69)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"torchquantum-layers\[plot\]"):
            R.plot_gradient_variance(res, path=str(tmp_path / "bp.png"))
        return
    R.plot_gradient_variance(res, path=str(tmp_path / "bp.png"))
    assert (tmp_path / "bp.png").exists()


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name,kwargs", [
    ("gibbs", dict(steps=3)), ("vqsd", dict(steps=3)), ("vqsvd", dict(steps=2, refine_steps=2, depth=2)),
    ("autoencoder", dict(steps=2)), ("qgan", dict(rounds=1)),
    ("barren_plateau", dict(n_wires=(2, 3), samples=10, plot=None))])
def test_examples_run(name, kwargs):
    load(name).main(verbose=False, **kwargs)


def test_barren_plateau_plot_renders_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    from torchquantum_layers.research.barren import gradient_variance, plot_gradient_variance
    result = gradient_variance((2, 3, 4), samples=20)
    path = tmp_path / "bp.png"
    plot_gradient_variance(result, path=str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_gibbs_at_infinite_temperature_is_maximally_mixed():
    h = tql.Hamiltonian("Z0 Z1 + 0.5*X0")
    np.testing.assert_allclose(R.gibbs_state(h, 0.0).numpy(), np.eye(4) / 4, atol=1e-12)
    # β = 0: the loss is −S, smallest at the maximally mixed state
    mm = torch.eye(4, dtype=torch.complex128)[None] / 4
    other = qinfo.random_density_matrix(2, 3, generator=torch.Generator().manual_seed(1), dtype=torch.complex128)
    loss_mm = R.free_energy_loss(mm, h, 0.0, entropy="von-neumann")
    assert float(loss_mm) == pytest.approx(-math.log(4), abs=1e-10)
    assert (R.free_energy_loss(other, h, 0, entropy="von-neumann") > loss_mm).all()
    # two ancillas for two system qubits: full rank is reachable
    res = R.prepare_gibbs_state("Z0 Z1 + 0.5*X0", beta=0.0, n_ancilla=2, steps=80, lr=0.2, seed=3)
    assert res.fidelity >= 0.98
    for bad in (-1.0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="beta must be a finite number >= 0"):
            R.free_energy_loss(mm, h, bad)
        with pytest.raises(ValueError, match="beta must be a finite number >= 0"):
            R.prepare_gibbs_state("Z0 Z1", beta=bad, steps=1)


# ------------------------------------------------------------------------------------------------
# audit regressions
def test_free_energy_of_a_single_matrix_matches_the_analytic_value():
    """F = Tr(Hρ) − S(ρ)/β for ρ = diag(p) and H = −Z0 + 0.5 Z1 (diagonal: Tr Hρ = Σ p_i h_i),
    the Taylor entropy −2Σp² + Σp³/2 + 3/2; one (N, N) matrix is a batch of one."""
    p = np.array([0.4, 0.3, 0.2, 0.1])
    hdiag = np.array([-1 + 0.5, -1 - 0.5, 1 + 0.5, 1 - 0.5])
    beta = 0.7
    rho = torch.tensor(np.diag(p), dtype=torch.complex128)
    vn = -(p * np.log(p)).sum()
    taylor = -2 * (p ** 2).sum() + (p ** 3).sum() / 2 + 1.5
    for entropy, s in (("von-neumann", vn), ("taylor", taylor)):
        f = R.free_energy_loss(rho, "-Z0 + 0.5*Z1", beta, entropy=entropy)
        assert f.shape == (1,) and abs(float(f) - ((p * hdiag).sum() - s / beta)) < 1e-12
    with pytest.raises(ValueError, match="shape"):
        R.free_energy_loss(torch.zeros(1, 4, 3, dtype=torch.complex128), "Z0", beta)


def test_gibbs_refuses_a_non_hermitian_hamiltonian():
    # e^{−βH} of 1j·Z0 is not a state; eigh would silently read only one triangle
    with pytest.raises(ValueError, match="not Hermitian"):
        R.gibbs_state("1j*Z0 + Z1", 1.0)
    with pytest.raises(ValueError, match="not Hermitian"):
        R.prepare_gibbs_state("1j*Z0 Z1", steps=1)
    with pytest.raises(ValueError, match="n_ancilla must be"):
        R.prepare_gibbs_state("Z0 Z1", n_ancilla=-1, steps=1)


def test_research_models_name_their_bad_arguments():
    rho = R.spectrum_state([0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0], seed=1)
    with pytest.raises(ValueError, match="give one density matrix, got a batch of 2"):
        R.quantum_autoencoder(torch.stack([rho, rho]), steps=1)
    with pytest.raises(ValueError, match="n_trash must be"):
        R.quantum_autoencoder(rho, n_trash=1.5, steps=1)
    with pytest.raises(ValueError, match="depth must be a positive int"):
        R.gradient_samples(2, samples=4, depth=0)
    with pytest.raises(ValueError, match="non-negative and sum to 1"):
        R.spectrum_state([float("nan"), 0.5])
    with pytest.raises(ValueError, match="rank must be an int"):
        R.vqsvd(np.eye(4), rank=2.7, steps=1)
    with pytest.raises(ValueError, match="rank must be an int"):
        R.vqsvd(np.eye(4), rank="2", steps=1)
    with pytest.raises(TypeError, match="dtype must be complex"):
        R.vqsvd(np.eye(4), dtype=torch.float64, steps=1)
    with pytest.raises(ValueError, match="not Hermitian"):
        R.vqsd(torch.tensor([[0.5, 0.3], [0.0, 0.5]], dtype=torch.complex128), steps=1)


@pytest.mark.parametrize("call,match", [
    (lambda: R.prepare_gibbs_state("Z0 Z1", depth=-1, steps=1), "prepare_gibbs_state: depth must be a positive int, got -1"),
    (lambda: R.prepare_gibbs_state("Z0 Z1", depth=1.5, steps=1), "prepare_gibbs_state: depth must be a positive int, got 1.5"),
    (lambda: R.prepare_gibbs_state("Z0 Z1", steps=0), "prepare_gibbs_state: steps must be a positive int, got 0"),
    (lambda: R.vqsd(np.eye(4) / 4, depth=-1, steps=1), "vqsd: depth must be a positive int, got -1"),
    (lambda: R.vqsd(np.eye(4) / 4, steps=0), "vqsd: steps must be a positive int, got 0"),
    (lambda: R.vqsd(np.eye(4) / 4, steps=True), "vqsd: steps must be a positive int, got True"),
    (lambda: R.quantum_autoencoder(depth=-1, steps=1), "quantum_autoencoder: depth must be a positive int, got -1"),
    (lambda: R.quantum_autoencoder(steps=0), "quantum_autoencoder: steps must be a positive int, got 0"),
    (lambda: R.vqsvd(np.eye(4), depth=0, steps=1), "vqsvd: depth must be a positive int, got 0"),
    (lambda: R.vqsvd(np.eye(4), steps=-2), "vqsvd: steps must be a positive int, got -2"),
    (lambda: R.vqsvd(np.eye(4), steps=1, refine_steps=-1), "vqsvd: refine_steps must be an int >= 0, got -1"),
    # disc_steps=0 used to end in an UnboundLocalError (the loss of an empty loop)
    (lambda: R.train_qgan(rounds=1, disc_steps=0), "train_qgan: disc_steps must be a positive int, got 0"),
    (lambda: R.train_qgan(rounds=1, gen_steps=0), "train_qgan: gen_steps must be a positive int, got 0"),
    (lambda: R.train_qgan(rounds=0), "train_qgan: rounds must be a positive int, got 0"),
    (lambda: R.train_qgan(rounds=1, gen_layers=-1), "QGAN: gen_layers must be an int >= 0, got -1"),
])
def test_research_models_refuse_bad_depths_and_step_counts(call, match):
    """A depth or step count that would build an empty/negative ansatz or train nothing is refused
    by name before any work (depth=-1 / steps=0 used to run silently)."""
    with pytest.raises(ValueError, match=match):
        call()


def test_research_models_accept_numpy_integer_counts():
    res = R.vqsd(torch.diag(torch.tensor([0.7, 0.3], dtype=torch.complex128)), depth=np.int64(1), steps=np.int64(2))
    assert len(res.loss) == 2


@pytest.mark.parametrize("n_wires,error,match", [
    ([2, 2.7], ValueError, "each n_wires entry must be a positive int, got 2.7"),   # was truncated to 2
    ([0, 2], ValueError, "each n_wires entry must be a positive int, got 0"),
    (3, TypeError, "n_wires must be a list of qubit counts, got 3"),
])
def test_gradient_variance_refuses_bad_qubit_counts(n_wires, error, match):
    with pytest.raises(error, match=match):
        R.gradient_variance(n_wires, samples=4)
