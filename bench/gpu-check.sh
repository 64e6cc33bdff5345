#!/usr/bin/env bash
# The GPU check: one command on a machine with an NVIDIA H200 (sm_90) that builds cgr, runs
# it, times it, tests it and sanitises it inside 9 minutes, says clearly what broke, and leaves
# its figures in $OUT (default build/gpu-check) even when a later stage fails.
#
#   bench/gpu-check.sh deps        here (no GPU): copy the header-only dependencies the GPU
#                                  machine lacks (fmt, doctest, nlohmann, CLI11) to build/gpu-deps,
#                                  and the main job's trained digits model (train_digits.py, which
#                                  needs Debian's torch and sklearn, absent there) to
#                                  build/gpu-deps/digits
#   bench/gpu-check.sh             on the GPU machine, with build/gpu-deps carried along (the
#                                  device tool: command "bash bench/gpu-check.sh", carry
#                                  ["build/gpu-deps"], timeout_s 600; results under $OUT)
#   bench/gpu-check.sh --only tests,sanitizer
#                                  the same, with only the listed stages after the build (smoke,
#                                  timings, tests, sanitizer, torch): a rerun after a fix
#   bench/gpu-check.sh --pack      (with either) $OUT ends holding summary.txt and gpu-check.tgz
#                                  (everything else): what the device tool can bring back
#   bench/gpu-check.sh --dry-run [--build-dir DIR]
#                                  anywhere, no device: checks the script and the tools, prints
#                                  the stages with their time budgets; with DIR (a CUDA build),
#                                  checks that the test groups cover every GPU test suite
#
# Stages, in order, each under a watchdog (its budget plus what earlier stages left, never
# eating into the budgets of the stages after it):
#   preflight  toolkit version, driver, cuDNN, cuBLAS, CUPTI, fmt and the other headers:
#              fails at once naming the missing piece
#   build      CMake + ninja, Release, sm_90 (the ONNX importer off: no protobuf there)
#   smoke      one inference per built-in model per mode; the main job (resnet18_exits
#              --heldout, the trained digits model) when build/gpu-deps/digits was carried
#   timings    cgr-bench --mode all per model and exit policy, each JSON written to
#              $OUT/timings as it finishes; CUPTI timelines of one inference
#   tests      the GPU test suites, each in its own process (a sticky CUDA error in one must
#              not hide the others)
#   sanitizer  compute-sanitizer memcheck and initcheck on resnet18-exits early at 64x64;
#              racecheck and synccheck restricted to cgr's own kernels
#   torch      bench/torch_gpu_peer.py: the same networks and weights in PyTorch (eager,
#              torch.cuda.graph, torch.compile reduce-overhead; fp32 and TF32), as ratios to
#              cgr's modes of this run
#   summary    $OUT/summary.txt: one line per stage and per check (written as it goes)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
deps=$root/build/gpu-deps
readonly TOTAL_S=540  # 9 minutes, the build included

# name:budget_s:what
readonly STAGES=(
  "preflight:10:toolkit, driver, cuDNN, cuBLAS, CUPTI and header checks"
  "build:170:CMake + ninja, Release, sm_90, 16 cores"
  "smoke:40:one inference per built-in model per mode; the main job on the digits model"
  "timings:70:cgr-bench --mode all per model and exit policy; CUPTI timelines"
  "tests:150:GPU test suites, one process each"
  "sanitizer:55:compute-sanitizer memcheck, initcheck, racecheck, synccheck"
  "torch:40:PyTorch peer on the same GPU, ratios to cgr"
  "summary:5:summary.txt"
)
# GPU test suites (doctest TEST_SUITE in tests/cuda) and their budgets: the tests stage.
readonly TEST_GROUPS=("kernels:20" "layers:25" "executor:30" "observed:25" "models:40" "timeline:10")
readonly MODELS=(two-branch inception resnet18 googlenet resnet18-exits)

field() { echo "$1" | cut -d: -f"$2"; }

