"""Rows known to be right and rows known to be wrong, for testing the judge as a third party
would meet it: `registered()` makes them an installed distribution whose entry points
(`kmbench.impls`) kmbench's registry finds, as it finds anyone's.

PlainLloyd is Lloyd written plainly in NumPy, in float32 or float64, with direct distances
(sum of (x - c)^2) or expanded ones (|x|^2 - 2 x.c + |c|^2 on the raw coordinates), sums of raw
coordinates in the working precision: a correct program the judge must never call wrong. Each
wrong row changes one thing in it.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from kmbench.protocol import Implementation, Result


def assign(x, centroids, form: str, highest_on_ties: bool = False, rows: int = 1 << 22):
    """Labels by the nearest centroid, in the arrays' own precision, a block of points at a time."""
    block = max(1, rows // max(1, centroids.shape[0] * (x.shape[1] if form == "direct" else 1)))
    return np.concatenate([_nearest(x[start : start + block], centroids, form, highest_on_ties)
                           for start in range(0, x.shape[0], block)])


def _nearest(x, centroids, form, highest_on_ties):
    if form == "direct":
        distances = ((x[:, None, :] - centroids[None, :, :]) ** 2).sum(axis=2)
    else:
        distances = (x * x).sum(axis=1)[:, None] - 2 * (x @ centroids.T) + (centroids * centroids).sum(axis=1)[None, :]
    if highest_on_ties:
        return distances.shape[1] - 1 - np.argmin(distances[:, ::-1], axis=1)
    return np.argmin(distances, axis=1)


def update(x, labels, centroids, sum_dtype):
    new = centroids.copy()
    for j in range(centroids.shape[0]):
        members = x[labels == j]
        if len(members):
            # One after another, rounding each partial sum: the plainest order there is.
            total = np.add.accumulate(members.astype(sum_dtype), axis=0, dtype=sum_dtype)[-1]
            new[j] = (total / sum_dtype(len(members))).astype(centroids.dtype)
    return new


class PlainLloyd(Implementation):
    """A correct Lloyd, written plainly; subclasses break one thing."""

    name = "plain-lloyd"
    label = "plain Lloyd (test)"
    dtype = "float32"
    form = "direct"
    source = "tests/wrong_rows.py"

    def __init__(self, dtype: str | None = None, form: str | None = None):
        self.dtype = dtype or self.dtype
        self.form = form or self.form
        self.work = np.float32 if self.dtype == "float32" else np.float64

    def iterations_to_run(self, problem):
        return problem.iterations

    def distance_form(self, problem):
        return "direct" if self.form == "direct" else "any"

    def step(self, x, centroids):
        labels = assign(x, centroids, self.form)
        return labels, update(x, labels, centroids, self.work)

    def run(self, problem):
        x = np.asarray(problem.data).astype(self.work)
        centroids = np.asarray(problem.initial_centroids).astype(self.work)
        labels = None
        start = time.perf_counter()
        for _ in range(self.iterations_to_run(problem)):
            labels, centroids = self.step(x, centroids)
        seconds = time.perf_counter() - start
        return Result(self.finish(centroids.astype(np.float64), problem), problem.iterations,
                      {"iterate": self.claimed(seconds)}, labels=self.reported_labels(labels))

    def finish(self, centroids, problem):
        return centroids

    def claimed(self, seconds):
        return seconds

    def reported_labels(self, labels):
        return labels


class ReturnsStart(PlainLloyd):
    """Runs no iteration, and claims a time it really spent (so that its clock is no reason to
    fail it: the judge must find what is wrong with its centroids)."""

    name = "wrong-returns-start"
    SPENT_S = 0.005

    def iterations_to_run(self, problem):
        return 0

    def run(self, problem):
        time.sleep(self.SPENT_S)
        return super().run(problem)

    def claimed(self, seconds):
        return seconds + 0.8 * self.SPENT_S

    def reported_labels(self, labels):
        return None


class OneShort(PlainLloyd):
    name = "wrong-one-short"

    def iterations_to_run(self, problem):
        return problem.iterations - 1

    def reported_labels(self, labels):
        return None


class HalfClaimedAll(PlainLloyd):
    name = "wrong-half-iterations"

    def iterations_to_run(self, problem):
        return problem.iterations // 2

    def reported_labels(self, labels):
        return None


class Float16Sums(PlainLloyd):
    name = "wrong-float16-sums"

    def step(self, x, centroids):
        labels = assign(x, centroids, self.form)
        return labels, update(x, labels, centroids, np.float16).astype(self.work)


class FalseDtype(PlainLloyd):
    """Declares float64 and computes in float32."""

    name = "wrong-false-dtype"
    dtype = "float64"

    def __init__(self, dtype=None, form=None):
        super().__init__(dtype, form)
        self.work = np.float32


class Perturbed(PlainLloyd):
    """Declares float32 and moves every centroid by PERTURBATION of the data's spread."""

    name = "wrong-perturbed"
    PERTURBATION = 5e-4

    def finish(self, centroids, problem):
        data = np.asarray(problem.data, dtype=np.float64)
        spread = np.sqrt(((data - data.mean(axis=0)) ** 2).sum(axis=1).mean())
        direction = np.ones(centroids.shape[1]) / np.sqrt(centroids.shape[1])
        return centroids + self.PERTURBATION * spread * direction

    def run(self, problem):
        result = super().run(problem)
        result.labels = None  # a result that says nothing of its points
        return result


class MovesEmpty(PlainLloyd):
    """An empty cluster's centroid jumps to the point farthest from its own (scikit-learn's
    relocation); the protocol keeps it."""

    name = "wrong-moves-empty"

    def step(self, x, centroids):
        labels, new = super().step(x, centroids)
        counts = np.bincount(labels, minlength=centroids.shape[0])
        for j in np.nonzero(counts == 0)[0]:
            far = int(((x - new[labels]) ** 2).sum(axis=1).argmax())
            new[j] = x[far]
        return labels, new


class TiesToHighest(PlainLloyd):
    name = "wrong-ties-to-highest"

    def step(self, x, centroids):
        labels = assign(x, centroids, self.form, highest_on_ties=True)
        return labels, update(x, labels, centroids, self.work)


class ExpandedDeclaredDirect(PlainLloyd):
    """Declares direct distances and expands them on the raw coordinates: far from the origin its
    rounding is at the size of |x|^2, not of |x - c|^2."""

    name = "wrong-expanded-declared-direct"

    def __init__(self, dtype=None, form=None):
        super().__init__(dtype, "expanded")

    def distance_form(self, problem):
        return "direct"


class ClaimsInstant(PlainLloyd):
    name = "wrong-claims-instant"

    def claimed(self, seconds):
        # A picosecond for 20 iterations over 3,000 points: 3,000x below the floor an H200's copy rate
        # (4.2e12 B/s) sets. 1e-9 was within 3x of it, and passed as `ok` there once while 14 test
        # processes shared the GPU (what the copy rate measured then is not on record).
        return 1e-12


class ClaimsTooLong(PlainLloyd):
    name = "wrong-claims-too-long"

    def claimed(self, seconds):
        return seconds + 10.0


WRONG = [ReturnsStart, OneShort, HalfClaimedAll, Float16Sums, FalseDtype, Perturbed, MovesEmpty, TiesToHighest,
         ExpandedDeclaredDirect, ClaimsInstant, ClaimsTooLong]


@contextmanager
def registered(directory: Path, rows=(PlainLloyd, *WRONG)):
    """These rows (or others a test names) as an installed distribution: a dist-info folder with
    entry points in the `kmbench.impls` group, on sys.path while the context lasts."""
    info = Path(directory) / "kmbench_wrong_rows-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kmbench-wrong-rows\nVersion: 0.1\n")
    lines = [f"{row.name} = {row.__module__}:{row.__name__}" for row in rows]
    (info / "entry_points.txt").write_text("[kmbench.impls]\n" + "\n".join(lines) + "\n")
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path.remove(str(directory))
