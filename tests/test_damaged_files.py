"""Every file the harness or a user wrote, damaged by the test itself: each reader either
recomputes (with a warning that says so) or stops with one sentence and exit code 2, never a
traceback, and a stale cache never produces a verdict. The oracle cache's damages are in
test_oracles.py, the record store's in test_results.py."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from kmbench.data import datasets, results
from kmbench.cli import app
from kmbench.errors import UsageError


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _cached_blobs():
    return datasets.blobs(400, d=2, centers=4, seed=2, directory=datasets.data_dir())


def _run(name):
    return invoke("run", "--dataset", name, "--k", 4, "--iters", 5, "--repeats", 1, "--impl", "numpy")


def test_data_changed_after_caching_are_refused_not_judged_by_the_old_oracle():
    """The issue's case: same name and shape, other values (the first rows untouched), the old
    sidecar and the old oracle still cached. Before the fix the run used them and judged a
    correct row `mismatch`."""
    ds = _cached_blobs()
    assert _run(ds.name).exit_code == 0
    changed = np.lib.format.open_memmap(ds.path, mode="r+")
    changed[50:] = changed[50:] * 3.0 + 7.0
    changed.flush()
    del changed
    stored = len(results.load())
    out = _run(ds.name)
    assert out.exit_code == 2, out.output
    assert "no longer matches the checksum" in out.output and "Traceback" not in out.output
    assert len(results.load()) == stored  # no verdict was written


def test_a_truncated_cached_dataset_is_regenerated_by_name():
    ds = _cached_blobs()
    whole = np.array(ds.data)
    ds.path.write_bytes(ds.path.read_bytes()[:1000])  # "mmap length is greater than file size" before
    with pytest.warns(datasets.CacheWarning, match="regenerating"):
        again = datasets.resolve(ds.name)
    np.testing.assert_array_equal(np.asarray(again.data), whole)
    out = _run(ds.name)
    assert out.exit_code == 0 and results.load()[-1]["status"] == "ok", out.output


@pytest.mark.parametrize("damage", ["truncated", "empty", "not-npy", "other-shape"])
def test_a_damaged_cached_dataset_is_regenerated_by_its_generator(damage):
    ds = _cached_blobs()
    whole = np.array(ds.data)
    content = {"truncated": ds.path.read_bytes()[:200], "empty": b"", "not-npy": b"hello"}.get(damage)
    if content is None:
        np.save(ds.path, whole[:10])
    else:
        ds.path.write_bytes(content)
    with pytest.warns(datasets.CacheWarning, match="regenerating"):
        again = _cached_blobs()
    np.testing.assert_array_equal(np.asarray(again.data), whole)


def test_a_damaged_sidecar_regenerates_where_the_parameters_are_known_and_refuses_where_not():
    ds = _cached_blobs()
    sidecar = ds.path.with_suffix(".json")
    sidecar.write_text("{not json")
    with pytest.raises(UsageError, match="parameters are unknown"):
        datasets.resolve(ds.name)  # by name alone, nothing says how to make it again
    out = _run(ds.name)
    assert out.exit_code == 2 and "Traceback" not in out.output
    with pytest.warns(datasets.CacheWarning):
        again = _cached_blobs()  # the generator's own call knows them
    assert json.loads(sidecar.read_text())["checksum"] == again.meta["checksum"]


def test_a_sidecar_at_odds_with_its_file_is_not_trusted():
    ds = _cached_blobs()
    sidecar = ds.path.with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    meta["file_bytes"] += 8
    sidecar.write_text(json.dumps(meta))
    with pytest.warns(datasets.CacheWarning, match="bytes"):
        datasets.resolve(ds.name)
