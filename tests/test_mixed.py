"""Density matrices and channels against dense NumPy references (oracle) and analytic results."""
import math

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import gates as G
from torchquantum_layers import mixed, qinfo

from . import oracle as O
from .conftest import ATOL


def as_np(t):
    return t.detach().cpu().numpy()


def rand_rho_np(n, rng, batch=2, rank=None):
    d = 2 ** n
    r = rank or d
    g = rng.standard_normal((batch, d, r)) + 1j * rng.standard_normal((batch, d, r))
    rho = g @ g.conj().transpose(0, 2, 1)
    return rho / np.trace(rho, axis1=1, axis2=2)[:, None, None]


def to_t(a, dtype, device):
    return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)


def dense_kraus(kraus, wires, n):
    return [O.full_operator(k, wires, n) for k in kraus]


def apply_kraus_np(rho, kraus, wires, n):
    ks = dense_kraus(kraus, wires, n)
    return sum(k @ rho @ k.conj().T for k in ks)


def random_gate_args(gate, n, rng):
    k = gate.n_wires or (2 if gate.min_wires > 1 else 3)
    wires = tuple(int(w) for w in rng.choice(n, size=k, replace=False))
    params = tuple(float(v) for v in rng.uniform(-np.pi, np.pi, gate.n_params))
    matrix = None
    if gate.name == "QUBITUNITARY":
        matrix = O.random_unitary(2 ** k, rng)
    elif gate.name == "DIAGONALUNITARY":
        matrix = O.random_phases(2 ** k, rng)
    return wires, params, matrix


def oracle_matrix(gate, params, k, matrix):
    if gate.name == "QUBITUNITARY":
        return matrix
    if gate.name == "DIAGONALUNITARY":
        return np.diag(matrix)
    return O.gate_matrix(gate.name, *params, n_wires=k)


# ------------------------------------------------------------------------------------------------
# gates as U ρ U†
@pytest.mark.parametrize("name", sorted(G.GATES))
def test_every_gate_matches_dense_conjugation(name, dtype, device):
    rng = np.random.default_rng(abs(hash(name)) % 2 ** 32)
    gate = G.GATES[name]
    n = 4 if (gate.n_wires or 3) <= 4 else gate.n_wires
    rho = rand_rho_np(n, rng)
    wires, params, matrix = random_gate_args(gate, n, rng)
    for adjoint in (False, True):
        out = mixed.apply_gate(to_t(rho, dtype, device), name, *params, wires=wires,
                               matrix=None if matrix is None else to_t(matrix, dtype, device), adjoint=adjoint)
        u = O.full_operator(oracle_matrix(gate, params, len(wires), matrix), wires, n)
        if adjoint:
            u = u.conj().T
        np.testing.assert_allclose(as_np(out), u @ rho @ u.conj().T, atol=10 * ATOL[dtype])


def test_per_sample_angles_in_apply_gate(dtype, device):
    rng = np.random.default_rng(1)
    rho = rand_rho_np(3, rng, batch=3)
    theta = rng.uniform(-3, 3, 3)
    out = mixed.apply_gate(to_t(rho, dtype, device), "CRX", torch.as_tensor(theta, device=device), wires=(2, 0))
    ref = np.stack([O.full_operator(O.gate_matrix("CRX", t), (2, 0), 3) @ r @
                    O.full_operator(O.gate_matrix("CRX", t), (2, 0), 3).conj().T for t, r in zip(theta, rho)])
    np.testing.assert_allclose(as_np(out), ref, atol=10 * ATOL[dtype])


def test_one_pass_forms_of_u_rho_u_dagger(dtype, device):
    """The fused one-pass forms (a permutation of both wire sets, d ⊗ conj(d), the 4 × 4
    U ⊗ conj(U)) with per-sample angles, adjoints and a permutation that is not its own inverse
    (a 4-cycle, not in the table), against dense U ρ U†."""
    from torchquantum_layers.mixed.simulate import _apply_op_vec
    rng = np.random.default_rng(7)
    n, B = 3, 3
    rho = rand_rho_np(n, rng, batch=B)
    v = to_t(rho, dtype, device).reshape(B, -1)
    cycle = (1, 2, 3, 0)
    gate = G.Gate("CYCLE4", 2, 0, G._perm_to_matrix(lambda k: cycle), kind="permutation", perm_fn=lambda k: cycle)
    p = np.eye(4)[list(cycle)]                           # new[i] = old[cycle[i]]
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    theta = rng.uniform(-3, 3, B)
    angles = (torch.as_tensor(theta, dtype=real, device=device),)
    cases = [(gate, (), (2, 0), lambda b: p), (G.RY, angles, (1,), lambda b: O.gate_matrix("RY", theta[b])),
             (G.RZZ, angles, (0, 2), lambda b: O.gate_matrix("RZZ", theta[b])),
             (G.U3, tuple(torch.as_tensor(rng.uniform(-3, 3, B), dtype=real, device=device) for _ in range(3)),
              (2,), None)]
    for g, params, wires, local in cases:
        if local is None:
            vals = [as_np(t) for t in params]
            local = (lambda b, vals=vals: O.gate_matrix("U3", *[x[b] for x in vals]))
        for adjoint in (False, True):
            out = as_np(_apply_op_vec(g, v, params, wires, n, adjoint=adjoint)).reshape(B, 2 ** n, 2 ** n)
            for b in range(B):
                u = O.full_operator(local(b), wires, n)
                if adjoint:
                    u = u.conj().T
                np.testing.assert_allclose(out[b], u @ rho[b] @ u.conj().T, atol=10 * ATOL[dtype],
                                           err_msg=f"{g.name} adjoint={adjoint}")


def random_circuit(n, rng, with_inputs=True):
    c = tql.Circuit(n)
    names = sorted(g for g in G.GATES if not G.GATES[g].takes_data)
    col = 0
    for _ in range(3 * n):
        name = names[rng.integers(len(names))]
        gate = G.GATES[name]
        k = gate.n_wires or 2
        if k > n:
            continue
        wires = [int(w) for w in rng.choice(n, size=k, replace=False)]
        if gate.n_params and with_inputs and rng.random() < 0.4:
            c.add(name, wires, input=tuple(range(col, col + gate.n_params)))
            col += gate.n_params
        elif gate.n_params and rng.random() < 0.5:
            c.add(name, wires, trainable=True)
        else:
            c.add(name, wires, *[float(v) for v in rng.uniform(-3, 3, gate.n_params)])
    c.qubitunitary([0, 1], O.random_unitary(4, rng))
    return c, col


