"""The task suites' tables in markdown (the markdown exporter's assign and batched views):
document 001's ladder with its published microseconds beside ours, and document 003's batched
table with the speedups it claims beside the ones measured. A row that does not match the
oracle says so in its status and in its numbers. `suite` is the task suite the records are of
(its name, title and published key)."""

from __future__ import annotations

from kmbench import registry
from kmbench.data.records import AssignRecord, BatchedRecord, TaskRecord
from kmbench.report import published
from kmbench.protocol import environment
from kmbench.protocol.gpu_state import NOTE_PREFIXES as GPU_NOTE_PREFIXES
from kmbench.report.formatting import seconds_text, status_text


def _status(record: TaskRecord) -> str:
    """The verdict; a GPU flag beside it with why (these tables have no notes below them)."""
    if record.status != "ok":
        return f"**{record.status}**: {record.detail}"
    if not record.gpu_flags:
        return record.status
    why = [warning for warning in record.warnings if warning.startswith(GPU_NOTE_PREFIXES)]
    return f"{status_text(record.status, None, None, gpu_flags=record.gpu_flags)}: {'; '.join(why)}"


def _flagged(text: str, record: TaskRecord) -> str:
    """A number from a run that did not match the oracle is shown struck, never as a win."""
    return text if record.status == "ok" or text == "-" else f"~~{text}~~"


def _by_workload(records: list[TaskRecord]) -> dict[str, list[TaskRecord]]:
    grouped: dict[str, list[TaskRecord]] = {}
    for record in records:
        grouped.setdefault(record.workload, []).append(record)
    return grouped


def _copy_bandwidth(record: TaskRecord) -> float | None:
    """The measured copy rate of the GPU the record ran on (bytes read plus written per second)."""
    return (record.env.get("gpu") or {}).get("copy_bandwidth_Bps")


def _published_steps(key: str | None) -> dict[str, str]:
    if not key:
        return {}
    shown: dict[str, str] = {}
    for entry in published.table(key)["steps"]:
        figure = entry["microseconds"]
        text = "no gain over V5 (no figure)" if figure is None else f"{figure}"
        if entry.get("variant"):
            text = f"{text} ({entry['variant']})"
        shown[entry["step"]] = f"{shown[entry['step']]}, {text}" if entry["step"] in shown else text
    return shown


def _heading(suite, records: list[TaskRecord], timing: str) -> list[str]:
    machine = environment.describe_machine(next((r.env for r in records if r.env), None))
    return [f"# kmbench reproduce {suite.name}: {suite.title}", "", f"Machine: {machine}. {timing}", ""]


def assign_markdown(suite, records: list[AssignRecord]) -> str:
    table = published.table(suite.published) if suite.published else None
    lines = _heading(suite, records, "One pass = labels for every point and the changed flag; time per pass is "
                     "the mean of the counted repeats, each the mean of back-to-back launches in one CUDA graph, "
                     "timed with CUDA events.")
    if table:
        lines += [f"Published: {table['source']} ({table['hardware']}), d = {table['protocol']['d']}, "
                  f"n = {table['protocol']['n']}, k = {table['protocol']['k']}, {table['protocol']['statistic']}.", ""]
    steps = _published_steps(suite.published)
    for workload, rows in _by_workload(records).items():
        spec = rows[0].spec
        floor = next((r.floor_s for r in rows if r.floor_s), None)
        shows_published = table and spec["d"] == table["protocol"]["d"] and spec["k"] == table["protocol"]["k"]
        lines += [f"## {workload}", "",
                  "| step | what changed | published us | measured us | speedup over the step before | "
                  "over V1 | of copy bandwidth | status |", "|---|---|---|---|---|---|---|---|"]
        first = previous = None
        for record in rows:
            step = record.step
            seconds = record.seconds
            measured = _flagged(f"{seconds * 1e6:.1f}", record) if seconds else "-"
            gain = f"{previous / seconds:.2f}x" if seconds and previous else "-"
            over_first = f"{first / seconds:.2f}x" if seconds and first else "-"
            bandwidth = "-"
            ceiling = _copy_bandwidth(record)
            if seconds and record.bytes_per_pass and ceiling:
                bandwidth = f"{record.bytes_per_pass / seconds / ceiling:.0%}"
            shown = steps.get(step, "-") if shows_published else "-"
            lines.append(f"| {record.label} | {record.description} | {shown} | {measured} | {gain} | "
                         f"{over_first} | {bandwidth} | {_status(record)} |")
            if seconds:
                previous = seconds
                first = first or seconds
        if floor:
            ceiling = _copy_bandwidth(rows[0])
            moved = next((r.bytes_per_pass for r in rows if r.bytes_per_pass), None)
            share = f"{moved / floor / ceiling:.0%}" if moved and ceiling else "-"
            lines.append(f"| floor | the same bytes moved, no search (floor.cu; not a step) | - | {floor * 1e6:.1f} "
                         f"| - | - | {share} | - |")
        lines.append("")
    lines += ["Bytes per pass: the points, the previous labels and the new labels (int32), each once; "
              "the copy bandwidth is measured on the same GPU (bytes read plus written per second) with "
              "buffers far larger than its L2. A pass over 2^20 points touches 12-42 MB, which can stay in a "
              "large L2 (50 MB on an H100) from one launch to the next: there the fraction compares an "
              "L2-fed pass with a DRAM copy.", ""]
    return "\n".join(lines)


