#!/usr/bin/env bash
# GPU check for a machine with an NVIDIA H200 (sm_90): build, GPU test cases, compute-sanitizer
# memcheck and racecheck on a small dag model, the three CUDA modes timed side by side on every
# built-in model (the exit policies on ResNet-18 with exits), each graph checked against its
# plan, and CUPTI timelines of one inference. Logs and a summary go to $OUT (or
# build/gpu-check). Budget: well under 8 minutes.
#
# The GPU machine has nvcc, CMake and ninja but not Debian's fmt/doctest/nlohmann packages,
# so their headers travel with the call (fmt in header-only mode), and the ONNX importer,
# which needs libonnx/libprotobuf, is left out there:
#   here:        bench/gpu-check.sh deps            # copies the headers into build/gpu-deps
#   GPU machine: bench/gpu-check.sh                 # with build/gpu-deps carried along
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
deps=$root/build/gpu-deps

if [[ "${1:-}" == "deps" ]]; then
  rm -rf "$deps" && mkdir -p "$deps/include"
  for d in fmt doctest nlohmann CLI; do cp -r "/usr/include/$d" "$deps/include/"; done
  echo "header-only dependencies copied to $deps ($(du -sh "$deps" | cut -f1))"
  exit 0
fi

out=${OUT:-$root/build/gpu-check}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
start=$SECONDS
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)

note "== machine"
(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi failed") 2>&1 | tee -a "$summary"
"$nvcc" --version | tail -n 2 | tee -a "$summary"

note "== build (Release, sm_90)"
deps_args=()
if [[ -d "$deps/include" ]]; then deps_args=(-DCGR_DEPS_DIR="$deps" -DCGR_ENABLE_ONNX=OFF); fi
if ! { cmake -S "$root" -B "$root/build/gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" "${deps_args[@]}" &&
       cmake --build "$root/build/gpu" --target cgr_gpu_tests cgr_tests two_branch resnet18 resnet18_exits cgr-bench; } \
       >"$out/build.log" 2>&1; then
  note "BUILD FAILED (see build.log)"; tail -n 30 "$out/build.log"; exit 1
fi
note "built in $((SECONDS - start)) s"
bin=$root/build/gpu
ldd "$bin/tests/cgr_gpu_tests" | grep -E "cudart|cudnn|cublas" | tee -a "$summary"

note "== GPU test cases"
timeout 300 "$bin/tests/cgr_gpu_tests" >"$out/tests.log" 2>&1
status=$?
grep -E "test cases:|assertions:" "$out/tests.log" | tee -a "$summary"
[[ $status -eq 0 ]] || note "GPU TESTS FAILED (exit $status, see tests.log)"

note "== compute-sanitizer (two-branch, dag)"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -n "$sanitizer" ]]; then
  for tool in memcheck racecheck; do
    timeout 240 "$sanitizer" --tool "$tool" --error-exitcode 9 "$bin/samples/two_branch" --device cuda \
      --size 16 --width 8 --iterations 2 >>"$out/sanitizer.log" 2>&1
    note "$tool: exit $? ($(grep -c "ERROR SUMMARY: 0 errors" "$out/sanitizer.log") clean summaries so far)"
  done
else
  note "compute-sanitizer not found on this machine"
fi

note "== timing: cgr-bench --mode all (dag, stream-graph, eager side by side)"
json=$out/json
mkdir -p "$json"
run_bench() {  # name, then cgr-bench arguments
  local name=$1; shift
  timeout 120 "$bin/bench/cgr-bench" --device cuda --mode all --duration-s 2 \
    --export-json "$json/$name.json" "$@" >>"$out/timing.log" 2>&1 || note "$name: cgr-bench exit $?"
}
run_bench two-branch-32 --model two-branch --input-shape 1x3x32x32
run_bench two-branch-224 --model two-branch --input-shape 1x3x224x224
run_bench inception --model inception
run_bench resnet18 --model resnet18
run_bench googlenet --model googlenet
for policy in off all; do run_bench "exits-$policy" --model resnet18-exits --exits "$policy"; done
for t in 0 1; do run_bench "exits-early-$t" --model resnet18-exits --exits early --threshold "$t"; done
timeout 120 "$bin/bench/cgr-bench" --device cuda --model two-branch --mode all \
  --sweep-size 16,32,64,112,224 --duration-s 1 >>"$out/timing.log" 2>&1
# CUPTI timelines of one inference (a bar per kernel/copy, named after its op).
for m in "two-branch --mode dag" "resnet18-exits --mode dag --exits all" "inception --mode dag"; do
  name=$(echo "$m" | cut -d' ' -f1)
  # shellcheck disable=SC2086
  timeout 120 "$bin/bench/cgr-bench" --device cuda --model $m --iterations 20 --warmup-ms 50 \
    --timeline "$json/timeline-$name.svg" >>"$out/timing.log" 2>&1 || note "timeline $name: cgr-bench exit $?"
done
grep -E "^timeline" "$out/timing.log" | tee -a "$summary"
# One screen: model, then each mode's median and its ratio to dag.
grep -E "^model|^  (dag|stream-graph|eager) +[0-9]|as planned|MISMATCHES|ops executed|eager/dag|^ +[0-9]+ +[0-9.]+ +[0-9.]+" "$out/timing.log" | tee -a "$summary"
(cd "$out" && tar czf bench-json.tgz json && rm -rf json)

note "== done in $((SECONDS - start)) s"
