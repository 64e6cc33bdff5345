// See layer_cases.hpp. Odd sizes and batch 2 throughout: no kernel gets a friendly shape.
#include "layer_cases.hpp"

#include <cstring>

namespace cgr::test {

std::vector<LayerCase> layer_cases(const DeviceCopy& device_copy) {
  std::vector<LayerCase> cases;
  const Shape image{2, 8, 11, 13};  // batch 2, odd sizes: no kernel gets a friendly shape
  cases.push_back({"Conv2d 3x3 pad 1 + bias", image, [](Network& n, Value x) {
                     return n.conv2d(x, {.out_channels = 12, .kernel = 3, .padding = 1}, "conv");
                   }});
  cases.push_back(
      {"Conv2d stride 2, asymmetric padding (pad kernel + cuDNN)", image, [](Network& n, Value x) {
         return n.conv2d(
             x, {.out_channels = 6, .kernel = 3, .stride = 2, .padding = Padding2d(1, 0, 2, 1)},
             "conv");
       }});
  cases.push_back({"Conv2d dilation 2, groups 2, no bias", image, [](Network& n, Value x) {
                     return n.conv2d(x,
                                     {.out_channels = 8,
                                      .kernel = 3,
                                      .padding = 2,
                                      .dilation = 2,
                                      .groups = 2,
                                      .bias = false},
                                     "conv");
                   }});
  cases.push_back({"Conv2d depthwise 5x5", image, [](Network& n, Value x) {
                     return n.conv2d(x, {.out_channels = 8, .kernel = 5, .padding = 2, .groups = 8},
                                     "conv");
                   }});
  cases.push_back({"Conv2d + BatchNorm2d + ReLU (fused)", image, [](Network& n, Value x) {
                     Value y = n.conv2d(
                         x, {.out_channels = 16, .kernel = 3, .padding = 1, .bias = false}, "conv");
                     return n.relu(n.batch_norm2d(y, "bn"), "relu");
                   }});
  cases.push_back(
      {"Conv2d + BatchNorm2d + residual Add + ReLU (fused)", image, [](Network& n, Value x) {
         Value y =
             n.conv2d(x, {.out_channels = 8, .kernel = 3, .padding = 1, .bias = false}, "conv");
         return n.relu(n.add(n.batch_norm2d(y, "bn"), x, "add"), "relu");
       }});
  cases.push_back(
      {"Conv2d + BatchNorm2d + SiLU (fused: cuDNN, then cgr's activation kernel)", image,
       [](Network& n, Value x) {
         Value y =
             n.conv2d(x, {.out_channels = 10, .kernel = 3, .padding = 1, .bias = false}, "conv");
         return n.unary(n.batch_norm2d(y, "bn"), UnaryParams::defaults(UnaryOp::silu), "silu");
       }});
  cases.push_back({"Conv2d + residual Add + HardSwish (fused)", image, [](Network& n, Value x) {
                     Value y = n.conv2d(x, {.out_channels = 8, .kernel = 3, .padding = 1}, "conv");
                     return n.unary(n.add(y, x, "add"), UnaryParams::defaults(UnaryOp::hard_swish),
                                    "hswish");
                   }});
  cases.push_back({"Conv2d 1x1 + Clip 0..6 (ReLU6, fused)", image, [](Network& n, Value x) {
                     Value y = n.conv2d(x, {.out_channels = 5, .kernel = 1}, "conv");
                     return n.clip(y, {0.0f, 6.0f}, "relu6");
                   }});
  cases.push_back(
      {"1x1 expansion + BatchNorm2d + Clip -> depthwise 3x3 stride 2 + BatchNorm2d + Clip (one op)",
       image, [](Network& n, Value x) {
         Value e = n.conv2d(x, {.out_channels = 32, .bias = false}, "expand");
         e = n.clip(n.batch_norm2d(e, "expand.bn"), {0.0f, 6.0f}, "expand.clip");
         Value d = n.conv2d(
             e, {.out_channels = 32, .kernel = 3, .stride = 2, .padding = 1, .groups = 32}, "dw");
         return n.clip(n.batch_norm2d(d, "dw.bn"), {0.0f, 6.0f}, "dw.clip");
       }});
  cases.push_back({"1x1 expansion + SiLU -> depthwise 5x5 + residual Add (one op, unbanded)",
                   Shape{2, 16, 11, 13}, [](Network& n, Value x) {
                     Value e = n.unary(n.conv2d(x, {.out_channels = 16}, "expand"),
                                       UnaryParams::defaults(UnaryOp::silu), "expand.silu");
                     Value d = n.conv2d(
                         e, {.out_channels = 16, .kernel = 5, .padding = 2, .groups = 16}, "dw");
                     return n.add(d, x, "add");
                   }});
  cases.push_back({"Add + Sigmoid (fused)", image, [](Network& n, Value x) {
                     return n.unary(n.add(n.relu(x, "relu"), x, "add"),
                                    UnaryParams::defaults(UnaryOp::sigmoid), "sigmoid");
                   }});
  cases.push_back({"squeeze-excitation: gate conv + Sigmoid + channel Mul (fused)", image,
                   [](Network& n, Value x) {
                     Value s = n.global_avg_pool(x, "pool");
                     s = n.relu(n.conv2d(s, {.out_channels = 3, .kernel = 1}, "fc1"), "relu");
                     s = n.unary(n.conv2d(s, {.out_channels = 8, .kernel = 1}, "fc2"),
                                 UnaryParams::defaults(UnaryOp::sigmoid), "gate");
                     return n.binary(x, s, BinaryOp::mul, "scale");
                   }});
  cases.push_back({"Conv2d 1x1, unfused Conv2d + BatchNorm2d + ReLU", image,
                   [](Network& n, Value x) {
                     Value y = n.conv2d(x, {.out_channels = 4, .kernel = 1}, "conv");
                     return n.relu(n.batch_norm2d(y, "bn"), "relu");
                   },
                   false});
  cases.push_back(
      {"ConvTranspose2d k3 s2 p1 output_padding 1 (cuDNN writes the output, bias in place)", image,
       [](Network& n, Value x) {
         return n.conv_transpose2d(
             x, {.out_channels = 6, .kernel = 3, .stride = 2, .padding = 1, .output_padding = 1},
             "up");
       }});
  cases.push_back(
      {"ConvTranspose2d dilation 2, groups 2, no bias", image, [](Network& n, Value x) {
         return n.conv_transpose2d(
             x, {.out_channels = 4, .kernel = 3, .dilation = 2, .groups = 2, .bias = false}, "up");
       }});
  cases.push_back(
      {"ConvTranspose2d asymmetric pads, output_padding past the stride (full result trimmed)",
       image, [](Network& n, Value x) {
         return n.conv_transpose2d(x,
                                   {.out_channels = 5,
                                    .kernel = {3, 2},
                                    .padding = Padding2d(0, 2, 1, 0),
                                    .output_padding = 1,
                                    .dilation = 2},
                                   "up");
       }});
  // N x C x L through the 2-D window layers (height 1): nn.Conv1d, BatchNorm1d, MaxPool1d,
  // AvgPool1d, ConvTranspose1d, AdaptiveAvgPool1d(1).
  cases.push_back(
      {"1-D: Conv1d + BatchNorm1d + ReLU, MaxPool1d, AvgPool1d, ConvTranspose1d, global pool",
       Shape{2, 8, 29}, [](Network& n, Value x) {
         Value y = n.conv2d(x, {.out_channels = 6, .kernel = {1, 3}, .padding = {0, 1}}, "conv");
         y = n.relu(n.batch_norm2d(y, "bn"), "relu");
         y = n.max_pool2d(y, {.kernel = {1, 3}, .stride = {1, 2}, .padding = {0, 1}}, "max");
         y = n.avg_pool2d(y, {.kernel = {1, 2}}, "avg");
         y = n.conv_transpose2d(
             y, {.out_channels = 4, .kernel = {1, 4}, .stride = {1, 2}, .padding = {0, 1}}, "up");
         return n.binary(y, n.global_avg_pool(y, "gap"), BinaryOp::sub, "centred");
       }});
  cases.push_back({"BatchNorm2d on its own", image,
                   [](Network& n, Value x) { return n.batch_norm2d(x, "bn"); }});
  cases.push_back({"ReLU", image, [](Network& n, Value x) { return n.relu(x, "relu"); }});
  cases.push_back({"Clip 0..6", image, [](Network& n, Value x) {
                     return n.clip(x, {0.0f, 6.0f}, "clip");
                   }});
  cases.push_back({"LeakyReLU, PyTorch's default slope", image,
                   [](Network& n, Value x) { return n.leaky_relu(x, {}, "lrelu"); }});
  cases.push_back({"LeakyReLU slope 0.2 after a conv", image, [](Network& n, Value x) {
                     Value y = n.conv2d(x, {.out_channels = 6, .kernel = 3, .padding = 1}, "conv");
                     return n.leaky_relu(y, {.negative_slope = 0.2f}, "lrelu");
                   }});
  // Every function of the Unary layer; log, sqrt and reciprocal after abs, so that the result
  // is finite and compared, not NaN.
  for (int f = 0; f <= static_cast<int>(UnaryOp::reciprocal); ++f) {
    const auto op = static_cast<UnaryOp>(f);
    const bool positive = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::reciprocal;
    cases.push_back(
        {"Unary " + std::string(unary_op_name(op)), image, [op, positive](Network& n, Value x) {
           if (positive) x = n.unary(x, {.op = UnaryOp::abs}, "abs");
           return n.unary(x, UnaryParams::defaults(op), "unary");
         }});
  }
  cases.push_back(
      {"Unary Elu alpha 0.5, HardSigmoid alpha 1/6 after a conv", image, [](Network& n, Value x) {
         Value y = n.conv2d(x, {.out_channels = 6, .kernel = 3, .padding = 1}, "conv");
         y = n.unary(y, {.op = UnaryOp::elu, .alpha = 0.5f}, "elu");
         return n.unary(y, {.op = UnaryOp::hard_sigmoid, .alpha = 1.0f / 6, .beta = 0.5f}, "hsig");
       }});
  // Reductions: over H and W (one contiguous reduced dim), over C (strided), over N and W
  // (two reduced dims), dims dropped, and a warp-per-output size.
  const std::pair<const char*, ReduceParams> reductions[] = {
      {"ReduceMean over H, W keepdims", {ReduceOp::mean, {2, 3}, true}},
      {"ReduceSum over C", {ReduceOp::sum, {1}, true}},
      {"ReduceMax over N and W, dims dropped", {ReduceOp::max, {0, -1}, false}},
      {"ReduceMin over C, H, W", {ReduceOp::min, {1, 2, 3}, false}},
  };
  for (const auto& [what, params] : reductions) {
    cases.push_back(
        {what, image, [p = params](Network& n, Value x) { return n.reduce(x, p, "reduce"); }});
  }
  cases.push_back(
      {"Slice channels 2..7, rows reversed with step -2, columns 1::3", image,
       [](Network& n, Value x) {
         return n.slice(x, {{2, -1, 1}, {7, -1000, 1000}, {1, 2, 3}, {1, -2, 3}}, "slice");
       }});
  cases.push_back({"Slice half the channels (a ShuffleNet split)", image, [](Network& n, Value x) {
                     return n.slice(x, {{4}, {8}, {1}, {}}, "half");
                   }});
  // MatMul: batched with both operands computed, a broadcast batch dim with a transposed B
  // and alpha, constants on either side, a 1-D constant (a matrix-vector product).
  cases.push_back({"MatMul of each 11x13 plane with its transpose (16 products)", image,
                   [](Network& n, Value x) {
                     return n.matmul(x, n.transpose(x, {0, 1, 3, 2}, "t"), {}, "mm");
                   }});
  cases.push_back({"MatMul with B broadcast over channels, B transposed, alpha 0.5", image,
                   [](Network& n, Value x) {
                     const Value b = n.slice(x, {{0}, {1}, {1}, {}}, "first");  // 2x1x11x13
                     return n.matmul(x, b, {.transpose_b = true, .alpha = 0.5f}, "mm");
                   }});
  cases.push_back(
      {"MatMul with a constant A (5x11) broadcast over the batch", image, [](Network& n, Value x) {
         return n.matmul(x, MatMulConstant{Shape{5, 11}, true}, {}, "mm");
       }});
  cases.push_back(
      {"MatMul Gemm-style: constant Aᵀ, computed Bᵀ, alpha 2", image, [](Network& n, Value x) {
         const Value rows = n.reshape(x, Shape{22, 104}, "rows");
         return n.matmul(rows, MatMulConstant{Shape{104, 7}, true},
                         {.transpose_a = true, .transpose_b = true, .alpha = 2.0f}, "mm");
       }});
  cases.push_back({"MatMul by a constant 1-D vector", image, [](Network& n, Value x) {
                     return n.matmul(x, MatMulConstant{Shape{13}}, {}, "mv");
                   }});
  cases.push_back({"LayerNorm over the last dim", image,
                   [](Network& n, Value x) { return n.layer_norm(x, {}, "ln"); }});
  cases.push_back({"LayerNorm over C, H, W without bias, eps 1e-3 (a block-wide row)", image,
                   [](Network& n, Value x) {
                     return n.layer_norm(x, {.axis = 1, .eps = 1e-3f, .bias = false}, "ln");
                   }});
  cases.push_back(
      {"LayerNorm channels-last (ConvNeXt: permute, LayerNorm(C), permute)", image,
       [](Network& n, Value x) {
         const Value last = n.transpose(x, {0, 2, 3, 1}, "to_last");
         return n.transpose(n.layer_norm(last, {.eps = 1e-6f}, "ln"), {0, 3, 1, 2}, "to_first");
       }});
  cases.push_back(
      {"InstanceNorm", image, [](Network& n, Value x) { return n.instance_norm(x, {}, "in"); }});
  cases.push_back({"LocalResponseNorm size 5 (AlexNet's)", image, [](Network& n, Value x) {
                     return n.local_response_norm(x, {.size = 5, .alpha = 1e-2f, .bias = 2.0f},
                                                  "lrn");
                   }});
  cases.push_back({"LocalResponseNorm size 4 (an even window), wider than half the channels", image,
                   [](Network& n, Value x) {
                     return n.local_response_norm(x, {.size = 4, .alpha = 0.5f, .beta = 0.6f},
                                                  "lrn");
                   }});
  cases.push_back({"Clip -0.5..0.25", image, [](Network& n, Value x) {
                     return n.clip(x, {-0.5f, 0.25f}, "clip");
                   }});
  cases.push_back({"MaxPool2d 3x3/2 pad 1", image, [](Network& n, Value x) {
                     return n.max_pool2d(x, {.kernel = 3, .stride = 2, .padding = 1}, "pool");
                   }});
  cases.push_back({"MaxPool2d 2x2 ceil mode, dilation 2", image, [](Network& n, Value x) {
                     return n.max_pool2d(
                         x, {.kernel = 2, .stride = 2, .dilation = 2, .ceil_mode = true}, "pool");
                   }});
  cases.push_back({"AvgPool2d 3x3/2 pad 1 count_include_pad", image, [](Network& n, Value x) {
                     return n.avg_pool2d(x, {.kernel = 3, .stride = 2, .padding = 1}, "pool");
                   }});
  cases.push_back(
      {"AvgPool2d 3x3/2 pad 1 ceil mode, padding excluded", image, [](Network& n, Value x) {
         return n.avg_pool2d(x,
                             {.kernel = 3,
                              .stride = 2,
                              .padding = 1,
                              .ceil_mode = true,
                              .count_include_pad = false},
                             "pool");
       }});
  cases.push_back(
      {"GlobalAvgPool", image, [](Network& n, Value x) { return n.global_avg_pool(x, "gap"); }});
  cases.push_back({"Flatten", image, [](Network& n, Value x) { return n.flatten(x, "flatten"); }});
  cases.push_back({"Linear + bias (after GlobalAvgPool, Flatten)", image, [](Network& n, Value x) {
                     return n.linear(n.flatten(n.global_avg_pool(x, "gap"), "flatten"),
                                     {.out_features = 10}, "fc");
                   }});
  cases.push_back({"Linear without bias, 1144 inputs", image, [](Network& n, Value x) {
                     return n.linear(n.flatten(x, "flatten"), {.out_features = 33, .bias = false},
                                     "fc");
                   }});
  // Linear's GPU paths (engine/cuda/ops/linear.cpp): the rows kernel, pooling fused or not,
  // and cuBLAS for more rows or a row beyond shared memory, after the pool kernel when fused.
  cases.push_back({"GlobalAvgPool + Reshape + Linear without bias (one kernel)", image,
                   [](Network& n, Value x) {
                     const Value rows = n.reshape(n.global_avg_pool(x, "gap"), Shape{2, 8}, "rows");
                     return n.linear(rows, {.out_features = 70, .bias = false}, "fc");
                   }});
  cases.push_back({"GlobalAvgPool + Flatten + Linear, batch 10 (pool kernel, then cuBLAS)",
                   Shape{10, 8, 5, 7}, [](Network& n, Value x) {
                     return n.linear(n.flatten(n.global_avg_pool(x, "gap"), "flatten"),
                                     {.out_features = 9}, "fc");
                   }});
  cases.push_back({"Linear + bias, 12 rows (cuBLAS, then the bias kernel)", Shape{12, 40},
                   [](Network& n, Value x) { return n.linear(x, {.out_features = 17}, "fc"); }});
  cases.push_back({"Linear, 13000 inputs (cuBLAS: the row exceeds shared memory)", Shape{2, 13000},
                   [](Network& n, Value x) { return n.linear(x, {.out_features = 3}, "fc"); }});
  // Copies the engine elides (engine/src/aliasing.cpp): producers writing their slices of a
  // Concat in place (batch 1, parts 256-byte aligned), a Flatten read as a view.
  cases.push_back(
      {"Concat written in place by its producers, read by a conv", Shape{1, 8, 8, 8},
       [](Network& n, Value x) {
         const Value a = n.conv2d(x, {.out_channels = 4, .kernel = 3, .padding = 1}, "a");
         const Value b = n.max_pool2d(x, {.kernel = 3, .stride = 1, .padding = 1}, "b");
         const Value c = n.relu(n.conv2d(x, {.out_channels = 5, .kernel = 1}, "c"), "c.relu");
         return n.conv2d(n.concat({a, b, c}, "cat"), {.out_channels = 6, .kernel = 1}, "after");
       }});
  cases.push_back(
      {"Flatten as a view, read by a Linear (the rows kernel)", image, [](Network& n, Value x) {
         const Value h = n.conv2d(x, {.out_channels = 3, .kernel = 3, .padding = 1}, "conv");
         return n.linear(n.flatten(h, "flatten"), {.out_features = 5}, "fc");
       }});
  cases.push_back({"Add of two values", image,
                   [](Network& n, Value x) { return n.add(n.relu(x, "relu"), x, "add"); }});
  cases.push_back({"Add + ReLU (fused)", image, [](Network& n, Value x) {
                     return n.relu(n.add(n.clip(x, {-0.3f, 0.3f}, "clip"), x, "add"), "relu");
                   }});
  cases.push_back(
      {"Concat of three, channels", image, [](Network& n, Value x) {
         return n.concat({n.relu(x, "relu"), x, n.clip(x, {0.0f, 0.5f}, "clip")}, "cat");
       }});
  cases.push_back({"Concat along width", image, [](Network& n, Value x) {
                     return n.concat({x, n.relu(x, "relu")}, "cat", 3);
                   }});
  cases.push_back({"Softmax over the last axis", Shape{3, 1000},
                   [](Network& n, Value x) { return n.softmax(x, "softmax"); }});
  cases.push_back({"Softmax over channels", image,
                   [](Network& n, Value x) { return n.softmax(x, "softmax", 1); }});
  cases.push_back({"LogSoftmax over the last axis (warp rows)", Shape{3, 1000},
                   [](Network& n, Value x) { return n.log_softmax(x, "log_softmax"); }});
  cases.push_back({"LogSoftmax over channels (thread rows)", image,
                   [](Network& n, Value x) { return n.log_softmax(x, "log_softmax", 1); }});
  cases.push_back({"Pad2d", image,
                   [](Network& n, Value x) { return n.pad2d(x, Padding2d(1, 2, 0, 3), "pad"); }});
  cases.push_back(
      {"Pad2d reflect, then edge with a crop", image, [](Network& n, Value x) {
         const Value r = n.pad2d(x, {Padding2d(3, 1, 2, 4), PadMode::reflect}, "reflect");
         return n.pad2d(r, {Padding2d(-2, 3, 1, -1), PadMode::edge}, "edge");
       }});
  cases.push_back(
      {"Pad2d constant 0.75 with a crop, then wrap", image, [](Network& n, Value x) {
         const Value c = n.pad2d(x, {Padding2d(2, -3, -1, 1), PadMode::constant, 0.75f}, "fill");
         return n.pad2d(c, {Padding2d(4, 2, 1, 5), PadMode::wrap}, "wrap");
       }});
  // Resize: nearest x2 (F.interpolate's default), bilinear both ways of align_corners, odd
  // ratios both ways, and a rank-3 input.
  const std::pair<const char*, ResizeParams> resizes[] = {
      {"Resize nearest x2, asymmetric floor (torch)",
       {.coordinates = ResizeCoordinates::asymmetric,
        .rounding = NearestRounding::floor,
        .scales = {1, 1, 2, 2}}},
      {"Resize nearest to 7x20, half_pixel round_prefer_ceil",
       {.rounding = NearestRounding::round_prefer_ceil, .sizes = {2, 8, 7, 20}}},
      {"Resize bilinear x1.5 / x0.6, half_pixel",
       {.mode = ResizeMode::linear, .scales = {1, 1, 1.5f, 0.6f}}},
      {"Resize bilinear to 23x5, align_corners",
       {.mode = ResizeMode::linear,
        .coordinates = ResizeCoordinates::align_corners,
        .sizes = {2, 8, 23, 5}}},
  };
  for (const auto& [what, params] : resizes) {
    cases.push_back(
        {what, image, [p = params](Network& n, Value x) { return n.resize(x, p, "resize"); }});
  }
  cases.push_back({"Resize bilinear of N x C x L, pytorch_half_pixel", Shape{2, 8, 13},
                   [](Network& n, Value x) {
                     return n.resize(x,
                                     {.mode = ResizeMode::linear,
                                      .coordinates = ResizeCoordinates::pytorch_half_pixel,
                                      .scales = {1, 1, 2.5f}},
                                     "resize");
                   }});
  cases.push_back({"Tile 1x2x1x3", image, [](Network& n, Value x) {
                     return n.tile(x, {{1, 2, 1, 3}}, "tile");
                   }});
  cases.push_back({"Tile of a rank-2 value, both dims", Shape{3, 1000}, [](Network& n, Value x) {
                     return n.tile(x, {{2, 3}}, "tile");
                   }});
  cases.push_back({"Reshape", image, [](Network& n, Value x) {
                     return n.reshape(x, Shape{2, 8, 143}, "reshape");
                   }});
  cases.push_back({"Transpose NCHW -> NHWC", image, [](Network& n, Value x) {
                     return n.transpose(x, {0, 2, 3, 1}, "transpose");
                   }});
  // Every Binary function against a per-channel constant (pow of |x|, so that it is finite).
  for (int f = 0; f <= static_cast<int>(BinaryOp::prelu); ++f) {
    const auto op = static_cast<BinaryOp>(f);
    cases.push_back({"Binary " + std::string(binary_op_name(op)) + " with a per-channel constant",
                     image, [op](Network& n, Value x) {
                       if (op == BinaryOp::pow) x = n.unary(x, {.op = UnaryOp::abs}, "abs");
                       return n.binary(x, op, BinaryConstant{Shape{1, 8, 1, 1}}, "binary");
                     }});
  }
  cases.push_back({"Binary Mul by the global average pool (squeeze-excitation)", image,
                   [](Network& n, Value x) {
                     return n.binary(x, n.global_avg_pool(x, "pool"), BinaryOp::mul, "scale");
                   }});
  cases.push_back(
      {"Binary Sub of x from a scalar constant (constant first)", image, [](Network& n, Value x) {
         return n.binary(x, BinaryOp::sub, BinaryConstant{Shape{}, true}, "rsub");
       }});
  cases.push_back(
      {"Binary Max and Div of two computed tensors of one shape", image, [](Network& n, Value x) {
         const Value r = n.relu(x, "relu");
         return n.binary(n.binary(x, r, BinaryOp::max, "max"),
                         n.unary(x, {.op = UnaryOp::exp}, "exp"), BinaryOp::div, "div");
       }});
  cases.push_back(
      {"Binary Add of a rank-5 constant: the output gains a dim", image, [](Network& n, Value x) {
         return n.binary(x, BinaryOp::add, BinaryConstant{Shape{3, 1, 1, 1, 13}}, "up");
       }});
  cases.push_back({"CustomOp: a copy, on the host and on the device", image,
                   [device_copy](Network& n, Value x) {
                     CustomOpParams copy;
                     copy.output_shape = n.desc(x).shape;
                     copy.kind = "Copy";
                     const std::size_t bytes = n.desc(x).bytes();
                     copy.cpu = [bytes](std::span<const float* const> in, float* out) {
                       std::memcpy(out, in[0], bytes);
                     };
                     copy.cuda = device_copy(bytes);
                     return n.custom({x}, std::move(copy), "copy");
                   }});
  return cases;
}

}  // namespace cgr::test
