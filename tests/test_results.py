import json
import multiprocessing

import pytest

from kmbench.data import results


def _record(**extra):
    """The least a Lloyd record holds for the readers (results.REQUIRED), plus `extra`."""
    return {"impl": "numpy", "status": "ok", "dataset": {"name": "blobs", "n": 10, "d": 2},
            "params": {"k": 2, "iterations": 3, "init": "random", "seed": 0}, **extra}


def _writer(path, who, count):
    for index in range(count):
        results.append(_record(who=who, index=index), path)


def test_append_keeps_earlier_records(tmp_path):
    store = tmp_path / "r.jsonl"
    results.append(_record(a=1), store)
    results.append(_record(a=2), store)
    loaded = results.load(store)
    assert [r["a"] for r in loaded] == [1, 2]
    assert all(r["schema"] == results.SCHEMA_VERSION for r in loaded)


def test_concurrent_writers_lose_nothing(tmp_path):
    store = tmp_path / "r.jsonl"
    procs = [multiprocessing.Process(target=_writer, args=(store, who, 15)) for who in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    loaded = results.load(store)
    assert len(loaded) == 45
    assert {(r["who"], r["index"]) for r in loaded} == {(w, i) for w in range(3) for i in range(15)}


def test_a_torn_line_is_skipped_and_repaired(tmp_path):
    store = tmp_path / "r.jsonl"
    store.write_text(json.dumps({"schema": results.SCHEMA_VERSION, **_record(a=1)}) + "\n{\"schema\": 1, \"a\"")
    results.append(_record(a=3), store)
    with pytest.warns(results.StoreWarning, match="skipped 1 line"):
        assert [r["a"] for r in results.load(store)] == [1, 3]


@pytest.mark.parametrize("partial", [
    {"schema": 1, "impl": "numpy"},  # the line: parses, is no whole record
    {"schema": 1, **_record(dataset={"name": "blobs"})},  # the dataset without n and d
    {"schema": 1, **_record(params={"k": "2", "iterations": 3, "init": "random", "seed": 0})},  # k not a number
    [1, 2, 3],  # JSON, not an object
])
def test_lines_that_are_no_whole_record_are_skipped_with_one_counting_warning(tmp_path, partial):
    store = tmp_path / "r.jsonl"
    results.append(_record(a=1), store)
    with open(store, "a") as handle:
        handle.write(json.dumps(partial) + "\n")
        handle.write("not json at all\n")
    with pytest.warns(results.StoreWarning, match="skipped 2 line") as caught:
        loaded = results.load(store)
    assert [r["a"] for r in loaded] == [1]
    assert len(caught) == 1


def test_report_of_a_store_with_a_partial_line_names_it_and_exits_zero(tmp_path):
    from typer.testing import CliRunner

    from kmbench.cli import app

    store = tmp_path / "r.jsonl"
    store.write_text(json.dumps({"schema": 1, "impl": "numpy"}) + "\n")
    with pytest.warns(results.StoreWarning, match="skipped 1 line"):
        out = CliRunner().invoke(app, ["report", "--store", str(store), "--out", str(tmp_path / "r.md")])
    assert out.exit_code == 0, out.output
    assert "Traceback" not in out.output
