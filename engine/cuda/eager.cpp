// Eager mode: the ops launched one by one on the context's stream in topological order, as
// PyTorch runs them; an early exit is decided on the host after its decision (a stream
// synchronisation each, as a Python `if confidence > t:` would need).
#include "cgr/capture/cuda_check.hpp"
#include "context.hpp"

namespace cgr::cuda {

void CudaContext::run_eager(bool copies, bool warm_up, std::vector<char>& executed) {
  cudaStream_t s = stream_.get();
  reset_host_flags();
  executed.assign(engine().ops.size(), 0);
  if (copies) copy_inputs(s);
  std::uint32_t fired = 0;
  for (int index : engine().graph.topological_order()) {
    const auto i = static_cast<std::size_t>(index);
    if (engine().skipped(index, fired)) continue;
    enqueue_op(index, s, false, 0);
    executed[i] = 1;
    if (copies) copies_after(index, s);
    const int exit = engine().ops[i].decides_exit;
    if (engine().early_exits() && exit >= 0 && !warm_up) {
      if (!copies) copy_exit(static_cast<std::size_t>(exit), s);
      CGR_CUDA_CHECK(cudaStreamSynchronize(s));
      ++synchronizations_;
      if (fired_host_flags()[exit] == 1) fired |= 1u << exit;
    }
  }
}

}  // namespace cgr::cuda
