import json

import numpy as np
import pytest

from kmbench.data import datasets
from kmbench.errors import UsageError


def test_blobs_are_cached_by_parameters(tmp_path):
    first = datasets.blobs(500, d=3, centers=4, seed=1, directory=tmp_path)
    stamp = first.path.stat().st_mtime_ns
    again = datasets.blobs(500, d=3, centers=4, seed=1, directory=tmp_path)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp
    other = datasets.blobs(500, d=3, centers=4, seed=2, directory=tmp_path)
    assert other.path != first.path
    assert not np.array_equal(np.asarray(other.data), np.asarray(first.data))


def test_blobs_sidecar_describes_the_file(tmp_path):
    ds = datasets.blobs(300, d=2, centers=5, seed=0, dtype="float64", directory=tmp_path)
    meta = json.loads(ds.path.with_suffix(".json").read_text())
    assert meta["generator"] == "blobs" and meta["dtype"] == "float64"
    assert meta["shape"] == [300, 2] and len(meta["true_centers"]) == 5
    assert meta["checksum"] == datasets.checksum(np.load(ds.path))
    assert np.load(ds.path).dtype == np.float64
    assert not list(tmp_path.glob(".*tmp"))  # no temporary left behind


def test_radial_tree_shape_and_centers(tmp_path):
    ds = datasets.radial(4, 20.0, 3, 2.0, 250, 0.1, seed=3, directory=tmp_path)
    assert ds.data.shape == (4 * 3 * 250, 2) and ds.data.dtype == np.float32
    centers = np.array(ds.meta["true_centers"])
    assert centers.shape == (12, 2)
    np.testing.assert_allclose(np.linalg.norm(centers[0]), 22.0)  # branch at 20 plus leaf at 2, same angle
    for index, center in enumerate(centers):  # each block of cluster_size rows sits around its center
        block = np.asarray(ds.data[index * 250 : (index + 1) * 250], dtype=np.float64)
        assert np.linalg.norm(block.mean(0) - center) < 0.05
        assert 0.07 < block.std(0).mean() < 0.13


def test_radial_default_parameters_give_one_million_points():
    centers = datasets.radial_centers(10, 20, 5, 2)
    assert centers.shape[0] * 20000 == 1_000_000


def test_radial_chunks_match_one_shot(tmp_path, monkeypatch):
    whole = np.asarray(datasets.radial(2, 5.0, 2, 1.0, 100, 0.5, directory=tmp_path / "a").data)
    monkeypatch.setattr(datasets, "_CHUNK_ROWS", 64)
    chunked = np.asarray(datasets.radial(2, 5.0, 2, 1.0, 100, 0.5, directory=tmp_path / "b").data)
    assert chunked.shape == whole.shape
    # Same per-cluster placement whatever the chunking (the noise stream differs).
    np.testing.assert_allclose(chunked.reshape(4, 100, 2).mean(1), whole.reshape(4, 100, 2).mean(1), atol=0.2)


@pytest.mark.parametrize("text,sep", [("1 2\n3 4\n5 6\n", "space"), ("1,2\n3,4\n5,6\n", "comma")])
def test_text_files_load(tmp_path, text, sep):
    path = tmp_path / f"points-{sep}.csv"
    path.write_text(text)
    ds = datasets.load_file(path)
    np.testing.assert_array_equal(ds.data, [[1, 2], [3, 4], [5, 6]])


def test_label_column_is_dropped(tmp_path):
    path = tmp_path / "labelled.txt"
    path.write_text("1.5 2.5 0\n3.5 4.5 1\n")
    ds = datasets.load_file(path, label_column=True)
    assert ds.data.shape == (2, 2)


def test_npy_file_loads(tmp_path):
    path = tmp_path / "p.npy"
    np.save(path, np.arange(12, dtype=np.float32).reshape(6, 2))
    assert datasets.load_file(path).data.shape == (6, 2)


@pytest.mark.parametrize("array,message", [
    (np.array([[1.0, np.nan], [2, 3]]), "NaN or infinite"),
    (np.array([[1.0, np.inf], [2, 3]]), "NaN or infinite"),
    (np.arange(5.0), "2-D array"),
    (np.zeros((2, 2, 2)), "2-D array"),
    (np.zeros((0, 2)), "no points"),
])
def test_bad_arrays_are_refused(tmp_path, array, message):
    path = tmp_path / "bad.npy"
    np.save(path, array)
    with pytest.raises(UsageError, match=message):
        datasets.load_file(path)


@pytest.mark.parametrize("content,message", [
    ("", "empty"),
    ("1 2\nfoo bar\n", "not a number"),
])
def test_bad_text_is_refused(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        datasets.load_file(path)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        datasets.load_file(tmp_path / "nope.npy")
    garbage = tmp_path / "garbage.npy"
    garbage.write_bytes(b"\x00\x01 not numpy")
    with pytest.raises(UsageError, match="not a readable .npy"):
        datasets.load_file(garbage)
