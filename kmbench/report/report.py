"""Shape stored records into tables: one row per measured cell, and the published
comparison of document 000. The exporters (`kmbench.report.exporters`) render these frames."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kmbench import registry
from kmbench.data import cells, records
from kmbench.data.records import THREADS_FASTEST, LloydRecord
from kmbench.protocol import ceilings, environment, validate
from kmbench.report import published
from kmbench.report.formatting import gpu_flags_text, tried_text
from kmbench.protocol import describe_stop

if TYPE_CHECKING:  # pandas itself is imported where a frame is made: `kmbench --help` needs none
    import pandas as pd

# Which way is better, per metric: every ratio against the baseline is taken through it.
POLARITY = {"mean_s": "lower", "per_iter_s": "lower", "dist_evals_per_s": "higher",
            "memory_fraction": "higher", "arithmetic_fraction": "higher", "roofline_fraction": "higher"}
NOISE_FRACTION = 0.03  # measured means closer than this (or two std devs) are a tie


def _group(record: LloydRecord) -> str:
    data, params = record.dataset, record.params
    parameters = {key: value for key, value in data.parameters.items() if key not in ("n", "path")}
    described = " ".join(f"{key}={value}" for key, value in parameters.items())
    return (f"{data.generator} {described} {data.dtype}; k={params.k}, "
            f"{_stop(record)}, init {params.init} (seed {params.seed})")


def _stop(record: LloydRecord) -> str:
    params = record.params
    return describe_stop(params.iterations, params.tol if params.stop == "tolerance" else None)


def _roofline(stored: dict) -> dict:
    """The cell's floors per iteration (compute, in its declared unit, and memory), each as a
    fraction of its time, and its position on the roofline: the larger, named by its limit."""
    floors = ceilings.floors(stored)
    found = ceilings.fractions(stored, floors)
    limit = max(found, key=found.get) if found else None
    unit = floors.get("compute_unit")
    return {"compute_floor_s": floors.get("compute_floor_s"), "compute_unit": unit,
            "memory_floor_s": floors.get("memory_floor_s"), "memory_fraction": found.get("memory"),
            "arithmetic_fraction": found.get(unit), "roofline_fraction": found.get(limit), "roofline_limit": limit}


def _label(record: LloydRecord) -> str:
    """The row's label, naming its Dask workers (one per GPU for the GPU rows) where it records
    them: each count is a cell of its own (kmbench.data.cells), as each thread count is for a
    row that names its threads."""
    workers = record.workers
    if workers is None:
        return record.label
    return f"{record.label} ({workers} worker{'' if workers == 1 else 's'})"


def _row(record: LloydRecord) -> dict:
    iterate = record.times.iterate or records.Statistic()
    data, params = record.dataset, record.params
    return {
        "group": _group(record),
        "dataset": data.name,
        "n": data.n,
        "d": data.d,
        "k": params.k,
        "iterations": params.iterations,
        "stop": _stop(record),
        "stop_rule": params.stop,
        "stop_followed": record.stop_followed,
        "reference_iterations": record.reference_iterations,
        "init": params.init,
        "seed": params.seed,
        "impl": record.impl,
        "label": _label(record),
        "status": record.status,
        # The precision the judge certified the row in, beside the data's (formatting.row_status).
        "certified_in": record.validation.get("dtype"),
        "dtype": data.dtype,
        "weak": validate.weak(record.validation),  # most decisions left open: the ok proves little
        # Timed while its GPU was throttled or shared (kmbench.protocol.gpu_state); its warnings say why.
        "gpu_flags": gpu_flags_text(record.gpu_flags),
        "detail": record.detail,
        "iters_executed": record.iterations_executed,
        "repeats": record.repeats_done,
        "stopped_by_budget": record.stopped_by_budget,
        # Each counted repeat's Lloyd loop, so a CSV reader can run its own statistics.
        "repeat_times_s": record.times.extra.get("iterate_values"),
        "mean_s": iterate.mean,
        "median_s": iterate.median,
        "min_s": iterate.min,
        "std_s": iterate.std,
        "cv": iterate.cv,
        "per_iter_s": record.per_iteration_s,
        "dist_evals_per_s": record.distance_evals_per_s,
        **_roofline(record.to_dict()),
        # What a row is built on and computes in, as its build information declares it.
        "threads": record.threads,
        # How the count came about: forced (--threads) or the row's fastest, found by a calibration
        # (kmbench.protocol.threads) that tried the counts below, out of the cores it had.
        "threads_chosen": record.thread_choice.get("how"),
        "threads_of": record.thread_choice.get("cores"),
        "threads_tried": tried_text(record.thread_choice.get("tried")),
        "workers": record.workers,
        "library": record.library,
        "precision": record.precision,
        "host_memory_bytes": record.memory_bytes("host"),
        "gpu_memory_bytes": record.memory_bytes("gpu"),
        "setup_s": record.times.setup,
        "first_run_s": record.times.first_run,
        "wall_mean_s": record.times.wall.mean if record.times.wall else None,
        "centroid_error": record.validation.get("centroid_error"),
        "inertia_difference": record.validation.get("inertia_difference"),
        "warnings": "; ".join(record.warnings),
        "machine": environment.describe_machine(record.env),
        "timestamp": record.timestamp,
    }


def _speedups(cells: pd.DataFrame, column: str) -> pd.Series:
    """How many times better than the baseline each cell is on `column` (same dataset group
    and n), the direction taken from POLARITY: above 1 always means better. A baseline measured
    at several thread counts (`run --threads 1,2`) is held against each row at the row's own
    count where it has one, else at its best count: scikit-learn at 2 threads beside a busy
    program was 17 times slower than at 1, and a speedup over that would flatter the row. A
    count the calibration chose (each row at its fastest) is no count asked for: such a row is
    held against the baseline at its best."""
    import pandas as pd

    base = cells[(cells["impl"] == registry.baseline("lloyd")) & (cells["status"] == "ok")]
    by_problem = base.groupby(["group", "n"])[column]
    strongest = by_problem.min() if POLARITY[column] == "lower" else by_problem.max()
    calibrated = cells.get("threads_chosen", pd.Series(None, index=cells.index, dtype=object)) == THREADS_FASTEST
    asked = cells["threads"].mask(calibrated)
    counted = base.assign(threads=asked).dropna(subset=["threads"])
    same = dict(zip(zip(counted["group"], counted["n"], counted["threads"]), counted[column]))
    keys = zip(cells["group"], cells["n"], asked)
    baseline = pd.Series([same.get((group, n, threads), strongest.get((group, n))) for group, n, threads in keys],
                         index=cells.index, dtype=float)
    value = cells[column].astype(float)
    return baseline / value if POLARITY[column] == "lower" else value / baseline


def _published_columns(cells: pd.DataFrame, chosen: list[LloydRecord]) -> pd.DataFrame:
    """Attach document 000's published seconds and speedup to the cells it covers."""
    import pandas as pd

    table = published.table("python-cpp-cuda")
    seconds = {(row["impl"], int(n)): value for row in table["rows"] for n, value in row["seconds"].items()}
    baseline = {int(n): value for n, value in next(
        row for row in table["rows"] if row["impl"] == table["baseline"])["seconds"].items()}
    covered = [published.matches(record, table["protocol"]) for record in chosen]
    pub = [seconds.get((impl, n)) if hit else None
           for impl, n, hit in zip(cells["impl"], cells["n"], covered)]
    cells["published_s"] = pd.Series(pub, index=cells.index, dtype=float)
    cells["published_speedup_vs_sklearn"] = cells["n"].map(baseline).astype(float) / cells["published_s"]
    cells["published_source"] = cells["published_s"].notna().map({True: table["source"], False: ""})
    return cells


