"""Density-matrix simulation: gates as ``U ρ U†`` through the state-vector kernels.

ρ ``(B, N, N)`` is viewed as the vector ``ρ.reshape(B, N*N)`` on ``2n`` wires (rows on wires
``0..n-1``, columns on ``n..2n-1``). A gate of the table is applied by the same kernel call as on
a state vector, once on its row wires with ``U`` and once on the shifted column wires with
``conj(U)`` (a permutation is its own conjugate, a diagonal is conjugated, a controlled gate
conjugates its target block). Channels, noise and mid-circuit measurements split a circuit
into segments of gates. Where the engine runs local programs (the CPU with the native library),
a segment runs as one state-vector circuit on 2n wires, each gate U on its wires and
``gates.conjugate(U)`` on the shifted ones, so the whole segment is one program call; elsewhere
(CUDA, ``fuse=False``) it walks the engine's fused plan the same way, so fusion, grid tables and
permutation gathers serve density matrices too. Where channels follow gates (a noise model on
every gate), gates and channels on at most two qubits merge into one superoperator pass
(superop_blocks.py, :func:`_fused_segments`), when that is estimated to take fewer passes.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict, defaultdict
from typing import Optional

import torch

from ..caching import lasting
from ..kernels.transforms import transforms_active
from ..block_matrices import single_wire_tables, step_matrix
from ..circuit import Op
from ..engine import (DEFAULT_MAX_FUSED_WIRES, _fuse, _tabulate, build_plan, check_finite_weights, perm_index,
                      run_circuit, uses_programs)
from ..gates import conjugate
from ..kernels.apply import (apply_diagonal_unchecked, apply_matrix_unchecked, apply_permutation_unchecked,
                             check_wires, permute_span)
from ..functional import prepare_gate_call
from ..kernels.state import REAL_OF
from ..measure import _wires, marginal
from ..observables.hamiltonian import add_constants, split_constants
from .state import as_density, zero_density

__all__ = ["apply_gate", "apply_operator", "run", "expectation", "apply_hamiltonian_density",
           "probabilities", "sample", "measure", "measure_channel", "reset", "expval", "DIFF_METHODS"]

DIFF_METHODS = ("backprop", "parameter-shift")


# ------------------------------------------------------------------------------------------------
# one gate
def _apply_op_vec(gate, v, params, wires, n, data=None, adjoint=False):
    """U ρ U† on the (B, 4**n) vector view: U on the row wires, conj(U) on the column wires, in
    one pass where both fit one kernel call: a permutation of both wire sets at once, a diagonal
    d ⊗ conj(d), a 1-qubit gate as the 4 × 4 U ⊗ conj(U) on (w, w + n) (two passes were 3.4-6.6
    clone-times of ρ at 10 qubits); other gates in two passes."""
    k = len(wires)
    both = tuple(wires) + tuple(w + n for w in wires)
    if gate.kind == "permutation" and k <= 2:
        perm = gate.perm_fn(k)
        if adjoint:
            perm = tuple(int(p) for p in torch.argsort(torch.tensor(perm)).tolist())
        d = 2 ** k
        return apply_permutation_unchecked(v, [perm[i // d] * d + perm[i % d] for i in range(d * d)], both, 2 * n)
    if gate.kind == "diagonal" and k <= 2:
        diag = gate.diag_fn(params, k, v.dtype, data, v.device)
        if adjoint:
            diag = diag.conj()
        pair = diag.unsqueeze(-1) * diag.conj().unsqueeze(-2)
        return apply_diagonal_unchecked(v, pair.reshape(*diag.shape[:-1], -1), both, 2 * n)
    if gate.kind == "dense" and k == 1:
        m = gate.matrix_fn(params, 1, v.dtype, data, v.device)
        if adjoint:
            m = m.conj().transpose(-1, -2)
        pair = (m[..., :, None, :, None] * m.conj()[..., None, :, None, :]).reshape(*m.shape[:-2], 4, 4)
        return apply_matrix_unchecked(v, pair, both, 2 * n)
    v = gate.apply(v, params, wires, 2 * n, data, adjoint)
    return gate.apply(v, params, tuple(w + n for w in wires), 2 * n, data, adjoint, conj=True)


def apply_operator(rho, matrix: torch.Tensor, wires) -> torch.Tensor:
    """``M ρ M†`` for a dense ``(d, d)`` or per-sample ``(B, d, d)`` matrix on ``wires`` (any M)."""
    rho, n = as_density(rho, "apply_operator")
    wires = check_wires(wires, n, "apply_operator")
    d = 2 ** len(wires)
    if not isinstance(matrix, torch.Tensor) or matrix.dim() not in (2, 3) or matrix.shape[-2:] != (d, d):
        raise ValueError(f"apply_operator: matrix of shape {tuple(getattr(matrix, 'shape', ()))} does not act "
                         f"on {len(wires)} wire(s) (expected ({d}, {d}) or (B, {d}, {d}))")
    matrix = matrix.to(dtype=rho.dtype, device=rho.device)
    v = rho.reshape(rho.shape[0], -1)
    v = apply_matrix_unchecked(v, matrix, wires, 2 * n)
    v = apply_matrix_unchecked(v, matrix.conj(), tuple(w + n for w in wires), 2 * n)
    N = 2 ** n
    return v.reshape(-1, N, N)


def apply_gate(rho, gate, *params, wires, matrix=None, adjoint: bool = False) -> torch.Tensor:
    """Apply a gate of the table (or its name) to ``wires`` of a density matrix: ``U ρ U†``.

    ``rho``: ``(B, N, N)``, a DensityMatrix, or state vectors ``(B, N)`` (turned into ``|ψ⟩⟨ψ|``).
    Angles are numbers, 0-d tensors or per-sample ``(B,)`` tensors, differentiable.
    """
    rho, n = as_density(rho, "apply_gate")
    gate, wires, angles, data = prepare_gate_call(gate, params, wires, n, rho.shape[0], rho.dtype,
                                                  rho.device, matrix)
    N = 2 ** n
    v = _apply_op_vec(gate, rho.reshape(rho.shape[0], -1), angles, wires, n, data, adjoint)
    return v.reshape(-1, N, N)


# ------------------------------------------------------------------------------------------------
# circuits
def _run_plan(circuit, plan, v, x, weights, n):
    """Walk one fused plan of the engine on the (B, 4**n) vector view of ρ."""
    tables = single_wire_tables(circuit, plan, x, weights)
    n2 = 2 * n
    for step in plan.steps:
        if step.kind == "single":
            op = step.ops[0]
            angles = circuit.angle_values(op, x, weights)
            v = _apply_op_vec(op.gate, v, angles, op.wires, n, circuit.data(op), op.adjoint)
        elif step.kind == "perm":
            idx = perm_index(step, v.device)
            inv = perm_index(step, v.device, inverse=True)
            lo, hi = step.wires[0], step.wires[-1]
            v = permute_span(v, idx, inv, lo, hi, n2)
            v = permute_span(v, idx, inv, lo + n, hi + n, n2)
        else:
            m = step_matrix(circuit, step, x, weights, tables)
            v = apply_matrix_unchecked(v, m, step.wires, n2)
            v = apply_matrix_unchecked(v, m.conj(), tuple(w + n for w in step.wires), n2)
    return v


_SEGMENT_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@lasting
def _doubled(circuit, ops, cache):
    """The segment as one state-vector circuit on 2n wires, each op U on its wires and conj(U)
    (gates.conjugate) on the shifted ones, sharing the weights and matrices: where the engine
    runs local programs (the CPU, kernels.program) a gate-only segment is then one program call
    instead of a walk over its fused blocks. None where programs do not run."""
    key = (circuit.dtype, str(circuit.device))
    if key not in cache:
        n = circuit.n_wires
        twin = circuit._sharing([o for op in ops for o in (
            op, Op(conjugate(op.gate), tuple(w + n for w in op.wires), op.angles, op.data_key, op.adjoint))], 2 * n)
        cache[key] = twin if uses_programs(twin) else None
    return cache[key]


def _instructions(circuit):
    return list(getattr(circuit, "instructions", ()) or ())


def _noise_key(noise_model):
    """The rules themselves (channels compare by identity and stay alive in the key): an id of the
    model could be a freed model's, reused by a new one (a sweep over noise strengths then ran
    the first model's channels)."""
    return None if noise_model is None else tuple(noise_model.rules)


