// Network: the builder a model is described with. Each layer call adds one op, infers its
// output shape and rejects impossible inputs with an Error naming the layer and the shapes.
// Values are named (a layer's output carries the layer's name); inputs and outputs are
// declared by name. Weights are not part of the Network: they are bound by name when an
// Engine is built (`<layer>.weight`, `<layer>.bias`, `<layer>.running_mean`, ...).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/capture/custom_op.hpp"
#include "cgr/error.hpp"
#include "cgr/graph.hpp"
#include "cgr/layers/add.hpp"
#include "cgr/layers/binary.hpp"
#include "cgr/layers/avg_pool2d.hpp"
#include "cgr/layers/batch_norm2d.hpp"
#include "cgr/layers/clip.hpp"
#include "cgr/layers/concat.hpp"
#include "cgr/layers/conv2d.hpp"
#include "cgr/layers/conv_transpose2d.hpp"
#include "cgr/layers/flatten.hpp"
#include "cgr/layers/global_avg_pool.hpp"
#include "cgr/layers/instance_norm.hpp"
#include "cgr/layers/layer.hpp"
#include "cgr/layers/layer_norm.hpp"
#include "cgr/layers/leaky_relu.hpp"
#include "cgr/layers/local_response_norm.hpp"
#include "cgr/layers/matmul.hpp"
#include "cgr/layers/reduce.hpp"
#include "cgr/layers/slice.hpp"
#include "cgr/layers/unary.hpp"
#include "cgr/layers/linear.hpp"
#include "cgr/layers/max_pool2d.hpp"
#include "cgr/layers/pad2d.hpp"
#include "cgr/layers/pool2d.hpp"
#include "cgr/layers/relu.hpp"
#include "cgr/layers/reshape.hpp"
#include "cgr/layers/resize.hpp"
#include "cgr/layers/softmax.hpp"
#include "cgr/layers/tile.hpp"
#include "cgr/layers/transpose.hpp"
#include "cgr/tensor.hpp"

namespace cgr {

class Network;

// Handle to a value of one Network.
struct Value {
  int id = -1;
  bool valid() const { return id >= 0; }
  bool operator==(const Value&) const = default;
};

class Network {
 public:
  Network();
  ~Network();
  Network(Network&&) noexcept;
  Network& operator=(Network&&) noexcept;

  Value input(const std::string& name, Shape shape, DType dtype = DType::f32);
  // Declares `value` as a named output of the network (the name may differ from the value's).
  void output(const std::string& name, Value value);

