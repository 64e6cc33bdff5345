// CPU conv and linear kernels against naive double-precision references, on every
// micro-kernel this CPU supports, plus the guarantee the executor relies on: the same bits
// whatever the thread count.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cgr/engine.hpp"
#include "cgr/error.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/network.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/conv_cpu.hpp"
#include "cpu/depthwise_conv_cpu.hpp"
#include "cpu/expanded_depthwise_cpu.hpp"
#include "cpu/gemm.hpp"
#include "cpu/linear_cpu.hpp"
#include "cpu/matmul_cpu.hpp"
#include "test_support.hpp"

namespace {

using cgr::cpu::ConvGeometry;
using cgr::cpu::ConvKernelCpu;
using cgr::cpu::LinearKernelCpu;
namespace gemm = cgr::cpu::gemm;

std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values)
    v = dist(rng);
  return values;
}

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p0,
                      std::int64_t p1, std::int64_t d) {
  return (in + p0 + p1 - d * (k - 1) - 1) / s + 1;
}

struct ConvCase {
  std::string name;
  ConvGeometry g;
};

ConvGeometry make_geometry(std::int64_t batch, std::int64_t cin, std::int64_t h, std::int64_t w,
                           std::int64_t cout, std::int64_t kh, std::int64_t kw, std::int64_t stride,
                           std::int64_t pad, std::int64_t dilation = 1, std::int64_t groups = 1) {
  ConvGeometry g;
  g.batch = batch;
  g.in_channels = cin;
  g.in_h = h;
  g.in_w = w;
  g.out_channels = cout;
  g.kernel_h = kh;
  g.kernel_w = kw;
  g.stride_h = g.stride_w = stride;
  g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = pad;
  g.dilation_h = g.dilation_w = dilation;
  g.groups = groups;
  return g;
}

ConvGeometry finish(ConvGeometry g) {
  g.out_h = out_size(g.in_h, g.kernel_h, g.stride_h, g.pad_top, g.pad_bottom, g.dilation_h);
  g.out_w = out_size(g.in_w, g.kernel_w, g.stride_w, g.pad_left, g.pad_right, g.dilation_w);
  return g;
}

std::size_t input_size(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.batch * g.in_channels * g.in_h * g.in_w);
}
std::size_t output_size(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.batch * g.out_channels * g.out_h * g.out_w);
}
std::size_t weight_size(const ConvGeometry& g) {
  return static_cast<std::size_t>(g.out_channels * (g.in_channels / g.groups) * g.kernel_h *
                                  g.kernel_w);
}

// Direct convolution in double; padding contributes nothing.
std::vector<double> reference_conv(const ConvGeometry& g, const std::vector<float>& in,
                                   const std::vector<float>& weight, const std::vector<float>& bias,
                                   const float* residual, const cgr::math::Activation& activation) {
  std::vector<double> out(output_size(g));
  const std::int64_t cin_g = g.in_channels / g.groups;
  const std::int64_t cout_g = g.out_channels / g.groups;
  for (std::int64_t n = 0; n < g.batch; ++n) {
    for (std::int64_t oc = 0; oc < g.out_channels; ++oc) {
      const std::int64_t group = oc / cout_g;
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          double sum = 0.0;
          for (std::int64_t c = 0; c < cin_g; ++c) {
            const std::int64_t ic = group * cin_g + c;
            for (std::int64_t kh = 0; kh < g.kernel_h; ++kh) {
              const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
              if (ih < 0 || ih >= g.in_h) continue;
              for (std::int64_t kw = 0; kw < g.kernel_w; ++kw) {
                const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
                if (iw < 0 || iw >= g.in_w) continue;
                const double x = in[static_cast<std::size_t>(
                    ((n * g.in_channels + ic) * g.in_h + ih) * g.in_w + iw)];
                const double wv = weight[static_cast<std::size_t>(
                    ((oc * cin_g + c) * g.kernel_h + kh) * g.kernel_w + kw)];
                sum += x * wv;
              }
            }
          }
          const std::size_t index =
              static_cast<std::size_t>(((n * g.out_channels + oc) * g.out_h + oh) * g.out_w + ow);
          if (!bias.empty()) sum += bias[static_cast<std::size_t>(oc)];
          if (residual) sum += residual[index];
          if (activation.kind == cgr::math::ActivationKind::relu && sum < 0.0) sum = 0.0;
          // Other activations of the float sum, as the kernel applies them to its float result.
          if (activation.kind != cgr::math::ActivationKind::none &&
              activation.kind != cgr::math::ActivationKind::relu) {
            sum = activation(static_cast<float>(sum));
          }
          out[index] = sum;
        }
      }
    }
  }
  return out;
}

// Sets an environment variable for a scope (the kernels read their switches when made), and
// restores it however the scope ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    REQUIRE(setenv(name, value, 1) == 0);
  }
  ~ScopedEnv() {
    if (previous_) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

// Within `relative` of the largest expected magnitude.
void check_close(const std::vector<float>& got, const std::vector<double>& expected,
                 double relative = 1e-5) {
  REQUIRE(got.size() == expected.size());
  double scale = 0.0;
  for (double v : expected)
    scale = std::max(scale, std::abs(v));
  const double tolerance = relative * std::max(scale, 1e-3);
  double worst = 0.0;
  std::size_t worst_index = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(static_cast<double>(got[i]) - expected[i]);
    if (!(error <= worst)) {  // also catches NaN
      worst = error;
      worst_index = i;
    }
  }
  INFO("worst error " << worst << " at " << worst_index << " (tolerance " << tolerance << ")");
  CHECK(worst <= tolerance);
}

// The largest |a[i] - b[i]| (infinity for a size mismatch or a NaN).
double worst_error(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(double{a[i]} - double{b[i]});
    if (!(error <= worst)) worst = error;  // also catches NaN
  }
  return worst;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Runs a conv the way the executor does: exact-size buffers, workspace from the kernel.
std::vector<float> run_conv(const ConvKernelCpu& conv, const std::vector<float>& in,
                            const float* residual, const cgr::math::Activation& activation,
                            cgr::ThreadPool* pool) {
  const ConvGeometry& g = conv.geometry();
  std::vector<float> out(output_size(g), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> workspace(conv.workspace_bytes() / sizeof(float),
                               std::numeric_limits<float>::quiet_NaN());
  conv.run(in.data(), residual, out.data(), workspace.data(), activation, pool);
  return out;
}

// Whether oneDNN takes dense convs here: a build with it, on a CPU where the GEMM picks its
// AVX-512 kernel (OneDnnConv::wanted).
bool onednn_expected() {
#if defined(CGR_HAVE_ONEDNN)
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    if (std::string(kernel->name) == "avx512") return true;
  }
#endif
  return false;
}

const cgr::math::Activation kRelu{.kind = cgr::math::ActivationKind::relu};
const cgr::math::Activation kNoActivation{};

// One of each activation kind the conv epilogue has (Clip's ceiling given: the tolerance of
// check_close scales with the largest output).
std::vector<cgr::math::Activation> every_activation(float clip_high) {
  return {
      kNoActivation,
      kRelu,
      {.kind = cgr::math::ActivationKind::clip, .alpha = -0.25f, .beta = clip_high},
      {.kind = cgr::math::ActivationKind::leaky_relu, .alpha = 0.1f},
      {.kind = cgr::math::ActivationKind::unary, .unary = cgr::math::UnaryOp::silu},
  };
}

