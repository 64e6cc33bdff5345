// See lanes.hpp.
#include "cpu/lanes.hpp"

#include <algorithm>

namespace cgr::cpu::lanes {

#if defined(CGR_LANES_X86)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // see transpose16
__attribute__((target("avx512f"))) void planes_to_lanes(const float* in, std::int64_t plane,
                                                        std::int64_t planes,
                                                        const PaddedImage& image, float* padded) {
  const std::int64_t count = image.in_h * image.in_w;
  std::int64_t ih = 0, iw = 0;
  for (std::int64_t i0 = 0; i0 < count; i0 += kLanes) {
    const std::int64_t n = std::min(kLanes, count - i0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 r[16];
    for (std::int64_t c = 0; c < 16; ++c)
      r[c] = c < planes ? _mm512_maskz_loadu_ps(mask, in + c * plane + i0) : _mm512_setzero_ps();
    transpose16(r);
    for (std::int64_t j = 0; j < n; ++j) {
      _mm512_storeu_ps(
          padded + ((ih + image.pad_top) * image.padded_w + iw + image.pad_left) * kLanes, r[j]);
      if (++iw == image.in_w) {
        iw = 0;
        ++ih;
      }
    }
  }
}

__attribute__((target("avx512f"))) void lanes_to_planes(const float* lanes, std::int64_t count,
                                                        std::int64_t planes, float* out,
                                                        std::int64_t plane) {
  for (std::int64_t t0 = 0; t0 < count; t0 += kLanes) {
    const std::int64_t n = std::min(kLanes, count - t0);
    const auto mask = static_cast<__mmask16>((1u << n) - 1u);
    __m512 r[16];
    load_points(lanes, t0, n, r);
    for (std::int64_t c = 0; c < planes; ++c)
      _mm512_mask_storeu_ps(out + c * plane + t0, mask, r[c]);
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace cgr::cpu::lanes
