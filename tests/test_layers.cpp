// Every layer's CPU kernel, run through a one-layer engine, against a naive reference written
// independently of the kernels (padded-image formulations, double accumulation), plus values
// and shape rules checked against PyTorch and the shape errors each layer raises.
#include <doctest/doctest.h>

#include <functional>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cgr/models/random_weights.hpp"
#include "test_support.hpp"

using namespace cgr;
using cgr::test::random_tensor;
using cgr::test::random_vector;
using cgr::test::relative_error;
using cgr::test::run_network;

namespace {

struct PoolCase {
  std::int64_t n, c, h, w;
  Pool2dParams p;
};

// Reference pooling over an explicitly padded image: window cells in padded coordinates,
// clipped to the padded extent (PyTorch's rule for ceil-mode windows), padding cells skipped
// for max and counted or not for avg.
std::vector<float> reference_pool(const std::vector<float>& x, const PoolCase& pc, bool max,
                                  std::int64_t out_h, std::int64_t out_w) {
  const auto& p = pc.p;
  const std::int64_t sh = p.stride.h ? p.stride.h : p.kernel.h;
  const std::int64_t sw = p.stride.w ? p.stride.w : p.kernel.w;
  const std::int64_t padded_h = pc.h + p.padding.top + p.padding.bottom;
  const std::int64_t padded_w = pc.w + p.padding.left + p.padding.right;
  std::vector<float> y;
  for (std::int64_t plane = 0; plane < pc.n * pc.c; ++plane) {
    for (std::int64_t oh = 0; oh < out_h; ++oh) {
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        std::int64_t cells = 0, real = 0;
        for (std::int64_t kh = 0; kh < p.kernel.h; ++kh) {
          for (std::int64_t kw = 0; kw < p.kernel.w; ++kw) {
            const std::int64_t ph = oh * sh + kh * p.dilation.h;
            const std::int64_t pw = ow * sw + kw * p.dilation.w;
            if (ph >= padded_h || pw >= padded_w) continue;
            ++cells;
            const std::int64_t ih = ph - p.padding.top, iw = pw - p.padding.left;
            if (ih < 0 || iw < 0 || ih >= pc.h || iw >= pc.w) continue;
            ++real;
            const double v = x[static_cast<std::size_t>((plane * pc.h + ih) * pc.w + iw)];
            acc = max ? std::max(acc, v) : acc + v;
          }
        }
        if (!max) acc /= static_cast<double>(p.count_include_pad ? cells : real);
        y.push_back(static_cast<float>(acc));
      }
    }
  }
  return y;
}

std::vector<float> reference_conv(const std::vector<float>& x, const Shape& xs,
                                  const std::vector<float>& w, const std::vector<float>& b,
                                  const Conv2dParams& p, std::int64_t oh_n, std::int64_t ow_n) {
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const std::int64_t cg = c / p.groups, og = p.out_channels / p.groups;
  std::vector<float> y;
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t oc = 0; oc < p.out_channels; ++oc)
      for (std::int64_t oh = 0; oh < oh_n; ++oh)
        for (std::int64_t ow = 0; ow < ow_n; ++ow) {
          double acc = b.empty() ? 0.0 : b[oc];
          const std::int64_t g = oc / og;
          for (std::int64_t ic = 0; ic < cg; ++ic)
            for (std::int64_t kh = 0; kh < p.kernel.h; ++kh)
              for (std::int64_t kw = 0; kw < p.kernel.w; ++kw) {
                const std::int64_t ih = oh * p.stride.h - p.padding.top + kh * p.dilation.h;
                const std::int64_t iw = ow * p.stride.w - p.padding.left + kw * p.dilation.w;
                if (ih < 0 || iw < 0 || ih >= h || iw >= wd) continue;
                acc += double{x[((in * c + g * cg + ic) * h + ih) * wd + iw]} *
                       w[((oc * cg + ic) * p.kernel.h + kh) * p.kernel.w + kw];
              }
          y.push_back(static_cast<float>(acc));
        }
  return y;
}

}  // namespace

TEST_CASE("Conv2d matches a direct convolution: odd sizes, stride, padding, dilation, groups") {
  struct Case {
    Shape x;
    Conv2dParams p;
  };
  const std::vector<Case> cases{
      {{1, 3, 15, 13}, {.out_channels = 5, .kernel = 3, .padding = 1}},
      {{2, 4, 11, 9}, {.out_channels = 6, .kernel = 3, .stride = 2, .padding = 1, .bias = false}},
      {{1, 3, 23, 23}, {.out_channels = 8, .kernel = 7, .stride = 2, .padding = 3}},
      {{1, 6, 10, 12}, {.out_channels = 4, .kernel = {3, 1}, .padding = {1, 0}, .groups = 2}},
      {{1, 8, 9, 9}, {.out_channels = 8, .kernel = 3, .padding = 2, .dilation = 2, .groups = 8}},
      {{1, 5, 8, 7}, {.out_channels = 7, .kernel = 2, .stride = {2, 1}, .padding = {0, 1, 1, 0}}},
      {{1, 17, 6, 6}, {.out_channels = 33, .kernel = 1}},
  };
  unsigned seed = 1;
  for (const auto& c : cases) {
    CAPTURE(c.x.to_string());
    Network probe;
    const Value px = probe.input("x", c.x);
    const Shape out = probe.desc(probe.conv2d(px, c.p, "conv")).shape;
    const Shape ws{c.p.out_channels, c.x[1] / c.p.groups, c.p.kernel.h, c.p.kernel.w};
    Weights weights;
    weights.add("conv.weight", random_tensor(ws, seed++));
    std::vector<float> bias;
    if (c.p.bias) {
      bias = random_vector(static_cast<std::size_t>(c.p.out_channels), seed++);
      weights.add("conv.bias", Tensor(Shape{c.p.out_channels}, bias));
    }
    const auto x = random_vector(static_cast<std::size_t>(c.x.numel()), seed++);
    const auto y = run_network(
        c.x, x, [&](Network& net, Value v) { return net.conv2d(v, c.p, "conv"); }, weights);
    const auto w = weights.find("conv.weight")->f32();
    const auto ref = reference_conv(x, c.x, {w.begin(), w.end()}, bias, c.p, out[2], out[3]);
    CHECK(relative_error(y, ref) < 1e-5);
  }
}

TEST_CASE("MaxPool2d and AvgPool2d match a padded-image reference") {
  const std::vector<PoolCase> cases{
      {1, 2, 9, 9, {.kernel = 3, .stride = 2}},
      {1, 3, 10, 7, {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true}},
      {2, 2, 6, 6, {.kernel = 2}},
      {1, 2, 13, 11, {.kernel = 3, .stride = 2, .padding = 1}},
      {1,
       1,
       6,
       6,
       {.kernel = 3, .stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false}},
      {1, 2, 7, 8, {.kernel = {3, 2}, .stride = {2, 3}, .padding = {1, 0}, .ceil_mode = true}},
      // Stride 1: pooled as one flat run over a padded plane (cpu/pool_cpu.hpp).
      {1, 3, 9, 11, {.kernel = 3, .stride = 1, .padding = 1}},
      {1, 2, 7, 7, {.kernel = 3, .stride = 1, .padding = 1, .count_include_pad = false}},
      {2, 3, 14, 13, {.kernel = 3, .stride = 1, .padding = 1, .ceil_mode = true}},
      {1, 2, 8, 9, {.kernel = {3, 2}, .stride = 1, .padding = {1, 0}}},
      {1, 4, 35, 35, {.kernel = 3, .stride = 1, .padding = 1}},
  };
  unsigned seed = 100;
  for (const auto& pc : cases) {
    const Shape xs{pc.n, pc.c, pc.h, pc.w};
    CAPTURE(xs.to_string());
    const auto x = random_vector(static_cast<std::size_t>(xs.numel()), seed++);
    for (bool max : {true, false}) {
      CAPTURE(max);
      Network probe;
      const Value px = probe.input("x", xs);
      const Shape out =
          probe.desc(max ? probe.max_pool2d(px, pc.p, "pool") : probe.avg_pool2d(px, pc.p, "pool"))
              .shape;
      const auto y = run_network(xs, x, [&](Network& net, Value v) {
        return max ? net.max_pool2d(v, pc.p, "pool") : net.avg_pool2d(v, pc.p, "pool");
      });
      CHECK(relative_error(y, reference_pool(x, pc, max, out[2], out[3])) < 1e-6);
    }
  }
  // Dilated max pool.
  const PoolCase dilated{1, 2, 12, 12, {.kernel = 3, .stride = 2, .padding = 1, .dilation = 2}};
  const Shape xs{1, 2, 12, 12};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 7);
  const auto y = run_network(
      xs, x, [&](Network& net, Value v) { return net.max_pool2d(v, dilated.p, "pool"); });
  CHECK(y.size() == 2 * 5 * 5);
  CHECK(relative_error(y, reference_pool(x, dilated, true, 5, 5)) == 0.0);
  // Dilated max pool at stride 1 (the flat path), with a NaN that every window over it keeps.
  const PoolCase dilated1{1, 2, 12, 12, {.kernel = 3, .stride = 1, .padding = 2, .dilation = 2}};
  auto xn = x;
  xn[5 * 12 + 6] = std::numeric_limits<float>::quiet_NaN();
  const auto y1 = run_network(
      xs, xn, [&](Network& net, Value v) { return net.max_pool2d(v, dilated1.p, "pool"); });
  REQUIRE(y1.size() == 2 * 12 * 12);
  for (std::int64_t oh = 0; oh < 12; ++oh) {
    for (std::int64_t ow = 0; ow < 12; ++ow) {
      // Window rows oh - 2, oh, oh + 2 and columns ow - 2, ow, ow + 2 cover (5, 6) or not.
      const bool covers = (oh - 5) % 2 == 0 && std::abs(oh - 5) <= 2 &&
                          (ow - 6) % 2 == 0 && std::abs(ow - 6) <= 2;
      CHECK(std::isnan(y1[static_cast<std::size_t>(oh * 12 + ow)]) == covers);
    }
  }
  xn[5 * 12 + 6] = x[5 * 12 + 6];
  const auto y2 = run_network(
      xs, xn, [&](Network& net, Value v) { return net.max_pool2d(v, dilated1.p, "pool"); });
  CHECK(relative_error(y2, reference_pool(x, dilated1, true, 12, 12)) == 0.0);
}

TEST_CASE("pool output sizes and ceil_mode values agree with PyTorch") {
  // (size, kernel, stride, padding, dilation, ceil_mode) -> size from torch.nn.functional.
  struct Row {
    std::int64_t in, k, s, p, d;
    bool ceil;
    std::int64_t expected;
  };
  for (const Row& r :
       {Row{112, 3, 2, 0, 1, true, 56}, Row{7, 2, 2, 0, 1, true, 4}, Row{5, 3, 2, 1, 1, true, 3},
        Row{6, 3, 2, 1, 1, true, 4}, Row{9, 2, 3, 0, 1, true, 3}, Row{10, 3, 3, 1, 1, true, 4},
        Row{8, 3, 2, 1, 2, false, 3}, Row{8, 3, 2, 1, 2, true, 4}, Row{13, 3, 2, 1, 1, false, 7},
        Row{14, 3, 2, 1, 1, true, 8}}) {
    Network net;
    const Value x = net.input("x", {1, 1, r.in, r.in});
    const Value y = net.max_pool2d(
        x, {.kernel = r.k, .stride = r.s, .padding = r.p, .dilation = r.d, .ceil_mode = r.ceil},
        "pool");
    CHECK(net.desc(y).shape == Shape{1, 1, r.expected, r.expected});
  }
  // torch.nn.functional.avg_pool2d(arange(36).reshape(1,1,6,6), 3, 2, 1, ceil_mode=True, ...)
  std::vector<float> x(36);
  for (int i = 0; i < 36; ++i)
    x[i] = static_cast<float>(i);
  const std::vector<float> include{1.5555556f, 3.3333333f, 4.6666665f, 2.6666667f, 8.333333f, 14.0f,
                                   16.0f,      8.5f,       16.333334f, 26.0f,      28.0f,     14.5f,
                                   10.166667f, 16.0f,      17.0f,      8.75f};
  const std::vector<float> exclude{3.5f,  5.0f,  7.0f,  8.0f,  12.5f, 14.0f, 16.0f, 17.0f,
                                   24.5f, 26.0f, 28.0f, 29.0f, 30.5f, 32.0f, 34.0f, 35.0f};
  for (bool count_pad : {true, false}) {
    const auto y = run_network({1, 1, 6, 6}, x, [&](Network& net, Value v) {
      return net.avg_pool2d(v,
                            {.kernel = 3,
                             .stride = 2,
                             .padding = 1,
                             .ceil_mode = true,
                             .count_include_pad = count_pad},
                            "pool");
    });
    CHECK(relative_error(y, count_pad ? include : exclude) < 1e-6);
  }
}

