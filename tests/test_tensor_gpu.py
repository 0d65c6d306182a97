"""kmbench-gpu's tensor-core path (impls/gpu/kmbench_gpu/tensor_path.py) and the GPU rows at embedding
dimensions. Without a GPU: the update kernels compile with nvcc, the tilings and the memory
count. With a GPU (make test-gpu): agreement with the float64 oracle for d from 17 to 1000 and
k from 1 to 2000, far from the origin, both stop rules, with and without the CUDA graph;
re-checks counted; flash-kmeans rows recorded; and a randomized test every GPU row must pass."""

import shutil
import subprocess

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import HERE, KmbenchGpu
from impls.gpu.kmbench_gpu.tensor_path import WHOLE_MAX_DIM, default_tilings, device_bytes, pack_bits
from kmbench.errors import ImplementationError
from tests.conftest import gpu_cell
from tests.test_fast import _blobs as fast_blobs


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("source", ["update.cu", "moved_sums.cu", "recheck.cu", "renumber.cu"])
def test_update_recheck_and_renumber_kernels_compile(arch, source, tmp_path):
    done = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-std=c++17", "-o", str(tmp_path / "u.cubin"),
                           str(HERE / source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("d, turns, half", [(16, False, False), (16, True, False), (48, False, False), (48, True, False),
                                            (64, False, False), (64, True, False), (128, False, False),
                                            (128, True, False), (16, True, True), (48, True, True), (64, True, True),
                                            (128, True, True), (128, False, True), (136, None, False),
                                            (408, None, False), (768, None, False), (1000, None, False),
                                            (136, None, True), (408, None, True), (768, None, True)])
def test_the_hopper_pass_compiles_for_sm_90a(d, turns, half, tmp_path):
    """hopper_pass.cu up to d = 128, hopper_wide.cu above (turns only where a tile fits its ring:
    tests/test_wide_turns.py), each in TF32 and in fp16, without spills."""
    from impls.gpu.kmbench_gpu.hopper_pass import build_options, source

    done = subprocess.run(["nvcc", "-cubin", *build_options(d, turns, half), "-Xptxas", "-v", "-o",
                           str(tmp_path / "h.cubin"),
                           str(source(d))],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert source(d).name == ("hopper_wide.cu" if d > 128 else "hopper_pass.cu")
    # ptxas -v prints each function's properties on the line after its name (centroid_tiles's follow).
    properties = done.stderr.split("Function properties for hopper_assign")[1].splitlines()[1]
    assert ", 0 bytes spill stores" in properties, done.stderr
    assert "serialized" not in done.stderr, done.stderr  # ptxas's warning where wgmma cannot overlap


@pytest.mark.parametrize("d", [129, 100, 40, 33, 204, 412])
def test_the_hopper_pass_takes_rows_of_whole_k_steps_and_16_byte_loads(d):
    """Up to d = 128 a multiple of 16 (a thread's d / 4 coordinates by 16-byte loads), above a
    multiple of 8 (a k-step)."""
    from impls.gpu.kmbench_gpu.hopper_pass import applies

    assert not applies(d, 4, 32, 0, 90)
    assert applies(d + (-d) % 16 if d <= 128 else d + (-d) % 8, 4, 32, 0, 90)


def test_above_128_dimensions_the_wide_pass_packs_scores_and_lists_candidates(monkeypatch):
    """hopper_wide.cu's tiling makes tensor_settings pack the scores into 32 slots and list
    candidates (no tile records), where its tile numbers fit; elsewhere Triton's tiling stays."""
    from impls.gpu.kmbench_gpu import tensor_settings
    from impls.gpu.kmbench_gpu.hopper_pass import wide_tiling

    monkeypatch.delenv("KMBENCH_TENSOR_PASS", raising=False)
    monkeypatch.delenv("KMBENCH_TENSOR_CANDIDATES", raising=False)
    for d, k in ((408, 5000), (768, 4096), (136, 37), (1000, 8192)):
        tiling = wide_tiling(d, k, 90)
        bits = tensor_settings.pack_bits(d, k, tiling)
        assert tiling[1] == 256 and tensor_settings.slots(tiling) == 32 and bits == max(1, (-(-k // 32) - 1).bit_length())
        assert tensor_settings.kept_tiles(d, k, tiling) == 0 and tensor_settings.candidates_kept(bits) > 0
        assert tensor_settings.crowded_columns(k, tiling)  # at any k: NOTES.md, "Rows from shared memory"
    assert wide_tiling(408, 8193, 90) is None  # 257 tiles of 32: past bound.PACK_MAX_BITS
    assert wide_tiling(128, 1000, 90) is None and wide_tiling(412, 1000, 90) is None
    assert wide_tiling(408, 5000, 80) is None
    monkeypatch.setattr(tensor_settings, "EPILOGUE", "slots")  # unpacked: Triton's tiling must stay
    assert wide_tiling(408, 5000, 90) is None
    monkeypatch.setattr(tensor_settings, "EPILOGUE", "packed")
    monkeypatch.setenv("KMBENCH_TENSOR_PASS", "triton")
    assert wide_tiling(408, 5000, 90) is None


def test_the_hopper_pass_needs_hopper_packed_scores_32_slots_and_can_be_turned_off(monkeypatch):
    from impls.gpu.kmbench_gpu.hopper_pass import applies

    monkeypatch.delenv("KMBENCH_TENSOR_PASS", raising=False)
    assert applies(128, 4, 32, 0, 90) and applies(48, 1, 32, 0, 90) and applies(408, 8, 32, 0, 90)
    assert not applies(128, 4, 32, 0, 80) and not applies(128, 4, 32, 0, 100)  # sm_90a code runs on 9.0 only
    assert not applies(128, 0, 32, 0, 90) and not applies(408, 0, 32, 0, 90)  # the slot epilogue (unpacked)
    assert not applies(128, 4, 64, 0, 90) and not applies(128, 4, 32, 8, 90) and not applies(408, 4, 32, 8, 90)
    monkeypatch.setenv("KMBENCH_TENSOR_PASS", "triton")
    assert not applies(128, 4, 32, 0, 90)
    monkeypatch.setenv("KMBENCH_TENSOR_PASS", "wgmma")
    with pytest.raises(ImplementationError, match="KMBENCH_TENSOR_PASS must be one of hopper, triton"):
        applies(128, 4, 32, 0, 90)


@pytest.mark.parametrize("d", [17, 33, 64, 100, 128, 129, 256, 408, 1000, 4096])
def test_tilings_keep_rows_on_chip_up_to_their_limit(d):
    tiling, exact = default_tilings(d)
    # The re-check holds its operands twice: in TF32 (to prune tiles) and in FP32.
    for (block_m, block_n, block_d, warps, stages), copies in ((tiling[:5], 1), (exact, 2)):
        assert block_d & (block_d - 1) == 0 and block_d >= 16  # tl.arange and tl.dot need this
        assert copies * block_d * 4 * (block_m + stages * block_n) <= 227 * 1024  # an H100's shared memory
    assert (tiling[2] >= d) == (d <= WHOLE_MAX_DIM)  # the TF32 pass keeps its rows on chip
    assert exact[2] < d or d <= 32  # the re-check streams them


def test_scores_are_packed_only_where_rows_stay_on_chip_and_the_tiles_fit_the_bits():
    from impls.gpu.kmbench_gpu.bound import PACK_MAX_BITS

    on_chip, streamed = default_tilings(128, 1024)[0], default_tilings(408, 1024)[0]
    assert on_chip[1] == 32 and pack_bits(128, 1024, on_chip) == 5  # 32 tiles of 32
    assert pack_bits(408, 1024, streamed) == 0
    most = on_chip[1] << PACK_MAX_BITS
    assert pack_bits(128, most, on_chip) == PACK_MAX_BITS and pack_bits(128, most + 1, on_chip) == 0
    wider = default_tilings(128, most + 1)[0]  # more tiles than the bits hold at 32: tiles of 64
    assert wider[1] == 64 and wider[3] == 4 and pack_bits(128, most + 1, wider) == PACK_MAX_BITS
    assert default_tilings(128, 2 * most + 1)[0][3] == 8  # past that, the slot epilogue's eight warps


def test_up_to_d_64_wide_tiles_fold_into_the_slots_of_tiles_of_32():
    from impls.gpu.kmbench_gpu.tensor_settings import slots

    for d in (33, 64):
        folded = default_tilings(d, 1000)[0]
        assert folded[1] == 128 and slots(folded) == 32 and pack_bits(d, 1000, folded) == 5  # 32 slot tiles
    assert slots(default_tilings(128, 1024)[0]) == 32 == default_tilings(128, 1024)[0][1]  # no fold at 128
    # Where 32 slots cannot hold the tile numbers, tiles of 64, unfolded, as at d = 128.
    wider = default_tilings(64, (32 << 8) + 1)[0]
    assert wider[1] == slots(wider) == 64 and pack_bits(64, (32 << 8) + 1, wider) == 8
    # Data too large to pack keep the slot epilogue, unfolded.
    assert default_tilings(64, 1000, packable=False)[0] == (128, 64, 64, 8, 3)


def test_tiling_overrides_take_slots_that_divide_the_tile(monkeypatch):
    from impls.gpu.kmbench_gpu.tensor_settings import slots, tiling_from_env

    monkeypatch.setenv("KMBENCH_TENSOR_TILING", "128,128,64,4,2,32")
    assert slots(tiling_from_env("KMBENCH_TENSOR_TILING", (), folds=True)) == 32
    monkeypatch.setenv("KMBENCH_TENSOR_TILING", "128,64,64,4,2")
    assert slots(tiling_from_env("KMBENCH_TENSOR_TILING", (), folds=True)) == 64
    for wrong in ("128,64,64,4,2,48", "128,64,64,4,2,128", "128,64,64,4,2,0", "128,64,64,4"):
        monkeypatch.setenv("KMBENCH_TENSOR_TILING", wrong)
        with pytest.raises(ImplementationError, match="KMBENCH_TENSOR_TILING"):
            tiling_from_env("KMBENCH_TENSOR_TILING", (), folds=True)
    monkeypatch.setenv("KMBENCH_TENSOR_EXACT_TILING", "64,128,32,4,3,32")  # the re-check does not fold
    with pytest.raises(ImplementationError, match="five integers"):
        tiling_from_env("KMBENCH_TENSOR_EXACT_TILING", ())


def test_the_copy_engine_loads_where_scores_are_packed_rows_are_aligned_and_the_gpu_has_one(monkeypatch):
    from impls.gpu.kmbench_gpu.tensor_settings import copy_engine

    assert copy_engine(64, 5, 90) and copy_engine(100, 5, 90)
    assert not copy_engine(66, 5, 90)  # rows of 264 bytes: not 16-byte aligned
    assert not copy_engine(64, 0, 90) and not copy_engine(64, 5, 80)
    monkeypatch.setenv("KMBENCH_TENSOR_TMA", "0")
    assert not copy_engine(64, 5, 90)
    monkeypatch.setenv("KMBENCH_TENSOR_TMA", "yes")
    with pytest.raises(ImplementationError, match="0 \\(off\\) or 1 \\(on\\)"):
        copy_engine(64, 5, 90)


def test_candidate_lists_are_on_for_ieee_and_off_when_asked_or_for_the_scans_other_precisions(monkeypatch):
    from impls.gpu.kmbench_gpu.tensor_settings import candidates_kept, crowded_columns, kept_tiles

    on_chip, streamed = default_tilings(128, 1024)[0], default_tilings(768, 4096)[0]
    assert candidates_kept(5) > 0 and candidates_kept(0) == 0  # only where scores are packed
    assert kept_tiles(768, 4096, streamed) == 16 and kept_tiles(128, 1024, on_chip) == 0
    assert kept_tiles(768, 65 * streamed[1], streamed) == 0  # past KEPT_TILES_MAX: 12 bytes a tile per point
    assert crowded_columns(1024, on_chip) and not crowded_columns(4096, on_chip)  # 32 tiles, then 128
    for name, value in (("KMBENCH_TENSOR_CANDIDATES", "0"), ("KMBENCH_TENSOR_RECHECK", "tiered")):
        monkeypatch.setenv(name, value)
        assert candidates_kept(5) == 0 and kept_tiles(768, 4096, streamed) == 0
        monkeypatch.delenv(name)
    monkeypatch.setenv("KMBENCH_TENSOR_CANDIDATES", "8")
    with pytest.raises(ImplementationError, match="0 \\(off\\) or 1 \\(on\\)"):
        candidates_kept(5)


@pytest.mark.parametrize("vec", [1, 4])
def test_the_recheck_splits_a_warp_into_groups_of_about_four_loads_a_lane(vec):
    """candidate_recheck's groups (recheck.cu): a power of two from 8 to 32 lanes dividing the
    warp, the fewest that leave each lane at most four loads, 32 where even that is more."""
    from impls.gpu.kmbench_gpu.tensor_settings import recheck_lanes

    for d in range(1, 1200):
        lanes = recheck_lanes(d, vec)
        assert lanes in (8, 16, 32), (d, lanes)
        assert lanes == 32 or lanes * vec * 4 >= d, (d, lanes)
        assert lanes == 8 or (lanes // 2) * vec * 4 < d, (d, lanes)
    assert [recheck_lanes(d, 4) for d in (64, 128, 256, 408, 768)] == [8, 8, 16, 32, 32]


def test_the_fp16_pass_is_asked_for_where_sigma_is_in_range_and_pads_wide_rows_to_a_k_step(monkeypatch):
    """KMBENCH_TENSOR_INPUT picks fp16 (the default) or tf32 and refuses the rest; fp16 for both
    passes where sigma's powers are normal floats, hopper_wide.cu's tiles padded to a k-step of 16;
    the bound's two terms come divided by sigma and sigma^2, rounded up."""
    from impls.gpu.kmbench_gpu import fp16_bound, hopper_pass

    monkeypatch.delenv("KMBENCH_TENSOR_INPUT", raising=False)
    assert hopper_pass.half_applies(128, 2.0 ** 12) and hopper_pass.half_applies(408, 2.0 ** 12)
    assert [hopper_pass.padded(d, True) for d in (136, 408, 768)] == [144, 416, 768]
    assert hopper_pass.padded(408) == 408
    assert hopper_pass.tile_floats(408, True) == 256 * 416 // 2 + 256 and hopper_pass.tile_floats(408) == 256 * 409
    assert hopper_pass.build_options(408, half=True)[-1] == "-DHALF=1"
    assert hopper_pass.half_applies(64, 2.0 ** 60) and not hopper_pass.half_applies(64, 2.0 ** 61)
    assert not hopper_pass.half_applies(64, 2.0 ** -61)
    _, _, alpha, beta = fp16_bound.error_terms16(128)
    over_sigma, over_square = hopper_pass.half_terms(128, 2.0 ** 12)
    assert alpha / 2.0 ** 12 <= over_sigma <= alpha / 2.0 ** 12 * (1 + 2 ** -22)
    assert beta / 2.0 ** 24 <= over_square <= beta / 2.0 ** 24 * (1 + 2 ** -22)
    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", "tf32")
    assert not hopper_pass.half_applies(128, 2.0 ** 12)
    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", "bf16")
    with pytest.raises(ImplementationError, match="KMBENCH_TENSOR_INPUT must be one of fp16, tf32"):
        hopper_pass.chosen_input()


def test_the_update_s_sums_setting_takes_moved_or_sorted_and_refuses_the_rest(monkeypatch):
    from impls.gpu.kmbench_gpu import update

    monkeypatch.delenv("KMBENCH_TENSOR_SUMS", raising=False)
    assert update.sums_setting() == "moved"
    monkeypatch.setenv("KMBENCH_TENSOR_SUMS", "sorted")
    assert update.sums_setting() == "sorted"
    monkeypatch.setenv("KMBENCH_TENSOR_SUMS", "incremental")
    with pytest.raises(ImplementationError, match="KMBENCH_TENSOR_SUMS must be one of moved, sorted"):
        update.sums_setting()


def test_memory_count_covers_the_data_twice():
    assert device_bytes(10**6, 128, 1024) >= 2 * 10**6 * 128 * 4


# ------------------------------------------------------------------ on a GPU


def _blobs(n, d, centers, seed=0, offset=0.0, std=0.3):
    """test_fast's blobs, tighter by default."""
    return fast_blobs(n, d, centers, seed, offset, std)


def _tensor():
    return KmbenchGpu(force_strategy="tensor")


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(17, 5), (33, 1), (33, 7), (64, 300), (100, 2000), (128, 64), (200, 64),
                                  (408, 300), (1000, 17)])
def test_tensor_path_agrees_with_the_oracle(d, k):
    n = 12_007  # not a multiple of any block
    _, record = gpu_cell(_tensor(), _blobs(n, d, k), k, 8)
    assert record["status"] == "ok", (record["build"], record.get("detail"))
    assert record["build"]["strategy"] == "tensor"
    assert 0 <= record["build"]["rechecked_points"] <= n * 8
    assert any("re-checked" in note for note in record["notes"])


@pytest.mark.gpu
def test_centroids_too_far_for_fp16_are_certified_by_nothing_and_stay_exact():
    """A start 1,000 times the data's size puts centroid norms past c_limit = 65504 / sigma (sigma is
    the rows'): their fp16 tiles could hold inf, so the pass certifies nothing and every point is
    re-checked in FP32 (ok, slowly); the far centroids that keep no point stay far all run."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip("hopper_pass.cu is sm_90a code")
    data = _blobs(6_007, 64, 20, std=1.0)
    start = 1000.0 * data[:20].astype(np.float64)
    start[:10] = data[20:30]  # half of them near the data, so the run assigns points
    _, record = gpu_cell(_tensor(), data, 20, 4, start=start)
    assert record["status"] == "ok", record.get("detail")
    assert "fp16" in record["build"]["tf32_pass"]
    assert record["build"]["rechecked_points"] == 6_007 * 4


@pytest.mark.gpu
@pytest.mark.parametrize("pass_input", ["fp16", "tf32"])
def test_tile_numbers_of_nine_bits_take_the_hopper_pass_and_stay_exact(pass_input, monkeypatch):
    """k = 9,000 needs 282 tiles of 32 slots (9 bits), more than Triton's packing holds: on Hopper
    the pass is hopper_pass.cu's (hopper_pass.register_tiling), in either input, and the cell is ok."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip("hopper_pass.cu is sm_90a code")
    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", pass_input)
    _, record = gpu_cell(_tensor(), _blobs(20_011, 64, 300, std=1.0), 9000, 4)
    assert record["status"] == "ok", record.get("detail")
    assert "hopper_pass.cu" in record["build"]["tf32_pass"]
    assert ("fp16" in record["build"]["tf32_pass"]) == (pass_input == "fp16")


@pytest.mark.gpu
@pytest.mark.parametrize("recheck", [None, "tiered"])
def test_the_recheck_is_exact_where_tf32x3_alone_falls_short(recheck, monkeypatch):
    """12,007 x 200, k = 773: the tf32x3 re-check alone ended a mismatch here (inertia 1.06e-3),
    IEEE FP32 and cuBLAS FP32 ok. The default is IEEE; the tiered re-check takes tf32x3's answer
    only where its own bound certifies it."""
    if recheck:
        monkeypatch.setenv("KMBENCH_TENSOR_RECHECK", recheck)
    _, record = gpu_cell(_tensor(), _blobs(12_007, 200, 773), 773, 8)
    assert record["build"]["recheck"] == (recheck or "ieee")
    assert record["status"] == "ok", record.get("detail")


@pytest.mark.gpu
def test_the_tiered_recheck_settles_most_listed_points_and_leaves_the_rest_to_ieee(monkeypatch):
    """Dense data far from the origin, k = 300: many listed points; tf32x3's bound settles most,
    and its near-ties go on to IEEE FP32. Labels agree with the IEEE-only re-check's."""
    import cupy

    from kmbench.data.datasets import Dataset
    from kmbench.protocol import runner

    monkeypatch.setenv("KMBENCH_TENSOR_CANDIDATES", "0")  # every uncertain point through the scan
    data = (np.random.default_rng(7).standard_normal((40_000, 64)) + 100.0).astype(np.float32)
    problem = runner.make_problem(Dataset("dense", data, None, {"generator": "test"}),
                                  runner.Settings(k=300, iterations=1))
    labels, counts = {}, {}
    for recheck in ("tiered", "ieee"):
        monkeypatch.setenv("KMBENCH_TENSOR_RECHECK", recheck)
        impl = _tensor()
        impl.use_graph = False
        impl.prepare(problem)
        path = impl._chosen.path
        path.start(np.asarray(problem.initial_centroids, np.float64) - impl._shift)
        path.certify()
        path.recheck_flagged()
        cupy.cuda.get_current_stream().synchronize()
        labels[recheck] = path.labels.get()
        counts[recheck] = (int(path.flagged_count.get()[0]), int(path.left_count.get()[0]))
        impl.release()
    listed, left = counts["tiered"]
    assert listed > 1000 and 0 < left < listed / 2, counts
    assert (labels["tiered"] == labels["ieee"]).mean() > 0.999  # only exact near-ties may differ


@pytest.mark.gpu
def test_high_d_takes_the_tensor_path_by_default():
    _, record = gpu_cell(KmbenchGpu(), _blobs(5_000, 64, 10), 10, 3)
    assert record["build"]["strategy"] == "tensor" and record["status"] == "ok"


@pytest.mark.gpu
@pytest.mark.parametrize("recheck", ["tiered", "ieee", "tf32x3"])  # tf32x3 is fine on this well-posed problem
@pytest.mark.parametrize("graph", ["1", "0"])
def test_far_from_the_origin_with_and_without_the_graph(recheck, graph, monkeypatch):
    monkeypatch.setenv("KMBENCH_CUDA_GRAPH", graph)
    monkeypatch.setenv("KMBENCH_TENSOR_RECHECK", recheck)
    _, record = gpu_cell(_tensor(), _blobs(30_011, 64, 40, offset=1e4), 40, 10)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["recheck"] == recheck


@pytest.mark.gpu
@pytest.mark.parametrize("tol", [0.0, 0.01])
def test_tolerance_rule_stops_with_the_oracle(tol):
    oracle, record = gpu_cell(_tensor(), _blobs(40_000, 96, 50, std=2.0), 50, 60, tol=tol)
    assert record["status"] == "ok", record.get("detail")
    assert record["iterations_executed"] == oracle.iterations


@pytest.mark.gpu
def test_separated_clusters_started_at_their_centres_need_no_recheck():
    """The bound is not vacuous: with every margin wide, no point is re-checked."""
    from dataclasses import replace

    from kmbench.protocol import runner, validate
    from kmbench.data.datasets import Dataset

    rng = np.random.default_rng(3)
    centres = rng.uniform(-10, 10, (64, 128)).astype(np.float32)
    data = (centres[rng.integers(0, 64, 50_000)] + 0.1 * rng.standard_normal((50_000, 128))).astype(np.float32)
    dataset = Dataset("gpu", data, None, {"generator": "test"})
    settings = runner.Settings(k=64, iterations=5, warmup=1, repeats=1)
    problem = replace(runner.make_problem(dataset, settings), initial_centroids=centres)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, 5)
    record = runner.run_cell(_tensor(), problem, oracle, dataset, settings, "gpu")
    assert record["status"] == "ok"
    assert record["build"]["rechecked_points"] == 0


@pytest.mark.gpu
def test_dense_data_are_rechecked_and_agree():
    data = (np.random.default_rng(5).standard_normal((30_000, 64)) + 100.0).astype(np.float32)
    _, record = gpu_cell(_tensor(), data, 500, 10)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["rechecked_points"] > 0


@pytest.mark.gpu
def test_the_recheck_list_is_sorted_by_tf32_winner_with_its_limits(monkeypatch):
    """After one assignment: the sorted list holds the listed points once each, in order of
    their TF32 winner, each with the limit the TF32 pass gave it."""
    import cupy

    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    monkeypatch.setenv("KMBENCH_TENSOR_CANDIDATES", "0")  # every uncertain point through the scan
    data = (np.random.default_rng(6).standard_normal((20_000, 64)) + 10.0).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    path = TensorPath(x, 300, cupy.zeros(1, dtype=cupy.uint64))
    path.start(cupy.asnumpy(x[:300]).astype(np.float64))
    path.certify()
    tf32_labels = path.labels.copy()
    path.recheck_flagged()
    count = int(path.flagged_count.get()[0])
    assert count > 0
    listed, limits = cupy.asnumpy(path.flagged[:count]), cupy.asnumpy(path.limits[:count])
    ordered, ordered_limits = cupy.asnumpy(path.flagged_sorted[:count]), cupy.asnumpy(path.limits_sorted[:count])
    winners = cupy.asnumpy(tf32_labels)[ordered]
    assert np.array_equal(np.sort(ordered), np.sort(listed))
    assert (np.diff(winners) >= 0).all()
    assert dict(zip(ordered.tolist(), ordered_limits.tolist())) == dict(zip(listed.tolist(), limits.tolist()))
    assert not path.flagged_counts.any()  # left at zero for the next iteration


@pytest.mark.gpu
@pytest.mark.parametrize("n, d, k", [(40_000, 64, 300), (20_000, 64, 2000), (20_000, 200, 2000), (10_000, 160, 9000)])
def test_uncertain_points_take_the_exact_winner_among_their_candidates(n, d, k, monkeypatch):
    """Dense data far from the origin (many uncertain points): recheck.cu scores each against the
    candidates the TF32 pass left, listed in the pass where rows stay on chip (d = 64; crowded
    slots as whole columns at 10 tiles, left to the scan at 63), from every tile's best two where rows stream (8 tiles at d = 200,
    36 at d = 160, past one warp's 32 lanes). The same points are re-checked as by the scan
    alone, and every label whose float64 margin is past FP32's rounding is the float64 winner."""
    import cupy

    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    data = (np.random.default_rng(7).standard_normal((n, d)) + 100.0).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[:k]).astype(np.float64)
    totals = {}
    for lists in ("1", "0"):
        monkeypatch.setenv("KMBENCH_TENSOR_CANDIDATES", lists)
        path = TensorPath(x, k, cupy.zeros(1, dtype=cupy.uint64))
        assert (path.candidates > 0 or path.kept_tiles > 0) == (lists == "1")
        path.start(start)
        path.assign()
        cupy.cuda.get_current_stream().synchronize()
        scanned, with_candidates = (int(v) for v in path.listed_counts.get())
        totals[lists] = scanned + with_candidates
        if lists == "1":
            labels = path.labels.get()
            if path.candidates:  # listed in the pass; with crowded slots as columns, few are left to the scan
                assert with_candidates > 1000, (scanned, with_candidates)
                assert k > 1024 or scanned < totals[lists] / 10, (scanned, with_candidates)
    assert totals["1"] == totals["0"] > 50, totals
    assert _exact_where_clear(cupy.asnumpy(x), start, labels) > 0.9


@pytest.mark.gpu
@pytest.mark.parametrize("tma", ["0", "1"])
@pytest.mark.parametrize("d, k, folded", [(128, 1024, "128,128,128,8,2,32"), (64, 1000, "128,128,64,8,3,32"),
                                          (128, 300, "128,64,128,4,3,32"), (48, 1000, "128,128,64,4,2,32"),
                                          (48, 40, "128,128,64,4,2,32")])
def test_folded_columns_give_the_pass_of_tiles_as_wide_as_the_slots(d, k, folded, tma, monkeypatch):
    """Tiles of 64 or 128 centroids folded into 32 slots (tensor_kernels._best_two_packed): each
    slot keeps the best two of the same packed scores as with tiles of 32, whatever the order, so
    the TF32 labels, the listed points with their limits and each listed point's candidates are
    those of tiles of 32 (dense data far from the origin: thousands listed; k = 1000 and 300
    leave a part tile past k; at d = 48 the rows are padded to 64; at k = 40 the tile numbers of
    the columns past k wrap in one bit). The same where the folded pass takes its centroid tiles by
    the copy engine (KMBENCH_TENSOR_TMA=1: zeros past k and d). It rests on TF32 products that do
    not depend on the tile's width, as Triton's wgmma gives them on Hopper (whose shared memory the
    tilings are sized for)."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) < 90:
        pytest.skip("the tilings are sized for Hopper's shared memory, and the copy engine needs it")

    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    data = (np.random.default_rng(8).standard_normal((30_000, d)) + 100.0).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[:k]).astype(np.float64)
    seen = []
    padded = 1 << (d - 1).bit_length()  # Triton's blocks are powers of two
    monkeypatch.setenv("KMBENCH_TENSOR_PASS", "triton")  # the Triton pass's tilings (hopper_pass.cu has its own)
    for tiling, copy_engine in ((f"128,32,{padded},4,3", "0"), (folded, tma)):
        monkeypatch.setenv("KMBENCH_TENSOR_TILING", tiling)
        monkeypatch.setenv("KMBENCH_TENSOR_TMA", copy_engine)
        path = TensorPath(x, k, cupy.zeros(1, dtype=cupy.uint64))
        assert path.slots == 32 and path.pack_bits > 0 and path.candidates > 0
        assert (path.centroid_loads == "copy engine (TMA)") == (copy_engine == "1")
        path.start(start)
        path.certify()
        seen.append(_pass_lists(path))
    assert len(seen[0][2]) > 1000, len(seen[0][2])
    assert np.array_equal(seen[0][0], seen[1][0])
    assert seen[0][1] == seen[1][1] and seen[0][2] == seen[1][2]


def _pass_lists(path) -> tuple[np.ndarray, dict, dict]:
    """A TF32 pass's labels, the rows it left to the scan (with their limits) and each
    short-listed row's candidates."""
    scanned, listed = (int(v) for v in path.listed_counts.get())
    rows, sizes = path.candidate_rows[:listed].get(), path.candidate_sizes[:listed].get()
    index = path.candidate_index[:listed * path.candidates].get().reshape(listed, path.candidates)
    return (path.labels.get(), dict(zip(path.flagged[:scanned].get().tolist(), path.limits[:scanned].get().tolist())),
            {int(row): tuple(index[place, :size]) for place, (row, size) in enumerate(zip(rows, sizes))})


def _both_passes_on_dense_data(n: int, d: int, k: int, seed: int, monkeypatch, source: str, half: bool = False):
    """Triton's pass and the Hopper pass (source: its .cu) on the same centroids over dense data far
    from the origin, before the mean is taken off (thousands of near-ties): each one's _pass_lists,
    the float64 winners, and what each lists for the re-check (candidates or tile records)."""
    import cupy

    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    data = (np.random.default_rng(seed).standard_normal((n, d)) + 100.0).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[:k]).astype(np.float64)
    seen, lists = {}, {}
    for chosen in ("triton", "hopper"):
        monkeypatch.setenv("KMBENCH_TENSOR_PASS", chosen)
        path = TensorPath(x, k, cupy.zeros(1, dtype=cupy.uint64))
        assert (source in path.tf32_pass) == (chosen == "hopper")
        assert ("fp16" in path.tf32_pass) == (half and chosen == "hopper")
        lists[chosen] = "candidates" if path.candidates else "tiles" if path.kept_tiles else "none"
        path.start(start)
        path.certify()
        seen[chosen] = _pass_lists(path)
    points = cupy.asnumpy(x).astype(np.float64)
    exact = (0.5 * (start * start).sum(axis=1)[None, :] - points @ start.T).argmin(axis=1)
    return seen, exact, lists


def _certified_rows_are_exact(labels, scanned, short, exact) -> np.ndarray:
    """Every row a pass certified (on neither list) has the float64 winner as its label, and every
    short-listed row has it among its candidates (a column, -1 - slot, holds every centroid of its
    slot). The certified rows, as a mask."""
    certified = np.ones(labels.size, bool)
    certified[list(scanned)] = certified[list(short)] = False
    assert np.array_equal(labels[certified], exact[certified])
    for row, candidates in short.items():
        winner = int(exact[row])
        assert winner in candidates or -1 - winner % 32 in candidates, (row, winner, candidates)
    return certified


@pytest.mark.gpu
@pytest.mark.parametrize("pass_input", ["fp16", "tf32"])
@pytest.mark.parametrize("n, d, k", [(30_001, 128, 1024), (30_000, 64, 1000), (20_000, 128, 300), (5_003, 48, 37),
                                     (4_001, 16, 300)])
def test_the_hopper_pass_certifies_and_lists_as_soundly_as_triton(n, d, k, pass_input, monkeypatch):
    """hopper_pass.cu against Triton's certified_assign on the same centroids (dense data far from
    the origin: thousands of near-ties listed; n and k leave part tiles): every row it certifies
    has the float64 winner as its label, every short-listed row has that winner among its
    candidates (a column, -1 - slot, holds every centroid of its slot), and its lists are
    Triton's but for the few rows whose margin the products' order moves across the bound."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip("hopper_pass.cu is sm_90a code")

    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", pass_input)
    seen, exact, _ = _both_passes_on_dense_data(n, d, k, 9, monkeypatch, "hopper_pass.cu", pass_input == "fp16")
    labels, scanned, short = seen["hopper"]
    assert len(short) > 100, len(short)
    certified = _certified_rows_are_exact(labels, scanned, short, exact)
    triton_labels, triton_scanned, triton_short = seen["triton"]
    both = certified.copy()
    both[list(triton_scanned)] = both[list(triton_short)] = False
    assert np.array_equal(labels[both], triton_labels[both])
    moved = set(scanned) ^ set(triton_scanned) | set(short) ^ set(triton_short)
    assert len(moved) <= 0.01 * (len(triton_scanned) + len(triton_short)) + 2, len(moved)


@pytest.mark.gpu
@pytest.mark.parametrize("pass_input", ["fp16", "tf32"])
@pytest.mark.parametrize("n, d, k", [(20_003, 408, 600), (9_001, 136, 300), (5_000, 200, 37), (3_000, 768, 257),
                                     (4_000, 1000, 1100)])
def test_the_wide_hopper_pass_certifies_and_lists_soundly(n, d, k, pass_input, monkeypatch):
    """hopper_wide.cu (d > 128; chunks of 32 TF32 or 64 fp16 coordinates, the last 8 to 64 wide, in
    fp16 padded with zeros to 16 at d = 136, 200 and 408; one to five tiles of 256, part tiles; more
    row tiles than SMs at 20,003) on dense data far from the origin: every row it certifies has the
    float64 winner, every short-listed row has that winner among its candidates, and where Triton's
    pass (tile records) certifies a row too, the two give it the same label."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip("hopper_wide.cu is sm_90a code")

    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", pass_input)
    seen, exact, lists = _both_passes_on_dense_data(n, d, k, d, monkeypatch, "hopper_wide.cu", pass_input == "fp16")
    assert lists == {"triton": "tiles", "hopper": "candidates"}
    labels, scanned, short = seen["hopper"]
    assert len(short) > 10, len(short)
    certified = _certified_rows_are_exact(labels, scanned, short, exact)
    print(f"certified {certified.mean():.1%}, short-listed {len(short) / n:.1%}, scanned {len(scanned) / n:.1%}")
    assert certified.mean() > 0.1, certified.mean()
    triton_labels, triton_scanned, _ = seen["triton"]
    both = certified.copy()
    both[list(triton_scanned)] = False
    assert np.array_equal(labels[both], triton_labels[both])


@pytest.mark.gpu
@pytest.mark.parametrize("d", [128, 256])
@pytest.mark.parametrize("scale", [1e-22, 3e-21, 1e-19, 1e-12, 1.0])
@pytest.mark.parametrize("pass_input", ["fp16", "tf32"])
def test_the_hopper_pass_certifies_only_exact_winners_on_data_of_tiny_scale(scale, d, pass_input, monkeypatch):
    """Data so small that every product is subnormal, where no relative bound covers what the tensor
    cores compute: bound.underflow_floor must leave those rows to the re-check. Every row the pass
    certifies has the float64 winner as its label (exact ties aside); at scale 1 most are certified.
    In fp16 at d = 128 where sigma stays in range (scale 1 and 1e-12). Inputs below fp16's smallest
    normal are checked against fp16_bound's terms by tests/test_fp16_bound.py's emulation, not here:
    on data a GPU test can certify, those terms are far below TF32's."""
    import cupy

    if int(cupy.cuda.Device().compute_capability) != 90:
        pytest.skip("hopper_pass.cu is sm_90a code")

    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", pass_input)
    n, k = 8192, 256
    data = (np.random.default_rng(12).standard_normal((n, d)) * scale).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[:k]).astype(np.float64)
    path = TensorPath(x, k, cupy.zeros(1, dtype=cupy.uint64))
    assert ("hopper_wide.cu" if d > 128 else "hopper_pass.cu") in path.tf32_pass
    assert ("fp16" in path.tf32_pass) == (pass_input == "fp16" and scale >= 1e-12)
    path.start(start)
    path.certify()
    labels, scanned, short = _pass_lists(path)
    points = cupy.asnumpy(x).astype(np.float64)
    scores = 0.5 * (start * start).sum(axis=1)[None, :] - points @ start.T
    two = np.sort(scores, axis=1)[:, :2]
    certified = np.ones(n, bool)
    certified[list(scanned)] = certified[list(short)] = False
    judged = certified & (two[:, 0] < two[:, 1])
    wrong = np.flatnonzero(labels[judged] != scores[judged].argmin(axis=1))
    assert wrong.size == 0, (wrong.size, int(judged.sum()))
    if scale == 1.0:
        assert judged.mean() > 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("scatter", ["block", "warp"])
