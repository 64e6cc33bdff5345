// Reduce: the geometry both backends run and the CPU kernel (outputs split over the threads,
// each a sequential loop over its reduced elements).
#include "cgr/layers/reduce.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Reduce);

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "ReduceSum";
    case ReduceOp::mean:
      return "ReduceMean";
    case ReduceOp::max:
      return "ReduceMax";
    case ReduceOp::min:
      return "ReduceMin";
  }
  return "Reduce";
}

namespace {

class ReduceCpuKernel final : public CpuKernel {
 public:
  ReduceCpuKernel(ReduceOp op, const ReduceGeometry& g) : op_(op), g_(g) {}

  void run(const KernelIo& io) const override {
    const float* x = io.inputs[0];
    const auto outputs = static_cast<std::size_t>(g_.out_count);
    const std::size_t grain = std::max<std::size_t>(
        1, (1u << 14) / static_cast<std::size_t>(std::max<std::int64_t>(g_.red_count, 1)));
    io.pool->parallel_for(outputs, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t o = begin; o < end; ++o) {
        std::int64_t rest = static_cast<std::int64_t>(o), base = 0;
        for (int d = g_.out_rank - 1; d >= 0; --d) {
          base += (rest % g_.out_dims[d]) * g_.out_strides[d];
          rest /= g_.out_dims[d];
        }
        float acc = math::reduce_start(op_);
        if (g_.red_rank == 1) {
          const std::int64_t n = g_.red_dims[0], s = g_.red_strides[0];
          for (std::int64_t r = 0; r < n; ++r)
            acc = math::reduce_step(op_, acc, x[base + r * s]);
        } else {
          for (std::int64_t r = 0; r < g_.red_count; ++r) {
            std::int64_t left = r, offset = base;
            for (int d = g_.red_rank - 1; d >= 0; --d) {
              offset += (left % g_.red_dims[d]) * g_.red_strides[d];
              left /= g_.red_dims[d];
            }
            acc = math::reduce_step(op_, acc, x[offset]);
          }
        }
        io.output[o] = math::reduce_finish(op_, acc, g_.red_count);
      }
    });
  }

 private:
  ReduceOp op_;
  ReduceGeometry g_;
};

// Merges runs of adjacent dims (in input order) whose strides chain contiguously.
void append_merged(std::vector<std::int64_t>& dims, std::vector<std::int64_t>& strides,
                   std::int64_t dim, std::int64_t stride, bool adjacent) {
  if (adjacent && !dims.empty() && strides.back() == stride * dim) {
    dims.back() *= dim;
    strides.back() = stride;
  } else {
    dims.push_back(dim);
    strides.push_back(stride);
  }
}

}  // namespace

Reduce::Reduce(std::string name, const TensorDesc& input, ReduceParams params)
    : Layer(std::move(name), {input}), params_(std::move(params)) {
  const Shape& s = input.shape;
  const auto rank = static_cast<int>(s.rank());
  if (static_cast<std::int32_t>(params_.op) < 0 ||
      static_cast<std::int32_t>(params_.op) > static_cast<std::int32_t>(ReduceOp::min)) {
    fail("Reduce '{}': unknown reduction {}", this->name(), static_cast<int>(params_.op));
  }
  std::vector<bool> reduced(s.rank(), false);
  for (int& axis : params_.axes) {
    if (axis < -rank || axis >= rank) {
      fail("{} '{}': axis {} is out of range for '{}' of shape {}", reduce_op_name(params_.op),
           this->name(), axis, input.name, s.to_string());
    }
    if (axis < 0) axis += rank;
    if (reduced[static_cast<std::size_t>(axis)]) {
      fail("{} '{}': axis {} is listed twice", reduce_op_name(params_.op), this->name(), axis);
    }
    reduced[static_cast<std::size_t>(axis)] = true;
  }
  std::sort(params_.axes.begin(), params_.axes.end());
  std::vector<std::int64_t> out_shape, od, os, rd, rs;
  std::int64_t stride = s.numel();
  int last_kept = -2, last_reduced = -2;
  for (int d = 0; d < rank; ++d) {
    const std::int64_t dim = s[static_cast<std::size_t>(d)];
    stride = dim == 0 ? 0 : stride / dim;
    if (reduced[static_cast<std::size_t>(d)]) {
      if (dim == 0) {
        fail("{} '{}': axis {} of '{}' has no elements to reduce", reduce_op_name(params_.op),
             this->name(), d, input.name);
      }
      if (params_.keep_dims) out_shape.push_back(1);
      if (dim != 1) {
        append_merged(rd, rs, dim, stride, last_reduced == d - 1);
        last_reduced = d;
      }
    } else {
      out_shape.push_back(dim);
      if (dim != 1) {
        append_merged(od, os, dim, stride, last_kept == d - 1);
        last_kept = d;
      }
    }
    if (dim == 1) {  // a size-1 dim does not break a contiguous run
      if (last_kept == d - 1) last_kept = d;
      if (last_reduced == d - 1) last_reduced = d;
    }
  }
  if (od.size() > ReduceGeometry::kMaxRank || rd.size() > ReduceGeometry::kMaxRank) {
    fail("{} '{}': more than {} dims after merging", reduce_op_name(params_.op), this->name(),
         ReduceGeometry::kMaxRank);
  }
  if (od.empty()) od = {1}, os = {0};
  if (rd.empty()) rd = {1}, rs = {0};
  geometry_.out_rank = static_cast<int>(od.size());
  geometry_.red_rank = static_cast<int>(rd.size());
  geometry_.out_count = 1;
  geometry_.red_count = 1;
  for (int d = 0; d < geometry_.out_rank; ++d) {
    geometry_.out_dims[d] = od[static_cast<std::size_t>(d)];
    geometry_.out_strides[d] = os[static_cast<std::size_t>(d)];
    geometry_.out_count *= od[static_cast<std::size_t>(d)];
  }
  for (int d = 0; d < geometry_.red_rank; ++d) {
    geometry_.red_dims[d] = rd[static_cast<std::size_t>(d)];
    geometry_.red_strides[d] = rs[static_cast<std::size_t>(d)];
    geometry_.red_count *= rd[static_cast<std::size_t>(d)];
  }
  set_output(Shape(std::move(out_shape)));
}

std::string Reduce::attributes() const {
  return fmt::format("axes [{}]{}", fmt::join(params_.axes, ", "),
                     params_.keep_dims ? " keepdims" : "");
}

OpCost Reduce::cost() const {
  return {static_cast<double>(inputs()[0].shape.numel()), activation_bytes()};
}

std::unique_ptr<CpuKernel> Reduce::make_cpu_kernel(const LayerOp&) const {
  return std::make_unique<ReduceCpuKernel>(params_.op, geometry_);
}

}  // namespace cgr
