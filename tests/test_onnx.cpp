// ONNX import: op semantics that PyTorch exports rarely produce (Gemm alpha/beta, auto_pad,
// opset-11 Softmax and Clip, Pad folding, Reshape 0/-1), checked on models built here with
// the protobuf API, and the errors for malformed files and unsupported ops and attributes.
// The conformance suite (tests/conformance) covers real exports against PyTorch.
#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <cgr/onnx.hpp>

#include "onnx_builder.hpp"
#include "test_support.hpp"

using namespace cgr;
using cgr::test::error_message;
using cgr::test::OnnxBuilder;
using cgr::test::random_vector;
using cgr::test::relative_error;

namespace {

std::vector<float> run(const OnnxModel& model, const std::vector<float>& x,
                       const std::string& input = "x", const std::string& output = "y") {
  const Engine engine = Engine::build(model.network, model.weights, {.threads = 2});
  return engine.create_context().infer({{input, x}}).output(output).to_vector();
}

std::vector<std::string> layer_kinds(const Network& net) {
  std::vector<std::string> kinds;
  for (int i = 0; i < net.layer_count(); ++i)
    kinds.emplace_back(net.layer(i).kind());
  return kinds;
}

}  // namespace

TEST_CASE("ONNX Gemm: transB, alpha and beta fold into the Linear weights") {
  for (int trans_b : {0, 1}) {
    CAPTURE(trans_b);
    OnnxBuilder b;
    b.input("x", {2, 3});
    const auto w = random_vector(12, 1), c = random_vector(4, 2);
    b.floats("W", trans_b ? std::vector<std::int64_t>{4, 3} : std::vector<std::int64_t>{3, 4}, w);
    b.floats("C", {4}, c);
    auto& n = b.node("Gemm", {"x", "W", "C"}, {"y"});
    OnnxBuilder::attr(n, "transB", std::int64_t{trans_b});
    OnnxBuilder::attr(n, "alpha", 0.5f);
    OnnxBuilder::attr(n, "beta", 2.0f);
    b.output("y");
    const auto x = random_vector(6, 3);
    const auto y = run(b.import(), x);
    for (int r = 0; r < 2; ++r)
      for (int o = 0; o < 4; ++o) {
        double acc = 2.0 * c[o];
        for (int k = 0; k < 3; ++k)
          acc += 0.5 * x[r * 3 + k] * (trans_b ? w[o * 3 + k] : w[k * 4 + o]);
        CHECK(y[r * 4 + o] == doctest::Approx(acc).epsilon(1e-6));
      }
  }
}

TEST_CASE("ONNX Conv: auto_pad SAME_UPPER, and a Pad node folded into the conv") {
  OnnxBuilder b;
  b.input("x", {1, 2, 8, 8});
  b.floats("w", {3, 2, 3, 3}, random_vector(54, 4));
  b.ints("pads", {0, 0, 1, 2, 0, 0, 0, 1});
  b.node("Pad", {"x", "pads"}, {"p"});
  auto& conv = b.node("Conv", {"p", "w"}, {"y"});
  OnnxBuilder::attr(conv, "auto_pad", std::string("SAME_UPPER"));
  OnnxBuilder::attr(conv, "strides", std::vector<std::int64_t>{2, 2});
  b.output("y");
  const OnnxModel model = b.import();
  REQUIRE(model.network.layer_count() == 1);  // the Pad became conv padding
  const auto& layer = dynamic_cast<const Conv2d&>(model.network.layer(0));
  // Pad gives (top 1, left 2, bottom 0, right 1): 9 x 11. SAME with stride 2 and k 3 wants
  // outputs 5 x 6, so 2 more rows and 2 more columns, split evenly.
  CHECK(layer.params().padding == Padding2d(1 + 1, 2 + 1, 0 + 1, 1 + 1));
  CHECK(layer.output().shape == Shape{1, 3, 5, 6});
  // Same numbers as the conv written out by hand with that padding.
  const auto x = random_vector(128, 5);
  Network manual;
  manual.output("y", manual.conv2d(manual.input("x", {1, 2, 8, 8}),
                                   {.out_channels = 3,
                                    .kernel = 3,
                                    .stride = 2,
                                    .padding = Padding2d(2, 3, 1, 2),
                                    .bias = false},
                                   "w_conv"));
  Weights mw;
  mw.add("w_conv.weight", Tensor(*model.weights.find(layer.name() + ".weight")));
  const auto expected =
      Engine::build(manual, mw).create_context().infer({{"x", x}}).output("y").to_vector();
  CHECK(run(model, x) == expected);
}

TEST_CASE("ONNX ConvTranspose: pads from pads, output_shape or auto_pad, 1-D, refusals") {
  // Input 3x4, kernel 3, strides 2: the full output is 7x9. The pads ONNX Runtime derives
  // (tests/conformance/make_ort_models.py checks the numbers against it).
  struct Case {
    const char* what;
    std::string auto_pad;
    std::vector<std::int64_t> output_shape, output_padding;
    Padding2d padding;
    Shape out;
  };
  const std::vector<Case> cases{
      {"output_shape 6x9: the odd pad at the start",
       "",
       {6, 9},
       {},
       Padding2d(1, 0, 0, 0),
       {1, 3, 6, 9}},
      {"output_shape given as N x C x H x W",
       "",
       {1, 3, 6, 9},
       {},
       Padding2d(1, 0, 0, 0),
       {1, 3, 6, 9}},
      {"output_shape with SAME_UPPER: the odd pad at the end",
       "SAME_UPPER",
       {6, 9},
       {},
       Padding2d(0, 0, 1, 0),
       {1, 3, 6, 9}},
      {"SAME_LOWER: input x stride", "SAME_LOWER", {}, {}, Padding2d(1, 1, 0, 0), {1, 3, 6, 8}},
      {"SAME_UPPER with output_padding, which counts in the total",
       "SAME_UPPER",
       {},
       {1, 1},
       Padding2d(1, 1, 1, 1),
       {1, 3, 6, 8}},
      {"VALID: the full output", "VALID", {}, {}, Padding2d(0), {1, 3, 7, 9}},
      // One row past the full output (as ONNX's backend test asks): the bias alone, at the
      // end; an output_padding of 1.
      {"output_shape 8x9: a row past the full output", "", {8, 9}, {}, Padding2d(0), {1, 3, 8, 9}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    OnnxBuilder b(11);
    b.input("x", {1, 2, 3, 4});
    b.floats("w", {2, 3, 3, 3}, random_vector(54, 7));
    auto& n = b.node("ConvTranspose", {"x", "w"}, {"y"}, "ct");
    OnnxBuilder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
    if (!c.auto_pad.empty()) OnnxBuilder::attr(n, "auto_pad", c.auto_pad);
    if (!c.output_shape.empty()) OnnxBuilder::attr(n, "output_shape", c.output_shape);
    if (!c.output_padding.empty()) OnnxBuilder::attr(n, "output_padding", c.output_padding);
    b.output("y");
    const OnnxModel model = b.import();
    REQUIRE(model.network.layer_count() == 1);
    const auto& layer = dynamic_cast<const ConvTranspose2d&>(model.network.layer(0));
    CHECK(layer.params().padding == c.padding);
    CHECK(layer.output().shape == c.out);
    CHECK(layer.params().output_padding ==
          (c.out == Shape{1, 3, 8, 9} ? Size2(1, 0) : Size2(c.output_padding.empty() ? 0 : 1)));
    CHECK(run(model, random_vector(24, 8)).size() == static_cast<std::size_t>(c.out.numel()));
  }
  SUBCASE("1-D: N x C x L with PyTorch's weight [C_in, C_out, k]") {
    OnnxBuilder b;
    b.input("x", {1, 2, 5});
    b.floats("w", {2, 3, 3}, random_vector(18, 9));
    b.floats("bias", {3}, random_vector(3, 10));
    auto& n = b.node("ConvTranspose", {"x", "w", "bias"}, {"y"}, "ct");
    OnnxBuilder::attr(n, "strides", std::vector<std::int64_t>{2});
    OnnxBuilder::attr(n, "pads", std::vector<std::int64_t>{1, 1});
    OnnxBuilder::attr(n, "output_padding", std::vector<std::int64_t>{1});
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(model.network.layer(0).output().shape == Shape{1, 3, 10});
    CHECK(model.weights.find(model.network.layer(0).name() + ".weight")->shape() == Shape{2, 3, 3});
  }
  SUBCASE(
      "refused: an output_shape a stride past the full output, output_padding >= stride, odd "
      "weights") {
    const auto refusal = [](const std::function<void(OnnxBuilder&, ::onnx::NodeProto&)>& edit,
                            std::vector<std::int64_t> w = {2, 3, 3, 3}) {
      OnnxBuilder b;
      b.input("x", {1, 2, 3, 4});
      std::int64_t count = 1;
      for (auto d : w)
        count *= d;
      b.floats("w", w, random_vector(static_cast<std::size_t>(count), 11));
      auto& n = b.node("ConvTranspose", {"x", "w"}, {"y"}, "ct");
      OnnxBuilder::attr(n, "strides", std::vector<std::int64_t>{2, 2});
      edit(b, n);
      b.output("y");
      return error_message([&] { b.import(); });
    };
    CHECK(refusal([](OnnxBuilder&, ::onnx::NodeProto& n) {
            OnnxBuilder::attr(n, "output_shape", std::vector<std::int64_t>{9, 10});
          }) ==
          "test.onnx: node 'ct' (ConvTranspose): attribute 'output_shape' asks for an output "
          "of 9x10, past the full transposed convolution (7x9) by as much as the strides 2 or "
          "more");
    CHECK(refusal([](OnnxBuilder&, ::onnx::NodeProto& n) {
            OnnxBuilder::attr(n, "output_padding", std::vector<std::int64_t>{2, 0});
          }) ==
          "test.onnx: node 'ct' (ConvTranspose): attribute 'output_padding' 2x0 must be "
          "smaller than the strides 2 or the dilations 1");
    CHECK(refusal([](OnnxBuilder&, ::onnx::NodeProto& n) {
            OnnxBuilder::attr(n, "pads", std::vector<std::int64_t>{1, 1});
          }) ==
          "test.onnx: node 'ct' (ConvTranspose): attribute 'pads' has 2 values; a 2-D "
          "window takes 4");
    CHECK(refusal([](OnnxBuilder&, ::onnx::NodeProto&) {}, {3, 3, 3, 3}) ==
          "test.onnx: node 'ct' (ConvTranspose): weight 'w' of shape 3x3x3x3 does not fit input "
          "channels 2 (ConvTranspose weights are [C_in, C_out/group, k...])");
  }
}

TEST_CASE("ONNX 1-D Conv with a Pad folded in, MaxPool and AveragePool on N x C x L") {
  OnnxBuilder b;
  b.input("x", {1, 2, 6});
  b.floats("w", {3, 2, 3}, random_vector(18, 12));
  b.ints("pads", {0, 0, 1, 0, 0, 2});
  b.node("Pad", {"x", "pads"}, {"p"});
  b.node("Conv", {"p", "w"}, {"c"});
  auto& pool = b.node("MaxPool", {"c"}, {"m"});
  OnnxBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{2});
  OnnxBuilder::attr(pool, "strides", std::vector<std::int64_t>{2});
  OnnxBuilder::attr(pool, "pads", std::vector<std::int64_t>{0, 1});
  auto& avg = b.node("AveragePool", {"m"}, {"y"});
  OnnxBuilder::attr(avg, "kernel_shape", std::vector<std::int64_t>{2});
  OnnxBuilder::attr(avg, "auto_pad", std::string("SAME_UPPER"));
  b.output("y");
  const OnnxModel model = b.import();
  CHECK(layer_kinds(model.network) == std::vector<std::string>{"Conv2d", "MaxPool2d", "AvgPool2d"});
  const auto& conv = dynamic_cast<const Conv2d&>(model.network.layer(0));
  CHECK(conv.params().padding == Padding2d(0, 1, 0, 2));  // the Pad's 1 and 2 on L
  CHECK(conv.params().kernel == Size2(1, 3));
  CHECK(conv.output().shape == Shape{1, 3, 7});
  CHECK(model.network.layer(1).output().shape == Shape{1, 3, 4});
  // SAME_UPPER, stride 1 (ONNX's default): one pad at the end, the output keeps L.
  CHECK(dynamic_cast<const AvgPool2d&>(model.network.layer(2)).params().padding ==
        Padding2d(0, 0, 0, 1));
  CHECK(model.network.layer(2).output().shape == Shape{1, 3, 4});
}

