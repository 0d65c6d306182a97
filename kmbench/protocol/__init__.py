"""The shared protocol: what every implementation is given (Problem) and returns (Result),
and the small interface every implementation fills (Implementation).

The harness owns the initial centroids, the iteration count and the clock; an
implementation only runs Lloyd iterations and reports the phases it timed with
the timers from `kmbench.protocol.timing`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


STOP_RULES = ("iterations", "tolerance")


def stop_done(changed: int, n: int, tol: float | None) -> bool:
    """The tolerance rule, one definition for every Python implementation and the oracle:
    stop after an iteration in which at most tol * n points changed cluster (none when
    tol = 0). In the first iteration every point counts as changed. None: never stop early."""
    return tol is not None and changed <= tol * n


def describe_stop(iterations: int, tol: float | None) -> str:
    if tol is None:
        return f"{iterations} iterations"
    if tol == 0:
        return f"until no label changes (at most {iterations} iterations)"
    return f"until at most {tol:g} of the points change (at most {iterations} iterations)"


@dataclass(frozen=True)
class Options:
    """What the user chose for the rows that take a choice, handed to every row in its Problem
    (never through environment variables). None: the row's own default."""

    # CPU threads of a row that takes_threads; None: its fastest count (kmbench.protocol.threads
    # calibrates it before the counted runs, which it hands the count chosen), or every core
    # it may use where no harness chose one (kmbench.KMeans)
    threads: int | None = None
    scheduler: str | None = None  # a running Dask scheduler's address for the rows that span a cluster; None: they start their own
    gpus: str | None = None  # the GPUs ("0" or "0,1") of a multi-GPU row's own cluster; None: every one visible


@dataclass(frozen=True)
class Problem:
    """One k-means problem, identical for every implementation."""

    data: np.ndarray  # (n, d), C-contiguous, float32 or float64
    initial_centroids: np.ndarray  # (k, d), same dtype as data
    iterations: int  # exactly this many Lloyd iterations, or the most with a tolerance
    tol: float | None = None  # None: the iterations rule; else the tolerance rule (stop_done)
    data_path: Path | None = None  # the .npy the data came from, for subprocess implementations
    dataset_name: str = "in-memory"
    # The counted protocol, for implementations that repeat inside their own process.
    warmup: int = 1
    repeats: int = 5
    max_time: float | None = None
    min_repeats: int = 1  # counted repeats a max_time budget cannot cut
    # How the initial centroids were made ({"method", "device", "seconds"}): shown, not timed.
    seeding: dict = field(default_factory=dict)
    # An untimed validation run: a row that `traces` returns every iteration's centroids.
    trace: bool = False
    options: Options = field(default_factory=Options)
    # kmbench.KMeans's stop rule (scikit-learn's), for a row that `follows_shift`: also stop after
    # an iteration whose centroids moved by at most this, summed squared shift. Never in a record.
    shift_tol: float | None = None
    # Also kmbench.KMeans's, for rows that honour it (kmbench-cpu, kmbench-gpu): end the run before
    # applying an iteration that left a cluster empty (Result.emptied then says so), for the
    # estimator to relocate it.
    halt_on_empty: bool = False
    # Also kmbench.KMeans's: sample weights (float64, one a point; None: all equal), handed only to
    # a row that `takes_weights`. Never in a record.
    weights: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.data.shape[0]

    @property
    def d(self) -> int:
        return self.data.shape[1]

    @property
    def k(self) -> int:
        return self.initial_centroids.shape[0]

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def stop(self) -> dict:
        return {"rule": "iterations" if self.tol is None else "tolerance",
                "max_iter": self.iterations, "tol": self.tol}


@dataclass
class Result:
    """What one execution of `run` produced.

    `phases` holds seconds per phase of this execution ("iterate" is the Lloyd loop,
    the region every document times; "upload", "download", ... where they apply).
    Implementations that repeat inside their own process return one iterate time per
    counted repeat in `iterate_times` instead.
    """

    centroids: np.ndarray  # (k, d)
    iterations: int  # Lloyd iterations actually executed
    phases: dict[str, float] = field(default_factory=dict)
    labels: np.ndarray | None = None
    iterate_times: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    # With Problem.trace: the centroids after each iteration (the last is `centroids`), for the
    # judge; `labels` then holds the last iteration's assignment.
    trace: list[np.ndarray] | None = None
    # Whether some iteration left a cluster with no point (its centroid kept, as the protocol
    # asks); None: the row does not say. kmbench.KMeans then relocates it as scikit-learn does
    # (where the row halted before it, or stepped), or redoes the fit (where it cannot say).
    emptied: bool | None = None


