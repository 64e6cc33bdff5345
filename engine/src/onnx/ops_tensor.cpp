// ONNX ops that move or reinterpret data: Concat, Flatten, Reshape, Transpose, Squeeze, Unsqueeze,
// Identity, Dropout (inference), Constant, Pad (a zero pad is deferred: a Conv absorbs it; other
// modes and values are a Pad2d), Tile, Expand (a Tile), DepthToSpace, SpaceToDepth, Softmax,
// LogSoftmax and the shape arithmetic exporters emit: Shape, and Gather, Slice, Cast and
// ConstantOfShape, which are folded at import when their inputs are constants (fold.cpp) and
// refused otherwise.
#include <algorithm>

#include "cgr/error.hpp"
#include "onnx/fold.hpp"
#include "onnx/importer.hpp"

namespace cgr::onnx_import {
namespace {

void import_concat(Importer& im, const ::onnx::NodeProto& node, int index,
                   const std::string& label) {
  Attributes attrs(node, label, {"axis"});
  if (!attrs.has("axis")) fail("{}: attribute 'axis' is required", label);
  std::vector<Value> inputs;
  for (const auto& input : node.input())
    inputs.push_back(im.value(input, label));
  im.bind(node.output(0), im.network().concat(inputs, im.layer_name(node, index),
                                              static_cast<int>(attrs.get_int("axis", 1))));
}

void import_transpose(Importer& im, const ::onnx::NodeProto& node, int index,
                      const std::string& label) {
  Attributes attrs(node, label, {"perm"});
  Importer::need_inputs(node, label, 1, 1);
  const Value x = im.value(node.input(0), label);
  const auto rank = static_cast<std::int64_t>(im.network().desc(x).shape.rank());
  std::vector<int> perm;
  for (auto p : attrs.get_ints("perm", {}))
    perm.push_back(static_cast<int>(p < 0 ? p + rank : p));
  if (perm.empty())
    for (auto d = rank; d-- > 0;)
      perm.push_back(static_cast<int>(d));
  im.bind(node.output(0), im.network().transpose(x, perm, im.layer_name(node, index)));
}

void import_identity(Importer& im, const ::onnx::NodeProto& node, int, const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 1, 1);
  im.alias(node.output(0), node.input(0), label);
}

void import_dropout(Importer& im, const ::onnx::NodeProto& node, int, const std::string& label) {
  Attributes attrs(node, label, {"seed", "ratio"});
  Importer::need_inputs(node, label, 1, 3);
  if (const auto* training = im.optional_constant(node, 2, label, "training_mode")) {
    const bool on = training->is_float ? (!training->floats.empty() && training->floats[0] != 0)
                                       : (!training->ints.empty() && training->ints[0] != 0);
    if (on) fail("{}: training_mode is true; only inference (identity) is supported", label);
  } else if (node.input_size() > 2 && !node.input(2).empty()) {
    fail("{}: training_mode must be a constant", label);
  }
  im.only_first_output(node, label);
  im.alias(node.output(0), node.input(0), label);
}

// Shape of a tensor is known at import, computed or constant.
void import_shape(Importer& im, const ::onnx::NodeProto& node, int, const std::string& label) {
  Attributes attrs(node, label, {"start", "end"});
  Importer::need_inputs(node, label, 1, 1);
  const Shape shape = im.is_constant(node.input(0))
                          ? im.constant(node.input(0), label, "input").shape
                          : im.network().desc(im.value(node.input(0), label)).shape;
  const auto rank = static_cast<std::int64_t>(shape.rank());
  auto clamp = [&](std::int64_t v) {
    return std::clamp<std::int64_t>(v < 0 ? v + rank : v, 0, rank);
  };
  const std::int64_t begin = clamp(attrs.get_int("start", 0)),
                     end = clamp(attrs.get_int("end", rank));
  ConstantTensor t;
  t.is_float = false;
  for (auto d = begin; d < end; ++d)
    t.ints.push_back(shape[static_cast<std::size_t>(d)]);
  t.shape = Shape{static_cast<std::int64_t>(t.ints.size())};
  im.set_constant(node.output(0), std::move(t));
}

// Gather, Slice, Cast, ConstantOfShape and the comparisons, selections and ranges of shape
// arithmetic: folded when every input is a constant (the importer tries that before
// dispatching); a computed input gets here.
void import_constant_only(Importer&, const ::onnx::NodeProto& node, int, const std::string& label) {
  for (const auto& input : node.input()) {
    if (!input.empty()) {
      fail(
          "{}: {} is supported on constants only (the shape arithmetic exporters emit), and "
          "input '{}' is computed at run time",
          label, node.op_type(), input);
    }
  }
  fail("{}: {} needs constant inputs", label, node.op_type());
}

// Slice of a computed tensor (one of constants folds before it gets here): starts, ends and
// axes are attributes before opset 10, constant inputs (with steps) from 10.
void import_slice(Importer& im, const ::onnx::NodeProto& node, int index,
                  const std::string& label) {
  const bool attributes = im.opset() < 10;
  Attributes attrs(node, label,
                   attributes ? std::initializer_list<std::string_view>{"starts", "ends", "axes"}
                              : std::initializer_list<std::string_view>{});
  Importer::need_inputs(node, label, attributes ? 1 : 3, attributes ? 1 : 5);
  const Value x = im.value(node.input(0), label);
  SliceParams p;
  const auto ints = [&](int i, const char* role) -> std::vector<std::int64_t> {
    const ConstantTensor* t = im.optional_constant(node, i, label, role);
    if (t == nullptr) return {};
    if (t->is_float) fail("{}: {} '{}' must be an integer tensor", label, role, node.input(i));
    return t->ints;
  };
  if (attributes) {
    if (!attrs.has("starts") || !attrs.has("ends"))
      fail("{}: attributes 'starts' and 'ends' are required", label);
    p.starts = attrs.get_ints("starts", {});
    p.ends = attrs.get_ints("ends", {});
    for (auto a : attrs.get_ints("axes", {}))
      p.axes.push_back(static_cast<int>(a));
  } else {
    p.starts = ints(1, "starts");
    p.ends = ints(2, "ends");
    for (auto a : ints(3, "axes"))
      p.axes.push_back(static_cast<int>(a));
    p.steps = ints(4, "steps");
  }
  im.bind(node.output(0), im.network().slice(x, p, im.layer_name(node, index)));
}

// Split of a computed tensor along `axis` into one Slice per output: sizes from the 'split'
// attribute (< 13) or input (>= 13), else equal parts (num_outputs from 18 allows a smaller
// last part).
void import_split(Importer& im, const ::onnx::NodeProto& node, int index,
                  const std::string& label) {
  const bool split_input = im.opset() >= 13;
  Attributes attrs(node, label,
                   split_input ? std::initializer_list<std::string_view>{"axis", "num_outputs"}
                               : std::initializer_list<std::string_view>{"axis", "split"});
  Importer::need_inputs(node, label, 1, split_input ? 2 : 1);
  const Value x = im.value(node.input(0), label);
  const Shape& shape = im.network().desc(x).shape;
  const auto rank = static_cast<std::int64_t>(shape.rank());
  std::int64_t axis = attrs.get_int("axis", 0);
  if (axis < -rank || axis >= rank)
    attrs.unsupported("axis", fmt::format("is out of range for shape {}", shape.to_string()));
  if (axis < 0) axis += rank;
  const std::int64_t size = shape[static_cast<std::size_t>(axis)];
  std::vector<std::int64_t> sizes;
  if (split_input) {
    if (const ConstantTensor* t = im.optional_constant(node, 1, label, "split")) {
      if (t->is_float) fail("{}: split '{}' must be an integer tensor", label, node.input(1));
      sizes = t->ints;
    }
  } else {
    sizes = attrs.get_ints("split", {});
  }
  const auto outputs = static_cast<std::int64_t>(node.output_size());
  if (sizes.empty()) {
    const std::int64_t parts = attrs.has("num_outputs") ? attrs.get_int("num_outputs", 1) : outputs;
    if (parts != outputs || parts < 1)
      fail("{}: {} outputs for num_outputs {}", label, outputs, parts);
    const std::int64_t each = attrs.has("num_outputs") ? (size + parts - 1) / parts : size / parts;
    if (!attrs.has("num_outputs") && size % parts != 0)
      fail("{}: axis {} of size {} does not split into {} equal parts", label, axis, size, parts);
    for (std::int64_t i = 0, left = size; i < parts; ++i, left -= each)
      sizes.push_back(std::min(each, left));
  }
  std::int64_t total = 0;
  for (auto v : sizes) {
    if (v < 0) fail("{}: a negative split size {}", label, v);
    total += v;
  }
  if (static_cast<std::int64_t>(sizes.size()) != outputs || total != size) {
    fail("{}: split sizes [{}] do not cover axis {} of size {} in {} outputs", label,
         fmt::join(sizes, ", "), axis, size, outputs);
  }
  const std::string name = im.layer_name(node, index);
  std::int64_t start = 0;
  for (int i = 0; i < node.output_size(); ++i) {
    const std::int64_t end = start + sizes[static_cast<std::size_t>(i)];
    if (!node.output(i).empty()) {
      const SliceParams p{{start}, {end}, {static_cast<int>(axis)}, {}};
      im.bind(node.output(i), im.network().slice(x, p, fmt::format("{}.{}", name, i)));
    }
    start = end;
  }
}

// Unsqueeze / Squeeze of a computed tensor: a Reshape to the new dims.
void import_squeeze(Importer& im, const ::onnx::NodeProto& node, int index,
                    const std::string& label) {
  Attributes attrs(node, label, {"axes"});
  Importer::need_inputs(node, label, 1, 2);
  const Value x = im.value(node.input(0), label);
  const ConstantTensor* axes = node.input_size() > 1 && !node.input(1).empty()
                                   ? &im.constant(node.input(1), label, "axes")
                                   : nullptr;
  const Shape shape(
      squeezed_dims(node, im.opset(), im.network().desc(x).shape.dims(), axes, label));
  im.bind(node.output(0), im.network().reshape(x, shape, im.layer_name(node, index)));
}

void import_flatten(Importer& im, const ::onnx::NodeProto& node, int index,
                    const std::string& label) {
  Attributes attrs(node, label, {"axis"});
  Importer::need_inputs(node, label, 1, 1);
  const Value x = im.value(node.input(0), label);
  const Shape& s = im.network().desc(x).shape;
  auto axis = attrs.get_int("axis", 1);
  if (axis < 0) axis += static_cast<std::int64_t>(s.rank());
  if (axis < 0 || axis > static_cast<std::int64_t>(s.rank()))
    attrs.unsupported("axis", fmt::format("{} is out of range for shape {}",
                                          attrs.get_int("axis", 1), s.to_string()));
  // ONNX Flatten always gives 2-D: [prod(dims < axis), prod(dims >= axis)].
  std::int64_t outer = 1;
  for (std::int64_t d = 0; d < axis; ++d)
    outer *= s[static_cast<std::size_t>(d)];
  const std::string name = im.layer_name(node, index);
  if (axis == 1 && s.rank() >= 2) return im.bind(node.output(0), im.network().flatten(x, name, 1));
  im.bind(node.output(0), im.network().reshape(x, Shape{outer, s.numel() / outer}, name));
}

void import_constant(Importer& im, const ::onnx::NodeProto& node, int, const std::string& label) {
  Attributes attrs(node, label,
                   {"value", "value_float", "value_floats", "value_int", "value_ints"});
  ConstantTensor t;
  if (const auto* tensor = attrs.get_tensor("value")) {
    t = decode_tensor(*tensor, label);
  } else if (attrs.has("value_float")) {
    t.floats = {attrs.get_float("value_float", 0.0f)};
  } else if (attrs.has("value_floats")) {
    t.floats = attrs.get_floats("value_floats");
    t.shape = Shape{static_cast<std::int64_t>(t.floats.size())};
  } else if (attrs.has("value_int")) {
    t.is_float = false;
    t.ints = {attrs.get_int("value_int", 0)};
  } else if (attrs.has("value_ints")) {
    t.is_float = false;
    t.ints = attrs.get_ints("value_ints", {});
    t.shape = Shape{static_cast<std::int64_t>(t.ints.size())};
  } else {
    fail(
        "{}: needs one of the attributes value, value_float, value_floats, value_int, "
        "value_ints (sparse_value and strings are not supported)",
        label);
  }
  im.set_constant(node.output(0), std::move(t));
}

void import_pad(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  // Before opset 11 pads and value are attributes; from 11 inputs; from 18 an optional axes
  // input says which dims the pads are for; mode wrap from 19.
  const int opset = im.opset();
  const bool attributes = opset < 11;
  Attributes attrs(node, label,
                   attributes ? std::initializer_list<std::string_view>{"mode", "pads", "value"}
                              : std::initializer_list<std::string_view>{"mode"});
  const std::string mode_name = attrs.get_string("mode", "constant");
  PadMode mode = PadMode::constant;
  if (mode_name == "reflect") {
    mode = PadMode::reflect;
  } else if (mode_name == "edge") {
    mode = PadMode::edge;
  } else if (mode_name == "wrap") {
    if (opset < 19)
      attrs.unsupported("mode",
                        fmt::format("'wrap' exists from opset 19 (the model has {})", opset));
    mode = PadMode::wrap;
  } else if (mode_name != "constant") {
    attrs.unsupported("mode", fmt::format("'{}' is not a pad mode (constant, reflect, edge{})",
                                          mode_name, opset >= 19 ? ", wrap" : ""));
  }
  Importer::need_inputs(node, label, attributes ? 1 : 2, attributes ? 1 : (opset >= 18 ? 4 : 3));
  const Value x = im.spatial_input(node, label);
  const auto rank = static_cast<std::int64_t>(im.network().desc(x).shape.rank());
  std::vector<std::int64_t> given;
  double fill = 0.0;
  if (attributes) {
    if (!attrs.has("pads")) fail("{}: attribute 'pads' is required", label);
    given = attrs.get_ints("pads", {});
    fill = attrs.get_float("value", 0.0f);
  } else {
    const ConstantTensor& pads = im.constant(node.input(1), label, "pads");
    if (pads.is_float) fail("{}: pads '{}' must be an integer tensor", label, node.input(1));
    given = pads.ints;
    if (const ConstantTensor* v = im.optional_constant(node, 2, label, "constant_value")) {
      if (v->shape.numel() != 1) fail("{}: constant_value must be one value", label);
      fill = v->is_float ? double{v->floats.at(0)} : static_cast<double>(v->ints.at(0));
    }
  }
  // pads as [begin of every dim..., end of every dim...] for the dims of x (4, or 3 for an
  // N x C x L input).
  const auto dims = static_cast<std::size_t>(rank);
  std::vector<std::int64_t> p(2 * dims, 0);
  if (const ConstantTensor* axes =
          opset >= 18 ? im.optional_constant(node, 3, label, "axes") : nullptr) {
    if (axes->is_float || given.size() != 2 * axes->ints.size()) {
      fail("{}: axes '{}' must hold integers, half as many as pads", label, node.input(3));
    }
    for (std::size_t i = 0; i < axes->ints.size(); ++i) {
      std::int64_t a = axes->ints[i];
      if (a < -rank || a >= rank) fail("{}: axis {} is out of range for rank {}", label, a, rank);
      if (a < 0) a += rank;
      p[static_cast<std::size_t>(a)] = given[i];
      p[static_cast<std::size_t>(a) + dims] = given[i + axes->ints.size()];
    }
  } else {
    if (given.size() != 2 * dims) {
      fail("{}: pads must hold {} integers for a {}-D input, not {}", label, 2 * dims, dims,
           given.size());
    }
    p = given;
  }
  if (p[0] != 0 || p[1] != 0 || p[dims] != 0 || p[dims + 1] != 0) {
    fail("{}: padding the batch or channel dims is not supported (pads {})", label,
         fmt::join(p, ","));
  }
  for (auto v : p) {
    if (v > kGeometryLimit || v < -kGeometryLimit)
      fail("{}: pad {} is implausibly large", label, v);
  }
  // (top, left, bottom, right); an N x C x L input pads L only (cgr/layers/spatial.hpp).
  const Padding2d padding =
      dims == 3 ? Padding2d(0, p[2], 0, p[5]) : Padding2d(p[2], p[3], p[6], p[7]);
  const bool zeros = mode == PadMode::constant && fill == 0.0 &&
                     std::all_of(p.begin(), p.end(), [](std::int64_t v) { return v >= 0; });
  if (zeros) {
    // Deferred: a consuming Conv absorbs it; anything else materialises a Pad2d layer.
    im.defer_pad(node.output(0), PendingPad{x, padding, im.layer_name(node, index), std::nullopt});
    return;
  }
  // The fill only matters in constant mode (ONNX ignores constant_value otherwise).
  const Pad2dParams params{padding, mode,
                           mode == PadMode::constant ? static_cast<float>(fill) : 0.0f};
  im.bind(node.output(0), im.network().pad2d(x, params, im.layer_name(node, index)));
}

// Tile of a computed tensor by constant repeats (opset 6; 13 widened the types).
void import_tile(Importer& im, const ::onnx::NodeProto& node, int index, const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 2, 2);
  const Value x = im.value(node.input(0), label);
  const ConstantTensor& repeats = im.constant(node.input(1), label, "repeats");
  if (repeats.is_float || repeats.shape.rank() != 1) {
    fail("{}: repeats '{}' must be a 1-D integer tensor", label, node.input(1));
  }
  const Shape& shape = im.network().desc(x).shape;
  if (repeats.ints.size() != shape.rank()) {
    fail("{}: repeats '{}' has {} values for the input of shape {}", label, node.input(1),
         repeats.ints.size(), shape.to_string());
  }
  im.bind(node.output(0), im.network().tile(x, {repeats.ints}, im.layer_name(node, index)));
}

