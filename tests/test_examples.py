"""Smoke tests: the example scripts run with small settings and reach their goals."""
import importlib.util
import math
import pathlib

import torch

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


# ------------------------------------------------------------------------------------------------
# the examples save their figure (matplotlib present) into --out and print where
def _figure_saved(path, printed):
    import pytest
    pytest.importorskip("matplotlib")
    from .pngcheck import assert_png
    assert_png(path)
    assert f"saved to {path}" in printed


def test_vqe_h2_saves_its_training_curves(tmp_path, capsys):
    errors = load("vqe_h2").main(["--steps", "60", "--every", "100", "--out", str(tmp_path)])
    assert all(abs(e) < 1.6e-3 for e in errors.values())
    _figure_saved(tmp_path / "vqe_h2_convergence.png", capsys.readouterr().out)


def test_h2_dissociation_saves_its_curve(tmp_path, capsys):
    rows = load("h2_dissociation").main(["--points", "3", "--out", str(tmp_path)])
    assert len(rows) == 3 and all(abs(r[4]) < 1.6e-3 for r in rows)
    _figure_saved(tmp_path / "h2_dissociation.png", capsys.readouterr().out)


def test_qaoa_maxcut_saves_its_histogram(tmp_path, capsys):
    res = load("qaoa_maxcut").main(["--out", str(tmp_path), "--threads", "1"])
    assert float(res.approximation_ratio) > 0.9       # Paddle's graph, p = 4
    _figure_saved(tmp_path / "qaoa_maxcut_histogram.png", capsys.readouterr().out)


def test_hybrid_classifier_saves_its_decision_boundary(tmp_path, capsys):
    path = tmp_path / "boundary.png"
    out = load("hybrid_classifier").main(epochs=10, n_test=50, plot_path=str(path))
    assert out["test_acc"] >= 0.9 and out["plot"] == str(path)
    _figure_saved(path, capsys.readouterr().out)


def test_no_plots_writes_nothing(tmp_path):
    load("h2_dissociation").main(["--points", "1", "--out", str(tmp_path / "none"), "--no-plots"])
    assert not (tmp_path / "none").exists()


def test_trotter_dynamics_follows_the_exact_evolution():
    """The batched-time Trotter curve against tql.exact.evolve: close at order 4, and a second-
    order curve improves about fourfold with twice the steps."""
    example = load("trotter_dynamics")
    assert example.main(["--n", "6", "--points", "5", "--steps", "8", "--order", "4"]) < 5e-3
    coarse = example.main(["--n", "6", "--points", "5", "--steps", "8", "--order", "2"])
    fine = example.main(["--n", "6", "--points", "5", "--steps", "16", "--order", "2"])
    assert 2.5 < coarse / fine < 6


def test_noisy_vqe_zne_recovers_the_energy_the_noise_hides():
    errors = load("noisy_vqe_zne").main(["--steps", "40"])
    (noisy_reported, noisy_angles), (zne_reported, zne_angles) = errors["noisy"], errors["ZNE"]
    assert noisy_reported > 1.6e-3                          # the device's estimate misses chemical accuracy
    assert abs(zne_reported) < 1.6e-3 and abs(zne_reported) < noisy_reported / 10
    assert abs(noisy_angles) < 1.6e-3 and abs(zne_angles) < 1.6e-3


def test_adapt_vqe_example_reaches_fci_and_plots_operators_on_x(tmp_path, capsys):
    from torchquantum_layers import chem, plotting
    results = load("adapt_vqe").main(["--molecule", "LiH_active", "--out", str(tmp_path)])
    info = chem.load("LiH_active")[1]
    assert {"singles_doubles", "qubit"} == set(results)
    assert all(r.converged and abs(r.energy - info.fci_energy) < 1.6e-3 for r in results.values())
    _figure_saved(tmp_path / "adapt_vqe_LiH_active.png", capsys.readouterr().out)
    fig = plotting.vqe_convergence({"a": results["qubit"].energies}, info.fci_energy, xlabel="operators appended")
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == ["operators appended"] * 2


