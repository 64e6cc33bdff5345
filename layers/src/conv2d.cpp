// Conv2d: shape inference, the geometry, and the CPU kernel (im2col + blocked GEMM in
// cpu/conv_cpu.cpp; with an expansion before it, cpu/expanded_depthwise_cpu.cpp).
#include "cgr/layers/conv2d.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cgr/layers/spatial.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/conv_cpu.hpp"
#include "cpu/expanded_depthwise_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Conv2d);

namespace {

// Conv: cpu::ConvKernelCpu, or cpu::ExpandedDepthwiseCpu with an expansion (never with a
// squeeze-excitation gate: the engine fuses none after one).
template <typename Conv>
class Conv2dCpuKernel final : public CpuKernel {
 public:
  template <typename... ConvArgs>
  Conv2dCpuKernel(const Conv2dGeometry& geometry, const Epilogue& epilogue, ConvArgs&&... conv_args)
      : conv_(std::forward<ConvArgs>(conv_args)...),
        epilogue_(epilogue),
        gates_(geometry.batch * geometry.out_channels),
        // The gate follows the im2col panel in the workspace, 64-byte aligned.
        gate_offset_((conv_.workspace_bytes() + 63) / 64 * 64) {}

  void run(const KernelIo& io) const override {
    if (epilogue_.gated_plane == 0) {
      conv_.run(io.inputs[0], epilogue_.residual ? io.inputs[1] : nullptr, io.output, io.workspace,
                epilogue_.activation, io.pool);
      return;
    }
    // Squeeze-excitation: the gate (N x C x 1 x 1) into the workspace, then the scaled input.
    auto* gate =
        reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(io.workspace) + gate_offset_);
    conv_.run(io.inputs[0], nullptr, gate, io.workspace, epilogue_.activation, io.pool);
    const float* scaled = io.inputs[1];
    float* y = io.output;
    const std::int64_t plane = epilogue_.gated_plane;
    const std::size_t grain =
        static_cast<std::size_t>(std::max<std::int64_t>(1, (1 << 14) / plane));
    io.pool->parallel_for(
        static_cast<std::size_t>(gates_), grain, [&](std::size_t begin, std::size_t end) {
          for (std::size_t g = begin; g < end; ++g) {
            const float s = gate[g];
            const std::size_t first = g * static_cast<std::size_t>(plane);
            for (std::size_t i = first; i < first + static_cast<std::size_t>(plane); ++i)
              y[i] = scaled[i] * s;
          }
        });
  }
  // NHWC in where oneDNN runs the conv on NHWC or a depthwise conv computes in channel lanes;
  // out too where the kernel writes it so (cpu/conv_cpu.hpp) and no squeeze-excitation gate,
  // read NCHW, joins it. A residual is NHWC exactly when the output is (oneDNN's convs add it
  // in place; a depthwise conv with a residual stays NCHW).
  bool can_read_channels_last(std::size_t input) const override {
    if (input == 1) return epilogue_.residual && conv_.channels_last_residual();
    return input == 0 && conv_.channels_last_input();
  }
  bool can_write_channels_last() const override {
    return conv_.channels_last_output() && epilogue_.gated_plane == 0 &&
           (!epilogue_.residual || conv_.channels_last_residual());
  }
  bool channels_last_tied_to_output(std::size_t input) const override {
    return input == 1 && epilogue_.residual;
  }
  void use_channels_last(std::span<const bool> inputs, bool output) override {
    conv_.set_channels_last(!inputs.empty() && inputs[0], output);
  }
  std::size_t workspace_bytes() const override {
    if (epilogue_.gated_plane == 0) return conv_.workspace_bytes();
    return gate_offset_ + static_cast<std::size_t>(gates_) * sizeof(float);
  }

 private:
  Conv conv_;
  Epilogue epilogue_;
  std::int64_t gates_;
  std::size_t gate_offset_;
};

}  // namespace