@pytest.mark.parametrize("n, k", [(100_003, 1000), (37, 300), (50_000, 7)])
def test_the_update_orders_every_point_by_cluster_and_sums_each(n, k, scatter, monkeypatch):
    """The counting sort (histogram, scan, then block_scatter or scatter) leaves every point once
    in order, in runs of one cluster in cluster order, with half the points in one hot cluster;
    the float64 sums over those runs are each cluster's sum (fewer points than blocks, too)."""
    import cupy

    from impls.gpu.kmbench_gpu import tensor_path, update

    monkeypatch.setattr(update, "SCATTER", scatter)
    rng = np.random.default_rng(10)
    data = rng.standard_normal((n, 40)).astype(np.float32)
    labels = np.where(rng.random(n) < 0.5, 0, rng.integers(0, k, n)).astype(np.int32)
    path = tensor_path.TensorPath(cupy.asarray(data), k, cupy.zeros(1, dtype=cupy.uint64))
    path.labels[...] = cupy.asarray(labels)
    steps = path.sort_and_sum_steps(False, path.previous, "scan",
                                    (path.listed_counts, path.flagged_total, path.bound_max), path.never_moved)
    assert ("block_scatter" in dict(steps)) == (scatter == "block")
    for _, step in steps:
        step()
    order = path.order.get()
    assert np.array_equal(np.sort(order), np.arange(n))
    assert (np.diff(labels[order]) >= 0).all()
    expected = np.zeros((k, 40))
    np.add.at(expected, labels, data.astype(np.float64))
    np.testing.assert_allclose(path.sums.get(), expected, rtol=1e-12, atol=1e-9)


