"""Variational quantum state diagonalization of a two-qubit state with spectrum 0.5, 0.3, 0.1, 0.1
(Paddle Quantum's tutorial: universal 15-angle two-qubit circuit, σ = diag(0.1, 0.2, 0.3, 0.4),
Adam at lr 0.1; Paddle reports [0.4995, 0.2974, 0.1026, 0.1005] after 50 steps).

    python examples/vqsd.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout without installing
import time

import torch

from torchquantum_layers.research import spectrum_state, vqsd

SPECTRUM = [0.5, 0.3, 0.1, 0.1]


def main(steps=150, lr=0.1, seed=14, state_seed=1, verbose=True):
    t0 = time.perf_counter()
    rho = spectrum_state(SPECTRUM, seed=state_seed)
    res = vqsd(rho, steps=steps, lr=lr, seed=seed)
    err = float((res.eigenvalues - torch.tensor(SPECTRUM, dtype=torch.float64)).abs().max())
    if verbose:
        print(f"estimated spectrum: {[round(float(v), 5) for v in res.eigenvalues]}")
        print(f"target spectrum:    {SPECTRUM}")
        print(f"max error {err:.2e}  [{time.perf_counter() - t0:.1f} s]")
    return res.eigenvalues, err


if __name__ == "__main__":
    main()
