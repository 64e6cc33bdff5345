#!/usr/bin/env bash
# The main job: builds cgr and runs the ResNet-18 early-exits sample, on the GPU when there is
# one, else on the CPU executor. Extra arguments go to the sample (see --help), e.g.
#   scripts/run-sample.sh --exits early --threshold 0.5
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target resnet18_exits
./build/default/samples/resnet18_exits "$@"
