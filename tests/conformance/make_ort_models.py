#!/usr/bin/python3
"""ONNX graphs PyTorch does not export, with ONNX Runtime as the reference.

Each op at each opset version where its semantics changed (attributes that became inputs,
new defaults, coerced axes), plus the graph shapes older exporters and other frameworks
write, built with onnx.helper and run by onnxruntime (PyPI, an independent implementation):

    /usr/bin/python3 tests/conformance/make_ort_models.py OUT_DIR [--only NAME,...] [--list]

writes OUT_DIR/NAME/{model.onnx, input0.npy..., output0.npy...} and OUT_DIR/manifest.json,
which tests/conformance/test_ort_conformance.cpp reads. Exits 77 (skipped) when onnx,
numpy or onnxruntime is missing: scripts/install-deps.sh --tests installs onnxruntime into
/opt/cgr/python, which the CTest fixture puts on PYTHONPATH.

Deterministic: each case seeds numpy from zlib.crc32 of its name.
"""
import argparse
import json
import os
import sys
import zlib

if __name__ == "__main__" and len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
    # A manifest left by an earlier run must not stand in for this one if it cannot run.
    try:
        os.remove(os.path.join(sys.argv[1], "manifest.json"))
    except FileNotFoundError:
        pass

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as e:
    print(f"make_ort_models.py: missing Python package: {e.name} (scripts/install-deps.sh --tests "
          "installs onnxruntime into /opt/cgr/python; put it on PYTHONPATH)", file=sys.stderr)
    sys.exit(77)

TOLERANCE = 1e-5
CASES = []


class Graph:
    """A small onnx.helper front end: inputs get seeded random values, initializers are given."""

    def __init__(self, name, rng):
        self.name, self.rng = name, rng
        self.nodes, self.inputs, self.outputs, self.initializers = [], [], [], []
        self.feeds = {}

    def input(self, name, shape, low=-2.0, high=2.0):
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        self.feeds[name] = self.rng.uniform(low, high, size=shape).astype(np.float32)
        return name

    def const(self, name, values, dtype=None):
        """An initializer: `dtype`, else the numpy dtype of `values` (Python floats as float32)."""
        array = np.asarray(values, dtype=dtype)
        if dtype is None and array.dtype == np.float64:
            array = array.astype(np.float32)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, name, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        scale = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        return self.const(name, self.rng.uniform(-scale, scale, size=shape))

    def node(self, op, inputs, outputs, **attrs):
        self.nodes.append(helper.make_node(op, inputs, outputs, name=f"{op.lower()}{len(self.nodes)}", **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def output(self, name):
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))


def case(name, opsets, exercises, tolerance=TOLERANCE):
    """Registers build(g, opset) once per opset, as NAME_opN."""

    def register(build):
        for opset in opsets:
            CASES.append((f"{name}_op{opset}", opset, build, exercises, tolerance))
        return build

    return register


# --------------------------------------------------------------------------------------------
# The importer's ops at the versions where they changed
# --------------------------------------------------------------------------------------------

@case("conv_same_upper", (7, 11, 21), ["Conv"])
def _(g, opset):
    x = g.input("x", [1, 3, 9, 8])
    g.output(g.node("Conv", [x, g.weight("w", [4, 3, 3, 3]), g.weight("b", [4])], ["y"],
                    auto_pad="SAME_UPPER", strides=[2, 2]))


@case("conv_same_lower_valid", (7, 11), ["Conv"])
def _(g, opset):
    x = g.input("x", [1, 2, 7, 7])
    y = g.node("Conv", [x, g.weight("w", [2, 2, 2, 2])], ["y"], auto_pad="SAME_LOWER")
    g.output(g.node("Conv", [y, g.weight("w2", [3, 2, 3, 3])], ["z"], auto_pad="VALID"))


@case("batchnorm", (7, 9, 14, 15), ["BatchNormalization"])
def _(g, opset):
    x = g.input("x", [2, 3, 4, 5])
    attrs = {"epsilon": 1e-3}
    if opset < 9:
        attrs["spatial"] = 1
    scale, bias = g.const("s", g.rng.uniform(0.5, 1.5, 3)), g.const("b", g.rng.uniform(-1, 1, 3))
    mean, var = g.const("m", g.rng.uniform(-1, 1, 3)), g.const("v", g.rng.uniform(0.5, 2, 3))
    g.output(g.node("BatchNormalization", [x, scale, bias, mean, var], ["y"], **attrs))


@case("maxpool", (7, 8, 10, 12), ["MaxPool"])
def _(g, opset):
    x = g.input("x", [1, 2, 9, 9])
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    if opset >= 10:
        attrs["ceil_mode"] = 1
    if opset >= 12:
        attrs["dilations"] = [1, 1]
    g.output(g.node("MaxPool", [x], ["y"], **attrs))


@case("averagepool", (7, 10, 19), ["AveragePool"])
def _(g, opset):
    x = g.input("x", [1, 2, 8, 8])
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}
    if opset >= 10:
        attrs["ceil_mode"] = 0
    if opset >= 19:
        attrs["dilations"] = [1, 1]
    g.output(g.node("AveragePool", [x], ["y"], **attrs))


@case("global_average_pool", (7, 21), ["GlobalAveragePool"])
def _(g, opset):
    g.output(g.node("GlobalAveragePool", [g.input("x", [2, 3, 5, 4])], ["y"]))


@case("gemm", (7, 9, 11, 13), ["Gemm"])
def _(g, opset):
    x = g.input("x", [3, 6])
    w = g.weight("w", [6, 4])  # transB = 0
    c = g.weight("c", [4])
    g.output(g.node("Gemm", [x, w, c], ["y"], alpha=0.5, beta=2.0))


