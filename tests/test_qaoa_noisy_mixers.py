"""Noisy QAOA with the XY and swap mixers (NoisyQAOA(mixer=...), gate_level.py) and QAOATask's
noise_simulator / n_trajectories.

Oracles written here (NumPy only): brute-force cost vectors of graph colouring and fixed-start TSP
from their definitions; the Ising form (h, J) of those costs by a Walsh transform; the XY pair
unitary exp(-iβ (XX + YY)/2) and its documented factors RXX(β) = exp(-iβ XX/2), RYY(β) =
exp(-iβ YY/2) from Kronecker products and eigendecompositions; the swap term exp(-iβ T), T =
|u@t, v@t'⟩⟨u@t', v@t| + h.c., as a brute-force matrix over bitstrings; the uniform superposition
of the brute-force feasible bitstrings; channels as Kraus maps applied to every wire of the gates
a rule names; global folding C (C†C)^k and Richardson extrapolation by numpy.polyfit; readout
errors as Kronecker products of the 2×2 confusion matrices.
"""
import itertools
import math
import warnings

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed
from torchquantum_layers import optimization as opt
from torchquantum_layers.optimization.gate_level import gate_level_qaoa
from torchquantum_layers.optimization.noisy import NoisyQAOA, noisy_expected_cost, noisy_probabilities

pl = pytest.importorskip("pytorch_lightning")

from lightning_tasks.qaoa import QAOATask  # noqa: E402

REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}
# expectations are O(10) (penalties): tolerances relative to that in complex64
TOL = {torch.complex64: 2e-4, torch.complex128: 1e-9}
I2 = np.eye(2)
X = np.array([[0, 1], [1, 0]], dtype=complex)
Y = np.array([[0, -1j], [1j, 0]])
Z = np.diag([1.0, -1.0]).astype(complex)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------------------------------------
# independent references
def all_bits(n):
    return np.array(list(itertools.product([0, 1], repeat=n)))          # index order, wire 0 first


def colouring_costs(edges, n_nodes, k, P):
    X_ = all_bits(n_nodes * k).reshape(-1, n_nodes, k)
    mono = sum((X_[:, u, :] * X_[:, v, :]).sum(1) for u, v in edges)
    return mono + P * ((1 - X_.sum(2)) ** 2).sum(1), (X_.sum(2) == 1).all(1)


def tsp_costs(D, P):
    """Fixed start: city 0 at position 0; wire (c-1) m + (t-1) for c, t in 1 … n-1."""
    n = D.shape[0]
    m = n - 1
    B = all_bits(m * m).reshape(-1, m, m)
    F = np.zeros((B.shape[0], n, n))
    F[:, 0, 0] = 1
    F[:, 1:, 1:] = B
    length = np.einsum("kut,uv,kvt->k", F, D, np.roll(F, -1, axis=2))
    pen = ((1 - B.sum(2)) ** 2).sum(1) + ((1 - B.sum(1)) ** 2).sum(1)
    feas = (B.sum(2) == 1).all(1) & (B.sum(1) == 1).all(1)
    return length + P * pen, feas


def walsh_ising(costs):
    """(h, J upper) with costs = c + Σ h_i z_i + Σ_{i<j} J_ij z_i z_j, z = 1 - 2x (exact for QUBOs)."""
    n = int(round(math.log2(costs.size)))
    z = 1 - 2 * all_bits(n)
    h = z.T @ costs / costs.size
    J = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            J[i, j] = (z[:, i] * z[:, j]) @ costs / costs.size
    h[np.abs(h) < 1e-9] = 0
    J[np.abs(J) < 1e-9] = 0
    return h, J


def expm_h(G, t):
    """exp(-i t G) for Hermitian G."""
    w, V = np.linalg.eigh(G)
    return (V * np.exp(-1j * t * w)) @ V.conj().T


def embed(u, wires, n):
    """The 2^n operator of ``u`` on ``wires`` (wire 0 = most significant bit), by brute force over
    the basis: column j has u[r, c] at the row of j with the bits of ``wires`` replaced by r."""
    k = len(wires)
    N = 2 ** n
    bits = all_bits(n)                                          # (N, n)
    weights = 2 ** (k - 1 - np.arange(k))
    sub_c = bits[:, list(wires)] @ weights                      # (N,)
    out = np.zeros((N, N), dtype=complex)
    for r in range(2 ** k):
        rb = bits.copy()
        rb[:, list(wires)] = (r >> (k - 1 - np.arange(k))) & 1
        rows = rb @ (2 ** (n - 1 - np.arange(n)))
        out[rows, np.arange(N)] += u[r, sub_c]
    return out


