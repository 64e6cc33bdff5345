// Every layer through the CUDA executor, in all three modes, against the CPU executor: random
// inputs and seeded weights, fp32 with TF32 off, relative error <= 1e-4. Before every run the
// device output buffer is filled with NaN bytes, so an element a kernel fails to write shows
// up as a NaN the reference does not have (relative_error makes that an infinite error).
#include <doctest/doctest.h>

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "../layer_cases.hpp"
#include "../test_support.hpp"
#include "cgr/capture/cuda_check.hpp"
#include "cgr/models/random_weights.hpp"

using namespace cgr;

namespace {

const bool no_device = !cgr::cuda_unavailable_reason().empty();

// Fills the device bytes behind `name` with 0xFF: every float a quiet NaN.
void poison(ExecutionContext& ctx, const std::string& name, std::size_t floats) {
  CGR_CUDA_CHECK(cudaMemset(ctx.device_buffer(name), 0xFF, floats * sizeof(float)));
  CGR_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

TEST_SUITE_BEGIN("layers");

TEST_CASE(
    "CUDA: every layer in dag, stream-graph and eager matches the CPU executor, outputs poisoned" *
    doctest::skip(no_device)) {
  const test::DeviceCopy device_copy = [](std::size_t bytes) {
    return [bytes](void* stream, std::span<const float* const> in, float* out) {
      CGR_CUDA_CHECK(cudaMemcpyAsync(out, in[0], bytes, cudaMemcpyDeviceToDevice,
                                     static_cast<cudaStream_t>(stream)));
    };
  };
  for (const test::LayerCase& c : test::layer_cases(device_copy)) {
    CAPTURE(c.name);
    Network net;
    const Value x = net.input("x", c.input);
    net.output("y", c.build(net, x));
    const Weights weights = models::random_weights(net, 21);
    const auto input = test::random_vector(static_cast<std::size_t>(c.input.numel()), 22);
    const auto second = test::random_vector(static_cast<std::size_t>(c.input.numel()), 23);
    const Engine cpu = Engine::build(net, weights, {.threads = 2, .fuse = c.fuse});
    const auto reference = cpu.create_context().infer({{"x", input}}).output("y").to_vector();
    const auto reference2 = cpu.create_context().infer({{"x", second}}).output("y").to_vector();
    for (Mode mode : {Mode::dag, Mode::stream_graph, Mode::eager}) {
      CAPTURE(to_string(mode));
      const Engine gpu =
          Engine::build(net, weights, {.device = Device::cuda, .mode = mode, .fuse = c.fuse});
      ExecutionContext ctx = gpu.create_context();
      poison(ctx, "y", reference.size());
      CHECK(test::relative_error(ctx.infer({{"x", input}}).output("y").to_vector(), reference) <=
            1e-4);
      // A replay with another input, poisoned again: every element rewritten.
      poison(ctx, "y", reference.size());
      CHECK(test::relative_error(ctx.infer({{"x", second}}).output("y").to_vector(), reference2) <=
            1e-4);
      if (mode != Mode::eager) {
        const CudaGraphReport report = ctx.cuda_graph_report();
        for (const auto& m : report.mismatches)
          MESSAGE(m);
        CHECK(report.mismatches.empty());
      }
    }
  }
}

TEST_SUITE_END();
