"""Writing files safely: a folder checked before any work, a file written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from kmbench.errors import UsageError


def check_writable_folder(folder: Path, what: str) -> None:
    """Raise a one-sentence UsageError unless files can be created in `folder` (or, if it
    is missing, it can be made). Tried by creating and removing a file, because permission bits alone say
    nothing for root or on a read-only mount."""
    folder = Path(folder)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"Cannot write {what} under {folder}: {existing} is a file, not a folder.")
    try:
        # A missing folder will be made inside `existing`: probing there creates nothing
        # that outlives the check.
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".kmbench-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"Cannot write {what} in {folder}: {exc.strerror or exc}.") from None


def check_writable_file(path: Path, what: str) -> None:
    """The file's folder must take new files (files are replaced by renaming), and the path
    must not be a folder."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{what} {path} is a folder; give a file path.")
    check_writable_folder(path.parent, what)


@contextmanager
def replaced(path: Path):
    """Yield a temporary path beside `path` (same suffix, so writers that read the format
    from it still work); when the block ends without an error it replaces `path` by rename,
    so a reader sees the whole old file or the whole new one, never half of either."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomically(path: Path, text: str) -> None:
    with replaced(path) as tmp:
        tmp.write_text(text)
