// How the CUPTI timeline (cgr_bench_core) names what the device reports: kernel symbols, and the
// graph nodes behind each activity, from ids recorded on an H200. No device needed.
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cupti_timeline.hpp"

namespace {

// Recorded on an H200 (CUDA 13.0, driver 580.159.04) with CGR_CUPTI_DEBUG=1: resnet18-exits at
// 64x64, dag, early exits at threshold 1 (every IF body ran). Template ids: graph 40 the
// top level, 41-43 the bodies of if:exit0..2; the instantiated top level is graph 44.
const std::vector<std::pair<std::uint64_t, std::string>> kTemplateNodes = {
    {171798691840u, "copy-in"},
    {171798691841u, "conv1+bn1+relu"},
    {171798691842u, "maxpool"},
    {171798691843u, "layer1.0.conv1+layer1.0.bn1+layer1.0.relu1"},
    {171798691844u, "layer1.0.conv2+layer1.0.bn2+layer1.0.add+layer1.0.relu2"},
    {171798691845u, "layer1.1.conv1+layer1.1.bn1+layer1.1.relu1"},
    {171798691846u, "layer1.1.conv2+layer1.1.bn2+layer1.1.add+layer1.1.relu2"},
    {171798691847u, "layer2.0.conv1+layer2.0.bn1+layer2.0.relu1"},
    {171798691848u, "layer2.0.downsample.0+layer2.0.downsample.1"},
    {171798691849u, "exits.0.conv+exits.0.bn+exits.0.relu"},
    {171798691850u, "layer2.0.conv2+layer2.0.bn2+layer2.0.add+layer2.0.relu2"},
    {171798691851u, "exits.0.pool+exits.0.flatten+exits.0.fc"},
    {171798691852u, "copy-out:exits.0.pool+exits.0.flatten+exits.0.fc"},
    {171798691853u, "layer2.1.conv1+layer2.1.bn1+layer2.1.relu1"},
    {171798691854u, "exit0.decide"},
    {171798691855u, "copy-out:exit0.decide"},
    {171798691856u, "copy-out:exit0.decide"},
    {171798691857u, "layer2.1.conv2+layer2.1.bn2+layer2.1.add+layer2.1.relu2"},
    {171798691858u, "if:exit0"},
    {176093659136u, "layer3.0.conv1+layer3.0.bn1+layer3.0.relu1"},
    {176093659137u, "layer3.0.downsample.0+layer3.0.downsample.1"},
    {176093659138u, "exits.1.conv+exits.1.bn+exits.1.relu"},
    {176093659139u, "layer3.0.conv2+layer3.0.bn2+layer3.0.add+layer3.0.relu2"},
    {176093659140u, "exits.1.pool+exits.1.flatten+exits.1.fc"},
    {176093659141u, "copy-out:exits.1.pool+exits.1.flatten+exits.1.fc"},
    {176093659142u, "layer3.1.conv1+layer3.1.bn1+layer3.1.relu1"},
    {176093659143u, "exit1.decide"},
    {176093659144u, "copy-out:exit1.decide"},
    {176093659145u, "copy-out:exit1.decide"},
    {176093659146u, "layer3.1.conv2+layer3.1.bn2+layer3.1.add+layer3.1.relu2"},
    {176093659147u, "if:exit1"},
    {180388626432u, "layer4.0.conv1+layer4.0.bn1+layer4.0.relu1"},
    {180388626433u, "layer4.0.downsample.0+layer4.0.downsample.1"},
    {180388626434u, "exits.2.conv+exits.2.bn+exits.2.relu"},
    {180388626435u, "layer4.0.conv2+layer4.0.bn2+layer4.0.add+layer4.0.relu2"},
    {180388626436u, "exits.2.pool+exits.2.flatten+exits.2.fc"},
    {180388626437u, "copy-out:exits.2.pool+exits.2.flatten+exits.2.fc"},
    {180388626438u, "layer4.1.conv1+layer4.1.bn1+layer4.1.relu1"},
    {180388626439u, "exit2.decide"},
    {180388626440u, "copy-out:exit2.decide"},
    {180388626441u, "copy-out:exit2.decide"},
    {180388626442u, "layer4.1.conv2+layer4.1.bn2+layer4.1.add+layer4.1.relu2"},
    {180388626443u, "if:exit2"},
    {184683593728u, "avgpool+flatten+fc"},
    {184683593729u, "copy-out:avgpool+flatten+fc"},
};
const std::vector<std::pair<std::uint64_t, std::uint64_t>> kCloneOf = {
    {188978561024u, 171798691840u}, {188978561025u, 171798691841u}, {188978561026u, 171798691842u},
    {188978561027u, 171798691843u}, {188978561028u, 171798691844u}, {188978561029u, 171798691845u},
    {188978561030u, 171798691846u}, {188978561031u, 171798691847u}, {188978561032u, 171798691848u},
    {188978561033u, 171798691849u}, {188978561034u, 171798691850u}, {188978561035u, 171798691851u},
    {188978561036u, 171798691852u}, {188978561037u, 171798691853u}, {188978561038u, 171798691854u},
    {188978561039u, 171798691855u}, {188978561040u, 171798691856u}, {188978561041u, 171798691857u},
    {188978561042u, 171798691858u}, {193273528320u, 176093659136u}, {193273528321u, 176093659137u},
    {193273528322u, 176093659138u}, {193273528323u, 176093659139u}, {193273528324u, 176093659140u},
    {193273528325u, 176093659141u}, {193273528326u, 176093659142u}, {193273528327u, 176093659143u},
    {193273528328u, 176093659144u}, {193273528329u, 176093659145u}, {193273528330u, 176093659146u},
    {193273528331u, 176093659147u}, {197568495616u, 180388626432u}, {197568495617u, 180388626433u},
    {197568495618u, 180388626434u}, {197568495619u, 180388626435u}, {197568495620u, 180388626436u},
    {197568495621u, 180388626437u}, {197568495622u, 180388626438u}, {197568495623u, 180388626439u},
    {197568495624u, 180388626440u}, {197568495625u, 180388626441u}, {197568495626u, 180388626442u},
    {197568495627u, 180388626443u}, {201863462912u, 184683593728u}, {201863462913u, 184683593729u},
};
// The nodes that ran, in the order CUPTI delivered them, with the kernel's short name ("B":
// a memcpy record).
const std::vector<std::pair<std::uint64_t, std::string>> kRan = {
    {188978561024u, "B"},
    {188978561025u, "implicit_convolve_sgemm"},
    {188978561026u, "max_pool2d_kernel"},
    {188978561027u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561028u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561029u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561030u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561031u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561032u, "implicit_convolve_sgemm"},
    {188978561033u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561034u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561035u, "linear_rows_kernel"},
    {188978561037u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561038u, "exit_decision_kernel"},
    {188978561041u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561036u, "B"},
    {188978561039u, "B"},
    {188978561040u, "B"},
    {188978561053u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561052u, "memcpy32_post"},
    {188978561051u, "memcpy32_post"},
    {188978561050u, "exit_decision_kernel"},
    {188978561049u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561048u, "memcpy32_post"},
    {188978561047u, "linear_rows_kernel"},
    {188978561046u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561045u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561044u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561043u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561065u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561064u, "memcpy32_post"},
    {188978561063u, "memcpy32_post"},
    {188978561062u, "exit_decision_kernel"},
    {188978561061u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561060u, "memcpy32_post"},
    {188978561059u, "linear_rows_kernel"},
    {188978561058u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561057u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561056u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561055u, "sm80_xmma_fprop_implicit_gemm"},
    {188978561068u, "memcpy32_post"},
    {188978561067u, "linear_rows_kernel"},
};

}  // namespace

