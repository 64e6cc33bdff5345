// Binary: the broadcast geometry both backends run, and the CPU kernel (rows of the merged
// innermost dim, each operand walked with its own stride).
#include "cgr/layers/binary.hpp"

#include <algorithm>

#include "cgr/error.hpp"
#include "cgr/thread_pool.hpp"

namespace cgr {

CGR_REGISTER_LAYER_KIND(Binary);

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.rank(), b.rank());
  std::vector<std::int64_t> dims(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < a.rank() ? a[a.rank() - 1 - i] : 1;
    const std::int64_t db = i < b.rank() ? b[b.rank() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    dims[rank - 1 - i] = da == 1 ? db : da;
  }
  return Shape(std::move(dims));
}

BroadcastGeometry broadcast_geometry(const Shape& out, const Shape& a, const Shape& b) {
  const std::size_t rank = out.rank();
  CGR_ASSERT(a.rank() <= rank && b.rank() <= rank);
  // Per output dim, each operand's stride (0 where it is broadcast along that dim).
  auto strides_of = [&](const Shape& s) {
    std::vector<std::int64_t> strides(rank, 0);
    std::int64_t stride = 1;
    for (std::size_t i = s.rank(); i-- > 0;) {
      const std::size_t d = rank - s.rank() + i;
      strides[d] = s[i] == 1 ? 0 : stride;
      stride *= s[i];
    }
    return strides;
  };
  BroadcastGeometry g;
  if (out.numel() == 0) {
    // Nothing to compute; the other dims of an empty shape may multiply past int64.
    g.rank = 1;
    g.count = 0;
    g.out_dims[0] = 0;
    g.a_strides[0] = g.b_strides[0] = 0;
    return g;
  }
  const std::vector<std::int64_t> sa = strides_of(a), sb = strides_of(b);
  // Dims of size 1 drop out; an outer dim merges into the one inside it when both operands
  // continue contiguously across the pair (or are both broadcast along it).
  std::vector<std::int64_t> dims, as, bs;
  for (std::size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    if (!dims.empty() && as.back() == sa[d] * out[d] && bs.back() == sb[d] * out[d]) {
      dims.back() *= out[d];
      as.back() = sa[d];
      bs.back() = sb[d];
    } else {
      dims.push_back(out[d]);
      as.push_back(sa[d]);
      bs.push_back(sb[d]);
    }
  }
  if (dims.empty()) {  // a single element
    dims.push_back(1);
    as.push_back(0);
    bs.push_back(0);
  }
  if (dims.size() > static_cast<std::size_t>(BroadcastGeometry::kMaxRank)) {
    fail("broadcasting {} with {}: more than {} dims remain after merging", a.to_string(),
         b.to_string(), BroadcastGeometry::kMaxRank);
  }
  g.rank = static_cast<int>(dims.size());
  g.count = out.numel();
  for (int d = 0; d < g.rank; ++d) {
    g.out_dims[d] = dims[static_cast<std::size_t>(d)];
    g.a_strides[d] = as[static_cast<std::size_t>(d)];
    g.b_strides[d] = bs[static_cast<std::size_t>(d)];
  }
  return g;
}

std::string_view binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "Add";
    case BinaryOp::sub:
      return "Sub";
    case BinaryOp::mul:
      return "Mul";
    case BinaryOp::div:
      return "Div";
    case BinaryOp::pow:
      return "Pow";
    case BinaryOp::min:
      return "Min";
    case BinaryOp::max:
      return "Max";
    case BinaryOp::prelu:
      return "PRelu";
  }
  return "Binary";
}

namespace {

void check_op(BinaryOp op, const std::string& name) {
  if (static_cast<std::int32_t>(op) < 0 ||
      static_cast<std::int32_t>(op) > static_cast<std::int32_t>(BinaryOp::prelu)) {
    fail("Binary '{}': unknown function {}", name, static_cast<int>(op));
  }
}

template <BinaryOp Op>
class BinaryCpuKernel final : public CpuKernel {
 public:
  BinaryCpuKernel(const BroadcastGeometry& g, std::optional<std::vector<float>> constant,
                  bool constant_first)
      : g_(g), constant_(std::move(constant)), constant_first_(constant_first) {}

