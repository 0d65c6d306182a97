"""The precision table's functions at their edges (kmbench.judge.precision): an unknown name said
plainly, which declarations are narrower than their data, and gamma_m where m u reaches 1/2 (no
bound: inf) and for an array of counts (one gamma each). The bounds built on them are pinned in
tests/test_judge_bounds.py."""

import warnings

import numpy as np
import pytest

from kmbench.errors import UsageError
from kmbench.judge import precision


def test_an_unknown_precision_is_named_with_the_known_ones():
    with pytest.raises(UsageError) as raised:
        precision.declared("float8")
    assert str(raised.value) == "unknown precision 'float8'; kmbench knows float64, float32, tf32, float16, bfloat16"


@pytest.mark.parametrize("computed, data, narrower", [
    ("float32", "float64", True), ("bfloat16", "float32", True), ("float64", "float32", False),
    ("float32", "float32", False), ("tf32", "float16", False), (None, "float32", False), ("float32", "int8", False)])
def test_a_row_is_narrower_only_where_its_arithmetic_holds_less_than_its_data(computed, data, narrower):
    assert precision.narrower(computed, data) is narrower


def test_gamma_has_no_bound_from_m_u_of_one_half():
    u = 2.0 ** -4
    assert precision.gamma(7, u) == pytest.approx(7 / 9)  # m u = 7/16
    assert precision.gamma(8, u) == float("inf")  # m u = 1/2 exactly
    assert precision.gamma(12, u) == float("inf")  # m u = 3/4
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no bound is an answer, not a division by zero to warn of
        assert precision.gamma(16, u) == float("inf")  # m u = 1
        assert (precision.gamma(np.array([16, 3]), u) == [np.inf, 3 / 13]).all()


def test_gamma_of_an_array_of_counts_is_an_array_of_gammas():
    u = 2.0 ** -4
    got = precision.gamma(np.array([1, 7, 8]), u)
    assert isinstance(got, np.ndarray) and got.shape == (3,)
    np.testing.assert_allclose(got, [1 / 15, 7 / 9, np.inf])
    one = precision.gamma(np.int64(1), u)
    assert type(one) is float and one == pytest.approx(1 / 15)


def test_gamma_bounds_m_roundings_either_way():
    """Higham 3.1: (1 + u)^m - 1 and 1 - (1 - u)^m stay within gamma_m, here where u is large enough
    (2^-7) for the second-order terms to count."""
    u = 2.0 ** -7
    for m in (1, 5, 20, 60):
        g = precision.gamma(m, u)
        assert (1 + u) ** m - 1 <= g and (1 - u) ** -m - 1 <= g
