#!/usr/bin/env bash
# The main job: builds cgr and runs the ResNet-18 early-exits sample, on the GPU when there is
# one, else on the CPU executor.
#
#   scripts/run-sample.sh [--threshold T] [--sweep T1,T2,...] [--export-json FILE] [--plot FILE]
#     ResNet-18 with exits trained on real data: the first run trains it on scikit-learn's
#     handwritten digits (samples/resnet18_exits/train_digits.py, Debian's PyTorch, about 30 s;
#     cached in build/digits/, keyed by the script), then every held-out image goes through
#     the engine under the exit policies off, all and early: accuracy per answering exit,
#     agreement with PyTorch, latency per image, a threshold sweep, and the trade-off drawn
#     to build/default/resnet18_exits_tradeoff.svg.
#   scripts/run-sample.sh --size 224 [--weights FILE] [--exits early] [--iterations N] ...
#     One image (seeded, or --image FILE.npy) with seeded or given weights: timing at any size.
# Any other argument goes to the sample (build/default/samples/resnet18_exits --help).
set -euo pipefail
cd "$(dirname "$0")/.."
single_image=0
for argument in "$@"; do
  case "$argument" in
    --size* | --weights* | --image* | --exits* | --classes* | --export-output* | --iterations* | \
      --help | -h) single_image=1 ;;
  esac
done

if ((single_image)); then
  bash scripts/install-deps.sh
else
  bash scripts/install-deps.sh --sample
fi
cmake --preset default >/dev/null
cmake --build --preset default --target resnet18_exits
if ((single_image)); then
  exec ./build/default/samples/resnet18_exits "$@"
fi

/usr/bin/python3 samples/resnet18_exits/train_digits.py --cache build/digits
heldout=$(/usr/bin/python3 samples/resnet18_exits/train_digits.py --cache build/digits --where)
extra=()
[[ " $* " == *" --plot"* ]] || extra=(--plot build/default/resnet18_exits_tradeoff.svg)
exec ./build/default/samples/resnet18_exits --heldout "$heldout" "${extra[@]}" "$@"
