// The command line of every sample, on CLI11 (the field's usual C++ parser: typed options,
// validation, and --help from the same declarations). A bad argument prints
// "<sample>: <what is wrong>" and how to get the options, and exits with status 2; --help
// prints them and exits 0. Failures after parsing are the sample's: status 1.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cgr::samples {

// A number the option needs above (or, with `allow_zero`, at least) zero, said plainly.
inline CLI::Validator sign_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "'" + text + "' is not a number";
        if (allow_zero ? value >= 0 : value > 0) return {};
        return (allow_zero ? "must not be negative, not " : "must be positive, not ") + text;
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
inline const CLI::Validator kPositive = sign_check(false);
inline const CLI::Validator kNonNegative = sign_check(true);

inline void parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nusage: %s [OPTIONS]; '%s --help' lists them\n",
                 app.get_name().c_str(), e.what(), app.get_name().c_str(), app.get_name().c_str());
    std::exit(2);
  }
}

// --device: the one asked for; without it the GPU when this build and machine have one.
inline void add_device_option(CLI::App& app, std::string& device) {
  app.add_option("--device", device, "cpu or cuda (default: cuda when a device is usable)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

// --threads: CPU threads computing, the caller included.
inline void add_threads_option(CLI::App& app, int& threads) {
  app.add_option("--threads", threads, "CPU threads computing (default 0: one per hardware thread)")
      ->check(kNonNegative);
}

inline void add_iterations_option(CLI::App& app, int& iterations) {
  app.add_option("--iterations", iterations, "timed rounds per mode")
      ->check(kPositive)
      ->capture_default_str();
}

}  // namespace cgr::samples
