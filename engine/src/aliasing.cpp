// Copies the engine does not run. After lowering, two kinds of op only move bytes:
//   - a Flatten or Reshape (the layer's output_is_input_view): its output becomes a view of
//     its input, the same bytes, and readers read those;
//   - a Concat whose inputs are each one contiguous run of its output (every dimension before
//     the axis is 1: batch 1 along channels), at offsets aligned to kInPlaceAlignment: each
//     input's producer writes straight into its slice of the output.
// The op is then dropped. Views and slices are values with alias_of set; the hazard analysis
// sees through them (CompiledEngine::data_of: a reader of the Concat output depends on every
// producer of a part, a part's producers stay independent of each other, so branches stay
// concurrent), and the arena plan gives a slice its place inside the Concat output's block,
// whose lifetime spans all of its writers and readers (plan_memory's other_writers).
// Values the user or an exit names keep their own op: outputs, exit logits, speculation
// points. With EngineOptions::fuse off nothing is elided.
#include <algorithm>

#include "build_steps.hpp"
#include "cgr/error.hpp"
#include "cgr/layers/concat.hpp"

namespace cgr {
namespace detail {
namespace {

// Offsets of in-place slices are multiples of this: cuDNN and vectorised kernels expect
// aligned outputs, and one device-neutral rule keeps the same graph on every backend.
constexpr std::size_t kInPlaceAlignment = 256;

void collect_data(const CompiledEngine& engine, int value, std::vector<int>& out) {
  const EngineValue& v = engine.values[static_cast<std::size_t>(value)];
  if (v.view) {
    collect_data(engine, v.alias_of, out);
  } else if (!v.parts.empty()) {
    for (const int part : v.parts)
      collect_data(engine, part, out);
  } else {
    out.push_back(value);
  }
}

}  // namespace

std::vector<int> CompiledEngine::data_of(int value) const {
  std::vector<int> data;
  collect_data(*this, value, data);
  std::sort(data.begin(), data.end());
  data.erase(std::unique(data.begin(), data.end()), data.end());
  return data;
}

OpAccess CompiledEngine::data_access(int op) const {
  const CompiledOp& compiled = ops[static_cast<std::size_t>(op)];
  OpAccess access{compiled.name, compiled.kind, {}, data_of(compiled.output)};
  for (const int in : compiled.inputs) {
    const std::vector<int> data = data_of(in);
    access.reads.insert(access.reads.end(), data.begin(), data.end());
  }
  return access;
}

void elide_copies(const Network& net, CompiledEngine& engine, std::vector<LayerOp>& layer_ops) {
  if (!engine.options.fuse) return;
  std::vector<bool> pinned(engine.values.size(), false);
  for (const auto& [name, value] : net.outputs())
    pinned[static_cast<std::size_t>(value.id)] = true;
  for (const auto& e : net.exits()) {
    pinned[static_cast<std::size_t>(e.logits.id)] = true;
    if (e.speculate_until.valid()) pinned[static_cast<std::size_t>(e.speculate_until.id)] = true;
  }
  auto value = [&](int id) -> EngineValue& { return engine.values[static_cast<std::size_t>(id)]; };
  // Written by ops: produced, or itself a Concat output written in place.
  auto written_by_ops = [&](int id) { return value(id).producer >= 0 || !value(id).parts.empty(); };

  std::vector<bool> dropped(engine.ops.size(), false);
  for (std::size_t index = 0; index < engine.ops.size(); ++index) {
    const CompiledOp& op = engine.ops[index];
    const Layer* layer = layer_ops[index].layer;
    if (layer == nullptr || op.layers.size() != 1 || pinned[static_cast<std::size_t>(op.output)]) {
      continue;
    }
    if (layer->output_is_input_view()) {
      EngineValue& out = value(op.output);
      out.alias_of = op.inputs[0];
      out.view = true;
      out.producer = -1;
      dropped[index] = true;
      continue;
    }
    const auto* concat = layer_cast<Concat>(*layer);
    if (concat == nullptr || concat->geometry().outer != 1) continue;
    const ConcatGeometry& g = concat->geometry();
    std::vector<int> parts = op.inputs;
    std::sort(parts.begin(), parts.end());
    if (std::adjacent_find(parts.begin(), parts.end()) != parts.end()) continue;  // cat(x, x)
    bool in_place = true;
    for (std::size_t k = 0; k < op.inputs.size() && in_place; ++k) {
      const int part = op.inputs[k];
      const std::size_t offset = static_cast<std::size_t>(g.offsets[k]) * sizeof(float);
      in_place = !pinned[static_cast<std::size_t>(part)] && value(part).alias_of < 0 &&
                 written_by_ops(part) && offset % kInPlaceAlignment == 0;
    }
    if (!in_place) continue;
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      EngineValue& part = value(op.inputs[k]);
      part.alias_of = op.output;
      part.alias_offset = static_cast<std::size_t>(g.offsets[k]) * sizeof(float);
    }
    EngineValue& out = value(op.output);
    out.parts = op.inputs;
    out.producer = -1;
    dropped[index] = true;
  }

  std::vector<int> new_index(engine.ops.size(), -1);
  std::vector<CompiledOp> ops;
  std::vector<LayerOp> kept;
  for (std::size_t index = 0; index < engine.ops.size(); ++index) {
    if (dropped[index]) continue;
    new_index[index] = static_cast<int>(ops.size());
    ops.push_back(std::move(engine.ops[index]));
    kept.push_back(std::move(layer_ops[index]));
  }
  engine.ops = std::move(ops);
  layer_ops = std::move(kept);
  for (auto& v : engine.values) {
    if (v.producer >= 0) v.producer = new_index[static_cast<std::size_t>(v.producer)];
  }
}

std::size_t storage_offset(const CompiledEngine& engine, int value, int* root) {
  std::size_t offset = 0;
  int id = value;
  while (engine.values[static_cast<std::size_t>(id)].alias_of >= 0) {
    offset += engine.values[static_cast<std::size_t>(id)].alias_offset;
    id = engine.values[static_cast<std::size_t>(id)].alias_of;
  }
  if (root != nullptr) *root = id;
  return offset;
}

}  // namespace detail
}  // namespace cgr
