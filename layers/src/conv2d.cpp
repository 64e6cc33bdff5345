// Conv2d: shape inference and the CPU kernel (im2col + blocked GEMM in cpu/conv_cpu.cpp).
#include "cgr/layers/conv2d.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/element_math.hpp"
#include "cpu/conv_cpu.hpp"

namespace cgr {
namespace {

cpu::ConvGeometry geometry_of(const TensorDesc& input, const TensorDesc& output,
                              const Conv2dParams& p) {
  cpu::ConvGeometry g;
  g.batch = input.shape[0];
  g.in_channels = input.shape[1];
  g.in_h = input.shape[2];
  g.in_w = input.shape[3];
  g.out_channels = p.out_channels;
  g.kernel_h = p.kernel.h;
  g.kernel_w = p.kernel.w;
  g.stride_h = p.stride.h;
  g.stride_w = p.stride.w;
  g.pad_top = p.padding.top;
  g.pad_left = p.padding.left;
  g.pad_bottom = p.padding.bottom;
  g.pad_right = p.padding.right;
  g.dilation_h = p.dilation.h;
  g.dilation_w = p.dilation.w;
  g.groups = p.groups;
  g.out_h = output.shape[2];
  g.out_w = output.shape[3];
  return g;
}

class Conv2dCpuKernel final : public CpuKernel {
 public:
  Conv2dCpuKernel(const cpu::ConvGeometry& geometry, std::span<const float> weight,
                  std::span<const float> bias, const ConvEpilogue& epilogue)
      : conv_(geometry, weight, bias), epilogue_(epilogue) {}

  void run(const KernelIo& io) const override {
    conv_.run(io.inputs[0], epilogue_.residual ? io.inputs[1] : nullptr, io.output, io.workspace,
              epilogue_.relu, io.pool);
  }
  std::size_t workspace_bytes() const override { return conv_.workspace_bytes(); }

 private:
  cpu::ConvKernelCpu conv_;
  ConvEpilogue epilogue_;
};

}  // namespace

Conv2d::Conv2d(std::string name, const TensorDesc& input, const Conv2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const Shape& s = input.shape;
  if (s.rank() != 4) {
    fail("Conv2d '{}': input '{}' has shape {}, expected 4 dims (N x C x H x W)", this->name(),
         input.name, s.to_string());
  }
  const auto& p = params_;
  if (p.out_channels <= 0 || p.groups <= 0 || p.kernel.h <= 0 || p.kernel.w <= 0 ||
      p.stride.h <= 0 || p.stride.w <= 0 || p.dilation.h <= 0 || p.dilation.w <= 0 ||
      p.padding.top < 0 || p.padding.left < 0 || p.padding.bottom < 0 || p.padding.right < 0) {
    fail("Conv2d '{}': invalid parameters (out_channels {}, kernel {}, stride {}, padding {}, "
         "dilation {}, groups {}): sizes must be positive and padding non-negative",
         this->name(), p.out_channels, to_string(p.kernel), to_string(p.stride),
         to_string(p.padding), to_string(p.dilation), p.groups);
  }
  if (s[1] % p.groups != 0 || p.out_channels % p.groups != 0) {
    fail("Conv2d '{}': input {} has {} channels and out_channels is {}; both must be divisible "
         "by groups={}",
         this->name(), s.to_string(), s[1], p.out_channels, p.groups);
  }
  const std::int64_t out_h = math::window_output_size(s[2], p.kernel.h, p.stride.h, p.padding.top,
                                                      p.padding.bottom, p.dilation.h, false);
  const std::int64_t out_w = math::window_output_size(s[3], p.kernel.w, p.stride.w,
                                                      p.padding.left, p.padding.right,
                                                      p.dilation.w, false);
  if (out_h <= 0 || out_w <= 0) {
    fail("Conv2d '{}': input {} is smaller than the dilated kernel {} with padding {}",
         this->name(), s.to_string(), to_string(p.kernel), to_string(p.padding));
  }
  set_output(Shape{s[0], p.out_channels, out_h, out_w});
}

std::vector<WeightSpec> Conv2d::weight_specs() const {
  std::vector<WeightSpec> specs{
      {"weight",
       Shape{params_.out_channels, inputs()[0].shape[1] / params_.groups, params_.kernel.h,
             params_.kernel.w}}};
  if (params_.bias) specs.push_back({"bias", Shape{params_.out_channels}});
  return specs;
}

std::string Conv2d::attributes() const {
  std::string text = fmt::format("{}, k{} s{} p{}", params_.out_channels,
                                 to_string(params_.kernel), to_string(params_.stride),
                                 to_string(params_.padding));
  if (!(params_.dilation == Size2(1))) text += fmt::format(" d{}", to_string(params_.dilation));
  if (params_.groups != 1) text += fmt::format(" g{}", params_.groups);
  return text;
}

std::unique_ptr<CpuKernel> Conv2d::make_cpu_kernel(const LayerWeights& weights) const {
  const Tensor* bias = params_.bias ? weights.at("bias") : nullptr;
  return make_fused_cpu_kernel(weights.at("weight")->f32(),
                               bias ? bias->f32() : std::span<const float>{}, ConvEpilogue{});
}

std::unique_ptr<CpuKernel> Conv2d::make_fused_cpu_kernel(std::span<const float> weight,
                                                         std::span<const float> bias,
                                                         const ConvEpilogue& epilogue) const {
  return std::make_unique<Conv2dCpuKernel>(geometry_of(inputs()[0], output(), params_), weight,
                                           bias, epilogue);
}

}  // namespace cgr