// Expand of a computed tensor (torch's x.repeat exports Expand, then Tile): NumPy broadcasting
// to `shape` is a Tile of the input's size-1 dims, after a Reshape that prepends the missing
// leading 1s; nothing when the shape changes nothing. Expand of constants folds (fold.cpp).
void import_expand(Importer& im, const ::onnx::NodeProto& node, int index,
                   const std::string& label) {
  Attributes attrs(node, label, {});
  Importer::need_inputs(node, label, 2, 2);
  const Value x = im.value(node.input(0), label);
  const ConstantTensor& target = im.constant(node.input(1), label, "shape");
  if (target.is_float || target.shape.rank() != 1) {
    fail("{}: shape '{}' must be a 1-D integer tensor", label, node.input(1));
  }
  const Shape in = im.network().desc(x).shape;
  const std::size_t rank = std::max(in.rank(), target.ints.size());
  std::vector<std::int64_t> padded(rank - in.rank(), 1), repeats(rank, 1);
  padded.insert(padded.end(), in.dims().begin(), in.dims().end());
  for (std::size_t d = 0; d < rank; ++d) {
    const std::size_t t = d + target.ints.size();
    const std::int64_t want = t >= rank ? target.ints[t - rank] : 1;
    if (want == padded[d] || want == 1) continue;
    if (padded[d] != 1 || want < 0) {
      fail("{}: the input of shape {} does not broadcast to [{}]", label, in.to_string(),
           fmt::join(target.ints, ", "));
    }
    repeats[d] = want;
  }
  const std::string name = im.layer_name(node, index);
  const bool same_rank = rank == in.rank();
  if (same_rank &&
      std::all_of(repeats.begin(), repeats.end(), [](std::int64_t r) { return r == 1; })) {
    return im.alias(node.output(0), node.input(0), label);
  }
  const Value shaped = same_rank ? x : im.network().reshape(x, Shape(padded), name + ".rank");
  if (std::all_of(repeats.begin(), repeats.end(), [](std::int64_t r) { return r == 1; })) {
    return im.bind(node.output(0), shaped);
  }
  im.bind(node.output(0), im.network().tile(shaped, {repeats}, name));
}