@pytest.mark.parametrize("fuse", [True, False])
def test_noiseless_circuit_equals_pure_state(fuse, dtype, device):
    rng = np.random.default_rng(7 + fuse)
    n = 4
    c, n_inputs = random_circuit(n, rng)
    c.fuse = fuse
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    x = torch.as_tensor(rng.uniform(-3, 3, (3, max(n_inputs, 1))), device=device)
    psi0 = tql.random_state(n, 3, generator=torch.Generator().manual_seed(3), dtype=dtype).to(device)
    psi = c(x, state=psi0)
    rho = mixed.run(c, x=x, state=mixed.density_from_state(psi0))
    np.testing.assert_allclose(as_np(rho), as_np(mixed.density_from_state(psi)), atol=20 * ATOL[dtype])
    # a state vector is accepted as the input state, and the default is |0...0><0...0|
    np.testing.assert_allclose(as_np(mixed.run(c, x=x, state=psi0)), as_np(rho), atol=20 * ATOL[dtype])
    np.testing.assert_allclose(as_np(mixed.run(c, x=x)), as_np(mixed.density_from_state(c(x))),
                               atol=20 * ATOL[dtype])


def _dense_unitaries(c, x):
    """Per sample, the circuit's dense unitary from the oracle's gate matrices (adjoints,
    per-sample input angles and QubitUnitary matrices included)."""
    n, w = c.n_wires, c.weights.detach().double().cpu().numpy()
    xs = x.detach().double().cpu().numpy()
    out = []
    for b in range(xs.shape[0]):
        ops = []
        for op in c.ops:
            if op.gate.takes_data:
                u = as_np(c.data(op)).astype(complex)
            else:
                params = [a.scale * (w[a.index] if hasattr(a, "index") else xs[b, a.column]) if hasattr(a, "scale")
                          else float(a) for a in op.angles]
                u = O.gate_matrix(op.gate.name, *params, n_wires=len(op.wires))
            ops.append((u.conj().T if op.adjoint else u, op.wires, []))
        out.append(O.run_ops(ops, n, np.eye(2 ** n)).T)         # rows in: basis states; U = result^T
    return out


@pytest.mark.parametrize("fuse", [True, False], ids=["programs", "blocks"])
def test_a_circuit_on_a_mixed_state_is_dense_conjugation(fuse, dtype, device):
    """ρ → U ρ U† for a random circuit of every table gate (inputs, weights, an inverse part, a
    QubitUnitary) on a random mixed ρ, against the oracle's dense U per sample. On the CPU with
    fuse the segment runs as one program on 2n wires (U and conj(U), gates.conjugate)."""
    from torchquantum_layers.mixed import simulate
    rng = np.random.default_rng(21)
    n, B = 3, 2
    c, n_in = random_circuit(n, rng)
    inverse_part, _ = random_circuit(n, rng, with_inputs=False)
    c.append(inverse_part.inverse())
    c.fuse = fuse
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    x = torch.as_tensor(rng.uniform(-3, 3, (B, max(n_in, 1))), device=device)
    a = rng.normal(size=(B, 2 ** n, 2 ** n)) + 1j * rng.normal(size=(B, 2 ** n, 2 ** n))
    rho = a @ a.conj().transpose(0, 2, 1)
    rho /= np.trace(rho, axis1=1, axis2=2)[:, None, None]
    out = mixed.run(c, x=x, state=torch.as_tensor(rho, dtype=dtype, device=device))
    want = np.stack([u @ rho[b] @ u.conj().T for b, u in enumerate(_dense_unitaries(c, x))])
    np.testing.assert_allclose(as_np(out), want, atol=20 * ATOL[dtype])
    programs = fuse and device == "cpu" and tql.kernels.native.library() is not None
    (segment,) = [item for kind, item in simulate._segments(c, None) if kind == "plan"]
    assert (simulate._doubled(c, segment[1], segment[2]) is not None) == programs


@pytest.mark.parametrize("name", sorted(n for n in G.GATES if not G.GATES[n].takes_data))
def test_every_conjugate_gate_is_valid_and_conjugate(name, dtype):
    """gates.conjugate: the checker passes (generator −G*, spectra, diagonal form, ...) and the
    matrix is the conjugate of the gate's."""
    gate = G.GATES[name]
    conj = G.conjugate(gate)
    tql.checks.assert_valid_gate(conj, dtype=dtype)
    k = gate.n_wires or 3
    p = tuple(torch.tensor(0.4 + 0.3 * i, dtype=torch.float64) for i in range(gate.n_params))
    np.testing.assert_allclose(conj.matrix(p, n_wires=k, dtype=dtype).numpy(),
                               gate.matrix(p, n_wires=k, dtype=dtype).numpy().conj(), atol=ATOL[dtype])


def test_run_is_differentiable_and_matches_pure_gradients():
    rng = np.random.default_rng(11)
    c, n_in = random_circuit(3, rng)
    c = c.double()
    x = torch.tensor(rng.uniform(-3, 3, (2, max(n_in, 1))), requires_grad=True)
    H = tql.Hamiltonian("0.5*Z0 Z1 + X2 - 0.3*Y0 X1 + 0.2")
    e_pure = tql.expval(c, H, x=x).sum()
    gw_pure, gx_pure = torch.autograd.grad(e_pure, [c.weights, x])
    e_mixed = mixed.expval(c, H, x=x).sum()
    gw_mixed, gx_mixed = torch.autograd.grad(e_mixed, [c.weights, x])
    torch.testing.assert_close(e_mixed, e_pure)
    torch.testing.assert_close(gw_mixed, gw_pure)
    torch.testing.assert_close(gx_mixed, gx_pure)


# ------------------------------------------------------------------------------------------------
# expectations, probabilities, sampling
def test_expectation_matches_dense_trace(dtype, device):
    rng = np.random.default_rng(3)
    n = 3
    rho = rand_rho_np(n, rng, batch=3)
    terms = []
    for _ in range(8):
        label = "".join(rng.choice(list("IXYZ"), n))
        terms.append((float(rng.uniform(-1, 1)), label))
    H = tql.Hamiltonian(terms + [(0.7, "I")])
    Hd = sum(c * O.pauli_matrix(lab) for c, lab in terms) + 0.7 * np.eye(2 ** n)
    got = mixed.expectation(to_t(rho, dtype, device), [H, "Z0", tql.PauliString("Y1 X2")])
    ref = np.stack([np.einsum("bij,ji->b", rho, Hd).real,
                    np.einsum("bij,ji->b", rho, O.pauli_matrix("ZII")).real,
                    np.einsum("bij,ji->b", rho, O.pauli_matrix("IYX")).real], axis=1)
    np.testing.assert_allclose(as_np(got), ref, atol=10 * ATOL[dtype])
    hrho = mixed.apply_hamiltonian_density(to_t(rho, dtype, device), H)
    np.testing.assert_allclose(as_np(hrho), Hd @ rho, atol=10 * ATOL[dtype])