TEST_CASE("BatchNorm2d, ReLU, GlobalAvgPool, Add, Concat, Flatten, Softmax, Linear") {
  const Shape xs{2, 3, 5, 4};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 11, -2.0f, 2.0f);

  SUBCASE("BatchNorm2d (standalone)") {
    Weights w;
    w.add("bn.weight", random_tensor({3}, 1));
    w.add("bn.bias", random_tensor({3}, 2));
    w.add("bn.running_mean", random_tensor({3}, 3));
    w.add("bn.running_var", random_tensor({3}, 4, 0.5f, 2.0f));
    const auto y = run_network(
        xs, x, [](Network& n, Value v) { return n.batch_norm2d(v, {.eps = 1e-3}, "bn"); }, w);
    std::vector<float> ref;
    for (std::int64_t i = 0; i < xs.numel(); ++i) {
      const auto c = static_cast<std::size_t>((i / 20) % 3);
      const double g = w.find("bn.weight")->f32()[c], b = w.find("bn.bias")->f32()[c];
      const double m = w.find("bn.running_mean")->f32()[c];
      const double var = w.find("bn.running_var")->f32()[c];
      ref.push_back(static_cast<float>((x[i] - m) / std::sqrt(var + 1e-3) * g + b));
    }
    CHECK(relative_error(y, ref) < 1e-6);
  }
  SUBCASE("ReLU keeps NaN, zeroes negatives") {
    std::vector<float> xn = x;
    xn[5] = std::numeric_limits<float>::quiet_NaN();
    const auto y = run_network(xs, xn, [](Network& n, Value v) { return n.relu(v, "relu"); });
    for (std::size_t i = 0; i < y.size(); ++i) {
      if (i == 5)
        CHECK(std::isnan(y[i]));
      else
        CHECK(y[i] == std::max(xn[i], 0.0f));
    }
  }
  SUBCASE("GlobalAvgPool") {
    const auto y =
        run_network(xs, x, [](Network& n, Value v) { return n.global_avg_pool(v, "gap"); });
    REQUIRE(y.size() == 6);
    for (std::size_t p = 0; p < 6; ++p) {
      double sum = 0;
      for (std::size_t i = 0; i < 20; ++i)
        sum += x[p * 20 + i];
      CHECK(y[p] == doctest::Approx(sum / 20).epsilon(1e-6));
    }
  }
  SUBCASE("Add and Concat") {
    const auto y = run_network(xs, x, [](Network& n, Value v) {
      const Value r = n.relu(v, "r");
      const Value s = n.add(v, r, "sum");
      return n.concat({s, v, r}, "cat");
    });
    REQUIRE(y.size() == 3 * x.size());
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t i = 0; i < 60; ++i) {
        const float v = x[static_cast<std::size_t>(b * 60 + i)];
        const std::size_t base = static_cast<std::size_t>(b * 180 + i);
        CHECK(y[base] == v + std::max(v, 0.0f));
        CHECK(y[base + 60] == v);
        CHECK(y[base + 120] == std::max(v, 0.0f));
      }
  }
  SUBCASE("Concat on the last axis") {
    const auto y = run_network(xs, x, [](Network& n, Value v) {
      return n.concat({v, n.relu(v, "r")}, "cat", -1);
    });
    for (std::int64_t row = 0; row < 30; ++row)
      for (std::int64_t k = 0; k < 4; ++k) {
        const float v = x[static_cast<std::size_t>(row * 4 + k)];
        CHECK(y[static_cast<std::size_t>(row * 8 + k)] == v);
        CHECK(y[static_cast<std::size_t>(row * 8 + 4 + k)] == std::max(v, 0.0f));
      }
  }
  SUBCASE("Softmax on the last axis and on channels") {
    for (int axis : {-1, 1}) {
      CAPTURE(axis);
      const auto y =
          run_network(xs, x, [&](Network& n, Value v) { return n.softmax(v, "sm", axis); });
      const std::int64_t len = axis == 1 ? 3 : 4, stride = axis == 1 ? 20 : 1;
      for (std::int64_t i = 0; i < xs.numel(); ++i) {
        const std::int64_t pos = (i / stride) % len, start = i - pos * stride;
        double denom = 0;
        for (std::int64_t k = 0; k < len; ++k)
          denom += std::exp(double{x[start + k * stride]});
        CHECK(y[i] == doctest::Approx(std::exp(double{x[i]}) / denom).epsilon(1e-5));
      }
    }
  }
  SUBCASE("LogSoftmax on the last axis and on channels; extreme logits stay finite") {
    auto wide = x;
    wide[0] = 1000.0f;  // softmax underflows to 0 elsewhere in that row; its log must not be -inf
    for (int axis : {-1, 1}) {
      CAPTURE(axis);
      const auto y =
          run_network(xs, wide, [&](Network& n, Value v) { return n.log_softmax(v, "lsm", axis); });
      const std::int64_t len = axis == 1 ? 3 : 4, stride = axis == 1 ? 20 : 1;
      for (std::int64_t i = 0; i < xs.numel(); ++i) {
        const std::int64_t pos = (i / stride) % len, start = i - pos * stride;
        double max_value = -1e300;
        for (std::int64_t k = 0; k < len; ++k)
          max_value = std::max(max_value, double{wide[start + k * stride]});
        double sum = 0;
        for (std::int64_t k = 0; k < len; ++k)
          sum += std::exp(double{wide[start + k * stride]} - max_value);
        const double expected = double{wide[i]} - max_value - std::log(sum);
        CHECK(std::isfinite(y[i]));
        CHECK(y[i] == doctest::Approx(expected).epsilon(1e-5).scale(1.0));
      }
    }
  }
  SUBCASE("Flatten then Linear") {
    Weights w;
    w.add("fc.weight", random_tensor({7, 60}, 5));
    w.add("fc.bias", random_tensor({7}, 6));
    const auto y = run_network(
        xs, x,
        [](Network& n, Value v) {
          return n.linear(n.flatten(v, "flat"), {.out_features = 7}, "fc");
        },
        w);
    REQUIRE(y.size() == 14);
    for (std::size_t b = 0; b < 2; ++b)
      for (std::size_t o = 0; o < 7; ++o) {
        double acc = w.find("fc.bias")->f32()[o];
        for (std::size_t k = 0; k < 60; ++k)
          acc += double{x[b * 60 + k]} * w.find("fc.weight")->f32()[o * 60 + k];
        CHECK(y[b * 7 + o] == doctest::Approx(acc).epsilon(1e-5));
      }
  }
}

TEST_CASE("BatchNorm folded into the conv equals conv then BatchNorm") {
  const Shape xs{1, 4, 12, 10};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 21);
  for (bool conv_bias : {false, true}) {
    CAPTURE(conv_bias);
    Weights w;
    w.add("conv.weight", random_tensor({6, 4, 3, 3}, 22));
    if (conv_bias) w.add("conv.bias", random_tensor({6}, 23));
    w.add("bn.weight", random_tensor({6}, 24, 0.5f, 1.5f));
    w.add("bn.bias", random_tensor({6}, 25));
    w.add("bn.running_mean", random_tensor({6}, 26));
    w.add("bn.running_var", random_tensor({6}, 27, 0.1f, 3.0f));
    auto build = [&](Network& n, Value v) {
      v = n.conv2d(v,
                   {.out_channels = 6, .kernel = 3, .stride = 2, .padding = 1, .bias = conv_bias},
                   "conv");
      return n.relu(n.batch_norm2d(v, "bn"), "relu");
    };
    Network net;
    net.output("y", build(net, net.input("x", xs)));
    const Engine fused = Engine::build(net, w, {.threads = 1});
    const Engine unfused = Engine::build(net, w, {.threads = 1, .fuse = false});
    CHECK(fused.info().ops == 1);
    CHECK(fused.op_names() == std::vector<std::string>{"conv+bn+relu"});
    CHECK(unfused.info().ops == 3);
    const auto a = fused.create_context().infer({{"x", x}}).output("y").to_vector();
    const auto b = unfused.create_context().infer({{"x", x}}).output("y").to_vector();
    CHECK(relative_error(a, b) < 1e-5);
  }
}

TEST_CASE("any activation fuses into a conv (after BatchNorm and a residual) and into an add") {
  const Shape xs{1, 6, 9, 7};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 31);
  Weights w;
  w.add("conv.weight", random_tensor({6, 6, 3, 3}, 32));
  w.add("conv.bias", random_tensor({6}, 33));
  w.add("bn.weight", random_tensor({6}, 34, 0.5f, 1.5f));
  w.add("bn.bias", random_tensor({6}, 35));
  w.add("bn.running_mean", random_tensor({6}, 36));
  w.add("bn.running_var", random_tensor({6}, 37, 0.1f, 3.0f));
  struct Case {
    const char* name;
    std::function<Value(Network&, Value)> activation;
  };
  const std::vector<Case> activations = {
      {"silu",
       [](Network& n, Value v) { return n.unary(v, UnaryParams::defaults(UnaryOp::silu), "act"); }},
      {"hard_swish",
       [](Network& n, Value v) {
         return n.unary(v, UnaryParams::defaults(UnaryOp::hard_swish), "act");
       }},
      {"sigmoid",
       [](Network& n, Value v) {
         return n.unary(v, UnaryParams::defaults(UnaryOp::sigmoid), "act");
       }},
      {"leaky_relu",
       [](Network& n, Value v) { return n.leaky_relu(v, {.negative_slope = 0.2f}, "act"); }},
      {"clip",
       [](Network& n, Value v) {
         return n.clip(v, {-0.5f, 0.75f}, "act");
       }},
  };
  for (const Case& c : activations) {
    for (const bool residual : {false, true}) {
      CAPTURE(c.name);
      CAPTURE(residual);
      Network net;
      const Value in = net.input("x", xs);
      Value y = net.batch_norm2d(
          net.conv2d(in, {.out_channels = 6, .kernel = 3, .padding = 1}, "conv"), "bn");
      if (residual) y = net.add(y, in, "add");
      net.output("y", c.activation(net, y));
      const Engine fused = Engine::build(net, w, {.threads = 2});
      const Engine unfused = Engine::build(net, w, {.threads = 2, .fuse = false});
      CHECK(fused.info().ops == 1);
      CHECK(fused.op_names() ==
            std::vector<std::string>{residual ? "conv+bn+add+act" : "conv+bn+act"});
      CHECK(unfused.info().ops == (residual ? 4 : 3));
      const auto a = fused.create_context().infer({{"x", x}}).output("y").to_vector();
      const auto b = unfused.create_context().infer({{"x", x}}).output("y").to_vector();
      // BatchNorm folded into the weights rounds differently; the activation itself is the
      // layer's function object.
      CHECK(relative_error(a, b) < 1e-5);
    }
  }
  // An Add takes any activation too, bit for bit the same as the two layers.
  Network net;
  const Value a = net.input("a", xs), b = net.input("b", xs);
  net.output("y", net.unary(net.add(a, b, "add"), UnaryParams::defaults(UnaryOp::silu), "silu"));
  const Engine fused = Engine::build(net, {}, {.threads = 2});
  const Engine unfused = Engine::build(net, {}, {.threads = 2, .fuse = false});
  CHECK(fused.op_names() == std::vector<std::string>{"add+silu"});
  const auto b_values = random_vector(x.size(), 38);
  CHECK(fused.create_context().infer({{"a", x}, {"b", b_values}}).output("y").to_vector() ==
        unfused.create_context().infer({{"a", x}, {"b", b_values}}).output("y").to_vector());
}