@lasting
def _segments(circuit, noise_model):
    """[("plan", (Plan, ops, {doubled circuits})) | ("inst", instruction)], cached per circuit, its
    length and noise model."""
    insts = _instructions(circuit)
    fuse = circuit.fuse
    k = circuit.max_fused_wires or DEFAULT_MAX_FUSED_WIRES
    key = (len(circuit.ops), fuse, k, _noise_key(noise_model), tuple((p, id(i)) for p, i in insts))
    hit = _SEGMENT_CACHE.get(circuit)
    if hit is not None and hit[0] == key:
        return hit[1]
    if not insts and noise_model is None:
        segments = [("plan", (build_plan(circuit), list(circuit.ops), {}))] if circuit.ops else []
    else:
        at = defaultdict(list)
        for pos, inst in insts:
            at[pos].append(inst)
        segments, run_ops = [], []

        def flush():
            if run_ops:
                segments.append(_plan_segment(run_ops, fuse, k))
                run_ops.clear()

        for i, op in enumerate(circuit.ops):
            if at.get(i):
                flush()
                segments.extend(("inst", inst) for inst in at[i])
            run_ops.append(op)
            noise = noise_model.channels_for(op) if noise_model is not None else ()
            if noise:
                flush()
                from .circuit import ChannelInstruction
                segments.extend(("inst", ChannelInstruction(ch, w)) for ch, w in noise)
        flush()
        segments.extend(("inst", inst) for inst in at.get(len(circuit.ops), ()))
    _SEGMENT_CACHE[circuit] = (key, segments)
    return segments


