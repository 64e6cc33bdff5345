// Constant folding for shape arithmetic. Values are held as doubles while folding (int64 shape
// values are far below 2^53, so the round trip is exact) and converted back at the end.
#include "onnx/fold.hpp"

#include <algorithm>
#include <cmath>

#include "cgr/error.hpp"
#include "cgr/layers/slice.hpp"

namespace cgr::onnx_import {
namespace {

struct Dense {
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  bool is_float = true;
};

Dense to_dense(const ConstantTensor& t) {
  Dense d{t.shape.dims(), {}, t.is_float};
  if (t.is_float)
    d.values.assign(t.floats.begin(), t.floats.end());
  else
    d.values.assign(t.ints.begin(), t.ints.end());
  return d;
}

ConstantTensor from_dense(const Dense& d) {
  ConstantTensor t;
  t.shape = Shape(d.dims);
  t.is_float = d.is_float;
  if (d.is_float) {
    t.floats.assign(d.values.begin(), d.values.end());
  } else {
    for (double v : d.values) {
      // Out-of-range (or NaN) doubles have no int64 value: converting them is undefined.
      if (!(v >= -9.2e18 && v <= 9.2e18)) fail("a folded integer constant is out of range ({})", v);
      t.ints.push_back(static_cast<std::int64_t>(v));
    }
  }
  return t;
}

// Element count of folded shapes; values come from the file, so the product is checked.
std::int64_t count(const std::vector<std::int64_t>& dims) {
  // An empty tensor has no elements whatever its other dims are, in any order.
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) {
    if (std::any_of(dims.begin(), dims.end(), [](std::int64_t d) { return d < 0; }))
      fail("a folded constant has an invalid shape");
    return 0;
  }
  std::int64_t n = 1;
  for (auto d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n) || n > (std::int64_t{1} << 40)) {
      fail("a folded constant has an invalid shape");
    }
  }
  return n;
}

std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> strides(dims.size(), 1);
  // Nothing is indexed in an empty tensor, whose other dims may multiply past int64 (count
  // bounds the product of the dims of one with elements).
  if (count(dims) == 0) return strides;
  for (std::size_t i = dims.size(); i-- > 1;)
    strides[i - 1] = strides[i] * dims[i];
  return strides;
}

std::vector<std::int64_t> int_values(const ConstantTensor& t, const std::string& label,
                                     const char* role) {
  if (t.is_float) fail("{}: {} must be an integer tensor", label, role);
  return t.ints;
}

std::int64_t normalise_axis(std::int64_t axis, std::size_t rank, const std::string& label) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fail("{}: axis {} is out of range for rank {}", label, axis, rank);
  return axis < 0 ? axis + r : axis;
}

