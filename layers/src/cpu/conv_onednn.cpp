// See conv_onednn.hpp.
//
// Why oneDNN: on this project's AVX-512 machine its JIT convolution runs ResNet's and
// Inception's 3x3 convs 1.4-2x as fast as cgr's direct GEMM (64->64 at 56x56: 1.8 ms against
// 3.7, single thread), where cgr's own kernel loses to ONNX Runtime's NCHWc kernels by the same
// margin; oneDNN is the field's standard CPU convolution library (PyTorch's and ONNX Runtime's
// DNNL provider) and Debian ships it.
//
// Which layout inside: oneDNN's "brgconv" kernels (on NHWC) beat its nChw16c "jit" kernels on
// every dense conv measured alone (a standalone oneDNN 2.6 program, one thread, one call per
// conv, median ms, nChw16c against NHWC): 64->64 3x3 at 56x56 2.88 / 2.17, 128->128 at 28x28
// 2.80 / 2.10, 256->256 at 14x14 2.33 / 2.04, 32->32 at 147x147 5.07 / 3.85, 80->192 at 73x73
// 12.9 / 11.8, 64->128 stride 2 1.44 / 1.15, 1x1 768->192 at 17x17 0.71 / 0.68. Inside the
// models that held for convs larger than 1x1 (whole models, one thread, the two layouts' engines
// run alternately in one process: ResNet-18 0.93x the time, GoogLeNet 0.98x, Inception-v3
// 0.95x), not for 1x1 convs between NCHW values (GoogLeNet's at 14x14: 1.26-1.6x the time on
// NHWC, transposes included), so those stay nChw16c; next to an NHWC value of the engine's
// layout plan a 1x1 conv is made again on NHWC (set_channels_last), which saves the transposes
// (MobileNet-v2, whose 1x1 convs on 14x14 and 7x7 maps, depthwise convs and residuals then stay
// NHWC from op to op: 0.96x the time at one thread, 0.86x at two). Fewer than 16 input channels (a
// first conv on the image) stay planes in, nChw16c out, "jit" (ResNet's 7x7 stride-2 conv1: 2.09
// against 2.49 for NHWC). Where the layout plan keeps such a conv's output NHWC (MobileNet-v2's
// first conv, read by a depthwise conv), each row slice's nChw16c result is copied into the
// NHWC rows point by point (oneDNN 2.6 has only its reference kernel for planes in, NHWC out):
// the depthwise conv then reads it in place (MobileNet-v2 0.96x the time at two threads, about
// even at one). CGR_ONEDNN_NHWC=0 keeps every conv on nChw16c (comparisons).
//
// Dense 3x3 stride-1 convs run oneDNN's Winograd F(4x4, 3x3) on nChw16c ("jit_wino_4x3"), where
// it has a kernel: 2.25x fewer multiplies than a direct conv, and faster on every such conv
// measured alone (one thread, median ms, Winograd against direct NHWC): 64->64 at 56x56 1.27 /
// 2.08, 128->128 at 28x28 0.91 / 2.04, 256->256 at 14x14 1.08 / 2.03, 512->512 at 7x7 1.52 /
// 2.08, 64->192 at 28x28 0.77 / 1.54, 64->96 at 35x35 0.66 / 1.21, 32->64 at 147x147 5.17 /
// 7.55; whole models at one thread: ResNet-18 0.73x the time, GoogLeNet 0.77x, Inception-v3
// 0.86x. Its transforms round differently from a direct sum: 1.5e-6 of the output's largest
// magnitude on the 128->128 conv, within the conformance bars. CGR_ONEDNN_WINOGRAD=0 keeps
// those convs direct (comparisons).
//
// How a run goes, per image:
//  1. The input, NCHW, is transposed 16 channels at a time (lanes.hpp) into zero-padded NHWC
//     (or nChw16c) copies, one per slice of output rows (each with the input rows its outputs
//     read, halo included), so every primitive convolves a dense, unpadded tensor: the padding
//     is explicit, and every slice but the last has the same shape and primitive. An input of
//     fewer than 16 channels is copied as padded planes instead (see above). An input the
//     engine's layout plan keeps NHWC (engine/cpu/cpu_backend.cpp) is copied row by row
//     between its padding, no transpose; unpadded, it is read in place (no copy).
//  2. One task per (row slice, output-channel slice): the oneDNN primitive writes the slice's
//     result, NHWC or nChw16c, into the thread's scratch, and the task transposes it out to
//     NCHW at once (still in cache) with the bias already added by oneDNN, then the residual and
//     the activation (lanes::output_finish; a Unary function through flat_epilogue). An output the
//     layout plan keeps NHWC is sliced by rows only, over all channels: the primitive writes
//     each slice's rows straight into the output, and the residual (NHWC too) and the
//     activation run over them in place.
// oneDNN runs single-threaded inside each task: this build's oneDNN threads with OpenMP,
// whose team would compete with cgr's pool for the same cores (and with other branches the
// DAG runs at the same time); cgr's tasks give the parallelism instead. Output channels are
// sliced so that one slice's weights stay in L2 while its rows are computed (late layers'
// weights are read once per image, not once per row slice), rows so that a task carries about
// kTaskMacs. The slicing depends on the geometry only, so results do not depend on the thread
// count, and dag and eager runs agree bit for bit.
#include "cpu/conv_onednn.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"
#include "cpu/gemm.hpp"
#include "cpu/lanes.hpp"
#include "cpu/phases.hpp"

