// The launch descriptions of cgr's CUDA kernels, checked on the CPU (no device needed): the
// function, grid, block and argument values the executor launches or adds as a kernel node.
// Only in builds with CUDA.
#include <doctest/doctest.h>

#if defined(CGR_HAVE_CUDA)

#include <cstdint>
#include <set>
#include <string>

#include "cgr/capture/cuda_names.hpp"
#include "cgr/capture/explicit_graph.hpp"
#include "cgr/layers/element_math.hpp"
#include "gpu_op.hpp"
#include "ops/activation.hpp"
#include "ops/add.hpp"
#include "ops/concat.hpp"
#include "ops/conv_transpose2d.hpp"
#include "ops/exit_decision.hpp"
#include "ops/local_response_norm.hpp"
#include "ops/pool2d.hpp"
#include "ops/row_norm.hpp"
#include "ops/transpose.hpp"
#include "test_support.hpp"

using namespace cgr::cuda;
using cgr::Pool2dGeometry;
using cgr::TransposeGeometry;

TEST_CASE("kernel launch descriptions: grid, block and arguments as the kernel takes them") {
  float* x = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  float* y = reinterpret_cast<float*>(std::uintptr_t{0x2000});

  const KernelLaunch relu = describe_relu(x, y, 1000);
  REQUIRE(relu.status == cudaSuccess);
  CHECK_FALSE(relu.empty());
  CHECK(relu.grid.x == 4);  // 1000 elements, 256 threads per block
  CHECK(relu.block.x == 256);
  CHECK(relu.shared_bytes == 0);
  // The unary kernel: x, y, n and the element function object (cgr::math::ReluFn, empty).
  REQUIRE(relu.argument_count() == 4);
  CHECK(relu.argument_size(0) == sizeof(const float*));
  CHECK(relu.argument_size(2) == sizeof(std::int64_t));
  CHECK(relu.argument_size(3) == sizeof(cgr::math::ReluFn));
  CHECK(relu.argument<const float*>(0) == x);
  CHECK(relu.argument<float*>(1) == y);
  CHECK(relu.argument<std::int64_t>(2) == 1000);
  // The pointers handed to cudaLaunchKernel / kernel node parameters point at those values.
  const auto pointers = relu.argument_pointers();
  CHECK(*static_cast<std::int64_t*>(pointers[2]) == 1000);

  // A grid-stride kernel caps its grid: 2^40 elements still take 2^20 blocks.
  CHECK(describe_relu(x, y, std::int64_t{1} << 40).grid.x == (1u << 20));

  // Mixed argument types keep their alignment: a struct of floats after pointers and an int64.
  const KernelLaunch clip = describe_clip(x, y, 7, -0.5f, 0.25f);
  REQUIRE(clip.argument_count() == 4);
  REQUIRE(clip.argument_size(3) == sizeof(cgr::math::ClipFn));
  CHECK(clip.argument<cgr::math::ClipFn>(3).low == -0.5f);
  CHECK(clip.argument<cgr::math::ClipFn>(3).high == 0.25f);

  // Different kernels for different template choices.
  const cgr::math::Activation relu_fn{.kind = cgr::math::ActivationKind::relu};
  const cgr::math::Activation silu_fn{.kind = cgr::math::ActivationKind::unary,
                                      .unary = cgr::math::UnaryOp::silu};
  CHECK(describe_add(x, x, y, 10, relu_fn).function != describe_add(x, x, y, 10, {}).function);
  CHECK(describe_add(x, x, y, 10, silu_fn).function != describe_add(x, x, y, 10, relu_fn).function);
  // A fused activation after a library call: one kernel, the activation as its argument.
  const KernelLaunch fused = describe_activation(x, y, 100, silu_fn);
  REQUIRE(fused.argument_count() == 4);
  REQUIRE(fused.argument_size(3) == sizeof(cgr::math::Activation));
  CHECK(fused.argument<cgr::math::Activation>(3) == silu_fn);
  CHECK(fused.argument<float*>(1) == y);
  CHECK(describe_relu(x, y, 10).function != describe_clip(x, y, 10, 0, 1).function);
}

