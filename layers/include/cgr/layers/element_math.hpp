// Element math shared by the CPU kernels and the CUDA kernels: activations, pooling windows,
// softmax rows, the exit decision. Written once as host/device inline code so the CPU tests
// check the very arithmetic the GPU runs. No std:: calls that CUDA device code lacks; no
// exceptions. An elementwise activation is a function plus a function object (`...Fn`) that
// carries its parameters: both backends' unary kernels are templates over the object.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CGR_HD __host__ __device__ __forceinline__
#else
#define CGR_HD inline
#endif

namespace cgr::math {

// ReLU that propagates NaN like PyTorch (NaN < 0 is false, so NaN passes through).
CGR_HD float relu(float x) {
  return x < 0.0f ? 0.0f : x;
}

// Clamp to [low, high] that propagates NaN like torch.clamp (both comparisons are false).
CGR_HD float clip(float x, float low, float high) {
  return x < low ? low : (x > high ? high : x);
}

struct ReluFn {
  CGR_HD float operator()(float x) const { return relu(x); }
};

struct ClipFn {
  float low, high;
  CGR_HD float operator()(float x) const { return clip(x, low, high); }
};

// LeakyReLU as PyTorch computes it: x > 0 ? x : x * slope, so -0 stays -0 and NaN passes.
CGR_HD float leaky_relu(float x, float slope) {
  return x > 0.0f ? x : x * slope;
}

struct LeakyReluFn {
  float slope;
  CGR_HD float operator()(float x) const { return leaky_relu(x, slope); }
};

// The elementwise functions of the Unary layer (ONNX's names; PyTorch's definitions where the
// two differ only in rounding). alpha and beta are the function's parameters where it has any.
enum class UnaryOp : std::int32_t {
  sigmoid,  // 1 / (1 + e^-x)
  tanh,
  elu,           // x > 0 ? x : alpha (e^x - 1)
  selu,          // beta (x > 0 ? x : alpha (e^x - 1)); ONNX's gamma is beta here
  hard_sigmoid,  // clamp(alpha x + beta, 0, 1)
  hard_swish,    // x relu6(x + 3) / 6, as torch.nn.Hardswish
  softplus,      // log(1 + e^x), overflow-free
  erf,
  gelu,       // x/2 (1 + erf(x / sqrt 2))
  gelu_tanh,  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  silu,       // x sigmoid(x)
  exp,
  log,
  sqrt,
  neg,
  abs,
  reciprocal,
};

CGR_HD float sigmoid(float x) {
  // e^-|x| never overflows; the two branches are the same function.
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

CGR_HD float unary(UnaryOp op, float x, float alpha, float beta) {
  switch (op) {
    case UnaryOp::sigmoid:
      return sigmoid(x);
    case UnaryOp::tanh:
      return tanhf(x);
    case UnaryOp::elu:
      return x > 0.0f ? x : alpha * expm1f(x);
    case UnaryOp::selu:
      return beta * (x > 0.0f ? x : alpha * expm1f(x));
    case UnaryOp::hard_sigmoid:
      return clip(alpha * x + beta, 0.0f, 1.0f);
    case UnaryOp::hard_swish:
      return x * clip(x + 3.0f, 0.0f, 6.0f) / 6.0f;
    case UnaryOp::softplus:
      return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case UnaryOp::erf:
      return erff(x);
    case UnaryOp::gelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case UnaryOp::gelu_tanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case UnaryOp::silu:
      return x * sigmoid(x);
    case UnaryOp::exp:
      return expf(x);
    case UnaryOp::log:
      return logf(x);
    case UnaryOp::sqrt:
      return sqrtf(x);
    case UnaryOp::neg:
      return -x;
    case UnaryOp::abs:
      return fabsf(x);
    case UnaryOp::reciprocal:
      return 1.0f / x;
  }
  return x;
}

// The op is the same for every element of a launch: the switch is uniform on the GPU.
struct UnaryFn {
  UnaryOp op;
  float alpha, beta;
  CGR_HD float operator()(float x) const { return unary(op, x, alpha, beta); }
};

// The activation an op applies to its result before storing it (a fused epilogue): ReLU,
// LeakyReLU, Clip or a Unary function, the same arithmetic as the standalone layer, so fusing
// never changes a bit. `none` stores the result as it is.
enum class ActivationKind : std::int32_t { none, relu, leaky_relu, clip, unary };

struct Activation {
  ActivationKind kind = ActivationKind::none;
  UnaryOp unary = UnaryOp::sigmoid;  // kind unary: the function
  // leaky_relu: alpha is the slope; clip: [alpha, beta]; unary: the function's parameters.
  float alpha = 0.0f, beta = 0.0f;

  CGR_HD float operator()(float x) const {
    switch (kind) {
      case ActivationKind::none:
        return x;
      case ActivationKind::relu:
        return relu(x);
      case ActivationKind::leaky_relu:
        return leaky_relu(x, alpha);
      case ActivationKind::clip:
        return clip(x, alpha, beta);
      case ActivationKind::unary:
        return cgr::math::unary(unary, x, alpha, beta);
    }
    return x;
  }
  bool operator==(const Activation& other) const {
    return kind == other.kind && (kind != ActivationKind::unary || unary == other.unary) &&
           alpha == other.alpha && beta == other.beta;
  }
};

struct IdentityFn {
  CGR_HD float operator()(float x) const { return x; }
};

// Calls body(fn) with the activation as its own function object (IdentityFn, ReluFn,
// LeakyReluFn, ClipFn or UnaryFn), so a loop over a tensor inlines one function and
// vectorises instead of switching on the kind per element. The same arithmetic as
// Activation::operator(), bit for bit.
template <typename Body>
decltype(auto) with_activation_fn(const Activation& activation, Body&& body) {
  switch (activation.kind) {
    case ActivationKind::relu:
      return body(ReluFn{});
    case ActivationKind::leaky_relu:
      return body(LeakyReluFn{activation.alpha});
    case ActivationKind::clip:
      return body(ClipFn{activation.alpha, activation.beta});
    case ActivationKind::unary:
      return body(UnaryFn{activation.unary, activation.alpha, activation.beta});
    case ActivationKind::none:
      break;
  }
  return body(IdentityFn{});
}

// The elementwise functions of two operands of the Binary layer.
enum class BinaryOp : std::int32_t {
  add,
  sub,
  mul,
  div,
  pow,    // powf, as torch.pow on floats
  min,    // NaN if either is NaN (torch.minimum)
  max,    // NaN if either is NaN (torch.maximum)
  prelu,  // a < 0 ? a * b : a, b the slope (ONNX PRelu, torch.nn.PReLU)
};

CGR_HD float binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::add:
      return a + b;
    case BinaryOp::sub:
      return a - b;
    case BinaryOp::mul:
      return a * b;
    case BinaryOp::div:
      return a / b;
    case BinaryOp::pow:
      return powf(a, b);
    case BinaryOp::min:
      return a != a ? a : (b != b ? b : (b < a ? b : a));
    case BinaryOp::max:
      return a != a ? a : (b != b ? b : (b > a ? b : a));
    case BinaryOp::prelu:
      return a < 0.0f ? a * b : a;
  }
  return a;
}

