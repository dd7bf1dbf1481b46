"""Gates and channels merged into superoperator blocks (mixed/superop_blocks.py) against dense
NumPy Kraus maps Σ K ρ K† built from Kronecker products (tests/oracle.py), and gradcheck."""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed
from torchquantum_layers.mixed import simulate
from torchquantum_layers.mixed.superop_blocks import SuperopBlock, embed, plan_blocks, superop_of_unitary

from . import oracle as O

I2 = np.eye(2, dtype=np.complex128)


# ------------------------------------------------------------------------------------------------
# NumPy references
def kraus_depolarizing(p):
    return [np.sqrt(1 - p) * I2, np.sqrt(p / 3) * O.X, np.sqrt(p / 3) * O.Y, np.sqrt(p / 3) * O.Z]


def kraus_amplitude_damping(g):
    return [np.array([[1, 0], [0, np.sqrt(1 - g)]], dtype=np.complex128),
            np.array([[0, np.sqrt(g)], [0, 0]], dtype=np.complex128)]


def random_kraus(n_wires, n_ops, rng):
    """Kraus operators of a random channel: blocks of a random isometry (d·m, d)."""
    d = 2 ** n_wires
    g = rng.standard_normal((d * n_ops, d)) + 1j * rng.standard_normal((d * n_ops, d))
    q, _ = np.linalg.qr(g)
    return [q[a * d:(a + 1) * d] for a in range(n_ops)]


def kraus_map(rho, kraus, wires, n):
    """Σ_a K_a ρ K_a† for a batch (B, N, N), K_a widened to n wires by Kronecker products."""
    out = np.zeros_like(rho)
    for k in kraus:
        big = O.full_operator(k, wires, n)
        out = out + big @ rho @ big.conj().T
    return out


def unitary_map(rho, u, wires, n):
    """U ρ U† with U shared (d, d) or per sample (B, d, d)."""
    big = O.full_operator(u, wires, n)
    return big @ rho @ np.conj(np.swapaxes(big, -1, -2))


def rand_rho(n, rng, batch):
    d = 2 ** n
    g = rng.standard_normal((batch, d, d)) + 1j * rng.standard_normal((batch, d, d))
    rho = g @ g.conj().transpose(0, 2, 1)
    return rho / np.trace(rho, axis1=1, axis2=2)[:, None, None]


def as_np(t):
    return t.detach().cpu().numpy()


# ------------------------------------------------------------------------------------------------
# a circuit described once, built for the library and replayed by the oracle
# (name, wires, angle): angle None (fixed gate), ("w",) trainable, ("x", col) input, float constant
SPEC = [
    ("RY", (0,), ("x", 0)), ("RX", (1,), ("w",)), ("H", (2,), None), ("RZ", (3,), ("x", 1)),
    ("CNOT", (2, 0), None),                 # reversed wires, not adjacent
    ("RX", (0,), ("w",)), ("CRX", (1, 3), ("w",)), ("U3", (2,), (0.3, -0.4, 1.1)),
    ("RZZ", (3, 1), ("x", 2)), ("SWAP", (0, 3), None), ("TOFFOLI", (3, 0, 2), None),
    ("RY", (2,), 0.7), ("CZ", (1, 2), None), ("RX", (3,), ("w",)), ("S", (1,), None),
]


def build(spec, n, dtype, device, noise_model=None):
    c = mixed.MixedCircuit(n, noise_model=noise_model)
    for name, wires, angle in spec:
        if angle is None:
            c.add(name, wires)
        elif isinstance(angle, tuple) and angle[0] == "w":
            c.add(name, wires, trainable=True)
        elif isinstance(angle, tuple) and angle[0] == "x":
            c.add(name, wires, input=angle[1])
        elif isinstance(angle, tuple):
            c.add(name, wires, *angle)
        else:
            c.add(name, wires, angle)
    c = c.to(device)
    return c.double() if dtype == torch.complex128 else c


def oracle_gate(name, wires, angle, weights, x, k):
    """(matrix (d, d) or (B, d, d), next weight index)."""
    if angle is None:
        return O.gate_matrix(name), k
    if isinstance(angle, tuple) and angle[0] == "w":
        return O.gate_matrix(name, weights[k]), k + 1
    if isinstance(angle, tuple) and angle[0] == "x":
        return np.stack([O.gate_matrix(name, v) for v in x[:, angle[1]]]), k
    if isinstance(angle, tuple):
        return O.gate_matrix(name, *angle), k
    return O.gate_matrix(name, angle), k


