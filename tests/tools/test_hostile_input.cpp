// Hostile input and faults, through the real binaries (cgr-bench, the resnet18_exits sample,
// two_branch): every case must end within its time limit (a hang fails it), with a clear
// message and exit status 1 (a run failure) or 2 (a usage error), and must write nothing
// outside the folder asked for. One TEST_CASE per class of fault.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <cgr/npy.hpp>
#include <cgr/safetensors.hpp>
#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#if defined(CGR_HAVE_ONNX)
#include "../onnx_builder.hpp"
#endif

namespace {

namespace fs = std::filesystem;
using cgr::Shape;
using cgr::Tensor;

struct Run {
  int status = -1;  // the exit status; 124 when the time limit killed it
  std::string out, err;
  double seconds = 0;
};

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `binary args` under coreutils' timeout (a hang becomes status 124, not a stuck CI).
Run run(const std::string& binary, const std::string& args, const fs::path& work,
        int limit_s = 60) {
  const fs::path out = work / "stdout", err = work / "stderr";
  const std::string command = "timeout " + std::to_string(limit_s) + " " + quoted(binary) + " " +
                              args + " >" + quoted(out.string()) + " 2>" + quoted(err.string()) +
                              " </dev/null";
  const auto start = std::chrono::steady_clock::now();
  const int raw = std::system(command.c_str());
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

const std::string kBench = CGR_BENCH_PATH;
const std::string kExits = CGR_EXITS_SAMPLE_PATH;
const std::string kTwoBranch = CGR_TWO_BRANCH_PATH;
const std::string kSmallBench =
    "--model two-branch --device cpu --input-shape 1x3x16x16 --warmup-ms 1 --iterations 2";
const std::string kSmallExits = "--device cpu --size 32 --iterations 1 --classes 10";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The files under `root`, relative, sorted.
std::vector<std::string> files_under(const fs::path& root) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) files.push_back(fs::relative(entry.path(), root).string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

TEST_CASE(
    "crashes: bad weights, huge sizes and unusable folders end with a message, not a signal") {
  cgr::test::TempDir work("cgr-hostile");
  // fc.weight of rank 0: the sample read its first dimension unchecked (SIGSEGV).
  cgr::Weights scalar;
  scalar.add("fc.weight", Tensor(Shape{}, std::vector<float>{1.0f}));
  cgr::save_safetensors(work.path / "scalar.safetensors", scalar);
  Run r =
      run(kExits, kSmallExits + " --weights " + quoted((work.path / "scalar.safetensors").string()),
          work.path);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "'fc.weight' has shape scalar, expected classes x 512"));
  // Sizes whose tensors cannot be allocated: refused as arguments (bad_alloc aborted before).
  r = run(kExits, "--device cpu --size 100000", work.path);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--size: 100000 is not in [1, 4096]"));
  r = run(kExits, "--device cpu --classes 99999999999", work.path);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--classes: 99999999999 is not in [0, 1000000]"));
  // --export-output under a plain file: an error before the run (a filesystem_error aborted
  // after it).
  std::ofstream(work.path / "plain") << "x";
  r = run(kExits,
          kSmallExits + " --export-output " + quoted((work.path / "plain" / "out").string()),
          work.path);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "cannot be the output folder"));
  CHECK_FALSE(contains(r.out, "answered by"));  // nothing was computed
}

TEST_CASE("hangs: FIFOs, endless durations and absurd thread counts end at once") {
  cgr::test::TempDir work("cgr-hostile");
  const fs::path fifo = work.path / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO for reading waited for a writer forever; now it is refused unopened-for-data.
  for (const std::string& args : {kSmallBench + " --weights " + quoted(fifo.string()),
                                  kSmallBench + " --load-input " + quoted(fifo.string()),
                                  "--model " + quoted(fifo.string() + ".onnx") + " --device cpu"}) {
    if (args.find(".onnx") != std::string::npos) {
      REQUIRE(::mkfifo((fifo.string() + ".onnx").c_str(), 0600) == 0);
    }
    INFO(args);
    const Run r = run(kBench, args, work.path, 20);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "a FIFO, not a regular file"));
  }
  const Run image = run(kExits, kSmallExits + " --image " + quoted(fifo.string()), work.path, 20);
  CHECK(image.status == 1);
  CHECK(contains(image.err, "a FIFO, not a regular file"));
  // Durations that never end, thread counts the system cannot give: usage errors.
  for (const char* bad : {"--duration-s nan", "--duration-s inf", "--warmup-ms inf",
                          "--threads 2000", "--threads 10000"}) {
    INFO(bad);
    const Run r = run(kBench, std::string("--model two-branch --device cpu ") + bad, work.path, 20);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "is not in ["));
  }
  const Run threads = run(kExits, kSmallExits + " --threads 10000", work.path, 20);
  CHECK(threads.status == 2);
  CHECK(contains(threads.err, "--threads: 10000 is not in [0, "));
}

