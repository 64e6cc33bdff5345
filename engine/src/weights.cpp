#include "cgr/weights.hpp"

#include "cgr/error.hpp"
#include "cgr/safetensors.hpp"

namespace cgr {

// Qualified: unqualified, the name would find this member again.
Weights Weights::load_safetensors(const std::filesystem::path& path) {
  return cgr::load_safetensors(path);
}

void Weights::add(const std::string& name, Tensor tensor) {
  if (name.empty()) fail("a weight needs a non-empty name");
  if (!tensors_.emplace(name, std::move(tensor)).second) {
    fail("weight '{}' is added twice", name);
  }
}

void Weights::set(const std::string& name, Tensor tensor) {
  if (name.empty()) fail("a weight needs a non-empty name");
  tensors_.insert_or_assign(name, std::move(tensor));
}

const Tensor* Weights::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> Weights::names() const {
  std::vector<std::string> result;
  result.reserve(tensors_.size());
  for (const auto& [name, tensor] : tensors_) result.push_back(name);
  return result;
}

}  // namespace cgr