@case("gemm_transa_no_c", (11, 13), ["Gemm"])
def _(g, opset):
    x = g.input("x", [6, 3])
    g.output(g.node("Gemm", [x, g.weight("w", [4, 6])], ["y"], transA=1, transB=1))


@case("matmul", (9, 13), ["MatMul"])
def _(g, opset):
    g.output(g.node("MatMul", [g.input("x", [2, 5]), g.weight("w", [5, 3])], ["y"]))


@case("relu_leaky", (7, 13, 14, 16), ["Relu", "LeakyRelu"])
def _(g, opset):
    y = g.node("Relu", [g.input("x", [2, 3, 4])], ["y"])
    z = g.node("LeakyRelu", [g.input("x2", [2, 3, 4])], ["z"], alpha=0.2)
    g.output(g.node("Add", [y, z], ["out"]))


@case("clip_attributes", (7,), ["Clip"])
def _(g, opset):
    g.output(g.node("Clip", [g.input("x", [2, 8])], ["y"], min=-0.5, max=0.75))


@case("clip_inputs", (11, 12, 13), ["Clip"])
def _(g, opset):
    x = g.input("x", [2, 8])
    g.output(g.node("Clip", [x, g.const("lo", -0.5), g.const("hi", 0.75)], ["y"]))


@case("add_broadcast_constant", (7, 13, 14), ["Add"])
def _(g, opset):
    x = g.input("x", [2, 3, 4, 5])
    g.output(g.node("Add", [x, g.weight("c", [3, 1, 1], 1.0)], ["y"]))


@case("concat", (7, 11, 13), ["Concat"])
def _(g, opset):
    a, b = g.input("a", [1, 2, 3]), g.input("b", [1, 4, 3])
    g.output(g.node("Concat", [a, b], ["y"], axis=1 if opset < 11 else -2))


@case("flatten", (7, 9, 11, 13, 21), ["Flatten"])
def _(g, opset):
    x = g.input("x", [2, 3, 4, 5])
    y = g.node("Flatten", [x], ["y"], axis=2)
    g.output(g.node("Flatten", [y], ["z"], axis=0 if opset >= 9 else 1))


@case("reshape", (7, 13, 14, 21), ["Reshape"])
def _(g, opset):
    x = g.input("x", [2, 3, 4])
    g.output(g.node("Reshape", [x, g.const("s", [0, -1], np.int64)], ["y"]))


@case("transpose", (7, 13, 21), ["Transpose"])
def _(g, opset):
    g.output(g.node("Transpose", [g.input("x", [2, 3, 4])], ["y"], perm=[2, 0, 1]))


@case("squeeze_unsqueeze", (7, 11, 13, 21), ["Squeeze", "Unsqueeze"])
def _(g, opset):
    x = g.input("x", [2, 1, 3])
    if opset < 13:
        y = g.node("Squeeze", [x], ["y"], axes=[1] if opset < 11 else [-2])
        g.output(g.node("Unsqueeze", [y], ["z"], axes=[0, 3]))
    else:
        y = g.node("Squeeze", [x, g.const("a1", [-2], np.int64)], ["y"])
        g.output(g.node("Unsqueeze", [y, g.const("a2", [0, 3], np.int64)], ["z"]))


@case("dropout_identity", (7, 10, 12, 13, 21), ["Dropout", "Identity"])
def _(g, opset):
    x = g.input("x", [2, 5])
    if opset < 12:
        y = g.node("Dropout", [x], ["y"], ratio=0.3)
    else:
        y = g.node("Dropout", [x, g.const("r", np.float32(0.3))], ["y"])
    g.output(g.node("Identity", [y], ["z"]))


@case("constant_attributes", (9, 12, 13), ["Constant"])
def _(g, opset):
    x = g.input("x", [2, 3])
    if opset >= 12:
        c = g.node("Constant", [], ["c"], value_floats=[0.5, -1.0, 2.0])
    else:
        c = g.node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32)))
    g.output(g.node("Add", [x, c], ["y"]))


@case("pad_then_conv", (7, 11, 13, 18, 19, 21), ["Pad", "Conv"])
def _(g, opset):
    x = g.input("x", [1, 2, 6, 6])
    if opset < 11:
        p = g.node("Pad", [x], ["p"], pads=[0, 0, 1, 2, 0, 0, 2, 1], mode="constant", value=0.0)
    elif opset < 18:
        p = g.node("Pad", [x, g.const("pads", [0, 0, 1, 2, 0, 0, 2, 1], np.int64)], ["p"])
    else:  # the axes input: pads for H and W only
        p = g.node("Pad", [x, g.const("pads", [1, 2, 2, 1], np.int64), g.const("zero", np.float32(0)),
                           g.const("axes", [2, 3], np.int64)], ["p"])
    g.output(g.node("Conv", [p, g.weight("w", [3, 2, 3, 3])], ["y"]))


@case("pad_alone", (7, 11, 18), ["Pad"])
def _(g, opset):
    x = g.input("x", [1, 2, 4, 5])
    if opset < 11:
        g.output(g.node("Pad", [x], ["y"], pads=[0, 0, 2, 1, 0, 0, 0, 3]))
    elif opset < 18:
        g.output(g.node("Pad", [x, g.const("pads", [0, 0, 2, 1, 0, 0, 0, 3], np.int64)], ["y"]))
    else:
        g.output(g.node("Pad", [x, g.const("pads", [1, 2, 3, 0], np.int64), "",
                                g.const("axes", [-1, -2], np.int64)], ["y"]))