def oracle_run(spec, n, rho, weights, x, after_gate):
    """``after_gate(name, wires)`` -> [(kraus list, wires)] applied after that gate."""
    k = 0
    for name, wires, angle in spec:
        u, k = oracle_gate(name, wires, angle, weights, x, k)
        rho = unitary_map(rho, u, wires, n)
        for kraus, ws in after_gate(name, wires):
            rho = kraus_map(rho, kraus, ws, n)
    return rho


# ------------------------------------------------------------------------------------------------
# the building blocks
def test_superop_of_unitary_is_vectorised_conjugation(dtype, device, atol):
    rng = np.random.default_rng(0)
    u = O.random_unitary(4, rng)
    rho = rand_rho(2, rng, 1)[0]
    s = superop_of_unitary(torch.as_tensor(u, dtype=dtype, device=device))
    want = (u @ rho @ u.conj().T).reshape(-1)               # row-major vec
    np.testing.assert_allclose(as_np(s) @ rho.reshape(-1), want, atol=10 * atol)


def test_embed_matches_kronecker_oracle(dtype, device, atol):
    rng = np.random.default_rng(1)
    m = O.random_unitary(4, rng)
    for positions in ([2, 0], [1, 3], [3, 1], [0, 1]):
        got = embed(torch.as_tensor(m, dtype=dtype, device=device), positions, 4)
        np.testing.assert_allclose(as_np(got), O.full_operator(m, positions, 4), atol=atol)


def test_blocks_group_gates_with_their_channels():
    dep = mixed.depolarizing(0.1)
    nm = mixed.NoiseModel().add(dep)
    c = mixed.MixedCircuit(3, noise_model=nm).rx(0, 0.1).ry(1, 0.2).rz(0, 0.3).cnot(0, 1).ry(2, 0.4)
    c.crx(2, 1, 0.5).cz(0, 2)
    segments = simulate._fused_segments(c, nm)
    assert [kind for kind, _ in segments] == ["block", "block", "direct", "block", "block", "plan", "block",
                                              "block"]
    blocks = [item for kind, item in segments if kind == "block"]
    # a rotation with its channel, then the next on the same wire: one block per wire
    assert [b.qubits for b in blocks] == [(0,), (1,), (0,), (1, 2), (0,), (2,)]
    assert [len(b.items) for b in blocks] == [4, 2, 1, 2 + 1 + 3, 1, 1]
    assert "CRX" in repr(blocks[3]) and segments[2][1].gate.name == "CNOT"
    assert [op.gate.name for op in segments[5][1][1]] == ["CZ"]        # a diagonal joins the gate runs
    # gate runs without channels stay runs of ops for the state-vector engine
    quiet = mixed.MixedCircuit(2).rx(0, 0.1).cnot(0, 1).measure(0).ry(1, 0.2)
    kinds = [kind for kind, _ in simulate._fused_segments(quiet, None)]
    assert kinds == ["plan", "inst", "plan"]


def test_gates_without_their_own_channel_stay_in_gate_runs(monkeypatch):
    dep = mixed.depolarizing(0.1)
    c = mixed.MixedCircuit(2).rx(0, 0.1).channel(dep, 0).ry(0, 0.2).rz(1, 0.3).channel(dep, 1)
    c.ry(1, 0.4).cnot(0, 1).rx(0, 0.5).channel(dep, 0).rz(0, 0.6).channel(dep, 0)
    segments = simulate._fused_segments(c, None)
    kinds = [kind for kind, _ in segments]
    # RZ(1) and its channel go before RY(0) (other qubits: they commute, superop_blocks.wave_order),
    # so both RYs and the CNOT (a permutation next to a run) join one run
    assert kinds == ["block", "block", "plan", "block"]
    assert [op.gate.name for op in segments[2][1][1]] == ["RY", "RY", "CNOT"]
    assert [op.wires for op in segments[2][1][1]] == [(0,), (1,), (0, 1)]
    assert [len(item.items) for kind, item in segments if kind == "block"] == [2, 2, 4]
    # in the circuit's own order (LEAN_SEGMENTS off) RY(0) and RY(1) are runs of their own
    monkeypatch.setattr(simulate, "LEAN_SEGMENTS", False)
    segments = simulate._fused_segments(c, None)
    assert [kind for kind, _ in segments] == ["block", "plan", "block", "plan", "block"]
    assert [op.gate.name for op in segments[1][1][1]] == ["RY"]
    assert [op.gate.name for op in segments[3][1][1]] == ["RY", "CNOT"]


