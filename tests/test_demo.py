"""``tql demo`` (lightning_tasks/demo.py) in quick mode, in process: every row is a finite number
against a reference recomputed here independently where that is cheap (dense diagonalisation of the
bundled H2 Hamiltonians, a plain-Python brute force over the Petersen graph's cuts), and every figure
it reports is a real PNG."""
import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

import torchquantum_layers.chem as chem
from lightning_tasks.demo import PETERSEN_EDGES, DemoRow, exit_status, format_table, run_demo

from . import oracle as O

NAMES = ("VQE H2", "H2 dissociation", "QAOA MaxCut", "Hybrid classifier", "VQE LiH")
LETTER = {(0, 0): "I", (1, 0): "X", (0, 1): "Z", (1, 1): "Y"}


def dense_ground_energy(H, n):
    """Lowest eigenvalue of the Hamiltonian built term by term from NumPy Kronecker products."""
    M = np.zeros((2 ** n, 2 ** n), dtype=np.complex128)
    for c, p in H.terms:
        letters = [LETTER[((p.x_mask >> w) & 1, (p.z_mask >> w) & 1)] for w in range(n)]
        M += c * O.kron(*[O.PAULI[ch] for ch in letters])
    return float(np.linalg.eigvalsh(M)[0])


def petersen_max_cut():
    return max(sum(b[u] != b[v] for u, v in PETERSEN_EDGES) for b in itertools.product((0, 1), repeat=10))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    return out, run_demo(["--quick", "--out", str(out), "--no-progress"])


def test_quick_demo_rows_match_independent_references(quick, capsys):
    out, rows = quick
    assert [r.name.split(" (")[0].split(",")[0] for r in rows] == [
        "VQE H2", "H2 dissociation curve", "QAOA MaxCut", "Hybrid classifier", "VQE LiH"]
    by = {name: r for name, r in zip(NAMES, rows)}
    for r in rows:
        assert isinstance(r, DemoRow) and r.status in ("ok", "quick"), (r.name, r.status, r.note)
        assert all(math.isfinite(v) for v in (r.result, r.reference, r.error, r.target, r.time_s)), r
        assert r.error == pytest.approx(abs(r.result - r.reference), abs=1e-12)
        assert r.status == ("ok" if r.error <= r.target else "quick")        # a quick miss is no failure
    assert exit_status(rows) == 0

    H, info = chem.load("H2")
    h2 = by["VQE H2"]
    assert h2.reference == pytest.approx(dense_ground_energy(H, 4), abs=1e-8)      # FCI = exact ground energy
    assert h2.result >= h2.reference - 1e-9                                          # variational bound
    assert h2.result < info.hf_energy                                                # some steps did something

    pes = by["H2 dissociation"]
    r = pes.details["bond_length"]
    (_, H_r, _), = [s for s in chem.load_scan("H2") if abs(s[0] - r) < 1e-9]
    assert pes.reference == pytest.approx(dense_ground_energy(H_r, 4), abs=1e-8)
    assert pes.result >= pes.reference - 1e-9

    qaoa = by["QAOA MaxCut"]
    assert qaoa.reference == petersen_max_cut() == 12
    assert 0 < qaoa.result <= qaoa.reference
    assert qaoa.details["approximation_ratio"] == pytest.approx(qaoa.result / 12, rel=1e-5)

    clf = by["Hybrid classifier"]
    assert clf.reference == 1.0 and 0.5 <= clf.result <= 1.0                        # better than chance

    lih = by["VQE LiH"]
    _, lih_info = chem.load("LiH")
    assert lih.reference == pytest.approx(lih_info.fci_energy)
    assert lih_info.fci_energy - 1e-9 <= lih.result <= lih_info.hf_energy + 1e-9

    expected = {"h2_vqe_convergence.png", "h2_uccsd_circuit.png", "h2_dissociation.png",
                "qaoa_maxcut_histogram.png", "classifier_decision_boundary.png", "lih_vqe_convergence.png"}
    plots = [p for r in rows for p in r.plots]
    assert {p.rsplit("/", 1)[-1] for p in plots} == expected
    from .pngcheck import assert_png
    pytest.importorskip("matplotlib")
    for p in plots:
        assert p.startswith(str(out))
        assert_png(p)


def test_summary_table_lists_every_run_and_figure(quick):
    out, rows = quick
    table = format_table(rows)
    for r in rows:
        assert r.name in table
    for p in (p for r in rows for p in r.plots):
        assert p in table
    assert table.splitlines()[0].split() == ["run", "result", "reference", "error", "target", "unit", "time", "status"]


def test_lih_is_skipped_with_the_reason_and_no_plots_means_none(tmp_path, capsys):
    out = tmp_path / "never"
    rows = run_demo(["--quick", "--no-plots", "--no-progress", "--budget", "0", "--out", str(out)])
    lih = rows[-1]
    assert lih.status == "skipped" and "budget" in lih.note and math.isnan(lih.result)
    assert all(not r.plots for r in rows) and not out.exists()
    printed = capsys.readouterr().out
    assert "skipped" in printed and "figures:" not in printed


def test_skip_lih_flag_and_module_entry_point():
    from lightning_tasks import demo
    ctx = demo._Context(demo.build_parser().parse_args(["--skip-lih", "--no-progress"]))
    row = demo.vqe_lih(ctx)
    assert row.status == "skipped" and row.note == "--skip-lih" and not row.plots
    proc = subprocess.run([sys.executable, "-m", "lightning_tasks.demo", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "tql demo" in proc.stdout and "--skip-lih" in proc.stdout
    with pytest.raises(SystemExit):
        run_demo(["--no-such-option"])


def test_exit_status_fails_only_on_a_missed_target():
    rows = [DemoRow("a", "Ha", result=1.0, reference=1.05, target=0.1).judge(), DemoRow("b", "Ha", note="why")]
    assert [r.status for r in rows] == ["ok", "skipped"] and exit_status(rows) == 0
    rows.append(DemoRow("c", "Ha", result=1.0, reference=2.0, target=0.1).judge(quick=True))
    assert rows[-1].status == "quick" and exit_status(rows) == 0
    rows.append(DemoRow("d", "Ha", result=1.0, reference=2.0, target=0.1).judge())
    assert rows[-1].status == "missed" and rows[-1].error == 1.0 and exit_status(rows) == 1
    assert "why" in format_table(rows) and "missed" in format_table(rows)


def test_bad_threads_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        run_demo(["--threads", "0", "--no-progress", "--no-plots"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--threads: must be >= 1, got 0" in err and "Traceback" not in err
