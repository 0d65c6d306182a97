"""The experiments behind the tensor-core path's section of impls/gpu/kmbench_gpu/NOTES.md (GPU machine),
run from the repository root with it on the path:

    python3 bench/tensor_experiments.py check     # small shapes, every cell validated
    python3 bench/tensor_experiments.py tilings   # 1e6 x 128, k = 1024: tilings of the
                                                  # TF32 pass, beside flash-kmeans
    python3 bench/tensor_experiments.py shapes    # the embeddings issue's five shapes
    python3 bench/tensor_experiments.py dense     # GPU rows on dense data, k in the hundreds
    python3 bench/tensor_experiments.py breakdown # per kernel, per iteration, each re-check
    python3 bench/tensor_experiments.py rechecks  # tilings of the re-check
    python3 bench/tensor_experiments.py wide      # tilings of the TF32 pass, d > 128
    python3 bench/tensor_experiments.py candidates [KEPT] [SHAPES]
                                                  # the re-check with candidates listed by the
                                                  # TF32 pass (KEPT: 1,0; SHAPES: n,d,k;...)
    python3 bench/tensor_experiments.py update    # the update's kernels one by one
    python3 bench/tensor_experiments.py hopper [SHAPES]
                                                  # hopper_pass.cu against Triton's pass, same
                                                  # centroids; then validated cells of both
    python3 bench/tensor_experiments.py epilogue [FORMS] [TILINGS]
                                                  # packed against slot epilogues, d <= 128
                                                  # (FORMS: slots,packed; TILINGS: M,N,D,warps,
                                                  # stages;... with D for d)
    python3 bench/tensor_experiments.py passes [SHAPES]
                                                  # Triton's pass against the Hopper pass with
                                                  # the re-checks they lead to, per kernel
    python3 bench/tensor_experiments.py region [SHAPES]
                                                  # a cell's timed region in parts: what runs
                                                  # before the iterations, the CUDA graph, and
                                                  # ten iterations back to back per kernel group

Tilings are set through KMBENCH_TENSOR_TILING in this process only; the benchmark itself is
`kmbench reproduce embeddings`."""

from __future__ import annotations

import os
import sys

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


def tilings() -> None:
    from impls.peers.gpu_libraries import FlashKMeans, FlashKMeansHalf

    data = blobs(1_000_000, d=128, centers=1024)
    chosen = ["128,64,128,8,3", "128,64,128,8,2", "64,64,128,4,3", "128,128,128,8,2", "64,128,128,4,2",
              "128,64,32,8,3"]
    impls = [(f"{tiling} tf32x3", _with_tiling(tiling, "tf32x3")) for tiling in chosen]
    impls.append(("128,64,128,8,3 ieee", _with_tiling("128,64,128,8,3", "ieee")))
    impls += [("flash-kmeans", FlashKMeans()), ("flash-kmeans-fp16", FlashKMeansHalf())]
    for tag, record in cells(impls, data, 1024, 10):
        show(f"1e6x128 k=1024 {tag}", record)


class _with_settings(KmbenchGpu):
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


def _with_tiling(tiling: str, recheck: str = "ieee") -> _with_settings:
    """kmbench-gpu whose TF32 pass uses one tiling and one re-check precision."""
    return _with_settings(KMBENCH_TENSOR_TILING=tiling, KMBENCH_TENSOR_RECHECK=recheck)


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


def _timed_iteration(path) -> list:
    """One iteration of a TensorPath, timed with CUDA events: TF32 pass, re-check and update
    (us), then the points the scan and the candidate lists took."""
    import cupy

    events = [cupy.cuda.Event() for _ in range(4)]
    events[0].record()
    path.certify()
    events[1].record()
    path.recheck_flagged()
    events[2].record()
    scanned, listed = (int(v) for v in path.listed_counts.get())
    events[2].synchronize()
    events[2].record()
    path.update(track=False)
    events[3].record()
    events[3].synchronize()
    return [cupy.cuda.get_elapsed_time(events[i], events[i + 1]) * 1e3 for i in (0, 1, 2)] + [scanned, listed]