// Restores the real micro-kernel choice when a test ends, passing or not.
struct KernelOverride {
  explicit KernelOverride(const gemm::MicroKernel* kernel) { gemm::set_kernel_override(kernel); }
  ~KernelOverride() { gemm::set_kernel_override(nullptr); }
  KernelOverride(const KernelOverride&) = delete;
  KernelOverride& operator=(const KernelOverride&) = delete;
};

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases;
  cases.push_back({"1x1", finish(make_geometry(1, 8, 9, 7, 12, 1, 1, 1, 0))});
  cases.push_back({"1x1 stride 2", finish(make_geometry(1, 16, 15, 13, 24, 1, 1, 2, 0))});
  cases.push_back({"3x3 pad 1", finish(make_geometry(1, 16, 12, 12, 16, 3, 3, 1, 1))});
  cases.push_back({"7x7 stride 2 pad 3", finish(make_geometry(1, 3, 23, 21, 10, 7, 7, 2, 3))});
  cases.push_back({"3x3 stride 2 odd input", finish(make_geometry(1, 6, 15, 13, 9, 3, 3, 2, 1))});
  cases.push_back({"dilation 2", finish(make_geometry(1, 5, 14, 11, 7, 3, 3, 1, 2, 2))});
  cases.push_back({"stride 3", finish(make_geometry(1, 4, 40, 37, 6, 5, 5, 3, 2))});
  cases.push_back({"stride 2 dilation 3", finish(make_geometry(1, 3, 45, 47, 5, 3, 3, 2, 3, 3))});
  cases.push_back({"3->5", finish(make_geometry(1, 3, 10, 10, 5, 3, 3, 1, 1))});
  cases.push_back({"17->33", finish(make_geometry(1, 17, 9, 10, 33, 3, 3, 1, 1))});
  cases.push_back({"K over one pass", finish(make_geometry(1, 64, 6, 7, 40, 3, 3, 1, 1))});
  cases.push_back({"groups 2", finish(make_geometry(1, 8, 10, 9, 6, 3, 3, 1, 1, 1, 2))});
  cases.push_back({"depthwise", finish(make_geometry(1, 12, 11, 10, 12, 3, 3, 1, 1, 1, 12))});
  cases.push_back(
      {"depthwise x2 stride 2", finish(make_geometry(1, 6, 13, 13, 12, 5, 5, 2, 2, 1, 6))});
  // Depthwise (one input channel per group, depthwise_conv_cpu.cpp): stride 1 runs as one flat
  // run per plane (lengths hitting each vector tail), other strides row by row from a ring.
  cases.push_back(
      {"depthwise flat dilation 2", finish(make_geometry(1, 8, 9, 9, 8, 3, 3, 1, 2, 2, 8))});
  cases.push_back(
      {"depthwise flat wide", finish(make_geometry(1, 3, 5, 150, 3, 3, 3, 1, 1, 1, 3))});
  cases.push_back(
      {"depthwise 7x7 planes", finish(make_geometry(1, 16, 7, 7, 16, 3, 3, 1, 1, 1, 16))});
  cases.push_back(
      {"depthwise stride 2 batch 2", finish(make_geometry(2, 6, 21, 133, 6, 3, 3, 2, 1, 1, 6))});
  cases.push_back(
      {"depthwise stride 3 gather", finish(make_geometry(1, 4, 40, 37, 4, 5, 5, 3, 2, 1, 4))});
  cases.push_back(
      {"depthwise stride 2 dilation 2", finish(make_geometry(1, 4, 30, 70, 4, 3, 3, 2, 2, 2, 4))});
  cases.push_back({"depthwise x3 1x1", finish(make_geometry(1, 5, 6, 7, 15, 1, 1, 1, 0, 1, 5))});
  ConvGeometry dw_asym = make_geometry(1, 3, 12, 19, 3, 3, 5, 1, 0, 1, 3);
  dw_asym.pad_top = 0;
  dw_asym.pad_bottom = 2;
  dw_asym.pad_left = 3;
  dw_asym.pad_right = 1;
  cases.push_back({"depthwise asymmetric padding", finish(dw_asym)});
  // One group, B read in place (conv_direct_cpu.cpp): wide enough that the flat run's junk
  // columns cost at most 10% more column strips, or it falls back to im2col.
  cases.push_back({"direct 3x3", finish(make_geometry(1, 8, 20, 70, 16, 3, 3, 1, 1))});
  cases.push_back({"direct stride 2 phases", finish(make_geometry(1, 6, 31, 101, 10, 3, 3, 2, 1))});
  cases.push_back({"direct dilation 2", finish(make_geometry(1, 5, 18, 90, 7, 3, 3, 1, 2, 2))});
  cases.push_back({"direct 7x7 stride 2", finish(make_geometry(1, 3, 40, 96, 8, 7, 7, 2, 3))});
  cases.push_back({"direct batch 2", finish(make_geometry(2, 7, 9, 100, 11, 3, 3, 1, 1))});
  // Windows that read only some stride phases (PhaseLayout::read_by): 1x1 stride 2 (ResNet's
  // downsample), 2x2 stride 3, 3x3 stride 2 dilation 2 (taps 0, 2, 4: the even phase only).
  cases.push_back({"direct 1x1 stride 2", finish(make_geometry(1, 9, 22, 128, 12, 1, 1, 2, 0))});
  cases.push_back({"direct 2x2 stride 3", finish(make_geometry(1, 6, 21, 100, 10, 2, 2, 3, 0))});
  cases.push_back(
      {"direct stride 2 dilation 2", finish(make_geometry(1, 5, 24, 90, 7, 3, 3, 2, 1, 2))});
  cases.push_back({"direct big weights", finish(make_geometry(1, 128, 8, 64, 300, 3, 3, 1, 1))});
  cases.push_back({"direct 1x1 partial strip", finish(make_geometry(1, 9, 10, 7, 13, 1, 1, 1, 0))});
  cases.push_back({"batch 2", finish(make_geometry(2, 7, 8, 9, 11, 3, 3, 1, 1))});
  cases.push_back({"batch 2 groups 3", finish(make_geometry(2, 9, 7, 8, 12, 3, 3, 2, 1, 1, 3))});
  cases.push_back({"1x1 output", finish(make_geometry(1, 20, 3, 3, 14, 3, 3, 1, 0))});
  // Weights over 1 MiB and a small output: im2col first, then the GEMM over all strips.
  cases.push_back({"big weights", finish(make_geometry(1, 128, 7, 7, 300, 3, 3, 1, 1))});
  ConvGeometry asym = make_geometry(1, 4, 9, 12, 6, 3, 4, 1, 0);
  asym.pad_top = 2;
  asym.pad_bottom = 0;
  asym.pad_left = 1;
  asym.pad_right = 3;
  asym.stride_w = 2;
  asym.dilation_h = 2;
  cases.push_back({"asymmetric padding", finish(asym)});
  ConvGeometry wide_pad = make_geometry(1, 2, 3, 4, 3, 3, 3, 1, 4);
  cases.push_back({"padding wider than input", finish(wide_pad)});
  return cases;
}

}  // namespace

TEST_CASE("conv cpu matches a direct convolution on every micro-kernel") {
  std::uint32_t seed = 1;
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    KernelOverride override_kernel(kernel);
    for (const ConvCase& test : conv_cases()) {
      const ConvGeometry& g = test.g;
      const auto input = random_values(input_size(g), seed++);
      const auto weight = random_values(weight_size(g), seed++);
      const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
      const auto residual = random_values(output_size(g), seed++);
      for (int variant = 0; variant < 5; ++variant) {
        // 0: plain; 1: bias + ReLU; 2: bias + residual + ReLU; 3: bias + SiLU (applied over
        // each stored tile, edge tiles included); 4: bias + residual + Clip(-0.25, 1e6), a floor
        // (the tolerance scales with the largest output).
        const std::vector<float> no_bias;
        const std::vector<float>& b = variant == 0 ? no_bias : bias;
        const float* res = variant == 2 || variant == 4 ? residual.data() : nullptr;
        cgr::math::Activation activation = variant == 0 ? kNoActivation : kRelu;
        if (variant == 3) {
          activation = {.kind = cgr::math::ActivationKind::unary,
                        .unary = cgr::math::UnaryOp::silu};
        }
        if (variant == 4) {
          activation = {.kind = cgr::math::ActivationKind::clip, .alpha = -0.25f, .beta = 1e6f};
        }
        INFO(kernel->name << " / " << test.name << " / variant " << variant);
        const ConvKernelCpu conv(g, weight, b);
        check_close(run_conv(conv, input, res, activation, nullptr),
                    reference_conv(g, input, weight, b, res, activation));
      }
    }
  }
}

TEST_CASE("conv cpu gives the same bits for every thread count and FMA micro-kernel") {
  // A: the fused path (many column strips). B: one strip and a long K: weights over 1 MiB,
  // so im2col first and the GEMM split over row blocks. C: groups and batch. D: weights over
  // 1 MiB with several column strips (a late ResNet layer, 7x7 output), unfused, and a
  // partial last row block. E: the same per group, with batch 2. F, G: depthwise. H, I: direct.
  std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 32, 28, 28, 48, 3, 3, 1, 1)),
      finish(make_geometry(1, 256, 4, 4, 512, 3, 3, 1, 1)),
      finish(make_geometry(2, 16, 19, 17, 24, 3, 3, 1, 1, 1, 2)),
      finish(make_geometry(1, 128, 7, 7, 300, 3, 3, 1, 1)),
      finish(make_geometry(2, 512, 6, 6, 272, 3, 3, 1, 1, 1, 2)),
      // H, I: B read in place, split by column strips (stride 2, phases) and by row blocks
      // (weights over 1 MiB).
      finish(make_geometry(1, 24, 40, 90, 40, 3, 3, 2, 1)),
      finish(make_geometry(1, 128, 8, 64, 300, 3, 3, 1, 1)),
      // F, G: depthwise, flat (stride 1) and by rows (stride 2), tasks of a few planes each.
      finish(make_geometry(1, 96, 28, 28, 96, 3, 3, 1, 1, 1, 96)),
      finish(make_geometry(2, 64, 30, 31, 64, 3, 3, 2, 1, 1, 64)),
  };
  cgr::ThreadPool pool1(1);
  cgr::ThreadPool pool2(2);
  cgr::ThreadPool pool3(3);
  std::uint32_t seed = 100;
  for (const ConvGeometry& g : shapes) {
    const auto input = random_values(input_size(g), seed++);
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto residual = random_values(output_size(g), seed++);
    std::vector<float> first;
    for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
      if (std::string(kernel->name) == "generic") continue;  // no FMA: different rounding
      KernelOverride override_kernel(kernel);
      INFO(kernel->name << " / " << g.in_channels << "->" << g.out_channels << " at " << g.in_h
                        << "x" << g.in_w);
      const ConvKernelCpu conv(g, weight, bias);
      const auto serial = run_conv(conv, input, residual.data(), kRelu, nullptr);
      check_close(serial, reference_conv(g, input, weight, bias, residual.data(), kRelu));
      CHECK(same_bits(serial, run_conv(conv, input, residual.data(), kRelu, &pool1)));
      CHECK(same_bits(serial, run_conv(conv, input, residual.data(), kRelu, &pool2)));
      CHECK(same_bits(serial, run_conv(conv, input, residual.data(), kRelu, &pool3)));
      // cgr's own micro-kernels agree bit for bit; oneDNN (the AVX-512 kernel's choice for
      // dense convs when built in) sums in another order, checked against the reference above.
      if (conv.uses_onednn()) continue;
      if (first.empty()) {
        first = serial;
      } else {
        CHECK(same_bits(first, serial));
      }
    }
  }
}

