// Batch buckets: validation of the per-bucket engines, and padding a batch of n up to its
// bucket with copies of the last sample, then cutting the results back to n rows.
#include "cgr/batch_buckets.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "cgr/error.hpp"

namespace cgr {
namespace {

// `descs` without their leading (batch) dim, after checking that it is `bucket`.
std::vector<TensorDesc> per_sample(const std::vector<TensorDesc>& descs, std::int64_t bucket,
                                   const char* what) {
  std::vector<TensorDesc> samples;
  for (const TensorDesc& d : descs) {
    if (d.dtype != DType::f32) {
      fail("batch bucket {}: {} '{}' is {}; buckets take f32 tensors", bucket, what, d.name,
           to_string(d.dtype));
    }
    if (d.shape.rank() == 0 || d.shape[0] != bucket) {
      fail("batch bucket {}: {} '{}' has shape {}; it must lead with the batch ({})", bucket, what,
           d.name, d.shape.to_string(), bucket);
    }
    std::vector<std::int64_t> dims(d.shape.dims().begin() + 1, d.shape.dims().end());
    samples.push_back({d.name, Shape(std::move(dims)), d.dtype});
  }
  return samples;
}

std::string describe(const std::vector<TensorDesc>& descs) {
  std::vector<std::string> parts;
  for (const TensorDesc& d : descs)
    parts.push_back(fmt::format("{} [n x {}]", d.name, d.shape.to_string()));
  return fmt::format("{}", fmt::join(parts, ", "));
}

bool same(const std::vector<TensorDesc>& a, const std::vector<TensorDesc>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const TensorDesc& x, const TensorDesc& y) {
                      return x.name == y.name && x.shape == y.shape;
                    });
}

}  // namespace

std::vector<std::int64_t> BucketedEngine::sorted_buckets(std::vector<std::int64_t> buckets) {
  if (buckets.empty()) fail("batch buckets: the list is empty; give at least one batch size");
  std::sort(buckets.begin(), buckets.end());
  if (buckets.front() < 1)
    fail("batch buckets: {} is not a batch size (at least 1)", buckets.front());
  if (std::adjacent_find(buckets.begin(), buckets.end()) != buckets.end()) {
    fail("batch buckets: [{}] lists a size twice", fmt::join(buckets, ", "));
  }
  return buckets;
}

BucketedEngine BucketedEngine::build(const NetworkForBatch& make_network, const Weights& weights,
                                     std::vector<std::int64_t> buckets,
                                     const EngineOptions& options) {
  buckets = sorted_buckets(std::move(buckets));
  std::vector<Engine> engines;
  for (std::int64_t b : buckets)
    engines.push_back(Engine::build(make_network(b), weights, options));
  return from_engines(std::move(buckets), std::move(engines));
}

BucketedEngine BucketedEngine::from_engines(std::vector<std::int64_t> buckets,
                                            std::vector<Engine> engines) {
  if (buckets.size() != engines.size()) {
    fail("batch buckets: {} sizes for {} engines", buckets.size(), engines.size());
  }
  // Sort the engines with their buckets.
  std::vector<std::size_t> order(buckets.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return buckets[a] < buckets[b]; });
  BucketedEngine result;
  for (std::size_t i : order) {
    result.buckets_.push_back(buckets[i]);
    result.engines_.push_back(std::move(engines[i]));
  }
  result.buckets_ = sorted_buckets(result.buckets_);
  for (std::size_t k = 0; k < result.engines_.size(); ++k) {
    const std::int64_t b = result.buckets_[k];
    const Engine& e = result.engines_[k];
    auto inputs = per_sample(e.inputs(), b, "input");
    auto outputs = per_sample(e.outputs(), b, "output");
    if (k == 0) {
      result.sample_inputs_ = std::move(inputs);
      result.sample_outputs_ = std::move(outputs);
    } else if (!same(inputs, result.sample_inputs_) || !same(outputs, result.sample_outputs_)) {
      fail(
          "batch bucket {}: inputs {} and outputs {} differ from bucket {}'s inputs {} and outputs "
          "{}",
          b, describe(inputs), describe(outputs), result.buckets_[0],
          describe(result.sample_inputs_), describe(result.sample_outputs_));
    }
  }
  return result;
}

std::int64_t BucketedEngine::bucket_for(const std::vector<std::int64_t>& buckets,
                                        std::int64_t batch) {
  if (batch < 1) fail("a batch of {} samples: at least 1 is needed", batch);
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), batch);
  if (it == buckets.end()) {
    fail("a batch of {} is larger than the largest bucket ({}; buckets: {})", batch, buckets.back(),
         fmt::join(buckets, ", "));
  }
  return *it;
}

std::int64_t BucketedEngine::bucket_for(std::int64_t batch) const {
  return bucket_for(buckets_, batch);
}

const Engine& BucketedEngine::engine(std::int64_t bucket) const {
  const auto it = std::find(buckets_.begin(), buckets_.end(), bucket);
  if (it == buckets_.end())
    fail("no batch bucket {} (buckets: {})", bucket, fmt::join(buckets_, ", "));
  return engines_[static_cast<std::size_t>(it - buckets_.begin())];
}

BucketedContext BucketedEngine::create_context() const {
  return BucketedContext(*this);
}

