// CUPTI activity tracing of one inference (see cupti_timeline.hpp).
#include "cupti_timeline.hpp"

#include <cgr/error.hpp>

#include <cxxabi.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace cgr::bench {

// "void cgr::cuda_kernels::(anonymous namespace)::relu_kernel<...>(float const*, ...)" ->
// "relu_kernel": the function's own name, without scope, template arguments or parameters.
std::string short_kernel_name(const std::string& mangled) {
  // nvcc names an anonymous namespace "_GLOBAL__N__<hash>_<n>_<file>_<hash>", which the C++
  // demangler refuses; as the standard "_GLOBAL__N_1" it demangles.
  std::string standard = mangled;
  static constexpr std::string_view kAnonymous = "_GLOBAL__N__";
  for (std::size_t at = standard.find(kAnonymous); at != std::string::npos;
       at = standard.find(kAnonymous, at + 1)) {
    std::size_t digits = at;
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(standard[digits - 1])))
      --digits;
    if (digits == at || at - digits > 6) continue;  // not a length prefix
    const std::size_t length = std::stoul(standard.substr(digits, at - digits));
    if (at + length > standard.size()) break;
    standard.replace(digits, at - digits + length, "12_GLOBAL__N_1");
    at = digits;
  }
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(standard.c_str(), nullptr, nullptr, &status), &std::free);
  std::string name = status == 0 && demangled ? demangled.get() : mangled;
  static constexpr std::string_view kAnonymousScope = "(anonymous namespace)::";
  for (auto at = name.find(kAnonymousScope); at != std::string::npos;
       at = name.find(kAnonymousScope))
    name.erase(at, kAnonymousScope.size());
  if (const auto paren = name.find('('); paren != std::string::npos) name.resize(paren);
  // Drop a trailing template argument list, then the scope.
  if (!name.empty() && name.back() == '>') {
    int depth = 0;
    for (std::size_t i = name.size(); i-- > 0;) {
      depth += name[i] == '>' ? 1 : name[i] == '<' ? -1 : 0;
      if (depth == 0) {
        name.resize(i);
        break;
      }
    }
  }
  if (const auto scope = name.rfind("::"); scope != std::string::npos)
    name = name.substr(scope + 2);
  if (const auto space = name.rfind(' '); space != std::string::npos) name = name.substr(space + 1);
  return name.empty() ? mangled : name;
}

GraphNodeOwners::GraphNodeOwners(std::map<std::uint64_t, TemplateNode> template_nodes,
                                 std::map<std::uint64_t, std::uint64_t> clone_of)
    : template_nodes_(std::move(template_nodes)), clone_of_(std::move(clone_of)) {
  if (template_nodes_.empty()) return;
  // The template's graphs by CUPTI graph id: the top-level graph was created first (lowest
  // id), its conditional bodies after it, in order.
  const std::uint64_t top_graph = template_nodes_.begin()->first >> 32;
  for (const auto& [id, node] : template_nodes_) {
    if ((id >> 32) == top_graph) {
      ++top_level_nodes_;
    } else {
      body_nodes_.push_back(id);  // ascending: body after body, each in creation order
    }
  }
  // The instantiated graph: where the top-level nodes' clones live.
  for (const auto& [clone, original] : clone_of_) {
    if ((original >> 32) == top_graph && template_nodes_.contains(original)) {
      instantiated_graph_ = clone >> 32;
      have_layout_ = true;
      break;
    }
  }
}

std::string GraphNodeOwners::owner(std::uint64_t node, Work ran) const {
  auto it = template_nodes_.find(node);
  std::uint64_t at = node;
  for (std::size_t step = 0; it == template_nodes_.end() && step <= clone_of_.size(); ++step) {
    const auto clone = clone_of_.find(at);
    if (clone == clone_of_.end()) break;
    at = clone->second;
    it = template_nodes_.find(at);
  }
  if (it != template_nodes_.end()) return it->second.owner;
  // A conditional body's node: numbered after the top-level ones in the instantiated graph.
  if (!have_layout_ || (node >> 32) != instantiated_graph_) return "";
  const std::uint64_t number = node & 0xffffffffu;
  if (number < top_level_nodes_ || number - top_level_nodes_ >= body_nodes_.size()) return "";
  const TemplateNode& candidate = template_nodes_.at(body_nodes_[number - top_level_nodes_]);
  const bool fits =
      ran == candidate.work ||
      (ran == Work::kernel && (candidate.work == Work::memcpy || candidate.work == Work::memset));
  return fits ? candidate.owner : "";
}

}  // namespace cgr::bench