// torchvision's SqueezeExcitation after a SiLU conv (EfficientNet / MobileNetV3).
Value squeeze_excitation(Network& n, Value x, UnaryOp gate) {
  const Value y = n.unary(n.conv2d(x, {.out_channels = 8, .kernel = 3, .padding = 1}, "conv"),
                          UnaryParams::defaults(UnaryOp::silu), "silu");
  Value s = n.global_avg_pool(y, "pool");
  s = n.relu(n.conv2d(s, {.out_channels = 3, .kernel = 1}, "fc1"), "relu");
  s = n.unary(n.conv2d(s, {.out_channels = 8, .kernel = 1}, "fc2"), UnaryParams::defaults(gate),
              "gate");
  return n.binary(y, s, BinaryOp::mul, "scale");
}

Weights squeeze_excitation_weights() {
  Weights w;
  w.add("conv.weight", random_tensor({8, 5, 3, 3}, 41));
  w.add("conv.bias", random_tensor({8}, 42));
  w.add("fc1.weight", random_tensor({3, 8, 1, 1}, 43));
  w.add("fc1.bias", random_tensor({3}, 44));
  w.add("fc2.weight", random_tensor({8, 3, 1, 1}, 45));
  w.add("fc2.bias", random_tensor({8}, 46));
  return w;
}

TEST_CASE("a squeeze-excitation block's channel Mul fuses into its gate conv, bit for bit") {
  const Shape xs{2, 5, 7, 9};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 40);
  const Weights w = squeeze_excitation_weights();
  for (const UnaryOp gate : {UnaryOp::sigmoid, UnaryOp::hard_sigmoid}) {
    CAPTURE(static_cast<int>(gate));
    Network net;
    net.output("y", squeeze_excitation(net, net.input("x", xs), gate));
    const Engine fused = Engine::build(net, w, {.threads = 2});
    const Engine unfused = Engine::build(net, w, {.threads = 2, .fuse = false});
    CHECK(fused.op_names() ==
          std::vector<std::string>{"conv+silu", "pool", "fc1+relu", "fc2+gate+scale"});
    CHECK(unfused.info().ops == 8);
    const auto a = fused.create_context().infer({{"x", x}}).output("y").to_vector();
    const auto b = unfused.create_context().infer({{"x", x}}).output("y").to_vector();
    CHECK(a == b);
  }
  // Not a gate: the Mul's operand is not N x C x 1 x 1 of the scaled tensor's N and C, or the
  // gate has another reader.
  Network other;
  const Value in = other.input("x", xs);
  const Value c = other.conv2d(in, {.out_channels = 5, .kernel = 1}, "c");
  other.output("y", other.binary(in, c, BinaryOp::mul, "mul"));
  Weights ow;
  ow.add("c.weight", random_tensor({5, 5, 1, 1}, 47));
  ow.add("c.bias", random_tensor({5}, 48));
  CHECK(Engine::build(other, ow).info().ops == 2);
  Network shared;
  const Value sx = shared.input("x", xs);
  const Value pooled = shared.global_avg_pool(sx, "pool");
  const Value g = shared.conv2d(pooled, {.out_channels = 5, .kernel = 1}, "c");
  shared.output("y", shared.binary(sx, g, BinaryOp::mul, "mul"));
  shared.output("gate", g);
  CHECK(Engine::build(shared, ow).info().ops == 3);
}

TEST_CASE("layers reject impossible shapes with messages naming the layer and the shapes") {
  using cgr::test::error_message;
  Network net;
  const Value a = net.input("a", {1, 8, 16, 16});
  const Value b = net.input("b", {1, 4, 16, 16});
  const Value c = net.input("c", {1, 8, 15, 16});
  CHECK(error_message([&] { net.add(a, b, "sum"); }) ==
        "Add 'sum': operands 'a' (1x8x16x16) and 'b' (1x4x16x16) must have the same shape");
  const std::string concat = error_message([&] { net.concat({a, c}, "cat"); });
  CHECK(concat.find("Concat 'cat'") != std::string::npos);
  CHECK(concat.find("1x8x15x16") != std::string::npos);
  CHECK(error_message([&] {
          net.conv2d(a, {.out_channels = 6, .kernel = 3, .groups = 4}, "conv");
        }).find("Conv2d 'conv': input 1x8x16x16 has 8 channels and out_channels is 6") == 0);
  CHECK(error_message([&] {
          net.conv2d(a, {.out_channels = 6, .kernel = 17}, "big");
        }).find("Conv2d 'big': input 1x8x16x16 is smaller than the dilated kernel 17") == 0);
  CHECK(error_message([&] {
          net.max_pool2d(a, {.kernel = 3, .padding = 3}, "pool");
        }).find("MaxPool2d 'pool': padding 3 must be smaller than the kernel 3") == 0);
  CHECK(error_message([&] {
          net.global_avg_pool(net.flatten(a, "f"), "gap");
        }).find("GlobalAvgPool 'gap': input 'f' has shape 1x2048") == 0);
  CHECK(error_message([&] { net.relu(a, "a"); }).find("'a' is used twice") != std::string::npos);
  // The network is still usable after the errors, and nothing half-built was left behind.
  const int layers = net.layer_count();
  const Value ok = net.add(a, a, "ok");
  CHECK(net.layer_count() == layers + 1);
  CHECK(net.desc(ok).shape == Shape{1, 8, 16, 16});
}

TEST_CASE("Clip, Pad2d and Reshape") {
  const Shape xs{1, 2, 3, 4};
  auto x = random_vector(24, 31, -8.0f, 8.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  SUBCASE("Clip is ReLU6 and keeps NaN") {
    const auto y = run_network(
        xs, x, [](Network& n, Value v) { return n.clip(v, {.low = 0.0f, .high = 6.0f}, "relu6"); });
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i == 3)
        CHECK(std::isnan(y[i]));
      else
        CHECK(y[i] == std::min(std::max(x[i], 0.0f), 6.0f));
    }
  }
  SUBCASE("Pad2d puts the planes at (top, left) in zeros") {
    const auto y = run_network(
        xs, x, [](Network& n, Value v) { return n.pad2d(v, Padding2d(1, 0, 2, 3), "pad"); });
    REQUIRE(y.size() == 2 * 6 * 7);
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 6; ++h)
        for (int w = 0; w < 7; ++w) {
          const float v = y[static_cast<std::size_t>((c * 6 + h) * 7 + w)];
          const bool inside = h >= 1 && h < 4 && w < 4;
          const float expected =
              inside ? x[static_cast<std::size_t>((c * 3 + h - 1) * 4 + w)] : 0.0f;
          if (std::isnan(expected))
            CHECK(std::isnan(v));
          else
            CHECK(v == expected);
        }
  }
  SUBCASE("Reshape keeps the data") {
    Network net;
    const Value v = net.input("x", xs);
    CHECK(net.desc(net.reshape(v, {4, 6}, "r")).shape == Shape{4, 6});
    CHECK(cgr::test::error_message([&] {
            net.reshape(v, {5, 5}, "bad");
          }) ==
          "Reshape 'bad': cannot reshape 'x' of shape 1x2x3x4 (24 elements) to 5x5 (25 elements)");
  }
}

TEST_CASE("LeakyReLU is x for x > 0, slope * x otherwise, NaN passes, -0 stays -0") {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const Shape xs{2, 3, 5, 7};
  auto x = random_vector(static_cast<std::size_t>(xs.numel()), 41, -4.0f, 4.0f);
  x[0] = kNaN;
  x[1] = -0.0f;
  x[2] = 0.0f;
  x[3] = kInf;
  x[4] = -kInf;
  x[5] = std::numeric_limits<float>::denorm_min();
  x[6] = -std::numeric_limits<float>::max();
  // PyTorch's default, a common choice, a negative slope and one above 1 (all legal).
  for (const float slope : {0.01f, 0.2f, -0.5f, 1.5f}) {
    CAPTURE(slope);
    const auto y = run_network(xs, x, [slope](Network& n, Value v) {
      return n.leaky_relu(v, {.negative_slope = slope}, "lrelu");
    });
    REQUIRE(y.size() == x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(x[i])) {
        CHECK(std::isnan(y[i]));
        continue;
      }
      // One float multiply (correctly rounded, overflowing to inf), as torch's leaky_relu.
      const float expected = x[i] > 0 ? x[i] : x[i] * slope;
      CHECK(y[i] == expected);
      CHECK(std::signbit(y[i]) == std::signbit(expected));
    }
  }
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.layer(net.producer(net.leaky_relu(v, {}, "default"))).attributes() == "slope 0.01");
  CHECK(cgr::test::error_message([&] { net.leaky_relu(v, {.negative_slope = kNaN}, "bad"); }) ==
        "LeakyReLU 'bad': negative_slope nan is not a finite number");
}

TEST_CASE("Unary: every function against its definition in double precision, specials included") {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  const Shape xs{3, 7, 11};
  auto x = random_vector(static_cast<std::size_t>(xs.numel()), 42, -6.0f, 6.0f);
  const float specials[] = {
      0.0f,    -0.0f,   kInfF, -kInfF, std::numeric_limits<float>::quiet_NaN(),
      1e-30f,  -1e-30f, 30.0f, -30.0f, 100.0f,
      -100.0f, 1.0f,    -3.0f, 3.0f};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  // The definitions (PyTorch's where it defines the op), evaluated in double.
  const auto reference = [&](UnaryOp op, double v, double a, double b) -> double {
    switch (op) {
      case UnaryOp::sigmoid:
        return 1.0 / (1.0 + std::exp(-v));
      case UnaryOp::tanh:
        return std::tanh(v);
      case UnaryOp::elu:
        return v > 0 ? v : a * std::expm1(v);
      case UnaryOp::selu:
        return b * (v > 0 ? v : a * std::expm1(v));
      case UnaryOp::hard_sigmoid:
        return std::isnan(v) ? kNaN : std::clamp(a * v + b, 0.0, 1.0);
      case UnaryOp::hard_swish:
        return std::isnan(v) ? kNaN : v * std::clamp(v + 3.0, 0.0, 6.0) / 6.0;
      case UnaryOp::softplus:
        return v > 30 ? v : std::log1p(std::exp(v));
      case UnaryOp::erf:
        return std::erf(v);
      case UnaryOp::gelu:
        return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      case UnaryOp::gelu_tanh:
        return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      case UnaryOp::silu:
        return v / (1.0 + std::exp(-v));
      case UnaryOp::exp:
        return std::exp(v);
      case UnaryOp::log:
        return std::log(v);
      case UnaryOp::sqrt:
        return std::sqrt(v);
      case UnaryOp::neg:
        return -v;
      case UnaryOp::abs:
        return std::abs(v);
      case UnaryOp::reciprocal:
        return 1.0 / v;
    }
    return kNaN;
  };
  for (int f = 0; f <= static_cast<int>(UnaryOp::reciprocal); ++f) {
    const auto op = static_cast<UnaryOp>(f);
    CAPTURE(unary_op_name(op));
    const UnaryParams p =
        op == UnaryOp::elu ? UnaryParams{op, 0.7f, 0.0f} : UnaryParams::defaults(op);
    const auto y = run_network(xs, x, [&](Network& n, Value v) { return n.unary(v, p, "f"); });
    REQUIRE(y.size() == x.size());
    int wrong = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double expected = reference(op, x[i], p.alpha, p.beta);
      const auto expected_f = static_cast<float>(expected);
      bool ok = false;
      if (std::isnan(expected_f)) {
        ok = std::isnan(y[i]);
      } else if (std::isinf(expected_f)) {
        ok = y[i] == expected_f;
      } else {
        // A few float ulps of the exact value, or of the input's scale where the float formula
        // cancels (1 + erf(x) for x << 0, alpha x + beta near 0: what PyTorch computes too).
        const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::abs(expected), 1e-30)) - 23);
        const bool cancels = op == UnaryOp::gelu || op == UnaryOp::gelu_tanh ||
                             op == UnaryOp::hard_sigmoid || op == UnaryOp::hard_swish;
        const double scale_ulp =
            cancels ? std::ldexp(1.0, -23) * std::max(1.0, std::abs(double{x[i]})) : 0.0;
        ok = std::abs(double{y[i]} - expected) <= 4 * std::max(ulp, scale_ulp);
      }
      if (!ok && wrong++ < 5) MESSAGE("x = " << x[i] << ": " << y[i] << ", expected " << expected);
    }
    CHECK(wrong == 0);
  }
  Network net;
  const Value v = net.input("x", xs);
  const Value s = net.unary(v, UnaryParams::defaults(UnaryOp::selu), "selu");
  CHECK(net.layer(net.producer(s)).label() == "Selu");
  CHECK(net.layer(net.producer(s)).attributes() == "alpha 1.6732632 beta 1.050701");
  CHECK(net.layer(net.producer(net.unary(v, {.op = UnaryOp::gelu}, "g"))).label() == "Gelu");
  CHECK(cgr::test::error_message([&] {
          net.unary(v, {.op = UnaryOp::elu, .alpha = std::numeric_limits<float>::infinity()},
                    "bad");
        }) == "Elu 'bad': alpha inf and beta 0 must be finite numbers");
  CHECK(cgr::test::error_message([&] { net.unary(v, {.op = static_cast<UnaryOp>(99)}, "bad2"); }) ==
        "Unary 'bad2': unknown function 99");
}