TEST_CASE("kernel launch descriptions: empty work describes nothing, bad sizes are refused") {
  float* x = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  const KernelLaunch none = describe_relu(x, x, 0);
  CHECK(none.empty());
  CHECK(none.status == cudaSuccess);
  CHECK(launch(none, nullptr) == cudaSuccess);  // launches nothing, needs no device
  const KernelLaunch negative = describe_relu(x, x, -1);
  CHECK(negative.status == cudaErrorInvalidValue);
  CHECK(std::string(negative.refusal) == "elementwise: a negative element count");
  // The executor's error names the op, the reason and the CUDA error.
  const std::string message =
      cgr::test::error_message([&] { check_description(negative, "relu7"); });
  CHECK(message.find("'relu7': its CUDA kernel refused the launch: elementwise: a negative "
                     "element count (cudaErrorInvalidValue") == 0);
  CHECK_NOTHROW(check_description(none, "relu0"));
  CHECK(launch(negative, nullptr) == cudaErrorInvalidValue);
  CHECK(describe_concat_part(x, x, 2, 5, 8, 4).status == cudaErrorInvalidValue);  // 4 + 5 > 8
  Pool2dGeometry dilated{1, 8, 8, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, 2, 2, true};
  CHECK(describe_max_pool2d(x, x, dilated).status == cudaSuccess);
  CHECK(describe_avg_pool2d(x, x, dilated).status == cudaErrorInvalidValue);  // no dilation
  CHECK(std::string(describe_avg_pool2d(x, x, dilated).refusal) ==
        "average pool: a dilation other than 1");
  CHECK(std::string(describe_concat_part(x, x, 2, 5, 8, 4).refusal).starts_with("concat: "));
}

TEST_CASE("explicit graph: dependencies after captured tails are default edges, each tail once") {
  // Fake node handles: Dependencies::after only compares them.
  const auto node = [](std::uintptr_t n) { return reinterpret_cast<cudaGraphNode_t>(n * 0x100); };
  cudaGraphEdgeData programmatic{};
  programmatic.type = cudaGraphDependencyTypeProgrammatic;
  programmatic.from_port = cudaGraphKernelNodePortProgrammatic;
  cgr::capture::Segment a{{node(1), node(2)}, {node(2)}, {programmatic}};
  cgr::capture::Segment b{{node(3)}, {node(3), node(2)}, {cudaGraphEdgeData{}, programmatic}};
  const cgr::capture::Segment* both[] = {&a, &b};
  const cgr::capture::Dependencies deps = cgr::capture::Dependencies::after(both);
  REQUIRE(deps.nodes.size() == 2);
  CHECK(std::set<cudaGraphNode_t>(deps.nodes.begin(), deps.nodes.end()) ==
        std::set<cudaGraphNode_t>{node(2), node(3)});
  REQUIRE(deps.edges.size() == 2);
  for (const cudaGraphEdgeData& edge : deps.edges) {
    CHECK(edge.type == cudaGraphDependencyTypeDefault);
    CHECK(edge.from_port == 0);
    CHECK(edge.to_port == 0);
  }
}

TEST_CASE("CUDA enumerations by name in messages") {
  using namespace cgr::capture;
  CHECK(capture_status_name(cudaStreamCaptureStatusInvalidated).starts_with("Invalidated"));
  CHECK(capture_status_name(cudaStreamCaptureStatusNone).starts_with("None"));
  CHECK(instantiate_result_name(cudaGraphInstantiateConditionalHandleUnused)
            .starts_with("ConditionalHandleUnused"));
  CHECK(instantiate_result_name(cudaGraphInstantiateInvalidStructure)
            .starts_with("InvalidStructure"));
  CHECK(node_type_name(cudaGraphNodeTypeConditional) == "conditional");
  CHECK(node_type_name(cudaGraphNodeTypeMemcpy) == "memcpy");
  CHECK(node_type_name(static_cast<cudaGraphNodeType>(0x7f)) == "unknown");
}

