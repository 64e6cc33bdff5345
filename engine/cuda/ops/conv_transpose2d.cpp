// ConvTranspose2d as cuDNN's cudnnConvolutionBackwardData: a transposed convolution is the
// data gradient of the convolution whose filter is its weight ([C_in, C_out/groups, kh, kw] is
// that convolution's [K, C/groups, kh, kw]), taken with its input as the gradient (dy) and its
// output as the result (dx). Legacy API, like conv2d.cpp, and captured into the graph alike.
//
// cuDNN's convolution pads both sides alike and checks that the forward convolution of dx
// gives dy's size, floor((out + 2 * pad - dilated_kernel) / stride) + 1 == in. With pad =
// pad_begin that holds exactly when 0 <= output_padding + pad_begin - pad_end < stride (per
// axis), which covers PyTorch's modules (symmetric padding, output_padding < stride) and most
// ONNX pads: cuDNN then writes the output directly, and a kernel adds the bias in place.
// Otherwise (e.g. output_padding >= stride with a dilation, or pads much larger at the end)
// cuDNN computes the full, untrimmed result into the op's workspace and a kernel
// (conv_transpose2d.cu) trims it to the output and adds the bias; the same kernel covers the
// rows output_padding adds past every tap.
//
// Descriptors, algorithm and workspace size are fixed when the op is made; enqueue() binds the
// stream and issues the calls, so it can be captured. The workspace is the op's own value in
// the arena (GpuBuffers::workspace): ops that run concurrently never share one.
#include <algorithm>
#include <memory>

#include "cgr/error.hpp"
#include "cgr/layers/conv_transpose2d.hpp"
#include "conv_transpose2d.hpp"
#include "cudnn_descriptor.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "library_check.hpp"

