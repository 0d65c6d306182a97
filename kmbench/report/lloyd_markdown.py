"""Lloyd's tables in markdown (the markdown exporter's Lloyd view): per dataset group, the
seconds by size, the detail, the roofline, threads, the GEMM floor and what each row is built
on, then the published comparisons asked for. They render the cells frame of
`kmbench.report.report`."""

from __future__ import annotations

import pandas as pd

from kmbench.report.comparisons import peer_markdown, published_markdown, rates_markdown, whole_run_markdown
from kmbench.report.formatting import (chosen_threads_text, flagged_text, floor_multiple, fraction_text,
                                       iterations_text, markdown_table, missing, rate_text, ratio_text, repeats_text,
                                       row_status, seconds_text, skipped_summaries)


def _by_size(part: pd.DataFrame, sizes) -> list[str]:
    cells = []
    for n in sizes:
        rows = part[part["n"] == n]
        cells.append(flagged_text(rows.iloc[0], seconds_text(rows.iloc[0]["mean_s"])) if len(rows) else "")
    return cells


def libraries_markdown(group: pd.DataFrame) -> list[str]:
    """One line per row that declares its library or its precision: which version computed the
    cell, and in what (FP32, TF32, the data's dtype...). Older records may lack both columns."""
    declared = [column for column in ("library", "precision") if column in group]
    if not declared:
        return []
    rows = group.drop_duplicates("label").dropna(subset=declared, how="all")
    if rows.empty:
        return []
    return ["", "What each row is built on and computes in:", "",
            markdown_table(["Implementation", "library", "computes in"],
                   [[row["label"], "-" if missing(row.get("library")) else str(row["library"]),
                     "-" if missing(row.get("precision")) else str(row["precision"])]
                    for _, row in rows.iterrows()])]


def _floor_text(row) -> str:
    """The compute floor and the ceiling it is taken at, "0.54ms (TF32 peak)"."""
    if missing(row.get("compute_floor_s")):
        return "-"
    return f"{seconds_text(row['compute_floor_s'])} ({row['compute_unit']})"


def _threads_markdown(group: pd.DataFrame) -> list[str]:
    """Rows measured at several thread counts (`run --threads 1,2,...`): time per iteration per
    count, the speedup over the fewest threads and the efficiency (speedup per thread added)."""
    if "threads" not in group:
        return []
    out = []
    for (impl, n), part in group.dropna(subset=["threads"]).groupby(["impl", "n"], sort=False):
        part = part.drop_duplicates("threads", keep="last").sort_values("threads")
        if len(part) < 2:
            continue
        fewest = part.iloc[0]
        base = fewest["per_iter_s"] if fewest["status"] == "ok" else None
        rows = []
        for _, row in part.iterrows():
            speedup = base / row["per_iter_s"] if base and row["status"] == "ok" and row["per_iter_s"] else None
            scale = row["threads"] / fewest["threads"]
            rows.append([f"{int(row['threads'])}", flagged_text(row, seconds_text(row["per_iter_s"])),
                         ratio_text(speedup), fraction_text(speedup / scale if speedup else None), row_status(row)])
        out += ["", f"Scaling over threads: {impl}, n = {n:,}; speedup over {int(fewest['threads'])} "
                "thread(s), efficiency = speedup / (threads over that count):", "",
                markdown_table(["threads", "per iteration", "speedup", "efficiency", "status"], rows)]
    return out


