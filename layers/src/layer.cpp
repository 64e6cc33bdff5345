// The layer base: printing of window arguments, the default cost, and the registry of kinds.
#include "cgr/layers/layer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

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

double Layer::activation_bytes() const {
  double bytes = static_cast<double>(output_.bytes());
  for (const auto& input : inputs_)
    bytes += static_cast<double>(input.bytes());
  return bytes;
}

OpCost Layer::cost() const {
  return {static_cast<double>(output_.shape.numel()), activation_bytes()};
}

namespace {

// Function-local: registrations run during static initialisation, in any order.
struct KindRegistry {
  std::mutex mutex;
  std::set<std::string, std::less<>> kinds;
};

KindRegistry& kind_registry() {
  static KindRegistry registry;
  return registry;
}

}  // namespace

bool register_layer_kind(std::string_view kind) {
  KindRegistry& registry = kind_registry();
  std::lock_guard lock(registry.mutex);
  if (!registry.kinds.emplace(kind).second) {
    // Two layer classes with one kind would make every backend dispatch ambiguous.
    std::fprintf(stderr, "cgr: layer kind '%.*s' is registered twice\n",
                 static_cast<int>(kind.size()), kind.data());
    std::abort();
  }
  return true;
}

bool is_registered_layer_kind(std::string_view kind) {
  KindRegistry& registry = kind_registry();
  std::lock_guard lock(registry.mutex);
  return registry.kinds.find(kind) != registry.kinds.end();
}

std::vector<std::string> registered_layer_kinds() {
  KindRegistry& registry = kind_registry();
  std::lock_guard lock(registry.mutex);
  return {registry.kinds.begin(), registry.kinds.end()};
}

}  // namespace cgr
