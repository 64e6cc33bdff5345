// Conv2d (with BatchNorm folded in, an optional residual and an optional activation) as one
// cuDNN call: cudnnConvolutionBiasActivationForward computes act(conv(x) + z + bias). It fuses
// ReLU (and IDENTITY) only, so any other activation (SiLU, HardSwish, LeakyReLU, Clip, ...)
// follows as cgr's activation kernel over the output in place, inside the same op. A fused
// squeeze-excitation Mul (Epilogue::gated_plane) keeps the conv's N x C x 1 x 1 result in the
// workspace as the gate and scales the op's last input by it with cgr's broadcast kernel. The
// legacy API is deprecated in cuDNN 9 but works and is captured by the major frameworks; it stays
// behind this one op so the backend API can replace it. A depthwise conv with an expansion
// fused before it (LayerOp::expansion) is two such convs, the expanded tensor in the workspace.
//
// Descriptors, algorithm and workspace size are fixed when the op is made (the algorithm by
// cuDNN's heuristic, or by timing the candidates on the device when the engine asks for it);
// enqueue() only binds the stream and issues the call, so it can be captured. cuDNN's legacy API
// pads symmetrically: an asymmetric padding is applied by cgr's pad kernel (pad2d.cu) into the op's
// workspace first, and the convolution then runs unpadded.
#include <algorithm>
#include <array>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "activation.hpp"
#include "binary.hpp"
#include "cgr/error.hpp"
#include "cgr/layers/conv2d.hpp"
#include "cudnn_descriptor.hpp"
#include "device_memory.hpp"
#include "gpu_op.hpp"
#include "library_check.hpp"
#include "pad2d.hpp"