TEST_CASE("kernel launch descriptions: struct arguments and the exit decision's handle") {
  float* x = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  TransposeGeometry g{};
  g.rank = 4;
  const std::int64_t dims[4] = {2, 11, 13, 8}, strides[4] = {1144, 13, 1, 143};
  for (int d = 0; d < 4; ++d) {
    g.out_dims[d] = dims[d];
    g.source_strides[d] = strides[d];
  }
  const KernelLaunch t = describe_transpose(x, x, g);
  REQUIRE(t.status == cudaSuccess);
  REQUIRE(t.argument_count() == 4);
  REQUIRE(t.argument_size(2) == sizeof(TransposeGeometry));
  REQUIRE(t.argument_size(3) == sizeof(std::int32_t));
  const auto copy = t.argument<TransposeGeometry>(2);
  CHECK(copy.rank == 4);
  CHECK(copy.out_dims[3] == 8);
  CHECK(copy.source_strides[0] == 1144);
  CHECK(t.argument<std::int32_t>(3) == 2 * 11 * 13 * 8);  // the 32-bit index kernel

  int* fired = reinterpret_cast<int*>(std::uintptr_t{0x3000});
  const cudaGraphConditionalHandle handle = 0x1234'5678'9abcULL;
  const KernelLaunch decision = describe_exit_decision(x, x, fired, 3, 1000, 0.9f, true, handle);
  REQUIRE(decision.status == cudaSuccess);
  CHECK(decision.grid.x == 1);        // one block decides
  CHECK(decision.block.x == 3 * 32);  // a warp per sample
  REQUIRE(decision.argument_count() == 8);
  CHECK(decision.argument_size(6) == sizeof(bool));
  CHECK(decision.argument_size(7) == sizeof(cudaGraphConditionalHandle));
  CHECK(decision.argument<int*>(2) == fired);
  CHECK(decision.argument<float>(5) == 0.9f);
  CHECK(decision.argument<bool>(6));
  CHECK(decision.argument<cudaGraphConditionalHandle>(7) == handle);
}

TEST_CASE("kernel launch descriptions: ConvTranspose2d's trim and bias after cuDNN") {
  const float* full = reinterpret_cast<const float*>(std::uintptr_t{0x1000});
  const float* bias = reinterpret_cast<const float*>(std::uintptr_t{0x3000});
  float* y = reinterpret_cast<float*>(std::uintptr_t{0x2000});
  // cuDNN's full 9x9 result trimmed by one row at the top, with a row and a column past it.
  const ConvTransposeTrim g{.planes = 6,
                            .channels = 3,
                            .full_h = 9,
                            .full_w = 9,
                            .out_h = 9,
                            .out_w = 10,
                            .top = 1,
                            .left = 0};
  const KernelLaunch t = describe_conv_transpose_trim(full, bias, y, g);
  REQUIRE(t.status == cudaSuccess);
  REQUIRE(t.argument_count() == 11);
  CHECK(t.argument<const float*>(0) == full);
  CHECK(t.argument<const float*>(1) == bias);
  CHECK(t.argument<float*>(2) == y);
  REQUIRE(t.argument_size(3) == sizeof(std::int32_t));  // the 32-bit index kernel
  CHECK(t.argument<std::int32_t>(3) == 6 * 9 * 10);
  CHECK(t.argument<std::int32_t>(4) == 3);   // channels: bias[plane % 3]
  CHECK(t.argument<std::int32_t>(9) == 1);   // top
  CHECK(t.argument<std::int32_t>(10) == 0);  // left
  CHECK(t.grid.x == 3);                      // 540 outputs, 256 a block
  // Sizes past 32-bit indices take the 64-bit kernel; no bias is a null pointer.
  ConvTransposeTrim big = g;
  big.planes = std::int64_t{1} << 24;
  const KernelLaunch wide = describe_conv_transpose_trim(full, nullptr, y, big);
  REQUIRE(wide.status == cudaSuccess);
  CHECK(wide.function != t.function);
  CHECK(wide.argument_size(3) == sizeof(std::int64_t));
  CHECK(wide.argument<const float*>(1) == nullptr);
  ConvTransposeTrim empty = g;
  empty.planes = 0;
  CHECK(describe_conv_transpose_trim(full, bias, y, empty).empty());
  ConvTransposeTrim bad = g;
  bad.top = -1;
  CHECK(std::string(describe_conv_transpose_trim(full, bias, y, bad).refusal) ==
        "conv transpose trim: a negative size or offset, or no channels");
}