def test_expectation_rejects_non_hermitian_and_too_wide():
    rho = mixed.zero_density(2)
    with pytest.raises(ValueError, match="not Hermitian"):
        mixed.expectation(rho, tql.Hamiltonian([(1j, "X0")]))
    with pytest.raises(ValueError, match="wire 3"):
        mixed.expectation(rho, "Z3")


def test_probabilities_and_sampling(dtype, device):
    rng = np.random.default_rng(5)
    rho = rand_rho_np(3, rng, batch=2)
    t = to_t(rho, dtype, device)
    p = mixed.probabilities(t, wires=(2, 0))
    diag = np.real(np.diagonal(rho, axis1=1, axis2=2))
    ref = np.zeros((2, 4))
    for i in range(8):
        ref[:, ((i & 1) << 1) | (i >> 2)] += diag[:, i]
    np.testing.assert_allclose(as_np(p), ref, atol=10 * ATOL[dtype])
    g = torch.Generator(device=device).manual_seed(0)
    s = mixed.sample(t, 20000, wires=(2, 0), generator=g)
    freq = torch.stack([torch.bincount(row, minlength=4) for row in s]).double() / 20000
    np.testing.assert_allclose(as_np(freq), ref, atol=0.02)
    s2 = mixed.sample(t, 20000, wires=(2, 0), generator=torch.Generator(device=device).manual_seed(0))
    assert torch.equal(s, s2)


def test_shot_expectation_is_close(device):
    rho = mixed.density_from_state(tql.random_state(2, 2, generator=torch.Generator().manual_seed(1),
                                                    dtype=torch.complex128)).to(device)
    H = tql.Hamiltonian("0.5*X0 X1 + Z0 - 0.4*Y1 + 0.1")
    exact = mixed.expectation(rho, H)
    est = mixed.expectation(rho, H, shots=40000, generator=torch.Generator(device=device).manual_seed(2))
    assert torch.allclose(est, exact, atol=0.03)


# ------------------------------------------------------------------------------------------------
# channels against dense NumPy Kraus sums (textbook Kraus operators written out here)
def np_kraus(name, *a):
    I, X, Y, Z = O.I2, O.X, O.Y, O.Z
    if name == "bit_flip":
        p, = a
        return [np.sqrt(1 - p) * I, np.sqrt(p) * X]
    if name == "phase_flip":
        p, = a
        return [np.sqrt(1 - p) * I, np.sqrt(p) * Z]
    if name == "bit_phase_flip":
        p, = a
        return [np.sqrt(1 - p) * I, np.sqrt(p) * Y]
    if name == "depolarizing":
        p, = a
        return [np.sqrt(1 - p) * I] + [np.sqrt(p / 3) * P for P in (X, Y, Z)]
    if name == "amplitude_damping":
        g, = a
        return [np.array([[1, 0], [0, np.sqrt(1 - g)]]), np.array([[0, np.sqrt(g)], [0, 0]])]
    if name == "generalized_amplitude_damping":
        g, p = a
        return [np.sqrt(p) * np.array([[1, 0], [0, np.sqrt(1 - g)]]), np.sqrt(p) * np.array([[0, np.sqrt(g)], [0, 0]]),
                np.sqrt(1 - p) * np.array([[np.sqrt(1 - g), 0], [0, 1]]),
                np.sqrt(1 - p) * np.array([[0, 0], [np.sqrt(g), 0]])]
    if name == "phase_damping":
        g, = a
        return [np.array([[1, 0], [0, np.sqrt(1 - g)]]), np.array([[0, 0], [0, np.sqrt(g)]])]
    if name == "pauli_channel":
        px, py, pz = a
        return [np.sqrt(1 - px - py - pz) * I, np.sqrt(px) * X, np.sqrt(py) * Y, np.sqrt(pz) * Z]
    if name == "reset_channel":
        p0, p1 = a
        r = np.sqrt(1 - p0 - p1)
        return [r * I, np.sqrt(p0) * np.array([[1, 0], [0, 0]]), np.sqrt(p0) * np.array([[0, 1], [0, 0]]),
                np.sqrt(p1) * np.array([[0, 0], [1, 0]]), np.sqrt(p1) * np.array([[0, 0], [0, 1]])]
    raise KeyError(name)


CHANNEL_CASES = [("bit_flip", (0.2,)), ("phase_flip", (0.3,)), ("bit_phase_flip", (0.15,)),
                 ("depolarizing", (0.4,)), ("amplitude_damping", (0.35,)),
                 ("generalized_amplitude_damping", (0.3, 0.7)), ("phase_damping", (0.6,)),
                 ("pauli_channel", (0.1, 0.2, 0.05)), ("reset_channel", (0.5, 0.2))]


@pytest.mark.parametrize("name,args", CHANNEL_CASES)
def test_channels_match_dense_kraus_sums(name, args, dtype, device):
    rng = np.random.default_rng(len(name))
    n = 3
    rho = rand_rho_np(n, rng)
    ch = getattr(mixed, name)(*args)
    for w in range(n):
        out = ch(to_t(rho, dtype, device), w)
        ref = np.stack([apply_kraus_np(r, np_kraus(name, *args), [w], n) for r in rho])
        np.testing.assert_allclose(as_np(out), ref, atol=10 * ATOL[dtype])
        assert torch.allclose(mixed.DensityMatrix(out).trace(), torch.ones(2, dtype=out.real.dtype, device=device),
                              atol=10 * ATOL[dtype])


