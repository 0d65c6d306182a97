"""What the commands print: the run's summary table, why each cell is not ok, seeding times, and
the runs themselves with their progress (kmbench.progress picks a bar or plain lines)."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer
from rich import box
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kmbench import progress
from kmbench.cli.app import STATUS_STYLE, console, errors
from kmbench.data import files, results
from kmbench.data.records import THREADS_FASTEST
from kmbench.plans import estimate, plan
from kmbench.protocol import Options
from kmbench.protocol.device import nvidia_gpu_present
from kmbench.protocol.statistics import SPREAD, WIDE_SPREAD_CV
from kmbench.report.formatting import row_status, seconds_text
from kmbench.report import report
from kmbench.report.plot import matplotlib_missing, per_iteration_chart, sweep_charts
from kmbench.tasks import lloyd


# Words of the reasons of rows that need a GPU's software stack (impls' available()).
GPU_STACK = ("CuPy", "PyTorch", "cuML", "CUDA", "GPU", "Numba")
VARYING = ("d", "k", "threads")  # shown as columns only where the table's cells differ in them
# A machine is called busy where other programs keep this many cores busy before timing, or
# this share of its cores, whichever is more.
BUSY_CORES, BUSY_SHARE = 0.5, 0.1


def _records(count: int) -> str:
    return f"{count} record{'' if count == 1 else 's'}"


def _iterations_short(row) -> str:
    """Iterations executed, "of" those expected where they differ (the warnings below say why)."""
    import pandas as pd  # here, not at import: `kmbench --help` and `list` need no pandas

    executed, reference = row["iters_executed"], row.get("reference_iterations")
    if pd.isna(executed):
        return "-"
    expected = row["iterations"] if reference is None or pd.isna(reference) else reference
    return f"{int(executed)}" if executed == expected else f"{int(executed)}/{int(expected)}"


def _count_short(n: int) -> str:
    """100k, 1M, 10M for round counts (a column of 10,000,000s took a tenth of the screen)."""
    for size, unit in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n:,}"


def summary_table(records: list[dict]) -> Table:
    """The cells that ran, in at most 100 columns (the report files carry the detail); rows that
    cannot run here are summed below instead (skipped_lines). d, k and the thread count get a
    column where the cells differ in them, so a sweep's rows do not look like duplicates."""
    import pandas as pd

    shown = [record for record in records if record["status"] != "skipped"]
    cells = report.cells_frame(shown)
    varying = [name for name in VARYING if not cells.empty and cells[name].dropna().nunique() > 1]
    # Per iteration: a row that stops early (scikit-learn often does) must not look faster or slower for it.
    title = "kmbench run: Lloyd loop, mean of counted repeats; speedup per iteration vs scikit-learn"
    table = Table(title=title, min_width=len(title), box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), pad_edge=False)
    for column in ("impl", "n", *varying, "status", "iters", "mean", "per iter", "speedup"):
        table.add_column(column, no_wrap=True, justify="left" if column in ("impl", "status") else "right")
    for _, row in cells.iterrows():
        style = STATUS_STYLE.get(row["status"], "")
        speedup = row["speedup_per_iter_vs_sklearn"]
        table.add_row(
            row["impl"], _count_short(int(row["n"])), *("-" if pd.isna(row[name]) else f"{int(row[name]):,}" for name in varying),
            f"[{style}]{row_status(row)}[/]", _iterations_short(row),
            seconds_text(row["mean_s"]) + _budget_mark(row),
            seconds_text(row["per_iter_s"]),
            f"{speedup:.2f}x" if pd.notna(speedup) else "-",
        )
    return table


def _budget_mark(row) -> str:
    """" (3 runs, budget)" beside the mean of a row its time budget stopped (`run --budget`)."""
    repeats = row.get("repeats")
    if not row.get("stopped_by_budget") or repeats is None or repeats != repeats:  # NaN: not measured
        return ""
    return f" ({int(row['repeats'])} runs, budget)"


def skipped_lines(records: list[dict], gpu_here: bool) -> list[str]:
    """One line per reason rows cannot run here, the rows counted and named: "2 GPU rows skipped
    (cuda-v1, torch): no GPU here", "2 rows (faiss-cpu, sklearnex) not installed: pip install 'kmbench[peers]'"."""
    reasons: dict[str, set] = {}
    for record in records:
        if record["status"] != "skipped":
            continue
        why = record.get("detail") or "no reason given"
        if not gpu_here and any(word in why for word in GPU_STACK):
            reason = "GPU skipped: no GPU here"
        elif "not installed" in why and "pip install" in why:
            hint = re.split(r"\)| \(", why[why.index("pip install"):])[0].strip()
            reason = f"not installed: {hint}"
        else:
            reason = why
        reasons.setdefault(reason, set()).add(record["impl"])
    lines = []
    for reason, names in reasons.items():
        gpu = reason.startswith("GPU ")
        count = f"{len(names)}{' GPU' if gpu else ''} row{'s' if len(names) > 1 else ''}"
        listed = f" ({', '.join(sorted(names))})"  # every one: "20 GPU rows skipped" named none
        lines.append(f"{count} skipped{listed}:{reason[len('GPU skipped:'):]}" if gpu else f"{count}{listed} {reason}"
                     if reason.startswith("not installed") else f"{count} skipped{listed}: {reason}")
    return lines


