#!/usr/bin/python3
"""Exports the exits sample (ResNet-18 with heads after layer1, layer2 and layer3, as in
export_weights.py) to ONNX with a symbolic batch, for engines built from ONNX: the Python
package (cgr.Engine.from_onnx, cgr.BucketedEngine.from_onnx) and the Triton model repository
(serving/triton).

    /usr/bin/python3 samples/resnet18_exits/export_onnx.py --weights W.safetensors \
        --output exits.onnx [--size 32] [--opset 17]
    /usr/bin/python3 samples/resnet18_exits/export_onnx.py --digits-cache build/digits \
        --output exits.onnx

W.safetensors holds the sample's weight names (export_weights.py's seeded or converted
weights); --digits-cache takes train_digits.py's trained digits model from its cache (the
folder train_digits.py --cache DIR --where names; it must have been trained). The number of
classes is read from the weights.
The model has one input, "image" (batch x 3 x size x size), and four outputs, "exit0",
"exit1", "exit2" (the heads) and "final" (batch x classes each). Next to it, X.json (for X.onnx) says
how to import the heads as exits: {"input", "size", "classes", "final", "exits":
[[output, speculate_until], ...]}, where speculate_until is the ONNX tensor the backbone keeps
computing while that head decides (layer2's output for exit0, layer3's for exit1, layer4's for
exit2: what the C++ model in models/src/resnet18_exits.cpp speculates).
"""
import argparse
import json
import os
import struct
import sys

try:
    import numpy as np
    import onnx
    import torch
except ImportError as e:  # the test fixture turns 77 into "skipped"
    print(f"export_onnx.py: {e}; install python3-torch python3-torchvision python3-onnx",
          file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_weights import ResNet18Exits  # noqa: E402

HEADS = ["exit0", "exit1", "exit2"]
# The block whose output each head's decision overlaps (torch.onnx names the last ReLU of a
# BasicBlock "/layerK/layerK.1/relu_1/Relu": the scope is the module's own name).
SPECULATE = ["layer2", "layer3", "layer4"]


def read_safetensors(path):
    """{name: float32 array} from a safetensors file of F32 tensors (what write_safetensors
    writes)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        sys.exit(f"export_onnx.py: {path}: too short for a safetensors file")
    (header_size,) = struct.unpack("<Q", data[:8])
    if header_size > len(data) - 8:
        sys.exit(f"export_onnx.py: {path}: header of {header_size} bytes exceeds the file")
    header = json.loads(data[8:8 + header_size])
    body = data[8 + header_size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            sys.exit(f"export_onnx.py: {path}: tensor {name} is {entry['dtype']}, not F32")
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[begin:end], dtype="<f4").reshape(entry["shape"]).copy()
    return tensors


def speculation_points(model_proto):
    outputs = {o for node in model_proto.graph.node for o in node.output}
    points = []
    for layer in SPECULATE:
        name = f"/{layer}/{layer}.1/relu_1/Relu_output_0"
        if name not in outputs:
            sys.exit(f"export_onnx.py: the exported graph has no tensor {name} (the output of "
                     f"{layer}); torch {torch.__version__} names its nodes otherwise")
        points.append(name)
    return points


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--weights", help="the sample's weights (safetensors)")
    source.add_argument("--digits-cache", help="train_digits.py's --cache folder")
    parser.add_argument("--output", required=True, help="the ONNX file to write")
    parser.add_argument("--size", type=int, default=32, help="image side (default 32: digits)")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args()

    if args.digits_cache:
        from train_digits import cache_key  # the folder this version of the script trains into
        folder = os.path.join(os.path.abspath(args.digits_cache), cache_key())
        args.weights = os.path.join(folder, "weights.safetensors")
        if not os.path.isfile(args.weights):
            sys.exit(f"export_onnx.py: {args.weights} does not exist: train the digits model "
                     f"first (samples/resnet18_exits/train_digits.py --cache {args.digits_cache})")
    state = read_safetensors(args.weights)
    if "fc.weight" not in state:
        sys.exit(f"export_onnx.py: {args.weights} has no fc.weight: not the exits sample's weights")
    classes = state["fc.weight"].shape[0]
    model = ResNet18Exits(classes).eval()
    missing, unexpected = model.load_flat_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    if missing or unexpected:
        sys.exit(f"export_onnx.py: {args.weights}: missing {missing[:5]}, unexpected {unexpected[:5]}")

    output = os.path.abspath(args.output)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    names = HEADS + ["final"]
    example = torch.zeros(1, 3, args.size, args.size)
    staging = output + ".partial"
    torch.onnx.export(model, (example,), staging, input_names=["image"], output_names=names,
                      dynamic_axes={n: {0: "batch"} for n in ["image"] + names},
                      opset_version=args.opset)
    try:
        points = speculation_points(onnx.load(staging))
        os.replace(staging, output)
    finally:
        if os.path.exists(staging):
            os.remove(staging)
    description = {"input": "image", "size": args.size, "classes": classes, "final": "final",
                   "exits": [[head, point] for head, point in zip(HEADS, points)]}
    with open(os.path.splitext(output)[0] + ".json", "w") as f:
        json.dump(description, f, indent=2)
    print(f"export_onnx.py: wrote {output} ({classes} classes, {args.size}x{args.size}) and "
          f"{os.path.splitext(output)[0]}.json")


if __name__ == "__main__":
    main()