def test_two_wire_channels_and_custom_kraus(dtype, device):
    rng = np.random.default_rng(9)
    n = 3
    rho = rand_rho_np(n, rng)
    # depolarizing on 2 wires: every non-identity Pauli pair with probability p/15
    p = 0.3
    ch = mixed.depolarizing(p, n_wires=2)
    labels = [a + b for a in "IXYZ" for b in "IXYZ"]
    kraus = [np.sqrt(1 - p if lab == "II" else p / 15) * O.pauli_matrix(lab) for lab in labels]
    ref = np.stack([apply_kraus_np(r, kraus, [2, 0], n) for r in rho])
    np.testing.assert_allclose(as_np(ch(to_t(rho, dtype, device), (2, 0))), ref, atol=10 * ATOL[dtype])
    # a custom 2-wire channel from random Kraus operators (an isometry split in blocks)
    v = O.random_unitary(12, rng)[:, :4]
    ks = [v[4 * i:4 * i + 4] for i in range(3)]
    cu = mixed.kraus_channel(ks)
    ref = np.stack([apply_kraus_np(r, ks, [1, 2], n) for r in rho])
    np.testing.assert_allclose(as_np(cu(to_t(rho, dtype, device), (1, 2))), ref, atol=10 * ATOL[dtype])
    # the same channel from its Choi matrix
    cc = mixed.choi_channel(cu.choi())
    np.testing.assert_allclose(as_np(cc(to_t(rho, dtype, device), (1, 2))), ref, atol=10 * ATOL[dtype])
    # pauli_channel over labels
    pc = mixed.pauli_channel(probs={"XZ": 0.1, "YY": 0.2})
    ks = [np.sqrt(0.7) * np.eye(4), np.sqrt(0.1) * O.pauli_matrix("XZ"), np.sqrt(0.2) * O.pauli_matrix("YY")]
    ref = np.stack([apply_kraus_np(r, ks, [0, 2], n) for r in rho])
    np.testing.assert_allclose(as_np(pc(to_t(rho, dtype, device), (0, 2))), ref, atol=10 * ATOL[dtype])


def np_choi(ks):
    """J = Σ_ij |i⟩⟨j| ⊗ E(|i⟩⟨j|) of one-wire Kraus operators, in NumPy."""
    J = np.zeros((4, 4), dtype=complex)
    for i in range(2):
        for j in range(2):
            e = np.zeros((2, 2))
            e[i, j] = 1
            J += np.kron(e, sum(k @ e @ k.conj().T for k in ks))
    return J


def test_choi_matrix_definition():
    ch = mixed.amplitude_damping(0.3)
    np.testing.assert_allclose(as_np(ch.choi()), np_choi(np_kraus("amplitude_damping", 0.3)), atol=1e-12)


def test_thermal_relaxation_analytic():
    t1, t2, t, pe = 50.0, 70.0, 10.0, 0.1
    ch = mixed.thermal_relaxation(t1, t2, t, excited_population=pe)
    rho = torch.tensor([[[0.3, 0.2 - 0.1j], [0.2 + 0.1j, 0.7]]], dtype=torch.complex128)
    out = ch(rho, 0)[0]
    e1, e2 = math.exp(-t / t1), math.exp(-t / t2)
    p1 = pe + (0.7 - pe) * e1
    assert abs(out[1, 1].real - p1) < 1e-12
    assert abs(out[0, 1] - (0.2 - 0.1j) * e2) < 1e-12
    # T2 = 2 T1 is pure amplitude damping
    ad = mixed.thermal_relaxation(10.0, 20.0, 3.0)
    ref = mixed.amplitude_damping(1 - math.exp(-0.3))(rho, 0)
    torch.testing.assert_close(ad(rho, 0), ref)


def test_channel_parameters_are_differentiable():
    p = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    rho = mixed.density_from_state(torch.tensor([1.0, 0.0], dtype=torch.complex128))
    out = mixed.amplitude_damping(p)(mixed.apply_gate(rho, "X", wires=0), 0)
    z = mixed.expectation(out, "Z0")
    z.sum().backward()
    # ⟨Z⟩ = p·1 + (1−p)·(−1) = 2p − 1
    assert abs(float(z.detach()) - (2 * 0.2 - 1)) < 1e-12
    assert abs(float(p.grad) - 2.0) < 1e-12


def test_trace_and_positivity_kept_through_noisy_circuit(dtype, device):
    rng = np.random.default_rng(13)
    c, n_in = random_circuit(3, rng, with_inputs=False)
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    nm = mixed.NoiseModel()
    nm.add(mixed.depolarizing(0.05)).add(mixed.amplitude_damping(0.1), gates=["CNOT", "CZ", "SWAP"])
    nm.add(mixed.thermal_relaxation(30.0, 40.0, 2.0), wires=[1])
    rho = mixed.run(c, noise_model=nm)
    assert bool(mixed.is_density(rho, atol=50 * ATOL[dtype]).all())
    with torch.no_grad():
        pure = mixed.run(c)
        assert float(qinfo.purity(rho)) < float(qinfo.purity(pure)) - 1e-3


# ------------------------------------------------------------------------------------------------
# noise model
def test_noise_model_inserts_channels_after_matching_gates(dtype, device):
    c = tql.Circuit(3).to(device)
    c = c.double() if dtype == torch.complex128 else c
    c.h(0).cnot(0, 1).rx(2, 0.4).cnot(1, 2).ry(0, 0.3)
    bf, ad, dp2 = mixed.bit_flip(0.1), mixed.amplitude_damping(0.2), mixed.depolarizing(0.2, 2)
    nm = mixed.NoiseModel().add(bf, gates="CX", wires=[1]).add(ad, gates=["RX", "RY"]).add(dp2, gates="CNOT")
    got = mixed.run(c, noise_model=nm)
    rho = mixed.zero_density(3, dtype=dtype, device=device)
    rho = mixed.apply_gate(rho, "H", wires=0)
    rho = mixed.apply_gate(rho, "CNOT", wires=(0, 1))
    rho = dp2(bf(rho, 1), (0, 1))
    rho = ad(mixed.apply_gate(rho, "RX", 0.4, wires=2), 2)
    rho = mixed.apply_gate(rho, "CNOT", wires=(1, 2))
    rho = dp2(bf(rho, 1), (1, 2))
    rho = ad(mixed.apply_gate(rho, "RY", 0.3, wires=0), 0)
    np.testing.assert_allclose(as_np(got), as_np(rho), atol=10 * ATOL[dtype])
    assert "bit_flip after CNOT on wires [1]" in repr(nm)


def test_noise_model_errors():
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.1, 2), gates="RX")
    c = tql.Circuit(2).rx(0, 0.1)
    with pytest.raises(ValueError, match="2-wire channel depolarizing cannot follow RX"):
        mixed.run(c, noise_model=nm)
    with pytest.raises(TypeError, match="expected a Channel"):
        mixed.NoiseModel().add("depolarizing")
    with pytest.raises(ValueError, match="unknown gate"):
        mixed.NoiseModel().add(mixed.bit_flip(0.1), gates="FOO")
    with pytest.raises(TypeError, match="NoiseModel"):
        mixed.run(c, noise_model="noisy")