TEST_CASE("kernel launch descriptions: the normalisations") {
  float* x = reinterpret_cast<float*>(std::uintptr_t{0x1000});
  float* y = reinterpret_cast<float*>(std::uintptr_t{0x2000});
  const float* scale = reinterpret_cast<const float*>(std::uintptr_t{0x3000});
  const float* shift = reinterpret_cast<const float*>(std::uintptr_t{0x4000});
  // Row norm: a block per row, as wide as the row in whole warps, up to 256 threads.
  cgr::RowNormGeometry g{.rows = 7, .cols = 5, .channels = 3, .affine_per_row = true, .eps = 1e-3f};
  const KernelLaunch narrow = describe_row_norm(x, scale, shift, y, g);
  REQUIRE(narrow.status == cudaSuccess);
  CHECK(narrow.grid.x == 7);
  CHECK(narrow.block.x == 32);
  REQUIRE(narrow.argument_count() == 5);
  REQUIRE(narrow.argument_size(4) == sizeof(cgr::RowNormGeometry));
  CHECK(narrow.argument<const float*>(1) == scale);
  CHECK(narrow.argument<const float*>(2) == shift);
  CHECK(narrow.argument<cgr::RowNormGeometry>(4).channels == 3);
  CHECK(narrow.argument<cgr::RowNormGeometry>(4).eps == 1e-3f);
  g.cols = 96;  // ConvNeXt's channels, channels-last
  CHECK(describe_row_norm(x, scale, shift, y, g).block.x == 96);
  g.cols = 3136;  // an InstanceNorm plane of 56 x 56
  g.rows = std::int64_t{1} << 21;
  CHECK(describe_row_norm(x, scale, shift, y, g).block.x == 256);
  CHECK(describe_row_norm(x, scale, shift, y, g).grid.x == (1u << 20));  // rows grid-stride
  g.rows = 0;
  CHECK(describe_row_norm(x, scale, shift, y, g).empty());
  g.rows = 4;
  g.channels = 0;
  CHECK(describe_row_norm(x, scale, shift, y, g).status == cudaErrorInvalidValue);

  // LRN: an element per thread, 32-bit indices when they fit.
  cgr::LocalResponseNormGeometry lrn{.batch = 2,
                                     .channels = 8,
                                     .plane = 143,
                                     .before = 2,
                                     .after = 2,
                                     .alpha_over_size = 1e-4f,
                                     .beta = 0.75f,
                                     .bias = 1.0f};
  const KernelLaunch window = describe_local_response_norm(x, y, lrn);
  REQUIRE(window.status == cudaSuccess);
  CHECK(window.grid.x == 9);  // 2288 elements
  REQUIRE(window.argument_count() == 4);
  REQUIRE(window.argument_size(3) == sizeof(std::int32_t));
  CHECK(window.argument<std::int32_t>(3) == 2288);
  CHECK(window.argument<cgr::LocalResponseNormGeometry>(2).after == 2);
  lrn.plane = std::int64_t{1} << 28;
  CHECK(describe_local_response_norm(x, y, lrn).argument_size(3) == sizeof(std::int64_t));
  lrn.before = -1;
  CHECK(describe_local_response_norm(x, y, lrn).status == cudaErrorInvalidValue);
}

TEST_CASE("kernel launch descriptions: too many argument bytes are refused, not overrun") {
  KernelLaunch launch;
  struct Big {
    unsigned char bytes[200];
  };
  launch.push(Big{});
  CHECK(launch.status == cudaSuccess);
  launch.push(Big{});  // 400 bytes > the 384 the description holds
  CHECK(launch.status == cudaErrorInvalidValue);
  CHECK(launch.argument_count() == 1);
}

#endif  // CGR_HAVE_CUDA
