"""The commands: gen-data, list, run, report, reproduce and sweep. Each parses its options, calls
the harness and prints; no benchmarking logic lives here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from kmbench import progress, registry
from kmbench.cli.app import DataDir, Scheduler, Store, app, console, errors, friendly, gen_app
from kmbench.cli.options import (cells_on, init_method, numbers, planned_datasets, refuse_ignored, row_options,
                                 thread_counts, whole_count)
from kmbench.cli.output import (can_plot, execute_plan, interruptible, made_datasets, run_and_show, write_text,
                                write_plots)
from kmbench.data import datasets, files, results
from kmbench.errors import UsageError
from kmbench.plans import plan, suite
from kmbench.protocol import runner
from kmbench.report import report
from kmbench.report.contents import Contents
from kmbench.report.plot import per_iteration_chart, require_matplotlib
from kmbench.tasks import lloyd, tasks

LIST_WIDTH = 140  # `kmbench list` off a terminal (a pipe, a log): columns its long cells wrap within


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
    dataset = datasets.blobs(whole_count("--n", n), d, centers, std, seed, dtype, data_dir)
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
def list_impls(
    as_json: bool = typer.Option(False, "--json", help="A JSON list, one object per implementation, for scripts."),
    available: bool = typer.Option(False, "--available", help="Only the implementations that can run here."),
):
    """Every implementation, whether it can run here, and why not."""
    rows = []
    for impl in registry.discover().values():
        ready, why = runner.usable(impl)
        if ready or not available:
            rows.append({"name": impl.name, "tasks": list(impl.tasks), "label": impl.label, "available": ready,
                         "reason": "" if ready else why, "description": impl.description, "source": impl.source})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="Implementations")
    for column in ("name", "task", "row label", "available", "description / reason", "source"):
        table.add_column(column, no_wrap=column in ("name", "task", "available"))
    for row in rows:
        table.add_row(row["name"], ", ".join(row["tasks"]), row["label"],
                      "[green]yes[/]" if row["available"] else "[yellow]no[/]",
                      escape(row["description"] if row["available"] else row["reason"]), escape(row["source"]))
    # Off a terminal the console is as wide as a run's tables need, and this one would be a
    # line of 1,245 characters a row: its long cells wrap within LIST_WIDTH instead.
    console.print(table, width=None if console.is_terminal else LIST_WIDTH)


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
    warmup: int = typer.Option(1, "--warmup", help="Uncounted runs first (compilation, caches); for a row that reports its trajectory the first is the judge's untimed run that records it."),
    impl: Optional[str] = typer.Option(None, "--impl", help=escape("Implementations, comma separated [default: all]. See `kmbench list`.")),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="A generated dataset's name or a .npy / text file, instead of blobs of --n points."),
    label_column: bool = typer.Option(False, "--label-column", help="The last column of --dataset is a label: drop it."),
    d: Optional[int] = typer.Option(None, "--d", min=1, help=escape("Dimensions of the generated blobs [default: 2].")),
    centers: Optional[int] = typer.Option(None, "--centers", min=1, help=escape("Blobs in the generated data [default: 5].")),
    dtype: Optional[str] = typer.Option(None, "--dtype", help=escape("float32 or float64 for generated data [default: float32].")),
    init: str = typer.Option("random", "--init", help="Initial centroids: random (k distinct points) or kmeans++ (also spelled k-means++)."),
    seed: int = typer.Option(0, "--seed", help="Seed for the initial centroids."),
    max_time: Optional[float] = typer.Option(None, "--max-time", "--budget", help=escape(f"A slow row's time budget: after {runner.RUN_MIN_REPEATS} counted runs, no new one once this many seconds of them are spent; the table says so; inf: none [default: {runner.RUN_BUDGET_S:g}].")),
    threads: Optional[str] = typer.Option(None, "--threads", help=escape("CPU threads of the rows that take a count: kmbench-cpu's own, and through threadpoolctl the BLAS and OpenMP pools of numpy, sklearn and faiss-cpu [default: $KMBENCH_THREADS, else each row at its fastest count, found by a short calibration of 1, 2, 4, ... threads before its counted runs]; several, comma separated (1,2,4), run their cells once per count and the report shows the scaling. Each record says how many ran; the run says which rows the count did not reach.")),
    scheduler: Optional[str] = Scheduler,
    data_dir: Optional[Path] = DataDir,
    store: Optional[Path] = Store,
):
    """Run implementations on the same problem, validate each result, store one record per cell."""
    refuse_ignored(stop, tol, max_iters, dataset, label_column,
                    {"--n": n, "--d": d, "--centers": centers, "--dtype": dtype})
    counts = thread_counts(threads)
    settings = runner.Settings(k=k, iterations=max_iters if max_iters is not None else iters,
                               stop=stop, tol=tol or 0.0, init=init_method(init), seed=seed, warmup=warmup,
                               repeats=repeats, max_time=runner.RUN_BUDGET_S if max_time is None else max_time,
                               min_repeats=runner.RUN_MIN_REPEATS)
    impls = registry.select(impl)
    sizes, make = planned_datasets(n or "100000", dataset, d or 2, centers or 5, dtype or "float32", data_dir, label_column)
    plan.check_before_writing([(settings, sizes)], store, data_dir, generating=not dataset)
    # After the first count only the rows that take a thread count run again.
    passes = [(impls if index == 0 else [one for one in impls if one.takes_threads], row_options(count, scheduler))
              for index, count in enumerate(counts or [None])]
    with cells_on(scheduler) as cluster:
        status = run_and_show([(chosen, options) for chosen, options in passes if chosen], made_datasets(make),
                              settings, store, data_dir, cluster)
    if status:
        raise typer.Exit(status)


@app.command("report")
@friendly
def report_cmd(
    format: str = typer.Option("markdown", "--format", help=escape("markdown, csv, json or html (one self-contained page of tables and charts; needs plotly: pip install 'kmbench[html]').")),
    out: Optional[Path] = typer.Option(None, "--out", help="Write here instead of the terminal."),
    plot: Optional[Path] = typer.Option(None, "--plot", help=escape("Also draw time per iteration to this PNG (needs matplotlib: pip install 'kmbench[plot]').")),
    store: Optional[Path] = Store,
):
    """Render tables from stored records: per dataset, and document 000's published table beside ours."""
    from kmbench.report import exporters, html  # pandas and the exporters: on use, not for every --help

    if format not in exporters.FORMATS:
        raise UsageError(f"--format must be one of {', '.join(exporters.FORMATS)}; got {format!r}.")
    if format == "html":
        html.require_plotly()  # before anything is read or written
    source = results.store_path(store)
    if not source.exists():
        hint = "check the path" if store is not None else "run `kmbench run` first, or name one with --store"
        raise UsageError(f"No record store at {source}: {hint}.")
    if plot is not None:
        require_matplotlib()  # before the markdown is written, not after
        files.check_writable_file(plot, "--plot")
    if out is not None:
        files.check_writable_file(out, "--out")
    found = results.read(source)
    contents = Contents(found, str(source), suites=_suites_of(found))
    write_text(exporters.FORMATS[format](contents), out)
    if plot is not None:
        errors.print(f"wrote {per_iteration_chart(report.cells_frame(contents.of('lloyd')), plot)}")


