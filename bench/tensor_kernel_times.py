"""The tensor path's iteration kernel by kernel (bench/tensor_experiments.py breakdown,
candidates, passes, inputs, update, region): the certified pass (TF32 or fp16), the re-check and
the update timed with CUDA events, per setting, and a cell's timed region in parts."""

from __future__ import annotations

import sys

import numpy as np

from impls.gpu.kmbench_gpu import KmbenchGpu
from kmbench.protocol import runner
from kmbench.data.datasets import blobs
from tensor_cells import with_settings  # beside this script


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
        impl = with_settings(KMBENCH_TENSOR_RECHECK=recheck)
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
    d = 128, where hopper_wide.cu runs. The Hopper pass reads fp16 unless KMBENCH_TENSOR_INPUT=tf32
    is set for the process (`inputs` compares the two)."""
    _per_kernel("KMBENCH_TENSOR_PASS", ["triton", "hopper"],
                sys.argv[2] if len(sys.argv) > 2 else "300000,408,5000;1000000,768,4096")


def inputs() -> None:
    """The Hopper passes in TF32 against fp16 (KMBENCH_TENSOR_INPUT), each with the re-check its
    lists lead to, per kernel as `passes`; by default at the two shapes above d = 128."""
    _per_kernel("KMBENCH_TENSOR_INPUT", ["tf32", "fp16"],
                sys.argv[2] if len(sys.argv) > 2 else "300000,408,5000;1000000,768,4096")


def _per_kernel(variable: str, values: list[str], shapes: str) -> None:
    """Per kernel (TF32 pass, re-check, update), CUDA events, for each value of one variable set
    while the path is built, at shapes "n,d,k;...": the first iteration and the mean of the later
    ones, and how many points each list took."""
    for n, d, k in (tuple(int(v) for v in shape.split(",")) for shape in shapes.split(";")):
        problem = runner.make_problem(blobs(n, d=d, centers=k), runner.Settings(k=k, iterations=10))
        for value in values:
            impl = with_settings(**{variable: value})
            impl.use_graph = False
            impl.prepare(problem)
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
                                            (path.listed_counts, path.flagged_total, path.bound_max),
                                            path.never_moved)
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
