"""The judge against a second opinion in exact arithmetic (tests/exact_oracle.py), on small problems
drawn near the edges: exact ties (integer data within and past the exact-integer limit, points on a
bisector), points about as far from a bisector as the rounding bound, empty clusters, data far from
the origin, every declared precision, direct and expanded distances, with and without labels.

Each row is built from the oracle: labels among those it says any admissible rounding may give, or
one it says none can; centroids at a chosen share of the mean's rounding bound, or the float32
rounding of the exact mean. The judge must accept every step the oracle shows is within its bounds
and refuse every step the oracle shows is outside them (steps in the band between, where the
judge's own float64 error may decide, are not asserted). Deterministic: hypothesis derandomized."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmbench.judge import precision as judge_precision
from kmbench.judge import trajectory
from kmbench.judge.certify import Certifier
from kmbench.protocol import Implementation, Problem, Result
from tests.exact_oracle import FORMATS, Step, exact, root

EXAMPLES = 120
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
PRECISIONS = tuple(FORMATS)
SHARES = (0.0, 0.5, 0.999, 1.0, 1.001, 1.5, 2.5, 4.0)  # of the mean's rounding bound


def test_the_judges_precision_table_is_the_formats_own():
    """Each declared precision's units and exact-integer limit, from its significand bits."""
    for name, f in FORMATS.items():
        p = judge_precision.PRECISIONS[name]
        assert (p.input, p.accumulate, p.store, p.exact_below) == (
            float(f.u_in), float(f.u_acc), float(f.u_store), float(f.exact_below)), name