def _group_markdown(everything: pd.DataFrame) -> list[str]:
    """The group's tables of the cells that ran; the rows that could not run here are summed in
    its notes, one line per reason, last (on a machine without a GPU they were most of the
    report: each a table row, and a note per size repeating its reason)."""
    group = everything[everything["status"] != "skipped"]
    if group.empty:
        return ["No row could run here:", "", *(f"- {line}" for line in skipped_summaries(everything))]
    sizes = sorted(group["n"].unique())
    out = [markdown_table(["Implementation"] + [f"n = {n:,}" for n in sizes],
                  [[label] + _by_size(part, sizes) for label, part in group.groupby("label", sort=False)])]
    out.append("")
    out.append(markdown_table(
        ["Implementation", "n", "status", "iterations", "repeats", "mean", "median", "min", "std",
         "per iteration", "distance evals", "vs scikit-learn", "per iteration vs scikit-learn"],
        [[row["label"], f"{row['n']:,}", row_status(row), iterations_text(row), repeats_text(row),
          seconds_text(row["mean_s"]), seconds_text(row["median_s"]), seconds_text(row["min_s"]),
          seconds_text(row["std_s"]), seconds_text(row["per_iter_s"]), rate_text(row["dist_evals_per_s"]),
          ratio_text(row["speedup_vs_sklearn"]), ratio_text(row["speedup_per_iter_vs_sklearn"])]
         for _, row in group.iterrows()],
    ))
    if group["roofline_fraction"].notna().any():
        out += ["", "Against the floors of each row's own work: the compute floor is n k distances times "
                "the cost the row declares (FP32 instructions, or TF32 or fp16 tensor-core FLOPs, 2 d a "
                "distance) at the rate of that unit measured on the processor it ran on; the memory floor "
                "is its declared bytes per iteration (each point read once) at the measured copy rate. "
                "The cell sits at the larger share of its time:", ""]
        out.append(markdown_table(
            ["Implementation", "n", "per iteration", "compute floor", "x", "memory floor", "x", "roofline"],
            [[row["label"], f"{row['n']:,}", seconds_text(row["per_iter_s"]),
              _floor_text(row), floor_multiple(row, "compute"), seconds_text(row["memory_floor_s"]),
              floor_multiple(row, "memory"),
              flagged_text(row, f"{row['roofline_fraction']:.1%} of {row['roofline_limit']}")]
             for _, row in group.dropna(subset=["roofline_fraction"]).iterrows()]))
    out += _threads_markdown(group)
    out += libraries_markdown(group)
    notes = [f"- {row['label']} (n={row['n']:,}): {row['status']}: {row['detail']}"
             for _, row in group.iterrows() if row["status"] != "ok" and row["detail"]]
    notes += [f"- {row['label']} (n={row['n']:,}): {row['warnings']}"
              for _, row in group.iterrows() if row["warnings"]]
    notes += [f"- {row['label']} (n={row['n']:,}): {chosen_threads_text(row)}"
              for _, row in group.iterrows() if chosen_threads_text(row)]
    notes += [f"- {line}" for line in skipped_summaries(everything)]
    if notes:
        out += ["", "Notes:", *notes]
    return out


def page(cells: pd.DataFrame, source: str = "", comparisons=("seconds",), title="kmbench report") -> str:
    """Every group's tables, then the published comparisons asked for: "seconds" (document
    000's table beside ours) and ("peak-rates", key) pairs for rate comparisons."""
    out = [f"# {title}", ""]
    if cells.empty:
        return "\n".join(out + ["No records yet: run `kmbench run` first.", ""])
    out.append(f"{len(cells)} cells from `{source}`. Times are the Lloyd loop only (the region "
               "document 000 timed), mean of the counted repeats after a warm-up. Status `ok` means "
               "every Lloyd step of the row was certified in the precision it declares "
               "(kmbench/judge/NOTES.md); how far it ends from our float64 reference is a figure.")
    for group_name, group in cells.groupby("group", sort=False):
        machines = ", ".join(sorted(group["machine"].unique()))
        out += ["", f"## {group_name}", "", f"Machine: {machines}", ""]
        out += _group_markdown(group)
    out += comparisons_markdown(cells, comparisons)
    return "\n".join(out + [""])


def comparisons_markdown(cells: pd.DataFrame, comparisons) -> list[str]:
    """The published comparisons asked for, each a section of its own (the HTML page renders the
    same lines)."""
    out = []
    for comparison in comparisons:
        if comparison == "seconds":
            out += [""] + published_markdown(cells)
        elif comparison == "best-peer":
            out += [""] + peer_markdown(cells)
        elif comparison[0] == "whole-run":
            out += [""] + whole_run_markdown(cells, comparison[1])
        else:
            out += [""] + rates_markdown(cells, comparison[1])
    return out
