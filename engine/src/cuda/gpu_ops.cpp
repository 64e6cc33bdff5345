// The GPU executable of each lowered op: cuDNN for convolutions (conv + folded BN bias +
// residual z + ReLU in one cudnnConvolutionBiasActivationForward call), cuBLAS for Linear,
// cgr's own kernels (layers/src/cuda) for the rest. Weights are uploaded once here and shared
// by every execution context; algorithms and workspace sizes are chosen here, outside any
// capture.
#if defined(CGR_HAVE_CUDA)

#include "cuda/gpu_ops.hpp"

#include <algorithm>
#include <vector>

#include "cgr/error.hpp"
#include "cuda/cudnn_conv.hpp"
#include "cuda/kernels.hpp"
#include "cuda/resources.hpp"

namespace cgr::cuda {
namespace {

// cgr's own kernels: `describe` gives the op's launches for given buffers; enqueue() launches
// them, dag adds them as kernel nodes.
template <typename Describe>
class KernelOp final : public GpuOp {
 public:
  explicit KernelOp(Describe describe) : describe_(std::move(describe)) {}
  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles&) const override {
    for (const cuda_kernels::KernelLaunch& launch : describe_(b)) CGR_CUDA_CHECK(cuda_kernels::launch(launch, stream));
  }
  std::optional<std::vector<cuda_kernels::KernelLaunch>> kernel_launches(const GpuBuffers& b) const override {
    return describe_(b);
  }

 private:
  Describe describe_;
};

// One launch per run.
template <typename Describe>
std::shared_ptr<GpuOp> kernel_op(Describe describe) {
  auto many = [describe = std::move(describe)](const GpuBuffers& b) {
    return std::vector<cuda_kernels::KernelLaunch>{describe(b)};
  };
  return std::make_shared<KernelOp<decltype(many)>>(std::move(many));
}

// Several independent launches per run.
template <typename Describe>
std::shared_ptr<GpuOp> kernels_op(Describe describe) {
  return std::make_shared<KernelOp<Describe>>(std::move(describe));
}

// A CustomOp's stream work: captured like the library ops.
class UserWorkOp final : public GpuOp {
 public:
  explicit UserWorkOp(decltype(CustomOpParams::cuda) work) : work_(std::move(work)) {}
  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles&) const override {
    work_(static_cast<void*>(stream), b.inputs, b.output);
    CGR_CUDA_CHECK(cudaGetLastError());
  }

 private:
  decltype(CustomOpParams::cuda) work_;
};

// Flatten and Reshape: the same bytes under another shape, copied (a memcpy node in graphs).
class CopyOp final : public GpuOp {
 public:
  explicit CopyOp(std::size_t bytes) : bytes_(bytes) {}
  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles&) const override {
    CGR_CUDA_CHECK(cudaMemcpyAsync(b.output, b.inputs[0], bytes_, cudaMemcpyDeviceToDevice, stream));
  }

 private:
  std::size_t bytes_;
};

// y = x Wᵀ + b through cuBLAS (column-major: Yᵀ = W Xᵀ, so W is used transposed), then the
// bias kernel. Its workspace is this op's own: set after the stream (which resets it).
class LinearOp final : public GpuOp {
 public:
  LinearOp(std::int64_t rows, std::int64_t in, std::int64_t out, std::span<const float> weight,
           std::span<const float> bias)
      : rows_(rows), in_(in), out_(out), weight_(upload(weight.data(), weight.size())),
        bias_(upload(bias.data(), bias.size())), has_bias_(!bias.empty()) {}

  std::size_t workspace_bytes() const override { return kCublasWorkspace; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    CGR_CUBLAS_CHECK(cublasSetStream(h.cublas, stream));
    CGR_CUBLAS_CHECK(cublasSetWorkspace(h.cublas, b.workspace, kCublasWorkspace));
    const float alpha = 1.0f, beta = 0.0f;
    CGR_CUBLAS_CHECK(cublasSgemm(h.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out_),
                                 static_cast<int>(rows_), static_cast<int>(in_), &alpha,
                                 static_cast<const float*>(weight_.get()), static_cast<int>(in_),
                                 b.inputs[0], static_cast<int>(in_), &beta, b.output,
                                 static_cast<int>(out_)));
    if (has_bias_) {
      CGR_CUDA_CHECK(cuda_kernels::bias_activation(b.output, static_cast<const float*>(bias_.get()),
                                                   rows_, out_, false, stream));
    }
  }

 private:
  static constexpr std::size_t kCublasWorkspace = 4u << 20;  // cuBLAS's recommended 4 MiB (Hopper: 32 MiB for best kernels)
  std::int64_t rows_, in_, out_;
  DeviceMemory weight_, bias_;
  bool has_bias_;
};