def say(prefix: str, text: str, style: str = "yellow", to=errors) -> None:
    """A line of its own (on stderr unless `to` says): `prefix` in its colour (the whole line, where
    there is none), then the text, wrapped with a hanging indent at 100 columns or the terminal's
    width, whichever is less (a log's lines are otherwise as long as their sentences)."""
    out = Text(progress.wrapped(f"{prefix} {text}" if prefix else text, min(to.width, progress.TEXT_WIDTH)))
    out.stylize(style, 0, len(prefix) if prefix else len(out))
    to.print(out, soft_wrap=True, highlight=False)


def _busy_line(records: list[dict]) -> str | None:
    """What the look before timing saw (kmbench.protocol.environment.busy_cores): other programs
    that keep cores busy slow every row, and the rows that use every core (kmbench-cpu,
    scikit-learn's OpenMP, BLAS) most, so speedups over them read too large."""
    env = next((record["env"] for record in records if record.get("env")), {})
    busy, cores = env.get("busy_cores"), env.get("cores") or 1
    if busy is None or busy < max(BUSY_CORES, BUSY_SHARE * cores):
        return None
    return (f"the machine was busy before timing: other programs kept {busy:.1f} of its {cores} cores busy; "
            "times and speedups are unreliable (close them and run again)")


def _shape(record: dict) -> dict:
    return {"n": record["dataset"]["n"], "d": record["dataset"].get("d"), "k": (record.get("params") or {}).get("k")}


def _cell_label(record: dict, shown: set) -> str:
    """"numpy n=1,000 k=30": the row and those of n, d and k that are `shown` (those that differ
    between the cells: a sweep's two cells read "numpy n=1,000 (38%), numpy n=1,000 (127%)")."""
    shape = _shape(record)
    return " ".join([record["impl"], *(f"{name}={shape[name]:,}" for name in ("n", "d", "k")
                                       if name in shown and shape[name] is not None)])


def show_warnings(records: list[dict]) -> None:
    """Below the table: a busy machine, why a cell is not ok, and warnings. Rows that cannot run
    here are summed, one line per reason (`kmbench list` gives each one's); cells of a wide spread
    share one line, since the advice is the same."""
    for line in skipped_lines(records, nvidia_gpu_present()):
        say("", line)
    busy = _busy_line(records)
    if busy:
        say("warning", busy, "bold yellow")
    spread = []
    varying = {name for name in ("n", "d", "k") if len({_shape(record)[name] for record in records}) > 1}
    for record in records:
        where = _cell_label(record, varying | {"n"})
        if record["status"] not in ("ok", "skipped"):
            say(record["status"], f"{where}: {record.get('detail') or ''}", STATUS_STYLE.get(record["status"], ""))
        for warning in record.get("warnings") or []:
            if warning.startswith(SPREAD):
                spread.append(f"{_cell_label(record, varying)} ({record['times']['iterate']['cv']:.0%})")
            else:
                say("warning", f"{where}: {warning}")
    if spread:
        say("warning", f"{SPREAD} (CV above {WIDE_SPREAD_CV:.0%}) in {', '.join(spread)}: close other busy "
            "programs, or raise --repeats, before trusting these means")


def threads_line(impls: list, records: list[dict], counts: list[int]) -> str | None:
    """Which of the rows that ran --threads reached: those that take a thread count (kmbench-cpu
    itself; the rows in kmbench's process through threadpoolctl's limit on their BLAS and
    OpenMP pools), and which it did not (they choose their own threads)."""
    if not counts:
        return None
    ran = {record["impl"] for record in records if record["status"] != "skipped"}
    reached = [impl.name for impl in impls if impl.name in ran and impl.takes_threads]
    other = [impl.name for impl in impls if impl.name in ran and not impl.takes_threads]
    text = f"--threads {','.join(map(str, counts))} set the threads of {', '.join(reached) or 'no row that ran'}"
    return text + (f"; not of {', '.join(other)}, which {'choose their' if len(other) > 1 else 'chooses its'} own"
                   if other else "")


