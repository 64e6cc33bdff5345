// One launch of one of cgr's kernels, described rather than performed. The CUDA executor's
// eager and stream-graph modes launch it (cudaLaunchKernel); dag adds it to the explicit graph
// as a kernel node (cudaGraphAddNode with these parameters), so one description serves both.
// The argument values live inside the object: cudaLaunchKernel and cudaGraphAddNode copy them,
// so the object only has to outlive that call. Plain C++ over <cuda_runtime.h> (g++ and nvcc).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace cgr::cuda {

class KernelLaunch {
 public:
  static constexpr int kMaxArguments = 12;
  static constexpr std::size_t kStorageBytes = 384;

  // Nothing to launch (empty work): launch() returns cudaSuccess, no graph node is added.
  KernelLaunch() = default;
  // Invalid arguments: launch() returns `status`; the executor raises it with `reason` (a
  // string literal saying which argument is wrong) and the op's name.
  static KernelLaunch refused(cudaError_t status, const char* reason) {
    KernelLaunch launch;
    launch.status = status;
    launch.refusal = reason;
    return launch;
  }

  const void* function = nullptr;  // the __global__ function (its host stub)
  dim3 grid{1, 1, 1}, block{1, 1, 1};
  unsigned shared_bytes = 0;
  cudaError_t status = cudaSuccess;
  const char* refusal = nullptr;  // why status is not cudaSuccess

  bool empty() const { return function == nullptr; }
  int argument_count() const { return count_; }

  // Appends one argument, by value, at its natural alignment.
  template <typename T>
  void push(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are copied bytewise");
    static_assert(alignof(T) <= 16, "kernel arguments are aligned to 16 bytes at most");
    const std::size_t offset = (used_ + alignof(T) - 1) / alignof(T) * alignof(T);
    if (count_ == kMaxArguments || offset + sizeof(T) > kStorageBytes) {
      status = cudaErrorInvalidValue;  // a kernel with more or larger arguments than planned for
      refusal = "more or larger arguments than a KernelLaunch holds (12, 384 bytes)";
      return;
    }
    std::memcpy(storage_ + offset, &value, sizeof(T));
    sizes_[static_cast<std::size_t>(count_)] = static_cast<std::uint16_t>(sizeof(T));
    offsets_[static_cast<std::size_t>(count_++)] = static_cast<std::uint16_t>(offset);
    used_ = offset + sizeof(T);
  }

  // Bytes of the argument at index `i` (the size of the kernel's parameter type).
  std::size_t argument_size(int i) const { return sizes_[static_cast<std::size_t>(i)]; }

  // The argument value at index `i`, read back (tests; check argument_size first).
  template <typename T>
  T argument(int i) const {
    T value;
    std::memcpy(&value, storage_ + offsets_[static_cast<std::size_t>(i)], sizeof(T));
    return value;
  }

  // Pointers to the argument values, as cudaLaunchKernel and kernel node parameters take
  // them; valid while this object lives, unmoved.
  std::array<void*, kMaxArguments> argument_pointers() const {
    std::array<void*, kMaxArguments> pointers{};
    for (int i = 0; i < count_; ++i) {
      pointers[static_cast<std::size_t>(i)] =
          const_cast<unsigned char*>(storage_ + offsets_[static_cast<std::size_t>(i)]);
    }
    return pointers;
  }

 private:
  alignas(16) unsigned char storage_[kStorageBytes] = {};
  std::array<std::uint16_t, kMaxArguments> offsets_{};
  std::array<std::uint16_t, kMaxArguments> sizes_{};
  int count_ = 0;
  std::size_t used_ = 0;
};

// Launches the description on `stream` (what <<<>>> would do); a refused description returns
// its status, an empty one cudaSuccess.
inline cudaError_t launch(const KernelLaunch& description, cudaStream_t stream) {
  if (description.status != cudaSuccess) return description.status;
  if (description.empty()) return cudaSuccess;
  auto arguments = description.argument_pointers();
  return cudaLaunchKernel(description.function, description.grid, description.block,
                          arguments.data(), description.shared_bytes, stream);
}

}  // namespace cgr::cuda
