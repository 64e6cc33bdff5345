// Every cgr CUDA kernel against the CPU layer it stands for (ggml's test-backend-ops shape):
// seeded random inputs in several shapes, odd sizes, NaN and infinities included; the
// reference from a one-layer cgr::Engine on the CPU (or the shared element math), the GPU
// result from the kernel's launch function in layers/src/cuda/kernels.hpp. Copies, window
// maxima and elementwise maps must match bit for bit; reductions to 1e-5 relative.
// Skipped (visibly, through doctest's skip) where there is no CUDA device.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../test_support.hpp"
#include "cgr/capture/cuda_check.hpp"
#include "cgr/layers/binary.hpp"
#include "cgr/layers/conv2d.hpp"
#include "cgr/layers/element_math.hpp"
#include "gpu_op.hpp"
#include "ops/activation.hpp"
#include "ops/add.hpp"
#include "ops/batch_norm2d.hpp"
#include "ops/binary.hpp"
#include "ops/concat.hpp"
#include "ops/exit_decision.hpp"
#include "ops/global_avg_pool.hpp"
#include "ops/linear.hpp"
#include "ops/pad2d.hpp"
#include "ops/pool2d.hpp"
#include "ops/softmax.hpp"
#include "ops/transpose.hpp"

namespace {

namespace kernels = cgr::cuda;
using cgr::Network;
using cgr::Shape;
using cgr::Value;

const bool no_cuda_device = !cgr::cuda_unavailable_reason().empty();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Device memory for `count` elements of T, freed when it goes out of scope.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    CGR_CUDA_CHECK(cudaMalloc(&data_, std::max<std::size_t>(count, 1) * sizeof(T)));
  }
  // cudaMemcpy from pageable memory may return before the copy has landed, and cudaMemset is
  // asynchronous: both run on the legacy default stream, which the tests' non-blocking
  // streams do not wait for. Each waits here, so a kernel never reads a half-written buffer.
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    CGR_CUDA_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    CGR_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~DeviceArray() {
    if (data_ != nullptr) CGR_CUDA_CHECK_NOTHROW(cudaFree(data_));
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  // Every byte 0xff: a float NaN, so an element a kernel forgot to write shows up.
  void poison() {
    CGR_CUDA_CHECK(cudaMemset(data_, 0xff, count_ * sizeof(T)));
    CGR_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    CGR_CUDA_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

// A non-blocking stream (the kernels must not rely on the legacy default stream).
class Stream {
 public:
  Stream() { CGR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { CGR_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return stream_; }  // NOLINT: a handle

 private:
  cudaStream_t stream_ = nullptr;
};

// Checks a launch and waits for it.
void finish(cudaError_t launched, cudaStream_t stream) {
  CGR_CUDA_CHECK(launched);
  CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// NaN, +inf and -inf at a few places (when there is room).
std::vector<float> with_specials(std::vector<float> values) {
  const std::size_t n = values.size();
  if (n >= 8) {
    values[n / 7] = kNaN;
    values[n / 3] = kInf;
    values[n / 2] = -kInf;
  }
  return values;
}

std::vector<float> random_values(const Shape& shape, unsigned seed, bool specials = true) {
  auto values =
      cgr::test::random_vector(static_cast<std::size_t>(shape.numel()), seed, -2.0f, 2.0f);
  return specials ? with_specials(std::move(values)) : values;
}

struct CpuResult {
  std::vector<float> values;
  Shape shape;
};

// Runs the network `build` makes on inputs x0, x1, ... with the CPU executor.
CpuResult cpu_reference(const std::vector<std::pair<Shape, std::vector<float>>>& inputs,
                        const std::function<Value(Network&, const std::vector<Value>&)>& build,
                        const cgr::Weights& weights = {}) {
  Network net;
  std::vector<Value> values;
  cgr::NamedInputs named;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    values.push_back(net.input(name, inputs[i].first));
    named.emplace_back(name, cgr::TensorView(inputs[i].second));
  }
  const Value y = build(net, values);
  net.output("y", y);
  const Shape shape = net.desc(y).shape;
  const cgr::Engine engine = cgr::Engine::build(net, weights, {.threads = 2});
  cgr::ExecutionContext ctx = engine.create_context();
  return {ctx.infer(named).output("y").to_vector(), shape};
}

CpuResult cpu_reference(const Shape& shape, const std::vector<float>& input,
                        const std::function<Value(Network&, Value)>& build,
                        const cgr::Weights& weights = {}) {
  return cpu_reference(
      {{shape, input}}, [&](Network& net, const std::vector<Value>& v) { return build(net, v[0]); },
      weights);
}

// NaN where the CPU has NaN, the same infinities, and over the finite values
// max |actual - expected| / max |expected| <= tolerance; tolerance 0 means bit for bit.
void check_matches(const std::vector<float>& actual, const std::vector<float>& expected,
                   double tolerance) {
  REQUIRE(actual.size() == expected.size());
  std::size_t mismatches = 0, first = 0;
  double max_diff = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const float a = actual[i], e = expected[i];
    bool same = true;
    if (std::isnan(e)) {
      same = std::isnan(a);
    } else if (std::isinf(e)) {
      same = a == e;
    } else if (!std::isfinite(a)) {
      same = false;
    } else if (tolerance == 0.0) {
      same = std::memcmp(&a, &e, sizeof(float)) == 0;
    } else {
      max_diff = std::max(max_diff, std::abs(double{a} - double{e}));
      max_ref = std::max(max_ref, std::abs(double{e}));
    }
    if (!same && mismatches++ == 0) first = i;
  }
  INFO("first mismatch at ", first, ": GPU ", actual[first], ", CPU ", expected[first]);
  CHECK(mismatches == 0);
  if (tolerance > 0.0) CHECK(max_diff / std::max(max_ref, 1e-30) <= tolerance);
}

const std::vector<Shape> kElementwiseShapes = {Shape{1}, Shape{31}, Shape{2, 3, 5, 7},
                                               Shape{1, 64, 56, 56}, Shape{65537}};

}  // namespace

TEST_SUITE_BEGIN("kernels");

TEST_CASE("GPU relu, clip and add match the CPU layers bit for bit" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 100;
  for (const Shape& shape : kElementwiseShapes) {
    CAPTURE(shape.to_string());
    const auto n = static_cast<std::size_t>(shape.numel());
    const auto x = random_values(shape, ++seed);
    const auto b = random_values(shape, ++seed, false);
    const DeviceArray<float> dx(x), db(b), dy(n);

    {
      INFO("relu");
      finish(kernels::relu(dx.get(), dy.get(), shape.numel(), stream), stream);
      const auto cpu =
          cpu_reference(shape, x, [](Network& net, Value v) { return net.relu(v, "r"); });
      check_matches(dy.download(), cpu.values, 0.0);
    }
    {
      INFO("clip");
      const cgr::ClipParams params{.low = -0.5f, .high = 1.25f};
      finish(kernels::clip(dx.get(), dy.get(), shape.numel(), params.low, params.high, stream),
             stream);
      const auto cpu =
          cpu_reference(shape, x, [&](Network& net, Value v) { return net.clip(v, params, "c"); });
      check_matches(dy.download(), cpu.values, 0.0);
    }
    for (const bool relu : {false, true}) {
      INFO("add, relu ", relu);
      const cgr::math::Activation fused =
          relu ? cgr::math::Activation{.kind = cgr::math::ActivationKind::relu}
               : cgr::math::Activation{};
      finish(kernels::add(dx.get(), db.get(), dy.get(), shape.numel(), fused, stream), stream);
      const auto cpu =
          cpu_reference({{shape, x}, {shape, b}}, [&](Network& net, const std::vector<Value>& v) {
            const Value sum = net.add(v[0], v[1], "add");
            return relu ? net.relu(sum, "relu") : sum;
          });
      check_matches(dy.download(), cpu.values, 0.0);
    }
    {
      INFO("add + relu in place");
      const DeviceArray<float> inout(x);
      finish(kernels::add(inout.get(), db.get(), inout.get(), shape.numel(),
                          {.kind = cgr::math::ActivationKind::relu}, stream),
             stream);
      std::vector<float> expected(n);
      for (std::size_t i = 0; i < n; ++i)
        expected[i] = cgr::math::relu(x[i] + b[i]);
      check_matches(inout.download(), expected, 0.0);
    }
  }
}

namespace {

// Runs the CUDA backend's registered op of a one-input layer (engine/cuda/ops, found by the
// layer's kind as the backend finds it) on `x`, the output poisoned first.
std::vector<float> run_registered_op(const cgr::Layer& layer, const std::vector<float>& x,
                                     cudaStream_t stream) {
  const cgr::cuda::GpuOpFactory* factory = cgr::cuda::find_gpu_op(layer.kind());
  REQUIRE(factory != nullptr);
  const cgr::LayerOp op{&layer, {}, {}, {}, {}, 0, {}};
  const std::unique_ptr<cgr::cuda::GpuOp> gpu =
      (*factory)(cgr::cuda::GpuOpBuild{op, false, nullptr});
  const DeviceArray<float> dx(x);
  DeviceArray<float> dy(static_cast<std::size_t>(layer.output().shape.numel()));
  dy.poison();
  const float* inputs[] = {dx.get()};
  gpu->enqueue(stream, cgr::cuda::GpuBuffers{inputs, dy.get(), nullptr, nullptr}, {});
  CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
  return dy.download();
}

}  // namespace

TEST_CASE("GPU LeakyReLU (the registered op) matches the CPU layer bit for bit" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 150;
  for (const Shape& shape : {Shape{2, 3, 7, 5}, Shape{1, 1}, Shape{3, 1000}}) {
    for (const float slope : {0.01f, 0.2f, -0.5f, 1.5f}) {
      CAPTURE(shape.to_string());
      CAPTURE(slope);
      auto x = random_values(shape, ++seed);
      x[0] = -0.0f;  // stays -0 (x * slope for a slope > 0)
      const cgr::LeakyReluParams params{.negative_slope = slope};
      const auto cpu = cpu_reference(
          shape, x, [&](Network& net, Value v) { return net.leaky_relu(v, params, "lrelu"); });
      const cgr::LeakyRelu layer("lrelu", cgr::TensorDesc{"x", shape}, params);
      check_matches(run_registered_op(layer, x, stream), cpu.values, 0.0);
    }
  }
}

TEST_CASE("GPU Conv2d without a residual: an output buffer full of NaN does not leak in" *
          doctest::skip(no_cuda_device)) {
  // cuDNN computes act(conv(x) + alpha2 * z + bias); alpha2 = 0 without a residual, but z must
  // still not alias y: 0 * NaN is NaN where cuDNN does not skip the term.
  const Stream stream;
  cudnnHandle_t cudnn = nullptr;
  REQUIRE(cudnnCreate(&cudnn) == CUDNN_STATUS_SUCCESS);
  const Shape shape{1, 4, 9, 9};
  const cgr::Conv2dParams params{.out_channels = 6, .kernel = 3, .padding = cgr::Padding2d{1}};
  const auto x = random_values(shape, 31, false);
  const auto weight = cgr::test::random_vector(6 * 4 * 3 * 3, 32);
  const auto bias = cgr::test::random_vector(6, 33);
  cgr::Weights weights;
  weights.add("conv.weight", cgr::Tensor(Shape{6, 4, 3, 3}, weight));
  weights.add("conv.bias", cgr::Tensor(Shape{6}, bias));
  for (const bool relu : {false, true}) {
    CAPTURE(relu);
    const auto cpu = cpu_reference(
        shape, x,
        [&](Network& net, Value v) {
          const Value y = net.conv2d(v, params, "conv");
          return relu ? net.relu(y, "relu") : y;
        },
        weights);
    const cgr::Conv2d layer("conv", cgr::TensorDesc{"x", shape}, params);
    const cgr::LayerOp op{
        &layer,
        {},
        weight,
        bias,
        {.residual = false,
         .activation = relu ? cgr::math::Activation{.kind = cgr::math::ActivationKind::relu}
                            : cgr::math::Activation{}},
        0,
        {}};
    const auto gpu =
        (*cgr::cuda::find_gpu_op(layer.kind()))(cgr::cuda::GpuOpBuild{op, false, cudnn});
    REQUIRE(gpu->zero_bytes() == cpu.values.size() * sizeof(float));
    const DeviceArray<float> dx(x), zeros(std::vector<float>(cpu.values.size(), 0.0f));
    DeviceArray<float> dy(cpu.values.size()), workspace(gpu->workspace_bytes() / 4 + 1);
    dy.poison();
    const float* inputs[] = {dx.get()};
    gpu->enqueue(stream, cgr::cuda::GpuBuffers{inputs, dy.get(), workspace.get(), zeros.get()},
                 {cudnn, nullptr});
    CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
    check_matches(dy.download(), cpu.values, 1e-5);
  }
  (void)cudnnDestroy(cudnn);
}

TEST_CASE("GPU Binary (the registered op) matches the CPU layer: broadcasts, constants, NaN" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 170;
  const std::vector<std::pair<Shape, Shape>> pairs = {{Shape{2, 3, 5, 7}, Shape{2, 3, 5, 7}},
                                                      {Shape{2, 3, 5, 7}, Shape{1, 3, 1, 1}},
                                                      {Shape{2, 1, 5, 7}, Shape{4, 1, 1}},
                                                      {Shape{65537}, Shape{}}};
  for (int f = 0; f <= static_cast<int>(cgr::BinaryOp::prelu); ++f) {
    const auto op = static_cast<cgr::BinaryOp>(f);
    for (const auto& [as, bs] : pairs) {
      const Shape out = *cgr::broadcast_shapes(as, bs);
      if (op == cgr::BinaryOp::prelu && out != as) continue;
      CAPTURE(cgr::binary_op_name(op));
      CAPTURE(as.to_string());
      CAPTURE(bs.to_string());
      const auto a = random_values(as, ++seed);
      const auto b = random_values(bs, ++seed, false);
      // A network input has at least one dimension: the CPU reference takes a rank-0 `b` as
      // shape {1}, which broadcasts the same way.
      const Shape reference_bs = bs.rank() == 0 ? Shape{1} : bs;
      const auto cpu = cpu_reference({{as, a}, {reference_bs, b}},
                                     [&](Network& net, const std::vector<Value>& v) {
                                       return net.binary(v[0], v[1], op, "f");
                                     });
      // powf on the device may differ from the host's in the last bit; the rest is exact.
      const double tolerance = op == cgr::BinaryOp::pow ? 1e-6 : 0.0;
      const DeviceArray<float> da(a), db(b);
      DeviceArray<float> dy(cpu.values.size());
      {
        INFO("two computed operands");
        const cgr::Binary layer("f", cgr::TensorDesc{"a", as}, cgr::TensorDesc{"b", bs}, op);
        const cgr::LayerOp lop{&layer, {}, {}, {}, {}, 0, {}};
        const auto gpu =
            (*cgr::cuda::find_gpu_op(layer.kind()))(cgr::cuda::GpuOpBuild{lop, false, nullptr});
        dy.poison();
        const float* inputs[] = {da.get(), db.get()};
        gpu->enqueue(stream, cgr::cuda::GpuBuffers{inputs, dy.get(), nullptr, nullptr}, {});
        CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
        check_matches(dy.download(), cpu.values, tolerance);
      }
      {
        INFO("b a constant (uploaded when the op is made)");
        const cgr::Binary layer("f", cgr::TensorDesc{"a", as}, op, cgr::BinaryConstant{bs});
        const cgr::Tensor constant(bs, b);
        const cgr::LayerOp lop{&layer, {{"constant", &constant}}, {}, {}, {}, 0, {}};
        const auto gpu =
            (*cgr::cuda::find_gpu_op(layer.kind()))(cgr::cuda::GpuOpBuild{lop, false, nullptr});
        dy.poison();
        const float* inputs[] = {da.get()};
        gpu->enqueue(stream, cgr::cuda::GpuBuffers{inputs, dy.get(), nullptr, nullptr}, {});
        CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
        check_matches(dy.download(), cpu.values, tolerance);
      }
    }
  }
}

TEST_CASE("GPU relu covers sizes beyond one sweep of the grid" * doctest::skip(no_cuda_device)) {
  // 2^28 threads per sweep (launch.cuh): this size needs a second trip round the grid-stride loop.
  const std::int64_t n = (std::int64_t{1} << 28) + 1000;
  std::vector<float> x(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  const Stream stream;
  const DeviceArray<float> dx(x), dy(x.size());
  finish(kernels::relu(dx.get(), dy.get(), n, stream), stream);
  const auto y = dy.download();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    wrong += y[i] != cgr::math::relu(x[i]) ? 1 : 0;
  CHECK(wrong == 0);
}

TEST_CASE("GPU channel affine matches BatchNorm2d on the CPU" * doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 200;
  for (const Shape& shape : {Shape{1, 3, 7, 7}, Shape{2, 5, 1, 1}, Shape{1, 64, 56, 56},
                             Shape{3, 7, 11, 13}, Shape{2, 4, 9}}) {
    CAPTURE(shape.to_string());
    const std::int64_t channels = shape[1];
    const auto c = static_cast<std::size_t>(channels);
    cgr::Weights weights;
    weights.add("bn.weight",
                cgr::Tensor(Shape{channels}, cgr::test::random_vector(c, ++seed, 0.5f, 2.0f)));
    weights.add("bn.bias", cgr::Tensor(Shape{channels}, cgr::test::random_vector(c, ++seed)));
    weights.add("bn.running_mean",
                cgr::Tensor(Shape{channels}, cgr::test::random_vector(c, ++seed)));
    weights.add("bn.running_var",
                cgr::Tensor(Shape{channels}, cgr::test::random_vector(c, ++seed, 0.1f, 3.0f)));
    const auto x = random_values(shape, ++seed);
    const auto cpu = cpu_reference(
        shape, x, [](Network& net, Value v) { return net.batch_norm2d(v, "bn"); }, weights);

    // The scale and shift the executor uploads: the layer's own affine map.
    const cgr::BatchNorm2d layer("bn", cgr::TensorDesc{"x", shape}, {});
    const cgr::ChannelAffine affine =
        layer.affine({{"weight", weights.find("bn.weight")},
                      {"bias", weights.find("bn.bias")},
                      {"running_mean", weights.find("bn.running_mean")},
                      {"running_var", weights.find("bn.running_var")}});
    const DeviceArray<float> dx(x), dscale(affine.scale), dshift(affine.shift), dy(x.size());
    const std::int64_t plane = shape.numel() / (shape[0] * channels);
    finish(kernels::channel_affine(dx.get(), dscale.get(), dshift.get(), dy.get(), shape[0],
                                   channels, plane, stream),
           stream);
    // nvcc may fuse x * scale + shift into one FMA: one rounding fewer than the CPU.
    check_matches(dy.download(), cpu.values, 1e-6);
  }
}

TEST_CASE("GPU bias + activation epilogue matches the host arithmetic" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 300;
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {
      {1, 10}, {3, 1000}, {7, 33}, {64, 1}};
  for (const auto& [rows, cols] : sizes) {
    for (const bool with_bias : {true, false}) {
      for (const bool relu : {false, true}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(with_bias);
        CAPTURE(relu);
        const auto y = random_values(Shape{rows, cols}, ++seed);
        const auto bias = cgr::test::random_vector(static_cast<std::size_t>(cols), ++seed);
        std::vector<float> expected(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          float value = y[i];
          if (with_bias) value += bias[i % static_cast<std::size_t>(cols)];
          expected[i] = relu ? cgr::math::relu(value) : value;
        }
        const DeviceArray<float> dy(y), dbias(bias);
        finish(kernels::bias_activation(dy.get(), with_bias ? dbias.get() : nullptr, rows, cols,
                                        relu, stream),
               stream);
        check_matches(dy.download(), expected, 0.0);
      }
    }
  }
}

namespace {

struct PoolCase {
  Shape shape;
  cgr::Pool2dParams params;
};

// Window geometries both pools share (dilation 1).
std::vector<PoolCase> common_pool_cases() {
  return {
      {Shape{1, 3, 112, 112}, {.kernel = 3, .stride = 2, .padding = 1}},  // ResNet stem
      {Shape{2, 2, 13, 13}, {.kernel = 3, .stride = 2, .ceil_mode = true}},
      {Shape{1, 2, 14, 15}, {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true}},
      {Shape{1, 3, 9, 10}, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 0, 1, 2}}},
      {Shape{1, 2, 8, 11},
       {.kernel = {3, 2}, .stride = {3, 3}, .padding = {2, 1, 0, 1}, .ceil_mode = true}},
      {Shape{1, 1, 5, 5}, {.kernel = 5, .stride = 1}},
      {Shape{3, 5, 1, 1}, {.kernel = 1}},
      {Shape{1, 4, 7, 7}, {.kernel = 7}},
  };
}

}  // namespace

