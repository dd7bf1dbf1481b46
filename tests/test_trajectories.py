"""Quantum trajectories (tql.mixed.trajectories) against dense NumPy density matrices.

The oracle runs the same noisy circuit as ρ → Σ K ρ K† with Kronecker-product operators
(tests/oracle.py, the textbook Kraus operators of test_mixed.np_kraus). Trajectory averages are
random: each comparison allows 5 standard errors (estimated from the trajectories themselves, or
from independent repeats for gradients), with fixed seeds so that every run is the same.
"""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed
from torchquantum_layers.mixed import noise_folding, trajectories

from . import oracle as O
from .conftest import REAL
from .test_mixed import apply_kraus_np, np_kraus

N_WIRES = 3
CNOT_NP = O.controlled_matrix(O.X)
OBSERVABLES = ["Z0", "Z1", "X0 X1", "Y2", "Z0 Z2"]


def _channel(name, args):
    if name == "cnot_mixture":        # a mixed-unitary channel whose unitary is not a product of one-wire ones
        p, = args
        return (mixed.kraus_channel([np.sqrt(1 - p) * np.eye(4), np.sqrt(p) * CNOT_NP]),
                [np.sqrt(1 - p) * np.eye(4), np.sqrt(p) * CNOT_NP])
    if name == "depolarizing2":
        p, = args
        paulis = [O.kron(O.PAULI[a], O.PAULI[b]) for a in "IXYZ" for b in "IXYZ"]
        return mixed.depolarizing(p, n_wires=2), [np.sqrt(1 - p) * paulis[0]] + [np.sqrt(p / 15) * m for m in paulis[1:]]
    return getattr(mixed, name)(*args), np_kraus(name, *args)


# each case: (gate / channel sequence, whether all its noise folds into U3 gates)
CASES = {
    "pauli": ([("depolarizing", (0.2,), (0,)), ("bit_flip", (0.3,), (1,)), ("pauli_channel", (0.1, 0.15, 0.05), (2,)),
               ("depolarizing2", (0.3,), (1, 2))], True),
    "damping": ([("amplitude_damping", (0.4,), (0,)), ("phase_damping", (0.5,), (1,)),
                 ("generalized_amplitude_damping", (0.3, 0.6), (2,)), ("cnot_mixture", (0.3,), (2, 0))], False),
}


def _noisy_program(case):
    """[(kind, ...)]: RY(x_w) on every wire, then twice (RX θ, RZ θ on every wire, CNOT ring, the
    case's channels)."""
    chans, _ = CASES[case]
    rng = np.random.default_rng(7)
    prog = [("input", w) for w in range(N_WIRES)]
    for _ in range(2):
        for w in range(N_WIRES):
            prog += [("RX", w, float(rng.uniform(-3, 3))), ("RZ", w, float(rng.uniform(-3, 3)))]
        prog += [("CNOT", (w, (w + 1) % N_WIRES)) for w in range(N_WIRES)]
        prog += [("channel",) + c for c in chans]
    return prog


def _build(prog, dtype, device):
    c = tql.MixedCircuit(N_WIRES)
    for item in prog:
        if item[0] == "input":
            c.ry(item[1], input=item[1])
        elif item[0] == "CNOT":
            c.cnot(*item[1])
        elif item[0] == "channel":
            c.channel(_channel(item[1], item[2])[0], item[3])
        else:
            c.add(item[0], item[1], trainable=True, init=item[2])
    return _placed(c, dtype, device)


def _placed(c, dtype, device):
    c = c.to(device)
    return c.double() if dtype == torch.complex128 else c