def channel_on_wire(rho, kraus, q, n):
    """Σ_K K_q ρ K_q† with K on wire q: entry by entry of the 2×2 blocks of bit q (row x, column w)."""
    N, a, c = rho.shape[0], 2 ** q, 2 ** (n - q - 1)
    r = rho.reshape(a, 2, c, a, 2, c)
    out = np.zeros_like(r)
    for x, w, y, z in itertools.product(range(2), repeat=4):
        coef = sum(K[x, y] * np.conj(K[w, z]) for K in kraus)
        if coef != 0:
            out[:, x, :, :, w, :] += coef * r[:, y, :, :, z, :]
    return out.reshape(N, N)


def depolarizing_kraus(p):
    return [math.sqrt(1 - p) * I2] + [math.sqrt(p / 3) * P for P in (X, Y, Z)]


def amplitude_damping_kraus(g):
    return [np.array([[1, 0], [0, math.sqrt(1 - g)]]), np.array([[0, math.sqrt(g)], [0, 0]])]


def ring_pairs(groups):
    out = []
    for g in groups:
        out += [(g[i], g[i + 1]) for i in range(len(g) - 1)]
        if len(g) > 2:
            out.append((g[-1], g[0]))
    return out


def oracle_ops(costs, n, angles, mixer, groups=None, swap_terms=None):
    """[(name, wires, full unitary)] of the noisy gate sequence after the start state."""
    h, J = walsh_ising(costs)
    z = 1 - 2 * all_bits(n)
    p = len(angles) // 2
    XX, YY = np.kron(X, X), np.kron(Y, Y)
    ops = []
    for g, b in zip(angles[:p], angles[p:]):
        ops.append(("RZ", (), np.diag(np.exp(-1j * g * (z @ h)))))          # noise-free here: one diagonal
        for i in range(n):
            for j in range(i + 1, n):
                if J[i, j]:
                    ops.append(("RZZ", (i, j), np.diag(np.exp(-1j * g * J[i, j] * z[:, i] * z[:, j]))))
        if mixer == "xy":
            for a, c in ring_pairs(groups):
                ops.append(("RXX", (a, c), embed(expm_h(XX / 2, b), (a, c), n)))
                ops.append(("RYY", (a, c), embed(expm_h(YY / 2, b), (a, c), n)))
        else:
            for wires in swap_terms:
                T = np.zeros((16, 16))
                T[0b1001, 0b0110] = T[0b0110, 0b1001] = 1
                ops.append(("DOUBLEEXCITATION", wires, embed(expm_h(T, b), wires, n)))
    return ops


def global_fold(ops, k):
    back = [(name, wires, u.conj().T) for name, wires, u in reversed(ops)]
    return list(ops) + (back + list(ops)) * k


def dense_rho(ops, feasible, n, noise):
    psi = feasible.astype(complex) / math.sqrt(feasible.sum())
    rho = np.outer(psi, psi.conj())
    for name, wires, U in ops:
        d = np.diag(U)
        if np.array_equal(np.diag(d), U):                      # diagonal gates: an elementwise product
            rho = d[:, None] * rho * d.conj()[None, :]
        else:
            rho = U @ rho @ U.conj().T
        for kraus in noise.get(name, ()):
            for q in wires:
                rho = channel_on_wire(rho, kraus, q, n)
    return rho


def pure_cost(costs, feasible, n, angles, mixer, **kw):
    psi = feasible.astype(complex) / math.sqrt(feasible.sum())
    for _, _, U in oracle_ops(costs, n, angles, mixer, **kw):
        psi = U @ psi
    return float(np.abs(psi) ** 2 @ costs)


def confusion(n, p01, p10):
    A = np.array([[1 - p01, p10], [p01, 1 - p10]])
    out = np.ones((1, 1))
    for _ in range(n):
        out = np.kron(out, A)
    return out


def swap_terms_of(n_cities):
    """Fixed-start TSP terms: positions t < t' consecutive among 1 … n-1 (no wrap), cities u < v."""
    m = n_cities - 1

    def q(c, t):
        return (c - 1) * m + (t - 1)
    return [(q(u, t), q(u, t + 1), q(v, t), q(v, t + 1))
            for t in range(1, n_cities - 1) for u in range(1, n_cities) for v in range(u + 1, n_cities)]


# problems: (problem, costs, feasible, n, oracle kwargs)
EDGES3 = [(0, 1)]


