"""kmbench-cpu: our exact Lloyd on the CPU's cores, C++17 with OpenMP and SIMD (kmbench_cpu.cpp),
built on demand and run as a subprocess like the `cpp` rows (impls/cpu/cpp's protocol and build
cache). The data are centred once before any timed run and kept in their own precision: float32
data in float32, float64 data in float64 (kmbench.KMeans's default for them; --float64, the
portable loops); the sums are float64. The row is judged in the data's precision.

Threads: the problem's options.threads, read at every run (the harness's calibration runs it at
several counts after one prepare, kmbench.protocol.threads), default every core
os.sched_getaffinity allows; each record's build information says how many ran. The binary is
built for this machine's CPU (-march=native): the CPU's model is part of the build cache's key, so a cache
shared between machines never runs one CPU's binary on another."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from impls.cpu.cpp import HERE as CPP_HERE
from impls.cpu.cpp import NativeLloyd, build
from kmbench.errors import ImplementationError
from kmbench.protocol.environment import cpu_model
from kmbench.protocol import Problem
from kmbench.protocol.threads import usable_cores

HERE = Path(__file__).resolve().parent
# The kernels, shared with kmbench.KMeans's in-process extension (inprocess.cpp, built by setup.py).
HEADERS = ("nearest.hpp", "lloyd.hpp", "sorted_search.hpp")


def thread_count(problem: Problem) -> int:
    """The threads the problem's options ask for, else every core this process may run on."""
    if problem.options.threads is not None:
        return problem.options.threads
    return usable_cores()


def wait_policy() -> str:
    return os.environ.get("OMP_WAIT_POLICY") or "passive"


SORTED_SEARCH = "sorted search"  # kmbench_cpu.cpp's name for its low-d path for many centroids


class KmbenchCpu(NativeLloyd):
    name = "kmbench-cpu"
    row_order = 50
    description = ("our exact Lloyd on the CPU's cores (its fastest count): OpenMP over points; low d, SIMD over "
                   "points, or for many centroids a scan of them sorted along one axis; high d, a register block "
                   "with the argmin fused; centred data in their own precision, float64 sums; subprocess")
    source = "kmbench's own (the kmbench-cpu issue)"
    source_file = "kmbench_cpu.cpp"

    roofline_on = "cpu"  # its counts below are held against the CPU's measured ceilings
    takes_threads = True
    follows_shift = True  # kmbench.KMeans's rule, in one process rather than one per iteration
    takes_weights = True  # kmbench.KMeans's sample_weight (--weights)

    label = "kmbench CPU"  # the harness adds the thread count asked for (LloydProtocol.label)

    def __init__(self, source_dir: Path | None = None, **kwargs):
        super().__init__(source_dir or HERE, **kwargs)
        self.single, self.dtype = False, None  # distances in the data's precision
        self._threads = None

    def _sources(self) -> list[Path]:
        """The translation unit, then every header it includes (all of them key the build cache)."""
        return [self.source_dir / self.source_file, *(self.source_dir / header for header in HEADERS),
                CPP_HERE / "harness.hpp"]

    def prepare(self, problem: Problem) -> None:
        super().prepare(problem)
        self._weights_path = None
        if problem.weights is not None:  # written once, as the data are: every run of a fit has the same
            self._weights_path = self._init_path.parent / "weights.npy"
            np.save(self._weights_path, np.asarray(problem.weights, dtype=np.float64).reshape(-1, 1))

    def compile_flags(self) -> list[str]:
        model = hashlib.sha256(cpu_model().encode()).hexdigest()[:12]
        # 512-bit vectors where the CPU has them (the portable low-d loop is fastest so there).
        return [*build.BASE_FLAGS, "-fopenmp", "-march=native", "-mprefer-vector-width=512",
                f"-DKMBENCH_CPU_MODEL={model}"]

    def environment(self) -> dict:
        """OpenMP threads that wait at the end of a loop sleep rather than spin (unless
        OMP_WAIT_POLICY says otherwise): a spinning thread kept the core from the thread it
        waited for whenever another program held the other core, and 2 threads took 12 ms an
        iteration where 1 took 2.5 (NOTES.md, f08c955:bench/kmbench_cpu_busy_core.py)."""
        return {**os.environ, "OMP_WAIT_POLICY": wait_policy()}

    def command(self, problem: Problem) -> list[str]:
        shift = [] if problem.shift_tol is None else ["--shift-tol", repr(float(problem.shift_tol))]
        halt = ["--halt-on-empty"] if problem.halt_on_empty else []
        wide = ["--float64"] if problem.data.dtype == np.float64 else []
        weights = []
        if problem.weights is not None:
            if self._weights_path is None:
                raise ImplementationError("kmbench-cpu was prepared without the weights it is now run with")
            weights = ["--weights", str(self._weights_path)]
        self._threads = thread_count(problem)  # this run's: build_info names the count of the last
        return [*super().command(problem), *shift, *halt, *wide, *weights, "--threads", str(self._threads)]

    def bytes_per_iteration(self, problem: Problem) -> int:
        """Each point read once, as the GPU rows count it (in the data's precision, after centring)."""
        return problem.n * problem.d * problem.data.itemsize

    def fp32_per_distance(self, problem: Problem) -> float | None:
        """The FMAs of one distance: d where every centroid is scored (the direct (x - c)^2 at
        low d, the dot product at high d). The CPU's ceiling is BLAS SGEMM's FMA rate, so the
        fraction says how busy the FMA units are; the subtractions and compares beside them
        run on other pipes on the CPUs we measured, and are left out of both. None after the
        sorted search: how many centroids it scores depends on the data (no roofline claim,
        as for yinyang-gpu), and on float64 data."""
        if problem.data.dtype == np.float64:
            return None  # float64 FMAs: the CPU's ceiling is float32's, so no claim
        return None if self.strategy == SORTED_SEARCH else float(problem.d)

    @property
    def strategy(self) -> str | None:
        """The path the binary reported for the last run."""
        return self.reported.get("strategy")

    def build_info(self) -> dict:
        scalar = self.reported.get("scalar")  # what the binary says it computed in; none before a run
        precision = f"{scalar} distances on centred data, float64 sums" if scalar else None
        return {**super().build_info(), "precision": precision,
                "threads": self._threads, "omp_wait_policy": wait_policy(), "cpu": cpu_model(),
                "strategy": self.strategy}
