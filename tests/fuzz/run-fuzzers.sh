#!/usr/bin/env bash
# Builds the libFuzzer targets in a clang configuration (build/fuzz) and runs each for N
# seconds (default 60) on a scratch copy of its seed corpus, so the checked-in seeds stay as
# they are. Exits non-zero if any fuzzer finds a crash, a sanitizer report, a timeout or an
# out-of-memory; the reproducer lands in build/fuzz/runs/<fuzzer>/artifacts/.
#   tests/fuzz/run-fuzzers.sh [seconds]
# Reproduce a finding: build/fuzz/tests/fuzz/fuzz_npy <artifact file>
set -euo pipefail

seconds=${1:-60}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$root/build/fuzz

mkdir -p "$build"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCGR_ENABLE_CUDA=OFF -DCGR_BUILD_FUZZERS=ON -DCGR_BUILD_TESTS=OFF -DCGR_BUILD_SAMPLES=OFF \
  -DCGR_BUILD_BENCH=OFF \
  >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target fuzz_npy fuzz_safetensors fuzz_onnx fuzz_cli

status=0
for name in npy safetensors onnx cli; do
  fuzzer=$build/tests/fuzz/fuzz_$name
  run=$build/runs/$name
  rm -rf "$run"
  mkdir -p "$run/corpus" "$run/artifacts"
  cp "$here/corpus/$name/"* "$run/corpus/"
  echo "== fuzz_$name: ${seconds}s"
  dict=()
  [[ -f "$here/$name.dict" ]] && dict=(-dict="$here/$name.dict")
  # The command-line parsers print --help to stdout: closed, so the log keeps the findings.
  quiet=()
  [[ $name == cli ]] && quiet=(-close_fd_mask=1)
  if "$fuzzer" "$run/corpus" "${dict[@]}" "${quiet[@]}" -max_total_time="$seconds" -timeout=10 \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$run/artifacts/" \
       >"$run/log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE" "$run/log" || true
  else
    echo "fuzz_$name FAILED; log: $run/log"
    tail -n 40 "$run/log"
    status=1
  fi
  if [[ -n "$(ls -A "$run/artifacts")" ]]; then
    echo "fuzz_$name left artifacts:" "$run"/artifacts/*
    status=1
  fi
done
exit "$status"
