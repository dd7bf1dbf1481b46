"""Templates against independent NumPy oracles (tests/oracle.py and hand-written states)."""

import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import templates as T

from . import oracle as O

REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}


def new_circuit(n, dtype, device):
    return tql.Circuit(n, dtype=dtype).to(device)


def as_np(t):
    return t.detach().cpu().numpy()


def weights_np(c):
    return as_np(c.weights).astype(np.float64)


def unitary_of(ops, n):
    """Dense product of (name, wires, params) ops from the oracle."""
    u = np.eye(2 ** n, dtype=np.complex128)
    for name, wires, params in ops:
        wires = [wires] if isinstance(wires, int) else list(wires)
        m = name if isinstance(name, np.ndarray) else O.gate_matrix(name, *params, n_wires=len(wires))
        u = O.full_operator(m, wires, n) @ u
    return u


def zero_np(n, batch=1):
    s = np.zeros((batch, 2 ** n), dtype=np.complex128)
    s[:, 0] = 1
    return s


def bits_of(i, n):
    return [(i >> (n - 1 - w)) & 1 for w in range(n)]


def dft(N):
    j, k = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    return np.exp(2j * np.pi * j * k / N) / np.sqrt(N)


# ---------------------------------------------------------------------------------------------
# angle encoding
def test_angle_encoding_ry_is_product_state(dtype, device, atol):
    rng = np.random.default_rng(0)
    x = rng.uniform(-np.pi, np.pi, (5, 3))
    c = T.angle_encoding(new_circuit(3, dtype, device))
    assert c.count_ops() == {"RY": 3} and c.num_parameters == 0 and c.n_inputs == 3
    out = as_np(c(torch.tensor(x, dtype=REAL[dtype], device=device)))
    expected = np.stack([np.kron(np.kron([np.cos(r[0] / 2), np.sin(r[0] / 2)],
                                         [np.cos(r[1] / 2), np.sin(r[1] / 2)]),
                                 [np.cos(r[2] / 2), np.sin(r[2] / 2)]) for r in x])
    np.testing.assert_allclose(out, expected, atol=atol)


@pytest.mark.parametrize("rotation,gate", [("X", "RX"), ("z", "RZ"), ("RY", "RY")])
def test_angle_encoding_axes_wires_columns_scale(rotation, gate, dtype, device, atol):
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, (4, 4))
    c = new_circuit(4, dtype, device)
    c.h(0).h(1).h(2).h(3)
    T.angle_encoding(c, wires=[3, 1], rotation=rotation, first_column=1, scale=0.5)
    out = as_np(c(torch.tensor(x, dtype=REAL[dtype], device=device)))
    ops = [("H", w, ()) for w in range(4)] + [(gate, 3, (0.5 * x[:, 1],)), (gate, 1, (0.5 * x[:, 2],))]
    np.testing.assert_allclose(out, O.run_ops(ops, 4, zero_np(4)), atol=atol)


def test_angle_encoding_from_int_and_errors():
    c = T.angle_encoding(2, rotation="X")
    assert isinstance(c, tql.Circuit) and c.n_wires == 2 and c.count_ops() == {"RX": 2}
    with pytest.raises(ValueError, match="rotation"):
        T.angle_encoding(2, rotation="W")
    with pytest.raises(ValueError, match="wire 5 is out of range"):
        T.angle_encoding(2, wires=[0, 5])
    with pytest.raises(ValueError, match="repeated wires"):
        T.angle_encoding(3, wires=[1, 1])
    with pytest.raises(ValueError, match="needs at least one wire|wires must not be empty"):
        T.angle_encoding(3, wires=[])
    with pytest.raises(ValueError, match="first_column"):
        T.angle_encoding(2, first_column=-1)
    with pytest.raises(TypeError, match="scale"):
        T.angle_encoding(2, scale="big")
    with pytest.raises(TypeError, match="expected a Circuit"):
        T.angle_encoding("circuit")
    with pytest.raises(ValueError, match="n_wires must be a positive int"):
        T.angle_encoding(0)
    c = T.angle_encoding(3, first_column=2)
    with pytest.raises(ValueError, match="input column 4"):
        c(torch.zeros(2, 3))


