// cgr::Error: the one exception type cgr throws. Every failure a user can act on (bad shapes,
// unknown names, wrong sizes, library errors) becomes an Error whose message names the layer,
// tensor or file involved.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace cgr {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Throws an Error with an fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace cgr

// Internal invariant check: a failure here is a cgr bug, reported with file:line.
#define CGR_ASSERT(condition)                                                             \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      ::cgr::fail("internal error: '{}' failed at {}:{}", #condition, __FILE__, __LINE__); \
    }                                                                                     \
  } while (false)