@case("softmax_axis1_4d", (7, 11, 13), ["Softmax"])
def _(g, opset):
    # axis 1 of a 4-D tensor: before 13 over C*H*W flattened, from 13 over C alone.
    g.output(g.node("Softmax", [g.input("x", [2, 3, 2, 2])], ["y"], axis=1))


@case("softmax_default_axis", (7, 13), ["Softmax"])
def _(g, opset):
    g.output(g.node("Softmax", [g.input("x", [2, 3, 4])], ["y"]))


@case("log_softmax_axis1_4d", (7, 11, 13), ["LogSoftmax"])
def _(g, opset):
    # As Softmax: before 13 over C*H*W flattened, from 13 over C alone.
    g.output(g.node("LogSoftmax", [g.input("x", [2, 3, 2, 2])], ["y"], axis=1))


@case("log_softmax_default_axis", (7, 13), ["LogSoftmax"])
def _(g, opset):
    g.output(g.node("LogSoftmax", [g.input("x", [2, 3, 4])], ["y"]))


@case("shape_arithmetic", (7, 9, 10, 11, 13), ["Shape", "Gather", "Slice", "Concat", "Reshape", "Cast",
                                               "Unsqueeze"])
def _(g, opset):
    # x.view(x.size(0), -1) the way old exporters spell it: Shape -> Gather -> Unsqueeze ->
    # Concat with a constant -> Reshape, plus a Slice of the shape (attributes before 10).
    x = g.input("x", [2, 3, 4])
    s = g.node("Shape", [x], ["s"])
    n = g.node("Gather", [s, g.const("i0", np.int64(0))], ["n"], axis=0)
    if opset < 13:
        n1 = g.node("Unsqueeze", [n], ["n1"], axes=[0])
    else:
        n1 = g.node("Unsqueeze", [n, g.const("ax", [0], np.int64)], ["n1"])
    if opset < 10:
        tail = g.node("Slice", [s], ["tail"], starts=[2], ends=[3])
    else:
        tail = g.node("Slice", [s, g.const("st", [2], np.int64), g.const("en", [3], np.int64)], ["tail"])
    dims = g.node("Concat", [n1, g.const("m1", [-1], np.int64), tail], ["dims"], axis=0)
    dims = g.node("Cast", [dims], ["dims64"], to=TensorProto.INT64)
    g.output(g.node("Reshape", [x, dims], ["y"]))


@case("shape_start_end", (15, 21), ["Shape"])
def _(g, opset):
    x = g.input("x", [2, 3, 4, 5])
    s = g.node("Shape", [x], ["s"], start=1, end=-1)
    g.output(g.node("Reshape", [x, g.node("Concat", [g.const("one", [2], np.int64), s, g.const("m", [-1], np.int64)],
                                          ["d"], axis=0)], ["y"]))


@case("constant_of_shape", (9, 20), ["ConstantOfShape", "Add"])
def _(g, opset):
    x = g.input("x", [2, 3])
    c = g.node("ConstantOfShape", [g.const("shape", [3], np.int64)], ["c"],
               value=numpy_helper.from_array(np.array([0.25], np.float32)))
    g.output(g.node("Add", [x, c], ["y"]))


# --------------------------------------------------------------------------------------------
# Unary functions
# --------------------------------------------------------------------------------------------

def unary_case(op, opsets, low=-4.0, high=4.0, **attrs):
    @case(f"unary_{op.lower()}" + ("_attrs" if attrs else ""), opsets, [op])
    def _(g, opset):
        g.output(g.node(op, [g.input("x", [2, 3, 5, 7], low, high)], ["y"], **attrs))


for _op in ("Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Reciprocal"):
    unary_case(_op, (7, 13))
unary_case("Log", (7, 13), 0.01, 8.0)
unary_case("Sqrt", (7, 13), 0.0, 8.0)
unary_case("Erf", (9, 13))
unary_case("Elu", (7,))
unary_case("Elu", (7,), alpha=0.4)
unary_case("Selu", (7,))
unary_case("Selu", (7,), alpha=1.5, gamma=1.2)
unary_case("HardSigmoid", (7,))
unary_case("HardSigmoid", (7,), alpha=1.0 / 6, beta=0.5)
unary_case("HardSwish", (14, 21))
unary_case("Softplus", (7, 21), -30.0, 30.0)
unary_case("Gelu", (20, 21))
unary_case("Gelu", (20,), approximate="tanh")


@case("unary_chain_after_conv", (13,), ["Conv", "Sigmoid", "Tanh", "Abs", "Sqrt", "Log"])
def _(g, opset):
    x = g.input("x", [1, 3, 8, 8])
    y = g.node("Conv", [x, g.weight("w", [4, 3, 3, 3])], ["c"], pads=[1, 1, 1, 1])
    y = g.node("Tanh", [g.node("Sigmoid", [y], ["s"])], ["t"])
    g.output(g.node("Log", [g.node("Sqrt", [g.node("Abs", [y], ["a"])], ["r"])], ["y"]))


# --------------------------------------------------------------------------------------------
# Binary functions with broadcasting, and folding of shape arithmetic
# --------------------------------------------------------------------------------------------

