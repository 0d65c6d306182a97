"""Overflow said up front (issue 59, build 6): where a dataset's squared distances are beyond what
a row's precision holds, the run says before its cells which rows cannot compute it and why, and
their cells are skipped with that reason, instead of ending `mismatch` with "no known cause"."""

from dataclasses import replace

import numpy as np
import pytest

from impls.cpu.numpy_fast import NumpyFast
from kmbench.data.datasets import Dataset
from kmbench.protocol import overflow, runner
from kmbench.protocol.task import Task
from kmbench.tasks import lloyd
from tests.conftest import blob_data


class NumpyFloat32(NumpyFast):
    """NumPy's row computing in float32 on any data, as it declares (a float32 CPU row)."""

    name = label = "numpy-float32"
    dtype = "float32"

    def run(self, problem):
        return super().run(replace(problem, data=problem.data.astype(np.float32),
                                   initial_centroids=problem.initial_centroids.astype(np.float32)))


class Lines:
    """A reporter that keeps what the run says."""

    def __init__(self):
        self.said, self.records = [], []

    def start(self, impl, workload):
        pass

    def note(self, text):
        pass

    def say(self, text):
        self.said.append(text)

    def done(self, record):
        self.records.append(record)


def _huge(scale=1e30, n=300):
    return Dataset("huge", blob_data(np.random.default_rng(7), n=n, dtype=np.float64) * scale, None,
                   {"generator": "test"})


SETTINGS = runner.Settings(k=4, iterations=5, warmup=0, repeats=1)


def test_a_float32_row_on_coordinates_of_1e30_is_skipped_with_the_reason_said_up_front(tmp_path):
    lines = Lines()
    narrow, wide = lloyd.run([NumpyFloat32(), NumpyFast()], [_huge()], SETTINGS, store=tmp_path / "r.jsonl",
                             reporter=lines)
    assert narrow["status"] == "skipped"
    assert narrow["detail"].startswith("float32 cannot hold these squared distances")
    assert "above the largest value float32 sums in (3.4e+38)" in narrow["detail"]
    (said,) = lines.said  # before the cells: which rows, and why
    assert said.startswith("numpy-float32 cannot compute huge") and narrow["detail"] in said
    # The float64 row holds 1e60 easily: it runs, and is certified.
    assert wide["status"] == "ok", wide["detail"]


def test_the_skip_is_warranted_the_float32_row_cannot_compute_it(tmp_path, monkeypatch):
    """Let it run anyway: its distances overflow, the judge refuses its result, and the mismatch
    names the overflow as its likely cause (no longer "no known cause")."""
    monkeypatch.setattr(runner.LloydProtocol, "cannot", Task.cannot)
    with np.errstate(over="ignore", invalid="ignore"):
        (record,) = lloyd.run([NumpyFloat32()], [_huge()], SETTINGS, store=tmp_path / "r.jsonl")
    assert record["status"] == "mismatch"
    assert "Likely cause: float32 cannot hold |x|^2 of these points" in record["detail"]
    assert "no known cause" not in record["detail"]


def test_ordinary_data_keep_every_row(tmp_path):
    lines = Lines()
    records = lloyd.run([NumpyFloat32(), NumpyFast()], [_huge(scale=1.0)], SETTINGS, store=tmp_path / "r.jsonl",
                        reporter=lines)
    assert [record["status"] for record in records] == ["ok", "ok"] and lines.said == []


@pytest.mark.parametrize("computes_in, fits", [("float64", True), ("float32", True), ("tf32", True),
                                               ("bfloat16", True), ("float16", False)])
def test_float16_holds_no_coordinate_spread_over_twice_65504(computes_in, fits):
    rng = np.random.default_rng(3)
    data = rng.uniform(-1e5, 1e5, size=(500, 3))  # distances up to about 1e11: float32 sums hold them
    why = overflow.cannot_hold(data, data[:4].copy(), computes_in)
    assert (why is None) == fits
    if not fits:
        assert why.startswith("float16 cannot hold these points: one coordinate spans about")


def test_the_bound_is_the_nearest_centroid_of_the_farthest_points_exactly():
    data = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3e19], [2e19, 1.0]])
    centroids = np.array([[0.0, 0.0], [1.0, 0.0]])
    span, reach = overflow.figures(data, centroids)
    assert span == 3e19
    assert reach == pytest.approx(9e38, rel=1e-12)  # (0, 3e19)'s nearest is the origin: 9e38 > 3.4e38
    assert overflow.cannot_hold(data, centroids, "float32") is not None
    near = np.vstack([centroids, [[0.0, 3e19]]])  # a centroid on the far point: its nearest is 0 away
    assert overflow.figures(data, near)[1] == pytest.approx(4e38, rel=1e-12)  # (2e19, 1) is left, at 4e38


def test_data_far_from_the_origin_names_the_expanded_forms_overflow_as_a_likely_cause():
    data = np.random.default_rng(2).standard_normal((200, 3)) + 1e20  # |x|^2 about 3e40, spreads of 1
    assert overflow.cannot_hold(data, data[:3].copy(), "float32") is None  # its distances are small
    cause = overflow.expanded_cause(data, "float32")
    assert cause.startswith("float32 cannot hold |x|^2 of these points (about 3.0e+40")
    assert overflow.expanded_cause(data, "float64") is None