# ---------------------------------------------------------------------------------------------
# amplitude encoding
def test_amplitude_encoding_pads_and_normalises(dtype, device, atol):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 5))
    out = T.amplitude_encoding(torch.tensor(x, dtype=REAL[dtype], device=device), 3)
    assert out.shape == (4, 8) and out.dtype == dtype and out.device.type == device
    padded = np.concatenate([x, np.zeros((4, 3))], axis=1)
    np.testing.assert_allclose(as_np(out), padded / np.linalg.norm(padded, axis=1, keepdims=True), atol=atol)
    out = T.amplitude_encoding(torch.tensor(x, dtype=REAL[dtype], device=device), 3, pad_value=0.5)
    padded = np.concatenate([x, np.full((4, 3), 0.5)], axis=1)
    np.testing.assert_allclose(as_np(out), padded / np.linalg.norm(padded, axis=1, keepdims=True), atol=atol)
    # a full-length complex row, as a circuit input state
    z = rng.standard_normal(4) + 1j * rng.standard_normal(4)
    state = T.amplitude_encoding(torch.tensor(z, device=device), 2, dtype=dtype)
    assert state.shape == (1, 4) and state.dtype == dtype
    np.testing.assert_allclose(as_np(state)[0], z / np.linalg.norm(z), atol=atol)
    c = new_circuit(2, dtype, device).h(0)
    np.testing.assert_allclose(as_np(c(state=state)), O.run_ops([("H", 0, ())], 2, as_np(state)), atol=atol)


def test_amplitude_encoding_dtype_rules_and_gradient():
    assert T.amplitude_encoding(torch.ones(2, 3), 2).dtype == torch.complex64
    assert T.amplitude_encoding(torch.ones(2, 3, dtype=torch.float64), 2).dtype == torch.complex128
    assert T.amplitude_encoding([[1, 2, 3]], 2).shape == (1, 4)
    x = torch.tensor([[3.0, 4.0]], dtype=torch.float64, requires_grad=True)
    T.amplitude_encoding(x, 1).real[0, 0].backward()     # d/dx (x0 / |x|) = (|x|^2 - x0^2, -x0 x1) / |x|^3
    np.testing.assert_allclose(x.grad.numpy(), [[16 / 125, -12 / 125]], atol=1e-12)


def test_amplitude_encoding_normalize_false():
    x = torch.tensor([[0.6, 0.8], [1.0, 0.0]], dtype=torch.float64)
    out = T.amplitude_encoding(x, 2, normalize=False)
    np.testing.assert_allclose(out.numpy(), [[0.6, 0.8, 0, 0], [1, 0, 0, 0]])
    with pytest.raises(ValueError, match="row 1 has norm 2"):
        T.amplitude_encoding(torch.tensor([[1.0, 0.0], [2.0, 0.0]]), 1, normalize=False)


def test_amplitude_encoding_errors(device):
    with pytest.raises(ValueError, match="row 2 of x is all zeros"):
        T.amplitude_encoding(torch.tensor([[1.0, 0], [0, 1], [0, 0]], device=device), 2)
    with pytest.raises(ValueError, match="row 0 of x contains NaN"):
        T.amplitude_encoding(torch.tensor([[float("nan"), 0]], device=device), 2)
    with pytest.raises(ValueError, match="9 features do not fit in the 8 amplitudes of 3 wires"):
        T.amplitude_encoding(torch.ones(2, 9, device=device), 3)
    with pytest.raises(ValueError, match="shape"):
        T.amplitude_encoding(torch.ones(2, 2, 2), 3)
    with pytest.raises(ValueError, match="n_wires"):
        T.amplitude_encoding(torch.ones(2, 2), 0)
    with pytest.raises(TypeError, match="dtype"):
        T.amplitude_encoding(torch.ones(2, 2), 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="pad_value"):
        T.amplitude_encoding(torch.ones(2, 2), 2, pad_value=float("inf"))
    # a zero row that padding fills is fine
    out = T.amplitude_encoding(torch.zeros(1, 2), 2, pad_value=1.0)
    np.testing.assert_allclose(out.numpy(), [[0, 0, 2 ** -0.5, 2 ** -0.5]], atol=1e-6)