def binary_case(op, opsets, a_shape, b_shape, positive=False, b_const=False, a_const=False):
    tag = "_".join(["x".join(map(str, a_shape)) or "s", "x".join(map(str, b_shape)) or "s"])
    tag += "_bconst" if b_const else "_aconst" if a_const else ""

    @case(f"binary_{op.lower()}_{tag}", opsets, [op])
    def _(g, opset):
        low = 0.1 if positive else -3.0
        a = g.const("a", g.rng.uniform(low, 3.0, a_shape)) if a_const else g.input("a", a_shape, low, 3.0)
        b = g.const("b", g.rng.uniform(-2.0, 2.0, b_shape)) if b_const else g.input("b", b_shape, -2.0, 2.0)
        g.output(g.node(op, [a, b], ["y"]))


for _op, _opsets in (("Add", (7, 13, 14)), ("Sub", (7, 13, 14)), ("Mul", (7, 13, 14)),
                     ("Div", (7, 13, 14)), ("Max", (8, 12, 13)), ("Min", (8, 12, 13))):
    binary_case(_op, _opsets, [2, 3, 4, 5], [3, 1, 5])
    binary_case(_op, (13,), [2, 1, 4], [5, 1])
    binary_case(_op, (13,), [2, 3, 4], [], b_const=True)
binary_case("Pow", (7, 12, 13, 15), [2, 3, 4], [3, 1], positive=True)
binary_case("Pow", (13,), [2, 3, 4], [1], positive=True, b_const=True)
binary_case("Sub", (13,), [3, 1], [2, 3, 4], a_const=True)
binary_case("Div", (13,), [4], [2, 3, 4], a_const=True)
binary_case("Mul", (13,), [2, 8, 5, 5], [2, 8, 1, 1])  # squeeze-excitation's channel scale


@case("prelu_per_channel", (7, 9, 16), ["PRelu"])
def _(g, opset):
    x = g.input("x", [2, 4, 5, 5])
    g.output(g.node("PRelu", [x, g.const("slope", g.rng.uniform(0.0, 0.5, [4, 1, 1]))], ["y"]))


@case("prelu_computed_slope", (9, 16), ["PRelu"])
def _(g, opset):
    g.output(g.node("PRelu", [g.input("x", [2, 3, 4]), g.input("slope", [3, 1], 0.0, 1.0)], ["y"]))


@case("variadic", (8, 13), ["Sum", "Mean", "Max", "Min"])
def _(g, opset):
    a, b, c = g.input("a", [2, 3, 4]), g.input("b", [3, 4]), g.input("c", [2, 1, 4])
    s = g.node("Sum", [a, b, c], ["s"])
    m = g.node("Mean", [a, b, c], ["m"])
    hi = g.node("Max", [s, m, a], ["hi"])
    g.output(g.node("Min", [hi, c], ["y"]))


@case("fold_shape_arithmetic", (11, 13), ["Div", "Mul", "Equal", "Where", "Range", "Cast", "Expand",
                                          "Add", "Sub", "Not", "Less"])
def _(g, opset):
    # The integer arithmetic exporters emit around view/reshape, all on constants, then a
    # Range added to x and an Expand of a constant.
    x = g.input("x", [2, 6, 4])
    s = g.node("Shape", [x], ["s"])
    c = g.node("Gather", [s, g.const("one", np.int64(1))], ["c"], axis=0)
    half = g.node("Div", [c, g.const("two", np.int64(2))], ["half"])
    back = g.node("Mul", [half, g.const("two2", np.int64(2))], ["back"])
    even = g.node("Equal", [back, c], ["even"])
    odd = g.node("Not", [even], ["odd"])
    small = g.node("Less", [c, g.const("ten", np.int64(10))], ["small"])
    pick = g.node("Where", [even, half, c], ["pick"])
    pick = g.node("Sub", [pick, g.node("Cast", [odd], ["odd_i"], to=TensorProto.INT64)], ["pick2"])
    pick = g.node("Where", [small, pick, c], ["pick3"])
    if opset < 13:
        dims = g.node("Unsqueeze", [pick], ["dims1"], axes=[0])
    else:
        dims = g.node("Unsqueeze", [pick, g.const("ax", [0], np.int64)], ["dims1"])
    shape = g.node("Concat", [g.const("m1", [-1], np.int64), dims, g.const("four", [4], np.int64)], ["shape"], axis=0)
    y = g.node("Reshape", [x, shape], ["y"])  # 4 x 3 x 4
    w = g.node("Gather", [s, g.const("two3", np.int64(2))], ["w"], axis=0)
    r = g.node("Range", [g.const("z", np.int64(0)), w, g.const("st", np.int64(1))], ["r"])
    rf = g.node("Cast", [r], ["rf"], to=TensorProto.FLOAT)
    e = g.node("Expand", [g.const("k", [[0.5], [1.5], [2.5]]), g.const("es", [3, 4], np.int64)], ["e"])
    g.output(g.node("Add", [g.node("Add", [y, rf], ["yr"]), e], ["out"]))


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------

def reduce_case(op, opset, axes, keepdims=1, noop=None, tag=""):
    @case(f"{op.lower()}_{tag or 'axes' + ''.join(str(a) for a in axes or [])}_k{keepdims}", (opset,), [op])
    def _(g, opset):
        x = g.input("x", [2, 3, 4, 5])
        axes_input = opset >= (13 if op == "ReduceSum" else 18)
        attrs = {"keepdims": keepdims}
        if noop is not None:
            attrs["noop_with_empty_axes"] = noop
        inputs = [x]
        if axes is not None:
            if axes_input:
                inputs.append(g.const("axes", axes, np.int64))
            else:
                attrs["axes"] = axes
        g.output(g.node(op, inputs, ["y"], **attrs))


