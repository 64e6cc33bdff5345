// Weights: named tensors (PyTorch state_dict names such as "layer1.0.conv1.weight"). An
// Engine binds them to the layers that need them when it is built and keeps its own copy
// (packed for its kernels), so a Weights object may be dropped after Engine::build.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cgr/tensor.hpp"

namespace cgr {

class Weights {
 public:
  // Every tensor of a safetensors file (cgr::load_safetensors in cgr/safetensors.hpp): F32 and
  // F16 tensors; any other dtype in the file is an Error naming the tensor.
  static Weights load_safetensors(const std::filesystem::path& path);

  // Error if the name is already present.
  void add(const std::string& name, Tensor tensor);
  // Adds or replaces.
  void set(const std::string& name, Tensor tensor);
  const Tensor* find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  std::size_t size() const { return tensors_.size(); }
  std::vector<std::string> names() const;
  const std::map<std::string, Tensor, std::less<>>& tensors() const { return tensors_; }

 private:
  std::map<std::string, Tensor, std::less<>> tensors_;
};

}  // namespace cgr
