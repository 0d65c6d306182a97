"""flash-kmeans's own multi-GPU mode as a peer row (impls/peers/flash_kmeans_multi_gpu.py): the
GPU sets its API can name, and with a GPU, the row judged like every row on the GPUs present."""

import numpy as np
import pytest

from impls.peers.flash_kmeans_multi_gpu import FlashKMeansMultiGpu, device_argument
from kmbench.errors import ImplementationError
from kmbench.protocol import validate
from tests.conftest import blob_data, gpu_cell


@pytest.mark.parametrize("gpus, visible, device", [(None, 2, None), ("0", 2, "cuda:0"), ("1", 4, "cuda:1"),
                                                   ("0,1", 2, None), ("1,0", 2, None), ("0,1,2,3", 4, None)])
def test_the_gpu_sets_its_api_can_name(gpus, visible, device):
    assert device_argument(gpus, visible) == device


def test_some_but_not_all_gpus_is_an_error_that_says_how_to_run_them():
    with pytest.raises(ImplementationError, match=r"one GPU or on every visible one \(4\); GPUs 0,1 cannot be named "
                                                  r"through its API \(set CUDA_VISIBLE_DEVICES=0,1\)"):
        device_argument("0,1", 4)


def test_without_torch_or_the_library_it_says_why():
    ready, why = FlashKMeansMultiGpu().available()
    try:
        import flash_kmeans.kmeans_large  # noqa: F401
        import torch

        has_everything = torch.cuda.is_available()
    except ImportError:
        has_everything = False
    assert ready == has_everything and (ready or "pip install" in why or "no CUDA GPU" in why)


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(2, 20), (128, 64)])
def test_on_the_gpus_present_it_is_judged_like_every_row(d, k):
    pytest.importorskip("flash_kmeans")
    data = blob_data(np.random.default_rng(d), n=3_000_017, d=d, k=k)  # several 2^20-point blocks
    oracle, record = gpu_cell(FlashKMeansMultiGpu(), data, k, iterations=5)
    assert record["status"] == validate.OK, record.get("detail")
    assert record["build"]["workers"] >= 1 and record["iterations_executed"] == 5


def test_its_pinned_memory_warning_is_kept_out_of_the_console_and_no_other():
    """kmeans_largeN's UserWarning landed in the console mid-table (issue 59): it is left out,
    said in the cell's note instead, and any other warning still shows."""
    import warnings

    from impls.peers.flash_kmeans_multi_gpu import pinning_note, pinning_warning_kept_quiet

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pinning_warning_kept_quiet():
            warnings.warn("x is not in pinned memory. H2D transfers will not overlap with compute. "
                          "Use x = x.pin_memory() for best multi-GPU performance.", UserWarning)
            warnings.warn("something else", UserWarning)
    assert [str(warning.message) for warning in caught] == ["something else"]
    assert "not overlap" in pinning_note(2, pinned=False)[0]
    assert pinning_note(1, pinned=False) == pinning_note(2, pinned=True) == []  # it warns of neither


@pytest.mark.gpu
def test_read_only_points_raise_no_pytorch_warning_in_prepare():
    """The harness hands its points read-only; torch.from_numpy warned that a tensor over them
    could write (seen in the console of `kmbench run` on an H200). The row only reads them."""
    import warnings

    pytest.importorskip("flash_kmeans")
    from impls.peers.flash_kmeans_multi_gpu import FlashKMeansMultiGpu
    from kmbench.protocol import Problem

    data = blob_data(np.random.default_rng(3), n=1_000, d=2, k=3)
    data.flags.writeable = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FlashKMeansMultiGpu().prepare(Problem(data=data, initial_centroids=data[:3].copy(), iterations=2))
    assert not [w for w in caught if "not writable" in str(w.message)]
