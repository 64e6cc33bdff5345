#!/usr/bin/python3
"""Build cgr's ONNX conformance models from PyTorch.

Run with Debian's interpreter (python3-torch, python3-torchvision, python3-onnx, numpy):

    /usr/bin/python3 tests/conformance/make_models.py OUT_DIR [--only NAME,...] [--no-check] [--list]

For every model it writes OUT_DIR/NAME/{model.onnx, weights.safetensors, input.npy,
output.npy | output0.npy, output1.npy, ...} and finally OUT_DIR/manifest.json, which the C++
conformance test reads. See tests/conformance/README.md for the manifest format and the
op/attribute coverage table.

Everything is deterministic: each model seeds torch from zlib.crc32 of its base name (the
name without an _opN suffix, so the opset variants of one model share weights and input).
"""

import argparse
import contextlib
import hashlib
import io
import json
import os
import struct
import sys
import time
import warnings
import zlib

if not sys.executable.startswith("/usr/bin/python3"):
    print(f"note: running under {sys.executable}; this script targets Debian's /usr/bin/python3",
          file=sys.stderr)

try:
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
except ImportError as e:  # the C++ test checks for this exit code / message and skips
    print(f"make_models.py: missing Python package: {e.name} "
          "(install python3-torch python3-torchvision python3-onnx python3-numpy)", file=sys.stderr)
    sys.exit(77)

warnings.filterwarnings("ignore")

# The ops of issue 4's importer; a graph op outside this set is listed in the manifest's
# "extra_ops" (the raw F.pad exports need integer constant subgraphs evaluated).
IMPORTER_OPS = {"Conv", "BatchNormalization", "Relu", "MaxPool", "AveragePool", "GlobalAveragePool",
                "Concat", "Flatten", "Gemm", "MatMul", "Add", "Identity", "Dropout", "Constant", "Pad",
                "Reshape", "Softmax", "LogSoftmax", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Selu",
                "HardSigmoid", "HardSwish", "Softplus", "Erf", "Gelu", "Exp", "Log", "Sqrt", "Neg",
                "Abs", "Reciprocal", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu",
                "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "GlobalMaxPool", "Slice", "Split",
                "Shape", "Gather", "Transpose", "ConvTranspose",
                "LRN", "InstanceNormalization", "LayerNormalization",
                "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Tile"}
DEFAULT_OPSET = 13
TOLERANCE = 1e-4
EVAL = torch.onnx.TrainingMode.EVAL
PRESERVE = torch.onnx.TrainingMode.PRESERVE


# --------------------------------------------------------------------------------------------
# Model registry
# --------------------------------------------------------------------------------------------

class Spec:
    def __init__(self, name, base, build, input_shape, opset, exercises, description,
                 fold=True, training=EVAL, input_scale=1.0, edit=None, edit_note=None,
                 tolerance=TOLERANCE, note=None, init=None):
        self.name = name
        self.base = base
        self.build = build
        self.input_shape = list(input_shape)
        self.opset = opset
        self.exercises = list(exercises)
        self.description = description
        self.fold = fold
        self.training = training
        self.input_scale = input_scale
        self.edit = edit
        self.edit_note = edit_note
        self.tolerance = tolerance
        self.note = note
        self.init = init


SPECS = []


def add(name, build, input_shape, exercises, description, opsets=(DEFAULT_OPSET,), base=None, **kw):
    """Register a model; with several opsets, one model per opset named NAME_opN. The seed comes
    from `base` (default: NAME), so the opset variants share weights and input."""
    for opset in opsets:
        full = name if len(opsets) == 1 else f"{name}_op{opset}"
        SPECS.append(Spec(full, base or name, build, input_shape, opset, exercises, description, **kw))


class Lambda(nn.Module):
    """A module whose forward is fn(self, x); keyword modules become submodules."""

    def __init__(self, fn, **modules):
        super().__init__()
        self.fn = fn
        for k, v in modules.items():
            if isinstance(v, torch.Tensor):
                self.register_buffer(k, v)
            else:
                setattr(self, k, v)

    def forward(self, x):
        return self.fn(self, x)


def seq(*layers):
    return nn.Sequential(*layers)


X = (1, 4, 9, 9)  # default input of the small models

# ---- networks ------------------------------------------------------------------------------

add("resnet18", lambda: torchvision.models.resnet18(weights=None, num_classes=1000),
    (1, 3, 224, 224), ["Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"],
    "torchvision resnet18, random init; default export (constant folding, EVAL): the exporter "
    "folds every BatchNorm into its Conv, so initializer names are onnx::Conv_N, not state_dict names")
add("resnet18_bn", lambda: torchvision.models.resnet18(weights=None, num_classes=1000),
    (1, 3, 224, 224),
    ["Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"],
    "torchvision resnet18 exported with do_constant_folding=False, training=PRESERVE (model in eval): "
    "BatchNormalization nodes stay in the graph and initializers keep their state_dict names",
    fold=False, training=PRESERVE)
add("googlenet",
    lambda: torchvision.models.googlenet(weights=None, aux_logits=False, transform_input=False,
                                         init_weights=True),
    (1, 3, 224, 224),
    ["Conv", "Relu", "MaxPool", "Concat", "GlobalAveragePool", "Flatten", "Gemm"],
    "torchvision googlenet (aux_logits off, transform_input off), init_weights=True; Inception "
    "modules = 4 parallel branches concatenated; BN (eps 1e-3) folded into Conv by the exporter; "
    "MaxPool ceil_mode=True; Dropout removed in eval")


class TwoBranch(nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(1, 7):
            setattr(self, f"conv{i}", nn.Conv2d(3 if i in (1, 4) else 16, 16, 3, padding=1))

    def forward(self, x):
        y = x
        for i in (1, 2, 3):
            y = F.relu(getattr(self, f"conv{i}")(y))
        z = x
        for i in (4, 5, 6):
            z = F.relu(getattr(self, f"conv{i}")(z))
        return torch.cat((y, z), dim=1)


add("two_branch", TwoBranch, (1, 3, 32, 32), ["Conv", "Relu", "Concat"],
    "two independent 3-conv chains (3->16->16->16, 3x3 pad 1, ReLU) on the same input, "
    "concatenated on channels; state_dict names conv1..conv6")

# ---- torchvision classification models -------------------------------------------------------
# Every architecture, fan-in scaled weights and non-trivial BatchNorm statistics, at reduced input
# sizes where the architecture allows (CI time); the exported graph as torch 1.13 writes it.

def tv(name, size, opsets=(13,), **kw):
    def build():
        return getattr(torchvision.models, name)(weights=None, **kw)
    add(f"tv_{name}", build, (1, 3, size, size), [],
        f"torchvision {name} at {size}x{size}, fan-in scaled weights, random BatchNorm statistics",
        opsets=opsets, init="fan_in")


tv("alexnet", 224)
tv("vgg11_bn", 224)
tv("resnet50", 96)
tv("resnext50_32x4d", 96)
tv("densenet121", 96)
tv("squeezenet1_1", 96)
tv("googlenet", 96, aux_logits=False, init_weights=False)
tv("inception_v3", 96, aux_logits=False, init_weights=False)
tv("mobilenet_v2", 96)
tv("mobilenet_v3_small", 96, opsets=(13, 17))
tv("mobilenet_v3_large", 96)
tv("mnasnet0_5", 96)
tv("shufflenet_v2_x1_0", 96)
tv("efficientnet_b0", 96)
tv("regnet_x_400mf", 96)
tv("regnet_y_400mf", 96)
tv("convnext_tiny", 64)


class DeepLabV3(nn.Module):
    """torchvision's deeplabv3_mobilenet_v3_large (21 classes, no aux head) returning the
    segmentation logits of its output dict: MobileNetV3 with dilated last blocks, ASPP with a
    global-pool branch upsampled by Resize, and the final bilinear Resize to the input size."""

    def __init__(self):
        super().__init__()
        self.model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, aux_loss=False)

    def forward(self, x):
        return self.model(x)["out"]


add("tv_deeplabv3_mobilenet_v3_large", DeepLabV3, (1, 3, 96, 96), ["Resize"],
    "torchvision deeplabv3_mobilenet_v3_large at 96x96 (segmentation: dilated convs, ASPP, "
    "bilinear Resize), fan-in scaled weights, random BatchNorm statistics",
    opsets=(13, 17), init="fan_in")

# ---- Conv ----------------------------------------------------------------------------------

add("conv", lambda: nn.Conv2d(4, 8, 3), X, ["Conv"],
    "Conv 3x3, stride 1, no padding, bias", opsets=(11, 13, 17))
add("conv_stride2_pad1", lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1), X, ["Conv"],
    "Conv 3x3 strides 2 pads 1", opsets=(11, 13))
add("conv_nobias_rect", lambda: nn.Conv2d(4, 8, (3, 5), padding=(1, 2), bias=False), X, ["Conv"],
    "Conv kernel 3x5, pads (1,2), no bias (2-input Conv)", opsets=(13, 17))
add("conv_stride_rect", lambda: nn.Conv2d(4, 6, 3, stride=(2, 1), padding=(0, 1)), X, ["Conv"],
    "Conv strides (2,1) pads (0,1)")
add("conv_dilation2", lambda: nn.Conv2d(4, 8, 3, padding=2, dilation=2), X, ["Conv"],
    "Conv 3x3 dilations 2 pads 2", opsets=(11, 13))
add("conv_dilation2_stride2", lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1, dilation=(2, 1)), X,
    ["Conv"], "Conv dilations (2,1) strides 2 pads 1")
add("conv_pad_gt_half", lambda: nn.Conv2d(4, 8, 3, padding=3), X, ["Conv"],
    "Conv 3x3 pads 3 (more padding than kernel/2: border outputs see bias only)")
add("conv_1x1", lambda: nn.Conv2d(4, 8, 1), X, ["Conv"], "Conv 1x1")
add("conv_1x1_stride2", lambda: nn.Conv2d(4, 8, 1, stride=2, bias=False), X, ["Conv"],
    "Conv 1x1 strides 2, no bias (ResNet downsample shape)")
add("conv_group2", lambda: nn.Conv2d(4, 8, 3, padding=1, groups=2), X, ["Conv"],
    "Conv group 2 (4->8)", opsets=(11, 13, 17))
add("conv_depthwise", lambda: nn.Conv2d(4, 4, 3, padding=1, groups=4), X, ["Conv"],
    "depthwise Conv group 4 (4->4)", opsets=(11, 13))
add("conv_depthwise_mult2", lambda: nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=4, bias=False),
    X, ["Conv"], "depthwise Conv with channel multiplier 2: group 4 (4->8), strides 2, no bias")
add("conv_relu", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU()), X, ["Conv", "Relu"],
    "Conv followed by Relu (epilogue fusion)")

# ---- Pad -----------------------------------------------------------------------------------
# torch 1.13 exports F.pad / nn.ZeroPad2d at opset >= 11 as Pad whose `pads` input is computed
# by a chain of Constant/ConstantOfShape/Concat/Reshape/Slice/Transpose/Cast nodes that the
# exporter's constant folding leaves alone. The *_folded variants are the same models with that
# integer chain evaluated by this script into one Constant (what onnx-simplifier would give).

add("pad_conv_asym", lambda: Lambda(lambda s, x: s.conv(F.pad(x, (1, 0, 2, 1))),
                                    conv=nn.Conv2d(4, 8, 3)),
    X, ["Pad", "Conv"],
    "F.pad(x, (left 1, right 0, top 2, bottom 1)) then Conv pads 0: Pad foldable into Conv "
    "pads [2,1,1,0] (asymmetric); raw torch export with the pads-computing Constant chain",
    opsets=(11, 13))
add("pad_conv_asym_folded", lambda: Lambda(lambda s, x: s.conv(F.pad(x, (1, 0, 2, 1))),
                                           conv=nn.Conv2d(4, 8, 3)),
    X, ["Pad", "Conv"],
    "as pad_conv_asym, with the pads chain folded into one Constant (Pad + Conv only)",
    edit="fold_int_constants")
add("pad_conv_sym", lambda: seq(nn.ZeroPad2d(1), nn.Conv2d(4, 8, 3, stride=2)), X, ["Pad", "Conv"],
    "nn.ZeroPad2d(1) (Pad with an explicit constant_value 0 input) then Conv strides 2 pads 0; "
    "raw export", opsets=(13, 17))