def test_noise_model_warns_once_of_wires_the_circuit_lacks():
    import warnings
    c = tql.Circuit(2, dtype=torch.complex128).h(0).cnot(0, 1)
    nm = (mixed.NoiseModel().add_readout_error(0.1, wires=[5]).add(mixed.depolarizing(0.5), wires=[7])
          .add(mixed.bit_flip(0.2), wires=[1, 7]))                         # wire 1 exists: no warning
    with pytest.warns(UserWarning, match=r"2 wire\(s\) never meets depolarizing on wires \[7\]; readout errors "
                                         r"on wires \[5\]") as record:
        value = mixed.expval(c, "Z0 Z1", noise_model=nm)
    assert record[0].filename == __file__                              # points at the caller
    assert float(value) == pytest.approx(1 - 2 * 0.2, abs=1e-12)        # only the bit flip on wire 1 acts
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mixed.expval(c, "Z0 Z1", noise_model=nm)                        # once per model and size
        mixed.expval(c, "Z0 Z1", noise_model=mixed.NoiseModel().add(mixed.bit_flip(0.1), wires=[0, 1]))


# ------------------------------------------------------------------------------------------------
# measurement and reset
def test_collapse_is_seeded_and_projects(device):
    psi = torch.tensor([[0.6, 0, 0, 0.8]], dtype=torch.complex128, device=device).repeat(64, 1)
    rho = mixed.density_from_state(psi)
    out1, r1 = mixed.measure(rho, 0, generator=torch.Generator(device=device).manual_seed(4))
    out2, r2 = mixed.measure(rho, 0, generator=torch.Generator(device=device).manual_seed(4))
    assert torch.equal(out1, out2) and torch.equal(r1, r2)
    assert 0 < int(out1.sum()) < 64
    for b in range(64):
        k = int(out1[b])
        expect = torch.zeros(4, 4, dtype=torch.complex128, device=device)
        expect[3 * k, 3 * k] = 1
        torch.testing.assert_close(r1[b], expect)
    # the non-selective measurement is the probability-weighted mixture of the collapsed states
    nonsel = mixed.measure_channel(rho[:1], 0)
    ref = torch.zeros(4, 4, dtype=torch.complex128, device=device)
    ref[0, 0], ref[3, 3] = 0.36, 0.64
    torch.testing.assert_close(nonsel[0], ref)


def test_reset_channel_and_collapsing_reset(device):
    bell = torch.tensor([[1, 0, 0, 1]], dtype=torch.complex128, device=device) / math.sqrt(2)
    rho = mixed.density_from_state(bell)
    r = mixed.reset(rho, 1)
    ref = torch.zeros(4, 4, dtype=torch.complex128, device=device)
    ref[0, 0] = ref[2, 2] = 0.5              # wire 0 maximally mixed, wire 1 in |0>
    torch.testing.assert_close(r[0], ref)
    outs, rc = mixed.reset(rho.repeat(16, 1, 1), 1, generator=torch.Generator(device=device).manual_seed(0),
                           return_outcomes=True)
    for b in range(16):
        k = int(outs[b])
        e = torch.zeros(4, 4, dtype=torch.complex128, device=device)
        e[2 * k, 2 * k] = 1                  # wire 0 collapsed to the outcome, wire 1 reset
        torch.testing.assert_close(rc[b], e)


def test_mixed_circuit_with_mid_circuit_measurement(device):
    c = mixed.MixedCircuit(2).to(device).double()
    c.h(0).cnot(0, 1).measure(0).rx(1, trainable=True).channel(mixed.phase_flip(0.1), 1).reset(0)
    with torch.no_grad():
        rho = c()
    # after measuring wire 0 of a Bell state: classical mixture; then RX(θ) on wire 1, reset wire 0
    z1 = float(mixed.expectation(rho, "Z1"))
    assert abs(z1 - 0.0) < 1e-12             # 1/2 (cos θ) + 1/2 (−cos θ)
    assert abs(float(mixed.expectation(rho, "Z0")) - 1.0) < 1e-12
    # collapsing measurement records the outcomes and is reproducible
    c2 = mixed.MixedCircuit(2).to(device).double()
    c2.h(0).cnot(0, 1).measure(0, collapse=True)
    r = c2(state=mixed.zero_density(2, 8, dtype=torch.complex128, device=device),
           generator=torch.Generator(device=device).manual_seed(1))
    wires, outs = c2.last_outcomes[0]
    assert wires == (0,) and outs.shape == (8,)
    zz = mixed.expectation(r, ["Z0", "Z1"])
    torch.testing.assert_close(zz[:, 0], 1 - 2 * outs.to(zz.dtype))
    torch.testing.assert_close(zz[:, 1], zz[:, 0])
    with pytest.raises(ValueError, match="no inverse"):
        c.inverse()


# ------------------------------------------------------------------------------------------------
# differentiation methods
def test_parameter_shift_matches_backprop_on_noisy_circuit():
    c = tql.Circuit(3).double()
    c.ry(0, trainable=True).rx(1, input=0).crx(0, 1, trainable=True).cnot(1, 2)
    c.rot(2, trainable=True).rzz(0, 2, input=1, scale=0.5).u3(1, trainable=True)
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.05)).add(mixed.amplitude_damping(0.1), gates="CRX")
    H = [tql.Hamiltonian("Z0 Z1 + 0.3*X2"), "Y1"]
    x = torch.tensor([[0.3, -0.7], [1.1, 0.4]], dtype=torch.float64, requires_grad=True)
    rho0 = mixed.density_from_state(tql.random_state(3, 1, generator=torch.Generator().manual_seed(0),
                                                     dtype=torch.complex128)).requires_grad_(True)
    vals = {}
    for method in ("backprop", "parameter-shift"):
        v = mixed.expval(c, H, x=x, state=rho0, noise_model=nm, diff_method=method)
        g = torch.autograd.grad((v * torch.tensor([1.0, -2.0], dtype=torch.float64)).sum(), [c.weights, x, rho0])
        vals[method] = (v.detach(), g)
    torch.testing.assert_close(vals["backprop"][0], vals["parameter-shift"][0])
    for a, b in zip(vals["backprop"][1], vals["parameter-shift"][1]):
        torch.testing.assert_close(a, b)


def test_parameter_shift_through_mixed_circuit_instructions_and_shots():
    c = mixed.MixedCircuit(2).double()
    c.ry(0, trainable=True).channel(mixed.amplitude_damping(0.3), 0).cnot(0, 1).measure(1)
    c.rx(1, trainable=True).reset(0).ry(0, trainable=True)
    vals = [mixed.expval(c, "Z1 + X0", diff_method=m) for m in ("backprop", "parameter-shift")]
    grads = [torch.autograd.grad(v.sum(), c.weights)[0] for v in vals]
    torch.testing.assert_close(vals[0], vals[1])
    torch.testing.assert_close(grads[0], grads[1])
    v = mixed.expval(c, "Z1 + X0", diff_method="parameter-shift", shots=20000,
                     generator=torch.Generator().manual_seed(3))
    g = torch.autograd.grad(v.sum(), c.weights)[0]
    assert torch.allclose(v, vals[0].detach(), atol=0.05) and torch.allclose(g, grads[0], atol=0.08)