BucketedContext::BucketedContext(const BucketedEngine& engine)
    : buckets_(engine.buckets()), sample_inputs_(engine.sample_inputs()) {
  for (std::int64_t b : buckets_)
    contexts_.push_back(engine.engine(b).create_context());
  padded_.resize(sample_inputs_.size());
}

Result BucketedContext::infer(const NamedInputs& inputs) {
  // The batch: from the first input with a shape, else from the element count; every input
  // must agree. Checked before anything runs.
  std::int64_t batch = -1;
  std::string batch_from;
  std::vector<int> given(sample_inputs_.size(), -1);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const std::string& name = inputs[k].first;
    const TensorView& view = inputs[k].second;
    const auto it = std::find_if(sample_inputs_.begin(), sample_inputs_.end(),
                                 [&](const TensorDesc& d) { return d.name == name; });
    if (it == sample_inputs_.end()) {
      std::vector<std::string> names;
      for (const TensorDesc& d : sample_inputs_)
        names.push_back(d.name);
      fail("no input named '{}' (inputs: {})", name, fmt::join(names, ", "));
    }
    const auto index = static_cast<std::size_t>(it - sample_inputs_.begin());
    if (given[index] >= 0) fail("input '{}' is given twice", name);
    given[index] = static_cast<int>(k);
    if (view.dtype != DType::f32)
      fail("input '{}' is {} but the network expects f32", name, to_string(view.dtype));
    const std::int64_t sample = it->shape.numel();
    std::int64_t n = -1;
    if (view.shape_known) {
      const bool rest_matches =
          !view.dims.empty() && std::equal(view.dims.begin() + 1, view.dims.end(),
                                           it->shape.dims().begin(), it->shape.dims().end());
      if (!rest_matches) {
        fail("input '{}' has shape {}, expected n x {} (n from 1 to {})", name,
             Shape(std::vector<std::int64_t>(view.dims.begin(), view.dims.end())).to_string(),
             it->shape.to_string(), buckets_.back());
      }
      n = view.dims[0];
    } else {
      if (sample == 0 || view.count % static_cast<std::size_t>(sample) != 0) {
        fail("input '{}' has {} elements, not a whole number of samples of {} ({})", name,
             view.count, sample, it->shape.to_string());
      }
      n = static_cast<std::int64_t>(view.count) / sample;
    }
    if (batch < 0) {
      batch = n;
      batch_from = name;
    } else if (n != batch) {
      fail("input '{}' holds {} samples but '{}' holds {}: every input needs the same batch", name,
           n, batch_from, batch);
    }
    if (view.data == nullptr && view.count > 0) fail("input '{}' points to no data", name);
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] < 0)
      fail("input '{}' (n x {}) is missing", sample_inputs_[i].name,
           sample_inputs_[i].shape.to_string());
  }
  const std::int64_t bucket = BucketedEngine::bucket_for(buckets_, batch);
  const auto slot = static_cast<std::size_t>(std::find(buckets_.begin(), buckets_.end(), bucket) -
                                             buckets_.begin());

  NamedInputs padded_inputs;
  for (std::size_t i = 0; i < given.size(); ++i) {
    const TensorView& view = inputs[static_cast<std::size_t>(given[i])].second;
    const auto sample = static_cast<std::size_t>(sample_inputs_[i].shape.numel());
    const auto* data = static_cast<const float*>(view.data);
    if (bucket == batch) {
      padded_inputs.emplace_back(sample_inputs_[i].name, TensorView(DType::f32, data, view.count));
      continue;
    }
    std::vector<float>& copy = padded_[i];
    copy.resize(sample * static_cast<std::size_t>(bucket));
    std::memcpy(copy.data(), data, view.count * sizeof(float));
    const float* last = data + (static_cast<std::size_t>(batch) - 1) * sample;
    for (auto row = static_cast<std::size_t>(batch); row < static_cast<std::size_t>(bucket); ++row)
      std::memcpy(copy.data() + row * sample, last, sample * sizeof(float));
    padded_inputs.emplace_back(sample_inputs_[i].name,
                               TensorView(DType::f32, copy.data(), copy.size()));
  }
  Result result = contexts_[slot].infer(padded_inputs);
  last_bucket_ = bucket;
  if (bucket == batch) return result;
  // Back to the n real rows (every output leads with the batch; exit logits are N x classes).
  for (auto& [name, tensor] : result.outputs) {
    std::vector<std::int64_t> dims = tensor.shape().dims();
    dims[0] = batch;
    Tensor cut(Shape(std::move(dims)), DType::f32);
    if (!cut.bytes().empty())
      std::memcpy(cut.bytes().data(), tensor.bytes().data(), cut.bytes().size());
    tensor = std::move(cut);
  }
  for (ExitReport& report : result.exits) {
    if (report.confidence.size() > static_cast<std::size_t>(batch))
      report.confidence.resize(static_cast<std::size_t>(batch));
    if (report.top1.size() > static_cast<std::size_t>(batch))
      report.top1.resize(static_cast<std::size_t>(batch));
  }
  // non_finite_outputs may name an output whose NaN sits in a padded row only: a copy of the
  // last real row, so that row has it too.
  return result;
}

}  // namespace cgr