#if defined(CGR_HAVE_ONEDNN)
#include <dlfcn.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace cgr::cpu {

#if defined(CGR_HAVE_ONEDNN) && defined(CGR_LANES_X86)

namespace {

using dnnl::memory;
using lanes::kLanes;

// Multiply-adds one task should at least carry: ~0.3 ms at 60 GMAC/s, against a few us of
// task and primitive-call overhead, and enough tasks at the sizes of ResNet's and Inception's
// layers to keep two to eight threads busy.
constexpr std::int64_t kTaskMacs = std::int64_t{1} << 24;
// Weights of one output-channel slice: half of a typical L2.
constexpr std::int64_t kSliceWeightBytes = std::int64_t{1} << 20;
// Output points (rows x out_w) one row slice should at least hold: the transpose out to NCHW
// writes that many floats of each plane at a time, and shorter runs (142 floats for two rows
// of Inception's 71x71 maps) cost it 4x the time in partial cache lines.
constexpr std::int64_t kSlicePoints = 512;
// The same floor for a 1x1 conv whose NHWC output the primitive writes in place: no transpose
// out and no halo, so short slices cost little, and MobileNet's 7x7 and 14x14 maps (49 and
// 196 points) still split into tasks for a few threads.
constexpr std::int64_t kPointwiseSlicePoints = 14;
// Tasks a conv is split into at least, where each still carries kMinTaskMacs: small late
// layers (7x7, 14x14) are one row slice, and their weights one channel slice.
constexpr std::int64_t kMinTasks = 4;
constexpr std::int64_t kMinTaskMacs = std::int64_t{1} << 21;

// Whether `tasks` tasks may become twice as many: each new one carries kMinTaskMacs, or, for
// the first split in two, half of that. A conv left as one task keeps a second thread idle;
// MobileNet-v2's 192->64 1x1 conv at 14x14 (2.4M multiply-adds) took 0.050 ms as one task
// and 0.029 as two at 2 threads. Past two, the bar stays high: with 1M throughout, its
// 160->960 1x1 convs at 7x7 ran in slices of two rows (2, 2, 2, 1: measured before the slices
// were even, see first_row) and took 1.14x the time.
bool worth_splitting(std::int64_t total_macs, std::int64_t tasks) {
  return total_macs / (2 * tasks) >= (tasks == 1 ? kMinTaskMacs / 2 : kMinTaskMacs);
}

// See OneDnnConv::wanted: a 1x1 conv through oneDNN needs this many multiply-adds per float
// transposed, and on maps larger than kSmallMapPoints the second, larger figure.
constexpr std::int64_t kMinPointwiseMacsPerFloat = 32;
constexpr std::int64_t kLargeMapPointwiseMacsPerFloat = 100;
constexpr std::int64_t kSmallMapPoints = 256;
// Floats one input-copy task should at least write.
constexpr std::int64_t kCopyTaskFloats = std::int64_t{1} << 16;

// A comparison switch (CGR_ONEDNN, CGR_ONEDNN_NHWC, CGR_ONEDNN_WINOGRAD): on unless set to "0".
bool switch_on(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr || std::string_view(env) != "0";
}

// See the top of this file.
bool nhwc_enabled() {
  return switch_on("CGR_ONEDNN_NHWC");
}

// Winograd F(4x4, 3x3) for dense 3x3 stride-1 convs: CGR_ONEDNN_WINOGRAD unset or anything
// but "0" (see the top of this file).
bool winograd_wanted(const Conv2dGeometry& g) {
  if (g.kernel_h != 3 || g.kernel_w != 3 || g.stride_h != 1 || g.stride_w != 1 ||
      g.dilation_h != 1 || g.dilation_w != 1 || g.in_channels < kLanes) {
    return false;
  }
  return switch_on("CGR_ONEDNN_WINOGRAD");
}

std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return (x + m - 1) / m * m;
}

