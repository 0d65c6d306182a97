"""Which loops of kmbench_cpu.cpp are fastest on this CPU: builds of the same source with other
flags, timed on the binary itself (no oracle, no harness; the centroid checksum shows that the
builds agree). Results on the GPU machine's Xeon: results/nvidia-h100/cpu-16core/variants.log.

    python3 bench/kmbench_cpu_variants.py [--passes 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).resolve().parents[1] / "impls" / "cpu" / "kmbench_cpu" / "kmbench_cpu.cpp"  # what kmbench-cpu builds
BASE = ["-O3", "-std=c++17", "-fopenmp", "-march=native"]
VARIANTS = {"avx2": [], "simd256": ["-DKMBENCH_CPU_PORTABLE"],
            "simd512": ["-DKMBENCH_CPU_PORTABLE", "-mprefer-vector-width=512"],
            "brute-force": ["-mprefer-vector-width=512", "-DKMBENCH_NO_SORTED"],  # every centroid scored
            "default": ["-mprefer-vector-width=512"]}  # what kmbench builds
SHAPES = [(1_000_000, 2, 5, 10), (1_000_000, 2, 1000, 3), (200_000, 64, 100, 10)]  # n, d, k (= blobs), iterations


def _inputs(folder: Path, n: int, d: int, k: int) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    centres = rng.uniform(-10, 10, (k, d))
    data = (centres[rng.integers(0, k, n)] + rng.standard_normal((n, d))).astype(np.float32)
    start = data[np.random.default_rng(1).choice(n, k, replace=False)].astype(np.float64)
    paths = folder / f"x-{n}-{d}-{k}.npy", folder / f"init-{n}-{d}-{k}.npy"
    np.save(paths[0], data)
    np.save(paths[1], start)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        binaries = {}
        for name, flags in VARIANTS.items():
            binaries[name] = folder / name
            subprocess.run(["g++", *BASE, *flags, "-o", str(binaries[name]), str(SOURCE)], check=True)
        inputs = {shape: _inputs(folder, *shape[:3]) for shape in SHAPES}
        for _ in range(args.passes):
            for name, binary in binaries.items():
                print(f"== {name}", flush=True)
                for (n, d, k, iterations), (data, start) in inputs.items():
                    out = subprocess.run([str(binary), "--data", str(data), "--init", str(start), "--iters",
                                          str(iterations), "--repeats", "8", "--warmup", "1"],
                                         capture_output=True, text=True, check=True).stdout
                    record = json.loads(out)
                    times = np.asarray(record["times"]) / iterations * 1e3
                    print(f"{n}x{d} k={k}: per iter {times.min():.2f} ms (min of {times.size}), mean "
                          f"{times.mean():.2f} ms; centroid checksum {np.asarray(record['centroids']).sum():.6f}",
                          flush=True)


if __name__ == "__main__":
    main()
