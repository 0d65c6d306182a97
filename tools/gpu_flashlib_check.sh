#!/usr/bin/env bash
# Issue 64 on the GPU machine, within 8 minutes: flashlib 0.4.0 and the CuTe DSL installed from the
# repository's wheel folders; the GPU tests of flashlib's rows; its rows beside ours at two
# embedding shapes; the breaking-shapes suite with kmbench-gpu and its GPU tests. Logs, record
# stores and reports go under $OUT (default: ./gpu-flashlib-out); steps.log says what each step did.
#
#   bash tools/gpu_flashlib_check.sh
#
# Wheels: flashlib, tqdm, nvidia-cutlass-dsl 4.6.3 and its small parts in .whl/, the 88 MB
# nvidia_cutlass_dsl_libs_cu13 in .whl-big/ (WHEELS="dir ..." names others). They go to their own
# target, /tmp/site-flashlib, in one pip call: pip --target skips (or with --upgrade replaces) a
# top-level folder that already exists there, and cuda-bindings' `cuda/` is also cuda-core's in
# /tmp/site. A dependency the machine already has is left out. Installed so, the CuTe DSL's .pth
# file is not read: its dsl_packages folder goes on PYTHONPATH by hand, or flashlib falls back
# to Triton without a word (the records' build.cutedsl says which happened).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-flashlib-out}
mkdir -p "$OUT"
SITE=/tmp/site-flashlib
DATA=/tmp/kmbench-data  # generated datasets stay on the machine, not in $OUT
WHEELS=${WHEELS:-".whl .whl-big"}
started=$(date +%s)
say() { echo "[$(( $(date +%s) - started )) s] $*" | tee -a "$OUT/steps.log"; }

# 1. The wheels this check needs, leaving out a dependency the machine's Python already has.
needed=()
for folder in $WHEELS; do
  for wheel in "$folder"/*.whl; do
    [ -e "$wheel" ] || continue
    base=$(basename "$wheel")
    dist=${base%%-*}
    case "$dist" in
      flashlib|nvidia_cutlass_dsl*) ;;  # always ours, at the versions downloaded
      tqdm|cuda_bindings|cuda_pathfinder|cuda_python|protobuf|typing_extensions|nvidia_cuda_nvdisasm)
        if python3 -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" "$dist" 2>/dev/null; then
          say "already installed, left out: $base"; continue
        fi ;;
      *) continue ;;  # the lead's other wheels are not this check's
    esac
    case " ${needed[*]-} " in *"/$base "*) continue ;; esac  # one copy of a wheel in both folders
    needed+=("$wheel")
  done
done
say "installing ${#needed[@]} wheels into $SITE"
rm -rf "$SITE"
timeout -k 5 90 python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "${needed[@]}" \
  >"$OUT/install.log" 2>&1 || say "pip install failed (rc $?): see install.log"
export PYTHONPATH="$PWD:/tmp/site:$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages"
python3 - >"$OUT/flashlib-env.log" 2>&1 <<'EOF'
import flashlib, torch
from flashlib._optional import _cutedsl_problem
from flashlib.primitives.kmeans.cutedsl import cutedsl_info
print("flashlib", flashlib.__version__, "torch", torch.__version__, "GPU", torch.cuda.get_device_name())
print("CuTe DSL problem:", _cutedsl_problem())
print(cutedsl_info())
EOF
say "flashlib: $(tr '\n' ' ' <"$OUT/flashlib-env.log" | cut -c1-300)"

# Every step runs under what is left of BUDGET seconds (470: the 8 minutes less the summary), in
# the order below, most wanted first; one that finds no time left says so and is skipped. STEPS
# names some of them for a second call (say STEPS="breaking-tests embeddings-128").
BUDGET=${BUDGET:-470}
STEPS=${STEPS:-"flashlib-tests embeddings-256 breaking-suite breaking-tests embeddings-128"}
step() {  # step NAME CAP LOG command...: the command under min(CAP, time left), its rc logged
  local name=$1 cap=$2 log=$3; shift 3
  case " $STEPS " in *" $name "*) ;; *) return ;; esac
  local left=$(( BUDGET - ($(date +%s) - started) ))
  if [ "$left" -lt 20 ]; then say "$name: skipped, out of time (run it again with STEPS=$name)"; return; fi
  local limit=$(( cap < left ? cap : left ))
  timeout -k 5 "$limit" bash -c '"$@"' "$name" "$@" >"$OUT/$log" 2>&1  # bash: the command may be a function
  local rc=$?
  say "$name: rc $rc$([ $rc -eq 124 ] && echo " (stopped at $limit s)") ($(tail -n 1 "$OUT/$log" | cut -c1-200))"
}
gpu_tests() { KMBENCH_REQUIRE_GPU=1 python3 -m pytest -q -p no:cacheprovider -m gpu "$@"; }
# flashlib's rows beside ours and flash-kmeans fp16 on 1e6 points (3 iterations, as the suite's large shapes).
embeddings() {
  python3 -m kmbench run --n 1000000 --d "$1" --centers "$2" --k "$2" --iters 3 --repeats 2 --warmup 1 \
    --impl kmbench-gpu,flash-kmeans-fp16,flashlib,flashlib-fp16 --data-dir "$DATA" \
    --store "$OUT/embeddings-flashlib.jsonl"
}
export -f gpu_tests embeddings
export OUT DATA

# 2. The GPU tests of the flashlib rows: the Triton route, and the CuTe DSL route at d = 256, k = 4,096.
step flashlib-tests 120 pytest-flashlib.log gpu_tests tests/test_flashlib_peer.py
# 3. The suite's eighth shape, 1e6 x 256, k = 4,096: flashlib's CuTe DSL route (fp16), ours beside it.
step embeddings-256 110 embeddings-d256-k4096.log embeddings 256 4096
# 4. The breaking-shapes suite with kmbench-gpu: its records, a time per iteration at each shape.
step breaking-suite 200 breaking-shapes.log python3 -m kmbench reproduce breaking-shapes --impl kmbench-gpu \
  --data-dir "$DATA" --store "$OUT/breaking-shapes.jsonl" --out "$OUT/breaking-shapes.md"
# 5. kmbench-gpu at each breaking shape, two iterations, as tests (what the suite's cells also show).
step breaking-tests 200 pytest-breaking.log gpu_tests tests/test_breaking_shapes.py
# 6. 1e6 x 128, k = 1,024: flashlib's Triton route at the suite's first shape.
step embeddings-128 90 embeddings-d128-k1024.log embeddings 128 1024

# Which path flashlib's rows took and each cell's verdict, in one place.
python3 - "$OUT"/embeddings-flashlib.jsonl "$OUT"/breaking-shapes.jsonl >"$OUT/summary.log" 2>&1 <<'EOF'
import json, sys
for store in sys.argv[1:]:
    try:
        lines = open(store).read().splitlines()
    except OSError as exc:
        print(store, "missing:", exc)
        continue
    for line in lines:
        r = json.loads(line)
        if "impl" not in r:
            continue
        build = r.get("build") or {}
        ds = r.get("dataset") or {}
        print(r["impl"], ds.get("n"), ds.get("d"), (r.get("params") or {}).get("k"), r.get("status"),
              f"{(r.get('per_iteration_s') or 0) * 1e3:.3f} ms/iter", build.get("path", ""), build.get("cutedsl", ""),
              (r.get("detail") or "")[:160])
EOF
cat "$OUT/summary.log" | tee -a "$OUT/steps.log"
say "done"
