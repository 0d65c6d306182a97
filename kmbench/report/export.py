"""Exporters, one per format, all rendering the same cells frame from `kmbench.report.report`."""

from __future__ import annotations

import json
import math

import pandas as pd

from kmbench.report import published, report
from kmbench.protocol.timing import format_seconds


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _seconds(value) -> str:
    return "-" if _missing(value) else format_seconds(float(value))


def _duration(value) -> str:
    """Seconds for short times; minutes and hours where a whole run is long (7m 16s)."""
    if _missing(value) or value < 60:
        return _seconds(value)
    minutes, seconds = divmod(round(float(value)), 60)
    return f"{minutes // 60}h {minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m {seconds:02d}s"


def _ratio(value) -> str:
    return "-" if _missing(value) else f"{value:.2f}x"


def _fraction(value) -> str:
    return "-" if _missing(value) else f"{value:.1%}"


def _rate(value) -> str:
    if _missing(value):
        return "-"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.2f}{unit}/s"
    return f"{value:.0f}/s"


def _flagged(row, text: str) -> str:
    """Every table shows a cell that is not `ok`: the figure is never shown bare."""
    if row["status"] == "ok":
        return text
    if row["status"] in ("error", "skipped"):
        return f"**{row['status']}**"
    return f"{text} **{row['status'].upper()}**"


def _table(header: list[str], rows: list[list[str]]) -> str:
    escape = lambda cell: str(cell).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def iterations_text(row) -> str:
    """Iterations executed; beside them what was asked where the two differ, and a mark where
    the row could not stop by the tolerance rule itself and was given the reference's count."""
    executed, reference = row["iters_executed"], row.get("reference_iterations")
    if _missing(executed):
        return "-"
    given = row.get("stop_followed") == "reference count"
    expected = row["iterations"] if _missing(reference) else reference
    if executed == expected:
        return f"{int(executed)} (reference's count)" if given else f"{int(executed)}"
    given_text = "reference's count; " if given else ""
    return f"{int(executed)} of {int(expected)} ({given_text}stopped early)"


def _repeats(row) -> str:
    if _missing(row["repeats"]):
        return "-"
    text = str(int(row["repeats"]))
    return text + " (time budget)" if row["stopped_by_budget"] else text


def _by_size(part: pd.DataFrame, sizes) -> list[str]:
    cells = []
    for n in sizes:
        rows = part[part["n"] == n]
        cells.append(_flagged(rows.iloc[0], _seconds(rows.iloc[0]["mean_s"])) if len(rows) else "")
    return cells


def _libraries_markdown(group: pd.DataFrame) -> list[str]:
    """One line per row that declares its library or its precision: which version computed the
    cell, and in what (FP32, TF32, the data's dtype...). Older records may lack both columns."""
    declared = [column for column in ("library", "precision") if column in group]
    if not declared:
        return []
    rows = group.drop_duplicates("label").dropna(subset=declared, how="all")
    if rows.empty:
        return []
    return ["", "What each row is built on and computes in:", "",
            _table(["Implementation", "library", "computes in"],
                   [[row["label"], "-" if _missing(row.get("library")) else str(row["library"]),
                     "-" if _missing(row.get("precision")) else str(row["precision"])]
                    for _, row in rows.iterrows()])]


def _floor_multiple(row, precision: str) -> str:
    """A row's time per iteration as a multiple of the cell's measured GEMM in `precision`."""
    floor = row.get(f"gemm_{precision}_s")
    if _missing(floor) or _missing(row.get("per_iter_s")) or not floor:
        return "-"
    return f"{row['per_iter_s'] / floor:.2f}x"


def _gemm_floor_markdown(group: pd.DataFrame) -> list[str]:
    """High-d cells: every row beside cuBLAS's GEMM of the cell's shape on the same GPU."""
    if "gemm_tf32_s" not in group or group["gemm_tf32_s"].isna().all():
        return []
    timed = group.dropna(subset=["gemm_tf32_s"])
    return ["", "Against the measured GEMM floor: cuBLAS's product of the cell's shape, (n x d) times (d x k), "
            "the work of one assignment, timed on the same GPU in FP32 and in TF32; each row's time per "
            "iteration as a multiple of each:", "",
            _table(["Implementation", "n", "per iteration", "FP32 GEMM", "multiple", "TF32 GEMM", "multiple"],
                   [[row["label"], f"{row['n']:,}", _flagged(row, _seconds(row["per_iter_s"])),
                     _seconds(row["gemm_fp32_s"]), _floor_multiple(row, "fp32"),
                     _seconds(row["gemm_tf32_s"]), _floor_multiple(row, "tf32")] for _, row in timed.iterrows()])]


