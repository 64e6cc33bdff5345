// Batch buckets: a batch of n runs on the smallest bucket that holds it, padded with copies of
// its last sample, and returns the n real rows: the same numbers and exit reports as each
// sample run on its own.
#include <doctest/doctest.h>

#include <algorithm>

#include <cgr/batch_buckets.hpp>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18_exits.hpp"
#include "test_support.hpp"

using namespace cgr;
using cgr::test::error_message;
using cgr::test::random_vector;
using cgr::test::relative_error;

namespace {

constexpr std::int64_t kSize = 32, kClasses = 10, kSample = 3 * kSize * kSize;

Network exits_network(std::int64_t batch) {
  return models::resnet18_exits(batch, kSize, kClasses);
}

}  // namespace

TEST_CASE("batch buckets: n samples on the next bucket up equal each sample run alone") {
  const Weights weights = models::random_weights(exits_network(1), 7);
  const EngineOptions options{.threads = 2, .exits = ExitPolicy::all};
  const BucketedEngine engine = BucketedEngine::build(exits_network, weights, {4, 1, 2}, options);
  CHECK(engine.buckets() == std::vector<std::int64_t>{1, 2, 4});
  CHECK(engine.bucket_for(3) == 4);
  CHECK(engine.sample_inputs()[0].shape == Shape{3, kSize, kSize});
  BucketedContext ctx = engine.create_context();

  const Engine single = Engine::build(exits_network(1), weights, options);
  ExecutionContext alone = single.create_context();
  for (const std::int64_t n : {1, 2, 3}) {
    CAPTURE(n);
    const auto images =
        random_vector(static_cast<std::size_t>(n * kSample), 40 + static_cast<int>(n));
    const Tensor batch(Shape{n, 3, kSize, kSize}, images);
    const Result result = ctx.infer({{"image", batch}});
    CHECK(ctx.last_bucket() == engine.bucket_for(n));
    REQUIRE(result.output("final").shape() == Shape{n, kClasses});
    REQUIRE(result.exits.size() == 3);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::vector<float> image(images.begin() + i * kSample,
                                     images.begin() + (i + 1) * kSample);
      const Result one = alone.infer({{"image", image}});
      for (const auto& [name, tensor] : one.outputs) {
        CAPTURE(name);
        const auto all = result.output(name).to_vector();
        const std::vector<float> row(all.begin() + i * kClasses, all.begin() + (i + 1) * kClasses);
        CHECK(relative_error(row, tensor.to_vector()) <= 1e-5);
      }
      for (std::size_t e = 0; e < one.exits.size(); ++e) {
        REQUIRE(result.exits[e].confidence.size() == static_cast<std::size_t>(n));
        CHECK(result.exits[e].confidence[static_cast<std::size_t>(i)] ==
              doctest::Approx(one.exits[e].confidence[0]).epsilon(1e-5));
        CHECK(result.exits[e].top1[static_cast<std::size_t>(i)] == one.exits[e].top1[0]);
      }
    }
  }
}

