"""A picture of the cells frame: time per iteration by implementation, one bar per n,
log scale, one panel per dataset group. Needs matplotlib (pip install 'kmbench[plot]')."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kmbench.errors import UsageError


def require_matplotlib():
    """pyplot on the file-only backend, or a one-sentence UsageError saying how to get it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'kmbench[plot]'.") from None
    return plt


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
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp.png")
    figure.savefig(tmp, dpi=110)
    plt.close(figure)
    tmp.replace(out)
    return out
