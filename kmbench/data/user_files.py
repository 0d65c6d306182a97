"""Users' own data: a .npy or a text file (whitespace or comma separated, an optional header and
label column), checked once (NaN, shape, emptiness) and made C-contiguous float32/float64."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from kmbench.data.dataset import Dataset, checksum, dtype_of
from kmbench.errors import UsageError


def check_points(data: np.ndarray, origin: str) -> np.ndarray:
    """Validate an array of points once, at the edge; return it as float32/float64."""
    if data.ndim != 2:
        raise UsageError(
            f"{origin} must hold a 2-D array of points (n rows x d columns); "
            f"got {data.ndim} dimension(s), shape {data.shape}."
        )
    if data.shape[0] == 0 or data.shape[1] == 0:
        raise UsageError(f"{origin} holds no points (shape {data.shape}).")
    if not np.issubdtype(data.dtype, np.number) or np.issubdtype(data.dtype, np.complexfloating):
        raise UsageError(f"{origin} must hold real numbers; got dtype {data.dtype}.")
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    finite = np.isfinite(data).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        raise UsageError(f"{origin} contains NaN or infinite values (first at row {row}).")
    return data


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _read_text(path: Path, label_column: bool, notes: list[str]) -> np.ndarray:
    """Whitespace or comma separated numbers; a first line that is not all numbers is taken
    as a header, skipped, and said so in `notes`."""
    try:
        with open(path) as handle:
            first = next((line for line in handle if line.strip()), "")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is neither a .npy file nor readable text.") from None
    if not first:
        raise UsageError(f"{path} is empty.")
    delimiter = "," if "," in first else None
    tokens = [token.strip() for token in first.strip().split(delimiter)]
    header = not all(_is_number(token) for token in tokens if token)
    if header:
        notes.append(f"{path}: the first line ({first.strip()[:60]!r}) is not numbers; "
                     "read it as a header and skipped it")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": said below, in one sentence
            data = np.loadtxt(path, delimiter=delimiter, ndmin=2, dtype=np.float64, skiprows=int(header))
    except ValueError as exc:
        raise UsageError(f"{path} has text that is not a number: {str(exc).rstrip('.')}.") from None
    if data.size == 0:
        raise UsageError(f"{path} holds a header line but no points.")
    if label_column:
        if data.shape[1] < 2:
            raise UsageError(f"{path} has one column; --label-column needs at least two.")
        data = data[:, :-1]
    return data


def _sidecar_meta(path: Path, data: np.ndarray, digest: str) -> dict | None:
    """The JSON sidecar kmbench wrote beside a generated .npy, when it describes this very
    array (same shape and checksum): then tables can name the generator and parameters."""
    sidecar = path.with_suffix(".json")
    if path.suffix != ".npy" or not sidecar.is_file():
        return None
    try:
        meta = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("checksum") != digest or \
            list(meta.get("shape", [])) != list(data.shape):
        return None
    return meta


def load_file(path: Path | str, label_column: bool = False, dtype: str | None = None) -> Dataset:
    """Load a user's .npy or text file (whitespace or comma separated), validated once here.

    The array is made C-contiguous float32/float64 once. The dataset keeps the file's path
    (for programs that read the data themselves) only when the file holds exactly that array;
    otherwise subprocesses get a copy of what was validated, never the raw file."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"Dataset file {path} does not exist or is not a file.")
    if path.stat().st_size == 0:  # np.load raises EOFError, which click takes for Ctrl-D ("Aborted.")
        raise UsageError(f"{path} is empty.")
    notes: list[str] = []
    try:
        if path.suffix == ".npy":
            try:
                raw = np.load(path, allow_pickle=False)
            except ValueError as exc:
                raise UsageError(f"{path} is not a readable .npy file: {exc}.") from None
            data = raw[:, :-1] if label_column and raw.ndim == 2 else raw
        else:
            raw = None
            data = _read_text(path, label_column, notes)
    except OSError as exc:
        raise UsageError(f"Cannot read dataset file {path}: {exc.strerror or exc}.") from None
    data = check_points(np.asarray(data), f"Dataset file {path}")
    if dtype:
        data = data.astype(dtype_of(dtype))
    as_read = raw is not None and data is raw and raw.flags.c_contiguous
    if raw is not None and not raw.flags.c_contiguous and raw.ndim == 2:
        notes.append(f"{path} is stored in Fortran (column-major) order; "
                     "read it into row-major order once")
    data = np.ascontiguousarray(data)
    digest = checksum(data)
    meta = _sidecar_meta(path, data, digest) if as_read else None
    if meta is None:
        meta = {"generator": "file", "parameters": {"path": str(path)}, "dtype": str(data.dtype),
                "shape": list(data.shape), "checksum": digest}
    meta["notes"] = notes
    meta["verified"] = True  # the checksum was just computed from the data as read
    return Dataset(path.stem, data, path if as_read else None, meta)