def _suites_of(found: list) -> dict:
    """The shipped task suites the records are of, whose titles and published figures head their tables."""
    names = {record.suite for record in found if record.task != "lloyd"} & set(suite.names())
    return {name: suite.load(name) for name in names}


@app.command("reproduce")
@friendly
def reproduce(
    name: Optional[str] = typer.Argument(None, help="Which suite (a reproduction of a reference document); see --list."),
    list_suites: bool = typer.Option(False, "--list", help="List the suites and exit."),
    impl: Optional[str] = typer.Option(None, "--impl", help=escape("Implementations [default: the suite's own, else every one]. See `kmbench list`.")),
    out: Optional[Path] = typer.Option(None, "--out", help=escape("Markdown report to write [default: results/reproduce-NAME.md]; plots go beside it.")),
    force: bool = typer.Option(False, "--force", help="Run cells again even if this code measured them on this machine."),
    no_run: bool = typer.Option(False, "--no-run", help="Run nothing: render the report and plots from the records already stored (say, measured on another machine)."),
    scheduler: Optional[str] = Scheduler,
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
    if no_run and scheduler:
        raise UsageError("--scheduler measures cells and --no-run measures none: drop one of them.")
    if isinstance(chosen, tasks.TaskSuite):
        _reproduce_task(chosen, impl, out, force, no_run, store, scheduler)
        return
    steps = chosen.steps(impl)
    if not no_run:
        plan.check(steps, store, data_dir)
    files.check_writable_file(out, "--out")
    plots_by = f"drawing kmbench reproduce {name}'s plots"
    if chosen.plots:
        can_plot(plots_by)
    if no_run:
        records = plan.latest_records(steps, store)
    else:
        options = row_options(scheduler=scheduler)
        with cells_on(scheduler) as cluster:
            records = execute_plan(steps, store, data_dir, force, options, cluster)
    if not records:
        raise UsageError(f"No stored record of suite {name} in {results.store_path(store)}.")
    # "seconds" and "best-peer" need no published key; the rate comparisons name theirs.
    comparisons = {"none": [], "seconds": ["seconds"], "best-peer": ["best-peer"]}.get(
        chosen.comparison, [(chosen.comparison, chosen.published)])
    task = lloyd.LloydTask(comparisons=comparisons, title=f"kmbench reproduce {name}: {chosen.title}")
    write_text(task.render(records, chosen, str(results.store_path(store))), out)
    if chosen.plots and can_plot(plots_by):
        write_plots(report.cells_frame(records), chosen.plots, out.with_suffix(""))


def _reproduce_task(chosen: tasks.TaskSuite, impl: str | None, out: Path, force: bool, no_run: bool, store,
                    scheduler: str | None = None):
    """A suite of the assign or batched task: its cells, then its markdown."""
    if impl or not no_run:
        impls = registry.select(impl or ",".join(chosen.impls), task=chosen.task)  # unknown names: one sentence
    files.check_writable_file(out, "--out")
    if no_run:
        records = tasks.latest(chosen, store)
    else:
        results.check_writable(store)
        with cells_on(scheduler) as cluster, \
                interruptible(len(chosen.workloads) * progress.runnable(impls), store) as reporter:
            records = tasks.reproduce(chosen, impl, store, force, reporter=reporter, cluster=cluster)
    if not records:
        raise UsageError(f"No stored record of suite {chosen.name} in {results.store_path(store)}.")
    write_text(tasks.task_of(chosen).render(records), out)


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
    scheduler: Optional[str] = Scheduler,
    data_dir: Optional[Path] = DataDir,
    store: Optional[Path] = Store,
):
    """Run a grid of sizes, k and iterations, skipping cells already measured, and plot rate and time against n, k and h."""
    from kmbench.report import markdown

    spec: dict = {"generator": data}
    for item in vary:
        key, sep, values = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--vary takes NAME=VALUES, e.g. n=1e4,1e5; got {item!r}.")
        spec[key.strip()] = numbers(f"--vary {key.strip()}", values)
    refuse_ignored(stop, tol, None, None, False, {})
    settings = runner.Settings(stop=stop, tol=tol or 0.0, repeats=repeats, warmup=warmup, max_time=max_time)
    steps = plan.expand([spec], settings, numbers("--k", k), numbers("--iters", iters), impl)
    plan.check(steps, store, data_dir)
    files.check_writable_file(out, "--out")
    can_plot("drawing kmbench sweep's plots")
    options = row_options(scheduler=scheduler)
    with cells_on(scheduler) as cluster:
        records = execute_plan(steps, store, data_dir, force, options, cluster)
    cells = report.cells_frame(records)
    write_text(markdown.render(Contents(records, str(results.store_path(store)), "kmbench sweep", comparisons=())), out)
    if can_plot("drawing kmbench sweep's plots"):
        write_plots(cells, ["sweep"], out.with_suffix(""))
