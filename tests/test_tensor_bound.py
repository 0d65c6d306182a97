"""The TF32 error bound of kmbench-gpu's tensor-core path (impls/gpu/kmbench_gpu/bound.py), on the CPU:
TF32 products are emulated by truncating FP32 inputs to 10 mantissa bits and adding the
exact products in FP32, one at a time. A point whose margin is inside the bound is re-checked;
outside it, the TF32 winner is the exact winner."""

import ast
import itertools
from pathlib import Path

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import TILED_MAX_DIM, strategy
from impls.gpu.kmbench_gpu import bound, tensor_path


def _scene(rng, n, d, k, offset=0.0, scale=1.0):
    x = (rng.standard_normal((n, d)) * scale + offset).astype(np.float32)
    c = (rng.standard_normal((k, d)) * scale + offset).astype(np.float32)
    return x, c


def _bound_inputs(x, c):
    """What E(x) is computed from: the rounded-up point norms, C and H (as load_centroids keeps them)."""
    single = c.astype(np.float32)
    half = (0.5 * (single.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    return bound.norm_up(x), float(bound.norm_up(single).max()), float(half.max())


def _bound_for(x, c):
    return bound.score_error(x.shape[1], *_bound_inputs(x, c))


def _kernel_error(arguments, x_norm, c_max, h_max):
    """E(x) as certified_assign adds it up (tensor_kernels.py) from the numbers the launcher
    gives it, in float64 (the kernel's FP32 is what bound.SAFETY allows for)."""
    eps, eta, _ = arguments
    return eps * np.asarray(x_norm, np.float64) * c_max + eta * h_max


def _error_by(reader, x, c):
    """E(x) per point as bound.py computes it, or as the kernel adds it up from its arguments."""
    if reader == "bound.py":
        return _bound_for(x, c)
    return _kernel_error(tensor_path.bound_arguments(x.shape[1]), *_bound_inputs(x, c))


def _kernel(arguments, x_norm, c_max, h_max, best, second):
    """certified_assign's decisions after its argmin: (E, certified, limit, floor)."""
    margin = arguments[2]
    error = _kernel_error(arguments, x_norm, c_max, h_max)
    flag = ~((second - best) > margin * error)
    return error, ~flag, best + margin * error, np.where(flag, best, second) - error


def _every_allowed_truth(scores, error):
    """Exact scores the bound allows for TF32 scores `scores` (rows) and E (per row): every
    pattern of errors at its extremes and zero, s = s^ + e E with e in {-1, 0, 1} per centroid.
    Yields (exact scores, exact winner: the lowest index of the smallest)."""
    for pattern in itertools.product((-1.0, 0.0, 1.0), repeat=scores.shape[1]):
        exact = scores + np.asarray(pattern)[None, :] * error[:, None]
        yield exact, np.argmin(exact, axis=1)


def _dyadic_scenes():
    """TF32 scores of 3 centroids on a grid of E / 2 around the best (every order, ties
    included), E = 1/4: the float64 arithmetic on them is exact, boundaries included."""
    error = 0.25
    grid = np.arange(7) * error / 2
    scores = np.array(list(itertools.product(grid, repeat=3)))
    return scores, np.full(len(scores), error)


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


@pytest.mark.parametrize("reader", ["bound.py", "kernel"])
def test_the_bound_covers_rounding_that_piles_up_over_a_long_sum(reader):
    """The FP32 accumulation's share of E: x = c = (1, 2^-12, ..., 2^-12) are TF32 values and
    their products exact, so every error is the sum's. 1 enters it first; each of the d - 1
    products of 2^-24 that follow is half a unit in the last place of 1 and rounds (to even)
    away. The lost (d - 1) 2^-24 grows with d, past d = 2^14 beyond what rounding the inputs
    to TF32 (2u |x| |c|) could explain; the bound, and the kernel's E, still cover it."""
    d = 2 ** 15
    x = np.full((1, d), 2.0 ** -12, dtype=np.float32)
    x[0, 0] = 1.0
    c = x.copy()
    assert np.array_equal(bound.to_tf32(x), x)  # nothing to round: the error is the sum's alone
    error = np.abs(bound.tf32_scores(x, c).astype(np.float64) - bound.exact_scores(x, c))
    norms = bound.norm_up(x).astype(np.float64) * bound.norm_up(c).astype(np.float64)
    assert (error > 2 * bound.TF32_UNIT * norms[:, None]).all()  # the scene does pile up
    assert (error <= _error_by(reader, x, c)[:, None]).all()


@pytest.mark.parametrize("reader", ["bound.py", "kernel"])
def test_a_point_at_the_origin_is_off_by_the_rounded_half_norms_and_the_bound_covers_them(rng, reader):
    """At x = 0 (the data's mean, once centred) every product is 0: the scores are the half
    norms, rounded once to FP32, and E(0) is the bound's half-norm term alone. Points very
    near the origin err the same way, the dot products' share of E being tiny there."""
    d = 64
    x = np.vstack([np.zeros((1, d)), 1e-6 * rng.standard_normal((7, d))]).astype(np.float32)
    c = (rng.standard_normal((300, d)) * 3.0).astype(np.float32)
    error = np.abs(bound.tf32_scores(x, c).astype(np.float64) - bound.exact_scores(x, c))
    assert error[0].max() > 0  # the half norms do round: the scene is not exact arithmetic
    assert (error <= _error_by(reader, x, c)[:, None]).all()


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


def _hold_for_every_allowed_truth(scores, error, sure, kept, lowest):
    """Brute force over every truth _every_allowed_truth yields: a certified TF32 winner is the
    exact winner; the exact winner is kept for the re-check and a centroid left out is beaten by
    it; no centroid but the exact winner scores below the floor. Returns, for tightness: which
    centroids some truth makes the winner or ties with it, and which points' TF32 winner wins
    outright in every truth."""
    tf32_winner = np.argmin(scores, axis=1)
    rows = np.arange(len(scores))
    can_win = np.zeros(scores.shape, dtype=bool)
    always = np.ones(len(scores), dtype=bool)
    for exact, winner in _every_allowed_truth(scores, error):
        assert np.array_equal(winner[sure], tf32_winner[sure]), "a certified winner can lose"
        assert kept[rows, winner].all(), "an exact winner the bound allows was ruled out"
        assert (exact > exact[rows, winner][:, None])[~kept].all(), "a ruled-out centroid is not worse"
        others = exact.copy()
        others[rows, winner] = np.inf
        assert (lowest <= others.min(axis=1)).all(), "a centroid can score below the floor"
        can_win |= exact <= exact.min(axis=1)[:, None]
        runner_up = exact.copy()
        runner_up[rows, tf32_winner] = np.inf
        always &= exact[rows, tf32_winner] < runner_up.min(axis=1)
    return can_win, always


def test_the_decisions_hold_for_every_truth_the_bound_allows():
    """certified, candidates and floor against every set of exact scores within E of the TF32
    ones, by brute force; and no looser than that: every centroid kept can come within a tie
    of winning, and every point whose TF32 winner wins outright in every such truth is certified."""
    scores, error = _dyadic_scenes()
    _, best, second = bound.best_two(scores)
    sure, kept = bound.certified(best, second, error), bound.candidates(scores, best, error)
    can_win, always = _hold_for_every_allowed_truth(scores, error, sure, kept, bound.floor(best, second, error))
    assert np.array_equal(kept, can_win)
    assert np.array_equal(sure, always)


@pytest.mark.parametrize("d", [33, 128, 408])
def test_the_kernel_is_given_bound_pys_thresholds(rng, d):
    """The tensor path's certified_assign holds no threshold of its own: it is given eps, eta
    and E's multiple (tensor_path.bound_arguments, plain Python), and with them its arithmetic
    computes bound.py's E, certifies the points bound.py certifies, lists them with bound.py's
    limits and writes bound.py's floors: on random points with near-ties, and for the multiple
    on the dyadic scenes above, where every boundary is hit exactly and every allowed truth is
    tried (so a multiple too small in bound.py fails here too)."""
    arguments = tensor_path.bound_arguments(d)
    x, c = _scene(rng, 300, d, 20)
    x[100:200] = 0.5 * (c[1] + c[2])  # near-ties: listed points with their limits
    scores = bound.tf32_scores(x, c)
    _, best, second = bound.best_two(scores)
    x_norm, c_max, h_max = _bound_inputs(x, c)
    expected = bound.score_error(d, x_norm, c_max, h_max)
    error, sure, limit, lowest = _kernel(arguments, x_norm, c_max, h_max, best, second)
    np.testing.assert_allclose(error, expected, rtol=1e-12, atol=0)
    assert np.array_equal(sure, bound.certified(best, second, expected))
    assert sure.any() and not sure.all()
    assert np.array_equal(scores <= limit[:, None], bound.candidates(scores, best, expected))
    np.testing.assert_allclose(lowest, bound.floor(best, second, expected), rtol=1e-12, atol=0)

    # The multiple, on the dyadic grid (the kernel's sum made E itself: eps = 1, |x| C = E, eta H = 0):
    # the same decisions as bound.py's, and sound for every truth the bound allows.
    scores, grid_error = _dyadic_scenes()
    _, best, second = bound.best_two(scores)
    error, sure, limit, lowest = _kernel((1.0, 1.0, arguments[2]), grid_error, 1.0, 0.0, best, second)
    kept = scores <= limit[:, None]
    assert np.array_equal(error, grid_error)
    assert np.array_equal(sure, bound.certified(best, second, grid_error))
    assert np.array_equal(kept, bound.candidates(scores, best, grid_error))
    assert np.array_equal(lowest, bound.floor(best, second, grid_error))
    _hold_for_every_allowed_truth(scores, grid_error, sure, kept, lowest)


def test_the_kernel_source_holds_no_threshold_of_its_own():
    """certified_assign takes eps, eta and margin (bound_arguments' order, as the launcher
    passes them after n and k), and its body writes no number but 0 and 1 (offsets and
    padding): no copy of the bound's thresholds."""
    source = (Path(tensor_path.__file__).parent / "tensor_kernels.py").read_text()
    kernel = next(node for node in ast.parse(source).body
                  if isinstance(node, ast.FunctionDef) and node.name == "certified_assign")
    names = [argument.arg for argument in kernel.args.args]
    assert names[names.index("k") + 1:names.index("k") + 4] == ["eps", "eta", "margin"]
    numbers = {node.value for node in ast.walk(kernel) if isinstance(node, ast.Constant)
               and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)}
    assert numbers <= {0, 1}, numbers


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


@pytest.mark.parametrize("k, block_n", [(20, 8), (200, 8), (1024, 64)])
def test_packed_scores_certify_only_what_the_unpacked_bound_certifies(rng, k, block_n):
    """The TF32 pass's packed epilogue (a tile number in each score's low bits) decides with
    E + bound.packing_error: whatever it certifies, the plain scores certify too, with the same
    winner; its limit keeps every candidate of the plain bound and its floor is no higher. On
    near-ties, scores of both signs and exact ties across tiles."""
    d = 64
    x, c = _scene(rng, 400, d, k, offset=0.5)
    x[100:200] = 0.5 * (c[1] + c[2])  # near-ties
    c[k - 1] = c[0]  # an exact tie between the first and the last tile
    scores = bound.tf32_scores(x, c)
    assert (scores < 0).any() and (scores > 0).any()
    winner, best, second = bound.best_two(scores)
    x_norm, c_max, h_max = _bound_inputs(x, c)
    error = bound.score_error(d, x_norm, c_max, h_max)
    tiles = -(-k // block_n)
    total = error + bound.packing_error(tiles, x_norm, c_max, h_max)

    label, packed_best, packed_second = bound.packed_best_two(scores, block_n)
    sure = bound.certified(packed_best, packed_second, total)
    assert sure.any() and not sure.all()
    assert (sure <= bound.certified(best, second, error)).all()
    assert np.array_equal(label[sure], winner[sure])
    assert (bound.candidates(scores, packed_best, total) >= bound.candidates(scores, best, error)).all()
    assert (bound.floor(packed_best, packed_second, total) <= bound.floor(best, second, error)).all()


def test_packing_moves_a_score_by_less_than_its_bound(rng):
    tiles = 200
    scores = (rng.standard_normal(100_000) * 10.0 ** rng.uniform(-8, 8, 100_000)).astype(np.float32)
    scores[:4] = (0.0, -0.0, 1e-44, -1e-44)  # zero and subnormals: the floor's share
    for tile in (0, 1, tiles - 1):
        moved = np.abs(bound.pack(scores, tile, tiles).astype(np.float64) - scores)
        assert (moved <= bound.packing_unit(tiles) * np.abs(scores.astype(np.float64)) + bound.PACKING_FLOOR).all()
    assert (bound.pack(scores, tiles - 1, tiles) != scores).mean() > 0.9  # it does move them


def test_a_margin_widened_by_the_packing_alone_is_not_certified():
    """Scores 1 and 1 + 2E, E = 2^-12, in tiles 0 and 1: the plain margin is exactly 2E (not
    certified); packed, the second score gains its tile's bit (2^-23) and the margin passes 2E.
    With packing_error added to E it is still not certified."""
    scores = np.array([[1.0, 1.0 + 2.0 ** -11]], dtype=np.float32)
    error = np.array([2.0 ** -12])
    label, packed_best, packed_second = bound.packed_best_two(scores, block_n=1)
    assert label[0] == 0 and packed_second[0] - packed_best[0] > bound.MARGIN * error[0]
    assert not bound.certified(packed_best, packed_second, error + bound.packing_error(2, 0.0, 1.0, 1.0))[0]


@pytest.mark.parametrize("d", [33, 64, 128, 408])
@pytest.mark.parametrize("offset", [0.0, 30.0])
@pytest.mark.parametrize("truncate_big", [False, True])
def test_every_emulated_tf32x3_score_is_within_its_own_bound(rng, d, offset, truncate_big):
    """The tiered re-check's scores (tf32x3 as Triton lowers it, big parts rounded or
    truncated) stay within E3, which is far tighter than the TF32 pass's E: that is what lets it
    settle most listed points without IEEE products."""
    x, c = _scene(rng, 48, d, 40, offset=offset)
    error = np.abs(bound.tf32x3_scores(x, c, truncate_big).astype(np.float64) - bound.exact_scores(x, c))
    x_norm, c_max, h_max = _bound_inputs(x, c)
    eps3, eta3 = bound.tf32x3_terms(d)
    limit = (eps3 * x_norm.astype(np.float64) * c_max + eta3 * h_max)[:, None]
    assert (error <= limit).all()
    assert (error > limit / 1e4).any()  # it does err: not exact arithmetic
    assert bound.tf32x3_eps(d) < bound.dot_eps(d) / 3  # 1/10 at d = 64, 1/4 at 408: its 3 d additions


def test_the_tf32x3_bound_covers_a_long_sum_that_piles_up():
    """As for TF32 above: every product exact, 1 first, then d - 1 products of 2^-24 that each
    round away; tf32x3 adds three times as many terms (two of them zero here)."""
    d = 2 ** 15
    x = np.full((1, d), 2.0 ** -12, dtype=np.float32)
    x[0, 0] = 1.0
    error = np.abs(bound.tf32x3_scores(x, x).astype(np.float64) - bound.exact_scores(x, x))
    x_norm, c_max, h_max = _bound_inputs(x, x)
    eps3, eta3 = bound.tf32x3_terms(d)
    assert error.max() > 2 * bound.SPLIT_UNIT ** 2 * x_norm[0] * c_max  # the sum's share, not the split's
    assert (error <= eps3 * x_norm[:, None] * c_max + eta3 * h_max).all()


def test_the_packing_error_grows_with_the_scores_it_moves():
    """Scores near -1000 = -|x| C (x_norm 1000, C 1, H 0): the best, in tile 1, gains its tile's
    bit and moves one unit in the last place (2^-14) further down, widening a margin of exactly
    2E (E = 2^-13 / 2) past 2E. packing_error's |x| C term keeps it uncertified; without that
    term (the floor alone) it would pass."""
    scores = np.array([[-1000.0 + 2.0 ** -13, -1000.0]], dtype=np.float32)
    error = np.array([2.0 ** -14])
    label, packed_best, packed_second = bound.packed_best_two(scores, block_n=1)
    assert label[0] == 1 and packed_second[0] - packed_best[0] > bound.MARGIN * error[0]
    assert not bound.certified(packed_best, packed_second, error + bound.packing_error(2, 1000.0, 1.0, 0.0))[0]
    assert bound.certified(packed_best, packed_second, error + bound.PACKING_FLOOR)[0]  # the term is needed


def test_data_whose_scores_could_near_the_packed_sentinel_are_not_packed():
    assert bound.packable(1e6) and bound.packable(1e17)
    assert not bound.packable(1e19)  # |c|^2 / 2 alone would pass 3e37


@pytest.mark.parametrize("k, block_n", [(100, 32), (300, 64)])
def test_every_listed_candidate_set_holds_the_exact_winner(rng, k, block_n):
    """What the TF32 pass lists for recheck.cu (bound.listed_candidates, as _list_candidates):
    for every uncertain row it lists, the exact winner is among the centroids scored. Near-ties
    between neighbouring centroids, so that many rows are uncertain, some with several
    candidates; exact ties across tiles."""
    d = 64
    x, c = _scene(rng, 600, d, k, offset=0.5)
    c[1::2] = c[0::2] + 1e-3 * rng.standard_normal(c[1::2].shape).astype(np.float32)  # pairs of near twins
    x[:200] = 0.5 * (c[2] + c[3])
    c[k - 1] = c[0]  # an exact tie between the first and the last tile
    scores = bound.tf32_scores(x, c)
    exact_winner = np.argmin(bound.exact_scores(x, c), axis=1)
    x_norm, c_max, h_max = _bound_inputs(x, c)
    slot_best, slot_second, tiles = bound.packed_slots(scores, block_n)
    total = bound.score_error(d, x_norm, c_max, h_max) + bound.packing_error(tiles, x_norm, c_max, h_max)
    _, best, second = bound.packed_best_two(scores, block_n)
    uncertain = ~bound.certified(best, second, total)
    listed = bound.listed_candidates(slot_best, slot_second, tiles, best + bound.MARGIN * total, 8, k)
    sets = [(row, found) for row, found in enumerate(listed) if uncertain[row] and found is not None]
    assert len(sets) > 50 and any(len(found) > 1 for _, found in sets)
    assert all(exact_winner[row] in found for row, found in sets)
    for row, found in sets:  # the plain bound's candidates are all scored
        assert set(np.flatnonzero(bound.candidates(scores[row:row + 1], best[row], total[row])[0])) <= set(found)


def test_a_slot_that_may_hide_a_third_candidate_is_scored_whole():
    """Tiles of 32, k = 96. Centroids 5, 37 and 69 at the best score share slot 5: it keeps two,
    so a third in play could be unseen, and its whole column is scored. Beside centroid 6, slot
    5's column joins 6. Spread over slots 5, 6 and 7, the three alone are; with more slots in
    play than `most`, or a crowded slot where columns are not listed, the row is left to the scan."""
    cases = (((5, 37, 69), [5, 37, 69]), ((5, 37, 6), [5, 6, 37, 69]), ((5, 6, 7), [5, 6, 7]))
    for near, expected in cases:
        row = np.full((1, 96), 10.0, dtype=np.float32)
        row[0, list(near)] = 1.0
        slot_best, slot_second, tiles = bound.packed_slots(row, 32)
        assert bound.listed_candidates(slot_best, slot_second, tiles, np.array([1.5]), 8, 96) == [expected]
    assert bound.listed_candidates(slot_best, slot_second, tiles, np.array([1.5]), 2, 96) == [None]
    row = np.full((1, 96), 10.0, dtype=np.float32)
    row[0, [5, 37]] = 1.0  # without columns (many tiles), a crowded slot leaves its row to the scan
    slot_best, slot_second, tiles = bound.packed_slots(row, 32)
    assert bound.listed_candidates(slot_best, slot_second, tiles, np.array([1.5]), 8, 96, columns=False) == [None]


@pytest.mark.parametrize("scale", [1e-18, 1e-3, 1.0, 1e6, 1e15])
def test_offset_scores_pack_in_order_with_their_tile_and_move_less_than_their_bound(rng, scale):
    """hopper_pass.cu's packing, emulated: y = (h + M) - D^ stays in M's binade, the packed ints
    order as the rounded scores (ties by tile number), give the tile back, and their value moves
    from h - D^ by at most OFFSET_UNIT M; absent centroids (the binade's largest float) are above
    every real score. Points of norms spread over three decades, so most are far below |x|max."""
    x, c = _scene(rng, 300, 8, 40, scale=scale)
    x *= (10.0 ** rng.uniform(-3, 0, (300, 1))).astype(np.float32)
    norm, c_max, h_max = _bound_inputs(x, c)
    offset = bound.score_offset(float(norm.max()), c_max, h_max)
    half = (0.5 * (c.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    dots = (x.astype(np.float64) @ c.T.astype(np.float64)).astype(np.float32)
    scores = (half[None, :] - dots).astype(np.float32)
    bits = 7
    tile = rng.integers(0, 1 << bits, size=dots.shape).astype(np.uint32)
    offset_half = (half + offset).astype(np.float32)[None, :]
    y = (offset_half - dots).astype(np.float32)  # as the kernel and offset_pack compute it
    assert ((y.view(np.uint32) & bound.EXPONENT) == (offset.view(np.uint32) & bound.EXPONENT)).all()  # one binade
    packed = bound.offset_pack(offset_half, dots, 0, bits) | tile
    assert np.array_equal(packed & np.uint32((1 << bits) - 1), tile)
    value = bound.offset_value(packed, bits, offset)
    assert (np.abs(value.astype(np.float64) - scores) <= bound.OFFSET_UNIT * float(offset)).all()
    order = np.argsort(packed, axis=1, kind="stable")
    assert (np.diff(np.take_along_axis(value, order, axis=1), axis=1) >= 0).all()
    absent = bound.offset_pack(np.full(1, (offset.view(np.uint32) | bound.MANTISSA).view(np.float32)), 0.0, 0, bits)
    assert (packed < absent).all()
    # ... and by less than the Triton pass's packing moves the largest point's scores.
    assert bound.OFFSET_UNIT * float(offset) < bound.packing_error(1 << bits, norm.max(), c_max, h_max)


def test_an_offset_score_is_within_a_limit_exactly_where_its_packed_int_is_within_the_limits_int(rng):
    x, c = _scene(rng, 200, 16, 64, offset=3.0)
    norm, c_max, h_max = _bound_inputs(x, c)
    offset = bound.score_offset(float(norm.max()), c_max, h_max)
    half = (0.5 * (c.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    dots = (x.astype(np.float64) @ c.T.astype(np.float64)).astype(np.float32)
    bits = 5
    packed = bound.offset_pack((half + offset).astype(np.float32)[None, :], dots, 0, bits)
    packed |= rng.integers(0, 1 << bits, size=packed.shape).astype(np.uint32)
    value = bound.offset_value(packed, bits, offset)
    # Limits on the scores themselves and between them, where rounding limit + M decides.
    limits = np.concatenate([value[:, :8], value[:, 8:16] + np.float32(1e-3) * rng.standard_normal((200, 8)),
                             np.nextafter(value[:, 16:24], np.float32(-np.inf))], axis=1).astype(np.float32)
    for column in range(limits.shape[1]):
        within = bound.offset_within(limits[:, column], bits, offset)
        assert np.array_equal(packed <= within[:, None], value <= limits[:, column:column + 1])
