"""C++ and C++/Eigen k-means, built on demand and run as subprocesses.

The native program (see harness.hpp) reads the dataset and the harness's initial centroids
from .npy files, performs the warm-up and the counted repeats itself, times only the Lloyd
loop with a steady clock and prints one JSON document. The harness also times the whole
process, so spawn and file I/O show as their own figure (`process_overhead`).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from kmbench.errors import ImplementationError
from kmbench.protocol import Implementation, Problem, Result

from . import build

HERE = Path(__file__).resolve().parent
TIMEOUT_S = float(os.environ.get("KMBENCH_CPP_TIMEOUT", 3600))


def eigen_include() -> tuple[Path | None, str]:
    """Eigen's headers: $EIGEN_INCLUDE, else those of the cmeel-eigen wheel."""
    override = os.environ.get("EIGEN_INCLUDE")
    if override:
        path = Path(override)
        return (path, "") if (path / "Eigen" / "Dense").exists() else (
            None, f"EIGEN_INCLUDE={override} has no Eigen/Dense")
    try:
        files = metadata.distribution("cmeel-eigen").files or []
    except metadata.PackageNotFoundError:
        return None, "Eigen headers not found: pip install cmeel-eigen, or set EIGEN_INCLUDE"
    for file in files:
        if str(file).endswith("eigen3/Eigen/Dense"):
            return Path(file.locate()).parent.parent, ""
    return None, "the cmeel-eigen package has no eigen3/Eigen/Dense"


