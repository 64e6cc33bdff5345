// Floats uploaded to the device once, when an op is made (weights, folded biases, expanded
// constants), and freed with the object; shared by every context of the engine. The uploads
// run on the legacy default stream, which the contexts' non-blocking streams do not wait for:
// the backend synchronises the device once after making an engine's ops. Declared
// without fmt so that the ops' .cu files can hold them (device_memory.cpp checks the calls).
#pragma once

#include <cstddef>
#include <span>

namespace cgr::cuda {

class DeviceFloats {
 public:
  explicit DeviceFloats(std::span<const float> host);  // cgr::Error when the upload fails
  // `count` zeros.
  explicit DeviceFloats(std::size_t count);
  ~DeviceFloats();
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  const float* get() const { return data_; }
  float* get() { return data_; }  // scratch the owner writes (e.g. algorithm timing buffers)
  std::size_t size() const { return size_; }

 private:
  float* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cgr::cuda
