"""The hand-written Hopper pass against Triton's certified_assign (bench/tensor_experiments.py
hopper): the same centroids, iteration by iteration, pass by pass; then validated cells of both."""

from __future__ import annotations

import sys

import numpy as np

from kmbench_gpu_experiments import show  # beside this script
from tensor_cells import cells, with_settings  # beside this script
from impls.gpu.kmbench_gpu import KmbenchGpu
from kmbench.protocol import runner
from kmbench.data.datasets import blobs


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

        # Where the pass runs three consumer warpgroups, the same with two (above d = 64, 128 in fp16,
        # three do not fit the registers, and there is nothing to compare).
        default, variant = path._hopper, None
        if default.groups == 3:
            limit, hopper_pass.THREE_GROUPS_UP_TO = hopper_pass.THREE_GROUPS_UP_TO, 0
            variant = hopper_pass.HopperPass(d, k, default.half)
            variant.load_rows(path, n)  # its own copy of the rows as it reads them (fp16: the pass keeps them)
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
        for tag, record in cells([(which, with_settings(KMBENCH_TENSOR_PASS=which)) for which in ("hopper", "triton")],
                                 data, k, 10, 1):
            show(f"{data.name} k={k} {tag}", record)
