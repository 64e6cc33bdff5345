// Helpers shared by the test suites: seeded data, single-layer engines, error matching.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <cgr/engine.hpp>

namespace cgr::test {

inline std::vector<float> random_vector(std::size_t count, unsigned seed, float low = -1.0f,
                                        float high = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(count);
  for (auto& v : values) v = dist(rng);
  return values;
}

inline Tensor random_tensor(const Shape& shape, unsigned seed, float low = -1.0f,
                            float high = 1.0f) {
  return Tensor(shape, random_vector(static_cast<std::size_t>(shape.numel()), seed, low, high));
}

// max |a - b| / max(max |b|, tiny): the relative error measure of the conformance figures.
// A NaN where the reference has none (an unwritten, NaN-poisoned element) or the reverse is an
// infinite error: std::max would silently drop it.
inline double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  REQUIRE(actual.size() == expected.size());
  double max_diff = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(actual[i]) != std::isnan(expected[i])) return std::numeric_limits<double>::infinity();
    if (std::isnan(actual[i])) continue;
    max_diff = std::max(max_diff, std::abs(double{actual[i]} - double{expected[i]}));
    max_ref = std::max(max_ref, std::abs(double{expected[i]}));
  }
  return max_diff / std::max(max_ref, 1e-30);
}

// Builds a one-input network with `build`, compiles it and runs it on `input`.
inline std::vector<float> run_network(
    const Shape& input_shape, const std::vector<float>& input,
    const std::function<Value(Network&, Value)>& build, const Weights& weights = {},
    EngineOptions options = {.threads = 2}) {
  Network net;
  const Value x = net.input("x", input_shape);
  net.output("y", build(net, x));
  const Engine engine = Engine::build(net, weights, options);
  ExecutionContext ctx = engine.create_context();
  const Result result = ctx.infer({{"x", TensorView(input)}});
  const auto out = result.output("y").f32();
  return {out.begin(), out.end()};
}

// The message of the Error `action` throws ("" when it throws nothing).
inline std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Same shape, dtype and bytes (NaN payloads included).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.bytes().size() == b.bytes().size() &&
         std::equal(a.bytes().begin(), a.bytes().end(), b.bytes().begin());
}

// An f16 tensor from raw bit patterns, and back.
inline Tensor f16_tensor(Shape shape, const std::vector<std::uint16_t>& bits) {
  Tensor t(std::move(shape), DType::f16);
  REQUIRE(t.bytes().size() == bits.size() * 2);
  std::memcpy(t.bytes().data(), bits.data(), t.bytes().size());
  return t;
}

inline std::vector<std::uint16_t> f16_bits(const Tensor& t) {
  std::vector<std::uint16_t> bits(t.bytes().size() / 2);
  std::memcpy(bits.data(), t.bytes().data(), t.bytes().size());
  return bits;
}

// A unique directory under the system temp directory, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "cgr-test") {
    std::random_device random;
    path = std::filesystem::temp_directory_path() /
           (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(random()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace cgr::test