def batched_markdown(suite, records: list[BatchedRecord]) -> str:
    table = published.table(suite.published) if suite.published else None
    lines = _heading(suite, records, "Time: the whole batch, one launch (GPU rows, CUDA events) or the host clock "
                     "(CPU rows); set-up and upload excluded. The slow CPU rows stop at a time budget; their "
                     "whole-batch time is *extrapolated* from the rows they computed, and marked so.")
    for workload, rows in _by_workload(records).items():
        lines += [f"## {workload}", "",
                  "| implementation | status | time (whole batch) | rows per second | speedup over the scikit-learn loop "
                  "| mean iterations per seed |", "|---|---|---|---|---|---|"]
        baseline = next((r for r in rows if r.impl == registry.baseline("batched") and r.status == "ok"), None)
        base_seconds = baseline and baseline.whole_seconds
        for record in rows:
            whole = record.whole_seconds
            time_text = seconds_text(whole) if whole else "-"
            if record.extrapolated_seconds:
                time_text += f" (extrapolated from {record.rows_done} rows)"
            rate = f"{record.rows_per_s:.3g}" if record.rows_per_s else "-"
            speedup = f"{base_seconds / whole:.0f}x" if base_seconds and whole else "-"
            iterations = f"{record.iterations_mean:.1f}" if record.iterations_mean is not None else "-"
            lines.append(f"| {record.label} | {_status(record)} | {_flagged(time_text, record)} | "
                         f"{_flagged(rate, record)} | {_flagged(speedup, record)} | {iterations} |")
        lines.append("")
        lines += _claims(table, rows, base_seconds)
    return "\n".join(lines)


def _claims(table: dict | None, rows: list[BatchedRecord], base_seconds: float | None) -> list[str]:
    if not table:
        return []
    seconds = {r.impl: r.seconds for r in rows if r.status == "ok"}
    measured = {
        "CUDA C over the scikit-learn loop (up to)": (base_seconds, seconds.get("batched-cuda-c")),
        "CUDA C over Numba": (seconds.get("batched-numba"), seconds.get("batched-cuda-c")),
    }
    lines = [f"Published ({table['source']}, {table['hardware']}) beside measured:", "",
             "| claim | published | measured |", "|---|---|---|"]
    for claim in table["claims"]:
        slow, fast = measured.get(claim["what"], (None, None))
        lines.append(f"| {claim['what']} | {claim['speedup']:g}x | {f'{slow / fast:.3g}x' if slow and fast else '-'} |")
    kmbench = seconds.get("batched-kmbench")
    if kmbench and base_seconds:
        lines.append(f"| kmbench batched over the scikit-learn loop | - | {base_seconds / kmbench:.3g}x |")
    if kmbench and seconds.get("batched-cuda-c"):
        lines.append(f"| kmbench batched over 003's CUDA C design | - | {seconds['batched-cuda-c'] / kmbench:.3g}x |")
    return lines + [""]


def page(suite, records: list[TaskRecord]) -> str:
    """One task suite's page: the assign or the batched tables, as the records' task is."""
    return assign_markdown(suite, records) if suite.task == "assign" else batched_markdown(suite, records)