def _path_steps(x, start, k, steps, sums, most, monkeypatch):
    """TensorPath's labels and float64 centroids after each of `steps` iterations, its sums made
    as KMBENCH_TENSOR_SUMS=`sums` says with update.MOVED_MOST = `most`; and the iterations whose
    sums came from the moved rows."""
    import cupy

    from impls.gpu.kmbench_gpu import tensor_path, update

    monkeypatch.setenv("KMBENCH_TENSOR_SUMS", sums)
    monkeypatch.setattr(update, "MOVED_MOST", most)
    path = tensor_path.TensorPath(x, k, cupy.zeros(1, dtype=cupy.uint64))
    path.start(start)
    out = []
    for _ in range(steps):
        path.iterate(False)
        out.append((path.labels.get(), path.centroids64.get(), path.counts.get()))
    return out, path.moved_sum_steps()


@pytest.mark.gpu
@pytest.mark.parametrize("d, most", [(64, 1 / 8), (200, 1 / 8), (64, 1.0)])
def test_sums_from_the_moved_rows_give_the_sorted_update_s_centroids(d, most, monkeypatch):
    """Step by step from the same start, the update from the moved rows (moved_sums.cu) ends on the
    sorted update's labels and centroids (float64 sums of the same rows, exact here), with counts
    that are every cluster's size; the first step sorts, and later ones take the moved rows (with
    MOVED_MOST = 1, every one: the first adds every row, as none had a label, to the zeroed sums)."""
    import cupy

    rng = np.random.default_rng(12)
    n, k, steps = 40_009, 150, 7
    data = _blobs(n, d, 60, seed=3, std=1.0)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[rng.choice(n, k, replace=False)]).astype(np.float64)
    moved, moved_steps = _path_steps(x, start, k, steps, "moved", most, monkeypatch)
    sorted_, sorted_steps = _path_steps(x, start, k, steps, "sorted", most, monkeypatch)
    assert sorted_steps == 0
    assert (1 <= moved_steps <= steps - 1) if most < 1 else moved_steps == steps
    for (labels, centroids, counts), (labels_sorted, centroids_sorted, _) in zip(moved, sorted_):
        assert np.array_equal(labels, labels_sorted)
        np.testing.assert_allclose(centroids, centroids_sorted, rtol=1e-13, atol=1e-13)
        assert np.array_equal(counts, np.bincount(labels, minlength=k))