add("pad_conv_sym_folded", lambda: seq(nn.ZeroPad2d(1), nn.Conv2d(4, 8, 3, stride=2)), X,
    ["Pad", "Conv"], "as pad_conv_sym with the pads chain folded into one Constant",
    edit="fold_int_constants")
add("pad_conv_into_padded_conv", lambda: seq(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(4, 8, 3, padding=1)),
    X, ["Pad", "Conv"],
    "ZeroPad2d (right 1, bottom 1) before a Conv that already has pads 1: folded pads add up "
    "to [1,1,2,2]", edit="fold_int_constants")
add("pad_maxpool", lambda: Lambda(lambda s, x: s.pool(F.pad(x, (1, 1, 1, 1))),
                                  pool=nn.MaxPool2d(3, 2)),
    X, ["Pad", "MaxPool"],
    "F.pad zero 1 then MaxPool 3x3 s2: NOT foldable into MaxPool pads (MaxPool pads with -inf, "
    "the input has negative values), so a real zero Pad is needed; raw export", opsets=(11, 13))
add("pad_maxpool_folded", lambda: Lambda(lambda s, x: s.pool(F.pad(x, (1, 1, 1, 1))),
                                         pool=nn.MaxPool2d(3, 2)),
    X, ["Pad", "MaxPool"], "as pad_maxpool with the pads chain folded into one Constant",
    edit="fold_int_constants")
add("pad_output", lambda: Lambda(lambda s, x: F.pad(x, (2, 1, 0, 3))), X, ["Pad"],
    "zero Pad as the graph output (nothing to fold into), pads chain folded into one Constant",
    edit="fold_int_constants")

# ---- BatchNormalization ----------------------------------------------------------------------

add("bn", lambda: nn.BatchNorm2d(4), X, ["BatchNormalization"],
    "standalone BatchNormalization on the input (do_constant_folding=False, training=EVAL)",
    opsets=(11, 13, 15, 17), fold=False, training=EVAL)
add("conv_bn_relu", lambda: seq(nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                nn.ReLU()),
    X, ["Conv", "BatchNormalization", "Relu"],
    "Conv(no bias) -> BatchNormalization -> Relu kept as separate nodes (do_constant_folding=False, "
    "training=PRESERVE with the model in eval; training=EVAL would fuse BN into the Conv)",
    opsets=(11, 13, 17), fold=False, training=PRESERVE)
add("conv_bias_bn", lambda: seq(nn.Conv2d(4, 8, 3, stride=2), nn.BatchNorm2d(8, eps=1e-3)),
    X, ["Conv", "BatchNormalization"],
    "Conv with bias -> BatchNormalization eps 1e-3 (fold must combine bias and BN shift)",
    fold=False, training=PRESERVE)
add("conv_bn_relu_exporter_fused",
    lambda: seq(nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU()),
    X, ["Conv", "Relu"],
    "same model as conv_bn_relu with the default export (folding, EVAL): BN already fused into "
    "the Conv by torch")
add("conv_relu_bn", lambda: seq(nn.Conv2d(4, 8, 3), nn.ReLU(), nn.BatchNorm2d(8)),
    X, ["Conv", "Relu", "BatchNormalization"],
    "BatchNormalization after a Relu (cannot be folded into the Conv), default export")

# ---- Relu ----------------------------------------------------------------------------------

add("relu", lambda: nn.ReLU(), X, ["Relu"], "Relu", opsets=(11, 13, 17))

# ---- MaxPool -------------------------------------------------------------------------------

add("maxpool", lambda: nn.MaxPool2d(2, 2), X, ["MaxPool"], "MaxPool 2x2 strides 2 (floor: 9 -> 4)",
    opsets=(11, 13, 17))
add("maxpool_k3s2p1", lambda: nn.MaxPool2d(3, 2, 1), X, ["MaxPool"],
    "MaxPool 3x3 strides 2 pads 1 (ResNet stem)", opsets=(11, 13))
add("maxpool_default_stride", lambda: nn.MaxPool2d(3), X, ["MaxPool"],
    "MaxPool 3x3, stride defaults to kernel")
add("maxpool_ceil", lambda: nn.MaxPool2d(3, 2, ceil_mode=True), (1, 4, 10, 10), ["MaxPool"],
    "MaxPool 3x3 s2 ceil_mode=1 (10 -> 5, floor would give 4)", opsets=(11, 13, 17))
add("maxpool_ceil_pad", lambda: nn.MaxPool2d(3, 2, 1, ceil_mode=True), (1, 4, 10, 10), ["MaxPool"],
    "MaxPool 3x3 s2 pads 1 ceil_mode=1")
add("maxpool_ceil_edge", lambda: nn.MaxPool2d(2, 2, 1, ceil_mode=True), (1, 4, 5, 5), ["MaxPool"],
    "MaxPool 2x2 s2 pads 1 ceil_mode=1 on 5x5: PyTorch drops the last window because it would "
    "start in the right padding, output 3x3; the ONNX (opset<19) formula gives 4x4",
    note="ONNX graph declares output 1x4x4x4 but PyTorch gives 1x4x3x3: follow PyTorch's rule "
         "(a ceil_mode window must start inside the input or the left padding)")
add("maxpool_dilation", lambda: nn.MaxPool2d(3, 1, 1, dilation=2), X, ["MaxPool"],
    "MaxPool 3x3 dilations 2 pads 1 (effective window 5x5)", opsets=(11, 17))
add("maxpool_rect", lambda: nn.MaxPool2d((2, 3), (1, 2), (1, 0)), X, ["MaxPool"],
    "MaxPool kernel 2x3 strides (1,2) pads (1,0)")

# ---- AveragePool ----------------------------------------------------------------------------
# torch exports count_include_pad=True (the default!) as Pad(zero, pads from a Constant) +
# AveragePool(pads 0), even when padding is 0; count_include_pad=False keeps pads on the
# AveragePool node.

add("avgpool", lambda: nn.AvgPool2d(2, 2), X, ["AveragePool"],
    "AvgPool2d 2x2 s2 (count_include_pad=True default -> Pad with zero pads + AveragePool)",
    opsets=(11, 13, 17))
add("avgpool_pad_include", lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=True), X,
    ["Pad", "AveragePool"],
    "AvgPool2d 3x3 s2 pad 1 count_include_pad=True -> Pad(1) + AveragePool(pads 0); fold back as "
    "AveragePool pads 1 count_include_pad=1", opsets=(11, 13))
add("avgpool_pad_exclude", lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), X,
    ["AveragePool"], "AveragePool 3x3 s2 pads 1 count_include_pad=0", opsets=(11, 13, 17))
add("avgpool_ceil_exclude", lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
    (1, 4, 10, 10), ["AveragePool"], "AveragePool 3x3 s2 pads 1 ceil_mode=1 count_include_pad=0")
add("avgpool_ceil_include", lambda: nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=True),
    (1, 4, 10, 10), ["Pad", "AveragePool"],
    "AvgPool2d 3x3 s2 pad 1 ceil_mode count_include_pad=True -> Pad(1) + AveragePool ceil_mode=1 "
    "(windows past the padded edge divide by the clipped size)")
add("avgpool_ceil_nopad", lambda: nn.AvgPool2d(3, 2, ceil_mode=True, count_include_pad=False),
    (1, 4, 10, 10), ["AveragePool"], "AveragePool 3x3 s2 ceil_mode=1, no pads: last window clipped")
add("avgpool_ceil_edge", lambda: nn.AvgPool2d(2, 2, 1, ceil_mode=True, count_include_pad=False),
    (1, 4, 5, 5), ["AveragePool"],
    "AveragePool 2x2 s2 pads 1 ceil_mode=1 count_include_pad=0 on 5x5: PyTorch output 3x3, "
    "ONNX (opset<19) formula 4x4",
    note="ONNX graph declares output 1x4x4x4 but PyTorch gives 1x4x3x3: follow PyTorch's rule")
add("avgpool_rect", lambda: nn.AvgPool2d((3, 2), (2, 1), (1, 0), count_include_pad=False), X,
    ["AveragePool"], "AveragePool kernel 3x2 strides (2,1) pads (1,0) count_include_pad=0")

# ---- GlobalAveragePool / Flatten / Gemm / MatMul -------------------------------------------

add("gap", lambda: nn.AdaptiveAvgPool2d(1), X, ["GlobalAveragePool"],
    "AdaptiveAvgPool2d(1) -> GlobalAveragePool", opsets=(11, 13, 17))
add("flatten", lambda: nn.Flatten(1), (1, 4, 3, 3), ["Flatten"], "torch.flatten(x, 1) -> Flatten axis 1",
    opsets=(11, 13, 17))
add("classifier_head", lambda: seq(nn.Conv2d(4, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten(1), nn.Dropout(0.2), nn.Linear(8, 5)),
    X, ["Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"],
    "Conv -> Relu -> GlobalAveragePool -> Flatten -> (Dropout, removed) -> Gemm: the ResNet/"
    "GoogLeNet head", opsets=(11, 13))
add("linear", lambda: nn.Linear(36, 10), (1, 36), ["Gemm"],
    "nn.Linear -> Gemm transB=1 alpha=beta=1 with bias", opsets=(11, 13, 17))
add("linear_batch3", lambda: nn.Linear(36, 10), (3, 36), ["Gemm"], "nn.Linear on a 3x36 input -> Gemm")
add("conv_flatten_linear", lambda: seq(nn.Conv2d(4, 2, 3, stride=2), nn.Flatten(1), nn.Linear(32, 6)),
    X, ["Conv", "Flatten", "Gemm"], "Conv -> Flatten(1) -> Gemm: Flatten of a real 4-D tensor")


class AddMM(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(36, 10) * 0.2)
        self.bias = nn.Parameter(torch.randn(10))

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight, beta=0.5, alpha=2.0)


class AddMMTransA(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(10, 36) * 0.2)
        self.bias = nn.Parameter(torch.randn(10))

    def forward(self, x):
        return torch.addmm(self.bias, x.t(), self.weight.t(), beta=1.0, alpha=1.0)


add("gemm_alpha_beta", AddMM, (1, 36), ["Gemm"],
    "torch.addmm(b, x, W, beta=0.5, alpha=2.0) -> Gemm alpha=2 beta=0.5 transB=0 (W is 36x10)",
    opsets=(11, 13))
add("gemm_transA", AddMMTransA, (36, 1), ["Gemm"],
    "torch.addmm(b, x.t(), W.t()) with x 36x1: the exporter fuses both Transposes -> Gemm "
    "transA=1 transB=1 (the activation is A)")
add("matmul_buffer", lambda: Lambda(lambda s, x: x @ s.w, w=torch.randn(36, 10) * 0.2), (1, 36),
    ["MatMul"], "x @ W with W a registered buffer (36x10) -> MatMul with an initializer",
    opsets=(11, 13, 17))
add("matmul_param", lambda: Lambda(lambda s, x: torch.matmul(x, s.w), w=nn.Parameter(torch.randn(36, 12) * 0.2)),
    (2, 36), ["MatMul"], "torch.matmul(x, W) with W a parameter, 2x36 input")
add("linear_nobias", lambda: nn.Linear(36, 10, bias=False), (1, 36), ["MatMul"],
    "nn.Linear(bias=False) -> MatMul with the transposed weight as an initializer (onnx::MatMul_N, "
    "not the state_dict name)")

# ---- Add / Concat / Identity / Dropout / Constant / Reshape -----------------------------------

add("add_residual", lambda: Lambda(lambda s, x: F.relu(s.conv(x) + x), conv=nn.Conv2d(4, 4, 3, padding=1)),
    X, ["Conv", "Add", "Relu"], "relu(conv(x) + x): residual Add then Relu", opsets=(11, 13, 17))
add("add_branches", lambda: Lambda(lambda s, x: s.a(x) + s.b(F.relu(x)),
                                   a=nn.Conv2d(4, 6, 3, padding=1), b=nn.Conv2d(4, 6, 1)),
    X, ["Conv", "Relu", "Add"], "conv3x3(x) + conv1x1(relu(x)): Add of two branches")
add("add_input_input", lambda: Lambda(lambda s, x: x + F.relu(x)), X, ["Relu", "Add"],
    "x + relu(x): Add with the graph input as an operand")
