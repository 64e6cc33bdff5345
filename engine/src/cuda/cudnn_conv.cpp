// cuDNN convolution op. Descriptors, algorithm and workspace size are fixed at engine build;
// enqueue() only binds the stream and issues the call, so it can be captured. cuDNN's legacy
// API pads symmetrically: an asymmetric padding is applied by cgr's pad kernel into the op's
// workspace first, and the convolution then runs unpadded.
#if defined(CGR_HAVE_CUDA)

#include "cuda/cudnn_conv.hpp"

#include <vector>

#include "cgr/error.hpp"
#include "cuda/kernels.hpp"
#include "cuda/resources.hpp"

namespace cgr::cuda {
namespace {

template <typename Handle, cudnnStatus_t (*Destroy)(Handle)>
struct CudnnDescriptor {
  Handle handle = nullptr;
  CudnnDescriptor() = default;
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  ~CudnnDescriptor() {
    if (handle != nullptr) (void)Destroy(handle);
  }
};

using TensorDescriptor = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDescriptor = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDescriptor = CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using ActivationDescriptor = CudnnDescriptor<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

int to_int(std::int64_t value, const Conv2d& conv) {
  if (value < 0 || value > (std::int64_t{1} << 31) - 1) {
    fail("Conv2d '{}': size {} does not fit cuDNN's int parameters", conv.name(), value);
  }
  return static_cast<int>(value);
}

class CudnnConvOp final : public GpuOp {
 public:
  CudnnConvOp(const Conv2d& conv, std::span<const float> weight, std::span<const float> bias,
              const ConvEpilogue& epilogue, const GpuBuildOptions& options)
      : residual_(epilogue.residual) {
    const Shape& in = conv.inputs()[0].shape;
    const Shape& out = conv.output().shape;
    const Conv2dParams& p = conv.params();
    const std::int64_t out_channels = p.out_channels;
    auto i = [&](std::int64_t v) { return to_int(v, conv); };

    // Asymmetric padding: pad into the workspace, then convolve unpadded.
    explicit_pad_ = !p.padding.symmetric();
    std::int64_t conv_h = in[2], conv_w = in[3];
    int pad_h = i(p.padding.top), pad_w = i(p.padding.left);
    if (explicit_pad_) {
      conv_h = in[2] + p.padding.top + p.padding.bottom;
      conv_w = in[3] + p.padding.left + p.padding.right;
      pad_h = pad_w = 0;
      pad_geometry_ = {in[0] * in[1], in[2], in[3], conv_h, conv_w, p.padding.top, p.padding.left};
      padded_bytes_ = static_cast<std::size_t>(in[0] * in[1] * conv_h * conv_w) * sizeof(float);
      padded_bytes_ = (padded_bytes_ + 255) / 256 * 256;
    }

    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(in[0]),
                                               i(in[1]), i(conv_h), i(conv_w)));
    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(out[0]),
                                               i(out[1]), i(out[2]), i(out[3])));
    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias_desc_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_desc_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1,
                                               i(out_channels), 1, 1));
    CGR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_.handle));
    CGR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_.handle, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                               i(out_channels), i(in[1] / p.groups), i(p.kernel.h),
                                               i(p.kernel.w)));
    CGR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_.handle));
    CGR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_.handle, pad_h, pad_w, i(p.stride.h),
                                                    i(p.stride.w), i(p.dilation.h), i(p.dilation.w),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CGR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_.handle, i(p.groups)));
    // FMA math keeps fp32 exact to the CPU reference; TF32 tensor cores only when asked.
    CGR_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv_.handle, options.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    CGR_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_.handle, x_.handle, w_.handle, &n, &c, &h, &w));
    if (n != out[0] || c != out[1] || h != out[2] || w != out[3]) {
      fail("Conv2d '{}': cuDNN computes an output of {}x{}x{}x{}, cgr {}", conv.name(), n, c, h, w,
           out.to_string());
    }
    CGR_CUDNN_CHECK(cudnnCreateActivationDescriptor(&activation_.handle));
    CGR_CUDNN_CHECK(cudnnSetActivationDescriptor(
        activation_.handle, epilogue.relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
        CUDNN_PROPAGATE_NAN, 0.0));

    // The fused call accepts IDENTITY only with IMPLICIT_PRECOMP_GEMM; with ReLU take
    // cuDNN's heuristic choice (no timing runs: the engine may be built under load) among the
    // GEMM algorithms: FFT and Winograd round differently from a direct convolution and FFT's
    // workspaces run to hundreds of MiB, one per op.
    algorithm_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    if (epilogue.relu) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      CGR_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(options.cudnn, x_.handle, w_.handle,
                                                             conv_.handle, y_.handle,
                                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                             &returned, perf));
      for (int k = 0; k < returned; ++k) {
        const bool gemm = perf[k].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
                          perf[k].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
                          perf[k].algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
        if (perf[k].status == CUDNN_STATUS_SUCCESS && gemm &&
            (options.allow_tf32 || perf[k].mathType == CUDNN_FMA_MATH ||
             perf[k].mathType == CUDNN_DEFAULT_MATH)) {
          algorithm_ = perf[k].algo;
          break;
        }
      }
    }
    CGR_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(options.cudnn, x_.handle, w_.handle,
                                                            conv_.handle, y_.handle, algorithm_,
                                                            &cudnn_workspace_));

    weight_ = upload(weight.data(), weight.size());
    // The fused call needs a bias: zeros when the conv has none and no BatchNorm was folded.
    std::vector<float> full_bias(bias.begin(), bias.end());
    full_bias.resize(static_cast<std::size_t>(out_channels), 0.0f);
    bias_ = upload(full_bias.data(), full_bias.size());
  }

  std::size_t workspace_bytes() const override { return padded_bytes_ + cudnn_workspace_; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    const float* x = b.inputs[0];
    auto* workspace = static_cast<unsigned char*>(b.workspace);
    if (explicit_pad_) {
      const auto& g = pad_geometry_;
      CGR_CUDA_CHECK(cuda_kernels::pad2d(x, reinterpret_cast<float*>(workspace), g.planes, g.in_h, g.in_w,
                                         g.out_h, g.out_w, g.top, g.left, stream));
      x = reinterpret_cast<const float*>(workspace);
    }
    CGR_CUDNN_CHECK(cudnnSetStream(h.cudnn, stream));
    const float one = 1.0f;
    const float residual_scale = residual_ ? 1.0f : 0.0f;
    // Without a residual, z aliases y with a zero scale (cuDNN allows z == y).
    const void* z = residual_ ? static_cast<const void*>(b.inputs[1]) : static_cast<const void*>(b.output);
    CGR_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
        h.cudnn, &one, x_.handle, x, w_.handle, weight_.get(), conv_.handle, algorithm_,
        cudnn_workspace_ > 0 ? workspace + padded_bytes_ : nullptr, cudnn_workspace_,
        &residual_scale, y_.handle, z, bias_desc_.handle, bias_.get(), activation_.handle,
        y_.handle, b.output));
  }

 private:
  struct PadGeometry {
    std::int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0, top = 0, left = 0;
  };
  bool residual_;
  bool explicit_pad_ = false;
  PadGeometry pad_geometry_;
  std::size_t padded_bytes_ = 0;
  std::size_t cudnn_workspace_ = 0;
  cudnnConvolutionFwdAlgo_t algorithm_{};
  TensorDescriptor x_, y_, bias_desc_;
  FilterDescriptor w_;
  ConvDescriptor conv_;
  ActivationDescriptor activation_;
  DeviceMemory weight_, bias_;
};

}  // namespace

std::shared_ptr<GpuOp> make_cudnn_conv(const Conv2d& conv, std::span<const float> weight,
                                       std::span<const float> bias, const ConvEpilogue& epilogue,
                                       const GpuBuildOptions& options) {
  return std::make_shared<CudnnConvOp>(conv, weight, bias, epilogue, options);
}

}  // namespace cgr::cuda

#endif  // CGR_HAVE_CUDA
