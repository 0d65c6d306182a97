"""The HTML exporter: one self-contained page of the cells frame (`kmbench report --format html`).

plotly.js is inlined once in the page's head, so the file opens with no network: per dataset
group, the table; time per iteration as bars coloured by verdict; each cell against the
machine's floors (memory, and compute in the row's own arithmetic) where its record has them; the
speedup over threads where a row ran at several counts; and quality against time, where a
certified (`ok`) row is exact by definition and sits on the zero line, an `approximate` row
sits at its inertia's distance from the float64 trajectory, and each problem's Pareto frontier
is drawn. Needs plotly (pip install 'kmbench[html]').
"""

from __future__ import annotations

import re
from html import escape

import pandas as pd

from kmbench.errors import UsageError
from kmbench.report import lloyd_markdown
from kmbench.report.formatting import (chosen_threads_text, fraction_text, iterations_text, missing, rate_text,
                                       ratio_text, repeats_text, row_status, seconds_text, skipped_summaries)

STATUS_COLOUR = {"ok": "#2e7d32", "approximate": "#8e24aa", "mismatch": "#c62828", "error": "#6d4c41",
                 "skipped": "#9e9d24"}
CONFIG = {"displaylogo": False, "responsive": True}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; padding: 0 1em; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.1em; margin-top: 2.5em; border-top: 1px solid #ccc; padding-top: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; } th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
.status { font-weight: 600; } .note { color: #555; font-size: 0.85em; }
"""


def require_plotly():
    """plotly's graph objects, or a one-sentence UsageError saying how to get them."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise UsageError("--format html needs plotly: pip install 'kmbench[html]'.") from None
    return go


def _figure(figure) -> str:
    return figure.to_html(full_html=False, include_plotlyjs=False, config=CONFIG)


def _spans_decades(values: pd.Series) -> bool:
    """Whether values lie far enough apart (over 10x) to need a log axis; in one decade a log
    axis has no labelled tick, and its bars' lengths mislead."""
    values = values.dropna()
    values = values[values > 0]
    return len(values) > 1 and values.max() > 10 * values.min()


def _layout(figure, title: str, y_title: str, log_y: bool = True, height: int = 380) -> None:
    figure.update_layout(title=dict(text=title, font=dict(size=14)), height=height, template="plotly_white",
                         margin=dict(l=70, r=20, t=40, b=40), legend=dict(orientation="h", y=-0.25))
    # One tick per decade on a log axis: plotly's minor labels (2, 5) crowd a short chart.
    figure.update_yaxes(title_text=y_title, type="log" if log_y else "linear", dtick=1 if log_y else None)
    figure.update_traces(cliponaxis=False, selector=dict(type="bar"))


def _caption(text: str) -> str:
    return f'<p class="note">{text}</p>'


def _inline(text: str) -> str:
    """A markdown line's text as HTML: escaped, `code` and **bold** kept."""
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def markdown_html(lines: list[str]) -> str:
    """The markdown exporter's own lines (headings, paragraphs, lists, tables) as HTML, so the page
    carries the sections the markdown has (document 000's comparison, what each row is built
    on) from the one place that writes them."""
    out, table, items = [], [], []

    def flush():
        if table:
            rows = [[cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row.strip()[1:-1])]
                    for row in table if not re.fullmatch(r"\|(---\|)+", row.strip())]
            out.append("<table><tr>" + "".join(f"<th>{_inline(cell)}</th>" for cell in rows[0]) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>"
                                 for row in rows[1:]) + "</table>")
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in items) + "</ul>")
        table.clear()
        items.clear()

    for line in (part for entry in lines for part in entry.split("\n")):  # a table is one entry
        if line.startswith("|"):
            table.append(line)
            continue
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush()
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    flush()
    return "\n".join(out)


def _categories(rows: pd.DataFrame) -> list[list[str]]:
    """Two-level x axis: the row (its verdict beside it when not `ok`, so no bad figure stands
    bare), then n."""
    labels = [label if status == "ok" else f"{label} ({status})" for label, status in zip(rows["label"], rows["status"])]
    return [labels, [f"n={n:,}" for n in rows["n"]]]


