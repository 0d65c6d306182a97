"""The CSV exporter: one row per cell, the newest record of each. Lloyd's columns are the cells
frame's (kmbench.report.report); a store that also holds task suites' records (assign,
batched) gets their rows below, every row then named by a `task` column first."""

from __future__ import annotations

import pandas as pd

from kmbench.report import report, task_cells
from kmbench.report.contents import Contents


def frames(contents: Contents) -> dict[str, pd.DataFrame]:
    """Each task's cells that the contents hold, by task: Lloyd's cells frame, the task suites'."""
    found = {"lloyd": report.cells_frame(contents.of("lloyd"))}
    for task in ("assign", "batched"):
        found[task] = task_cells.frame(contents.of(task))
    return {task: frame for task, frame in found.items() if not frame.empty} or {"lloyd": found["lloyd"]}


def render(contents: Contents) -> str:
    found = frames(contents)
    if len(found) == 1:
        return next(iter(found.values())).to_csv(index=False)
    named = [frame.drop(columns="task", errors="ignore").assign(task=task) for task, frame in found.items()]
    table = pd.concat(named, ignore_index=True)
    return table[["task"] + [column for column in table.columns if column != "task"]].to_csv(index=False)
