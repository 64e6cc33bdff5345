// Floats uploaded to the device once, when an op is made (weights, folded biases, expanded
// constants), and freed with the object; shared by every context of the engine. Declared
// without fmt so that the ops' .cu files can hold them (device_memory.cpp checks the calls).
#pragma once

#include <cstddef>
#include <span>

namespace cgr::cuda {

class DeviceFloats {
 public:
  explicit DeviceFloats(std::span<const float> host);  // cgr::Error when the upload fails
  ~DeviceFloats();
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  const float* get() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cgr::cuda
