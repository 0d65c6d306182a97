"""One definition of a cell (kmbench.data.cells), as the report, plans and task suites read it."""

from kmbench.data import cells


def _any(record):
    return True


def _lloyd(impl="numpy", k=5, threads=None, stop="iterations", tol=0.0, mean=1.0, workers=None, status="ok"):
    build = {} if threads is None else {"threads": threads}
    if workers is not None:
        build["workers"] = workers
    return {"impl": impl, "status": status, "dataset": {"name": "blobs"}, "build": build, "times": {"mean": mean},
            "params": {"k": k, "iterations": 10, "stop": stop, "tol": tol, "init": "random", "seed": 0}}


def test_the_newer_record_of_a_cell_stands_and_other_cells_stay():
    old, new, other = _lloyd(mean=1.0), _lloyd(mean=2.0), _lloyd(k=6)
    assert cells.newest([old, other, new]) == [new, other]


def test_threads_and_the_tolerance_make_different_cells_and_a_tolerance_off_rule_does_not():
    one, two = _lloyd(threads=1), _lloyd(threads=2)
    assert cells.newest([one, two]) == [one, two]
    assert cells.cell_of(_lloyd(tol=0.1)) == cells.cell_of(_lloyd(tol=0.2))  # the iterations rule ignores tol
    assert cells.cell_of(_lloyd(stop="tolerance", tol=0.1)) != cells.cell_of(_lloyd(stop="tolerance", tol=0.2))


def test_a_planned_cell_is_found_at_whatever_threads_its_row_ran_on():
    planned = cells.lloyd_cell("numpy", "blobs", 5, 10, "iterations", 0.0, "random", 0)
    record = _lloyd(threads=2)
    assert planned in cells.finished([record], _any)
    assert cells.newest([record, _lloyd(k=6)], wanted={planned}) == [record]
    assert planned not in cells.finished([_lloyd(k=6)], _any)


def test_gpu_sets_make_different_cells_and_a_plan_finds_either():
    """`kmbench scale` runs a multi-GPU row on one GPU, then two: two measurements, not one
    measured twice (the report and `compare` show both)."""
    one, two = _lloyd("kmbench-gpu-dask", workers=1), _lloyd("kmbench-gpu-dask", workers=2)
    assert cells.newest([one, two]) == [one, two]
    planned = cells.lloyd_cell("kmbench-gpu-dask", "blobs", 5, 10, "iterations", 0.0, "random", 0)
    assert planned in cells.finished([two], _any)


def test_only_a_verdict_finishes_a_cell_and_only_where_comparable():
    """Plans and task suites skip the same cells: one with a verdict, measured by code and on a
    machine the caller accepts; an error or a skip is measured again."""
    planned = cells.lloyd_cell("numpy", "blobs", 5, 10, "iterations", 0.0, "random", 0)
    for status, done in (("ok", True), ("mismatch", True), ("approximate", True), ("error", False), ("skipped", False)):
        assert (planned in cells.finished([_lloyd(status=status)], _any)) == done, status
    assert planned not in cells.finished([_lloyd()], lambda record: False)
    task = {"task": "assign", "impl": "x", "suite": "ladder", "workload": "n=1", "status": "error"}
    assert cells.finished([task], _any) == {}


def test_task_cells_are_a_row_on_one_workload_of_one_suite():
    a = {"task": "assign", "impl": "x", "suite": "ladder", "workload": "n=1", "label": "x", "status": "ok"}
    b = dict(a, workload="n=2")
    assert cells.cell_of(a) != cells.cell_of(b)
    assert cells.newest([a, b, dict(a, status="error")]) == [dict(a, status="error"), b]


def test_the_report_names_each_worker_count_of_a_dask_row():
    from kmbench.report import report

    def record(workers, per_iteration):
        return {"impl": "dask-cuda", "label": "Dask (CuPy chunks)", "status": "ok",
                "dataset": {"name": "r", "generator": "radial", "parameters": {}, "n": 100, "d": 2, "dtype": "float32"},
                "params": {"k": 3, "iterations": 3, "init": "random", "seed": 0}, "build": {"workers": workers},
                "times": {"iterate": {"mean": per_iteration * 3}}, "per_iteration_s": per_iteration}

    frame = report.cells_frame([record(1, 0.4), record(2, 0.2)])
    assert list(frame["label"]) == ["Dask (CuPy chunks) (1 worker)", "Dask (CuPy chunks) (2 workers)"]
    assert list(frame["per_iter_s"]) == [0.4, 0.2]
