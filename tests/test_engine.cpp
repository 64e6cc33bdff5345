// The engine end to end on the CPU executor: dependency structure of real networks, fusion,
// bit-identical results across modes and thread counts, concurrent execution contexts, and
// the errors bad weights and bad inputs raise.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "cgr/models/random_weights.hpp"
#include "cgr/models/resnet18.hpp"
#include "cgr/models/two_branch.hpp"
#include "cgr/thread_pool.hpp"
#include "test_support.hpp"

using namespace cgr;
using cgr::test::error_message;
using cgr::test::random_vector;

namespace {

int op_index(const Graph& g, const std::string& name) {
  for (int i = 0; i < g.op_count(); ++i) {
    if (g.op(i).name == name) return i;
  }
  FAIL("no op named " << name);
  return -1;
}

std::vector<float> infer_once(const Engine& engine, const std::string& input,
                              const std::vector<float>& x, const std::string& output) {
  return engine.create_context().infer({{input, x}}).output(output).to_vector();
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("two-branch network: no path between the branches, critical path 4, width 2") {
  const Network net = models::two_branch({.size = 16, .width = 8, .relu = false});
  const Graph g = net.graph();
  REQUIRE(g.op_count() == 7);
  const std::vector<std::string> left{"conv1", "conv2", "conv3"}, right{"conv4", "conv5", "conv6"};
  for (const auto& a : left)
    for (const auto& b : right) {
      CAPTURE(a);
      CAPTURE(b);
      CHECK_FALSE(g.ordered(op_index(g, a), op_index(g, b)));
    }
  CHECK(g.reaches(op_index(g, "conv1"), op_index(g, "cat")));
  CHECK(g.reaches(op_index(g, "conv4"), op_index(g, "cat")));
  CHECK(g.critical_path_length() == 4);
  CHECK(g.max_width() == 2);
  CHECK(g.edges().size() == 6);

  // The same holds for the ops the engine runs (each conv fused with its ReLU).
  const Network with_relu = models::two_branch({.size = 16, .width = 8});
  const Engine engine = Engine::build(with_relu, models::random_weights(with_relu), {.threads = 2});
  CHECK(engine.graph().op_count() == 7);
  CHECK(engine.graph().critical_path_length() == 4);
  CHECK(engine.graph().max_width() == 2);
  CHECK_FALSE(engine.graph().ordered(op_index(engine.graph(), "conv1+conv1.relu"),
                                     op_index(engine.graph(), "conv4+conv4.relu")));
}

TEST_CASE("residual block: exactly the edges its data needs") {
  Network net;
  const Value x = net.input("x", {1, 8, 8, 8});
  Value v = net.conv2d(x, {.out_channels = 8, .kernel = 3, .padding = 1, .bias = false}, "conv1");
  v = net.batch_norm2d(v, "bn1");
  v = net.relu(v, "relu1");
  v = net.conv2d(v, {.out_channels = 8, .kernel = 3, .padding = 1, .bias = false}, "conv2");
  v = net.batch_norm2d(v, "bn2");
  // x is read by conv1 and by the add: no edge stands for that, both only read it.
  v = net.add(v, x, "add");
  net.output("y", net.relu(v, "relu2"));
  const Graph g = net.graph();
  std::vector<std::pair<std::string, std::string>> edges;
  for (const Edge& e : g.edges()) {
    edges.emplace_back(g.op(e.from).name, g.op(e.to).name);
    CHECK(e.hazards == kRaw);
  }
  CHECK(edges == std::vector<std::pair<std::string, std::string>>{{"conv1", "bn1"},
                                                                  {"bn1", "relu1"},
                                                                  {"relu1", "conv2"},
                                                                  {"conv2", "bn2"},
                                                                  {"bn2", "add"},
                                                                  {"add", "relu2"}});

  // With a downsample branch, the block has two lanes that meet at the add; the engine fuses
  // conv2+bn2+add+relu2 and runs the downsample conv beside conv1.
  Network ds;
  const Value y = ds.input("x", {1, 8, 8, 8});
  Value m = ds.conv2d(
      y, {.out_channels = 16, .kernel = 3, .stride = 2, .padding = 1, .bias = false}, "conv1");
  m = ds.relu(ds.batch_norm2d(m, "bn1"), "relu1");
  m = ds.batch_norm2d(
      ds.conv2d(m, {.out_channels = 16, .kernel = 3, .padding = 1, .bias = false}, "conv2"), "bn2");
  Value id = ds.conv2d(y, {.out_channels = 16, .kernel = 1, .stride = 2, .bias = false}, "down");
  id = ds.batch_norm2d(id, "down_bn");
  ds.output("y", ds.relu(ds.add(m, id, "add"), "relu2"));
  const Engine engine = Engine::build(ds, models::random_weights(ds), {.threads = 1});
  const Graph& eg = engine.graph();
  REQUIRE(eg.op_count() == 3);
  const int conv1 = op_index(eg, "conv1+bn1+relu1");
  const int down = op_index(eg, "down+down_bn");
  const int conv2 = op_index(eg, "conv2+bn2+add+relu2");
  CHECK_FALSE(eg.ordered(conv1, down));
  CHECK(eg.edges() ==
        std::vector<Edge>{{std::min(conv1, down), conv2}, {std::max(conv1, down), conv2}});
  CHECK(eg.max_width() == 2);
}

TEST_CASE("ResNet-18 on the CPU: fused structure, memory reuse, dag == eager bit for bit") {
  const Network net = models::resnet18(1, 64, 10);
  const Weights weights = models::random_weights(net, 3);
  const auto x = random_vector(3 * 64 * 64, 4);
  std::vector<float> reference;
  for (Mode mode : {Mode::eager, Mode::dag}) {
    for (int threads : {1, 2}) {
      CAPTURE(to_string(mode));
      CAPTURE(threads);
      const Engine engine = Engine::build(net, weights, {.mode = mode, .threads = threads});
      const EngineInfo info = engine.info();
      CHECK(info.layers == 69);
      // conv1+bn1+relu, maxpool, 8 blocks x 2 convs, 3 downsamples, avgpool+flatten+fc (one
      // op: the Linear pools its input, and the Flatten between them is a view).
      CHECK(info.ops == 22);
      CHECK(info.max_width == 2);  // the downsample convs run beside the blocks' first convs
      CHECK(info.arena_bytes < info.activation_bytes / 2);
      const auto y = infer_once(engine, "image", x, "logits");
      REQUIRE(y.size() == 10);
      if (reference.empty()) reference = y;
      CHECK(bit_identical(y, reference));
    }
  }
  // Without fusion the result matches to rounding.
  const Engine unfused = Engine::build(net, weights, {.threads = 2, .fuse = false});
  CHECK(unfused.info().ops == 69);
  CHECK(cgr::test::relative_error(infer_once(unfused, "image", x, "logits"), reference) < 1e-4);
}

TEST_CASE("multi-branch network: dag equals eager bit for bit with 1 and 2 threads") {
  // An Inception-style module: four branches of different depth, concatenated.
  Network net;
  const Value x = net.input("x", {1, 16, 20, 20});
  auto conv = [&](Value v, std::int64_t out, std::int64_t k, const std::string& name) {
    return net.relu(net.conv2d(v, {.out_channels = out, .kernel = k, .padding = k / 2}, name),
                    name + ".relu");
  };
  const Value b1 = conv(x, 8, 1, "b1");
  const Value b2 = conv(conv(x, 6, 1, "b2a"), 8, 3, "b2b");
  const Value b3 = conv(conv(conv(x, 4, 1, "b3a"), 6, 3, "b3b"), 8, 3, "b3c");
  const Value b4 =
      conv(net.max_pool2d(x, {.kernel = 3, .stride = 1, .padding = 1}, "b4pool"), 8, 1, "b4");
  net.output("y", net.concat({b1, b2, b3, b4}, "cat"));
  CHECK(net.graph().max_width() == 4);
  const Weights w = models::random_weights(net, 9);
  const auto input = random_vector(16 * 20 * 20, 10);
  const auto reference =
      infer_once(Engine::build(net, w, {.mode = Mode::eager, .threads = 1}), "x", input, "y");
  for (Mode mode : {Mode::dag, Mode::eager}) {
    for (int threads : {1, 2, 3}) {
      CAPTURE(threads);
      CHECK(bit_identical(
          infer_once(Engine::build(net, w, {.mode = mode, .threads = threads}), "x", input, "y"),
          reference));
    }
  }
}

TEST_CASE("4 threads x 200 inferences on separate contexts equal one thread's results") {
  const Network net = models::two_branch({.size = 12, .width = 8});
  const Engine engine = Engine::build(net, models::random_weights(net, 5), {.threads = 2});
  std::vector<std::vector<float>> inputs, expected;
  for (unsigned i = 0; i < 8; ++i) {
    inputs.push_back(random_vector(3 * 12 * 12, 100 + i));
    expected.push_back(infer_once(engine, "x", inputs.back(), "out"));
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ExecutionContext ctx = engine.create_context();
      for (int i = 0; i < 200; ++i) {
        const std::size_t which = static_cast<std::size_t>((i + t) % 8);
        const Tensor y = ctx.infer({{"x", inputs[which]}}).output("out");
        if (!bit_identical(y.to_vector(), expected[which])) ++mismatches[t];
      }
    });
  }
  for (auto& th : threads)
    th.join();
  CHECK(mismatches == std::vector<int>{0, 0, 0, 0});
}