add("concat_channel", lambda: Lambda(lambda s, x: torch.cat((s.a(x), s.b(x)), 1),
                                     a=nn.Conv2d(4, 3, 3, padding=1), b=nn.Conv2d(4, 5, 1)),
    X, ["Conv", "Concat"], "Concat axis 1 of two convs with 3 and 5 channels", opsets=(11, 13, 17))
add("concat_three", lambda: Lambda(lambda s, x: torch.cat((F.relu(x), s.a(x), x), 1),
                                   a=nn.Conv2d(4, 2, 3, padding=1)),
    X, ["Relu", "Conv", "Concat"], "Concat axis 1 of three values, one of them the graph input")
add("concat_axis2", lambda: Lambda(lambda s, x: torch.cat((x, F.relu(x)), 2)), X, ["Relu", "Concat"],
    "Concat axis 2 (height)")
add("concat_axis_neg", lambda: Lambda(lambda s, x: torch.cat((x, F.relu(x)), -1)), X, ["Relu", "Concat"],
    "Concat axis -1 (negative axis kept as -1 by the exporter)")


class DedupConvs(nn.Module):
    """Two convs with identical weight tensors: the exporter deduplicates the initializer and
    emits Identity(a.weight) -> b.weight."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 4, 3, padding=1)
        self.b = nn.Conv2d(4, 4, 3, padding=1)
        with torch.no_grad():
            self.b.weight.copy_(self.a.weight)

    def forward(self, x):
        return torch.cat((self.a(x), self.b(F.relu(x))), 1)


add("identity_dedup", DedupConvs, X, ["Identity", "Conv"],
    "two convs whose weights are equal: torch dedups the initializer, b.weight = Identity(a.weight)",
    opsets=(13, 17))
add("identity_output", lambda: nn.Dropout(0.5), X, ["Identity"],
    "a model that is only an eval Dropout: exported as Identity(input) -> output")
add("dropout", lambda: seq(nn.Conv2d(4, 8, 3), nn.Dropout(0.3), nn.ReLU()), X, ["Dropout"],
    "Conv -> Dropout -> Relu as torch exports it in eval: the Dropout is removed")
add("dropout_edited", lambda: seq(nn.Conv2d(4, 8, 3), nn.Dropout(0.3), nn.ReLU()), X,
    ["Conv", "Dropout", "Relu"],
    "Conv -> Dropout -> Relu, with the Dropout node inserted into the exported graph by this script "
    "(torch removes it); opset >= 12 form: Dropout(data, ratio=Constant 0.3), no training_mode",
    opsets=(13, 17), edit="insert_dropout")
add("dropout_edited_op11", lambda: seq(nn.Conv2d(4, 8, 3), nn.Dropout(0.3), nn.ReLU()), X,
    ["Conv", "Dropout", "Relu"],
    "as dropout_edited at opset 11: Dropout with the ratio attribute", opsets=(11,),
    edit="insert_dropout", base="dropout_edited")
add("const_add", lambda: Lambda(lambda s, x: x + torch.tensor([0.25, 0.5, -1.0, 2.0]).view(1, 4, 1, 1)),
    X, ["Constant", "Add"], "x + a tensor built in forward -> Add with a Constant node (1x4x1x1 broadcast)",
    opsets=(11, 13, 17))
add("const_add_scalar", lambda: Lambda(lambda s, x: F.relu(x) + 1.5), X, ["Relu", "Constant", "Add"],
    "relu(x) + 1.5 -> Add with a scalar (rank-0) Constant")
add("reshape_flat", lambda: Lambda(lambda s, x: x.reshape(1, -1)), X, ["Constant", "Reshape"],
    "x.reshape(1, -1) -> Reshape with shape Constant [1, -1]", opsets=(11, 13, 17))
add("reshape_view3d", lambda: Lambda(lambda s, x: x.view(1, x.shape[1], x.shape[2] * x.shape[3])), X,
    ["Constant", "Reshape"], "x.view(1, C, H*W) -> Reshape with shape Constant [1, 4, 81]")
add("reshape_view_size0", lambda: seq(nn.Conv2d(4, 2, 3, stride=2),
                                      Lambda(lambda s, x: x.view(x.size(0), -1)), nn.Linear(32, 5)),
    X, ["Conv", "Constant", "Reshape", "Gemm"],
    "Conv -> x.view(x.size(0), -1) -> Linear (classic classifier flatten)")
add("reshape_view_size0_nofold", lambda: Lambda(lambda s, x: x.view(x.size(0), -1)), X,
    ["Reshape"],
    "x.view(x.size(0), -1) exported without constant folding at opset 11: the shape comes from "
    "Constant -> Unsqueeze -> Concat (an integer constant chain to evaluate)",
    opsets=(11,), fold=False)
add("reshape_4d", lambda: seq(nn.Conv2d(4, 8, 3), Lambda(lambda s, x: x.reshape(1, 2, 28, 7))), X,
    ["Conv", "Constant", "Reshape"], "Conv -> Reshape to another 4-D shape [1, 2, 28, 7]")

# ---- Softmax / Clip --------------------------------------------------------------------------

add("softmax_lastdim", lambda: nn.Softmax(dim=-1), (1, 4, 5, 6), ["Softmax"],
    "softmax over the last dim of a 4-D input: opset 11 Softmax axis=3 (flatten-to-2D semantics, "
    "same result for the last axis), opset 13+ axis=-1... as exported", opsets=(11, 13, 17))
add("softmax_dim1", lambda: nn.Softmax(dim=1), (1, 4, 5, 6), ["Softmax"],
    "softmax over channels of a 4-D input (opset 13 Softmax axis=1, per-element semantics)",
    opsets=(13, 17))
add("softmax_2d", lambda: seq(nn.Linear(36, 10), nn.Softmax(dim=1)), (1, 36), ["Gemm", "Softmax"],
    "Linear -> Softmax(dim=1) on a 2-D tensor", opsets=(11, 13))
add("log_softmax_lastdim", lambda: seq(nn.Linear(6, 10), nn.LogSoftmax(dim=-1)), (1, 4, 5, 6),
    ["MatMul", "LogSoftmax"], "Linear -> nn.LogSoftmax(dim=-1) (a classifier's log-probabilities): "
    "LogSoftmax axis 3 at opset 11 (flatten-to-2D, same for the last axis), -1 from 13",
    opsets=(11, 13, 17), input_scale=4.0)
add("log_softmax_dim1", lambda: nn.LogSoftmax(dim=1), (1, 4, 5, 6), ["LogSoftmax"],
    "nn.LogSoftmax(dim=1) over the channels (per-element axis semantics from opset 13)",
    opsets=(13, 17), input_scale=4.0)
add("relu6", lambda: Lambda(lambda s, x: F.relu6(x)), X, ["Relu", "Constant", "Clip"],
    "F.relu6 -> Relu + Clip(min=Constant 0, max=Constant 6) (min/max as inputs from opset 11)",
    opsets=(11, 13, 17), input_scale=4.0)
add("clamp_min0", lambda: Lambda(lambda s, x: torch.clamp(x, min=0)), X, ["Constant", "Clip"],
    "torch.clamp(x, min=0) -> Clip(x, min=Constant 0, max='' absent) == Relu",
    opsets=(11, 13, 17))
add("hardtanh_0_6", lambda: nn.Hardtanh(0.0, 6.0), X, ["Constant", "Clip"],
    "Hardtanh(0, 6) -> Clip(min=0, max=6) without the Relu == ReLU6", opsets=(11, 13, 17),
    input_scale=4.0)
add("leaky_relu", lambda: nn.LeakyReLU(), X, ["LeakyRelu"],
    "nn.LeakyReLU() -> LeakyRelu with PyTorch's default alpha 0.01", opsets=(11, 13, 17),
    input_scale=4.0)
add("conv_leaky_relu", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.LeakyReLU(0.2)), X,
    ["Conv", "LeakyRelu"], "Conv -> nn.LeakyReLU(0.2) (the YOLO / GAN activation)")
add("conv_relu6", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU6()), X,
    ["Conv", "Constant", "Clip"],
    "Conv -> nn.ReLU6 (a Hardtanh: exported as Clip(0, 6) alone, no Relu; MobileNet epilogue)",
    input_scale=4.0)

# ---- activations and elementwise arithmetic ------------------------------------------------

def prelu(channels):
    p = nn.PReLU(channels)
    with torch.no_grad():
        p.weight.uniform_(0.0, 0.5)  # per-channel slopes that differ (the default is 0.25 for all)
    return p


class SqueezeExcitation(nn.Module):
    """torchvision's SqueezeExcitation (MobileNetV3 / EfficientNet): pool -> fc1 -> act ->
    fc2 -> sigmoid (or hardsigmoid) -> a channel scale of the input."""

    def __init__(self, channels=8, squeeze=4, scale=nn.Sigmoid):
        super().__init__()
        self.conv = nn.Conv2d(4, channels, 3, padding=1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.scale = scale()

    def forward(self, x):
        y = F.silu(self.conv(x))
        s = self.scale(self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(y, 1)))))
        return y * s


ACT_OPSETS = (11, 13, 17)
add("sigmoid", nn.Sigmoid, X, ["Sigmoid"], "nn.Sigmoid", opsets=ACT_OPSETS, input_scale=4.0)
add("tanh", nn.Tanh, X, ["Tanh"], "nn.Tanh", opsets=ACT_OPSETS, input_scale=3.0)
add("silu", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.SiLU()), X, ["Conv", "Sigmoid", "Mul"],
    "Conv -> nn.SiLU: exported as x * Sigmoid(x) (EfficientNet's activation)", opsets=ACT_OPSETS,
    input_scale=3.0)
add("hardswish", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.Hardswish()), X,
    ["Conv", "HardSigmoid", "Mul", "HardSwish"],
    "Conv -> nn.Hardswish (MobileNetV3): HardSigmoid(1/6, 1/2) * x before opset 14, HardSwish from 14",
    opsets=(11, 13, 14, 17), input_scale=4.0)
add("hardsigmoid", nn.Hardsigmoid, X, ["HardSigmoid"], "nn.Hardsigmoid -> HardSigmoid alpha 1/6",
    opsets=ACT_OPSETS, input_scale=4.0)
add("gelu", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.GELU()), X, ["Conv", "Div", "Erf", "Add", "Mul"],
    "Conv -> nn.GELU: exported as x * 0.5 * (1 + Erf(x / sqrt 2)) (ConvNeXt's activation)",
    opsets=ACT_OPSETS, input_scale=3.0)
add("gelu_tanh", lambda: Lambda(lambda s, x: F.gelu(x, approximate="tanh")), X,
    ["Mul", "Pow", "Add", "Tanh"], "F.gelu(approximate='tanh'): Pow, Mul, Add and Tanh of constants",
    opsets=(13, 17), input_scale=3.0)
add("elu_selu_softplus", lambda: seq(nn.ELU(0.7), nn.Conv2d(4, 4, 1), nn.SELU(), nn.Softplus()), X,
    ["Elu", "Conv", "Selu", "Softplus"], "nn.ELU(0.7) -> 1x1 Conv -> nn.SELU -> nn.Softplus",
    opsets=ACT_OPSETS, input_scale=3.0)
add("prelu", lambda: seq(nn.Conv2d(4, 6, 3, padding=1), prelu(6)), X, ["Conv", "PRelu"],
    "Conv -> nn.PReLU(6) with per-channel slopes: PRelu with a [6, 1, 1] slope", opsets=ACT_OPSETS,
    input_scale=3.0)
add("squeeze_excitation", SqueezeExcitation, X,
    ["Conv", "Sigmoid", "Mul", "GlobalAveragePool", "Relu"],
    "torchvision-style squeeze-excitation: SiLU conv, pool, two 1x1 convs, Sigmoid, channel Mul",
    opsets=ACT_OPSETS)
add("squeeze_excitation_hard", lambda: SqueezeExcitation(scale=nn.Hardsigmoid), X,
    ["Conv", "HardSigmoid", "Mul", "GlobalAveragePool", "Relu"],
    "MobileNetV3's squeeze-excitation: Hardsigmoid scale", opsets=(13, 17))
add("arithmetic", lambda: Lambda(lambda s, x: (x / 2.0) ** 2 - 3.0 * x + torch.exp(-x.abs()) - (1.5 - x)),
    X, ["Div", "Pow", "Mul", "Sub", "Exp", "Neg", "Abs", "Add"],
    "Div, Pow, Mul and Sub with scalar constants on either side, Exp(Neg(Abs(x)))", opsets=ACT_OPSETS)
add("maximum_minimum", lambda: Lambda(lambda s, x: torch.maximum(s.a(x), s.b(x)) + torch.minimum(x, s.a(x) * 0.5),
                                      a=nn.Conv2d(4, 4, 3, padding=1), b=nn.Conv2d(4, 4, 3, padding=1)),
    X, ["Conv", "Max", "Min", "Mul", "Add"], "torch.maximum / torch.minimum of computed tensors",
    opsets=(13, 17))
add("rsqrt_log", lambda: Lambda(lambda s, x: torch.rsqrt(x.abs() + 1.0) + torch.log(x.abs() + 0.5) + x.reciprocal().clamp(-4, 4)),
    X, ["Abs", "Add", "Sqrt", "Reciprocal", "Div", "Log", "Clip"], "rsqrt, log, reciprocal, clamp",
    opsets=(13, 17))


add("mean_hw", lambda: seq(nn.Conv2d(4, 8, 3), Lambda(lambda s, x: x.mean([2, 3]))), X,
    ["Conv", "ReduceMean"], "x.mean([2, 3]) (MNASNet's head): ReduceMean keepdims=0",
    opsets=(11, 13, 17))
add("reductions", lambda: Lambda(lambda s, x: x.sum(1, keepdim=True) * x.amax(dim=(2, 3), keepdim=True)
                                 - x.amin(dim=-1, keepdim=True) + x.mean(dim=1, keepdim=True)),
    X, ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "Mul", "Sub", "Add"],
    "sum over C, amax over H and W, amin over W, mean over C, keeping dims", opsets=(11, 13, 17))
add("adaptive_max_pool", lambda: seq(nn.Conv2d(4, 8, 3), nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(8, 3)),
    X, ["Conv", "GlobalMaxPool", "Flatten", "Gemm"], "AdaptiveMaxPool2d(1) -> GlobalMaxPool",
    opsets=(11, 13, 17))


class ChannelShuffle(nn.Module):
    """ShuffleNetV2's unit: split the channels, a conv on one half, concat, shuffle."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        a, b = x.chunk(2, dim=1)
        y = torch.cat((a, F.relu(self.conv(b))), dim=1)
        n, c, h, w = y.shape
        return y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)


