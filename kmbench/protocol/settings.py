"""A run's settings (k, iterations, stop rule, start, repeats), checked before anything runs,
and the problem they make of a dataset: the same data, initial centroids and iteration count
for every implementation, the centroids chosen here by the harness (random or k-means++)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from kmbench.data.dataset import Dataset
from kmbench.errors import UsageError
from kmbench.protocol import STOP_RULES, Options, Problem, seeding
from kmbench.protocol.measure import Counting

INITS = ("random", "kmeans++")
# `run`'s budget for a slow row, hyperfine's way: at least RUN_MIN_REPEATS counted runs, then no
# new one once RUN_BUDGET_S seconds of them are spent. Suites (`reproduce`) keep their documents'
# own protocol: no budget unless the suite names one, and every budgeted run may stop after one.
RUN_BUDGET_S = 10.0
RUN_MIN_REPEATS = 3


@dataclass
class Settings:
    k: int = 5
    iterations: int = 300  # exactly, or the most with stop = "tolerance"
    stop: str = "iterations"
    tol: float = 0.0  # with stop = "tolerance": the fraction of points allowed to change
    init: str = "random"
    seed: int = 0
    warmup: int = 1
    repeats: int = 5
    max_time: float | None = None  # seconds of counted repeats after which a cell stops
    min_repeats: int = 1  # counted repeats made whatever max_time says

    def counting(self) -> Counting:
        return Counting(self.warmup, self.repeats, self.max_time, self.min_repeats)


def check_settings(settings: Settings) -> None:
    if settings.k < 1:
        raise UsageError(f"--k must be at least 1; got {settings.k}.")
    if settings.iterations < 1:
        # --max-iters only where it exists and counts: `run` under the tolerance rule.
        names = "--iters (or --max-iters)" if settings.stop == "tolerance" else "--iters"
        raise UsageError(f"{names} must be at least 1; got {settings.iterations}.")
    if settings.stop not in STOP_RULES:
        raise UsageError(f"--stop must be one of {', '.join(STOP_RULES)}; got {settings.stop!r}.")
    if not 0 <= settings.tol <= 1:
        raise UsageError(f"--tol is a fraction of the points, from 0 to 1; got {settings.tol}.")
    if settings.repeats < 1:
        raise UsageError(f"--repeats must be at least 1; got {settings.repeats}.")
    if settings.warmup < 0:
        raise UsageError(f"--warmup cannot be negative; got {settings.warmup}.")
    if settings.init not in INITS:
        raise UsageError(f"--init must be one of {', '.join(INITS)}; got {settings.init!r}.")
    if settings.max_time is not None and settings.max_time <= 0:
        raise UsageError(f"--max-time must be positive; got {settings.max_time}.")
    if not 0 <= settings.seed < 2**32:
        raise UsageError(f"--seed must be between 0 and 2**32 - 1; got {settings.seed}.")


def check_sizes(settings: Settings, sizes: dict[str, int]) -> None:
    """k against every dataset's point count ({name: n}), before any is generated or run."""
    for name, n in sizes.items():
        if settings.k > n:
            raise UsageError(f"--k {settings.k} is larger than the number of points ({n:,}) "
                             f"of {name}.")


def initial_centroids(data: np.ndarray, k: int, method: str, seed: int,
                      weights: np.ndarray | None = None) -> np.ndarray:
    """The harness's choice, shared by every implementation: k distinct data points drawn
    with `seed`, or k-means++ seeding computed once here (see kmbench.protocol.seeding).
    `weights`: kmbench.KMeans's sample weights, which weigh the draws (None: the benchmark's)."""
    return choose_start(data, k, method, seed, weights)[0]


def choose_start(data: np.ndarray, k: int, method: str, seed: int,
                 weights: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """The initial centroids and how they were made: {"method", "device", "seconds"}."""
    n = data.shape[0]
    if k > n:
        raise UsageError(f"--k {k} is larger than the number of points ({n}).")
    if method == "kmeans++":
        return seeding.seed_kmeans_plusplus(data, k, seed, weights)
    start = time.perf_counter()
    chances = None if weights is None else weights / weights.sum()
    indices = np.random.default_rng(seed).choice(n, size=k, replace=False, p=chances)
    rows = np.sort(indices)
    if isinstance(data, np.ndarray):
        chosen = np.ascontiguousarray(data[rows], dtype=data.dtype)
    else:  # a CuPy array (kmbench.KMeans's GPU input): the same draws, the rows taken on the GPU
        import cupy

        chosen = data[cupy.asarray(rows)]
    return chosen, {"method": method, "device": "cpu (numpy)", "seconds": time.perf_counter() - start}


def make_problem(dataset: Dataset, settings: Settings, options: Options = Options()) -> Problem:
    data = np.ascontiguousarray(dataset.data)
    start, how = choose_start(data, settings.k, settings.init, settings.seed)
    return Problem(
        data=data,
        initial_centroids=start,
        iterations=settings.iterations,
        tol=settings.tol if settings.stop == "tolerance" else None,
        data_path=dataset.path,
        dataset_name=dataset.name,
        warmup=settings.warmup,
        repeats=settings.repeats,
        max_time=settings.max_time,
        min_repeats=settings.min_repeats,
        seeding=how,
        options=options,
    )
