"""How one kmbench.KMeans run goes, from one start: on the chosen row, whole where the row follows
scikit-learn's stop rule itself, else one iteration at a time; on the estimator's own Lloyd
(lloyd.py) wherever the row left a cluster empty or cannot run the fit; and scikit-learn's choice
of the best of n_init runs. The estimator (kmbench.estimator.KMeans) checks the parameters and
the data and calls these; they know nothing of its attributes.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from kmbench.estimator import lloyd
from kmbench.estimator.labels import nearest
from kmbench.protocol import Problem


def best(runs, X, weights, threads=None):
    """scikit-learn's choice among runs: the first of least inertia, a later one replacing it
    only where it is not the same clustering (where rounding alone made it lower)."""
    chosen = chosen_inertia = chosen_labels = None
    for run in runs:
        labels, distances = nearest(X, run[0], threads)
        inertia = weighted_sum(distances, weights)
        if chosen is None or (inertia < chosen_inertia and not lloyd.same_clustering(labels, chosen_labels)):
            chosen, chosen_inertia, chosen_labels = run, inertia, labels
    return chosen


def all_runs(row, X, starts, weights, still, max_iter: int, verbose) -> list[tuple[np.ndarray, int, str]]:
    """Each start's run (one_run's answer). A row that runs several starts in one call (`runs`: the
    extension, inprocess.py) gets them all at once, unless verbose asks for each iteration; a run
    that stopped before emptying a cluster goes on as whole_runs takes it on."""
    if not hasattr(row, "runs") or verbose or len(starts) < 2:
        return [one_run(row, X, start, weights, still, max_iter, verbose) for start in starts]
    ran = row.runs(X, np.stack(starts), weights, still, max_iter)
    return [(first.centroids, first.iterations, row.name) if not first.emptied
            else (*whole_runs(row, X, start, still, weights, max_iter, first=first)[:2], row.name)
            for start, first in zip(starts, ran)]


def one_run(row, X, start, weights, still, max_iter: int, verbose) -> tuple[np.ndarray, int, str]:
    """One run from `start` (centred): the centres, the iterations, and what ran it (the row, or
    the estimator's own Lloyd where the row left a cluster empty or cannot run the fit)."""
    if verbose:
        print("Initialization complete")
    if row is not None:
        centers, n_iter, emptied = run_row(row, X, start, still, weights, max_iter, verbose)
        if emptied is None:  # the row does not say: a cluster empty at its end tells
            emptied = np.unique(nearest(X, centers)[0]).size < len(start)
        if not emptied:
            return centers, n_iter, row.name
    step = partial(lloyd.relocating_step, X, weights)
    return (*lloyd.iterate(step, start, int(max_iter), still, verbose), lloyd.OWN)


def run_row(row, X, start, still, weights, max_iter: int, verbose) -> tuple[np.ndarray, int, bool | None]:
    """The run on a row, and whether it left a cluster empty (None: the row does not say).
    Whole where the row follows the stop rule itself and verbose does not ask for each
    iteration (`whole_runs`); else one iteration at a time, where a step that left a
    cluster empty is taken again by the estimator's own step, which relocates it, and the
    row goes on."""
    row.prepare(problem(X, start, 1, weights=weights))  # once: compile, write or upload the data
    try:
        if row.follows_shift and not verbose:
            return whole_runs(row, X, start, still, weights, max_iter)
        said = []

        def step(centers):
            result = row.run(problem(X, centers, 1, weights=weights))
            if result.emptied:
                return lloyd.relocating_step(X, weights, centers)
            said.append(result.emptied is not None)
            inertia = weighted_sum(nearest(X, centers)[1], weights) if verbose else None
            return np.asarray(result.centroids, dtype=np.float64), inertia

        centers, n_iter = lloyd.iterate(step, start, int(max_iter), still, verbose)
        return centers, n_iter, False if all(said) else None
    finally:
        row.release()


def whole_runs(row, X, start, still, weights, max_iter: int, relocate=None, make=None,
               first=None) -> tuple[np.ndarray, int, bool | None]:
    """Whole runs of a row that follows the stop rule, each ending before an iteration that
    would leave a cluster empty (Problem.halt_on_empty). The estimator's own step takes that
    iteration, relocating the cluster, and the row runs on from there. A kmbench-cpu fit
    that emptied one had been redone whole in NumPy (239 s at 1e6 x 16, k = 100, where
    scikit-learn's took 4), then stepped, a process an iteration (11 s); so had a kmbench-gpu
    fit in float64 on the GPU (13.7 s at 1e7 x 128, k = 1,024, where the row's run took 0.2).
    relocate(centers) -> (new centres, inertia): the own step (here: lloyd.relocating_step);
    make(centers, iterations) -> the row's Problem with halt_on_empty (here: shift_tol's rule);
    `first`: the first run's result where the row already ran it (all_runs)."""
    relocate = relocate or partial(lloyd.relocating_step, X, weights)
    make = make or (lambda centers, iterations: problem(X, centers, iterations, shift_tol=still, halt_on_empty=True,
                                                        weights=weights))
    centers, done, most = np.asarray(start, dtype=np.float64), 0, int(max_iter)
    while done < most:
        result = first or row.run(make(centers, most - done))
        first = None
        centers, done = np.asarray(result.centroids, dtype=np.float64), done + int(result.iterations)
        if not result.emptied:  # False: ended by the rule or the count; None: the row does not say
            return centers, done, result.emptied
        moved, _ = relocate(centers)
        shift = float(np.sum((moved - centers) ** 2))
        centers, done = moved, done + 1
        if shift == 0:  # nothing to relocate to (fewer distinct points than clusters): every
            return centers, (done if still is not None else most), False  # later step the same
        if still is not None and shift <= still:
            break
    return centers, done, False


def problem(X, start, iterations: int, shift_tol=None, halt_on_empty=False, weights=None) -> Problem:
    return Problem(data=X, initial_centroids=np.ascontiguousarray(start, dtype=X.dtype), iterations=iterations,
                   tol=None, warmup=0, repeats=1, shift_tol=shift_tol, halt_on_empty=halt_on_empty,
                   weights=weights)


def weighted_sum(distances: np.ndarray, weights: np.ndarray | None) -> float:
    """The inertia of these squared distances: summed, or weighted by sample weights."""
    return float(distances @ weights if weights is not None else distances.sum())
