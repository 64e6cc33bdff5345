// Dense 2-D convolution (one group; 1x1 only with enough channels) through oneDNN's JIT
// kernels on the layout they run fastest on (NHWC; nChw16c after an input of few channels),
// with cgr's threads, tasks and epilogue. The data is NCHW between ops, or NHWC where the CPU
// layout plan keeps it so (set_channels_last); conv_onednn.cpp says how a run is split and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "cgr/layers/conv2d.hpp"
#include "cgr/layers/element_math.hpp"

namespace cgr {
class ThreadPool;
}

namespace cgr::cpu {

class OneDnnConv {
 public:
  // Whether this build has oneDNN and the convolution is one it takes: one group, a kernel
  // larger than 1x1 or enough channels for a 1x1 (conv_onednn.cpp), the GEMM's AVX-512 kernel
  // chosen (so the tests' kernel override, gemm.hpp, keeps cgr's own paths), and CGR_ONEDNN
  // not set to 0 (cgr's own kernels, for comparison).
  static bool wanted(const Conv2dGeometry& geometry);

  // Builds the primitives and reorders the weights once. Returns null when oneDNN has no
  // kernel for this geometry on this machine (the caller keeps its own path).
  static std::unique_ptr<OneDnnConv> make(const Conv2dGeometry& geometry,
                                          std::span<const float> weight,
                                          std::span<const float> bias);
  ~OneDnnConv();
  OneDnnConv(const OneDnnConv&) = delete;
  OneDnnConv& operator=(const OneDnnConv&) = delete;

  // Scratch one run needs: the NHWC input slices and the results. (oneDNN's scratchpads are
  // each thread's lanes::ThreadScratch.)
  std::size_t workspace_bytes() const;

  // Whether the primitives run on NHWC (channels-last) data: then the input can be an NHWC
  // value of the engine's layout plan too (set_channels_last), which saves its transpose from
  // NCHW; and the output where the weights fit one channel slice (channels_last_output): the
  // tasks are then row slices over all channels, each result a dense run of rows of the output,
  // which the primitive writes in place. (Results in channel slices, copied point by point into
  // an NHWC output from two threads, took ResNet-18's 128->128 convs 1.18x the time of the
  // transpose to NCHW.)
  // A conv of few input channels (planes in, nChw16c out) reads NCHW only but can write NHWC
  // (channels_last_output): each row slice's result is copied into the NHWC rows.
  bool channels_last() const;
  // Whether the primitives run oneDNN's Winograd algorithm (on nChw16c; see conv_onednn.cpp).
  bool winograd() const;
  bool channels_last_output() const;
  // Called before the first run: the input is NHWC (not NCHW); the output is written NHWC,
  // and run's residual is then NHWC too. Only where channels_last() / channels_last_output().
  void set_channels_last(bool input, bool output);

  // ConvKernelCpu::run's contract: output = act(conv + bias + residual), NCHW; the same bits
  // for every pool size (the split into tasks does not depend on it).
  void run(const float* input, const float* residual, float* output, float* workspace,
           const math::Activation& activation, ThreadPool* pool) const;

 private:
  struct Impl;
  explicit OneDnnConv(std::unique_ptr<Impl> impl);
  // whole_channels: tasks are row slices over all output channels (an NHWC output); nhwc: the
  // primitives run on NHWC, 1x1 convs too (those otherwise run on nChw16c); winograd: oneDNN's
  // Winograd algorithm on nChw16c (null where it has none for the geometry).
  static std::unique_ptr<Impl> make_impl(const Conv2dGeometry& geometry,
                                         std::span<const float> weight, std::span<const float> bias,
                                         bool whole_channels, bool nhwc, bool winograd);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cgr::cpu