TEST_CASE("GPU max pooling matches MaxPool2d on the CPU, NaN and padding included" *
          doctest::skip(no_cuda_device)) {
  auto cases = common_pool_cases();
  cases.push_back({Shape{1, 2, 15, 16}, {.kernel = 3, .stride = 1, .padding = 2, .dilation = 2}});
  cases.push_back(
      {Shape{1, 2, 11, 12},
       {.kernel = 3, .stride = 2, .padding = 1, .dilation = {2, 3}, .ceil_mode = true}});
  cases.push_back({Shape{2, 1, 6, 6}, {.kernel = 2, .stride = 1, .padding = 1, .dilation = 4}});
  const Stream stream;
  unsigned seed = 400;
  for (const PoolCase& c : cases) {
    CAPTURE(c.shape.to_string());
    CAPTURE(cgr::to_string(c.params.kernel));
    CAPTURE(cgr::to_string(c.params.padding));
    CAPTURE(c.params.ceil_mode);
    auto x = random_values(c.shape, ++seed);
    if (x.size() >= 16) x[x.size() - 5] = -kInf;  // a window whose other taps are finite
    const auto cpu = cpu_reference(
        c.shape, x, [&](Network& net, Value v) { return net.max_pool2d(v, c.params, "pool"); });
    const DeviceArray<float> dx(x);
    DeviceArray<float> dy(cpu.values.size());
    dy.poison();
    // The geometry the CUDA op launches with: the layer's own.
    const cgr::MaxPool2d layer("pool", cgr::TensorDesc{"x", c.shape}, c.params);
    finish(kernels::max_pool2d(dx.get(), dy.get(), layer.geometry(), stream), stream);
    check_matches(dy.download(), cpu.values, 0.0);
  }
}

