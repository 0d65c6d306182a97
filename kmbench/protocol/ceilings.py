"""The ceilings a cell is measured against, each measured once per process, and the floors
they put under its time. On the GPU present: the device-to-device copy rate (bytes read plus
written per second), the FP32 issue rate (FP32 instructions per second, counting one per thread
per instruction, a fused multiply-add as one) and the dense TF32 and fp16 tensor-core rates
(FLOP/s of cuBLAS's large square products). On the CPU (for kmbench-cpu, the one CPU row that
declares its counts): the host copy rate over every core, and BLAS SGEMM's rate in FMAs per second.

A cell's floors per iteration: the compute floor, n k distances times the cost its row declares
(Implementation.arithmetic: FP32 instructions, or tensor-core FLOPs) at the measured rate of that
unit; the memory floor, its declared bytes at the copy rate. Its place on the roofline is the
larger of floor over time.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np


# Eight independent FMA chains per thread keep every FP32 pipe busy (the FMA latency is 4
# cycles; two warps per scheduler and 8 chains cover it); the result is written so the
# compiler cannot drop the work.
_FMA_KERNEL = r"""
extern "C" __global__ void fma_chains(float* out, int rounds, float a, float b) {
  float v[8];
  for (int i = 0; i < 8; ++i) v[i] = threadIdx.x * 1e-3f + i;
  for (int r = 0; r < rounds; ++r) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = fmaf(v[i], a, b);
  }
  float s = 0.0f;
  for (int i = 0; i < 8; ++i) s += v[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
FMA_PER_ROUND = 8


def _event_seconds(cupy, work, repeats: int) -> float:
    work()  # warm-up: module load, clocks up
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(repeats):
        work()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1000.0


def copy_bandwidth(cupy, megabytes: int = 512, copies: int = 10) -> float | None:
    """Device-to-device copy rate in bytes per second, counting bytes read plus written.
    Filled with ones, not zeros (zeros can run faster than real data)."""
    try:
        source = cupy.ones(megabytes << 18, dtype=cupy.float32)
        target = cupy.empty_like(source)
        seconds = _event_seconds(cupy, lambda: cupy.copyto(target, source), copies)
        return 2 * source.nbytes * copies / seconds
    except Exception:
        return None


def fp32_issue_rate(cupy, rounds: int = 4096, launches: int = 5) -> float | None:
    """FP32 instructions per second over the whole GPU, from dependent FMA chains."""
    try:
        kernel = cupy.RawKernel(_FMA_KERNEL, "fma_chains")
        sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
        blocks, threads = sms * 8, 256
        out = cupy.empty(blocks * threads, dtype=cupy.float32)
        args = (out, cupy.int32(rounds), cupy.float32(0.999), cupy.float32(1e-3))
        seconds = _event_seconds(cupy, lambda: kernel((blocks,), (threads,), args), launches)
        return blocks * threads * rounds * FMA_PER_ROUND * launches / seconds
    except Exception:
        return None


TENSOR_SIZE = 8192  # the square product that measures a tensor-core rate (1.1e12 FLOPs)


def tensor_rates(cupy, size: int = TENSOR_SIZE, products: int = 5) -> dict:
    """Dense tensor-core rates in FLOP/s, from cuBLAS's square products: "tf32_flops" (float32
    operands, TF32 compute) and "fp16_flops" (float16 operands). The compute floors of rows
    that declare tensor-core arithmetic are taken against them; a rate that cannot be
    measured is left out."""
    rates = {}
    for name, dtype, tf32 in (("tf32_flops", cupy.float32, True), ("fp16_flops", cupy.float16, False)):
        try:
            a = cupy.ones((size, size), dtype=dtype)
            out = cupy.empty_like(a)
            with matmul_precision(tf32):
                seconds = _event_seconds(cupy, lambda: cupy.matmul(a, a, out=out), products)
            rates[name] = 2.0 * size ** 3 * products / seconds
        except Exception:
            continue
    return rates


def cpu_copy_bandwidth(megabytes: int = 128, copies: int = 4) -> float | None:
    """Host memory copy rate in bytes per second (read plus written), every core copying its
    own slice at once (NumPy releases the GIL while it copies)."""
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    try:
        cores = os.cpu_count() or 1
        source = np.ones(megabytes << 18, dtype=np.float32)
        target = np.empty_like(source)
        slices = [slice(i * source.size // cores, (i + 1) * source.size // cores) for i in range(cores)]
        with ThreadPoolExecutor(cores) as pool:
            def copy_all():
                list(pool.map(lambda part: np.copyto(target[part], source[part]), slices))

            copy_all()  # warm-up: pages touched
            start = time.perf_counter()
            for _ in range(copies):
                copy_all()
            seconds = time.perf_counter() - start
        return 2 * source.nbytes * copies / seconds
    except Exception:
        return None


def cpu_fp32_rate(size: int = 1536, repeats: int = 3) -> float | None:
    """FP32 FMAs per second over every core (kmbench-cpu declares its FMAs per distance): the
    best of a few BLAS single-precision products of size^3 FMAs each."""
    import time

    try:
        rng = np.random.default_rng(0)
        a, b = rng.random((size, size), dtype=np.float32), rng.random((size, size), dtype=np.float32)
        a @ b  # warm-up: the BLAS threads start
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
        return size ** 3 / best  # size^3 FMAs
    except Exception:
        return None


# The measured rate each declared unit of arithmetic is bound by (environment.gpu's keys).
RATE_OF_UNIT = {"fp32": "fp32_issue_rate", "tf32": "tf32_flops", "fp16": "fp16_flops"}
UNIT_NAMES = {"fp32": "FP32 issue", "tf32": "TF32 peak", "fp16": "fp16 peak"}


def declared_arithmetic(declared: tuple[str, float] | None) -> dict | None:
    """A row's declared arithmetic (Implementation.arithmetic) as the record keeps it."""
    if not declared:
        return None
    unit, per_distance = declared
    if unit not in RATE_OF_UNIT:
        raise ValueError(f"unknown arithmetic unit {unit!r}; known: {', '.join(RATE_OF_UNIT)}")
    return {"unit": unit, "per_distance": float(per_distance)}


def _arithmetic(record: dict) -> dict | None:
    """The record's declared arithmetic; records older than the field declared FP32 instructions."""
    if record.get("arithmetic"):
        return record["arithmetic"]
    per = record.get("fp32_per_distance")
    return {"unit": "fp32", "per_distance": per} if per else None


def floors(record: dict) -> dict:
    """Seconds per iteration no implementation of the record's arithmetic could beat on its
    machine: "compute_floor_s" (n k distances times the declared cost, at the measured rate of
    that unit) and "memory_floor_s" (the declared bytes at the measured copy rate), with
    "compute_unit" naming the ceiling; each only where the record has what it needs."""
    env = record.get("env") or {}
    measured = (env.get("cpu_ceilings") if record.get("roofline_on") == "cpu" else env.get("gpu")) or {}
    found = {}
    arithmetic = _arithmetic(record)
    data, k = record.get("dataset") or {}, (record.get("params") or {}).get("k")
    if arithmetic and data.get("n") and k:
        rate = measured.get(RATE_OF_UNIT.get(arithmetic["unit"], ""))
        if rate:
            found["compute_floor_s"] = data["n"] * k * arithmetic["per_distance"] / rate
            found["compute_unit"] = UNIT_NAMES[arithmetic["unit"]]
    copy, moved = measured.get("copy_bandwidth_Bps"), record.get("bytes_per_iteration")
    if copy and moved:
        found["memory_floor_s"] = moved / copy
    return found


def fractions(record: dict, floor: dict | None = None) -> dict:
    """Each floor of one record over its time per iteration, where both exist: "memory" and the
    name of its compute ceiling ("FP32 issue", "TF32 peak", "fp16 peak"). The larger is the
    limit the cell is nearer. floor: the record's floors, where the caller has them already."""
    per_iteration, found = record.get("per_iteration_s"), {}
    if not per_iteration:
        return found
    floor = floors(record) if floor is None else floor
    if "memory_floor_s" in floor:
        found["memory"] = floor["memory_floor_s"] / per_iteration
    if "compute_floor_s" in floor:
        found[floor["compute_unit"]] = floor["compute_floor_s"] / per_iteration
    return found


@contextmanager
def matmul_precision(tf32: bool):
    """CuPy's float32 matrix products in TF32 (tensor cores) or in FP32, restored after."""
    from cupy._core import _routines_linalg as linalg

    wanted = linalg.COMPUTE_TYPE_TF32 if tf32 else linalg.COMPUTE_TYPE_FP32
    previous = linalg.get_compute_type(np.dtype(np.float32))
    linalg.set_compute_type(np.dtype(np.float32), wanted)
    try:
        yield
    finally:
        linalg.set_compute_type(np.dtype(np.float32), previous)