def colouring_case(edges, n_nodes, k):
    pr = opt.graph_colouring(edges, k, n_nodes=n_nodes)
    costs, feas = colouring_costs(edges, n_nodes, k, pr.data["penalty"])
    groups = [tuple(v * k + c for c in range(k)) for v in range(n_nodes)]
    return pr, costs, feas, n_nodes * k, dict(groups=groups)


D3 = np.array([[0, 1.0, 2.5], [1.5, 0, 4.0], [2.0, 3.5, 0]])
D4 = np.array([[0, 1.0, 2.5, 3.0], [1.5, 0, 4.0, 1.2], [2.0, 3.5, 0, 2.2], [0.7, 1.9, 2.6, 0]])


def tsp_case(D, mixer):
    pr = opt.tsp(D.tolist())
    costs, feas = tsp_costs(D, pr.data["penalty"])
    n = (D.shape[0] - 1) ** 2
    m = D.shape[0] - 1
    kw = (dict(groups=[tuple((c - 1) * m + t for t in range(m)) for c in range(1, D.shape[0])])
          if mixer == "xy" else dict(swap_terms=swap_terms_of(D.shape[0])))
    return pr, costs, feas, n, kw


def angles_for(p, S, seed, dtype):
    g = np.random.default_rng(seed)
    return torch.tensor(g.uniform(-0.6, 0.6, size=(S, 2 * p)), dtype=REAL[dtype])


def noise_spec_model(rules):
    nm = tql.NoiseModel()
    for ch, gates in rules:
        nm.add(ch, gates=gates)
    return nm


# ------------------------------------------------------------------------------------------------
def test_oracle_costs_match_the_builders():
    # the brute-force costs above are those of the problems the tests use
    for pr, costs, feas, n, _ in [colouring_case([(0, 1)], 2, 2), colouring_case([(0, 1)], 2, 3),
                                  colouring_case([(0, 1), (1, 2)], 3, 2), tsp_case(D3, "xy"), tsp_case(D4, "swap")]:
        np.testing.assert_allclose(pr.diagonal.numpy(), costs, atol=1e-9)
        np.testing.assert_array_equal(pr.feasible_mask().numpy(), feas)


CASES = [("colour-2x2", lambda: colouring_case([(0, 1)], 2, 2), "xy"),
         ("colour-2x3-ring", lambda: colouring_case([(0, 1)], 2, 3), "xy"),
         ("tsp3-xy", lambda: tsp_case(D3, "xy"), "xy"),
         ("tsp3-swap", lambda: tsp_case(D3, "swap"), "swap"),
         ("tsp4-swap", lambda: tsp_case(D4, "swap"), "swap")]


@pytest.mark.parametrize("name, case, mixer", CASES, ids=[c[0] for c in CASES])
def test_density_matches_the_dense_kraus_oracle(name, case, mixer, dtype):
    pr, costs, feas, n, kw = case()
    p = 2 if n <= 6 else 1
    mixer_gates = ["RXX", "RYY"] if mixer == "xy" else ["DOUBLEEXCITATION"]
    nm = noise_spec_model([(mixed.depolarizing(0.03), ["RZZ"]), (mixed.amplitude_damping(0.05), mixer_gates)])
    if mixer == "swap":          # the swap terms are conjugated by S on one wire: a phase-covariant channel
        nm = noise_spec_model([(mixed.depolarizing(0.03), ["RZZ"]), (mixed.depolarizing(0.04), mixer_gates)])
    noise = {"RZZ": [depolarizing_kraus(0.03)]}
    noise.update({g: [amplitude_damping_kraus(0.05) if mixer == "xy" else depolarizing_kraus(0.04)]
                  for g in mixer_gates})
    x = angles_for(p, 2, 1, dtype)
    model = NoisyQAOA(pr, p, nm, mixer=mixer, dtype=dtype)
    got = model(x)
    for s in range(2):
        rho = dense_rho(oracle_ops(costs, n, x[s].double().tolist(), mixer, **kw), feas, n, noise)
        want = float(np.real(np.diag(rho)) @ costs)
        assert float(got[s]) == pytest.approx(want, abs=TOL[dtype] * max(1, abs(want)))
        # noise on: the reported cost moved away from the pure one
        assert abs(want - pure_cost(costs, feas, n, x[s].double().tolist(), mixer, **kw)) > 1e-3