namespace cgr::cuda {
namespace {

int to_int(std::int64_t value, const ConvTranspose2d& layer) {
  if (value < 0 || value > (std::int64_t{1} << 31) - 1) {
    fail("ConvTranspose2d '{}': size {} does not fit cuDNN's int parameters", layer.name(), value);
  }
  return static_cast<int>(value);
}

// True when cuDNN's symmetric padding with pad = pad_begin reproduces the layer's output size
// along one axis (see the top of this file).
bool direct_axis(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride,
                 std::int64_t dilation, std::int64_t pad_begin) {
  const std::int64_t excess =
      out + 2 * pad_begin - (dilation * (kernel - 1) + 1) - stride * (in - 1);
  return excess >= 0 && excess < stride;
}

class CudnnConvTransposeOp final : public GpuOp {
 public:
  CudnnConvTransposeOp(const ConvTranspose2d& layer, const LayerOp& op, const GpuOpBuild& options)
      : g_(layer.geometry()) {
    const ConvTranspose2dGeometry& g = g_;
    auto i = [&](std::int64_t v) { return to_int(v, layer); };

    CGR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_.handle));
    CGR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_.handle, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                               i(g.in_channels), i(g.out_channels / g.groups),
                                               i(g.kernel_h), i(g.kernel_w)));
    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&dy_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(dy_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                               i(g.batch), i(g.in_channels), i(g.in_h), i(g.in_w)));

    const bool direct =
        direct_axis(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.dilation_h, g.pad_top) &&
        direct_axis(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.dilation_w, g.pad_left);
    // The direct form when cuDNN's heuristics offer an algorithm for it; the unpadded full
    // result and the trim otherwise.
    if (!(direct && configure(layer, options, true))) {
      if (!configure(layer, options, false)) {
        fail("ConvTranspose2d '{}': cuDNN offers no deterministic GEMM algorithm for {} -> {}",
             layer.name(), layer.inputs()[0].shape.to_string(), layer.output().shape.to_string());
      }
    }

    weight_ = std::make_unique<DeviceFloats>(op.weights.at("weight")->f32());
    if (layer.params().bias) bias_ = std::make_unique<DeviceFloats>(op.weights.at("bias")->f32());
  }

  std::size_t workspace_bytes() const override { return full_bytes_ + cudnn_workspace_; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    auto* workspace = static_cast<unsigned char*>(b.workspace);
    float* target = direct_ ? b.output : reinterpret_cast<float*>(workspace);
    CGR_CUDNN_CHECK(cudnnSetStream(h.cudnn, stream));
    const float one = 1.0f, zero = 0.0f;
    CGR_CUDNN_CHECK(cudnnConvolutionBackwardData(
        h.cudnn, &one, w_.handle, weight_->get(), dy_.handle, b.inputs[0], conv_.handle, algorithm_,
        cudnn_workspace_ > 0 ? workspace + full_bytes_ : nullptr, cudnn_workspace_, &zero,
        dx_.handle, target));
    if (!direct_ || bias_ != nullptr) {
      CGR_CUDA_CHECK(
          conv_transpose_trim(target, bias_ ? bias_->get() : nullptr, b.output, trim_, stream));
    }
  }

 private:
  // Sets up the convolution, dx and the algorithm for the direct form (cuDNN pads by
  // pad_begin and writes the output) or the full one (unpadded, into the workspace). False
  // when cuDNN's heuristics offer no usable algorithm.
  bool configure(const ConvTranspose2d& layer, const GpuOpBuild& options, bool direct) {
    const ConvTranspose2dGeometry& g = g_;
    auto i = [&](std::int64_t v) { return to_int(v, layer); };
    direct_ = direct;
    const std::int64_t full_h =
        direct ? g.out_h : g.stride_h * (g.in_h - 1) + g.dilation_h * (g.kernel_h - 1) + 1;
    const std::int64_t full_w =
        direct ? g.out_w : g.stride_w * (g.in_w - 1) + g.dilation_w * (g.kernel_w - 1) + 1;
    trim_ = {.planes = g.batch * g.out_channels,
             .channels = g.out_channels,
             .full_h = full_h,
             .full_w = full_w,
             .out_h = g.out_h,
             .out_w = g.out_w,
             .top = direct ? 0 : g.pad_top,
             .left = direct ? 0 : g.pad_left};
    full_bytes_ = 0;
    if (!direct) {
      full_bytes_ =
          static_cast<std::size_t>(g.batch * g.out_channels * full_h * full_w) * sizeof(float);
      full_bytes_ = (full_bytes_ + 255) / 256 * 256;
    }

    conv_.reset();
    dx_.reset();
    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&dx_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(dx_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                               i(g.batch), i(g.out_channels), i(full_h),
                                               i(full_w)));
    CGR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_.handle));
    CGR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_.handle, direct ? i(g.pad_top) : 0,
                                                    direct ? i(g.pad_left) : 0, i(g.stride_h),
                                                    i(g.stride_w), i(g.dilation_h), i(g.dilation_w),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CGR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_.handle, i(g.groups)));
    // FMA math keeps fp32 exact to the CPU reference; TF32 tensor cores only when asked.
    CGR_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv_.handle, options.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    // cuDNN's own check of the pairing: the forward convolution of dx must give dy's shape.
    int n = 0, c = 0, h = 0, w = 0;
    CGR_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv_.handle, dx_.handle, w_.handle, &n, &c, &h, &w));
    if (n != g.batch || c != g.in_channels || h != g.in_h || w != g.in_w) {
      fail(
          "ConvTranspose2d '{}': cuDNN pairs an output of {}x{}x{}x{} with an input of "
          "{}x{}x{}x{}, cgr with {}",
          layer.name(), g.batch, g.out_channels, full_h, full_w, n, c, h, w,
          layer.inputs()[0].shape.to_string());
    }

    // cuDNN's heuristic choice (no timing runs: the engine may be built under load) among the
    // deterministic GEMM algorithms: ALGO_0 sums with atomics (results vary run to run), FFT
    // and Winograd round differently from a direct sum and FFT's workspaces are large.
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int returned = 0;
    CGR_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        options.cudnn, w_.handle, dy_.handle, conv_.handle, dx_.handle,
        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    const auto usable = [&](const cudnnConvolutionBwdDataAlgoPerf_t& p) {
      const bool gemm = p.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 ||
                        p.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
      return p.status == CUDNN_STATUS_SUCCESS && gemm && p.determinism == CUDNN_DETERMINISTIC &&
             (options.allow_tf32 || p.mathType == CUDNN_FMA_MATH ||
              p.mathType == CUDNN_DEFAULT_MATH);
    };
    const auto* chosen = std::find_if(perf, perf + std::max(returned, 0), usable);
    if (chosen == perf + std::max(returned, 0)) return false;
    algorithm_ = chosen->algo;
    CGR_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        options.cudnn, w_.handle, dy_.handle, conv_.handle, dx_.handle, algorithm_,
        &cudnn_workspace_));
    return true;
  }

  ConvTranspose2dGeometry g_;
  bool direct_ = false;
  ConvTransposeTrim trim_;
  std::size_t full_bytes_ = 0;
  std::size_t cudnn_workspace_ = 0;
  cudnnConvolutionBwdDataAlgo_t algorithm_{};
  CudnnFilterDescriptor w_;
  CudnnTensorDescriptor dy_, dx_;
  CudnnConvolutionDescriptor conv_;
  std::unique_ptr<DeviceFloats> weight_, bias_;
};

std::unique_ptr<GpuOp> make_conv_transpose(const ConvTranspose2d& layer, const GpuOpBuild& build) {
  return std::make_unique<CudnnConvTransposeOp>(layer, build.op, build);
}

const GpuOpRegistration<ConvTranspose2d> conv_transpose_op(make_conv_transpose);

}  // namespace
}  // namespace cgr::cuda