class NativeLloyd(Implementation):
    """Adapter for one C++ program of this folder."""

    source_file = ""
    runs_repeats_itself = True
    traces = True  # --trace: the judge's one untimed run writes every iteration's centroids (harness.hpp)

    def __init__(self, source_dir: Path | None = None, timeout: float = TIMEOUT_S):
        self.source_dir = Path(source_dir) if source_dir else HERE
        self.timeout = timeout
        self.single = os.environ.get("KMBENCH_CPP_PRECISION") == "float32"
        self.dtype = "float32" if self.single else "float64"
        self._binary: build.Binary | None = None
        self._workdir: tempfile.TemporaryDirectory | None = None
        self.reported: dict = {}

    def follows_tolerance(self, tol: float) -> bool:
        return True  # harness.hpp's StopRule, the same rule as kmbench.protocol.stop_done

    def include_flags(self) -> tuple[list[str], str]:
        return [], ""

    def available(self):
        compiler, why = build.find_compiler()
        if compiler is None:
            return False, why
        _, why = self.include_flags()
        return (False, why) if why else (True, "")

    def _sources(self) -> list[Path]:
        return [self.source_dir / self.source_file, self.source_dir / "harness.hpp"]

    def compile_flags(self) -> list[str]:
        includes, why = self.include_flags()
        if why:
            raise ImplementationError(why)
        return [*build.BASE_FLAGS, *build.extra_flags(), *includes]

    def prepare(self, problem: Problem) -> None:
        self._binary = build.build(self.name, self._sources(), self.compile_flags())
        self._workdir = tempfile.TemporaryDirectory(prefix="kmbench-cpp-")
        work = Path(self._workdir.name)
        self._init_path = work / "init.npy"
        self._trace_path = work / "trace.npy"
        self._data_path = self._dataset_file(problem, work)

    @staticmethod
    def _dataset_file(problem: Problem, work: Path) -> Path:
        """The dataset's own .npy where it is one; otherwise written once for this problem."""
        path = problem.data_path
        if path is not None and path.suffix == ".npy":
            on_disk = np.load(path, mmap_mode="r")
            # The native reader takes row-major arrays only, and must read what was validated.
            if on_disk.shape == problem.data.shape and on_disk.dtype == problem.data.dtype \
                    and on_disk.flags.c_contiguous:
                return path
        path = work / "data.npy"
        np.save(path, problem.data)
        return path

    def command(self, problem: Problem) -> list[str]:
        # The judge's traced run is one run: no warm-up, one repeat, every iteration written out.
        warmup, repeats = (0, 1) if problem.trace else (problem.warmup, problem.repeats)
        command = [str(self._binary.path), "--data", str(self._data_path), "--init", str(self._init_path),
                   "--iters", str(problem.iterations), "--warmup", str(warmup), "--repeats", str(repeats)]
        if problem.trace:
            command += ["--trace", str(self._trace_path)]
        if problem.max_time and not problem.trace:
            command += ["--max-time", str(problem.max_time), "--min-repeats", str(problem.min_repeats)]
        if problem.tol is not None:
            command += ["--tol", repr(float(problem.tol))]
        return command + (["--float32"] if self.single else [])

    def environment(self) -> dict | None:
        """The program's environment: None, this process's."""
        return None

    def run(self, problem: Problem) -> Result:
        # Written for every run: the judge steps a row from centroids of its own (kmbench.judge).
        np.save(self._init_path, np.asarray(problem.initial_centroids, dtype=np.float64))
        start = time.perf_counter()
        try:
            done = subprocess.run(self.command(problem), capture_output=True, text=True,
                                  timeout=self.timeout, env=self.environment())
        except subprocess.TimeoutExpired:
            raise ImplementationError(f"{self.name} did not finish within {self.timeout:g} s") from None
        except OSError as exc:
            raise ImplementationError(f"{self.name} could not be started: {exc}") from None
        wall = time.perf_counter() - start
        if done.returncode != 0:
            reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
            how = f"was killed by signal {-done.returncode}" if done.returncode < 0 else \
                f"exited with status {done.returncode}"
            raise ImplementationError(f"{self.name} {how}: {reason}")
        try:
            output = json.loads(done.stdout)
            centroids = np.array(output["centroids"], dtype=np.float64)
            times = [float(t) for t in output["times"]]
            warmup = [float(t) for t in output.get("warmup_times", [])]
            iterations = int(output["iterations"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ImplementationError(
                f"{self.name} printed output that is not kmbench's JSON document ({exc}): "
                f"{done.stdout[:120]!r}") from None
        if centroids.shape != problem.initial_centroids.shape or not times:
            raise ImplementationError(f"{self.name} returned centroids of shape {centroids.shape} "
                                      f"and {len(times)} timings")
        # What a binary says beyond the protocol's fields (kmbench-cpu: the path it took).
        self.reported = {key: value for key, value in output.items()
                         if key not in ("centroids", "iterations", "times", "warmup_times", "emptied")}
        phases = {"process_overhead": max(0.0, wall - sum(times) - sum(warmup))}
        if warmup:
            phases["first_run"] = warmup[0]
        emptied = output.get("emptied")  # said by kmbench-cpu; None where a program does not say
        trace = self._trace(problem, centroids.shape) if problem.trace else None
        return Result(centroids=centroids, iterations=iterations, phases=phases, iterate_times=times,
                      emptied=None if emptied is None else bool(emptied), trace=trace)

    def _trace(self, problem: Problem, shape) -> list[np.ndarray]:
        """The centroids after each iteration of a traced run, as the program wrote them."""
        try:
            steps = np.load(self._trace_path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ImplementationError(f"{self.name} wrote no readable trace ({exc})") from None
        finally:
            self._trace_path.unlink(missing_ok=True)
        if steps.ndim != 3 or steps.shape[1:] != tuple(shape):
            raise ImplementationError(f"{self.name} wrote a trace of shape {steps.shape} for centroids of shape {shape}")
        return list(steps)

    def release(self) -> None:
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def setup_phases(self) -> dict[str, float]:
        return {"build": self._binary.build_seconds} if self._binary is not None else {}

    def build_info(self) -> dict:
        info = {"precision": self.dtype}
        if self._binary is not None:
            info.update(self._binary.info())
        return info


class CppPlain(NativeLloyd):
    name = "cpp"
    row_order = 30
    ranked_in_reports = True
    label = "Our C++"
    description = "plain C++17 loop over points (double; 2-D fast path), subprocess"
    source = "000, section C++ (the vanilla C++ version)"
    source_file = "kmeans.cpp"


class CppEigen(NativeLloyd):
    name = "cpp-eigen"
    row_order = 40
    ranked_in_reports = True
    label = "Our C++ (Eigen)"
    description = "C++17 with Eigen array expressions for the distances (double), subprocess"
    source = "000, section C++ (the Eigen version)"
    source_file = "kmeans_eigen.cpp"

    def include_flags(self):
        path, why = eigen_include()
        return ([f"-I{path}"], "") if path else ([], why)