#if defined(CGR_BENCH_HAVE_CUPTI)

#include <cuda_runtime.h>
#include <cupti.h>
#include <fmt/format.h>
#include <cgr/capture/cuda_check.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace cgr::bench {
namespace {

[[noreturn]] void throw_cupti_error(CUptiResult status, const char* call, const char* file,
                                    int line) {
  const char* message = nullptr;
  if (cuptiGetResultString(status, &message) != CUPTI_SUCCESS || message == nullptr)
    message = "unknown";
  fail("{} failed at {}:{}: {} (CUPTI status {})", call, file, line, message,
       static_cast<int>(status));
}

#define CGR_CUPTI_CHECK(call)                                                                    \
  do {                                                                                           \
    const CUptiResult cgr_status_ = (call);                                                      \
    if (cgr_status_ != CUPTI_SUCCESS) throw_cupti_error(cgr_status_, #call, __FILE__, __LINE__); \
  } while (false)

struct DeviceActivity {
  enum class Kind { kernel, memcpy, memset } kind = Kind::kernel;
  std::uint64_t start_ns = 0, end_ns = 0;
  std::uint64_t graph_node = 0;  // of the instantiated graph; 0 outside graphs
  std::string what;              // kernel name, or the copy's direction and size
};

// CUPTI calls back on its own threads: everything it hands over goes through this, locked.
struct Collector {
  std::mutex mutex;
  std::vector<DeviceActivity> activity;
  std::map<std::uint64_t, std::uint64_t> clone_of;  // instantiated node id -> template node id
  std::vector<std::pair<std::uint64_t, std::uint32_t>> created;  // node id, graph id (debug)
  std::size_t dropped = 0;                          // records CUPTI could not store
  std::string error;                                // first failure inside a callback
};
Collector& collector() {
  static Collector c;
  return c;
}

constexpr std::size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

const char* copy_direction(std::uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    default:
      return "other";
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  std::vector<DeviceActivity> parsed;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    DeviceActivity a;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        a = {DeviceActivity::Kind::kernel, k->start, k->end, k->graphNodeId,
             k->name != nullptr ? k->name : "kernel"};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        a = {DeviceActivity::Kind::memcpy, m->start, m->end, m->graphNodeId,
             fmt::format("memcpy {} {} B", copy_direction(m->copyKind), m->bytes)};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        a = {DeviceActivity::Kind::memset, m->start, m->end, m->graphNodeId,
             fmt::format("memset {} B", m->bytes)};
        break;
      }
      default:
        continue;
    }
    parsed.push_back(std::move(a));
  }
  std::free(buffer);
  std::size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) != CUPTI_SUCCESS) dropped = 0;
  Collector& c = collector();
  const std::lock_guard lock(c.mutex);
  c.activity.insert(c.activity.end(), parsed.begin(), parsed.end());
  c.dropped += dropped;
}

