// ONNX import: a ModelProto (opset 7-21) becomes a Network plus the Weights its layers bind.
// The op types it understands are supported_onnx_ops() (README lists them). Anything else — an
// op, an attribute or an attribute value — is an Error naming the file, the node, the op type
// and the attribute; nothing is skipped silently.
//
// Layers are named after their weights where the exporter kept PyTorch's names (a Conv whose
// weight initializer is "layer1.0.conv1.weight" becomes layer "layer1.0.conv1"), so a
// state_dict saved as safetensors binds to the imported network by name.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/batch_buckets.hpp"
#include "cgr/network.hpp"
#include "cgr/weights.hpp"

namespace cgr {

// A graph output to import as an early-exit head (Network::exit) instead of an output: the
// head's logits (N x classes) come back once, under the output's name, when it ran.
// `speculate_until` names the ONNX tensor (any node output or graph input) the backbone keeps
// computing while the exit decides, e.g. the next stage's output; empty: nothing is speculated.
struct OnnxExit {
  std::string output = {};
  std::string speculate_until = {};
};

struct OnnxImportOptions {
  // Concrete shapes for graph inputs whose dims are symbolic ("batch") or missing.
  std::map<std::string, Shape, std::less<>> input_shapes = {};
  // Graph outputs that are exit heads, in the order the exits are declared (at least one
  // graph output must stay an output).
  std::vector<OnnxExit> exits = {};
  // Bound on the elements constant folding (the shape arithmetic exporters emit) may build in
  // one import, all folded nodes together: a larger model is refused with an error naming the
  // node, never hours of folding or gigabytes of constants from a small file.
  std::int64_t max_folded_elements = std::int64_t{1} << 27;
};

struct OnnxModel {
  Network network;
  Weights weights;
  int opset = 0;
  std::string producer;  // e.g. "pytorch 1.13.0"
};

OnnxModel import_onnx(const std::filesystem::path& path, const OnnxImportOptions& options = {});
// `what` names the source in error messages (a file name).
OnnxModel import_onnx(std::span<const std::byte> bytes, std::string_view what,
                      const OnnxImportOptions& options = {});

// One import and engine per batch bucket (cgr/batch_buckets.hpp): every graph input's leading
// dim becomes the bucket, its other dims come from options.input_shapes or the file (a
// symbolic dim other than the batch must be given there).
BucketedEngine build_onnx_buckets(const std::filesystem::path& path,
                                  std::vector<std::int64_t> buckets,
                                  const EngineOptions& engine_options = {},
                                  OnnxImportOptions options = {});

// The op types import_onnx understands, sorted: the keys of its dispatch table. Gather, Slice,
// Cast and ConstantOfShape only on constants (the shape arithmetic exporters emit).
std::vector<std::string> supported_onnx_ops();

}  // namespace cgr