class Implementation:
    """Base class for every k-means implementation.

    Subclasses set the class attributes and override `run`; `available` and
    `prepare` have harmless defaults.
    """

    name: str = ""  # stable id used on the command line and in records
    label: str = ""  # row label in tables (document 000's names where they exist)
    description: str = ""
    source: str = ""  # which reference document and section it follows
    # The precision it computes in, whatever the data's ("float64", "float32", "tf32", "float16",
    # "bfloat16"; kmbench.judge.precision): the judge certifies every step to its bounds.
    dtype: str | None = None
    # Keeps no precision's bounds (an approximate method): a step the judge cannot certify makes
    # its verdict `approximate`, with its quality, rather than `mismatch`.
    approximate: bool = False
    # Fills Result.trace when Problem.trace is set (else the judge steps it). That traced run is
    # also the row's first warm-up, so it must run the same code as a plain run (plus the copies).
    traces: bool = False
    runs_repeats_itself: bool = False  # True: one `run` call performs warm-up and repeats
    tasks: tuple[str, ...] = ("lloyd",)  # the problem shapes it serves (kmbench.tasks.batched: "batched")
    relocates_empty_clusters: bool = False  # moves an empty cluster's centroid (the protocol keeps it)
    # Its CPU threads follow Problem.options.threads (`run --threads`), so a scaling run repeats it:
    # read by the row itself (kmbench-cpu's program), or, for a row that computes in kmbench's
    # process on BLAS or OpenMP pools, set by the harness's threadpoolctl limit around its runs.
    # Unless the user forces a count, the harness runs it at its fastest (kmbench.protocol.threads).
    takes_threads: bool = False
    # Runs on a whole Dask cluster of its own making or at Problem.options.scheduler (the Dask rows):
    # on a matrix sent to a cluster (`--scheduler`) its cells run in the client, one at a time,
    # with the whole cluster to themselves, instead of on one worker (kmbench.protocol.placement).
    spans_cluster: bool = False
    # The NVIDIA GPUs its timed work runs on, whose clocks and other programs its cells record
    # (kmbench.protocol.gpu_state): "one", the current CUDA device; "several", the GPUs of
    # Problem.options.gpus, else every one visible (the multi-GPU rows); "": none (a CPU row).
    on_gpus: str = ""
    follows_shift: bool = False  # stops by Problem.shift_tol itself (else kmbench.KMeans steps it)
    takes_weights: bool = False  # weights each point by Problem.weights (kmbench.KMeans's sample_weight)
    roofline_on: str = "gpu"  # whose measured ceilings its declared counts are held against ("gpu" or "cpu")
    # Where the row stands in `kmbench list`, in a run of every row and in reports (lower first);
    # None: no place declared (rows from entry points may leave it out and come last).
    row_order: float | None = None
    # Reports list these rows first, by row_order (document 000's table and its kin); the other
    # rows follow in the order they were measured.
    ranked_in_reports: bool = False
    # The row every other row of its task is compared against ("speedup vs sklearn").
    baseline: bool = False

    def __init_subclass__(cls, **kwargs):
        # Where a row stands is its own declaration: a subclass (kmbench-gpu-stream of kmbench-gpu,
        # a peer of the torch row) does not inherit its parent's place or its parent's baseline.
        super().__init_subclass__(**kwargs)
        for attribute in ("row_order", "ranked_in_reports", "baseline"):
            if attribute not in vars(cls):
                setattr(cls, attribute, getattr(Implementation, attribute))

    def follows_tolerance(self, tol: float) -> bool:
        """Can `run` stop by the tolerance rule itself (see `stop_done`)? If not, the runner
        hands it the oracle's iteration count under the iterations rule, and says so."""
        return False

    def available(self) -> tuple[bool, str]:
        return True, ""

    def unsuited(self, problem: Problem) -> str:
        """Why the row is not offered for this problem, in a sentence its description also says
        (`kmbench list`); "" where it is. A run skips such a cell with the sentence: a row that
        could compute it but has no business there (TF32 tensor cores at small d), not a limit
        it fails at (those raise ImplementationError in prepare)."""
        return ""

    def prepare(self, problem: Problem) -> None:
        """Compile, build or upload. Timed as the setup phase."""

    def run(self, problem: Problem) -> Result:
        raise NotImplementedError

    def build_info(self) -> dict:
        """Compiler, flags, library versions: recorded with every result."""
        return {}

    def setup_phases(self) -> dict[str, float]:
        """Seconds of each part of the last `prepare` (compile, build, upload, ...)."""
        return {}

    def distance_form(self, problem: Problem) -> str:
        """How it compares distances on this problem: "direct" where it computes sum (x - c)^2 in
        its declared precision (the judge then bounds each distance's rounding by the distance
        itself), "any" where it may expand |x|^2 - 2 x.c + |c|^2 (bounded by |x|^2: far looser)."""
        return "any"

    def bytes_per_iteration(self, problem: Problem) -> int | None:
        """The fewest bytes one iteration must move through device memory (each input read
        once), declared by GPU implementations so a record can say what fraction of the
        machine's measured bandwidth it reached. None: not declared."""
        return None

    def fp32_per_distance(self, problem: Problem) -> float | None:
        """FP32 instructions one distance evaluation costs in this implementation's inner loop
        (subtractions, multiplies, FMAs, the compare), declared by GPU implementations so a
        record can say what fraction of the GPU's measured FP32 issue rate it reached."""
        return None

    def arithmetic(self, problem: Problem) -> tuple[str, float] | None:
        """What one distance evaluation costs, in the unit of the ceiling that bounds it:
        ("fp32", FP32 instructions) from fp32_per_distance by default; rows whose distances are
        tensor-core products declare ("tf32" or "fp16", FLOPs), 2 d a distance. The record's
        compute floor is n k times this over the machine's measured rate of that unit."""
        instructions = self.fp32_per_distance(problem)
        return ("fp32", instructions) if instructions else None

    def release(self) -> None:
        """Free what `prepare` holds (device memory, say) before the next problem."""


def usable(impl: Implementation) -> tuple[bool, str]:
    """`available()`, with a check that itself fails counted as a reason, not a crash. Here,
    beside the interface, so kmbench.KMeans can ask without importing the measuring loop."""
    try:
        return impl.available()
    except Exception as exc:
        return False, f"availability check failed: {exc}"
