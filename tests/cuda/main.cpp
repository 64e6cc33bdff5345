// GPU test binary: every case is decorated with doctest::skip(no CUDA device), and the reason
// is printed first, so a machine without a GPU reports the cases as skipped, never passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include <cgr/engine.hpp>


int main(int argc, char** argv) {
  const std::string reason = cgr::cuda_unavailable_reason();
  if (!reason.empty()) std::printf("GPU test cases skipped: %s\n", reason.c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
