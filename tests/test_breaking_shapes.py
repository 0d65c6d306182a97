"""The shapes users report as breaking (issue 64, item 4; kmbench/plans/suites/breaking-shapes.toml):
each shape meets the limit it is there for; kmbench-gpu's plan for it, decided on the host, stays
within the GPU's limits (the strategy, the Hopper pass's shared memory, memory that never holds
n x k); and with a GPU, kmbench-gpu at each shape, two iterations, judged `ok`."""

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import hopper_pass, tensor_settings
from impls.gpu.kmbench_gpu.strategies import strategy
from kmbench.judge import scoring
from kmbench.plans import suite
from tests.conftest import gpu_cell

WIDE, MANY_AT_LOW_D, PAST_INT32, ODD_D = (200_000, 4096, 256), (1_000_000, 8, 65_536), (400_000, 64, 65_536), \
    (300_000, 300, 4096)
SHAPES = [WIDE, MANY_AT_LOW_D, PAST_INT32, ODD_D]
H200_BYTES = 139 * 2**30
HOPPER = 90


def test_the_suite_holds_the_four_shapes_each_past_its_limit():
    steps = suite.load("breaking-shapes").steps()
    shapes = [(step.spec["n"], step.spec["d"], step.settings.k) for step in steps]
    assert shapes == SHAPES
    (_, wide_d, _), (_, low_d, many_k), (n, _, k), (_, odd_d, _) = shapes
    assert wide_d == 4096 and (low_d, many_k) == (8, 65_536)
    assert n * k > 2**31
    assert odd_d >= 256 and odd_d % 16 and odd_d % 8  # neither Hopper pass's k-step
    names = {impl.name for step in steps for impl in step.impls}
    assert {"kmbench-gpu", "torch", "flash-kmeans", "flash-kmeans-fp16", "flashlib", "flashlib-fp16"} <= names


@pytest.mark.parametrize("shape, expected", [(WIDE, "tensor"), (MANY_AT_LOW_D, "tiled"), (PAST_INT32, "tensor"),
                                             (ODD_D, "tensor")])
def test_kmbench_gpus_strategy_at_each_shape(shape, expected):
    assert strategy(*shape, tensor_cores=True) == expected


def test_at_d_4096_the_hopper_pass_streams_rows_within_shared_memory():
    """Rows of 4,096 coordinates cannot stay on chip: hopper_wide.cu streams them in chunks, and
    its ring of stages must fit the 227 KB a Hopper block may ask for, with two stages at least."""
    _, d, k = WIDE
    assert hopper_pass.wide(d)
    tiling = hopper_pass.wide_tiling(d, k, HOPPER)
    assert tiling is not None and tiling[2] == d
    stages = hopper_pass.stages(d)
    assert 2 <= stages and 128 + stages * hopper_pass.stage_floats(d) * 4 <= hopper_pass.SHARED_MAX


@pytest.mark.parametrize("d", [300, 4100, 260])
def test_no_hopper_pass_takes_a_d_that_is_no_multiple_of_8(d):
    """Its k-steps take 8 coordinates (16 in fp16, padded): a ragged d goes to Triton's pass,
    whose rows stream in chunks of 32 coordinates (BLOCK_D < d)."""
    k = ODD_D[2]
    assert hopper_pass.wide_tiling(d, k, HOPPER) is None and hopper_pass.register_tiling(d, k, HOPPER) is None
    tiling, _ = tensor_settings.default_tilings(d, k)
    assert tiling[2] < d


@pytest.mark.parametrize("shape", [WIDE, PAST_INT32, ODD_D])
def test_the_tensor_path_fits_an_h200_and_never_holds_n_by_k(shape):
    n, d, k = shape
    held = tensor_settings.device_bytes(n, d, k)
    assert held < H200_BYTES / 4
    assert held < n * d * 4 * 4 + k * d * 32 + n * 128  # the points' copies, k x d buffers, per-point lists


def test_the_judges_score_chunks_stay_below_int32_elements_at_k_65536():
    """The judge's float32 products come a chunk of rows at a time: at k = 65,536 no chunk may reach
    2^31 elements, what a 32-bit index into it could count."""
    k = PAST_INT32[2]
    largest = 32 * scoring.SCORE_ELEMENTS  # the most _score_elements gives a GPU, whatever is free
    assert max(1, largest // k) * k < 2**31


def blobs32(n, d, centres, seed):
    """Blobs made in float32 directly (a float64 copy at 2e5 x 4,096 would be 6.5 GB and slow)."""
    rng = np.random.default_rng(seed)
    middles = rng.uniform(-10, 10, size=(centres, d)).astype(np.float32)
    points = rng.standard_normal((n, d), dtype=np.float32)
    points += middles[rng.integers(0, centres, size=n)]
    return points


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=["d4096", "d8-k65536", "nk-past-2e31", "d300"])
def test_kmbench_gpu_is_ok_at_each_breaking_shape(shape):
    from impls.gpu.kmbench_gpu import KmbenchGpu

    n, d, k = shape
    impl = KmbenchGpu()
    ready, why = impl.available()
    if not ready:
        pytest.skip(why)
    data = blobs32(n, d, k, seed=d)
    _, record = gpu_cell(impl, data, k, iterations=2)
    assert record["status"] == "ok", (shape, record.get("detail"))
    assert record["iterations_executed"] == 2
    assert record["build"]["strategy"] == strategy(n, d, k, tensor_cores=True)
