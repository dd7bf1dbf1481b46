"""tql.mps: the matrix-product-state simulator against the state-vector engine, the dense NumPy
oracle and analytic states (GHZ, product states), plus truncation, sampling and gradients."""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mps
from torchquantum_layers import optimization as opt

from . import oracle

GATES_1 = [("RX", 1), ("RY", 1), ("RZ", 1), ("H", 0), ("S", 0), ("T", 0), ("U3", 3), ("ROT", 3)]
GATES_2 = [("CNOT", 0), ("CRX", 1), ("RZZ", 1), ("ISWAP", 0), ("SWAP", 0), ("CU3", 3), ("CH", 0), ("RXX", 1)]
GATES_3 = [("TOFFOLI", 0), ("CSWAP", 0), ("CCZ", 0)]


def random_circuit(n, n_ops, seed, batch=3, dtype=torch.complex128, device="cpu", wide=True):
    """A tql circuit, the same ops for the oracle, and input features (some angles per sample)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, size=(batch, 4))
    c = tql.Circuit(n, dtype=dtype)
    ops = []
    for _ in range(n_ops):
        r = rng.random()
        name, k = (GATES_1[rng.integers(len(GATES_1))] if r < 0.45 else
                   GATES_2[rng.integers(len(GATES_2))] if r < 0.9 or not wide or n < 3 else
                   GATES_3[rng.integers(len(GATES_3))])
        nw = 1 if r < 0.45 else 2 if (r < 0.9 or not wide or n < 3) else 3
        wires = [int(w) for w in rng.choice(n, nw, replace=False)]
        if k and rng.random() < 0.4:
            cols = [int(v) for v in rng.integers(0, 4, size=k)]
            c.add(name, wires, input=tuple(cols) if k > 1 else cols[0])
            ops.append((name, wires, [x[:, col] for col in cols]))
        else:
            angles = [float(a) for a in rng.uniform(0, 2 * math.pi, size=k)]
            c.add(name, wires, *angles)
            ops.append((name, wires, angles))
    return c.to(device), ops, torch.tensor(x, dtype=torch.float64 if dtype == torch.complex128 else torch.float32,
                                           device=device)


def oracle_states(ops, n, batch):
    start = np.zeros((batch, 2 ** n), dtype=np.complex128)
    start[:, 0] = 1
    return oracle.run_ops(ops, n, start)


def tol(dtype, scale=1.0):
    return (1e-4 if dtype == torch.complex64 else 1e-9) * scale


# -- exact agreement ---------------------------------------------------------------------------
@pytest.mark.parametrize("n,seed", [(3, 0), (6, 1), (8, 2)])
def test_random_circuit_matches_statevector_and_oracle(n, seed, dtype, device):
    c, ops, x = random_circuit(n, 6 * n, seed, dtype=dtype, device=device)
    state = mps.run(c, x, max_bond=2 ** ((n + 1) // 2), cutoff=0.0)
    assert max(state.bond_dims) <= 2 ** (n // 2)
    dense = state.to_dense()
    ref = oracle_states(ops, n, x.shape[0])
    t = tol(dtype)
    np.testing.assert_allclose(dense.cpu().numpy(), ref, atol=t)          # global phase kept
    torch.testing.assert_close(dense, c(x), atol=t, rtol=0)
    torch.testing.assert_close(state.norm(), torch.ones_like(state.norm()), atol=t, rtol=0)
    obs = [tql.PauliString("X0"), tql.PauliString({0: "Y", n - 1: "Z"}),
           tql.Hamiltonian.from_string(f"0.5*Z0 Z{n - 1} - 0.3*X{n // 2} + 1.5")]
    torch.testing.assert_close(mps.expval(c, obs, x, max_bond=64), tql.expval(c, obs, x), atol=t, rtol=0)
    for index in (0, 2 ** n - 1, 5 % 2 ** n):
        np.testing.assert_allclose(state.amplitude(index).cpu().numpy(), ref[:, index], atol=t)
    wires = [n - 1, 0] if n > 1 else [0]
    probs = np.abs(ref.reshape((x.shape[0],) + (2,) * n)) ** 2
    keep = [1 + w for w in wires]
    marg = probs.transpose([0] + keep + [1 + w for w in range(n) if w not in wires]).reshape(
        x.shape[0], 2 ** len(wires), -1).sum(-1)
    np.testing.assert_allclose(state.probabilities(wires).cpu().numpy(), marg, atol=t)


def test_four_wire_gate_and_reversed_wire_order(dtype):
    c = tql.Circuit(6, dtype=dtype)
    for w in range(6):
        c.ry(w, 0.3 + 0.2 * w)
    c.doubleexcitation(5, 1, 3, 0, 0.7).cnot(4, 0).toffoli(5, 2, 0).crx(3, 1, 0.4)
    state = mps.run(c, cutoff=0.0)
    torch.testing.assert_close(state.to_dense(), c(), atol=tol(dtype), rtol=0)


def test_batch_with_input_angles_equals_per_sample_loop(dtype, atol):
    c, _, x = random_circuit(5, 40, 7, batch=4, dtype=dtype)
    h = tql.Hamiltonian.from_string("Z0 Z1 + 0.7*X2 Y4")
    batched = mps.expval(c, h, x)
    single = torch.stack([mps.expval(c, h, row) for row in x])
    torch.testing.assert_close(batched, single, atol=10 * atol, rtol=0)


# -- analytic wide states ------------------------------------------------------------------------
def test_ghz_60_qubits(dtype, atol):
    n = 60
    c = tql.Circuit(n, dtype=dtype).h(0)
    for w in range(n - 1):
        c.cnot(w, w + 1)
    state = mps.run(c)
    assert state.bond_dims == [2] * (n - 1)
    obs = [tql.PauliString({0: "Z", 59: "Z"}), tql.PauliString({17: "Z", 31: "Z"}),
           tql.PauliString("X" * n), tql.PauliString("Z5")]
    torch.testing.assert_close(state.expval(obs), torch.tensor([[1.0, 1.0, 1.0, 0.0]]).to(state.norm()),
                               atol=10 * atol, rtol=0)
    half = torch.tensor([1 / math.sqrt(2)], dtype=dtype)
    torch.testing.assert_close(state.amplitude("0" * n), half, atol=atol, rtol=0)
    torch.testing.assert_close(state.amplitude([1] * n), half, atol=atol, rtol=0)
    torch.testing.assert_close(state.probabilities([0, 59]), torch.tensor([[0.5, 0, 0, 0.5]]).to(state.norm()),
                               atol=atol, rtol=0)
    with pytest.raises(ValueError, match="to_dense"):
        state.to_dense()


def test_product_state_100_qubits(dtype, atol):
    n = 100
    theta = torch.linspace(0.1, 3.0, n, dtype=torch.float64)
    c = tql.Circuit(n, dtype=dtype)
    for w in range(n):
        c.ry(w, float(theta[w]))
    state = mps.run(c)
    assert max(state.bond_dims) == 1
    values = state.expval([tql.PauliString({w: "Z"}) for w in range(n)])
    torch.testing.assert_close(values[0], torch.cos(theta).to(values), atol=atol, rtol=0)


# -- truncation --------------------------------------------------------------------------------
def brickwork(n, layers, seed, dtype=torch.complex128):
    g = torch.Generator().manual_seed(seed)
    c = tql.Circuit(n, dtype=dtype)
    for layer in range(layers):
        for w in range(n):
            c.ry(w, float(torch.rand((), generator=g)) * 2 * math.pi)
            c.rz(w, float(torch.rand((), generator=g)) * 2 * math.pi)
        for w in range(layer % 2, n - 1, 2):
            c.cnot(w, w + 1)
    return c


def test_truncation_error_is_bounded_by_discarded_weight():
    c = brickwork(8, 6, 3)
    obs = [tql.PauliString(f"Z{w}") for w in range(8)] + [tql.PauliString("X0 X7"), tql.PauliString("Y3 Y4")]
    state = mps.run(c, max_bond=2)
    assert max(state.bond_dims) == 2
    eps = float(state.discarded[0])
    assert eps > 1e-4
    exact = tql.expval(c, obs)
    err = (state.expval(obs) - exact).abs().max()
    assert err <= 2 * math.sqrt(eps) + 1e-12
    fidelity = (state.to_dense().conj() * c()).sum(-1).abs() ** 2
    assert 1 - float(fidelity) <= 1.5 * eps
    assert abs(float(state.norm()) - 1) < 1e-12


# -- sampling ----------------------------------------------------------------------------------
def test_sampling_statistics_and_seed():
    c = brickwork(5, 3, 11)
    state = mps.run(c)
    shots = 20000
    bits = state.sample(shots, torch.Generator().manual_seed(0))
    assert bits.shape == (1, shots, 5)
    again = state.sample(shots, torch.Generator().manual_seed(0))
    assert torch.equal(bits, again)
    index = (bits[0] * (2 ** torch.arange(4, -1, -1))).sum(-1)
    counts = torch.bincount(index, minlength=32).double()
    expected = shots * (c().abs() ** 2)[0]
    mask = expected > 5
    chi2 = float((((counts - expected) ** 2)[mask] / expected[mask]).sum())
    assert chi2 < 80                       # ~31 degrees of freedom: p ≈ 1e-6 at 80
    assert float(counts[~mask].sum()) <= 5 * max(1, int(mask.numel() - mask.sum()))


# -- gradients ---------------------------------------------------------------------------------
def _trainable_circuit(n, layers, dtype=torch.complex128):
    c = tql.Circuit(n, dtype=dtype)
    for layer in range(layers):
        for w in range(n):
            c.ry(w, trainable=True)
        for w in range(n - 1):
            c.cnot(w, (w + 1 + layer) % n)
    return c


def test_gradcheck_complex128():
    torch.manual_seed(0)
    c = _trainable_circuit(4, 2)
    h = tql.Hamiltonian.from_string("Z0 Z1 + 0.5*X1 X3 - 0.3*Y2")
    w = c.weights.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v: mps.expval(c, h, weights=v, cutoff=0.0), (w,))


@pytest.mark.parametrize("kind", ["ghz", "product", "zeros"])
def test_gradients_through_degenerate_spectra(kind, dtype):
    """GHZ (two equal Schmidt values), product states and untouched wires: the SVD spectra are
    degenerate; the broadened backward still gives the state-vector engine's gradient."""
    n = 6
    c = tql.Circuit(n, dtype=dtype)
    if kind == "ghz":
        c.h(0)
        for w in range(n - 1):
            c.cnot(w, w + 1)
    for w in range(n):
        c.ry(w, init=0.0 if kind == "zeros" else "uniform", trainable=True)
    if kind != "product":
        c.cnot(0, 3).crx(2, 4, trainable=True, init=0.3 if kind != "zeros" else 0.0)
    h = tql.Hamiltonian.from_string("Z0 Z1 + 0.5*X2 X3 + Z5 - 0.2*Y4")
    value = mps.expval(c, h)
    (grad,) = torch.autograd.grad(value.sum(), c.weights)
    c.weights.grad = None
    (ref,) = torch.autograd.grad(tql.expval(c, h).sum(), c.weights)
    assert torch.isfinite(grad).all()
    torch.testing.assert_close(grad, ref, atol=tol(dtype, 10), rtol=0)


