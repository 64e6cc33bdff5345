// The steps of Engine::build (engine_build.cpp), each in its own file:
//   lower_network     lowering.cpp       layers -> ops: pruning, weight binding, fusion
//   plan_exits        exits.cpp          decision ops, gating (ExitPolicy::early), reordering
//   estimate_costs    critical_path.cpp  per-op cost and the cost-weighted critical path
// Backends then make the ops' executables from the LayerOps (cgr/backend/backend.hpp).
#pragma once

#include <vector>

#include "cgr/backend/compiled_engine.hpp"
#include "cgr/network.hpp"
#include "cgr/weights.hpp"

namespace cgr::detail {

// Fills engine.ops (program order) and engine.values (the network's value ids); returns one
// LayerOp per op, pointing into `net` and `weights`.
std::vector<LayerOp> lower_network(const Network& net, const Weights& weights,
                                   CompiledEngine& engine);

// Adds a decision op per exit (an empty LayerOp each) and, with ExitPolicy::early, sets each
// op's gated_by / gate_level and puts the ops in an order where every decision precedes what
// it gates (layer_ops reordered alike).
// Drops the ops that only move bytes (views, Concats written in place); see aliasing.cpp.
void elide_copies(const Network& net, CompiledEngine& engine, std::vector<LayerOp>& layer_ops);

// Bytes from the start of the value owning `value`'s storage (itself unless aliased), and
// that value in *root when root is not null.
std::size_t storage_offset(const CompiledEngine& engine, int value, int* root);

void plan_exits(const Network& net, CompiledEngine& engine, std::vector<LayerOp>& layer_ops);

// Each op's cost and estimated time, the critical flags and the critical path's length; needs
// engine.graph.
void estimate_costs(const Network& net, CompiledEngine& engine);

}  // namespace cgr::detail
