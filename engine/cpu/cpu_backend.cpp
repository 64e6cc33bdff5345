// The CPU backend: every layer's own CPU kernel (Layer::make_cpu_kernel, the numerical
// reference of every backend), the engine's exit decision, and one thread pool per engine.
#include "cpu_backend.hpp"

#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <span>
#include <string_view>

#include "cgr/layers/element_math.hpp"

namespace cgr::cpu {
namespace {

// The engine's own op: confidence[n] = the largest softmax probability of logits row n.
class ExitDecisionKernel final : public CpuKernel {
 public:
  ExitDecisionKernel(std::int64_t batch, std::int64_t classes) : batch_(batch), classes_(classes) {}
  void run(const KernelIo& io) const override {
    for (std::int64_t n = 0; n < batch_; ++n) {
      io.output[n] = math::max_softmax_probability(io.inputs[0] + n * classes_, classes_);
    }
  }

 private:
  std::int64_t batch_, classes_;
};

// The layout plan: which values are channels-last (NHWC) instead of NCHW, so that the ops on
// both sides skip their transposes (oneDNN's convolutions compute on NHWC; an NCHW value costs
// each of them a transpose in and one out). A value qualifies where its producer can write it
// so and every op reading it can read it so (CpuKernel), it is 4-D, and it is an op's own
// value: not an input, output or other persistent value, not a view of another value or
// viewed by one, not a slice of a Concat written in place nor such a Concat. Then each kernel
// is told the layout of its inputs and output (an input tied to the output, a residual added
// in place, has the output's). CGR_CPU_CHANNELS_LAST=0 keeps every value NCHW
// (for comparisons). Returns how many values are channels-last.
int plan_channels_last(const detail::CompiledEngine& engine,
                       const std::vector<std::unique_ptr<CpuKernel>>& kernels) {
  if (const char* env = std::getenv("CGR_CPU_CHANNELS_LAST");
      env != nullptr && std::string_view(env) == "0") {
    return 0;
  }
  const std::size_t count = engine.values.size();
  std::vector<bool> shared(count, false);
  for (std::size_t v = 0; v < count; ++v) {
    const detail::EngineValue& value = engine.values[v];
    if (value.alias_of >= 0) shared[v] = shared[static_cast<std::size_t>(value.alias_of)] = true;
    if (!value.parts.empty()) shared[v] = true;
    for (const int part : value.parts)
      shared[static_cast<std::size_t>(part)] = true;
  }
  std::vector<bool> readable(count, true);
  std::vector<bool> read(count, false);
  for (std::size_t op = 0; op < engine.ops.size(); ++op) {
    const auto& inputs = engine.ops[op].inputs;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto v = static_cast<std::size_t>(inputs[i]);
      read[v] = true;
      if (!kernels[op]->can_read_channels_last(i)) readable[v] = false;
    }
  }
  std::vector<bool> channels_last(count, false);
  int result = 0;
  for (std::size_t v = 0; v < count; ++v) {
    const detail::EngineValue& value = engine.values[v];
    if (value.producer < 0 || value.persistent || shared[v] || !read[v] || !readable[v] ||
        value.desc.shape.rank() != 4 ||
        !kernels[static_cast<std::size_t>(value.producer)]->can_write_channels_last()) {
      continue;
    }
    channels_last[v] = true;
  }
  // An input tied to its op's output (a residual added in place) has the output's layout:
  // where the two differ both stay NCHW, until no pair differs (values only leave the set).
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t op = 0; op < engine.ops.size(); ++op) {
      const detail::CompiledOp& compiled = engine.ops[op];
      if (compiled.output < 0) continue;
      const auto out = static_cast<std::size_t>(compiled.output);
      for (std::size_t i = 0; i < compiled.inputs.size(); ++i) {
        const auto in = static_cast<std::size_t>(compiled.inputs[i]);
        if (kernels[op]->channels_last_tied_to_output(i) &&
            channels_last[in] != channels_last[out]) {
          channels_last[in] = channels_last[out] = false;
          changed = true;
        }
      }
    }
  }
  for (std::size_t v = 0; v < count; ++v)
    result += channels_last[v] ? 1 : 0;
  if (result == 0) return 0;
  for (std::size_t op = 0; op < engine.ops.size(); ++op) {
    const detail::CompiledOp& compiled = engine.ops[op];
    const bool output =
        compiled.output >= 0 && channels_last[static_cast<std::size_t>(compiled.output)];
    const std::size_t n = compiled.inputs.size();
    const auto inputs = std::make_unique<bool[]>(n + 1);  // + 1: never a zero-size array
    bool any = output;
    for (std::size_t i = 0; i < n; ++i) {
      inputs[i] = channels_last[static_cast<std::size_t>(compiled.inputs[i])];
      any = any || inputs[i];
    }
    if (any) kernels[op]->use_channels_last(std::span<const bool>(inputs.get(), n), output);
  }
  return result;
}

class CpuBackend final : public detail::Backend {
 public:
  std::string unavailable_reason() const override { return {}; }
  std::size_t arena_alignment() const override { return 64; }  // a cache line
  std::size_t memory_bytes() const override {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                                 : std::numeric_limits<std::size_t>::max();
  }

  // Every layer makes its own CPU kernel, so every registered kind is implemented.
  std::vector<std::string> layer_kinds() const override { return registered_layer_kinds(); }

  std::unique_ptr<detail::Program> compile(const detail::CompiledEngine& engine,
                                           const std::vector<LayerOp>& layer_ops) const override {
    const Precision precision = engine.options.precision;
    std::vector<std::unique_ptr<CpuKernel>> kernels;
    for (std::size_t op = 0; op < engine.ops.size(); ++op) {
      if (const int exit = engine.ops[op].decides_exit; exit >= 0) {
        const auto& plan = engine.exits[static_cast<std::size_t>(exit)];
        kernels.push_back(std::make_unique<ExitDecisionKernel>(plan.batch, plan.classes));
      } else if (precision == Precision::fp32) {
        kernels.push_back(layer_ops[op].layer->make_cpu_kernel(layer_ops[op]));
      } else {
        // The weights as the precision stores them, converted once (kernels copy what they
        // keep, so the rounded copies need to live only until the kernel is made).
        LayerOp rounded = layer_ops[op];
        round_in_place(precision, rounded.folded_weight);
        round_in_place(precision, rounded.folded_bias);
        std::vector<Tensor> copies;
        copies.reserve(rounded.weights.size());
        for (auto& [suffix, tensor] : rounded.weights) {
          copies.push_back(*tensor);
          if (copies.back().dtype() == DType::f32) round_in_place(precision, copies.back().f32());
          tensor = &copies.back();
        }
        kernels.push_back(rounded.layer->make_cpu_kernel(rounded));
      }
    }
    const int channels_last_values = plan_channels_last(engine, kernels);
    return std::make_unique<CpuProgram>(engine.options.threads, std::move(kernels),
                                        channels_last_values);
  }
};

}  // namespace
}  // namespace cgr::cpu

CGR_REGISTER_BACKEND(cgr::Device::cpu, cgr::cpu::CpuBackend)