def _group_markdown(group: pd.DataFrame) -> list[str]:
    sizes = sorted(group["n"].unique())
    out = [_table(["Implementation"] + [f"n = {n:,}" for n in sizes],
                  [[label] + _by_size(part, sizes) for label, part in group.groupby("label", sort=False)])]
    out.append("")
    out.append(_table(
        ["Implementation", "n", "status", "iterations", "repeats", "mean", "median", "min", "std",
         "per iteration", "distance evals", "vs scikit-learn", "per iteration vs scikit-learn"],
        [[row["label"], f"{row['n']:,}", row["status"], iterations_text(row), _repeats(row),
          _seconds(row["mean_s"]), _seconds(row["median_s"]), _seconds(row["min_s"]),
          _seconds(row["std_s"]), _seconds(row["per_iter_s"]), _rate(row["dist_evals_per_s"]),
          _ratio(row["speedup_vs_sklearn"]), _ratio(row["speedup_per_iter_vs_sklearn"])]
         for _, row in group.iterrows()],
    ))
    if group["roofline_fraction"].notna().any():
        out += ["", "GPU rows on the roofline: the declared bytes per iteration (each point read "
                "once) over the time, as a fraction of the GPU's measured copy bandwidth; the "
                "distance evaluations times the declared FP32 instructions per evaluation, as a "
                "fraction of its measured FP32 issue rate; the cell sits at the larger:", ""]
        out.append(_table(["Implementation", "n", "of copy bandwidth", "of FP32 issue rate", "roofline"],
                          [[row["label"], f"{row['n']:,}", _fraction(row["memory_fraction"]),
                            _fraction(row["arithmetic_fraction"]),
                            _flagged(row, f"{row['roofline_fraction']:.1%} of {row['roofline_limit']}")]
                           for _, row in group.dropna(subset=["roofline_fraction"]).iterrows()]))
    out += _gemm_floor_markdown(group)
    out += _libraries_markdown(group)
    notes = [f"- {row['label']} (n={row['n']:,}): {row['status']}: {row['detail']}"
             for _, row in group.iterrows() if row["status"] != "ok" and row["detail"]]
    notes += [f"- {row['label']} (n={row['n']:,}): {row['warnings']}"
              for _, row in group.iterrows() if row["warnings"]]
    if notes:
        out += ["", "Notes:", *notes]
    return out


def _published_markdown(cells: pd.DataFrame) -> list[str]:
    table = published.table("python-cpp-cuda")
    rows = cells.dropna(subset=["published_s"])
    labels = {row["impl"]: row["label"] for row in table["rows"]}
    out = ["## Document 000 reproduced: published vs measured", "",
           f"Published: {table['title']} (`{table['source']}`), {table['hardware']}; "
           f"{table['protocol']['statistic']}. Measured: the same protocol (blobs, d=2, 5 centers, "
           "k=5, 300 iterations) on the machine named below.", ""]
    if not rows.empty:
        out += ["Measured on: " + ", ".join(sorted(rows["machine"].unique())), ""]
    if rows.empty:
        return out + ["No measured cell matches the published protocol yet: run "
                      "`kmbench run --n 100,100000` (or `kmbench reproduce python-cpp-cuda`)."]
    out.append(_table(
        ["Implementation", "n", "published", "measured", "measured / published",
         "published vs scikit-learn", "measured vs scikit-learn", "per iteration vs scikit-learn", "status"],
        [[labels.get(row["impl"], row["label"]), f"{row['n']:,}", _seconds(row["published_s"]),
          _flagged(row, _seconds(row["mean_s"])),
          _ratio(row["mean_s"] / row["published_s"]) if not _missing(row["mean_s"]) else "-",
          _ratio(row["published_speedup_vs_sklearn"]), _ratio(row["speedup_vs_sklearn"]),
          _ratio(row["speedup_per_iter_vs_sklearn"]), row["status"]] for _, row in rows.iterrows()],
    ))
    absent = [row["label"] for row in table["rows"] if row["impl"] not in set(rows["impl"])]
    if absent:
        out += ["", "Published rows with no measurement here: " + ", ".join(absent) + "."]
    changes = report.ordering_changes(rows)
    out += ["", "Ordering: " + ("every published faster/slower relation holds in the measurement "
                               "(ties within noise are not counted)."
                               if not changes else "the published ordering does not hold everywhere "
                               "(pairs within measurement noise, 3% or two standard deviations, are not counted):")]
    out += [f"- {change}" for change in changes]
    out += ["", "scikit-learn stops when no label changes, so it may run fewer than 300 iterations "
            "(its count is in the detail table above); the per-iteration column compares the same "
            "unit of work. The published speedups are total times, as the document reported them."]
    return out


