// Device side of the element-math check: runs the shared __host__ __device__ functions of
// cgr/layers/element_math.hpp in kernels, so the test can compare them with the host build
// of the very same code. Returns cudaError_t; the caller checks (no fmt under nvcc).
#include <cuda_runtime.h>

#include "cgr/layers/element_math.hpp"
#include "element_math_kernels.hpp"

namespace {

__global__ void elementwise_kernel(const float* x, int n, float* relu_out, float* max_out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    relu_out[i] = cgr::math::relu(x[i]);
    max_out[i] = cgr::math::nan_max(x[i], x[(i + 1) % n]);
  }
}

__global__ void softmax_kernel(const float* x, int rows, int length, float* out) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < rows) cgr::math::softmax_row(x + row * length, out + row * length, length, 1);
}

__global__ void window_kernel(const long long* params, int cases, long long* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= cases) return;
  const long long* p = params + 7 * i;  // in, kernel, stride, pad_begin, pad_end, dilation, ceil
  const long long size = cgr::math::window_output_size(p[0], p[1], p[2], p[3], p[4], p[5], p[6] != 0);
  const cgr::math::WindowAxis last =
      cgr::math::pool_window_axis(size - 1, p[0], p[1], p[2], p[3], p[4]);
  out[4 * i + 0] = size;
  out[4 * i + 1] = last.begin;
  out[4 * i + 2] = last.end;
  out[4 * i + 3] = last.padded_length;
}

template <typename T>
cudaError_t to_device(const std::vector<T>& host, T** device) {
  cudaError_t status = cudaMalloc(device, host.size() * sizeof(T));
  if (status != cudaSuccess) return status;
  return cudaMemcpy(*device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
}

}  // namespace

namespace cgr::test {

cudaError_t run_element_math_on_device(const ElementMathInput& in, ElementMathOutput& out) {
  const int n = static_cast<int>(in.values.size());
  const int cases = static_cast<int>(in.windows.size() / 7);
  float *x = nullptr, *relu = nullptr, *maxed = nullptr, *soft_in = nullptr, *soft = nullptr;
  long long *windows = nullptr, *window_out = nullptr;
  cudaError_t status = cudaSuccess;
  // Every step stops at the first failure; the buffers are freed whatever happened.
  auto step = [&](cudaError_t s) {
    if (status == cudaSuccess) status = s;
    return status == cudaSuccess;
  };
  out.relu.resize(n);
  out.nan_max.resize(n);
  out.softmax.resize(in.softmax_input.size());
  out.windows.resize(static_cast<std::size_t>(4 * cases));
  if (step(to_device(in.values, &x)) && step(cudaMalloc(&relu, n * sizeof(float))) &&
      step(cudaMalloc(&maxed, n * sizeof(float))) && step(to_device(in.softmax_input, &soft_in)) &&
      step(cudaMalloc(&soft, in.softmax_input.size() * sizeof(float))) &&
      step(to_device(in.windows, &windows)) &&
      step(cudaMalloc(&window_out, out.windows.size() * sizeof(long long)))) {
    elementwise_kernel<<<(n + 127) / 128, 128>>>(x, n, relu, maxed);
    softmax_kernel<<<1, 32>>>(soft_in, in.softmax_rows,
                              static_cast<int>(in.softmax_input.size()) / in.softmax_rows, soft);
    window_kernel<<<1, 64>>>(windows, cases, window_out);
    if (step(cudaGetLastError()) && step(cudaDeviceSynchronize())) {
      step(cudaMemcpy(out.relu.data(), relu, n * sizeof(float), cudaMemcpyDeviceToHost));
      step(cudaMemcpy(out.nan_max.data(), maxed, n * sizeof(float), cudaMemcpyDeviceToHost));
      step(cudaMemcpy(out.softmax.data(), soft, out.softmax.size() * sizeof(float),
                      cudaMemcpyDeviceToHost));
      step(cudaMemcpy(out.windows.data(), window_out, out.windows.size() * sizeof(long long),
                      cudaMemcpyDeviceToHost));
    }
  }
  for (void* p : {static_cast<void*>(x), static_cast<void*>(relu), static_cast<void*>(maxed),
                  static_cast<void*>(soft_in), static_cast<void*>(soft),
                  static_cast<void*>(windows), static_cast<void*>(window_out)}) {
    if (p != nullptr) step(cudaFree(p));
  }
  return status;
}

}  // namespace cgr::test
