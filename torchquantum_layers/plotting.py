"""Figures for the flagship applications (needs the ``plot`` extra: ``pip install 'torchquantum-layers[plot]'``).

Each function takes plain data and returns a :class:`matplotlib.figure.Figure`; ``path=`` also
saves it as a PNG (parent folders are created). Figures are built without ``pyplot``, so they
work on any backend (no display needed) and never pile up in pyplot's global figure list.

* :func:`vqe_convergence` — energy against optimizer step, the reference (FCI) line and the
  chemical-accuracy band; the error on a log scale beside it.
* :func:`dissociation_curve` — a potential-energy scan (HF, FCI, VQE) and the VQE error per point.
* :func:`bitstring_histogram` — probabilities of bitstrings (QAOA), the optimal ones highlighted.
* :func:`decision_boundary` — a 2-feature classifier's decision regions with the data on top.

Circuit diagrams are ``circuit.draw("mpl")`` (:mod:`torchquantum_layers.drawing`).
"""
from __future__ import annotations

import math
import numbers
import os
from typing import Mapping, Optional, Sequence, Union

import numpy as np
import torch

__all__ = ["vqe_convergence", "dissociation_curve", "bitstring_histogram", "decision_boundary", "available",
           "require_matplotlib", "new_figure", "save_figure", "CHEMICAL_ACCURACY"]

CHEMICAL_ACCURACY = 1.6e-3      # Ha (1 kcal/mol), as tql.chem.CHEMICAL_ACCURACY
_OPTIMAL, _OTHER, _BAND = "#d62728", "#7f9fbf", "#2ca02c"


def available() -> bool:
    """Whether matplotlib (the ``plot`` extra) can be imported."""
    try:
        require_matplotlib("plotting")
    except ImportError:
        return False
    return True


def require_matplotlib(what: str):
    """Import matplotlib or raise an ImportError that names ``what`` and the ``plot`` extra."""
    try:
        import matplotlib
        import matplotlib.figure  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"{what} needs matplotlib: pip install 'torchquantum-layers[plot]'") from exc
    return matplotlib


def new_figure(what: str, figsize=(6.4, 4.0)):
    """A pyplot-free Figure (``what`` names the caller in the ImportError without matplotlib)."""
    require_matplotlib(what)
    from matplotlib.figure import Figure
    return Figure(figsize=figsize, layout="constrained")


def save_figure(fig, path, dpi: int = 120):
    """Save ``fig`` as a PNG at ``path`` (creating its folder) and return the figure."""
    if path is not None:
        folder = os.path.dirname(os.fspath(path))
        if folder:
            os.makedirs(folder, exist_ok=True)
        fig.savefig(path, dpi=dpi, format="png")
    return fig


def _series(values, what: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    try:
        a = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: expected a sequence of numbers, got {type(values).__name__}") from None
    if a.size == 0:
        raise ValueError(f"{what}: the sequence is empty")
    if not np.isfinite(a).all():
        raise ValueError(f"{what}: contains NaN or inf (first at position {int(np.argmin(np.isfinite(a)))})")
    return a


def _number(v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, torch.Tensor, np.floating)):
        raise TypeError(f"{what} must be a number, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{what} must be finite, got {v}")
    return v