TEST_CASE("timeline kernel names: nvcc's anonymous namespaces, templates, library names") {
  using cgr::bench::short_kernel_name;
  // Symbols as CUPTI reported them on an H200 (CUDA 13.0): cgr's kernels live in anonymous
  // namespaces, which nvcc mangles in a form the C++ demangler refuses as it is.
  CHECK(short_kernel_name("_ZN3cgr4cuda41_GLOBAL__N__d7f59ebd_9_linear_cu_857f357118linear_rows_"
                          "kernelEPKfS3_S3_Pfiii") == "linear_rows_kernel");
  CHECK(short_kernel_name("_ZN3cgr4cuda41_GLOBAL__N__d0d7c17b_9_pool2d_cu_b3ac7d1017max_pool2d_"
                          "kernelIiEEvPKfPfNS1_6WindowIT_EE") == "max_pool2d_kernel");
  CHECK(short_kernel_name("_ZN3cgr4cuda49_GLOBAL__N__74d256d2_16_exit_decision_cu_52a641f520exit_"
                          "decision_kernelEPKfPfPillfby") == "exit_decision_kernel");
  // A plain function, a template in a named namespace, an unmangled library kernel.
  CHECK(short_kernel_name("_Z3foov") == "foo");
  CHECK(short_kernel_name("_ZN2ns6kernelIfLi4EEEvPKT_") == "kernel");
  const std::string library = "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw";
  CHECK(short_kernel_name(library) == library);
  // Malformed length prefixes are left alone, never read past the end.
  CHECK(short_kernel_name("_ZN3cgr99_GLOBAL__N__x") == "_ZN3cgr99_GLOBAL__N__x");
  CHECK(short_kernel_name("9999999999_GLOBAL__N__") == "9999999999_GLOBAL__N__");
}