// DepthToSpace (mode DCR, the only one before opset 11 and the default after, or CRD: torch's
// pixel_shuffle) and SpaceToDepth of NCHW, as Reshape -> Transpose -> Reshape: channel blocks
// become b x b pixel blocks, and back.
void import_depth_to_space(Importer& im, const ::onnx::NodeProto& node, int index,
                           const std::string& label) {
  const bool to_space = node.op_type() == "DepthToSpace";
  const bool has_mode = to_space && im.opset() >= 11;
  Attributes attrs(node, label,
                   has_mode ? std::initializer_list<std::string_view>{"blocksize", "mode"}
                            : std::initializer_list<std::string_view>{"blocksize"});
  Importer::need_inputs(node, label, 1, 1);
  const Value x = im.value(node.input(0), label);
  const Shape s = im.network().desc(x).shape;
  if (s.rank() != 4) {
    fail("{}: input '{}' has shape {}; {} takes N x C x H x W", label, node.input(0), s.to_string(),
         node.op_type());
  }
  if (!attrs.has("blocksize")) fail("{}: attribute 'blocksize' is required", label);
  const std::int64_t b = attrs.get_int("blocksize", 1);
  if (b < 1 || b > kGeometryLimit)
    attrs.unsupported("blocksize", fmt::format("{} is out of range", b));
  const std::string mode = attrs.get_string("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") {
    attrs.unsupported("mode", fmt::format("'{}' is not a mode (DCR, CRD)", mode));
  }
  const std::int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  const std::string name = im.layer_name(node, index);
  Network& net = im.network();
  if (to_space) {
    if (c % (b * b) != 0) {
      fail("{}: {} channels do not split into blocks of {}x{}", label, c, b, b);
    }
    const std::int64_t depth = c / (b * b);
    // DCR: channel = (row * b + column) * depth + d; CRD: (d * b + row) * b + column.
    const bool dcr = mode == "DCR";
    const Value blocks = net.reshape(
        x, dcr ? Shape{n, b, b, depth, h, w} : Shape{n, depth, b, b, h, w}, name + ".blocks");
    const Value moved = net.transpose(
        blocks, dcr ? std::vector<int>{0, 3, 4, 1, 5, 2} : std::vector<int>{0, 1, 4, 2, 5, 3},
        name);
    return im.bind(node.output(0),
                   net.reshape(moved, Shape{n, depth, h * b, w * b}, name + ".merge"));
  }
  if (h % b != 0 || w % b != 0) {
    fail("{}: the input of shape {} does not split into blocks of {}x{}", label, s.to_string(), b,
         b);
  }
  const Value blocks = net.reshape(x, Shape{n, c, h / b, b, w / b, b}, name + ".blocks");
  const Value moved = net.transpose(blocks, {0, 3, 5, 1, 2, 4}, name);
  im.bind(node.output(0), net.reshape(moved, Shape{n, c * b * b, h / b, w / b}, name + ".merge"));
}

