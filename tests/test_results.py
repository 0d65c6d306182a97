import json
import multiprocessing

from kmbench import results


def _writer(path, who, count):
    for index in range(count):
        results.append({"who": who, "index": index}, path)


def test_append_keeps_earlier_records(tmp_path):
    store = tmp_path / "r.jsonl"
    results.append({"a": 1}, store)
    results.append({"a": 2}, store)
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
    store.write_text(json.dumps({"schema": results.SCHEMA_VERSION, "a": 1}) + "\n{\"schema\": 1, \"a\"")
    results.append({"a": 3}, store)
    assert [r["a"] for r in results.load(store)] == [1, 3]
