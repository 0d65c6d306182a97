"""`kmbench compare A B`: labels from the repeats' bootstrap interval, the exit code a CI reads,
and cells on one side only listed rather than crashed on."""

import json
import shutil
import subprocess

import numpy as np
import pytest
from typer.testing import CliRunner

from kmbench.cli import app
from kmbench.report import compare

SPREAD = np.array([1.00, 1.01, 0.99, 1.02, 0.98])  # five repeats, +-2% around their mean


def _record(impl, seconds, status="ok", k=5, iterations=10):
    """A Lloyd record as the store keeps it, with the counted repeats' times."""
    return {"schema": 1, "impl": impl, "status": status,
            "dataset": {"name": "blobs-n1000-d2", "n": 1000, "d": 2},
            "params": {"k": k, "iterations": iterations, "init": "random", "seed": 0},
            "iterations_executed": iterations, "times": {"iterate_values": list(seconds)}}


def _store(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _compare(a, b, *options):
    return CliRunner().invoke(app, ["compare", str(a), str(b), *options])


def _line_of(output, impl):
    return next(line for line in output.splitlines() if f"{impl} on" in line and "only in" not in line)


def test_a_slower_cell_fails_and_a_faster_one_does_not(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("slowed", SPREAD), _record("sped", SPREAD)])
    b = _store(tmp_path / "b.jsonl", [_record("slowed", 1.3 * SPREAD), _record("sped", 0.7 * SPREAD[::-1])])
    out = _compare(a, b)
    assert out.exit_code == 1, out.output
    assert "slower" in _line_of(out.output, "slowed") and "faster" in _line_of(out.output, "sped")
    assert "regression slowed" in out.output and "regression sped" not in out.output
    assert _compare(a, b, "--fail-above", 1.5).exit_code == 0  # 1.3x is within a 1.5 threshold
    reverse = _compare(b, a)  # the other way round, "sped" is the one that slows
    assert reverse.exit_code == 1 and "regression sped" in reverse.output


def test_only_faster_cells_pass(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("x", SPREAD)])
    b = _store(tmp_path / "b.jsonl", [_record("x", 0.5 * SPREAD)])
    out = _compare(a, b)
    assert out.exit_code == 0 and "faster" in _line_of(out.output, "x"), out.output


def test_identical_stores_are_the_same(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("x", SPREAD), _record("y", 3 * SPREAD, k=7)])
    out = _compare(a, a)
    assert out.exit_code == 0, out.output
    assert "same" in _line_of(out.output, "x") and "same" in _line_of(out.output, "y")
    assert "2 same" in out.output


def test_a_cell_on_one_side_is_listed(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("x", SPREAD), _record("gone", SPREAD)])
    b = _store(tmp_path / "b.jsonl", [_record("x", SPREAD), _record("new", SPREAD, k=9)])
    out = _compare(a, b)
    assert out.exit_code == 0, out.output
    assert "only in A: gone on blobs-n1000-d2, k=5, 10 its" in out.output
    assert "only in B: new on blobs-n1000-d2, k=9, 10 its" in out.output


def test_cells_that_differ_only_in_iterations_read_apart(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("cpp", SPREAD, iterations=5)])
    b = _store(tmp_path / "b.jsonl", [_record("cpp", SPREAD, iterations=10)])
    out = _compare(a, b)
    assert "only in A: cpp on blobs-n1000-d2, k=5, 5 its" in out.output
    assert "only in B: cpp on blobs-n1000-d2, k=5, 10 its" in out.output


def test_a_cell_that_loses_its_ok_verdict_fails(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("x", SPREAD)])
    b = _store(tmp_path / "b.jsonl", [_record("x", SPREAD, status="mismatch")])
    out = _compare(a, b)
    assert out.exit_code == 1 and "ok in A, mismatch in B" in out.output, out.output


def test_one_repeat_is_unclear_but_a_large_slowdown_still_fails(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("x", [1.0]), _record("y", [1.0])])
    b = _store(tmp_path / "b.jsonl", [_record("x", [1.01]), _record("y", [2.0])])
    out = _compare(a, b)
    assert "unclear" in _line_of(out.output, "x") and "unclear" in _line_of(out.output, "y")
    assert out.exit_code == 1 and "regression y" in out.output and "regression x" not in out.output


