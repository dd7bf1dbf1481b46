"""Chemistry ansätze: Hartree–Fock state, UCCSD (Givens excitations), k-UpCCGSD, hardware-efficient.

All follow the Jordan–Wigner conventions of :mod:`torchquantum_layers.chem`: qubit j = spin
orbital j, interleaved (α0, β0, α1, β1, …), occupied = |1⟩, so even qubits carry S_z = +½ and odd
qubits −½. Excitations are :data:`SINGLEEXCITATION` / :data:`DOUBLEEXCITATION` Givens rotations
(PennyLane convention); they conserve the particle number and, for the spin-conserving lists of
:func:`excitations`, S_z. The UCCSD circuit is PennyLane's ``AllSinglesDoubles``: HF state, all
doubles, then all singles, every angle trainable and initialised to 0 (the circuit starts at HF).

Each builder takes a :class:`~torchquantum_layers.Circuit` (gates are appended, the circuit is
returned) or a number of qubits (a new circuit; ``dtype`` picks complex64 / complex128).
"""
from __future__ import annotations

import itertools
import numbers
from typing import Optional, Sequence, Union

from .. import templates as T
from ..circuit import Circuit

__all__ = ["hf_state", "hartree_fock", "excitations", "uccsd", "k_upccgsd", "hardware_efficient",
           "generalized_excitations"]

CircuitLike = Union[Circuit, int]


def _int(v, name, what, minimum=0) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{what}: {name} must be an int, got {v!r}")
    v = int(v)
    if v < minimum:
        raise ValueError(f"{what}: {name} must be >= {minimum}, got {v}")
    return v


def _circuit(circuit: CircuitLike, what: str, dtype=None) -> Circuit:
    if isinstance(circuit, Circuit):
        if dtype is not None:
            raise ValueError(f"{what}: dtype= applies only when a number of qubits is given")
        return circuit
    n = _int(circuit, "the number of qubits", what, 1)
    return Circuit(n, dtype=dtype)


def hf_state(n_electrons: int, n_qubits: int) -> tuple:
    """Hartree–Fock bits (qubit 0 first) under Jordan–Wigner: the first ``n_electrons`` qubits are 1."""
    n_electrons = _int(n_electrons, "n_electrons", "hf_state")
    n_qubits = _int(n_qubits, "n_qubits", "hf_state", 1)
    if n_electrons > n_qubits:
        raise ValueError(f"hf_state: {n_electrons} electrons do not fit in {n_qubits} spin orbitals")
    return tuple([1] * n_electrons + [0] * (n_qubits - n_electrons))


def _bits(bits, n, what) -> tuple:
    if isinstance(bits, str):
        bits = [int(ch) for ch in bits if ch in "01"]
    bits = tuple(int(b) for b in bits)
    if len(bits) != n or any(b not in (0, 1) for b in bits):
        raise ValueError(f"{what}: the reference state must be {n} bits 0/1, got {bits}")
    return bits


def hartree_fock(circuit: CircuitLike, n_electrons: Optional[int] = None, state: Optional[Sequence[int]] = None,
                 dtype=None) -> Circuit:
    """Append X gates preparing the HF basis state (``state`` bits, or the first ``n_electrons`` qubits)."""
    what = "hartree_fock"
    c = _circuit(circuit, what, dtype)
    if (state is None) == (n_electrons is None):
        raise ValueError(f"{what}: give n_electrons or state (the bits), "
                         f"{'neither was given' if state is None else 'not both'}")
    bits = hf_state(n_electrons, c.n_wires) if state is None else _bits(state, c.n_wires, what)
    for w, b in enumerate(bits):
        if b:
            c.x(w)
    return c


def _sz(i: int) -> float:
    return 0.5 if i % 2 == 0 else -0.5


