"""Variational quantum SVD of Paddle Quantum's random 8×8 complex matrix (integer entries from
NumPy's legacy generator, seed 42; singular values 54.83, 19.18, 14.99, 11.61, …).

Two 3-qubit circuits of 20 RY–RZ–CNOT layers, weights 24, 21, …, 3, Adam at lr 0.02 for 100
steps (Paddle's settings), then 60 L-BFGS iterations to resolve the close 4th/5th values.

    python examples/vqsvd.py
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout without installing
import time

from torchquantum_layers.research import paddle_random_matrix, vqsvd


def main(steps=100, lr=0.02, refine_steps=60, depth=20, seed=14, verbose=True):
    t0 = time.perf_counter()
    res = vqsvd(paddle_random_matrix(3, seed=42), depth=depth, steps=steps, lr=lr, refine_steps=refine_steps,
                seed=seed)
    rel = ((res.singular_values - res.exact).abs() / res.exact)
    if verbose:
        print("learned:", [round(float(v), 3) for v in res.singular_values])
        print("exact:  ", [round(float(v), 3) for v in res.exact])
        print(f"top-4 relative errors: {[f'{float(e):.1e}' for e in rel[:4]]}  [{time.perf_counter() - t0:.1f} s]")
    return res.singular_values, res.exact, rel


if __name__ == "__main__":
    main()
