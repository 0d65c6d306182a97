"""flashlib's k-means as peer rows (impls/peers/flashlib_kmeans.py): which of its paths runs for a
shape and how the record says so, the watch on its silent Triton fallback, and with a GPU, both
rows judged with their precision and path recorded."""

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from impls.peers.flashlib_kmeans import (
    Flashlib,
    FlashlibHalf,
    chosen_backend,
    counting_fallbacks,
    fallback_reason,
    path_that_ran,
)
from tests.conftest import blob_data, gpu_cell


def fake_route(backend, variant):
    seen = []

    def route(**shape):
        seen.append(shape)
        return backend, variant
    return route, seen


def test_the_routers_choice_is_asked_with_the_shape_as_run():
    route, seen = fake_route("cutedsl", "fa3")
    assert chosen_backend(route, None, n=1_000_000, d=256, k=4096) == ("cutedsl", "fa3", "")
    assert seen == [{"B": 1, "N": 1_000_000, "D": 256, "K": 4096, "metric": "euclidean"}]


def test_a_cutedsl_choice_becomes_triton_where_the_cute_dsl_cannot_be_imported_and_the_note_says_so():
    route, _ = fake_route("cutedsl", "fa3")
    backend, variant, note = chosen_backend(route, "importing cutlass failed: ModuleNotFoundError", 10, 256, 4096)
    assert (backend, variant) == ("triton", None)
    assert "CuTe DSL cannot be used here (importing cutlass failed: ModuleNotFoundError)" in note
    route, _ = fake_route("triton", None)
    assert chosen_backend(route, None, 10, 64, 16) == ("triton", None, "")
    assert chosen_backend(route, "nvidia-cutlass-dsl is not installed", 10, 64, 16) == ("triton", None, "")


@pytest.mark.parametrize("backend, variant, steps, fallbacks, path", [
    ("triton", None, 10, 0, "triton"),
    ("cutedsl", "fa3", 10, 0, "cutedsl-fa3 assign, triton update"),
    ("cutedsl", "fa3", 10, 10, "triton (routed to cutedsl-fa3; its assignment fell back to Triton in every step)"),
    ("cutedsl", "blackwell", 5, 2, "cutedsl-blackwell assign in 3 of 5 steps, triton in 2"),
    ("cutedsl", None, 3, 0, "cutedsl-fa3 assign, triton update"),
])
def test_the_path_that_ran_in_words(backend, variant, steps, fallbacks, path):
    assert path_that_ran(backend, variant, steps, fallbacks) == path


def test_a_fallback_in_every_step_gives_the_reason_flashlibs_gates_give():
    reason = fallback_reason("fa3", half=False, d=256)
    assert path_that_ran("cutedsl", "fa3", 3, 3, reason) == (
        "triton (routed to cutedsl-fa3; its assignment fell back to Triton in every step: "
        "its kernel takes fp16/bf16 input, not float32)")
    assert fallback_reason("fa3", half=True, d=768) == "its kernel takes d <= 512"
    assert fallback_reason("fa3", half=False, d=768).endswith("not float32")  # the first gate it checks
    assert fallback_reason("blackwell", half=True, d=128) == "its tcgen05 kernel takes bf16 input"
    assert fallback_reason("fa3", half=True, d=256) == ""  # it takes these: a fallback was a failure


def test_fallbacks_are_counted_passed_through_and_the_function_put_back():
    calls = []
    module = SimpleNamespace(euclid_assign_triton=lambda *a, **kw: calls.append((a, kw)) or "labels")
    original = module.euclid_assign_triton
    with counting_fallbacks(module) as counted:
        assert module.euclid_assign_triton(1, out=2) == "labels"
        module.euclid_assign_triton(3)
    assert counted == [2] and calls == [((1,), {"out": 2}), ((3,), {})]
    assert module.euclid_assign_triton is original


def test_the_watched_function_is_put_back_after_an_error():
    module = SimpleNamespace(euclid_assign_triton=lambda: None)
    original = module.euclid_assign_triton
    with pytest.raises(RuntimeError), counting_fallbacks(module):
        raise RuntimeError("the kernel failed")
    assert module.euclid_assign_triton is original


def test_rows_declare_their_precision_as_flash_kmeans_rows_do():
    assert (Flashlib.dtype, FlashlibHalf.dtype) == ("tf32", "float16")
    assert (Flashlib.half, FlashlibHalf.half) == (False, True)
    problem = SimpleNamespace(n=1000, d=256, k=4096)
    assert Flashlib().arithmetic(problem) == ("tf32", 512.0) and FlashlibHalf().arithmetic(problem)[0] == "fp16"
    assert FlashlibHalf().bytes_per_iteration(problem) * 2 == Flashlib().bytes_per_iteration(problem)


def test_without_torch_or_flashlib_the_rows_say_why():
    for row in (Flashlib(), FlashlibHalf()):
        ready, why = row.available()
        if not ready:
            assert "pip install" in why or "no CUDA GPU" in why, why


def test_flashlibs_own_router_at_the_issues_shapes_on_a_hopper():
    """Its rule read from its source (impl._route): d >= 256, d % 16 == 0 and k >= 4,096 on sm_90."""
    impl = pytest.importorskip("flashlib.primitives.kmeans.impl")
    from flashlib import _hw

    hopper = _hw.HwProps(device_tag="H200", sm_arch=90, sm_count=132, l2_bytes=0, smem_per_sm_bytes=0,
                         total_mem_bytes=0, name="fake H200")
    route = functools.partial(impl._route, hw=hopper)
    assert chosen_backend(route, None, 1_000_000, 256, 4096) == ("cutedsl", "fa3", "")
    assert chosen_backend(route, None, 1_000_000, 768, 4096) == ("cutedsl", "fa3", "")  # its kernel then falls back
    for n, d, k in [(1_000_000, 128, 1024), (300_000, 408, 5000), (300_000, 300, 4096), (1_000_000, 128, 16384)]:
        assert chosen_backend(route, None, n, d, k) == ("triton", None, ""), (n, d, k)


@pytest.mark.gpu
@pytest.mark.parametrize("row", [Flashlib, FlashlibHalf])
@pytest.mark.parametrize("d, k", [(64, 16), (256, 4096)])
def test_rows_are_judged_with_their_precision_and_path_recorded(row, d, k):
    impl = row()
    ready, why = impl.available()
    if not ready:
        pytest.skip(why)
    # 20,480 points: whole tiles of 128 and 256 rows, so a fallback would be the kernel's choice, not a ragged edge
    _, record = gpu_cell(impl, blob_data(np.random.default_rng(d), n=20_480, d=d, k=min(k, 64)), k, 5)
    assert record["status"] in ("ok", "mismatch"), record.get("detail")
    assert record["iterations_executed"] == 5
    build = record["build"]
    assert ("fp16" in build["precision"]) == impl.half
    if build["route"] == "triton":
        assert build["path"] == "triton"
    elif impl.half:  # the Hopper kernel takes fp16 at d = 256
        assert build["path"] == "cutedsl-fa3 assign, triton update", build
    else:  # float32 input: every step's assignment falls back to Triton
        assert build["path"].startswith("triton (routed to cutedsl-fa3") and build["path"].endswith("not float32)")
    assert build["cutedsl"].endswith(": usable") or build["route"] == "triton"  # a CuTe DSL route needs it
