"""Algorithm templates: quantum phase estimation, the Hadamard and swap tests, amplitude
amplification (Grover).

Like every template they append gates to a :class:`~torchquantum_layers.Circuit` (or a new
``Circuit(n)`` when given an int) and return it; the wire arguments are required and must not
overlap. What each template leaves to measure:

* :func:`qpe`: the estimation wires hold ``k ≈ φ 2^m`` for an eigenphase ``U|ψ⟩ = e^{2πiφ}|ψ⟩``,
  read as a binary number with ``estimation_wires[0]`` the MOST significant bit (the library's
  convention, wire 0 first); ``P(k) = |Σ_j e^{2πij(φ − k/2^m)}|² / 4^m``, exactly 1 at
  ``k = φ 2^m`` when that is an integer.
* :func:`hadamard_test`: ``⟨Z_ancilla⟩ = Re⟨ψ|U|ψ⟩`` (``imaginary=True``: ``Im⟨ψ|U|ψ⟩``).
* :func:`swap_test`: ``⟨Z_ancilla⟩ = 2 P(ancilla = 0) − 1 = |⟨a|b⟩|²`` (``Tr ρ_a ρ_b`` for mixed
  registers).
* :func:`amplitude_amplification`: the marked bitstrings with total probability
  ``sin²((2k + 1) asin √(M/N))`` after ``k`` Grover iterations.

A unitary given as a Circuit is controlled gate by gate (:func:`controlled_unitary`): its
trainable angles are copied into the outer circuit once (as :meth:`Circuit.append` does) and
every copy and power of it shares them, so gradients flow through QPE and the Hadamard test; its
input angles read the outer circuit's ``x`` columns. A unitary given as a matrix (a ``(2^k, 2^k)``
tensor or array) becomes controlled ``QubitUnitary`` gates: QPE then takes its powers
``U^(2^p)`` by squaring, one gate per estimation wire, while a Circuit is repeated ``2^p`` times
(``(2^m − 1)`` copies of its gates in all; for a fixed circuit on few wires pass
``u.double().unitary()`` instead).
"""
from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Optional

import numpy as np
import torch

from . import gates as G
from .circuit import Circuit, Op, Param
from .kernels.apply import check_wires
from .templates import CircuitLike, _circuit, _pos_int, qft

__all__ = ["qpe", "hadamard_test", "swap_test", "controlled_unitary", "phase_oracle", "grover_operator",
           "amplitude_amplification", "grover_iterations"]


# ---------------------------------------------------------------------------------------------
# argument checks
def _wire_arg(circuit: Circuit, wires, name: str, what: str) -> tuple:
    if wires is None:
        raise TypeError(f"{what}: {name} must be given (an int or a sequence of ints)")
    if isinstance(wires, (str, bytes)):
        raise TypeError(f"{what}: {name} must be an int or a sequence of ints, got {wires!r}")
    return check_wires(wires, circuit.n_wires, f"{what}: {name}")


def _disjoint(what: str, **named) -> None:
    names = list(named)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = sorted(set(named[a]) & set(named[b]))
            if common:
                raise ValueError(f"{what}: {a} and {b} overlap on wire(s) {common}")


