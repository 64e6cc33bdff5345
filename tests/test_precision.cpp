// Reduced precision: the roundings (cgr/precision.hpp) against an independent decoding of every
// fp16 value and against hand-checked ties, and EngineOptions::precision on the CPU executor
// (weights, inputs and op outputs rounded; dag == eager bit for bit; errors against fp32 of
// the size the format predicts).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "cgr/engine.hpp"
#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "cgr/precision.hpp"
#include "test_support.hpp"

using namespace cgr;

namespace {

// IEEE half bits -> its value, exactly (every half is a float).
float half_value(std::uint16_t bits) {
  const int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  float magnitude = 0;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  }
  return sign != 0 ? -magnitude : magnitude;
}

}  // namespace

TEST_CASE("fp16 rounding: every half is kept, every midpoint goes to the even neighbour") {
  int checked = 0;
  for (std::uint32_t bits = 0; bits < 0x7c00; ++bits) {  // the finite non-negative halves
    const float value = half_value(static_cast<std::uint16_t>(bits));
    const float next = half_value(static_cast<std::uint16_t>(bits + 1));  // 0x7c00: infinity
    CAPTURE(bits);
    REQUIRE(round_to(Precision::fp16, value) == value);
    REQUIRE(round_to(Precision::fp16, -value) == -value);
    // The midpoint (exact in fp32) goes to the neighbour with the even mantissa; past 65504
    // the midpoint to "65536" overflows to infinity, as the hardware conversion does.
    const float midpoint = bits + 1 == 0x7c00 ? 65520.0f : (value + next) / 2;
    const float even = (bits & 1) == 0 ? value : next;
    REQUIRE(round_to(Precision::fp16, midpoint) == even);
    // Just inside each side of the midpoint.
    REQUIRE(round_to(Precision::fp16, std::nextafter(midpoint, 0.0f)) == value);
    REQUIRE(round_to(Precision::fp16, std::nextafter(midpoint, INFINITY)) == next);
    ++checked;
  }
  CHECK(checked == 0x7c00);
  CHECK(round_to(Precision::fp16, 65504.0f) == 65504.0f);
  CHECK(round_to(Precision::fp16, 1e9f) == INFINITY);
  CHECK(round_to(Precision::fp16, -1e9f) == -INFINITY);
  CHECK(round_to(Precision::fp16, 0x1p-26f) == 0.0f);  // below half of the smallest subnormal
  CHECK(std::signbit(round_to(Precision::fp16, -0x1p-26f)));
  CHECK(std::isnan(round_to(Precision::fp16, std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("bf16 and tf32 rounding: kept bits, ties to even, overflow, NaN") {
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 (even: 1).
  CHECK(round_to(Precision::bf16, 1.0f + 0x1p-8f) == 1.0f);
  CHECK(round_to(Precision::bf16, 1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);  // tie, to even
  CHECK(round_to(Precision::bf16, 1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(round_to(Precision::bf16, 1.0f + 0x1p-7f) == 1.0f + 0x1p-7f);
  CHECK(round_to(Precision::bf16, std::numeric_limits<float>::max()) == INFINITY);
  // A subnormal keeps its top 7 mantissa bits too (bf16 has fp32's subnormals).
  CHECK((std::bit_cast<std::uint32_t>(round_to(Precision::bf16, 1e-40f)) & 0xffffu) == 0);
  CHECK(round_to(Precision::bf16, 1e-40f) == doctest::Approx(1e-40f).epsilon(1e-2));
  // tf32 keeps 10 bits with fp32's exponent: 1e-30 stays about 1e-30, 1e30 stays finite.
  CHECK(round_to(Precision::tf32, 1.0f + 0x1p-11f) == 1.0f);
  CHECK(round_to(Precision::tf32, 1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
  CHECK(round_to(Precision::tf32, 1e30f) == doctest::Approx(1e30f).epsilon(1e-3));
  CHECK(round_to(Precision::tf32, 1e-30f) == doctest::Approx(1e-30f).epsilon(1e-3));
  for (const Precision p : {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16}) {
    CAPTURE(to_string(p));
    CHECK(std::isnan(round_to(p, std::numeric_limits<float>::quiet_NaN())));
    CHECK(round_to(p, INFINITY) == INFINITY);
    CHECK(round_to(p, -INFINITY) == -INFINITY);
    CHECK(parse_precision(to_string(p)) == p);
  }
  // Random floats: the result is one of the two neighbours in the format, and the nearer.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> log_magnitude(-20.0f, 20.0f);
  for (int i = 0; i < 10000; ++i) {
    const float value = std::exp2(log_magnitude(rng)) * (i % 2 ? 1.0f : -1.0f);
    const float rounded = round_to(Precision::bf16, value);
    CHECK(std::abs(rounded - value) <= std::abs(value) * 0x1p-8f);
    const float half = round_to(Precision::fp16, value);
    if (std::abs(value) >= 0x1p-14f && std::abs(value) < 65504.0f) {
      CHECK(std::abs(half - value) <= std::abs(value) * 0x1p-11f);
    }
  }
  CHECK_THROWS_WITH_AS(parse_precision("half"),
                       "unknown precision 'half' (expected fp32, tf32, fp16 or bf16)", Error);
}

TEST_CASE(
    "EngineOptions::precision on the CPU: rounded storage, dag == eager, errors as predicted") {
  const Network net = models::resnet18_exits(1, 64, 10);
  const Weights weights = models::random_weights(net, 3);
  const auto image = test::random_vector(3 * 64 * 64, 4);
  auto infer = [&](const EngineOptions& options) {
    return Engine::build(net, weights, options).create_context().infer({{"image", image}});
  };
  const Result reference = infer({.threads = 2});
  for (const auto& [precision, bound] :
       {std::pair{Precision::tf32, 2e-3}, std::pair{Precision::fp16, 2e-3},
        std::pair{Precision::bf16, 2e-2}}) {
    CAPTURE(to_string(precision));
    const Result dag = infer({.threads = 2, .precision = precision});
    const Result eager = infer({.mode = Mode::eager, .threads = 1, .precision = precision});
    for (const char* output : {"final", "exit0", "exit1", "exit2"}) {
      CAPTURE(output);
      const auto values = dag.output(output).to_vector();
      CHECK(values == eager.output(output).to_vector());
      // Every output value is one the precision stores.
      for (const float v : values)
        REQUIRE(round_to(precision, v) == v);
      const double error = test::relative_error(values, reference.output(output).to_vector());
      CHECK(error > 0);  // the rounding happened
      CHECK(error < bound);
    }
  }
  // allow_tf32 is precision tf32.
  const Engine legacy = Engine::build(net, weights, {.threads = 2, .allow_tf32 = true});
  CHECK(legacy.options().precision == Precision::tf32);
  CHECK(legacy.create_context().infer({{"image", image}}).output("final").to_vector() ==
        infer({.threads = 2, .precision = Precision::tf32}).output("final").to_vector());
}
