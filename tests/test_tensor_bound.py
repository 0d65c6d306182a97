"""The TF32 error bound of kmbench-gpu's tensor-core path (impls/fast/bound.py), on the CPU:
TF32 products are emulated by truncating FP32 inputs to 10 mantissa bits and adding the
exact products in FP32, one at a time. A point whose margin is inside the bound is re-checked;
outside it, the TF32 winner is the exact winner."""

import numpy as np
import pytest

from impls.fast import TILED_MAX_DIM, strategy
from impls.fast import bound


def _scene(rng, n, d, k, offset=0.0, scale=1.0):
    x = (rng.standard_normal((n, d)) * scale + offset).astype(np.float32)
    c = (rng.standard_normal((k, d)) * scale + offset).astype(np.float32)
    return x, c


def _bound_for(x, c):
    single = c.astype(np.float32)
    half = (0.5 * (single.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    return bound.score_error(x.shape[1], bound.norm_up(x), float(bound.norm_up(single).max()), float(half.max()))


def test_rounding_to_tf32_keeps_ten_mantissa_bits_to_half_a_unit(rng):
    values = (rng.standard_normal(10_000) * 10.0 ** rng.uniform(-6, 6, 10_000)).astype(np.float32)
    cut = bound.to_tf32(values)
    relative = np.abs(cut.astype(np.float64) - values) / np.abs(values.astype(np.float64))
    assert relative.max() <= bound.TF32_UNIT
    assert relative.max() > bound.TF32_UNIT / 2  # the emulation does round: not a no-op
    assert np.array_equal(bound.to_tf32(cut), cut)  # a TF32 value stays: truncation keeps it too
    assert not (cut.view(np.uint32) & ~bound.TF32_MASK).any()


@pytest.mark.parametrize("d", [33, 64, 100, 408, 1000])
@pytest.mark.parametrize("offset", [0.0, 30.0])
def test_every_emulated_tf32_score_is_within_the_bound(rng, d, offset):
    x, c = _scene(rng, 64, d, 48, offset=offset)
    error = np.abs(bound.tf32_scores(x, c).astype(np.float64) - bound.exact_scores(x, c))
    limit = _bound_for(x, c)[:, None]
    assert (error <= limit).all()
    assert error.max() > limit.max() / 1000  # TF32 does err: the emulation is not exact arithmetic


def test_the_bound_grows_with_the_dimension():
    values = [bound.dot_eps(d) for d in (1, 64, 1024, 4096)]
    assert values == sorted(values) and values[0] >= 2 * bound.TF32_UNIT


def test_a_point_inside_the_margin_is_rechecked(rng):
    d = 64
    x = rng.standard_normal((1, d)).astype(np.float32)
    step = rng.standard_normal(d).astype(np.float32)
    c = np.stack([x[0] + step, x[0] - step, x[0] + 5 * step]).astype(np.float32)  # two at one distance
    _, best, second = bound.best_two(bound.tf32_scores(x, c))
    assert not bound.certified(best, second, _bound_for(x, c))[0]


def test_a_point_outside_the_margin_provably_keeps_its_winner(rng):
    """Many scenes with near-ties planted among clear winners: every certified point's TF32
    winner is the float64 winner, and the clear ones are certified."""
    certified_total = flagged_total = 0
    for trial in range(30):
        d = int(rng.integers(33, 300))
        x, c = _scene(rng, 200, d, 40, offset=float(rng.choice([0.0, 5.0])))
        x[:100] = c[rng.integers(0, 40, 100)] + 0.05 * rng.standard_normal((100, d)).astype(np.float32)
        pair = rng.integers(0, 40, 2)
        x[100:110] = 0.5 * (c[pair[0]] + c[pair[1]])  # planted near-ties
        winner, best, second = bound.best_two(bound.tf32_scores(x, c))
        sure = bound.certified(best, second, _bound_for(x, c))
        exact = np.argmin(bound.exact_scores(x, c), axis=1)
        assert np.array_equal(winner[sure], exact[sure]), f"trial {trial}: a certified winner is wrong"
        assert sure[:100].all(), f"trial {trial}: a point next to its centroid was flagged"
        if pair[0] != pair[1]:
            assert not sure[100:110].any(), f"trial {trial}: a planted tie was certified"
        certified_total += int(sure.sum())
        flagged_total += int((~sure).sum())
    assert certified_total > 0 and flagged_total > 0


def test_the_re_check_keeps_the_exact_winner_among_few_candidates(rng):
    """Points near several nearly equal centroids (a blob split by duplicated starts): the exact
    winner is always a candidate, every centroid the bound rules out is provably worse, and
    the far centroids are ruled out (the re-check is not a scan of all k)."""
    kept_total = 0
    for trial in range(20):
        d = int(rng.integers(33, 300))
        x, c = _scene(rng, 150, d, 60, offset=float(rng.choice([0.0, 5.0])))
        c[:4] = c[0] + 1e-4 * rng.standard_normal((4, d)).astype(np.float32)  # one blob, four starts
        x[:] = c[0] + 0.05 * rng.standard_normal((150, d)).astype(np.float32)
        scores = bound.tf32_scores(x, c)
        _, best, second = bound.best_two(scores)
        error = _bound_for(x, c)
        kept = bound.candidates(scores, best, error)
        exact = bound.exact_scores(x, c)
        winner = np.argmin(exact, axis=1)
        assert kept[np.arange(len(x)), winner].all(), f"trial {trial}: the exact winner was ruled out"
        winner_score = np.broadcast_to(exact[np.arange(len(x)), winner][:, None], exact.shape)
        assert (exact[~kept] > winner_score[~kept]).all(), f"trial {trial}: a ruled-out centroid is not worse"
        assert not kept[:, 4:].any(), f"trial {trial}: a far centroid stayed in play"
        assert not bound.certified(best, second, error).all()  # the duplicated starts do need a re-check
        kept_total += int(kept.sum())
    assert kept_total > 0


def test_the_floor_bounds_every_other_centroid_and_is_tight_where_certified(rng):
    """yinyang-gpu starts every group's lower bound from the floor: no centroid but the exact
    winner may score below it, near-ties included, and on certified points it is the
    runner-up's score less E (no looser than that)."""
    below_runner_up = 0
    for trial in range(20):
        d = int(rng.integers(33, 300))
        x, c = _scene(rng, 200, d, 40, offset=float(rng.choice([0.0, 30.0])))
        x[:100] = c[rng.integers(0, 40, 100)] + 0.05 * rng.standard_normal((100, d)).astype(np.float32)
        x[100:110] = 0.5 * (c[3] + c[7])  # planted near-ties
        _, best, second = bound.best_two(bound.tf32_scores(x, c))
        error = _bound_for(x, c)
        floor = bound.floor(best, second, error)
        exact = bound.exact_scores(x, c)
        winner = np.argmin(exact, axis=1)
        others = exact.copy()
        others[np.arange(len(x)), winner] = np.inf
        assert (floor <= others.min(axis=1)).all(), f"trial {trial}: a centroid scores below the floor"
        sure = bound.certified(best, second, error)
        assert np.array_equal(floor[sure], second[sure] - error[sure])
        below_runner_up += int((floor[~sure] < best[~sure]).sum())
    assert below_runner_up > 0  # the near-ties took the looser branch


def test_a_margin_just_above_the_bound_is_certified_and_just_below_is_not():
    best = np.array([1.0, 1.0])
    error = np.array([0.25, 0.25])
    assert bound.certified(best, best + np.array([0.5000001, 0.4999999]), error).tolist() == [True, False]


def test_norms_are_rounded_up(rng):
    vectors = rng.standard_normal((1000, 37))
    assert (bound.norm_up(vectors).astype(np.float64) >= np.sqrt((vectors ** 2).sum(axis=1))).all()


def test_high_dimensions_take_the_tensor_path_only_where_it_can_run():
    assert strategy(10**6, 128, 1024, tensor_cores=True) == "tensor"
    assert strategy(10**6, 128, 1024, tensor_cores=False) == "gemm"
    assert strategy(10**6, TILED_MAX_DIM, 1024, tensor_cores=True) == "tiled"
