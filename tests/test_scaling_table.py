"""The scaling table (kmbench/report/scaling.py): a run taken over sessions mixes cells measured
with different code, and the table must say so rather than divide one version's time by
another's."""

from kmbench.data import records
from kmbench.report import scaling


def _cell(impl, gpus, seconds, code, day="2026-11-27"):
    return records.parse({
        "schema": 1, "impl": impl, "status": "ok", "timestamp": f"{day}T01:00:00+00:00",
        "dataset": {"name": "radial", "n": 10, "d": 2},
        "params": {"k": 3, "iterations": 3, "init": "random", "seed": 0},
        "per_iteration_s": seconds, "build": {"workers": gpus} if impl != "kmbench-gpu" else {},
        "env": {"code_hash": code * 16}})


def _row(table, impl, gpus):
    return next(line for line in table.splitlines() if line.startswith(f"| {impl} | radial | 10 | 3 | {gpus} |"))


def test_ratios_are_taken_within_one_version_of_the_code_and_each_cell_says_which():
    table = scaling.markdown([_cell("kmbench-gpu", 1, 2e-3, "a", "2026-11-26"), _cell("kmbench-gpu-dask", 1, 4e-3, "a"),
                              _cell("kmbench-gpu-dask", 2, 1e-3, "b")])
    one, two = _row(table, "kmbench-gpu-dask", 1), _row(table, "kmbench-gpu-dask", 2)
    assert "| 2.00x |" in one and one.endswith("| ok | 2026-11-27, code aaaaaaaa |")
    # Its one-GPU cell and kmbench-gpu alone are another version's: no speedup, no ratio.
    assert two.split(" | ")[6:9] == ["-", "-", "-"] and two.endswith("code bbbbbbbb |")
    assert _row(table, "kmbench-gpu", 1).endswith("| 2026-11-26, code aaaaaaaa |")
    assert "measured with 2 versions of the code (aaaaaaaa, bbbbbbbb)" in table


def test_one_version_gives_every_ratio_and_no_note():
    table = scaling.markdown([_cell("kmbench-gpu", 1, 2e-3, "a"), _cell("kmbench-gpu-dask", 1, 2e-3, "a"),
                              _cell("kmbench-gpu-dask", 2, 1e-3, "a")])
    assert _row(table, "kmbench-gpu-dask", 2).split(" | ")[6:9] == ["2.00x", "100%", "0.50x"]
    assert "versions of the code" not in table