TEST_CASE("Binary broadcasts NumPy-style: every function, constants left and right, dims merged") {
  // broadcast_shapes and the merged geometry
  CHECK(broadcast_shapes(Shape{2, 3, 4}, Shape{3, 1}) == Shape{2, 3, 4});
  CHECK(broadcast_shapes(Shape{1, 5}, Shape{4, 1}) == Shape{4, 5});
  CHECK(broadcast_shapes(Shape{}, Shape{2, 2}) == Shape{2, 2});
  CHECK_FALSE(broadcast_shapes(Shape{2, 3}, Shape{3, 2}).has_value());
  const BroadcastGeometry same = broadcast_geometry(Shape{2, 3, 4}, Shape{2, 3, 4}, Shape{2, 3, 4});
  CHECK(same.rank == 1);
  CHECK(same.out_dims[0] == 24);
  const BroadcastGeometry channel =
      broadcast_geometry(Shape{2, 8, 5, 5}, Shape{2, 8, 5, 5}, Shape{1, 8, 1, 1});
  CHECK(channel.rank == 3);  // [2][8][25]: b walks only the middle dim
  CHECK(channel.b_strides[0] == 0);
  CHECK(channel.b_strides[1] == 1);
  CHECK(channel.b_strides[2] == 0);

  // Values against a naive NumPy-rule loop, for each function and several shape pairs.
  const auto naive = [](BinaryOp op, const std::vector<float>& a, const Shape& as,
                        const std::vector<float>& b, const Shape& bs, const Shape& out) {
    std::vector<float> y(static_cast<std::size_t>(out.numel()));
    std::vector<std::int64_t> index(out.rank(), 0);
    auto offset = [&](const Shape& s) {
      std::int64_t o = 0;
      for (std::size_t i = 0; i < s.rank(); ++i) {
        const std::size_t d = out.rank() - s.rank() + i;
        o = o * s[i] + (s[i] == 1 ? 0 : index[d]);
      }
      return static_cast<std::size_t>(o);
    };
    for (auto& v : y) {
      v = math::binary(op, a[offset(as)], b[offset(bs)]);
      for (std::size_t d = out.rank(); d-- > 0;) {
        if (++index[d] < out[d]) break;
        index[d] = 0;
      }
    }
    return y;
  };
  const std::vector<std::pair<Shape, Shape>> pairs = {{Shape{2, 3, 4}, Shape{2, 3, 4}},
                                                      {Shape{2, 3, 4}, Shape{3, 1}},
                                                      {Shape{2, 1, 4}, Shape{5, 1}},
                                                      {Shape{3, 4}, Shape{}},
                                                      {Shape{1, 4}, Shape{2, 3, 1}}};
  unsigned seed = 60;
  for (int f = 0; f <= static_cast<int>(BinaryOp::prelu); ++f) {
    const auto op = static_cast<BinaryOp>(f);
    for (const auto& [as, bs] : pairs) {
      if (op == BinaryOp::prelu && *broadcast_shapes(as, bs) != as) continue;  // slope -> x only
      CAPTURE(binary_op_name(op));
      CAPTURE(as.to_string());
      CAPTURE(bs.to_string());
      auto a = random_vector(static_cast<std::size_t>(as.numel()), ++seed, -3.0f, 3.0f);
      const auto b = random_vector(static_cast<std::size_t>(bs.numel()), ++seed, -3.0f, 3.0f);
      if (!a.empty()) a[0] = std::numeric_limits<float>::quiet_NaN();
      const Shape out = *broadcast_shapes(as, bs);
      const auto expected = naive(op, a, as, b, bs, out);
      // Two computed operands (network inputs have at least one dim; constants may be scalars).
      if (bs.rank() > 0) {
        Network net;
        const Value va = net.input("a", as), vb = net.input("b", bs);
        net.output("y", net.binary(va, vb, op, "f"));
        const Engine e = Engine::build(net, {}, {.threads = 2});
        const auto y = e.create_context().infer({{"a", a}, {"b", b}}).output("y").to_vector();
        CHECK(cgr::test::same_bits(Tensor(out, y), Tensor(out, expected)));
      }
      // b as a constant on the right, then a as a constant on the left.
      for (const bool first : {false, true}) {
        if (first && bs.rank() == 0) continue;
        Network cn;
        const Value x = cn.input("x", first ? bs : as);
        cn.output("y", cn.binary(x, op, BinaryConstant{first ? as : bs, first}, "f"));
        Weights w;
        w.add("f.constant", Tensor(first ? as : bs, first ? a : b));
        const auto yc = Engine::build(cn, w, {.threads = 2})
                            .create_context()
                            .infer({{"x", first ? b : a}})
                            .output("y")
                            .to_vector();
        CHECK(cgr::test::same_bits(Tensor(out, yc), Tensor(out, expected)));
      }
    }
  }
  Network net;
  const Value v = net.input("x", Shape{2, 3, 4});
  CHECK(net.layer(net.producer(net.binary(v, BinaryOp::mul, BinaryConstant{Shape{3, 1}}, "m")))
            .attributes() == "right constant 3x1");
  CHECK(cgr::test::error_message([&] {
          net.binary(v, BinaryOp::add, BinaryConstant{Shape{3, 3}}, "bad");
        }) == "Add 'bad': shapes 2x3x4 and 3x3 do not broadcast");
  CHECK(cgr::test::error_message([&] {
          net.binary(v, BinaryOp::prelu, BinaryConstant{Shape{5, 1, 1, 1}}, "p");
        }) == "PRelu 'p': the slope of shape 5x1x1x1 does not broadcast to x of shape 2x3x4");
}

TEST_CASE("Transpose permutes dims") {
  const Shape xs{2, 3, 4};
  const auto x = random_vector(24, 41);
  SUBCASE("Transpose") {
    const auto y = run_network(xs, x, [](Network& n, Value v) {
      return n.transpose(v, {2, 0, 1}, "t");
    });
    REQUIRE(y.size() == 24);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        for (int c = 0; c < 4; ++c)
          CHECK(y[static_cast<std::size_t>((c * 2 + a) * 3 + b)] ==
                x[static_cast<std::size_t>((a * 3 + b) * 4 + c)]);
    Network net;
    CHECK(cgr::test::error_message([&] {
            net.transpose(net.input("x", xs), {0, 0, 1}, "t");
          }).find("Transpose 't': perm [0, 0, 1] is not a permutation") == 0);
  }
}

TEST_CASE("Reduce: sum, mean, max, min over any axes, dims kept or dropped, merged geometry") {
  const Shape xs{2, 3, 4, 5};
  auto x = random_vector(static_cast<std::size_t>(xs.numel()), 77, -3.0f, 3.0f);
  // The geometry: H and W of NCHW merge into one contiguous reduced dim.
  {
    Network net;
    const Value v = net.input("x", xs);
    const auto& hw = static_cast<const Reduce&>(
        net.layer(net.producer(net.reduce(v, {ReduceOp::mean, {-1, 2}, true}, "r"))));
    CHECK(hw.output().shape == Shape{2, 3, 1, 1});
    CHECK(hw.params().axes == std::vector<int>{2, 3});
    CHECK(hw.geometry().red_rank == 1);
    CHECK(hw.geometry().red_strides[0] == 1);
    CHECK(hw.geometry().out_rank == 1);  // N and C merge too
    CHECK(hw.attributes() == "axes [2, 3] keepdims");
    CHECK(cgr::test::error_message([&] {
            net.reduce(v, {ReduceOp::sum, {4}, true}, "bad");
          }) == "ReduceSum 'bad': axis 4 is out of range for 'x' of shape 2x3x4x5");
    CHECK(cgr::test::error_message([&] {
            net.reduce(v, {ReduceOp::sum, {1, -3}, true}, "twice");
          }) == "ReduceSum 'twice': axis 1 is listed twice");
  }
  x[7] = std::numeric_limits<float>::quiet_NaN();  // max and min propagate it
  const std::vector<std::vector<int>> axis_sets = {{0},    {1},    {3},          {2, 3},
                                                   {0, 2}, {1, 3}, {0, 1, 2, 3}, {}};
  for (int f = 0; f <= static_cast<int>(ReduceOp::min); ++f) {
    const auto op = static_cast<ReduceOp>(f);
    for (const auto& axes : axis_sets) {
      for (const bool keep : {true, false}) {
        CAPTURE(reduce_op_name(op));
        CAPTURE(axes.size());
        CAPTURE(keep);
        // Naive: for every input element, its output index; accumulate in double.
        std::vector<bool> reduced(4, false);
        for (int a : axes)
          reduced[static_cast<std::size_t>(a)] = true;
        std::vector<std::int64_t> out_dims;
        for (int d = 0; d < 4; ++d)
          out_dims.push_back(reduced[d] ? 1 : xs[static_cast<std::size_t>(d)]);
        const Shape out_shape(out_dims);
        std::vector<double> acc(static_cast<std::size_t>(out_shape.numel()),
                                op == ReduceOp::max   ? -INFINITY
                                : op == ReduceOp::min ? INFINITY
                                                      : 0.0);
        std::vector<bool> nan(acc.size(), false);
        std::int64_t count = 1;
        for (int a : axes)
          count *= xs[static_cast<std::size_t>(a)];
        for (std::int64_t i = 0; i < xs.numel(); ++i) {
          std::int64_t rest = i, o = 0, mul = 1;
          for (int d = 3; d >= 0; --d) {
            const std::int64_t k = rest % xs[static_cast<std::size_t>(d)];
            rest /= xs[static_cast<std::size_t>(d)];
            o += (reduced[static_cast<std::size_t>(d)] ? 0 : k) * mul;
            mul *= out_dims[static_cast<std::size_t>(d)];
          }
          const double v = x[static_cast<std::size_t>(i)];
          auto& a = acc[static_cast<std::size_t>(o)];
          if (std::isnan(v)) nan[static_cast<std::size_t>(o)] = true;
          a = op == ReduceOp::max ? std::max(a, v) : op == ReduceOp::min ? std::min(a, v) : a + v;
        }
        const auto y = run_network(xs, x, [&](Network& n, Value v) {
          return n.reduce(v, {op, axes, keep}, "r");
        });
        REQUIRE(y.size() == acc.size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          if (nan[i]) {
            CHECK(std::isnan(y[i]));
            continue;
          }
          const double expected =
              op == ReduceOp::mean ? acc[i] / static_cast<double>(count) : acc[i];
          CHECK(std::abs(y[i] - expected) <= 1e-5 * std::max(1.0, std::abs(expected)));
        }
      }
    }
  }
}