# ---------------------------------------------------------------------------------------------
# basis encoding
def test_basis_encoding_bits_strings_indices(dtype, device):
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2, (6, 4))
    out = T.basis_encoding(torch.tensor(bits, device=device), 4, dtype=dtype)
    assert out.shape == (6, 16) and out.dtype == dtype and out.device.type == device
    expected = np.zeros((6, 16))
    for b, row in enumerate(bits):
        expected[b, int("".join(map(str, row)), 2)] = 1
    np.testing.assert_array_equal(as_np(out), expected)
    np.testing.assert_array_equal(as_np(T.basis_encoding(torch.tensor(bits, dtype=torch.float32, device=device),
                                                         4, dtype=dtype)), expected)
    strings = ["".join(map(str, row)) for row in bits]
    np.testing.assert_array_equal(as_np(T.basis_encoding(strings, 4, dtype=dtype)), expected)
    idx = torch.tensor([[5], [0], [7]], device=device)
    out = T.basis_encoding(idx, 3, dtype=dtype)
    np.testing.assert_array_equal(as_np(out).argmax(1), [5, 0, 7])
    np.testing.assert_array_equal(np.abs(as_np(out)).sum(1), [1, 1, 1])
    # one sample, and agreement with the library's basis_state
    one = T.basis_encoding([0, 1, 1], 3, dtype=dtype, device=device)
    np.testing.assert_array_equal(as_np(one), as_np(tql.basis_state("011", dtype=dtype)))
    # a basis encoding followed by X on every wire
    c = new_circuit(3, dtype, device).x(0).x(1).x(2)
    np.testing.assert_array_equal(as_np(c(state=T.basis_encoding("011", 3, dtype=dtype, device=device))).argmax(1),
                                  [0b100])


def test_basis_encoding_errors(device):
    with pytest.raises(ValueError, match="row 1 has values other than 0 and 1"):
        T.basis_encoding(torch.tensor([[0, 1], [2, 0]], device=device), 2)
    with pytest.raises(ValueError, match="row 0 has values other than 0 and 1"):
        T.basis_encoding(torch.tensor([[0.5, 1.0]], device=device), 2)
    with pytest.raises(ValueError, match="index 8 in row 1 is not an integer in \\[0, 8\\)"):
        T.basis_encoding(torch.tensor([[1], [8]], device=device), 3)
    with pytest.raises(ValueError, match="is not an integer"):
        T.basis_encoding(torch.tensor([[1.5]], device=device), 3)
    with pytest.raises(ValueError, match="shape \\(B, 3\\) of bits or \\(B, 1\\)"):
        T.basis_encoding(torch.zeros(2, 2), 3)
    with pytest.raises(ValueError, match="bit string '012'"):
        T.basis_encoding("012", 3)
    with pytest.raises(ValueError, match="bit string '01'"):
        T.basis_encoding(["011", "01"], 3)
    with pytest.raises(TypeError, match="real or integer"):
        T.basis_encoding(torch.zeros(1, 2, dtype=torch.complex64), 2)


