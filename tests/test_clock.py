"""The harness's check of what a row claims for its timed region (kmbench.protocol.clock), at
its limits: just inside a limit passes, just outside fails, for the wall clock around the call
and for the physical floor (the bytes an iteration must read, at FLOOR_HEADROOM times the
machine's copy rate)."""

import sys

import numpy as np
import pytest

from kmbench.protocol import Implementation, Problem, Result, clock

RATE = 1e10  # bytes per second: the machine's copy rate, fixed here


class Declares(Implementation):
    name = "declares"
    roofline_on = "cpu"

    def __init__(self, declared=None):
        self.declared = declared

    def bytes_per_iteration(self, problem):
        return self.declared


@pytest.fixture
def fixed_rate(monkeypatch):
    monkeypatch.setattr(clock, "copy_rate", lambda gpu: RATE)


def problem(n=1_000_000):
    data = np.zeros((n, 2), np.float32)
    return Problem(data, data[:3], 10, warmup=0, repeats=1)


def result(*claims, iterations=10):
    return Result(np.zeros((3, 2)), iterations, {"iterate": claims[0]}, iterate_times=list(claims))


def floor_of(bytes_per_iteration, iterations=10):
    return iterations * bytes_per_iteration / (clock.FLOOR_HEADROOM * RATE)


@pytest.mark.parametrize("share, passes", [(1.02, True), (0.98, False)])
def test_a_claim_just_under_the_floor_of_four_bytes_a_point_is_false(fixed_rate, share, passes):
    floor = floor_of(4 * 1_000_000)
    assert floor == pytest.approx(10 * 4e6 / (20 * RATE))  # the documented floor, written out
    claim = share * floor
    if passes:
        clock.check(Declares(), problem(), result(claim), wall=1.0)
    else:
        with pytest.raises(clock.ClockError, match="physical floor"):
            clock.check(Declares(), problem(), result(claim), wall=1.0)


@pytest.mark.parametrize("share, passes", [(1.02, True), (0.98, False)])
def test_the_floor_counts_the_bytes_a_row_declares(fixed_rate, share, passes):
    declared = 40 * 1_000_000  # ten times the four bytes a point
    claim = share * floor_of(declared)
    assert claim > 5 * floor_of(4 * 1_000_000)  # well above the floor of four bytes a point
    if passes:
        clock.check(Declares(declared), problem(), result(claim), wall=1.0)
    else:
        with pytest.raises(clock.ClockError):
            clock.check(Declares(declared), problem(), result(claim), wall=1.0)


def test_the_smallest_claim_is_held_to_the_floor(fixed_rate):
    floor = floor_of(4 * 1_000_000)
    with pytest.raises(clock.ClockError):
        clock.check(Declares(), problem(), result(2 * floor, 0.5 * floor), wall=1.0)


@pytest.mark.parametrize("claims, passes", [((0.6, 0.6), False), ((0.45, 0.45), True), ((0.999,), True),
                                            ((1.0 + 2 * clock.WALL_SLACK,), False)])
def test_claims_must_fit_the_call_together_not_one_by_one(fixed_rate, claims, passes):
    """Two repeats of 0.6 s cannot both lie inside a call of 1.0 s."""
    if passes:
        clock.check(Declares(), problem(), result(*claims), wall=1.0)
    else:
        with pytest.raises(clock.ClockError, match="inside a call the harness timed"):
            clock.check(Declares(), problem(), result(*claims), wall=1.0)


@pytest.mark.parametrize("bad", [-1e-6, float("nan"), float("inf")])
def test_a_claim_that_is_no_time_is_refused(fixed_rate, bad):
    with pytest.raises(clock.ClockError, match="negative or not a number"):
        clock.check_wall("row", [0.1, bad], wall=1.0)


def test_a_row_that_claims_nothing_is_not_checked(fixed_rate):
    empty = Result(np.zeros((3, 2)), 10, {})
    clock.check(Declares(), problem(), empty, wall=1e-9)
    assert clock.claims_of(empty) == []


