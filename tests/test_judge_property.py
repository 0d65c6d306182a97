"""A correct Lloyd, written plainly, is never a mismatch: randomized over many seeds, d from 1 to
1,000, k from 1 to 5,000, on clustered, unclustered, unit-norm, integer-valued and far-from-origin
data, in float32 with direct and with expanded distances, with and without labels, and in float64."""

import numpy as np
import pytest

from kmbench.judge import trajectory
from kmbench.protocol import Problem
from tests.wrong_rows import PlainLloyd

KINDS = ("clustered", "unclustered", "unit-norm", "integer", "far")
SEEDS = 60
ELEMENTS = 20_000_000  # at most n * k * d per iteration, to keep each case small


def data_of(kind: str, n: int, d: int, rng) -> np.ndarray:
    if kind == "clustered":
        centres = rng.uniform(-10, 10, (max(2, n // 50), d))
        return centres[rng.integers(0, len(centres), n)] + rng.standard_normal((n, d))
    if kind == "unclustered":
        return rng.uniform(-1, 1, (n, d))
    if kind == "unit-norm":
        x = rng.standard_normal((n, d))
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    if kind == "integer":
        return rng.integers(-6, 7, (n, d)).astype(np.float64)
    return rng.standard_normal((n, d)) * 0.5 + rng.uniform(1e3, 1e4)  # far from the origin


def case(seed: int):
    rng = np.random.default_rng(seed)
    kind = KINDS[seed % len(KINDS)]
    d = int(np.exp(rng.uniform(0, np.log(1000))))
    k = int(np.exp(rng.uniform(0, np.log(5000))))
    k = max(1, min(k, int(np.sqrt(ELEMENTS / (d * 2)))))  # room for two points per centroid
    points_per_centroid = np.exp(rng.uniform(np.log(1.2), np.log(50)))
    n = int(max(k + 1, min(k * points_per_centroid, ELEMENTS / (d * k))))
    data = data_of(kind, n, d, rng).astype(np.float32)
    start = data[rng.choice(n, k, replace=False)]
    return kind, data, start


@pytest.mark.parametrize("seed", range(SEEDS))
def test_a_correct_lloyd_is_never_a_mismatch(seed):
    kind, data, start = case(seed)
    forms = ("direct", "expanded")
    row = PlainLloyd("float64" if seed % 7 == 3 else "float32", forms[seed % 2])
    iterations = 2 + seed % 3
    problem = Problem(data, start, iterations, warmup=0, repeats=1)
    timed = row.run(problem)
    if seed % 3 == 0:
        timed.labels = None  # the centroids-only certificate
        row.reported_labels = lambda labels: None
    certificate = trajectory.certify(row, problem, [timed], row.dtype)
    assert certificate.certified, (kind, data.shape, start.shape, row.dtype, row.form, certificate.failure.sentence())
    assert certificate.steps == iterations
