"""The typed records (kmbench/data/records.py): every committed line reads into its task's
dataclass and writes back to the same object; older lines are migrated; a line short of what
the readers need is refused with the field named."""

import json
from pathlib import Path

import pytest

from kmbench.data import records, results

COMMITTED = sorted(Path(__file__).resolve().parent.parent.glob("results/**/*.jsonl"))


def _lines():
    for path in COMMITTED:
        for line in path.read_text().splitlines():
            raw = json.loads(line)
            if raw.get("schema") == records.SCHEMA_VERSION:
                yield path, raw


def test_every_committed_record_reads_typed_and_writes_back_what_it_read():
    tasks = set()
    for path, raw in _lines():
        record = records.parse(raw)
        tasks.add(record.task)
        assert type(record) is records.SCHEMAS[raw.get("task", "lloyd")], path
        back = record.to_dict()
        assert records.parse(back) == record, path
        migrated = {"label"}  # written on read where older lines lack it
        assert {k: v for k, v in back.items() if k not in migrated} == \
            {k: v for k, v in raw.items() if k not in migrated}, path
    assert tasks == {"lloyd", "assign", "batched"}


def _lloyd(**fields):
    return {"schema": 1, "impl": "numpy", "status": "ok", "dataset": {"name": "blobs", "n": 10, "d": 2},
            "params": {"k": 2, "iterations": 3, "init": "random", "seed": 0}, **fields}


def test_an_older_lloyd_line_is_migrated_on_read():
    record = records.parse(_lloyd())
    assert record.label == "numpy"  # no label: its row's name
    assert (record.params.stop, record.params.tol, record.stop_followed) == ("iterations", 0.0, "own")
    assert record.times.iterate is None and record.warnings == [] and record.gpus == 1


@pytest.mark.parametrize("line, named", [
    (_lloyd(dataset={"name": "blobs", "n": 10}), "dataset.d is missing"),
    (_lloyd(params={"k": True, "iterations": 3, "init": "random", "seed": 0}), "params.k is bool, not int"),
    ({"schema": 1, "task": "assign", "impl": "v1", "status": "ok", "label": "V1", "suite": "s"}, "workload is missing"),
    ({**_lloyd(), "schema": 2}, "schema 2 is not 1"),
    ({**_lloyd(), "task": "sorting"}, "no schema for the task 'sorting'"),
])
def test_a_line_short_of_what_readers_need_is_refused_with_the_field_named(line, named):
    with pytest.raises(records.RecordError, match=named):
        records.parse(line)


def test_a_typed_record_is_stored_as_the_line_a_loop_writes(tmp_path):
    store = tmp_path / "r.jsonl"
    built = {"task": "batched", "suite": "s", "workload": "w", "impl": "b", "label": "B", "status": "ok",
             "seconds": 1.5, "rows_done": 10, "build": {"blocks": 4}, "impl_source": "003"}
    results.append(records.typed(built), store)
    assert results.load(store, task="batched") == [{"schema": 1, **built}]
    assert results.read(store) == [records.typed(built)]
