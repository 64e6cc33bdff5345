// libFuzzer target for the .npy reader. Every input must either parse or fail with cgr::Error;
// any other exception, a crash or a sanitizer report is a finding. A parsed tensor is written
// back and read again, which must give the same bits: the writer and the reader agree on
// every shape the reader accepts.
#include <cgr/error.hpp>
#include <cgr/npy.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const cgr::Tensor tensor = cgr::parse_npy(std::as_bytes(std::span(data, size)), "fuzz.npy");
    const cgr::Tensor again = cgr::parse_npy(cgr::serialize_npy(tensor), "round trip");
    if (!(again.shape() == tensor.shape()) || again.dtype() != tensor.dtype() ||
        !std::ranges::equal(again.bytes(), tensor.bytes())) {
      __builtin_trap();
    }
  } catch (const cgr::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
