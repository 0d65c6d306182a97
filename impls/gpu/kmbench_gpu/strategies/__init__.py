"""kmbench-gpu's strategies, and the one place that picks among them (as scikit-learn's
KMeans picks `_kmeans_single_lloyd` or `_kmeans_single_elkan`): `strategy` is the rule on
(n, d, k), `choose` applies it to a problem with the row's own settings, and `make` gives the
chosen strategy's object. The adapter asks that object everything else.

    resident  resident.py  d <= 8 and k * (d + 1) <= 40: the whole run in one launch
    columns   small_k.py   where resident would be but each pass's sums must be seen (shards,
                           streamed chunks): resident's accumulation, one pass a launch
    small-k   small_k.py   d <= 8 and k <= 32 otherwise: one fused pass per iteration
    tiled     tiled.py     d <= 32, any k: centroids in shared-memory tiles
    tensor    tensor.py    d > 32 where Triton runs: TF32 scores, certified, FP32 re-check
    gemm      gemm.py      d > 32 without Triton, and the -tf32 row: cuBLAS SGEMM scores
"""

from __future__ import annotations

from impls.gpu.kmbench_gpu.strategies.base import Strategy
from impls.gpu.kmbench_gpu.strategies.gemm import Gemm
from impls.gpu.kmbench_gpu.strategies.lowd import SMALL_DIM, TILED_MAX_DIM
from impls.gpu.kmbench_gpu.strategies.resident import RESIDENT_SLOTS, Resident
from impls.gpu.kmbench_gpu.strategies.small_k import SMALL_K, Columns, SmallK
from impls.gpu.kmbench_gpu.strategies.tensor import Tensor
from impls.gpu.kmbench_gpu.strategies.tiled import Tiled
from kmbench.errors import ImplementationError
from kmbench.protocol import Problem

KINDS: dict[str, type[Strategy]] = {kind.name: kind for kind in (Resident, Columns, SmallK, Tiled, Tensor, Gemm)}
STRATEGIES = tuple(KINDS)


def strategy(n: int, d: int, k: int, tensor_cores: bool = False, passes: bool = False) -> str:
    """The strategy for (n, d, k); tensor_cores: whether the tensor path can run here.
    passes: each pass's sums must be seen before the centroids are made (a pass over one chunk
    of streamed data, or one shard of several): never the one-launch resident kernel but its
    accumulation a pass at a time (columns), and above d = 32 the tensor path (the row refuses
    where it cannot run)."""
    if d > TILED_MAX_DIM:
        return "tensor" if tensor_cores or passes else "gemm"
    if d <= SMALL_DIM and k * (d + 1) <= RESIDENT_SLOTS:
        return "columns" if passes else "resident"
    if d <= SMALL_DIM and k <= SMALL_K:
        return "small-k"
    return "tiled"


def pass_strategy(d: int, k: int) -> str:
    """`strategy` for a pass over part of the points (streamed chunks, shards): n plays no part."""
    return strategy(0, d, k, passes=True)


def choose(problem: Problem, tf32: bool = False, force: str | None = None) -> str:
    """The strategy of a whole run: the GEMM path for the TF32 row (it exists for that path
    only), a forced one (tests, the sanitizer, experiments), else `strategy`, asking whether
    Triton runs here only where the answer matters (d > 32)."""
    if tf32:
        return "gemm"
    if force:
        return force
    if problem.d > TILED_MAX_DIM:
        from impls.gpu.kmbench_gpu.tensor_settings import tensor_status

        return strategy(problem.n, problem.d, problem.k, tensor_cores=tensor_status()[0])
    return strategy(problem.n, problem.d, problem.k)


def kind_of(name: str) -> type[Strategy]:
    """The class of the strategy called `name`."""
    if name not in KINDS:
        raise ImplementationError(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}")
    return KINDS[name]


def make(name: str, d: int, k: int, tf32: bool = False, order: bool = True) -> Strategy:
    """The strategy called `name` for one problem of dimension d and k centroids."""
    return kind_of(name)(d, k, tf32=tf32, order=order)