def _billions(value) -> str:
    return "-" if _missing(value) else f"{value / 1e9:.3g}"


def rates_markdown(cells: pd.DataFrame, key: str) -> list[str]:
    """Document 002's view: the computation rate C = k*n*h/t (billions per second) per
    implementation, one table per dataset with k across, and the published peaks beside the
    peaks we measured. A row that is not `ok` is flagged where its figure stands."""
    table = published.table(key)
    out = [f"## {table['title']}: published rates vs measured", "",
           f"Published: `{table['source']}`, {table['hardware']}; {table['protocol']['statistic']}. "
           f"Rate: {table['rate']}; h is the iterations each run executed.", ""]
    for dataset, part in cells.groupby("dataset", sort=False):
        ks = sorted(part["k"].unique())
        out += [f"C in billions per second on {dataset} (n = {part['n'].iloc[0]:,}):", ""]
        rows = []
        for label, rows_of in part.groupby("label", sort=False):
            cells_by_k = {row["k"]: row for _, row in rows_of.iterrows()}
            rows.append([label] + [_flagged(cells_by_k[k], _billions(cells_by_k[k]["dist_evals_per_s"]))
                                   if k in cells_by_k else "" for k in ks])
        out += [_table(["Implementation"] + [f"k = {k}" for k in ks], rows), ""]
    peaks = []
    for peak in table["peaks"]:
        mine = cells[(cells["impl"] == peak["impl"]) & (cells["status"] == "ok")]
        if "k" in peak:
            mine = mine[mine["k"] == peak["k"]]
        best = mine.loc[mine["dist_evals_per_s"].idxmax()] if mine["dist_evals_per_s"].notna().any() else None
        where = f"n = {best['n']:,}, k = {best['k']}, h = {int(best['iters_executed'])}" if best is not None else "-"
        measured = best["dist_evals_per_s"] if best is not None else None
        peaks.append([peak["what"], peak["impl"], _billions(peak["rate"]), _billions(measured), where,
                      _ratio(measured / peak["rate"]) if measured else "-"])
    out += ["Peaks (only `ok` cells count):", "",
            _table(["published figure", "our row", "published (billion/s)", "measured (billion/s)",
                    "measured at", "measured / published"], peaks)]
    return out


def _bytes(value) -> str:
    if _missing(value):
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _whole_run(row, reference_iterations) -> str:
    """The measured whole run, or for a row cut to a few iterations by its time budget the
    per-iteration time times the reference's iteration count, labelled as such."""
    if row["stop_rule"] != "iterations":
        return _flagged(row, _duration(row["mean_s"]))
    if _missing(reference_iterations) or _missing(row["per_iter_s"]):
        return "-"
    estimate = row["per_iter_s"] * reference_iterations
    return _flagged(row, f"~{_duration(estimate)} (extrapolated from {int(row['iters_executed'])} iterations "
                         f"to {int(reference_iterations)})")


def whole_run_markdown(cells: pd.DataFrame, key: str) -> list[str]:
    """Document 004's view: whole runs to the tolerance, with memory, beside the published
    table. Rows cut by a time budget (run for a few iterations under the iterations rule) are
    extrapolated to the reference's iteration count, and say so."""
    table = published.table(key)
    protocol = table["protocol"]
    out = [f"## {table['title']}: published whole runs vs measured", "",
           f"Published: `{table['source']}`, {table['section']}; {table['hardware']}; "
           f"{protocol['statistic']}. Protocol: {protocol['n']:,} x {protocol['d']} points, k = {protocol['k']:,}, "
           f"{protocol['init']} start, stop when at most {protocol['tol']:.0%} of the points change.", "",
           "Memory measured: peak GPU memory in use on the device and peak growth of the process's "
           "resident memory, above what was in use when the cell started (caches emptied first).", ""]
    by_impl = {row["impl"]: row for row in table["rows"] if row["impl"]}
    for (dataset, k), part in cells.groupby(["dataset", "k"], sort=False):
        followed = part[part["stop_rule"] != "iterations"].dropna(subset=["reference_iterations"])
        reference = followed["reference_iterations"].iloc[0] if len(followed) else None
        out += [f"{dataset}, k = {k:,}; the float64 reference stops after "
                f"{int(reference) if reference is not None else '?'} iterations:", ""]
        rows = []
        for _, row in part.iterrows():
            mine = by_impl.get(row["impl"], {})
            published_time = (("> " if mine.get("more_than") else "") + _duration(mine["seconds"])) if mine else "-"
            rows.append([row["label"], published_time, _bytes(mine.get("memory_bytes")), iterations_text(row),
                         _flagged(row, _seconds(row["per_iter_s"])), _whole_run(row, reference),
                         _bytes(row.get("gpu_memory_bytes")), _bytes(row.get("host_memory_bytes")), row["status"]])
        out += [_table(["Implementation", "published time", "published memory", "iterations", "per iteration",
                        "whole run", "GPU memory", "host memory", "status"], rows), ""]
    missing = [f"{row['label']} ({row.get('note') or 'no row here'})" for row in table["rows"]
               if not row["impl"] or row["impl"] not in set(cells["impl"])]
    if missing:
        out += ["Published rows not measured here: " + "; ".join(missing) + "."]
    return out