TEST_CASE("Slice: ONNX's clamping, negative indices and steps, a gather bit for bit") {
  // slice_axis: ONNX's rules
  CHECK(slice_axis(10, 2, 7, 1).count == 5);
  CHECK(slice_axis(10, -3, 1000, 1).first == 7);
  CHECK(slice_axis(10, -3, 1000, 1).count == 3);
  CHECK(slice_axis(10, 9, -1000, -2).count == 5);  // 9, 7, 5, 3, 1
  CHECK(slice_axis(10, 1000, 0, -3).first == 9);   // clamps to size - 1
  CHECK(slice_axis(10, 1000, 0, -3).count == 3);   // 9, 6, 3
  CHECK(slice_axis(10, 5, 2, 1).count == 0);
  CHECK(slice_axis(4, 0, 4, 100).count == 1);
  const Shape xs{2, 5, 6};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 91);
  const auto y = run_network(xs, x, [](Network& n, Value v) {
    return n.slice(v, {{-1, 4, 1}, {-1000, 0, 6}, {0, 1, 2}, {-1, -2, 2}}, "s");
  });
  // axis 0: 1, 0 (reversed); axis 1: 4, 2 (step -2, end 0 exclusive); axis 2: 1, 3, 5
  REQUIRE(y.size() == 2 * 2 * 3);
  std::size_t k = 0;
  for (int a : {1, 0})
    for (int b : {4, 2})
      for (int c : {1, 3, 5})
        CHECK(y[k++] == x[static_cast<std::size_t>((a * 5 + b) * 6 + c)]);
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.desc(net.slice(v, {{0}, {0}, {1}, {}}, "empty")).shape == Shape{2, 0, 6});
  CHECK(cgr::test::error_message([&] {
          net.slice(v, {{0}, {1}, {3}, {}}, "bad");
        }) == "Slice 'bad': axis 3 is out of range for 'x' of shape 2x5x6");
  CHECK(cgr::test::error_message([&] {
          net.slice(v, {{0}, {1}, {0}, {0}}, "zero");
        }) == "Slice 'zero': a step of 0 along axis 0");
}

namespace {

// The transposed convolution by its definition: every input pixel scatters x * weight into the
// taps of its window (double accumulation), then the trim of pad_top / pad_left; the output
// size is the layer's.
std::vector<float> reference_conv_transpose(const std::vector<float>& x, const Shape& xs,
                                            const std::vector<float>& w,
                                            const std::vector<float>& b,
                                            const ConvTranspose2dParams& p, std::int64_t out_h,
                                            std::int64_t out_w) {
  const bool one_d = xs.rank() == 3;
  const std::int64_t n = xs[0], c = xs[1], h = one_d ? 1 : xs[2], wd = xs[xs.rank() - 1];
  const std::int64_t cg = c / p.groups, og = p.out_channels / p.groups;
  std::vector<double> y(static_cast<std::size_t>(n * p.out_channels * out_h * out_w), 0.0);
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t ic = 0; ic < c; ++ic)
      for (std::int64_t ih = 0; ih < h; ++ih)
        for (std::int64_t iw = 0; iw < wd; ++iw)
          for (std::int64_t o = 0; o < og; ++o)
            for (std::int64_t kh = 0; kh < p.kernel.h; ++kh)
              for (std::int64_t kw = 0; kw < p.kernel.w; ++kw) {
                const std::int64_t oh = ih * p.stride.h + kh * p.dilation.h - p.padding.top;
                const std::int64_t ow = iw * p.stride.w + kw * p.dilation.w - p.padding.left;
                if (oh < 0 || ow < 0 || oh >= out_h || ow >= out_w) continue;
                const std::int64_t oc = ic / cg * og + o;
                y[static_cast<std::size_t>(((in * p.out_channels + oc) * out_h + oh) * out_w +
                                           ow)] +=
                    double{x[static_cast<std::size_t>(((in * c + ic) * h + ih) * wd + iw)]} *
                    w[static_cast<std::size_t>(((ic * og + o) * p.kernel.h + kh) * p.kernel.w +
                                               kw)];
              }
  std::vector<float> out;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const auto oc =
        static_cast<std::size_t>(static_cast<std::int64_t>(i) / (out_h * out_w) % p.out_channels);
    out.push_back(static_cast<float>(y[i] + (b.empty() ? 0.0 : b[oc])));
  }
  return out;
}

}  // namespace

TEST_CASE(
    "ConvTranspose2d matches the scatter definition: stride, padding, output_padding, "
    "dilation, groups, 1-D") {
  struct Case {
    Shape x;
    ConvTranspose2dParams p;
    Shape out;  // PyTorch's output shape for these arguments
  };
  const std::vector<Case> cases{
      // PyTorch's upsampling pattern: k3 s2 p1 output_padding 1 doubles the size.
      {{1, 3, 5, 4},
       {.out_channels = 5, .kernel = 3, .stride = 2, .padding = 1, .output_padding = 1},
       {1, 5, 10, 8}},
      {{2, 4, 4, 5},
       {.out_channels = 6, .kernel = 3, .dilation = 2, .groups = 2, .bias = false},
       {2, 6, 8, 9}},
      // Rectangular, asymmetric padding (ONNX pads), output_padding on both axes.
      {{1, 2, 3, 3},
       {.out_channels = 3,
        .kernel = {2, 3},
        .stride = {2, 3},
        .padding = Padding2d(1, 0, 0, 2),
        .output_padding = {1, 2}},
       {1, 3, 6, 9}},
      // DCGAN's first layer (1x1 -> 4x4) and a depthwise k4 s2 p1 upsampling.
      {{2, 8, 1, 1}, {.out_channels = 6, .kernel = 4}, {2, 6, 4, 4}},
      {{1, 4, 6, 6},
       {.out_channels = 4, .kernel = 4, .stride = 2, .padding = 1, .groups = 4},
       {1, 4, 12, 12}},
      // output_padding past the stride, allowed by the dilation: a row no tap reaches (bias).
      {{1, 2, 4, 4},
       {.out_channels = 3, .kernel = 3, .output_padding = 1, .dilation = 2},
       {1, 3, 9, 9}},
      // Padding larger than the kernel: taps that land outside are dropped.
      {{1, 3, 6, 5}, {.out_channels = 2, .kernel = 2, .stride = 3, .padding = 3}, {1, 2, 11, 8}},
      // nn.ConvTranspose1d on N x C x L.
      {{2, 3, 7},
       {.out_channels = 4,
        .kernel = {1, 3},
        .stride = {1, 2},
        .padding = {0, 1},
        .output_padding = {0, 1}},
       {2, 4, 14}},
      // Several column strips, row blocks and threads.
      {{1, 16, 12, 11},
       {.out_channels = 20, .kernel = 3, .stride = 2, .padding = 1},
       {1, 20, 23, 21}},
  };
  unsigned seed = 300;
  for (const auto& c : cases) {
    CAPTURE(c.x.to_string());
    Network probe;
    const Value px = probe.input("x", c.x);
    const Value py = probe.conv_transpose2d(px, c.p, "up");
    REQUIRE(probe.desc(py).shape == c.out);
    const auto& layer = dynamic_cast<const ConvTranspose2d&>(probe.layer(0));
    const Shape ws = c.x.rank() == 3
                         ? Shape{c.x[1], c.p.out_channels / c.p.groups, c.p.kernel.w}
                         : Shape{c.x[1], c.p.out_channels / c.p.groups, c.p.kernel.h, c.p.kernel.w};
    CHECK(layer.weight_specs()[0].shape == ws);
    Weights weights;
    weights.add("up.weight", random_tensor(ws, seed++));
    std::vector<float> bias;
    if (c.p.bias) {
      bias = random_vector(static_cast<std::size_t>(c.p.out_channels), seed++);
      weights.add("up.bias", Tensor(Shape{c.p.out_channels}, bias));
    }
    const auto x = random_vector(static_cast<std::size_t>(c.x.numel()), seed++);
    const auto build = [&](Network& net, Value v) { return net.conv_transpose2d(v, c.p, "up"); };
    const auto y = run_network(c.x, x, build, weights);
    const auto w = weights.find("up.weight")->f32();
    const auto ref = reference_conv_transpose(x, c.x, {w.begin(), w.end()}, bias, c.p,
                                              layer.geometry().out_h, layer.geometry().out_w);
    CHECK(relative_error(y, ref) < 1e-5);
    // Every output is the bias plus its taps in one fixed order: the same bits on 1 and 3
    // threads, in both modes.
    for (Mode mode : {Mode::eager, Mode::dag}) {
      CHECK(run_network(c.x, x, build, weights, {.mode = mode, .threads = 1}) == y);
      CHECK(run_network(c.x, x, build, weights, {.mode = mode, .threads = 3}) == y);
    }
  }
}

TEST_CASE("ConvTranspose2d refuses impossible arguments, naming the layer, shapes and argument") {
  using cgr::test::error_message;
  Network net;
  const Value x = net.input("x", {1, 4, 5, 5});
  const Value line = net.input("line", {1, 4, 9});
  CHECK(
      error_message([&] {
        net.conv_transpose2d(x, {.out_channels = 2, .kernel = 3, .stride = 2, .output_padding = 2},
                             "op");
      }) ==
      "ConvTranspose2d 'op': output_padding 2 must be smaller than the stride 2 or the dilation 1");
  CHECK(error_message(
            [&] { net.conv_transpose2d(x, {.out_channels = 3, .kernel = 3, .groups = 2}, "g"); }) ==
        "ConvTranspose2d 'g': input 1x4x5x5 has 4 channels and out_channels is 3; both must be "
        "divisible by groups=2");
  CHECK(error_message([&] {
          net.conv_transpose2d(x, {.out_channels = 2, .kernel = 2, .padding = 3}, "trim");
        }) ==
        "ConvTranspose2d 'trim': input 1x4x5x5 with kernel 2, stride 1, dilation 1 and "
        "output_padding 0 gives no output after trimming padding 3");
  CHECK(error_message(
            [&] { net.conv_transpose2d(line, {.out_channels = 2, .kernel = 3}, "tall"); }) ==
        "ConvTranspose2d 'tall': input 'line' of shape 1x4x9 is 1-D (N x C x L), so the window "
        "must have height 1 (kernel 3, stride 1, dilation 1, padding 0)");
  CHECK(error_message([&] {
          net.conv_transpose2d(net.flatten(x, "flat"), {.out_channels = 2}, "flat_up");
        }) ==
        "ConvTranspose2d 'flat_up': input 'flat' has shape 1x100, expected N x C x H x W or N x C "
        "x L");
}

