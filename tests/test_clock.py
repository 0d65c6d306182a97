"""The harness's check of what a row claims for its timed region (kmbench.protocol.clock), at
its limits: just inside a limit passes, just outside fails, for the wall clock around the call
and for the physical floor (the bytes an iteration must read, at FLOOR_HEADROOM times the
machine's copy rate)."""

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