TEST_CASE("conv cpu: oneDNN takes dense convs, matches a direct convolution, same bits per pool") {
  // Shapes that exercise conv_onednn.cpp's slicing: channel counts that are not multiples of
  // 16; two output-channel slices, the last partial (weights over 1 MiB); row slices of two
  // heights (rows no multiple of the slices); stride 2 with dilation 2 and asymmetric padding
  // (each slice's halo); padding wider than the kernel's reach; batch 2 with a 5x5 kernel;
  // fewer than 16 input channels. (Clip's ceiling is high enough that the tolerance, scaled by
  // the largest output, holds for sums over K ~ 1000.)
  std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 24, 13, 29, 40, 3, 3, 1, 1)),
      finish(make_geometry(1, 128, 21, 30, 300, 3, 3, 1, 1)),
      finish(make_geometry(2, 48, 40, 18, 16, 5, 5, 1, 2)),
      finish(make_geometry(1, 16, 3, 40, 32, 3, 3, 1, 6)),
      // Fewer than 16 input channels (a first conv: planes, not blocks): ResNet's 7x7 stride-2
      // stem at a small size, and 5 channels with batch 2.
      finish(make_geometry(1, 3, 45, 38, 24, 7, 7, 2, 3)),
      finish(make_geometry(2, 5, 20, 20, 16, 3, 3, 1, 1)),
      // A small late layer split into channel slices for the threads; 1x1 convs with enough
      // work per transposed float (ResNet's stride-2 downsample, Inception's 768->192).
      finish(make_geometry(1, 128, 7, 7, 128, 3, 3, 1, 1)),
      finish(make_geometry(1, 128, 14, 13, 256, 1, 1, 2, 0)),
      finish(make_geometry(1, 256, 9, 9, 96, 1, 1, 1, 0)),
  };
  ConvGeometry strided = make_geometry(1, 16, 47, 35, 32, 3, 3, 2, 0, 2);
  strided.pad_top = 2;
  strided.pad_left = 1;
  strided.pad_bottom = 0;
  strided.pad_right = 3;
  shapes.push_back(finish(strided));
  const std::vector<cgr::math::Activation> activations = every_activation(4.0f);
  const bool expect_onednn = onednn_expected();
  cgr::ThreadPool pool2(2);
  cgr::ThreadPool pool3(3);
  // Convs larger than 1x1 run on NHWC inside oneDNN, or with CGR_ONEDNN_NHWC=0 on nChw16c:
  // both layouts, every shape; the dense 3x3 stride-1 ones on Winograd, and direct with
  // CGR_ONEDNN_WINOGRAD=0.
  for (const auto& [nhwc, winograd] :
       std::vector<std::pair<const char*, const char*>>{{"1", "1"}, {"0", "1"}, {"1", "0"}}) {
    const ScopedEnv nhwc_env("CGR_ONEDNN_NHWC", nhwc);
    const ScopedEnv winograd_env("CGR_ONEDNN_WINOGRAD", winograd);
    INFO("CGR_ONEDNN_NHWC=" << nhwc << " CGR_ONEDNN_WINOGRAD=" << winograd);
    std::uint32_t seed = 700;
    for (const ConvGeometry& g : shapes) {
      const auto input = random_values(input_size(g), seed++);
      const auto weight = random_values(weight_size(g), seed++);
      const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
      const auto residual = random_values(output_size(g), seed++);
      const ConvKernelCpu conv(g, weight, bias);
      INFO(g.batch << "x" << g.in_channels << "->" << g.out_channels << " at " << g.in_h << "x"
                   << g.in_w << ", kernel " << g.kernel_h << ", stride " << g.stride_h);
      REQUIRE(conv.uses_onednn() == expect_onednn);
      if (!expect_onednn) continue;
      // oneDNN's Winograd kernel takes the 3x3 stride-1 convs with 16 channels or more.
      const bool dense_3x3 = g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 &&
                             g.stride_w == 1 && g.dilation_h == 1 && g.in_channels >= 16;
      CHECK(conv.uses_winograd() == (dense_3x3 && std::string_view(winograd) == "1"));
      const double tolerance = conv.uses_winograd() ? 1e-4 : 1e-5;
      const ConvKernelCpu no_bias(g, weight, {});
      for (std::size_t a = 0; a < activations.size(); ++a) {
        const bool with_bias = a != 0;
        const float* res = a % 2 == 0 ? residual.data() : nullptr;
        const ConvKernelCpu& kernel = with_bias ? conv : no_bias;
        INFO("activation " << a);
        const auto serial = run_conv(kernel, input, res, activations[a], nullptr);
        check_close(serial,
                    reference_conv(g, input, weight, with_bias ? bias : std::vector<float>{}, res,
                                   activations[a]),
                    tolerance);
        CHECK(same_bits(serial, run_conv(kernel, input, res, activations[a], &pool2)));
        CHECK(same_bits(serial, run_conv(kernel, input, res, activations[a], &pool3)));
      }
    }
  }
  // 1x1 convs with little work per transposed float (here 16) stay with cgr's GEMM, and so
  // does every conv under another micro-kernel (the override) or with CGR_ONEDNN=0.
  const ConvGeometry pointwise = finish(make_geometry(1, 32, 8, 8, 32, 1, 1, 1, 0));
  CHECK_FALSE(ConvKernelCpu(pointwise, random_values(weight_size(pointwise), 1), {}).uses_onednn());
  // On maps larger than 16x16 a 1x1 conv needs more (192->96: 64 per float): GoogLeNet's at
  // 28x28 stays with the GEMM, the same conv at 14x14 goes to oneDNN.
  const ConvGeometry large_map = finish(make_geometry(1, 192, 28, 28, 96, 1, 1, 1, 0));
  const ConvGeometry small_map = finish(make_geometry(1, 192, 14, 14, 96, 1, 1, 1, 0));
  const auto pointwise_weight = random_values(weight_size(large_map), 3);
  CHECK_FALSE(ConvKernelCpu(large_map, pointwise_weight, {}).uses_onednn());
  CHECK(ConvKernelCpu(small_map, pointwise_weight, {}).uses_onednn() == expect_onednn);
  const ConvGeometry& dense = shapes.front();
  const auto dense_weight = random_values(weight_size(dense), 2);
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    if (std::string(kernel->name) == "avx512") continue;
    KernelOverride override_kernel(kernel);
    CHECK_FALSE(ConvKernelCpu(dense, dense_weight, {}).uses_onednn());
  }
  REQUIRE(setenv("CGR_ONEDNN", "0", 1) == 0);
  CHECK_FALSE(ConvKernelCpu(dense, dense_weight, {}).uses_onednn());
  unsetenv("CGR_ONEDNN");
  CHECK(ConvKernelCpu(dense, dense_weight, {}).uses_onednn() == expect_onednn);
}

namespace {

// A batch of images between NCHW and NHWC.
std::vector<float> transpose_images(const std::vector<float>& in, std::int64_t n, std::int64_t c,
                                    std::int64_t points, bool to_nhwc) {
  std::vector<float> out(in.size());
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t ch = 0; ch < c; ++ch) {
      for (std::int64_t p = 0; p < points; ++p) {
        const std::size_t nchw = static_cast<std::size_t>((i * c + ch) * points + p);
        const std::size_t nhwc = static_cast<std::size_t>((i * points + p) * c + ch);
        if (to_nhwc) {
          out[nhwc] = in[nchw];
        } else {
          out[nchw] = in[nhwc];
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("conv cpu: oneDNN convs read and write NHWC values with the NCHW path's bits") {
  const bool expect_onednn = onednn_expected();
  if (!expect_onednn) {
    MESSAGE("skipped: no oneDNN in this build, or no AVX-512 on this CPU");
    return;
  }
  // The direct kernels (Winograd runs on nChw16c only: no NHWC value).
  const ScopedEnv direct("CGR_ONEDNN_WINOGRAD", "0");
  // Two-group's 32->32 at 56x56 (sliced by channels for the threads, made again over whole
  // channels for an NHWC output); 16 channels at 64x64, batch 2 (one slice of channels
  // already); channels that are not multiples of 16 with stride 2, a 5x5 kernel and asymmetric
  // padding; a small map whose whole-channel slices would be too short (NHWC in only).
  ConvGeometry odd = make_geometry(1, 24, 140, 61, 40, 5, 5, 2, 2);
  odd.pad_top = 1;
  odd.pad_right = 3;
  const std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 32, 56, 56, 32, 3, 3, 1, 1)),
      finish(make_geometry(2, 16, 64, 64, 16, 3, 3, 1, 1)),
      finish(odd),
      finish(make_geometry(1, 64, 20, 20, 64, 3, 3, 1, 1)),
  };
  const std::vector<bool> writes_nhwc = {true, true, true, false};
  const cgr::math::Activation sigmoid{.kind = cgr::math::ActivationKind::unary,
                                      .unary = cgr::math::UnaryOp::sigmoid};
  const std::vector<cgr::math::Activation> activations = {
      kRelu, kNoActivation,
      cgr::math::Activation{.kind = cgr::math::ActivationKind::clip, .alpha = -0.5f, .beta = 0.5f},
      sigmoid};
  cgr::ThreadPool pool2(2);
  cgr::ThreadPool pool3(3);
  std::uint32_t seed = 1700;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const ConvGeometry& g = shapes[s];
    INFO(g.batch << "x" << g.in_channels << "->" << g.out_channels << " at " << g.in_h << "x"
                 << g.in_w << ", kernel " << g.kernel_h << ", stride " << g.stride_h);
    const auto input = random_values(input_size(g), seed++);
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto residual = random_values(output_size(g), seed++);
    const auto nhwc_input = transpose_images(input, g.batch, g.in_channels, g.in_h * g.in_w, true);
    const ConvKernelCpu nchw(g, weight, bias);
    REQUIRE(nchw.uses_onednn());
    CHECK(nchw.channels_last_input());
    CHECK(nchw.channels_last_output() == writes_nhwc[s]);
    for (const auto& [in_nhwc, out_nhwc] :
         std::vector<std::pair<bool, bool>>{{true, false}, {false, true}, {true, true}}) {
      if (out_nhwc && !writes_nhwc[s]) continue;
      INFO("NHWC input " << in_nhwc << ", NHWC output " << out_nhwc);
      ConvKernelCpu kernel(g, weight, bias);
      kernel.set_channels_last(in_nhwc, out_nhwc);
      for (std::size_t a = 0; a < activations.size(); ++a) {
        INFO("activation " << a);
        // A residual joins an NCHW output only.
        const float* res = !out_nhwc && a % 2 == 0 ? residual.data() : nullptr;
        const auto expected = run_conv(nchw, input, res, activations[a], nullptr);
        for (cgr::ThreadPool* pool : {static_cast<cgr::ThreadPool*>(nullptr), &pool2, &pool3}) {
          auto got = run_conv(kernel, in_nhwc ? nhwc_input : input, res, activations[a], pool);
          if (out_nhwc)
            got = transpose_images(got, g.batch, g.out_channels, g.out_h * g.out_w, false);
          CHECK(same_bits(got, expected));
        }
      }
    }
  }
  // Weights over 1 MiB run in channel slices: NHWC in, not out.
  const ConvGeometry wide = finish(make_geometry(1, 128, 21, 30, 300, 3, 3, 1, 1));
  ConvKernelCpu sliced(wide, random_values(weight_size(wide), 6), {});
  CHECK(sliced.channels_last_input());
  CHECK_FALSE(sliced.channels_last_output());
  CHECK_THROWS_WITH_AS(sliced.set_channels_last(false, true),
                       doctest::Contains("no channels-last value"), cgr::Error);
}

