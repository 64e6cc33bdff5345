// Whole models at their real size on the GPU against the CPU executor: GoogLeNet, the
// inception module and ResNet-18 with exits at 224 in every mode and exit policy, the
// device-resident path in early mode, and 1000 GoogLeNet replays with fresh inputs. fp32 with
// TF32 off: relative error <= 1e-4 of the largest reference value. Skips without a device.
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "../test_support.hpp"
#include "cgr/capture/cuda_check.hpp"
#include "cgr/models/googlenet.hpp"
#include "cgr/models/inception.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"

using namespace cgr;

namespace {

const bool no_device = !cgr::cuda_unavailable_reason().empty();
constexpr Mode kCudaModes[] = {Mode::dag, Mode::stream_graph, Mode::eager};
constexpr double kTolerance = 1e-4;

// The CPU executor's result with every core the machine has.
Result cpu_result(const Network& net, const Weights& w, const std::string& input,
                  const std::vector<float>& x, ExitPolicy exits = ExitPolicy::off,
                  float threshold = 0.9f) {
  return Engine::build(net, w, {.exits = exits, .threshold = threshold})
      .create_context()
      .infer({{input, x}});
}

std::vector<float> input_of(const Network& net, unsigned seed) {
  return test::random_vector(static_cast<std::size_t>(net.desc(net.inputs().front()).shape.numel()),
                             seed);
}

}  // namespace

TEST_SUITE_BEGIN("models");

TEST_CASE("CUDA GoogLeNet and the inception module at full size match the CPU in every mode" *
          doctest::skip(no_device)) {
  struct Model {
    std::string what;
    Network net;
    std::string input, output;
  };
  std::vector<Model> models;
  models.push_back({"googlenet 224", models::googlenet(1, 224, 1000), "image", "logits"});
  models.push_back({"inception3a 28", models::inception_module(), "x", "out"});
  for (const Model& m : models) {
    CAPTURE(m.what);
    const Weights w = models::random_weights(m.net, 41);
    const auto x = input_of(m.net, 42);
    const auto reference = cpu_result(m.net, w, m.input, x).output(m.output).to_vector();
    for (Mode mode : kCudaModes) {
      CAPTURE(to_string(mode));
      const Engine engine = Engine::build(m.net, w, {.device = Device::cuda, .mode = mode});
      ExecutionContext ctx = engine.create_context();
      const auto y = ctx.infer({{m.input, x}}).output(m.output).to_vector();
      const double error = test::relative_error(y, reference);
      MESSAGE(m.what << " " << to_string(mode) << ": relative error " << error);
      CHECK(error < kTolerance);
      CHECK(ctx.infer({{m.input, x}}).output(m.output).to_vector() == y);  // replays agree
    }
  }
}

TEST_CASE("CUDA ResNet-18 with exits at 224: every mode and exit policy against the CPU" *
          doctest::skip(no_device)) {
  const Network net = models::resnet18_exits(1, 224, 1000);
  const Weights w = models::random_weights(net, 43);
  const auto x = input_of(net, 44);
  const Result cpu_all = cpu_result(net, w, "image", x, ExitPolicy::all);
  const std::vector<std::string> names = {"exit0", "exit1", "exit2", "final"};
  for (Mode mode : kCudaModes) {
    CAPTURE(to_string(mode));
    // off: the heads pruned, final only.
    const Result off =
        Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::off})
            .create_context()
            .infer({{"image", x}});
    CHECK(off.outputs.count("exit0") == 0);
    CHECK(test::relative_error(off.output("final").to_vector(),
                               cpu_all.output("final").to_vector()) < kTolerance);
    // all: every head and the backbone.
    const Result all =
        Engine::build(net, w, {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::all})
            .create_context()
            .infer({{"image", x}});
    for (const auto& name : names) {
      CAPTURE(name);
      CHECK(test::relative_error(all.output(name).to_vector(), cpu_all.output(name).to_vector()) <
            kTolerance);
    }
    // early, thresholds from this GPU run's confidences: each exit in turn fires (or an earlier,
    // at least as confident one does), and none at threshold 1.
    std::vector<float> thresholds = {1.0f};
    for (const auto& e : all.exits)
      thresholds.push_back(e.confidence[0] * (1.0f - 1e-5f));
    for (const float threshold : thresholds) {
      CAPTURE(threshold);
      std::string expected = "final";
      for (std::size_t k = 0; k < all.exits.size(); ++k) {
        if (all.exits[k].confidence[0] >= threshold) {
          expected = "exit" + std::to_string(k);
          break;
        }
      }
      const Engine early = Engine::build(net, w,
                                         {.device = Device::cuda,
                                          .mode = mode,
                                          .exits = ExitPolicy::early,
                                          .threshold = threshold});
      const Result r = early.create_context().infer({{"image", x}});
      CHECK(r.answered_by == expected);
      CHECK(test::relative_error(r.output(expected).to_vector(),
                                 cpu_all.output(expected).to_vector()) < kTolerance);
    }
  }
}

