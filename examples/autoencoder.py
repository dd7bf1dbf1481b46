"""Quantum autoencoder compressing a 3-qubit mixed state into 2 qubits (Paddle Quantum's
tutorial: spectrum 0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0 in a random basis; 6 RY–RZ–CNOT layers;
Adam at lr 0.2 for 100 steps; Paddle reports a (squared) fidelity of 0.8942; the trash loss
cannot go below 0.1, the weight outside the 4 largest eigenvalues).

    python examples/autoencoder.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout without installing
import time

from torchquantum_layers.research import quantum_autoencoder


def main(steps=100, lr=0.2, depth=6, seed=14, state_seed=1, verbose=True):
    t0 = time.perf_counter()
    res = quantum_autoencoder(n_trash=1, depth=depth, steps=steps, lr=lr, seed=seed, state_seed=state_seed)
    if verbose:
        for i in range(9, len(res.loss), 10):
            print(f"step {i + 1:3d}  loss {res.loss[i]:.4f}")
        print(f"fidelity F(rho_in, rho_out) = {res.fidelity:.4f} (Paddle Quantum: 0.8942)  "
              f"[{time.perf_counter() - t0:.1f} s]")
    return res.fidelity


if __name__ == "__main__":
    main()
