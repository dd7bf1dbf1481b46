"""Independent NumPy reference for the tests: dense matrices written out by hand.

Nothing here imports ``torchquantum_layers``; every matrix is built from its textbook
definition (OpenQASM 3 / Qiskit conventions, PennyLane's for ROT and the excitations) and
every operator on n wires from Kronecker products, so that a test comparing the library to
this module compares two independent implementations.

Conventions: wire 0 is the most significant bit of a basis index; the first wire of a
multi-wire gate is the most significant bit of its matrix index; controls come first and the
controlled block sits bottom-right.
"""
from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------
# single-qubit constants
I2 = np.eye(2, dtype=np.complex128)
X = np.array([[0, 1], [1, 0]], dtype=np.complex128)
Y = np.array([[0, -1j], [1j, 0]], dtype=np.complex128)
Z = np.array([[1, 0], [0, -1]], dtype=np.complex128)
H = np.array([[1, 1], [1, -1]], dtype=np.complex128) / np.sqrt(2)
PAULI = {"I": I2, "X": X, "Y": Y, "Z": Z}


def kron(*ms) -> np.ndarray:
    out = np.eye(1, dtype=np.complex128)
    for m in ms:
        out = np.kron(out, m)
    return out


def pauli_matrix(label: str) -> np.ndarray:
    """Dense matrix of a Pauli string such as ``"XIZ"`` (its first letter acts on wire 0)."""
    return kron(*(PAULI[ch] for ch in str(label).upper()))


def pauli_rotation(theta: float, label: str) -> np.ndarray:
    """exp(-i θ/2 P) = cos(θ/2) I - i sin(θ/2) P, valid because P² = I."""
    p = pauli_matrix(label)
    return np.cos(theta / 2) * np.eye(len(p)) - 1j * np.sin(theta / 2) * p


def controlled_matrix(u: np.ndarray, n_controls: int = 1) -> np.ndarray:
    """Identity everywhere except the bottom-right block (all controls = 1), which is ``u``."""
    u = np.asarray(u, dtype=np.complex128)
    d = (2 ** n_controls) * len(u)
    m = np.eye(d, dtype=np.complex128)
    m[d - len(u):, d - len(u):] = u
    return m


# ---------------------------------------------------------------------------------------------
# parametrised single-qubit gates
def rx(t):
    return np.array([[np.cos(t / 2), -1j * np.sin(t / 2)],
                     [-1j * np.sin(t / 2), np.cos(t / 2)]], dtype=np.complex128)


def ry(t):
    return np.array([[np.cos(t / 2), -np.sin(t / 2)],
                     [np.sin(t / 2), np.cos(t / 2)]], dtype=np.complex128)


def rz(t):
    return np.array([[np.exp(-0.5j * t), 0], [0, np.exp(0.5j * t)]], dtype=np.complex128)


def phase(lam):
    return np.array([[1, 0], [0, np.exp(1j * lam)]], dtype=np.complex128)


def u3(theta, phi, lam):
    c, s = np.cos(theta / 2), np.sin(theta / 2)
    return np.array([[c, -np.exp(1j * lam) * s],
                     [np.exp(1j * phi) * s, np.exp(1j * (phi + lam)) * c]], dtype=np.complex128)


def u2(phi, lam):
    return u3(np.pi / 2, phi, lam)


def rot(phi, theta, omega):
    """PennyLane's Rot(φ, θ, ω) = RZ(ω) RY(θ) RZ(φ)."""
    return rz(omega) @ ry(theta) @ rz(phi)


def givens(theta, d, a, b):
    """Identity of size d with the rotation [[c, -s], [s, c]] on basis states a, b."""
    m = np.eye(d, dtype=np.complex128)
    c, s = np.cos(theta / 2), np.sin(theta / 2)
    m[a, a], m[a, b], m[b, a], m[b, b] = c, -s, s, c
    return m


SWAP = np.array([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]], dtype=np.complex128)
ISWAP = np.array([[1, 0, 0, 0], [0, 0, 1j, 0], [0, 1j, 0, 0], [0, 0, 0, 1]], dtype=np.complex128)

# name -> (number of wires or None for any, number of parameters)
SIGNATURES = {
    "I": (1, 0), "X": (1, 0), "Y": (1, 0), "Z": (1, 0), "H": (1, 0), "S": (1, 0), "SDG": (1, 0),
    "T": (1, 0), "TDG": (1, 0), "SX": (1, 0), "SXDG": (1, 0), "P": (1, 1), "RX": (1, 1),
    "RY": (1, 1), "RZ": (1, 1), "ROT": (1, 3), "U2": (1, 2), "U3": (1, 3),
    "CNOT": (2, 0), "CY": (2, 0), "CZ": (2, 0), "CH": (2, 0), "SWAP": (2, 0), "ISWAP": (2, 0),
    "CP": (2, 1), "CRX": (2, 1), "CRY": (2, 1), "CRZ": (2, 1), "CROT": (2, 3), "CU3": (2, 3),
    "RXX": (2, 1), "RYY": (2, 1), "RZZ": (2, 1), "RZX": (2, 1), "SINGLEEXCITATION": (2, 1),
    "TOFFOLI": (3, 0), "CCZ": (3, 0), "CSWAP": (3, 0), "MULTIRZ": (None, 1),
    "MULTICONTROLLEDX": (None, 0), "DOUBLEEXCITATION": (4, 1),
}


