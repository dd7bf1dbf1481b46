"""Observables benchmark (issue 3): ⟨ψ|H|ψ⟩ for chemistry-shaped Pauli sums, as ratios to a clone.

    python benchmarks/observables.py [--dtypes c64,c128] [--batches 1,64] [--rounds 5] [--threads T] [--quick]

Two Hamiltonians with the Jordan-Wigner structure of a molecular one (generated here, random
coefficients): 12 qubits / ~600 terms (LiH in STO-3G has 12 qubits and 631 terms) and
20 qubits / ~200 terms, and a 20-qubit MaxCut cost (ZZ terms only: the diagonal kernel). Terms: Z_p and Z_p Z_q (one X-free group), same-spin single excitations
X_p Z…Z X_q and Y_p Z…Z Y_q (plus copies with one extra Z_r, as two-body terms produce), and
double excitations on p<q<r<s with the 8 even-Y patterns XXXX, XXYY, …, YYYY and JW Z strings.

Each ratio is the median over rounds of (time of ``expectation``) / (time of ``torch.clone`` of the
same state), clone and expectation timed in turn within each round, so that a shared machine's
drifting load cancels. Target of the issue: expval time <= 2 × (number of distinct X masks)
clone-times, i.e. "per mask" <= 2.
"""
from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torchquantum_layers as tql  # noqa: E402
from torchquantum_layers.kernels import native  # noqa: E402
from torchquantum_layers.observables import Hamiltonian, apply_hamiltonian, expectation  # noqa: E402

from common import machine, paired, table, today  # noqa: E402

DT = {"c64": torch.complex64, "c128": torch.complex128}


def molecular_like_hamiltonian(n: int, n_singles: int, single_variants: int, n_doubles: int,
                               n_zz: int = None, seed: int = 0) -> Hamiltonian:
    """A random real Pauli sum with the X-mask structure of a Jordan-Wigner molecular Hamiltonian."""
    rng = np.random.default_rng(seed)
    terms = []
    for p in range(n):
        terms.append((rng.normal(0, 0.5), f"Z{p}"))
    pairs = list(itertools.combinations(range(n), 2))
    if n_zz is not None:
        pairs = [pairs[i] for i in sorted(rng.choice(len(pairs), n_zz, replace=False))]
    for p, q in pairs:
        terms.append((rng.normal(0, 0.2), f"Z{p} Z{q}"))
    same_spin = [(p, q) for p, q in itertools.combinations(range(n), 2) if p % 2 == q % 2]
    singles = [same_spin[i] for i in sorted(rng.choice(len(same_spin), n_singles, replace=False))]
    for p, q in singles:
        string = " ".join(f"Z{w}" for w in range(p + 1, q))
        outside = [r for r in range(n) if r < p or r > q]
        extras = [None] + [int(r) for r in rng.choice(outside, single_variants, replace=False)]
        for r in extras:
            tail = f" Z{r}" if r is not None else ""
            for a in "XY":
                terms.append((rng.normal(0, 0.05), f"{a}{p} {string} {a}{q}{tail}".replace("  ", " ")))
    quads = [c for c in itertools.combinations(range(n), 4) if sum(w % 2 for w in c) in (0, 2, 4)]
    chosen = [quads[i] for i in sorted(rng.choice(len(quads), n_doubles, replace=False))]
    patterns = [pat for pat in itertools.product("XY", repeat=4) if pat.count("Y") % 2 == 0]
    for p, q, r, s in chosen:
        zs = [w for w in range(p + 1, q)] + [w for w in range(r + 1, s)]
        for pat in patterns:
            word = " ".join([f"{pat[0]}{p}", f"{pat[1]}{q}", f"{pat[2]}{r}", f"{pat[3]}{s}"] +
                            [f"Z{w}" for w in zs])
            terms.append((rng.normal(0, 0.02), word))
    return Hamiltonian(terms, n_wires=n)


def cases(quick: bool):
    h12 = molecular_like_hamiltonian(12, n_singles=30, single_variants=1, n_doubles=50, seed=12)
    h20 = molecular_like_hamiltonian(20, n_singles=10, single_variants=1, n_doubles=12, n_zz=40, seed=20)
    # a QAOA cost: ZZ on a ring with chords, one X-free group (the diagonal kernel alone)
    cut = Hamiltonian([(0.5, f"Z{i} Z{(i + 1) % 20}") for i in range(20)]
                      + [(0.5, f"Z{i} Z{(i + 7) % 20}") for i in range(0, 20, 2)], n_wires=20)
    out = [("molecular-like 12q", h12), ("molecular-like 20q", h20), ("MaxCut cost 20q", cut)]
    if quick:
        return out[:1]
    try:                                   # the project's bundled molecules, when present
        from torchquantum_layers.chem import load
        out += [(f"{name} STO-3G (bundled)", load(name)[0]) for name in ("LiH", "BeH2")]
    except Exception as err:               # noqa: BLE001 - optional rows
        print(f"(bundled molecules skipped: {err})", file=sys.stderr)
    return out


def bench(name, h, batch, dtype, rounds):
    n = h.n_wires
    state = tql.random_state(n, batch, generator=torch.Generator().manual_seed(0), dtype=dtype)
    masks = h.num_x_masks
    plan = h.compile(n, dtype, "cpu")
    torch_path = "gather" if plan.use_gather(batch) else "loop"       # auto's pick without the C kernel
    if native.runs_on(state):
        path, other = "native", torch_path
    elif torch_path == "gather":
        path, other = "gather", "loop"
    else:       # the gather's index for every mask only while it stays small
        path, other = "loop", "gather" if len(plan.groups) * 2 ** n <= 2 ** 22 else None
    with torch.no_grad():
        ratio, t, tc = paired(lambda: expectation(state, h), state, rounds)
        r_other = paired(lambda: expectation(state, h, method=other), state, rounds)[0] if other else None
        r_apply = paired(lambda: apply_hamiltonian(state, h), state, rounds)[0]
    return {
        "H": name, "n": n, "terms": len(h), "X masks": masks, "B": batch,
        "dtype": str(dtype).replace("torch.", ""),
        "clone ms": f"{tc * 1e3:.3f}",
        "expval ms": f"{t * 1e3:.2f}",
        "expval/clone": f"{ratio:.1f}",
        "per mask": f"{ratio / masks:.2f}",
        "target <= 2": "yes" if ratio <= 2 * masks else "NO",
        "path": path,
        "other path per mask": f"{other} {r_other / masks:.2f}" if other else "-",
        "H·ψ per mask": f"{r_apply / masks:.2f}",
    }


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="c64,c128")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved clone/expval rounds (median)")
    ap.add_argument("--quick", action="store_true", help="12-qubit case only")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for name, h in cases(args.quick):
        for b in [int(x) for x in args.batches.split(",")]:
            for d in args.dtypes.split(","):
                rows.append(bench(name, h, b, DT[d], args.rounds))
                print(f"done {name} B={b} {d}", file=sys.stderr, flush=True)
    headers = list(rows[0].keys())
    print(f"observables benchmark, {today()}, {machine()}")
    print("expval/clone = time of expectation(state, H) / time of state.clone() (median of interleaved rounds);")
    print("per mask = that / X masks; target: per mask <= 2. path = what method='auto' picks (native: the C kernel); other path =")
    print("the same with the other method; H·ψ = apply_hamiltonian. No autograd (torch.no_grad).")
    print()
    print(table([[r[h] for h in headers] for r in rows], headers))


if __name__ == "__main__":
    main()
