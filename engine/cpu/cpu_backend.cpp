// The CPU backend: every layer's own CPU kernel (Layer::make_cpu_kernel, the numerical
// reference of every backend), the engine's exit decision, and one thread pool per engine.
#include "cpu_backend.hpp"

#include <unistd.h>

#include <limits>

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
    return std::make_unique<CpuProgram>(engine.options.threads, std::move(kernels));
  }
};

}  // namespace
}  // namespace cgr::cpu

CGR_REGISTER_BACKEND(cgr::Device::cpu, cgr::cpu::CpuBackend)