TEST_CASE("zero-copy buffers and op counts") {
  const Network net = models::two_branch({.size = 8, .width = 4});
  const Engine engine = Engine::build(net, models::random_weights(net), {.threads = 2});
  ExecutionContext ctx = engine.create_context();
  const auto x = random_vector(3 * 8 * 8, 1);
  std::copy(x.begin(), x.end(), ctx.input_buffer("x").begin());
  ctx.run();
  const auto direct = ctx.output_buffer("out");
  CHECK(bit_identical({direct.begin(), direct.end()}, infer_once(engine, "x", x, "out")));
  CHECK(ctx.ops_executed() == 7);
  CHECK(engine.outputs().at(0).shape == Shape{1, 8, 8, 8});
}

TEST_CASE("bad weights are reported all at once, naming layers and tensors") {
  Network net;
  const Value x = net.input("x", {1, 3, 8, 8});
  const Value c = net.conv2d(x, {.out_channels = 4, .kernel = 3, .padding = 1}, "conv1");
  net.output("y", net.batch_norm2d(c, "bn1"));
  Weights w = models::random_weights(net);
  w.set("conv1.weight", Tensor(Shape{4, 3, 5, 5}));
  w.add("conv9.weight", Tensor(Shape{1}));
  Weights missing = w;
  const std::string message = error_message([&] { Engine::build(net, w); });
  CHECK(message.find("weights do not match the network") == 0);
  CHECK(message.find("wrong shape: 'conv1.weight' is 4x3x5x5 but Conv2d 'conv1' expects 4x3x3x3") !=
        std::string::npos);
  CHECK(message.find("unexpected (no layer uses them): 'conv9.weight'") != std::string::npos);

  // Half-precision weights of the right shape: a dtype problem, said as one.
  Weights half = models::random_weights(net);
  half.set("bn1.weight", Tensor(Shape{4}, DType::f16));
  CHECK(error_message([&] { Engine::build(net, half); }) ==
        "weights do not match the network:\n  wrong dtype: 'bn1.weight' is f16 but BatchNorm2d "
        "'bn1' computes in f32 (convert the checkpoint to float32)");

  Weights partial;
  partial.add("conv1.weight", Tensor(Shape{4, 3, 3, 3}));
  const std::string absent = error_message([&] { Engine::build(net, partial); });
  CHECK(absent.find("missing: 'conv1.bias' (Conv2d 'conv1', expected 4)") != std::string::npos);
  CHECK(absent.find("'bn1.running_var' (BatchNorm2d 'bn1', expected 4)") != std::string::npos);
}