TEST_CASE("batch buckets: padding never changes an exit's decision") {
  // Six samples' exit0 confidences, alone; the threshold splits the three most confident from
  // the rest. Three confident samples on bucket 4 fire (zeros as padding might not), and a
  // batch with one unconfident sample does not.
  const Weights weights = models::random_weights(exits_network(1), 7);
  const auto images = random_vector(static_cast<std::size_t>(6 * kSample), 50);
  const auto sample = [&](std::size_t i) {
    return std::vector<float>(images.begin() + static_cast<std::ptrdiff_t>(i) * kSample,
                              images.begin() + static_cast<std::ptrdiff_t>(i + 1) * kSample);
  };
  const Engine single =
      Engine::build(exits_network(1), weights, {.threads = 2, .exits = ExitPolicy::all});
  ExecutionContext alone = single.create_context();
  std::vector<std::pair<float, std::size_t>> confidence;
  for (std::size_t i = 0; i < 6; ++i)
    confidence.emplace_back(alone.infer({{"image", sample(i)}}).exits[0].confidence[0], i);
  std::sort(confidence.rbegin(), confidence.rend());
  REQUIRE(confidence[2].first > confidence[3].first);
  const float threshold = (confidence[2].first + confidence[3].first) / 2;

  const BucketedEngine engine =
      BucketedEngine::build(exits_network, weights, {1, 4},
                            {.threads = 2, .exits = ExitPolicy::early, .threshold = threshold});
  BucketedContext ctx = engine.create_context();
  const auto batch_of = [&](std::initializer_list<std::size_t> picks) {
    std::vector<float> data;
    for (std::size_t pick : picks) {
      const auto one = sample(confidence[pick].second);
      data.insert(data.end(), one.begin(), one.end());
    }
    return Tensor(Shape{static_cast<std::int64_t>(picks.size()), 3, kSize, kSize}, data);
  };
  const Result confident = ctx.infer({{"image", batch_of({0, 1, 2})}});
  CHECK(ctx.last_bucket() == 4);
  CHECK(confident.exits[0].fired);
  CHECK(confident.answered_by == "exit0");
  CHECK_FALSE(confident.outputs.contains("final"));
  CHECK(confident.output("exit0").shape() == Shape{3, kClasses});
  const Result mixed = ctx.infer({{"image", batch_of({0, 1, 5})}});
  CHECK_FALSE(mixed.exits[0].fired);
  CHECK(mixed.answered_by != "exit0");
}

TEST_CASE("batch buckets: sizes, shapes and mismatched engines are refused by name") {
  const Weights weights = models::random_weights(exits_network(1), 7);
  CHECK(error_message([&] { BucketedEngine::sorted_buckets({}); }) ==
        "batch buckets: the list is empty; give at least one batch size");
  CHECK(error_message([&] {
          BucketedEngine::sorted_buckets({2, 0});
        }) == "batch buckets: 0 is not a batch size (at least 1)");
  CHECK(error_message([&] {
          BucketedEngine::sorted_buckets({2, 1, 2});
        }) == "batch buckets: [1, 2, 2] lists a size twice");
  const BucketedEngine engine =
      BucketedEngine::build(exits_network, weights, {1, 2}, {.threads = 1});
  BucketedContext ctx = engine.create_context();
  const auto three = random_vector(static_cast<std::size_t>(3 * kSample), 60);
  CHECK(error_message([&] {
          ctx.infer({{"image", Tensor(Shape{3, 3, kSize, kSize}, three)}});
        }) == "a batch of 3 is larger than the largest bucket (2; buckets: 1, 2)");
  CHECK(error_message([&] {
          ctx.infer({{"image", Tensor(Shape{1, 3, kSize, 8}, std::vector<float>(3 * kSize * 8))}});
        }) == "input 'image' has shape 1x3x32x8, expected n x 3x32x32 (n from 1 to 2)");
  CHECK(error_message([&] {
          ctx.infer({{"image", std::vector<float>(kSample + 5)}});
        }) == "input 'image' has 3077 elements, not a whole number of samples of 3072 (3x32x32)");
  CHECK(error_message([&] { ctx.infer({{"x", three}}); }) == "no input named 'x' (inputs: image)");
  // The context is still usable after the errors; a view without a shape counts samples.
  CHECK(ctx.infer({{"image", std::vector<float>(three.begin(), three.begin() + 2 * kSample)}})
            .output("final")
            .shape() == Shape{2, kClasses});

  // Engines that do not lead with their bucket, or disagree on the other dims.
  std::vector<Engine> wrong;
  wrong.push_back(Engine::build(exits_network(1), weights, {.threads = 1}));
  wrong.push_back(Engine::build(exits_network(1), weights, {.threads = 1}));
  CHECK(error_message([&] {
          BucketedEngine::from_engines({1, 2}, std::move(wrong));
        }) == "batch bucket 2: input 'image' has shape 1x3x32x32; it must lead with the batch (2)");
  std::vector<Engine> sizes;
  sizes.push_back(Engine::build(exits_network(1), weights, {.threads = 1}));
  sizes.push_back(Engine::build(models::resnet18_exits(2, 64, kClasses), weights, {.threads = 1}));
  CHECK(error_message([&] {
          BucketedEngine::from_engines({1, 2}, std::move(sizes));
        }).starts_with("batch bucket 2: inputs image [n x 3x64x64]"));
}