def breakdown() -> None:
    """Per kernel, per iteration, at 1e6 x 128, k = 1024: the TF32 pass, the re-check (each
    precision) and the update, timed with CUDA events; points re-checked per iteration."""
    from impls.gpu.kmbench_gpu.tensor_path import RECHECKS

    settings = runner.Settings(k=1024, iterations=10)
    problem = runner.make_problem(blobs(1_000_000, d=128, centers=1024), settings)
    for recheck in RECHECKS:
        os.environ["KMBENCH_TENSOR_RECHECK"] = recheck
        impl = KmbenchGpu(force_strategy="tensor")
        impl.use_graph = False
        impl.prepare(problem)
        path = impl._chosen.path  # the tensor strategy's TensorPath
        path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
        for iteration in range(8):
            times = _timed_iteration(path)
            flagged = times[3] + times[4]
            print(f"{recheck:7s} iteration {iteration}: tf32 pass {times[0]:8.1f} us, re-check {times[1]:8.1f} us "
                  f"({flagged} points, {flagged / problem.n:.2%}), update {times[2]:8.1f} us", flush=True)
        impl.release()
        os.environ.pop("KMBENCH_TENSOR_RECHECK")


def _pass_times(problem, setting: str, value: str, iterations: int = 6) -> tuple[float, float, float]:
    """Mean TF32-pass and re-check times (us) over the iterations after the third, and the
    first iteration's re-check, with one tiling variable set while the path is built."""
    import cupy

    os.environ[setting] = value
    try:
        impl = KmbenchGpu(force_strategy="tensor")
        impl.use_graph = False
        impl.prepare(problem)
    finally:
        os.environ.pop(setting, None)
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


def candidates() -> None:
    """The re-check against each uncertain point's candidates, found from what the TF32 pass left
    (one FP32 dot product each, recheck.cu), against the scan of every tile that holds one (KEPT
    0), by default at the three shapes where rows stay on chip: per kernel, CUDA events, and how
    many points each list took, the first iteration and the mean of the later ones."""
    _per_kernel("KMBENCH_TENSOR_CANDIDATES", sys.argv[2].split(",") if len(sys.argv) > 2 else ["1", "0"],
                sys.argv[3] if len(sys.argv) > 3 else "1000000,128,1024;1000000,64,1000;10000000,128,4096")


def passes() -> None:
    """Triton's TF32 pass against the hand-written Hopper pass (KMBENCH_TENSOR_PASS), each with
    the re-check its lists lead to, per kernel as `candidates`; by default at the two shapes above
    d = 128, where hopper_wide.cu runs."""
    _per_kernel("KMBENCH_TENSOR_PASS", ["triton", "hopper"],
                sys.argv[2] if len(sys.argv) > 2 else "300000,408,5000;1000000,768,4096")


def _per_kernel(variable: str, values: list[str], shapes: str) -> None:
    """Per kernel (TF32 pass, re-check, update), CUDA events, for each value of one variable set
    while the path is built, at shapes "n,d,k;...": the first iteration and the mean of the later
    ones, and how many points each list took."""
    for n, d, k in (tuple(int(v) for v in shape.split(",")) for shape in shapes.split(";")):
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        for value in values:
            os.environ[variable] = value
            try:
                impl = KmbenchGpu(force_strategy="tensor")
                impl.use_graph = False
                impl.prepare(problem)
            finally:
                os.environ.pop(variable)
            path = impl._chosen.path  # the tensor strategy's TensorPath
            path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
            rows = [_timed_iteration(path) for _ in range(7)]
            print(f"{n}x{d} k={k} {variable}={value}: {path.tf32_pass}", flush=True)
            impl.release()
            for label, times in (("first", rows[0]), ("later", np.mean(rows[3:], axis=0))):
                print(f"{n}x{d} k={k} {variable}={value}: {label} pass {times[0]:8.1f} us, re-check "
                      f"{times[1]:8.1f} us, update {times[2]:8.1f} us; scanned {times[3]:9.0f}, "
                      f"by candidates {times[4]:9.0f}", flush=True)


