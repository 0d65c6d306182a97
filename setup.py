"""The compiled part of kmbench: kmbench-cpu's kernels in process for kmbench.KMeans
(impls/cpu/kmbench_cpu/inprocess.cpp), everything else is in pyproject.toml.

Built by `pip install -e .` (and `make venv`), not at a first fit. Optional: where no C++ compiler
or OpenMP is found the install still succeeds, and kmbench.KMeans says once, at its first fit,
that it runs kmbench-cpu as a program instead (kmbench/estimator/inprocess.py).

Two modules from one source. _inproc_portable: the compiler's default target (x86-64's SSE2),
so a virtual environment copied to another machine still runs. _inproc_avx2: -mavx2 -mfma (the
program's AVX2 kernels), loaded only where the CPU reports both (cpu_has_avx2, asked of the
portable module). No -march=native: the build machine's CPU is not the user's (bench/README.md,
"In-process extension", has what the portable and AVX2 builds cost against the program's
native one).
"""

import platform
import sys

from setuptools import Extension, setup

SOURCE = "impls/cpu/kmbench_cpu/"
HEADERS = [SOURCE + name for name in ("nearest.hpp", "lloyd.hpp", "sparse.hpp", "sorted_search.hpp", "scores64.hpp",
                                      "oracle_nearest.hpp")]
HEADERS.append("impls/cpu/cpp/harness.hpp")
OPENMP = ["-fopenmp"] if sys.platform != "darwin" else ["-Xpreprocessor", "-fopenmp"]
FLAGS = ["-O3", "-std=c++17", *OPENMP]


def extension(module: str, source: str, flags: list[str]) -> Extension:
    return Extension(f"kmbench.estimator.{module}", sources=[SOURCE + source], depends=HEADERS, language="c++",
                     extra_compile_args=[*FLAGS, *flags], extra_link_args=OPENMP, optional=True)


EXTENSIONS = [extension("_inproc_portable", "inprocess.cpp", [])]
if platform.machine().lower() in ("x86_64", "amd64"):
    EXTENSIONS.append(extension("_inproc_avx2", "inprocess_avx2.cpp", ["-mavx2", "-mfma"]))

setup(ext_modules=EXTENSIONS)
