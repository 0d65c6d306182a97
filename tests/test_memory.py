"""The memory watch behind every record's memory figures."""

import threading

import pytest

from kmbench.protocol.memory import MemoryWatch, host_bytes

MiB = 2**20


class PeakingHost:
    """A host-memory reading that the test moves: the process's RSS would also move with what
    else the machine runs (the kernel reclaims pages of a busy machine), so a peak measured on
    it is not the test's to predict. `sampled` is set once the watch has read the peak."""

    def __init__(self, base: int):
        self.value = base
        self.peak = None
        self.sampled = threading.Event()

    def __call__(self) -> int:
        if self.value == self.peak:
            self.sampled.set()
        return self.value


def test_host_peak_counts_memory_held_and_freed_inside_the_watch():
    host = PeakingHost(base=500 * MiB)
    with MemoryWatch(read_host=host) as watch:
        host.peak = host.value = 564 * MiB  # 64 MiB touched...
        # Waits for the sampler thread however busy the machine is (the timeout only ends a hang).
        assert host.sampled.wait(timeout=60), "the watch never sampled while the memory was held"
        host.value = 500 * MiB  # ...and freed before the end: only a peak sees it
    assert watch.peaks()["host_bytes"] == 64 * MiB


def test_host_figure_is_this_process_resident_memory():
    if host_bytes() is None:
        pytest.skip("no /proc/self/statm on this system")
    assert host_bytes() > 0


def test_nothing_allocated_is_near_nothing():
    with MemoryWatch() as watch:
        pass
    assert watch.peaks()["host_bytes"] < 16 * 2**20