def test_qaoa_variants_example_compares_the_four_routes():
    out = load("qaoa_variants").main(["--nodes", "8", "--steps", "40"])
    rows = out["rows"]
    assert set(rows) == {"QAOA (expectation)", "QAOA (CVaR 0.2)", "RQAOA"}
    for ratio, p_opt, top in rows.values():
        assert 0.6 < ratio <= 1.0 + 1e-9 and 0.0 < top <= 1.0 + 1e-9
    assert rows["RQAOA"][0] >= rows["QAOA (expectation)"][0]       # a cut, not an expectation
    assert out["mitigated_error"] < out["noisy_error"] / 3            # readout inversion + ZNE


def test_variational_dynamics_follows_the_exact_quench_and_finds_the_ground_state():
    worst, gap = load("variational_dynamics").main(["--n", "4", "--layers", "2", "--steps", "10", "--t-max", "0.6",
                                                    "--tau", "3"])
    assert worst < 5e-3             # magnetisation against tql.exact.evolve
    assert 0 <= gap < 0.03          # energy above the exact ground state (variational: never below)


def test_qaoa_mps_large_matches_the_ring_and_stays_below_gw(capsys):
    """p = 1 QAOA as an MPS on a 20-node ring and a 12-node random 3-regular graph, nodes placed by
    tql.mps.wire_order: the ring's trained energy equals the analytic value, the 3-regular graph's
    the state vector of the original labels; expected cuts stay below the Goemans–Williamson upper
    bound; sampled cuts (mapped back to node labels) are recomputed by brute force on the edges."""
    out = load("qaoa_mps_large").main(["--graph", "both", "--n", "20", "--n-regular", "12", "--steps", "4",
                                       "--lr", "0.1", "--shots", "64", "--chi", "16"])
    ring, regular = out["ring"], out["regular"]
    assert ring["deviation"] is not None and ring["deviation"] < 1e-8
    assert ring["bandwidth_before"] == 19 and ring["bandwidth_after"] == 2      # the closing edge (0, 19)
    assert regular["bond_bound"] <= 16 and regular["deviation"] < 1e-8           # χ = 16 is exact here
    assert regular["bandwidth_after"] < regular["bandwidth_before"]
    for res, n in ((ring, 20), (regular, 12)):
        assert sorted(res["order"]) == list(range(n))
        assert res["expected_cut"] <= res["gw_upper_bound"] + 1e-9
        assert res["energy"] < res["energies"][0]
        bits = res["best_bits"]
        assert res["best_cut"] == sum(bits[u] != bits[v] for u, v in res["edges"]) > 0
    printed = capsys.readouterr().out
    assert "|E_MPS − E_analytic|" in printed and "|E_MPS − E_exact|" in printed and "bandwidth 19 -> 2" in printed

def test_private_classifier_trains_with_clipped_per_sample_gradients():
    ex = load("private_classifier")
    out = ex.main(["--steps", "60", "--train", "200"])
    assert out["private"] > 0.8 and out["plain"] > 0.8
    assert 0 < out["max_clipped_norm"] <= 1.0 + 1e-6
    # the accountant against TensorFlow Privacy's published MNIST figure (σ 1.1, batch 256 of
    # 60000, 60 epochs, δ 1e-5: ε = 3.01) and the Gaussian mechanism's closed form at q = 1
    # (RDP α/(2σ²), so ε = min_α T α/(2σ²) + log(1/δ)/(α−1))
    from torchquantum_layers.qml.privacy import per_sample_gradients, rdp_epsilon
    assert abs(rdp_epsilon(256 / 60000, 1.1, 60 * 60000 // 256, 1e-5) - 3.01) < 0.02
    closed = min(3 * a / (2 * 4.0) + math.log(1e5) / (a - 1) for a in range(2, 129))
    assert abs(rdp_epsilon(1.0, 2.0, 3, 1e-5) - closed) < 1e-12
    # per-sample gradients against one autograd backward per sample
    model = ex.make_model(3)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.rand(4, 2) * 2 - 1, torch.tensor([0, 1, 1, 0])
    per = per_sample_gradients(model, params, x, y)
    for b in range(4):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x[b:b + 1]), y[b:b + 1]).backward()
        for name, p in model.named_parameters():
            assert torch.allclose(per[name][b], p.grad, atol=1e-5), name
