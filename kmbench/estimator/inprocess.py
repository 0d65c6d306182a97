"""kmbench-cpu in process: the compiled extension setup.py builds from the program's kernels
(impls/cpu/kmbench_cpu/inprocess.cpp), run on the estimator's arrays where they are, every start
of a fit in one call. kmbench.KMeans runs it wherever it would have run kmbench-cpu's program
(choice.py swaps the row), which wrote the data to a file and started a process a start, and
compiled the program at the first fit (23 s, issue 63).

Threads, as scikit-learn's KMeans counts them: the estimator's n_threads where given, else
OpenMP's own count for the next parallel region, which OMP_NUM_THREADS sets and
threadpoolctl's limits lower (the extension's OpenMP runtime is loaded when this module is,
so a `threadpool_limits` block entered after `import kmbench` finds it), and $KMBENCH_THREADS,
kmbench's own setting, caps it.

Where the extension was not built (no compiler at install), the estimator says so once and runs
the program (or numpy), as before.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import NamedTuple

import numpy as np


def _load():
    """The module for this CPU, or None, and why not. Its OpenMP runtime, where this import loads
    it, reads OMP_WAIT_POLICY as the program's does (impls/cpu/kmbench_cpu wait_policy): passive
    unless the user set one. Threads that spin at the end of a loop kept a busy 2-core machine's
    other core from the thread they waited for: 20 iterations at 1e5 x 2, k = 5 took 480 ms on
    two threads spinning, 8 ms passive (bench/README.md). Set for the import alone, then put back."""
    asked = os.environ.get("OMP_WAIT_POLICY")
    os.environ["OMP_WAIT_POLICY"] = asked or "passive"
    try:
        return _import()
    finally:
        if asked is None:
            del os.environ["OMP_WAIT_POLICY"]


def _import():
    try:
        from kmbench.estimator import _inproc_portable as portable
    except ImportError as exc:
        unbuilt = importlib.util.find_spec("kmbench.estimator._inproc_portable") is None
        why = "no C++ compiler with OpenMP when kmbench was installed" if unbuilt else str(exc)
        return None, (f"kmbench's compiled extension is not built ({why}); reinstall with one "
                      f"(`pip install -e .`, `make venv`)")
    if portable.cpu_has_avx2():
        try:
            from kmbench.estimator import _inproc_avx2 as fast
        except ImportError:  # built without -mavx2 (another architecture's compiler): the portable code
            return portable, None
        return fast, None
    return portable, None


MODULE, MISSING = _load()
_SAID: set = set()


def available() -> bool:
    """Whether the extension is built; says once a process why not, where it is not."""
    if MODULE is None and "missing" not in _SAID:
        _SAID.add("missing")
        warnings.warn(f"{MISSING}. kmbench.KMeans runs kmbench-cpu as a program instead (compiled at the first "
                      f"fit, then a process and a temporary file a start), or numpy where no compiler is found.",
                      UserWarning, stacklevel=4)
    return MODULE is not None


def thread_count(n_threads: int | None) -> int:
    """The threads a fit runs on (the module's docstring says whose setting wins)."""
    if n_threads is not None:
        return int(n_threads)
    count = MODULE.max_threads()
    capped = os.environ.get("KMBENCH_THREADS", "").strip()
    return min(count, int(capped)) if capped.isdigit() and int(capped) > 0 else count


class Ran(NamedTuple):
    """What a run on a row gives fitting.py: the centres, the iterations and whether the last
    one would have emptied a cluster (the run then ended before it)."""
    centroids: np.ndarray
    iterations: int
    emptied: bool


class InProcessRow:
    """kmbench-cpu's row as fitting.py drives one (prepare, run, release), run by the extension.
    `team`: the threads the last run's parallel region had (the thread tests read it)."""

    name = "kmbench-cpu"
    dtype = None  # the data's precision, as the program's
    follows_shift = True
    takes_weights = True
    n_threads: int | None = None  # the estimator's setting, else thread_count's

    def __init__(self):
        self.team = 0

    def prepare(self, problem) -> None:
        """Nothing to compile, write or upload."""

    def release(self) -> None:
        """Nothing held."""

    def run(self, problem) -> Ran:
        """problem.iterations iterations of one start, by fitting.problem's fields."""
        (ran,) = self.runs(problem.data, problem.initial_centroids[None], problem.weights, problem.shift_tol,
                           problem.iterations, problem.halt_on_empty)
        return ran

    def runs(self, X, starts, weights, still, max_iter: int, halt_on_empty: bool = True) -> list[Ran]:
        """Every start (starts, k, d), centred, in one call; X dense (centred) or CSR."""
        centres = np.array(starts, dtype=np.float64, order="C")
        w = None if weights is None else np.ascontiguousarray(weights, dtype=np.float64)
        tol = -1.0 if still is None else float(still)
        settings = (int(max_iter), tol, thread_count(self.n_threads), bool(halt_on_empty))
        if hasattr(X, "indptr"):  # CSR (sparse.py keeps it so): rows with the centres dense
            iterations, emptied, self.team = MODULE.sparse_lloyd(X.data, X.indices, X.indptr, X.shape[1], centres, w,
                                                                 *settings)
        else:
            iterations, emptied, self.team = MODULE.lloyd(X, centres, w, *settings)
        return [Ran(c, n, e) for c, n, e in zip(centres, iterations, emptied)]
