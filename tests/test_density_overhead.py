"""The lean density-matrix segments (mixed/simulate.py ``_lean`` and the channel step of
``_evolve``): a lone two-qubit permutation between channels as one direct gather, channels
applied from their cached superoperator; against dense NumPy Kraus maps (test_density_fusion's
oracle), after dtype and noise-strength changes, and under gradcheck in complex128."""
import numpy as np
import pytest
import torch

import torchquantum_layers as tql
from torchquantum_layers import mixed
from torchquantum_layers.mixed import simulate

from .test_density_fusion import (as_np, build, kraus_amplitude_damping, kraus_depolarizing, kraus_map,
                                  oracle_run, rand_rho, unitary_map)
from . import oracle as O

# a CNOT / SWAP chain with noise after each two-qubit gate: every permutation sits alone between
# channels (the "hea cnot-noise" benchmark's shape), reversed and far-apart wires included
CHAIN = [("RY", (0,), 0.3), ("RX", (1,), -0.8), ("RZ", (2,), 0.5), ("RY", (3,), 1.1),
         ("CNOT", (0, 1), None), ("CNOT", (1, 2), None), ("CNOT", (3, 0), None), ("SWAP", (1, 3), None),
         ("RX", (2,), 0.9), ("CNOT", (2, 1), None)]


