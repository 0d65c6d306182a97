"""gemm (d > 32 without Triton, and the -tf32 row): scores X C^T by cuBLAS SGEMM per chunk of
GEMM_ROWS points (FP32; TF32 only in the -tf32 variant), highd.cu's warp-per-row argmin, sums
by a one-hot sparse product per chunk, chunks added in float64. Distances are expanded
(|c|^2/2 - x.c). Host-side sparse products: launched plainly, never captured in a graph."""

from __future__ import annotations

import numpy as np

from impls.gpu.kmbench_gpu.strategies.base import Strategy, source
from kmbench.protocol import Problem
from kmbench.protocol.ceilings import matmul_precision

GEMM_ROWS = 1 << 16  # rows of X per GEMM chunk: bounds the scores buffer to 65536 x k floats


class Gemm(Strategy):
    name = "gemm"
    graph = False

    @classmethod
    def memory(cls, problem: Problem) -> int:
        return super().memory(problem) + min(problem.n, GEMM_ROWS) * problem.k * 4 * 2  # scores, and a copy

    @property
    def precision(self) -> str:
        return "tf32 products, float64 sums" if self.tf32 else "fp32, float64 sums"

    def compile(self) -> None:
        import cupy

        module = cupy.RawModule(code=source("highd.cu"), options=("-std=c++17",))
        self.argmin = module.get_function("argmin_rows")

    def allocate(self, x, changed, labels: bool = True) -> None:
        """Labels (the sums are counted from them) and the float32 and float64 centroids."""
        import cupy

        super().allocate(x, changed, labels)
        self.labels = cupy.full(self.n, -1, dtype=cupy.int32)
        self.centroids = cupy.empty((self.k, self.d), dtype=cupy.float32)
        self.centroids64 = cupy.empty((self.k, self.d), dtype=cupy.float64)

    def start(self, start, track: bool) -> None:
        self.centroids64.set(start)
        self.centroids.set(start.astype(np.float32))
        if track:
            self.labels.fill(-1)

    def assign_chunks(self, track: bool):
        """Assign GEMM_ROWS points at a time (scores by cuBLAS SGEMM, in TF32 only inside
        `matmul_precision(True)`), writing self.labels; yield each chunk's rows and labels."""
        half = 0.5 * (self.centroids * self.centroids).sum(axis=1)
        for start in range(0, self.n, GEMM_ROWS):
            rows = self.x[start:start + GEMM_ROWS]
            scores = rows @ self.centroids.T
            m = rows.shape[0]
            labels = self.labels[start:start + m]
            self.argmin(((m + 7) // 8,), (256,),
                        (scores, half, np.int64(m), np.int32(self.k), labels, self.changed, np.int32(track)))
            yield rows, labels

    def labels_of(self):
        """The assignment from the current centroids (a copy; tracks nothing)."""
        import cupy

        for _ in self.assign_chunks(track=False):
            pass
        return cupy.array(self.labels)

    def iterate(self, track: bool, combine=None) -> None:
        """combine is not used: shards run the tensor path above d = 32 (pass_strategy)."""
        import cupy
        import cupyx.scipy.sparse as sparse

        d, k = self.d, self.k
        sums = cupy.zeros((k, d), dtype=cupy.float64)
        for rows, labels in self.assign_chunks(track):
            m = rows.shape[0]
            onehot = sparse.csr_matrix((cupy.ones(m, dtype=cupy.float32), (labels, cupy.arange(m))), shape=(k, m))
            sums += (onehot @ rows).astype(cupy.float64)  # chunk sums in float32, chunks in float64
        counts = cupy.bincount(self.labels, minlength=k).astype(cupy.float64)
        filled = counts > 0
        self.centroids64[filled] = sums[filled] / counts[filled, None]
        self.centroids[...] = self.centroids64.astype(cupy.float32)

    def after_run(self, problem: Problem, done: int) -> tuple[list[str], dict]:
        """The TF32 row: how many labels of the final centroids TF32 products change (untimed)."""
        if not self.tf32:
            return [], {}
        with matmul_precision(True):
            fast = self.labels_of()
        with matmul_precision(False):
            exact = self.labels_of()
        return [f"TF32 labels that differ from FP32 on the final centroids: {int((fast != exact).sum())} of "
                f"{problem.n}"], {}