TEST_CASE("bad inputs raise errors and leave the context usable") {
  const Network net = models::two_branch({.size = 8, .width = 4});
  const Engine engine = Engine::build(net, models::random_weights(net), {.threads = 2});
  ExecutionContext ctx = engine.create_context();
  const auto x = random_vector(3 * 8 * 8, 1);
  CHECK(error_message([&] {
          ctx.infer({{"image", x}});
        }) == "no input named 'image' (inputs: 'x' 1x3x8x8)");
  const std::vector<float> short_input(100);
  CHECK(error_message([&] {
          ctx.infer({{"x", short_input}});
        }) == "input 'x' has 100 elements, expected 192 (1x3x8x8)");
  const std::vector<std::uint16_t> halves(192);
  CHECK(error_message([&] {
          ctx.infer({{"x", TensorView(DType::f16, halves.data(), halves.size())}});
        }) == "input 'x' is f16 but the network expects f32");
  CHECK(error_message([&] { ctx.infer({}); }) == "input 'x' (1x3x8x8) is missing");
  // A tensor of the right size in another layout (NHWC for NCHW) or rank is refused by shape.
  const Tensor nhwc(Shape{1, 8, 8, 3}, x);
  CHECK(error_message([&] {
          ctx.infer({{"x", nhwc}});
        }) == "input 'x' has shape 1x8x8x3, expected 1x3x8x8");
  const Tensor flat(Shape{192}, x);
  CHECK(error_message([&] {
          ctx.infer({{"x", flat}});
        }) == "input 'x' has shape 192, expected 1x3x8x8");
  CHECK(ctx.infer({{"x", Tensor(Shape{1, 3, 8, 8}, x)}}).outputs.size() == 1);
  CHECK(error_message([&] {
          (void)ctx.infer({{"x", x}}).output("logits");
        }) == "no output named 'logits' (outputs: out)");
  // Still works.
  CHECK(bit_identical(infer_once(engine, "x", x, "out"),
                      ctx.infer({{"x", x}}).output("out").to_vector()));
}