@pytest.mark.parametrize("lean", [True, False])
def test_lone_permutations_and_channels_match_kraus_oracle(dtype, device, atol, lean, monkeypatch):
    monkeypatch.setattr(simulate, "LEAN_SEGMENTS", lean)
    n = 4
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.15), gates=["CNOT", "SWAP"])
    c = build(CHAIN, n, dtype, device, nm)
    kinds = [kind for kind, _ in simulate._fused_segments(c, nm)]
    assert kinds.count("direct") == (3 if lean else 0)     # CNOT(1, 2), CNOT(3, 0), SWAP
    rng = np.random.default_rng(11)
    rho_np = rand_rho(n, rng, 3)
    want = oracle_run(CHAIN, n, rho_np, [], None,
                      lambda name, wires: [(kraus_depolarizing(0.15), (w,)) for w in wires] if len(wires) == 2 else [])
    for _ in range(2):              # the second call reads the cached segments and superoperators
        got = mixed.run(c, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
        np.testing.assert_allclose(as_np(got), want, atol=20 * atol)


def test_lone_permutation_from_broadcast_state_and_inputs(dtype, device, atol):
    """ρ broadcast over the input batch (|0⟩⟨0| expanded) through a direct segment and a channel."""
    n = 3
    nm = mixed.NoiseModel().add(mixed.depolarizing(0.2), gates="CNOT")
    c = mixed.MixedCircuit(n, noise_model=nm).cnot(0, 2)
    c.add("RY", (1,), input=0)
    c.cnot(1, 0)
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    assert [k for k, _ in simulate._fused_segments(c, nm)][0] == "direct"
    x = torch.tensor([[0.4], [-1.3]], dtype=torch.float64 if dtype == torch.complex128 else torch.float32,
                     device=device)
    got = mixed.run(c, x=x)
    rho = np.zeros((2, 8, 8), dtype=complex)
    rho[:, 0, 0] = 1
    dep = kraus_depolarizing(0.2)
    rho = unitary_map(rho, O.gate_matrix("CNOT"), (0, 2), n)
    rho = kraus_map(kraus_map(rho, dep, (0,), n), dep, (2,), n)
    rho = unitary_map(rho, np.stack([O.gate_matrix("RY", v) for v in as_np(x)[:, 0]]), (1,), n)
    rho = unitary_map(rho, O.gate_matrix("CNOT"), (1, 0), n)
    rho = kraus_map(kraus_map(rho, dep, (1,), n), dep, (0,), n)
    np.testing.assert_allclose(as_np(got), rho, atol=20 * atol)


def test_channel_steps_follow_dtype_and_noise_strength(device):
    """Channels between segments read their superoperator from the channel's per-(dtype, device)
    cache: a sweep over strengths (new noise models) and .double() on the same circuit must not
    read a stale one."""
    n = 4
    rng = np.random.default_rng(12)
    rho_np = rand_rho(n, rng, 2)
    for p in (0.0, 0.4, 0.05):
        nm = mixed.NoiseModel().add(mixed.depolarizing(p), gates=["CNOT", "SWAP"])
        want = oracle_run(CHAIN, n, rho_np, [], None,
                          lambda name, wires, p=p: [(kraus_depolarizing(p), (w,)) for w in wires]
                          if len(wires) == 2 else [])
        c = build(CHAIN, n, torch.complex64, device, nm)
        for dtype, tol in ((torch.complex64, 2e-5), (torch.complex128, 1e-12)):
            c = c.double() if dtype == torch.complex128 else c
            for _ in range(2):
                got = mixed.run(c, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
                assert got.dtype == dtype
                np.testing.assert_allclose(as_np(got), want, atol=tol)


def test_circuit_channel_instructions_match_oracle(dtype, device, atol):
    """MixedCircuit.channel instructions (not a noise model) take the same channel step."""
    n = 3
    amp = mixed.amplitude_damping(0.3)
    c = mixed.MixedCircuit(n).h(0).cnot(0, 1).channel(amp, 1).channel(mixed.bit_flip(0.2), 0).cnot(1, 2)
    c.channel(amp, 2)
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    got = mixed.run(c)
    rho = np.zeros((1, 8, 8), dtype=complex)
    rho[:, 0, 0] = 1
    rho = unitary_map(rho, O.H, (0,), n)
    rho = unitary_map(rho, O.gate_matrix("CNOT"), (0, 1), n)
    rho = kraus_map(rho, kraus_amplitude_damping(0.3), (1,), n)
    rho = kraus_map(rho, [np.sqrt(0.8) * np.eye(2), np.sqrt(0.2) * O.X], (0,), n)
    rho = unitary_map(rho, O.gate_matrix("CNOT"), (1, 2), n)
    rho = kraus_map(rho, kraus_amplitude_damping(0.3), (2,), n)
    np.testing.assert_allclose(as_np(got), rho, atol=20 * atol)


def test_gradcheck_trainable_channel_between_lone_permutations(device):
    """A channel whose parameter requires grad rebuilds its superoperator on every call (no cache),
    and the direct segments pass gradients to ρ and the weights: gradcheck, complex128."""
    rng = np.random.default_rng(13)
    n = 3
    spec = [("RY", (0,), ("w",)), ("CNOT", (0, 1), None), ("CNOT", (1, 2), None), ("RX", (2,), ("w",)),
            ("SWAP", (2, 0), None)]
    c = build(spec, n, torch.complex128, device)
    H = tql.Hamiltonian("Z0 Z1 + 0.5*X2 - 0.3*Y1")
    w0 = torch.as_tensor(rng.uniform(-1, 1, c.weights.numel()), device=device).requires_grad_(True)
    p0 = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    g0 = torch.tensor(0.1, dtype=torch.float64, requires_grad=True)
    rho0 = torch.as_tensor(rand_rho(n, rng, 2), device=device).requires_grad_(True)

    def f(w, p, g, rho):
        nm = (mixed.NoiseModel().add(mixed.depolarizing(p), gates=["CNOT", "SWAP"])
              .add(mixed.amplitude_damping(g), gates="SWAP"))
        assert "direct" in [k for k, _ in simulate._fused_segments(c, nm)]
        return mixed.expval(c, H, state=rho, noise_model=nm, weights=w)
    assert torch.autograd.gradcheck(f, (w0, p0, g0, rho0))


def test_lean_path_keeps_the_errors(device):
    c = mixed.MixedCircuit(2, noise_model=mixed.NoiseModel().add(mixed.depolarizing(0.1), gates="CNOT"))
    c.cnot(0, 1).to(device)
    with pytest.raises(TypeError, match="state dtype"):
        mixed.run(c, state=mixed.zero_density(2, dtype=torch.complex128, device=device))
    with pytest.raises(ValueError, match="the state has 3 qubits"):
        mixed.run(c, state=mixed.zero_density(3, device=device))
    with pytest.raises(ValueError, match="acts on 1 wire"):
        mixed.MixedCircuit(2).channel(mixed.depolarizing(0.1), (0, 1))


# ------------------------------------------------------------------------------------------------
# gates moved as early as each qubit's order allows (superop_blocks.wave_order)
# a QAOA cost layer listed vertex by vertex (consecutive edges share a qubit), a channel after
# every RZZ, then the mixer; per-sample (input) angles as NoisyQAOA's starts
EDGES = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
QAOA = ([("H", (w,), None) for w in range(4)] + [("RZZ", e, ("x", 0)) for e in EDGES]
        + [("RX", (w,), ("x", 1)) for w in range(4)] + [("RZZ", e, ("x", 2)) for e in EDGES[::-1]])


def qaoa_after(p, g):
    def after(name, wires):
        if name != "RZZ":
            return []
        return [(kraus_depolarizing(p), (wires[0],)), (kraus_amplitude_damping(g), (wires[1],))]
    return after



def test_wave_order_keeps_each_qubits_sequence(dtype, device, atol, monkeypatch):
    n = 4
    # depolarizing on the first wire of each RZZ, amplitude damping on the second: a custom rule
    # through MixedCircuit.channel instructions at the same places
    c = mixed.MixedCircuit(n)
    for name, wires, angle in QAOA:
        if angle is None:
            c.add(name, wires)
        else:
            c.add(name, wires, input=angle[1])
        if name == "RZZ":
            c.channel(mixed.depolarizing(0.1), wires[0]).channel(mixed.amplitude_damping(0.2), wires[1])
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    rng = np.random.default_rng(14)
    x_np = rng.uniform(-1.5, 1.5, (3, 3))
    x = torch.as_tensor(x_np, dtype=torch.float64 if dtype == torch.complex128 else torch.float32, device=device)
    rho_np = rand_rho(n, rng, 3)
    want = oracle_run(QAOA, n, rho_np, [], x_np, qaoa_after(0.1, 0.2))
    runs = {}
    for lean in (False, True):
        monkeypatch.setattr(simulate, "LEAN_SEGMENTS", lean)
        runs[lean] = [k for k, _ in simulate._fused_segments(c, None)].count("plan")
        got = mixed.run(c, x=x, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
        np.testing.assert_allclose(as_np(got), want, atol=20 * atol)
    assert runs[True] < runs[False]


def test_wave_order_stops_at_measurements(dtype, device, atol):
    """A mid-circuit (non-selective) measurement is a barrier: nothing moves across it."""
    n = 3
    c = mixed.MixedCircuit(n)
    c.rzz(0, 1, 0.7).channel(mixed.depolarizing(0.2), 0).rzz(0, 2, -0.4).channel(mixed.depolarizing(0.2), 2)
    c.measure(1)
    c.h(1).rzz(1, 2, 0.9).channel(mixed.amplitude_damping(0.3), 1).rzz(0, 1, 0.2)
    c = c.to(device)
    c = c.double() if dtype == torch.complex128 else c
    rng = np.random.default_rng(15)
    rho_np = rand_rho(n, rng, 2)
    got = mixed.run(c, state=torch.as_tensor(rho_np, dtype=dtype, device=device))
    r = unitary_map(rho_np, O.gate_matrix("RZZ", 0.7), (0, 1), n)
    r = kraus_map(r, kraus_depolarizing(0.2), (0,), n)
    r = unitary_map(r, O.gate_matrix("RZZ", -0.4), (0, 2), n)
    r = kraus_map(r, kraus_depolarizing(0.2), (2,), n)
    P0, P1 = np.diag([1.0, 0.0]).astype(complex), np.diag([0.0, 1.0]).astype(complex)
    r = kraus_map(r, [P0, P1], (1,), n)
    r = unitary_map(r, O.H, (1,), n)
    r = unitary_map(r, O.gate_matrix("RZZ", 0.9), (1, 2), n)
    r = kraus_map(r, kraus_amplitude_damping(0.3), (1,), n)
    r = unitary_map(r, O.gate_matrix("RZZ", 0.2), (0, 1), n)
    np.testing.assert_allclose(as_np(got), r, atol=20 * atol)


def test_gradcheck_wave_order_with_trainable_channels(device, monkeypatch):
    """The reordered blocks with channels whose parameters require grad (rebuilt every call) and
    per-sample angles: gradcheck in complex128 for the inputs, the channel parameters and ρ."""
    rng = np.random.default_rng(16)
    n = 4
    spec = [("RZZ", e, ("x", 0)) for e in [(0, 1), (0, 2), (1, 3), (2, 3)]] + [("RX", (w,), ("w",)) for w in range(2)]
    c = build(spec, n, torch.complex128, device)
    H = tql.Hamiltonian("Z0 Z1 + 0.5*X2 - 0.3*Y3 + Z1 Z3")
    w0 = torch.as_tensor(rng.uniform(-1, 1, c.weights.numel()), device=device).requires_grad_(True)
    x0 = torch.as_tensor(rng.uniform(-1, 1, (2, 1)), device=device).requires_grad_(True)
    p0 = torch.tensor(0.15, dtype=torch.float64, requires_grad=True)
    rho0 = torch.as_tensor(rand_rho(n, rng, 2), device=device).requires_grad_(True)

    runs = {}
    for lean in (False, True):
        monkeypatch.setattr(simulate, "LEAN_SEGMENTS", lean)
        nm = mixed.NoiseModel().add(mixed.depolarizing(p0), gates="RZZ")
        runs[lean] = [k for k, _ in simulate._fused_segments(c, nm)].count("plan")
    assert runs[True] < runs[False]           # RZZ(0, 2) and RZZ(1, 3) share a run

    def f(w, x, p, rho):
        nm = mixed.NoiseModel().add(mixed.depolarizing(p), gates="RZZ")
        return mixed.expval(c, H, x=x, state=rho, noise_model=nm, weights=w)
    # fast mode (random projections of the Jacobian): the 2 x 16 x 16 complex ρ made the full check 50 s
    assert torch.autograd.gradcheck(f, (w0, x0, p0, rho0), fast_mode=True)