def _unitary_arg(unitary, n_target: int, what: str, name: str = "unitary", wires_name: str = "target_wires"):
    """A Circuit on ``n_target`` wires, or a complex128 ``(2^k, 2^k)`` unitary tensor."""
    if isinstance(unitary, Circuit):
        if unitary.is_noisy or hasattr(unitary, "instructions"):
            raise TypeError(f"{what}: {name} must be a unitary Circuit, got a {type(unitary).__name__} "
                            f"(channels, measurements or noise cannot be controlled)")
        if unitary.n_wires != n_target:
            raise ValueError(f"{what}: {name} is a circuit on {unitary.n_wires} wire(s) but {wires_name} "
                             f"has {n_target}")
        return unitary
    if isinstance(unitary, (torch.Tensor, np.ndarray, list, tuple)):
        m = torch.as_tensor(np.asarray(unitary) if isinstance(unitary, (list, tuple)) else unitary)
        if m.dtype == torch.bool:
            raise TypeError(f"{what}: {name} must be a numeric matrix, got {m.dtype}")
        m = m.detach().to(torch.complex128).cpu()
        d = 2 ** n_target
        if tuple(m.shape) != (d, d):
            raise ValueError(f"{what}: {name} must be a ({d}, {d}) matrix for the {n_target} wire(s) of "
                             f"{wires_name}, got shape {tuple(m.shape)}")
        try:
            G.check_unitary(m, f"{what}: {name}")
        except ValueError as err:
            raise ValueError(str(err)) from None
        return m
    raise TypeError(f"{what}: {name} must be a Circuit or a unitary matrix, got {type(unitary).__name__}")