namespace cgr::cuda {
namespace {

using TensorDescriptor = CudnnTensorDescriptor;
using FilterDescriptor = CudnnFilterDescriptor;
using ConvDescriptor = CudnnConvolutionDescriptor;
using ActivationDescriptor =
    CudnnDescriptor<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// The most workspace a timed algorithm may take (per op; the memory plan reuses workspaces
// across ops that do not overlap): Winograd's nonfused variant needs a few MiB at batch 1.
constexpr std::size_t kTimedWorkspaceLimitBytes = std::size_t{64} << 20;

bool gemm_algorithm(cudnnConvolutionFwdAlgo_t algo) {
  return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
}

// FFT rounds far from a direct convolution and its workspaces run to hundreds of MiB.
bool timed_candidate(cudnnConvolutionFwdAlgo_t algo) {
  return gemm_algorithm(algo) || algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}

// fp32 keeps FMA math; tensor-op math only where TF32 is allowed.
bool math_allowed(cudnnMathType_t math, bool allow_tf32) {
  return allow_tf32 || math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
}

int to_int(std::int64_t value, std::string_view conv) {
  if (value < 0 || value > (std::int64_t{1} << 31) - 1) {
    fail("Conv2d '{}': size {} does not fit cuDNN's int parameters", conv, value);
  }
  return static_cast<int>(value);
}

// One convolution (`name` the layer's, for messages) of geometry g with its folded weight and
// bias and its epilogue.
class CudnnConvOp final : public GpuOp {
 public:
  CudnnConvOp(std::string_view name, const Conv2dGeometry& g, std::span<const float> weight,
              std::span<const float> bias, const Epilogue& epilogue, const GpuOpBuild& options)
      : residual_(epilogue.residual), activation_after_(epilogue.activation) {
    const bool relu = epilogue.relu();
    if (relu) activation_after_ = {};
    auto i = [&](std::int64_t v) { return to_int(v, name); };

    // Asymmetric padding: pad into the workspace, then convolve unpadded.
    explicit_pad_ = !(g.pad_top == g.pad_bottom && g.pad_left == g.pad_right);
    std::int64_t conv_h = g.in_h, conv_w = g.in_w;
    int pad_h = i(g.pad_top), pad_w = i(g.pad_left);
    if (explicit_pad_) {
      conv_h = g.in_h + g.pad_top + g.pad_bottom;
      conv_w = g.in_w + g.pad_left + g.pad_right;
      pad_h = pad_w = 0;
      pad_geometry_ = make_pad2d_geometry(
          g.batch * g.in_channels, g.in_h, g.in_w,
          {.padding = Padding2d(g.pad_top, g.pad_left, g.pad_bottom, g.pad_right)});
      padded_bytes_ =
          static_cast<std::size_t>(g.batch * g.in_channels * conv_h * conv_w) * sizeof(float);
      padded_bytes_ = (padded_bytes_ + 255) / 256 * 256;
    }

    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                               i(g.batch), i(g.in_channels), i(conv_h), i(conv_w)));
    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_.handle, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                               i(g.batch), i(g.out_channels), i(g.out_h),
                                               i(g.out_w)));
    output_bytes_ =
        static_cast<std::size_t>(g.batch * g.out_channels * g.out_h * g.out_w) * sizeof(float);
    CGR_CUDNN_CHECK(cudnnCreateTensorDescriptor(&bias_desc_.handle));
    CGR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(bias_desc_.handle, CUDNN_TENSOR_NCHW,
                                               CUDNN_DATA_FLOAT, 1, i(g.out_channels), 1, 1));
    CGR_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_.handle));
    CGR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_.handle, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                               i(g.out_channels), i(g.in_channels / g.groups),
                                               i(g.kernel_h), i(g.kernel_w)));
    CGR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_.handle));
    CGR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_.handle, pad_h, pad_w, i(g.stride_h),
                                                    i(g.stride_w), i(g.dilation_h), i(g.dilation_w),
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CGR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_.handle, i(g.groups)));
    // FMA math keeps fp32 exact to the CPU reference; TF32 tensor cores only when asked.
    CGR_CUDNN_CHECK(cudnnSetConvolutionMathType(
        conv_.handle, options.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n = 0, c = 0, h = 0, w = 0;
    CGR_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv_.handle, x_.handle, w_.handle, &n, &c, &h, &w));
    if (n != g.batch || c != g.out_channels || h != g.out_h || w != g.out_w) {
      fail("Conv2d '{}': cuDNN computes an output of {}x{}x{}x{}, cgr {}x{}x{}x{}", name, n, c, h,
           w, g.batch, g.out_channels, g.out_h, g.out_w);
    }
    CGR_CUDNN_CHECK(cudnnCreateActivationDescriptor(&activation_.handle));
    CGR_CUDNN_CHECK(cudnnSetActivationDescriptor(
        activation_.handle, relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
        CUDNN_PROPAGATE_NAN, 0.0));

    weight_ = std::make_unique<DeviceFloats>(weight);
    // The fused call accepts IDENTITY only with IMPLICIT_PRECOMP_GEMM. With ReLU: by default
    // cuDNN's heuristic choice among the GEMM algorithms (no runs on the device: the engine may
    // be built under load; Winograd and FFT round differently from a direct convolution);
    // when the engine asks, the fastest of the candidates cuDNN times here.
    algorithm_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    if (relu && options.time_algorithms) {
      algorithm_ = fastest_algorithm(options, g.batch * g.in_channels * conv_h * conv_w);
    } else if (relu) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int returned = 0;
      CGR_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
          options.cudnn, x_.handle, w_.handle, conv_.handle, y_.handle,
          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf));
      for (int k = 0; k < returned; ++k) {
        if (perf[k].status == CUDNN_STATUS_SUCCESS && gemm_algorithm(perf[k].algo) &&
            math_allowed(perf[k].mathType, options.allow_tf32)) {
          algorithm_ = perf[k].algo;
          break;
        }
      }
    }
    CGR_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(options.cudnn, x_.handle, w_.handle,
                                                            conv_.handle, y_.handle, algorithm_,
                                                            &cudnn_workspace_));
    if (epilogue.gated_plane > 0) {
      // The gate after cuDNN's workspace, 256-byte aligned like every arena offset.
      gate_offset_ = padded_bytes_ + (cudnn_workspace_ + 255) / 256 * 256;
      gate_bytes_ = (output_bytes_ + 255) / 256 * 256;
      const std::int64_t planes = g.batch * g.out_channels;
      gate_geometry_ = broadcast_geometry(Shape{planes, epilogue.gated_plane},
                                          Shape{planes, epilogue.gated_plane}, Shape{planes, 1});
    }

    // The fused call needs a bias: zeros when the conv has none and no BatchNorm was folded.
    std::vector<float> full_bias(bias.begin(), bias.end());
    full_bias.resize(static_cast<std::size_t>(g.out_channels), 0.0f);
    bias_ = std::make_unique<DeviceFloats>(full_bias);
  }

  std::size_t workspace_bytes() const override {
    return gate_bytes_ > 0 ? gate_offset_ + gate_bytes_ : padded_bytes_ + cudnn_workspace_;
  }
  // Without a residual, z is a zero tensor of the output's shape.
  std::size_t zero_bytes() const override { return residual_ ? 0 : output_bytes_; }

  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    const float* x = b.inputs[0];
    auto* workspace = static_cast<unsigned char*>(b.workspace);
    if (explicit_pad_) {
      CGR_CUDA_CHECK(pad2d(x, reinterpret_cast<float*>(workspace), pad_geometry_, stream));
      x = reinterpret_cast<const float*>(workspace);
    }
    CGR_CUDNN_CHECK(cudnnSetStream(h.cudnn, stream));
    const float one = 1.0f;
    const float residual_scale = residual_ ? 1.0f : 0.0f;
    // Without a residual, z is read with a zero scale; it must not be y, whose previous
    // contents may be NaN (0 * NaN is NaN wherever cuDNN does not skip the term).
    const void* z =
        residual_ ? static_cast<const void*>(b.inputs[1]) : static_cast<const void*>(b.zeros);
    if (z == nullptr)
      fail("Conv2d: no zero buffer bound for z (the executor binds GpuBuffers::zeros)");
    // The conv's result: the op's output, or the squeeze-excitation gate in the workspace.
    float* result = gate_bytes_ > 0 ? reinterpret_cast<float*>(workspace + gate_offset_) : b.output;
    CGR_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
        h.cudnn, &one, x_.handle, x, w_.handle, weight_->get(), conv_.handle, algorithm_,
        cudnn_workspace_ > 0 ? workspace + padded_bytes_ : nullptr, cudnn_workspace_,
        &residual_scale, y_.handle, z, bias_desc_.handle, bias_->get(), activation_.handle,
        y_.handle, result));
    if (activation_after_.kind != math::ActivationKind::none) {
      const auto n = static_cast<std::int64_t>(output_bytes_ / sizeof(float));
      CGR_CUDA_CHECK(activation(result, result, n, activation_after_, stream));
    }
    if (gate_bytes_ > 0) {
      CGR_CUDA_CHECK(binary(BinaryOp::mul, b.inputs[1], result, b.output, gate_geometry_, stream));
    }
  }

 private:
  // cudnnFindConvolutionForwardAlgorithmEx on zeroed input and output buffers of the op's
  // shapes and its real weights: cuDNN runs every algorithm and lists them fastest first. The
  // first candidate that ran within the workspace limit wins; the heuristic's default when
  // none did.
  cudnnConvolutionFwdAlgo_t fastest_algorithm(const GpuOpBuild& options,
                                              std::int64_t input_elements) const {
    DeviceFloats x(static_cast<std::size_t>(input_elements));
    DeviceFloats y(output_bytes_ / sizeof(float));
    DeviceFloats workspace(kTimedWorkspaceLimitBytes / sizeof(float));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CGR_CUDNN_CHECK(cudnnSetStream(options.cudnn, nullptr));
    CGR_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        options.cudnn, x_.handle, x.get(), w_.handle, weight_->get(), conv_.handle, y_.handle,
        y.get(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, workspace.get(),
        kTimedWorkspaceLimitBytes));
    for (int k = 0; k < returned; ++k) {
      if (perf[k].status == CUDNN_STATUS_SUCCESS && timed_candidate(perf[k].algo) &&
          perf[k].memory <= kTimedWorkspaceLimitBytes &&
          math_allowed(perf[k].mathType, options.allow_tf32)) {
        return perf[k].algo;
      }
    }
    return CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  }

  bool residual_;
  math::Activation activation_after_;             // applied by cgr's kernel: cuDNN fuses ReLU only
  std::size_t gate_offset_ = 0, gate_bytes_ = 0;  // squeeze-excitation gate in the workspace
  BroadcastGeometry gate_geometry_;
  std::size_t output_bytes_ = 0;
  bool explicit_pad_ = false;
  Pad2dGeometry pad_geometry_;
  std::size_t padded_bytes_ = 0;
  std::size_t cudnn_workspace_ = 0;
  cudnnConvolutionFwdAlgo_t algorithm_{};
  TensorDescriptor x_, y_, bias_desc_;
  FilterDescriptor w_;
  ConvDescriptor conv_;
  ActivationDescriptor activation_;
  std::unique_ptr<DeviceFloats> weight_, bias_;
};

