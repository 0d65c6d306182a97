"""CUDA source text for CuPy, with our own headers pasted in.

CuPy keys its on-disk kernel cache on the code string and the options, not on the files an
`#include` pulls in: with `--include-path`, an edited common.cuh next to an unchanged .cu
would load the cubin built from the old header. Pasting every local `#include "name"` into
the text makes the key cover all of it. System headers (`#include <...>`) are left alone.
"""

from __future__ import annotations

import re
from pathlib import Path

_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"[ \t]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*$", re.MULTILINE)


def with_local_includes(path: Path) -> str:
    """The text of `path` with each local include (relative to the including file) replaced by
    the header's text, each header once, as its `#pragma once` would have it."""
    pasted: set[Path] = set()

    def expand(file: Path) -> str:
        def paste(match: re.Match) -> str:
            header = (file.parent / match.group(1)).resolve()
            if header in pasted:
                return f"// {match.group(1)}: pasted above"
            if not header.is_file():
                raise FileNotFoundError(f"{file.name} includes {match.group(1)}, which is not beside it")
            pasted.add(header)
            return f"// --- {match.group(1)} ---\n{expand(header)}\n// --- end of {match.group(1)} ---"

        return _LOCAL_INCLUDE.sub(paste, _PRAGMA_ONCE.sub("", file.read_text()))

    return expand(path.resolve())
