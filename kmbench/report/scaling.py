"""The strong-scaling view of a multi-GPU run (`kmbench scale`, `make scale-dask-cuda`): time per
iteration of each (implementation, GPUs, k) on one dataset, the speedup over the same row on one
GPU, the parallel efficiency, the time against kmbench-gpu alone on one GPU (where the run has
it) and, for the rows that record it, the collective's share of an iteration. A cell that is not
`ok` is shown with its status, not a time. Each cell says when and with which code it was
measured: a long run is taken a workload at a time, over sessions, and a cell measured before a
change keeps its old record until it runs again."""

from __future__ import annotations

from kmbench.data.records import LloydRecord
from kmbench.report.formatting import record_status

ALONE = "kmbench-gpu"  # the one-GPU row without Dask that every GPU set is held against


def _per_iteration(record: LloydRecord | None) -> float | None:
    return record.per_iteration_s if record and record.status == "ok" else None


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.1f} us"


def _communication(record: LloydRecord, per: float | None) -> str:
    """Time per iteration inside the collective, and its share of the iteration."""
    inside = record.communication_per_iteration() if per else None
    return f"{_time(inside)} ({inside / per:.1%})" if inside else "-"


def _code(record: LloydRecord) -> str:
    """The first eight digits of the record's code hash ("?" where it has none)."""
    return (record.env.get("code_hash") or "?")[:8]


def _measured(record: LloydRecord) -> str:
    """The record's date and its code."""
    return f"{(record.timestamp or '')[:10] or '?'}, code {_code(record)}"


def _same_code(other: LloydRecord | None, record: LloydRecord) -> LloydRecord | None:
    """`other`, where it was measured with the same code as `record` (a ratio across a change of
    the code would measure the change, not the GPUs)."""
    if other is None or other.env.get("code_hash") != record.env.get("code_hash"):
        return None
    return other


def _versions_note(cells: dict) -> list[str]:
    """A sentence under the table where its cells come from more than one version of the code."""
    hashes = sorted({_code(r) for r in cells.values()})
    if len(hashes) < 2:
        return []
    return ["", f"These cells were measured with {len(hashes)} versions of the code ({', '.join(hashes)}): "
                "speedups and ratios are taken only between cells of one version."]


def markdown(records: list[LloydRecord]) -> str:
    cells: dict[tuple, LloydRecord] = {}
    for record in records:  # the newest record of each cell wins; a GPU set is part of the cell here
        cells[(record.impl, record.dataset.name, record.params.k, record.gpus)] = record
    gpu = next(((r.env.get("gpu") or {}).get("name") for r in records if r.env), None) or "?"
    lines = [f"# Strong scaling: Lloyd on several GPUs ({gpu})", "",
             "Time per iteration is the mean of the counted repeats over the iterations run: the slowest "
             "rank's CUDA-event time for kmbench-gpu-dask, the host clock for the Dask-reduction rows (each "
             f"iteration ends with the reduced partials on the client). `x {ALONE}`: the row's time over "
             f"{ALONE}'s alone on one GPU, same data and k. Communication: time per iteration inside the "
             "all-reduce, and its share of the iteration.", "",
             f"| implementation | dataset | n | k | GPUs | time per iteration | speedup over 1 GPU | efficiency "
             f"| x {ALONE} | communication | status | measured |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (impl, name, k, gpus), record in sorted(cells.items()):
        per = _per_iteration(record)
        base = _per_iteration(_same_code(cells.get((impl, name, k, 1)), record))
        alone = _per_iteration(_same_code(cells.get((ALONE, name, k, 1)), record))
        speedup = base / per if base and per else None
        lines.append(f"| {impl} | {name} | {record.dataset.n:,} | {k} | {gpus} | "
                     f"{_time(per)} | {f'{speedup:.2f}x' if speedup else '-'} | "
                     f"{f'{speedup / gpus:.0%}' if speedup else '-'} | "
                     f"{f'{per / alone:.2f}x' if per and alone and impl != ALONE else '-'} | "
                     f"{_communication(record, per)} | {record_status(record)}"
                     f"{': ' + record.detail if record.status != 'ok' else ''} | {_measured(record)} |")
    return "\n".join(lines + _versions_note(cells)) + "\n"