def test_sparse_noise_keeps_the_runs_between_channels(dtype, device, atol):
    """Noise after CNOTs only: no channel merges with a gate, so the circuit keeps the plain
    segments (a gate run, then each channel), and stays exact."""
    spec = [("RY", (0,), 0.3), ("RY", (1,), -0.8), ("RZ", (2,), 0.5), ("CNOT", (0, 1), None),
            ("CNOT", (1, 2), None), ("RX", (1,), 1.2), ("CNOT", (2, 0), None)]
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.2), gates="CNOT")
    c = build(spec, 3, dtype, device, nm)
    segments, plain = simulate._fused_segments(c, nm), simulate._segments(c, nm)
    # the plain segments, with the lone CNOT between channels as one direct gather (simulate._lean)
    assert [kind for kind, _ in segments] == ["plan", "inst", "inst", "direct", "inst", "inst", "plan", "inst",
                                              "inst"]
    assert all(a is b for (ka, a), (_, b) in zip(segments, plain) if ka != "direct")
    assert segments[3][1] is plain[3][1][1][0] and segments[3][1].gate.name == "CNOT"
    rng = np.random.default_rng(9)
    rho_np = rand_rho(3, rng, 2)
    got = mixed.run(c, state=torch.as_tensor(rho_np, dtype=dtype, device=device))

    def after(name, wires):
        return [(kraus_depolarizing(0.2), (w,)) for w in wires] if name == "CNOT" else []
    np.testing.assert_allclose(as_np(got), oracle_run(spec, 3, rho_np, [], None, after), atol=20 * atol)


def test_plan_blocks_keeps_wide_items_apart():
    wide = mixed.kraus_channel(random_kraus(3, 2, np.random.default_rng(2)))
    c = tql.Circuit(3).rx(0, 0.1).toffoli(0, 1, 2)
    items = [("op", c.ops[0]), ("channel", mixed.depolarizing(0.1), (0,)), ("op", c.ops[1]),
             ("channel", wide, (2, 0, 1))]
    out = plan_blocks(items)
    assert [kind for kind, _ in out] == ["block", "ops", "inst"]
    assert isinstance(out[0][1], SuperopBlock) and out[1][1] == [c.ops[1]]


# ------------------------------------------------------------------------------------------------
# whole circuits against the Kraus oracle
def _noise(rng):
    dep, amp = 0.07, 0.2
    two = random_kraus(2, 3, rng)
    three = random_kraus(3, 2, rng)
    model = (mixed.NoiseModel().add(mixed.depolarizing(dep))
             .add(mixed.kraus_channel(two, name="two"), gates=["CNOT", "RZZ"])
             .add(mixed.amplitude_damping(amp), wires=[1, 3])
             .add(mixed.kraus_channel(three, name="three"), gates="TOFFOLI"))

    def after(name, wires):
        out = [(kraus_depolarizing(dep), (w,)) for w in wires]
        if name in ("CNOT", "RZZ"):
            out.append((two, wires))
        out += [(kraus_amplitude_damping(amp), (w,)) for w in wires if w in (1, 3)]
        if name == "TOFFOLI":
            out.append((three, wires))
        return out
    return model, after


