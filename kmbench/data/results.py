"""The record store: one JSON object per line, one line per cell
(implementation x dataset x parameters), appended atomically.

An append writes the old contents plus the new line to a temporary file and renames
it over the store, under an exclusive lock, so an interrupted run never truncates a
record and two concurrent runs never lose each other's lines.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

from kmbench.data import files, records
from kmbench.data.records import SCHEMA_VERSION
from kmbench.errors import UsageError

DEFAULT_STORE = Path("results") / "records.jsonl"


class StoreWarning(UserWarning):
    """Lines of a record store that were skipped, or a store's folder that will be made."""


def store_path(path: Path | str | None = None) -> Path:
    return Path(path or os.environ.get("KMBENCH_RESULTS") or DEFAULT_STORE)


def check_writable(path: Path | str | None = None) -> Path:
    """Before any cell runs: the store (and its lock beside it) can be written. A folder that
    does not exist yet is made at the first record, and said now: a mistyped --store folder
    was made silently."""
    path = store_path(path)
    files.check_writable_file(path, "the record store")
    if not path.parent.exists():
        warnings.warn(f"the folder {path.parent} does not exist; it will be made for the record store {path}",
                      StoreWarning, stacklevel=2)
    return path


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _default(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot store {type(value).__name__} in a record")


def append(record: dict | records.Record, path: Path | str | None = None) -> None:
    """One record (typed, or the object a loop built) appended as one line."""
    path = store_path(path)
    if isinstance(record, records.Record):
        record = record.to_dict()
    line = json.dumps({"schema": SCHEMA_VERSION, **record}, default=_default, allow_nan=True)
    with _locked(path):
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        with files.replaced(path) as tmp, open(tmp, "wb") as handle:
            handle.write(old + line.encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())


# Stores that refused a record in this process (an immutable file, a folder made read-only
# during the run): where their records went instead, and why.
_diverted: dict[Path, tuple[Path, str]] = {}


def keep(record: dict | records.Record, path: Path | str | None = None) -> Path:
    """append, for a run whose cell is measured already: where the store refuses the write, the
    record goes to a new file in the temporary folder instead (this one and the run's next ones),
    said once as a StoreWarning, and `diverted` tells the command to fail at the end. A
    measured cell is not lost to a store that cannot take it. Returns the file written."""
    path = store_path(path)
    if path not in _diverted:
        try:
            append(record, path)
            return path
        except OSError as exc:
            handle, fallback = tempfile.mkstemp(prefix=f"kmbench-{path.stem}-", suffix=path.suffix or ".jsonl")
            os.close(handle)
            why = exc.strerror or str(exc)
            _diverted[path] = Path(fallback), why
            warnings.warn(f"cannot write the record store {path} ({why}): this run's records go to {fallback} "
                          "instead", StoreWarning, stacklevel=2)
    append(record, _diverted[path][0])
    return _diverted[path][0]


def diverted() -> dict[Path, tuple[Path, str]]:
    """Each store that refused a record in this process: (the file that holds its records, why)."""
    return dict(_diverted)


def kept_in(path: Path | str | None = None) -> Path:
    """Where a run's records went: the store, or the file that took them when it refused."""
    path = store_path(path)
    return _diverted.get(path, (path,))[0]


def _read(path: Path | str | None, tasks: set[str]) -> list[tuple[dict, records.Record]]:
    """Every whole record of the tasks named, in store order, as stored and typed. A line that does not parse, or
    parses to something that is not a whole record of its schema (kmbench.data.records), is
    skipped, and one StoreWarning counts the skipped lines."""
    path = store_path(path)
    if path.is_dir():  # every reader's one check: `report --store FOLDER` ended in IsADirectoryError
        raise UsageError(f"The record store {path} is a folder; name the file in it (e.g. {path / 'records.jsonl'}).")
    if not path.exists():
        return []
    found, skipped = [], 0
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if isinstance(record, dict) and records.task_of(record) not in tasks:
            continue
        try:
            found.append((record, records.parse(record)))
        except records.RecordError:
            skipped += 1
    if skipped:
        warnings.warn(f"skipped {skipped} line(s) of {path} that are not whole kmbench records "
                      "(not JSON, another schema, or fields missing)", StoreWarning, stacklevel=3)
    return found


def load(path: Path | str | None = None, task: str = "lloyd") -> list[dict]:
    """Every whole record of one task (records without a task are Lloyd's), as stored."""
    return [stored for stored, _ in _read(path, {task})]


def read(path: Path | str | None = None, tasks=tuple(records.SCHEMAS)) -> list[records.Record]:
    """Every whole record of the tasks asked for (every task's by default), typed, in store order."""
    return [record for _, record in _read(path, set(tasks))]
