"""The oracle, cached: the float64 reference costs minutes at 1e9 points, and it depends only
on the data, the initial centroids and the stop rule.

Each result is stored under the dataset cache as `oracles/<key>.npz`, the key a hash of the
dataset's checksum, the initial centroids' bytes, the stop rule and ORACLE_VERSION (raise it
whenever the reference or the validator's measures change). Written to a temporary name and
renamed, so a crash leaves either a whole entry or none; an entry that cannot be read is
recomputed, never trusted: whatever the damage (truncated, empty, not a zip, keys or shapes
wrong), with a CacheWarning. The key's checksum is the dataset's, verified against its data
before a run (datasets.verified), so an entry made for other data is never found; and every
entry names the problem it belongs to (data checksum, start digest, stop rule), checked on use,
so a file copied from another problem of the same shape is refused, not trusted.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np

from kmbench.data import datasets, files
from kmbench.protocol import validate

ORACLE_VERSION = 7
FOLDER = "oracles"


def key(checksum: str, initial_centroids: np.ndarray, stop: dict) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps({"version": ORACLE_VERSION, "data": checksum, "stop": stop},
                             sort_keys=True).encode())
    digest.update(validate.start_digest(initial_centroids).encode())
    return digest.hexdigest()[:32]


def identity(checksum: str, initial_centroids: np.ndarray, stop: dict) -> dict:
    """What an oracle belongs to: written into its entry, compared on every use."""
    return {"data": checksum, "start": validate.start_digest(initial_centroids), "stop": stop}


def _load(path: Path, start: np.ndarray, expected: dict) -> validate.Oracle | None:
    """The cached oracle, or None (with a CacheWarning) where the entry is damaged in any way
    or belongs to another problem."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            payload = json.loads(str(stored["meta"]))
            payload["centroids"] = stored["centroids"]
        oracle = validate.Oracle.from_dict(payload)
        if oracle.centroids.shape != np.shape(start) or not np.isfinite(oracle.centroids).all():
            raise ValueError(f"centroids of shape {oracle.centroids.shape}, expected {np.shape(start)}")
        if oracle.problem != expected:
            raise ValueError("it names another problem (data, start or stop rule)")
        return oracle
    except Exception as exc:  # a cache file is data, not code: any failure means recompute
        # The reason's first sentence, whole (numpy's can run to several, with advice for another use).
        reason = (str(exc).strip().splitlines() or [""])[0].split(". ")[0].rstrip(".")
        warnings.warn(f"oracle cache entry {path} is damaged or foreign ({type(exc).__name__}: {reason}); "
                      "recomputing it", datasets.CacheWarning, stacklevel=3)
        return None


def _save(path: Path, oracle: validate.Oracle) -> None:
    meta = {name: value for name, value in oracle.to_dict().items() if name != "centroids"}
    with files.replaced(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, centroids=oracle.centroids, meta=np.array(json.dumps(meta)))


def get(dataset, problem, directory=None, progress=None) -> tuple[validate.Oracle, bool]:
    """The oracle for `problem` on `dataset`, from the cache or computed (and then stored).
    Returns (oracle, was_cached)."""
    checksum = dataset.meta.get("checksum") or datasets.checksum(problem.data)
    stop = problem.stop
    expected = identity(checksum, problem.initial_centroids, stop)
    path = datasets.data_dir(directory) / FOLDER / f"{key(checksum, problem.initial_centroids, stop)}.npz"
    if path.exists():
        found = _load(path, problem.initial_centroids, expected)
        if found is not None:
            return found, True
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, problem.iterations,
                                     progress=progress, tol=problem.tol)
    oracle.problem = expected
    try:
        _save(path, oracle)
    except OSError:
        pass  # a cache that cannot be written costs time next run, never this run's result
    return oracle, False
