"""flash-kmeans's own multi-GPU mode, a peer of the scaling plan's multi-GPU rows (issue 49).

flash-kmeans 0.3 adds it to `flash_kmeans.kmeans_large.kmeans_largeN(x, k, max_iters, tol,
init_centroids=..., device=None)`, its function for points too many for one GPU: the points stay
in host memory and every iteration streams them through the GPUs, blocks of 2^20 points split
into one contiguous run per GPU; each GPU sums its run in float32, the partial sums are gathered
on the first GPU, added there and the new centroids broadcast back (one process, peer copies,
no NCCL). So unlike kmbench-gpu-dask, whose shards stay on their GPUs, every iteration moves
the whole data over the host links: its peer on one GPU is kmbench-gpu-stream.

The API allows a row that follows the protocol: the harness's centroids go in as
init_centroids; tol=-1 runs exactly max_iters iterations (it stops on centroid shift < tol,
never true then), so under the tolerance rule it is handed the reference's count. Its GPUs are
`device`: one GPU ("cuda:N"), or None for every visible one. A set of some but not all visible
GPUs cannot be named through the API (its own GPU-scaling script patches a private function);
that cell is an error that says so. With several GPUs the call ends by copying every label to
newly pinned host memory, inside the library: part of its time, as the record notes.
"""

from __future__ import annotations

import inspect
import warnings
from contextlib import contextmanager

import numpy as np

from impls.peers.gpu_libraries import FlashKMeans
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem, Result
from kmbench.protocol.timing import host_region


def device_argument(gpus: str | None, visible: int):
    """kmeans_largeN's `device` for a GPU set ("0", "0,1"; None: every visible GPU)."""
    if gpus is None:
        return None
    chosen = sorted(int(number) for number in gpus.split(","))
    if len(chosen) == 1:
        return f"cuda:{chosen[0]}"
    if chosen == list(range(visible)):
        return None
    raise ImplementationError(f"flash-kmeans's multi-GPU mode runs on one GPU or on every visible one ({visible}); "
                              f"GPUs {gpus} cannot be named through its API (set CUDA_VISIBLE_DEVICES={gpus})")


# kmeans_largeN warns, on several GPUs, when PyTorch does not see the host array as pinned (the
# plan's points are registered through CuPy, which it cannot see): a UserWarning that landed in
# the console mid-table. It is kept as the cell's note instead (pinning_note).
PINNED_WARNING = "x is not in pinned memory"


@contextmanager
def pinning_warning_kept_quiet():
    """kmeans_largeN's pinned-memory warning left out of the console; every other warning shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=PINNED_WARNING, category=UserWarning)
        yield


def pinning_note(gpus: int, pinned: bool) -> list[str]:
    """The note of a run whose copies could not overlap its compute, where kmeans_largeN warns of it."""
    if gpus > 1 and not pinned:
        return ["kmeans_largeN saw the points as not pinned (x.is_pinned() is False): its host-to-device "
                "copies do not overlap its compute, as it warns"]
    return []


class FlashKMeansMultiGpu(FlashKMeans):
    name = "flash-kmeans-multi-gpu"
    row_order = 255  # beside the Dask GPU rows, the other multi-GPU rows
    label = "flash-kmeans multi-GPU (kmeans_largeN)"
    description = ("flash_kmeans.kmeans_largeN(x in host memory, k, tol=-1, init_centroids=given, device=the GPUs): "
                   "points streamed through every GPU each iteration; fp32 input, TF32 dots, float32 sums")
    source = "peer users pick (issue 49): flash-kmeans 0.3's multi-GPU mode"
    install_hint = "flash-kmeans is not installed: pip install 'flash-kmeans>=0.3'"
    on_gpus = "several"

    def available(self):
        ready, why = super().available()
        if not ready:
            return ready, why
        from flash_kmeans import kmeans_large

        if "device" not in inspect.signature(kmeans_large.kmeans_largeN).parameters:
            return False, "this flash-kmeans has no multi-GPU mode (kmeans_largeN's device): pip install 'flash-kmeans>=0.3'"
        return True, ""

    def prepare(self, problem: Problem) -> None:
        import torch

        self._device = device_argument(problem.options.gpus, torch.cuda.device_count())
        self._gpus = 1 if self._device else torch.cuda.device_count()
        # The host array itself, no copy: the plan's points are pinned where they lie. The harness
        # hands them read-only, and PyTorch warns that a tensor over them could write: the library
        # only reads x, so that warning (once per process, in the middle of run's table) is noise.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
            self._x = torch.from_numpy(np.ascontiguousarray(problem.data, dtype=np.float32))
        self._version = torch.__version__

    def run(self, problem: Problem) -> Result:
        import torch
        from flash_kmeans.kmeans_large import kmeans_largeN

        start = torch.as_tensor(np.asarray(problem.initial_centroids, dtype=np.float32))
        phases: dict[str, float] = {}
        # Several GPUs: no one device's events span the call, so the host clock times it.
        with host_region(phases, "iterate"), pinning_warning_kept_quiet():
            _, centroids = kmeans_largeN(self._x, problem.k, max_iters=problem.iterations, tol=-1.0,
                                         init_centroids=start, device=self._device)
            for gpu in range(torch.cuda.device_count()):
                torch.cuda.synchronize(gpu)
        return Result(centroids=centroids.double().cpu().numpy(), iterations=problem.iterations, phases=phases,
                      notes=pinning_note(self._gpus, self._x.is_pinned()))

    def release(self) -> None:
        self.__dict__.pop("_x", None)  # the host array stays the plan's

    def build_info(self) -> dict:
        return {**super().build_info(), "workers": getattr(self, "_gpus", None),
                "device": getattr(self, "_device", None) or "every visible GPU",
                "timed": "host clock around kmeans_largeN; with several GPUs it ends by copying every label to "
                         "newly pinned host memory"}

    def bytes_per_iteration(self, problem: Problem) -> int:
        return problem.n * problem.d * 4  # every point over a host link once per iteration
