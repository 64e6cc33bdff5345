// Batch buckets: one engine per batch size of a list (e.g. 1, 2, 4, 8), so the batches a
// dynamic batcher forms (any size up to the largest bucket) replay a graph built ahead of
// time instead of rebuilding for each size: CUDA graphs fix every shape, and TensorRT-LLM and
// vLLM bucket their captured graphs the same way.
//
// A batch of n runs on the smallest bucket b >= n. Rows n..b-1 are copies of the last real
// sample, not zeros: an exit fires only when every sample of the batch is confident, and
// copies of a real sample leave that decision unchanged (each row is computed on its own).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "cgr/engine.hpp"

namespace cgr {

class BucketedContext;

class BucketedEngine {
 public:
  // The network of one bucket: its inputs and outputs lead with `batch`, the other dims the
  // same for every bucket.
  using NetworkForBatch = std::function<Network(std::int64_t batch)>;

  // Builds make_network(b) for each bucket b with the same weights and options. Buckets are
  // sorted and must be distinct and positive.
  static BucketedEngine build(const NetworkForBatch& make_network, const Weights& weights,
                              std::vector<std::int64_t> buckets, const EngineOptions& options = {});
  // From engines built elsewhere (e.g. one ONNX import per bucket): each engine's inputs and
  // outputs must lead with its bucket, and agree with the others on names and on every other
  // dim. Errors name the bucket and the tensor.
  static BucketedEngine from_engines(std::vector<std::int64_t> buckets,
                                     std::vector<Engine> engines);

  // `buckets` sorted; Error when empty, when a size is below 1 or listed twice.
  static std::vector<std::int64_t> sorted_buckets(std::vector<std::int64_t> buckets);

  const std::vector<std::int64_t>& buckets() const { return buckets_; }
  std::int64_t max_batch() const { return buckets_.back(); }
  // The smallest bucket that holds `batch`; Error when it exceeds every bucket or is < 1.
  std::int64_t bucket_for(std::int64_t batch) const;
  static std::int64_t bucket_for(const std::vector<std::int64_t>& buckets, std::int64_t batch);
  const Engine& engine(std::int64_t bucket) const;
  // Per-sample shapes of the inputs and outputs (without the batch dim), by name.
  const std::vector<TensorDesc>& sample_inputs() const { return sample_inputs_; }
  const std::vector<TensorDesc>& sample_outputs() const { return sample_outputs_; }

  BucketedContext create_context() const;

 private:
  BucketedEngine() = default;
  std::vector<std::int64_t> buckets_;
  std::vector<Engine> engines_;
  std::vector<TensorDesc> sample_inputs_, sample_outputs_;
};

// One context per bucket (each with its own arena), one inference at a time: use one per
// thread, as with ExecutionContext.
class BucketedContext {
 public:
  // Every input has the same leading batch n (1 to max_batch()) and the engine's other dims
  // (a view without a shape: n whole samples of elements). Outputs and exit reports hold the
  // n real rows only.
  Result infer(const NamedInputs& inputs);
  // The bucket the last infer() ran on (0 before the first).
  std::int64_t last_bucket() const { return last_bucket_; }

 private:
  friend class BucketedEngine;
  explicit BucketedContext(const BucketedEngine& engine);
  // Copies of the engine's facts: the context outlives it, as ExecutionContext does.
  std::vector<std::int64_t> buckets_;
  std::vector<TensorDesc> sample_inputs_;
  std::vector<ExecutionContext> contexts_;
  std::int64_t last_bucket_ = 0;
  std::vector<std::vector<float>> padded_;  // per input: the bucket-sized copy, reused
};

}  // namespace cgr