def chosen_threads_line(records: list[dict]) -> str | None:
    """The counts the calibration chose (kmbench.protocol.threads), one per row, or per row and
    size where a row ran at several: "threads, each row at its fastest: sklearn 4 of 64, ..."."""
    chosen = [record for record in records if (record.get("thread_choice") or {}).get("how") == THREADS_FASTEST]
    if not chosen:
        return None
    sizes = len({record["dataset"]["n"] for record in chosen}) > 1
    named = [f"{record['impl']} {record['thread_choice']['count']} of {record['thread_choice']['cores']}"
             + (f" (n={record['dataset']['n']:,})" if sizes else "") for record in chosen]
    return ("threads, each row at its fastest count (tried before its counted runs; --threads N forces N): "
            + ", ".join(named))


def _exit_status(records: list[dict]) -> tuple[int, str | None]:
    """1 where a cell is mismatch or error, or where no row asked for could run here; and the
    last line that says so. kmbench run's exit code, for CI."""
    failed = [record for record in records if record["status"] in ("mismatch", "error")]
    if failed:
        names = ", ".join(f"{record['impl']} ({record['status']})" for record in failed)
        return 1, f"{len(failed)} cell{'s' if len(failed) > 1 else ''} failed: {names}; exit code 1"
    if not any(record["status"] != "skipped" for record in records):
        return 1, "no implementation asked for could run here (the reasons are above); exit code 1"
    return 0, None


@contextmanager
def interruptible(total: int, store):
    """progress.reporting over `total` cells; on Ctrl-C, the table of the cells that finished
    (each stored as it finished; the cell in progress leaves no record) and exit code 130."""
    reporter = None
    try:
        with progress.reporting(console, total) as reporter:
            yield reporter
    except KeyboardInterrupt:
        finished = reporter.records if reporter is not None else []
        if any(record["status"] != "skipped" for record in finished):
            console.print(summary_table(finished))
        show_warnings(finished)
        say("interrupted", f"(Ctrl-C): {_records(len(finished))} appended to {results.kept_in(store)}; "
            "the cell in progress left none", "bold red")
        raise typer.Exit(130) from None


def run_and_show(passes, data, settings, store, data_dir=None, cluster=None) -> int:
    """passes: (implementations, the options they are handed: a thread count, say) in turn, all in
    one table; cluster: the Dask cluster that measures the cells (kmbench.protocol.placement), or
    None. Returns the exit code (_exit_status)."""
    rows = sum(progress.runnable(impls) for impls, _ in passes)
    warn_long([estimate.Planned(dataset.name, dataset.n, dataset.d, settings, rows) for dataset in data])
    records = []
    with interruptible(rows * len(data), store) as reporter:
        for impls, options in passes:
            records += lloyd.run(impls, data, settings, store, reporter, data_dir, options, cluster)
    if any(record["status"] != "skipped" for record in records):
        console.print(summary_table(records))
    show_seeding_times(records)
    show_warnings(records)
    counts = [options.threads for _, options in passes if options.threads is not None]
    reach = threads_line(passes[0][0] if passes else [], records, counts) or chosen_threads_line(records)
    if reach:
        say("", reach, "")
    say("", f"{_records(len(records))} appended to {results.kept_in(store)}; "
        "`kmbench report` renders every stored record.", "", to=console)
    status, why = _exit_status(records)
    if why:
        say("failed:", why, "bold red")
    return status


def warn_long(planned: list) -> None:
    """Before anything runs: how long each long cell will take (kmbench.plans.estimate)."""
    for line in estimate.long_cells(planned):
        say("long", line)


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


def execute_plan(steps, store, data_dir, force, options: Options = Options(), cluster=None):
    """Run a checked plan with one bar over every cell that can run here (cells measured before
    advance it too), its cells measured here or by `cluster`'s workers."""
    total = sum(progress.runnable(step.impls) for step in steps)
    done = set() if force else plan.finished(store, cluster.machines() if cluster else None)
    warn_long([estimate.Planned(step.name, plan.dataset_name(step.spec)[1], step.spec.get("d", 2), step.settings,
                                progress.runnable(plan.remaining(step, done, options))) for step in steps])
    with interruptible(total, store) as reporter:
        records, skipped = plan.execute(steps, store, reporter, data_dir, force, options, cluster)
    if records:
        console.print(summary_table(records))
        show_warnings(records)
    console.print(f"{_records(len(records))} appended to {results.kept_in(store)}"
                  + (f"; {skipped} cells skipped, measured before with this code on {'these machines' if cluster else 'this machine'} "
                     "(--force runs them again)" if skipped else "") + ".")
    return plan.latest_records(steps, store)


def can_plot(needed_by: str) -> bool:
    """Whether matplotlib is here for a command's plots; if not, a note says how to get it, and
    the command writes its tables without them (said before the run and again at its end)."""
    missing = matplotlib_missing(needed_by)
    if missing:
        say("note", f"{missing[:-1]}; the tables are written without them.")
    return missing is None


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
            say("note", note)
    return made