def test_the_interval_holds_the_ratio_and_narrows_with_less_noise():
    rng = np.random.default_rng(0)
    ratio, low, high = compare.ratio_interval(SPREAD, 1.2 * SPREAD, rng)
    assert low < ratio < high and abs(ratio - 1.2) < 1e-12
    quiet = 1 + (SPREAD - 1) / 10
    _, quiet_low, quiet_high = compare.ratio_interval(quiet, 1.2 * quiet, rng)
    assert quiet_high - quiet_low < (high - low) / 5


@pytest.mark.parametrize("low, high, label", [
    (1.10, 1.20, "slower"), (0.80, 0.90, "faster"), (0.99, 1.01, "same"), (1.00, 1.10, "unclear"),
    (None, None, "unclear")])
def test_labels_follow_where_the_interval_lies(low, high, label):
    assert compare.label_of(low, high, noise=0.03) == label


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_stores_of_two_commits(tmp_path):
    git = lambda *args: subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    store = _store(tmp_path / "records.jsonl", [_record("x", SPREAD)])
    git("add", "records.jsonl")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "before")
    _store(store, [_record("x", 2 * SPREAD)])
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "after")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    out = CliRunner().invoke(app, ["compare", f"{head.strip()}~1:records.jsonl", str(store)],
                             env={"GIT_DIR": str(tmp_path / ".git")})
    assert out.exit_code == 1 and "slower" in _line_of(out.output, "x"), out.output


@pytest.mark.parametrize("spec, needle", [("nowhere.jsonl", "neither a record store"),
                                          ("HEAD~999999:nowhere.jsonl", "git cannot show it")])
def test_a_side_that_is_not_a_store_exits_2(tmp_path, spec, needle):
    a = _store(tmp_path / "a.jsonl", [_record("x", SPREAD)])
    out = _compare(a, spec)
    assert out.exit_code == 2 and needle in out.output, out.output


def test_cells_no_side_measured_are_summed_by_reason_not_listed(tmp_path):
    """A store from a machine without a GPU holds a skipped record per GPU row: compare printed a
    line for each, and counted each as unclear."""
    cupy = "CuPy is not installed (pip install 'kmbench[cuda12]' or 'kmbench[cuda13]')"
    gone = [dict(_record(f"gpu-{index}", [], status="skipped"), detail=cupy) for index in range(3)]
    torch = dict(_record("torch", [], status="skipped"), detail="PyTorch sees no CUDA GPU")
    a = _store(tmp_path / "a.jsonl", [_record("numpy", SPREAD), *gone, torch])
    b = _store(tmp_path / "b.jsonl", [_record("numpy", SPREAD), *gone[:2]])  # gpu-2 and torch: only in A
    out = _compare(a, b)
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())
    assert "gpu-" not in said.replace("(gpu-0, gpu-1, gpu-2)", "") and "torch on" not in said
    assert "not compared, 3 rows (gpu-0, gpu-1, gpu-2) not installed: pip install 'kmbench[cuda12]' or 'kmbench[cuda13]'" in said
    assert "not compared, 1 row skipped (torch): PyTorch sees no CUDA GPU" in said
    assert said.endswith("0 faster, 0 slower, 1 same, 0 unclear")
    found = compare.compare([json.loads(line) for line in a.read_text().splitlines()],
                            [json.loads(line) for line in b.read_text().splitlines()])
    assert [one.cell.impl for one in found.cells] == ["numpy"] and not found.only_a and not found.only_b


def test_a_cell_skipped_on_one_side_and_measured_on_the_other_is_still_compared(tmp_path):
    a = _store(tmp_path / "a.jsonl", [_record("numpy", SPREAD)])
    b = _store(tmp_path / "b.jsonl", [dict(_record("numpy", [], status="skipped"), detail="gone")])
    out = _compare(a, b)
    assert out.exit_code == 1 and "ok -> skipped" in " ".join(out.output.split())