def _plan_segment(ops, fuse, k):
    """("plan", (Plan, ops, {doubled circuits})) for a run of gates between channels."""
    steps = _fuse(list(ops), k) if fuse else None
    if steps is None:
        from ..engine import Step
        steps = [Step("single", op.wires, [op]) for op in ops]
    return ("plan", (_tabulate(steps), list(ops), {}))


_FUSED_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

FUSE_CHANNELS = True
"""Merge gates and the channels after them into superoperator blocks (superop_blocks); False runs
one segment per run of gates and one pass per channel (the reference the benchmarks compare to)."""

LEAN_SEGMENTS = True
"""A lone permutation gate between channels as one direct gather instead of a program call, and
channels applied without Channel.apply's per-call validation (:func:`_lean`, :func:`_evolve`);
False keeps the program calls and Channel.apply (the "before" of benchmarks/density_fusion.py
--compare lean)."""


@lasting
def _fused_segments(circuit, noise_model):
    """As :func:`_segments` for the density engine, with gates and the channels after them merged
    into superoperator blocks on at most two qubits (superop_blocks): [("plan", ...) |
    ("block", SuperopBlock) | ("inst", instruction)], cached per circuit, its length and noise
    model. A circuit without channels, measurements or resets keeps its one plan."""
    insts = _instructions(circuit)
    if not FUSE_CHANNELS or (not insts and noise_model is None):
        return _segments(circuit, noise_model)
    fuse = circuit.fuse
    k = circuit.max_fused_wires or DEFAULT_MAX_FUSED_WIRES
    key = (len(circuit.ops), fuse, k, _noise_key(noise_model), tuple((p, id(i)) for p, i in insts), LEAN_SEGMENTS)
    hit = _FUSED_CACHE.get(circuit)
    if hit is not None and hit[0] == key:
        return hit[1]
    from .circuit import ChannelInstruction
    from .superop_blocks import passes, plan_blocks, wave_order
    at = defaultdict(list)
    for pos, inst in insts:
        at[pos].append(inst)

    def item_of(inst):
        if isinstance(inst, ChannelInstruction):
            return ("channel", inst.channel, inst.wires)
        return ("inst", inst)
    items = []
    for i, op in enumerate(circuit.ops):
        items.extend(item_of(inst) for inst in at.get(i, ()))
        items.append(("op", op))
        if noise_model is not None:
            items.extend(("channel", ch, tuple(w)) for ch, w in noise_model.channels_for(op))
    items.extend(item_of(inst) for inst in at.get(len(circuit.ops), ()))
    segments = [_plan_segment(entry[1], fuse, k) if entry[0] == "ops" else entry for entry in plan_blocks(items)]
    if LEAN_SEGMENTS:
        # the same items with the gates moved as early as each qubit's order allows (superop_blocks.
        # wave_order): fewer gate runs where the circuit alternates gates and their channels
        waves = [_plan_segment(entry[1], fuse, k) if entry[0] == "ops" else entry
                 for entry in plan_blocks(wave_order(items), hoist=True)]
        if passes(waves) < passes(segments):
            segments = waves
    plain = _segments(circuit, noise_model)
    if passes(segments) >= passes(plain):
        segments = plain        # nothing to merge (noise on a few gates): the runs between channels
    if LEAN_SEGMENTS:
        segments = _lean(segments)
    _FUSED_CACHE[circuit] = (key, segments)
    return segments


