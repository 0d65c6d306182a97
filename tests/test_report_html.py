"""`kmbench report --format html`: one page that opens with no network, loaded in a real
headless browser (Debian's chromium; skipped with the reason where it is absent), and the
pieces behind its quality chart."""

import shutil
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from kmbench.cli import app
from kmbench.data import results
from kmbench.report import html, report

pytest.importorskip("plotly", reason="the HTML report needs plotly (pip install 'kmbench[html]')")

CHROMIUM = next((path for path in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if path), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine: apt-get install chromium "
                                    "(.ci/run installs it when it runs as root and apt is there)")
# Every switch that would let the browser reach out, off; every host name unresolvable, so a
# page that fetched anything (a CDN's plotly.js) would fail to load it and say so.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0"]


def load_in_browser(page, folder, *extra):
    """The DOM after the page's scripts ran, and every console message the page logged."""
    profile = folder / "profile"
    profile.mkdir(exist_ok=True)
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000", *extra,
                           "--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


def _record(impl, status="ok", n=1000, k=5, per_iter=1e-3, **extra):
    return {"schema": 1, "impl": impl, "label": impl.title(), "status": status, "detail": f"{impl} says {status}",
            "dataset": {"name": f"blobs-n{n}", "generator": "blobs", "parameters": {"d": 2}, "n": n, "d": 2,
                        "dtype": "float32"},
            "params": {"k": k, "iterations": 10, "init": "random", "seed": 0}, "iterations_executed": 10,
            "repeats_done": 3, "per_iteration_s": per_iter, "times": {"iterate": {"mean": per_iter and 10 * per_iter}},
            "env": {"cpu": "Test CPU", "cores": 2}, **extra}


def _cells():
    """Every kind of cell the page draws: verdicts, a skipped row, thread and worker counts, a roofline."""
    roofline = {"roofline_on": "cpu", "bytes_per_iteration": 1e7, "distance_evals_per_s": 1e9,
                "fp32_per_distance": 3, "env": {"cpu": "Test CPU", "cores": 2,
                                                "cpu_ceilings": {"copy_bandwidth_Bps": 1e10, "fp32_issue_rate": 1e11}}}
    records = [_record("exact", per_iter=2e-3), _record("wrong", "mismatch", per_iter=5e-4),
               _record("rough", "approximate", per_iter=1e-4, validation={"inertia_difference": 0.02}),
               _record("cpu", build={"threads": 1}, per_iter=4e-3, label="Cpu (1 thread)", **roofline),
               _record("cpu", build={"threads": 2}, per_iter=2.2e-3, label="Cpu (2 threads)", **roofline),
               _record("dask", build={"workers": 1}, per_iter=6e-3), _record("dask", build={"workers": 2}, per_iter=3.5e-3),
               _record("absent", "skipped", per_iter=None), _record("exact", n=4000, k=3, per_iter=8e-3)]
    return report.cells_frame(records)


@needs_chromium
def test_the_page_loads_in_a_browser_with_no_console_message_and_draws_every_chart(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(html.page(_cells(), "test store"))
    dom, console = load_in_browser(page, tmp_path)
    assert console == [], console
    charts = page.read_text().count('class="plotly-graph-div"')
    assert charts >= 5 and dom.count('class="plotly-graph-div js-plotly-plot"') == charts, "a chart did not draw"


@needs_chromium
def test_the_browser_check_sees_a_page_that_fails(tmp_path):
    """The check above can fail: a script error, and a script fetched from the network."""
    page = tmp_path / "broken.html"
    page.write_text('<html><head><script src="https://cdn.plot.ly/plotly-2.35.2.min.js"></script></head>'
                    "<body><script>Plotly.newPlot('x', [])</script></body></html>")
    _, console = load_in_browser(page, tmp_path)
    assert any("Plotly is not defined" in line for line in console), console


def test_the_page_fetches_nothing_and_marks_every_verdict():
    text = html.page(_cells(), "test store")
    assert "<script src" not in text and "cdn.plot.ly" not in text.split("</script>", 1)[1]
    for shown in ("Wrong (mismatch)", "Rough (approximate)", "Scaling over threads", "Scaling over workers",
                  "Dask (2 workers)", "Against the floors",
                  "Pareto frontier, n=1,000", "absent says skipped"):
        assert shown in text, shown


def test_quality_puts_certified_rows_on_zero_and_leaves_wrong_ones_out():
    cells = _cells().set_index("impl")
    assert html.quality_above(cells.loc["rough"]) == 0.02
    assert html.quality_above(cells.loc["wrong"]) is None
    assert all(html.quality_above(row) == 0.0 for _, row in cells.loc[["exact"]].iterrows())


def test_the_pareto_frontier_keeps_the_points_nothing_beats():
    points = pd.DataFrame({"per_iter_s": [1.0, 2.0, 3.0, 0.5, 4.0], "quality": [0.1, 0.0, 0.0, 0.3, 0.2]},
                          index=list("abcde"))
    assert list(html.pareto_frontier(points).index) == ["d", "a", "b"]


def test_report_writes_the_page_and_says_what_is_missing_without_plotly(tmp_path, monkeypatch):
    store = tmp_path / "records.jsonl"
    for record in (_record("exact"), _record("wrong", "mismatch")):
        results.append(record, store)
    out = tmp_path / "report.html"
    done = CliRunner().invoke(app, ["report", "--format", "html", "--store", str(store), "--out", str(out)])
    assert done.exit_code == 0 and "Wrong (mismatch)" in out.read_text(), done.output
    monkeypatch.setitem(sys.modules, "plotly.graph_objects", None)  # as if plotly were not installed
    missing = CliRunner().invoke(app, ["report", "--format", "html", "--store", str(store)])
    assert missing.exit_code == 2 and "pip install 'kmbench[html]'" in missing.output, missing.output


def test_rows_that_could_not_run_are_summed_by_reason_not_listed_in_the_table():
    records = [_record("exact", per_iter=2e-3)]
    records += [_record(f"gpu-{i}", "skipped", per_iter=None, detail="CuPy is not installed") for i in range(3)]
    text = html.page(report.cells_frame(records), "test store")
    table = text.split("<table>")[1].split("</table>")[0]
    assert "Gpu-0" not in table and "Exact" in table
    assert text.count("CuPy is not installed") == 1
    assert "3 rows skipped (Gpu-0, Gpu-1, Gpu-2): CuPy is not installed" in text


def test_the_page_has_the_markdowns_sections_error_bars_and_a_name_on_every_point():
    """Issue 51, item 8: the page dropped "Document 000 reproduced" and the "built on" table that
    the markdown has; its bars had no error bars; the quality chart named one point."""
    import plotly.graph_objects as go

    records = [_record("exact", build={"library": "exactlib 1.2", "precision": "fp32 sums"}),
               _record("other", per_iter=3e-3), _record("third", per_iter=5e-3)]
    for record in records:
        record["times"]["iterate"]["std"] = 4e-3
    cells = report.cells_frame(records)
    text = html.page(cells, "test store")
    assert "<h2>Document 000 reproduced: published vs measured</h2>" in text
    assert "What each row is built on and computes in:" in text
    assert "<td>Exact</td><td>exactlib 1.2</td><td>fp32 sums</td>" in text
    times = html._times_chart(go, cells)
    assert '"error_y":{' in times and '"visible":true' in times
    quality = html._quality_chart(go, cells)
    assert '"mode":"markers+text"' in quality
    assert all(f'"{label}"' in quality for label in ("Exact", "Other", "Third"))  # names, not only hover text
