"""What every dataset is: its points, where they came from (`meta`: generator and parameters, or
file), its checksum; the dtypes kmbench computes in; where the generated-data cache lives."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kmbench.errors import UsageError

DEFAULT_DIR = Path("datasets")
DTYPES = {"float32": np.float32, "float64": np.float64}
_CHUNK_ROWS = 1 << 22  # rows per generation / checksum chunk: bounded memory for 1e8 points


class CacheWarning(UserWarning):
    """A cached file found damaged, and what was done about it."""


@dataclass
class Dataset:
    name: str
    data: np.ndarray
    path: Path | None
    meta: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.data.shape[0]

    @property
    def d(self) -> int:
        return self.data.shape[1]


def data_dir(directory: Path | str | None = None) -> Path:
    """Where generated data lives: the argument, $KMBENCH_DATA, or ./datasets."""
    return Path(directory or os.environ.get("KMBENCH_DATA") or DEFAULT_DIR)


def checksum(array: np.ndarray) -> str:
    digest = hashlib.sha256()
    flat = np.ascontiguousarray(array).reshape(-1)
    step = _CHUNK_ROWS * 4
    for start in range(0, flat.size, step):
        digest.update(flat[start : start + step].tobytes())
    return "sha256:" + digest.hexdigest()


def dtype_of(name: str):
    try:
        return DTYPES[name]
    except KeyError:
        raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}; got {name!r}.") from None
