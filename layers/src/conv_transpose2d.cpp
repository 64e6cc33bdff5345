// ConvTranspose2d: shape inference, the geometry, and the CPU kernel (GEMM + col2im in
// cpu/conv_transpose_cpu.cpp).
#include "cgr/layers/conv_transpose2d.hpp"

#include "cgr/error.hpp"
#include "cgr/layers/spatial.hpp"
#include "cpu/conv_transpose_cpu.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(ConvTranspose2d);

std::int64_t conv_transpose_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                        std::int64_t pad_begin, std::int64_t pad_end,
                                        std::int64_t output_padding, std::int64_t dilation) {
  return stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pad_begin - pad_end;
}

namespace {

class ConvTranspose2dCpuKernel final : public CpuKernel {
 public:
  ConvTranspose2dCpuKernel(const ConvTranspose2dGeometry& geometry, std::span<const float> weight,
                           std::span<const float> bias)
      : conv_(geometry, weight, bias) {}

  void run(const KernelIo& io) const override {
    conv_.run(io.inputs[0], io.output, io.workspace, io.pool);
  }
  std::size_t workspace_bytes() const override { return conv_.workspace_bytes(); }

 private:
  cpu::ConvTransposeKernelCpu conv_;
};

}  // namespace

ConvTranspose2d::ConvTranspose2d(std::string name, const TensorDesc& input,
                                 const ConvTranspose2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  const SpatialShape s = spatial_shape(kKind, this->name(), input);
  const auto& p = params_;
  if (p.out_channels <= 0 || p.groups <= 0 || p.kernel.h <= 0 || p.kernel.w <= 0 ||
      p.stride.h <= 0 || p.stride.w <= 0 || p.dilation.h <= 0 || p.dilation.w <= 0 ||
      p.padding.top < 0 || p.padding.left < 0 || p.padding.bottom < 0 || p.padding.right < 0 ||
      p.output_padding.h < 0 || p.output_padding.w < 0) {
    fail(
        "ConvTranspose2d '{}': invalid parameters (out_channels {}, kernel {}, stride {}, "
        "padding {}, output_padding {}, dilation {}, groups {}): sizes must be positive and "
        "paddings non-negative",
        this->name(), p.out_channels, to_string(p.kernel), to_string(p.stride),
        to_string(p.padding), to_string(p.output_padding), to_string(p.dilation), p.groups);
  }
  check_1d_window(kKind, this->name(), input, s, p.kernel, p.stride, p.dilation, p.padding);
  if (s.one_d && p.output_padding.h != 0) {
    fail(
        "ConvTranspose2d '{}': input '{}' of shape {} is 1-D (N x C x L): output_padding {} "
        "must have height 0",
        this->name(), input.name, input.shape.to_string(), to_string(p.output_padding));
  }
  // PyTorch's rule (ONNX states it too): output_padding only picks one of the output sizes a
  // stride (or dilation) > 1 maps onto the same input size.
  if ((p.output_padding.h >= p.stride.h && p.output_padding.h >= p.dilation.h) ||
      (p.output_padding.w >= p.stride.w && p.output_padding.w >= p.dilation.w)) {
    fail(
        "ConvTranspose2d '{}': output_padding {} must be smaller than the stride {} or the "
        "dilation {}",
        this->name(), to_string(p.output_padding), to_string(p.stride), to_string(p.dilation));
  }
  if (s.channels % p.groups != 0 || p.out_channels % p.groups != 0) {
    fail(
        "ConvTranspose2d '{}': input {} has {} channels and out_channels is {}; both must be "
        "divisible by groups={}",
        this->name(), input.shape.to_string(), s.channels, p.out_channels, p.groups);
  }
  if (s.h <= 0 || s.w <= 0) {
    fail("ConvTranspose2d '{}': input '{}' of shape {} has no pixels", this->name(), input.name,
         input.shape.to_string());
  }
  const std::int64_t out_h =
      conv_transpose_output_size(s.h, p.kernel.h, p.stride.h, p.padding.top, p.padding.bottom,
                                 p.output_padding.h, p.dilation.h);
  const std::int64_t out_w =
      conv_transpose_output_size(s.w, p.kernel.w, p.stride.w, p.padding.left, p.padding.right,
                                 p.output_padding.w, p.dilation.w);
  if (out_h <= 0 || out_w <= 0) {
    fail(
        "ConvTranspose2d '{}': input {} with kernel {}, stride {}, dilation {} and "
        "output_padding {} gives no output after trimming padding {}",
        this->name(), input.shape.to_string(), to_string(p.kernel), to_string(p.stride),
        to_string(p.dilation), to_string(p.output_padding), to_string(p.padding));
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
               .output_padding_h = p.output_padding.h,
               .output_padding_w = p.output_padding.w,
               .dilation_h = p.dilation.h,
               .dilation_w = p.dilation.w,
               .groups = p.groups,
               .out_h = out_h,
               .out_w = out_w};
}

std::vector<WeightSpec> ConvTranspose2d::weight_specs() const {
  const std::int64_t per_group = params_.out_channels / params_.groups;
  // After a 1-D input, nn.ConvTranspose1d's [in, out/groups, kernel]: the same floats.
  const Shape weight =
      inputs()[0].shape.rank() == 3
          ? Shape{geometry_.in_channels, per_group, params_.kernel.w}
          : Shape{geometry_.in_channels, per_group, params_.kernel.h, params_.kernel.w};
  std::vector<WeightSpec> specs{{"weight", weight}};
  if (params_.bias) specs.push_back({"bias", Shape{params_.out_channels}});
  return specs;
}

std::string ConvTranspose2d::attributes() const {
  std::string text = fmt::format("{}, k{} s{} p{}", params_.out_channels, to_string(params_.kernel),
                                 to_string(params_.stride), to_string(params_.padding));
  if (!(params_.output_padding == Size2(0)))
    text += fmt::format(" op{}", to_string(params_.output_padding));
  if (!(params_.dilation == Size2(1))) text += fmt::format(" d{}", to_string(params_.dilation));
  if (params_.groups != 1) text += fmt::format(" g{}", params_.groups);
  return text;
}

OpCost ConvTranspose2d::cost() const {
  const ConvTranspose2dGeometry& g = geometry_;
  // Every input pixel meets every weight of its group once.
  const double macs = static_cast<double>(g.batch * g.in_channels * g.in_h * g.in_w) *
                      static_cast<double>(g.out_channels / g.groups * g.kernel_h * g.kernel_w);
  const double weights =
      static_cast<double>(g.in_channels * (g.out_channels / g.groups) * g.kernel_h * g.kernel_w) *
      sizeof(float);
  return {2 * macs, activation_bytes() + weights};
}

std::unique_ptr<CpuKernel> ConvTranspose2d::make_cpu_kernel(const LayerOp& op) const {
  const Tensor* bias = params_.bias ? op.weights.at("bias") : nullptr;
  return std::make_unique<ConvTranspose2dCpuKernel>(geometry_, op.weights.at("weight")->f32(),
                                                    bias ? bias->f32() : std::span<const float>{});
}

}  // namespace cgr
