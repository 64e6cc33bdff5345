#!/usr/bin/env bash
# The whole test suite: installs what the build needs, configures, builds and runs CTest
# (the default preset: Release, CUDA parts built when a toolkit is found; GPU cases skip
# themselves without a device).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
cmake --workflow --preset default