  void run(const KernelIo& io) const override {
    const float* a = io.inputs[0];
    const float* b = constant_ ? constant_->data() : io.inputs[1];
    if (constant_ && constant_first_) std::swap(a, b);
    float* y = io.output;
    const int last = g_.rank - 1;
    const std::int64_t inner = g_.out_dims[last], sa = g_.a_strides[last], sb = g_.b_strides[last];
    const auto rows = static_cast<std::size_t>(g_.count / std::max<std::int64_t>(inner, 1));
    const std::size_t grain = std::max<std::size_t>(
        1, (1u << 15) / static_cast<std::size_t>(std::max<std::int64_t>(inner, 1)));
    io.pool->parallel_for(rows, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        std::int64_t rest = static_cast<std::int64_t>(row), ao = 0, bo = 0;
        for (int d = last - 1; d >= 0; --d) {
          const std::int64_t i = rest % g_.out_dims[d];
          rest /= g_.out_dims[d];
          ao += i * g_.a_strides[d];
          bo += i * g_.b_strides[d];
        }
        float* out = y + static_cast<std::int64_t>(row) * inner;
        const float* pa = a + ao;
        const float* pb = b + bo;
        for (std::int64_t j = 0; j < inner; ++j)
          out[j] = math::binary(Op, pa[j * sa], pb[j * sb]);
      }
    });
  }

 private:
  BroadcastGeometry g_;
  std::optional<std::vector<float>> constant_;  // a copy of the layer's constant, if it has one
  bool constant_first_;
};

template <BinaryOp Op>
std::unique_ptr<CpuKernel> make_kernel(const BroadcastGeometry& g,
                                       const std::optional<std::vector<float>>& constant,
                                       bool first) {
  return std::make_unique<BinaryCpuKernel<Op>>(g, constant, first);
}

}  // namespace

Binary::Binary(std::string name, const TensorDesc& a, const TensorDesc& b, BinaryOp op)
    : Layer(std::move(name), {a, b}), op_(op), a_shape_(a.shape), b_shape_(b.shape) {
  check_op(op, this->name());
  finish();
}

Binary::Binary(std::string name, const TensorDesc& x, BinaryOp op, BinaryConstant constant)
    : Layer(std::move(name), {x}), op_(op), constant_(std::move(constant)) {
  check_op(op, this->name());
  a_shape_ = constant_->first ? constant_->shape : x.shape;
  b_shape_ = constant_->first ? x.shape : constant_->shape;
  finish();
}

void Binary::finish() {
  const auto out = broadcast_shapes(a_shape_, b_shape_);
  if (!out) {
    fail("{} '{}': shapes {} and {} do not broadcast", binary_op_name(op_), name(),
         a_shape_.to_string(), b_shape_.to_string());
  }
  // PRelu's slope broadcasts to x, never the other way (ONNX: unidirectional).
  if (op_ == BinaryOp::prelu && *out != a_shape_) {
    fail("PRelu '{}': the slope of shape {} does not broadcast to x of shape {}", name(),
         b_shape_.to_string(), a_shape_.to_string());
  }
  geometry_ = broadcast_geometry(*out, a_shape_, b_shape_);
  set_output(*out);
}

std::vector<WeightSpec> Binary::weight_specs() const {
  if (!constant_) return {};
  return {{"constant", constant_->shape}};
}

std::string Binary::attributes() const {
  if (!constant_) return {};
  return fmt::format("{} constant {}", constant_->first ? "left" : "right",
                     constant_->shape.to_string());
}

std::unique_ptr<CpuKernel> Binary::make_cpu_kernel(const LayerOp& op) const {
  std::optional<std::vector<float>> constant;
  if (constant_) {
    const auto values = op.weights.at("constant")->f32();
    constant.emplace(values.begin(), values.end());
  }
  const bool first = constant_ && constant_->first;
  switch (op_) {
    case BinaryOp::add:
      return make_kernel<BinaryOp::add>(geometry_, constant, first);
    case BinaryOp::sub:
      return make_kernel<BinaryOp::sub>(geometry_, constant, first);
    case BinaryOp::mul:
      return make_kernel<BinaryOp::mul>(geometry_, constant, first);
    case BinaryOp::div:
      return make_kernel<BinaryOp::div>(geometry_, constant, first);
    case BinaryOp::pow:
      return make_kernel<BinaryOp::pow>(geometry_, constant, first);
    case BinaryOp::min:
      return make_kernel<BinaryOp::min>(geometry_, constant, first);
    case BinaryOp::max:
      return make_kernel<BinaryOp::max>(geometry_, constant, first);
    case BinaryOp::prelu:
      return make_kernel<BinaryOp::prelu>(geometry_, constant, first);
  }
  fail("Binary '{}': unknown function", name());
}

}  // namespace cgr