def test_training_40_qubit_ising_energy_decreases():
    torch.manual_seed(0)
    n = 40
    c = tql.Circuit(n)
    for w in range(n):
        c.ry(w, trainable=True, init="small")
    for w in range(n - 1):
        c.cnot(w, w + 1)
    for w in range(n):
        c.ry(w, trainable=True, init="small")
    h = tql.Hamiltonian([(1.0, f"Z{w} Z{w + 1}") for w in range(n - 1)] + [(0.8, f"X{w}") for w in range(n)])
    opt = torch.optim.Adam(c.parameters(), lr=0.1)
    energies = []
    for _ in range(5):
        opt.zero_grad()
        energy = mps.expval(c, h, max_bond=8)[0]
        energy.backward()
        opt.step()
        energies.append(float(energy.detach()))
    assert energies[-1] < energies[0] - 1.0


# -- bad input ---------------------------------------------------------------------------------
def test_rejects_non_circuit():
    with pytest.raises(TypeError, match="tql.Circuit"):
        mps.run("not a circuit")


@pytest.mark.parametrize("max_bond", [0, -3, 2.5, True])
def test_rejects_bad_max_bond(max_bond):
    with pytest.raises(ValueError, match="max_bond"):
        mps.run(tql.Circuit(2).h(0), max_bond=max_bond)