TEST_CASE("GPU average pooling matches AvgPool2d on the CPU, count_include_pad both ways" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 500;
  for (PoolCase c : common_pool_cases()) {
    for (const bool include_pad : {true, false}) {
      c.params.count_include_pad = include_pad;
      CAPTURE(c.shape.to_string());
      CAPTURE(cgr::to_string(c.params.kernel));
      CAPTURE(cgr::to_string(c.params.padding));
      CAPTURE(c.params.ceil_mode);
      CAPTURE(include_pad);
      const auto x = random_values(c.shape, ++seed);
      const auto cpu = cpu_reference(
          c.shape, x, [&](Network& net, Value v) { return net.avg_pool2d(v, c.params, "pool"); });
      const DeviceArray<float> dx(x);
      DeviceArray<float> dy(cpu.values.size());
      dy.poison();
      const cgr::AvgPool2d layer("pool", cgr::TensorDesc{"x", c.shape}, c.params);
      finish(kernels::avg_pool2d(dx.get(), dy.get(), layer.geometry(), stream), stream);
      // Same taps in the same order and the same division: expected bit for bit; 1e-6 leaves
      // room for a compiler that reorders nothing but still differs in the last place.
      check_matches(dy.download(), cpu.values, 1e-6);
    }
  }
  cgr::Pool2dGeometry dilated =
      cgr::AvgPool2d("pool", cgr::TensorDesc{"x", Shape{1, 1, 4, 4}}, {.kernel = 2}).geometry();
  dilated.dilation_h = 2;
  CHECK(kernels::avg_pool2d(nullptr, nullptr, dilated, stream) == cudaErrorInvalidValue);
}

