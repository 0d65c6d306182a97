from importlib.metadata import EntryPoint

import pytest

from kmbench import registry
from kmbench.errors import UsageError


def test_builtins_are_found():
    found = registry.discover()
    for name in ("numpy-blog", "numpy", "cpp", "cpp-eigen", "cuda-v1", "cuda-v2", "cuda-v3", "sklearn", "scipy"):
        assert name in found


def test_third_party_entry_points_are_found(monkeypatch):
    good = EntryPoint(name="mine", value="tests.test_runner:Explodes", group=registry.ENTRY_POINT_GROUP)
    bad = EntryPoint(name="broken", value="no_such_module:Thing", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [good, bad] if group == registry.ENTRY_POINT_GROUP else [])
    found = registry.discover()
    assert "explodes" in found  # the class's own name is its key
    usable, why = found["broken"].available()
    assert not usable and "entry point failed to load" in why


def test_select_keeps_order_and_refuses_unknown_names():
    everything = registry.discover()
    assert [impl.name for impl in registry.select("scipy,numpy", everything)] == ["scipy", "numpy"]
    with pytest.raises(UsageError, match="Unknown implementation 'nope'"):
        registry.select("numpy,nope", everything)


def test_run_takes_lloyd_rows_only_and_says_why_not():
    from kmbench import registry
    from kmbench.errors import UsageError

    names = {impl.name for impl in registry.select(None)}
    assert "numpy" in names and "batched-numpy" not in names and "assign-numpy" not in names
    with pytest.raises(UsageError, match="serves the batched task, not lloyd"):
        registry.select("numpy,batched-numpy")
    assert [impl.name for impl in registry.select("batched-numpy", task="batched")] == ["batched-numpy"]


def test_list_shows_each_task():
    from typer.testing import CliRunner

    from kmbench.cli import app

    out = CliRunner(env={"COLUMNS": "250"}).invoke(app, ["list"]).output
    assert "batched-numpy" in out and "assign-numpy" in out and "batched" in out