add("channel_shuffle", lambda: seq(nn.Conv2d(4, 8, 1), ChannelShuffle()), X,
    ["Conv", "Split", "Slice", "Concat", "Reshape", "Transpose"],
    "ShuffleNetV2 unit: x.chunk(2, dim=1) (Split or Slice with computed shape arithmetic), concat, "
    "view/transpose/reshape channel shuffle", opsets=(11, 13, 17))
add("strided_slices", lambda: Lambda(lambda s, x: x[:, 1:3, ::2, -5:] + x[:, :2, ::2, 2:7].flip(-1)),
    X, ["Slice", "Add"], "x[:, 1:3, ::2, -5:] + a flipped window: Slice with steps and negative starts",
    opsets=(11, 13, 17))


# ---- normalisations: LRN, InstanceNormalization, LayerNormalization ---------------------------

class LRNFunction(torch.autograd.Function):
    """F.local_response_norm exported as one ONNX LRN node. torch 1.13 has no LRN symbolic: it
    exports nn.LocalResponseNorm as its decomposition (5-D Pad, 3-D AveragePool, an If), so the
    models call the same function through this Function, whose symbolic emits LRN. PyTorch's
    window for odd sizes is ONNX's; for even sizes the two differ, hence odd sizes only."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        return F.local_response_norm(x, size, alpha, beta, k)

    @staticmethod
    def symbolic(g, x, size, alpha, beta, k):
        return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=k)


class LRN(nn.Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        assert size % 2 == 1, "even LRN windows differ between PyTorch and ONNX"
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x):
        return LRNFunction.apply(x, self.size, self.alpha, self.beta, self.k)


def affine(norm):
    """A normalisation layer with random scale and shift (the defaults, ones and zeros, would
    let a swapped or ignored weight pass)."""
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        if norm.bias is not None:
            norm.bias.uniform_(-0.5, 0.5)
    return norm


add("lrn", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), LRN(5, alpha=1e-4, beta=0.75, k=2.0)),
    X, ["Conv", "Relu", "LRN"],
    "AlexNet's Conv -> Relu -> LRN(size 5, alpha 1e-4, beta 0.75, bias 2); exported through a "
    "torch.autograd.Function whose symbolic emits LRN (torch 1.13 decomposes nn.LocalResponseNorm)",
    opsets=(11, 13, 17), input_scale=10.0)
add("lrn_wide", lambda: LRN(3, alpha=0.5, beta=0.6, k=1.0), X, ["LRN"],
    "LRN size 3 alpha 0.5 beta 0.6 directly on the input: the window's squares dominate",
    opsets=(13,), input_scale=3.0)
add("instance_norm", lambda: seq(nn.Conv2d(4, 6, 3, padding=1), affine(nn.InstanceNorm2d(6, affine=True)),
                                 nn.ReLU()),
    X, ["Conv", "InstanceNormalization", "Relu"],
    "Conv -> nn.InstanceNorm2d(affine=True, random scale and shift) -> Relu (style-transfer block)",
    opsets=(11, 13, 17))
add("instance_norm_plain", lambda: nn.InstanceNorm2d(4), X, ["InstanceNormalization"],
    "nn.InstanceNorm2d without affine: exported with Constant ones and zeros as scale and B")
add("layer_norm_op13", lambda: affine(nn.LayerNorm(9)), X,
    ["ReduceMean", "Sub", "Pow", "Add", "Sqrt", "Div", "Mul"],
    "nn.LayerNorm(9) over the last dim at opset 13: torch decomposes it into ReduceMean, Sub, Pow, "
    "ReduceMean, Add, Sqrt, Div, Mul, Add", opsets=(13,), base="layer_norm")
add("layer_norm_op17", lambda: affine(nn.LayerNorm(9)), X, ["LayerNormalization"],
    "nn.LayerNorm(9) over the last dim at opset 17: one LayerNormalization (axis -1)", opsets=(17,),
    base="layer_norm")
add("layer_norm_hw", lambda: affine(nn.LayerNorm([9, 9], eps=1e-3)), X, ["LayerNormalization"],
    "nn.LayerNorm([9, 9], eps 1e-3): LayerNormalization axis -2, 9x9 scale and bias", opsets=(17,))


class LayerNorm2d(nn.Module):
    """A LayerNorm over the channels of NCHW, as torchvision's ConvNeXt writes it: channels last,
    F.layer_norm, channels first again."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.norm = affine(nn.LayerNorm(channels, eps=eps))

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ChannelsFirstLayerNorm(nn.Module):
    """ConvNeXt's reference LayerNorm for channels_first data, written out (mean, variance)."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels).uniform_(0.5, 1.5))
        self.bias = nn.Parameter(torch.empty(channels).uniform_(-0.5, 0.5))
        self.eps = eps

    def forward(self, x):
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    """torchvision's ConvNeXt block (layer scale, no stochastic depth): depthwise 7x7 conv,
    channels-last LayerNorm, Linear 4x up, GELU, Linear down, scale, residual."""

    def __init__(self, dim=4):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = affine(nn.LayerNorm(dim, eps=1e-6))
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.empty(dim).uniform_(0.5, 1.0))

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.pwconv2(F.gelu(self.pwconv1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


for _opset, _ops in ((13, ["ReduceMean", "Sqrt", "Div"]), (17, ["LayerNormalization"])):
    add(f"layer_norm2d_op{_opset}", lambda: seq(nn.Conv2d(4, 6, 3, padding=1), LayerNorm2d(6)), X,
        ["Conv", "Transpose"] + _ops,
        "torchvision ConvNeXt's LayerNorm2d: permute to channels last, LayerNorm(C, eps 1e-6), "
        "permute back (LayerNormalization at 17, the ReduceMean decomposition at 13)",
        opsets=(_opset,), base="layer_norm2d")
add("layer_norm_channels_first", lambda: seq(nn.Conv2d(4, 6, 3, padding=1), ChannelsFirstLayerNorm(6)), X,
    ["Conv", "ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Mul", "Add"],
    "ConvNeXt's channels_first LayerNorm written out: mean and variance over C, weight[:, None, None]",
    opsets=(13, 17))
for _opset, _ops in ((13, ["ReduceMean", "Sqrt", "Div"]), (17, ["LayerNormalization"])):
    add(f"convnext_block_op{_opset}", ConvNeXtBlock, X,
        ["Conv", "Transpose", "MatMul", "Add", "Mul", "Erf"] + _ops,
        "a ConvNeXt block: depthwise 7x7, channels-last LayerNorm, Linear 4->16 (MatMul on a 4-D "
        "tensor), GELU, Linear 16->4, layer scale, residual", opsets=(_opset,), base="convnext_block")

# ---- MatMul and Gemm with computed operands ----------------------------------------------------


class SelfAttention(nn.Module):
    """Non-local / self-attention over the pixels: both operands of both products are computed."""

    def __init__(self, channels=4):
        super().__init__()
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        n, c, h, w = x.shape
        q = self.q(x).reshape(n, c, h * w).transpose(1, 2)
        k = self.k(x).reshape(n, c, h * w)
        v = self.v(x).reshape(n, c, h * w)
        a = torch.softmax(q @ k / 2.0, dim=-1)
        return (v @ a.transpose(1, 2)).reshape(n, c, h, w) + x


add("self_attention", SelfAttention, X, ["Conv", "Reshape", "Transpose", "MatMul", "Softmax"],
    "self-attention over 81 pixels: softmax(q^T k / 2) and v a^T, MatMul of two computed tensors",
    opsets=(11, 13, 17))
add("matmul_broadcast", lambda: Lambda(lambda s, x: torch.matmul(x, x.transpose(-1, -2)) +
                                        torch.matmul(x[:, :1], x) * 0.5),
    X, ["MatMul", "Transpose", "Slice"],
    "x @ x^T per channel (batched), and x[:, :1] @ x: a batch dim broadcast from 1 to 4")
add("matmul_constant_operands", lambda: Lambda(lambda s, x: torch.matmul(s.m, x) @ s.v,
                                               m=nn.Parameter(torch.randn(5, 9) * 0.3),
                                               v=nn.Parameter(torch.randn(9) * 0.3)),
    X, ["MatMul"],
    "m @ x with a constant 5x9 A broadcast over the batch dims, then @ v with a constant 1-D B "
    "(a matrix-vector product)")


class AddMMComputed(nn.Module):
    """torch.addmm of computed tensors: the exporter fuses b.t() into Gemm's transB."""

    def forward(self, x):
        a, b = F.relu(x), torch.tanh(x)
        return torch.addmm(x[:, :1], a, b.t(), beta=0.5, alpha=2.0)


class AddMMTransAComputed(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(4))

    def forward(self, x):
        return torch.addmm(self.bias, x.t(), torch.sigmoid(x))


add("gemm_computed", AddMMComputed, (6, 4), ["Gemm", "Relu", "Tanh", "Slice"],
    "torch.addmm(x[:, :1], relu(x), tanh(x).t(), beta=0.5, alpha=2): Gemm transB=1 with computed A, "
    "B and C (C broadcast over columns)", opsets=(11, 13, 17))
add("gemm_computed_transA", AddMMTransAComputed, (6, 4), ["Gemm", "Sigmoid"],
    "torch.addmm(bias, x.t(), sigmoid(x)): Gemm transA=1 with a computed B and a constant C",
    opsets=(11, 13))

# ---- padding modes, tiling, resampling and block rearrangement -----------------------------

add("pad_reflect", lambda: seq(nn.ReflectionPad2d((1, 2, 3, 1)), nn.Conv2d(4, 6, 3)), X,
    ["Pad", "Conv"], "nn.ReflectionPad2d((1, 2, 3, 1)) -> Conv (style transfer, pix2pix): Pad "
    "reflect, pads an attribute at opset 9, an input from 11", opsets=(9, 11, 13))
add("pad_replicate", lambda: seq(nn.ReplicationPad2d((2, 0, 1, 3)), nn.Conv2d(4, 6, 3)), X,
    ["Pad", "Conv"], "nn.ReplicationPad2d((2, 0, 1, 3)) -> Conv: Pad edge", opsets=(9, 11, 13))