TEST_CASE("GPU global average pooling matches the CPU (warp and block per plane)" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 600;
  // 31x33 = 1023 is the largest warp-per-plane size, 32x32 = 1024 the smallest block one.
  for (const Shape& shape : {Shape{1, 512, 7, 7}, Shape{2, 64, 56, 56}, Shape{3, 5, 1, 1},
                             Shape{1, 3, 31, 33}, Shape{1, 2, 32, 32}, Shape{1, 1, 1, 37}}) {
    for (const bool specials : {false, true}) {
      CAPTURE(shape.to_string());
      CAPTURE(specials);
      // Mostly positive inputs (post-ReLU activations) keep the means away from zero, so the
      // relative bound measures the summation, not cancellation.
      auto x =
          cgr::test::random_vector(static_cast<std::size_t>(shape.numel()), ++seed, -0.2f, 1.0f);
      if (specials) x = with_specials(std::move(x));
      const auto cpu = cpu_reference(
          shape, x, [](Network& net, Value v) { return net.global_avg_pool(v, "gap"); });
      const DeviceArray<float> dx(x);
      DeviceArray<float> dy(cpu.values.size());
      dy.poison();
      finish(kernels::global_avg_pool(dx.get(), dy.get(), shape[0] * shape[1], shape[2] * shape[3],
                                      stream),
             stream);
      check_matches(dy.download(), cpu.values, 1e-5);
    }
  }
}