def _lean(segments) -> list:
    """A run of ONE two-qubit (or one-qubit) permutation gate (a CNOT between two channels)
    as a ``"direct"`` segment: one gather of its row and column wires together, instead of a
    program call on 2n wires (measured, 2-core CPU, B = 8, one thread: 30 vs 127 µs at 6 qubits,
    ~170 vs ~600 µs at 8). Other segments are kept; the list itself is returned when nothing
    changes."""
    out = [("direct", item[1][0]) if kind == "plan" and len(item[1]) == 1 and _direct_permutation(item[1][0])
           else (kind, item) for kind, item in segments]
    return segments if all(a[0] == b[0] for a, b in zip(out, segments)) else out


def _direct_permutation(op) -> bool:
    return op.gate.kind == "permutation" and len(op.wires) <= 2 and op.data_key is None


def _prepare(circuit, x, state, what="run"):
    """(x (B, F) or None, ρ (B, N, N)) validated against the circuit."""
    x, _, _ = circuit.prepare(x, None) if x is not None else (None, None, False)
    if x is None and circuit.n_inputs:
        raise ValueError(f"{what}: gates read {circuit.n_inputs} input column(s) but no x was given")
    n = circuit.n_wires
    if state is None:
        rho = zero_density(n, 1, dtype=circuit.dtype, device=circuit.device)
    else:
        rho, m = as_density(state, what)
        if m != n:
            raise ValueError(f"{what}: the state has {m} qubits (shape {tuple(rho.shape)}) but the circuit has "
                             f"{n} wires")
        if rho.dtype != circuit.dtype:
            raise TypeError(f"{what}: state dtype {rho.dtype} does not match the circuit's {circuit.dtype} "
                            f"(use circuit.double() for complex128 or convert the state)")
        if rho.device != circuit.device:
            raise TypeError(f"{what}: state is on {rho.device} but the circuit is on {circuit.device}")
    if x is not None:
        if rho.shape[0] not in (1, x.shape[0]):
            raise ValueError(f"{what}: state batch {rho.shape[0]} does not match input batch {x.shape[0]}")
        if rho.shape[0] == 1 and x.shape[0] > 1:
            rho = rho.expand(x.shape[0], -1, -1)
    return x, rho


def _evolve(circuit, rho, x, weights, noise_model, generator):
    check_finite_weights(weights)
    n = circuit.n_wires
    N = 2 ** n
    for kind, item in _fused_segments(circuit, noise_model):
        if kind == "plan":
            plan, ops, doubled = item
            v = rho.reshape(rho.shape[0], -1)
            twin = _doubled(circuit, ops, doubled)
            if twin is not None:
                v = run_circuit(twin, v, x, weights)
            else:
                v = _run_plan(circuit, plan, v, x, weights, n)
            rho = v.reshape(-1, N, N)
        elif kind == "direct":
            v = _apply_op_vec(item.gate, rho.reshape(rho.shape[0], -1), circuit.angle_values(item, x, weights),
                              item.wires, n, circuit.data(item), item.adjoint)
            rho = v.reshape(-1, N, N)
        elif kind == "block":
            rho = item.apply(rho.reshape(rho.shape[0], -1), circuit, x, weights).reshape(-1, N, N)
        elif LEAN_SEGMENTS and type(item) in (_CHANNEL_STEPS or _channel_steps()) and len(item.wires) == item.channel.n_wires:
            # a channel between segments: its superoperator (cached per dtype and device unless
            # its parameters require grad) on the row and column wires, without Channel.apply's
            # re-validation of ρ and the wires on every call
            v = rho.reshape(rho.shape[0], -1)
            if not v.is_contiguous():
                v = v.contiguous()
            s = item.channel.superoperator(rho.dtype, rho.device)
            wires = tuple(item.wires) + tuple(w + n for w in item.wires)
            rho = apply_matrix_unchecked(v, s, wires, 2 * n).reshape(-1, N, N)
        else:
            rho = item.apply(rho, generator)
    return rho


_CHANNEL_STEPS: tuple = ()


def _channel_steps():
    """The instruction classes that only apply a channel (imported late: circuit imports this module's
    users)."""
    global _CHANNEL_STEPS
    from .circuit import ChannelInstruction, _ConditionFlip
    from .superop_blocks import _ChannelStep
    _CHANNEL_STEPS = (ChannelInstruction, _ConditionFlip, _ChannelStep)
    return _CHANNEL_STEPS


