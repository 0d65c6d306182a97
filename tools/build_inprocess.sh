#!/usr/bin/env bash
# Builds kmbench.KMeans's two in-process modules in place with setup.py's flags, for a checkout
# run with PYTHONPATH (no pip install): g++ directly, since an older setuptools cannot read
# pyproject.toml's license. Each module is built under a temporary name and renamed into place,
# so a process that has one loaded keeps its copy. Errors go to $OUT/build.log.
#   OUT=/tmp/x bash tools/build_inprocess.sh
set -u
OUT=${OUT:-/tmp/inproc}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
INCLUDE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
SUFFIX=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
SRC=impls/cpu/kmbench_cpu
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
build() {  # module, source, extra flags
  ${CXX:-g++} -O3 -std=c++17 -fopenmp -shared -fPIC -I"$INCLUDE" "${@:3}" "$SRC/$2" \
    -o "$SCRATCH/$1$SUFFIX" 2>>"$OUT/build.log" && mv "$SCRATCH/$1$SUFFIX" "kmbench/estimator/$1$SUFFIX"
}
build _inproc_portable inprocess.cpp && build _inproc_avx2 inprocess_avx2.cpp -mavx2 -mfma
rc=$?
echo "build rc=$rc ($(ls kmbench/estimator/_inproc_* 2>/dev/null | wc -l) modules)" | tee -a "$OUT/build.log"
exit $rc
