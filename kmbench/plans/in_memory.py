"""What the benchmarks on data too large for the disk cache share (out_of_core.py, scaling.py):
data made in memory, and the oracle computed in the run (once per dataset, however many rows
and GPU sets use it). Their progress goes through kmbench.progress, like every command's.

The GPU machines have 64 GiB of disk, and 1e8 x 128 float32 points are 51 GB: such data are
generated where they are used, each time, from a seed, and never cached.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from kmbench.errors import UsageError
from kmbench.protocol import Options, validate
from kmbench.protocol.device import PinnedHost, cuda_status
from kmbench.protocol.runner import Settings, check_settings
from kmbench.tasks.lloyd import LloydTask

GENERATE_ROWS = 1 << 21  # rows generated on the GPU per chunk
HOST_SHARE = 0.9  # of the host's available memory the data may take


def generate_blobs(n: int, d: int, centers: int, seed: int, out: np.ndarray, half_width: float = 10.0) -> None:
    """Fill `out` (n x d float32, host) with Gaussian blobs made on the GPU, a chunk at a time:
    `centers` middles uniform in [-half_width, half_width]^d, unit spread."""
    import cupy

    middles = np.random.default_rng(seed).uniform(-half_width, half_width, size=(centers, d))
    middles = cupy.asarray(middles.astype(np.float32))
    rng = cupy.random.default_rng(seed)
    for first in range(0, n, GENERATE_ROWS):
        m = min(GENERATE_ROWS, n - first)
        chunk = middles[rng.integers(0, centers, size=m)] + rng.standard_normal((m, d), dtype=cupy.float32)
        chunk.get(out=out[first:first + m])


def gpu_blobs_name(n: int, d: int, centers: int, seed: int) -> str:
    """The name of gpu_blobs' data, known before they are made (a plan skips finished cells by it)."""
    return f"blobs-gpu-n{n}-d{d}-c{centers}-s{seed}-float32"


def gpu_blobs(n: int, d: int, centers: int, seed: int, out: np.ndarray, **parameters) -> tuple[str, dict]:
    """generate_blobs into `out`: (the dataset's name, its meta; `parameters` join the meta's)."""
    generate_blobs(n, d, centers, seed, out)
    return (gpu_blobs_name(n, d, centers, seed),
            {"generator": "blobs (generated on the GPU, in memory)", "checksum": None,
             "parameters": {"n": n, "d": d, "centers": centers, "std": 1.0, "seed": seed, **parameters}})


def available_host_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def fits_host(nbytes: int) -> tuple[bool, str]:
    """Whether `nbytes` of data may be made in this host's memory (HOST_SHARE of what is
    available), and if not, a sentence that says so."""
    available = available_host_bytes()
    if available is not None and nbytes > HOST_SHARE * available:
        return False, (f"the data take {nbytes / 2**30:.0f} GiB; this host has {available / 2**30:.0f} GiB "
                       "of memory available")
    return True, ""


@dataclass(frozen=True)
class Counts:
    """What both plans share of the protocol (kmbench scale and out-of-core take the same
    options for them): counted and warm-up runs, iterations, the seed of data and start."""

    iters: int = 3
    warmup: int = 1
    repeats: int = 2
    seed: int = 0

    def settings(self, k: int) -> Settings:
        """The settings of every cell at this k, checked (a bad count is one sentence)."""
        settings = Settings(k=k, iterations=self.iters, warmup=self.warmup, repeats=self.repeats, seed=self.seed)
        check_settings(settings)
        return settings


@contextmanager
def host_points(n: int, d: int, what: str):
    """An empty n x d float32 host array for the data, page-locked where a GPU is present (the
    oracle's blocks and the uploads then copy at full speed), unlocked and dropped after. A
    size the host cannot hold is one sentence that starts with `what`."""
    fits, why = fits_host(n * d * 4)
    if not fits:
        raise UsageError(f"{what} does not fit: {why}.")
    data = np.empty((n, d), dtype=np.float32)
    pinned = _pin(data)  # before the pages are first written: they are made once, locked
    try:
        yield data
    finally:
        if pinned is not None:
            pinned.release()


def _pin(data: np.ndarray):
    return PinnedHost(data) if cuda_status()[0] else None


def exit_status(records: list[dict]) -> int:
    """What the commands exit with: 0 unless a cell's verdict is neither ok nor error nor skipped
    (mismatch, approximate). A row that cannot run or fails is a cell like any, and the run goes on."""
    return 0 if all(r.get("status") in ("ok", "error", "skipped") for r in records) else 1


class InMemoryLloydTask(LloydTask):
    """LloydTask on in-memory data: the oracle computed here (there is no cache for data this
    size), once per dataset name, however many times run_cells asks (each row set, each GPU
    set). The task's settings fix the initial centroids and the stop rule, so the name is the key."""

    def __init__(self, settings, options: Options = Options()):
        super().__init__(settings, options=options)
        self._oracles: dict[str, validate.Oracle] = {}

    def with_options(self, options: Options) -> "InMemoryLloydTask":
        """This task handing its rows other options (a GPU set), sharing its oracles."""
        other = copy.copy(self)  # shallow: the oracles' dict is the same one
        other.options = options
        return other

    def oracle(self, dataset, problem, progress=None):
        if dataset.name not in self._oracles:
            note = (lambda text: progress(f"{text} on {dataset.name}")) if progress else None
            self._oracles[dataset.name] = validate.Oracle.compute(
                problem.data, problem.initial_centroids, problem.iterations, progress=note, tol=problem.tol)
        return self._oracles[dataset.name]
