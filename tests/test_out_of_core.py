"""The out-of-core benchmark's sizing and table (kmbench/plans/out_of_core.py); the run itself
needs a GPU and is a benchmark (`make out-of-core`), not a test."""

from kmbench.plans import out_of_core


def test_points_take_the_share_of_gpu_memory():
    n = out_of_core.points_for(1.2, 128, 85_017_493_504)
    assert n * 128 * 4 <= 1.2 * 85_017_493_504 < (n + 1) * 128 * 4


def _record(impl, status, per=None, floor=None, detail=""):
    record = {"impl": impl, "status": status, "detail": detail, "params": {"k": 1024}, "gpu_memory_share": 1.2,
              "dataset": {"n": 1000, "d": 128}}
    if per is not None:
        record["per_iteration_s"] = per
    if floor is not None:
        record["copy_floor_s"] = floor
    return record


def test_table_sets_each_time_against_its_floor_and_shows_errors():
    table = out_of_core.markdown([_record("kmbench-gpu-stream", "ok", per=1.3, floor=1.0),
                                  _record("kmbench-gpu", "error", detail="needs 196.0 GiB")])
    stream_row, resident_row = table.strip().splitlines()[-2:]
    assert "| 1000 ms | 1300 ms | 1.30x | ok |" in stream_row
    assert "error: needs 196.0 GiB" in resident_row and "ms" not in resident_row


def test_a_mismatch_shows_no_time():
    table = out_of_core.markdown([_record("kmbench-gpu-stream", "mismatch", per=1.0, floor=1.0, detail="off")])
    assert "1.00x" not in table and "mismatch: off" in table
