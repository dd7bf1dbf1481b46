"""Smoke tests: the example scripts run with small settings and reach their goals."""
import importlib.util
import pathlib

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_train_small_circuit_reaches_the_bell_state():
    energy, fidelity = load("train_small_circuit").main(steps=120)
    assert energy < -2.99
    assert fidelity > 0.995