# ---------------------------------------------------------------------------------------------
# IQP
def test_iqp_features_products():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4))
    out = T.iqp_features(torch.tensor(x)).numpy()
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    np.testing.assert_allclose(out, np.concatenate([x, np.stack([x[:, i] * x[:, j] for i, j in pairs], 1)], 1))
    out = T.iqp_features(torch.tensor(x), n_features=2, first_column=1).numpy()
    np.testing.assert_allclose(out, np.concatenate([x, (x[:, 1] * x[:, 2])[:, None]], 1))
    assert T.iqp_features(torch.tensor([1.0, 2.0, 3.0])).shape == (1, 6)
    with pytest.raises(ValueError, match="do not exist"):
        T.iqp_features(torch.zeros(2, 3), n_features=3, first_column=1)
    with pytest.raises(TypeError, match="must be real"):
        T.iqp_features(torch.zeros(2, 3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="shape"):
        T.iqp_features(torch.zeros(2, 3, 1))


def iqp_reference(x, n_repeats, pairs):
    """Hand-written IQP state: (H^n, then the diagonal phase exp(-i/2 (Σ x_i z_i + Σ x_i x_j z_i z_j)))^r."""
    B, n = x.shape
    hn = O.kron(*([O.H] * n))
    z = np.array([[1 - 2 * b for b in bits_of(i, n)] for i in range(2 ** n)], dtype=float)  # (2^n, n)
    out = []
    for row in x:
        angle = z @ row + sum(row[i] * row[j] * z[:, i] * z[:, j] for i, j in pairs)
        s = zero_np(n)[0]
        for _ in range(n_repeats):
            s = np.exp(-0.5j * angle) * (hn @ s)
        out.append(s)
    return np.stack(out)


@pytest.mark.parametrize("n_repeats", [1, 2])
def test_iqp_encoding_matches_hand_written_state(n_repeats, dtype, device, atol):
    rng = np.random.default_rng(5)
    x = rng.uniform(-1.5, 1.5, (4, 3))
    c = T.iqp_encoding(new_circuit(3, dtype, device), n_repeats=n_repeats)
    assert c.count_ops() == {"H": 3 * n_repeats, "RZ": 3 * n_repeats, "RZZ": 3 * n_repeats}
    feats = T.iqp_features(torch.tensor(x, dtype=REAL[dtype], device=device))
    out = as_np(c(feats))
    expected = iqp_reference(x, n_repeats, [(0, 1), (0, 2), (1, 2)])
    np.testing.assert_allclose(out, expected, atol=10 * atol)


def test_iqp_encoding_linear_pattern_wires_and_columns(dtype, atol):
    rng = np.random.default_rng(6)
    x = rng.uniform(-1.5, 1.5, (2, 4))
    # features in columns 1..3 of a 4-column x, on wires (2, 0, 1) of a 3-wire circuit
    c = T.iqp_encoding(tql.Circuit(3, dtype=dtype), wires=[2, 0, 1], first_column=1, pattern="linear")
    assert c.count_ops() == {"H": 3, "RZ": 3, "RZZ": 2}
    out = as_np(c(T.iqp_features(torch.tensor(x, dtype=REAL[dtype]), first_column=1)))
    f = x[:, 1:]
    ops = [("H", w, ()) for w in (2, 0, 1)]
    ops += [("RZ", w, (f[:, i],)) for i, w in enumerate((2, 0, 1))]
    ops += [("RZZ", (2, 0), (f[:, 0] * f[:, 1],)), ("RZZ", (0, 1), (f[:, 1] * f[:, 2],))]
    np.testing.assert_allclose(out, O.run_ops(ops, 3, zero_np(3)), atol=10 * atol)


def test_iqp_encoding_errors():
    with pytest.raises(ValueError, match="pattern"):
        T.iqp_encoding(3, pattern="ring")
    with pytest.raises(ValueError, match="overlap the feature columns 0..2"):
        T.iqp_encoding(3, product_column=2)
    with pytest.raises(ValueError, match="n_repeats must be >= 1"):
        T.iqp_encoding(3, n_repeats=0)
    c = T.iqp_encoding(3)
    with pytest.raises(ValueError, match="input column 5"):
        c(torch.zeros(2, 3))          # forgot iqp_features


# ---------------------------------------------------------------------------------------------
# hardware-efficient ansatz
@pytest.mark.parametrize("pattern,n_ent", [("linear", 3), ("ring", 4), ("all", 6)])
def test_hardware_efficient_structure(pattern, n_ent):
    c = T.hardware_efficient(4, 3, pattern=pattern)
    assert c.count_ops() == {"RY": 4 * 4, "CNOT": 3 * n_ent}
    assert c.num_parameters == 16
    c = T.hardware_efficient(4, 3, pattern=pattern, final_rotations=False, kind="complex")
    assert c.count_ops() == {"U3": 12, "CNOT": 3 * n_ent} and c.num_parameters == 36
    c = T.hardware_efficient(3, 2, rotations=("RZ", "RY", "RZ"), kind="complex", entangler="CZ", pattern="ring")
    assert c.count_ops() == {"RZ": 18, "RY": 9, "CZ": 6} and c.num_parameters == 27
    c = T.hardware_efficient(3, 2, entangler="CRY")
    assert c.count_ops() == {"RY": 9, "CRY": 4} and c.num_parameters == 13
    assert T.hardware_efficient(1, 2).count_ops() == {"RY": 3}


def test_hardware_efficient_real_matches_oracle_and_stays_real(dtype, device, atol):
    c = T.hardware_efficient(new_circuit(4, dtype, device), 2, pattern="ring")
    w = weights_np(c)
    ops, k = [], 0
    for _ in range(2):
        for q in range(4):
            ops.append(("RY", q, (w[k],)))
            k += 1
        ops += [("CNOT", (0, 1), ()), ("CNOT", (1, 2), ()), ("CNOT", (2, 3), ()), ("CNOT", (3, 0), ())]
    for q in range(4):
        ops.append(("RY", q, (w[k],)))
        k += 1
    assert k == c.num_parameters
    out = as_np(c())
    np.testing.assert_allclose(out, O.run_ops(ops, 4, zero_np(4)), atol=atol)
    assert np.abs(out.imag).max() < atol
    # real input states stay real too
    v = np.random.default_rng(7).standard_normal((3, 16))
    real_in = torch.tensor(v / np.linalg.norm(v, axis=1, keepdims=True), dtype=dtype, device=device)
    assert np.abs(as_np(c(state=real_in)).imag).max() < atol


def test_hardware_efficient_complex_matches_oracle(dtype, atol):
    c = T.hardware_efficient(tql.Circuit(4, dtype=dtype), 1, wires=[3, 1, 2], kind="complex")
    w = weights_np(c)
    ops = [("U3", 3, tuple(w[0:3])), ("U3", 1, tuple(w[3:6])), ("U3", 2, tuple(w[6:9])),
           ("CNOT", (3, 1), ()), ("CNOT", (1, 2), ()),
           ("U3", 3, tuple(w[9:12])), ("U3", 1, tuple(w[12:15])), ("U3", 2, tuple(w[15:18]))]
    np.testing.assert_allclose(as_np(c.unitary()), unitary_of(ops, 4), atol=10 * atol)


def _paddle_entangled_layer_unitary(theta, kind):
    """Paddle Quantum's RealEntangledLayer / ComplexEntangledLayer written out from its definition:
    per layer RY(θ[d, q]) (or U3(θ[d, q, :])) on every qubit q, then CNOT(q, (q + 1) % n) for
    q = 0..n-1; dense NumPy matrices, qubit 0 the most significant bit."""
    depth, n = theta.shape[:2]

    def one(m, q):
        return O.kron(*[m if w == q else np.eye(2) for w in range(n)])

    def cnot(c, t):
        d = 2 ** n
        u = np.zeros((d, d), dtype=np.complex128)
        for i in range(d):
            j = i ^ (1 << (n - 1 - t)) if (i >> (n - 1 - c)) & 1 else i
            u[j, i] = 1
        return u

    def ry(a):
        return np.array([[np.cos(a / 2), -np.sin(a / 2)], [np.sin(a / 2), np.cos(a / 2)]], dtype=np.complex128)

    def u3(t, p, lam):        # Paddle's (and OpenQASM's) U3
        return np.array([[np.cos(t / 2), -np.exp(1j * lam) * np.sin(t / 2)],
                         [np.exp(1j * p) * np.sin(t / 2), np.exp(1j * (p + lam)) * np.cos(t / 2)]])
    u = np.eye(2 ** n, dtype=np.complex128)
    for d in range(depth):
        for q in range(n):
            u = one(ry(theta[d, q]) if kind == "real" else u3(*theta[d, q]), q) @ u
        for q in range(n):
            u = cnot(q, (q + 1) % n) @ u
    return u


@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_hardware_efficient_ring_without_final_rotations_is_paddles_entangled_layer(n, kind):
    c = T.hardware_efficient(tql.Circuit(n, dtype=torch.complex128), 2, pattern="ring", final_rotations=False,
                             kind=kind)
    shape = (2, n) if kind == "real" else (2, n, 3)
    theta = weights_np(c).reshape(shape)          # Paddle's parameter layout [depth, qubit(, 3)]
    np.testing.assert_allclose(as_np(c.unitary()), _paddle_entangled_layer_unitary(theta, kind), atol=1e-12)
    # the defaults (linear chain + final rotations) are a different circuit
    d = T.hardware_efficient(tql.Circuit(n, dtype=torch.complex128), 2, kind=kind)
    assert d.num_parameters == c.num_parameters + int(np.prod(shape[1:]))


def test_havlicek_zz_feature_map_from_iqp_encoding_columns():
    """iqp_encoding is PennyLane's IQPEmbedding; Havlíček's ZZ map (Qiskit's ZZFeatureMap:
    H, P(2 x_i), then CNOT(i, j) P(2 (π - x_i)(π - x_j)) on j CNOT(i, j) for all i < j) is the
    same template fed the columns given in its docstring, equal up to a global phase."""
    import math
    n, reps = 3, 2
    x = np.random.default_rng(11).uniform(0, 2 * np.pi, (4, n))
    c = T.iqp_encoding(tql.Circuit(n, dtype=torch.complex128), n_repeats=reps)
    xt = torch.tensor(x)
    f = 2 * T.iqp_features(math.pi - xt)
    f[:, :n] = 2 * xt
    ours = as_np(c(f))
    hn = O.kron(*([O.H] * n))

    def p_on(lam, q):
        return O.kron(*[np.diag([1, np.exp(1j * lam)]) if w == q else np.eye(2) for w in range(n)])

    def cx(a, b):
        d = 2 ** n
        u = np.zeros((d, d))
        for i in range(d):
            u[i ^ (1 << (n - 1 - b)) if (i >> (n - 1 - a)) & 1 else i, i] = 1
        return u
    for row, got in zip(x, ours):
        s = zero_np(n)[0]
        for _ in range(reps):
            s = hn @ s
            for i in range(n):
                s = p_on(2 * row[i], i) @ s
            for i in range(n):
                for j in range(i + 1, n):
                    s = cx(i, j) @ p_on(2 * (np.pi - row[i]) * (np.pi - row[j]), j) @ cx(i, j) @ s
        assert abs(abs(np.vdot(s, got)) - 1) < 1e-10
    # the plain template (x_i, x_i x_j) is a different state: the description must not claim Havlíček's
    plain = as_np(c(T.iqp_features(xt)))
    assert max(abs(abs(np.vdot(a, b)) - 1) for a, b in zip(plain, ours)) > 1e-2


def test_hardware_efficient_errors():
    with pytest.raises(ValueError, match="kind='real' needs real gates, but RX is complex"):
        T.hardware_efficient(3, 1, rotations=("RX",))
    with pytest.raises(ValueError, match="kind='real' needs real gates, but CY is complex"):
        T.hardware_efficient(3, 1, entangler="CY")
    with pytest.raises(ValueError, match="kind must be 'real' or 'complex'"):
        T.hardware_efficient(3, 1, kind="imaginary")
    with pytest.raises(ValueError, match="pattern must be"):
        T.hardware_efficient(3, 1, pattern="star")
    with pytest.raises(ValueError, match="TOFFOLI acts on 3 wire"):
        T.hardware_efficient(3, 1, entangler="TOFFOLI")
    with pytest.raises(ValueError, match="unknown gate 'FOO'"):
        T.hardware_efficient(3, 1, rotations=("FOO",), kind="complex")
    with pytest.raises(ValueError, match="rotation H has no angle"):
        T.hardware_efficient(3, 1, rotations=("H",))
    with pytest.raises(ValueError, match="n_layers must be >= 1"):
        T.hardware_efficient(3, 0)
    with pytest.raises(TypeError, match="n_layers must be an int"):
        T.hardware_efficient(3, 1.5)
    with pytest.raises(ValueError, match="init must be"):
        T.hardware_efficient(3, 1, init="ones")


def test_templates_train_end_to_end():
    c = T.angle_encoding(3)
    T.strongly_entangling(c, 2)
    x = torch.randn(4, 3)
    psi = c(x)
    loss = (psi.real[:, 0] ** 2 + psi.imag[:, 0] ** 2).sum()
    loss.backward()
    assert c.weights.grad is not None and c.weights.grad.shape == (18,)
    assert torch.isfinite(c.weights.grad).all() and c.weights.grad.abs().sum() > 0


# ---------------------------------------------------------------------------------------------
# PennyLane-style layers
def strongly_entangling_ops(w, n_layers, wires, ranges):
    n, ops, k = len(wires), [], 0
    for l in range(n_layers):
        for q in wires:
            ops.append(("ROT", q, tuple(w[k:k + 3])))
            k += 3
        if n > 1:
            for i in range(n):
                ops.append(("CNOT", (wires[i], wires[(i + ranges[l]) % n]), ()))
    return ops


@pytest.mark.parametrize("n,n_layers,ranges", [(3, 3, None), (4, 2, (3, 2)), (2, 2, None), (1, 2, None)])
def test_strongly_entangling_matches_oracle(n, n_layers, ranges, dtype, atol):
    c = T.strongly_entangling(tql.Circuit(n, dtype=dtype), n_layers, ranges=ranges)
    assert c.num_parameters == 3 * n * n_layers
    assert c.count_ops().get("CNOT", 0) == (n * n_layers if n > 1 else 0)
    default = [l % (n - 1) + 1 for l in range(n_layers)] if n > 1 else [0] * n_layers
    ops = strongly_entangling_ops(weights_np(c), n_layers, list(range(n)), ranges or default)
    np.testing.assert_allclose(as_np(c.unitary()), unitary_of(ops, n), atol=10 * atol)


def test_strongly_entangling_on_wire_subset_and_errors(atol):
    c = T.strongly_entangling(tql.Circuit(4, dtype=torch.complex128), 2, wires=[3, 0, 2], imprimitive="CZ")
    w = weights_np(c)
    ops = []
    for l, r in enumerate([1, 2]):
        ops += [("ROT", q, tuple(w[9 * l + 3 * i: 9 * l + 3 * i + 3])) for i, q in enumerate([3, 0, 2])]
        ops += [("CZ", ([3, 0, 2][i], [3, 0, 2][(i + r) % 3]), ()) for i in range(3)]
    np.testing.assert_allclose(as_np(c.unitary()), unitary_of(ops, 4), atol=1e-10)
    with pytest.raises(ValueError, match="ranges has 1 entries for 2 layers"):
        T.strongly_entangling(3, 2, ranges=[1])
    with pytest.raises(ValueError, match="range 3 must be in \\[1, 2\\]"):
        T.strongly_entangling(3, 1, ranges=[3])
    with pytest.raises(TypeError, match="range 1.0 is not an int"):
        T.strongly_entangling(3, 1, ranges=[1.0])


def test_strongly_entangling_takes_numpy_and_torch_integer_ranges():
    # a PennyLane user's ranges is often an integer array; its entries were refused as "not an int"
    for ranges in (np.array([3, 2]), torch.tensor([3, 2]), [np.int32(3), np.int64(2)]):
        c = T.strongly_entangling(tql.Circuit(4, dtype=torch.complex128), 2, ranges=ranges)
        ops = strongly_entangling_ops(weights_np(c), 2, [0, 1, 2, 3], [3, 2])
        np.testing.assert_allclose(as_np(c.unitary()), unitary_of(ops, 4), atol=1e-10)
    for bad in ([True, 1], [np.float64(1.0), 1], [torch.tensor(1.0), 1]):
        with pytest.raises(TypeError, match="is not an int"):
            T.strongly_entangling(3, 2, ranges=bad)
    with pytest.raises(ValueError, match="data_reuploading: entangler pattern must be"):
        T.data_reuploading(2, 1, 2, pattern="star")


@pytest.mark.parametrize("n,cnots", [(1, []), (2, [(0, 1)]), (3, [(0, 1), (1, 2), (2, 0)])])
def test_basic_entangler_matches_oracle(n, cnots, dtype, atol):
    c = T.basic_entangler(tql.Circuit(n, dtype=dtype), 2, rotation="Y")
    assert c.num_parameters == 2 * n and c.count_ops().get("CNOT", 0) == 2 * len(cnots)
    w = weights_np(c)
    ops = []
    for l in range(2):
        ops += [("RY", q, (w[l * n + q],)) for q in range(n)]
        ops += [("CNOT", p, ()) for p in cnots]
    np.testing.assert_allclose(as_np(c.unitary()), unitary_of(ops, n), atol=10 * atol)
    with pytest.raises(ValueError, match="rotation"):
        T.basic_entangler(2, 1, rotation="H")


def test_data_reuploading_matches_oracle(dtype, device, atol):
    rng = np.random.default_rng(8)
    x = rng.uniform(-2, 2, (3, 4))
    c = T.data_reuploading(new_circuit(2, dtype, device), 2, n_features=3, first_column=1, scale=0.7)
    assert c.num_parameters == 12 and c.n_inputs == 4
    assert c.count_ops() == {"RY": 4, "RZ": 2, "ROT": 4, "CNOT": 2}
    w = weights_np(c)
    ops = []
    for l in range(2):
        # features 0, 1 -> RY on wires 0, 1; feature 2 -> RZ on wire 0
        ops += [("RY", 0, (0.7 * x[:, 1],)), ("RY", 1, (0.7 * x[:, 2],)), ("RZ", 0, (0.7 * x[:, 3],))]
        ops += [("ROT", 0, tuple(w[6 * l:6 * l + 3])), ("ROT", 1, tuple(w[6 * l + 3:6 * l + 6])),
                ("CNOT", (0, 1), ())]
    out = as_np(c(torch.tensor(x, dtype=REAL[dtype], device=device)))
    np.testing.assert_allclose(out, O.run_ops(ops, 2, zero_np(2)), atol=10 * atol)
    with pytest.raises(ValueError, match="n_features must be >= 1"):
        T.data_reuploading(2, 1, n_features=0)
    with pytest.raises(ValueError, match="entangler pattern"):
        T.data_reuploading(2, 1, n_features=2, pattern="star")


# ---------------------------------------------------------------------------------------------
# QFT
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_qft_is_the_dft(n, dtype, device, atol):
    c = T.qft_circuit(n, dtype=dtype).to(device)
    u = as_np(c.unitary())
    np.testing.assert_allclose(u, dft(2 ** n), atol=10 * atol)
    assert c.count_ops().get("CP", 0) == n * (n - 1) // 2 and c.count_ops().get("SWAP", 0) == n // 2
    inv = T.qft_circuit(n, inverse=True, dtype=dtype).to(device)
    np.testing.assert_allclose(as_np(inv.unitary()), dft(2 ** n).conj().T, atol=10 * atol)


def test_qft_on_wires_and_without_swaps(atol):
    c = T.qft(tql.Circuit(3, dtype=torch.complex128), wires=[2, 0])
    np.testing.assert_allclose(as_np(c.unitary()), O.full_operator(dft(4), [2, 0], 3), atol=1e-10)
    c = T.qft(tql.Circuit(3, dtype=torch.complex128), swaps=False)
    rev = np.zeros((8, 8))
    for i in range(8):
        rev[int(format(i, "03b")[::-1], 2), i] = 1
    np.testing.assert_allclose(as_np(c.unitary()), rev @ dft(8), atol=1e-10)
    # a QFT template appended after other gates: a plane wave from a basis state
    c = tql.Circuit(3, dtype=torch.complex128).x(1)
    T.qft(c)
    np.testing.assert_allclose(as_np(c())[0], dft(8)[:, 2], atol=1e-10)
    with pytest.raises(ValueError, match="qft: wire 3 is out of range"):
        T.qft(3, wires=[0, 3])
    with pytest.raises(TypeError, match="n_wires must be an int"):
        T.qft_circuit("3")
