// Roundings of cgr::Precision on the bits of an fp32 value. tf32 and fp16 keep 10 mantissa
// bits, bf16 keeps 7: adding half an ulp of the kept part minus one, plus the lowest kept bit,
// then clearing the dropped bits rounds to nearest with ties to even, and a carry out of the
// mantissa correctly bumps the exponent (up to infinity). fp16 also limits the exponent: below
// 2^-14 its quantum is the fixed 2^-24 (subnormals), above 65504 a value is infinite.
#include "cgr/precision.hpp"

#include <bit>
#include <cmath>

#include "cgr/error.hpp"

namespace cgr {
namespace {

float keep_mantissa_bits(float value, int kept) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7f800000u) == 0x7f800000u) return value;  // infinity or NaN: unchanged
  const int dropped = 23 - kept;
  const std::uint32_t lowest_kept = (bits >> dropped) & 1u;
  const std::uint32_t rounded =
      (bits + ((1u << (dropped - 1)) - 1u) + lowest_kept) & ~((1u << dropped) - 1u);
  return std::bit_cast<float>(rounded);
}

float round_fp16(float value) {
  constexpr float kSmallestNormal = 0x1p-14f;
  constexpr float kLargest = 65504.0f;
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return value;
  if (magnitude < kSmallestNormal) {
    // Multiples of 2^-24; both scalings are exact, nearbyint rounds ties to even.
    return std::copysign(std::nearbyint(magnitude * 0x1p24f) * 0x1p-24f, value);
  }
  const float rounded = keep_mantissa_bits(value, 10);
  return std::fabs(rounded) > kLargest ? std::copysign(INFINITY, value) : rounded;
}

}  // namespace

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::fp16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
  }
  return "?";
}

Precision parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "tf32") return Precision::tf32;
  if (text == "fp16") return Precision::fp16;
  if (text == "bf16") return Precision::bf16;
  fail("unknown precision '{}' (expected fp32, tf32, fp16 or bf16)", text);
}

float round_to(Precision precision, float value) {
  switch (precision) {
    case Precision::fp32:
      return value;
    case Precision::tf32:
      return keep_mantissa_bits(value, 10);
    case Precision::fp16:
      return round_fp16(value);
    case Precision::bf16:
      return keep_mantissa_bits(value, 7);
  }
  return value;
}

void round_in_place(Precision precision, std::span<float> values) {
  switch (precision) {
    case Precision::fp32:
      return;
    case Precision::tf32:
      for (float& v : values)
        v = keep_mantissa_bits(v, 10);
      return;
    case Precision::fp16:
      for (float& v : values)
        v = round_fp16(v);
      return;
    case Precision::bf16:
      for (float& v : values)
        v = keep_mantissa_bits(v, 7);
      return;
  }
}

}  // namespace cgr
