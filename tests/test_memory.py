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


def test_giving_gpus_back_collects_cycles_then_asks_every_keeper(monkeypatch):
    """A row's arrays held in a reference cycle outlive its release() until the collector runs:
    they are gone before the registered keepers free their own, and every keeper is asked."""
    from kmbench.protocol import memory

    monkeypatch.setattr(memory, "_RELEASERS", [])
    seen = []

    class Held:
        def __del__(self):
            seen.append("cycle collected")

    holder = {"array": Held()}
    holder["self"] = holder  # a cycle: refcounting alone never frees it
    del holder
    memory.on_give_back(lambda: seen.append("judge's cache"))
    memory.on_give_back(lambda: seen.append("another keeper"))
    memory.give_back_gpus()
    assert seen == ["cycle collected", "judge's cache", "another keeper"]


@pytest.mark.gpu
def test_giving_gpus_back_returns_a_cycles_device_memory_to_the_driver():
    import cupy

    from kmbench.protocol.memory import give_back_gpus

    # What this process's pool holds from the driver, not the GPU's used bytes: under
    # `pytest -n 14` the other workers' allocations move those between two readings (a run on
    # an H200 saw them fall by more than this test's 256 MiB).
    pool = cupy.get_default_memory_pool()
    give_back_gpus()
    before = pool.total_bytes()
    holder = {"array": cupy.ones(64 * MiB, dtype=cupy.float32)}  # 256 MiB
    holder["self"] = holder
    del holder
    assert pool.total_bytes() >= before + 256 * MiB  # the cycle still holds it
    give_back_gpus()
    assert pool.total_bytes() <= before