TEST_CASE(
    "CUDA device-resident path in early mode: the exit's answer in place, nothing gated written" *
    doctest::skip(no_device)) {
  const Network net = models::resnet18_exits(1, 224, 1000);
  const Weights w = models::random_weights(net, 45);
  const auto x = input_of(net, 46);
  for (Mode mode : {Mode::dag, Mode::stream_graph}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(
        net, w,
        {.device = Device::cuda, .mode = mode, .exits = ExitPolicy::early, .threshold = 0.0f});
    ExecutionContext ctx = engine.create_context();
    const auto expected = ctx.infer({{"image", x}}).output("exit0").to_vector();
    const std::size_t final_floats = ctx.output_buffer("final").size();
    CGR_CUDA_CHECK(cudaMemset(ctx.device_buffer("exit0"), 0, expected.size() * 4));
    CGR_CUDA_CHECK(cudaMemset(ctx.device_buffer("final"), 0xFF, final_floats * 4));
    CGR_CUDA_CHECK(
        cudaMemcpy(ctx.device_buffer("image"), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    // The memsets and the pageable copy ran on the legacy default stream, which a non-blocking
    // stream does not wait for.
    CGR_CUDA_CHECK(cudaDeviceSynchronize());
    cudaStream_t stream = nullptr;
    CGR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ctx.launch_on_device(stream);
    CGR_CUDA_CHECK(cudaStreamSynchronize(stream));
    CGR_CUDA_CHECK(cudaStreamDestroy(stream));
    std::vector<float> exit0(expected.size()), final(final_floats);
    CGR_CUDA_CHECK(cudaMemcpy(exit0.data(), ctx.device_buffer("exit0"), exit0.size() * 4,
                              cudaMemcpyDeviceToHost));
    CGR_CUDA_CHECK(cudaMemcpy(final.data(), ctx.device_buffer("final"), final.size() * 4,
                              cudaMemcpyDeviceToHost));
    CHECK(exit0 == expected);
    int written = 0;
    for (float v : final)
      written += v == v ? 1 : 0;  // the 0xFF poison is NaN
    CHECK(written == 0);
  }
}

TEST_CASE("CUDA GoogLeNet: 1000 replays with fresh inputs match eager, and the CPU every 100th" *
          doctest::skip(no_device)) {
  const Network net = models::googlenet(1, 224, 1000);
  const Weights w = models::random_weights(net, 47);
  const Engine cpu = Engine::build(net, w, {});
  ExecutionContext cpu_ctx = cpu.create_context();
  for (Mode mode : {Mode::dag, Mode::stream_graph}) {
    CAPTURE(to_string(mode));
    const Engine engine = Engine::build(net, w, {.device = Device::cuda, .mode = mode});
    const Engine eager = Engine::build(net, w, {.device = Device::cuda, .mode = Mode::eager});
    ExecutionContext replayed = engine.create_context();
    ExecutionContext one_by_one = eager.create_context();
    int different = 0, bit_different = 0, against_cpu = 0;
    double worst = 0.0;
    for (int i = 0; i < 1000; ++i) {
      const auto x = test::random_vector(3 * 224 * 224, 5000u + static_cast<unsigned>(i));
      const auto y = replayed.infer({{"image", x}}).output("logits").to_vector();
      // The same kernels one by one: the graph must not change the answer.
      const auto by_eager = one_by_one.infer({{"image", x}}).output("logits").to_vector();
      if (test::relative_error(y, by_eager) > 1e-6) ++different;
      if (y != by_eager) ++bit_different;
      if (i % 100 == 0) {
        const double error =
            test::relative_error(y, cpu_ctx.infer({{"image", x}}).output("logits").to_vector());
        worst = std::max(worst, error);
        against_cpu += error < kTolerance ? 1 : 0;
      }
    }
    MESSAGE(to_string(mode) << ": worst relative error against the CPU " << worst << ", "
                            << bit_different << " of 1000 not bit-identical to eager");
    CHECK(different == 0);
    CHECK(against_cpu == 10);
  }
}

TEST_SUITE_END();