void import_reshape(Importer& im, const ::onnx::NodeProto& node, int index,
                    const std::string& label) {
  Attributes attrs(node, label, {"allowzero"});
  Importer::need_inputs(node, label, 2, 2);
  const bool allow_zero = attrs.get_int("allowzero", 0) != 0;
  const Value x = im.value(node.input(0), label);
  const Shape& in = im.network().desc(x).shape;
  const ConstantTensor& shape = im.constant(node.input(1), label, "shape");
  if (shape.is_float) fail("{}: shape '{}' must be an integer tensor", label, node.input(1));
  std::vector<std::int64_t> dims = shape.ints;
  int infer = -1;
  std::int64_t known = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allow_zero) {
      if (i >= in.rank())
        fail("{}: shape {} copies dim {} of a rank-{} input", label, fmt::join(shape.ints, ","), i,
             in.rank());
      dims[i] = in[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) fail("{}: shape {} has more than one -1", label, fmt::join(shape.ints, ","));
      infer = static_cast<int>(i);
    } else if (dims[i] <= 0 || __builtin_mul_overflow(known, dims[i], &known)) {
      fail("{}: shape {} is not supported", label, fmt::join(shape.ints, ","));
    }
  }
  if (infer >= 0) {
    if (known == 0 || in.numel() % known != 0) {
      fail("{}: cannot reshape {} to {}", label, in.to_string(), fmt::join(shape.ints, ","));
    }
    dims[static_cast<std::size_t>(infer)] = in.numel() / known;
  }
  im.bind(node.output(0),
          im.network().reshape(x, Shape(std::move(dims)), im.layer_name(node, index)));
}

