"""The fp16 pass's bound (impls/gpu/kmbench_gpu/fp16_bound.py), on an emulation of the pass:
no computed score is farther from the exact one than E16, with inputs rounded or flushed, on
data of every scale, and a point it certifies has the exact winner. Also that the test has
teeth: TF32's bound alone, without the terms for fp16's narrow range, is broken by points whose
scaled coordinates fall below fp16's smallest normal."""

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import bound
from impls.gpu.kmbench_gpu.fp16_bound import (BF16_UNIT, FLUSH_UNIT, FP16_UNIT, bf16_eps, fp16_scale, fp16_scores,
                                              score_error16, to_fp16)


def _data(kind, n, d, rng):
    """Centred float32 points of a kind, and k centroids drawn from them."""
    if kind == "blobs":
        x = rng.standard_normal((n, d)) + rng.uniform(-4, 4, (8, d))[rng.integers(0, 8, n)]
    elif kind == "small":  # 1e-12: every input below fp16's smallest normal before scaling
        x = 1e-12 * rng.standard_normal((n, d))
    elif kind == "tiny":  # 1e-20: scores below FP32's smallest normal (bound.underflow_floor)
        x = 1e-20 * rng.standard_normal((n, d))
    elif kind == "huge":
        x = 1e15 * rng.standard_normal((n, d))  # scores near 1e33: FP32 still holds them
    else:  # "wide": one far outlier, and points near the mean whose scaled coordinates are subnormal in fp16
        x = rng.standard_normal((n, d)) * np.where(np.arange(n)[:, None] % 2 == 0, 1e-7, 1.0)
        x[1, 0], x[3, 0] = 1e3, -1e3  # the mean stays where it was
        return x.astype(np.float32)
    return (x - x.mean(axis=0)).astype(np.float32)


def _bound_and_errors(x, centroids, flush):
    scale = fp16_scale(float(np.abs(x).max()))
    computed = fp16_scores(x, centroids, scale, flush).astype(np.float64)
    exact = bound.exact_scores(x, centroids)
    c64 = centroids.astype(np.float64)
    c_max = float(np.sqrt((c64 ** 2).sum(axis=1)).max())
    h_max = float(np.abs(0.5 * (c64 ** 2).sum(axis=1)).max())
    limit = score_error16(x.shape[1], bound.norm_up(x), c_max, h_max, scale)
    return computed, exact, limit, scale


@pytest.mark.parametrize("kind", ["blobs", "small", "tiny", "huge", "wide"])
@pytest.mark.parametrize("d", [8, 64, 408])
@pytest.mark.parametrize("flush", [False, True])
def test_no_score_is_farther_than_the_bound(kind, d, flush):
    rng = np.random.default_rng(d + len(kind))
    n, k = (240, 40) if d <= 64 else (60, 24)
    x = _data(kind, n, d, rng)
    centroids = x[rng.choice(n, k, replace=False)] * np.float32(0.999)  # within the data's box
    computed, exact, limit, scale = _bound_and_errors(x, centroids, flush)
    assert np.abs(to_fp16(x, scale)).max() < 65504  # nothing overflows fp16
    assert (np.abs(computed - exact) <= limit[:, None]).all()


@pytest.mark.parametrize("kind", ["blobs", "small"])
def test_a_point_it_certifies_has_the_exact_winner(kind):
    rng = np.random.default_rng(7)
    x = _data(kind, 400, 32, rng)
    centroids = x[rng.choice(400, 60, replace=False)]
    centroids[1] = centroids[0] * np.float32(1 + 1e-4)  # near-ties the pass must not certify wrongly
    computed, exact, limit, _ = _bound_and_errors(x, centroids, flush=True)
    winner, best, second = bound.best_two(computed)
    sure = bound.certified(best, second, limit)
    assert sure.mean() > 0.5  # it certifies most points
    assert (winner[sure] == np.argmin(exact, axis=1)[sure]).all()


def test_tf32s_bound_alone_is_broken_by_what_fp16_flushes():
    """The terms for fp16's range are needed: points near the mean of data with a far outlier
    have scaled coordinates below fp16's smallest normal, and flushing them breaks E."""
    rng = np.random.default_rng(3)
    x = _data("wide", 240, 64, rng)
    centroids = x[0:80:2]  # from the points near the mean: small C and H, so E cannot hide the flush
    computed, exact, _, _ = _bound_and_errors(x, centroids, flush=True)
    c64 = centroids.astype(np.float64)
    tf32_only = bound.score_error(64, bound.norm_up(x), float(np.sqrt((c64 ** 2).sum(axis=1)).max()),
                                  float(np.abs(0.5 * (c64 ** 2).sum(axis=1)).max()))
    assert (np.abs(computed - exact) > tf32_only[:, None]).any()


def test_the_scale_is_a_power_of_two_that_puts_the_largest_input_just_below_fp16s_top():
    for largest in (3e-21, 0.7, 1.0, 65504.0, 1e30):
        scale = fp16_scale(largest)
        assert np.log2(scale) == round(np.log2(scale))
        assert 2 ** 14 <= largest * scale < 2 ** 15
    assert fp16_scale(0.0) == 1.0


def test_fp16_keeps_tf32s_unit_and_bf16s_is_eight_times_coarser():
    assert FP16_UNIT == bound.TF32_UNIT and FLUSH_UNIT == np.finfo(np.float16).tiny
    assert BF16_UNIT == 8 * FP16_UNIT
    assert 6.5 < bf16_eps(128) / bound.dot_eps(128) < 8.0
