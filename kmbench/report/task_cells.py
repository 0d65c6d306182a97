"""The task suites' cells as one table (the csv and json exporters' assign and batched rows):
one row per (suite, workload, implementation), the newest record of each, with the workload's
spec spread into columns (n, d, k, seed; rows, points, seeds, stop...)."""

from __future__ import annotations

import pandas as pd

from kmbench.data import cells
from kmbench.data.records import AssignRecord, BatchedRecord, Statistic, TaskRecord
from kmbench.protocol import environment
from kmbench.report.formatting import gpu_flags_text


def _row(record: TaskRecord) -> dict:
    run = record.times.run or Statistic()
    row = {"task": record.task, "suite": record.suite, "workload": record.workload, **record.spec,
           "impl": record.impl, "label": record.label, "step": record.step, "status": record.status,
           "gpu_flags": gpu_flags_text(record.gpu_flags),
           "detail": record.detail, "repeats": record.repeats_done, "mean_s": run.mean, "median_s": run.median,
           "min_s": run.min, "std_s": run.std, "cv": run.cv, "floor_s": record.floor_s}
    if isinstance(record, AssignRecord):
        row["bytes_per_pass"] = record.bytes_per_pass
    if isinstance(record, BatchedRecord):
        row.update(rows_done=record.rows_done, extrapolated_s=record.extrapolated_seconds,
                   rows_per_s=record.rows_per_s, iterations_mean=record.iterations_mean)
    return {**row, "warnings": "; ".join(record.warnings), "machine": environment.describe_machine(record.env),
            "timestamp": record.timestamp}


def frame(records: list[TaskRecord]) -> pd.DataFrame:
    """One row per task cell, in the order the cells were first measured."""
    return pd.DataFrame([_row(record) for record in cells.newest(records)])