// A depthwise conv with its expansion fused before it (LayerOp::expansion): the 1x1 conv (its
// activation after it) into the op's workspace, then the depthwise conv from there. The same
// two cuDNN calls as unfused, in one op; the CPU computes the expanded tensor in bands instead.
class ExpandedConvOp final : public GpuOp {
 public:
  ExpandedConvOp(const Conv2d& expansion, const Conv2d& depthwise, const LayerOp& op,
                 const GpuOpBuild& options)
      : expansion_(expansion.name(), expansion.geometry(), op.expansion.weight, op.expansion.bias,
                   Epilogue{.activation = op.expansion.activation}, options),
        depthwise_(depthwise.name(), depthwise.geometry(), op.folded_weight, op.folded_bias,
                   op.epilogue, options) {
    const Conv2dGeometry& e = expansion.geometry();
    expanded_bytes_ =
        (static_cast<std::size_t>(e.batch * e.out_channels * e.out_h * e.out_w) * sizeof(float) +
         255) /
        256 * 256;
  }
  std::size_t workspace_bytes() const override {
    return expanded_bytes_ + std::max(expansion_.workspace_bytes(), depthwise_.workspace_bytes());
  }
  std::size_t zero_bytes() const override {
    return std::max(expansion_.zero_bytes(), depthwise_.zero_bytes());
  }
  void enqueue(cudaStream_t stream, const GpuBuffers& b, const LibraryHandles& h) const override {
    auto* expanded = static_cast<float*>(b.workspace);
    void* rest = static_cast<unsigned char*>(b.workspace) + expanded_bytes_;
    // Two entries, one bound: the expansion reads no residual.
    const std::array<const float*, 2> expansion_inputs{b.inputs[0], nullptr};
    expansion_.enqueue(stream,
                       GpuBuffers{std::span<const float* const>(expansion_inputs.data(), 1),
                                  expanded, rest, b.zeros},
                       h);
    // The depthwise conv's inputs: the expanded tensor, then the op's others (a residual).
    std::array<const float*, 2> inputs{expanded, b.inputs.size() > 1 ? b.inputs[1] : nullptr};
    depthwise_.enqueue(stream,
                       GpuBuffers{std::span<const float* const>(
                                      inputs.data(), std::min<std::size_t>(b.inputs.size(), 2)),
                                  b.output, rest, b.zeros},
                       h);
  }

 private:
  CudnnConvOp expansion_, depthwise_;
  std::size_t expanded_bytes_ = 0;
};

std::unique_ptr<GpuOp> make_conv(const Conv2d& conv, const GpuOpBuild& build) {
  const LayerOp& op = build.op;
  if (op.expansion.layer != nullptr) {
    const auto* expansion = layer_cast<Conv2d>(*op.expansion.layer);
    if (expansion == nullptr || op.epilogue.gated_plane > 0) {
      fail("Conv2d '{}': the CUDA backend fuses only a Conv2d expansion, without a gate after",
           conv.name());
    }
    return std::make_unique<ExpandedConvOp>(*expansion, conv, op, build);
  }
  return std::make_unique<CudnnConvOp>(conv.name(), conv.geometry(), op.folded_weight,
                                       op.folded_bias, op.epilogue, build);
}

const GpuOpRegistration<Conv2d> conv_op(make_conv);

}  // namespace
}  // namespace cgr::cuda
