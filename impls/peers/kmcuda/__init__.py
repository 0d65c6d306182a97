"""kmcuda (src-d/kmcuda, document 004's library) as two rows: its Lloyd and its Yinyang.

Built from the libKMCUDA source distribution by `make kmcuda` (impls/peers/kmcuda/build.py) and
called through ctypes: `kmeans_cuda(init=import, tolerance, yinyang_t, L2, ...)` with the
data, the harness's initial centroids and the assignments already on GPU 0 (device_ptrs =
0), so the timed region (CUDA events around the call) holds kmcuda's own work: its
allocations, its transposition of the samples, its iterations.

What the protocol cannot force, and what we do about it (also in each record's notes):
- Stop rule: kmcuda stops after an assignment in which at most tolerance * n points changed,
  our rule, but it returns before updating the centroids from that assignment. The adapter
  completes that last update (the means of kmcuda's own final assignment, in float64 on the
  GPU, inside the timed region), so the answer is the protocol's. Under the iterations rule
  kmcuda cannot run a fixed count: the runner gives such cells to other rows only
  (follows_tolerance is True; a fixed count is refused with a clear reason).
- Iterations: kmcuda reports them only in its verbose output ("iteration N: M
  reassignments"), which the adapter captures from file descriptor 1; the last line's N is
  the count (its Yinyang also prints the Lloyd run that groups the centroids, numbered
  from 1, before its own lines).
- Yinyang: kmcuda's runs Lloyd until 11% of the points change, then Yinyang with t = 0.1 k
  groups; kmcuda does not promise exactness, so the validator is the judge.
"""

from __future__ import annotations

import ctypes
import os
import re
import tempfile

import numpy as np

from impls.gpu.cuda import GpuImplementation
from impls.peers.kmcuda.build import library_path
from kmbench.protocol import reference
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result
from kmbench.protocol.timing import CudaEventRegion, host_region

INIT_IMPORT, METRIC_L2 = 3, 0  # kmcudaInitMethodImport, kmcudaDistanceMetricL2
RESULTS = ("success", "invalid arguments", "no such device", "memory allocation failure", "runtime error",
           "memory copy error")
ITERATION_LINE = re.compile(r"^iteration (\d+): (\d+) reassignments", re.MULTILINE)


def _load(path):
    try:
        library = ctypes.CDLL(str(path))
    except OSError as exc:  # a truncated or foreign file where the build should be
        raise ImplementationError(f"kmcuda's library {path} cannot be loaded ({exc}); delete it and run "
                                  "`make kmcuda` again") from None
    function = library.kmeans_cuda
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_float, ctypes.c_float, ctypes.c_int,
                         ctypes.c_uint32, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                         ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_void_p, ctypes.c_void_p]
    return function


class _StdoutCapture:
    """kmcuda prints with printf: point file descriptor 1 at a file for the call."""

    def __enter__(self):
        self._file = tempfile.TemporaryFile(mode="w+b")
        self._saved = os.dup(1)
        os.dup2(self._file.fileno(), 1)
        return self

    def __exit__(self, *exc):
        ctypes.CDLL(None).fflush(None)
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()
        return False


class Kmcuda(GpuImplementation):
    name = "kmcuda"
    row_order = 150
    label = "kmcuda Lloyd"
    description = "src-d/kmcuda 6.2.3 built from its sdist for this GPU, kmeans_cuda(yinyang_t=0); FP32"
    source = "document 004 (kmcuda); built by make kmcuda"
    dtype = "float32"
    yinyang_t = 0.0

    def available(self):
        usable, why = super().available()
        if not usable:
            return usable, why
        path = library_path()
        if not path.exists():
            return False, (f"kmcuda is not built for this GPU ({path} is missing): run `make kmcuda` "
                           "(needs nvcc, cuRAND headers and the libKMCUDA sdist from PyPI)")
        return True, ""

    def follows_tolerance(self, tol: float) -> bool:
        return True

    def check(self, problem: Problem) -> None:
        if problem.tol is None:
            raise ImplementationError("kmcuda cannot run a fixed number of iterations: it stops only by its "
                                      "reassignment tolerance (run it with --stop tolerance)")
        if problem.d > 65535 or problem.n >= 2**32 or problem.k >= 2**32:
            raise ImplementationError("kmcuda takes d < 65,536 (uint16) and n, k < 2^32 (uint32)")

    def prepare(self, problem: Problem) -> None:
        import cupy

        self.check(problem)
        phases: dict[str, float] = {}
        with host_region(phases, "load"):
            self._kmeans = _load(library_path())
        with host_region(phases, "upload"):
            self._x = cupy.asarray(np.asarray(problem.data, dtype=np.float32))
            self._centroids = cupy.empty((problem.k, problem.d), dtype=cupy.float32)
            self._labels = cupy.empty(problem.n, dtype=cupy.uint32)
            cupy.cuda.Device().synchronize()
        self._setup = phases
        version = (library_path().parent / "VERSION")
        # build.py writes the source directory's name, libKMCUDA-<version>, beside the library.
        self._info = {"library": version.read_text().strip() if version.exists() else "libKMCUDA (version unknown)",
                      "path": str(library_path()), "yinyang_t": self.yinyang_t, "precision": "fp32"}

    def _finish_update(self):
        """The update kmcuda leaves out: the means of its final assignment (float64; an empty
        cluster keeps its centroid), by the reference's update."""
        import cupy

        return reference.update(self._x, self._labels.astype(cupy.int64), self._centroids, xp=cupy)

    def run(self, problem: Problem) -> Result:
        import cupy

        self._centroids.set(np.asarray(problem.initial_centroids, dtype=np.float32))
        cupy.cuda.Device().synchronize()
        phases: dict[str, float] = {}
        with _StdoutCapture() as captured:
            region = CudaEventRegion()
            with region:
                code = self._kmeans(INIT_IMPORT, None, float(problem.tol), self.yinyang_t, METRIC_L2, problem.n,
                                    problem.d, problem.k, 0, 1, cupy.cuda.Device().id, 0, 1, self._x.data.ptr,
                                    self._centroids.data.ptr, self._labels.data.ptr, None)
                if code == 0:
                    final = self._finish_update()
            phases["iterate"] = region.seconds()
        if code != 0:
            reason = RESULTS[code] if 0 <= code < len(RESULTS) else f"code {code}"
            raise ImplementationError(f"kmeans_cuda failed: {reason}; its output: {captured.text[-300:]!r}")
        lines = ITERATION_LINE.findall(captured.text)
        if not lines:
            raise ImplementationError(f"kmcuda printed no iteration line; its output: {captured.text[-300:]!r}")
        with host_region(phases, "download"):
            centroids = cupy.asnumpy(final)
        notes = ["kmcuda returns before its last update; the adapter computed it (float64, inside the timed "
                 f"region); iterations are kmcuda's own count, the last with {lines[-1][1]} reassignments"]
        return Result(centroids=centroids, iterations=int(lines[-1][0]), phases=phases, notes=notes)

    def release(self) -> None:
        for name in ("_x", "_centroids", "_labels"):
            self.__dict__.pop(name, None)


class KmcudaYinyang(Kmcuda):
    name = "kmcuda-yinyang"
    row_order = 160
    label = "kmcuda Yinyang"
    description = "src-d/kmcuda 6.2.3, kmeans_cuda(yinyang_t=0.1): Lloyd to 11% reassignments, then Yinyang"
    yinyang_t = 0.1