TEST_CASE("1-D inputs (N x C x L) run through the 2-D window layers as height 1, bit for bit") {
  // Each layer on N x C x L against the same layer on N x C x 1 x L: same bytes in and out,
  // so the result must be identical; the weights keep PyTorch's 1-D shapes.
  const Shape line{2, 4, 13}, plane{2, 4, 1, 13};
  const auto x = random_vector(static_cast<std::size_t>(line.numel()), 41, -2.0f, 2.0f);
  struct Case {
    const char* what;
    std::function<Value(Network&, Value, bool)> build;  // bool: the input is 1-D
    Shape out;
  };
  const std::vector<Case> cases{
      {"Conv1d k3 s2 p1, dilation and groups",
       [](Network& n, Value v, bool) {
         return n.conv2d(v,
                         {.out_channels = 6,
                          .kernel = {1, 3},
                          .stride = {1, 2},
                          .padding = {0, 2},
                          .dilation = {1, 2},
                          .groups = 2},
                         "conv");
       },
       {2, 6, 7}},
      {"Conv1d + BatchNorm1d + ReLU, fused",
       [](Network& n, Value v, bool) {
         v = n.conv2d(v, {.out_channels = 5, .kernel = {1, 3}, .padding = {0, 1}, .bias = false},
                      "conv");
         return n.relu(n.batch_norm2d(v, "bn"), "relu");
       },
       {2, 5, 13}},
      {"MaxPool1d k3 s2 p1 ceil",
       [](Network& n, Value v, bool) {
         return n.max_pool2d(
             v, {.kernel = {1, 3}, .stride = {1, 2}, .padding = {0, 1}, .ceil_mode = true}, "pool");
       },
       {2, 4, 7}},
      {"AvgPool1d k2, count_include_pad off",
       [](Network& n, Value v, bool) {
         return n.avg_pool2d(v, {.kernel = {1, 2}, .padding = {0, 1}, .count_include_pad = false},
                             "pool");
       },
       {2, 4, 7}},
      {"AdaptiveAvgPool1d(1)",
       [](Network& n, Value v, bool) { return n.global_avg_pool(v, "gap"); },
       {2, 4, 1}},
      {"zero padding of L",
       [](Network& n, Value v, bool) { return n.pad2d(v, Padding2d(0, 2, 0, 1), "pad"); },
       {2, 4, 16}},
      {"ConvTranspose1d k4 s2 p1",
       [](Network& n, Value v, bool) {
         return n.conv_transpose2d(
             v, {.out_channels = 3, .kernel = {1, 4}, .stride = {1, 2}, .padding = {0, 1}}, "up");
       },
       {2, 3, 26}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    Network one_d, two_d;
    const Value a = c.build(one_d, one_d.input("x", line), true);
    const Value b = c.build(two_d, two_d.input("x", plane), false);
    CHECK(one_d.desc(a).shape == c.out);
    one_d.output("y", a);
    two_d.output("y", b);
    // Seeded weights of the 2-D network, each bound to the 1-D one under its own 1-D shape.
    const Weights w2 = models::random_weights(two_d, 42);
    Weights w1;
    for (int i = 0; i < one_d.layer_count(); ++i) {
      for (const WeightSpec& spec : one_d.layer(i).weight_specs()) {
        const std::string name = one_d.layer(i).name() + "." + spec.suffix;
        const auto values = w2.find(name)->f32();
        REQUIRE(values.size() == static_cast<std::size_t>(spec.shape.numel()));
        w1.add(name, Tensor(spec.shape, std::vector<float>(values.begin(), values.end())));
      }
    }
    const auto y1 = Engine::build(one_d, w1).create_context().infer({{"x", x}}).output("y");
    const auto y2 = Engine::build(two_d, w2).create_context().infer({{"x", x}}).output("y");
    CHECK(y1.shape() == c.out);
    CHECK(y1.to_vector() == y2.to_vector());
  }
  Network net;
  const Value v = net.input("line", line);
  CHECK(net.layer(net.producer(net.conv2d(v, {.out_channels = 2, .kernel = {1, 5}}, "c")))
            .weight_specs()[0]
            .shape == Shape{2, 4, 5});
  CHECK(
      cgr::test::error_message([&] { net.conv2d(v, {.out_channels = 2, .kernel = 3}, "tall"); }) ==
      "Conv2d 'tall': input 'line' of shape 2x4x13 is 1-D (N x C x L), so the window must have "
      "height 1 (kernel 3, stride 1, dilation 1, padding 0)");
  CHECK(cgr::test::error_message([&] {
          net.max_pool2d(v, {.kernel = {1, 2}, .padding = {1, 0}}, "p");
        }) ==
        "MaxPool2d 'p': input 'line' of shape 2x4x13 is 1-D (N x C x L), so the window must have "
        "height 1 (kernel 1x2, stride 1x2, dilation 1, padding 1x0)");
}

namespace {

// NumPy's matmul, naively: 1-D promotion, batch dims broadcast, op() transposes, alpha; double
// accumulation.
std::vector<float> reference_matmul(const std::vector<float>& a, const Shape& as,
                                    const std::vector<float>& b, const Shape& bs,
                                    const MatMulParams& p, const Shape& out) {
  const std::size_t ra = as.rank(), rb = bs.rank();
  const std::int64_t a_rows = ra >= 2 ? as[ra - 2] : 1, a_cols = as[ra - 1];
  const std::int64_t b_rows = rb >= 2 ? bs[rb - 2] : bs[0], b_cols = rb >= 2 ? bs[rb - 1] : 1;
  const std::int64_t m = p.transpose_a ? a_cols : a_rows, k = p.transpose_a ? a_rows : a_cols;
  const std::int64_t n = p.transpose_b ? b_rows : b_cols;
  const std::size_t batch_rank = out.rank() - (ra >= 2 ? 1 : 0) - (rb >= 2 ? 1 : 0);
  std::int64_t batch = 1;
  for (std::size_t d = 0; d < batch_rank; ++d)
    batch *= out[d];
  // The matrix of `s` (an operand with its last two dims dropped) that batch index t reads.
  const auto matrix = [&](const Shape& s, std::size_t rank, std::int64_t t) {
    const std::size_t own = rank >= 2 ? rank - 2 : 0;
    std::int64_t index = 0, rest = t;
    std::vector<std::int64_t> digits(batch_rank);
    for (std::size_t d = batch_rank; d-- > 0;) {
      digits[d] = rest % out[d];
      rest /= out[d];
    }
    for (std::size_t i = 0; i < own; ++i) {
      const std::size_t d = batch_rank - own + i;
      index = index * s[i] + (s[i] == 1 ? 0 : digits[d]);
    }
    return index;
  };
  std::vector<float> y;
  for (std::int64_t t = 0; t < batch; ++t) {
    const std::int64_t ia = matrix(as, ra, t) * m * k, ib = matrix(bs, rb, t) * k * n;
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        double acc = 0.0;
        for (std::int64_t kk = 0; kk < k; ++kk) {
          const float av =
              a[static_cast<std::size_t>(ia + (p.transpose_a ? kk * m + r : r * k + kk))];
          const float bv =
              b[static_cast<std::size_t>(ib + (p.transpose_b ? c * k + kk : kk * n + c))];
          acc += double{av} * bv;
        }
        y.push_back(static_cast<float>(p.alpha * acc));
      }
  }
  return y;
}

std::vector<float> run_two_inputs(const Shape& as, const std::vector<float>& a, const Shape& bs,
                                  const std::vector<float>& b,
                                  const std::function<Value(Network&, Value, Value)>& build,
                                  int threads = 2) {
  Network net;
  const Value va = net.input("a", as), vb = net.input("b", bs);
  net.output("y", build(net, va, vb));
  const Engine e = Engine::build(net, {}, {.threads = threads});
  return e.create_context().infer({{"a", a}, {"b", b}}).output("y").to_vector();
}

// Row normalisation in double: mean, population variance, eps, then the affine map.
std::vector<float> reference_row_norm(
    const std::vector<float>& x, std::int64_t rows, std::int64_t cols, float eps,
    const std::function<double(std::int64_t, std::int64_t)>& scale,
    const std::function<double(std::int64_t, std::int64_t)>& shift) {
  std::vector<float> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (std::int64_t j = 0; j < cols; ++j)
      mean += x[static_cast<std::size_t>(r * cols + j)];
    mean /= static_cast<double>(cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      const double d = x[static_cast<std::size_t>(r * cols + j)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto i = static_cast<std::size_t>(r * cols + j);
      y[i] = static_cast<float>((x[i] - mean) / std::sqrt(var + eps) * scale(r, j) + shift(r, j));
    }
  }
  return y;
}

}  // namespace

TEST_CASE(
    "MatMul: NumPy's rule (1-D promotion, broadcast batch dims), transposes, alpha, constants") {
  struct MatMulCase {
    Shape a, b;
    MatMulParams p;
    Shape out;
  };
  const std::vector<MatMulCase> cases = {
      {{5, 7}, {7, 3}, {}, {5, 3}},
      {{7}, {7, 3}, {}, {3}},                         // 1-D A: a row, dropped
      {{5, 7}, {7}, {}, {5}},                         // 1-D B: a column, dropped
      {{7}, {7}, {}, {}},                             // a dot product
      {{2, 3, 5, 7}, {7, 4}, {}, {2, 3, 5, 4}},       // B broadcast over both batch dims
      {{2, 1, 5, 7}, {3, 7, 4}, {}, {2, 3, 5, 4}},    // batch dims broadcast both ways
      {{4, 7}, {3, 7, 6}, {}, {3, 4, 6}},             // A broadcast
      {{3, 7}, {3, 2}, {true, false, 1.0f}, {7, 2}},  // Aᵀ B
      {{2, 5, 7}, {2, 4, 7}, {false, true, -0.5f}, {2, 5, 4}},
      {{2, 7, 5}, {1, 4, 7}, {true, true, 2.0f}, {2, 5, 4}},
      // Several tiles and two passes over K (kKc = 256), odd sizes.
      {{2, 37, 300}, {300, 45}, {}, {2, 37, 45}},
      {{300, 37}, {45, 300}, {true, true, 1.5f}, {37, 45}},
  };
  unsigned seed = 200;
  for (const MatMulCase& c : cases) {
    CAPTURE(c.a.to_string());
    CAPTURE(c.b.to_string());
    const auto a = random_vector(static_cast<std::size_t>(c.a.numel()), ++seed);
    const auto b = random_vector(static_cast<std::size_t>(c.b.numel()), ++seed);
    const auto expected = reference_matmul(a, c.a, b, c.b, c.p, c.out);
    REQUIRE(static_cast<std::int64_t>(expected.size()) == c.out.numel());
    const auto build = [&](Network& n, Value va, Value vb) { return n.matmul(va, vb, c.p, "mm"); };
    const auto y = run_two_inputs(c.a, a, c.b, b, build);
    CHECK(relative_error(y, expected) <= 1e-6);
    // One thread gives the same bits: every element is one chain over k.
    CHECK(cgr::test::same_bits(Tensor(c.out, run_two_inputs(c.a, a, c.b, b, build, 1)),
                               Tensor(c.out, y)));
    Network shape_net;
    CHECK(
        shape_net
            .desc(shape_net.matmul(shape_net.input("a", c.a), shape_net.input("b", c.b), c.p, "mm"))
            .shape == c.out);
    // Each operand as the constant "<name>.constant", the other computed.
    for (const bool first : {false, true}) {
      Network cn;
      const Value x = cn.input("x", first ? c.b : c.a);
      cn.output("y", cn.matmul(x, MatMulConstant{first ? c.a : c.b, first}, c.p, "mm"));
      Weights w;
      w.add("mm.constant", Tensor(first ? c.a : c.b, first ? a : b));
      const auto yc = Engine::build(cn, w, {.threads = 2})
                          .create_context()
                          .infer({{"x", first ? b : a}})
                          .output("y")
                          .to_vector();
      CHECK(cgr::test::same_bits(Tensor(c.out, yc), Tensor(c.out, y)));
    }
  }
  // An empty inner dim (empty slices: inputs have no empty dims) sums nothing: zeros.
  const auto zeros =
      run_two_inputs(Shape{3, 2}, random_vector(6, 4), Shape{2, 4}, random_vector(8, 5),
                     [](Network& n, Value a, Value b) {
                       return n.matmul(n.slice(a, {{0}, {0}, {1}, {}}, "a0"),
                                       n.slice(b, {{0}, {0}, {0}, {}}, "b0"), {}, "mm");
                     });
  CHECK(zeros == std::vector<float>(12, 0.0f));
  // NaN in A reaches exactly its row.
  std::vector<float> a = random_vector(6, 5), b = random_vector(6, 6);
  a[4] = std::numeric_limits<float>::quiet_NaN();
  const auto nan_rows =
      run_two_inputs(Shape{2, 3}, a, Shape{3, 2}, b,
                     [](Network& n, Value x, Value w) { return n.matmul(x, w, {}, "mm"); });
  CHECK(!std::isnan(nan_rows[0]));
  CHECK(!std::isnan(nan_rows[1]));
  CHECK(std::isnan(nan_rows[2]));
  CHECK(std::isnan(nan_rows[3]));

  Network net;
  const Value x = net.input("x", Shape{2, 5, 7});
  const Value w = net.input("w", Shape{3, 6, 4});
  CHECK(net.layer(net.producer(net.matmul(x, MatMulConstant{Shape{7, 3}}, {.alpha = 2.0f}, "mc")))
            .attributes() == "2 x 5x7 @ 7x3, alpha 2, constant B 7x3");
  CHECK(cgr::test::error_message([&] { net.matmul(x, w, {}, "bad"); }) ==
        "MatMul 'bad': 'x' of shape 2x5x7 gives op(A) 5x7 and 'w' of shape 3x6x4 gives op(B) 6x4: "
        "the inner dims differ");
  CHECK(cgr::test::error_message([&] {
          net.matmul(x, MatMulConstant{Shape{3, 7, 2}}, {}, "b2");
        }) == "MatMul 'b2': batch dims 2 of 'x' and 3 of 'b2.constant' do not broadcast");
  CHECK(cgr::test::error_message([&] { net.matmul(x, MatMulConstant{Shape{}}, {}, "s"); }) ==
        "MatMul 's': 's.constant' is a scalar; a matrix product needs operands of 1 or more dims");
  CHECK(cgr::test::error_message([&] {
          net.matmul(x, MatMulConstant{Shape{5}, true}, {.transpose_a = true}, "t");
        }) == "MatMul 't': transpose_a needs A with 2 or more dims; 't.constant' has shape 5");
}