std::vector<float> to_vector(std::span<const float> values) { return {values.begin(), values.end()}; }

}  // namespace

cuda_kernels::Pool2dGeometry pool2d_geometry(const Shape& in, const Shape& out, const Pool2dParams& p) {
  return {in[0] * in[1],
          in[2],
          in[3],
          out[2],
          out[3],
          p.kernel.h,
          p.kernel.w,
          p.stride.h == 0 ? p.kernel.h : p.stride.h,
          p.stride.w == 0 ? p.kernel.w : p.stride.w,
          p.padding.top,
          p.padding.left,
          p.padding.bottom,
          p.padding.right,
          p.dilation.h,
          p.dilation.w,
          p.count_include_pad};
}

std::shared_ptr<GpuOp> make_gpu_op(const detail::LoweredOp& op, const GpuBuildOptions& options) {
  const Layer& layer = *op.layer;
  const Shape& in = layer.inputs()[0].shape;
  const Shape& out = layer.output().shape;
  if (const auto* conv = dynamic_cast<const Conv2d*>(&layer)) {
    return make_cudnn_conv(*conv, op.conv_weight, op.conv_bias, op.epilogue, options);
  }
  if (const auto* linear = dynamic_cast<const Linear*>(&layer)) {
    const Tensor* bias = linear->params().bias ? op.weights.at("bias") : nullptr;
    return std::make_shared<LinearOp>(in.numel() / linear->in_features(), linear->in_features(),
                                      linear->params().out_features, op.weights.at("weight")->f32(),
                                      bias ? bias->f32() : std::span<const float>{});
  }
  if (dynamic_cast<const Add*>(&layer) != nullptr) {
    const std::int64_t n = out.numel();
    const bool relu = op.add_relu;
    return kernel_op([n, relu](const GpuBuffers& b) {
      return cuda_kernels::describe_add(b.inputs[0], b.inputs[1], b.output, n, relu);
    });
  }
  if (dynamic_cast<const Relu*>(&layer) != nullptr) {
    const std::int64_t n = out.numel();
    return kernel_op([n](const GpuBuffers& b) { return cuda_kernels::describe_relu(b.inputs[0], b.output, n); });
  }
  if (const auto* clip = dynamic_cast<const Clip*>(&layer)) {
    const std::int64_t n = out.numel();
    const ClipParams p = clip->params();
    return kernel_op([n, p](const GpuBuffers& b) {
      return cuda_kernels::describe_clip(b.inputs[0], b.output, n, p.low, p.high);
    });
  }
  if (const auto* bn = dynamic_cast<const BatchNorm2d*>(&layer)) {
    const ChannelAffine affine = bn->affine(op.weights);
    auto scale = std::make_shared<DeviceMemory>(upload(affine.scale.data(), affine.scale.size()));
    auto shift = std::make_shared<DeviceMemory>(upload(affine.shift.data(), affine.shift.size()));
    const std::int64_t batch = in[0], channels = in[1], plane = in.numel() / (in[0] * in[1]);
    return kernel_op([=](const GpuBuffers& b) {
      return cuda_kernels::describe_channel_affine(b.inputs[0], static_cast<const float*>(scale->get()),
                                          static_cast<const float*>(shift->get()), b.output, batch,
                                          channels, plane);
    });
  }
  if (const auto* add_constant = dynamic_cast<const AddConstant*>(&layer)) {
    const auto expanded = add_constant->expanded(op.weights.at("constant")->f32());
    auto constant = std::make_shared<DeviceMemory>(upload(expanded.data(), expanded.size()));
    const std::int64_t n = out.numel();
    return kernel_op([=](const GpuBuffers& b) {
      return cuda_kernels::describe_add_expanded(b.inputs[0], static_cast<const float*>(constant->get()), b.output, n);
    });
  }
  const bool max_pool = dynamic_cast<const MaxPool2d*>(&layer) != nullptr;
  if (max_pool || dynamic_cast<const AvgPool2d*>(&layer) != nullptr) {
    const Pool2dParams p = max_pool ? dynamic_cast<const MaxPool2d&>(layer).params()
                                    : dynamic_cast<const AvgPool2d&>(layer).params();
    const cuda_kernels::Pool2dGeometry g = pool2d_geometry(in, out, p);
    if (max_pool) {
      return kernel_op([g](const GpuBuffers& b) { return cuda_kernels::describe_max_pool2d(b.inputs[0], b.output, g); });
    }
    return kernel_op([g](const GpuBuffers& b) { return cuda_kernels::describe_avg_pool2d(b.inputs[0], b.output, g); });
  }
  if (dynamic_cast<const GlobalAvgPool*>(&layer) != nullptr) {
    const std::int64_t planes = in[0] * in[1], plane = in[2] * in[3];
    return kernel_op([=](const GpuBuffers& b) {
      return cuda_kernels::describe_global_avg_pool(b.inputs[0], b.output, planes, plane);
    });
  }
  if (const auto* concat = dynamic_cast<const Concat*>(&layer)) {
    std::int64_t outer = 1;
    for (int d = 0; d < concat->axis(); ++d) outer *= out[static_cast<std::size_t>(d)];
    std::vector<std::int64_t> blocks;
    for (const auto& input : layer.inputs()) blocks.push_back(input.shape.numel() / outer);
    const std::int64_t out_block = out.numel() / outer;
    // One launch per input, each writing its own columns: in dag, sibling kernel nodes.
    return kernels_op([=](const GpuBuffers& b) {
      std::vector<cuda_kernels::KernelLaunch> launches;
      std::int64_t offset = 0;
      for (std::size_t k = 0; k < blocks.size(); ++k) {
        launches.push_back(cuda_kernels::describe_concat_part(b.inputs[k], b.output, outer, blocks[k], out_block, offset));
        offset += blocks[k];
      }
      return launches;
    });
  }
  if (const auto* softmax = dynamic_cast<const Softmax*>(&layer)) {
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < softmax->axis(); ++d) outer *= in[static_cast<std::size_t>(d)];
    for (std::size_t d = static_cast<std::size_t>(softmax->axis()) + 1; d < in.rank(); ++d) inner *= in[d];
    const std::int64_t length = in[static_cast<std::size_t>(softmax->axis())];
    return kernel_op([=](const GpuBuffers& b) {
      return cuda_kernels::describe_softmax(b.inputs[0], b.output, outer, length, inner);
    });
  }
  if (const auto* pad = dynamic_cast<const Pad2d*>(&layer)) {
    const Padding2d p = pad->padding();
    const std::int64_t planes = in[0] * in[1];
    const std::int64_t ih = in[2], iw = in[3], oh = out[2], ow = out[3];
    return kernel_op([=](const GpuBuffers& b) {
      return cuda_kernels::describe_pad2d(b.inputs[0], b.output, planes, ih, iw, oh, ow, p.top, p.left);
    });
  }
  if (const auto* transpose = dynamic_cast<const Transpose*>(&layer)) {
    if (out.rank() > 8) fail("Transpose '{}': the CUDA kernel handles up to 8 dims", layer.name());
    cuda_kernels::TransposeGeometry g{};
    g.rank = static_cast<int>(out.rank());
    std::vector<std::int64_t> in_strides(in.rank(), 1);
    for (std::size_t d = in.rank() - 1; d-- > 0;) in_strides[d] = in_strides[d + 1] * in[d + 1];
    for (std::size_t d = 0; d < out.rank(); ++d) {
      g.out_dims[d] = out[d];
      g.source_strides[d] = in_strides[static_cast<std::size_t>(transpose->perm()[d])];
    }
    return kernel_op([g](const GpuBuffers& b) { return cuda_kernels::describe_transpose(b.inputs[0], b.output, g); });
  }
  if (const auto* custom = dynamic_cast<const CustomOp*>(&layer)) {
    if (!custom->params().cuda) {
      fail("{} '{}' has no CUDA implementation (CustomOpParams::cuda)", layer.kind(), layer.name());
    }
    return std::make_shared<UserWorkOp>(custom->params().cuda);
  }
  if (dynamic_cast<const Flatten*>(&layer) != nullptr || dynamic_cast<const Reshape*>(&layer) != nullptr) {
    return std::make_shared<CopyOp>(static_cast<std::size_t>(out.numel()) * sizeof(float));
  }
  fail("{} '{}': no CUDA implementation", layer.kind(), layer.name());
}

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
