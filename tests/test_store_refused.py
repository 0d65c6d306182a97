"""A record store that refuses the write after the cell was measured (an immutable file, a
folder made read-only during the run; issue 59 lost such a cell with a 102-line traceback):
the records go to a file in the temporary folder, the table is still shown, one sentence names
the store, why and where the records are, and the command exits 1."""

import errno
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kmbench.cli import app
from kmbench.data import results


def _refuse_writes_to(store: Path, monkeypatch) -> None:
    """Every rename onto the store fails as on an immutable file (the folder stays writable, so
    the check before the run passes, as it did for the new user)."""
    real = os.replace

    def replace(source, target):
        if Path(target) == store:
            raise PermissionError(errno.EPERM, "Operation not permitted", str(target))
        return real(source, target)

    monkeypatch.setattr(os, "replace", replace)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_refused_record_goes_to_a_fallback_file_and_says_so(tmp_path, monkeypatch):
    store = tmp_path / "immutable" / "records.jsonl"
    _refuse_writes_to(store, monkeypatch)
    with pytest.warns(results.StoreWarning, match=f"cannot write the record store {store} \\(Operation not permitted\\)"):
        first = results.keep({"impl": "a"}, store)
    second = results.keep({"impl": "b"}, store)  # the run's next records follow, without a second warning
    assert first == second == results.kept_in(store) != store
    assert [line["impl"] for line in _lines(first)] == ["a", "b"]
    assert results.diverted()[store] == (first, "Operation not permitted")
    assert not store.exists()


def test_a_store_that_takes_the_record_is_written_as_before(tmp_path):
    store = tmp_path / "records.jsonl"
    assert results.keep({"impl": "a"}, store) == store == results.kept_in(store)
    assert store not in results.diverted() and [line["impl"] for line in _lines(store)] == ["a"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_folder_made_read_only_during_the_run_diverts_too(tmp_path):
    folder = tmp_path / "store"
    folder.mkdir()
    store = folder / "records.jsonl"
    results.keep({"impl": "a"}, store)
    store.chmod(0o444)
    folder.chmod(0o555)
    try:
        with pytest.warns(results.StoreWarning, match="Permission denied"):
            kept = results.keep({"impl": "b"}, store)
    finally:
        folder.chmod(0o755)
    assert [line["impl"] for line in _lines(kept)] == ["b"]


def test_run_keeps_the_measured_cell_and_exits_1_with_one_sentence(isolated_paths, monkeypatch):
    store = isolated_paths / "results" / "records.jsonl"
    _refuse_writes_to(store, monkeypatch)
    with pytest.warns(results.StoreWarning):
        out = CliRunner().invoke(app, ["run", "--n", "200", "--iters", "3", "--repeats", "1", "--impl", "numpy"])
    assert out.exit_code == 1 and isinstance(out.exception, SystemExit), out.output
    assert "Traceback" not in out.output
    fallback = results.kept_in(store)
    assert "numpy" in out.output and "ok" in out.output  # the table of the measured cell
    said = " ".join(out.output.split())  # the console wraps long lines
    assert f"1 record appended to {fallback}" in said
    assert f"the record store {store} could not be written (Operation not permitted)" in said
    assert f"cat {fallback} >> {store}" in said
    assert [(line["impl"], line["status"]) for line in _lines(fallback)] == [("numpy", "ok")]
