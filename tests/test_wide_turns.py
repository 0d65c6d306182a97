"""hopper_wide.cu's warpgroups taking turns at the tensor cores (TAKE_TURNS, issue 64): asked for
only where a tile's chunks fit the ring, compiled without spills or serialized products, and on a
GPU the same labels, lists and limits as the pass without turns (the turns change when products
run, not what they compute)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import hopper_pass


@pytest.mark.parametrize("d, half, expected", [(136, True, True), (200, True, True), (256, True, True),
                                               (264, True, False), (408, True, False), (768, True, False),
                                               (136, False, False), (256, False, False), (128, True, False)])
def test_the_wide_pass_takes_turns_only_where_a_tile_s_chunks_fit_the_ring(d, half, expected):
    """fp16 chunks hold 64 coordinates, TF32 ones 32, and the ring 4 of them: turns up to d = 256 in
    fp16 (d = 264 pads to 272, five chunks), never in TF32; hopper_pass.cu (d <= 128) has its own."""
    assert hopper_pass.wide_turns(d, half) is expected
    options = hopper_pass.build_options(d, half=half)
    assert ("-DTAKE_TURNS" in options) == (expected or (d <= 128 and hopper_pass.TAKE_TURNS))


def test_turns_can_be_turned_off_and_are_never_forced_where_they_do_not_fit(monkeypatch):
    assert "-DTAKE_TURNS" not in hopper_pass.build_options(256, turns=False, half=True)
    assert "-DTAKE_TURNS" not in hopper_pass.build_options(408, turns=True, half=True)
    monkeypatch.setattr(hopper_pass, "TAKE_TURNS", False)
    assert not hopper_pass.wide_turns(256, True)
    assert "-DTAKE_TURNS" not in hopper_pass.build_options(256, half=True)


@pytest.mark.parametrize("d, half", [(256, True), (136, True), (408, True), (256, False), (768, False)])
def test_the_pass_asks_for_the_norms_copies_exactly_where_it_takes_turns(d, half):
    """Each group's copy of a tile's h + M lies past the ring: 2 x 256 floats more shared memory with
    turns, none without (the kernel would write past what was asked for), within Hopper's 227 KB."""
    ring = 128 + hopper_pass.stages(d, half) * hopper_pass.stage_floats(d, half) * 4
    extra = hopper_pass.shared_bytes(d, half) - ring
    assert extra == (2 * 256 * 4 if hopper_pass.wide_turns(d, half) else 0)
    assert hopper_pass.shared_bytes(d, half) <= hopper_pass.SHARED_MAX


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("d", [136, 200, 256])
def test_the_wide_pass_with_turns_compiles_without_spills_or_serialized_products(d, tmp_path):
    """A turn passed on some tiles and not others (a divergent path among the products) made ptxas
    serialize every wgmma, which this catches, with spills and the static_assert that a tile's chunks
    fit the ring. Whether the turns balance (no deadlock) only a GPU run shows: the test below."""
    options = hopper_pass.build_options(d, half=True)
    assert "-DTAKE_TURNS" in options
    done = subprocess.run(["nvcc", "-cubin", *options, "-Xptxas", "-v", "-o", str(tmp_path / "w.cubin"),
                           str(hopper_pass.source(d))], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    properties = done.stderr.split("Function properties for hopper_assign")[1].splitlines()[1]
    assert ", 0 bytes spill stores" in properties, done.stderr
    assert "serialized" not in done.stderr, done.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("n, d, k", [(40_003, 256, 1_100), (9_001, 136, 300), (3_001, 200, 37)])
def test_turns_give_the_same_labels_lists_and_limits_as_the_pass_without(n, d, k, monkeypatch):
    """Dense data far from the origin (thousands of near-ties on the lists), more row tiles than SMs
    at 40,003 (several rounds a block), part tiles of centroids: the pass with turns and without, on
    the same centroids, give every row the same label, the same scan limit and the same candidates."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip("hopper_wide.cu is sm_90a code")
    from impls.gpu.kmbench_gpu.tensor_path import TensorPath
    from tests.test_tensor_gpu import _pass_lists

    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", "fp16")
    data = (np.random.default_rng(d).standard_normal((n, d)) + 100.0).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[:k]).astype(np.float64)
    seen = {}
    for turns in (True, False):
        monkeypatch.setattr(hopper_pass, "TAKE_TURNS", turns)
        path = TensorPath(x, k, cupy.zeros(1, dtype=cupy.uint64))
        assert "hopper_wide.cu" in path.tf32_pass and "fp16" in path.tf32_pass
        assert ("taking turns" in path.tf32_pass) == turns
        path.start(start)
        path.certify()
        seen[turns] = _pass_lists(path)
    (labels, scanned, short), (plain_labels, plain_scanned, plain_short) = seen[True], seen[False]
    assert len(short) > 10 and len(scanned) + len(short) < n
    assert np.array_equal(labels, plain_labels)
    assert scanned == plain_scanned
    assert short == plain_short
