"""The report's views and exporters beyond Lloyd's cells tables: the scaling and out-of-core
plans' tables, and every exporter rendering the task suites' records (assign, batched)."""

import json

from kmbench.report import csv, markdown
from kmbench.report import json as json_exporter
from kmbench.report.contents import Contents


def _lloyd(impl, status="ok", n=10**8, k=3, **fields):
    """A whole Lloyd record, with the fields a view reads on top."""
    return {"impl": impl, "status": status, "dataset": {"name": "radial", "n": n, "d": 2},
            "params": {"k": k, "iterations": 3, "init": "random", "seed": 0}, **fields}


def _scaling(records):
    return markdown.render(Contents(records, view="scaling"))


def test_the_scaling_table_compares_each_row_with_its_one_gpu_run():
    def record(workers, seconds, status="ok"):
        return _lloyd("dask-cuda", status, build={"workers": workers}, per_iteration_s=seconds, detail="drift")

    text = _scaling([record(1, 0.4), record(2, 0.25), record(4, 0.1, "mismatch")])
    assert "| 2 | 250.00 ms | 1.60x | 80% | - | - | ok |" in text
    assert "| 4 | - | - | - | - | - | mismatch: drift |" in text


def test_the_scaling_table_holds_each_gpu_set_against_kmbench_gpu_alone_and_splits_out_the_collective():
    def record(impl, workers, seconds, communicate=None):
        times = {"phases": {"communicate": {"mean": communicate}}} if communicate is not None else {}
        return _lloyd(impl, n=10**9, k=1000, build={"workers": workers} if workers else {}, per_iteration_s=seconds,
                      iterations_executed=3, times=times)

    text = _scaling([record("kmbench-gpu", None, 0.30), record("kmbench-gpu-dask", 1, 0.31, 3e-5),
                     record("kmbench-gpu-dask", 2, 0.16, 1.5e-2)])
    assert "| kmbench-gpu | radial | 1,000,000,000 | 1000 | 1 | 300.00 ms | 1.00x | 100% | - | - | ok |" in text
    assert "| 1 | 310.00 ms | 1.00x | 100% | 1.03x | 10.0 us (0.0%) | ok |" in text
    assert "| 2 | 160.00 ms | 1.94x | 97% | 0.53x | 5.00 ms (3.1%) | ok |" in text  # the all-reduce's share


def _out_of_core(impl, status, per=None, floor=None, detail=""):
    return _lloyd(impl, status, n=1000, k=1024, detail=detail, gpu_memory_share=1.2, per_iteration_s=per,
                  copy_floor_s=floor, dataset={"name": "blobs", "n": 1000, "d": 128})


def test_the_out_of_core_table_sets_each_time_against_its_floor_and_shows_errors():
    table = markdown.render(Contents([_out_of_core("kmbench-gpu-stream", "ok", per=1.3, floor=1.0),
                                      _out_of_core("kmbench-gpu", "error", detail="needs 196.0 GiB")],
                                     view="out-of-core"))
    stream_row, resident_row = table.strip().splitlines()[-2:]
    assert "| 1000 ms | 1300 ms | 1.30x | ok |" in stream_row
    assert "error: needs 196.0 GiB" in resident_row and "ms" not in resident_row


def test_the_out_of_core_table_shows_no_time_for_a_mismatch():
    table = markdown.render(Contents([_out_of_core("kmbench-gpu-stream", "mismatch", per=1.0, floor=1.0, detail="off")],
                                     view="out-of-core"))
    assert "1.00x" not in table and "mismatch: off" in table


def _assign(impl, step, seconds, status="ok"):
    return {"task": "assign", "suite": "ladder", "workload": "assign-n64-d2-k4", "spec": {"n": 64, "d": 2, "k": 4},
            "impl": impl, "label": f"{step} kernel", "step": step, "status": status, "detail": "off by one",
            "seconds": seconds, "times": {"run": {"mean": seconds}}, "bytes_per_pass": 768}


def _batched(impl, seconds, extrapolated=None):
    return {"task": "batched", "suite": "many", "workload": "batched-r10", "spec": {"rows": 10, "k": 3},
            "impl": impl, "label": impl, "status": "ok", "seconds": seconds, "times": {"run": {"mean": seconds}},
            "rows_done": 2 if extrapolated else 10, "extrapolated_seconds": extrapolated, "rows_per_s": 10 / seconds}


def _every_task():
    return [_lloyd("numpy", iterations_executed=3, per_iteration_s=0.1, times={"iterate": {"mean": 0.3}}),
            _assign("assign-v1", "V1", 4e-5), _assign("assign-v2", "V2", 2e-5, status="mismatch"),
            _batched("batched-sklearn", 1.0, extrapolated=5.0), _batched("batched-kmbench", 0.01)]


def test_markdown_renders_every_task_with_its_suite_heading():
    suite = type("Suite", (), {"name": "ladder", "title": "The ladder", "task": "assign", "published": None})
    text = markdown.render(Contents(_every_task(), suites={"ladder": suite}))
    assert text.startswith("# kmbench report") and "| numpy |" in text
    assert "# kmbench reproduce ladder: The ladder" in text
    assert "| V2 kernel |" in text and "~~20.0~~" in text  # a mismatch's time is struck, never a win
    assert "# kmbench reproduce many: many" in text  # a suite the caller did not name: headed by its name
    assert "5.000s (extrapolated from 2 rows)" in text and "| 500x |" in text


def test_a_store_of_one_task_suite_is_rendered_as_that_suite_alone():
    text = markdown.render(Contents([_assign("assign-v1", "V1", 4e-5)]))
    assert text.startswith("# kmbench reproduce ladder") and "No records yet" not in text
    assert "No records yet" in markdown.render(Contents([]))


def test_csv_and_json_hold_a_row_per_cell_of_every_task():
    lines = csv.render(Contents(_every_task())).splitlines()
    header = lines[0].split(",")
    assert header[0] == "task" and {"mean_s", "bytes_per_pass", "rows_done", "extrapolated_s"} <= set(header)
    assert [line.split(",")[0] for line in lines[1:]] == ["lloyd", "assign", "assign", "batched", "batched"]
    payload = json.loads(json_exporter.render(Contents(_every_task(), source="store.jsonl")))
    assert [cell["impl"] for cell in payload["cells"]] == ["numpy"]
    assert [cell["status"] for cell in payload["assign"]] == ["ok", "mismatch"]
    assert [cell["extrapolated_s"] for cell in payload["batched"]] == [5.0, None]


def test_lloyd_alone_keeps_its_columns_and_keys():
    """A store of Lloyd records reads as it did before the task suites had exporters: no task column."""
    lloyd = [_every_task()[0]]
    assert csv.render(Contents(lloyd)).startswith("group,")
    assert set(json.loads(json_exporter.render(Contents(lloyd)))) == {"source", "cells"}