@st.composite
def problems(draw, edges=("integer", "tie", "boundary", "far", "plain")):
    """(data, previous centroids float64, precision, direct) of a small step near an edge. Every
    value is an integer times 2^-q below 2^24 in magnitude, exact in float32 (the data's dtype),
    but for the point a "boundary" problem moves off a bisector (float64 data then)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    name = draw(st.sampled_from(PRECISIONS))
    direct = draw(st.booleans())
    d = draw(st.sampled_from((1, 2, 3, 3, 9)))  # d = 9: the judge's float32 product scores first
    k = draw(st.integers(1, 5))
    n = draw(st.integers(max(2, k), 24))
    edge = draw(st.sampled_from(edges))
    limit = FORMATS[name].exact_below
    if edge == "integer":
        # L = max |x| + max |c| + max |m| about sqrt(ratio * limit / (4 d)): exact ties below ratio 1.
        ratio = draw(st.sampled_from((0.3, 0.9, 1.1, 1.9, 2.1, 3.9, 4.1)))
        target = np.sqrt(ratio * limit / (4 * d))
        q, spread, offset = 0, max(1, int(target / 8)), 0
    else:
        q = draw(st.integers(0, 20))
        spread = 2 ** draw(st.integers(2, 12))
        far = edge == "far" or (edge == "boundary" and draw(st.integers(0, 3)) > 0)  # where E grows with |x|^2
        offset = 2 ** draw(st.integers(14, 22)) if far else 0
    centres = offset + rng.integers(-spread, spread + 1, (k, d))
    x = centres[rng.integers(0, k, n)] + np.rint(rng.standard_normal((n, d)) * spread / 4).astype(np.int64)
    pair = None
    if edge in ("tie", "boundary", "integer") and k >= 2:
        a, b = (int(v) for v in rng.choice(k, 2, replace=False))
        h = int(rng.integers(1, spread + 1))
        centres[b] = centres[a]
        centres[b, 0] = centres[a, 0] + 2 * h
        on = rng.random(n) < 0.5
        on[0] = True
        x[on, 0] = centres[a, 0] + h  # on the bisector of a and b: an exact tie between them
        pair = a, b, h
    if draw(st.booleans()) and k >= 2 and pair is None:  # an empty cluster: a centroid no point is near
        centres[-1] = offset + 50 * spread
    if edge == "integer":
        if draw(st.booleans()):
            x[-1] -= x.sum(axis=0) % n  # an integer mean (else most likely not: then no exact tie)
        reach = lambda o: np.abs(x + o).max() + np.abs(centres + o).max() + np.abs((x + o).mean(axis=0)).max()  # noqa
        shift = max(0, int(round((target - reach(0)) / 3)))
        x, centres = x + shift, centres + shift
    x = np.clip(x, -(2**23), 2**23)
    scale = 2.0 ** -q
    data, previous = (x * scale).astype(np.float32), (centres * scale).astype(np.float64)
    if edge == "boundary" and pair is not None:
        # Point 0 moved off the bisector toward a until label b's gap is `share` times its bound.
        a, b, h = pair
        bound = float(Step(data, previous, name, direct).share(0, b))
        share = draw(st.sampled_from((0.5, 0.9, 0.99, 1.01, 1.1, 2.0)))
        # In float64 data: float32's bound is about an ulp of a float32 coordinate, finer than
        # float32 data could place the point.
        units = min(share * bound / (4 * h * scale * scale), 2.0**22)
        data = data.astype(np.float64)
        data[0, 0] = (float(x[0, 0]) - units) * scale
    return data, previous, name, direct


@st.composite
def rows(draw, edges=("integer", "tie", "boundary", "far", "plain"), means=("rounded", "moved"), shares=SHARES):
    """A problem, the oracle's step on it, and a row's labels and centroids built from the oracle."""
    data, previous, name, direct = draw(problems(edges))
    step = Step(data, previous, name, direct)
    choose = draw(st.sampled_from(("lowest", "highest", "farthest", "nearest", "random")))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    labels = []
    for i, can in enumerate(step.labels.surely):
        choose = "farthest" if i == 0 else choose  # point 0: moved to a share of its bound ("boundary")
        options = sorted(can) or [step.labels.nearest[i]]
        labels.append({"lowest": options[0], "highest": options[-1], "nearest": step.labels.nearest[i],
                       "farthest": max(options, key=lambda j: step.distances[i][j]),
                       "random": options[int(rng.integers(0, len(options)))]}[choose])
    if draw(st.booleans()):  # one label no admissible rounding can give, the nearest such to the bound
        wrong = [(step.distances[i][j] - step.distances[i][step.labels.nearest[i]], i, j)
                 for i in range(step.n) for j in range(step.k) if j not in step.labels.possibly[i]]
        if wrong:
            _, i, j = min(wrong)
            labels[i] = j
    new = centroids_for(step, labels, previous, draw(st.sampled_from(means)), draw, rng, shares)
    return data, previous, name, step, np.array(labels), new


def centroids_for(step: Step, labels, previous, how: str, draw, rng, shares=SHARES):
    """Each centroid its exact mean rounded to float64 (`exact`) or to either (`rounded`: float32
    is outside a float64 row's bound), or moved from it by a chosen
    share of the mean's rounding bound (along an axis or not)."""
    means = step.means(labels)
    new = previous.copy()
    float32 = how == "rounded" and draw(st.booleans())
    moved = draw(st.integers(0, step.k - 1))  # one centroid moved: the others at their exact means
    for j in range(step.k):
        target = means[j] if means[j] is not None else step.c[j]
        centre = np.array([float(v) for v in target])
        row, judge = step.mean_bounds(labels, j)
        if how in ("rounded", "exact") or row is None or j != moved:
            new[j] = centre.astype(np.float32) if float32 and means[j] is not None else centre
            continue
        share = draw(st.sampled_from(shares))
        toward = np.eye(step.d)[int(rng.integers(0, step.d))] if draw(st.booleans()) else rng.standard_normal(step.d)
        toward /= max(np.linalg.norm(toward), 1e-300)
        new[j] = centre + share * float(row + (2 * judge if share > 1 else 0)) * toward
    return new


@st.composite
def labelless_rows(draw):
    """A problem and a row without labels: every centroid where the oracle's region for it is
    centred, one moved to a share of the region's radius, or past its box along one axis."""
    data, previous, name, direct = draw(problems())
    step = Step(data, previous, name, direct)
    places = [step.region(j) for j in range(step.k)]
    new = previous.copy()
    for j, place in enumerate(places):
        if place is not None and place["fixed"]:
            new[j] = [float(v) for v in place["mean"]]
    j = draw(st.integers(0, step.k - 1))
    place, share = places[j], draw(st.sampled_from((0.5, 0.99, 0.999, 1.001, 1.01, 1.5, 3.0)))
    axis = draw(st.integers(0, step.d - 1))
    if place is not None and draw(st.booleans()) and "margin" in place:
        # From the clear points' mean (inside the ball where it is one point), else the box's middle.
        base = place["mean"] if place["fixed"] else [(lo + hi) / 2 for lo, hi in zip(place["low"], place["high"])]
        base = [float(v) for v in base]
        base[axis] = float(place["high"][axis]) + share * float(place["margin"] + (place["judge"] if share > 1 else 0))
        new[j] = base
    elif place is not None:
        radius = place["radius"] + place["judge"] if place["fixed"] else place["kept"]
        toward = np.eye(step.d)[axis] if draw(st.booleans()) else np.random.default_rng(axis).standard_normal(step.d)
        new[j] += share * float(radius) * toward / np.linalg.norm(toward)
    return data, previous, name, step, new


def judged(data, previous, name, step: Step, labels, new):
    certifier = Certifier.of(data, judge_precision.declared(name), direct=step.declared)
    return certifier.step(1, previous, new, labels).failure


def agrees_on_labelled_step(row, outside_check: str | None = None):
    """The judge passes a step the exact oracle puts within its bounds and fails one it puts outside
    (by `outside_check` where given); a step in the band between is not asked about."""
    data, previous, name, step, labels, new = row
    verdict = step.verdict(labels, new)
    failure = judged(data, previous, name, step, labels, new)
    if verdict == "within":
        assert failure is None, (name, step.direct, failure.sentence())
    elif verdict == "outside":
        assert failure is not None and outside_check in (None, failure.check), (name, step.direct, labels, new)


@SETTINGS
@given(rows())
def test_the_judge_agrees_with_exact_arithmetic_on_a_labelled_step(row):
    agrees_on_labelled_step(row)


@SETTINGS
@given(rows())
def test_the_judge_agrees_with_exact_arithmetic_on_a_step_without_labels(row):
    """Without labels the judge bounds where each mean may be (NOTES.md, "Without labels"): every
    rounding of an admissible labelling's means is inside; a cluster no point may join or leave is
    held to its exact mean's bound, as with labels."""
    data, previous, name, step, labels, new = row
    failure = judged(data, previous, name, step, None, new)
    if step.verdict(labels, new) == "within":
        assert failure is None, (name, step.direct, failure.sentence())
    fixed = step.fixed_clusters()
    nearest = step.labels.nearest
    if any(fixed[j] and step.centroid_verdict(nearest, new, j) == "outside" for j in range(step.k)):
        assert failure is not None, (name, step.direct, new)


def test_the_oracle_sees_an_exact_tie_only_where_the_arithmetic_is_exact():
    """Its own check: integer ties within the float32 limit go to the lowest index only; the same
    geometry scaled past the limit, or moved off the integers, may go either way."""
    data = np.array([[1.0, 0.0], [1.0, 5.0], [0.0, 1.0], [2.0, -6.0]], np.float32)
    previous = np.array([[0.0, 0.0], [2.0, 0.0]])
    step = Step(data, previous, "float32")
    assert step.labels.exact_points[:2] == [True, True] and step.labels.possibly[0] == {0}
    big = Step(data * 1024, previous * 1024, "float32")
    assert big.labels.exact_points == [False] * 4 and big.labels.surely[0] == {0, 1}
    half = Step(data + 0.5, previous + 0.5, "float32")
    assert half.labels.surely[0] == {0, 1}
    assert root(exact([[2.0]])[0][0]) ** 2 == pytest.approx(2.0, rel=1e-30)


@settings(SETTINGS, max_examples=2 * EXAMPLES)
@given(rows(edges=("integer", "tie", "boundary", "boundary"), means=("exact",)))
def test_the_judge_agrees_with_exact_arithmetic_on_labels_at_ties_and_at_the_bound(row):
    """Centroids at their exact means (rounded to float64): the labels alone decide, at exact
    ties, at the exact-integer limit and at the bound's edge."""
    agrees_on_labelled_step(row, outside_check="assignment")


@SETTINGS
@given(rows(edges=("integer",), means=("exact",)))
def test_exact_ties_go_to_the_lowest_index_exactly_where_the_arithmetic_is_exact(row):
    """Integer problems on both sides of each precision's exact-integer limit (4 d L^2), with and
    without an integer mean."""
    data, previous, name, step, labels, new = row
    verdict = step.verdict(labels, new)
    failure = judged(data, previous, name, step, labels, new)
    if verdict != "band":
        assert (failure is None) == (verdict == "within"), (name, failure and failure.sentence())
    for labelled in (None,) if verdict == "within" else ():
        assert judged(data, previous, name, step, labelled, new) is None


@SETTINGS
@given(rows(edges=("plain", "far", "tie"), means=("moved",), shares=(0.999, 0.9999, 1.0001, 1.001)))
def test_a_centroid_a_hair_inside_or_outside_its_mean_bound(row):
    """One centroid 0.01% to 0.1% inside or outside its exact mean's rounding bound: every term of
    the bound (the summands' largest norm over the anchors, the stored rounding) matters here."""
    data, previous, name, step, labels, new = row
    verdict = step.verdict(labels, new)
    failure = judged(data, previous, name, step, labels, new)
    if verdict != "band":
        assert (failure is None) == (verdict == "within"), (name, failure and failure.sentence())


@SETTINGS
@given(labelless_rows())
def test_the_judge_holds_a_step_without_labels_to_the_region_notes_derives(row):
    """Where every point's admissible labels are certain, the judge's clear and ambiguous points
    are the oracle's: a centroid inside the ball about its clear points' mean and their box with
    the ambiguous points (each widened by the sum's rounding) passes, one outside either fails."""
    data, previous, name, step, new = row
    verdict = step.labelless_verdict(new)
    failure = judged(data, previous, name, step, None, new)
    if verdict == "within":
        assert failure is None, (name, step.direct, failure.sentence())
    elif verdict == "outside":
        assert failure is not None, (name, step.direct, new)


class Replay(Implementation):
    """A row whose one Lloyd step is the one built from the oracle, run as the judge runs rows."""

    name = "exact-replay"

    def __init__(self, name, direct, labels, new):
        self.dtype, self.direct, self.labels, self.new = name, direct, labels, new

    def distance_form(self, problem):
        return "direct" if self.direct else "any"

    def run(self, problem):
        return Result(self.new.copy(), 1, {"iterate": 1e-3}, labels=self.labels)


@settings(SETTINGS, max_examples=EXAMPLES // 3)
@given(rows())
def test_a_row_built_from_the_oracle_is_certified_exactly_when_it_is_within(row):
    """The same verdicts through the judge's entry for a row (its trajectory certified, its timed
    end checked), not only through one step."""
    data, previous, name, step, labels, new = row
    verdict = step.verdict(labels, new)
    impl = Replay(name, step.declared, labels, new)
    problem = Problem(data, previous.astype(data.dtype), 1, warmup=0, repeats=1)
    certificate = trajectory.certify(impl, problem, [impl.run(problem)], name)
    if verdict != "band":
        assert certificate.certified == (verdict == "within"), (name, certificate.failure)
