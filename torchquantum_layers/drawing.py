"""Circuit pictures: text always, matplotlib with the ``plot`` extra."""
from __future__ import annotations


def _label(circuit, op):
    from .circuit import Input, Param
    parts = []
    for a in op.angles:
        if isinstance(a, Param):
            parts.append(f"w{a.index}" if a.scale == 1 else f"{a.scale:g}*w{a.index}")
        elif isinstance(a, Input):
            parts.append(f"x{a.column}" if a.scale == 1 else f"{a.scale:g}*x{a.column}")
        else:
            parts.append(f"{a:.3g}")
    name = op.gate.name + ("†" if op.adjoint and not op.gate.self_inverse else "")
    return name + (f"({', '.join(parts)})" if parts else "")


def _layers(circuit):
    """Greedy columns: an op goes one column right of the last op on any wire it spans."""
    level = [0] * circuit.n_wires
    columns = []
    for op in circuit.ops:
        lo, hi = min(op.wires), max(op.wires)
        col = max(level[w] for w in range(lo, hi + 1))
        if col == len(columns):
            columns.append([])
        columns[col].append(op)
        for w in range(lo, hi + 1):
            level[w] = col + 1
    return columns


def draw_text(circuit) -> str:
    n = circuit.n_wires
    rows = [f"q{w}: " for w in range(n)]
    width0 = max(len(r) for r in rows)
    rows = [r.ljust(width0) for r in rows]
    for column in _layers(circuit):
        cells = ["─"] * n
        for op in column:
            g = op.gate
            label = _label(circuit, op)
            lo, hi = min(op.wires), max(op.wires)
            for w in range(lo, hi + 1):
                cells[w] = "│"
            if g.n_controls:
                for w in op.wires[:g.n_controls]:
                    cells[w] = "●"
                tgt = op.wires[g.n_controls:]
                inner = g.target.name + label[len(g.name):]
                for w in tgt:
                    cells[w] = "X" if g.target.name == "X" else inner
            elif len(op.wires) == 1:
                cells[op.wires[0]] = label
            else:
                for i, w in enumerate(op.wires):
                    cells[w] = f"{label}[{i}]"
        width = max(len(c) for c in cells) + 2
        for w in range(n):
            c = cells[w]
            fill = "│" if c == "│" else "─"
            rows[w] += ("─" + c).ljust(width, "─") if fill == "─" else ("─" + c).ljust(width, "─")
    return "\n".join(r + "─" for r in rows)


def draw_mpl(circuit, ax=None, filename=None):
    """A matplotlib figure of the circuit (needs the ``plot`` extra)."""
    try:
        import matplotlib
        if filename is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("circuit.draw('mpl') needs matplotlib: pip install 'torchquantum-layers[plot]'") from exc
    columns = _layers(circuit)
    n = circuit.n_wires
    if ax is None:
        fig, ax = plt.subplots(figsize=(1.2 + 0.9 * max(1, len(columns)), 0.6 + 0.6 * n))
    else:
        fig = ax.figure
    for w in range(n):
        ax.plot([-0.5, len(columns) - 0.5], [-w, -w], color="black", lw=1, zorder=0)
        ax.text(-0.7, -w, f"q{w}", ha="right", va="center")
    for x, column in enumerate(columns):
        for op in column:
            g = op.gate
            ys = [-w for w in op.wires]
            if len(ys) > 1:
                ax.plot([x, x], [min(ys), max(ys)], color="black", lw=1, zorder=1)
            controls = op.wires[:g.n_controls]
            for w in controls:
                ax.scatter([x], [-w], color="black", s=30, zorder=3)
            label = _label(circuit, op)
            for w in op.wires[g.n_controls:]:
                ax.text(x, -w, label if not g.n_controls else g.target.name, ha="center", va="center",
                        fontsize=7, zorder=4, bbox=dict(boxstyle="round", fc="white", ec="black"))
    ax.set_xlim(-1.2, len(columns))
    ax.set_ylim(-n + 0.4, 0.6)
    ax.axis("off")
    if filename is not None:
        fig.savefig(filename, dpi=120, bbox_inches="tight")
    return fig
