"""Datasets: the generators (blobs, radial tree) and the on-disk cache; `resolve` finds a
cached dataset by name or loads a user's file (user_files.py).

Every generated dataset is stored as `<name>.npy` with a `<name>.json` sidecar
(generator, parameters, seed, dtype, shape, true centers, checksum). The name is
derived from the parameters, so asking twice for the same data reuses the file.
Files are written under a temporary name and renamed, so a crash never leaves half
a dataset behind.

A cached dataset is trusted only as far as it is checked. On every load its .npy must open,
and agree with its sidecar in shape, dtype and file size; otherwise it is regenerated from the
sidecar's parameters (or refused in one sentence where they are unknown). Before a run uses
it (`verified`), its checksum is recomputed: data changed after they were cached are refused,
so an oracle cached for the old data can never judge the new.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from kmbench.data import files
from kmbench.data.dataset import _CHUNK_ROWS, CacheWarning, Dataset, checksum, data_dir, dtype_of
from kmbench.data.user_files import load_file
from kmbench.errors import UsageError

# The data package's one door: what the rest of kmbench reads from here, wherever it is written.
__all__ = ["CacheWarning", "Dataset", "blobs", "blobs_name", "checksum", "data_dir", "dtype_of", "load_file",
           "radial", "radial_centers", "radial_name", "resolve", "verified"]
GENERATED = ("blobs", "radial")

def _number(value: float) -> str:
    return f"{value:g}".replace("-", "m")


# ---------------------------------------------------------------- generators


def blobs_name(n, d, centers, std, seed, dtype) -> str:
    return f"blobs-n{n}-d{d}-c{centers}-std{_number(std)}-s{seed}-{dtype}"


def _generate_blobs(n, d, centers, std, seed, dtype):
    from sklearn.datasets import make_blobs

    data, _, true_centers = make_blobs(
        n_samples=n, n_features=d, centers=centers, cluster_std=std,
        random_state=seed, return_centers=True,
    )
    return data.astype(dtype_of(dtype)), true_centers


def radial_name(branches1, dist1, branches2, dist2, cluster_size, scale, seed, dtype) -> str:
    return (
        f"radial-b{branches1}x{_number(dist1)}-b{branches2}x{_number(dist2)}"
        f"-m{cluster_size}-sc{_number(scale)}-s{seed}-{dtype}"
    )


def radial_centers(branches1, dist1, branches2, dist2) -> np.ndarray:
    """Centers of the radial tree of document 002: `branches1` large branches at
    `dist1` from the origin, each with `branches2` small clusters at `dist2` around it."""
    big = dist1 * np.exp(2j * np.pi * np.arange(branches1) / branches1)
    small = dist2 * np.exp(2j * np.pi * np.arange(branches2) / branches2)
    leaves = (big[:, None] + small[None, :]).reshape(-1)
    return np.stack([leaves.real, leaves.imag], axis=1)


def fill_radial(out, centers, cluster_size, scale, seed):
    """Fill `out` (n, 2) chunk by chunk: center of each row plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    n = out.shape[0]
    for start in range(0, n, _CHUNK_ROWS):
        stop = min(n, start + _CHUNK_ROWS)
        rows = np.arange(start, stop) // cluster_size
        noise = rng.standard_normal((stop - start, 2), dtype=out.dtype)
        noise *= out.dtype.type(scale)
        noise += centers[rows].astype(out.dtype)
        out[start:stop] = noise


# ---------------------------------------------------------------- the cache


def _write_atomically(path: Path, fill, shape, dtype) -> None:
    """Create a .npy at a temporary name, let `fill` write it, then rename."""
    with files.replaced(path) as tmp:
        array = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
        fill(array)
        array.flush()
        del array


def _write_json_atomically(path: Path, payload: dict) -> None:
    files.write_text_atomically(path, json.dumps(payload, indent=2) + "\n")


def _read_sidecar(sidecar: Path) -> dict | None:
    try:
        meta = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _cache_damage(npy: Path, meta: dict | None) -> tuple[np.ndarray | None, str | None]:
    """The cached array, or why it cannot be used (unreadable, or at odds with its sidecar)."""
    if meta is None:
        return None, "has no readable sidecar"
    try:
        data = np.load(npy, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        return None, f"cannot be read ({str(exc).rstrip('.')})"
    if list(data.shape) != list(meta.get("shape") or []) or str(data.dtype) != meta.get("dtype"):
        return None, f"holds a {data.dtype} array of shape {data.shape}, not what its sidecar says"
    if "file_bytes" in meta and npy.stat().st_size != meta["file_bytes"]:
        return None, f"is {npy.stat().st_size} bytes, not the {meta['file_bytes']} its sidecar records"
    return data, None


def _cached(name: str, directory: Path, parameters_known: bool = True) -> Dataset | None:
    """A cached dataset whose files agree, or None where the caller must generate it. A
    damaged one is deleted with a CacheWarning: regenerated by the caller, who knows the
    parameters (parameters_known), or here from its sidecar's; where neither can, one sentence."""
    npy, sidecar = directory / f"{name}.npy", directory / f"{name}.json"
    if not npy.exists():
        return None
    meta = _read_sidecar(sidecar) if sidecar.exists() else None
    if meta is None and not sidecar.exists():
        return None  # written before its sidecar: an unfinished dataset, made again by its generator
    data, damage = _cache_damage(npy, meta)
    if damage is None:
        return Dataset(name, data, npy, meta)
    known = parameters_known or (meta or {}).get("generator") in GENERATED
    if not known:
        raise UsageError(f"Cached dataset {npy} {damage}, and its parameters are unknown; delete it and "
                         "generate it again with `kmbench gen-data`.")
    warnings.warn(f"cached dataset {npy} {damage}; regenerating it", CacheWarning, stacklevel=3)
    npy.unlink(missing_ok=True)
    sidecar.unlink(missing_ok=True)
    return None if parameters_known else _generate(meta, directory)


def _generate(meta: dict, directory: Path) -> Dataset:
    """A generated dataset made again from its sidecar's generator and parameters."""
    params = dict(meta.get("parameters") or {})
    try:
        if meta["generator"] == "blobs":
            return blobs(int(params["n"]), int(params["d"]), int(params["centers"]), float(params["std"]),
                         int(params["seed"]), meta["dtype"], directory)
        return radial(int(params["branches1"]), float(params["dist1"]), int(params["branches2"]),
                      float(params["dist2"]), int(params["cluster_size"]), float(params["scale"]),
                      int(params["seed"]), meta["dtype"], directory)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"The sidecar of a damaged cached dataset in {directory} lacks its parameters "
                         f"({exc}); delete the dataset and generate it again.") from None