TEST_CASE("ONNX Pad before a MaxPool stays a zero Pad2d") {
  OnnxBuilder b;
  b.input("x", {1, 1, 2, 2});
  b.ints("pads", {0, 0, 1, 1, 0, 0, 0, 0});
  b.node("Pad", {"x", "pads"}, {"p"});
  auto& pool = b.node("MaxPool", {"p"}, {"y"});
  OnnxBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{2, 2});
  b.output("y");
  const OnnxModel model = b.import();
  CHECK(layer_kinds(model.network) == std::vector<std::string>{"Pad2d", "MaxPool2d"});
  // Zero padding wins over negative inputs (it is not -inf padding).
  CHECK(run(model, {-1, -2, -3, -4}) == std::vector<float>{0, 0, 0, -1});
}

TEST_CASE("ONNX Pad before an AveragePool folds into its padding where the pool counts it") {
  struct Case {
    const char* what;
    std::vector<std::int64_t> pool_pads;
    std::int64_t count_include_pad, ceil_mode;
    bool folded;
    Padding2d padding;  // of the AvgPool2d layer
  };
  // The Pad: top 1, left 2, bottom 0, right 1 (inception_v3 exports a symmetric 1).
  const Case cases[] = {
      {"no padding of its own", {0, 0, 0, 0}, 0, 0, true, Padding2d(1, 2, 0, 1)},
      {"its own padding, counted", {1, 0, 0, 1}, 1, 0, true, Padding2d(2, 2, 0, 2)},
      {"its own padding, not counted", {1, 0, 0, 1}, 0, 0, false, Padding2d(1, 0, 0, 1)},
      {"ceil_mode", {0, 0, 0, 0}, 0, 1, false, Padding2d(0, 0, 0, 0)},
      {"a sum as wide as the kernel", {0, 1, 0, 0}, 1, 0, false, Padding2d(0, 1, 0, 0)},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    OnnxBuilder b;
    b.input("x", {1, 2, 5, 6});
    b.ints("pads", {0, 0, 1, 2, 0, 0, 0, 1});
    b.node("Pad", {"x", "pads"}, {"p"});
    auto& pool = b.node("AveragePool", {"p"}, {"y"});
    OnnxBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{3, 3});
    OnnxBuilder::attr(pool, "strides", std::vector<std::int64_t>{2, 2});
    OnnxBuilder::attr(pool, "pads", c.pool_pads);
    OnnxBuilder::attr(pool, "count_include_pad", c.count_include_pad);
    OnnxBuilder::attr(pool, "ceil_mode", c.ceil_mode);
    b.output("y");
    const OnnxModel model = b.import();
    const int pool_index = c.folded ? 0 : 1;
    REQUIRE(layer_kinds(model.network) ==
            (c.folded ? std::vector<std::string>{"AvgPool2d"}
                      : std::vector<std::string>{"Pad2d", "AvgPool2d"}));
    const auto& layer = dynamic_cast<const AvgPool2d&>(model.network.layer(pool_index));
    CHECK(layer.params().padding == c.padding);
    CHECK(layer.params().count_include_pad == (c.folded || c.count_include_pad != 0));
    // The same numbers as the Pad and the pool written out as two layers.
    const Pool2dParams pool_params{.kernel = 3,
                                   .stride = 2,
                                   .padding = Padding2d(c.pool_pads[0], c.pool_pads[1],
                                                        c.pool_pads[2], c.pool_pads[3]),
                                   .ceil_mode = c.ceil_mode != 0,
                                   .count_include_pad = c.count_include_pad != 0};
    Network manual;
    const Value padded = manual.pad2d(manual.input("x", {1, 2, 5, 6}), Padding2d(1, 2, 0, 1), "p");
    manual.output("y", manual.avg_pool2d(padded, pool_params, "pool"));
    const auto x = random_vector(60, 21);
    const auto expected =
        Engine::build(manual, Weights{}).create_context().infer({{"x", x}}).output("y").to_vector();
    const auto y = run(model, x);
    REQUIRE(y.size() == expected.size());
    for (std::size_t i = 0; i < y.size(); ++i)
      CHECK(y[i] == doctest::Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("ONNX Pad: a fill, reflect or crop is a Pad2d of its own, never folded into a Conv") {
  for (const std::string mode : {"constant", "reflect", "edge"}) {
    CAPTURE(mode);
    OnnxBuilder b;
    b.input("x", {1, 1, 3, 3});
    b.floats("w", {1, 1, 1, 1}, {2.0f});
    b.ints("pads", {0, 0, 1, -1, 0, 0, 0, 1});
    b.floats("fill", {}, {0.5f});
    auto& pad = b.node("Pad", {"x", "pads", "fill"}, {"p"});
    OnnxBuilder::attr(pad, "mode", mode);
    b.node("Conv", {"p", "w"}, {"y"});
    b.output("y");
    const OnnxModel model = b.import();
    REQUIRE(layer_kinds(model.network) == std::vector<std::string>{"Pad2d", "Conv2d"});
    const auto& layer = dynamic_cast<const Pad2d&>(model.network.layer(0));
    CHECK(layer.padding() == Padding2d(1, -1, 0, 1));
    CHECK(layer.params().value == (mode == "constant" ? 0.5f : 0.0f));
    const auto y = run(model, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    // Row -1 then rows 0..2; columns 1, 2 then one past the right border.
    const std::vector<float> expected =
        mode == "constant"  ? std::vector<float>{1, 1, 1, 4, 6, 1, 10, 12, 1, 16, 18, 1}
        : mode == "reflect" ? std::vector<float>{10, 12, 10, 4, 6, 4, 10, 12, 10, 16, 18, 16}
                            : std::vector<float>{4, 6, 6, 4, 6, 6, 10, 12, 12, 16, 18, 18};
    CHECK(y == expected);
  }
}

TEST_CASE("ONNX Resize and Upsample: each version's inputs and defaults, refusals by name") {
  const std::vector<float> x{1, 2, 3, 4};
  SUBCASE("Upsample 7 (attribute), 9 (input), Resize 10: asymmetric nearest") {
    for (int opset : {7, 9, 10}) {
      CAPTURE(opset);
      OnnxBuilder b(opset);
      b.input("x", {1, 1, 2, 2});
      auto& n = opset < 9 ? b.node("Upsample", {"x"}, {"y"})
                          : b.node(opset < 10 ? "Upsample" : "Resize", {"x", "s"}, {"y"});
      if (opset < 9)
        OnnxBuilder::attr(n, "scales", std::vector<float>{1, 1, 2, 1.5f});
      else
        b.floats("s", {4}, {1, 1, 2, 1.5f});
      b.output("y");
      CHECK(run(b.import(), x) == std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
    }
  }
  SUBCASE("Resize 11 with sizes (empty scales), 13 without roi, 18 with axes") {
    for (int opset : {11, 13, 18}) {
      CAPTURE(opset);
      OnnxBuilder b(opset);
      b.input("x", {1, 1, 2, 2});
      b.floats("roi", {0}, {});
      b.floats("scales", {0}, {});
      b.ints("sizes",
             opset >= 18 ? std::vector<std::int64_t>{4, 3} : std::vector<std::int64_t>{1, 1, 4, 3});
      auto& n = b.node(
          "Resize", {"x", opset >= 13 ? "" : "roi", opset >= 13 ? "" : "scales", "sizes"}, {"y"});
      OnnxBuilder::attr(n, "mode", std::string("linear"));
      OnnxBuilder::attr(n, "coordinate_transformation_mode", std::string("align_corners"));
      if (opset >= 18) OnnxBuilder::attr(n, "axes", std::vector<std::int64_t>{-2, 3});
      b.output("y");
      const OnnxModel model = b.import();
      CHECK(model.network.desc(model.network.outputs()[0].second).shape == Shape{1, 1, 4, 3});
      const auto y = run(model, x);
      CHECK(test::relative_error(y, {1, 1.5f, 2, 5 / 3.f, 13 / 6.f, 8 / 3.f, 7 / 3.f, 17 / 6.f,
                                     10 / 3.f, 3, 3.5f, 4}) < 1e-6);
    }
  }
  const auto refusal = [](int opset, const std::vector<float>& scales,
                          const std::vector<std::pair<std::string, std::string>>& strings,
                          const std::vector<std::pair<std::string, std::int64_t>>& ints = {}) {
    OnnxBuilder b(opset);
    b.input("x", {1, 2, 2, 2});
    b.floats("s", {static_cast<std::int64_t>(scales.size())}, scales);
    auto& n = b.node("Resize", {"x", "", "s"}, {"y"}, "r");
    for (const auto& [name, value] : strings)
      OnnxBuilder::attr(n, name, value);
    for (const auto& [name, value] : ints)
      OnnxBuilder::attr(n, name, value);
    b.output("y");
    return error_message([&] { b.import(); });
  };
  CHECK(refusal(13, {1, 1, 2, 2}, {{"mode", "cubic"}}) ==
        "test.onnx: node 'r' (Resize): attribute 'mode' 'cubic' is not supported (nearest and "
        "linear are)");
  CHECK(refusal(13, {1, 1, 2, 2}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}}) ==
        "test.onnx: node 'r' (Resize): attribute 'coordinate_transformation_mode' "
        "'tf_crop_and_resize' "
        "(crops by roi) is not supported");
  CHECK(refusal(18, {1, 1, 2, 2}, {{"coordinate_transformation_mode", "half_pixel_symmetric"}}) ==
        "test.onnx: node 'r' (Resize): attribute 'coordinate_transformation_mode' "
        "'half_pixel_symmetric' "
        "exists from opset 19 (the model has 18)");
  CHECK(refusal(18, {1, 1, 2, 2}, {{"mode", "linear"}}, {{"antialias", 1}}) ==
        "test.onnx: node 'r' (Resize): attribute 'antialias' must be 0");
  CHECK(
      refusal(13, {1, 1, 2, 2}, {}, {{"exclude_outside", 1}}) ==
      "test.onnx: node 'r' (Resize): attribute 'exclude_outside' must be 0 (it reweights cubic and "
      "antialiased taps)");
  CHECK(
      refusal(13, {1, 2, 2, 2}, {{"mode", "linear"}}) ==
      "test.onnx: node 'r' (Resize): scales [1, 2, 2, 2] resize dim 1 of the input of shape "
      "1x2x2x2; only the last two dims (H and W of NCHW) can be resized, the others need scale 1");
  CHECK(
      refusal(13, {1, 1, 2}, {}) ==
      "test.onnx: node 'r' (Resize): scales has 3 values for 4 dims of the input of shape 1x2x2x2");
  OnnxBuilder up(9);
  up.input("x", {1, 1, 2, 2});
  up.floats("s", {4}, {1, 1, 0.5f, 1});
  up.node("Upsample", {"x", "s"}, {"y"}, "u");
  up.output("y");
  CHECK(
      error_message([&] { up.import(); }) ==
      "test.onnx: node 'u' (Upsample): scale 0.5 is below 1 or not finite; Upsample only enlarges");
}

TEST_CASE("ONNX DepthToSpace (DCR, CRD) and SpaceToDepth: Reshape, Transpose, Reshape") {
  // 8 channels of 1x2 into 2 channels of 2x4, and back.
  const auto x = random_vector(16, 7);
  for (const std::string mode : {"DCR", "CRD"}) {
    CAPTURE(mode);
    OnnxBuilder b(13);
    b.input("x", {1, 8, 1, 2});
    auto& d2s = b.node("DepthToSpace", {"x"}, {"d"});
    OnnxBuilder::attr(d2s, "blocksize", std::int64_t{2});
    OnnxBuilder::attr(d2s, "mode", mode);
    auto& s2d = b.node("SpaceToDepth", {"d"}, {"y"});
    OnnxBuilder::attr(s2d, "blocksize", std::int64_t{2});
    b.output("y");
    b.output("d");
    const OnnxModel model = b.import();
    const Engine engine = Engine::build(model.network, model.weights);
    const Result r = engine.create_context().infer({{"x", x}});
    const auto d = r.output("d").to_vector();
    // Output (c, h, w) reads channel: DCR (h % 2 * 2 + w % 2) * 2 + c; CRD c * 4 + h % 2 * 2 + w
    // % 2.
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 4; ++w) {
          const int block = h % 2 * 2 + w % 2;
          const int channel = mode == "DCR" ? block * 2 + c : c * 4 + block;
          CHECK(d[static_cast<std::size_t>((c * 2 + h) * 4 + w)] ==
                x[static_cast<std::size_t>(channel * 2 + w / 2)]);
        }
    // SpaceToDepth undoes DCR (its only layout).
    if (mode == "DCR") CHECK(r.output("y").to_vector() == x);
  }
}

TEST_CASE("ONNX Tile and Expand of computed tensors: Tile layers, or nothing") {
  OnnxBuilder t(7);
  t.input("x", {2, 3});
  t.ints("repeats", {2, 1});
  t.node("Tile", {"x", "repeats"}, {"y"});
  t.output("y");
  CHECK(run(t.import(), {1, 2, 3, 4, 5, 6}) ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  // Expand: a leading dim added and the size-1 dim repeated; to its own shape, nothing.
  OnnxBuilder e(13);
  e.input("x", {2, 1});
  e.ints("shape", {2, 1, 3});
  e.node("Relu", {"x"}, {"r"});
  e.node("Expand", {"r", "shape"}, {"y"});
  e.ints("same", {2, 1});
  e.node("Expand", {"r", "same"}, {"z"});
  e.output("y");
  e.output("z");
  const OnnxModel model = e.import();
  CHECK(layer_kinds(model.network) == std::vector<std::string>{"ReLU", "Reshape", "Tile"});
  const Result r = Engine::build(model.network, model.weights)
                       .create_context()
                       .infer({{"x", std::vector<float>{-1, 2}}});
  CHECK(r.output("y").to_vector() == std::vector<float>{0, 0, 0, 2, 2, 2, 0, 0, 0, 2, 2, 2});
  CHECK(r.output("y").shape() == Shape{2, 2, 3});
  CHECK(r.output("z").to_vector() == std::vector<float>{0, 2});
  OnnxBuilder bad(13);
  bad.input("x", {2, 3});
  bad.ints("shape", {4, 3});
  bad.node("Expand", {"x", "shape"}, {"y"}, "ex");
  bad.output("y");
  CHECK(error_message([&] { bad.import(); }) ==
        "test.onnx: node 'ex' (Expand): the input of shape 2x3 does not broadcast to [4, 3]");
}

TEST_CASE("ONNX Clip at opset 11 (bounds as inputs) and opset 13, Relu from Clip(0, inf)") {
  for (int opset : {11, 13}) {
    CAPTURE(opset);
    OnnxBuilder b(opset);
    b.input("x", {1, 5});
    b.floats("lo", {}, {0.0f});
    b.floats("hi", {}, {6.0f});
    b.node("Clip", {"x", "lo", "hi"}, {"a"});
    b.node("Clip", {"a", "lo"}, {"y"});
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(layer_kinds(model.network) == std::vector<std::string>{"Clip", "ReLU"});
    CHECK(run(model, {-1, 3, 7, 6, 0.5f}) == std::vector<float>{0, 3, 6, 6, 0.5f});
  }
}

TEST_CASE("ONNX LeakyRelu: alpha, its default 0.01, and nothing else") {
  for (int opset : {11, 13, 17}) {
    CAPTURE(opset);
    OnnxBuilder b(opset);
    b.input("x", {1, 4});
    OnnxBuilder::attr(b.node("LeakyRelu", {"x"}, {"a"}, "steep"), "alpha", 0.5f);
    b.node("LeakyRelu", {"a"}, {"y"}, "default");
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(layer_kinds(model.network) == std::vector<std::string>{"LeakyReLU", "LeakyReLU"});
    CHECK(run(model, {-2, 3, -0.5f, 0}) ==
          std::vector<float>{-2 * 0.5f * 0.01f, 3, -0.5f * 0.5f * 0.01f, 0});
  }
  OnnxBuilder odd;
  odd.input("x", {1, 4});
  OnnxBuilder::attr(odd.node("LeakyRelu", {"x"}, {"y"}, "l"), "beta", 1.0f);
  odd.output("y");
  CHECK(error_message([&] { odd.import(); }) ==
        "test.onnx: node 'l' (LeakyRelu): attribute 'beta' is not supported");
}

TEST_CASE("ONNX Softmax before opset 13 normalises over the flattened trailing dims") {
  for (int opset : {11, 13}) {
    CAPTURE(opset);
    OnnxBuilder b(opset);
    b.input("x", {1, 2, 3});
    auto& n = b.node("Softmax", {"x"}, {"y"});
    OnnxBuilder::attr(n, "axis", std::int64_t{1});
    b.output("y");
    const std::vector<float> x{0, 1, 2, 3, 4, 5};
    const auto y = run(b.import(), x);
    for (int i = 0; i < 6; ++i) {
      double expected;
      if (opset == 11) {  // over all 6 values
        double sum = 0;
        for (float v : x)
          sum += std::exp(v);
        expected = std::exp(x[i]) / sum;
      } else {  // over the 2 values of axis 1
        const int j = i % 3;
        expected = std::exp(x[i]) / (std::exp(x[j]) + std::exp(x[j + 3]));
      }
      CHECK(y[i] == doctest::Approx(expected).epsilon(1e-6));
    }
  }
}

TEST_CASE("ONNX Reshape with 0 and -1, Flatten axis 2, Identity and Constant") {
  OnnxBuilder b;
  b.input("x", {2, 3, 4});
  b.ints("shape", {0, -1});
  b.node("Identity", {"x"}, {"i"});
  b.node("Reshape", {"i", "shape"}, {"r"});  // 2 x 12
  auto& c = b.node("Constant", {}, {"s2"});
  OnnxBuilder::attr(c, "value_ints", std::vector<std::int64_t>{2, 3, 4});
  b.node("Reshape", {"r", "s2"}, {"back"});
  auto& f = b.node("Flatten", {"back"}, {"y"});
  OnnxBuilder::attr(f, "axis", std::int64_t{2});
  b.output("y");
  const OnnxModel model = b.import();
  CHECK(model.network.desc(model.network.find_value(model.network.layer(0).name())).shape ==
        Shape{2, 12});
  CHECK(model.network.desc(model.network.layer_output(2)).shape == Shape{6, 4});
  const auto x = random_vector(24, 9);
  CHECK(run(model, x) == x);
}

TEST_CASE("ONNX weights keep PyTorch's names, so a state_dict binds by name") {
  OnnxBuilder b;
  b.input("x", {1, 2, 4, 4});
  b.floats("features.0.weight", {2, 2, 1, 1}, {1, 0, 0, 1});
  b.floats("features.0.bias", {2}, {0.5f, -0.5f});
  b.node("Conv", {"x", "features.0.weight", "features.0.bias"}, {"y"}, "/features/features.0/Conv");
  b.output("y");
  const OnnxModel model = b.import();
  CHECK(model.network.layer(0).name() == "features.0");
  CHECK(model.weights.names() == std::vector<std::string>{"features.0.bias", "features.0.weight"});
}

TEST_CASE("ONNX bad input: every error names the file and what is wrong") {
  auto conv_model = [](OnnxBuilder& b) {
    b.input("x", {1, 1, 4, 4});
    b.floats("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
    b.output("y");
  };
  SUBCASE("a tensor written twice, a doubled opset, an output nothing produces") {
    OnnxBuilder twice;
    twice.input("x", {1, 4});
    twice.node("Relu", {"x"}, {"y"}, "first");
    twice.node("Relu", {"x"}, {"y"}, "second");
    twice.output("y");
    CHECK(error_message([&] { twice.import(); }) ==
          "test.onnx: node 'second' (Relu): output 'y' is already produced by node 'first' (Relu)");
    OnnxBuilder over_input;
    over_input.input("x", {1, 4});
    over_input.node("Relu", {"x"}, {"x"}, "r");
    over_input.output("x");
    CHECK(error_message([&] { over_input.import(); }) ==
          "test.onnx: node 'r' (Relu): output 'x' is a graph input's name");
    OnnxBuilder opsets(13);
    opsets.add_opset(17);
    opsets.input("x", {1, 4});
    opsets.node("Relu", {"x"}, {"y"}, "r");
    opsets.output("y");
    CHECK(error_message([&] { opsets.import(); }) ==
          "test.onnx: the model imports the default-domain opset twice (versions 13 and 17)");
    OnnxBuilder dangling;
    dangling.input("x", {1, 4});
    dangling.node("Relu", {"x"}, {"y"}, "r");
    dangling.output("z");
    CHECK(error_message([&] { dangling.import(); }) ==
          "test.onnx: graph output 'z' is not produced by any node, nor is it a graph input");
  }
  SUBCASE("unsupported ops: every type at once, with its nodes") {
    OnnxBuilder b;
    b.input("x", {1, 4});
    b.node("Fancy", {"x"}, {"a"}, "f1");
    b.node("Relu", {"a"}, {"b"}, "r");
    b.node("Gizmo", {"b"}, {"c"}).clear_name();  // unnamed: its index
    for (int i = 2; i <= 6; ++i)
      b.node("Fancy", {"c"}, {"d" + std::to_string(i)}, "f" + std::to_string(i));
    b.output("d6");
    const std::string message = error_message([&] { b.import(); });
    CHECK(message ==
          "test.onnx: 2 op types are not supported:\n"
          "  Fancy (6 nodes: 'f1', 'f2', 'f3', 'f4' and 2 more)\n"
          "  Gizmo (1 node: #2)\n"
          "supported: " +
              fmt::format("{}", fmt::join(cgr::supported_onnx_ops(), ", ")));
  }
  SUBCASE("unknown attribute and unsupported attribute values") {
    OnnxBuilder b;
    conv_model(b);
    auto& n = b.node("Conv", {"x", "w"}, {"y"}, "c");
    OnnxBuilder::attr(n, "fancy", std::int64_t{1});
    CHECK(error_message([&] { b.import(); }) ==
          "test.onnx: node 'c' (Conv): attribute 'fancy' is not supported");
    OnnxBuilder p;
    p.input("x", {1, 1, 4, 4});
    p.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
    auto& pad = p.node("Pad", {"x", "pads"}, {"y"}, "p");
    OnnxBuilder::attr(pad, "mode", std::string("wrap"));
    p.output("y");
    CHECK(error_message([&] { p.import(); }) ==
          "test.onnx: node 'p' (Pad): attribute 'mode' 'wrap' exists from opset 19 (the model has "
          "13)");
    OnnxBuilder m;
    m.input("x", {1, 1, 4, 4});
    auto& pool = m.node("MaxPool", {"x"}, {"y"}, "mp");
    OnnxBuilder::attr(pool, "kernel_shape", std::vector<std::int64_t>{2, 2});
    OnnxBuilder::attr(pool, "storage_order", std::int64_t{1});
    m.output("y");
    CHECK(error_message([&] { m.import(); }) ==
          "test.onnx: node 'mp' (MaxPool): attribute 'storage_order' must be 0");
  }
  SUBCASE("dynamic shapes need a concrete input shape") {
    OnnxBuilder b;
    b.input("x", {1, 1, 4}, "width");
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    CHECK(error_message([&] { b.import(); }) ==
          "test.onnx: input 'x' has a dynamic dimension 'width'; pass a concrete shape in "
          "OnnxImportOptions::input_shapes");
    const OnnxModel model = b.import({.input_shapes = {{"x", Shape{1, 1, 4, 6}}}});
    CHECK(model.network.desc(model.network.inputs()[0]).shape == Shape{1, 1, 4, 6});
  }
  SUBCASE("truncated, garbage, wrong opset, bad tensors, missing file") {
    OnnxBuilder b;
    conv_model(b);
    b.node("Conv", {"x", "w"}, {"y"}, "c");
    const std::string good = b.bytes();
    const std::string cut = good.substr(0, good.size() / 2);
    CHECK(error_message(
              [&] { import_onnx(std::as_bytes(std::span(cut.data(), cut.size())), "cut.onnx"); }) ==
          "cut.onnx: not a valid ONNX model (protobuf parsing failed; truncated or not an .onnx "
          "file)");
    const std::string garbage = "\x93NUMPY this is not protobuf";
    CHECK_FALSE(error_message([&] {
                  import_onnx(std::as_bytes(std::span(garbage.data(), garbage.size())), "g.onnx");
                }).empty());
    for (int opset : {6, 22}) {
      OnnxBuilder old(opset);
      conv_model(old);
      old.node("Conv", {"x", "w"}, {"y"});
      CHECK(error_message([&] {
              old.import();
            }).find(fmt::format("test.onnx: opset {} is not supported (supported: 7-21)", opset)) ==
            0);
    }
    OnnxBuilder bad;
    bad.input("x", {1, 1, 4, 4});
    bad.floats("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f)).mutable_raw_data()->resize(20);
    bad.node("Conv", {"x", "w"}, {"y"});
    bad.output("y");
    CHECK(error_message([&] { bad.import(); }) ==
          "test.onnx: initializer: tensor 'w' holds 20 bytes of data, expected 36");
    OnnxBuilder external;
    external.input("x", {1, 1, 4, 4});
    external.floats("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f))
        .set_data_location(::onnx::TensorProto::EXTERNAL);
    external.node("Conv", {"x", "w"}, {"y"});
    external.output("y");
    CHECK(error_message([&] { external.import(); }).find("keeps its data in an external file") !=
          std::string::npos);
    CHECK(error_message([] { import_onnx(std::filesystem::path("/nonexistent/model.onnx")); }) ==
          "/nonexistent/model.onnx: cannot open (No such file or directory)");
  }
  SUBCASE("an op that needs a constant gets a computed tensor") {
    OnnxBuilder b;
    b.input("x", {1, 2, 4, 4});
    b.input("w", {3, 2, 3, 3});
    b.node("Conv", {"x", "w"}, {"y"}, "conv");
    b.output("y");
    CHECK(error_message([&] { b.import(); }) ==
          "test.onnx: node 'conv' (Conv): weight 'w' must be a constant (an initializer or a "
          "Constant node)");
  }
  SUBCASE("NaN weights are allowed and propagate") {
    OnnxBuilder b;
    conv_model(b);
    std::vector<float> w(9, 1.0f);
    w[4] = std::numeric_limits<float>::quiet_NaN();
    b.graph().mutable_initializer(0)->set_raw_data(
        std::string(reinterpret_cast<const char*>(w.data()), 36));
    b.node("Conv", {"x", "w"}, {"y"});
    const auto y = run(b.import(), std::vector<float>(16, 1.0f));
    REQUIRE(y.size() == 4);
    for (float v : y)
      CHECK(std::isnan(v));
  }
}

TEST_CASE("ONNX shape arithmetic on constants folds away (the exporter's F.pad chain)") {
  OnnxBuilder b;
  b.input("x", {1, 1, 3, 3});
  // pads computed the way torch exports F.pad(x, (1, 0, 0, 1)): [1,0,0,1] -> reversed pairs.
  b.ints("raw", {1, 0, 0, 1});
  b.ints("zeros_shape", {1});
  auto& zeros = b.node("ConstantOfShape", {"zeros_shape"}, {"zeros"});
  {
    auto* a = zeros.add_attribute();
    a->set_name("value");
    a->set_type(::onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(::onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_int64_data(0);
  }
  b.ints("four", {4});
  b.node("Concat", {"raw", "zeros", "zeros", "zeros", "zeros"}, {"eight"}, "cat");
  OnnxBuilder::attr(b.graph().mutable_node(1)[0], "axis", std::int64_t{0});
  b.ints("shape42", {-1, 2});
  b.node("Reshape", {"eight", "shape42"}, {"pairs"});
  b.ints("starts", {-1});
  b.ints("ends", {std::numeric_limits<std::int64_t>::min()});
  b.ints("axes", {0});
  b.ints("steps", {-1});
  b.node("Slice", {"pairs", "starts", "ends", "axes", "steps"}, {"reversed"});
  auto& tr = b.node("Transpose", {"reversed"}, {"t"});
  OnnxBuilder::attr(tr, "perm", std::vector<std::int64_t>{1, 0});
  b.ints("flat", {-1});
  b.node("Reshape", {"t", "flat"}, {"p64"});
  auto& cast = b.node("Cast", {"p64"}, {"pads"});
  OnnxBuilder::attr(cast, "to", std::int64_t{::onnx::TensorProto::INT64});
  b.node("Pad", {"x", "pads"}, {"y"});
  b.output("y");
  const OnnxModel model = b.import();
  REQUIRE(model.network.layer_count() == 1);
  // F.pad (left 1, right 0, top 0, bottom 1) -> ONNX pads [0,0,0,1, 0,0,1,0].
  CHECK(dynamic_cast<const Pad2d&>(model.network.layer(0)).padding() == Padding2d(0, 1, 1, 0));
  // Shape of a computed tensor is a constant too.
  OnnxBuilder s;
  s.input("x", {2, 6});
  s.node("Shape", {"x"}, {"shape"});
  s.ints("idx", {1});
  s.node("Gather", {"shape", "idx"}, {"cols"});
  s.ints("minus1", {-1});
  s.node("Concat", {"cols", "minus1"}, {"target"});
  OnnxBuilder::attr(s.graph().mutable_node(2)[0], "axis", std::int64_t{0});
  s.node("Reshape", {"x", "target"}, {"y"});
  s.output("y");
  const OnnxModel reshaped = s.import();
  CHECK(reshaped.network.desc(reshaped.network.layer_output(0)).shape == Shape{6, 2});
}

TEST_CASE(
    "ONNX Transpose of a constant: negative perm entries count from the end; repeats are refused") {
  const auto build = [](std::vector<std::int64_t> perm) {
    OnnxBuilder b;
    b.input("x", {3, 2});
    b.floats("c", {2, 3}, {1, 2, 3, 4, 5, 6});
    OnnxBuilder::attr(b.node("Transpose", {"c"}, {"t"}, "tr"), "perm", perm);
    b.node("Add", {"x", "t"}, {"y"}, "add");
    b.output("y");
    return b;
  };
  // perm [-1, 0] is [1, 0]: the folded constant is the 3x2 transpose, added to x.
  OnnxBuilder good = build({-1, 0});
  const OnnxModel model = good.import();
  REQUIRE(model.network.layer_count() == 1);
  CHECK(model.network.desc(model.network.layer_output(0)).shape == Shape{3, 2});
  OnnxBuilder repeated = build({-1, 1});
  CHECK(error_message([&] { repeated.import(); }) ==
        "test.onnx: node 'tr' (Transpose): perm [-1,1] names axis 1 twice");
  OnnxBuilder out_of_range = build({0, -3});
  CHECK(error_message([&] { out_of_range.import(); }) ==
        "test.onnx: node 'tr' (Transpose): axis -3 is out of range for rank 2");
}

TEST_CASE("ONNX constant folding is bounded, and Concat and Squeeze check shapes") {
  SUBCASE("a chain that builds more than the bound is refused at the node that passes it") {
    // A 4-byte shape expands to 2^20 elements, then Concat doubles it: 3 * 2^20 in all.
    const auto build = [] {
      OnnxBuilder b(13);
      b.input("x", {1, 4});
      b.ints("shape", {1024, 1024});
      b.node("ConstantOfShape", {"shape"}, {"big"}, "fill");
      b.node("Concat", {"big", "big"}, {"twice"}, "cat");
      OnnxBuilder::attr(b.graph().mutable_node(1)[0], "axis", std::int64_t{0});
      b.node("Relu", {"x"}, {"y"});
      b.output("y");
      return b;
    };
    OnnxImportOptions roomy;
    roomy.max_folded_elements = 5 << 20;
    CHECK(build().import(roomy).network.layer_count() == 1);
    OnnxImportOptions tight;
    tight.max_folded_elements = 3 << 20;
    CHECK(error_message([&] { build().import(tight); }) ==
          "test.onnx: node 'cat' (Concat): constant folding would build more than 3145728 "
          "elements in this model; a model that needs more can raise "
          "OnnxImportOptions::max_folded_elements (cgr-bench --max-folded-elements N; Python: "
          "max_folded_elements=N)");
    // An Expand to a huge shape is refused before anything of that size is allocated.
    OnnxBuilder e(13);
    e.input("x", {1, 4});
    e.ints("one", {1});
    e.ints("huge", {1 << 20, 1 << 20});
    e.node("Expand", {"one", "huge"}, {"wide"}, "expand");
    e.node("Relu", {"x"}, {"y"});
    e.output("y");
    CHECK(error_message([&] { e.import(); }) ==
          "test.onnx: node 'expand' (Expand): constant folding would build more than 134217728 "
          "elements in this model; a model that needs more can raise "
          "OnnxImportOptions::max_folded_elements (cgr-bench --max-folded-elements N; Python: "
          "max_folded_elements=N)");
  }
  SUBCASE("an empty constant whose other dims multiply past int64 transposes to an empty one") {
    OnnxBuilder b(13);
    b.input("x", {1, 4});
    b.floats("empty", {0, 1 << 30, 1 << 30, 1 << 30}, {});
    OnnxBuilder::attr(b.node("Transpose", {"empty"}, {"t"}, "tr"), "perm",
                      std::vector<std::int64_t>{3, 2, 1, 0});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    CHECK(b.import().network.layer_count() == 1);
  }
  SUBCASE("an empty constant as an Add operand broadcasts to an empty sum") {
    // Found by fuzz_onnx: the empty weight's values were copied from a null pointer.
    OnnxBuilder b(13);
    b.input("x", {1, 4});
    b.floats("empty", {0, 4}, {});
    b.node("Add", {"x", "empty"}, {"s"}, "add");
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(model.network.layer_count() == 2);
    CHECK(model.network.desc(model.network.layer_output(0)).shape == Shape{0, 4});
    // Empty, with other dims that multiply past int64: no strides are computed.
    OnnxBuilder huge(13);
    huge.input("x", {1, 1});
    huge.floats("empty", {0, 1 << 30, 1 << 30, 1 << 30}, {});
    huge.node("Add", {"x", "empty"}, {"s"}, "add");
    huge.node("Relu", {"x"}, {"y"});
    huge.output("y");
    const OnnxModel huge_model = huge.import();
    CHECK(huge_model.network.desc(huge_model.network.layer_output(0)).shape ==
          Shape{0, 1 << 30, 1 << 30, 1 << 30});
  }
  SUBCASE("Concat of constants whose other dims differ") {
    OnnxBuilder b(13);
    b.input("x", {1, 4});
    b.floats("a", {2, 3}, random_vector(6, 1));
    b.floats("c", {4, 5}, random_vector(20, 2));
    b.node("Concat", {"a", "c"}, {"ac"}, "cat");
    OnnxBuilder::attr(b.graph().mutable_node(0)[0], "axis", std::int64_t{1});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    CHECK(error_message([&] { b.import(); }) ==
          "test.onnx: node 'cat' (Concat): inputs of shapes 2x3 and 4x5 differ off the axis 1");
  }
  SUBCASE("Squeeze of a computed tensor: shape only, and an axis of size 2 is refused") {
    const auto build = [](std::vector<std::int64_t> axes) {
      OnnxBuilder b(13);
      b.input("x", {1, 3, 1, 4});
      b.ints("axes", axes);
      b.node("Squeeze", {"x", "axes"}, {"s"}, "squeeze");
      b.node("Relu", {"s"}, {"y"});
      b.output("y");
      return b;
    };
    const OnnxModel model = build({0, -2}).import();
    CHECK(model.network.desc(model.network.layer_output(1)).shape == Shape{3, 4});
    CHECK(error_message([&] { build({1}).import(); }) ==
          "test.onnx: node 'squeeze' (Squeeze): axis 1 has size 3, not 1: it cannot be squeezed");
  }
}

TEST_CASE("ONNX unary functions become Unary layers with the op's attributes") {
  OnnxBuilder b(20);
  b.input("x", {1, 6});
  OnnxBuilder::attr(b.node("Selu", {"x"}, {"a"}, "selu"), "gamma", 1.25f);
  OnnxBuilder::attr(b.node("HardSigmoid", {"a"}, {"h"}, "hsig"), "alpha", 0.125f);
  OnnxBuilder::attr(b.node("Gelu", {"h"}, {"y"}, "gelu"), "approximate", std::string("tanh"));
  b.output("y");
  const OnnxModel model = b.import();
  const Network& net = model.network;
  REQUIRE(net.layer_count() == 3);
  const auto& selu = static_cast<const Unary&>(net.layer(0));
  CHECK(selu.params().op == UnaryOp::selu);
  CHECK(selu.params().alpha == UnaryParams::defaults(UnaryOp::selu).alpha);
  CHECK(selu.params().beta == 1.25f);
  const auto& hsig = static_cast<const Unary&>(net.layer(1));
  CHECK(hsig.params().alpha == 0.125f);
  CHECK(hsig.params().beta == 0.5f);
  CHECK(static_cast<const Unary&>(net.layer(2)).params().op == UnaryOp::gelu_tanh);

  OnnxBuilder bad(20);
  bad.input("x", {1, 6});
  OnnxBuilder::attr(bad.node("Gelu", {"x"}, {"y"}, "g"), "approximate", std::string("fast"));
  bad.output("y");
  CHECK(error_message([&] { bad.import(); }) ==
        "test.onnx: node 'g' (Gelu): attribute 'approximate' 'fast' is not none or tanh");
}

TEST_CASE(
    "ONNX x * Sigmoid(x) imports as SiLU and x * HardSigmoid(x) as HardSwish: one op with the "
    "conv") {
  for (const bool hard : {false, true}) {
    CAPTURE(hard);
    OnnxBuilder b;
    b.input("x", {1, 3, 6, 5});
    b.floats("w", {4, 3, 3, 3}, random_vector(108, 11));
    OnnxBuilder::attr(b.node("Conv", {"x", "w"}, {"c"}, "conv"), "pads",
                      std::vector<std::int64_t>{1, 1, 1, 1});
    if (hard) {
      // torch.nn.Hardswish before opset 14: HardSigmoid(alpha 1/6) then Mul.
      OnnxBuilder::attr(b.node("HardSigmoid", {"c"}, {"g"}, "gate"), "alpha", 1.0f / 6.0f);
    } else {
      b.node("Sigmoid", {"c"}, {"g"}, "gate");
    }
    b.node("Mul", {"c", "g"}, {"y"}, "act");
    b.output("y");
    const OnnxModel model = b.import();
    const Engine engine = Engine::build(model.network, model.weights);
    CHECK(engine.info().ops == 1);
    REQUIRE(engine.op_names().size() == 1);
    CHECK(engine.op_names()[0].find("+act") != std::string::npos);
    // The numbers of the conv followed by the two ONNX ops, as the engine runs them unfused.
    const auto x = random_vector(90, 12);
    const auto fused = run(model, x);
    std::vector<float> reference;
    {
      Network manual;
      const Value c =
          manual.conv2d(manual.input("x", {1, 3, 6, 5}),
                        {.out_channels = 4, .kernel = 3, .padding = 1, .bias = false}, "conv");
      const UnaryParams gate = hard ? UnaryParams{UnaryOp::hard_sigmoid, 1.0f / 6.0f, 0.5f}
                                    : UnaryParams::defaults(UnaryOp::sigmoid);
      manual.output("y", manual.binary(c, manual.unary(c, gate, "gate"), BinaryOp::mul, "mul"));
      Weights mw;
      mw.add("conv.weight", Tensor(*model.weights.find(model.network.layer(0).name() + ".weight")));
      reference = Engine::build(manual, mw, {.fuse = false})
                      .create_context()
                      .infer({{"x", x}})
                      .output("y")
                      .to_vector();
    }
    if (hard) {
      CHECK(relative_error(fused, reference) < 1e-6);  // x relu6(x + 3) / 6 vs x hardsigmoid(x)
    } else {
      CHECK(fused == reference);  // x * sigmoid(x), the same float operations
    }
  }
  // A gate read by anything else stays a Sigmoid and a Mul.
  OnnxBuilder b;
  b.input("x", {1, 4});
  b.node("Sigmoid", {"x"}, {"g"}, "gate");
  b.node("Mul", {"x", "g"}, {"y"}, "mul");
  b.output("y");
  b.output("g");
  const OnnxModel model = b.import();
  CHECK(Engine::build(model.network, model.weights).info().ops == 2);
}

TEST_CASE("ONNX MatMul and Gemm with computed operands become MatMul layers") {
  const auto infer = [](const OnnxModel& model,
                        const std::vector<std::pair<std::string, std::vector<float>>>& feeds) {
    const Engine engine = Engine::build(model.network, model.weights, {.threads = 2});
    NamedInputs inputs;
    for (const auto& [name, values] : feeds)
      inputs.emplace_back(name, TensorView(values));
    return engine.create_context().infer(inputs).output("y").to_vector();
  };
  SUBCASE("MatMul: batch dims broadcast, a 1-D constant on the left") {
    OnnxBuilder b;
    b.input("a", {2, 1, 3, 4});
    b.input("b", {3, 4, 5});
    b.node("MatMul", {"a", "b"}, {"p"}, "mm");
    b.floats("v", {3}, {1.0f, -2.0f, 0.5f});
    b.node("MatMul", {"v", "p"}, {"y"}, "vm");  // [3] @ [2, 3, 3, 5] -> [2, 3, 5]
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(layer_kinds(model.network) == std::vector<std::string>{"MatMul", "MatMul"});
    const auto a = random_vector(24, 40), bv = random_vector(60, 41);
    const auto y = infer(model, {{"a", a}, {"b", bv}});
    REQUIRE(y.size() == 30);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int c = 0; c < 5; ++c) {
          double acc = 0.0;
          const double v[3] = {1.0, -2.0, 0.5};
          for (int r = 0; r < 3; ++r) {
            double p = 0.0;
            for (int k = 0; k < 4; ++k)
              p += double{a[static_cast<std::size_t>((i * 3 + r) * 4 + k)]} *
                   bv[static_cast<std::size_t>((j * 4 + k) * 5 + c)];
            acc += v[r] * p;
          }
          CHECK(y[static_cast<std::size_t>((i * 3 + j) * 5 + c)] ==
                doctest::Approx(acc).epsilon(1e-5));
        }
  }
  SUBCASE("Gemm: computed B, transA, transB, alpha, beta and a computed C broadcast over rows") {
    OnnxBuilder b;
    b.input("a", {4, 3});  // transA: A is 3 x 4
    b.input("b", {5, 4});  // transB: B is 4 x 5
    b.input("c", {1, 5});
    auto& n = b.node("Gemm", {"a", "b", "c"}, {"y"}, "gemm");
    OnnxBuilder::attr(n, "transA", std::int64_t{1});
    OnnxBuilder::attr(n, "transB", std::int64_t{1});
    OnnxBuilder::attr(n, "alpha", 0.5f);
    OnnxBuilder::attr(n, "beta", -2.0f);
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(layer_kinds(model.network) == std::vector<std::string>{"MatMul", "Binary", "Binary"});
    const auto a = random_vector(12, 42), bv = random_vector(20, 43), c = random_vector(5, 44);
    const auto y = infer(model, {{"a", a}, {"b", bv}, {"c", c}});
    REQUIRE(y.size() == 15);
    for (int r = 0; r < 3; ++r)
      for (int o = 0; o < 5; ++o) {
        double acc = 0.0;
        for (int k = 0; k < 4; ++k)
          acc += double{a[static_cast<std::size_t>(k * 3 + r)]} *
                 bv[static_cast<std::size_t>(o * 4 + k)];
        CHECK(y[static_cast<std::size_t>(r * 5 + o)] ==
              doctest::Approx(0.5 * acc - 2.0 * c[static_cast<std::size_t>(o)]).epsilon(1e-5));
      }
  }
  SUBCASE("Gemm: constant A and computed B; constant B with a full [M, N] C") {
    OnnxBuilder b;
    b.input("x", {3, 2});
    b.floats("w", {4, 3}, random_vector(12, 45));
    b.node("Gemm", {"w", "x"}, {"p"}, "left");  // [4, 3] @ [3, 2]
    b.floats("v", {2, 3}, random_vector(6, 46));
    b.floats("full", {4, 3}, random_vector(12, 47));
    auto& g = b.node("Gemm", {"p", "v", "full"}, {"y"}, "right");
    OnnxBuilder::attr(g, "beta", 0.25f);
    b.output("y");
    const OnnxModel model = b.import();
    CHECK(layer_kinds(model.network) == std::vector<std::string>{"MatMul", "Linear", "Binary"});
    const auto x = random_vector(6, 48);
    const auto y = run(model, x);
    REQUIRE(y.size() == 12);
    const auto w = random_vector(12, 45), v = random_vector(6, 46), full = random_vector(12, 47);
    for (int r = 0; r < 4; ++r)
      for (int o = 0; o < 3; ++o) {
        double acc = 0.25 * full[static_cast<std::size_t>(r * 3 + o)];
        for (int k = 0; k < 2; ++k) {
          double p = 0.0;
          for (int j = 0; j < 3; ++j)
            p += double{w[static_cast<std::size_t>(r * 3 + j)]} *
                 x[static_cast<std::size_t>(j * 2 + k)];
          acc += p * v[static_cast<std::size_t>(k * 3 + o)];
        }
        CHECK(y[static_cast<std::size_t>(r * 3 + o)] == doctest::Approx(acc).epsilon(1e-5));
      }
  }
  SUBCASE("errors name the node") {
    OnnxBuilder b;
    b.input("a", {2, 3, 4});
    b.input("b", {4, 5});
    b.node("Gemm", {"a", "b"}, {"y"}, "g3");
    b.output("y");
    CHECK(error_message([&] { b.import(); }) ==
          "test.onnx: node 'g3' (Gemm): A 'a' has shape 2x3x4, expected 2 dims");
    OnnxBuilder c;
    c.input("a", {2, 3});
    c.input("b", {3, 5});
    c.input("c", {3, 5});
    c.node("Gemm", {"a", "b", "c"}, {"y"}, "gc");
    c.output("y");
    CHECK(error_message([&] { c.import(); }) ==
          "test.onnx: node 'gc' (Gemm): C 'c' of shape 3x5 does not broadcast to the product's "
          "shape 2x5");
    OnnxBuilder k;
    k.floats("a", {2, 3}, random_vector(6, 1));
    k.floats("b", {3, 2}, random_vector(6, 2));
    k.input("x", {2});
    k.node("MatMul", {"a", "b"}, {"p"}, "consts");
    k.node("Add", {"p", "x"}, {"y"});
    k.output("y");
    CHECK(error_message([&] { k.import(); }) ==
          "test.onnx: node 'consts' (MatMul): A 'a' and B 'b' are both constants; a product of "
          "constants is not folded");
  }
}

TEST_CASE("ONNX LRN, InstanceNormalization and LayerNormalization") {
  SUBCASE("LRN: defaults, size required") {
    OnnxBuilder b(7);
    b.input("x", {1, 4, 3, 3});
    auto& n = b.node("LRN", {"x"}, {"y"}, "lrn");
    OnnxBuilder::attr(n, "size", std::int64_t{3});
    OnnxBuilder::attr(n, "bias", 2.0f);
    b.output("y");
    const OnnxModel model = b.import();
    const auto& lrn = dynamic_cast<const LocalResponseNorm&>(model.network.layer(0));
    CHECK(lrn.params().size == 3);
    CHECK(lrn.params().alpha == 1e-4f);
    CHECK(lrn.params().beta == 0.75f);
    CHECK(lrn.params().bias == 2.0f);
    OnnxBuilder bad;
    bad.input("x", {1, 4, 3, 3});
    bad.node("LRN", {"x"}, {"y"}, "nosize");
    bad.output("y");
    CHECK(error_message([&] { bad.import(); }) ==
          "test.onnx: node 'nosize' (LRN): attribute 'size' is required");
  }
  SUBCASE("InstanceNormalization: weights per channel under the scale's name") {
    OnnxBuilder b;
    b.input("x", {2, 3, 4, 4});
    b.floats("norm.weight", {3}, {1.0f, 2.0f, 3.0f});
    b.floats("norm.bias", {3}, {0.0f, 0.5f, 1.0f});
    OnnxBuilder::attr(
        b.node("InstanceNormalization", {"x", "norm.weight", "norm.bias"}, {"y"}, "in"), "epsilon",
        1e-3f);
    b.output("y");
    const OnnxModel model = b.import();
    const auto& in = dynamic_cast<const InstanceNorm&>(model.network.layer(0));
    CHECK(in.name() == "norm");
    CHECK(in.params().eps == 1e-3f);
    CHECK(model.weights.find("norm.bias")->f32()[2] == 1.0f);
    OnnxBuilder bad;
    bad.input("x", {2, 3, 4, 4});
    bad.floats("s", {4}, {1, 1, 1, 1});
    bad.floats("b", {3}, {0, 0, 0});
    bad.node("InstanceNormalization", {"x", "s", "b"}, {"y"}, "in");
    bad.output("y");
    CHECK(error_message([&] { bad.import(); }) ==
          "test.onnx: node 'in' (InstanceNormalization): 's' has shape 4, expected [3] (one value "
          "per channel)");
  }
  SUBCASE("LayerNormalization: axis, a broadcast Scale, no B; Mean may not be used") {
    OnnxBuilder b(17);
    b.input("x", {2, 3, 4});
    b.floats("scale", {1, 4}, {1.0f, 2.0f, 3.0f, 4.0f});  // broadcast over the 3 rows of [3, 4]
    auto& n = b.node("LayerNormalization", {"x", "scale"}, {"y"}, "ln");
    OnnxBuilder::attr(n, "axis", std::int64_t{-2});
    b.output("y");
    const OnnxModel model = b.import();
    const auto& ln = dynamic_cast<const LayerNorm&>(model.network.layer(0));
    CHECK(ln.params().axis == 1);
    CHECK_FALSE(ln.params().bias);
    CHECK(ln.normalized_shape() == Shape{3, 4});
    const auto w = model.weights.find("ln.weight")->f32();
    CHECK(std::vector<float>(w.begin(), w.end()) ==
          std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
    OnnxBuilder mean(17);
    mean.input("x", {2, 3, 4});
    mean.floats("scale", {4}, {1, 1, 1, 1});
    mean.node("LayerNormalization", {"x", "scale"}, {"y", "m"}, "ln");
    mean.node("Add", {"y", "m"}, {"z"});
    mean.output("z");
    CHECK(error_message([&] { mean.import(); }) ==
          "test.onnx: node 'ln' (LayerNormalization): output 1 ('m') is used, but only the first "
          "output is supported");
    OnnxBuilder shape(17);
    shape.input("x", {2, 3, 4});
    shape.floats("scale", {3}, {1, 1, 1});
    shape.node("LayerNormalization", {"x", "scale"}, {"y"}, "ln");
    shape.output("y");
    CHECK(error_message([&] { shape.import(); }) ==
          "test.onnx: node 'ln' (LayerNormalization): 'scale' has shape 3, which does not "
          "broadcast to the normalised shape 4");
  }
}

namespace {

// x -> Gemm -> h -> Relu -> r -> Gemm -> Relu -> Gemm -> final, and a head Gemm(h) -> exit0:
// what torch.onnx.export writes for a module returning (final, exit0).
OnnxBuilder exit_head_model() {
  OnnxBuilder b;
  b.input("x", {2, 8});
  b.floats("w1", {8, 6}, random_vector(48, 21));
  b.floats("w2", {6, 6}, random_vector(36, 22));
  b.floats("w3", {6, 4}, random_vector(24, 23));
  b.floats("head", {6, 4}, random_vector(24, 24));
  b.node("Gemm", {"x", "w1"}, {"h"}, "stem");
  b.node("Relu", {"h"}, {"r"}, "relu");
  b.node("Gemm", {"r", "w2"}, {"s"}, "block");
  b.node("Relu", {"s"}, {"t"}, "relu2");
  b.node("Gemm", {"t", "w3"}, {"final"}, "classifier");
  b.node("Gemm", {"h", "head"}, {"exit0"}, "exit_head");
  b.output("final");
  b.output("exit0");
  return b;
}

}  // namespace

TEST_CASE("ONNX outputs declared as exits: heads come back once, under their names, and decide") {
  const OnnxBuilder b = exit_head_model();
  const auto x = random_vector(16, 25);
  // The reference: both as plain outputs.
  const OnnxModel plain = b.import();
  const Result expected = Engine::build(plain.network, plain.weights, {.threads = 1})
                              .create_context()
                              .infer({{"x", x}});

  const OnnxModel model = b.import({.exits = {{.output = "exit0", .speculate_until = "r"}}});
  REQUIRE(model.network.exits().size() == 1);
  CHECK(model.network.exits()[0].name == "exit0");
  // The ONNX tensor 'r' is the Relu layer's output.
  REQUIRE(model.network.find_value("relu").valid());
  CHECK(model.network.exits()[0].speculate_until == model.network.find_value("relu"));
  REQUIRE(model.network.outputs().size() == 1);
  CHECK(model.network.outputs()[0].first == "final");

  const Engine all =
      Engine::build(model.network, model.weights, {.threads = 1, .exits = ExitPolicy::all});
  const Result both = all.create_context().infer({{"x", x}});
  CHECK(both.outputs.size() == 2);
  CHECK(both.output("exit0").to_vector() == expected.output("exit0").to_vector());
  CHECK(both.output("final").to_vector() == expected.output("final").to_vector());
  REQUIRE(both.exits.size() == 1);
  CHECK(both.exits[0].ran);
  CHECK(both.answered_by == "final");

  // Threshold 0: the exit fires and the rest of the network is skipped.
  const Engine early = Engine::build(model.network, model.weights,
                                     {.threads = 1, .exits = ExitPolicy::early, .threshold = 0.0f});
  const Result fired = early.create_context().infer({{"x", x}});
  CHECK(fired.answered_by == "exit0");
  CHECK(fired.exits[0].fired);
  CHECK_FALSE(fired.outputs.contains("final"));
  CHECK(fired.output("exit0").to_vector() == expected.output("exit0").to_vector());
  // Off: the head is pruned.
  const Engine off =
      Engine::build(model.network, model.weights, {.threads = 1, .exits = ExitPolicy::off});
  const Result backbone = off.create_context().infer({{"x", x}});
  CHECK(backbone.outputs.size() == 1);
  CHECK(backbone.output("final").to_vector() == expected.output("final").to_vector());
}

TEST_CASE("ONNX exits that cannot be heads are refused by name") {
  const OnnxBuilder b = exit_head_model();
  const auto refused = [&](std::vector<OnnxExit> exits) {
    return error_message([&] { b.import({.exits = std::move(exits)}); });
  };
  CHECK(refused({{.output = "h"}}) ==
        "test.onnx: exit 'h' is not a graph output (outputs: final, exit0)");
  CHECK(refused({{.output = "exit0"}, {.output = "exit0"}}) ==
        "test.onnx: exit 'exit0' is declared twice");
  CHECK(refused({{.output = "exit0", .speculate_until = "nothing"}}) ==
        "test.onnx: exit 'exit0': speculate_until 'nothing' is not a tensor of the graph");
  CHECK(refused({{.output = "exit0", .speculate_until = "w2"}}) ==
        "test.onnx: exit 'exit0': speculate_until 'w2' is not a tensor of the graph (it is a "
        "constant)");
  CHECK(refused({{.output = "exit0"}, {.output = "final"}}) ==
        "test.onnx: every graph output (final, exit0) is declared an exit; the final answer must "
        "stay "
        "an output");
  OnnxBuilder flat;
  flat.input("x", {2, 3, 4});
  flat.node("Relu", {"x"}, {"y"}, "relu");
  flat.node("Sigmoid", {"x"}, {"z"}, "sig");
  flat.output("y");
  flat.output("z");
  CHECK(error_message([&] { flat.import({.exits = {{.output = "z"}}}); }) ==
        "test.onnx: exit 'z' has shape 2x3x4; an exit head's logits must be N x classes");
}

TEST_CASE("ONNX batch buckets: a symbolic batch becomes each bucket, other dims must be known") {
  OnnxBuilder b;
  b.input("x", {1, 8});
  b.graph()
      .mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("N");
  b.floats("w", {8, 4}, random_vector(32, 31));
  b.node("Gemm", {"x", "w"}, {"y"}, "fc");
  b.output("y");
  const auto path = std::filesystem::temp_directory_path() / "cgr_test_buckets.onnx";
  std::ofstream(path, std::ios::binary) << b.bytes();
  const BucketedEngine engine = build_onnx_buckets(path, {4, 2}, {.threads = 1});
  CHECK(engine.buckets() == std::vector<std::int64_t>{2, 4});
  CHECK(engine.engine(4).inputs()[0].shape == Shape{4, 8});
  BucketedContext ctx = engine.create_context();
  const auto x = random_vector(24, 32);
  const Result result = ctx.infer({{"x", Tensor(Shape{3, 8}, x)}});
  CHECK(ctx.last_bucket() == 4);
  REQUIRE(result.output("y").shape() == Shape{3, 4});
  const OnnxModel three = b.import({.input_shapes = {{"x", Shape{3, 8}}}});
  const Result expected = Engine::build(three.network, three.weights, {.threads = 1})
                              .create_context()
                              .infer({{"x", x}});
  CHECK(relative_error(result.output("y").to_vector(), expected.output("y").to_vector()) <= 1e-6);

  OnnxBuilder wide;
  wide.input("x", {1, 8});
  wide.graph()
      .mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_param("F");
  wide.node("Relu", {"x"}, {"y"}, "relu");
  wide.output("y");
  std::ofstream(path, std::ios::binary) << wide.bytes();
  CHECK(error_message([&] {
          build_onnx_buckets(path, {1, 2});
        }) ==
        fmt::format("{}: input 'x' has a dynamic dimension 1 besides the batch; give its shape in "
                    "OnnxImportOptions::input_shapes",
                    path.string()));
  const BucketedEngine given =
      build_onnx_buckets(path, {1, 2}, {.threads = 1}, {.input_shapes = {{"x", Shape{7, 5}}}});
  CHECK(given.engine(2).inputs()[0].shape == Shape{2, 5});
  std::filesystem::remove(path);
}
