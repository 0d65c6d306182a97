"""The clocks implementations time their regions with, never one of their own choosing:
`host_region` for CPU work, `CudaEventRegion` for GPU work (events recorded on the stream,
read after one synchronisation at the end). What the harness makes of the times (means,
spreads) is statistics.py's; how a time reads, kmbench.report.formatting's.
"""

from __future__ import annotations

import time
from contextlib import contextmanager


@contextmanager
def host_region(phases: dict, name: str):
    """Time a CPU region with the monotonic high-resolution clock into phases[name]."""
    start = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - start


class CudaEventRegion:
    """Time a GPU region with CUDA events on the current stream.

    No host synchronisation happens inside the region; `seconds()` synchronises on
    the end event once, after the work has been queued.
    """

    def __init__(self):
        import cupy

        self._start = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def __enter__(self):
        self._start.record()
        return self

    def __exit__(self, *exc):
        self._end.record()
        return False

    def seconds(self) -> float:
        import cupy

        self._end.synchronize()
        return cupy.cuda.get_elapsed_time(self._start, self._end) / 1000.0
