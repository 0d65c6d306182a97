#!/usr/bin/env bash
# kmbench.KMeans's in-process extension on another machine (the GPU machine's Xeon: AVX-512, 16
# cores), from a checkout run with PYTHONPATH (no pip install): builds the two modules in place
# with setup.py's flags, then its tests (the bit-for-bit one is the point on AVX-512, where the
# program's -march=native build takes its 512-bit low-d loop), the builds against the program,
# and issue 63's CPU goals. CPU only: it uses no GPU time. Logs under $OUT (default /tmp/inproc).
#   bash tools/inprocess_check.sh
set -u
OUT=${OUT:-/tmp/inproc}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=$OUT PYTHON=$PY bash tools/build_inprocess.sh
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
$PY -c 'from kmbench.estimator import inprocess as i; print(i.MODULE, i.MODULE.target, i.MODULE.max_threads())' \
  | tee "$OUT/module.log"
$PY -m pytest -q -p no:cacheprovider tests/test_estimator_inprocess.py tests/test_estimator_dropin.py \
  tests/test_estimator.py tests/test_estimator_labels.py > "$OUT/tests.log" 2>&1; echo "tests rc=$?" | tee -a "$OUT/tests.log"
tail -n 3 "$OUT/tests.log"
timeout 600 $PY bench/inprocess_vs_program.py --threads "$(nproc)" --repeats 3 > "$OUT/vs-program.log" 2>&1
cat "$OUT/vs-program.log"
timeout 900 $PY bench/estimator_goals.py --rounds 3 > "$OUT/goals.log" 2>&1
grep -E "^[a-z]|over" "$OUT/goals.log"