def update() -> None:
    """The update's kernels one by one (CUDA events, steady iterations) at the shapes of 1e6
    points and at 1e7 x 128, beside the time to read the points once at 3 TB/s; each ordering
    of the points (update.SCATTER: "block" and "warp") in turn."""
    import cupy

    from impls.gpu.kmbench_gpu import update as update_stage  # this function is `update`

    for n, d, k in ((1_000_000, 128, 1024), (1_000_000, 64, 1000), (10_000_000, 128, 4096), (1_000_000, 768, 4096)):
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        impl = KmbenchGpu(force_strategy="tensor")
        impl.use_graph = False
        impl.prepare(problem)
        path = impl._chosen.path  # the tensor strategy's TensorPath
        path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
        for scatter in ("block", "warp"):
            update_stage.SCATTER = scatter
            steps = path.sort_and_sum_steps(False, path.previous, "scan",
                                            (path.listed_counts, path.flagged_total, path.bound_max))
            steps.append(("finish", lambda: path._finish(path.counts)))
            events = [cupy.cuda.Event() for _ in range(len(steps) + 1)]
            times = []
            for _ in range(6):
                path.assign()
                for event, (_, step) in zip(events, steps):
                    event.record()
                    step()
                events[-1].record()
                events[-1].synchronize()
                times.append([cupy.cuda.get_elapsed_time(events[i], events[i + 1]) * 1e3 for i in range(len(steps))])
            mean = np.mean(times[2:], axis=0)
            parts = " ".join(f"{name} {value:7.1f}" for (name, _), value in zip(steps, mean))
            print(f"{n}x{d} k={k}: {parts} us (total {mean.sum():7.1f}); points read once at 3 TB/s "
                  f"{n * d * 4 / 3e12 * 1e6:7.1f} us", flush=True)
        update_stage.SCATTER = "block"
        impl.release()


def _uncertain(path) -> tuple[np.ndarray, dict]:
    """The rows the last pass listed (either list), and each short-listed row's candidates."""
    scanned, listed = (int(v) for v in path.listed_counts.get())
    rows = path.candidate_rows[:listed].get()
    index = path.candidate_index[:listed * max(1, path.candidates)].get().reshape(listed, max(1, path.candidates))
    sizes = path.candidate_sizes[:listed].get()
    lists = {int(row): tuple(sorted(index[i, :sizes[i]])) for i, row in enumerate(rows)}
    return np.concatenate([path.flagged[:scanned].get(), rows]), lists


def _one_pass(path, which: str) -> tuple[float, np.ndarray, np.ndarray, dict]:
    """One TF32 pass by `which` ("triton" or "hopper") on the path's current centroids: its time
    (us, CUDA events), labels, listed rows and candidate lists."""
    import cupy

    hopper = path._hopper
    if which == "triton":
        path._hopper = None
    path.listed_counts.fill(0)
    events = [cupy.cuda.Event() for _ in range(2)]
    events[0].record()
    path.certify()
    events[1].record()
    events[1].synchronize()
    path._hopper = hopper
    listed, lists = _uncertain(path)
    return cupy.cuda.get_elapsed_time(events[0], events[1]) * 1e3, path.labels.get(), listed, lists


def hopper() -> None:
    """The hand-written Hopper pass (hopper_pass.cu) against Triton's certified_assign on the same
    centroids, iteration by iteration: time per pass, and whether they agree (labels of rows
    neither lists, how many each lists, the candidate lists of rows both short-list); then
    validated cells of both."""
    shapes = ([tuple(int(v) for v in shape.split(",")) for shape in sys.argv[2].split(";")] if len(sys.argv) > 2
              else [(1_000_000, 128, 1024), (1_000_000, 64, 1000), (10_000_000, 128, 4096)])
    for n, d, k in shapes:
        settings = runner.Settings(k=k, iterations=10)
        problem = runner.make_problem(blobs(n, d=d, centers=k), settings)
        impl = KmbenchGpu(force_strategy="tensor")
        impl.use_graph = False
        impl.prepare(problem)
        path = impl._chosen.path  # the tensor strategy's TensorPath
        print(f"{n}x{d} k={k}: {path.tf32_pass}", flush=True)
        if path._hopper is None or path._hopper.wide:  # hopper_wide.cu's tiling is not Triton's: see `passes`
            impl.release()
            continue
        path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
        from impls.gpu.kmbench_gpu import hopper_pass

        # Where the pass runs three consumer warpgroups, the same with two (above d = 64 three do not
        # fit the registers, and there is nothing to compare).
        default, variant = path._hopper, None
        if default.groups == 3:
            limit, hopper_pass.THREE_GROUPS_UP_TO = hopper_pass.THREE_GROUPS_UP_TO, 0
            variant = hopper_pass.HopperPass(d, k)
            hopper_pass.THREE_GROUPS_UP_TO = limit
        label = "hopper, 2 consumer warpgroups"
        times = {"triton": [], "hopper": []} | ({label: []} if variant else {})
        for iteration in range(6):
            seen = {which: _one_pass(path, which) for which in ("triton", "hopper")}
            compared = ""
            if variant:
                path._hopper = variant
                varied = _one_pass(path, "hopper")
                path._hopper = default
                times[label].append(varied[0])
                compared = (f"; 2 warpgroups change {int(np.count_nonzero(varied[1] != seen['hopper'][1]))} labels and "
                            f"{len(set(varied[2].tolist()) ^ set(seen['hopper'][2].tolist()))} listed rows")
            for which in seen:
                times[which].append(seen[which][0])
            (_, labels_t, listed_t, lists_t), (_, labels_h, listed_h, lists_h) = seen["triton"], seen["hopper"]
            sure = np.ones(n, bool)
            sure[listed_t] = sure[listed_h] = False
            both = set(lists_t) & set(lists_h)
            print(f"  iteration {iteration}: triton {seen['triton'][0]:8.1f} us, hopper {seen['hopper'][0]:8.1f} us; "
                  f"listed {len(listed_t)} / {len(listed_h)} (distinct rows {len(set(listed_h.tolist()))}); "
                  f"labels differ on {int(np.count_nonzero(labels_t[sure] != labels_h[sure]))} of {int(sure.sum())} "
                  f"certified by both; candidate lists differ on {sum(lists_t[r] != lists_h[r] for r in both)} "
                  f"of {len(both)}{compared}", flush=True)
            path.recheck_flagged()
            path.update(track=False)
        for which, values in times.items():
            print(f"  {which}: {np.mean(values[2:]):8.1f} us per pass (iterations 2-5)", flush=True)
        impl.release()
        data = blobs(min(n, 200_000), d=d, centers=k)
        for tag, record in cells([(which, _with_settings(KMBENCH_TENSOR_PASS=which)) for which in ("hopper", "triton")],
                                 data, k, 10, 1):
            show(f"{data.name} k={k} {tag}", record)