add("pad_constant_value", lambda: seq(nn.ConstantPad2d((1, 1, 2, 0), 0.5), nn.Conv2d(4, 6, 3)), X,
    ["Pad", "Conv"], "nn.ConstantPad2d(value 0.5) -> Conv: a non-zero fill is not conv padding",
    opsets=(9, 11, 13))
add("pad_crop", lambda: Lambda(lambda s, x: F.pad(F.relu(x), (-1, 2, 0, -2), value=-1.0)), X,
    ["Relu", "Pad"], "F.pad with negative pads (cropping) and a fill of -1", opsets=(11, 13))
add("tile_repeat", lambda: Lambda(lambda s, x: F.relu(x).repeat(1, 2, 1, 3) + 1.0), X,
    ["Relu", "Expand", "Tile", "Add"], "relu(x).repeat(1, 2, 1, 3): Expand (to its own shape) and Tile "
    "of a computed tensor, the shapes from ConstantOfShape", opsets=(11, 13))


class UpsampleConcat(nn.Module):
    """An FPN / U-Net decoder step: a coarse branch upsampled (nearest x2) and concatenated with
    the skip connection, then a conv."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(4, 6, 3, stride=2, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fuse = nn.Conv2d(10, 4, 3, padding=1)

    def forward(self, x):
        return self.fuse(torch.cat((x, self.up(F.relu(self.down(x)))), dim=1))


RESIZE_OPSETS = (11, 13, 17)
X8 = (1, 4, 8, 8)  # even sides, so the U-Net step's halves line up
add("upsample_nearest_op9", lambda: nn.Upsample(scale_factor=2, mode="nearest"), X, ["Upsample"],
    "nn.Upsample(scale_factor=2) at opset 9: Upsample with a scales input", opsets=(9,),
    base="upsample_nearest")
add("upsample_nearest", lambda: nn.Upsample(scale_factor=2, mode="nearest"), X, ["Resize"],
    "nn.Upsample(scale_factor=2): Resize nearest (asymmetric, floor) with scales", opsets=RESIZE_OPSETS)
add("interpolate_nearest_size", lambda: Lambda(lambda s, x: F.interpolate(x, size=(13, 6))), X,
    ["Shape", "Slice", "Concat", "Resize"],
    "F.interpolate(size=(13, 6)), nearest: Resize with sizes from Shape/Slice/Concat, growing one "
    "axis and shrinking the other", opsets=RESIZE_OPSETS)
add("interpolate_nearest_frac", lambda: Lambda(lambda s, x: F.interpolate(x, scale_factor=(1.5, 0.5))),
    X, ["Resize"], "F.interpolate(scale_factor=(1.5, 0.5)), nearest: fractional scales, output "
    "floor(in * scale)", opsets=(11, 13))
add("interpolate_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
    X, ["Resize"], "nn.Upsample(scale_factor=2, bilinear, align_corners=False): Resize linear half_pixel",
    opsets=RESIZE_OPSETS)
add("interpolate_bilinear_frac",
    lambda: Lambda(lambda s, x: F.interpolate(x, scale_factor=(1.5, 0.75), mode="bilinear", align_corners=False)),
    X, ["Resize"], "F.interpolate(scale_factor=(1.5, 0.75), bilinear): the coordinates use the given "
    "scale, not output / input", opsets=(11, 13))
add("interpolate_bilinear_size",
    lambda: Lambda(lambda s, x: F.interpolate(x, size=(5, 14), mode="bilinear", align_corners=False)),
    X, ["Shape", "Slice", "Concat", "Resize"], "F.interpolate(size=(5, 14), bilinear, "
    "align_corners=False): Resize linear half_pixel with sizes", opsets=(11, 13))
add("interpolate_bilinear_align_corners",
    lambda: Lambda(lambda s, x: F.interpolate(x, size=(13, 6), mode="bilinear", align_corners=True)),
    X, ["Shape", "Slice", "Concat", "Resize"], "F.interpolate(size=(13, 6), bilinear, "
    "align_corners=True): Resize linear align_corners", opsets=RESIZE_OPSETS)
add("upsample_bilinear_align_corners", lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True),
    X, ["Resize"], "nn.Upsample(scale_factor=2, bilinear, align_corners=True)", opsets=(11, 13))
add("interpolate_linear_1d", lambda: Lambda(lambda s, x: F.interpolate(x.flatten(2), scale_factor=2.0, mode="linear")),
    X, ["Reshape", "Resize"], "F.interpolate of N x C x L, mode='linear' x2: Resize of the last dim "
    "only (a fractional scale over 81 samples would differ from PyTorch by 7e-6: PyTorch's "
    "coordinates multiply by the scale's reciprocal, ONNX's divide by the scale)", opsets=(11, 13))
add("upsample_concat", UpsampleConcat, X8, ["Conv", "Relu", "Resize", "Concat"],
    "FPN / U-Net decoder step: stride-2 conv, nn.Upsample x2 (nearest), concat with the skip, conv",
    opsets=(11, 13))
add("pixel_shuffle", lambda: seq(nn.Conv2d(4, 8, 3, padding=1), nn.PixelShuffle(2)), X,
    ["Conv", "DepthToSpace"], "Conv -> nn.PixelShuffle(2) (ESPCN's upsampler): DepthToSpace CRD",
    opsets=(11, 13))
add("pixel_unshuffle", lambda: seq(nn.PixelUnshuffle(2), nn.Conv2d(16, 4, 1)), X8,
    ["Reshape", "Transpose", "Conv"], "nn.PixelUnshuffle(2) -> 1x1 Conv: a rank-6 Reshape/Transpose",
    opsets=(11, 13))


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2, 2)

    def forward(self, x):
        y = F.relu(self.conv(x))
        return y, self.pool(y)


# ---- ConvTranspose ----------------------------------------------------------------------------
# nn.ConvTranspose2d exports ConvTranspose with explicit pads and, when nonzero, output_padding;
# auto_pad and output_shape come from make_ort_models.py.

add("convtranspose_s2_outpad", lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1),
    X, ["ConvTranspose"], "ConvTranspose 3x3 strides 2 pads 1 output_padding 1 (9 -> 18: the "
    "upsampling of decoders)", opsets=(11, 13, 17))
add("convtranspose_groups2", lambda: nn.ConvTranspose2d(4, 6, 3, groups=2), X, ["ConvTranspose"],
    "ConvTranspose group 2 (4 -> 6), weight [C_in, C_out/group, k, k]", opsets=(11, 13))
add("convtranspose_dilation2", lambda: nn.ConvTranspose2d(4, 6, 3, padding=2, dilation=2), X,
    ["ConvTranspose"], "ConvTranspose 3x3 dilations 2 pads 2")
add("convtranspose_nobias_rect", lambda: nn.ConvTranspose2d(4, 5, (3, 2), stride=(2, 1), padding=(1, 0), bias=False),
    X, ["ConvTranspose"], "ConvTranspose kernel 3x2, strides (2,1), pads (1,0), no bias (2 inputs)")
add("convtranspose_outpad_dilation", lambda: nn.ConvTranspose2d(4, 3, 3, output_padding=1, dilation=2),
    X, ["ConvTranspose"],
    "ConvTranspose strides 1 dilations 2 output_padding 1 (allowed by the dilation): the last row "
    "and column are bias only")
add("convtranspose_depthwise_k4s2p1", lambda: nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1, groups=4),
    X, ["ConvTranspose"], "depthwise ConvTranspose group 4, 4x4 strides 2 pads 1 (exact 2x upsampling)")
add("dcgan_block", lambda: seq(nn.ConvTranspose2d(4, 8, 4, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.ConvTranspose2d(8, 3, 4, 2, 1, bias=False), nn.Tanh()),
    (1, 4, 4, 4), ["ConvTranspose", "BatchNormalization", "Relu", "Tanh"],
    "DCGAN generator blocks: ConvTranspose k4 s2 p1 (no bias) -> BatchNorm -> Relu -> "
    "ConvTranspose -> Tanh (4x4 -> 16x16); BN kept (do_constant_folding=False, PRESERVE)",
    fold=False, training=PRESERVE)


class UNetUp(nn.Module):
    """A U-Net level: a strided conv down, ConvTranspose up, concat with the skip, conv."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.fuse = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        y = self.up(F.relu(self.down(x)))
        return F.relu(self.fuse(torch.cat((x, y), 1)))


add("unet_up", UNetUp, (1, 4, 8, 10), ["Conv", "Relu", "ConvTranspose", "Concat"],
    "U-Net level: Conv strides 2 down, ConvTranspose 2x2 strides 2 up, concat with the skip, Conv")

# ---- 1-D models (N x C x L), run by cgr's 2-D layers as height 1 --------------------------------

L = (1, 4, 16)  # default input of the 1-D models

add("conv1d", lambda: nn.Conv1d(4, 6, 3, padding=1), L, ["Conv"], "Conv1d k3 pads 1",
    opsets=(11, 13, 17))
add("conv1d_stride_dilation_groups", lambda: nn.Conv1d(4, 8, 3, stride=2, padding=2, dilation=2, groups=2, bias=False),
    L, ["Conv"], "Conv1d k3 strides 2 pads 2 dilations 2 group 2, no bias")
add("maxpool1d", lambda: nn.MaxPool1d(3, 2, 1), L, ["MaxPool"], "MaxPool1d k3 strides 2 pads 1",
    opsets=(11, 13))
add("maxpool1d_ceil", lambda: nn.MaxPool1d(2, 3, ceil_mode=True), L, ["MaxPool"],
    "MaxPool1d k2 strides 3 ceil_mode=1")
add("avgpool1d", lambda: nn.AvgPool1d(3, 2, 1), L, ["Pad", "AveragePool"],
    "AvgPool1d k3 s2 pad 1 count_include_pad=True -> Pad (6 pads, rank 3) + AveragePool")
add("avgpool1d_exclude", lambda: nn.AvgPool1d(3, 2, 1, count_include_pad=False), L, ["AveragePool"],
    "AvgPool1d k3 s2 pads 1 count_include_pad=0")
add("bn1d", lambda: nn.BatchNorm1d(4), L, ["BatchNormalization"],
    "standalone BatchNorm1d on N x C x L", opsets=(11, 15), fold=False)
add("gap1d", lambda: nn.AdaptiveAvgPool1d(1), L, ["GlobalAveragePool"],
    "AdaptiveAvgPool1d(1) -> GlobalAveragePool on N x C x L (output N x C x 1)")
add("convtranspose1d", lambda: nn.ConvTranspose1d(4, 6, 4, stride=2, padding=1), L, ["ConvTranspose"],
    "ConvTranspose1d k4 strides 2 pads 1 (16 -> 32)", opsets=(11, 13))


def cnn1d():
    """A small 1-D CNN: (conv-bn-relu-pool) x 2, flatten, linear."""
    return seq(nn.Conv1d(4, 8, 5, padding=2), nn.BatchNorm1d(8), nn.ReLU(), nn.MaxPool1d(2),
               nn.Conv1d(8, 16, 3, padding=1), nn.BatchNorm1d(16), nn.ReLU(), nn.AvgPool1d(2),
               nn.Flatten(1), nn.Linear(16 * 8, 5))


add("cnn1d", cnn1d, (2, 4, 32),
    ["Conv", "Relu", "MaxPool", "Pad", "AveragePool", "Flatten", "Gemm"],
    "1-D CNN: (Conv1d-BatchNorm1d-ReLU-pool) x 2 -> Flatten -> Linear, batch 2; the exporter folds "
    "BN into the convs")
add("cnn1d_bn", cnn1d, (2, 4, 32),
    ["Conv", "BatchNormalization", "Relu", "MaxPool", "Pad", "AveragePool", "Flatten", "Gemm"],
    "cnn1d with BatchNormalization kept (do_constant_folding=False, PRESERVE): cgr folds it",
    fold=False, training=PRESERVE)


# ---- attribute forms torch does not emit (graph edited by this script) ------------------------

add("conv_pads_asym_attr", lambda: Lambda(lambda s, x: s.conv(F.pad(x, (1, 0, 2, 1))),
                                          conv=nn.Conv2d(4, 8, 3)),
    X, ["Conv"], "the pad_conv_asym model with the Pad merged into the Conv: asymmetric Conv pads "
    "[2,1,1,0] (begin h,w, end h,w)", edit="pads_attr")