TEST_CASE(
    "conv cpu: a first conv (planes in, oneDNN) writes NHWC values with the NCHW path's bits") {
  if (!onednn_expected()) {
    MESSAGE("skipped: no oneDNN in this build, or no AVX-512 on this CPU");
    return;
  }
  // MobileNet-v2's first conv (3->32, 3x3 stride 2) at a smaller size and batch 2; 24 output
  // channels (a part block) from a 5x5 kernel with asymmetric padding; 8 channels in and out.
  ConvGeometry odd = make_geometry(1, 3, 30, 41, 24, 5, 5, 1, 2);
  odd.pad_top = 1;
  odd.pad_right = 3;
  const std::vector<ConvGeometry> shapes = {
      finish(make_geometry(2, 3, 64, 64, 32, 3, 3, 2, 1)),
      finish(odd),
      finish(make_geometry(1, 8, 16, 16, 8, 3, 3, 1, 1)),
  };
  cgr::ThreadPool pool2(2);
  cgr::ThreadPool pool3(3);
  std::uint32_t seed = 1900;
  for (const ConvGeometry& g : shapes) {
    INFO(g.batch << "x" << g.in_channels << "->" << g.out_channels << " at " << g.in_h << "x"
                 << g.in_w << ", kernel " << g.kernel_h << ", stride " << g.stride_h);
    const auto input = random_values(input_size(g), seed++);
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto residual = random_values(output_size(g), seed++);
    const auto nhwc_residual =
        transpose_images(residual, g.batch, g.out_channels, g.out_h * g.out_w, true);
    const ConvKernelCpu nchw(g, weight, bias);
    REQUIRE(nchw.uses_onednn());
    CHECK_FALSE(nchw.channels_last_input());
    CHECK(nchw.channels_last_output());
    ConvKernelCpu kernel(g, weight, bias);
    CHECK_THROWS_WITH_AS(kernel.set_channels_last(true, true),
                         doctest::Contains("no channels-last value"), cgr::Error);
    kernel.set_channels_last(false, true);
    const auto activations = every_activation(0.5f);
    for (std::size_t a = 0; a < activations.size(); ++a) {
      for (const bool with_residual : {false, true}) {
        INFO("activation " << a << ", residual " << with_residual);
        const auto expected = run_conv(nchw, input, with_residual ? residual.data() : nullptr,
                                       activations[a], nullptr);
        for (cgr::ThreadPool* pool : {static_cast<cgr::ThreadPool*>(nullptr), &pool2, &pool3}) {
          const auto got = transpose_images(
              run_conv(kernel, input, with_residual ? nhwc_residual.data() : nullptr,
                       activations[a], pool),
              g.batch, g.out_channels, g.out_h * g.out_w, false);
          CHECK(same_bits(got, expected));
        }
      }
    }
  }
}

TEST_CASE("conv cpu: 1x1 convs on NHWC values, their residual NHWC too, within rounding") {
  if (!onednn_expected()) {
    MESSAGE("skipped: no oneDNN in this build, or no AVX-512 on this CPU");
    return;
  }
  // A 1x1 conv between NCHW values runs on nChw16c; next to an NHWC value it is made again on
  // NHWC (another order of the sums: within rounding of the NCHW result, and the same bits for
  // every pool size). MobileNet's 576->96 at 14x14 (the unpadded NHWC input read in place), a
  // stride-2 one in place too, a padded one (copied), channels no multiple of 16, batch 2.
  std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 576, 14, 14, 96, 1, 1, 1, 0)),
      finish(make_geometry(1, 64, 15, 15, 128, 1, 1, 2, 0)),
      finish(make_geometry(2, 96, 9, 11, 80, 1, 1, 1, 1)),
  };
  cgr::ThreadPool pool2(2);
  cgr::ThreadPool pool3(3);
  std::uint32_t seed = 1800;
  for (const ConvGeometry& g : shapes) {
    INFO(g.batch << "x" << g.in_channels << "->" << g.out_channels << " at " << g.in_h << "x"
                 << g.in_w << ", stride " << g.stride_h << ", pad " << g.pad_top);
    const auto input = random_values(input_size(g), seed++);
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto residual = random_values(output_size(g), seed++);
    const auto nhwc_input = transpose_images(input, g.batch, g.in_channels, g.in_h * g.in_w, true);
    const auto nhwc_residual =
        transpose_images(residual, g.batch, g.out_channels, g.out_h * g.out_w, true);
    const ConvKernelCpu nchw(g, weight, bias);
    REQUIRE(nchw.uses_onednn());
    CHECK(nchw.channels_last_input());
    CHECK(nchw.channels_last_output());
    CHECK(nchw.channels_last_residual());
    for (const auto& [in_nhwc, out_nhwc] :
         std::vector<std::pair<bool, bool>>{{true, false}, {false, true}, {true, true}}) {
      INFO("NHWC input " << in_nhwc << ", NHWC output " << out_nhwc);
      ConvKernelCpu kernel(g, weight, bias);
      kernel.set_channels_last(in_nhwc, out_nhwc);
      for (const bool with_residual : {false, true}) {
        INFO("residual " << with_residual);
        const cgr::math::Activation clip{
            .kind = cgr::math::ActivationKind::clip, .alpha = -0.5f, .beta = 0.5f};
        const auto expected =
            run_conv(nchw, input, with_residual ? residual.data() : nullptr, clip, nullptr);
        const float* res = !with_residual ? nullptr
                           : out_nhwc     ? nhwc_residual.data()
                                          : residual.data();
        // Rounding scales with the sums before the clip: 1e-5 of the largest.
        double scale = 0.0;
        for (const float v : run_conv(nchw, input, nullptr, kNoActivation, nullptr))
          scale = std::max(scale, std::abs(double{v}));
        std::vector<float> first;
        for (cgr::ThreadPool* pool : {static_cast<cgr::ThreadPool*>(nullptr), &pool2, &pool3}) {
          auto got = run_conv(kernel, in_nhwc ? nhwc_input : input, res, clip, pool);
          if (out_nhwc)
            got = transpose_images(got, g.batch, g.out_channels, g.out_h * g.out_w, false);
          CHECK(worst_error(got, expected) <= 1e-5 * scale);
          if (first.empty()) first = got;
          CHECK(same_bits(got, first));
        }
      }
    }
  }
}