def _dense(prog, x_row, angles=None):
    """ρ_out of one sample by dense Kraus sums; ``angles`` overrides the trainable ones in order."""
    d = 2 ** N_WIRES
    rho = np.zeros((d, d), dtype=np.complex128)
    rho[0, 0] = 1
    it = iter(angles) if angles is not None else None
    for item in prog:
        if item[0] == "channel":
            rho = apply_kraus_np(rho, _channel(item[1], item[2])[1], item[3], N_WIRES)
            continue
        if item[0] == "input":
            u, wires = O.ry(x_row[item[1]]), (item[1],)
        elif item[0] == "CNOT":
            u, wires = CNOT_NP, item[1]
        else:
            t = next(it) if it is not None else item[2]
            u, wires = (O.rx if item[0] == "RX" else O.rz)(t), (item[1],)
        U = O.full_operator(u, wires, N_WIRES)
        rho = U @ rho @ U.conj().T
    return rho


def _dense_expvals(prog, x, angles=None):
    obs = [O.pauli_matrix("".join(dict((t[0], t[1]) for t in [(int(s[1:]), s[0]) for s in o.split()]).get(w, "I")
                                  for w in range(N_WIRES))) for o in OBSERVABLES]
    return np.array([[np.trace(m @ _dense(prog, xr, angles)).real for m in obs] for xr in x])


def _hams():
    return [tql.Hamiltonian(o) for o in OBSERVABLES]


@pytest.mark.parametrize("case", sorted(CASES))
def test_trajectory_average_matches_dense_density_matrix(case, dtype, device):
    prog = _noisy_program(case)
    c = _build(prog, dtype, device)
    x = torch.tensor([[0.3, -1.1, 2.0], [1.4, 0.2, -0.7]], dtype=REAL[dtype], device=device)
    assert (trajectories._folded(c, None) is not None) == CASES[case][1]
    g = torch.Generator().manual_seed(11)
    est, se = trajectories.expval(c, _hams(), x=x, n_trajectories=6000, generator=g, return_std=True)
    exact = _dense_expvals(prog, x.double().cpu().numpy())
    err = np.abs(est.detach().double().cpu().numpy() - exact)
    assert (err <= 5 * se.double().cpu().numpy() + 1e-4).all(), (err, se)
    assert float(se.max()) < 0.02          # the estimate is informative, not vacuous
    # the same seed gives the same trajectories
    again = trajectories.expval(c, _hams(), x=x, n_trajectories=6000, generator=torch.Generator().manual_seed(11))
    assert torch.equal(again, est)


def test_states_are_normalised_branches_and_average_to_rho(dtype, device):
    prog = _noisy_program("damping")
    c = _build(prog, dtype, device)
    x = torch.tensor([[0.5, 1.0, -0.4]], dtype=REAL[dtype], device=device)
    psi = trajectories.run(c, x=x, n_trajectories=3000, generator=torch.Generator().manual_seed(3))
    assert psi.shape == (1, 3000, 2 ** N_WIRES)
    norms = psi.abs().pow(2).sum(-1)
    assert torch.allclose(norms, torch.ones_like(norms), atol=1e-4 if dtype == torch.complex64 else 1e-10)
    p = psi[0].detach().cpu().numpy().astype(np.complex128)
    rho = np.einsum("ti,tj->ij", p, p.conj()) / p.shape[0]
    assert np.abs(rho - _dense(prog, x[0].double().cpu().numpy())).max() < 0.04


