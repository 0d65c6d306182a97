"""One definition of a cell (kmbench.data.cells), as the report, plans and task suites read it."""

from kmbench.data import cells


def _lloyd(impl="numpy", k=5, threads=None, stop="iterations", tol=0.0, mean=1.0):
    build = {} if threads is None else {"threads": threads}
    return {"impl": impl, "dataset": {"name": "blobs"}, "build": build, "times": {"mean": mean},
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
    assert planned in cells.measured([record])
    assert cells.newest([record, _lloyd(k=6)], wanted={planned}) == [record]
    assert planned not in cells.measured([_lloyd(k=6)])


def test_task_cells_are_a_row_on_one_workload_of_one_suite():
    a = {"task": "assign", "impl": "x", "suite": "ladder", "workload": "n=1", "label": "x", "status": "ok"}
    b = dict(a, workload="n=2")
    assert cells.cell_of(a) != cells.cell_of(b)
    assert cells.newest([a, b, dict(a, status="error")]) == [dict(a, status="error"), b]