@pytest.mark.gpu
def test_the_update_sorts_again_after_moved_row_steps_and_keeps_an_emptied_centroid(monkeypatch):
    """Labels written by hand, so that the update's choice alternates: every row new (sort), 1%
    moved (moved rows), half moved (sort again: choose_sums must clear the sums the moved-row step
    kept), then cluster 0 emptied into cluster 1 (moved rows). After each step the counts are every
    cluster's size and the centroids its mean in float64, an empty cluster's its last one."""
    import cupy

    from impls.gpu.kmbench_gpu import tensor_path, update

    monkeypatch.delenv("KMBENCH_TENSOR_SUMS", raising=False)
    monkeypatch.setattr(update, "MOVED_MOST", 1 / 8)
    rng = np.random.default_rng(21)
    n, d, k = 20_011, 64, 50
    data = rng.standard_normal((n, d)).astype(np.float32)
    path = tensor_path.TensorPath(cupy.asarray(data), k, cupy.zeros(1, dtype=cupy.uint64))
    path.start(data[:k].astype(np.float64))
    first = rng.integers(0, k, n)
    few = first.copy()
    few[rng.choice(n, n // 100, replace=False)] = rng.integers(0, k, n // 100)
    half = few.copy()
    half[: n // 2] = rng.integers(0, k, n // 2)
    emptied = np.where(half == 0, 1, half)
    expected = data[:k].astype(np.float64)
    for labels in (first, few, half, emptied):
        path.labels[...] = cupy.asarray(labels.astype(np.int32))
        path.update(False)
        counts = np.bincount(labels, minlength=k)
        sums = np.zeros((k, d))
        np.add.at(sums, labels, data.astype(np.float64))
        expected = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], expected)
        assert np.array_equal(path.counts.get(), counts)
        np.testing.assert_allclose(path.centroids64.get(), expected, rtol=1e-12, atol=1e-12)
    assert path.moved_sum_steps() == 2
    assert path.counts.get()[0] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("tol", [None, 0.0])
def test_a_tensor_cell_takes_the_moved_rows_in_its_graph_and_stays_exact(tol, monkeypatch):
    """The whole row, its CUDA graph holding both ways (the GPU chooses each iteration): `ok`, and
    the record says in how many iterations the sums came from the moved rows; with them turned
    off, none."""
    monkeypatch.setenv("KMBENCH_CUDA_GRAPH", "1")
    data = _blobs(30_011, 96, 40, std=1.0)
    _, record = gpu_cell(_tensor(), data, 40, 12, tol=tol)
    assert record["status"] == "ok", record.get("detail")
    assert 1 <= record["build"]["moved_sum_iterations"] < record["iterations_executed"]
    assert (record["build"]["launch"] == "cuda graph") == (tol is None)  # the tolerance rule launches per step
    monkeypatch.setenv("KMBENCH_TENSOR_SUMS", "sorted")
    _, record = gpu_cell(_tensor(), data, 40, 12, tol=tol)
    assert record["status"] == "ok" and "moved_sum_iterations" not in record["build"]


def _exact_where_clear(x: np.ndarray, start: np.ndarray, labels: np.ndarray) -> float:
    """Checks that every label whose float64 margin is past any FP32 evaluation's rounding is the
    float64 winner; returns the share of such labels."""
    x64, c64 = x.astype(np.float64), start.astype(np.float32).astype(np.float64)
    scores = 0.5 * (c64 ** 2).sum(axis=1)[None, :] - x64 @ c64.T
    two = np.sort(scores, axis=1)[:, :2]
    scale = np.linalg.norm(x64, axis=1) * np.linalg.norm(c64, axis=1).max() + 0.5 * (c64 ** 2).sum(axis=1).max()
    clear = (two[:, 1] - two[:, 0]) > x.shape[1] * 2.0 ** -22 * scale
    assert np.array_equal(labels[clear], scores.argmin(axis=1)[clear])
    return float(clear.mean())


@pytest.mark.gpu
@pytest.mark.parametrize("whole_most", [0, 2])
def test_points_with_many_whole_tiles_are_passed_on_to_the_scan(whole_most, monkeypatch):
    """Where every tile's best two are kept (Triton's pass at d = 200), a point with more than
    recheck.WHOLE_MOST tiles to score whole goes to exact_assign instead. Crowded centroids (2,000 starts on
    10 blobs, each point's candidates in many tiles): points are passed on, every one of them once,
    and the labels are still the float64 winners wherever the margin is past rounding."""
    import cupy

    from impls.gpu.kmbench_gpu import recheck, tensor_path

    monkeypatch.setattr(recheck, "WHOLE_MOST", whole_most)
    monkeypatch.setenv("KMBENCH_TENSOR_PASS", "triton")  # hopper_wide.cu lists candidates instead
    rng = np.random.default_rng(8)
    centres = 20.0 * rng.standard_normal((10, 200))
    data = (centres[rng.integers(0, 10, 20_000)] + rng.standard_normal((20_000, 200))).astype(np.float32)
    x = cupy.asarray(data - data.mean(axis=0))
    start = cupy.asnumpy(x[:2000]).astype(np.float64)
    path = tensor_path.TensorPath(x, 2000, cupy.zeros(1, dtype=cupy.uint64))
    assert path.kept_tiles
    path.start(start)
    path.assign()
    passed, flagged = int(path.passed_count.get()[0]), int(path.flagged_count.get()[0])
    assert 0 < passed <= flagged, (passed, flagged)
    listed = cupy.asnumpy(path.flagged_sorted[:passed])
    assert np.unique(listed).size == passed and np.isin(listed, cupy.asnumpy(path.flagged[:flagged])).all()
    assert _exact_where_clear(cupy.asnumpy(x), start, path.labels.get()) > 0.01


@pytest.mark.gpu
def test_renumbering_groups_near_centroids_and_undoes_itself():
    """order_by_neighbourhood keeps every centroid once, puts centroids of one blob next to each
    other (here 8 blobs of 32 starts, shuffled), and centroids_in_order gives the harness's
    numbering back."""
    import cupy

    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    rng = np.random.default_rng(8)
    blob_of = rng.permutation(np.repeat(np.arange(8), 32))
    centres = rng.uniform(-50, 50, (8, 64))
    start = centres[blob_of] + 0.1 * rng.standard_normal((256, 64))
    x = cupy.asarray(rng.standard_normal((1000, 64)).astype(np.float32))
    path = TensorPath(x, 256, cupy.zeros(1, dtype=cupy.uint64))
    path.start(start)
    path.order_by_neighbourhood()
    order = cupy.asnumpy(path.order_of)
    assert sorted(order.tolist()) == list(range(256))
    runs = 1 + int((np.diff(blob_of[order]) != 0).sum())
    assert runs <= 16  # shuffled, 8 blobs make about 250 runs; grouped, at most two per blob
    assert np.array_equal(cupy.asnumpy(path.centroids64), start[order])
    assert np.array_equal(cupy.asnumpy(path.centroids_in_order()), start)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["1", "0"])