// Output length of a sliding window along one axis, PyTorch's rule (also ONNX's):
// floor or ceil of (in + pads - dilation*(k-1) - 1) / stride + 1, and in ceil mode the last
// window must start inside the input or the leading padding.
CGR_HD std::int64_t window_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                       std::int64_t pad_begin, std::int64_t pad_end,
                                       std::int64_t dilation, bool ceil_mode) {
  const std::int64_t span = in + pad_begin + pad_end - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

// One axis of a pooling window: the input range [begin, end) it covers after clipping, and
// the length it would have counting padding (avg pool with count_include_pad divides by it).
struct WindowAxis {
  std::int64_t begin;
  std::int64_t end;
  std::int64_t padded_length;
};

CGR_HD WindowAxis pool_window_axis(std::int64_t out_index, std::int64_t in, std::int64_t kernel,
                                   std::int64_t stride, std::int64_t pad_begin,
                                   std::int64_t pad_end) {
  std::int64_t begin = out_index * stride - pad_begin;
  std::int64_t end = begin + kernel;
  if (end > in + pad_end) end = in + pad_end;
  const std::int64_t padded = end - begin;
  if (begin < 0) begin = 0;
  if (end > in) end = in;
  return WindowAxis{begin, end, padded};
}

// Max that propagates NaN (PyTorch's max_pool2d returns NaN when the window holds one).
CGR_HD float nan_max(float current, float candidate) {
  return (candidate > current || candidate != candidate) ? candidate : current;
}

// NaN-propagating min, the mirror of nan_max.
CGR_HD float nan_min(float current, float candidate) {
  return (candidate < current || candidate != candidate) ? candidate : current;
}

// The reductions of the Reduce layer: a start value, a combining step, and the final value
// from the accumulated one and the number of elements reduced.
enum class ReduceOp : std::int32_t { sum, mean, max, min };

CGR_HD float reduce_start(ReduceOp op) {
  return op == ReduceOp::max ? -INFINITY : op == ReduceOp::min ? INFINITY : 0.0f;
}

CGR_HD float reduce_step(ReduceOp op, float acc, float v) {
  return op == ReduceOp::max ? nan_max(acc, v) : op == ReduceOp::min ? nan_min(acc, v) : acc + v;
}

CGR_HD float reduce_finish(ReduceOp op, float acc, std::int64_t count) {
  return op == ReduceOp::mean ? acc / static_cast<float>(count) : acc;
}

// Numerically stable softmax of one row of n values spaced `stride` elements apart (stride 1
// for the last axis, H*W for the channel axis of an NCHW tensor).
CGR_HD void softmax_row(const float* in, float* out, std::int64_t n, std::int64_t stride) {
  float max_value = in[0];
  for (std::int64_t i = 1; i < n; ++i)
    max_value = nan_max(max_value, in[i * stride]);
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float e = expf(in[i * stride] - max_value);
    out[i * stride] = e;
    sum += e;
  }
  const float inverse = 1.0f / sum;
  for (std::int64_t i = 0; i < n; ++i)
    out[i * stride] *= inverse;
}

