// ONNX Resize and Upsample as a Resize layer, with each version's semantics:
//   Upsample 7    scales an attribute; nearest or linear; asymmetric coordinates
//   Upsample 9    scales a constant input (deprecated from 10: Resize replaces it)
//   Resize 10     X, scales; nearest or linear; asymmetric coordinates
//   Resize 11     X, roi, scales, [sizes]; coordinate_transformation_mode, nearest_mode,
//                 cubic_coeff_a, exclude_outside, extrapolation_value
//   Resize 13     roi and scales optional; tf_half_pixel_for_nn removed
//   Resize 18     antialias, axes, keep_aspect_ratio_policy
//   Resize 19     half_pixel_symmetric
// Before opset 11 there is no nearest_mode: nearest follows ONNX Runtime's reading (truncate
// when an axis grows, round up when it shrinks). Refused with the attribute named: cubic,
// tf_crop_and_resize (needs roi), antialias, exclude_outside, and resizing a dim above the last
// two (N and C of NCHW).
#include <algorithm>
#include <cmath>
#include <limits>

#include "cgr/error.hpp"
#include "onnx/importer.hpp"

namespace cgr::onnx_import {
namespace {

ResizeMode parse_mode(const Attributes& attrs) {
  const std::string mode = attrs.get_string("mode", "nearest");
  if (mode == "nearest") return ResizeMode::nearest;
  if (mode == "linear") return ResizeMode::linear;
  attrs.unsupported("mode", fmt::format("'{}' is not supported (nearest and linear are)", mode));
}

ResizeCoordinates parse_coordinates(const Attributes& attrs, int opset) {
  const std::string name = attrs.get_string("coordinate_transformation_mode", "half_pixel");
  const auto refuse = [&](std::string_view why) -> ResizeCoordinates {
    attrs.unsupported("coordinate_transformation_mode", fmt::format("'{}' {}", name, why));
  };
  if (name == "half_pixel") return ResizeCoordinates::half_pixel;
  if (name == "pytorch_half_pixel") return ResizeCoordinates::pytorch_half_pixel;
  if (name == "align_corners") return ResizeCoordinates::align_corners;
  if (name == "asymmetric") return ResizeCoordinates::asymmetric;
  if (name == "tf_half_pixel_for_nn") {
    if (opset >= 13)
      return refuse(fmt::format("was removed in opset 13 (the model has {})", opset));
    return ResizeCoordinates::tf_half_pixel_for_nn;
  }
  if (name == "half_pixel_symmetric") {
    if (opset < 19) return refuse(fmt::format("exists from opset 19 (the model has {})", opset));
    return ResizeCoordinates::half_pixel_symmetric;
  }
  if (name == "tf_crop_and_resize") return refuse("(crops by roi) is not supported");
  return refuse("is not a coordinate transformation");
}

NearestRounding parse_rounding(const Attributes& attrs) {
  const std::string name = attrs.get_string("nearest_mode", "round_prefer_floor");
  if (name == "round_prefer_floor") return NearestRounding::round_prefer_floor;
  if (name == "round_prefer_ceil") return NearestRounding::round_prefer_ceil;
  if (name == "floor") return NearestRounding::floor;
  if (name == "ceil") return NearestRounding::ceil;
  attrs.unsupported("nearest_mode", fmt::format("'{}' is not a nearest mode", name));
}

// A constant input with no elements stands for an absent one (opset 11 needs an empty scales
// when sizes is given).
const ConstantTensor* present_constant(Importer& im, const ::onnx::NodeProto& node, int index,
                                       const std::string& label, std::string_view role) {
  const ConstantTensor* t = im.optional_constant(node, index, label, role);
  return t != nullptr && t->shape.numel() > 0 ? t : nullptr;
}

// The scales as floats, checked to be positive and finite.
std::vector<float> read_scales(const ConstantTensor& t, const ::onnx::NodeProto& node, int index,
                               const std::string& label) {
  if (!t.is_float) fail("{}: scales '{}' must be a float tensor", label, node.input(index));
  for (const float v : t.floats) {
    if (!(v > 0.0f) || !std::isfinite(v)) {
      fail("{}: scales '{}' hold {}; each must be positive and finite", label, node.input(index),
           v);
    }
  }
  return t.floats;
}

// Refuses a resize of any dim above the last two, naming the node: the Resize layer
// resamples H and W planes.
void check_planes_kept(const Shape& in, const std::vector<float>& scales,
                       const std::vector<std::int64_t>& sizes, const std::string& label) {
  for (std::size_t d = 0; d + 2 < in.rank(); ++d) {
    const bool changes =
        !scales.empty() ? in[d] > 1 ? scales[d] != 1.0f
                                    : std::floor(static_cast<float>(in[d]) * scales[d]) != in[d]
                        : sizes[d] != in[d];
    if (changes) {
      fail(
          "{}: {} [{}] resize dim {} of the input of shape {}; only the last two dims (H and W of "
          "NCHW) can be resized, the others need scale 1",
          label, !scales.empty() ? "scales" : "sizes",
          !scales.empty() ? fmt::format("{}", fmt::join(scales, ", "))
                          : fmt::format("{}", fmt::join(sizes, ", ")),
          d, in.to_string());
    }
  }
}

void import_upsample(Importer& im, const ::onnx::NodeProto& node, int index,
                     const std::string& label) {
  if (im.opset() >= 10) {
    fail("{}: Upsample is deprecated from opset 10 (the model has {}); Resize replaces it", label,
         im.opset());
  }
  const bool scales_attribute = im.opset() < 9;
  Attributes attrs(node, label,
                   scales_attribute ? std::initializer_list<std::string_view>{"mode", "scales"}
                                    : std::initializer_list<std::string_view>{"mode"});
  Importer::need_inputs(node, label, scales_attribute ? 1 : 2, scales_attribute ? 1 : 2);
  const Value x = im.value(node.input(0), label);
  const Shape in = im.network().desc(x).shape;
  ResizeParams p;
  p.mode = parse_mode(attrs);
  p.coordinates = ResizeCoordinates::asymmetric;
  p.rounding = NearestRounding::legacy;
  if (scales_attribute) {
    if (!attrs.has("scales")) fail("{}: attribute 'scales' is required", label);
    p.scales = attrs.get_floats("scales");
  } else {
    p.scales = read_scales(im.constant(node.input(1), label, "scales"), node, 1, label);
  }
  if (p.scales.size() != in.rank()) {
    fail("{}: {} scales for the input of shape {}", label, p.scales.size(), in.to_string());
  }
  for (const float v : p.scales) {
    if (!(v >= 1.0f) || !std::isfinite(v)) {
      fail("{}: scale {} is below 1 or not finite; Upsample only enlarges", label, v);
    }
  }
  check_planes_kept(in, p.scales, {}, label);
  im.bind(node.output(0), im.network().resize(x, p, im.layer_name(node, index)));
}

// The attributes Resize has at `opset`.
Attributes resize_attributes(const ::onnx::NodeProto& node, const std::string& label, int opset) {
  if (opset < 11) return Attributes(node, label, {"mode"});
  if (opset < 18) {
    return Attributes(node, label,
                      {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                       "exclude_outside", "extrapolation_value"});
  }
  return Attributes(
      node, label,
      {"mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
       "extrapolation_value", "antialias", "axes", "keep_aspect_ratio_policy"});
}

void import_resize(Importer& im, const ::onnx::NodeProto& node, int index,
                   const std::string& label) {
  const int opset = im.opset();
  const Attributes attrs = resize_attributes(node, label, opset);
  if (opset < 11) {
    Importer::need_inputs(node, label, 2, 2);
  } else {
    Importer::need_inputs(node, label, opset < 13 ? 3 : 1, 4);
  }
  const Value x = im.value(node.input(0), label);
  const Shape in = im.network().desc(x).shape;
  const std::size_t rank = in.rank();
  if (rank < 2) {
    fail("{}: the input has shape {}; Resize resamples the last two dims, so it needs 2 or more",
         label, in.to_string());
  }
  ResizeParams p;
  p.mode = parse_mode(attrs);
  if (opset < 11) {
    p.coordinates = ResizeCoordinates::asymmetric;
    p.rounding = NearestRounding::legacy;
  } else {
    p.coordinates = parse_coordinates(attrs, opset);
    p.rounding = parse_rounding(attrs);
    // cubic_coeff_a and extrapolation_value only act in cubic mode and tf_crop_and_resize,
    // both refused; torch writes cubic_coeff_a on every Resize.
    if (attrs.get_int("exclude_outside", 0) != 0) {
      attrs.unsupported("exclude_outside", "must be 0 (it reweights cubic and antialiased taps)");
    }
    if (attrs.get_int("antialias", 0) != 0) attrs.unsupported("antialias", "must be 0");
  }

  // The scales or sizes given, for `axes` (18) or for every dim.
  const int scales_index = opset < 11 ? 1 : 2;
  const ConstantTensor* scales = present_constant(im, node, scales_index, label, "scales");
  const ConstantTensor* sizes =
      opset < 11 ? nullptr : present_constant(im, node, 3, label, "sizes");
  if ((scales == nullptr) == (sizes == nullptr)) {
    fail("{}: needs exactly one of scales and sizes (non-empty constants), not {}", label,
         scales == nullptr ? "neither" : "both");
  }
  std::vector<std::int64_t> axes;
  if (attrs.has("axes")) {
    for (std::int64_t a : attrs.get_ints("axes", {})) {
      if (a < -static_cast<std::int64_t>(rank) || a >= static_cast<std::int64_t>(rank)) {
        attrs.unsupported("axes", fmt::format("value {} is out of range for rank {}", a, rank));
      }
      a = a < 0 ? a + static_cast<std::int64_t>(rank) : a;
      if (std::find(axes.begin(), axes.end(), a) != axes.end()) {
        attrs.unsupported("axes", fmt::format("lists dim {} twice", a));
      }
      axes.push_back(a);
    }
  } else {
    for (std::size_t d = 0; d < rank; ++d)
      axes.push_back(static_cast<std::int64_t>(d));
  }
  const auto given =
      static_cast<std::size_t>(scales != nullptr ? scales->shape.numel() : sizes->shape.numel());
  if (given != axes.size()) {
    fail("{}: {} has {} values for {} {}", label, scales != nullptr ? "scales" : "sizes", given,
         axes.size(),
         attrs.has("axes") ? "axes" : fmt::format("dims of the input of shape {}", in.to_string()));
  }
  if (scales != nullptr) {
    const std::vector<float> values = read_scales(*scales, node, scales_index, label);
    p.scales.assign(rank, 1.0f);
    for (std::size_t i = 0; i < axes.size(); ++i)
      p.scales[static_cast<std::size_t>(axes[i])] = values[i];
  } else {
    if (sizes->is_float) fail("{}: sizes '{}' must be an integer tensor", label, node.input(3));
    p.sizes = in.dims();
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::int64_t v = sizes->ints[i];
      if (v < 0 || v > Resize::kMaxSide) fail("{}: size {} is out of range", label, v);
      p.sizes[static_cast<std::size_t>(axes[i])] = v;
    }
    const std::string policy = attrs.get_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "not_larger" || policy == "not_smaller") {
      // One scale for every listed dim, the smallest (largest) size / input ratio; each size
      // becomes round(scale * input), and the coordinates use that scale.
      float scale = policy == "not_larger" ? std::numeric_limits<float>::infinity() : 0.0f;
      for (const std::int64_t a : axes) {
        const auto d = static_cast<std::size_t>(a);
        if (in[d] == 0) fail("{}: dim {} of the input is empty", label, d);
        const float ratio = static_cast<float>(p.sizes[d]) / static_cast<float>(in[d]);
        scale = policy == "not_larger" ? std::min(scale, ratio) : std::max(scale, ratio);
      }
      p.size_scales.assign(rank, 1.0f);
      for (const std::int64_t a : axes) {
        const auto d = static_cast<std::size_t>(a);
        p.size_scales[d] = scale;
        p.sizes[d] = static_cast<std::int64_t>(std::round(scale * static_cast<float>(in[d])));
      }
    } else if (policy != "stretch") {
      attrs.unsupported(
          "keep_aspect_ratio_policy",
          fmt::format("'{}' is not a policy (stretch, not_larger, not_smaller)", policy));
    }
  }
  if (!p.size_scales.empty()) {
    // A dim above the last two that keeps its size but gets the policy's scale would be
    // resampled: refused like a size change.
    for (std::size_t d = 0; d + 2 < rank; ++d) {
      if (in[d] > 1 && p.size_scales[d] != 1.0f) {
        fail(
            "{}: keep_aspect_ratio_policy gives dim {} of the input of shape {} scale {}; only the "
            "last two dims (H and W of NCHW) can be resized",
            label, d, in.to_string(), p.size_scales[d]);
      }
    }
  }
  check_planes_kept(in, p.scales, p.sizes, label);
  im.bind(node.output(0), im.network().resize(x, p, im.layer_name(node, index)));
}

CGR_ONNX_OP("Resize", import_resize);
CGR_ONNX_OP("Upsample", import_upsample);

}  // namespace
}  // namespace cgr::onnx_import
