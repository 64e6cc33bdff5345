// Whole-file reads and writes (see cgr/files.hpp).
#include "file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <system_error>

#include "cgr/error.hpp"

namespace cgr {
namespace detail {

std::string errno_message() {
  return std::generic_category().message(errno);
}

}  // namespace detail

namespace {

// Closes a file descriptor when it goes out of scope.
struct Descriptor {
  int fd = -1;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::vector<std::byte> read_file(const std::filesystem::path& path, std::uint64_t max_bytes,
                                 std::string_view format) {
  const std::string what = path.string();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it changes nothing for the regular
  // files that are read.
  Descriptor file{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (file.fd < 0) fail("{}: cannot open ({})", what, detail::errno_message());
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail("{}: cannot stat ({})", what, detail::errno_message());
  if (!S_ISREG(info.st_mode)) fail("{}: {}, not a regular file", what, file_kind(info.st_mode));
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > max_bytes) {
    fail("{}: {} bytes is more than {} can be (at most {} bytes)", what, size, format, max_bytes);
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(file.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) fail("{}: read failed ({})", what, detail::errno_message());
    if (n == 0) {
      fail("{}: the file shrank from {} to {} bytes while it was read", what, size, done);
    }
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const std::string what = path.string();
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) fail("{}: is a folder, not a file", what);
  // A temporary file in the same folder, renamed over the target once complete.
  std::filesystem::path temporary = path;
  temporary += fmt::format(".tmp{}", ::getpid());
  Descriptor file{::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (file.fd < 0) fail("{}: cannot create ({})", what, detail::errno_message());
  auto discard = [&](std::string_view why, const std::string& reason) {
    ::close(file.fd);
    file.fd = -1;
    ::unlink(temporary.c_str());
    fail("{}: {} ({}); nothing was written", what, why, reason);
  };
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(file.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) discard("write failed", detail::errno_message());
    done += static_cast<std::size_t>(n);
  }
  if (::close(file.fd) != 0) {
    file.fd = -1;
    ::unlink(temporary.c_str());
    fail("{}: write failed ({}); nothing was written", what, detail::errno_message());
  }
  file.fd = -1;
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = detail::errno_message();
    ::unlink(temporary.c_str());
    fail("{}: cannot replace ({}); nothing was written", what, reason);
  }
}

void write_text_file(const std::filesystem::path& path, std::string_view text) {
  write_file(path, std::as_bytes(std::span(text.data(), text.size())));
}

void prepare_output_folder(const std::filesystem::path& folder) {
  const std::string what = folder.string();
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (!std::filesystem::is_directory(folder)) {
    fail("{}: cannot be the output folder ({})", what,
         error ? error.message() : std::string("it exists and is not a folder"));
  }
  // A probe file: the folder must take new files (permissions, read-only mounts).
  const std::filesystem::path probe = folder / fmt::format(".cgr-probe{}", ::getpid());
  Descriptor file{::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
  if (file.fd < 0)
    fail("{}: cannot write files in this folder ({})", what, detail::errno_message());
  ::unlink(probe.c_str());
}

void prepare_output_file(std::string_view option, const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  const std::filesystem::path folder = parent.empty() ? std::filesystem::path(".") : parent;
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error)) {
    fail("{} {}: the folder {} does not exist", option, path.string(), folder.string());
  }
  if (std::filesystem::is_directory(path, error))
    fail("{} {}: is a folder, not a file", option, path.string());
  prepare_output_folder(folder);  // takes new files
}

std::vector<std::filesystem::path> output_file_paths(const std::filesystem::path& folder,
                                                     const std::vector<std::string>& names,
                                                     std::string_view extension) {
  std::vector<std::filesystem::path> paths;
  std::map<std::string, std::string> owner;  // stem -> the name that took it
  for (const std::string& name : names) {
    if (name.empty()) fail("an output with an empty name cannot be written to a file");
    std::string stem = name;
    for (char& c : stem) {
      const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
      if (!safe) c = '_';
    }
    if (stem.front() == '.') stem.front() = '_';
    if (const auto [it, added] = owner.emplace(stem, name); !added) {
      fail("outputs '{}' and '{}' would both be written to {}{}; rename one", it->second, name,
           (folder / stem).string(), extension);
    }
    paths.push_back(folder / (stem + std::string(extension)));
  }
  return paths;
}

}  // namespace cgr
