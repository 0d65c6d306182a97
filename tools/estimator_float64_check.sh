#!/usr/bin/env bash
# Issue 63's same-start float64 and weighted goal (<= 1.0x scikit-learn's fit at 1e5 x 16 and
# 2e5 x 64, k = 100) on another machine (the GPU machine's Xeon), from a checkout run with
# PYTHONPATH: builds the extension, runs the tests that hold its labels pass and float64 loops
# (the oracle's bits; the program's bits, where the program's -march=native build has AVX-512),
# then the goals at every core and at one thread. CPU only. Logs under $OUT (default /tmp/est64).
#   bash tools/estimator_float64_check.sh     (ROUNDS=5 fresh processes each, the default)
set -u
OUT=${OUT:-/tmp/est64}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=$OUT PYTHON=$PY bash tools/build_inprocess.sh || exit 1
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
$PY -m pytest -q -p no:cacheprovider tests/test_estimator_labels.py tests/test_estimator_inprocess.py \
  > "$OUT/tests.log" 2>&1; echo "tests rc=$?" >> "$OUT/tests.log"
tail -n 3 "$OUT/tests.log"
for threads in "$(nproc)" 1; do
  for only in dense weighted; do
    timeout 600 $PY bench/estimator_goals.py --rounds "${ROUNDS:-5}" --threads "$threads" --only "$only" \
      > "$OUT/goals-$only-$threads.log" 2>&1
    grep -E "CPUs|^[a-z]|over" "$OUT/goals-$only-$threads.log"
  done
done