def run(circuit, x=None, state=None, noise_model=None, generator: Optional[torch.Generator] = None,
        weights=None) -> torch.Tensor:
    """Final density matrices ``(B, 2**n, 2**n)`` of ``circuit`` on ``state`` (default |0…0⟩⟨0…0|).

    ``state``: a ``(B, N, N)`` tensor, a DensityMatrix, or state vectors ``(B, N)``. ``noise_model``
    inserts channels after matching gates; a MixedCircuit also carries its own channels,
    measurements and resets (``generator`` seeds collapsing measurements). ``weights`` replaces
    ``circuit.weights`` for this call. Differentiable by autograd in ρ, the weights and x.
    """
    noise_model = _resolve_noise(circuit, noise_model)
    x, rho = _prepare(circuit, x, state)
    weights = circuit.weights_or(weights, "run")
    return _evolve(circuit, rho, x, weights, noise_model, generator)


def read_out(hams, noise_model) -> list:
    """The observables as the noise model's readout errors report them (unchanged without any)."""
    readout = getattr(noise_model, "readout", None)
    return hams if readout is None else [readout.noisy_observable(h) for h in hams]


def _resolve_noise(circuit, noise_model):
    if noise_model is None:
        noise_model = getattr(circuit, "noise_model", None)
    if noise_model is not None:
        from .noise import NoiseModel
        if not isinstance(noise_model, NoiseModel):
            raise TypeError(f"noise_model must be a NoiseModel, got {type(noise_model).__name__}")
        noise_model.warn_unused_wires(circuit.n_wires)
    return noise_model


# ------------------------------------------------------------------------------------------------
# expectations: Tr(ρ H) = Σ_x Σ_j H[j, j⊕x] ρ[j⊕x, j], one gather of N entries per X mask
def _index_mask(wire_mask: int, n: int) -> int:
    out = 0
    w = 0
    while wire_mask:
        if wire_mask & 1:
            out |= 1 << (n - 1 - w)
        wire_mask >>= 1
        w += 1
    return out


def _popcount_parity(v: torch.Tensor, nbits: int) -> torch.Tensor:
    p = torch.zeros_like(v)
    for b in range(nbits):
        p ^= (v >> b) & 1
    return p


_EXPVAL_CACHE: "OrderedDict" = OrderedDict()


@lasting
def _expval_tables(hams, n, dtype, device):
    key = (tuple(id(h) for h in hams), n, dtype, str(device))
    hit = _EXPVAL_CACHE.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], hams)):
        _EXPVAL_CACHE.move_to_end(key)
        return hit[1]
    N = 2 ** n
    j = torch.arange(N, dtype=torch.int64)
    xmasks = []
    for h in hams:
        for xw in h.x_groups():
            if xw not in xmasks:
                xmasks.append(xw)
    if not xmasks:
        xmasks = [0]
    table = torch.zeros(len(hams), len(xmasks), N, dtype=torch.complex128)
    for o, h in enumerate(hams):
        for xw, terms in h.x_groups().items():
            g = xmasks.index(xw)
            xi = _index_mask(xw, n)
            for c, p in terms:
                zi = _index_mask(p.z_mask, n)
                phase = (1, 1j, -1, -1j)[bin(xw & p.z_mask).count("1") % 4]
                sign = 1 - 2 * _popcount_parity((j ^ xi) & zi, n)
                table[o, g] += complex(c) * phase * sign.to(torch.float64)
    index = torch.stack([(j ^ _index_mask(xw, n)) * N + j for xw in xmasks])       # (G, N)
    out = (index.reshape(-1).to(device), table.reshape(len(hams), -1).to(dtype=dtype, device=device))
    _EXPVAL_CACHE[key] = (tuple(hams), out)
    while len(_EXPVAL_CACHE) > 64:
        _EXPVAL_CACHE.popitem(last=False)
    return out


def _observables(obs, what):
    from ..observables.hamiltonian import _as_observable_list
    return _as_observable_list(obs, what)


def _check_observables(hams, n, what):
    from ..observables.hamiltonian import _check_fits, _require_hermitian
    for i, h in enumerate(hams):
        _check_fits(h, n, what, "" if len(hams) == 1 else f" (observable {i})")
    _require_hermitian(hams, what)


