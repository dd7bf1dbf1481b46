"""Figures (the ``plot`` extra): each one is rendered with Agg to a PNG that must be a real, non-blank
picture, and what it draws is checked against data computed here independently (brute-force cuts,
the bundled FCI energies, an analytic decision boundary, the text drawing's columns)."""
import itertools
import math
import sys

import numpy as np
import pytest
import torch

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import torchquantum_layers as tql  # noqa: E402
import torchquantum_layers.chem as chem  # noqa: E402
from torchquantum_layers import optimization as opt  # noqa: E402
from torchquantum_layers import plotting  # noqa: E402
from torchquantum_layers.drawing import _layers  # noqa: E402

from .pngcheck import assert_png  # noqa: E402


def _texts(fig):
    return [t for ax in fig.axes for t in ax.texts]


# ------------------------------------------------------------------------------------------------
# circuit diagrams
def _sample_circuit():
    c = tql.Circuit(3)
    c.h(0).cnot(0, 1).crx(1, 2, 0.5).rzz(0, 2, trainable=True, init=0.25).toffoli(0, 1, 2).swap(1, 2)
    c.ry(1, input=0)
    return c


def test_circuit_draw_mpl_places_the_text_drawings_columns(tmp_path):
    from matplotlib.figure import Figure
    from matplotlib.patches import Circle
    c = _sample_circuit()
    path = tmp_path / "circuit.png"
    fig = c.draw("mpl", path=path)
    assert isinstance(fig, Figure)
    assert_png(path)
    labels = {t.get_text(): t.get_position() for t in _texts(fig)}
    # fixed angles as numbers, trainable ones as w<index>, inputs as x<column>; one label per wire
    assert {"H", "RX(0.5)", "RZZ(w0)", "RY(x0)", "q0", "q1", "q2"} <= set(labels)
    # each gate sits on its wire (wire w at y = -w) and in the column the text drawing gives it
    assert labels["H"][1] == 0 and labels["RX(0.5)"][1] == -2 and labels["RY(x0)"][1] == -1
    assert labels["RZZ(w0)"][1] == -1                                  # a box over wires 0..2, centred
    columns = [[op.gate.name for op in ops] for ops in _layers(c)]
    assert columns == [["H"], ["CNOT"], ["CRX"], ["RZZ"], ["TOFFOLI"], ["SWAP"], ["RY"]]
    xs = [labels[k][0] for k in ("H", "RX(0.5)", "RZZ(w0)", "RY(x0)")]
    assert xs == sorted(xs) and len(set(xs)) == 4
    circles = [p for ax in fig.axes for p in ax.patches if isinstance(p, Circle)]
    targets = [p for p in circles if p.get_facecolor()[:3] == (1.0, 1.0, 1.0)]
    dots = [p for p in circles if p.get_facecolor()[:3] == (0.0, 0.0, 0.0)]
    assert len(targets) == 2                   # ⊕ of CNOT and of Toffoli
    assert len(dots) == 4                      # controls: CNOT 1, CRX 1, Toffoli 2
    # the non-adjacent RZZ box numbers the two wires it acts on
    assert {"0", "1"} <= set(labels)


def test_circuit_draw_mpl_marks_classical_conditions(tmp_path):
    """A wire read as 1 is a ring around a dot, one read as 0 an empty ring; no "flip" boxes."""
    from matplotlib.patches import Circle
    c = tql.MixedCircuit(3)
    c.h(0).h(1).measure([0, 1]).x(2, condition={0: 0, 1: 1})
    fig = c.draw("mpl", path=tmp_path / "cond.png")
    assert_png(tmp_path / "cond.png")
    assert "flip" not in {t.get_text() for t in _texts(fig)}
    circles = [p for ax in fig.axes for p in ax.patches if isinstance(p, Circle)]
    by_wire = {}
    for p in circles:
        by_wire.setdefault(-p.center[1], []).append((p.get_facecolor()[:3], p.radius))
    rings = lambda w: [r for fc, r in by_wire[w] if fc == (1.0, 1.0, 1.0)]
    dots = lambda w: [r for fc, r in by_wire[w] if fc == (0.0, 0.0, 0.0)]
    assert len(rings(0)) == 1 and dots(0) == []                 # read as 0
    assert len(rings(1)) == 1 and len(dots(1)) == 1             # read as 1
    assert dots(1)[0] < rings(1)[0]
    assert len(rings(2)) == 1 and dots(2) == []                 # the ⊕ target


