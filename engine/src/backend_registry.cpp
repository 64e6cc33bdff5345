// The backends this build has (each registers itself, see cgr/backend/backend.hpp), and the
// default refusals of device capabilities a backend context does not have.
#include <array>
#include <cmath>
#include <limits>
#include <mutex>

#include "cgr/backend/backend.hpp"
#include "cgr/error.hpp"

namespace cgr::detail {
namespace {

struct Registry {
  std::mutex mutex;
  std::array<const Backend*, 2> backends{};  // by Device
};

Registry& registry() {
  static Registry r;
  return r;
}

[[noreturn]] void needs_cuda(std::string_view what) {
  fail("{} needs an engine built for the cuda device", what);
}

}  // namespace

bool register_backend(Device device, const Backend& backend) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.backends[static_cast<std::size_t>(device)] = &backend;
  return true;
}

const Backend* find_backend(Device device) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.backends[static_cast<std::size_t>(device)];
}

void* BackendContext::device_value(int) const {
  needs_cuda("device_buffer");
}
void BackendContext::launch_on_device(void*) {
  needs_cuda("launch_on_device");
}
double BackendContext::last_gpu_time_ms() const {
  return std::numeric_limits<double>::quiet_NaN();
}
double BackendContext::last_enqueue_time_ms() const {
  return std::numeric_limits<double>::quiet_NaN();
}
void BackendContext::dump_graph_dot(const std::string&) {
  needs_cuda("dump_cuda_graph_dot");
}
CudaGraphReport BackendContext::graph_report() {
  needs_cuda("cuda_graph_report");
}
CudaGraphNodes BackendContext::graph_nodes() {
  needs_cuda("cuda_graph_nodes");
}

}  // namespace cgr::detail