def test_backprop_gradcheck_through_channels():
    c = tql.Circuit(2).double()
    c.ry(0, trainable=True).cnot(0, 1).rx(1, trainable=True)
    nm = mixed.NoiseModel().add(mixed.phase_damping(0.2))

    def f(w):
        return mixed.expval(c, "X0 Z1 + Y1", noise_model=nm, weights=w)
    assert torch.autograd.gradcheck(f, (torch.tensor([0.4, -1.2], dtype=torch.float64, requires_grad=True),))


def test_adjoint_is_refused_with_a_clear_error():
    c = tql.Circuit(1).rx(0, trainable=True)
    with pytest.raises(ValueError, match="adjoint.*not supported for density matrices"):
        mixed.expval(c, "Z0", diff_method="adjoint")
    with pytest.raises(ValueError, match="diff_method must be one of"):
        mixed.expval(c, "Z0", diff_method="finite")
    m = mixed.MixedCircuit(1).h(0).measure(0, collapse=True)
    with pytest.raises(ValueError, match="collapsing"):
        mixed.expval(m, "Z0", diff_method="parameter-shift")


# ------------------------------------------------------------------------------------------------
# bad input
def test_bad_kraus_and_channel_parameters():
    with pytest.raises(ValueError, match="not trace preserving"):
        mixed.kraus_channel([np.eye(2) * 0.9])
    with pytest.raises(ValueError, match="must be square"):
        mixed.kraus_channel([np.ones((2, 3))])
    with pytest.raises(ValueError, match="not a power of two"):
        mixed.kraus_channel([np.eye(3)])
    with pytest.raises(ValueError, match="different shapes"):
        mixed.kraus_channel([np.eye(2), np.eye(4)])
    with pytest.raises(ValueError, match=r"p=1.2 is outside \[0, 1\]"):
        mixed.bit_flip(1.2)
    with pytest.raises(ValueError, match=r"gamma=-0.1 is outside"):
        mixed.amplitude_damping(-0.1)
    with pytest.raises(ValueError, match=r"p=1.5 is outside"):
        mixed.generalized_amplitude_damping(0.1, 1.5)
    with pytest.raises(ValueError, match="sum to"):
        mixed.pauli_channel(0.5, 0.4, 0.3)
    with pytest.raises(ValueError, match=r"p0 \+ p1"):
        mixed.reset_channel(0.7, 0.6)
    with pytest.raises(ValueError, match=r"T2=30 > 2\*T1=20"):
        mixed.thermal_relaxation(10.0, 30.0, 1.0)
    with pytest.raises(ValueError, match="T1=-1 must be > 0"):
        mixed.thermal_relaxation(-1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="not finite"):
        mixed.phase_flip(float("nan"))
    with pytest.raises(ValueError, match="not completely positive"):
        mixed.choi_channel(np.diag([1.0, -0.5, 0.5, 1.0]).astype(complex))
    with pytest.raises(ValueError, match="not trace preserving"):
        mixed.choi_channel(np.eye(4, dtype=complex) * 2)


def test_bad_shapes_and_wires():
    ch = mixed.bit_flip(0.1)
    with pytest.raises(ValueError, match=r"shape \(batch, 2\*\*n, 2\*\*n\)"):
        ch(torch.zeros(2, 4, 2, dtype=torch.complex64), 0)
    with pytest.raises(ValueError, match="not a power of two"):
        ch(torch.zeros(1, 3, 3, dtype=torch.complex64), 0)
    with pytest.raises(ValueError, match="wire 2 is out of range"):
        ch(mixed.zero_density(2), 2)
    with pytest.raises(ValueError, match="bit_flip acts on 1 wire"):
        ch(mixed.zero_density(2), (0, 1))
    c = tql.Circuit(2)
    with pytest.raises(ValueError, match="state has 3 qubits"):
        mixed.run(c, state=mixed.zero_density(3))
    with pytest.raises(TypeError, match="dtype"):
        mixed.run(c, state=mixed.zero_density(2, dtype=torch.complex128))
    with pytest.raises(ValueError, match="RX acts on 1 wire"):
        mixed.apply_gate(mixed.zero_density(2), "RX", 0.1, wires=(0, 1))
    with pytest.raises(ValueError, match="wire 5"):
        mixed.MixedCircuit(2).measure(5)


def test_density_matrix_wrapper():
    dm = mixed.DensityMatrix.zeros(2, dtype=torch.complex128)
    c = tql.Circuit(2).double().h(0).cnot(0, 1)
    bell = dm.evolve(c)
    assert bell.n_wires == 2 and bell.batch == 1
    torch.testing.assert_close(bell.expval(["Z0 Z1", "X0 X1"]), torch.tensor([[1.0, 1.0]], dtype=torch.float64))
    torch.testing.assert_close(bell.partial_trace([0]).tensor[0], torch.eye(2, dtype=torch.complex128) / 2)
    assert abs(float(bell.entropy(base=2)) - 0.0) < 1e-12
    assert abs(float(bell.partial_trace([1]).entropy(base=2)) - 1.0) < 1e-12
    noisy = bell.apply_channel(mixed.depolarizing(0.75), 0)
    torch.testing.assert_close(noisy.tensor[0], torch.eye(4, dtype=torch.complex128) / 4)
    assert bool(noisy.is_valid().all())
    assert abs(float(bell.fidelity(noisy)) - 0.25) < 1e-12
    m = mixed.DensityMatrix(torch.eye(4, dtype=torch.complex64) / 4)   # a square 2-d tensor is one matrix
    assert m.batch == 1 and m.n_wires == 2
    torch.testing.assert_close(m.probabilities(), torch.full((1, 4), 0.25))


