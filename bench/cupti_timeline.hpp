// The GPU timeline of one inference, from CUPTI activity records: a span per kernel, memcpy
// and memset the device executed, with its device timestamps. Graph nodes are named after the
// op that owns them: CUPTI reports the node of the *instantiated* graph, whose IDs map back to
// the template nodes through the GRAPHNODE_CLONED resource callback, and the template nodes
// to their ops through ExecutionContext::cuda_graph_nodes(). eager mode has no graph: its
// spans carry the kernel's name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <cgr/engine.hpp>

#include "measure.hpp"

namespace cgr::bench {

// A kernel's own name from its mangled symbol: "linear_rows_kernel" from
// "_ZN3cgr4cuda41_GLOBAL__N__d7f59ebd_9_linear_cu_857f357118linear_rows_kernelEPKfS3_S3_Pfiii"
// (no scope, template arguments or parameters; nvcc's anonymous namespaces understood). A name
// that does not demangle comes back as it is.
std::string short_kernel_name(const std::string& mangled);

// Which op a graph node CUPTI reports belongs to. CUPTI reports the node of the instantiated
// graph; a node of the top-level graph maps to the template node it was cloned from through
// the GRAPHNODE_CLONED callback's records (followed as a chain: a clone may be cloned again).
// The nodes of conditional bodies have no such record (CUDA 13.0, driver 580, H200): the
// instantiated graph numbers them after its top-level nodes (CUPTI node id: graph id in the
// upper 32 bits, the node's number in the lower), body after body in the order the bodies
// were created, each in its nodes' creation order. That numbering is what maps them, and only
// where the work fits the template node (a kernel ran for a kernel node, or for a copy or
// memset node, which a body runs as a kernel; a copy or memset for one of its own kind).
class GraphNodeOwners {
 public:
  enum class Work { kernel, memcpy, memset, other };
  struct TemplateNode {
    std::string owner;  // the op (or copy-in, copy-out:<op>, if:<exit>)
    Work work = Work::other;
  };
  // template_nodes: CUPTI id of every node of the template graph and of its conditional
  // bodies; clone_of: the GRAPHNODE_CLONED records (instantiated id -> original id).
  GraphNodeOwners(std::map<std::uint64_t, TemplateNode> template_nodes,
                  std::map<std::uint64_t, std::uint64_t> clone_of);
  // The owner of the instantiated node `node` that did work `ran`, or "" when it cannot be
  // traced.
  std::string owner(std::uint64_t node, Work ran) const;

 private:
  std::map<std::uint64_t, TemplateNode> template_nodes_;
  std::map<std::uint64_t, std::uint64_t> clone_of_;
  std::uint64_t instantiated_graph_ = 0;   // the upper 32 bits of the top-level clones' ids
  std::uint64_t top_level_nodes_ = 0;      // the template's top-level node count
  std::vector<std::uint64_t> body_nodes_;  // template ids of body nodes, bodies in order
  bool have_layout_ = false;
};

// Whether this build has CUPTI (CUDA builds with libcupti from the toolkit).
bool have_cupti();

// Runs one warm-up and one recorded inference on a fresh context of `engine` (a CUDA engine)
// and returns the device activity of the recorded one, in start order, times since its first
// start. Error when CUPTI fails (the message names the call), or in a build without CUPTI.
std::vector<OpSpan> profile_one_inference_cuda(const Engine& engine, const InputTensors& inputs);

// The same for `recorded` inferences in a row on one fresh context (after its warm-up): each
// run's device activity, times since that run's first start. The GPU tests observe with it
// which ops ran and which overlapped.
std::vector<std::vector<OpSpan>> profile_inferences_cuda(const Engine& engine,
                                                         const InputTensors& inputs, int recorded);

}  // namespace cgr::bench
