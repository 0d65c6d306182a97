"""The harness's own clock around every `run` call, and the check of what a row claims.

A row times its own Lloyd loop (CUDA events, or its native program's clock), since only it
knows where the loop starts. The harness checks every claim against what it can see itself:
- the wall clock around the call, with the GPU synchronised before and after: the loop is inside
  the call, so a claim longer than the call is false;
- a physical floor: an iteration reads at least four bytes per point (its label, or a bound
  standing for it), and the data are read no faster than FLOOR_HEADROOM times the machine's
  measured copy rate (caches can beat main memory, by less than that).
A false claim ends the cell as `error`, in one sentence.
"""

from __future__ import annotations

import math
import numbers
import sys
import time
from functools import lru_cache

from kmbench.errors import ImplementationError

WALL_SLACK = 1e-3  # relative: the clocks are not read at exactly the same instants
WALL_SLACK_S = 50e-6  # absolute
FLOOR_HEADROOM = 20.0  # caches may read faster than the measured copy rate, by less than this
BYTES_PER_POINT = 4  # the least an iteration must touch per point
FALLBACK_BANDWIDTH = 1e12  # bytes per second, where nothing could be measured


class ClockError(ImplementationError):
    """A row's claimed time that the harness's own clock or physics rules out."""


def synchronize() -> None:
    """Wait for the GPU work of every library a row may have used (only those loaded)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            if cupy.cuda.runtime.getDeviceCount():
                cupy.cuda.Device().synchronize()
        except Exception:
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
        except Exception:
            pass


def timed(call):
    """(what call() returns, seconds of wall clock around it, GPU synchronised both sides)."""
    synchronize()
    start = time.perf_counter()
    value = call()
    synchronize()
    return value, time.perf_counter() - start


@lru_cache(maxsize=None)
def copy_rate(gpu: bool) -> float:
    """The fastest measured copy rate of this machine (host, and GPU where asked), once per process."""
    from kmbench.protocol import ceilings

    rates = [ceilings.cpu_copy_bandwidth(megabytes=64, copies=2) or 0.0]
    if gpu:
        cupy = sys.modules.get("cupy")
        rates.append((ceilings.copy_bandwidth(cupy, megabytes=256, copies=4) if cupy else None) or 0.0)
    return max(rates) or FALLBACK_BANDWIDTH


def floor_seconds(problem, iterations: int, declared_bytes: int | None, gpu: bool) -> float:
    """The least time `iterations` Lloyd iterations of `problem` can take on this machine."""
    per_iteration = max(BYTES_PER_POINT * problem.n, declared_bytes or 0)
    return iterations * per_iteration / (FLOOR_HEADROOM * copy_rate(gpu))


def claims_of(result) -> list[float]:
    """The iterate times a Lloyd result claims: one per counted repeat inside the call, or its
    one iterate phase; none where the row times nothing. Each as a Python float where it is a
    number (a NumPy scalar included), so that records and statistics see plain floats."""
    claims = list(result.iterate_times) if result.iterate_times else (
        [result.phases["iterate"]] if "iterate" in result.phases else [])
    return [seconds(t) for t in claims]


def seconds(claim):
    """A claim as a float where it is a real number of any kind; left as it is otherwise, for
    check_wall to refuse by name."""
    return float(claim) if isinstance(claim, numbers.Real) and not isinstance(claim, bool) else claim


def check_wall(name: str, claims: list[float], wall: float) -> None:
    """Raise ClockError where the claims are not times, or add up to more than the call took.
    A time is any real number, NumPy's scalars included (np.float32, np.int64 register as
    numbers.Real; a bare isinstance(t, float) refused them as "not a number")."""
    if not all(isinstance(t, numbers.Real) and math.isfinite(t) and t >= 0 for t in claims):
        raise ClockError(f"{name} claims an iterate time that is negative or not a number: {claims[:3]}")
    if sum(claims) > wall * (1 + WALL_SLACK) + WALL_SLACK_S:
        raise ClockError(f"{name} claims {sum(claims):.3g} s of iterations inside a call the harness timed "
                         f"at {wall:.3g} s")


def check(impl, problem, result, wall: float) -> None:
    """Raise ClockError where the row's claimed iterate time is impossible: against the wall
    clock, and below the physical floor of its Lloyd iterations."""
    claims = claims_of(result)
    if not claims:
        return
    check_wall(impl.name, claims, wall)
    gpu = "cupy" in sys.modules and getattr(impl, "roofline_on", "gpu") == "gpu"
    floor = floor_seconds(problem, max(1, int(result.iterations)), _declared_bytes(impl, problem), gpu)
    if min(claims) < floor:
        raise ClockError(f"{impl.name} claims {min(claims):.3g} s for {result.iterations} iteration(s), below "
                         f"this machine's physical floor of {floor:.3g} s for {problem.n} points")


def _declared_bytes(impl, problem) -> int | None:
    try:
        return impl.bytes_per_iteration(problem)
    except Exception:
        return None
