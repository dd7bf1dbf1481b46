"""Circuit pictures: text always, matplotlib with the ``plot`` extra."""
from __future__ import annotations

from typing import Optional

from . import gates as G


def _angle_text(circuit, a, values: bool = False) -> str:
    """``w<index>`` for a trainable angle (its value with ``values``), ``x<column>`` for an input."""
    from .circuit import Input, Param
    if isinstance(a, Param):
        if values:
            return f"{a.scale * float(circuit.weights.detach()[a.index]):.3g}"
        return f"w{a.index}" if a.scale == 1 else f"{a.scale:g}*w{a.index}"
    if isinstance(a, Input):
        return f"x{a.column}" if a.scale == 1 else f"{a.scale:g}*x{a.column}"
    return f"{a:.3g}"


def _label(circuit, op):
    parts = [_angle_text(circuit, a) for a in op.angles]
    name = op.gate.name + ("†" if op.adjoint and not op.gate.self_inverse else "")
    return name + (f"({', '.join(parts)})" if parts else "")


class _Mark:
    """A channel, measurement or reset of a MixedCircuit, drawn as a labelled box."""

    def __init__(self, wires, text):
        self.wires, self.text = tuple(wires), text


def _items(circuit) -> list:
    """The ops with a MixedCircuit's instructions at their places (an instruction at position i
    comes before ops[i]), as (item, wires read as 0) pairs.

    A gate conditioned on a wire reading 0 is stored as the gate conditioned on 1 between two
    "flip" instructions on that wire (see MixedCircuit.add); those flips are not drawn, the
    condition wire is drawn as reading 0 instead. The flips on a wire at position i are the
    after-flip of ops[i - 1] (when it read the wire as 0), then the before-flip of ops[i]."""
    at: dict = {}
    flips: dict = {}
    for pos, inst in getattr(circuit, "instructions", ()):
        if getattr(inst, "condition_flip", False):
            for w in inst.wires:
                flips[(pos, w)] = flips.get((pos, w), 0) + 1
            continue
        at.setdefault(pos, []).append(_Mark(inst.wires, inst.label))
    out = []
    previous = frozenset()
    for i in range(len(circuit.ops) + 1):
        out += [(m, frozenset()) for m in at.get(i, [])]
        if i < len(circuit.ops):
            op = circuit.ops[i]
            condition = G.condition_of(op.gate)
            reads = op.wires[:condition[0]] if condition else ()
            zeros = frozenset(w for w in reads if flips.get((i, w), 0) - (w in previous) >= 1)
            out.append((op, zeros))
            previous = zeros
    return out


def _layers(circuit):
    """Greedy columns: an op goes one column right of the last op on any wire it spans."""
    return [[item for item, _ in column] for column in _columns(circuit)]


def _columns(circuit):
    """The columns of :func:`_layers` as (item, wires read as 0) pairs of :func:`_items`."""
    level = [0] * circuit.n_wires
    columns = []
    for op, zeros in _items(circuit):
        lo, hi = min(op.wires), max(op.wires)
        col = max(level[w] for w in range(lo, hi + 1))
        if col == len(columns):
            columns.append([])
        columns[col].append((op, zeros))
        for w in range(lo, hi + 1):
            level[w] = col + 1
    return columns


MAX_WIDTH = 100
"""Characters per line of the text drawing; wider circuits fold into blocks (as PennyLane's
``max_length``), the lines of a folded block ending in ``»`` and those of the next starting with ``«``."""