// Calls visit(linear output index, input multi-index) over every element of `dims`.
template <typename Visit>
void for_each_index(const std::vector<std::int64_t>& dims, Visit visit) {
  const std::int64_t n = count(dims);
  std::vector<std::int64_t> index(dims.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    visit(i, index);
    for (std::size_t d = dims.size(); d-- > 0;) {
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
}

// NumPy broadcast of `inputs` (all present) and fn(values at one output index) per element.
template <typename Fn>
Dense broadcast_map(const std::vector<const Dense*>& inputs, bool is_float, FoldBudget& budget,
                    const std::string& label, Fn fn) {
  std::size_t rank = 0;
  for (const Dense* d : inputs)
    rank = std::max(rank, d->dims.size());
  std::vector<std::int64_t> dims(rank, 1);
  for (const Dense* d : inputs) {
    for (std::size_t i = 0; i < d->dims.size(); ++i) {
      const std::size_t k = rank - d->dims.size() + i;
      const std::int64_t v = d->dims[i];
      if (v != 1 && dims[k] != 1 && dims[k] != v)
        fail("{}: operand shapes do not broadcast", label);
      if (v != 1) dims[k] = v;
    }
  }
  budget.charge(count(dims), label);
  Dense out{dims, std::vector<double>(static_cast<std::size_t>(count(dims))), is_float};
  std::vector<std::vector<std::int64_t>> strides;
  for (const Dense* d : inputs) {
    std::vector<std::int64_t> s(rank, 0);
    const auto own = strides_of(d->dims);
    for (std::size_t i = 0; i < d->dims.size(); ++i)
      s[rank - d->dims.size() + i] = d->dims[i] == 1 ? 0 : own[i];
    strides.push_back(std::move(s));
  }
  std::vector<double> args(inputs.size());
  for_each_index(dims, [&](std::int64_t i, const std::vector<std::int64_t>& index) {
    for (std::size_t k = 0; k < inputs.size(); ++k) {
      std::int64_t o = 0;
      for (std::size_t d = 0; d < rank; ++d)
        o += index[d] * strides[k][d];
      args[k] = inputs[k]->values[static_cast<std::size_t>(o)];
    }
    out.values[static_cast<std::size_t>(i)] = fn(args);
  });
  return out;
}

const char* const kElementwiseFolds[] = {
    "Add",   "Sub",   "Mul",  "Div",     "Pow",         "Min",
    "Max",   "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
    "And",   "Or",    "Not",  "Where",   "Neg",         "Abs",
    "Floor", "Ceil",  "Sqrt", "Sum"};

bool is_elementwise_fold(const std::string& op) {
  return std::any_of(std::begin(kElementwiseFolds), std::end(kElementwiseFolds),
                     [&](const char* name) { return op == name; });
}

// The elementwise ops on constants (shape arithmetic: sizes divided, masks compared, indices
// selected). Integer tensors stay integers (Div truncates, as ONNX Runtime does); comparisons
// give 0/1 integers (booleans).
ConstantTensor fold_elementwise(const ::onnx::NodeProto& node,
                                const std::vector<const ConstantTensor*>& inputs,
                                FoldBudget& budget, const std::string& label) {
  const std::string& op = node.op_type();
  Attributes attrs(node, label, {});
  std::vector<Dense> dense;
  for (const ConstantTensor* t : inputs) {
    if (t == nullptr) fail("{}: an input is missing", label);
    dense.push_back(to_dense(*t));
  }
  std::vector<const Dense*> operands;
  for (const auto& d : dense)
    operands.push_back(&d);
  const auto need = [&](std::size_t n) {
    if (dense.size() != n) fail("{}: has {} inputs, expected {}", label, dense.size(), n);
  };
  if (op == "Where") {
    need(3);
    return from_dense(
        broadcast_map(operands, dense[1].is_float || dense[2].is_float, budget, label,
                      [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; }));
  }
  const bool unary =
      op == "Not" || op == "Neg" || op == "Abs" || op == "Floor" || op == "Ceil" || op == "Sqrt";
  if (unary) {
    need(1);
    const bool is_float = op == "Not" ? false : (op == "Sqrt" ? true : dense[0].is_float);
    return from_dense(
        broadcast_map(operands, is_float, budget, label, [&](const std::vector<double>& v) {
          if (op == "Not") return v[0] == 0 ? 1.0 : 0.0;
          if (op == "Neg") return -v[0];
          if (op == "Abs") return std::abs(v[0]);
          if (op == "Floor") return std::floor(v[0]);
          if (op == "Ceil") return std::ceil(v[0]);
          return std::sqrt(v[0]);
        }));
  }
  if (op == "Sum" || op == "Min" || op == "Max") {
    if (dense.empty()) fail("{}: needs inputs", label);
  } else {
    need(2);
  }
  bool is_float = false;
  for (const auto& d : dense)
    is_float = is_float || d.is_float;
  const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
                       op == "GreaterOrEqual" || op == "And" || op == "Or";
  return from_dense(broadcast_map(
      operands, compare ? false : is_float, budget, label, [&](const std::vector<double>& v) {
        if (op == "Sum" || op == "Min" || op == "Max") {
          double acc = v[0];
          for (std::size_t i = 1; i < v.size(); ++i)
            acc = op == "Sum"   ? acc + v[i]
                  : op == "Min" ? std::min(acc, v[i])
                                : std::max(acc, v[i]);
          return acc;
        }
        const double a = v[0], b = v[1];
        if (op == "Add") return a + b;
        if (op == "Sub") return a - b;
        if (op == "Mul") return a * b;
        if (op == "Div") {
          if (is_float) return a / b;
          if (b == 0) fail("{}: integer division by zero", label);
          return std::trunc(a / b);
        }
        if (op == "Pow") return std::pow(a, b);
        if (op == "Equal") return a == b ? 1.0 : 0.0;
        if (op == "Less") return a < b ? 1.0 : 0.0;
        if (op == "Greater") return a > b ? 1.0 : 0.0;
        if (op == "LessOrEqual") return a <= b ? 1.0 : 0.0;
        if (op == "GreaterOrEqual") return a >= b ? 1.0 : 0.0;
        if (op == "And") return a != 0 && b != 0 ? 1.0 : 0.0;
        return a != 0 || b != 0 ? 1.0 : 0.0;  // Or
      }));
}

}  // namespace

std::vector<std::int64_t> squeezed_dims(const ::onnx::NodeProto& node, int opset,
                                        const std::vector<std::int64_t>& dims,
                                        const ConstantTensor* axes_input,
                                        const std::string& label) {
  const bool unsqueeze = node.op_type() == "Unsqueeze";
  Attributes attrs(node, label, {"axes"});
  // From opset 13 the axes are an optional input; before, an attribute.
  const std::vector<std::int64_t> axes =
      opset >= 13 ? (axes_input != nullptr ? int_values(*axes_input, label, "axes")
                                           : std::vector<std::int64_t>{})
                  : attrs.get_ints("axes", {});
  std::vector<std::int64_t> out;
  if (unsqueeze) {
    const std::size_t rank = dims.size() + axes.size();
    std::vector<bool> inserted(rank, false);
    for (auto a : axes) {
      const auto axis = static_cast<std::size_t>(normalise_axis(a, rank, label));
      if (inserted[axis]) fail("{}: axis {} is listed twice", label, a);
      inserted[axis] = true;
    }
    std::size_t k = 0;
    for (std::size_t i = 0; i < rank; ++i)
      out.push_back(inserted[i] ? 1 : dims[k++]);
    return out;
  }
  // No axes: every dim of size 1 goes.
  std::vector<bool> removed(dims.size(), false);
  for (std::size_t i = 0; i < dims.size(); ++i)
    removed[i] = axes.empty() && dims[i] == 1;
  for (auto a : axes) {
    const auto axis = static_cast<std::size_t>(normalise_axis(a, dims.size(), label));
    if (dims[axis] != 1)
      fail("{}: axis {} has size {}, not 1: it cannot be squeezed", label, a, dims[axis]);
    removed[axis] = true;
  }
  for (std::size_t i = 0; i < dims.size(); ++i)
    if (!removed[i]) out.push_back(dims[i]);
  return out;
}

bool is_foldable(const ::onnx::NodeProto& node) {
  static const char* const kOps[] = {"ConstantOfShape", "Concat",   "Reshape",   "Slice",
                                     "Transpose",       "Cast",     "Unsqueeze", "Squeeze",
                                     "Gather",          "Identity", "Range",     "Expand"};
  return is_elementwise_fold(node.op_type()) ||
         std::any_of(std::begin(kOps), std::end(kOps),
                     [&](const char* op) { return node.op_type() == op; });
}

void FoldBudget::charge(std::int64_t elements, const std::string& label) {
  if (elements > left_) {
    fail(
        "{}: constant folding would build more than {} elements in this model; a model that "
        "needs more can raise OnnxImportOptions::max_folded_elements (cgr-bench "
        "--max-folded-elements N; Python: max_folded_elements=N)",
        label, total_);
  }
  left_ -= elements;
}

ConstantTensor fold_node(const ::onnx::NodeProto& node, int opset,
                         const std::vector<const ConstantTensor*>& inputs, FoldBudget& budget,
                         const std::string& label) {
  const std::string& op = node.op_type();
  auto input = [&](std::size_t i) -> const ConstantTensor& {
    if (i >= inputs.size() || inputs[i] == nullptr) fail("{}: input {} is missing", label, i);
    return *inputs[i];
  };
  // An Identity of a weight (tied weights) is a copy the file's own size bounds.
  if (op == "Identity") return input(0);
  // Folding copies its inputs (one constant may feed a node many times); outputs that are not
  // such a copy are charged where they are built.
  for (const ConstantTensor* t : inputs)
    if (t != nullptr) budget.charge(count(t->shape.dims()), label);
  if (is_elementwise_fold(op)) return fold_elementwise(node, inputs, budget, label);
  if (op == "Range") {
    Attributes attrs(node, label, {});
    const auto scalar = [&](std::size_t i) {
      const ConstantTensor& t = input(i);
      if (t.shape.numel() != 1) fail("{}: Range takes scalars", label);
      return t.is_float ? double{t.floats[0]} : static_cast<double>(t.ints[0]);
    };
    const double start = scalar(0), limit = scalar(1), delta = scalar(2);
    if (delta == 0) fail("{}: Range with delta 0", label);
    const double steps = std::max(0.0, std::ceil((limit - start) / delta));
    if (steps > (1 << 24)) fail("{}: a Range of {} elements is not folded", label, steps);
    budget.charge(static_cast<std::int64_t>(steps), label);
    Dense d{{static_cast<std::int64_t>(steps)}, {}, input(0).is_float};
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(steps); ++i)
      d.values.push_back(start + static_cast<double>(i) * delta);
    return from_dense(d);
  }
  if (op == "Expand") {
    Attributes attrs(node, label, {});
    const Dense d = to_dense(input(0));
    const auto shape = int_values(input(1), label, "the shape");
    budget.charge(count(shape), label);
    Dense target{shape, std::vector<double>(static_cast<std::size_t>(count(shape)), 0.0), false};
    for (auto& v : target.dims)
      if (v < 0) fail("{}: shape value {} is negative", label, v);
    // Expand broadcasts both ways: out = broadcast(input, shape).
    return from_dense(broadcast_map({&d, &target}, d.is_float, budget, label,
                                    [](const std::vector<double>& v) { return v[0]; }));
  }
  if (op == "ConstantOfShape") {
    Attributes attrs(node, label, {"value"});
    Dense d;
    d.dims = int_values(input(0), label, "the shape");
    std::int64_t total = 1;
    for (auto v : d.dims) {
      if (v < 0 || v > (1 << 24)) fail("{}: shape value {} is out of range", label, v);
      total *= v;
      if (total > (1 << 24)) fail("{}: a constant of more than 2^24 elements is not folded", label);
    }
    double fill = 0.0;
    if (const auto* value = attrs.get_tensor("value")) {
      const ConstantTensor v = decode_tensor(*value, label);
      d.is_float = v.is_float;
      if (v.shape.numel() != 1) fail("{}: value must hold one element", label);
      fill = v.is_float ? v.floats[0] : static_cast<double>(v.ints[0]);
    }
    budget.charge(count(d.dims), label);
    d.values.assign(static_cast<std::size_t>(count(d.dims)), fill);
    return from_dense(d);
  }
  if (op == "Cast") {
    Attributes attrs(node, label, {"to", "saturate"});
    const auto to = attrs.get_int("to", 0);
    Dense d = to_dense(input(0));
    switch (to) {
      case ::onnx::TensorProto::FLOAT:
      case ::onnx::TensorProto::DOUBLE:
        d.is_float = true;
        break;
      case ::onnx::TensorProto::INT64:
      case ::onnx::TensorProto::INT32:
        for (auto& v : d.values)
          v = std::trunc(v);
        d.is_float = false;
        break;
      default:
        attrs.unsupported("to", fmt::format("{} is not supported in constant folding", to));
    }
    return from_dense(d);
  }
  if (op == "Concat") {
    Attributes attrs(node, label, {"axis"});
    std::vector<Dense> parts;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      parts.push_back(to_dense(input(i)));
    if (parts.empty()) fail("{}: needs inputs", label);
    const auto axis = static_cast<std::size_t>(
        normalise_axis(attrs.get_int("axis", 0), parts[0].dims.size(), label));
    Dense out = parts[0];
    out.dims[axis] = 0;
    for (const auto& p : parts) {
      if (p.dims.size() != out.dims.size()) fail("{}: inputs have different ranks", label);
      for (std::size_t i = 0; i < p.dims.size(); ++i) {
        if (i != axis && p.dims[i] != parts[0].dims[i]) {
          fail("{}: inputs of shapes {} and {} differ off the axis {}", label,
               Shape(parts[0].dims).to_string(), Shape(p.dims).to_string(), axis);
        }
      }
      out.dims[axis] += p.dims[axis];
    }
    out.values.clear();
    const std::int64_t outer = count(std::vector<std::int64_t>(
        out.dims.begin(), out.dims.begin() + static_cast<std::ptrdiff_t>(axis)));
    for (std::int64_t o = 0; o < outer; ++o) {
      for (const auto& p : parts) {
        const std::int64_t block = count(p.dims) / std::max<std::int64_t>(outer, 1);
        out.values.insert(out.values.end(), p.values.begin() + o * block,
                          p.values.begin() + (o + 1) * block);
      }
    }
    return from_dense(out);
  }
  if (op == "Reshape") {
    Attributes attrs(node, label, {"allowzero"});
    Dense d = to_dense(input(0));
    std::vector<std::int64_t> dims = int_values(input(1), label, "the shape");
    std::int64_t known = 1;
    int infer = -1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 0 && attrs.get_int("allowzero", 0) == 0)
        dims[i] = i < d.dims.size() ? d.dims[i] : 0;
      if (dims[i] == -1 && infer < 0) {
        infer = static_cast<int>(i);
      } else if (dims[i] < 0 || __builtin_mul_overflow(known, dims[i], &known)) {
        fail("{}: shape [{}] is not valid", label,
             fmt::join(int_values(input(1), label, "the shape"), ","));
      }
    }
    if (infer >= 0 && known > 0) dims[static_cast<std::size_t>(infer)] = count(d.dims) / known;
    if (count(dims) != count(d.dims)) fail("{}: cannot reshape {} values", label, count(d.dims));
    d.dims = dims;
    return from_dense(d);
  }
  if (op == "Transpose") {
    Attributes attrs(node, label, {"perm"});
    const Dense d = to_dense(input(0));
    std::vector<std::int64_t> perm = attrs.get_ints("perm", {});
    if (perm.empty())
      for (std::size_t i = d.dims.size(); i-- > 0;)
        perm.push_back(static_cast<std::int64_t>(i));
    if (perm.size() != d.dims.size())
      fail("{}: perm has {} entries for rank {}", label, perm.size(), d.dims.size());
    std::vector<bool> seen(perm.size(), false);
    for (auto& p : perm) {
      p = normalise_axis(p, perm.size(), label);
      if (seen[static_cast<std::size_t>(p)]) {
        fail("{}: perm [{}] names axis {} twice", label, fmt::join(attrs.get_ints("perm", {}), ","),
             p);
      }
      seen[static_cast<std::size_t>(p)] = true;
    }
    budget.charge(count(d.dims), label);
    Dense out = d;
    for (std::size_t i = 0; i < perm.size(); ++i)
      out.dims[i] = d.dims[static_cast<std::size_t>(perm[i])];
    const auto in_strides = strides_of(d.dims);
    for_each_index(out.dims, [&](std::int64_t i, const std::vector<std::int64_t>& index) {
      std::int64_t source = 0;
      for (std::size_t k = 0; k < perm.size(); ++k)
        source += index[k] * in_strides[static_cast<std::size_t>(perm[k])];
      out.values[static_cast<std::size_t>(i)] = d.values[static_cast<std::size_t>(source)];
    });
    return from_dense(out);
  }
  if (op == "Slice") {
    // Before opset 10 starts, ends and axes are attributes (and there are no steps).
    const bool attributes = opset < 10;
    Attributes attrs(node, label,
                     attributes ? std::initializer_list<std::string_view>{"starts", "ends", "axes"}
                                : std::initializer_list<std::string_view>{});
    const Dense d = to_dense(input(0));
    const auto starts =
        attributes ? attrs.get_ints("starts", {}) : int_values(input(1), label, "starts");
    const auto ends = attributes ? attrs.get_ints("ends", {}) : int_values(input(2), label, "ends");
    std::vector<std::int64_t> axes, steps;
    if (attributes && attrs.has("axes"))
      axes = attrs.get_ints("axes", {});
    else if (!attributes && inputs.size() > 3 && inputs[3] != nullptr)
      axes = int_values(*inputs[3], label, "axes");
    else
      for (std::size_t i = 0; i < starts.size(); ++i)
        axes.push_back(static_cast<std::int64_t>(i));
    if (!attributes && inputs.size() > 4 && inputs[4] != nullptr)
      steps = int_values(*inputs[4], label, "steps");
    else
      steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() ||
        steps.size() != starts.size()) {
      fail("{}: starts, ends, axes and steps differ in length", label);
    }
    const std::size_t rank = d.dims.size();
    std::vector<std::int64_t> first(rank, 0), step(rank, 1), dims = d.dims;
    for (std::size_t i = 0; i < starts.size(); ++i) {
      const auto axis = static_cast<std::size_t>(normalise_axis(axes[i], rank, label));
      const std::int64_t size = d.dims[axis];
      if (steps[i] == 0) fail("{}: a step of 0", label);
      const SliceAxis a = slice_axis(size, starts[i], ends[i], steps[i]);
      dims[axis] = a.count;
      const std::int64_t b = a.first, s = a.step;
      first[axis] = b;
      step[axis] = s;
    }
    budget.charge(count(dims), label);
    Dense out{dims, std::vector<double>(static_cast<std::size_t>(count(dims))), d.is_float};
    const auto in_strides = strides_of(d.dims);
    for_each_index(dims, [&](std::int64_t i, const std::vector<std::int64_t>& index) {
      std::int64_t source = 0;
      for (std::size_t k = 0; k < rank; ++k)
        source += (first[k] + index[k] * step[k]) * in_strides[k];
      out.values[static_cast<std::size_t>(i)] = d.values[static_cast<std::size_t>(source)];
    });
    return from_dense(out);
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    Dense d = to_dense(input(0));
    d.dims = squeezed_dims(node, opset, d.dims, inputs.size() > 1 ? inputs[1] : nullptr, label);
    return from_dense(d);
  }
  if (op == "Gather") {
    Attributes attrs(node, label, {"axis"});
    const Dense d = to_dense(input(0));
    const Dense idx = to_dense(input(1));
    if (idx.is_float) fail("{}: indices must be integers", label);
    const auto axis =
        static_cast<std::size_t>(normalise_axis(attrs.get_int("axis", 0), d.dims.size(), label));
    std::vector<std::int64_t> dims(d.dims.begin(),
                                   d.dims.begin() + static_cast<std::ptrdiff_t>(axis));
    dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
    dims.insert(dims.end(), d.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, d.dims.end());
    const std::int64_t outer = count(std::vector<std::int64_t>(
        d.dims.begin(), d.dims.begin() + static_cast<std::ptrdiff_t>(axis)));
    const std::int64_t inner = count(std::vector<std::int64_t>(
        d.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, d.dims.end()));
    budget.charge(count(dims), label);
    Dense out{dims, {}, d.is_float};
    for (std::int64_t o = 0; o < outer; ++o) {
      for (double raw : idx.values) {
        auto j = static_cast<std::int64_t>(raw);
        if (j < 0) j += d.dims[axis];
        if (j < 0 || j >= d.dims[axis]) fail("{}: index {} is out of range", label, raw);
        const auto begin = d.values.begin() + (o * d.dims[axis] + j) * inner;
        out.values.insert(out.values.end(), begin, begin + inner);
      }
    }
    return from_dense(out);
  }
  fail("{}: op type '{}' cannot be folded", label, op);
}

}  // namespace cgr::onnx_import