TEST_CASE("engine limits: threads, the exit threshold and memory are checked at build") {
  const Network net = models::two_branch({.size = 8, .width = 4});
  const Weights w = models::random_weights(net);
  const int most = ThreadPool::max_threads();
  CHECK(most == ThreadPool::kMaxThreadsPerHardwareThread * ThreadPool::hardware_threads());
  CHECK(error_message([&] { Engine::build(net, w, {.threads = most + 1}); }) ==
        fmt::format("{} threads: give 0 (one per hardware thread) or 1 to {} (4 per hardware "
                    "thread, {} here)",
                    most + 1, most, ThreadPool::hardware_threads()));
  CHECK(error_message([&] { Engine::build(net, w, {.threads = -1}); }).starts_with("-1 threads: "));
  CHECK_NOTHROW(Engine::build(net, w, {.threads = most}));
  for (float threshold : {-0.1f, 1.5f, std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    CAPTURE(threshold);
    CHECK(error_message([&] {
            Engine::build(net, w, {.threshold = threshold});
          }).find("is not in [0, 1]: it is compared with a confidence") != std::string::npos);
  }
  // Activations that cannot fit are refused before any arena is allocated: a terabyte input.
  Network huge;
  huge.output("y", huge.relu(huge.input("x", {1, 1, 1 << 19, 1 << 19}), "r"));
  const std::string message = error_message([&] { Engine::build(huge, {}); });
  CHECK(message.starts_with("the engine needs 2.0 TiB per context for activations"));
  CHECK(message.find("(EngineOptions::memory_limit_bytes)") != std::string::npos);
  // A stated limit is honoured the same way.
  CHECK(error_message([&] {
          Engine::build(net, w, {.memory_limit_bytes = 1024});
        }).find("more than the 1.0 KiB limit") != std::string::npos);
}

TEST_CASE("thread pool: a thread the system refuses fails the pool cleanly, with the count") {
  int started = 0;
  const ThreadPool::ThreadStarter refuse_third = [&](std::function<void()> body) {
    if (++started == 3) throw std::system_error(EAGAIN, std::generic_category(), "thread");
    return std::thread(std::move(body));
  };
  // The two workers that did start are stopped and joined: no hang, no std::terminate.
  CHECK(error_message([&] {
          ThreadPool pool(4, refuse_third);
        }).starts_with("a thread pool of 4 threads: the system started only 3 (thread: "));
  CHECK(error_message([] {
          ThreadPool pool(ThreadPool::max_threads() + 1);
        }).find("a thread pool of") == 0);
  ThreadPool fine(2);
  CHECK(fine.size() == 2);
}

TEST_CASE("thread pool: queued tasks run highest priority first, oldest first among equals") {
  ThreadPool pool(1);  // no workers: the caller runs every task, one at a time, in queue order
  std::vector<int> order;
  pool.submit([&] { order.push_back(1); }, 1.0);
  pool.submit([&] { order.push_back(2); }, 5.0);
  pool.submit([&] { order.push_back(3); }, 1.0);
  pool.submit(
      [&] {
        order.push_back(4);
        // Queued from inside a task, behind nothing of higher priority: it runs next.
        pool.submit([&] { order.push_back(5); }, 9.0);
      },
      7.0);
  pool.submit([&] { order.push_back(6); });  // default priority 0
  while (pool.run_one()) {
  }
  CHECK(order == std::vector<int>{4, 5, 2, 1, 3, 6});
}

TEST_CASE("thread pool: parallel_for gives the caller the first share of the chunks") {
  // Two threads, eight chunks: shares [0, 4) for the caller, [4, 8) for the helper, each
  // claimed front first. Chunk 0 waits until another chunk has started and chunks 4-7 until
  // chunk 0 has (bounded: a broken split fails the checks instead of hanging), so the helper's
  // first chunk and the caller's are each their share's front whatever the timing.
  ThreadPool pool(2);
  const auto caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran_by(8);
  std::atomic<bool> zero_started{false}, other_started{false};
  std::vector<int> helper_order;
  std::mutex mutex;
  const auto wait_for = [](const std::atomic<bool>& flag) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!flag.load() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
  };
  pool.parallel_for(8, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      ran_by[i] = std::this_thread::get_id();
      if (i == 0) {
        zero_started = true;
        wait_for(other_started);
      } else {
        other_started = true;
        if (i >= 4) wait_for(zero_started);
      }
      if (ran_by[i] != caller) {
        const std::lock_guard lock(mutex);
        helper_order.push_back(static_cast<int>(i));
      }
    }
  });
  CHECK(ran_by[0] == caller);
  REQUIRE_FALSE(helper_order.empty());
  CHECK(helper_order.front() == 4);
}