TEST_CASE("GPU concat, one part per input, matches Concat on the CPU" *
          doctest::skip(no_cuda_device)) {
  struct ConcatCase {
    std::vector<Shape> shapes;
    int axis;
  };
  const std::vector<ConcatCase> cases = {
      {{Shape{2, 3, 4, 5}, Shape{2, 1, 4, 5}, Shape{2, 6, 4, 5}}, 1},
      {{Shape{1, 64, 28, 28}, Shape{1, 128, 28, 28}, Shape{1, 32, 28, 28}, Shape{1, 32, 28, 28}},
       1},
      {{Shape{3, 7}, Shape{3, 1}, Shape{3, 40}}, -1},
      {{Shape{2, 3}, Shape{5, 3}}, 0},
      {{Shape{2, 3, 5}}, 2},
  };
  const Stream stream;
  unsigned seed = 700;
  for (const ConcatCase& c : cases) {
    CAPTURE(c.shapes[0].to_string());
    CAPTURE(c.axis);
    std::vector<std::pair<Shape, std::vector<float>>> inputs;
    for (const Shape& s : c.shapes)
      inputs.emplace_back(s, random_values(s, ++seed));
    const auto cpu = cpu_reference(inputs, [&](Network& net, const std::vector<Value>& v) {
      return net.concat(v, "cat", c.axis);
    });
    const int rank = static_cast<int>(cpu.shape.rank());
    const int axis = c.axis < 0 ? c.axis + rank : c.axis;
    std::int64_t outer = 1;
    for (int d = 0; d < axis; ++d)
      outer *= cpu.shape[static_cast<std::size_t>(d)];
    const std::int64_t out_block = cpu.shape.numel() / outer;
    DeviceArray<float> dy(cpu.values.size());
    dy.poison();
    std::int64_t offset = 0;
    for (const auto& [shape, values] : inputs) {
      const DeviceArray<float> dx(values);
      const std::int64_t block = shape.numel() / outer;
      finish(kernels::concat_part(dx.get(), dy.get(), outer, block, out_block, offset, stream),
             stream);
      offset += block;
    }
    check_matches(dy.download(), cpu.values, 0.0);
  }
}

