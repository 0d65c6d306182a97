"""The experiments behind impls/gpu/kmbench_gpu/NOTES.md, on a GPU machine (each validates against the
oracle), run from the repository root with it on the path:

    python3 bench/kmbench_gpu_experiments.py sweep   # resident at 1e5 points, k = 5: time per
                                              # iteration against the number of blocks
    python3 bench/kmbench_gpu_experiments.py barriers  # grid_barriers.cu: three grid barriers
                                              # alone, microseconds each, 16 to 132 blocks
    python3 bench/kmbench_gpu_experiments.py tiled   # tiled at 1M points, k = 1000: 4 or 8 points
                                              # per thread, centroid loop unrolled or not
    python3 bench/kmbench_gpu_experiments.py highd   # 300k x 408, k = 5000: FP32, TF32, torch
    python3 bench/kmbench_gpu_experiments.py prune   # tiled with and without its candidate
                                              # lists: the radial tree as generated and
                                              # shuffled, blobs at d = 4 to 32 (k = 1000)
    python3 bench/kmbench_gpu_experiments.py prune-parts   # the tiled pass alone (CUDA events):
                                              # lists or not, sums on chip or not, no update

They patch the strategies (grid size, points per thread, a copy of the sources) in this
process only; the benchmark itself is `kmbench reproduce fast-gpu`. tensor_experiments.py (with
the tensor_*.py modules it runs) and triton_experiments.py beside this file use its cell and show."""

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


def barriers() -> None:
    import cupy
    import numpy as np

    text, launches = (Path(__file__).parent / "grid_barriers.cu").read_text(), 1000
    names = ("counter and generation", "cooperative groups grid.sync", "counter that only grows")
    for mode, name in enumerate(names):
        kernel = cupy.RawModule(code=text, options=("-std=c++17", f"-DMODE={mode}", f"-I{base.SOURCES}")
                                ).get_function("barriers")
        for grid in (16, 98, 132):
            counter = cupy.zeros(2, dtype=cupy.uint64)
            times = []
            for _ in range(6):  # the first launch compiles and warms; the median of the other five
                counter.fill(0)
                begin, end = cupy.cuda.Event(), cupy.cuda.Event()
                begin.record()
                kernel.kernel((grid, 1, 1), (128, 1, 1), (counter, np.int32(launches)), enable_cooperative_groups=True)
                end.record()
                end.synchronize()
                times.append(cupy.cuda.get_elapsed_time(begin, end) * 1e3 / launches)
            print(f"{name:30s} {grid:4d} blocks of 128: {np.median(times[1:]):.2f} us a barrier", flush=True)


def tiled() -> None:
    data = radial()
    sources = base.SOURCES
    loop = "      for (int t = 0; t < count; ++t) {"
    for points, unroll in ((4, False), (4, True), (8, True), (8, False)):
        # lowd.cu's centroid loop, unrolled by four or not; read at compile time
        base.SOURCES = _sources(edit=(lambda text: text.replace(loop, "#pragma unroll 4\n" + loop)) if unroll else None,
                                 original=sources)
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


def _sources(defines=(), edit=None, original: Path | None = None) -> Path:
    """A copy of the kernel sources (from `original`, else the current ones) with `defines` in
    front of lowd.cu and `edit` applied to its text; NO_UPDATE also skips the tiled kernel's update
    (the labels are still written)."""
    folder = Path(tempfile.mkdtemp())
    for source in [*(original or base.SOURCES).glob("*.cu"), *(original or base.SOURCES).glob("*.cuh")]:
        shutil.copy(source, folder / source.name)
    text = (folder / "lowd.cu").read_text()
    if edit is not None:
        text = edit(text)
    if "NO_UPDATE" in defines:
        text = text.replace("      // Sorted or clustered data", "#ifdef NO_UPDATE\n      continue;\n#endif\n"
                                                                  "      // Sorted or clustered data")
    (folder / "lowd.cu").write_text("".join(f"#define {define}\n" for define in defines) + text)
    return folder


def prune_parts() -> None:
    import os

    import cupy
    import numpy as np

    from impls.gpu.kmbench_gpu.strategies import make

    original = base.SOURCES

    def pass_time(data, start, pruning, defines=(), launches=30) -> float:
        os.environ["KMBENCH_TILED_PRUNE"] = pruning
        base.SOURCES = _sources(defines)
        shift = data.mean(axis=0, dtype=np.float64).astype(np.float32)
        tiled = make("tiled", data.shape[1], start.shape[0])
        tiled.compile()
        tiled.allocate(cupy.asarray(data - shift), cupy.zeros(1, dtype=cupy.uint64))
        tiled.start(start.astype(np.float64) - shift, track=False)
        tiled.assign(tiled.x, tiled.n, None, tiled.blocks)
        begin, end = cupy.cuda.Event(), cupy.cuda.Event()
        begin.record()
        for _ in range(launches):
            tiled.assign(tiled.x, tiled.n, None, tiled.blocks)
        end.record()
        end.synchronize()
        base.SOURCES = original
        return cupy.cuda.get_elapsed_time(begin, end) / launches * 1e3

    def start_of(dataset, k):
        return np.asarray(runner.make_problem(dataset, runner.Settings(k=k, iterations=1)).initial_centroids)

    tree = radial()
    data, start = np.asarray(tree.data), start_of(tree, 1000)
    shuffled = data[np.random.default_rng(0).permutation(len(data))]
    for tag, points, variants in (
            ("radial 1e6 k=1000", data, [("1", ()), ("1", ("BLOCK_SUMS 0",)), ("1", ("NO_UPDATE",)), ("0", ()),
                                         ("0", ("NO_UPDATE",))]),
            ("radial shuffled", shuffled, [("1", ()), ("0", ()), ("1", ("NO_UPDATE",)), ("0", ("NO_UPDATE",))])):
        for pruning, defines in variants:
            print(f"{tag:24s} prune={pruning} {','.join(defines):14s} {pass_time(points, start, pruning, defines):8.1f} us",
                  flush=True)
    big = radial(cluster_size=200_000)
    for pruning in ("1", "0"):
        print(f"radial 1e7 k=1000 prune={pruning} "
              f"{pass_time(np.asarray(big.data), start_of(big, 1000), pruning, launches=10):8.1f} us", flush=True)
    for d in (4, 8, 16, 32):
        blob = blobs(10**6, d=d, centers=1000, std=0.1)
        for pruning in ("1", "0"):
            print(f"blobs 1e6 d={d} k=1000 prune={pruning} "
                  f"{pass_time(np.asarray(blob.data), start_of(blob, 1000), pruning, launches=10):8.1f} us", flush=True)


if __name__ == "__main__":
    {"sweep": sweep, "barriers": barriers, "tiled": tiled, "highd": highd, "prune": prune, "prune-parts": prune_parts}[sys.argv[1]]()
