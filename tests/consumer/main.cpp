// Builds a small two-branch network against the installed cgr package and checks the result
// against values computed here by hand.
#include <cgr/engine.hpp>

#include <cmath>
#include <cstdio>

int main() {
  cgr::Network net;
  const cgr::Value x = net.input("x", {1, 1, 2, 2});
  const cgr::Value a = net.conv2d(x, {.out_channels = 1, .kernel = 1}, "a");  // 2x + 1
  const cgr::Value b = net.relu(x, "b");
  net.output("y", net.concat({a, b}, "cat"));
  cgr::Weights weights;
  weights.add("a.weight", cgr::Tensor(cgr::Shape{1, 1, 1, 1}, {2.0f}));
  weights.add("a.bias", cgr::Tensor(cgr::Shape{1}, {1.0f}));
  const cgr::Engine engine = cgr::Engine::build(net, weights, {.threads = 2});
  cgr::ExecutionContext ctx = engine.create_context();
  const cgr::Tensor y = ctx.infer({{"x", std::vector<float>{-1, 0, 1, 2}}}).output("y");
  const float expected[] = {-1, 1, 3, 5, 0, 0, 1, 2};
  for (int i = 0; i < 8; ++i) {
    if (std::abs(y.f32()[i] - expected[i]) > 1e-6f) {
      std::printf("consumer: y[%d] = %f, expected %f\n", i, y.f32()[i], expected[i]);
      return 1;
    }
  }
  std::printf("consumer: cgr package works (%d ops, width %d)\n", engine.info().ops,
              engine.info().max_width);
  return 0;
}
