"""The oracle, cached (issue 7, item 13)."""

import dataclasses
import io
import json
import warnings

import numpy as np
import pytest

from kmbench.protocol import oracles, runner, validate
from kmbench.data.datasets import Dataset, checksum
from kmbench.tasks import lloyd
from impls.cpu.numpy_fast import NumpyFast
from tests.conftest import blob_data


def _problem(n=800, iterations=6, seed=0):
    data = blob_data(np.random.default_rng(11), n=n)
    dataset = Dataset("unit", data, None, {"generator": "test", "checksum": checksum(data)})
    settings = runner.Settings(k=5, iterations=iterations, seed=seed, warmup=0, repeats=1)
    return dataset, runner.make_problem(dataset, settings), settings


def test_second_run_reuses_the_stored_oracle(tmp_path, monkeypatch):
    dataset, problem, _ = _problem()
    first, cached = oracles.get(dataset, problem, tmp_path)
    assert not cached
    assert len(list((tmp_path / "oracles").glob("*.npz"))) == 1
    computed = []
    monkeypatch.setattr(validate.Oracle, "compute", classmethod(lambda *a, **k: computed.append(1)))
    second, cached = oracles.get(dataset, problem, tmp_path)
    assert cached and not computed
    np.testing.assert_array_equal(first.centroids, second.centroids)
    for name in ("inertia", "spread", "n", "iterations", "emptied", "offset", "problem"):
        assert getattr(first, name) == getattr(second, name)


def test_key_follows_data_start_and_stop_rule(tmp_path):
    dataset, problem, _ = _problem()
    oracles.get(dataset, problem, tmp_path)
    _, other_iterations, _ = _problem(iterations=7)
    _, other_start, _ = _problem(seed=3)
    tolerance = dataclasses.replace(problem, tol=0.0)
    changed = Dataset("unit", dataset.data, None, {"generator": "test", "checksum": "sha256:other"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # each finds no entry at all: none of another problem's
        assert not oracles.get(dataset, other_iterations, tmp_path)[1]
        assert not oracles.get(dataset, other_start, tmp_path)[1]
        assert not oracles.get(dataset, tolerance, tmp_path)[1]
        assert not oracles.get(changed, problem, tmp_path)[1]
    assert len(list((tmp_path / "oracles").glob("*.npz"))) == 5


def test_an_entry_copied_from_another_problem_of_the_same_shape_is_refused(tmp_path):
    dataset, problem, _ = _problem()
    _, other, _ = _problem(seed=3)  # same shape, other start
    mine, _ = oracles.get(dataset, problem, tmp_path)
    (entry,) = (tmp_path / "oracles").glob("*.npz")
    theirs = oracles.key(dataset.meta["checksum"], other.initial_centroids, other.stop)
    (tmp_path / "oracles" / f"{theirs}.npz").write_bytes(entry.read_bytes())
    with pytest.warns(UserWarning, match="another problem"):
        again, cached = oracles.get(dataset, other, tmp_path)
    assert not cached
    assert again.problem["start"] != mine.problem["start"]


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _truncated(whole: bytes) -> bytes:
    return whole[: len(whole) // 2]


def _wrong_shape(whole: bytes) -> bytes:
    with np.load(io.BytesIO(whole)) as stored:
        return _npz(centroids=stored["centroids"][:-1], meta=stored["meta"])


def _meta_not_json(whole: bytes) -> bytes:
    with np.load(io.BytesIO(whole)) as stored:
        return _npz(centroids=stored["centroids"], meta=np.array("{not json"))


def _meta_incomplete(whole: bytes) -> bytes:
    with np.load(io.BytesIO(whole)) as stored:
        meta = json.loads(str(stored["meta"]))
        del meta["inertia"]
        return _npz(centroids=stored["centroids"], meta=np.array(json.dumps(meta)))


@pytest.mark.parametrize("damage", [
    lambda whole: b"half a file",  # not a zip
    lambda whole: b"",  # empty
    _truncated,  # a zip cut short: BadZipFile before the fix
    lambda whole: _npz(other=np.zeros(3)),  # a zip without our keys
    _wrong_shape,  # centroids for another k
    _meta_not_json,
    _meta_incomplete,
], ids=["not-a-zip", "empty", "truncated", "wrong-keys", "wrong-shape", "meta-not-json", "meta-incomplete"])
def test_a_damaged_entry_is_recomputed_not_trusted(tmp_path, damage):
    dataset, problem, _ = _problem()
    good, _ = oracles.get(dataset, problem, tmp_path)
    (entry,) = (tmp_path / "oracles").glob("*.npz")
    entry.write_bytes(damage(entry.read_bytes()))
    with pytest.warns(UserWarning, match="damaged.*recomputing"):
        again, cached = oracles.get(dataset, problem, tmp_path)
    assert not cached
    np.testing.assert_array_equal(good.centroids, again.centroids)
    assert oracles.get(dataset, problem, tmp_path)[1]  # and the entry is whole again


def test_no_temporary_file_is_left_behind(tmp_path):
    dataset, problem, _ = _problem()
    oracles.get(dataset, problem, tmp_path)
    assert [p.name for p in (tmp_path / "oracles").iterdir() if p.name.startswith(".")] == []


def test_the_oracle_reports_progress_while_it_runs(tmp_path):
    dataset, problem, _ = _problem(iterations=4)
    seen = []
    oracles.get(dataset, problem, tmp_path, progress=seen.append)
    assert any("float64 reference: iteration 4/4" in text for text in seen), seen


def test_run_uses_the_cache_across_runs(tmp_path):
    dataset, _, settings = _problem()
    first = lloyd.run([NumpyFast()], [dataset], settings, tmp_path / "r.jsonl", data_dir=tmp_path)
    assert len(list((tmp_path / "oracles").glob("*.npz"))) == 1
    second = lloyd.run([NumpyFast()], [dataset], settings, tmp_path / "r.jsonl", data_dir=tmp_path)
    assert first[0]["validation"]["centroid_error"] == second[0]["validation"]["centroid_error"]
    assert first[0]["status"] == second[0]["status"] == "ok"