TEST_CASE("conv cpu: depthwise convs in channel lanes read and write NHWC with the same bits") {
  if (!onednn_expected()) {
    MESSAGE("skipped: no AVX-512 GEMM kernel on this CPU (the channel-lane path's condition)");
    return;
  }
  // The same fma chain per output whatever the layout, so the same bits as the NCHW path.
  // Whole blocks of 16 channels read an NHWC input in place (a zero vector for a tap in the
  // padding): MobileNet's 3x3 stride 2; stride 1 on an odd width (runs of 8, 2 and 1 outputs);
  // a padding wider than the kernel's reach (whole rows and columns of taps outside); a
  // dilated 3x3 and a 5x5 (the general taps); asymmetric padding. Channels no multiple of 16
  // are copied into lanes: a 5x5 kernel, batch 2. NaN and Inf in the input. An output row's
  // blocks are computed together, or in groups where the rows are few (14 rows of 6 blocks:
  // two groups of 3; 13 rows of 3: groups of 2 and 1; 5 rows of 2: one block each).
  auto asymmetric = make_geometry(1, 32, 10, 11, 32, 3, 3, 2, 0, 1, 32);
  asymmetric.pad_top = 2;
  asymmetric.pad_right = 1;
  const std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 96, 28, 28, 96, 3, 3, 2, 1, 1, 96)),
      finish(make_geometry(1, 32, 17, 19, 32, 3, 3, 1, 1, 1, 32)),
      finish(make_geometry(2, 16, 6, 7, 16, 3, 3, 1, 3, 1, 16)),
      finish(make_geometry(1, 48, 13, 12, 48, 3, 3, 1, 2, 2, 48)),
      finish(make_geometry(1, 32, 9, 15, 32, 5, 5, 2, 2, 1, 32)),
      finish(asymmetric),
      finish(make_geometry(2, 40, 13, 9, 40, 5, 5, 1, 2, 1, 40)),
  };
  const cgr::math::Activation sigmoid{.kind = cgr::math::ActivationKind::unary,
                                      .unary = cgr::math::UnaryOp::sigmoid};
  const cgr::math::Activation clip{
      .kind = cgr::math::ActivationKind::clip, .alpha = 0.0f, .beta = 6.0f};
  cgr::ThreadPool pool2(2);
  std::uint32_t seed = 1900;
  for (const ConvGeometry& g : shapes) {
    INFO(g.batch << "x" << g.in_channels << " at " << g.in_h << "x" << g.in_w << ", kernel "
                 << g.kernel_h << ", stride " << g.stride_h);
    auto input = random_values(input_size(g), seed++);
    input[3] = std::numeric_limits<float>::quiet_NaN();
    input[input.size() / 2] = std::numeric_limits<float>::infinity();
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto nhwc_input = transpose_images(input, g.batch, g.in_channels, g.in_h * g.in_w, true);
    const ConvKernelCpu nchw(g, weight, bias);
    REQUIRE_FALSE(nchw.uses_onednn());
    CHECK(nchw.channels_last_input());
    CHECK(nchw.channels_last_output());
    CHECK_FALSE(nchw.channels_last_residual());
    for (const auto& [in_nhwc, out_nhwc] :
         std::vector<std::pair<bool, bool>>{{true, false}, {false, true}, {true, true}}) {
      INFO("NHWC input " << in_nhwc << ", NHWC output " << out_nhwc);
      ConvKernelCpu kernel(g, weight, bias);
      kernel.set_channels_last(in_nhwc, out_nhwc);
      for (const auto& activation : {clip, sigmoid, kNoActivation}) {
        const auto expected = run_conv(nchw, input, nullptr, activation, nullptr);
        for (cgr::ThreadPool* pool : {static_cast<cgr::ThreadPool*>(nullptr), &pool2}) {
          auto got = run_conv(kernel, in_nhwc ? nhwc_input : input, nullptr, activation, pool);
          if (out_nhwc)
            got = transpose_images(got, g.batch, g.out_channels, g.out_h * g.out_w, false);
          CHECK(same_bits(got, expected));
        }
      }
    }
  }
}

TEST_CASE("conv cpu: an expansion fused before a depthwise conv gives the two convs' bits") {
  // LayerOp::expansion: a 1x1 conv (+ activation) computed a few rows at a time as the
  // depthwise conv reads them. Banded (AVX-512, no residual): the 1x1 conv's NHWC GEMM and the
  // depthwise conv's NHWC row kernel, so the bits of the two convs run one after the other,
  // whatever the layouts and the split: 48 channels (three column strips of 16) in two bands at
  // two threads, in three channel groups at three; 64 (two strips of 32) in groups; a dilated
  // 5x5 whose nine rows span the whole map, batch 2; a 30-row map whose window slides (chunks
  // of 7 rows of 20 points). With a residual, or without AVX-512, the two convs run whole.
  const ScopedEnv no_onednn("CGR_ONEDNN", "0");  // the reference's 1x1 conv on cgr's GEMM
  const bool avx512 = std::string_view(gemm::best_kernel().name) == "avx512";
  struct Case {
    ConvGeometry depthwise;
    std::int64_t in_channels;
  };
  const std::vector<Case> cases = {
      {finish(make_geometry(1, 48, 13, 11, 48, 3, 3, 1, 1, 1, 48)), 8},
      {finish(make_geometry(1, 64, 13, 11, 64, 3, 3, 2, 1, 1, 64)), 24},
      {finish(make_geometry(2, 32, 9, 7, 32, 5, 5, 1, 4, 2, 32)), 5},
      {finish(make_geometry(1, 96, 30, 20, 96, 3, 3, 2, 1, 1, 96)), 16},
  };
  const cgr::math::Activation clip{
      .kind = cgr::math::ActivationKind::clip, .alpha = 0.0f, .beta = 6.0f};
  const cgr::math::Activation silu{.kind = cgr::math::ActivationKind::unary,
                                   .unary = cgr::math::UnaryOp::silu};
  cgr::ThreadPool pool2(2), pool3(3);
  std::uint32_t seed = 2600;
  for (const Case& c : cases) {
    const ConvGeometry& d = c.depthwise;
    const ConvGeometry e = finish(
        make_geometry(d.batch, c.in_channels, d.in_h, d.in_w, d.in_channels, 1, 1, 1, 0, 1, 1));
    INFO(e.in_channels << " -> " << d.in_channels << " at " << d.in_h << "x" << d.in_w
                       << ", kernel " << d.kernel_h << ", stride " << d.stride_h);
    const auto input = random_values(input_size(e), seed++);
    const auto nhwc_input = transpose_images(input, e.batch, e.in_channels, e.in_h * e.in_w, true);
    const auto expansion_weight = random_values(weight_size(e), seed++);
    const auto expansion_bias = random_values(static_cast<std::size_t>(e.out_channels), seed++);
    const auto weight = random_values(weight_size(d), seed++);
    const auto bias = random_values(static_cast<std::size_t>(d.out_channels), seed++);
    const auto residual = random_values(output_size(d), seed++);
    // The two convs one after the other, the expanded tensor NHWC where the GEMM writes it so.
    ConvKernelCpu expansion(e, expansion_weight, expansion_bias);
    ConvKernelCpu depthwise(d, weight, bias);
    REQUIRE_FALSE(expansion.uses_onednn());
    if (avx512) {
      expansion.set_channels_last(false, true);
      depthwise.set_channels_last(true, false);
    }
    for (const auto& [expansion_activation, activation] :
         std::vector<std::pair<cgr::math::Activation, cgr::math::Activation>>{
             {clip, clip}, {silu, kNoActivation}, {kNoActivation, silu}}) {
      const auto expanded = run_conv(expansion, input, nullptr, expansion_activation, nullptr);
      const auto expected = run_conv(depthwise, expanded, nullptr, activation, nullptr);
      const auto expected_residual =
          run_conv(depthwise, expanded, residual.data(), activation, nullptr);
      auto run = [&](const cgr::cpu::ExpandedDepthwiseCpu& fused, const std::vector<float>& in,
                     const float* res, cgr::ThreadPool* pool) {
        std::vector<float> out(output_size(d), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> workspace(fused.workspace_bytes() / sizeof(float) + 1,
                                     std::numeric_limits<float>::quiet_NaN());
        fused.run(in.data(), res, out.data(), workspace.data(), activation, pool);
        return out;
      };
      for (const bool in_nhwc : {false, true}) {
        for (const bool out_nhwc : {false, true}) {
          INFO("NHWC input " << in_nhwc << ", NHWC output " << out_nhwc);
          cgr::cpu::ExpandedDepthwiseCpu fused(e, expansion_weight, expansion_bias,
                                               expansion_activation, d, weight, bias, false);
          CHECK(fused.banded() == avx512);
          if ((in_nhwc && !fused.channels_last_input()) ||
              (out_nhwc && !fused.channels_last_output())) {
            continue;
          }
          if (in_nhwc || out_nhwc) fused.set_channels_last(in_nhwc, out_nhwc);
          for (cgr::ThreadPool* pool : {static_cast<cgr::ThreadPool*>(nullptr), &pool2, &pool3}) {
            auto got = run(fused, in_nhwc ? nhwc_input : input, nullptr, pool);
            if (out_nhwc)
              got = transpose_images(got, d.batch, d.out_channels, d.out_h * d.out_w, false);
            CHECK(same_bits(got, expected));
          }
        }
      }
      const cgr::cpu::ExpandedDepthwiseCpu with_residual(
          e, expansion_weight, expansion_bias, expansion_activation, d, weight, bias, true);
      CHECK_FALSE(with_residual.banded());
      CHECK(same_bits(run(with_residual, input, residual.data(), &pool2), expected_residual));
    }
  }
  {
    // An empty map (zero columns) padded to two output columns: bias and activation only, as
    // the two convs give them; the unbanded path takes it.
    const ConvGeometry d = finish(make_geometry(1, 16, 3, 0, 16, 1, 1, 1, 1, 1, 16));
    const ConvGeometry e = finish(make_geometry(1, 4, 3, 0, 16, 1, 1, 1, 0, 1, 1));
    REQUIRE(d.out_w == 2);
    const auto weight = random_values(weight_size(d), 2700);
    const auto bias = random_values(16, 2701);
    const std::vector<float> expansion_weight(weight_size(e), 1.0f), none;
    const cgr::cpu::ExpandedDepthwiseCpu fused(e, expansion_weight, {}, clip, d, weight, bias,
                                               false);
    CHECK_FALSE(fused.banded());
    std::vector<float> out(output_size(d), std::numeric_limits<float>::quiet_NaN());
    std::vector<float> workspace(fused.workspace_bytes() / sizeof(float) + 1);
    fused.run(none.data(), nullptr, out.data(), workspace.data(), clip, &pool2);
    const ConvKernelCpu depthwise(d, weight, bias);
    const std::vector<float> expanded;  // e's output: no elements
    CHECK(same_bits(out, run_conv(depthwise, expanded, nullptr, clip, nullptr)));
  }
  // An expansion must be a 1x1 conv feeding the depthwise conv.
  const ConvGeometry d = finish(make_geometry(1, 16, 5, 5, 16, 3, 3, 1, 1, 1, 16));
  const ConvGeometry wrong = finish(make_geometry(1, 4, 5, 5, 32, 1, 1, 1, 0, 1, 1));
  CHECK_THROWS_WITH_AS(cgr::cpu::ExpandedDepthwiseCpu(wrong, std::vector<float>(128), {}, {}, d,
                                                      std::vector<float>(144), {}, false),
                       doctest::Contains("is a depthwise conv's input"), cgr::Error);
}

TEST_CASE("conv cpu: 1x1 convs on cgr's GEMM read and write NHWC with the NCHW path's bits") {
  if (std::string_view(gemm::best_kernel().name) != "avx512") {
    MESSAGE("skipped: no AVX-512 GEMM kernel on this CPU (the channels-last path's condition)");
    return;
  }
  // 1x1 convs too small for oneDNN (few multiply-adds per float moved) run on cgr's GEMM with
  // the points as rows next to NHWC values: each output the same fma chain over the input
  // channels as on the NCHW path, so the same bits. MobileNet's 16->96 (8 x 32 tiles), 32->16
  // and 144->24 (16 x 16 tiles), 24->144; K over two passes (320 channels); a point count no
  // multiple of the tile's rows (the last strip packed); batch 2. NaN and Inf in the input.
  const std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 16, 28, 28, 96, 1, 1, 1, 0)),
      finish(make_geometry(1, 32, 23, 21, 16, 1, 1, 1, 0)),
      finish(make_geometry(2, 144, 9, 11, 24, 1, 1, 1, 0)),
      finish(make_geometry(1, 24, 14, 14, 144, 1, 1, 1, 0)),
      finish(make_geometry(1, 320, 10, 10, 24, 1, 1, 1, 0)),
  };
  const cgr::math::Activation sigmoid{.kind = cgr::math::ActivationKind::unary,
                                      .unary = cgr::math::UnaryOp::sigmoid};
  const cgr::math::Activation clip{
      .kind = cgr::math::ActivationKind::clip, .alpha = 0.0f, .beta = 6.0f};
  cgr::ThreadPool pool2(2);
  cgr::ThreadPool pool3(3);
  std::uint32_t seed = 2000;
  for (const ConvGeometry& g : shapes) {
    INFO(g.batch << "x" << g.in_channels << "->" << g.out_channels << " at " << g.in_h << "x"
                 << g.in_w);
    auto input = random_values(input_size(g), seed++);
    input[5] = std::numeric_limits<float>::quiet_NaN();
    input[input.size() / 3] = -std::numeric_limits<float>::infinity();
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto residual = random_values(output_size(g), seed++);
    const auto nhwc_input = transpose_images(input, g.batch, g.in_channels, g.in_h * g.in_w, true);
    const auto nhwc_residual =
        transpose_images(residual, g.batch, g.out_channels, g.out_h * g.out_w, true);
    for (const bool with_bias : {true, false}) {
      const std::span<const float> b =
          with_bias ? std::span<const float>(bias) : std::span<const float>();
      const ConvKernelCpu nchw(g, weight, b);
      REQUIRE_FALSE(nchw.uses_onednn());
      CHECK(nchw.channels_last_input());
      CHECK(nchw.channels_last_output());
      CHECK(nchw.channels_last_residual());
      for (const auto& [in_nhwc, out_nhwc] :
           std::vector<std::pair<bool, bool>>{{true, false}, {false, true}, {true, true}}) {
        INFO("bias " << with_bias << ", NHWC input " << in_nhwc << ", NHWC output " << out_nhwc);
        ConvKernelCpu kernel(g, weight, b);
        kernel.set_channels_last(in_nhwc, out_nhwc);
        for (const auto& activation : {clip, sigmoid, kNoActivation}) {
          for (const bool with_residual : {false, true}) {
            INFO("residual " << with_residual);
            const auto expected = run_conv(nchw, input, with_residual ? residual.data() : nullptr,
                                           activation, nullptr);
            const float* res = !with_residual ? nullptr
                               : out_nhwc     ? nhwc_residual.data()
                                              : residual.data();
            for (cgr::ThreadPool* pool : {static_cast<cgr::ThreadPool*>(nullptr), &pool2, &pool3}) {
              auto got = run_conv(kernel, in_nhwc ? nhwc_input : input, res, activation, pool);
              if (out_nhwc)
                got = transpose_images(got, g.batch, g.out_channels, g.out_h * g.out_w, false);
              CHECK(same_bits(got, expected));
            }
          }
        }
      }
    }
  }
  // Under the tests' kernel override (no AVX-512 GEMM) a 1x1 conv stays on NCHW values.
  const ConvGeometry g = finish(make_geometry(1, 16, 8, 8, 24, 1, 1, 1, 0));
  gemm::set_kernel_override(gemm::supported_kernels().back());
  ConvKernelCpu generic(g, random_values(weight_size(g), 1), {});
  gemm::set_kernel_override(nullptr);
  CHECK_FALSE(generic.channels_last_input());
  CHECK_FALSE(generic.channels_last_output());
  CHECK_THROWS_WITH_AS(generic.set_channels_last(true, false),
                       doctest::Contains("NCHW values only"), cgr::Error);
}