# ------------------------------------------------------------------------------------------------
# a MixedCircuit through the generic entry points: density matrices, never silently pure
def test_noisy_circuits_take_the_density_path_everywhere(dtype, device):
    mx = tql.mixed
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    c = mx.MixedCircuit(1, dtype=dtype)
    c.x(0).channel(mx.amplitude_damping(1.0), 0)          # γ = 1 sends every state to |0⟩
    c = c.to(device)
    assert c.is_noisy and not tql.Circuit(1).is_noisy
    assert float(tql.expval(c, "Z0")) == pytest.approx(1.0, abs=ATOL[dtype])
    with pytest.raises(ValueError, match="'adjoint' is not supported for density matrices"):
        tql.expval(c, "Z0", diff_method="adjoint")
    layer_circuit = mx.MixedCircuit(1, dtype=dtype)
    layer_circuit.ry(0, input=0).channel(mx.amplitude_damping(1.0), 0)
    layer = tql.QuantumLayer(layer_circuit.to(device), ["Z0"])
    out = layer(torch.tensor([[math.pi], [0.3]], dtype=real, device=device))
    assert torch.allclose(out, torch.ones_like(out), atol=ATOL[dtype])
    # a noise model alone: bit flips (p = 1) after each H of H·H|0⟩ leave |1⟩
    nm = tql.NoiseModel().add(mx.bit_flip(1.0), gates="H")
    c3 = mx.MixedCircuit(1, noise_model=nm, dtype=dtype)
    c3.h(0).h(0)
    assert float(tql.expval(c3.to(device), "Z0")) == pytest.approx(-1.0, abs=ATOL[dtype])
    # gradients: parameter-shift through tql.expval equals backprop, both on ρ
    c4 = mx.MixedCircuit(1, dtype=dtype)
    c4.ry(0, trainable=True, init=0.7).channel(mx.depolarizing(0.2), 0)
    c4 = c4.to(device)
    grads = []
    for method in ("backprop", "parameter-shift"):
        c4.zero_grad()
        value = tql.expval(c4, "Z0", diff_method=method)
        value.sum().backward()
        grads.append(c4.weights.grad.clone())
        # depolarizing(p) shrinks the Bloch vector by 1 − 4p/3
        assert float(value.detach()) == pytest.approx((1 - 0.8 / 3) * math.cos(0.7), abs=ATOL[dtype])
    assert torch.allclose(grads[0], grads[1], atol=10 * ATOL[dtype])
    assert float(grads[0][0]) == pytest.approx(-(1 - 0.8 / 3) * math.sin(0.7), abs=10 * ATOL[dtype])


def test_noisy_circuits_draw_export_and_refuse_pure_only_operations():
    mx = tql.mixed
    c = mx.MixedCircuit(2, noise_model=tql.NoiseModel().add(mx.bit_flip(0.1), gates="H"))
    c.h(0).channel(mx.amplitude_damping(0.3), 0).cnot(0, 1).measure(1).reset(0)
    text = str(c)
    for piece in ("amplitude_damping", "measure", "reset", "noise after gates: NoiseModel(bit_flip after H)"):
        assert piece in text, text
    assert text.index("amplitude_damping") < text.index("●")         # drawn where it stands
    with pytest.raises(ValueError, match="OpenQASM 2.0 has no noise"):
        c.to_qasm()
    m = mx.MixedCircuit(2)
    m.h(0).measure(0).reset([1]).cnot(0, 1)
    assert m.to_qasm() == ('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\ncreg c[2];\nh q[0];\n'
                           'measure q[0] -> c[0];\nreset q[1];\ncx q[0], q[1];\n')
    m.channel(mx.bit_flip(0.1), 1)
    with pytest.raises(ValueError, match="OpenQASM 2.0 has no channels; cannot write bit_flip"):
        m.to_qasm()
    with pytest.raises(ValueError, match="quantum_fisher: the Fubini–Study metric is that of a pure"):
        tql.grad.quantum_fisher(m)
    with pytest.raises(TypeError, match="append it to a tql.MixedCircuit"):
        tql.Circuit(2).append(m)
    joined = mx.MixedCircuit(2).append(m)
    assert len(joined.instructions) == 3 and joined.is_noisy


def test_append_grows_the_same_parameter():
    a = tql.Circuit(1)
    a.ry(0, trainable=True)
    w = a.weights
    b = tql.Circuit(1)
    b.rx(0, trainable=True, init=0.5)
    a.append(b)
    assert a.weights is w and a.weights.shape == (2,) and float(a.weights.detach()[1]) == pytest.approx(0.5)


def test_append_keeps_the_appended_circuits_noise_on_its_own_gates():
    mx = tql.mixed
    theta, phi, p = 0.4, 1.1, 0.15
    a = mx.MixedCircuit(2, dtype=torch.complex128)
    a.ry(0, theta)
    b = mx.MixedCircuit(2, dtype=torch.complex128,
                        noise_model=tql.NoiseModel().add(mx.bit_flip(p)).add_readout_error(0.05, 0.1, wires=1))
    b.rx(1, phi).measure(0)
    a.append(b)
    # the bit flip follows b's RX only (not a's RY), before b's measurement; b's readout is a's now
    z0, z1 = tql.mixed.expval(a, ["Z0", "Z1"])[0].tolist()
    assert z0 == pytest.approx(math.cos(theta), abs=1e-12)
    c, d = 1 - 0.05 - 0.1, 0.1 - 0.05
    assert z1 == pytest.approx(c * (1 - 2 * p) * math.cos(phi) + d, abs=1e-12)
    assert [type(inst).__name__ for _, inst in a.instructions] == ["ChannelInstruction", "MeasureInstruction"]
    other = mx.MixedCircuit(2, noise_model=tql.NoiseModel().add_readout_error(0.2))
    with pytest.raises(ValueError, match="both circuits have readout errors"):
        mx.MixedCircuit(2, noise_model=tql.NoiseModel().add_readout_error(0.1)).append(other)


def test_parameter_shift_refuses_trainable_channels():
    mx = tql.mixed
    p = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    c = mx.MixedCircuit(1, dtype=torch.complex128)
    c.ry(0, trainable=True, init=0.5).channel(mx.depolarizing(p), 0)
    with pytest.raises(ValueError, match=r"channel\(s\) \['depolarizing'\] have trainable parameters: use 'backprop'"):
        tql.expval(c, "Z0", diff_method="parameter-shift")
    tql.expval(c, "Z0").sum().backward()
    # ⟨Z⟩ = (1 − 4p/3) cos θ
    assert float(p.grad) == pytest.approx(-4 / 3 * math.cos(0.5), abs=1e-12)
    nm = tql.NoiseModel().add(mx.bit_flip(p), gates="RY")
    plain = tql.Circuit(1, dtype=torch.complex128)
    plain.ry(0, trainable=True)
    with pytest.raises(ValueError, match=r"\['bit_flip'\]"):
        mx.expval(plain, "Z0", noise_model=nm, diff_method="parameter-shift")


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("diff_method", ["backprop", "parameter-shift"])
def test_nan_trainable_angle_is_named_before_the_density_run(diff_method, fuse):
    mx = tql.mixed
    # fuse=False walks the density segments gate by gate, outside the state-vector engine
    c = mx.MixedCircuit(2, fuse=fuse, noise_model=tql.NoiseModel().add(mx.depolarizing(0.1)))
    c.ry(0, trainable=True).rx(1, trainable=True).cnot(0, 1)
    with torch.no_grad():
        c.weights[1] = float("nan")
    with pytest.raises(ValueError, match=r"weights index \[1\]"):
        mx.expval(c, ["Z0"], diff_method=diff_method)
    with pytest.raises(ValueError, match=r"weights index \[1\]"):
        mx.run(c)


