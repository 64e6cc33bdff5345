// BatchNorm2d (inference): the per-channel affine map, its CPU kernel, and folding into a conv.
#include "cgr/layers/batch_norm2d.hpp"

#include <cmath>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(BatchNorm2d);

namespace {

class BatchNormCpuKernel final : public CpuKernel {
 public:
  BatchNormCpuKernel(ChannelAffine affine, const ChannelGeometry& g)
      : affine_(std::move(affine)), batch_(g.batch), channels_(g.channels), plane_(g.plane) {}

  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    float* y = io.output;
    const auto planes = static_cast<std::size_t>(batch_ * channels_);
    const std::size_t grain = std::max<std::size_t>(1, 16384 / static_cast<std::size_t>(plane_));
    io.pool->parallel_for(planes, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t p = begin; p < end; ++p) {
        const auto c = static_cast<std::size_t>(static_cast<std::int64_t>(p) % channels_);
        const float scale = affine_.scale[c];
        const float shift = affine_.shift[c];
        const float* in = x + p * plane_;
        float* out = y + p * plane_;
        for (std::int64_t i = 0; i < plane_; ++i) out[i] = in[i] * scale + shift;
      }
    });
  }

 private:
  ChannelAffine affine_;
  std::int64_t batch_, channels_, plane_;
};

}  // namespace

BatchNorm2d::BatchNorm2d(std::string name, const TensorDesc& input,
                         const BatchNorm2dParams& params)
    : Layer(std::move(name), {input}), params_(params) {
  if (input.shape.rank() < 2 || input.shape.numel() == 0) {
    fail("BatchNorm2d '{}': input '{}' has shape {}, expected N x C x ... with C on axis 1",
         this->name(), input.name, input.shape.to_string());
  }
  if (!(params_.eps >= 0.0)) fail("BatchNorm2d '{}': eps must be >= 0", this->name());
  set_output(input.shape);
  const Shape& s = input.shape;
  geometry_ = {s[0], s[1], s.numel() / (s[0] * s[1])};
}

std::vector<WeightSpec> BatchNorm2d::weight_specs() const {
  const Shape channels{inputs()[0].shape[1]};
  return {{"weight", channels}, {"bias", channels}, {"running_mean", channels},
          {"running_var", channels}};
}

std::string BatchNorm2d::attributes() const { return fmt::format("eps {}", params_.eps); }

ChannelAffine BatchNorm2d::affine(const LayerWeights& weights) const {
  const auto gamma = weights.at("weight")->f32();
  const auto beta = weights.at("bias")->f32();
  const auto mean = weights.at("running_mean")->f32();
  const auto var = weights.at("running_var")->f32();
  ChannelAffine affine;
  affine.scale.resize(gamma.size());
  affine.shift.resize(gamma.size());
  for (std::size_t c = 0; c < gamma.size(); ++c) {
    // Double precision: the folded weights then differ from PyTorch's unfused math by one
    // rounding of the product, not by the error of a float rsqrt.
    const double scale = static_cast<double>(gamma[c]) / std::sqrt(double{var[c]} + params_.eps);
    affine.scale[c] = static_cast<float>(scale);
    affine.shift[c] = static_cast<float>(double{beta[c]} - double{mean[c]} * scale);
  }
  return affine;
}

void BatchNorm2d::fold_into_conv(const LayerWeights& weights, std::vector<float>& conv_weight,
                                 std::vector<float>& conv_bias) const {
  const auto gamma = weights.at("weight")->f32();
  const auto beta = weights.at("bias")->f32();
  const auto mean = weights.at("running_mean")->f32();
  const auto var = weights.at("running_var")->f32();
  const std::size_t channels = gamma.size();
  CGR_ASSERT(channels > 0 && conv_weight.size() % channels == 0);
  if (conv_bias.empty()) conv_bias.assign(channels, 0.0f);
  CGR_ASSERT(conv_bias.size() == channels);
  const std::size_t per_channel = conv_weight.size() / channels;
  for (std::size_t c = 0; c < channels; ++c) {
    const double scale = static_cast<double>(gamma[c]) / std::sqrt(double{var[c]} + params_.eps);
    for (std::size_t i = 0; i < per_channel; ++i) {
      float& w = conv_weight[c * per_channel + i];
      w = static_cast<float>(double{w} * scale);
    }
    conv_bias[c] =
        static_cast<float>((double{conv_bias[c]} - double{mean[c]}) * scale + double{beta[c]});
  }
}

OpCost BatchNorm2d::cost() const {
  return {2 * static_cast<double>(output().shape.numel()), activation_bytes()};
}

std::unique_ptr<CpuKernel> BatchNorm2d::make_cpu_kernel(const LayerOp& op) const {
  return std::make_unique<BatchNormCpuKernel>(affine(op.weights), geometry_);
}

}  // namespace cgr