for _op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"):
    _new = 13 if _op == "ReduceSum" else 18
    for _opset in (11, _new):
        reduce_case(_op, _opset, [2, 3])
        reduce_case(_op, _opset, [1], keepdims=0)
        reduce_case(_op, _opset, [0, -1], keepdims=0)
        reduce_case(_op, _opset, None, tag="all")
reduce_case("ReduceMean", 18, [], noop=1, tag="noop")
reduce_case("ReduceSum", 13, None, keepdims=0, tag="all")


@case("global_max_pool", (7, 13, 21), ["GlobalMaxPool"])
def _(g, opset):
    g.output(g.node("GlobalMaxPool", [g.input("x", [2, 3, 5, 4])], ["y"]))


# --------------------------------------------------------------------------------------------
# Slice and Split of computed tensors
# --------------------------------------------------------------------------------------------

@case("slice_computed", (7, 10, 11, 13), ["Slice"])
def _(g, opset):
    x = g.node("Relu", [g.input("x", [2, 5, 6, 7])], ["r"])
    if opset < 10:
        y = g.node("Slice", [x], ["y"], starts=[1, -4], ends=[4, 1000], axes=[1, 3])
    else:
        y = g.node("Slice", [x, g.const("st", [-1, 1, 5], np.int64), g.const("en", [-1000, 4, 0], np.int64),
                             g.const("ax", [0, 1, -1], np.int64), g.const("sp", [-1, 2, -2], np.int64)], ["y"])
    g.output(y)


@case("split", (7, 11, 13, 18), ["Split"])
def _(g, opset):
    x = g.input("x", [2, 6, 5])
    if opset < 13:
        a, b, c = g.node("Split", [x], ["a", "b", "c"], axis=1, split=[1, 2, 3])
    elif opset < 18:
        a, b, c = g.node("Split", [x, g.const("sp", [1, 2, 3], np.int64)], ["a", "b", "c"], axis=-2)
    else:  # num_outputs: 5 = 2 + 2 + 1 along the last axis
        a, b, c = g.node("Split", [x], ["a", "b", "c"], axis=2, num_outputs=3)
    for t in (a, b, c):
        g.output(t)


@case("split_equal", (11, 13), ["Split"])
def _(g, opset):
    a, b = g.node("Split", [g.input("x", [2, 6, 5])], ["a", "b"], axis=1)
    g.output(g.node("Mul", [a, b], ["y"]))


# --------------------------------------------------------------------------------------------
# ConvTranspose (versions 1 and 11) and 1-D windows (N x C x L)
# --------------------------------------------------------------------------------------------

@case("convtranspose_pads", (7, 11), ["ConvTranspose"])
def _(g, opset):
    # Asymmetric pads, output_padding on both axes, rectangular kernel and strides, bias.
    x = g.input("x", [2, 3, 4, 5])
    g.output(g.node("ConvTranspose", [x, g.weight("w", [3, 4, 2, 3]), g.weight("b", [4])], ["y"],
                    strides=[2, 3], pads=[1, 0, 0, 2], output_padding=[1, 2]))


@case("convtranspose_output_shape", (7, 11), ["ConvTranspose"])
def _(g, opset):
    # Pads derived from output_shape (odd totals: the extra pad at the start), the spatial form
    # and the N x C x H x W form; with SAME_UPPER the extra pad goes to the end.
    x = g.input("x", [1, 2, 3, 4])
    w = g.weight("w", [2, 3, 3, 3])
    g.output(g.node("ConvTranspose", [x, w], ["a"], strides=[3, 2], output_shape=[10, 8]))
    g.output(g.node("ConvTranspose", [x, w], ["b"], strides=[2, 2], output_shape=[1, 3, 6, 9]))
    g.output(g.node("ConvTranspose", [x, w], ["c"], strides=[2, 2], output_shape=[6, 9],
                    auto_pad="SAME_UPPER"))


@case("convtranspose_auto_pad", (7, 11), ["ConvTranspose"])
def _(g, opset):
    # SAME_*: output = input x stride, output_padding counted in the total; VALID: everything.
    x = g.input("x", [1, 4, 3, 4])
    w = g.weight("w", [4, 2, 3, 3])
    g.output(g.node("ConvTranspose", [x, w], ["upper"], strides=[2, 2], auto_pad="SAME_UPPER",
                    output_padding=[1, 1]))
    g.output(g.node("ConvTranspose", [x, w], ["lower"], strides=[3, 3], dilations=[2, 2],
                    output_padding=[1, 1], auto_pad="SAME_LOWER"))
    g.output(g.node("ConvTranspose", [x, w, g.weight("b", [4])], ["valid"], strides=[2, 1],
                    auto_pad="VALID", group=2))


@case("convtranspose_group_dilation", (11, 13), ["ConvTranspose", "Relu"])
def _(g, opset):
    # group 2, dilations 2, kernel_shape stated, no bias, after a computed tensor.
    x = g.node("Relu", [g.input("x", [2, 4, 5, 4])], ["r"])
    g.output(g.node("ConvTranspose", [x, g.weight("w", [4, 3, 3, 2])], ["y"], group=2,
                    dilations=[2, 2], kernel_shape=[3, 2], pads=[1, 1, 1, 1]))


@case("convtranspose_1d", (11, 13), ["ConvTranspose"])
def _(g, opset):
    x = g.input("x", [2, 3, 7])
    w = g.weight("w", [3, 2, 4])
    g.output(g.node("ConvTranspose", [x, w, g.weight("bias", [2])], ["padded"], strides=[2],
                    pads=[1, 2], output_padding=[1]))
    g.output(g.node("ConvTranspose", [x, w], ["shaped"], strides=[3], output_shape=[20]))