TEST_CASE("dag scheduler: of two ready branches, the longer estimated chain starts first") {
  // `short` is declared (and sorted) first; `long` holds nearly all the work. With one thread
  // the ready ops run one by one, so their start order is the scheduler's choice.
  Network net;
  const Value x = net.input("x", {1, 8, 16, 16});
  const Value a = net.conv2d(x, {.out_channels = 8, .kernel = 1}, "short");
  Value b = net.conv2d(x, {.out_channels = 64, .kernel = 3, .padding = 1}, "long1");
  b = net.conv2d(b, {.out_channels = 8, .kernel = 3, .padding = 1}, "long2");
  net.output("y", net.concat({a, b}, "cat"));
  const Engine engine = Engine::build(net, models::random_weights(net), {.threads = 1});
  REQUIRE(engine.graph().topological_order().front() == op_index(engine.graph(), "short"));
  ExecutionContext ctx = engine.create_context();
  ctx.set_profiling(true);
  ctx.run();
  const auto timings = ctx.op_timings();
  const auto start = [&](const std::string& name) {
    return timings[static_cast<std::size_t>(op_index(engine.graph(), name))].start_ms;
  };
  CHECK(start("long1") < start("short"));
}

TEST_CASE("network-level errors: no output, foreign values, unknown modes, no CUDA device here") {
  Network net;
  const Value x = net.input("x", {1, 4});
  CHECK(error_message([&] { Engine::build(net, {}); }) ==
        "the network declares no output (call Network::output)");
  CHECK(error_message([&] { net.relu(Value{42}, "r"); }) ==
        "layer 'r': an input Value (id 42) does not belong to this network");
  CHECK(error_message([&] {
          net.input("bad", {1, 0});
        }) == "input 'bad': shape 1x0 has a dimension <= 0");
  net.output("y", net.relu(x, "r"));
  CHECK(error_message([&] {
          Engine::build(net, {}, {.mode = Mode::stream_graph});
        }).find("stream-graph exists only on the cuda device") != std::string::npos);
  CHECK(error_message([] { parse_mode("fast"); }) ==
        "unknown mode 'fast' (expected dag, eager or stream-graph)");
  // Without a GPU the CUDA engine cannot be built, and the message says why; with one it builds.
  const std::string cuda = error_message([&] { Engine::build(net, {}, {.device = Device::cuda}); });
  const std::string reason = cgr::cuda_unavailable_reason();
  if (reason.empty()) {
    CHECK(cuda.empty());
  } else {
    CHECK(cuda == reason);
    CHECK(cuda.find("no CUDA device: ") == 0);
  }
  // Unused layers (not reaching an output) are pruned and need no weights.
  net.linear(x, {.out_features = 3}, "unused");
  const Engine engine = Engine::build(net, {});
  CHECK(engine.info().ops == 1);
  CHECK(engine.create_context()
            .infer({{"x", std::vector<float>{-1, 2, -3, 4}}})
            .output("y")
            .to_vector()[1] == 2.0f);
}

