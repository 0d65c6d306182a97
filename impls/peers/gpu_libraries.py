"""GPU libraries users pick, as rows beside our own: fast-pytorch-kmeans and cuML (KeOps has
its own module, keops_kmeans.py).

Both get the harness's data on the GPU before the timed region, its initial centroids and
its iteration count; both are timed with CUDA events around the library's own loop.

- fast-pytorch-kmeans (`KMeans.fit_predict(X, centroids=...)`): FP32 with TF32 switched
  off; `tol=-1` so it runs exactly max_iter iterations (its tol watches centroid movement,
  not labels, so under the tolerance rule the runner hands it the oracle's count). Not
  forcible: an empty cluster's centroid becomes 0 (a 0/0 it turns into zero), where the
  oracle keeps it; and it builds a dense k x n mask each iteration, so large n x k runs out
  of memory, which the row then says.
- cuML (`cuml.cluster.KMeans(init=<given>, n_init=1, tol=0)`): RAPIDS is not installable on
  kmbench's GPU machine, so this adapter has never run there: `kmbench list` says so until
  cuML is installed; its records are then as trustworthy as any validated row.
"""

from __future__ import annotations

import numpy as np

from impls.peers.torch_lloyd import TorchLloyd
from kmbench.protocol import Implementation, Problem, Result
from kmbench.protocol.timing import CudaEventRegion, host_region


class FastPytorchKMeans(TorchLloyd):
    name = "fast-pytorch-kmeans"
    row_order = 180
    label = "fast-pytorch-kmeans"
    description = "fast_pytorch_kmeans.KMeans(tol=-1).fit_predict(X, centroids=given); FP32, TF32 off"
    source = "peer users pick (the Yinyang issue): fast-pytorch-kmeans"
    library = "fast_pytorch_kmeans"
    install_hint = "fast-pytorch-kmeans is not installed: pip install fast-pytorch-kmeans"

    def follows_tolerance(self, tol: float) -> bool:
        return False

    def run(self, problem: Problem) -> Result:
        import torch
        from fast_pytorch_kmeans import KMeans

        torch.backends.cuda.matmul.allow_tf32 = False
        start = torch.as_tensor(np.asarray(problem.initial_centroids, dtype=np.float32), device="cuda")
        model = KMeans(n_clusters=problem.k, max_iter=problem.iterations, tol=-1.0, mode="euclidean")
        torch.cuda.synchronize()
        phases: dict[str, float] = {}
        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start_event.record()
        model.fit_predict(self._x, centroids=start)
        end_event.record()
        end_event.synchronize()
        phases["iterate"] = start_event.elapsed_time(end_event) / 1000.0
        return Result(centroids=model.centroids.double().cpu().numpy(), iterations=problem.iterations,
                      phases=phases)

    def build_info(self) -> dict:
        from importlib.metadata import version

        return {"library": f"fast-pytorch-kmeans {version('fast-pytorch-kmeans')}",
                "torch": getattr(self, "_version", "?"), "precision": "fp32, tf32 off",
                "not_forced": "an empty cluster's centroid becomes 0; no label tolerance rule"}


