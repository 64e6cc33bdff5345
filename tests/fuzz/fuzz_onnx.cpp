// libFuzzer target for the ONNX importer: any byte string must import or fail with
// cgr::Error; a crash, another exception or a sanitizer report is a finding. An imported
// model's dependency analysis runs too (it walks every layer the importer made).
#include <cgr/error.hpp>
#include <cgr/onnx.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Folding costs ~0.4 us an element in this instrumented build: the default bound (2^27)
  // would let one input run past the 10 s timeout; 2^20 keeps an input under a second and
  // still reaches the bound's error path.
  cgr::OnnxImportOptions options;
  options.max_folded_elements = std::int64_t{1} << 20;
  try {
    const cgr::OnnxModel model =
        cgr::import_onnx(std::as_bytes(std::span(data, size)), "fuzz.onnx", options);
    const cgr::Graph graph = model.network.graph();
    if (graph.op_count() != model.network.layer_count()) __builtin_trap();
  } catch (const cgr::Error&) {
    // Rejected with a message: the expected outcome for most inputs.
  }
  return 0;
}