def test_noisy_circuit_matches_kraus_oracle(dtype, device, atol):
    rng = np.random.default_rng(3)
    n, B = 4, 3
    model, after = _noise(rng)
    c = build(SPEC, n, dtype, device, model)
    x_np = rng.uniform(-2, 2, (B, 3))
    rho_np = rand_rho(n, rng, B)
    x = torch.as_tensor(x_np, dtype=torch.float64 if dtype == torch.complex128 else torch.float32, device=device)
    with torch.no_grad():
        c.weights.copy_(torch.as_tensor(rng.uniform(-2, 2, c.weights.numel())))
    got = mixed.run(c, x=x, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
    kinds = [kind for kind, _ in simulate._fused_segments(c, model)]
    assert {"block", "direct", "plan", "inst"} <= set(kinds)          # every route is exercised
    want = oracle_run(SPEC, n, rho_np, as_np(c.weights).astype(np.float64), x_np, after)
    np.testing.assert_allclose(as_np(got), want, atol=20 * atol)
    # the state broadcast from |0…0⟩ (batch 1 against a batch of inputs) takes the same path
    zero = np.zeros((B, 16, 16), dtype=np.complex128)
    zero[:, 0, 0] = 1
    got0 = mixed.run(c, x=x)
    np.testing.assert_allclose(as_np(got0), oracle_run(SPEC, n, zero, as_np(c.weights), x_np, after), atol=20 * atol)


def test_reference_path_agrees_with_oracle_too(dtype, device, atol):
    """FUSE_CHANNELS=False (one pass per gate run and per channel) stays exact: the benchmarks'
    'before' column."""
    rng = np.random.default_rng(4)
    n = 4
    model, after = _noise(rng)
    c = build(SPEC, n, dtype, device, model)
    x_np = rng.uniform(-2, 2, (2, 3))
    x = torch.as_tensor(x_np, dtype=torch.float64, device=device).to(c.weights.dtype)
    rho_np = rand_rho(n, rng, 2)
    old = simulate.FUSE_CHANNELS
    simulate.FUSE_CHANNELS = False
    try:
        got = mixed.run(c, x=x, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
    finally:
        simulate.FUSE_CHANNELS = old
    want = oracle_run(SPEC, n, rho_np, as_np(c.weights).astype(np.float64), x_np, after)
    np.testing.assert_allclose(as_np(got), want, atol=20 * atol)


@pytest.mark.parametrize("route", ["chosen", "forced blocks"])
def test_measure_reset_conditions_and_channel_instructions(dtype, device, atol, route, monkeypatch):
    """Mid-circuit instructions between blocks: non-selective measurement, reset, gates
    conditioned on outcome 0 and 1 (their flips of the measured wire are channels), channels
    placed by hand on reversed wires. The pass estimate keeps the plain segments for this
    circuit; "forced blocks" makes it take the blocks."""
    if route == "forced blocks":
        from torchquantum_layers.mixed import superop_blocks
        monkeypatch.setattr(superop_blocks, "passes",
                            lambda segs: 0 if any(kind in ("block", "direct") for kind, _ in segs) else 1)
    rng = np.random.default_rng(5)
    n = 3
    two = random_kraus(2, 2, rng)
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.05))
    c = mixed.MixedCircuit(n, noise_model=nm)
    c.ry(0, 0.9).cnot(0, 2).measure(0)
    c.add("RX", 1, 0.8, condition={0: 0}).add("RY", 2, 1.3, condition=0)
    c.channel(mixed.kraus_channel(two, name="two"), (2, 1)).reset(2).h(2).cnot(2, 1)
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    rho_np = rand_rho(n, rng, 2)
    got = c(state=torch.as_tensor(rho_np, dtype=dtype, device=device))
    kinds = {kind for kind, _ in simulate._fused_segments(c, nm)}
    assert ("block" in kinds) == (route == "forced blocks")

    dep = kraus_depolarizing(0.05)
    P0, P1 = np.diag([1, 0]).astype(complex), np.diag([0, 1]).astype(complex)

    def gate(r, u, wires):
        r = unitary_map(r, u, wires, n)
        for w in wires:
            r = kraus_map(r, dep, (w,), n)
        return r
    r = gate(rho_np, O.ry(0.9), (0,))
    r = gate(r, O.gate_matrix("CNOT"), (0, 2))
    r = kraus_map(r, [P0, P1], (0,), n)                                  # measure wire 0
    # RX on wire 1 where wire 0 read 0: noise acts on the gate's own wire only
    r = unitary_map(r, np.kron(P0, O.rx(0.8)) + np.kron(P1, I2), (0, 1), n)
    r = kraus_map(r, dep, (1,), n)
    r = unitary_map(r, np.kron(P0, I2) + np.kron(P1, O.ry(1.3)), (0, 2), n)
    r = kraus_map(r, dep, (2,), n)
    r = kraus_map(r, two, (2, 1), n)
    r = kraus_map(r, [P0, np.array([[0, 1], [0, 0]], dtype=complex)], (2,), n)      # reset wire 2
    r = gate(r, O.H, (2,))
    r = gate(r, O.gate_matrix("CNOT"), (2, 1))
    np.testing.assert_allclose(as_np(got), r, atol=20 * atol)


