"""The command line: parses, calls the harness, prints. No benchmarking logic lives here."""

from __future__ import annotations

import functools
import logging
import os
import warnings
from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kmbench import progress, registry

from kmbench.data import datasets, files, results

from kmbench.plans import plan, suite

from kmbench.protocol import runner

from kmbench.report import export, report

from kmbench.tasks import task_export, tasks
from kmbench.errors import UsageError
from kmbench.report.plot import per_iteration_chart, require_matplotlib, sweep_charts
from kmbench.protocol.timing import format_seconds

# Typer 0.29's rich help labels every option with its type, flags too ("--force <bool>"),
# which reads as if they took a value: a flag shows no type, as in click's plain help.
# Older Typer shows no type there (and has no such method): nothing to change.
_option_type = getattr(typer.core.TyperOption, "display_type_rich", None)
if _option_type is not None:
    typer.core.TyperOption.display_type_rich = lambda self, ctx: None if self.is_flag else _option_type(self, ctx)

app = typer.Typer(
    help="Benchmark k-means implementations fairly: the same data, initial centroids and "
    "iteration count for everyone, the same timed region, and every result checked against a "
    "float64 reference.",
    no_args_is_help=True,
    add_completion=False,
)
gen_app = typer.Typer(help="Generate a dataset into the cache (reused when the parameters repeat).",
                      no_args_is_help=True)
app.add_typer(gen_app, name="gen-data")
# Off a terminal (a log, a pipe) rich would cut tables at 80 columns: there, lines are as wide
# as they need to be.
LOGGED_WIDTH = 10_000
console = Console(width=None if Console().is_terminal else LOGGED_WIDTH)
errors = Console(stderr=True, width=None if Console(stderr=True).is_terminal else LOGGED_WIDTH)

STATUS_STYLE = {"ok": "green", "mismatch": "bold red", "error": "red", "skipped": "yellow"}
# Help and messages go through rich markup, which would take "[default: ...]" or
# "kmbench[plot]" for a style tag and drop it: every bracket is escaped.
DataDir = typer.Option(None, "--data-dir", help=escape("Dataset cache folder, also where oracle results are cached [default: $KMBENCH_DATA or ./datasets]."))
Store = typer.Option(None, "--store", help=escape("Record store [default: $KMBENCH_RESULTS or results/records.jsonl]."))


_python_show_warning = warnings.showwarning


def friendly(command):
    """Turn a UsageError into one sentence on stderr and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UsageError as exc:
            errors.print(f"[bold red]Error:[/] {escape(str(exc))}", highlight=False)
            raise typer.Exit(2) from None

    return wrapper


def _count(option: str, text: str) -> int:
    """A whole number of points as people write it: 100000, 100_000 or 1e5."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        value = float("nan")
    if not value.is_integer() or value < 1:
        raise UsageError(f"{option} takes whole numbers >= 1 (e.g. 100000 or 1e5); got {text!r}.")
    return int(value)


def _sizes(text: str) -> list[int]:
    sizes = [_count("--n", part.strip()) for part in text.split(",") if part.strip()]
    if not sizes:
        raise UsageError(f"--n must name at least one size >= 1; got {text!r}.")
    return sizes


def _init(text: str) -> str:
    """scikit-learn's spelling, k-means++, is accepted beside kmbench's kmeans++."""
    return "kmeans++" if text == "k-means++" else text