TEST_CASE("CPU layout plan: channels-last values only between ops that take them, same bits") {
  using namespace cgr;
  const bool expect_onednn = onednn_expected();
  // a's value is read by b and by a max pool, which pools a channels-last input in place:
  // channels-last. b's is read by c and by a global average pool, which reads NCHW only: NCHW.
  // c's joins the input in a residual add and is an output: NCHW.
  Network net;
  const Value x = net.input("x", {1, 32, 56, 56});
  const Conv2dParams conv{.out_channels = 32, .kernel = 3, .padding = 1};
  const Value a = net.relu(net.conv2d(x, conv, "a"), "a.relu");
  const Value b = net.relu(net.conv2d(a, conv, "b"), "b.relu");
  const Value c = net.conv2d(b, conv, "c");
  net.output("y", net.relu(net.add(c, x, "add"), "add.relu"));
  net.output("pooled", net.max_pool2d(a, {.kernel = 3, .stride = 2, .padding = 1}, "pool"));
  net.output("mean", net.global_avg_pool(b, "mean"));
  const Weights weights = models::random_weights(net, 11);
  const auto image = test::random_vector(32 * 56 * 56, 12);
  auto infer = [&](const EngineOptions& options, const char* plan) {
    REQUIRE(setenv("CGR_CPU_CHANNELS_LAST", plan, 1) == 0);
    const Engine engine = Engine::build(net, weights, options);
    unsetenv("CGR_CPU_CHANNELS_LAST");
    CHECK(engine.info().channels_last_values ==
          (expect_onednn && std::string_view(plan) == "1" ? 1 : 0));
    return engine.create_context().infer({{"x", image}});
  };
  {
    // With Winograd (nChw16c) the 3x3 convs give the plan no NHWC value.
    const ScopedEnv winograd("CGR_ONEDNN_WINOGRAD", "1");
    CHECK(Engine::build(net, weights, {.threads = 2}).info().channels_last_values == 0);
  }
  // The direct kernels' NHWC paths from here on.
  const ScopedEnv direct("CGR_ONEDNN_WINOGRAD", "0");
  const Result nchw = infer({.threads = 2}, "0");
  for (const EngineOptions& options :
       {EngineOptions{.threads = 2}, EngineOptions{.mode = Mode::eager, .threads = 1},
        EngineOptions{.threads = 3}}) {
    const Result planned = infer(options, "1");
    for (const char* output : {"y", "pooled", "mean"}) {
      INFO(output);
      CHECK(planned.output(output).to_vector() == nchw.output(output).to_vector());
    }
  }
}

TEST_CASE("CPU layout plan: an inverted residual block stays NHWC, its residual with it") {
  using namespace cgr;
  const bool expect_onednn = onednn_expected();
  // MobileNet-v2's block on 14x14: h = stem(x); e = clip(1x1 64->384, h); d = clip(depthwise
  // e); p = 1x1 384->64 (d) + h; r = 1x1 (p). The expansion e is fused into the depthwise op,
  // which reads h and writes d NHWC, as oneDNN's 1x1 convs do, p's residual h with p: h, d, p
  // channels-last. With a global average pool reading p (NCHW only), p is NCHW and so is h,
  // tied to it: d left.
  for (const bool pooled : {false, true}) {
    INFO("pool reads p: " << pooled);
    Network net;
    const Value x = net.input("x", {1, 64, 14, 14});
    const Value h = net.relu(net.conv2d(x, {.out_channels = 64}, "stem"), "stem.relu");
    const Value e =
        net.clip(net.conv2d(h, {.out_channels = 384}, "expand"), {0.0f, 6.0f}, "expand.clip");
    const Value d = net.clip(
        net.conv2d(e, {.out_channels = 384, .kernel = 3, .padding = 1, .groups = 384}, "dw"),
        {0.0f, 6.0f}, "dw.clip");
    const Value p = net.add(net.conv2d(d, {.out_channels = 64}, "project"), h, "add");
    net.output("r", net.conv2d(p, {.out_channels = 64}, "head"));
    if (pooled) net.output("mean", net.global_avg_pool(p, "mean"));
    const Weights weights = models::random_weights(net, 21);
    const auto image = test::random_vector(64 * 14 * 14, 22);
    auto infer = [&](const EngineOptions& options, const char* plan) {
      REQUIRE(setenv("CGR_CPU_CHANNELS_LAST", plan, 1) == 0);
      const Engine engine = Engine::build(net, weights, options);
      unsetenv("CGR_CPU_CHANNELS_LAST");
      const int expected = !expect_onednn || std::string_view(plan) == "0" ? 0 : pooled ? 1 : 3;
      CHECK(engine.info().channels_last_values == expected);
      return engine.create_context().infer({{"x", image}});
    };
    const Result nchw = infer({.threads = 2}, "0");
    const std::vector<float> reference = nchw.output("r").to_vector();
    double scale = 0.0;
    for (const float v : reference)
      scale = std::max(scale, std::abs(double{v}));
    std::vector<float> first;
    for (const EngineOptions& options :
         {EngineOptions{.threads = 2}, EngineOptions{.mode = Mode::eager, .threads = 1},
          EngineOptions{.threads = 3}}) {
      const std::vector<float> got = infer(options, "1").output("r").to_vector();
      CHECK(worst_error(got, reference) <= 1e-5 * scale);  // the 1x1 convs' sums in another order
      if (first.empty()) first = got;
      CHECK(got == first);  // dag and eager, any thread count: the same bits
    }
  }
}