@pytest.mark.parametrize("time", [np.float32(0.1), np.float64(0.1), np.int64(0), np.int32(1), 0, 0.1])
def test_a_time_given_as_a_numpy_scalar_is_a_time(fixed_rate, time):
    """np.float32 and np.int64 are not Python floats or ints; they were refused as 'not a number'."""
    clock.check_wall("row", [time], wall=2.0)
    claims = clock.claims_of(Result(np.zeros((3, 2)), 10, {"iterate": time}))
    assert claims == [float(time)] and type(claims[0]) is float  # records and statistics see plain floats


@pytest.mark.parametrize("bad", [np.float32(-1e-3), np.float32("nan"), np.int64(-1), "0.1", None])
def test_a_numpy_scalar_or_other_value_that_is_no_time_is_still_refused(fixed_rate, bad):
    with pytest.raises(clock.ClockError, match="negative or not a number"):
        clock.check_wall("row", [0.1, bad], wall=1.0)


def test_a_numpy_scalar_longer_than_the_call_is_still_false(fixed_rate):
    with pytest.raises(clock.ClockError, match="inside a call the harness timed"):
        clock.check_wall("row", [np.float32(1.5)], wall=1.0)


# --- what killed mutmut's survivors of clock.py (`make mutate-judge-generated`) ---

RATES = {True: 1e12, False: 1e10}  # bytes per second: a GPU's copy rate and the host's, fixed here


def small_problem(n=1000):
    data = np.zeros((n, 2), np.float32)
    return Problem(data, data[:3], 10, warmup=0, repeats=1)


def floor(bytes_per_iteration, gpu, iterations=10):
    return iterations * bytes_per_iteration / (clock.FLOOR_HEADROOM * RATES[gpu])


class Row(Implementation):
    name = "row"

    def __init__(self, roofline_on=None, bytes_per_point=None):
        if roofline_on is not None:
            self.roofline_on = roofline_on
        self.bytes_per_point = bytes_per_point

    def bytes_per_iteration(self, problem):
        return None if self.bytes_per_point is None else self.bytes_per_point * problem.n


def claim(seconds, iterations=10, repeats=1):
    return Result(np.zeros((3, 2)), iterations, {"iterate": seconds}, iterate_times=[seconds] * repeats)


def test_a_gpu_row_is_floored_by_the_gpu_copy_rate_a_cpu_row_by_the_host_rate(monkeypatch):
    """clock.floor_seconds must ask copy_rate for the kind of memory the row reads: the GPU's is
    the faster, and a host-rate floor would call a fast GPU row's true time impossible."""
    monkeypatch.setattr(clock, "copy_rate", lambda gpu: RATES[gpu])
    for gpu in (True, False):
        assert clock.floor_seconds(small_problem(), 10, None, gpu) == floor(4 * 1000, gpu)


@pytest.mark.parametrize("cupy_loaded, roofline_on, gpu", [(True, None, True), (True, "gpu", True),
                                                           (True, "cpu", False), (False, "gpu", False)])
def test_check_floors_a_row_by_the_memory_it_reads(monkeypatch, cupy_loaded, roofline_on, gpu):
    """A claim between the GPU's floor and the host's: possible for a row on the GPU (CuPy loaded,
    roofline_on "gpu", the default), impossible for a row that reads host memory."""
    monkeypatch.setattr(clock, "copy_rate", lambda gpu: RATES[gpu])
    if cupy_loaded:
        monkeypatch.setitem(sys.modules, "cupy", object())
    else:
        monkeypatch.delitem(sys.modules, "cupy", raising=False)
    seconds = 10 * floor(4 * 1000, True)  # ten times the GPU's floor, a tenth of the host's
    if gpu:
        clock.check(Row(roofline_on), small_problem(), claim(seconds), wall=1.0)
    else:
        with pytest.raises(clock.ClockError, match="^row claims .* physical floor"):
            clock.check(Row(roofline_on), small_problem(), claim(seconds), wall=1.0)
    with pytest.raises(clock.ClockError, match="^row claims 2 s of iterations inside a call the harness timed at 1 s$"):
        clock.check(Row(roofline_on), small_problem(), claim(1.0, repeats=2), wall=1.0)


