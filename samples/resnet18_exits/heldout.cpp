#include "heldout.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <cgr/error.hpp>
#include <cgr/files.hpp>
#include <cgr/npy.hpp>
#include <nlohmann/json.hpp>

#include "cgr/models/resnet18_exits.hpp"

namespace cgr::samples {
namespace {

constexpr int kHeadCount = static_cast<int>(kHeads.size());
constexpr int kFinal = kHeadCount - 1;
// An exit decision of the engine may differ from PyTorch's only where the confidence that
// decides it is this close to the threshold: float rounding of the same math.
constexpr double kDecisionTolerance = 1e-5;
// Share of images whose answer (exit and class) must equal PyTorch's.
constexpr double kRequiredAgreement = 0.995;

// What train_digits.py leaves in its folder, checked.
struct HeldoutSet {
  std::filesystem::path weights_path, images_path, labels_path;
  std::string dataset;  // manifest.json's description, else the folder
  Weights weights;
  std::int64_t classes = 0, size = 0, count = 0;
  Tensor images;  // count x 3 x size x size
  std::vector<int> labels;
  std::vector<std::array<int, 4>> torch_top1;          // exit0, exit1, exit2, final
  std::vector<std::array<float, 4>> torch_confidence;  // largest softmax probability
};

// A class index stored as a float (.npy files hold float32 only): a whole number in [0, classes).
int class_index(float value, std::int64_t classes, const std::filesystem::path& file,
                std::int64_t index) {
  if (!(value >= 0 && value < static_cast<float>(classes)) || std::floor(value) != value) {
    fail("{}: element {} is {}, not a class index in [0, {})", file.string(), index, value,
         classes);
  }
  return static_cast<int>(value);
}

Tensor load_with_shape(const std::filesystem::path& path, const std::vector<std::int64_t>& dims) {
  Tensor tensor = load_npy(path);
  if (tensor.dtype() != DType::f32)
    fail("{}: holds {}, expected float32", path.string(), to_string(tensor.dtype()));
  if (tensor.shape().dims() != dims) {
    fail("{}: has shape {}, expected {}", path.string(), tensor.shape().to_string(),
         Shape(dims).to_string());
  }
  return tensor;
}

HeldoutSet load_heldout(const std::filesystem::path& folder) {
  std::error_code error;
  if (!std::filesystem::is_directory(folder, error))
    fail("--heldout {}: not a folder (scripts/run-sample.sh trains and writes one)",
         folder.string());
  HeldoutSet set;
  set.weights_path = folder / "weights.safetensors";
  set.images_path = folder / "heldout_images.npy";
  set.labels_path = folder / "heldout_labels.npy";
  set.weights = Weights::load_safetensors(set.weights_path);
  const Tensor* fc = set.weights.find("fc.weight");
  if (fc == nullptr || fc->shape().rank() != 2 || fc->shape()[0] < 1) {
    fail("{}: no 'fc.weight' of shape classes x 512 (is this a ResNet-18 with exits?)",
         set.weights_path.string());
  }
  set.classes = fc->shape()[0];

  set.images = load_npy(set.images_path);
  const Shape& s = set.images.shape();
  if (set.images.dtype() != DType::f32 || s.rank() != 4 || s[0] < 1 || s[1] != 3 || s[2] != s[3] ||
      s[2] < 1 || s[2] > 4096) {
    fail("{}: has shape {} ({}), expected N x 3 x S x S float32", set.images_path.string(),
         s.to_string(), to_string(set.images.dtype()));
  }
  set.count = s[0];
  set.size = s[2];
  const auto pixels = set.images.f32();
  const std::int64_t per_image = 3 * set.size * set.size;
  for (std::int64_t i = 0; i < set.count; ++i) {
    const auto image = pixels.subspan(static_cast<std::size_t>(i * per_image),
                                      static_cast<std::size_t>(per_image));
    if (!std::all_of(image.begin(), image.end(), [](float v) { return std::isfinite(v); }))
      fail("{}: image {} holds NaN or infinite values", set.images_path.string(), i);
  }

  const Tensor labels = load_with_shape(set.labels_path, {set.count});
  for (std::int64_t i = 0; i < set.count; ++i)
    set.labels.push_back(
        class_index(labels.f32()[static_cast<std::size_t>(i)], set.classes, set.labels_path, i));

  const auto top1_path = folder / "torch_top1.npy";
  const auto confidence_path = folder / "torch_confidence.npy";
  const Tensor top1 = load_with_shape(top1_path, {set.count, kHeadCount});
  const Tensor confidence = load_with_shape(confidence_path, {set.count, kHeadCount});
  set.torch_top1.resize(static_cast<std::size_t>(set.count));
  set.torch_confidence.resize(static_cast<std::size_t>(set.count));
  for (std::int64_t i = 0; i < set.count; ++i) {
    for (int h = 0; h < kHeadCount; ++h) {
      const auto k = static_cast<std::size_t>(i * kHeadCount + h);
      set.torch_top1[static_cast<std::size_t>(i)][static_cast<std::size_t>(h)] =
          class_index(top1.f32()[k], set.classes, top1_path, static_cast<std::int64_t>(k));
      const float c = confidence.f32()[k];
      if (!(c >= 0 && c <= 1))
        fail("{}: element {} is {}, not a probability", confidence_path.string(), k, c);
      set.torch_confidence[static_cast<std::size_t>(i)][static_cast<std::size_t>(h)] = c;
    }
  }

  set.dataset = folder.filename().string();
  const auto manifest_path = folder / "manifest.json";
  if (std::filesystem::is_regular_file(manifest_path, error)) {
    const auto bytes = read_file(manifest_path, 1 << 20, "a manifest");
    const auto manifest = nlohmann::json::parse(
        reinterpret_cast<const char*>(bytes.data()),
        reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr, false);
    if (manifest.is_object() && manifest.contains("dataset") && manifest["dataset"].is_string())
      set.dataset = manifest["dataset"].get<std::string>();
  }
  return set;
}

// What the engine answered for one image.
struct Answer {
  int head = kFinal;                  // the answering head: an exit, or final
  int top1 = -1;                      // its class
  double ms = 0;                      // infer(): copy in, run, copy out
  std::array<float, 4> confidence{};  // NaN where the head did not run
  std::array<int, 4> head_top1{};     // -1 where the head did not run
};

int argmax(std::span<const float> values) {
  return static_cast<int>(std::max_element(values.begin(), values.end()) - values.begin());
}

Answer read_answer(const Result& result, std::int64_t image) {
  Answer a;
  a.confidence.fill(std::nanf(""));
  a.head_top1.fill(-1);
  if (!result.non_finite_outputs.empty()) {
    fail("image {}: outputs {} hold NaN or infinite values", image,
         fmt::join(result.non_finite_outputs, ", "));
  }
  for (std::size_t e = 0; e < result.exits.size() && e < kFinal; ++e) {
    if (!result.exits[e].ran) continue;
    a.confidence[e] = result.exits[e].confidence[0];
    a.head_top1[e] = result.exits[e].top1[0];
    if (result.exits[e].name == result.answered_by) a.head = static_cast<int>(e);
  }
  if (const auto it = result.outputs.find("final"); it != result.outputs.end())
    a.head_top1[kFinal] = argmax(it->second.f32());
  a.top1 = a.head_top1[static_cast<std::size_t>(a.head)];
  return a;
}

// Every image through every context, timed. The contexts take turns in blocks of images, so
// that drift (clock, other load) affects them alike; each block starts with an untimed run of
// the same context, because switching contexts finds the new one's pool threads asleep, a cost
// a service replaying one engine does not pay.
std::vector<std::vector<Answer>> run_interleaved(std::vector<ExecutionContext>& contexts,
                                                 const HeldoutSet& set) {
  constexpr std::int64_t kBlock = 64;
  const auto per_image = static_cast<std::size_t>(3 * set.size * set.size);
  const auto image = [&](std::int64_t i) {
    return TensorView(DType::f32, set.images.f32().data() + static_cast<std::size_t>(i) * per_image,
                      per_image);
  };
  std::vector<std::vector<Answer>> answers(contexts.size());
  for (std::int64_t first = 0; first < set.count; first += kBlock) {
    const std::int64_t last = std::min(set.count, first + kBlock);
    for (std::size_t c = 0; c < contexts.size(); ++c) {
      contexts[c].infer({{"image", image(first)}});
      for (std::int64_t i = first; i < last; ++i) {
        const auto start = std::chrono::steady_clock::now();
        const Result result = contexts[c].infer({{"image", image(i)}});
        const auto stop = std::chrono::steady_clock::now();
        Answer a = read_answer(result, i);
        a.ms = std::chrono::duration<double, std::milli>(stop - start).count();
        answers[c].push_back(a);
      }
    }
  }
  return answers;
}

// PyTorch's answer at `threshold` under early exits: the first confident exit, else final.
int torch_head(const std::array<float, 4>& confidence, std::optional<float> threshold) {
  if (!threshold) return kFinal;
  for (int h = 0; h < kFinal; ++h)
    if (confidence[static_cast<std::size_t>(h)] >= *threshold) return h;
  return kFinal;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// `threshold`: the exit threshold the answers were taken at (none for off and all, whose
// answer is the final head).
PolicySummary summarise(const std::string& policy, std::optional<float> threshold,
                        const HeldoutSet& set, const std::vector<Answer>& answers) {
  PolicySummary s;
  s.policy = policy;
  s.threshold = threshold.value_or(0.0f);
  std::vector<double> times;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const Answer& a = answers[i];
    const auto head = static_cast<std::size_t>(a.head);
    times.push_back(a.ms);
    ++s.answered[head];
    if (a.top1 == set.labels[i]) ++s.correct[head];
    const int expected_head = torch_head(set.torch_confidence[i], threshold);
    const int expected_top1 = set.torch_top1[i][static_cast<std::size_t>(expected_head)];
    if (a.head == expected_head && a.top1 == expected_top1) ++s.agree;
    if (a.head != expected_head) {
      ++s.decisions_differ;
      // Both ran every exit up to the earlier answer; the first one decided differently.
      const auto decider = static_cast<std::size_t>(std::min(a.head, expected_head));
      if (!threshold ||
          !(std::abs(set.torch_confidence[i][decider] - *threshold) <= kDecisionTolerance))
        ++s.decisions_unexplained;
    }
  }
  const int correct = std::accumulate(s.correct.begin(), s.correct.end(), 0);
  s.accuracy = static_cast<double>(correct) / static_cast<double>(answers.size());
  s.mean_ms = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  s.median_ms = median(times);
  return s;
}

// Per head, over every image of the all policy (every head ran): accuracy, top-1 agreement
// with PyTorch and the largest confidence difference.
struct HeadFacts {
  double accuracy = 0;
  int same_top1 = 0;
  double max_confidence_difference = 0;
};

std::array<HeadFacts, 4> head_facts(const HeldoutSet& set, const std::vector<Answer>& all) {
  std::array<HeadFacts, 4> facts{};
  for (std::size_t h = 0; h < facts.size(); ++h) {
    int correct = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const int top1 = all[i].head_top1[h];
      if (top1 == set.labels[i]) ++correct;
      if (top1 == set.torch_top1[i][h]) ++facts[h].same_top1;
      if (h < kFinal) {
        facts[h].max_confidence_difference = std::max(
            facts[h].max_confidence_difference,
            std::abs(static_cast<double>(all[i].confidence[h]) - set.torch_confidence[i][h]));
      }
    }
    facts[h].accuracy = static_cast<double>(correct) / static_cast<double>(all.size());
  }
  return facts;
}

// A float threshold as the person typed it (0.7, not 0.699999988079071).
double as_typed(float value) {
  return std::stod(fmt::format("{}", value));
}

std::string percent(double share) {
  return fmt::format("{:.1f}%", 100.0 * share);
}

nlohmann::json answered_json(const PolicySummary& s) {
  nlohmann::json answered = nlohmann::json::object();
  for (std::size_t h = 0; h < kHeads.size(); ++h)
    answered[kHeads[h]] = s.answered[h];
  return answered;
}

nlohmann::json summary_json(const PolicySummary& s, std::int64_t count) {
  nlohmann::json j = {
      {"accuracy", s.accuracy},
      {"mean_latency_ms", s.mean_ms},
      {"median_latency_ms", s.median_ms},
      {"answered", answered_json(s)},
      {"agreement_with_torch", static_cast<double>(s.agree) / static_cast<double>(count)},
      {"decisions_differing_from_torch", s.decisions_differ}};
  if (s.policy == "early") j["threshold"] = as_typed(s.threshold);
  return j;
}

}  // namespace

