#include "file_io.hpp"

#include <cerrno>
#include <fstream>
#include <system_error>

#include "cgr/error.hpp"

namespace cgr::detail {

std::string errno_message() { return std::generic_category().message(errno); }

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot open for writing ({})", path.string(), errno_message());
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    fail("{}: write failed ({})", path.string(), errno_message());
  }
}

}  // namespace cgr::detail