TEST_CASE("GPU concat takes 64-bit indices past 2^30 floats" * doctest::skip(no_cuda_device)) {
  // 4 GiB in, 4 GiB out: the int64 flavour of the index-splitting kernels (launch.cuh).
  const std::int64_t block = (std::int64_t{1} << 30) + 5, offset = 3, out_block = block + offset;
  std::vector<float> x(static_cast<std::size_t>(block));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 4093);
  const Stream stream;
  const DeviceArray<float> dx(x);
  DeviceArray<float> dy(static_cast<std::size_t>(out_block));
  dy.poison();
  finish(kernels::concat_part(dx.get(), dy.get(), 1, block, out_block, offset, stream), stream);
  const auto y = dy.download();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    wrong += y[i + offset] != x[i] ? 1 : 0;
  CHECK(wrong == 0);
  CHECK(std::isnan(y[0]));  // before the offset: untouched
}

TEST_CASE("GPU softmax matches Softmax on the CPU (warp rows and strided rows)" *
          doctest::skip(no_cuda_device)) {
  struct SoftmaxCase {
    Shape shape;
    int axis;
  };
  const std::vector<SoftmaxCase> cases = {
      {Shape{4, 10}, -1},         // short contiguous rows: a thread per row
      {Shape{3, 1000}, -1},       // warp per row
      {Shape{2, 3, 33}, 2},       // just over a warp
      {Shape{1, 1000, 1, 1}, 1},  // channel softmax of a 1x1 map: contiguous
      {Shape{2, 100, 3}, 1},      // warp per row, stride 3
      {Shape{3, 40, 31}, 1},      // warp per row, stride 31 (the widest the warp path takes)
      {Shape{2, 64, 32}, 1},      // thread per row, stride 32
      {Shape{2, 5, 3, 4}, 1},     // short strided rows, inner 12
      {Shape{5, 7}, 0},           // short strided rows, inner 7
      {Shape{6, 1}, -1},          // rows of one value
  };
  const Stream stream;
  unsigned seed = 800;
  for (const SoftmaxCase& c : cases) {
    CAPTURE(c.shape.to_string());
    CAPTURE(c.axis);
    auto x =
        cgr::test::random_vector(static_cast<std::size_t>(c.shape.numel()), ++seed, -20.0f, 20.0f);
    const int rank = static_cast<int>(c.shape.rank());
    const int axis = c.axis < 0 ? c.axis + rank : c.axis;
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d)
      outer *= c.shape[static_cast<std::size_t>(d)];
    for (int d = axis + 1; d < rank; ++d)
      inner *= c.shape[static_cast<std::size_t>(d)];
    const std::int64_t length = c.shape[static_cast<std::size_t>(axis)];
    // A NaN in the first row, +inf in the last: both rows turn NaN (inf - inf), the rest not.
    if (x.size() >= 4) {
      x[0] = kNaN;
      x[x.size() - 1] = kInf;
    }
    const auto cpu = cpu_reference(
        c.shape, x, [&](Network& net, Value v) { return net.softmax(v, "softmax", c.axis); });
    const DeviceArray<float> dx(x);
    DeviceArray<float> dy(x.size());
    dy.poison();
    finish(kernels::softmax(dx.get(), dy.get(), outer, length, inner, stream), stream);
    check_matches(dy.download(), cpu.values, 1e-5);
    // In place: x == y.
    const DeviceArray<float> inout(x);
    finish(kernels::softmax(inout.get(), inout.get(), outer, length, inner, stream), stream);
    check_matches(inout.download(), cpu.values, 1e-5);
  }
}

