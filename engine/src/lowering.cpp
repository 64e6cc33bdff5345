// Lowering: from the Network's layers to the engine's ops. Keeps only layers that reach an
// output, binds weights by name (reporting every missing, unexpected or mis-shaped one at
// once), and fuses chains the kernels run in one pass:
//   Conv2d [-> BatchNorm2d] [-> Add(residual)] [-> activation] [-> Mul(squeeze-excitation)],
//   Add -> activation,   GlobalAvgPool -> Flatten / Reshape -> Linear (a pooled input),   and
//   Conv2d 1x1 [-> BatchNorm2d] [-> activation] -> depthwise Conv2d (an expansion prologue),
// where each fused intermediate value is read only by the next layer and is not an output,
// and an activation is a ReLU, LeakyReLU, Clip or Unary layer (SiLU, HardSwish, Sigmoid, ...).
// A BatchNorm2d is folded into the weights of the conv before it; a residual Add, an
// activation and the channel Mul of a squeeze-excitation block (an N x C x 1 x 1 result
// scaling an N x C x H x W tensor) become the op's epilogue, as far as its layer supports
// (supported_epilogue).
// A fused op takes the program position of its last layer, so every value it reads
// (including a residual produced late in program order) is written before it.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "build_steps.hpp"
#include "cgr/error.hpp"
#include "cgr/layers/add.hpp"
#include "cgr/layers/batch_norm2d.hpp"
#include "cgr/layers/binary.hpp"
#include "cgr/layers/clip.hpp"
#include "cgr/layers/conv2d.hpp"
#include "cgr/layers/global_avg_pool.hpp"
#include "cgr/layers/leaky_relu.hpp"
#include "cgr/layers/relu.hpp"
#include "cgr/layers/unary.hpp"

