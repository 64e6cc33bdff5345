#!/usr/bin/python3
"""Exports the CPU comparison's models to ONNX (opset 13, fixed batch 1, one input "input").

Run with Debian's interpreter (python3-torch, python3-torchvision, python3-onnx):
    /usr/bin/python3 bench/peers/export_models.py OUT_DIR [--force]
Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME.input.npy (a seeded uniform input) for each of:
  two-group     the seed question: two groups of three 3x3 convs + ReLU (32 channels, input
                1x32x56x56) on one input, concatenated on channels
  resnet18      torchvision resnet18, 1x3x224x224
  googlenet     torchvision googlenet (no aux heads), 1x3x224x224
  mobilenet_v2  torchvision mobilenet_v2, 1x3x224x224
  inception_v3  torchvision inception_v3 (no aux head), 1x3x299x299
Weights are torchvision's default initialisation under a fixed seed (speed does not depend on
them; the outputs are compared between the engines, not against a trained answer), except
GoogLeNet's convs: its default (normal, standard deviation 0.01) shrinks the activations to
1e-11 by inception5b, so both engines would return the classifier's bias and the comparison
would check nothing; they get Kaiming's normal initialisation, as ResNet's do. A model whose
files exist and were written by this recipe (NAME.recipe) is kept unless --force.
"""
import argparse
import os
import sys

import numpy as np

try:
    import torch
    import torchvision
except ImportError:
    # 77: the test suite's "skipped" (a machine without Debian's python3-torch).
    print("export_models.py: needs Debian's python3-torch and python3-torchvision "
          "(scripts/install-deps.sh --peers) under /usr/bin/python3", file=sys.stderr)
    sys.exit(77)


# The seed's two groups are the two-branch net's chains: torch_cpu_reference.py's TwoBranch,
# fed 32 channels.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from torch_cpu_reference import TwoBranch  # noqa: E402


def googlenet():
    model = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
    return model


# Bumped when a model's recipe changes, so that cached exports are redone.
RECIPES = {"googlenet": "2: convs Kaiming normal"}

MODELS = {
    "two-group": (lambda: TwoBranch(channels=32, width=32), (1, 32, 56, 56)),
    "resnet18": (lambda: torchvision.models.resnet18(weights=None), (1, 3, 224, 224)),
    "googlenet": (googlenet, (1, 3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)),
    "inception_v3": (lambda: torchvision.models.inception_v3(weights=None, aux_logits=False,
                                                              init_weights=True), (1, 3, 299, 299)),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--force", action="store_true", help="re-export models that exist")
    parser.add_argument("--models", default=",".join(MODELS),
                        help="comma-separated subset of " + ", ".join(MODELS))
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"export_models.py: unknown model(s) {', '.join(unknown)}; known: "
              f"{', '.join(MODELS)}", file=sys.stderr)
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    for index, name in enumerate(names):
        onnx_path = os.path.join(args.out_dir, name + ".onnx")
        input_path = os.path.join(args.out_dir, name + ".input.npy")
        recipe_path = os.path.join(args.out_dir, name + ".recipe")
        recipe = RECIPES.get(name, "1")
        cached_recipe = None
        if os.path.exists(recipe_path):
            with open(recipe_path, encoding="utf-8") as f:
                cached_recipe = f.read().strip()
        elif os.path.exists(onnx_path):
            cached_recipe = "1"  # written before recipes were recorded
        if (not args.force and os.path.exists(onnx_path) and os.path.exists(input_path)
                and cached_recipe == recipe):
            continue
        build, shape = MODELS[name]
        torch.manual_seed(index)
        model = build().eval()
        x = torch.from_numpy(np.random.default_rng(index).uniform(-1, 1, shape).astype(np.float32))
        with torch.inference_mode():
            torch.onnx.export(model, x, onnx_path + ".tmp", opset_version=13,
                              input_names=["input"], output_names=["output"])
        os.replace(onnx_path + ".tmp", onnx_path)
        np.save(input_path, x.numpy())
        with open(recipe_path, "w", encoding="utf-8") as f:
            f.write(recipe + "\n")
        print(f"exported {name} {'x'.join(map(str, shape))} -> {onnx_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