def test_single_precision_kraus_lists_use_the_complex64_tolerance():
    # a list of complex64 / float32 matrices (tensors or arrays) is single-precision input, as a
    # stacked complex64 tensor is: its round-off (~1e-8 here) must not fail the 1e-8 check
    g = 0.3
    k_np = [np.array([[1, 0], [0, np.sqrt(1 - g)]]), np.array([[0, np.sqrt(g)], [0, 0]])]
    rho = rand_rho_np(1, np.random.default_rng(2), batch=2)
    want = apply_kraus_np(rho, k_np, [0], 1)
    for ops in ([torch.as_tensor(k, dtype=torch.complex64) for k in k_np],
                [k.astype(np.complex64) for k in k_np],
                [torch.as_tensor(k, dtype=torch.float32) for k in k_np]):
        ch = mixed.kraus_channel(ops)
        got = ch(torch.as_tensor(rho, dtype=torch.complex128), (0,))
        np.testing.assert_allclose(as_np(got), want, atol=1e-6)
    with pytest.raises(ValueError, match="not trace preserving"):          # still checked
        mixed.kraus_channel([torch.as_tensor(1.001 * k, dtype=torch.complex64) for k in k_np])
    with pytest.raises(ValueError, match="not trace preserving"):          # double input: 1e-8
        mixed.kraus_channel([k * (1 + 1e-7) for k in k_np])


def test_choi_channel_reads_lists_in_double_precision_and_complex64_at_its_tolerance():
    # Choi matrix J = sum_ij |i><j| (x) E(|i><j|) of generalized amplitude damping, built in NumPy
    g, p = 0.37, 0.71
    ks = [np.sqrt(p) * np.diag([1, np.sqrt(1 - g)]), np.sqrt(p) * np.array([[0, np.sqrt(g)], [0, 0]]),
          np.sqrt(1 - p) * np.diag([np.sqrt(1 - g), 1]), np.sqrt(1 - p) * np.array([[0, 0], [np.sqrt(g), 0]])]
    J = np_choi(ks)
    rho = rand_rho_np(1, np.random.default_rng(5), batch=3)
    want = apply_kraus_np(rho, ks, [0], 1)
    ch = mixed.choi_channel(J.tolist())            # Python numbers: double precision, not float32
    np.testing.assert_allclose(as_np(ch(torch.as_tensor(rho), (0,))), want, atol=1e-12)
    ch = mixed.choi_channel(torch.as_tensor(J, dtype=torch.complex64))     # single precision round-off
    np.testing.assert_allclose(as_np(ch(torch.as_tensor(rho), (0,))), want, atol=1e-6)
    with pytest.raises(TypeError, match="Choi"):
        mixed.choi_channel("J")


def test_expval_generator_seeds_collapsing_measurements_with_and_without_shots():
    theta = 0.7
    c = mixed.MixedCircuit(2).double()
    c.h(0).cnot(0, 1).measure(0, collapse=True).ry(1, theta)
    rho0 = mixed.zero_density(2, batch=64, dtype=torch.complex128)
    a = mixed.expval(c, ["Z0", "Z1"], state=rho0, generator=torch.Generator().manual_seed(3))
    b = mixed.expval(c, ["Z0", "Z1"], state=rho0, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    # per row: Z0 = ±1 (the outcome), and wire 1 = |outcome> rotated by RY(θ): Z1 = Z0 cos θ
    torch.testing.assert_close(a[:, 0].abs(), torch.ones(64, dtype=torch.float64))
    torch.testing.assert_close(a[:, 1], a[:, 0] * math.cos(theta))
    assert 0 < int((a[:, 0] > 0).sum()) < 64
    s1 = mixed.expval(c, ["Z0", "Z1"], state=rho0, shots=20, generator=torch.Generator().manual_seed(4))
    s2 = mixed.expval(c, ["Z0", "Z1"], state=rho0, shots=20, generator=torch.Generator().manual_seed(4))
    assert torch.equal(s1, s2)


def test_a_sweep_over_fresh_noise_models_runs_each_models_channels():
    # each NoiseModel is freed before the next is built, so CPython may give the next one the
    # same id: the cached segments must not be the freed model's. Oracle: after RY(θ) and one
    # depolarizing(p), ⟨Z⟩ = cos θ (1 − 4p/3); amplitude damping γ: 1 − 2 sin²(θ/2)(1 − γ)
    theta = 0.5
    c = tql.Circuit(1).double()
    c.ry(0, theta)
    for p in (0.0, 0.3, 0.6, 0.9):
        v = mixed.expval(c, "Z0", noise_model=mixed.NoiseModel().add(mixed.depolarizing(p)))
        assert abs(v.item() - math.cos(theta) * (1 - 4 * p / 3)) < 1e-12
    for g in (0.2, 0.7):
        v = mixed.expval(c, "Z0", noise_model=mixed.NoiseModel().add(mixed.amplitude_damping(g)))
        assert abs(v.item() - (1 - 2 * math.sin(theta / 2) ** 2 * (1 - g))) < 1e-12


def test_channel_arguments_that_are_not_numbers_are_named():
    mx = tql.mixed
    with pytest.raises(TypeError, match="bit_flip: p must be a number, got '0.1'"):
        mx.bit_flip("0.1")
    with pytest.raises(TypeError, match="got the string 'abc'"):
        mx.kraus_channel("abc")
    with pytest.raises(TypeError, match="Kraus operator 1 is not a numeric matrix"):
        mx.kraus_channel([np.eye(2), [["a", 0], [0, 1]]])
    with pytest.raises(TypeError, match=r"thermal_relaxation: t1 must be a real scalar, got a tensor of shape \(2,\)"):
        mx.thermal_relaxation(torch.tensor([1.0, 2.0]), 1.0, 0.1)
    # a zero tensor for px is "not given": probs= alone applies (X with probability 0.1: <Z> = 0.8)
    ch = mx.pauli_channel(torch.tensor(0.0), probs={"X": 0.1})
    rho = mx.zero_density(1, dtype=torch.complex128)
    assert float(mx.expectation(ch(rho, [0]), "Z0")[0]) == pytest.approx(0.8, abs=1e-12)
