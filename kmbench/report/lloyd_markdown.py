"""Lloyd's tables in markdown (the markdown exporter's Lloyd view): per dataset group, the
seconds by size, the detail, the roofline, threads, the GEMM floor and what each row is built
on, then the published comparisons asked for. They render the cells frame of
`kmbench.report.report`."""

from __future__ import annotations

import pandas as pd

from kmbench.report.comparisons import peer_markdown, published_markdown, rates_markdown, whole_run_markdown
from kmbench.report.formatting import (flagged_text, floor_multiple, fraction_text, iterations_text, markdown_table,
                                       missing, rate_text, ratio_text, repeats_text, seconds_text)


def _by_size(part: pd.DataFrame, sizes) -> list[str]:
    cells = []
    for n in sizes:
        rows = part[part["n"] == n]
        cells.append(flagged_text(rows.iloc[0], seconds_text(rows.iloc[0]["mean_s"])) if len(rows) else "")
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
            markdown_table(["Implementation", "library", "computes in"],
                   [[row["label"], "-" if missing(row.get("library")) else str(row["library"]),
                     "-" if missing(row.get("precision")) else str(row["precision"])]
                    for _, row in rows.iterrows()])]


def _gemm_floor_markdown(group: pd.DataFrame) -> list[str]:
    """High-d cells: every row beside cuBLAS's GEMM of the cell's shape on the same GPU."""
    if "gemm_tf32_s" not in group or group["gemm_tf32_s"].isna().all():
        return []
    timed = group.dropna(subset=["gemm_tf32_s"])
    return ["", "Against the measured GEMM floor: cuBLAS's product of the cell's shape, (n x d) times (d x k), "
            "the work of one assignment, timed on the same GPU in FP32 and in TF32; each row's time per "
            "iteration as a multiple of each:", "",
            markdown_table(["Implementation", "n", "per iteration", "FP32 GEMM", "multiple", "TF32 GEMM", "multiple"],
                   [[row["label"], f"{row['n']:,}", flagged_text(row, seconds_text(row["per_iter_s"])),
                     seconds_text(row["gemm_fp32_s"]), floor_multiple(row, "fp32"),
                     seconds_text(row["gemm_tf32_s"]), floor_multiple(row, "tf32")] for _, row in timed.iterrows()])]


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
                         ratio_text(speedup), fraction_text(speedup / scale if speedup else None), row["status"]])
        out += ["", f"Scaling over threads: {impl}, n = {n:,}; speedup over {int(fewest['threads'])} "
                "thread(s), efficiency = speedup / (threads over that count):", "",
                markdown_table(["threads", "per iteration", "speedup", "efficiency", "status"], rows)]
    return out


def _group_markdown(group: pd.DataFrame) -> list[str]:
    sizes = sorted(group["n"].unique())
    out = [markdown_table(["Implementation"] + [f"n = {n:,}" for n in sizes],
                  [[label] + _by_size(part, sizes) for label, part in group.groupby("label", sort=False)])]
    out.append("")
    out.append(markdown_table(
        ["Implementation", "n", "status", "iterations", "repeats", "mean", "median", "min", "std",
         "per iteration", "distance evals", "vs scikit-learn", "per iteration vs scikit-learn"],
        [[row["label"], f"{row['n']:,}", row["status"], iterations_text(row), repeats_text(row),
          seconds_text(row["mean_s"]), seconds_text(row["median_s"]), seconds_text(row["min_s"]),
          seconds_text(row["std_s"]), seconds_text(row["per_iter_s"]), rate_text(row["dist_evals_per_s"]),
          ratio_text(row["speedup_vs_sklearn"]), ratio_text(row["speedup_per_iter_vs_sklearn"])]
         for _, row in group.iterrows()],
    ))
    if group["roofline_fraction"].notna().any():
        out += ["", "Rows on the roofline: the declared bytes per iteration (each point read "
                "once) over the time, as a fraction of the measured copy bandwidth of the processor "
                "the row ran on (the GPU's; for kmbench-cpu the CPU's, every core copying); the "
                "distance evaluations times the declared FP32 instructions per evaluation, as a "
                "fraction of its measured FP32 rate (the GPU's FMA chains; on the CPU, the FMAs per "
                "distance against BLAS SGEMM's FMA rate); the cell sits at the larger:", ""]
        out.append(markdown_table(["Implementation", "n", "of copy bandwidth", "of FP32 issue rate", "roofline"],
                          [[row["label"], f"{row['n']:,}", fraction_text(row["memory_fraction"]),
                            fraction_text(row["arithmetic_fraction"]),
                            flagged_text(row, f"{row['roofline_fraction']:.1%} of {row['roofline_limit']}")]
                           for _, row in group.dropna(subset=["roofline_fraction"]).iterrows()]))
    out += _threads_markdown(group)
    out += _gemm_floor_markdown(group)
    out += _libraries_markdown(group)
    notes = [f"- {row['label']} (n={row['n']:,}): {row['status']}: {row['detail']}"
             for _, row in group.iterrows() if row["status"] != "ok" and row["detail"]]
    notes += [f"- {row['label']} (n={row['n']:,}): {row['warnings']}"
              for _, row in group.iterrows() if row["warnings"]]
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
    for comparison in comparisons:
        if comparison == "seconds":
            out += [""] + published_markdown(cells)
        elif comparison == "best-peer":
            out += [""] + peer_markdown(cells)
        elif comparison[0] == "whole-run":
            out += [""] + whole_run_markdown(cells, comparison[1])
        else:
            out += [""] + rates_markdown(cells, comparison[1])
    return "\n".join(out + [""])
