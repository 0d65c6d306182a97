"""Validated cells of kmbench-gpu's tensor path (bench/tensor_experiments.py check, shapes, dense):
every cell checked against the oracle, beside flash-kmeans and the other GPU rows; and the
helpers the other tensor experiments share: cells on one problem, dense data, kmbench-gpu with
KMBENCH_TENSOR_* variables set while it prepares."""

from __future__ import annotations

import os

import numpy as np

from kmbench_gpu_experiments import show  # beside this script
from impls.gpu.kmbench_gpu import KmbenchGpu
from kmbench.protocol import runner, validate
from kmbench.data.datasets import Dataset, blobs


def cells(impls, dataset, k: int, iterations: int, repeats: int = 3, tol=None):
    """Validated cells of several implementations on one problem, one oracle for all."""
    settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=repeats,
                               stop="iterations" if tol is None else "tolerance", tol=tol or 0.0)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations, tol=problem.tol)
    for tag, impl in impls:
        yield tag, runner.run_cell(impl, problem, oracle, dataset, settings, "gpu")


def dense(n: int, d: int, offset: float = 0.0, seed: int = 0) -> Dataset:
    """Points with no cluster structure: many near-ties once k is in the hundreds."""
    data = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32) + np.float32(offset)
    return Dataset(f"dense-{n}x{d}", data, None, {"generator": "dense"})


def check() -> None:
    for n, d, k, centers, offset, tol in ((20_000, 33, 7, 7, 0.0, None), (50_000, 64, 100, 100, 1e4, None),
                                          (30_000, 100, 1000, 50, 0.0, 0.0), (20_000, 408, 300, 300, 0.0, None),
                                          (10_000, 1000, 17, 17, 0.0, None), (4_000, 17, 1, 1, 0.0, None)):
        data = blobs(n, d=d, centers=centers)
        if offset:
            data = Dataset(data.name + "+off", data.data + np.float32(offset), None, data.meta)
        for tag, record in cells([("kmbench-gpu", KmbenchGpu(force_strategy="tensor"))], data, k, 10, 1, tol):
            show(f"{n}x{d} k={k} off={offset} tol={tol} {tag}", record)
    for n, d, k in ((50_000, 64, 500), (40_000, 128, 2000)):
        for tag, record in cells([("kmbench-gpu", KmbenchGpu(force_strategy="tensor")),
                                  ("kmbench-gpu gemm", KmbenchGpu(force_strategy="gemm"))],
                                 dense(n, d, offset=100.0), k, 10, 1):
            show(f"dense {n}x{d} k={k} {tag}", record)


class with_settings(KmbenchGpu):
    """kmbench-gpu on the tensor path with some KMBENCH_TENSOR_* variables set while it prepares,
    which is when the tensor path reads them."""

    def __init__(self, **settings: str):
        super().__init__(force_strategy="tensor")
        self.settings = settings

    def prepare(self, problem):
        os.environ.update(self.settings)
        try:
            super().prepare(problem)
        finally:
            for name in self.settings:
                os.environ.pop(name, None)


def with_tiling(tiling: str, recheck: str = "ieee") -> with_settings:
    """kmbench-gpu whose TF32 pass uses one tiling and one re-check precision."""
    return with_settings(KMBENCH_TENSOR_TILING=tiling, KMBENCH_TENSOR_RECHECK=recheck)


def shapes() -> None:
    from impls.peers.gpu_libraries import FlashKMeans, FlashKMeansHalf

    for n, d, k, iterations in ((1_000_000, 128, 1024, 10), (1_000_000, 64, 1000, 10), (300_000, 408, 5000, 5),
                                (10_000_000, 128, 4096, 3), (1_000_000, 768, 4096, 3)):
        data = blobs(n, d=d, centers=k)
        impls = [("kmbench-gpu", KmbenchGpu()), ("flash-kmeans", FlashKMeans()),
                 ("flash-kmeans-fp16", FlashKMeansHalf())]
        for tag, record in cells(impls, data, k, iterations, repeats=2):
            show(f"{n}x{d} k={k} {tag}", record)


def dense_rows() -> None:
    """The embeddings issue's correctness item: GPU rows on dense data, k in the hundreds."""
    from impls.gpu.cuda import CudaV3
    from impls.gpu.triton_fused import TritonFused
    from impls.gpu.yinyang import YinyangGpu

    for seed, (n, d, k, offset) in enumerate(((100_000, 2, 500, 0.0), (100_000, 2, 1000, 100.0),
                                              (50_000, 16, 300, 0.0), (50_000, 64, 1000, 50.0))):
        rows = [("kmbench-gpu", KmbenchGpu()), ("triton-fused", TritonFused()), ("yinyang-gpu", YinyangGpu())]
        if d == 2:
            rows.append(("cuda-v3", CudaV3()))
        for tag, record in cells(rows, dense(n, d, offset, seed), k, 20, 1):
            show(f"dense {n}x{d} k={k} off={offset} {tag}", record)
            v = record.get("validation") or {}
            print(f"     error {v.get('centroid_error')} tol {v.get('tolerances')} sens {v.get('sensitivity')}")