  // One builder per layer kind; each validates its handles, then the layer infers its shape.
  Value conv2d(Value x, const Conv2dParams& params, const std::string& name) {
    return emplace<Conv2d>(x, name, params);
  }
  // The transposed convolution (nn.ConvTranspose2d; nn.ConvTranspose1d on N x C x L).
  Value conv_transpose2d(Value x, const ConvTranspose2dParams& params, const std::string& name) {
    return emplace<ConvTranspose2d>(x, name, params);
  }
  Value batch_norm2d(Value x, const BatchNorm2dParams& params, const std::string& name) {
    return emplace<BatchNorm2d>(x, name, params);
  }
  Value batch_norm2d(Value x, const std::string& name) { return batch_norm2d(x, {}, name); }
  Value relu(Value x, const std::string& name) { return emplace<Relu>(x, name); }
  Value leaky_relu(Value x, const LeakyReluParams& params, const std::string& name) {
    return emplace<LeakyRelu>(x, name, params);
  }
  // An elementwise function (sigmoid, tanh, gelu, ...): unary(x, {.op = UnaryOp::sigmoid}, n);
  // UnaryParams::defaults(op) holds ONNX's alpha and beta for elu, selu and hard_sigmoid.
  Value unary(Value x, const UnaryParams& params, const std::string& name) {
    return emplace<Unary>(x, name, params);
  }
  // Sum, mean, max or min over params.axes (ONNX ReduceSum/Mean/Max/Min, GlobalMaxPool).
  Value reduce(Value x, ReduceParams params, const std::string& name) {
    return emplace<Reduce>(x, name, std::move(params));
  }
  Value max_pool2d(Value x, const Pool2dParams& params, const std::string& name) {
    return emplace<MaxPool2d>(x, name, params);
  }
  Value avg_pool2d(Value x, const Pool2dParams& params, const std::string& name) {
    return emplace<AvgPool2d>(x, name, params);
  }
  // Mean over H and W of an NCHW tensor: N x C x 1 x 1 (AdaptiveAvgPool2d((1, 1))).
  Value global_avg_pool(Value x, const std::string& name) {
    return emplace<GlobalAvgPool>(x, name);
  }
  Value linear(Value x, const LinearParams& params, const std::string& name) {
    return emplace<Linear>(x, name, params);
  }
  // alpha * op(A) op(B) with NumPy's matmul rule (1-D promotion, broadcast batch dims).
  Value matmul(Value a, Value b, const MatMulParams& params, const std::string& name) {
    check_value(a, name);
    check_value(b, name);
    return add_layer(std::make_unique<MatMul>(name, desc(a), desc(b), params), {a, b});
  }
  // x @ c, or c @ x with constant.first, c the weight "<name>.constant" of constant.shape.
  Value matmul(Value x, MatMulConstant constant, const MatMulParams& params,
               const std::string& name) {
    return emplace<MatMul>(x, name, std::move(constant), params);
  }
  // Normalisation over the dims from params.axis to the last (nn.LayerNorm).
  Value layer_norm(Value x, const LayerNormParams& params, const std::string& name) {
    return emplace<LayerNorm>(x, name, params);
  }
  // Per-sample, per-channel normalisation over the spatial dims (nn.InstanceNorm2d).
  Value instance_norm(Value x, const InstanceNormParams& params, const std::string& name) {
    return emplace<InstanceNorm>(x, name, params);
  }
  // Division by the local sum of squares across channels (nn.LocalResponseNorm, ONNX LRN).
  Value local_response_norm(Value x, const LocalResponseNormParams& params,
                            const std::string& name) {
    return emplace<LocalResponseNorm>(x, name, params);
  }
  Value add(Value a, Value b, const std::string& name) {
    check_value(a, name);
    check_value(b, name);
    return add_layer(std::make_unique<Add>(name, desc(a), desc(b)), {a, b});
  }
  // A strided window (NumPy's x[a:b:s] per axis, ONNX's clamping rules).
  Value slice(Value x, const SliceParams& params, const std::string& name) {
    return emplace<Slice>(x, name, params);
  }
  // Concatenation along `axis` (default: channels of NCHW).
  Value concat(const std::vector<Value>& values, const std::string& name, int axis = 1) {
    return emplace_many<Concat>(values, name, axis);
  }
  // Flattens dims [start_dim, end) into one (torch.flatten(x, 1) by default).
  Value flatten(Value x, const std::string& name, int start_dim = 1) {
    return emplace<Flatten>(x, name, start_dim);
  }
  Value softmax(Value x, const std::string& name, int axis = -1) {
    return emplace<Softmax>(x, name, axis);
  }
  // torch.log_softmax: x - max - log(sum(exp(x - max))) along `axis`.
  Value log_softmax(Value x, const std::string& name, int axis = -1) {
    return emplace<Softmax>(x, name, axis, true);
  }
  Value clip(Value x, const ClipParams& params, const std::string& name) {
    return emplace<Clip>(x, name, params);
  }
  // Zero padding of H and W (F.pad with constant 0).
  Value pad2d(Value x, const Padding2d& padding, const std::string& name) {
    return emplace<Pad2d>(x, name, padding);
  }
  // Padding of H and W by a mode (constant value, reflect, edge, wrap); negative pads crop.
  Value pad2d(Value x, const Pad2dParams& params, const std::string& name) {
    return emplace<Pad2d>(x, name, params);
  }
  // Nearest or bilinear resampling of the last two dims (F.interpolate, ONNX Resize).
  Value resize(Value x, const ResizeParams& params, const std::string& name) {
    return emplace<Resize>(x, name, params);
  }
  // x repeated along each dim (x.repeat(...), ONNX Tile).
  Value tile(Value x, const TileParams& params, const std::string& name) {
    return emplace<Tile>(x, name, params);
  }
  Value reshape(Value x, Shape shape, const std::string& name) {
    return emplace<Reshape>(x, name, std::move(shape));
  }
  Value transpose(Value x, std::vector<int> perm, const std::string& name) {
    return emplace<Transpose>(x, name, std::move(perm));
  }
  // x + constant "<name>.constant" of `constant_shape`, broadcast NumPy-style.
  // f(a, b) elementwise with NumPy broadcasting (add, sub, mul, div, pow, min, max, prelu).
  Value binary(Value a, Value b, BinaryOp op, const std::string& name) {
    check_value(a, name);
    check_value(b, name);
    return add_layer(std::make_unique<Binary>(name, desc(a), desc(b), op), {a, b});
  }
  // f(x, c), or f(c, x) with constant.first, c the weight "<name>.constant" of constant.shape.
  Value binary(Value x, BinaryOp op, BinaryConstant constant, const std::string& name) {
    return emplace<Binary>(x, name, op, std::move(constant));
  }
  // User work as an op (see cgr/capture/custom_op.hpp): on CUDA captured into the graph with
  // the dependencies its inputs give it.
  Value custom(const std::vector<Value>& inputs, CustomOpParams params, const std::string& name) {
    return emplace_many<CustomOp>(inputs, name, std::move(params));
  }

