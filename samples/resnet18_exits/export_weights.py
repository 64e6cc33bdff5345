#!/usr/bin/python3
"""Builds ResNet-18 with auxiliary exits in PyTorch and writes the safetensors file the
resnet18_exits sample reads.

The model is torchvision's resnet18 plus three heads, after layer1, layer2 and layer3:
    Conv2d(C_k -> 128, 3x3, pad 1, no bias) -> BatchNorm2d(128) -> ReLU
    -> AdaptiveAvgPool2d(1) -> flatten -> Linear(128 -> classes)
named exits.{0,1,2}.{conv,bn,fc}; the backbone keeps torchvision's names (conv1.weight,
bn1.*, layer1.0.conv1.weight, ..., fc.weight, fc.bias).

Run with Debian's interpreter (python3-torch, python3-torchvision):
    /usr/bin/python3 samples/resnet18_exits/export_weights.py --output exits.safetensors
        [--checkpoint CKPT.pt] [--classes 1000] [--seed 0]
        [--reference DIR --size 224]   # also write a seeded input and PyTorch's outputs
--checkpoint loads a state_dict (a plain torchvision resnet18 checkpoint fills the backbone;
a checkpoint of this model fills the heads too). Without it the weights are seeded random,
with BatchNorm statistics drawn away from the identity so that folding them matters.
--reference DIR writes input.npy (1x3xSxS), and exit0.npy, exit1.npy, exit2.npy, final.npy:
the logits PyTorch computes in eval mode, for the C++ tests to compare against.
"""
import argparse
import json
import os
import struct
import sys

try:
    import numpy as np
    import torch
    import torchvision
except ImportError as e:  # the test fixture turns 77 into "skipped"
    print(f"export_weights.py: {e}; install python3-torch python3-torchvision", file=sys.stderr)
    sys.exit(77)

HEAD_CHANNELS = 128


class ExitHead(torch.nn.Module):
    def __init__(self, in_channels, classes):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, HEAD_CHANNELS, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(HEAD_CHANNELS)
        self.fc = torch.nn.Linear(HEAD_CHANNELS, classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


class ResNet18Exits(torch.nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.backbone = torchvision.models.resnet18(num_classes=classes)
        self.exits = torch.nn.ModuleList([ExitHead(c, classes) for c in (64, 128, 256)])

    def forward(self, x):
        b = self.backbone
        x = b.maxpool(b.relu(b.bn1(b.conv1(x))))
        x1 = b.layer1(x)
        x2 = b.layer2(x1)
        x3 = b.layer3(x2)
        x4 = b.layer4(x3)
        final = b.fc(torch.flatten(b.avgpool(x4), 1))
        return [self.exits[0](x1), self.exits[1](x2), self.exits[2](x3), final]

    def flat_state_dict(self):
        """torchvision names for the backbone, exits.* for the heads."""
        out = {}
        for name, t in self.state_dict().items():
            if name.endswith("num_batches_tracked"):
                continue
            out[name[len("backbone."):] if name.startswith("backbone.") else name] = t
        return out

    def load_flat_state_dict(self, state):
        mapped = {(k if k.startswith("exits.") else "backbone." + k): v for k, v in state.items()}
        missing, unexpected = self.load_state_dict(mapped, strict=False)
        missing = [m for m in missing if not m.endswith("num_batches_tracked")]
        return missing, unexpected


def write_safetensors(path, tensors, metadata):
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name].detach().cpu().numpy(), dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True)
    parser.add_argument("--checkpoint")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference")
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    model = ResNet18Exits(args.classes).eval()
    if args.checkpoint:
        state = torch.load(args.checkpoint, map_location="cpu")
        state = state.get("state_dict", state) if isinstance(state, dict) else state
        missing, unexpected = model.load_flat_state_dict(state)
        if unexpected:
            sys.exit(f"export_weights.py: {args.checkpoint}: unexpected keys {unexpected[:5]}...")
        print(f"loaded {args.checkpoint}; left seeded: {len(missing)} tensors"
              + (f" (e.g. {missing[0]})" if missing else ""))
    else:
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, torch.nn.BatchNorm2d):
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)
                    m.running_mean.uniform_(-0.5, 0.5)
                    m.running_var.uniform_(0.5, 2.0)
    state = model.flat_state_dict()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    write_safetensors(args.output, state, {"format": "pt", "model": "resnet18_exits",
                                           "classes": args.classes, "seed": args.seed})
    print(f"wrote {len(state)} tensors to {args.output}")

    if args.reference:
        os.makedirs(args.reference, exist_ok=True)
        generator = torch.Generator().manual_seed(args.seed + 1)
        image = torch.randn(1, 3, args.size, args.size, generator=generator)
        with torch.no_grad():
            outputs = model(image)
        np.save(os.path.join(args.reference, "input.npy"), image.numpy().astype("<f4"))
        for name, out in zip(["exit0", "exit1", "exit2", "final"], outputs):
            np.save(os.path.join(args.reference, f"{name}.npy"), out.numpy().astype("<f4"))
        print(f"wrote the input and PyTorch's outputs to {args.reference}")


if __name__ == "__main__":
    main()