def cells_frame(lloyd: list[LloydRecord | dict]) -> pd.DataFrame:
    """One row per Lloyd cell; the latest record wins where a cell was measured more than once.
    The records come typed (kmbench.data.records) or as the objects a run just built."""
    import pandas as pd

    if not lloyd:
        return pd.DataFrame()
    chosen = [records.typed(record) for record in cells.newest(lloyd)]
    frame = pd.DataFrame([_row(record) for record in chosen])
    frame["speedup_vs_sklearn"] = _speedups(frame, "mean_s")
    # scikit-learn stops at convergence; per iteration compares the same unit of work.
    frame["speedup_per_iter_vs_sklearn"] = _speedups(frame, "per_iter_s")
    frame = _published_columns(frame, chosen)
    order = {name: index for index, name in enumerate(_row_order())}
    frame["_order"] = frame["impl"].map(lambda name: order.get(name, len(order)))
    # Groups by their smallest dataset, then k, so k = 3 comes before k = 10.
    frame["_size"] = frame.groupby("group")["n"].transform("min")
    return (frame.sort_values(["_size", "k", "group", "_order", "n"]).drop(columns=["_order", "_size"])
            .reset_index(drop=True))


def _row_order() -> list[str]:
    """Document 000's row order, with implementations it does not have after their kin, as the
    rows declare it (`ranked_in_reports`, `row_order`)."""
    return registry.ranked_in_reports()


def _distinguishable(a, b) -> bool:
    gap = abs(a["mean_s"] - b["mean_s"])
    noise = max(2 * ((a.get("std_s") or 0) + (b.get("std_s") or 0)),
                NOISE_FRACTION * min(a["mean_s"], b["mean_s"]))
    return gap > noise


def ordering_changes(cells: pd.DataFrame) -> list[str]:
    """Pairs of rows whose published order (faster/slower) is reversed in the measurement,
    beyond measurement noise."""
    rows = cells.dropna(subset=["published_s", "mean_s"])
    rows = rows[rows["status"] == "ok"]
    changes = []
    for n, group in rows.groupby("n"):
        group = group.reset_index(drop=True)
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                a, b = group.iloc[i], group.iloc[j]
                published_faster = a["published_s"] < b["published_s"]
                measured_faster = a["mean_s"] < b["mean_s"]
                if published_faster != measured_faster and _distinguishable(a, b):
                    fast, slow = (a, b) if published_faster else (b, a)
                    changes.append(
                        f"n={n}: published {fast['label']} faster than {slow['label']} "
                        f"({fast['published_s']:.5f}s vs {slow['published_s']:.5f}s); measured the "
                        f"other way ({fast['mean_s']:.5f}s vs {slow['mean_s']:.5f}s)")
    return changes