def test_constant_blocks_follow_dtype_and_noise_strength(device):
    """Blocks of fixed gates keep their matrix per dtype/device; a new noise model (a sweep over
    strengths) and a dtype change must not read a stale one."""
    rng = np.random.default_rng(6)
    spec = [("H", (0,), None), ("CNOT", (0, 1), None), ("RX", (1,), 0.4)]
    rho_np = rand_rho(2, rng, 1)
    for p in (0.0, 0.3):
        nm = mixed.NoiseModel().add(mixed.depolarizing(p))

        def after(name, wires, p=p):
            return [(kraus_depolarizing(p), (w,)) for w in wires]
        want = oracle_run(spec, 2, rho_np, [], None, after)
        c = build(spec, 2, torch.complex64, device, nm)
        for dtype, tol in ((torch.complex64, 1e-5), (torch.complex128, 1e-12)):
            c = c.double() if dtype == torch.complex128 else c       # the same circuit, in place
            for _ in range(2):      # the second call reads the cached matrices
                got = mixed.run(c, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
                np.testing.assert_allclose(as_np(got), want, atol=tol)


def test_noisy_layer_matches_oracle(device):
    """QuantumLayer with a noise model (the benchmarked case) against the oracle, complex128."""
    n, B = 3, 2
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.02)).add(mixed.amplitude_damping(0.05), gates="CNOT")
    torch.manual_seed(0)
    layer = tql.QuantumLayer.from_template(n, 1, ansatz="rxryrz_ring", noise_model=nm,
                                           simulator="density").to(device).double()
    x = torch.rand(B, n, dtype=torch.float64, device=device)
    got = layer(x)
    circuit = layer.circuit
    rho = np.zeros((B, 8, 8), dtype=complex)
    rho[:, 0, 0] = 1
    w = as_np(circuit.weights)
    x_np = as_np(x)
    for op in circuit.ops:
        vals = []
        for a in op.angles:
            if isinstance(a, tql.circuit.Param):
                vals.append(np.full(B, a.scale * w[a.index]))
            elif isinstance(a, tql.circuit.Input):
                vals.append(a.scale * x_np[:, a.column])
            else:
                vals.append(np.full(B, float(a)))
        u = np.stack([O.gate_matrix(op.gate.name, *[v[b] for v in vals]) for b in range(B)])
        rho = unitary_map(rho, u, op.wires, n)
        for wire in op.wires:
            rho = kraus_map(rho, kraus_depolarizing(0.02), (wire,), n)
        if op.gate.name == "CNOT":
            for wire in op.wires:
                rho = kraus_map(rho, kraus_amplitude_damping(0.05), (wire,), n)
    z = np.stack([np.real(np.trace(O.full_operator(O.Z, (w_,), n) @ rho, axis1=1, axis2=2)) for w_ in range(n)], 1)
    np.testing.assert_allclose(as_np(got), z, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# gradients
def test_gradcheck_weights_inputs_state_and_channel_parameter(device):
    rng = np.random.default_rng(7)
    n = 3
    spec = [("RY", (0,), ("x", 0)), ("RX", (2,), ("w",)), ("CNOT", (2, 0), None), ("CRY", (0, 2), ("w",)),
            ("RZZ", (1, 2), ("x", 1)), ("RX", (1,), ("w",))]
    c = build(spec, n, torch.complex128, device)
    H = tql.Hamiltonian("Z0 Z2 + 0.5*X1 - 0.3*Y2")
    two = random_kraus(2, 2, rng)
    w0 = torch.as_tensor(rng.uniform(-1, 1, c.weights.numel()), device=device).requires_grad_(True)
    x0 = torch.as_tensor(rng.uniform(-1, 1, (2, 2)), device=device).requires_grad_(True)
    p0 = torch.tensor(0.1, dtype=torch.float64, device=device, requires_grad=True)
    rho0 = torch.as_tensor(rand_rho(n, rng, 2), device=device).requires_grad_(True)

    def f(w, x, p, rho):
        nm = (mixed.NoiseModel().add(mixed.depolarizing(p.cpu()))
              .add(mixed.kraus_channel(two, name="two"), gates="RZZ"))
        return mixed.expval(c, H, x=x, state=rho, noise_model=nm, weights=w)
    assert torch.autograd.gradcheck(f, (w0, x0, p0, rho0))


# ------------------------------------------------------------------------------------------------
# errors
def test_bad_inputs_still_raise_clear_errors():
    two = mixed.kraus_channel(random_kraus(2, 2, np.random.default_rng(8)), name="twoq")
    nm = mixed.NoiseModel().add(two)
    c = mixed.MixedCircuit(2, noise_model=nm).rx(0, 0.1)
    with pytest.raises(ValueError, match="twoq cannot follow RX"):
        c()
    with pytest.raises(TypeError, match="noise_model must be a NoiseModel"):
        mixed.run(mixed.MixedCircuit(1).rx(0, 0.1), noise_model="depolarizing")
    c1 = mixed.MixedCircuit(2, noise_model=mixed.NoiseModel().add(mixed.depolarizing(0.1))).rx(0, 0.1)
    with pytest.raises(ValueError, match="the state has 1 qubits"):
        c1(state=mixed.zero_density(1))
    with pytest.raises(TypeError, match="state dtype"):
        c1(state=mixed.zero_density(2, dtype=torch.complex128))
