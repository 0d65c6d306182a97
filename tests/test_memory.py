"""The memory watch behind every record's memory figures."""

import numpy as np

from kmbench.protocol.memory import MemoryWatch, host_bytes


def test_host_peak_counts_memory_touched_inside_the_watch():
    if host_bytes() is None:
        import pytest

        pytest.skip("no /proc/self/statm on this system")
    import time

    with MemoryWatch() as watch:
        block = np.ones(64 * 2**20 // 8)  # 64 MiB, written, so resident
        block.sum()
        # Held for sixty sampling intervals: a peak shorter than one may be missed by design,
        # and a busy machine can delay the sampler by a few (it measured 46 MB here once).
        time.sleep(60 * MemoryWatch().interval)
        del block
    peaks = watch.peaks()
    assert peaks["host_bytes"] >= 60 * 2**20  # freed before the end: only a peak sees it


def test_nothing_allocated_is_near_nothing():
    with MemoryWatch() as watch:
        pass
    assert watch.peaks()["host_bytes"] < 16 * 2**20