def verified(dataset: Dataset) -> Dataset:
    """The dataset, once its data's checksum is seen to match the one recorded for it (so a
    cached oracle keyed by that checksum is the oracle of these data). Data changed since
    they were cached are refused in one sentence: overwriting them could destroy a user's work."""
    recorded = dataset.meta.get("checksum")
    if dataset.meta.get("verified") or not recorded:
        return dataset
    if checksum(dataset.data) != recorded:
        raise UsageError(f"Dataset {dataset.name} ({dataset.path}) no longer matches the checksum in its sidecar: "
                         "its data changed after they were cached; delete its .npy and .json to generate it "
                         "again, or load changed data by path.")
    dataset.meta["verified"] = True
    return dataset


def _store(name, directory, generator, params, shape, dtype, fill, true_centers) -> Dataset:
    directory.mkdir(parents=True, exist_ok=True)
    npy = directory / f"{name}.npy"
    _write_atomically(npy, fill, shape, dtype_of(dtype))
    data = np.load(npy, mmap_mode="r")
    meta = {
        "generator": generator,
        "parameters": params,
        "seed": params.get("seed"),
        "dtype": dtype,
        "shape": list(shape),
        "true_centers": np.asarray(true_centers).tolist(),
        "checksum": checksum(data),
        "file_bytes": npy.stat().st_size,
    }
    # The sidecar is written last: a dataset without one is incomplete and is regenerated.
    _write_json_atomically(directory / f"{name}.json", meta)
    return Dataset(name, data, npy, {**meta, "verified": True})


def blobs(n: int, d: int = 2, centers: int = 5, std: float = 1.0, seed: int = 0,
          dtype: str = "float32", directory: Path | str | None = None) -> Dataset:
    """Gaussian blobs with scikit-learn's make_blobs semantics; cached by parameters."""
    if n < 1 or d < 1 or centers < 1:
        raise UsageError(f"blobs needs n, d and centers >= 1; got n={n}, d={d}, centers={centers}.")
    if std <= 0:
        raise UsageError(f"--std must be positive; got {std}.")
    directory = data_dir(directory)
    name = blobs_name(n, d, centers, std, seed, dtype)
    found = _cached(name, directory)
    if found:
        return found
    data, true_centers = _generate_blobs(n, d, centers, std, seed, dtype)

    def fill(out):
        out[:] = data

    params = {"n": n, "d": d, "centers": centers, "std": std, "seed": seed}
    return _store(name, directory, "blobs", params, data.shape, dtype, fill, true_centers)


def radial(branches1: int = 10, dist1: float = 20.0, branches2: int = 5, dist2: float = 2.0,
           cluster_size: int = 20000, scale: float = 0.1, seed: int = 0,
           dtype: str = "float32", directory: Path | str | None = None) -> Dataset:
    """The radial tree of 2-D Gaussians of document 002; cached by parameters."""
    if min(branches1, branches2, cluster_size) < 1:
        raise UsageError("radial needs branches1, branches2 and cluster-size >= 1.")
    if scale <= 0:
        raise UsageError(f"--scale must be positive; got {scale}.")
    directory = data_dir(directory)
    name = radial_name(branches1, dist1, branches2, dist2, cluster_size, scale, seed, dtype)
    found = _cached(name, directory)
    if found:
        return found
    centers = radial_centers(branches1, dist1, branches2, dist2)
    n = centers.shape[0] * cluster_size
    params = {"branches1": branches1, "dist1": dist1, "branches2": branches2, "dist2": dist2,
              "cluster_size": cluster_size, "scale": scale, "seed": seed, "n": n, "d": 2}
    return _store(name, directory, "radial", params, (n, 2), dtype,
                  lambda out: fill_radial(out, centers, cluster_size, scale, seed), centers)


def resolve(spec: str, directory: Path | str | None = None, label_column: bool = False) -> Dataset:
    """`--dataset NAME|PATH`: a cached dataset's name, or a file's path."""
    found = _cached(spec, data_dir(directory), parameters_known=False)
    if found:
        return found
    if Path(spec).exists():
        return load_file(spec, label_column=label_column)
    raise UsageError(
        f"--dataset {spec!r} is neither a generated dataset in {data_dir(directory)} nor a file; "
        "make one with `kmbench gen-data` or give a path."
    )