@gen_app.command("blobs")
@friendly
def gen_blobs(
    n: str = typer.Option("100000", "--n", help="Number of points (100000, 100_000 or 1e5)."),
    d: int = typer.Option(2, "--d", min=1, help="Dimensions."),
    centers: int = typer.Option(5, "--centers", min=1, help="Number of Gaussian blobs."),
    std: float = typer.Option(1.0, "--std", help="Standard deviation of each blob."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    dtype: str = typer.Option("float32", "--dtype", help="float32 or float64."),
    data_dir: Optional[Path] = DataDir,
):
    """Gaussian blobs with scikit-learn make_blobs semantics (document 000's data)."""
    dataset = datasets.blobs(_count("--n", n), d, centers, std, seed, dtype, data_dir)
    console.print(f"{dataset.name}: {dataset.n:,} x {dataset.d} {dataset.data.dtype} -> {dataset.path}")


@gen_app.command("radial")
@friendly
def gen_radial(
    branches1: int = typer.Option(10, "--branches1", min=1, help="Large branches around the origin."),
    dist1: float = typer.Option(20.0, "--dist1", help="Distance of the large branches from the origin."),
    branches2: int = typer.Option(5, "--branches2", min=1, help="Small clusters around each large branch."),
    dist2: float = typer.Option(2.0, "--dist2", help="Distance of the small clusters from their branch."),
    cluster_size: int = typer.Option(20000, "--cluster-size", min=1, help="Points per small cluster."),
    scale: float = typer.Option(0.1, "--scale", help="Standard deviation of each small cluster."),
    seed: int = typer.Option(0, "--seed", help="Random seed."),
    dtype: str = typer.Option("float32", "--dtype", help="float32 or float64."),
    data_dir: Optional[Path] = DataDir,
):
    """The radial tree of 2-D Gaussians of document 002 (10 20 5 2 20000 0.1 gives 1M points)."""
    with console.status("generating radial tree"):
        dataset = datasets.radial(branches1, dist1, branches2, dist2, cluster_size, scale, seed,
                                  dtype, data_dir)
    console.print(f"{dataset.name}: {dataset.n:,} x {dataset.d} {dataset.data.dtype} -> {dataset.path}")


@app.command("list")
def list_impls():
    """Every implementation, whether it can run here, and why not."""
    table = Table(title="Implementations")
    for column in ("name", "task", "row label", "available", "description / reason", "source"):
        table.add_column(column)
    for impl in registry.discover().values():
        ready, why = runner.usable(impl)
        table.add_row(impl.name, ", ".join(impl.tasks), impl.label, "[green]yes[/]" if ready else "[yellow]no[/]",
                      escape(impl.description if ready else why), escape(impl.source))
    console.print(table)


def _summary(records: list[dict]) -> Table:
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
            row["impl"], f"{row['n']:,}", f"[{style}]{row['status']}[/]", export.iterations_text(row),
            format_seconds(row["mean_s"]) if pd.notna(row["mean_s"]) else "-",
            format_seconds(row["per_iter_s"]) if pd.notna(row["per_iter_s"]) else "-",
            f"{speedup:.2f}x" if pd.notna(speedup) else "-",
        )
    return table


def _warnings(records: list[dict]) -> None:
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


def _planned(n_text, dataset, d, centers, dtype, data_dir, label_column):
    """Checks the dataset options without writing anything. Returns each dataset's point
    count by name, and a function that then makes (generates or loads) the datasets."""
    if dataset:
        found = datasets.resolve(dataset, data_dir, label_column)
        return {found.name: found.n}, lambda: [found]
    sizes = _sizes(n_text)
    datasets.dtype_of(dtype)
    names = {datasets.blobs_name(n, d, centers, 1.0, 0, dtype): n for n in sizes}
    return names, lambda: [datasets.blobs(n, d, centers, 1.0, 0, dtype, data_dir) for n in sizes]


def _made(make) -> list:
    made = make()
    for dataset in made:
        for note in dataset.meta.get("notes") or []:
            errors.print(f"[yellow]note[/] {escape(note)}", highlight=False)
    return made


def _run(impls, data, settings, store, data_dir=None):
    with progress.reporting(console, len(impls) * len(data)) as reporter:
        records = runner.run(impls, data, settings, store, reporter, data_dir)
    console.print(_summary(records))
    _seeding_times(records)
    _warnings(records)
    console.print(f"{len(records)} records appended to {results.store_path(store)}; "
                  "`kmbench report` renders every stored record.")
    return records


def _seeding_times(records):
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


