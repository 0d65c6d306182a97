"""kmbench-gpu-stream (impls/gpu/kmbench_gpu/stream.py): data streamed from pinned host memory. Without a
GPU: how the points are cut into chunks. With one (make test-gpu), chunks of a few thousand
rows, so every run crosses many chunk edges, an odd number of them (each iteration's first
copy then reuses the slot the previous iteration read last): agreement with the oracle and
with the resident kernels on every strategy it runs, both stop rules, float64 input, and the
host memory pinned and unpinned."""

import numpy as np
import pytest

from impls.gpu.kmbench_gpu import KmbenchGpu
from impls.gpu.kmbench_gpu.stream import CHUNK_ENV, KmbenchGpuStream, chunk_rows, chunks
from kmbench.protocol import validate
from tests.conftest import blob_data, gpu_cell, memory_problem


def test_chunks_cover_the_rows_in_order():
    assert chunks(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert chunks(8, 4) == [(0, 4), (4, 4)]
    assert chunk_rows(10**9, 128, chunk_bytes=1 << 29) == (1 << 29) // 512
    assert chunk_rows(100, 128, chunk_bytes=1 << 29) == 100  # never more than n
    assert chunk_rows(100, 1 << 20, chunk_bytes=16) == 1  # never less than one row


def test_strategies_are_the_ones_that_work_a_chunk_at_a_time():
    def problem(d, k):
        return memory_problem(np.zeros((k + 1, d), np.float32), k, 1)[2]

    impl = KmbenchGpuStream()
    assert impl.strategy_for(problem(2, 5)) == "columns"  # kmbench-gpu would take resident
    assert impl.strategy_for(problem(2, 20)) == "small-k"
    assert impl.strategy_for(problem(3, 100)) == "tiled"
    assert impl.strategy_for(problem(64, 10)) == "tensor"


def _small_chunks(monkeypatch, rows: int, d: int):
    monkeypatch.setenv(CHUNK_ENV, str(rows * d * 4))


@pytest.mark.gpu
@pytest.mark.parametrize("n, d, k, rows", [(20_011, 2, 5, 3_001), (30_007, 3, 100, 4_999), (24_001, 64, 300, 3_500),
                                           (12_007, 256, 60, 2_500)])
def test_streamed_agrees_with_oracle_and_resident(monkeypatch, n, d, k, rows):
    _small_chunks(monkeypatch, rows, d)
    assert len(chunks(n, rows)) % 2 == 1
    data = blob_data(np.random.default_rng(n), n=n, d=d, k=k)
    oracle, record = gpu_cell(KmbenchGpuStream(), data, k, iterations=6, repeats=2)
    assert record["status"] == validate.OK, record.get("detail")
    assert record["build"]["streamed"] and record["build"]["chunks"] == len(chunks(n, rows))
    streamed = KmbenchGpuStream()
    resident = KmbenchGpu()
    _, _, problem = memory_problem(data, k, 6)
    answers = []
    for impl in (streamed, resident):
        impl.prepare(problem)
        try:
            answers.append(impl.run(problem).centroids)
        finally:
            impl.release()
    # The same arithmetic per point; only the float64 sums meet in another order.
    np.testing.assert_allclose(answers[0], answers[1], rtol=0, atol=1e-6 * oracle.spread)


@pytest.mark.gpu
@pytest.mark.parametrize("d, k", [(2, 20), (64, 200)])
def test_streamed_tolerance_rule_stops_with_the_oracle(monkeypatch, d, k):
    _small_chunks(monkeypatch, 2_999, d)
    data = blob_data(np.random.default_rng(d), n=15_000, d=d, k=k)
    oracle, record = gpu_cell(KmbenchGpuStream(), data, k, iterations=100, tol=1e-3)
    assert record["status"] == validate.OK, record.get("detail")
    assert record["iterations_executed"] == oracle.iterations < 100


@pytest.mark.gpu
def test_streamed_float64_data_and_offset(monkeypatch):
    _small_chunks(monkeypatch, 1_000, 3)
    data = blob_data(np.random.default_rng(7), n=9_001, d=3, k=8, dtype=np.float64) + 1e6
    _, record = gpu_cell(KmbenchGpuStream(), data, 8, iterations=5)
    assert record["status"] == validate.OK, record.get("detail")


def test_a_mapped_or_read_only_array_is_copied_before_pinning(tmp_path):
    """cudaHostRegister refuses memory the process may not write; an array it can pin is kept."""
    from kmbench.data import datasets
    from kmbench.protocol.device import pinnable

    cached = datasets.blobs(1_000, 2, 3, directory=tmp_path).data  # a read-only map of the .npy
    _, _, problem = memory_problem(cached, 3, 2)  # the run's view of it
    for mapped in (cached, problem.data):
        copy = pinnable(mapped)
        assert copy.flags.writeable and copy.flags.c_contiguous and not isinstance(copy, np.memmap)
        np.testing.assert_array_equal(copy, cached)
    writable = np.lib.format.open_memmap(tmp_path / "w.npy", mode="w+", dtype=np.float32, shape=(10, 2))
    assert pinnable(writable) is not writable  # a file's pages, writable or not, are not pinned
    own = blob_data(np.random.default_rng(0), n=100)
    assert pinnable(own) is own


@pytest.mark.gpu
def test_a_cached_dataset_streams(tmp_path):
    """Issue 51, item 10: `kmbench run --n 100000` read its blobs from the cache, a read-only map of
    the .npy, and the row ended as error: "cannot pin the 0.0 GiB of points in host memory for
    streaming (cudaErrorInvalidValue: invalid argument)"."""
    from kmbench.data import datasets

    datasets.blobs(100_000, 2, 5, directory=tmp_path)  # generated and written
    cached = datasets.blobs(100_000, 2, 5, directory=tmp_path)  # as the run reads it back
    assert not cached.data.flags.writeable
    _, record = gpu_cell(KmbenchGpuStream(), cached.data, 5, iterations=6)
    assert record["status"] == validate.OK, record.get("detail")


@pytest.mark.gpu
def test_host_memory_is_pinned_for_the_run_and_given_back():
    import cupy

    from impls.gpu.kmbench_gpu.stream import ChunkStream
    from kmbench.protocol.device import PinnedHost, is_pinned

    data = blob_data(np.random.default_rng(1), n=50_000, d=4, k=3)
    pinned = PinnedHost(data)
    assert is_pinned(data)
    inner = PinnedHost(data)  # already pinned: used as it is, and left pinned by its release
    inner.release()
    assert is_pinned(data)
    stream = ChunkStream(data, rows=7_000)
    with cupy.cuda.Stream(non_blocking=True):
        sums = stream.column_sums().get()
        assert stream.copy_seconds() > 0
    np.testing.assert_allclose(sums, data.sum(axis=0, dtype=np.float64), rtol=1e-12)
    pinned.release()
    assert not is_pinned(data)

    _, _, problem = memory_problem(data, 3, 2)
    impl = KmbenchGpuStream()
    impl.prepare(problem)
    assert is_pinned(problem.data)
    impl.run(problem)
    impl.release()
    assert not is_pinned(problem.data)


@pytest.mark.gpu
def test_streamed_tensor_path_on_norms_past_the_offset_packings_reach(monkeypatch):
    """The streamed path builds its tensor path on a chunk of zeros, so no chunk is checked for
    packing. Points of norm 8e18 put |x| C + H past 2^125, where hopper_pass.cu's offset M would pass
    the largest float: the pass must then leave every row to the re-check, and the run stays `ok`."""
    _small_chunks(monkeypatch, 3_001, 64)
    data = blob_data(np.random.default_rng(18), n=9_001, d=64, k=40)
    centred = data - data.mean(axis=0)
    data = (centred * (8e18 / np.linalg.norm(centred, axis=1).max())).astype(np.float32)
    _, record = gpu_cell(KmbenchGpuStream(), data, 40, iterations=4)
    assert record["status"] == validate.OK, record.get("detail")