def test_circuit_draw_show_values_prints_trained_angles():
    c = _sample_circuit()
    with torch.no_grad():
        c.weights[0] = 1.234
    texts = {t.get_text() for t in _texts(c.draw("mpl", show_values=True))}
    assert "RZZ(1.23)" in texts and "RZZ(w0)" not in texts


def test_circuit_draw_text_is_the_print_and_bad_style_is_named():
    c = _sample_circuit()
    assert c.draw() == c.draw("text") == str(c)
    with pytest.raises(ValueError, match="style must be 'text' or 'mpl', got 'svg'"):
        c.draw("svg")
    with pytest.raises(TypeError, match="draw\\('text'\\) takes only max_width=, got path"):
        c.draw("text", path="x.png")


def test_uccsd_circuit_diagram_is_a_png(tmp_path):
    circuit = chem.uccsd(4, 2)
    circuit.draw("mpl", path=tmp_path / "uccsd.png")
    assert_png(tmp_path / "uccsd.png")
    assert {"X", "G²(w0)", "G(w1)", "G(w2)"} <= {t.get_text() for t in _texts(circuit.draw("mpl"))}


# ------------------------------------------------------------------------------------------------
# VQE training curves and the dissociation curve
def test_vqe_convergence_draws_history_reference_and_band(tmp_path):
    H, info = chem.load("H2")
    circuit = chem.uccsd(info.n_qubits, info.n_electrons, dtype=torch.complex128)
    res = chem.vqe(H, circuit, steps=25, optimizer="adam")
    path = tmp_path / "curve.png"
    fig = plotting.vqe_convergence({"UCCSD": res.history}, info.fci_energy, hf_energy=info.hf_energy, path=path)
    assert_png(path)
    ax_e, ax_err = fig.axes[:2]
    lines = {ln.get_label(): ln for ln in ax_e.get_lines()}
    np.testing.assert_allclose(lines["UCCSD"].get_ydata(), res.history)
    fci_line = next(ln for k, ln in lines.items() if k.startswith("FCI"))
    assert np.allclose(fci_line.get_ydata(), info.fci_energy)
    err = {ln.get_label(): ln for ln in ax_err.get_lines()}["UCCSD"].get_ydata()
    np.testing.assert_allclose(err, np.maximum(1e3 * np.abs(np.array(res.history) - info.fci_energy), 1e-9))
    band = ax_e.patches[0].get_path().get_extents().transformed(ax_e.patches[0].get_patch_transform())
    assert band.y0 == pytest.approx(info.fci_energy - 1.6e-3) and band.y1 == pytest.approx(info.fci_energy + 1.6e-3)


def test_dissociation_curve_from_the_bundled_scan(tmp_path):
    table = []
    circuit = chem.uccsd(4, 2, dtype=torch.complex128)
    for r, H, info in chem.load_scan("H2")[::7]:
        e = chem.vqe(H, circuit, steps=20, optimizer="lbfgs").energy
        table.append(dict(bond_length=r, hf=info.hf_energy, fci=info.fci_energy, vqe=e))
    path = tmp_path / "pes.png"
    fig = plotting.dissociation_curve(table[::-1], path=path)              # rows in any order
    assert_png(path)
    lines = {ln.get_label(): ln for ln in fig.axes[0].get_lines()}
    np.testing.assert_allclose(lines["FCI"].get_xdata(), [row["bond_length"] for row in table])
    np.testing.assert_allclose(lines["FCI"].get_ydata(), [row["fci"] for row in table])
    np.testing.assert_allclose(lines["Hartree–Fock"].get_ydata(), [row["hf"] for row in table])


