"""Our figures beside others': the reference documents' published tables (seconds, peak rates,
whole runs extrapolated from budgeted rows) and kmbench-gpu against the best peer of a run."""

from __future__ import annotations

import pandas as pd

from kmbench.report import published, report
from kmbench.report.formatting import (billions_text, bytes_text, duration_text, flagged_text, floor_multiple,
                                       iterations_text, markdown_table, missing, ratio_text, row_status, seconds_text)

def published_markdown(cells: pd.DataFrame) -> list[str]:
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
    out.append(markdown_table(
        ["Implementation", "n", "published", "measured", "measured / published",
         "published vs scikit-learn", "measured vs scikit-learn", "per iteration vs scikit-learn", "status"],
        [[labels.get(row["impl"], row["label"]), f"{row['n']:,}", seconds_text(row["published_s"]),
          flagged_text(row, seconds_text(row["mean_s"])),
          ratio_text(row["mean_s"] / row["published_s"]) if not missing(row["mean_s"]) else "-",
          ratio_text(row["published_speedup_vs_sklearn"]), ratio_text(row["speedup_vs_sklearn"]),
          ratio_text(row["speedup_per_iter_vs_sklearn"]), row_status(row)] for _, row in rows.iterrows()],
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
            rows.append([label] + [flagged_text(cells_by_k[k], billions_text(cells_by_k[k]["dist_evals_per_s"]))
                                   if k in cells_by_k else "" for k in ks])
        out += [markdown_table(["Implementation"] + [f"k = {k}" for k in ks], rows), ""]
    peaks = []
    for peak in table["peaks"]:
        mine = cells[(cells["impl"] == peak["impl"]) & (cells["status"] == "ok")]
        if "k" in peak:
            mine = mine[mine["k"] == peak["k"]]
        best = mine.loc[mine["dist_evals_per_s"].idxmax()] if mine["dist_evals_per_s"].notna().any() else None
        where = f"n = {best['n']:,}, k = {best['k']}, h = {int(best['iters_executed'])}" if best is not None else "-"
        measured = best["dist_evals_per_s"] if best is not None else None
        peaks.append([peak["what"], peak["impl"], billions_text(peak["rate"]), billions_text(measured), where,
                      ratio_text(measured / peak["rate"]) if measured else "-"])
    out += ["Peaks (only `ok` cells count):", "",
            markdown_table(["published figure", "our row", "published (billion/s)", "measured (billion/s)",
                    "measured at", "measured / published"], peaks)]
    return out


def _whole_run(row, reference_iterations) -> str:
    """The measured whole run, or for a row cut to a few iterations by its time budget the
    per-iteration time times the reference's iteration count, labelled as such."""
    if row["stop_rule"] != "iterations":
        return flagged_text(row, duration_text(row["mean_s"]))
    if missing(reference_iterations) or missing(row["per_iter_s"]):
        return "-"
    estimate = row["per_iter_s"] * reference_iterations
    return flagged_text(row, f"~{duration_text(estimate)} (extrapolated from {int(row['iters_executed'])} iterations "
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
            published_time = (("> " if mine.get("more_than") else "") + duration_text(mine["seconds"])) if mine else "-"
            rows.append([row["label"], published_time, bytes_text(mine.get("memory_bytes")), iterations_text(row),
                         flagged_text(row, seconds_text(row["per_iter_s"])), _whole_run(row, reference),
                         bytes_text(row.get("gpu_memory_bytes")), bytes_text(row.get("host_memory_bytes")), row_status(row)])
        out += [markdown_table(["Implementation", "published time", "published memory", "iterations", "per iteration",
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
                    if not missing(me.get("roofline_fraction")) else "-")
        rows.append([f"{me['dataset']} (n = {me['n']:,}, d = {me['d']})", str(k), iterations_text(me),
                     flagged_text(me, seconds_text(me["per_iter_s"])),
                     f"{best['label']} {seconds_text(best['per_iter_s'])}" if best is not None else "-",
                     ratio_text(best["per_iter_s"] / me["per_iter_s"]) if best is not None and me["status"] == "ok" else "-",
                     roofline, floor_multiple(me, "compute")])
    return out + [markdown_table(["dataset", "k", "iterations", "kmbench-gpu", "best peer", "ratio", "roofline",
                          "x compute floor"], rows)]
