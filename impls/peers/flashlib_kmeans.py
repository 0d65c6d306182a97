"""flashlib's k-means (`flashlib.flash_kmeans`, 0.4.0, from the flash-kmeans authors) as peer rows
beside flash-kmeans (issue 64): `flashlib` on float32 input, `flashlib-fp16` on half-precision data.

The row calls the library's own dispatcher, so it runs whatever flashlib chooses for the shape:
- its router (`flashlib.primitives.kmeans.impl._route`) picks the CuTe DSL backend, a Hopper
  FA3-style fused TMA + WGMMA assignment with flashlib's Triton update, when the GPU is sm_90 or
  newer, B = 1, d >= 256, d % 16 == 0 and k >= 4,096 (tcgen05 on Blackwell at other shapes), and
  its Triton Lloyd otherwise; `flash_kmeans` then demotes the CuTe DSL choice to Triton when
  `nvidia-cutlass-dsl` cannot be imported (installed with pip --target, its `.pth` file is not
  read: `nvidia_cutlass_dsl/dsl_packages` must be on PYTHONPATH), without a word;
- inside the CuTe DSL loop, each step's assignment falls back to Triton again, silently, when the
  kernel does not take the input: float32 data (it takes fp16/bf16), d > 512, a compile failure.
So the record says which path ran: the router's choice for the shape as run, whether the CuTe DSL
could be imported (and if not, flashlib's own reason), and how many steps of the timed runs fell
back to the Triton assignment, counted by watching the one function every such fallback calls.

Precision, as the flash-kmeans rows declare theirs: with float32 input every path that runs is
Triton's `tl.dot`, which rounds its inputs to TF32; the fp16 row hands it half-precision data and
centroids (the Hopper kernel's input), its sums float32. tol=-1 runs exactly the iterations asked
for (every path stops only on a centroid shift below a positive tol), from the harness's
centroids; the first call (Triton's JIT, the CuTe DSL compile and its tile autotune, about 18 s
on a new shape) is made in prepare, the setup phase, and the timed call has CUDA events around it.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from impls.peers.gpu_libraries import FlashKMeans
from kmbench.protocol import Problem, Result
from kmbench.protocol.timing import CudaEventRegion, host_region

# The function every CuTe DSL step calls when its kernel does not take the input: the name
# flashlib's CuTe DSL module looks up at each call (its module global).
FALLBACK_MODULE = "flashlib.primitives.kmeans.cutedsl.assign"
FALLBACK_FUNCTION = "euclid_assign_triton"


def chosen_backend(route, cutedsl_problem: str | None, n: int, d: int, k: int) -> tuple[str, str | None, str]:
    """(backend, variant, note) flash_kmeans runs for one batch of n x d points and k centroids:
    its router's choice, demoted to Triton where the CuTe DSL cannot be used, as flash_kmeans
    does without a word; the note says so where it happens ("" elsewhere)."""
    backend, variant = route(B=1, N=n, D=d, K=k, metric="euclidean")
    if backend == "cutedsl" and cutedsl_problem is not None:
        return "triton", None, (f"flashlib's router chose its CuTe DSL path for this shape, but the CuTe DSL cannot "
                                f"be used here ({cutedsl_problem}): flash_kmeans ran its Triton path")
    return backend, variant, ""


def fallback_reason(variant: str | None, half: bool, d: int) -> str:
    """Why flashlib's CuTe DSL assignment would hand a step to Triton, by the gates it checks
    (cutedsl/assign.py) for the rows' inputs (float32 or fp16, never bf16); "" where none does, so
    that a fallback there was a compile or launch failure."""
    if variant == "blackwell":
        return "its tcgen05 kernel takes bf16 input"
    if not half:
        return "its kernel takes fp16/bf16 input, not float32"
    if d > 512:
        return "its kernel takes d <= 512"
    return ""


def path_that_ran(backend: str, variant: str | None, steps: int, fallbacks: int, reason: str = "") -> str:
    """What ran, in words: the backend, and on the CuTe DSL's how many of its steps assigned in
    Triton instead (every step of a float32 run does), with the reason where one is known."""
    if backend != "cutedsl":
        return backend
    kernel = f"cutedsl-{variant or 'fa3'}"
    if fallbacks == 0:
        return f"{kernel} assign, triton update"
    why = f": {reason}" if reason else ""
    if fallbacks >= steps:
        return f"triton (routed to {kernel}; its assignment fell back to Triton in every step{why})"
    return f"{kernel} assign in {steps - fallbacks} of {steps} steps, triton in {fallbacks}{why}"


@contextmanager
def counting_fallbacks(module, name: str = FALLBACK_FUNCTION):
    """Counts calls to `module.name` inside the block (a one-element list, read after it); the
    function itself is called as before, and put back after the block, even on an error."""
    original = getattr(module, name)
    calls = [0]

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    setattr(module, name, counted)
    try:
        yield calls
    finally:
        setattr(module, name, original)


class Flashlib(FlashKMeans):
    name = "flashlib"
    row_order = 205  # after flash-kmeans's rows, its authors' earlier package
    label = "flashlib (fp32 input)"
    dtype = "tf32"  # Triton's tl.dot on float32 input, whichever route: judged by TF32's bounds
    description = ("flashlib.flash_kmeans(x, k, tol=-1, init_centroids=given) with its own routing "
                   "(CuTe DSL Hopper assign or Triton); fp32 input, TF32 dots, fp32 sums")
    source = "peer users pick (issue 64): flashlib 0.4.0, Triton and CuTe DSL kernels"
    library = "flashlib"
    install_hint = "flashlib is not installed: pip install 'flashlib[cutedsl]==0.4.0'"

    def available(self):
        ready, why = super().available()
        if not ready:
            return ready, why
        try:  # the kmeans package imports Triton and tqdm, which `import flashlib` leaves for later
            import flashlib.primitives.kmeans  # noqa: F401
        except ImportError as exc:
            return False, f"flashlib's k-means cannot be imported ({exc}): pip install 'flashlib[cutedsl]==0.4.0'"
        return True, ""

    def prepare(self, problem: Problem) -> None:
        import torch
        from flashlib import flash_kmeans
        from flashlib._optional import _cutedsl_problem
        from flashlib.primitives.kmeans.impl import _route

        super().prepare(problem)
        self._cutedsl_problem = _cutedsl_problem()
        self._backend, self._variant, self._demoted = chosen_backend(_route, self._cutedsl_problem, problem.n,
                                                                      problem.d, problem.k)
        self._paths: set[str] = set()
        with host_region(self._setup, "compile"):  # JIT, CuTe DSL compile and tile autotune, untimed
            flash_kmeans(self._x, problem.k, max_iters=1, tol=-1.0, init_centroids=self._start(problem))
            torch.cuda.synchronize()

    def _start(self, problem: Problem):
        """A fresh copy of the harness's centroids in the row's precision: flashlib's loop writes
        its ping-pong buffers over the tensor it is given."""
        import torch

        return torch.as_tensor(np.asarray(problem.initial_centroids, dtype=np.float32),
                               device="cuda").to(self._x.dtype)

    def run(self, problem: Problem) -> Result:
        import importlib

        import torch
        from flashlib import flash_kmeans

        start = self._start(problem)
        # Counting costs one Python call on a step that falls back, none on a step the kernel takes.
        cutedsl = self._backend == "cutedsl"
        watch = counting_fallbacks(importlib.import_module(FALLBACK_MODULE)) if cutedsl else _nothing()
        torch.cuda.synchronize()
        region = CudaEventRegion()
        with watch as fallbacks, region:
            _, centroids, done = flash_kmeans(self._x, problem.k, max_iters=problem.iterations, tol=-1.0,
                                              init_centroids=start)
        reason = fallback_reason(self._variant, self.half, problem.d)
        self._paths.add(path_that_ran(self._backend, self._variant, int(done), fallbacks[0], reason))
        return Result(centroids=centroids.double().cpu().numpy(), iterations=int(done),
                      phases={"iterate": region.seconds()}, notes=[self._demoted] if self._demoted else [])

    def build_info(self) -> dict:
        from importlib.metadata import PackageNotFoundError, version

        try:
            cutlass = f"nvidia-cutlass-dsl {version('nvidia-cutlass-dsl')}"
        except PackageNotFoundError:
            cutlass = "nvidia-cutlass-dsl not installed"
        if not hasattr(self, "_cutedsl_problem"):
            usable = "not checked (prepare did not get that far)"
        elif self._cutedsl_problem is None:
            usable = "usable"
        else:
            usable = f"not usable ({self._cutedsl_problem})"
        return {"library": f"flashlib {version('flashlib')}", "torch": getattr(self, "_version", "?"),
                "precision": "fp16 data and dots, fp32 sums" if self.half else "fp32 input, tf32 dots, fp32 sums",
                "cutedsl": f"{cutlass}: {usable}",
                "route": f"{getattr(self, '_backend', '?')}" + (f"/{self._variant}" if getattr(self, "_variant", None)
                                                                else ""),
                "path": "; ".join(sorted(getattr(self, "_paths", ()))) or "not run",
                "not_forced": "no label tolerance rule (it watches centroid shift)"}


@contextmanager
def _nothing():
    """Stands in for counting_fallbacks on the Triton route, which has no fallback to count."""
    yield [0]


class FlashlibHalf(Flashlib):
    name = "flashlib-fp16"
    row_order = 206
    label = "flashlib (fp16)"
    dtype = "float16"  # half-precision data and centroids, float32 sums
    description = "flashlib.flash_kmeans on float16 data and centroids (the input its Hopper CuTe DSL kernel takes)"
    half = True
