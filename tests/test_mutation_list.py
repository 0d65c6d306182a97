"""The hand-written slips of `make mutate-judge` (tools/mutate_judge.py) each name a line that is in
its file exactly once: when code moves (scan.py's split moved two of them to error_bounds.py), a
slip whose line is gone would plant nothing and prove nothing."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mutants():
    spec = importlib.util.spec_from_file_location("mutate_judge", ROOT / "tools" / "mutate_judge.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MUTANTS


def test_every_hand_written_slip_names_a_line_found_once_in_its_file():
    missing = [(path, line) for path, line, *_ in _mutants() if (ROOT / path).read_text().count(line) != 1]
    assert not missing, missing


def mutate_generated():
    """tools/mutate_generated.py as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("mutate_generated", ROOT / "tools" / "mutate_generated.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_adopting_a_grown_test_selection_keeps_kills_and_reruns_the_rest(tmp_path, monkeypatch):
    """tools/mutate_generated.py --adopt-selection: a kill stays (more tests kill at least as much),
    a survivor, a timeout and a crash are to be run again, and mutmut's stored fingerprint becomes
    the selection's, so its next run keeps the cache instead of emptying it."""
    import json
    import shutil

    import pytest

    pytest.importorskip("mutmut")
    tool = mutate_generated()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "mutants" / "kmbench").mkdir(parents=True)
    (tmp_path / "mutants" / "mutmut-stats.json").write_text(json.dumps({"config_fingerprint": {"test_selection": "old"}}))
    verdicts = {"killed": 1, "survived": 0, "timeout": -24, "crashed": -11, "not run": None}
    meta = tmp_path / "mutants" / "kmbench" / "clock.py.meta"
    meta.write_text(json.dumps({"exit_code_by_key": verdicts}))
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    monkeypatch.chdir(tmp_path)
    assert tool.adopt_selection() == 0
    assert json.loads(meta.read_text())["exit_code_by_key"] == {"killed": 1, "survived": None, "timeout": None,
                                                                "crashed": None, "not run": None}
    from mutmut.configuration import config

    stored = json.loads((tmp_path / "mutants" / "mutmut-stats.json").read_text())["config_fingerprint"]
    assert stored == config().config_fingerprint()
    # Survivors already run against the new files by --recheck stay as they are.
    meta.write_text(json.dumps({"exit_code_by_key": verdicts}))
    (tmp_path / "mutants" / "mutmut-stats.json").write_text(json.dumps({"config_fingerprint": {"test_selection": "old"}}))
    assert tool.adopt_selection(rechecked=True) == 0
    assert json.loads(meta.read_text())["exit_code_by_key"] == verdicts
    # Where how the tests run changed as well, nothing is kept.
    (tmp_path / "mutants" / "mutmut-stats.json").write_text(json.dumps({"config_fingerprint": {"test_execution": "old"}}))
    assert tool.adopt_selection() == 1


def test_recheck_runs_unexplained_survivors_or_only_the_named_gpu_only_listings():
    """--recheck's choice of mutants: of those --only names, a survivor no entry explains and a
    mutant not run yet; with --gpu-only (a GPU machine) only named survivors listed gpu-only."""
    tool = mutate_generated()
    gpu, same = "gpu-only: a CuPy branch", "equivalent: the same bits"
    assert tool.wants_recheck(0, None, named=True, gpu_only=False)
    assert not tool.wants_recheck(0, None, named=False, gpu_only=False)
    assert not tool.wants_recheck(0, same, named=True, gpu_only=False)
    assert not tool.wants_recheck(0, gpu, named=True, gpu_only=False)
    assert tool.wants_recheck(None, None, named=True, gpu_only=False)
    assert not tool.wants_recheck(None, None, named=False, gpu_only=False)
    assert not tool.wants_recheck(1, None, named=True, gpu_only=False)
    assert tool.wants_recheck(0, gpu, named=True, gpu_only=True)
    assert not tool.wants_recheck(0, gpu, named=False, gpu_only=True)
    assert not tool.wants_recheck(0, same, named=True, gpu_only=True)
    assert not tool.wants_recheck(0, None, named=True, gpu_only=True)
    assert not tool.wants_recheck(None, None, named=True, gpu_only=True)