budget_sum() {  # of the stages from index $1 on
  local sum=0 i
  for ((i = $1; i < ${#STAGES[@]}; i++)); do sum=$((sum + $(field "${STAGES[$i]}" 2))); done
  echo "$sum"
}

print_plan() {
  local i group_sum=0 g
  echo "gpu-check stages (total budget ${TOTAL_S} s; a stage may also use what earlier ones left):"
  for ((i = 0; i < ${#STAGES[@]}; i++)); do
    printf "  %d. %-10s %4s s  %s\n" $((i + 1)) "$(field "${STAGES[$i]}" 1)" \
      "$(field "${STAGES[$i]}" 2)" "$(field "${STAGES[$i]}" 3)"
  done
  printf "     test groups:"
  for g in "${TEST_GROUPS[@]}"; do
    printf " %s %ss" "$(field "$g" 1)" "$(field "$g" 2)"
    group_sum=$((group_sum + $(field "$g" 2)))
  done
  echo
  echo "  sum of budgets: $(budget_sum 0) s of ${TOTAL_S} s; test groups: ${group_sum} s of the tests stage's $(field "${STAGES[4]}" 2) s"
}

# ---------------------------------------------------------------------------------- deps
if [[ "${1:-}" == "deps" ]]; then
  rm -rf "$deps" && mkdir -p "$deps/include"
  for d in fmt doctest nlohmann CLI; do
    if [[ ! -d /usr/include/$d ]]; then
      echo "gpu-check deps: /usr/include/$d missing (scripts/install-deps.sh installs it)" >&2
      exit 1
    fi
    cp -r "/usr/include/$d" "$deps/include/"
  done
  trainer=$root/samples/resnet18_exits/train_digits.py
  if /usr/bin/python3 "$trainer" --cache "$root/build/digits"; then
    cp -r "$(/usr/bin/python3 "$trainer" --cache "$root/build/digits" --where)" "$deps/digits"
  else
    echo "gpu-check deps: the digits model could not be trained here; the GPU run skips the main job" >&2
  fi
  echo "header-only dependencies (and the digits model) copied to $deps ($(du -sh "$deps" | cut -f1))"
  exit 0
fi

dry_run=0
only=""  # --only: the optional stages to run, ",a,b,"; empty: all
pack=0   # --pack: $OUT left holding summary.txt and gpu-check.tgz only
dry_build_dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --pack) pack=1 ;;
    --only)
      [[ $# -ge 2 ]] || { echo "gpu-check: --only needs a list of stages" >&2; exit 2; }
      only=",$2,"
      for wanted_stage in ${2//,/ }; do
        case "$wanted_stage" in
          smoke | timings | tests | sanitizer | torch) ;;
          *) echo "gpu-check: --only: unknown stage '$wanted_stage' (smoke, timings, tests, sanitizer, torch)" >&2; exit 2 ;;
        esac
      done
      shift
      ;;
    --build-dir)
      [[ $# -ge 2 ]] || { echo "gpu-check: --build-dir needs a folder" >&2; exit 2; }
      dry_build_dir=$2
      shift
      ;;
    -h | --help) sed -n '2,36p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# ---------------------------------------------------------------------------------- preflight
problems=()
need() { problems+=("$1"); }

# The first existing file among the glob patterns (quoted by the caller), or failure.
first_match() {
  local pattern file
  for pattern in "$@"; do
    for file in $pattern; do
      [[ -e "$file" ]] && { echo "$file"; return 0; }
    done
  done
  return 1
}

find_nvcc() {
  command -v nvcc 2>/dev/null || { [[ -x /usr/local/cuda/bin/nvcc ]] && echo /usr/local/cuda/bin/nvcc; }
}

# The toolkit, cuDNN, cuBLAS, CUPTI and the header-only dependencies; sets cuda_root,
# cudnn_root, cupti_hint and the problems found.
check_toolchain() {
  nvcc=$(find_nvcc || true)
  if [[ -z "$nvcc" ]]; then
    need "CUDA toolkit: no nvcc on PATH or in /usr/local/cuda/bin"
    return
  fi
  cuda_root=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
  local version major minor
  version=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
  major=${version%%.*} minor=${version#*.}
  if [[ -z "$version" ]]; then
    need "CUDA toolkit: cannot read the version of $nvcc"
  elif ((major < 12 || (major == 12 && minor < 4))); then
    need "CUDA toolkit: $version at $cuda_root; cgr needs 12.4 or newer (conditional IF nodes, cudaGraphAddNode with edge data)"
  fi
  toolkit_version=$version
  # cuDNN 9: next to the toolkit, under CUDNN_ROOT, in /usr, or the nvidia-cudnn wheel.
  local candidates=("${CUDNN_ROOT:-}" "$cuda_root" /usr /usr/local)
  local wheel
  wheel=$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])' 2>/dev/null || true)
  [[ -n "$wheel" ]] && candidates+=("$wheel")
  cudnn_root=""
  local c header
  for c in "${candidates[@]}"; do
    [[ -n "$c" ]] || continue
    header=$(first_match "$c/include/cudnn_version.h" "$c/include/*/cudnn_version.h" || true)
    if [[ -n "$header" ]] && first_match "$c/lib*/libcudnn.so*" "$c/lib/*/libcudnn.so*" >/dev/null; then
      cudnn_root=$c
      cudnn_major=$(sed -n 's/^#define CUDNN_MAJOR \([0-9]*\).*/\1/p' "$header")
      break
    fi
  done
  if [[ -z "$cudnn_root" ]]; then
    need "cuDNN 9: no cudnn_version.h with libcudnn.so* under ${candidates[*]} (set CUDNN_ROOT)"
  elif [[ "${cudnn_major:-0}" != 9 ]]; then
    need "cuDNN 9: found cuDNN ${cudnn_major:-?} at $cudnn_root"
  fi
  first_match "$cuda_root/lib*/libcublas.so*" "$cuda_root/targets/*/lib/libcublas.so*" >/dev/null ||
    need "cuBLAS: no libcublas.so* in the toolkit at $cuda_root"
  # CUPTI (the observing tests and --timeline): in the toolkit, extras/CUPTI, or the wheel.
  cupti_hint=""
  if ! first_match "$cuda_root/lib*/libcupti.so*" "$cuda_root/extras/CUPTI/lib*/libcupti.so*" \
      "$cuda_root/targets/*/lib/libcupti.so*" >/dev/null; then
    wheel=$(python3 -c 'import nvidia.cuda_cupti as m; print(m.__path__[0])' 2>/dev/null || true)
    if [[ -n "$wheel" ]] && first_match "$wheel/lib/libcupti.so*" >/dev/null; then
      cupti_hint=$wheel
    else
      need "CUPTI: no libcupti.so* in $cuda_root (lib, extras/CUPTI) or the nvidia-cuda-cupti wheel"
    fi
  fi
  # Header-only dependencies: Debian's, or the ones `gpu-check.sh deps` copied.
  local h
  for h in fmt/format.h doctest/doctest.h nlohmann/json.hpp CLI/CLI.hpp; do
    [[ -f /usr/include/$h || -f $deps/include/$h ]] ||
      need "headers: $h is neither in /usr/include nor in $deps/include (run 'bench/gpu-check.sh deps' where Debian's packages are, and carry build/gpu-deps)"
  done
  command -v cmake >/dev/null || need "cmake: not on PATH"
  if command -v cmake >/dev/null; then
    local cv
    cv=$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
    if [[ -n "$cv" ]] && (( ${cv%%.*} < 3 || (${cv%%.*} == 3 && ${cv#*.} < 25) )); then
      need "cmake: $cv, cgr needs 3.25 or newer"
    fi
  fi
  command -v ninja >/dev/null || need "ninja: not on PATH"
}

if ((dry_run)); then
  status=0
  bash -n "$0" || { echo "gpu-check: the script does not parse" >&2; exit 1; }
  total=$(budget_sum 0)
  print_plan
  if ((total > TOTAL_S)); then
    echo "gpu-check: the stage budgets add up to ${total} s, more than ${TOTAL_S} s" >&2
    status=1
  fi
  group_sum=0
  for g in "${TEST_GROUPS[@]}"; do group_sum=$((group_sum + $(field "$g" 2))); done
  if ((group_sum > $(field "${STAGES[4]}" 2))); then
    echo "gpu-check: the test groups need ${group_sum} s, more than the tests stage's budget" >&2
    status=1
  fi
  check_toolchain
  echo "toolchain here: nvcc ${toolkit_version:-none}${cuda_root:+ at $cuda_root}, cuDNN ${cudnn_major:-none}${cudnn_root:+ at $cudnn_root}"
  for p in "${problems[@]}"; do echo "  would stop the GPU run: $p"; done
  command -v compute-sanitizer >/dev/null || [[ -x ${cuda_root:-/nonexistent}/bin/compute-sanitizer ]] ||
    echo "  note: no compute-sanitizer here (the GPU machine's image has one)"
  python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$root/bench/torch_gpu_peer.py" ||
    { echo "gpu-check: bench/torch_gpu_peer.py does not compile" >&2; status=1; }
  if [[ -n "$dry_build_dir" ]]; then
    gpu_tests=$dry_build_dir/tests/cgr_gpu_tests
    if [[ ! -x "$gpu_tests" ]]; then
      echo "gpu-check: $gpu_tests not found (a CUDA build of the tests)" >&2
      exit 1
    fi
    # Every GPU test suite is run by a group, and every group names a suite.
    suites=$("$gpu_tests" --list-test-suites --no-skip 2>/dev/null | sed -n '/^====/,/^====/p' | grep -v '^====' | sort)
    groups=$(for g in "${TEST_GROUPS[@]}"; do field "$g" 1; done | sort)
    if [[ "$suites" != "$groups" ]]; then
      echo "gpu-check: the GPU test suites ($(echo $suites)) are not the test groups ($(echo $groups))" >&2
      status=1
    else
      echo "test groups cover every GPU test suite: $(echo $suites)"
    fi
    cases=$("$gpu_tests" --list-test-cases --no-skip 2>/dev/null | grep -c -v '^\(====\|\[doctest\]\|GPU test cases skipped\)')
    echo "GPU test cases: $cases"
  fi
  ((status == 0)) && echo "gpu-check --dry-run: ok"
  exit $status
fi

# ---------------------------------------------------------------------------------- the run
out=${OUT:-$root/build/gpu-check}
mkdir -p "$out" "$out/logs"
# --pack: on any exit, everything but summary.txt goes into one archive (the device tool brings
# back at most 8 files from $OUT; the logs and timings are dozens).
pack_results() {
  local archive
  archive=$(mktemp "${TMPDIR:-/tmp}/gpu-check.XXXXXX.tgz") || return
  if tar czf "$archive" -C "$out" --exclude=./summary.txt . 2>/dev/null; then
    find "$out" -mindepth 1 -maxdepth 1 ! -name summary.txt -exec rm -rf {} +
    chmod 644 "$archive"
    mv "$archive" "$out/gpu-check.tgz"
  else
    rm -f "$archive"
  fi
}
((pack)) && trap pack_results EXIT
summary=$out/summary.txt
: >"$summary"
start=$SECONDS
deadline=$((start + TOTAL_S))
stage_index=0
failed_stages=()
skipped_stages=()
note() { echo "$*" | tee -a "$summary"; }

# Seconds the current stage may run: until the deadline, less the budgets of later stages.
stage_limit() {
  local left=$((deadline - SECONDS - $(budget_sum $((stage_index + 1)))))
  ((left < 5)) && left=5
  echo "$left"
}
begin_stage() {
  stage_name=$1
  stage_start=$SECONDS
  local i
  for ((i = 0; i < ${#STAGES[@]}; i++)); do
    [[ "$(field "${STAGES[$i]}" 1)" == "$stage_name" ]] && stage_index=$i
  done
  note "== $stage_name (budget $(field "${STAGES[$stage_index]}" 2) s, may run $(stage_limit) s) at $((SECONDS - start)) s"
}
# Whether the stage just begun runs; a stage --only leaves out is reported skipped. Its body
# follows unindented between "if stage_wanted; then" and "fi" (it holds here-documents).
stage_wanted() {
  [[ -z "$only" || "$only" == *",$stage_name,"* ]] && return 0
  end_stage "skipped: not in --only"
  return 1
}
end_stage() {  # status: ok..., skipped... or anything else (a failure)
  note "-- $stage_name: $1 in $((SECONDS - stage_start)) s"
  case "$1" in
    ok*) ;;
    skipped*) skipped_stages+=("$stage_name") ;;
    *) failed_stages+=("$stage_name") ;;
  esac
}
# Runs a command under the watchdog with its log in $out/logs/NAME.log; prints its exit.
run_watched() {  # seconds name command...
  local seconds=$1 name=$2
  shift 2
  timeout --kill-after=5 "$seconds" "$@" >"$out/logs/$name.log" 2>&1
  local rc=$?
  ((rc == 124 || rc == 137)) && echo "  $name: STOPPED by the watchdog after $seconds s" >>"$summary"
  return $rc
}

begin_stage preflight
check_toolchain
(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true) | tee -a "$summary"
# GPU_CHECK_REHEARSAL=1: walk every stage on a machine without a GPU (each device command then
# fails quickly), to test the script itself.
if [[ "${GPU_CHECK_REHEARSAL:-0}" != 1 ]]; then
  nvidia-smi >/dev/null 2>&1 || need "driver: nvidia-smi fails: no GPU visible to this machine"
fi
note "nvcc ${toolkit_version:-?} at ${cuda_root:-?}; cuDNN ${cudnn_major:-?} at ${cudnn_root:-?}${cupti_hint:+; CUPTI from $cupti_hint}"
if ((${#problems[@]} > 0)); then
  for p in "${problems[@]}"; do note "MISSING: $p"; done
  end_stage "FAILED (${#problems[@]} missing)"
  note "== gpu-check stopped: fix the missing pieces above"
  exit 1
fi
end_stage ok

begin_stage build
build=$root/build/gpu
cmake_args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDNN_ROOT="$cudnn_root" -DCGR_ENABLE_ONNX=OFF)
[[ -d "$deps/include" ]] && cmake_args+=(-DCGR_DEPS_DIR="$deps")
if [[ -n "$cupti_hint" ]]; then
  cmake_args+=(-DCUDA_cupti_LIBRARY="$(first_match "$cupti_hint/lib/libcupti.so*")"
    "-DCMAKE_CXX_FLAGS=-isystem $cupti_hint/include")
fi
targets=(cgr_gpu_tests cgr-bench resnet18_exits)
limit=$(stage_limit)
if run_watched "$limit" build bash -c "cmake $(printf '%q ' "${cmake_args[@]}") && cmake --build $(printf '%q' "$build") --target ${targets[*]} -j ${BUILD_JOBS:-16}"; then
  end_stage ok
else
  note "BUILD FAILED; the end of logs/build.log:"
  tail -n 30 "$out/logs/build.log" | tee -a "$summary"
  end_stage FAILED
  exit 1
fi
grep -E "^-- cgr:" "$out/logs/build.log" | tee -a "$summary"
bench=$build/bench/cgr-bench
gpu_tests=$build/tests/cgr_gpu_tests
ldd "$gpu_tests" | grep -E "cudart|cudnn|cublas|cupti" | sed 's/^/  /' | tee -a "$summary"
# The device as cgr sees it (cgr::cuda_unavailable_reason): unusable means nothing below can run.
unusable=$("$gpu_tests" --list-test-suites 2>&1 | sed -n 's/^GPU test cases skipped: //p')
if [[ -n "$unusable" ]]; then
  note "DEVICE UNUSABLE for cgr: $unusable"
  if [[ "${GPU_CHECK_REHEARSAL:-0}" != 1 ]]; then
    note "== gpu-check stopped after the build: the driver or the device is not usable"
    exit 1
  fi
fi

begin_stage smoke
if stage_wanted; then
smoke_failed=0
for m in "${MODELS[@]}"; do
  extra=()
  [[ $m == resnet18-exits ]] && extra=(--exits early --threshold 0.5)
  if run_watched "$(stage_limit)" "smoke-$m" "$bench" --model "$m" --device cuda --mode all --iterations 1 \
      --warmup-ms 0 "${extra[@]}"; then
    note "  $m: ok ($(grep -cE '^  (dag|stream-graph|eager) ' "$out/logs/smoke-$m.log") mode lines)"
  else
    note "  $m: FAILED (exit $?), logs/smoke-$m.log:"
    tail -n 5 "$out/logs/smoke-$m.log" | sed 's/^/    /' | tee -a "$summary"
    smoke_failed=$((smoke_failed + 1))
  fi
done
# The main job on the trained digits model: accuracy, agreement with PyTorch (the sample fails
# below 99.5%), latency of off / all / early and the threshold sweep, on the GPU.
if [[ -f "$deps/digits/manifest.json" ]]; then
  if run_watched "$(stage_limit)" "main-job" "$build/samples/resnet18_exits" --heldout "$deps/digits" \
      --device cuda --export-json "$out/main-job.json" --plot "$out/main-job.svg"; then
    note "  main job: ok; $(grep -E '^  early answers' "$out/logs/main-job.log" | sed 's/^ *//')"
    grep -A4 -E '^latency per image' "$out/logs/main-job.log" | sed 's/^/  /' | tee -a "$summary"
  else
    note "  main job: FAILED (exit $?), logs/main-job.log:"
    tail -n 8 "$out/logs/main-job.log" | sed 's/^/    /' | tee -a "$summary"
    smoke_failed=$((smoke_failed + 1))
  fi
else
  note "  main job: skipped (no build/gpu-deps/digits; 'bench/gpu-check.sh deps' trains and copies it)"
fi
((smoke_failed == 0)) && end_stage ok || end_stage "FAILED ($smoke_failed runs)"
fi

begin_stage timings
if stage_wanted; then
mkdir -p "$out/timings"
timing_failed=0
# One line per run: each mode's median latency, its ratio to dag, the graph against its plan.
summarize_timing() {  # json name
  python3 - "$1" "$2" <<'PY' || echo "  $2: no readable JSON"
import json, sys
report = json.load(open(sys.argv[1]))
parts = []
for m in report["modes"]:
    part = f"{m['mode']} {m['latency_ms']['median']:.3f} ms"
    if m["mode"] != "dag":
        part += f" ({m['ratio_vs_dag']:.2f}x dag)"
    graph = m.get("cuda_graph")
    if graph:
        part += (f", {graph['nodes']} nodes as planned" if not graph["mismatches"]
                 else f", GRAPH MISMATCHES: {graph['mismatches'][:2]}")
    parts.append(part)
print(f"  {sys.argv[2]:24s} " + "; ".join(parts))
PY
}
time_model() {  # name, then cgr-bench arguments
  local name=$1
  shift
  if run_watched "$(stage_limit)" "timing-$name" "$bench" --device cuda --mode all --duration-s 1 \
      --warmup-ms 100 --export-json "$out/timings/$name.json" "$@"; then
    summarize_timing "$out/timings/$name.json" "$name" | tee -a "$summary"
  else
    note "  $name: FAILED (exit $?), logs/timing-$name.log"
    timing_failed=$((timing_failed + 1))
  fi
}
for m in two-branch inception resnet18 googlenet; do time_model "$m" --model "$m"; done
time_model resnet18-exits --model resnet18-exits --exits all
time_model resnet18-exits-off --model resnet18-exits --exits off
time_model resnet18-exits-early-0 --model resnet18-exits --exits early --threshold 0
time_model resnet18-exits-early-1 --model resnet18-exits --exits early --threshold 1
# Precision: tf32 (cuDNN / cuBLAS tensor cores) beside the fp32 runs above; fp16 and bf16 are
# CPU-emulated only for now (the cuda device refuses them at build).
for m in resnet18 googlenet; do time_model "$m-tf32" --model "$m" --precision tf32; done
# cuDNN's algorithms timed at build (EngineOptions::time_conv_algorithms) against the heuristic
# runs above: ResNet-18's fp32 convs ran on FMA implicit-GEMM kernels at 1.18 ms (2026-12-04).
for m in resnet18 googlenet; do
  time_model "$m-timed" --model "$m" --conv-algorithms timed
  time_model "$m-tf32-timed" --model "$m" --precision tf32 --conv-algorithms timed
done
note "  fp16, bf16: not on the GPU yet (EngineOptions::precision refuses them on cuda)"
for m in two-branch inception resnet18-exits; do
  exits=()
  [[ $m == resnet18-exits ]] && exits=(--exits all)  # the others have no exit heads
  run_watched "$(stage_limit)" "timeline-$m" "$bench" --device cuda --model "$m" --mode dag "${exits[@]}" \
    --iterations 5 --warmup-ms 20 --timeline "$out/timings/timeline-$m.svg" ||
    note "  timeline $m: FAILED (exit $?)"
done
((timing_failed == 0)) && end_stage ok || end_stage "FAILED ($timing_failed runs)"
fi

begin_stage tests
if stage_wanted; then
tests_failed=0
group_deadline=$((SECONDS + $(stage_limit)))
for ((g = 0; g < ${#TEST_GROUPS[@]}; g++)); do
  group=$(field "${TEST_GROUPS[$g]}" 1)
  rest=0
  for ((r = g + 1; r < ${#TEST_GROUPS[@]}; r++)); do rest=$((rest + $(field "${TEST_GROUPS[$r]}" 2))); done
  limit=$((group_deadline - SECONDS - rest))
  ((limit < 5)) && limit=5
  run_watched "$limit" "tests-$group" "$gpu_tests" --test-suite="$group" --duration=true
  rc=$?
  result=$(grep -E "^\[doctest\] test cases:" "$out/logs/tests-$group.log" | tail -n 1)
  passed=$(echo "$result" | sed -n 's/.*| *\([0-9]*\) passed.*/\1/p')
  if ((rc == 0)) && [[ "${passed:-0}" == 0 ]]; then
    tests_failed=$((tests_failed + 1))
    note "  $group: FAILED: no test case ran (${result#\[doctest\] })"
  elif ((rc == 0)); then
    note "  $group: ok ${result#\[doctest\] }"
  else
    tests_failed=$((tests_failed + 1))
    note "  $group: FAILED (exit $rc) ${result#\[doctest\] }"
    grep -E "ERROR|CHECK|REQUIRE|what\(\)|Error" "$out/logs/tests-$group.log" | head -n 8 | sed 's/^/    /' | tee -a "$summary"
  fi
done
((tests_failed == 0)) && end_stage ok || end_stage "FAILED ($tests_failed groups)"
fi

begin_stage sanitizer
if stage_wanted; then
sanitizer=$(command -v compute-sanitizer || first_match "$cuda_root/bin/compute-sanitizer" || true)
if [[ -z "$sanitizer" ]]; then
  end_stage "skipped: no compute-sanitizer on this machine"
else
  sanitizer_failed=0
  sample=("$build/samples/resnet18_exits" --device cuda --size 64 --exits early --threshold 0.5 --iterations 2)
  # racecheck and synccheck on cgr's own kernels only (namespace cgr::cuda: "cgr" is in the
  # mangled and the demangled name); cuDNN's and cuBLAS's are not ours to fix.
  for tool in memcheck initcheck racecheck synccheck; do
    filter=()
    [[ $tool == racecheck || $tool == synccheck ]] && filter=(--kernel-name kns=cgr)
    args=(--tool "$tool" --error-exitcode 9)
    if run_watched "$(stage_limit)" "sanitizer-$tool" "$sanitizer" "${args[@]}" "${filter[@]}" "${sample[@]}"; then
      note "  $tool: clean ($(grep -m1 "ERROR SUMMARY" "$out/logs/sanitizer-$tool.log"))"
    else
      rc=$?
      if grep -q "Device not supported" "$out/logs/sanitizer-$tool.log"; then
        note "  $tool: compute-sanitizer does not support this device/runtime (gVisor?); not checked"
        continue
      fi
      sanitizer_failed=$((sanitizer_failed + 1))
      note "  $tool: FAILED (exit $rc): $(grep -m1 "ERROR SUMMARY" "$out/logs/sanitizer-$tool.log")"
      grep -m 6 -E "^========= (Invalid|Uninitialized|Race|Barrier|Error|  )" "$out/logs/sanitizer-$tool.log" | sed 's/^/    /' | tee -a "$summary"
    fi
  done
  ((sanitizer_failed == 0)) && end_stage ok || end_stage "FAILED ($sanitizer_failed tools)"
fi
fi

begin_stage torch
if stage_wanted; then
if ! python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  end_stage "skipped: python3 has no torch that sees the GPU"
else
  limit=$(stage_limit)
  if run_watched "$limit" torch python3 "$root/bench/torch_gpu_peer.py" --cgr-bench "$bench" \
      --work "$out/torch-work" --cgr-json "$out/timings" --out "$out/torch_peer.json" \
      --duration-s 0.5 --budget-s $((limit - 25)); then
    sed -n '/^model /,$p' "$out/logs/torch.log" | tee -a "$summary"
    end_stage ok
  else
    note "  torch peer: FAILED (exit $?), logs/torch.log:"
    tail -n 12 "$out/logs/torch.log" | sed 's/^/    /' | tee -a "$summary"
    end_stage FAILED
  fi
  rm -rf "$out/torch-work"
fi
fi

begin_stage summary
((${#skipped_stages[@]} > 0)) && note "skipped: ${skipped_stages[*]}"
if ((${#failed_stages[@]} == 0)); then
  note "== gpu-check passed in $((SECONDS - start)) s"
  exit 0
fi
note "== gpu-check FAILED in $((SECONDS - start)) s: ${failed_stages[*]} (details above and in logs/)"
exit 1