add("conv_auto_pad_same_upper", lambda: seq(nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(4, 8, 3, stride=2)),
    (1, 4, 10, 10), ["Conv"], "Conv 3x3 s2 auto_pad=SAME_UPPER on 10x10 (pad 0 before, 1 after)",
    edit="auto_pad_same_upper", opsets=(11, 13))
add("conv_auto_pad_same_lower", lambda: seq(nn.ZeroPad2d((1, 0, 1, 0)), nn.Conv2d(4, 8, 3, stride=2)),
    (1, 4, 10, 10), ["Conv"], "Conv 3x3 s2 auto_pad=SAME_LOWER on 10x10 (pad 1 before, 0 after)",
    edit="auto_pad_same_lower")
add("conv_auto_pad_valid", lambda: nn.Conv2d(4, 8, 3), X, ["Conv"],
    "Conv 3x3 with auto_pad=VALID instead of pads", edit="auto_pad_valid")
add("maxpool_auto_pad_same_upper",
    lambda: Lambda(lambda s, x: s.pool(F.pad(x, (0, 1, 0, 1), value=float("-inf"))), pool=nn.MaxPool2d(3, 2)),
    (1, 4, 10, 10), ["MaxPool"], "MaxPool 3x3 s2 auto_pad=SAME_UPPER on 10x10 (from a -inf pad)",
    edit="auto_pad_same_upper")
add("maxpool_pads_asym_attr",
    lambda: Lambda(lambda s, x: s.pool(F.pad(x, (0, 1, 2, 0), value=float("-inf"))), pool=nn.MaxPool2d(3, 2)),
    X, ["MaxPool"], "MaxPool 3x3 s2 with asymmetric pads [2,0,0,1] (from a -inf pad)", edit="pads_attr")
add("avgpool_count_include_pad_attr", lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=True), X,
    ["AveragePool"], "the avgpool_pad_include model as one AveragePool pads 1 count_include_pad=1",
    edit="count_include_pad_attr", opsets=(11, 13))

# ---- several outputs -------------------------------------------------------------------------

