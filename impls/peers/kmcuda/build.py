"""Build kmcuda (document 004's library) from its PyPI source distribution for the GPU present.

    python3 -m impls.peers.kmcuda.build [--sdist libKMCUDA-6.2.3.tar.gz] [--arch 90]

Without --sdist, `pip download --no-binary :all: libKMCUDA` fetches it (the GPU machine has
no network: carry the file there). kmcuda's CMakeLists relies on FindCUDA, which CMake 3.27
and newer remove, so we call nvcc directly with the flags its CMakeLists sets (CUDA_ARCH,
OpenMP, cuRAND), without the Python and R bindings: kmbench calls the C function
`kmeans_cuda` through ctypes. The library lands in the kmbench cache (see `library_path`).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from impls.cpu.cpp.build import cache_dir

SOURCES = ("kmcuda.cc", "kmeans.cu", "knn.cu", "transpose.cu")


def gpu_arch() -> str | None:
    """The compute capability of GPU 0 as nvcc spells it ("90"), or None without a GPU."""
    try:
        import cupy

        return str(cupy.cuda.Device(0).compute_capability)  # "90" for sm_90
    except Exception:
        return None


def library_path(arch: str | None = None) -> Path:
    override = os.environ.get("KMBENCH_KMCUDA_LIB")
    if override:
        return Path(override)
    return cache_dir() / "kmcuda" / f"sm_{arch or gpu_arch() or 'unknown'}" / "libKMCUDA.so"


def curand_include() -> list[str]:
    """Where curand_kernel.h is: the CUDA toolkit beside nvcc, or NVIDIA's pip wheels."""
    nvcc = shutil.which("nvcc")
    places = [Path(nvcc).resolve().parents[1] / "include"] if nvcc else []
    places += [Path(p) / sub for p in sys.path if p for sub in ("nvidia/cu13/include", "nvidia/curand/include")]
    for place in places:
        if (place / "curand_kernel.h").exists():
            return [f"-I{place}", f"-L{place.parent / 'lib'}", f"-L{place.parent / 'lib64'}"]
    raise SystemExit("cuRAND headers (curand_kernel.h) not found beside nvcc or in NVIDIA's pip wheels; "
                     "install the CUDA toolkit's cuRAND or `pip install nvidia-curand`.")


def fetch_sdist(folder: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                           "libKMCUDA", "-d", str(folder)], capture_output=True, text=True)
    found = glob.glob(str(folder / "libKMCUDA-*.tar.gz"))
    if done.returncode or not found:
        raise SystemExit("could not download the libKMCUDA source distribution (no network?); "
                         "pass one with --sdist.\n" + done.stderr[-2000:])
    return Path(found[0])


def build(sdist: Path | None, arch: str) -> Path:
    if shutil.which("nvcc") is None:
        raise SystemExit("nvcc is not on PATH: kmcuda needs the CUDA toolkit to build.")
    target = library_path(arch)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        sdist = sdist or fetch_sdist(scratch)
        with tarfile.open(sdist) as archive:
            archive.extractall(scratch, filter="data")
        source = next(scratch.glob("libKMCUDA-*"))
        command = ["nvcc", "-O3", "-shared", "-std=c++17", f"-arch=sm_{arch}", f"-DCUDA_ARCH={arch}",
                   "-D_MWAITXINTRIN_H_INCLUDED", "-D_FORCE_INLINES", "-Xcompiler", "-fPIC,-fopenmp",
                   *curand_include(), *[str(source / name) for name in SOURCES], "-lcurand", "-lgomp",
                   "-o", str(scratch / "libKMCUDA.so")]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit("nvcc failed to build kmcuda:\n" + done.stderr[-4000:])
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".so.partial")
        shutil.copyfile(scratch / "libKMCUDA.so", partial)
        (target.parent / "VERSION").write_text(source.name + "\n")
        os.replace(partial, target)  # atomic: a reader never sees half a library
    return target


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", type=Path, help="libKMCUDA-*.tar.gz (default: pip download it)")
    parser.add_argument("--arch", help="compute capability without the dot, e.g. 90 (default: GPU 0's)")
    args = parser.parse_args(argv)
    arch = args.arch or gpu_arch()
    if not arch:
        raise SystemExit("no GPU found to build for; pass --arch (e.g. --arch 90).")
    print(build(args.sdist, arch))


if __name__ == "__main__":
    main()
