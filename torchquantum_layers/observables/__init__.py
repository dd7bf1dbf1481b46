"""Pauli-sum observables: ``PauliString``, ``Hamiltonian``, batched ⟨ψ|H|ψ⟩ and H·ψ without matrices.

A Pauli string is two bit masks over wires, an X part and a Z part (a Y sets both):
``P = i^{|x∧z|} X^x Z^z``. On a basis state ``P|j⟩ = i^{|x∧z|} (-1)^{|j∧z|} |j⊕x⟩``, so P·ψ is
one index flip and one sign vector: no 2^n × 2^n matrix is ever needed.

A Hamiltonian ``H = Σ_t c_t P_t`` is compiled once per (n, dtype, device) by grouping its terms
by X mask. The terms of a group share the flip ``j ↦ j⊕x``, and their signs and phases combine
into ONE diagonal ``D_x[j] = Σ_t c_t i^{|x∧z_t|} (-1)^{|j∧z_t|}``:

    (H·ψ)[i] = Σ_x D_x[i⊕x] ψ[i⊕x]

so a call costs one pass per distinct X mask, not per term. The X-free group (all-Z terms and
the constant) is one precomputed real vector; its expectation is one weighted sum of |ψ|².

Expectations use the Hermitian pairing of j and j⊕x: with p the pivot wire (the last X wire)
and ψ₀, ψ₁ the halves of the state where wire p is 0 and 1,

    ⟨ψ|H_x|ψ⟩ = 2 Re Σ_k D_x[0,k] ψ₀[k] conj(ψ₁[k⊕x'])        (x' = x without p)

i.e. per group one pass that forms the products ψ₀[k] conj(ψ₁[k⊕x']) — a multiply per pattern
of the x' bits on strided views of the state, or one ``torch.flip`` and one multiply when x' is
large — and one GEMV against a precomputed table (the same GEMM serves a list of observables).
torch's CPU kernels are several times slower on short contiguous runs, which is what X masks
ending on the last wires produce; so batches of 8 or more states are transposed once per call
to put the batch innermost, and single states on many wires let such groups use a rotated wire
order (see :class:`_ExpvalPlan`). For small states, where the fixed cost of a torch call
dominates, all groups are evaluated at once by a single gather instead (``method="gather"``).

Memory: a group's table holds 2**(n-1) complex values (2**n for H·ψ). Tables are cached up to
:data:`TABLE_CACHE_BYTES` (512 MiB) per compiled form, the costliest to rebuild first; the
groups past that cap rebuild their table at each call (one small GEMM over the wires their Z
masks touch, then one expansion), so e.g. a 24-qubit Hamiltonian with hundreds of X masks stays
within memory at the price of speed.

Conventions: wire 0 is the most significant bit of a basis index; ⟨ψ|H|ψ⟩ is the bilinear form
ψ†Hψ (states are not renormalised); expectations are real and need a Hermitian observable.

Modules: :mod:`.pauli` and :mod:`.hamiltonian` are the algebra (no state tensors); :mod:`.tables`
builds the per-group diagonals; :mod:`.expval_plan`, :mod:`.apply_plan` and :mod:`.layouts` are the
compiled forms; :mod:`.evaluate` and :mod:`.shots` are the entry points.
"""

# pauli first: it completes the PauliString <-> Hamiltonian pair (see the end of pauli.py)
from .pauli import PauliString  # noqa: I001
from .hamiltonian import DENSE_MAX_WIRES, TABLE_CACHE_BYTES, Hamiltonian, commutator
from .evaluate import apply_hamiltonian, diagonal_table, expectation, weighted_bra
from .shots import qwc_groups
from .decompose import pauli_decompose

__all__ = ["PauliString", "Hamiltonian", "expectation", "apply_hamiltonian", "commutator",
           "qwc_groups", "diagonal_table", "weighted_bra", "TABLE_CACHE_BYTES", "DENSE_MAX_WIRES", "pauli_decompose"]
