"""How the judge reads a row's labels (kmbench.judge.scan.as_labels): integers of either width as
they are, without a copy of n labels on the judge's side; labels of another type (floats holding
integers, as some array libraries return them) judged by their integer values."""

import numpy as np
import pytest

from kmbench.judge.certify import Certifier
from kmbench.judge.precision import FLOAT32
from kmbench.judge.scan import as_labels
from kmbench.judge.sums import group


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_labels_are_read_in_place(dtype):
    labels = np.arange(10, dtype=dtype) % 3
    read = as_labels(labels)
    assert read.dtype == dtype and np.shares_memory(read, labels)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8])
def test_labels_of_another_type_are_judged_by_their_values(dtype):
    """Three clear clusters, labelled right, the labels given as `dtype`: ok; one point sent to
    the wrong cluster: an assignment failure that names it."""
    rng = np.random.default_rng(1)
    centres = np.array([[-5.0, 0.0], [5.0, 0.0], [0.0, 8.0]])
    honest = np.repeat([0, 1, 2], 100)
    data = (centres[honest] + rng.normal(0, 0.3, (300, 2))).astype(np.float32)
    certifier = Certifier.of(data, FLOAT32)
    means, _ = group(certifier.data, honest, centres, certifier.geometry, np).means(centres, np)
    step = certifier.step(1, centres, means, honest.astype(dtype))
    assert step.failure is None
    wrong = honest.copy()
    wrong[7] = 2
    means, _ = group(certifier.data, wrong, centres, certifier.geometry, np).means(centres, np)
    failure = certifier.step(1, centres, means, wrong.astype(dtype)).failure
    assert failure is not None and failure.check == "assignment" and "point 7 went to 2" in failure.text