def gate_matrix(name: str, *params, n_wires=None) -> np.ndarray:
    """The dense matrix of a gate of the table, from its textbook definition."""
    name = name.upper()
    if name not in SIGNATURES:
        raise KeyError(f"oracle has no gate {name!r}")
    k, n_params = SIGNATURES[name]
    if len(params) != n_params:
        raise TypeError(f"{name} takes {n_params} parameters, got {len(params)}")
    p = [float(v) for v in params]
    fixed = {
        "I": I2, "X": X, "Y": Y, "Z": Z, "H": H,
        "S": np.diag([1, 1j]), "SDG": np.diag([1, -1j]),
        "T": np.diag([1, np.exp(1j * np.pi / 4)]), "TDG": np.diag([1, np.exp(-1j * np.pi / 4)]),
        "SX": np.array([[1 + 1j, 1 - 1j], [1 - 1j, 1 + 1j]]) / 2,
        "SXDG": np.array([[1 - 1j, 1 + 1j], [1 + 1j, 1 - 1j]]) / 2,
        "SWAP": SWAP, "ISWAP": ISWAP,
    }
    if name in fixed:
        return np.asarray(fixed[name], dtype=np.complex128)
    if name == "P":
        return phase(*p)
    if name == "RX":
        return rx(*p)
    if name == "RY":
        return ry(*p)
    if name == "RZ":
        return rz(*p)
    if name == "ROT":
        return rot(*p)
    if name == "U2":
        return u2(*p)
    if name == "U3":
        return u3(*p)
    if name == "CNOT":
        return controlled_matrix(X)
    if name == "CY":
        return controlled_matrix(Y)
    if name == "CZ":
        return controlled_matrix(Z)
    if name == "CH":
        return controlled_matrix(H)
    if name == "CP":
        return controlled_matrix(phase(*p))
    if name == "CRX":
        return controlled_matrix(rx(*p))
    if name == "CRY":
        return controlled_matrix(ry(*p))
    if name == "CRZ":
        return controlled_matrix(rz(*p))
    if name == "CROT":
        return controlled_matrix(rot(*p))
    if name == "CU3":
        return controlled_matrix(u3(*p))
    if name == "RXX":
        return pauli_rotation(p[0], "XX")
    if name == "RYY":
        return pauli_rotation(p[0], "YY")
    if name == "RZZ":
        return pauli_rotation(p[0], "ZZ")
    if name == "RZX":
        return pauli_rotation(p[0], "ZX")
    if name == "SINGLEEXCITATION":
        return givens(p[0], 4, 0b01, 0b10)
    if name == "DOUBLEEXCITATION":
        return givens(p[0], 16, 0b0011, 0b1100)
    if name == "TOFFOLI":
        return controlled_matrix(X, 2)
    if name == "CCZ":
        return controlled_matrix(Z, 2)
    if name == "CSWAP":
        return controlled_matrix(SWAP, 1)
    if name == "MULTIRZ":
        if n_wires is None:
            raise TypeError("MULTIRZ needs n_wires")
        return pauli_rotation(p[0], "Z" * n_wires)
    if name == "MULTICONTROLLEDX":
        if n_wires is None or n_wires < 2:
            raise TypeError("MULTICONTROLLEDX needs n_wires >= 2")
        return controlled_matrix(X, n_wires - 1)
    raise AssertionError(name)  # pragma: no cover


def gate_n_wires(name: str, n_wires=None) -> int:
    k = SIGNATURES[name.upper()][0]
    return n_wires if k is None else k


# ---------------------------------------------------------------------------------------------
# operators on n wires
def _order_index(wires, n) -> np.ndarray:
    """For each basis index i (standard order), its index when the wires are listed as
    ``wires`` followed by the remaining wires in increasing order."""
    order = list(wires) + [w for w in range(n) if w not in wires]
    idx = np.zeros(2 ** n, dtype=np.int64)
    for i in range(2 ** n):
        bits = [(i >> (n - 1 - w)) & 1 for w in range(n)]  # bit of wire w
        j = 0
        for w in order:
            j = (j << 1) | bits[w]
        idx[i] = j
    return idx


