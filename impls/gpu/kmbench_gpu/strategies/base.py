"""What the kmbench-gpu adapter asks of a strategy, and the answers most strategies share.

A strategy is one way of running Lloyd iterations on the GPU (one module each beside this
one). The adapter (impls/gpu/kmbench_gpu/__init__.py) asks the class what a problem needs before
anything is allocated (`limits`, `memory`, and for the judge and the roofline
`distance_form` and `fp32_per_distance`), then makes one instance per prepared problem and
calls only the methods below: it never branches on which strategy it holds.
"""

from __future__ import annotations

from pathlib import Path

from kmbench.errors import ImplementationError
from kmbench.protocol import Problem

# The CUDA sources sit beside the adapter (impls/gpu/kmbench_gpu/*.cu, *.cuh), where package data and the nvcc
# tests find them; read at compile time, so an experiment may point this at edited copies.
SOURCES = Path(__file__).resolve().parents[1]
BLOCK = 256  # threads per block of lowd.cu's kernels (its BLOCK)
BLOCKS_PER_SM = 8


def source(name: str) -> str:
    """A kernel source's text for NVRTC, its local headers (lowd_prune.cuh, say) pasted in."""
    from impls.gpu.cuda.sources import with_local_includes

    return with_local_includes(SOURCES / name)


def multiprocessors() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["multiProcessorCount"]


def blocks(n: int, per_block: int, most: int) -> int:
    """Enough blocks of `per_block` points for n, at most `most` (a grid-stride loop does the rest)."""
    return int(max(1, min((n + per_block - 1) // per_block, most)))


class Strategy:
    name = ""
    max_dim: int | None = None  # the largest d its kernels are compiled for (None: any)
    whole_run = False  # one launch runs every iteration and decides the stop itself (`run`)
    graph = True  # its iterations can be captured into one CUDA graph
    launch: str | None = None  # the record's launch, where not the adapter's graph or stream
    block_size = BLOCK
    points: int | None = None  # points per thread, as the record reports them
    distance = "expanded"  # how an assignment compares a point with the centroids (the record)
    precision = "fp32, float64 sums"

    # ------------------------------------------------------------------ asked of a problem

    @classmethod
    def limits(cls, problem: Problem) -> None:
        """Refuse a problem outside what the kernels handle, before anything is allocated."""
        if cls.max_dim is not None and problem.d > cls.max_dim:
            raise ImplementationError(f"strategy {cls.name} handles d <= {cls.max_dim}; got d = {problem.d}")

    @classmethod
    def memory(cls, problem: Problem) -> int:
        """GPU bytes it needs: the points, labels and the k x d float32 and float64 buffers."""
        return problem.n * problem.d * 4 + problem.n * 4 + problem.k * problem.d * 24

    @classmethod
    def distance_form(cls, problem: Problem) -> str:
        """How the judge may hold its distances: "direct" where every one is |x - c|^2 computed
        as such (rounded at the size of the distance), else "any"."""
        return "direct" if cls.distance == "direct" else "any"

    @classmethod
    def fp32_per_distance(cls, problem: Problem) -> float | None:
        if cls.distance == "direct":
            return 2 * problem.d + 1  # d subtractions, d FMAs, the compare
        return problem.d + 1  # d FMAs, the compare

    @classmethod
    def arithmetic(cls, problem: Problem) -> tuple[str, float] | None:
        """The record's compute floor: FP32 instructions per distance, unless a strategy's
        distances are tensor-core products; None where the distances computed depend on the data."""
        per_distance = cls.fp32_per_distance(problem)
        return ("fp32", per_distance) if per_distance else None

    # ------------------------------------------------------------------ one prepared problem

    def __init__(self, d: int, k: int, tf32: bool = False, order: bool = True):
        """tf32: matrix products in TF32 (the -tf32 row); order: renumber the centroids by
        neighbourhood at the start of each run (the tensor path)."""
        self.d, self.k, self.tf32, self.order = d, k, tf32, order

    def compile(self) -> None:
        """What compiles before the upload (timed as the setup's compile phase)."""

    def allocate(self, x, changed, labels: bool = True) -> None:
        """Buffers for the centred float32 points `x` on the GPU (all of them, or one chunk's
        worth when streamed) and the uint64 `changed` counter; labels: keep each point's label
        (the whole-run adapter; a streamed pass keeps its own)."""
        self.x, self.n, self.changed = x, x.shape[0], changed
        self.sms = multiprocessors()
        self.blocks = self.grid(self.n)

    def grid(self, n: int) -> int:
        """Blocks for n points (the record reports the whole data's)."""
        return blocks(n, BLOCK, self.sms * BLOCKS_PER_SM)

    def warm_up(self, start) -> None:
        """Compile what compiles on first use, from the centred float64 start, untimed."""

    def info(self) -> dict:
        """The record's fields of this strategy alone."""
        return {}

    # ------------------------------------------------------------------ one run

    def start(self, start, track: bool) -> None:
        """A run's first centroids (centred, float64); track: the tolerance rule counts changes."""
        raise NotImplementedError

    def before_iterations(self) -> None:
        """Work of the run before its first iteration, inside the timed region."""

    def iterate(self, track: bool, combine=None) -> None:
        """One Lloyd iteration on the current stream; combine(*buffers), where given, sums this
        shard's partial sums and counts with every other shard's before the centroids are made."""
        raise NotImplementedError

    def last_labels(self):
        """The labels of the last iteration's assignment where this strategy keeps them (its own
        numbering of the clusters), else None; kmbench.KMeans's halt_on_empty counts them."""
        return getattr(self, "labels", None)

    def final_centroids(self):
        """The float64 centroids (centred, on the GPU) in the harness's numbering."""
        return self.centroids64

    def after_run(self, problem: Problem, done: int) -> tuple[list[str], dict]:
        """Notes on the run that ended after `done` iterations, and fields for the record."""
        return [], {}