  // Marks `logits` (N x classes) as an early-exit head. Its confidence is the largest softmax
  // probability; with ExitPolicy::early the rest of the network runs only when the exit does
  // not fire. `speculate_until` is the backbone value that keeps being computed while the
  // exit decides (e.g. the next stage's output): ops that value needs run concurrently with
  // the head; everything else waits for the decision. Without it nothing is speculated.
  void exit(const std::string& name, Value logits, Value speculate_until = {});
  struct Exit {
    std::string name;
    Value logits;
    Value speculate_until;
  };
  const std::vector<Exit>& exits() const;

  // Adds a user-constructed layer (its output descriptor is already inferred).
  Value add_layer(std::unique_ptr<Layer> layer, const std::vector<Value>& inputs);

  // --- inspection ---
  const TensorDesc& desc(Value value) const;
  Value find_value(std::string_view name) const;  // invalid Value when absent
  int layer_count() const;
  const Layer& layer(int index) const;
  const std::vector<Value>& layer_inputs(int index) const;
  Value layer_output(int index) const;
  int producer(Value value) const;  // layer index, -1 for a network input
  const std::vector<Value>& inputs() const;
  const std::vector<std::pair<std::string, Value>>& outputs() const;

  // Dependency analysis of the layers as written (one op per layer).
  Graph graph() const;

 private:
  // Layer L(name, desc(x), args...) on x; the handle is checked first, so that a foreign
  // Value is reported with the layer's name.
  template <typename L, typename... Args>
  Value emplace(Value x, const std::string& name, Args&&... args) {
    check_value(x, name);
    return add_layer(std::make_unique<L>(name, desc(x), std::forward<Args>(args)...), {x});
  }
  // Layer L(name, {desc(v)...}, args...) on several values.
  template <typename L, typename... Args>
  Value emplace_many(const std::vector<Value>& values, const std::string& name, Args&&... args) {
    std::vector<TensorDesc> descs;
    for (Value v : values) {
      check_value(v, name);
      descs.push_back(desc(v));
    }
    return add_layer(std::make_unique<L>(name, std::move(descs), std::forward<Args>(args)...),
                     values);
  }

  struct State;
  Value make_value(TensorDesc desc, int producer);
  void check_value(Value value, std::string_view layer_name) const;
  void check_new_name(const std::string& name) const;
  std::unique_ptr<State> state_;
};

}  // namespace cgr