namespace cgr::detail {
namespace {

struct NetworkUse {
  std::vector<bool> live;                   // per layer
  std::vector<std::vector<int>> consumers;  // per value: live layers reading it
  std::vector<bool> is_output;              // per value
};

NetworkUse analyse_use(const Network& net, bool keep_exits) {
  const int layers = net.layer_count();
  int value_count = 0;
  for (int i = 0; i < layers; ++i)
    value_count = std::max(value_count, net.layer_output(i).id + 1);
  for (Value v : net.inputs())
    value_count = std::max(value_count, v.id + 1);

  NetworkUse use;
  use.live.assign(static_cast<std::size_t>(layers), false);
  use.consumers.resize(static_cast<std::size_t>(value_count));
  use.is_output.assign(static_cast<std::size_t>(value_count), false);
  std::vector<int> stack;
  for (const auto& [name, v] : net.outputs()) {
    use.is_output[v.id] = true;
    if (net.producer(v) >= 0) stack.push_back(net.producer(v));
  }
  if (keep_exits) {
    for (const auto& e : net.exits()) {
      use.is_output[e.logits.id] = true;
      if (net.producer(e.logits) >= 0) stack.push_back(net.producer(e.logits));
    }
  }
  while (!stack.empty()) {
    const int layer = stack.back();
    stack.pop_back();
    if (use.live[layer]) continue;
    use.live[layer] = true;
    for (Value in : net.layer_inputs(layer)) {
      if (net.producer(in) >= 0) stack.push_back(net.producer(in));
    }
  }
  for (int i = 0; i < layers; ++i) {
    if (!use.live[i]) continue;
    for (Value in : net.layer_inputs(i))
      use.consumers[in.id].push_back(i);
  }
  return use;
}

// The activation a layer computes, when it is one an epilogue can apply.
std::optional<math::Activation> activation_of(const Layer& layer) {
  using math::ActivationKind;
  if (layer_cast<Relu>(layer) != nullptr) return math::Activation{.kind = ActivationKind::relu};
  if (const auto* leaky = layer_cast<LeakyRelu>(layer)) {
    return math::Activation{.kind = ActivationKind::leaky_relu,
                            .alpha = leaky->params().negative_slope};
  }
  if (const auto* clip = layer_cast<Clip>(layer)) {
    return math::Activation{
        .kind = ActivationKind::clip, .alpha = clip->params().low, .beta = clip->params().high};
  }
  if (const auto* unary = layer_cast<Unary>(layer)) {
    return math::Activation{.kind = ActivationKind::unary,
                            .unary = unary->params().op,
                            .alpha = unary->params().alpha,
                            .beta = unary->params().beta};
  }
  return std::nullopt;
}

// The tensor a squeeze-excitation Mul scales by `gate`: when layer `mul` multiplies an
// N x C x H x W tensor by the N x C x 1 x 1 value `gate` (two computed operands).
std::optional<Value> gated_tensor(const Network& net, int mul, Value gate) {
  const auto* binary = layer_cast<Binary>(net.layer(mul));
  if (binary == nullptr || binary->op() != BinaryOp::mul || binary->constant()) return std::nullopt;
  const auto& operands = net.layer_inputs(mul);
  if (operands[0] == operands[1]) return std::nullopt;
  const Value scaled = operands[0] == gate ? operands[1] : operands[0];
  const Shape& g = net.desc(gate).shape;
  const Shape& x = net.desc(scaled).shape;
  if (g.rank() != 4 || x.rank() != 4 || g[0] != x[0] || g[1] != x[1] || g[2] != 1 || g[3] != 1) {
    return std::nullopt;
  }
  return scaled;
}

// Checks the weights against every layer's specs; returns the bound weights per layer.
std::vector<LayerWeights> bind_weights(const Network& net, const Weights& weights,
                                       const NetworkUse& use) {
  std::vector<LayerWeights> bound(static_cast<std::size_t>(net.layer_count()));
  std::vector<std::string> missing, mismatched, wrong_dtype, unexpected;
  std::set<std::string, std::less<>> known;
  for (int i = 0; i < net.layer_count(); ++i) {
    const Layer& layer = net.layer(i);
    for (const WeightSpec& spec : layer.weight_specs()) {
      const std::string name = layer.name() + "." + spec.suffix;
      known.insert(name);
      const Tensor* tensor = weights.find(name);
      if (tensor == nullptr) {
        // Weights of layers pruned from the engine may be absent.
        if (use.live[i] && spec.required) {
          missing.push_back(fmt::format("'{}' ({} '{}', expected {})", name, layer.label(),
                                        layer.name(), spec.shape.to_string()));
        }
        continue;
      }
      if (tensor->shape() != spec.shape) {
        mismatched.push_back(fmt::format("'{}' is {} but {} '{}' expects {}", name,
                                         tensor->shape().to_string(), layer.label(), layer.name(),
                                         spec.shape.to_string()));
        continue;
      }
      if (tensor->dtype() != DType::f32) {
        wrong_dtype.push_back(
            fmt::format("'{}' is {} but {} '{}' computes in f32 (convert the "
                        "checkpoint to float32)",
                        name, to_string(tensor->dtype()), layer.label(), layer.name()));
        continue;
      }
      bound[i].emplace(spec.suffix, tensor);
    }
  }
  for (const auto& [name, tensor] : weights.tensors()) {
    if (!known.contains(name)) unexpected.push_back(fmt::format("'{}'", name));
  }
  if (!missing.empty() || !mismatched.empty() || !wrong_dtype.empty() || !unexpected.empty()) {
    std::string message = "weights do not match the network:";
    if (!missing.empty()) message += fmt::format("\n  missing: {}", fmt::join(missing, ", "));
    if (!mismatched.empty()) {
      message += fmt::format("\n  wrong shape: {}", fmt::join(mismatched, "; "));
    }
    if (!wrong_dtype.empty()) {
      message += fmt::format("\n  wrong dtype: {}", fmt::join(wrong_dtype, "; "));
    }
    if (!unexpected.empty()) {
      message +=
          fmt::format("\n  unexpected (no layer uses them): {}", fmt::join(unexpected, ", "));
    }
    throw Error(message);
  }
  return bound;
}

}  // namespace

// A value a speculating exit names (speculate_until) is kept unfused, so it exists at run time.
std::vector<LayerOp> lower_network(const Network& net, const Weights& weights,
                                   CompiledEngine& engine) {
  const NetworkUse use = analyse_use(net, engine.options.exits != ExitPolicy::off);
  const std::vector<LayerWeights> bound = bind_weights(net, weights, use);
  const bool fuse = engine.options.fuse;

  std::vector<bool> claimed(static_cast<std::size_t>(net.layer_count()), false);
  // The single live consumer of `value`, when fusing across it is allowed (a layer joins at
  // most one fused op: of a residual Add's two conv operands, the first one claims it).
  std::vector<bool> boundary(use.is_output.size(), false);
  for (const auto& e : net.exits()) {
    if (e.speculate_until.valid()) boundary[e.speculate_until.id] = true;
  }
  auto sole_consumer = [&](Value value) -> int {
    if (!fuse || use.is_output[value.id] || boundary[value.id] ||
        use.consumers[value.id].size() != 1) {
      return -1;
    }
    const int consumer = use.consumers[value.id][0];
    return claimed[consumer] ? -1 : consumer;
  };
  struct Lowered {
    int position;  // program position of its last layer
    CompiledOp op;
    LayerOp layer_op;
  };
  std::vector<Lowered> positioned;

  for (int i = 0; i < net.layer_count(); ++i) {
    if (!use.live[i] || claimed[i]) continue;
    const Layer& layer = net.layer(i);
    CompiledOp op;
    LayerOp layer_op;
    op.name = layer.name();
    op.kind = std::string(layer.label());
    op.layers = {i};
    for (Value in : net.layer_inputs(i))
      op.inputs.push_back(in.id);
    Value out = net.layer_output(i);
    int last = i;

    auto absorb = [&](int next) {
      claimed[next] = true;
      op.layers.push_back(next);
      op.name.append("+").append(net.layer(next).name());
      op.kind.append("+").append(net.layer(next).label());
      out = net.layer_output(next);
      last = next;
    };

    // GlobalAvgPool -> Flatten / Reshape to N x C -> Linear (a CNN's classifier or exit head)
    // is one op: the Linear averages the pool's input itself (LayerOp::pooled_plane).
    const Layer* executing = &layer;
    int executing_index = i;
    if (const auto* pool = layer_cast<GlobalAvgPool>(layer)) {
      const int view = sole_consumer(out);
      const int linear = view >= 0 && net.layer(view).output_is_input_view() &&
                                 net.layer(view).output().shape.rank() == 2
                             ? sole_consumer(net.layer_output(view))
                             : -1;
      if (linear >= 0 && net.layer(linear).supported_epilogue().pooled_input) {
        absorb(view);
        absorb(linear);
        layer_op.pooled_plane = pool->geometry().plane_size;
        executing = &net.layer(linear);
        executing_index = linear;
      }
    }

    Epilogue& epilogue = layer_op.epilogue;
    int next = sole_consumer(out);
    // A conv's weights as its executables take them: a following BatchNorm folded in.
    auto fold_conv = [&](int conv) {
      const LayerWeights& w = bound[conv];
      layer_op.folded_weight.assign(w.at("weight")->f32().begin(), w.at("weight")->f32().end());
      layer_op.folded_bias.clear();
      if (w.contains("bias")) {
        layer_op.folded_bias.assign(w.at("bias")->f32().begin(), w.at("bias")->f32().end());
      }
      if (next >= 0) {
        if (const auto* bn = layer_cast<BatchNorm2d>(net.layer(next))) {
          bn->fold_into_conv(bound[next], layer_op.folded_weight, layer_op.folded_bias);
          absorb(next);
          next = sole_consumer(out);
        }
      }
    };
    if (const auto* conv = layer_cast<Conv2d>(layer)) {
      fold_conv(i);
      // A 1x1 conv [+ activation] whose result only a depthwise conv reads: an expansion
      // prologue of that conv (LayerOp::expansion). fp32 only: the reduced precisions round
      // every op's output, and the expanded tensor would no longer be one.
      if (conv->geometry().pointwise() && conv->geometry().groups == 1 && next >= 0 &&
          engine.options.precision == Precision::fp32) {
        const std::optional<math::Activation> activation = activation_of(net.layer(next));
        const int depthwise = activation ? sole_consumer(net.layer_output(next)) : next;
        if (depthwise >= 0 && layer_cast<Conv2d>(net.layer(depthwise)) != nullptr &&
            net.layer(depthwise).supported_epilogue().expanded_input) {
          if (activation) absorb(next);
          layer_op.expansion = {.layer = &layer,
                                .weight = std::move(layer_op.folded_weight),
                                .bias = std::move(layer_op.folded_bias),
                                .activation = activation.value_or(math::Activation{})};
          absorb(depthwise);
          executing = &net.layer(depthwise);
          executing_index = depthwise;
          next = sole_consumer(out);
          fold_conv(depthwise);
        }
      }
    }
    const EpilogueSupport supported = executing->supported_epilogue();
    if (supported.residual && next >= 0 && layer_cast<Add>(net.layer(next)) != nullptr) {
      const auto& add_inputs = net.layer_inputs(next);
      // Both operands the same value (x + x) cannot become op + residual.
      if (add_inputs[0] != add_inputs[1]) {
        const Value residual = add_inputs[0] == out ? add_inputs[1] : add_inputs[0];
        op.inputs.push_back(residual.id);
        epilogue.residual = true;
        absorb(next);
        next = sole_consumer(out);
      }
    }
    if (next >= 0) {
      if (const auto activation = activation_of(net.layer(next))) {
        if (supported.any_activation ||
            (supported.relu && activation->kind == math::ActivationKind::relu)) {
          epilogue.activation = *activation;
          absorb(next);
          next = sole_consumer(out);
        }
      }
    }
    if (supported.channel_gate && !epilogue.residual && layer_op.expansion.layer == nullptr &&
        next >= 0) {
      if (const auto scaled = gated_tensor(net, next, out)) {
        op.inputs.push_back(scaled->id);
        epilogue.gated_plane = net.desc(*scaled).shape[2] * net.desc(*scaled).shape[3];
        absorb(next);
      }
    }
    layer_op.layer = executing;
    layer_op.weights = bound[executing_index];
    op.output = out.id;
    positioned.push_back({last, std::move(op), std::move(layer_op)});
  }
  std::stable_sort(positioned.begin(), positioned.end(),
                   [](const Lowered& a, const Lowered& b) { return a.position < b.position; });

  // Engine values: the network's values (same ids) first; exits and workspaces add theirs.
  int value_count = 0;
  for (int i = 0; i < net.layer_count(); ++i)
    value_count = std::max(value_count, net.layer_output(i).id + 1);
  for (Value v : net.inputs())
    value_count = std::max(value_count, v.id + 1);
  engine.values.assign(static_cast<std::size_t>(value_count), EngineValue{});
  for (Value v : net.inputs())
    engine.values[v.id].desc = net.desc(v);
  for (int i = 0; i < net.layer_count(); ++i) {
    engine.values[net.layer_output(i).id].desc = net.layer(i).output();
  }
  for (auto& value : engine.values)
    value.bytes = value.desc.bytes();

  std::vector<LayerOp> layer_ops;
  for (auto& lowered : positioned) {
    engine.values[lowered.op.output].producer = static_cast<int>(engine.ops.size());
    engine.ops.push_back(std::move(lowered.op));
    layer_ops.push_back(std::move(lowered.layer_op));
  }
  engine.info.layers = static_cast<int>(std::count(use.live.begin(), use.live.end(), true));
  return layer_ops;
}

}  // namespace cgr::detail