int run_heldout(const ExitsOptions& o, Device device) {
  // Where the results go is checked before anything runs.
  if (!o.export_json.empty()) prepare_output_file("--export-json", o.export_json);
  if (!o.plot.empty()) prepare_output_file("--plot", o.plot);
  const HeldoutSet set = load_heldout(o.heldout);
  const Network net = models::resnet18_exits(1, set.size, set.classes);

  const auto build = [&](ExitPolicy policy, float threshold) {
    return Engine::build(net, set.weights,
                         {.device = device,
                          .mode = Mode::dag,
                          .threads = o.threads,
                          .exits = policy,
                          .threshold = threshold});
  };
  const int threads =
      o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency());
  fmt::print("ResNet-18 with exits after layer1, layer2, layer3 on {}\n", set.dataset);
  fmt::print("  {} held-out images 3x{}x{}, {} classes; weights {}\n", set.count, set.size,
             set.size, set.classes, set.weights_path.string());
  fmt::print("  device {}{}, dag, threshold {}\n\n", to_string(device),
             device == Device::cpu ? fmt::format(" ({} threads)", threads) : std::string(),
             o.threshold);

  // Contexts: off, all, early at --threshold, then early at each threshold of the sweep.
  std::vector<Engine> engines;
  engines.push_back(build(ExitPolicy::off, o.threshold));
  engines.push_back(build(ExitPolicy::all, o.threshold));
  engines.push_back(build(ExitPolicy::early, o.threshold));
  for (const float threshold : o.sweep)
    engines.push_back(build(ExitPolicy::early, threshold));
  std::vector<ExecutionContext> contexts;
  for (const Engine& engine : engines)
    contexts.push_back(engine.create_context());
  const std::vector<std::vector<Answer>> answers = run_interleaved(contexts, set);
  const std::vector<Answer>& all_answers = answers[1];
  const PolicySummary off = summarise("off", std::nullopt, set, answers[0]);
  const PolicySummary all = summarise("all", std::nullopt, set, all_answers);
  const PolicySummary early = summarise("early", o.threshold, set, answers[2]);
  std::vector<PolicySummary> sweep;
  for (std::size_t k = 0; k < o.sweep.size(); ++k)
    sweep.push_back(summarise("early", o.sweep[k], set, answers[3 + k]));

  const auto heads = head_facts(set, all_answers);
  fmt::print("every head on every image (policy all), against the labels and PyTorch:\n");
  fmt::print("  {:<6} {:>9} {:>16} {:>26}\n", "head", "accuracy", "top-1 = PyTorch",
             "max |confidence - PyTorch|");
  for (std::size_t h = 0; h < kHeads.size(); ++h) {
    fmt::print("  {:<6} {:>9} {:>12}/{:<3} {:>26}\n", kHeads[h], percent(heads[h].accuracy),
               heads[h].same_top1, set.count,
               h < kFinal ? fmt::format("{:.1e}", heads[h].max_confidence_difference) : "-");
  }

  fmt::print("\nearly exits at threshold {} (policy early):\n", o.threshold);
  fmt::print("  {:<12} {:>6} {:>9}\n", "answered by", "images", "accuracy");
  for (std::size_t h = 0; h < kHeads.size(); ++h) {
    const int n = early.answered[h];
    fmt::print("  {:<12} {:>6} {:>9}\n", kHeads[h], n,
               n > 0 ? percent(static_cast<double>(early.correct[h]) / n) : std::string("-"));
  }
  fmt::print("  {:<12} {:>6} {:>9}\n", "all images", set.count, percent(early.accuracy));

  fmt::print("\nlatency per image (infer: copy in, run, copy out), {} images each:\n", set.count);
  fmt::print("  {:<7} {:>10} {:>10} {:>9} {:>9}\n", "policy", "mean", "median", "accuracy",
             "speed-up");
  for (const PolicySummary* s : {&off, &all, &early}) {
    fmt::print("  {:<7} {:>7.3f} ms {:>7.3f} ms {:>9} {:>8.2f}x\n", s->policy, s->mean_ms,
               s->median_ms, percent(s->accuracy), off.mean_ms / s->mean_ms);
  }
  fmt::print("  early answers {:.2f}x faster than off on average (mean latency)\n",
             off.mean_ms / early.mean_ms);

  fmt::print("\nthreshold sweep (policy early): accuracy, share answered at each exit, latency\n");
  fmt::print("  {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>10} {:>16}\n", "threshold", "accuracy",
             "exit0", "exit1", "exit2", "final", "mean", "agrees w/ torch");
  for (const PolicySummary& s : sweep) {
    fmt::print("  {:>9} {:>9}", s.threshold, percent(s.accuracy));
    for (std::size_t h = 0; h < kHeads.size(); ++h)
      fmt::print(" {:>7}",
                 percent(static_cast<double>(s.answered[h]) / static_cast<double>(set.count)));
    fmt::print(" {:>7.3f} ms {:>16}\n", s.mean_ms,
               percent(static_cast<double>(s.agree) / static_cast<double>(set.count)));
  }

  // Agreement with PyTorch on the same weights: the answers off and early give, and every
  // point of the sweep.
  fmt::print(
      "\nagainst PyTorch's answers on the same weights (exit and class; needs >= {} of "
      "the images, and exit decisions that differ only where a confidence is at the "
      "threshold):\n",
      percent(kRequiredAgreement));
  bool agrees = true;
  std::vector<const PolicySummary*> checked = {&off, &all, &early};
  for (const PolicySummary& s : sweep)
    checked.push_back(&s);
  for (const PolicySummary* s : checked) {
    const double share = static_cast<double>(s->agree) / static_cast<double>(set.count);
    const bool ok = share >= kRequiredAgreement && s->decisions_unexplained == 0;
    agrees = agrees && ok;
    const std::string label =
        s->policy == "early" ? fmt::format("early {}", s->threshold) : s->policy;
    const std::string decisions =
        s->policy == "early"
            ? fmt::format(
                  ", exit decisions differ on {} ({} not within {:.0e} of "
                  "the threshold)",
                  s->decisions_differ, s->decisions_unexplained, kDecisionTolerance)
            : std::string();
    fmt::print("  {:<11} {:>4}/{} images agree ({}){}  {}\n", label, s->agree, set.count,
               percent(share), decisions, ok ? "ok" : "FAILED");
  }

  if (!o.plot.empty()) {
    write_tradeoff_svg(o.plot,
                       fmt::format("ResNet-18 with early exits: {} held-out images, {} dag",
                                   set.count, to_string(device)),
                       off, all, sweep);
    fmt::print("\ntrade-off plot written to {}\n", o.plot);
  }
  if (!o.export_json.empty()) {
    nlohmann::json j;
    j["dataset"] = set.dataset;
    j["images"] = set.count;
    j["device"] = std::string(to_string(device));
    if (device == Device::cpu) j["threads"] = threads;
    j["threshold"] = as_typed(o.threshold);
    j["policies"] = {{"off", summary_json(off, set.count)},
                     {"all", summary_json(all, set.count)},
                     {"early", summary_json(early, set.count)}};
    nlohmann::json head_json = nlohmann::json::object();
    for (std::size_t h = 0; h < kHeads.size(); ++h) {
      head_json[kHeads[h]] = {
          {"accuracy", heads[h].accuracy},
          {"top1_agreement_with_torch",
           static_cast<double>(heads[h].same_top1) / static_cast<double>(set.count)}};
      if (h < kFinal)
        head_json[kHeads[h]]["max_confidence_difference"] = heads[h].max_confidence_difference;
    }
    j["policies"]["all"]["heads"] = head_json;
    j["sweep"] = nlohmann::json::array();
    for (const PolicySummary& s : sweep) {
      nlohmann::json point = summary_json(s, set.count);
      j["sweep"].push_back(point);
    }
    j["agrees_with_torch"] = agrees;
    j["weights"] = set.weights_path.string();
    j["heldout"] = {{"images", set.images_path.string()}, {"labels", set.labels_path.string()}};
    write_text_file(o.export_json,
                    j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n');
    fmt::print("results written to {}\n", o.export_json);
  }
  if (!agrees) {
    std::fprintf(stderr,
                 "resnet18_exits: the engine's answers differ from PyTorch's beyond rounding "
                 "(see the agreement lines above)\n");
    return 1;
  }
  return 0;
}

}  // namespace cgr::samples
