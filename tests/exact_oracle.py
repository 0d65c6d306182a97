"""A second opinion on one Lloyd step, in exact arithmetic (fractions.Fraction: every float is an
exact rational), for small problems: which labels and centroids a row of a declared precision
may give, as kmbench/judge/NOTES.md derives them, decided without a single rounding.

It shares no code with the judge. The precisions are defined here again from their formats
(bits of significand), and `test_judge_exact.py` checks the judge's table against them; the
bounds are NOTES.md's formulas, written out once more:
- "Distances": E(x) = K(d) max_a (|x - a| + max_j |c_j - a|)^2, a in {0, m} (m the data's mean),
  K(d) = 2 u_in + u_in^2 + gamma_{d+8}(u_acc) + 2 u_store; for rows that declare direct
  distances, E(x, c) = gamma_{d+2}(u) |x - c|^2 + 4 u |x - c| S + 4 u^2 S^2; the judge's own
  float64 error Ej(x) = K_64(d) (|x - m| + max_j |c_j - m|)^2 on each distance;
- "Exact ties": integer data, centroids and mean, 4 d L^2 below the exact-integer limit;
- "Means": (gamma_{n_j+2}(u_acc) + u_in) W_j / n_j + 3 u_store |mean_j|, the judge's own float64
  sum adding gamma_{n_j+2}(2^-53) W_j / n_j; "Empty clusters": 2 u_store |c_j_old|.

A bound is a real number the judge computes in float64; the oracle computes it exactly (square
roots to 2^-120, far below MARGIN) and says of each label and centroid one of three things:
surely within (the judge must accept it), surely outside (it must refuse it), or in the band
between, where the judge's own float64 error (which NOTES.md also bounds) may decide either way.
The band is the bound times 1 +- MARGIN, plus the judge's own error where it has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction as Q
from math import isqrt

import numpy as np

MARGIN = Q(1, 10**6)  # relative: far above the judge's float64 rounding of its own bounds (~1e-15)


@dataclass(frozen=True)
class Format:
    """A declared precision from its formats: the significand bits of the inputs the arithmetic
    sees, of its accumulation (tensor cores may truncate FP32 accumulation: 22 bits), of the
    stored centroid, and the exact-integer limit of the inputs' format."""

    name: str
    input_bits: int
    accumulate_bits: int
    store_bits: int

    @property
    def u_in(self) -> Q:
        return Q(1, 2 ** self.input_bits)

    @property
    def u_acc(self) -> Q:
        return Q(1, 2 ** self.accumulate_bits)

    @property
    def u_store(self) -> Q:
        return Q(1, 2 ** self.store_bits)

    @property
    def exact_below(self) -> int:
        """Integers up to 2^p are exact in a p-bit significand (p counting the hidden bit)."""
        return 2 ** self.input_bits


# float64: 53 bits; float32: 24; TF32 and float16: 11 (10 stored, 1 hidden); bfloat16: 8.
FORMATS = {
    "float64": Format("float64", 53, 53, 53),
    "float32": Format("float32", 24, 24, 24),
    "tf32": Format("tf32", 11, 22, 24),  # TF32 inputs, truncating FP32 accumulation, float32 centroids
    "float16": Format("float16", 11, 22, 11),  # float16 inputs and centroids, tensor-core accumulation
    "bfloat16": Format("bfloat16", 8, 22, 8),
}
FLOAT64 = FORMATS["float64"]


def exact(array) -> list[list[Q]]:
    """A 2-D array's values as exact rationals."""
    return [[Q(float(v)) for v in row] for row in np.asarray(array)]


def root(q: Q) -> Q:
    """sqrt(q) to within 2^-120 of its value, relatively."""
    if q <= 0:
        return Q(0)
    scale = 2 ** 130
    top = isqrt(q.numerator * q.denominator * scale * scale)
    return Q(top, q.denominator * scale)


def gamma(m: int, u: Q) -> Q | None:
    """gamma_m = m u / (1 - m u); None where m u >= 1/2 (no bound at all)."""
    mu = m * u
    return None if mu >= Q(1, 2) else mu / (1 - mu)


def distance_factor(f: Format, d: int) -> Q:
    return 2 * f.u_in + f.u_in ** 2 + gamma(d + 8, f.u_acc) + 2 * f.u_store


def squared(a, b) -> Q:
    return sum(((p - q) ** 2 for p, q in zip(a, b)), Q(0))


def norm(a) -> Q:
    return root(sum((v * v for v in a), Q(0)))


@dataclass
class Labels:
    """Per point: the exact nearest (lowest index on exact ties), the labels the judge must
    accept (`surely`), and those it may accept (`possibly`, a superset): outside it, refused."""

    nearest: list[int]
    surely: list[set]
    possibly: list[set]
    exact_points: list[bool]