def test_pes_scan_plot_goes_through_dissociation_curve(tmp_path):
    from lightning_tasks.vqe import plot_pes
    rows = [dict(bond_length=r, hf=i.hf_energy, fci=i.fci_energy, vqe=i.fci_energy)
            for r, _, i in chem.load_scan("H2")[:3]]
    assert plot_pes(rows, str(tmp_path / "p.png")) == str(tmp_path / "p.png")
    assert_png(tmp_path / "p.png")


# ------------------------------------------------------------------------------------------------
# QAOA histogram
def _brute_force_maxcut(edges, n):
    """All maximum cuts by enumerating the 2^n bitstrings in plain Python (wire 0 = leftmost bit)."""
    cuts = {}
    for bits in itertools.product("01", repeat=n):
        cuts["".join(bits)] = sum(bits[u] != bits[v] for u, v in edges)
    best = max(cuts.values())
    return best, sorted(b for b, c in cuts.items() if c == best)


@pytest.mark.parametrize("n_nodes,top", [(4, 32), (8, 20)])
def test_bitstring_histogram_highlights_the_brute_force_optima(tmp_path, n_nodes, top):
    edges = [(i, (i + 1) % n_nodes) for i in range(n_nodes)] + [(0, n_nodes // 2)]
    best_cut, optima = _brute_force_maxcut(edges, n_nodes)
    problem = opt.maxcut(edges)
    model = opt.qaoa(problem, 2)
    angles, costs = opt.optimize(model, opt.linear_ramp(2).float().unsqueeze(0), steps=30)
    probs = model.probabilities(angles[0]).reshape(-1).double()
    path = tmp_path / "hist.png"
    fig = plotting.bitstring_histogram(probs, opt.exact_solution(problem).bitstrings, top=top, path=path)
    assert_png(path)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    red = matplotlib.colors.to_rgba(plotting._OPTIMAL)
    shown_optimal = {ticks[round(b.get_x() + b.get_width() / 2)] for b in ax.patches if b.get_facecolor() == red}
    assert shown_optimal == {b for b in ticks if b in optima}
    heights = {ticks[round(b.get_x() + b.get_width() / 2)]: b.get_height() for b in ax.patches}
    for bits, h in heights.items():
        assert h == pytest.approx(float(probs[int(bits, 2)]), rel=1e-6)   # normalised to sum 1
    if 2 ** n_nodes <= top:
        assert ticks == [format(i, f"0{n_nodes}b") for i in range(2 ** n_nodes)]
    else:
        in_order = [heights[t] for t in ticks]
        assert len(ticks) == top and in_order == sorted(in_order, reverse=True)
    p_opt = sum(float(probs[int(b, 2)]) for b in optima)
    assert f"total P = {p_opt:.3f}" in ax.get_legend().get_texts()[-1].get_text()


# ------------------------------------------------------------------------------------------------
# decision boundary
def _circle_points(n=200, seed=0):
    X = np.random.default_rng(seed).uniform(-1, 1, (n, 2))
    return X, (np.linalg.norm(X, axis=1) > 0.7).astype(np.int64)


class RadiusModel(torch.nn.Module):
    """Logits of a classifier whose decision boundary is the circle of radius 0.7."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(8.0))

    def forward(self, x):
        z = self.scale * (x.norm(dim=1) - 0.7)
        return torch.stack([-z, z], dim=1)


def test_decision_boundary_contour_is_the_models_boundary(tmp_path):
    X, y = _circle_points()
    model = RadiusModel().train()
    path = tmp_path / "boundary.png"
    fig = plotting.decision_boundary(model, X, y, resolution=120, path=path)
    assert_png(path)
    assert model.training                                   # put back in train mode
    ax = fig.axes[0]
    contour = [c for c in ax.collections if list(getattr(c, "levels", [])) == [0.5]]
    assert len(contour) == 1
    vertices = np.concatenate([p.vertices for p in contour[0].get_paths() if len(p.vertices)])
    radii = np.linalg.norm(vertices, axis=1)
    step = (X.max() - X.min()) * 1.3 / 119
    assert np.all(np.abs(radii - 0.7) < step), (radii.min(), radii.max())
    assert "accuracy 1.000 on 200 points" in ax.get_title()


def test_decision_boundary_multiclass_and_probability_models(tmp_path):
    X, y = _circle_points(120, seed=1)
    quadrant = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)

    def three_class(x):
        s = (x[:, 0] > 0).double() + (x[:, 1] > 0).double()
        return torch.stack([-(s - 0) ** 2, -(s - 1) ** 2, -(s - 2) ** 2], dim=1) * 10

    plotting.decision_boundary(three_class, X, quadrant, path=tmp_path / "three.png")
    assert_png(tmp_path / "three.png")
    # a model returning P(class 1) directly, as examples/hybrid_classifier.py's Paddle model does
    fig = plotting.decision_boundary(lambda x: (x.norm(dim=1) > 0.7).float(), X, y, extent=(-1, 1, -1, 1),
                                     path=tmp_path / "p1.png")
    assert_png(tmp_path / "p1.png")
    assert "accuracy 1.000" in fig.axes[0].get_title()
    assert fig.axes[0].get_xlim() == (-1.0, 1.0)


# ------------------------------------------------------------------------------------------------
# errors
def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="vqe_convergence: history 'VQE': the sequence is empty"):
        plotting.vqe_convergence([], -1.0)
    with pytest.raises(ValueError, match="vqe_convergence: history 'a': contains NaN or inf"):
        plotting.vqe_convergence({"a": [1.0, math.nan]}, -1.0)
    with pytest.raises(ValueError, match="dissociation_curve: row 1 has no vqe"):
        plotting.dissociation_curve([dict(bond_length=1, hf=0, fci=0, vqe=0), dict(bond_length=2, hf=0, fci=0)])
    with pytest.raises(ValueError, match="bitstring_histogram: expected 2\\*\\*n probabilities, got 3"):
        plotting.bitstring_histogram([0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="optimal bitstring '101' must have 2 characters"):
        plotting.bitstring_histogram([0.25] * 4, ["101"])
    with pytest.raises(ValueError, match="must be non-negative"):
        plotting.bitstring_histogram([0.5, -0.1, 0.3, 0.3])
    with pytest.raises(ValueError, match="decision_boundary: X must have shape \\(N, 2\\), got \\(4, 3\\)"):
        plotting.decision_boundary(RadiusModel(), np.zeros((4, 3)), np.zeros(4))
    with pytest.raises(ValueError, match="mapped 4 points to shape \\(4, 2, 2\\)"):
        plotting.decision_boundary(lambda x: torch.zeros(len(x), 2, 2), np.random.rand(4, 2), np.zeros(4),
                                   resolution=2)


def test_without_matplotlib_every_figure_names_the_plot_extra(monkeypatch):
    from lightning_tasks.vqe import plot_pes
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)           # import matplotlib now fails
    assert not plotting.available()
    calls = {"vqe_convergence": lambda: plotting.vqe_convergence([1.0, 0.5], 0.4),
             "dissociation_curve": lambda: plotting.dissociation_curve([dict(bond_length=1, hf=0, fci=0, vqe=0)]),
             "bitstring_histogram": lambda: plotting.bitstring_histogram([0.5, 0.5]),
             "decision_boundary": lambda: plotting.decision_boundary(RadiusModel(), np.random.rand(4, 2),
                                                                     np.zeros(4, dtype=int)),
             "circuit.draw\\('mpl'\\)": lambda: _sample_circuit().draw("mpl")}
    for what, call in calls.items():
        with pytest.raises(ImportError, match=what + r" needs matplotlib: pip install 'torchquantum-layers\[plot\]'"):
            call()
    with pytest.warns(UserWarning, match="no plot written"):
        assert plot_pes([dict(bond_length=1, hf=0, fci=0, vqe=0)], "never.png") is None


def test_png_check_rejects_a_blank_figure(tmp_path):
    from matplotlib.figure import Figure
    Figure(figsize=(3, 2)).savefig(tmp_path / "blank.png")
    with pytest.raises(AssertionError, match="one colour"):
        assert_png(tmp_path / "blank.png")
    (tmp_path / "fake.png").write_bytes(b"GIF89a" + bytes(100))
    with pytest.raises(AssertionError, match="is not a PNG"):
        assert_png(tmp_path / "fake.png")
