"""What the commands print: the run's summary table, why each cell is not ok, seeding times, and
the runs themselves with their progress (kmbench.progress picks a bar or plain lines)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.markup import escape
from rich.table import Table

from kmbench import progress
from kmbench.cli.app import STATUS_STYLE, console, errors
from kmbench.data import files, results
from kmbench.plans import plan
from kmbench.protocol import Options
from kmbench.protocol.timing import format_seconds
from kmbench.report import formatting, report
from kmbench.report.plot import per_iteration_chart, sweep_charts
from kmbench.tasks import lloyd


def summary_table(records: list[dict]) -> Table:
    cells = report.cells_frame(records)
    table = Table(title="kmbench run: Lloyd loop, mean of counted repeats; speedup vs scikit-learn")
    for column, width in (("impl", 9), ("n", 6), ("status", 8), ("iters", 5), ("mean", 9),
                          ("per iter", 9), ("speedup", 7)):
        table.add_column(column, no_wrap=True, min_width=width,
                         justify="left" if column in ("impl", "status") else "right")
    for _, row in cells.iterrows():
        style = STATUS_STYLE.get(row["status"], "")
        speedup = row["speedup_vs_sklearn"]
        table.add_row(
            row["impl"], f"{row['n']:,}", f"[{style}]{row['status']}[/]", formatting.iterations_text(row),
            format_seconds(row["mean_s"]) if pd.notna(row["mean_s"]) else "-",
            format_seconds(row["per_iter_s"]) if pd.notna(row["per_iter_s"]) else "-",
            f"{speedup:.2f}x" if pd.notna(speedup) else "-",
        )
    return table


def show_warnings(records: list[dict]) -> None:
    """Below the table, where a long sentence has room: why a cell is not ok, and warnings.
    Implementations that cannot run here are one line (`kmbench list` gives each one's why)."""
    skipped = sorted({record["impl"] for record in records if record["status"] == "skipped"})
    if skipped:
        errors.print(f"[yellow]skipped[/] {len(skipped)} implementations that cannot run here "
                     f"(`kmbench list` says why): {', '.join(skipped)}", highlight=False)
    for record in records:
        if record["status"] not in ("ok", "skipped"):
            style = STATUS_STYLE.get(record["status"], "")
            errors.print(f"[{style}]{record['status']}[/] {record['impl']} n={record['dataset']['n']:,}: "
                         f"{escape(record.get('detail') or '')}", highlight=False)
        for warning in record.get("warnings") or []:
            errors.print(f"[yellow]warning[/] {record['impl']} n={record['dataset']['n']:,}: {escape(warning)}",
                         highlight=False)


def run_and_show(impls, data, settings, store, data_dir=None, options: Options = Options()):
    with progress.reporting(console, len(impls) * len(data)) as reporter:
        records = lloyd.run(impls, data, settings, store, reporter, data_dir, options)
    console.print(summary_table(records))
    show_seeding_times(records)
    show_warnings(records)
    console.print(f"{len(records)} records appended to {results.store_path(store)}; "
                  "`kmbench report` renders every stored record.")
    return records


def show_seeding_times(records):
    """k-means++ seeding is the harness's own work, outside every timed region: its time is
    shown once per dataset, so nobody mistakes it for a row's."""
    seen = {}
    for record in records:
        how = record.get("seeding") or {}
        if how.get("method") == "kmeans++":
            seen.setdefault(record["dataset"]["name"], how)
    for name, how in seen.items():
        console.print(f"k-means++ seeding of {escape(name)}: {how['seconds']:.3f} s on {how['device']} "
                      "(the harness's, not in any row's time)")


def write_text(text: str, out: Optional[Path]):
    if out is None:
        typer.echo(text, nl=False)  # unwrapped: the output is markdown/CSV/JSON, not a display
        return
    files.write_text_atomically(out, text)
    console.print(f"wrote {out}")


def execute_plan(steps, store, data_dir, force, options: Options = Options()):
    """Run a checked plan with one bar over every cell (skipped cells advance it too)."""
    total = sum(len(step.impls) for step in steps)
    with progress.reporting(console, total) as reporter:
        records, skipped = plan.execute(steps, store, reporter, data_dir, force, options)
    if records:
        console.print(summary_table(records))
        show_warnings(records)
    console.print(f"{len(records)} records appended to {results.store_path(store)}"
                  + (f"; {skipped} cells skipped, measured before with this code on this machine "
                     "(--force runs them again)" if skipped else "") + ".")
    return plan.latest_records(steps, store)


def write_plots(cells, kinds, stem: Path):
    for kind in kinds:
        if kind == "per-iteration":
            errors.print(f"wrote {per_iteration_chart(cells, Path(f'{stem}-per-iteration.png'))}")
        else:
            for path in sweep_charts(cells, Path(str(stem))):
                errors.print(f"wrote {path}")


def made_datasets(make) -> list:
    made = make()
    for dataset in made:
        for note in dataset.meta.get("notes") or []:
            errors.print(f"[yellow]note[/] {escape(note)}", highlight=False)
    return made
