#!/usr/bin/env bash
# cgr's CPU executor against ONNX Runtime on the same ONNX files, one script, one table.
#   bash bench/peers/cpu-vs-ort.sh [--threads 1,2] [--rounds 3] [--duration-s 2] [--json F]
# Installs what it needs (scripts/install-deps.sh --peers), builds cgr-bench (the CPU preset
# unless build/default has one), exports the models into build/peers once, and runs
# bench/peers/cpu_vs_ort.py, whose --help lists every flag. Run it on an otherwise idle machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bash scripts/install-deps.sh --peers
bench=build/default/bench/cgr-bench
if [ ! -x "$bench" ]; then
  cmake --preset cpu >/dev/null
  cmake --build build/cpu --target cgr-bench
  bench=build/cpu/bench/cgr-bench
else
  cmake --build build/default --target cgr-bench
fi
/usr/bin/python3 bench/peers/export_models.py build/peers
PYTHONPATH=/opt/cgr/peers${PYTHONPATH:+:$PYTHONPATH} \
  /usr/bin/python3 bench/peers/cpu_vs_ort.py --cgr-bench "$bench" --model-dir build/peers "$@"