def region() -> None:
    """The timed region of a cell as kmbench runs it, in parts (CUDA events): what runs before
    the iterations (the renumbering), the graph of ten iterations; then ten iterations launched
    back to back, split into the TF32 pass, the re-check and the update."""
    import time

    import cupy

    shapes = sys.argv[2] if len(sys.argv) > 2 else "1000000,64,1000;1000000,128,1024"
    for shape in shapes.split(";"):
        n, d, k = (int(v) for v in shape.split(","))
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        impl = KmbenchGpu()
        impl.prepare(problem)
        impl.run(problem)  # warm-up, as the harness does
        chosen, start = impl._chosen, np.asarray(problem.initial_centroids, np.float64) - impl._shift
        events = [cupy.cuda.Event() for _ in range(31)]
        for _ in range(3):
            chosen.start(start, False)
            cupy.cuda.Device().synchronize()
            stream = impl._stream  # the graph's capture stream
            with stream:
                began = time.perf_counter()
                events[0].record(stream)
                chosen.before_iterations()
                events[1].record(stream)
                host = time.perf_counter() - began
                impl._graph.launch(stream)
                events[2].record(stream)
                events[2].synchronize()
            before, graph = (cupy.cuda.get_elapsed_time(events[i], events[i + 1]) for i in (0, 1))
            print(f"{n}x{d} k={k}: before the iterations {before:.3f} ms (host {host * 1e3:.3f}), graph {graph:.3f} "
                  f"ms ({graph / 10:.3f} an iteration)", flush=True)
        path = chosen.path
        chosen.start(start, False)
        cupy.cuda.Device().synchronize()
        for i in range(10):
            for j, step in enumerate((path.certify, path.recheck_flagged, lambda: path.update(track=False))):
                events[3 * i + j].record()
                step()
        events[30].record()
        events[30].synchronize()
        parts = np.array([cupy.cuda.get_elapsed_time(events[j], events[j + 1]) for j in range(30)]).reshape(10, 3) * 1e3
        later = parts[1:].mean(axis=0)
        print(f"{n}x{d} k={k}: back to back, iterations 2-10: pass {later[0]:.1f} us, re-check {later[1]:.1f} us, "
              f"update {later[2]:.1f} us; the first {parts[0].round(1).tolist()}", flush=True)
        impl.release()


if __name__ == "__main__":
    {"check": check, "tilings": tilings, "shapes": shapes, "dense": dense_rows, "breakdown": breakdown,
     "rechecks": rechecks, "wide": wide, "epilogue": epilogue, "candidates": candidates, "update": update,
     "hopper": hopper, "passes": passes, "region": region}[sys.argv[1]]()
