#!/usr/bin/env bash
# The main job: builds cgr and runs the ResNet-18 sample, on the GPU when there is one, else
# on the CPU executor. Extra arguments go to the sample (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default --target resnet18
./build/default/samples/resnet18 "$@"