@case("windows_1d", (7, 11, 13), ["Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
                                  "BatchNormalization"])
def _(g, opset):
    # N x C x L through every windowed op: SAME_UPPER conv, asymmetric pads, ceil_mode.
    x = g.input("x", [2, 3, 11])
    c = g.node("Conv", [x, g.weight("w", [4, 3, 3]), g.weight("b", [4])], ["c"], strides=[2],
               auto_pad="SAME_UPPER")
    scale, bias = g.const("s", g.rng.uniform(0.5, 1.5, 4)), g.const("bb", g.rng.uniform(-1, 1, 4))
    mean, var = g.const("m", g.rng.uniform(-1, 1, 4)), g.const("v", g.rng.uniform(0.5, 2, 4))
    bn = g.node("BatchNormalization", [c, scale, bias, mean, var], ["bn"], epsilon=1e-3)
    pool_attrs = {"ceil_mode": 1} if opset >= 10 else {}
    g.output(g.node("MaxPool", [bn], ["max"], kernel_shape=[2], pads=[1, 0], strides=[2],
                    **pool_attrs))
    avg = g.node("AveragePool", [bn], ["avg"], kernel_shape=[3], pads=[1, 1], count_include_pad=1)
    g.output(avg)
    g.output(g.node("GlobalAveragePool", [avg], ["gap"]))


# --------------------------------------------------------------------------------------------
# Normalisations: LRN (1, 13), InstanceNormalization (6), LayerNormalization (17)
# --------------------------------------------------------------------------------------------

@case("lrn", (7, 13), ["LRN"])
def _(g, opset):
    # The defaults, and a window wider than the 5 channels. (onnxruntime refuses even sizes,
    # where the ONNX window puts its extra channel after c; tests/test_layers.cpp checks those.)
    x = g.input("x", [2, 5, 3, 4])
    g.output(g.node("LRN", [x], ["narrow"], size=3))
    g.output(g.node("LRN", [x], ["wide"], size=7, alpha=0.3, beta=0.6, bias=1.5))


@case("lrn_after_conv", (13,), ["Conv", "Relu", "LRN"])
def _(g, opset):
    # GoogLeNet v1's stem: conv, relu, LRN size 5 alpha 1e-4 beta 0.75 (the input is scaled
    # up so that the window's squares matter).
    x = g.input("x", [1, 3, 9, 9], -20.0, 20.0)
    c = g.node("Conv", [x, g.weight("w", [8, 3, 3, 3], 2.0)], ["c"], pads=[1, 1, 1, 1])
    g.output(g.node("LRN", [g.node("Relu", [c], ["r"])], ["y"], size=5, alpha=1e-4, beta=0.75, bias=1.0))


@case("instance_norm", (7, 21), ["InstanceNormalization"])
def _(g, opset):
    scale, bias = g.const("s", g.rng.uniform(0.5, 1.5, 3)), g.const("b", g.rng.uniform(-1, 1, 3))
    g.output(g.node("InstanceNormalization", [g.input("x", [2, 3, 4, 5]), scale, bias], ["y"], epsilon=1e-3))
    g.output(g.node("InstanceNormalization", [g.input("x3", [2, 3, 10], 1.0, 5.0), scale, bias], ["z"]))


@case("layer_norm", (17, 21), ["LayerNormalization"])
def _(g, opset):
    x = g.input("x", [2, 3, 4, 5], -1.0, 3.0)
    g.output(g.node("LayerNormalization", [x, g.const("s", g.rng.uniform(0.5, 1.5, [5])),
                                           g.const("b", g.rng.uniform(-1, 1, [5]))], ["last"]))
    # axis -3: over [3, 4, 5], no B, epsilon and stash_type given
    g.output(g.node("LayerNormalization", [x, g.const("s3", g.rng.uniform(0.5, 1.5, [3, 4, 5]))], ["y"],
                    axis=-3, epsilon=1e-3, stash_type=1))


# --------------------------------------------------------------------------------------------
# MatMul and Gemm with computed operands
# --------------------------------------------------------------------------------------------

@case("matmul_computed", (7, 9, 13), ["MatMul"])
def _(g, opset):
    a, b = g.input("a", [2, 1, 3, 4]), g.input("b", [3, 4, 5])
    p = g.node("MatMul", [a, b], ["p"])  # batch dims broadcast both ways: 2 x 3 x 3 x 5
    g.output(p)
    g.output(g.node("MatMul", [g.const("row", g.rng.uniform(-1, 1, [3])), p], ["vm"]))  # a 1-D constant A
    g.output(g.node("MatMul", [p, g.input("v", [5])], ["mv"]))  # a 1-D computed B
    g.output(g.node("MatMul", [g.const("left", g.rng.uniform(-1, 1, [6, 3])), p], ["cm"]))  # constant A


@case("gemm_computed", (7, 9, 11, 13), ["Gemm"])
def _(g, opset):
    a, b = g.input("a", [4, 3]), g.input("b", [5, 4])
    g.output(g.node("Gemm", [a, b, g.input("c", [1, 5])], ["y"], transA=1, transB=1, alpha=0.5, beta=-2.0))
    # A constant A, a computed B, a one-element computed C broadcast to every element
    w = g.const("w", g.rng.uniform(-1, 1, [2, 4]))
    g.output(g.node("Gemm", [w, g.input("b2", [4, 3]), g.input("c2", [1])], ["z"], beta=0.25))
    if opset >= 11:  # C is optional from opset 11
        g.output(g.node("Gemm", [a, g.input("b3", [4, 6])], ["u"], alpha=3.0, transA=1))


