"""The float64 reference as the validator keeps it and the figures it gives (kmbench.protocol.validate),
on four points worked out by hand: 0 and 2 about 1, 10 and 12 about 11 (inertia 4, mean 6, spread
sqrt(26)). Fast on purpose: mutmut runs these for every mutant of the functions they reach. The figures'
floors, the worst repeat, the record's keys and the GPU bookkeeping are in tests/test_judge_mutants.py."""

import time
from types import SimpleNamespace

import numpy as np
import pytest

from kmbench.judge import certify, points
from kmbench.protocol import validate

DATA = np.array([[0.0, 0.0], [2.0, 0.0], [10.0, 0.0], [12.0, 0.0]])
START = np.array([[0.0, 0.0], [12.0, 0.0]])
SPREAD = np.sqrt(26.0)  # distances from the mean (6, 0): 6, 4, 4, 6


def test_the_oracle_holds_the_float64_end_point_and_what_it_belongs_to():
    told = []
    started = time.perf_counter()
    oracle = validate.Oracle.compute(DATA, START, 3, progress=told.append)
    took = time.perf_counter() - started
    assert oracle.centroids.tolist() == [[1.0, 0.0], [11.0, 0.0]]
    assert oracle.inertia == 4.0 and oracle.spread == pytest.approx(SPREAD, rel=1e-15)
    assert (oracle.n, oracle.iterations, oracle.emptied) == (4, 3, 0)
    assert oracle.offset == pytest.approx(6 / SPREAD, rel=1e-15)  # the mean's distance from the origin, in spreads
    assert oracle.problem == {"start": validate.start_digest(START),
                              "stop": {"rule": "iterations", "max_iter": 3, "tol": None}}
    assert told == [f"float64 reference: iteration {i}/3" for i in (1, 2, 3)]
    assert 0 < oracle.seconds <= took and oracle.workspace.source is DATA


def test_the_oracles_offset_and_spread_are_in_the_datas_own_scale_whatever_the_judge_keeps(monkeypatch):
    """A hundredth of the size (spread below 1): the same offset in spreads; and with no room to keep
    the points' norms, the spread is measured on the data, the same."""
    small = validate.Oracle.compute(DATA / 100, START / 100, 1)
    assert small.offset == pytest.approx(6 / SPREAD, rel=1e-15)
    assert small.spread == pytest.approx(SPREAD / 100, rel=1e-15)
    monkeypatch.setattr(points, "CACHE_BYTES", 0)
    assert validate.Oracle.compute(DATA, START, 1).spread == pytest.approx(SPREAD, rel=1e-15)


def test_the_oracle_by_tolerance_stops_when_no_label_changes_and_counts_empty_clusters():
    """A third centroid at 100 that no point joins; with tol = 0 the second iteration changes no label."""
    start = np.vstack([START, [[100.0, 0.0]]])
    oracle = validate.Oracle.compute(DATA, start, 10, tol=0.0)
    assert (oracle.iterations, oracle.emptied) == (2, 1)
    assert oracle.centroids[2].tolist() == [100.0, 0.0]
    assert oracle.problem["stop"] == {"rule": "tolerance", "max_iter": 10, "tol": 0.0}


def test_a_start_digest_tells_equal_bytes_of_another_dtype_apart():
    zeros = np.zeros((2, 2))  # all-zero bytes as float64 and as int64 alike
    assert validate.start_digest(zeros) != validate.start_digest(zeros.astype(np.int64))


def test_the_workspace_is_kept_for_the_same_data_and_made_anew_for_other_data():
    oracle = validate.Oracle.compute(DATA, START, 1)
    made = oracle.workspace
    kept = oracle.workspace_for(DATA, np)
    assert kept is made and oracle.workspace is made and kept.xp is np and kept.device_nbytes() == 0
    other = DATA.copy()
    fresh = oracle.workspace_for(other, np)
    assert fresh is not kept and fresh.source is other and oracle.workspace is fresh
    oracle.make_room()  # on the CPU nothing is held on a GPU: the workspace stays
    assert oracle.workspace is fresh
    validate.Oracle.from_dict(oracle.to_dict()).make_room()  # one from a record holds no workspace at all
    oracle.release()
    assert oracle.workspace is None and oracle.seeds.get(1) is None