def full_operator(u: np.ndarray, wires, n: int) -> np.ndarray:
    """The 2^n × 2^n operator of ``u`` (2^k × 2^k, or batched (B, d, d)) acting on ``wires``.

    Built as u ⊗ I on the order (wires, rest...), then re-indexed bit by bit into the
    standard order.
    """
    u = np.asarray(u, dtype=np.complex128)
    wires = list(wires)
    k = len(wires)
    assert u.shape[-2:] == (2 ** k, 2 ** k), (u.shape, wires)
    assert len(set(wires)) == k and all(0 <= w < n for w in wires)
    idx = _order_index(wires, n)
    eye = np.eye(2 ** (n - k), dtype=np.complex128)
    if u.ndim == 2:
        big = np.kron(u, eye)
        return big[np.ix_(idx, idx)]
    return np.stack([np.kron(ub, eye)[np.ix_(idx, idx)] for ub in u])


def apply_dense(state_np: np.ndarray, u: np.ndarray, wires, n: int) -> np.ndarray:
    """Apply ``u`` on ``wires`` to a (2^n,) or (B, 2^n) state; a batched u (B, d, d) acts per
    sample (a batch of 1, of the state or of u, is broadcast)."""
    state = np.asarray(state_np, dtype=np.complex128)
    full = full_operator(u, wires, n)
    if state.ndim == 1:
        if full.ndim == 2:
            return full @ state
        return np.einsum("bij,j->bi", full, state)
    if full.ndim == 2:
        return state @ full.T
    # per-sample operators: batch sizes must agree or one of them be 1 (broadcast)
    return (full @ state[:, :, None])[:, :, 0]


def apply_diagonal_dense(state_np, diag, wires, n):
    diag = np.asarray(diag, dtype=np.complex128)
    if diag.ndim == 1:
        return apply_dense(state_np, np.diag(diag), wires, n)
    return apply_dense(state_np, np.stack([np.diag(d) for d in diag]), wires, n)


def permutation_matrix(perm) -> np.ndarray:
    """M with new = M old and new[i] = old[perm[i]], i.e. M[i, perm[i]] = 1."""
    d = len(perm)
    m = np.zeros((d, d), dtype=np.complex128)
    for i, p in enumerate(perm):
        m[i, p] = 1
    return m


def controlled_on_wires(u, controls, targets, n):
    """Full operator of ``u`` on ``targets`` controlled by ``controls`` (all must be 1)."""
    u = np.asarray(u, dtype=np.complex128)
    if u.ndim == 2:
        return full_operator(controlled_matrix(u, len(controls)), list(controls) + list(targets), n)
    return np.stack([full_operator(controlled_matrix(ub, len(controls)), list(controls) + list(targets), n)
                     for ub in u])


def _op_matrices(name, params, n_wires):
    """Matrix (d, d) or per-sample (B, d, d) of a gate whose params may be arrays of shape (B,)."""
    if isinstance(name, np.ndarray):
        return name
    params = [np.asarray(p, dtype=np.float64) for p in params]
    shapes = [p.shape for p in params if p.ndim > 0]
    if not shapes:
        return gate_matrix(name, *[float(p) for p in params], n_wires=n_wires)
    B = shapes[0][0]
    full = [np.broadcast_to(p, (B,)) for p in params]
    return np.stack([gate_matrix(name, *[float(p[b]) for p in full], n_wires=n_wires) for b in range(B)])


def run_ops(ops, n: int, batch_states: np.ndarray) -> np.ndarray:
    """Dense simulation of a list of ``(name, wires, params)``; ``name`` may also be an explicit
    matrix; a parameter may be a float or an array of per-sample values (B,)."""
    state = np.asarray(batch_states, dtype=np.complex128)
    if state.ndim == 1:
        state = state[None, :]
    for name, wires, params in ops:
        wires = [wires] if isinstance(wires, int) else list(wires)
        u = _op_matrices(name, tuple(params), len(wires))
        state = apply_dense(state, u, wires, n)
    return state


# ---------------------------------------------------------------------------------------------
# random helpers
def random_unitary(d: int, rng: np.random.Generator) -> np.ndarray:
    """Haar-random unitary via QR of a complex Ginibre matrix (phases of R fixed)."""
    z = (rng.standard_normal((d, d)) + 1j * rng.standard_normal((d, d))) / np.sqrt(2)
    q, r = np.linalg.qr(z)
    ph = np.diag(r) / np.abs(np.diag(r))
    return q * ph[None, :]


def random_unitaries(batch: int, d: int, rng: np.random.Generator) -> np.ndarray:
    return np.stack([random_unitary(d, rng) for _ in range(batch)])


def random_state(n: int, rng: np.random.Generator, batch=None) -> np.ndarray:
    """Normalised complex Gaussian state(s): (2^n,) or (batch, 2^n)."""
    shape = (2 ** n,) if batch is None else (batch, 2 ** n)
    v = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def random_params(n_params: int, rng: np.random.Generator, batch=None):
    if batch is None:
        return tuple(float(v) for v in rng.uniform(-2 * np.pi, 2 * np.pi, n_params))
    return tuple(rng.uniform(-2 * np.pi, 2 * np.pi, batch) for _ in range(n_params))


def random_phases(d: int, rng: np.random.Generator) -> np.ndarray:
    return np.exp(1j * rng.uniform(-np.pi, np.pi, d))