class FlashKMeans(TorchLloyd):
    """flash-kmeans (the Flash-KMeans paper's package): its batched Triton Lloyd,
    `batch_kmeans_Euclid(x[None], k, max_iters, tol=-1, init_centroids=given[None])`, which
    runs exactly max_iters iterations (it stops on centroid shift < tol, never true for -1).
    With float32 input its `tl.dot` runs in TF32; the fp16 row hands it half-precision data
    and centroids. Its sums are float32; an empty cluster keeps its centroid."""

    name = "flash-kmeans"
    row_order = 190
    label = "flash-kmeans (fp32 input)"
    dtype = "tf32"  # tl.dot on float32 input: judged by TF32's bounds (kmbench.judge.precision)
    description = "flash_kmeans.batch_kmeans_Euclid(x, k, tol=-1, init_centroids=given); fp32 input, TF32 dots"
    source = "peer users pick (the embeddings issue): flash-kmeans, Triton"
    library = "flash_kmeans"
    install_hint = "flash-kmeans is not installed: pip install flash-kmeans"
    half = False

    def follows_tolerance(self, tol: float) -> bool:
        return False  # its tol watches centroid movement, not labels

    def prepare(self, problem: Problem) -> None:
        super().prepare(problem)
        if self.half:
            self._x = self._x.half()

    def run(self, problem: Problem) -> Result:
        import torch
        from flash_kmeans.kmeans_triton_impl import batch_kmeans_Euclid

        start = torch.as_tensor(np.asarray(problem.initial_centroids, dtype=np.float32), device="cuda")
        start = start.to(self._x.dtype)[None]
        torch.cuda.synchronize()
        region = CudaEventRegion()
        with region:
            _, centroids, done = batch_kmeans_Euclid(self._x[None], problem.k, max_iters=problem.iterations,
                                                     tol=-1.0, init_centroids=start)
        return Result(centroids=centroids[0].double().cpu().numpy(), iterations=int(done),
                      phases={"iterate": region.seconds()})

    def build_info(self) -> dict:
        from importlib.metadata import version

        return {"library": f"flash-kmeans {version('flash-kmeans')}", "torch": getattr(self, "_version", "?"),
                "precision": "fp16 data and dots, fp32 sums" if self.half else "fp32 input, tf32 dots, fp32 sums",
                "not_forced": "no label tolerance rule (it watches centroid shift)"}

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * problem.d * (2 if self.half else 4)

    def arithmetic(self, problem: Problem) -> tuple[str, float]:
        return ("fp16" if self.half else "tf32"), 2.0 * problem.d  # its tl.dot over every pair


class FlashKMeansHalf(FlashKMeans):
    name = "flash-kmeans-fp16"
    row_order = 200
    label = "flash-kmeans (fp16)"
    dtype = "float16"  # half-precision data and centroids, float32 sums
    description = "flash-kmeans on float16 data and centroids (its fastest documented precision)"
    half = True


class CumlKMeans(Implementation):
    name = "cuml"
    row_order = 220
    label = "cuML"
    description = "cuml.cluster.KMeans(init=given, n_init=1, max_iter, tol=0); untested on kmbench's GPU machine"
    source = "peer users pick (the Yinyang issue): RAPIDS cuML"
    dtype = "float32"
    on_gpus = "one"

    def available(self):
        try:
            import cuml  # noqa: F401
        except ImportError:
            return False, ("cuML is not installed (RAPIDS: pip install cuml-cu12 on a supported system); "
                           "this row is untested, as kmbench's GPU test machine cannot install cuML")
        return True, ""

    def prepare(self, problem: Problem) -> None:
        import cupy

        phases: dict[str, float] = {}
        with host_region(phases, "upload"):
            self._x = cupy.asarray(np.asarray(problem.data, dtype=np.float32))
            cupy.cuda.Device().synchronize()
        self._setup = phases

    def run(self, problem: Problem) -> Result:
        import cupy
        from cuml.cluster import KMeans

        start = cupy.asarray(np.asarray(problem.initial_centroids, dtype=np.float32))
        model = KMeans(n_clusters=problem.k, init=start, n_init=1, max_iter=problem.iterations, tol=0.0,
                       output_type="cupy")
        phases: dict[str, float] = {}
        region = CudaEventRegion()
        with region:
            model.fit(self._x)
        phases["iterate"] = region.seconds()
        return Result(centroids=cupy.asnumpy(model.cluster_centers_).astype(np.float64),
                      iterations=int(model.n_iter_), phases=phases)

    def release(self) -> None:
        self.__dict__.pop("_x", None)

    def setup_phases(self) -> dict[str, float]:
        return dict(getattr(self, "_setup", {}))

    def build_info(self) -> dict:
        import cuml

        return {"library": f"cuml {cuml.__version__}", "precision": "fp32"}
