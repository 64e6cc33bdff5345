#include "cgr/layers/layer.hpp"

#include <fmt/format.h>

namespace cgr {

std::string to_string(const Size2& size) {
  return size.h == size.w ? fmt::format("{}", size.h) : fmt::format("{}x{}", size.h, size.w);
}

std::string to_string(const Padding2d& padding) {
  if (padding.top == padding.bottom && padding.left == padding.right) {
    return to_string(Size2(padding.top, padding.left));
  }
  return fmt::format("{},{},{},{}", padding.top, padding.left, padding.bottom, padding.right);
}

}  // namespace cgr
