"""Barren plateaus: variance of ∂E/∂θ₁ over 300 random circuits for 2–8 qubits (Paddle Quantum's
tutorial; E = |⟨0…0|U|0…0⟩|², RY(π/4) layer, random RX/RY/RZ layer, CZ chain). The variance
decays exponentially with the number of qubits. With matplotlib (the ``plot`` extra) the curve
is saved to ``barren_plateau.png``.

    python examples/barren_plateau.py [--depth 1] [--plot barren_plateau.png]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from a checkout without installing
import argparse
import time

from torchquantum_layers.research import gradient_variance, plot_gradient_variance


def main(n_wires=(2, 3, 4, 5, 6, 7, 8), samples=300, depth=1, seed=42, plot=None, verbose=True):
    t0 = time.perf_counter()
    res = gradient_variance(n_wires, samples=samples, depth=depth, seed=seed)
    if verbose:
        for n, m, v in zip(res.n_wires, res.mean, res.variance):
            print(f"{n} qubits  mean {m: .5f}  variance {v:.3e}")
        print(f"log-variance slope {res.slope:.3f} per qubit (variance ∝ e^(slope·n))  "
              f"[{time.perf_counter() - t0:.1f} s]")
    if plot:
        try:
            plot_gradient_variance(res, path=plot)
            if verbose:
                print(f"plot saved to {plot}")
        except ImportError as exc:
            print(exc)
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--plot", default="barren_plateau.png")
    a = ap.parse_args()
    main(samples=a.samples, depth=a.depth, plot=a.plot)
