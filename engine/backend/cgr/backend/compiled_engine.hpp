// What an Engine is after build, shared read-only by its execution contexts: the ops (fused
// layers), the values they read and write, the dependency graph, the arena plan, the exits,
// and the facts derived from them once, which every backend, the CUDA graph plan and the
// reports read instead of deriving their own:
//   gated_by / gate_level  which exits skip an op (ExitPolicy::early) and the innermost one;
//   copied_outputs         the engine outputs an op produces (copied out after it);
//   cost / critical        the op's work and whether it lies on a longest cost-weighted chain.
// This header and backend.hpp are the interface between the device-neutral engine
// (engine/src) and its backends (engine/cpu, engine/cuda); users never see them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cgr/engine.hpp"
#include "cgr/graph.hpp"
#include "cgr/layers/layer.hpp"
#include "cgr/memory_plan.hpp"

namespace cgr::detail {

class Program;

// One executable op: one layer, or a chain of layers the lowering fused, or an exit decision
// (an op of the engine's own, with no layer).
struct CompiledOp {
  std::string name;         // "conv1+bn1+relu"; "exit0.decide"
  std::string kind;         // the layers' labels: "Conv2d+BatchNorm2d+ReLU"; "ExitDecision"
  std::vector<int> inputs;  // engine value ids
  int output = -1;          // engine value id
  int workspace = -1;       // engine value id of its private scratch, or -1
  std::vector<int> layers;  // network layer indices it executes

  int decides_exit = -1;            // the exit whose decision this op computes, or -1
  std::uint32_t gated_by = 0;       // ExitPolicy::early: exits whose firing skips this op
  int gate_level = -1;              // the innermost of them (gated sets nest), -1 for none
  std::vector<int> copied_outputs;  // indices into CompiledEngine::outputs it produces
  OpCost cost;                      // its layers' work (a decision: its softmax)
  double estimated_us = 0;          // cost on the nominal device (see critical_path.cpp)
  bool critical = false;            // on a longest estimated-time chain of the graph
  // The longest estimated-time chain this op starts, its own time included: the CPU DAG
  // scheduler runs ready ops in decreasing order of it (critical-path list scheduling).
  double remaining_us = 0;
};

struct EngineValue {
  TensorDesc desc;
  std::size_t bytes = 0;
  int producer = -1;        // op index; -1 for a network input (or a value below)
  bool persistent = false;  // inputs, outputs, confidences: live for the whole inference
  std::size_t offset = 0;   // in the arena
  // Copies the engine elided (aliasing.cpp). A value with alias_of >= 0 lies inside value
  // alias_of's bytes, alias_offset bytes in: with `view`, it is the same data under another
  // shape (a Flatten or Reshape that runs no op); without, it is a slice its producer writes
  // in place (an input of a Concat that runs no op). That Concat's output lists the values
  // written into it as `parts` and has no producer.
  int alias_of = -1;
  std::size_t alias_offset = 0;
  bool view = false;
  std::vector<int> parts;

  // Whether the value has bytes at run time (false: fused away or pruned).
  bool has_storage() const {
    return producer >= 0 || persistent || alias_of >= 0 || !parts.empty();
  }
};

// An exit head as the engine runs it: a decision op reads the head's logits and writes the
// per-sample confidence; with ExitPolicy::early its firing skips the ops it gates.
struct ExitPlan {
  std::string name;
  int logits_value = -1;
  int decision_op = -1;
  int confidence_value = -1;
  std::int64_t batch = 0;
  std::int64_t classes = 0;
};

struct CompiledEngine {
  EngineOptions options;
  std::vector<CompiledOp> ops;  // in a valid sequential order
  std::vector<EngineValue> values;
  std::vector<TensorDesc> input_descs;   // as declared (input names)
  std::vector<int> input_values;         // engine value per input
  std::vector<TensorDesc> output_descs;  // named by the output names, then the exits
  std::vector<int> output_values;        // engine value per output
  std::vector<ExitPlan> exits;
  Graph graph;
  MemoryPlan plan;
  EngineInfo info;
  double critical_path_us = 0;  // the longest estimated-time chain
  // The backend's executables for these ops (kernels, GPU ops), shared by the contexts.
  std::unique_ptr<const Program> program;

  bool early_exits() const { return options.exits == ExitPolicy::early; }
  // The values whose writes make up `value`'s data, for the hazard analysis: itself, unless
  // it is a view (its source's) or a Concat output written in place (its parts'). A value
  // with no producer among them is a network input.
  std::vector<int> data_of(int value) const;
  // Op `op`'s reads and writes as the hazard analysis sees them (data_of each value).
  OpAccess data_access(int op) const;
  // Whether op `op` is skipped in a run where the exits in `fired` fired (ExitPolicy::early).
  bool skipped(int op, std::uint32_t fired) const {
    return (ops[static_cast<std::size_t>(op)].gated_by & fired) != 0;
  }
};

}  // namespace cgr::detail