def _flag(value, name: str, what: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{what}: {name} must be True or False, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# controlled copies of a sub-circuit
@lru_cache(maxsize=None)
def _ctrl(gate: G.Gate, n_controls: int) -> G.Gate:
    return G.controlled(gate, n_controls)


def _block_diag(u: torch.Tensor, n_controls: int) -> torch.Tensor:
    d = u.shape[-1] * 2 ** n_controls
    out = torch.eye(d, dtype=u.dtype)
    out[d - u.shape[-1]:, d - u.shape[-1]:] = u
    return out


def _data_op(circuit: Circuit, gate: G.Gate, wires: tuple, matrix: torch.Tensor) -> Op:
    """Register a QubitUnitary / DiagonalUnitary matrix with ``circuit`` and return its op
    (not appended, so that repetitions share one buffer)."""
    circuit.add(gate, wires, matrix=matrix)
    return circuit.ops.pop()


def _controlled_ops(circuit: Circuit, sub: Circuit, targets: tuple, controls: tuple, offset: int) -> list:
    """The ops of ``sub`` (wire i of sub → ``targets[i]``) controlled by ``controls`` (none: the
    plain ops), their Params moved by ``offset``."""
    c = len(controls)
    out = []
    for op in list(sub.ops):
        gate = op.gate
        wires = tuple(targets[w] for w in op.wires)
        angles = tuple(Param(a.index + offset, a.scale) if isinstance(a, Param) else a for a in op.angles)
        if gate.takes_data:
            m = getattr(sub, op.data_key).detach().to(torch.complex128).cpu()
            if gate.kind == "diagonal":
                m = m.conj() if op.adjoint else m
                if c:
                    m = torch.cat([torch.ones(2 ** (len(wires) + c) - m.shape[0], dtype=m.dtype), m])
            else:
                m = m.conj().transpose(0, 1) if op.adjoint else m
                m = _block_diag(m, c) if c else m
            out.append(_data_op(circuit, gate, controls + wires, m))
        elif not c:
            out.append(Op(gate, wires, angles, None, op.adjoint))
        elif gate is G.MULTICONTROLLEDX:
            out.append(Op(_ctrl(G.X, len(wires) - 1 + c), controls + wires))
        elif gate is G.MULTIRZ:
            # exp(-iθ/2 Z…Z): a CNOT ladder puts the parity on the last wire, RZ there, ladder back;
            # only the RZ needs the controls (the ladder cancels where they are not all 1)
            ladder = [Op(G.CNOT, (wires[i], wires[i + 1])) for i in range(len(wires) - 1)]
            out.extend(ladder)
            out.append(Op(_ctrl(G.RZ, c), controls + wires[-1:], angles, None, op.adjoint))
            out.extend(reversed(ladder))
        elif gate.n_wires is None:
            raise ValueError(f"cannot control gate {gate.name} (it acts on any number of wires)")
        else:
            out.append(Op(_ctrl(gate, c), controls + wires, angles, None, op.adjoint))
    return out


def controlled_unitary(circuit: CircuitLike, unitary, control_wires, target_wires, power: int = 1) -> Circuit:
    """Append ``U^power`` on ``target_wires``, controlled by all of ``control_wires`` (U acts where
    they are all 1).

    ``unitary``: a :class:`Circuit` on ``len(target_wires)`` wires (its wire i goes to
    ``target_wires[i]``), controlled gate by gate and repeated ``power`` times, its trainable
    angles copied in once and shared by the repetitions (differentiable); or a unitary matrix
    (``wires[0]`` of the target the most significant bit), raised to ``power`` and appended as
    one controlled ``QubitUnitary``. ``power=0`` appends nothing.
    """
    what = "controlled_unitary"
    circuit = _circuit(circuit, what)
    controls = _wire_arg(circuit, control_wires, "control_wires", what)
    targets = _wire_arg(circuit, target_wires, "target_wires", what)
    _disjoint(what, control_wires=controls, target_wires=targets)
    power = _pos_int(power, "power", what, 0)
    u = _unitary_arg(unitary, len(targets), what)
    _append_controlled(circuit, u, controls, targets, power)
    return circuit


def _append_controlled(circuit, u, controls, targets, power, offset=None):
    if power == 0:
        return
    if isinstance(u, Circuit):
        offset = circuit.import_weights(u) if offset is None else offset
        circuit.extend_ops(_controlled_ops(circuit, u, targets, controls, offset) * power)
        return
    m = torch.linalg.matrix_power(u, power)
    circuit.add(G.QUBIT_UNITARY, controls + targets, matrix=_block_diag(m, len(controls)))


# ---------------------------------------------------------------------------------------------
# phase estimation, Hadamard test, swap test
def qpe(circuit: CircuitLike, unitary, target_wires, estimation_wires) -> Circuit:
    """Quantum phase estimation of ``unitary`` on ``target_wires`` with ``m = len(estimation_wires)``
    bits.

    Appends H on every estimation wire, ``U^(2^(m-1-j))`` controlled by ``estimation_wires[j]``
    (:func:`controlled_unitary`), and the inverse QFT (:func:`~.templates.qft`, with its swaps) on
    the estimation wires. The estimation wires must start in |0…0⟩ and the target wires hold the
    state whose phases are estimated (prepare it before, or pass ``state=``). For an eigenstate
    ``U|ψ⟩ = e^{2πiφ}|ψ⟩``, 0 ≤ φ < 1, measuring the estimation wires gives the integer ``k`` whose
    bits are those wires in the order given, ``estimation_wires[0]`` the most significant, with
    probability ``|Σ_{j<2^m} e^{2πij(φ − k/2^m)}|² / 4^m``: ``k = φ 2^m`` with certainty when that
    is an integer (the textbook order, Nielsen & Chuang §5.2).
    """
    what = "qpe"
    circuit = _circuit(circuit, what)
    targets = _wire_arg(circuit, target_wires, "target_wires", what)
    est = _wire_arg(circuit, estimation_wires, "estimation_wires", what)
    _disjoint(what, target_wires=targets, estimation_wires=est)
    u = _unitary_arg(unitary, len(targets), what)
    m = len(est)
    for w in est:
        circuit.h(w)
    if isinstance(u, Circuit):
        offset = circuit.import_weights(u)
        for j, w in enumerate(est):
            _append_controlled(circuit, u, (w,), targets, 2 ** (m - 1 - j), offset)
    else:
        powers = [u]                                   # powers[p] = U^(2^p), by squaring
        for _ in range(m - 1):
            powers.append(powers[-1] @ powers[-1])
        for j, w in enumerate(est):
            circuit.add(G.QUBIT_UNITARY, (w,) + targets, matrix=_block_diag(powers[m - 1 - j], 1))
    return qft(circuit, list(est), inverse=True)


def _ancilla_arg(circuit, ancilla, what) -> tuple:
    """``(ancilla,)`` checked as one wire of ``circuit``."""
    anc = _wire_arg(circuit, ancilla, "ancilla", what)
    if len(anc) != 1:
        raise ValueError(f"{what}: ancilla must be one wire, got {anc}")
    return anc


def hadamard_test(circuit: CircuitLike, unitary, ancilla, target_wires, imaginary: bool = False) -> Circuit:
    """Hadamard test: afterwards ``⟨Z_ancilla⟩ = Re⟨ψ|U|ψ⟩``, or ``Im⟨ψ|U|ψ⟩`` with
    ``imaginary=True`` (``Re Tr ρU`` / ``Im Tr ρU`` where the target wires are entangled with others).

    Appends H(ancilla), S†(ancilla) if ``imaginary``, controlled-U (ancilla → ``target_wires``,
    :func:`controlled_unitary`), H(ancilla). The ancilla must start in |0⟩; ψ is whatever the
    target wires hold. ``unitary``: a Circuit on ``len(target_wires)`` wires (differentiable in its
    angles) or a unitary matrix. Read the result with e.g. ``tql.measure.expval_z(state, [ancilla])``.
    """
    what = "hadamard_test"
    circuit = _circuit(circuit, what)
    anc = _ancilla_arg(circuit, ancilla, what)
    targets = _wire_arg(circuit, target_wires, "target_wires", what)
    _disjoint(what, ancilla=anc, target_wires=targets)
    u = _unitary_arg(unitary, len(targets), what)
    imaginary = _flag(imaginary, "imaginary", what)
    circuit.h(anc[0])
    if imaginary:
        circuit.sdg(anc[0])
    _append_controlled(circuit, u, anc, targets, 1)
    circuit.h(anc[0])
    return circuit


def swap_test(circuit: CircuitLike, ancilla, wires_a, wires_b) -> Circuit:
    """Swap test: afterwards ``⟨Z_ancilla⟩ = 2 P(ancilla = 0) − 1 = |⟨a|b⟩|²`` for product states
    |a⟩ on ``wires_a`` and |b⟩ on ``wires_b`` (``Tr ρ_a ρ_b`` in general).

    Appends H(ancilla), ``CSWAP(ancilla, wires_a[i], wires_b[i])`` for every i, H(ancilla); the
    ancilla must start in |0⟩. ``wires_a`` and ``wires_b`` pair up in the order given.
    """
    what = "swap_test"
    circuit = _circuit(circuit, what)
    anc = _ancilla_arg(circuit, ancilla, what)
    a = _wire_arg(circuit, wires_a, "wires_a", what)
    b = _wire_arg(circuit, wires_b, "wires_b", what)
    if len(a) != len(b):
        raise ValueError(f"{what}: wires_b has {len(b)} wire(s) but wires_a has {len(a)}; they must pair up")
    _disjoint(what, ancilla=anc, wires_a=a, wires_b=b)
    circuit.h(anc[0])
    for wa, wb in zip(a, b):
        circuit.cswap(anc[0], wa, wb)
    circuit.h(anc[0])
    return circuit


# ---------------------------------------------------------------------------------------------
# amplitude amplification
def _marked(marked, n: int, what: str) -> list:
    """Sorted basis indices (``wires[0]`` the most significant bit) of the marked bitstrings."""
    if isinstance(marked, (str, numbers.Integral)) and not isinstance(marked, bool):
        marked = [marked]
    if isinstance(marked, (torch.Tensor, np.ndarray)):
        marked = marked.tolist() if marked.ndim else [marked.item()]
    if not isinstance(marked, (list, tuple, set, frozenset, range)):
        raise TypeError(f"{what}: marked bitstrings must be strings like '0110' or ints, got "
                        f"{type(marked).__name__}")
    out = []
    for s in marked:
        if isinstance(s, str):
            if len(s) != n or any(ch not in "01" for ch in s):
                raise ValueError(f"{what}: marked bitstring {s!r} must have {n} characters 0/1 (one per wire)")
            out.append(int(s, 2))
        elif isinstance(s, numbers.Integral) and not isinstance(s, bool):
            if not 0 <= int(s) < 2 ** n:
                raise ValueError(f"{what}: marked index {int(s)} is outside [0, {2 ** n}) for {n} wires")
            out.append(int(s))
        else:
            raise TypeError(f"{what}: marked bitstring {s!r} must be a string of 0/1 or an int")
    if not out:
        raise ValueError(f"{what}: no marked bitstrings given")
    if len(set(out)) != len(out):
        dup = sorted({x for x in out if out.count(x) > 1})
        raise ValueError(f"{what}: marked bitstrings repeat: {[format(x, f'0{n}b') for x in dup]}")
    return sorted(out)


def _mcz(n: int) -> G.Gate:
    """Z on the last of n wires controlled by the others: −1 on |1…1⟩ only."""
    return {1: G.Z, 2: G.CZ, 3: G.CCZ}.get(n) or _ctrl(G.Z, n - 1)


def _flip(circuit: Circuit, wires: tuple, mask: int) -> None:
    n = len(wires)
    for i, w in enumerate(wires):
        if mask >> (n - 1 - i) & 1:
            circuit.x(w)


def phase_oracle(circuit: CircuitLike, marked, wires) -> Circuit:
    """Append the phase oracle ``I − 2 Σ_x |x⟩⟨x|`` over the ``marked`` bitstrings on ``wires``.

    ``marked``: strings of 0/1 (character i is ``wires[i]``) or ints (``wires[0]`` the most
    significant bit), or one of them. Each is a multi-controlled Z between X gates on its 0 bits
    (the X gates between consecutive strings merge); no dense diagonal is stored.
    """
    what = "phase_oracle"
    circuit = _circuit(circuit, what)
    wires = _wire_arg(circuit, wires, "wires", what)
    _phase_oracle(circuit, _marked(marked, len(wires), what), wires)
    return circuit


def _phase_oracle(circuit, marked, wires):
    n = len(wires)
    full, flipped = 2 ** n - 1, 0
    for x in marked:
        need = ~x & full
        _flip(circuit, wires, flipped ^ need)
        circuit.add(_mcz(n), wires)
        flipped = need
    _flip(circuit, wires, flipped)


def _oracle_arg(oracle, n: int, what: str):
    if isinstance(oracle, Circuit):
        return _unitary_arg(oracle, n, what, "oracle", "wires")
    return _marked(oracle, n, what)


def _diffusion(circuit, wires, prep, prep_inv, offset):
    """2 A|0⟩⟨0|A† − I on ``wires`` (A = H on every wire when ``prep`` is None)."""
    if prep is None:
        for w in wires:
            circuit.h(w)
    else:
        circuit.extend_ops(_controlled_ops(circuit, prep_inv, wires, (), offset))
    _phase_oracle(circuit, [0], wires)                 # I − 2|0⟩⟨0|
    if prep is None:
        for w in wires:
            circuit.h(w)
    else:
        circuit.extend_ops(_controlled_ops(circuit, prep, wires, (), offset))
    circuit.rz(wires[0], 2 * math.pi)                  # RZ(2π) = −I: the global phase −1


def _grover(circuit, oracle, wires, prep, offsets):
    if isinstance(oracle, Circuit):
        circuit.extend_ops(_controlled_ops(circuit, oracle, wires, (), offsets[0]))
    else:
        _phase_oracle(circuit, oracle, wires)
    _diffusion(circuit, wires, prep, None if prep is None else prep.inverse(), offsets[1])


def _prep_arg(state_prep, n: int, what: str):
    if state_prep is None:
        return None
    if not isinstance(state_prep, Circuit):
        raise TypeError(f"{what}: state_prep must be a Circuit or None, got {type(state_prep).__name__}")
    return _unitary_arg(state_prep, n, what, "state_prep", "wires")


def grover_operator(circuit: CircuitLike, oracle, wires, state_prep: Optional[Circuit] = None) -> Circuit:
    """Append one Grover iteration ``G = (2|s⟩⟨s| − I) O`` on ``wires``, exactly (global phase
    included, so it can be controlled, e.g. by :func:`qpe` for quantum counting).

    ``oracle``: the marked bitstrings (see :func:`phase_oracle`; ``O = I − 2 Σ |x⟩⟨x|``) or a
    phase-oracle Circuit on ``len(wires)`` wires. ``|s⟩`` is the uniform superposition, or
    ``A|0…0⟩`` for ``state_prep`` A, a Circuit on ``len(wires)`` wires (its gates and their
    inverse are appended; their angles are copied in once and shared). The reflection is
    ``A (X⊗n MCZ X⊗n) A†`` with ``RZ(2π) = −I`` on ``wires[0]`` for the sign.
    """
    what = "grover_operator"
    circuit, wires, oracle, prep = _grover_args(circuit, oracle, wires, state_prep, what)
    offsets = tuple(circuit.import_weights(sub) if isinstance(sub, Circuit) else None for sub in (oracle, prep))
    _grover(circuit, oracle, wires, prep, offsets)
    return circuit


def _grover_args(circuit, oracle, wires, state_prep, what):
    """``(circuit, wires, oracle, state_prep)`` of grover_operator / amplitude_amplification, checked."""
    circuit = _circuit(circuit, what)
    wires = _wire_arg(circuit, wires, "wires", what)
    oracle = _oracle_arg(oracle, len(wires), what)
    prep = _prep_arg(state_prep, len(wires), what)
    if oracle is circuit or prep is circuit:
        raise ValueError(f"{what}: oracle and state_prep must be other circuits than the one appended to")
    return circuit, wires, oracle, prep


def grover_iterations(n_marked: int, n_states: int) -> int:
    """The number of Grover iterations that maximises the success probability
    ``sin²((2k + 1) θ)``, ``θ = asin √(M/N)``: ``floor(π / (4θ))``."""
    what = "grover_iterations"
    n_marked = _pos_int(n_marked, "n_marked", what)
    n_states = _pos_int(n_states, "n_states", what)
    if n_marked > n_states:
        raise ValueError(f"{what}: n_marked={n_marked} exceeds n_states={n_states}")
    return math.floor(math.pi / (4 * math.asin(math.sqrt(n_marked / n_states))))


def amplitude_amplification(circuit: CircuitLike, oracle, wires, iterations: Optional[int] = None,
                            state_prep: Optional[Circuit] = None) -> Circuit:
    """Grover search / amplitude amplification on ``wires``: prepare |s⟩ (H on every wire, or
    ``state_prep``), then ``iterations`` times :func:`grover_operator`.

    The wires must start in |0…0⟩. With ``M`` marked bitstrings of ``N = 2^n`` and uniform |s⟩
    the marked strings then have total probability ``sin²((2k + 1) asin √(M/N))`` after ``k``
    iterations; ``iterations=None`` takes :func:`grover_iterations` (M, N), which needs the
    marked bitstrings and the uniform |s⟩ (give ``iterations`` for an oracle circuit or a
    ``state_prep``). The ops of one iteration are built once and repeated.
    """
    what = "amplitude_amplification"
    circuit, wires, oracle, prep = _grover_args(circuit, oracle, wires, state_prep, what)
    if iterations is None:
        if isinstance(oracle, Circuit) or prep is not None:
            raise ValueError(f"{what}: iterations=None needs marked bitstrings and the uniform start state; "
                             f"give iterations for an oracle circuit or a state_prep")
        iterations = grover_iterations(len(oracle), 2 ** len(wires))
    iterations = _pos_int(iterations, "iterations", what, 0)
    offsets = tuple(circuit.import_weights(sub) if isinstance(sub, Circuit) else None for sub in (oracle, prep))
    if prep is None:
        for w in wires:
            circuit.h(w)
    else:
        circuit.extend_ops(_controlled_ops(circuit, prep, wires, (), offsets[1]))
    if iterations:
        start = len(circuit.ops)
        _grover(circuit, oracle, wires, prep, offsets)
        circuit.extend_ops(circuit.ops[start:] * (iterations - 1))
    return circuit