@pytest.mark.parametrize("name, case, mixer", CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_zero_noise_equals_the_exact_qaoa_and_the_oracle(name, case, mixer, dtype):
    pr, costs, feas, n, kw = case()
    x = angles_for(2, 3, 2, dtype)
    nm = tql.NoiseModel().add(mixed.depolarizing(0.0))
    for sim in ("density", "trajectories"):
        model = NoisyQAOA(pr, 2, nm, mixer=mixer, dtype=dtype, simulator=sim, n_trajectories=3)
        got = model(x)
        exact = opt.qaoa(pr, 2, mixer=mixer, dtype=dtype)(x)
        torch.testing.assert_close(got, exact, atol=TOL[dtype] * 10, rtol=0)
        for s in range(3):
            want = pure_cost(costs, feas, n, x[s].double().tolist(), mixer, **kw)
            assert float(got[s]) == pytest.approx(want, abs=TOL[dtype] * 10 * max(1, abs(want)))


def test_ideal_start_follows_double_and_matches_the_oracle():
    pr, costs, feas, n, kw = tsp_case(D3, "swap")
    nm = tql.NoiseModel().add(mixed.depolarizing(0.0))
    model = NoisyQAOA(pr, 1, nm, mixer="swap")                           # complex64, then .double()
    model.double()
    x = angles_for(1, 2, 9, torch.complex128)
    got = model(x)
    assert got.dtype == torch.float64
    for s in range(2):
        assert float(got[s]) == pytest.approx(pure_cost(costs, feas, n, x[s].tolist(), "swap", **kw), abs=1e-9)


def test_colouring_start_is_prepared_by_gates_and_tsp_start_is_ideal():
    pr, costs, feas, n, kw = colouring_case([(0, 1)], 2, 3)
    gl = gate_level_qaoa(pr, 1, "xy", dtype=torch.complex128)
    assert gl.preparation == "gates" and gl.initial_state is None
    # the W-state preparation alone (angles 0): the uniform feasible superposition, exactly
    psi = gl.circuit(torch.zeros(1, 2, dtype=torch.float64))[0].numpy()
    np.testing.assert_allclose(psi, feas / math.sqrt(feas.sum()), atol=1e-12)
    # and with noise on its gates the start is no longer pure (they are noisy like any gate)
    nm = tql.NoiseModel().add(mixed.depolarizing(0.05), gates=["SINGLEEXCITATION"])
    prob = NoisyQAOA(pr, 1, nm, mixer="xy", dtype=torch.complex128).probabilities(torch.zeros(2, dtype=torch.float64))
    assert float(prob.numpy() @ (~feas)) > 1e-3
    pr, costs, feas, n, kw = tsp_case(D3, "swap")
    gl = gate_level_qaoa(pr, 1, "swap", dtype=torch.complex128)
    assert gl.preparation == "ideal"
    np.testing.assert_allclose(gl.initial_state[0].numpy(), feas / math.sqrt(feas.sum()), atol=1e-12)


@pytest.mark.parametrize("mixer", ["xy", "swap"])
def test_trajectories_estimate_the_oracle(mixer, dtype):
    pr, costs, feas, n, kw = tsp_case(D3, mixer)
    mixer_gates = ["RXX", "RYY"] if mixer == "xy" else ["DOUBLEEXCITATION"]
    # amplitude damping after the cost interactions: non-unitary Kraus branches
    nm = noise_spec_model([(mixed.amplitude_damping(0.1), ["RZZ"]), (mixed.depolarizing(0.05), mixer_gates)])
    noise = {"RZZ": [amplitude_damping_kraus(0.1)]}
    noise.update({g: [depolarizing_kraus(0.05)] for g in mixer_gates})
    x = angles_for(2, 2, 3, dtype)
    T = 4000
    model = NoisyQAOA(pr, 2, nm, mixer=mixer, dtype=dtype, simulator="trajectories", n_trajectories=T)
    got = model(x, generator=torch.Generator().manual_seed(5))
    for s in range(2):
        rho = dense_rho(oracle_ops(costs, n, x[s].double().tolist(), mixer, **kw), feas, n, noise)
        diag = np.real(np.diag(rho))
        want = float(diag @ costs)
        sd = math.sqrt(max(float(diag @ costs ** 2) - want ** 2, 0.0))    # upper bound of a trajectory's spread
        assert abs(float(got[s]) - want) < 5 * sd / math.sqrt(T) + 1e-6
    # probabilities through the same sampling
    prob = model.probabilities(x, generator=torch.Generator().manual_seed(6))
    assert prob.shape == (2, 2 ** n)
    torch.testing.assert_close(prob.sum(1), torch.ones(2, dtype=REAL[dtype]), atol=TOL[dtype] * 10, rtol=0)


def test_zne_matches_folded_oracle_with_richardson(dtype):
    pr, costs, feas, n, kw = tsp_case(D3, "xy")
    nm = noise_spec_model([(mixed.depolarizing(0.02), ["RZZ", "RXX", "RYY"])])
    noise = {g: [depolarizing_kraus(0.02)] for g in ("RZZ", "RXX", "RYY")}
    x = angles_for(1, 2, 4, dtype)
    got = NoisyQAOA(pr, 1, nm, mixer="xy", mitigation="zne", dtype=dtype)(x)
    for s in range(2):
        ops = oracle_ops(costs, n, x[s].double().tolist(), "xy", **kw)
        vals = [float(np.real(np.diag(dense_rho(global_fold(ops, k), feas, n, noise))) @ costs) for k in (0, 1, 2)]
        want = float(np.polyval(np.polyfit([1, 3, 5], vals, 2), 0))
        assert float(got[s]) == pytest.approx(want, abs=TOL[dtype] * 10 * max(1, abs(want)))
        ideal = pure_cost(costs, feas, n, x[s].double().tolist(), "xy", **kw)
        assert abs(want - ideal) < abs(vals[0] - ideal)                    # ZNE cuts the error


def test_readout_probabilities_and_analyse_match_the_oracle(dtype):
    pr, costs, feas, n, kw = colouring_case([(0, 1)], 2, 2)
    nm = noise_spec_model([(mixed.depolarizing(0.05), ["RXX", "RYY"])])
    nm.add_readout_error(0.03, 0.06)
    noise = {g: [depolarizing_kraus(0.05)] for g in ("RXX", "RYY")}
    x = angles_for(2, 2, 7, dtype)
    model = NoisyQAOA(pr, 2, nm, mixer="xy", dtype=dtype)
    prob = model.probabilities(x)
    res = model.analyse(x, k=3)
    mitigated = NoisyQAOA(pr, 2, nm, mixer="xy", dtype=dtype, mitigation="readout")(x)
    for s in range(2):
        rho = dense_rho(oracle_ops(costs, n, x[s].double().tolist(), "xy", **kw), feas, n, noise)
        pre = np.real(np.diag(rho))
        read = confusion(n, 0.03, 0.06) @ pre
        np.testing.assert_allclose(prob[s].double().numpy(), read, atol=TOL[dtype])
        assert float(res.expected_cost[s]) == pytest.approx(float(read @ costs), abs=TOL[dtype] * 10)
        assert float(res.feasible_probability[s]) == pytest.approx(float(read @ feas), abs=TOL[dtype])
        assert float(mitigated[s]) == pytest.approx(float(pre @ costs), abs=TOL[dtype] * 10)
    # the functional forms take the mixer too
    torch.testing.assert_close(noisy_probabilities(pr, x, noise_model=nm, mixer="xy", dtype=dtype), prob)
    torch.testing.assert_close(noisy_expected_cost(pr, x, noise_model=nm, mixer="xy", dtype=dtype),
                               res.expected_cost.to(prob.dtype), atol=TOL[dtype] * 10, rtol=0)


@pytest.mark.parametrize("mixer", ["xy", "swap"])
def test_gradcheck_through_the_density_path(mixer):
    pr, *_ = tsp_case(D3, mixer)
    gates = ["RXX", "RYY"] if mixer == "xy" else ["DOUBLEEXCITATION"]
    nm = noise_spec_model([(mixed.amplitude_damping(0.05), ["RZZ"]), (mixed.depolarizing(0.05), gates)])
    model = NoisyQAOA(pr, 1, nm, mixer=mixer, dtype=torch.complex128)
    x = angles_for(1, 2, 8, torch.complex128).requires_grad_()
    assert torch.autograd.gradcheck(lambda a: model(a), (x,), eps=1e-6, atol=1e-6)
    # parameter-shift on density matrices gives the same gradient
    g_bp, = torch.autograd.grad(model(x).sum(), x)
    ps = NoisyQAOA(pr, 1, nm, mixer=mixer, dtype=torch.complex128, diff_method="parameter-shift")
    g_ps, = torch.autograd.grad(ps(x).sum(), x)
    torch.testing.assert_close(g_ps, g_bp, atol=1e-8, rtol=0)
    assert float(g_bp.abs().max()) > 1e-3


# ------------------------------------------------------------------------------------------------
# QAOATask
SPEC = {"channels": [{"channel": "depolarizing", "p": 0.02, "gates": ["RZZ", "RXX", "RYY"]}]}
TASK = dict(problem="graph_colouring", graph=[[0, 1]], n_colours=2, mixer="xy", p=1, n_starts=3,
            dtype="complex128", diff_method="backprop", noise_model=SPEC, lr=0.1)


def trainer(steps, **kw):
    return pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=kw.pop("enable_checkpointing", False),
                      enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", **kw)


def test_task_trains_with_noise_and_the_xy_mixer():
    task = QAOATask(**TASK)
    pr, costs, feas, n, kw = colouring_case([(0, 1)], 2, 2)
    noise = {g: [depolarizing_kraus(0.02)] for g in ("RZZ", "RXX", "RYY")}
    a0 = task.current_angles().detach().clone()
    reported0 = task.expected_costs()
    for s in range(3):
        rho = dense_rho(oracle_ops(costs, n, a0[s].tolist(), "xy", **kw), feas, n, noise)
        assert float(reported0[s]) == pytest.approx(float(np.real(np.diag(rho)) @ costs), abs=1e-9)
    trainer(6).fit(task)
    assert len(task.history) == 6 and task.history[-1] < task.history[0]
    ev = task.evaluation()
    a = task.current_angles().detach()
    j = int(torch.argmin(task.expected_costs()))
    assert ev["ideal_expected_cost"] == pytest.approx(pure_cost(costs, feas, n, a[j].tolist(), "xy", **kw), abs=1e-9)


def test_task_trains_with_trajectories_and_saves_plain_hparams(tmp_path):
    torch.manual_seed(0)
    task = QAOATask(**dict(TASK, noise_simulator="trajectories", n_trajectories=32))
    assert task.noisy["1"].simulator == "trajectories" and task.noisy["1"].n_trajectories == 32
    trainer(4).fit(task)
    assert len(task.history) == 4
    path = tmp_path / "t.ckpt"
    tr = trainer(1, enable_checkpointing=False)
    tr.strategy.connect(task)
    tr.save_checkpoint(path)
    raw = torch.load(path, weights_only=True)
    assert raw["hyper_parameters"]["noise_simulator"] == "trajectories"
    assert raw["hyper_parameters"]["n_trajectories"] == 32
    loaded = QAOATask.load_from_checkpoint(path, weights_only=True)
    assert loaded.noisy["1"].simulator == "trajectories"
    torch.testing.assert_close(loaded.angles, task.angles)


def test_task_with_trajectories_goes_beyond_the_density_limit():
    # 13 qubits of MaxCut: refused by the density simulator, accepted with trajectories
    kw = dict(graph="cycle:13", p=1, n_starts=1, diff_method="backprop", noise_model=SPEC)
    with pytest.raises(ValueError, match="up to 12 qubits.*noise_simulator='trajectories'"):
        QAOATask(**kw)
    task = QAOATask(**kw, noise_simulator="trajectories", n_trajectories=2)
    assert task.noisy["1"].n_qubits == 13 and task().shape == (1,)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(noise_simulator="mps"), ValueError, "noise_simulator must be one of density, trajectories"),
    (dict(noise_simulator="trajectories", n_trajectories=0), ValueError, "n_trajectories must be >= 1"),
    (dict(noise_simulator="trajectories", n_trajectories=2.5), TypeError, "n_trajectories must be an int"),
    (dict(noise_simulator="trajectories", n_trajectories=True), TypeError, "n_trajectories must be an int"),
    (dict(n_trajectories=8), ValueError, "n_trajectories=8 applies to noise_simulator='trajectories'"),
    (dict(noise_model=None, diff_method="adjoint", noise_simulator="trajectories"), ValueError,
     r"apply only with noise_model=\.\.\."),
    (dict(problem="maxcut", graph="paddle", n_colours=None, mixer="swap"), ValueError, "mixer='swap' is the TSP"),
])
def test_task_simulator_options_are_checked(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        QAOATask(**dict(TASK, **kwargs))


def test_noisy_qaoa_mixer_bad_inputs():
    nm = tql.NoiseModel().add(mixed.depolarizing(0.01))
    colour, *_ = colouring_case([(0, 1)], 2, 2)
    with pytest.raises(ValueError, match="mixer='swap' is the TSP tour-exchange mixer; graph_colouring"):
        NoisyQAOA(colour, 1, nm, mixer="swap")
    with pytest.raises(ValueError, match="mixer must be one of"):
        NoisyQAOA(colour, 1, nm, mixer="XY")
    with pytest.raises(ValueError, match="mixer='xy' needs a problem with one-hot groups"):
        NoisyQAOA(opt.maxcut([(0, 1)]), 1, nm, mixer="xy")
    with pytest.raises(TypeError, match="gate_level_qaoa: expected a Problem"):
        gate_level_qaoa("tsp", 1, "xy")
    with pytest.raises(ValueError, match="gate_level_qaoa: mixer must be one of"):
        gate_level_qaoa(colour, 1, "ring")


# ------------------------------------------------------------------------------------------------
# the warm-start mixer (Egger et al.) at gate level: RY(θ) from |0…0⟩, per layer cost, RY(-θ) RZ(2β) RY(θ)
WARM_H = [0.4, -0.7, 0.0, 0.3]
WARM_J = [[0, 0.8, 0, -0.5], [0, 0, 0.6, 0], [0, 0, 0, 1.1], [0, 0, 0, 0]]


def ry_mat(t):
    return np.array([[math.cos(t / 2), -math.sin(t / 2)], [math.sin(t / 2), math.cos(t / 2)]], dtype=complex)


def rz_mat(t):
    return np.diag([np.exp(-0.5j * t), np.exp(0.5j * t)])


def warm_oracle_ops(costs, n, angles, c):
    """[(name, wires, U)] of the gate-level warm QAOA from |0…0⟩, c already clipped."""
    h, J = walsh_ising(costs)
    z = 1 - 2 * all_bits(n)
    theta = 2 * np.arcsin(np.sqrt(c))
    ops = [("RY", (i,), embed(ry_mat(theta[i]), (i,), n)) for i in range(n)]
    p = len(angles) // 2
    for g, b in zip(angles[:p], angles[p:]):
        ops.append(("RZ", (), np.diag(np.exp(-1j * g * (z @ h)))))
        for i in range(n):
            for j in range(i + 1, n):
                if J[i, j]:
                    ops.append(("RZZ", (i, j), np.diag(np.exp(-1j * g * J[i, j] * z[:, i] * z[:, j]))))
        for i in range(n):
            ops.append(("RY", (i,), embed(ry_mat(-theta[i]), (i,), n)))
            ops.append(("RZ", (i,), embed(rz_mat(2 * b), (i,), n)))
            ops.append(("RY", (i,), embed(ry_mat(theta[i]), (i,), n)))
    return ops


def warm_case():
    pr = opt.from_ising(WARM_H, WARM_J, offset=0.5)
    costs = pr.diagonal.numpy()
    start = np.zeros(16, dtype=bool)
    start[0] = True                                      # dense_rho's start: |0000⟩
    return pr, costs, start


def test_warm_density_matches_the_dense_kraus_oracle(dtype):
    pr, costs, start = warm_case()
    c = np.clip([1.0, 0.0, 0.0, 1.0], 0.2, 0.8)
    nm = noise_spec_model([(mixed.depolarizing(0.03), ["RZZ"]), (mixed.depolarizing(0.02), ["RY"])])
    noise = {"RZZ": [depolarizing_kraus(0.03)], "RY": [depolarizing_kraus(0.02)]}
    x = angles_for(2, 2, 11, dtype)
    model = NoisyQAOA(pr, 2, nm, mixer="warm", warm_start="1001", epsilon=0.2, dtype=dtype)
    assert model.preparation == "gates" and model.epsilon == 0.2
    torch.testing.assert_close(model.warm_start, torch.tensor([c], dtype=torch.float64))
    got = model(x)
    for s in range(2):
        ops = warm_oracle_ops(costs, 4, x[s].double().tolist(), c)
        want = float(np.real(np.diag(dense_rho(ops, start, 4, noise))) @ costs)
        assert float(got[s]) == pytest.approx(want, abs=TOL[dtype] * max(1, abs(want)))
        assert abs(want - float(np.real(np.diag(dense_rho(ops, start, 4, {}))) @ costs)) > 1e-3   # noise is on
    # ZNE (global folding, Richardson) and readout mitigation against the same oracle
    x1 = angles_for(1, 2, 12, dtype)
    nm_ro = noise_spec_model([(mixed.depolarizing(0.02), ["RZZ", "RY"])])
    nm_ro.add_readout_error(0.03, 0.05)
    noise = {g: [depolarizing_kraus(0.02)] for g in ("RZZ", "RY")}
    zne = NoisyQAOA(pr, 1, nm_ro, mixer="warm", warm_start="1001", epsilon=0.2, mitigation="zne", dtype=dtype)(x1)
    ro = NoisyQAOA(pr, 1, nm_ro, mixer="warm", warm_start="1001", epsilon=0.2, mitigation="readout", dtype=dtype)
    prob = ro.probabilities(x1)
    mitigated = ro(x1)
    for s in range(2):
        ops = warm_oracle_ops(costs, 4, x1[s].double().tolist(), c)
        pre = float(np.real(np.diag(dense_rho(ops, start, 4, noise))) @ costs)
        read = confusion(4, 0.03, 0.05) @ np.real(np.diag(dense_rho(ops, start, 4, noise)))
        # readout mitigation gives the pre-readout Tr(ρ C); ZNE extrapolates the read-out folded values
        assert float(mitigated[s]) == pytest.approx(pre, abs=TOL[dtype] * 10)
        np.testing.assert_allclose(prob[s].double().numpy(), read, atol=TOL[dtype])
        zread = [float((confusion(4, 0.03, 0.05) @ np.real(np.diag(dense_rho(global_fold(ops, k), start, 4, noise))))
                       @ costs) for k in (0, 1, 2)]
        zwant = float(np.polyval(np.polyfit([1, 3, 5], zread, 2), 0))
        assert float(zne[s]) == pytest.approx(zwant, abs=TOL[dtype] * 10 * max(1, abs(zwant)))


def test_warm_zero_noise_equals_the_exact_warm_qaoa(dtype):
    pr, costs, start = warm_case()
    gw = opt.ising_sdp(pr, generator=torch.Generator().manual_seed(0))
    x = angles_for(2, 3, 13, dtype)
    nm = tql.NoiseModel().add(mixed.depolarizing(0.0))
    exact = opt.qaoa(pr, 2, mixer="warm", warm_start=gw, epsilon=0.25, dtype=dtype)(x)
    c = np.clip([float(b) for b in gw.bitstring], 0.25, 0.75)
    for sim in ("density", "trajectories"):
        got = NoisyQAOA(pr, 2, nm, mixer="warm", warm_start=gw, dtype=dtype, simulator=sim, n_trajectories=2)(x)
        torch.testing.assert_close(got, exact, atol=TOL[dtype] * 10, rtol=0)
    for s in range(3):
        ops = warm_oracle_ops(costs, 4, x[s].double().tolist(), c)
        want = float(np.real(np.diag(dense_rho(ops, start, 4, {}))) @ costs)
        assert float(exact[s]) == pytest.approx(want, abs=TOL[dtype] * 10)
    # the functional form takes the warm start too
    torch.testing.assert_close(noisy_expected_cost(pr, x, noise_model=nm, mixer="warm", warm_start=gw.bitstring,
                                                   dtype=dtype), exact, atol=TOL[dtype] * 10, rtol=0)


def test_warm_trajectories_estimate_the_density():
    pr, costs, start = warm_case()
    nm = noise_spec_model([(mixed.depolarizing(0.05), ["RZZ", "RY"])])
    x = angles_for(1, 2, 14, torch.complex128)
    dens = NoisyQAOA(pr, 1, nm, mixer="warm", warm_start=[0.9, 0.1, 0.3, 0.6], dtype=torch.complex128)(x)
    traj = NoisyQAOA(pr, 1, nm, mixer="warm", warm_start=[0.9, 0.1, 0.3, 0.6], dtype=torch.complex128,
                     simulator="trajectories", n_trajectories=400)(x, torch.Generator().manual_seed(0))
    torch.testing.assert_close(traj, dens, atol=0.08, rtol=0)


def test_task_trains_the_warm_mixer_with_noise():
    spec = {"channels": [{"channel": "depolarizing", "p": 0.02, "gates": ["RZZ", "RY"]}]}
    task = QAOATask(problem="maxcut", graph="cycle:4", p=1, n_starts=2, mixer="warm", seed=0, dtype="complex128",
                    diff_method="backprop", noise_model=spec, lr=0.1)
    noisy = task.noisy["1"]
    assert noisy.mixer == "warm" and noisy.warm_start.tolist() == [[min(max(v, 0.25), 0.75) for v in task.warm_start]]
    trainer(5).fit(task)
    ev = task.evaluation()
    assert "gw_cut" in ev and math.isfinite(ev["ideal_expected_cost"])
    # the noisy warm model reports a different (noisier) cost than the ideal warm QAOA of the same angles
    row = task.current_angles()[:1].detach()
    assert abs(float(noisy(row)[0]) - float(task.qaoas["1"](row)[0])) > 1e-4


def test_noisy_warm_mixer_bad_inputs():
    nm = tql.NoiseModel().add(mixed.depolarizing(0.01))
    pr = opt.maxcut([(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="mixer='warm' needs warm_start="):
        NoisyQAOA(pr, 1, nm, mixer="warm")
    with pytest.raises(ValueError, match="warm_start and epsilon belong to mixer='warm'"):
        NoisyQAOA(pr, 1, nm, warm_start="010")
    with pytest.raises(ValueError, match="3 characters 0/1"):
        NoisyQAOA(pr, 1, nm, mixer="warm", warm_start="01")
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, 0.5\]"):
        NoisyQAOA(pr, 1, nm, mixer="warm", warm_start="010", epsilon=0.7)
