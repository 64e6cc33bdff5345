// CPU kernel of an elementwise activation: y[i] = fn(x[i]) with a function object from
// cgr/layers/element_math.hpp, split over contiguous ranges of the tensor. Each element is
// computed on its own, so the result is the same whatever the split.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cgr/layers/layer.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr::cpu {

template <typename Fn>
class UnaryCpuKernel final : public CpuKernel {
 public:
  UnaryCpuKernel(std::int64_t count, Fn fn) : count_(static_cast<std::size_t>(count)), fn_(fn) {}

  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    float* y = io.output;
    const Fn fn = fn_;
    io.pool->parallel_for(count_, 1 << 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i)
        y[i] = fn(x[i]);
    });
  }

 private:
  std::size_t count_;
  Fn fn_;
};

}  // namespace cgr::cpu