@case("gemm_constant_b_full_c", (9, 13), ["Gemm"])
def _(g, opset):
    # A constant B (a Linear) with a C that varies along rows and columns: added after it
    x = g.input("x", [3, 4])
    g.output(g.node("Gemm", [x, g.weight("w", [4, 5]), g.const("c", g.rng.uniform(-1, 1, [3, 5]))], ["y"],
                    beta=0.5))


# --------------------------------------------------------------------------------------------
# Pad of computed tensors: constant fills, reflect, edge, wrap (19), crops
# --------------------------------------------------------------------------------------------

@case("pad_modes", (7, 11, 13, 18, 19, 21), ["Pad"])
def _(g, opset):
    # reflect, edge and a non-zero constant on a computed tensor; negative pads crop
    x = g.node("Relu", [g.input("x", [2, 3, 6, 5])], ["r"])
    cases = [("reflect", [0, 0, 2, 1, 0, 0, 3, 4], 0.0), ("edge", [0, 0, 3, -1, 0, 0, -2, 2], 0.0),
             ("constant", [0, 0, 1, 2, 0, 0, -1, 3], 1.25), ("reflect", [0, 0, -1, 2, 0, 0, 2, -2], 0.0)]
    if opset >= 19:
        cases.append(("wrap", [0, 0, 2, 3, 0, 0, 4, 1], 0.0))
    for k, (mode, pads, value) in enumerate(cases):
        if opset < 11:
            g.output(g.node("Pad", [x], [f"y{k}"], mode=mode, pads=pads, value=value))
        elif opset >= 18 and k % 2 == 1:  # the axes input: pads for H and W only
            hw = [pads[2], pads[3], pads[6], pads[7]]
            g.output(g.node("Pad", [x, g.const(f"p{k}", hw, np.int64), g.const(f"v{k}", np.float32(value)),
                                    g.const(f"a{k}", [2, 3], np.int64)], [f"y{k}"], mode=mode))
        else:
            g.output(g.node("Pad", [x, g.const(f"p{k}", pads, np.int64), g.const(f"v{k}", np.float32(value))],
                            [f"y{k}"], mode=mode))


# --------------------------------------------------------------------------------------------
# Tile and Expand of computed tensors
# --------------------------------------------------------------------------------------------

@case("tile", (7, 13), ["Tile"])
def _(g, opset):
    x = g.node("Relu", [g.input("x", [2, 3, 4])], ["r"])
    g.output(g.node("Tile", [x, g.const("reps", [2, 1, 3], np.int64)], ["y"]))
    g.output(g.node("Tile", [g.input("z", [1, 2, 1, 3]), g.const("reps4", [3, 2, 4, 1], np.int64)], ["w"]))


@case("expand_computed", (8, 13), ["Expand"])
def _(g, opset):
    # NumPy broadcasting of a computed tensor: size-1 dims repeated, a leading dim added, and an
    # Expand that changes nothing
    x = g.node("Relu", [g.input("x", [3, 1, 4, 1])], ["r"])
    g.output(g.node("Expand", [x, g.const("s1", [2, 3, 5, 4, 2], np.int64)], ["y"]))
    g.output(g.node("Expand", [x, g.const("s2", [1, 4, 1], np.int64)], ["z"]))
    g.output(g.node("Expand", [x, g.const("s3", [1, 1, 1, 1], np.int64)], ["w"]))


# --------------------------------------------------------------------------------------------
# Resampling: Upsample 7/9, Resize 10/11/13/18/19
# --------------------------------------------------------------------------------------------

@case("upsample", (7, 9), ["Upsample"])
def _(g, opset):
    x = g.node("Relu", [g.input("x", [2, 3, 4, 5])], ["r"])
    for mode, scales in (("nearest", [1.0, 1.0, 2.0, 3.0]), ("nearest", [1.0, 1.0, 1.5, 2.5]),
                         ("linear", [1.0, 1.0, 2.0, 1.5])):
        out = f"{mode}{len(g.outputs)}"
        if opset < 9:
            g.output(g.node("Upsample", [x], [out], mode=mode, scales=scales))
        else:
            g.output(g.node("Upsample", [x, g.const(f"s{len(g.outputs)}", scales)], [out], mode=mode))


@case("resize_10", (10,), ["Resize"])
def _(g, opset):
    # asymmetric coordinates; nearest truncates growing and rounds up shrinking
    x = g.input("x", [1, 2, 5, 7])
    for mode, scales in (("nearest", [1.0, 1.0, 1.6, 0.6]), ("nearest", [1.0, 1.0, 0.5, 2.0]),
                         ("linear", [1.0, 1.0, 1.6, 0.6])):
        out = f"{mode}{len(g.outputs)}"
        g.output(g.node("Resize", [x, g.const(f"s{len(g.outputs)}", scales)], [out], mode=mode))


RESIZE_COORDINATES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def resize_inputs(g, opset, name, scales=None, sizes=None, axes=False):
    """Resize's inputs after X at this opset: roi and scales required at 11, optional from 13;
    with axes (18) the scales / sizes cover the last two dims only."""
    if axes:
        scales = scales[2:] if scales is not None else None
        sizes = sizes[2:] if sizes is not None else None
    empty = g.const(f"{name}_empty", np.zeros(0, np.float32)) if opset < 13 else ""
    if sizes is None:
        return [empty, g.const(f"{name}_scales", np.array(scales, np.float32))]
    return [empty, empty, g.const(f"{name}_sizes", np.array(sizes, np.int64))]