class Step:
    """The exact figures of one Lloyd step from `previous` on `data` for a row of `precision`."""

    def __init__(self, data, previous, precision: str, direct: bool = False):
        self.x, self.c = exact(data), exact(previous)
        self.n, self.d, self.k = len(self.x), len(self.x[0]), len(self.c)
        self.f = FORMATS[precision]
        # Direct distances are allowed only where one unit does all (NOTES.md, "Direct distances"):
        # `declared` is what the row says, `direct` the bound it gets.
        self.declared = direct
        self.direct = direct and self.f.input_bits == self.f.accumulate_bits == self.f.store_bits
        self.m = [sum(col, Q(0)) / self.n for col in zip(*self.x)]
        self.distances = [[squared(x, c) for c in self.c] for x in self.x]
        self.labels = self._labels()

    def _exact_points(self) -> list[bool]:
        """Where every form of the row's arithmetic is exact: integer data, centroids and mean, and
        every sum of products within the limit. With L = max |x_i| + max |c_i| + max |m_i|, each
        shifted coordinate is at most L, each product L^2, and |x'|^2 + 2 |x'.c'| + |c'|^2 at most
        4 d L^2."""
        integral = lambda values: all(v.denominator == 1 for v in values)  # noqa: E731
        if not (integral(v for c in self.c for v in c) and integral(self.m)):
            return [False] * self.n
        anchor = max(abs(v) for c in self.c for v in c) + max(abs(v) for v in self.m)
        return [integral(x) and 4 * self.d * (max(abs(v) for v in x) + anchor) ** 2 < self.f.exact_below
                for x in self.x]

    def _labels(self) -> Labels:
        k, d = self.k, self.d
        c_raw = max(norm(c) for c in self.c)
        c_centred = max(norm([a - b for a, b in zip(c, self.m)]) for c in self.c)
        factor, judge_factor = distance_factor(self.f, d), distance_factor(FLOAT64, d)
        exact_points = self._exact_points()
        nearest, surely, possibly, self._shares = [], [], [], []
        for i, x in enumerate(self.x):
            row = self.distances[i]
            w = min(range(k), key=lambda j: (row[j], j))
            nearest.append(w)
            if exact_points[i]:
                surely.append({w}), possibly.append({w}), self._shares.append([Q(0)] * k)
                continue
            spread_term = (norm([a - b for a, b in zip(x, self.m)]) + c_centred) ** 2
            judge = judge_factor * spread_term  # the judge's own float64 error on one distance
            if self.direct:
                reach = max(norm(x) + c_raw, root(spread_term))
                share = [self._direct_error(row[j], reach) + self._direct_error(row[w], reach) for j in range(k)]
            else:
                e = factor * max((norm(x) + c_raw) ** 2, spread_term)
                share = [2 * e] * k
            self._shares.append(share)
            surely.append({j for j in range(k) if row[j] - row[w] <= share[j] * (1 - MARGIN)})
            possibly.append({j for j in range(k) if row[j] - row[w] <= (share[j] + 4 * judge) * (1 + MARGIN)})
        return Labels(nearest, surely, possibly, exact_points)

    def _direct_error(self, distance: Q, reach: Q) -> Q:
        u = self.f.u_acc
        return gamma(self.d + 2, u) * distance + 4 * u * root(distance) * reach + 4 * u * u * reach * reach

    # Means --------------------------------------------------------------------------------------

    def means(self, labels) -> list[list[Q] | None]:
        """The exact mean of the points each cluster was given (None: an empty cluster)."""
        out = []
        for j in range(self.k):
            members = [x for x, own in zip(self.x, labels) if own == j]
            out.append([sum(col, Q(0)) / len(members) for col in zip(*members)] if members else None)
        return out

    def mean_bounds(self, labels, j: int) -> tuple[Q, Q]:
        """(the row's bound, the judge's own float64 sum's bound) on |c_j - mean_j| for the points
        labelled j; for an empty cluster, (2 u_store |c_j_old|, 0)."""
        members = [x for x, own in zip(self.x, labels) if own == j]
        if not members:
            return 2 * self.f.u_store * norm(self.c[j]), Q(0)
        count = len(members)
        weights = sum((max(norm(x), norm([a - b for a, b in zip(x, self.m)]),
                           norm([a - b for a, b in zip(x, self.c[j])])) for x in members), Q(0))
        mean = [sum(col, Q(0)) / count for col in zip(*members)]
        row_gamma = gamma(count + 2, self.f.u_acc)
        if row_gamma is None:
            return None, None
        return ((row_gamma + self.f.u_in) * weights / count + 3 * self.f.u_store * norm(mean),
                gamma(count + 2, FLOAT64.u_acc) * weights / count)

    def centroid_verdict(self, labels, new, j: int) -> str:
        """'within', 'outside' or 'band' for centroid j of a row that gave `labels`."""
        target = self.means(labels)[j]
        target = self.c[j] if target is None else target
        row, judge = self.mean_bounds(labels, j)
        if row is None:
            return "band"  # no worst-case bound: the judge checks nothing
        gap = root(squared(exact([new[j]])[0], target))
        if gap <= row * (1 - MARGIN):
            return "within"
        if gap > (row + 2 * judge) * (1 + MARGIN):
            return "outside"
        return "band"

    def verdict(self, labels, new) -> str:
        """'within' where the judge must accept the step (labels and centroids), 'outside' where it
        must refuse it, else 'band'."""
        labels = [int(v) for v in labels]
        if any(own not in can for own, can in zip(labels, self.labels.possibly)):
            return "outside"
        centroids = [self.centroid_verdict(labels, new, j) for j in range(self.k)]
        if "outside" in centroids:
            return "outside"
        if all(own in can for own, can in zip(labels, self.labels.surely)) and set(centroids) == {"within"}:
            return "within"
        return "band"

    def fixed_clusters(self) -> list[bool]:
        """Clusters no point may join or leave, whatever a row of the precision decides: each
        point it holds has only it as a possible label, and no other point may take it. For these
        a row that reports no labels is judged as one that does."""
        out = [True] * self.k
        for own, can in zip(self.labels.nearest, self.labels.possibly):
            if len(can) > 1:
                for j in can | {own}:
                    out[j] = False
        return out

    # Without labels (NOTES.md, "Without labels") -------------------------------------------------

    def partition_is_certain(self) -> bool:
        """Does every point have the same admissible labels whatever the judge's own rounding? Then
        the judge's clear and ambiguous points are the oracle's, and its region for each mean is
        a figure the oracle can compute exactly."""
        return all(s == p for s, p in zip(self.labels.surely, self.labels.possibly))

    def _weight(self, x, j: int) -> Q:
        """A summand's largest norm over the anchors a row may subtract: 0, m, c_j_old."""
        return max(norm(x), norm([a - b for a, b in zip(x, self.m)]), norm([a - b for a, b in zip(x, self.c[j])]))

    def region(self, j: int) -> dict | None:
        """Where a row that reports no labels may put centroid j (NOTES.md, "Without labels"): the
        clear points F_j (j their only label) and the ambiguous A_j (j one of theirs) give a ball
        about mean(F_j) and a box about mean(F_j) and A_j, each widened by the sum's rounding."""
        possibly = self.labels.possibly
        fixed = [x for x, can in zip(self.x, possibly) if can == {j}]
        open_ = [x for x, can in zip(self.x, possibly) if len(can) > 1 and j in can]
        mean = [sum(col, Q(0)) / len(fixed) for col in zip(*fixed)] if fixed else self.c[j]
        count = len(fixed) + len(open_)
        row_gamma = gamma(count + 2, self.f.u_acc)
        if row_gamma is None:
            return None
        factor = row_gamma + self.f.u_in + gamma(count + 2, FLOAT64.u_acc)
        weights = sum((self._weight(x, j) for x in fixed + open_), Q(0))
        per = max(len(fixed), 1)
        away = sum((norm([a - b for a, b in zip(x, mean)]) for x in open_), Q(0))
        out = {"fixed": bool(fixed), "open": bool(open_), "mean": mean, "judge": 2 * gamma(count + 2, FLOAT64.u_acc)
               * weights / per, "radius": factor * weights / per + 3 * self.f.u_store * (norm(mean) + away / per)
               + away / per, "kept": 2 * self.f.u_store * norm(self.c[j])}
        if open_:
            corners = open_ + ([mean] if fixed else [])
            out["low"] = [min(col) for col in zip(*corners)]
            out["high"] = [max(col) for col in zip(*corners)]
            reach = max(max(abs(v) for v in out["low"]), max(abs(v) for v in out["high"]))
            out["margin"] = factor * weights / per + 3 * self.f.u_store * reach
        return out

    def labelless_verdict(self, new) -> str:
        """'within', 'outside' or 'band' for a step without labels, against NOTES.md's region; only
        where the partition is certain (else 'band')."""
        if not self.partition_is_certain():
            return "band"
        any_open = any(len(can) > 1 for can in self.labels.possibly)
        verdicts = []
        for j in range(self.k):
            place, c = self.region(j), exact([new[j]])[0]
            if place is None:
                verdicts.append("band")
                continue
            low, high = 1 - MARGIN, 1 + MARGIN
            moved = root(squared(c, self.c[j]))
            kept = "within" if moved <= place["kept"] * low else "outside" if moved > place["kept"] * high else "band"
            if place["fixed"]:
                gap = root(squared(c, place["mean"]))
                verdicts.append("within" if gap <= place["radius"] * low else "outside"
                                if gap > (place["radius"] + place["judge"]) * high else "band")
            elif not place["open"]:
                verdicts.append(kept)
            if place["open"] and any_open:
                outside = max(max(lo - place["margin"] - v, v - hi - place["margin"])
                              for v, lo, hi in zip(c, place["low"], place["high"]))
                box = ("within" if outside <= -MARGIN * place["margin"] else "outside"
                       if outside > MARGIN * place["margin"] + place["judge"] else "band")
                verdicts.append("within" if box == "within" or (not place["fixed"] and kept == "within") else
                                "outside" if box == "outside" and (place["fixed"] or kept == "outside") else "band")
        return "outside" if "outside" in verdicts else "within" if set(verdicts) <= {"within"} else "band"

    def share(self, i: int, j: int) -> Q:
        """How far above point i's smallest distance label j may lie for a row of this precision
        (the row's own share of the gap: 2 E(x), or E(x, c_j) + E(x, c_w) for direct rows)."""
        return self._shares[i][j]
