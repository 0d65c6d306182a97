"""Tilings of the tensor path's kernels (bench/tensor_experiments.py tilings, rechecks, wide,
epilogue): the TF32 pass and the re-check at several tilings and epilogues, timed with CUDA
events (tilings: validated cells beside flash-kmeans)."""

from __future__ import annotations

import sys

import numpy as np

from kmbench_gpu_experiments import show  # beside this script
from tensor_cells import cells, with_settings, with_tiling  # beside this script
from kmbench.protocol import runner
from kmbench.data.datasets import blobs


def tilings() -> None:
    from impls.peers.gpu_libraries import FlashKMeans, FlashKMeansHalf

    data = blobs(1_000_000, d=128, centers=1024)
    chosen = ["128,64,128,8,3", "128,64,128,8,2", "64,64,128,4,3", "128,128,128,8,2", "64,128,128,4,2",
              "128,64,32,8,3"]
    impls = [(f"{tiling} tf32x3", with_tiling(tiling, "tf32x3")) for tiling in chosen]
    impls.append(("128,64,128,8,3 ieee", with_tiling("128,64,128,8,3", "ieee")))
    impls += [("flash-kmeans", FlashKMeans()), ("flash-kmeans-fp16", FlashKMeansHalf())]
    for tag, record in cells(impls, data, 1024, 10):
        show(f"1e6x128 k=1024 {tag}", record)


def _pass_times(problem, setting: str, value: str, iterations: int = 6) -> tuple[float, float, float]:
    """Mean TF32-pass and re-check times (us) over the iterations after the third, and the
    first iteration's re-check, with one tiling variable set while the path is built."""
    import cupy

    impl = with_settings(**{setting: value})
    impl.use_graph = False
    impl.prepare(problem)
    path = impl._chosen.path  # the tensor strategy's TensorPath
    path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
    events = [cupy.cuda.Event() for _ in range(3)]
    passes, rechecks = [], []
    for _ in range(iterations):
        events[0].record()
        path.certify()
        events[1].record()
        path.recheck_flagged()
        events[2].record()
        events[2].synchronize()
        passes.append(cupy.cuda.get_elapsed_time(events[0], events[1]) * 1e3)
        rechecks.append(cupy.cuda.get_elapsed_time(events[1], events[2]) * 1e3)
        path.update(track=False)
    impl.release()
    later = min(3, iterations - 1)
    return float(np.mean(passes[later:])), float(np.mean(rechecks[later:])), rechecks[0]


def rechecks() -> None:
    """The re-check's time per iteration for several exact_assign tilings, at 1e6 x 128,
    300k x 408 and 1e6 x 768 (blobs, one centre per cluster)."""
    choices = ("64,64,32,4,2", "64,128,32,4,3", "128,128,32,8,3", "128,64,32,8,3", "64,64,64,4,2")
    for n, d, k in ((1_000_000, 128, 1024), (300_000, 408, 5000), (1_000_000, 768, 4096)):
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        for tiling in choices:
            try:
                _, recheck, first = _pass_times(problem, "KMBENCH_TENSOR_EXACT_TILING", tiling, 6)
            except Exception as error:  # a tiling may not fit: say so and go on
                print(f"{n}x{d} k={k} exact tiling {tiling:14s}: {type(error).__name__}: {str(error)[:120]}")
                continue
            print(f"{n}x{d} k={k} exact tiling {tiling:14s}: re-check {recheck:8.1f} us "
                  f"(first iteration {first:8.1f} us)", flush=True)


def wide() -> None:
    """The TF32 pass's tilings where rows are streamed (d > 128): 300k x 408, k = 5000 and
    1e6 x 768, k = 4096 (blobs)."""
    choices = ("128,64,32,8,3", "128,128,32,8,3", "128,128,64,8,3", "128,256,32,8,3", "256,128,32,8,3",
               "128,128,32,4,4", "64,128,32,4,3")
    for n, d, k in ((300_000, 408, 5000), (1_000_000, 768, 4096)):
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        for tiling in choices:
            try:
                tf32, recheck, _ = _pass_times(problem, "KMBENCH_TENSOR_TILING", tiling, 4)
            except Exception as error:  # a tiling may not fit: say so and go on
                print(f"{n}x{d} k={k} tiling {tiling:14s}: {type(error).__name__}: {str(error)[:120]}", flush=True)
                continue
            print(f"{n}x{d} k={k} tiling {tiling:14s}: tf32 pass {tf32:9.1f} us, re-check {recheck:9.1f} us",
                  flush=True)


def epilogue() -> None:
    """The TF32 pass's two epilogues where rows stay on chip (tensor_settings.EPILOGUE: tile
    numbers packed into the scores, or a compare and three selects per score), at a few
    tilings, at 1e6 x 128, k = 1024, 1e6 x 64, k = 1000 and 1e7 x 128, k = 4096 (blobs)."""
    from impls.gpu.kmbench_gpu import tensor_settings

    forms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["slots", "packed"]
    tilings = sys.argv[3].split(";") if len(sys.argv) > 3 else ["128,64,D,8,3", "128,128,D,8,3", "64,128,D,4,3",
                                                                  "128,64,D,4,3", "64,64,D,4,3"]
    for n, d, k in ((1_000_000, 128, 1024), (1_000_000, 64, 1000), (10_000_000, 128, 4096)):
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        for tiling in (choice.replace("D", str(d)) for choice in tilings):
            for form in forms:
                tensor_settings.EPILOGUE = form
                try:
                    tf32, recheck, first = _pass_times(problem, "KMBENCH_TENSOR_TILING", tiling, 6)
                except Exception as error:  # a tiling may not fit: say so and go on
                    print(f"{n}x{d} k={k} {form:6s} {tiling:14s}: {type(error).__name__}: {str(error)[:120]}",
                          flush=True)
                    continue
                print(f"{n}x{d} k={k} {form:6s} {tiling:14s}: tf32 pass {tf32:9.1f} us, re-check {recheck:9.1f} us "
                      f"(first {first:9.1f} us)", flush=True)
    tensor_settings.EPILOGUE = "packed"