@app.command("run")
@friendly
def run(
    n: Optional[str] = typer.Option(None, "--n", help=escape("Point counts of the blobs dataset, comma separated (e.g. 100,1e5) [default: 100000].")),
    k: int = typer.Option(5, "--k", help="Clusters."),
    iters: int = typer.Option(300, "--iters", help="Lloyd iterations every implementation runs, with --stop iterations (no early stop)."),
    stop: str = typer.Option("iterations", "--stop", help="Stop rule: iterations (exactly --iters) or tolerance (stop after an iteration in which at most --tol of the points changed cluster, at most --max-iters)."),
    tol: Optional[float] = typer.Option(None, "--tol", help=escape("With --stop tolerance: the fraction of points that may still change cluster (0: none) [default: 0].")),
    max_iters: Optional[int] = typer.Option(None, "--max-iters", help=escape("With --stop tolerance: the most iterations [default: --iters].")),
    repeats: int = typer.Option(5, "--repeats", help="Counted runs per cell (the mean is document 000's statistic)."),
    warmup: int = typer.Option(1, "--warmup", help="Uncounted runs first (compilation, caches)."),
    impl: Optional[str] = typer.Option(None, "--impl", help=escape("Implementations, comma separated [default: all]. See `kmbench list`.")),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="A generated dataset's name or a .npy / text file, instead of blobs of --n points."),
    label_column: bool = typer.Option(False, "--label-column", help="The last column of --dataset is a label: drop it."),
    d: Optional[int] = typer.Option(None, "--d", min=1, help=escape("Dimensions of the generated blobs [default: 2].")),
    centers: Optional[int] = typer.Option(None, "--centers", min=1, help=escape("Blobs in the generated data [default: 5].")),
    dtype: Optional[str] = typer.Option(None, "--dtype", help=escape("float32 or float64 for generated data [default: float32].")),
    init: str = typer.Option("random", "--init", help="Initial centroids: random (k distinct points) or kmeans++ (also spelled k-means++)."),
    seed: int = typer.Option(0, "--seed", help="Seed for the initial centroids."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Stop repeating a cell after this many seconds of counted runs."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help=escape("CPU threads of kmbench-cpu [default: every core]; each record says how many ran.")),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="The dask rows run on this Dask scheduler (e.g. tcp://10.0.0.5:8786) instead of a cluster of their own."),
    data_dir: Optional[Path] = DataDir,
    store: Optional[Path] = Store,
):
    """Run implementations on the same problem, validate each result, store one record per cell."""
    _refuse_ignored(stop, tol, max_iters, dataset, label_column,
                    {"--n": n, "--d": d, "--centers": centers, "--dtype": dtype})
    if scheduler:
        os.environ["KMBENCH_DASK_SCHEDULER"] = scheduler  # read by impls/dask_impl.py
    if threads:
        os.environ["KMBENCH_THREADS"] = str(threads)  # read by impls/cpu_fast
    settings = runner.Settings(k=k, iterations=max_iters if max_iters is not None else iters,
                               stop=stop, tol=tol or 0.0, init=_init(init), seed=seed, warmup=warmup,
                               repeats=repeats, max_time=max_time)
    impls = registry.select(impl)
    sizes, make = _planned(n or "100000", dataset, d or 2, centers or 5, dtype or "float32", data_dir, label_column)
    plan.check_before_writing([(settings, sizes)], store, data_dir, generating=not dataset)
    _run(impls, _made(make), settings, store, data_dir)


def _refuse_ignored(stop, tol, max_iters, dataset, label_column, generation: dict) -> None:
    """An option that would change nothing is a mistake to say, not to ignore."""
    if stop != "tolerance" and (tol is not None or max_iters is not None):
        given = " and ".join(name for name, value in (("--tol", tol), ("--max-iters", max_iters)) if value is not None)
        raise UsageError(f"{given} apply only with --stop tolerance; with --stop {stop} every implementation "
                         "runs exactly --iters iterations.")
    if dataset:
        given = [name for name, value in generation.items() if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} describe generated blobs, not --dataset {dataset}; "
                             "drop them or drop --dataset.")
    elif label_column:
        raise UsageError("--label-column applies to a --dataset file; the generated blobs have no label column.")


def _write(text: str, out: Optional[Path]):
    if out is None:
        typer.echo(text, nl=False)  # unwrapped: the output is markdown/CSV/JSON, not a display
        return
    files.write_text_atomically(out, text)
    console.print(f"wrote {out}")


