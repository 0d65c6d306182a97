"""The experiments behind impls/gpu/kmbench_gpu/NOTES.md, on a GPU machine (each validates against the
oracle), run from the repository root with it on the path:

    python3 bench/kmbench_gpu_experiments.py sweep   # resident at 1e5 points, k = 5: time per
                                              # iteration against the number of blocks
    python3 bench/kmbench_gpu_experiments.py tiled   # tiled at 1M points, k = 1000: 4 or 8 points
                                              # per thread, centroid loop unrolled or not
    python3 bench/kmbench_gpu_experiments.py highd   # 300k x 408, k = 5000: FP32, TF32, torch
    python3 bench/kmbench_gpu_experiments.py prune   # tiled with and without its candidate
                                              # lists: the radial tree as generated and
                                              # shuffled, blobs at d = 4 to 32 (k = 1000)

They patch the strategies (grid size, points per thread, a copy of the sources) in this
process only; the benchmark itself is `kmbench reproduce fast-gpu`. tensor_experiments.py and
triton_experiments.py beside this file use its cell and show."""

import shutil
import sys
import tempfile
from pathlib import Path

import impls.gpu.kmbench_gpu as fast
from impls.gpu.kmbench_gpu.strategies import base, lowd
from impls.gpu.kmbench_gpu.strategies.resident import Resident
from kmbench.protocol import runner, validate
from kmbench.data.datasets import blobs, radial


def cell(impl, dataset, k, iterations, repeats=5) -> dict:
    """One validated cell, as the benchmark runs it (the oracle is computed here, uncached)."""
    settings = runner.Settings(k=k, iterations=iterations, warmup=1, repeats=repeats)
    problem = runner.make_problem(dataset, settings)
    oracle = validate.Oracle.compute(problem.data, problem.initial_centroids, iterations)
    return runner.run_cell(impl, problem, oracle, dataset, settings, "gpu")


def show(tag: str, record: dict) -> None:
    build = record.get("build", {})
    detail = record.get("detail", "")[:200] if record["status"] != "ok" else ""
    print(f"{tag:48s} {record['status']:9s} {record.get('per_iteration_s', float('nan')) * 1e6:10.1f} us "
          f"per iteration; {build.get('strategy')}, {build.get('blocks')} blocks {detail}", flush=True)
    for note in record.get("notes") or []:
        print("   ", note)


def sweep() -> None:
    data = blobs(100_000)
    for blocks in (8, 16, 32, 64, 98, 132, 264):
        Resident.grid = lambda self, n, chosen=blocks: chosen
        show(f"resident 1e5 k=5 blocks={blocks}", cell(fast.KmbenchGpu(), data, 5, 300))


def tiled() -> None:
    data = radial()
    sources = base.SOURCES
    for points, unroll in ((4, False), (4, True), (8, True), (8, False)):
        folder = Path(tempfile.mkdtemp())
        for source in sources.glob("*.cu"):
            shutil.copy(source, folder / source.name)
        if unroll:  # lowd.cu's centroid loop, unrolled by four
            loop = "      for (int t = 0; t < count; ++t) {"
            text = (folder / "lowd.cu").read_text()
            (folder / "lowd.cu").write_text(text.replace(loop, "#pragma unroll 4\n" + loop))
        base.SOURCES = folder  # read at compile time
        lowd.points_per_thread = lambda d, chosen=points: chosen
        show(f"tiled 1M k=1000 points={points} unroll={unroll}", cell(fast.KmbenchGpu(), data, 1000, 20))


def highd() -> None:
    from impls.peers.torch_lloyd import TorchLloyd

    data = blobs(300_000, d=408, centers=50)
    for impl in (fast.KmbenchGpu(), fast.KmbenchGpuTf32(), TorchLloyd()):
        show(f"300k x 408 k=5000 {impl.name}", cell(impl, data, 5000, 3, repeats=2))


def prune() -> None:
    import os

    import numpy as np

    from kmbench.data.datasets import Dataset

    tree = radial()
    shuffled = Dataset("radial-shuffled", np.asarray(tree.data)[np.random.default_rng(0).permutation(tree.n)],
                       None, {"generator": "radial, shuffled"})
    cases = [("radial 1e6 k=1000", tree, 1000, 20), ("radial 1e6 shuffled k=1000", shuffled, 1000, 20),
             ("radial 1e7 k=1000", radial(cluster_size=200_000), 1000, 10)]
    cases += [(f"blobs 1e6 d={d} k=1000", blobs(10**6, d=d, centers=1000, std=0.1), 1000, 10) for d in (4, 8, 16, 32)]
    for tag, data, k, iterations in cases:
        for pruning in ("1", "0"):
            os.environ["KMBENCH_TILED_PRUNE"] = pruning
            show(f"{tag} prune={pruning}", cell(fast.KmbenchGpu(), data, k, iterations))


if __name__ == "__main__":
    {"sweep": sweep, "tiled": tiled, "highd": highd, "prune": prune}[sys.argv[1]]()