def draw_text(circuit, max_width: Optional[int] = MAX_WIDTH) -> str:
    """The text drawing ``print(circuit)`` shows; ``max_width=None`` never folds."""
    if max_width is not None and (isinstance(max_width, bool) or not isinstance(max_width, int) or max_width < 1):
        raise ValueError(f"draw_text: max_width must be a positive int or None, got {max_width!r}")
    n = circuit.n_wires
    heads = [f"q{w}: " for w in range(n)]
    width0 = max(len(r) for r in heads)
    heads = [r.ljust(width0) for r in heads]
    blocks = []                       # per block, per wire: the cells of its columns
    rows = [""] * n
    for column in _columns(circuit):
        cells = ["─"] * n
        for op, zeros in column:
            lo, hi = min(op.wires), max(op.wires)
            for w in range(lo, hi + 1):
                cells[w] = "│"
            if isinstance(op, _Mark):
                for i, w in enumerate(op.wires):
                    cells[w] = op.text if len(op.wires) == 1 else f"{op.text}[{i}]"
                continue
            g = op.gate
            label = _label(circuit, op)
            if g.n_controls:
                condition = G.condition_of(g)
                for i, w in enumerate(op.wires[:g.n_controls]):
                    # ◉ / ○: a measured wire read as 1 / 0
                    cells[w] = ("○" if w in zeros else "◉") if condition and i < condition[0] else "●"
                tgt = op.wires[g.n_controls:]
                inner = g.target.name + label[len(g.name):]
                for w in tgt:
                    cells[w] = "X" if g.target.name == "X" else inner
            elif g.name == "MULTICONTROLLEDX":
                for w in op.wires[:-1]:
                    cells[w] = "●"
                cells[op.wires[-1]] = "X"
            elif len(op.wires) == 1:
                cells[op.wires[0]] = label
            else:
                for i, w in enumerate(op.wires):
                    cells[w] = f"{label}[{i}]"
        width = max(len(c) for c in cells) + 2
        # room for the head, "«" / "»" and the closing "─"
        if max_width is not None and rows[0] and width0 + 3 + len(rows[0]) + width > max_width:
            blocks.append(rows)
            rows = [""] * n
        for w in range(n):
            rows[w] += ("─" + cells[w]).ljust(width, "─")
    blocks.append(rows)
    lines = []
    for b, block in enumerate(blocks):
        if b:
            lines.append("")
        for w in range(n):
            lines.append(heads[w] + ("«" if b else "") + block[w] + "─" + ("»" if b + 1 < len(blocks) else ""))
    noise = getattr(circuit, "noise_model", None)
    if noise is not None:
        lines.append(f"noise after gates: {noise!r}")
    return "\n".join(lines)


# short names where the table's name would make a box several columns wide (as PennyLane draws them)
_SHORT = {"SINGLEEXCITATION": "G", "DOUBLEEXCITATION": "G²", "QUBITUNITARY": "U", "DIAGONALUNITARY": "Diag",
          "MULTIRZ": "MultiRZ"}
_CHAR_W = 0.13          # width of one label character in wire spacings (9 pt text, 0.6 in per wire)
_DOT = 0.09             # radius of a control dot
_OPLUS = 0.2            # radius of the ⊕ target


def _mpl_label(circuit, op, values: bool) -> str:
    """A box's label: the (target) gate's name, short where the table's is long, and its angles."""
    if isinstance(op, _Mark):
        return op.text
    g = op.gate
    base = g.target.name if g.n_controls else g.name
    name = _SHORT.get(base, base) + ("†" if op.adjoint and not g.self_inverse else "")
    parts = [_angle_text(circuit, a, values) for a in op.angles]
    return name + (f"({', '.join(parts)})" if parts else "")


def _parts(op):
    """(control wires, target wires, target kind) with kind "x" (⊕), "z" (dot), "swap" (×) or "box"."""
    if isinstance(op, _Mark):
        return (), op.wires, "box"
    g = op.gate
    if g.n_controls:
        controls, targets, tname = op.wires[:g.n_controls], op.wires[g.n_controls:], g.target.name
    elif g.name == "MULTICONTROLLEDX":
        controls, targets, tname = op.wires[:-1], op.wires[-1:], "X"
    else:
        controls, targets, tname = (), op.wires, g.name
    kind = {"X": "x", "Z": "z", "SWAP": "swap"}.get(tname, "box")
    if kind == "x" and len(targets) != 1:
        kind = "box"
    if not controls and kind in ("x", "z"):
        kind = "box"                     # a plain X or Z gate is a labelled box
    return controls, targets, kind


def _column_widths(circuit, columns, values):
    widths = []
    for column in columns:
        w = 0.6
        for op, _ in column:
            if _parts(op)[2] == "box":
                w = max(w, _CHAR_W * len(_mpl_label(circuit, op, values)) + 0.3)
        widths.append(w)
    return widths


