"""A picture of the cells frame: time per iteration by implementation, one bar per n,
log scale, one panel per dataset group. Needs matplotlib (pip install 'kmbench[plot]')."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kmbench.data import files
from kmbench.errors import UsageError

if TYPE_CHECKING:  # the frames' type alone: pandas is not imported until a table is made
    import pandas as pd


def require_matplotlib(needed_by: str = "--plot"):
    """pyplot on the file-only backend, or a one-sentence UsageError saying what needs it
    (the option or command) and how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(matplotlib_missing(needed_by)) from None
    return plt


def matplotlib_missing(needed_by: str) -> str | None:
    """None where matplotlib imports, else the sentence that says what needs it and how to get it
    (for commands whose plots come beside tables, which they write without it)."""
    try:
        import matplotlib  # noqa: F401 - only whether it is there
    except ImportError:
        return f"{needed_by} needs matplotlib: pip install 'kmbench[plot]'."
    return None


def _save(plt, figure, out: Path, dpi: int) -> None:
    with files.replaced(out) as tmp:
        figure.savefig(tmp, dpi=dpi)
    plt.close(figure)


def per_iteration_chart(cells: pd.DataFrame, out: Path) -> Path:
    plt = require_matplotlib()
    measured = cells.dropna(subset=["per_iter_s"])
    if measured.empty:
        raise UsageError("No measured cell to plot.")
    groups = list(measured.groupby("group", sort=False))
    figure, axes = plt.subplots(len(groups), 1, figsize=(10, 3.2 * len(groups) + 0.8), squeeze=False)
    for axis, (name, group) in zip(axes[:, 0], groups):
        labels = list(dict.fromkeys(group["label"]))
        sizes = sorted(group["n"].unique())
        width = 0.8 / len(sizes)
        for offset, n in enumerate(sizes):
            rows = group[group["n"] == n].set_index("label").reindex(labels)
            positions = np.arange(len(labels)) + offset * width
            bars = axis.bar(positions, rows["per_iter_s"], width, label=f"n = {n:,}")
            for bar, status in zip(bars, rows["status"]):
                if isinstance(status, str) and status != "ok":  # never show a bad figure bare
                    bar.set_hatch("//")
                    axis.annotate(status, (bar.get_x(), bar.get_height()), fontsize=7, color="red")
        axis.set_yscale("log")
        axis.set_ylabel("seconds per iteration")
        axis.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels, rotation=20, ha="right", fontsize=8)
        axis.set_title(name, fontsize=9)
        axis.legend(fontsize=8)
    figure.tight_layout()
    _save(plt, figure, out, dpi=110)
    return out


SWEEP_AXES = (("n", "points n"), ("k", "clusters k"), ("iters_executed", "iterations h"))
SWEEP_METRICS = (("dist_evals_per_s", "rate C = k n h / t (per second)"),
                 ("per_iter_s", "seconds per iteration"))


def _panel_rows(cells: pd.DataFrame, axis: str) -> tuple[pd.DataFrame, str]:
    """The cells one panel shows: those varying `axis`, every other parameter held at its
    largest value (where most work is done), as document 002's figures hold them; and a note
    of what is held. With one iteration cap (a convergence stop), h varies with k, so the h
    panel shows every k."""
    rows, held = cells, []
    if axis != "n":
        rows = rows[rows["n"] == rows["n"].max()]
        held.append(f"n = {rows['n'].max():,}")
    h_from_k = axis == "iters_executed" and rows["iterations"].nunique() == 1
    if axis != "k" and not h_from_k:
        rows = rows[rows["k"] == rows["k"].max()]
        held.append(f"k = {rows['k'].max()}")
    if axis != "iters_executed":
        rows = rows[rows["iterations"] == rows["iterations"].max()]
        held.append(f"at most {rows['iterations'].max()} iterations")
    return rows, ", ".join(held)


def sweep_charts(cells: pd.DataFrame, out_stem: Path) -> list[Path]:
    """Two PNGs, log and linear axes (document 002's Figures 1 and 2): the rate and the time
    per iteration against n, k and h, one line per implementation, a red cross on every
    point that is not `ok`."""
    plt = require_matplotlib()
    from matplotlib import ticker

    measured = cells.dropna(subset=["per_iter_s", "dist_evals_per_s"])
    if measured.empty:
        raise UsageError("No measured cell to plot.")
    written = []
    # One colour and marker per implementation in every panel.
    labels = list(dict.fromkeys(measured["label"]))
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    style = {label: (palette(i % palette.N), "osD^v<>ph*"[i % 10]) for i, label in enumerate(labels)}
    for scale in ("log", "linear"):
        figure, axes = plt.subplots(2, 3, figsize=(15, 8.5))
        for column, (axis, axis_label) in enumerate(SWEEP_AXES):
            rows, held = _panel_rows(measured, axis)
            # Where h follows from k (a convergence stop), several k can share an h: points, no lines.
            joined = not (axis == "iters_executed" and rows["iterations"].nunique() == 1)
            for row_index, (metric, metric_label) in enumerate(SWEEP_METRICS):
                panel = axes[row_index, column]
                for label, line in rows.groupby("label", sort=False):
                    line = line.sort_values(axis)
                    color, marker = style[label]
                    panel.plot(line[axis], line[metric], marker=marker, markersize=5, color=color,
                               linestyle="-" if joined else "none", linewidth=1.2)
                    bad = line[line["status"] != "ok"]
                    panel.plot(bad[axis], bad[metric], "x", color="red", markersize=11, markeredgewidth=2)
                panel.set_xscale(scale)
                panel.set_yscale(scale)
                if len(rows):
                    panel.set_xticks(sorted(rows[axis].dropna().unique()))
                panel.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
                panel.xaxis.set_minor_formatter(ticker.NullFormatter())
                panel.set_xlabel(axis_label)
                panel.set_ylabel(metric_label)
                panel.set_title(f"varying {axis_label.split()[-1]} ({held})", fontsize=9)
                panel.grid(True, which="both", alpha=0.3)
        from matplotlib.lines import Line2D

        handles = [Line2D([], [], color=style[label][0], marker=style[label][1], label=label) for label in labels]
        handles.append(Line2D([], [], color="red", marker="x", linestyle="none", markersize=9,
                              markeredgewidth=2, label="result not ok"))
        figure.legend(handles=handles, loc="lower center", ncol=min(6, len(handles)), fontsize=8)
        figure.suptitle(f"kmbench sweep ({scale} axes); red cross: result not ok", fontsize=11)
        figure.tight_layout(rect=(0, 0.06, 1, 0.96))
        out = Path(f"{out_stem}-{scale}.png")
        _save(plt, figure, out, dpi=100)
        written.append(out)
    return written
