// CustomOp: work a user supplies, run as one op of the network with declared inputs and
// output. On the CUDA executor the work is a callable that enqueues anything on the stream it
// is given (kernels, cuBLAS, cuDNN, copies); cgr captures it into the graph against exactly
// the nodes of the ops that produce its inputs (cgr/capture/explicit_graph.hpp), like its own
// library ops. On the CPU executor the optional host callable runs instead.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "cgr/layers/layer.hpp"

namespace cgr {

struct CustomOpParams {
  Shape output_shape;
  // Enqueues the work on `cuda_stream` (a cudaStream_t). Device pointers. Must not synchronise
  // or allocate: it runs under stream capture. Called once per graph build, then replayed.
  std::function<void(void* cuda_stream, std::span<const float* const> inputs, float* output)> cuda;
  // The same computation on the host, for the CPU executor (optional).
  std::function<void(std::span<const float* const> inputs, float* output)> cpu;
  std::string kind = "Custom";  // the label the DOT export and reports show
};

class CustomOp final : public Layer {
 public:
  static constexpr std::string_view kKind = "Custom";
  CustomOp(std::string name, std::vector<TensorDesc> inputs, CustomOpParams params);

  std::string_view kind() const override { return kKind; }
  std::string_view label() const override { return params_.kind; }
  const CustomOpParams& params() const { return params_; }
  std::unique_ptr<CpuKernel> make_cpu_kernel(const LayerOp& op) const override;

 private:
  CustomOpParams params_;
};

}  // namespace cgr