def test_exact_ties_go_to_the_harness_lower_index_in_either_order(order, monkeypatch):
    """Duplicated starting centroids make exact ties for every point near them; the oracle gives
    those points the lower index, and so must the re-check, however the path numbers its
    centroids."""
    monkeypatch.setenv("KMBENCH_TENSOR_ORDER", order)
    rng = np.random.default_rng(9)
    data = _blobs(8_009, 48, 40, seed=9)
    start = data[rng.choice(len(data), 120, replace=False)].astype(np.float64)
    start[60:80] = start[0:20]  # exact duplicates, far apart in the harness's numbering
    oracle, record = gpu_cell(_tensor(), data, 120, 4, start=start)
    assert record["status"] == "ok", record.get("detail")
    assert record["build"]["centroid_order"] == ("by neighbourhood" if order == "1" else "as given")
    assert record["build"]["rechecked_points"] > 0
    # d = 48: tiles of 128 folded into 32 slots, read by the copy engine where the GPU has one.
    import cupy

    assert record["build"]["tiling"] == [128, 128, 64, 4, 2, 32]
    hopper = int(cupy.cuda.Device().compute_capability) >= 90
    assert record["build"]["centroid_loads"] == ("copy engine (TMA)" if hopper else "pointers")


@pytest.mark.gpu
@pytest.mark.parametrize("pass_input", ["fp16", "tf32"])
def test_a_tensor_cell_is_floored_by_the_measured_rate_of_its_pass(pass_input, tmp_path, monkeypatch):
    """The tensor path declares 2 d FLOPs a distance in the precision its pass's products read
    (fp16 on Hopper unless KMBENCH_TENSOR_INPUT=tf32; TF32 elsewhere); its record carries them
    and says the same in its precision, the environment carries the rate measured on this GPU,
    and its compute floor is 2 n d k at that rate."""
    import cupy

    from kmbench.protocol import ceilings, runner
    from kmbench.data.datasets import Dataset
    from kmbench.tasks import lloyd

    monkeypatch.setenv("KMBENCH_TENSOR_INPUT", pass_input)
    unit = pass_input if int(cupy.cuda.Device().compute_capability) == 90 else "tf32"
    data = Dataset("floor", _blobs(5_000, 64, 20), None, {"generator": "test"})
    settings = runner.Settings(k=20, iterations=3, warmup=0, repeats=1)
    record, = lloyd.run([_tensor()], [data], settings, store=tmp_path / "r.jsonl")
    assert record["status"] == "ok", record.get("detail")
    assert record["arithmetic"] == {"unit": unit, "per_distance": 128.0}
    assert record["build"]["precision"].startswith(f"{unit} certified")
    floors = ceilings.floors(record)
    assert floors["compute_unit"] == ceilings.UNIT_NAMES[unit]
    rate = record["env"]["gpu"][ceilings.RATE_OF_UNIT[unit]]
    assert floors["compute_floor_s"] == pytest.approx(5_000 * 20 * 128 / rate)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["flash-kmeans", "flash-kmeans-fp16"])