def draw_mpl(circuit, ax=None, path=None, filename=None, show_values: bool = False, fontsize: float = 9):
    """A matplotlib figure of the circuit (needs the ``plot`` extra); returns the Figure.

    Wires are horizontal lines (wire 0 on top), gates labelled boxes in the columns of the text
    drawing; controlled gates have a dot on each control and ⊕ on an X target (a dot on a Z
    target, × on SWAP targets). Fixed angles are printed as numbers, trainable ones as
    ``w<index>`` (``show_values=True``: their current values) and input angles as ``x<column>``.
    ``path`` (or ``filename``) saves a PNG; ``ax`` draws into an existing Axes.
    """
    from .plotting import new_figure, require_matplotlib, save_figure
    require_matplotlib("circuit.draw('mpl')")
    from matplotlib.patches import Circle, FancyBboxPatch
    columns = _columns(circuit)
    n = circuit.n_wires
    widths = _column_widths(circuit, columns, show_values)
    gap = 0.35
    centres, x = [], gap
    for w in widths:
        centres.append(x + w / 2)
        x += w + gap
    total = x
    if ax is None:
        # 0.6 inch per wire spacing keeps 9 pt labels inside their boxes (see _CHAR_W)
        fig = new_figure("circuit.draw('mpl')", figsize=(0.6 * (total + 1.0), 0.6 * (n + 0.4)))
        ax = fig.add_subplot()
    fig = ax.figure
    for w in range(n):
        ax.plot([0, total], [-w, -w], color="black", lw=1, zorder=0)
        ax.text(-0.15, -w, f"q{w}", ha="right", va="center", fontsize=fontsize)
    box_style = dict(boxstyle="round,pad=0,rounding_size=0.08", fc="white", ec="black", lw=1, zorder=3)
    for xc, width, column in zip(centres, widths, columns):
        for op, zeros in column:
            controls, targets, kind = _parts(op)
            condition = None if isinstance(op, _Mark) else G.condition_of(op.gate)
            reads = set(op.wires[:condition[0]]) if condition else set()
            ys = [-w for w in op.wires]
            if len(ys) > 1:
                ax.plot([xc, xc], [min(ys), max(ys)], color="black", lw=1, zorder=1)
            for w in controls:
                if w in reads:          # a measured wire: ◉ read as 1, ○ read as 0
                    ax.add_patch(Circle((xc, -w), 1.6 * _DOT, fc="white", ec="black", lw=1, zorder=4))
                    if w not in zeros:
                        ax.add_patch(Circle((xc, -w), 0.8 * _DOT, color="black", zorder=5))
                    continue
                ax.add_patch(Circle((xc, -w), _DOT, color="black", zorder=4))
            if kind == "x":
                y = -targets[0]
                ax.add_patch(Circle((xc, y), _OPLUS, fc="white", ec="black", lw=1, zorder=4))
                ax.plot([xc - _OPLUS, xc + _OPLUS], [y, y], color="black", lw=1, zorder=5)
                ax.plot([xc, xc], [y - _OPLUS, y + _OPLUS], color="black", lw=1, zorder=5)
            elif kind == "z":
                for w in targets:
                    ax.add_patch(Circle((xc, -w), _DOT, color="black", zorder=4))
            elif kind == "swap":
                s = 0.14
                for w in targets:
                    ax.plot([xc - s, xc + s], [-w - s, -w + s], color="black", lw=1.3, zorder=4)
                    ax.plot([xc - s, xc + s], [-w + s, -w - s], color="black", lw=1.3, zorder=4)
            else:
                top, bottom = -min(targets), -max(targets)
                half = 0.3
                ax.add_patch(FancyBboxPatch((xc - width / 2, bottom - half), width, top - bottom + 2 * half,
                                            **box_style))
                ax.text(xc, (top + bottom) / 2, _mpl_label(circuit, op, show_values), ha="center", va="center",
                        fontsize=fontsize, zorder=6)
                # a box over untouched wires, or over wires out of order, numbers the wires it acts on
                span = list(range(min(targets), max(targets) + 1))
                if len(targets) > 1 and list(targets) != span:
                    for i, w in enumerate(targets):
                        ax.text(xc - width / 2 + 0.04, -w, str(i), ha="left", va="center",
                                fontsize=fontsize * 0.7, zorder=6)
    ax.set_xlim(-0.7, total + 0.1)
    ax.set_ylim(-(n - 1) - 0.6, 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    return save_figure(fig, path if path is not None else filename)
