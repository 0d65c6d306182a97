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
INCLUDE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
SRC=impls/cpu/kmbench_cpu
# setup.py's flags; g++ directly, since an older setuptools cannot read pyproject.toml's license
build() {  # module, source, extra flags
  ${CXX:-g++} -O3 -std=c++17 -fopenmp -shared -fPIC -I"$INCLUDE" "${@:3}" "$SRC/$2" \
    -o "kmbench/estimator/$1$SUFFIX" 2>>"$OUT/build.log"
}
build _inproc_portable inprocess.cpp && build _inproc_avx2 inprocess_avx2.cpp -mavx2 -mfma
echo "build rc=$? ($(ls kmbench/estimator/_inproc_* 2>/dev/null | wc -l) modules)" | tee -a "$OUT/build.log"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
$PY -c 'from kmbench.estimator import inprocess as i; print(i.MODULE, i.MODULE.target, i.MODULE.max_threads())' \
  | tee "$OUT/module.log"
$PY -m pytest -q -p no:cacheprovider tests/test_estimator_inprocess.py tests/test_estimator_dropin.py \
  tests/test_estimator.py > "$OUT/tests.log" 2>&1; echo "tests rc=$?" | tee -a "$OUT/tests.log"
tail -n 3 "$OUT/tests.log"
timeout 600 $PY bench/inprocess_vs_program.py --threads "$(nproc)" --repeats 3 > "$OUT/vs-program.log" 2>&1
cat "$OUT/vs-program.log"
timeout 900 $PY bench/estimator_goals.py --rounds 3 > "$OUT/goals.log" 2>&1
grep -E "^[a-z]|over" "$OUT/goals.log"