@case("resize_nearest", (11, 13, 18, 19), ["Resize"])
def _(g, opset):
    # every nearest_mode under every coordinate transformation, growing and shrinking by odd
    # ratios (ties included: x 0.5 half_pixel lands on .5), by scales and by sizes
    x = g.input("x", [1, 2, 6, 5])
    modes = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
    coordinates = RESIZE_COORDINATES + (("tf_half_pixel_for_nn",) if opset < 13 else ()) + \
        (("half_pixel_symmetric",) if opset >= 19 else ())
    for i, ctm in enumerate(coordinates):
        for j, nearest in enumerate(modes):
            k = len(g.outputs)
            target = {"scales": [1.0, 1.0, 0.5, 1.7]} if (i + j) % 2 == 0 else {"sizes": [1, 2, 8, 3]}
            attrs = {"axes": [2, 3]} if opset >= 18 and k % 3 == 0 else {}
            g.output(g.node("Resize", [x] + resize_inputs(g, opset, f"r{k}", axes=bool(attrs), **target),
                            [f"y{k}"], mode="nearest", coordinate_transformation_mode=ctm,
                            nearest_mode=nearest, **attrs))


@case("resize_linear", (11, 13, 18, 19), ["Resize"])
def _(g, opset):
    # bilinear under every coordinate transformation: x 1.5 / x 0.6 by scales, 1 x 9 by sizes
    # (pytorch_half_pixel and align_corners special-case a length-1 output)
    x = g.input("x", [2, 3, 5, 4])
    coordinates = RESIZE_COORDINATES + (("tf_half_pixel_for_nn",) if opset < 13 else ()) + \
        (("half_pixel_symmetric",) if opset >= 19 else ())
    for ctm in coordinates:
        for target in ({"scales": [1.0, 1.0, 1.5, 0.6]}, {"sizes": [2, 3, 1, 9]}):
            k = len(g.outputs)
            # (no axes: ONNX Runtime 1.19 crashes on linear Resize with axes; resize_nearest
            # covers them)
            g.output(g.node("Resize", [x] + resize_inputs(g, opset, f"r{k}", **target),
                            [f"y{k}"], mode="linear", coordinate_transformation_mode=ctm,
                            cubic_coeff_a=-0.5, exclude_outside=0, extrapolation_value=0.0))


@case("resize_keep_aspect_ratio", (18, 19), ["Resize"])
def _(g, opset):
    # keep_aspect_ratio_policy: one scale for the listed dims, the smaller or larger ratio
    x = g.input("x", [1, 2, 6, 4])
    for policy in ("stretch", "not_larger", "not_smaller"):
        for mode in ("nearest", "linear"):
            k = len(g.outputs)
            g.output(g.node("Resize", [x, "", "", g.const(f"sz{k}", np.array([9, 5], np.int64))], [f"y{k}"],
                            mode=mode, axes=[2, 3], keep_aspect_ratio_policy=policy))


# --------------------------------------------------------------------------------------------
# DepthToSpace and SpaceToDepth
# --------------------------------------------------------------------------------------------

@case("depth_to_space", (7, 11, 13), ["DepthToSpace"])
def _(g, opset):
    x = g.node("Relu", [g.input("x", [2, 8, 3, 2])], ["r"])
    g.output(g.node("DepthToSpace", [x], ["dcr"], blocksize=2))
    if opset >= 11:
        g.output(g.node("DepthToSpace", [x], ["crd"], blocksize=2, mode="CRD"))
        g.output(g.node("DepthToSpace", [x], ["dcr_explicit"], blocksize=2, mode="DCR"))


@case("space_to_depth", (7, 13), ["SpaceToDepth"])
def _(g, opset):
    x = g.node("Relu", [g.input("x", [2, 3, 6, 9])], ["r"])
    g.output(g.node("SpaceToDepth", [x], ["y"], blocksize=3))


# --------------------------------------------------------------------------------------------


def build_model(name, opset, build):
    g = Graph(name, np.random.default_rng(zlib.crc32(name.encode())))
    build(g, opset)
    graph = helper.make_graph(g.nodes, name, g.inputs, g.outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="cgr make_ort_models.py")
    model.ir_version = 7 if opset <= 15 else 8  # what the exporters of those opsets wrote
    return model, g.feeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?")
    parser.add_argument("--only", help="comma-separated case names")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        for name, opset, _, exercises, _ in CASES:
            print(f"{name:40s} opset {opset:2d}  {', '.join(exercises)}")
        return 0
    if not args.out:
        parser.error("OUT_DIR is required")
    only = set(args.only.split(",")) if args.only else None
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    for name, opset, build, exercises, tolerance in CASES:
        if only and name not in only:
            continue
        model, feeds = build_model(name, opset, build)
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        data = model.SerializeToString()
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(data)
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        results = session.run(None, feeds)
        entry = {"name": name, "opset": opset, "exercises": exercises, "tolerance": tolerance,
                 "onnx": f"{name}/model.onnx", "inputs": [], "outputs": []}
        for i, (input_name, value) in enumerate(feeds.items()):
            np.save(os.path.join(folder, f"input{i}.npy"), value)
            entry["inputs"].append({"name": input_name, "file": f"{name}/input{i}.npy"})
        for i, (out, value) in enumerate(zip(session.get_outputs(), results)):
            np.save(os.path.join(folder, f"output{i}.npy"), np.asarray(value, dtype=np.float32))
            entry["outputs"].append({"name": out.name, "file": f"{name}/output{i}.npy"})
        manifest.append(entry)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"make_ort_models.py: {len(manifest)} graphs checked by onnxruntime {ort.__version__} "
          f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