def test_flash_kmeans_rows_are_recorded_with_their_precision(name):
    from kmbench.registry import discover

    impl = discover()[name]
    ready, why = impl.available()
    if not ready:
        pytest.skip(why)
    _, record = gpu_cell(impl, _blobs(20_000, 64, 16), 16, 5)
    assert record["status"] in ("ok", "mismatch"), record.get("detail")
    assert record["iterations_executed"] == 5
    assert ("fp16" in record["build"]["precision"]) == name.endswith("fp16")


ROWS = ["kmbench-gpu", "triton-fused", "yinyang-gpu"]


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(6))
def test_every_gpu_row_passes_random_problems(seed):
    """d and k drawn at random, dense or clustered data, near or far from the origin."""
    from kmbench.registry import discover

    rng = np.random.default_rng(1000 + seed)
    d = int(rng.choice([2, 3, 8, 16, 40, 64, 100, 200]))
    k = int(rng.integers(100, 1200))
    offset = float(rng.choice([0.0, 50.0, 1e3]))
    if seed % 2:
        data = (rng.standard_normal((20_000, d)) + offset).astype(np.float32)
    else:
        data = _blobs(20_000, d, int(rng.integers(5, 200)), seed=seed, offset=offset, std=1.0)
    everything = discover()
    for name in ROWS:
        impl = everything[name]
        if not impl.available()[0]:
            continue
        _, record = gpu_cell(impl, data, k, 10)
        assert record["status"] == "ok", (name, d, k, offset, record.get("detail"))


@pytest.mark.gpu
def test_crowded_fraction_tells_crowded_centroids_from_spread_ones():
    """2,000 starts drawn from 10 blobs in 200 dimensions: most are within the TF32 bound of a
    second neighbour, so the run renumbers them (strategies/tensor.py's CROWDED). 2,000 starts
    near 2,000 far-apart centres: few are."""
    import cupy

    from impls.gpu.kmbench_gpu.strategies.tensor import CROWDED
    from impls.gpu.kmbench_gpu.tensor_path import TensorPath

    rng = np.random.default_rng(9)
    fractions = {}
    for name, centres in (("crowded", 20.0 * rng.standard_normal((10, 200))),
                          ("spread", 20.0 * rng.standard_normal((2000, 200)))):
        data = (centres[np.arange(20_000) % len(centres)] + rng.standard_normal((20_000, 200))).astype(np.float32)
        x = cupy.asarray(data - data.mean(axis=0))
        path = TensorPath(x, 2000, cupy.zeros(1, dtype=cupy.uint64))
        path.start(cupy.asnumpy(x[:2000]).astype(np.float64))
        fractions[name] = path.crowded_fraction()
    assert fractions["crowded"] > CROWDED > fractions["spread"], fractions