@pytest.mark.parametrize("cutoff", [-1e-3, 1.0, float("nan")])
def test_rejects_bad_cutoff(cutoff):
    with pytest.raises(ValueError, match="cutoff"):
        mps.run(tql.Circuit(2).h(0), cutoff=cutoff)


def test_rejects_out_of_range_wires():
    state = mps.run(tql.Circuit(3).h(0))
    with pytest.raises(ValueError, match="out of range"):
        state.probabilities([0, 3])
    with pytest.raises(ValueError, match="bit"):
        state.amplitude("01")


def test_rejects_observable_beyond_the_circuit():
    c = tql.Circuit(3).h(0)
    with pytest.raises(ValueError, match="wire 5"):
        mps.expval(c, tql.PauliString("Z5"))
    with pytest.raises(ValueError, match="wire 4"):
        mps.run(c).expval(tql.Hamiltonian.from_string("Z0 + X4"))


def test_rejects_noisy_circuits_wide_gates_and_other_methods():
    noisy = tql.MixedCircuit(2).h(0).measure(0)
    with pytest.raises(TypeError, match="MixedCircuit"):
        mps.run(noisy)
    wide = tql.Circuit(6).multirz(list(range(5)), 0.3)
    with pytest.raises(ValueError, match="MULTIRZ"):
        mps.run(wide)
    with pytest.raises(ValueError, match="diff_method"):
        mps.expval(tql.Circuit(2).h(0), "Z0", diff_method="adjoint")


