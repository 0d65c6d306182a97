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


def test_every_builtin_row_declares_its_own_place():
    rows = registry._builtins()
    assert all(row.row_order is not None for row in rows)
    assert len({row.row_order for row in rows}) == len(rows), "two rows declare the same place"
    assert len({row.name for row in rows}) == len(rows), "two rows share a name: one would be lost"


def test_a_row_inherits_neither_its_parents_place_nor_its_baseline():
    from impls.peers.sklearn_kmeans import SklearnKMeans

    class Mine(SklearnKMeans):
        name = "mine"

    assert SklearnKMeans.baseline and SklearnKMeans.ranked_in_reports and SklearnKMeans.row_order is not None
    assert (Mine.row_order, Mine.ranked_in_reports, Mine.baseline) == (None, False, False)


def test_helpers_built_on_a_row_are_not_rows():
    found = registry.discover()
    assert "assign-floor" not in found  # the ladder's floor kernel: it times memory, finds no centroid
    assert {type(impl).__name__ for impl in found.values()}.isdisjoint({"StreamFloor", "ShardLloyd"})


def test_document_000_rows_lead_reports_in_its_order_against_its_baseline():
    from kmbench.report import published

    table = published.table("python-cpp-cuda")
    ranked = registry.ranked_in_reports()
    documented = [row["impl"] for row in table["rows"]]
    assert [name for name in ranked if name in documented] == documented
    assert registry.baseline("lloyd") == table["baseline"]


def _package(root, name, files: dict[str, str]):
    (root / name).mkdir()
    for file, text in {"__init__.py": "", **files}.items():
        (root / name / file).write_text(text)


def test_builtin_rows_are_found_by_reading_the_package(tmp_path, monkeypatch):
    row = ("from kmbench.protocol import Implementation\n"
           "class {cls}(Implementation):\n    name = '{name}'\n    row_order = {order}\n")
    _package(tmp_path, "rows_here", {
        "late.py": row.format(cls="Late", name="late", order=20),
        "early.py": row.format(cls="Early", name="early", order=10) + "class Helper(Early):\n    name = 'helper'\n",
        "kernels.py": "raise RuntimeError('a kernel module is never imported to look for rows')\n",
        "broken.py": "import no_such_module\n" + row.format(cls="Broken", name="broken", order=1),
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "BUILTIN_PACKAGE", "rows_here")
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    found = registry.discover()
    assert list(found) == ["early", "late", "rows_here.broken"]
    usable, why = found["rows_here.broken"].available()
    assert not usable and "no_such_module" in why


def test_find_imports_only_the_modules_that_declare_the_names(tmp_path, monkeypatch):
    """kmbench.KMeans's first fit looks up two or three rows: importing every row module (about 30)
    took 0.2 s of it (issue 51)."""
    import sys

    row = ("from kmbench.protocol import Implementation\n"
           "class {cls}(Implementation):\n    name = '{name}'\n    row_order = {order}\n")
    _package(tmp_path, "rows_found", {
        "late.py": row.format(cls="Late", name="late", order=20),
        "early.py": row.format(cls="Early", name="early", order=10),
        "kernels.py": "raise RuntimeError('a kernel module is never imported to look for rows')\n",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "BUILTIN_PACKAGE", "rows_found")
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    found = registry.find(["late"])
    assert list(found) == ["late"] and type(found["late"]).__name__ == "Late"
    assert "rows_found.late" in sys.modules and "rows_found.early" not in sys.modules
    assert registry.find(["nope"]) == {}  # looked for everywhere, as discover() looks, and not there


def test_find_agrees_with_discover_on_every_row():
    everything = registry.discover()
    found = registry.find(everything)
    assert {name: type(impl) for name, impl in found.items()} == {name: type(impl) for name, impl in everything.items()}