TEST_CASE("LayerNorm and InstanceNorm against a double-precision reference") {
  const Shape xs{2, 3, 4, 5};
  auto x = random_vector(static_cast<std::size_t>(xs.numel()), 301, -2.0f, 3.0f);
  SUBCASE("LayerNorm over the last dims, with and without bias") {
    for (const int axis : {-1, 1, 0, 3, -2}) {
      for (const bool bias : {true, false}) {
        CAPTURE(axis);
        CAPTURE(bias);
        const std::size_t first = static_cast<std::size_t>(axis < 0 ? axis + 4 : axis);
        const Shape norm(std::vector<std::int64_t>(
            xs.dims().begin() + static_cast<std::ptrdiff_t>(first), xs.dims().end()));
        const auto weight = random_vector(static_cast<std::size_t>(norm.numel()), 302, 0.5f, 1.5f);
        const auto shift = random_vector(static_cast<std::size_t>(norm.numel()), 303);
        Weights w;
        w.add("ln.weight", Tensor(norm, weight));
        if (bias) w.add("ln.bias", Tensor(norm, shift));
        const auto y = run_network(
            xs, x,
            [&](Network& n, Value v) {
              return n.layer_norm(v, {.axis = axis, .eps = 1e-3f, .bias = bias}, "ln");
            },
            w);
        const std::int64_t cols = norm.numel(), rows = xs.numel() / cols;
        const auto expected = reference_row_norm(
            x, rows, cols, 1e-3f,
            [&](std::int64_t, std::int64_t j) { return weight[static_cast<std::size_t>(j)]; },
            [&](std::int64_t, std::int64_t j) {
              return bias ? shift[static_cast<std::size_t>(j)] : 0.0;
            });
        CHECK(relative_error(y, expected) <= 1e-6);
      }
    }
  }
  SUBCASE("InstanceNorm per sample and channel, 3-D and 4-D") {
    for (const Shape& s : {xs, Shape{2, 3, 20}}) {
      CAPTURE(s.to_string());
      const auto weight = random_vector(3, 304, 0.5f, 1.5f), bias = random_vector(3, 305);
      Weights w;
      w.add("in.weight", Tensor(Shape{3}, weight));
      w.add("in.bias", Tensor(Shape{3}, bias));
      const auto y = run_network(
          s, x, [](Network& n, Value v) { return n.instance_norm(v, {}, "in"); }, w);
      const auto expected = reference_row_norm(
          x, 6, 20, 1e-5f,
          [&](std::int64_t r, std::int64_t) { return weight[static_cast<std::size_t>(r % 3)]; },
          [&](std::int64_t r, std::int64_t) { return bias[static_cast<std::size_t>(r % 3)]; });
      CHECK(relative_error(y, expected) <= 1e-6);
    }
  }
  SUBCASE("a constant row is its shift; NaN stays in its row") {
    std::vector<float> c(12, 7.0f);
    c[8] = std::numeric_limits<float>::quiet_NaN();
    Weights w;
    w.add("ln.weight", Tensor(Shape{4}, {1.0f, 2.0f, 3.0f, 4.0f}));
    w.add("ln.bias", Tensor(Shape{4}, {0.5f, 0.25f, 0.0f, -1.0f}));
    const auto y = run_network(
        Shape{3, 4}, c, [](Network& n, Value v) { return n.layer_norm(v, {}, "ln"); }, w);
    CHECK(y[0] == 0.5f);
    CHECK(y[3] == -1.0f);
    CHECK(y[5] == 0.25f);
    for (std::size_t i = 8; i < 12; ++i)
      CHECK(std::isnan(y[i]));
  }
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.layer(net.producer(net.layer_norm(v, {.axis = -2}, "ln"))).attributes() ==
        "over 4x5 from axis 2, eps 1e-05");
  CHECK(cgr::test::error_message([&] { net.layer_norm(v, {.axis = 4}, "bad"); }) ==
        "LayerNorm 'bad': axis 4 is out of range for 'x' of shape 2x3x4x5");
  CHECK(cgr::test::error_message([&] { net.layer_norm(v, {.eps = -1.0f}, "eps"); }) ==
        "LayerNorm 'eps': eps -1 must be a finite number >= 0");
  CHECK(cgr::test::error_message([&] {
          net.instance_norm(net.input("flat", Shape{2, 3}), {}, "in");
        }) ==
        "InstanceNorm 'in': input 'flat' has shape 2x3, expected N x C x one or more spatial dims");
}

TEST_CASE("LocalResponseNorm: ONNX's window (floor before, ceil after), against a naive loop") {
  const Shape xs{2, 6, 3, 4};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 311, -3.0f, 3.0f);
  for (const std::int64_t size : {1, 2, 3, 4, 5, 13}) {
    CAPTURE(size);
    const LocalResponseNormParams p{.size = size, .alpha = 0.2f, .beta = 0.75f, .bias = 1.5f};
    const auto y =
        run_network(xs, x, [&](Network& n, Value v) { return n.local_response_norm(v, p, "lrn"); });
    std::vector<float> expected;
    const std::int64_t before = (size - 1) / 2, after = size / 2;  // floor and ceil of (size-1)/2
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 6; ++c)
        for (std::int64_t q = 0; q < 12; ++q) {
          double sum = 0.0;
          for (std::int64_t k = std::max<std::int64_t>(0, c - before);
               k <= std::min<std::int64_t>(5, c + after); ++k) {
            const double v = x[static_cast<std::size_t>((n * 6 + k) * 12 + q)];
            sum += v * v;
          }
          const double v = x[static_cast<std::size_t>((n * 6 + c) * 12 + q)];
          expected.push_back(
              static_cast<float>(v / std::pow(1.5 + 0.2 / static_cast<double>(size) * sum, 0.75)));
        }
    CHECK(relative_error(y, expected) <= 1e-6);
  }
  // size 2: channel c sees c and c + 1 (PyTorch's even window would see c - 1 and c).
  const std::vector<float> ones{1.0f, 2.0f, 4.0f};  // N=1, C=3, one pixel
  const auto y = run_network(Shape{1, 3, 1}, ones, [](Network& n, Value v) {
    return n.local_response_norm(v, {.size = 2, .alpha = 2.0f, .beta = 1.0f, .bias = 0.0f}, "lrn");
  });
  CHECK(y[0] == doctest::Approx(1.0 / (1.0 + 4.0)));
  CHECK(y[1] == doctest::Approx(2.0 / (4.0 + 16.0)));
  CHECK(y[2] == doctest::Approx(4.0 / 16.0));
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.layer(net.producer(net.local_response_norm(v, {}, "l"))).attributes() ==
        "size 5, alpha 0.0001, beta 0.75, bias 1");
  CHECK(cgr::test::error_message([&] { net.local_response_norm(v, {.size = 0}, "bad"); }) ==
        "LocalResponseNorm 'bad': size 0 must be positive");
  CHECK(cgr::test::error_message([&] {
          net.local_response_norm(net.input("v", Shape{6}), {}, "one");
        }) == "LocalResponseNorm 'one': input 'v' has shape 6, expected N x C x spatial dims");
}

namespace {

// Pad2d by the definitions of numpy.pad: each output pixel (h, w) read from the kept window
// (the input less its cropped rows and columns) at h - top, w - left, mirrored, clamped or
// wrapped by the mode where that falls outside, else the fill.
std::vector<float> reference_pad(const std::vector<float>& x, const Shape& s,
                                 const Pad2dParams& p) {
  const Padding2d& q = p.padding;
  const std::int64_t crop_top = std::max<std::int64_t>(-q.top, 0),
                     crop_left = std::max<std::int64_t>(-q.left, 0);
  const std::int64_t kept_h = s[2] - crop_top - std::max<std::int64_t>(-q.bottom, 0);
  const std::int64_t kept_w = s[3] - crop_left - std::max<std::int64_t>(-q.right, 0);
  const std::int64_t out_h = s[2] + q.top + q.bottom, out_w = s[3] + q.left + q.right;
  const auto source = [&](std::int64_t k, std::int64_t n) -> std::int64_t {
    if (k >= 0 && k < n) return k;
    switch (p.mode) {
      case PadMode::constant:
        return -1;
      case PadMode::reflect:  // numpy 'reflect': the border pixel is not repeated
        return k < 0 ? -k : 2 * n - 2 - k;
      case PadMode::edge:
        return std::clamp<std::int64_t>(k, 0, n - 1);
      case PadMode::wrap:
        return ((k % n) + n) % n;
    }
    return -1;
  };
  std::vector<float> y;
  for (std::int64_t plane = 0; plane < s[0] * s[1]; ++plane)
    for (std::int64_t h = 0; h < out_h; ++h)
      for (std::int64_t w = 0; w < out_w; ++w) {
        const std::int64_t r = source(h - std::max<std::int64_t>(q.top, 0), kept_h);
        const std::int64_t c = source(w - std::max<std::int64_t>(q.left, 0), kept_w);
        y.push_back(r < 0 || c < 0 ? p.value
                                   : x[static_cast<std::size_t>(
                                         (plane * s[2] + crop_top + r) * s[3] + crop_left + c)]);
      }
  return y;
}

}  // namespace

TEST_CASE("Pad2d: constant value, reflect, edge and wrap, negative pads crop") {
  const Shape xs{2, 3, 5, 6};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 97, -4.0f, 4.0f);
  const std::vector<Pad2dParams> cases = {
      {Padding2d(1, 2, 3, 0), PadMode::constant, 0.5f},
      {Padding2d(4, 5, 4, 5), PadMode::reflect},
      {Padding2d(2, 0, 1, 3), PadMode::reflect},
      {Padding2d(3, 1, 0, 7), PadMode::edge},
      {Padding2d(2, 6, 5, 1), PadMode::wrap},
      {Padding2d(-1, 2, 1, -2), PadMode::constant, -3.0f},
      {Padding2d(-2, -1, 2, 3), PadMode::reflect},
      {Padding2d(1, -3, -1, 2), PadMode::edge},
      {Padding2d(-1, -2, -1, -3), PadMode::constant},
  };
  for (const Pad2dParams& p : cases) {
    CAPTURE(to_string(p.padding));
    CAPTURE(pad_mode_name(p.mode));
    const auto y = run_network(xs, x, [&](Network& n, Value v) { return n.pad2d(v, p, "pad"); });
    const auto expected = reference_pad(x, xs, p);
    REQUIRE(y.size() == expected.size());
    CHECK(y == expected);  // a copy: bit for bit
  }
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.desc(net.pad2d(v, {Padding2d(-1, 2, 1, -2)}, "crop")).shape == Shape{2, 3, 5, 6});
  CHECK(
      cgr::test::error_message([&] {
        net.pad2d(v, {Padding2d(5, 0, 0, 0), PadMode::reflect}, "far");
      }) ==
      "Pad2d 'far': reflect padding 5,0,0,0 needs pads smaller than the 5x6 plane it mirrors ('x' "
      "of shape 2x3x5x6)");
  CHECK(cgr::test::error_message([&] { net.pad2d(v, {Padding2d(-3, 0, -2, 0)}, "gone"); }) ==
        "Pad2d 'gone': padding -3,0,-2,0 crops all of 'x' of shape 2x3x5x6");
}

