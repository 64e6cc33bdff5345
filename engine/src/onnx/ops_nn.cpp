// ONNX ops with weights or windows: Conv (a Pad feeding it folds into its padding),
// ConvTranspose, BatchNormalization, MaxPool, AveragePool, GlobalAveragePool, and Gemm / MatMul:
// a Linear when the weight is a constant, a MatMul layer when an operand is computed. The
// windowed ops take 2-D (N x C x H x W) and 1-D (N x C x L) inputs; cgr's 2-D layers run the
// 1-D ones as height 1, without reshapes.
#include <optional>

#include "cgr/error.hpp"
#include "onnx/importer.hpp"

namespace cgr::onnx_import {
namespace {

void import_conv(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  Attributes attrs(node, label,
                   {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  Importer::need_inputs(node, label, 2, 3);
  // A Pad feeding only convs is folded into their padding.
  std::optional<Padding2d> extra;
  Value x;
  if (const PendingPad* pad = im.pending_pad(node.input(0))) {
    x = pad->input;
    extra = pad->padding;
  } else {
    x = im.spatial_input(node, label);
  }
  const Shape in_shape = im.network().desc(x).shape;
  // N x C x L (nn.Conv1d) runs as a 2-D conv of height 1, weight [out, in/group, k].
  const std::size_t spatial_dims = in_shape.rank() - 2;
  const ConstantTensor& w = im.constant(node.input(1), label, "weight");
  if (w.shape.rank() != in_shape.rank() || !w.is_float) {
    fail("{}: weight '{}' has shape {}; a {}-D convolution of input {} needs {}-D float weights",
         label, node.input(1), w.shape.to_string(), spatial_dims, in_shape.to_string(),
         in_shape.rank());
  }
  const Size2 weight_kernel =
      spatial_dims == 1 ? Size2(1, w.shape[2]) : Size2(w.shape[2], w.shape[3]);
  const Size2 kernel = Importer::pair_attribute(attrs, "kernel_shape", 0, spatial_dims);
  if (attrs.has("kernel_shape") && !(kernel == weight_kernel)) {
    attrs.unsupported("kernel_shape", fmt::format("{} disagrees with the weight shape {}",
                                                  to_string(kernel), w.shape.to_string()));
  }
  Conv2dParams p;
  p.out_channels = w.shape[0];
  p.kernel = weight_kernel;
  p.stride = Importer::pair_attribute(attrs, "strides", 1, spatial_dims);
  p.dilation = Importer::pair_attribute(attrs, "dilations", 1, spatial_dims);
  p.groups = attrs.get_int("group", 1);
  if (p.groups <= 0 || p.groups > in_shape[1]) {
    attrs.unsupported("group",
                      fmt::format("{} does not fit {} input channels", p.groups, in_shape[1]));
  }
  Shape padded = in_shape;
  if (extra) {
    if (spatial_dims == 2) padded[2] += extra->top + extra->bottom;
    padded[in_shape.rank() - 1] += extra->left + extra->right;
  }
  p.padding = Importer::window_padding(attrs, padded, p.kernel, p.stride, p.dilation);
  if (extra) {
    p.padding.top += extra->top;
    p.padding.left += extra->left;
    p.padding.bottom += extra->bottom;
    p.padding.right += extra->right;
  }
  const ConstantTensor* b = im.optional_constant(node, 2, label, "bias");
  p.bias = b != nullptr;
  std::int64_t fitted_channels = 0;
  if (__builtin_mul_overflow(w.shape[1], p.groups, &fitted_channels) ||
      fitted_channels != in_shape[1]) {
    fail("{}: weight '{}' of shape {} with group={} does not fit input channels {}", label,
         node.input(1), w.shape.to_string(), p.groups, in_shape[1]);
  }
  const std::string name = im.layer_name(node, index, node.input(1));
  const Value y = im.network().conv2d(x, p, name);
  im.add_weight(name, "weight", w.shape, w.floats);
  if (b != nullptr) {
    if (!b->is_float || b->floats.size() != static_cast<std::size_t>(p.out_channels)) {
      fail("{}: bias '{}' has shape {}, expected [{}]", label, node.input(2), b->shape.to_string(),
           p.out_channels);
    }
    im.add_weight(name, "bias", Shape{p.out_channels}, b->floats);
  }
  im.bind(node.output(0), y);
}

// ConvTranspose (opsets 1 and 11 read alike): weight [C_in, C_out/group, k...]. The output
// size comes from pads (NOTSET), from output_shape (pads derived from it, the odd one at the
// start except for SAME_UPPER), or from auto_pad SAME_* (output = input x stride); VALID pads
// nothing. output_padding adds to the end; with output_shape or SAME it counts in the total
// padding, as the spec's formula has it.
void import_conv_transpose(Importer& im, const ::onnx::NodeProto& node, int index,
                           const std::string& label) {
  Attributes attrs(node, label,
                   {"auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                    "output_shape", "pads", "strides"});
  Importer::need_inputs(node, label, 2, 3);
  const Value x = im.spatial_input(node, label);
  const Shape in_shape = im.network().desc(x).shape;
  const std::size_t spatial_dims = in_shape.rank() - 2;
  const ConstantTensor& w = im.constant(node.input(1), label, "weight");
  if (w.shape.rank() != in_shape.rank() || !w.is_float) {
    fail(
        "{}: weight '{}' has shape {}; a {}-D transposed convolution of input {} needs {}-D "
        "float weights",
        label, node.input(1), w.shape.to_string(), spatial_dims, in_shape.to_string(),
        in_shape.rank());
  }
  const Size2 weight_kernel =
      spatial_dims == 1 ? Size2(1, w.shape[2]) : Size2(w.shape[2], w.shape[3]);
  const Size2 kernel = Importer::pair_attribute(attrs, "kernel_shape", 0, spatial_dims);
  if (attrs.has("kernel_shape") && !(kernel == weight_kernel)) {
    attrs.unsupported("kernel_shape", fmt::format("{} disagrees with the weight shape {}",
                                                  to_string(kernel), w.shape.to_string()));
  }
  ConvTranspose2dParams p;
  p.groups = attrs.get_int("group", 1);
  if (p.groups <= 0 || in_shape[1] % p.groups != 0) {
    attrs.unsupported("group",
                      fmt::format("{} does not divide {} input channels", p.groups, in_shape[1]));
  }
  if (w.shape[0] != in_shape[1]) {
    fail(
        "{}: weight '{}' of shape {} does not fit input channels {} (ConvTranspose weights are "
        "[C_in, C_out/group, k...])",
        label, node.input(1), w.shape.to_string(), in_shape[1]);
  }
  if (__builtin_mul_overflow(w.shape[1], p.groups, &p.out_channels)) {
    fail("{}: weight '{}' of shape {} with group={} has too many output channels", label,
         node.input(1), w.shape.to_string(), p.groups);
  }
  p.kernel = weight_kernel;
  p.stride = Importer::pair_attribute(attrs, "strides", 1, spatial_dims);
  p.dilation = Importer::pair_attribute(attrs, "dilations", 1, spatial_dims);
  p.output_padding = Importer::pair_attribute(attrs, "output_padding", 0, spatial_dims, 0);
  const Size2 extent = spatial_dims == 1 ? Size2(1, in_shape[2]) : Size2(in_shape[2], in_shape[3]);
  for (const auto& [what, v] :
       {std::pair{"strides", p.stride}, std::pair{"dilations", p.dilation}}) {
    if (v.h <= 0 || v.w <= 0) attrs.unsupported(what, "must be positive");
  }
  if (p.output_padding.h < 0 || p.output_padding.w < 0)
    attrs.unsupported("output_padding", "has a negative value");
  if ((p.output_padding.h >= p.stride.h && p.output_padding.h >= p.dilation.h) ||
      (p.output_padding.w >= p.stride.w && p.output_padding.w >= p.dilation.w)) {
    attrs.unsupported(
        "output_padding",
        fmt::format("{} must be smaller than the strides {} or the dilations {}",
                    to_string(p.output_padding), to_string(p.stride), to_string(p.dilation)));
  }
  // The full output per axis: every tap of every input pixel, before trimming.
  const auto full = [&](std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t d,
                        std::int64_t op) {
    return conv_transpose_output_size(in, k, s, 0, 0, op, d);
  };
  const std::int64_t full_h =
      full(extent.h, p.kernel.h, p.stride.h, p.dilation.h, p.output_padding.h);
  const std::int64_t full_w =
      full(extent.w, p.kernel.w, p.stride.w, p.dilation.w, p.output_padding.w);
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    attrs.unsupported("auto_pad", fmt::format("value '{}' is not supported", auto_pad));
  }
  // Pads that trim the full output to `out` per axis: the odd one at the end for SAME_UPPER,
  // at the start otherwise (the spec's formula; ONNX Runtime agrees). An output larger than
  // the full one (ONNX's backend test asks for one row more) gets the extra rows at the end,
  // reached by no tap, as ONNX Runtime computes it: that is more output_padding, and holds
  // to the same bound.
  const auto trim_to = [&](Size2 out, std::string_view attribute) {
    const std::int64_t total_h = full_h - out.h, total_w = full_w - out.w;
    if (total_h < 0 || total_w < 0) {
      const Size2 extended(p.output_padding.h + std::max<std::int64_t>(0, -total_h),
                           p.output_padding.w + std::max<std::int64_t>(0, -total_w));
      if ((extended.h >= p.stride.h && extended.h >= p.dilation.h) ||
          (extended.w >= p.stride.w && extended.w >= p.dilation.w)) {
        attrs.unsupported(attribute,
                          fmt::format("asks for an output of {}, past the full transposed "
                                      "convolution ({}x{}) by as much as the strides {} or more",
                                      to_string(out), full_h, full_w, to_string(p.stride)));
      }
      p.output_padding = extended;
    }
    const std::int64_t trim_h = std::max<std::int64_t>(0, total_h);
    const std::int64_t trim_w = std::max<std::int64_t>(0, total_w);
    const bool upper = auto_pad == "SAME_UPPER";
    const std::int64_t top = upper ? trim_h / 2 : trim_h - trim_h / 2;
    const std::int64_t left = upper ? trim_w / 2 : trim_w - trim_w / 2;
    return Padding2d(top, left, trim_h - top, trim_w - left);
  };
  if (attrs.has("output_shape")) {
    // The spatial dims, or (as some exporters write) the whole N x C x ... shape.
    auto out = attrs.get_ints("output_shape", {});
    if (out.size() == in_shape.rank()) out.erase(out.begin(), out.begin() + 2);
    if (out.size() != spatial_dims) {
      attrs.unsupported("output_shape",
                        fmt::format("has {} values for {} spatial dims", out.size(), spatial_dims));
    }
    for (auto v : out) {
      if (v <= 0 || v > kGeometryLimit)
        attrs.unsupported("output_shape", fmt::format("value {} is out of range", v));
    }
    p.padding =
        trim_to(spatial_dims == 1 ? Size2(1, out[0]) : Size2(out[0], out[1]), "output_shape");
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    p.padding = trim_to(Size2(extent.h * p.stride.h, extent.w * p.stride.w), "auto_pad");
  } else if (auto_pad == "VALID") {
    p.padding = Padding2d(0);
  } else {
    const std::size_t count = 2 * spatial_dims;
    const auto pads = attrs.get_ints("pads", std::vector<std::int64_t>(count, 0));
    if (pads.size() != count) {
      attrs.unsupported("pads", fmt::format("has {} values; a {}-D window takes {}", pads.size(),
                                            spatial_dims, count));
    }
    for (auto v : pads) {
      if (v < 0) attrs.unsupported("pads", "has a negative value");
      if (v > kGeometryLimit)
        attrs.unsupported("pads", fmt::format("value {} is implausibly large", v));
    }
    p.padding = spatial_dims == 1 ? Padding2d(0, pads[0], 0, pads[1])
                                  : Padding2d(pads[0], pads[1], pads[2], pads[3]);
    if (p.padding.top + p.padding.bottom >= full_h || p.padding.left + p.padding.right >= full_w) {
      attrs.unsupported("pads", fmt::format("{} trim the whole output ({}x{})",
                                            to_string(p.padding), full_h, full_w));
    }
  }
  const ConstantTensor* b = im.optional_constant(node, 2, label, "bias");
  p.bias = b != nullptr;
  const std::string name = im.layer_name(node, index, node.input(1));
  const Value y = im.network().conv_transpose2d(x, p, name);
  im.add_weight(name, "weight", w.shape, w.floats);
  if (b != nullptr) {
    if (!b->is_float || b->floats.size() != static_cast<std::size_t>(p.out_channels)) {
      fail("{}: bias '{}' has shape {}, expected [{}]", label, node.input(2), b->shape.to_string(),
           p.out_channels);
    }
    im.add_weight(name, "bias", Shape{p.out_channels}, b->floats);
  }
  im.bind(node.output(0), y);
}

void import_batch_norm(Importer& im, const ::onnx::NodeProto& node, int index,
                       const std::string& label) {
  Attributes attrs(node, label, {"epsilon", "momentum", "spatial", "training_mode"});
  Importer::need_inputs(node, label, 5, 5);
  if (attrs.get_int("training_mode", 0) != 0)
    attrs.unsupported("training_mode", "must be 0 (inference)");
  if (attrs.get_int("spatial", 1) != 1) attrs.unsupported("spatial", "must be 1");
  im.only_first_output(node, label);
  const Value x = im.value(node.input(0), label);
  const std::int64_t channels =
      im.network().desc(x).shape.rank() >= 2 ? im.network().desc(x).shape[1] : 0;
  const std::string name = im.layer_name(node, index, node.input(1));
  const Value y = im.network().batch_norm2d(x, {.eps = attrs.get_float("epsilon", 1e-5f)}, name);
  const char* suffixes[] = {"weight", "bias", "running_mean", "running_var"};
  for (int i = 0; i < 4; ++i) {
    const ConstantTensor& t = im.constant(node.input(i + 1), label, suffixes[i]);
    if (!t.is_float || t.floats.size() != static_cast<std::size_t>(channels)) {
      fail("{}: '{}' has shape {}, expected [{}]", label, node.input(i + 1), t.shape.to_string(),
           channels);
    }
    im.add_weight(name, suffixes[i], Shape{channels}, t.floats);
  }
  im.bind(node.output(0), y);
}

void import_pool(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label,
                 bool max) {
  Attributes attrs(
      node, label,
      max ? std::initializer_list<std::string_view>{"auto_pad", "ceil_mode", "dilations",
                                                    "kernel_shape", "pads", "storage_order",
                                                    "strides"}
          : std::initializer_list<std::string_view>{"auto_pad", "ceil_mode", "count_include_pad",
                                                    "dilations", "kernel_shape", "pads",
                                                    "strides"});
  Importer::need_inputs(node, label, 1, 1);
  im.only_first_output(node, label);
  if (!attrs.has("kernel_shape")) fail("{}: attribute 'kernel_shape' is required", label);
  if (max && attrs.get_int("storage_order", 0) != 0)
    attrs.unsupported("storage_order", "must be 0");
  // A zero Pad feeding an AveragePool folds into its padding when the pool then counts every
  // padded zero (count_include_pad, or no padding of its own) and its windows stop at the
  // padded edge (no ceil_mode), and the sum stays smaller than the kernel: inception_v3's 3x3
  // pools, exported as Pad + AveragePool.
  // (Not into a MaxPool: its padding is -inf, the Pad's zeros are values.)
  const PendingPad* pad = max ? nullptr : im.pending_pad(node.input(0));
  Value x = pad != nullptr ? pad->input : im.spatial_input(node, label);
  // N x C x L (MaxPool1d, AvgPool1d) pools as a window of height 1.
  const std::size_t spatial_dims = im.network().desc(x).shape.rank() - 2;
  Pool2dParams p;
  p.kernel = Importer::pair_attribute(attrs, "kernel_shape", 1, spatial_dims);
  // ONNX's default stride is 1, not the kernel.
  p.stride = Importer::pair_attribute(attrs, "strides", 1, spatial_dims);
  p.dilation = Importer::pair_attribute(attrs, "dilations", 1, spatial_dims);
  // AveragePool has dilations from opset 19; cgr's average pooling has none.
  if (!max && (p.dilation.h != 1 || p.dilation.w != 1))
    attrs.unsupported("dilations", "must be 1 for AveragePool");
  p.ceil_mode = attrs.get_int("ceil_mode", 0) != 0;
  p.count_include_pad = attrs.get_int("count_include_pad", 0) != 0;
  Shape padded = im.network().desc(x).shape;
  if (pad != nullptr) {
    if (spatial_dims == 2) padded[2] += pad->padding.top + pad->padding.bottom;
    padded[padded.rank() - 1] += pad->padding.left + pad->padding.right;
  }
  p.padding = Importer::window_padding(attrs, padded, p.kernel, p.stride, p.dilation);
  if (pad != nullptr) {
    const bool own_padding = p.padding.top != 0 || p.padding.left != 0 || p.padding.bottom != 0 ||
                             p.padding.right != 0;
    // A window must also keep a tap in the input (padding smaller than the kernel).
    const bool fits = p.padding.top + pad->padding.top < p.kernel.h &&
                      p.padding.bottom + pad->padding.bottom < p.kernel.h &&
                      p.padding.left + pad->padding.left < p.kernel.w &&
                      p.padding.right + pad->padding.right < p.kernel.w;
    if (p.ceil_mode || (own_padding && !p.count_include_pad) || !fits) {
      // Not foldable: the Pad becomes its own layer (spatial_input materialises it).
      pad = nullptr;
      x = im.spatial_input(node, label);
      p.padding = Importer::window_padding(attrs, im.network().desc(x).shape, p.kernel, p.stride,
                                           p.dilation);
    }
  }
  if (pad != nullptr) {
    p.padding.top += pad->padding.top;
    p.padding.left += pad->padding.left;
    p.padding.bottom += pad->padding.bottom;
    p.padding.right += pad->padding.right;
    p.count_include_pad = true;
  }
  const std::string name = im.layer_name(node, index);
  im.bind(node.output(0),
          max ? im.network().max_pool2d(x, p, name) : im.network().avg_pool2d(x, p, name));
}

void import_max_pool(Importer& im, const ::onnx::NodeProto& node, int index,
                     const std::string& label) {
  import_pool(im, node, index, label, true);
}

void import_average_pool(Importer& im, const ::onnx::NodeProto& node, int index,
                         const std::string& label) {
  import_pool(im, node, index, label, false);
}

void import_global_average_pool(Importer& im, const ::onnx::NodeProto& node, int index,
                                const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 1, 1);
  im.bind(node.output(0),
          im.network().global_avg_pool(im.spatial_input(node, label), im.layer_name(node, index)));
}

// Linear from a constant weight: y = x Wᵀ + b with W [out, in].
Value linear(Importer& im, Value x, std::vector<float> weight, std::int64_t out, std::int64_t in,
             const std::vector<float>* bias, const std::string& name) {
  const Value y = im.network().linear(x, {.out_features = out, .bias = bias != nullptr}, name);
  im.add_weight(name, "weight", Shape{out, in}, std::move(weight));
  if (bias != nullptr) im.add_weight(name, "bias", Shape{out}, *bias);
  return y;
}

// A float constant operand of a matrix product; `role` names it in errors.
const ConstantTensor& float_constant(Importer& im, const ::onnx::NodeProto& node, int input,
                                     const std::string& label, std::string_view role) {
  const ConstantTensor& t = im.constant(node.input(input), label, role);
  if (!t.is_float) fail("{}: {} '{}' must be a float tensor", label, role, node.input(input));
  return t;
}

// A MatMul layer for a product with at least one computed operand (a constant one becomes the
// layer's weight "<name>.constant").
Value matmul(Importer& im, const ::onnx::NodeProto& node, const std::string& label,
             const MatMulParams& params, const std::string& name) {
  const bool a_constant = im.is_constant(node.input(0)), b_constant = im.is_constant(node.input(1));
  if (a_constant && b_constant) {
    fail("{}: A '{}' and B '{}' are both constants; a product of constants is not folded", label,
         node.input(0), node.input(1));
  }
  if (!a_constant && !b_constant) {
    return im.network().matmul(im.value(node.input(0), label), im.value(node.input(1), label),
                               params, name);
  }
  const int c = a_constant ? 0 : 1;
  const ConstantTensor& t = float_constant(im, node, c, label, a_constant ? "A" : "B");
  const Value y = im.network().matmul(im.value(node.input(1 - c), label),
                                      MatMulConstant{t.shape, a_constant}, params, name);
  im.add_weight(name, "constant", t.shape, t.floats);
  return y;
}

// Gemm's + beta * C, C broadcast to the product's [M, N] (a constant scaled here, a computed C
// by a Binary Mul when beta is not 1). beta = 0 drops C, as ONNX Runtime does.
Value add_gemm_c(Importer& im, const ::onnx::NodeProto& node, const std::string& label, Value y,
                 float beta, const std::string& name) {
  if (beta == 0.0f) return y;
  const Shape out = im.network().desc(y).shape;
  const auto check = [&](const Shape& c) {
    if (broadcast_shapes(c, out) != out) {
      fail("{}: C '{}' of shape {} does not broadcast to the product's shape {}", label,
           node.input(2), c.to_string(), out.to_string());
    }
  };
  if (im.is_constant(node.input(2))) {
    const ConstantTensor& c = float_constant(im, node, 2, label, "C");
    check(c.shape);
    std::vector<float> values = c.floats;
    for (float& v : values)
      v *= beta;
    const Value sum = im.network().binary(y, BinaryOp::add, BinaryConstant{c.shape}, name + ".C");
    im.add_weight(name + ".C", "constant", c.shape, std::move(values));
    return sum;
  }
  Value c = im.value(node.input(2), label);
  check(im.network().desc(c).shape);
  if (beta != 1.0f) {
    c = im.network().binary(c, BinaryOp::mul, BinaryConstant{Shape{}}, name + ".beta");
    im.add_weight(name + ".beta", "constant", Shape{}, {beta});
  }
  return im.network().binary(y, c, BinaryOp::add, name + ".C");
}

// Gemm: Y = alpha * op(A) op(B) + beta * C, all 2-D. A constant B with a computed A is a Linear
// (alpha folded into the weight, a per-column C into its bias); anything else a MatMul layer.
void import_gemm(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  Attributes attrs(node, label, {"alpha", "beta", "transA", "transB"});
  Importer::need_inputs(node, label, 2, 3);
  const bool trans_a = attrs.get_int("transA", 0) != 0, trans_b = attrs.get_int("transB", 0) != 0;
  const float alpha = attrs.get_float("alpha", 1.0f), beta = attrs.get_float("beta", 1.0f);
  const bool has_c = node.input_size() > 2 && !node.input(2).empty();
  const auto check_2d = [&](const Shape& s, int input, const char* role) {
    if (s.rank() != 2) {
      fail("{}: {} '{}' has shape {}, expected 2 dims", label, role, node.input(input),
           s.to_string());
    }
  };
  if (!im.is_constant(node.input(1)) || im.is_constant(node.input(0))) {
    for (int i = 0; i < 2; ++i) {
      const char* role = i == 0 ? "A" : "B";
      check_2d(im.is_constant(node.input(i))
                   ? float_constant(im, node, i, label, role).shape
                   : im.network().desc(im.value(node.input(i), label)).shape,
               i, role);
    }
    const std::string name = im.layer_name(node, index);
    Value y = matmul(im, node, label,
                     {.transpose_a = trans_a, .transpose_b = trans_b, .alpha = alpha}, name);
    if (has_c) y = add_gemm_c(im, node, label, y, beta, name);
    return im.bind(node.output(0), y);
  }
  Value a = im.value(node.input(0), label);
  if (trans_a) {
    check_2d(im.network().desc(a).shape, 0, "A");
    a = im.network().transpose(a, {1, 0}, im.layer_name(node, index) + ".transA");
  }
  const Shape& as = im.network().desc(a).shape;
  check_2d(as, 0, "A");
  const ConstantTensor& b = float_constant(im, node, 1, label, "B");
  check_2d(b.shape, 1, "B");
  const std::int64_t in = as[1];
  const std::int64_t out = trans_b ? b.shape[0] : b.shape[1];
  if ((trans_b ? b.shape[1] : b.shape[0]) != in) {
    fail("{}: B '{}' of shape {} (transB={}) does not fit A of shape {}", label, node.input(1),
         b.shape.to_string(), trans_b ? 1 : 0, as.to_string());
  }
  std::vector<float> weight(static_cast<std::size_t>(out * in));
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t k = 0; k < in; ++k)
      weight[static_cast<std::size_t>(o * in + k)] =
          alpha * b.floats[static_cast<std::size_t>(trans_b ? o * in + k : k * out + o)];
  // A constant C that only varies along columns ([N], [1, N] or a scalar) is the Linear's bias;
  // any other C is added after it.
  std::vector<float> bias;
  const ConstantTensor* c =
      has_c && im.is_constant(node.input(2)) ? &float_constant(im, node, 2, label, "C") : nullptr;
  const bool c_is_bias = c != nullptr && (c->shape.numel() == out || c->shape.numel() == 1) &&
                         c->shape.rank() <= 2 && (c->shape.rank() < 2 || c->shape[0] == 1) &&
                         (c->shape.rank() == 0 || c->shape.dims().back() == c->shape.numel());
  if (c_is_bias) {
    bias.resize(static_cast<std::size_t>(out));
    for (std::int64_t o = 0; o < out; ++o)
      bias[static_cast<std::size_t>(o)] =
          beta * c->floats[c->floats.size() == 1 ? 0 : static_cast<std::size_t>(o)];
  }
  const std::string name = im.layer_name(node, index, node.input(1));
  Value y = linear(im, a, std::move(weight), out, in, c_is_bias ? &bias : nullptr, name);
  if (has_c && !c_is_bias) y = add_gemm_c(im, node, label, y, beta, name);
  im.bind(node.output(0), y);
}

// MatMul with NumPy's rule: a constant 2-D B with a computed A is a Linear (B transposed into
// its weight, packed once); any other pairing a MatMul layer.
void import_matmul(Importer& im, const ::onnx::NodeProto& node, int index,
                   const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 2, 2);
  const bool linear_form = !im.is_constant(node.input(0)) && im.is_constant(node.input(1)) &&
                           im.constant(node.input(1), label, "B").shape.rank() == 2;
  if (!linear_form) {
    return im.bind(node.output(0), matmul(im, node, label, {}, im.layer_name(node, index)));
  }
  const Value a = im.value(node.input(0), label);
  const ConstantTensor& b = float_constant(im, node, 1, label, "B");
  const Shape& as = im.network().desc(a).shape;
  const std::int64_t in = b.shape[0], out = b.shape[1];
  if (as.rank() < 1 || as.dims().back() != in) {
    fail("{}: A of shape {} does not fit B of shape {}", label, as.to_string(),
         b.shape.to_string());
  }
  std::vector<float> weight(static_cast<std::size_t>(out * in));
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t k = 0; k < in; ++k)
      weight[static_cast<std::size_t>(o * in + k)] =
          b.floats[static_cast<std::size_t>(k * out + o)];
  const std::string name = im.layer_name(node, index, node.input(1));
  im.bind(node.output(0), linear(im, a, std::move(weight), out, in, nullptr, name));
}

CGR_ONNX_OP("Conv", import_conv);
CGR_ONNX_OP("ConvTranspose", import_conv_transpose);
CGR_ONNX_OP("BatchNormalization", import_batch_norm);
CGR_ONNX_OP("MaxPool", import_max_pool);
CGR_ONNX_OP("AveragePool", import_average_pool);
CGR_ONNX_OP("GlobalAveragePool", import_global_average_pool);
CGR_ONNX_OP("Gemm", import_gemm);
CGR_ONNX_OP("MatMul", import_matmul);

}  // namespace
}  // namespace cgr::onnx_import