add("two_outputs", TwoOutputs, X, ["Conv", "Relu", "MaxPool"],
    "two graph outputs: output0 = relu(conv(x)) (also consumed by the MaxPool), output1 = maxpool")


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    """Write {name: float32 numpy array} in the safetensors format (names sorted)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs, offset = [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        b = a.tobytes(order="C")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    buf = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(buf[b:e], dtype="<f4").reshape(info["shape"])
    return out


# --------------------------------------------------------------------------------------------
# Graph edits
# --------------------------------------------------------------------------------------------

INT_FOLDABLE = {"Constant", "ConstantOfShape", "Concat", "Reshape", "Slice", "Transpose", "Cast",
                "Unsqueeze", "Squeeze", "Gather", "Mul", "Sub", "Add", "Identity"}


def fold_int_constants(model):
    """Evaluate every node whose inputs are all constant integers (shape arithmetic, e.g. the
    pads chain torch emits for F.pad) and replace the results that feed other nodes by Constant
    nodes; Constant nodes left without consumers are removed. Float data is never touched."""
    g = model.graph
    const = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    folded = {}
    for node in g.node:
        if node.op_type == "Constant":
            const[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            continue
        if node.op_type not in INT_FOLDABLE or len(node.output) != 1:
            continue
        if any(i and i not in const for i in node.input):
            continue
        ins = [const[i] if i else None for i in node.input]
        if any(a is not None and a.dtype.kind not in "iub" for a in ins):
            continue
        try:
            out = eval_node(node, ins)[0]
        except NotImplementedError:
            continue
        if out.dtype.kind not in "iub":
            continue
        const[node.output[0]] = folded[node.output[0]] = out
    kept = [n for n in g.node if not (n.output and n.output[0] in folded)]
    needed = {i for n in kept for i in n.input} | {o.name for o in g.output}
    new_consts = [helper.make_node("Constant", [], [name], name=name.strip("/").replace("/", "_") + "_folded",
                                   value=numpy_helper.from_array(np.asarray(v), name=""))
                  for name, v in folded.items() if name in needed]
    kept = [n for n in kept if n.op_type != "Constant" or n.output[0] in needed]
    del g.node[:]
    g.node.extend(new_consts + kept)
    return model


def insert_dropout(model, opset):
    """Insert Dropout(ratio 0.3) between the Conv and the Relu (torch removes it in eval)."""
    g = model.graph
    nodes = list(g.node)
    conv = next(n for n in nodes if n.op_type == "Conv")
    relu = next(n for n in nodes if n.op_type == "Relu")
    dropped = conv.output[0] + "_dropout"
    extra = []
    if opset >= 12:
        ratio = helper.make_node("Constant", [], ["dropout_ratio"], name="dropout_ratio",
                                 value=numpy_helper.from_array(np.array(0.3, dtype=np.float32), name=""))
        drop = helper.make_node("Dropout", [conv.output[0], "dropout_ratio"], [dropped], name="dropout")
        extra = [ratio, drop]
    else:
        drop = helper.make_node("Dropout", [conv.output[0]], [dropped], name="dropout", ratio=0.3)
        extra = [drop]
    relu.input[0] = dropped
    i = nodes.index(conv)
    del g.node[:]
    g.node.extend(nodes[:i + 1] + extra + nodes[i + 1:])
    return model


def merge_pad(model, auto_pad=None, count_include_pad=None):
    """Remove the (folded) Pad in front of a Conv/MaxPool/AveragePool and express it on that node:
    as its pads attribute (added to the node's own pads), as auto_pad=SAME_UPPER/SAME_LOWER/VALID
    (pads attribute removed), and for AveragePool with count_include_pad. torch never emits these
    forms; other exporters do."""
    fold_int_constants(model)
    g = model.graph
    nodes = list(g.node)
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in nodes if n.op_type == "Constant"}
    pad = next(n for n in nodes if n.op_type == "Pad")
    user = next(n for n in nodes if pad.output[0] in n.input)
    p = [int(v) for v in consts[pad.input[1]]]  # [n0, c0, h0, w0, n1, c1, h1, w1]
    assert p[0] == p[1] == p[4] == p[5] == 0
    attrs = [a for a in user.attribute if a.name not in ("pads", "auto_pad", "count_include_pad")]
    own = next((list(a.ints) for a in user.attribute if a.name == "pads"), [0, 0, 0, 0])
    merged = [own[0] + p[2], own[1] + p[3], own[2] + p[6], own[3] + p[7]]
    del user.attribute[:]
    user.attribute.extend(attrs)
    if auto_pad:
        user.attribute.append(helper.make_attribute("auto_pad", auto_pad))
    else:
        user.attribute.append(helper.make_attribute("pads", merged))
    if count_include_pad is not None:
        user.attribute.append(helper.make_attribute("count_include_pad", count_include_pad))
    user.input[0] = pad.input[0]
    kept = [n for n in nodes if n is not pad]
    needed = {i for n in kept for i in n.input}
    kept = [n for n in kept if n.op_type != "Constant" or n.output[0] in needed]
    del g.node[:]
    g.node.extend(kept)
    return model


def drop_pads_attr(model, auto_pad):
    """Replace the pads attribute of every Conv/pool node by auto_pad (e.g. VALID when pads are 0)."""
    for n in model.graph.node:
        if n.op_type in ("Conv", "MaxPool", "AveragePool"):
            attrs = [a for a in n.attribute if a.name != "pads"]
            assert all(v == 0 for a in n.attribute if a.name == "pads" for v in a.ints)
            del n.attribute[:]
            n.attribute.extend(attrs + [helper.make_attribute("auto_pad", auto_pad)])
    return model


EDITS = {
    "fold_int_constants": lambda m, opset: fold_int_constants(m),
    "insert_dropout": insert_dropout,
    "pads_attr": lambda m, opset: merge_pad(m),
    "auto_pad_same_upper": lambda m, opset: merge_pad(m, auto_pad="SAME_UPPER"),
    "auto_pad_same_lower": lambda m, opset: merge_pad(m, auto_pad="SAME_LOWER"),
    "auto_pad_valid": lambda m, opset: drop_pads_attr(m, "VALID"),
    "count_include_pad_attr": lambda m, opset: merge_pad(m, count_include_pad=1),
}


# --------------------------------------------------------------------------------------------
# A small NumPy evaluator of the ONNX spec, used to check that each exported graph, read
# literally as the spec defines it, reproduces PyTorch's output.
# --------------------------------------------------------------------------------------------

def attrs_of(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _pool_geometry(x, a):
    k = list(a["kernel_shape"])
    nd = len(k)
    s = list(a.get("strides", [1] * nd))
    d = list(a.get("dilations", [1] * nd))
    p = list(a.get("pads", [0] * (2 * nd)))
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        p = [0] * (2 * nd)
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        p = [0] * (2 * nd)
        for i in range(nd):
            o = -(-x.shape[2 + i] // s[i])
            total = max(0, (o - 1) * s[i] + (k[i] - 1) * d[i] + 1 - x.shape[2 + i])
            small, big = total // 2, total - total // 2
            p[i], p[nd + i] = (small, big) if auto == "SAME_UPPER" else (big, small)
    elif auto != "NOTSET":
        raise NotImplementedError(f"auto_pad {auto}")
    ceil = a.get("ceil_mode", 0)
    outs = []
    for i in range(nd):
        n = x.shape[2 + i] + p[i] + p[nd + i] - ((k[i] - 1) * d[i] + 1)
        o = (-(-n // s[i]) if ceil else n // s[i]) + 1
        outs.append(o)
    return k, s, d, p, outs


def _windows(xp, k, s, d, outs):
    """xp: N,C,H,W padded; returns N,C,OH,OW,KH,KW views (may read past the end: caller pads)."""
    n, c = xp.shape[:2]
    sn, sc, sh, sw = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp, (n, c, outs[0], outs[1], k[0], k[1]),
        (sn, sc, sh * s[0], sw * s[1], sh * d[0], sw * d[1]), writeable=False)


def _pad_for_pool(x, k, s, d, p, outs, value):
    need_h = (outs[0] - 1) * s[0] + (k[0] - 1) * d[0] + 1
    need_w = (outs[1] - 1) * s[1] + (k[1] - 1) * d[1] + 1
    extra_h = max(0, need_h - (x.shape[2] + p[0] + p[2]))
    extra_w = max(0, need_w - (x.shape[3] + p[1] + p[3]))
    return np.pad(x, ((0, 0), (0, 0), (p[0], p[2] + extra_h), (p[1], p[3] + extra_w)),
                  constant_values=value)


def op_conv(x, w, b, a):
    group = a.get("group", 1)
    kh, kw = w.shape[2:]
    k, s, d, p, outs = _pool_geometry(x, {**a, "kernel_shape": [kh, kw], "ceil_mode": 0})
    xp = _pad_for_pool(x, k, s, d, p, outs, 0.0)
    win = _windows(xp, k, s, d, outs)  # N C OH OW KH KW
    n, c = x.shape[:2]
    m = w.shape[0]
    cg, mg = c // group, m // group
    ys = []
    for gi in range(group):
        wi = win[:, gi * cg:(gi + 1) * cg].astype(np.float64)
        ys.append(np.einsum("nchwij,mcij->nmhw", wi, w[gi * mg:(gi + 1) * mg].astype(np.float64),
                            optimize=True))
    y = np.concatenate(ys, 1)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def op_maxpool(x, a):
    k, s, d, p, outs = _pool_geometry(x, a)
    xp = _pad_for_pool(x, k, s, d, p, outs, -np.inf)
    return _windows(xp, k, s, d, outs).max(axis=(4, 5))


def op_avgpool(x, a):
    k, s, d, p, outs = _pool_geometry(x, {**a, "dilations": [1, 1]})
    xp = _pad_for_pool(x.astype(np.float64), k, s, d, p, outs, 0.0)
    total = _windows(xp, k, s, d, outs).sum(axis=(4, 5))
    # divisor: elements inside the input (count_include_pad=0) or inside input+pads (=1)
    ones = np.ones((1, 1) + x.shape[2:])
    if a.get("count_include_pad", 0):
        ones = np.pad(ones, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])), constant_values=1.0)
        op = _pad_for_pool(ones, k, s, d, [0, 0, 0, 0], outs, 0.0)
    else:
        op = _pad_for_pool(ones, k, s, d, p, outs, 0.0)
    cnt = _windows(op, k, s, d, outs).sum(axis=(4, 5))
    return (total / cnt).astype(np.float32)


def op_conv_transpose(x, w, b, a):
    """The spec literally: each input pixel scatters into its window of the full output, which
    pads (given, or derived from output_shape / auto_pad) then trim."""
    group = a.get("group", 1)
    n, c, h, wd = x.shape
    k = list(w.shape[2:])
    s = list(a.get("strides", [1, 1]))
    d = list(a.get("dilations", [1, 1]))
    op = list(a.get("output_padding", [0, 0]))
    full = [s[i] * (x.shape[2 + i] - 1) + op[i] + (k[i] - 1) * d[i] + 1 for i in range(2)]
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    pads = list(a.get("pads", [0, 0, 0, 0]))
    out = None
    if "output_shape" in a:
        out = list(a["output_shape"])[-2:]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        out = [x.shape[2 + i] * s[i] for i in range(2)]
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    if out is not None:
        for i in range(2):
            # an output past the full one gets the extra rows at the end (ONNX Runtime's reading)
            total = max(full[i] - out[i], 0)
            full[i] = max(full[i], out[i])
            begin = total // 2 if auto == "SAME_UPPER" else total - total // 2
            pads[i], pads[2 + i] = begin, total - begin
    mg = w.shape[1]
    cg = c // group
    y = np.zeros((n, mg * group, full[0], full[1]))
    for gi in range(group):
        xg = x[:, gi * cg:(gi + 1) * cg].astype(np.float64)
        for i in range(k[0]):
            for j in range(k[1]):
                contrib = np.einsum("nchw,cm->nmhw", xg, w[gi * cg:(gi + 1) * cg, :, i, j].astype(np.float64))
                y[:, gi * mg:(gi + 1) * mg, i * d[0]:i * d[0] + s[0] * (h - 1) + 1:s[0],
                  j * d[1]:j * d[1] + s[1] * (wd - 1) + 1:s[1]] += contrib
    y = y[:, :, pads[0]:full[0] - pads[2], pads[1]:full[1] - pads[3]]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(np.float32)


def as_2d_window(x, a, w=None):
    """An N x C x L window op as the N x C x 1 x L one: attributes and weight get a height of 1."""
    a = dict(a)
    for key, one in (("kernel_shape", 1), ("strides", 1), ("dilations", 1), ("output_padding", 0)):
        if key in a:
            a[key] = [one] + list(a[key])
    if "pads" in a:
        a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    if "output_shape" in a:
        a["output_shape"] = [1] + list(a["output_shape"])[-1:]
    return x[:, :, None, :], a, (None if w is None else w[:, :, None, :])


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def op_resize(x, ins, a):
    """Resize / Upsample by the letter of the spec, one axis at a time (linear is separable):
    coordinates in float32 as ONNX Runtime computes them; before opset 11 asymmetric
    coordinates, nearest truncating when an axis grows and rounding up when it shrinks."""
    legacy = OPSET[0] < 11
    mode = _text(a.get("mode", "nearest"))
    ctm = "asymmetric" if legacy else _text(a.get("coordinate_transformation_mode", "half_pixel"))
    nearest_mode = _text(a.get("nearest_mode", "round_prefer_floor"))
    def present(i):
        return ins[i] if len(ins) > i and ins[i] is not None and ins[i].size > 0 else None

    if "scales" in a:  # Upsample before opset 9
        scales, sizes = a["scales"], None
    elif OPSET[0] < 11:  # Upsample 9, Resize 10: X, scales
        scales, sizes = ins[1], None
    else:  # X, roi, scales, sizes
        scales, sizes = present(2), present(3)
    y = x.astype(np.float64)
    for axis in range(x.ndim):
        n_in = x.shape[axis]
        if sizes is not None:
            n_out = int(sizes[axis])
            scale = np.float32(n_out) / np.float32(n_in)
        else:
            scale = np.float32(scales[axis])
            n_out = int(np.floor(np.float32(n_in) * scale))
        if n_out == n_in and scale == 1:
            continue
        o = np.arange(n_out, dtype=np.float32)
        half = np.float32(0.5)
        if ctm == "asymmetric":
            c = o / scale
        elif ctm == "half_pixel":
            c = (o + half) / scale - half
        elif ctm == "pytorch_half_pixel":
            c = (o + half) / scale - half if n_out > 1 else np.zeros(n_out, np.float32)
        elif ctm == "align_corners":
            c = o * np.float32(n_in - 1) / np.float32(n_out - 1) if n_out > 1 else np.zeros(n_out, np.float32)
        else:
            raise NotImplementedError(f"Resize coordinate_transformation_mode {ctm}")
        if mode == "nearest":
            if legacy:
                idx = np.ceil(c) if scale < 1 else np.trunc(c)
            elif nearest_mode == "floor":
                idx = np.floor(c)
            elif nearest_mode == "ceil":
                idx = np.ceil(c)
            else:
                tie = c - np.floor(c) == half
                idx = np.where(tie, np.floor(c) if nearest_mode == "round_prefer_floor" else np.ceil(c),
                               np.floor(c + half))
            y = np.take(y, np.clip(idx.astype(np.int64), 0, n_in - 1), axis=axis)
        elif mode == "linear":
            c = np.clip(c, 0, n_in - 1).astype(np.float64)
            i0 = np.floor(c).astype(np.int64)
            i1 = np.minimum(i0 + 1, n_in - 1)
            w = (c - i0).reshape([-1 if d == axis else 1 for d in range(x.ndim)])
            y = np.take(y, i0, axis=axis) * (1 - w) + np.take(y, i1, axis=axis) * w
        else:
            raise NotImplementedError(f"Resize mode {mode}")
    return y.astype(np.float32)


def eval_node(node, ins):
    t = node.op_type
    a = attrs_of(node)
    x = ins[0] if ins else None
    if t == "Constant":
        return [numpy_helper.to_array(node.attribute[0].t)]
    if t in ("Identity", "Dropout"):
        return [x]
    if t == "Relu":
        return [np.maximum(x, 0).astype(x.dtype)]
    if t == "LeakyRelu":
        return [np.where(x > 0, x, x * np.float32(a.get("alpha", 0.01))).astype(x.dtype)]
    if t == "Clip":
        lo = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("min")
        hi = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("max")
        y = x
        if lo is not None:
            y = np.maximum(y, lo)
        if hi is not None:
            y = np.minimum(y, hi)
        return [y.astype(x.dtype)]
    if t == "Add":
        return [(ins[0] + ins[1]).astype(np.result_type(ins[0], ins[1]))]
    if t == "Sub":
        return [ins[0] - ins[1]]
    if t == "Mul":
        return [ins[0] * ins[1]]
    if t in ("Conv", "ConvTranspose", "MaxPool", "AveragePool") and x.ndim == 3:
        x4, a4, w4 = as_2d_window(x, a, ins[1] if len(ins) > 1 else None)
        node4 = helper.make_node(t, [], [], **a4)
        return [eval_node(node4, [x4, w4] + list(ins[2:]))[0][:, :, 0, :]]
    if t == "Conv":
        return [op_conv(x, ins[1], ins[2] if len(ins) > 2 and ins[2] is not None else None, a)]
    if t == "ConvTranspose":
        return [op_conv_transpose(x, ins[1], ins[2] if len(ins) > 2 and ins[2] is not None else None, a)]
    if t == "BatchNormalization":
        if a.get("training_mode", 0):
            raise NotImplementedError("training_mode")
        sc, b, mean, var = ins[1:5]
        eps = a.get("epsilon", 1e-5)
        shp = (1, -1) + (1,) * (x.ndim - 2)
        y = (x - mean.reshape(shp)) / np.sqrt(var.reshape(shp) + eps) * sc.reshape(shp) + b.reshape(shp)
        return [y.astype(np.float32)]
    if t == "MaxPool":
        return [op_maxpool(x, a)]
    if t == "AveragePool":
        return [op_avgpool(x, a)]
    if t == "GlobalAveragePool":
        return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float64).astype(np.float32)]
    if t == "Concat":
        return [np.concatenate([i for i in ins], axis=a["axis"])]
    if t == "Flatten":
        ax = a.get("axis", 1)
        ax = ax + x.ndim if ax < 0 else ax
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if t == "Gemm":
        A, B = ins[0], ins[1]
        if a.get("transA", 0):
            A = A.T
        if a.get("transB", 0):
            B = B.T
        y = a.get("alpha", 1.0) * (A.astype(np.float64) @ B.astype(np.float64))
        if len(ins) > 2 and ins[2] is not None:
            y = y + a.get("beta", 1.0) * ins[2]
        return [y.astype(np.float32)]
    if t == "MatMul":
        return [(ins[0].astype(np.float64) @ ins[1].astype(np.float64)).astype(np.float32)]
    if t == "LRN":
        size = a["size"]
        sq = np.pad(x.astype(np.float64) ** 2, [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
        window = sum(sq[:, i:i + x.shape[1]] for i in range(size))
        return [(x / (a.get("bias", 1.0) + a.get("alpha", 1e-4) / size * window) ** a.get("beta", 0.75))
                .astype(np.float32)]
    if t in ("InstanceNormalization", "LayerNormalization"):
        if t == "InstanceNormalization":
            axes = tuple(range(2, x.ndim))
            shp = (1, -1) + (1,) * (x.ndim - 2)
            scale, shift = ins[1].reshape(shp), ins[2].reshape(shp)
        else:
            ax = a.get("axis", -1) % x.ndim
            axes = tuple(range(ax, x.ndim))
            scale, shift = ins[1], ins[2] if len(ins) > 2 and ins[2] is not None else 0.0
        x64 = x.astype(np.float64)
        mean = x64.mean(axis=axes, keepdims=True)
        var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
        return [((x64 - mean) / np.sqrt(var + a.get("epsilon", 1e-5)) * scale + shift).astype(np.float32)]
    if t in ("Softmax", "LogSoftmax"):
        ax = a.get("axis", -1 if OPSET[0] >= 13 else 1)
        shp = x.shape
        if OPSET[0] < 13:
            ax = ax + x.ndim if ax < 0 else ax
            x2, ax = x.reshape(int(np.prod(shp[:ax])), -1).astype(np.float64), 1
        else:
            x2 = x.astype(np.float64)
        shifted = x2 - x2.max(axis=ax, keepdims=True)
        total = np.exp(shifted).sum(axis=ax, keepdims=True)
        y = shifted - np.log(total) if t == "LogSoftmax" else np.exp(shifted) / total
        return [y.reshape(shp).astype(np.float32)]
    if t == "Pad":
        mode = _text(a.get("mode", "constant"))
        pads = ins[1] if len(ins) > 1 else np.array(a["pads"])
        val = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("value", 0.0)
        r = x.ndim
        # negative pads crop first; the rest pads the cropped tensor
        x = x[tuple(slice(max(-int(pads[i]), 0), x.shape[i] - max(-int(pads[r + i]), 0)) for i in range(r))]
        width = [(max(int(pads[i]), 0), max(int(pads[r + i]), 0)) for i in range(r)]
        if mode == "constant":
            return [np.pad(x, width, constant_values=float(np.asarray(val)))]
        return [np.pad(x, width, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])]
    if t in ("Resize", "Upsample"):
        return [op_resize(x, ins, a)]
    if t == "DepthToSpace":
        b, (n, c, h, w) = a["blocksize"], x.shape
        if _text(a.get("mode", "DCR")) == "DCR":
            y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return [y.reshape(n, c // (b * b), h * b, w * b)]
    if t == "Tile":
        return [np.tile(x, [int(v) for v in ins[1]])]
    if t == "Expand":
        return [x * np.ones([int(v) for v in ins[1]], dtype=x.dtype)]
    if t == "Reshape":
        shape = [int(v) for v in ins[1]]
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
        return [x.reshape(shape)]
    if t == "ConstantOfShape":
        v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
        return [np.full([int(i) for i in x], v.reshape(-1)[0], dtype=v.dtype)]
    if t == "Slice":
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else np.arange(len(starts))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else np.ones(len(starts), np.int64)
        sl = [slice(None)] * x.ndim
        for st, en, ax, sp in zip(starts, ends, axes, steps):
            st, en, sp = int(st), int(en), int(sp)
            en = None if (sp < 0 and en < -x.shape[ax]) else min(en, 2**62)
            sl[int(ax)] = slice(st, en, sp)
        return [x[tuple(sl)]]
    if t == "Transpose":
        return [np.transpose(x, a.get("perm"))]
    if t == "Cast":
        to = a["to"]
        return [x.astype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[to])]
    if t == "Unsqueeze":
        axes = a["axes"] if "axes" in a else [int(v) for v in ins[1]]
        y = x
        for ax in sorted(v + x.ndim + len(axes) if v < 0 else v for v in axes):
            y = np.expand_dims(y, ax)
        return [y]
    if t == "Squeeze":
        axes = a.get("axes") if "axes" in a else ([int(v) for v in ins[1]] if len(ins) > 1 else None)
        return [np.squeeze(x, axis=tuple(axes) if axes is not None else None)]
    if t == "Gather":
        return [np.take(x, ins[1], axis=a.get("axis", 0))]
    if t == "Shape":
        return [np.array(x.shape, dtype=np.int64)]
    raise NotImplementedError(t)


OPSET = [DEFAULT_OPSET]


def run_onnx_numpy(model, inputs):
    OPSET[0] = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    env = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    env.update(inputs)
    for node in model.graph.node:
        ins = [env[i] if i else None for i in node.input]
        outs = eval_node(node, ins)
        for name, v in zip(node.output, outs):
            env[name] = v
    return [env[o.name] for o in model.graph.output]


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------

def seed_of(name):
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def reinit_fan_in(model):
    """Weights that keep activations alive through a whole network: Kaiming-uniform by fan-in
    for every conv and linear layer (gain sqrt 2), small random biases, and layer scales of
    order 1 (torchvision initialises ConvNeXt's at 1e-6 and some blocks' last BatchNorm at 0,
    which would make whole branches invisible to the comparison)."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            fan_in = m.weight[0].numel()
            bound = (6.0 / fan_in) ** 0.5
            with torch.no_grad():
                m.weight.uniform_(-bound, bound)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1)
    for name, p in model.named_parameters():
        if "layer_scale" in name:
            with torch.no_grad():
                p.uniform_(0.5, 1.0)