// `planes` planes of image.in_h x in_w, `plane` floats apart, into the interior of zero-padded
// planes of padded_h x image.padded_w (dense, one after the other).
void copy_planes(const float* in, std::int64_t plane, std::int64_t planes,
                 const lanes::PaddedImage& image, std::int64_t padded_h, float* out) {
  const std::int64_t padded_plane = padded_h * image.padded_w;
  for (std::int64_t c = 0; c < planes; ++c) {
    float* dst = out + c * padded_plane;
    std::fill_n(dst, image.pad_top * image.padded_w, 0.0f);
    for (std::int64_t y = 0; y < image.in_h; ++y) {
      float* row = dst + (image.pad_top + y) * image.padded_w;
      std::fill_n(row, image.pad_left, 0.0f);
      std::memcpy(row + image.pad_left, in + c * plane + y * image.in_w,
                  static_cast<std::size_t>(image.in_w) * sizeof(float));
      std::fill(row + image.pad_left + image.in_w, row + image.padded_w, 0.0f);
    }
    std::fill(dst + (image.pad_top + image.in_h) * image.padded_w, dst + padded_plane, 0.0f);
  }
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// OpenMP's per-thread thread count, found at run time in the OpenMP runtime oneDNN loaded, so
// cgr neither links nor compiles against OpenMP itself. oneDNN sizes most primitives' parallel
// regions when it creates them, but some (Winograd's) read the calling thread's count at each
// run: both happen under a count of one, so no primitive starts a team of its own.
class OneOmpThread {
 public:
  OneOmpThread() {
    static const Api api = load();
    api_ = &api;
    if (api_->get != nullptr && api_->set != nullptr) {
      previous_ = api_->get();
      api_->set(1);
    }
  }
  ~OneOmpThread() {
    if (api_->get != nullptr && api_->set != nullptr) api_->set(previous_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  struct Api {
    int (*get)() = nullptr;
    void (*set)(int) = nullptr;
  };
  static Api load() {
    Api api;
    api.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
    api.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    return api;
  }
  const Api* api_ = nullptr;
  int previous_ = 1;
};

}  // namespace

struct OneDnnConv::Impl {
  Conv2dGeometry g;
  std::int64_t padded_w = 0;  // pad_left + in_w + pad_right
  // How the input is copied, and so what the primitives read and write (see the top of this
  // file): planes (fewer than 16 input channels; nchw in, nChw16c out), blocked (1x1 convs
  // between NCHW values: nChw16c in and out) or channels-last (larger kernels, and 1x1 convs
  // next to an NHWC value: NHWC in and out). Blocked and channels-last copies are made 16
  // channels per copy item (the last perhaps fewer).
  enum class Layout { planes, blocked, channels_last };
  Layout layout = Layout::planes;
  bool channels_last() const { return layout == Layout::channels_last; }
  bool pointwise() const { return g.kernel_h * g.kernel_w == 1; }
  bool winograd = false;  // oneDNN's Winograd algorithm (nChw16c)
  // The engine's values on either side are NHWC (OneDnnConv::set_channels_last).
  bool input_nhwc = false, output_nhwc = false;
  // An NHWC input without padding: each row slice's input is a dense run of it, which the
  // primitive reads in place (no copy).
  bool input_in_place() const {
    return input_nhwc && g.pad_top == 0 && g.pad_bottom == 0 && g.pad_left == 0 && g.pad_right == 0;
  }
  // The weights fit one channel slice (kSliceWeightBytes), so that tasks can be row slices
  // over all channels, each writing dense rows of an NHWC output (whole_channels: so sliced).
  bool weights_fit = false, whole_channels = false;
  bool nhwc_output = false;  // OneDnnConv::channels_last_output
  std::int64_t in_blocks = 0;
  // Output rows per slice: row_slices slices as even as rows go, rows in the taller ones (the
  // others one fewer), see first_row.
  std::int64_t rows = 0, row_slices = 0;
  std::int64_t oc = 0, oc_slices = 0;  // output channels per slice (a multiple of 16)
  std::int64_t input_slot = 0;         // floats of one row slice's input copy
  std::int64_t output_slot = 0;        // floats of one task's result (NHWC or nChw16c)
  std::int64_t scratchpad_slot = 0;    // bytes of a primitive's scratchpad (thread scratch)
  // [row variant (0: a slice of `rows`, 1: of one fewer)][oc variant (0: full, 1: the last)]
  struct Variant {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward primitive;
  };
  Variant variants[2][2];
  std::vector<memory> weights[2];  // [row variant][oc slice], in the variants' format
  // Their storage: 2 MiB aligned with huge pages advised (gemm::PackedBuffer), since every run
  // streams them from memory. In oneDNN's own allocations, Winograd's transformed weights made
  // about every second process's ResNet-18 1.3x as slow at two threads (cgr-bench --mode all:
  // 18.8 against 14.3 ms); in these, 12 processes of 12 ran at 14.0-14.5.
  std::vector<gemm::PackedBuffer> weight_storage;
  std::vector<float> bias;
  std::vector<memory> bias_slices;  // per oc slice over `bias`, built once (empty: no bias)

  // Slice r's first output row. Even slices, not full ones and a short last one: the threads
  // take contiguous shares of the tasks, and MobileNet-v2's 14-row maps in four slices of 4, 4,
  // 4 and 2 rows went 8:6 to two threads (1.15x the time of 7:7, which 3, 4, 3, 4 give).
  std::int64_t first_row(std::int64_t r) const { return r * g.out_h / row_slices; }
  std::int64_t rows_of(std::int64_t r) const { return first_row(r + 1) - first_row(r); }
  std::int64_t oc_of(std::int64_t o) const {
    return o + 1 < oc_slices ? oc : g.out_channels - (oc_slices - 1) * oc;
  }
  std::int64_t input_rows(std::int64_t out_rows) const {
    return (out_rows - 1) * g.stride_h + (g.kernel_h - 1) * g.dilation_h + 1;
  }
  // Row slices' input copies in the workspace, shared by their channel slices' tasks: none
  // where the primitives read in place or the tasks copy their own.
  std::int64_t input_slots() const {
    return input_in_place() || input_in_scratch() ? 0 : row_slices;
  }
  // With one channel slice each task copies its own input into its thread's scratch: no pass
  // and join before the convolutions, and the copy still in L2 when the primitive reads it
  // (per-op sums at two threads: ResNet-18 0.93x the time, GoogLeNet 0.98x). Not a first conv
  // on the image (planes): MobileNet-v2's took 1.12x the time so, and the depthwise conv
  // reading its output 1.17x.
  bool input_in_scratch() const {
    return !input_in_place() && oc_slices == 1 && layout != Layout::planes;
  }
  // The primitives write an NHWC output in place (else each task's result goes to its
  // thread's scratch).
  bool output_in_place() const { return output_nhwc && channels_last(); }
  int row_variant(std::int64_t r) const { return rows_of(r) == rows ? 0 : 1; }
  const Variant& variant(std::int64_t r, std::int64_t o) const {
    return variants[row_variant(r)][o + 1 < oc_slices ? 0 : 1];
  }
};

bool OneDnnConv::wanted(const Conv2dGeometry& g) {
  if (g.groups != 1) return false;
  // A 1x1 conv does IC * OC / (IC + OC) multiply-adds per float the two transposes move: where
  // that is small (MobileNet-v2's 16->96 at 112x112: 14) they cost more than oneDNN saves, and
  // cgr's GEMM, which reads the input in place, stays (oneDNN took 1.32x its time there; 64->256
  // at 56x56, 51: 0.96x; 768->192 at 17x17, 154: 0.68x; 320->1280 at 7x7: 0.74x). On larger
  // maps the GEMM's long rows of points keep it efficient further up (per-op medians in
  // GoogLeNet, one thread, cgr's GEMM against oneDNN: 64->64 at 56x56, 32: 0.75x the time;
  // 192->96 at 28x28, 64: 0.75x; 256->128, 85: 0.89x), where on 14x14 maps oneDNN stays ahead
  // (MobileNet-v2's 384->64 and 576->96, 55 and 82: the GEMM took 1.15-1.27x).
  if (g.kernel_h * g.kernel_w == 1) {
    const std::int64_t needed = g.out_h * g.out_w <= kSmallMapPoints
                                    ? kMinPointwiseMacsPerFloat
                                    : kLargeMapPointwiseMacsPerFloat;
    if (g.in_channels * g.out_channels < needed * (g.in_channels + g.out_channels)) return false;
  }
  if (std::string_view(gemm::best_kernel().name) != "avx512") return false;
  return switch_on("CGR_ONEDNN");
}

std::unique_ptr<OneDnnConv> OneDnnConv::make(const Conv2dGeometry& g, std::span<const float> weight,
                                             std::span<const float> bias) {
  std::unique_ptr<Impl> impl;
  if (winograd_wanted(g)) impl = make_impl(g, weight, bias, false, false, true);
  if (impl == nullptr) impl = make_impl(g, weight, bias, false, false, false);
  if (impl == nullptr) return nullptr;
  return std::unique_ptr<OneDnnConv>(new OneDnnConv(std::move(impl)));
}

std::unique_ptr<OneDnnConv::Impl> OneDnnConv::make_impl(const Conv2dGeometry& g,
                                                        std::span<const float> weight,
                                                        std::span<const float> bias,
                                                        bool whole_channels, bool nhwc,
                                                        bool winograd) {
  if (g.out_h <= 0 || g.out_w <= 0) return nullptr;
  auto impl = std::make_unique<Impl>();
  Impl& d = *impl;
  d.g = g;
  d.winograd = winograd;
  d.padded_w = g.pad_left + g.in_w + g.pad_right;
  d.layout = g.in_channels < kLanes ? Impl::Layout::planes
             : winograd || !nhwc_enabled() || (d.pointwise() && !nhwc)
                 ? Impl::Layout::blocked
                 : Impl::Layout::channels_last;
  d.in_blocks = d.layout == Impl::Layout::planes ? 1 : gemm::ceil_div(g.in_channels, kLanes);
  const std::int64_t k = g.in_channels * g.kernel_h * g.kernel_w;
  const std::int64_t weight_bytes = g.out_channels * k * static_cast<std::int64_t>(sizeof(float));
  d.oc_slices = gemm::ceil_div(weight_bytes, kSliceWeightBytes);
  d.weights_fit = d.oc_slices == 1;
  d.whole_channels = whole_channels && d.weights_fit;
  d.oc = round_up(gemm::ceil_div(g.out_channels, d.oc_slices), kLanes);
  d.oc_slices = gemm::ceil_div(g.out_channels, d.oc);
  d.rows = std::clamp<std::int64_t>(std::max(gemm::ceil_div(kTaskMacs, d.oc * k * g.out_w),
                                             gemm::ceil_div(kSlicePoints, g.out_w)),
                                    1, g.out_h);
  d.row_slices = gemm::ceil_div(g.out_h, d.rows);
  d.rows = gemm::ceil_div(g.out_h, d.row_slices);  // even slices
  d.row_slices = gemm::ceil_div(g.out_h, d.rows);
  // Enough tasks for a few threads: narrower channel slices (the transpose out writes whole
  // rows of each plane either way).
  // Over whole channels (an NHWC output): shorter row slices instead, of kSlicePoints points
  // at least (shorter ones, with their halo, cost more than the copy they save: Inception-v3's
  // 1x7 and 7x1 convs at 17x17 took 1.1x the time in 5-row slices).
  const std::int64_t total_macs = g.out_channels * k * g.out_h * g.out_w;
  std::int64_t whole_rows = d.rows, whole_slices = d.row_slices;
  const std::int64_t whole_slice_points = d.pointwise() ? kPointwiseSlicePoints : kSlicePoints;
  while (whole_slices < kMinTasks && whole_rows > 1 &&
         gemm::ceil_div(whole_rows, 2) * g.out_w >= whole_slice_points &&
         worth_splitting(total_macs, whole_slices)) {
    whole_slices = gemm::ceil_div(g.out_h, gemm::ceil_div(whole_rows, 2));
    whole_rows = gemm::ceil_div(g.out_h, whole_slices);
    whole_slices = gemm::ceil_div(g.out_h, whole_rows);
  }
  if (d.whole_channels) {
    d.rows = whole_rows;
    d.row_slices = whole_slices;
  }
  while (!d.whole_channels && d.row_slices * d.oc_slices < kMinTasks && d.oc > kLanes &&
         worth_splitting(total_macs, d.row_slices * d.oc_slices)) {
    d.oc = round_up(d.oc / 2, kLanes);
    d.oc_slices = gemm::ceil_div(g.out_channels, d.oc);
  }
  // Then shorter row slices (kSlicePoints at least), which also split the input copy: a
  // first conv on the image (MobileNet-v2's 3->32 at 224x224, one row slice) otherwise copied
  // its whole input on one thread and ran two tasks.
  while (!d.whole_channels && d.row_slices * d.oc_slices < kMinTasks && d.rows > 1 &&
         gemm::ceil_div(d.rows, 2) * g.out_w >= kSlicePoints &&
         worth_splitting(total_macs, d.row_slices * d.oc_slices)) {
    d.row_slices = gemm::ceil_div(g.out_h, gemm::ceil_div(d.rows, 2));
    d.rows = gemm::ceil_div(g.out_h, d.row_slices);
    d.row_slices = gemm::ceil_div(g.out_h, d.rows);
  }
  d.rows = gemm::ceil_div(g.out_h, d.row_slices);  // the taller slices (first_row)
  // An NHWC output where whole channels give the threads as many tasks (up to kMinTasks); a
  // 1x1 conv's slices are short enough for that wherever its multiply-adds are.
  d.nhwc_output =
      d.weights_fit &&
      (d.pointwise() || whole_slices >= std::min(kMinTasks, d.row_slices * d.oc_slices));
  d.bias.assign(bias.begin(), bias.end());

  const OneOmpThread one_thread;
  try {
    const dnnl::engine& engine = cpu_engine();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    for (int rv = 0; rv < 2; ++rv) {
      for (int ov = 0; ov < 2; ++ov) {
        const std::int64_t out_rows = rv == 0 ? d.rows : g.out_h / d.row_slices;
        const std::int64_t out_ch = d.oc_of(ov == 0 ? 0 : d.oc_slices - 1);
        const memory::desc src({1, g.in_channels, d.input_rows(out_rows), d.padded_w},
                               memory::data_type::f32,
                               d.layout == Impl::Layout::planes    ? memory::format_tag::nchw
                               : d.layout == Impl::Layout::blocked ? memory::format_tag::nChw16c
                                                                   : memory::format_tag::nhwc);
        const memory::desc wei({out_ch, g.in_channels, g.kernel_h, g.kernel_w},
                               memory::data_type::f32, memory::format_tag::any);
        const memory::desc dst(
            {1, out_ch, out_rows, g.out_w}, memory::data_type::f32,
            d.channels_last() ? memory::format_tag::nhwc : memory::format_tag::nChw16c);
        const memory::dims strides{g.stride_h, g.stride_w};
        const memory::dims dilates{g.dilation_h - 1, g.dilation_w - 1};
        const memory::dims no_padding{0, 0};
        const dnnl::algorithm algorithm =
            winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
        const auto op =
            bias.empty()
                ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, algorithm,
                                                  src, wei, dst, strides, dilates, no_padding,
                                                  no_padding)
                : dnnl::convolution_forward::desc(
                      dnnl::prop_kind::forward_inference, algorithm, src, wei,
                      memory::desc({out_ch}, memory::data_type::f32, memory::format_tag::x), dst,
                      strides, dilates, no_padding, no_padding);
        dnnl::convolution_forward::primitive_desc pd(op, attr, engine);
        // Only the direct JIT kernels ("jit:...", "jit_1x1:...", "brgconv:..."): the reference
        // implementation and im2col + sgemm ("gemm:jit") are no faster than cgr's own kernels.
        const std::string_view impl_name = pd.impl_info_str();
        if (!impl_name.starts_with("jit") && !impl_name.starts_with("brg")) return nullptr;
        Impl::Variant& v = d.variants[rv][ov];
        v.pd = pd;
        v.primitive = dnnl::convolution_forward(pd);
        d.output_slot =
            std::max(d.output_slot, static_cast<std::int64_t>(pd.dst_desc().get_size() / 4));
        d.scratchpad_slot =
            std::max(d.scratchpad_slot, static_cast<std::int64_t>(pd.scratchpad_desc().get_size()));
        if (rv == 0) d.input_slot = static_cast<std::int64_t>(pd.src_desc().get_size() / 4);
      }
    }
    for (std::int64_t o = 0; !d.bias.empty() && o < d.oc_slices; ++o) {
      d.bias_slices.emplace_back(
          memory::desc({d.oc_of(o)}, memory::data_type::f32, memory::format_tag::x), engine,
          d.bias.data() + o * d.oc);
    }
    // Weights reordered once per oc slice into the format the primitives want; the last row
    // slice's primitive normally wants the same one and shares them.
    dnnl::stream stream(engine);
    for (int rv = 0; rv < 2; ++rv) {
      auto& set = d.weights[rv];
      set.resize(static_cast<std::size_t>(d.oc_slices));
      for (std::int64_t o = 0; o < d.oc_slices; ++o) {
        const int ov = o + 1 < d.oc_slices ? 0 : 1;
        const memory::desc& wanted = d.variants[rv][ov].pd.weights_desc();
        if (rv == 1 && wanted == d.variants[0][ov].pd.weights_desc()) {
          set[static_cast<std::size_t>(o)] = d.weights[0][static_cast<std::size_t>(o)];
          continue;
        }
        const memory::desc plain({d.oc_of(o), g.in_channels, g.kernel_h, g.kernel_w},
                                 memory::data_type::f32, memory::format_tag::oihw);
        memory user(plain, engine, const_cast<float*>(weight.data() + o * d.oc * k));
        d.weight_storage.emplace_back(wanted.get_size() / sizeof(float) + 1);
        memory packed(wanted, engine, d.weight_storage.back().data());
        dnnl::reorder(user, packed).execute(stream, user, packed);
        set[static_cast<std::size_t>(o)] = packed;
      }
    }
    stream.wait();
  } catch (const dnnl::error&) {
    return nullptr;  // no kernel for this geometry: cgr's own path
  }
  d.input_slot = round_up(d.input_slot, kLanes);
  d.output_slot = round_up(d.output_slot, kLanes);
  d.scratchpad_slot = round_up(d.scratchpad_slot, 64);
  return impl;
}

OneDnnConv::OneDnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnConv::~OneDnnConv() = default;

std::size_t OneDnnConv::workspace_bytes() const {
  const Impl& d = *impl_;
  return static_cast<std::size_t>(d.input_slots() * d.input_slot *
                                  static_cast<std::int64_t>(sizeof(float)));
}

bool OneDnnConv::channels_last() const {
  // A 1x1 conv on nChw16c is made again on NHWC when a neighbour is an NHWC value.
  return impl_->channels_last() ||
         (impl_->layout == Impl::Layout::blocked && impl_->pointwise() && nhwc_enabled());
}

bool OneDnnConv::winograd() const {
  return impl_->winograd;
}

bool OneDnnConv::channels_last_output() const {
  // A first conv (planes in, nChw16c out) copies each row slice's result into the NHWC rows.
  return (channels_last() || (impl_->layout == Impl::Layout::planes && nhwc_enabled())) &&
         impl_->nhwc_output;
}

void OneDnnConv::set_channels_last(bool input, bool output) {
  if ((input && !channels_last()) || (output && !channels_last_output())) {
    fail(
        "conv: oneDNN runs this convolution on nChw16c or its weights in several slices: no "
        "channels-last value");
  }
  // Made again where the layout changes (a 1x1 conv from nChw16c to NHWC), and for an NHWC
  // output where the tasks are channel slices (or, 1x1, row slices of the NCHW output's
  // length): row slices over all channels instead. The weights come back from the
  // primitives' format to OIHW.
  const bool remake =
      (input || output) &&
      (!impl_->channels_last() || (output && (impl_->oc_slices > 1 || impl_->pointwise())));
  if (remake) {
    Impl& d = *impl_;
    const Conv2dGeometry& g = d.g;
    const std::int64_t k = g.in_channels * g.kernel_h * g.kernel_w;
    std::vector<float> weight(static_cast<std::size_t>(g.out_channels * k));
    const OneOmpThread one_thread;
    try {
      dnnl::stream stream(cpu_engine());
      for (std::int64_t o = 0; o < d.oc_slices; ++o) {
        const memory::desc plain({d.oc_of(o), g.in_channels, g.kernel_h, g.kernel_w},
                                 memory::data_type::f32, memory::format_tag::oihw);
        memory user(plain, cpu_engine(), weight.data() + o * d.oc * k);
        memory& packed = d.weights[0][static_cast<std::size_t>(o)];
        dnnl::reorder(packed, user).execute(stream, packed, user);
      }
      stream.wait();
    } catch (const dnnl::error& e) {
      fail("conv: oneDNN failed to unpack the weights ({}); set CGR_CPU_CHANNELS_LAST=0", e.what());
    }
    auto whole = make_impl(g, weight, d.bias, output, true, false);
    if (whole == nullptr || (output && whole->oc_slices != 1) ||
        !(whole->channels_last() || (!input && whole->layout == Impl::Layout::planes))) {
      fail(
          "conv: oneDNN has no kernel for this convolution over all channels; set "
          "CGR_CPU_CHANNELS_LAST=0");
    }
    impl_ = std::move(whole);
  }
  impl_->input_nhwc = input;
  impl_->output_nhwc = output;
}

void OneDnnConv::run(const float* input, const float* residual, float* output, float* workspace,
                     const math::Activation& activation, ThreadPool* pool) const {
  const Impl& d = *impl_;
  const Conv2dGeometry& g = d.g;
  const std::int64_t in_plane = g.in_h * g.in_w;
  const std::int64_t out_plane = g.out_h * g.out_w;
  const std::int64_t tasks = d.row_slices * d.oc_slices;
  float* const inputs = workspace;
  const lanes::OutputFinish finish = lanes::output_finish(activation.kind);
  const std::int64_t block_channels = d.layout == Impl::Layout::planes ? g.in_channels : kLanes;
  const std::int64_t copy_grain = std::max<std::int64_t>(
      1, gemm::ceil_div(kCopyTaskFloats, block_channels * d.input_rows(d.rows) * d.padded_w));

  // Channel blocks [b0, b1) of row slice r's input copy (an NHWC input: all its channels, the
  // rows copied whole between their padding) into dst.
  auto copy_slice = [&](const float* image, std::int64_t r, std::int64_t b0, std::int64_t b1,
                        float* dst) {
    const std::int64_t rows_in = d.input_rows(d.rows_of(r));
    const std::int64_t y0 = d.first_row(r) * g.stride_h;  // padded row of the slice's top
    if (d.input_nhwc) {
      const std::int64_t point_floats = g.in_channels;
      for (std::int64_t y = 0; y < rows_in; ++y, dst += d.padded_w * point_floats) {
        const std::int64_t ih = y0 + y - g.pad_top;
        if (ih < 0 || ih >= g.in_h) {
          std::fill_n(dst, d.padded_w * point_floats, 0.0f);
          continue;
        }
        std::fill_n(dst, g.pad_left * point_floats, 0.0f);
        std::memcpy(dst + g.pad_left * point_floats, image + ih * g.in_w * point_floats,
                    static_cast<std::size_t>(g.in_w * point_floats) * sizeof(float));
        std::fill(dst + (g.pad_left + g.in_w) * point_floats, dst + d.padded_w * point_floats,
                  0.0f);
      }
      return;
    }
    const std::int64_t ih0 = std::clamp<std::int64_t>(y0 - g.pad_top, 0, g.in_h);
    const std::int64_t ih1 = std::clamp<std::int64_t>(y0 + rows_in - g.pad_top, ih0, g.in_h);
    const lanes::PaddedImage part{ih1 - ih0, g.in_w, ih0 + g.pad_top - y0, g.pad_left, d.padded_w};
    if (d.layout == Impl::Layout::planes) {
      copy_planes(image + ih0 * g.in_w, in_plane, g.in_channels, part, rows_in, dst);
      return;
    }
    // Each block's channels of every point of the slice's copy: a block of its own (nChw16c)
    // or a slice of each NHWC point.
    for (std::int64_t block = b0; block < b1; ++block) {
      const std::int64_t c0 = block * kLanes;
      const std::int64_t channels = std::min(kLanes, g.in_channels - c0);
      const bool nhwc = d.channels_last();
      float* const block_dst = dst + (nhwc ? c0 : block * rows_in * d.padded_w * kLanes);
      const std::int64_t point_stride = nhwc ? g.in_channels : kLanes;
      lanes::fill_padding(block_dst, rows_in, part, 0.0f, point_stride, nhwc ? channels : kLanes);
      if (part.in_h > 0) {
        lanes::planes_to_lanes(image + c0 * in_plane + ih0 * g.in_w, in_plane, channels, part,
                               block_dst, point_stride);
      }
    }
  };

  for (std::int64_t n = 0; n < g.batch; ++n) {
    const float* image = input + n * g.in_channels * in_plane;
    // 1. Input copies in the workspace (Impl::input_slots), items (row slice, channel block);
    // otherwise each task copies its own in step 2 (Impl::input_in_scratch).
    if (d.input_slots() > 0) {
      const bool whole = d.input_nhwc || d.layout == Impl::Layout::planes;
      const std::int64_t blocks = whole ? 1 : d.in_blocks;
      gemm::parallel_range(pool, d.row_slices * blocks, d.input_nhwc ? 1 : copy_grain,
                           [&](std::int64_t begin, std::int64_t end) {
                             for (std::int64_t item = begin; item < end; ++item) {
                               const std::int64_t r = item / blocks;
                               const std::int64_t block = item % blocks;
                               copy_slice(image, r, block, block + 1, inputs + r * d.input_slot);
                             }
                           });
    }
    // 2. Convolution and epilogue: items (row slice, oc slice).
    gemm::parallel_range(pool, tasks, 1, [&](std::int64_t begin, std::int64_t end) {
      thread_local dnnl::stream stream(cpu_engine());
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t r = item / d.oc_slices;
        const std::int64_t o = item % d.oc_slices;
        const Impl::Variant& v = d.variant(r, o);
        // An NHWC output (all channels in one slice): the slice's rows are one dense run of the
        // output, where the primitive writes straight away.
        const std::int64_t out_rows = d.rows_of(r);
        const std::int64_t points = out_rows * g.out_w;
        float* const nhwc_rows =
            d.output_nhwc ? output + (n * out_plane + d.first_row(r) * g.out_w) * g.out_channels
                          : nullptr;
        float* const in_place = d.output_in_place() ? nhwc_rows : nullptr;
        // The thread's scratch: the primitive's scratchpad (Winograd's runs to 8 MiB, which one
        // slot per task in the arena made 7x ResNet-18's arena), the task's result unless it is
        // written in place, and for a Unary activation its planes. A result the task finishes
        // at once stays in the thread's L2 from task to task; a slot per task in the workspace
        // came from memory every run (MobileNet-v2's first conv, 1.6 MB of nChw16c results).
        const std::int64_t scratchpad_floats = d.scratchpad_slot / std::int64_t{sizeof(float)};
        const std::int64_t result_floats = in_place != nullptr ? 0 : d.output_slot;
        const std::int64_t planes_floats =
            nhwc_rows == nullptr && finish == nullptr ? kLanes * points : 0;
        const std::int64_t copy_floats = d.input_in_scratch() ? d.input_slot : 0;
        const lanes::ThreadScratch scratch(static_cast<std::size_t>(
            scratchpad_floats + result_floats + planes_floats + copy_floats + 1));
        float* const result = in_place != nullptr ? in_place : scratch.data() + scratchpad_floats;
        float* src_data =
            d.input_in_place()
                ? const_cast<float*>(image) + d.first_row(r) * g.stride_h * g.in_w * g.in_channels
                : inputs + r * d.input_slot;
        if (d.input_in_scratch()) {
          src_data = scratch.data() + scratchpad_floats + result_floats + planes_floats;
          copy_slice(image, r, 0, d.in_blocks, src_data);
        }
        try {
          memory src(v.pd.src_desc(), cpu_engine(), src_data);
          memory dst(v.pd.dst_desc(), cpu_engine(), result);
          memory scratchpad(v.pd.scratchpad_desc(), cpu_engine(), scratch.data());
          std::unordered_map<int, memory> args{
              {DNNL_ARG_SRC, src},
              {DNNL_ARG_WEIGHTS, d.weights[d.row_variant(r)][static_cast<std::size_t>(o)]},
              {DNNL_ARG_DST, dst},
              {DNNL_ARG_SCRATCHPAD, scratchpad}};
          if (!d.bias_slices.empty()) {
            args.emplace(DNNL_ARG_BIAS, d.bias_slices[static_cast<std::size_t>(o)]);
          }
          // Kernels that size their team at run time (Winograd's) read the calling thread's
          // OpenMP count: one, so a task never starts a team beside cgr's threads.
          const OneOmpThread one_thread;
          v.primitive.execute(stream, args);
          stream.wait();
        } catch (const dnnl::error& e) {
          fail("conv: oneDNN failed ({}, status {}); set CGR_ONEDNN=0 to use cgr's own kernels",
               e.what(), static_cast<int>(e.status));
        }
        if (nhwc_rows != nullptr) {
          // An nChw16c result (a first conv's) into the NHWC rows block by block, a ReLU or
          // Clip clamped on the way where no residual comes first.
          const gemm::GemmActivation on_copy =
              residual == nullptr ? gemm::gemm_activation(activation) : gemm::GemmActivation{};
          if (in_place == nullptr)
            lanes::blocked_to_nhwc(result, points, g.out_channels, nhwc_rows, g.out_channels,
                                   on_copy);
          // The residual (NHWC too) and the activation in place over the dense rows.
          const bool done = in_place == nullptr ? residual == nullptr && on_copy.other == nullptr
                                                : residual == nullptr &&
                                                      activation.kind == math::ActivationKind::none;
          if (!done) {
            const float* res = residual != nullptr ? residual + (nhwc_rows - output) : nullptr;
            flat_epilogue(nhwc_rows, points * g.out_channels, res, nhwc_rows, 1,
                          points * g.out_channels, nullptr, activation, true);
          }
          continue;
        }
        // Out to NCHW, 16 channels at a time: in an NHWC result the block's lanes are a
        // slice of each point, in an nChw16c one a block of points.
        const std::int64_t point_stride = d.channels_last() ? d.oc_of(o) : kLanes;
        for (std::int64_t b = 0; b * kLanes < d.oc_of(o); ++b) {
          const std::int64_t c0 = o * d.oc + b * kLanes;
          const std::int64_t channels = std::min(kLanes, g.out_channels - c0);
          const std::int64_t at = (n * g.out_channels + c0) * out_plane + d.first_row(r) * g.out_w;
          const float* res = residual != nullptr ? residual + at : nullptr;
          const float* lanes_block =
              result + (d.channels_last() ? b * kLanes : b * points * kLanes);
          if (finish != nullptr) {
            finish(lanes_block, point_stride, points, channels, res, output + at, out_plane,
                   activation.alpha, activation.beta);
            continue;
          }
          float* const planes = scratch.data() + scratchpad_floats + result_floats;
          lanes::lanes_to_planes(lanes_block, points, channels, planes, points, point_stride);
          for (std::int64_t c = 0; c < channels; ++c) {
            flat_epilogue(planes + c * points, points,
                          res != nullptr ? res + c * out_plane : nullptr,
                          output + at + c * out_plane, 1, points, nullptr, activation, true);
          }
        }
      }
    });
  }
}

#else  // no oneDNN in this build (or not x86): never wanted

struct OneDnnConv::Impl {};
bool OneDnnConv::wanted(const Conv2dGeometry&) {
  return false;
}
std::unique_ptr<OneDnnConv> OneDnnConv::make(const Conv2dGeometry&, std::span<const float>,
                                             std::span<const float>) {
  return nullptr;
}
OneDnnConv::OneDnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneDnnConv::~OneDnnConv() = default;
std::size_t OneDnnConv::workspace_bytes() const {
  return 0;
}
void OneDnnConv::run(const float*, const float*, float*, float*, const math::Activation&,
                     ThreadPool*) const {}
bool OneDnnConv::channels_last() const {
  return false;
}
bool OneDnnConv::winograd() const {
  return false;
}
bool OneDnnConv::channels_last_output() const {
  return false;
}
void OneDnnConv::set_channels_last(bool input, bool output) {
  if (input || output) fail("conv: no oneDNN in this build: no channels-last value");
}

#endif

}  // namespace cgr::cpu