Conv2d::Conv2d(std::string name, const TensorDesc& input, const Conv2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const SpatialShape s = spatial_shape(kKind, this->name(), input);
  const auto& p = params_;
  if (p.out_channels <= 0 || p.groups <= 0 || p.kernel.h <= 0 || p.kernel.w <= 0 ||
      p.stride.h <= 0 || p.stride.w <= 0 || p.dilation.h <= 0 || p.dilation.w <= 0 ||
      p.padding.top < 0 || p.padding.left < 0 || p.padding.bottom < 0 || p.padding.right < 0) {
    fail(
        "Conv2d '{}': invalid parameters (out_channels {}, kernel {}, stride {}, padding {}, "
        "dilation {}, groups {}): sizes must be positive and padding non-negative",
        this->name(), p.out_channels, to_string(p.kernel), to_string(p.stride),
        to_string(p.padding), to_string(p.dilation), p.groups);
  }
  check_1d_window(kKind, this->name(), input, s, p.kernel, p.stride, p.dilation, p.padding);
  if (s.channels % p.groups != 0 || p.out_channels % p.groups != 0) {
    fail(
        "Conv2d '{}': input {} has {} channels and out_channels is {}; both must be divisible "
        "by groups={}",
        this->name(), input.shape.to_string(), s.channels, p.out_channels, p.groups);
  }
  const std::int64_t out_h = math::window_output_size(s.h, p.kernel.h, p.stride.h, p.padding.top,
                                                      p.padding.bottom, p.dilation.h, false);
  const std::int64_t out_w = math::window_output_size(s.w, p.kernel.w, p.stride.w, p.padding.left,
                                                      p.padding.right, p.dilation.w, false);
  if (out_h <= 0 || out_w <= 0) {
    fail("Conv2d '{}': input {} is smaller than the dilated kernel {} with padding {}",
         this->name(), input.shape.to_string(), to_string(p.kernel), to_string(p.padding));
  }
  set_output(spatial_output(s, p.out_channels, out_h, out_w));
  geometry_ = {.batch = s.batch,
               .in_channels = s.channels,
               .in_h = s.h,
               .in_w = s.w,
               .out_channels = p.out_channels,
               .kernel_h = p.kernel.h,
               .kernel_w = p.kernel.w,
               .stride_h = p.stride.h,
               .stride_w = p.stride.w,
               .pad_top = p.padding.top,
               .pad_left = p.padding.left,
               .pad_bottom = p.padding.bottom,
               .pad_right = p.padding.right,
               .dilation_h = p.dilation.h,
               .dilation_w = p.dilation.w,
               .groups = p.groups,
               .out_h = out_h,
               .out_w = out_w};
}

std::vector<WeightSpec> Conv2d::weight_specs() const {
  const std::int64_t per_group = geometry_.in_channels / params_.groups;
  // After a 1-D input, nn.Conv1d's [out, in/groups, kernel]: the same floats.
  const Shape weight =
      inputs()[0].shape.rank() == 3
          ? Shape{params_.out_channels, per_group, params_.kernel.w}
          : Shape{params_.out_channels, per_group, params_.kernel.h, params_.kernel.w};
  std::vector<WeightSpec> specs{{"weight", weight}};
  if (params_.bias) specs.push_back({"bias", Shape{params_.out_channels}});
  return specs;
}

std::string Conv2d::attributes() const {
  std::string text = fmt::format("{}, k{} s{} p{}", params_.out_channels, to_string(params_.kernel),
                                 to_string(params_.stride), to_string(params_.padding));
  if (!(params_.dilation == Size2(1))) text += fmt::format(" d{}", to_string(params_.dilation));
  if (params_.groups != 1) text += fmt::format(" g{}", params_.groups);
  return text;
}

OpCost Conv2d::cost() const {
  const Conv2dGeometry& g = geometry_;
  const double macs = static_cast<double>(g.batch * g.out_channels * g.out_h * g.out_w) *
                      static_cast<double>(g.in_channels / g.groups * g.kernel_h * g.kernel_w);
  const double weights =
      static_cast<double>(g.out_channels * (g.in_channels / g.groups) * g.kernel_h * g.kernel_w) *
      sizeof(float);
  return {2 * macs, activation_bytes() + weights};
}

std::unique_ptr<CpuKernel> Conv2d::make_cpu_kernel(const LayerOp& op) const {
  if (op.expansion.layer != nullptr) {
    const auto* expansion = layer_cast<Conv2d>(*op.expansion.layer);
    if (expansion == nullptr) {
      fail("Conv2d '{}': its expansion '{}' is a {}, not a Conv2d", name(),
           op.expansion.layer->name(), op.expansion.layer->kind());
    }
    if (op.epilogue.gated_plane > 0) {
      fail("Conv2d '{}': a squeeze-excitation gate after an expansion is not fused", name());
    }
    return std::make_unique<Conv2dCpuKernel<cpu::ExpandedDepthwiseCpu>>(
        geometry_, op.epilogue, expansion->geometry(), op.expansion.weight, op.expansion.bias,
        op.expansion.activation, geometry_, op.folded_weight, op.folded_bias, op.epilogue.residual);
  }
  return std::make_unique<Conv2dCpuKernel<cpu::ConvKernelCpu>>(geometry_, op.epilogue, geometry_,
                                                               op.folded_weight, op.folded_bias);
}

}  // namespace cgr
