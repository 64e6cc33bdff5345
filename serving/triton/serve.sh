#!/usr/bin/env bash
# Serves a cgr model on Triton Inference Server, on loopback (127.0.0.1, free ports for HTTP
# and gRPC), and returns once the model is ready; the server keeps running in the background.
#
#   serving/triton/serve.sh --out DIR --exits-sample [options]
#     the exits sample: ResNet-18 with three exit heads trained on the digits (trained once by
#     samples/resnet18_exits/train_digits.py, ~30 s; exported by export_onnx.py), policy early
#   serving/triton/serve.sh --out DIR --model M.onnx [options]
#     any ONNX model cgr imports
#   serving/triton/serve.sh --stop DIR
#
# Options (serving/triton/tritonctl.py start --help): --name NAME, --buckets 1,2,4,8,
# --instances N, --threads N, --kind cpu|gpu [--gpus 0,1], --mode dag, --exits off|all|early,
# --threshold T, --exit-output OUT[=SPECULATE_UNTIL] (repeat), --exits-json FILE,
# --input-shape NAME=D0,D1,..., --queue-delay-us US, --timeout S (readiness, default 180).
#
# DIR gets repository/ (the rendered model repository), tritonserver.log and server.json (pid,
# ports). First it installs what is missing (scripts/install-deps.sh --serving: Triton and the
# build's packages) and builds the Python package (cmake --build --preset default --target _cgr).
# The cgr package comes from build/default/python unless CGR_PYTHONPATH names another folder;
# Triton from /opt/cgr/triton unless TRITON_HOME names its tritonserver folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tritonctl=$root/serving/triton/tritonctl.py

if [[ "${1:-}" == "--stop" ]]; then
  [[ $# -eq 2 ]] || { echo "usage: serve.sh --stop DIR" >&2; exit 2; }
  exec /usr/bin/python3 "$tritonctl" stop --out "$2"
fi

args=()
exits_sample=0
while (($#)); do
  case "$1" in
    --exits-sample) exits_sample=1 ;;
    *) args+=("$1") ;;
  esac
  shift
done

cd "$root"
if ((exits_sample)) && [[ " ${args[*]} " == *" --model "* ]]; then
  echo "serve.sh: --exits-sample serves the exits sample; --model names another model: give one" >&2
  exit 2
fi
if ((exits_sample)); then
  bash scripts/install-deps.sh --serving --sample
else
  bash scripts/install-deps.sh --serving
fi
if [[ -z "${CGR_PYTHONPATH:-}" ]]; then
  cmake --preset default >/dev/null
  cmake --build --preset default --target _cgr
  export PYTHONPATH="$root/build/default/python${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$CGR_PYTHONPATH${PYTHONPATH:+:$PYTHONPATH}"
fi

if ((exits_sample)); then
  /usr/bin/python3 samples/resnet18_exits/train_digits.py --cache build/digits
  /usr/bin/python3 samples/resnet18_exits/export_onnx.py --digits-cache build/digits \
    --output build/triton/exits.onnx
  args=(--model build/triton/exits.onnx --exits-json build/triton/exits.json --exits early
        --name cgr_exits "${args[@]}")
fi
exec /usr/bin/python3 "$tritonctl" start "${args[@]}"
