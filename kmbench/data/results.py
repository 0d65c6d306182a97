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
import warnings
from contextlib import contextmanager
from pathlib import Path

from kmbench.data import files

SCHEMA_VERSION = 1
DEFAULT_STORE = Path("results") / "records.jsonl"
# What the readers of each task index without a default: a record lacking any is not whole.
REQUIRED = {
    "lloyd": {"impl": str, "status": str, "dataset": {"name": str, "n": int, "d": int},
              "params": {"k": int, "iterations": int, "init": str, "seed": int}},
    "*": {"impl": str, "status": str, "label": str, "suite": str, "workload": str},
}


class StoreWarning(UserWarning):
    """Lines of a record store that were skipped."""


def store_path(path: Path | str | None = None) -> Path:
    return Path(path or os.environ.get("KMBENCH_RESULTS") or DEFAULT_STORE)


def check_writable(path: Path | str | None = None) -> Path:
    """Before any cell runs: the store (and its lock beside it) can be written."""
    path = store_path(path)
    files.check_writable_file(path, "the record store")
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


def append(record: dict, path: Path | str | None = None) -> None:
    path = store_path(path)
    line = json.dumps({"schema": SCHEMA_VERSION, **record}, default=_default, allow_nan=True)
    with _locked(path):
        old = path.read_bytes() if path.exists() else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        with files.replaced(path) as tmp, open(tmp, "wb") as handle:
            handle.write(old + line.encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())


def _whole(record, shape: dict) -> bool:
    """Whether `record` has every field of `shape`, each of the declared type (nested dicts)."""
    if not isinstance(record, dict):
        return False
    for name, kind in shape.items():
        value = record.get(name)
        if isinstance(kind, dict):
            if not _whole(value, kind):
                return False
        elif not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return False
    return True


def load(path: Path | str | None = None, task: str = "lloyd") -> list[dict]:
    """Every whole record of one task (records without a task are Lloyd's). A line that does
    not parse, or parses to something that is not a whole record, is skipped, and one
    StoreWarning counts the skipped lines."""
    path = store_path(path)
    if not path.exists():
        return []
    records, skipped = [], 0
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            skipped += 1
            continue
        if not isinstance(record, dict) or record.get("schema") != SCHEMA_VERSION:
            skipped += 1
            continue
        if record.get("task", "lloyd") != task:
            continue
        if not _whole(record, REQUIRED.get(task, REQUIRED["*"])):
            skipped += 1
            continue
        records.append(record)
    if skipped:
        warnings.warn(f"skipped {skipped} line(s) of {path} that are not whole kmbench records "
                      "(not JSON, another schema, or fields missing)", StoreWarning, stacklevel=2)
    return records
