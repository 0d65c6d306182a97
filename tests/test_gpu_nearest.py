"""kmbench.KMeans's labels pass on a GPU (kmbench/estimator/gpu_nearest.py) gives the float64
oracle's answer to the bit: the direct form's winner, lowest index on a tie, and its direct-form
squared distance, as reference.nearest gives them on the CPU. The cases are the ones where the
fused kernel's bookkeeping could part from reference's CuPy steps: points halfway between centres
(the gap is 0 or within rounding), duplicate centres (an exact tie in both forms), a row with a
NaN, coordinates whose squares overflow, far from the origin, and k = 2 / k above a warp's 32."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from kmbench.protocol import reference


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_kernel_source_compiles(tmp_path):
    """On CI, which has nvcc and no GPU: the source CuPy compiles at the first fit."""
    from kmbench.estimator import gpu_nearest

    (tmp_path / "best_two.cu").write_text(gpu_nearest._SOURCE)
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"),
                           str(tmp_path / "best_two.cu")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _halfway(rng, d, k, n, offset=0.0):
    centres = rng.standard_normal((k, d)) * 3 + offset
    points = (centres[rng.integers(0, k, n)] + centres[rng.integers(0, k, n)]) / 2
    return points, centres


def _cases():
    rng = np.random.default_rng(7)
    halfway = _halfway(rng, 64, 6, 5000)
    far = _halfway(rng, 40, 50, 3000, offset=1e4)
    points, centres = _halfway(rng, 48, 70, 3000)
    centres[5] = centres[3]  # duplicate centres: every point nearest to them ties exactly,
    centres[35] = centres[3]  # across two lanes of the warp (3, 5) and within one (3, 35)
    wide = rng.standard_normal((2000, 128)), rng.standard_normal((300, 128))
    pair = _halfway(rng, 33, 2, 1000)
    odd, odd_centres = rng.standard_normal((500, 64)), rng.standard_normal((40, 64))
    odd[3, 7] = np.nan
    odd[9] = 1e200  # its squares overflow float64 (as float32 input it is inf): the row is unsure
    return {"halfway d=64": halfway, "far from the origin": far, "duplicate centres": (points, centres),
            "k above a warp": wide, "k = 2": pair, "NaN and overflow": (odd, odd_centres)}


@pytest.mark.gpu
@pytest.mark.parametrize("case", list(_cases()))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_fused_labels_pass_is_the_oracles_to_the_bit(case, dtype):
    import cupy

    from kmbench.estimator import gpu_nearest

    points, centres = _cases()[case]
    points = points.astype(dtype)
    want_labels, want_best = reference.nearest(points, centres)
    labels, best = gpu_nearest.nearest(cupy.asarray(points), cupy.asarray(centres))
    np.testing.assert_array_equal(cupy.asnumpy(labels), want_labels)
    np.testing.assert_array_equal(cupy.asnumpy(best), want_best)


@pytest.mark.gpu
def test_the_fused_kernel_finds_the_expanded_forms_winner_and_gap():
    """The kernel alone against reference._expanded's matrix: the same winner (first index on a
    tie), the same winner value, and the gap to the runner-up (0 on a tie) as the same numbers."""
    import cupy

    from kmbench.estimator import gpu_nearest

    rng = np.random.default_rng(3)
    points, centres = _halfway(rng, 40, 37, 4000)
    centres[20] = centres[11]
    x, c = cupy.asarray(points), cupy.asarray(centres)
    distances, _, _ = reference._expanded(x, c, cupy)
    distances = cupy.asnumpy(distances)
    want = distances.argmin(axis=1)
    rows = np.arange(len(points))
    winner = distances[rows, want]
    rest = distances.copy()
    rest[rows, want] = np.inf
    middle = c.mean(axis=0)
    shifted, moved = x - middle, c - middle
    found = cupy.empty(len(points), dtype=cupy.int64)
    best, gap = cupy.empty(len(points)), cupy.empty(len(points))
    gpu_nearest._kernel()(((len(points) + 7) // 8,), (256,),
                          (shifted @ moved.T, (shifted * shifted).sum(axis=1), (moved * moved).sum(axis=1),
                           np.int64(len(points)), np.int32(len(centres)), found, best, gap))
    np.testing.assert_array_equal(cupy.asnumpy(found), want)
    np.testing.assert_array_equal(cupy.asnumpy(best), winner)
    np.testing.assert_array_equal(cupy.asnumpy(gap), rest.min(axis=1) - winner)
    assert (cupy.asnumpy(gap) == 0).any()  # the premise: exact ties among them