def reinit_batchnorm(model):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                if m.weight is not None:
                    m.weight.uniform_(0.5, 1.5)
                    m.bias.uniform_(-0.5, 0.5)


def onnx_shape(vi):
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in vi.type.tensor_type.shape.dim]


def generate(spec, out_dir, check):
    t0 = time.time()
    seed = seed_of(spec.base)
    torch.manual_seed(seed)
    model = spec.build()
    if spec.init == "fan_in":
        reinit_fan_in(model)
    reinit_batchnorm(model)
    model.eval()
    gen = torch.Generator().manual_seed(seed ^ 0x5EED)
    x = (torch.randn(spec.input_shape, generator=gen) * spec.input_scale).float()
    with torch.no_grad():
        y = model(x)
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    out_names = ["output"] if len(ys) == 1 else [f"output{i}" for i in range(len(ys))]

    d = os.path.join(out_dir, spec.name)
    os.makedirs(d, exist_ok=True)
    onnx_path = os.path.join(d, "model.onnx")
    buf = io.BytesIO()
    with contextlib.redirect_stdout(io.StringIO()), torch.no_grad():
        torch.onnx.export(model, x, buf, opset_version=spec.opset, input_names=["input"],
                          output_names=out_names, do_constant_folding=spec.fold,
                          training=spec.training, export_params=True,
                          keep_initializers_as_inputs=False)
    proto = onnx.load_from_string(buf.getvalue())
    if spec.edit:
        proto = EDITS[spec.edit](proto, spec.opset)
    if spec.edit:
        # an edited graph gets the concrete output shapes torch would have declared; the strict
        # check below re-runs ONNX shape inference and fails if they disagree with the graph
        for o, t in zip(proto.graph.output, ys):
            dims = o.type.tensor_type.shape.dim
            del dims[:]
            for v in t.shape:
                dims.add().dim_value = int(v)
        del proto.graph.value_info[:]
        onnx.checker.check_model(proto, full_check=True)
    proto.doc_string = f"cgr conformance model {spec.name}: {spec.description}"
    for i in proto.graph.input:
        assert onnx_shape(i) == list(x.shape), f"{spec.name}: input shape is not static: {onnx_shape(i)}"
    onnx.checker.check_model(proto)
    onnx.save(proto, onnx_path)
    onnx.checker.check_model(onnx_path)

    sd = {k: v.detach().cpu().contiguous().numpy() for k, v in model.state_dict().items()
          if not k.endswith("num_batches_tracked") and v.dtype == torch.float32}
    write_safetensors(os.path.join(d, "weights.safetensors"), sd,
                      {"format": "pt", "model": spec.name, "source": "cgr tests/conformance/make_models.py"})
    back = read_safetensors(os.path.join(d, "weights.safetensors"))
    assert back.keys() == sd.keys() and all(np.array_equal(back[k], sd[k]) for k in sd)

    xin = np.ascontiguousarray(x.numpy(), dtype=np.float32)
    np.save(os.path.join(d, "input.npy"), xin)
    outputs = []
    for name, t in zip(out_names, ys):
        a = np.ascontiguousarray(t.detach().numpy(), dtype=np.float32)
        np.save(os.path.join(d, f"{name}.npy"), a)
        outputs.append({"name": name, "file": f"{spec.name}/{name}.npy", "shape": list(a.shape)})

    ops = sorted({n.op_type for n in proto.graph.node})
    inits = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    float_inits = {k: v for k, v in inits.items() if v.dtype == np.float32}
    bind = all(k in sd and sd[k].shape == v.shape and np.array_equal(sd[k], v)
               for k, v in float_inits.items())
    declared = {o.name: onnx_shape(o) for o in proto.graph.output}
    shape_mismatch = [o["name"] for o in outputs if declared.get(o["name"]) != o["shape"]]

    entry = {
        "name": spec.name,
        "onnx": f"{spec.name}/model.onnx",
        "weights": f"{spec.name}/weights.safetensors",
        "input": {"name": "input", "shape": list(xin.shape), "file": f"{spec.name}/input.npy"},
        "outputs": outputs,
        "opset": spec.opset,
        "ops": ops,
        "tolerance": spec.tolerance,
        "description": spec.description,
        "exercises": spec.exercises,
        "missing": [o for o in spec.exercises if o not in ops],
        "extra_ops": [o for o in ops if o not in IMPORTER_OPS],
        "export": {"do_constant_folding": spec.fold,
                   "training": "PRESERVE" if spec.training == PRESERVE else "EVAL",
                   "edited": spec.edit},
        "weights_bind_by_name": bind,
        "seed": seed,
    }
    if shape_mismatch:
        entry["onnx_declared_output_shapes"] = {k: declared[k] for k in shape_mismatch}
    if spec.note:
        entry["note"] = spec.note

    numpy_err = None
    if check:
        try:
            res = run_onnx_numpy(proto, {"input": xin})
            errs = []
            for r, o in zip(res, ys):
                o = o.detach().numpy()
                if r.shape != o.shape:
                    errs.append(float("inf"))
                else:
                    errs.append(float(np.abs(r - o).max() / max(np.abs(o).max(), 1e-30)))
            numpy_err = max(errs)
        except NotImplementedError as e:
            numpy_err = f"n/a ({e})"
        entry["onnx_spec_numpy_rel_err"] = numpy_err if not isinstance(numpy_err, float) or np.isfinite(numpy_err) else "shape mismatch"
    entry["_seconds"] = time.time() - t0
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", default="", help="comma-separated model names (or base names)")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the NumPy ONNX-spec evaluation of each exported graph")
    ap.add_argument("--list", action="store_true", help="list the model names and exit")
    ap.add_argument("--reuse", action="store_true",
                    help="leave OUT_DIR as it is when this very script (same content, same "
                         "--only and --no-check) wrote it completely; the build presets share it")
    args = ap.parse_args()

    names = [s.name for s in SPECS]
    assert len(names) == len(set(names)), "duplicate model names"
    if args.list:
        print("\n".join(names))
        return 0
    if not args.out_dir:
        ap.error("OUT_DIR is required")
    specs = SPECS
    if args.only:
        want = {w.strip() for w in args.only.split(",") if w.strip()}
        specs = [s for s in SPECS if s.name in want or s.base in want]
        unknown = want - {s.name for s in specs} - {s.base for s in specs}
        if unknown:
            ap.error(f"unknown model(s): {', '.join(sorted(unknown))}")

    # The stamp is written last: a run cut short leaves none, so the next one regenerates.
    with open(__file__, "rb") as f:
        key = hashlib.sha256(f.read() + f"{args.only}|{args.no_check}".encode()).hexdigest()
    stamp = os.path.join(args.out_dir, "generator.sha256")
    if args.reuse and os.path.isfile(stamp) and os.path.isfile(os.path.join(args.out_dir, "manifest.json")):
        with open(stamp) as f:
            if f.read().strip() == key:
                print(f"make_models.py: {args.out_dir} holds this version's models; reused")
                return 0
    if os.path.exists(stamp):
        os.remove(stamp)

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    os.makedirs(args.out_dir, exist_ok=True)
    t_start = time.time()
    manifest = []
    for spec in specs:
        entry = generate(spec, args.out_dir, not args.no_check)
        manifest.append(entry)
        print(f"  {spec.name:32s} {entry['_seconds']:6.2f}s", file=sys.stderr)
    for e in manifest:
        e.pop("_seconds")
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")

    # ---- report ------------------------------------------------------------------------------
    print(f"\n{'name':32s} {'opset':5s} {'output shape':18s} {'spec-check':11s} ops")
    for e in manifest:
        shapes = " ".join("x".join(map(str, o["shape"])) for o in e["outputs"])
        chk = e.get("onnx_spec_numpy_rel_err", "-")
        chk = f"{chk:.1e}" if isinstance(chk, float) else str(chk)
        print(f"{e['name']:32s} {e['opset']:<5d} {shapes:18s} {chk:11s} {','.join(e['ops'])}")
    missing = [e for e in manifest if e["missing"]]
    print("\nmodels whose exported graph lacks an op they were meant to exercise:")
    for e in missing or []:
        print(f"  {e['name']}: missing {','.join(e['missing'])} (graph has {','.join(e['ops'])})")
    if not missing:
        print("  (none)")
    def symbolic(e):
        return any(not isinstance(v, int) for s in e["onnx_declared_output_shapes"].values() for v in s)
    odd = [e for e in manifest if "onnx_declared_output_shapes" in e]
    sym = [e["name"] for e in odd if symbolic(e)]
    if sym:
        print("\nmodels whose ONNX graph declares symbolic output dims (torch could not infer them "
              "through the Pad chain; infer from the static input): " + ", ".join(sym))
    odd = [e for e in odd if not symbolic(e)]
    if odd:
        print("\nmodels whose ONNX-declared output shape differs from PyTorch's output:")
        for e in odd:
            print(f"  {e['name']}: ONNX {e['onnx_declared_output_shapes']} vs PyTorch "
                  f"{[o['shape'] for o in e['outputs']]}")
    bad = [e for e in manifest if (isinstance(e.get("onnx_spec_numpy_rel_err"), str)
                                   and not e["onnx_spec_numpy_rel_err"].startswith("n/a"))
           or (isinstance(e.get("onnx_spec_numpy_rel_err"), float) and e["onnx_spec_numpy_rel_err"] > e["tolerance"])]
    unchecked = [e["name"] for e in manifest if str(e.get("onnx_spec_numpy_rel_err", "")).startswith("n/a")]
    if unchecked:
        print(f"\nmodels with ops the numpy spec reader lacks (checked by ONNX Runtime in "
              f"make_ort_models.py instead): {len(unchecked)}")
    if bad:
        print("\nmodels where the ONNX graph read by the letter of the spec does NOT reproduce PyTorch:")
        for e in bad:
            print(f"  {e['name']}: {e['onnx_spec_numpy_rel_err']}")
    extra = [e for e in manifest if e["extra_ops"]]
    if extra:
        print("\nmodels with ops outside the importer's op list (extra_ops):")
        for e in extra:
            print(f"  {e['name']}: {','.join(e['extra_ops'])}")
    nobind = [e["name"] for e in manifest if not e["weights_bind_by_name"]]
    print(f"\nmodels whose ONNX float initializers are not all state_dict entries ({len(nobind)}): "
          + (", ".join(nobind) if nobind else "(none)"))
    print(f"\n{len(manifest)} models written to {args.out_dir} in {time.time() - t_start:.1f}s")
    with open(stamp, "w") as f:
        f.write(key + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
