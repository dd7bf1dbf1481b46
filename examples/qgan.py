"""Quantum GAN learning an entangled two-qubit pure state (after Paddle Quantum's tutorial).

Generator: U3 layer, CNOT, U3 layer on 2 qubits; discriminator: 2 layers of U3 + CNOT ring on the
2 data qubits and an output qubit, P(target) = (⟨Z_out⟩ + 1) / 2; Adam, 15 discriminator and 3
generator steps per round, generator step decaying by 0.9 per round (see ``train_qgan``).

    python examples/qgan.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout without installing
import time

from torchquantum_layers.research import train_qgan


def main(rounds=40, seed=7, verbose=True):
    t0 = time.perf_counter()
    res = train_qgan(rounds=rounds, seed=seed)
    if verbose:
        for i in range(4, len(res.fidelities), 5):
            print(f"round {i + 1:3d}  D loss {res.disc_loss[i]: .4f}  G loss {res.gen_loss[i]: .4f}  "
                  f"fidelity {res.fidelities[i]:.5f}")
        print(f"fidelity of the generated state: {res.fidelity:.5f}  [{time.perf_counter() - t0:.1f} s]")
    return res.fidelity


if __name__ == "__main__":
    main()
