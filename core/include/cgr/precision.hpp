// The arithmetic precision an engine computes in, and the roundings that define it.
//
//   fp32  IEEE single precision everywhere (the reference).
//   tf32  fp32 storage; convolutions and GEMMs may use TF32 tensor cores, whose operands keep
//         10 of fp32's 23 mantissa bits (fp32's exponent range).
//   fp16  values stored as IEEE half (10 mantissa bits, 5 exponent bits: up to 65504, then
//         infinity), computed with fp32 accumulation.
//   bf16  values stored as bfloat16 (7 mantissa bits, fp32's exponent range), fp32 accumulation.
//
// Each rounding is round-to-nearest, ties to even, as the hardware's conversions are; NaN stays
// NaN, infinities stay, a value past the format's largest finite one becomes infinity.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace cgr {

enum class Precision { fp32, tf32, fp16, bf16 };

std::string_view to_string(Precision precision);
// "fp32" | "tf32" | "fp16" | "bf16"; cgr::Error naming the text otherwise.
Precision parse_precision(std::string_view text);

// `value` rounded to the nearest value the precision can store (tf32: hold as an operand).
float round_to(Precision precision, float value);
// Every value of `values` rounded in place; nothing happens for fp32.
void round_in_place(Precision precision, std::span<float> values);

}  // namespace cgr