TEST_CASE("lowering: a 1x1 conv only a depthwise conv reads becomes its expansion, one op") {
  using namespace cgr;
  // MobileNet-v2's block: h = stem(x); e = clip(bn(1x1 16->64 (h))); d = clip(bn(depthwise e));
  // y = bn(1x1 64->16 (d)) + h. The expansion (conv, bn, clip) joins the depthwise op; its
  // output e exists no more. Not when e is read elsewhere too (an output), nor at a reduced
  // precision, whose storage rounding applies to every op's output.
  auto make = [](bool expanded_is_output) {
    Network net;
    const Value x = net.input("x", {1, 16, 14, 14});
    const Value h = net.relu(net.conv2d(x, {.out_channels = 16}, "stem"), "stem.relu");
    const Value e = net.clip(
        net.batch_norm2d(net.conv2d(h, {.out_channels = 64, .bias = false}, "expand"), "e.bn"),
        {0.0f, 6.0f}, "e.clip");
    const Value d = net.clip(
        net.batch_norm2d(
            net.conv2d(e, {.out_channels = 64, .kernel = 3, .padding = 1, .groups = 64}, "dw"),
            "dw.bn"),
        {0.0f, 6.0f}, "dw.clip");
    net.output("y",
               net.add(net.batch_norm2d(net.conv2d(d, {.out_channels = 16}, "project"), "p.bn"), h,
                       "add"));
    if (expanded_is_output) net.output("e", e);
    return net;
  };
  const Network net = make(false);
  const Weights weights = models::random_weights(net, 31);
  const auto image = test::random_vector(16 * 14 * 14, 32);
  auto kinds = [](const Engine& engine) {
    std::vector<std::string> result;
    for (const OpInfo& op : engine.op_infos())
      result.push_back(op.kind);
    return result;
  };
  const Engine fused = Engine::build(net, weights, {.threads = 2});
  CHECK(kinds(fused) == std::vector<std::string>{"Conv2d+ReLU",
                                                 "Conv2d+BatchNorm2d+Clip+Conv2d+BatchNorm2d+Clip",
                                                 "Conv2d+BatchNorm2d+Add"});
  CHECK(fused.op_infos()[1].input_shapes == std::vector<Shape>{Shape{1, 16, 14, 14}});
  CHECK(fused.op_names()[1] == "expand+e.bn+e.clip+dw+dw.bn+dw.clip");
  const Engine unfused = Engine::build(make(true), weights, {.threads = 2});
  CHECK(unfused.info().ops == 4);
  CHECK(Engine::build(net, weights, {.precision = Precision::bf16}).info().ops == 4);

  // Against the layers one by one (nothing fused): the sums in another order.
  const std::vector<float> reference = Engine::build(net, weights, {.threads = 1, .fuse = false})
                                           .create_context()
                                           .infer({{"x", image}})
                                           .output("y")
                                           .to_vector();
  double scale = 0.0;
  for (const float v : reference)
    scale = std::max(scale, std::abs(double{v}));
  const std::vector<float> got =
      fused.create_context().infer({{"x", image}}).output("y").to_vector();
  CHECK(worst_error(got, reference) <= 1e-5 * scale);
  CHECK(worst_error(unfused.create_context().infer({{"x", image}}).output("y").to_vector(),
                    reference) <= 1e-5 * scale);
  // dag and eager, any thread count: the same bits.
  for (const EngineOptions& options :
       {EngineOptions{.mode = Mode::eager, .threads = 1}, EngineOptions{.threads = 3}}) {
    CHECK(Engine::build(net, weights, options)
              .create_context()
              .infer({{"x", image}})
              .output("y")
              .to_vector() == got);
  }
}

TEST_CASE("depthwise conv cpu: channels in lanes give the planes' bits for every activation") {
  // The AVX-512 kernel takes the channel-lane path (a multiplier of 1), the AVX2 one the
  // planes; both run the same fma chain per output, so every bit must agree, NaN, Inf and
  // signed zeros included, with and without bias and residual, on full and partial channel
  // blocks, strides, dilation, asymmetric padding and a Unary activation (the lanes' fallback).
  const gemm::MicroKernel* avx512 = nullptr;
  const gemm::MicroKernel* avx2 = nullptr;
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    if (std::string(kernel->name) == "avx512") avx512 = kernel;
    if (std::string(kernel->name) == "avx2") avx2 = kernel;
  }
  if (avx512 == nullptr || avx2 == nullptr) {
    MESSAGE("skipped: this CPU lacks AVX-512 or AVX2");
    return;
  }
  std::vector<ConvGeometry> shapes = {
      finish(make_geometry(1, 20, 7, 7, 20, 3, 3, 1, 1, 1, 20)),
      finish(make_geometry(2, 37, 15, 13, 37, 3, 3, 2, 1, 1, 37)),
      finish(make_geometry(1, 16, 9, 30, 16, 5, 5, 1, 4, 2, 16)),
      finish(make_geometry(1, 5, 40, 37, 5, 5, 5, 3, 2, 1, 5)),
      finish(make_geometry(1, 33, 6, 70, 33, 1, 1, 1, 0, 1, 33)),
  };
  ConvGeometry asym = make_geometry(1, 18, 12, 19, 18, 3, 5, 1, 0, 1, 18);
  asym.pad_top = 0;
  asym.pad_bottom = 2;
  asym.pad_left = 3;
  asym.pad_right = 1;
  asym.stride_w = 2;
  shapes.push_back(finish(asym));
  const std::vector<cgr::math::Activation> activations = every_activation(0.5f);
  {
    // Planes whose padded copy passes lanes::kMaxPaddedFloats stay with the plane path.
    KernelOverride override_kernel(avx512);
    const ConvGeometry big = finish(make_geometry(1, 16, 400, 400, 16, 3, 3, 1, 1, 1, 16));
    const std::vector<float> big_weight(weight_size(big), 0.5f);
    CHECK_FALSE(cgr::cpu::DepthwiseConvCpu(big, big_weight, {}).channel_lanes());
  }
  cgr::ThreadPool pool(2);
  std::uint32_t seed = 500;
  for (const ConvGeometry& g : shapes) {
    const auto finite = random_values(input_size(g), seed++);
    const auto weight = random_values(weight_size(g), seed++);
    const auto bias = random_values(static_cast<std::size_t>(g.out_channels), seed++);
    const auto residual = random_values(output_size(g), seed++);
    auto special = finite;
    special[1] = std::numeric_limits<float>::quiet_NaN();
    special[special.size() / 2] = std::numeric_limits<float>::infinity();
    special[special.size() - 3] = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 5; i < special.size(); i += 7)
      special[i] = -0.0f;
    // Variants 0-3: finite input (also against the reference); 4-7: with NaN, Inf and -0.
    for (int variant = 0; variant < 8; ++variant) {
      const std::vector<float>& input = variant < 4 ? finite : special;
      const std::vector<float> no_bias;
      const std::vector<float>& b = variant % 2 == 0 ? no_bias : bias;
      const float* res = variant % 4 >= 2 ? residual.data() : nullptr;
      for (const cgr::math::Activation& activation : activations) {
        INFO(g.in_channels << " channels at " << g.in_h << "x" << g.in_w << " kernel " << g.kernel_h
                           << "x" << g.kernel_w << " stride " << g.stride_h << " / variant "
                           << variant << " / activation " << static_cast<int>(activation.kind));
        std::vector<float> planes(output_size(g), std::numeric_limits<float>::quiet_NaN());
        std::vector<float> lanes = planes;
        {
          KernelOverride override_kernel(avx2);
          const cgr::cpu::DepthwiseConvCpu conv(g, weight, b);
          CHECK_FALSE(conv.channel_lanes());
          conv.run(input.data(), res, planes.data(), activation, nullptr);
        }
        {
          KernelOverride override_kernel(avx512);
          const cgr::cpu::DepthwiseConvCpu conv(g, weight, b);
          REQUIRE(conv.channel_lanes());
          conv.run(input.data(), res, lanes.data(), activation, &pool);
        }
        CHECK(same_bits(planes, lanes));
        if (variant < 4) check_close(lanes, reference_conv(g, input, weight, b, res, activation));
      }
    }
  }
}

TEST_CASE("conv cpu propagates NaN and Inf like plain arithmetic") {
  const ConvGeometry g = finish(make_geometry(1, 2, 6, 6, 3, 3, 3, 1, 1));
  auto input = random_values(input_size(g), 7);
  const auto weight = random_values(weight_size(g), 8);
  input[static_cast<std::size_t>(1 * 36 + 2 * 6 + 3)] = std::numeric_limits<float>::quiet_NaN();
  input[static_cast<std::size_t>(0 * 36 + 5 * 6 + 0)] = std::numeric_limits<float>::infinity();
  const ConvKernelCpu conv(g, weight, {});
  const auto out = run_conv(conv, input, nullptr, kRelu, nullptr);
  for (std::int64_t oc = 0; oc < 3; ++oc) {
    for (std::int64_t oh = 0; oh < 6; ++oh) {
      for (std::int64_t ow = 0; ow < 6; ++ow) {
        const float v = out[static_cast<std::size_t>((oc * 6 + oh) * 6 + ow)];
        const bool sees_nan = std::abs(oh - 2) <= 1 && std::abs(ow - 3) <= 1;
        const bool sees_inf = std::abs(oh - 5) <= 1 && std::abs(ow - 0) <= 1;
        if (sees_nan) {
          CHECK(std::isnan(v));
        } else if (sees_inf) {
          CHECK((std::isinf(v) || v == 0.0f));  // +Inf, or -Inf through ReLU
        } else {
          CHECK(std::isfinite(v));
        }
      }
    }
  }
}

