"""Options read as people write them, and options that would change nothing refused in one
sentence (UsageError): counts such as 1e5, k-means++, lists of numbers, the dataset options;
the rows' options (threads, Dask scheduler and GPUs), with their environment defaults; and the
Dask cluster that measures a run's cells (`--scheduler`)."""

from __future__ import annotations

import os
from contextlib import contextmanager

from kmbench.data import datasets
from kmbench.errors import ImplementationError, UsageError
from kmbench.protocol import Options
from kmbench.protocol.cluster import check_address

# The user's defaults for the rows' options, read here once: the rows are handed an Options in
# their Problem and never read the environment themselves.
THREADS_ENV = "KMBENCH_THREADS"  # kmbench-cpu's threads, as `run --threads`
SCHEDULER_ENV = "KMBENCH_DASK_SCHEDULER"  # a running Dask cluster for the Dask rows alone
GPUS_ENV = "KMBENCH_DASK_GPUS"  # the GPUs ("0,1") of the Dask GPU rows' own cluster


def whole_count(option: str, text: str) -> int:
    """A whole number of points as people write it: 100000, 100_000 or 1e5."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        value = float("nan")
    if not value.is_integer() or value < 1:
        raise UsageError(f"{option} takes whole numbers >= 1 (e.g. 100000 or 1e5); got {text!r}.")
    return int(value)


def point_counts(text: str) -> list[int]:
    sizes = [whole_count("--n", part.strip()) for part in text.split(",") if part.strip()]
    if not sizes:
        raise UsageError(f"--n must name at least one size >= 1; got {text!r}.")
    return sizes


def init_method(text: str) -> str:
    """scikit-learn's spelling, k-means++, is accepted beside kmbench's kmeans++."""
    return "kmeans++" if text == "k-means++" else text


def thread_counts(text: str | None) -> list[int]:
    """--threads: one count or several, comma separated, each a whole number >= 1."""
    if text is None:
        return []
    counts = [whole_count("--threads", part.strip()) for part in text.split(",") if part.strip()]
    if not counts:
        raise UsageError("--threads names no count.")
    return counts


def row_options(threads: int | None = None, scheduler: str | None = None) -> Options:
    """What every row is handed: the command's options, else the environment's defaults. The
    Dask rows' cluster is --scheduler's (the whole run's), else $KMBENCH_DASK_SCHEDULER's."""
    if threads is None and os.environ.get(THREADS_ENV):
        threads = whole_count(f"${THREADS_ENV}", os.environ[THREADS_ENV])
    if scheduler is None and os.environ.get(SCHEDULER_ENV):
        scheduler = check_address(os.environ[SCHEDULER_ENV], f"${SCHEDULER_ENV}")
    return Options(threads=threads, scheduler=scheduler, gpus=os.environ.get(GPUS_ENV) or None)


@contextmanager
def cells_on(scheduler: str | None):
    """The Dask cluster that measures the run's cells (--scheduler), reached before anything
    runs and closed after; None: every cell here. An address kmbench may not reach, or cannot,
    is one sentence."""
    if scheduler is None:
        yield None
        return
    check_address(scheduler, "--scheduler")
    try:
        from kmbench.protocol.placement import Cluster

        cluster = Cluster(scheduler)
    except ImportError:
        raise UsageError("--scheduler needs Dask: pip install 'kmbench[dask]'.") from None
    except ImplementationError as exc:
        raise UsageError(f"--scheduler: {exc}.") from None
    try:
        yield cluster
    finally:
        cluster.close()


def numbers(option: str, text: str) -> list:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"{option} takes numbers separated by commas (e.g. 1e4,1e5); got {text!r}.") from None
    if not values:
        raise UsageError(f"{option} names no value.")
    return [int(v) if v == int(v) else v for v in values]


def refuse_ignored(stop, tol, max_iters, dataset, label_column, generation: dict) -> None:
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


def planned_datasets(n_text, dataset, d, centers, dtype, data_dir, label_column):
    """Checks the dataset options without writing anything. Returns each dataset's point
    count by name, and a function that then makes (generates or loads) the datasets."""
    if dataset:
        found = datasets.resolve(dataset, data_dir, label_column)
        return {found.name: found.n}, lambda: [found]
    sizes = point_counts(n_text)
    datasets.dtype_of(dtype)
    names = {datasets.blobs_name(n, d, centers, 1.0, 0, dtype): n for n in sizes}
    return names, lambda: [datasets.blobs(n, d, centers, 1.0, 0, dtype, data_dir) for n in sizes]
