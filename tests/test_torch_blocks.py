"""The torch peer (impls/peers/torch_lloyd.py) scores a block of rows at a time once the n x k
matrix would pass its budget (issue 59: n = 4e5, k = 32,768 asked for 48.8 GiB). Without torch:
the block size. With torch on the CPU: blocks give the labels one matmul gives. With a GPU: a cell
in small forced blocks is judged ok and labels as the unblocked row does."""

import numpy as np
import pytest

from impls.peers.torch_lloyd import SCORE_BYTES, TorchLloyd, rows_per_block
from tests.conftest import gpu_cell


def _separated(n=5_003, d=4, k=9, seed=3):
    """Points near k well-apart centres: no near-ties, so every block size must give one answer."""
    rng = np.random.default_rng(seed)
    centres = 20.0 * rng.standard_normal((k, d))
    return (centres[rng.integers(0, k, n)] + rng.standard_normal((n, d))).astype(np.float32), centres.astype(np.float32)


def test_the_reported_case_is_split_into_blocks_within_the_budget():
    n, k = 400_000, 32_768
    rows = rows_per_block(n, k)
    assert rows < n and rows * k * 4 <= SCORE_BYTES < (rows + 1) * k * 4


def test_blocks_hold_at_least_one_row_and_at_most_all():
    assert rows_per_block(1_000, 5) == 1_000  # the usual cell: one matmul, as before
    assert rows_per_block(1_000, 5, score_bytes=4 * 5 * 7) == 7
    assert rows_per_block(1_000, 5, score_bytes=1) == 1


def test_blocks_give_the_labels_of_one_matmul_on_the_cpu():
    torch = pytest.importorskip("torch")
    points, centres = _separated()
    impl = TorchLloyd()
    impl._x = torch.tensor(points)
    whole = impl._nearest(torch.tensor(centres))
    impl.score_bytes = 4 * len(centres) * 7  # blocks of 7 rows, the last one short
    assert torch.equal(impl._nearest(torch.tensor(centres)), whole)


@pytest.mark.gpu
def test_a_cell_in_small_blocks_is_ok_and_labels_as_one_matmul():
    import torch

    points, centres = _separated(n=100_003)
    blocked = TorchLloyd()
    blocked.score_bytes = 4 * len(centres) * 1_000  # 101 blocks
    _, record = gpu_cell(blocked, points, len(centres), iterations=10)
    assert record["status"] == "ok", record.get("detail")
    whole = TorchLloyd()
    whole._x = blocked._x = torch.tensor(points, device="cuda")
    on_gpu = torch.tensor(centres, device="cuda")
    assert torch.equal(blocked._nearest(on_gpu), whole._nearest(on_gpu))