# ------------------------------------------------------------------------------------------------
def vqe_convergence(histories: Union[Sequence[float], Mapping[str, Sequence[float]]], reference: float, *,
                    hf_energy: Optional[float] = None, accuracy: float = CHEMICAL_ACCURACY,
                    reference_label: str = "FCI", title: Optional[str] = None, path=None,
                    xlabel: str = "optimizer step"):
    """Energy (Ha) against optimizer step, with the reference line and the ±``accuracy`` band
    (chemical accuracy, 1.6 mHa) on the left and ``|E − reference|`` in mHa on a log scale on the
    right.

    ``histories``: one sequence of energies (entry k after k optimizer steps, as
    ``VQETask.history`` or ``tql.chem.vqe(...).history``), or ``{label: sequence}`` for several
    runs. ``hf_energy`` adds the Hartree–Fock line. ``xlabel`` names the x axis (e.g.
    ``"operators appended"`` for ``adapt_vqe(...).energies``).
    """
    what = "vqe_convergence"
    require_matplotlib(what)
    runs = dict(histories) if isinstance(histories, Mapping) else {"VQE": histories}
    if not runs:
        raise ValueError(f"{what}: no histories given")
    runs = {str(k): _series(v, f"{what}: history {k!r}") for k, v in runs.items()}
    ref = _number(reference, f"{what}: reference")
    acc = _number(accuracy, f"{what}: accuracy")
    if acc <= 0:
        raise ValueError(f"{what}: accuracy must be positive, got {acc}")
    fig = new_figure(what, figsize=(10, 4))
    ax_e, ax_err = fig.subplots(1, 2)
    longest = max(len(v) for v in runs.values())
    ax_e.axhspan(ref - acc, ref + acc, color=_BAND, alpha=0.2, label=f"chemical accuracy (±{1e3 * acc:g} mHa)")
    ax_e.axhline(ref, color="black", lw=1.2, label=f"{reference_label} {ref:.6f} Ha")
    if hf_energy is not None:
        hf = _number(hf_energy, f"{what}: hf_energy")
        ax_e.axhline(hf, color="gray", ls="--", lw=1, label=f"Hartree–Fock {hf:.6f} Ha")
    for label, e in runs.items():
        steps = np.arange(len(e))
        ax_e.plot(steps, e, "-", lw=1.6, label=label)
        # an exact zero error has no place on a log axis: floor it at 1e-9 mHa
        ax_err.semilogy(steps, np.maximum(np.abs(e - ref) * 1e3, 1e-9), "-", lw=1.6, label=label)
    ax_err.axhspan(1e-9, 1e3 * acc, color=_BAND, alpha=0.15)
    ax_err.axhline(1e3 * acc, color=_BAND, lw=1.2, label="chemical accuracy")
    ax_e.set(xlabel=str(xlabel), ylabel="energy (Ha)", xlim=(0, max(1, longest - 1)))
    ax_err.set(xlabel=str(xlabel), ylabel=f"|E − {reference_label}| (mHa)", xlim=(0, max(1, longest - 1)))
    lo = min(float(np.maximum(np.abs(e - ref) * 1e3, 1e-9).min()) for e in runs.values())
    ax_err.set_ylim(max(1e-9, lo / 3), None)
    ax_e.legend(fontsize=8)
    ax_err.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------------
_PES_KEYS = ("bond_length", "hf", "fci", "vqe")


def dissociation_curve(table: Sequence[Mapping], *, accuracy: float = CHEMICAL_ACCURACY,
                       title: Optional[str] = None, path=None):
    """A potential-energy scan: Hartree–Fock, FCI and VQE energies (Ha) against bond length (Å)
    on top, ``|VQE − FCI|`` (mHa, log scale) with the chemical-accuracy line below.

    ``table``: rows with keys ``bond_length``, ``hf``, ``fci``, ``vqe`` (the rows of
    ``lightning_tasks.pes_scan``).
    """
    what = "dissociation_curve"
    require_matplotlib(what)
    if isinstance(table, Mapping) or not isinstance(table, Sequence) or not table:
        raise ValueError(f"{what}: expected a non-empty list of rows with keys {', '.join(_PES_KEYS)}")
    cols = {k: [] for k in _PES_KEYS}
    for i, row in enumerate(table):
        if not isinstance(row, Mapping):
            raise TypeError(f"{what}: row {i} is a {type(row).__name__}, expected a dict with keys "
                            f"{', '.join(_PES_KEYS)}")
        missing = [k for k in _PES_KEYS if k not in row]
        if missing:
            raise ValueError(f"{what}: row {i} has no {', '.join(missing)} (keys: {', '.join(map(str, row))})")
        for k in _PES_KEYS:
            cols[k].append(_number(row[k], f"{what}: row {i} {k}"))
    order = np.argsort(cols["bond_length"])
    r, hf, fci, vqe = (np.asarray(cols[k])[order] for k in _PES_KEYS)
    acc = _number(accuracy, f"{what}: accuracy")
    fig = new_figure(what, figsize=(6.4, 6.0))
    ax, ax_err = fig.subplots(2, 1, sharex=True, height_ratios=(2.2, 1))
    ax.plot(r, hf, "--", color="gray", label="Hartree–Fock")
    ax.plot(r, fci, "-", color="black", label="FCI")
    ax.plot(r, vqe, "o", color="#1f77b4", ms=5, label="VQE")
    ax.set_ylabel("energy (Ha)")
    ax.legend()
    ax_err.semilogy(r, np.maximum(np.abs(vqe - fci) * 1e3, 1e-9), "o-", color="#1f77b4", ms=4)
    ax_err.axhline(1e3 * acc, color=_BAND, lw=1.2, label="chemical accuracy")
    ax_err.set(xlabel="bond length (Å)", ylabel="|VQE − FCI| (mHa)")
    ax_err.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------------