@app.command("report")
@friendly
def report_cmd(
    format: str = typer.Option("markdown", "--format", help="markdown, csv or json."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write here instead of the terminal."),
    plot: Optional[Path] = typer.Option(None, "--plot", help=escape("Also draw time per iteration to this PNG (needs matplotlib: pip install 'kmbench[plot]').")),
    store: Optional[Path] = Store,
):
    """Render tables from stored records: per dataset, and document 000's published table beside ours."""
    if format not in export.FORMATS:
        raise UsageError(f"--format must be one of {', '.join(export.FORMATS)}; got {format!r}.")
    source = results.store_path(store)
    if not source.exists():
        raise UsageError(f"No record store at {source}: run `kmbench run` first or pass --store.")
    if plot is not None:
        require_matplotlib()  # before the markdown is written, not after
        files.check_writable_file(plot, "--plot")
    if out is not None:
        files.check_writable_file(out, "--out")
    cells = report.cells_frame(results.load(source))
    _write(export.FORMATS[format](cells, str(source)), out)
    if plot is not None:
        errors.print(f"wrote {per_iteration_chart(cells, plot)}")


def _execute(steps, store, data_dir, force):
    """Run a checked plan with one bar over every cell (skipped cells advance it too)."""
    total = sum(len(step.impls) for step in steps)
    with progress.reporting(console, total) as reporter:
        records, skipped = plan.execute(steps, store, reporter, data_dir, force)
    if records:
        console.print(_summary(records))
        _warnings(records)
    console.print(f"{len(records)} records appended to {results.store_path(store)}"
                  + (f"; {skipped} cells skipped, measured before with this code on this machine "
                     "(--force runs them again)" if skipped else "") + ".")
    return plan.latest_records(steps, store)


def _write_plots(cells, kinds, stem: Path):
    for kind in kinds:
        if kind == "per-iteration":
            errors.print(f"wrote {per_iteration_chart(cells, Path(f'{stem}-per-iteration.png'))}")
        else:
            for path in sweep_charts(cells, Path(str(stem))):
                errors.print(f"wrote {path}")


@app.command("reproduce")
@friendly
def reproduce(
    name: Optional[str] = typer.Argument(None, help="Which suite (a reproduction of a reference document); see --list."),
    list_suites: bool = typer.Option(False, "--list", help="List the suites and exit."),
    impl: Optional[str] = typer.Option(None, "--impl", help=escape("Implementations [default: the suite's own, else every one]. See `kmbench list`.")),
    out: Optional[Path] = typer.Option(None, "--out", help=escape("Markdown report to write [default: results/reproduce-NAME.md]; plots go beside it.")),
    force: bool = typer.Option(False, "--force", help="Run cells again even if this code measured them on this machine."),
    no_run: bool = typer.Option(False, "--no-run", help="Run nothing: render the report and plots from the records already stored (say, measured on another machine)."),
    data_dir: Optional[Path] = DataDir,
    store: Optional[Path] = Store,
):
    """Run a reference document's protocol from its suite file and write its published figures beside ours."""
    if list_suites or name is None:
        table = Table(title="Suites (kmbench/plans/suites/*.toml)")
        for column in ("name", "title", "source", "cells"):
            table.add_column(column)
        for entry in suite.names():
            loaded = suite.load(entry)
            table.add_row(entry, escape(loaded.title), loaded.source, str(loaded.cell_count()))
        console.print(table)
        if name is None and not list_suites:
            raise UsageError("Name a suite to reproduce (see the list above).")
        return
    chosen = suite.load(name)
    out = out or Path("results") / f"reproduce-{name}.md"
    if isinstance(chosen, tasks.TaskSuite):
        _reproduce_task(chosen, impl, out, force, no_run, store)
        return
    steps = chosen.steps(impl)
    if not no_run:
        plan.check(steps, store, data_dir)
    files.check_writable_file(out, "--out")
    if chosen.plots:
        require_matplotlib()
    records = plan.latest_records(steps, store) if no_run else _execute(steps, store, data_dir, force)
    if not records:
        raise UsageError(f"No stored record of suite {name} in {results.store_path(store)}.")
    cells = report.cells_frame(records)
    # "seconds" and "best-peer" need no published key; the rate comparisons name theirs.
    comparisons = {"none": [], "seconds": ["seconds"], "best-peer": ["best-peer"]}.get(
        chosen.comparison, [(chosen.comparison, chosen.published)])
    _write(export.markdown(cells, str(results.store_path(store)), comparisons,
                           title=f"kmbench reproduce {name}: {chosen.title}"), out)
    _write_plots(cells, chosen.plots, out.with_suffix(""))


def _reproduce_task(chosen: tasks.TaskSuite, impl: str | None, out: Path, force: bool, no_run: bool, store):
    """A suite of the assign or batched task: its cells, then its markdown."""
    if impl or not no_run:
        registry.select(impl or ",".join(chosen.impls), task=chosen.task)  # unknown names: one sentence
    files.check_writable_file(out, "--out")
    if no_run:
        records = tasks.latest(chosen, store)
    else:
        results.check_writable(store)
        records = tasks.reproduce(chosen, impl, store, force, reporter=lambda text: console.print(f"[dim]{escape(text)}[/dim]"))
    if not records:
        raise UsageError(f"No stored record of suite {chosen.name} in {results.store_path(store)}.")
    _write(task_export.markdown(chosen, records), out)


def _numbers(option: str, text: str) -> list:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{option} takes numbers separated by commas (e.g. 1e4,1e5); got {text!r}.") from None
    if not values:
        raise UsageError(f"{option} names no value.")
    return [int(v) if v == int(v) else v for v in values]


@app.command("sweep")
@friendly
def sweep(
    data: str = typer.Option("radial", "--data", help="Generator: radial (document 002's tree) or blobs."),
    vary: list[str] = typer.Option(["n=1e4,1e5,1e6"], "--vary", help="A dataset parameter and its values, e.g. n=1e4,1e5,1e6 (repeatable)."),
    k: str = typer.Option("3,30,100", "--k", help="Clusters, comma separated."),
    iters: str = typer.Option("30", "--iters", help="Iterations (the most, with --stop tolerance), comma separated: varying h."),
    stop: str = typer.Option("iterations", "--stop", help="iterations or tolerance (see kmbench run --help)."),
    tol: Optional[float] = typer.Option(None, "--tol", help=escape("With --stop tolerance: the fraction of points that may still change [default: 0].")),
    repeats: int = typer.Option(3, "--repeats", help="Counted runs per cell."),
    warmup: int = typer.Option(1, "--warmup", help="Uncounted runs first."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Stop repeating a cell after this many seconds of counted runs."),
    impl: Optional[str] = typer.Option(None, "--impl", help=escape("Implementations, comma separated [default: all].")),
    force: bool = typer.Option(False, "--force", help="Run cells again even if this code measured them on this machine."),
    out: Path = typer.Option(Path("results/sweep.md"), "--out", help="Markdown report; the plots go beside it (NAME-log.png, NAME-linear.png)."),
    data_dir: Optional[Path] = DataDir,
    store: Optional[Path] = Store,
):
    """Run a grid of sizes, k and iterations, skipping cells already measured, and plot rate and time against n, k and h."""
    spec: dict = {"generator": data}
    for item in vary:
        key, sep, values = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--vary takes NAME=VALUES, e.g. n=1e4,1e5; got {item!r}.")
        spec[key.strip()] = _numbers(f"--vary {key.strip()}", values)
    _refuse_ignored(stop, tol, None, None, False, {})
    settings = runner.Settings(stop=stop, tol=tol or 0.0, repeats=repeats, warmup=warmup, max_time=max_time)
    steps = plan.expand([spec], settings, _numbers("--k", k), _numbers("--iters", iters), impl)
    plan.check(steps, store, data_dir)
    files.check_writable_file(out, "--out")
    require_matplotlib()
    records = _execute(steps, store, data_dir, force)
    cells = report.cells_frame(records)
    _write(export.markdown(cells, str(results.store_path(store)), comparisons=(), title="kmbench sweep"), out)
    _write_plots(cells, ["sweep"], out.with_suffix(""))


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """kmbench's own warnings (damaged caches, skipped store lines) as one line on stderr;
    other libraries' warnings as Python shows them."""
    if issubclass(category, (results.StoreWarning, datasets.CacheWarning)):
        errors.print(f"[yellow]Warning:[/] {escape(str(message))}", highlight=False)
    else:
        _python_show_warning(message, category, filename, lineno, file, line)


def main():
    warnings.showwarning = _show_warning
    # Libraries' INFO lines (sklearnex's "running accelerated version", Dask's start-up) are
    # not the user's business; their warnings still show.
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    app()