#if defined(CGR_HAVE_ONNX)
TEST_CASE("writes outside the output folder: output names become safe file names, checked first") {
  cgr::test::TempDir work("cgr-hostile");
  // A model whose outputs are named like paths: "../escaped", "/abs/<here>/absolute", and a
  // torch-style "/relu/Relu_output_0".
  const std::string absolute = (work.path / "absolute").string();
  cgr::test::OnnxBuilder b;
  b.input("x", {1, 2, 3, 3});
  b.node("Relu", {"x"}, {"../escaped"}, "a");
  b.node("Relu", {"x"}, {absolute}, "b");
  b.node("Relu", {"x"}, {"/relu/Relu_output_0"}, "c");
  b.output("../escaped");
  b.output(absolute);
  b.output("/relu/Relu_output_0");
  fs::create_directories(work.path / "models");
  std::ofstream(work.path / "models" / "paths.onnx", std::ios::binary) << b.bytes();
  const fs::path out = work.path / "out";
  const Run r = run(kBench,
                    "--model " + quoted((work.path / "models" / "paths.onnx").string()) +
                        " --device cpu --mode dag --iterations 1 --warmup-ms 0 --export-output " +
                        quoted(out.string()),
                    work.path);
  CHECK(r.status == 0);
  const std::string stem = fs::path(absolute).relative_path().string();
  std::string safe = "_" + stem;  // every '/' of the absolute path became '_'
  for (char& c : safe)
    c = c == '/' ? '_' : c;
  CHECK(files_under(out) ==
        std::vector<std::string>{"_._escaped.npy", "_relu_Relu_output_0.npy", safe + ".npy"});
  CHECK_FALSE(fs::exists(work.path / "escaped.npy"));
  CHECK_FALSE(fs::exists(absolute + ".npy"));

  // Two outputs that would share a file: refused before anything runs.
  cgr::test::OnnxBuilder clash;
  clash.input("x", {1, 2});
  clash.node("Relu", {"x"}, {"a/b"}, "a");
  clash.node("Relu", {"x"}, {"a_b"}, "b");
  clash.output("a/b");
  clash.output("a_b");
  std::ofstream(work.path / "models" / "clash.onnx", std::ios::binary) << clash.bytes();
  const Run c = run(kBench,
                    "--model " + quoted((work.path / "models" / "clash.onnx").string()) +
                        " --device cpu --iterations 1 --export-output " +
                        quoted((work.path / "clash").string()),
                    work.path);
  CHECK(c.status == 1);
  CHECK(contains(c.err, "outputs 'a/b' and 'a_b' would both be written to"));
  CHECK_FALSE(contains(c.out, "Performance summary"));  // refused before the run
}
#endif

TEST_CASE("truncated files: a safetensors file cut short after it was opened cannot fault") {
  cgr::test::TempDir work("cgr-hostile");
  cgr::Weights w;
  w.add("a", cgr::test::random_tensor(Shape{1000}, 1));
  const fs::path path = work.path / "w.safetensors";
  cgr::save_safetensors(path, w);
  const cgr::SafetensorsFile file = cgr::SafetensorsFile::open(path);
  // Cut the file to its header: a mapped reader faulted (SIGBUS) on the next tensor access.
  REQUIRE(::truncate(path.c_str(), 16) == 0);
  CHECK(cgr::test::same_bits(file.tensor("a"), *w.find("a")));
  // Opening the truncated file is a clear error.
  CHECK(cgr::test::error_message([&] {
          (void)cgr::SafetensorsFile::open(path);
        }).starts_with(path.string() + ":"));
}