def _optimal_indices(optimal, n: int, what: str) -> set:
    out = set()
    for o in optimal:
        if isinstance(o, str):
            if len(o) != n or set(o) - {"0", "1"}:
                raise ValueError(f"{what}: optimal bitstring {o!r} must have {n} characters 0/1 (wire 0 first)")
            out.add(int(o, 2))
        elif isinstance(o, (numbers.Integral, torch.Tensor, np.integer)) and not isinstance(o, bool):
            i = int(o)
            if not 0 <= i < 2 ** n:
                raise ValueError(f"{what}: optimal index {i} is out of range [0, 2**{n})")
            out.add(i)
        else:
            raise TypeError(f"{what}: optimal entries must be bitstrings or basis indices, got {o!r}")
    return out


def bitstring_histogram(probabilities, optimal=(), *, top: int = 32, title: Optional[str] = None, path=None):
    """Bar chart of bitstring probabilities with the optimal bitstrings highlighted.

    ``probabilities``: ``(2**n,)`` probabilities (or counts; they are normalised), wire 0 the
    leftmost bit. ``optimal``: bitstrings or basis indices (e.g. ``exact_solution(p).bitstrings``).
    With at most ``top`` bitstrings all are shown in index order; otherwise the ``top`` most
    probable, most probable first. The legend gives the total probability of the optima.
    """
    what = "bitstring_histogram"
    require_matplotlib(what)
    p = _series(probabilities, f"{what}: probabilities")
    n = int(round(math.log2(p.size))) if p.size > 0 else 0
    if 2 ** n != p.size:
        raise ValueError(f"{what}: expected 2**n probabilities, got {p.size}")
    if (p < 0).any():
        raise ValueError(f"{what}: probabilities must be non-negative (entry {int(np.argmin(p))} is {p.min():g})")
    if p.sum() <= 0:
        raise ValueError(f"{what}: the probabilities sum to 0")
    p = p / p.sum()
    if isinstance(top, bool) or not isinstance(top, numbers.Integral) or top < 1:
        raise ValueError(f"{what}: top must be a positive int, got {top!r}")
    opt = _optimal_indices(optimal if not isinstance(optimal, str) else [optimal], n, what)
    shown = np.arange(p.size) if p.size <= top else np.argsort(-p, kind="stable")[:top]
    is_opt = np.array([int(i) in opt for i in shown], dtype=bool)
    fig = new_figure(what, figsize=(max(5.0, 0.28 * len(shown) + 1.5), 4.0))
    ax = fig.subplots()
    x = np.arange(len(shown))
    p_opt = float(sum(p[i] for i in opt))
    ax.bar(x[~is_opt], p[shown][~is_opt], color=_OTHER, label="other bitstrings")
    if opt:
        ax.bar(x[is_opt], p[shown][is_opt], color=_OPTIMAL,
               label=f"optimal ({len(opt)} bitstring{'s' if len(opt) != 1 else ''}, total P = {p_opt:.3f})")
    ax.set_xticks(x, [format(int(i), f"0{n}b") for i in shown], rotation=90, family="monospace",
                  fontsize=8 if n <= 8 else 7)
    ax.set_ylabel("probability")
    ax.set_xlim(-0.6, len(shown) - 0.4)
    if p.size > top:
        ax.set_xlabel(f"the {top} most probable of {p.size} bitstrings")
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------------
def _model_probabilities(model, points: np.ndarray, what: str) -> np.ndarray:
    """Class probabilities ``(M, C)`` from a model returning logits ``(M, C)`` or P(class 1) ``(M,)``."""
    dtype, device = torch.float32, torch.device("cpu")
    if isinstance(model, torch.nn.Module):
        for t in list(model.parameters()) + list(model.buffers()):
            if t.is_floating_point():
                dtype, device = t.dtype, t.device
                break
    was_training = getattr(model, "training", None)
    if was_training:
        model.eval()
    try:
        with torch.no_grad():
            out = model(torch.as_tensor(points, dtype=dtype, device=device))
    finally:
        if was_training:
            model.train()
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{what}: the model returned {type(out).__name__}, expected a tensor")
    out = out.detach().to("cpu", torch.float64)
    if out.dim() == 2 and out.shape[1] == 1:
        out = out[:, 0]
    if out.dim() == 1 and out.shape[0] == len(points):
        p1 = out.clamp(0, 1)
        return torch.stack([1 - p1, p1], dim=1).numpy()
    if out.dim() == 2 and out.shape[0] == len(points) and out.shape[1] >= 2:
        return torch.softmax(out, dim=1).numpy()
    raise ValueError(f"{what}: the model mapped {len(points)} points to shape {tuple(out.shape)}; expected "
                     f"logits ({len(points)}, n_classes) or probabilities ({len(points)},)")