def expectation(rho, obs, shots: Optional[int] = None, generator: Optional[torch.Generator] = None):
    """``Tr(ρ O)`` for a batch of density matrices: real ``(B,)``, or ``(B, n_obs)`` for a list.

    No dense O: each distinct X mask of the observables costs one gather of N entries of ρ
    (``ρ[j⊕x, j]``) against a precomputed table. With ``shots=N`` the value is a sampled estimate
    (qubit-wise commuting groups measured in their rotated basis, ``generator`` seeds it).
    """
    rho, n = as_density(rho, "expectation")
    hams, single = _observables(obs, "expectation")
    _check_observables(hams, n, "expectation")
    if shots is not None:
        out = _shot_expectation(rho, hams, n, shots, generator)
    else:
        if generator is not None:
            raise ValueError("expectation: generator is only used with shots=N")
        index, table = _expval_tables(hams, n, rho.dtype, rho.device)
        flat = rho.reshape(rho.shape[0], -1)
        out = (flat.index_select(1, index) @ table.transpose(0, 1)).real
    return out[:, 0] if single else out


def _shot_expectation(rho, hams, n, shots, generator):
    from ..observables.shots import _rotation, grouped_shot_estimate
    rho = rho.detach()

    def rotated_probabilities(basis):
        r = rho
        for w, letter in sorted(basis.items()):
            if letter != "Z":
                r = apply_operator(r, _rotation(letter, rho.dtype, rho.device), (w,))
        return torch.diagonal(r, dim1=-2, dim2=-1).real

    mean, _ = grouped_shot_estimate(hams, n, rho.shape[0], rho.device, shots, generator, rotated_probabilities)
    return mean.to(REAL_OF[rho.dtype])


def apply_hamiltonian_density(rho, H) -> torch.Tensor:
    """``H ρ`` (B, N, N): ``apply_hamiltonian`` on the columns of ρ (one pass per X mask)."""
    from ..observables import apply_hamiltonian
    rho, n = as_density(rho, "apply_hamiltonian_density")
    B, N, _ = rho.shape
    cols = rho.transpose(1, 2).reshape(B * N, N)
    return apply_hamiltonian(cols, H).reshape(B, N, N).transpose(1, 2)


# ------------------------------------------------------------------------------------------------
# measurement
def _local_index(wires, n, device):
    """For each basis index i, the index formed by the bits of ``wires`` (first = MSB)."""
    i = torch.arange(2 ** n, device=device)
    loc = torch.zeros_like(i)
    for w in wires:
        loc = (loc << 1) | ((i >> (n - 1 - w)) & 1)
    return loc


def probabilities(rho, wires=None) -> torch.Tensor:
    """Marginal probabilities of the computational basis of ``wires`` from the diagonal of ρ:
    real ``(B, 2**len(wires))``, first listed wire = most significant bit. Differentiable."""
    rho, n = as_density(rho, "probabilities")
    wires = _wires(wires, n, "probabilities")
    return marginal(torch.diagonal(rho, dim1=-2, dim2=-1).real, wires, n)