def test_inertias_are_computed_once_per_centroids_and_remembered_ones_are_used(monkeypatch):
    oracle = validate.Oracle.compute(DATA, START, 1)
    assert oracle.inertia_of(START, DATA) == 8.0  # 0 + 4 + 4 + 0
    assert oracle.inertia_of(START + 1.0, DATA + 1.0) == 8.0  # other data than the workspace's
    assert oracle.inertia_of(START + 2.0, DATA) == 8 + 4 + 20 + 8  # from (2, 2) and (14, 2)
    assert validate.Oracle.from_dict(oracle.to_dict()).inertia_of(START, DATA) == 8.0  # no workspace
    moved = START + [[0.0, 3.0], [0.0, 0.0]]
    oracle.remember({certify.digest(moved): 123.0})
    assert oracle.inertia_of(moved, DATA) == 123.0
    monkeypatch.setattr(certify, "inertia", None)  # the reference's own end point was handed over
    assert oracle.inertia_of(oracle.centroids, DATA) == oracle.inertia == 4.0


def test_the_centroid_error_is_over_root_k_spreads_with_k_unlike_d():
    three = validate.Oracle(np.zeros((3, 2)), 0.0, 2.0)  # k = 3 centroids in d = 2
    moved = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, 0.0]])
    assert validate.centroid_error(moved, three) == pytest.approx(5 / (np.sqrt(3) * 2.0), rel=1e-14)


def test_the_figures_of_an_end_point_are_its_inertia_and_its_distance_from_the_references():
    oracle = validate.Oracle.compute(DATA, START, 3)
    got = validate.figures(oracle.centroids + [[0.0, 1.0], [0.0, 0.0]], oracle, DATA)
    assert (got.status, got.detail, got.inertia) == ("ok", "", 6.0)  # 2 + 2 from (1, 1), 1 + 1 from (11, 0)
    assert got.inertia_difference == 0.5 and got.centroid_error == pytest.approx(1 / (np.sqrt(2) * SPREAD))
    assert validate.figures(np.zeros((3, 2)), oracle, DATA).status == "mismatch"


def _failed(inadmissible):
    return SimpleNamespace(certified=False, precision="float32", inadmissible=inadmissible,
                           failure=SimpleNamespace(sentence=lambda: "iteration 2, centroid 1 is off"),
                           as_dict=lambda: {"certified": False})


def test_an_uncertified_row_is_a_mismatch_that_says_where_or_approximate_with_its_quality():
    oracle = validate.Oracle.compute(DATA, START, 3)
    end = validate.Verdict("ok", 0.5, 0.25, "", 5.0)
    wrong = validate.verdict(_failed([0.1, 0.25]), end, oracle)
    assert (wrong.status, wrong.centroid_error, wrong.inertia_difference, wrong.inertia) == ("mismatch", 0.5, 0.25, 5.0)
    assert wrong.detail == "not a Lloyd trajectory in float32: iteration 2, centroid 1 is off"
    assert wrong.certificate == {"certified": False}
    rough = validate.verdict(_failed([0.1, 0.5, 0.25]), end, oracle, approximate=True)
    assert (rough.status, rough.centroid_error, rough.inertia_difference, rough.inertia) == ("approximate", 0.5,
                                                                                              0.25, 5.0)
    assert rough.certificate == {"certified": False}
    assert rough.detail == ("approximate: inertia +25.000% against the float64 trajectory's; 25.00% of its last "
                            "labels inadmissible (first uncertified step: iteration 2, centroid 1 is off)")
    assert validate.verdict(_failed([]), end, oracle, approximate=True).detail == (
        "approximate: inertia +25.000% against the float64 trajectory's (first uncertified step: iteration 2, "
        "centroid 1 is off)")
    broken = validate.Verdict("mismatch", detail="centroids contain NaN or infinite values")
    assert validate.verdict(_failed([]), broken, oracle) is broken


