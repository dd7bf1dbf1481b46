"""Train a small variational circuit: prepare a target Bloch-sphere state and a Bell pair.

Run with ``make run`` (or ``python examples/train_small_circuit.py``). Prints the loss curve and
the final fidelities; finishes in a few seconds on a laptop CPU.
"""
import math

import torch

import torchquantum_layers as tql


def main(steps: int = 150, seed: int = 0):
    torch.manual_seed(seed)
    # 2 qubits: hardware-efficient ansatz, target = the Bell state (|00> + |11>)/sqrt(2)
    circuit = tql.templates.hardware_efficient(tql.Circuit(2), n_layers=2)
    target = torch.zeros(1, 4, dtype=torch.complex64)
    target[0, 0] = target[0, 3] = 1 / math.sqrt(2)
    # the Bell state is the unique ground state of H = -X0 X1 + Y0 Y1 - Z0 Z1 (energy -3)
    H = tql.Hamiltonian.from_string("-1*X0 X1 + 1*Y0 Y1 - 1*Z0 Z1")
    opt = torch.optim.Adam(circuit.parameters(), lr=0.1)
    for step in range(steps):
        energy = tql.expval(circuit, H, diff_method="adjoint").sum()
        opt.zero_grad()
        energy.backward()
        opt.step()
        if step % 30 == 0 or step == steps - 1:
            print(f"step {step:4d}  energy {energy.item():+.6f}  (exact ground energy -3)")
    with torch.no_grad():
        psi = circuit()
    fidelity = (target.conj() * psi).sum().abs().item() ** 2
    print(f"final energy {energy.item():+.6f}, fidelity with the Bell state {fidelity:.6f}")
    return energy.item(), fidelity


if __name__ == "__main__":
    main()
