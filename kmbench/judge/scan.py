"""One assignment from given centroids, as the judge knows it: which label each point must get
from a row of a declared precision, and which labels are admissible where rounding could go
either way. NOTES.md beside this file derives the bounds.

A point is first tried against the bounds an earlier scan left (`Seed`: the float64 reference's
scan at the same step, or the previous step of the same trajectory): its old nearest centroid's
distance now, against a lower bound on every other centroid's (the old bound less how far those
centroids moved). Where that settles it, no scan is needed. The other points are scored once:
in float32 by a matrix product (expanded distances on coordinates centred on the data's mean;
the judge's own arithmetic, shared with no row), or at low d on the CPU by a float64 direct scan
(few centroids) or SciPy's k-d tree (many), or at low d on the GPU by the judge's own fused
float64 kernel. A point whose two best scores are further apart than twice the judge's error
plus twice the row's is *clear*: its nearest centroid is known exactly, and it is the only
admissible label. Only the other points are scored again in float64, against every centroid;
their admissible labels are those within the rounding of the declared precision of the
smallest float64 distance, and the float64 decision is the smallest (lowest index on ties).

Works with NumPy or CuPy arrays (`xp`); data larger than the GPU stay in host memory and come
a block at a time (kmbench.protocol.reference.blocks).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from kmbench.judge import kernels
from kmbench.judge.points import Geometry
from kmbench.judge.precision import FLOAT32, FLOAT64, PRECISIONS, Precision, distance_factor, gamma
from kmbench.judge.seeds import Seed, bound_slack
from kmbench.protocol import reference

SCORE_ELEMENTS = 1 << 24  # points x centroids per float32 score chunk (64 MiB; up to 2 GiB on a GPU)
KD_TREE_MAX_DIM = 8  # up to here NumPy's scan finds the two nearest without a product
DIRECT_MAX_WORK = 256  # k * d up to which NumPy scores every centroid directly, not by a k-d tree
TREE_ROWS = 1 << 20  # points per k-d tree query (each query starts its threads once)
TREE_CANDIDATES = 8  # nearest centroids a near-tie is first scored against in float64 (k-d tree)
FUSED_MAX_DIM = 8  # up to here CuPy's scan runs the judge's own fused float64 kernel, not a product
FUSED_ROWS = 1 << 25  # points per fused chunk (their float64 copy: 512 MiB at d = 2)


@dataclass
class Assignment:
    """The judge's view of one assignment from `centroids` (all arrays on xp, n long):
    - nearest: the float64 decision (exact nearest centroid, lowest index on exact ties);
    - unique: the only label a row of the declared precision may give (clear points, and points
      whose float64 distances leave one label within the rounding);
    - pairs: (point, centroid) for every admissible label of the other points, sorted by point;
    - allowance: per point, twice the judge's float64 error plus twice the row's error: how far
      above the smallest distance an admissible label may lie (float32, rounded up: for reports);
    - lower: a lower bound on each point's distance to every centroid but its nearest (float32,
      rounded down), kept so that a later scan can start from this one (`seed`).
    Kept compact (int32 labels, float32 bounds): at 1e9 points they are what the GPU holds."""

    nearest: object
    unique: object
    pair_points: object
    pair_centroids: object
    allowance: object
    lower: object = None

    @property
    def near_ties(self) -> int:
        return int((~self.unique).sum())

    def seed(self, centroids) -> Seed:
        """This scan, to start a later one from (its centroids kept on the host: they are small)."""
        return Seed(reference.to_numpy(centroids).astype(np.float64), self.nearest, self.lower)


def _exact_points(x, largest_anchor: float, precision: Precision, xp):
    """Points where every form of the row's arithmetic is exact, given integer centroids and
    mean (the caller checks those once): integer coordinates, and every sum of products below
    the precision's exact-integer limit (`largest_anchor`: the largest |centroid| plus |mean|
    coordinate). Only there does rounding vanish, so only there are exact ties decided by the
    lowest-index rule."""
    integral = xp.all(x == xp.round(x), axis=1)
    largest = xp.abs(x).max(axis=1) + largest_anchor
    return integral & (x.shape[1] * largest * largest * 4 < precision.exact_below)


def _integer_anchors(centroids, mean, xp) -> float | None:
    """The largest |centroid| plus |mean| coordinate where both are integers, else None."""
    if not (bool(xp.all(centroids == xp.round(centroids))) and bool(xp.all(mean == xp.round(mean)))):
        return None
    return float(xp.abs(centroids).max()) + float(xp.abs(mean).max())


def _score_elements(xp) -> int:
    """Points x centroids per float32 score chunk: larger on a GPU, where each chunk costs a
    few launches and synchronisations, within a sixteenth of its free memory (float32 scores
    and their temporaries)."""
    if xp is np:
        return SCORE_ELEMENTS
    return int(max(SCORE_ELEMENTS, min(32 * SCORE_ELEMENTS, reference._free_bytes(xp) // 64)))


def _row_error(points, c_norm_max, c_centred_max, precision: Precision, xp):
    """E(x): a bound on how far the row's squared distance from x to any centroid is off, over
    the anchors it may centre on (the origin and the data's mean); NOTES.md, "Distances"."""
    factor = distance_factor(precision, points.x.shape[1])
    raw = points.norm + c_norm_max
    centred = points.centred_norm + c_centred_max
    return factor * xp.maximum(raw * raw, centred * centred)


def _round_up(values, xp):
    """Non-negative float64 values to a float32 at or above each: widened by 2^-22 relatively and
    2^-149 absolutely, more than rounding to the nearest float32 can take off (half an ulp: 2^-24
    relatively, 2^-150 among subnormals). Past float32's largest, inf: still a bound above (data
    of 1e30 get there), and no warning to say."""
    with np.errstate(over="ignore"):
        return (values * (1 + 2.0 ** -22) + 2.0 ** -149).astype(xp.float32)


def _round_down(values, xp):
    """Non-negative float64 values to a float32 at or below each (the same margins, taken off;
    past float32's largest, its largest: inf would be no bound)."""
    largest = float(np.finfo(np.float32).max)
    return xp.clip(values * (1 - 2.0 ** -22) - 2.0 ** -149, 0.0, largest).astype(xp.float32)


def _product_precision(xp) -> Precision:
    """What the judge's own float32 product computes in: TF32 where CuPy is told to use it."""
    return PRECISIONS["tf32"] if xp is not np and os.environ.get("CUPY_TF32") == "1" else FLOAT32


def _top_two(scores, xp):
    """(smallest, second smallest, index of the smallest) of each row of `scores` (overwritten)."""
    rows = xp.arange(scores.shape[0])
    best = xp.argmin(scores, axis=1)
    first = scores[rows, best]
    if scores.shape[1] > 1:
        scores[rows, best] = xp.inf
        second = scores.min(axis=1)
    else:
        second = xp.full(scores.shape[0], xp.inf, dtype=scores.dtype)
    return first, second, best


class _Scorer:
    """Scores chosen points against every centroid of one assignment: (d1, d2, nearest) and the
    factor K of the judge's own error K (|x'| + max |c'|)^2 on those distances."""

    def __init__(self, c_centred, mean, xp):
        self.xp, self.mean = xp, mean
        self.k, self.d = c_centred.shape
        self.c_centred = c_centred
        self.tree = self.direct = self.fused = False
        if xp is np and self.d <= KD_TREE_MAX_DIM and self.k > 1:
            self.direct = self.k * self.d <= DIRECT_MAX_WORK
            if not self.direct:
                from scipy.spatial import cKDTree

                self.tree = cKDTree(c_centred)
        self.fused = xp is not np and self.d <= FUSED_MAX_DIM and self.k > 1
        exact64 = self.tree is not False or self.direct or self.fused
        self.factor = distance_factor(FLOAT64 if exact64 else _product_precision(xp), self.d)
        if not exact64:
            c32 = c_centred.astype(xp.float32)
            half = (c32.astype(xp.float64) ** 2).sum(axis=1).astype(xp.float32)  # |c'|^2, rounded once
            # The NumPy product scores |c'|^2 - 2 x'.c' in one GEMM of d + 1 terms (x' with a 1,
            # c' times -2 with |c'|^2): no pass over the scores before the two smallest are found.
            self.c32, self.half = c32, half
            self.augmented = xp.concatenate([-2 * c32, half[:, None]], axis=1) if xp is np else None

    def rows_per_chunk(self, xp) -> int:
        if self.fused:
            return FUSED_ROWS
        if self.tree is not False:
            return TREE_ROWS
        return max(1, _score_elements(xp) // max(self.k, 1))

    def nearest_few(self, x_centred):
        """(float64 squared distances, centroid indices) of the TREE_CANDIDATES nearest, nearest first."""
        distances, index = self.tree.query(x_centred, k=TREE_CANDIDATES, workers=-1)
        return distances ** 2, index

    def best_two(self, points, rows):
        """(d1, d2, nearest) of the chosen rows of `points`."""
        xp = self.xp
        if self.fused:
            return kernels.fused_best_two(points.float64(rows), self.c_centred, self.mean, xp)
        x_centred = points.centred(rows)
        if self.tree is not False:
            distances, index = self.tree.query(x_centred, k=2, workers=-1)
            return distances[:, 0] ** 2, distances[:, 1] ** 2, index[:, 0]
        if self.direct:
            return _direct_best_two(x_centred, self.c_centred)
        common = points.centred_norm[rows] ** 2
        x32 = x_centred.astype(xp.float32)
        if xp is np:
            scores = np.concatenate([x32, np.ones((x32.shape[0], 1), np.float32)], axis=1) @ self.augmented.T
            d1, d2, best = _top_two(scores, xp)
        else:
            d1, d2, best = kernels.scored_best_two(x32 @ self.c32.T, self.half, xp)
        return d1.astype(xp.float64) + common, d2.astype(xp.float64) + common, best


DIRECT_BLOCK = 8192  # points per block of the NumPy direct scan: its dozen arrays stay in cache


def _direct_best_two(x_centred, c_centred):
    """(d1, d2, nearest) in float64, sum of (x' - c')^2, for NumPy with few centroids: a block of
    points at a time, one centroid at a time over contiguous columns, every operation in place (a
    points x centroids matrix and its top two cost several times more in passes over memory); the
    first of equal smallest is the lowest index."""
    n = x_centred.shape[0]
    first, second, nearest = np.empty(n), np.empty(n), np.empty(n, dtype=np.int64)
    for start in range(0, n, DIRECT_BLOCK):
        rows = slice(start, start + DIRECT_BLOCK)
        first[rows], second[rows], nearest[rows] = _direct_block(x_centred[rows], c_centred)
    return first, second, nearest


def _direct_block(x_centred, c_centred):
    columns = np.ascontiguousarray(x_centred.T)
    n = columns.shape[1]
    first, second = np.full(n, np.inf), np.full(n, np.inf)
    nearest, step = np.zeros(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    distance, part, closer = np.empty(n), np.empty(n), np.empty(n, dtype=bool)
    for j, centre in enumerate(c_centred):
        np.subtract(columns[0], centre[0], out=distance)
        np.square(distance, out=distance)
        for dim in range(1, columns.shape[0]):
            np.subtract(columns[dim], centre[dim], out=part)
            np.square(part, out=part)
            distance += part
        # Masked copies are slow in NumPy (a millisecond per 1e5): min and max do the same here.
        # The second smallest of {first, second, distance} is min(second, max(first, distance)).
        np.less(distance, first, out=closer)
        np.maximum(first, distance, out=part)
        np.minimum(second, part, out=second)
        np.minimum(first, distance, out=first)
        np.subtract(nearest, j, out=step)  # nearest becomes j where this centroid is strictly closer
        np.multiply(step, closer, out=step)
        np.subtract(nearest, step, out=nearest)
    return first, second, nearest


def _direct_error(d_a, d_b, reach, factor: float, unit: float):
    """E(x, c_a) + E(x, c_b) for a row that declares direct distances, sum of (x - c)^2: each is
    off by gamma_{d+2} |x - c|^2 plus what rounding the shifted coordinates or the stored centroid
    moves it: each point and centroid may be rounded twice (to the working format, then after the
    shift), so |x - c| moves by at most 2 u S, adding 4 u |x - c| S + 4 u^2 S^2 (NOTES.md,
    "Direct distances")."""
    roots = d_a.clip(0) ** 0.5 + d_b.clip(0) ** 0.5
    return factor * (d_a + d_b) + 4 * unit * reach * roots + 8 * unit * unit * reach * reach


MOVERS = 16  # at most this many centroids that moved most are measured exactly, not bounded by their move
MOVER_RATIO = 2.0  # ... and only those that moved this many times more than the rest's largest
PROBE_POINTS = 2048  # points a seed is first tried on, where a chunk has more than PROBE_FROM
PROBE_FROM = 1 << 15
PROBE_SETTLED = 0.05  # the share of them it must settle to be tried on the rest


def _carried(seed, centroids, xp):
    """What a seed's lower bounds must give up at these centroids (NOTES.md, "Carried bounds"):
    per centroid j, the most any other centroid moved (`other`); the few centroids that moved far
    more than the rest (`movers`), whose distances may be measured instead; and per centroid j the
    most any other centroid but j and the movers moved (`rest`)."""
    moved = reference.to_numpy(seed.moved(centroids, xp))
    k = moved.shape[0]
    order = np.argsort(moved)[::-1]
    movers = np.zeros(0, dtype=np.int64)
    if k > MOVERS + 2:
        limit = MOVER_RATIO * moved[order[MOVERS]]
        movers = order[:MOVERS][moved[order[:MOVERS]] > limit]
    kept = moved.copy()
    kept[movers] = 0.0
    return xp.asarray(_largest_but_own(moved)), movers, xp.asarray(_largest_but_own(kept))


def _largest_but_own(moved: np.ndarray) -> np.ndarray:
    """Per centroid j, the largest of `moved` over every other centroid."""
    out = np.zeros_like(moved)
    if moved.shape[0] > 1:
        first = int(np.argmax(moved))
        out[:] = moved[first]
        out[first] = np.max(np.delete(moved, first))
    return out


def _measured_lower(below, was, x, c64, movers, xp):
    """`below` (a bound on every centroid but the movers and `was`) lowered to each mover's
    distance, measured in float64."""
    slack = bound_slack(x.shape[1])
    for mover in movers.tolist():  # few: `_carried` keeps only those that moved far more than the rest
        gap = x - c64[mover]
        distance = xp.sqrt(reference.row_squares(gap, xp)) * (1 - slack)
        below = xp.minimum(below, xp.where(was == mover, xp.inf, distance))
    return below


def _rows_of_seed(array, start: int, stop: int, xp):
    """Rows start:stop of a seed's array where xp computes: a view where it is already there, else
    a copy of those rows only (a seed kept in host memory goes to a GPU a chunk at a time)."""
    part = array[start:stop]
    return reference.to_numpy(part) if xp is np else xp.asarray(part)


def _index_type(n: int):
    """The narrowest integer type that numbers n points (pairs name their point in it)."""
    return np.int32 if n < 2**31 else np.int64


def assign(data, centroids, precision: Precision, geometry: Geometry, xp=np, direct: bool = False,
           seeds=(), bounds: bool = True) -> Assignment:
    """The judge's assignment from `centroids` (k, d) for a row of `precision`; direct: the row
    declares that it computes sum of (x - c)^2 (a bound relative to each distance, not to |x|^2);
    seeds: earlier scans of the same data whose carried bounds may settle points unscanned;
    bounds: keep each point's lower bound (`Assignment.lower`), for a scan to start from later.

    Its per-point fields are filled in place, chunk by chunk, in arrays of n made once (13 bytes
    a point: the chunks' parts and their concatenation would be twice that at the end); the pairs,
    of unknown number, are gathered by chunk, sorted within it (chunks come in point order, so
    that sorts them all) and joined once (NOTES.md, "The judge's memory")."""
    k, d = centroids.shape
    n = data.shape[0]
    direct = direct and precision.input == precision.accumulate == precision.store
    direct_factor = gamma(d + 2, precision.accumulate)
    c64 = xp.asarray(centroids, dtype=xp.float64)
    mean = geometry.mean
    c_centred = c64 - mean
    c_norm_max = float(xp.sqrt((c64 * c64).sum(axis=1)).max())
    c_centred_max = float(xp.sqrt((c_centred * c_centred).sum(axis=1)).max())
    judge64 = distance_factor(FLOAT64, d)
    scorer = _Scorer(c_centred, mean, xp)
    # A seed's per-point arrays stay where they are kept (a GPU, or host memory) and come to xp
    # a chunk at a time (`_rows_of_seed`).
    carried = [(seed, *_carried(seed, c64, xp)) for seed in seeds
               if tuple(seed.centroids.shape) == (k, d)]  # (seed, other, movers, rest)
    out = Assignment(xp.empty(n, dtype=xp.int32), xp.empty(n, dtype=bool), None, None,
                     xp.empty(n, dtype=xp.float32), xp.empty(n, dtype=xp.float32) if bounds else None)
    pairs = {"pair_points": [], "pair_centroids": []}  # by chunk, each sorted by point, then centroid
    point_type = _index_type(n)
    # Per-point work in large chunks (a chunk costs launches on a GPU); the scorer takes its rows
    # in batches of its own within a chunk.
    step = scorer.rows_per_chunk(xp) if xp is np else max(1, reference.chunk_elements(xp) // (d + 1))
    anchors = _integer_anchors(c64, mean, xp)
    for first, block in reference.blocks(data, xp):
        for start in range(0, block.shape[0], step):
            points = geometry.rows(block, first, start, min(start + step, block.shape[0]), xp)
            x, x_centred_norm = points.x, points.centred_norm  # x as stored: float64 only where needed
            offset = first + start
            spread_term = (x_centred_norm + c_centred_max) ** 2
            exact = (xp.zeros(x.shape[0], dtype=bool) if anchors is None
                     else _exact_points(points.float64(), anchors, precision, xp))
            if direct:
                reach = xp.maximum(points.norm + c_norm_max, x_centred_norm + c_centred_max)
                pair_error = None
            else:
                row_error = xp.where(exact, 0.0, _row_error(points, c_norm_max, c_centred_max, precision, xp))
                pair_error = 2 * row_error

            need = xp.zeros(x.shape[0])  # per point: E(x, c_1) + E(x, c_2), the row's share of the gap

            def separated(d1, d2, rows, judge_error):
                """Are the two smallest squared distances d1 <= d2 of these points, each known within
                judge_error, too far apart for any row of the declared precision to swap them?"""
                if direct:
                    need[rows] = xp.where(exact[rows], 0.0, _direct_error(d1, d2, reach[rows], direct_factor,
                                                                           precision.accumulate))
                else:
                    need[rows] = pair_error[rows]
                if k == 1:
                    return xp.ones(d1.shape, dtype=bool)  # one centroid: one label, whatever the scores
                # Scores that overflowed (or are NaN) decide nothing: float64 scores those points again.
                apart = (d2 - d1) > 2 * judge_error + need[rows]
                return apart & xp.isfinite(d1) & xp.isfinite(d2)

            nearest = xp.zeros(x.shape[0], dtype=xp.int32)
            lower = xp.zeros(x.shape[0], dtype=xp.float64)
            clear = xp.zeros(x.shape[0], dtype=bool)
            chunk_pairs = {"pair_points": [], "pair_centroids": []}

            def carry(seed_rows, other, movers, rest, rows):
                """(settled, nearest, lower bound) of these points (a slice, or their indices in the
                chunk) by the seed's carried bounds alone (`seed_rows`: its nearest and lower bounds
                of the chunk's points): every other centroid bounded by the largest move first;
                then, for the points that leaves open, the movers measured."""
                seed_nearest, seed_lower = seed_rows
                index = xp.arange(x.shape[0]) if isinstance(rows, slice) else rows
                was = seed_nearest[rows].astype(xp.int64)
                here = x[rows]
                gap = here - c64[was]  # float64, whatever the data's dtype
                upper = xp.sqrt(reference.row_squares(gap, xp)) * (1 + bound_slack(d))
                carried_lower = seed_lower[rows].astype(xp.float64) * (1 - bound_slack(d))
                below = carried_lower - other[was]
                # 2 je each side: the float64 re-check admits a label whose computed gap is within need +
                # 2 je, exact gaps up to need + 4 je, and a point must not be settled where it would not be.
                settled = (below > upper) & separated(upper * upper, below * below, index,
                                                      2 * judge64 * spread_term[index])
                if movers.size:
                    open_ = xp.nonzero(~settled)[0]
                    sharper = _measured_lower(carried_lower[open_] - rest[was[open_]], was[open_], here[open_], c64,
                                              movers, xp)
                    below[open_] = xp.maximum(below[open_], sharper)  # both bound the same distances from below
                    up = upper[open_]
                    settled[open_] = (below[open_] > up) & separated(up * up, below[open_] ** 2, index[open_],
                                                                     2 * judge64 * spread_term[index[open_]])
                return settled, was, below

            left = slice(None)  # every point of the chunk, until a seed settles some
            for seed, other, movers, rest in carried:  # NOTES.md, "Carried bounds"
                count = x.shape[0] if isinstance(left, slice) else left.size
                if count == 0:
                    break
                seed_rows = tuple(_rows_of_seed(a, offset, offset + x.shape[0], xp) for a in (seed.nearest, seed.lower))
                if count > PROBE_FROM:  # try a few first: a seed that settles almost none costs a pass
                    sample = xp.arange(0, x.shape[0], x.shape[0] // PROBE_POINTS) if isinstance(left, slice) \
                        else left[:: count // PROBE_POINTS]
                    if float(carry(seed_rows, other, movers, rest, sample)[0].mean()) < PROBE_SETTLED:
                        continue
                settled, was, below = carry(seed_rows, other, movers, rest, left)
                chosen = xp.nonzero(settled)[0] if isinstance(left, slice) else left[settled]
                nearest[chosen], lower[chosen], clear[chosen] = was[settled], below[settled], True
                left = xp.nonzero(~settled)[0] if isinstance(left, slice) else left[~settled]
            per_score = scorer.rows_per_chunk(xp)  # the scorer's own memory bound (n x k scores)
            count = x.shape[0] if isinstance(left, slice) else left.size
            for part in range(0, count, per_score):  # a slice while no seed settled any point: no gather
                rows = slice(part, part + per_score) if isinstance(left, slice) else left[part : part + per_score]
                d1, d2, best = scorer.best_two(points, rows)
                judge_error = scorer.factor * spread_term[rows]
                found = separated(d1, d2, rows, judge_error)
                nearest[rows] = best
                clear[rows] = found
                lower[rows] = xp.sqrt(xp.maximum(d2 - judge_error, 0.0))
            unique = clear.copy()
            allowance = need + 2 * xp.where(exact, 0.0, judge64 * spread_term)
            judged = 2 * xp.where(exact, 0.0, judge64 * spread_term)  # the judge's own float64 error, twice

            def settle(pending, distances, columns):
                """The points `pending` scored in float64 against candidate centroids (`columns`, or
                None: every centroid in order): their float64 decision (lowest index on exact ties),
                admissible labels and lower bounds. Returns which were settled: with candidates, those
                whose farthest candidate is not admissible (so no centroid beyond it is)."""
                smallest = distances.min(axis=1)
                if columns is None:
                    closest = xp.argmin(distances, axis=1)  # the first of equal minima: the lowest index
                else:
                    closest = xp.where(distances == smallest[:, None], columns, k).min(axis=1)
                if direct:
                    slack = _direct_error(distances, smallest[:, None], reach[pending][:, None], direct_factor,
                                          precision.accumulate)
                    slack = xp.where(exact[pending][:, None], 0.0, slack) + judged[pending][:, None]
                    allowed = distances <= smallest[:, None] + slack
                else:
                    allowed = distances <= (smallest + allowance[pending])[:, None]
                done = None
                if columns is not None and columns.shape[1] < k:
                    done = ~allowed[:, -1]
                    pending, columns, distances, allowed, closest = (
                        a[done] for a in (pending, columns, distances, allowed, closest))
                nearest[pending] = closest
                # Where the arithmetic is exact, an exact tie goes to the lowest index, nowhere else.
                several_mask = (allowed.sum(axis=1) > 1) & ~exact[pending]
                unique[pending] = ~several_mask
                several = xp.nonzero(several_mask)[0]
                point_index, column = xp.nonzero(allowed[several])
                chunk_pairs["pair_points"].append(pending[several][point_index] + offset)
                chunk_pairs["pair_centroids"].append(column if columns is None else columns[several][point_index, column])
                if columns is None:
                    distances[xp.arange(pending.size), closest] = xp.inf
                    second = distances.min(axis=1)
                else:
                    second = xp.where(columns == closest[:, None], xp.inf, distances).min(axis=1)
                lower[pending] = xp.sqrt(xp.maximum(second - judge64 * spread_term[pending], 0.0))
                return done

            waiting = xp.nonzero(~clear)[0]
            rows_at_once = max(1, (SCORE_ELEMENTS * (1 if xp is np else 8)) // max(k, 1))  # float64 rows
            for part in range(0, waiting.size, rows_at_once):  # float64 rows: bounded memory
                pending = waiting[part : part + rows_at_once]
                if scorer.tree is not False and k > TREE_CANDIDATES:  # most near-ties have two or three labels
                    pending = pending[~settle(pending, *scorer.nearest_few(points.centred(pending)))]
                if pending.size:
                    near = points.centred(pending)
                    settle(pending, (near * near).sum(axis=1)[:, None] - 2 * (near @ c_centred.T)
                           + (c_centred * c_centred).sum(axis=1)[None, :], None)
            mine = slice(offset, offset + x.shape[0])
            out.nearest[mine] = nearest
            out.unique[mine] = unique
            out.allowance[mine] = _round_up(allowance, xp)
            if bounds:
                out.lower[mine] = _round_down(lower, xp)
            if chunk_pairs["pair_points"]:
                points_of, centroids_of = (xp.concatenate(chunk_pairs[name]) for name in chunk_pairs)
                if scorer.tree is not False:  # `admissible` looks pairs up by point, then centroid: the tree's come by distance
                    order = np.argsort(points_of.astype(np.int64) * k + centroids_of, kind="stable")
                    points_of, centroids_of = points_of[order], centroids_of[order]
                pairs["pair_points"].append(points_of.astype(point_type))
                pairs["pair_centroids"].append(centroids_of.astype(xp.int32))
    for name, kind in (("pair_points", point_type), ("pair_centroids", np.int32)):
        setattr(out, name, xp.concatenate(pairs[name]) if pairs[name] else xp.zeros(0, dtype=kind))
        pairs[name] = None
    return out


def as_labels(labels, xp=np):
    """A row's labels on xp as integers: as given where they are int32 or int64 (no copy of n on
    the judge's side), else as int64."""
    labels = xp.asarray(labels)
    return labels if labels.dtype in (np.int32, np.int64) else labels.astype(xp.int64)


def admissible(assignment: Assignment, labels, k: int, xp=np):
    """Per point: may a row of the declared precision give it `labels`?"""
    labels = as_labels(labels, xp)
    ok = assignment.unique & (labels == assignment.nearest)
    tied = xp.nonzero(~assignment.unique)[0]
    if tied.size:
        keys = assignment.pair_points.astype(xp.int64)  # in place from here: 8 bytes a pair
        keys *= k
        keys += assignment.pair_centroids
        wanted = tied * k + labels[tied]
        place = xp.minimum(xp.searchsorted(keys, wanted), keys.size - 1)
        ok[tied] = keys[place] == wanted  # every tied point has at least two pairs
    return ok