void CUPTIAPI on_resource(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (id == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {  // enabled with CGR_CUPTI_DEBUG only
    std::uint64_t created = 0;
    std::uint32_t in_graph = 0;
    if (cuptiGetGraphNodeId(graph->node, &created) != CUPTI_SUCCESS) created = 0;
    if (graph->graph == nullptr || cuptiGetGraphId(graph->graph, &in_graph) != CUPTI_SUCCESS)
      in_graph = 0;
    Collector& c = collector();
    const std::lock_guard lock(c.mutex);
    c.created.emplace_back(created, in_graph);
    return;
  }
  if (id != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
  std::uint64_t clone = 0, original = 0;
  // The ids first, the lock after: CUPTI may call back on this thread from inside its calls.
  const bool ok = cuptiGetGraphNodeId(graph->node, &clone) == CUPTI_SUCCESS &&
                  cuptiGetGraphNodeId(graph->originalNode, &original) == CUPTI_SUCCESS;
  Collector& c = collector();
  const std::lock_guard lock(c.mutex);
  if (!ok) {
    if (c.error.empty()) c.error = "cuptiGetGraphNodeId failed in the GRAPHNODE_CLONED callback";
    return;
  }
  c.clone_of[clone] = original;
}

// CGR_CUPTI_DEBUG=1: print the ids behind the mapping of graph nodes to ops (stderr).
bool debug_requested() {
  const char* debug = std::getenv("CGR_CUPTI_DEBUG");
  return debug != nullptr && *debug == '1';
}

// Tracing on for the life of the object; off (and every record delivered) after.
class Tracing {
 public:
  Tracing() {
    Collector& c = collector();
    {
      const std::lock_guard lock(c.mutex);
      c.activity.clear();
      c.clone_of.clear();
      c.created.clear();
      c.dropped = 0;
      c.error.clear();
    }
    if (const CUptiResult status = cuptiSubscribe(&subscriber_, on_resource, nullptr);
        status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      fail(
          "CUPTI is in use by another tool (a profiler or debugger attached to this process); "
          "--timeline needs it alone");
    } else if (status != CUPTI_SUCCESS) {
      throw_cupti_error(status, "cuptiSubscribe", __FILE__, __LINE__);
    }
    try {
      CGR_CUPTI_CHECK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                          CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED));
      if (debug_requested()) {
        CGR_CUPTI_CHECK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                            CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED));
      }
      CGR_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
      CGR_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
      CGR_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
      CGR_CUPTI_CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    } catch (...) {
      stop();
      throw;
    }
  }
  ~Tracing() { stop(); }
  Tracing(const Tracing&) = delete;
  Tracing& operator=(const Tracing&) = delete;

  // Delivers every record so far and returns them, emptying the collector's list.
  std::vector<DeviceActivity> take() {
    CGR_CUPTI_CHECK(cuptiActivityFlushAll(1));
    Collector& c = collector();
    const std::lock_guard lock(c.mutex);
    if (!c.error.empty()) fail("CUPTI: {}", c.error);
    if (c.dropped > 0)
      fail("CUPTI dropped {} activity records (buffers full): the timeline would be incomplete",
           c.dropped);
    return std::exchange(c.activity, {});
  }

 private:
  void stop() {
    (void)cuptiActivityFlushAll(1);
    (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
    if (subscriber_ != nullptr) {
      (void)cuptiEnableCallback(0, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
      (void)cuptiEnableCallback(0, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
      (void)cuptiUnsubscribe(subscriber_);
      subscriber_ = nullptr;
    }
  }
  CUpti_SubscriberHandle subscriber_ = nullptr;
};

}  // namespace

bool have_cupti() {
  return true;
}

std::vector<OpSpan> profile_one_inference_cuda(const Engine& engine, const InputTensors& inputs) {
  return profile_inferences_cuda(engine, inputs, 1).front();
}

std::vector<std::vector<OpSpan>> profile_inferences_cuda(const Engine& engine,
                                                         const InputTensors& inputs, int recorded) {
  if (engine.options().device != Device::cuda) fail("the CUPTI timeline needs a cuda engine");
  if (recorded < 1) fail("profile_inferences_cuda: {} recorded inferences", recorded);
  Tracing tracing;
  // Created under tracing: its graph's instantiation reports every node's clone.
  ExecutionContext context = engine.create_context();
  fill_inputs(context, inputs);
  context.run();  // warm
  (void)tracing.take();
  std::vector<std::vector<DeviceActivity>> runs;
  for (int r = 0; r < recorded; ++r) {
    context.run();
    runs.push_back(tracing.take());
    if (runs.back().empty()) fail("CUPTI delivered no device activity for the recorded inference");
  }

  // Template node id -> owner (op name, copy-in, copy-out:<op>) and op -> lane.
  std::map<std::uint64_t, GraphNodeOwners::TemplateNode> template_nodes;
  if (engine.options().mode != Mode::eager) {
    for (const auto& [node, owner] : context.cuda_graph_nodes().owners) {
      std::uint64_t id = 0;
      CGR_CUPTI_CHECK(cuptiGetGraphNodeId(static_cast<CUgraphNode>(node), &id));
      cudaGraphNodeType type{};
      CGR_CUDA_CHECK(cudaGraphNodeGetType(static_cast<cudaGraphNode_t>(node), &type));
      using Work = GraphNodeOwners::Work;
      const Work work = type == cudaGraphNodeTypeKernel   ? Work::kernel
                        : type == cudaGraphNodeTypeMemcpy ? Work::memcpy
                        : type == cudaGraphNodeTypeMemset ? Work::memset
                                                          : Work::other;
      template_nodes[id] = {owner, work};
    }
  }
  std::map<std::string, int, std::less<>> lane_of_op;
  const Graph& graph = engine.graph();
  for (int op = 0; op < graph.op_count(); ++op)
    lane_of_op[graph.op(op).name] = graph.lanes()[static_cast<std::size_t>(op)];
  std::set<std::string, std::less<>> critical_ops;
  std::map<std::string, std::string, std::less<>> category_of_op;  // its first layer kind
  for (const OpInfo& info : engine.op_infos()) {
    if (info.critical) critical_ops.insert(info.name);
    category_of_op[info.name] = info.kind.substr(0, info.kind.find('+'));
  }
  std::map<std::uint64_t, std::uint64_t> clone_of;
  {
    Collector& c = collector();
    const std::lock_guard lock(c.mutex);
    clone_of = c.clone_of;
  }
  const GraphNodeOwners owners(template_nodes, clone_of);

  std::vector<std::vector<OpSpan>> result;
  std::size_t unmapped = 0, total = 0;  // graph work whose node could not be traced to its op
  for (const std::vector<DeviceActivity>& activity : runs) {
    std::uint64_t origin = activity.front().start_ns;
    for (const auto& a : activity)
      origin = std::min(origin, a.start_ns);
    std::vector<OpSpan> spans;
    for (const DeviceActivity& a : activity) {
      OpSpan span;
      const std::string what =
          a.kind == DeviceActivity::Kind::kernel ? short_kernel_name(a.what) : a.what;
      std::string owner;
      if (a.graph_node != 0) {
        using Work = GraphNodeOwners::Work;
        owner = owners.owner(a.graph_node, a.kind == DeviceActivity::Kind::kernel   ? Work::kernel
                                           : a.kind == DeviceActivity::Kind::memcpy ? Work::memcpy
                                                                                    : Work::memset);
        if (owner.empty()) ++unmapped;
      }
      span.op = owner.empty() ? what : owner;
      span.kind = what;
      const std::string_view op_name = owner.rfind("copy-out:", 0) == 0
                                           ? std::string_view(owner).substr(9)
                                           : std::string_view(owner);
      if (const auto lane = lane_of_op.find(op_name); lane != lane_of_op.end())
        span.lane = lane->second;
      span.critical = critical_ops.contains(op_name);
      if (const auto c = category_of_op.find(owner); c != category_of_op.end()) {
        span.category = c->second;
      } else {
        span.category = a.kind == DeviceActivity::Kind::kernel ? "other kernel" : "copy";
      }
      span.start_ms = static_cast<double>(a.start_ns - origin) * 1e-6;
      span.end_ms = static_cast<double>(std::max(a.end_ns, a.start_ns) - origin) * 1e-6;
      spans.push_back(std::move(span));
    }
    total += activity.size();
    std::sort(spans.begin(), spans.end(), [](const OpSpan& a, const OpSpan& b) {
      return a.start_ms < b.start_ms || (a.start_ms == b.start_ms && a.end_ms < b.end_ms);
    });
    result.push_back(std::move(spans));
  }
  if (unmapped > 0) {
    fmt::print(stderr,
               "cgr-bench: {} of {} device activities ran from graph nodes CUPTI's clone records "
               "({} of them) do not trace back to an op; their bars carry the kernel's name\n",
               unmapped, total, clone_of.size());
  }
  // CGR_CUPTI_DEBUG=1: the ids behind the mapping, to diagnose a driver that records clones
  // differently (conditional bodies, say).
  if (debug_requested()) {
    {
      Collector& c = collector();
      const std::lock_guard lock(c.mutex);
      for (const auto& [node, in_graph] : c.created)
        fmt::print(stderr, "cupti-debug created {} in graph {}\n", node, in_graph);
    }
    for (const auto& [id, node] : template_nodes)
      fmt::print(stderr, "cupti-debug template {} {}\n", id, node.owner);
    for (const auto& [clone, original] : clone_of)
      fmt::print(stderr, "cupti-debug clone {} of {}\n", clone, original);
    for (const DeviceActivity& a : runs.front())
      fmt::print(stderr, "cupti-debug ran node {} {}\n", a.graph_node, short_kernel_name(a.what));
  }
  return result;
}

}  // namespace cgr::bench

#else  // no CUPTI in this build

namespace cgr::bench {

bool have_cupti() {
  return false;
}

std::vector<OpSpan> profile_one_inference_cuda(const Engine&, const InputTensors&) {
  fail("this cgr-bench was built without CUPTI (a CUDA build finds libcupti in the toolkit)");
}

std::vector<std::vector<OpSpan>> profile_inferences_cuda(const Engine&, const InputTensors&, int) {
  fail("this build has no CUPTI (a CUDA build finds libcupti in the toolkit)");
}

}  // namespace cgr::bench

#endif  // CGR_BENCH_HAVE_CUPTI
