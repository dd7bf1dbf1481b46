"""Gates rewritten into what a local program runs (kernels.program): rotations and monomials
on single wires, diagonal and controlled slots.

* A gate with a diagonal form (RXX, RYY, RZX: ``Gate.diagonal_form``) becomes W, its diagonal
  gate, W†; the fixed single-wire gates of W merge into the slots of the rotations around them,
  and a basis change meeting its inverse on a wire (a chain RXX(0, 1) RXX(1, 2): H H on wire 1)
  cancels.
* MultiRZ on three or more wires becomes the permutation that puts their parity on the last
  wire (a CNOT ladder, merged with the permutations around it), RZ there, and its inverse.
* A two-level gate (SingleExcitation, DoubleExcitation, their controlled forms: a 2 × 2 block on
  two basis states of its wires) becomes σ, the block on one wire controlled by all the others,
  σ⁻¹, where the permutation σ takes the two levels to the states that differ in that wire only
  and have every other wire set; σ⁻¹ of one gate and σ of the next merge into one index table.

Run as the dense gate, each would cut the program in two, costing a pass over the state and a
Python call each. The adjoint of W D W† is W D† W†, of σ⁻¹ C(B) σ it is σ⁻¹ C(B†) σ.
"""
from __future__ import annotations

from functools import lru_cache

from . import gates as G


def program_form(ops) -> list:
    """``ops`` with every gate that has a program form replaced by it (the others unchanged)."""
    from .circuit import Op
    out, is_basis, on_wire = [], [], {}

    def add(op, basis=False):
        last = on_wire.setdefault(op.wires[0], [])
        if basis and last and is_basis[last[-1]] and out[last[-1]].gate is op.gate \
                and out[last[-1]].adjoint != op.adjoint:
            out[last.pop()] = None
            return
        for w in op.wires:
            on_wire.setdefault(w, []).append(len(out))
        out.append(op)
        is_basis.append(basis)

    for op in ops:
        gate = op.gate
        if gate.diagonal_form:
            diagonal, *per_wire = gate.diagonal_form
            basis = [Op(g, (w,)) for w, fixed in zip(op.wires, per_wire) for g in fixed]
            for b in basis:
                add(b, basis=True)
            add(Op(diagonal, op.wires, op.angles, op.data_key, op.adjoint))
            for b in reversed(basis):
                add(Op(b.gate, b.wires, adjoint=not b.adjoint), basis=True)
        elif gate in _MULTI_RZ and len(op.wires) > 2:
            parity = _parity_gate(len(op.wires))
            add(Op(parity, op.wires))
            add(Op(_MULTI_RZ[gate], op.wires[-1:], op.angles, None, op.adjoint))
            add(Op(parity, op.wires, adjoint=True))
        elif gate.kind == "two-level" and not gate.takes_data:
            sigma, block, target = _two_level_parts(gate, len(op.wires))
            controls = tuple(w for i, w in enumerate(op.wires) if i != target)
            add(Op(sigma, op.wires))
            add(Op(block, controls + (op.wires[target],), op.angles, op.data_key, op.adjoint))
            add(Op(sigma, op.wires, adjoint=True))
        else:
            add(op)
    return [op for op in out if op is not None]


# MultiRZ -> RZ on the parity wire; the same for their conjugates (a density matrix's columns)
_MULTI_RZ = {G.MULTIRZ: G.RZ, G.conjugate(G.MULTIRZ): G.conjugate(G.RZ)}


@lru_cache(maxsize=None)
def _parity_gate(k):
    """The permutation that puts the parity of k wires on the last (a CNOT ladder): it takes
    Z ⊗ … ⊗ Z to Z on the last wire, so MultiRZ(θ) is it, RZ(θ) there, and it undone."""
    table = [0] * 2 ** k
    for j in range(2 ** k):
        table[(j & ~1) | (bin(j).count("1") & 1)] = j            # new[σ(j)] = old[j]
    table = tuple(table)
    return G.Gate(f"PARITY{k}", k, 0, G._perm_to_matrix(lambda kk: table), kind="permutation",
                  perm_fn=lambda kk: table, doc=f"the parity of {k} wires onto the last")


@lru_cache(maxsize=None)
def _two_level_parts(gate, k):
    """(σ as a permutation gate, the block controlled by k − 1 wires, the position of its
    target among the gate's wires) for a two-level gate on k wires."""
    l0, l1 = gate.levels
    t = (l0 ^ l1).bit_length() - 1            # a local index bit where the two levels differ
    full = 2 ** k - 1
    m0, m1 = full & ~(1 << t), full
    # σ(l0) = m0, σ(l1) = m1; every other state that can stay, stays
    sigma = {l0: m0, l1: m1}
    free_src = [j for j in range(2 ** k) if j not in sigma and j in (m0, m1)]
    free_dst = [j for j in (l0, l1) if j not in (m0, m1)]
    sigma.update(zip(free_src, free_dst))
    table = [0] * 2 ** k
    for j in range(2 ** k):
        table[sigma.get(j, j)] = j            # new[σ(j)] = old[j]
    table = tuple(table)
    perm = G.Gate(f"{gate.name}.levels", k, 0, G._perm_to_matrix(lambda kk: table), kind="permutation",
                  perm_fn=lambda kk: table, doc=f"{gate.name}'s levels to {m0}, {m1}")

    def block_matrix(p, kk, dtype, data, device):
        return gate.block_fn(p, dtype, device)
    block = G.Gate(f"{gate.name}.block", 1, gate.n_params, block_matrix, spectra=gate.spectra,
                   param_names=gate.param_names)
    return perm, G.controlled(block, k - 1, name=f"{gate.name}.controlled"), k - 1 - t