OURS = "kmbench-gpu"


def peer_markdown(cells: pd.DataFrame) -> list[str]:
    """Our fast row against the best other `ok` row of the same cell (time per iteration),
    with its position on the roofline."""
    out = ["## kmbench-gpu against the best peer in the same run", "",
           "Time per iteration; the ratio is the best peer's time over ours (above 1: ours is faster). "
           "Only `ok` rows count as peers.", ""]
    rows = []
    for (_, k), cell in cells.groupby(["group", "k"], sort=False):
        mine = cell[cell["impl"] == OURS]
        if mine.empty:
            continue
        me = mine.iloc[0]
        peers = cell[(cell["impl"] != OURS) & (cell["status"] == "ok")].dropna(subset=["per_iter_s"])
        best = peers.loc[peers["per_iter_s"].idxmin()] if not peers.empty else None
        roofline = (f"{me['roofline_fraction']:.0%} of {me['roofline_limit']}"
                    if not _missing(me.get("roofline_fraction")) else "-")
        rows.append([f"{me['dataset']} (n = {me['n']:,}, d = {me['d']})", str(k), iterations_text(me),
                     _flagged(me, _seconds(me["per_iter_s"])),
                     f"{best['label']} {_seconds(best['per_iter_s'])}" if best is not None else "-",
                     _ratio(best["per_iter_s"] / me["per_iter_s"]) if best is not None and me["status"] == "ok" else "-",
                     roofline, _floor_multiple(me, "tf32")])
    return out + [_table(["dataset", "k", "iterations", "kmbench-gpu", "best peer", "ratio", "roofline",
                          "x TF32 GEMM"], rows)]


def markdown(cells: pd.DataFrame, source: str = "", comparisons=("seconds",), title="kmbench report") -> str:
    """Every group's tables, then the published comparisons asked for: "seconds" (document
    000's table beside ours) and ("peak-rates", key) pairs for rate comparisons."""
    out = [f"# {title}", ""]
    if cells.empty:
        return "\n".join(out + ["No records yet: run `kmbench run` first.", ""])
    out.append(f"{len(cells)} cells from `{source}`. Times are the Lloyd loop only (the region "
               "document 000 timed), mean of the counted repeats after a warm-up. Status `ok` means "
               "the centroids agree with our float64 reference run from the same start.")
    for group_name, group in cells.groupby("group", sort=False):
        machines = ", ".join(sorted(group["machine"].unique()))
        out += ["", f"## {group_name}", "", f"Machine: {machines}", ""]
        out += _group_markdown(group)
    for comparison in comparisons:
        if comparison == "seconds":
            out += [""] + _published_markdown(cells)
        elif comparison == "best-peer":
            out += [""] + peer_markdown(cells)
        elif comparison[0] == "whole-run":
            out += [""] + whole_run_markdown(cells, comparison[1])
        else:
            out += [""] + rates_markdown(cells, comparison[1])
    return "\n".join(out + [""])


def csv(cells: pd.DataFrame, source: str = "") -> str:
    return cells.to_csv(index=False)


def json_(cells: pd.DataFrame, source: str = "") -> str:
    payload = {"source": source, "cells": json.loads(cells.to_json(orient="records"))}
    return json.dumps(payload, indent=2) + "\n"


FORMATS = {"markdown": markdown, "csv": csv, "json": json_}