def excitations(n_electrons: int, n_qubits: int, delta_sz: float = 0, occupied: Optional[Sequence[int]] = None):
    """``(singles, doubles)`` from the HF reference, as PennyLane's ``qml.qchem.excitations``.

    Singles ``[r, p]`` (r occupied, p virtual) and doubles ``[s, r, q, p]`` (s < r occupied,
    q < p virtual) whose change of S_z is ``delta_sz`` (0: spin-conserving). ``occupied`` overrides
    the reference (default: qubits 0 … n_electrons−1). LiH in 12 qubits with 4 electrons: 16
    singles and 76 doubles.
    """
    what = "excitations"
    n_qubits = _int(n_qubits, "n_qubits", what, 1)
    if occupied is None:
        n_electrons = _int(n_electrons, "n_electrons", what, 0)
        if n_electrons > n_qubits:
            raise ValueError(f"{what}: {n_electrons} electrons do not fit in {n_qubits} spin orbitals")
        occ = list(range(n_electrons))
    else:
        occ = sorted(int(i) for i in occupied)
        if len(set(occ)) != len(occ) or (occ and (occ[0] < 0 or occ[-1] >= n_qubits)):
            raise ValueError(f"{what}: occupied orbitals {occupied} must be distinct and in 0..{n_qubits - 1}")
    virt = [i for i in range(n_qubits) if i not in set(occ)]
    singles = [[r, p] for r in occ for p in virt if _sz(p) - _sz(r) == delta_sz]
    doubles = [[s, r, q, p] for s, r in itertools.combinations(occ, 2) for q, p in itertools.combinations(virt, 2)
               if _sz(p) + _sz(q) - _sz(r) - _sz(s) == delta_sz]
    return singles, doubles


def _check_excitation(ex, k, n, what):
    if any(isinstance(w, bool) or not isinstance(w, numbers.Integral) for w in ex):
        raise ValueError(f"{what}: excitation {list(ex)} must be {k} distinct int wires in 0..{n - 1}")
    wires = tuple(int(w) for w in ex)
    if len(wires) != k or len(set(wires)) != k or min(wires) < 0 or max(wires) >= n:
        raise ValueError(f"{what}: excitation {list(ex)} must be {k} distinct wires in 0..{n - 1}")
    return wires


def uccsd(circuit: CircuitLike, n_electrons: int, singles=None, doubles=None, hf: bool = True,
          init: Union[float, str] = "zeros", reference: Optional[Sequence[int]] = None, dtype=None) -> Circuit:
    """UCCSD-type ansatz from Givens excitations (PennyLane's ``AllSinglesDoubles``).

    Appends the HF state (X gates, unless ``hf=False``), one trainable ``DOUBLEEXCITATION`` per
    double and one ``SINGLEEXCITATION`` per single (default: :func:`excitations` of
    ``n_electrons``), in that order; angles start at ``init`` (0: the circuit prepares HF).
    ``reference`` gives other HF bits (open shells). Returns the circuit.
    """
    what = "uccsd"
    c = _circuit(circuit, what, dtype)
    n = c.n_wires
    n_electrons = _int(n_electrons, "n_electrons", what, 0)
    bits = _reference_bits(n_electrons, n, reference, what)
    if singles is None or doubles is None:
        occ = [i for i, b in enumerate(bits) if b]
        s0, d0 = excitations(n_electrons, n, occupied=None if reference is None else occ)
        singles = s0 if singles is None else singles
        doubles = d0 if doubles is None else doubles
    if hf:
        hartree_fock(c, state=bits)
    for d in doubles:
        c.add("DOUBLEEXCITATION", _check_excitation(d, 4, n, what), trainable=True, init=init)
    for s in singles:
        c.add("SINGLEEXCITATION", _check_excitation(s, 2, n, what), trainable=True, init=init)
    return c


def generalized_excitations(n_qubits: int):
    """``(singles, pair_doubles)`` of UpCCGSD: every spin-conserving ``[p, q]`` (p < q), and every
    spatial pair ``[2p, 2p+1, 2q, 2q+1]`` (p < q)."""
    n_qubits = _int(n_qubits, "n_qubits", "generalized_excitations", 2)
    if n_qubits % 2:
        raise ValueError(f"generalized_excitations: spin orbitals come in pairs, got {n_qubits} qubits")
    singles = [[p, q] for p in range(n_qubits) for q in range(p + 1, n_qubits) if (q - p) % 2 == 0]
    m = n_qubits // 2
    doubles = [[2 * p, 2 * p + 1, 2 * q, 2 * q + 1] for p in range(m) for q in range(p + 1, m)]
    return singles, doubles