def test_qaoa_on_a_60_node_ring_matches_the_analytic_p1_value():
    # p = 1 MaxCut on a triangle-free 2-regular graph: every edge contributes the same expected cut,
    # 1/2 - sin(4β) sin(2γ) / 4 in this library's angle convention (RZZ(2γJ), J = 1/2; RX(2β)),
    # checked against the state vector at 12 nodes; 60 nodes only fit as an MPS
    gamma, beta = 0.4, 0.3
    per_edge = 0.5 - math.sin(4 * beta) * math.sin(2 * gamma) / 4
    angles = torch.tensor([[gamma, beta]], dtype=torch.float64)
    small = opt.maxcut(opt.cycle_graph(12))
    circuit = opt.qaoa_circuit(small, 1, dtype=torch.complex128)
    assert float(tql.expval(circuit, small.hamiltonian, x=angles)[0]) == pytest.approx(-12 * per_edge, abs=1e-12)
    ring = opt.maxcut(opt.cycle_graph(60))
    value = tql.mps.expval(opt.qaoa_circuit(ring, 1, dtype=torch.complex128), ring.hamiltonian, x=angles, max_bond=16)
    assert float(value[0]) == pytest.approx(-60 * per_edge, abs=1e-9)


# -- shot-based expectations -------------------------------------------------------------------
def _shot_observables():
    h = tql.Hamiltonian([(0.7, tql.PauliString("Z0 Z1")), (-0.4, tql.PauliString("X0 X2")),
                         (0.3, tql.PauliString("Y1 Y3")), (0.5, tql.PauliString("Z2")),
                         (1.25, tql.PauliString({}))])
    return [h, tql.PauliString("X1 Z4"), tql.Hamiltonian([(2.0, tql.PauliString("X5")),
                                                             (-1.0, tql.PauliString("Z0 Z5"))])]


def _exact_shot_variance(psi, ob, n):
    """Σ_g Var_g of one observable, grouped as the estimator groups all observables' terms."""
    from torchquantum_layers.observables.shots import qwc_groups
    keys, coeff = [], []
    for o in _shot_observables():
        terms = [(1.0, o)] if isinstance(o, tql.PauliString) else o.terms
        for _, p in terms:
            if p.ops and (p.x_mask, p.z_mask) not in [(k.x_mask, k.z_mask) for k in keys]:
                keys.append(p)
    mine = {}
    for c, p in ([(1.0, ob)] if isinstance(ob, tql.PauliString) else ob.terms):
        if p.ops:
            mine[(p.x_mask, p.z_mask)] = float(complex(c).real)
    total = np.zeros(psi.shape[0])
    for members in qwc_groups(keys):
        m = sum(mine.get((keys[k].x_mask, keys[k].z_mask), 0.0) * oracle.pauli_matrix(keys[k].label(n))
                for k in members)
        if isinstance(m, float):
            continue
        mean = np.einsum("bi,ij,bj->b", psi.conj(), m, psi).real
        sq = np.einsum("bi,ij,bj->b", psi.conj(), m @ m, psi).real
        total += sq - mean ** 2
    return total


