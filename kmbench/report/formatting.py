"""How a number or a row reads in a table: times, ratios, rates, bytes, iteration counts, a
mismatch flagged beside its figure, and the markdown table itself."""

from __future__ import annotations

import math

from kmbench.data.records import THREADS_FASTEST
from kmbench.judge import precision
from kmbench.protocol import validate

# A verdict's precision, where the judge certified it in less than the data's: `ok (tf32)`.
SHORT_PRECISION = {"float32": "fp32", "tf32": "tf32", "float16": "fp16", "bfloat16": "bf16"}


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def seconds_text(value) -> str:
    """A time with the unit that keeps it readable: 123.4s, 1.234s, 12.345ms, 123.4us; "-" if missing."""
    if missing(value):
        return "-"
    seconds = float(value)
    if seconds >= 100:
        return f"{seconds:.1f}s"
    if seconds >= 1:
        return f"{seconds:.3f}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f}ms"
    return f"{seconds * 1e6:.1f}us"


def duration_text(value) -> str:
    """Seconds for short times; minutes and hours where a whole run is long (7m 16s)."""
    if missing(value) or value < 60:
        return seconds_text(value)
    minutes, seconds = divmod(round(float(value)), 60)
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m {seconds:02d}s"


def rough_duration(value: float) -> str:
    """An estimate's duration, as rough as it is: 75 s, 4 min, 1.5 h."""
    if value < 120:
        return f"{value:.0f} s"
    if value < 2 * 3600:
        return f"{value / 60:.0f} min"
    return f"{value / 3600:.1f} h"


def ratio_text(value) -> str:
    return "-" if missing(value) else f"{value:.2f}x"


def fraction_text(value) -> str:
    return "-" if missing(value) else f"{value:.1%}"


def rate_text(value) -> str:
    if missing(value):
        return "-"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.2f}{unit}/s"
    return f"{value:.0f}/s"


def status_text(status: str, certified, data, weak: bool = False, gpu_flags=None) -> str:
    """The verdict, and beside it the precision it was certified in where that is less than the
    data's (`certified`, `data`: precision names), so that no reader compares a TF32 row's time
    with a float32 row's unawares: `ok (tf32)`, `ok (fp16)`, `ok (fp32)` on float64 data;
    `weak` where most of its point decisions could go more than one way in that precision, so
    that the `ok` proves little there (kmbench.protocol.validate.weak): `ok (weak)`; and
    `throttled` or `shared` where its GPU slowed its clocks or held another program during its
    counted runs (`gpu_flags`: the flags, or the cells frame's text of them), so that its time is
    not read as the GPU's: `ok (throttled)` (its warnings say why)."""
    marks = []
    if isinstance(certified, str) and isinstance(data, str) and precision.narrower(certified, data):
        marks.append(SHORT_PRECISION.get(certified, certified))
    if weak is True and status == "ok":
        marks.append("weak")
    if isinstance(gpu_flags, str):
        gpu_flags = [flag.strip() for flag in gpu_flags.split(",") if flag.strip()]
    if status not in ("skipped", "error"):
        marks += list(gpu_flags or [])
    return f"{status} ({', '.join(marks)})" if marks else status


def gpu_flags_text(flags) -> str:
    """A record's GPU flags as the cells frame holds them: "throttled, shared", "" where none."""
    return ", ".join(flags)


def row_status(row) -> str:
    """status_text of a cells-frame row (kmbench.report.report)."""
    return status_text(row["status"], row.get("certified_in"), row.get("dtype"), row.get("weak"),
                       row.get("gpu_flags"))


def record_status(record) -> str:
    """status_text of a typed Lloyd record (kmbench.data.records.LloydRecord)."""
    return status_text(record.status, record.validation.get("dtype"), record.dataset.dtype,
                       validate.weak(record.validation), record.gpu_flags)


def skipped_summaries(group) -> list[str]:
    """The rows of a cells frame that could not run here, one line per reason (as the terminal
    sums them): "3 rows skipped (a, b, c): CuPy is not installed"."""
    skipped = group[group["status"] == "skipped"]
    lines = []
    for reason, rows in skipped.groupby(skipped["detail"].fillna("no reason given"), sort=False):
        names = list(dict.fromkeys(rows["label"]))  # a row skipped at several sizes counts once
        lines.append(f"{len(names)} row{'s' if len(names) > 1 else ''} skipped ({', '.join(names)}): {reason}")
    return lines


def flagged_text(row, text: str) -> str:
    """Every table shows a cell that is not `ok`: the figure is never shown bare."""
    if row["status"] == "ok":
        return text
    if row["status"] in ("error", "skipped"):
        return f"**{row['status']}**"
    return f"{text} **{row['status'].upper()}**"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    escape = lambda cell: str(cell).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def iterations_text(row) -> str:
    """Iterations executed; beside them what was asked where the two differ, and a mark where
    the row could not stop by the tolerance rule itself and was given the reference's count."""
    executed, reference = row["iters_executed"], row.get("reference_iterations")
    if missing(executed):
        return "-"
    given = row.get("stop_followed") == "reference count"
    expected = row["iterations"] if missing(reference) else reference
    if executed == expected:
        return f"{int(executed)} (reference's count)" if given else f"{int(executed)}"
    given_text = "reference's count; " if given else ""
    return f"{int(executed)} of {int(expected)} ({given_text}stopped early)"


def repeats_text(row) -> str:
    if missing(row["repeats"]):
        return "-"
    text = str(int(row["repeats"]))
    return text + " (time budget)" if row["stopped_by_budget"] else text


def billions_text(value) -> str:
    return "-" if missing(value) else f"{value / 1e9:.3g}"


def bytes_text(value) -> str:
    if missing(value):
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def floor_multiple(row, floor: str) -> str:
    """A row's time per iteration as a multiple of one of its floors ("compute" or "memory")."""
    floor = row.get(f"{floor}_floor_s")
    if missing(floor) or missing(row.get("per_iter_s")) or not floor:
        return "-"
    return f"{row['per_iter_s'] / floor:.2f}x"


def tried_text(tried) -> str | None:
    """What a thread-count calibration saw, per iteration at each count: "1: 1.590ms, 4: 1.200ms"."""
    if not tried:
        return None
    return ", ".join(f"{int(count)}: {seconds_text(seconds)}" for count, seconds in tried)


def chosen_threads_text(row) -> str | None:
    """A row run at the count where it was fastest, in words: "at 4 of 64 threads, its fastest
    (per iteration at 1: 1.590ms, ...)"; None for a row whose count was asked for, or none."""
    if row.get("threads_chosen") != THREADS_FASTEST or missing(row.get("threads")):
        return None
    cores = "" if missing(row.get("threads_of")) else f" of {int(row['threads_of'])}"
    tried = "" if missing(row.get("threads_tried")) else f" (per iteration at {row['threads_tried']})"
    return f"at {int(row['threads'])}{cores} threads, its fastest{tried}"
