// libFuzzer target for the safetensors reader. Every input must either parse or fail with
// cgr::Error; any other exception (nlohmann's included), a crash or a sanitizer report is a
// finding. An accepted file has every tensor, raw view and the metadata read; when all its
// tensors load, it is written back and read again, which must give the same tensors.
#include <cgr/error.hpp>
#include <cgr/safetensors.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace {

bool same(const cgr::Tensor& a, const cgr::Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::ranges::equal(a.bytes(), b.bytes());
}

void check(std::span<const std::byte> bytes) {
  const cgr::SafetensorsFile file = cgr::SafetensorsFile::view(bytes, "fuzz.safetensors");
  for (const std::string& name : file.names()) {
    const cgr::SafetensorsInfo& info = file.info(name);
    if (file.raw(name).size() != info.size()) __builtin_trap();
    try {
      (void)file.tensor(name);
    } catch (const cgr::Error&) {
      // A dtype cgr does not hold.
    }
  }
  const cgr::Weights weights = file.weights();
  const auto image = cgr::serialize_safetensors(weights, file.metadata());
  const cgr::SafetensorsFile again = cgr::SafetensorsFile::view(image, "round trip");
  if (again.metadata() != file.metadata()) __builtin_trap();
  const cgr::Weights reloaded = again.weights();
  if (reloaded.size() != weights.size()) __builtin_trap();
  for (const auto& [name, tensor] : weights.tensors()) {
    const cgr::Tensor* other = reloaded.find(name);
    if (other == nullptr || !same(*other, tensor)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    check(std::as_bytes(std::span(data, size)));
  } catch (const cgr::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