TEST_CASE("profiling records one interval per op, inside the run") {
  const Network net = models::two_branch({.size = 8, .width = 4});
  const Engine engine = Engine::build(net, models::random_weights(net), {.threads = 2});
  ExecutionContext ctx = engine.create_context();
  ctx.run();
  CHECK(ctx.op_timings().empty());
  ctx.set_profiling(true);
  ctx.run();
  const auto timings = ctx.op_timings();
  REQUIRE(timings.size() == 7);
  for (int op = 0; op < engine.graph().op_count(); ++op) {
    const auto& t = timings[static_cast<std::size_t>(op)];
    CHECK(t.op == engine.graph().op(op).name);
    CHECK(t.start_ms >= 0.0);
    CHECK(t.end_ms >= t.start_ms);
    // An op starts only after each of its predecessors ended.
    for (int pred : engine.graph().predecessors(op)) {
      CHECK(timings[static_cast<std::size_t>(pred)].end_ms <= t.start_ms);
    }
    // Run by the caller (0) or the pool's one worker (1).
    CHECK(t.thread >= 0);
    CHECK(t.thread < 2);
  }
  // Engine::op_infos: the same ops in the same order, their shapes, work and critical flags.
  const std::vector<OpInfo> infos = engine.op_infos();
  REQUIRE(infos.size() == timings.size());
  int critical = 0;
  for (int op = 0; op < engine.graph().op_count(); ++op) {
    const OpInfo& info = infos[static_cast<std::size_t>(op)];
    CHECK(info.name == engine.graph().op(op).name);
    CHECK(info.kind == engine.graph().op(op).label);
    CHECK_FALSE(info.input_shapes.empty());
    CHECK(info.output_shape.rank() == 4);
    CHECK(info.flops > 0);
    CHECK(info.estimated_us > 0);
    critical += info.critical ? 1 : 0;
  }
  // The longest chain: one branch's three convs and the concat.
  CHECK(critical >= 4);
  const std::string dot = engine.to_dot("two-branch");
  CHECK(dot.find("tooltip=\"conv1+conv1.relu [Conv2d+ReLU]: 1x3x8x8 -> 1x4x8x8\"") !=
        std::string::npos);
  CHECK(dot.find("[label=\"1x4x8x8\"]") != std::string::npos);
}

TEST_CASE("custom ops: user work with declared inputs joins the dependency graph") {
  Network net;
  const Value x = net.input("x", {1, 2, 4, 4});
  const Value a = net.relu(x, "a");
  CustomOpParams doubled;
  doubled.output_shape = Shape{1, 2, 4, 4};
  doubled.kind = "Double";
  doubled.cpu = [](std::span<const float* const> in, float* out) {
    for (int i = 0; i < 32; ++i)
      out[i] = 2.0f * in[0][i];
  };
  const Value b = net.custom({x}, doubled, "double");
  net.output("y", net.add(a, b, "sum"));
  const Graph g = net.graph();
  CHECK_FALSE(g.ordered(op_index(g, "a"), op_index(g, "double")));
  CHECK(g.reaches(op_index(g, "double"), op_index(g, "sum")));
  CHECK(g.op(op_index(g, "double")).label == "Double");
  const auto input = random_vector(32, 4);
  const auto y = infer_once(Engine::build(net, {}, {.threads = 2}), "x", input, "y");
  for (int i = 0; i < 32; ++i)
    CHECK(y[i] == std::max(input[i], 0.0f) + 2.0f * input[i]);

  Network gpu_only;
  CustomOpParams cuda_only;
  cuda_only.output_shape = Shape{4};
  cuda_only.cuda = [](void*, std::span<const float* const>, float*) {};
  gpu_only.output("y", gpu_only.custom({gpu_only.input("x", {4})}, cuda_only, "kernel"));
  CHECK(
      error_message([&] { Engine::build(gpu_only, {}); }) ==
      "Custom 'kernel' has no CPU implementation (CustomOpParams::cpu): build the engine for cuda");
}
