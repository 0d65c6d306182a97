#!/usr/bin/env bash
# The judge on a GPU machine (the judge-cost issue): its GPU tests, the goal cells of
# bench/validation_time.py, then `kmbench run --n 100000` (every row). Logs and records go to $1.
set -u
out=${1:?usage: bench/gpu_judge_check.sh OUT_DIR}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/machine.txt"
python3 -c 'import cupy; print("cupy", cupy.__version__)' >> "$out/machine.txt"
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_judge_gpu.py tests/test_judge_kernel.py \
  2>&1 | tee "$out/test-gpu-judge.log"
timeout 260 python3 bench/validation_time.py --cell blobs-1e7x128-k4096 --cell radial-1e8x2-k3 \
  --cell radial-1e9x2-k1000 --store "$out/records-cost.jsonl" --out "$out/cost.md" 2>&1 | tee "$out/cost.log"
( time KMBENCH_DATA=/tmp/kmdata timeout 200 python3 -m kmbench run --n 100000 --store "$out/records-run.jsonl" ) \
  2>&1 | tee "$out/run.log"