TEST_CASE(
    "timeline graph nodes: every node that ran on an H200 maps to its op, IF bodies included") {
  using Work = cgr::bench::GraphNodeOwners::Work;
  std::map<std::uint64_t, cgr::bench::GraphNodeOwners::TemplateNode> nodes;
  for (const auto& [id, owner] : kTemplateNodes) {
    const Work work = owner.starts_with("copy-") ? Work::memcpy
                      : owner.starts_with("if:") ? Work::other
                                                 : Work::kernel;
    nodes[id] = {owner, work};
  }
  const cgr::bench::GraphNodeOwners owners(nodes, {kCloneOf.begin(), kCloneOf.end()});
  std::map<std::string, int> ran_per_owner;
  for (const auto& [node, kernel] : kRan) {
    CAPTURE(node);
    CAPTURE(kernel);
    const std::string owner = owners.owner(node, kernel == "B" ? Work::memcpy : Work::kernel);
    REQUIRE(!owner.empty());
    ++ran_per_owner[owner];
    // The work fits the op it is charged to (a body runs its copies as memcpy32_post kernels).
    if (owner.starts_with("copy-")) {
      CHECK((kernel == "B" || kernel == "memcpy32_post"));
    } else if (owner.ends_with(".decide")) {
      CHECK(kernel == "exit_decision_kernel");
    } else if (owner.ends_with("fc")) {
      CHECK(kernel == "linear_rows_kernel");
    } else if (owner == "maxpool") {
      CHECK(kernel == "max_pool2d_kernel");
    } else {
      CHECK((kernel == "implicit_convolve_sgemm" || kernel == "sm80_xmma_fprop_implicit_gemm"));
    }
  }
  // Every template node with work ran exactly once (threshold 1: no exit fired).
  std::map<std::string, int> work_per_owner;
  for (const auto& [id, node] : nodes) {
    if (node.work != Work::other) ++work_per_owner[node.owner];
  }
  CHECK(ran_per_owner == work_per_owner);
  // The first node of if:exit0's body: no clone record, mapped by its number (19 top-level
  // nodes, then the bodies'); a copy record for that kernel node does not fit.
  CHECK(owners.owner(188978561043u, Work::kernel) == "layer3.0.conv1+layer3.0.bn1+layer3.0.relu1");
  CHECK(owners.owner(188978561043u, Work::memcpy).empty());
  // Past the last body node (the driver's own nodes), in another graph, or no node: untraced.
  CHECK(owners.owner(188978561069u, Work::kernel).empty());
  CHECK(owners.owner((99ull << 32) | 3u, Work::kernel).empty());
  CHECK(owners.owner(0, Work::kernel).empty());
}

TEST_CASE("timeline graph nodes: clones of clones are followed, a cycle of records ends") {
  using Work = cgr::bench::GraphNodeOwners::Work;
  const std::uint64_t a = 1ull << 32, b = 2ull << 32, c = 3ull << 32;
  const cgr::bench::GraphNodeOwners chain({{a, {"op", Work::kernel}}}, {{c, b}, {b, a}});
  CHECK(chain.owner(c, Work::kernel) == "op");
  CHECK(chain.owner(b, Work::kernel) == "op");
  const cgr::bench::GraphNodeOwners cycle({{a, {"op", Work::kernel}}}, {{b, c}, {c, b}});
  CHECK(cycle.owner(b, Work::kernel).empty());
  const cgr::bench::GraphNodeOwners none({}, {});
  CHECK(none.owner(a, Work::kernel).empty());
}