def sample(rho, shots: int, wires=None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``shots`` computational-basis samples of ``wires`` per batch element: int64 ``(B, shots)``
    of basis indices (as :func:`torchquantum_layers.measure.sample`; seeded by ``generator``)."""
    from ..measure import sample as sample_vector
    rho, n = as_density(rho, "sample")
    diag = torch.diagonal(rho.detach(), dim1=-2, dim2=-1).real.clamp_min(0)
    return sample_vector(diag.sqrt().to(rho.dtype), shots, wires, generator)


def measure(rho, wires, generator: Optional[torch.Generator] = None):
    """Selective projective measurement of ``wires``: one outcome per batch element drawn with
    ``generator``; returns ``(outcomes (B,) int64, collapsed ρ (B, N, N))`` renormalised.

    The collapse is differentiable with respect to ρ (the outcome itself is not).
    """
    rho, n = as_density(rho, "measure")
    wires = _wires(wires, n, "measure")
    outcome = sample(rho, 1, wires, generator)[:, 0]
    p = probabilities(rho, wires).gather(1, outcome[:, None])                       # (B, 1)
    loc = _local_index(wires, n, rho.device)
    mask = (loc[None, :] == outcome[:, None]).to(rho.real.dtype)                    # (B, N)
    out = rho * mask[:, :, None] * mask[:, None, :] / p[:, :, None]
    return outcome, out


def measure_channel(rho, wires) -> torch.Tensor:
    """Non-selective measurement of ``wires``: ``Σ_k P_k ρ P_k`` (coherences between outcomes vanish)."""
    rho, n = as_density(rho, "measure_channel")
    wires = _wires(wires, n, "measure_channel")
    loc = _local_index(wires, n, rho.device)
    return rho * (loc[:, None] == loc[None, :]).to(rho.real.dtype)


def reset(rho, wires, generator: Optional[torch.Generator] = None, collapse: Optional[bool] = None,
          return_outcomes: bool = False):
    """Reset ``wires`` to |0⟩.

    Non-selective (default without ``generator``): the reset channel (Kraus |0⟩⟨0|, |0⟩⟨1| per
    wire), i.e. ``|0⟩⟨0| ⊗ Tr_wires ρ``. Selective (``collapse=True``, the default when a
    ``generator`` is given): measure ``wires`` (collapsing the rest of the state on the
    outcome), then flip the wires that read 1. ``return_outcomes=True`` also returns the
    outcomes (int64 ``(B,)``; selective only).
    """
    rho, n = as_density(rho, "reset")
    wires = _wires(wires, n, "reset")
    if collapse is None:
        collapse = generator is not None
    if not collapse:
        if return_outcomes:
            raise ValueError("reset: return_outcomes=True needs a collapsing reset (collapse=True)")
        from .channels import reset_channel
        ch = reset_channel()
        for w in wires:
            rho = ch(rho, (w,))
        return rho
    outcome, rho = measure(rho, wires, generator)
    k = len(wires)
    for pos, w in enumerate(wires):
        b = ((outcome >> (k - 1 - pos)) & 1).to(rho.real.dtype)
        flip = torch.stack([1 - b, b, b, 1 - b], dim=-1).reshape(-1, 2, 2).to(rho.dtype)
        rho = apply_operator(rho, flip, (w,))
    return (outcome, rho) if return_outcomes else rho


# ------------------------------------------------------------------------------------------------
# expectation of a circuit, with differentiation methods
def expval(circuit, observables, x=None, state=None, diff_method: str = "backprop", noise_model=None,
           shots: Optional[int] = None, generator: Optional[torch.Generator] = None, weights=None):
    """``Tr(ρ_out O)`` after running ``circuit`` on a density matrix: ``(B,)`` or ``(B, n_obs)``.

    ``diff_method``: ``"backprop"`` (autograd through the simulation; any circuit, channels and
    measurements included) or ``"parameter-shift"`` (shift rules through the noisy circuit; the
    rule holds for mixed states and channels that do not depend on the angles; usable with
    ``shots``; not with collapsing measurements). ``"adjoint"`` is not available for density
    matrices: channels are not invertible, so the circuit cannot be un-computed.
    """
    if diff_method == "adjoint":
        raise ValueError("expval: diff_method='adjoint' is not supported for density matrices (channels are "
                         "not invertible, so the state cannot be un-computed); use 'backprop' or "
                         "'parameter-shift'")
    if diff_method not in DIFF_METHODS:
        raise ValueError(f"expval: diff_method must be one of {DIFF_METHODS} for density matrices, got "
                         f"{diff_method!r}")
    hams, single = _observables(observables, "expval")
    _check_observables(hams, circuit.n_wires, "expval")
    squeeze = isinstance(x, torch.Tensor) and x.dim() == 1
    noise_model = _resolve_noise(circuit, noise_model)
    hams = read_out(hams, noise_model)
    x, rho = _prepare(circuit, x, state, "expval")
    weights = circuit.weights_or(weights, "expval")
    constants = None
    collapsing = any(getattr(inst, "collapses", False) for _, inst in _instructions(circuit))
    if not collapsing:
        # channels are trace preserving, so the identity terms are c·Tr ρ₀ (a collapse renormalises
        # to Tr 1 instead: there they stay in the observables)
        hams, constants = split_constants(hams)
    if diff_method == "backprop":
        # the generator seeds the collapsing measurements, then (with shots) the samples
        out = _evolve(circuit, rho, x, weights, noise_model, generator)
        values = expectation(out, hams, shots=shots, generator=generator if shots is not None else None)
    else:
        if collapsing:
            raise ValueError("expval: diff_method='parameter-shift' needs a deterministic circuit; this one "
                             "has collapsing (selective) measurements: use 'backprop'")
        channels = [inst.channel for _, inst in _instructions(circuit) if hasattr(inst, "channel")]
        channels += [ch for ch, _, _ in (noise_model.rules if noise_model is not None else ())]
        trainable = [ch.name for ch in channels if ch.kraus.requires_grad]
        if trainable and torch.is_grad_enabled():
            raise ValueError(f"expval: diff_method='parameter-shift' differentiates gate angles only; the "
                             f"channel(s) {sorted(set(trainable))} have trainable parameters: use 'backprop'")
        if transforms_active():
            raise ValueError("expval: diff_method='parameter-shift' on density matrices has no torch.func rules; "
                             "under torch.func transforms use diff_method='backprop'")
        values = _DensityShift.apply(circuit, hams, noise_model, shots, generator, x, rho, weights)
    if constants is not None:
        values = add_constants(values, constants, rho.diagonal(dim1=-2, dim2=-1).sum(-1).real)
    values = values[..., 0] if single else values
    return values[0] if squeeze else values


def _program(circuit, noise_model):
    """Flat list of ("op", op) / ("inst", instruction) in execution order."""
    at = defaultdict(list)
    for pos, inst in _instructions(circuit):
        at[pos].append(inst)
    items = []
    for i, op in enumerate(circuit.ops):
        items.extend(("inst", inst) for inst in at.get(i, ()))
        items.append(("op", op))
        if noise_model is not None:
            from .circuit import ChannelInstruction
            items.extend(("inst", ChannelInstruction(ch, w)) for ch, w in noise_model.channels_for(op))
    items.extend(("inst", inst) for inst in at.get(len(circuit.ops), ()))
    return items


def _apply_item(circuit, item, rho, x, weights, angles=None):
    kind, obj = item
    if kind == "inst":
        return obj.apply(rho, None)
    n = circuit.n_wires
    N = 2 ** n
    if angles is None:
        angles = circuit.angle_values(obj, x, weights)
    v = _apply_op_vec(obj.gate, rho.reshape(rho.shape[0], -1), angles, obj.wires, n, circuit.data(obj),
                      obj.adjoint)
    return v.reshape(-1, N, N)


class _DensityShift(torch.autograd.Function):
    """Parameter-shift rule on density matrices: each trainable angle's shifted circuits run as
    one batch from the state just before its gate (channels included)."""

    @staticmethod
    def forward(ctx, circuit, hams, noise_model, shots, generator, x, rho, weights):
        with torch.no_grad():
            out = _evolve(circuit, rho, x, weights, noise_model, None)
            values = expectation(out, hams, shots=shots, generator=generator if shots is not None else None)
        ctx.circuit, ctx.hams, ctx.noise_model = circuit, hams, noise_model
        ctx.shots, ctx.generator = shots, generator
        ctx.save_for_backward(x, rho, weights)
        return values

    @staticmethod
    def backward(ctx, grad_values):
        from ..circuit import Input, Param
        from ..grad.parameter_shift import add_shift_gradients
        circuit, hams, noise_model = ctx.circuit, ctx.hams, ctx.noise_model
        shots, generator = ctx.shots, ctx.generator
        x, rho0, weights = ctx.saved_tensors
        need_x, need_rho, need_w = ctx.needs_input_grad[5], ctx.needs_input_grad[6], ctx.needs_input_grad[7]
        g = grad_values.to(weights.dtype if weights.numel() else grad_values.dtype)
        grad_w = torch.zeros_like(weights) if need_w else None
        grad_x = torch.zeros_like(x) if (need_x and x is not None) else None
        items = _program(circuit, noise_model)
        with torch.no_grad():
            rho = rho0
            batch = rho.shape[0]
            for i, item in enumerate(items):
                if item[0] == "op" and (grad_w is not None or grad_x is not None):
                    op = item[1]
                    angles = circuit.angle_values(op, x, weights)
                    wants = [(isinstance(a, Param) and need_w) or (isinstance(a, Input) and grad_x is not None)
                             for a in op.angles]
                    if any(wants):
                        def rest(big, m, i=i):
                            xr = x.repeat(m, 1) if x is not None else None
                            for later in items[i + 1:]:
                                big = _apply_item(circuit, later, big, xr, weights)
                            return expectation(big, hams, shots=shots, generator=generator).reshape(m, batch, -1)
                        add_shift_gradients(op, angles, wants, g, grad_w, grad_x,
                                            lambda a, item=item: _apply_item(circuit, item, rho, x, weights, a),
                                            rest)
                rho = _apply_item(circuit, item, rho, x, weights)
        grad_rho = None
        if need_rho:
            # the input state is not a gate angle: differentiate the (linear) map exactly
            with torch.enable_grad():
                r = rho0.detach().requires_grad_(True)
                out = _evolve(circuit, r, x.detach() if x is not None else None, weights.detach(), noise_model, None)
                val = expectation(out, hams)
                grad_rho, = torch.autograd.grad(val, r, grad_values.to(val.dtype))
        return None, None, None, None, None, grad_x, grad_rho, grad_w
