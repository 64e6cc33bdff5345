// The CPU pooling kernel's paths against each other: 16 planes in the lanes of a vector
// (AVX-512), the flat run over stride phases and a channels-last input pooled in place must
// give the same bits, NaN, Inf and -0 included (the layer-level cases in layer_cases.cpp check
// both pools against PyTorch).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cgr/error.hpp"
#include "cgr/layers/pool2d.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"
#include "cpu/pool_cpu.hpp"

namespace {

namespace gemm = cgr::cpu::gemm;

// Restores the real micro-kernel choice when a test ends, passing or not.
struct KernelOverride {
  explicit KernelOverride(const gemm::MicroKernel* kernel) { gemm::set_kernel_override(kernel); }
  ~KernelOverride() { gemm::set_kernel_override(nullptr); }
  KernelOverride(const KernelOverride&) = delete;
  KernelOverride& operator=(const KernelOverride&) = delete;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct PoolCase {
  std::string name;
  cgr::Shape shape;
  cgr::Pool2dParams params;
};

}  // namespace

TEST_CASE("pool cpu: planes in lanes give the flat path's bits for max and average") {
  const gemm::MicroKernel* avx512 = nullptr;
  const gemm::MicroKernel* other = nullptr;
  for (const gemm::MicroKernel* kernel : gemm::supported_kernels()) {
    if (std::string(kernel->name) == "avx512") {
      avx512 = kernel;
    } else if (other == nullptr) {
      other = kernel;
    }
  }
  if (avx512 == nullptr || other == nullptr) {
    MESSAGE("skipped: this CPU lacks AVX-512");
    return;
  }
  const std::vector<PoolCase> cases = {
      {"3x3/2 pad 1 (ResNet's max pool), 16 planes",
       {1, 16, 23, 23},
       {.kernel = 3, .stride = 2, .padding = 1}},
      {"3x3/1 pad 1 ceil, 3 blocks and a partial one",
       {1, 37, 7, 7},
       {.kernel = 3, .stride = 1, .padding = 1, .ceil_mode = true}},
      {"3x3/2 ceil, batch 2", {2, 20, 15, 14}, {.kernel = 3, .stride = 2, .ceil_mode = true}},
      {"2x2 dilation 2 ceil",
       {1, 18, 12, 17},
       {.kernel = 2, .stride = 2, .dilation = 2, .ceil_mode = true}},
      {"3x5/(2,3) asymmetric padding",
       {1, 5, 30, 41},
       {.kernel = {3, 5}, .stride = {2, 3}, .padding = {1, 2, 0, 1}}},
      {"wide rows (80)", {1, 17, 6, 80}, {.kernel = 3, .stride = 1, .padding = 1}},
      {"2x2/2 on 5x7: the last row and column read by no window",
       {1, 21, 5, 7},
       {.kernel = 2, .stride = 2}},
      {"1x1/3: two of three rows and columns skipped", {1, 16, 10, 11}, {.kernel = 1, .stride = 3}},
      {"1 x L (a 1-D pool)",
       {1, 9, 1, 50},
       {.kernel = {1, 3}, .stride = {1, 2}, .padding = {0, 1}}},
      {"3x3/2 ceil on 64 channels (four blocks at once channels-last)",
       {1, 64, 13, 13},
       {.kernel = 3, .stride = 2, .ceil_mode = true}},
      {"3x3/1 pad 1, batch 2, 80 channels (four blocks and one)",
       {2, 80, 8, 9},
       {.kernel = 3, .stride = 1, .padding = 1}},
      {"9x9 pad 4: 81 taps (the channels-last path's unlisted loop)",
       {1, 70, 12, 11},
       {.kernel = 9, .stride = 2, .padding = 4}},
  };
  {
    // Planes whose padded copy passes lanes::kMaxPaddedFloats stay with the flat path.
    KernelOverride override_kernel(avx512);
    const cgr::Pool2dGeometry big = cgr::pool2d_geometry(
        "MaxPool2d", "pool", {"x", cgr::Shape{1, 16, 400, 400}}, {.kernel = 3, .stride = 2});
    cgr::cpu::PoolKernelCpu flat_only(big, cgr::cpu::PoolKind::max);
    CHECK_FALSE(flat_only.channel_lanes());
    // Nor can they take a channels-last input: refused by name.
    CHECK_FALSE(flat_only.can_read_channels_last());
    CHECK_THROWS_WITH_AS(flat_only.set_channels_last_input(16),
                         doctest::Contains("a channels-last input needs the lane path"),
                         cgr::Error);
  }
  cgr::ThreadPool pool(2);
  std::uint32_t seed = 900;
  for (const PoolCase& test : cases) {
    std::vector<float> input(static_cast<std::size_t>(test.shape.numel()));
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : input)
      v = dist(rng);
    input[2] = std::numeric_limits<float>::quiet_NaN();
    input[input.size() / 3] = std::numeric_limits<float>::infinity();
    input[input.size() - 2] = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 7; i < input.size(); i += 11)
      input[i] = -0.0f;
    for (const auto kind : {cgr::cpu::PoolKind::max, cgr::cpu::PoolKind::average}) {
      for (const bool include_pad : {true, false}) {
        if (kind == cgr::cpu::PoolKind::max && !include_pad) continue;
        cgr::Pool2dParams params = test.params;
        params.count_include_pad = include_pad;
        if (kind == cgr::cpu::PoolKind::average) params.dilation = 1;
        const cgr::Pool2dGeometry g =
            cgr::pool2d_geometry(kind == cgr::cpu::PoolKind::max ? "MaxPool2d" : "AvgPool2d",
                                 "pool", {"x", test.shape}, params);
        INFO(test.name << (kind == cgr::cpu::PoolKind::max ? " / max" : " / average")
                       << (include_pad ? "" : " without padding"));
        const auto outputs = static_cast<std::size_t>(g.planes * g.out_h * g.out_w);
        std::vector<float> flat(outputs, 1234.5f);
        std::vector<float> lanes(outputs, -1234.5f);
        {
          KernelOverride override_kernel(other);
          const cgr::cpu::PoolKernelCpu kernel(g, kind);
          CHECK_FALSE(kernel.channel_lanes());
          kernel.run(input.data(), flat.data(), pool);
        }
        {
          KernelOverride override_kernel(avx512);
          const cgr::cpu::PoolKernelCpu kernel(g, kind);
          REQUIRE(kernel.channel_lanes());
          kernel.run(input.data(), lanes.data(), pool);
        }
        CHECK(same_bits(flat, lanes));
        {
          // The same images channels-last (NHWC), pooled in place; the output NCHW.
          KernelOverride override_kernel(avx512);
          const std::int64_t n = test.shape[0], c = test.shape[1];
          const std::int64_t points = test.shape[2] * test.shape[3];
          std::vector<float> nhwc(input.size());
          for (std::int64_t i = 0; i < n; ++i) {
            for (std::int64_t ch = 0; ch < c; ++ch) {
              for (std::int64_t q = 0; q < points; ++q) {
                nhwc[static_cast<std::size_t>((i * points + q) * c + ch)] =
                    input[static_cast<std::size_t>((i * c + ch) * points + q)];
              }
            }
          }
          cgr::cpu::PoolKernelCpu kernel(g, kind);
          REQUIRE(kernel.can_read_channels_last());
          kernel.set_channels_last_input(c);
          std::vector<float> from_nhwc(outputs, 4321.5f);
          kernel.run(nhwc.data(), from_nhwc.data(), pool);
          CHECK(same_bits(flat, from_nhwc));
          // And written NHWC: each output point's channels in place, the same bits.
          // And written NHWC, from either input layout: the same bits. From NCHW only where
          // each block of 16 planes lies in one image.
          const std::int64_t out_points = g.out_h * g.out_w;
          for (const bool nhwc_in : {true, false}) {
            INFO("NHWC output from an " << (nhwc_in ? "NHWC" : "NCHW") << " input");
            cgr::cpu::PoolKernelCpu both(g, kind);
            const bool blocks_in_images = n == 1 || c % 16 == 0;
            REQUIRE(both.can_write_channels_last(c) == blocks_in_images);
            if (!blocks_in_images) {
              CHECK_THROWS_WITH_AS(both.set_channels_last_output(c),
                                   doctest::Contains("blocks of 16 planes inside one image"),
                                   cgr::Error);
              continue;
            }
            if (nhwc_in) both.set_channels_last_input(c);
            both.set_channels_last_output(c);
            std::vector<float> to_nhwc(outputs, 4321.5f);
            both.run(nhwc_in ? nhwc.data() : input.data(), to_nhwc.data(), pool);
            std::vector<float> back(outputs);
            for (std::int64_t i = 0; i < n; ++i) {
              for (std::int64_t ch = 0; ch < c; ++ch) {
                for (std::int64_t q = 0; q < out_points; ++q) {
                  back[static_cast<std::size_t>((i * c + ch) * out_points + q)] =
                      to_nhwc[static_cast<std::size_t>((i * out_points + q) * c + ch)];
                }
              }
            }
            CHECK(same_bits(flat, back));
          }
        }
      }
    }
  }
}
