"""`kmbench compare A B`: two stores (or the stores of two commits) cell by cell, for a kernel
developer's CI. The statistics live in kmbench.report.compare; this parses, prints and exits."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from kmbench.cli.app import STATUS_STYLE, app, console, errors, friendly
from kmbench.cli.output import skipped_lines
from kmbench.data.cells import Cell
from kmbench.errors import UsageError
from kmbench.report import compare as stats
from kmbench.report.formatting import ratio_text, seconds_text

LABEL_STYLE = {stats.FASTER: "green", stats.SLOWER: "bold red", stats.SAME: "dim", stats.UNCLEAR: "yellow"}


def _cell_text(cell: Cell) -> str:
    """What makes the cell itself: two cells that differ only in iterations, stop rule, threads
    or workers must not read alike ("only in A" and "only in B" lines side by side)."""
    if cell.task != "lloyd":
        return f"{cell.impl} on {cell.where} ({cell.task})"
    stop = f", tol {cell.tol:g}" if cell.stop == "tolerance" else ""
    threads = f", {cell.threads} thread{'' if cell.threads == 1 else 's'}" if cell.threads else ""
    workers = f", {cell.gpus} worker{'' if cell.gpus == 1 else 's'}" if cell.gpus else ""
    start = "" if (cell.init, cell.seed) == ("random", 0) else f", {cell.init} seed {cell.seed}"
    return f"{cell.impl} on {cell.where}, k={cell.k}, {cell.iterations} its{stop}{threads}{workers}{start}"


def _verdicts(one: stats.CellComparison) -> str:
    if one.a_status == one.b_status:
        return f"[{STATUS_STYLE.get(one.a_status, '')}]{one.a_status}[/]"
    return f"{one.a_status} -> [{STATUS_STYLE.get(one.b_status, '')}]{one.b_status}[/]"


@app.command("compare")
@friendly
def compare_cmd(
    a: str = typer.Argument(..., help="The baseline: a record store (records.jsonl), or REV:path as git show spells it (main:results/records.jsonl)."),
    b: str = typer.Argument(..., help="The candidate, given as A is."),
    fail_above: float = typer.Option(1.05, "--fail-above", help="Exit 1 when a cell's B/A interval lies wholly above this ratio (the ratio itself with one repeat), or a cell ok in A is not ok in B."),
    noise: float = typer.Option(stats.NOISE_FRACTION, "--noise", help="Ratios inside 1/(1+noise) .. 1+noise are the same time."),
):
    """B's time per iteration over A's for every cell in both, with a 95% bootstrap interval from the repeats: faster, slower, same or unclear."""
    if fail_above <= 0 or noise < 0:
        raise UsageError(f"--fail-above must be above 0 and --noise at least 0; got {fail_above} and {noise}.")
    found = stats.compare(stats.load_side(a, "A"), stats.load_side(b, "B"), noise)
    if not found.cells:
        console.print("No cell is in both A and B.", highlight=False)
    table = Table(title=f"B / A, time per iteration: A = {escape(a)}, B = {escape(b)}")
    for column in ("cell", "A per iter", "B per iter", "B/A", "95% interval", "label", "verdict"):
        table.add_column(column, justify="right" if column.startswith(("A ", "B", "95")) else "left")
    for one in found.cells:
        interval = "-" if one.low is None else f"{one.low:.3f} .. {one.high:.3f}"
        table.add_row(escape(_cell_text(one.cell)), seconds_text(one.a_per_iter_s), seconds_text(one.b_per_iter_s),
                      ratio_text(one.ratio), interval, f"[{LABEL_STYLE[one.label]}]{one.label}[/]", _verdicts(one))
    if found.cells:
        console.print(table)
    for side, missing in (("A", found.only_a), ("B", found.only_b)):
        for cell in missing:
            console.print(f"only in {side}: {escape(_cell_text(cell))}", highlight=False)
    for line in skipped_lines(found.skipped, gpu_here=True):  # as recorded: the stores may be other machines'
        console.print(f"not compared, {escape(line)}", highlight=False)
    console.print(", ".join(f"{count} {label}" for label, count in found.counts().items()), highlight=False)
    regressed = found.regressions(fail_above)
    for one in regressed:
        why = (f"{one.a_status} in A, {one.b_status} in B" if one.lost_its_verdict
               else f"B/A {one.ratio:.3f} (interval from {one.low if one.low is not None else one.ratio:.3f}) "
                    f"above --fail-above {fail_above}")
        errors.print(f"[bold red]regression[/] {escape(_cell_text(one.cell))}: {why}", highlight=False)
    if regressed:
        raise typer.Exit(1)
