"""Stop rules (issue 9): exactly T iterations, or a tolerance on the fraction of points that
changed cluster; the oracle and every implementation that can follow the rule agree on the
iterations executed, and one that cannot is given the reference's count and marked."""

import numpy as np
import pytest

from kmbench import registry
from kmbench.protocol import reference, runner, validate
from kmbench.data.datasets import Dataset
from kmbench.protocol import stop_done
from tests.conftest import blob_data


def _changes_per_iteration(data, start, iterations):
    """Labels changed in each iteration, by brute force (float64)."""
    centroids, labels, changes = start.astype(np.float64), None, []
    for _ in range(iterations):
        new = ((data[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
        changes.append(len(data) if labels is None else int((new != labels).sum()))
        labels = new
        for j in range(len(centroids)):
            if (labels == j).any():
                centroids[j] = data[labels == j].mean(0)
    return changes


def test_stop_done_is_the_documented_rule():
    assert stop_done(0, 100, 0.0) and not stop_done(1, 100, 0.0)
    assert stop_done(10, 1000, 0.01) and not stop_done(11, 1000, 0.01)
    assert not stop_done(0, 100, None)  # the iterations rule never stops early


@pytest.mark.parametrize("tol", [0.0, 0.01])
def test_oracle_stops_where_the_rule_says(tol):
    data = blob_data(np.random.default_rng(3), n=3000, k=6).astype(np.float64)
    start = data[:6]
    changes = _changes_per_iteration(data, start, 100)
    expected = next(i + 1 for i, c in enumerate(changes) if c <= tol * len(data))
    run = reference.lloyd(data, start, 100, tol=tol)
    assert run.iterations == expected
    capped = reference.lloyd(data, start, expected - 1, tol=tol)
    assert capped.iterations == expected - 1  # at most max_iter


def _records(names, tol, max_iter=100, n=4000, k=8):
    data = blob_data(np.random.default_rng(17), n=n, k=5)
    dataset = Dataset("unit", data, None, {"generator": "test"})
    settings = runner.Settings(k=k, iterations=max_iter, stop="tolerance", tol=tol, warmup=0, repeats=1)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, max_iter, tol=tol)
    everything = registry.discover()
    return oracle, {name: runner.run_cell(everything[name], problem, oracle, dataset, settings, "t")
                    for name in names}


@pytest.mark.parametrize("tol", [0.0, 0.005])
def test_implementations_that_follow_the_rule_agree_on_iterations(tol):
    oracle, records = _records(["numpy", "numpy-blog", "cpp", "cpp-eigen"], tol)
    assert 2 < oracle.iterations < 100
    for name, record in records.items():
        if record["status"] == "skipped":  # cpp without a compiler
            continue
        assert record["status"] == "ok", (name, record.get("detail"))
        assert record["stop"]["followed"] == "own"
        assert record["iterations_executed"] == oracle.iterations == record["reference_iterations"], name


def test_sklearn_follows_tolerance_zero_only():
    oracle, records = _records(["sklearn"], 0.0)
    assert records["sklearn"]["stop"]["followed"] == "own"
    assert records["sklearn"]["iterations_executed"] == oracle.iterations
    _, records = _records(["sklearn"], 0.01)
    assert records["sklearn"]["stop"]["followed"] == "reference count"


def test_an_implementation_that_cannot_follow_is_given_the_reference_count_and_marked():
    oracle, records = _records(["scipy"], 0.0)
    record = records["scipy"]
    assert record["stop"]["followed"] == "reference count"
    assert record["iterations_executed"] == oracle.iterations
    assert record["status"] == "ok"
    assert any("cannot stop by the tolerance rule itself" in w for w in record["warnings"])
    from kmbench.report import markdown
    from kmbench.report.contents import Contents
    md = markdown.render(Contents([record]))
    assert "(reference's count)" in md
    assert "until no label changes" in md


def test_cli_tolerance_run(tmp_path):
    from typer.testing import CliRunner

    from kmbench.data import results
    from kmbench.cli import app

    out = CliRunner().invoke(app, ["run", "--n", "2000", "--k", "4", "--stop", "tolerance", "--tol", "0",
                                   "--max-iters", "50", "--repeats", "1", "--impl", "numpy,scipy"])
    assert out.exit_code == 0, out.output
    records = {r["impl"]: r for r in results.load()}
    assert records["numpy"]["iterations_executed"] == records["numpy"]["reference_iterations"] < 50
    assert records["numpy"]["params"]["stop"] == "tolerance"


@pytest.mark.parametrize("args", [("--stop", "never"), ("--stop", "tolerance", "--tol", "1.5"),
                                  ("--stop", "tolerance", "--max-iters", "0")])
def test_bad_stop_options_exit_2(args):
    from typer.testing import CliRunner

    from kmbench.cli import app

    out = CliRunner().invoke(app, ["run", "--n", "100", "--impl", "numpy", *args])
    assert out.exit_code == 2, out.output