def decision_boundary(model, X, y, *, resolution: int = 150, margin: float = 0.15, extent=None,
                      class_names: Optional[Sequence[str]] = None, title: Optional[str] = None, path=None):
    """Decision regions of a classifier of 2 features, with the points ``X`` coloured by ``y``.

    ``model`` maps a float tensor ``(M, 2)`` to logits ``(M, n_classes)`` (softmax gives the class
    probabilities) or to P(class 1) ``(M,)``; it runs in eval mode under ``torch.no_grad`` on the
    device and dtype of its parameters. Two classes: the colour is P(class 1) and the black line
    the 0.5 contour (the decision boundary); more classes: the predicted class. The title reports
    the model's accuracy on ``(X, y)``.

    The grid covers the data plus ``margin`` (a fraction of its range) on each side, or
    ``extent=(x0_min, x0_max, x1_min, x1_max)`` (for models defined on a bounded domain only).
    """
    what = "decision_boundary"
    require_matplotlib(what)      # before the model runs on the grid
    Xa = X.detach().cpu().numpy() if isinstance(X, torch.Tensor) else np.asarray(X)
    ya = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    if Xa.ndim != 2 or Xa.shape[1] != 2:
        raise ValueError(f"{what}: X must have shape (N, 2), got {Xa.shape}")
    if ya.shape != (Xa.shape[0],):
        raise ValueError(f"{what}: y must have shape ({Xa.shape[0]},), got {ya.shape}")
    if isinstance(resolution, bool) or not isinstance(resolution, numbers.Integral) or resolution < 2:
        raise ValueError(f"{what}: resolution must be an int >= 2, got {resolution!r}")
    Xa = Xa.astype(np.float64)
    ya = ya.astype(np.int64)
    if extent is None:
        lo, hi = Xa.min(axis=0), Xa.max(axis=0)
        pad = margin * np.maximum(hi - lo, 1e-6)
        box = (lo[0] - pad[0], hi[0] + pad[0], lo[1] - pad[1], hi[1] + pad[1])
    else:
        box = tuple(_number(v, f"{what}: extent") for v in extent) if len(extent) == 4 else None
        if box is None or not (box[0] < box[1] and box[2] < box[3]):
            raise ValueError(f"{what}: extent must be (x0_min, x0_max, x1_min, x1_max) with min < max, "
                             f"got {tuple(extent)}")
    gx = np.linspace(box[0], box[1], resolution)
    gy = np.linspace(box[2], box[3], resolution)
    xx, yy = np.meshgrid(gx, gy)
    grid = np.stack([xx.ravel(), yy.ravel()], axis=1)
    probs = _model_probabilities(model, grid, what)
    n_classes = max(probs.shape[1], int(ya.max()) + 1)
    accuracy = float((_model_probabilities(model, Xa, what).argmax(1) == ya).mean())
    fig = new_figure(what, figsize=(5.6, 4.8))
    ax = fig.subplots()
    import matplotlib.colors as mcolors
    if probs.shape[1] == 2:
        cs = ax.contourf(xx, yy, probs[:, 1].reshape(xx.shape), levels=np.linspace(0, 1, 11), cmap="RdBu_r",
                         alpha=0.5)
        ax.contour(xx, yy, probs[:, 1].reshape(xx.shape), levels=[0.5], colors="black", linewidths=1.5)
        fig.colorbar(cs, ax=ax, label="P(class 1)")
        point_cmap = mcolors.ListedColormap(["#08306b", "#67000d"])
    else:
        cmap = mcolors.ListedColormap([f"C{k}" for k in range(n_classes)])
        ax.contourf(xx, yy, probs.argmax(1).reshape(xx.shape), levels=np.arange(n_classes + 1) - 0.5, cmap=cmap,
                    alpha=0.35)
        point_cmap = cmap
    names = list(class_names) if class_names is not None else [f"class {k}" for k in range(n_classes)]
    markers = "o^sDvP*X"
    for k in np.unique(ya):
        sel = ya == k
        ax.scatter(Xa[sel, 0], Xa[sel, 1], s=26, marker=markers[int(k) % len(markers)],
                   color=point_cmap(int(k) % point_cmap.N), edgecolors="white", linewidths=0.8,
                   label=names[int(k)] if int(k) < len(names) else f"class {k}")
    ax.set(xlim=(gx[0], gx[-1]), ylim=(gy[0], gy[-1]), xlabel="feature 0", ylabel="feature 1")
    ax.set_aspect("equal")
    # below the axes: inside, it would hide points wherever it went
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=min(len(np.unique(ya)), 5))
    ax.set_title(f"{title + chr(10) if title else ''}accuracy {accuracy:.3f} on {len(ya)} points", fontsize=10)
    return save_figure(fig, path)