def test_branch_probabilities_follow_the_state(device):
    """Full amplitude damping of |1⟩ takes every trajectory to |0⟩; measuring a Bell pair leaves
    each trajectory in |00⟩ or |11⟩, as its recorded outcome says, with frequencies 1/2."""
    c = tql.MixedCircuit(2).to(device=device)
    c.x(0)
    c.channel(mixed.amplitude_damping(1.0), 0)
    psi = trajectories.run(c, n_trajectories=64, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(psi[0, :, 0].abs(), torch.ones(64, device=device), atol=1e-6)

    bell = tql.MixedCircuit(2).to(device=device)
    bell.h(0)
    bell.cnot(0, 1)
    bell.measure([0, 1], collapse=True)
    psi = trajectories.run(bell, n_trajectories=2000, generator=torch.Generator().manual_seed(1))
    wires, outcomes = bell.last_outcomes[0]
    assert wires == (0, 1) and outcomes.shape == (1, 2000)
    assert set(outcomes.unique().tolist()) == {0, 3}
    amps = psi[0].abs()
    assert torch.allclose(amps[torch.arange(2000, device=device), outcomes[0]], torch.ones(2000, device=device), atol=1e-6)
    assert abs(float((outcomes == 3).double().mean()) - 0.5) < 5 * 0.5 / 2000 ** 0.5

    reset = tql.MixedCircuit(2).to(device=device)
    reset.h(0)
    reset.x(1)
    reset.reset([0, 1])
    psi = trajectories.run(reset, n_trajectories=50, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(psi[0, :, 0].abs(), torch.ones(50, device=device), atol=1e-6)


def _grad_estimates(c, x, repeats, T, seed):
    grads = []
    for r in range(repeats):
        c.zero_grad()
        trajectories.expval(c, _hams(), x=x, n_trajectories=T,
                            generator=torch.Generator().manual_seed(seed + r)).sum().backward()
        grads.append(c.weights.grad.detach().double().cpu().numpy().copy())
    g = np.array(grads)
    return g.mean(0), g.std(0, ddof=1) / np.sqrt(repeats)


@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_is_an_unbiased_estimate(case, device):
    """Including where branch probabilities depend on the angles (amplitude damping): the
    1/√p scaling with p held fixed brings the score-function part of the gradient."""
    prog = _noisy_program(case)
    c = _build(prog, torch.complex128, device)
    x = torch.tensor([[0.3, -1.1, 2.0]], dtype=torch.float64, device=device)
    mean, se = _grad_estimates(c, x, repeats=8, T=1500, seed=100)
    theta = c.weights.detach().double().cpu().numpy()
    xs, h = x.cpu().numpy(), 1e-5
    exact = np.array([(_dense_expvals(prog, xs, theta + h * e).sum() - _dense_expvals(prog, xs, theta - h * e).sum())
                      / (2 * h) for e in np.eye(len(theta))])
    assert (np.abs(mean - exact) <= 5 * se + 2e-4).all(), (mean, exact, se)
    assert np.abs(exact).max() > 0.05


def test_folded_noise_takes_every_diff_method(dtype, device):
    """Pauli noise folded into U3 gates: every trajectory is a unitary circuit, so adjoint and
    parameter-shift give backprop's gradient on the same draws."""
    c = _build(_noisy_program("pauli"), dtype, device)
    x = torch.tensor([[0.3, -1.1, 2.0], [0.1, 0.4, 0.9]], dtype=REAL[dtype], device=device)
    grads = {}
    for method in ("backprop", "adjoint", "parameter-shift"):
        c.zero_grad()
        v = trajectories.expval(c, _hams(), x=x, n_trajectories=16, generator=torch.Generator().manual_seed(5),
                                diff_method=method)
        v.sum().backward()
        grads[method] = (v.detach(), c.weights.grad.clone())
    tol = 1e-4 if dtype == torch.complex64 else 1e-9
    for method in ("adjoint", "parameter-shift"):
        assert torch.allclose(grads[method][0], grads["backprop"][0], atol=tol)
        assert torch.allclose(grads[method][1], grads["backprop"][1], atol=10 * tol)


def test_noise_model_on_a_plain_circuit(dtype, device):
    """A NoiseModel's channels after every CNOT, on a plain Circuit: the trajectories' average
    against the dense oracle with the channels written in after each CNOT."""
    n = N_WIRES
    c = tql.Circuit(n)
    for w in range(n):
        c.ry(w, 0.4 + w)
        c.cnot(w, (w + 1) % n)
    noise = tql.NoiseModel().add(mixed.depolarizing(0.25), gates="CNOT")
    c = _placed(c, dtype, device)
    est, se = trajectories.expval(c, _hams(), noise_model=noise, n_trajectories=6000,
                                  generator=torch.Generator().manual_seed(9), return_std=True)
    d = 2 ** n
    rho = np.zeros((d, d), dtype=np.complex128)
    rho[0, 0] = 1
    for w in range(n):
        for u, wires in ((O.ry(0.4 + w), (w,)), (CNOT_NP, (w, (w + 1) % n))):
            U = O.full_operator(u, wires, n)
            rho = U @ rho @ U.conj().T
        for v in (w, (w + 1) % n):
            rho = apply_kraus_np(rho, np_kraus("depolarizing", 0.25), (v,), n)
    obs = [O.pauli_matrix(s) for s in ("ZII", "IZI", "XXI", "IIY", "ZIZ")]
    exact = np.array([[np.trace(m @ rho).real for m in obs]])
    err = np.abs(est.double().cpu().numpy() - exact)
    assert (err <= 5 * se.double().cpu().numpy() + 1e-4).all(), (err, se)


def test_trainable_noise_strength_gets_its_gradient():
    gamma = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    vals = []
    for r in range(8):
        gamma.grad = None
        c = tql.MixedCircuit(1).double()        # the channel's Kraus operators: a graph from gamma
        c.ry(0, 1.1)
        c.channel(mixed.amplitude_damping(gamma), 0)
        c.rx(0, 0.7)
        trajectories.expval(c, tql.Hamiltonian("Z0"), n_trajectories=4000,
                            generator=torch.Generator().manual_seed(r)).sum().backward()
        vals.append(float(gamma.grad))

    def exact(g):
        rho = np.zeros((2, 2), dtype=np.complex128)
        rho[0, 0] = 1
        rho = O.ry(1.1) @ rho @ O.ry(1.1).conj().T
        rho = apply_kraus_np(rho, np_kraus("amplitude_damping", g), (0,), 1)
        rho = O.rx(0.7) @ rho @ O.rx(0.7).conj().T
        return np.trace(O.Z @ rho).real
    want = (exact(0.3 + 1e-6) - exact(0.3 - 1e-6)) / 2e-6
    assert abs(np.mean(vals) - want) <= 5 * np.std(vals, ddof=1) / np.sqrt(8) + 1e-3


def test_a_noise_free_circuit_gives_its_exact_values(dtype, device):
    c = _placed(tql.Circuit(2), dtype, device)
    c.h(0)
    c.cnot(0, 1)
    est = trajectories.expval(c, [tql.Hamiltonian("Z0 Z1"), tql.Hamiltonian("X0 X1"), tql.Hamiltonian("Z0")],
                              n_trajectories=5)
    want = torch.tensor([1.0, 1.0, 0.0], dtype=REAL[dtype], device=device)
    assert est.shape == (1, 3) and torch.allclose(est[0], want, atol=1e-5)


def test_mixed_unitary_channels_are_recognised():
    assert noise_folding.constant_probabilities(mixed.depolarizing(0.3).kraus) is not None
    assert noise_folding.constant_probabilities(mixed.pauli_channel(0.1, 0.2, 0.3).kraus) is not None
    assert noise_folding.constant_probabilities(mixed.amplitude_damping(0.3).kraus) is None
    assert noise_folding.fold_table(mixed.depolarizing(0.2, n_wires=2).kraus) is not None
    assert noise_folding.fold_table(_channel("cnot_mixture", (0.3,))[0].kraus) is None
    # Pauli codes x + 2z per wire: I 0, X 1, Z 2, Y 3
    c, codes = noise_folding.pauli_table(mixed.pauli_channel(0.1, 0.2, 0.3).kraus)
    got = {tuple(row): float(p) for row, p in zip(codes.tolist(), c) if p > 0}
    assert got == pytest.approx({(0,): 0.4, (1,): 0.1, (3,): 0.2, (2,): 0.3})
    h = torch.tensor([[1, 1], [1, -1]], dtype=torch.complex128) / 2 ** 0.5
    eye = torch.eye(2, dtype=torch.complex128)
    hadamard_flip = torch.stack([0.8 ** 0.5 * eye, 0.2 ** 0.5 * h])     # mixed unitary, not Pauli
    assert noise_folding.pauli_table(hadamard_flip) is None
    assert noise_folding.fold_table(hadamard_flip) is not None


def test_bad_input_is_named():
    c = tql.MixedCircuit(2)
    c.h(0)
    c.channel(mixed.amplitude_damping(0.2), 0)
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ValueError, match="n_trajectories"):
            trajectories.run(c, n_trajectories=bad)
    with pytest.raises(TypeError, match="density matrix"):
        trajectories.run(c, state=mixed.zero_density(2))
    with pytest.raises(ValueError, match="backprop"):
        trajectories.expval(c, tql.Hamiltonian("Z0"), diff_method="adjoint")
    with pytest.raises(TypeError, match="generator"):
        trajectories.run(c, generator=3)
    with pytest.raises(ValueError, match="weights"):
        trajectories.run(c, weights=torch.zeros(5))
    with pytest.raises(ValueError, match="wire"):
        trajectories.expval(c, tql.Hamiltonian("Z3"))


# -- the Pauli frame: deterministic Pauli "noise" makes every trajectory one exact state ----------------
_PAULI_OPS = {"X": O.X, "Y": O.Y, "Z": O.Z, "I": O.I2}
_FRAME_GATES = [(name, k) for name, (k, _) in sorted(O.SIGNATURES.items()) if k is None or k <= 3]


@pytest.mark.parametrize("angles", ["clifford", "generic"])
@pytest.mark.parametrize("name,k", _FRAME_GATES)
def test_pauli_frame_through_every_table_gate_is_exact(name, k, angles, dtype, device):
    """Certain Pauli errors (probability 1) before and after a table gate, through Cliffords and
    non-Cliffords (a diagonal one too): each trajectory must be the dense state with those Paulis
    inserted, up to a global phase; fixed angles of π/2 make many gates Clifford."""
    n, k = 4, k or 3
    n_params = O.SIGNATURES[name][1]
    params = [np.pi / 2] * n_params if angles == "clifford" else [0.37 + 0.41 * i for i in range(n_params)]
    wires = (2, 0, 3)[:k]
    c = tql.MixedCircuit(n)
    ops = []
    for w in range(n):
        c.ry(w, input=w)
    for pair in ((0, 1), (2, 3)):
        c.cnot(*pair)
        ops.append(("CNOT", pair, ()))

    def noise(labels, on):
        c.channel(mixed.pauli_channel(probs={labels: 1.0}), on)
        ops.extend((_PAULI_OPS[p], (w,), ()) for p, w in zip(labels, on))

    noise("XZ", (0, 1))
    noise("Y", (2,))
    c.add(name, wires, *params)
    ops.append((name, wires, params))
    noise("ZX", (3, 0))
    for gate, on, ps in (("CNOT", (3, 0), ()), ("H", (1,), ()), ("RZ", (0,), (0.7,)), ("RY", (1,), (0.4,))):
        c.add(gate, on, *ps)
        ops.append((gate, on, ps))
    noise("XY", (1, 2))
    c = _placed(c, dtype, device)
    x = torch.tensor([[0.3, -1.1, 2.0, 0.5], [1.4, 0.2, -0.7, -2.2]], dtype=REAL[dtype], device=device)
    assert trajectories._folded(c, None) is not None
    psi = trajectories.run(c, x=x, n_trajectories=3, generator=torch.Generator().manual_seed(0))
    xs = x.double().cpu().numpy()
    for b in range(2):
        start = O.kron(*[O.ry(xs[b, w]) @ np.array([1, 0]) for w in range(n)])
        want = O.run_ops(ops, n, start)[0]
        got = psi[b].to(torch.complex128).cpu().numpy()
        overlap = np.abs(got.conj() @ want)
        tol = 1e-5 if dtype == torch.complex64 else 1e-10
        np.testing.assert_allclose(overlap, 1.0, atol=tol)


def test_symplectic_maps_of_cliffords_and_not_of_others():
    """Against conjugation of NumPy Pauli matrices: H X H = Z, CNOT X_0 CNOT = X_0 X_1, …; T,
    Toffoli and CH are not Clifford."""
    s = noise_folding.symplectic(O.H)
    assert s.tolist() == [[0, 1], [1, 0]]                     # X ↔ Z
    cnot = O.gate_matrix("CNOT")
    s = noise_folding.symplectic(cnot)                           # columns: X0, X1, Z0, Z1 → bits x0 x1 z0 z1
    assert s[:, 0].tolist() == [1, 1, 0, 0] and s[:, 1].tolist() == [0, 1, 0, 0]
    assert s[:, 2].tolist() == [0, 0, 1, 0] and s[:, 3].tolist() == [0, 0, 1, 1]
    for name in ("T", "TOFFOLI", "CH", "CCZ"):
        assert noise_folding.symplectic(O.gate_matrix(name)) is None, name
    for name in ("S", "SX", "ISWAP", "SWAP", "CZ", "CY", "Y"):
        assert noise_folding.symplectic(O.gate_matrix(name)) is not None, name


_POOL = [("H", 1, 0), ("S", 1, 0), ("SX", 1, 0), ("T", 1, 0), ("RY", 1, 1), ("RZ", 1, 1), ("CNOT", 2, 0),
         ("CZ", 2, 0), ("SWAP", 2, 0), ("ISWAP", 2, 0), ("CRX", 2, 1), ("RZZ", 2, 1), ("TOFFOLI", 3, 0)]


@pytest.mark.parametrize("seed", range(6))
def test_pauli_frame_on_random_circuits_values_and_gradients(seed, dtype, device):
    """Random gates (Clifford or not, trainable angles) with certain Pauli errors at random places,
    from a random product state: the folded circuit's states (up to phase), ⟨Z0 Z2 + X1 + Y3⟩ and
    its adjoint gradient against the dense NumPy circuit with the Paulis inserted (gradient by
    central differences of that oracle)."""
    rng = np.random.default_rng(seed)
    n = 4
    c = tql.MixedCircuit(n)
    for w in range(n):
        c.ry(w, input=w)
        c.rz(w, input=n + w)
    prog = []                      # (name or matrix, wires, trainable index or None)
    for _ in range(18):
        if rng.random() < 0.35:
            k = int(rng.integers(1, 3))
            on = tuple(int(w) for w in rng.choice(n, k, replace=False))
            labels = "".join(rng.choice(list("XYZ"), k))
            c.channel(mixed.pauli_channel(probs={labels: 1.0}), on)
            prog.extend((_PAULI_OPS[p], (w,), None) for p, w in zip(labels, on))
            continue
        name, k, n_params = _POOL[int(rng.integers(len(_POOL)))]
        on = tuple(int(w) for w in rng.choice(n, k, replace=False))
        if n_params:
            c.add(name, on, trainable=True, init=float(rng.uniform(-3, 3)))
            prog.append((name, on, c.num_parameters - 1))
        else:
            c.add(name, on)
            prog.append((name, on, None))
    c = _placed(c, dtype, device)
    assert trajectories._folded(c, None) is not None
    assert c.num_parameters and any(isinstance(g, np.ndarray) for g, _, _ in prog)   # not a vacuous case
    xs = rng.uniform(-np.pi, np.pi, size=(1, 2 * n))
    x = torch.tensor(xs, dtype=REAL[dtype], device=device)
    start = O.kron(*[O.rz(xs[0, n + w]) @ O.ry(xs[0, w]) @ np.array([1, 0]) for w in range(n)])
    H = tql.Hamiltonian("Z0 Z2 + X1 + Y3")
    m = O.pauli_matrix("ZIZI") + O.pauli_matrix("IXII") + O.pauli_matrix("IIIY")

    def dense_state(theta):
        return O.run_ops([(g, w, () if i is None else (theta[i],)) for g, w, i in prog], n, start)[0]

    def dense(theta):
        psi = dense_state(theta)
        return float(np.real(psi.conj() @ m @ psi))

    theta = c.weights.detach().double().cpu().numpy()
    tol = 2e-5 if dtype == torch.complex64 else 1e-9
    with torch.no_grad():
        rows = trajectories.run(c, x=x, n_trajectories=2, generator=torch.Generator().manual_seed(1))
    overlap = np.abs(rows[0].to(torch.complex128).cpu().numpy().conj() @ dense_state(theta))
    np.testing.assert_allclose(overlap, 1.0, atol=tol)
    value = trajectories.expval(c, H, x=x, n_trajectories=2, diff_method="adjoint",
                                generator=torch.Generator().manual_seed(1))
    value.backward()
    np.testing.assert_allclose(float(value.detach()), dense(theta), atol=tol)
    eps = 1e-6
    fd = [(dense(theta + eps * e) - dense(theta - eps * e)) / (2 * eps) for e in np.eye(len(theta))]
    np.testing.assert_allclose(c.weights.grad.double().cpu().numpy(), fd, atol=100 * tol + 1e-7)


@pytest.mark.parametrize("noise", [None, "readout"])
def test_shots_on_a_noise_free_circuit_are_drawn_per_trajectory(noise):
    # nothing folds into the circuit and it reads no inputs, yet each trajectory takes its own
    # shots: the mean has the spread of T * shots samples, sd sqrt(sin²θ / (shots T))
    theta, shots, T = 1.0, 10, 400
    c = tql.Circuit(1).double()
    c.ry(0, theta)
    model = tql.NoiseModel().add_readout_error(0.0) if noise else None
    est, err = trajectories.expval(c, "Z0", noise_model=model, n_trajectories=T, shots=shots,
                                   generator=torch.Generator().manual_seed(0), return_std=True)
    sd = np.sqrt(np.sin(theta) ** 2 / (shots * T))
    assert 0.8 * sd < err.item() < 1.2 * sd
    assert abs(est.item() - np.cos(theta)) < 5 * sd


def test_a_sweep_over_fresh_noise_models_folds_each_models_channels():
    # fresh models may reuse a freed one's id: the folded (Pauli-frame) circuit and the branch
    # path must follow the new channels. Oracle as in test_mixed: cos θ (1 − 4p/3) and
    # 1 − 2 sin²(θ/2)(1 − γ), within 5 standard errors
    theta = 0.5
    c = tql.Circuit(1).double()
    c.ry(0, theta)
    for ch, want in [(mixed.depolarizing(p), np.cos(theta) * (1 - 4 * p / 3)) for p in (0.0, 0.45, 0.9)] + \
                    [(mixed.amplitude_damping(g), 1 - 2 * np.sin(theta / 2) ** 2 * (1 - g)) for g in (0.0, 0.8)]:
        est, err = trajectories.expval(c, "Z0", noise_model=tql.NoiseModel().add(ch), n_trajectories=2000,
                                       generator=torch.Generator().manual_seed(0), return_std=True)
        assert abs(est.item() - want) <= 5 * err.item() + 1e-12


def test_replaced_instructions_are_folded_anew():
    """The folding cache keyed instructions by id: new channels put in place of freed ones (same
    positions, reused ids) ran the old ones. Analytic: <Z> = cos θ (1 - 4p/3)."""
    import gc
    import math
    theta = 0.7
    c = mixed.MixedCircuit(1, dtype=torch.complex128)
    c.ry(0, theta)
    for p in (0.0, 0.3, 0.6):
        c.instructions = []
        c.channel(mixed.depolarizing(p), 0)
        gc.collect()
        est, err = trajectories.expval(c, "Z0", n_trajectories=4000, generator=torch.Generator().manual_seed(0),
                                       return_std=True)
        assert abs(float(est[0]) - math.cos(theta) * (1 - 4 * p / 3)) < 5 * float(err[0]) + 1e-12
