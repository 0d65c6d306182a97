"""The commands of the plans whose data are made in memory, too large for the dataset cache
(kmbench.plans.in_memory): scale and out-of-core. They run for hours on GPU machines and mostly
live in logs: they report progress as every command does (kmbench.progress: timed lines off a
terminal), then print their markdown table (also written to --out), and exit 1 when a cell's
verdict is neither ok, error nor skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from kmbench import progress
from kmbench.cli.app import app, console, friendly
from kmbench.cli.options import row_options
from kmbench.data import files, results
from kmbench.plans import out_of_core, scaling
from kmbench.plans.in_memory import Counts, exit_status
from kmbench.report.contents import Contents

# The protocol's counts, the same options (and defaults) for both commands.
Iters = typer.Option(3, "--iters", help="Lloyd iterations of every cell.")
Warmup = typer.Option(1, "--warmup", help="Uncounted runs first (compilation, caches).")
Repeats = typer.Option(2, "--repeats", help="Counted runs per cell.")
Seed = typer.Option(0, "--seed", help="Seed of the data and of the initial centroids.")
PlanStore = typer.Option(..., "--store", help="Record store (records.jsonl) to append to.")


def _finish(contents: Contents, out: Optional[Path], records: list[dict]) -> None:
    """The table written (atomically, where asked) and printed; exit 1 if a cell was judged wrong."""
    from kmbench.report import markdown  # pandas and the exporters: on use, not for every --help

    table = markdown.render(contents)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        files.write_text_atomically(out, table)
    typer.echo(table, nl=False)  # markdown, unwrapped
    status = exit_status(records)
    if status:
        raise typer.Exit(status)


@app.command("scale")
@friendly
def scale_cmd(
    workload: str = typer.Option(",".join(scaling.WORKLOADS), "--workload", help=f"Workloads, comma separated, of {', '.join(scaling.WORKLOADS)}."),
    gpus: str = typer.Option("0", "--gpus", help='GPU sets, space separated, each a comma-separated list of GPU numbers: "0 0,1" runs the multi-GPU rows on GPU 0, then on GPUs 0 and 1.'),
    k: Optional[str] = typer.Option(None, "--k", help=escape("Only these k, comma separated [default: each workload's].")),
    scale: float = typer.Option(1.0, "--scale", help="Multiply every n by this, in (0, 1] (0.01: a smoke run of the same code)."),
    impl: str = typer.Option("kmbench-gpu-dask,flash-kmeans-multi-gpu,dask-cuda", "--impl", help="The multi-GPU rows, run on each GPU set."),
    alone: str = typer.Option("kmbench-gpu", "--alone", help='The rows run once, on one GPU, without Dask: the time a GPU set must beat ("" for none).'),
    iters: int = Iters,
    warmup: int = Warmup,
    repeats: int = Repeats,
    seed: int = Seed,
    store: Path = PlanStore,
    out: Optional[Path] = typer.Option(None, "--out", help="Also write the strong-scaling table of the whole store here, as markdown."),
    force: bool = typer.Option(False, "--force", help="Run cells again even if this code measured them on this machine."),
):
    """Strong scaling of the multi-GPU rows per GPU set, at sizes that outgrow one GPU.

    The workloads: radial-1e9, the radial tree at 1e9 x 2 (8 GB), k = 3 and 1000; blobs-1e8x128, Gaussian blobs at 1e8 x 128 (51 GB), k = 1024. Each dataset is made once, in memory, and pinned: the radial tree on the CPU as `kmbench gen-data radial` makes it, the blobs on the GPU.

    Per k, one float64 oracle judges every cell: first the --alone rows, then the --impl rows on each GPU set in turn, each set a new cluster, to which this process first gives its GPU memory back. A row that cannot hold its share ends as an error that says so, and the run goes on. A cell this code measured to the end on this machine before is taken from --store (split a long run by --workload and --k; run it again to go on). The table covers every record in --store; the exit code is 1 if a cell is mismatch or approximate."""
    plan = scaling.check(workload, gpus, k, alone, impl, scale, Counts(iters, warmup, repeats, seed))
    results.check_writable(store)
    with progress.reporting(console, scaling.cell_count(plan)) as reporter:
        records = scaling.run(plan, store, row_options(), reporter, force)
    _finish(Contents(results.read(store, ["lloyd"]), view="scaling"), out, records)


@app.command("out-of-core")
@friendly
def out_of_core_cmd(
    share: str = typer.Option("1.2", "--share", help="Data sizes as shares of the GPU's memory, comma separated (1.2: larger than the GPU)."),
    d: int = typer.Option(128, "--d", min=1, help="Dimensions."),
    k: int = typer.Option(1024, "--k", help="Clusters."),
    centers: Optional[int] = typer.Option(None, "--centers", min=1, help=escape("Gaussian blobs in the data [default: --k].")),
    impl: str = typer.Option("kmbench-gpu-stream,kmbench-gpu", "--impl", help="Implementations, comma separated."),
    iters: int = Iters,
    warmup: int = Warmup,
    repeats: int = Repeats,
    seed: int = Seed,
    store: Path = PlanStore,
    out: Optional[Path] = typer.Option(None, "--out", help="Also write this run's table here, as markdown."),
):
    """Lloyd on data larger than the GPU's memory, each iteration set against its copy floor.

    The copy floor is one host-to-device copy of the data, which no streamed iteration can beat. For each share, n is chosen so that the float32 points take that share of the GPU's memory: Gaussian blobs made on the GPU into pinned host memory, never cached (the GPU machines have less disk than the data).

    Every cell is judged against the float64 oracle; a row that cannot hold the data ends as an error that says so, and the exit code is 1 if a cell is mismatch or approximate. Needs a GPU."""
    counts, chosen = Counts(iters, warmup, repeats, seed), out_of_core.shares(share)
    results.check_writable(store)
    with progress.reporting(console, out_of_core.cell_count(chosen, impl)) as reporter:
        records = out_of_core.run(chosen, d, k, centers, impl, counts, store, reporter)
    _finish(Contents(records, view="out-of-core"), out, records)