// Softmax and LogSoftmax: the same axis rules in every version.
void import_softmax(Importer& im, const ::onnx::NodeProto& node, int index,
                    const std::string& label) {
  const bool log = node.op_type() == "LogSoftmax";
  Attributes attrs(node, label, {"axis"});
  Importer::need_inputs(node, label, 1, 1);
  const Value x = im.value(node.input(0), label);
  const Shape s = im.network().desc(x).shape;
  const auto rank = static_cast<std::int64_t>(s.rank());
  std::int64_t axis = attrs.get_int("axis", im.opset() >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    attrs.unsupported("axis", fmt::format("is out of range for shape {}", s.to_string()));
  const std::string name = im.layer_name(node, index);
  Network& net = im.network();
  const auto normalise = [&](Value v, int along) {
    return log ? net.log_softmax(v, name, along) : net.softmax(v, name, along);
  };
  if (im.opset() >= 13 || axis == rank - 1) {
    return im.bind(node.output(0), normalise(x, static_cast<int>(axis)));
  }
  // Before opset 13, Softmax normalises over all dims from `axis` on, flattened together.
  std::int64_t outer = 1;
  for (std::int64_t d = 0; d < axis; ++d)
    outer *= s[static_cast<std::size_t>(d)];
  const Value flat = net.reshape(x, Shape{outer, s.numel() / outer}, name + ".flatten");
  im.bind(node.output(0), net.reshape(normalise(flat, -1), s, name + ".unflatten"));
}

CGR_ONNX_OP("Concat", import_concat);
CGR_ONNX_OP("Flatten", import_flatten);
CGR_ONNX_OP("Reshape", import_reshape);
CGR_ONNX_OP("Transpose", import_transpose);
CGR_ONNX_OP("Squeeze", import_squeeze);
CGR_ONNX_OP("Unsqueeze", import_squeeze);
CGR_ONNX_OP("Identity", import_identity);
CGR_ONNX_OP("Dropout", import_dropout);
CGR_ONNX_OP("Constant", import_constant);
CGR_ONNX_OP("Pad", import_pad);
CGR_ONNX_OP("Tile", import_tile);
CGR_ONNX_OP("DepthToSpace", import_depth_to_space);
CGR_ONNX_OP("SpaceToDepth", import_depth_to_space);
CGR_ONNX_OP("Softmax", import_softmax);
CGR_ONNX_OP("LogSoftmax", import_softmax);
CGR_ONNX_OP("Shape", import_shape);
CGR_ONNX_OP("Gather", import_constant_only);
CGR_ONNX_OP("Slice", import_slice);
CGR_ONNX_OP("Split", import_split);
CGR_ONNX_OP("Cast", import_constant_only);
CGR_ONNX_OP("ConstantOfShape", import_constant_only);
// Shape arithmetic with no layer: comparisons, selections and ranges on constants.
CGR_ONNX_OP("Equal", import_constant_only);
CGR_ONNX_OP("Less", import_constant_only);
CGR_ONNX_OP("Greater", import_constant_only);
CGR_ONNX_OP("LessOrEqual", import_constant_only);
CGR_ONNX_OP("GreaterOrEqual", import_constant_only);
CGR_ONNX_OP("And", import_constant_only);
CGR_ONNX_OP("Or", import_constant_only);
CGR_ONNX_OP("Not", import_constant_only);
CGR_ONNX_OP("Where", import_constant_only);
CGR_ONNX_OP("Range", import_constant_only);
CGR_ONNX_OP("Floor", import_constant_only);
CGR_ONNX_OP("Ceil", import_constant_only);
CGR_ONNX_OP("Expand", import_expand);

}  // namespace
}  // namespace cgr::onnx_import
