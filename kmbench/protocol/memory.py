"""How much memory a cell takes: peak host RSS and peak GPU memory in use, above what was in
use when the cell started, sampled every few milliseconds in a background thread.

GPU memory is read from the driver (cudaMemGetInfo: the whole device, whatever allocator
holds it), so CuPy, torch and native libraries are measured alike. Caching allocators keep
freed blocks, so each watch starts by emptying CuPy's and torch's caches: otherwise a cell
would reuse the previous cell's blocks and seem to need nothing. The GPU is read only where
CuPy is already imported (a GPU cell or a GPU oracle), so a CPU run never opens a context.

`give_back_gpus` hands everything this process holds on its GPUs back to the driver, for a plan
whose next cell runs in other processes on the same GPUs (the scaling plan's Dask workers):
garbage that still holds device arrays collected, every module that keeps device memory
between calls asked to free it (`on_give_back`), the pools emptied.
"""

from __future__ import annotations

import gc
import os
import sys
import threading

INTERVAL_S = 0.005
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def host_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None  # not Linux: no host figure


def gpu_bytes() -> int | None:
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    try:
        free, total = cupy.cuda.runtime.memGetInfo()
    except Exception:
        return None
    return int(total - free)


def empty_caches() -> None:
    cupy, torch = sys.modules.get("cupy"), sys.modules.get("torch")
    try:
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass  # a failing cache call must not cost the cell; the figure is then an upper bound


_RELEASERS: list = []  # what on_give_back registered, called in that order


def on_give_back(release):
    """Register release() of a module that keeps device memory between calls (a resident copy of
    the data, cached tiles): give_back_gpus calls it. Returns it, so it can be a decorator."""
    _RELEASERS.append(release)
    return release


def give_back_gpus() -> int | None:
    """Free every byte this process holds on its GPUs that nothing running needs, so another
    process can take them. Returns the bytes then in use on the current GPU (by any process;
    None without CuPy). Cycles are collected first: a CUDA graph or a bound method in a cycle
    keeps its arrays alive past a row's release() until the collector runs."""
    gc.collect()
    for release in _RELEASERS:
        release()
    empty_caches()
    return gpu_bytes()


class MemoryWatch:
    """with MemoryWatch() as watch: ...; watch.peaks() -> {"host_bytes", "gpu_bytes"}.
    read_host: where the host figure comes from (the process's RSS; a test passes its own
    counter, since the RSS also moves with whatever else the machine runs)."""

    def __init__(self, interval: float = INTERVAL_S, read_host=host_bytes):
        self.interval = interval
        self.read_host = read_host
        self._stop = threading.Event()

    def _sample(self) -> None:
        host, gpu = self.read_host(), gpu_bytes()
        if host is not None:
            self._host_peak = max(self._host_peak, host)
        if gpu is not None:
            self._gpu_peak = max(self._gpu_peak, gpu)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self):
        empty_caches()
        self._host_base, self._gpu_base = self.read_host(), gpu_bytes()
        self._host_peak, self._gpu_peak = self._host_base or 0, self._gpu_base or 0
        self._thread = threading.Thread(target=self._loop, name="kmbench-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._sample()  # a cell shorter than one interval still counts
        self._stop.set()
        self._thread.join()
        return False

    def peaks(self) -> dict:
        host = None if self._host_base is None else self._host_peak - self._host_base
        gpu = None if self._gpu_base is None else self._gpu_peak - self._gpu_base
        return {"host_bytes": host, "gpu_bytes": gpu}
