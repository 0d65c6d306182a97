"""The judge's own kernels (kmbench.judge.kernels: the fused float64 scan at low d, the two
smallest of a float32 score matrix at high d): compiled with nvcc where it is on PATH (CI has
it), and on a GPU they find the same two nearest centroids as a plain float64 scan."""

import shutil
import subprocess

import numpy as np
import pytest

from kmbench.judge import kernels


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("text", [kernels.FUSED_SOURCE, kernels.SCORED_SOURCE])
def test_the_kernels_compile(tmp_path, text):
    source = tmp_path / "best_two.cu"
    source.write_text(text)
    done = subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-o", str(tmp_path / "k.cubin"), str(source)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


FUSED_CASES = [(1, 3), (2, 1000), (8, 300), (3, 1), (2, 2)]
SCORED_CASES = [(1000, 1), (5000, 7), (3000, 33), (2000, 4096), (1001, 2), (997, 66)]


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", FUSED_CASES)
def test_the_fused_kernel_finds_the_two_nearest(d, k):
    check_fused(d, k)


def check_fused(d, k):
    """The fused kernel's (d1, d2, nearest) against NumPy's float64 distances (an AssertionError
    if not; tests/test_judge_kernel_mutants.py runs it on each mutant of the kernel)."""
    import cupy

    rng = np.random.default_rng(d)
    data = rng.integers(-5, 6, (20_000, d)).astype(np.float64)  # exact ties among integer centroids
    centroids = data[rng.choice(len(data), k, replace=False)] + 0.25
    mean = data.mean(axis=0)
    d1, d2, best = (cupy.asnumpy(a) for a in kernels.fused_best_two(
        cupy.asarray(data), cupy.asarray(centroids - mean), cupy.asarray(mean), cupy))
    exact = ((data[:, None, :] - centroids[None]) ** 2).sum(axis=2)
    order = np.sort(exact, axis=1)
    np.testing.assert_allclose(d1, order[:, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(d2, order[:, 1] if k > 1 else np.full(len(data), np.inf), rtol=1e-12, atol=1e-12)
    ties = order[:, 1] - order[:, 0] <= 1e-9 if k > 1 else np.zeros(len(data), bool)
    np.testing.assert_array_equal(best[~ties], np.argmin(exact, axis=1)[~ties])
    # On exact ties the kernel, working on centred coordinates, may round either way: any tied
    # minimum will do (the judge scores such points again in float64, lowest index first).
    assert (exact[ties, best[ties]] <= order[ties, 0] + 1e-9).all()


@pytest.mark.gpu
@pytest.mark.parametrize("rows, k", SCORED_CASES)
def test_the_score_kernel_picks_the_two_smallest_scores(rows, k):
    check_scored(rows, k)


def check_scored(rows, k):
    """Against NumPy on the same float32 scores; ties (repeated centroids) go to the lowest index.
    Rows not a multiple of a block's 8 leave a partial block; at k = 66 the tied columns 1 and 65
    share a lane, at k = 33 (columns 1 and 32) and 4096 (1 and 4095) they do not."""
    import cupy

    rng = np.random.default_rng(k)
    products = rng.standard_normal((rows, k)).astype(np.float32)
    half = rng.standard_normal(k).astype(np.float32)
    if k > 2:
        products[:, k - 1], half[k - 1] = products[:, 1], half[1]  # an exact tie with column 1
        products[::2, [1, k - 1]] = 50.0  # ... which is the smallest score of every other row
    products[-1] = -np.inf  # a row of no finite score keeps a real column: the lowest
    d1, d2, best = (cupy.asnumpy(a) for a in kernels.scored_best_two(cupy.asarray(products), cupy.asarray(half), cupy))
    scores = half[None, :] - np.float32(2) * products
    order = np.sort(scores, axis=1)
    np.testing.assert_array_equal(d1, order[:, 0])
    np.testing.assert_array_equal(best, np.argmin(scores, axis=1))
    np.testing.assert_array_equal(d2, order[:, 1] if k > 1 else np.full(rows, np.inf))


GPU_ROWS = ["kmbench-gpu", "yinyang-gpu", "triton-fused", "cuda-v3"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_ROWS)
def test_exact_ties_on_integer_data_go_to_the_lowest_index(name):
    """Integer points with an integer mean and integer start centroids two apart: every point
    halfway between two of them is an exact tie in any precision, which the lowest index wins.
    A row that breaks it is named by the judge (tests/test_wrong_rows.py shows one on the CPU)."""
    from kmbench.registry import discover
    from tests.conftest import gpu_cell

    impl = discover()[name]
    ready, why = impl.available()
    if not ready:
        pytest.skip(why)
    rng = np.random.default_rng(3)
    half = rng.integers(0, 11, size=(10_000, 2))
    data = np.vstack([half, 10 - half]).astype(np.float32)  # mean (5, 5): centred coordinates are integers
    start = np.array([[0, 0], [2, 0], [0, 2], [2, 2], [10, 10], [8, 10], [10, 8], [8, 8]], dtype=np.float32)
    distances = ((data[:, None, :].astype(np.float64) - start[None]) ** 2).sum(axis=2)
    ordered = np.sort(distances, axis=1)
    assert (ordered[:, 0] == ordered[:, 1]).sum() > 1000  # the first step has exact ties to decide
    _, record = gpu_cell(impl, data, 8, 5, start=start)
    assert record["status"] == "ok", record.get("detail")