def test_shot_expval_matches_exact_within_standard_errors():
    n, shots, seeds = 6, 400, 20
    c, _, x = random_circuit(n, 5 * n, 3, batch=2, dtype=torch.complex128)
    state = mps.run(c, x, max_bond=8, cutoff=0.0)
    obs = _shot_observables()
    exact = state.expval(obs).numpy()
    psi = state.to_dense().numpy()
    var = np.stack([_exact_shot_variance(psi, o, n) for o in obs], -1)     # (B, n_obs)
    est = np.stack([state.expval(obs, shots=shots, generator=torch.Generator().manual_seed(s)).numpy()
                    for s in range(seeds)])
    se = np.sqrt(var / (shots * seeds))
    assert np.all(np.abs(est.mean(0) - exact) <= 5 * se + 1e-12), (est.mean(0), exact, se)
    # the reported standard error estimates the exact one
    _, std = state.expval(obs, shots=shots, generator=torch.Generator().manual_seed(0), return_std=True)
    np.testing.assert_allclose(std.numpy(), np.sqrt(var / shots), rtol=0.3, atol=1e-3)


def test_shot_expval_is_seeded_and_matches_circuit_entry_point():
    c, _, x = random_circuit(5, 20, 4, batch=3, dtype=torch.complex128)
    obs = [tql.PauliString("Z0 X3"), tql.Hamiltonian([(0.5, tql.PauliString("Y2")), (1.0, tql.PauliString({}))])]
    a = mps.expval(c, obs, x, shots=50, generator=torch.Generator().manual_seed(7))
    b = mps.expval(c, obs, x, shots=50, generator=torch.Generator().manual_seed(7))
    d = mps.run(c, x).expval(obs, shots=50, generator=torch.Generator().manual_seed(7))
    assert a.shape == (3, 2) and a.dtype == torch.float64
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(a, d, rtol=0, atol=0)
    one = mps.expval(c, "Z1", x[0], shots=10, generator=torch.Generator().manual_seed(1))
    assert one.shape == ()


def test_shot_expval_ghz_40_is_exact_from_samples():
    n = 40
    c = tql.Circuit(n).h(0)
    for w in range(n - 1):
        c.cnot(w, w + 1)
    obs = [tql.PauliString({0: "Z", 39: "Z"}), tql.PauliString("X" * n)]
    mean, std = mps.expval(c, obs, shots=200, generator=torch.Generator().manual_seed(0), return_std=True)
    torch.testing.assert_close(mean, torch.ones(1, 2), rtol=0, atol=1e-6)
    torch.testing.assert_close(std, torch.zeros(1, 2), rtol=0, atol=1e-6)


def test_shot_expval_carries_no_gradient():
    c = tql.Circuit(3, dtype=torch.complex128).rx(0, input=0).cnot(0, 1)
    x = torch.tensor([[0.3]], dtype=torch.float64, requires_grad=True)
    out = mps.expval(c, "Z1", x, shots=20, generator=torch.Generator().manual_seed(0))
    assert not out.requires_grad
    assert mps.expval(c, "Z1", x).requires_grad


@pytest.mark.parametrize("shots", [0, -3, 2.5, True, "10"])
def test_shot_expval_rejects_bad_shots(shots):
    c = tql.Circuit(3).h(0)
    with pytest.raises(ValueError, match="shots"):
        mps.expval(c, "Z0", shots=shots)
    with pytest.raises(ValueError, match="shots"):
        mps.run(c).expval("Z0", shots=shots)
    with pytest.raises(ValueError, match="generator"):
        mps.expval(c, "Z0", generator=torch.Generator())