// Local response normalisation of x (ONNX LRN) from the sum of squares over its channel window:
// x / (bias + alpha / size * square_sum) ^ beta, with alpha / size computed once by the caller.
CGR_HD float local_response_norm(float x, float square_sum, float alpha_over_size, float beta,
                                 float bias) {
  return x / powf(bias + alpha_over_size * square_sum, beta);
}

// log(softmax) of one row, stably: x - max - log(sum_i exp(x_i - max)) (torch.log_softmax).
CGR_HD void log_softmax_row(const float* in, float* out, std::int64_t n, std::int64_t stride) {
  float max_value = in[0];
  for (std::int64_t i = 1; i < n; ++i)
    max_value = nan_max(max_value, in[i * stride]);
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i)
    sum += expf(in[i * stride] - max_value);
  const float shift = max_value + logf(sum);
  for (std::int64_t i = 0; i < n; ++i)
    out[i * stride] = in[i * stride] - shift;
}

// Confidence of an exit head for one sample: the largest softmax probability of its logits,
// 1 / sum_i exp(x_i - max). NaN logits give NaN, which never fires.
CGR_HD float max_softmax_probability(const float* logits, std::int64_t n) {
  float max_value = logits[0];
  for (std::int64_t i = 1; i < n; ++i)
    max_value = nan_max(max_value, logits[i]);
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i)
    sum += expf(logits[i] - max_value);
  return 1.0f / sum;
}

// An exit fires only when every sample of the batch is confident; NaN compares false.
CGR_HD bool exit_fires(const float* confidence, std::int64_t batch, float threshold) {
  for (std::int64_t i = 0; i < batch; ++i) {
    if (!(confidence[i] >= threshold)) return false;
  }
  return batch > 0;
}

// Where a linear sample at coordinate c (already clamped to [0, n - 1]) reads along one axis:
// floor(c) and the next index (the last one repeats at the border), and the second's weight.
template <typename Index>
struct LinearTap {
  Index first, second;
  float weight;
};

template <typename Index>
CGR_HD LinearTap<Index> linear_tap(float c, Index n) {
  const auto first = static_cast<Index>(c);  // c >= 0: the floor
  return {first, first + 1 < n ? first + 1 : n - 1, c - static_cast<float>(first)};
}

// Bilinear interpolation of four neighbours with weights wy (down) and wx (right), in the
// order PyTorch's upsample_bilinear2d adds them.
CGR_HD float bilinear(float top_left, float top_right, float bottom_left, float bottom_right,
                      float wy, float wx) {
  return (1.0f - wy) * ((1.0f - wx) * top_left + wx * top_right) +
         wy * ((1.0f - wx) * bottom_left + wx * bottom_right);
}

}  // namespace cgr::math