TEST_CASE("conv cpu rejects inconsistent geometry and sizes") {
  ConvGeometry g = finish(make_geometry(1, 4, 8, 8, 6, 3, 3, 1, 1));
  const std::vector<float> weight(weight_size(g), 0.5f);
  CHECK_THROWS_AS(ConvKernelCpu(g, std::span<const float>(weight).first(10), {}), cgr::Error);
  const std::vector<float> bias(5, 0.0f);
  CHECK_THROWS_AS(ConvKernelCpu(g, weight, bias), cgr::Error);
  ConvGeometry bad_groups = g;
  bad_groups.groups = 3;
  CHECK_THROWS_AS(ConvKernelCpu(bad_groups, weight, {}), cgr::Error);
  ConvGeometry bad_out = g;
  bad_out.out_h = 9;
  CHECK_THROWS_AS(ConvKernelCpu(bad_out, weight, {}), cgr::Error);
}

namespace {

std::vector<double> reference_linear(const std::vector<float>& x, std::int64_t rows,
                                     std::int64_t in, std::int64_t out,
                                     const std::vector<float>& weight,
                                     const std::vector<float>& bias, bool relu) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(o)];
      for (std::int64_t i = 0; i < in; ++i) {
        sum += static_cast<double>(x[static_cast<std::size_t>(r * in + i)]) *
               weight[static_cast<std::size_t>(o * in + i)];
      }
      y[static_cast<std::size_t>(r * out + o)] = relu && sum < 0.0 ? 0.0 : sum;
    }
  }
  return y;
}

}  // namespace

TEST_CASE("linear cpu matches a naive product") {
  struct Shape {
    std::int64_t in, out;
  };
  const Shape shapes[] = {{37, 45}, {600, 70}, {512, 1000}, {1, 3}};
  cgr::ThreadPool pool2(2);
  std::uint32_t seed = 500;
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    KernelOverride override_kernel(kernel);
    for (const Shape& s : shapes) {
      const auto weight = random_values(static_cast<std::size_t>(s.in * s.out), seed++);
      const auto bias_values = random_values(static_cast<std::size_t>(s.out), seed++);
      for (std::int64_t rows : {1, 3, 19}) {
        const auto x = random_values(static_cast<std::size_t>(rows * s.in), seed++);
        for (int variant = 0; variant < 2; ++variant) {
          const std::vector<float> bias = variant == 0 ? std::vector<float>{} : bias_values;
          const bool relu = variant == 1;
          INFO(kernel->name << " / " << s.in << "->" << s.out << " rows " << rows << " variant "
                            << variant);
          const LinearKernelCpu linear(s.in, s.out, weight, bias);
          std::vector<float> y(static_cast<std::size_t>(rows * s.out));
          linear.run(x.data(), rows, y.data(), relu, nullptr);
          check_close(y, reference_linear(x, rows, s.in, s.out, weight, bias, relu));
          std::vector<float> y2(y.size());
          linear.run(x.data(), rows, y2.data(), relu, &pool2);
          CHECK(same_bits(y, y2));
        }
      }
    }
  }
}

TEST_CASE("linear cpu gives the same bits for every thread count") {
  const std::int64_t in = 700, out = 300, rows = 40;
  const auto weight = random_values(static_cast<std::size_t>(in * out), 900);
  const auto bias = random_values(static_cast<std::size_t>(out), 901);
  const auto x = random_values(static_cast<std::size_t>(rows * in), 902);
  const LinearKernelCpu linear(in, out, weight, bias);
  std::vector<float> serial(static_cast<std::size_t>(rows * out));
  linear.run(x.data(), rows, serial.data(), false, nullptr);
  for (int threads : {1, 2, 3}) {
    cgr::ThreadPool pool(threads);
    std::vector<float> y(serial.size());
    linear.run(x.data(), rows, y.data(), false, &pool);
    CHECK(same_bits(serial, y));
  }
  CHECK_THROWS_AS(LinearKernelCpu(in, out, std::span<const float>(weight).first(5), {}),
                  cgr::Error);
}

TEST_CASE("linear cpu: a batch of one gives each row's bits from a larger batch") {
  // One row runs its own AVX-512 loop (gemm.cpp, single_row_avx512) instead of the 8-row
  // micro-kernel: the same fma chain and epilogue, so every row of a batch and the same row
  // alone agree bit for bit, with NaN, Inf and -0 among the inputs; K over several passes,
  // columns that end mid-strip and mid-vector.
  const std::int64_t in = 700, out = 1000 - 9, rows = 9;
  const auto weight = random_values(static_cast<std::size_t>(in * out), 910);
  const auto bias = random_values(static_cast<std::size_t>(out), 911);
  auto x = random_values(static_cast<std::size_t>(rows * in), 912);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[in + 5] = std::numeric_limits<float>::infinity();
  x[2 * in + 7] = -0.0f;
  cgr::ThreadPool pool(2);
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    KernelOverride override_kernel(kernel);
    for (const bool relu : {false, true}) {
      for (const bool with_bias : {false, true}) {
        INFO(kernel->name << (relu ? " / relu" : "") << (with_bias ? " / bias" : ""));
        const LinearKernelCpu linear(in, out, weight, with_bias ? bias : std::vector<float>{});
        std::vector<float> batch(static_cast<std::size_t>(rows * out));
        linear.run(x.data(), rows, batch.data(), relu, nullptr);
        for (std::int64_t r = 0; r < rows; ++r) {
          std::vector<float> one(static_cast<std::size_t>(out), 12345.0f);
          linear.run(x.data() + r * in, 1, one.data(), relu, r % 2 == 0 ? nullptr : &pool);
          CHECK(same_bits(
              one, std::vector<float>(batch.begin() + r * out, batch.begin() + (r + 1) * out)));
        }
      }
    }
  }
}

TEST_CASE(
    "matmul cpu: broadcast batches, transposes, constants, every micro-kernel and thread count") {
  // A [2, 1, m, k] @ B [3, k, n] -> [2, 3, m, n]: output matrix (i, j) reads A i and B j. Sizes
  // that fit no tile exactly, and k over one pass (kKc).
  const std::int64_t m = 19, n = 45, k = 300;
  const auto a = random_values(static_cast<std::size_t>(2 * m * k), 950);
  const auto b = random_values(static_cast<std::size_t>(3 * k * n), 951);
  cgr::ThreadPool pool1(1), pool2(2), pool3(3);
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      const cgr::MatMulParams p{.transpose_a = ta, .transpose_b = tb, .alpha = ta ? 0.75f : 1.0f};
      const cgr::Shape as = ta ? cgr::Shape{2, 1, k, m} : cgr::Shape{2, 1, m, k};
      const cgr::Shape bs = tb ? cgr::Shape{3, n, k} : cgr::Shape{3, k, n};
      const cgr::MatMul layer("mm", cgr::TensorDesc{"a", as}, cgr::TensorDesc{"b", bs}, p);
      const cgr::MatMulGeometry& g = layer.geometry();
      REQUIRE(layer.output().shape == cgr::Shape{2, 3, m, n});
      std::vector<double> expected;
      for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t j = 0; j < 3; ++j)
          for (std::int64_t r = 0; r < m; ++r)
            for (std::int64_t c = 0; c < n; ++c) {
              double acc = 0.0;
              for (std::int64_t kk = 0; kk < k; ++kk) {
                const double av =
                    a[static_cast<std::size_t>(i * m * k + (ta ? kk * m + r : r * k + kk))];
                const double bv =
                    b[static_cast<std::size_t>(j * k * n + (tb ? c * k + kk : kk * n + c))];
                acc += av * bv;
              }
              expected.push_back(p.alpha * acc);
            }
      for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
        KernelOverride override_kernel(kernel);
        INFO(kernel->name << " transA " << ta << " transB " << tb);
        const cgr::cpu::MatMulKernelCpu computed(g, std::nullopt, std::nullopt);
        const cgr::cpu::MatMulKernelCpu constant_a(g, a, std::nullopt),
            constant_b(g, std::nullopt, b);
        CHECK(constant_a.workspace_bytes() < computed.workspace_bytes());
        const auto run = [&](const cgr::cpu::MatMulKernelCpu& mm, cgr::ThreadPool* pool) {
          std::vector<float> y(expected.size(), std::numeric_limits<float>::quiet_NaN());
          std::vector<float> workspace(mm.workspace_bytes() / sizeof(float),
                                       std::numeric_limits<float>::quiet_NaN());
          mm.run(a.data(), b.data(), y.data(), workspace.data(), pool);
          return y;
        };
        const auto serial = run(computed, nullptr);
        check_close(serial, expected);
        for (cgr::ThreadPool* pool : {&pool1, &pool2, &pool3})
          CHECK(same_bits(serial, run(computed, pool)));
        CHECK(same_bits(serial, run(constant_a, &pool2)));
        CHECK(same_bits(serial, run(constant_b, &pool2)));
      }
    }
  }
  const cgr::MatMul layer("mm", cgr::TensorDesc{"a", cgr::Shape{2, 3}},
                          cgr::TensorDesc{"b", cgr::Shape{3, 4}}, {});
  CHECK_THROWS_AS(
      cgr::cpu::MatMulKernelCpu(layer.geometry(), std::span<const float>(a).first(5), std::nullopt),
      cgr::Error);
}