def _status(status: str, text: str | None = None) -> str:
    """The verdict in its colour; `text` what the cell reads (the verdict with its precision)."""
    return f'<span class="status" style="color:{STATUS_COLOUR.get(status, "#000")}">{escape(text or status)}</span>'


def _table(group: pd.DataFrame) -> str:
    """The cells that ran; rows that could not run here are summed under it (_notes)."""
    header = ["Implementation", "n", "status", "iterations", "repeats", "mean", "median", "min", "std",
              "per iteration", "distance evals", "per iteration vs scikit-learn"]
    lines = ["<table><tr>" + "".join(f"<th>{escape(name)}</th>" for name in header) + "</tr>"]
    for _, row in group[group["status"] != "skipped"].iterrows():
        cells = [escape(row["label"]), f"{row['n']:,}", _status(row["status"], row_status(row)), iterations_text(row),
                 repeats_text(row), *(seconds_text(row[name]) for name in ("mean_s", "median_s", "min_s", "std_s",
                                                                          "per_iter_s")),
                 rate_text(row["dist_evals_per_s"]), ratio_text(row["speedup_per_iter_vs_sklearn"])]
        lines.append(f'<tr title="{escape(str(row["detail"] or ""))}">'
                     + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return "\n".join(lines + ["</table>"])


def _notes(group: pd.DataFrame) -> str:
    """Why each cell that ran is not ok, its warnings, and the rows that could not run, one line
    per reason (as the terminal sums them)."""
    notes = [f"{escape(row['label'])} (n={row['n']:,}): {_status(row['status'])}: {escape(row['detail'])}"
             for _, row in group.iterrows() if row["status"] not in ("ok", "skipped") and row["detail"]]
    notes += [f"{escape(row['label'])} (n={row['n']:,}): {escape(row['warnings'])}"
              for _, row in group.iterrows() if row["warnings"] and row["status"] != "skipped"]
    notes += [f"{escape(row['label'])} (n={row['n']:,}): {escape(chosen_threads_text(row))}"
              for _, row in group.iterrows() if chosen_threads_text(row)]
    notes += [escape(line) for line in skipped_summaries(group)]
    return "" if not notes else '<ul class="note">' + "".join(f"<li>{note}</li>" for note in notes) + "</ul>"


def _times_chart(go, group: pd.DataFrame) -> str:
    timed = group.dropna(subset=["per_iter_s"])
    if timed.empty:
        return ""
    figure = go.Figure()
    for status, rows in timed.groupby("status", sort=False):
        # One standard deviation of the counted repeats, per iteration as the bar is.
        spread = (rows["std_s"] / rows["iters_executed"]).fillna(0.0)
        figure.add_bar(x=_categories(rows), y=rows["per_iter_s"], name=status,
                       marker_color=STATUS_COLOUR.get(status), text=[seconds_text(v) for v in rows["per_iter_s"]],
                       hovertext=rows["detail"], textposition="outside",
                       error_y=dict(type="data", array=spread, visible=True, color="#333"))
    _layout(figure, "Time per iteration; colour: the verdict", "seconds per iteration",
            log_y=_spans_decades(timed["per_iter_s"]))
    figure.update_layout(barmode="overlay")
    untimed = len(group) - len(timed)
    note = f" {untimed} cell(s) without a time (errors in the table, skipped rows below it)." if untimed else ""
    return _figure(figure) + _caption("The mean of the counted repeats over the iterations run; the error bars, "
                                      "one standard deviation of the repeats." + note)


def _floor_fractions(rows: pd.DataFrame) -> dict[str, pd.Series]:
    """Each cell's floors over its time (1: at the floor): memory, and compute in the unit the
    row declares (FP32 issue, TF32 or fp16 peak)."""
    found = {"memory floor / time": rows["memory_fraction"], "compute floor / time": rows["arithmetic_fraction"]}
    return {name: values.astype(float) for name, values in found.items() if values.notna().any()}


def _floors_chart(go, group: pd.DataFrame) -> str:
    columns = ["memory_fraction", "arithmetic_fraction"]
    rows = group.dropna(subset=columns, how="all").dropna(subset=["per_iter_s"])
    if rows.empty:
        return ""
    figure, fractions = go.Figure(), _floor_fractions(rows)
    for name, values in fractions.items():
        figure.add_bar(x=_categories(rows), y=values, name=name, text=[fraction_text(v) for v in values],
                       textposition="outside")
    figure.add_hline(y=1.0, line_dash="dash", line_color="#555", annotation_text="at the floor")
    _layout(figure, "Against the floors of its own work", "floor / time",
            log_y=_spans_decades(pd.concat([*fractions.values(), pd.Series([1.0])])))
    return _figure(figure) + _caption(
        "Each row's floors per iteration over its time: the memory floor is its declared bytes at the measured "
        "copy rate; the compute floor is its n k distances at the measured rate of the arithmetic it declares "
        "(FP32 instructions, or TF32 or fp16 tensor-core FLOPs).")


def _scaling_chart(go, group: pd.DataFrame, unit: str) -> str:
    """Speedup over the fewest `unit` ("threads", or "workers": a Dask row's, one per GPU for
    the GPU rows), per row measured at several counts, beside the ideal line."""
    figure, fewest_of_all, largest = go.Figure(), float("inf"), 0
    # By implementation: a row's label names its count.
    for (impl, n), part in group.dropna(subset=[unit, "per_iter_s"]).groupby(["impl", "n"], sort=False):
        part = part[part["status"] == "ok"].drop_duplicates(unit, keep="last").sort_values(unit)
        if len(part) < 2:
            continue
        fewest = part.iloc[0]
        figure.add_scatter(x=part[unit], y=fewest["per_iter_s"] / part["per_iter_s"], mode="lines+markers",
                           name=f"{impl}, n={n:,}")
        fewest_of_all, largest = min(fewest_of_all, fewest[unit]), max(largest, part[unit].max())
    if not largest:
        return ""
    figure.add_scatter(x=[fewest_of_all, largest], y=[1, largest / fewest_of_all], mode="lines",
                       name=f"ideal: speedup = {unit} added", line=dict(dash="dot", color="#999"))
    _layout(figure, f"Scaling over {unit}: speedup over the fewest {unit}", "speedup", log_y=False)
    figure.update_xaxes(title_text=unit, dtick=1)
    return _figure(figure)


def quality_above(row) -> float | None:
    """Where a cell sits on the quality axis: 0 for a certified row (every step a Lloyd step
    in its declared precision: exact, whatever rounding made its end differ from float64's);
    for an approximate row, how far its inertia lies from the float64 trajectory's, relative
    (the judge's inertia difference); None for a row that is wrong or has no result."""
    if row["status"] == "ok":
        return 0.0
    if row["status"] == "approximate" and not missing(row["inertia_difference"]):
        return float(row["inertia_difference"])
    return None


def pareto_frontier(points: pd.DataFrame) -> pd.DataFrame:
    """The points no other point beats on both time and quality: by time, each that is better
    in quality than every faster one."""
    frontier, best = [], float("inf")
    for index, point in points.sort_values(["per_iter_s", "quality"]).iterrows():
        if point["quality"] < best:
            frontier.append(index)
            best = point["quality"]
    return points.loc[frontier]


def _quality_chart(go, group: pd.DataFrame) -> str:
    points = group.assign(quality=[quality_above(row) for _, row in group.iterrows()])
    points = points.dropna(subset=["quality", "per_iter_s"])
    if points.empty:
        return ""
    figure = go.Figure()
    for n, problem in points.groupby("n"):
        problem = problem.sort_values("per_iter_s")
        symbols = ["circle" if status == "ok" else "diamond" for status in problem["status"]]
        # Every point named, the names above and below it in turn: the certified rows share the
        # zero line, and one label for the frontier's corner left the others anonymous.
        figure.add_scatter(x=problem["per_iter_s"], y=problem["quality"], mode="markers+text", name=f"n={n:,}",
                           legendgroup=str(n), marker=dict(symbol=symbols, size=10), text=problem["label"],
                           textposition=["top center" if i % 2 == 0 else "bottom center" for i in range(len(problem))],
                           hovertext=[f"{label} ({status})" for label, status in zip(problem["label"], problem["status"])])
        frontier = pareto_frontier(problem)
        figure.add_scatter(x=frontier["per_iter_s"], y=frontier["quality"], mode="lines", line_shape="hv",
                           name=f"Pareto frontier, n={n:,}", legendgroup=str(n), line=dict(dash="dash"))
    figure.add_hline(y=0, line_color="#555")
    _layout(figure, "Quality against time, per problem", "inertia above float64's", log_y=False, height=340)
    figure.update_xaxes(title_text="seconds per iteration", type="log")
    top = max(float(points["quality"].max()) * 1.2, 0.01)  # all certified: a visible band above the zero line
    figure.update_yaxes(tickformat=".1%", range=[-top / 8, top])
    left_out = len(group.dropna(subset=["per_iter_s"])) - len(points)
    note = (f" {left_out} timed cell(s) whose verdict is mismatch or error are left out: a wrong result has no "
            "place on a quality axis.") if left_out else ""
    return _figure(figure) + _caption(
        "Certified rows (circles) are exact: every step a Lloyd step in their declared precision, so they sit on "
        "the zero line; approximate rows (diamonds) sit at their inertia's distance from the float64 "
        "trajectory's, relative. The dashed line is the Pareto frontier: no row is both faster and better." + note)


def page(cells: pd.DataFrame, source: str = "", title: str = "kmbench report", comparisons=("seconds",)) -> str:
    """The whole page: plotly.js inlined in the head, then every group's table, what its rows are
    built on, and charts, then the published comparisons asked for (as the markdown's)."""
    go = require_plotly()
    from plotly.offline import get_plotlyjs

    head = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body><h1>{escape(title)}</h1>")
    if cells.empty:
        return head + "<p>No records yet: run <code>kmbench run</code> first.</p></body></html>\n"
    counts = ", ".join(f"{count} {_status(status)}" for status, count in cells["status"].value_counts().items())
    body = [f"<p>{len(cells)} cells from <code>{escape(source)}</code>: {counts}. Times are the Lloyd loop only, "
            "the mean of the counted repeats after a warm-up. <code>ok</code> means every Lloyd step of the row "
            "was certified in the precision it declares (kmbench/judge/NOTES.md).</p>"]
    groups = list(cells.groupby("group", sort=False))
    body.append("<ul>" + "".join(f'<li><a href="#group-{i}">{escape(name)}</a></li>'
                                 for i, (name, _) in enumerate(groups)) + "</ul>")
    for i, (name, group) in enumerate(groups):
        machines = ", ".join(sorted(group["machine"].unique()))
        body += [f'<h2 id="group-{i}">{escape(name)}</h2>', f'<p class="note">Machine: {escape(machines)}</p>',
                 _times_chart(go, group), _table(group), _notes(group),
                 markdown_html(lloyd_markdown.libraries_markdown(group)), _floors_chart(go, group),
                 _scaling_chart(go, group, "threads"),
                 _scaling_chart(go, group, "workers"), _quality_chart(go, group)]
    body.append(markdown_html(lloyd_markdown.comparisons_markdown(cells, comparisons)))
    return head + "\n".join(part for part in body if part) + "\n</body></html>\n"


def render(contents) -> str:
    """The page of a store's Lloyd records (kmbench.report.exporters' interface)."""
    from kmbench.report import report

    return page(report.cells_frame(contents.of("lloyd")), contents.source, contents.title, contents.comparisons)