TEST_CASE("silent wrong answers: wrong layouts, unwritable files and NaN results are said") {
  cgr::test::TempDir work("cgr-hostile");
  // An input of the right element count in another layout (NHWC for NCHW, flat, rank 5).
  for (const Shape& shape : {Shape{1, 16, 16, 3}, Shape{768}, Shape{1, 1, 3, 16, 16}}) {
    CAPTURE(shape.to_string());
    const fs::path file = work.path / "x.npy";
    cgr::save_npy(file, cgr::test::random_tensor(shape, 2));
    const Run r = run(kBench, kSmallBench + " --load-input " + quoted(file.string()), work.path);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "does not fit input 'x' 1x3x16x16"));
  }
  // The documented batch rule: the input's shape without its leading 1 is accepted.
  cgr::save_npy(work.path / "chw.npy", cgr::test::random_tensor(Shape{3, 16, 16}, 3));
  CHECK(run(kBench, kSmallBench + " --load-input " + quoted((work.path / "chw.npy").string()),
            work.path)
            .status == 0);
  // --dot into a folder that does not exist: an error, not "written".
  const Run dot = run(kTwoBranch,
                      "--device cpu --size 8 --iterations 1 --dot " +
                          quoted((work.path / "missing" / "g.dot").string()),
                      work.path);
  CHECK(dot.status == 1);
  CHECK(contains(dot.err, "cannot create"));
  CHECK_FALSE(contains(dot.out, "written"));
  // A NaN image: the sample says so, prints no class, and fails.
  Tensor nan_image(Shape{1, 3, 32, 32},
                   std::vector<float>(3 * 32 * 32, std::numeric_limits<float>::quiet_NaN()));
  cgr::save_npy(work.path / "nan.npy", nan_image);
  const Run nan =
      run(kExits, kSmallExits + " --exits all --image " + quoted((work.path / "nan.npy").string()),
          work.path);
  CHECK(nan.status == 1);
  CHECK(contains(nan.err, "hold NaN or infinite values"));
  CHECK(contains(nan.out, "  final       -"));
}

TEST_CASE("no limits: a huge model file is refused unread") {
  cgr::test::TempDir work("cgr-hostile");
  // 3 GB of nothing (sparse): refused from its size, before a byte is read.
  const fs::path big = work.path / "big.onnx";
  std::ofstream(big).close();
  REQUIRE(::truncate(big.c_str(), 3LL << 30) == 0);
  const Run r = run(kBench, "--model " + quoted(big.string()) + " --device cpu", work.path, 20);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "bytes is more than an ONNX model"));
  CHECK(r.seconds < 10);
}

TEST_CASE("unhelpful messages: reasons, ranges and unwritable text are said plainly") {
  cgr::test::TempDir work("cgr-hostile");
  Run r = run(kBench, "--model " + quoted((work.path / "nothing.onnx").string()) + " --device cpu",
              work.path);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "cannot open (No such file or directory)"));
  r = run(kBench, kSmallBench + " --threshold 1e40", work.path);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--threshold: 1e40 is not in [0, 1]"));
  // An argument that is not UTF-8 in the JSON report (a file name): U+FFFD in its place, not
  // an exception after the run and an empty file.
  const fs::path json = work.path / "run.json";
  r = run(kBench,
          kSmallBench + " --export-json " + quoted(json.string()) + " --export-dot " +
              quoted((work.path / "g\xff.dot").string()),
          work.path);
  CHECK(r.status == 0);
  const std::string text = read_text(json);
  CHECK(contains(text, "g\xEF\xBF\xBD.dot"));
  CHECK(nlohmann::json::accept(text));
}

TEST_CASE("lenient parsing: every number is the whole token, finite and in range") {
  cgr::test::TempDir work("cgr-hostile");
  for (const char* bad : {"--threshold 0.5abc", "--iterations 2x", "--iterations -5",
                          "--threads -1", "--threshold -1", "--threshold 2", "--threshold inf",
                          "--batch 0", "--iterations 1 --iterations 2"}) {
    INFO(bad);
    const Run bench = run(kBench, std::string("--model two-branch --device cpu ") + bad, work.path);
    CHECK(bench.status == 2);
    CHECK(bench.err.starts_with("cgr-bench: "));
  }
  for (const char* bad :
       {"--threshold 0.5abc", "--iterations 2x", "--iterations -5", "--threads -1",
        "--threshold -1", "--threshold 2", "--threshold inf", "--size 0"}) {
    INFO(bad);
    const Run sample = run(kExits, std::string("--device cpu ") + bad, work.path);
    CHECK(sample.status == 2);
    CHECK(sample.err.starts_with("resnet18_exits: "));
  }
}