TEST_CASE("GPU pad2d matches Pad2d on the CPU: every mode, crops" * doctest::skip(no_cuda_device)) {
  struct PadCase {
    Shape shape;
    cgr::Pad2dParams params;
  };
  const std::vector<PadCase> cases = {
      {Shape{1, 3, 5, 7}, {{1, 2, 3, 4}}},
      {Shape{2, 1, 1, 1}, {{0}}},
      {Shape{1, 2, 4, 4}, {{0, 3, 0, 0}}},
      {Shape{2, 3, 17, 9}, {{2, 0, 0, 5}}},
      {Shape{2, 3, 6, 5}, {{3, 1, 5, 4}, cgr::PadMode::reflect}},
      {Shape{1, 2, 6, 5}, {{-2, 4, 3, -1}, cgr::PadMode::edge}},
      {Shape{1, 2, 6, 5}, {{7, 2, 1, 9}, cgr::PadMode::wrap}},
      {Shape{2, 2, 6, 5}, {{1, -2, -3, 2}, cgr::PadMode::constant, -1.5f}},
  };
  const Stream stream;
  unsigned seed = 900;
  for (const PadCase& c : cases) {
    CAPTURE(c.shape.to_string());
    CAPTURE(cgr::to_string(c.params.padding));
    CAPTURE(cgr::pad_mode_name(c.params.mode));
    const auto x = random_values(c.shape, ++seed);
    const auto cpu = cpu_reference(
        c.shape, x, [&](Network& net, Value v) { return net.pad2d(v, c.params, "pad"); });
    const DeviceArray<float> dx(x);
    DeviceArray<float> dy(cpu.values.size());
    dy.poison();
    const cgr::Pad2d layer("pad", cgr::TensorDesc{"x", c.shape}, c.params);
    finish(kernels::pad2d(dx.get(), dy.get(), layer.geometry(), stream), stream);
    check_matches(dy.download(), cpu.values, 0.0);
  }
}

TEST_CASE("GPU transpose matches Transpose on the CPU" * doctest::skip(no_cuda_device)) {
  struct TransposeCase {
    Shape shape;
    std::vector<int> perm;
  };
  const std::vector<TransposeCase> cases = {
      {Shape{2, 3, 4}, {2, 0, 1}},
      {Shape{1, 4, 3, 5}, {0, 2, 3, 1}},
      {Shape{6}, {0}},
      {Shape{2, 3, 4, 5, 6}, {4, 3, 2, 1, 0}},
      {Shape{3, 1, 2, 1, 2, 1, 2, 3}, {7, 6, 5, 4, 3, 2, 1, 0}},
      {Shape{1, 8, 2, 7, 7}, {0, 2, 1, 3, 4}},  // channel shuffle
  };
  const Stream stream;
  unsigned seed = 1000;
  for (const TransposeCase& c : cases) {
    CAPTURE(c.shape.to_string());
    const auto x = random_values(c.shape, ++seed);
    const auto cpu = cpu_reference(
        c.shape, x, [&](Network& net, Value v) { return net.transpose(v, c.perm, "t"); });
    const cgr::TransposeGeometry g =
        cgr::Transpose("t", cgr::TensorDesc{"x", c.shape}, c.perm).geometry();
    const DeviceArray<float> dx(x);
    DeviceArray<float> dy(x.size());
    dy.poison();
    finish(kernels::transpose(dx.get(), dy.get(), g, stream), stream);
    check_matches(dy.download(), cpu.values, 0.0);
  }
}

namespace {

enum class ExitScenario { confident, one_not_confident, nan };

// Logits for `scenario`: each confident row has one logit 12 above values in [-1, 1].
std::vector<float> exit_logits(std::int64_t batch, std::int64_t classes, ExitScenario scenario,
                               unsigned seed) {
  auto logits = cgr::test::random_vector(static_cast<std::size_t>(batch * classes), seed);
  for (std::int64_t row = 0; row < batch; ++row) {
    const bool confident = !(scenario == ExitScenario::one_not_confident && row == batch - 1);
    if (confident) logits[static_cast<std::size_t>(row * classes + (row * 7) % classes)] += 12.0f;
  }
  if (scenario == ExitScenario::nan) logits[static_cast<std::size_t>((batch - 1) * classes)] = kNaN;
  return logits;
}

const char* scenario_name(ExitScenario s) {
  switch (s) {
    case ExitScenario::confident:
      return "confident";
    case ExitScenario::one_not_confident:
      return "one sample not confident";
    case ExitScenario::nan:
      return "NaN logit";
  }
  return "?";
}

constexpr float kThreshold = 0.9f;

}  // namespace

