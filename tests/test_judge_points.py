"""The judge's chosen rows picked from streamed blocks (kmbench.judge.points.picked): the rows an
index names, in its order and with its repeats, whichever blocks hold them. The GPU path that
streams host data through it is in tests/test_judge_gpu.py."""

import numpy as np
import pytest

from kmbench.judge.points import picked


def blocks_of(data, rows: int):
    return [(first, data[first : first + rows]) for first in range(0, data.shape[0], rows)]


@pytest.mark.parametrize("rows", [1, 7, 64, 1000])
def test_picked_rows_are_the_indexed_rows_in_float64(rows):
    rng = np.random.default_rng(rows)
    data = rng.standard_normal((1000, 3)).astype(np.float32)
    for index in (np.arange(1000), np.sort(rng.choice(1000, 300, replace=False)), rng.integers(0, 1000, 500),
                  np.array([999, 0, 999, 5]), np.array([], dtype=np.int64)):
        out = picked(blocks_of(data, rows), index, 3, np)
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, data[index].astype(np.float64))

