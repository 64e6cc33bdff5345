// libFuzzer target for the command lines of cgr-bench and the resnet18_exits sample: any
// argument vector must parse or be refused as a usage error (or, for a value the engine
// checks, a cgr::Error); a crash, a hang, another exception or a sanitizer report is a
// finding. Input: the first byte picks the tool, the rest is the arguments separated by NUL.
#include <cgr/error.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli.hpp"
#include "common/cli.hpp"
#include "resnet18_exits/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool bench = (data[0] & 1) != 0;
  std::vector<std::string> args{bench ? "cgr-bench" : "resnet18_exits"};
  std::string arg;
  for (std::size_t i = 1; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  if (!arg.empty()) args.push_back(arg);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(args.size());
  try {
    if (bench) {
      (void)cgr::bench::parse_options(argc, argv.data());
    } else {
      (void)cgr::samples::try_parse_exits_options(argc, argv.data());
    }
  } catch (const cgr::bench::UsageError&) {
  } catch (const cgr::samples::UsageError&) {
  } catch (const cgr::Error&) {
  }
  return 0;
}