TEST_CASE("GPU exit decision matches the CPU's confidences and firing rule" *
          doctest::skip(no_cuda_device)) {
  const Stream stream;
  unsigned seed = 1100;
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {
      {1, 10}, {4, 1000}, {9, 33}, {1, 1000}, {3, 2}};
  for (const auto& [batch, classes] : sizes) {
    for (const ExitScenario scenario :
         {ExitScenario::confident, ExitScenario::one_not_confident, ExitScenario::nan}) {
      CAPTURE(batch);
      CAPTURE(classes);
      CAPTURE(scenario_name(scenario));
      const auto logits = exit_logits(batch, classes, scenario, ++seed);
      std::vector<float> expected(static_cast<std::size_t>(batch));
      for (std::int64_t n = 0; n < batch; ++n) {
        expected[static_cast<std::size_t>(n)] =
            cgr::math::max_softmax_probability(logits.data() + n * classes, classes);
      }
      const bool cpu_fired = cgr::math::exit_fires(expected.data(), batch, kThreshold);
      CHECK(cpu_fired == (scenario == ExitScenario::confident));

      const DeviceArray<float> dlogits(logits);
      DeviceArray<float> dconfidence(expected.size());
      dconfidence.poison();
      const DeviceArray<int> dfired(std::vector<int>{7});
      finish(kernels::exit_decision(dlogits.get(), dconfidence.get(), dfired.get(), batch, classes,
                                    kThreshold, false, 0, stream),
             stream);
      check_matches(dconfidence.download(), expected, 1e-5);
      CHECK(dfired.download()[0] == (cpu_fired ? 1 : 0));
    }
  }
  {
    INFO("an empty batch never fires");
    const DeviceArray<float> dlogits(1), dconfidence(1);
    const DeviceArray<int> dfired(std::vector<int>{7});
    finish(kernels::exit_decision(dlogits.get(), dconfidence.get(), dfired.get(), 0, 10, kThreshold,
                                  false, 0, stream),
           stream);
    CHECK(dfired.download()[0] == 0);
  }
}

namespace {

// Owners of a graph and its executable, destroyed without throwing.
struct GraphGuard {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  GraphGuard() = default;
  GraphGuard(const GraphGuard&) = delete;
  GraphGuard& operator=(const GraphGuard&) = delete;
  ~GraphGuard() {
    if (exec != nullptr) CGR_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
    if (graph != nullptr) CGR_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
  }
};

}  // namespace

TEST_CASE("GPU exit decision drives a conditional IF node of a graph" *
          doctest::skip(no_cuda_device)) {
  // The decision kernel captured into a graph, followed by an IF node whose body (standing in
  // for the rest of the network) sets a marker. The handle's default is the opposite of the
  // expected condition, so a kernel that forgot to set it fails the check.
  const std::int64_t batch = 2, classes = 100;
  const Stream stream;
  unsigned seed = 1200;
  for (const ExitScenario scenario :
       {ExitScenario::confident, ExitScenario::one_not_confident, ExitScenario::nan}) {
    CAPTURE(scenario_name(scenario));
    const bool expect_fired = scenario == ExitScenario::confident;
    const DeviceArray<float> dlogits(exit_logits(batch, classes, scenario, ++seed));
    const DeviceArray<float> dconfidence(static_cast<std::size_t>(batch));
    const DeviceArray<int> dfired(std::vector<int>{7}), marker(std::vector<int>{0});

    GraphGuard g;
    CGR_CUDA_CHECK(cudaGraphCreate(&g.graph, 0));
    cudaGraphConditionalHandle handle = 0;
    CGR_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle, g.graph, expect_fired ? 1u : 0u,
                                                    cudaGraphCondAssignDefault));
    CGR_CUDA_CHECK(cudaStreamBeginCaptureToGraph(stream, g.graph, nullptr, nullptr, 0,
                                                 cudaStreamCaptureModeThreadLocal));
    const cudaError_t launched =
        kernels::exit_decision(dlogits.get(), dconfidence.get(), dfired.get(), batch, classes,
                               kThreshold, true, handle, stream);
    cudaGraph_t captured = nullptr;  // g.graph itself
    const cudaError_t ended = cudaStreamEndCapture(stream, &captured);
    CGR_CUDA_CHECK(launched);
    CGR_CUDA_CHECK(ended);

    cudaGraphNode_t decision = nullptr;
    std::size_t node_count = 1;
    CGR_CUDA_CHECK(cudaGraphGetNodes(g.graph, &decision, &node_count));
    REQUIRE(node_count == 1);

    cudaGraphNodeParams if_params{};
    if_params.type = cudaGraphNodeTypeConditional;
    if_params.conditional.handle = handle;
    if_params.conditional.type = cudaGraphCondTypeIf;
    if_params.conditional.size = 1;
    cudaGraphNode_t if_node = nullptr;
    CGR_CUDA_CHECK(cudaGraphAddNode(&if_node, g.graph, &decision, nullptr, 1, &if_params));
    cudaGraph_t body = if_params.conditional.phGraph_out[0];

    cudaGraphNodeParams set_marker{};
    set_marker.type = cudaGraphNodeTypeMemset;
    set_marker.memset.dst = marker.get();
    set_marker.memset.value = 1;
    set_marker.memset.elementSize = sizeof(int);
    set_marker.memset.width = 1;
    set_marker.memset.height = 1;
    set_marker.memset.pitch = sizeof(int);
    cudaGraphNode_t marker_node = nullptr;
    CGR_CUDA_CHECK(cudaGraphAddNode(&marker_node, body, nullptr, nullptr, 0, &set_marker));

    CGR_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
    CGR_CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(dfired.download()[0] == (expect_fired ? 1 : 0));
    CHECK(marker.download()[0] == (expect_fired ? 0 : 1));
  }
}

TEST_SUITE_END();