TEST_CASE("Tile: each dim repeated, bit for bit against the modulo definition") {
  const Shape xs{2, 3, 4};
  const auto x = random_vector(24, 98);
  for (const std::vector<std::int64_t>& repeats :
       {std::vector<std::int64_t>{1, 1, 1}, {3, 1, 2}, {1, 4, 1}, {2, 2, 3}}) {
    CAPTURE(fmt::format("{}", fmt::join(repeats, ",")));
    const auto y =
        run_network(xs, x, [&](Network& n, Value v) { return n.tile(v, {repeats}, "tile"); });
    std::vector<float> expected;
    for (std::int64_t a = 0; a < 2 * repeats[0]; ++a)
      for (std::int64_t b = 0; b < 3 * repeats[1]; ++b)
        for (std::int64_t c = 0; c < 4 * repeats[2]; ++c)
          expected.push_back(x[static_cast<std::size_t>(((a % 2) * 3 + b % 3) * 4 + c % 4)]);
    CHECK(y == expected);
  }
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.desc(net.tile(v, {{2, 1, 3}}, "t")).shape == Shape{4, 3, 12});
  CHECK(net.desc(net.tile(v, {{1, 0, 2}}, "none")).shape == Shape{2, 0, 8});  // ONNX allows 0
  CHECK(cgr::test::error_message([&] {
          net.tile(v, {{2, 1}}, "short");
        }) == "Tile 'short': 2 repeats for 'x' of shape 2x3x4 (3 dims)");
  CHECK(cgr::test::error_message([&] {
          net.tile(v, {{1, -1, 1}}, "neg");
        }) == "Tile 'neg': repeat -1 of dim 1 is negative");
}

namespace {

// ONNX Resize's definition evaluated per output element: the coordinate transformation and the
// nearest rounding in float (as ONNX Runtime evaluates them, so ties fall alike), the
// interpolation in double.
std::vector<float> reference_resize(const std::vector<float>& x, const Shape& s,
                                    const ResizeParams& p, std::int64_t out_h, std::int64_t out_w,
                                    float scale_h, float scale_w) {
  const auto coordinate = [&](std::int64_t o, std::int64_t in, std::int64_t out, float scale) {
    const auto xo = static_cast<float>(o), li = static_cast<float>(in),
               lo = static_cast<float>(out);
    switch (p.coordinates) {
      case ResizeCoordinates::half_pixel:
        return (xo + 0.5f) / scale - 0.5f;
      case ResizeCoordinates::half_pixel_symmetric: {
        const float offset = li / 2 * (1 - lo / (scale * li));
        return static_cast<float>(offset + (xo + 0.5) / scale - 0.5);
      }
      case ResizeCoordinates::pytorch_half_pixel:
        return out > 1 ? (xo + 0.5f) / scale - 0.5f : 0.0f;
      case ResizeCoordinates::align_corners:
        return out == 1 ? 0.0f : xo * (li - 1) / (lo - 1);
      case ResizeCoordinates::asymmetric:
        return xo / scale;
      case ResizeCoordinates::tf_half_pixel_for_nn:
        return (xo + 0.5f) / scale;
    }
    return 0.0f;
  };
  const auto nearest = [&](float c, std::int64_t in, float scale) {
    const bool tie = c - std::floor(c) == 0.5f;
    double r = 0;
    switch (p.rounding) {
      case NearestRounding::round_prefer_floor:
        r = tie ? std::floor(c) : std::round(c);
        break;
      case NearestRounding::round_prefer_ceil:
        r = tie ? std::ceil(c) : std::round(c);
        break;
      case NearestRounding::floor:
        r = std::floor(c);
        break;
      case NearestRounding::ceil:
        r = std::ceil(c);
        break;
      case NearestRounding::legacy:
        r = scale < 1 ? std::ceil(c) : std::trunc(c);
        break;
    }
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(r), 0, in - 1);
  };
  const std::int64_t in_h = s[s.rank() - 2], in_w = s[s.rank() - 1];
  const std::int64_t planes = s.numel() / (in_h * in_w);
  std::vector<float> y;
  for (std::int64_t plane = 0; plane < planes; ++plane) {
    const auto at = [&](std::int64_t r, std::int64_t c) {
      return double{x[static_cast<std::size_t>((plane * in_h + r) * in_w + c)]};
    };
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const float ch = coordinate(oh, in_h, out_h, scale_h),
                    cw = coordinate(ow, in_w, out_w, scale_w);
        if (p.mode == ResizeMode::nearest) {
          y.push_back(
              static_cast<float>(at(nearest(ch, in_h, scale_h), nearest(cw, in_w, scale_w))));
          continue;
        }
        const double rh = std::clamp<double>(ch, 0, static_cast<double>(in_h - 1));
        const double rw = std::clamp<double>(cw, 0, static_cast<double>(in_w - 1));
        const auto h0 = static_cast<std::int64_t>(std::floor(rh)),
                   w0 = static_cast<std::int64_t>(std::floor(rw));
        const std::int64_t h1 = std::min(h0 + 1, in_h - 1), w1 = std::min(w0 + 1, in_w - 1);
        const double fh = rh - static_cast<double>(h0), fw = rw - static_cast<double>(w0);
        y.push_back(static_cast<float>((1 - fh) * ((1 - fw) * at(h0, w0) + fw * at(h0, w1)) +
                                       fh * ((1 - fw) * at(h1, w0) + fw * at(h1, w1))));
      }
  }
  return y;
}

}  // namespace

TEST_CASE("Resize: ONNX's examples, and every coordinate transformation and rounding") {
  // ONNX's backend test values (onnx/backend/test/case/node/resize.py).
  const std::vector<float> square{1, 2, 3, 4};
  const std::vector<float> wide{1, 2, 3, 4, 5, 6, 7, 8};
  const auto resize = [](const Shape& s, const std::vector<float>& x, const ResizeParams& p) {
    return run_network(s, x, [&](Network& n, Value v) { return n.resize(v, p, "resize"); });
  };
  CHECK(resize({1, 1, 2, 2}, square, {.scales = {1, 1, 2, 3}}) ==
        std::vector<float>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  CHECK(resize({1, 1, 2, 4}, wide, {.scales = {1, 1, 0.6f, 0.6f}}) == std::vector<float>{1, 3});
  // Upsample / Resize-10 reading: truncation growing, rounding up shrinking.
  CHECK(resize({1, 1, 2, 4}, wide,
               {.coordinates = ResizeCoordinates::asymmetric,
                .rounding = NearestRounding::legacy,
                .scales = {1, 1, 0.6f, 0.6f}}) == std::vector<float>{1, 3});
  const auto linear =
      resize({1, 1, 2, 2}, square, {.mode = ResizeMode::linear, .scales = {1, 1, 2, 2}});
  CHECK(relative_error(linear, {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f,
                                3.5f, 3, 3.25f, 3.75f, 4}) < 1e-7);
  const auto down =
      resize({1, 1, 2, 4}, wide, {.mode = ResizeMode::linear, .scales = {1, 1, 0.6f, 0.6f}});
  CHECK(relative_error(down, {2.6666665f, 4.3333331f}) < 1e-7);
  const auto corners = resize({1, 1, 2, 2}, square,
                              {.mode = ResizeMode::linear,
                               .coordinates = ResizeCoordinates::align_corners,
                               .scales = {1, 1, 2, 2}});
  CHECK(relative_error(corners, {1, 4 / 3.f, 5 / 3.f, 2, 5 / 3.f, 2, 7 / 3.f, 8 / 3.f, 7 / 3.f,
                                 8 / 3.f, 3, 10 / 3.f, 3, 10 / 3.f, 11 / 3.f, 4}) < 1e-7);

  // Every transformation x rounding x mode, growing, shrinking and odd ratios, by scales and by
  // sizes, against the per-element definition: nearest bit for bit.
  const Shape xs{2, 3, 5, 7};
  const auto x = random_vector(static_cast<std::size_t>(xs.numel()), 99, -3.0f, 3.0f);
  struct Target {
    std::vector<float> scales;
    std::vector<std::int64_t> sizes;
  };
  const std::vector<Target> targets = {{{1, 1, 2, 2}, {}},       {{1, 1, 0.5f, 0.75f}, {}},
                                       {{1, 1, 1.7f, 0.6f}, {}}, {{}, {2, 3, 9, 4}},
                                       {{}, {2, 3, 1, 13}},      {{}, {2, 3, 5, 7}}};
  for (int c = 0; c <= static_cast<int>(ResizeCoordinates::tf_half_pixel_for_nn); ++c) {
    for (int r = 0; r <= static_cast<int>(NearestRounding::legacy); ++r) {
      for (const ResizeMode mode : {ResizeMode::nearest, ResizeMode::linear}) {
        if (mode == ResizeMode::linear && r > 0) continue;  // linear does not round
        for (const Target& t : targets) {
          ResizeParams p{.mode = mode,
                         .coordinates = static_cast<ResizeCoordinates>(c),
                         .rounding = static_cast<NearestRounding>(r),
                         .scales = t.scales,
                         .sizes = t.sizes};
          CAPTURE(resize_coordinates_name(p.coordinates));
          CAPTURE(nearest_rounding_name(p.rounding));
          CAPTURE(static_cast<int>(mode));
          CAPTURE(fmt::format("{} / {}", fmt::join(t.scales, ","), fmt::join(t.sizes, ",")));
          const std::int64_t out_h =
              t.sizes.empty() ? static_cast<std::int64_t>(std::floor(5 * t.scales[2])) : t.sizes[2];
          const std::int64_t out_w =
              t.sizes.empty() ? static_cast<std::int64_t>(std::floor(7 * t.scales[3])) : t.sizes[3];
          const float scale_h = t.sizes.empty() ? t.scales[2] : static_cast<float>(out_h) / 5.0f;
          const float scale_w = t.sizes.empty() ? t.scales[3] : static_cast<float>(out_w) / 7.0f;
          const auto y = resize(xs, x, p);
          const auto expected = reference_resize(x, xs, p, out_h, out_w, scale_h, scale_w);
          REQUIRE(y.size() == expected.size());
          if (mode == ResizeMode::nearest)
            CHECK(y == expected);
          else
            CHECK(relative_error(y, expected) < 1e-6);
        }
      }
    }
  }

  // A rank-3 input (N x C x L) resizes C and L: C by scale 1 is copied.
  CHECK(resize({2, 2, 3}, random_vector(12, 5), {.scales = {1, 1, 2}}).size() == 24);
  Network net;
  const Value v = net.input("x", xs);
  CHECK(net.desc(net.resize(v, {.scales = {1, 1, 1.5f, 0.5f}}, "r")).shape == Shape{2, 3, 7, 3});
  CHECK(net.desc(net.resize(v, {.sizes = {2, 3, 8, 2}}, "s")).shape == Shape{2, 3, 8, 2});
  CHECK(cgr::test::error_message([&] {
          net.resize(v, {.scales = {1, 2, 2, 2}}, "deep");
        }) ==
        "Resize 'deep': only the last two dims can be resized, and dim 1 of 'x' of shape 2x3x5x7 "
        "has scale 2 (output 6)");
  CHECK(cgr::test::error_message([&] {
          net.resize(v, {.scales = {1, 1, 2}}, "few");
        }) == "Resize 'few': 3 scales for 'x' of shape 2x3x5x7 (4 dims)");
  CHECK(cgr::test::error_message([&] {
          net.resize(v, {.scales = {1, 1, 2, 2}, .sizes = {2, 3, 4, 4}}, "both");
        }) == "Resize 'both': give either scales or sizes (one per dim of 'x'), not both");
  CHECK(cgr::test::error_message([&] {
          net.resize(v, {.scales = {1, 1, 0.1f, 1}}, "empty");
        }) == "Resize 'empty': dim 2 of 'x' of shape 2x3x5x7 would become 0 long");
}
