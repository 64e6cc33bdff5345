// The command line of every sample, on CLI11 (the field's usual C++ parser: typed options,
// validation, and --help from the same declarations). A bad argument prints
// "<sample>: <what is wrong>" and how to get the options, and exits with status 2; --help
// prints them and exits 0. Failures after parsing go through run_guarded: status 1.
#pragma once

#include <CLI/CLI.hpp>
#include <cgr/thread_pool.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

namespace cgr::samples {

// A number as a person writes it: 1000000, 0.9, not 1e+06.
inline std::string plain_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.15g", value);
  return text;
}

// A number in [low, high], the whole token (not "2x"), finite; the message names the range.
inline CLI::Validator in_range(double low, double high) {
  const std::string range = "[" + plain_number(low) + ", " + plain_number(high) + "]";
  return CLI::Validator(
      [low, high, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (value >= low && value <= high) return {};
        return text + " is not in " + range;
      },
      range);
}

// A bad argument: what is wrong with it, for "<sample>: <what>" and exit status 2.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

// Parses; false when --help was asked for (and printed). UsageError for a bad argument.
inline bool parse_arguments(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return true;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return false;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
}

// For a sample's main: --help exits 0, a bad argument exits 2 with the message and the usage.
inline void parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    if (!parse_arguments(app, argc, argv)) std::exit(0);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\nusage: %s [OPTIONS]; '%s --help' lists them\n",
                 app.get_name().c_str(), e.what(), app.get_name().c_str(), app.get_name().c_str());
    std::exit(2);
  }
}

// --device: the one asked for; without it the GPU when this build and machine have one.
// --verbose: why the GPU is not used, in the driver's words (cgr-bench's flag too).
inline void add_device_option(CLI::App& app, std::string& device, bool& verbose) {
  app.add_option("--device", device, "cpu or cuda (default: cuda when a device is usable)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--verbose", verbose, "say why a GPU is not used (the driver's words)");
}

// --threads: CPU threads computing, the caller included.
inline void add_threads_option(CLI::App& app, int& threads) {
  app.add_option("--threads", threads, "CPU threads computing (default 0: one per hardware thread)")
      ->check(in_range(0, ThreadPool::max_threads()));
}

inline void add_iterations_option(CLI::App& app, int& iterations) {
  app.add_option("--iterations", iterations, "timed rounds per mode")
      ->check(in_range(1, 1'000'000))
      ->capture_default_str();
}

// --size of a square input: large enough for any network here, small enough to allocate.
inline void add_size_option(CLI::App& app, std::int64_t& size, const char* what) {
  app.add_option("--size", size, what)->check(in_range(1, 4096))->capture_default_str();
}

// Runs a sample's work. Every failure becomes "<sample>: <message>" and exit status 1 (running
// out of memory said as such): nothing escapes as an abort.
template <typename Work>
int run_guarded(const char* name, Work work) {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory (an allocation failed); use a smaller input\n", name);
  } catch (const std::exception& e) {  // cgr::Error, std::filesystem errors, ...
    std::fprintf(stderr, "%s: %s\n", name, e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: failed with an unknown exception\n", name);
  }
  return 1;
}

}  // namespace cgr::samples
