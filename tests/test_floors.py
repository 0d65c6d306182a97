"""The floors a cell's time is set against (kmbench/protocol/ceilings.py): the compute floor
of the arithmetic the row declares, at the measured rate of that unit, and the memory floor of
the bytes it declares, at the measured copy rate."""

import pytest

from impls.fast import strategies
from impls.gpu_peers import FlashKMeans, FlashKMeansHalf
from kmbench.protocol import ceilings

GPU = {"copy_bandwidth_Bps": 3.0e12, "fp32_issue_rate": 3.0e13, "tf32_flops": 4.0e14, "fp16_flops": 8.0e14}


def _record(arithmetic=None, fp32_per_distance=None, n=1_000_000, d=128, k=1024, gpu=GPU):
    return {"dataset": {"n": n, "d": d}, "params": {"k": k}, "bytes_per_iteration": n * d * 4,
            "arithmetic": arithmetic, "fp32_per_distance": fp32_per_distance, "env": {"gpu": gpu}}


def test_a_tensor_core_row_is_floored_by_its_own_unit_and_the_bytes_it_reads():
    found = ceilings.floors(_record(ceilings.declared_arithmetic(("tf32", 256))))
    assert found["compute_unit"] == "TF32 peak"
    assert found["compute_floor_s"] == pytest.approx(1e6 * 1024 * 256 / 4.0e14)
    assert found["memory_floor_s"] == pytest.approx(1e6 * 128 * 4 / 3.0e12)
    half = ceilings.floors(_record(ceilings.declared_arithmetic(("fp16", 256))))
    assert half["compute_floor_s"] == pytest.approx(found["compute_floor_s"] / 2)


def test_an_fp32_row_and_an_older_record_are_floored_by_the_fp32_issue_rate():
    declared = ceilings.floors(_record(ceilings.declared_arithmetic(("fp32", 129))))
    older = ceilings.floors(_record(fp32_per_distance=129))  # written before records declared a unit
    assert declared == older
    assert declared["compute_unit"] == "FP32 issue"
    assert declared["compute_floor_s"] == pytest.approx(1e6 * 1024 * 129 / 3.0e13)


def test_a_floor_needs_its_rate_and_its_count():
    no_tensor_rate = {key: value for key, value in GPU.items() if key != "tf32_flops"}
    found = ceilings.floors(_record(ceilings.declared_arithmetic(("tf32", 256)), gpu=no_tensor_rate))
    assert "compute_floor_s" not in found and "memory_floor_s" in found
    assert ceilings.floors(_record()) == {"memory_floor_s": pytest.approx(1e6 * 128 * 4 / 3.0e12)}
    with pytest.raises(ValueError, match="unknown arithmetic unit"):
        ceilings.declared_arithmetic(("int8", 2))


def test_rows_declare_the_arithmetic_their_distances_run_on():
    class Shape:
        n, d, k = 1000, 128, 64

    assert strategies.kind_of("tensor").arithmetic(Shape) == ("tf32", 256)
    assert strategies.kind_of("gemm").arithmetic(Shape)[0] == "fp32"
    assert strategies.kind_of("tiled").arithmetic(Shape) == ("fp32", strategies.kind_of("tiled").fp32_per_distance(Shape))
    assert FlashKMeans().arithmetic(Shape) == ("tf32", 256)
    assert FlashKMeansHalf().arithmetic(Shape) == ("fp16", 256)