def test_the_floor_counts_the_bytes_a_row_declares_for_this_problem(monkeypatch):
    """A row's declared bytes are asked of the problem at hand (here 40 a point, ten times the
    floor's 4), and a one-iteration result is floored for one iteration, exactly at its floor."""
    monkeypatch.setattr(clock, "copy_rate", lambda gpu: RATES[gpu])
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    row = Row("cpu", bytes_per_point=40)
    with pytest.raises(clock.ClockError, match="physical floor"):
        clock.check(row, small_problem(), claim(5 * floor(4 * 1000, False)), wall=1.0)
    one = floor(40 * 1000, False, iterations=1)
    clock.check(row, small_problem(), claim(one, iterations=1), wall=1.0)  # at the floor is possible
    with pytest.raises(clock.ClockError, match="physical floor"):
        clock.check(row, small_problem(), claim(np.nextafter(one, 0), iterations=1), wall=1.0)


def test_the_wall_limit_is_exact_at_its_edge_and_the_sentence_names_the_row():
    limit = 0.25 * (1 + clock.WALL_SLACK) + clock.WALL_SLACK_S
    clock.check_wall("row", [limit / 2, limit / 2], 0.25)
    clock.check_wall("row", [0.0], 0.25)  # a clock too coarse to see the work reads 0: not false
    with pytest.raises(clock.ClockError, match=r"^row claims 0\.25 s of iterations inside a call the harness timed at 0\.25 s$"):
        clock.check_wall("row", [np.nextafter(limit, 1.0)], 0.25)
    with pytest.raises(clock.ClockError, match=r"^row claims an iterate time that is negative or not a number: \[0\.1, -1\.0, 0\.2\]$"):
        clock.check_wall("row", [0.1, -1.0, 0.2, 0.3], 0.25)


def test_the_claims_are_the_repeats_times_else_the_iterate_phase_else_none():
    assert clock.claims_of(Result(np.zeros((3, 2)), 10, {"iterate": 3.0}, iterate_times=[1.0, 2.0])) == [1.0, 2.0]
    assert clock.claims_of(Result(np.zeros((3, 2)), 10, {"iterate": 3.0})) == [3.0]
    assert clock.claims_of(Result(np.zeros((3, 2)), 10, {"other": 3.0})) == []

def fake_gpu_libraries(calls, devices=1, initialized=True, fail=False):
    """Stand-ins for CuPy and PyTorch that record each synchronisation asked of them."""
    from types import SimpleNamespace

    def sync(name):
        def synchronize():
            if fail:
                raise RuntimeError("no device after all")
            calls.append(name)
        return synchronize

    cupy = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: devices),
                                                Device=lambda: SimpleNamespace(synchronize=sync("cupy"))))
    torch = SimpleNamespace(cuda=SimpleNamespace(is_initialized=lambda: initialized, synchronize=sync("torch")))
    return cupy, torch


def test_the_clock_waits_for_every_loaded_gpu_library_on_both_sides_of_the_call(monkeypatch):
    """A row's GPU work still queued when the call returns belongs inside the wall clock: timed()
    synchronises CuPy's and PyTorch's devices before starting it and before reading it."""
    calls = []
    cupy, torch = fake_gpu_libraries(calls)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setitem(sys.modules, "torch", torch)
    instants = iter([10.0, 12.5])
    monkeypatch.setattr(clock.time, "perf_counter", lambda: next(instants))
    value, wall = clock.timed(lambda: calls.append("call") or "value")
    assert (value, wall) == ("value", 2.5)
    assert calls == ["cupy", "torch", "call", "cupy", "torch"]


def test_a_library_with_no_device_or_a_failing_one_is_not_waited_for(monkeypatch):
    for kwargs in ({"devices": 0, "initialized": False}, {"fail": True}):
        calls = []
        cupy, torch = fake_gpu_libraries(calls, **kwargs)
        monkeypatch.setitem(sys.modules, "cupy", cupy)
        monkeypatch.setitem(sys.modules, "torch", torch)
        clock.synchronize()  # no exception: a library that cannot synchronise has nothing queued
        assert calls == []


@pytest.mark.parametrize("given", ["0.1", None])
def test_a_claim_that_is_no_number_reaches_the_wall_check_as_given_and_is_refused(fixed_rate, given):
    """claims_of makes plain floats of real numbers only: a text "0.1" is not read as a time, and
    None does not become a TypeError; the wall check then refuses either by name."""
    assert clock.claims_of(result(given)) == [given]
    with pytest.raises(clock.ClockError, match="negative or not a number"):
        clock.check(Declares(), problem(), result(given), wall=1.0)