def _reference_bits(n_electrons, n, reference, what) -> tuple:
    """The reference determinant: ``reference`` bits (checked to hold ``n_electrons``) or the
    first ``n_electrons`` qubits."""
    if n_electrons > n:
        raise ValueError(f"{what}: {n_electrons} electrons do not fit in {n} qubits")
    bits = hf_state(n_electrons, n) if reference is None else _bits(reference, n, what)
    if sum(bits) != n_electrons:
        raise ValueError(f"{what}: the reference {bits} holds {sum(bits)} electrons, not {n_electrons}")
    return bits


def k_upccgsd(circuit: CircuitLike, n_electrons: int, k: int = 1, hf: bool = True,
              init: Union[float, str] = "zeros", reference: Optional[Sequence[int]] = None,
              dtype=None) -> Circuit:
    """k-UpCCGSD (Lee et al. 2019) with Givens gates: ``k`` layers of paired generalized doubles
    then generalized spin-conserving singles, after the HF state. ``init="small"`` breaks the
    symmetry between layers when ``k > 1``. ``reference`` gives other HF bits (open shells, e.g.
    ``info.hf_state`` of a triplet: α0 β0 α1 α2 is ``11101000``, not the first four qubits);
    the gates conserve N and S_z, so the circuit stays in the reference's (N_α, N_β) sector."""
    what = "k_upccgsd"
    c = _circuit(circuit, what, dtype)
    k = _int(k, "k", what, 1)
    n_electrons = _int(n_electrons, "n_electrons", what, 0)
    bits = _reference_bits(n_electrons, c.n_wires, reference, what)
    singles, doubles = generalized_excitations(c.n_wires)
    if hf:
        hartree_fock(c, state=bits)
    for _ in range(k):
        for d in doubles:
            c.add("DOUBLEEXCITATION", tuple(d), trainable=True, init=init)
        for s in singles:
            c.add("SINGLEEXCITATION", tuple(s), trainable=True, init=init)
    return c


def hardware_efficient(circuit: CircuitLike, n_layers: int, n_electrons: Optional[int] = None,
                       reference: Optional[Sequence[int]] = None, init: Union[float, str] = "small",
                       dtype=None, **kwargs) -> Circuit:
    """Real hardware-efficient ansatz that starts at the Hartree–Fock state.

    Appends :func:`torchquantum_layers.templates.hardware_efficient` (``kind="real"``: RY layers and
    CNOT chains by default, so the amplitudes stay real like the molecular ground state; other
    ``kwargs`` pass through). With ``n_electrons`` or ``reference`` it first puts X gates on the
    basis state that the template's entanglers (all angles 0: a permutation) carry to the HF state,
    so the circuit prepares HF exactly at zero angles. ``init="small"`` (N(0, 0.01²)) starts just off
    that point (HF is a stationary point). The ansatz does not conserve the particle number.
    """
    import torch
    what = "hardware_efficient"
    c = _circuit(circuit, what, dtype)
    kwargs.setdefault("kind", "real")
    body = T.hardware_efficient(Circuit(c.n_wires, dtype=torch.float64), n_layers, init=init, **kwargs)
    if n_electrons is not None or reference is not None:
        if n_electrons is not None and reference is not None:
            raise ValueError(f"{what}: give n_electrons or reference, not both")
        bits = hf_state(n_electrons, c.n_wires) if reference is None else _bits(reference, c.n_wires, what)
        if c.n_wires > 20:
            raise ValueError(f"{what}: finding the input basis state needs a state vector; {c.n_wires} qubits is too many")
        # the input |b> with U(0)|b> = |HF>: run U(0)^dagger on |HF>
        zero = body.copy()
        with torch.no_grad():
            zero.weights.zero_()
            index = int("".join(map(str, bits)), 2)
            hf = torch.zeros(1, 2 ** c.n_wires, dtype=zero.dtype)
            hf[0, index] = 1
            pre = zero.inverse()(state=hf)[0]
        k = int(pre.abs().argmax())
        if abs(float(pre.abs()[k]) - 1) > 1e-9:
            raise ValueError(f"{what}: with zero angles the template is not a permutation of basis states, so no "
                             f"input basis state maps to HF; prepend hartree_fock() yourself")
        hartree_fock(c, state=[int(b) for b in format(k, f"0{c.n_wires}b")])
    c.append(body)
    return c
