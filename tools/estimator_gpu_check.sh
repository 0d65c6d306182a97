#!/usr/bin/env bash
# kmbench.KMeans on a GPU (issue 63 item 3), in one call on the GPU machine: the estimator's GPU
# tests (CuPy and torch in and out, seeding, the trajectory judged, agreement with the CPU), the
# estimator's choice on a GPU machine, then bench/estimator_gpu.py's 1e7 x 128, k = 1,024 goal.
# Logs and the benchmark's JSON go to $OUT (or $1); at most 5 minutes (140 s + 160 s) on one H200, about
# 3.5 expected (the tests about 80 s, most of it compiling; the benchmark's stages saved as they end).
# scikit-learn's threads: 8 and 16 only (on the H200 machine's 16 cores the ladder from 1 chose 16, each
# count faster than the one below: /work/notes/dev4/estimator-gpu.json).
set -u
out=${OUT:-${1:?usage: tools/estimator_gpu_check.sh OUT_DIR (or set OUT)}}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Socket'
  python3 -c 'import cupy, sklearn, numpy; print("cupy", cupy.__version__, "sklearn", sklearn.__version__, "numpy", numpy.__version__)'
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
KMBENCH_REQUIRE_GPU=1 timeout 140 python3 -m pytest -q -p no:cacheprovider -rs tests/test_estimator_gpu.py \
  tests/test_estimator.py::test_gpu_backend \
  tests/test_estimator.py::test_the_default_backend_is_the_fastest_that_runs_here_in_the_datas_precision \
  2>&1 | tee "$out/test-estimator-gpu.log"
timeout 160 python3 bench/estimator_gpu.py --sklearn-threads 8,16 --out "$out/estimator-gpu.json" 2>&1 | tee "$out/estimator-gpu.log"
